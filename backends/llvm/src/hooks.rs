//! What a target family supplies to the shared LLVM emission: its triple and CPU, its kernel
//! calling convention and address spaces, how to read thread and program ids, how to
//! synchronise and shuffle, which functions implement the math, and how to link them.

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::RelocMode;
use inkwell::OptimizationLevel;

use tilekit_core::gpu::MatrixInstr;

use crate::emit::{Builder, Operand};

/// The f32 functions a kernel may call, beyond what LLVM intrinsics express exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MathFn {
    Exp,
    Exp2,
    Log,
    Log2,
    Rsqrt,
    Sin,
    Cos,
    Tanh,
    Erf,
    /// `fmod(x, y)`, two arguments.
    Fmod,
}

/// A target family (NVPTX, AMDGPU) for [`crate::LlvmEmitter`] and [`crate::codegen`].
///
/// Ids are i32 values; `warp` is the target's subgroup size (32 on NVIDIA, 32 or 64 on AMD): a
/// hook never assumes one.
pub trait Hooks {
    /// LLVM target triple (`nvptx64-nvidia-cuda`).
    fn triple(&self) -> &str;
    /// LLVM CPU (`sm_90`, `gfx942`).
    fn cpu(&self) -> &str;
    /// LLVM target features (`+ptx80`).
    fn features(&self) -> &str;
    /// The calling convention keyword of a kernel entry point in LLVM IR (`ptx_kernel`).
    fn kernel_calling_convention(&self) -> &str;
    /// Address space of global memory (buffers).
    fn global_addrspace(&self) -> u32 {
        1
    }
    /// Address space of shared memory.
    fn shared_addrspace(&self) -> u32 {
        3
    }
    /// Shared memory above this many bytes is declared dynamic (one external array whose size
    /// the runtime gives at launch): CUDA allows static shared memory up to 48 KiB and more
    /// only to kernels that opt in. `None`: always static.
    fn static_shared_limit(&self) -> Option<u64> {
        None
    }
    /// Alignment the runtime guarantees for every buffer's first element.
    fn buffer_align(&self) -> u32 {
        16
    }
    /// The `syncscope` of device-wide atomics, `None` for LLVM's default (system) scope.
    fn device_scope(&self) -> Option<&str> {
        None
    }
    /// Relocation model of the target machine.
    fn reloc_mode(&self) -> RelocMode {
        RelocMode::Default
    }
    /// Whether the target rounds f32 to bf16 in hardware, so that `fptrunc` to LLVM's
    /// `bfloat` compiles to one instruction where the integer emulation takes nine (widening
    /// stays a shift everywhere: see `widen_to_f32`). A NaN then becomes the target's
    /// canonical NaN rather than keeping its payload, which no comparison of results sees.
    fn native_bf16(&self) -> bool {
        false
    }

    /// This thread's index within its program (threads are numbered along x only).
    fn thread_index(&self, b: &mut Builder<'_>) -> Operand;
    fn program_id(&self, b: &mut Builder<'_>, axis: u32) -> Operand;
    fn num_programs(&self, b: &mut Builder<'_>, axis: u32) -> Operand;
    /// A barrier over the program's threads that also orders shared-memory accesses.
    fn barrier(&self, b: &mut Builder<'_>);
    /// The i32 `value` of lane `lane ^ mask` in a warp of `warp` lanes (every lane active).
    fn shuffle_xor_i32(&self, b: &mut Builder<'_>, value: Operand, mask: u32, warp: u32) -> Operand;
    /// `x` (a float) rounded to tf32, its f32 bits as an i32
    /// ([`tilekit_core::gpu::Emitter::round_tf32`]); `None` where the target has no instruction.
    fn round_tf32(&self, b: &mut Builder<'_>, x: Operand) -> Option<Operand> {
        let _ = (b, x);
        None
    }
    /// One warp-level matrix instruction `d = a x b + c` ([`tilekit_core::gpu::Emitter::mma`])
    /// on operands packed as the instruction takes them: `a` and `b` as 32-bit words of two
    /// 16-bit elements (low half first), or of one tf32 element (its f32 bits) where
    /// `instr.a` is f32, `c` as f32; returns the f32 results. `None` when the target has no
    /// such instruction.
    fn mma(&self, b: &mut Builder<'_>, instr: &MatrixInstr, a: &[Operand], bw: &[Operand], c: &[Operand]) -> Option<Vec<Operand>> {
        let _ = (b, instr, a, bw, c);
        None
    }
    /// One warpgroup matrix instruction ([`tilekit_core::gpu::Emitter::wgmma`]) of `n`
    /// columns: `a` as four 32-bit words of two 16-bit elements or a shared-memory descriptor
    /// (an i64), `b` as a descriptor, `trans_b` when `b` is stored N-contiguous; `c` as f32.
    /// Returns the f32 results (readable after [`Hooks::wgmma_wait`]). `None` when the target
    /// has no such instruction.
    #[allow(clippy::too_many_arguments)]
    fn wgmma(
        &self,
        b: &mut Builder<'_>,
        instr: &MatrixInstr,
        n: u32,
        a: WgmmaOperand<'_>,
        b_desc: Operand,
        trans_b: bool,
        c: &[Operand],
    ) -> Option<Vec<Operand>> {
        let _ = (b, instr, n, a, b_desc, trans_b, c);
        None
    }
    /// `wgmma.fence` ([`tilekit_core::gpu::Emitter::wgmma_fence`]).
    fn wgmma_fence(&self, b: &mut Builder<'_>) {
        let _ = b;
    }
    /// Commits the warpgroup matrix instructions issued and waits until at most `pending`
    /// groups are incomplete; returns the f32 `values` (results of completed ones) as the wait
    /// defines them, so nothing reads them earlier.
    fn wgmma_wait(&self, b: &mut Builder<'_>, pending: u32, values: &[Operand]) -> Vec<Operand> {
        let _ = (b, pending);
        values.to_vec()
    }
    /// `fence.proxy.async.shared::cta` ([`tilekit_core::gpu::Emitter::fence_async_shared`]).
    fn fence_async_shared(&self, b: &mut Builder<'_>) {
        let _ = b;
    }
    /// `ldmatrix` ([`tilekit_core::gpu::Emitter::load_shared_matrix`]): `count` 8 x 8 matrices
    /// of 16-bit elements, this lane naming one row at the shared-memory address `addr` (an i32
    /// in the shared address space); returns one 32-bit word per matrix (two elements, the
    /// first in the low half). `None` when the target has no such load.
    fn load_shared_matrix(&self, b: &mut Builder<'_>, addr: Operand, count: u32, trans: bool) -> Option<Vec<Operand>> {
        let _ = (b, addr, count, trans);
        None
    }
    /// Whether the target has asynchronous global-to-shared copies ([`Hooks::async_copy`]).
    fn async_copies(&self) -> bool {
        false
    }
    /// `cp.async` of 16 bytes from the global address `src` (an i64) to the shared address
    /// `dst` (an i32) where `copy` (an i1) holds; zeros where it does not, with `src` not read.
    fn async_copy(&self, b: &mut Builder<'_>, dst: Operand, src: Operand, copy: Operand) {
        let _ = (b, dst, src, copy);
    }
    /// Closes the group of asynchronous copies started since the last commit.
    fn async_commit(&self, b: &mut Builder<'_>) {
        let _ = b;
    }
    /// Waits until at most `pending` groups of this thread's copies are incomplete.
    fn async_wait(&self, b: &mut Builder<'_>, pending: u32) {
        let _ = (b, pending);
    }
    /// Whether the target copies tensor boxes ([`tilekit_core::gpu::Emitter::tensor_copies`]):
    /// the methods below, each on i32 shared addresses, are then implemented.
    fn tensor_copies(&self) -> bool {
        false
    }
    /// `mbarrier.init` for one arrival at the shared address `bar`.
    fn mbarrier_init(&self, b: &mut Builder<'_>, bar: Operand) {
        let _ = (b, bar);
    }
    /// Orders barrier initializations before their use by the asynchronous proxy.
    fn mbarrier_init_fence(&self, b: &mut Builder<'_>) {
        let _ = b;
    }
    fn mbarrier_invalidate(&self, b: &mut Builder<'_>, bar: Operand) {
        let _ = (b, bar);
    }
    /// Arrives and expects `bytes` of transactions on the barrier's phase.
    fn mbarrier_expect(&self, b: &mut Builder<'_>, bar: Operand, bytes: u32) {
        let _ = (b, bar, bytes);
    }
    /// Waits until the phase of parity `parity` (i32) completes.
    fn mbarrier_wait(&self, b: &mut Builder<'_>, bar: Operand, parity: Operand) {
        let _ = (b, bar, parity);
    }
    /// Copies the box at (`coords`) of the tensor map at generic address `map` (an i64) to
    /// shared address `dst`, completing on barrier `bar`.
    fn tensor_copy(&self, b: &mut Builder<'_>, map: Operand, dst: Operand, coords: [Operand; 2], bar: Operand) {
        let _ = (b, map, dst, coords, bar);
    }
    /// `abs` of the signed integer `x` of LLVM type `ty` (`i8` .. `i64`), or with `neg` its
    /// negation, wrapping at the most negative value as the IR says, where the target's own
    /// instruction cannot be trusted with that value. `None`: `llvm.abs` and `sub 0, x`.
    fn wrapping_abs_neg(&self, b: &mut Builder<'_>, neg: bool, ty: &str, x: Operand) -> Option<Operand> {
        let _ = (b, neg, ty, x);
        None
    }
    /// Inline assembly (`$0` the result, `$1` the operand, registers of `reg_bits`) for a
    /// wrapping `abs`, or with `neg` negation, of `bits`-bit integers (sign-extended into the
    /// register when narrower), where the target's own instruction cannot be trusted with the
    /// most negative value. Used on what the optimiser formed from user code
    /// ([`crate::wrap::rewrite`]). `None`: the target's instructions are right.
    fn wrapping_abs_neg_asm(&self, neg: bool, reg_bits: u32, bits: u32) -> Option<&'static str> {
        let _ = (neg, reg_bits, bits);
        None
    }
    /// The function implementing `f` on f32: an `llvm.*` intrinsic or an external symbol that
    /// [`Hooks::link_externals`] provides.
    fn math(&self, f: MathFn) -> &'static str;
    /// Whether `sin` and `cos` are tilekit's own sequence ([`tilekit_core::gpu::math::sin_cos`])
    /// rather than [`Hooks::math`]'s functions: for targets whose functions lose accuracy on
    /// large arguments.
    fn own_sin_cos(&self) -> bool {
        false
    }
    /// Whether `tanh` and `erf` are tilekit's own sequences ([`tilekit_core::gpu::math::tanh`],
    /// [`tilekit_core::gpu::math::erf`], which SPIR-V uses too) rather than [`Hooks::math`]'s:
    /// for targets without a math library of their own.
    fn own_tanh_erf(&self) -> bool {
        false
    }

    /// How many iterations of a `dot`'s k loop one trip may run after unrolling (1: not
    /// unrolled), written as loop metadata; `None` leaves it to LLVM's unroller.
    fn dot_loop_unroll(&self) -> Option<u32> {
        None
    }

    /// The code generator's optimisation level (the IR pipeline is [`Hooks::pipeline`]).
    fn codegen_level(&self) -> OptimizationLevel {
        OptimizationLevel::Aggressive
    }

    /// The optimisation pipeline, in `opt -passes` syntax.
    fn pipeline(&self) -> &str {
        "default<O3>"
    }

    /// Attributes of the kernel function (`"amdgpu-flat-work-group-size"="1,256"`), or empty.
    fn function_attributes(&self, threads: u32) -> String {
        let _ = threads;
        String::new()
    }
    /// Module-level metadata text (`!nvvm.annotations`), or empty.
    fn module_metadata(&self, entry: &str, threads: u32, occupancy: u32, grid_constants: &[u32]) -> String {
        let _ = (entry, threads, occupancy, grid_constants);
        String::new()
    }

    /// Registers the LLVM target (once per process is enough; repeating is harmless).
    fn initialize(&self);
    /// Links the definitions of the external functions `names` into `module`.
    fn link_externals<'ctx>(&self, context: &'ctx Context, module: &Module<'ctx>, names: &[String]) -> Result<(), String>;
}

/// The `a` operand of [`Hooks::wgmma`].
#[derive(Clone, Copy, Debug)]
pub enum WgmmaOperand<'a> {
    /// Four i32 words, two 16-bit elements each.
    Words(&'a [Operand]),
    /// A shared-memory matrix descriptor, an i64.
    Descriptor(Operand),
}
