//! Devices tilekit can run on: the interpreter (the reference), the emulator of the GPU
//! lowering, every Vulkan device through the raw Vulkan runtime and through wgpu, and (with the
//! `ptx` feature) every CUDA device through the PTX backend.
//!
//! A plan runs as built ([`Device::run_plan`]) or checked ([`Device::run_plan_with`] and
//! [`RunOptions::check`]): every launch's program instrumented to record its first out-of-bounds
//! access, integer division by zero, shift out of range or failed `device_assert`
//! ([`CheckedPlan`], `tilekit_core::instrument`), reported as [`DeviceError::Fault`] in the
//! interpreter's words, on every device.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tilekit_core::gpu::lower::LowerOptions;
use tilekit_core::gpu::simt::{self, SimtError};
use tilekit_core::gpu::Target;
use tilekit_core::instrument::{self, Fault, InstrumentError, Instrumented, FAULT_WORDS};
use tilekit_core::interp::{self, Arg, InterpError};
use tilekit_core::{Config, DType, HostBuffer, Program, Scalar};
use tilekit_spirv::{compile, CompileError, VulkanError, VulkanRuntime};
use tilekit_spirv::{WgpuError, WgpuRuntime};

use crate::kernels::{BufferSpec, Launch, LaunchArg, Plan, Role};

/// A place to run plans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU interpreter, the reference every backend is checked against.
    Interpreter,
    /// The GPU lowering for a target, emulated on the CPU thread by thread: it checks layouts,
    /// reductions and barriers without a GPU.
    Emulator(Target),
    /// A Vulkan device through the raw Vulkan runtime (ash).
    Vulkan { index: usize, name: String, target: Target },
    /// A Vulkan adapter through wgpu.
    Wgpu { name: String, target: Target },
    /// A CUDA device (PTX through the driver's JIT).
    #[cfg(any(feature = "ptx", feature = "ptx-static"))]
    Cuda { ordinal: usize, name: String, target: Target },
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("no device called `{name}`; available: {available}")]
    Unknown { name: String, available: String },
    /// A device kind that exists but cannot be reached here, with the reason.
    #[error("no device called `{name}`: {why}; available: {available}")]
    Unavailable { name: String, why: String, available: String },
    #[error("unknown target `{preset}`{}; presets: {known}", if name == preset { String::new() } else { format!(" in `{name}`") })]
    UnknownTarget { name: String, preset: String, known: String },
    #[error("launch {launch} (`{program}`): {source}")]
    Interp { launch: usize, program: String, source: InterpError },
    #[error("launch {launch} (`{program}`) on the emulator: {source}")]
    Simt { launch: usize, program: String, source: SimtError },
    /// Launch options no lowering can run (`num_warps` not a power of two), refused on every
    /// device alike, the interpreter included.
    #[error(transparent)]
    Options(#[from] tilekit_core::gpu::lower::LowerError),
    #[error("launch {launch} argument {arg} names buffer {buffer}, but the plan has {count}")]
    BadPlan { launch: usize, arg: usize, buffer: usize, count: usize },
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error("{device}: {source}")]
    Vulkan { device: String, source: VulkanError },
    #[error("{device}: {source}")]
    Wgpu { device: String, source: WgpuError },
    #[cfg(any(feature = "ptx", feature = "ptx-static"))]
    #[error(transparent)]
    Ptx(#[from] tilekit_ptx::PtxError),
    #[cfg(any(feature = "ptx", feature = "ptx-static"))]
    #[error("{device}: {source}")]
    Cuda { device: String, source: tilekit_ptx::CudaError },
    #[error("launch {launch} (`{program}`) cannot be checked: {source}")]
    Instrument { launch: usize, program: String, source: InstrumentError },
    #[error("{device}: launch {launch} (`{program}`): {fault}")]
    Fault { device: String, launch: usize, program: String, fault: Fault },
    #[error("{device}: the Vulkan validation layer reported {} message(s) while running `{program}`:\n{}", messages.len(), messages.join("\n"))]
    Validation { device: String, program: String, messages: Vec<String> },
}

/// Compiled pipelines by (device, program text, lowering options): lavapipe compiles every pipeline
/// with LLVM, which costs far more than running small problems. A pipeline's descriptor set is
/// rebound per launch, so each is used by one thread at a time.
type PipelineCache<P> = Mutex<HashMap<PipelineKey, Arc<Mutex<P>>>>;

/// Device name, program text and the lowering options (warps per program, the scalar
/// arguments' divisibility marks, grid folding).
type PipelineKey = (String, String, LowerOptions);

fn cached<P>(
    cache: &'static OnceLock<PipelineCache<P>>,
    key: PipelineKey,
    make: impl FnOnce() -> Result<P, DeviceError>,
) -> Result<Arc<Mutex<P>>, DeviceError> {
    let map = cache.get_or_init(Default::default);
    if let Some(p) = map.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(p.clone());
    }
    let p = Arc::new(Mutex::new(make()?));
    map.lock().unwrap_or_else(|e| e.into_inner()).insert(key, p.clone());
    Ok(p)
}

const LAVAPIPE_HINT: &str = "lavapipe, a Vulkan device on the CPU, is in Debian's mesa-vulkan-drivers";

/// Every target preset name (`Target::preset`), for messages that list them.
pub fn target_presets() -> String {
    [&Target::PRESETS[..], &Target::CUDA_PRESETS[..], &Target::AMD_PRESETS[..]].concat().join(", ")
}

/// The target preset called `name`, or an error listing the presets: what every place that
/// takes a target name (`--target`, `emulator:PRESET`, the examples) uses, so that none falls
/// back to another target silently.
pub fn target_preset(name: &str) -> Result<Target, DeviceError> {
    Target::preset(name).ok_or_else(|| DeviceError::UnknownTarget { name: name.to_string(), preset: name.to_string(), known: target_presets() })
}

type Runtimes<K, R> = OnceLock<Mutex<HashMap<K, Arc<R>>>>;

/// Open runtimes, shared by every plan run on their device, and their compiled pipelines. A
/// runtime whose device was lost is dropped with its pipelines ([`Device::forget`]), so the next
/// launch opens a new one.
static VULKAN_RUNTIMES: Runtimes<usize, VulkanRuntime> = OnceLock::new();
static VULKAN_PIPELINES: OnceLock<PipelineCache<tilekit_spirv::Pipeline>> = OnceLock::new();
static WGPU_RUNTIMES: Runtimes<String, WgpuRuntime> = OnceLock::new();
static WGPU_KERNELS: OnceLock<PipelineCache<tilekit_spirv::WgpuKernel>> = OnceLock::new();

fn vulkan_runtime(index: usize) -> Result<Arc<VulkanRuntime>, VulkanError> {
    let mut map = VULKAN_RUNTIMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = map.get(&index).filter(|rt| !rt.is_lost()) {
        return Ok(rt.clone());
    }
    let rt = Arc::new(VulkanRuntime::new(index)?);
    map.insert(index, rt.clone());
    Ok(rt)
}

fn wgpu_runtime(name: &str) -> Result<Arc<WgpuRuntime>, WgpuError> {
    let mut map = WGPU_RUNTIMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = map.get(name).filter(|rt| !rt.is_lost()) {
        return Ok(rt.clone());
    }
    let rt = Arc::new(WgpuRuntime::with_adapter(Some(name))?);
    map.insert(name.to_string(), rt.clone());
    Ok(rt)
}

/// Drops the cached pipelines of `device` (the name their keys hold).
fn forget_pipelines<P>(cache: &'static OnceLock<PipelineCache<P>>, device: &str) {
    if let Some(map) = cache.get() {
        map.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| k.0 != device);
    }
}

impl Device {
    /// Every device reachable now: the interpreter, the emulator, then each Vulkan device twice
    /// (raw Vulkan and wgpu). A machine without a Vulkan loader simply has no GPU devices.
    pub fn all() -> Vec<Device> {
        let mut out = vec![Device::Interpreter, Device::Emulator(Target::vulkan_baseline())];
        out.extend(Device::gpus());
        out
    }

    /// The CUDA devices (with the `ptx` feature), then the Vulkan devices through both
    /// runtimes. A machine without a CUDA driver or a Vulkan loader simply lacks those devices.
    pub fn gpus() -> Vec<Device> {
        let mut out = Vec::new();
        #[cfg(any(feature = "ptx", feature = "ptx-static"))]
        out.extend(Device::cuda_devices());
        let infos = VulkanRuntime::devices().unwrap_or_default();
        for info in &infos {
            out.push(Device::Vulkan { index: info.index, name: info.name.clone(), target: info.target() });
        }
        for a in WgpuRuntime::adapters() {
            if !a.missing.is_empty() {
                continue;
            }
            if let Some(info) = infos.iter().find(|i| i.name == a.info.name) {
                out.push(Device::Wgpu { name: a.info.name.clone(), target: info.target() });
            }
        }
        out
    }

    /// Finds a device by the name [`Device::name`] prints, or by a prefix of it
    /// (`vulkan`, `wgpu:llvm`); `interp` is the interpreter and `emulator:PRESET` the emulator
    /// for a target preset.
    pub fn find(name: &str) -> Result<Device, DeviceError> {
        // The CPU devices are found without enumerating Vulkan, whose drivers may print to stderr.
        if name == "interp" || name == "interpreter" {
            return Ok(Device::Interpreter);
        }
        if name == "emulator" {
            return Ok(Device::Emulator(Target::vulkan_baseline()));
        }
        if let Some(preset) = name.strip_prefix("emulator:") {
            return target_preset(preset).map(Device::Emulator).map_err(|e| match e {
                DeviceError::UnknownTarget { preset, known, .. } => DeviceError::UnknownTarget { name: name.to_string(), preset, known },
                e => e,
            });
        }
        let all = Device::all();
        let found = all.iter().find(|d| d.name() == name).or_else(|| all.iter().find(|d| d.name().starts_with(name)));
        if let Some(d) = found {
            return Ok(d.clone());
        }
        let available = all.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ");
        match Device::why_unreachable(name) {
            Some(why) => Err(DeviceError::Unavailable { name: name.to_string(), why, available }),
            None => Err(DeviceError::Unknown { name: name.to_string(), available }),
        }
    }

    /// Why no device of the kind `name` starts with (`cuda`, `vulkan`, `wgpu`) is reachable: the
    /// feature not built, the driver or loader missing, or a driver without devices.
    fn why_unreachable(name: &str) -> Option<String> {
        let kind = name.split(':').next().unwrap_or(name);
        match kind {
            "cuda" => Some(Device::why_no_cuda()),
            "vulkan" => Some(match VulkanRuntime::devices() {
                Err(e @ VulkanError::Loader(_)) => e.to_string(),
                Err(e) => format!("the Vulkan loader lists no device ({e}; {LAVAPIPE_HINT})"),
                Ok(infos) if infos.is_empty() => {
                    format!("the Vulkan loader lists no device ({LAVAPIPE_HINT})")
                }
                Ok(infos) => format!(
                    "no Vulkan device name starts with `{}`; Vulkan devices: {}",
                    name.strip_prefix("vulkan:").unwrap_or(""),
                    infos.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            }),
            "wgpu" => {
                let adapters = WgpuRuntime::adapters();
                Some(if adapters.is_empty() {
                    tilekit_spirv::WgpuError::NoAdapter.to_string()
                } else if let Some(a) = adapters.iter().find(|a| !a.missing.is_empty()) {
                    format!("wgpu adapter `{}` lacks required features: {}", a.info.name, a.missing.join(", "))
                } else {
                    format!(
                        "no wgpu adapter name starts with `{}`; adapters: {}",
                        name.strip_prefix("wgpu:").unwrap_or(""),
                        adapters.iter().map(|a| a.info.name.as_str()).collect::<Vec<_>>().join(", ")
                    )
                })
            }
            _ => None,
        }
    }

    #[cfg(any(feature = "ptx", feature = "ptx-static"))]
    fn why_no_cuda() -> String {
        match tilekit_ptx::CudaRuntime::devices() {
            Err(e) => e.to_string(),
            Ok(d) if d.is_empty() => "the CUDA driver lists no device".into(),
            Ok(d) => format!("no CUDA device by that name; CUDA devices: {}", d.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")),
        }
    }

    #[cfg(not(any(feature = "ptx", feature = "ptx-static")))]
    fn why_no_cuda() -> String {
        "this tilekit was built without the `ptx` feature, which runs CUDA devices (cargo build --release --features ptx; it needs LLVM 19)".into()
    }

    pub fn name(&self) -> String {
        match self {
            Device::Interpreter => "interpreter".into(),
            Device::Emulator(t) => format!("emulator:{}", t.name),
            Device::Vulkan { name, .. } => format!("vulkan:{name}"),
            Device::Wgpu { name, .. } => format!("wgpu:{name}"),
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { name, .. } => format!("cuda:{name}"),
        }
    }

    /// The target a GPU device compiles for.
    pub fn target(&self) -> Option<&Target> {
        match self {
            Device::Interpreter => None,
            Device::Emulator(t) | Device::Vulkan { target: t, .. } | Device::Wgpu { target: t, .. } => Some(t),
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { target: t, .. } => Some(t),
        }
    }

    /// Runs every launch of `plan` in order over `buffers` (one per plan buffer), with the
    /// configuration's `num_warps`, and returns the wall time of the launches. On a GPU the
    /// buffers are uploaded first and every one is read back after the last launch.
    pub fn run_plan(&self, plan: &Plan, buffers: &[HostBuffer], config: &Config) -> Result<Duration, DeviceError> {
        let options = LowerOptions::for_config(config);
        options.check()?;
        check_buffer_indices(plan, buffers.len())?;
        match self {
            Device::Interpreter | Device::Emulator(_) => {
                let start = Instant::now();
                for (li, launch) in plan.launches.iter().enumerate() {
                    let args: Vec<Arg<'_>> = launch
                        .args
                        .iter()
                        .map(|a| match a {
                            LaunchArg::Buffer(i) => Arg::Buffer(&buffers[*i]),
                            LaunchArg::Scalar(s) => Arg::Scalar(*s),
                        })
                        .collect();
                    let program = launch.program.name.clone();
                    if let Device::Emulator(target) = self {
                        simt::compile(&launch.program, target, &launch_options(&options, launch))
                            .map_err(SimtError::from)
                            .and_then(|l| l.run(&launch.program, launch.grid, &args))
                            .map_err(|source| DeviceError::Simt { launch: li, program, source })?;
                    } else {
                        interp::run(&launch.program, launch.grid, &args).map_err(|source| DeviceError::Interp { launch: li, program, source })?;
                    }
                }
                Ok(start.elapsed())
            }
            Device::Vulkan { .. } => {
                let g = self.vulkan_prepare(plan, buffers, &options)?;
                let start = Instant::now();
                for ((bufs, scalars), (launch, pipeline)) in g.args.iter().zip(plan.launches.iter().zip(&g.pipelines)) {
                    let bufs: Vec<_> = bufs.iter().map(|&i| &g.buffers[i]).collect();
                    let pipeline = pipeline.lock().unwrap_or_else(|e| e.into_inner());
                    g.rt.launch(&pipeline, launch.grid, &bufs, scalars).map_err(|e| self.verr(e))?;
                }
                let elapsed = start.elapsed();
                self.vulkan_finish(plan, buffers, &g)?;
                Ok(elapsed)
            }
            Device::Wgpu { .. } => {
                let g = self.wgpu_prepare(plan, buffers, &options)?;
                let start = Instant::now();
                for ((bufs, scalars), (launch, kernel)) in g.args.iter().zip(plan.launches.iter().zip(&g.pipelines)) {
                    let bufs = wgpu_args(&g.buffers, bufs);
                    let k = kernel.lock().unwrap_or_else(|e| e.into_inner());
                    g.rt.launch(&k, launch.grid, &bufs, scalars).map_err(|e| self.werr(e))?;
                }
                let elapsed = start.elapsed();
                self.wgpu_finish(buffers, &g)?;
                Ok(elapsed)
            }
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { .. } => {
                let g = self.cuda_prepare(plan, buffers, &options)?;
                let start = Instant::now();
                for ((bufs, scalars), (launch, kernel)) in g.args.iter().zip(plan.launches.iter().zip(&g.pipelines)) {
                    let bufs: Vec<_> = bufs.iter().map(|&i| &g.buffers[i]).collect();
                    let k = kernel.lock().unwrap_or_else(|e| e.into_inner());
                    g.rt.launch(&k, launch.grid, &bufs, scalars).map_err(|e| self.cerr(e))?;
                }
                let elapsed = start.elapsed();
                self.cuda_finish(buffers, &g)?;
                Ok(elapsed)
            }
        }
    }
}

/// How [`Device::run_plan_with`] runs a plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Checked launches: each launch's program records its first out-of-bounds access, integer
    /// division by zero, shift out of range or failed `device_assert`, which the run returns as
    /// [`DeviceError::Fault`] with the op's source location, the program id and the lane. The
    /// checked programs never touch memory out of bounds. Off by default: an unchecked run
    /// launches the programs exactly as built.
    pub check: bool,
}

impl Device {
    /// As [`Device::run_plan`], with `options`. A checked run instruments the plan
    /// ([`CheckedPlan`]), runs it through [`Device::run_plan`] on copies of `buffers` with the
    /// fault records appended, copies the results back and reads the records: the first launch
    /// that recorded a fault is the error.
    pub fn run_plan_with(&self, plan: &Plan, buffers: &[HostBuffer], config: &Config, options: &RunOptions) -> Result<Duration, DeviceError> {
        if !options.check {
            return self.run_plan(plan, buffers, config);
        }
        let checked = CheckedPlan::new(plan, buffers)?;
        let all: Vec<HostBuffer> = buffers.iter().cloned().chain(checked.records()).collect();
        let elapsed = self.run_plan(&checked.plan, &all, config)?;
        for (dst, src) in buffers.iter().zip(&all) {
            copy_into(dst, src);
        }
        match checked.fault(&all)? {
            Some((launch, fault)) => {
                Err(DeviceError::Fault { device: self.name(), launch, program: plan.launches[launch].program.name.clone(), fault })
            }
            None => Ok(elapsed),
        }
    }
}

/// A plan whose launches record their first fault: each launch's program instrumented
/// (`tilekit_core::instrument`), one zeroed fault record per launch appended to the plan's
/// buffers, and each launch given its record and its buffers' lengths. It runs on any device
/// like the plan it came from.
#[derive(Clone, Debug)]
pub struct CheckedPlan {
    /// The plan to run: the original buffers, then one fault record per launch.
    pub plan: Plan,
    /// Each launch's instrumented program, with what reads its record.
    launches: Vec<Instrumented>,
    /// Index of the first fault record among the plan's buffers.
    first_record: usize,
}

impl CheckedPlan {
    /// `plan` checked for `buffers` (one per plan buffer), whose lengths bound the accesses.
    pub fn new(plan: &Plan, buffers: &[HostBuffer]) -> Result<CheckedPlan, DeviceError> {
        check_buffer_indices(plan, buffers.len())?;
        let first_record = buffers.len();
        let mut out = plan.clone();
        let mut launches = Vec::with_capacity(plan.launches.len());
        for (li, launch) in out.launches.iter_mut().enumerate() {
            let inst = instrument::instrument(&launch.program).map_err(|source| DeviceError::Instrument {
                launch: li,
                program: launch.program.name.clone(),
                source,
            })?;
            let lens: Vec<usize> = inst.lengths.iter().map(|l| arg_len(&launch.args, buffers, l.buffer)).collect();
            launch.args.push(LaunchArg::Buffer(first_record + li));
            for (l, len) in inst.lengths.iter().zip(lens) {
                launch.args.push(LaunchArg::Scalar(l.value(len)));
            }
            launch.program = inst.program.clone();
            launches.push(inst);
        }
        for li in 0..plan.launches.len() {
            out.buffers.push(BufferSpec { name: format!("faults of launch {li}"), dtype: DType::I32, len: FAULT_WORDS, role: Role::Scratch });
        }
        Ok(CheckedPlan { plan: out, launches, first_record })
    }

    /// The zeroed fault records, to follow the original buffers.
    pub fn records(&self) -> Vec<HostBuffer> {
        (0..self.launches.len()).map(|_| HostBuffer::zeros(DType::I32, FAULT_WORDS)).collect()
    }

    /// The first launch, in plan order, whose record holds a fault, and that fault, from the
    /// buffers of a run of [`CheckedPlan::plan`] (the original buffers, then the records).
    pub fn fault(&self, buffers: &[HostBuffer]) -> Result<Option<(usize, Fault)>, DeviceError> {
        for (li, (inst, launch)) in self.launches.iter().zip(&self.plan.launches).enumerate() {
            let record = buffers.get(self.first_record + li).and_then(|b| b.to_vec::<i32>()).unwrap_or_default();
            let fault = inst.fault(&record, |b| arg_len(&launch.args, buffers, b)).map_err(|source| DeviceError::Instrument {
                launch: li,
                program: inst.program.name.clone(),
                source,
            })?;
            if let Some(f) = fault {
                return Ok(Some((li, f)));
            }
        }
        Ok(None)
    }
}

/// The length of the buffer a launch passes for parameter `param` (0 where it passes none: the
/// launch then fails on its arguments).
fn arg_len(args: &[LaunchArg], buffers: &[HostBuffer], param: u32) -> usize {
    match args.get(param as usize) {
        Some(LaunchArg::Buffer(i)) => buffers.get(*i).map_or(0, HostBuffer::len),
        _ => 0,
    }
}

/// Every buffer a launch names exists.
fn check_buffer_indices(plan: &Plan, count: usize) -> Result<(), DeviceError> {
    for (li, launch) in plan.launches.iter().enumerate() {
        for (ai, a) in launch.args.iter().enumerate() {
            if let LaunchArg::Buffer(i) = a {
                if *i >= count {
                    return Err(DeviceError::BadPlan { launch: li, arg: ai, buffer: *i, count });
                }
            }
        }
    }
    Ok(())
}

/// What the compiler or the driver says one launch's kernel takes on a device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelResources {
    /// Registers per thread.
    pub registers: Option<u32>,
    /// Shared memory per program, bytes.
    pub shared_bytes: Option<u32>,
    /// Bytes spilled to local memory per thread (stores), where the assembler reports it.
    pub spill_bytes: Option<u32>,
    /// Every statistic the driver reported (Vulkan's VK_KHR_pipeline_executable_properties),
    /// as (name, value).
    pub statistics: Vec<(String, String)>,
}

impl Device {
    /// Each launch's kernel resources, for GPU devices that report them (CUDA: the driver's
    /// registers and ptxas's report; Vulkan: the pipeline's executable statistics, where the
    /// driver has VK_KHR_pipeline_executable_properties). Empty for CPU devices and wgpu. The
    /// kernels come from the same cache as runs, so asking after a run compiles nothing.
    pub fn resources(&self, plan: &Plan, config: &Config) -> Result<Vec<KernelResources>, DeviceError> {
        let options = LowerOptions::for_config(config);
        match self {
            Device::Vulkan { index, .. } => {
                let rt = vulkan_runtime(*index).map_err(|e| self.verr(e))?;
                let pipelines = self.vulkan_pipelines(&rt, plan, &options)?;
                Ok(pipelines
                    .iter()
                    .map(|p| {
                        let p = p.lock().unwrap_or_else(|e| e.into_inner());
                        let stats = p.statistics();
                        let shared = p.kernel().requirements.shared_bytes;
                        KernelResources {
                            registers: p.statistic_u64("register").and_then(|r| u32::try_from(r).ok()),
                            shared_bytes: Some(shared),
                            spill_bytes: None,
                            statistics: stats.iter().map(|s| (s.name.clone(), s.value.to_string())).collect(),
                        }
                    })
                    .collect())
            }
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { ordinal, .. } => {
                let rt = cuda_runtime(*ordinal).map_err(|e| self.cerr(e))?;
                let kernels = self.cuda_kernels(&rt, plan, &options)?;
                Ok(kernels
                    .iter()
                    .map(|k| {
                        let k = k.lock().unwrap_or_else(|e| e.into_inner());
                        let ptxas = k.ptx().resources.as_ref();
                        KernelResources {
                            registers: Some(k.registers),
                            shared_bytes: Some(k.ptx().shared_bytes),
                            spill_bytes: ptxas.map(|r| r.spill_store_bytes),
                            statistics: Vec::new(),
                        }
                    })
                    .collect())
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// How [`Device::time_plan_with`] times a plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimingOptions {
    /// Untimed runs first.
    pub warmup: usize,
    /// Timed runs: one sample each.
    pub runs: usize,
    /// Bytes of device memory overwritten before each timed run of each launch, so that runs
    /// start with cold caches (0: none; runs then go back to back on warm caches). To flush,
    /// it must exceed the device's last-level cache.
    pub flush_bytes: u64,
    /// Read the outputs back into the host buffers after the last run. A benchmark that has
    /// already checked them skips it: for large problems the copy costs far more than the runs.
    pub read_back: bool,
}

impl Device {
    /// Device time of `runs` executions of `plan` after `warmup`, in seconds per run (the sum
    /// over its launches), from device timestamps. Inputs are uploaded once; outputs are read
    /// back into `buffers` after the last run. Only GPU devices time.
    pub fn time_plan(&self, plan: &Plan, buffers: &[HostBuffer], config: &Config, warmup: usize, runs: usize) -> Result<Vec<f64>, DeviceError> {
        self.time_plan_with(plan, buffers, config, &TimingOptions { warmup, runs, flush_bytes: 0, read_back: true })
    }

    /// As [`Device::time_plan`], with a cache policy and reading back only when asked. CPU
    /// devices time the wall clock and ignore `flush_bytes`.
    pub fn time_plan_with(&self, plan: &Plan, buffers: &[HostBuffer], config: &Config, timing: &TimingOptions) -> Result<Vec<f64>, DeviceError> {
        let TimingOptions { warmup, runs, flush_bytes, read_back } = *timing;
        let options = LowerOptions::for_config(config);
        let mut total = vec![0.0; runs];
        match self {
            Device::Vulkan { .. } => {
                let g = self.vulkan_prepare(plan, buffers, &options)?;
                // Buffers no larger than one storage binding may be, which is all alloc makes.
                let chunk = (g.rt.info().max_storage_buffer_range as u64 & !3).clamp(4, 256 << 20);
                let flush = flush_chunks(flush_bytes, chunk)
                    .map(|n| g.rt.alloc(DType::U32, (n / 4) as usize))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| self.verr(e))?;
                let flush: Vec<_> = flush.iter().collect();
                for ((bufs, scalars), (launch, pipeline)) in g.args.iter().zip(plan.launches.iter().zip(&g.pipelines)) {
                    let bufs: Vec<_> = bufs.iter().map(|&i| &g.buffers[i]).collect();
                    let pipeline = pipeline.lock().unwrap_or_else(|e| e.into_inner());
                    let t = g.rt.time_flushed(&pipeline, launch.grid, &bufs, scalars, warmup, runs, &flush).map_err(|e| self.verr(e))?;
                    total.iter_mut().zip(t).for_each(|(a, b)| *a += b);
                }
                if read_back {
                    self.vulkan_finish(plan, buffers, &g)?;
                }
            }
            Device::Wgpu { .. } => {
                let g = self.wgpu_prepare(plan, buffers, &options)?;
                let chunk = (g.rt.limits().max_buffer_size & !3).clamp(4, 256 << 20);
                let flush = flush_chunks(flush_bytes, chunk)
                    .map(|n| g.rt.alloc(DType::U32, (n / 4) as usize))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| self.werr(e))?;
                let flush: Vec<&wgpu::Buffer> = flush.iter().map(|b| &b.buffer).collect();
                for ((bufs, scalars), (launch, kernel)) in g.args.iter().zip(plan.launches.iter().zip(&g.pipelines)) {
                    let bufs = wgpu_args(&g.buffers, bufs);
                    let k = kernel.lock().unwrap_or_else(|e| e.into_inner());
                    let t = g.rt.time_flushed(&k, launch.grid, &bufs, scalars, warmup, runs, &flush).map_err(|e| self.werr(e))?;
                    total.iter_mut().zip(t).for_each(|(a, b)| *a += b);
                }
                if read_back {
                    self.wgpu_finish(buffers, &g)?;
                }
            }
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { .. } => {
                let g = self.cuda_prepare(plan, buffers, &options)?;
                // One allocation: CUDA has no per-binding size limit.
                let mut flush = match flush_bytes {
                    0 => None,
                    n => Some(g.rt.alloc(DType::U8, n as usize).map_err(|e| self.cerr(e))?),
                };
                for ((bufs, scalars), (launch, kernel)) in g.args.iter().zip(plan.launches.iter().zip(&g.pipelines)) {
                    let bufs: Vec<_> = bufs.iter().map(|&i| &g.buffers[i]).collect();
                    let k = kernel.lock().unwrap_or_else(|e| e.into_inner());
                    let t = g.rt.time_flushed(&k, launch.grid, &bufs, scalars, warmup, runs, flush.as_mut()).map_err(|e| self.cerr(e))?;
                    total.iter_mut().zip(t).for_each(|(a, b)| *a += b);
                }
                if read_back {
                    self.cuda_finish(buffers, &g)?;
                }
            }
            Device::Interpreter | Device::Emulator(_) => {
                for t in total.iter_mut() {
                    *t = self.run_plan(plan, buffers, config)?.as_secs_f64();
                }
            }
        }
        Ok(total)
    }
}

/// A plan made ready on a GPU: its buffers uploaded, each launch's pipeline (from the cache)
/// and arguments (buffers in binding order, scalars with their parameter index).
struct Prepared<R, B, P> {
    rt: Arc<R>,
    buffers: Vec<B>,
    pipelines: Vec<Arc<Mutex<P>>>,
    args: Vec<LaunchArgs>,
}

/// One launch's buffers (plan indices, in binding order) and scalars (parameter index, value).
type LaunchArgs = (Vec<usize>, Vec<(u32, Scalar)>);

impl Device {
    fn verr(&self, source: VulkanError) -> DeviceError {
        if source.device_lost() {
            self.forget();
        }
        DeviceError::Vulkan { device: self.name(), source }
    }

    fn werr(&self, source: WgpuError) -> DeviceError {
        if source.device_lost() {
            self.forget();
        }
        DeviceError::Wgpu { device: self.name(), source }
    }

    /// Drops this device's open runtime and compiled pipelines after a fault that left them
    /// unusable (a lost Vulkan device, a CUDA context broken by a sticky error): the next launch
    /// opens the device afresh.
    fn forget(&self) {
        match self {
            Device::Vulkan { index, .. } => {
                if let Some(map) = VULKAN_RUNTIMES.get() {
                    map.lock().unwrap_or_else(|e| e.into_inner()).remove(index);
                }
                forget_pipelines(&VULKAN_PIPELINES, &self.name());
            }
            Device::Wgpu { name, .. } => {
                if let Some(map) = WGPU_RUNTIMES.get() {
                    map.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
                }
                forget_pipelines(&WGPU_KERNELS, &self.name());
            }
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { ordinal, .. } => {
                if let Some(map) = CUDA_RUNTIMES.get() {
                    map.lock().unwrap_or_else(|e| e.into_inner()).remove(ordinal);
                }
                forget_pipelines(&CUDA_KERNELS, &format!("{}#{ordinal}", self.name()));
            }
            Device::Interpreter | Device::Emulator(_) => {}
        }
    }

    /// Drops the compiled pipelines this device keeps (the runtime stays open). Callers that
    /// run many programs once each, such as the fuzzer, keep the cache from growing.
    pub fn forget_pipelines(&self) {
        match self {
            Device::Vulkan { .. } => forget_pipelines(&VULKAN_PIPELINES, &self.name()),
            Device::Wgpu { .. } => forget_pipelines(&WGPU_KERNELS, &self.name()),
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { ordinal, .. } => forget_pipelines(&CUDA_KERNELS, &format!("{}#{ordinal}", self.name())),
            Device::Interpreter | Device::Emulator(_) => {}
        }
    }

    /// The cache key of a launch's compiled pipeline on this device.
    fn pipeline_key(&self, program: &Program, options: &LowerOptions) -> PipelineKey {
        (self.name(), tilekit_core::text::print(program), *options)
    }

    fn vulkan_prepare(
        &self,
        plan: &Plan,
        buffers: &[HostBuffer],
        options: &LowerOptions,
    ) -> Result<Prepared<VulkanRuntime, tilekit_spirv::DeviceBuffer, tilekit_spirv::Pipeline>, DeviceError> {
        let Device::Vulkan { index, .. } = self else { unreachable!("called for Vulkan devices") };
        let rt = vulkan_runtime(*index).map_err(|e| self.verr(e))?;
        let dev = buffers
            .iter()
            .map(|b| {
                let d = rt.alloc(b.dtype(), b.len())?;
                rt.upload(&d, b)?;
                Ok(d)
            })
            .collect::<Result<_, VulkanError>>()
            .map_err(|e| self.verr(e))?;
        let pipelines = self.vulkan_pipelines(&rt, plan, options)?;
        Ok(Prepared { rt, buffers: dev, pipelines, args: plan.launches.iter().map(|l| split_args(&l.args)).collect() })
    }

    /// Each launch's pipeline, compiled and created once per (device, program, options).
    fn vulkan_pipelines(
        &self,
        rt: &VulkanRuntime,
        plan: &Plan,
        options: &LowerOptions,
    ) -> Result<Vec<Arc<Mutex<tilekit_spirv::Pipeline>>>, DeviceError> {
        let Device::Vulkan { target, .. } = self else { unreachable!("called for Vulkan devices") };
        plan.launches
            .iter()
            .map(|l| {
                // Folded only where the grid exceeds the device's limits: other launches keep
                // the plain kernel.
                let options = launch_options(options, l).with_fold_grid(rt.needs_fold(l.grid));
                cached(&VULKAN_PIPELINES, self.pipeline_key(&l.program, &options), || {
                    rt.load(&compile(&l.program, target, &options)?.kernel).map_err(|e| self.verr(e))
                })
            })
            .collect()
    }

    /// Reads every buffer back and fails on any message the validation layer reported.
    fn vulkan_finish<P>(
        &self,
        plan: &Plan,
        buffers: &[HostBuffer],
        g: &Prepared<VulkanRuntime, tilekit_spirv::DeviceBuffer, P>,
    ) -> Result<(), DeviceError> {
        for (host, d) in buffers.iter().zip(&g.buffers) {
            copy_into(host, &g.rt.download(d).map_err(|e| self.verr(e))?);
        }
        let messages = g.rt.take_validation_messages();
        if !messages.is_empty() {
            let program = plan.launches.iter().map(|l| l.program.name.as_str()).collect::<Vec<_>>().join(", ");
            return Err(DeviceError::Validation { device: self.name(), program, messages });
        }
        Ok(())
    }

    fn wgpu_prepare(
        &self,
        plan: &Plan,
        buffers: &[HostBuffer],
        options: &LowerOptions,
    ) -> Result<Prepared<WgpuRuntime, tilekit_spirv::WgpuBuffer, tilekit_spirv::WgpuKernel>, DeviceError> {
        let Device::Wgpu { name, target } = self else { unreachable!("called for wgpu devices") };
        let rt = wgpu_runtime(name).map_err(|e| self.werr(e))?;
        let dev = buffers.iter().map(|b| rt.alloc_from(b)).collect::<Result<_, WgpuError>>().map_err(|e| self.werr(e))?;
        let pipelines = plan
            .launches
            .iter()
            .map(|l| {
                let options = launch_options(options, l).with_fold_grid(rt.needs_fold(l.grid));
                cached(&WGPU_KERNELS, self.pipeline_key(&l.program, &options), || {
                    rt.load(&compile(&l.program, target, &options)?.kernel).map_err(|e| self.werr(e))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Prepared { rt, buffers: dev, pipelines, args: plan.launches.iter().map(|l| split_args(&l.args)).collect() })
    }

    fn wgpu_finish<P>(&self, buffers: &[HostBuffer], g: &Prepared<WgpuRuntime, tilekit_spirv::WgpuBuffer, P>) -> Result<(), DeviceError> {
        for (host, d) in buffers.iter().zip(&g.buffers) {
            copy_into(host, &g.rt.download(d, host.dtype(), host.len()).map_err(|e| self.werr(e))?);
        }
        Ok(())
    }
}

#[cfg(any(feature = "ptx", feature = "ptx-static"))]
static CUDA_RUNTIMES: Runtimes<usize, tilekit_ptx::CudaRuntime> = OnceLock::new();
/// Loaded modules by (device, program, options), like the Vulkan pipelines: LLVM's O3 and the
/// driver's JIT cost far more than launching a small problem.
#[cfg(any(feature = "ptx", feature = "ptx-static"))]
static CUDA_KERNELS: OnceLock<PipelineCache<tilekit_ptx::CudaKernel>> = OnceLock::new();

#[cfg(any(feature = "ptx", feature = "ptx-static"))]
pub(crate) fn cuda_runtime(ordinal: usize) -> Result<Arc<tilekit_ptx::CudaRuntime>, tilekit_ptx::CudaError> {
    let mut map = CUDA_RUNTIMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = map.get(&ordinal).filter(|rt| !rt.is_lost()) {
        return Ok(rt.clone());
    }
    let rt = Arc::new(tilekit_ptx::CudaRuntime::new(ordinal)?);
    map.insert(ordinal, rt.clone());
    Ok(rt)
}

#[cfg(any(feature = "ptx", feature = "ptx-static"))]
impl Device {
    /// Every CUDA device the driver lists and the PTX backend supports (compute capability 8.0
    /// or newer); none without a driver.
    pub fn cuda_devices() -> Vec<Device> {
        let Ok(infos) = tilekit_ptx::CudaRuntime::devices() else {
            return Vec::new();
        };
        infos.into_iter().map(|i| Device::Cuda { ordinal: i.ordinal, target: i.target(), name: i.name }).collect()
    }

    fn cerr(&self, source: tilekit_ptx::CudaError) -> DeviceError {
        if source.context_lost() {
            self.forget();
        }
        DeviceError::Cuda { device: self.name(), source }
    }

    fn cuda_prepare(
        &self,
        plan: &Plan,
        buffers: &[HostBuffer],
        options: &LowerOptions,
    ) -> Result<Prepared<tilekit_ptx::CudaRuntime, tilekit_ptx::CudaBuffer, tilekit_ptx::CudaKernel>, DeviceError> {
        let Device::Cuda { ordinal, .. } = self else { unreachable!("called for CUDA devices") };
        let rt = cuda_runtime(*ordinal).map_err(|e| self.cerr(e))?;
        let dev = buffers
            .iter()
            .map(|b| {
                let mut d = rt.alloc(b.dtype(), b.len())?;
                rt.upload(&mut d, b)?;
                Ok(d)
            })
            .collect::<Result<_, tilekit_ptx::CudaError>>()
            .map_err(|e| self.cerr(e))?;
        let pipelines = self.cuda_kernels(&rt, plan, options)?;
        Ok(Prepared { rt, buffers: dev, pipelines, args: plan.launches.iter().map(|l| split_args(&l.args)).collect() })
    }

    /// Each launch's module, compiled and loaded once per (device, program, options).
    fn cuda_kernels(
        &self,
        rt: &tilekit_ptx::CudaRuntime,
        plan: &Plan,
        options: &LowerOptions,
    ) -> Result<Vec<Arc<Mutex<tilekit_ptx::CudaKernel>>>, DeviceError> {
        let Device::Cuda { ordinal, target, .. } = self else { unreachable!("called for CUDA devices") };
        let arch = rt.info().arch().unwrap_or(tilekit_ptx::Arch::Sm80);
        plan.launches
            .iter()
            .map(|l| {
                // Modules belong to one device's context: the key names the ordinal, since
                // identical GPUs share a name.
                let options = launch_options(options, l);
                let (name, program, options) = self.pipeline_key(&l.program, &options);
                cached(&CUDA_KERNELS, (format!("{name}#{ordinal}"), program, options), || {
                    rt.load(&tilekit_ptx::compile(&l.program, target, &options, arch)?.kernel).map_err(|e| self.cerr(e))
                })
            })
            .collect()
    }

    fn cuda_finish<P>(&self, buffers: &[HostBuffer], g: &Prepared<tilekit_ptx::CudaRuntime, tilekit_ptx::CudaBuffer, P>) -> Result<(), DeviceError> {
        for (host, d) in buffers.iter().zip(&g.buffers) {
            copy_into(host, &g.rt.download(d).map_err(|e| self.cerr(e))?);
        }
        Ok(())
    }
}

/// Sizes of the buffers that together hold `bytes` (rounded up to whole words), none larger
/// than `chunk`.
fn flush_chunks(bytes: u64, chunk: u64) -> impl Iterator<Item = u64> {
    let bytes = bytes.div_ceil(4) * 4;
    (0..bytes.div_ceil(chunk)).map(move |i| chunk.min(bytes - i * chunk))
}

/// wgpu's view of a launch's buffers.
fn wgpu_args<'a>(buffers: &'a [tilekit_spirv::WgpuBuffer], indices: &[usize]) -> Vec<&'a dyn tilekit_spirv::wgpu_rt::KernelBuffer> {
    indices.iter().map(|&i| &buffers[i] as &dyn tilekit_spirv::wgpu_rt::KernelBuffer).collect()
}

/// `base` specialized on `launch`'s scalar arguments (which are multiples of 16).
pub fn launch_options(base: &LowerOptions, launch: &Launch) -> LowerOptions {
    base.specialize(launch.args.iter().enumerate().filter_map(|(p, a)| match a {
        LaunchArg::Scalar(s) => Some((p as u32, s)),
        LaunchArg::Buffer(_) => None,
    }))
}

/// Buffer arguments in binding order (buffer parameters in parameter order) and scalar
/// arguments with their parameter index.
fn split_args(args: &[LaunchArg]) -> (Vec<usize>, Vec<(u32, Scalar)>) {
    let mut bufs = Vec::new();
    let mut scalars = Vec::new();
    for (p, a) in args.iter().enumerate() {
        match a {
            LaunchArg::Buffer(i) => bufs.push(*i),
            LaunchArg::Scalar(s) => scalars.push((p as u32, *s)),
        }
    }
    (bufs, scalars)
}

/// Overwrites `dst`'s elements with `src`'s (same dtype and length).
fn copy_into(dst: &HostBuffer, src: &HostBuffer) {
    if !dst.copy_from(src) {
        for i in 0..dst.len().min(src.len()) {
            dst.store_bits(i, src.load_bits(i));
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_names_resolve_or_list_the_presets() {
        for name in target_presets().split(", ") {
            assert!(target_preset(name).is_ok(), "{name}");
        }
        let e = target_preset("lavapipe2").unwrap_err().to_string();
        assert!(e.starts_with("unknown target `lavapipe2`; presets: ") && e.contains("h200-vulkan") && e.contains("gfx1100"), "{e}");
        let e = Device::find("emulator:nope").unwrap_err().to_string();
        assert!(e.starts_with("unknown target `nope` in `emulator:nope`; presets: "), "{e}");
        assert_eq!(Device::find("emulator:lavapipe").unwrap(), Device::Emulator(Target::lavapipe()));
    }
}
