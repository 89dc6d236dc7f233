//! Wall time of the interpreter on three library kernels: matmul 256x256x256, softmax 1024x1024
//! and vector_add 2^20, all f32, each in its default configuration.
//!
//! `cargo bench --bench interp [-- NAME...]` checks each kernel once against its reference (the
//! warm-up), then times at least 10 runs of the launches alone, prints a table and writes
//! `bench/results/interp-<hostname>.json` with the samples and the machine they came from.
//! `TILEKIT_BENCH_RUNS=N` asks for more runs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use tilekit::check::check;
use tilekit::kernels::{self, Kernel, Problem, Role};
use tilekit::{DType, Device, HostBuffer};

/// Fewest timed runs per kernel.
const MIN_RUNS: usize = 10;
/// Fast kernels keep running until this much time is spent, for a steadier median.
const MIN_TOTAL: Duration = Duration::from_secs(1);
/// Most timed runs per kernel.
const MAX_RUNS: usize = 200;
const SEED: u64 = 0xBE7C;

/// The cases: kernel name, shape, dtype.
const CASES: &[(&str, &[usize], DType)] =
    &[("matmul", &[256, 256, 256], DType::F32), ("softmax", &[1024, 1024], DType::F32), ("vector_add", &[1 << 20], DType::F32)];

#[derive(Serialize)]
struct Host {
    name: String,
    cpu: String,
    cores: usize,
}

#[derive(Serialize)]
struct Source {
    commit: String,
    /// Tracked files differ from the commit.
    dirty: bool,
}

#[derive(Serialize, Default)]
struct CaseResult {
    kernel: String,
    problem: String,
    config: String,
    /// `ok`, `missing` (not in the library), `fail` (wrong result; timed all the same) or `error`.
    status: String,
    message: Option<String>,
    /// Largest relative error of the outputs in the warm-up check.
    max_rel_err: Option<f64>,
    runs: usize,
    samples_s: Vec<f64>,
    median_s: Option<f64>,
    min_s: Option<f64>,
    max_s: Option<f64>,
    bytes: u64,
    flops: u64,
    gb_per_s: Option<f64>,
    gflop_per_s: Option<f64>,
}

#[derive(Serialize)]
struct Report {
    schema: &'static str,
    bench: &'static str,
    date: String,
    host: Host,
    tilekit: Source,
    device: String,
    min_runs: usize,
    results: Vec<CaseResult>,
}

fn main() -> ExitCode {
    // cargo passes `--bench`; other arguments select kernels by name.
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted_runs = std::env::var("TILEKIT_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(MIN_RUNS).max(MIN_RUNS);
    let device = Device::Interpreter;

    let mut results = Vec::new();
    for &(name, shape, dtype) in CASES {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let problem = Problem::new(shape, dtype);
        let r = match kernels::find(name) {
            None => CaseResult {
                kernel: name.into(),
                problem: problem.to_string(),
                status: "missing".into(),
                message: Some(format!(
                    "kernel `{name}` is not in the library (it has: {})",
                    kernels::all().iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
                )),
                ..Default::default()
            },
            Some(kernel) => bench(kernel.as_ref(), &problem, &device, wanted_runs),
        };
        eprintln!("{:<12} {}", r.kernel, r.message.as_deref().unwrap_or(&r.status));
        results.push(r);
    }

    let report = Report {
        schema: "tilekit.bench.interp/1",
        bench: "interp",
        date: utc_now(),
        host: Host { name: hostname(), cpu: cpu_model(), cores: std::thread::available_parallelism().map_or(1, |n| n.get()) },
        tilekit: git_source(),
        device: device.name(),
        min_runs: wanted_runs,
        results,
    };
    print_table(&report);

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/results");
    let path: PathBuf = dir.join(format!("interp-{}.json", file_safe(&report.host.name)));
    let written = fs::create_dir_all(&dir).and_then(|_| fs::write(&path, serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"));
    match written {
        Ok(()) => println!("\nwrote {}", path.display()),
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if report.results.iter().any(|r| r.status == "fail" || r.status == "error") {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn bench(kernel: &dyn Kernel, problem: &Problem, device: &Device, wanted_runs: usize) -> CaseResult {
    let config = kernel.configs().first().cloned().unwrap_or_default();
    let cost = kernel.cost(problem);
    let mut r = CaseResult {
        kernel: kernel.name().into(),
        problem: problem.to_string(),
        config: config.to_string(),
        status: "ok".into(),
        bytes: cost.bytes,
        flops: cost.flops,
        ..Default::default()
    };

    // Warm-up: one full check, so a timing is never reported for a wrong kernel unnoticed.
    match check(kernel, problem, &config, device, SEED) {
        Ok(report) => {
            r.max_rel_err = report.outputs.iter().map(|o| o.rel_err).reduce(f64::max);
            if !report.pass() {
                r.status = "fail".into();
                r.message = Some(format!(
                    "wrong result: {}",
                    report
                        .outputs
                        .iter()
                        .filter(|o| !o.pass)
                        .map(|o| format!("`{}` rel err {:.2e} > {:.1e}", o.name, o.rel_err, o.tolerance))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Err(e) => {
            r.status = "error".into();
            r.message = Some(e.to_string());
            return r;
        }
    }

    let plan = match kernel.plan(problem, &config) {
        Ok(p) => p,
        Err(e) => {
            r.status = "error".into();
            r.message = Some(e.to_string());
            return r;
        }
    };
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut inputs = kernel.inputs(problem, &mut rng).into_iter();
    let buffers: Vec<HostBuffer> = plan
        .buffers
        .iter()
        .map(|spec| match spec.role {
            Role::Input => inputs.next().unwrap_or_else(|| HostBuffer::zeros(spec.dtype, spec.len)),
            _ => HostBuffer::zeros(spec.dtype, spec.len),
        })
        .collect();

    let start = Instant::now();
    while r.samples_s.len() < MAX_RUNS && (r.samples_s.len() < wanted_runs || start.elapsed() < MIN_TOTAL) {
        match device.run_plan(&plan, &buffers, &config) {
            Ok(t) => r.samples_s.push(t.as_secs_f64()),
            Err(e) => {
                r.status = "error".into();
                r.message = Some(e.to_string());
                return r;
            }
        }
    }
    r.runs = r.samples_s.len();
    let mut sorted = r.samples_s.clone();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
    r.median_s = Some(median);
    r.min_s = sorted.first().copied();
    r.max_s = sorted.last().copied();
    r.gb_per_s = Some(cost.bytes as f64 / median / 1e9);
    r.gflop_per_s = Some(cost.flops as f64 / median / 1e9);
    r
}

fn print_table(report: &Report) {
    println!(
        "interpreter on {} ({}, {} cores), tilekit {}{}, {}",
        report.host.name,
        report.host.cpu,
        report.host.cores,
        report.tilekit.commit.get(..12).unwrap_or(&report.tilekit.commit),
        if report.tilekit.dirty { " (modified)" } else { "" },
        report.date
    );
    let headers = ["KERNEL", "PROBLEM", "CONFIG", "RUNS", "MEDIAN", "MIN", "MAX", "GB/s", "GFLOP/s", "STATUS"];
    let ms = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{:.3} ms", s * 1e3));
    let rate = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.3}"));
    let rows: Vec<[String; 10]> = report
        .results
        .iter()
        .map(|r| {
            [
                r.kernel.clone(),
                r.problem.clone(),
                if r.config.is_empty() { "-".into() } else { r.config.clone() },
                r.runs.to_string(),
                ms(r.median_s),
                ms(r.min_s),
                ms(r.max_s),
                rate(r.gb_per_s),
                rate(r.gflop_per_s),
                r.status.clone(),
            ]
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join("  ").trim_end().to_string();
    println!("{}", line(&headers.map(String::from)));
    for row in &rows {
        println!("{}", line(row));
    }
    for r in report.results.iter().filter(|r| r.status != "ok") {
        if let Some(m) = &r.message {
            println!("{}: {m}", r.kernel);
        }
    }
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| fs::read_to_string("/etc/hostname").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn cpu_model() -> String {
    let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "model name" | "Model" | "cpu model" | "Hardware").then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn git_source() -> Source {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    Source {
        commit: git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into()),
        dirty: git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty()),
    }
}

/// A host name reduced to characters every file system accepts.
fn file_safe(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect()
}

/// `2026-05-01T12:34:56Z`, from the system clock.
fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}
