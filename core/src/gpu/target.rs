//! What a device offers the compiler: the facts layout assignment, reductions and backends
//! decide by. Presets cover offline compilation; runtimes build one from a live device.

use std::fmt;

use crate::dtype::DType;
use crate::gpu::layout::Frag;

/// The instruction set family a target compiles to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// SPIR-V for Vulkan (and wgpu's Vulkan backend).
    SpirV,
    /// PTX for NVIDIA GPUs.
    Ptx,
    /// AMDGCN code objects.
    Amdgcn,
}

/// Subgroup (warp) operations available inside a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SubgroupOps {
    /// Lane shuffles (`shuffle_xor`), used for butterfly reductions.
    pub shuffle: bool,
    /// Subgroup arithmetic (`reduce`, clustered reduce).
    pub arithmetic: bool,
}

/// How a matrix instruction is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatrixKind {
    /// A warp-level instruction on per-thread fragments (`mma.sync` on NVIDIA): the lowering
    /// lays operands and accumulators out in its fragment layouts ([`crate::gpu::layout::Mma`]).
    MmaSync,
    /// A subgroup-scope cooperative matrix (`VK_KHR_cooperative_matrix`), opaque to the lowering.
    CooperativeMatrix,
    /// A warpgroup-level asynchronous instruction (`wgmma.mma_async` on sm_90a): four warps
    /// compute an `m x n` tile (`n` up to the instruction's, in steps of 8) from `b` (and `a`,
    /// or `a` in the fragment registers of [`MatrixKind::MmaSync`]) in shared memory, laid out
    /// in 128-byte swizzled panels; the accumulator is the mma.sync one with the four warps
    /// along M ([`crate::gpu::layout::Mma`]).
    Wgmma,
    /// A wavefront-level instruction on per-lane fragments (`v_mfma` on AMD CDNA), laid out
    /// like [`MatrixKind::MmaSync`]'s in its own fragment maps ([`crate::gpu::layout::Frag`]).
    Mfma,
    /// RDNA3's wave32 `v_wmma`, on per-lane fragments whose operands are repeated in both
    /// halves of the wave ([`crate::gpu::layout::Frag::Wmma16x16x16`]).
    Wmma,
}

/// A matrix instruction the target executes per subgroup: `[m, k] x [k, n] + [m, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixInstr {
    pub kind: MatrixKind,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub a: DType,
    pub b: DType,
    pub acc: DType,
}

impl MatrixInstr {
    /// `mma.sync.aligned.m16n8k16` with f32 accumulation on `dtype` operands.
    pub fn mma_m16n8k16(dtype: DType) -> MatrixInstr {
        MatrixInstr { kind: MatrixKind::MmaSync, m: 16, n: 8, k: 16, a: dtype, b: dtype, acc: DType::F32 }
    }

    /// `mma.sync.aligned.m16n8k8` on tf32 operands with f32 accumulation: listed with f32
    /// operands (held as f32 and rounded to tf32 first), which only a `dot` whose input
    /// precision is tf32 ([`crate::ir::InputPrecision::Tf32`]) lowers to.
    pub fn mma_m16n8k8_tf32() -> MatrixInstr {
        MatrixInstr { kind: MatrixKind::MmaSync, m: 16, n: 8, k: 8, a: DType::F32, b: DType::F32, acc: DType::F32 }
    }

    /// Whether the instruction multiplies f32 operands as tf32.
    pub fn tf32(&self) -> bool {
        self.a == DType::F32
    }

    /// `v_mfma_f32_16x16x16f16` (or `bf16_1k`) with f32 accumulation on `dtype` operands.
    pub fn mfma_16x16x16(dtype: DType) -> MatrixInstr {
        MatrixInstr { kind: MatrixKind::Mfma, m: 16, n: 16, k: 16, a: dtype, b: dtype, acc: DType::F32 }
    }

    /// `v_wmma_f32_16x16x16_f16` (or `bf16`) with f32 accumulation on `dtype` operands.
    pub fn wmma_16x16x16(dtype: DType) -> MatrixInstr {
        MatrixInstr { kind: MatrixKind::Wmma, m: 16, n: 16, k: 16, a: dtype, b: dtype, acc: DType::F32 }
    }

    /// A subgroup-scope cooperative matrix multiply-add (`VK_KHR_cooperative_matrix`)
    /// `16 x 16 x 16` with f32 accumulation on `dtype` operands.
    pub fn coop_16x16x16(dtype: DType) -> MatrixInstr {
        MatrixInstr { kind: MatrixKind::CooperativeMatrix, m: 16, n: 16, k: 16, a: dtype, b: dtype, acc: DType::F32 }
    }

    /// The fragment maps of a warp-level instruction the lowering lays values out for; `None`
    /// for the instructions it does not (cooperative matrices, whose layout is the driver's,
    /// and warpgroup instructions, which build on mma.sync's).
    pub fn frag(&self) -> Option<Frag> {
        let frag = match self.kind {
            MatrixKind::MmaSync if self.k == 8 => Frag::M16n8k8,
            MatrixKind::MmaSync => Frag::M16n8k16,
            MatrixKind::Mfma => Frag::Mfma16x16x16,
            MatrixKind::Wmma => Frag::Wmma16x16x16,
            MatrixKind::CooperativeMatrix | MatrixKind::Wgmma => return None,
        };
        ((self.m, self.n, self.k) == frag.mnk()).then_some(frag)
    }

    /// `wgmma.mma_async.sync.aligned.m64nNk16` with f32 accumulation on `dtype` operands, `N`
    /// any multiple of 8 up to 256.
    pub fn wgmma_m64k16(dtype: DType) -> MatrixInstr {
        MatrixInstr { kind: MatrixKind::Wgmma, m: 64, n: 256, k: 16, a: dtype, b: dtype, acc: DType::F32 }
    }
}

/// Everything the compiler may assume about a device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// A name for reports (`vulkan:llvmpipe`, `nvidia-h200-vulkan`).
    pub name: String,
    pub isa: Isa,
    /// Threads per warp (subgroup). Layouts and reductions are built for exactly this width.
    pub subgroup_size: u32,
    /// Largest number of threads in one program (workgroup).
    pub max_threads_per_program: u32,
    /// Shared (workgroup) memory one program may use, in bytes.
    pub shared_memory_bytes: u32,
    pub subgroup_ops: SubgroupOps,
    /// Storage and arithmetic support for the narrow and wide types.
    pub f16: bool,
    pub bf16: bool,
    pub i8: bool,
    pub i16: bool,
    pub i64: bool,
    /// Float atomic add on f32 buffers.
    pub atomic_float_add: bool,
    /// The device keeps IEEE infinities, NaNs and signed zeros when asked (Vulkan float controls:
    /// `shaderSignedZeroInfNanPreserveFloat32`/`16`). Without the request a driver may assume
    /// there are none, and `-inf` masks, NaN-aware max and select patterns go wrong.
    pub ieee_preserve: bool,
    /// The device rounds f16 results to nearest even and keeps f16 subnormals when a module asks
    /// (Vulkan float controls: `shaderRoundingModeRTEFloat16` and `shaderDenormPreserveFloat16`,
    /// with the f32 modes where the widths are not independent). SPIR-V then converts f32 to f16
    /// with one `OpFConvert` instead of an exact integer emulation of some forty instructions.
    pub f16_rte: bool,
    /// The device keeps f32 subnormals (inputs and results) when a module asks: always for PTX
    /// and AMDGCN (no flush-to-zero is ever requested), for Vulkan where the driver has
    /// `shaderDenormPreserveFloat32`. Without it a Vulkan driver may flush them to zero, which
    /// tilekit's semantics then allow (docs/semantics.md).
    pub f32_denorm_preserve: bool,
    /// Widest global access one thread issues, in bytes (16 on every GPU of interest).
    pub max_vector_bytes: u32,
    /// Bytes of push constants / kernel parameters for scalars.
    pub max_push_constant_bytes: u32,
    /// Largest grid extent per axis.
    pub max_grid: [u32; 3],
    /// 32-bit registers one thread may use (NVIDIA's 255, AMD's VGPRs); 0 where the device has
    /// no register file that bounds what a thread holds (a CPU, where LLVM keeps a thread's
    /// values on the stack). Kernels size what a thread holds in registers against it
    /// ([`Target::register_share`]); the assembler's report decides the rest.
    pub registers_per_thread: u32,
    /// Matrix instructions `dot` may use; empty means FMA only.
    pub matrix: Vec<MatrixInstr>,
}

impl Target {
    /// A conservative Vulkan 1.2+ device: subgroups of 32 with shuffles and arithmetic, f16 and
    /// 8/16-bit storage, no i64, 32 KiB of shared memory.
    pub fn vulkan_baseline() -> Target {
        Target {
            name: "vulkan-baseline".into(),
            isa: Isa::SpirV,
            subgroup_size: 32,
            max_threads_per_program: 1024,
            shared_memory_bytes: 32 * 1024,
            subgroup_ops: SubgroupOps { shuffle: true, arithmetic: true },
            f16: true,
            bf16: false,
            i8: true,
            i16: true,
            i64: false,
            atomic_float_add: false,
            ieee_preserve: false,
            f16_rte: false,
            f32_denorm_preserve: false,
            max_vector_bytes: 16,
            max_push_constant_bytes: 128,
            max_grid: [65535, 65535, 65535],
            // The smallest register file of the GPUs the presets cover (NVIDIA's).
            registers_per_thread: 255,
            matrix: Vec::new(),
        }
    }

    /// Mesa's lavapipe (llvmpipe) as Debian 12 ships it: subgroups of 8, 32 KiB shared memory.
    pub fn lavapipe() -> Target {
        Target {
            name: "vulkan:llvmpipe".into(),
            subgroup_size: 8,
            registers_per_thread: 0,
            i64: true,
            atomic_float_add: true,
            ieee_preserve: true,
            ..Target::vulkan_baseline()
        }
    }

    /// The NVIDIA H200 through Vulkan: warps of 32, 48 KiB of shared memory per workgroup,
    /// cooperative matrices 16 x 16 x 16 on f16 (the configurations its driver lists) and on
    /// bf16 (VK_KHR_shader_bfloat16; a device that does not list them keeps bf16 on FMA, since
    /// a real device's target is read from its driver).
    pub fn h200_vulkan() -> Target {
        Target {
            name: "vulkan:nvidia-h200".into(),
            shared_memory_bytes: 48 * 1024,
            i64: true,
            atomic_float_add: true,
            ieee_preserve: true,
            f16_rte: true,
            f32_denorm_preserve: false,
            max_push_constant_bytes: 256,
            max_grid: [2147483647, 65535, 65535],
            matrix: vec![
                MatrixInstr { kind: MatrixKind::CooperativeMatrix, m: 16, n: 16, k: 16, a: DType::F16, b: DType::F16, acc: DType::F32 },
                MatrixInstr { kind: MatrixKind::CooperativeMatrix, m: 16, n: 16, k: 16, a: DType::F16, b: DType::F16, acc: DType::F16 },
                MatrixInstr::coop_16x16x16(DType::BF16),
            ],
            ..Target::vulkan_baseline()
        }
    }

    /// An NVIDIA Ampere GPU (sm_80, A100) through CUDA: warps of 32, 1024 threads, 163 KiB of
    /// shared memory per program (beyond 48 KiB the kernel declares it dynamic and the runtime
    /// opts in at launch), 16-byte vector accesses, 4 KiB of kernel parameters, mma.sync on
    /// f16 and bf16 (m16n8k16) and on tf32 (m16n8k8).
    pub fn cuda_sm80() -> Target {
        Target {
            name: "cuda:sm_80".into(),
            isa: Isa::Ptx,
            subgroup_size: 32,
            max_threads_per_program: 1024,
            shared_memory_bytes: 163 * 1024,
            subgroup_ops: SubgroupOps { shuffle: true, arithmetic: false },
            f16: true,
            bf16: true,
            i8: true,
            i16: true,
            i64: true,
            atomic_float_add: true,
            ieee_preserve: true,
            f16_rte: true,
            f32_denorm_preserve: true,
            max_vector_bytes: 16,
            max_push_constant_bytes: 4096,
            max_grid: [2147483647, 65535, 65535],
            registers_per_thread: 255,
            matrix: vec![MatrixInstr::mma_m16n8k16(DType::F16), MatrixInstr::mma_m16n8k16(DType::BF16), MatrixInstr::mma_m16n8k8_tf32()],
        }
    }

    /// An NVIDIA Hopper GPU (sm_90) through CUDA; the limits of [`Target::cuda_sm80`] but 227
    /// KiB of shared memory per program.
    pub fn cuda_sm90() -> Target {
        Target { name: "cuda:sm_90".into(), shared_memory_bytes: 227 * 1024, ..Target::cuda_sm80() }
    }

    /// An NVIDIA Hopper GPU with its architecture-specific instructions (sm_90a): the limits
    /// of [`Target::cuda_sm90`], and warpgroup matrix instructions (`wgmma`) before mma.sync
    /// (f16 and bf16; tf32 `dot`s stay on mma.sync: wgmma reads tf32 only K-major, and `b`
    /// is staged N-major).
    pub fn cuda_sm90a() -> Target {
        let mut matrix = vec![MatrixInstr::wgmma_m64k16(DType::F16), MatrixInstr::wgmma_m64k16(DType::BF16)];
        matrix.extend(Target::cuda_sm90().matrix);
        Target { name: "cuda:sm_90a".into(), matrix, ..Target::cuda_sm90() }
    }

    /// The NVIDIA H200 through CUDA (sm_90a).
    pub fn h200_cuda() -> Target {
        Target { name: "cuda:nvidia-h200".into(), ..Target::cuda_sm90a() }
    }

    /// An AMD CDNA2 GPU (gfx90a, MI200) through HSA: wavefronts of 64, 1024 threads, 64 KiB of
    /// LDS per workgroup, 16-byte vector accesses, f16 and bf16 matrix instructions (MFMA
    /// 16x16x16; bf16 through the `_1k` forms, although bf16 arithmetic is not native).
    /// Compile-only: nothing here runs AMD code.
    pub fn amd_gfx90a() -> Target {
        Target {
            name: "amdgcn:gfx90a".into(),
            isa: Isa::Amdgcn,
            subgroup_size: 64,
            max_threads_per_program: 1024,
            shared_memory_bytes: 64 * 1024,
            subgroup_ops: SubgroupOps { shuffle: true, arithmetic: false },
            f16: true,
            bf16: false,
            i8: true,
            i16: true,
            i64: true,
            atomic_float_add: true,
            ieee_preserve: true,
            f16_rte: true,
            f32_denorm_preserve: true,
            max_vector_bytes: 16,
            max_push_constant_bytes: 4096,
            max_grid: [2147483647, 65535, 65535],
            // 256 VGPRs and 256 AGPRs a lane (the accumulators of MFMA live in the second half).
            registers_per_thread: 512,
            matrix: vec![MatrixInstr::mfma_16x16x16(DType::F16), MatrixInstr::mfma_16x16x16(DType::BF16)],
        }
    }

    /// An AMD CDNA3 GPU (gfx942, MI300): the limits of [`Target::amd_gfx90a`], wave64.
    pub fn amd_gfx942() -> Target {
        Target { name: "amdgcn:gfx942".into(), ..Target::amd_gfx90a() }
    }

    /// An AMD RDNA3 GPU (gfx1100, RX 7900) in wave32 mode: the layouts and reductions are built
    /// for 32 lanes, like a CUDA warp. Its matrix instructions are WMMA (f16 and bf16), not
    /// MFMA.
    pub fn amd_gfx1100() -> Target {
        let matrix = vec![MatrixInstr::wmma_16x16x16(DType::F16), MatrixInstr::wmma_16x16x16(DType::BF16)];
        Target { name: "amdgcn:gfx1100".into(), subgroup_size: 32, registers_per_thread: 256, matrix, ..Target::amd_gfx90a() }
    }

    /// Offline presets by name, for `tilekit ir --gpu --target NAME`.
    pub fn preset(name: &str) -> Option<Target> {
        match name {
            "vulkan" | "vulkan-baseline" => Some(Target::vulkan_baseline()),
            "lavapipe" | "llvmpipe" | "vulkan:llvmpipe" => Some(Target::lavapipe()),
            "h200" | "h200-vulkan" | "vulkan:nvidia-h200" => Some(Target::h200_vulkan()),
            "sm_80" | "sm80" | "cuda:sm_80" => Some(Target::cuda_sm80()),
            "sm_90" | "sm90" | "cuda:sm_90" => Some(Target::cuda_sm90()),
            "sm_90a" | "sm90a" | "cuda:sm_90a" => Some(Target::cuda_sm90a()),
            "h200-cuda" | "cuda:nvidia-h200" => Some(Target::h200_cuda()),
            "gfx90a" | "amdgcn:gfx90a" => Some(Target::amd_gfx90a()),
            "gfx942" | "amdgcn:gfx942" => Some(Target::amd_gfx942()),
            "gfx1100" | "amdgcn:gfx1100" => Some(Target::amd_gfx1100()),
            _ => None,
        }
    }

    /// The SPIR-V presets.
    pub const PRESETS: [&'static str; 3] = ["vulkan-baseline", "lavapipe", "h200-vulkan"];
    /// The PTX presets (compiled by the `ptx` feature).
    pub const CUDA_PRESETS: [&'static str; 4] = ["sm_80", "sm_90", "sm_90a", "h200-cuda"];
    /// The AMDGCN presets (compiled by the `amdgcn` feature; compile-only).
    pub const AMD_PRESETS: [&'static str; 3] = ["gfx90a", "gfx942", "gfx1100"];

    /// The registers one invocation may use on a Vulkan device, which Vulkan does not report: by
    /// vendor (AMD's 256 VGPRs; NVIDIA's 255 as the baseline's, and the baseline's for the rest),
    /// none on a CPU (lavapipe keeps values on the stack).
    pub fn vulkan_registers_per_thread(cpu: bool, vendor_id: u32) -> u32 {
        match (cpu, vendor_id) {
            (true, _) => 0,
            (_, 0x1002) => 256,
            _ => Target::vulkan_baseline().registers_per_thread,
        }
    }

    /// The target a recorded run planned for, as far as a results file's platform tells it:
    /// its API (`cuda`, `vulkan`, `wgpu`, `wgpu-naga`, or `wgpu_naga` as results files spell
    /// it), hardware name, whether the device is a CPU and its PCI vendor. The H200 presets
    /// where the name is an H200's or an H100's (the same sm_90 multiprocessors and driver
    /// features; their cooperative matrices decide how a `dot` lowers, so what a thread holds);
    /// else sm_90a through CUDA, lavapipe on a CPU, and the baseline GPU with its vendor's
    /// registers through Vulkan. `None` for a platform nothing is planned for (the interpreter,
    /// AMDGCN's own presets).
    pub fn for_platform(api: &str, hardware: &str, cpu: bool, vendor_id: Option<u32>) -> Option<Target> {
        let h200 = hardware.contains("H200");
        let h100 = hardware.contains("H100");
        match api.replace('_', "-").as_str() {
            "cuda" if h200 => Some(Target::h200_cuda()),
            "cuda" => Some(Target::cuda_sm90a()),
            "vulkan" | "wgpu" | "wgpu-naga" if cpu => Some(Target::lavapipe()),
            "vulkan" | "wgpu" | "wgpu-naga" if h200 => Some(Target::h200_vulkan()),
            "vulkan" | "wgpu" | "wgpu-naga" if h100 => Some(Target { name: "vulkan:nvidia-h100".into(), ..Target::h200_vulkan() }),
            "vulkan" | "wgpu" | "wgpu-naga" => {
                Some(Target { registers_per_thread: Target::vulkan_registers_per_thread(false, vendor_id.unwrap_or(0)), ..Target::vulkan_baseline() })
            }
            _ => None,
        }
    }

    /// `num / den` of the registers a thread may use, rounded up: how much of something that
    /// must stay in registers (a row, an accumulator tile) a kernel lets one thread hold, the
    /// rest of the file left to addresses, masks and temporaries. `None` where nothing bounds
    /// it ([`Target::registers_per_thread`] 0).
    pub fn register_share(&self, num: u32, den: u32) -> Option<usize> {
        (self.registers_per_thread > 0).then(|| (self.registers_per_thread as usize * num as usize).div_ceil(den.max(1) as usize))
    }

    /// Whether values of `dtype` can live in buffers and registers on this target.
    pub fn supports(&self, dtype: DType) -> bool {
        match dtype {
            DType::F16 => self.f16,
            // bf16 is emulated on 16-bit integers where the device has no native support.
            DType::BF16 => self.i16 || self.bf16,
            DType::I8 | DType::U8 | DType::I1 => self.i8,
            DType::I16 => self.i16,
            DType::I64 => self.i64,
            _ => true,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({:?}, warp {}, {} threads, {} B shared)",
            self.name, self.isa, self.subgroup_size, self.max_threads_per_program, self.shared_memory_bytes
        )
    }
}
