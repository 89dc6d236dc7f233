//! Every library kernel on every CUDA device (PTX through the driver's JIT), against the
//! kernel's f64 reference, through the same harness as the Vulkan devices.
//!
//! Needs the `ptx` feature. A machine without a CUDA driver or device fails each test with a
//! message saying so, unless `TILEKIT_SKIP_GPU_TESTS=1`.
#![cfg(any(feature = "ptx", feature = "ptx-static"))]

#[macro_use]
mod common;

use tilekit::Device;

/// Every CUDA device; none fails the test unless `TILEKIT_SKIP_GPU_TESTS=1` (then: none).
fn devices() -> Vec<Device> {
    let devices = Device::cuda_devices();
    if devices.is_empty() {
        let why = match tilekit_ptx::CudaRuntime::devices() {
            Err(e) => e.to_string(),
            Ok(_) => "the CUDA driver lists no device of compute capability 8.0 or newer".to_string(),
        };
        if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
            common::skipped(&format!("no CUDA device: {why}; TILEKIT_SKIP_GPU_TESTS=1"));
            return devices;
        }
        panic!("no CUDA device: {why}; set TILEKIT_SKIP_GPU_TESTS=1 to skip");
    }
    devices
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

kernel_tests!();

/// Matmul's software-pipelined loop ([`common::check_matmul_pipelined`]).
#[test]
fn matmul_pipelined() {
    for device in &devices() {
        common::check_matmul_pipelined(device);
    }
}

/// Attention on tensor-core tiles ([`common::check_attention_matrix`]).
#[test]
fn attention_matrix() {
    for device in &devices() {
        common::check_attention_matrix(device);
    }
}
