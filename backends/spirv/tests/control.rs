//! Control flow, shared memory, barriers, shuffles, atomics, push constants and program ids on a
//! Vulkan device, each module checked by spirv-val.
#![cfg(feature = "vulkan")]
#![allow(clippy::needless_range_loop, clippy::type_complexity)]

mod common;

use std::collections::HashMap;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilekit_core::gpu::{Emitter, Target};
use tilekit_core::ir::{AtomicOp, BinaryOp, CmpPred, ParamKind, UnaryOp};
use tilekit_core::{DType, HostBuffer, Scalar};
use tilekit_spirv::{SpirvEmitter, SpirvKernel, SpirvValue};

const N: usize = 1013;
const T: u32 = 64;

fn c(e: &mut SpirvEmitter, d: DType, v: i64) -> SpirvValue {
    e.constant(d, Scalar::Int(v))
}

fn cf(e: &mut SpirvEmitter, v: f64) -> SpirvValue {
    e.constant(DType::F32, Scalar::Float(v))
}

fn build(name: &str, target: &Target, threads: u32, params: &[(&str, ParamKind)], body: impl FnOnce(&mut SpirvEmitter)) -> SpirvKernel {
    let prog = program(name, params);
    let mut e = SpirvEmitter::new(&prog, target, threads).unwrap_or_else(|err| panic!("{err}"));
    body(&mut e);
    e.finish().unwrap_or_else(|err| panic!("{err}"))
}

/// `if` yielding values, nested in a branch that yields too.
#[test]
fn if_else_with_values_and_nesting() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(11);
    let x: Vec<f32> = (0..N).map(|_| rng.gen_range(-50.0f32..50.0)).collect();
    let k: Vec<i64> = (0..N).map(|_| rand_int(&mut rng, DType::I32)).collect();
    let (f, i) = (DType::F32, DType::I32);
    let kernel = elementwise("if_values", &target, T, &[f, i], &[f, i], |e, v| {
        let zero = cf(e, 0.0);
        let pos = e.cmp(CmpPred::Gt, f, v[0], zero);
        e.begin_if(pos, &[f, i]);
        let two = cf(e, 2.0);
        let a = e.binary(BinaryOp::Mul, f, v[0], two);
        let one = c(e, i, 1);
        let low = e.binary(BinaryOp::And, i, v[1], one);
        let z = c(e, i, 0);
        let odd = e.cmp(CmpPred::Ne, i, low, z);
        e.begin_if(odd, &[i]);
        let up = e.binary(BinaryOp::Add, i, v[1], one);
        e.begin_else(&[up]);
        let down = e.binary(BinaryOp::Sub, i, v[1], one);
        let inner = e.end_if(&[down]);
        e.begin_else(&[a, inner[0]]);
        let neg = e.unary(UnaryOp::Neg, f, v[0]);
        let three = c(e, i, 3);
        let t = e.binary(BinaryOp::Mul, i, v[1], three);
        e.end_if(&[neg, t])
    });
    let out = run_elementwise(&rt, &kernel, T, &[floats(f, &x), ints(i, &k)], &[f, i]);
    let (of, oi) = (read_floats(&out[0]), read_ints(&out[1]));
    for j in 0..N {
        let (wf, wi) =
            if x[j] > 0.0 { (x[j] * 2.0, if k[j] & 1 != 0 { wrap(i, k[j] + 1) } else { wrap(i, k[j] - 1) }) } else { (-x[j], wrap(i, k[j] * 3)) };
        assert_eq!((of[j], oi[j]), (wf, wi), "element {j}: x = {}, k = {}", x[j], k[j]);
    }
}

/// An `if` closed without `begin_else` (no values): a masked store.
#[test]
fn if_without_else_is_a_masked_store() {
    let rt = runtime();
    let target = rt.target();
    let i = DType::I32;
    let kernel = build("if_no_else", &target, T, &[("out", output(i)), ("n", scalar(i))], |e| {
        let (idx, mask) = global_index(e, T, 1);
        let three = c(e, i, 3);
        let r = e.binary(BinaryOp::Rem, i, idx, three);
        let z = c(e, i, 0);
        let hit = e.cmp(CmpPred::Eq, i, r, z);
        let both = e.binary(BinaryOp::And, DType::I1, hit, mask);
        e.begin_if(both, &[]);
        let v = e.binary(BinaryOp::Mul, i, idx, idx);
        e.store_global(0, i, idx, i, v);
        e.end_if(&[]);
    });
    let n = 997usize;
    let out = HostBuffer::zeros(i, n + 8);
    out.fill_bits(0xDEAD_BEEF);
    let res = run(&rt, &kernel, [(n as u32).div_ceil(T), 1, 1], &[out], &[(1, Scalar::Int(n as i64))]);
    let got = read_ints(&res[0]);
    for (j, &g) in got.iter().enumerate() {
        let want = if j < n && j % 3 == 0 { (j * j) as i64 } else { 0xDEAD_BEEFu32 as i32 as i64 };
        assert_eq!(g, want, "element {j}");
    }
}

/// The interpreter's `for`: counts up or down, stops instead of wrapping, runs nothing for an
/// empty range; a zero step runs nothing (the interpreter reports it; a GPU must not hang).
fn loop_ref(d: DType, lo: i64, hi: i64, st: i64, x: f32) -> (f32, i64, i64, i64) {
    let (mut acc, mut cnt, mut flag, mut last) = (0.0f32, 0i64, 0i64, wrap(d, -1));
    if st == 0 {
        return (acc, cnt, flag, last);
    }
    let mut iv = lo;
    while (st > 0 && iv < hi) || (st < 0 && iv > hi) {
        acc = acc + x + iv as f32;
        cnt += 1;
        flag ^= (iv % 3 == 0) as i64;
        last = iv;
        match iv.checked_add(st) {
            Some(next) if wrap(d, next) == next => iv = next,
            _ => break,
        }
    }
    (acc, wrap(DType::I32, cnt), flag, last)
}

#[test]
fn loops_with_carried_values() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(12);
    let cases: Vec<(DType, Vec<(i64, i64, i64)>)> = vec![
        (
            DType::I32,
            vec![
                (0, 10, 1),
                (10, 0, -1),
                (3, 100, 7),
                (5, 5, 1),
                (-20, 20, 3),
                (7, 3, 2),
                (3, 7, -1),
                (i32::MAX as i64 - 10, i32::MAX as i64, 4),
                (i32::MIN as i64 + 10, i32::MIN as i64, -3),
                (0, 10, 0),
            ],
        ),
        (DType::I64, vec![(i64::MAX - 9, i64::MAX, 4), (-5, 5, 2), (5, -5, -3), (i64::MIN + 5, i64::MIN, -2)]),
        (DType::U32, vec![(0, 10, 3), (u32::MAX as i64 - 7, u32::MAX as i64, 3), (10, 0, 1)]),
        (DType::I8, vec![(120, 127, 2), (-100, 100, 37)]),
    ];
    for (d, runs) in cases {
        let (f, i, b) = (DType::F32, DType::I32, DType::I1);
        let params = [
            ("x", input(f)),
            ("acc", output(f)),
            ("cnt", output(i)),
            ("flag", output(b)),
            ("last", output(d)),
            ("lo", scalar(d)),
            ("hi", scalar(d)),
            ("step", scalar(d)),
            ("n", scalar(i)),
        ];
        let kernel = build(&format!("loop_{d}"), &target, T, &params, |e| {
            let (idx, mask) = global_index(e, T, 8);
            e.begin_if(mask, &[]);
            let xv = e.load_global(0, f, idx, i);
            let (lo, hi, st) = (e.scalar_param(5, d), e.scalar_param(6, d), e.scalar_param(7, d));
            let init = [(f, cf(e, 0.0)), (i, c(e, i, 0)), (b, e.constant(b, Scalar::Bool(false))), (d, c(e, d, -1))];
            let (iv, carried) = e.begin_loop(d, lo, hi, st, &init);
            let ivf = e.cast(d, f, iv);
            let a1 = e.binary(BinaryOp::Add, f, carried[0], xv);
            let a2 = e.binary(BinaryOp::Add, f, a1, ivf);
            let one = c(e, i, 1);
            let cnt = e.binary(BinaryOp::Add, i, carried[1], one);
            let three = c(e, d, 3);
            let m = e.binary(BinaryOp::Rem, d, iv, three);
            let z = c(e, d, 0);
            let hit = e.cmp(CmpPred::Eq, d, m, z);
            let flag = e.binary(BinaryOp::Xor, b, carried[2], hit);
            let after = e.end_loop(&[a2, cnt, flag, iv]);
            for (j, (&dt, v)) in [f, i, b, d].iter().zip(&after).enumerate() {
                e.store_global(1 + j as u32, dt, idx, i, *v);
            }
            e.begin_else(&[]);
            e.end_if(&[]);
        });
        for (lo, hi, st) in runs {
            let x: Vec<f32> = (0..N).map(|_| rng.gen_range(-4.0f32..4.0)).collect();
            let bufs = [floats(f, &x), HostBuffer::zeros(f, N), HostBuffer::zeros(i, N), HostBuffer::zeros(b, N), HostBuffer::zeros(d, N)];
            let sc = [(5, Scalar::Int(lo)), (6, Scalar::Int(hi)), (7, Scalar::Int(st)), (8, Scalar::Int(N as i64))];
            let out = run(&rt, &kernel, [(N as u32).div_ceil(T), 1, 1], &bufs, &sc);
            let (acc, cnt, flag, last) = (read_floats(&out[1]), read_ints(&out[2]), read_ints(&out[3]), read_ints(&out[4]));
            for j in 0..N {
                let want = loop_ref(d, lo, hi, st, x[j]);
                assert_eq!((acc[j], cnt[j], flag[j], last[j]), want, "{d} loop {lo}..{hi} step {st}, element {j}");
            }
        }
    }
}

/// Loops holding ifs holding ifs, and a loop inside an else-branch, all carrying values.
#[test]
fn nested_ifs_and_loops() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(13);
    let i = DType::I32;
    let x: Vec<i64> = (0..N).map(|_| rng.gen_range(-40..40)).collect();
    let kk = 13i64;
    let params = [("x", input(i)), ("out", output(i)), ("k", scalar(i)), ("n", scalar(i))];
    let kernel = build("nested", &target, T, &params, |e| {
        let (idx, mask) = global_index(e, T, 3);
        e.begin_if(mask, &[]);
        let xv = e.load_global(0, i, idx, i);
        let zero = c(e, i, 0);
        let one = c(e, i, 1);
        let kv = e.scalar_param(2, i);
        let (k, acc) = e.begin_loop(i, zero, kv, one, &[(i, xv)]);
        let low = e.binary(BinaryOp::And, i, k, one);
        let even = e.cmp(CmpPred::Eq, i, low, zero);
        e.begin_if(even, &[i]);
        let big = e.cmp(CmpPred::Gt, i, xv, k);
        e.begin_if(big, &[i]);
        let t = e.binary(BinaryOp::Add, i, acc[0], xv);
        e.begin_else(&[t]);
        let el = e.binary(BinaryOp::Sub, i, acc[0], one);
        let r1 = e.end_if(&[el]);
        e.begin_else(&[r1[0]]);
        let three = c(e, i, 3);
        let m = e.binary(BinaryOp::Mul, i, acc[0], three);
        let two = c(e, i, 2);
        let (j, a2) = e.begin_loop(i, zero, two, one, &[(i, m)]);
        let s = e.binary(BinaryOp::Add, i, a2[0], j);
        let r = e.end_loop(&[s]);
        let r2 = e.end_if(&[r[0]]);
        let res = e.end_loop(&[r2[0]]);
        e.store_global(1, i, idx, i, res[0]);
        e.begin_else(&[]);
        e.end_if(&[]);
    });
    let out = run(
        &rt,
        &kernel,
        [(N as u32).div_ceil(T), 1, 1],
        &[ints(i, &x), HostBuffer::zeros(i, N)],
        &[(2, Scalar::Int(kk)), (3, Scalar::Int(N as i64))],
    );
    let got = read_ints(&out[1]);
    for j in 0..N {
        let mut acc = x[j];
        for k in 0..kk {
            acc = if k & 1 == 0 {
                if x[j] > k {
                    wrap(i, acc + x[j])
                } else {
                    wrap(i, acc - 1)
                }
            } else {
                let mut a = wrap(i, acc * 3);
                for jj in 0..2 {
                    a = wrap(i, a + jj);
                }
                a
            };
        }
        assert_eq!(got[j], acc, "element {j}, x = {}", x[j]);
    }
}

fn rand_val(rng: &mut StdRng, d: DType) -> u64 {
    match d {
        DType::I1 => rng.gen_range(0..2),
        DType::F32 => rand_float(rng, -3.0..3.0).to_bits() as u64,
        DType::F16 | DType::BF16 => float_bits(d, rand_float(rng, -2.0..2.0)),
        d => rand_int(rng, d) as u64,
    }
}

fn random_buffer(rng: &mut StdRng, d: DType, n: usize) -> HostBuffer {
    let b = HostBuffer::zeros(d, n);
    for j in 0..n {
        b.store_bits(j, rand_val(rng, d));
    }
    b
}

/// Loads `x[idx]` where `mask` holds, else zero (an `if` yielding the value), so that code after
/// it can run in every thread of the program.
fn load_or_zero(e: &mut SpirvEmitter, buffer: u32, d: DType, idx: SpirvValue, mask: SpirvValue) -> SpirvValue {
    e.begin_if(mask, &[d]);
    let v = e.load_global(buffer, d, idx, DType::I32);
    e.begin_else(&[v]);
    let z = if d.is_float() {
        e.constant(d, Scalar::Float(0.0))
    } else if d == DType::I1 {
        e.constant(d, Scalar::Bool(false))
    } else {
        c(e, d, 0)
    };
    e.end_if(&[z])[0]
}

/// Every dtype through shared memory: write at `tid`, barrier, read at `T - 1 - tid`.
#[test]
fn shared_memory_round_trip_every_dtype() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(14);
    let t = 32u32;
    let dtypes = [DType::F32, DType::I1, DType::BF16, DType::F16, DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::I64];
    let mut params: Vec<(String, ParamKind)> = Vec::new();
    for d in dtypes {
        params.push((format!("x_{d}"), input(d)));
    }
    for d in dtypes {
        params.push((format!("rev_{d}"), output(d)));
    }
    params.push(("n".into(), scalar(DType::I32)));
    let named: Vec<(&str, ParamKind)> = params.iter().map(|(a, b)| (a.as_str(), b.clone())).collect();
    let nd = dtypes.len() as u32;
    let kernel = build("shared_all", &target, t, &named, |e| {
        let (idx, mask) = global_index(e, t, 2 * nd);
        let tid = e.thread_index();
        let last = c(e, DType::I32, t as i64 - 1);
        let partner = e.binary(BinaryOp::Sub, DType::I32, last, tid);
        let mut read = Vec::new();
        for (j, &d) in dtypes.iter().enumerate() {
            e.reserve_shared(d, t / 2);
            e.reserve_shared(d, t);
            let v = load_or_zero(e, j as u32, d, idx, mask);
            e.store_shared(d, tid, v);
        }
        e.barrier();
        for &d in &dtypes {
            read.push(e.load_shared(d, partner));
        }
        e.begin_if(mask, &[]);
        for (j, &d) in dtypes.iter().enumerate() {
            e.store_global(nd + j as u32, d, idx, DType::I32, read[j]);
        }
        e.end_if(&[]);
    });
    let want_shared: u32 = dtypes.iter().map(|d| t * if *d == DType::I1 { 4 } else { d.size_bytes() as u32 }).sum();
    assert_eq!(kernel.requirements.shared_bytes, want_shared);
    let mut bufs: Vec<HostBuffer> = dtypes.iter().map(|&d| random_buffer(&mut rng, d, N)).collect();
    let inputs = bufs.clone();
    for &d in &dtypes {
        let b = HostBuffer::zeros(d, N);
        b.fill_bits(0x5A5A_5A5A_5A5A_5A5A);
        bufs.push(b);
    }
    let out = run(&rt, &kernel, [(N as u32).div_ceil(t), 1, 1], &bufs, &[(2 * nd, Scalar::Int(N as i64))]);
    for (j, &d) in dtypes.iter().enumerate() {
        for idx in 0..N {
            let (pid, tid) = (idx / t as usize, idx % t as usize);
            let p = pid * t as usize + (t as usize - 1 - tid);
            let want = if p < N { inputs[j].load_bits(p) } else { 0 };
            assert_eq!(out[nd as usize + j].load_bits(idx), want, "{d} element {idx}");
        }
    }
}

/// A reduction by one thread over shared memory (a loop inside an if), then values rotated
/// through shared memory three times with barriers inside a loop.
#[test]
fn shared_memory_reduction_and_barriers_in_loops() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(15);
    let (t, i) = (64u32, DType::I32);
    let params = [("x", input(i)), ("sums", output(i)), ("rot", output(i)), ("n", scalar(i))];
    let kernel = build("shared_reduce", &target, t, &params, |e| {
        let (idx, mask) = global_index(e, t, 3);
        let tid = e.thread_index();
        e.reserve_shared(i, t);
        let v = load_or_zero(e, 0, i, idx, mask);
        e.store_shared(i, tid, v);
        e.barrier();
        let zero = c(e, i, 0);
        let one = c(e, i, 1);
        let is0 = e.cmp(CmpPred::Eq, i, tid, zero);
        e.begin_if(is0, &[]);
        let tt = c(e, i, t as i64);
        let (j, acc) = e.begin_loop(i, zero, tt, one, &[(i, zero)]);
        let s = e.load_shared(i, j);
        let a = e.binary(BinaryOp::Add, i, acc[0], s);
        let total = e.end_loop(&[a]);
        let pid = e.program_id(0);
        e.store_global(1, i, pid, i, total[0]);
        e.end_if(&[]);
        let three = c(e, i, 3);
        let (_, w) = e.begin_loop(i, zero, three, one, &[(i, v)]);
        e.barrier();
        e.store_shared(i, tid, w[0]);
        e.barrier();
        let nb = e.binary(BinaryOp::Add, i, tid, one);
        let tt = c(e, i, t as i64);
        let nb = e.binary(BinaryOp::Rem, i, nb, tt);
        let w2 = e.load_shared(i, nb);
        let rotated = e.end_loop(&[w2]);
        e.begin_if(mask, &[]);
        e.store_global(2, i, idx, i, rotated[0]);
        e.end_if(&[]);
    });
    let x: Vec<i64> = (0..N).map(|_| rand_int(&mut rng, i)).collect();
    let programs = (N as u32).div_ceil(t) as usize;
    let out = run(
        &rt,
        &kernel,
        [programs as u32, 1, 1],
        &[ints(i, &x), HostBuffer::zeros(i, programs), HostBuffer::zeros(i, N)],
        &[(3, Scalar::Int(N as i64))],
    );
    let (sums, rot) = (read_ints(&out[1]), read_ints(&out[2]));
    let t = t as usize;
    let at = |p: usize| if p < N { x[p] } else { 0 };
    for p in 0..programs {
        let want = (0..t).fold(0i64, |a, j| wrap(i, a + at(p * t + j)));
        assert_eq!(sums[p], want, "program {p}");
    }
    for idx in 0..N {
        let (p, tid) = (idx / t, idx % t);
        assert_eq!(rot[idx], at(p * t + (tid + 3) % t), "element {idx}");
    }
}

/// `shuffle_xor` for every dtype and a butterfly sum, at the device's subgroup size.
#[test]
fn shuffles_at_the_device_subgroup_size() {
    let rt = runtime();
    let target = rt.target();
    let sg = target.subgroup_size;
    assert!(sg >= 2 && sg.is_power_of_two());
    let t = 4 * sg;
    let mut rng = StdRng::seed_from_u64(16);
    let masks = [1, sg - 1, sg / 2];
    for d in [DType::I32, DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I16, DType::I64, DType::I1, DType::U32] {
        let params = [("x", input(d)), ("o0", output(d)), ("o1", output(d)), ("o2", output(d)), ("n", scalar(DType::I32))];
        let kernel = build(&format!("shuffle_{d}"), &target, t, &params, |e| {
            let (idx, mask) = global_index(e, t, 4);
            let v = load_or_zero(e, 0, d, idx, mask);
            let r: Vec<_> = masks.iter().map(|&m| e.shuffle_xor(d, v, m)).collect();
            e.begin_if(mask, &[]);
            for (j, rv) in r.iter().enumerate() {
                e.store_global(1 + j as u32, d, idx, DType::I32, *rv);
            }
            e.end_if(&[]);
        });
        assert!(kernel.requirements.subgroup_shuffle);
        assert_eq!(kernel.requirements.subgroup_size, sg);
        let x = random_buffer(&mut rng, d, N);
        let bufs = [x.clone(), HostBuffer::zeros(d, N), HostBuffer::zeros(d, N), HostBuffer::zeros(d, N)];
        let out = run(&rt, &kernel, [(N as u32).div_ceil(t), 1, 1], &bufs, &[(4, Scalar::Int(N as i64))]);
        for (j, &m) in masks.iter().enumerate() {
            for idx in 0..N {
                let p = idx ^ m as usize;
                let want = if p < N { x.load_bits(p) } else { 0 };
                assert_eq!(out[1 + j].load_bits(idx), want, "{d} shuffle_xor {m} at {idx}");
            }
        }
    }
    // Butterfly: every lane ends with its subgroup's sum.
    let i = DType::I32;
    let kernel = build("butterfly", &target, t, &[("x", input(i)), ("out", output(i)), ("n", scalar(i))], |e| {
        let (idx, mask) = global_index(e, t, 2);
        let mut v = load_or_zero(e, 0, i, idx, mask);
        let mut m = 1;
        while m < sg {
            let o = e.shuffle_xor(i, v, m);
            v = e.binary(BinaryOp::Add, i, v, o);
            m *= 2;
        }
        e.begin_if(mask, &[]);
        e.store_global(1, i, idx, i, v);
        e.end_if(&[]);
    });
    let x: Vec<i64> = (0..N).map(|_| rand_int(&mut rng, i)).collect();
    let out = run(&rt, &kernel, [(N as u32).div_ceil(t), 1, 1], &[ints(i, &x), HostBuffer::zeros(i, N)], &[(2, Scalar::Int(N as i64))]);
    let got = read_ints(&out[1]);
    for idx in 0..N {
        let base = idx / sg as usize * sg as usize;
        let want = (base..base + sg as usize).fold(0i64, |a, p| wrap(i, a + if p < N { x[p] } else { 0 }));
        assert_eq!(got[idx], want, "lane {idx}");
    }
}

/// Checks an atomic add's old values: sorted per slot, they step by exactly the added values.
fn check_add_olds(slot_of: impl Fn(usize) -> usize, x: &[i64], olds: &[i64], init: &[i64], fin: &[i64], what: &str) {
    let mut per: HashMap<usize, (Vec<i64>, Vec<i64>)> = HashMap::new();
    for j in 0..x.len() {
        let e = per.entry(slot_of(j)).or_default();
        e.0.push(olds[j]);
        e.1.push(x[j]);
    }
    for (s, (mut o, mut xs)) in per {
        o.sort();
        assert_eq!(o[0], init[s], "{what}: slot {s} first old value");
        let mut steps: Vec<i64> = o.windows(2).map(|w| w[1] - w[0]).collect();
        steps.push(fin[s] - o[o.len() - 1]);
        steps.sort();
        xs.sort();
        assert_eq!(steps, xs, "{what}: slot {s} old values do not step by the added values");
    }
}

fn check_xchg(slot_of: impl Fn(usize) -> usize, x: &[u64], olds: &[u64], init: &[u64], fin: &[u64], what: &str) {
    let mut have: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut want: HashMap<usize, Vec<u64>> = HashMap::new();
    for s in 0..init.len() {
        have.entry(s).or_default().push(fin[s]);
        want.entry(s).or_default().push(init[s]);
    }
    for j in 0..x.len() {
        have.entry(slot_of(j)).or_default().push(olds[j]);
        want.entry(slot_of(j)).or_default().push(x[j]);
    }
    for (s, mut h) in have {
        let mut w = want.remove(&s).unwrap();
        h.sort();
        w.sort();
        assert_eq!(h, w, "{what}: slot {s}: old values and the final value are not a permutation of the initial and the written ones");
    }
}

const SLOTS: usize = 7;

/// The atomics kernel: add, max, min, xchg into 7 slots (`idx % 7`), cas on `cas[idx]`.
fn atomics_kernel(target: &Target, d: DType, index: DType) -> SpirvKernel {
    let params = [
        ("x", input(d)),
        ("y", input(d)),
        ("sum", inout(d)),
        ("mx", inout(d)),
        ("mn", inout(d)),
        ("xchg", inout(d)),
        ("cas", inout(d)),
        ("old_sum", output(d)),
        ("old_x", output(d)),
        ("old_cas", output(d)),
        ("n", scalar(DType::I32)),
    ];
    build(&format!("atomics_{d}"), target, T, &params, |e| {
        let (idx, mask) = global_index(e, T, 10);
        e.begin_if(mask, &[]);
        let i = DType::I32;
        let seven = c(e, i, SLOTS as i64);
        let slot = e.binary(BinaryOp::Rem, i, idx, seven);
        let (slot, at) = (e.cast(i, index, slot), e.cast(i, index, idx));
        let xv = e.load_global(0, d, idx, i);
        let yv = e.load_global(1, d, idx, i);
        let old = e.atomic_global(Some(AtomicOp::Add), 2, d, slot, index, None, xv);
        e.store_global(7, d, idx, i, old);
        e.atomic_global(Some(AtomicOp::Max), 3, d, slot, index, None, yv);
        e.atomic_global(Some(AtomicOp::Min), 4, d, slot, index, None, yv);
        let ox = e.atomic_global(Some(AtomicOp::Xchg), 5, d, slot, index, None, yv);
        e.store_global(8, d, idx, i, ox);
        // cas: even elements expect their current value (idx), odd ones a wrong value.
        let one = c(e, i, 1);
        let low = e.binary(BinaryOp::And, i, idx, one);
        let k1000 = c(e, i, 1000);
        let off = e.binary(BinaryOp::Mul, i, low, k1000);
        let expect_i = e.binary(BinaryOp::Add, i, idx, off);
        let k5000 = c(e, i, 5000);
        let new_i = e.binary(BinaryOp::Add, i, idx, k5000);
        let (expect, new) = (e.cast(i, d, expect_i), e.cast(i, d, new_i));
        let oc = e.atomic_global(None, 6, d, at, index, Some(expect), new);
        e.store_global(9, d, idx, i, oc);
        e.begin_else(&[]);
        e.end_if(&[]);
    })
}

#[test]
fn integer_atomics() {
    let rt = runtime();
    let target = rt.target();
    let mut rng = StdRng::seed_from_u64(17);
    for (d, index) in [(DType::I32, DType::I32), (DType::U32, DType::U32), (DType::I64, DType::I64)] {
        let kernel = atomics_kernel(&target, d, index);
        assert_eq!(kernel.requirements.int64_atomics, d == DType::I64);
        let x: Vec<i64> = (0..N).map(|_| rng.gen_range(1..1000)).collect();
        let y: Vec<i64> = (0..N).map(|_| rand_int(&mut rng, d)).collect();
        let init: Vec<Vec<i64>> = (0..4).map(|_| (0..SLOTS).map(|_| rand_int(&mut rng, d) / 4).collect()).collect();
        let cas: Vec<i64> = (0..N as i64).collect();
        let bufs = [
            ints(d, &x),
            ints(d, &y),
            ints(d, &init[0]),
            ints(d, &init[1]),
            ints(d, &init[2]),
            ints(d, &init[3]),
            ints(d, &cas),
            HostBuffer::zeros(d, N),
            HostBuffer::zeros(d, N),
            HostBuffer::zeros(d, N),
        ];
        let out = run(&rt, &kernel, [(N as u32).div_ceil(T), 1, 1], &bufs, &[(10, Scalar::Int(N as i64))]);
        let r: Vec<Vec<i64>> = out.iter().map(read_ints).collect();
        let slot_of = |j: usize| j % SLOTS;
        for s in 0..SLOTS {
            let xs: Vec<i64> = (0..N).filter(|&j| slot_of(j) == s).map(|j| x[j]).collect();
            let ys: Vec<i64> = (0..N).filter(|&j| slot_of(j) == s).map(|j| y[j]).collect();
            assert_eq!(r[2][s], wrap(d, init[0][s] + xs.iter().sum::<i64>()), "{d} atomic add slot {s}");
            assert_eq!(r[3][s], ys.iter().copied().fold(init[1][s], i64::max), "{d} atomic max slot {s}");
            assert_eq!(r[4][s], ys.iter().copied().fold(init[2][s], i64::min), "{d} atomic min slot {s}");
        }
        check_add_olds(slot_of, &x, &r[7], &init[0], &r[2], &format!("{d} atomic add"));
        let u = |v: &[i64]| v.iter().map(|&a| a as u64).collect::<Vec<_>>();
        check_xchg(slot_of, &u(&y), &u(&r[8]), &u(&init[3]), &u(&r[5]), &format!("{d} atomic xchg"));
        for j in 0..N {
            assert_eq!(r[9][j], j as i64, "{d} cas old value at {j}");
            let want = if j % 2 == 0 { j as i64 + 5000 } else { j as i64 };
            assert_eq!(r[6][j], want, "{d} cas result at {j}");
        }
    }
}

/// f32 atomics, with the native float add where the device has it and with compare-and-swap
/// loops everywhere (a target without float atomics).
#[test]
fn float_atomics_native_and_emulated() {
    let rt = runtime();
    let mut rng = StdRng::seed_from_u64(18);
    let d = DType::F32;
    let native = rt.target();
    let emulated = Target { atomic_float_add: false, ..rt.target() };
    for target in [native, emulated] {
        let kernel = atomics_kernel(&target, d, DType::I32);
        assert_eq!(kernel.requirements.atomic_float_add, target.atomic_float_add);
        // Small integers add exactly in any order.
        let x: Vec<f32> = (0..N).map(|_| rng.gen_range(1..100) as f32).collect();
        let y: Vec<f32> = (0..N).map(|_| rand_float(&mut rng, -3.0..3.0)).collect();
        let init: Vec<Vec<f32>> = (0..4).map(|_| (0..SLOTS).map(|_| rng.gen_range(-50..50) as f32).collect()).collect();
        let cas: Vec<f32> = (0..N).map(|j| j as f32).collect();
        let bufs = [
            floats(d, &x),
            floats(d, &y),
            floats(d, &init[0]),
            floats(d, &init[1]),
            floats(d, &init[2]),
            floats(d, &init[3]),
            floats(d, &cas),
            HostBuffer::zeros(d, N),
            HostBuffer::zeros(d, N),
            HostBuffer::zeros(d, N),
        ];
        let out = run(&rt, &kernel, [(N as u32).div_ceil(T), 1, 1], &bufs, &[(10, Scalar::Int(N as i64))]);
        let r: Vec<Vec<f32>> = out.iter().map(read_floats).collect();
        let slot_of = |j: usize| j % SLOTS;
        let what = if target.atomic_float_add { "native" } else { "emulated" };
        for s in 0..SLOTS {
            let xs: Vec<f32> = (0..N).filter(|&j| slot_of(j) == s).map(|j| x[j]).collect();
            let ys: Vec<f32> = (0..N).filter(|&j| slot_of(j) == s).map(|j| y[j]).collect();
            assert_eq!(r[2][s], init[0][s] + xs.iter().sum::<f32>(), "{what} f32 atomic add slot {s}");
            assert_eq!(r[3][s], ys.iter().copied().fold(init[1][s], f32::max), "{what} f32 atomic max slot {s}");
            assert_eq!(r[4][s], ys.iter().copied().fold(init[2][s], f32::min), "{what} f32 atomic min slot {s}");
        }
        let as_i = |v: &[f32]| v.iter().map(|&a| a as i64).collect::<Vec<_>>();
        check_add_olds(slot_of, &as_i(&x), &as_i(&r[7]), &as_i(&init[0]), &as_i(&r[2]), &format!("{what} f32 atomic add"));
        let bits = |v: &[f32]| v.iter().map(|a| a.to_bits() as u64).collect::<Vec<_>>();
        check_xchg(slot_of, &bits(&y), &bits(&r[8]), &bits(&init[3]), &bits(&r[5]), &format!("{what} f32 atomic xchg"));
        for j in 0..N {
            assert_eq!(r[9][j], j as f32, "{what} f32 cas old value at {j}");
            let want = if j % 2 == 0 { j as f32 + 5000.0 } else { j as f32 };
            assert_eq!(r[6][j], want, "{what} f32 cas result at {j}");
        }
    }
}

/// Scalars of every dtype through the push-constant block (an i64 after an i1 needs padding).
#[test]
fn push_constants_of_every_dtype() {
    let rt = runtime();
    let target = rt.target();
    let dtypes = [DType::I1, DType::I64, DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::F16, DType::BF16, DType::F32];
    let mut params: Vec<(String, ParamKind)> = dtypes.iter().map(|d| (format!("s_{d}"), scalar(*d))).collect();
    params.extend(dtypes.iter().map(|d| (format!("o_{d}"), output(*d))));
    let named: Vec<(&str, ParamKind)> = params.iter().map(|(a, b)| (a.as_str(), b.clone())).collect();
    let nd = dtypes.len() as u32;
    let kernel = build("scalars", &target, 1, &named, |e| {
        let zero = c(e, DType::I32, 0);
        for (j, &d) in dtypes.iter().enumerate() {
            let v = e.scalar_param(j as u32, d);
            e.store_global(nd + j as u32, d, zero, DType::I32, v);
        }
    });
    let offsets: Vec<u32> = kernel.push_constants.iter().map(|p| p.offset).collect();
    assert_eq!(offsets, [0, 8, 16, 20, 24, 28, 32, 36, 40, 44]);
    assert_eq!(kernel.push_constant_size, 48);
    let sets: [Vec<Scalar>; 2] = [
        vec![
            Scalar::Bool(true),
            Scalar::Int(-9_000_000_000_000_000_000),
            Scalar::Int(-100),
            Scalar::Int(200),
            Scalar::Int(-30000),
            Scalar::Int(-2_000_000_000),
            Scalar::Int(4_000_000_000),
            Scalar::Float(1.5),
            Scalar::Float(-3.140625),
            Scalar::Float(0.1),
        ],
        vec![
            Scalar::Bool(false),
            Scalar::Int(i64::MAX),
            Scalar::Int(127),
            Scalar::Int(0),
            Scalar::Int(-1),
            Scalar::Int(i32::MIN as i64),
            Scalar::Int(0),
            Scalar::Float(-65504.0),
            Scalar::Float(3.0e38),
            Scalar::Float(f64::NEG_INFINITY),
        ],
    ];
    for values in sets {
        let bufs: Vec<HostBuffer> = dtypes.iter().map(|&d| HostBuffer::zeros(d, 1)).collect();
        let sc: Vec<(u32, Scalar)> = values.iter().enumerate().map(|(j, &v)| (j as u32, v)).collect();
        let out = run(&rt, &kernel, [1, 1, 1], &bufs, &sc);
        for (j, &d) in dtypes.iter().enumerate() {
            let want = HostBuffer::from_f64(d, &[values[j].as_f64()]);
            let want = if d == DType::I64 { values[j].as_f64() as i64 as u64 } else { want.load_bits(0) };
            let want = match (d, values[j]) {
                (DType::I64, Scalar::Int(v)) => v as u64,
                (DType::F16 | DType::BF16, Scalar::Float(v)) => float_bits(d, v as f32),
                _ => want,
            };
            assert_eq!(out[j].load_bits(0), want, "scalar {d} = {}", values[j]);
        }
    }
}

/// Program ids and grid extents along all three axes.
#[test]
fn program_ids_and_grid_extents() {
    let rt = runtime();
    let target = rt.target();
    let i = DType::I32;
    let grid = [3u32, 4, 5];
    let t = 2u32;
    let kernel = build("ids", &target, t, &[("out", output(i))], |e| {
        let (x, y, z) = (e.program_id(0), e.program_id(1), e.program_id(2));
        let (nx, ny, nz) = (e.num_programs(0), e.num_programs(1), e.num_programs(2));
        let tid = e.thread_index();
        let mut v = c(e, i, 0);
        let mut lin = c(e, i, 0);
        for (val, w) in [(x, 1), (y, 10), (z, 100), (nx, 1000), (ny, 10_000), (nz, 100_000), (tid, 1_000_000)] {
            let k = c(e, i, w);
            let p = e.binary(BinaryOp::Mul, i, val, k);
            v = e.binary(BinaryOp::Add, i, v, p);
        }
        // ((z * ny + y) * nx + x) * t + tid
        for (n, val) in [(c(e, i, 1), z), (ny, y), (nx, x), (c(e, i, t as i64), tid)] {
            lin = e.binary(BinaryOp::Mul, i, lin, n);
            lin = e.binary(BinaryOp::Add, i, lin, val);
        }
        e.store_global(0, i, lin, i, v);
    });
    let total = (grid.iter().product::<u32>() * t) as usize;
    let out = run(&rt, &kernel, grid, &[HostBuffer::zeros(i, total)], &[]);
    let got = read_ints(&out[0]);
    for z in 0..5i64 {
        for y in 0..4i64 {
            for x in 0..3i64 {
                for tid in 0..2i64 {
                    let lin = (((z * 4 + y) * 3 + x) * 2 + tid) as usize;
                    let want = x + 10 * y + 100 * z + 3000 + 40_000 + 500_000 + 1_000_000 * tid;
                    assert_eq!(got[lin], want, "program ({x}, {y}, {z}) thread {tid}");
                }
            }
        }
    }
}
