//! Devices tilekit can run on: the interpreter (the reference), the emulator of the GPU
//! lowering, every Vulkan device through the raw Vulkan runtime and through wgpu, and (with the
//! `ptx` feature) every CUDA device through the PTX backend.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tilekit_core::gpu::lower::LowerOptions;
use tilekit_core::gpu::simt::{self, SimtError};
use tilekit_core::gpu::Target;
use tilekit_core::interp::{self, Arg, InterpError};
use tilekit_core::{Config, DType, HostBuffer, Program, Scalar};
use tilekit_spirv::{compile, CompileError, VulkanError, VulkanRuntime};
use tilekit_spirv::{WgpuError, WgpuRuntime};

use crate::kernels::{Launch, LaunchArg, Plan};

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

/// Open runtimes, shared by every plan run on their device.
fn vulkan_runtime(index: usize) -> Result<Arc<VulkanRuntime>, VulkanError> {
    static RUNTIMES: OnceLock<Mutex<HashMap<usize, Arc<VulkanRuntime>>>> = OnceLock::new();
    let mut map = RUNTIMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = map.get(&index) {
        return Ok(rt.clone());
    }
    let rt = Arc::new(VulkanRuntime::new(index)?);
    map.insert(index, rt.clone());
    Ok(rt)
}

fn wgpu_runtime(name: &str) -> Result<Arc<WgpuRuntime>, WgpuError> {
    static RUNTIMES: OnceLock<Mutex<HashMap<String, Arc<WgpuRuntime>>>> = OnceLock::new();
    let mut map = RUNTIMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = map.get(name) {
        return Ok(rt.clone());
    }
    let rt = Arc::new(WgpuRuntime::with_adapter(Some(name))?);
    map.insert(name.to_string(), rt.clone());
    Ok(rt)
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
        if let Some(preset) = name.strip_prefix("emulator:").and_then(Target::preset) {
            return Ok(Device::Emulator(preset));
        }
        let all = Device::all();
        all.iter()
            .find(|d| d.name() == name)
            .or_else(|| all.iter().find(|d| d.name().starts_with(name)))
            .cloned()
            .ok_or_else(|| DeviceError::Unknown { name: name.to_string(), available: all.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ") })
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
        for (li, launch) in plan.launches.iter().enumerate() {
            for (ai, a) in launch.args.iter().enumerate() {
                if let LaunchArg::Buffer(i) = a {
                    if *i >= buffers.len() {
                        return Err(DeviceError::BadPlan { launch: li, arg: ai, buffer: *i, count: buffers.len() });
                    }
                }
            }
        }
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
    args: Vec<(Vec<usize>, Vec<(u32, Scalar)>)>,
}

impl Device {
    fn verr(&self, source: VulkanError) -> DeviceError {
        DeviceError::Vulkan { device: self.name(), source }
    }

    fn werr(&self, source: WgpuError) -> DeviceError {
        DeviceError::Wgpu { device: self.name(), source }
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
        static PIPELINES: OnceLock<PipelineCache<tilekit_spirv::Pipeline>> = OnceLock::new();
        let Device::Vulkan { target, .. } = self else { unreachable!("called for Vulkan devices") };
        plan.launches
            .iter()
            .map(|l| {
                // Folded only where the grid exceeds the device's limits: other launches keep
                // the plain kernel.
                let options = launch_options(options, l).with_fold_grid(rt.needs_fold(l.grid));
                cached(&PIPELINES, self.pipeline_key(&l.program, &options), || {
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
        static KERNELS: OnceLock<PipelineCache<tilekit_spirv::WgpuKernel>> = OnceLock::new();
        let Device::Wgpu { name, target } = self else { unreachable!("called for wgpu devices") };
        let rt = wgpu_runtime(name).map_err(|e| self.werr(e))?;
        let dev = buffers.iter().map(|b| rt.alloc_from(b)).collect::<Result<_, WgpuError>>().map_err(|e| self.werr(e))?;
        let pipelines = plan
            .launches
            .iter()
            .map(|l| {
                let options = launch_options(options, l).with_fold_grid(rt.needs_fold(l.grid));
                cached(&KERNELS, self.pipeline_key(&l.program, &options), || {
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
pub(crate) fn cuda_runtime(ordinal: usize) -> Result<Arc<tilekit_ptx::CudaRuntime>, tilekit_ptx::CudaError> {
    static RUNTIMES: OnceLock<Mutex<HashMap<usize, Arc<tilekit_ptx::CudaRuntime>>>> = OnceLock::new();
    let mut map = RUNTIMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = map.get(&ordinal) {
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
        // Loaded modules by (device, program, num_warps), like the Vulkan pipelines: LLVM's O3
        // and the driver's JIT cost far more than launching a small problem.
        static KERNELS: OnceLock<PipelineCache<tilekit_ptx::CudaKernel>> = OnceLock::new();
        let Device::Cuda { ordinal, target, .. } = self else { unreachable!("called for CUDA devices") };
        let arch = rt.info().arch().unwrap_or(tilekit_ptx::Arch::Sm80);
        plan.launches
            .iter()
            .map(|l| {
                // Modules belong to one device's context: the key names the ordinal, since
                // identical GPUs share a name.
                let options = launch_options(options, l);
                let (name, program, options) = self.pipeline_key(&l.program, &options);
                cached(&KERNELS, (format!("{name}#{ordinal}"), program, options), || {
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
