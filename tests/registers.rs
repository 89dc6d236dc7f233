//! The lowering's register estimate (`tilekit::gpu::registers`, printed by `tilekit ir --gpu`
//! and recorded in results) against what ptxas allocated for the same configurations in the
//! committed H200 results. The estimate counts what a thread's values need at the program's
//! peak; ptxas adds its temporaries and takes more where registers are free, or fewer under an
//! occupancy request. The bounds below are what it reaches today, so that a change that makes
//! it worse fails here. Configurations the lowering now compiles to another kind of kernel than
//! the results record (tensor copies) are left out: their count is of that other kernel.

use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::{decisions, registers, Target};
use tilekit::kernels::{self, Problem};
use tilekit::{Config, DType};

#[test]
fn the_estimate_tracks_ptxas_in_the_committed_h200_results() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    let mut files = vec![root.join("bench-h200.json")];
    for d in std::fs::read_dir(&root).unwrap().flatten() {
        if d.file_name().to_string_lossy().starts_with("h200-") && d.path().is_dir() {
            files.extend(std::fs::read_dir(d.path()).unwrap().flatten().map(|f| f.path()).filter(|p| p.extension().is_some_and(|e| e == "json")));
        }
    }
    files.sort();
    let target = Target::h200_cuda();
    let mut seen = std::collections::HashSet::new();
    // (estimate, ptxas, what) for every distinct configuration run without an occupancy request.
    let mut pairs: Vec<(u32, u32, String)> = Vec::new();
    for f in files {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&f).unwrap()) else { continue };
        let Some(entries) = v["entries"].as_array() else { continue };
        for e in entries {
            let platform = e["platform"].as_str().unwrap_or("");
            if !platform.starts_with("cuda:") || !platform.contains("H200") || e["implementation"] != "tilekit" || e["status"] != "ok" {
                continue;
            }
            let Some(ptxas) = e["static_resources"]["registers"].as_u64() else { continue };
            let Some(k) = kernels::find(e["kernel"].as_str().unwrap()) else { continue };
            let config: Config = e["config"].as_str().unwrap().parse().unwrap();
            if config.get("occupancy").is_ok() {
                continue;
            }
            let shape: Vec<usize> = e["problem"]["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            let mut problem = Problem::new(&shape, DType::from_name(e["problem"]["dtype"].as_str().unwrap()).unwrap());
            for (key, val) in e["problem"]["opts"].as_object().unwrap() {
                problem = problem.with(key, val.as_str().unwrap());
            }
            let what = format!("{} {problem} [{config}]", k.name());
            if !seen.insert(what.clone()) {
                continue;
            }
            let Ok(plan) = k.plan_on(&problem, &config, &target) else { continue };
            let base = LowerOptions::for_config(&config);
            // ptxas counted the kernel of that day: where the lowering now copies tiles with
            // tensor maps and the results recorded none (older results have no such field),
            // the count is of another kernel.
            let tensor_now: usize = plan
                .launches
                .iter()
                .map(|l| decisions(&l.program, &target, &tilekit::device::launch_options(&base, l)).map_or(0, |d| d.tensor_loads))
                .sum();
            let tensor_then: u64 = e["lowering"].as_array().map_or(0, |ls| ls.iter().map(|l| l["tensor_loads"].as_u64().unwrap_or(0)).sum());
            if tensor_now as u64 != tensor_then {
                continue;
            }
            let estimate =
                plan.launches.iter().map(|l| registers(&l.program, &target, &tilekit::device::launch_options(&base, l)).unwrap()).max().unwrap_or(0);
            pairs.push((estimate, ptxas as u32, what));
        }
    }
    let ratios: Vec<f64> = pairs.iter().map(|&(e, p, _)| f64::from(e) / f64::from(p)).collect();
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let large: Vec<&(u32, u32, String)> = pairs.iter().filter(|p| p.1 >= 128).collect();
    let within = large.iter().filter(|&&&(e, p, _)| f64::from(e) >= 0.45 * f64::from(p) && f64::from(e) <= 1.3 * f64::from(p)).count();
    eprintln!(
        "{} configurations; estimate / ptxas median {median:.2}; {within} of {} with 128 or more registers within 0.45x to 1.3x",
        pairs.len(),
        large.len()
    );
    if std::env::var("TILEKIT_REGISTER_DETAIL").is_ok() {
        for (e, p, what) in &pairs {
            eprintln!("  {what}: estimate {e}, ptxas {p}");
        }
    }
    assert!(pairs.len() >= 100, "the committed results hold {} configurations with ptxas's count", pairs.len());
    assert!((0.7..=1.1).contains(&median), "median estimate / ptxas {median:.2}");
    assert_eq!(within, large.len(), "configurations of 128 or more registers estimated outside 0.45x to 1.3x of ptxas");
    // Never past the register file where ptxas fitted the configuration.
    for (e, p, what) in &pairs {
        assert!(*e <= 255 || *p >= 255, "{what}: estimate {e}, ptxas {p}");
    }
}
