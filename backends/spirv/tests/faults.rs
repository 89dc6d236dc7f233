//! Faults through both Vulkan runtimes: a problem larger than the device, and a kernel the
//! driver refuses, each give an error that names the device and what failed, and leave the
//! runtime usable: a normal kernel launched next in the same process still computes the right
//! answer. (A lost device cannot be provoked on lavapipe; its handling, a runtime that refuses
//! further work and says to open a new one, is exercised where a driver reports it.)
// Both runtimes: `wgpu` includes `vulkan`.
#![cfg(feature = "wgpu")]

mod common;

use common::*;
use tilekit_core::gpu::{Emitter, Target};
use tilekit_core::ir::BinaryOp;
use tilekit_core::{DType, HostBuffer, Scalar};
use tilekit_spirv::wgpu_rt::{KernelBuffer, WgpuError, WgpuRuntime};
use tilekit_spirv::{SpirvKernel, VulkanError, VulkanRuntime};

const T: u32 = 64;

fn add_kernel(target: &Target) -> SpirvKernel {
    elementwise("add_f32", target, T, &[DType::F32, DType::F32], &[DType::F32], |e, v| vec![e.binary(BinaryOp::Add, DType::F32, v[0], v[1])])
}

/// Random-looking, never-zero inputs of length 1031 (a prime: the last block is partial).
fn inputs() -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..1031).map(|i| ((i * 7919) % 1013) as f32 * 0.37 - 101.5).collect();
    let y: Vec<f32> = (0..1031).map(|i| ((i * 104_729) % 997) as f32 * -0.11 + 3.25).collect();
    (x, y)
}

/// A normal kernel on `rt` gives the exact sums: the runtime survived what came before.
fn vulkan_still_works(rt: &VulkanRuntime) {
    let (x, y) = inputs();
    let k = add_kernel(&rt.target());
    let out = run_elementwise(rt, &k, T, &[floats(DType::F32, &x), floats(DType::F32, &y)], &[DType::F32]);
    let got = read_floats(&out[0]);
    for i in 0..x.len() {
        assert_eq!(got[i], x[i] + y[i], "element {i}");
    }
    assert_clean(rt);
}

/// The kernel with its entry point renamed: valid SPIR-V whose pipeline no driver can build.
fn refused_kernel(target: &Target) -> SpirvKernel {
    let mut k = add_kernel(target);
    k.entry_point = "no_such_entry_point".into();
    k
}

#[test]
fn vulkan_buffers_beyond_the_device_fail_and_the_runtime_stays_usable() {
    let rt = runtime();
    let device = rt.info().name.clone();
    let range = rt.info().max_storage_buffer_range as usize;
    // One storage binding larger than the device allows.
    let e = rt.alloc(DType::U8, range + 1).expect_err("a buffer beyond maxStorageBufferRange is refused");
    let m = e.to_string();
    assert!(m.contains("maxStorageBufferRange") && m.contains(&device), "{m}");
    vulkan_still_works(&rt);

    // More memory than the device has, in buffers it could each bind. lavapipe's "device
    // memory" is the host's, committed lazily: allocating past its heap would take the host's
    // memory rather than fail, so that part runs on devices with memory of their own.
    if rt.info().device_type == "cpu" {
        skipped(&format!("the part beyond the heap: {device} is a CPU device, whose heap is the host's memory"));
        return;
    }
    let chunk = (range / 4) & !15;
    let mut held = Vec::new();
    let mut total = 0u64;
    let error = loop {
        match rt.alloc(DType::F32, chunk) {
            Ok(b) => {
                total += (chunk * 4) as u64;
                held.push(b);
                // Far beyond any heap without failing: the driver overcommits; stop.
                assert!(total < 4 << 40, "{device} allocated {total} bytes without an error");
            }
            Err(e) => break e,
        }
    };
    assert!(matches!(error, VulkanError::OutOfMemory { .. }), "{error}");
    assert!(error.to_string().contains(&device), "{error}");
    println!("{device}: out of memory after {total} bytes: {error}");
    drop(held);
    vulkan_still_works(&rt);
}

#[test]
fn a_kernel_vulkan_refuses_is_an_error_and_the_next_one_runs() {
    // Without the validation layer, which crashes on a pipeline whose entry point is missing
    // (VUID-VkPipelineShaderStageCreateInfo-pName-00707) before the driver can refuse it.
    let rt = runtime_with(|o| o.validation = false);
    let e = rt.load(&refused_kernel(&rt.target())).expect_err("a pipeline without its entry point is refused");
    assert!(matches!(e, VulkanError::Refused { .. }), "{e}");
    let m = e.to_string();
    assert!(m.contains(&rt.info().name) && m.contains("add_f32") && m.contains("vkCreateComputePipelines"), "{m}");
    assert!(!rt.is_lost());
    vulkan_still_works(&rt);
}

fn wgpu_still_works(rt: &WgpuRuntime, target: &Target) {
    let (x, y) = inputs();
    let k = rt.load(&add_kernel(target)).expect("load");
    let n = x.len();
    let bx = rt.alloc_from(&floats(DType::F32, &x)).unwrap();
    let by = rt.alloc_from(&floats(DType::F32, &y)).unwrap();
    let out = rt.alloc(DType::F32, n).unwrap();
    let bufs: [&dyn KernelBuffer; 3] = [&bx, &by, &out];
    rt.launch(&k, [(n as u32).div_ceil(T), 1, 1], &bufs, &[(3, Scalar::Int(n as i64))]).expect("launch");
    let got = read_floats(&rt.download(&out, DType::F32, n).unwrap());
    for i in 0..n {
        assert_eq!(got[i], x[i] + y[i], "element {i}");
    }
}

fn wgpu_runtime() -> (WgpuRuntime, Target) {
    let rt = WgpuRuntime::new().unwrap_or_else(|e| panic!("the wgpu runtime needs a Vulkan adapter: {e}"));
    let name = rt.adapter_info().name.clone();
    let info = VulkanRuntime::devices().unwrap().into_iter().find(|d| d.name == name).expect("the adapter as a Vulkan device");
    (rt, info.target())
}

#[test]
fn wgpu_buffers_beyond_the_device_fail_and_the_runtime_stays_usable() {
    let (rt, target) = wgpu_runtime();
    let max = rt.limits().max_buffer_size;
    let e = rt.alloc(DType::U8, max as usize + 1).expect_err("a buffer beyond max_buffer_size is refused");
    assert!(e.to_string().contains("max_buffer_size"), "{e}");
    // Within max_buffer_size but beyond one binding: allocated, refused at launch with the limit.
    let binding = rt.limits().max_storage_buffer_binding_size;
    if binding < max {
        let k = rt.load(&add_kernel(&target)).unwrap();
        let big = rt.alloc(DType::U8, binding as usize + 16).unwrap();
        let small = rt.alloc(DType::F32, 4).unwrap();
        let bufs: [&dyn KernelBuffer; 3] = [&big, &small, &small];
        let e = rt.launch(&k, [1, 1, 1], &bufs, &[(3, Scalar::Int(4))]).unwrap_err();
        assert!(e.to_string().contains("max_storage_buffer_binding_size") || e.to_string().contains("holds"), "{e}");
    }
    wgpu_still_works(&rt, &target);
    let _ = HostBuffer::zeros(DType::F32, 1);
}

/// wgpu takes a pipeline the driver refuses for a driver fault and loses the device: the load
/// says so, the runtime refuses further work, and a new runtime runs the next kernel.
#[test]
fn a_kernel_wgpu_refuses_is_an_error_and_a_new_runtime_runs_the_next_one() {
    let (rt, target) = wgpu_runtime();
    let e = rt.load(&refused_kernel(&target)).expect_err("a pipeline without its entry point is refused");
    assert!(e.to_string().contains("add_f32") && e.to_string().contains(&rt.adapter_info().name), "{e}");
    match &e {
        WgpuError::DeviceLost { .. } => {
            assert!(e.device_lost() && rt.is_lost());
            let later = rt.alloc(DType::F32, 4).expect_err("a lost device takes no more work");
            assert!(later.device_lost(), "{later}");
            let (fresh, target) = wgpu_runtime();
            wgpu_still_works(&fresh, &target);
        }
        WgpuError::Validation { .. } | WgpuError::Internal { .. } => {
            assert!(!rt.is_lost());
            wgpu_still_works(&rt, &target);
        }
        other => panic!("unexpected error: {other}"),
    }
}
