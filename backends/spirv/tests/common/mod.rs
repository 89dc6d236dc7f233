//! Shared helpers: building kernels by driving the emitter directly, validating every module
//! with spirv-val, and running on a Vulkan device with the validation layer.

#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use tilekit_core::gpu::{Emitter, Target};
use tilekit_core::ir::{Arena, Block, CmpPred, Param, ParamKind};
use tilekit_core::{Access, DType, HostBuffer, Program, Scalar};
use tilekit_spirv::{SpirvEmitter, SpirvKernel, SpirvValue};
#[cfg(feature = "vulkan")]
use tilekit_spirv::{VulkanOptions, VulkanRuntime};

/// A program with these parameters and an empty body: the emitter reads only the interface.
pub fn program(name: &str, params: &[(&str, ParamKind)]) -> Program {
    Program {
        name: name.into(),
        params: params.iter().map(|(n, k)| Param { name: n.to_string(), kind: k.clone() }).collect(),
        grid_rank: 3,
        values: Arena::new(),
        body: Block::default(),
    }
}

pub fn input(d: DType) -> ParamKind {
    ParamKind::Buffer { dtype: d, access: Access::Read }
}
pub fn output(d: DType) -> ParamKind {
    ParamKind::Buffer { dtype: d, access: Access::Write }
}
pub fn inout(d: DType) -> ParamKind {
    ParamKind::Buffer { dtype: d, access: Access::ReadWrite }
}
pub fn scalar(d: DType) -> ParamKind {
    ParamKind::Scalar { dtype: d }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Says on stderr that the running test (or the part of it named in `reason`) did not run and
/// why, as `SKIPPED: <test> (<reason>)`. Written to the stream itself, past the harness's
/// capture, so the line shows although the test passes; scripts/test.sh lists them at the end.
pub fn skipped(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // One write: piecewise, lines of tests running beside it could land inside it.
    let _ = std::io::stderr().lock().write_all(format!("SKIPPED: {test} ({reason})\n").as_bytes());
}

/// Runs Debian's `spirv-val --target-env vulkan1.3` on the module; panics with its message when
/// the module is invalid, and when spirv-val is missing unless TILEKIT_SKIP_SPIRV_VAL=1.
pub fn spirv_val(kernel: &SpirvKernel) {
    if std::env::var("TILEKIT_SKIP_SPIRV_VAL").is_ok_and(|v| v == "1") {
        return;
    }
    let bytes: Vec<u8> = kernel.words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let dir = std::env::temp_dir();
    let path = dir.join(format!("tilekit-spirv-test-{}-{}.spv", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&path, &bytes).expect("write a temporary SPIR-V file");
    let out = Command::new("spirv-val").args(["--target-env", "vulkan1.3"]).arg(&path).stdin(Stdio::null()).output();
    let _ = std::fs::remove_file(&path);
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!(
            "spirv-val is needed to validate the emitted SPIR-V but could not be run ({e}); install \
             spirv-tools (Debian: apt-get install spirv-tools) or set TILEKIT_SKIP_SPIRV_VAL=1"
        ),
    };
    if !out.status.success() {
        panic!(
            "spirv-val rejected kernel `{}`:\n{}{}\n{}",
            kernel.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            tilekit_spirv::disassemble(&kernel.words)
        );
    }
}

/// The device the tests run on: TILEKIT_VULKAN_DEVICE (an index), else lavapipe, else the
/// first device. Validation is on unless TILEKIT_VULKAN_VALIDATION=0.
#[cfg(feature = "vulkan")]
pub fn runtime() -> VulkanRuntime {
    runtime_with(|_| {})
}

#[cfg(feature = "vulkan")]
pub fn runtime_with(f: impl FnOnce(&mut VulkanOptions)) -> VulkanRuntime {
    let devices = VulkanRuntime::devices().unwrap_or_else(|e| panic!("Vulkan is needed for these tests: {e}"));
    assert!(!devices.is_empty(), "no Vulkan device found (install mesa-vulkan-drivers for lavapipe)");
    let index = match std::env::var("TILEKIT_VULKAN_DEVICE") {
        Ok(v) => v.parse().expect("TILEKIT_VULKAN_DEVICE is a device index"),
        Err(_) => devices.iter().find(|d| d.name.contains("llvmpipe")).unwrap_or(&devices[0]).index,
    };
    let mut options = VulkanOptions { validation: !std::env::var("TILEKIT_VULKAN_VALIDATION").is_ok_and(|v| v == "0"), ..VulkanOptions::default() };
    f(&mut options);
    VulkanRuntime::with_options(index, options).unwrap_or_else(|e| panic!("opening Vulkan device {index}: {e}"))
}

/// Panics on any validation message collected so far.
#[cfg(feature = "vulkan")]
pub fn assert_clean(rt: &VulkanRuntime) {
    let msgs = rt.take_validation_messages();
    assert!(msgs.is_empty(), "validation messages:\n{}", msgs.join("\n"));
}

/// Uploads `inputs` (one host buffer per binding), launches, downloads every binding.
#[cfg(feature = "vulkan")]
pub fn run(rt: &VulkanRuntime, kernel: &SpirvKernel, grid: [u32; 3], buffers: &[HostBuffer], scalars: &[(u32, Scalar)]) -> Vec<HostBuffer> {
    spirv_val(kernel);
    let p = rt.load(kernel).unwrap_or_else(|e| panic!("load {}: {e}", kernel.name));
    let dev: Vec<_> = buffers
        .iter()
        .map(|h| {
            let d = rt.alloc(h.dtype(), h.len()).expect("alloc");
            rt.upload(&d, h).expect("upload");
            d
        })
        .collect();
    let refs: Vec<_> = dev.iter().collect();
    rt.launch(&p, grid, &refs, scalars).unwrap_or_else(|e| panic!("launch {}: {e}", kernel.name));
    let out = dev.iter().map(|d| rt.download(d).expect("download")).collect();
    assert_clean(rt);
    out
}

/// `idx = program_id(0) * threads + thread_index` and `idx < n`.
pub fn global_index(e: &mut SpirvEmitter, threads: u32, n_param: u32) -> (SpirvValue, SpirvValue) {
    let tid = e.thread_index();
    let pid = e.program_id(0);
    let t = e.constant(DType::I32, Scalar::Int(threads as i64));
    let base = e.binary(tilekit_core::ir::BinaryOp::Mul, DType::I32, pid, t);
    let idx = e.binary(tilekit_core::ir::BinaryOp::Add, DType::I32, base, tid);
    let n = e.scalar_param(n_param, DType::I32);
    let mask = e.cmp(CmpPred::Lt, DType::I32, idx, n);
    (idx, mask)
}

/// An elementwise kernel: parameters `ins` (read), `outs` (write), then `n: i32`; each thread
/// with `idx < n` loads every input at `idx`, calls `body`, stores its results at `idx`.
pub fn elementwise(
    name: &str,
    target: &Target,
    threads: u32,
    ins: &[DType],
    outs: &[DType],
    body: impl FnOnce(&mut SpirvEmitter, &[SpirvValue]) -> Vec<SpirvValue>,
) -> SpirvKernel {
    elementwise_with(name, target, threads, false, ins, outs, body)
}

/// As [`elementwise`], with its grid folded when `fold_grid`.
pub fn elementwise_with(
    name: &str,
    target: &Target,
    threads: u32,
    fold_grid: bool,
    ins: &[DType],
    outs: &[DType],
    body: impl FnOnce(&mut SpirvEmitter, &[SpirvValue]) -> Vec<SpirvValue>,
) -> SpirvKernel {
    let mut params: Vec<(String, ParamKind)> = Vec::new();
    for (i, &d) in ins.iter().enumerate() {
        params.push((format!("in{i}"), input(d)));
    }
    for (i, &d) in outs.iter().enumerate() {
        params.push((format!("out{i}"), output(d)));
    }
    params.push(("n".into(), scalar(DType::I32)));
    let named: Vec<(&str, ParamKind)> = params.iter().map(|(n, k)| (n.as_str(), k.clone())).collect();
    let prog = program(name, &named);
    let mut e = SpirvEmitter::with_grid_fold(&prog, target, threads, fold_grid).unwrap_or_else(|err| panic!("{err}"));
    let n_param = (ins.len() + outs.len()) as u32;
    let (idx, mask) = global_index(&mut e, threads, n_param);
    e.begin_if(mask, &[]);
    let vals: Vec<SpirvValue> = ins.iter().enumerate().map(|(i, &d)| e.load_global(i as u32, d, idx, DType::I32)).collect();
    let res = body(&mut e, &vals);
    assert_eq!(res.len(), outs.len(), "the body yields one value per output");
    for (j, (&d, v)) in outs.iter().zip(&res).enumerate() {
        e.store_global((ins.len() + j) as u32, d, idx, DType::I32, *v);
    }
    e.begin_else(&[]);
    e.end_if(&[]);
    e.finish().unwrap_or_else(|err| panic!("{err}"))
}

/// Runs an elementwise kernel built by [`elementwise`] over `inputs` (all of length n); outputs
/// are poisoned first so an element the kernel skipped cannot pass.
#[cfg(feature = "vulkan")]
pub fn run_elementwise(rt: &VulkanRuntime, kernel: &SpirvKernel, threads: u32, inputs: &[HostBuffer], outs: &[DType]) -> Vec<HostBuffer> {
    let n = inputs.first().map_or(0, |b| b.len());
    let mut bufs: Vec<HostBuffer> = inputs.to_vec();
    for &d in outs {
        let b = HostBuffer::zeros(d, n);
        b.fill_bits(0xA5A5_A5A5_A5A5_A5A5);
        bufs.push(b);
    }
    let grid = [(n as u32).div_ceil(threads).max(1), 1, 1];
    let res = run(rt, kernel, grid, &bufs, &[((inputs.len() + outs.len()) as u32, Scalar::Int(n as i64))]);
    res[inputs.len()..].to_vec()
}

// ---- reference semantics (the interpreter's) and data helpers ----

use half::{bf16, f16};
use rand::Rng;

/// Wraps to an integer dtype's width, sign- or zero-extending back (i1 keeps its low bit).
pub fn wrap(d: DType, x: i64) -> i64 {
    match d {
        DType::I1 => x & 1,
        DType::I8 => x as i8 as i64,
        DType::U8 => x as u8 as i64,
        DType::I16 => x as i16 as i64,
        DType::I32 => x as i32 as i64,
        DType::U32 => x as u32 as i64,
        _ => x,
    }
}

/// Rounds an f32 to a float dtype (nearest even), as the interpreter does.
pub fn round_to(d: DType, x: f32) -> f32 {
    match d {
        DType::F16 => f16::from_f32(x).to_f32(),
        DType::BF16 => bf16::from_f32(x).to_f32(),
        _ => x,
    }
}

pub fn ints(d: DType, vals: &[i64]) -> HostBuffer {
    let b = HostBuffer::zeros(d, vals.len());
    for (i, &v) in vals.iter().enumerate() {
        b.store_bits(i, v as u64);
    }
    b
}

pub fn read_ints(b: &HostBuffer) -> Vec<i64> {
    (0..b.len()).map(|i| wrap(b.dtype(), b.load_bits(i) as i64)).collect()
}

/// A float buffer of dtype `d` (values rounded to it).
pub fn floats(d: DType, vals: &[f32]) -> HostBuffer {
    let b = HostBuffer::zeros(d, vals.len());
    for (i, &v) in vals.iter().enumerate() {
        b.store_bits(i, float_bits(d, v));
    }
    b
}

pub fn float_bits(d: DType, v: f32) -> u64 {
    match d {
        DType::F16 => f16::from_f32(v).to_bits() as u64,
        DType::BF16 => bf16::from_f32(v).to_bits() as u64,
        _ => v.to_bits() as u64,
    }
}

pub fn float_of(d: DType, bits: u64) -> f32 {
    match d {
        DType::F16 => f16::from_bits(bits as u16).to_f32(),
        DType::BF16 => bf16::from_bits(bits as u16).to_f32(),
        _ => f32::from_bits(bits as u32),
    }
}

pub fn read_floats(b: &HostBuffer) -> Vec<f32> {
    (0..b.len()).map(|i| float_of(b.dtype(), b.load_bits(i))).collect()
}

/// Equal bit patterns, or both NaN (devices may change NaN payloads).
pub fn same_float(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Distance in units in the last place of f32 (same-sign finite values).
pub fn ulps(a: f32, b: f32) -> u64 {
    if same_float(a, b) {
        return 0;
    }
    if a.is_nan() || b.is_nan() || a.signum() != b.signum() {
        return if a == b { 0 } else { u64::MAX };
    }
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
}

/// A uniformly random value of integer dtype `d` over its whole range.
pub fn rand_int(rng: &mut impl Rng, d: DType) -> i64 {
    let (lo, hi) = d.int_range().expect("integer dtype");
    if d == DType::I64 {
        rng.gen::<i64>()
    } else {
        rng.gen_range(lo..=hi)
    }
}

/// `±m * 10^e` with `e` uniform in `exp_range`: spans magnitudes as real data does.
pub fn rand_float(rng: &mut impl Rng, exp_range: std::ops::Range<f32>) -> f32 {
    let m = rng.gen_range(1.0f32..10.0);
    let e = rng.gen_range(exp_range);
    let s = if rng.gen_bool(0.5) { -1.0 } else { 1.0 };
    s * m * 10f32.powf(e)
}
