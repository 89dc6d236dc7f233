//! The GPU IR (`tilekit ir --gpu`) as golden files (`tests/golden/gpu/*.gpu`; `TILEKIT_BLESS=1`
//! rewrites them): every value's layout, the layout conversions, the shared memory and the
//! pipelined loads are data a change to the lowering must answer for. Two sources: library
//! kernels on the targets whose lowering decisions matter most, and filetests,
//! `tests/gpu-ir/*.tile`: a tile program in its text form headed by `; target: PRESET`,
//! `; num_warps: N`, `; num_stages: N` and `; specialize: PARAM...` (scalar parameters known
//! to be multiples of 16), whose GPU IR is `tests/golden/gpu/NAME.gpu`.

#[path = "common/golden.rs"]
mod golden;
use golden::check_golden;

use tilekit::device::{launch_options, target_preset};
use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::Target;
use tilekit::kernels::{self, Problem};
use tilekit::{Config, DType};

fn gpu_ir(kernel: &str, problem: &Problem, config: &str, target: &Target) -> String {
    let k = kernels::find(kernel).unwrap();
    let config: Config = config.parse().unwrap();
    let plan = k.plan(problem, &config).unwrap();
    let options = launch_options(&LowerOptions::for_config(&config), &plan.launches[0]);
    tilekit::gpu::describe(&plan.launches[0].program, target, &options).unwrap()
}

fn golden(name: &str, kernel: &str, problem: &Problem, config: &str, target: &Target) {
    check_golden(&format!("gpu/{name}.gpu"), &gpu_ir(kernel, problem, config, target), &format!("{name}: the GPU IR"));
}

/// Flash attention on sm_90 with tensor-core tiles: both dots on `mma.sync`, the running row
/// maximum and sum carried in the accumulator's row layout (a slice of it), the probabilities
/// handed to the second dot in registers, K and V pipelined (K transposed in its ring); the one
/// conversion left is Q's, once, before the key loop.
#[test]
fn attention_sm90() {
    let p = Problem::new(&[4, 32, 4096, 64], DType::F16).with("causal", "1");
    golden("attention_sm90", "attention", &p, "BLOCK_M=128,BLOCK_N=64,num_warps=8,num_stages=3", &Target::cuda_sm90());
    let ir = gpu_ir("attention", &p, "BLOCK_M=128,BLOCK_N=64,num_warps=8,num_stages=3", &Target::cuda_sm90());
    assert!(ir.contains(", 1 layout conversions,"), "{ir}");
    // Two key loops (below the diagonal, then across it), each with K and V in flight.
    assert!(ir.contains("; num_stages = 3: 4 loads pipelined"), "{ir}");
}

/// Attention on lavapipe: no matrix instructions, so the FMA dot and no pipelining.
#[test]
fn attention_lavapipe() {
    let p = Problem::new(&[1, 2, 67, 64], DType::F32);
    golden("attention_lavapipe", "attention", &p, "BLOCK_M=32,BLOCK_N=16,num_warps=4,num_stages=3", &Target::lavapipe());
}

/// Pipelined matmul on sm_90 (cp.async ring, mma.sync).
#[test]
fn matmul_sm90() {
    let p = Problem::new(&[4096, 4096, 4096], DType::F16);
    golden("matmul_sm90", "matmul", &p, "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3", &Target::cuda_sm90());
}

/// Matmul on AMD CDNA (gfx942): the dot on MFMA 16x16x16 with warps of 64 in its fragment
/// layouts, operands staged through shared memory each K step (no asynchronous copies, so
/// nothing pipelined).
#[test]
fn matmul_gfx942() {
    let p = Problem::new(&[4096, 4096, 4096], DType::F16);
    golden("matmul_gfx942", "matmul", &p, "BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=3", &Target::amd_gfx942());
}

/// Matmul of f32 multiplied as tf32 on sm_90a: the dot on `mma.sync` m16n8k8 (wgmma is for
/// 16-bit operands here), both operands in cp.async rings of f32 (four to a 16-byte copy,
/// swizzled in 16-byte chunks), no tensor maps.
#[test]
fn matmul_tf32_sm90a() {
    let p = Problem::new(&[4096, 4096, 4096], DType::F32).with("precision", "tf32");
    let config = "BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=3";
    golden("matmul_tf32_sm90a", "matmul", &p, config, &Target::cuda_sm90a());
    let ir = gpu_ir("matmul", &p, config, &Target::cuda_sm90a());
    assert!(ir.contains("input_precision tf32") && ir.contains("#mma<m16n8k8"), "{ir}");
    assert!(ir.contains("2 loads pipelined") && !ir.contains("tensor maps"), "{ir}");
}

/// Matmul with B as N x K (`trans_b`, a linear layer's weight) on sm_90: B's tile is
/// contiguous along K, so its ring holds it as stored (`stored transposed`).
#[test]
fn matmul_trans_b_sm90() {
    let p = Problem::new(&[4096, 4096, 4096], DType::F16).with("trans_b", "1");
    golden("matmul_trans_b_sm90", "matmul", &p, "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3", &Target::cuda_sm90());
    let ir = gpu_ir("matmul", &p, "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3", &Target::cuda_sm90());
    assert!(ir.contains("#ring<3 stages, 256 x 64, swizzled, stored transposed, addresses stepped>"), "{ir}");
}

/// Matmul on sm_90a: both operands pipelined into 64-column panels with the 128-byte swizzle
/// (B's four panels side by side), copied as boxes of tensor maps (the masks bound M, N and K,
/// launch arguments the map's extents are made of), the dot on warpgroup matrix instructions,
/// every warp along M (each warpgroup 64 rows by all 256 columns).
#[test]
fn matmul_sm90a() {
    let p = Problem::new(&[4096, 4096, 4096], DType::F16);
    let config = "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3";
    golden("matmul_sm90a", "matmul", &p, config, &Target::cuda_sm90a());
    let ir = gpu_ir("matmul", &p, config, &Target::cuda_sm90a());
    assert!(ir.contains("#ring<3 stages, 64 x 256, swizzled, 64-column panels, tensor copies>"), "{ir}");
    assert!(ir.contains("; tensor maps, kernel parameters after the program's: a (M rows of K, row stride K, boxes of 128 x 64); b (K rows of N, row stride N, boxes of 64 x 64)"), "{ir}");
    // The accumulator crosses shared memory once, to be stored in 16-byte vectors.
    assert!(ir.contains(", 1 layout conversions,"), "{ir}");
    assert!(ir.contains("#mma<m16n8k16, warps [8, 1]> via wgmma"), "{ir}");
    // Results files record the instruction (`lowering`).
    let k = kernels::find("matmul").unwrap();
    let config: Config = config.parse().unwrap();
    let plan = k.plan(&p, &config).unwrap();
    let options = launch_options(&LowerOptions::for_config(&config), &plan.launches[0]);
    let d = tilekit::gpu::decisions(&plan.launches[0].program, &Target::cuda_sm90a(), &options).unwrap();
    assert_eq!(d.dots, ["wgmma m64n256k16, in flight across iterations"]);
    let d = tilekit::gpu::decisions(&plan.launches[0].program, &Target::cuda_sm90(), &options).unwrap();
    assert_eq!(d.dots, ["mma.sync m16n8k16"]);
}

/// Attention on sm_90a: both dots on warpgroup matrix instructions, Q and the probabilities
/// from registers, K (transposed) and V from their panels.
#[test]
fn attention_sm90a() {
    let p = Problem::new(&[4, 32, 4096, 128], DType::F16);
    let config = "BLOCK_M=128,BLOCK_N=64,num_warps=8,num_stages=3";
    golden("attention_sm90a", "attention", &p, config, &Target::cuda_sm90a());
    let ir = gpu_ir("attention", &p, config, &Target::cuda_sm90a());
    assert_eq!(ir.matches(" via wgmma").count(), 2, "{ir}");
}

/// Softmax on lavapipe (warp of 8): a row per program, reductions by shuffles then shared memory.
#[test]
fn softmax_lavapipe() {
    let p = Problem::new(&[37, 1000], DType::F16);
    golden("softmax_lavapipe", "softmax", &p, "num_warps=4", &Target::lavapipe());
}

/// Every filetest of tests/gpu-ir against its golden GPU IR.
#[test]
fn filetests() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gpu-ir");
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "tile")).collect();
    files.sort();
    assert!(!files.is_empty(), "no filetests in {}", dir.display());
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let header =
            |key: &str| text.lines().find_map(|l| l.trim().strip_prefix(';').and_then(|h| h.trim().strip_prefix(key)).map(|v| v.trim().to_string()));
        let target = target_preset(&header("target:").unwrap_or_else(|| panic!("{name}: no `; target:` line"))).unwrap();
        let mut options = LowerOptions::new(header("num_warps:").map_or(4, |v| v.parse().unwrap()));
        options.num_stages = header("num_stages:").map_or(1, |v| v.parse().unwrap());
        let program = tilekit::text::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        for param in header("specialize:").unwrap_or_default().split_whitespace() {
            let p = program.params.iter().position(|q| q.name == param).unwrap_or_else(|| panic!("{name}: no parameter `{param}`"));
            options.divisible_by_16 |= 1 << p;
        }
        let ir = tilekit::gpu::describe(&program, &target, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_golden(&format!("gpu/{name}.gpu"), &ir, &format!("{name}: the GPU IR"));
    }
}

/// Matmul on the H200 through Vulkan: the dot on cooperative matrices 16x16x16, its K loop's
/// accumulator kept in them (`#coop`) and moved into the exchange map once after the loop;
/// operands staged each K step (Vulkan has no asynchronous copies) in the staging array, 16
/// bytes per store, since every thread loads runs of eight elements along the stored rows, and
/// the next K step's tiles loaded into registers while this one's matrix work runs.
#[test]
fn matmul_h200_vulkan() {
    let p = Problem::new(&[4096, 4096, 4096], DType::F16);
    let config = "BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=3";
    golden("matmul_h200_vulkan", "matmul", &p, config, &Target::h200_vulkan());
    let ir = gpu_ir("matmul", &p, config, &Target::h200_vulkan());
    assert!(ir.contains("dot") && ir.contains("#coop<16x16, warps [2, 2]>"), "{ir}");
    // Both operands, 128 rows of 32 + 8 and 32 rows of 128 + 8, twice: the loop's one dot
    // alternates between two buffers.
    assert!(ir.contains("18944 x f16 staged in 16-byte vectors") && ir.contains("staged in two buffers by iteration parity"), "{ir}");
    // bf16 takes the same cooperative matrices (VK_KHR_shader_bfloat16), its operands staged
    // as bf16 bits.
    let p = Problem::new(&[4096, 4096, 4096], DType::BF16);
    let ir = gpu_ir("matmul", &p, config, &Target::h200_vulkan());
    assert!(ir.contains("#coop<16x16, warps [2, 2]>") && ir.contains("18944 x bf16 staged"), "{ir}");
    // What a results file records of it, and of a tile whose two buffers would not fit 48 KiB
    // (128 x 256 x 32: 27 KiB each) and of one stage (no prefetch, one buffer).
    let dots = |config: &str| {
        let config: Config = config.parse().unwrap();
        let plan = kernels::find("matmul").unwrap().plan(&p, &config).unwrap();
        let options = launch_options(&LowerOptions::for_config(&config), &plan.launches[0]);
        tilekit::gpu::decisions(&plan.launches[0].program, &Target::h200_vulkan(), &options).unwrap().dots
    };
    assert_eq!(dots(config), ["cooperative matrix 16x16x16, operands in two staging buffers"]);
    assert_eq!(dots("BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=4"), ["cooperative matrix 16x16x16"]);
    assert_eq!(dots("BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=1"), ["cooperative matrix 16x16x16"]);
}

/// Flash attention on the H200 through Vulkan: both dots on cooperative matrices, each result
/// moved into the exchange map at once (the softmax reads its rows there, a slice of it carries
/// the row statistics), the output accumulator carried in that map and moved into cooperative
/// matrices by its dot; K and V, which only feed the dots, loaded one iteration ahead. Causal:
/// two key loops (the blocks below the diagonal, then the diagonal's), two dots each.
#[test]
fn attention_h200_vulkan() {
    let p = Problem::new(&[4, 32, 4096, 64], DType::F16).with("causal", "1");
    let config = "BLOCK_M=64,BLOCK_N=64,num_warps=4,num_stages=2";
    golden("attention_h200_vulkan", "attention", &p, config, &Target::h200_vulkan());
    let ir = gpu_ir("attention", &p, config, &Target::h200_vulkan());
    assert_eq!(ir.matches("via cooperative matrices").count(), 4, "{ir}");
    assert_eq!(ir.matches("loaded one iteration ahead").count(), 4, "{ir}");
}
