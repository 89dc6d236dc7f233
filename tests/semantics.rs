//! Programs that once gave wrong answers on some device, in tilekit's text form, run on the
//! interpreter, the emulator (warps of 32 and 8) and every Vulkan device through both runtimes,
//! and compared bit for bit with the interpreter: each is exact under the IR's semantics.

use rand::{Rng, SeedableRng};
use tilekit::kernels::{BufferSpec, Launch, LaunchArg, Plan, Role};
use tilekit::{Config, DType, Device, HostBuffer, Scalar};
use tilekit_core::gpu::Target;

/// The devices every program runs on besides the interpreter.
fn devices() -> Vec<Device> {
    // sm_80's emulator runs `dot` on its model of mma.sync.
    let mut out = vec![Device::Emulator(Target::vulkan_baseline()), Device::Emulator(Target::lavapipe()), Device::Emulator(Target::cuda_sm80())];
    if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED: Vulkan devices in tests/semantics.rs (TILEKIT_SKIP_GPU_TESTS=1)");
    } else {
        let gpus = Device::gpus();
        assert!(!gpus.is_empty(), "no Vulkan device found: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1");
        out.extend(gpus);
    }
    out
}

/// Runs `text` over `grid` with `num_warps` on every device; `buffers` gives each buffer
/// parameter's initial contents (outputs too), `scalars` the scalar arguments by parameter
/// index. Every buffer must end bit-identical to the interpreter's.
fn agree(text: &str, grid: [u32; 3], num_warps: u32, buffers: &[HostBuffer], scalars: &[(usize, Scalar)]) {
    agree_where(text, grid, num_warps, buffers, scalars, |_| true)
}

/// As [`agree`], on the devices `on` accepts.
fn agree_where(text: &str, grid: [u32; 3], num_warps: u32, buffers: &[HostBuffer], scalars: &[(usize, Scalar)], on: impl Fn(&Device) -> bool) {
    let program = tilekit_core::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
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
    let plan = Plan { buffers: specs, launches: vec![Launch { program, grid, args }] };
    let config = Config::new().with("num_warps", num_warps as i64);
    let fresh = || buffers.iter().map(|b| HostBuffer::from_bytes(b.dtype(), &b.to_bytes()).unwrap()).collect::<Vec<_>>();
    let want = fresh();
    Device::Interpreter.run_plan(&plan, &want, &config).unwrap_or_else(|e| panic!("interpreter: {e}"));
    for device in devices().into_iter().filter(|d| on(d)) {
        let got = fresh();
        if let Err(e) = device.run_plan(&plan, &got, &config) {
            if e.to_string().contains("does not support") {
                eprintln!("SKIPPED: {device} for `{}` ({e})", plan.launches[0].program.name);
                continue;
            }
            panic!("{device}, {num_warps} warps: {e}\n{text}");
        }
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            // Bit for bit, except that NaNs carry no sign or payload anyone promises.
            let (wf, gf) = (w.to_f64(), g.to_f64());
            let same = |j: usize| w.load_bits(j) == g.load_bits(j) || (w.dtype().is_float() && wf[j].is_nan() && gf[j].is_nan());
            if let Some(j) = (0..w.len()).find(|&j| !same(j)) {
                panic!(
                    "{device}, {num_warps} warps: buffer {i} differs from the interpreter's at {j}: want {} got {}\n{text}",
                    w.to_f64()[j],
                    g.to_f64()[j]
                );
            }
        }
    }
}

fn random_ints(seed: u64, dtype: DType, n: usize, lo: i64, hi: i64) -> HostBuffer {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    HostBuffer::from_f64(dtype, &(0..n).map(|_| rng.gen_range(lo..hi) as f64).collect::<Vec<_>>())
}

/// argmax/argmin across warps keeps its values and indices apart in shared memory, also when
/// the values are i32 themselves.
#[test]
fn arg_reductions_across_warps() {
    for (combine, dtype) in [("argmax", "i32"), ("argmin", "i32"), ("argmax", "f32"), ("argmin", "u32")] {
        let text = format!(
            "program n(x: buffer<{dtype}, read>, y: buffer<i32, write>) grid 1 {{
  %0 = program_id 0 : i32
  %1 = arange 0, 256 : [256]xi32
  %2 = load x[%1] : [256]x{dtype}
  %3 = reduce {combine} %2, axis 0 : i32
  store y[%0], %3
}}"
        );
        let d = DType::from_name(dtype).unwrap();
        for warps in [1, 2, 8] {
            // Few distinct values: ties decide by the lowest index.
            agree(&text, [1, 1, 1], warps, &[random_ints(warps as u64, d, 256, 0, 40), HostBuffer::zeros(DType::I32, 1)], &[]);
        }
    }
    // Mostly NaN: NaNs never win over numbers, and among NaNs the lowest index wins, in every
    // order a tree of lanes and warps combines them.
    for combine in ["argmax", "argmin"] {
        let text = format!(
            "program n(x: buffer<f32, read>, y: buffer<i32, write>) grid 1 {{
  %0 = program_id 0 : i32
  %1 = arange 0, 64 : [64]xi32
  %2 = load x[%1] : [64]xf32
  %3 = reduce {combine} %2, axis 0 : i32
  store y[%0], %3
}}"
        );
        for (seed, numbers) in [(1u64, 0usize), (2, 1), (3, 5)] {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut vals = vec![f64::NAN; 64];
            for _ in 0..numbers {
                vals[rng.gen_range(0..64)] = rng.gen_range(-3..3) as f64;
            }
            for warps in [1, 2] {
                agree(&text, [1, 1, 1], warps, &[HostBuffer::from_f64(DType::F32, &vals), HostBuffer::zeros(DType::I32, 1)], &[]);
            }
        }
    }
    // 2-D, along axis 0, 2 warps.
    let text = "program m(x: buffer<i32, read>, y: buffer<i32, write>) grid 1 {
  %0 = arange 0, 64 : [64]xi32
  %1 = expand_dims %0, axis 1 : [64, 1]xi32
  %2 = const 16 : i32
  %3 = splat %2 : [64, 1]xi32
  %4 = mul %1, %3 : [64, 1]xi32
  %5 = arange 0, 16 : [16]xi32
  %6 = expand_dims %5, axis 0 : [1, 16]xi32
  %7 = broadcast %4 : [64, 16]xi32
  %8 = broadcast %6 : [64, 16]xi32
  %9 = add %7, %8 : [64, 16]xi32
  %10 = load x[%9] : [64, 16]xi32
  %11 = reduce argmin %10, axis 0 : [16]xi32
  store y[%5], %11
}";
    agree(text, [1, 1, 1], 2, &[random_ints(7, DType::I32, 1024, -30, 30), HostBuffer::zeros(DType::I32, 16)], &[]);
}

/// Floats with the values backends get wrong: signed zeros, subnormals, huge values, infinities
/// and NaN, then random ones.
fn special_floats(dtype: DType, n: usize, seed: u64) -> HostBuffer {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let specials = [0.0, -0.0, 1.0, -1.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 3.0e38, -7.0e-39, 1.0e-40, 6.0e-8, 65504.0, 150.0, -75.0];
    let vals: Vec<f64> = (0..n).map(|i| if i < specials.len() { specials[i] } else { rng.gen_range(-100.0..100.0) }).collect();
    HostBuffer::from_f64(dtype, &vals)
}

/// `x op c` for a constant `c`, elementwise over special values, in every float dtype.
#[test]
fn float_ops_with_constant_operands() {
    for dtype in ["f32", "f16", "bf16"] {
        for (op, c, swap) in
            [("rem", "0.0", false), ("mul", "0.0", true), ("mul", "0.0", false), ("div", "0.0", true), ("rem", "-0.0", false), ("div", "0.0", false)]
        {
            let (l, r) = if swap { ("%3", "%1") } else { ("%1", "%3") };
            let text = format!(
                "program k(x: buffer<{dtype}, read>, y: buffer<{dtype}, write>) grid 1 {{
  %0 = arange 0, 32 : [32]xi32
  %1 = load x[%0] : [32]x{dtype}
  %2 = const {c} : {dtype}
  %3 = splat %2 : [32]x{dtype}
  %4 = {op} {l}, {r} : [32]x{dtype}
  store y[%0], %4
}}"
            );
            let d = DType::from_name(dtype).unwrap();
            // Subnormals where the device keeps them (a driver without the float controls may
            // flush them, which the semantics allow); everywhere, the other specials.
            let keeps = |dev: &Device| {
                matches!(dev, Device::Emulator(_)) || dev.target().map_or(true, |t| t.f32_denorm_preserve && (d != DType::F16 || t.f16_rte))
            };
            agree_where(&text, [1, 1, 1], 1, &[special_floats(d, 32, 3), HostBuffer::zeros(d, 32)], &[], keeps);
            let normal: Vec<f64> = special_floats(d, 32, 3).to_f64().into_iter().map(|x| if x != 0.0 && x.abs() < 1e-4 { 0.5 } else { x }).collect();
            agree(&text, [1, 1, 1], 1, &[HostBuffer::from_f64(d, &normal), HostBuffer::zeros(d, 32)], &[]);
        }
    }
}

/// `num_warps` that are not a power of two are refused on every device with the reason.
#[test]
fn num_warps_not_a_power_of_two_is_refused() {
    let text = "program s(x: buffer<f32, read>, y: buffer<f32, write>) grid 1 {
  %0 = arange 0, 64 : [64]xi32
  %1 = load x[%0] : [64]xf32
  %2 = reduce sum %1, axis 0 : f32
  %3 = program_id 0 : i32
  store y[%3], %2
}";
    let program = tilekit_core::text::parse(text).unwrap();
    let plan = Plan {
        buffers: vec![
            BufferSpec { name: "x".into(), dtype: DType::F32, len: 64, role: Role::Input },
            BufferSpec { name: "y".into(), dtype: DType::F32, len: 1, role: Role::Input },
        ],
        launches: vec![Launch { program, grid: [1, 1, 1], args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1)] }],
    };
    let mut all = vec![Device::Interpreter];
    all.extend(devices());
    for warps in [0, 3, 5, 6, 12, -2] {
        let config = Config::new().with("num_warps", warps);
        for device in &all {
            let bufs = [special_floats(DType::F32, 64, 1), HostBuffer::zeros(DType::F32, 1)];
            let err = device.run_plan(&plan, &bufs, &config).expect_err(&format!("{device} ran num_warps = {warps}"));
            assert!(err.to_string().contains("power of two"), "{device}, num_warps = {warps}: {err}");
        }
    }
    for warps in [1, 2, 4, 8, 16] {
        let x = random_ints(warps as u64, DType::F32, 64, -1000, 1000);
        agree(text, [1, 1, 1], warps, &[x, HostBuffer::zeros(DType::F32, 1)], &[]);
    }
}

/// `dot` with an f16 accumulator sums in f32 and rounds once: products that overflow f16 one at
/// a time but cancel in the sum give a finite result everywhere.
#[test]
fn dot_with_an_f16_accumulator_rounds_once() {
    let text = "program d(a: buffer<f16, read>, b: buffer<f16, read>, c: buffer<f16, write>) grid 1 {
  %0 = arange 0, 16 : [16]xi32
  %1 = expand_dims %0, axis 1 : [16, 1]xi32
  %2 = const 16 : i32
  %3 = splat %2 : [16, 1]xi32
  %4 = mul %1, %3 : [16, 1]xi32
  %5 = expand_dims %0, axis 0 : [1, 16]xi32
  %6 = broadcast %4 : [16, 16]xi32
  %7 = broadcast %5 : [16, 16]xi32
  %8 = add %6, %7 : [16, 16]xi32
  %9 = load a[%8] : [16, 16]xf16
  %10 = load b[%8] : [16, 16]xf16
  %11 = const 0.0 : f16
  %12 = splat %11 : [16, 16]xf16
  %13 = dot %9, %10, %12 : [16, 16]xf16
  store c[%8], %13
}";
    // a[i, k] = +-250 alternating along k, b[k, j] = 250: partial sums reach 62500 (> 65504
    // after two products) and the total is 0.
    let a: Vec<f64> = (0..256).map(|i| if i % 2 == 0 { 250.0 } else { -250.0 }).collect();
    let b = vec![250.0; 256];
    for warps in [1, 4] {
        agree(
            text,
            [1, 1, 1],
            warps,
            &[HostBuffer::from_f64(DType::F16, &a), HostBuffer::from_f64(DType::F16, &b), HostBuffer::zeros(DType::F16, 256)],
            &[],
        );
    }
    let out = HostBuffer::zeros(DType::F16, 256);
    let program = tilekit_core::text::parse(text).unwrap();
    tilekit_core::interp::run(
        &program,
        [1, 1, 1],
        &[
            tilekit_core::interp::Arg::Buffer(&HostBuffer::from_f64(DType::F16, &a)),
            tilekit_core::interp::Arg::Buffer(&HostBuffer::from_f64(DType::F16, &b)),
            tilekit_core::interp::Arg::Buffer(&out),
        ],
    )
    .unwrap();
    assert!(out.to_f64().iter().all(|&x| x == 0.0), "{:?}", &out.to_f64()[..4]);
}

/// Masked-off lanes touch no memory, also where the lowering loads whole vectors: an empty and
/// a one-element buffer read under a mask that is off everywhere (or on for element 0 only).
#[test]
fn masked_off_lanes_stay_out_of_memory() {
    let text = "program z(x: buffer<f32, read>, y: buffer<f32, write>, n: i32) grid 1 {
  %0 = arange 0, 64 : [64]xi32
  %1 = arg 2 : i32
  %2 = splat %1 : [64]xi32
  %3 = cmp lt %0, %2 : [64]xi1
  %4 = const 2.5 : f32
  %5 = splat %4 : [64]xf32
  %6 = load x[%0], mask %3, other %5 : [64]xf32
  %7 = const 0 : i32
  %8 = splat %7 : [64]xi32
  %9 = add %0, %8 : [64]xi32
  %10 = const 1.0 : f32
  %11 = splat %10 : [64]xf32
  %12 = add %6, %11 : [64]xf32
  store y[%9], %12
}";
    for n in [0usize, 1] {
        agree(text, [1, 1, 1], 2, &[special_floats(DType::F32, n, 5), HostBuffer::zeros(DType::F32, 64)], &[(2, Scalar::Int(n as i64))]);
    }
}

/// An `if` on a uniform condition no thread takes may hold a barrier (a reduction).
#[test]
fn barrier_in_an_untaken_uniform_if() {
    let text = "program u(x: buffer<f32, read>, y: buffer<f32, write>, n: i32) grid 1 {
  %0 = arange 0, 128 : [128]xi32
  %1 = load x[%0] : [128]xf32
  %2 = arg 2 : i32
  %3 = const 0 : i32
  %4 = cmp gt %2, %3 : i1
  %5 = if %4 : f32 then {
    %6 = reduce sum %1, axis 0 : f32
    yield %6
  } else {
    %7 = const 1.0 : f32
    yield %7
  }
  %8 = program_id 0 : i32
  store y[%8], %5
}";
    for n in [0, 1] {
        let x = random_ints(3, DType::F32, 128, -8, 8);
        agree(text, [1, 1, 1], 4, &[x, HostBuffer::zeros(DType::F32, 1)], &[(2, Scalar::Int(n))]);
    }
}

/// An atomic on a tile smaller than the program's threads returns every element's old value
/// in every thread that holds a copy of it, so a use of the old values (here stored from the
/// default layout) sees them all.
#[test]
fn atomic_old_values_reach_every_copy() {
    let text = "program a(x: buffer<i32, read_write>, y: buffer<i32, write>) grid 1 {
  %0 = arange 0, 8 : [8]xi32
  %1 = const 5 : i32
  %2 = splat %1 : [8]xi32
  %3 = atomic_add x[%0], %2 : [8]xi32
  %4 = reduce sum %3, axis 0 : i32
  %5 = program_id 0 : i32
  store y[%5], %4
}";
    for warps in [1, 4] {
        agree(text, [1, 1, 1], warps, &[random_ints(9, DType::I32, 8, -50, 50), HostBuffer::zeros(DType::I32, 1)], &[]);
    }
}

/// i32 and i64 to bf16 round once (to nearest even), also above 2^24 where a detour through
/// f32 rounds twice.
#[test]
fn integers_to_bf16_round_once() {
    for from in ["i32", "i64"] {
        let text = format!(
            "program c(x: buffer<{from}, read>, y: buffer<bf16, write>) grid 1 {{
  %0 = arange 0, 16 : [16]xi32
  %1 = load x[%0] : [16]x{from}
  %2 = cast %1 : [16]xbf16
  store y[%0], %2
}}"
        );
        // Just above a bf16 tie: 2^24 + 2^16 + 1 rounds up to bf16 once but down through f32.
        let vals: Vec<f64> = [16_842_753.0, -16_842_753.0, 33_685_505.0, 2_147_483_647.0, -2_147_483_648.0, 25_165_825.0, 1.0, -3.0]
            .iter()
            .cycle()
            .take(16)
            .copied()
            .collect();
        let d = DType::from_name(from).unwrap();
        agree(&text, [1, 1, 1], 1, &[HostBuffer::from_f64(d, &vals), HostBuffer::zeros(DType::BF16, 16)], &[]);
    }
}

/// argmax/argmin of i64 values that differ by less than an f64 can tell apart (near i64::MIN
/// and i64::MAX) compare them as integers.
#[test]
fn i64_arg_reductions_compare_as_integers() {
    for combine in ["argmax", "argmin"] {
        let text = format!(
            "program a(x: buffer<i64, read>, y: buffer<i32, write>) grid 1 {{
  %0 = program_id 0 : i32
  %1 = arange 0, 32 : [32]xi32
  %2 = load x[%1] : [32]xi64
  %3 = reduce {combine} %2, axis 0 : i32
  store y[%0], %3
}}"
        );
        for (seed, base) in [(1u64, i64::MAX - 40), (2, i64::MIN + 1), (3, (1i64 << 60) + 3)] {
            let x = HostBuffer::zeros(DType::I64, 32);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            for i in 0..32 {
                x.store_bits(i, base.wrapping_add(rng.gen_range(0..30)) as u64);
            }
            for warps in [1, 2] {
                agree(&text, [1, 1, 1], warps, &[HostBuffer::from_bytes(DType::I64, &x.to_bytes()).unwrap(), HostBuffer::zeros(DType::I32, 1)], &[]);
            }
        }
    }
}

/// `x + cast(0)` keeps -0 + 0 = +0 when the zero is an integer constant converted to a float
/// (a driver folds the conversion of a constant, then `x + 0` to `x`).
#[test]
fn adding_a_converted_constant_zero_keeps_ieee_zeros() {
    for (from, to) in [("u8", "f16"), ("i32", "f32"), ("i64", "f32"), ("u8", "bf16"), ("i1", "f32")] {
        // `false` goes through i32 first, as the fuzzer found it.
        let convert = if from == "i1" {
            format!("%2 = const false : i1\n  %8 = cast %2 : i32\n  %3 = cast %8 : {to}")
        } else {
            format!("%2 = const 0 : {from}\n  %3 = cast %2 : {to}")
        };
        let text = format!(
            "program z(x: buffer<{to}, read>, y: buffer<{to}, write>) grid 1 {{
  %0 = arange 0, 32 : [32]xi32
  %1 = load x[%0] : [32]x{to}
  {convert}
  %4 = splat %3 : [32]x{to}
  %5 = add %1, %4 : [32]x{to}
  %6 = mul %1, %4 : [32]x{to}
  %7 = add %5, %6 : [32]x{to}
  store y[%0], %7
}}"
        );
        let d = DType::from_name(to).unwrap();
        let x: Vec<f64> = special_floats(d, 32, 11).to_f64().into_iter().map(|v| if v != 0.0 && v.abs() < 1e-4 { -0.0 } else { v }).collect();
        // bf16 where the device has it (the emulator everywhere).
        agree_where(&text, [1, 1, 1], 1, &[HostBuffer::from_f64(d, &x), HostBuffer::zeros(d, 32)], &[], |dev| {
            d != DType::BF16 || dev.target().map_or(true, |t| t.bf16)
        });
    }
}

/// An f16 `fma` rounds once, from f32: 65504 * -1.5 + 65504 is -32752, not an infinity from a
/// product rounded to f16 first.
#[test]
fn f16_fma_rounds_once() {
    let text = "program f(a: buffer<f16, read>, b: buffer<f16, read>, c: buffer<f16, read>, y: buffer<f16, write>) grid 1 {
  %0 = arange 0, 8 : [8]xi32
  %1 = load a[%0] : [8]xf16
  %2 = load b[%0] : [8]xf16
  %3 = load c[%0] : [8]xf16
  %4 = fma %1, %2, %3 : [8]xf16
  store y[%0], %4
}";
    let a = [65504.0, 300.0, -0.0, 1.0, 2.0, 60000.0, 0.5, 3.0];
    let b = [-1.5, 300.0, 0.0, 1.0, 0.5, 2.0, 0.5, -3.0];
    let c = [65504.0, -89000.0, 0.0, -1.0, -1.0, -65504.0, -0.25, 9.0];
    let bufs = [
        HostBuffer::from_f64(DType::F16, &a),
        HostBuffer::from_f64(DType::F16, &b),
        HostBuffer::from_f64(DType::F16, &c),
        HostBuffer::zeros(DType::F16, 8),
    ];
    agree(text, [1, 1, 1], 1, &bufs, &[]);
}

/// A narrow integer (i8, u8, i16) read at one uniform offset converts to a float through a
/// 32-bit integer: SPIR-V without the Int8/Int16 capabilities allows only width conversions
/// of 8- and 16-bit values (the validation layer rejected the module).
#[test]
fn narrow_integers_convert_to_floats() {
    for from in ["i8", "u8", "i16"] {
        for to in ["f32", "f16"] {
            let text = format!(
                "program c(x: buffer<{from}, read>, y: buffer<{to}, write>) grid 1 {{
  %0 = arange 0, 4 : [4]xi32
  %1 = const 0 : i32
  %2 = splat %1 : [4]xi32
  %3 = load x[%2] : [4]x{from}
  %4 = cast %3 : [4]x{to}
  %5 = load x[%0] : [4]x{from}
  %6 = cast %5 : [4]x{to}
  %7 = add %4, %6 : [4]x{to}
  store y[%0], %7
}}"
            );
            let d = DType::from_name(from).unwrap();
            let x = HostBuffer::from_f64(d, &[-100.0, 7.0, 127.0, 3.0]);
            // And the other way, in a program without a narrow buffer: the module still
            // declares what the narrow type needs.
            let back = format!(
                "program b(x: buffer<{to}, read>, y: buffer<i32, write>) grid 1 {{
  %0 = arange 0, 4 : [4]xi32
  %1 = load x[%0] : [4]x{to}
  %2 = cast %1 : [4]x{from}
  %3 = cast %2 : [4]xi32
  store y[%0], %3
}}"
            );
            let t = DType::from_name(to).unwrap();
            agree(&back, [1, 1, 1], 1, &[HostBuffer::from_f64(t, &[-3.5, 100.0, 1000.0, f64::NAN]), HostBuffer::zeros(DType::I32, 4)], &[]);
            agree(&text, [1, 1, 1], 1, &[x, HostBuffer::zeros(DType::from_name(to).unwrap(), 4)], &[]);
        }
    }
}

/// `dot` with a transposed operand on mma.sync: the transpose goes through shared memory, and
/// the other operand's staged copy there must not be overwritten by it.
#[test]
fn dot_with_a_transposed_operand() {
    for (ta, tb) in [(false, true), (true, false), (true, true)] {
        let a_op = if ta { "%14 = trans %9, perm [1, 0] : [16, 16]xf16" } else { "%14 = add %9, %9 : [16, 16]xf16" };
        let b_op = if tb { "%15 = trans %10, perm [1, 0] : [16, 16]xf16" } else { "%15 = add %10, %10 : [16, 16]xf16" };
        let text = format!(
            "program d(a: buffer<f16, read>, b: buffer<f16, read>, c: buffer<f32, write>) grid 1 {{
  %0 = arange 0, 16 : [16]xi32
  %1 = expand_dims %0, axis 1 : [16, 1]xi32
  %2 = const 16 : i32
  %3 = splat %2 : [16, 1]xi32
  %4 = mul %1, %3 : [16, 1]xi32
  %5 = expand_dims %0, axis 0 : [1, 16]xi32
  %6 = broadcast %4 : [16, 16]xi32
  %7 = broadcast %5 : [16, 16]xi32
  %8 = add %6, %7 : [16, 16]xi32
  %9 = load a[%8] : [16, 16]xf16
  %10 = load b[%8] : [16, 16]xf16
  %11 = const 0.0 : f32
  %12 = splat %11 : [16, 16]xf32
  {a_op}
  {b_op}
  %13 = dot %14, %15, %12 : [16, 16]xf32
  store c[%8], %13
}}"
        );
        let a = random_ints(1, DType::F16, 256, -4, 4);
        let b = random_ints(2, DType::F16, 256, -4, 4);
        for warps in [1, 4] {
            agree(
                &text,
                [1, 1, 1],
                warps,
                &[
                    HostBuffer::from_bytes(DType::F16, &a.to_bytes()).unwrap(),
                    HostBuffer::from_bytes(DType::F16, &b.to_bytes()).unwrap(),
                    HostBuffer::zeros(DType::F32, 256),
                ],
                &[],
            );
        }
    }
}

/// Float `rem` is fmod: a zero remainder has the dividend's sign (-2 % 1 = -0), which SPIR-V's
/// OpFRem leaves to the driver.
#[test]
fn float_rem_zeros_keep_the_dividend_sign() {
    for dtype in ["f32", "f16", "bf16"] {
        let text = format!(
            "program r(x: buffer<{dtype}, read>, y: buffer<{dtype}, read>, z: buffer<{dtype}, write>) grid 1 {{
  %0 = arange 0, 16 : [16]xi32
  %1 = load x[%0] : [16]x{dtype}
  %2 = load y[%0] : [16]x{dtype}
  %3 = rem %1, %2 : [16]x{dtype}
  store z[%0], %3
}}"
        );
        let d = DType::from_name(dtype).unwrap();
        let x = [-2.0, -0.0, 0.0, 2.0, -4.5, 4.5, -3.0, -1.0, -7.25, 6.0, -6.0, -0.0, 5.0, -5.0, -9.0, 1.0];
        let y = [1.0, 3.0, -3.0, -1.0, 1.5, -1.5, -3.0, 0.5, 2.0, 2.0, -2.0, -1.0, 7.0, 7.0, 4.5, f64::INFINITY];
        let bufs = [HostBuffer::from_f64(d, &x), HostBuffer::from_f64(d, &y), HostBuffer::zeros(d, 16)];
        agree_where(&text, [1, 1, 1], 1, &bufs, &[], |dev| dtype != "bf16" || !dev.name().contains("llvmpipe"));
    }
}

/// Eight values of a signed integer dtype: its minimum and the one above, -1, 0, 1, its maximum,
/// -5 and 7.
fn signed_extremes(d: DType) -> HostBuffer {
    let bits = 8 * d.size_bytes() as i32;
    let (min, max) = (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1) - 1.0);
    let x = HostBuffer::from_f64(d, &[min, min + 1.0, -1.0, 0.0, 1.0, max, -5.0, 7.0]);
    if d == DType::I64 {
        // f64 holds neither end of i64 exactly: write the bits.
        x.store_bits(0, i64::MIN as u64);
        x.store_bits(1, (i64::MIN + 1) as u64);
        x.store_bits(5, i64::MAX as u64);
    }
    x
}

/// `abs` and `neg` of the most negative integer wrap to itself (the IR's semantics), and that
/// value keeps its sign when compared, widened and converted: NVIDIA's compilers took abs as
/// non-negative and a narrow negation as in range.
#[test]
fn abs_and_neg_of_the_most_negative_integer_stay_negative() {
    for dtype in ["i8", "i16", "i32", "i64"] {
        let text = format!(
            "program m(x: buffer<{dtype}, read>, a: buffer<i64, write>, n: buffer<i64, write>, s: buffer<i32, write>, f: buffer<f32, write>, b: buffer<f16, write>, q: buffer<{dtype}, write>) grid 1 {{
  %0 = arange 0, 8 : [8]xi32
  %1 = load x[%0] : [8]x{dtype}
  %2 = abs %1 : [8]x{dtype}
  %3 = neg %1 : [8]x{dtype}
  %4 = cast %2 : [8]xi64
  store a[%0], %4
  %5 = cast %3 : [8]xi64
  store n[%0], %5
  %6 = const 0 : {dtype}
  %7 = splat %6 : [8]x{dtype}
  %8 = cmp lt %2, %7 : [8]xi1
  %9 = cmp lt %3, %7 : [8]xi1
  %10 = cast %8 : [8]xi32
  %11 = cast %9 : [8]xi32
  %12 = add %10, %11 : [8]xi32
  store s[%0], %12
  %13 = cast %2 : [8]xf32
  store f[%0], %13
  %14 = cast %3 : [8]xf16
  store b[%0], %14
  %15 = const 3 : {dtype}
  %16 = splat %15 : [8]x{dtype}
  %17 = div %2, %16 : [8]x{dtype}
  store q[%0], %17
}}"
        );
        let d = DType::from_name(dtype).unwrap();
        let x = signed_extremes(d);
        let outs = [
            HostBuffer::zeros(DType::I64, 8),
            HostBuffer::zeros(DType::I64, 8),
            HostBuffer::zeros(DType::I32, 8),
            HostBuffer::zeros(DType::F32, 8),
            HostBuffer::zeros(DType::F16, 8),
            HostBuffer::zeros(d, 8),
        ];
        let mut bufs = vec![x];
        bufs.extend(outs);
        agree(&text, [1, 1, 1], 1, &bufs, &[]);
    }
}

/// The same for `abs` and negation as users write them, `x < 0 ? 0 - x : x` and `0 - x`: LLVM
/// makes `llvm.abs` and narrow `sub 0, x` of them, which NVPTX selected as `abs.sN` /
/// `neg.s16` and ptxas then took as non-negative or in range (seen in its SASS for i16: the
/// sign extension after the abs dropped, the compare folded).
#[test]
fn user_written_abs_and_neg_of_the_most_negative_integer_stay_negative() {
    for dtype in ["i8", "i16", "i32", "i64"] {
        let text = format!(
            "program u(x: buffer<{dtype}, read>, a: buffer<i64, write>, n: buffer<i64, write>, s: buffer<i32, write>, f: buffer<f32, write>) grid 1 {{
  %0 = arange 0, 8 : [8]xi32
  %1 = load x[%0] : [8]x{dtype}
  %2 = const 0 : {dtype}
  %3 = splat %2 : [8]x{dtype}
  %4 = cmp lt %1, %3 : [8]xi1
  %5 = sub %3, %1 : [8]x{dtype}
  %6 = select %4, %5, %1 : [8]x{dtype}
  %7 = cast %6 : [8]xi64
  store a[%0], %7
  %8 = cast %5 : [8]xi64
  store n[%0], %8
  %9 = cmp lt %6, %3 : [8]xi1
  %10 = cmp lt %5, %3 : [8]xi1
  %11 = cast %9 : [8]xi32
  %12 = cast %10 : [8]xi32
  %13 = add %11, %12 : [8]xi32
  store s[%0], %13
  %14 = const 1.5 : f32
  %15 = splat %14 : [8]xf32
  %16 = cast %6 : [8]xf32
  %17 = select %9, %15, %16 : [8]xf32
  store f[%0], %17
}}"
        );
        let x = signed_extremes(DType::from_name(dtype).unwrap());
        let bufs = vec![
            x,
            HostBuffer::zeros(DType::I64, 8),
            HostBuffer::zeros(DType::I64, 8),
            HostBuffer::zeros(DType::I32, 8),
            HostBuffer::zeros(DType::F32, 8),
        ];
        agree(&text, [1, 1, 1], 1, &bufs, &[]);
    }
}

/// Reductions of 8- and 16-bit values across lanes and warps order them as signed numbers after
/// their trip through 32-bit shuffles: NVIDIA's driver compared the registers as it found them
/// (a `reduce min` of i16 gave -32766 for -32768).
#[test]
fn narrow_reductions_order_signed_values() {
    for dtype in ["i8", "i16"] {
        let text = format!(
            "program r(x: buffer<{dtype}, read>, lo: buffer<{dtype}, write>, hi: buffer<{dtype}, write>) grid 1 {{
  %0 = arange 0, 64 : [64]xi32
  %1 = load x[%0] : [64]x{dtype}
  %2 = neg %1 : [64]x{dtype}
  %3 = reduce min %2, axis 0 : {dtype}
  %4 = reduce max %2, axis 0 : {dtype}
  %5 = const 0 : i32
  store lo[%5], %3
  store hi[%5], %4
}}"
        );
        let d = DType::from_name(dtype).unwrap();
        let min = if dtype == "i8" { -128 } else { -32768 };
        for seed in 0..3 {
            let x = random_ints(seed, d, 64, min + 1, -min);
            // -MIN is MIN: the smallest value after the negation, wherever it sits.
            x.store_bits(7 + 13 * seed as usize, min as u64);
            agree(&text, [1, 1, 1], 2, &[x, HostBuffer::zeros(d, 1), HostBuffer::zeros(d, 1)], &[]);
        }
    }
}

/// f32 -> bf16 rounds to nearest even, ties both ways, overflow to infinity, signed zeros,
/// infinities and NaNs, stored packed in pairs (16-byte stores), one at a time (a strided
/// store) and widened back to f32. Subnormals only where the device keeps f32 subnormals; bf16
/// shares f32's exponent range, so only they round to bf16 subnormals.
#[test]
fn f32_to_bf16_rounds_to_nearest_even() {
    let text = "program c(x: buffer<f32, read>, y: buffer<bf16, write>, z: buffer<bf16, write>, w: buffer<f32, write>) grid 1 {
  %0 = arange 0, 64 : [64]xi32
  %1 = load x[%0] : [64]xf32
  %2 = cast %1 : [64]xbf16
  store y[%0], %2
  %3 = const 3 : i32
  %4 = splat %3 : [64]xi32
  %5 = mul %0, %4 : [64]xi32
  store z[%5], %2
  %6 = cast %2 : [64]xf32
  store w[%0], %6
}";
    let ties: [u32; 16] = [
        0x3f80_8000, // 1 + 2^-8: a tie, rounds down to the even 1.0
        0x3f81_8000, // a tie above an odd bf16: rounds up
        0x3f80_8001, // just above a tie: up
        0x3f80_7fff, // just below a tie: down
        0x7f7f_ffff, // f32's largest: rounds to infinity
        0x7f7f_7fff, // stays finite
        0x4b7f_ffff, // rounds up across a power of two
        0x3eaa_aaab, // 1/3
        0x0080_0000, // smallest normal, exact
        0x0000_0000,
        0x8000_0000,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0x7fff_ffff, // a NaN whose rounding would carry into the sign
        0xff80_0001, // a signalling NaN
    ];
    let subnormals: [u32; 6] = [0x0000_8000, 0x0001_8000, 0x0001_0000, 0x007f_ffff, 0x8000_8001, 0x0000_0001];
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    for with_subnormals in [false, true] {
        let mut bits: Vec<u32> = Vec::new();
        for &t in &ties {
            bits.push(t);
            bits.push(t ^ 0x8000_0000);
        }
        if with_subnormals {
            bits.extend(subnormals.iter().flat_map(|&s| [s, s ^ 0x8000_0000]));
        }
        // Random normal values, every low half a rounding case.
        while bits.len() < 64 {
            let b: u32 = rng.gen_range(0x0080_0000..0x7f80_0000) | if rng.gen_bool(0.5) { 0x8000_0000 } else { 0 };
            bits.push(b);
        }
        let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        let x = HostBuffer::from_bytes(DType::F32, &bytes).unwrap();
        let outs = [x, HostBuffer::zeros(DType::BF16, 64), HostBuffer::zeros(DType::BF16, 192), HostBuffer::zeros(DType::F32, 64)];
        agree_where(text, [1, 1, 1], 1, &outs, &[], |dev| {
            !with_subnormals || matches!(dev, Device::Emulator(_)) || dev.target().is_some_and(|t| t.f32_denorm_preserve)
        });
    }
}
