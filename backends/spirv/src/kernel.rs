//! A compiled SPIR-V kernel and what a runtime needs to launch it.

use tilekit_core::ir::Access;
use tilekit_core::{DType, Scalar};

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
}

/// One storage buffer binding (descriptor set 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub binding: u32,
    /// Index of the program parameter it carries.
    pub param: u32,
    pub dtype: DType,
    pub access: Access,
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
