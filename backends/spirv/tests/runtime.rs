//! The Vulkan runtime itself: device discovery, buffers, staging, timing, statistics, launch
//! errors, requirement checks and clean teardown under the validation layer.
#![cfg(feature = "vulkan")]
#![allow(clippy::needless_range_loop, clippy::type_complexity)]

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilekit_core::gpu::{Emitter, Target};
use tilekit_core::ir::BinaryOp;
use tilekit_core::{DType, HostBuffer, Scalar};
use tilekit_spirv::{SpirvKernel, VulkanError, VulkanRuntime};

const T: u32 = 64;

fn add_kernel(target: &Target, d: DType) -> SpirvKernel {
    elementwise(&format!("add_{d}"), target, T, &[d, d], &[d], |e, v| vec![e.binary(BinaryOp::Add, d, v[0], v[1])])
}

fn random_bits(rng: &mut StdRng, d: DType, n: usize) -> HostBuffer {
    let b = HostBuffer::zeros(d, n);
    for i in 0..n {
        b.store_bits(i, rng.gen());
    }
    b
}

#[test]
fn devices_report_a_consistent_target() {
    let devices = VulkanRuntime::devices().expect("Vulkan devices");
    assert!(!devices.is_empty());
    for d in &devices {
        let t = d.target();
        assert!(t.subgroup_size.is_power_of_two(), "{}: subgroup size {}", d.name, t.subgroup_size);
        assert!(t.max_threads_per_program >= 128 && t.shared_memory_bytes >= 16 * 1024, "{t}");
        assert!(d.min_subgroup_size <= d.subgroup_size && d.subgroup_size <= d.max_subgroup_size);
        if d.name.contains("llvmpipe") {
            // The preset for offline compilation describes this device.
            assert_eq!(t, Target { name: t.name.clone(), ..Target::lavapipe() }, "lavapipe's live target differs from its preset");
            assert_eq!(d.device_type, "cpu");
            assert!(d.timestamps && d.timestamp_period_ns > 0.0);
        }
    }
}

#[test]
fn buffers_round_trip_every_dtype_direct_and_staged() {
    let mut rng = StdRng::seed_from_u64(21);
    for staging in [false, true] {
        let rt = runtime_with(|o| o.force_staging = staging);
        for d in DType::ALL {
            for n in [0usize, 1, 3, 7, 1000] {
                let h = random_bits(&mut rng, d, n);
                let b = rt.alloc(d, n).expect("alloc");
                assert_eq!((b.dtype(), b.len(), b.size_bytes()), (d, n, n * d.size_bytes()));
                rt.upload(&b, &h).expect("upload");
                let back = rt.download(&b).expect("download");
                assert_eq!(back.to_bytes(), h.to_bytes(), "{d} x {n}, staging {staging}");
            }
        }
        // A kernel between upload and download, on both memory paths.
        let k = add_kernel(&rt.target(), DType::F32);
        let x: Vec<f32> = (0..777).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let y: Vec<f32> = (0..777).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let out = run_elementwise(&rt, &k, T, &[floats(DType::F32, &x), floats(DType::F32, &y)], &[DType::F32]);
        let got = read_floats(&out[0]);
        for i in 0..x.len() {
            assert_eq!(got[i], x[i] + y[i], "staging {staging}, element {i}");
        }
        assert_clean(&rt);
    }
}

#[test]
fn device_timestamps_and_pipeline_statistics() {
    let rt = runtime();
    let k = add_kernel(&rt.target(), DType::F32);
    let p = rt.load(&k).expect("load");
    let n = 1 << 16;
    let bufs: Vec<_> = (0..3).map(|_| rt.alloc(DType::F32, n).unwrap()).collect();
    let refs: Vec<_> = bufs.iter().collect();
    let grid = [(n as u32).div_ceil(T), 1, 1];
    let sc = [(3, Scalar::Int(n as i64))];
    let samples = rt.time(&p, grid, &refs, &sc, 2, 5).expect("time");
    assert_eq!(samples.len(), 5);
    for s in &samples {
        assert!(s.is_finite() && *s > 0.0 && *s < 10.0, "sample {s} s");
    }
    if rt.info().pipeline_statistics {
        let count = rt.count_invocations(&p, grid, &refs, &sc).expect("statistics");
        assert_eq!(count, (grid[0] * T) as u64);
    }
    assert_clean(&rt);
}

/// The runtime is shared between threads: timed runs and statistics from several at once each
/// read their own queries (a reset by one thread between another's submission and its read of
/// the results left the read unavailable).
#[test]
fn timing_from_several_threads_at_once() {
    let rt = runtime();
    let k = add_kernel(&rt.target(), DType::F32);
    let p = rt.load(&k).expect("load");
    let n = 1 << 12;
    let bufs: Vec<_> = (0..3).map(|_| rt.alloc(DType::F32, n).unwrap()).collect();
    let refs: Vec<_> = bufs.iter().collect();
    let grid = [(n as u32).div_ceil(T), 1, 1];
    let sc = [(3, Scalar::Int(n as i64))];
    std::thread::scope(|s| {
        for t in 0..3 {
            let (rt, p, refs, sc) = (&rt, &p, &refs, &sc);
            s.spawn(move || {
                for i in 0..40 {
                    if t == 2 && rt.info().pipeline_statistics {
                        let count = rt.count_invocations(p, grid, refs, sc).expect("statistics");
                        assert_eq!(count, (grid[0] * T) as u64);
                    } else {
                        let samples = rt.time(p, grid, refs, sc, 0, 1 + i % 3).unwrap_or_else(|e| panic!("thread {t}, round {i}: {e}"));
                        assert_eq!(samples.len(), 1 + i % 3);
                        assert!(samples.iter().all(|s| s.is_finite() && *s >= 0.0 && *s < 10.0), "thread {t}, round {i}: {samples:?}");
                    }
                }
            });
        }
    });
    assert_clean(&rt);
}

#[test]
fn launch_errors_name_what_is_wrong() {
    let rt = runtime();
    let k = add_kernel(&rt.target(), DType::F32);
    let p = rt.load(&k).expect("load");
    let f = || rt.alloc(DType::F32, 16).unwrap();
    let (a, b, c) = (f(), f(), f());
    let i = rt.alloc(DType::I32, 16).unwrap();
    let ok = [(3, Scalar::Int(16))];
    let msg = |r: Result<(), VulkanError>| r.expect_err("the launch must fail").to_string();

    let max = rt.info().max_workgroup_count;
    let m = msg(rt.launch(&p, [max[0] + 1, 1, 1], &[&a, &b, &c], &ok));
    assert!(m.contains("maxComputeWorkGroupCount[0]") && m.contains(&(max[0] + 1).to_string()), "{m}");
    assert!(m.contains("LowerOptions::fold_grid"), "{m}");
    let m = msg(rt.launch(&p, [1, max[1] + 1, 1], &[&a, &b, &c], &ok));
    assert!(m.contains("axis 1"), "{m}");
    let m = msg(rt.launch(&p, [1, 1, 1], &[&a, &b], &ok));
    assert!(m.contains("2 buffers given") && m.contains("binds 3"), "{m}");
    let m = msg(rt.launch(&p, [1, 1, 1], &[&a, &i, &c], &ok));
    assert!(m.contains("binding 1") && m.contains("i32"), "{m}");
    let m = msg(rt.launch(&p, [1, 1, 1], &[&a, &b, &c], &[]));
    assert!(m.contains("no value for scalar parameter 3"), "{m}");
    let m = msg(rt.launch(&p, [1, 1, 1], &[&a, &b, &c], &[(3, Scalar::Float(1.0))]));
    assert!(m.contains("parameter 3 is i32"), "{m}");
    let m = msg(rt.launch(&p, [1, 1, 1], &[&a, &b, &c], &[(3, Scalar::Int(1)), (0, Scalar::Int(1))]));
    assert!(m.contains("parameter 0 is not a scalar"), "{m}");
    let m = msg(rt.launch(&p, [1, 1, 1], &[&a, &b, &c], &[(3, Scalar::Int(1)), (3, Scalar::Int(2))]));
    assert!(m.contains("given twice"), "{m}");
    // Buffers of another device (runtime) are refused, not used.
    let other = runtime();
    let foreign = other.alloc(DType::F32, 16).unwrap();
    let m = msg(rt.launch(&p, [1, 1, 1], &[&a, &foreign, &c], &ok));
    assert!(m.contains("another Vulkan runtime"), "{m}");
    let m = rt.upload(&a, &HostBuffer::zeros(DType::F32, 15)).unwrap_err().to_string();
    assert!(m.contains("15 x f32") && m.contains("16 x f32"), "{m}");
    // A zero-extent grid runs nothing and is not an error.
    rt.launch(&p, [0, 1, 1], &[&a, &b, &c], &ok).expect("empty grid");
    assert_clean(&rt);
    assert_clean(&other);
}

#[test]
fn folded_kernels_dispatch_within_a_lowered_limit() {
    let rt = runtime_with(|o| o.max_workgroups_per_dim = Some(4));
    assert_eq!(rt.max_workgroups(), [4, 4, 4]);
    assert!(rt.needs_fold([5, 1, 1]) && !rt.needs_fold([4, 4, 4]));
    let target = rt.target();
    let d = DType::F32;
    let folded = elementwise_with("add_folded", &target, T, true, &[d, d], &[d], |e, v| vec![e.binary(BinaryOp::Add, d, v[0], v[1])]);
    assert_eq!((folded.grid_fold, folded.push_constant_size), (Some(4), 16));
    let mut rng = StdRng::seed_from_u64(5);
    // 13 programs in a 4 x 4 dispatch, and 64 (the most it holds) in 4 x 4 x 4.
    for n in [777usize, 64 * T as usize] {
        let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let y: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let out = run_elementwise(&rt, &folded, T, &[floats(d, &x), floats(d, &y)], &[d]);
        let got = read_floats(&out[0]);
        for i in 0..n {
            assert_eq!(got[i], x[i] + y[i], "n = {n}, element {i}");
        }
    }
    let p = rt.load(&folded).unwrap();
    let bufs: Vec<_> = (0..3).map(|_| rt.alloc(d, 16).unwrap()).collect();
    let refs: Vec<_> = bufs.iter().collect();
    let m = rt.launch(&p, [65, 1, 1], &refs, &[(3, Scalar::Int(16))]).unwrap_err().to_string();
    assert!(m.contains("even folded") && m.contains("65 programs") && m.contains("[4, 4, 4]"), "{m}");
    // The plain kernel is refused past the lowered limit, which the message names.
    let plain = rt.load(&add_kernel(&target, d)).unwrap();
    let m = rt.launch(&plain, [5, 1, 1], &refs, &[(3, Scalar::Int(16))]).unwrap_err().to_string();
    assert!(m.contains("= 4") && m.contains("max_workgroups_per_dim") && m.contains("fold_grid"), "{m}");
    assert_clean(&rt);
}

#[test]
fn requirements_are_checked_against_the_device() {
    let rt = runtime();
    let target = rt.target();
    let h = DType::F16;
    let k = elementwise("half_add", &target, T, &[h, h], &[h], |e, v| vec![e.binary(BinaryOp::Add, h, v[0], v[1])]);
    assert!(k.requirements.float16 && k.requirements.storage16);
    let mut info = rt.info().clone();
    info.shader_float16 = false;
    let m = info.check_kernel(&k).unwrap_err().to_string();
    assert!(m.contains("needs shaderFloat16") && m.contains(&info.name), "{m}");
    let mut info = rt.info().clone();
    info.storage_buffer_16bit = false;
    assert!(info.check_kernel(&k).unwrap_err().to_string().contains("storageBuffer16BitAccess"));

    let mut big = k.clone();
    big.requirements.shared_bytes = rt.info().shared_memory_bytes + 1;
    let m = rt.load(&big).unwrap_err().to_string();
    assert!(m.contains("maxComputeSharedMemorySize"), "{m}");
    let mut wide = k.clone();
    wide.threads = rt.info().max_workgroup_invocations + 1;
    let m = rt.load(&wide).unwrap_err().to_string();
    assert!(m.contains("threads per program"), "{m}");

    // A kernel whose lanes exchange values, built for another subgroup size.
    let other_sg = if target.subgroup_size == 32 { 64 } else { 32 };
    let t32 = Target { subgroup_size: other_sg, ..target.clone() };
    let i = DType::I32;
    let s = elementwise("shuffle_other", &t32, 64, &[i], &[i], |e, v| vec![e.shuffle_xor(i, v[0], 1)]);
    let info = rt.info();
    if !(info.subgroup_size_control && (info.min_subgroup_size..=info.max_subgroup_size).contains(&other_sg)) {
        let m = rt.load(&s).unwrap_err().to_string();
        assert!(m.contains(&format!("compiled for subgroups of {other_sg}")), "{m}");
    }
    assert_clean(&rt);
}

/// Everything created and dropped leaves nothing for the validation layer to report, and the
/// layer's messages do reach the log: a kernel whose interface omits its push constants is
/// reported when its pipeline is created.
#[test]
fn teardown_is_clean_and_validation_messages_are_collected() {
    let rt = runtime();
    if !rt.options().validation {
        return;
    }
    let log = rt.validation_log();
    let k = add_kernel(&rt.target(), DType::F32);
    {
        let p = rt.load(&k).unwrap();
        let bufs: Vec<_> = (0..3).map(|_| rt.alloc(DType::F32, 100).unwrap()).collect();
        let refs: Vec<_> = bufs.iter().collect();
        rt.launch(&p, [2, 1, 1], &refs, &[(3, Scalar::Int(100))]).unwrap();
        rt.time(&p, [2, 1, 1], &refs, &[(3, Scalar::Int(100))], 1, 2).unwrap();
    }
    drop(rt);
    let msgs = log.take();
    assert!(msgs.is_empty(), "messages at teardown:\n{}", msgs.join("\n"));

    let rt = runtime();
    let log = rt.validation_log();
    let mut lying = add_kernel(&rt.target(), DType::F32);
    lying.push_constants.clear();
    lying.push_constant_size = 0;
    let p = rt.load(&lying);
    drop(p);
    drop(rt);
    let msgs = log.take();
    assert!(!msgs.is_empty(), "the validation layer reported nothing about a push-constant block missing from the layout");
}

/// A kernel built for another target (the Vulkan baseline preset) runs wherever the device has
/// what it needs; bf16 needs only 16-bit storage.
#[test]
fn kernels_for_the_baseline_target_run() {
    let rt = runtime();
    let mut rng = StdRng::seed_from_u64(22);
    let baseline = Target { subgroup_size: rt.target().subgroup_size, ..Target::vulkan_baseline() };
    let d = DType::BF16;
    let k = elementwise("bf16_mul", &baseline, 32, &[d, d], &[d], |e, v| vec![e.binary(BinaryOp::Mul, d, v[0], v[1])]);
    assert!(k.requirements.storage16 && !k.requirements.int16 && !k.requirements.float16);
    let x: Vec<f32> = (0..333).map(|_| rng.gen_range(-8.0f32..8.0)).collect();
    let y: Vec<f32> = (0..333).map(|_| rng.gen_range(-8.0f32..8.0)).collect();
    let out = run_elementwise(&rt, &k, 32, &[floats(d, &x), floats(d, &y)], &[d]);
    let got = read_floats(&out[0]);
    for i in 0..x.len() {
        let (a, b) = (round_to(d, x[i]), round_to(d, y[i]));
        assert_eq!(got[i], round_to(d, a * b), "element {i}");
    }
}

/// Runtimes, buffers and pipelines can be shared across threads (launches serialize inside).
#[test]
fn runtime_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<VulkanRuntime>();
    check::<tilekit_spirv::DeviceBuffer>();
    check::<tilekit_spirv::Pipeline>();
    let rt = runtime();
    let k = add_kernel(&rt.target(), DType::I32);
    let p = rt.load(&k).unwrap();
    std::thread::scope(|s| {
        for t in 0..4i64 {
            let (rt, p) = (&rt, &p);
            s.spawn(move || {
                let x: Vec<i64> = (0..100).map(|i| i * t).collect();
                let bufs: Vec<_> = [ints(DType::I32, &x), ints(DType::I32, &x), HostBuffer::zeros(DType::I32, 100)]
                    .iter()
                    .map(|h| {
                        let b = rt.alloc(DType::I32, 100).unwrap();
                        rt.upload(&b, h).unwrap();
                        b
                    })
                    .collect();
                let refs: Vec<_> = bufs.iter().collect();
                rt.launch(p, [2, 1, 1], &refs, &[(3, Scalar::Int(100))]).unwrap();
                let got = read_ints(&rt.download(&bufs[2]).unwrap());
                assert_eq!(got, x.iter().map(|v| 2 * v).collect::<Vec<_>>(), "thread {t}");
            });
        }
    });
    assert_clean(&rt);
}

/// Runtimes opened, used and dropped on several threads at once, under the validation layer
/// when it is on: Debian 12's layer races on its own state when a device is created or
/// destroyed while another is in use, which the runtime must keep from happening (a crash here
/// is rare, not certain, without that).
#[test]
fn runtimes_opened_and_dropped_on_many_threads() {
    let work = |seed: u64| {
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..6 {
            let rt = runtime();
            let k = add_kernel(&rt.target(), DType::F32);
            let n = rng.gen_range(1..300);
            let a: Vec<f32> = (0..n).map(|_| rng.gen_range(-4.0..4.0)).collect();
            let b: Vec<f32> = (0..n).map(|_| rng.gen_range(-4.0..4.0)).collect();
            let out = run_elementwise(&rt, &k, T, &[HostBuffer::from_slice(&a), HostBuffer::from_slice(&b)], &[DType::F32]);
            let got = out[0].to_f64();
            for i in 0..n {
                assert_eq!(got[i], (a[i] + b[i]) as f64, "element {i} of {n}");
            }
        }
    };
    let threads: Vec<_> = (0..4).map(|t| std::thread::spawn(move || work(t))).collect();
    for t in threads {
        t.join().expect("a thread of the test panicked");
    }
}
