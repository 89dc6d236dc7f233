//! The sequences of [`super`] evaluated on the host in IEEE f32, as a device that keeps
//! subnormals computes them (AMDGCN, and SPIR-V drivers with DenormPreserve), against f64.

use super::{erf, sin_cos, tanh};
use crate::dtype::{DType, Scalar};
use crate::gpu::legalize;
use crate::gpu::Emitter;
use crate::interp::{binary_float, binary_int, float_to_int, unary_float};
use crate::ir::{AtomicOp, BinaryOp, CmpPred, UnaryOp};
use crate::precision::{bound, ulp_f32, MathBackend, MathOp, SIN_COS_REDUCED};

#[derive(Clone, Copy, Debug)]
enum V {
    F(f32),
    I(i64),
    B(bool),
}

// `Emitter::V` is hashable (the lowering remembers facts per value); these are values, not
// registers, so floats compare by their bits.
impl PartialEq for V {
    fn eq(&self, other: &V) -> bool {
        match (self, other) {
            (V::F(a), V::F(b)) => a.to_bits() == b.to_bits(),
            (V::I(a), V::I(b)) => a == b,
            (V::B(a), V::B(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for V {}

impl std::hash::Hash for V {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        match self {
            V::F(a) => (0u8, a.to_bits()).hash(h),
            V::I(a) => (1u8, *a).hash(h),
            V::B(a) => (2u8, *a).hash(h),
        }
    }
}

/// Evaluates the scalar primitives a math sequence uses; nothing else is reached.
struct Eval;

impl Emitter for Eval {
    type V = V;
    fn constant(&mut self, dtype: DType, value: Scalar) -> V {
        match (dtype, value) {
            (DType::F32, Scalar::Float(v)) => V::F(v as f32),
            (DType::I1, Scalar::Bool(b)) => V::B(b),
            (_, Scalar::Int(i)) => V::I(i),
            other => unreachable!("{other:?}"),
        }
    }
    fn unary(&mut self, op: UnaryOp, dtype: DType, x: V) -> V {
        match x {
            V::F(x) => V::F(unary_float(op, dtype, x)),
            V::B(b) if op == UnaryOp::Not => V::B(!b),
            other => unreachable!("{other:?}"),
        }
    }
    fn binary(&mut self, op: BinaryOp, dtype: DType, a: V, b: V) -> V {
        match (a, b) {
            (V::F(a), V::F(b)) => V::F(binary_float(op, dtype, a, b)),
            (V::I(a), V::I(b)) => V::I(binary_int(op, dtype, a, b).expect("no division")),
            (V::B(a), V::B(b)) => V::B(match op {
                BinaryOp::And => a && b,
                BinaryOp::Or => a || b,
                other => unreachable!("{other:?} on booleans"),
            }),
            other => unreachable!("{other:?}"),
        }
    }
    fn cmp(&mut self, pred: CmpPred, _dtype: DType, a: V, b: V) -> V {
        let (a, b) = match (a, b) {
            (V::F(a), V::F(b)) => (a as f64, b as f64),
            (V::I(a), V::I(b)) => (a as f64, b as f64),
            other => unreachable!("{other:?}"),
        };
        V::B(match pred {
            CmpPred::Eq => a == b,
            CmpPred::Ne => a != b,
            CmpPred::Lt => a < b,
            CmpPred::Le => a <= b,
            CmpPred::Gt => a > b,
            CmpPred::Ge => a >= b,
        })
    }
    fn select(&mut self, _dtype: DType, cond: V, a: V, b: V) -> V {
        match cond {
            V::B(c) => {
                if c {
                    a
                } else {
                    b
                }
            }
            other => unreachable!("{other:?}"),
        }
    }
    fn fma(&mut self, _dtype: DType, a: V, b: V, c: V) -> V {
        match (a, b, c) {
            (V::F(a), V::F(b), V::F(c)) => V::F(a.mul_add(b, c)),
            other => unreachable!("{other:?}"),
        }
    }
    fn cast(&mut self, from: DType, to: DType, x: V) -> V {
        match (from, x) {
            (DType::F32, V::F(x)) => V::I(float_to_int(to, x)),
            other => unreachable!("{other:?}"),
        }
    }
    fn bitcast(&mut self, _from: DType, _to: DType, x: V) -> V {
        match x {
            V::F(x) => V::I(x.to_bits() as i64),
            V::I(i) => V::F(f32::from_bits(i as u32)),
            other => unreachable!("{other:?}"),
        }
    }
    fn thread_index(&mut self) -> V {
        unreachable!()
    }
    fn program_id(&mut self, _axis: u32) -> V {
        unreachable!()
    }
    fn num_programs(&mut self, _axis: u32) -> V {
        unreachable!()
    }
    fn scalar_param(&mut self, _param: u32, _dtype: DType) -> V {
        unreachable!()
    }
    fn load_global(&mut self, _buffer: u32, _dtype: DType, _index: V, _index_dtype: DType) -> V {
        unreachable!()
    }
    fn store_global(&mut self, _buffer: u32, _dtype: DType, _index: V, _index_dtype: DType, _value: V) {
        unreachable!()
    }
    fn atomic_global(&mut self, _: Option<AtomicOp>, _: u32, _: DType, _: V, _: DType, _: Option<V>, _: V) -> V {
        unreachable!()
    }
    fn reserve_shared(&mut self, _dtype: DType, _len: u32) {
        unreachable!()
    }
    fn load_shared(&mut self, _dtype: DType, _index: V) -> V {
        unreachable!()
    }
    fn store_shared(&mut self, _dtype: DType, _index: V, _value: V) {
        unreachable!()
    }
    fn barrier(&mut self) {
        unreachable!()
    }
    fn shuffle_xor(&mut self, _dtype: DType, _value: V, _lane_mask: u32) -> V {
        unreachable!()
    }
    fn begin_if(&mut self, _cond: V, _result_dtypes: &[DType]) {
        unreachable!()
    }
    fn begin_else(&mut self, _then_values: &[V]) {
        unreachable!()
    }
    fn end_if(&mut self, _else_values: &[V]) -> Vec<V> {
        unreachable!()
    }
    fn begin_loop(&mut self, _: DType, _: V, _: V, _: V, _: &[(DType, V)]) -> (V, Vec<V>) {
        unreachable!()
    }
    fn end_loop(&mut self, _next: &[V]) -> Vec<V> {
        unreachable!()
    }
}

/// Uniform doubles in [0, 1) from xorshift64 seeded with `state`.
fn uniform(mut state: u64) -> impl FnMut() -> f64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn eval(x: f32, cos: bool) -> f32 {
    match sin_cos(&mut Eval, V::F(x), cos) {
        V::F(y) => y,
        other => unreachable!("{other:?}"),
    }
}

/// Random operands over the reduced range, near multiples of pi/2 (where x - k pi/2 cancels),
/// small and subnormal ones: every result within the AMDGCN bound (the same sequence), and the
/// largest errors printed (`cargo test -p tilekit-core --release sin_cos -- --nocapture`).
#[test]
fn sin_cos_within_the_bound() {
    let mut next = uniform(0x9E37_79B9_7F4A_7C15);
    for cos in [false, true] {
        let op = if cos { MathOp::Cos } else { MathOp::Sin };
        let b = bound(op, MathBackend::Amdgcn, DType::F32);
        let (mut max_ulp, mut max_abs, mut of_bound) = (0f64, 0f64, 0f64);
        for i in 0..2_000_000u32 {
            let u = next();
            let x = match i % 4 {
                0 => (u * 2.0 - 1.0) * 10.0,
                1 => (u * 2.0 - 1.0) * SIN_COS_REDUCED,
                2 => ((u * 2.0 - 1.0) * 131_072.0).round() * std::f64::consts::FRAC_PI_2,
                _ => 2f64.powf(-149.0 + u * 149.0),
            } as f32;
            let (x, exact) = (x as f64, if cos { (x as f64).cos() } else { (x as f64).sin() });
            let got = eval(x as f32, cos) as f64;
            assert!(b.allows(DType::F32, x, 0.0, exact, got), "{}({x:e}) = {exact:e}, got {got:e}", op.name());
            let e = (got - exact).abs();
            max_ulp = max_ulp.max(e / ulp_f32(exact));
            max_abs = max_abs.max(e);
            of_bound = of_bound.max(e / b.tolerance(DType::F32, x, exact));
        }
        println!("{}: max {max_ulp:.2} ulp, {max_abs:.2e} absolute, {of_bound:.2} of the bound", op.name());
    }
    assert_eq!(eval(-0.0, false).to_bits(), (-0.0f32).to_bits());
    assert_eq!(eval(0.0, true), 1.0);
    assert_eq!(eval(1e-40, false), 1e-40);
    for x in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        assert!(eval(x, false).is_nan() && eval(x, true).is_nan());
    }
    for x in [1e10f32, -3e38, 3.4e38, 1e6] {
        let (s, c) = (eval(x, false), eval(x, true));
        assert!((-1.0..=1.0).contains(&s) && (-1.0..=1.0).contains(&c), "{x:e}: {s} {c}");
    }
}

/// One of [`super`]'s sequences on the host.
type Sequence = fn(&mut Eval, V) -> V;

fn eval_with(f: Sequence, x: f32) -> f32 {
    match f(&mut Eval, V::F(x)) {
        V::F(y) => y,
        other => unreachable!("{other:?}"),
    }
}

/// `tanh` and `erf` on random operands of every magnitude (near 0, around the range switches,
/// saturated, subnormal): every result within the SPIR-V bound (the same sequences; the host's
/// `exp` and division are more accurate than a device's, which the bound allows for), and the
/// largest errors printed (`cargo test -p tilekit-core --release tanh_and_erf -- --nocapture`).
#[test]
fn tanh_and_erf_within_the_bound() {
    let mut next = uniform(0x2545_F491_4F6C_DD1D);
    let exact_tanh: fn(f64) -> f64 = f64::tanh;
    let exact_erf: fn(f64) -> f64 = libm::erf;
    let cases = [(MathOp::Tanh, tanh as Sequence, exact_tanh), (MathOp::Erf, erf as Sequence, exact_erf)];
    for (op, f, exact_of) in cases {
        let b = bound(op, MathBackend::Spirv, DType::F32);
        let (mut max_ulp, mut of_bound) = (0f64, 0f64);
        for i in 0..1_000_000u32 {
            let u = next();
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            let x = sign
                * match i % 5 {
                    0 => u * 8.0,
                    1 => 0.5 + u * 1.0,
                    2 => 2f64.powf(-149.0 + u * 149.0),
                    3 => 1.2 + u * 0.2,
                    _ => 2f64.powf(u * 7.0),
                };
            let x = x as f32;
            let exact = exact_of(x as f64);
            let got = eval_with(f, x) as f64;
            assert!(b.allows(DType::F32, x as f64, 0.0, exact, got), "{}({x:e}) = {exact:e}, got {got:e}", op.name());
            let e = (got - exact).abs();
            max_ulp = max_ulp.max(e / ulp_f32(exact));
            of_bound = of_bound.max(e / b.tolerance(DType::F32, x as f64, exact));
        }
        println!("{}: max {max_ulp:.2} ulp, {of_bound:.2} of the bound", op.name());
        for z in [0.0f32, -0.0] {
            assert_eq!(eval_with(f, z).to_bits(), z.to_bits(), "{}({z})", op.name());
        }
        assert!(eval_with(f, f32::NAN).is_nan());
        assert_eq!((eval_with(f, f32::INFINITY), eval_with(f, f32::NEG_INFINITY)), (1.0, -1.0), "{}", op.name());
        assert_eq!((eval_with(f, 1e30), eval_with(f, -10.0)), (1.0, -1.0), "{}", op.name());
    }
}

// ---- the shared legalizations (crate::gpu::legalize), on the same evaluator ----

fn f(v: V) -> f32 {
    match v {
        V::F(x) => x,
        other => panic!("not an f32: {other:?}"),
    }
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Values every rule meets: signed zeros, subnormals, infinities, NaN, and ordinary numbers.
fn specials() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1e-45,
        -1e-45,
        1e-40,
        f32::MIN_POSITIVE,
        1.0,
        -1.0,
        1.5,
        -75.0,
        150.0,
        3e38,
        -3e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let mut next = uniform(0x1E6A);
    v.extend((0..200).map(|_| ((next() - 0.5) * 2e4) as f32));
    v
}

/// fmod from a driver's remainder is C's fmod (Rust's `%`): bit for bit from an exact one
/// (lavapipe's, LLVM's frem) for every pair; from `a - b * trunc(a / b)`, whose product rounds,
/// within two ulp of the larger operand and with fmod's sign, wherever the quotient is below
/// 2^23 (beyond, the formula loses every bit and nothing can recover it).
#[test]
fn fmod_from_the_driver_remainder_is_c_fmod() {
    for &a in &specials() {
        for &b in &specials() {
            let want = a % b;
            let got = f(legalize::fmod(&mut Eval, V::F(a), V::F(b), V::F(want)));
            assert!(same(got, want), "fmod({a:e}, {b:e}) from the exact remainder = {got:e}, want {want:e}");
            if (a / b).abs() < 8_388_608.0 {
                let raw = a - b * (a / b).trunc();
                let got = f(legalize::fmod(&mut Eval, V::F(a), V::F(b), V::F(raw)));
                let close = (got as f64 - want as f64).abs() <= 2.0 * ulp_f32(a.abs().max(b.abs()) as f64);
                assert!(
                    same(got, want) || (close && got.is_sign_negative() == want.is_sign_negative()),
                    "fmod({a:e}, {b:e}) from {raw:e} = {got:e}, want {want:e}"
                );
            }
        }
    }
}

/// Arithmetic on a constant zero gives the IEEE result on either side and for both zeros.
#[test]
fn constant_zero_rules_are_ieee() {
    for &x in &specials() {
        for z in [0.0f32, -0.0] {
            let neg = z.is_sign_negative();
            for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
                let ieee = |a: f32, b: f32| binary_float(op, DType::F32, a, b);
                if let Some(r) = legalize::with_constant_zero(&mut Eval, op, V::F(x), V::F(z), None, Some(neg)) {
                    assert!(same(f(r), ieee(x, z)), "{x:e} {op:?} {z:e} = {:e}", f(r));
                }
                if let Some(r) = legalize::with_constant_zero(&mut Eval, op, V::F(z), V::F(x), Some(neg), None) {
                    assert!(same(f(r), ieee(z, x)), "{z:e} {op:?} {x:e} = {:e}", f(r));
                }
            }
        }
    }
}

/// Float to integer: NaN to 0, saturation, truncation, as the interpreter's cast.
#[test]
fn float_to_int_saturates_as_the_cast() {
    let mut xs = specials();
    xs.extend([2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 4294967040.0, 4294967296.0, 127.9, 128.0, -128.9, 255.5, 9.2e18, -9.3e18]);
    for to in [DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::I64] {
        for &x in &xs {
            // The driver's conversion, given a value in range: truncation.
            let got = legalize::f32_to_int(&mut Eval, V::F(x), to, |_, c| V::I(f(c) as f64 as i64));
            let got = match got {
                V::I(i) => i,
                other => panic!("{other:?}"),
            };
            assert_eq!(got, float_to_int(to, x), "{x:e} as {to}");
        }
    }
}

/// The logarithm of a subnormal, scaled into the normal range first, is as accurate as of a
/// normal number (the driver's log here is the host's).
#[test]
fn log_of_subnormals_is_accurate() {
    for bits in [1u32, 2, 3, 1000, 0x0040_0000, 0x007F_FFFF, 0x0080_0000, 0x3F80_0000] {
        let x = f32::from_bits(bits);
        for natural in [true, false] {
            let got = f(legalize::log(&mut Eval, natural, V::F(x), |_, xs| V::F(if natural { f(xs).ln() } else { f(xs).log2() })));
            let want = if natural { (x as f64).ln() } else { (x as f64).log2() };
            assert!(((got as f64) - want).abs() <= 2.0 * ulp_f32(want), "log{} of {x:e}: {got:e}, want {want:e}", if natural { "" } else { "2" });
        }
    }
}
