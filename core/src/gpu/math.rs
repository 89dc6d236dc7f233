//! Math written once on the [`Emitter`] primitives, for backends whose own instruction is less
//! accurate than tilekit promises ([`crate::precision`]).
//!
//! Only IEEE multiplications, additions, comparisons, selects and `round` are used, so the
//! sequences give the same bits on every device that keeps f32 subnormals, except where a
//! driver fuses a multiplication and an addition (SPIR-V allows it without `NoContraction`),
//! which only drops a rounding (the bounds are derived, and measured on the host, without it).

use crate::dtype::{DType, Scalar};
use crate::gpu::Emitter;
use crate::ir::{BinaryOp, CmpPred, UnaryOp};

/// pi/2 as five f32 parts, the first four of 7 significant bits each: k times any of them is
/// exact while k has at most 17 bits ([`crate::precision::SIN_COS_REDUCED`]), and each
/// subtraction of such a product from the partly reduced x is exact where they cancel (Sterbenz),
/// so x - k pi/2 is computed with the error of the fifth part only (|k| 2^-52).
#[allow(clippy::excessive_precision)]
const PIO2: [f32; 5] = [1.5625, 0.008_178_710_937_5, 0.000_117_301_940_917_968_75, 3.129_243_850_708_008e-7, 9.920_936_294_705_03e-10];

/// sin(r) = r + r^3 S(r^2) on |r| <= pi/4 (FreeBSD's k_sinf, |sin(r)/r - s(r)| < 2^-37.5).
#[allow(clippy::excessive_precision)]
const SIN: [f32; 4] =
    [-0.166_666_666_416_265_235_595, 0.008_333_329_385_889_463_175_6, -0.000_198_393_348_360_966_317_347, 0.000_002_718_311_493_989_821_906_4];

/// cos(r) = 1 + r^2 C(r^2) on |r| <= pi/4 (FreeBSD's k_cosf, |cos(r) - c(r)| < 2^-34.1).
#[allow(clippy::excessive_precision)]
const COS: [f32; 4] =
    [-0.499_999_997_251_031_003_120, 0.041_666_623_323_739_063_189_4, -0.001_388_676_377_460_992_946_92, 0.000_024_390_448_796_277_409_065_4];

fn f32c<E: Emitter + ?Sized>(e: &mut E, v: f32) -> E::V {
    e.constant(DType::F32, Scalar::Float(v as f64))
}

fn f32op<E: Emitter + ?Sized>(e: &mut E, op: BinaryOp, a: E::V, b: E::V) -> E::V {
    e.binary(op, DType::F32, a, b)
}

/// `c[0] + z (c[1] + z (...))`.
fn horner<E: Emitter + ?Sized>(e: &mut E, z: E::V, c: &[f32]) -> E::V {
    let mut acc = f32c(e, c[c.len() - 1]);
    for &k in c.iter().rev().skip(1) {
        let m = f32op(e, BinaryOp::Mul, z, acc);
        let k = f32c(e, k);
        acc = f32op(e, BinaryOp::Add, k, m);
    }
    acc
}

/// `sin(x)` (or, with `cos`, `cos(x)`) of an f32 `x`: Cody-Waite reduction by pi/2 to
/// |r| <= pi/4 and quadrant k, then FreeBSD's minimax polynomials. Within 4 ulp plus
/// |x| 2^-42 absolute up to [`crate::precision::SIN_COS_REDUCED`]; beyond it a value in
/// [-1, 1] (as Vulkan's `Sin`, which promises nothing outside [-pi, pi]); NaN and infinities
/// give NaN; `sin(-0)` is -0.
pub fn sin_cos<E: Emitter + ?Sized>(e: &mut E, x: E::V, cos: bool) -> E::V {
    let f = DType::F32;
    let two_over_pi = f32c(e, std::f32::consts::FRAC_2_PI);
    let scaled = f32op(e, BinaryOp::Mul, x, two_over_pi);
    let k = e.unary(UnaryOp::Round, f, scaled);
    let mut r = x;
    for p in PIO2 {
        let p = f32c(e, p);
        let kp = f32op(e, BinaryOp::Mul, k, p);
        r = f32op(e, BinaryOp::Sub, r, kp);
    }
    // The quadrant of x, one further for cos (cos(x) = sin(x + pi/2)). A huge or NaN k
    // saturates or becomes 0 in the cast: the result is clamped or NaN below anyway.
    let ki = e.cast(f, DType::I32, k);
    let q = if cos {
        let one = e.constant(DType::I32, Scalar::Int(1));
        e.binary(BinaryOp::Add, DType::I32, ki, one)
    } else {
        ki
    };
    let z = f32op(e, BinaryOp::Mul, r, r);
    let ps = horner(e, z, &SIN);
    let rz = f32op(e, BinaryOp::Mul, r, z);
    let t = f32op(e, BinaryOp::Mul, rz, ps);
    let s = f32op(e, BinaryOp::Add, r, t);
    let pc = horner(e, z, &COS);
    let zc = f32op(e, BinaryOp::Mul, z, pc);
    let one = f32c(e, 1.0);
    let c = f32op(e, BinaryOp::Add, one, zc);
    let (i_one, i_two, i_zero) =
        (e.constant(DType::I32, Scalar::Int(1)), e.constant(DType::I32, Scalar::Int(2)), e.constant(DType::I32, Scalar::Int(0)));
    let odd_bit = e.binary(BinaryOp::And, DType::I32, q, i_one);
    let odd = e.cmp(CmpPred::Ne, DType::I32, odd_bit, i_zero);
    let y = e.select(f, odd, c, s);
    let neg_bit = e.binary(BinaryOp::And, DType::I32, q, i_two);
    let neg = e.cmp(CmpPred::Ne, DType::I32, neg_bit, i_zero);
    let ny = e.unary(UnaryOp::Neg, f, y);
    let y = e.select(f, neg, ny, y);
    // Beyond the exact reduction r may be far outside [-pi/4, pi/4]: keep the result in range.
    // maxNum/minNum would turn a NaN into a bound, so NaN is selected around the clamp.
    let (m1, p1) = (f32c(e, -1.0), f32c(e, 1.0));
    let lo = f32op(e, BinaryOp::Max, y, m1);
    let clamped = f32op(e, BinaryOp::Min, lo, p1);
    let nan = e.cmp(CmpPred::Ne, f, y, y);
    let y = e.select(f, nan, y, clamped);
    if cos {
        y
    } else {
        // x - k p is +0 for x = -0 (k = -0): a zero comes back as it came.
        let zero = f32c(e, 0.0);
        let is_zero = e.cmp(CmpPred::Eq, f, x, zero);
        e.select(f, is_zero, x, y)
    }
}

#[cfg(test)]
#[path = "math_tests.rs"]
mod tests;
