//! The differential fuzzer in CI: the saved cases in tests/fuzz/ replay as their headers say,
//! and a fixed-seed budget of random programs agrees with the interpreter (no unexplained
//! mismatch) on the emulator (warps of 32 and 8) and on every Vulkan device through both
//! runtimes. A failure prints the fuzzer's report: each mismatch with its seed and index, which
//! `tilekit fuzz --seed 1 --start I --count 1 --save-failures DIR` shrinks and saves.

use clap::Parser;
use tilekit_cli::cli::{execute, Cli};
use tilekit_cli::fuzz::cmd::{replay_one, resolve_devices};
use tilekit_cli::fuzz::filetest;

fn skip_gpu() -> bool {
    std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1")
}

/// Runs `tilekit <args>` in-process; returns its exit code and output.
fn tilekit(args: &[&str]) -> (i32, String) {
    let cli = Cli::try_parse_from(std::iter::once("tilekit").chain(args.iter().copied())).expect("valid command line");
    let mut out = Vec::new();
    let code = execute(&cli.command, &mut out).unwrap_or_else(|e| panic!("tilekit {}: {e}", args.join(" ")));
    (code, String::from_utf8_lossy(&out).into_owned())
}

#[test]
fn saved_cases_replay_as_their_headers_say() {
    let mut groups = vec!["emulator".to_string()];
    if skip_gpu() {
        eprintln!("SKIPPED: Vulkan devices in tests/fuzz.rs (TILEKIT_SKIP_GPU_TESTS=1)");
    } else {
        groups.extend(["vulkan".to_string(), "wgpu".to_string(), "wgpu-naga".to_string()]);
    }
    let (devices, skipped) = resolve_devices(&groups).expect("known groups");
    assert!(
        skipped.is_empty() || skip_gpu(),
        "no Vulkan device: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1: {skipped:?}"
    );
    // TILEKIT_FUZZ_CASES: the cases' folder where the test binary runs without the source tree.
    let dir = std::env::var_os("TILEKIT_FUZZ_CASES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz"));
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "tile")).collect();
    files.sort();
    assert!(!files.is_empty());
    let mut bad = Vec::new();
    for f in &files {
        let t = filetest::parse(&std::fs::read_to_string(f).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (device, outcome, verdict) in replay_one(&t, &devices) {
            eprintln!("{}: {device}: {} -- {}", f.display(), outcome.describe(), verdict.describe());
            if !verdict.ok() {
                bad.push(format!("{}: {device}: {} -- {}", f.display(), outcome.describe(), verdict.describe()));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn budget_interpreter_against_the_emulator() {
    let (code, out) = tilekit(&["fuzz", "--seed", "1", "--count", "2000", "--jobs", "2", "--devices", "interp-vs-emulator"]);
    eprintln!("{out}");
    assert_eq!(code, 0, "unexplained mismatches:\n{out}");
}

/// One job: lavapipe runs programs from two threads far slower than from one (15 against
/// under 1 program/s here), and a submission then waited past the runtime's 120 s limit.
#[test]
fn budget_lavapipe_through_vulkan_wgpu_and_naga() {
    if skip_gpu() {
        eprintln!("SKIPPED: budget_lavapipe_through_vulkan_wgpu_and_naga (TILEKIT_SKIP_GPU_TESTS=1)");
        return;
    }
    let (code, out) = tilekit(&["fuzz", "--seed", "1", "--count", "80", "--jobs", "1", "--devices", "vulkan,wgpu,wgpu-naga"]);
    eprintln!("{out}");
    assert!(!out.contains("skipped"), "a Vulkan runtime has no device: install mesa-vulkan-drivers (lavapipe):\n{out}");
    assert_eq!(code, 0, "unexplained mismatches:\n{out}");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    for args in [
        &["fuzz", "--count", "0"][..],
        &["fuzz", "--devices", "nonsense"],
        &["fuzz", "--jobs", "0"],
        &["fuzz", "--time-limit=-1"],
        &["fuzz", "--max-per-thread", "0"],
    ] {
        let cli = Cli::try_parse_from(std::iter::once("tilekit").chain(args.iter().copied())).unwrap();
        let err = execute(&cli.command, &mut Vec::new()).expect_err(&args.join(" "));
        assert!(!err.to_string().is_empty());
    }
}

/// The summary file is complete at the end of a campaign: `finished`, nothing in flight, the
/// counts adding up to the programs run.
#[test]
fn summary_file_says_it_is_finished() {
    let dir = std::env::temp_dir().join(format!("tilekit-fuzz-summary-{}", std::process::id()));
    let path = dir.join("summary.json");
    let (code, out) = tilekit(&["fuzz", "--seed", "4", "--count", "30", "--devices", "emulator", "--out", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(s["finished"], true);
    assert_eq!(s["in_flight"].as_array().map(Vec::len), Some(0));
    assert_eq!(s["programs_run"], 30);
    for d in s["devices"].as_array().unwrap() {
        // Every program agrees or is refused with its reason (lavapipe's warp of 8 takes fewer
        // registers per thread for the 64 x 64 tiles).
        let refused: u64 = d["refused"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(d["agreed"].as_u64().unwrap() + refused, 30, "{d}");
        assert_eq!(d["unexplained"], 0, "{d}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--max-per-thread` skips, on GPU devices only, the programs whose largest tile holds more
/// elements per thread there than asked (seed 41's program 3: a 64 x 64 tile on 2 warps, 256
/// per thread on lavapipe's warps of 8), and counts them apart, never as agreed.
#[test]
fn max_per_thread_skips_large_tiles_on_gpus_only() {
    if skip_gpu() {
        eprintln!("SKIPPED: max_per_thread_skips_large_tiles_on_gpus_only (TILEKIT_SKIP_GPU_TESTS=1)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tilekit-fuzz-budget-{}", std::process::id()));
    let path = dir.join("summary.json");
    let args = ["fuzz", "--seed", "41", "--count", "8", "--devices", "emulator,vulkan", "--max-per-thread", "64", "--out", path.to_str().unwrap()];
    let (code, out) = tilekit(&args);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("over budget"), "the table names the column:\n{out}");
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for d in s["devices"].as_array().unwrap() {
        let name = d["device"].as_str().unwrap();
        let refused: u64 = d["refused"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        let over = d["over_budget"].as_u64().unwrap();
        assert_eq!(d["agreed"].as_u64().unwrap() + refused + over, 8, "{d}");
        if name.starts_with("emulator") {
            assert_eq!(over, 0, "the emulator runs every program: {d}");
        } else {
            assert!(over >= 1, "program 3 holds 256 elements per thread on lavapipe: {d}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// NVIDIA's Vulkan driver without DenormPreserve flushes in `fma` and not in comparisons (and
/// widens bf16 by a shift): `f32(b) >= fma(0, y, f32(b))` of a bf16 subnormal `b < 0` came out
/// false on the NVIDIA Vulkan driver (seed 52 program 2363). That mix is a documented freedom of
/// a flushing device, for a bf16 and an f32 `b` alike; the same wrong answer on a normal value
/// stays unexplained, and a device that keeps subnormals explains neither.
#[test]
fn a_flush_in_arithmetic_but_not_in_comparisons_is_explained() {
    use tilekit::{DType, HostBuffer};
    use tilekit_cli::fuzz::run::{judge, FuzzDevice, Outcome};
    for dtype in [DType::BF16, DType::F32] {
        let text = format!(
            "// grid: 1 1 1
// num_warps: 1
// input_seed: 1
// buffer x: 4 wild exact
// buffer y: 4 tame exact
// buffer o: 4 poison exact
program mixed(x: buffer<{dtype}, read>, y: buffer<f32, read>, o: buffer<i32, write>) grid 1 {{
  %0 = arange 0, 4 : [4]xi32
  %1 = load x[%0] : [4]x{dtype}
  %2 = load y[%0] : [4]xf32
  %3 = const 0.0 : f32
  %4 = splat %3 : [4]xf32
  %5 = cast %1 : [4]xf32
  %6 = fma %4, %2, %5 : [4]xf32
  %7 = cmp ge %5, %6 : [4]xi1
  %8 = cast %7 : [4]xi32
  store o[%0], %8
}}
"
        );
        let case = filetest::parse(&text).unwrap().case;
        let s = -2.755e-40;
        let inputs = vec![
            HostBuffer::from_f64(dtype, &[s, 1.0, s, 2.0]),
            HostBuffer::from_f64(DType::F32, &[-3.0, 1.0, 2.0, 1.0]),
            HostBuffer::zeros(DType::I32, 4),
        ];
        let want = tilekit_cli::fuzz::run::reference(&case, &inputs).unwrap();
        assert_eq!(want[2].to_f64(), [1.0; 4], "{dtype}");
        let got = |o: [f64; 4]| vec![inputs[0].clone(), inputs[1].clone(), HostBuffer::from_f64(DType::I32, &o)];
        let mut dev = FuzzDevice::new(tilekit::Device::Interpreter);
        dev.gpu = true;
        dev.flushes_subnormals = true;
        assert!(matches!(judge(&case, &inputs, &want, &got([0.0, 1.0, 1.0, 1.0]), &dev), Outcome::Explained(_)), "{dtype}");
        assert!(matches!(judge(&case, &inputs, &want, &got([0.0, 0.0, 1.0, 1.0]), &dev), Outcome::Mismatch(..)), "{dtype}");
        dev.flushes_subnormals = false;
        assert!(matches!(judge(&case, &inputs, &want, &got([0.0, 1.0, 1.0, 1.0]), &dev), Outcome::Mismatch(..)), "{dtype}");
    }
}

/// NVIDIA's Vulkan driver without DenormPreserve may flush in one instruction alone: for a
/// subnormal `x` (`0x3`) and `b = 0`, `fma(-0.5, b, x + x) == x + x` stored false on the H100
/// (seed 78 program 1774): the fma read its addend as zero while the addition and the
/// comparison kept `x + x`. Flushing every instruction of a kind gives true (both sides zero),
/// as IEEE does; the model of the fma alone flushing gives false. Explained where the device
/// flushes; the same false from normal values, or on a device that keeps subnormals, is not.
#[test]
fn a_flush_in_one_instruction_alone_is_explained() {
    use tilekit::{DType, HostBuffer};
    use tilekit_cli::fuzz::run::{judge, FuzzDevice, Outcome};
    let text = "// grid: 1 1 1
// num_warps: 1
// input_seed: 1
// buffer x: 4 wild exact
// buffer b: 4 tame exact
// buffer o: 4 poison exact
program alone(x: buffer<f32, read>, b: buffer<bf16, read>, o: buffer<i1, write>) grid 1 {
  %0 = arange 0, 4 : [4]xi32
  %1 = load x[%0] : [4]xf32
  %2 = load b[%0] : [4]xbf16
  %3 = add %1, %1 : [4]xf32
  %4 = const -0.5 : f32
  %5 = splat %4 : [4]xf32
  %6 = cast %2 : [4]xf32
  %7 = fma %5, %6, %3 : [4]xf32
  %8 = cmp eq %7, %3 : [4]xi1
  store o[%0], %8
}
";
    let case = filetest::parse(text).unwrap().case;
    let sub = f32::from_bits(3) as f64;
    let inputs = vec![
        HostBuffer::from_f64(DType::F32, &[sub, 1.5, 3e38, 2.0]),
        HostBuffer::from_f64(DType::BF16, &[0.0, 0.0, 1.0, 1.0]),
        HostBuffer::zeros(DType::I1, 4),
    ];
    let want = tilekit_cli::fuzz::run::reference(&case, &inputs).unwrap();
    assert_eq!(want[2].to_f64(), [1.0, 1.0, 1.0, 0.0]);
    let got = |o: [f64; 4]| vec![inputs[0].clone(), inputs[1].clone(), HostBuffer::from_f64(DType::I1, &o)];
    let mut dev = FuzzDevice::new(tilekit::Device::Interpreter);
    dev.gpu = true;
    dev.flushes_subnormals = true;
    match judge(&case, &inputs, &want, &got([0.0, 1.0, 1.0, 0.0]), &dev) {
        Outcome::Explained(kind) => assert_eq!(kind, "subnormal-flush-mixed"),
        other => panic!("the fma flushing alone is a device's choice: {other:?}"),
    }
    assert!(matches!(judge(&case, &inputs, &want, &got([0.0, 0.0, 1.0, 0.0]), &dev), Outcome::Mismatch(..)));
    assert!(matches!(judge(&case, &inputs, &want, &got([1.0, 1.0, 0.0, 0.0]), &dev), Outcome::Mismatch(..)));
    dev.flushes_subnormals = false;
    assert!(matches!(judge(&case, &inputs, &want, &got([0.0, 1.0, 1.0, 0.0]), &dev), Outcome::Mismatch(..)));
}

/// NVIDIA's Vulkan driver without DenormPreserve also flushes in a comparison while widening
/// bf16 by a shift: `select(x < f32(b), x, f32(b))` of a bf16 subnormal `b > 0` and `x = 0`
/// stored `f32(b)` unflushed on the H100 (seed 60 program 2956; IEEE gives `x`, flushing
/// everything gives 0, flushing only arithmetic gives `x`). Explained where the device flushes
/// (the element depends on the choice); a wrong answer from normal values, or the same one on a
/// device that keeps subnormals, is not.
#[test]
fn a_flush_in_comparisons_but_not_in_bf16_widening_is_explained() {
    use tilekit::{DType, HostBuffer};
    use tilekit_cli::fuzz::run::{judge, FuzzDevice, Outcome};
    let text = "// grid: 1 1 1
// num_warps: 1
// input_seed: 1
// buffer x: 4 tame exact
// buffer b: 4 wild exact
// buffer o: 4 poison exact
program widened(x: buffer<f32, read>, b: buffer<bf16, read>, o: buffer<f32, write>) grid 1 {
  %0 = arange 0, 4 : [4]xi32
  %1 = load x[%0] : [4]xf32
  %2 = load b[%0] : [4]xbf16
  %3 = cast %2 : [4]xf32
  %4 = cmp lt %1, %3 : [4]xi1
  %5 = select %4, %1, %3 : [4]xf32
  store o[%0], %5
}
";
    let case = filetest::parse(text).unwrap().case;
    let s = 2.755e-40;
    let inputs = vec![
        HostBuffer::from_f64(DType::F32, &[0.0, 1.0, 0.0, -2.0]),
        HostBuffer::from_f64(DType::BF16, &[s, 2.0, 3.0, 1.0]),
        HostBuffer::zeros(DType::F32, 4),
    ];
    let want = tilekit_cli::fuzz::run::reference(&case, &inputs).unwrap();
    assert_eq!(want[2].to_f64(), [0.0, 1.0, 0.0, -2.0]);
    let s = HostBuffer::from_f64(DType::BF16, &[s]).to_f64()[0];
    let got = |o: [f64; 4]| vec![inputs[0].clone(), inputs[1].clone(), HostBuffer::from_f64(DType::F32, &o)];
    let mut dev = FuzzDevice::new(tilekit::Device::Interpreter);
    dev.gpu = true;
    dev.flushes_subnormals = true;
    assert!(matches!(judge(&case, &inputs, &want, &got([s, 1.0, 0.0, -2.0]), &dev), Outcome::Explained(_)));
    assert!(matches!(judge(&case, &inputs, &want, &got([s, 2.0, 0.0, -2.0]), &dev), Outcome::Mismatch(..)));
    dev.flushes_subnormals = false;
    assert!(matches!(judge(&case, &inputs, &want, &got([s, 1.0, 0.0, -2.0]), &dev), Outcome::Mismatch(..)));
}

/// A program whose second staging buffer leaves no room for the shared memory it reserves after
/// the loop is lowered again with one buffer, on the emulator and in SPIR-V alike, instead of
/// being refused (seed 76 program 1375, refused at e03e6bb).
#[test]
fn staging_falls_back_to_one_buffer_where_two_do_not_fit() {
    use tilekit::gpu::lower::{lower, LowerError, LowerOptions, Staging};
    use tilekit::gpu::{simt, Target};
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz/staging-falls-back-to-one-buffer.tile")).unwrap();
    let case = filetest::parse(&text).unwrap().case;
    let options = LowerOptions { num_stages: case.num_stages, ..LowerOptions::new(case.num_warps) };
    assert_eq!(options.staging, Staging::Double);
    let target = Target::h200_vulkan();
    let mut rec = simt::Recorder::default();
    let err = lower(&case.program, &target, &options, &mut rec).unwrap_err();
    assert!(matches!(&err, LowerError::SharedMemory { needed: 53248, .. }) && err.to_string().contains("18432 x f16 staged"), "{err}");
    assert_eq!(options.fallback(&err).map(|o| o.staging), Some(Staging::Single));
    // Then element stores into the shared array, then the refusal stands: each step down from
    // the staging the refused program used.
    let refused = |staging| LowerError::SharedMemory { needed: 53248, available: 49152, detail: String::new(), staging };
    assert_eq!(options.fallback(&refused(Staging::Single)).map(|o| o.staging), Some(Staging::Elements));
    assert_eq!(options.fallback(&refused(Staging::Elements)), None);
    let lowered = simt::compile(&case.program, &target, &options).unwrap();
    assert_eq!(lowered.info.staged, vec![(tilekit::DType::F16, 9216)]);
    assert!(lowered.info.double_staged.is_empty());
    let spirv = tilekit_spirv::compile::compile(&case.program, &target, &options).unwrap();
    assert_eq!(spirv.info, lowered.info, "SPIR-V lowers as the emulator does");
}

/// Tensor cores do not keep the sign of a zero sum: a -0 accumulator plus -0 products came
/// back +0 through CUDA (seed 58 program 3815 on the H100). Explained where a dot of 16-bit
/// floats may run on matrix instructions, nowhere else, and only for zeros.
#[test]
fn a_zero_sum_of_a_matrix_instruction_may_be_positive() {
    use tilekit::{DType, HostBuffer};
    use tilekit_cli::fuzz::run::{judge, FuzzDevice, Outcome};
    let text = "// grid: 1 1 1
// num_warps: 4
// input_seed: 1
// buffer a: 256 wild exact
// buffer b: 256 wild exact
// buffer c: 256 wild exact
// buffer o: 256 poison exact
program mz(a: buffer<f16, read>, b: buffer<f16, read>, c: buffer<f32, read>, o: buffer<f32, write>) grid 1 {
  %0 = arange 0, 16 : [16]xi32
  %1 = expand_dims %0, axis 1 : [16, 1]xi32
  %2 = const 16 : i32
  %3 = splat %2 : [16, 1]xi32
  %4 = mul %1, %3 : [16, 1]xi32
  %5 = broadcast %4 : [16, 16]xi32
  %6 = expand_dims %0, axis 0 : [1, 16]xi32
  %7 = broadcast %6 : [16, 16]xi32
  %8 = add %5, %7 : [16, 16]xi32
  %9 = load a[%8] : [16, 16]xf16
  %10 = load b[%8] : [16, 16]xf16
  %11 = load c[%8] : [16, 16]xf32
  %12 = dot %9, %10, %11 : [16, 16]xf32
  store o[%8], %12
}
";
    let case = filetest::parse(text).unwrap().case;
    // Row 0 of a is -1, b is +0 (products -0) and c is -0: element 0 is -0 in IEEE.
    let av: Vec<f64> = (0..256).map(|i| if i < 16 { -1.0 } else { 1.0 }).collect();
    let inputs = vec![
        HostBuffer::from_f64(DType::F16, &av),
        HostBuffer::from_f64(DType::F16, &[0.0; 256]),
        HostBuffer::from_f64(DType::F32, &[-0.0; 256]),
        HostBuffer::zeros(DType::F32, 256),
    ];
    let want = tilekit_cli::fuzz::run::reference(&case, &inputs).unwrap();
    assert!(want[3].to_f64()[0] == 0.0 && want[3].to_f64()[0].is_sign_negative());
    let got = |v: f64| {
        let mut o = want[3].to_f64();
        o[0] = v;
        vec![inputs[0].clone(), inputs[1].clone(), inputs[2].clone(), HostBuffer::from_f64(DType::F32, &o)]
    };
    let mut dev = FuzzDevice::new(tilekit::Device::Interpreter);
    dev.gpu = true;
    dev.matrix_dot = true;
    assert!(matches!(judge(&case, &inputs, &want, &got(0.0), &dev), Outcome::Explained(k) if k == "matrix-zero-sign"));
    assert!(matches!(judge(&case, &inputs, &want, &got(1.0), &dev), Outcome::Mismatch(..)));
    dev.matrix_dot = false;
    assert!(matches!(judge(&case, &inputs, &want, &got(0.0), &dev), Outcome::Mismatch(..)));
}
