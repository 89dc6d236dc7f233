//! `tilekit bench` and `tilekit report` as a person runs them: a small real run on the
//! interpreter, its results file and report, and one-line messages for bad input.

use std::process::{Command, Output};

use tilekit_cli::bench::schema::{Results, Status};

fn tilekit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tilekit")).args(args).output().expect("the tilekit binary runs")
}

/// A fresh directory of this process for test `tag`, and the results file inside it.
fn results_file(tag: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    let path = dir.join("r.json").to_str().unwrap().to_string();
    (dir, path)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn bad_input(args: &[&str], needles: &[&str]) {
    let o = tilekit(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "tilekit {args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "tilekit {args:?}: `{n}` not in {err}");
    }
    assert!(!err.contains("panicked") && !err.contains("internal error"), "{err}");
}

#[test]
fn bad_bench_and_report_arguments_are_named() {
    bad_input(&["bench", "--suite", "nonesuch"], &["unknown suite `nonesuch`", "default, quick"]);
    bad_input(&["bench", "--suite", "quick", "--kernel", "histogram"], &["suite `quick` has no kernel `histogram`", "vector_add"]);
    bad_input(&["bench", "--device", "nonesuch"], &["no device called `nonesuch`"]);
    bad_input(&["bench", "--min-runs", "0"], &["--min-runs"]);
    bad_input(&["bench", "--problem", "softmax"], &["--problem `softmax`", "KERNEL:SHAPE"]);
    bad_input(&["bench", "--problem", "nonesuch:64"], &["no kernel `nonesuch`", "layernorm"]);
    bad_input(&["bench", "--problem", "softmax:64x0q"], &["64x0q"]);
    bad_input(&["bench", "--problem", "softmax:64x64:i8"], &["softmax does not take i8", "f32"]);
    bad_input(&["bench", "--problem", "attention:1x1x17x16:f16:casual=1"], &["no option `casual`", "causal"]);
    bad_input(&["bench", "--problem", "attention:1x1x17x16:causal=maybe"], &["causal", "maybe"]);
    bad_input(&["bench", "--problem", "attention:1x1x17x16:f16:causal"], &["option `causal` is not KEY=VALUE"]);
    bad_input(&["bench", "--problem", "attention:1x1x17x16:f16:causal=1:x"], &["KERNEL:SHAPE[:DTYPE]:KEY=VALUE"]);
    bad_input(&["bench", "--problem", "softmax:8x8", "--config", "BLOK=64"], &["BLOK", "num_warps"]);
    bad_input(&["bench", "--problem", "softmax:8x8", "--config", "num_warps"], &["num_warps"]);
    bad_input(&["report", "/nonexistent/r.json", "-o", "/tmp/x"], &["/nonexistent/r.json"]);
    let dir = std::env::temp_dir().join(format!("tilekit-bench-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("old.json");
    std::fs::write(&f, r#"{"schema_version": 0, "runs": []}"#).unwrap();
    bad_input(&["report", f.to_str().unwrap(), "-o", dir.to_str().unwrap()], &["schema version 0", "reads versions 1 to 2"]);
}

#[test]
fn problems_too_costly_to_check_are_skipped_never_timed() {
    let (dir, path) = results_file("tilekit-bench-cli-skip");
    let r = path.as_str();
    let o =
        tilekit(&["bench", "--suite", "quick", "--device", "interp", "--kernel", "softmax", "--max-check-gflop", "0", "--min-runs", "1", "-o", r]);
    // Skipping by design is no failure.
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let res = Results::read(r).unwrap();
    let sm: Vec<_> = res.entries.iter().filter(|e| e.kernel == "softmax").collect();
    assert!(!sm.is_empty());
    for e in sm {
        assert_eq!(e.status, Status::Skipped);
        assert!(e.samples_s.is_empty() && e.check.is_none());
        assert!(e.message.as_deref().unwrap_or("").contains("--max-check-gflop"), "{e:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_small_run_on_the_interpreter_writes_results_and_a_report() {
    let dir = std::env::temp_dir().join(format!("tilekit-bench-cli-{}", std::process::id()));
    let results = dir.join("r.json");
    let report = dir.join("report");
    let (r, rep) = (results.to_str().unwrap(), report.to_str().unwrap());
    let o = tilekit(&[
        "bench",
        "--suite",
        "quick",
        "--device",
        "interpreter",
        "--kernel",
        "vector_add",
        "--min-runs",
        "3",
        "--min-time-ms",
        "0",
        "--warmup",
        "1",
        "-o",
        r,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    assert!(text(&o.stdout).contains("wrote"), "{}", text(&o.stdout));
    let res = Results::read(r).unwrap();
    assert_eq!(res.platforms.len(), 1);
    assert_eq!(res.platforms[0].timer, "wall clock");
    assert!(res.platforms[0].ceilings.copy_gbps.is_some_and(|g| g > 0.0));
    let va: Vec<_> = res.entries.iter().filter(|e| e.kernel == "vector_add").collect();
    // Three problems, two configurations each (the quick suite's cap).
    assert_eq!(va.len(), 6);
    for e in &va {
        assert_eq!(e.status, Status::Ok, "{e:?}");
        assert_eq!(e.samples_s.len(), 3);
        assert!(e.check.as_ref().unwrap().outputs.iter().all(|o| o.pass && o.rel_err <= o.tolerance));
        assert_eq!(e.kernel_hash.as_ref().map(String::len), Some(64));
        assert!(e.derived.as_ref().is_some_and(|d| d.gbps > 0.0 && d.efficiency_best.is_some()));
    }
    let o = tilekit(&["report", r, "-o", rep]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for f in ["report.md", "index.html", "p3.csv", "results.json", "charts/cascade-app-tuned.svg", "charts/kernel-vector-add.svg"] {
        assert!(report.join(f).metadata().is_ok_and(|m| m.len() > 100), "{f} missing or empty");
    }
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("| vector_add | 3 of 3 | 1.00 |"), "{md}");
    // The merged results the report wrote read back as a results file.
    assert_eq!(Results::read(report.join("results.json").to_str().unwrap()).unwrap().entries.len(), res.entries.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn named_problems_replace_the_suite() {
    let (dir, path) = results_file("tilekit-bench-cli-problem");
    let r = path.as_str();
    let o = tilekit(&[
        "bench",
        "--problem",
        "layernorm:3x97:f32",
        "--problem",
        "vector_add:1031",
        "--problem",
        "attention:1x1x17x16:f32:causal=1",
        "--device",
        "interp",
        "--no-tune",
        "--min-runs",
        "2",
        "--min-time-ms",
        "0",
        "--warmup",
        "1",
        "-o",
        r,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let res = Results::read(r).unwrap();
    let mut timed: Vec<(String, String)> = res
        .entries
        .iter()
        .filter(|e| e.status == Status::Ok && e.implementation == "tilekit" && e.kernel != "copy")
        .map(|e| (e.kernel.clone(), e.problem_text.clone()))
        .collect();
    timed.sort();
    let want = [("attention", "1x1x17x16 f32 causal=1"), ("layernorm", "3x97 f32"), ("vector_add", "1031 f32")];
    assert_eq!(timed, want.map(|(k, p)| (k.to_string(), p.to_string())));
    // Memory-bound problems are also compared with a copy of their own bytes, timed in the run.
    for e in res.entries.iter().filter(|e| e.kernel == "layernorm" || e.kernel == "vector_add") {
        let copy = res.entries.iter().find(|c| c.kernel == "copy" && c.bytes == e.bytes.div_ceil(8) * 8 && c.status == Status::Ok);
        let copy_s = copy.and_then(|c| c.median()).unwrap_or_else(|| panic!("no copy of {} bytes ({})", e.bytes, e.kernel));
        let ratio = e.derived.as_ref().and_then(|d| d.of_copy_same_bytes).expect("of_copy_same_bytes");
        assert!((ratio - copy_s / e.median().unwrap()).abs() < 1e-12, "{}: {ratio}", e.kernel);
    }
    let out = text(&o.stdout) + &text(&o.stderr);
    assert!(out.contains("of a copy of its bytes"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn named_configurations_replace_the_kernels_list() {
    let (dir, path) = results_file("tilekit-bench-cli-config");
    let r = path.as_str();
    let o = tilekit(&[
        "bench",
        "--problem",
        "layernorm:5x1031:f16",
        "--device",
        "interp",
        "--config",
        "BLOCK=2048,num_warps=2",
        "--config",
        "BLOCK=1024",
        "--min-runs",
        "2",
        "--min-time-ms",
        "0",
        "--warmup",
        "1",
        "-o",
        r,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let res = Results::read(r).unwrap();
    // The second is the default configuration (BLOCK=1024 on 4 warps) and is marked so.
    let timed: Vec<(String, bool)> =
        res.entries.iter().filter(|e| e.status == Status::Ok && e.kernel == "layernorm").map(|e| (e.config.clone(), e.default_config)).collect();
    assert_eq!(timed, [("BLOCK=2048,num_warps=2".to_string(), false), ("BLOCK=1024,num_warps=4".to_string(), true)]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn untuned_runs_take_the_first_configuration_that_fits() {
    // Softmax's default (4 warps) does not fit 9001 columns; without tuning, 8 warps are timed.
    let (dir, path) = results_file("tilekit-bench-cli-fit");
    let r = path.as_str();
    let o = tilekit(&[
        "bench",
        "--problem",
        "softmax:3x9001",
        "--device",
        "interp",
        "--no-tune",
        "--min-runs",
        "1",
        "--min-time-ms",
        "0",
        "--warmup",
        "1",
        "-o",
        r,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let res = Results::read(r).unwrap();
    let timed: Vec<(String, Status)> = res.entries.iter().filter(|e| e.kernel == "softmax").map(|e| (e.config.clone(), e.status)).collect();
    assert_eq!(timed, [("num_warps=8".to_string(), Status::Ok)]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--amdgcn ARCH` adds a compile-only platform: every case compiled for it, its code object's
/// static resources recorded, nothing timed, and the run is no failure for it.
#[cfg(any(feature = "amdgcn", feature = "amdgcn-static"))]
#[test]
fn amdgcn_targets_are_compiled_not_run() {
    bad_input(&["bench", "--amdgcn", "gfx803"], &["unknown --amdgcn `gfx803`", "gfx942"]);
    let (dir, path) = results_file("tilekit-bench-cli-amdgcn");
    let r = path.as_str();
    let o = tilekit(&[
        "bench",
        "--suite",
        "quick",
        "--device",
        "interp",
        "--kernel",
        "vector_add",
        "--no-tune",
        "--min-runs",
        "1",
        "--amdgcn",
        "gfx1100",
        "-o",
        r,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("compiled, not run"), "{}", text(&o.stdout));
    let res = Results::read(r).unwrap();
    let p = res.platforms.iter().find(|p| p.id == "amdgcn:gfx1100").expect("an amdgcn:gfx1100 platform");
    assert!(!p.executes);
    let amd: Vec<_> = res.entries.iter().filter(|e| e.platform == "amdgcn:gfx1100").collect();
    assert!(!amd.is_empty());
    for e in amd {
        assert_eq!(e.status, Status::CompiledNotRun, "{e:?}");
        assert!(e.samples_s.is_empty() && e.check.is_none());
        let s = e.static_resources.as_ref().expect("static resources");
        assert!(s.registers.unwrap() > 0 && s.spills == Some(0) && s.occupancy.unwrap() >= 1.0, "{s:?}");
        assert!(s.note.as_deref().unwrap().contains("wave32"), "{s:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(not(any(feature = "amdgcn", feature = "amdgcn-static")))]
#[test]
fn amdgcn_bench_needs_the_feature() {
    bad_input(&["bench", "--amdgcn", "gfx942"], &["`amdgcn` feature"]);
}

/// An output that cannot take the results fails at once: nothing is measured, nothing printed,
/// and no existing file is replaced.
#[test]
fn a_bad_output_fails_before_the_run() {
    let dir = std::env::temp_dir().join(format!("tilekit-bench-cli-output-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let existing = dir.join("old.json");
    std::fs::write(&existing, "committed results").unwrap();
    let d = dir.to_str().unwrap();
    let run = |out: &str| {
        let start = std::time::Instant::now();
        let o = tilekit(&["bench", "--suite", "quick", "--device", "interpreter", "-o", out]);
        (o, start.elapsed())
    };
    for (out, needles) in [
        (d.to_string(), vec!["is a directory", "results.json"]),
        (existing.to_str().unwrap().to_string(), vec!["exists", "never replaces"]),
        ("/proc/tilekit-no-such-dir/r.json".to_string(), vec!["cannot create", "/proc/tilekit-no-such-dir"]),
    ] {
        let (o, _) = run(&out);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "-o {out}: {err}");
        for n in needles {
            assert!(err.contains(n), "-o {out}: `{n}` not in {err}");
        }
        // Not one case ran: the progress lines of a run go to stdout.
        assert!(text(&o.stdout).is_empty(), "-o {out} ran before failing:\n{}", text(&o.stdout));
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "committed results");
    // Nothing but the old file is left behind (no probe, no partial results).
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, [std::ffi::OsString::from("old.json")]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench --no-tune` times the default configuration and, where the tuning cache holds another
/// one for the problem and device, that one too, marked with its cache file; `--untuned` times
/// the default only.
#[test]
fn untuned_bench_also_times_the_tuned_configuration() {
    let (dir, path) = results_file("tilekit-bench-cli-cache");
    let cache = dir.join("cache");
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_tilekit")).args(args).env("TILEKIT_CACHE_DIR", &cache).output().expect("the tilekit binary runs");
        assert_eq!(o.status.code(), Some(0), "tilekit {args:?}\n{}\n{}", text(&o.stdout), text(&o.stderr));
        (text(&o.stdout), text(&o.stderr))
    };
    let quick = ["--min-runs", "1", "--min-time-ms", "0", "--warmup", "0"];
    let mut tune = vec!["tune", "vector_add", "--shape", "1001", "--device", "interp", "--json"];
    tune.extend(quick);
    let tuned: serde_json::Value = serde_json::from_str(&run(&tune).0).unwrap();
    // Whichever configuration won on this machine, the cache is made to hold one that is not
    // the default, so the test does not depend on timings.
    let kernel = tilekit::kernels::find("vector_add").unwrap();
    let default = kernel.configs()[0].to_string();
    let other = kernel.configs().iter().map(|c| c.to_string()).find(|c| *c != default).unwrap();
    let file = tuned["cache_file"].as_str().unwrap().to_string();
    let mut entry: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    entry["config"] = serde_json::Value::String(other.clone());
    std::fs::write(&file, entry.to_string()).unwrap();

    let mut bench = vec!["bench", "--problem", "vector_add:1000", "--device", "interp", "--no-tune", "--no-baselines", "-o", path.as_str()];
    bench.extend(quick);
    let (_, progress) = run(&bench);
    assert!(progress.contains("also the tuned configuration") && progress.contains(&file), "{progress}");
    let res = Results::read(&path).unwrap();
    let timed: Vec<(String, bool, Option<String>)> = res
        .entries
        .iter()
        .filter(|e| e.kernel == "vector_add" && e.status == Status::Ok)
        .map(|e| (e.config.clone(), e.default_config, e.tuned_from.clone()))
        .collect();
    assert_eq!(timed, [(default.clone(), true, None), (other, false, Some(file))]);

    let second = dir.join("untuned.json").to_str().unwrap().to_string();
    let at = bench.iter().position(|a| *a == path.as_str()).unwrap();
    bench[at] = second.as_str();
    bench.push("--untuned");
    run(&bench);
    let res = Results::read(&second).unwrap();
    let timed: Vec<&str> = res.entries.iter().filter(|e| e.kernel == "vector_add").map(|e| e.config.as_str()).collect();
    assert_eq!(timed, [default.as_str()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each entry records what the lowering chose on the platform's target: matmul's `dot` on
/// mma.sync for sm_80, on the FMA loop for lavapipe; nothing for the interpreter.
#[test]
fn entries_record_the_dot_instruction_of_their_target() {
    let (dir, path) = results_file("tilekit-bench-cli-lowering");
    let o = tilekit(&[
        "bench",
        "--problem",
        "matmul:64x64x64:f16",
        "--device",
        "emulator:sm_80",
        "--device",
        "emulator:lavapipe",
        "--device",
        "interp",
        "--no-tune",
        "--no-baselines",
        "--min-runs",
        "1",
        "--min-time-ms",
        "0",
        "--warmup",
        "0",
        "-o",
        path.as_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let res = Results::read(&path).unwrap();
    let dots = |platform: &str| -> Vec<String> {
        let e = res.entries.iter().find(|e| e.kernel == "matmul" && e.platform.contains(platform)).unwrap_or_else(|| panic!("no {platform} entry"));
        assert_eq!(e.status, Status::Ok, "{platform}: {:?}", e.message);
        e.lowering.iter().flat_map(|l| l.dots.clone()).collect()
    };
    assert_eq!(dots("sm_80"), ["mma.sync m16n8k16"]);
    assert_eq!(dots("llvmpipe"), ["fma"]);
    assert!(dots("interp").is_empty());
    // The report says it per platform.
    let report = dir.join("report");
    let o = tilekit(&["report", path.as_str(), "-o", report.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    let section = md.split("## How `dot` ran").nth(1).unwrap_or_else(|| panic!("no dot section:\n{md}"));
    let rows: Vec<&str> = section.lines().filter(|l| l.contains("| matmul |")).collect();
    assert_eq!(rows.len(), 2, "{section}");
    assert!(rows.iter().any(|r| r.contains("sm_80") && r.contains("mma.sync m16n8k16")), "{section}");
    assert!(rows.iter().any(|r| r.contains("llvmpipe") && r.contains("| fma |")), "{section}");
    let _ = std::fs::remove_dir_all(&dir);
}
