//! A compiled SPIR-V kernel and what a runtime needs to launch it.

use tilekit_core::gpu::grid::{self, FoldError};
use tilekit_core::ir::Access;
use tilekit_core::{DType, Scalar};

/// Environment variable that lowers the workgroups per grid axis the runtimes dispatch below
/// the device's limit (a positive number), so that smaller grids take the folded path: for
/// tests on CPU drivers and for trying grid folding out (`tilekit run` included).
pub const MAX_WORKGROUPS_ENV: &str = "TILEKIT_MAX_WORKGROUPS_PER_DIM";

/// [`MAX_WORKGROUPS_ENV`] when set to a positive number.
pub fn max_workgroups_from_env() -> Option<u32> {
    std::env::var(MAX_WORKGROUPS_ENV).ok().and_then(|v| v.trim().parse::<u32>().ok()).filter(|&n| n > 0)
}

/// Why a kernel cannot be dispatched over a grid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// A kernel compiled without grid folding, on a grid beyond the device's limit.
    #[error(
        "grid {grid:?}: {extent} programs along axis {axis} exceed the device's {max} workgroups per axis; \
         a kernel compiled with LowerOptions::fold_grid launches such grids (tilekit's devices fold by themselves)"
    )]
    Unfolded { grid: [u32; 3], axis: usize, extent: u32, max: u32 },
    #[error(transparent)]
    Fold(#[from] FoldError),
}

/// Device features a kernel needs; a runtime checks them and names any that is missing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    /// `shaderFloat16` (f16 arithmetic).
    pub float16: bool,
    /// `shaderInt8` / `shaderInt16` / `shaderInt64`.
    pub int8: bool,
    pub int16: bool,
    pub int64: bool,
    /// `storageBuffer8BitAccess` / `storageBuffer16BitAccess`.
    pub storage8: bool,
    pub storage16: bool,
    /// Subgroup shuffles and arithmetic in compute shaders.
    pub subgroup_shuffle: bool,
    pub subgroup_arithmetic: bool,
    /// The subgroup size the kernel was compiled for (its layouts assume it).
    pub subgroup_size: u32,
    /// `VK_EXT_shader_atomic_float` buffer float add.
    pub atomic_float_add: bool,
    /// `shaderBufferInt64Atomics` (atomics on i64 buffers).
    pub int64_atomics: bool,
    /// Workgroup (shared) memory in bytes.
    pub shared_bytes: u32,
    /// f16 rounding to nearest even and f16 subnormals kept, through float controls
    /// (`Target::f16_rte`).
    pub f16_rte: bool,
    /// f32 subnormals kept through float controls (`Target::f32_denorm_preserve`).
    pub denorm_preserve_f32: bool,
    /// `VK_KHR_cooperative_matrix` (`cooperativeMatrix`) and `vulkanMemoryModel`, which its
    /// SPIR-V requires.
    pub cooperative_matrix: bool,
    /// Cooperative matrices of bf16: `VK_KHR_shader_bfloat16`'s `shaderBFloat16Type` and
    /// `shaderBFloat16CooperativeMatrix`.
    pub cooperative_matrix_bf16: bool,
    /// Workgroup-scope matrices with flexible dimensions and tensor addressing
    /// (VK_NV_cooperative_matrix2).
    pub cooperative_matrix2: bool,
}

/// One storage buffer binding (descriptor set 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub binding: u32,
    /// Index of the program parameter it carries.
    pub param: u32,
    pub dtype: DType,
    pub access: Access,
    /// The bound buffer's size must be a whole number of these bytes: 4 (words), or the size
    /// of the vectors a naga module declares the buffer as (16; 8 for f16), whose last one
    /// would otherwise lie partly outside the buffer and be out of the array's bounds.
    pub size_multiple: u32,
}

/// One scalar parameter in the push-constant block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushConstant {
    pub param: u32,
    /// Byte offset in the push-constant block.
    pub offset: u32,
    pub dtype: DType,
}

/// A SPIR-V compute module with one entry point, and its interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpirvKernel {
    pub name: String,
    pub words: Vec<u32>,
    pub entry_point: String,
    /// Threads per program (workgroup size along x; y and z are 1).
    pub threads: u32,
    pub bindings: Vec<Binding>,
    pub push_constants: Vec<PushConstant>,
    /// Size of the push-constant block in bytes (a multiple of 4).
    pub push_constant_size: u32,
    /// For a kernel that folds its grid ([`tilekit_core::gpu::grid`]), the byte offset in the
    /// push-constant block of the logical grid, three u32 after the scalars; `None` for a kernel
    /// whose program ids are its workgroup ids.
    pub grid_fold: Option<u32>,
    pub requirements: Requirements,
}

/// A launch gave scalar arguments that do not match the kernel's scalar parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushConstantError {
    #[error("kernel `{kernel}`: no value for scalar parameter {param} ({dtype})")]
    Missing { kernel: String, param: u32, dtype: DType },
    #[error("kernel `{kernel}`: parameter {param} is not a scalar parameter")]
    NotScalar { kernel: String, param: u32 },
    #[error("kernel `{kernel}`: scalar parameter {param} given twice")]
    Duplicate { kernel: String, param: u32 },
    #[error("kernel `{kernel}`: scalar parameter {param} is {dtype}, the launch passed {value}")]
    Mismatch { kernel: String, param: u32, dtype: DType, value: String },
    #[error("kernel `{kernel}`: its folded grid at byte {offset} lies outside the {size}-byte push-constant block")]
    GridOutside { kernel: String, offset: u32, size: u32 },
}

impl PushConstant {
    /// Bytes a scalar of `dtype` occupies in the push-constant block: 8 for i64 (8-aligned), one
    /// 32-bit slot for every other dtype (narrow integers sign- or zero-extended, f16 and bf16 as
    /// their bits in the low half, i1 as 0 or 1). Narrow types in push constants would need the
    /// `storagePushConstant8/16` features, which many devices lack.
    pub fn slot_bytes(dtype: DType) -> u32 {
        if dtype == DType::I64 {
            8
        } else {
            4
        }
    }

    /// The little-endian bytes of `value` in this slot. The value must fit the dtype as the
    /// interpreter requires ([`Scalar::fits`]); floats round through f32 as the interpreter does.
    pub fn encode(&self, value: Scalar) -> Option<Vec<u8>> {
        if !value.fits(self.dtype) {
            return None;
        }
        let x = value.as_f64();
        let word: u64 = match (self.dtype, value) {
            (DType::I1, Scalar::Bool(b)) => b as u64,
            (DType::I8 | DType::I16 | DType::I32, Scalar::Int(i)) => i as i32 as u32 as u64,
            (DType::U8 | DType::U32, Scalar::Int(i)) => i as u32 as u64,
            (DType::I64, Scalar::Int(i)) => i as u64,
            (DType::F32, _) => (x as f32).to_bits() as u64,
            (DType::F16, _) => half::f16::from_f32(x as f32).to_bits() as u64,
            (DType::BF16, _) => half::bf16::from_f32(x as f32).to_bits() as u64,
            _ => return None,
        };
        Some(word.to_le_bytes()[..Self::slot_bytes(self.dtype) as usize].to_vec())
    }
}

impl SpirvKernel {
    /// The workgroups to dispatch for a launch over `grid` on a device that dispatches at most
    /// `limit` workgroups per axis: the grid itself for a kernel that does not fold its grid,
    /// the folded shape ([`grid::fold_dispatch`]) for one that does.
    pub fn dispatch_shape(&self, grid: [u32; 3], limit: [u32; 3]) -> Result<[u32; 3], DispatchError> {
        if self.grid_fold.is_some() {
            return Ok(grid::fold_dispatch(grid, limit)?);
        }
        match (0..3).find(|&axis| grid[axis] > limit[axis]) {
            Some(axis) => Err(DispatchError::Unfolded { grid, axis, extent: grid[axis], max: limit[axis] }),
            None => Ok(grid),
        }
    }

    /// The push-constant block for a launch over `grid`: [`SpirvKernel::pack_push_constants`],
    /// followed by the grid for a kernel that folds it.
    pub fn pack_launch(&self, scalars: &[(u32, Scalar)], grid: [u32; 3]) -> Result<Vec<u8>, PushConstantError> {
        let mut block = self.pack_push_constants(scalars)?;
        if let Some(offset) = self.grid_fold {
            let bytes: Vec<u8> = grid.iter().flat_map(|g| g.to_le_bytes()).collect();
            match block.get_mut(offset as usize..offset as usize + bytes.len()) {
                Some(dst) => dst.copy_from_slice(&bytes),
                None => return Err(PushConstantError::GridOutside { kernel: self.name.clone(), offset, size: self.push_constant_size }),
            }
        }
        Ok(block)
    }

    /// The push-constant block for a launch, from `(parameter index, value)` pairs covering every
    /// scalar parameter exactly once.
    pub fn pack_push_constants(&self, scalars: &[(u32, Scalar)]) -> Result<Vec<u8>, PushConstantError> {
        let kernel = || self.name.clone();
        let mut seen = std::collections::HashSet::new();
        for &(param, _) in scalars {
            if !self.push_constants.iter().any(|p| p.param == param) {
                return Err(PushConstantError::NotScalar { kernel: kernel(), param });
            }
            if !seen.insert(param) {
                return Err(PushConstantError::Duplicate { kernel: kernel(), param });
            }
        }
        let mut block = vec![0u8; self.push_constant_size as usize];
        for pc in &self.push_constants {
            let Some(&(_, value)) = scalars.iter().find(|(p, _)| *p == pc.param) else {
                return Err(PushConstantError::Missing { kernel: kernel(), param: pc.param, dtype: pc.dtype });
            };
            let bytes = pc.encode(value).ok_or_else(|| PushConstantError::Mismatch {
                kernel: kernel(),
                param: pc.param,
                dtype: pc.dtype,
                value: format!("{value}"),
            })?;
            let start = pc.offset as usize;
            match block.get_mut(start..start + bytes.len()) {
                Some(dst) => dst.copy_from_slice(&bytes),
                None => {
                    return Err(PushConstantError::Mismatch {
                        kernel: kernel(),
                        param: pc.param,
                        dtype: pc.dtype,
                        value: format!("{value} (its slot at byte {start} lies outside the {}-byte block)", block.len()),
                    })
                }
            }
        }
        Ok(block)
    }
}
