//! Every library kernel on every Vulkan device (lavapipe on any machine), through the raw Vulkan
//! runtime and through wgpu, against the kernel's f64 reference. Run with the Khronos validation
//! layer on (`TILEKIT_VULKAN_VALIDATION=1`), every message fails the test.

#[macro_use]
mod common;

use tilekit::Device;

/// Every Vulkan device; none fails the test unless `TILEKIT_SKIP_GPU_TESTS=1` (then: none).
fn devices() -> Vec<Device> {
    let gpus = Device::gpus();
    if gpus.is_empty() {
        if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
            common::skipped("no Vulkan device, and TILEKIT_SKIP_GPU_TESTS=1");
            return gpus;
        }
        panic!("no Vulkan device found: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1");
    }
    gpus
}

fn check_kernel(name: &str) {
    for device in &devices() {
        common::check_kernel(name, device);
    }
}

/// Every LayerNorm configuration on rows that fill its block exactly.
#[test]
fn layernorm_every_configuration() {
    for device in &devices() {
        common::check_every_config("layernorm", &common::whole_row_layernorms(), device);
    }
}

/// matmul's pipelined configurations and attention's tensor-core tiles, in f16 and bf16, on
/// every Vulkan device whose driver lists cooperative matrices (the H200's), where their dots
/// run on them. Lavapipe lists none: there the emulator's tests cover these layouts.
#[test]
fn matmul_and_attention_cooperative_matrices() {
    use tilekit_core::gpu::MatrixKind;
    let coop: Vec<Device> =
        devices().into_iter().filter(|d| d.target().is_some_and(|t| t.matrix.iter().any(|m| m.kind == MatrixKind::CooperativeMatrix))).collect();
    if coop.is_empty() {
        common::skipped("no Vulkan device lists cooperative matrices (lavapipe lists none)");
        return;
    }
    for device in &coop {
        common::check_matmul_pipelined(device);
        common::check_attention_matrix(device);
    }
}

kernel_tests!();
