//! Compile latency: building one configuration of each library kernel (the builder and the
//! verifier), lowering it for a target and emitting SPIR-V, median over repeated runs.
//!
//! `cargo bench --bench compile` prints a table and writes `bench/results/compile-<hostname>.json`.
//! Pipeline creation in a driver is not included (it is the driver's cost, not tilekit's).

use std::process::Command;
use std::time::Instant;

use serde::Serialize;
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

fn main() {
    let target = Target::h200_vulkan();
    let mut rows = Vec::new();
    println!("{:<16} {:<26} {:>10} {:>10} {:>8}", "KERNEL", "PROBLEM", "BUILD", "TOTAL", "WORDS");
    for k in kernels::all() {
        let problem = k.default_problem();
        let config = &k.configs()[0];
        let options = LowerOptions::new(config.num_warps() as u32);
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
                match tilekit_spirv::compile(&l.program, &target, &options) {
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
    let host = Command::new("hostname").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let path = format!("bench/results/compile-{host}.json");
    let _ = std::fs::create_dir_all("bench/results");
    match serde_json::to_string_pretty(&serde_json::json!({ "schema": 1, "host": host, "runs": RUNS, "rows": rows })) {
        Ok(j) => match std::fs::write(&path, j) {
            Ok(()) => eprintln!("wrote {path}"),
            Err(e) => eprintln!("cannot write {path}: {e}"),
        },
        Err(e) => eprintln!("cannot encode: {e}"),
    }
}
