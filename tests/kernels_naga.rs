//! Every library kernel on every wgpu adapter through the naga path (`wgpu-naga:NAME`; lavapipe
//! on any machine), against the kernel's f64 reference: each dtype's test problems under two
//! configurations. What naga cannot express (bf16, the i8 of a quantised output) must be refused
//! by name; everything else must pass.

#[macro_use]
mod common;

use tilekit::check::check;
use tilekit::kernels;
use tilekit::{DType, Device};

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
    let kernel = kernels::find(name).unwrap_or_else(|| panic!("no kernel `{name}`"));
    for device in &devices() {
        let (mut runs, mut refused) = (0, 0);
        let mut failures = Vec::new();
        for &dtype in kernel.dtypes() {
            for (pi, problem) in kernel.test_problems(dtype).iter().enumerate() {
                for config in kernel.configs().iter().take(2) {
                    let seed = 0x5EED ^ (pi as u64) << 8 ^ dtype as u64;
                    match check(kernel.as_ref(), problem, config, device, seed) {
                        Ok(report) => {
                            runs += 1;
                            failures.extend(common::failed_outputs(&report, problem, config));
                        }
                        Err(e) => {
                            let s = e.to_string();
                            let named = s.contains("cannot be expressed through naga")
                                && ((dtype == DType::BF16 && s.contains("bf16")) || s.contains("8-bit"));
                            if named {
                                refused += 1;
                            } else {
                                failures.push(format!("{problem} [{config}]: {e}"));
                            }
                        }
                    }
                }
            }
        }
        assert!(failures.is_empty(), "{name} on {}: {} failed:\n{}", device.name(), failures.len(), failures.join("\n"));
        // Every kernel has an f32 or f16 version that naga expresses, except the quantising one.
        assert!(runs > 0 || name == "rmsnorm_quant", "{name} on {}: nothing ran ({refused} refused)", device.name());
    }
}

kernel_tests!();
