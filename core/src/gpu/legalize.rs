//! Float legalizations shared by the emitters whose drivers need them (SPIR-V and naga): built
//! once from [`Emitter`] primitives, so every emitter computes the same IEEE result where a
//! driver's own instruction would not.
//!
//! Each function works on f32; an emitter computes f16 through f32 (exact for what these
//! functions select: zeros, infinities, NaNs and the operands themselves). NaN and infinity
//! tests read the bits, which no compiler's fast-math assumptions fold away.

use crate::dtype::{DType, Scalar};
use crate::gpu::emit::Emitter;
use crate::ir::{BinaryOp, CmpPred, UnaryOp};

const SIGN: i64 = 0x8000_0000;
const EXPONENT: i64 = 0x7F80_0000;

fn f32_const<E: Emitter + ?Sized>(e: &mut E, v: f32) -> E::V {
    e.constant(DType::F32, Scalar::Float(v as f64))
}

fn u32_const<E: Emitter + ?Sized>(e: &mut E, v: i64) -> E::V {
    e.constant(DType::U32, Scalar::Int(v))
}

fn bits<E: Emitter + ?Sized>(e: &mut E, x: E::V) -> E::V {
    e.bitcast(DType::F32, DType::U32, x)
}

fn magnitude_bits<E: Emitter + ?Sized>(e: &mut E, x: E::V) -> E::V {
    let b = bits(e, x);
    let m = u32_const(e, SIGN - 1);
    e.binary(BinaryOp::And, DType::U32, b, m)
}

/// Whether the f32 `x` is a NaN.
pub fn is_nan<E: Emitter + ?Sized>(e: &mut E, x: E::V) -> E::V {
    let m = magnitude_bits(e, x);
    let inf = u32_const(e, EXPONENT);
    e.cmp(CmpPred::Gt, DType::U32, m, inf)
}

/// Whether the f32 `x` is infinite.
pub fn is_inf<E: Emitter + ?Sized>(e: &mut E, x: E::V) -> E::V {
    let m = magnitude_bits(e, x);
    let inf = u32_const(e, EXPONENT);
    e.cmp(CmpPred::Eq, DType::U32, m, inf)
}

/// The sign bit of the f32 `x` alone, as a u32.
fn sign_bits<E: Emitter + ?Sized>(e: &mut E, x: E::V) -> E::V {
    let b = bits(e, x);
    let s = u32_const(e, SIGN);
    e.binary(BinaryOp::And, DType::U32, b, s)
}

/// Whether the sign bit of the f32 `x` is set (true for -0 and negative NaNs too).
pub fn sign_bit<E: Emitter + ?Sized>(e: &mut E, x: E::V) -> E::V {
    let sign = sign_bits(e, x);
    let zero = u32_const(e, 0);
    e.cmp(CmpPred::Ne, DType::U32, sign, zero)
}

/// The f32 `mag`, whose sign bit is clear (+0, positive or a NaN), with the sign of the f32 `x`:
/// one or, where a comparison and a negation would select it.
pub fn with_sign_of<E: Emitter + ?Sized>(e: &mut E, mag: E::V, x: E::V) -> E::V {
    let s = sign_bits(e, x);
    let m = bits(e, mag);
    let r = e.binary(BinaryOp::Or, DType::U32, m, s);
    e.bitcast(DType::U32, DType::F32, r)
}

/// A zero (or, with `inf`, an infinity) whose sign is sign(x) xor `negative`.
fn signed_special<E: Emitter + ?Sized>(e: &mut E, x: E::V, negative: bool, inf: bool) -> E::V {
    let mut s = sign_bits(e, x);
    if negative {
        let mask = u32_const(e, SIGN);
        s = e.binary(BinaryOp::Xor, DType::U32, s, mask);
    }
    if inf {
        let i = u32_const(e, EXPONENT);
        s = e.binary(BinaryOp::Or, DType::U32, s, i);
    }
    e.bitcast(DType::U32, DType::F32, s)
}

/// f32 `a op b` where `a` or `b` is a constant zero (`za`, `zb`: whether it is one, and its
/// sign, true for -0), with the IEEE result selected explicitly; `None` when neither is or the
/// rule does not apply to `op`. Drivers simplify `x * 0`, `0 / x` and `x + 0` as if there were
/// no NaNs, infinities or signed zeros whatever a module's float controls say (lavapipe's code
/// generator does it while it builds the instructions, so `NoContraction` does not stop it).
/// The operations this emits on `a` and `b` involve no constant zero.
pub fn with_constant_zero<E: Emitter + ?Sized>(e: &mut E, op: BinaryOp, a: E::V, b: E::V, za: Option<bool>, zb: Option<bool>) -> Option<E::V> {
    if za.is_none() && zb.is_none() {
        return None;
    }
    let zero = f32_const(e, 0.0);
    Some(match (op, za, zb) {
        // x * 0: NaN for NaN or infinite x, else a zero with the product's sign.
        (BinaryOp::Mul, _, Some(neg)) | (BinaryOp::Mul, Some(neg), None) => {
            let x = if zb.is_some() { a } else { b };
            let n = is_nan(e, x);
            let i = is_inf(e, x);
            let bad = e.binary(BinaryOp::Or, DType::I1, n, i);
            let z = signed_special(e, x, neg, false);
            let nan = f32_const(e, f32::NAN);
            e.select(DType::F32, bad, nan, z)
        }
        // 0 / 0 is NaN.
        (BinaryOp::Div, Some(_), Some(_)) => f32_const(e, f32::NAN),
        // 0 / x: NaN for NaN or zero x, else a zero with the quotient's sign; x / 0: NaN for
        // NaN or zero x, else an infinity with the quotient's sign.
        (BinaryOp::Div, Some(neg), None) | (BinaryOp::Div, None, Some(neg)) => {
            let x = if za.is_some() { b } else { a };
            let n = is_nan(e, x);
            let z = e.cmp(CmpPred::Eq, DType::F32, x, zero);
            let bad = e.binary(BinaryOp::Or, DType::I1, n, z);
            let r = signed_special(e, x, neg, za.is_none());
            let nan = f32_const(e, f32::NAN);
            e.select(DType::F32, bad, nan, r)
        }
        // x + 0 and x - (-0): x, except that -0 + 0 is +0.
        (BinaryOp::Add, _, Some(false)) | (BinaryOp::Sub, _, Some(true)) => {
            let z = e.cmp(CmpPred::Eq, DType::F32, a, zero);
            e.select(DType::F32, z, zero, a)
        }
        (BinaryOp::Add, Some(false), None) => {
            let z = e.cmp(CmpPred::Eq, DType::F32, b, zero);
            e.select(DType::F32, z, zero, b)
        }
        // x + (-0) and x - 0: x itself.
        (BinaryOp::Add, _, Some(true)) | (BinaryOp::Sub, _, Some(false)) => a,
        (BinaryOp::Add, Some(true), None) => b,
        // 0 - x: -x, except that 0 - 0 and 0 - (-0) are +0; -0 - x is -x.
        (BinaryOp::Sub, Some(neg), None) => {
            let minus = e.unary(UnaryOp::Neg, DType::F32, b);
            if neg {
                minus
            } else {
                let z = e.cmp(CmpPred::Eq, DType::F32, b, zero);
                e.select(DType::F32, z, zero, minus)
            }
        }
        _ => return None,
    })
}

/// C's `fmod(a, b)` on f32 from `raw`, a driver's remainder computed as `a - b * trunc(a / b)`
/// (SPIR-V's OpFRem, WGSL's `%`). The quotient is only accurate to a few ulp (NVIDIA's is
/// approximate), so when it is an integer trunc() can land one off and the remainder a whole
/// |b| off (150 % -75 gave 75): with t = r * sign(a), t is brought into [0, |b|) by one step
/// either way. The result, zeros included, takes a's sign bit (drivers leave a zero's sign to
/// themselves); `a % inf` is a, and `a % 0` and `inf % b` are NaN, selected explicitly because
/// drivers simplify the remainder by a constant zero to `a`.
pub fn fmod<E: Emitter + ?Sized>(e: &mut E, a: E::V, b: E::V, raw: E::V) -> E::V {
    let zero = f32_const(e, 0.0);
    let (one, minus_one) = (f32_const(e, 1.0), f32_const(e, -1.0));
    let below_zero = e.cmp(CmpPred::Lt, DType::F32, a, zero);
    let s = e.select(DType::F32, below_zero, minus_one, one);
    let ay = e.unary(UnaryOp::Abs, DType::F32, b);
    let t = e.binary(BinaryOp::Mul, DType::F32, raw, s);
    let below = e.cmp(CmpPred::Lt, DType::F32, t, zero);
    let up = e.binary(BinaryOp::Add, DType::F32, t, ay);
    let t = e.select(DType::F32, below, up, t);
    let above = e.cmp(CmpPred::Ge, DType::F32, t, ay);
    let down = e.binary(BinaryOp::Sub, DType::F32, t, ay);
    let t = e.select(DType::F32, above, down, t);
    let r = e.binary(BinaryOp::Mul, DType::F32, t, s);
    let negative = sign_bit(e, a);
    let magnitude = e.unary(UnaryOp::Abs, DType::F32, r);
    let negated = e.unary(UnaryOp::Neg, DType::F32, magnitude);
    let r = e.select(DType::F32, negative, negated, magnitude);
    let b_inf = is_inf(e, b);
    let a_inf = is_inf(e, a);
    let a_fin = e.unary(UnaryOp::Not, DType::I1, a_inf);
    let keep = e.binary(BinaryOp::And, DType::I1, b_inf, a_fin);
    let r = e.select(DType::F32, keep, a, r);
    let b_zero = e.cmp(CmpPred::Eq, DType::F32, b, zero);
    let nan_case = e.binary(BinaryOp::Or, DType::I1, b_zero, a_inf);
    let nan = f32_const(e, f32::NAN);
    e.select(DType::F32, nan_case, nan, r)
}

/// `log(x)` or `log2(x)` from the driver's `log` (`raw_log`, called once) with subnormal inputs
/// scaled into the normal range first (`log(x) = log(x 2^24) - 24 ln 2`): lavapipe's logarithm
/// of a subnormal was neither the flushed result nor within Vulkan's 3 ulp. A device that
/// flushes subnormal inputs still sees zero and returns -inf.
pub fn log<E: Emitter + ?Sized>(e: &mut E, natural: bool, x: E::V, raw_log: impl FnOnce(&mut E, E::V) -> E::V) -> E::V {
    let min_normal = f32_const(e, f32::MIN_POSITIVE);
    let zero = f32_const(e, 0.0);
    let below = e.cmp(CmpPred::Lt, DType::F32, x, min_normal);
    let positive = e.cmp(CmpPred::Gt, DType::F32, x, zero);
    let sub = e.binary(BinaryOp::And, DType::I1, below, positive);
    let (scale, one) = (f32_const(e, 16_777_216.0), f32_const(e, 1.0));
    let factor = e.select(DType::F32, sub, scale, one);
    let xs = e.binary(BinaryOp::Mul, DType::F32, x, factor);
    let r = raw_log(e, xs);
    let shift = f32_const(e, if natural { 24.0 * std::f32::consts::LN_2 } else { 24.0 });
    let back = e.binary(BinaryOp::Sub, DType::F32, r, shift);
    e.select(DType::F32, sub, back, r)
}

/// f32 `x` converted to integer dtype `to` (not `i1`) with the cast's semantics: NaN gives 0,
/// out-of-range values saturate, the rest truncate toward zero. `convert` is the driver's
/// truncating conversion, called once on a value in range.
pub fn f32_to_int<E: Emitter + ?Sized>(e: &mut E, x: E::V, to: DType, convert: impl FnOnce(&mut E, E::V) -> E::V) -> E::V {
    let nan = is_nan(e, x);
    let zero = f32_const(e, 0.0);
    let x0 = e.select(DType::F32, nan, zero, x);
    let (lo, hi) = to.int_range().unwrap_or((i32::MIN as i64, i32::MAX as i64));
    let hi_up = hi as f32;
    // The largest f32 not above `hi`; values from `hi_up` on saturate by a select below.
    let hi_f = if hi_up as i128 > hi as i128 { f32::from_bits(hi_up.to_bits() - 1) } else { hi_up };
    let (lo_c, hi_c) = (f32_const(e, lo as f32), f32_const(e, hi_f));
    let c = e.binary(BinaryOp::Max, DType::F32, x0, lo_c);
    let c = e.binary(BinaryOp::Min, DType::F32, c, hi_c);
    let r = convert(e, c);
    if hi_f < hi_up {
        let lim = f32_const(e, hi_up);
        let big = e.cmp(CmpPred::Ge, DType::F32, x0, lim);
        let max = e.constant(to, Scalar::Int(hi));
        e.select(to, big, max, r)
    } else {
        r
    }
}

/// The bf16 nearest to the f32 `x` (ties to even), as its 16 bits in a u32; a NaN stays a
/// quiet NaN with x's sign and top payload bits, as the interpreter's conversion.
pub fn bf16_bits_from_f32<E: Emitter + ?Sized>(e: &mut E, x: E::V) -> E::V {
    let nan = is_nan(e, x);
    let t = bf16_in_high_half(e, x, nan);
    let k16 = u32_const(e, 16);
    e.binary(BinaryOp::Shr, DType::U32, t, k16)
}

/// The bf16 nearest to the f32 `x` in the high half of a u32 whose low half is what the
/// rounding left (meaningless): `x + 0x7fff + lsb`, the lsb being that of x's bf16 truncation,
/// so that a tie carries only onto an odd bf16; a NaN (`nan`: [`is_nan`], or a float test
/// where the module keeps NaNs) sets its quiet bit instead, which no carry can reach. Two of
/// them pack into one word with [`bf16_pack_high_halves`]: a mask and an or on top of the shift
/// that gives the low one its register form.
pub fn bf16_in_high_half<E: Emitter + ?Sized>(e: &mut E, x: E::V, nan: E::V) -> E::V {
    let b = bits(e, x);
    let k16 = u32_const(e, 16);
    let hi = e.binary(BinaryOp::Shr, DType::U32, b, k16);
    let one = u32_const(e, 1);
    let lsb = e.binary(BinaryOp::And, DType::U32, hi, one);
    let half = u32_const(e, 0x7fff);
    let r = e.binary(BinaryOp::Add, DType::U32, b, half);
    let r = e.binary(BinaryOp::Add, DType::U32, r, lsb);
    let quiet = u32_const(e, 0x40_0000);
    let q = e.binary(BinaryOp::Or, DType::U32, b, quiet);
    e.select(DType::U32, nan, q, r)
}

/// Two bf16 as one u32: `lo` as registers hold a bf16 (its 16 bits, the upper half clear) in
/// the low half, the bf16 in the high half of `hi` ([`bf16_in_high_half`]) above it.
pub fn bf16_pack_high_halves<E: Emitter + ?Sized>(e: &mut E, lo: E::V, hi: E::V) -> E::V {
    let mask = u32_const(e, 0xffff_0000);
    let h = e.binary(BinaryOp::And, DType::U32, hi, mask);
    e.binary(BinaryOp::Or, DType::U32, lo, h)
}

/// The f32 a bf16 (16 bits in a u32) stands for, exactly.
pub fn f32_from_bf16_bits<E: Emitter + ?Sized>(e: &mut E, h: E::V) -> E::V {
    let k16 = u32_const(e, 16);
    let s = e.binary(BinaryOp::Shl, DType::U32, h, k16);
    e.bitcast(DType::U32, DType::F32, s)
}

/// The integer `x` of dtype `from` (i32 or u32) as an f32 rounded to odd (truncated, lowest bit
/// set when inexact), from the driver's round-to-nearest conversion: rounding that again to
/// bf16's 8 bits is then the one correctly rounded conversion.
pub fn int_to_f32_round_odd<E: Emitter + ?Sized>(e: &mut E, from: DType, x: E::V) -> E::V {
    let zero_i = e.constant(from, Scalar::Int(0));
    let negative = if from == DType::U32 { e.constant(DType::I1, Scalar::Bool(false)) } else { e.cmp(CmpPred::Lt, from, x, zero_i) };
    // The magnitude as u32 (|i32::MIN| = 2^31 fits).
    let neg_x = e.binary(BinaryOp::Sub, from, zero_i, x);
    let mag = e.select(from, negative, neg_x, x);
    let m = if from == DType::U32 { mag } else { e.cast(from, DType::U32, mag) };
    let f = e.cast(DType::U32, DType::F32, m);
    // Below 2^32 the nearest f32 is an integer the conversion back gives exactly; at 2^32 the
    // magnitude is within 2^8 of it, far below bf16's resolution there.
    let top = f32_const(e, 4_294_967_296.0);
    let in_range = e.cmp(CmpPred::Lt, DType::F32, f, top);
    let r = e.cast(DType::F32, DType::U32, f);
    let inexact = e.cmp(CmpPred::Ne, DType::U32, r, m);
    let rounded_up = e.cmp(CmpPred::Gt, DType::U32, r, m);
    let fb = bits(e, f);
    let one = u32_const(e, 1);
    let down = e.binary(BinaryOp::Sub, DType::U32, fb, one);
    let t = e.select(DType::U32, rounded_up, down, fb);
    let odd = e.binary(BinaryOp::Or, DType::U32, t, one);
    let fix = e.binary(BinaryOp::And, DType::I1, in_range, inexact);
    let ob = e.select(DType::U32, fix, odd, fb);
    let mag_f = e.bitcast(DType::U32, DType::F32, ob);
    let neg_f = e.unary(UnaryOp::Neg, DType::F32, mag_f);
    e.select(DType::F32, negative, neg_f, mag_f)
}
