//! `scripts/main.sh`, the README's first command, on a copy of the repository's scripts and
//! committed results: it writes only files of its own run, under bench/local/, leaves every
//! committed file byte-identical (also on a machine whose host name is that of a committed
//! results file, as every cloud VM called `vm` is) and reports over what it can compare.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tilekit_cli::bench::schema::Results;

/// Every file under `dir`, by path relative to it, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// Runs the copy's scripts/main.sh with `hostname` answering `vm` and the test's tilekit binary.
fn main_sh(repo: &Path, fake_bin: &Path) -> std::process::Output {
    let path = format!("{}:{}", fake_bin.display(), std::env::var("PATH").unwrap_or_default());
    Command::new("bash")
        .arg(repo.join("scripts/main.sh"))
        .args(["--suite", "quick", "--device", "interpreter", "--kernel", "vector_add"])
        .args(["--min-runs", "2", "--min-time-ms", "0", "--warmup", "0", "--no-tune"])
        .env("PATH", path)
        .env("TILEKIT_BIN", env!("CARGO_BIN_EXE_tilekit"))
        .env("TILEKIT_NO_INSTALL", "1")
        .env_remove("TILEKIT_MACHINE")
        .env_remove("TILEKIT_RESULTS_DIR")
        .env_remove("TILEKIT_COMPARE")
        .env_remove("TILEKIT_PLATFORMS")
        .output()
        .expect("bash runs")
}

#[test]
fn main_sh_never_writes_over_committed_results() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let repo = std::env::temp_dir().join(format!("tilekit-main-sh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&repo);
    copy_tree(&root.join("scripts"), &repo.join("scripts"));
    copy_tree(&root.join("bench"), &repo.join("bench"));
    let _ = std::fs::remove_dir_all(repo.join("bench/local"));
    // The committed file a run on a host called `vm` used to replace.
    assert!(repo.join("bench/results/bench-vm-quick.json").is_file(), "the committed quick results moved; update this test");
    let fake_bin = repo.join("fake-bin");
    std::fs::create_dir_all(&fake_bin).unwrap();
    let hostname = fake_bin.join("hostname");
    std::fs::write(&hostname, "#!/bin/sh\necho vm\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hostname, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = snapshot(&repo);

    let mut runs = Vec::new();
    for _ in 0..2 {
        let o = main_sh(&repo, &fake_bin);
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "main.sh failed\nstdout:\n{out}\nstderr:\n{err}");
        let after = snapshot(&repo);
        for (path, bytes) in &before {
            assert!(after.get(path) == Some(bytes), "main.sh changed or removed {}", path.display());
        }
        let new: Vec<&PathBuf> = after.keys().filter(|p| !before.contains_key(*p)).collect();
        assert!(new.iter().all(|p| p.starts_with("bench/local")), "main.sh wrote outside bench/local: {new:?}");
        let results: Vec<&PathBuf> =
            new.iter().copied().filter(|p| p.parent() == Some(Path::new("bench/local")) && p.extension().is_some_and(|e| e == "json")).collect();
        runs.push(results.iter().map(|p| p.to_path_buf()).collect::<Vec<_>>());
    }
    // One results file per run, each with a name of its own.
    assert_eq!(runs[0].len(), 1, "{runs:?}");
    assert_eq!(runs[1].len(), 2, "the second run kept the first one's results: {runs:?}");
    let latest = runs[1].iter().find(|p| !runs[0].contains(p)).unwrap();
    let name = latest.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("bench-vm-quick-") && name != "bench-vm-quick.json", "{name}");

    // The run records a machine label that tells it apart from other machines called `vm`.
    let r = Results::read(repo.join(latest).to_str().unwrap()).unwrap();
    assert_eq!(r.runs[0].host, "vm");
    assert!(r.runs[0].machine.starts_with("vm-") && r.runs[0].machine.len() > 3, "{:?}", r.runs[0].machine);
    assert!(r.platforms.iter().all(|p| p.machine == r.runs[0].machine));

    // The report is of this run: its platform set ran the same problems, so PP has a value.
    let stem = name.trim_start_matches("bench-").trim_end_matches(".json");
    let report = std::fs::read_to_string(repo.join("bench/local").join(format!("report-{stem}")).join("report.md")).unwrap();
    let row = report.lines().find(|l| l.starts_with("| vector_add |")).unwrap_or_else(|| panic!("no PP row:\n{report}"));
    let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
    // Application efficiency, tuned and same configuration: numbers, not n/a. (Architectural
    // efficiency may say n/a: a copy ceiling measured on a busy CPU is flagged, not used.)
    assert!(cells[2].parse::<f64>().is_ok() && cells[3].parse::<f64>().is_ok(), "the report's PP turned to n/a: {row}");
    assert!(!report.contains("NVIDIA H200"), "the report merged results it was not asked to: {row}");
    let _ = std::fs::remove_dir_all(&repo);
}

#[test]
fn the_default_results_file_is_run_specific_and_outside_the_committed_set() {
    use tilekit_cli::bench::cmd::default_output;
    let a = default_output("vm", "quick", 1_767_225_600);
    assert_eq!(a, PathBuf::from("bench/local/bench-vm-quick-20260101T000000Z.json"));
    let b = default_output("vm", "quick", 1_767_225_600 + 3_723);
    assert_eq!(b, PathBuf::from("bench/local/bench-vm-quick-20260101T010203Z.json"));
    let committed = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/results"));
    for e in std::fs::read_dir(committed).unwrap() {
        let name = e.unwrap().file_name();
        assert_ne!(a.file_name(), Some(name.as_os_str()));
    }
}

#[test]
fn machine_labels_tell_same_named_hosts_apart() {
    use tilekit_cli::bench::runner::machine_label_of;
    let cpu = "Intel(R) Xeon(R) Platinum 8480+";
    let a = machine_label_of("vm", "0123456789abcdef0123456789abcdef", cpu);
    let b = machine_label_of("vm", "fedcba9876543210fedcba9876543210", cpu);
    assert!(a.starts_with("vm-") && b.starts_with("vm-") && a != b, "{a} {b}");
    assert_eq!(a, machine_label_of("vm", "0123456789abcdef0123456789abcdef", cpu), "a label is stable");
    assert_ne!(a, machine_label_of("vm", "0123456789abcdef0123456789abcdef", "AMD EPYC 9654"));
}
