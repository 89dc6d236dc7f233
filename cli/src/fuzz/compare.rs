//! The tolerance rule (docs/semantics.md): how a device's buffers after a run are compared with
//! the interpreter's.
//!
//! - Exact (bit for bit) everywhere the semantics are exact: integers, comparisons, loads and
//!   stores, casts, max and min, and float arithmetic (the generator sums only values whose sums
//!   are exact in any order). Any NaN matches any NaN: NaNs carry no sign or payload anyone
//!   promises.
//! - +0 equals -0 in buffers marked [`Check::SignedZero`] (values through a float max or min).
//! - Approximate ops ([`Check::Approx`]) are exact on the CPU devices (the emulator runs the
//!   interpreter's functions) and within [`approx_bound`] on GPUs; +0 equals -0 in their
//!   results (their operand may have come through a max or min).
//! - A device that may flush f32 or f16 subnormals (no `shaderDenormPreserveFloat32`, or no
//!   f16 float controls: `Target::f32_denorm_preserve`, `Target::f16_rte`) differs in an
//!   *explained* way where the interpreter's element is subnormal and the device's a zero, or
//!   where the device's element is what the interpreter computes from inputs with their
//!   subnormals flushed.

use super::{Approx, Case, Check};
use crate::{DType, HostBuffer};
use tilekit_core::buffer::{bits_to_f64, f64_to_bits};

/// Whether `x` is a nonzero value below `dtype`'s normal range.
pub fn is_subnormal(dtype: DType, x: f64) -> bool {
    x != 0.0 && x.is_finite() && x.abs() < min_normal(dtype)
}

/// Whether a device that flushes may read or write `x` as a zero: a subnormal, unless it is an
/// f16 one on a device that keeps those (`f16_kept`).
fn flushable(dtype: DType, x: f64, f16_kept: bool) -> bool {
    is_subnormal(dtype, x) && !(f16_kept && dtype == DType::F16)
}

fn min_normal(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 6.103_515_625e-5,
        _ => f32::MIN_POSITIVE as f64,
    }
}

fn max_finite(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 65504.0,
        DType::BF16 => 3.389_531_389_251_535e38,
        _ => f32::MAX as f64,
    }
}

/// One unit in the last place of `dtype` at `x`.
fn ulp(dtype: DType, x: f64) -> f64 {
    let mantissa = match dtype {
        DType::F16 => 10,
        DType::BF16 => 7,
        _ => 23,
    };
    let x = x.abs().max(min_normal(dtype));
    2f64.powi(x.log2().floor() as i32 - mantissa)
}

/// The error an approximate op may have on a GPU against the interpreter: `(relative,
/// absolute)`, on top of one ulp of the result's dtype (the f32 result rounded to f16 or bf16
/// may land on the other side). It is what tilekit promises on every backend
/// ([`tilekit_core::precision::promised`], with `exp`'s 3 + 2|x| ulp taken at |x| = 88, where
/// results are finite) plus the interpreter's own error, in relative terms.
pub fn approx_bound(op: Approx) -> (f64, f64) {
    use tilekit_core::precision::{bound, promised, MathBackend};
    let op = op.math_op();
    let (p, i) = (promised(op, DType::F32), bound(op, MathBackend::Interpreter, DType::F32));
    ((p.ulp + p.ulp_per_x * 88.0 + i.ulp) * 2f64.powi(-23), p.abs + p.abs_per_x * 88.0)
}

/// Whether a device's element `got` passes for the interpreter's `want` under `check`;
/// `gpu` applies the approximate ops' bounds instead of exactness.
pub fn element_ok(check: Check, dtype: DType, want_bits: u64, got_bits: u64, gpu: bool) -> bool {
    if want_bits == got_bits {
        return true;
    }
    if !dtype.is_float() {
        return false;
    }
    let (w, g) = (bits_to_f64(dtype, want_bits), bits_to_f64(dtype, got_bits));
    if w.is_nan() || g.is_nan() {
        return w.is_nan() && g.is_nan();
    }
    match check {
        Check::Exact => false,
        Check::SignedZero => w == 0.0 && g == 0.0,
        // The operand's zeros may carry either sign (a max or min before the op).
        Check::Approx(_) if w == 0.0 && g == 0.0 => true,
        Check::Approx(_) if !gpu => false,
        Check::Approx(op) => {
            let big = max_finite(dtype) / 2.0;
            if w.is_infinite() || g.is_infinite() {
                // At the edge of the range a result may round to infinity or stay finite.
                return w.signum() == g.signum() && w.abs() >= big && g.abs() >= big;
            }
            let (rel, abs) = approx_bound(op);
            (w - g).abs() <= rel * w.abs() + abs + ulp(dtype, w)
        }
    }
}

/// The first element where a device differs from the interpreter.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    pub buffer: usize,
    pub name: String,
    pub element: usize,
    pub want: f64,
    pub got: f64,
    pub check: Check,
    /// The unexplained elements per buffer, in buffer order: (name, count).
    pub spread: Vec<(String, usize)>,
}

impl Mismatch {
    /// `in y4 (3), a5 (1)`.
    pub fn spread(&self) -> String {
        let parts: Vec<String> = self.spread.iter().map(|(b, n)| format!("{b} ({n})")).collect();
        format!("in {}", parts.join(", "))
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "buffer {} (`{}`, {}) element {}: want {:e} got {:e}", self.buffer, self.name, self.check.name(), self.element, self.want, self.got)
    }
}

/// Every element of every buffer where `got` fails `want`'s check: (buffer, element).
pub fn mismatches(case: &Case, want: &[HostBuffer], got: &[HostBuffer], gpu: bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (bi, ((b, w), g)) in case.buffers.iter().zip(want).zip(got).enumerate() {
        for j in 0..w.len().min(g.len()) {
            if !element_ok(b.check, b.dtype, w.load_bits(j), g.load_bits(j), gpu) {
                out.push((bi, j));
            }
        }
    }
    out
}

/// Describes the element `(buffer, element)`.
pub fn describe(case: &Case, want: &[HostBuffer], got: &[HostBuffer], at: (usize, usize)) -> Mismatch {
    let (bi, j) = at;
    let b = &case.buffers[bi];
    Mismatch {
        buffer: bi,
        name: b.name.clone(),
        element: j,
        want: bits_to_f64(b.dtype, want[bi].load_bits(j)),
        got: bits_to_f64(b.dtype, got[bi].load_bits(j)),
        check: b.check,
        spread: Vec::new(),
    }
}

/// Whether the differences `at` are explained by a device flushing subnormals: each element's
/// reference is subnormal and the device's a zero, or the device's element passes against one
/// of `flushed_wants`: the interpreter on inputs with their subnormals flushed, and the
/// interpreter modelling a flushing device (`InterpOptions::flush_subnormals`: arithmetic and
/// comparisons read subnormals as zeros, moves keep their bits, so a `select` whose condition
/// compared a subnormal may pass the subnormal itself on). With `f16_kept` the device keeps f16
/// subnormals (only f32 flushes), so a zeroed f16 element is not explained.
pub fn explained_by_flush(
    case: &Case,
    want: &[HostBuffer],
    flushed_wants: &[&[HostBuffer]],
    got: &[HostBuffer],
    at: &[(usize, usize)],
    f16_kept: bool,
) -> bool {
    at.iter().all(|&(bi, j)| {
        let b = &case.buffers[bi];
        let (w, g) = (bits_to_f64(b.dtype, want[bi].load_bits(j)), bits_to_f64(b.dtype, got[bi].load_bits(j)));
        let zeroed = b.dtype.is_float() && flushable(b.dtype, w, f16_kept) && g == 0.0;
        zeroed || flushed_wants.iter().any(|f| element_ok(b.check, b.dtype, f[bi].load_bits(j), got[bi].load_bits(j), true))
    })
}

/// Whether the elements at `at` depend on a choice the device is free to make: each differs
/// from `want` in one of `models`, the reference computed with the other choice. With every
/// non-finite value replaced by a finite one as it is made (`InterpOptions::nonfinite_as`):
/// WGSL's rule that a shader may assume no infinities and NaNs, so what depends on one is
/// indeterminate. With subnormals flushed (the flushing model): a device without
/// DenormPreserve may flush at some instructions and not at others, so an element that
/// depends on flushing may take a value neither all-or-nothing model gives.
pub fn explained_by_dependence(case: &Case, want: &[HostBuffer], models: &[&[HostBuffer]], at: &[(usize, usize)]) -> bool {
    at.iter().all(|&(bi, j)| {
        let b = &case.buffers[bi];
        let w = want[bi].load_bits(j);
        models.iter().any(|s| {
            let v = s[bi].load_bits(j);
            v != w && !(b.dtype.is_float() && bits_to_f64(b.dtype, v).is_nan() && bits_to_f64(b.dtype, w).is_nan())
        })
    })
}

/// Whether the device's elements at `at` pass against one of `models`: the reference computed
/// under a device model the device may follow (contracted multiply-adds, say).
pub fn explained_by_model(case: &Case, models: &[&[HostBuffer]], got: &[HostBuffer], at: &[(usize, usize)]) -> bool {
    at.iter().all(|&(bi, j)| {
        let b = &case.buffers[bi];
        models.iter().any(|m| element_ok(b.check, b.dtype, m[bi].load_bits(j), got[bi].load_bits(j), true))
    })
}

/// Whether the elements at `at` differ from `want` only in the sign of a zero (both are
/// zeros): a device that keeps no signed zeros may give either.
pub fn explained_by_zero_sign(case: &Case, want: &[HostBuffer], got: &[HostBuffer], at: &[(usize, usize)]) -> bool {
    at.iter().all(|&(bi, j)| {
        let b = &case.buffers[bi];
        let (w, g) = (bits_to_f64(b.dtype, want[bi].load_bits(j)), bits_to_f64(b.dtype, got[bi].load_bits(j)));
        b.dtype.is_float() && w == 0.0 && g == 0.0
    })
}

/// Whether the differences `at` are explained by f32 atomic adds that flush subnormals (PTX's
/// `atom.add.f32`, NVIDIA's Vulkan `OpAtomicFAddEXT`): each is in an f32 buffer that atomic
/// adds update, off by less than twice the smallest normal f32 per add the program makes on
/// that buffer (each add may read its old value and its operand, both subnormal, as zeros).
pub fn explained_by_atomic_ftz(case: &Case, want: &[HostBuffer], got: &[HostBuffer], at: &[(usize, usize)]) -> bool {
    use tilekit_core::ir::{AtomicOp, Op, ParamKind};
    // Buffer index (among the buffer parameters) of each parameter.
    let mut buffer_of = Vec::new();
    let mut n = 0;
    for p in &case.program.params {
        buffer_of.push(matches!(p.kind, ParamKind::Buffer { .. }).then(|| {
            n += 1;
            n - 1
        }));
    }
    let mut adds = vec![0usize; n];
    case.program.walk(&mut |inst| {
        if let Op::Atomic { op: AtomicOp::Add, buffer, .. } = inst.op {
            if let Some(Some(b)) = buffer_of.get(buffer as usize) {
                adds[*b] += 1;
            }
        }
    });
    at.iter().all(|&(bi, j)| {
        let b = &case.buffers[bi];
        let (w, g) = (bits_to_f64(b.dtype, want[bi].load_bits(j)), bits_to_f64(b.dtype, got[bi].load_bits(j)));
        let bound = 2.0 * adds.get(bi).copied().unwrap_or(0) as f64 * f32::MIN_POSITIVE as f64;
        b.dtype == DType::F32 && w.is_finite() && g.is_finite() && (w - g).abs() < bound
    })
}

/// Whether Vulkan leaves `op` on `args` (its operands) without an error bound: outside the
/// domain of the SPIR-V row of [`tilekit_core::precision`] (a divisor outside [2^-126, 2^126];
/// `log`/`log2` of x <= 0, `rsqrt` of x <= 0 and `sqrt` of x < 0, which GLSL.std.450 leaves
/// undefined; an infinite operand, where the precision table's bounds in ulp say nothing), or a
/// NaN divisor.
fn outside_vulkan_bounds(op: Approx, args: &[(DType, f64)]) -> bool {
    use tilekit_core::precision::{bound, MathBackend};
    let x = args.first().map_or(f64::NAN, |a| a.1);
    let y = args.get(1).map_or(f64::NAN, |a| a.1);
    if args.iter().any(|a| a.1.is_infinite()) || (op == Approx::Div && y.is_nan()) {
        return true;
    }
    !bound(op.math_op(), MathBackend::Spirv, DType::F32).holds_at(x, y)
}

/// `op` on `args` in f64 (the op's exact value, before rounding to the buffer's dtype); `None`
/// for ops the rule does not evaluate.
fn approx_in_f64(op: Approx, args: &[f64]) -> Option<f64> {
    let x = *args.first()?;
    Some(match op {
        Approx::Exp => x.exp(),
        Approx::Exp2 => x.exp2(),
        Approx::Log => x.ln(),
        Approx::Log2 => x.log2(),
        Approx::Sqrt => x.sqrt(),
        Approx::Rsqrt => 1.0 / x.sqrt(),
        Approx::Sin => x.sin(),
        Approx::Cos => x.cos(),
        Approx::Tanh => x.tanh(),
        Approx::Div => x / *args.get(1)?,
        Approx::Erf => return None,
    })
}

/// Whether the differences `at` all lie where an approximate op's error is not bounded on the
/// device (docs/semantics.md, "Approximate ops"): each is the result of an approximate op whose
/// operands (read from the outputs that hold them, [`super::BufferCase::operands`]) are
/// - on SPIR-V (`vulkan_ranges`), where Vulkan gives the op no error bound
///   (`outside_vulkan_bounds`: a divisor outside [2^-126, 2^126], a logarithm or reciprocal
///   square root of x <= 0, an infinite operand); or
/// - on a device that flushes subnormals (`flushes`), subnormal, and the device's element is
///   within the op's bound of the op on those operands taken as zeros of either sign (the
///   transcendental units read a subnormal as a zero).
pub fn explained_by_approx_domain(
    case: &Case,
    want: &[HostBuffer],
    got: &[HostBuffer],
    at: &[(usize, usize)],
    vulkan_ranges: bool,
    flushes: bool,
    f16_kept: bool,
) -> bool {
    at.iter().all(|&(bi, j)| {
        let b = &case.buffers[bi];
        let Check::Approx(op) = b.check else { return false };
        let mut args = Vec::new();
        for name in &b.operands {
            let Some(k) = case.buffers.iter().position(|c| &c.name == name) else { return false };
            let o = &case.buffers[k];
            if j >= want[k].len() {
                return false;
            }
            args.push((o.dtype, bits_to_f64(o.dtype, want[k].load_bits(j))));
        }
        if args.is_empty() {
            return false;
        }
        if vulkan_ranges && outside_vulkan_bounds(op, &args) {
            return true;
        }
        if !flushes || !args.iter().any(|&(d, x)| flushable(d, x, f16_kept)) {
            return false;
        }
        let g = bits_to_f64(b.dtype, got[bi].load_bits(j));
        // Every way of reading the subnormal operands as signed zeros.
        let subnormal: Vec<usize> = (0..args.len()).filter(|&i| flushable(args[i].0, args[i].1, f16_kept)).collect();
        (0..1u32 << (2 * subnormal.len())).any(|ways| {
            let mut xs: Vec<f64> = args.iter().map(|a| a.1).collect();
            for (n, &i) in subnormal.iter().enumerate() {
                xs[i] = match (ways >> (2 * n)) & 3 {
                    0 => xs[i],
                    1 => 0.0,
                    _ => -0.0,
                };
            }
            let Some(r) = approx_in_f64(op, &xs) else { return false };
            let r = bits_to_f64(b.dtype, f64_to_bits(b.dtype, r));
            element_ok(b.check, b.dtype, f64_to_bits(b.dtype, r), got[bi].load_bits(j), true) || (r.is_nan() && g.is_nan())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        let f = |x: f64| f64_to_bits(DType::F32, x);
        assert!(element_ok(Check::Exact, DType::F32, f(f64::NAN), f(-f64::NAN), false));
        assert!(!element_ok(Check::Exact, DType::F32, f(0.0), f(-0.0), true));
        assert!(element_ok(Check::SignedZero, DType::F32, f(0.0), f(-0.0), false));
        assert!(!element_ok(Check::SignedZero, DType::F32, f(1.0), f(-1.0), false));
        let e = Check::Approx(Approx::Exp);
        assert!(!element_ok(e, DType::F32, f(1.0), f(1.0 + 1e-6), false));
        assert!(element_ok(e, DType::F32, f(1.0), f(1.0 + 1e-6), true));
        assert!(!element_ok(e, DType::F32, f(1.0), f(1.01), true));
        assert!(!element_ok(e, DType::F32, f(f64::INFINITY), f(1.0), true));
        assert!(!element_ok(e, DType::I32, 1, 2, true));
    }

    /// PTX's flushing f32 atomic adds explain a lost subnormal in a buffer that atomics update,
    /// and nothing larger, and nothing in a buffer they do not update.
    #[test]
    fn atomic_add_ftz_explains_only_lost_subnormals_of_atomic_buffers() {
        use crate::fuzz::{BufferCase, Case, Fill};
        let program = tilekit_core::text::parse(
            "program p(a: buffer<f32, read_write>, y: buffer<f32, write>) grid 1 {\n  %0 = arange 0, 4 : [4]xi32\n  \
             %1 = const 1.0 : f32\n  %2 = splat %1 : [4]xf32\n  %3 = atomic_add a[%0], %2 : [4]xf32\n  store y[%0], %3\n}\n",
        )
        .unwrap();
        let buffer =
            |name: &str| BufferCase { name: name.into(), dtype: DType::F32, len: 4, fill: Fill::Wild, check: Check::Exact, operands: vec![] };
        let case =
            Case { program, grid: [1, 1, 1], num_warps: 1, num_stages: 1, buffers: vec![buffer("a"), buffer("y")], scalars: vec![], input_seed: 1 };
        let tiny = f32::MIN_POSITIVE as f64 / 4.0;
        let want = [HostBuffer::from_f64(DType::F32, &[tiny, 1.0, -tiny, 2.0]), HostBuffer::from_f64(DType::F32, &[tiny, 0.0, 0.0, 0.0])];
        let got = [HostBuffer::from_f64(DType::F32, &[0.0, 1.0, -0.0, 2.0]), HostBuffer::from_f64(DType::F32, &[0.0, 0.0, 0.0, 0.0])];
        assert!(explained_by_atomic_ftz(&case, &want, &got, &[(0, 0), (0, 2)]));
        // The same loss in a buffer no atomic updates is a mismatch.
        assert!(!explained_by_atomic_ftz(&case, &want, &got, &[(0, 0), (1, 0)]));
        // A difference of a normal magnitude is not a flush.
        let got = [HostBuffer::from_f64(DType::F32, &[0.0, 1.5, 0.0, 2.0]), HostBuffer::from_f64(DType::F32, &[0.0; 4])];
        assert!(!explained_by_atomic_ftz(&case, &want, &got, &[(0, 1)]));
        // One add may lose two subnormals (old value and operand): -2^-126 read as -0.
        let min = f32::MIN_POSITIVE as f64;
        let want = [HostBuffer::from_f64(DType::F32, &[-min, 1.5 * min, 2.0 * min, 0.0]), HostBuffer::from_f64(DType::F32, &[0.0; 4])];
        let got = [HostBuffer::from_f64(DType::F32, &[-0.0, 0.0, 0.0, 0.0]), HostBuffer::from_f64(DType::F32, &[0.0; 4])];
        assert!(explained_by_atomic_ftz(&case, &want, &got, &[(0, 0), (0, 1)]));
        assert!(!explained_by_atomic_ftz(&case, &want, &got, &[(0, 2)]));
    }

    /// WGSL's rules: an element is indeterminate where a reference with its non-finite values
    /// replaced differs (NaN against NaN is no difference); a model explains an element the
    /// device's value passes against.
    #[test]
    fn non_finite_dependence_and_models() {
        use crate::fuzz::{BufferCase, Case, Fill};
        let program = tilekit_core::text::parse(
            "program p(y: buffer<f32, write>) grid 1 {\n  %0 = arange 0, 3 : [3]xi32\n  %1 = const 1.0 : f32\n  %2 = splat %1 : [3]xf32\n  store y[%0], %2\n}\n",
        )
        .unwrap();
        let y = BufferCase { name: "y".into(), dtype: DType::F32, len: 3, fill: Fill::Poison, check: Check::Exact, operands: vec![] };
        let case = Case { program, grid: [1, 1, 1], num_warps: 1, num_stages: 1, buffers: vec![y], scalars: vec![], input_seed: 1 };
        let f = |xs: &[f64]| HostBuffer::from_f64(DType::F32, xs);
        let want = [f(&[f64::INFINITY, 2.0, f64::NAN])];
        let substituted = [f(&[1.0, 2.0, f64::NAN])];
        let subs: [&[HostBuffer]; 1] = [&substituted];
        assert!(explained_by_dependence(&case, &want, &subs, &[(0, 0)]));
        assert!(!explained_by_dependence(&case, &want, &subs, &[(0, 1)]), "2 depends on nothing non-finite");
        assert!(!explained_by_dependence(&case, &want, &subs, &[(0, 2)]), "NaN in both");
        let got = [f(&[5.0, 2.5, 0.0])];
        let model = [f(&[0.0, 2.5, 1.0])];
        let models: [&[HostBuffer]; 1] = [&model];
        assert!(explained_by_model(&case, &models, &got, &[(0, 1)]));
        assert!(!explained_by_model(&case, &models, &got, &[(0, 0)]));
        assert!(!explained_by_model(&case, &[], &got, &[(0, 1)]), "no model explains nothing");
    }

    /// An approximate op's result is unconstrained only where its operands (stored beside it)
    /// lie outside the op's bounded domain.
    #[test]
    fn approx_domain_needs_the_operands_outside_the_bounds() {
        use crate::fuzz::{BufferCase, Case, Fill};
        let program = tilekit_core::text::parse(
            "program p(q: buffer<f32, write>, x: buffer<f32, write>, d: buffer<f32, write>) grid 1 {\n  %0 = arange 0, 4 : [4]xi32\n  \
             %1 = const 1.0 : f32\n  %2 = splat %1 : [4]xf32\n  store q[%0], %2\n  store x[%0], %2\n  store d[%0], %2\n}\n",
        )
        .unwrap();
        let buffer = |name: &str, check: Check, operands: &[&str]| BufferCase {
            name: name.into(),
            dtype: DType::F32,
            len: 4,
            fill: Fill::Poison,
            check,
            operands: operands.iter().map(|o| o.to_string()).collect(),
        };
        let div = Check::Approx(Approx::Div);
        let case = Case {
            program,
            grid: [1, 1, 1],
            num_warps: 1,
            num_stages: 1,
            buffers: vec![buffer("q", div, &["x", "d"]), buffer("x", Check::Exact, &[]), buffer("d", Check::Exact, &[])],
            scalars: vec![],
            input_seed: 1,
        };
        let f = |xs: &[f64]| HostBuffer::from_f64(DType::F32, xs);
        // x / x at |x| = 3e38, 1 / 0, 1 / 2 and 1e-40 / 1.
        let want = [f(&[1.0, f64::INFINITY, 0.5, 1e-40]), f(&[3e38, 1.0, 1.0, 1e-40]), f(&[3e38, 0.0, 2.0, 1.0])];
        let got = [f(&[0.0, f64::NAN, 0.25, 0.0]), want[1].clone(), want[2].clone()];
        // Divisors beyond 2^126 and zero: Vulkan leaves the quotient undefined.
        assert!(explained_by_approx_domain(&case, &want, &got, &[(0, 0), (0, 1)], true, false, false));
        assert!(!explained_by_approx_domain(&case, &want, &got, &[(0, 0)], false, false, false));
        // A divisor in range: the bound holds, 0.25 for 0.5 is not explained.
        assert!(!explained_by_approx_domain(&case, &want, &got, &[(0, 2)], true, true, false));
        // A subnormal dividend read as zero, on a device that may flush.
        assert!(explained_by_approx_domain(&case, &want, &got, &[(0, 3)], true, true, false));
        assert!(!explained_by_approx_domain(&case, &want, &got, &[(0, 3)], true, false, false));
        // Outside GLSL.std.450's domains, and at infinite operands, on SPIR-V only.
        let mut rsqrt = case.clone();
        rsqrt.buffers[0].check = Check::Approx(Approx::Rsqrt);
        rsqrt.buffers[0].operands = vec!["x".into()];
        let want = [f(&[f64::NEG_INFINITY, 0.0, 1.0, 0.5]), f(&[-0.0, f64::INFINITY, 1.0, 4.0]), f(&[1.0; 4])];
        let got = [f(&[f64::NAN, 7.0, 2.0, 0.5]), want[1].clone(), want[2].clone()];
        assert!(explained_by_approx_domain(&rsqrt, &want, &got, &[(0, 0), (0, 1)], true, false, false));
        assert!(!explained_by_approx_domain(&rsqrt, &want, &got, &[(0, 0)], false, false, false));
        assert!(!explained_by_approx_domain(&rsqrt, &want, &got, &[(0, 2)], true, true, false));
        // Without the operands stored beside the result nothing is explained.
        let mut bare = case.clone();
        bare.buffers[0].operands.clear();
        assert!(!explained_by_approx_domain(&bare, &want, &got, &[(0, 0)], true, true, false));
    }

    /// H200 Vulkan, seed 9 program 1643: `select(f32(i16) < x, 2^31, x)` stored the smallest
    /// subnormal where 2^31 was wanted. The driver compared with the subnormal flushed to zero
    /// and then moved its bits unchanged: neither the reference on flushed inputs (which stores
    /// a zero) nor the plain one explains it, the flushing model does.
    #[test]
    fn a_compare_that_flushes_and_a_move_that_does_not_is_explained() {
        let case = crate::fuzz::gen::generate(9, 1643).unwrap();
        let inputs = crate::fuzz::inputs::fill(&case);
        let want = crate::fuzz::run::reference(&case, &inputs).unwrap();
        let flushed_inputs = crate::fuzz::run::reference(&case, &crate::fuzz::inputs::flushed(&inputs, false)).unwrap();
        let model = crate::fuzz::run::flushing_reference(&case, &inputs).unwrap();
        let y7 = case.buffers.iter().position(|b| b.name == "y7").unwrap();
        let at: Vec<(usize, usize)> = mismatches(&case, &want, &model, true).into_iter().filter(|&(b, _)| b == y7).collect();
        let moved = at.iter().any(|&(b, j)| model[b].load_bits(j) != 0 && bits_to_f64(DType::F32, want[b].load_bits(j)) == 2f64.powi(31));
        assert!(moved, "the flushing model passes a subnormal through the select: {at:?}");
        assert!(!explained_by_flush(&case, &want, &[&flushed_inputs], &model, &at, false));
        assert!(explained_by_flush(&case, &want, &[&flushed_inputs, &model], &model, &at, false));
    }

    /// The first differing element of four results the H200's Vulkan driver gave that no rule
    /// explained (bench/results/fuzz-2026-12-04, calls 8 and 9: seed, program, buffer, element,
    /// the driver's value): the flushing model computes each of them, the reference does not.
    #[test]
    fn the_flushing_model_computes_what_the_h200_vulkan_driver_gave() {
        let recorded =
            [(8u64, 588u64, "y12", 59usize, 0.0), (8, 1545, "a9", 222, 0.0), (8, 4987, "y6", 0, f64::NAN), (9, 1643, "y7", 21, 2f64.powi(-149))];
        for (seed, index, buffer, element, got) in recorded {
            let case = crate::fuzz::gen::generate(seed, index).unwrap();
            let inputs = crate::fuzz::inputs::fill(&case);
            let want = crate::fuzz::run::reference(&case, &inputs).unwrap();
            let model = crate::fuzz::run::flushing_reference(&case, &inputs).unwrap();
            let b = case.buffers.iter().position(|b| b.name == buffer).unwrap();
            let dtype = case.buffers[b].dtype;
            let (w, m) = (bits_to_f64(dtype, want[b].load_bits(element)), bits_to_f64(dtype, model[b].load_bits(element)));
            let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
            assert!(!same(w, got) && same(m, got), "seed {seed} program {index} {buffer}[{element}]: reference {w}, model {m}, driver {got}");
        }
    }

    /// H100 Vulkan, seed 70 program 3428: `f32(x3 == f32(x2)) <= x3` stored 1 for x2 the
    /// largest f16 subnormal and x3 = -2^-149. The driver widened x2 unflushed (so the equality
    /// is false) and read x3 as -0 in the second comparison. The model that flushes f16 too gives
    /// 0, as the reference does; the one that keeps f16 subnormals (which the module now
    /// requests through DenormPreserve for 16 bits) computes the driver's 1, while still
    /// explaining nothing that needs an f16 flushed.
    #[test]
    fn a_device_that_keeps_f16_subnormals_is_modelled_apart() {
        use tilekit_core::interp::InterpOptions;
        let case = crate::fuzz::gen::generate(70, 3428).unwrap();
        let inputs = crate::fuzz::inputs::fill(&case);
        let want = crate::fuzz::run::reference(&case, &inputs).unwrap();
        let all = crate::fuzz::run::flushing_reference(&case, &inputs).unwrap();
        let options = InterpOptions { flush_subnormals: true, f16_subnormals_kept: true, ..Default::default() };
        let kept = crate::fuzz::run::modelled_reference(&case, &inputs, options).unwrap();
        let y5 = case.buffers.iter().position(|b| b.name == "y5").unwrap();
        let (x2, x3) = (inputs[0].to_f64(), inputs[1].to_f64());
        let recorded = [48usize, 113, 248];
        for j in recorded {
            assert!(is_subnormal(DType::F16, x2[j]) && is_subnormal(DType::F32, x3[j]) && x3[j] < 0.0, "element {j}: {} {}", x2[j], x3[j]);
            assert_eq!((want[y5].load_bits(j), all[y5].load_bits(j), kept[y5].load_bits(j)), (0, 0, 1), "element {j}");
        }
        let at: Vec<(usize, usize)> = recorded.iter().map(|&j| (y5, j)).collect();
        let got = kept.clone();
        assert!(explained_by_flush(&case, &want, &[&kept], &got, &at, true));
        assert!(!explained_by_flush(&case, &want, &[&all], &got, &at, false));
        // An f16 subnormal stored as zero is a wrong answer on such a device.
        let f16 = Case { buffers: vec![case.buffers[0].clone()], ..case.clone() };
        let j = recorded[0];
        let zero = HostBuffer::from_bytes(DType::F16, &inputs[0].to_bytes()).unwrap();
        zero.store_bits(j, 0);
        assert!(explained_by_flush(&f16, &inputs[..1], &[], std::slice::from_ref(&zero), &[(0, j)], false));
        assert!(!explained_by_flush(&f16, &inputs[..1], &[], std::slice::from_ref(&zero), &[(0, j)], true));
    }
}
