//! The `tilekit` binary as a person runs it: output, JSON that parses, exit codes and one-line
//! messages for bad input.

use std::process::{Command, Output};

use serde_json::Value;
use tilekit::kernels;

fn tilekit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tilekit")).args(args).env("RUST_BACKTRACE", "1").output().expect("the tilekit binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is UTF-8")
}

/// Says on stderr that the running test did not run and why, as `SKIPPED: <test> (<reason>)`,
/// past the harness's capture so the line shows; scripts/test.sh lists these lines at the end.
fn skipped(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // One write: piecewise, lines of tests running beside it could land inside it.
    let _ = std::io::stderr().lock().write_all(format!("SKIPPED: {test} ({reason})\n").as_bytes());
}

/// Runs `args`, expects exit code 0 and returns stdout.
fn ok(args: &[&str]) -> String {
    let o = tilekit(args);
    assert_eq!(o.status.code(), Some(0), "tilekit {args:?} failed\nstdout:\n{}\nstderr:\n{}", stdout(&o), stderr(&o));
    stdout(&o)
}

fn json(args: &[&str]) -> Value {
    let out = ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("tilekit {args:?} printed invalid JSON ({e}):\n{out}"))
}

/// Runs `args`, expects exit code 2, one line on stderr containing every `needle`, nothing on
/// stdout and no panic.
fn bad_input(args: &[&str], needles: &[&str]) {
    let o = tilekit(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "tilekit {args:?}: expected exit code 2\nstderr:\n{err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "tilekit {args:?} panicked:\n{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "tilekit {args:?}: expected a one-line message, got:\n{err}");
    assert!(err.starts_with("error: "), "tilekit {args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "tilekit {args:?}: message lacks `{n}`:\n{err}");
    }
    assert!(stdout(&o).is_empty(), "tilekit {args:?} printed results despite the error:\n{}", stdout(&o));
}

#[test]
fn help_is_written_for_a_person() {
    let out = ok(&["--help"]);
    for sub in ["kernels", "ir", "run", "devices", "Examples:"] {
        assert!(out.contains(sub), "--help lacks `{sub}`:\n{out}");
    }
    let out = ok(&["run", "--help"]);
    for flag in ["--shape", "--dtype", "--opt", "--config", "--device", "--seed", "--json", "--all", "2^20"] {
        assert!(out.contains(flag), "run --help lacks `{flag}`:\n{out}");
    }
    // Every kind of device, and every emulator preset, by the name --device takes.
    for device in ["interpreter", "emulator:PRESET", "`vulkan`", "`wgpu`", "`cuda`", "vulkan:llvmpipe"] {
        assert!(out.contains(device), "run --help lacks `{device}`:\n{out}");
    }
    let presets = tilekit::device::target_presets();
    for preset in presets.split(", ") {
        assert!(out.contains(preset), "run --help lacks the preset `{preset}`:\n{out}");
    }
    assert!(ok(&["ir", "--help"]).contains("--locations"));
}

#[test]
fn kernels_lists_the_library() {
    let out = ok(&["kernels"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("KERNEL") && lines[0].contains("DESCRIPTION"), "{out}");
    let all = kernels::all();
    assert_eq!(lines.len(), all.len() + 1, "one line per kernel:\n{out}");
    for k in &all {
        let line = lines.iter().find(|l| l.starts_with(&format!("{} ", k.name()))).unwrap_or_else(|| panic!("no row for {}", k.name()));
        assert!(line.contains(k.description()), "{line}");
        assert!(line.contains(&k.default_problem().to_string()), "{line}");
        assert!(line.contains(&k.dtypes()[0].to_string()), "{line}");
    }
    // Columns line up: the description column starts at the same place on every line.
    let col = lines[0].find("DESCRIPTION").unwrap();
    for (line, k) in lines[1..].iter().zip(&all) {
        assert_eq!(line.find(k.description()), Some(col), "misaligned:\n{out}");
    }
}

#[test]
fn kernels_json_matches_the_library() {
    let v = json(&["kernels", "--json"]);
    let list = v.as_array().expect("an array");
    let all = kernels::all();
    assert_eq!(list.len(), all.len());
    for (j, k) in list.iter().zip(&all) {
        assert_eq!(j["name"], k.name());
        assert_eq!(j["configs"], k.configs().len());
        assert_eq!(j["shape"], k.shape_doc());
        assert_eq!(j["dtypes"].as_array().unwrap().len(), k.dtypes().len());
        assert_eq!(j["default_problem"]["dtype"], k.default_problem().dtype.to_string());
        assert_eq!(j["default_config"], k.configs()[0].to_string());
    }
}

#[test]
fn devices_lists_the_interpreter() {
    let out = ok(&["devices"]);
    assert!(out.lines().any(|l| l.starts_with("interpreter")), "{out}");
    let v = json(&["devices", "--json"]);
    let names: Vec<&str> = v.as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"interpreter"), "{v}");
}

#[test]
fn ir_prints_every_launch_with_config_overrides() {
    let out = ok(&["ir", "vector_add", "--shape", "1000", "--config", "BLOCK=256"]);
    assert!(out.contains("launch 1 of 1"), "{out}");
    // 1000 elements in blocks of 256: four programs; num_warps stays the default.
    assert!(out.contains("grid [4, 1, 1]"), "{out}");
    assert!(out.contains("BLOCK=256,num_warps=4"), "{out}");
    assert!(out.contains("vector_add"), "{out}");
    // Every accepted shape spelling means the same problem.
    for shape in ["1K", "2^10", "1024"] {
        let out = ok(&["ir", "vector_add", "--shape", shape, "--config", "BLOCK=128", "--dtype", "f16"]);
        assert!(out.contains("grid [8, 1, 1]") && out.contains("1024 f16"), "--shape {shape}:\n{out}");
    }
}

/// The naga backend's texts: WGSL, MSL and HLSL of one kernel, with the launch header as
/// comments of each language; a target that is not a Vulkan one is refused.
#[test]
fn ir_writes_wgsl_msl_and_hlsl_through_naga() {
    let wgsl = ok(&["ir", "softmax", "--shape", "5x37", "--wgsl", "--target", "lavapipe"]);
    assert!(wgsl.starts_with("// softmax 5x37 f32"), "{wgsl}");
    for needle in ["@compute @workgroup_size(", "var<storage> x: array<f32>;", "var<immediate> scalars: Scalars;", "subgroupShuffleXor("] {
        assert!(wgsl.contains(needle), "`{needle}` not in:\n{wgsl}");
    }
    let msl = ok(&["ir", "softmax", "--shape", "5x37", "--msl"]);
    assert!(msl.contains("kernel void main_"), "{msl}");
    let hlsl = ok(&["ir", "softmax", "--shape", "5x37", "--hlsl"]);
    assert!(hlsl.contains("[numthreads("), "{hlsl}");
    bad_input(&["ir", "softmax", "--shape", "5x37", "--wgsl", "--target", "sm_80"], &["--wgsl", "Vulkan target", "sm_80"]);
}

#[test]
fn ir_locations_name_the_kernel_source() {
    let with = ok(&["ir", "vector_add", "--shape", "77", "--locations"]);
    assert!(with.contains("loc(\"src/kernels/vector_add.rs\""), "--locations should name the kernel's source file:\n{with}");
    let plain = ok(&["ir", "vector_add", "--shape", "77"]);
    assert!(plain.contains("program vector_add(") && !plain.contains("loc("), "{plain}");
}

#[test]
fn ir_of_one_launch_parses_back_to_the_planned_program() {
    use tilekit::kernels::Problem;
    let text = ok(&["ir", "vector_add", "--shape", "1000", "--dtype", "bf16", "--config", "BLOCK=128", "--locations"]);
    let parsed = tilekit::text::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let kernel = kernels::find("vector_add").unwrap();
    let config = kernel.configs()[0].merged(&"BLOCK=128".parse().unwrap());
    let plan = kernel.plan(&Problem::new(&[1000], tilekit::DType::BF16), &config).unwrap();
    assert_eq!(parsed, plan.launches[0].program);
}

#[test]
fn ir_prints_every_launch_of_a_multi_launch_plan() {
    // Find a kernel that plans more than one launch by default, so the test follows the library.
    let Some(k) =
        kernels::all().into_iter().find(|k| k.plan(&k.test_problems(k.dtypes()[0])[0], &k.configs()[0]).is_ok_and(|p| p.launches.len() > 1))
    else {
        skipped("no library kernel plans more than one launch");
        return;
    };
    let p = &k.test_problems(k.dtypes()[0])[0];
    let shape = p.shape_string();
    let mut args = vec!["ir", k.name(), "--shape", &shape, "--dtype", p.dtype.name()];
    let opts: Vec<String> = p.opts.iter().map(|(key, v)| format!("{key}={v}")).collect();
    for o in &opts {
        args.extend(["--opt", o.as_str()]);
    }
    let out = ok(&args);
    let n = k.plan(p, &k.configs()[0]).unwrap().launches.len();
    for i in 1..=n {
        assert!(out.contains(&format!("; launch {i} of {n}:")), "{out}");
    }
    assert_eq!(out.matches("\nprogram ").count() + usize::from(out.starts_with("program ")), n, "{out}");
}

#[test]
fn run_one_kernel_passes() {
    let out = ok(&["run", "vector_add", "--shape", "1000", "--config", "BLOCK=256", "--seed", "7"]);
    let row = out.lines().find(|l| l.starts_with("vector_add")).unwrap_or_else(|| panic!("no result row:\n{out}"));
    assert!(row.contains("PASS") && row.contains(" out ") && row.contains("1000 f32"), "{out}");
    assert!(out.lines().any(|l| l.trim() == "1 passed, 0 failed"), "{out}");
}

#[test]
fn run_on_every_listed_device() {
    for device in tilekit::Device::all() {
        let name = device.name();
        let v = json(&["run", "softmax", "--shape", "5x37", "--device", &name, "--json"]);
        assert_eq!(v["device"], name.as_str());
        assert_eq!(v["results"][0]["status"], "pass", "{v}");
    }
}

#[test]
fn run_json_reports_errors_and_tolerances() {
    let v = json(&["run", "vector_add", "--shape", "4099", "--dtype", "bf16", "--json"]);
    assert_eq!(v["passed"], 1);
    assert_eq!(v["failed"], 0);
    let r = &v["results"][0];
    assert_eq!(r["status"], "pass");
    assert_eq!(r["dtype"], "bf16");
    let o = &r["report"]["outputs"][0];
    assert_eq!(o["name"], "out");
    let (err, tol) = (o["rel_err"].as_f64().unwrap(), o["tolerance"].as_f64().unwrap());
    assert!(err <= tol && tol > 0.0, "{o}");
    assert!(r["report"]["elapsed_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn run_all_dtypes_runs_each_dtype() {
    let v = json(&["run", "vector_add", "--all-dtypes", "--shape", "31", "--json"]);
    let dtypes: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["dtype"].as_str().unwrap()).collect();
    let want: Vec<String> = kernels::find("vector_add").unwrap().dtypes().iter().map(|d| d.to_string()).collect();
    assert_eq!(dtypes, want);
    assert_eq!(v["failed"], 0, "{v}");
}

#[test]
fn run_all_covers_the_library_on_its_test_problems() {
    let v = json(&["run", "--all", "--problems", "tests", "--json"]);
    let results = v["results"].as_array().unwrap();
    let got: Vec<(&str, &str)> = results.iter().map(|r| (r["kernel"].as_str().unwrap(), r["problem"].as_str().unwrap())).collect();
    let want: Vec<(String, String)> = kernels::all()
        .iter()
        .flat_map(|k| {
            let name = k.name().to_string();
            k.test_problems(k.default_problem().dtype).into_iter().map(move |p| (name.clone(), p.to_string()))
        })
        .collect();
    assert_eq!(got.len(), want.len(), "{got:?}");
    for ((gk, gp), (wk, wp)) in got.iter().zip(&want) {
        assert_eq!((*gk, *gp), (wk.as_str(), wp.as_str()));
    }
    let failures: Vec<&Value> = results.iter().filter(|r| r["status"] != "pass").collect();
    assert!(failures.is_empty(), "failing kernels: {failures:#?}");
    assert_eq!(v["passed"], results.len());
}

#[test]
fn run_all_with_a_dtype_selects_the_kernels_that_support_it() {
    let v = json(&["run", "--all", "--problems", "tests", "--dtype", "i32", "--json"]);
    let kernels: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["kernel"].as_str().unwrap()).collect();
    assert!(kernels.contains(&"vector_add"), "{v}");
    for name in kernels {
        let k = kernels::find(name).unwrap();
        assert!(k.dtypes().contains(&tilekit::DType::I32), "{name} does not support i32");
    }
    assert!(v["results"].as_array().unwrap().iter().all(|r| r["dtype"] == "i32"));
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    bad_input(&["run", "no_such_kernel"], &["unknown kernel `no_such_kernel`", "vector_add"]);
    bad_input(&["ir", "no_such_kernel"], &["unknown kernel"]);
    bad_input(&["run", "vector_add", "--shape", "12xq"], &["--shape `12xq`", "`q`"]);
    bad_input(&["ir", "vector_add", "--shape", "4x4"], &["vector_add", "`4x4`"]);
    bad_input(&["run", "vector_add", "--dtype", "f99"], &["unknown dtype `f99`", "bf16"]);
    bad_input(&["run", "vector_add", "--dtype", "i8"], &["does not support dtype i8"]);
    bad_input(&["run", "vector_add", "--config", "BLOK=256"], &["no meta-parameter `BLOK`", "BLOCK"]);
    bad_input(&["ir", "vector_add", "--config", "BLOCK"], &["--config", "key=value"]);
    bad_input(&["run", "vector_add", "--config", "BLOCK=100"], &["BLOCK", "100", "power of two"]);
    bad_input(&["run", "vector_add", "--opt", "causal"], &["--opt `causal`"]);
    bad_input(&["run", "vector_add", "--device", "nowhere"], &["`nowhere`", "interpreter"]);
    bad_input(&["run", "--all", "--shape", "1M"], &["--shape", "--all"]);
    bad_input(&["run", "--all", "--config", "BLOCK=64"], &["--config", "--all"]);
    bad_input(&["run", "--all", "--dtype", "u8"], &["no kernel supports dtype u8"]);
    bad_input(&["ir", "softmax", "--llvm"], &["--llvm needs --ptx or --amdgcn"]);
    bad_input(&["run", "softmax", "--device", "emulator:nope"], &["unknown target `nope`", "lavapipe", "h200-vulkan", "sm_90"]);
}

/// Options are the kernel's declared ones, with values of their kind: a misspelt key or a flag
/// spelt `maybe` is refused, never ignored or read as "on".
#[test]
fn kernel_options_follow_the_kernels_schema() {
    bad_input(&["run", "vector_add", "--opt", "causal=1"], &["kernel `vector_add` has no option `causal`", "options: none"]);
    bad_input(&["run", "attention", "--opt", "casual=1"], &["no option `casual`", "causal=0|1", "sm_scale=<float>"]);
    for v in ["maybe", "2", "yes", "on", ""] {
        let opt = format!("causal={v}");
        bad_input(&["run", "attention", "--shape", "1x1x17x16", "--opt", &opt], &["--opt causal=", "attention", "0, 1, true or false"]);
    }
    bad_input(&["ir", "matmul", "--opt", "act=tanh"], &["act=tanh", "none, relu, gelu, silu"]);
    bad_input(&["ir", "attention", "--opt", "sm_scale=inf"], &["sm_scale=inf", "finite"]);
    bad_input(&["ir", "layernorm", "--opt", "residual=yes"], &["residual=yes"]);
    // Every accepted spelling runs, and means what it says.
    for v in ["1", "true"] {
        let opt = format!("causal={v}");
        let v = json(&["run", "attention", "--shape", "1x2x17x16", "--opt", &opt, "--json"]);
        assert_eq!(v["results"][0]["status"], "pass", "{v}");
        assert!(v["results"][0]["problem"].as_str().unwrap().contains("causal="), "{v}");
    }
    // `tilekit kernels --json` lists each kernel's options.
    let v = json(&["kernels", "--json"]);
    let attention = v.as_array().unwrap().iter().find(|k| k["name"] == "attention").unwrap();
    assert_eq!(attention["options"], serde_json::json!(["causal=0|1", "sm_scale=<float>"]));
}

/// A device kind that cannot be reached says why: the feature not built, the driver or the
/// loader missing, or a driver without devices.
#[test]
fn unreachable_devices_say_why() {
    if cfg!(any(feature = "ptx", feature = "ptx-static")) {
        // With the feature: a machine without the driver, or with it but without a device, or
        // (on a GPU machine) the run simply works.
        let o = tilekit(&["run", "vector_add", "--shape", "7", "--device", "cuda"]);
        let err = stderr(&o);
        if o.status.code() != Some(0) {
            assert_eq!(o.status.code(), Some(2), "{err}");
            assert!(err.contains("no device called `cuda`: "), "{err}");
            assert!(err.contains("libcuda") || err.contains("CUDA"), "{err}");
        }
    } else {
        bad_input(&["run", "vector_add", "--device", "cuda"], &["no device called `cuda`: ", "without the `ptx` feature", "--features ptx"]);
    }
    // A Vulkan loader that finds no driver: both Vulkan runtimes say so.
    for (device, why) in [("vulkan", "the Vulkan loader lists no device"), ("wgpu", "no Vulkan adapter found")] {
        let o = Command::new(env!("CARGO_BIN_EXE_tilekit"))
            .args(["run", "vector_add", "--shape", "7", "--device", device])
            .env("VK_DRIVER_FILES", "/nonexistent/tilekit-no-icd.json")
            .env("VK_ICD_FILENAMES", "/nonexistent/tilekit-no-icd.json")
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{device}: {err}");
        assert!(err.contains(&format!("no device called `{device}`: ")) && err.contains(why), "{device}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// The example that prints GPU IR refuses an unknown target and lists the presets; the binary
/// is built by `cargo test --examples` (scripts/test.sh builds every target first).
#[test]
fn the_gpu_ir_example_refuses_an_unknown_target() {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_tilekit")).with_file_name("examples").join("gpu_ir");
    if !bin.is_file() {
        skipped(&format!("no {}: cargo build --examples builds it", bin.display()));
        return;
    }
    let o = Command::new(&bin).args(["softmax", "no-such-target"]).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown target `no-such-target`") && err.contains("lavapipe") && err.contains("h200-vulkan"), "{err}");
    let o = Command::new(&bin).args(["softmax", "lavapipe"]).output().unwrap();
    assert!(o.status.success() && stdout(&o).contains("vulkan:llvmpipe"), "{}", stderr(&o));
}

#[test]
fn malformed_command_lines_exit_with_2() {
    for args in [
        &["run"][..],
        &["frobnicate"],
        &["run", "vector_add", "--all"],
        &["kernels", "--bogus"],
        &["run", "vector_add", "--problems", "tests", "--shape", "5"],
        &["run", "vector_add", "--problems", "some"],
    ] {
        let o = tilekit(args);
        assert_eq!(o.status.code(), Some(2), "tilekit {args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn ir_gpu_prints_layouts_for_a_target() {
    let out = ok(&["ir", "softmax", "--shape", "8x100", "--gpu", "--target", "lavapipe"]);
    assert!(out.contains("; target vulkan:llvmpipe"), "{out}");
    assert!(out.contains("threads (4 warps of 8)"), "{out}");
    assert!(out.contains("#blocked<"), "{out}");
    assert!(out.contains("#recipe"), "{out}");
    bad_input(&["ir", "softmax", "--gpu", "--target", "nope"], &["unknown target `nope`", "lavapipe"]);
}

/// `num_stages` says whether it took effect: on CUDA targets the matmul loop's two operand
/// loads are pipelined; lavapipe has no asynchronous copies and says what the knob needs.
#[test]
fn ir_gpu_says_what_num_stages_did() {
    let config = "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=3";
    let args = |t| ["ir", "matmul", "--shape", "256x256x256", "--dtype", "f16", "--config", config, "--gpu", "--target", t];
    let out = ok(&args("sm_80"));
    assert!(out.contains("; num_stages = 3: 2 loads pipelined, 2 iterations ahead"), "{out}");
    assert_eq!(out.matches("; #ring<3 stages, ").count(), 2, "{out}");
    let out = ok(&args("lavapipe"));
    assert!(out.contains("; num_stages = 3: no load pipelined (it takes a target with asynchronous copies"), "{out}");
}

#[cfg(any(feature = "ptx", feature = "ptx-static"))]
#[test]
fn ir_ptx_prints_ptx_with_the_ptxas_report() {
    let out = ok(&["ir", "softmax", "--shape", "8x100", "--ptx", "--arch", "sm_80"]);
    assert!(out.contains(".target sm_80") && out.contains(".visible .entry softmax("), "{out}");
    assert!(out.contains("// ptxas sm_80: ") && out.contains(" 0 B spill stores"), "{out}");
    assert!(out.lines().all(|l| !l.starts_with(';')), "PTX comments start with //:\n{out}");
    let out = ok(&["ir", "vector_add", "--ptx"]);
    assert!(out.contains(".target sm_90") && out.contains("ld.global.nc.v4.f32"), "{out}");
    bad_input(&["ir", "softmax", "--ptx", "--arch", "sm_70"], &["unknown --arch `sm_70`", "sm_80"]);
    // The LLVM IR the backend hands LLVM: NVPTX's triple, the kernel as a ptx_kernel, `;`
    // comments throughout.
    let out = ok(&["ir", "softmax", "--shape", "8x100", "--ptx", "--llvm"]);
    assert!(out.contains("target triple = \"nvptx64-nvidia-cuda\"") && out.contains("define ptx_kernel void @softmax("), "{out}");
    assert!(out.lines().all(|l| !l.starts_with("//")), "{out}");
}

#[cfg(not(any(feature = "ptx", feature = "ptx-static")))]
#[test]
fn ir_ptx_needs_the_feature() {
    bad_input(&["ir", "softmax", "--ptx"], &["built without the `ptx` feature"]);
}

/// `ir --amdgcn` prints the assembly headed by the code object's report; it says that nothing
/// ran, and the wave size follows the architecture.
#[cfg(any(feature = "amdgcn", feature = "amdgcn-static"))]
#[test]
fn ir_amdgcn_prints_assembly_with_the_code_object_report() {
    let out = ok(&["ir", "softmax", "--shape", "8x100", "--amdgcn", "--arch", "gfx942"]);
    assert!(out.contains("; gfx942 (compiled, not run): wave64,") && out.contains("waves per SIMD"), "{out}");
    assert!(out.contains(".amdgcn_target \"amdgcn-amd-amdhsa--gfx942\"") && out.contains("s_endpgm"), "{out}");
    let out = ok(&["ir", "vector_add", "--amdgcn", "--arch", "gfx1100"]);
    assert!(out.contains("; gfx1100 (compiled, not run): wave32,"), "{out}");
    bad_input(&["ir", "softmax", "--amdgcn", "--arch", "gfx803"], &["unknown --arch `gfx803`", "gfx942"]);
    bad_input(&["ir", "softmax", "--arch", "gfx942"], &["--arch needs --ptx or --amdgcn"]);
    let out = ok(&["ir", "softmax", "--shape", "8x100", "--amdgcn", "--arch", "gfx1100", "--llvm"]);
    assert!(out.contains("amdgcn-amd-amdhsa") && out.contains("define amdgpu_kernel void @softmax("), "{out}");
}

/// AMD targets are listed, marked compile-only: there is no AMD runtime.
#[cfg(any(feature = "amdgcn", feature = "amdgcn-static"))]
#[test]
fn devices_lists_amd_targets_as_compile_only() {
    let out = ok(&["devices"]);
    for a in ["gfx90a", "gfx942", "gfx1100"] {
        let line = out.lines().find(|l| l.starts_with(&format!("amdgcn:{a} "))).unwrap_or_else(|| panic!("no amdgcn:{a} in\n{out}"));
        assert!(line.contains("compile-only (compiled, not run)"), "{line}");
    }
    let v = json(&["devices", "--json"]);
    assert!(v.as_array().unwrap().iter().any(|d| d["name"] == "amdgcn:gfx942" && d["compile_only"] == true), "{v}");
}

#[cfg(not(any(feature = "amdgcn", feature = "amdgcn-static")))]
#[test]
fn ir_amdgcn_needs_the_feature() {
    bad_input(&["ir", "softmax", "--amdgcn"], &["built without the `amdgcn` feature"]);
}

/// `tilekit run --check`: listed in the help, and the library's test problems pass checked.
#[test]
fn the_command_line_runs_checked() {
    let tilekit = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_tilekit")).args(args).output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, help, _) = tilekit(&["run", "--help"]);
    assert_eq!(code, Some(0));
    assert!(help.contains("--check") && help.contains("device_assert"), "{help}");
    for kernel in ["vector_add", "histogram", "spmv"] {
        let (code, out, err) = tilekit(&["run", kernel, "--problems", "tests", "--check", "--device", "emulator:lavapipe"]);
        assert_eq!(code, Some(0), "{kernel}:\n{out}\n{err}");
        assert!(out.contains(" passed, 0 failed") && !out.contains("ERROR"), "{kernel}:\n{out}");
    }
}

/// `tilekit tune` on the interpreter into a cache of its own; `tilekit run` then takes the tuned
/// configuration for a problem of the same bucket (and says so), unless --untuned; --clear
/// empties the cache.
#[test]
fn tune_caches_and_run_uses_it() {
    let root = std::env::temp_dir().join(format!("tilekit-cli-tune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let with_cache = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_tilekit")).args(args).env("TILEKIT_CACHE_DIR", &root).output().expect("the tilekit binary runs");
        assert_eq!(o.status.code(), Some(0), "tilekit {args:?}\nstdout:\n{}\nstderr:\n{}", stdout(&o), stderr(&o));
        stdout(&o)
    };
    let quick = ["--min-runs", "2", "--min-time-ms", "0", "--warmup", "0"];
    let mut args = vec!["tune", "vector_add", "--shape", "1001", "--json"];
    args.extend(quick);
    let first: Value = serde_json::from_str(&with_cache(&args)).unwrap();
    assert_eq!(first["from_cache"], false);
    assert_eq!(first["strategy"], "exhaustive");
    assert_eq!(first["key"]["problem"], "1024 f32");
    let candidates = first["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), kernels::find("vector_add").unwrap().configs().len());
    assert!(candidates.iter().all(|c| c["outcome"] == "timed" && c["median_s"].as_f64().unwrap() > 0.0), "{candidates:?}");
    let best = first["config"].as_str().unwrap().to_string();
    let file = first["cache_file"].as_str().unwrap().to_string();
    assert!(std::path::Path::new(&file).starts_with(root.join("tune")));

    let again = with_cache(&["tune", "vector_add", "--shape", "1001"]);
    assert!(again.contains("from the tuning cache") && again.contains(&best), "{again}");

    let run = with_cache(&["run", "vector_add", "--shape", "1000", "--json"]);
    let run: Value = serde_json::from_str(&run).unwrap();
    let record = &run["results"][0];
    assert_eq!((record["config"].as_str().unwrap(), record["config_source"].as_str().unwrap()), (best.as_str(), "tuned"), "{run}");
    let table = with_cache(&["run", "vector_add", "--shape", "1000"]);
    assert!(table.contains("tuned configuration") && table.contains(&file), "{table}");
    let untuned: Value = serde_json::from_str(&with_cache(&["run", "vector_add", "--shape", "1000", "--untuned", "--json"])).unwrap();
    assert_eq!(untuned["results"][0]["config_source"], "default");
    let given: Value = serde_json::from_str(&with_cache(&["run", "vector_add", "--shape", "1000", "--config", "BLOCK=64", "--json"])).unwrap();
    assert_eq!(given["results"][0]["config_source"], "given");

    let mut model = vec!["tune", "softmax", "--shape", "5x300", "--device", "emulator", "--model", "--json"];
    model.extend(quick);
    let m: Value = serde_json::from_str(&with_cache(&model)).unwrap();
    assert_eq!(m["strategy"], "model");
    assert!(m["candidates"].as_array().unwrap().iter().any(|c| c["outcome"] == "skipped" && c["estimate_s"].as_f64().is_some()), "{m}");

    let cleared = with_cache(&["tune", "--clear"]);
    assert!(cleared.contains("removed 2 entries"), "{cleared}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn tune_refuses_what_it_cannot_do() {
    bad_input(&["tune", "vector_add", "--config", "BLOCK=64", "--cache-dir", "/tmp"], &["--config does not apply"]);
    bad_input(&["tune", "nope", "--cache-dir", "/tmp"], &["unknown kernel `nope`"]);
    bad_input(&["tune", "vector_add", "--device", "nosuch", "--cache-dir", "/tmp"], &["no device called `nosuch`"]);
}

/// `TILEKIT_NAGA_RUNTIME_CHECKS`: `off` builds naga modules without wgpu's runtime checks (the
/// kernel still passes), `on` with them, anything else is an error naming the variable.
#[test]
fn naga_runtime_checks_switch() {
    let run = |value: &str| {
        Command::new(env!("CARGO_BIN_EXE_tilekit"))
            .args(["run", "softmax", "--shape", "7x300", "--device", "wgpu-naga"])
            .env("TILEKIT_NAGA_RUNTIME_CHECKS", value)
            .output()
            .expect("the tilekit binary runs")
    };
    let o = run("off");
    let (out, err) = (stdout(&o), stderr(&o));
    if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") && o.status.code() == Some(2) {
        skipped(&format!("no wgpu-naga device: {}", err.trim()));
        return;
    }
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("1 passed, 0 failed"), "{out}");
    let o = run("on");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run("sometimes");
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_ne!(o.status.code(), Some(0), "{all}");
    assert!(all.contains("TILEKIT_NAGA_RUNTIME_CHECKS is `sometimes`: expected `on` or `off`"), "{all}");
    assert!(!all.contains("panicked"), "{all}");
}

/// `tilekit ir --case` prints a saved case (a fuzz filetest) as it prints a kernel: the tile IR,
/// the GPU IR for a target and the SPIR-V, with the case's grid and configuration; a kernel
/// name beside it, or a file that is not a case, is refused with the reason.
#[test]
fn ir_prints_a_saved_case() {
    let case = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz/cuda-negated-three-input-max.tile");
    let text = ok(&["ir", "--case", case]);
    assert!(text.contains("program negmax(") && text.contains("grid [2, 1, 1]") && text.contains("num_warps=1"), "{text}");
    let gpu = ok(&["ir", "--case", case, "--gpu", "--target", "sm_90a"]);
    assert!(gpu.contains("32 threads (1 warps of 32)"), "{gpu}");
    assert!(ok(&["ir", "--case", case, "--spirv", "--target", "lavapipe"]).contains("OpEntryPoint"));
    let both = tilekit(&["ir", "softmax", "--case", case]);
    assert_eq!(both.status.code(), Some(2));
    assert!(stderr(&both).contains("cannot be used with"), "{}", stderr(&both));
    bad_input(&["ir", "--case", concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")], &["Cargo.toml", "line"]);
}
