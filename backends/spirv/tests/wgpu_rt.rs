//! The wgpu runtime on whatever Vulkan adapter is present (lavapipe in CI).
//!
//! The SPIR-V here comes from WGSL through naga, not from tilekit's emitter, so these tests check
//! the runtime alone: interface, push-constant packing, launches, recording into a caller's
//! encoder, timing and errors. Without a Vulkan adapter they fail, unless
//! `TILEKIT_SKIP_GPU_TESTS=1`.
#![cfg(feature = "wgpu")]

use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilekit_core::ir::Access;
use tilekit_core::{DType, HostBuffer, Scalar};
use tilekit_spirv::wgpu_rt::{KernelBuffer, WgpuBuffer, WgpuError, WgpuRuntime};
use tilekit_spirv::{Binding, PushConstant, PushConstantError, Requirements, SpirvKernel};

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

fn skip_gpu() -> bool {
    std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1")
}

/// The shared runtime, or `None` when GPU tests are skipped; panics with the reason otherwise.
fn rt() -> Option<&'static WgpuRuntime> {
    static RT: OnceLock<Result<WgpuRuntime, String>> = OnceLock::new();
    match RT.get_or_init(|| WgpuRuntime::new().map_err(|e| e.to_string())) {
        Ok(rt) => Some(rt),
        Err(_) if skip_gpu() => {
            skipped("no usable Vulkan adapter, and TILEKIT_SKIP_GPU_TESTS=1");
            None
        }
        Err(e) => panic!(
            "no usable Vulkan adapter for the wgpu runtime: {e}\n\
             (install mesa-vulkan-drivers for lavapipe, or set TILEKIT_SKIP_GPU_TESTS=1 to skip)"
        ),
    }
}

fn spirv(wgsl: &str) -> Vec<u32> {
    let module = naga::front::wgsl::parse_str(wgsl).unwrap_or_else(|e| panic!("{}", e.emit_to_string(wgsl)));
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::IMMEDIATES | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}", e.emit_to_string(wgsl)));
    let options = naga::back::spv::Options { lang_version: (1, 3), ..Default::default() };
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).expect("SPIR-V")
}

fn binding(binding: u32, dtype: DType, access: Access) -> Binding {
    Binding { binding, param: binding, dtype, access, size_multiple: 4 }
}

fn kernel(name: &str, wgsl: &str, threads: u32, bindings: Vec<Binding>, push: &[DType]) -> SpirvKernel {
    let first = bindings.len() as u32;
    let push_constants: Vec<PushConstant> =
        push.iter().enumerate().map(|(i, &dtype)| PushConstant { param: first + i as u32, offset: 4 * i as u32, dtype }).collect();
    SpirvKernel {
        name: name.into(),
        words: spirv(wgsl),
        entry_point: "main".into(),
        threads,
        bindings,
        push_constants,
        push_constant_size: 4 * push.len() as u32,
        grid_fold: None,
        requirements: Requirements::default(),
    }
}

const VECTOR_ADD: &str = r#"
struct Params { n: i32 }
var<immediate> p: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) pid: vec3<u32>, @builtin(local_invocation_id) tid: vec3<u32>) {
    let i = i32(pid.x * 64u + tid.x);
    if i < p.n {
        out[i] = x[i] + y[i];
    }
}
"#;

fn vector_add() -> SpirvKernel {
    kernel(
        "vector_add",
        VECTOR_ADD,
        64,
        vec![binding(0, DType::F32, Access::Read), binding(1, DType::F32, Access::Read), binding(2, DType::F32, Access::Write)],
        &[DType::I32],
    )
}

fn random_f32(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-4.0f32..4.0)).collect()
}

#[test]
fn adapters_are_listed() {
    let Some(rt) = rt() else { return };
    let all = WgpuRuntime::adapters();
    assert!(all.iter().any(|a| a.info.name == rt.adapter_info().name), "{all:?}");
    assert!(all.iter().all(|a| a.info.backend == wgpu::Backend::Vulkan));
    // Selection by a substring of the name, in any case.
    let part = rt.adapter_info().name.chars().take(4).collect::<String>().to_uppercase();
    let picked = WgpuRuntime::with_adapter(Some(&part)).unwrap();
    assert!(picked.adapter_info().name.to_uppercase().contains(&part));
    let err = WgpuRuntime::with_adapter(Some("no such adapter 0xdeadbeef")).unwrap_err();
    assert!(matches!(err, WgpuError::AdapterNotFound { .. }), "{err}");
    assert!(err.to_string().contains(&rt.adapter_info().name), "{err}");
}

#[test]
fn vector_add_matches_the_host() {
    let Some(rt) = rt() else { return };
    let k = rt.load(&vector_add()).unwrap();
    let mut rng = StdRng::seed_from_u64(1);
    for n in [1usize, 7, 63, 64, 65, 1000, 4099] {
        let x = random_f32(&mut rng, n);
        let y = random_f32(&mut rng, n);
        let bx = rt.alloc_from(&HostBuffer::from_slice(&x)).unwrap();
        let by = rt.alloc_from(&HostBuffer::from_slice(&y)).unwrap();
        // One element more than needed, holding a sentinel that the masked tail must not touch.
        let sentinel = 12345.0f32;
        let bo = rt.alloc_from(&HostBuffer::from_slice(&vec![sentinel; n + 1])).unwrap();
        let grid = [(n as u32).div_ceil(64) + 1, 1, 1];
        rt.launch(&k, grid, &[&bx, &by, &bo], &[(3, Scalar::Int(n as i64))]).unwrap();
        let got = rt.download(&bo, DType::F32, n + 1).unwrap().to_vec::<f32>().unwrap();
        for i in 0..n {
            assert_eq!(got[i], x[i] + y[i], "n = {n}, element {i}");
        }
        assert_eq!(got[n], sentinel, "n = {n}: the masked tail wrote past n");
    }
}

const AXPY_INPLACE: &str = r#"
struct Params { n: i32, alpha: f32 }
var<immediate> p: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> acc: array<f32>;
@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    if i < p.n {
        acc[i] = acc[i] * p.alpha + x[i];
    }
}
"#;

#[test]
fn read_write_buffer_updates_in_place() {
    let Some(rt) = rt() else { return };
    let k = rt
        .load(&kernel(
            "axpy_inplace",
            AXPY_INPLACE,
            32,
            vec![binding(0, DType::F32, Access::Read), binding(1, DType::F32, Access::ReadWrite)],
            &[DType::I32, DType::F32],
        ))
        .unwrap();
    let mut rng = StdRng::seed_from_u64(2);
    for n in [1usize, 31, 33, 997] {
        let x = random_f32(&mut rng, n);
        let acc = random_f32(&mut rng, n);
        let alpha: f32 = rng.gen_range(-2.0..2.0);
        let bx = rt.alloc_from(&HostBuffer::from_slice(&x)).unwrap();
        let bacc = rt.alloc_from(&HostBuffer::from_slice(&acc)).unwrap();
        let scalars = [(2, Scalar::Int(n as i64)), (3, Scalar::Float(alpha as f64))];
        // Twice, so the second pass reads what the first wrote.
        rt.launch(&k, [(n as u32).div_ceil(32), 1, 1], &[&bx, &bacc], &scalars).unwrap();
        rt.launch(&k, [(n as u32).div_ceil(32), 1, 1], &[&bx, &bacc], &scalars).unwrap();
        let got = rt.download(&bacc, DType::F32, n).unwrap().to_vec::<f32>().unwrap();
        for i in 0..n {
            let once = acc[i] * alpha + x[i];
            let want = once * alpha + x[i];
            assert!((got[i] - want).abs() <= 1e-5 * want.abs().max(1.0), "n = {n}, element {i}: {} vs {want}", got[i]);
        }
    }
}

const TRANSPOSE: &str = r#"
struct Params { rows: i32, cols: i32 }
var<immediate> p: Params;
@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read_write> t: array<i32>;
@compute @workgroup_size(16)
fn main(@builtin(workgroup_id) pid: vec3<u32>, @builtin(local_invocation_id) tid: vec3<u32>) {
    let r = i32(pid.y);
    let c = i32(pid.x * 16u + tid.x);
    if r < p.rows && c < p.cols {
        t[c * p.rows + r] = a[r * p.cols + c];
    }
}
"#;

#[test]
fn two_dimensional_grid() {
    let Some(rt) = rt() else { return };
    let k = rt
        .load(&kernel(
            "transpose",
            TRANSPOSE,
            16,
            vec![binding(0, DType::I32, Access::Read), binding(1, DType::I32, Access::Write)],
            &[DType::I32, DType::I32],
        ))
        .unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    for (rows, cols) in [(1usize, 1usize), (3, 17), (31, 5), (64, 33)] {
        let a: Vec<i32> = (0..rows * cols).map(|_| rng.gen()).collect();
        let ba = rt.alloc_from(&HostBuffer::from_slice(&a)).unwrap();
        let bt = rt.alloc(DType::I32, rows * cols).unwrap();
        let grid = [(cols as u32).div_ceil(16), rows as u32, 1];
        rt.launch(&k, grid, &[&ba, &bt], &[(2, Scalar::Int(rows as i64)), (3, Scalar::Int(cols as i64))]).unwrap();
        let got = rt.download(&bt, DType::I32, rows * cols).unwrap().to_vec::<i32>().unwrap();
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(got[c * rows + r], a[r * cols + c], "{rows}x{cols} at ({r}, {c})");
            }
        }
    }
}

// Each scalar sits in a 32-bit slot (kernel.rs): narrow integers sign- or zero-extended, i1 as
// 0/1, f16 as its bits in the low half.
const SCALARS: &str = r#"
struct Params { a: i32, b: u32, c: u32, d: u32, e: i32, f: f32 }
var<immediate> p: Params;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(1)
fn main() {
    out[0] = f32(p.a);
    out[1] = f32(p.b);
    out[2] = f32(p.c);
    out[3] = unpack2x16float(p.d).x;
    out[4] = f32(p.e);
    out[5] = p.f;
    out[6] = f32(p.d >> 16u);
}
"#;

#[test]
fn push_constants_follow_the_kernel_packing() {
    let Some(rt) = rt() else { return };
    let k = rt
        .load(&kernel(
            "scalars",
            SCALARS,
            1,
            vec![binding(0, DType::F32, Access::Write)],
            &[DType::I8, DType::U8, DType::I1, DType::F16, DType::I16, DType::F32],
        ))
        .unwrap();
    let out = rt.alloc(DType::F32, 7).unwrap();
    let scalars = [
        (1, Scalar::Int(-7)),
        (2, Scalar::Int(200)),
        (3, Scalar::Bool(true)),
        (4, Scalar::Float(-1.5)),
        (5, Scalar::Int(-300)),
        (6, Scalar::Float(0.375)),
    ];
    rt.launch(&k, [1, 1, 1], &[&out], &scalars).unwrap();
    let got = rt.download(&out, DType::F32, 7).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got, vec![-7.0, 200.0, 1.0, -1.5, -300.0, 0.375, 0.0]);
}

#[test]
fn record_into_the_callers_encoder_on_the_callers_device() {
    if rt().is_none() {
        return;
    }
    // The application's own device, as a graphics engine would make it.
    let instance = wgpu::Instance::new({
        let mut d = wgpu::InstanceDescriptor::new_without_display_handle();
        d.backends = wgpu::Backends::VULKAN;
        d.flags = wgpu::InstanceFlags::empty();
        d
    });
    let adapter = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN))
        .into_iter()
        .find(|a| a.features().contains(wgpu::Features::PASSTHROUGH_SHADERS | wgpu::Features::IMMEDIATES))
        .expect("an adapter with passthrough shaders and immediates");
    let info = adapter.get_info();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("engine"),
        required_features: wgpu::Features::PASSTHROUGH_SHADERS | wgpu::Features::IMMEDIATES,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .unwrap();
    let rt = WgpuRuntime::from_device(device.clone(), queue.clone(), info).unwrap();
    let k = rt.load(&vector_add()).unwrap();

    let mut rng = StdRng::seed_from_u64(4);
    let n = 1001usize;
    let x = random_f32(&mut rng, n);
    let y = random_f32(&mut rng, n);
    let bytes = (n * 4) as u64;
    let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    let engine_buffer = |label| device.create_buffer(&wgpu::BufferDescriptor { label: Some(label), size: bytes, usage, mapped_at_creation: false });
    // The engine's own buffers: `staged` is filled by the engine's copy in the same encoder,
    // `result` receives the engine's copy of the kernel output.
    let src = engine_buffer("src");
    let staged = engine_buffer("staged");
    let result = engine_buffer("result");
    queue.write_buffer(&src, 0, &HostBuffer::from_slice(&x).to_bytes());
    let by = rt.alloc_from(&HostBuffer::from_slice(&y)).unwrap();
    let out = rt.alloc(DType::F32, n).unwrap();

    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("frame") });
    encoder.copy_buffer_to_buffer(&src, 0, &staged, 0, bytes);
    rt.record(&mut encoder, &k, [(n as u32).div_ceil(64), 1, 1], &[&staged, &by, &out], &[(3, Scalar::Int(n as i64))]).unwrap();
    encoder.copy_buffer_to_buffer(&out, 0, &result, 0, bytes);
    let index = queue.submit([encoder.finish()]);
    device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None }).unwrap();

    let got = rt.download(&result, DType::F32, n).unwrap().to_vec::<f32>().unwrap();
    for i in 0..n {
        assert_eq!(got[i], x[i] + y[i], "element {i}");
    }
}

#[test]
fn timing_returns_every_sample() {
    let Some(rt) = rt() else { return };
    if !rt.capabilities().timestamps {
        panic!("adapter `{}` has no timestamp queries", rt.adapter_info().name);
    }
    let k = rt.load(&vector_add()).unwrap();
    let n = 1 << 18;
    let mut rng = StdRng::seed_from_u64(5);
    let bx = rt.alloc_from(&HostBuffer::from_slice(&random_f32(&mut rng, n))).unwrap();
    let by = rt.alloc_from(&HostBuffer::from_slice(&random_f32(&mut rng, n))).unwrap();
    let bo = rt.alloc(DType::F32, n).unwrap();
    let samples = rt.time(&k, [(n as u32).div_ceil(64), 1, 1], &[&bx, &by, &bo], &[(3, Scalar::Int(n as i64))], 2, 5).unwrap();
    assert_eq!(samples.len(), 5, "{samples:?}");
    for s in &samples {
        assert!(*s > 0.0 && *s < 10.0, "sample {s} s out of range: {samples:?}");
    }
}

#[test]
fn transfers_round_trip_odd_byte_counts() {
    let Some(rt) = rt() else { return };
    let mut rng = StdRng::seed_from_u64(6);
    for n in [1usize, 3, 5, 11] {
        let v: Vec<i8> = (0..n).map(|_| rng.gen()).collect();
        let b = rt.alloc_from(&HostBuffer::from_slice(&v)).unwrap();
        assert_eq!(rt.download(&b, DType::I8, n).unwrap().to_vec::<i8>().unwrap(), v, "{n} x i8");
        let h: Vec<half::f16> = (0..n).map(|_| half::f16::from_f32(rng.gen_range(-8.0..8.0))).collect();
        let b = rt.alloc_from(&HostBuffer::from_slice(&h)).unwrap();
        assert_eq!(rt.download(&b, DType::F16, n).unwrap().to_vec::<half::f16>().unwrap(), h, "{n} x f16");
    }
    // Uploading a prefix that ends inside a word keeps the rest of the word.
    let big: Vec<i8> = (0..11).map(|_| rng.gen()).collect();
    let b = rt.alloc_from(&HostBuffer::from_slice(&big)).unwrap();
    let prefix: Vec<i8> = (0..5).map(|_| rng.gen()).collect();
    rt.upload(&b, &HostBuffer::from_slice(&prefix)).unwrap();
    let mut want = big.clone();
    want[..5].copy_from_slice(&prefix);
    assert_eq!(rt.download(&b, DType::I8, 11).unwrap().to_vec::<i8>().unwrap(), want);
    // Typed buffers refuse other dtypes and lengths beyond their size.
    assert!(matches!(rt.download(&b, DType::U8, 11), Err(WgpuError::Transfer { .. })));
    assert!(matches!(rt.download(&b, DType::I8, 13), Err(WgpuError::Transfer { .. })));
    assert!(matches!(rt.upload(&b, &HostBuffer::from_slice(&[1.0f32])), Err(WgpuError::Transfer { .. })));
}

fn vector_add_buffers(rt: &WgpuRuntime, n: usize) -> [WgpuBuffer; 3] {
    let mut rng = StdRng::seed_from_u64(7);
    [
        rt.alloc_from(&HostBuffer::from_slice(&random_f32(&mut rng, n))).unwrap(),
        rt.alloc_from(&HostBuffer::from_slice(&random_f32(&mut rng, n))).unwrap(),
        rt.alloc(DType::F32, n).unwrap(),
    ]
}

#[test]
fn wrong_buffer_count_is_an_error() {
    let Some(rt) = rt() else { return };
    let k = rt.load(&vector_add()).unwrap();
    let [x, y, _] = vector_add_buffers(rt, 10);
    let err = rt.launch(&k, [1, 1, 1], &[&x, &y], &[(3, Scalar::Int(10))]).unwrap_err();
    assert!(matches!(err, WgpuError::BufferCount { expected: 3, got: 2, .. }), "{err}");
    assert!(err.to_string().contains("vector_add"), "{err}");
}

#[test]
fn wrong_buffer_dtype_is_an_error() {
    let Some(rt) = rt() else { return };
    let k = rt.load(&vector_add()).unwrap();
    let [x, _, out] = vector_add_buffers(rt, 10);
    let ints = rt.alloc(DType::I32, 10).unwrap();
    let err = rt.launch(&k, [1, 1, 1], &[&x, &ints, &out], &[(3, Scalar::Int(10))]).unwrap_err();
    assert!(matches!(err, WgpuError::BufferDType { index: 1, expected: DType::F32, got: DType::I32, .. }), "{err}");
    // A plain wgpu::Buffer carries no dtype, so only its usage and size are checked.
    let plain: &wgpu::Buffer = &ints;
    rt.launch(&k, [1, 1, 1], &[&x, plain, &out], &[(3, Scalar::Int(10))]).unwrap();
}

#[test]
fn grid_beyond_the_device_limit_is_an_error() {
    let Some(rt) = rt() else { return };
    let k = rt.load(&vector_add()).unwrap();
    let [x, y, out] = vector_add_buffers(rt, 10);
    let max = rt.limits().max_compute_workgroups_per_dimension;
    for axis in 0..3 {
        let mut grid = [1, 1, 1];
        grid[axis] = max + 1;
        let err = rt.launch(&k, grid, &[&x, &y, &out], &[(3, Scalar::Int(10))]).unwrap_err();
        assert!(matches!(err, WgpuError::GridTooLarge { axis: a, .. } if a == axis), "{err}");
        assert!(err.to_string().contains("max_compute_workgroups_per_dimension"), "{err}");
        assert!(err.to_string().contains("LowerOptions::fold_grid"), "{err}");
        let mut encoder = rt.device().create_command_encoder(&Default::default());
        let err = rt.record(&mut encoder, &k, grid, &[&x, &y, &out], &[(3, Scalar::Int(10))]).unwrap_err();
        assert!(matches!(err, WgpuError::GridTooLarge { .. }), "{err}");
    }
}

#[test]
fn scalar_mismatches_are_errors() {
    let Some(rt) = rt() else { return };
    let k = rt.load(&vector_add()).unwrap();
    let [x, y, out] = vector_add_buffers(rt, 10);
    let bufs: [&dyn KernelBuffer; 3] = [&x, &y, &out];
    let missing = rt.launch(&k, [1, 1, 1], &bufs, &[]).unwrap_err();
    assert!(matches!(missing, WgpuError::PushConstants(PushConstantError::Missing { param: 3, .. })), "{missing}");
    let float = rt.launch(&k, [1, 1, 1], &bufs, &[(3, Scalar::Float(1.0))]).unwrap_err();
    assert!(matches!(float, WgpuError::PushConstants(PushConstantError::Mismatch { .. })), "{float}");
    let not_scalar = rt.launch(&k, [1, 1, 1], &bufs, &[(3, Scalar::Int(1)), (0, Scalar::Int(1))]).unwrap_err();
    assert!(matches!(not_scalar, WgpuError::PushConstants(PushConstantError::NotScalar { param: 0, .. })), "{not_scalar}");
}

/// A binding a module reads as 16-byte vectors (`Binding::size_multiple`, what a naga module
/// with a vector view declares) refuses a buffer that ends inside a vector by name, before
/// anything runs, instead of reading or writing through a clamped index.
#[test]
fn a_buffer_that_ends_inside_a_vector_of_a_vector_binding_is_an_error() {
    let Some(rt) = rt() else { return };
    let mut kernel = vector_add();
    kernel.bindings[0].size_multiple = 16;
    let k = rt.load(&kernel).unwrap();
    // tilekit allocates whole vectors; a caller's buffer need not be.
    let caller = |bytes: u64| {
        rt.device().create_buffer(&wgpu::BufferDescriptor {
            label: Some("caller's buffer"),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        })
    };
    let [_, y, out] = vector_add_buffers(rt, 301);
    let x = caller(1204);
    let err = rt.launch(&k, [1, 1, 1], &[&x, &y, &out], &[(3, Scalar::Int(301))]).unwrap_err();
    assert!(matches!(err, WgpuError::BadBuffer { index: 0, .. }), "{err}");
    assert!(err.to_string().contains("16-byte vectors") && err.to_string().contains("1204"), "{err}");
    // A whole number of vectors passes.
    let x = caller(1216);
    rt.launch(&k, [5, 1, 1], &[&x, &y, &out], &[(3, Scalar::Int(301))]).unwrap();
}

#[test]
fn aliasing_a_buffer_read_only_and_writable_is_an_error() {
    let Some(rt) = rt() else { return };
    let k = rt.load(&vector_add()).unwrap();
    let [x, y, _] = vector_add_buffers(rt, 10);
    let err = rt.launch(&k, [1, 1, 1], &[&x, &y, &x], &[(3, Scalar::Int(10))]).unwrap_err();
    assert!(matches!(err, WgpuError::BadBuffer { index: 2, .. }), "{err}");
}

#[test]
fn device_without_immediates_is_refused() {
    if rt().is_none() {
        return;
    }
    let instance = wgpu::Instance::new({
        let mut d = wgpu::InstanceDescriptor::new_without_display_handle();
        d.backends = wgpu::Backends::VULKAN;
        d.flags = wgpu::InstanceFlags::empty();
        d
    });
    let adapter = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN)).into_iter().next().expect("a Vulkan adapter");
    let info = adapter.get_info();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_features: wgpu::Features::PASSTHROUGH_SHADERS & adapter.features(),
        ..Default::default()
    }))
    .unwrap();
    let err = WgpuRuntime::from_device(device, queue, info).unwrap_err();
    assert!(matches!(err, WgpuError::MissingFeatures { .. }), "{err}");
    assert!(err.to_string().contains("IMMEDIATES"), "{err}");
}

#[test]
fn kernel_needing_what_the_device_lacks_is_refused() {
    let Some(rt) = rt() else { return };
    let mut k = vector_add();
    // A subgroup size no device has, for a kernel that talks across lanes.
    k.requirements.subgroup_shuffle = true;
    k.requirements.subgroup_size = 3;
    let err = rt.load(&k).unwrap_err();
    assert!(matches!(err, WgpuError::MissingCapabilities { .. }), "{err}");
    assert!(err.to_string().contains("subgroups of exactly 3 lanes"), "{err}");

    let mut k = vector_add();
    k.requirements.shared_bytes = rt.limits().max_compute_workgroup_storage_size + 1;
    let err = rt.load(&k).unwrap_err();
    assert!(matches!(err, WgpuError::Limit { limit: "max_compute_workgroup_storage_size", .. }), "{err}");

    let mut k = vector_add();
    k.threads = rt.limits().max_compute_invocations_per_workgroup + 1;
    assert!(matches!(rt.load(&k).unwrap_err(), WgpuError::Limit { .. }));

    let mut k = vector_add();
    k.words[0] = 0xdead_beef;
    assert!(matches!(rt.load(&k).unwrap_err(), WgpuError::InvalidKernel { .. }));
}

#[test]
fn wgpu_validation_errors_come_back_as_errors() {
    let Some(rt) = rt() else { return };
    let other = WgpuRuntime::new().unwrap();
    let k = rt.load(&vector_add()).unwrap();
    let [x, y, out] = vector_add_buffers(&other, 10);
    // Typed buffers of another device are refused before wgpu sees them.
    let err = rt.launch(&k, [1, 1, 1], &[&x, &y, &out], &[(3, Scalar::Int(10))]).unwrap_err();
    assert!(matches!(err, WgpuError::BadBuffer { index: 0, .. }), "{err}");
    assert!(matches!(rt.download(&x, DType::F32, 10), Err(WgpuError::Transfer { .. })));
    // As plain wgpu buffers they reach wgpu, whose validation error must come back, not panic.
    let raw: [&wgpu::Buffer; 3] = [&x, &y, &out];
    let err = rt.launch(&k, [1, 1, 1], &[raw[0], raw[1], raw[2]], &[(3, Scalar::Int(10))]).unwrap_err();
    assert!(matches!(err, WgpuError::Validation { .. }), "{err}");
    // A kernel loaded on another device.
    let k_other = other.load(&vector_add()).unwrap();
    let [x, y, out] = vector_add_buffers(rt, 10);
    let err = rt.launch(&k_other, [1, 1, 1], &[&x, &y, &out], &[(3, Scalar::Int(10))]).unwrap_err();
    assert!(matches!(err, WgpuError::ForeignKernel { .. }), "{err}");
}

/// `out[i] = x[i] * 3 + c` on i8 buffers, built by hand: WGSL has no 8-bit types. Scalars `n`
/// (i32) and `c` (i8, sign-extended into its 32-bit slot) are push constants at 0 and 4.
fn int8_kernel() -> SpirvKernel {
    use rspirv::dr::{Builder, Operand};
    use rspirv::spirv::{self, Capability, Decoration, StorageClass};
    let mut b = Builder::new();
    b.set_version(1, 3);
    b.capability(Capability::Shader);
    b.capability(Capability::Int8);
    b.capability(Capability::StorageBuffer8BitAccess);
    b.extension("SPV_KHR_8bit_storage");
    b.memory_model(spirv::AddressingModel::Logical, spirv::MemoryModel::GLSL450);
    let void = b.type_void();
    let fn_ty = b.type_function(void, vec![]);
    let u32_ty = b.type_int(32, 0);
    let i32_ty = b.type_int(32, 1);
    let i8_ty = b.type_int(8, 1);
    let bool_ty = b.type_bool();
    let v3 = b.type_vector(u32_ty, 3);
    let p_in = b.type_pointer(None, StorageClass::Input, v3);
    let gid = b.variable(p_in, None, StorageClass::Input, None);
    b.decorate(gid, Decoration::BuiltIn, [Operand::BuiltIn(spirv::BuiltIn::GlobalInvocationId)]);
    let rta = b.type_runtime_array(i8_ty);
    b.decorate(rta, Decoration::ArrayStride, [Operand::LiteralBit32(1)]);
    let sb = b.type_struct([rta]);
    b.decorate(sb, Decoration::Block, []);
    b.member_decorate(sb, 0, Decoration::Offset, [Operand::LiteralBit32(0)]);
    let p_sb = b.type_pointer(None, StorageClass::StorageBuffer, sb);
    let p_i8 = b.type_pointer(None, StorageClass::StorageBuffer, i8_ty);
    let buffer = |b: &mut Builder, binding: u32| {
        let v = b.variable(p_sb, None, StorageClass::StorageBuffer, None);
        b.decorate(v, Decoration::DescriptorSet, [Operand::LiteralBit32(0)]);
        b.decorate(v, Decoration::Binding, [Operand::LiteralBit32(binding)]);
        v
    };
    let x = buffer(&mut b, 0);
    let out = buffer(&mut b, 1);
    let pc = b.type_struct([i32_ty, i32_ty]);
    b.decorate(pc, Decoration::Block, []);
    b.member_decorate(pc, 0, Decoration::Offset, [Operand::LiteralBit32(0)]);
    b.member_decorate(pc, 1, Decoration::Offset, [Operand::LiteralBit32(4)]);
    let p_pc = b.type_pointer(None, StorageClass::PushConstant, pc);
    let p_pc_i32 = b.type_pointer(None, StorageClass::PushConstant, i32_ty);
    let params = b.variable(p_pc, None, StorageClass::PushConstant, None);
    let c0 = b.constant_bit32(u32_ty, 0);
    let c1 = b.constant_bit32(u32_ty, 1);
    let three = b.constant_bit32(i8_ty, 3);

    let main = b.begin_function(void, None, spirv::FunctionControl::NONE, fn_ty).unwrap();
    b.begin_block(None).unwrap();
    let g = b.load(v3, None, gid, None, []).unwrap();
    let i = b.composite_extract(u32_ty, None, g, [0]).unwrap();
    let pn = b.access_chain(p_pc_i32, None, params, [c0]).unwrap();
    let n = b.load(i32_ty, None, pn, None, []).unwrap();
    let n = b.bitcast(u32_ty, None, n).unwrap();
    let inside = b.u_less_than(bool_ty, None, i, n).unwrap();
    let then = b.id();
    let merge = b.id();
    b.selection_merge(merge, spirv::SelectionControl::NONE).unwrap();
    b.branch_conditional(inside, then, merge, []).unwrap();
    b.begin_block(Some(then)).unwrap();
    let px = b.access_chain(p_i8, None, x, [c0, i]).unwrap();
    let v = b.load(i8_ty, None, px, None, []).unwrap();
    let pcv = b.access_chain(p_pc_i32, None, params, [c1]).unwrap();
    let c = b.load(i32_ty, None, pcv, None, []).unwrap();
    let c = b.s_convert(i8_ty, None, c).unwrap();
    let r = b.i_mul(i8_ty, None, v, three).unwrap();
    let r = b.i_add(i8_ty, None, r, c).unwrap();
    let po = b.access_chain(p_i8, None, out, [c0, i]).unwrap();
    b.store(po, r, None, []).unwrap();
    b.branch(merge).unwrap();
    b.begin_block(Some(merge)).unwrap();
    b.ret().unwrap();
    b.end_function().unwrap();
    b.entry_point(spirv::ExecutionModel::GLCompute, main, "main", [gid]);
    b.execution_mode(main, spirv::ExecutionMode::LocalSize, [64, 1, 1]);
    use rspirv::binary::Assemble;
    SpirvKernel {
        name: "int8_axpb".into(),
        words: b.module().assemble(),
        entry_point: "main".into(),
        threads: 64,
        bindings: vec![binding(0, DType::I8, Access::Read), binding(1, DType::I8, Access::Write)],
        push_constants: vec![PushConstant { param: 2, offset: 0, dtype: DType::I32 }, PushConstant { param: 3, offset: 4, dtype: DType::I8 }],
        push_constant_size: 8,
        grid_fold: None,
        requirements: Requirements { int8: true, storage8: true, ..Requirements::default() },
    }
}

#[test]
fn eight_bit_storage_buffers() {
    let Some(rt) = rt() else { return };
    let k = int8_kernel();
    if !rt.capabilities().storage8 || !rt.capabilities().int8 {
        let err = rt.load(&k).unwrap_err();
        assert!(err.to_string().contains("8"), "{err}");
        skipped(&format!("the launch: {err}"));
        return;
    }
    let k = rt.load(&k).unwrap();
    let mut rng = StdRng::seed_from_u64(8);
    for n in [1usize, 5, 64, 203] {
        let x: Vec<i8> = (0..n).map(|_| rng.gen()).collect();
        let c: i8 = rng.gen_range(-128..0);
        let bx = rt.alloc_from(&HostBuffer::from_slice(&x)).unwrap();
        // The output is one element longer with a sentinel: 8-bit stores must not touch neighbours.
        let mut init = vec![0i8; n + 1];
        init[n] = 77;
        let bo = rt.alloc_from(&HostBuffer::from_slice(&init)).unwrap();
        rt.launch(&k, [(n as u32).div_ceil(64), 1, 1], &[&bx, &bo], &[(2, Scalar::Int(n as i64)), (3, Scalar::Int(c as i64))]).unwrap();
        let got = rt.download(&bo, DType::I8, n + 1).unwrap().to_vec::<i8>().unwrap();
        for i in 0..n {
            assert_eq!(got[i], x[i].wrapping_mul(3).wrapping_add(c), "n = {n}, element {i}");
        }
        assert_eq!(got[n], 77, "n = {n}: wrote past the end");
    }
}

/// A wgpu device takes f16 cooperative matrices where it has wgpu's experimental feature, and
/// never bf16 ones (wgpu enables no VK_KHR_shader_bfloat16); other matrix instructions stay.
#[test]
fn wgpu_devices_keep_f16_cooperative_matrices_only() {
    use tilekit_core::gpu::{MatrixInstr, MatrixKind, Target};
    let h200 = Target::h200_vulkan();
    assert!(h200.matrix.iter().any(|m| m.a == DType::BF16), "the preset lists bf16 cooperative matrices");
    let mut with = h200.clone();
    tilekit_spirv::keep_wgpu_matrix_instrs(&mut with, true);
    assert!(!with.matrix.is_empty());
    assert!(with.matrix.iter().all(|m| m.kind == MatrixKind::CooperativeMatrix && m.a == DType::F16), "{:?}", with.matrix);
    let mut without = h200.clone();
    tilekit_spirv::keep_wgpu_matrix_instrs(&mut without, false);
    assert!(without.matrix.is_empty(), "{:?}", without.matrix);
    let mut cuda = Target::cuda_sm80();
    cuda.matrix.push(MatrixInstr::coop_16x16x16(DType::BF16));
    tilekit_spirv::keep_wgpu_matrix_instrs(&mut cuda, false);
    assert!(!cuda.matrix.is_empty() && cuda.matrix.iter().all(|m| m.kind != MatrixKind::CooperativeMatrix));
}
