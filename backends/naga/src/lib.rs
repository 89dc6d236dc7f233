//! tilekit-naga: GPU IR -> `naga::Module`, the shader IR every wgpu backend consumes.
//!
//! [`compile`] lowers a tile program with the shared lowering and builds a naga module through
//! [`NagaEmitter`]; the module is validated by naga with the capabilities it uses. From it naga's
//! own back ends write WGSL, MSL, HLSL and SPIR-V ([`NagaKernel::wgsl`] and the others), and a
//! wgpu runtime creates its shader module straight from it, on whatever backend wgpu runs.
//!
//! The module's interface is the SPIR-V kernel's ([`NagaKernel::interface`]): storage buffers in
//! bind group 0 and scalars as immediates, so one launch path serves both.
//!
//! A naga module cannot ask the driver for float controls or a subgroup size: [`target_for`]
//! turns a device's target into what this backend can honour (reductions through shared memory,
//! f32 subnormals possibly flushed). naga has no 8-bit, 16-bit integer or bf16 types; the emitter
//! holds them in 32-bit registers and packs them into u32 words in memory. The little it cannot
//! express is refused with [`NagaError::Unsupported`], naming the operation and what is missing.

pub mod emit;

pub use emit::{NagaEmitter, NagaError, NagaValue};

use tilekit_core::gpu::lower::{lower, LowerError, LowerInfo, LowerOptions};
use tilekit_core::gpu::{SubgroupOps, Target};
use tilekit_core::Program;
use tilekit_spirv::SpirvKernel;

/// A naga module with one compute entry point, `main`, and its interface.
#[derive(Clone, Debug)]
pub struct NagaKernel {
    pub module: naga::Module,
    /// naga's validation result, which its back ends need.
    pub info: naga::valid::ModuleInfo,
    /// The capabilities the module was validated with (what the device must offer).
    pub capabilities: naga::valid::Capabilities,
    /// The launch interface, the SPIR-V kernel's with no words: runtimes pack scalars, check
    /// buffers and dispatch grids for both kinds of module with the same code.
    pub interface: SpirvKernel,
}

/// A program compiled through naga and what the lowering decided for it.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub kernel: NagaKernel,
    pub info: LowerInfo,
}

/// Why a program did not compile through naga.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    #[error("lowering `{program}` for {target}: {source}")]
    Lower { program: String, target: String, source: LowerError },
    #[error(transparent)]
    Emit(#[from] NagaError),
}

/// Which text a naga back end writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Wgsl,
    Msl,
    Hlsl,
}

impl Language {
    pub fn name(self) -> &'static str {
        match self {
            Language::Wgsl => "WGSL",
            Language::Msl => "MSL",
            Language::Hlsl => "HLSL",
        }
    }
}

/// The target the naga backend compiles for on a device whose own target is `device`: lane
/// shuffles only with `shuffles` (wgpu's `SUBGROUP` feature on a device whose subgroups have one
/// size; without them reductions go through shared memory, which every wgpu backend has), no
/// float controls (f32 subnormals may be flushed, f16 conversions round as the driver rounds),
/// no matrix instructions; 8- and 16-bit integers and bf16 are emulated on 32-bit registers and
/// packed words, so every dtype is there.
pub fn target_for(device: &Target, shuffles: bool) -> Target {
    Target {
        name: format!("{}+naga", device.name),
        subgroup_ops: SubgroupOps { shuffle: shuffles && device.subgroup_ops.shuffle, arithmetic: false },
        bf16: false,
        i16: true,
        i8: true,
        ieee_preserve: false,
        f16_rte: false,
        f32_denorm_preserve: false,
        matrix: Vec::new(),
        ..device.clone()
    }
}

/// Lowers `program` for `target` (see [`target_for`]) and builds its naga module.
///
/// A buffer that the lowering reads or writes a whole vector at a time (four 32-bit elements,
/// 16 bytes) is declared as an array of 4-vectors, so that such an access is one load or store
/// as on the SPIR-V path: naga has no second, vector view of a binding. Which buffers qualify
/// is known only once the lowering has run (and one with atomics or stores of single packed
/// elements does not), so such a program is lowered twice, the second time for those
/// declarations. Its bindings then need a whole number of vectors ([`tilekit_spirv::Binding`]'s
/// `size_multiple`), except those `options.element_bindings` names, which stay element arrays.
pub fn compile(program: &Program, target: &Target, options: &LowerOptions) -> Result<Compiled, CompileError> {
    let threads = options.num_warps.max(1).saturating_mul(target.subgroup_size.max(1));
    let build = |vectors: &[bool]| -> Result<(NagaEmitter, LowerInfo), CompileError> {
        let mut e = NagaEmitter::new(program, target, threads, options.fold_grid, vectors)?;
        let info = lower(program, target, options, &mut e).map_err(|source| CompileError::Lower {
            program: program.name.clone(),
            target: target.name.clone(),
            source,
        })?;
        Ok((e, info))
    };
    let (mut e, mut info) = build(&[])?;
    // A binding the launch gives a buffer of a size that is not a whole number of vectors
    // stays declared by elements (LowerOptions::element_bindings): its vector accesses become
    // element accesses there.
    let mut vectors = e.vector_views();
    let buffers = program.params.iter().enumerate().filter(|(_, p)| matches!(p.kind, tilekit_core::ir::ParamKind::Buffer { .. }));
    for (b, (i, _)) in buffers.enumerate() {
        if b < 64 && options.element_bindings >> b & 1 == 1 {
            if let Some(v) = vectors.get_mut(i) {
                *v = false;
            }
        }
    }
    if vectors.contains(&true) {
        (e, info) = build(&vectors)?;
    }
    let kernel = e.finish()?;
    Ok(Compiled { kernel, info })
}

impl NagaKernel {
    fn write_error(&self, language: &str, e: impl std::fmt::Display) -> NagaError {
        NagaError::Unsupported { kernel: self.interface.name.clone(), what: format!("writing {language}"), why: e.to_string() }
    }

    /// The module as WGSL (naga's writer; immediates appear as naga's `var<immediate>`).
    pub fn wgsl(&self) -> Result<String, NagaError> {
        naga::back::wgsl::write_string(&self.module, &self.info, naga::back::wgsl::WriterFlags::empty()).map_err(|e| self.write_error("WGSL", e))
    }

    /// The module as Metal Shading Language 2.4 (buffers bound by naga's default mapping).
    pub fn msl(&self) -> Result<String, NagaError> {
        let options = naga::back::msl::Options { lang_version: (2, 4), fake_missing_bindings: true, ..Default::default() };
        naga::back::msl::write_string(&self.module, &self.info, &options, &naga::back::msl::PipelineOptions::default())
            .map(|(text, _)| text)
            .map_err(|e| self.write_error("MSL", e))
    }

    /// The module as HLSL for shader model 6.0, the scalars as root constants in register b0
    /// of space 1 (wgpu's DX12 backend picks its own slots when it compiles the module).
    pub fn hlsl(&self) -> Result<String, NagaError> {
        let immediates = naga::back::hlsl::BindTarget {
            space: 1,
            register: 0,
            binding_array_size: None,
            dynamic_storage_buffer_offsets_index: None,
            restrict_indexing: false,
        };
        let options = naga::back::hlsl::Options {
            shader_model: naga::back::hlsl::ShaderModel::V6_0,
            immediates_target: Some(immediates),
            ..Default::default()
        };
        let pipeline = naga::back::hlsl::PipelineOptions { entry_point: None };
        let mut text = String::new();
        naga::back::hlsl::Writer::new(&mut text, &options, &pipeline)
            .write(&self.module, &self.info, None)
            .map_err(|e| self.write_error("HLSL", e))?;
        Ok(text)
    }

    /// The module in `language`.
    pub fn text(&self, language: Language) -> Result<String, NagaError> {
        match language {
            Language::Wgsl => self.wgsl(),
            Language::Msl => self.msl(),
            Language::Hlsl => self.hlsl(),
        }
    }

    /// The module as SPIR-V words through naga's SPIR-V writer (what wgpu's Vulkan backend
    /// hands the driver, less wgpu's own bounds-check policy), for spirv-val.
    pub fn spirv(&self) -> Result<Vec<u32>, NagaError> {
        let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
        naga::back::spv::write_vec(&self.module, &self.info, &options, None).map_err(|e| self.write_error("SPIR-V", e))
    }
}
