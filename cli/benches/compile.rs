//! Compile latency: building one configuration of each library kernel (the builder and the
//! verifier), lowering it for a target and emitting SPIR-V, median over repeated runs.
//!
//! `cargo bench --bench compile` prints a table and writes `bench/results/compile-<hostname>.json`.
//! Each launch is compiled as the runtimes compile it: specialized on its scalar arguments that
//! are multiples of 16 (`tilekit::device::launch_options`), as Triton specializes.
//! Pipeline creation in a driver is not included (it is the driver's cost, not tilekit's).
//!
//! With `--features ptx` it also times every configuration of every kernel to PTX text for the
//! H200 target (sm_90a: warpgroup matrix instructions and tensor copies; lowering, LLVM IR,
//! libdevice, O3, NVPTX code generation; not ptxas or the driver's JIT) and writes `bench/results/compile-ptx-<hostname>.json`. The goal is 150 ms each.
//!
//! Kernel names after `--` (`cargo bench --bench compile -- matmul attention`) time only those
//! kernels and write no results file: a partial run must not replace the whole one.

use std::process::Command;
use std::time::Instant;

use serde::Serialize;
use tilekit::device::launch_options;
use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::Target;
use tilekit::kernels;

const RUNS: usize = 21;

#[derive(Serialize)]
struct Row {
    kernel: String,
    problem: String,
    config: String,
    target: String,
    launches: usize,
    spirv_words: usize,
    /// Seconds per run: plan (build + verify) + lower + emit, for every launch of the plan.
    samples: Vec<f64>,
    median_s: f64,
    build_median_s: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The processor compiles ran on (`model name` of /proc/cpuinfo) and how many threads it offers:
/// hosts share names (a VM is often `vm`), and compile latency is the processor's.
fn cpu() -> serde_json::Value {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_default();
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    serde_json::json!({ "model": model, "threads": threads })
}

fn hostname() -> String {
    Command::new("hostname").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

/// The kernels named on the command line (flags such as cargo's `--bench` skipped); empty: all.
fn selected() -> Vec<String> {
    std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect()
}

fn kernels_to_time() -> Vec<Box<dyn kernels::Kernel>> {
    let names = selected();
    kernels::all().into_iter().filter(|k| names.is_empty() || names.iter().any(|n| n == k.name())).collect()
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

fn write_results(path: &str, json: serde_json::Value) {
    if !selected().is_empty() {
        eprintln!("kernels selected: {path} not written");
        return;
    }
    let _ = std::fs::create_dir_all(results_dir());
    match serde_json::to_string_pretty(&json) {
        Ok(j) => match std::fs::write(path, j) {
            Ok(()) => eprintln!("wrote {path}"),
            Err(e) => eprintln!("cannot write {path}: {e}"),
        },
        Err(e) => eprintln!("cannot encode: {e}"),
    }
}

fn main() {
    spirv();
    #[cfg(any(feature = "ptx", feature = "ptx-static"))]
    ptx();
}

#[cfg(any(feature = "ptx", feature = "ptx-static"))]
fn ptx() {
    #[derive(Serialize)]
    struct PtxRow {
        kernel: String,
        problem: String,
        config: String,
        arch: String,
        launches: usize,
        ptx_bytes: usize,
        /// Seconds per run: plan + lower + LLVM IR + O3 + PTX, for every launch of the plan.
        samples: Vec<f64>,
        median_s: f64,
        /// Medians of the stages: emit (lowering and LLVM IR text), parse and link, O3, codegen.
        stage_median_s: [f64; 4],
    }
    const PTX_RUNS: usize = 7;
    let target = Target::h200_cuda();
    let arch = tilekit_ptx::arch_of(&target);
    let mut rows = Vec::new();
    let mut worst: f64 = 0.0;
    println!("\nPTX ({arch}), every configuration of each kernel's default problem");
    println!("{:<16} {:<22} {:<44} {:>9} {:>9} {:>9} {:>9} {:>9}", "KERNEL", "PROBLEM", "CONFIG", "TOTAL", "EMIT", "PARSE", "O3", "CODEGEN");
    for k in kernels_to_time() {
        let problem = k.default_problem();
        for config in k.configs() {
            // A configuration meant for other problems than the default one is no compile time.
            if let Err(e @ kernels::KernelError::Unfit(_)) = k.plan(&problem, &config) {
                println!("{:<16} {:<22} {:<44} skipped: {e}", k.name(), problem.to_string(), config.to_string());
                continue;
            }
            let options = LowerOptions::for_config(&config);
            let mut samples = Vec::new();
            let mut stages: [Vec<f64>; 4] = Default::default();
            let mut bytes = 0;
            let mut launches = 0;
            let mut failed = None;
            for _ in 0..PTX_RUNS {
                let t0 = Instant::now();
                let plan = match k.plan(&problem, &config) {
                    Ok(p) => p,
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                };
                launches = plan.launches.len();
                bytes = 0;
                let mut st = [0.0; 4];
                for l in &plan.launches {
                    match tilekit_ptx::compile(&l.program, &target, &launch_options(&options, l), arch) {
                        Ok(c) => {
                            bytes += c.kernel.ptx.len();
                            for (a, t) in st.iter_mut().zip(c.times) {
                                *a += t.as_secs_f64();
                            }
                        }
                        Err(e) => failed = Some(e.to_string()),
                    }
                }
                samples.push(t0.elapsed().as_secs_f64());
                for (v, t) in stages.iter_mut().zip(st) {
                    v.push(t);
                }
            }
            if let Some(e) = failed {
                println!("{:<16} {:<22} {:<44} failed: {e}", k.name(), problem.to_string(), config.to_string());
                continue;
            }
            let m = median(&mut samples.clone());
            worst = worst.max(m);
            let sm = [0, 1, 2, 3].map(|i| median(&mut stages[i]));
            println!(
                "{:<16} {:<22} {:<44} {:>7.1}ms {:>7.1}ms {:>7.1}ms {:>7.1}ms {:>7.1}ms",
                k.name(),
                problem.to_string(),
                config.to_string(),
                m * 1e3,
                sm[0] * 1e3,
                sm[1] * 1e3,
                sm[2] * 1e3,
                sm[3] * 1e3
            );
            rows.push(PtxRow {
                kernel: k.name().into(),
                problem: problem.to_string(),
                config: config.to_string(),
                arch: arch.to_string(),
                launches,
                ptx_bytes: bytes,
                samples,
                median_s: m,
                stage_median_s: sm,
            });
        }
    }
    println!("slowest configuration: {:.1} ms (goal: 150 ms)", worst * 1e3);
    let host = hostname();
    let path = format!("{}/compile-ptx-{host}.json", results_dir());
    write_results(&path, serde_json::json!({ "schema": 1, "host": host, "cpu": cpu(), "runs": PTX_RUNS, "target": target.name, "rows": rows }));
}

fn spirv() {
    let target = Target::h200_vulkan();
    let mut rows = Vec::new();
    println!("{:<16} {:<26} {:>10} {:>10} {:>8}", "KERNEL", "PROBLEM", "BUILD", "TOTAL", "WORDS");
    for k in kernels_to_time() {
        let problem = k.default_problem();
        let config = &k.configs()[0];
        let options = LowerOptions::for_config(config);
        let mut samples = Vec::with_capacity(RUNS);
        let mut builds = Vec::with_capacity(RUNS);
        let mut words = 0;
        let mut launches = 0;
        let mut failed = None;
        for _ in 0..RUNS {
            let t0 = Instant::now();
            let plan = match k.plan(&problem, config) {
                Ok(p) => p,
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            };
            let t1 = Instant::now();
            launches = plan.launches.len();
            words = 0;
            for l in &plan.launches {
                match tilekit_spirv::compile(&l.program, &target, &launch_options(&options, l)) {
                    Ok(c) => words += c.kernel.words.len(),
                    Err(e) => failed = Some(e.to_string()),
                }
            }
            samples.push(t0.elapsed().as_secs_f64());
            builds.push((t1 - t0).as_secs_f64());
        }
        if let Some(e) = failed {
            println!("{:<16} {:<26} failed: {e}", k.name(), problem.to_string());
            continue;
        }
        let m = median(&mut samples.clone());
        let b = median(&mut builds);
        println!("{:<16} {:<26} {:>8.2}ms {:>8.2}ms {:>8}", k.name(), problem.to_string(), b * 1e3, m * 1e3, words);
        rows.push(Row {
            kernel: k.name().into(),
            problem: problem.to_string(),
            config: config.to_string(),
            target: target.name.clone(),
            launches,
            spirv_words: words,
            samples,
            median_s: m,
            build_median_s: b,
        });
    }
    let host = hostname();
    let path = format!("{}/compile-{host}.json", results_dir());
    write_results(&path, serde_json::json!({ "schema": 1, "host": host, "cpu": cpu(), "runs": RUNS, "rows": rows }));
}
