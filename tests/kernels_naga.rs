//! Every library kernel on every wgpu adapter through the naga path (`wgpu-naga:NAME`; lavapipe
//! on any machine), against the kernel's f64 reference: every dtype's test problems under two
//! configurations, bf16 and the i8 of a quantised output included (emulated on 32-bit
//! registers and packed words).

#[macro_use]
mod common;

use tilekit::Device;

fn devices() -> Vec<Device> {
    let gpus = Device::naga_gpus();
    if gpus.is_empty() {
        if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
            common::skipped("no wgpu adapter, and TILEKIT_SKIP_GPU_TESTS=1");
            return gpus;
        }
        panic!("no wgpu adapter found: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1");
    }
    gpus
}

fn check_kernel(name: &str) {
    for device in &devices() {
        common::check_kernel(name, device);
    }
}

kernel_tests!();
