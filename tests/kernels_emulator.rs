//! Every library kernel through the GPU lowering, emulated thread by thread on the CPU, for a
//! warp-32 target and for lavapipe's warp of 8, against the kernel's f64 reference.

#[macro_use]
mod common;

use tilekit::gpu::Target;
use tilekit::Device;

fn check_kernel(name: &str) {
    for target in [Target::vulkan_baseline(), Target::lavapipe()] {
        common::check_kernel(name, &Device::Emulator(target));
    }
}

kernel_tests!(
    vector_add,
    softmax,
    softmax_online,
    layernorm,
    rmsnorm,
    sum,
    cumsum,
    histogram,
    matmul,
    attention,
    swiglu,
    rotary,
    spmv,
);
