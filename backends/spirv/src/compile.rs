//! Tile program -> SPIR-V: the shared GPU lowering driving [`SpirvEmitter`].

use tilekit_core::gpu::lower::{lower_fitting, LowerError, LowerInfo, LowerOptions};
use tilekit_core::gpu::Target;
use tilekit_core::Program;

use crate::emit::{SpirvEmitter, SpirvError};
use crate::kernel::SpirvKernel;

/// A compiled kernel and what the lowering decided for it.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub kernel: SpirvKernel,
    pub info: LowerInfo,
}

/// Why a program did not compile to SPIR-V.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    #[error("lowering `{program}` for {target}: {source}")]
    Lower { program: String, target: String, source: LowerError },
    #[error("emitting SPIR-V for `{program}`: {source}")]
    Emit { program: String, source: SpirvError },
}

/// Lowers `program` for `target` with `options` and emits its SPIR-V module.
pub fn compile(program: &Program, target: &Target, options: &LowerOptions) -> Result<Compiled, CompileError> {
    let threads = options.num_warps.max(1).saturating_mul(target.subgroup_size.max(1));
    let emit_err = |source| CompileError::Emit { program: program.name.clone(), source };
    let (e, info) = lower_fitting(
        program,
        target,
        options,
        || SpirvEmitter::with_grid_fold(program, target, threads, options.fold_grid).map_err(emit_err),
        |source| CompileError::Lower { program: program.name.clone(), target: target.name.clone(), source },
    )?;
    let kernel = e.finish().map_err(emit_err)?;
    Ok(Compiled { kernel, info })
}
