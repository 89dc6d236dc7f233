//! `tilekit report` on results built by hand, whose efficiencies and PP are known: the tables,
//! the 0-on-unsupported rule, platform sets, the p3 CSV and the charts.

use std::collections::BTreeMap;

use tilekit_cli::bench::report::{render, ReportOptions};
use tilekit_cli::bench::schema::{
    Backend, Ceilings, CheckRecord, Entry, L2Policy, OutputRecord, Platform, ProblemRecord, Protocol, Results, RunInfo, StaticResources, Status,
};
use tilekit_cli::bench::stats::summarize;

fn platform(id: &str, hardware: &str, copy: f64) -> Platform {
    Platform {
        id: id.into(),
        hardware: hardware.into(),
        host: "h".into(),
        machine: "h-0a1b2c3d".into(),
        backend: if id.starts_with("wgpu") { Backend::Wgpu } else { Backend::Vulkan },
        executes: true,
        device_type: "discrete".into(),
        vendor_id: None,
        device_id: None,
        driver: None,
        driver_info: None,
        api_version: None,
        extensions: Vec::new(),
        timer: "device timestamps".into(),
        ceilings: Ceilings { copy_gbps: Some(copy), copy_source: Some("copy".into()), ..Default::default() },
        run: "h-1".into(),
    }
}

fn entry(platform: &str, implementation: &str, config: &str, default_config: bool, median: Option<f64>, status: Status) -> Entry {
    let samples: Vec<f64> = median.map(|m| vec![m * 0.9, m, m * 1.1]).unwrap_or_default();
    Entry {
        run: "h-1".into(),
        platform: platform.into(),
        kernel: "vector_add".into(),
        implementation: implementation.into(),
        problem: ProblemRecord { shape: vec![1 << 20], dtype: "f32".into(), opts: BTreeMap::new() },
        problem_text: "1048576 f32".into(),
        config: config.into(),
        default_config,
        kernel_hash: None,
        bytes: 12 << 20,
        flops: 1 << 20,
        status,
        message: (status != Status::Ok).then(|| "an output failed its tolerance".into()),
        check: Some(CheckRecord {
            outputs: vec![OutputRecord {
                name: "out".into(),
                rel_err: if status == Status::Wrong { 0.5 } else { 0.0 },
                tolerance: 1e-5,
                non_finite: 0,
                pass: status != Status::Wrong,
            }],
        }),
        compile_s: Some(1e-3),
        first_run_s: Some(1e-3),
        summary: summarize(&samples),
        samples_s: samples,
        derived: None,
        static_resources: None,
        tuned_from: None,
        lowering: Vec::new(),
    }
}

/// Three platforms on two GPUs. On A, tilekit's second configuration (8 µs) beats its default
/// (10 µs). On B (reached through Vulkan and wgpu), the WGSL baseline takes 10 µs and tilekit
/// 20 µs with its default. C gives a wrong answer.
fn results() -> Results {
    let mut r = Results::new();
    r.runs.push(RunInfo {
        id: "h-1".into(),
        host: "h".into(),
        machine: "h-0a1b2c3d".into(),
        cpu: "a processor".into(),
        started_unix: 1_767_225_600,
        tilekit_version: "0.1.0".into(),
        tilekit_commit: "0123456789abcdef".into(),
        suite: "test".into(),
        command: "tilekit bench".into(),
        protocol: Protocol {
            warmup: 1,
            min_runs: 3,
            min_time_s: 0.0,
            max_runs: 3,
            l2: L2Policy::Flush { bytes: 1 << 28 },
            seed: 0,
            max_check_flops: 1e12,
        },
    });
    r.platforms =
        vec![platform("vulkan:A", "A", 2000.0), platform("vulkan:B", "B", 1000.0), platform("wgpu:B", "B", 1000.0), platform("vulkan:C", "C", 100.0)];
    r.entries = vec![
        entry("vulkan:A", "tilekit", "BLOCK=1024", true, Some(10e-6), Status::Ok),
        entry("vulkan:A", "tilekit", "BLOCK=256", false, Some(8e-6), Status::Ok),
        entry("vulkan:B", "tilekit", "BLOCK=1024", true, Some(20e-6), Status::Ok),
        entry("wgpu:B", "tilekit", "BLOCK=1024", true, Some(40e-6), Status::Ok),
        entry("wgpu:B", "wgsl", "shaders/vector_add.wgsl", true, Some(10e-6), Status::Ok),
        entry("vulkan:C", "tilekit", "BLOCK=1024", true, None, Status::Wrong),
    ];
    r.derive();
    r
}

fn pp_row(markdown: &str) -> Vec<String> {
    let line = markdown.lines().find(|l| l.starts_with("| vector_add | 1 of 1 |")).expect("a PP row for vector_add");
    line.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect()
}

#[test]
fn pp_over_a_set_with_an_unsupported_platform_is_zero() {
    let out = render(&results(), &ReportOptions::default()).unwrap();
    let row = pp_row(&out.markdown);
    // C is in the set and gave a wrong answer: every PP is 0.
    assert_eq!(row[2..], ["0.00", "0.00", "0.00", "0.00", "0.00"], "{row:?}");
    assert!(out.markdown.contains("| vulkan:C | vector_add | 1048576 f32 | tilekit BLOCK=1024 | wrong | 5.00e-1 |"), "{}", out.markdown);
}

#[test]
fn pp_over_a_named_set_checked_by_hand() {
    let o = ReportOptions { platforms: vec!["vulkan:A".into(), "vulkan:B".into()], set_name: Some("two GPUs".into()) };
    let out = render(&results(), &o).unwrap();
    let row = pp_row(&out.markdown);
    // Application efficiency, tuned: A 8/8 = 1, B 10/20 = 0.5 -> 2 / (1 + 2) = 0.67.
    assert_eq!(row[2], "0.67");
    // Model-tuned: of each platform's two timed configurations the model times one, so the
    // figure lies between the same-configuration and the tuned one.
    assert!(["0.62", "0.67"].contains(&row[3].as_str()), "{row:?}");
    // Same configuration everywhere: A 8/10 = 0.8, B 0.5 -> 2 / (1.25 + 2) = 0.62.
    assert_eq!(row[4], "0.62");
    // Architectural, tuned: 12 MiB in 8 µs = 1572.9 GB/s of 2000; in 20 µs 629.1 of 1000.
    let (a, b) = (12.0 * 1048576.0 / 8e-6 / 1e9 / 2000.0, 12.0 * 1048576.0 / 20e-6 / 1e9 / 1000.0);
    assert_eq!(row[5], format!("{:.2}", 2.0 / (1.0 / a + 1.0 / b)));
    assert!(out.markdown.contains("two GPUs"));
    // The tuning section: per platform and problem, default, model-tuned and exhaustive, and
    // how many configurations the model would have timed.
    assert!(out.markdown.contains("## Tuning: same configuration, model-tuned, exhaustively tuned"), "{}", out.markdown);
    assert!(out.markdown.contains("| vulkan:A | vector_add | 1048576 f32 |") && out.markdown.contains("| 1 of 2 |"), "{}", out.markdown);
    // A prefix names a platform; over one platform PP is its efficiency: on B the WGSL
    // baseline (10 µs) is the best, tilekit through wgpu takes 40 µs.
    let o = ReportOptions { platforms: vec!["wgpu".into()], set_name: None };
    assert_eq!(pp_row(&render(&results(), &o).unwrap().markdown)[2], "0.25");
    let e = render(&results(), &ReportOptions { platforms: vec!["cuda:X".into()], set_name: None }).err().unwrap().to_string();
    assert!(e.contains("cuda:X") && e.contains("vulkan:A, vulkan:B, wgpu:B, vulkan:C"), "{e}");
}

#[test]
fn csv_has_the_p3_columns_and_zero_for_unsupported() {
    let out = render(&results(), &ReportOptions::default()).unwrap();
    let mut lines = out.csv.lines();
    assert_eq!(lines.next(), Some("problem,platform,application,fom,date,arch eff,app eff"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 7), "{}", out.csv);
    let find = |platform: &str, app: &str| {
        rows.iter().find(|r| r[1] == platform && r[2] == app).unwrap_or_else(|| panic!("{platform} {app}:\n{}", out.csv)).clone()
    };
    let a = find("vulkan:A", "tilekit-tuned");
    assert_eq!((a[0], a[4], a[6]), ("vector_add 1048576 f32", "2026-01-01", "1.000000"));
    assert_eq!(a[3].parse::<f64>().unwrap(), 8e-6);
    assert_eq!(find("vulkan:A", "tilekit-same-config")[6], "0.800000");
    assert_eq!(find("wgpu:B", "wgsl")[6], "1.000000");
    assert_eq!(find("wgpu:B", "tilekit-tuned")[6], "0.250000");
    let c = find("vulkan:C", "tilekit-tuned");
    assert_eq!((c[3], c[5], c[6]), ("", "0", "0"));
}

#[test]
fn charts_are_drawn_and_embedded() {
    let out = render(&results(), &ReportOptions::default()).unwrap();
    let names: Vec<&str> = out.charts.iter().map(|c| c.0.as_str()).collect();
    for want in ["cascade-app-tuned.svg", "kernel-vector-add.svg", "roofline-vulkan-a.svg"] {
        assert!(names.contains(&want), "{names:?}");
    }
    for (name, svg) in &out.charts {
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{name}");
        // Axes, a series and its points, not just a frame.
        assert!(svg.matches("<line").count() > 10 && svg.contains("<circle"), "{name} draws nothing:\n{svg}");
        assert!(out.html.contains(svg.as_str()), "{name} is not inlined in the HTML");
        assert!(out.markdown.contains(&format!("(charts/{name})")), "{name} is not linked from the Markdown");
    }
    // The HTML is self-contained: no external resources.
    assert!(!out.html.contains("src=\"http") && !out.html.contains("<link") && !out.html.contains("<script"));
}

#[test]
fn compile_only_targets_are_listed_not_timed() {
    let mut r = results();
    let mut amd = platform("amdgcn:gfx942", "gfx942", 0.0);
    amd.backend = Backend::Amdgcn;
    amd.executes = false;
    amd.ceilings = Ceilings::default();
    r.platforms.push(amd);
    let mut e = entry("amdgcn:gfx942", "tilekit", "BLOCK=1024", true, None, Status::CompiledNotRun);
    e.message = None;
    e.check = None;
    e.static_resources =
        Some(StaticResources { registers: Some(24), shared_bytes: Some(0), spills: Some(0), occupancy: Some(8.0), note: Some("wave64".into()) });
    r.entries.push(e);
    r.derive();
    let out = render(&r, &ReportOptions { platforms: vec!["vulkan:A".into(), "vulkan:B".into()], set_name: None }).unwrap();
    assert!(out.markdown.contains("## Compiled, not run"));
    assert!(out.markdown.contains("| amdgcn:gfx942 | vector_add | 1048576 f32 | BLOCK=1024 | 24 | 0 | 0 | 8.0 | wave64 |"), "{}", out.markdown);
    // It is no platform of the PP set and has no timed cells.
    assert_eq!(pp_row(&out.markdown)[2], "0.67");
    assert!(out.markdown.contains("| amdgcn:gfx942 | amdgcn | discrete |"));
    assert!(!out.csv.contains("amdgcn"));
    // By default the set holds only platforms that run.
    let all = render(&r, &ReportOptions::default()).unwrap();
    assert!(!all.markdown.contains("`amdgcn:gfx942`"));
}

#[test]
fn empty_results_are_refused() {
    let e = render(&Results::new(), &ReportOptions::default()).err().unwrap().to_string();
    assert!(e.contains("no entries"), "{e}");
}

/// A ceiling measured low (a busy CPU while the copy ran): an entry faster than it allows gets
/// no architectural efficiency, is flagged, never clamped, and PP arch says n/a.
#[test]
fn an_efficiency_above_the_measured_ceiling_is_flagged_not_shown() {
    let mut r = results();
    // 12 MiB in 8 µs is 1573 GB/s: A's copy ceiling of 1000 GB/s is too low for it.
    r.platforms[0].ceilings.copy_gbps = Some(1000.0);
    r.derive();
    let above = r.entries[1].derived.as_ref().unwrap().efficiency_ceiling.unwrap();
    assert!(above > 1.0, "{above}");
    let o = ReportOptions { platforms: vec!["vulkan:A".into(), "vulkan:B".into()], set_name: None };
    let out = render(&r, &o).unwrap();
    // The PP row: app efficiencies as before, architectural ones unknown.
    let row = pp_row(&out.markdown);
    assert_eq!((row[2].as_str(), &row[4..]), ("0.67", &["0.62", "n/a", "n/a"].map(String::from)[..]), "{row:?}");
    assert!(["0.62", "0.67"].contains(&row[3].as_str()), "{row:?}");
    // No cell shows an architectural efficiency above 100 %.
    for cell in out.markdown.split(" · arch ").skip(1) {
        let value = cell.split([' ', '|']).next().unwrap();
        if let Some(p) = value.strip_suffix('%') {
            assert!(p.parse::<f64>().unwrap() <= 100.0, "{value}");
        }
    }
    assert!(out.markdown.contains("arch above its ceiling"), "{}", out.markdown);
    // The Ceilings section says how ceilings are taken and lists the flagged entry.
    assert!(out.markdown.contains("## Ceilings") && out.markdown.contains("How the ceilings are taken"), "{}", out.markdown);
    assert!(
        out.markdown.contains(&format!("| vulkan:A | vector_add | 1048576 f32 | tilekit BLOCK=256 | 1.57 TB/s | {above:.2}x |")),
        "{}",
        out.markdown
    );
    // p3.csv leaves arch eff empty there rather than writing 1.
    let line = out.csv.lines().find(|l| l.contains("vulkan:A,tilekit-tuned")).unwrap();
    assert_eq!(line.split(',').nth(5), Some(""), "{line}");
    // Without such entries the section says so (the fixture's WGSL baseline on B beats B's copy
    // ceiling of 1000 GB/s too).
    let mut r = results();
    for p in &mut r.platforms {
        p.ceilings.copy_gbps = Some(1e5);
    }
    r.derive();
    let ok = render(&r, &o).unwrap();
    assert!(ok.markdown.contains("No entry is faster than its platform's measured ceilings."));
}
