//! The builder's rounding, clamping, saturating conversions, ceiling division and (value,
//! index) reductions, each against an f64 or exact integer reference: ragged sizes (1, primes,
//! odd rows), random inputs with -0, NaN, infinities, halves and huge values, on the
//! interpreter, the emulator (three targets) and every Vulkan device through both runtimes.
//! Each program also round-trips through the text form, passes spirv-val, and (with the `ptx`
//! and `amdgcn` features) assembles with ptxas and links for gfx942. Exact everywhere: see
//! docs/semantics.md, "Rounding, clamping, ceiling division and conversions to integers".

#[path = "common/spirv_val.rs"]
mod spirv_val;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use spirv_val::spirv_val;
use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::Target;
use tilekit::kernels::{BufferSpec, Launch, LaunchArg, Plan, Role};
use tilekit::{cdiv, Builder, Config, DType, Device, HostBuffer, Program, Rounding, Scalar, Tile};

const BLOCK: usize = 128;
const SIZES: [usize; 4] = [1, 7, 61, 1031];

fn devices() -> Vec<Device> {
    let mut out = vec![
        Device::Interpreter,
        Device::Emulator(Target::vulkan_baseline()),
        Device::Emulator(Target::lavapipe()),
        Device::Emulator(Target::cuda_sm80()),
    ];
    if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED: Vulkan devices in tests/builder_ops.rs (TILEKIT_SKIP_GPU_TESTS=1)");
    } else {
        let gpus = Device::gpus();
        assert!(!gpus.is_empty(), "no Vulkan device found: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1");
        out.extend(gpus);
    }
    out
}

/// The text form round trip, and the modules every backend makes of `program`.
fn check_modules(program: &Program, num_warps: u32) {
    let text = tilekit::text::print(program);
    let back = tilekit::text::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(tilekit::text::print(&back), text, "the text form does not round-trip");
    let options = LowerOptions::for_config(&Config::new().with("num_warps", num_warps as i64));
    for target in [Target::lavapipe(), Target::vulkan_baseline()] {
        match tilekit_spirv::compile(program, &target, &options) {
            Ok(c) => spirv_val(&c.kernel.words, &format!("{}_{}", program.name, target.name)),
            // A dtype the target lacks (i64 on the baseline) is refused, not miscompiled.
            Err(e) if e.to_string().contains("not supported") => {}
            Err(e) => panic!("{}: {e}", program.name),
        }
    }
    #[cfg(feature = "ptx")]
    {
        use tilekit_ptx::Arch;
        let mut c = tilekit_ptx::compile(program, &Target::cuda_sm80(), &options, Arch::Sm80).unwrap_or_else(|e| panic!("{}: {e}", program.name));
        let r = c.kernel.assemble().unwrap_or_else(|e| panic!("{}: ptxas: {e}", program.name));
        assert!(!r.spills(), "{}: {r}", program.name);
    }
    #[cfg(feature = "amdgcn")]
    {
        use tilekit_amdgcn::Arch;
        tilekit_amdgcn::compile(program, &Arch::Gfx942.target(), &options, Arch::Gfx942).unwrap_or_else(|e| panic!("{}: gfx942: {e}", program.name));
    }
}

/// Runs `program` over `grid` on every device; `buffers` are the buffer parameters' initial
/// contents in order, `scalars` the scalar arguments by parameter index. `check` gets the
/// buffers after the run and says what is wrong, if anything.
fn run_everywhere(
    program: &Program,
    grid: [u32; 3],
    num_warps: u32,
    buffers: &[HostBuffer],
    scalars: &[(usize, Scalar)],
    check: impl Fn(&[HostBuffer]) -> Result<(), String>,
) {
    let mut args = Vec::new();
    let mut specs = Vec::new();
    let mut b = 0;
    for (p, param) in program.params.iter().enumerate() {
        match scalars.iter().find(|(i, _)| *i == p) {
            Some((_, s)) => args.push(LaunchArg::Scalar(*s)),
            None => {
                let buf = &buffers[b];
                specs.push(BufferSpec { name: param.name.clone(), dtype: buf.dtype(), len: buf.len(), role: Role::Input });
                args.push(LaunchArg::Buffer(b));
                b += 1;
            }
        }
    }
    let plan = Plan { buffers: specs, launches: vec![Launch { program: program.clone(), grid, args }] };
    let config = Config::new().with("num_warps", num_warps as i64);
    for device in devices() {
        let got: Vec<HostBuffer> = buffers.iter().map(|b| HostBuffer::from_bytes(b.dtype(), &b.to_bytes()).unwrap()).collect();
        if let Err(e) = device.run_plan(&plan, &got, &config) {
            if e.to_string().contains("does not support") {
                eprintln!("SKIPPED: {device} for `{}` ({e})", program.name);
                continue;
            }
            panic!("{device}: {e}\n{}", tilekit::text::print(program));
        }
        if let Err(why) = check(&got) {
            panic!("{device}, `{}`, grid {grid:?}: {why}", program.name);
        }
    }
}

/// A 1-D program over `n` elements, `BLOCK` per program with a masked tail: loads `ins`,
/// stores what `f` makes of them, one output each.
fn elementwise(name: &str, ins: &[DType], outs: &[DType], f: impl for<'b> Fn(&'b Builder, &[Tile<'b>]) -> Vec<Tile<'b>>) -> Program {
    let k = Builder::new(name);
    let inputs: Vec<_> = ins.iter().enumerate().map(|(i, &d)| k.input(format!("x{i}"), d)).collect();
    let outputs: Vec<_> = outs.iter().enumerate().map(|(i, &d)| k.output(format!("y{i}"), d)).collect();
    let n = k.scalar("n", DType::I32);
    let offs = k.program_id(0) * BLOCK as i32 + k.arange(0, BLOCK as i64);
    let mask = offs.lt(n);
    // Masked-off lanes compute on 1, a divisor that cannot fault.
    let xs: Vec<Tile<'_>> = inputs.iter().map(|&b| k.load_masked(b, offs, mask, 1)).collect();
    for (&b, y) in outputs.iter().zip(f(&k, &xs)) {
        k.store_masked(b, offs, y, mask);
    }
    k.finish().unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs an elementwise program over `n` elements of `inputs` and checks output `j` against
/// `want[j]`, element by element, with `same`.
fn check_elementwise(program: &Program, inputs: &[HostBuffer], outs: &[DType], want: &[Vec<f64>], same: impl Fn(f64, f64) -> bool) {
    let want: Vec<HostBuffer> = want.iter().zip(outs).map(|(w, &d)| HostBuffer::from_f64(d, w)).collect();
    check_elementwise_exact(program, inputs, outs, &want, |w, g, i| same(w.to_f64()[i], g.to_f64()[i]));
}

/// As [`check_elementwise`], with the expected outputs as buffers and `same(want, got, i)`.
fn check_elementwise_exact(
    program: &Program,
    inputs: &[HostBuffer],
    outs: &[DType],
    want: &[HostBuffer],
    same: impl Fn(&HostBuffer, &HostBuffer, usize) -> bool,
) {
    let n = inputs[0].len();
    let mut buffers: Vec<HostBuffer> = inputs.to_vec();
    buffers.extend(outs.iter().map(|&d| HostBuffer::zeros(d, n)));
    let scalar = inputs.len() + outs.len();
    check_modules(program, 2);
    run_everywhere(program, [cdiv(n, BLOCK) as u32, 1, 1], 2, &buffers, &[(scalar, Scalar::Int(n as i64))], |got| {
        for (j, w) in want.iter().enumerate() {
            let g = &got[inputs.len() + j];
            if let Some(i) = (0..n).find(|&i| !same(w, g, i)) {
                let x: Vec<f64> = inputs.iter().map(|b| b.to_f64()[i]).collect();
                return Err(format!("output {j} at {i} of {n}: inputs {x:?}, want {:e} got {:e}", w.to_f64()[i], g.to_f64()[i]));
            }
        }
        Ok(())
    });
}

/// Values a float op must get right: zeros of both signs, NaN, infinities, halves (ties),
/// integer bounds and huge values.
const FLOAT_SPECIALS: [f64; 34] = [
    0.0,
    -0.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.5,
    -0.5,
    1.5,
    -1.5,
    2.5,
    -2.5,
    0.49999997,
    -0.49999997,
    127.5,
    128.5,
    -128.5,
    -129.5,
    255.5,
    256.5,
    32767.5,
    -32768.5,
    65504.0,
    2147483520.0,
    2147483648.0,
    -2147483648.0,
    -2147483904.0,
    4294967296.0,
    9.3e18,
    -9.3e18,
    1e30,
    -1e30,
    3.0e38,
    8388609.0,
    -8388609.5,
];

/// `n` values of `dtype` (rounded into it): about a third specials, the rest halves, small
/// numbers and huge ones; subnormals only when asked for (a device may flush them).
fn float_inputs(rng: &mut StdRng, dtype: DType, n: usize, subnormals: bool) -> HostBuffer {
    let vals: Vec<f64> = (0..n)
        .map(|_| match rng.gen_range(0..10) {
            0..=2 => FLOAT_SPECIALS[rng.gen_range(0..FLOAT_SPECIALS.len())],
            3 | 4 => rng.gen_range(-300i32..300) as f64 + 0.5,
            5 | 6 => rng.gen_range(-300.0..300.0),
            7 => rng.gen_range(-4.0..4.0),
            8 if subnormals => rng.gen_range(-1e-39..1e-39),
            _ => {
                let e = rng.gen_range(0..127);
                let s = if rng.gen_bool(0.5) { -1.0 } else { 1.0 };
                s * rng.gen_range(1.0..2.0) * 2f64.powi(e)
            }
        })
        .collect();
    HostBuffer::from_f64(dtype, &vals)
}

fn int_inputs(rng: &mut StdRng, dtype: DType, n: usize) -> HostBuffer {
    let (lo, hi) = dtype.int_range().unwrap();
    let specials = [lo, hi, 0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, -32769, 65535, 65536];
    let vals: Vec<f64> = (0..n)
        .map(|_| {
            let v = match rng.gen_range(0..4) {
                0 => specials[rng.gen_range(0..specials.len())],
                1 => rng.gen_range(-300..300),
                _ => rng.gen_range(lo..=hi),
            };
            v.clamp(lo, hi) as f64
        })
        .collect();
    HostBuffer::from_f64(dtype, &vals)
}

/// Element `i` of an integer buffer, exactly.
fn int_at(b: &HostBuffer, i: usize) -> i128 {
    let bits = b.load_bits(i);
    let width = b.dtype().bits();
    if b.dtype().is_signed_int() && width < 64 {
        let shift = 64 - width;
        (((bits << shift) as i64) >> shift) as i128
    } else if b.dtype().is_signed_int() {
        bits as i64 as i128
    } else {
        bits as i128
    }
}

fn same_bits_or_nan(dtype: DType, want: f64, got: f64) -> bool {
    let w = HostBuffer::from_f64(dtype, &[want]);
    let g = HostBuffer::from_f64(dtype, &[got]);
    w.load_bits(0) == g.load_bits(0) || (want.is_nan() && got.is_nan())
}

#[test]
fn round_and_rint_are_ties_to_even() {
    let mut rng = StdRng::seed_from_u64(1);
    for d in [DType::F32, DType::F16, DType::BF16] {
        let p = elementwise(&format!("round_{d}"), &[d], &[d, d], |_, x| vec![x[0].round(), x[0].rint()]);
        for n in SIZES {
            let x = float_inputs(&mut rng, d, n, true);
            let want: Vec<f64> = x.to_f64().iter().map(|v| v.round_ties_even()).collect();
            // Sign of zero included: round(-0.4) is -0.
            check_elementwise(&p, &[x], &[d, d], &[want.clone(), want], |w, g| same_bits_or_nan(d, w, g));
        }
    }
}

#[test]
fn clamp_keeps_nan_and_ignores_nan_bounds() {
    let mut rng = StdRng::seed_from_u64(2);
    for d in [DType::F32, DType::F16, DType::I32, DType::I8] {
        let p = elementwise(&format!("clamp_{d}"), &[d, d, d], &[d, d], |_, x| {
            let lit = if x[0].dtype().is_float() { x[0].clamp(-1.5, 100.25) } else { x[0].clamp(-3, 100) };
            vec![x[0].clamp(x[1], x[2]), lit]
        });
        let (llo, lhi) = if d.is_float() { (-1.5, 100.25) } else { (-3.0, 100.0) };
        for n in SIZES {
            let gen = |rng: &mut StdRng| if d.is_float() { float_inputs(rng, d, n, false) } else { int_inputs(rng, d, n) };
            let (x, lo, hi) = (gen(&mut rng), gen(&mut rng), gen(&mut rng));
            // maxNum / minNum: a NaN bound is no bound.
            let clamp = |v: f64, lo: f64, hi: f64| {
                if v.is_nan() {
                    return v;
                }
                let r = if lo.is_nan() { v } else { v.max(lo) };
                if hi.is_nan() {
                    r
                } else {
                    r.min(hi)
                }
            };
            let (xv, lov, hiv) = (x.to_f64(), lo.to_f64(), hi.to_f64());
            let want0: Vec<f64> = (0..n).map(|i| clamp(xv[i], lov[i], hiv[i])).collect();
            let want1: Vec<f64> = (0..n).map(|i| clamp(xv[i], llo, lhi)).collect();
            // The sign of a zero result is open (maxNum(+0, -0)): compared as numbers.
            check_elementwise(&p, &[x, lo, hi], &[d, d], &[want0, want1], |w, g| w == g || (w.is_nan() && g.is_nan()));
        }
    }
}

const MODES: [Rounding; 4] = [Rounding::NearestEven, Rounding::TowardZero, Rounding::Down, Rounding::Up];

fn saturate(v: f64, mode: Rounding, to: DType) -> f64 {
    if v.is_nan() {
        return 0.0;
    }
    let r = match mode {
        Rounding::NearestEven => v.round_ties_even(),
        Rounding::TowardZero => v.trunc(),
        Rounding::Down => v.floor(),
        Rounding::Up => v.ceil(),
    };
    let (lo, hi) = to.int_range().unwrap();
    r.clamp(lo as f64, hi as f64)
}

#[test]
fn saturating_casts_from_floats_round_by_mode() {
    let mut rng = StdRng::seed_from_u64(3);
    let ints = [DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::I64];
    for from in [DType::F32, DType::F16, DType::BF16] {
        for mode in MODES {
            let p =
                elementwise(&format!("sat_{from}_{mode:?}"), &[from], &ints, |_, x| ints.iter().map(|&to| x[0].cast_saturating(to, mode)).collect());
            for n in SIZES {
                let x = float_inputs(&mut rng, from, n, true);
                let want: Vec<Vec<f64>> = ints.iter().map(|&to| x.to_f64().iter().map(|&v| saturate(v, mode, to)).collect()).collect();
                check_elementwise(&p, &[x], &ints, &want, |w, g| w == g);
            }
        }
    }
}

#[test]
fn saturating_casts_between_integers_clamp() {
    let mut rng = StdRng::seed_from_u64(4);
    for (from, tos) in [
        (DType::I32, vec![DType::I8, DType::U8, DType::I16, DType::U32, DType::I64]),
        (DType::U32, vec![DType::I32, DType::I8, DType::U8]),
        (DType::I64, vec![DType::I32, DType::U32]),
        (DType::I16, vec![DType::I8, DType::U8]),
    ] {
        let p = elementwise(&format!("sat_{from}"), &[from], &tos, |_, x| {
            tos.iter().map(|&to| x[0].cast_saturating(to, Rounding::NearestEven)).collect()
        });
        for n in SIZES {
            let x = int_inputs(&mut rng, from, n);
            let want: Vec<Vec<f64>> = tos.iter().map(|&to| x.to_f64().iter().map(|&v| saturate(v, Rounding::TowardZero, to)).collect()).collect();
            check_elementwise(&p, &[x], &tos, &want, |w, g| w == g);
        }
    }
}

#[test]
fn cdiv_rounds_the_exact_quotient_up() {
    let mut rng = StdRng::seed_from_u64(5);
    for d in [DType::I32, DType::U32, DType::I64, DType::I8] {
        let p = elementwise(&format!("cdiv_{d}"), &[d, d], &[d], |_, x| vec![x[0].cdiv(x[1])]);
        for n in SIZES {
            let a = int_inputs(&mut rng, d, n);
            let (lo, hi) = d.int_range().unwrap();
            // Nonzero divisors; never MIN / -1, whose quotient overflows (undefined on SPIR-V).
            let av = a.to_f64();
            let bv: Vec<f64> = (0..n)
                .map(|i| loop {
                    let b = match rng.gen_range(0..3) {
                        0 => rng.gen_range(-9i64..=9),
                        1 => rng.gen_range(lo..=hi),
                        _ => [lo, hi, 1, -1, 2, -2][rng.gen_range(0..6)],
                    }
                    .clamp(lo, hi);
                    if b != 0 && !(b == -1 && av[i] == lo as f64) {
                        break b as f64;
                    }
                })
                .collect();
            let b = HostBuffer::from_f64(d, &bv);
            let want: Vec<u8> = (0..n)
                .flat_map(|i| {
                    let (a, b) = (int_at(&a, i), int_at(&b, i));
                    // Euclid's quotient is the floor for b > 0 and the ceiling for b < 0.
                    let (q, r) = (a.div_euclid(b), a.rem_euclid(b));
                    let c = if b > 0 && r != 0 { q + 1 } else { q };
                    assert!(c * b >= a && (c - 1) * b < a || b < 0 && c * b <= a && (c - 1) * b > a);
                    c.to_le_bytes()[..d.size_bytes()].to_vec()
                })
                .collect();
            let want = HostBuffer::from_bytes(d, &want).unwrap();
            check_elementwise_exact(&p, &[a, b], &[d], &[want], |w, g, i| w.load_bits(i) == g.load_bits(i));
        }
    }
    assert_eq!([cdiv(0, 4), cdiv(1, 4), cdiv(8, 4), cdiv(9, 4), cdiv(5, 0)], [0, 1, 2, 3, 5]);
}

/// `max_with_index` and `min_with_index` along both axes of an [8, 128] tile over a ragged
/// `rows x cols` matrix, 2 warps: masked-off lanes read NaN (floats, which never win) or the
/// losing bound (integers, which lose ties by their higher index).
#[test]
fn extremes_with_their_indices() {
    let mut rng = StdRng::seed_from_u64(6);
    const R: usize = 8;
    const C: usize = 128;
    for d in [DType::F32, DType::BF16, DType::I32] {
        let k = Builder::new(format!("extremes_{d}"));
        let x = k.input("x", d);
        let outs: Vec<_> = ["vmax1", "imax1", "vmin1", "imin1", "vmax0", "imax0", "vmin0", "imin0"]
            .iter()
            .enumerate()
            .map(|(i, name)| k.output(*name, if i % 2 == 0 { d } else { DType::I32 }))
            .collect();
        let rows = k.scalar("rows", DType::I32);
        let cols = k.scalar("cols", DType::I32);
        let r = k.arange(0, R as i64).expand_dims(1);
        let c = k.arange(0, C as i64).expand_dims(0);
        let offs = r * cols + c;
        let rmask = k.arange(0, R as i64).lt(rows);
        let cmask = k.arange(0, C as i64).lt(cols);
        let mask = r.lt(rows) & c.lt(cols);
        let (lo, hi) = if d.is_float() {
            (tilekit::builder::Operand::Float(f64::NAN), tilekit::builder::Operand::Float(f64::NAN))
        } else {
            (i32::MIN.into(), i32::MAX.into())
        };
        let for_max = k.load_masked(x, offs, mask, lo);
        let for_min = k.load_masked(x, offs, mask, hi);
        let (vmax1, imax1) = for_max.max_with_index(1);
        let (vmin1, imin1) = for_min.min_with_index(1);
        let (vmax0, imax0) = for_max.max_with_index(0);
        let (vmin0, imin0) = for_min.min_with_index(0);
        let ri = k.arange(0, R as i64);
        let ci = k.arange(0, C as i64);
        for (o, (v, (idx, m))) in outs.iter().zip([
            (vmax1, (ri, rmask)),
            (imax1, (ri, rmask)),
            (vmin1, (ri, rmask)),
            (imin1, (ri, rmask)),
            (vmax0, (ci, cmask)),
            (imax0, (ci, cmask)),
            (vmin0, (ci, cmask)),
            (imin0, (ci, cmask)),
        ]) {
            k.store_masked(*o, idx, v, m);
        }
        let p = k.finish().unwrap();
        check_modules(&p, 2);
        for (rows, cols) in [(1, 1), (3, 7), (5, 61), (7, 127), (8, 128)] {
            let xb = if d.is_float() { float_inputs(&mut rng, d, rows * cols, false) } else { int_inputs(&mut rng, d, rows * cols) };
            let xv = xb.to_f64();
            let at = |i: usize, j: usize| xv[i * cols + j];
            // The first extreme by `better`, NaNs skipped; all NaN gives index 0.
            let pick = |vals: &[f64], better: fn(f64, f64) -> bool| -> (f64, usize) {
                let mut best: Option<usize> = None;
                for (i, &v) in vals.iter().enumerate() {
                    if !v.is_nan() && best.map_or(true, |b| better(v, vals[b])) {
                        best = Some(i);
                    }
                }
                best.map_or((f64::NAN, 0), |b| (vals[b], b))
            };
            let gt: fn(f64, f64) -> bool = |a, b| a > b;
            let lt: fn(f64, f64) -> bool = |a, b| a < b;
            let row = |i: usize| (0..cols).map(|j| at(i, j)).collect::<Vec<f64>>();
            let col = |j: usize| (0..rows).map(|i| at(i, j)).collect::<Vec<f64>>();
            let want: Vec<Vec<(f64, usize)>> = vec![
                (0..rows).map(|i| pick(&row(i), gt)).collect(),
                (0..rows).map(|i| pick(&row(i), lt)).collect(),
                (0..cols).map(|j| pick(&col(j), gt)).collect(),
                (0..cols).map(|j| pick(&col(j), lt)).collect(),
            ];
            let mut buffers = vec![xb.clone()];
            for (i, _) in outs.iter().enumerate() {
                let len = if i < 4 { R } else { C };
                buffers.push(HostBuffer::zeros(if i % 2 == 0 { d } else { DType::I32 }, len));
            }
            let scalars = [(9, Scalar::Int(rows as i64)), (10, Scalar::Int(cols as i64))];
            run_everywhere(&p, [1, 1, 1], 2, &buffers, &scalars, |got| {
                for (w, want) in want.iter().enumerate() {
                    let (vals, idxs) = (got[1 + 2 * w].to_f64(), got[2 + 2 * w].to_f64());
                    for (i, &(wv, wi)) in want.iter().enumerate() {
                        let (gv, gi) = (vals[i], idxs[i] as usize);
                        // The value is the element at the index, bit for bit (a zero keeps its
                        // sign); a NaN is any NaN.
                        let at = if w < 2 { i * cols + wi } else { wi * cols + i };
                        let same = got[1 + 2 * w].load_bits(i) == xb.load_bits(at) || (gv.is_nan() && wv.is_nan());
                        let ok = gi == wi && same;
                        if !ok {
                            return Err(format!("{rows}x{cols}, reduction {w}, lane {i}: want ({wv}, {wi}) got ({gv}, {gi})"));
                        }
                    }
                }
                Ok(())
            });
        }
    }
}

/// A float written to an integer buffer is refused with both conversions named.
#[test]
fn float_into_integer_buffer_needs_an_explicit_conversion() {
    let k = Builder::new("q");
    let q = k.output("q", DType::I8);
    let offs = k.arange(0, 16);
    k.store(q, offs, offs.cast(DType::F32) * 0.5);
    let e = k.finish().unwrap_err().to_string();
    assert!(e.starts_with("`store` at "), "{e}");
    assert!(e.contains("`q`") && e.contains(".cast(i8)") && e.contains(".cast_saturating(i8, Rounding::NearestEven)"), "{e}");

    let k = Builder::new("a");
    let acc = k.buffer("acc", DType::I32, tilekit::Access::ReadWrite);
    let offs = k.arange(0, 16);
    k.atomic_add(acc, offs, offs.cast(DType::F32), None);
    let e = k.finish().unwrap_err().to_string();
    assert!(e.starts_with("`atomic_add` at ") && e.contains("cast_saturating"), "{e}");

    // Integers into float buffers, and floats between float dtypes, still convert.
    let k = Builder::new("ok");
    let f = k.output("f", DType::F16);
    let offs = k.arange(0, 16);
    k.store(f, offs, offs);
    k.store(f, offs, offs.cast(DType::F32));
    k.finish().unwrap();
}

/// `reduce_tuple` along both axes of an [8, 128] and a [2, 4] tile over a ragged `rows x cols`
/// matrix, 2 warps: an argmax that carries a second value of the same dtype (three operands, two sharing
/// a dtype), and a (max, count of positives) pair of mixed dtypes.
#[test]
fn tuple_reductions() {
    let mut rng = StdRng::seed_from_u64(7);
    // The small tile has fewer elements along an axis than lanes: the shared-memory path.
    for ((tr, tc), d) in [(8, 128), (2, 4)].into_iter().flat_map(|t| [DType::F32, DType::BF16, DType::I32].map(|d| (t, d))) {
        let k = Builder::new(format!("tuple_{d}_{tr}x{tc}"));
        let x = k.input("x", d);
        let y = k.input("y", d);
        // Per axis: value, carried, index, max, count.
        let kinds = [d, d, DType::I32, d, DType::I32];
        let outs: Vec<Vec<_>> = (0..2).map(|a| kinds.iter().enumerate().map(|(i, &t)| k.output(format!("o{a}_{i}"), t)).collect()).collect();
        let rows = k.scalar("rows", DType::I32);
        let cols = k.scalar("cols", DType::I32);
        let (ri, ci) = (k.arange(0, tr as i64), k.arange(0, tc as i64));
        let (r, c) = (ri.expand_dims(1), ci.expand_dims(0));
        let offs = r * cols + c;
        let mask = r.lt(rows) & c.lt(cols);
        let other = if d.is_float() { tilekit::builder::Operand::Float(f64::NAN) } else { i32::MIN.into() };
        let xv = k.load_masked(x, offs, mask, other);
        let yv = k.load_masked(y, offs, mask, 0);
        for (a, (idx, m)) in [(ci.expand_dims(0).broadcast_to(&[tr, tc]), ri.lt(rows)), (ri.expand_dims(1).broadcast_to(&[tr, tc]), ci.lt(cols))]
            .into_iter()
            .enumerate()
        {
            let axis = 1 - a as u32;
            let [v, carried, i] = k.reduce_tuple([xv, yv, idx], axis, |[av, ay, ai], [bv, by, bi]| {
                // A total order on (value, index): larger wins, then the lower index; a NaN
                // loses to a number; among NaNs the lower index wins.
                let lower = bi.lt(ai);
                let win = if d.is_float() {
                    let (a_nan, b_nan) = (av.ne(av), bv.ne(bv));
                    bv.gt(av) | ((bv.eq(av) | (a_nan & b_nan)) & lower) | (a_nan & !b_nan)
                } else {
                    bv.gt(av) | (bv.eq(av) & lower)
                };
                [k.select(win, bv, av), k.select(win, by, ay), k.select(win, bi, ai)]
            });
            let positive = xv.gt(0).cast(DType::I32);
            let [mx, count] = k.reduce_tuple([xv, positive], axis, |[am, ac], [bm, bc]| [am.maximum(bm), ac + bc]);
            let lanes = if a == 0 { ri } else { ci };
            for (o, t) in outs[a].iter().zip([v, carried, i, mx, count]) {
                k.store_masked(*o, lanes, t, m);
            }
        }
        let p = k.finish().unwrap();
        check_modules(&p, 2);
        for (rows, cols) in [(1, 1), (3, 7), (5, 61), (7, 127), (8, 128)] {
            let (rows, cols) = (rows.min(tr), cols.min(tc));
            let gen = |rng: &mut StdRng| if d.is_float() { float_inputs(rng, d, rows * cols, false) } else { int_inputs(rng, d, rows * cols) };
            let (xb, yb) = (gen(&mut rng), gen(&mut rng));
            let (xv, yv) = (xb.to_f64(), yb.to_f64());
            // Per axis, per lane: (argmax index into x, max as a number, count of positives).
            let lines = |a: usize| -> Vec<Vec<usize>> {
                if a == 0 {
                    (0..rows).map(|i| (0..cols).map(|j| i * cols + j).collect()).collect()
                } else {
                    (0..cols).map(|j| (0..rows).map(|i| i * cols + j).collect()).collect()
                }
            };
            let mut buffers = vec![xb.clone(), yb.clone()];
            for a in 0..2 {
                for &t in &kinds {
                    buffers.push(HostBuffer::zeros(t, if a == 0 { tr } else { tc }));
                }
            }
            let scalars = [(12, Scalar::Int(rows as i64)), (13, Scalar::Int(cols as i64))];
            run_everywhere(&p, [1, 1, 1], 2, &buffers, &scalars, |got| {
                for a in 0..2 {
                    let o = |i: usize| &got[2 + 5 * a + i];
                    for (lane, line) in lines(a).iter().enumerate() {
                        let mut best: Option<usize> = None;
                        for (n, &e) in line.iter().enumerate() {
                            if !xv[e].is_nan() && best.map_or(true, |b| xv[e] > xv[line[b]]) {
                                best = Some(n);
                            }
                        }
                        let wi = best.unwrap_or(0);
                        let (we, max) = (line[wi], best.map_or(f64::NAN, |b| xv[line[b]]));
                        let count = line.iter().filter(|&&e| xv[e] > 0.0).count() as f64;
                        let same_bits = |b: &HostBuffer, want: &HostBuffer, j: usize| {
                            b.load_bits(lane) == want.load_bits(j) || (b.to_f64()[lane].is_nan() && want.to_f64()[j].is_nan())
                        };
                        let ok = o(2).to_f64()[lane] == wi as f64
                            && same_bits(o(0), &xb, we)
                            && same_bits(o(1), &yb, we)
                            && (o(3).to_f64()[lane] == max || (o(3).to_f64()[lane].is_nan() && max.is_nan()))
                            && o(4).to_f64()[lane] == count;
                        if !ok {
                            let g: Vec<f64> = (0..5).map(|i| o(i).to_f64()[lane]).collect();
                            return Err(format!(
                                "{rows}x{cols}, axis {}, lane {lane}: want index {wi} value {} carried {} max {max} count {count}, got {g:?}",
                                1 - a,
                                xv[we],
                                yv[we]
                            ));
                        }
                    }
                }
                Ok(())
            });
        }
    }
}
