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
    let c: Vec<E::V> = c.iter().map(|&k| f32c(e, k)).collect();
    horner_v(e, z, &c)
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

/// `tanh(x)` of an f32 `x`. GLSL's `Tanh` is only as precise as its defining formula
/// `(e^x - e^-x) / (e^x + e^-x)`, which cancels near 0 (lavapipe's `tanh(1e-4)` is off by
/// 1.7e-4 relative). On `|x|`: below 0.625 an odd polynomial (Cephes', within 0.8 ulp); above
/// `1 - 2 / (e^2|x| + 1)`, where nothing cancels, saturating to 1 once the exponential
/// overflows. Either is +0 or positive (or a NaN, which stays one), so x's sign goes on by its
/// bit: zeros come back as they came, and no comparison or negation is spent on the sign (the
/// function sits in elementwise kernels whose throughput is their instruction count).
#[allow(clippy::excessive_precision)]
pub fn tanh<E: Emitter + ?Sized>(e: &mut E, x: E::V) -> E::V {
    let f = DType::F32;
    let a = e.unary(UnaryOp::Abs, f, x);
    let z = f32op(e, BinaryOp::Mul, a, a);
    let t = horner(
        e,
        z,
        &[-0.333_332_806_825_637_8, 0.133_314_415_812_492_37, -0.053_739_715_367_555_62, 0.020_639_088_004_827_5, -0.005_704_988_725_483_417_5],
    );
    let az = f32op(e, BinaryOp::Mul, a, z);
    let m = f32op(e, BinaryOp::Mul, az, t);
    // |m| < a below 0.625, and +0 + -0 is +0: never negative.
    let small = f32op(e, BinaryOp::Add, a, m);
    let (one, two) = (f32c(e, 1.0), f32c(e, 2.0));
    let a2 = f32op(e, BinaryOp::Mul, a, two);
    let ex = e.unary(UnaryOp::Exp, f, a2);
    let e1 = f32op(e, BinaryOp::Add, ex, one);
    let q = f32op(e, BinaryOp::Div, two, e1);
    let wide = f32op(e, BinaryOp::Sub, one, q);
    // A NaN is not below the limit: it takes the exponential's path, which keeps it a NaN.
    let limit = f32c(e, 0.625);
    let is_small = e.cmp(CmpPred::Lt, f, a, limit);
    let y = e.select(f, is_small, small, wide);
    crate::gpu::legalize::with_sign_of(e, y, x)
}

/// `erf(x)` of an f32 `x`: musl's `erff`, its four ranges computed side by side and selected
/// (no branch a warp would diverge on). Within 4 ulp plus 2^-24 absolute with an `exp` and a
/// division within 3 ulp ([`crate::precision`]); odd, saturating to +-1 beyond 6; NaN gives NaN.
#[allow(clippy::excessive_precision)]
pub fn erf<E: Emitter + ?Sized>(e: &mut E, x: E::V) -> E::V {
    let f = DType::F32;
    let a = e.unary(UnaryOp::Abs, f, x);
    let one = f32c(e, 1.0);
    // |x| < 0.84375: x + x R(x^2) / S(x^2).
    let z = f32op(e, BinaryOp::Mul, x, x);
    let r = horner(e, z, &[1.283_791_661_3e-01, -3.250_420_987_6e-01, -2.848_174_981_8e-02, -5.770_270_247_0e-03, -2.376_301_745_2e-05]);
    let s = horner(e, z, &[1.0, 3.979_172_110_6e-01, 6.502_225_250_0e-02, 5.081_306_211_7e-03, 1.324_947_370_4e-04, -3.960_228_241_3e-06]);
    let y = f32op(e, BinaryOp::Div, r, s);
    let xy = f32op(e, BinaryOp::Mul, x, y);
    let small = f32op(e, BinaryOp::Add, x, xy);
    // 0.84375 <= |x| < 1.25: erx + P(|x| - 1) / Q(|x| - 1).
    let s1 = f32op(e, BinaryOp::Sub, a, one);
    let p = horner(
        e,
        s1,
        &[
            -2.362_118_568_3e-03,
            4.148_561_060_4e-01,
            -3.722_078_800_2e-01,
            3.183_466_196_1e-01,
            -1.108_946_949_2e-01,
            3.547_830_507_2e-02,
            -2.166_375_517_8e-03,
        ],
    );
    let q = horner(
        e,
        s1,
        &[1.0, 1.064_208_820_5e-01, 5.403_979_420_7e-01, 7.182_865_589_9e-02, 1.261_712_163_7e-01, 1.363_708_358_3e-02, 1.198_450_010_3e-02],
    );
    let pq = f32op(e, BinaryOp::Div, p, q);
    let one_m_erx = f32c(e, 1.0 - 8.450_629_115_1e-01);
    let erfc1 = f32op(e, BinaryOp::Sub, one_m_erx, pq);
    let mid = f32op(e, BinaryOp::Sub, one, erfc1);
    // 1.25 <= |x| < 6: 1 - erfc, erfc = exp(-z^2 - 0.5625) exp((z - |x|)(z + |x|) + R/S) / |x|
    // with z = |x| cut to 11 significant bits (so z^2 is exact), R/S of 1/x^2 from one of two
    // rational fits split at 1/0.35.
    let aa = f32op(e, BinaryOp::Mul, a, a);
    let s2 = f32op(e, BinaryOp::Div, one, aa);
    const RA: [f32; 8] = [
        -9.864_944_033_3e-03,
        -6.938_585_639_0e-01,
        -1.055_862_617_5e+01,
        -6.237_533_187_9e+01,
        -1.623_966_674_8e+02,
        -1.846_050_872_8e+02,
        -8.128_743_743_9e+01,
        -9.814_329_147_3e+00,
    ];
    const RB: [f32; 8] = [
        -9.864_943_102_0e-03,
        -7.992_832_660_7e-01,
        -1.775_795_555_1e+01,
        -1.606_363_830_6e+02,
        -6.375_664_672_9e+02,
        -1.025_095_092_8e+03,
        -4.835_191_955_6e+02,
        0.0,
    ];
    const SA: [f32; 9] = [
        1.0,
        1.965_127_182_0e+01,
        1.376_577_606_2e+02,
        4.345_658_874_5e+02,
        6.453_872_680_7e+02,
        4.290_081_481_9e+02,
        1.086_350_021_4e+02,
        6.570_249_557_5e+00,
        -6.042_441_353_2e-02,
    ];
    const SB: [f32; 9] = [
        1.0,
        3.033_806_037_9e+01,
        3.257_925_109_9e+02,
        1.536_729_614_3e+03,
        3.199_858_154_3e+03,
        2.553_050_293_0e+03,
        4.745_285_339_4e+02,
        -2.244_095_230_1e+01,
        0.0,
    ];
    let split = f32c(e, f32::from_bits(0x4036_db6d));
    let near = e.cmp(CmpPred::Lt, f, a, split);
    let pick = |e: &mut E, xs: &[f32], ys: &[f32]| -> Vec<E::V> {
        xs.iter()
            .zip(ys)
            .map(|(&u, &v)| {
                let (cu, cv) = (f32c(e, u), f32c(e, v));
                e.select(f, near, cu, cv)
            })
            .collect()
    };
    let rc = pick(e, &RA, &RB);
    let sc = pick(e, &SA, &SB);
    let rr = horner_v(e, s2, &rc);
    let ss = horner_v(e, s2, &sc);
    // musl clears the low 12 bits of |x|'s f32 encoding; on [1, 8) that is |x| rounded down to
    // a multiple of 2^-10, 2^-9 or 2^-8 by binade, which scaling by powers of two (exact) and
    // `floor` compute.
    let (two, four) = (f32c(e, 2.0), f32c(e, 4.0));
    let (s1024, s512, s256) = (f32c(e, 1024.0), f32c(e, 512.0), f32c(e, 256.0));
    let below2 = e.cmp(CmpPred::Lt, f, a, two);
    let below4 = e.cmp(CmpPred::Lt, f, a, four);
    let scale = e.select(f, below4, s512, s256);
    let scale = e.select(f, below2, s1024, scale);
    let (i1024, i512, i256) = (f32c(e, 1.0 / 1024.0), f32c(e, 1.0 / 512.0), f32c(e, 1.0 / 256.0));
    let inv = e.select(f, below4, i512, i256);
    let inv = e.select(f, below2, i1024, inv);
    let scaled = f32op(e, BinaryOp::Mul, a, scale);
    let cut = e.unary(UnaryOp::Floor, f, scaled);
    let zz = f32op(e, BinaryOp::Mul, cut, inv);
    let zsq = f32op(e, BinaryOp::Mul, zz, zz);
    let nzsq = e.unary(UnaryOp::Neg, f, zsq);
    let c0565 = f32c(e, 0.5625);
    let e1arg = f32op(e, BinaryOp::Sub, nzsq, c0565);
    let e1 = e.unary(UnaryOp::Exp, f, e1arg);
    let zma = f32op(e, BinaryOp::Sub, zz, a);
    let zpa = f32op(e, BinaryOp::Add, zz, a);
    let prod = f32op(e, BinaryOp::Mul, zma, zpa);
    let rs = f32op(e, BinaryOp::Div, rr, ss);
    let e2arg = f32op(e, BinaryOp::Add, prod, rs);
    let e2 = e.unary(UnaryOp::Exp, f, e2arg);
    let ee = f32op(e, BinaryOp::Mul, e1, e2);
    let erfc2 = f32op(e, BinaryOp::Div, ee, a);
    let tail = f32op(e, BinaryOp::Sub, one, erfc2);
    // Select by |x|, then restore the sign; NaN passes through.
    let (c125, c6) = (f32c(e, 1.25), f32c(e, 6.0));
    let lt125 = e.cmp(CmpPred::Lt, f, a, c125);
    let lt6 = e.cmp(CmpPred::Lt, f, a, c6);
    let y = e.select(f, lt6, tail, one);
    let y = e.select(f, lt125, mid, y);
    let neg = e.unary(UnaryOp::Neg, f, y);
    let zero = f32c(e, 0.0);
    let is_neg = e.cmp(CmpPred::Lt, f, x, zero);
    let y = e.select(f, is_neg, neg, y);
    let c084 = f32c(e, 0.84375);
    let lt084 = e.cmp(CmpPred::Lt, f, a, c084);
    let y = e.select(f, lt084, small, y);
    let nan = e.cmp(CmpPred::Ne, f, x, x);
    e.select(f, nan, x, y)
}

/// [`horner`] with coefficients that are values (selected per range, for `erf`).
fn horner_v<E: Emitter + ?Sized>(e: &mut E, z: E::V, c: &[E::V]) -> E::V {
    let mut acc = c[c.len() - 1];
    for &k in c.iter().rev().skip(1) {
        let m = f32op(e, BinaryOp::Mul, z, acc);
        acc = f32op(e, BinaryOp::Add, k, m);
    }
    acc
}

#[cfg(test)]
#[path = "math_tests.rs"]
mod tests;
