//! Named sets of benchmark problems.
//!
//! `default` is the set of shapes Triton's tutorials benchmark; `quick` is small enough for
//! lavapipe and the interpreter in CI. A suite caps what the CPU devices (the interpreter, the
//! emulator and Vulkan CPU drivers such as lavapipe) run, by design: they are here to show the
//! report works end to end and where a CPU stands, not to spend minutes on shapes sized for a GPU.

use crate::kernels::Problem;
use crate::DType;

/// One problem of a suite.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub kernel: &'static str,
    pub problem: Problem,
}

/// A named set of problems.
#[derive(Clone, Debug)]
pub struct Suite {
    pub name: &'static str,
    pub description: &'static str,
    /// The copy problem that measures the bandwidth ceiling (elements of f32) on GPUs...
    pub copy_elems: usize,
    /// ...and on CPU devices.
    pub cpu_copy_elems: usize,
    pub cases: Vec<Case>,
    /// CPU devices run only problems that move at most this many bytes and do at most this many
    /// FLOPs; larger ones are recorded as skipped.
    pub cpu_max_bytes: u64,
    pub cpu_max_flops: u64,
    /// Configurations per kernel when tuning (the kernel's first ones; `None`: all). Lavapipe
    /// builds every pipeline with LLVM, which takes seconds for the large configurations.
    pub max_configs: Option<usize>,
}

/// Names of the suites [`find`] knows.
pub const NAMES: [&str; 4] = ["default", "quick", "memory", "examples"];

fn case(kernel: &'static str, shape: &[usize], dtype: DType) -> Case {
    Case { kernel, problem: Problem::new(shape, dtype) }
}

/// The suite called `name`.
pub fn find(name: &str) -> Option<Suite> {
    match name {
        "default" | "triton" => Some(default()),
        "quick" => Some(quick()),
        "memory" => Some(memory()),
        "examples" => Some(examples()),
        _ => None,
    }
}

/// Triton's tutorial shapes: vector add 2^12..2^28 f32; softmax 4096 x 256..12800 f32;
/// LayerNorm 4096 x 1024..8192 f16; square matmul 256..8192 f16; attention B=4 H=32 D=64/128
/// S=1024..8192 f16.
pub fn default() -> Suite {
    let mut cases = Vec::new();
    for e in (12..=28).step_by(2) {
        cases.push(case("vector_add", &[1 << e], DType::F32));
    }
    for n in [256, 512, 1024, 2048, 4096, 8192, 12800] {
        cases.push(case("softmax", &[4096, n], DType::F32));
    }
    for n in [1024, 2048, 4096, 8192] {
        cases.push(case("layernorm", &[4096, n], DType::F16));
    }
    for n in [256, 512, 1024, 2048, 4096, 8192] {
        cases.push(case("matmul", &[n, n, n], DType::F16));
    }
    for d in [64, 128] {
        for s in [1024, 2048, 4096, 8192] {
            cases.push(case("attention", &[4, 32, s, d], DType::F16));
        }
    }
    Suite {
        name: "default",
        description: "Triton's tutorial shapes",
        copy_elems: 1 << 28,
        cpu_copy_elems: 1 << 22,
        cases,
        cpu_max_bytes: 16 << 20,
        cpu_max_flops: 1 << 28,
        max_configs: None,
    }
}

/// The shapes Triton's figures for the memory-bound kernels are quoted at (vector add 2^20,
/// 2^24, 2^28 f32; softmax 4096 x 1024, 4096, 12800 f32; LayerNorm 4096 x 1024, 8192 f16), and
/// one FMA matmul: a GPU run that fits in minutes.
pub fn memory() -> Suite {
    // Cheapest host checks first, so a run cut off by its time bound keeps the most figures:
    // each 2^28 configuration costs seconds of host work.
    let mut cases = Vec::new();
    for e in [20, 24] {
        cases.push(case("vector_add", &[1 << e], DType::F32));
    }
    for n in [1024, 4096, 12800] {
        cases.push(case("softmax", &[4096, n], DType::F32));
    }
    for n in [1024, 8192] {
        cases.push(case("layernorm", &[4096, n], DType::F16));
    }
    cases.push(case("vector_add", &[1 << 28], DType::F32));
    cases.push(case("matmul", &[4096, 4096, 4096], DType::F16));
    Suite { name: "memory", description: "the memory-bound shapes Triton is compared at, and one matmul", ..default_with(cases) }
}

/// Kernels as users write them first, untuned, at the sizes they are judged at against the copy
/// bandwidth: GELU over 2^24 bf16, a transpose of 8192^2 f32, residual + RMSNorm + int8
/// quantisation of 4096 x 8192 bf16, cross-entropy over 32000 classes and a row argmax.
pub fn examples() -> Suite {
    let cases = vec![
        case("gelu", &[1 << 24], DType::BF16),
        case("transpose", &[8192, 8192], DType::F32),
        case("rmsnorm_quant", &[4096, 8192], DType::BF16),
        case("cross_entropy", &[4096, 32000], DType::F32),
        case("argmax", &[8192, 8192], DType::F32),
    ];
    Suite { name: "examples", description: "kernels as users write them first", ..default_with(cases) }
}

fn default_with(cases: Vec<Case>) -> Suite {
    Suite { cases, ..default() }
}

/// Small problems of the same kernels, with ragged sizes, for CI on lavapipe and the interpreter.
pub fn quick() -> Suite {
    let cases = vec![
        case("vector_add", &[1 << 12], DType::F32),
        case("vector_add", &[1 << 16], DType::F32),
        case("vector_add", &[1_000_003], DType::F32),
        case("softmax", &[256, 256], DType::F32),
        case("softmax", &[128, 1000], DType::F32),
        case("layernorm", &[128, 1024], DType::F16),
        case("layernorm", &[64, 777], DType::F16),
        case("matmul", &[128, 128, 128], DType::F16),
        case("matmul", &[96, 80, 200], DType::F16),
        case("attention", &[1, 2, 128, 64], DType::F16),
    ];
    Suite {
        name: "quick",
        description: "small problems for CPU devices and CI",
        copy_elems: 1 << 22,
        cpu_copy_elems: 1 << 20,
        cases,
        cpu_max_bytes: 16 << 20,
        cpu_max_flops: 1 << 26,
        max_configs: Some(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels;

    #[test]
    fn every_suite_problem_plans_untuned() {
        for name in NAMES {
            let suite = find(name).unwrap();
            for c in &suite.cases {
                let k = kernels::find(c.kernel).unwrap_or_else(|| panic!("suite {name}: no kernel {}", c.kernel));
                // The default configuration, or the first that fits where it does not (softmax's
                // long rows), plans every problem.
                let config = kernels::default_config_for(k.as_ref(), &c.problem, &tilekit_core::gpu::Target::vulkan_baseline());
                k.plan(&c.problem, &config).unwrap_or_else(|e| panic!("suite {name}: {} {}: {e}", c.kernel, c.problem));
            }
        }
    }

    #[test]
    fn default_suite_has_the_tutorial_ranges() {
        let s = default();
        let sizes = |k: &str| s.cases.iter().filter(|c| c.kernel == k).map(|c| c.problem.shape.clone()).collect::<Vec<_>>();
        assert_eq!(sizes("vector_add").first().unwrap(), &vec![1 << 12]);
        assert_eq!(sizes("vector_add").last().unwrap(), &vec![1 << 28]);
        assert_eq!(sizes("softmax").last().unwrap(), &vec![4096, 12800]);
        assert_eq!(sizes("matmul").last().unwrap(), &vec![8192, 8192, 8192]);
        assert_eq!(sizes("attention").len(), 8);
        assert!(find("nonesuch").is_none());
    }
}
