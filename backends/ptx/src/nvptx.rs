//! The NVPTX hooks of the LLVM layer: special registers for ids, `bar.sync`, `shfl.sync.bfly`,
//! libdevice for the math functions, `nvvm.annotations` for the entry point and its block size.

use std::fmt;
use std::sync::OnceLock;

use tilekit_core::gpu::MatrixInstr;
use tilekit_core::DType;
use tilekit_llvm::emit::{Builder, Operand};
use tilekit_llvm::hooks::WgmmaOperand;
use tilekit_llvm::inkwell::context::Context;
use tilekit_llvm::inkwell::memory_buffer::MemoryBuffer;
use tilekit_llvm::inkwell::module::{Linkage, Module};
use tilekit_llvm::inkwell::passes::PassBuilderOptions;
use tilekit_llvm::inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target as LlvmTarget, TargetTriple};
use tilekit_llvm::inkwell::OptimizationLevel;
use tilekit_llvm::{Hooks, MathFn};

use crate::toolkit;

/// The GPU architecture PTX is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// Ampere (A100).
    Sm80,
    /// Hopper (H100, H200), portable PTX.
    Sm90,
    /// Hopper with its architecture-specific instructions (wgmma); PTX for sm_90a runs only there.
    Sm90a,
}

impl Arch {
    pub const ALL: [Arch; 3] = [Arch::Sm80, Arch::Sm90, Arch::Sm90a];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
        }
    }

    pub fn parse(s: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == s || a.name().replace('_', "") == s)
    }

    /// The architecture of a device of compute capability `major.minor`: the newest one this
    /// backend emits that the device runs (PTX is forward-compatible through the driver's JIT,
    /// except sm_90a's).
    pub fn for_compute_capability(major: i32, minor: i32) -> Option<Arch> {
        match (major, minor) {
            // Hopper itself: its warpgroup matrix instructions exist on 9.0 only.
            (9, 0) => Some(Arch::Sm90a),
            (m, _) if m >= 9 => Some(Arch::Sm90),
            (8, _) => Some(Arch::Sm80),
            _ => None,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Inline assembly `asm` (with side effects, convergent) whose f32 outputs `$0..` are tied to
/// `tied`, the last inputs, after `inputs` (constraint, typed argument); returns the outputs.
fn tied_f32_asm(b: &mut Builder<'_>, asm: &str, inputs: &[(&str, String)], tied: &[Operand], clobber: Option<&str>) -> Vec<Operand> {
    let n = tied.len();
    let ret = vec!["float"; n].join(", ");
    let mut constraints: Vec<String> = vec!["=f".to_string(); n];
    constraints.extend(inputs.iter().map(|(c, _)| c.to_string()));
    constraints.extend((0..n).map(|i| i.to_string()));
    constraints.extend(clobber.map(str::to_string));
    let args: Vec<String> = inputs.iter().map(|(_, a)| a.clone()).chain(tied.iter().map(|v| format!("float {v}"))).collect();
    let r = b.inst(format!("call {{ {ret} }} asm sideeffect \"{asm}\", \"{}\"({}) convergent", constraints.join(","), args.join(", ")));
    (0..n).map(|i| b.inst(format!("extractvalue {{ {ret} }} {r}, {i}"))).collect()
}

/// [`Hooks`] for `nvptx64-nvidia-cuda`.
#[derive(Clone, Copy, Debug)]
pub struct NvptxHooks {
    pub arch: Arch,
}

impl Hooks for NvptxHooks {
    fn triple(&self) -> &str {
        "nvptx64-nvidia-cuda"
    }

    fn cpu(&self) -> &str {
        self.arch.name()
    }

    fn features(&self) -> &str {
        // PTX ISA 8.0 (CUDA 12.0) is the first with sm_90a; every CUDA 12 and 13 driver JITs it.
        "+ptx80"
    }

    fn kernel_calling_convention(&self) -> &str {
        "ptx_kernel"
    }

    fn static_shared_limit(&self) -> Option<u64> {
        Some(48 * 1024)
    }

    fn thread_index(&self, b: &mut Builder<'_>) -> Operand {
        b.call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", &[])
    }

    fn program_id(&self, b: &mut Builder<'_>, axis: u32) -> Operand {
        b.call("i32", &format!("llvm.nvvm.read.ptx.sreg.ctaid.{}", xyz(axis)), &[])
    }

    fn num_programs(&self, b: &mut Builder<'_>, axis: u32) -> Operand {
        b.call("i32", &format!("llvm.nvvm.read.ptx.sreg.nctaid.{}", xyz(axis)), &[])
    }

    fn barrier(&self, b: &mut Builder<'_>) {
        // `bar.sync 0`: waits for every thread of the block and orders its shared-memory accesses.
        b.call("void", "llvm.nvvm.barrier0", &[]);
    }

    fn shuffle_xor_i32(&self, b: &mut Builder<'_>, value: Operand, mask: u32, warp: u32) -> Operand {
        // Every lane takes part (the lowering keeps control flow uniform). The last operand
        // packs the segment mask (lanes outside a `warp`-wide segment) and the clamp, 31.
        let c = ((32 - warp.min(32)) << 8) | 0x1f;
        b.call(
            "i32",
            "llvm.nvvm.shfl.sync.bfly.i32",
            &[("i32", Operand::Int(-1)), ("i32", value), ("i32", Operand::Int(mask as i64)), ("i32", Operand::Int(c as i64))],
        )
    }

    fn round_tf32(&self, b: &mut Builder<'_>, x: Operand) -> Option<Operand> {
        // `cvt.rna.tf32.f32` (sm_80+): to nearest, ties away, the low 13 bits cleared.
        Some(b.call("i32", "llvm.nvvm.f2tf32.rna", &[("float", x)]))
    }

    fn mma(&self, b: &mut Builder<'_>, instr: &MatrixInstr, a: &[Operand], bw: &[Operand], c: &[Operand]) -> Option<Vec<Operand>> {
        // m16n8k16 on f16 / bf16 (four words of `a`, two of `b`, two elements a word), or
        // m16n8k8 on tf32 (four words of `a`, two of `b`, one element a word).
        let (ty, k) = match instr.a {
            DType::F16 => ("f16", 16),
            DType::BF16 => ("bf16", 16),
            DType::F32 => ("tf32", 8),
            _ => return None,
        };
        if (instr.m, instr.n, instr.k, instr.acc) != (16, 8, k, DType::F32) || a.len() != 4 || bw.len() != 2 || c.len() != 4 {
            return None;
        }
        // Convergent: every lane of the warp must execute it together, so LLVM may not sink it
        // into a branch.
        let args: Vec<String> = a.iter().chain(bw).map(|v| format!("i32 {v}")).chain(c.iter().map(|v| format!("float {v}"))).collect();
        let r = b.inst(format!(
            "call {{ float, float, float, float }} asm \"mma.sync.aligned.m16n8k{k}.row.col.f32.{ty}.{ty}.f32 {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, {{$8, $9}}, {{$10, $11, $12, $13}};\", \"=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f\"({}) convergent",
            args.join(", ")
        ));
        Some((0..4).map(|i| b.inst(format!("extractvalue {{ float, float, float, float }} {r}, {i}"))).collect())
    }

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
        let ty = match instr.a {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            _ => return None,
        };
        if self.arch != Arch::Sm90a
            || (instr.m, instr.k, instr.acc) != (64, 16, DType::F32)
            || n % 8 != 0
            || n == 0
            || n > 256
            || c.len() != n as usize / 2
        {
            return None;
        }
        let outs = c.len();
        let d: Vec<String> = (0..outs).map(|i| format!("${i}")).collect();
        let (a_text, mut inputs, mut constraints) = match a {
            WgmmaOperand::Words(w) if w.len() == 4 => {
                let names: Vec<String> = (0..4).map(|i| format!("${}", outs + i)).collect();
                (format!("{{{}}}", names.join(", ")), w.iter().map(|v| format!("i32 {v}")).collect::<Vec<_>>(), vec!["r"; 4])
            }
            WgmmaOperand::Descriptor(desc) => (format!("${outs}"), vec![format!("i64 {desc}")], vec!["l"]),
            WgmmaOperand::Words(_) => return None,
        };
        let next = outs + inputs.len();
        inputs.push(format!("i64 {b_desc}"));
        constraints.push("l");
        // scale-d: the accumulator is added (a predicate, set from a register).
        inputs.push("i32 1".to_string());
        constraints.push("r");
        // imm-scale-a, imm-scale-b, then imm-trans-a (shared `a` only: K-major) and imm-trans-b.
        let imms = match a {
            WgmmaOperand::Descriptor(_) => format!("1, 1, 0, {}", trans_b as u32),
            WgmmaOperand::Words(_) => format!("1, 1, {}", trans_b as u32),
        };
        let asm = format!(
            "{{ .reg .pred p; setp.ne.b32 p, ${scale}, 0; wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{d}}}, {a_text}, ${bd}, p, {imms}; }}",
            scale = next + 1,
            d = d.join(", "),
            bd = next,
        );
        let inputs: Vec<(&str, String)> = constraints.into_iter().zip(inputs).collect();
        Some(tied_f32_asm(b, &asm, &inputs, c, None))
    }

    fn wgmma_fence(&self, b: &mut Builder<'_>) {
        b.stmt("call void asm sideeffect \"wgmma.fence.sync.aligned;\", \"~{memory}\"() convergent".to_string());
    }

    fn wgmma_wait(&self, b: &mut Builder<'_>, pending: u32, values: &[Operand]) -> Vec<Operand> {
        let asm = format!("wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned {pending};");
        if values.is_empty() {
            b.stmt(format!("call void asm sideeffect \"{asm}\", \"~{{memory}}\"() convergent"));
            return Vec::new();
        }
        // The results pass through the wait, so nothing that reads them moves above it.
        tied_f32_asm(b, &asm, &[], values, Some("~{memory}"))
    }

    fn fence_async_shared(&self, b: &mut Builder<'_>) {
        if self.arch == Arch::Sm90a {
            b.stmt("call void asm sideeffect \"fence.proxy.async.shared::cta;\", \"~{memory}\"()".to_string());
        }
    }

    fn load_shared_matrix(&self, b: &mut Builder<'_>, addr: Operand, count: u32, trans: bool) -> Option<Vec<Operand>> {
        let outs: Vec<String> = (0..count).map(|i| format!("${i}")).collect();
        let ty = vec!["i32"; count as usize].join(", ");
        let constraints = vec!["=r"; count as usize].join(",");
        // Reads shared memory the barriers order: convergent, and not movable across them.
        let r = b.inst(format!(
            "call {{ {ty} }} asm sideeffect \"ldmatrix.sync.aligned.m8n8.x{count}{}.shared.b16 {{{}}}, [${count}];\", \"{constraints},r,~{{memory}}\"(i32 {addr}) convergent",
            if trans { ".trans" } else { "" },
            outs.join(", ")
        ));
        Some((0..count).map(|i| b.inst(format!("extractvalue {{ {ty} }} {r}, {i}"))).collect())
    }

    fn async_copies(&self) -> bool {
        true
    }

    fn native_bf16(&self) -> bool {
        // cvt.rn.bf16.f32 (and its packed bf16x2 form) exists from sm_80, the oldest target.
        true
    }

    fn wrapping_abs_neg(&self, b: &mut Builder<'_>, neg: bool, ty: &str, x: Operand) -> Option<Operand> {
        // ptxas takes `abs.sN`'s result as non-negative and a 16-bit `neg.s16`'s as in range:
        // it folds `abs(x) < 0` to false and drops the sign extension after `abs.s16` /
        // `neg.s16`, so abs(MIN) and -(-32768) came out positive. The shift-xor-subtract form
        // in inline assembly (which LLVM cannot turn back into `llvm.abs`) keeps the wrap, and
        // narrow values are negated in 32 bits and truncated, which ptxas sign-extends again.
        let bits = match ty {
            "i8" => 8,
            "i16" => 16,
            "i32" => 32,
            "i64" => 64,
            _ => return None,
        };
        let reg = bits.max(32);
        let asm = self.wrapping_abs_neg_asm(neg, reg, bits)?;
        let constraint = if reg == 64 { "=l,l" } else { "=r,r" };
        if bits < 32 {
            let wide = b.inst(format!("sext {ty} {x} to i32"));
            let r = b.inst(format!("call i32 asm \"{asm}\", \"{constraint}\"(i32 {wide})"));
            Some(b.inst(format!("trunc i32 {r} to {ty}")))
        } else {
            Some(b.inst(format!("call {ty} asm \"{asm}\", \"{constraint}\"({ty} {x})")))
        }
    }

    fn wrapping_abs_neg_asm(&self, neg: bool, reg_bits: u32, bits: u32) -> Option<&'static str> {
        match (neg, reg_bits, bits) {
            // 64-bit negation is right as it is.
            (true, _, 64) => None,
            // Not `neg.s32`: the H200's driver compiled max(-a, -b, -c) of 32-bit values to one
            // three-input `VIMNMX3` that took one operand un-negated (seed 43 program 3082 of the
            // fuzzer: the row maximum of -x came out as a plain x). The complement plus one is
            // the same negation, wrapping at MIN, and ptxas fuses it as an add.
            (true, 32, _) => Some("{ .reg .b32 t; not.b32 t, $1; add.s32 $0, t, 1; }"),
            (false, 32, _) => Some("{ .reg .s32 t; shr.s32 t, $1, 31; xor.b32 $0, $1, t; sub.s32 $0, $0, t; }"),
            (false, 64, 64) => Some("{ .reg .s64 t; shr.s64 t, $1, 63; xor.b64 $0, $1, t; sub.s64 $0, $0, t; }"),
            _ => None,
        }
    }

    fn async_copy(&self, b: &mut Builder<'_>, dst: Operand, src: Operand, copy: Operand) {
        // .cg: the tile is read once per program, from L2; L1 would only hold it twice. The
        // ignore-src predicate rather than a source size of 0 or 16: the copy's own predicate
        // then comes straight from the mask's comparisons, where a size is selected and
        // compared again per copy.
        let on = b.inst(format!("zext i1 {copy} to i32"));
        b.stmt(format!(
            "call void asm sideeffect \"{{ .reg .pred p; setp.eq.b32 p, $2, 0; cp.async.cg.shared.global [$0], [$1], 16, p; }}\", \"r,l,r,~{{memory}}\"(i32 {dst}, i64 {src}, i32 {on})"
        ));
    }

    fn tensor_copies(&self) -> bool {
        self.arch == Arch::Sm90a
    }

    fn mbarrier_init(&self, b: &mut Builder<'_>, bar: Operand) {
        b.stmt(format!("call void asm sideeffect \"mbarrier.init.shared::cta.b64 [$0], 1;\", \"r,~{{memory}}\"(i32 {bar})"));
    }

    fn mbarrier_init_fence(&self, b: &mut Builder<'_>) {
        b.stmt("call void asm sideeffect \"fence.mbarrier_init.release.cluster;\", \"~{memory}\"()".to_string());
    }

    fn mbarrier_invalidate(&self, b: &mut Builder<'_>, bar: Operand) {
        b.stmt(format!("call void asm sideeffect \"mbarrier.inval.shared::cta.b64 [$0];\", \"r,~{{memory}}\"(i32 {bar})"));
    }

    fn mbarrier_expect(&self, b: &mut Builder<'_>, bar: Operand, bytes: u32) {
        b.stmt(format!("call void asm sideeffect \"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {bytes};\", \"r,~{{memory}}\"(i32 {bar})"));
    }

    fn mbarrier_wait(&self, b: &mut Builder<'_>, bar: Operand, parity: Operand) {
        // try_wait suspends the thread for a time the hardware chooses; the loop retries
        // until the phase completes.
        b.stmt(format!(
            "call void asm sideeffect \"{{ .reg .pred p; waitLoop: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1; @!p bra waitLoop; }}\", \"r,r,~{{memory}}\"(i32 {bar}, i32 {parity}) convergent"
        ));
    }

    fn tensor_copy(&self, b: &mut Builder<'_>, map: Operand, dst: Operand, coords: [Operand; 2], bar: Operand) {
        b.stmt(format!(
            "call void asm sideeffect \"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {{$2, $3}}], [$4];\", \"r,l,r,r,r,~{{memory}}\"(i32 {dst}, i64 {map}, i32 {}, i32 {}, i32 {bar})",
            coords[0], coords[1]
        ));
    }

    fn async_commit(&self, b: &mut Builder<'_>) {
        b.stmt("call void asm sideeffect \"cp.async.commit_group;\", \"~{memory}\"()".to_string());
    }

    fn async_wait(&self, b: &mut Builder<'_>, pending: u32) {
        b.stmt(format!("call void asm sideeffect \"cp.async.wait_group {pending};\", \"~{{memory}}\"()"));
    }

    fn math(&self, f: MathFn) -> &'static str {
        match f {
            // ex2.approx of x * log2(e): 2 + 1.16|x| ulp at most, inside the 3 + 2|x| ulp Vulkan
            // allows its `exp` (the SPIR-V path's) and what Triton's `tl.exp` compiles to.
            // `__nv_expf`'s exact range reduction cost softmax more than its memory traffic.
            MathFn::Exp => "__nv_fast_expf",
            MathFn::Exp2 => "__nv_exp2f",
            MathFn::Log => "__nv_logf",
            MathFn::Log2 => "__nv_log2f",
            MathFn::Rsqrt => "__nv_rsqrtf",
            MathFn::Sin => "__nv_sinf",
            MathFn::Cos => "__nv_cosf",
            MathFn::Tanh => "__nv_tanhf",
            MathFn::Erf => "__nv_erff",
            MathFn::Fmod => "__nv_fmodf",
        }
    }

    fn codegen_level(&self) -> OptimizationLevel {
        // At -O3 NVPTX's code generation runs GVN twice more (-O2: EarlyCSE), which took half
        // its time on LayerNorm BLOCK=8192 and changed no instruction of the library's PTX
        // except vector add's block order; ptxas optimises the PTX in any case.
        OptimizationLevel::Default
    }

    fn pipeline(&self) -> &str {
        NVPTX_PIPELINE
    }

    fn module_metadata(&self, entry: &str, threads: u32, occupancy: u32, grid_constants: &[u32]) -> String {
        // `reqntid` tells ptxas the exact block size (every launch uses it), so it budgets
        // registers for it: a launch with more registers per thread than the block allows
        // fails. Without `minnctapersm 1` ptxas trades spills for occupancy (it caps registers
        // so that several blocks fit on a multiprocessor, and spilled 8 to 800 bytes in library
        // kernels that fit in registers); a spill costs local-memory traffic in the hot loop,
        // which these kernels never win back. A configuration's `occupancy` asks for more blocks
        // instead ([`LowerOptions::occupancy`]). `nvvm-reflect-ftz` = 0 makes libdevice keep
        // subnormals.
        // Tensor maps are `__grid_constant__` parameters: their address is taken (the copies
        // name it) without a copy to local memory.
        let blocks = occupancy.max(1);
        let mut meta = format!(
            "!nvvm.annotations = !{{!0{}}}\n!0 = !{{ptr @{entry}, !\"kernel\", i32 1, !\"reqntidx\", i32 {threads}, !\"reqntidy\", i32 1, !\"reqntidz\", i32 1, !\"minctasm\", i32 {blocks}}}\n\
             !llvm.module.flags = !{{!1}}\n!1 = !{{i32 4, !\"nvvm-reflect-ftz\", i32 0}}\n",
            if grid_constants.is_empty() { "" } else { ", !2" }
        );
        if !grid_constants.is_empty() {
            let list: Vec<String> = grid_constants.iter().map(|i| format!("i32 {i}")).collect();
            meta.push_str(&format!("!2 = !{{ptr @{entry}, !\"grid_constant\", !3}}\n!3 = !{{{}}}\n", list.join(", ")));
        }
        meta
    }

    fn initialize(&self) {
        static OPTIONS: std::sync::Once = std::sync::Once::new();
        LlvmTarget::initialize_nvptx(&InitializationConfig::default());
        // 32-bit shared-memory addresses, as Triton compiles: with 64-bit ones every
        // shared-memory slot a dot stages through costs two registers, and matmul tiles spilled
        // for it. Must be set before the first NVPTX target machine is created (it decides the
        // data layout); LLVM's options are global to the process, and only NVPTX reads this one.
        OPTIONS.call_once(|| {
            tilekit_llvm::set_options(&["-nvptx-short-ptr"]);
        });
    }

    fn link_externals<'ctx>(&self, context: &'ctx Context, module: &Module<'ctx>, names: &[String]) -> Result<(), String> {
        let bytes = pruned_libdevice().map_err(|e| format!("{e} (needed for {})", names.join(", ")))?;
        let buffer = MemoryBuffer::create_from_memory_range_copy(bytes, "libdevice.10.bc");
        let lib = Module::parse_bitcode_from_buffer(&buffer, context).map_err(|e| format!("reading libdevice: {e}"))?;
        lib.set_triple(&module.get_triple());
        lib.set_data_layout(&module.get_data_layout());
        module.link_in_module(lib).map_err(|e| format!("linking libdevice: {e}"))
    }
}

/// The NVPTX optimisation pipeline: LLVM 19's `default<O3>`, as `opt-19 -passes='default<O3>'
/// -print-pipeline-passes` writes it, less the passes [`DROPPED_FROM_O3`] names
/// (tests/ptx_modules.rs checks that it is exactly that).
pub const NVPTX_PIPELINE: &str = include_str!("nvptx.passes");

/// The passes of LLVM 19's `default<O3>` that [`NVPTX_PIPELINE`] leaves out, each by its name
/// and which occurrence of that name in the O3 text it is (from 0).
///
/// `slp-vectorizer` took half of O3's time on the FMA dot tiles (matmul 128x64: 0.17 -> 0.08 s)
/// and formed nothing in the library's PTX (seven configurations' instructions came out in
/// another order, none other): NVPTX has few vector operations for it, and code generation's
/// load/store vectorizer merges the accesses that matter. `PassBuilderOptions::
/// set_loop_slp_vectorization(false)` does not keep it out of the pipeline through LLVM-C in
/// LLVM 19.
///
/// The others took a third of O3's time on the tensor-core tiles, whose compile latency is the
/// longest (InstCombine's later runs most of it), and changed nothing that matters in the
/// library's PTX: of the 3,875 modules of the ptxas sweep (every kernel, dtype, test problem
/// and configuration for sm_80, sm_90 and sm_90a), 3,467 came out byte for byte the same, 390
/// (f32 matmuls) two instructions shorter, and 18 (matmuls) with as many instructions, numbered
/// or ordered otherwise. What they would find in this IR, the earlier runs of the same passes (and ptxas,
/// which optimises the PTX again) have found already. LICM's first run stays: without it the code
/// of an unpipelined matmul (the golden `matmul_mma`) changed throughout. Leaving out an optimisation never changes
/// what a program computes.
pub const DROPPED_FROM_O3: &[(&str, usize)] = &[
    ("slp-vectorizer", 0),
    ("ipsccp", 0),
    ("called-value-propagation", 0),
    ("instcombine", 3),
    ("instcombine", 4),
    ("instcombine", 5),
    ("instcombine", 6),
    ("aggressive-instcombine", 0),
    ("jump-threading", 0),
    ("jump-threading", 1),
    ("correlated-propagation", 0),
    ("sccp", 0),
    ("bdce", 0),
    ("memcpyopt", 0),
    ("dse", 0),
    ("vector-combine", 1),
];

/// Every libdevice function [`NvptxHooks::math`] names.
const MATH: [MathFn; 10] =
    [MathFn::Exp, MathFn::Exp2, MathFn::Log, MathFn::Log2, MathFn::Rsqrt, MathFn::Sin, MathFn::Cos, MathFn::Tanh, MathFn::Erf, MathFn::Fmod];

/// libdevice reduced to the functions tilekit calls and what they call, as bitcode; built once
/// per process. Parsing and linking all of libdevice (about 350 functions) took 100-150 ms per
/// kernel, most of a kernel's compile time; the reduced module takes a few.
fn pruned_libdevice() -> Result<&'static [u8], String> {
    static PRUNED: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    PRUNED
        .get_or_init(|| {
            let bytes = toolkit::libdevice().map_err(|e| e.to_string())?;
            let hooks = NvptxHooks { arch: Arch::Sm80 };
            hooks.initialize();
            let context = Context::create();
            let buffer = MemoryBuffer::create_from_memory_range_copy(bytes, "libdevice.10.bc");
            let lib = Module::parse_bitcode_from_buffer(&buffer, &context).map_err(|e| format!("reading libdevice: {e}"))?;
            let keep: Vec<&str> = MATH.iter().map(|&f| hooks.math(f)).collect();
            let mut f = lib.get_first_function();
            while let Some(func) = f {
                let name = func.get_name().to_string_lossy().into_owned();
                if func.count_basic_blocks() > 0 && !keep.contains(&name.as_str()) {
                    func.set_linkage(Linkage::Internal);
                }
                f = func.get_next_function();
            }
            let mut g = lib.get_first_global();
            while let Some(gv) = g {
                if gv.get_initializer().is_some() {
                    gv.set_linkage(Linkage::Internal);
                }
                g = gv.get_next_global();
            }
            let triple = TargetTriple::create(hooks.triple());
            let tm = LlvmTarget::from_triple(&triple)
                .map_err(|e| e.to_string())?
                .create_target_machine(&triple, hooks.cpu(), hooks.features(), OptimizationLevel::None, RelocMode::Default, CodeModel::Default)
                .ok_or("no NVPTX target machine")?;
            lib.run_passes("globaldce", &tm, PassBuilderOptions::create()).map_err(|e| format!("reducing libdevice: {e}"))?;
            Ok(lib.write_bitcode_to_memory().as_slice().to_vec())
        })
        .as_ref()
        .map(|v| v.as_slice())
        .map_err(Clone::clone)
}

fn xyz(axis: u32) -> char {
    ['x', 'y', 'z'][axis.min(2) as usize]
}
