//! Timing with the cache flush on every GPU device (lavapipe in CI), through both runtimes:
//! the flush spans several buffers when it is larger than one may be, and the samples are
//! device times of the kernel alone.

use tilekit::device::TimingOptions;
use tilekit::kernels::{self, Problem, Role};
use tilekit::{DType, Device, HostBuffer};

/// Says on stderr that the running test (or the part of it named in `reason`) did not run and
/// why, as `SKIPPED: <test> (<reason>)`. Written to the stream itself, past the harness's
/// capture, so the line shows although the test passes; scripts/test.sh lists them at the end.
fn skipped(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // One write: piecewise, lines of tests running beside it could land inside it.
    let _ = std::io::stderr().lock().write_all(format!("SKIPPED: {test} ({reason})\n").as_bytes());
}

#[test]
fn flushed_timing_on_every_gpu_device() {
    let gpus = Device::gpus();
    if gpus.is_empty() {
        if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
            skipped("no Vulkan device, and TILEKIT_SKIP_GPU_TESTS=1");
            return;
        }
        panic!("no Vulkan device to time: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1");
    }
    let k = kernels::find("vector_add").unwrap();
    let problem = Problem::new(&[1 << 16], DType::F32);
    let config = &k.configs()[0];
    let plan = k.plan(&problem, config).unwrap();
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1);
    let mut inputs = k.inputs(&problem, &mut rng).into_iter();
    let buffers: Vec<HostBuffer> =
        plan.buffers.iter().map(|s| if s.role == Role::Input { inputs.next().unwrap() } else { HostBuffer::zeros(s.dtype, s.len) }).collect();
    for device in &gpus {
        // 200 MiB: more than one lavapipe storage buffer (128 MiB) holds, so two flush buffers.
        for flush_bytes in [0, 4 << 20, 200 << 20] {
            let t = TimingOptions { warmup: 1, runs: 3, flush_bytes, read_back: true };
            let samples = device.time_plan_with(&plan, &buffers, config, &t).unwrap_or_else(|e| panic!("{device}: {e}"));
            assert_eq!(samples.len(), 3, "{device}");
            assert!(samples.iter().all(|s| s.is_finite() && *s > 0.0 && *s < 1.0), "{device} flush {flush_bytes}: {samples:?}");
        }
        // The outputs read back after timing are still the sum.
        let out = buffers[2].to_f64();
        let (x, y) = (buffers[0].to_f64(), buffers[1].to_f64());
        assert!(out.iter().zip(x.iter().zip(&y)).all(|(o, (a, b))| (o - (a + b)).abs() <= 1e-6 * (a + b).abs().max(1.0)), "{device}");
    }
}
