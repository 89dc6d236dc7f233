//! Device time of the library's memory-bound kernels on every GPU device (each CUDA device with the
//! `ptx` feature, each Vulkan device
//! through the raw Vulkan runtime and through wgpu), with a copy kernel as the bandwidth ceiling.
//!
//! `cargo bench --bench gpu [-- quick]` checks every case against its reference on the device
//! (a wrong answer is reported, never timed), then times it with device timestamps: 5 warm-up
//! runs and `TILEKIT_BENCH_RUNS` (default 30) timed runs per configuration of the kernel's
//! configuration space, every sample kept. It prints a table of the best configuration per case
//! and writes `bench/results/gpu-<hostname>.json` (or `$TILEKIT_BENCH_OUT`). L2 policy: none;
//! runs go back to back on the same buffers, so problems smaller than the L2 cache measure it.
//! `TILEKIT_BENCH_DEVICE` keeps only devices whose name contains it.

use std::fs;
use std::process::{Command, ExitCode};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tilekit::check::Case as CheckCase;
use tilekit::kernels::{self, Kernel, Problem};
use tilekit::{DType, Device};

const SEED: u64 = 0xB3AC;

/// The cases of the SPIR-V issue: kernel, shape, dtype.
const CASES: &[(&str, &[usize], DType)] = &[
    ("copy", &[1 << 28], DType::F32),
    ("vector_add", &[1 << 20], DType::F32),
    ("vector_add", &[1 << 24], DType::F32),
    ("vector_add", &[1 << 28], DType::F32),
    ("softmax", &[4096, 1024], DType::F32),
    ("softmax", &[4096, 4096], DType::F32),
    ("softmax", &[4096, 12800], DType::F32),
    ("layernorm", &[4096, 1024], DType::F16),
    ("layernorm", &[4096, 8192], DType::F16),
];

#[derive(Serialize)]
struct Sample {
    config: String,
    status: String,
    message: Option<String>,
    max_rel_err: Option<f64>,
    /// Seconds per run, device timestamps.
    samples: Vec<f64>,
    median_s: Option<f64>,
    min_s: Option<f64>,
    p10_s: Option<f64>,
    p90_s: Option<f64>,
    gbps: Option<f64>,
    /// Wall time of compiling (lowering, SPIR-V, pipeline) and the checked first run.
    check_wall_s: f64,
}

#[derive(Serialize)]
struct Case {
    device: String,
    kernel: String,
    problem: String,
    bytes: u64,
    flops: u64,
    best: Option<usize>,
    configs: Vec<Sample>,
}

#[derive(Serialize)]
struct Report {
    schema: u32,
    host: String,
    tilekit_commit: String,
    unix_time: u64,
    l2_policy: &'static str,
    warmup: usize,
    runs: usize,
    cases: Vec<Case>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "quick");
    let runs: usize = std::env::var("TILEKIT_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let warmup = 5;
    let filter = std::env::var("TILEKIT_BENCH_DEVICE").ok();
    let devices: Vec<Device> = Device::gpus().into_iter().filter(|d| filter.as_deref().map_or(true, |f| d.name().contains(f))).collect();
    if devices.is_empty() {
        eprintln!("no GPU device (is a Vulkan driver installed?)");
        return ExitCode::from(2);
    }
    let mut cases = Vec::new();
    let copy = Copy;
    for &(name, shape, dtype) in CASES {
        let shape: Vec<usize> = if quick { shape.iter().map(|&d| d.min(1 << 14)).collect() } else { shape.to_vec() };
        let kernel: Box<dyn Kernel> = if name == "copy" {
            Box::new(copy)
        } else {
            match kernels::find(name) {
                Some(k) => k,
                None => continue,
            }
        };
        let problem = Problem::new(&shape, dtype);
        let cost = kernel.cost(&problem);
        // Inputs and the f64 reference once per problem, shared by every device and configuration.
        let start = Instant::now();
        let check_case = CheckCase::new(kernel.as_ref(), &problem, SEED);
        eprintln!("{name} {problem}: inputs and reference in {:.1} s", start.elapsed().as_secs_f64());
        for device in &devices {
            let mut case = Case {
                device: device.name(),
                kernel: name.into(),
                problem: problem.to_string(),
                bytes: cost.bytes,
                flops: cost.flops,
                best: None,
                configs: Vec::new(),
            };
            for config in kernel.configs() {
                let start = Instant::now();
                let r = check_case.check_and_time(kernel.as_ref(), &config, device, Some((warmup, runs)));
                let check_wall_s = start.elapsed().as_secs_f64();
                let mut s = Sample {
                    config: config.to_string(),
                    status: String::new(),
                    message: None,
                    max_rel_err: None,
                    samples: Vec::new(),
                    median_s: None,
                    min_s: None,
                    p10_s: None,
                    p90_s: None,
                    gbps: None,
                    check_wall_s,
                };
                match r {
                    Ok((report, samples)) => {
                        s.max_rel_err = report.outputs.iter().map(|o| o.rel_err).reduce(f64::max);
                        if !report.pass() {
                            s.status = "wrong".into();
                        } else if let Some(samples) = samples {
                            let mut sorted = samples.clone();
                            sorted.sort_by(f64::total_cmp);
                            let median = percentile(&sorted, 0.5);
                            s.status = "ok".into();
                            s.median_s = Some(median);
                            s.min_s = sorted.first().copied();
                            s.p10_s = Some(percentile(&sorted, 0.1));
                            s.p90_s = Some(percentile(&sorted, 0.9));
                            s.gbps = Some(cost.bytes as f64 / median / 1e9);
                            s.samples = samples;
                        }
                    }
                    Err(e) => {
                        s.status = "error".into();
                        s.message = Some(e.to_string());
                    }
                }
                case.configs.push(s);
            }
            case.best =
                case.configs.iter().enumerate().filter_map(|(i, s)| s.median_s.map(|m| (i, m))).min_by(|a, b| a.1.total_cmp(&b.1)).map(|(i, _)| i);
            match case.best {
                Some(b) => {
                    let s = &case.configs[b];
                    println!(
                        "{:<34} {:<11} {:<18} {:>9.1} us  p10 {:>9.1}  p90 {:>9.1}  {:>7.0} GB/s  [{}]",
                        case.device.chars().take(34).collect::<String>(),
                        case.kernel,
                        case.problem,
                        s.median_s.unwrap_or(0.0) * 1e6,
                        s.p10_s.unwrap_or(0.0) * 1e6,
                        s.p90_s.unwrap_or(0.0) * 1e6,
                        s.gbps.unwrap_or(0.0),
                        s.config
                    );
                }
                None => {
                    let why: Vec<String> =
                        case.configs.iter().map(|s| format!("[{}] {} {}", s.config, s.status, s.message.clone().unwrap_or_default())).collect();
                    println!("{:<34} {:<11} {:<18} FAILED: {}", case.device, case.kernel, case.problem, why.join("; "));
                }
            }
            cases.push(case);
        }
    }
    let host = Command::new("hostname").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let commit = option_env!("TILEKIT_COMMIT").map(str::to_string).unwrap_or_else(|| {
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    });
    let report = Report {
        schema: 1,
        host: host.clone(),
        tilekit_commit: commit,
        unix_time: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        l2_policy: "none: back-to-back runs on the same buffers",
        warmup,
        runs,
        cases,
    };
    let path = std::env::var("TILEKIT_BENCH_OUT").unwrap_or_else(|_| format!("{}/gpu-{host}.json", results_dir()));
    if let Some(dir) = std::path::Path::new(&path).parent() {
        let _ = fs::create_dir_all(dir);
    }
    match serde_json::to_string_pretty(&report).map(|j| fs::write(&path, j)) {
        Ok(Ok(())) => eprintln!("wrote {path}"),
        Ok(Err(e)) => eprintln!("cannot write {path}: {e}"),
        Err(e) => eprintln!("cannot encode the report: {e}"),
    }
    ExitCode::SUCCESS
}

/// `out = x`: the device's copy bandwidth, measured by the same compiler (bytes read + written).
#[derive(Clone, Copy)]
struct Copy;

impl Kernel for Copy {
    fn name(&self) -> &'static str {
        "copy"
    }
    fn description(&self) -> &'static str {
        "out = x, the bandwidth ceiling"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32]
    }
    fn shape_doc(&self) -> &'static str {
        "N"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[1 << 28], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        vec![Problem::new(&[1000], dtype)]
    }
    fn configs(&self) -> Vec<tilekit::Config> {
        [1024, 2048, 4096].iter().map(|&b| tilekit::Config::new().with("BLOCK", b).with("num_warps", 4)).collect()
    }
    fn build_plan(&self, problem: &Problem, config: &tilekit::Config, _target: &tilekit::gpu::Target) -> Result<kernels::Plan, kernels::KernelError> {
        use kernels::*;
        let n = problem.dim(0, "N")?;
        let block = config.block("BLOCK")?;
        let k = tilekit::Builder::new("copy");
        let x = k.input("x", DType::F32);
        let out = k.output("out", DType::F32);
        let nn = k.scalar("n", DType::I32);
        let offs = k.program_id(0) * block as i32 + k.arange(0, block as i64);
        let mask = offs.lt(nn);
        k.store_masked(out, offs, k.load_masked(x, offs, mask, 0.0), mask);
        let program = k.finish()?;
        let spec = |name: &str, role| BufferSpec { name: name.into(), dtype: DType::F32, len: n, role };
        Ok(Plan {
            buffers: vec![spec("x", Role::Input), spec("out", Role::Output { zeroed: false })],
            launches: vec![Launch {
                program,
                grid: [grid_dim(cdiv(n, block))?, 1, 1],
                args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Scalar(tilekit::Scalar::Int(n as i64))],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut rand::rngs::StdRng) -> Vec<tilekit::HostBuffer> {
        vec![kernels::random_buffer(rng, DType::F32, problem.shape[0], -1.0, 1.0)]
    }
    fn reference(&self, _problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        vec![inputs[0].clone()]
    }
    fn cost(&self, problem: &Problem) -> kernels::Cost {
        kernels::Cost { bytes: 8 * problem.shape[0] as u64, flops: 0 }
    }
}

/// The repository's `bench/results`: cargo runs a bench in its package's folder (cli/), while a
/// binary carried to a GPU machine (scripts/gpu-pack.sh) runs from a copy of the repository root.
fn results_dir() -> String {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/results");
    if std::path::Path::new(repo).is_dir() {
        repo.into()
    } else {
        "bench/results".into()
    }
}
