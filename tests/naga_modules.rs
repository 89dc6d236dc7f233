//! The naga backend's modules: every library kernel, dtype and configuration becomes a module
//! naga validates, whose WGSL naga's own front end reads back, whose MSL and HLSL naga writes
//! and whose SPIR-V (naga's writer) passes spirv-val; what naga cannot express is refused by
//! name. The WGSL of three kernels matches its golden file
//! (`tests/golden/naga/*.wgsl`); `TILEKIT_BLESS=1` rewrites them.

#[path = "common/golden.rs"]
mod golden;
use golden::check_golden;

#[path = "common/spirv_val.rs"]
mod spirv_val;
use spirv_val::system_spirv_val as spirv_val;
use tilekit::device::launch_options;
use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::Target;
use tilekit::kernels::{self, Problem};
use tilekit::{Config, DType};
use tilekit_naga::{compile, target_for, Language, NagaError};

#[test]
fn every_library_kernel_is_a_valid_module() {
    let mut modules = 0;
    for (device, shuffles) in [(Target::lavapipe(), true), (Target::lavapipe(), false), (Target::h200_vulkan(), true)] {
        let target = target_for(&device, shuffles);
        for k in kernels::all() {
            for &dtype in k.dtypes() {
                let problem = k.test_problems(dtype).into_iter().last().expect("test problems");
                for config in k.configs().iter().take(2) {
                    let Ok(plan) = k.plan(&problem, config) else { continue };
                    let base = LowerOptions::for_config(config);
                    let variants = |l| {
                        let spec = launch_options(&base, l);
                        [(l, base), (l, spec), (l, spec.with_fold_grid(true))]
                    };
                    for (launch, options) in plan.launches.iter().flat_map(variants) {
                        let what = format!("{} {problem} [{config}] on {}{}", k.name(), target.name, if options.fold_grid { ", folded" } else { "" });
                        let c = match compile(&launch.program, &target, &options) {
                            Ok(c) => c,
                            Err(e) => {
                                let s = e.to_string();
                                assert!(s.contains("shared memory") || s.contains("registers"), "{what}: {e}");
                                continue;
                            }
                        };
                        let wgsl = c.kernel.wgsl().unwrap_or_else(|e| panic!("{what}: {e}"));
                        let back =
                            naga::front::wgsl::parse_str(&wgsl).unwrap_or_else(|e| panic!("{what}: naga cannot read its WGSL back: {e}\n{wgsl}"));
                        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), c.kernel.capabilities)
                            .validate(&back)
                            .unwrap_or_else(|e| panic!("{what}: the WGSL read back does not validate: {e:?}"));
                        c.kernel.msl().unwrap_or_else(|e| panic!("{what}: {e}"));
                        c.kernel.hlsl().unwrap_or_else(|e| panic!("{what}: {e}"));
                        spirv_val(&c.kernel.spirv().unwrap_or_else(|e| panic!("{what}: {e}")), &what);
                        modules += 1;
                    }
                }
            }
        }
    }
    assert!(modules > 100, "only {modules} modules were checked");
}

/// What naga cannot express is an error naming the operation and why, never a module.
#[test]
fn what_naga_cannot_express_is_refused_by_name() {
    let target = target_for(&Target::lavapipe(), true);
    for (text, names) in [
        (
            "program a(x: buffer<f32, read_write>) grid 1 {\n  %0 = arange 0, 8 : [8]xi32\n  %1 = load x[%0] : [8]xf32\n  %2 = atomic_max x[%0], %1 : [8]xf32\n}",
            ["atomic_max", "f32"],
        ),
        (
            "program c(x: buffer<i64, read>, y: buffer<bf16, write>) grid 1 {\n  %0 = arange 0, 8 : [8]xi32\n  %1 = load x[%0] : [8]xi64\n  %2 = cast %1 : [8]xbf16\n  store y[%0], %2\n}",
            ["i64", "bf16"],
        ),
    ] {
        let program = tilekit_core::text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let e = compile(&program, &target, &LowerOptions::new(1)).expect_err(text);
        assert!(matches!(e, tilekit_naga::CompileError::Emit(NagaError::Unsupported { .. })), "{e}");
        let e = e.to_string();
        for n in names {
            assert!(e.contains(n), "`{n}` not in: {e}");
        }
    }
}

fn golden(name: &str, kernel: &str, shape: &[usize], dtype: DType, config: &str) {
    let k = kernels::find(kernel).unwrap();
    let config: Config = config.parse().unwrap();
    let plan = k.plan(&Problem::new(shape, dtype), &config).unwrap();
    let options = launch_options(&LowerOptions::for_config(&config), &plan.launches[0]);
    let c = compile(&plan.launches[0].program, &target_for(&Target::lavapipe(), true), &options).unwrap();
    let text = c.kernel.text(Language::Wgsl).unwrap();
    check_golden(&format!("naga/{name}.wgsl"), &text, &format!("{name}: the WGSL"));
}

#[test]
fn golden_vector_add() {
    golden("vector_add", "vector_add", &[4096], DType::F32, "BLOCK=256,num_warps=4");
}

#[test]
fn golden_softmax() {
    golden("softmax", "softmax", &[7, 128], DType::F32, "num_warps=4");
}

#[test]
fn golden_matmul_small() {
    golden("matmul_16x16x16", "matmul", &[32, 32, 32], DType::F32, "BLOCK_M=16,BLOCK_N=16,BLOCK_K=16,GROUP_M=1,num_warps=1,num_stages=1");
}
