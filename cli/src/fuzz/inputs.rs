//! The buffers of a case, filled deterministically from its input seed.
//!
//! Wild floats mix the values backends get wrong (signed zeros, subnormals, the largest finite
//! values, infinities, NaN) with random ones over many magnitudes; wild integers mix the extremes
//! of the dtype with small and random values. No buffer is all zeros.

use super::{Case, Fill, Rng};
use crate::{DType, HostBuffer};
use tilekit_core::buffer::f64_to_bits;

/// The bits every output holds before a run: a pattern no program writes by accident, finite in
/// every float dtype (a NaN would match any NaN and hide an element nobody wrote).
pub const POISON: u64 = 0x5A5A_5A5A_5A5A_5A5A;

/// Values whose sums, in any order and over up to 256 elements, are exact in `dtype`: quarters
/// up to 4 in f32, halves up to 2 in f16, -1, 0 and 1 in bf16. For integers every value is
/// tame (integer sums wrap the same in any order).
pub fn tame_values(dtype: DType) -> Vec<f64> {
    let (step, max) = match dtype {
        DType::F32 => (0.25, 4.0),
        DType::F16 => (0.5, 2.0),
        _ => (1.0, 1.0),
    };
    let n = (max / step) as i64;
    let mut v: Vec<f64> = (-n..=n).map(|k| k as f64 * step).collect();
    v.push(-0.0);
    v
}

/// Whether values tame for `from` stay tame (exactly summable) in `to`: bf16's set lies in
/// f16's, which lies in f32's.
pub fn tame_within(from: DType, to: DType) -> bool {
    let rank = |d: DType| match d {
        DType::BF16 => 0,
        DType::F16 => 1,
        DType::F32 => 2,
        _ => 3,
    };
    from.is_float() && to.is_float() && rank(from) <= rank(to)
}

fn wild_float(rng: &mut Rng, dtype: DType) -> f64 {
    let (max, min_normal, min_sub) = match dtype {
        DType::F16 => (65504.0, 6.103_515_625e-5, 5.960_464_477_539_063e-8),
        DType::BF16 => (3.389_531_389_251_535e38, 1.175_494_350_822_287_5e-38, 9.183_549_615_799_121e-41),
        _ => (f32::MAX as f64, f32::MIN_POSITIVE as f64, 1.401_298_464_324_817e-45),
    };
    let sign = if rng.chance(0.5) { -1.0 } else { 1.0 };
    match rng.below(16) {
        0 => sign * 0.0,
        1 => f64::NAN,
        2 => sign * f64::INFINITY,
        3 => sign * max,
        // Subnormals: the smallest, one just below the normal range, and one between.
        4 => sign * rng.pick(&[min_sub, min_normal * 0.5, min_normal - min_sub, min_sub * 3.0]),
        5 => sign * min_normal,
        6 => sign * rng.range(0, 8) as f64,
        7 => sign * rng.pick(&[0.5, 1.0, 1.5, 2.0, 0.1, 3.0e4, 1.0e-3]),
        // Random magnitudes from tiny to huge.
        8 | 9 => {
            let e = rng.range(-40, 40) as f64;
            sign * (rng.below(1 << 20) as f64 / (1 << 20) as f64 + 0.5) * 10f64.powf(e / 2.0)
        }
        _ => sign * (rng.below(1 << 24) as f64 / (1 << 16) as f64),
    }
}

fn wild_int(rng: &mut Rng, dtype: DType) -> u64 {
    let (lo, hi) = dtype.int_range().unwrap_or((0, 1));
    let v: i64 = match rng.below(10) {
        0 => lo,
        1 => hi,
        2 => lo.saturating_add(1),
        3 => hi.saturating_sub(1),
        4 => 0,
        5 | 6 => rng.range(lo.max(-8), hi.min(8)),
        _ => {
            let bits = rng.next_u64();
            // Any bit pattern of the width, sign-extended where signed.
            let w = dtype.bits();
            if w >= 64 {
                bits as i64
            } else if dtype.is_signed_int() {
                ((bits << (64 - w)) as i64) >> (64 - w)
            } else {
                (bits & ((1u64 << w) - 1)) as i64
            }
        }
    };
    v as u64
}

/// Element bits for one buffer.
pub fn values(rng: &mut Rng, dtype: DType, len: usize, fill: Fill) -> HostBuffer {
    let b = HostBuffer::zeros(dtype, len);
    match fill {
        Fill::Poison => b.fill_bits(POISON),
        Fill::Tame => {
            let tame = tame_values(dtype);
            for i in 0..len {
                let x = if dtype.is_float() { rng.pick(&tame) } else { rng.range(-4, 4) as f64 };
                b.store_bits(i, f64_to_bits(dtype, x));
            }
        }
        Fill::Wild => {
            for i in 0..len {
                let bits = if dtype.is_float() {
                    f64_to_bits(dtype, wild_float(rng, dtype))
                } else if dtype == DType::I1 {
                    rng.below(2)
                } else {
                    wild_int(rng, dtype)
                };
                b.store_bits(i, bits);
            }
        }
    }
    if fill != Fill::Poison && len > 0 && (0..len).all(|i| b.load_bits(i) == 0) {
        b.store_bits(rng.below(len as u64) as usize, f64_to_bits(dtype, 1.0));
    }
    b
}

/// The buffers of `case`, in parameter order, as its input seed gives them.
pub fn fill(case: &Case) -> Vec<HostBuffer> {
    let mut rng = Rng::new(case.input_seed);
    case.buffers.iter().map(|b| values(&mut rng, b.dtype, b.len, b.fill)).collect()
}

/// A copy of `buffers` with every float subnormal replaced by a zero of its sign: what a device
/// that flushes subnormals on input sees (f16 ones kept with `f16_kept`).
pub fn flushed(buffers: &[HostBuffer], f16_kept: bool) -> Vec<HostBuffer> {
    buffers
        .iter()
        .map(|b| {
            let out = HostBuffer::from_bytes(b.dtype(), &b.to_bytes()).expect("same length");
            if b.dtype().is_float() && !(f16_kept && b.dtype() == DType::F16) {
                for (i, x) in b.to_f64().into_iter().enumerate() {
                    if super::compare::is_subnormal(b.dtype(), x) {
                        out.store_bits(i, f64_to_bits(b.dtype(), if x.is_sign_negative() { -0.0 } else { 0.0 }));
                    }
                }
            }
            out
        })
        .collect()
}
