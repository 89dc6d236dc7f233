//! The PTX of every library kernel, for every dtype, test problem and configuration, assembles
//! with ptxas for sm_80 and sm_90 without spilling registers; the PTX of vector add and softmax
//! matches its golden file (`tests/golden/*.ptx`; `TILEKIT_BLESS=1` rewrites them).
//! Any spill fails: the library's configurations are sized for the FMA `dot` (see matmul's and
//! attention's `configs`), and shared-memory addresses are 32-bit (`-nvptx-short-ptr`).
//!
//! Needs the `ptx` feature, and ptxas (the PyPI wheel nvidia-cuda-nvcc-cu12, `TILEKIT_PTXAS`, or
//! a CUDA toolkit) plus libdevice from the same place.
#![cfg(any(feature = "ptx", feature = "ptx-static"))]

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;

use rayon::prelude::*;
use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::Target;
use tilekit::kernels::{self, Problem};
use tilekit::{Config, DType};
use tilekit_ptx::{compile, Arch};

#[test]
fn every_library_kernel_assembles_for_sm80_and_sm90_without_spills() {
    // Distinct programs only: many test problems of a kernel share one program.
    // TILEKIT_PTX_FILTER=text keeps the jobs whose description contains it.
    let filter = std::env::var("TILEKIT_PTX_FILTER").ok();
    let mut jobs = Vec::new();
    let mut seen = HashSet::new();
    for k in kernels::all() {
        for &dtype in k.dtypes() {
            for problem in k.test_problems(dtype) {
                for config in k.configs() {
                    let Ok(plan) = k.plan(&problem, &config) else { continue };
                    for launch in plan.launches {
                        let key = (tilekit::text::print(&launch.program), LowerOptions::for_config(&config));
                        let what = format!("{} {problem} [{config}]", k.name());
                        if filter.as_deref().is_some_and(|f| !what.contains(f)) {
                            continue;
                        }
                        if seen.insert(key) {
                            jobs.push((format!("{} {problem} [{config}]", k.name()), launch.program, LowerOptions::for_config(&config)));
                        }
                    }
                }
            }
        }
    }
    let failures = Mutex::new(Vec::new());
    let assembled = Mutex::new(0usize);
    let targets = [(Target::cuda_sm80(), Arch::Sm80), (Target::cuda_sm90(), Arch::Sm90)];
    jobs.par_iter().for_each(|(what, program, options)| {
        for (target, arch) in &targets {
            let options = *options;
            let mut c = match compile(program, target, &options, *arch) {
                Ok(c) => c,
                // A configuration too large for the target is an error, not a module.
                Err(e) if e.to_string().contains("shared memory") => continue,
                Err(e) => {
                    failures.lock().unwrap().push(format!("{what} on {arch}: {e}"));
                    continue;
                }
            };
            match c.kernel.assemble() {
                Ok(r) if r.spills() => failures.lock().unwrap().push(format!("{what} on {arch}: spills ({r})")),
                Ok(_) => *assembled.lock().unwrap() += 1,
                Err(e) => failures.lock().unwrap().push(format!("{what} on {arch}: {e}")),
            }
        }
    });
    let failures = failures.into_inner().unwrap();
    let assembled = assembled.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} failed:\n{}", failures.len(), failures.len() + assembled, failures.join("\n"));
    assert!(assembled > 200 || filter.is_some(), "only {assembled} kernels were assembled");
}

fn golden(name: &str, kernel: &str, shape: &[usize], dtype: DType, config: &str) {
    let k = kernels::find(kernel).unwrap();
    let config: Config = config.parse().unwrap();
    let plan = k.plan(&Problem::new(shape, dtype), &config).unwrap();
    let options = LowerOptions::for_config(&config);
    let mut c = compile(&plan.launches[0].program, &Target::cuda_sm90(), &options, Arch::Sm90).unwrap();
    c.kernel.assemble().unwrap();
    let text = c.kernel.ptx;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.ptx"));
    if std::env::var("TILEKIT_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (TILEKIT_BLESS=1 writes it)", path.display()));
    if want != text {
        let line = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(want.lines().count().min(text.lines().count()));
        panic!(
            "{name}: the PTX differs from {} at line {} (TILEKIT_BLESS=1 rewrites it)\nwant: {}\ngot:  {}",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            text.lines().nth(line).unwrap_or("<end>")
        );
    }
}

#[test]
fn golden_vector_add() {
    golden("vector_add", "vector_add", &[1000], DType::F32, "BLOCK=1024,num_warps=4");
}

#[test]
fn golden_softmax() {
    golden("softmax", "softmax", &[7, 100], DType::F32, "num_warps=4");
}

fn ptx_of(kernel: &str, shape: &[usize], dtype: DType, config: &str) -> String {
    let k = kernels::find(kernel).unwrap();
    let config: Config = config.parse().unwrap();
    let plan = k.plan(&Problem::new(shape, dtype), &config).unwrap();
    let options = LowerOptions::for_config(&config);
    compile(&plan.launches[0].program, &Target::cuda_sm90(), &options, Arch::Sm90).unwrap().kernel.ptx
}

/// Contiguous global accesses are 16-byte vectors (read-only buffers through the non-coherent
/// cache), reductions use warp shuffles, and the block size reaches ptxas.
#[test]
fn vector_accesses_and_shuffles() {
    let ptx = ptx_of("vector_add", &[1 << 20], DType::F32, "BLOCK=1024,num_warps=4");
    assert!(ptx.contains("ld.global.nc.v4.f32"), "{ptx}");
    assert!(ptx.contains("st.global.v4.f32"), "{ptx}");
    assert!(ptx.contains(".reqntid 128, 1, 1"), "{ptx}");
    let ptx = ptx_of("softmax", &[64, 1024], DType::F32, "num_warps=4");
    assert!(ptx.contains("shfl.sync.bfly.b32"), "{ptx}");
}

/// The NVPTX optimisation pipeline is LLVM's own `default<O3>` with only the SLP vectorizer
/// taken out: `opt-19 -print-pipeline-passes` (Debian's llvm-19, which the test command
/// installs with llvm-19-dev) writes the pipeline the text must equal once that pass is dropped.
#[test]
fn nvptx_pipeline_is_o3_without_slp() {
    let module = std::env::temp_dir().join(format!("tilekit-pipeline-{}.ll", std::process::id()));
    std::fs::write(&module, "target triple = \"nvptx64-nvidia-cuda\"\n").expect("write a module");
    let opt = std::env::var("TILEKIT_OPT").unwrap_or_else(|_| "opt-19".into());
    let out = std::process::Command::new(&opt)
        .args(["-mtriple=nvptx64-nvidia-cuda", "-mcpu=sm_90", "-passes=default<O3>", "-print-pipeline-passes", "-disable-output"])
        .arg(&module)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {opt} (Debian's llvm-19; TILEKIT_OPT names another): {e}"));
    let _ = std::fs::remove_file(&module);
    assert!(out.status.success(), "{opt} failed: {}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    let o3 = printed.trim();
    assert_eq!(o3.matches("slp-vectorizer,").count(), 1, "LLVM's O3 pipeline has no single slp-vectorizer to drop: {o3}");
    assert_eq!(tilekit_ptx::nvptx::O3_WITHOUT_SLP, o3.replacen("slp-vectorizer,", "", 1));
}
