//! How far each backend's math may be from the exact function: one table per (op, backend,
//! dtype), read by the check harness (`tilekit::check`), the fuzzer's comparison and the
//! accuracy tests, and written out in docs/semantics.md ("Accuracy of the math ops").
//!
//! A [`Bound`] is stated in units in the last place of the exact result in f32, plus an
//! absolute term, and holds over a domain ([`Bound::holds_at`]); f16 and bf16 results are the
//! f32 result rounded once, so they may differ by one more ulp of their own dtype. The bounds
//! are what each backend guarantees by construction (the interpreter's and emulator's libm, the
//! Vulkan precision table applied to the instructions the SPIR-V backend emits, libdevice's
//! documented errors on PTX, LLVM's AMDGPU expansions), not what one driver happened to
//! measure; `tests/accuracy.rs` measures every op against them.

use crate::dtype::DType;
use crate::ir::{BinaryOp, Op, Program, UnaryOp};

/// An approximate math op: a function whose result a backend may round more than once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MathOp {
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    /// Float division.
    Div,
    Sin,
    Cos,
    Tanh,
    Erf,
}

impl MathOp {
    pub const ALL: [MathOp; 11] = [
        MathOp::Exp,
        MathOp::Exp2,
        MathOp::Log,
        MathOp::Log2,
        MathOp::Sqrt,
        MathOp::Rsqrt,
        MathOp::Div,
        MathOp::Sin,
        MathOp::Cos,
        MathOp::Tanh,
        MathOp::Erf,
    ];

    /// The name in the text form (`exp`, `div`).
    pub fn name(self) -> &'static str {
        match self {
            MathOp::Exp => "exp",
            MathOp::Exp2 => "exp2",
            MathOp::Log => "log",
            MathOp::Log2 => "log2",
            MathOp::Sqrt => "sqrt",
            MathOp::Rsqrt => "rsqrt",
            MathOp::Div => "div",
            MathOp::Sin => "sin",
            MathOp::Cos => "cos",
            MathOp::Tanh => "tanh",
            MathOp::Erf => "erf",
        }
    }

    /// The approximate op a unary op is, if any (`abs`, `floor`, `round` are exact).
    pub fn from_unary(op: UnaryOp) -> Option<MathOp> {
        Some(match op {
            UnaryOp::Exp => MathOp::Exp,
            UnaryOp::Exp2 => MathOp::Exp2,
            UnaryOp::Log => MathOp::Log,
            UnaryOp::Log2 => MathOp::Log2,
            UnaryOp::Sqrt => MathOp::Sqrt,
            UnaryOp::Rsqrt => MathOp::Rsqrt,
            UnaryOp::Sin => MathOp::Sin,
            UnaryOp::Cos => MathOp::Cos,
            UnaryOp::Tanh => MathOp::Tanh,
            UnaryOp::Erf => MathOp::Erf,
            UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => return None,
        })
    }

    /// The approximate op a float binary op is, if any.
    pub fn from_binary(op: BinaryOp) -> Option<MathOp> {
        (op == BinaryOp::Div).then_some(MathOp::Div)
    }

    /// The exact function in f64 (of `x`, and of `y` for division), the reference the bounds
    /// are measured against.
    pub fn reference(self, x: f64, y: f64) -> f64 {
        match self {
            MathOp::Exp => x.exp(),
            MathOp::Exp2 => x.exp2(),
            MathOp::Log => x.ln(),
            MathOp::Log2 => x.log2(),
            MathOp::Sqrt => x.sqrt(),
            MathOp::Rsqrt => 1.0 / x.sqrt(),
            MathOp::Div => x / y,
            MathOp::Sin => x.sin(),
            MathOp::Cos => x.cos(),
            MathOp::Tanh => x.tanh(),
            MathOp::Erf => libm::erf(x),
        }
    }
}

/// Who computes the math: the backend that emits it (both Vulkan runtimes, wgpu and ash, run
/// the SPIR-V backend's code).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MathBackend {
    Interpreter,
    /// The GPU lowering run on the CPU: the interpreter's functions.
    Emulator,
    Spirv,
    Ptx,
    Amdgcn,
}

impl MathBackend {
    pub const ALL: [MathBackend; 5] = [MathBackend::Interpreter, MathBackend::Emulator, MathBackend::Spirv, MathBackend::Ptx, MathBackend::Amdgcn];

    pub fn name(self) -> &'static str {
        match self {
            MathBackend::Interpreter => "interpreter",
            MathBackend::Emulator => "emulator",
            MathBackend::Spirv => "spirv",
            MathBackend::Ptx => "ptx",
            MathBackend::Amdgcn => "amdgcn",
        }
    }
}

/// The arguments of [`MathOp::Sin`] and [`MathOp::Cos`] up to which tilekit's own reduction
/// (`gpu::math`, on SPIR-V and AMDGCN) is accurate: k pi/2 is subtracted exactly while the
/// quadrant count k has at most 17 bits. Rotary embeddings at 128k positions stay inside it.
pub const SIN_COS_REDUCED: f64 = 131_072.0 * std::f64::consts::FRAC_PI_2;

/// An error bound: `|got - exact| <= (ulp + ulp_per_x |x|) ulp_f32(exact) + abs + abs_per_x |x|`,
/// for operands where [`Bound::holds_at`] does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    /// Units in the last place of the exact result in f32 (subnormal results: of 2^-149).
    pub ulp: f64,
    /// Further ulps per unit of |x| (Vulkan's `exp`: 3 + 2|x|).
    pub ulp_per_x: f64,
    /// An absolute error allowed on top (Vulkan's `log` near 1).
    pub abs: f64,
    /// Further absolute error per unit of |x| (the error of pi/2 times the quadrant in `sin`
    /// and `cos`, which matters where the result is near 0).
    pub abs_per_x: f64,
    /// The op, for its domain.
    op: MathOp,
    backend: MathBackend,
}

const fn b(op: MathOp, backend: MathBackend, ulp: f64, ulp_per_x: f64, abs: f64) -> Bound {
    Bound { ulp, ulp_per_x, abs, abs_per_x: 0.0, op, backend }
}

/// tilekit's own `sin` and `cos` ([`crate::gpu::math::sin_cos`]).
fn own_sin_cos(op: MathOp, backend: MathBackend) -> Bound {
    Bound { ulp: 4.0, ulp_per_x: 0.0, abs: 0.0, abs_per_x: tiny(42), op, backend }
}

/// 2^-n.
fn tiny(n: i32) -> f64 {
    2f64.powi(-n)
}

/// The bound on `op` computed by `backend` with results of `dtype` (f32, f16 or bf16). Every
/// backend computes f16 and bf16 math in f32 and rounds once, so the bound is the f32 one, and
/// [`Bound::tolerance`] adds the final rounding (one ulp of the dtype).
///
/// - Interpreter and emulator: the host's f32 functions (Rust's, glibc's on Linux: 1 ulp, `tanh`
///   2) and musl's `erff`; `sqrt` and division are IEEE operations, `rsqrt` is `1 / sqrt(x)`
///   (1.5 ulp).
/// - SPIR-V: the Vulkan precision table for the GLSL.std.450 instruction emitted (`Exp`, `Exp2`,
///   `Log`, `Log2`, `Sqrt`, `InverseSqrt`, `OpFDiv`), and for tilekit's own sequences (`sin`,
///   `cos`, `tanh`, `erf`) the bound derived from their polynomials with the driver's `exp` and
///   division at Vulkan's bounds.
/// - PTX: libdevice's documented errors (CUDA's math appendix) for `__nv_*f` with subnormals
///   kept, `exp` as `ex2.approx` of x log2 e (2 + 1.16|x| ulp, the bound Vulkan allows with room
///   to spare), `sqrt.rn` and `div.rn` correctly rounded.
/// - AMDGCN: LLVM 19's AMDGPU expansions without fast-math flags (OpenCL's full-profile bounds,
///   which they are written to meet), tilekit's own `sin`/`cos`, `tanh` and `erf` (the
///   sequences SPIR-V runs, `crate::gpu::math`), and the IR library in backends/amdgcn/src/math.ll
///   for `rsqrt`.
pub fn bound(op: MathOp, backend: MathBackend, _dtype: DType) -> Bound {
    use MathBackend as B;
    use MathOp as M;
    match backend {
        B::Interpreter | B::Emulator => match op {
            M::Sqrt | M::Div => b(op, backend, 0.5, 0.0, 0.0),
            // Two roundings, the second of a quotient whose ulp may be half the result's.
            M::Rsqrt => b(op, backend, 1.5, 0.0, 0.0),
            M::Tanh | M::Erf => b(op, backend, 2.0, 0.0, 0.0),
            _ => b(op, backend, 1.0, 0.0, 0.0),
        },
        B::Spirv => match op {
            M::Exp | M::Exp2 => b(op, backend, 3.0, 2.0, 0.0),
            // 3 ulp outside [0.5, 2], 2^-21 absolute inside.
            M::Log | M::Log2 => b(op, backend, 3.0, 0.0, tiny(21)),
            // Vulkan: "inherited from 1.0 / inversesqrt()", 2 ulp then a 2.5 ulp division.
            M::Sqrt => b(op, backend, 5.0, 0.0, 0.0),
            M::Rsqrt => b(op, backend, 2.0, 0.0, 0.0),
            M::Div => b(op, backend, 2.5, 0.0, 0.0),
            M::Sin | M::Cos => own_sin_cos(op, backend),
            M::Tanh => b(op, backend, 8.0, 0.0, 0.0),
            M::Erf => b(op, backend, 4.0, 0.0, tiny(24)),
        },
        B::Ptx => match op {
            M::Exp => b(op, backend, 2.0, 1.16, 0.0),
            M::Exp2 | M::Rsqrt | M::Sin | M::Cos | M::Tanh | M::Erf => b(op, backend, 2.0, 0.0, 0.0),
            M::Log | M::Log2 => b(op, backend, 1.0, 0.0, 0.0),
            M::Sqrt | M::Div => b(op, backend, 0.5, 0.0, 0.0),
        },
        B::Amdgcn => match op {
            M::Exp | M::Exp2 | M::Log | M::Log2 => b(op, backend, 3.0, 0.0, 0.0),
            M::Sqrt | M::Div => b(op, backend, 0.5, 0.0, 0.0),
            M::Rsqrt => b(op, backend, 1.0, 0.0, 0.0),
            M::Sin | M::Cos => own_sin_cos(op, backend),
            // The sequences SPIR-V runs (`crate::gpu::math::tanh`, `erf`), with an exp within
            // 3 ulp and a correctly rounded division: within SPIR-V's bounds.
            M::Tanh => b(op, backend, 8.0, 0.0, 0.0),
            M::Erf => b(op, backend, 4.0, 0.0, tiny(24)),
        },
    }
}

/// What tilekit promises on every backend: the loosest of [`bound`] over the backends, over
/// the narrowest domain (SPIR-V's).
pub fn promised(op: MathOp, dtype: DType) -> Bound {
    let mut p = bound(op, MathBackend::Interpreter, dtype);
    for backend in MathBackend::ALL {
        let q = bound(op, backend, dtype);
        p.ulp = p.ulp.max(q.ulp);
        p.ulp_per_x = p.ulp_per_x.max(q.ulp_per_x);
        p.abs = p.abs.max(q.abs);
        p.abs_per_x = p.abs_per_x.max(q.abs_per_x);
    }
    p.backend = MathBackend::Spirv;
    p
}

/// The approximate ops `program` computes, with their result dtypes, each once, in a fixed
/// order.
pub fn math_ops(program: &Program) -> Vec<(MathOp, DType)> {
    let mut out = Vec::new();
    program.walk(&mut |inst| {
        let op = match inst.op {
            Op::Unary { op, .. } => MathOp::from_unary(op),
            Op::Binary { op, .. } => MathOp::from_binary(op),
            _ => None,
        };
        if let (Some(op), Some(&v)) = (op, inst.results.first()) {
            let dtype = program.ty(v).dtype;
            if dtype.is_float() && !out.contains(&(op, dtype)) {
                out.push((op, dtype));
            }
        }
    });
    out.sort();
    out
}

/// The relative error `backend`'s math may add to a result of `program`: the largest
/// [`Bound::relative`] of the approximate ops it computes (0 when it computes none). A check that
/// compares against an exact reference adds it to its own tolerance, so that a correct kernel
/// passes on every conforming device; it does not model how errors grow through later
/// arithmetic (a difference of two nearly equal `exp`s), which the kernel's tolerance must.
pub fn program_relative(program: &Program, backend: MathBackend) -> f64 {
    math_ops(program).into_iter().map(|(op, dtype)| bound(op, backend, dtype).relative()).fold(0.0, f64::max)
}

/// One ulp of f32 at `x` (2^-149 below the normal range).
pub fn ulp_f32(x: f64) -> f64 {
    let a = x.abs();
    if !a.is_finite() {
        return f64::INFINITY;
    }
    if a < f32::MIN_POSITIVE as f64 {
        return tiny(149);
    }
    2f64.powi(a.log2().floor() as i32 - 23)
}

/// One ulp of `dtype` (f32, f16 or bf16) at `x`.
pub fn ulp(dtype: DType, x: f64) -> f64 {
    let (mantissa, min_normal) = match dtype {
        DType::F16 => (10, tiny(14)),
        DType::BF16 => (7, tiny(126)),
        _ => return ulp_f32(x),
    };
    let a = x.abs().max(min_normal);
    2f64.powi(a.log2().floor() as i32 - mantissa)
}

impl Bound {
    pub fn op(&self) -> MathOp {
        self.op
    }

    pub fn backend(&self) -> MathBackend {
        self.backend
    }

    /// Whether the bound says anything at operands `x` (and divisor `y`). Outside, Vulkan leaves
    /// the result undefined: `log`/`log2` of x <= 0, `sqrt` of x < 0, `rsqrt` of x <= 0, a
    /// divisor outside [2^-126, 2^126], an infinite operand, and on SPIR-V and AMDGCN `sin` and
    /// `cos` beyond [`SIN_COS_REDUCED`] (a value in [-1, 1], no more). The interpreter and PTX
    /// hold their bounds everywhere.
    pub fn holds_at(&self, x: f64, y: f64) -> bool {
        if x.is_nan() || (self.op == MathOp::Div && y.is_nan()) {
            return true;
        }
        match self.backend {
            MathBackend::Interpreter | MathBackend::Emulator | MathBackend::Ptx => true,
            MathBackend::Spirv | MathBackend::Amdgcn => {
                if x.is_infinite() {
                    return false;
                }
                match self.op {
                    MathOp::Log | MathOp::Log2 | MathOp::Rsqrt => x > 0.0,
                    MathOp::Sqrt => x >= 0.0,
                    MathOp::Div => y.is_finite() && (tiny(126)..=2f64.powi(126)).contains(&y.abs()),
                    MathOp::Sin | MathOp::Cos => x.abs() <= SIN_COS_REDUCED,
                    _ => true,
                }
            }
        }
    }

    /// The largest error allowed at operand `x` for the exact result `exact`, in a result of
    /// `dtype` (one more ulp of f16 or bf16 for the final rounding).
    pub fn tolerance(&self, dtype: DType, x: f64, exact: f64) -> f64 {
        let units = self.ulp + self.ulp_per_x * x.abs();
        let rounding = if dtype == DType::F32 { 0.0 } else { ulp(dtype, exact) };
        units * ulp_f32(exact) + self.abs + self.abs_per_x * x.abs() + rounding
    }

    /// Whether `got` is within the bound of `exact`, the function at `x` (and `y`) in f64:
    /// anything is, outside [`Bound::holds_at`]. NaN must meet NaN; an infinity must meet itself, or a result past `dtype`'s largest finite
    /// value by less than the tolerance; a zero of either sign meets zero.
    pub fn allows(&self, dtype: DType, x: f64, y: f64, exact: f64, got: f64) -> bool {
        if !self.holds_at(x, y) {
            return true;
        }
        if exact.is_nan() || got.is_nan() {
            return exact.is_nan() && got.is_nan();
        }
        if got == exact {
            return true;
        }
        let max = match dtype {
            DType::F16 => 65504.0,
            DType::BF16 => 3.389_531_389_251_535e38,
            _ => f32::MAX as f64,
        };
        let tol = self.tolerance(dtype, x, exact);
        if got.is_infinite() {
            return got.signum() == exact.signum() && exact.abs() + tol >= max;
        }
        (got - exact).abs() <= tol
    }

    /// A relative error that covers the bound for results of magnitude 1 or more with operands
    /// in |x| <= 88 (beyond it `exp` overflows f32): the floor a norm-wise check adds to its
    /// tolerance for an output computed with this op.
    pub fn relative(&self) -> f64 {
        (self.ulp + self.ulp_per_x * 88.0) * tiny(23) + self.abs + self.abs_per_x * 88.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promised_is_the_loosest() {
        for op in MathOp::ALL {
            let p = promised(op, DType::F32);
            for backend in MathBackend::ALL {
                let q = bound(op, backend, DType::F32);
                assert!(q.ulp <= p.ulp && q.ulp_per_x <= p.ulp_per_x && q.abs <= p.abs && q.abs_per_x <= p.abs_per_x, "{op:?} {backend:?}");
            }
        }
        assert_eq!(promised(MathOp::Exp, DType::F32).ulp_per_x, 2.0);
    }

    #[test]
    fn program_relative_takes_the_ops_a_program_computes() {
        let k = crate::Builder::new("t");
        let x = k.input("x", DType::F32);
        let y = k.output("y", DType::F32);
        let offs = k.arange(0, 16);
        let v = k.load(x, offs);
        k.store(y, offs, (v.tanh() / v).sqrt());
        let p = k.finish().unwrap();
        assert_eq!(math_ops(&p), vec![(MathOp::Sqrt, DType::F32), (MathOp::Div, DType::F32), (MathOp::Tanh, DType::F32)]);
        assert_eq!(program_relative(&p, MathBackend::Spirv), 8.0 * 2f64.powi(-23));
        assert_eq!(program_relative(&p, MathBackend::Ptx), 2.0 * 2f64.powi(-23));
    }

    #[test]
    fn tolerances() {
        let e = bound(MathOp::Exp, MathBackend::Spirv, DType::F32);
        // 3 + 2 * 10 ulp at e^10 (ulp 2^-9 there).
        assert_eq!(e.tolerance(DType::F32, 10.0, 10f64.exp()), 23.0 * 2f64.powi(-9));
        assert!(e.allows(DType::F32, 1.0, 0.0, 1f64.exp(), (1f32.exp() + 2.0 * f32::EPSILON) as f64));
        assert!(!e.allows(DType::F32, 1.0, 0.0, 1f64.exp(), 1f64.exp() * (1.0 + 1e-5)));
        assert!(e.allows(DType::F32, f64::NAN, 0.0, f64::NAN, f64::NAN));
        assert!(!e.allows(DType::F32, 1.0, 0.0, 1f64.exp(), f64::NAN));
        let l = bound(MathOp::Log, MathBackend::Spirv, DType::F32);
        assert!(l.allows(DType::F32, -1.0, 0.0, f64::NAN, f64::NAN));
        assert!(l.allows(DType::F32, -1.0, 0.0, f64::NAN, 3.0), "undefined below 0 on SPIR-V");
        let i = bound(MathOp::Log, MathBackend::Interpreter, DType::F32);
        assert!(!i.allows(DType::F32, -1.0, 0.0, f64::NAN, 3.0));
        assert_eq!(ulp(DType::F16, 1.0), 2f64.powi(-10));
        assert_eq!(ulp_f32(1e-40), 2f64.powi(-149));
    }
}
