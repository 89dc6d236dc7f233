//! Scalar element types and compile-time scalar constants.
//!
//! A [`DType`] is the element type of a buffer or a tile. The set is closed per release but the
//! enum is `non_exhaustive` so that fp8 formats can join without breaking callers.

use std::fmt;

/// Element type of a scalar, a tile or a buffer.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Boolean; the result of comparisons and the type of masks. Stored as one byte in buffers.
    I1,
    I8,
    U8,
    I16,
    I32,
    U32,
    I64,
    F16,
    BF16,
    F32,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 10] =
        [DType::I1, DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::I64, DType::F16, DType::BF16, DType::F32];

    /// The name used by the text form and the CLI (`f32`, `bf16`, `i1`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::I1 => "i1",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
        }
    }

    /// Parses the name printed by [`DType::name`].
    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// Width of one element in bits as the arithmetic sees it (`i1` is 1).
    pub const fn bits(self) -> u32 {
        match self {
            DType::I1 => 1,
            DType::I8 | DType::U8 => 8,
            DType::I16 | DType::F16 | DType::BF16 => 16,
            DType::I32 | DType::U32 | DType::F32 => 32,
            DType::I64 => 64,
        }
    }

    /// Bytes one element occupies in a buffer (`i1` takes a whole byte).
    pub const fn size_bytes(self) -> usize {
        match self {
            DType::I1 | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 => 8,
        }
    }

    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32)
    }

    /// Integer types, `i1` included.
    pub const fn is_int(self) -> bool {
        !self.is_float()
    }

    pub const fn is_bool(self) -> bool {
        matches!(self, DType::I1)
    }

    /// Signed integers (`i1` counts as unsigned: it holds 0 and 1).
    pub const fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    pub const fn is_unsigned_int(self) -> bool {
        matches!(self, DType::I1 | DType::U8 | DType::U32)
    }

    /// Smallest and largest value an integer dtype holds; `None` for floats.
    pub const fn int_range(self) -> Option<(i64, i64)> {
        match self {
            DType::I1 => Some((0, 1)),
            DType::I8 => Some((i8::MIN as i64, i8::MAX as i64)),
            DType::U8 => Some((0, u8::MAX as i64)),
            DType::I16 => Some((i16::MIN as i64, i16::MAX as i64)),
            DType::I32 => Some((i32::MIN as i64, i32::MAX as i64)),
            DType::U32 => Some((0, u32::MAX as i64)),
            DType::I64 => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A compile-time constant. Its dtype is the type of the value that holds it.
///
/// Equality compares floats by bit pattern, so that a program holding a NaN constant still equals
/// itself after a print/parse round trip.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Scalar::Bool(a), Scalar::Bool(b)) => a == b,
            (Scalar::Int(a), Scalar::Int(b)) => a == b,
            (Scalar::Float(a), Scalar::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for Scalar {}

impl Scalar {
    /// The value as f64 (booleans are 0 or 1).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as i64 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// Whether this constant can be held by `dtype` without change: the right kind (bool, int,
    /// float) and, for integers, within range.
    pub fn fits(self, dtype: DType) -> bool {
        match self {
            Scalar::Bool(_) => dtype == DType::I1,
            Scalar::Int(i) => match dtype.int_range() {
                Some((lo, hi)) => dtype != DType::I1 && lo <= i && i <= hi,
                None => false,
            },
            Scalar::Float(_) => dtype.is_float(),
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => {
                if x.is_nan() {
                    write!(f, "nan")
                } else if x.is_infinite() {
                    write!(f, "{}", if *x > 0.0 { "inf" } else { "-inf" })
                } else {
                    // `{:?}` prints the shortest text that reads back to the same f64 and always
                    // keeps a `.` or an exponent, so the parser can tell floats from ints.
                    write!(f, "{x:?}")
                }
            }
        }
    }
}

/// `x` rounded toward zero to an f32, with the lowest mantissa
/// bit set when that dropped anything ("round to odd"). Rounding the result once more to a
/// narrower format (f16, bf16) then gives the correctly rounded value of `x`, which rounding
/// through an f32 rounded to nearest does not.
fn f64_to_f32_odd(x: f64) -> f32 {
    let r = x as f32;
    if !r.is_finite() || r as f64 == x {
        return r;
    }
    // Step toward zero if rounding to nearest went away from it, then mark the inexactness.
    let t = if (r as f64).abs() > x.abs() { f32::from_bits(r.to_bits() - 1) } else { r };
    f32::from_bits(t.to_bits() | 1)
}

/// The bf16 nearest to `x` (ties to even). `half::bf16::from_f64` truncates the low bits of
/// the f64 first and can round the wrong way (16842753 gives 0x4b80, not 0x4b81).
pub fn bf16_from_f64(x: f64) -> half::bf16 {
    half::bf16::from_f32(f64_to_f32_odd(x))
}

/// The f16 nearest to `x` (ties to even), by the same route as [`bf16_from_f64`].
pub fn f16_from_f64(x: f64) -> half::f16 {
    half::f16::from_f32(f64_to_f32_odd(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_floats_from_f64_round_once() {
        assert_eq!(bf16_from_f64(16842753.0).to_bits(), 0x4b81);
        assert_eq!(f16_from_f64(1.0 + 2f64.powi(-11)).to_bits(), half::f16::ONE.to_bits());
        assert_eq!(f16_from_f64(1.0 + 2f64.powi(-11) + 1e-9).to_bits(), half::f16::ONE.to_bits() + 1);
        // No neighbour is closer, and a tie goes to the even one.
        let mut x = 1.0f64;
        for i in 0..200_000u64 {
            x = 1.0 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64 * 300.0;
            let b = bf16_from_f64(x);
            let d = (b.to_f64() - x).abs();
            for n in [b.to_bits() - 1, b.to_bits() + 1] {
                let dn = (half::bf16::from_bits(n).to_f64() - x).abs();
                assert!(d < dn || (d == dn && b.to_bits() % 2 == 0), "{x}: {b} vs {}", half::bf16::from_bits(n));
            }
        }
        let _ = x;
    }
}
