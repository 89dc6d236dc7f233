//! tilekit-llvm: GPU IR -> LLVM IR -> target assembly, shared by the PTX and AMDGCN backends.
//!
//! The shared GPU lowering drives [`LlvmEmitter`] (an [`tilekit_core::gpu::Emitter`]), which
//! writes one kernel as LLVM 19 textual IR; everything that differs between GPU families (ids,
//! barriers, shuffles, address spaces, math functions, the kernel calling convention, the
//! triple) is asked of a [`Hooks`] implementation. [`codegen`] then parses the text with LLVM
//! (through inkwell), links the math library the hooks name, verifies, optimises with
//! the hooks' pipeline (LLVM's `default<O3>`; NVPTX drops its SLP vectorizer and the passes
//! that changed nothing in its PTX) and emits assembly or an object for the hooks' target
//! machine.
//!
//! The emitter writes text rather than calling LLVM's C builder API: the text is the stable
//! interface of LLVM IR across versions, it is what `tilekit ir --llvm` shows and what golden
//! tests compare, and the emitter stays free of LLVM's context lifetimes (an emitted module can
//! be handed to another thread or compiled for several CPUs).

pub use inkwell;

pub mod emit;
pub mod hooks;
pub mod wrap;

use std::time::{Duration, Instant};

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Linkage;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, FileType, Target as LlvmTarget, TargetMachine, TargetTriple};
use tilekit_core::gpu::lower::{lower, LowerError, LowerInfo, LowerOptions};
use tilekit_core::gpu::Target;
use tilekit_core::Program;

pub use emit::{KernelInterface, KernelParam, LlvmEmitter, LlvmValue, Operand};
pub use hooks::{Hooks, MathFn};

/// Why a kernel did not become LLVM IR or assembly.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlvmError {
    #[error("kernel `{kernel}`, parameter `{param}`: {reason}")]
    Param { kernel: String, param: String, reason: String },
    #[error("kernel `{kernel}`: the LLVM backend cannot emit {what}")]
    Unsupported { kernel: String, what: String },
    #[error("kernel `{kernel}`: emitter misuse: {what}")]
    Contract { kernel: String, what: String },
    #[error("kernel `{kernel}` does not fit target `{target}`: {what}")]
    Target { kernel: String, target: String, what: String },
    #[error("lowering `{program}` for {target}: {source}")]
    Lower { program: String, target: String, source: LowerError },
    #[error("kernel `{kernel}`: LLVM {stage}: {message}")]
    Llvm { kernel: String, stage: &'static str, message: String },
}

/// One kernel as LLVM IR, before optimisation.
#[derive(Clone, Debug)]
pub struct Emitted {
    /// The program's name.
    pub kernel: String,
    pub ir: String,
    pub interface: KernelInterface,
    pub info: LowerInfo,
}

/// Sets LLVM command-line options (`-nvptx-short-ptr`, ...) for the whole process. LLVM's
/// options are process-global and read when a target machine is created, so a target's hooks
/// set theirs in [`Hooks::initialize`], once, before the first one. An option LLVM does not
/// know is ignored (LLVM reports it to a null stream).
pub fn set_options(options: &[&str]) {
    let args: Vec<std::ffi::CString> =
        std::iter::once("tilekit").chain(options.iter().copied()).filter_map(|a| std::ffi::CString::new(a).ok()).collect();
    let argv: Vec<*const std::ffi::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    // SAFETY: argv points at NUL-terminated strings that outlive the call; LLVM copies what it
    // keeps.
    unsafe { llvm_sys::support::LLVMParseCommandLineOptions(argv.len() as i32, argv.as_ptr(), c"".as_ptr()) };
}

/// LLVM options every target compiles with, set once per process before the first module.
///
/// `-disable-licm-promotion`: LICM's scalar promotion (a memory location a loop reads and
/// writes, kept in a register across the loop) took half of O3 on attention's 64 x 32 tiles (74
/// of 157 ms under `opt-19 -time-passes` on a 2-core VM; that configuration compiled in 153 ms
/// on the H200 machine against a 150 ms goal) and changes none of the library's 785 PTX modules:
/// what a tile loop carries is SSA values already, and the memory it touches is global or shared
/// memory behind barriers, which promotion cannot keep in registers.
fn common_options() {
    static OPTIONS: std::sync::Once = std::sync::Once::new();
    OPTIONS.call_once(|| set_options(&["-disable-licm-promotion"]));
}

/// Lowers `program` for `target` and writes its LLVM IR with `hooks`.
pub fn emit<H: Hooks>(program: &Program, target: &Target, options: &LowerOptions, hooks: &H) -> Result<Emitted, LlvmError> {
    let threads = options.num_warps.max(1).saturating_mul(target.subgroup_size.max(1));
    let mut e = LlvmEmitter::new(program, target, threads, hooks)?.with_occupancy(options.occupancy);
    let info = lower(program, target, options, &mut e).map_err(|source| LlvmError::Lower {
        program: program.name.clone(),
        target: target.name.clone(),
        source,
    })?;
    // Every map the lowering planned is a parameter, used or not: the runtime passes them all.
    e.declare_tensor_maps(info.tensor_maps.len() as u32);
    let (ir, interface) = e.finish()?;
    Ok(Emitted { kernel: program.name.clone(), ir, interface, info })
}

/// What the target machine produced, and how long each stage took.
#[derive(Clone, Debug)]
pub struct Codegen {
    /// Assembly text (PTX) or object bytes.
    pub bytes: Vec<u8>,
    /// The optimised module, when asked for.
    pub optimized_ir: Option<String>,
    /// Parsing, linking and verifying; the O3 pipeline; instruction selection and emission.
    pub parse_time: Duration,
    pub opt_time: Duration,
    pub codegen_time: Duration,
}

/// Parses the module `ir` (as [`LlvmEmitter::finish`] wrote it, with `interface`), links the
/// math library, verifies, runs the hooks' pipeline (`default<O3>` unless they say otherwise)
/// and emits `file_type` for the hooks' target machine.
pub fn codegen<H: Hooks>(ir: &str, interface: &KernelInterface, hooks: &H, file_type: FileType, keep_ir: bool) -> Result<Codegen, LlvmError> {
    let kernel = interface.entry.clone();
    let err = |stage: &'static str, message: String| LlvmError::Llvm { kernel: kernel.clone(), stage, message };
    let t0 = Instant::now();
    common_options();
    hooks.initialize();
    let triple = TargetTriple::create(hooks.triple());
    let target = LlvmTarget::from_triple(&triple).map_err(|e| err("target", e.to_string()))?;
    let tm: TargetMachine = target
        .create_target_machine(&triple, hooks.cpu(), hooks.features(), hooks.codegen_level(), hooks.reloc_mode(), CodeModel::Default)
        .ok_or_else(|| err("target machine", format!("cannot create one for {} / {} / {}", hooks.triple(), hooks.cpu(), hooks.features())))?;
    let context = Context::create();
    let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), &interface.entry);
    let module = context.create_module_from_ir(buffer).map_err(|e| err("parse", e.to_string()))?;
    module.set_triple(&triple);
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    if !interface.externals.is_empty() {
        hooks.link_externals(&context, &module, &interface.externals).map_err(|e| err("link", e))?;
        // Only the kernel is an entry point: everything linked in becomes internal, so the
        // optimiser inlines what is used and drops the rest.
        let mut f = module.get_first_function();
        while let Some(func) = f {
            if func.count_basic_blocks() > 0 && func.get_name().to_bytes() != interface.entry.as_bytes() {
                func.set_linkage(Linkage::Internal);
            }
            f = func.get_next_function();
        }
        let mut g = module.get_first_global();
        while let Some(gv) = g {
            if gv.get_linkage() != Linkage::Internal && gv.get_initializer().is_some() {
                gv.set_linkage(Linkage::Internal);
            }
            g = gv.get_next_global();
        }
    }
    module.verify().map_err(|e| err("verify", e.to_string()))?;
    let t1 = Instant::now();
    module.run_passes(hooks.pipeline(), &tm, PassBuilderOptions::create()).map_err(|e| err("optimise", e.to_string()))?;
    if wrap::rewrite(&context, &module, hooks) > 0 {
        module.verify().map_err(|e| err("verify after wrapping abs and negation", e.to_string()))?;
    }
    let t2 = Instant::now();
    let optimized_ir = keep_ir.then(|| module.print_to_string().to_string());
    let out = tm.write_to_memory_buffer(&module, file_type).map_err(|e| err("codegen", e.to_string()))?;
    let t3 = Instant::now();
    Ok(Codegen { bytes: out.as_slice().to_vec(), optimized_ir, parse_time: t1 - t0, opt_time: t2 - t1, codegen_time: t3 - t2 })
}
