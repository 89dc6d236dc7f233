//! Every approximate math op against its exact value in f64, on every device reachable here (the
//! interpreter, the emulator, and lavapipe or any Vulkan GPU through the raw Vulkan runtime and
//! wgpu), each element held to the bound of `tilekit_core::precision` for that device's backend;
//! the PTX and AMDGCN of each op built and checked offline. Inputs are random and include tiny,
//! large, negative and subnormal arguments, zeros, infinities and NaN.
//!
//! `cargo test --release --test accuracy -- --nocapture` prints the measured maximum errors (the
//! table in docs/semantics.md).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilekit::check::check;
use tilekit::kernels::{BufferSpec, Cost, Kernel as LibraryKernel, KernelError, Launch, LaunchArg, Plan, Problem, Role};
use tilekit::precision::{bound, ulp, MathBackend, MathOp, SIN_COS_REDUCED};
use tilekit::{Args, Builder, Config, DType, Device, HostBuffer, Kernel, Program, Scalar};

/// Elements per op and dtype.
const N: usize = 1 << 14;
const BLOCK: usize = 1024;

/// `y = op(x)`, or `y = x / d` for division.
fn program(op: MathOp, dtype: DType) -> Program {
    let k = Builder::new(op.name());
    let x = k.input("x", dtype);
    let d = k.input("d", dtype);
    let y = k.output("y", dtype);
    let n = k.scalar("n", DType::I32);
    let offs = k.program_id(0) * BLOCK as i32 + k.arange(0, BLOCK as i64);
    let mask = offs.lt(n);
    let a = k.load_masked(x, offs, mask, 0.0);
    let r = match op {
        MathOp::Exp => a.exp(),
        MathOp::Exp2 => a.exp2(),
        MathOp::Log => a.log(),
        MathOp::Log2 => a.log2(),
        MathOp::Sqrt => a.sqrt(),
        MathOp::Rsqrt => a.rsqrt(),
        MathOp::Div => a / k.load_masked(d, offs, mask, 1.0),
        MathOp::Sin => a.sin(),
        MathOp::Cos => a.cos(),
        MathOp::Tanh => a.tanh(),
        MathOp::Erf => a.erf(),
    };
    k.store_masked(y, offs, r, mask);
    k.finish().expect("a valid program")
}

/// A finite f32 of uniformly random exponent (subnormals included) and random sign.
fn log_uniform(rng: &mut StdRng, lo_exp: i32, hi_exp: i32, signed: bool) -> f64 {
    let m: f64 = rng.gen_range(1.0..2.0);
    let v = (m * 2f64.powi(rng.gen_range(lo_exp..hi_exp))) as f32 as f64;
    if signed && rng.gen_bool(0.5) {
        -v
    } else {
        v
    }
}

/// Operands for `op`: the range that matters for it, the whole f32 range, and specials.
fn operands(op: MathOp, rng: &mut StdRng) -> (Vec<f64>, Vec<f64>) {
    let specials =
        [0.0, -0.0, 1.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e-4, -1e-4, 1e-40, -1e-40, 1e-45, 1.2e-38, 3e38, -3e38, 0.5, 2.0];
    let mut xs: Vec<f64> = specials.to_vec();
    let mut ds: Vec<f64> = specials.iter().map(|_| 1.0).collect();
    while xs.len() < N {
        let pick = rng.gen_range(0..4);
        let x = if pick == 0 {
            log_uniform(rng, -149, 128, true)
        } else {
            match op {
                MathOp::Exp => rng.gen_range(-104.0..89.0),
                MathOp::Exp2 => rng.gen_range(-150.0..128.0),
                MathOp::Log | MathOp::Log2 if pick == 1 => rng.gen_range(0.5..2.0),
                MathOp::Log | MathOp::Log2 | MathOp::Sqrt | MathOp::Rsqrt => log_uniform(rng, -149, 128, false),
                MathOp::Div => log_uniform(rng, -100, 100, true),
                MathOp::Sin | MathOp::Cos => match pick {
                    1 => rng.gen_range(-10.0..10.0),
                    // Near a multiple of pi/2, where the reduction cancels.
                    2 => {
                        let k: i32 = rng.gen_range(-131_072..131_072);
                        (k as f64 * std::f64::consts::FRAC_PI_2) as f32 as f64
                    }
                    _ => rng.gen_range(-SIN_COS_REDUCED..SIN_COS_REDUCED),
                },
                MathOp::Tanh | MathOp::Erf => match pick {
                    1 => rng.gen_range(-6.0..6.0),
                    2 => log_uniform(rng, -40, 1, true),
                    _ => rng.gen_range(-1.0..1.0),
                },
            }
        };
        xs.push(x);
        ds.push(if op == MathOp::Div { log_uniform(rng, -149, 128, true) } else { 1.0 });
    }
    (xs, ds)
}

/// Whether the device may flush subnormals of `dtype` (read as zeros, written as zeros).
fn may_flush(device: &Device, dtype: DType) -> bool {
    match device.target() {
        Some(t) if device.math_backend() == MathBackend::Spirv => {
            if dtype == DType::F16 {
                !t.f16_rte
            } else {
                !t.f32_denorm_preserve
            }
        }
        _ => false,
    }
}

fn is_subnormal(dtype: DType, x: f64) -> bool {
    let min = if dtype == DType::F16 { 2f64.powi(-14) } else { f32::MIN_POSITIVE as f64 };
    x != 0.0 && x.is_finite() && x.abs() < min
}

#[derive(Default)]
struct Stats {
    /// Largest error in ulps of the result's dtype, and its operand.
    ulps: f64,
    at: f64,
    /// Largest absolute error.
    abs: f64,
    /// Largest error as a fraction of the bound there (at most 1).
    of_bound: f64,
    /// Elements a subnormal flush explained.
    flushed: usize,
    failures: Vec<String>,
}

/// Runs `op` in `dtype` on `device` over random operands and holds every element to the bound.
fn measure(op: MathOp, dtype: DType, device: &Device, seed: u64) -> Stats {
    let mut rng = StdRng::seed_from_u64(seed);
    let (xs, ds) = operands(op, &mut rng);
    let (xb, db) = (HostBuffer::from_f64(dtype, &xs), HostBuffer::from_f64(dtype, &ds));
    // The operands as the device reads them, rounded to the dtype.
    let (xs, ds) = (xb.to_f64(), db.to_f64());
    let kernel = Kernel::from_program(program(op, dtype));
    let x = device.upload(&xb).unwrap();
    let d = device.upload(&db).unwrap();
    let y = device.zeros(dtype, N).unwrap();
    let args = Args::new().arg("x", &x).arg("d", &d).arg("y", &y).scalar("n", N as i32);
    kernel
        .launch(device, [N.div_ceil(BLOCK) as u32, 1, 1], &args, &Config::new())
        .unwrap_or_else(|e| panic!("{} {dtype} on {device}: {e}", op.name()));
    let got = y.download().unwrap().to_f64();
    let b = bound(op, device.math_backend(), dtype);
    let flush = may_flush(device, dtype);
    let mut s = Stats::default();
    for ((&x, &d), &g) in xs.iter().zip(&ds).zip(&got) {
        let exact = op.reference(x, d);
        // A device that may flush keeps no precision below the normal range: its subnormal
        // results are not measured, only held to the bound or to a flush.
        let measured = b.holds_at(x, d) && exact.is_finite() && g.is_finite() && !(flush && is_subnormal(dtype, exact));
        if b.allows(dtype, x, d, exact, g) {
            if measured {
                let e = (g - exact).abs();
                let u = e / ulp(dtype, exact);
                if u > s.ulps {
                    s.ulps = u;
                    s.at = x;
                }
                s.abs = s.abs.max(e);
                s.of_bound = s.of_bound.max(e / b.tolerance(dtype, x, exact));
            }
            continue;
        }
        if flush {
            // A subnormal result written as zero, or a subnormal operand read as a zero.
            let zeros = |v: f64| if is_subnormal(dtype, v) { vec![0.0, -0.0] } else { vec![v] };
            let flushed_result = is_subnormal(dtype, exact) && (g == 0.0 || is_subnormal(dtype, g) && g.signum() == exact.signum());
            let explained = flushed_result || zeros(x).iter().any(|&fx| zeros(d).iter().any(|&fd| b.allows(dtype, fx, fd, op.reference(fx, fd), g)));
            if explained {
                s.flushed += 1;
                continue;
            }
        }
        if s.failures.len() < 8 {
            s.failures.push(format!(
                "{}({x:e}{}) = {exact:e}, got {g:e}",
                op.name(),
                if op == MathOp::Div { format!(", {d:e}") } else { String::new() }
            ));
        } else {
            s.failures.push(String::new());
        }
    }
    s
}

fn devices() -> Vec<Device> {
    let mut out = vec![Device::Interpreter, Device::find("emulator").unwrap()];
    let gpus = Device::gpus();
    if gpus.is_empty() {
        if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
            eprintln!("SKIPPED: GPU devices in tests/accuracy.rs (TILEKIT_SKIP_GPU_TESTS=1)");
        } else {
            panic!("no GPU device found: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1");
        }
    }
    out.extend(gpus);
    out
}

/// Every op and dtype on every device, within its backend's bound; the measured maxima printed.
#[test]
fn every_math_op_is_within_its_bound_on_every_device() {
    let mut failures = Vec::new();
    println!("| op | dtype | device | max error (ulp) | at x | max abs error | max error / bound | bound | flushed |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for device in devices() {
        for op in MathOp::ALL {
            for dtype in [DType::F32, DType::F16, DType::BF16] {
                let s = measure(op, dtype, &device, 0xACC ^ op as u64);
                let b = bound(op, device.math_backend(), dtype);
                let stated = format!(
                    "{} ulp{}{}{}",
                    b.ulp,
                    if b.ulp_per_x > 0.0 { format!(" + {}\\|x\\| ulp", b.ulp_per_x) } else { String::new() },
                    if b.abs > 0.0 { format!(" + 2^{}", b.abs.log2()) } else { String::new() },
                    if b.abs_per_x > 0.0 { format!(" + \\|x\\| 2^{}", b.abs_per_x.log2()) } else { String::new() },
                );
                println!(
                    "| {} | {dtype} | {} | {:.2} | {:e} | {:.2e} | {:.2} | {stated} | {} |",
                    op.name(),
                    device.name(),
                    s.ulps,
                    s.at as f32,
                    s.abs,
                    s.of_bound,
                    s.flushed
                );
                if !s.failures.is_empty() {
                    let shown: Vec<&String> = s.failures.iter().filter(|f| !f.is_empty()).collect();
                    failures.push(format!(
                        "{} {dtype} on {}: {} elements beyond the bound, e.g. {shown:?}",
                        op.name(),
                        device.name(),
                        s.failures.len()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `y = tanh(x)` over activations, written as a user writes it: a library-style kernel for the
/// check harness, whose tolerance is the f32 default. GLSL.std.450 `Tanh` (its defining formula,
/// which cancels near 0: lavapipe's `tanh(1e-4)` was off by 1.7e-4 relative) failed it.
struct TanhKernel;

const TANH_BLOCK: usize = 256;

impl LibraryKernel for TanhKernel {
    fn name(&self) -> &'static str {
        "tanh"
    }
    fn description(&self) -> &'static str {
        "elementwise tanh"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32]
    }
    fn shape_doc(&self) -> &'static str {
        "N"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4099], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        vec![Problem::new(&[4099], dtype)]
    }
    fn configs(&self) -> Vec<Config> {
        vec![Config::new()]
    }
    fn build_plan(&self, problem: &Problem, _config: &Config, _target: &tilekit::gpu::Target) -> Result<Plan, KernelError> {
        let n = problem.dim(0, "N")?;
        let k = Builder::new("tanh");
        let x = k.input("x", DType::F32);
        let y = k.output("y", DType::F32);
        let len = k.scalar("n", DType::I32);
        let offs = k.program_id(0) * TANH_BLOCK as i32 + k.arange(0, TANH_BLOCK as i64);
        let mask = offs.lt(len);
        let a = k.load_masked(x, offs, mask, 0.0);
        k.store_masked(y, offs, a.tanh(), mask);
        let program = k.finish()?;
        let buf = |name: &str, role| BufferSpec { name: name.into(), dtype: DType::F32, len: n, role };
        Ok(Plan {
            buffers: vec![buf("x", Role::Input), buf("y", Role::Output { zeroed: false })],
            launches: vec![Launch {
                program,
                grid: [n.div_ceil(TANH_BLOCK) as u32, 1, 1],
                args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Scalar(Scalar::Int(n as i64))],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        // Small activations, 2^-17 to 2^-10, where a driver's tanh (its defining formula)
        // cancels; larger ones would dominate the norm-wise error and hide it.
        let n = problem.shape[0];
        let xs: Vec<f64> = (0..n).map(|_| log_uniform(rng, -17, -10, true)).collect();
        vec![HostBuffer::from_f64(DType::F32, &xs)]
    }
    fn reference(&self, _problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        vec![inputs[0].iter().map(|&x| x.tanh()).collect()]
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let n = problem.shape[0] as u64;
        Cost { bytes: 8 * n, flops: 10 * n }
    }
}

/// A correct f32 kernel using `tanh` passes the check harness on every device, lavapipe included.
#[test]
fn a_correct_tanh_kernel_passes_the_check_harness() {
    let problem = TanhKernel.default_problem();
    for device in devices() {
        let report = check(&TanhKernel, &problem, &Config::new(), &device, 7).unwrap_or_else(|e| panic!("{device}: {e}"));
        assert!(report.pass(), "{device}: {:?}", report.outputs);
    }
}

/// The PTX of every op assembles with ptxas for sm_80 and sm_90; `sin` and `cos` are libdevice's
/// (full range reduction), never `sin.approx`, and `exp` is `ex2.approx` as the table says.
#[cfg(feature = "ptx")]
#[test]
fn every_math_op_assembles_to_ptx() {
    use tilekit::gpu::lower::LowerOptions;
    use tilekit::gpu::Target;
    use tilekit_ptx::{compile, Arch};
    for op in MathOp::ALL {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            for (target, arch) in [(Target::cuda_sm80(), Arch::Sm80), (Target::cuda_sm90(), Arch::Sm90)] {
                let mut c =
                    compile(&program(op, dtype), &target, &LowerOptions::new(4), arch).unwrap_or_else(|e| panic!("{} {dtype}: {e}", op.name()));
                let ptx = c.kernel.ptx.clone();
                assert!(!ptx.contains("sin.approx") && !ptx.contains("cos.approx"), "{} {dtype}: approximate sine in\n{ptx}", op.name());
                if op == MathOp::Exp {
                    assert!(ptx.contains("ex2.approx"), "{dtype}: exp without ex2.approx");
                }
                c.kernel.assemble().unwrap_or_else(|e| panic!("{} {dtype} on {arch}: {e}", op.name()));
            }
        }
    }
}

/// The AMDGCN code object of every op links and disassembles for gfx90a, gfx942 and gfx1100;
/// `sin` and `cos` are tilekit's own sequence, not `v_sin_f32` / `v_cos_f32`.
#[cfg(feature = "amdgcn")]
#[test]
fn every_math_op_builds_for_amdgcn() {
    use tilekit::gpu::lower::LowerOptions;
    use tilekit_amdgcn::{compile, Arch};
    for op in MathOp::ALL {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            for arch in Arch::ALL {
                let c = compile(&program(op, dtype), &arch.target(), &LowerOptions::new(4), arch)
                    .unwrap_or_else(|e| panic!("{} {dtype} on {arch}: {e}", op.name()));
                let d = c.kernel.disassemble().unwrap_or_else(|e| panic!("{} {dtype} on {arch}: {e}", op.name()));
                assert!(d.contains("s_endpgm"), "{} {dtype} on {arch}: no s_endpgm", op.name());
                assert!(!d.contains("v_sin_f32") && !d.contains("v_cos_f32"), "{} {dtype} on {arch}: hardware sine", op.name());
            }
        }
    }
}
