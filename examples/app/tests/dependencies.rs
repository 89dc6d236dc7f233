//! What depending on tilekit costs an application: `cargo tree` of this crate (tilekit without
//! default features, plus `wgpu`) and of tilekit with no runtime at all, offline, normal
//! dependencies only. The command line's, benchmark's and report's crates must not appear, nor
//! a runtime the application did not ask for.

use std::path::Path;
use std::process::Command;

/// The crates of `cargo tree -e normal` for `package` with `flags`, one name per line.
fn tree(package: &str, flags: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let o = Command::new(cargo)
        .args(["tree", "--offline", "-e", "normal", "--prefix", "none", "--format", "{p}", "--manifest-path"])
        .arg(&manifest)
        .args(["-p", package])
        .args(flags)
        .output()
        .expect("cargo runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "cargo tree -p {package} {flags:?} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    out.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
}

// serde_json is not among them: the library's tuning cache (`tilekit::tune`) is JSON.
const TOOLING: [&str; 6] = ["tilekit-cli", "clap", "plotters", "schemars", "indicatif", "sha2"];

#[test]
fn the_application_gets_the_library_and_wgpu_only() {
    let crates = tree("tilekit-example-app", &[]);
    for want in ["tilekit", "tilekit-core", "tilekit-spirv", "wgpu"] {
        assert!(crates.iter().any(|c| c == want), "{want} missing from the tree: {crates:?}");
    }
    for unwanted in TOOLING.iter().chain(&["tilekit-ptx", "tilekit-llvm", "tilekit-amdgcn", "cudarc", "inkwell"]) {
        assert!(!crates.iter().any(|c| c == unwanted), "{unwanted} is in the application's tree: {crates:?}");
    }
}

#[test]
fn the_library_without_runtimes_loads_no_driver_crate() {
    let crates = tree("tilekit", &["--no-default-features"]);
    for unwanted in TOOLING.iter().chain(&["wgpu", "ash", "cudarc"]) {
        assert!(!crates.iter().any(|c| c == unwanted), "{unwanted} is in tilekit's tree without features: {crates:?}");
    }
}
