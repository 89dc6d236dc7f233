//! Devices tilekit can run on: the interpreter (the reference), the emulator of the GPU
//! lowering, every Vulkan device through the raw Vulkan runtime (feature `vulkan`) and through
//! wgpu (feature `wgpu`), and (with the `ptx` feature) every CUDA device through the PTX backend.
//! A kind of device whose runtime is not built has no variant here, and [`Device::find`] says
//! which feature runs it.
//!
//! A plan runs as built ([`Device::run_plan`]) or checked ([`Device::run_plan_with`] and
//! [`RunOptions::check`]): every launch's program instrumented to record its first out-of-bounds
//! access, integer division by zero, shift out of range or failed `device_assert`
//! ([`CheckedPlan`], `tilekit_core::instrument`), reported as [`DeviceError::Fault`] in the
//! interpreter's words, on every device.

#[cfg(any(feature = "ptx", feature = "ptx-static"))]
use std::collections::HashMap;
use std::fmt;
#[cfg(any(feature = "ptx", feature = "ptx-static"))]
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tilekit_core::gpu::lower::LowerOptions;
use tilekit_core::gpu::simt::SimtError;
use tilekit_core::gpu::Target;
use tilekit_core::instrument::{self, Fault, InstrumentError, Instrumented, FAULT_WORDS};
use tilekit_core::interp::InterpError;
use tilekit_core::{Config, DType, HostBuffer, Scalar};
use tilekit_spirv::CompileError;
#[cfg(feature = "vulkan")]
use tilekit_spirv::VulkanError;
#[cfg(any(feature = "vulkan", feature = "wgpu"))]
use tilekit_spirv::VulkanRuntime;
#[cfg(feature = "wgpu")]
use tilekit_spirv::{WgpuError, WgpuRuntime};

use crate::kernels::{BufferSpec, Launch, LaunchArg, Plan, Role};
use crate::runtime::{self, with_runtime, Runtime};

/// A place to run plans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU interpreter, the reference every backend is checked against.
    Interpreter,
    /// The GPU lowering for a target, emulated on the CPU thread by thread: it checks layouts,
    /// reductions and barriers without a GPU.
    Emulator(Target),
    /// A Vulkan device through the raw Vulkan runtime (ash).
    #[cfg(feature = "vulkan")]
    Vulkan { index: usize, name: String, target: Target },
    /// A Vulkan adapter through wgpu: SPIR-V passed through to the driver, or, with `naga`, a
    /// naga module that wgpu writes for its backend itself (`wgpu-naga:NAME`, the path of
    /// every wgpu backend; its target is [`tilekit_naga::target_for`] the device's).
    #[cfg(feature = "wgpu")]
    Wgpu { name: String, target: Target, naga: bool },
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
    #[error(transparent)]
    Naga(#[from] tilekit_naga::CompileError),
    #[cfg(feature = "vulkan")]
    #[error("{device}: {source}")]
    Vulkan { device: String, source: VulkanError },
    #[cfg(feature = "wgpu")]
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
    /// An upload or download between buffers that do not match, or to a buffer of another
    /// device.
    #[error("{device}: {what}")]
    Transfer { device: String, what: String },
    #[error("{device}: the Vulkan validation layer reported {} message(s) while running `{program}`:\n{}", messages.len(), messages.join("\n"))]
    Validation { device: String, program: String, messages: Vec<String> },
}

impl DeviceError {
    /// The error with the launch index a plan gives it (a runtime's launch knows none).
    pub(crate) fn at_launch(self, li: usize) -> DeviceError {
        match self {
            DeviceError::Interp { program, source, .. } => DeviceError::Interp { launch: li, program, source },
            DeviceError::Simt { program, source, .. } => DeviceError::Simt { launch: li, program, source },
            e => e,
        }
    }
}

#[cfg(feature = "vulkan")]
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

impl Device {
    /// Every device reachable now: the interpreter, the emulator, then each Vulkan device three
    /// times (raw Vulkan, wgpu with SPIR-V passed through, wgpu through naga). A machine without a Vulkan loader simply has no GPU devices.
    pub fn all() -> Vec<Device> {
        let mut out = vec![Device::Interpreter, Device::Emulator(Target::vulkan_baseline())];
        out.extend(Device::every_gpu());
        out
    }

    /// [`Device::gpus`] then [`Device::naga_gpus`], the drivers enumerated once.
    pub fn every_gpu() -> Vec<Device> {
        let (mut out, naga) = Device::enumerate(true);
        out.extend(naga);
        out
    }

    /// The wgpu adapters again, through naga (`wgpu-naga:NAME`): wgpu writes the module for its
    /// backend itself, as on Metal, DX12 and GL. Kept apart from [`Device::gpus`] because the
    /// path keeps fewer float guarantees (no float controls: subnormals and the sign of a zero,
    /// docs/semantics.md) and refuses what naga cannot express.
    pub fn naga_gpus() -> Vec<Device> {
        Device::enumerate(false).1
    }

    /// The CUDA devices (with the `ptx` feature), then the Vulkan devices through both
    /// runtimes (those built). A machine without a CUDA driver or a Vulkan loader simply lacks
    /// those devices.
    pub fn gpus() -> Vec<Device> {
        Device::enumerate(true).0
    }

    /// The devices of [`Device::gpus`] (CUDA's only with `cuda`) and of [`Device::naga_gpus`],
    /// from one enumeration of the Vulkan devices and wgpu adapters.
    #[allow(unused_variables)] // a build without GPU runtimes has none
    fn enumerate(cuda: bool) -> (Vec<Device>, Vec<Device>) {
        // Every kind of GPU device is a feature: a build may have none.
        #[allow(unused_mut)]
        let (mut out, mut naga) = (Vec::new(), Vec::new());
        #[cfg(any(feature = "ptx", feature = "ptx-static"))]
        if cuda {
            out.extend(Device::cuda_devices());
        }
        // wgpu's adapters take their targets from the Vulkan probe too.
        #[cfg(any(feature = "vulkan", feature = "wgpu"))]
        let infos = VulkanRuntime::devices().unwrap_or_default();
        #[cfg(feature = "vulkan")]
        for info in &infos {
            out.push(Device::Vulkan { index: info.index, name: info.name.clone(), target: info.target() });
        }
        #[cfg(feature = "wgpu")]
        for a in WgpuRuntime::adapters() {
            if !a.missing.is_empty() {
                continue;
            }
            if let Some(info) = infos.iter().find(|i| i.name == a.info.name) {
                // Cooperative matrices where wgpu can enable them (its experimental feature).
                let mut target = info.target();
                tilekit_spirv::keep_wgpu_matrix_instrs(&mut target, a.cooperative_matrices);
                out.push(Device::Wgpu { name: a.info.name.clone(), target, naga: false });
                // Shuffles where wgpu offers subgroups and the driver gives one size: with
                // wgpu's SUBGROUP feature a pipeline may get any size in the range.
                let shuffles = a.subgroups && info.min_subgroup_size == info.max_subgroup_size;
                let target = tilekit_naga::target_for(&info.target(), shuffles);
                naga.push(Device::Wgpu { name: a.info.name.clone(), target, naga: true });
            }
        }
        (out, naga)
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
            "vulkan" => Some(Device::why_no_vulkan(name)),
            "wgpu" | "wgpu-naga" => Some(Device::why_no_wgpu(name)),
            _ => None,
        }
    }

    #[cfg(feature = "vulkan")]
    fn why_no_vulkan(name: &str) -> String {
        match VulkanRuntime::devices() {
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
        }
    }

    #[cfg(not(feature = "vulkan"))]
    fn why_no_vulkan(_name: &str) -> String {
        "this tilekit was built without the `vulkan` feature, which runs Vulkan devices through the raw Vulkan runtime (a default feature of the tilekit crate)".into()
    }

    #[cfg(feature = "wgpu")]
    fn why_no_wgpu(name: &str) -> String {
        let adapters = WgpuRuntime::adapters();
        if adapters.is_empty() {
            tilekit_spirv::WgpuError::NoAdapter.to_string()
        } else if let Some(a) = adapters.iter().find(|a| !a.missing.is_empty()) {
            format!("wgpu adapter `{}` lacks required features: {}", a.info.name, a.missing.join(", "))
        } else {
            format!(
                "no wgpu adapter name starts with `{}`; adapters: {}",
                name.split_once(':').map_or("", |(_, n)| n),
                adapters.iter().map(|a| a.info.name.as_str()).collect::<Vec<_>>().join(", ")
            )
        }
    }

    #[cfg(not(feature = "wgpu"))]
    fn why_no_wgpu(_name: &str) -> String {
        "this tilekit was built without the `wgpu` feature, which runs Vulkan devices through wgpu (a default feature of the tilekit crate)".into()
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
            #[cfg(feature = "vulkan")]
            Device::Vulkan { name, .. } => format!("vulkan:{name}"),
            #[cfg(feature = "wgpu")]
            Device::Wgpu { name, naga: false, .. } => format!("wgpu:{name}"),
            #[cfg(feature = "wgpu")]
            Device::Wgpu { name, naga: true, .. } => format!("wgpu-naga:{name}"),
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { name, .. } => format!("cuda:{name}"),
        }
    }

    /// Who computes this device's math, for its error bounds ([`tilekit_core::precision`]).
    pub fn math_backend(&self) -> tilekit_core::precision::MathBackend {
        use tilekit_core::precision::MathBackend;
        match self {
            Device::Interpreter => MathBackend::Interpreter,
            Device::Emulator(_) => MathBackend::Emulator,
            #[cfg(feature = "vulkan")]
            Device::Vulkan { .. } => MathBackend::Spirv,
            #[cfg(feature = "wgpu")]
            Device::Wgpu { .. } => MathBackend::Spirv,
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { .. } => MathBackend::Ptx,
        }
    }

    /// The target a GPU device compiles for.
    pub fn target(&self) -> Option<&Target> {
        match self {
            Device::Interpreter => None,
            Device::Emulator(t) => Some(t),
            #[cfg(feature = "vulkan")]
            Device::Vulkan { target: t, .. } => Some(t),
            #[cfg(feature = "wgpu")]
            Device::Wgpu { target: t, .. } => Some(t),
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { target: t, .. } => Some(t),
        }
    }

    /// The target kernels plan for on this device ([`crate::kernels::Kernel::plan_on`]): its
    /// own, or the conservative baseline GPU's for the interpreter.
    pub fn plan_target(&self) -> Target {
        self.target().cloned().unwrap_or_else(Target::vulkan_baseline)
    }

    /// Runs every launch of `plan` in order over `buffers` (one per plan buffer), with the
    /// configuration's `num_warps`, and returns the wall time of the launches. On a GPU the
    /// buffers are uploaded first and every one is read back after the last launch.
    pub fn run_plan(&self, plan: &Plan, buffers: &[HostBuffer], config: &Config) -> Result<Duration, DeviceError> {
        let options = LowerOptions::for_config(config);
        options.check()?;
        check_buffer_indices(plan, buffers.len())?;
        with_runtime!(self, |rt| run_plan_on(&**rt, plan, buffers, &options))
    }

    /// The key this device's runtime and kernels are kept under (`runtime::Runtime::key`).
    fn runtime_key(&self) -> String {
        match self {
            #[cfg(feature = "vulkan")]
            Device::Vulkan { index, .. } => format!("{}#{index}", self.name()),
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { ordinal, .. } => format!("{}#{ordinal}", self.name()),
            _ => self.name(),
        }
    }

    /// Drops the compiled pipelines this device keeps (the runtime stays open). Callers that
    /// run many programs once each, such as the fuzzer, keep the cache from growing.
    pub fn forget_pipelines(&self) {
        runtime::forget_kernels(&self.runtime_key());
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
            runtime::copy_into(dst, src);
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
        with_runtime!(self, |rt| resources_on(&**rt, plan, &options))
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
        if !self.times_on_device() {
            let mut total = vec![0.0; timing.runs];
            for t in total.iter_mut() {
                *t = self.run_plan(plan, buffers, config)?.as_secs_f64();
            }
            return Ok(total);
        }
        let options = LowerOptions::for_config(config);
        check_buffer_indices(plan, buffers.len())?;
        with_runtime!(self, |rt| time_plan_on(&**rt, plan, buffers, &options, timing))
    }

    /// Whether this device times with device timestamps (the GPUs) rather than the wall clock.
    fn times_on_device(&self) -> bool {
        !matches!(self, Device::Interpreter | Device::Emulator(_))
    }
}

/// A plan made ready on a device: its buffers uploaded, each launch's kernel (from the cache)
/// and arguments (buffers in binding order, scalars with their parameter index).
struct Staged<R: Runtime> {
    buffers: Vec<R::Buffer>,
    kernels: Vec<Arc<Mutex<R::Kernel>>>,
    args: Vec<LaunchArgs>,
}

/// One launch's buffers (plan indices, in binding order) and scalars (parameter index, value).
type LaunchArgs = (Vec<usize>, Vec<(u32, Scalar)>);

/// Each launch's kernel, compiled once per (device, program, options). Folded only where the
/// grid exceeds the device's limits: other launches keep the plain kernel.
fn plan_kernels<R: Runtime>(rt: &R, plan: &Plan, options: &LowerOptions) -> Result<Vec<Arc<Mutex<R::Kernel>>>, DeviceError> {
    plan.launches
        .iter()
        .enumerate()
        .map(|(li, l)| {
            let options = launch_options(options, l).with_fold_grid(rt.needs_fold(l.grid));
            runtime::kernel(rt, &l.program, &options).map(|f| f.kernel).map_err(|e| e.at_launch(li))
        })
        .collect()
}

fn stage<R: Runtime>(rt: &R, plan: &Plan, hosts: &[HostBuffer], options: &LowerOptions) -> Result<Staged<R>, DeviceError> {
    let buffers = hosts
        .iter()
        .map(|h| {
            let mut b = rt.alloc(h.dtype(), h.len())?;
            rt.upload(&mut b, h)?;
            Ok(b)
        })
        .collect::<Result<_, DeviceError>>()?;
    let kernels = plan_kernels(rt, plan, options)?;
    Ok(Staged { buffers, kernels, args: plan.launches.iter().map(|l| split_args(&l.args)).collect() })
}

/// Reads every buffer back and fails on any message the driver's validation reported.
fn finish<R: Runtime>(rt: &R, plan: &Plan, hosts: &[HostBuffer], staged: &Staged<R>) -> Result<(), DeviceError> {
    for (host, d) in hosts.iter().zip(&staged.buffers) {
        runtime::copy_into(host, &rt.download(d)?);
    }
    let messages = rt.take_messages();
    if !messages.is_empty() {
        let program = plan.launches.iter().map(|l| l.program.name.as_str()).collect::<Vec<_>>().join(", ");
        return Err(DeviceError::Validation { device: rt.device().name(), program, messages });
    }
    Ok(())
}

/// [`Device::run_plan`] on one runtime: upload, every launch in order, read back.
fn run_plan_on<R: Runtime>(rt: &R, plan: &Plan, hosts: &[HostBuffer], options: &LowerOptions) -> Result<Duration, DeviceError> {
    let g = stage(rt, plan, hosts, options)?;
    let start = Instant::now();
    for (li, ((bufs, scalars), (launch, kernel))) in g.args.iter().zip(plan.launches.iter().zip(&g.kernels)).enumerate() {
        let bufs: Vec<&R::Buffer> = bufs.iter().map(|&i| &g.buffers[i]).collect();
        runtime::with_kernel(kernel, |k| rt.launch(k, launch.grid, &bufs, scalars)).map_err(|e| e.at_launch(li))?;
    }
    rt.synchronize()?;
    let elapsed = start.elapsed();
    finish(rt, plan, hosts, &g)?;
    Ok(elapsed)
}

/// [`Device::time_plan_with`] on one runtime with device timestamps: the sum over launches.
fn time_plan_on<R: Runtime>(
    rt: &R,
    plan: &Plan,
    hosts: &[HostBuffer],
    options: &LowerOptions,
    timing: &TimingOptions,
) -> Result<Vec<f64>, DeviceError> {
    let TimingOptions { warmup, runs, flush_bytes, read_back } = *timing;
    let g = stage(rt, plan, hosts, options)?;
    let mut flush = rt.flush(flush_bytes)?;
    let mut total = vec![0.0; runs];
    for (li, ((bufs, scalars), (launch, kernel))) in g.args.iter().zip(plan.launches.iter().zip(&g.kernels)).enumerate() {
        let bufs: Vec<&R::Buffer> = bufs.iter().map(|&i| &g.buffers[i]).collect();
        let t = runtime::with_kernel(kernel, |k| rt.time(k, launch.grid, &bufs, scalars, warmup, runs, &mut flush)).map_err(|e| e.at_launch(li))?;
        total.iter_mut().zip(t).for_each(|(a, b)| *a += b);
    }
    if read_back {
        finish(rt, plan, hosts, &g)?;
    }
    Ok(total)
}

/// [`Device::resources`] on one runtime; empty where the runtime reports none.
fn resources_on<R: Runtime>(rt: &R, plan: &Plan, options: &LowerOptions) -> Result<Vec<KernelResources>, DeviceError> {
    if !R::REPORTS_RESOURCES {
        return Ok(Vec::new());
    }
    let kernels = plan_kernels(rt, plan, options)?;
    Ok(kernels.iter().map(|k| runtime::with_kernel(k, |k| rt.resources(k)).unwrap_or_default()).collect())
}

/// Open CUDA runtimes by ordinal, shared by the launches and by cuBLAS (the benchmark's
/// baseline), which runs on the same context.
#[cfg(any(feature = "ptx", feature = "ptx-static"))]
static CUDA_RUNTIMES: OnceLock<Mutex<HashMap<usize, Arc<tilekit_ptx::CudaRuntime>>>> = OnceLock::new();

/// The open runtime of CUDA device `ordinal`, opened on first use. Public for the benchmark
/// (tilekit-cli), whose cuBLAS baseline must run on the context the kernels run on.
#[cfg(any(feature = "ptx", feature = "ptx-static"))]
pub fn cuda_runtime(ordinal: usize) -> Result<Arc<tilekit_ptx::CudaRuntime>, tilekit_ptx::CudaError> {
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
}

/// Drops the open CUDA runtime of `ordinal` after its context was lost.
#[cfg(any(feature = "ptx", feature = "ptx-static"))]
pub(crate) fn forget_cuda_runtime(ordinal: usize) {
    if let Some(map) = CUDA_RUNTIMES.get() {
        map.lock().unwrap_or_else(|e| e.into_inner()).remove(&ordinal);
    }
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

    /// A device whose runtime this build lacks is refused with the feature that runs it, not
    /// reported as a device that does not exist. (scripts/test.sh also runs these tests
    /// without default features, where Vulkan and wgpu are the ones missing.)
    #[test]
    fn a_runtime_not_built_names_its_feature() {
        let runtimes = [
            ("vulkan", "vulkan", cfg!(feature = "vulkan")),
            ("wgpu:llvmpipe", "wgpu", cfg!(feature = "wgpu")),
            ("cuda", "ptx", cfg!(any(feature = "ptx", feature = "ptx-static"))),
        ];
        for (name, feature, built) in runtimes {
            if built {
                continue;
            }
            let e = Device::find(name).unwrap_err().to_string();
            assert!(e.starts_with(&format!("no device called `{name}`: this tilekit was built without the `{feature}` feature")), "{e}");
        }
    }
}
