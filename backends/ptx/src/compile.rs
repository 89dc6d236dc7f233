//! Tile program -> PTX: the shared GPU lowering writing LLVM IR through the NVPTX hooks, then
//! LLVM's O3 pipeline and the NVPTX code generator; optionally assembled by ptxas.

use std::time::Duration;

use tilekit_core::gpu::lower::{LowerInfo, LowerOptions};
use tilekit_core::gpu::tma::TensorMap;
use tilekit_core::gpu::Target;
use tilekit_core::Program;
use tilekit_llvm::inkwell::targets::FileType;
use tilekit_llvm::{KernelParam, LlvmError};

use crate::nvptx::{Arch, NvptxHooks};
use crate::ptxas::{self, PtxasError, PtxasReport};

/// A kernel as PTX, with what a runtime needs to launch it.
#[derive(Clone, Debug)]
pub struct PtxKernel {
    /// The program's name.
    pub name: String,
    /// The entry point's symbol in the PTX.
    pub entry: String,
    pub arch: Arch,
    pub ptx: String,
    /// Threads per program (block).
    pub threads: u32,
    /// Parameters in program order.
    pub params: Vec<KernelParam>,
    /// The program's parameter names, in the same order (for messages).
    pub param_names: Vec<String>,
    /// Shared memory, bytes.
    pub shared_bytes: u32,
    /// Of `shared_bytes`, those declared dynamic (above 48 KiB): the launch asks for them and
    /// opts the function in to more than 48 KiB.
    pub dynamic_shared_bytes: u32,
    /// ptxas's report, when the kernel was assembled.
    pub resources: Option<PtxasReport>,
    /// Tensor maps the launch encodes from its arguments and passes after the program's
    /// parameters, in order.
    pub tensor_maps: Vec<TensorMap>,
}

/// A compiled kernel, what the lowering decided for it, and the time each stage took.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub kernel: PtxKernel,
    pub info: LowerInfo,
    /// The unoptimised LLVM IR the emitter wrote.
    pub llvm_ir: String,
    /// Lowering and emission of LLVM IR; parsing and linking; O3; PTX emission.
    pub times: [Duration; 4],
}

/// Why a program did not compile to PTX.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PtxError {
    #[error(transparent)]
    Llvm(#[from] LlvmError),
    #[error("kernel `{kernel}`: the NVPTX code generator wrote text that is not UTF-8")]
    NotText { kernel: String },
    #[error("kernel `{kernel}`: {source}")]
    Ptxas { kernel: String, source: PtxasError },
}

/// The LLVM IR this backend writes for `program` on `arch`, before LLVM optimises it.
pub fn llvm_ir(program: &Program, target: &Target, options: &LowerOptions, arch: Arch) -> Result<String, PtxError> {
    Ok(tilekit_llvm::emit(program, target, options, &NvptxHooks { arch })?.ir)
}

/// Lowers `program` for `target` and emits PTX for `arch`.
pub fn compile(program: &Program, target: &Target, options: &LowerOptions, arch: Arch) -> Result<Compiled, PtxError> {
    let hooks = NvptxHooks { arch };
    let t0 = std::time::Instant::now();
    let emitted = tilekit_llvm::emit(program, target, options, &hooks)?;
    let t_emit = t0.elapsed();
    let cg = tilekit_llvm::codegen(&emitted.ir, &emitted.interface, &hooks, FileType::Assembly, false)?;
    let ptx = String::from_utf8(cg.bytes).map_err(|_| PtxError::NotText { kernel: program.name.clone() })?;
    let i = emitted.interface;
    Ok(Compiled {
        kernel: PtxKernel {
            name: program.name.clone(),
            entry: i.entry,
            arch,
            ptx,
            threads: i.threads,
            params: i.params,
            param_names: program.params.iter().map(|p| p.name.clone()).collect(),
            shared_bytes: i.shared_bytes,
            dynamic_shared_bytes: i.dynamic_shared_bytes,
            resources: None,
            tensor_maps: emitted.info.tensor_maps.clone(),
        },
        info: emitted.info,
        llvm_ir: emitted.ir,
        times: [t_emit, cg.parse_time, cg.opt_time, cg.codegen_time],
    })
}

impl PtxKernel {
    /// Assembles the PTX with ptxas for the kernel's architecture and keeps the report.
    pub fn assemble(&mut self) -> Result<&PtxasReport, PtxError> {
        let r = ptxas::assemble(&self.ptx, &self.entry, self.arch).map_err(|source| PtxError::Ptxas { kernel: self.name.clone(), source })?;
        Ok(self.resources.insert(r))
    }
}

/// The architecture a PTX target implies: sm_90a where it lists warpgroup matrix
/// instructions, sm_80 where its name says so, else sm_90.
pub fn arch_of(target: &Target) -> Arch {
    if target.matrix.iter().any(|m| m.kind == tilekit_core::gpu::MatrixKind::Wgmma) {
        Arch::Sm90a
    } else if target.name.contains("sm_80") {
        Arch::Sm80
    } else {
        Arch::Sm90
    }
}
