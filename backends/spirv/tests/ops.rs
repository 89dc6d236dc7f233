//! Scalar primitives on a Vulkan device (lavapipe by default), each module checked by spirv-val,
//! against plain-Rust computations of the interpreter's semantics.
#![cfg(feature = "vulkan")]
#![allow(clippy::needless_range_loop, clippy::type_complexity)]

mod common;

use common::*;
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilekit_core::gpu::{Emitter, Target};
use tilekit_core::ir::{BinaryOp, CmpPred, UnaryOp};
use tilekit_core::{DType, HostBuffer};
use tilekit_spirv::VulkanRuntime;

const N: usize = 1013;
const T: u32 = 64;

const INTS: [DType; 6] = [DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::I64];

fn int_binary_ref(op: BinaryOp, d: DType, x: i64, y: i64) -> i64 {
    let r = match op {
        BinaryOp::Add => x.wrapping_add(y),
        BinaryOp::Sub => x.wrapping_sub(y),
        BinaryOp::Mul => x.wrapping_mul(y),
        BinaryOp::Div => x.wrapping_div(y),
        BinaryOp::Rem => x.wrapping_rem(y),
        BinaryOp::And => x & y,
        BinaryOp::Or => x | y,
        BinaryOp::Xor => x ^ y,
        BinaryOp::Shl => x.wrapping_shl(y as u32),
        BinaryOp::Shr if d.is_signed_int() => x >> y,
        BinaryOp::Shr => ((x as u64) >> y) as i64,
        BinaryOp::Max => x.max(y),
        BinaryOp::Min => x.min(y),
    };
    wrap(d, r)
}

#[test]
fn integer_binary_ops_wrap_and_truncate() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(1);
    for d in INTS {
        let (lo, hi) = d.int_range().unwrap();
        let mut x: Vec<i64> = (0..N).map(|_| rand_int(&mut rng, d)).collect();
        let mut y: Vec<i64> = (0..N)
            .map(|_| loop {
                // Small divisors too, so quotients are not all 0.
                let v = if rng.gen_bool(0.5) { rand_int(&mut rng, d) } else { wrap(d, rng.gen_range(-9..=9)) };
                if v != 0 {
                    break v;
                }
            })
            .collect();
        let s: Vec<i64> = (0..N).map(|_| rng.gen_range(0..d.bits() as i64)).collect();
        // The edge cases of C division: MIN / -1 wraps, signs of quotient and remainder.
        let specials = [(lo, -1), (lo, 1), (-7, 2), (7, -2), (-7, -2), (0, 5), (hi, hi), (lo, lo), (hi, -1)];
        for (i, &(a, b)) in specials.iter().enumerate() {
            let (a, b) = (wrap(d, a), wrap(d, b));
            if b != 0 {
                x[i] = a;
                y[i] = b;
            }
        }
        let ops = BinaryOp::ALL;
        let k = elementwise(&format!("int_binary_{d}"), &target, T, &[d, d, d], &[d; 12], |e, v| {
            ops.iter()
                .map(|&op| {
                    let rhs = if matches!(op, BinaryOp::Shl | BinaryOp::Shr) { v[2] } else { v[1] };
                    e.binary(op, d, v[0], rhs)
                })
                .collect()
        });
        let out = run_elementwise(&rt, &k, T, &[ints(d, &x), ints(d, &y), ints(d, &s)], &[d; 12]);
        for (j, &op) in ops.iter().enumerate() {
            let got = read_ints(&out[j]);
            for i in 0..N {
                let rhs = if matches!(op, BinaryOp::Shl | BinaryOp::Shr) { s[i] } else { y[i] };
                let want = int_binary_ref(op, d, x[i], rhs);
                assert_eq!(got[i], want, "{d} {} ({}, {rhs}) at {i}", op.name(), x[i]);
            }
        }
    }
}

#[test]
fn bool_binary_ops() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(2);
    let d = DType::I1;
    let x: Vec<i64> = (0..N).map(|_| rng.gen_range(0..2)).collect();
    let y: Vec<i64> = (0..N).map(|_| rng.gen_range(0..2)).collect();
    let ops = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::And, BinaryOp::Or, BinaryOp::Xor, BinaryOp::Max, BinaryOp::Min];
    let k = elementwise("bool_binary", &target, T, &[d, d], &[d; 8], |e, v| ops.iter().map(|&op| e.binary(op, d, v[0], v[1])).collect());
    let out = run_elementwise(&rt, &k, T, &[ints(d, &x), ints(d, &y)], &[d; 8]);
    for (j, &op) in ops.iter().enumerate() {
        let got = read_ints(&out[j]);
        for i in 0..N {
            assert_eq!(got[i], int_binary_ref(op, DType::U8, x[i], y[i]) & 1, "i1 {} ({}, {})", op.name(), x[i], y[i]);
        }
    }
}

fn float_binary_ref(op: BinaryOp, d: DType, x: f32, y: f32) -> f32 {
    let r = match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        BinaryOp::Rem => x % y,
        BinaryOp::Max => x.max(y),
        BinaryOp::Min => x.min(y),
        _ => unreachable!(),
    };
    round_to(d, r)
}

/// f32, f16 and bf16 arithmetic; f16/bf16 bit-exact against the `half` crate's rounding.
#[test]
fn float_binary_ops() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(3);
    let ops = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Rem, BinaryOp::Max, BinaryOp::Min];
    for d in [DType::F32, DType::F16, DType::BF16] {
        // Magnitudes in [0.5, 200] keep every f16 result normal (subnormal f16 handling is the
        // device's choice), and quotients small enough for a precise remainder.
        let gen = |rng: &mut StdRng| {
            let m = rng.gen_range(0.5f32..200.0);
            round_to(d, if rng.gen_bool(0.5) { -m } else { m })
        };
        let mut x: Vec<f32> = (0..N).map(|_| gen(&mut rng)).collect();
        let mut y: Vec<f32> = (0..N).map(|_| gen(&mut rng)).collect();
        // NaN loses to a number in max/min; infinities and equal operands.
        // Integer quotients: a division a few ulp low truncates one short, and the remainder
        // comes out a whole divisor off (150 % -75 was 75 on NVIDIA's Vulkan driver).
        let specials = [
            (f32::NAN, 1.5),
            (2.5, f32::NAN),
            (f32::INFINITY, 3.0),
            (-4.0, f32::NEG_INFINITY),
            (7.0, 7.0),
            (f32::NAN, f32::NAN),
            (150.0, -75.0),
            (-113.5, 28.375),
            (-150.0, 50.0),
            (189.0, 3.0),
        ];
        for (i, &(a, b)) in specials.iter().enumerate() {
            x[i] = a;
            y[i] = b;
        }
        let k = elementwise(&format!("float_binary_{d}"), &target, T, &[d, d], &[d; 7], |e, v| {
            ops.iter().map(|&op| e.binary(op, d, v[0], v[1])).collect()
        });
        let out = run_elementwise(&rt, &k, T, &[floats(d, &x), floats(d, &y)], &[d; 7]);
        for (j, &op) in ops.iter().enumerate() {
            let got = read_floats(&out[j]);
            for i in 0..N {
                let want = float_binary_ref(op, d, x[i], y[i]);
                let ok = match op {
                    // Vulkan allows x - y * trunc(x / y); the inputs keep that within a few ulp of x.
                    // Devices compute f16 remainders through an approximate f16 division
                    // (NVIDIA's is off by a whole divisor when the quotient is an integer); the
                    // lowering computes f16 `rem` in f32, so the primitive is not held to it.
                    BinaryOp::Rem if d == DType::F16 => true,
                    BinaryOp::Rem => {
                        same_float(got[i], want)
                            || (got[i] - want).abs() <= 4.0 * f32::EPSILON * x[i].abs().max(y[i].abs()) * if d == DType::F32 { 1.0 } else { 256.0 }
                    }
                    // Vulkan allows 2.5 ulp for f32 division, and devices divide f16 natively
                    // within 1 ulp (NVIDIA's is not correctly rounded); the lowering divides f16
                    // through f32 for exact results. bf16 results must round exactly.
                    BinaryOp::Div if d == DType::F32 => ulps(got[i], want) <= 3,
                    BinaryOp::Div if d == DType::F16 => {
                        let (g, w) = (half::f16::from_f32(got[i]).to_bits() as i32, half::f16::from_f32(want).to_bits() as i32);
                        same_float(got[i], want) || (g - w).abs() <= 1
                    }
                    _ => same_float(got[i], want),
                };
                assert!(ok, "{d} {} ({}, {}): got {} want {}", op.name(), x[i], y[i], got[i], want);
            }
        }
    }
}

#[test]
fn integer_and_bool_unary_ops() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(4);
    let ops = [UnaryOp::Neg, UnaryOp::Not, UnaryOp::Abs];
    for d in INTS.into_iter().chain([DType::I1]) {
        let mut x: Vec<i64> = (0..N).map(|_| if d == DType::I1 { rng.gen_range(0..2) } else { rand_int(&mut rng, d) }).collect();
        let (lo, hi) = d.int_range().unwrap();
        x[0] = lo;
        x[1] = hi;
        x[2] = 0;
        let k = elementwise(&format!("int_unary_{d}"), &target, T, &[d], &[d; 3], |e, v| ops.iter().map(|&op| e.unary(op, d, v[0])).collect());
        let out = run_elementwise(&rt, &k, T, &[ints(d, &x)], &[d; 3]);
        for (j, &op) in ops.iter().enumerate() {
            let got = read_ints(&out[j]);
            for i in 0..N {
                let want = wrap(
                    d,
                    match op {
                        UnaryOp::Neg => x[i].wrapping_neg(),
                        UnaryOp::Not => !x[i],
                        _ => x[i].wrapping_abs(),
                    },
                );
                assert_eq!(got[i], want, "{d} {} {}", op.name(), x[i]);
            }
        }
    }
}

/// Reference and accepted error for each f32 function (Vulkan's precision table, with margin).
fn check_unary_f32(op: UnaryOp, x: f32, got: f32) -> bool {
    let want = match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Exp2 => x.exp2(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Log2 => x.log2(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Erf => libm::erff(x),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Not => x,
    };
    if same_float(got, want) {
        return true;
    }
    let err = (got - want).abs();
    match op {
        UnaryOp::Exp | UnaryOp::Exp2 => err <= 1e-5 * want.abs(),
        UnaryOp::Log | UnaryOp::Log2 => err <= 1e-6 + 1e-6 * want.abs(),
        UnaryOp::Sqrt | UnaryOp::Rsqrt => ulps(got, want) <= 3,
        UnaryOp::Sin | UnaryOp::Cos => err <= 1e-5,
        // Relative near 0 too: tilekit's own tanh, not GLSL's formula, which cancels there.
        UnaryOp::Tanh => ulps(got, want) <= 16,
        // musl's erff is within 1 ulp; the GPU's exp adds its own error in the tail.
        UnaryOp::Erf => ulps(got, want) <= 4 || err <= 2e-7,
        _ => false,
    }
}

fn unary_input(rng: &mut StdRng, op: UnaryOp) -> f32 {
    match op {
        UnaryOp::Exp | UnaryOp::Exp2 => rng.gen_range(-20.0f32..20.0),
        UnaryOp::Log | UnaryOp::Log2 | UnaryOp::Sqrt | UnaryOp::Rsqrt => rand_float(rng, -6.0..6.0).abs(),
        UnaryOp::Sin | UnaryOp::Cos => rng.gen_range(-3.2f32..3.2),
        UnaryOp::Tanh => rng.gen_range(-12.0f32..12.0),
        UnaryOp::Erf => match rng.gen_range(0..4) {
            0 => rng.gen_range(-0.9f32..0.9),
            1 => rng.gen_range(-1.3f32..1.3),
            2 => rng.gen_range(-7.0f32..7.0),
            _ => rand_float(rng, -30.0..1.0),
        },
        _ => rand_float(rng, -3.0..6.0),
    }
}

#[test]
fn float_unary_ops() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(5);
    let ops: Vec<UnaryOp> = UnaryOp::ALL.into_iter().filter(|&op| op != UnaryOp::Not).collect();
    let inputs: Vec<Vec<f32>> = ops
        .iter()
        .map(|&op| {
            let mut v: Vec<f32> = (0..N).map(|_| unary_input(&mut rng, op)).collect();
            if op == UnaryOp::Tanh {
                // Near 0 (where GLSL's formula cancels), the branch point, zeros, NaN, infinities.
                let special =
                    [1e-4, -1e-4, 1e-7, 3e-3, 0.3, 0.6249999, 0.625, -0.625, 0.7, 0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-30];
                v[..special.len()].copy_from_slice(&special);
            }
            if op == UnaryOp::Erf {
                // The range boundaries of erff, its tails, NaN and infinities.
                let special = [0.0, -0.0, 0.84375, -0.84375, 1.25, 2.857142, 6.0, -6.0, 10.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-30];
                v[..special.len()].copy_from_slice(&special);
            }
            v
        })
        .collect();
    let d = DType::F32;
    let n_ops = ops.len();
    let k = elementwise("float_unary", &target, T, &vec![d; n_ops], &vec![d; n_ops], |e, v| {
        ops.iter().zip(v).map(|(&op, &x)| e.unary(op, d, x)).collect()
    });
    let bufs: Vec<HostBuffer> = inputs.iter().map(|v| floats(d, v)).collect();
    let out = run_elementwise(&rt, &k, T, &bufs, &vec![d; n_ops]);
    for (j, &op) in ops.iter().enumerate() {
        let got = read_floats(&out[j]);
        for i in 0..N {
            let x = inputs[j][i];
            assert!(check_unary_f32(op, x, got[i]), "f32 {}({x:e}) = {:e}", op.name(), got[i]);
        }
    }
}

/// f16 and bf16 functions: neg/abs exactly; the others computed in f32 and rounded once, within
/// one step of the correctly rounded result (the f32 function itself is approximate).
#[test]
fn half_unary_ops() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(6);
    let ops = [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Exp, UnaryOp::Sqrt, UnaryOp::Floor, UnaryOp::Tanh, UnaryOp::Erf];
    for d in [DType::F16, DType::BF16] {
        let inputs: Vec<Vec<f32>> = ops
            .iter()
            .map(|&op| {
                (0..N)
                    .map(|_| {
                        let x = match op {
                            UnaryOp::Exp => rng.gen_range(-8.0f32..8.0),
                            UnaryOp::Sqrt => rng.gen_range(0.01f32..1000.0),
                            _ => rng.gen_range(-100.0f32..100.0),
                        };
                        round_to(d, x)
                    })
                    .collect()
            })
            .collect();
        let k = elementwise(&format!("half_unary_{d}"), &target, T, &[d; 7], &[d; 7], |e, v| {
            ops.iter().zip(v).map(|(&op, &x)| e.unary(op, d, x)).collect()
        });
        let bufs: Vec<HostBuffer> = inputs.iter().map(|v| floats(d, v)).collect();
        let out = run_elementwise(&rt, &k, T, &bufs, &[d; 7]);
        for (j, &op) in ops.iter().enumerate() {
            for i in 0..N {
                let x = inputs[j][i];
                let gb = out[j].load_bits(i);
                let exact = match op {
                    UnaryOp::Neg => -x,
                    UnaryOp::Abs => x.abs(),
                    UnaryOp::Exp => x.exp(),
                    UnaryOp::Sqrt => x.sqrt(),
                    UnaryOp::Floor => x.floor(),
                    UnaryOp::Tanh => x.tanh(),
                    _ => libm::erff(x),
                };
                let wb = float_bits(d, exact);
                let steps = (gb as i64 - wb as i64).unsigned_abs();
                let allowed = if matches!(op, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Floor) { 0 } else { 1 };
                assert!(steps <= allowed, "{d} {}({x}) = {:#x}, want {:#x}", op.name(), gb, wb);
            }
        }
    }
}

/// Every comparison on every dtype (unordered float compares are false except `ne`), and select.
#[test]
fn comparisons_and_select() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(7);
    let preds = CmpPred::ALL;
    for d in DType::ALL {
        let (x, y): (HostBuffer, HostBuffer);
        let (xv, yv): (Vec<f64>, Vec<f64>);
        if d.is_float() {
            let mut a: Vec<f32> = (0..N).map(|_| round_to(d, rand_float(&mut rng, -2.0..3.0))).collect();
            let mut b: Vec<f32> = (0..N).map(|i| if i % 4 == 0 { a[i] } else { round_to(d, rand_float(&mut rng, -2.0..3.0)) }).collect();
            a[1] = f32::NAN;
            b[2] = f32::NAN;
            a[3] = -0.0;
            b[3] = 0.0;
            a[5] = f32::INFINITY;
            x = floats(d, &a);
            y = floats(d, &b);
            xv = a.iter().map(|&v| v as f64).collect();
            yv = b.iter().map(|&v| v as f64).collect();
        } else {
            let gen = |rng: &mut StdRng| if d == DType::I1 { rng.gen_range(0..2) } else { rand_int(rng, d) };
            let a: Vec<i64> = (0..N).map(|_| gen(&mut rng)).collect();
            let b: Vec<i64> = (0..N).map(|i| if i % 4 == 0 { a[i] } else { gen(&mut rng) }).collect();
            x = ints(d, &a);
            y = ints(d, &b);
            xv = a.iter().map(|&v| v as f64).collect();
            yv = b.iter().map(|&v| v as f64).collect();
        }
        let mut outs = vec![DType::I1; 6];
        outs.push(d);
        let k = elementwise(&format!("cmp_{d}"), &target, T, &[d, d], &outs, |e, v| {
            let mut r: Vec<_> = preds.iter().map(|&p| e.cmp(p, d, v[0], v[1])).collect();
            let lt = r[2];
            r.push(e.select(d, lt, v[0], v[1]));
            r
        });
        let out = run_elementwise(&rt, &k, T, &[x.clone(), y.clone()], &outs);
        for (j, &p) in preds.iter().enumerate() {
            let got = read_ints(&out[j]);
            for i in 0..N {
                let (a, b) = (xv[i], yv[i]);
                // i64 compare exactly: f64 loses low bits of large i64 values.
                let (ai, bi) = (x.load_bits(i) as i64, y.load_bits(i) as i64);
                let want = if d == DType::I64 {
                    match p {
                        CmpPred::Eq => ai == bi,
                        CmpPred::Ne => ai != bi,
                        CmpPred::Lt => ai < bi,
                        CmpPred::Le => ai <= bi,
                        CmpPred::Gt => ai > bi,
                        CmpPred::Ge => ai >= bi,
                    }
                } else {
                    match p {
                        CmpPred::Eq => a == b,
                        CmpPred::Ne => a != b,
                        CmpPred::Lt => a < b,
                        CmpPred::Le => a <= b,
                        CmpPred::Gt => a > b,
                        CmpPred::Ge => a >= b,
                    }
                };
                assert_eq!(got[i], want as i64, "{d} {} ({a}, {b})", p.name());
            }
        }
        let sel = &out[6];
        let lt = read_ints(&out[2]);
        for i in 0..N {
            let want = if lt[i] != 0 { x.load_bits(i) } else { y.load_bits(i) };
            assert_eq!(sel.load_bits(i), want, "{d} select at {i}");
        }
    }
}

/// A reference value: integers exactly, floats as f32 (f16/bf16 values are exact in f32).
#[derive(Clone, Copy, Debug)]
enum Val {
    I(i64),
    F(f32),
}

fn cast_ref(v: Val, to: DType) -> Val {
    match (v, to.is_float()) {
        (Val::F(a), true) => Val::F(round_to(to, a)),
        (Val::I(a), true) => Val::F(match to {
            DType::F16 => f16::from_f64(a as f64).to_f32(),
            DType::BF16 => int_to_bf16(a),
            _ => a as f32,
        }),
        (Val::F(a), false) => {
            if to == DType::I1 {
                return Val::I((a != 0.0) as i64);
            }
            let (lo, hi) = to.int_range().unwrap();
            Val::I((a as i64).clamp(lo, hi))
        }
        (Val::I(a), false) => Val::I(if to == DType::I1 { (a != 0) as i64 } else { wrap(to, a) }),
    }
}

/// An integer rounded once to bf16's 8 significant bits, nearest even. (`half`'s `from_f64`
/// drops the low 32 bits of the f64 before rounding, so it misrounds e.g. 2^24 + 2^16 + 1.)
fn int_to_bf16(a: i64) -> f32 {
    let u = a.unsigned_abs();
    if u < 1 << 8 {
        return a as f32;
    }
    let msb = 63 - u.leading_zeros();
    let shift = msb - 7;
    let (q, rem, half) = (u >> shift, u & ((1u64 << shift) - 1), 1u64 << (shift - 1));
    let up = rem > half || (rem == half && q & 1 == 1);
    let m = ((q + up as u64) as f64) * (2f64).powi(shift as i32);
    let r = bf16::from_f64(m).to_f32();
    if a < 0 {
        -r
    } else {
        r
    }
}

fn cast_inputs(rng: &mut StdRng, from: DType) -> Vec<Val> {
    let mut v: Vec<Val> = Vec::new();
    match from {
        DType::F32 => {
            let specials = [
                f32::NAN,
                -f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                0.0,
                -0.0,
                0.5,
                -0.5,
                1.5,
                -1.5,
                2.5,
                -0.99,
                127.5,
                128.0,
                -128.5,
                -129.0,
                255.5,
                256.0,
                32767.5,
                -32768.9,
                2147483520.0,
                2147483648.0,
                -2147483648.0,
                -2147483904.0,
                4294967040.0,
                4294967296.0,
                9.2e18,
                9.3e18,
                -9.3e18,
                65504.0,
                65519.0,
                65520.0,
                1e-5,
                5.96e-8,
                2.98e-8,
                2.99e-8,
                6.1e-5,
                1.0 + 1.0 / 2048.0,
                1.0 + 3.0 / 2048.0,
                1.0 + 1.0 / 256.0,
                1.0 + 3.0 / 256.0,
                f32::MAX,
                f32::MIN_POSITIVE,
                f32::from_bits(0x7fa0_1234),
                f32::from_bits(0xffc0_0001),
            ];
            v.extend(specials.iter().map(|&x| Val::F(x)));
            while v.len() < N {
                v.push(Val::F(if rng.gen_bool(0.3) { rng.gen_range(-300.0f32..300.0) } else { rand_float(rng, -8.0..20.0) }));
            }
        }
        DType::F16 | DType::BF16 => {
            // Every kind of bit pattern: subnormals, infinities, NaNs.
            while v.len() < N {
                let bits: u16 = rng.gen();
                v.push(Val::F(float_of(from, bits as u64)));
            }
        }
        d => {
            let (lo, hi) = d.int_range().unwrap();
            let specials: Vec<i64> = vec![
                0,
                1,
                -1,
                lo,
                hi,
                lo + 1,
                hi - 1,
                16842753,
                16842752,
                16777217,
                33554435,
                -16842753,
                255,
                256,
                65535,
                65536,
                1 << 40,
                (1 << 40) + (1 << 32) + 1,
            ];
            v.extend(specials.iter().map(|&x| Val::I(wrap(d, x))));
            while v.len() < N {
                v.push(Val::I(if d == DType::I1 { rng.gen_range(0..2) } else { rand_int(rng, d) }));
            }
        }
    }
    v.truncate(N);
    v
}

fn buffer_of(d: DType, vals: &[Val]) -> HostBuffer {
    let b = HostBuffer::zeros(d, vals.len());
    for (i, v) in vals.iter().enumerate() {
        b.store_bits(
            i,
            match *v {
                Val::I(x) => x as u64,
                // Stored bit-exactly: f16/bf16 inputs came from bit patterns.
                Val::F(x) => float_bits(d, x),
            },
        );
    }
    b
}

/// Every conversion between every pair of dtypes: float rounding to nearest even, float to int
/// truncating and saturating with NaN -> 0, int to int wrapping, anything to i1 as `!= 0`.
#[test]
fn casts_between_all_dtypes() {
    let rt = runtime();
    // Both ways f32 -> f16 is emitted: exact integer emulation, and `OpFConvert` under float
    // controls (RoundingModeRTE and DenormPreserve for 16 bits) where the device offers them.
    for f16_rte in [false, true] {
        if f16_rte && !rt.info().f16_rte {
            eprintln!("{}: no f16 float controls (RTE, denorm preserve); the OpFConvert path is not run", rt.info().name);
            continue;
        }
        let target = Target { f16_rte, ..rt.target() };
        check_casts(&rt, &target);
    }
}

fn check_casts(rt: &VulkanRuntime, target: &Target) {
    let mut rng = StdRng::seed_from_u64(8);
    let all = DType::ALL;
    for from in all {
        let vals = cast_inputs(&mut rng, from);
        let input = buffer_of(from, &vals);
        let k = elementwise(&format!("cast_from_{from}"), target, T, &[from], &all, |e, v| all.iter().map(|&to| e.cast(from, to, v[0])).collect());
        if from == DType::F32 {
            assert_eq!(k.requirements.f16_rte, target.f16_rte, "f32 -> f16 by float controls exactly when the target has them");
        }
        let out = run_elementwise(rt, &k, T, &[input], &all);
        for (j, &to) in all.iter().enumerate() {
            for (i, &v) in vals.iter().enumerate() {
                let got = out[j].load_bits(i);
                match cast_ref(v, to) {
                    Val::I(w) => assert_eq!(wrap(to, got as i64), w, "cast {from} -> {to} of {v:?}"),
                    Val::F(w) => {
                        let g = float_of(to, got);
                        // The expected bits: NaNs may differ in payload, everything else is exact.
                        assert!(
                            got == float_bits(to, w) || (w.is_nan() && g.is_nan()),
                            "cast {from} -> {to} of {v:?} (f16_rte {}): got {g:e} ({got:#x}), want {w:e} ({:#x})",
                            target.f16_rte,
                            float_bits(to, w)
                        );
                    }
                }
            }
        }
    }
}

/// `fma` on f32, f16 and bf16 against a fused f32 reference rounded once (devices may compute
/// a multiply then an add; the tolerance covers that rounding).
#[test]
fn fused_multiply_add() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(9);
    for d in [DType::F32, DType::F16, DType::BF16] {
        let gen = |rng: &mut StdRng| round_to(d, rng.gen_range(-30.0f32..30.0));
        let a: Vec<f32> = (0..N).map(|_| gen(&mut rng)).collect();
        let b: Vec<f32> = (0..N).map(|_| gen(&mut rng)).collect();
        let c: Vec<f32> = (0..N).map(|_| gen(&mut rng)).collect();
        let k = elementwise(&format!("fma_{d}"), &target, T, &[d; 3], &[d], |e, v| vec![e.fma(d, v[0], v[1], v[2])]);
        let out = run_elementwise(&rt, &k, T, &[floats(d, &a), floats(d, &b), floats(d, &c)], &[d]);
        let got = read_floats(&out[0]);
        let ulp = match d {
            DType::F32 => f32::EPSILON,
            DType::F16 => 1.0 / 1024.0,
            _ => 1.0 / 128.0,
        };
        for i in 0..N {
            let want = round_to(d, a[i].mul_add(b[i], c[i]));
            let tol = ulp * ((a[i] * b[i]).abs() + c[i].abs());
            assert!((got[i] - want).abs() <= tol, "{d} fma({}, {}, {}) = {}, want {want}", a[i], b[i], c[i], got[i]);
        }
    }
}
