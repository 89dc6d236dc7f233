//! The launch API ([`tilekit::Kernel`], [`tilekit::Args`], [`tilekit::DeviceBuffer`]) on every
//! device reachable here: every library kernel against its reference, a chain of kernels that
//! moves nothing through the host, a caller's wgpu encoder, and arguments that are refused with
//! the parameter named.

use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::SeedableRng;
use tilekit::device::TimingOptions;
use tilekit::kernels::{self, default_config_for, Role};
use tilekit::{Args, Builder, Config, DType, Device, DeviceBuffer, HostBuffer, Kernel, LaunchError, Program};

/// Transfers are counted per device runtime, which every test of this file shares: the tests
/// that move data take turns.
static TURN: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The interpreter, the emulator and every GPU device present: CUDA devices, and each Vulkan
/// device through the raw Vulkan runtime and wgpu (lavapipe in CI, the H200 on the GPU machine).
/// A machine without any GPU device fails, unless told that it may run the CPU devices only.
fn devices() -> Vec<Device> {
    let mut out = vec![Device::Interpreter, Device::find("emulator").unwrap()];
    let gpus = Device::every_gpu();
    if gpus.is_empty() {
        if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
            eprintln!("SKIPPED: GPU devices in tests/launch_api.rs (TILEKIT_SKIP_GPU_TESTS=1)");
        } else {
            panic!("no GPU device found: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1");
        }
    }
    out.extend(gpus);
    eprintln!("devices: {}", out.iter().map(|d| d.name()).collect::<Vec<_>>().join(", "));
    out
}

/// Runs every launch of a library kernel's plan through [`Kernel::launch`] on device buffers
/// and compares the outputs with the reference.
fn check_library_kernel(kernel: &dyn kernels::Kernel, device: &Device) {
    let dtype = kernel.dtypes()[0];
    let problem = kernel.test_problems(dtype).into_iter().next().expect("a test problem");
    let config = default_config_for(kernel, &problem, &device.plan_target());
    let plan = kernel.plan_on(&problem, &config, &device.plan_target()).unwrap_or_else(|e| panic!("{}: {e}", kernel.name()));
    let mut rng = StdRng::seed_from_u64(7);
    let inputs = kernel.inputs(&problem, &mut rng);
    let reference = kernel.reference(&problem, &inputs.iter().map(HostBuffer::to_f64).collect::<Vec<_>>());
    let mut inputs = inputs.iter();
    let buffers: Vec<DeviceBuffer> = plan
        .buffers
        .iter()
        .map(|spec| match spec.role {
            Role::Input => device.upload(inputs.next().unwrap()),
            _ => device.zeros(spec.dtype, spec.len),
        })
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{device}: {e}"));
    for launch in &plan.launches {
        let k = Kernel::from_program(launch.program.clone());
        let mut args = Args::new();
        for (param, arg) in launch.program.params.iter().zip(&launch.args) {
            args = match arg {
                kernels::LaunchArg::Buffer(i) => args.arg(&param.name, &buffers[*i]),
                kernels::LaunchArg::Scalar(s) => args.scalar(&param.name, *s),
            };
        }
        k.launch(device, launch.grid, &args, &config).unwrap_or_else(|e| panic!("{} {problem} on {device}: {e}", kernel.name()));
    }
    for ((i, spec), want) in plan.outputs().zip(&reference) {
        let got = buffers[i].download().unwrap().to_f64();
        let tol = if spec.dtype.is_float() { kernel.tolerance(&problem) } else { 0.0 };
        let check = tilekit::check::compare(&spec.name, &got, want, tol);
        assert!(check.pass, "{} {problem} on {device}: output {}: {check:?}", kernel.name(), spec.name);
    }
}

#[test]
fn every_library_kernel_through_the_launch_api() {
    let _turn = turn();
    for device in devices() {
        for kernel in kernels::all() {
            check_library_kernel(kernel.as_ref(), &device);
        }
    }
}

/// `out = a * x + b * y` over `n` elements, BLOCK per program.
fn axpby() -> Kernel {
    Kernel::new("axpby", |config: &Config| -> Result<Program, tilekit::Error> {
        let block = config.get("BLOCK")?;
        let k = Builder::new("axpby");
        let x = k.input("x", DType::F32);
        let y = k.input("y", DType::F32);
        let out = k.output("out", DType::F32);
        let a = k.scalar("a", DType::F32);
        let b = k.scalar("b", DType::F32);
        let n = k.scalar("n", DType::I32);
        let offs = k.program_id(0) * block as i32 + k.arange(0, block);
        let mask = offs.lt(n);
        let v = k.load_masked(x, offs, mask, 0.0) * a + k.load_masked(y, offs, mask, 0.0) * b;
        k.store_masked(out, offs, v, mask);
        Ok(k.finish()?)
    })
}

#[test]
fn a_chain_of_three_kernels_moves_nothing_through_the_host() {
    let _turn = turn();
    let k = axpby();
    let n = 1000usize;
    let config = Config::new().with("BLOCK", 128);
    let grid = [n.div_ceil(128) as u32, 1, 1];
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    for device in devices() {
        let x = device.upload(&HostBuffer::from_slice(&xs)).unwrap();
        // Parameters take distinct buffers (`one_buffer_for_two_parameters_is_refused`).
        let x2 = device.upload(&HostBuffer::from_slice(&xs)).unwrap();
        let (t1, t2, out) = (device.alloc(DType::F32, n).unwrap(), device.alloc(DType::F32, n).unwrap(), device.alloc(DType::F32, n).unwrap());
        let before = device.transfers().unwrap();
        // t1 = 2x, t2 = t1 + x = 3x, out = t2 - 0.5 t1 = 2x.
        k.launch(&device, grid, &Args::new().arg("x", &x).arg("y", &x2).arg("out", &t1).scalar("a", 1.0).scalar("b", 1.0).scalar("n", n), &config)
            .unwrap();
        k.launch(&device, grid, &Args::new().arg("x", &t1).arg("y", &x).arg("out", &t2).scalar("a", 1.0).scalar("b", 1.0).scalar("n", n), &config)
            .unwrap();
        let third = k.launch(
            &device,
            grid,
            &Args::new().arg("x", &t2).arg("y", &t1).arg("out", &out).scalar("a", 1.0).scalar("b", -0.5).scalar("n", n),
            &config,
        );
        third.unwrap_or_else(|e| panic!("{device}: {e}"));
        let between = device.transfers().unwrap().since(&before);
        assert_eq!(between.copies(), 0, "{device}: {between:?}");
        let got = out.to_vec::<f32>().unwrap();
        assert!(got.iter().zip(&xs).all(|(g, x)| *g == 2.0 * x), "{device}: {:?}", &got[..4]);
        let after = device.transfers().unwrap().since(&before);
        assert_eq!((after.uploads, after.downloads, after.bytes_downloaded), (0, 1, 4 * n as u64), "{device}");
    }
}

#[test]
fn the_binary_is_compiled_once_per_configuration_and_device() {
    let _turn = turn();
    let k = axpby();
    let device = devices().pop().unwrap();
    let x = device.upload(&HostBuffer::from_slice(&[1.0f32; 64])).unwrap();
    let y = device.upload(&HostBuffer::from_slice(&[1.0f32; 64])).unwrap();
    let out = device.alloc(DType::F32, 64).unwrap();
    let args = Args::new().arg("x", &x).arg("y", &y).arg("out", &out).scalar("a", 2.0).scalar("b", 0.0).scalar("n", 64);
    let config = Config::new().with("BLOCK", 64);
    let first = k.launch(&device, [1, 1, 1], &args, &config).unwrap();
    let second = k.launch(&device, [1, 1, 1], &args, &config).unwrap();
    assert!(first.compile_time.is_some() && second.compile_time.is_none(), "{device}: {first:?} then {second:?}");
    let other = k.launch(&device, [1, 1, 1], &args, &Config::new().with("BLOCK", 32)).unwrap();
    assert!(other.compile_time.is_some(), "{device}: a new configuration compiles");
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.0f32; 64]);
}

/// Timing through the launch API: one sample per run on every device, each positive; with a
/// flush the buffers still hold what the kernel computed (the flush writes memory of its own,
/// and nothing moves through the host).
#[test]
fn timing_flushes_without_touching_the_arguments() {
    let _turn = turn();
    let k = axpby();
    let n = 4099usize;
    let config = Config::new().with("BLOCK", 256);
    let grid = [n.div_ceil(256) as u32, 1, 1];
    let xs: Vec<f32> = (0..n).map(|i| (i % 97) as f32 - 48.5).collect();
    for device in devices() {
        let x = device.upload(&HostBuffer::from_slice(&xs)).unwrap();
        let y = device.upload(&HostBuffer::from_slice(&xs)).unwrap();
        let out = device.alloc(DType::F32, n).unwrap();
        let args = Args::new().arg("x", &x).arg("y", &y).arg("out", &out).scalar("a", 2.0).scalar("b", -1.0).scalar("n", n);
        let before = device.transfers().unwrap();
        let timing = TimingOptions { warmup: 1, runs: 3, flush_bytes: 1 << 20, read_back: false };
        let samples = k.time(&device, grid, &args, &config, &timing).unwrap_or_else(|e| panic!("{device}: {e}"));
        assert_eq!(samples.len(), 3, "{device}");
        assert!(samples.iter().all(|t| t.is_finite() && *t > 0.0), "{device}: {samples:?}");
        assert_eq!(device.transfers().unwrap().since(&before).copies(), 0, "{device}");
        assert_eq!(out.to_vec::<f32>().unwrap(), xs, "{device}: 2x - x");
    }
}

#[test]
fn bad_arguments_name_the_parameter() {
    let _turn = turn();
    let k = axpby();
    let device = Device::Interpreter;
    let config = Config::new().with("BLOCK", 64);
    let x = device.zeros(DType::F32, 64).unwrap();
    let ints = device.zeros(DType::I32, 64).unwrap();
    let (y, out) = (device.zeros(DType::F32, 64).unwrap(), device.zeros(DType::F32, 64).unwrap());
    fn full<'a>(args: Args<'a>, y: &'a DeviceBuffer, out: &'a DeviceBuffer) -> Args<'a> {
        args.arg("y", y).arg("out", out).scalar("a", 1.0).scalar("b", 1.0)
    }
    let err = |args: &Args<'_>| k.launch(&device, [1, 1, 1], args, &config).unwrap_err();

    let e = err(&full(Args::new().arg("x", &x), &y, &out));
    assert!(matches!(&e, LaunchError::Missing { param, .. } if param == "n"), "{e}");
    assert!(e.to_string().contains("`n`") && e.to_string().contains("scalar of i32"), "{e}");

    let e = err(&full(Args::new().arg("x", &ints).scalar("n", 64), &y, &out)).to_string();
    assert!(e.contains("parameter `x`") && e.contains("expected a buffer of f32") && e.contains("given a buffer of 64 x i32"), "{e}");

    let e = err(&full(Args::new().scalar("x", 3).scalar("n", 64), &y, &out)).to_string();
    assert!(e.contains("parameter `x`") && e.contains("given the integer 3"), "{e}");

    let e = err(&full(Args::new().arg("x", &x).scalar("n", 1.5), &y, &out)).to_string();
    assert!(e.contains("parameter `n`") && e.contains("expected a scalar of i32") && e.contains("given the float 1.5"), "{e}");

    let e = err(&full(Args::new().arg("x", &x).scalar("n", 64).scalar("m", 1), &y, &out)).to_string();
    assert!(e.contains("no parameter `m`") && e.contains("x, y, out, a, b, n"), "{e}");

    let e = err(&full(Args::new().arg("x", &x).scalar("n", 64).scalar("n", 65), &y, &out)).to_string();
    assert!(e.contains("`n` given twice"), "{e}");

    let e = k.launch(&device, [1, 1, 1], &full(Args::new().arg("x", &x).scalar("n", 64), &y, &out), &Config::new()).unwrap_err().to_string();
    assert!(e.contains("failed to build") && e.contains("BLOCK"), "{e}");

    // A buffer of another device.
    let emulator = Device::find("emulator").unwrap();
    let e = k.launch(&emulator, [1, 1, 1], &full(Args::new().arg("x", &x).scalar("n", 64), &y, &out), &config).unwrap_err().to_string();
    assert!(e.contains("parameter `x`") && e.contains("a buffer on interpreter"), "{e}");

    // Uploads of the wrong size or dtype are refused.
    let mut b = device.zeros(DType::F32, 4).unwrap();
    assert!(b.upload(&HostBuffer::from_slice(&[1.0f32; 5])).is_err());
    assert!(b.upload(&HostBuffer::from_slice(&[1i32; 4])).is_err());
}

/// One buffer for two parameters is refused alike on every device, before anything runs.
#[test]
fn one_buffer_for_two_parameters_is_refused() {
    let _turn = turn();
    let k = axpby();
    let config = Config::new().with("BLOCK", 64);
    for device in devices() {
        let x = device.upload(&HostBuffer::from_slice(&[1.0f32; 64])).unwrap();
        let y = device.upload(&HostBuffer::from_slice(&[1.0f32; 64])).unwrap();
        let args = Args::new().arg("x", &x).arg("y", &y).arg("out", &x).scalar("a", 2.0).scalar("b", 0.0).scalar("n", 64);
        let e = k.launch(&device, [1, 1, 1], &args, &config).unwrap_err();
        assert!(matches!(e, LaunchError::Aliased { .. }), "{device}: {e}");
        assert!(e.to_string().contains("`x` and `out` are given the same buffer"), "{device}: {e}");
        assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0f32; 64], "{device}: nothing ran");
    }
}

/// An engine's own storage buffer holding `contents`, wrapped for tilekit's `device`.
fn engine_buffer(wdevice: &wgpu::Device, queue: &wgpu::Queue, device: &Device, contents: &[f32]) -> DeviceBuffer {
    let b = wdevice.create_buffer(&wgpu::BufferDescriptor {
        label: Some("engine buffer"),
        size: (contents.len() * 4) as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&b, 0, &contents.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
    DeviceBuffer::from_wgpu(device, b, DType::F32, contents.len()).unwrap()
}

/// A caller's wgpu device, buffers and command encoder: the engine-integration case.
#[test]
fn launches_record_into_a_callers_wgpu_encoder() {
    let _turn = turn();
    let Some(Device::Wgpu { name, target, .. }) = devices().into_iter().find(|d| matches!(d, Device::Wgpu { naga: false, .. })) else {
        eprintln!("SKIPPED: launches_record_into_a_callers_wgpu_encoder (no wgpu adapter)");
        return;
    };
    let ours = tilekit_spirv::WgpuRuntime::with_adapter(Some(&name)).unwrap();
    let (wdevice, queue, info) = (ours.device().clone(), ours.queue().clone(), ours.adapter_info().clone());
    let device = Device::from_wgpu("engine", wdevice.clone(), queue.clone(), info, target).unwrap();
    let n = 256usize;
    let make = |contents: &[f32]| engine_buffer(&wdevice, &queue, &device, contents);
    let x = make(&vec![1.0; n]);
    let y = make(&vec![2.0; n]);
    let out = make(&vec![0.0; n]);
    let k = axpby();
    let config = Config::new().with("BLOCK", 64);
    // Two wrappers of one wgpu buffer are one buffer.
    let again = DeviceBuffer::from_wgpu(&device, out.as_wgpu().unwrap().clone(), DType::F32, n).unwrap();
    let aliased = Args::new().arg("x", &x).arg("y", &again).arg("out", &out).scalar("a", 3.0).scalar("b", 1.0).scalar("n", n);
    assert!(matches!(k.launch(&device, [1, 1, 1], &aliased, &config), Err(LaunchError::Aliased { .. })));
    let mut encoder = wdevice.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("engine frame") });
    let args = Args::new().arg("x", &x).arg("y", &y).arg("out", &out).scalar("a", 3.0).scalar("b", 1.0).scalar("n", n);
    k.record(&device, &mut encoder, [(n / 64) as u32, 1, 1], &args, &config).unwrap();
    // Nothing ran yet: the caller submits.
    queue.submit([encoder.finish()]);
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![5.0f32; n]);
    assert!(out.as_wgpu().is_some());
    // Recording needs a wgpu device.
    let cpu = Device::Interpreter;
    let mut encoder = wdevice.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    let e = k.record(&cpu, &mut encoder, [1, 1, 1], &args, &config).unwrap_err().to_string();
    assert!(e.contains("needs a wgpu device"), "{e}");
}

#[test]
fn best_device_is_one_of_those_present() {
    let best = Device::best();
    assert!(matches!(best, Device::Interpreter) || Device::gpus().contains(&best), "{best}");
}

/// A caller's wgpu device opened without passthrough (only immediates, and subgroups where the
/// adapter has them), as an engine on Metal, DX12 or GL would open it: kernels run on it
/// through naga, recorded into the caller's encoder; the passthrough path refuses it by name.
#[test]
fn naga_kernels_run_on_a_callers_device_without_passthrough() {
    let _turn = turn();
    let Some(Device::Wgpu { name, target, .. }) = devices().into_iter().find(|d| matches!(d, Device::Wgpu { naga: false, .. })) else {
        eprintln!("SKIPPED: naga_kernels_run_on_a_callers_device_without_passthrough (no wgpu adapter)");
        return;
    };
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::VULKAN;
    let instance = wgpu::Instance::new(desc);
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
    let adapter = adapters.into_iter().find(|a| a.get_info().name == name).expect("the adapter tilekit listed");
    let features = wgpu::Features::IMMEDIATES | (wgpu::Features::SUBGROUP & adapter.features());
    let (wdevice, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("engine without passthrough"),
        required_features: features,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .unwrap();
    let info = adapter.get_info();
    let e = Device::from_wgpu("engine-passthrough", wdevice.clone(), queue.clone(), info.clone(), target.clone()).unwrap_err().to_string();
    assert!(e.contains("PASSTHROUGH_SHADERS"), "{e}");
    let device = Device::from_wgpu_naga("engine", wdevice.clone(), queue.clone(), info, target).unwrap();
    assert_eq!(device.name(), "wgpu-naga:engine");
    let n = 300usize;
    let make = |contents: Vec<f32>| engine_buffer(&wdevice, &queue, &device, &contents);
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();
    let ys: Vec<f32> = (0..n).map(|i| 3.0 - i as f32 * 0.5).collect();
    let (x, y, out) = (make(xs.clone()), make(ys.clone()), make(vec![-1.0; n]));
    let k = axpby();
    let config = Config::new().with("BLOCK", 64);
    let args = Args::new().arg("x", &x).arg("y", &y).arg("out", &out).scalar("a", 3.0).scalar("b", -2.0).scalar("n", n);
    let mut encoder = wdevice.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("engine frame") });
    k.record(&device, &mut encoder, [n.div_ceil(64) as u32, 1, 1], &args, &config).unwrap();
    queue.submit([encoder.finish()]);
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| 3.0 * x - 2.0 * y).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);
    // A launch of its own on the same device, too.
    let again = Args::new().arg("x", &out).arg("y", &y).arg("out", &x).scalar("a", 1.0).scalar("b", 1.0).scalar("n", n);
    k.launch(&device, [n.div_ceil(64) as u32, 1, 1], &again, &config).unwrap();
    let sum: Vec<f32> = want.iter().zip(&ys).map(|(w, y)| w + y).collect();
    assert_eq!(x.to_vec::<f32>().unwrap(), sum);
    // The naga module reads and writes whole 16-byte vectors (one access per four elements,
    // as the SPIR-V path does; n = 256, a multiple of the vector, and 8 elements a thread are
    // what let the lowering use vectors at all: 32 threads, as many warps as make them on
    // this device, one on a GPU with warps of 32, four on lavapipe's 8). A caller's buffer that
    // ends inside a vector cannot be such an array: its binding is compiled by elements for
    // that launch, and the result is the same.
    let odd = make((0..=n).map(|i| 0.5 + i as f32).collect());
    let warps = (32 / device.target().expect("a GPU's target").subgroup_size).max(1);
    let wide = Config::new().with("BLOCK", 256).with("num_warps", i64::from(warps));
    let args = Args::new().arg("x", &odd).arg("y", &y).arg("out", &out).scalar("a", 1.0).scalar("b", 1.0).scalar("n", 256);
    k.launch(&device, [1, 1, 1], &args, &wide).unwrap();
    let want: Vec<f32> = (0..n).map(|i| if i < 256 { 0.5 + i as f32 + ys[i] } else { want[i] }).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want, "256 sums through the element binding, the rest untouched");
    let args = Args::new().arg("x", &x).arg("y", &y).arg("out", &out).scalar("a", 1.0).scalar("b", 1.0).scalar("n", 256);
    k.launch(&device, [1, 1, 1], &args, &wide).unwrap();
    let want: Vec<f32> = (0..n).map(|i| if i < 256 { sum[i] + ys[i] } else { want[i] }).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want, "the whole-vector buffers' launch: 256 sums");
    // The modules the two launches asked for (LowerOptions::element_bindings from the buffers'
    // sizes): x an element array where its buffer ends inside a vector, vectors otherwise.
    let program = k.program(&wide).unwrap();
    let target = match &device {
        Device::Wgpu { target, .. } => target.clone(),
        _ => unreachable!(),
    };
    let base = tilekit::gpu::lower::LowerOptions::for_config(&wide).specialize([
        (5u32, &tilekit::Scalar::Int(256)),
        (3, &tilekit::Scalar::Float(1.0)),
        (4, &tilekit::Scalar::Float(1.0)),
    ]);
    let wgsl = |mask: u64| tilekit_naga::compile(&program, &target, &base.with_element_bindings(mask)).unwrap().kernel.wgsl().unwrap();
    let (vectors, elements) = (wgsl(0), wgsl(1));
    assert!(vectors.contains("x: array<vec4<f32>>"), "{vectors}");
    assert!(elements.contains("x: array<f32>") && elements.contains("out: array<vec4<f32>>"), "{elements}");
    // (Below the launch API the vector module still refuses such a buffer by name:
    // backends/spirv/tests/wgpu_rt.rs.)
}
