//! The GPU IR (`tilekit ir --gpu`) of library kernels on the targets whose lowering decisions
//! matter most, as golden files (`tests/golden/gpu/*.gpu`; `TILEKIT_BLESS=1` rewrites them):
//! every value's layout, the layout conversions, the shared memory and the pipelined loads
//! are data a change to the lowering must answer for.

#[path = "common/golden.rs"]
mod golden;
use golden::check_golden;

use tilekit::device::launch_options;
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

/// Softmax on lavapipe (warp of 8): a row per program, reductions by shuffles then shared memory.
#[test]
fn softmax_lavapipe() {
    let p = Problem::new(&[37, 1000], DType::F16);
    golden("softmax_lavapipe", "softmax", &p, "num_warps=4", &Target::lavapipe());
}
