//! The AMDGPU hooks of the LLVM layer: `llvm.amdgcn` intrinsics for ids, `s_barrier`, LDS,
//! `ds_swizzle` / `ds_bpermute` shuffles sized to the wave, and math without the ROCm device
//! library (LLVM intrinsics the AMDGPU back end lowers itself, plus `math.ll`).

use std::fmt;

use tilekit_core::gpu::{MatrixInstr, MatrixKind, Target};
use tilekit_core::DType;
use tilekit_llvm::emit::{Builder, Operand};
use tilekit_llvm::inkwell::context::Context;
use tilekit_llvm::inkwell::memory_buffer::MemoryBuffer;
use tilekit_llvm::inkwell::module::Module;
use tilekit_llvm::inkwell::targets::{InitializationConfig, RelocMode, Target as LlvmTarget};
use tilekit_llvm::{Hooks, MathFn};

/// The AMD GPU architecture a code object is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// CDNA2 (MI200), wave64.
    Gfx90a,
    /// CDNA3 (MI300), wave64.
    Gfx942,
    /// RDNA3 (RX 7900), compiled for wave32.
    Gfx1100,
}

impl Arch {
    pub const ALL: [Arch; 3] = [Arch::Gfx90a, Arch::Gfx942, Arch::Gfx1100];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Gfx90a => "gfx90a",
            Arch::Gfx942 => "gfx942",
            Arch::Gfx1100 => "gfx1100",
        }
    }

    pub fn parse(s: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == s || format!("amdgcn:{}", a.name()) == s)
    }

    /// Lanes per wavefront this backend compiles for.
    pub fn wave_size(self) -> u32 {
        match self {
            Arch::Gfx90a | Arch::Gfx942 => 64,
            Arch::Gfx1100 => 32,
        }
    }

    /// The compiler target of this architecture (its `subgroup_size` is the wave size).
    pub fn target(self) -> Target {
        match self {
            Arch::Gfx90a => Target::amd_gfx90a(),
            Arch::Gfx942 => Target::amd_gfx942(),
            Arch::Gfx1100 => Target::amd_gfx1100(),
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// [`Hooks`] for `amdgcn-amd-amdhsa`.
#[derive(Clone, Copy, Debug)]
pub struct AmdgpuHooks {
    pub arch: Arch,
}

/// The IR library behind the math functions that no LLVM intrinsic lowers on AMDGPU.
const MATH_LL: &str = include_str!("math.ll");

impl Hooks for AmdgpuHooks {
    fn triple(&self) -> &str {
        "amdgcn-amd-amdhsa"
    }

    fn cpu(&self) -> &str {
        self.arch.name()
    }

    fn features(&self) -> &str {
        // RDNA runs wave32 or wave64; the lowering built its layouts for the Target's width, so
        // the code generator must use the same one. CDNA has only wave64.
        match self.arch.wave_size() {
            32 => "+wavefrontsize32",
            _ => "+wavefrontsize64",
        }
    }

    fn kernel_calling_convention(&self) -> &str {
        // Calling convention 91: an HSA kernel entry, arguments in the kernarg segment.
        "amdgpu_kernel"
    }

    fn device_scope(&self) -> Option<&str> {
        // The whole GPU; LLVM's default (system) scope would also order against the host.
        Some("agent")
    }

    fn reloc_mode(&self) -> RelocMode {
        // The object is linked into a shared object (the code object).
        RelocMode::PIC
    }

    fn thread_index(&self, b: &mut Builder<'_>) -> Operand {
        b.call("i32", "llvm.amdgcn.workitem.id.x", &[])
    }

    fn program_id(&self, b: &mut Builder<'_>, axis: u32) -> Operand {
        b.call("i32", &format!("llvm.amdgcn.workgroup.id.{}", xyz(axis)), &[])
    }

    fn num_programs(&self, b: &mut Builder<'_>, axis: u32) -> Operand {
        // Code object v5 puts the grid's workgroup counts (hidden_block_count_x/y/z, u32) first
        // in the implicit kernel arguments.
        let base = b.call("ptr addrspace(4)", "llvm.amdgcn.implicitarg.ptr", &[]);
        let p = b.inst(format!("getelementptr inbounds i8, ptr addrspace(4) {base}, i64 {}", 4 * axis.min(2)));
        b.inst(format!("load i32, ptr addrspace(4) {p}, align 4"))
    }

    fn barrier(&self, b: &mut Builder<'_>) {
        // `s_barrier` only synchronises execution; the fences make LDS writes before it visible
        // to reads after it (the compiler inserts the s_waitcnt they need).
        b.stmt("fence syncscope(\"workgroup\") release".into());
        b.call("void", "llvm.amdgcn.s.barrier", &[]);
        b.stmt("fence syncscope(\"workgroup\") acquire".into());
    }

    fn shuffle_xor_i32(&self, b: &mut Builder<'_>, value: Operand, mask: u32, warp: u32) -> Operand {
        if mask < 32 {
            // ds_swizzle in bit-mask mode (offset bit 15 clear): lane' = ((lane & and) | or) ^ xor
            // within each group of 32 lanes, with and = 0x1f, or = 0, xor = mask. It moves data
            // through the LDS crossbar without touching LDS memory or needing an address.
            let pattern = ((mask & 0x1f) << 10) | 0x1f;
            b.call("i32", "llvm.amdgcn.ds.swizzle", &[("i32", value), ("i32", Operand::Int(pattern as i64))])
        } else {
            // Across the two halves of a wave64: ds_bpermute reads lane (address / 4) of `value`.
            let lo = b.call("i32", "llvm.amdgcn.mbcnt.lo", &[("i32", Operand::Int(-1)), ("i32", Operand::Int(0))]);
            let lane = if warp > 32 { b.call("i32", "llvm.amdgcn.mbcnt.hi", &[("i32", Operand::Int(-1)), ("i32", lo)]) } else { lo };
            let src = b.inst(format!("xor i32 {lane}, {mask}"));
            let addr = b.inst(format!("shl i32 {src}, 2"));
            b.call("i32", "llvm.amdgcn.ds.bpermute", &[("i32", addr), ("i32", value)])
        }
    }

    fn mma(&self, b: &mut Builder<'_>, instr: &MatrixInstr, a: &[Operand], bw: &[Operand], c: &[Operand]) -> Option<Vec<Operand>> {
        // CDNA's v_mfma_f32_16x16x16f16 / bf16_1k (wave64): each lane hands four 16-bit
        // elements of `a` and of `b` and four f32 of the accumulator; no broadcast (cbsz, abid,
        // blgp 0). RDNA3's v_wmma_f32_16x16x16_f16 / bf16 (wave32): sixteen elements of each
        // operand and eight f32. Operands arrive as words of two elements, the first in the
        // low half: the vector's element order.
        let wave = self.arch.wave_size();
        let (words, accs, name) = match (instr.kind, instr.a, wave) {
            (MatrixKind::Mfma, DType::F16, 64) => (2, 4, "llvm.amdgcn.mfma.f32.16x16x16f16"),
            (MatrixKind::Mfma, DType::BF16, 64) => (2, 4, "llvm.amdgcn.mfma.f32.16x16x16bf16.1k"),
            (MatrixKind::Wmma, DType::F16, 32) => (8, 8, "llvm.amdgcn.wmma.f32.16x16x16.f16"),
            (MatrixKind::Wmma, DType::BF16, 32) => (8, 8, "llvm.amdgcn.wmma.f32.16x16x16.bf16"),
            _ => return None,
        };
        if (instr.m, instr.n, instr.k, instr.acc) != (16, 16, 16, DType::F32)
            || instr.b != instr.a
            || a.len() != words
            || bw.len() != words
            || c.len() != accs
        {
            return None;
        }
        let elem = if instr.a == DType::F16 { "half" } else { "i16" };
        let ty = format!("<{} x {elem}>", 2 * words);
        let acc_ty = format!("<{accs} x float>");
        let vector = |b: &mut Builder<'_>, ty: &str, elem: &str, values: &[Operand]| {
            let mut v = None;
            for (i, x) in values.iter().enumerate() {
                let prev = v.map_or("poison".to_string(), |p: Operand| p.to_string());
                v = Some(b.inst(format!("insertelement {ty} {prev}, {elem} {x}, i32 {i}")));
            }
            v.expect("a matrix operand has elements")
        };
        let words_ty = format!("<{words} x i32>");
        let (wa, wb) = (vector(b, &words_ty, "i32", a), vector(b, &words_ty, "i32", bw));
        let va = b.inst(format!("bitcast {words_ty} {wa} to {ty}"));
        let vb = b.inst(format!("bitcast {words_ty} {wb} to {ty}"));
        let acc = vector(b, &acc_ty, "float", c);
        let zero = ("i32", Operand::Int(0));
        let args: Vec<(&str, Operand)> = match instr.kind {
            MatrixKind::Mfma => vec![(&ty, va), (&ty, vb), (&acc_ty, acc), zero, zero, zero],
            _ => vec![(&ty, va), (&ty, vb), (&acc_ty, acc)],
        };
        let d = b.call(&acc_ty, name, &args);
        Some((0..accs).map(|i| b.inst(format!("extractelement {acc_ty} {d}, i32 {i}"))).collect())
    }

    fn own_sin_cos(&self) -> bool {
        // llvm.sin / llvm.cos become v_sin / v_cos after a multiplication by 1/(2 pi), whose
        // rounding alone is an absolute error of |x| 2^-24 (as HIP's fast-math __sinf).
        true
    }

    fn own_tanh_erf(&self) -> bool {
        // No device library is linked: tanh and erf are the sequences SPIR-V uses too.
        true
    }

    fn math(&self, f: MathFn) -> &'static str {
        // exp, exp2, log and log2 are correctly handled (denormals, range) by the AMDGPU
        // lowering of the intrinsics since LLVM 17; sin, cos, tanh and erf are tilekit's own
        // (`own_sin_cos`, `own_tanh_erf`), their names here only for completeness.
        match f {
            MathFn::Exp => "llvm.exp.f32",
            MathFn::Exp2 => "llvm.exp2.f32",
            MathFn::Log => "llvm.log.f32",
            MathFn::Log2 => "llvm.log2.f32",
            MathFn::Sin => "llvm.sin.f32",
            MathFn::Cos => "llvm.cos.f32",
            MathFn::Rsqrt => "tilekit_amdgcn_rsqrtf",
            MathFn::Tanh => "tanhf",
            MathFn::Erf => "erff",
            MathFn::Fmod => "tilekit_amdgcn_fmodf",
        }
    }

    fn dot_loop_unroll(&self) -> Option<u32> {
        // The AMDGPU unroller's thresholds (raised further for loops that read LDS) unroll a
        // dot's whole k chunk; the scheduler then issues every LDS load of the chunk before the
        // FMAs, and attention at D = 128 needed more than the 512 VGPRs of a wave64 thread and
        // spilled. Each k step already holds an FMA per accumulator register.
        Some(1)
    }

    fn function_attributes(&self, threads: u32) -> String {
        // Every launch uses exactly `threads` threads: the register allocator may use the
        // whole budget that size allows, and the grid is a whole number of workgroups.
        format!("\"amdgpu-flat-work-group-size\"=\"{threads},{threads}\" \"uniform-work-group-size\"=\"true\"")
    }

    fn module_metadata(&self, _entry: &str, _threads: u32, _occupancy: u32, _grid_constants: &[u32]) -> String {
        "!llvm.module.flags = !{!0}\n!0 = !{i32 1, !\"amdhsa_code_object_version\", i32 500}\n".into()
    }

    fn initialize(&self) {
        LlvmTarget::initialize_amd_gpu(&InitializationConfig::default());
    }

    fn link_externals<'ctx>(&self, context: &'ctx Context, module: &Module<'ctx>, names: &[String]) -> Result<(), String> {
        let buffer = MemoryBuffer::create_from_memory_range_copy(MATH_LL.as_bytes(), "math.ll");
        let lib = context.create_module_from_ir(buffer).map_err(|e| format!("parsing the AMDGPU math library: {e}"))?;
        for n in names {
            if lib.get_function(n).map_or(true, |f| f.count_basic_blocks() == 0) {
                return Err(format!("the AMDGPU math library has no function `{n}`"));
            }
        }
        lib.set_triple(&module.get_triple());
        lib.set_data_layout(&module.get_data_layout());
        module.link_in_module(lib).map_err(|e| format!("linking the AMDGPU math library: {e}"))
    }
}

fn xyz(axis: u32) -> char {
    ['x', 'y', 'z'][axis.min(2) as usize]
}
