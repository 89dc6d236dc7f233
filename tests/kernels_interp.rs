//! Every library kernel, every supported dtype, every test problem and its first two
//! configurations, on the interpreter, against the kernel's f64 reference.

#[macro_use]
mod common;

use tilekit::Device;

fn check_kernel(name: &str) {
    common::check_kernel(name, &Device::Interpreter)
}

/// Every LayerNorm configuration on rows that fill its block exactly.
#[test]
fn layernorm_every_configuration() {
    common::check_every_config("layernorm", &common::whole_row_layernorms(), &Device::Interpreter);
}

kernel_tests!();

/// Attention's tensor-core tiles plan where their registers fit and are refused as unfit, with
/// the reason, where they would spill (f16 at D = 128 fits 128 x 64 on 8 warps; bf16 does not).
#[test]
fn attention_refuses_tiles_that_would_spill() {
    use tilekit::kernels::{self, KernelError, Problem};
    use tilekit::{Config, DType};
    let k = kernels::find("attention").unwrap();
    let config = Config::new().with("BLOCK_M", 128).with("BLOCK_N", 64).with("num_warps", 8).with("num_stages", 3);
    assert!(k.plan(&Problem::new(&[1, 1, 256, 128], DType::F16), &config).is_ok());
    assert!(k.plan(&Problem::new(&[1, 1, 256, 64], DType::BF16), &config).is_ok());
    match k.plan(&Problem::new(&[1, 1, 256, 128], DType::BF16), &config) {
        Err(e @ KernelError::Unfit(_)) => {
            let msg = e.to_string();
            assert!(msg.contains("BLOCK_M = 128, BLOCK_N = 64 at D = 128") && msg.contains("spill"), "{msg}");
        }
        other => panic!("bf16 D = 128 on 128 x 64: {:?}", other.map(|_| ())),
    }
    // The default configuration plans every test problem of every dtype.
    let default = k.configs()[0].clone();
    for &dtype in k.dtypes() {
        for problem in k.test_problems(dtype) {
            assert!(k.plan(&problem, &default).is_ok(), "{problem}");
        }
    }
}

/// What a configuration may hold in registers is the target's: counted with its warp width
/// against its register file, so a tile refused on NVIDIA (255 registers, warps of 32) plans on
/// wave64 AMD (512 a lane) and on lavapipe (no register file), and an `occupancy` request plans
/// only where ptxas receives it. Each refusal names the target and its registers.
#[test]
fn plans_follow_the_targets_registers_and_warps() {
    use tilekit::gpu::Target;
    use tilekit::kernels::{self, KernelError, Problem};
    use tilekit::{Config, DType};
    let unfit = |kernel: &str, problem: &Problem, config: &Config, target: &Target| -> Option<String> {
        match kernels::find(kernel).unwrap().plan_on(problem, config, target) {
            Ok(_) => None,
            Err(e @ KernelError::Unfit(_)) => Some(e.to_string()),
            Err(e) => panic!("{kernel} {problem} [{config}] on {}: not a refusal for the target: {e}", target.name),
        }
    };
    let (baseline, sm90, lavapipe, gfx90a, gfx1100) =
        (Target::vulkan_baseline(), Target::cuda_sm90(), Target::lavapipe(), Target::amd_gfx90a(), Target::amd_gfx1100());

    // softmax 8192 columns on 2 warps: 128 elements a thread of 32, 64 of 64.
    let row = Problem::new(&[2, 8192], DType::F32);
    let two = Config::new().with("num_warps", 2);
    for t in [&baseline, &sm90, &gfx1100] {
        let why = unfit("softmax", &row, &two, t).unwrap_or_else(|| panic!("softmax on 2 warps plans on {}", t.name));
        assert!(why.contains("128 elements per thread") && why.contains(&t.name) && why.contains("registers"), "{why}");
    }
    assert!(kernels::find("softmax").unwrap().plan(&row, &two).is_err(), "plan is plan_on the baseline");
    for t in [&lavapipe, &gfx90a] {
        assert_eq!(unfit("softmax", &row, &two, t), None, "softmax on 2 warps on {}", t.name);
    }
    let bf16_row = Problem::new(&[2, 8192], DType::BF16);
    assert!(unfit("rmsnorm_quant", &bf16_row, &two, &sm90).is_some());
    assert_eq!(unfit("rmsnorm_quant", &bf16_row, &two, &gfx90a), None);

    // f32 matmul 128 x 128 x 32 on 4 warps: 192 elements a thread of 32 (unpipelined), 96 of 64.
    let mm = Problem::new(&[256, 256, 64], DType::F32);
    let tile =
        Config::new().with("BLOCK_M", 128).with("BLOCK_N", 128).with("BLOCK_K", 32).with("GROUP_M", 8).with("num_warps", 4).with("num_stages", 3);
    let why = unfit("matmul", &mm, &tile, &sm90).expect("an unpipelined 128 x 128 f32 tile on 4 warps of 32");
    assert!(why.contains("192 accumulator and operand elements") && why.contains("cuda:sm_90"), "{why}");
    assert_eq!(unfit("matmul", &mm, &tile, &gfx90a), None);

    // bf16 attention at D = 128 on 128 x 64 and 8 warps: 192 words a thread of 32, 96 of 64.
    let att = Problem::new(&[1, 1, 256, 128], DType::BF16);
    let tc = Config::new().with("BLOCK_M", 128).with("BLOCK_N", 64).with("num_warps", 8).with("num_stages", 3);
    let why = unfit("attention", &att, &tc, &sm90).expect("bf16 128 x 64 at D = 128 on NVIDIA");
    assert!(why.contains("192 32-bit words") && why.contains("the 255 a thread has on cuda:sm_90"), "{why}");
    assert_eq!(unfit("attention", &att, &tc, &gfx90a), None);
    assert_eq!(unfit("attention", &att, &tc, &lavapipe), None);

    // An occupancy request plans where ptxas receives it, and nowhere else.
    let occ = Config::new().with("num_warps", 16).with("occupancy", 2);
    let wide = Problem::new(&[4, 12800], DType::F32);
    assert_eq!(unfit("softmax", &wide, &occ, &sm90), None);
    for t in [&baseline, &lavapipe, &gfx90a] {
        let why = unfit("softmax", &wide, &occ, t).unwrap_or_else(|| panic!("occupancy plans on {}", t.name));
        assert!(why.contains("ptxas") && why.contains(&t.name), "{why}");
    }
    let ln = Problem::new(&[2, 8192], DType::F16);
    let ln_occ = Config::new().with("BLOCK", 8192).with("num_warps", 8).with("PRELOAD", 0).with("occupancy", 3);
    assert_eq!(unfit("layernorm", &ln, &ln_occ, &sm90), None);
    assert!(unfit("layernorm", &ln, &ln_occ, &lavapipe).is_some());
    // Every kernel, not only those whose lists carry it: the lowering reads `occupancy` from any
    // configuration, so SPIR-V and AMDGCN would time a twin of the program without it.
    for k in kernels::all() {
        let problem = k.test_problems(k.dtypes()[0]).remove(0);
        let config = k.configs().remove(0).with("occupancy", 2);
        for t in [&baseline, &lavapipe, &gfx1100] {
            let why = unfit(k.name(), &problem, &config, t).unwrap_or_else(|| panic!("{} with occupancy plans on {}", k.name(), t.name));
            assert!(why.contains("ptxas"), "{}: {why}", k.name());
        }
        if let Err(KernelError::Unfit(why)) = k.plan_on(&problem, &config, &sm90) {
            assert!(!why.contains("ptxas"), "{}: {why}", k.name());
        }
    }
}
