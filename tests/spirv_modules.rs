//! The SPIR-V of every library kernel passes `spirv-val --target-env vulkan1.3`, plain and with
//! its grid folded, and the disassembly of three kernels (and of vector add folded) matches its
//! golden file (`tests/golden/*.spvasm`, rspirv's format). `TILEKIT_BLESS=1` rewrites the golden
//! files.

#[path = "common/golden.rs"]
mod golden;
use golden::check_golden;

#[path = "common/spirv_val.rs"]
mod spirv_val;
use spirv_val::spirv_val;
use tilekit::device::launch_options;
use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::Target;
use tilekit::kernels::{self, Problem};
use tilekit::{Config, DType};
use tilekit_spirv::{compile, disasm::disassemble_with_rspirv};

#[test]
fn every_library_kernel_passes_spirv_val() {
    let mut modules = 0;
    for target in [Target::lavapipe(), Target::h200_vulkan()] {
        for k in kernels::all() {
            for &dtype in k.dtypes() {
                let problem = k.test_problems(dtype).into_iter().last().expect("test problems");
                for config in k.configs().iter().take(2) {
                    let Ok(plan) = k.plan_on(&problem, config, &target) else { continue };
                    let base = LowerOptions::for_config(config);
                    // Unspecialized, and specialized on the launch's arguments as a device does,
                    // with its grid as it is and folded.
                    let variants = |l| {
                        let spec = launch_options(&base, l);
                        [(l, base), (l, spec), (l, spec.with_fold_grid(true))]
                    };
                    for (launch, options) in plan.launches.iter().flat_map(variants) {
                        let what = format!(
                            "{} {problem} [{config}] on {} ({:#x}{})",
                            k.name(),
                            target.name,
                            options.divisible_by_16,
                            if options.fold_grid { ", folded" } else { "" }
                        );
                        match compile(&launch.program, &target, &options) {
                            Ok(c) => {
                                spirv_val(&c.kernel.words, &what);
                                modules += 1;
                            }
                            // A configuration too large for the target is an error, not a module.
                            Err(e) => assert!(e.to_string().contains("shared memory") || e.to_string().contains("registers"), "{what}: {e}"),
                        }
                    }
                }
            }
        }
    }
    assert!(modules > 100, "only {modules} modules were checked");
}

fn golden(name: &str, kernel: &str, shape: &[usize], dtype: DType, config: &str) {
    golden_with(name, kernel, shape, dtype, config, false)
}

fn golden_with(name: &str, kernel: &str, shape: &[usize], dtype: DType, config: &str, fold_grid: bool) {
    let k = kernels::find(kernel).unwrap();
    let config: Config = config.parse().unwrap();
    let plan = k.plan(&Problem::new(shape, dtype), &config).unwrap();
    // Specialized on the launch's arguments, as a device compiles it.
    let options = launch_options(&LowerOptions::for_config(&config), &plan.launches[0]).with_fold_grid(fold_grid);
    let c = compile(&plan.launches[0].program, &Target::lavapipe(), &options).unwrap();
    spirv_val(&c.kernel.words, name);
    let text = disassemble_with_rspirv(&c.kernel.words);
    check_golden(&format!("{name}.spvasm"), &text, &format!("{name}: the SPIR-V"));
}

#[test]
fn golden_vector_add() {
    golden("vector_add", "vector_add", &[4096], DType::F32, "BLOCK=256,num_warps=4");
}

/// The folded variant: the logical grid after `n` in the push constants, the early return and
/// the program id derived from the linear workgroup index; the rest as in `vector_add`.
#[test]
fn golden_vector_add_folded() {
    golden_with("vector_add.folded", "vector_add", &[4096], DType::F32, "BLOCK=256,num_warps=4", true);
}

#[test]
fn golden_softmax() {
    golden("softmax", "softmax", &[7, 128], DType::F32, "num_warps=4");
}

#[test]
fn golden_matmul_small() {
    golden("matmul_16x16x16", "matmul", &[32, 32, 32], DType::F32, "BLOCK_M=16,BLOCK_N=16,BLOCK_K=16,GROUP_M=1,num_warps=1,num_stages=1");
}

/// The conversions written around NVIDIA's folds (an f16 rounded from f32 widened through its
/// bits; abs and narrow negation in forms the driver cannot take as non-negative or in range)
/// pass spirv-val on the H200's target, which has the f16 float controls lavapipe lacks.
#[test]
fn conversions_around_driver_folds_pass_spirv_val() {
    for dtype in ["i8", "i16", "i32", "i64"] {
        let text = format!(
            "program c(x: buffer<f32, read>, y: buffer<f32, write>, i: buffer<{dtype}, read>, j: buffer<i64, write>, k: buffer<f16, write>) grid 1 {{
  %0 = arange 0, 64 : [64]xi32
  %1 = load x[%0] : [64]xf32
  %2 = cast %1 : [64]xf16
  %3 = cast %2 : [64]xf32
  store y[%0], %3
  %4 = load i[%0] : [64]x{dtype}
  %5 = abs %4 : [64]x{dtype}
  %6 = neg %4 : [64]x{dtype}
  %7 = cast %5 : [64]xi64
  store j[%0], %7
  %8 = cast %6 : [64]xf16
  store k[%0], %8
}}"
        );
        let program = tilekit_core::text::parse(&text).unwrap();
        let target = Target::h200_vulkan();
        let c = compile(&program, &target, &LowerOptions::new(2)).unwrap_or_else(|e| panic!("{dtype}: {e}"));
        spirv_val(&c.kernel.words, &format!("conversions {dtype}"));
    }
}

/// An f16 rounded from an integer and carried through a loop, an `if` and a selection, then
/// widened: on the H200's target every such widening goes through the value's bits, not an
/// `OpFConvert` the driver folds with the rounding (NVIDIA's stored f32(f16(i16 -29663)) as
/// -29663: cli/tests/fuzz/nvidia-i16-to-f16-unrounded.tile).
#[test]
fn rounded_f16_through_control_flow_widens_by_bits() {
    let text = "program r(i: buffer<i16, read>, y: buffer<f32, write>, c: i32) grid 1 {
  %0 = arange 0, 64 : [64]xi32
  %1 = load i[%0] : [64]xi16
  %2 = cast %1 : [64]xf16
  %3 = const 0 : i32
  %4 = const 1 : i32
  %5 = for %3 to %4 step %4 iter(%2) : [64]xf16 body(%6: i32, %7: [64]xf16) {
    yield %7
  }
  %8 = arg 2 : i32
  %9 = cmp lt %8, %4 : i1
  %10 = if %9 : [64]xf16 then {
    yield %5
  } else {
    yield %2
  }
  %11 = cmp lt %0, %0 : [64]xi1
  %12 = select %11, %10, %5 : [64]xf16
  %13 = cast %12 : [64]xf32
  store y[%0], %13
}";
    assert_f16_widened_by_bits(text, "rounded f16 through control flow");
}

/// The same through a minimum, a maximum and a negation, then a conversion to i16: NVIDIA's
/// driver moved the rounding of `min(f16(x), f16(x))` past the minimum and folded it with the
/// widening, so an i16 32766 came back as 32766, not as the saturated 32767 of f16 32768
/// (seed 52 program 4772 on the H100's Vulkan driver, 580.159.04).
#[test]
fn rounded_f16_through_min_max_and_neg_widens_by_bits() {
    let text = "program r(i: buffer<i16, read>, y: buffer<i16, write>, z: buffer<f32, write>) grid 1 {
  %0 = arange 0, 64 : [64]xi32
  %1 = load i[%0] : [64]xi16
  %2 = cast %1 : [64]xf16
  %3 = min %2, %2 : [64]xf16
  %4 = cast %3 : [64]xi16
  store y[%0], %4
  %5 = neg %2 : [64]xf16
  %6 = max %5, %2 : [64]xf16
  %7 = abs %6 : [64]xf16
  %8 = cast %7 : [64]xf32
  store z[%0], %8
}";
    assert_f16_widened_by_bits(text, "rounded f16 through min, max and neg");
}

/// Compiles `text` for the H200's Vulkan target and checks that no f16 value is widened by an
/// `OpFConvert` (every f16 there is a rounding the driver could fold with it).
fn assert_f16_widened_by_bits(text: &str, what: &str) {
    let program = tilekit_core::text::parse(text).unwrap();
    let c = compile(&program, &Target::h200_vulkan(), &LowerOptions::new(1)).unwrap();
    spirv_val(&c.kernel.words, what);
    let dis = tilekit_spirv::disasm::disassemble(&c.kernel.words);
    let half: Vec<&str> = dis.lines().filter_map(|l| l.split_once(" = OpTypeFloat 16").map(|(id, _)| id.trim())).collect();
    let float = dis.lines().find_map(|l| l.split_once(" = OpTypeFloat 32").map(|(id, _)| id.trim())).expect("an f32 type");
    assert_eq!(half.len(), 1, "{dis}");
    // The only f16 -> f32 conversion left would name an f16 operand: none may.
    let f16_values: Vec<&str> = dis
        .lines()
        .filter_map(|l| l.split_once(" = ").and_then(|(id, rest)| rest.split_whitespace().nth(1).filter(|t| *t == half[0]).map(|_| id.trim())))
        .collect();
    for l in dis.lines().filter(|l| l.contains(&format!("OpFConvert {float} "))) {
        let operand = l.split_whitespace().last().unwrap();
        assert!(!f16_values.contains(&operand), "an f16 widened by OpFConvert: {l}\n{dis}");
    }
}

/// Matmul and attention on the H200's Vulkan target lower their f16 and bf16 dots to cooperative
/// matrices; the modules pass SPIRV-Tools v2025.3's validator, which checks the extension's
/// types and instructions (without the capability the same module is refused, so the check
/// reads them).
#[test]
fn cooperative_matrix_modules_pass_spirv_val() {
    let target = Target::h200_vulkan();
    for (kernel, shape, config) in [
        ("matmul", vec![256, 192, 160], "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=1"),
        ("attention", vec![1, 2, 128, 64], "BLOCK_M=64,BLOCK_N=64,num_warps=4,num_stages=1"),
    ] {
        let k = kernels::find(kernel).expect("a library kernel");
        for dtype in [DType::F16, DType::BF16] {
            let problem = Problem::new(&shape, dtype);
            let config: Config = config.parse().expect("a configuration");
            let plan = k.plan(&problem, &config).expect("a plan");
            for launch in &plan.launches {
                let options = launch_options(&LowerOptions::for_config(&config), launch);
                let c = compile(&launch.program, &target, &options).unwrap_or_else(|e| panic!("{kernel} {dtype}: {e}"));
                let text = disassemble_with_rspirv(&c.kernel.words);
                assert!(text.contains("OpCooperativeMatrixMulAddKHR") && text.contains("OpMemoryModel Logical Vulkan"), "{kernel} {dtype}: {text}");
                assert!(c.kernel.requirements.cooperative_matrix, "{kernel} {dtype}");
                // bf16 operands are cooperative matrices of SPV_KHR_bfloat16's type, loaded from
                // the bf16 bits staged in shared memory.
                let bf16 = dtype == DType::BF16;
                assert_eq!(c.kernel.requirements.cooperative_matrix_bf16, bf16, "{kernel} {dtype}");
                assert_eq!(text.contains("OpCapability BFloat16CooperativeMatrixKHR"), bf16, "{kernel} {dtype}: {text}");
                assert_eq!(text.contains("OpTypeFloat 16 BFloat16KHR"), bf16, "{kernel} {dtype}: {text}");
                spirv_val(&c.kernel.words, &format!("{kernel} {dtype} on {}", target.name));
                // Without the capability the same module is refused: OpCapability
                // CooperativeMatrixKHR (6022) dropped, and for bf16 BFloat16CooperativeMatrixKHR
                // (5118), which implies it, dropped too or alone.
                let strip = |words: &[u32], caps: &[u32]| -> Vec<u32> {
                    let mut w = words.to_vec();
                    for &cap in caps {
                        let at = w.windows(2).position(|p| p == [2 << 16 | 17, cap]).expect("the capability");
                        w.drain(at..at + 2);
                    }
                    w
                };
                let mut without: Vec<Vec<u32>> = vec![];
                if bf16 {
                    without.push(strip(&c.kernel.words, &[6022, 5118]));
                    without.push(strip(&c.kernel.words, &[5118]));
                } else {
                    without.push(strip(&c.kernel.words, &[6022]));
                }
                use spirv_tools::val::Validator;
                let v = spirv_tools::val::create(Some(spirv_tools::TargetEnv::Vulkan_1_3));
                for stripped in without {
                    assert!(v.validate(&stripped, None).is_err(), "{kernel} {dtype}: a module without the capability passes");
                }
            }
        }
    }
}

/// f32 -> bf16 keeps the rounded bf16 in the high half of a word, so that two stored side by
/// side pack with one mask and one or (`legalize::bf16_pack_high_halves`) instead of being
/// shifted down and up again; the NaN test is `OpIsNan` where the module keeps NaNs and on the
/// bits where it does not. Every module passes spirv-val.
#[test]
fn bf16_results_pack_from_their_high_halves() {
    let k = kernels::find("gelu").expect("the gelu kernel");
    let problem = Problem::new(&[1000], DType::BF16);
    for target in [Target::h200_vulkan(), Target::lavapipe(), Target::vulkan_baseline()] {
        let config = kernels::default_config_for(k.as_ref(), &problem, &target);
        let plan = k.plan_on(&problem, &config, &target).expect("a plan");
        let launch = &plan.launches[0];
        let options = launch_options(&LowerOptions::for_config(&config), launch);
        let c = compile(&launch.program, &target, &options).unwrap_or_else(|e| panic!("{}: {e}", target.name));
        let text = disassemble_with_rspirv(&c.kernel.words);
        let what = format!("gelu bf16 on {}", target.name);
        let high_mask = text.lines().find(|l| l.contains("OpConstant") && l.ends_with(" 4294901760")).expect("the high-half mask");
        let mask_id = high_mask.split_whitespace().next().unwrap().to_string();
        let packs = text.lines().filter(|l| l.contains("OpBitwiseAnd") && l.split_whitespace().any(|w| w == mask_id)).count();
        // Each thread stores 16 bytes at a time: four words of two bf16.
        assert!(packs >= 4 && packs % 4 == 0, "{what}: {packs} words packed from high halves\n{text}");
        assert_eq!(text.contains("OpIsNan"), target.ieee_preserve, "{what}: {text}");
        spirv_val(&c.kernel.words, &what);
    }
}

/// The workgroup-scope matmul of VK_NV_cooperative_matrix2 (`tilekit_spirv::coopmat2`) passes
/// SPIRV-Tools v2025.3 for every shape the device probe times, with the tensor-addressed loads
/// and stores it is built on; shapes it cannot emit are refused with the reason.
#[test]
fn tensor_matmul_modules_pass_spirv_val() {
    use tilekit_spirv::coopmat2::{tensor_matmul, TensorMatmul};
    for (m, n, k, threads) in [(128, 128, 32, 128), (128, 256, 32, 256), (256, 128, 64, 256), (64, 64, 16, 128), (128, 128, 64, 256)] {
        let shape = TensorMatmul { block_m: m, block_n: n, block_k: k, threads, group_m: 8, dtype: DType::F16 };
        let kernel = tensor_matmul(&shape).unwrap();
        spirv_val(&kernel.words, &kernel.name);
        let bf16 = tensor_matmul(&TensorMatmul { dtype: DType::BF16, ..shape }).unwrap();
        spirv_val(&bf16.words, &bf16.name);
        assert!(bf16.requirements.cooperative_matrix_bf16 && !kernel.requirements.cooperative_matrix_bf16);
        let text = disassemble_with_rspirv(&kernel.words);
        for op in ["OpCooperativeMatrixLoadTensorNV", "OpCooperativeMatrixStoreTensorNV", "OpCooperativeMatrixMulAddKHR", "OpTensorLayoutSliceNV"] {
            assert!(text.contains(op), "{}: no {op} in\n{text}", kernel.name);
        }
        assert!(kernel.requirements.cooperative_matrix2 && kernel.threads == threads);
        assert_eq!(shape.grid(1000, 1001), [1000u32.div_ceil(m) * 1001u32.div_ceil(n), 1, 1]);
    }
    let bad = TensorMatmul { block_m: 100, block_n: 128, block_k: 32, threads: 128, group_m: 8, dtype: DType::F16 };
    assert!(tensor_matmul(&bad).unwrap_err().to_string().contains("multiples of 16"));
    let f32 = TensorMatmul { dtype: DType::F32, block_m: 128, ..bad };
    assert!(tensor_matmul(&f32).unwrap_err().to_string().contains("only f16 and bf16"));
}
