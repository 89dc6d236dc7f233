//! Semantics of the interpreter, op by op, against plain Rust on random inputs.

use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilekit_core::interp::{run, run_with, Arg, InterpError, InterpOptions};
use tilekit_core::{Access, Builder, DType, HostBuffer, Scalar};

fn rng() -> StdRng {
    StdRng::seed_from_u64(0x7117)
}

fn rand_f32(r: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| r.gen_range(-3.0f32..3.0)).collect()
}

#[test]
fn vector_add_with_masked_tail() {
    const BLOCK: usize = 16;
    let k = Builder::new("add");
    let x = k.input("x", DType::F32);
    let y = k.input("y", DType::F32);
    let out = k.output("out", DType::F32);
    let n = k.scalar("n", DType::I32);
    let offs = k.program_id(0) * BLOCK as i32 + k.arange(0, BLOCK as i64);
    let mask = offs.lt(n);
    let s = k.load_masked(x, offs, mask, 0.0) + k.load_masked(y, offs, mask, 0.0);
    k.store_masked(out, offs, s, mask);
    let p = k.finish().unwrap();
    let mut r = rng();
    for len in [1usize, 15, 16, 17, 97] {
        let (a, b) = (rand_f32(&mut r, len), rand_f32(&mut r, len));
        let (xa, yb) = (HostBuffer::from_slice(&a), HostBuffer::from_slice(&b));
        // One element past the end is a sentinel the masked tail must not touch.
        let o = HostBuffer::from_slice(&vec![-7.5f32; len + 1]);
        let grid = len.div_ceil(BLOCK) as u32;
        run(&p, [grid, 1, 1], &[Arg::Buffer(&xa), Arg::Buffer(&yb), Arg::Buffer(&o), Arg::Scalar(Scalar::Int(len as i64))]).unwrap();
        let got = o.to_vec::<f32>().unwrap();
        for i in 0..len {
            assert_eq!(got[i], a[i] + b[i], "element {i} of {len}");
        }
        assert_eq!(got[len], -7.5, "the masked tail wrote past the end");
    }
}

#[test]
fn unmasked_out_of_bounds_names_op_program_and_index() {
    let k = Builder::new("oob");
    let x = k.input("x", DType::F32);
    let out = k.output("out", DType::F32);
    let offs = k.program_id(0) * 8 + k.arange(0, 8);
    let line = line!() + 1;
    let v = k.load(x, offs);
    k.store(out, offs, v);
    let p = k.finish().unwrap();
    let xb = HostBuffer::from_slice(&[1.0f32; 12]);
    let ob = HostBuffer::zeros(DType::F32, 16);
    let err = run(&p, [2, 1, 1], &[Arg::Buffer(&xb), Arg::Buffer(&ob)]).unwrap_err();
    match &err {
        InterpError::OutOfBounds { op, loc, pid, offset, buffer, len, lane } => {
            assert_eq!(op, "load");
            assert!(loc.file.ends_with("interp.rs"), "{loc}");
            assert_eq!(loc.line, line);
            assert_eq!(*pid, [1, 0, 0]);
            assert_eq!(*offset, 12);
            assert_eq!(*lane, 4);
            assert_eq!(buffer, "x");
            assert_eq!(*len, 12);
        }
        e => panic!("wrong error {e}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("`load`") && msg.contains("program [1, 0, 0]") && msg.contains("offset 12"), "{msg}");
}

#[test]
fn masked_lanes_read_other_and_never_touch_memory() {
    let k = Builder::new("m");
    let x = k.input("x", DType::I32);
    let out = k.output("out", DType::I32);
    let i = k.arange(0, 8);
    // Offsets far out of bounds on masked-off lanes must not be an error.
    let offs = k.select(i.lt(3), i, 1_000_000);
    let v = k.load_masked(x, offs, i.lt(3), -9);
    k.store(out, i, v);
    let p = k.finish().unwrap();
    let xb = HostBuffer::from_slice(&[10i32, 11, 12]);
    let ob = HostBuffer::zeros(DType::I32, 8);
    run(&p, [1, 1, 1], &[Arg::Buffer(&xb), Arg::Buffer(&ob)]).unwrap();
    assert_eq!(ob.to_vec::<i32>().unwrap(), vec![10, 11, 12, -9, -9, -9, -9, -9]);
}

/// f16 and bf16 arithmetic rounds once per operation to nearest even, as the hardware does.
#[test]
fn half_precision_is_bit_exact() {
    for dtype in [DType::F16, DType::BF16] {
        let k = Builder::new("h");
        let a = k.input("a", dtype);
        let b = k.input("b", dtype);
        let out = k.output("out", dtype);
        let i = k.arange(0, 256);
        let (x, y) = (k.load(a, i), k.load(b, i));
        let r = (x * y + x) / y - x.sqrt();
        k.store(out, i * 1, r);
        let p = k.finish().unwrap();
        let mut g = rng();
        let av: Vec<f64> = (0..256).map(|_| g.gen_range(0.1..8.0)).collect();
        let bv: Vec<f64> = (0..256).map(|_| g.gen_range(0.1..8.0)).collect();
        let (ab, bb) = (HostBuffer::from_f64(dtype, &av), HostBuffer::from_f64(dtype, &bv));
        let ob = HostBuffer::zeros(dtype, 256);
        run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&bb), Arg::Buffer(&ob)]).unwrap();
        let (xs, ys, got) = (ab.to_f64(), bb.to_f64(), ob.to_f64());
        for j in 0..256 {
            let want = if dtype == DType::F16 {
                let (x, y) = (f16::from_f64(xs[j]), f16::from_f64(ys[j]));
                let t = f16::from_f32(x.to_f32() * y.to_f32());
                let t = f16::from_f32(t.to_f32() + x.to_f32());
                let t = f16::from_f32(t.to_f32() / y.to_f32());
                let s = f16::from_f32(x.to_f32().sqrt());
                f16::from_f32(t.to_f32() - s.to_f32()).to_f64()
            } else {
                let (x, y) = (bf16::from_f64(xs[j]), bf16::from_f64(ys[j]));
                let t = bf16::from_f32(x.to_f32() * y.to_f32());
                let t = bf16::from_f32(t.to_f32() + x.to_f32());
                let t = bf16::from_f32(t.to_f32() / y.to_f32());
                let s = bf16::from_f32(x.to_f32().sqrt());
                bf16::from_f32(t.to_f32() - s.to_f32()).to_f64()
            };
            assert_eq!(got[j].to_bits(), want.to_bits(), "{dtype} element {j}");
        }
    }
}

#[test]
fn casts_round_to_nearest_even_and_saturate() {
    let k = Builder::new("c");
    let a = k.input("a", DType::F32);
    let h = k.output("h", DType::F16);
    let bf = k.output("bf", DType::BF16);
    let i8o = k.output("i8", DType::I8);
    let u8o = k.output("u8", DType::U8);
    let i = k.arange(0, 8);
    let x = k.load(a, i);
    k.store(h, i, x.cast(DType::F16));
    k.store(bf, i, x.cast(DType::BF16));
    k.store(i8o, i, x.cast(DType::I8));
    k.store(u8o, i, x.cast(DType::U8));
    let p = k.finish().unwrap();
    // 1 + 2^-11 is a tie between two f16 values: it rounds to even (1.0); 1 + 3*2^-11 rounds up.
    let vals = [1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), 300.7, -300.7, -1.9, f32::NAN, 1e30, 2.5];
    let ab = HostBuffer::from_slice(&vals);
    let outs =
        [HostBuffer::zeros(DType::F16, 8), HostBuffer::zeros(DType::BF16, 8), HostBuffer::zeros(DType::I8, 8), HostBuffer::zeros(DType::U8, 8)];
    run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&outs[0]), Arg::Buffer(&outs[1]), Arg::Buffer(&outs[2]), Arg::Buffer(&outs[3])]).unwrap();
    let hv = outs[0].to_vec::<f16>().unwrap();
    for (j, &v) in vals.iter().enumerate() {
        assert_eq!(hv[j].to_bits(), f16::from_f32(v).to_bits(), "f16 {j}");
        assert_eq!(outs[1].to_vec::<bf16>().unwrap()[j].to_bits(), bf16::from_f32(v).to_bits(), "bf16 {j}");
    }
    assert_eq!(hv[0], f16::ONE);
    assert_eq!(outs[2].to_vec::<i8>().unwrap(), vec![1, 1, 127, -128, -1, 0, 127, 2]);
    assert_eq!(outs[3].to_vec::<u8>().unwrap(), vec![1, 1, 255, 0, 0, 0, 255, 2]);
}

#[test]
fn integer_semantics_wrap_and_errors_are_reported() {
    let k = Builder::new("ints");
    let a = k.input("a", DType::I32);
    let b = k.input("b", DType::I32);
    let o = k.output("o", DType::I32);
    let i = k.arange(0, 4);
    let (x, y) = (k.load(a, i), k.load(b, i));
    k.store(o, i, x / y + (x % y) * 1000 + (x * 65536 * 65536));
    let p = k.finish().unwrap();
    let ab = HostBuffer::from_slice(&[7i32, -7, 7, -7]);
    let bb = HostBuffer::from_slice(&[2i32, 2, -2, -2]);
    let ob = HostBuffer::zeros(DType::I32, 4);
    run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&bb), Arg::Buffer(&ob)]).unwrap();
    // Truncating division, remainder with the dividend's sign, and x * 2^32 wrapping to 0.
    assert_eq!(ob.to_vec::<i32>().unwrap(), vec![3 + 1000, -3 - 1000, -3 + 1000, 3 - 1000]);
    let zero = HostBuffer::from_slice(&[1i32, 0, 1, 1]);
    let err = run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&zero), Arg::Buffer(&ob)]).unwrap_err();
    assert!(matches!(err, InterpError::DivisionByZero { lane: 1, .. }), "{err}");

    let k = Builder::new("shift");
    let a = k.input("a", DType::U32);
    let o = k.output("o", DType::U32);
    let i = k.arange(0, 4);
    let x = k.load(a, i);
    k.store(o, i, x >> (i * 11));
    let p = k.finish().unwrap();
    let ab = HostBuffer::from_slice(&[0xFFFF_FFFFu32; 4]);
    let ob = HostBuffer::zeros(DType::U32, 4);
    let err = run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&ob)]).unwrap_err();
    assert!(matches!(err, InterpError::ShiftOutOfRange { lane: 3, amount: 33, bits: 32, .. }), "{err}");
}

#[test]
fn reductions_scans_and_argmax_along_each_axis() {
    let mut g = rng();
    let (r, c) = (4usize, 8usize);
    let data: Vec<f32> = rand_f32(&mut g, r * c);
    let k = Builder::new("red");
    let a = k.input("a", DType::F32);
    let sums0 = k.output("s0", DType::F32);
    let max1 = k.output("m1", DType::F32);
    let arg1 = k.output("a1", DType::I32);
    let cum1 = k.output("c1", DType::F32);
    let rcum0 = k.output("rc0", DType::F32);
    let prod1 = k.output("p1", DType::F32);
    let rows = k.arange(0, r as i64);
    let cols = k.arange(0, c as i64);
    let offs = rows.expand_dims(1) * c as i32 + cols.expand_dims(0);
    let x = k.load(a, offs);
    k.store(sums0, cols, x.sum(0));
    k.store(max1, rows, x.max(1));
    k.store(arg1, rows, x.argmax(1));
    k.store(cum1, offs, x.cumsum(1));
    k.store(rcum0, offs, x.scan(0, true, |p, q| p + q));
    k.store(prod1, rows, x.reduce(1, |p, q| p * q));
    let p = k.finish().unwrap();
    let ab = HostBuffer::from_slice(&data);
    let outs: Vec<HostBuffer> = [(DType::F32, c), (DType::F32, r), (DType::I32, r), (DType::F32, r * c), (DType::F32, r * c), (DType::F32, r)]
        .iter()
        .map(|&(d, n)| HostBuffer::zeros(d, n))
        .collect();
    let mut args = vec![Arg::Buffer(&ab)];
    args.extend(outs.iter().map(Arg::Buffer));
    run(&p, [1, 1, 1], &args).unwrap();
    let at = |i: usize, j: usize| data[i * c + j] as f64;
    let close = |got: f64, want: f64| assert!((got - want).abs() <= 1e-5 * (1.0 + want.abs()), "{got} vs {want}");
    let s0 = outs[0].to_f64();
    for (j, &s) in s0.iter().enumerate().take(c) {
        close(s, (0..r).map(|i| at(i, j)).sum());
    }
    let (m1, a1, p1) = (outs[1].to_f64(), outs[2].to_vec::<i32>().unwrap(), outs[5].to_f64());
    for i in 0..r {
        let row: Vec<f64> = (0..c).map(|j| at(i, j)).collect();
        let m = row.iter().cloned().fold(f64::MIN, f64::max);
        assert_eq!(m1[i], m);
        assert_eq!(row[a1[i] as usize], m);
        close(p1[i], row.iter().product());
    }
    let (c1, rc0) = (outs[3].to_f64(), outs[4].to_f64());
    for i in 0..r {
        for j in 0..c {
            close(c1[i * c + j], (0..=j).map(|jj| at(i, jj)).sum());
            close(rc0[i * c + j], (i..r).map(|ii| at(ii, j)).sum());
        }
    }
}

#[test]
fn argmax_prefers_the_lowest_index_on_ties() {
    let k = Builder::new("tie");
    let a = k.input("a", DType::I32);
    let o = k.output("o", DType::I32);
    let x = k.load(a, k.arange(0, 8));
    let r = k.arange(0, 2);
    k.store(o, r, k.select(r.eq(0), x.argmax(0), x.argmin(0)));
    let p = k.finish().unwrap();
    let ab = HostBuffer::from_slice(&[3i32, 9, 1, 9, 1, 0, 0, 9]);
    let ob = HostBuffer::zeros(DType::I32, 2);
    run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&ob)]).unwrap();
    assert_eq!(ob.to_vec::<i32>().unwrap(), vec![1, 5]);
}

#[test]
fn dot_in_a_k_loop_matches_f64_matmul() {
    let (m, n, kk) = (32usize, 16usize, 48usize);
    let bk = 16usize;
    let k = Builder::new("mm");
    let a = k.input("a", DType::F16);
    let b = k.input("b", DType::F16);
    let c = k.output("c", DType::F32);
    let rm = k.arange(0, m as i64);
    let rn = k.arange(0, n as i64);
    let rk = k.arange(0, bk as i64);
    let acc0 = k.zeros(&[m, n], DType::F32);
    let [acc] = k.for_range(0, kk as i32, bk as i32, [acc0], |k0, [acc]| {
        let at = k.load(a, rm.expand_dims(1) * kk as i32 + (rk + k0).expand_dims(0));
        let bt = k.load(b, (rk + k0).expand_dims(1) * n as i32 + rn.expand_dims(0));
        [at.dot(bt, acc)]
    });
    k.store(c, rm.expand_dims(1) * n as i32 + rn.expand_dims(0), acc);
    let p = k.finish().unwrap();
    let mut g = rng();
    let av: Vec<f64> = (0..m * kk).map(|_| g.gen_range(-1.0..1.0)).collect();
    let bv: Vec<f64> = (0..kk * n).map(|_| g.gen_range(-1.0..1.0)).collect();
    let (ab, bb) = (HostBuffer::from_f64(DType::F16, &av), HostBuffer::from_f64(DType::F16, &bv));
    let cb = HostBuffer::zeros(DType::F32, m * n);
    run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&bb), Arg::Buffer(&cb)]).unwrap();
    let (a16, b16, got) = (ab.to_f64(), bb.to_f64(), cb.to_f64());
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..kk).map(|l| a16[i * kk + l] * b16[l * n + j]).sum();
            assert!((got[i * n + j] - want).abs() < 1e-5, "({i},{j}): {} vs {want}", got[i * n + j]);
        }
    }
}

#[test]
fn atomics_from_many_programs_count_exactly() {
    let bins = 16usize;
    let k = Builder::new("hist");
    let x = k.input("x", DType::I32);
    let h = k.buffer("h", DType::I32, Access::ReadWrite);
    let mx = k.buffer("mx", DType::F32, Access::ReadWrite);
    let offs = k.program_id(0) * 64 + k.arange(0, 64);
    let v = k.load(x, offs);
    k.atomic_add(h, v, 1, None);
    k.atomic_max(mx, k.zeros(&[64], DType::I32), v.cast(DType::F32), None);
    let p = k.finish().unwrap();
    let mut g = rng();
    let vals: Vec<i32> = (0..64 * 50).map(|_| g.gen_range(0..bins as i32)).collect();
    let xb = HostBuffer::from_slice(&vals);
    let hb = HostBuffer::zeros(DType::I32, bins);
    let mb = HostBuffer::from_slice(&[-1.0f32]);
    run(&p, [50, 1, 1], &[Arg::Buffer(&xb), Arg::Buffer(&hb), Arg::Buffer(&mb)]).unwrap();
    let mut want = vec![0i32; bins];
    vals.iter().for_each(|&v| want[v as usize] += 1);
    assert_eq!(hb.to_vec::<i32>().unwrap(), want);
    assert_eq!(mb.to_vec::<f32>().unwrap()[0], *vals.iter().max().unwrap() as f32);
}

#[test]
fn cas_returns_old_values() {
    let k = Builder::new("cas");
    let b = k.buffer("b", DType::I32, Access::ReadWrite);
    let o = k.output("o", DType::I32);
    let i = k.arange(0, 4);
    let old = k.atomic_cas(b, i, 5, 42, None);
    k.store(o, i, old);
    let p = k.finish().unwrap();
    let bb = HostBuffer::from_slice(&[5i32, 6, 5, 7]);
    let ob = HostBuffer::zeros(DType::I32, 4);
    run(&p, [1, 1, 1], &[Arg::Buffer(&bb), Arg::Buffer(&ob)]).unwrap();
    assert_eq!(bb.to_vec::<i32>().unwrap(), vec![42, 6, 42, 7]);
    assert_eq!(ob.to_vec::<i32>().unwrap(), vec![5, 6, 5, 7]);
}

#[test]
fn if_else_and_grid_axes() {
    let k = Builder::new("grid");
    let o = k.output("o", DType::I32);
    let (x, y, z) = (k.program_id(0), k.program_id(1), k.program_id(2));
    let (nx, ny) = (k.num_programs(0), k.num_programs(1));
    let lin = (z * ny + y) * nx + x;
    let [v] = k.if_else(y.eq(1), || [lin * 10], || [lin]);
    k.store(o, lin, v);
    let p = k.finish().unwrap();
    assert_eq!(p.grid_rank, 3);
    let ob = HostBuffer::zeros(DType::I32, 2 * 3 * 2);
    run(&p, [2, 3, 2], &[Arg::Buffer(&ob)]).unwrap();
    let got = ob.to_vec::<i32>().unwrap();
    for (i, g) in got.iter().enumerate() {
        let y = (i / 2) % 3;
        assert_eq!(*g, if y == 1 { i as i32 * 10 } else { i as i32 }, "{i}");
    }
}

#[test]
fn trans_broadcast_and_reshape_move_elements() {
    let k = Builder::new("shape");
    let a = k.input("a", DType::F32);
    let t = k.output("t", DType::F32);
    let r = k.output("r", DType::F32);
    let rows = k.arange(0, 4);
    let cols = k.arange(0, 8);
    let x = k.load(a, rows.expand_dims(1) * 8 + cols.expand_dims(0)); // [4, 8]
                                                                      // t = x^T stored row-major as [8, 4]
    k.store(t, cols.expand_dims(1) * 4 + rows.expand_dims(0), x.trans());
    // r = row sums broadcast back over the row, through a reshape to [32]
    let rs = x.sum(1).expand_dims(1).broadcast_to(&[4, 8]).reshape(&[32]);
    k.store(r, k.arange(0, 32), rs);
    let p = k.finish().unwrap();
    let data: Vec<f32> = (0..32).map(|i| i as f32 * 0.5 - 3.0).collect();
    let ab = HostBuffer::from_slice(&data);
    let (tb, rb) = (HostBuffer::zeros(DType::F32, 32), HostBuffer::zeros(DType::F32, 32));
    run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&tb), Arg::Buffer(&rb)]).unwrap();
    let (tv, rv) = (tb.to_vec::<f32>().unwrap(), rb.to_vec::<f32>().unwrap());
    for i in 0..4 {
        let s: f32 = (0..8).map(|j| data[i * 8 + j]).sum();
        for j in 0..8 {
            assert_eq!(tv[j * 4 + i], data[i * 8 + j]);
            assert_eq!(rv[i * 8 + j], s);
        }
    }
}

#[test]
fn launch_arguments_are_checked() {
    let k = Builder::new("args");
    let x = k.output("x", DType::F32);
    let n = k.scalar("n", DType::U8);
    k.store(x, k.arange(0, 2), n.cast(DType::F32));
    let p = k.finish().unwrap();
    let f = HostBuffer::zeros(DType::F32, 2);
    let i = HostBuffer::zeros(DType::I32, 2);
    let e = run(&p, [1, 1, 1], &[Arg::Buffer(&f)]).unwrap_err();
    assert!(matches!(e, InterpError::ArgCount { want: 2, got: 1, .. }), "{e}");
    let e = run(&p, [1, 1, 1], &[Arg::Buffer(&i), Arg::Scalar(Scalar::Int(1))]).unwrap_err();
    assert!(e.to_string().contains("buffer of f32"), "{e}");
    let e = run(&p, [1, 1, 1], &[Arg::Buffer(&f), Arg::Scalar(Scalar::Int(300))]).unwrap_err();
    assert!(e.to_string().contains("u8 scalar"), "{e}");
    run(&p, [1, 1, 1], &[Arg::Buffer(&f), Arg::Scalar(Scalar::Int(200))]).unwrap();
    assert_eq!(f.to_vec::<f32>().unwrap(), vec![200.0, 200.0]);
}

#[test]
fn zero_loop_step_is_an_error_not_a_hang() {
    let k = Builder::new("loop");
    let o = k.output("o", DType::I32);
    let s = k.scalar("step", DType::I32);
    let acc = k.zeros(&[2], DType::I32);
    let [acc] = k.for_range(0, 10, s, [acc], |i, [acc]| [acc + i]);
    k.store(o, k.arange(0, 2), acc);
    let p = k.finish().unwrap();
    let ob = HostBuffer::zeros(DType::I32, 2);
    let e = run(&p, [1, 1, 1], &[Arg::Buffer(&ob), Arg::Scalar(Scalar::Int(0))]).unwrap_err();
    assert!(matches!(e, InterpError::ZeroStep { .. }), "{e}");
    run(&p, [1, 1, 1], &[Arg::Buffer(&ob), Arg::Scalar(Scalar::Int(3))]).unwrap();
    assert_eq!(ob.to_vec::<i32>().unwrap(), vec![18, 18]);
    run(&p, [1, 1, 1], &[Arg::Buffer(&ob), Arg::Scalar(Scalar::Int(-1))]).unwrap();
    assert_eq!(ob.to_vec::<i32>().unwrap(), vec![0, 0]);
}

#[test]
fn math_functions_match_f64_within_f32_rounding() {
    let k = Builder::new("math");
    let a = k.input("a", DType::F32);
    let o = k.output("o", DType::F32);
    let i = k.arange(0, 64);
    let x = k.load(a, i);
    type Op = (&'static str, fn(f64) -> f64);
    let ops: Vec<Op> = vec![
        ("exp", f64::exp),
        ("exp2", f64::exp2),
        ("log", |v: f64| v.abs().ln()),
        ("log2", |v: f64| v.abs().log2()),
        ("sqrt", |v: f64| v.abs().sqrt()),
        ("rsqrt", |v: f64| 1.0 / v.abs().sqrt()),
        ("sin", f64::sin),
        ("cos", f64::cos),
        ("tanh", f64::tanh),
        ("erf", libm::erf),
        ("floor", f64::floor),
        ("ceil", f64::ceil),
    ];
    let results =
        [x.exp(), x.exp2(), x.abs().log(), x.abs().log2(), x.abs().sqrt(), x.abs().rsqrt(), x.sin(), x.cos(), x.tanh(), x.erf(), x.floor(), x.ceil()];
    for (j, r) in results.iter().enumerate() {
        k.store(o, i + (j * 64) as i32, *r);
    }
    let p = k.finish().unwrap();
    let mut g = rng();
    let data = rand_f32(&mut g, 64);
    let ab = HostBuffer::from_slice(&data);
    let ob = HostBuffer::zeros(DType::F32, 64 * ops.len());
    run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&ob)]).unwrap();
    let got = ob.to_f64();
    for (j, (name, f)) in ops.iter().enumerate() {
        for l in 0..64 {
            let want = f(data[l] as f64);
            let g = got[j * 64 + l];
            assert!((g - want).abs() <= 4e-7 * want.abs().max(1.0), "{name}({}) = {g}, want {want}", data[l]);
        }
    }
}

/// The flushing model (`InterpOptions::flush_subnormals`): arithmetic and comparisons read f32
/// and f16 subnormals as zeros of their sign and flush subnormal results; moves (`select`,
/// stores) and `neg` keep the bits. Off, every subnormal is kept.
#[test]
fn the_flushing_model_flushes_arithmetic_not_moves() {
    for dtype in [DType::F32, DType::F16] {
        let tiny = if dtype == DType::F16 { 2f64.powi(-24) } else { 2f64.powi(-149) };
        let k = Builder::new("ftz");
        let x = k.input("x", dtype);
        let out = k.output("out", dtype);
        let i = k.arange(0, 4);
        let v = k.load(x, i);
        let zero = k.full(&[4], 0.0, dtype);
        // [x < 0 ? 1 : x] moves x; x + 0 and x * 1 compute with it; -x only flips its sign.
        let moved = k.select(zero.lt(v), k.full(&[4], 1.0, dtype), v);
        let sum = v + 0.0;
        let product = (v * 2.0) * 0.5;
        let store = |base: i64, t| k.store(out, i + base, t);
        store(0, moved);
        store(4, sum);
        store(8, product);
        store(12, -v);
        let p = k.finish().unwrap();
        let xs = HostBuffer::from_f64(dtype, &[tiny, -tiny, 1.5, -0.0]);
        let run_once = |flush: bool| {
            let o = HostBuffer::zeros(dtype, 16);
            run_with(&p, [1, 1, 1], &[Arg::Buffer(&xs), Arg::Buffer(&o)], InterpOptions { flush_subnormals: flush, ..Default::default() }).unwrap();
            o.to_f64()
        };
        let kept = run_once(false);
        assert_eq!(&kept[0..4], &[1.0, -tiny, 1.0, -0.0], "{dtype}: 0 < tiny holds without flushing");
        assert_eq!(&kept[4..12], &[tiny, -tiny, 1.5, 0.0, tiny, -tiny, 1.5, -0.0], "{dtype}");
        let flushed = run_once(true);
        // 0 < tiny compares a zero: the select moves tiny itself, bits unchanged.
        assert_eq!(&flushed[0..4], &[tiny, -tiny, 1.0, -0.0], "{dtype}");
        let signs: Vec<bool> = flushed[4..12].iter().map(|x| x.is_sign_negative()).collect();
        assert_eq!(&flushed[4..12], &[0.0, 0.0, 1.5, 0.0, 0.0, 0.0, 1.5, 0.0], "{dtype}");
        assert_eq!(signs, [false, false, false, false, false, true, false, true], "{dtype}: -tiny * 2 * 0.5 is -0, -tiny + 0 is +0");
        assert_eq!(&flushed[12..16], &[-tiny, tiny, -1.5, 0.0], "{dtype}: neg keeps the bits");
    }
}

/// WGSL's models (`InterpOptions::nonfinite_as`, `InterpOptions::contract`): every non-finite
/// value is replaced where it is made (a load, an overflowing conversion, an operation), so what
/// depends on one changes with the substitute and nothing else does; a multiplication's result
/// added or subtracted is one fused multiply-add, rounded once.
#[test]
fn the_wgsl_models_substitute_non_finite_values_and_contract() {
    let k = Builder::new("wgsl");
    let x = k.input("x", DType::F32);
    let out = k.output("out", DType::F32);
    let q = k.output("q", DType::I32);
    let i = k.arange(0, 4);
    let v = k.load(x, i);
    // [x * x - 1, f32(f16(x)) as i32 (saturating), x + 1]
    let sq = v * v;
    k.store(out, i, sq - 1.0);
    k.store(q, i, v.cast(DType::F16).cast(DType::F32).cast(DType::I32));
    k.store(out, i + 4, v + 1.0);
    let p = k.finish().unwrap();
    let e = 1.0 + 2f64.powi(-12);
    let xs = HostBuffer::from_f64(DType::F32, &[e, 1e5, f64::INFINITY, 2.0]);
    let run_once = |options: InterpOptions| {
        let (o, qo) = (HostBuffer::zeros(DType::F32, 8), HostBuffer::zeros(DType::I32, 4));
        run_with(&p, [1, 1, 1], &[Arg::Buffer(&xs), Arg::Buffer(&o), Arg::Buffer(&qo)], options).unwrap();
        (o.to_f64(), qo.to_f64())
    };
    let (plain, plain_q) = run_once(InterpOptions::default());
    assert_eq!(plain[0], ((e * e) as f32 - 1.0) as f64, "rounded product, then the subtraction");
    assert_eq!(plain_q, [1.0, i32::MAX as f64, i32::MAX as f64, 2.0], "1e5 overflows f16 to inf, saturating");
    let (sub, sub_q) = run_once(InterpOptions { nonfinite_as: Some(-3.5), ..Default::default() });
    assert_eq!(sub_q, [1.0, -3.0, -3.0, 2.0], "the overflowed conversion and the infinite load are replaced");
    assert_eq!(&sub[4..8], &[plain[4], plain[5], -2.5, 3.0], "x + 1 of the replaced inf");
    assert_eq!(sub[0], plain[0], "finite values are untouched");
    let (fused, _) = run_once(InterpOptions { contract: true, ..Default::default() });
    assert_eq!(fused[0], e.mul_add(e, -1.0) as f32 as f64, "one rounding");
    assert_ne!(fused[0], plain[0], "the two models differ on this input");
    assert_eq!(&fused[4..8], &plain[4..8], "an addition of no product is unchanged");
}

/// `cmp_scalar`, with which backends fold the comparison of two constants, answers as the
/// interpreter's `cmp` does on the same values: NaN unordered (only `ne` holds), -0 equal to +0,
/// signed and unsigned integers by value.
#[test]
fn folded_comparisons_agree_with_the_interpreter() {
    use tilekit_core::interp::cmp_scalar;
    use tilekit_core::ir::CmpPred;
    let preds = [CmpPred::Eq, CmpPred::Ne, CmpPred::Lt, CmpPred::Le, CmpPred::Gt, CmpPred::Ge];
    let floats = [0.0, -0.0, 1.5, -2.25, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 65504.0];
    let ints = [0.0, 1.0, -1.0, 127.0, -128.0, 200.0, 4_000_000_000.0, -2_147_483_648.0];
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::I64] {
        let vals = if dtype.is_float() { &floats } else { &ints };
        let n = vals.len() * vals.len();
        let xs: Vec<f64> = vals.iter().flat_map(|&a| vals.iter().map(move |_| a)).collect();
        let ys: Vec<f64> = vals.iter().flat_map(|_| vals.iter().copied()).collect();
        let (xb, yb) = (HostBuffer::from_f64(dtype, &xs), HostBuffer::from_f64(dtype, &ys));
        for pred in preds {
            let k = Builder::new("cmp");
            let (x, y) = (k.input("x", dtype), k.input("y", dtype));
            let out = k.output("out", DType::I32);
            let i = k.arange(0, n as i64);
            let (a, b) = (k.load(x, i), k.load(y, i));
            let c = match pred {
                CmpPred::Eq => a.eq(b),
                CmpPred::Ne => a.ne(b),
                CmpPred::Lt => a.lt(b),
                CmpPred::Le => a.le(b),
                CmpPred::Gt => a.gt(b),
                CmpPred::Ge => a.ge(b),
            };
            k.store(out, i, c.cast(DType::I32));
            let p = k.finish().unwrap();
            let o = HostBuffer::zeros(DType::I32, n);
            run(&p, [1, 1, 1], &[Arg::Buffer(&xb), Arg::Buffer(&yb), Arg::Buffer(&o)]).unwrap();
            let (xv, yv) = (xb.to_f64(), yb.to_f64());
            for (j, got) in o.to_f64().into_iter().enumerate() {
                let s = |v: f64| if dtype.is_float() { Scalar::Float(v) } else { Scalar::Int(v as i64) };
                let folded = cmp_scalar(pred, dtype, s(xv[j]), s(yv[j]));
                assert_eq!(folded, got == 1.0, "{dtype} {pred:?}: {} against {}", xv[j], yv[j]);
            }
        }
    }
}

/// tf32's rounding: to nearest at the 10th fraction bit with ties away from zero, NaN and the
/// infinities kept, a carry past the largest f32 an infinity, subnormals below half a unit
/// to zero.
#[test]
fn tf32_rounds_to_nearest_ties_away() {
    use tilekit_core::ir::round_tf32;
    let e = |k: i32| 2f32.powi(k);
    for (x, want) in [
        (1.0 + e(-11), 1.0 + e(-10)),
        (-(1.0 + e(-11)), -(1.0 + e(-10))),
        (1.0 + e(-12), 1.0),
        (1.0 + e(-11) + e(-23), 1.0 + e(-10)),
        (1.0 + e(-10) + e(-11), 1.0 + 2.0 * e(-10)),
        (0.0, 0.0),
        (f32::INFINITY, f32::INFINITY),
        (f32::NEG_INFINITY, f32::NEG_INFINITY),
        (f32::MAX, f32::INFINITY),
        (f32::from_bits(1), 0.0),
    ] {
        assert_eq!(round_tf32(x).to_bits(), want.to_bits(), "{x:e}");
    }
    assert_eq!(round_tf32(-0.0).to_bits(), (-0.0f32).to_bits());
    assert!(round_tf32(f32::NAN).is_nan() && round_tf32(f32::from_bits(0x7f80_0001)).is_nan());
}

/// A tf32 `dot` rounds each operand before its products; an IEEE one multiplies the f32
/// values as they are.
#[test]
fn tf32_dot_rounds_its_operands() {
    use tilekit_core::ir::InputPrecision;
    let x = 1.0 + 2f32.powi(-11);
    for (precision, want) in [(InputPrecision::Ieee, x * x), (InputPrecision::Tf32, (1.0 + 2f32.powi(-10)).powi(2))] {
        let k = Builder::new("d");
        let a = k.input("a", DType::F32);
        let out = k.output("out", DType::F32);
        let offs = k.arange(0, 16).expand_dims(1) * 16 + k.arange(0, 16).expand_dims(0);
        let t = k.load(a, offs);
        // Row i of `a` is x at column i, zero elsewhere: each element of the product is one x * x.
        let r = t.dot_precision(t, k.zeros(&[16, 16], DType::F32), precision);
        k.store(out, offs, r);
        let p = k.finish().unwrap();
        let av: Vec<f64> = (0..256).map(|i| if i / 16 == i % 16 { x as f64 } else { 0.0 }).collect();
        let ab = HostBuffer::from_f64(DType::F32, &av);
        let ob = HostBuffer::zeros(DType::F32, 256);
        run(&p, [1, 1, 1], &[Arg::Buffer(&ab), Arg::Buffer(&ob)]).unwrap();
        assert_eq!(ob.to_f64()[17] as f32, want, "{precision:?}");
    }
}
