//! The results format: the committed JSON Schema matches the types, files round-trip, and files
//! from two machines merge.

use std::collections::BTreeMap;

use tilekit_cli::bench::schema::{self, Backend, Ceilings, Entry, L2Policy, Platform, ProblemRecord, Protocol, Results, RunInfo, Status};
use tilekit_cli::bench::stats::summarize;

const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/schema/results.schema.json");

#[test]
fn committed_schema_matches_the_types() {
    let now = schema::json_schema();
    if std::env::var_os("TILEKIT_BLESS").is_some() {
        std::fs::create_dir_all(std::path::Path::new(SCHEMA_PATH).parent().unwrap()).unwrap();
        std::fs::write(SCHEMA_PATH, &now).unwrap();
    }
    let committed = std::fs::read_to_string(SCHEMA_PATH).expect("bench/schema/results.schema.json (TILEKIT_BLESS=1 writes it)");
    assert!(
        committed == now,
        "the results types changed: regenerate the schema with TILEKIT_BLESS=1 and bump SCHEMA_VERSION if old files would be misread"
    );
    assert!(now.contains("\"schema_version\""));
}

fn run(host: &str, t: u64) -> RunInfo {
    RunInfo {
        id: format!("{host}-{t}"),
        host: host.into(),
        machine: host.into(),
        cpu: "a processor".into(),
        started_unix: t,
        tilekit_version: "0.1.0".into(),
        tilekit_commit: "abc".into(),
        suite: "quick".into(),
        command: "tilekit bench".into(),
        protocol: Protocol {
            warmup: 5,
            min_runs: 30,
            min_time_s: 0.1,
            max_runs: 1000,
            l2: L2Policy::Flush { bytes: 64 << 20 },
            seed: 1,
            max_check_flops: 1e11,
        },
    }
}

fn platform(id: &str, hardware: &str, host: &str, backend: Backend, run: &str, copy: Option<f64>) -> Platform {
    Platform {
        id: id.into(),
        hardware: hardware.into(),
        host: host.into(),
        machine: host.into(),
        backend,
        executes: true,
        device_type: "discrete".into(),
        vendor_id: Some(0x10de),
        device_id: None,
        driver: Some("NVIDIA".into()),
        driver_info: None,
        api_version: Some("1.4.312".into()),
        extensions: vec!["VK_EXT_shader_atomic_float".into()],
        timer: "device timestamps".into(),
        ceilings: Ceilings { copy_gbps: copy, copy_source: copy.map(|_| "copy kernel".into()), ..Default::default() },
        run: run.into(),
    }
}

fn entry(run: &str, platform: &str, implementation: &str, config: &str, samples: &[f64]) -> Entry {
    let status = if samples.is_empty() { Status::Wrong } else { Status::Ok };
    Entry {
        run: run.into(),
        platform: platform.into(),
        kernel: "vector_add".into(),
        implementation: implementation.into(),
        problem: ProblemRecord { shape: vec![1 << 20], dtype: "f32".into(), opts: BTreeMap::new() },
        problem_text: "1048576 f32".into(),
        config: config.into(),
        default_config: config == "BLOCK=1024",
        kernel_hash: Some("00".into()),
        bytes: 12 << 20,
        flops: 1 << 20,
        status,
        message: None,
        check: None,
        compile_s: Some(0.01),
        first_run_s: Some(0.02),
        samples_s: samples.to_vec(),
        summary: summarize(samples),
        derived: None,
        static_resources: None,
        tuned_from: None,
        lowering: Vec::new(),
    }
}

fn machine_a() -> Results {
    let mut r = Results::new();
    r.runs.push(run("a", 100));
    r.platforms.push(platform("vulkan:GPU", "GPU", "a", Backend::Vulkan, "a-100", Some(1000.0)));
    r.platforms.push(platform("wgpu:GPU", "GPU", "a", Backend::Wgpu, "a-100", Some(900.0)));
    r.entries.push(entry("a-100", "vulkan:GPU", "tilekit", "BLOCK=1024", &[2e-5, 2e-5, 4e-5]));
    r.entries.push(entry("a-100", "wgpu:GPU", "wgsl", "hand-written", &[1e-5]));
    r.entries.push(entry("a-100", "wgpu:GPU", "tilekit", "BLOCK=1024", &[]));
    r.derive();
    r
}

fn machine_b() -> Results {
    let mut r = Results::new();
    r.runs.push(run("b", 200));
    // The same device name on another host, and a device only b has.
    r.platforms.push(platform("vulkan:GPU", "GPU", "b", Backend::Vulkan, "b-200", Some(500.0)));
    r.platforms.push(platform("vulkan:llvmpipe", "llvmpipe", "b", Backend::Vulkan, "b-200", None));
    r.entries.push(entry("b-200", "vulkan:GPU", "tilekit", "BLOCK=1024", &[5e-5]));
    r.entries.push(entry("b-200", "vulkan:llvmpipe", "tilekit", "BLOCK=1024", &[1e-3]));
    r.derive();
    r
}

#[test]
fn results_round_trip_through_json() {
    let a = machine_a();
    let text = a.to_json();
    let back = Results::from_json("a.json", &text).unwrap();
    assert_eq!(back, a);
    // Derived figures were computed: the wgsl baseline is the best on GPU (1e-5 s), tilekit
    // ran at a median of 2e-5 s, so its efficiency against the best is 0.5.
    let tk = &back.entries[0];
    let d = tk.derived.as_ref().unwrap();
    assert!((d.efficiency_best.unwrap() - 0.5).abs() < 1e-12);
    // 12 MiB in 2e-5 s = 629.1 GB/s against a 1000 GB/s copy.
    assert!((d.gbps - (12u64 << 20) as f64 / 2e-5 / 1e9).abs() < 1e-9);
    assert!((d.efficiency_ceiling.unwrap() - d.gbps / 1000.0).abs() < 1e-12);
    // The ceiling belongs to the hardware: wgpu measured 900 GB/s on the same GPU, but its
    // entries are held to the best copy, 1000 GB/s, measured through Vulkan.
    let wgsl = back.entries[1].derived.as_ref().unwrap();
    assert!((wgsl.efficiency_ceiling.unwrap() - wgsl.gbps / 1000.0).abs() < 1e-12);
    // A wrong answer has no figures.
    assert!(back.entries[2].derived.is_none() && back.entries[2].median().is_none());
}

#[test]
fn bad_files_are_refused_with_the_reason() {
    let mut v: serde_json::Value = serde_json::from_str(&machine_a().to_json()).unwrap();
    v["schema_version"] = serde_json::json!(99);
    let e = Results::from_json("x.json", &v.to_string()).unwrap_err().to_string();
    assert!(e.contains("x.json") && e.contains("99"), "{e}");
    let e = Results::from_json("y.json", "{\"runs\": []}").unwrap_err().to_string();
    assert!(e.contains("schema_version"), "{e}");
    let mut a = machine_a();
    a.entries[0].platform = "vulkan:nowhere".into();
    let e = Results::from_json("z.json", &a.to_json()).unwrap_err().to_string();
    assert!(e.contains("vulkan:nowhere") && e.contains("entry 0"), "{e}");
}

#[test]
fn files_from_two_machines_merge() {
    let m = Results::merge([machine_a(), machine_b()]);
    assert_eq!(m.runs.len(), 2);
    let ids: Vec<&str> = m.platforms.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["vulkan:GPU", "wgpu:GPU", "vulkan:GPU@b", "vulkan:llvmpipe"]);
    assert_eq!(m.entries.len(), 5);
    // b's entry moved to the renamed platform, and its best is its own (another host's GPU
    // does not count as the same platform).
    let b = m.entries.iter().find(|e| e.platform == "vulkan:GPU@b").unwrap();
    assert_eq!(b.derived.as_ref().unwrap().efficiency_best, Some(1.0));
    // The merged value is a valid results file itself.
    let again = Results::from_json("merged.json", &m.to_json()).unwrap();
    assert_eq!(again, m);
    // Merging is idempotent for the same run, and a newer run of the same case replaces it.
    assert_eq!(Results::merge([m.clone(), machine_b()]).entries.len(), 5);
    let mut newer = machine_a();
    newer.runs[0] = run("a", 300);
    for e in &mut newer.entries {
        e.run = "a-300".into();
    }
    newer.entries[0].samples_s = vec![1e-5];
    newer.entries[0].summary = summarize(&newer.entries[0].samples_s);
    let m2 = Results::merge([machine_a(), newer]);
    let tk = m2.entries.iter().find(|e| e.platform == "vulkan:GPU" && e.implementation == "tilekit").unwrap();
    assert_eq!((tk.run.as_str(), tk.median()), ("a-300", Some(1e-5)));
}

/// Two cloud machines both called `vm`, told apart by their machine labels: their same-named
/// GPUs stay two platforms, each with its own ceiling and best implementation.
#[test]
fn same_named_hosts_merge_as_two_machines() {
    let label = |r: &mut Results, machine: &str| {
        r.runs[0].host = "vm".into();
        r.runs[0].machine = machine.into();
        for p in &mut r.platforms {
            p.host = "vm".into();
            p.machine = machine.into();
        }
    };
    let mut a = machine_a();
    label(&mut a, "vm-0a1b2c3d");
    let mut b = machine_b();
    label(&mut b, "vm-99887766");
    let m = Results::merge([a, b]);
    let ids: Vec<&str> = m.platforms.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["vulkan:GPU", "wgpu:GPU", "vulkan:GPU@vm-99887766", "vulkan:llvmpipe"]);
    let b = m.entries.iter().find(|e| e.platform == "vulkan:GPU@vm-99887766").unwrap();
    // Its own copy ceiling (500 GB/s), not the other machine's 1000.
    let d = b.derived.as_ref().unwrap();
    assert!((d.efficiency_ceiling.unwrap() - d.gbps / 500.0).abs() < 1e-12, "{d:?}");
    assert_eq!(d.efficiency_best, Some(1.0));
}

/// A version 1 file (before machine labels) is still read: each run and platform is its host.
#[test]
fn version_1_files_are_read_with_their_host_as_machine() {
    let mut v: serde_json::Value = serde_json::from_str(&machine_a().to_json()).unwrap();
    v["schema_version"] = serde_json::json!(1);
    for r in v["runs"].as_array_mut().unwrap() {
        let o = r.as_object_mut().unwrap();
        o.remove("machine");
        o.remove("cpu");
    }
    for p in v["platforms"].as_array_mut().unwrap() {
        p.as_object_mut().unwrap().remove("machine");
    }
    let r = Results::from_json("v1.json", &v.to_string()).unwrap();
    assert_eq!(r.schema_version, schema::SCHEMA_VERSION);
    assert_eq!(r.runs[0].machine, "a");
    assert!(r.platforms.iter().all(|p| p.machine == "a"));
    // The committed files of version 1 keep reading.
    let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/results/bench-vm-quick.json");
    let c = Results::read(committed).unwrap();
    assert!(c.runs.iter().all(|r| r.machine == r.host), "{:?}", c.runs);
}
