//! Every library kernel through the GPU lowering, emulated thread by thread on the CPU, for a
//! warp-32 target, for lavapipe's warp of 8 and for CUDA's sm_80 (whose `dot`s lower to
//! `mma.sync`, run by the emulator's model of the instruction), against the kernel's f64
//! reference; matmul and attention also on AMD's gfx942 (wavefronts of 64, `dot`s on MFMA) and
//! gfx1100 (wave32, WMMA).

#[macro_use]
mod common;

use tilekit::gpu::Target;
use tilekit::Device;

fn check_kernel(name: &str) {
    for target in [Target::vulkan_baseline(), Target::lavapipe(), Target::cuda_sm80()] {
        common::check_kernel(name, &Device::Emulator(target));
    }
}

/// Every LayerNorm configuration on whole rows (the interpreter, lavapipe and the H200 run the
/// same set): the lowering of each, thread by thread, for both warp widths.
#[test]
fn layernorm_every_configuration() {
    for target in [Target::vulkan_baseline(), Target::lavapipe()] {
        common::check_every_config("layernorm", &common::whole_row_layernorms(), &Device::Emulator(target));
    }
}

kernel_tests!();

/// Matmul's software-pipelined loop on sm_80 ([`common::check_matmul_pipelined`]).
#[test]
fn matmul_pipelined() {
    common::check_matmul_pipelined(&Device::Emulator(Target::cuda_sm80()));
}

/// Attention on tensor-core tiles on sm_80 ([`common::check_attention_matrix`]).
#[test]
fn attention_matrix() {
    common::check_attention_matrix(&Device::Emulator(Target::cuda_sm80()));
}

/// Matmul's pipelined loop on sm_90a, whose dots on 64-column panels lower to warpgroup matrix
/// instructions (the emulator's model of `wgmma` reads the panels as the descriptors say).
#[test]
fn matmul_pipelined_wgmma() {
    common::check_matmul_pipelined(&Device::Emulator(Target::cuda_sm90a()));
}

/// Attention on sm_90a: both dots on warpgroup matrix instructions where the head dimension
/// fills panels.
#[test]
fn attention_matrix_wgmma() {
    common::check_attention_matrix(&Device::Emulator(Target::cuda_sm90a()));
}

/// Matmul's test problems and pipelined-loop tiles and attention's tensor-core tiles on the
/// emulator of `target`, whose dots run on its matrix instructions.
fn check_matrix_kernels(target: Target) {
    let device = Device::Emulator(target);
    common::check_kernel("matmul", &device);
    common::check_matmul_pipelined(&device);
    common::check_attention_matrix(&device);
}

/// AMD CDNA (gfx942, wavefronts of 64), whose f16 and bf16 dots lower to MFMA 16x16x16 in its
/// fragment layouts, run by the emulator's model of the instruction (the pipelined loop's
/// tiles load where they stand on AMD).
#[test]
fn matmul_and_attention_mfma() {
    check_matrix_kernels(Target::amd_gfx942());
}

/// AMD RDNA3 (gfx1100, wave32), whose dots lower to WMMA 16x16x16: operands repeated in both
/// halves of the wave (the emulator's model faults where the copies differ).
#[test]
fn matmul_and_attention_wmma() {
    check_matrix_kernels(Target::amd_gfx1100());
}

/// The H200 through Vulkan, whose f16 and bf16 dots lower to cooperative matrices 16x16x16:
/// the emulator holds them in a map of its own (the driver's is unknown), so nothing in the
/// lowering may depend on one, and it checks the extension's addressing rules.
#[test]
fn matmul_and_attention_cooperative_matrices() {
    check_matrix_kernels(Target::h200_vulkan());
}
