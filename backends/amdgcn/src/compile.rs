//! Tile program -> AMDGCN code object: the shared GPU lowering writing LLVM IR through the
//! AMDGPU hooks, LLVM's O3 pipeline and AMDGPU code generator to an object, `ld.lld -shared` to
//! an `.hsaco`, and its metadata read back.

use std::time::{Duration, Instant};

use tilekit_core::gpu::lower::{LowerInfo, LowerOptions};
use tilekit_core::gpu::Target;
use tilekit_core::Program;
use tilekit_llvm::inkwell::targets::FileType;
use tilekit_llvm::{KernelInterface, KernelParam, LlvmError};

use crate::amdgpu::{AmdgpuHooks, Arch};
use crate::metadata::{self, CodeObjectReport, MetadataError};
use crate::tools::{self, ToolError};

/// A kernel as an HSA code object (compiled, not run: there is no AMD runtime here).
#[derive(Clone, Debug)]
pub struct AmdgcnKernel {
    /// The program's name.
    pub name: String,
    /// The entry point's symbol (its kernel descriptor is `ENTRY.kd`).
    pub entry: String,
    pub arch: Arch,
    /// The linked code object (ELF shared object, code object v5).
    pub hsaco: Vec<u8>,
    /// Threads per program (workgroup).
    pub threads: u32,
    /// Parameters in program order.
    pub params: Vec<KernelParam>,
    /// Static LDS the emitter reserved, bytes.
    pub shared_bytes: u32,
    /// The code object's metadata and the occupancy estimate.
    pub resources: CodeObjectReport,
}

/// A compiled kernel, what the lowering decided for it, and the time each stage took.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub kernel: AmdgcnKernel,
    pub info: LowerInfo,
    /// The unoptimised LLVM IR the emitter wrote.
    pub llvm_ir: String,
    /// Lowering and emission of LLVM IR; parsing and linking; O3; code generation; `ld.lld`.
    pub times: [Duration; 5],
}

/// Why a program did not become an AMDGCN code object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AmdgcnError {
    #[error(transparent)]
    Llvm(#[from] LlvmError),
    #[error("kernel `{kernel}` for {arch}: target `{target}` has waves of {warp} lanes, the architecture {wave}")]
    WaveSize { kernel: String, arch: Arch, target: String, warp: u32, wave: u32 },
    #[error("kernel `{kernel}` for {arch}: {source}")]
    Tool { kernel: String, arch: Arch, source: ToolError },
    #[error("kernel `{kernel}` for {arch}: reading the code object: {source}")]
    Metadata { kernel: String, arch: Arch, source: MetadataError },
    #[error("kernel `{kernel}` for {arch}: the AMDGPU code generator wrote assembly that is not UTF-8")]
    NotText { kernel: String, arch: Arch },
}

fn check_wave(program: &Program, target: &Target, arch: Arch) -> Result<(), AmdgcnError> {
    // The layouts are built for `target.subgroup_size` lanes; a code object with another wave
    // size would shuffle across the wrong lanes.
    if target.subgroup_size != arch.wave_size() {
        return Err(AmdgcnError::WaveSize {
            kernel: program.name.clone(),
            arch,
            target: target.name.clone(),
            warp: target.subgroup_size,
            wave: arch.wave_size(),
        });
    }
    Ok(())
}

/// Lowers `program` for `target` (its subgroup size must be `arch`'s wave size; see
/// [`Arch::target`]) and builds a code object for `arch`.
pub fn compile(program: &Program, target: &Target, options: &LowerOptions, arch: Arch) -> Result<Compiled, AmdgcnError> {
    check_wave(program, target, arch)?;
    let hooks = AmdgpuHooks { arch };
    let t0 = Instant::now();
    let emitted = tilekit_llvm::emit(program, target, options, &hooks)?;
    let t_emit = t0.elapsed();
    let cg = tilekit_llvm::codegen(&emitted.ir, &emitted.interface, &hooks, FileType::Object, false)?;
    let t1 = Instant::now();
    let kernel = program.name.clone();
    let hsaco = tools::link(&cg.bytes, &emitted.interface.entry).map_err(|source| AmdgcnError::Tool { kernel: kernel.clone(), arch, source })?;
    let t_link = t1.elapsed();
    let resources = metadata::read(&hsaco, &emitted.interface.entry, arch).map_err(|source| AmdgcnError::Metadata { kernel, arch, source })?;
    let KernelInterface { entry, threads, params, shared_bytes, .. } = emitted.interface;
    Ok(Compiled {
        kernel: AmdgcnKernel { name: program.name.clone(), entry, arch, hsaco, threads, params, shared_bytes, resources },
        info: emitted.info,
        llvm_ir: emitted.ir,
        times: [t_emit, cg.parse_time, cg.opt_time, cg.codegen_time, t_link],
    })
}

/// The AMDGCN assembly of `program` for `arch` (what `tilekit ir --amdgcn` prints), including
/// the kernel descriptor directives and the metadata the assembler would put in the note.
/// The LLVM IR this backend writes for `program` on `arch`, before LLVM optimises it.
pub fn llvm_ir(program: &Program, target: &Target, options: &LowerOptions, arch: Arch) -> Result<String, AmdgcnError> {
    check_wave(program, target, arch)?;
    Ok(tilekit_llvm::emit(program, target, options, &AmdgpuHooks { arch })?.ir)
}

pub fn assembly(program: &Program, target: &Target, options: &LowerOptions, arch: Arch) -> Result<String, AmdgcnError> {
    check_wave(program, target, arch)?;
    let hooks = AmdgpuHooks { arch };
    let emitted = tilekit_llvm::emit(program, target, options, &hooks)?;
    let cg = tilekit_llvm::codegen(&emitted.ir, &emitted.interface, &hooks, FileType::Assembly, false)?;
    String::from_utf8(cg.bytes).map_err(|_| AmdgcnError::NotText { kernel: program.name.clone(), arch })
}

impl AmdgcnKernel {
    /// `llvm-objdump -d --mcpu=ARCH` of the code object.
    pub fn disassemble(&self) -> Result<String, AmdgcnError> {
        tools::disassemble(&self.hsaco, self.arch.name(), &self.entry).map_err(|source| AmdgcnError::Tool {
            kernel: self.name.clone(),
            arch: self.arch,
            source,
        })
    }
}
