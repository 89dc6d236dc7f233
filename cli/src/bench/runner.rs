//! `tilekit bench`: checks, then times, every (kernel, problem, configuration) of a suite on
//! every device, and measures each device's ceilings and baselines in the same run.
//!
//! Protocol, the same on every backend: inputs are random (seeded) and the f64 reference is
//! computed once per problem on the host; each configuration runs once on the device and every
//! output is compared with the reference, and only a right answer is timed: `warmup` untimed
//! runs, then at least `min_runs` timed runs and at least `min_time_s` of device time (at most
//! `max_runs`), one device-timestamp sample per run, every sample kept. Before each timed run a
//! buffer larger than the last-level cache is overwritten on the device ([`L2Policy`]), so no
//! run reads its inputs from a cache the previous run warmed. Compile time (lowering and code
//! generation on the host) is measured on its own; the first checked run's wall time, which
//! includes the driver's pipeline build, is recorded apart from the samples. CPU devices (the
//! interpreter and the emulator) have no device clock and record the wall clock.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::SeedableRng;
use sha2::{Digest, Sha256};
use tilekit_core::gpu::lower::LowerOptions;
use tilekit_core::gpu::Target;
use tilekit_spirv::VulkanDeviceInfo;

use super::copy::Copy;
use super::schema::{
    copy_bytes, Backend, Ceilings, CheckRecord, Entry, L2Policy, OutputRecord, Platform, ProblemRecord, Protocol, Results, RunInfo, Status,
    MEMORY_BOUND_INTENSITY,
};
use super::stats::{runs_needed, summarize};
use super::suite::{Case, Suite};
use super::wgsl;
use crate::check::compare_within;
use crate::device::{Device, TimingOptions};
use crate::kernels::{Kernel, Plan, Problem, Role};
use crate::{Config, HostBuffer};

/// Everything `tilekit bench` was asked for.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub suite: Suite,
    pub devices: Vec<Device>,
    /// Kernels to keep (empty: every kernel of the suite).
    pub kernels: Vec<String>,
    pub warmup: usize,
    pub min_runs: usize,
    pub min_time_s: f64,
    pub max_runs: usize,
    /// Bytes overwritten before each timed run (0: no flush).
    pub flush_bytes: u64,
    /// Time every configuration of the kernel's space, not only the default one.
    pub tune: bool,
    /// Configurations to time instead of the kernel's list (`--config`), each merged over the
    /// kernel's default; empty: the kernel's list.
    pub configs: Vec<String>,
    /// Run the baselines: hand-written WGSL on wgpu devices, cuBLAS on CUDA devices.
    pub baselines: bool,
    pub max_check_flops: f64,
    pub seed: u64,
    pub command: String,
    /// Compile-only AMDGCN architectures (`gfx942`): every case compiled, static resources
    /// recorded, nothing run.
    pub amdgcn: Vec<String>,
    /// Without `tune` or `configs`: the tuning cache whose configuration for a case and device,
    /// where it holds one other than the default, is timed too (`None`: the default only).
    pub tuning_cache: Option<tilekit::tune::TuneCache>,
}

/// Where a device sits in the report, from its Vulkan properties where it has them.
fn describe(device: &Device, infos: &[VulkanDeviceInfo], host: &str, machine: &str, run: &str) -> Platform {
    let info = match device {
        Device::Vulkan { name, .. } | Device::Wgpu { name, .. } => infos.iter().find(|i| &i.name == name),
        _ => None,
    };
    let (backend, hardware, device_type) = match device {
        Device::Interpreter => (Backend::Interpreter, "host CPU (interpreter)".to_string(), "host".to_string()),
        Device::Emulator(t) => (Backend::Emulator, format!("host CPU (emulating {})", t.name), "host".to_string()),
        Device::Vulkan { name, .. } => (Backend::Vulkan, name.clone(), info.map_or("other".into(), |i| i.device_type.clone())),
        Device::Wgpu { name, naga, .. } => {
            let backend = if *naga { Backend::WgpuNaga } else { Backend::Wgpu };
            (backend, name.clone(), info.map_or("other".into(), |i| i.device_type.clone()))
        }
        // Devices added later (CUDA) describe themselves by name until they get an arm here.
        #[allow(unreachable_patterns)]
        other => {
            let name = other.name();
            let backend = if name.starts_with("cuda") { Backend::Cuda } else { Backend::Vulkan };
            (backend, name.split_once(':').map_or(name.clone(), |(_, n)| n.to_string()), "other".to_string())
        }
    };
    let mut extensions = Vec::new();
    if let Some(i) = info {
        // What the runtimes switch on when the device has it (see VulkanRuntime::with_options).
        let features = [
            (i.atomic_float_add, "VK_EXT_shader_atomic_float"),
            (i.storage_buffer_8bit, "storageBuffer8BitAccess"),
            (i.storage_buffer_16bit, "storageBuffer16BitAccess"),
            (i.shader_float16, "shaderFloat16"),
            (i.shader_int8, "shaderInt8"),
            (i.shader_int16, "shaderInt16"),
            (i.shader_int64, "shaderInt64"),
            (i.subgroup_size_control, "subgroupSizeControl"),
        ];
        extensions.extend(features.iter().filter(|f| f.0).map(|f| f.1.to_string()));
    }
    if backend == Backend::Wgpu {
        extensions.push("wgpu PASSTHROUGH_SHADERS".into());
    }
    if matches!(backend, Backend::Wgpu | Backend::WgpuNaga) {
        extensions.push("wgpu IMMEDIATES".into());
        extensions.push("wgpu TIMESTAMP_QUERY".into());
    }
    if backend == Backend::WgpuNaga && device.target().is_some_and(|t| t.subgroup_ops.shuffle) {
        extensions.push("wgpu SUBGROUP".into());
    }
    Platform {
        id: device.name(),
        hardware,
        host: host.to_string(),
        machine: machine.to_string(),
        backend,
        executes: true,
        device_type,
        vendor_id: info.map(|i| i.vendor_id),
        device_id: info.map(|i| i.device_id),
        driver: info.map(|i| i.driver_name.clone()),
        driver_info: info.map(|i| i.driver_info.clone()),
        api_version: info.map(|i| format!("{}.{}.{}", i.api_version.0, i.api_version.1, i.api_version.2)),
        extensions,
        timer: if is_cpu_device(device) { "wall clock".into() } else { "device timestamps".into() },
        ceilings: Ceilings::default(),
        run: run.to_string(),
    }
}

/// The interpreter and the emulator: no device clock, and slow.
fn is_cpu_device(device: &Device) -> bool {
    matches!(device, Device::Interpreter | Device::Emulator(_))
}

/// Devices that run on the host's cores (the suite's size cap applies): the interpreter, the
/// emulator, and Vulkan drivers of type `cpu` (lavapipe).
fn on_cpu(platform: &Platform) -> bool {
    platform.device_type == "host" || platform.device_type == "cpu"
}

pub fn host_name() -> String {
    std::process::Command::new("hostname")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// The processor model, from /proc/cpuinfo where there is one.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, m)| m.trim().to_string()))
        .unwrap_or_default()
}

/// A label that tells this machine apart from others of the same host name (cloud VMs are
/// often all called `vm`): `TILEKIT_MACHINE` where set, else `<host>-<8 hex digits>`, the
/// digits a SHA-256 of the machine id (systemd's /etc/machine-id, unique per installation) and
/// the processor model.
pub fn machine_label() -> String {
    if let Some(m) = std::env::var("TILEKIT_MACHINE").ok().map(|m| m.trim().to_string()).filter(|m| !m.is_empty()) {
        return m;
    }
    let id = ["/etc/machine-id", "/var/lib/dbus/machine-id"].iter().find_map(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    machine_label_of(&host_name(), id.trim(), &cpu_model())
}

/// [`machine_label`] from its parts.
pub fn machine_label_of(host: &str, machine_id: &str, cpu: &str) -> String {
    let mut h = Sha256::new();
    h.update(machine_id.as_bytes());
    h.update(b"\n");
    h.update(cpu.as_bytes());
    let digest: String = h.finalize().iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{host}-{digest}")
}

/// The revision of tilekit: `TILEKIT_COMMIT` now or at build time, else the checkout's.
pub fn commit() -> String {
    std::env::var("TILEKIT_COMMIT")
        .ok()
        .or(option_env!("TILEKIT_COMMIT").map(str::to_string))
        .filter(|c| !c.is_empty())
        .or_else(|| {
            std::process::Command::new("git")
                .args(["rev-parse", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// SHA-256 of the text of every program a plan launches.
pub fn kernel_hash(plan: &Plan) -> String {
    let mut h = Sha256::new();
    for l in &plan.launches {
        h.update(tilekit_core::text::print(&l.program).as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Inputs and reference of one problem, shared by every device and configuration.
struct Prepared {
    inputs: Vec<HostBuffer>,
    reference: Result<Vec<Vec<f64>>, String>,
}

fn prepare(kernel: &dyn Kernel, problem: &Problem, seed: u64, max_check_flops: f64) -> Prepared {
    let mut rng = StdRng::seed_from_u64(seed);
    let inputs = kernel.inputs(problem, &mut rng);
    let cost = kernel.cost(problem);
    // The host reference is plain f64 loops: its cost is about the problem's FLOPs (or its
    // elements, for memory-bound kernels).
    let work = cost.flops.max(cost.bytes) as f64;
    let reference = if work > max_check_flops {
        Err(format!(
            "checking it needs an f64 reference of about {:.0} GFLOP on the host, above the limit of {:.0} (--max-check-gflop)",
            work / 1e9,
            max_check_flops / 1e9
        ))
    } else {
        let values: Vec<Vec<f64>> = inputs.iter().map(|b| b.to_f64()).collect();
        Ok(kernel.reference(problem, &values))
    };
    Prepared { inputs, reference }
}

fn problem_record(p: &Problem) -> ProblemRecord {
    ProblemRecord { shape: p.shape.clone(), dtype: p.dtype.to_string(), opts: p.opts.clone() }
}

/// An entry with nothing measured yet.
#[allow(clippy::too_many_arguments)]
pub(super) fn blank(
    run: &str,
    platform: &str,
    kernel: &str,
    implementation: &str,
    problem: &Problem,
    config: String,
    default_config: bool,
    bytes: u64,
    flops: u64,
) -> Entry {
    Entry {
        run: run.into(),
        platform: platform.into(),
        kernel: kernel.into(),
        implementation: implementation.into(),
        problem: problem_record(problem),
        problem_text: problem.to_string(),
        config,
        default_config,
        kernel_hash: None,
        bytes,
        flops,
        status: Status::Skipped,
        message: None,
        check: None,
        compile_s: None,
        first_run_s: None,
        samples_s: Vec::new(),
        summary: None,
        derived: None,
        static_resources: None,
        tuned_from: None,
        lowering: Vec::new(),
    }
}

/// What the lowering chose for each launch of `plan` on `device`'s target; empty for the
/// interpreter (no target) and where a launch does not lower (the run reports why).
fn lowering(device: &Device, plan: &Plan, config: &Config) -> Vec<super::schema::Lowering> {
    device.target().map_or_else(Vec::new, |target| target_lowering(target, plan, config))
}

/// What the lowering chose for each launch of `plan` on `target`.
fn target_lowering(target: &tilekit_core::gpu::Target, plan: &Plan, config: &Config) -> Vec<super::schema::Lowering> {
    let options = tilekit_core::gpu::lower::LowerOptions::for_config(config);
    plan.launches
        .iter()
        // Specialised on the launch's scalars, as the runtimes compile it.
        .map_while(|l| tilekit_core::gpu::decisions(&l.program, target, &crate::device::launch_options(&options, l)).ok())
        .map(|d| super::schema::Lowering {
            dots: d.dots,
            pipelined_loads: d.pipelined_loads as u64,
            prefetched_loads: d.prefetched_loads as u64,
            stepped_loads: d.stepped_loads as u64,
            tensor_loads: d.tensor_loads as u64,
            shared_bytes: d.shared_bytes,
            threads: d.threads,
            registers: Some(d.registers),
        })
        .collect()
}

/// The protocol's timing of one checked plan: a first batch, then more runs when it did not
/// fill `min_time_s`. `floor_s`, a lower bound on one run (the bytes at the device's copy
/// bandwidth, for memory-bound kernels), sizes the first batch to fill `min_time_s` on its own:
/// every batch uploads the inputs again, which for the largest problems takes longer than the
/// runs.
fn time(device: &Device, plan: &Plan, buffers: &[HostBuffer], config: &Config, o: &BenchOptions, floor_s: Option<f64>) -> Result<Vec<f64>, String> {
    let flush_bytes = if is_cpu_device(device) { 0 } else { o.flush_bytes };
    let first_runs = match floor_s {
        Some(f) if f > 0.0 && f.is_finite() => runs_needed(1, f, o.min_runs, o.min_time_s, o.max_runs),
        _ => o.min_runs.min(o.max_runs).max(1),
    };
    let first = TimingOptions { warmup: o.warmup, runs: first_runs, flush_bytes, read_back: false };
    let mut samples = device.time_plan_with(plan, buffers, config, &first).map_err(|e| e.to_string())?;
    let want = runs_needed(samples.len(), samples.iter().sum(), o.min_runs, o.min_time_s, o.max_runs);
    if want > samples.len() {
        let more = TimingOptions { warmup: 0, runs: want - samples.len(), flush_bytes, read_back: false };
        samples.extend(device.time_plan_with(plan, buffers, config, &more).map_err(|e| e.to_string())?);
    }
    Ok(samples)
}

/// Host time to lower and generate code for every launch of `plan` on `device`.
fn compile_time(device: &Device, plan: &Plan, config: &Config) -> Result<Option<f64>, String> {
    let base = LowerOptions::for_config(config);
    let start = Instant::now();
    for l in &plan.launches {
        // Specialized on the launch's arguments, as the device compiles it.
        let options = crate::device::launch_options(&base, l);
        match device {
            Device::Interpreter => return Ok(None),
            Device::Emulator(t) => {
                tilekit_core::gpu::simt::compile(&l.program, t, &options).map_err(|e| format!("{}: {e}", l.program.name))?;
            }
            Device::Vulkan { target, .. } | Device::Wgpu { target, .. } => {
                tilekit_spirv::compile(&l.program, target, &options).map_err(|e| e.to_string())?;
            }
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            Device::Cuda { target, .. } => {
                tilekit_ptx::compile(&l.program, target, &options, tilekit_ptx::arch_of(target)).map_err(|e| e.to_string())?;
            }
            #[allow(unreachable_patterns)]
            _ => return Ok(None),
        }
    }
    Ok(Some(start.elapsed().as_secs_f64()))
}

/// Checks one configuration on one device and, when right, times it.
#[allow(clippy::too_many_arguments)]
fn measure(
    kernel: &dyn Kernel,
    problem: &Problem,
    config: &Config,
    default_config: bool,
    device: &Device,
    prepared: &Prepared,
    o: &BenchOptions,
    run: &str,
    floor_s: Option<f64>,
) -> Entry {
    let cost = kernel.cost(problem);
    let mut e = blank(run, &device.name(), kernel.name(), "tilekit", problem, config.to_string(), default_config, cost.bytes, cost.flops);
    let reference = match &prepared.reference {
        Ok(r) => r,
        Err(why) => {
            e.message = Some(why.clone());
            return e;
        }
    };
    let plan = match kernel.plan_on(problem, config, &device.plan_target()) {
        Ok(p) => p,
        // Not every configuration of a kernel's list suits every problem: skipped, as Triton's
        // autotuner prunes them.
        Err(err @ crate::kernels::KernelError::Unfit(_)) => {
            e.status = Status::Skipped;
            e.message = Some(format!("planning: {err}"));
            return e;
        }
        Err(err) => {
            e.status = Status::Error;
            e.message = Some(format!("planning: {err}"));
            return e;
        }
    };
    e.kernel_hash = Some(kernel_hash(&plan));
    e.lowering = lowering(device, &plan, config);
    match compile_time(device, &plan, config) {
        Ok(t) => e.compile_s = t,
        Err(err) => {
            e.status = Status::Error;
            e.message = Some(format!("compiling: {err}"));
            return e;
        }
    }
    let mut inputs = prepared.inputs.iter();
    let buffers: Vec<HostBuffer> = plan
        .buffers
        .iter()
        .map(|spec| match spec.role {
            Role::Input => inputs
                .next()
                .and_then(|b| HostBuffer::from_bytes(b.dtype(), &b.to_bytes()).ok())
                .unwrap_or_else(|| HostBuffer::zeros(spec.dtype, spec.len)),
            Role::Output { zeroed: false } => {
                let b = HostBuffer::zeros(spec.dtype, spec.len);
                b.fill_bits(poison(spec.dtype));
                b
            }
            Role::Output { zeroed: true } | Role::Scratch => HostBuffer::zeros(spec.dtype, spec.len),
        })
        .collect();
    let start = Instant::now();
    if let Err(err) = device.run_plan(&plan, &buffers, config) {
        e.status = Status::Error;
        e.message = Some(err.to_string());
        return e;
    }
    e.first_run_s = Some(start.elapsed().as_secs_f64());
    let outputs: Vec<OutputRecord> = plan
        .outputs()
        .zip(reference)
        .enumerate()
        .map(|(j, ((i, spec), r))| {
            let c = compare_within(&spec.name, &buffers[i].to_f64(), r, kernel.output_tolerance(problem, j, spec.dtype));
            OutputRecord { name: c.name, rel_err: c.rel_err, tolerance: c.tolerance, non_finite: c.non_finite, pass: c.pass }
        })
        .collect();
    let pass = outputs.len() == reference.len() && outputs.iter().all(|o| o.pass);
    e.check = Some(CheckRecord { outputs });
    if !pass {
        e.status = Status::Wrong;
        e.message = Some("an output failed its tolerance against the f64 reference; not timed".into());
        return e;
    }
    match time(device, &plan, &buffers, config, o, floor_s) {
        Ok(samples) => {
            e.summary = summarize(&samples);
            e.status = if e.summary.is_some() { Status::Ok } else { Status::Error };
            if e.summary.is_none() {
                e.message = Some("the timer returned a sample that is not finite".into());
            }
            e.samples_s = samples;
            e.static_resources = static_resources(device, &plan, config);
        }
        Err(err) => {
            e.status = Status::Error;
            e.message = Some(format!("timing: {err}"));
        }
    }
    e
}

/// What the device's compiler says the plan's kernels take (the largest over its launches), so
/// a figure can be read against registers and shared memory; `None` where the device says
/// nothing. A failure here loses nothing measured.
fn static_resources(device: &Device, plan: &crate::kernels::Plan, config: &Config) -> Option<super::schema::StaticResources> {
    let launches = device.resources(plan, config).ok()?;
    if launches.is_empty() {
        return None;
    }
    let max = |f: &dyn Fn(&crate::device::KernelResources) -> Option<u32>| launches.iter().filter_map(f).max();
    let stats: Vec<String> = launches.iter().flat_map(|l| l.statistics.iter().map(|(k, v)| format!("{k}={v}"))).collect();
    Some(super::schema::StaticResources {
        registers: max(&|l| l.registers),
        shared_bytes: max(&|l| l.shared_bytes),
        spills: max(&|l| l.spill_bytes),
        occupancy: None,
        note: (!stats.is_empty()).then(|| format!("driver: {}", stats.join(", "))),
    })
}

/// Bits that read as NaN for floats and as an implausible value for integers, so an element
/// the kernel forgot to write cannot pass.
fn poison(dtype: crate::DType) -> u64 {
    match dtype.size_bytes() {
        1 => 0xA5,
        2 => 0x7E01,
        4 => 0x7FC0_0001,
        _ => 0x7FF8_0000_0000_0001,
    }
}

/// Runs `f`, turning a panic (a bug, or a driver's) into an error entry rather than losing
/// every result measured so far.
fn guarded(fallback: impl FnOnce(String) -> Entry, f: impl FnOnce() -> Entry) -> Entry {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(e) => e,
        Err(p) => {
            let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default();
            fallback(format!("internal error: {msg}"))
        }
    }
}

/// Progress and per-case lines.
pub trait Progress {
    fn start(&mut self, total: u64);
    fn step(&mut self, message: &str);
    fn line(&mut self, line: &str);
    fn finish(&mut self);
}

/// indicatif bars on a terminal; plain lines otherwise (logs, CI).
pub struct Bars {
    bar: Option<indicatif::ProgressBar>,
}

impl Bars {
    pub fn new() -> Bars {
        Bars { bar: None }
    }
}

impl Default for Bars {
    fn default() -> Self {
        Bars::new()
    }
}

impl Progress for Bars {
    fn start(&mut self, total: u64) {
        let bar = indicatif::ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {wide_msg}") {
            bar.set_style(style.progress_chars("=> "));
        }
        self.bar = Some(bar);
    }
    fn step(&mut self, message: &str) {
        if let Some(b) = &self.bar {
            b.set_message(message.to_string());
            b.inc(1);
        }
    }
    fn line(&mut self, line: &str) {
        match &self.bar {
            // Hidden bars (not a terminal) drop println: print directly then.
            Some(b) if !b.is_hidden() => b.println(line),
            _ => eprintln!("{line}"),
        }
    }
    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

pub(crate) fn fmt_time(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// One line for the best timed entry of a case, or why none was timed.
fn case_line(platform: &str, kernel: &str, problem: &str, entries: &[Entry]) -> String {
    let best = entries.iter().filter(|e| e.median().is_some()).min_by(|a, b| a.median().unwrap().total_cmp(&b.median().unwrap()));
    let head = format!("{:<28} {:<11} {:<22}", platform.chars().take(28).collect::<String>(), kernel, problem);
    match best {
        Some(e) => {
            let m = e.median().unwrap();
            let rate = if e.flops as f64 / e.bytes.max(1) as f64 >= super::schema::MEMORY_BOUND_INTENSITY {
                super::report::fmt_rate(e.flops as f64 / m / 1e9, "GFLOP/s")
            } else {
                super::report::fmt_rate(e.bytes as f64 / m / 1e9, "GB/s")
            };
            format!("{head} {:>10}  {rate:>14}  [{}] {}", fmt_time(m), e.implementation, e.config)
        }
        None => {
            let why = entries.iter().find_map(|e| e.message.clone()).unwrap_or_default();
            let status = entries.first().map_or("none", |e| e.status.name());
            format!("{head} {status}: {}", why.lines().next().unwrap_or(""))
        }
    }
}

/// The copy kernel over `n` f32 elements with configuration `config`, checked and timed (an
/// error entry where it fails): the copy ceiling's runs and the copies of a problem's own bytes.
/// `prepared` holds the inputs of [`copy_problem`]`(n)`, made once for every configuration.
fn time_copy(prepared: &Prepared, n: usize, config: &Config, default_config: bool, device: &Device, o: &BenchOptions, run_id: &str) -> Entry {
    let problem = copy_problem(n);
    let fallback = |m: String| {
        let mut e = blank(run_id, &device.name(), "copy", "tilekit", &problem, config.to_string(), default_config, 8 * n as u64, 0);
        e.status = Status::Error;
        e.message = Some(m);
        e
    };
    guarded(fallback, || measure(&Copy, &problem, config, default_config, device, prepared, o, run_id, None))
}

/// The copy kernel's problem of `n` f32 elements.
fn copy_problem(n: usize) -> Problem {
    Problem::new(&[n], crate::DType::F32)
}

/// Runs the whole benchmark. `save` is called with the results so far after every device of every
/// case, so an interrupted run keeps what it measured.
pub fn run(o: &BenchOptions, progress: &mut dyn Progress, save: &mut dyn FnMut(&Results)) -> Results {
    let host = host_name();
    let machine = machine_label();
    let started = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let run_id = format!("{machine}-{started}");
    let infos = if o.devices.iter().any(|d| !is_cpu_device(d)) { tilekit_spirv::VulkanRuntime::devices().unwrap_or_default() } else { Vec::new() };
    let mut results = Results::new();
    results.runs.push(RunInfo {
        id: run_id.clone(),
        host: host.clone(),
        machine: machine.clone(),
        cpu: cpu_model(),
        started_unix: started,
        tilekit_version: env!("CARGO_PKG_VERSION").into(),
        tilekit_commit: commit(),
        suite: o.suite.name.into(),
        command: o.command.clone(),
        protocol: Protocol {
            warmup: o.warmup,
            min_runs: o.min_runs,
            min_time_s: o.min_time_s,
            max_runs: o.max_runs,
            l2: if o.flush_bytes > 0 { L2Policy::Flush { bytes: o.flush_bytes } } else { L2Policy::None },
            seed: o.seed,
            max_check_flops: o.max_check_flops,
        },
    });
    results.platforms = o.devices.iter().map(|d| describe(d, &infos, &host, &machine, &run_id)).collect();
    let cases: Vec<&Case> = o.suite.cases.iter().filter(|c| o.kernels.is_empty() || o.kernels.iter().any(|k| k == c.kernel)).collect();
    compile_only(o, &cases, &host, &machine, &run_id, &mut results, progress);
    progress.start(((cases.len() + 1) * o.devices.len()) as u64);

    // Ceilings first: the copy bandwidth of every device, best over the copy's configurations.
    // The best configuration, with the ceiling's size, also copies each memory-bound problem's
    // own bytes, below.
    let mut copy_best: Vec<Option<(Config, u64)>> = vec![None; o.devices.len()];
    for (di, device) in o.devices.iter().enumerate() {
        let cpu = on_cpu(&results.platforms[di]);
        let n = if cpu { o.suite.cpu_copy_elems } else { o.suite.copy_elems };
        let problem = copy_problem(n);
        progress.step(&format!("{} copy ceiling", device.name()));
        let prepared = prepare(&Copy, &problem, o.seed, f64::INFINITY);
        let configs = Copy.configs();
        let entries: Vec<Entry> = configs.iter().enumerate().map(|(i, c)| time_copy(&prepared, n, c, i == 0, device, o, &run_id)).collect();
        let best = entries.iter().zip(&configs).filter_map(|(e, c)| Some((e.median()?, c))).min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((m, c)) = best {
            copy_best[di] = Some((c.clone(), n as u64));
            let p = &mut results.platforms[di];
            p.ceilings.copy_gbps = Some(8.0 * n as f64 / m / 1e9);
            p.ceilings.copy_source = Some(format!("tilekit copy kernel, {n} f32, best of {} configurations", configs.len()));
        }
        progress.line(&case_line(&device.name(), "copy", &problem.to_string(), &entries));
        results.entries.extend(entries);
        #[cfg(any(feature = "ptx", feature = "ptx-static"))]
        if let Some(matrix) = super::cublas::ceiling(device, o) {
            let p = &mut results.platforms[di];
            match matrix {
                Ok((tflops, source)) => {
                    progress.line(&format!("{:<28} matrix ceiling {tflops:.1} TFLOP/s ({source})", device.name()));
                    p.ceilings.matrix_tflops = Some(tflops);
                    p.ceilings.matrix_source = Some(source);
                }
                Err(why) => {
                    progress.line(&format!("{:<28} no matrix ceiling: {why}", device.name()));
                    p.ceilings.matrix_source = Some(format!("not measured: {why}"));
                }
            }
        }
        save(&results);
    }

    // Inputs and references of every case are computed on the host's other cores while the
    // devices run: a large reference takes longer than timing it on every device.
    let receivers: Vec<mpsc::Receiver<Option<Prepared>>> = cases
        .iter()
        .map(|case| {
            let (tx, rx) = mpsc::channel();
            let cost = crate::kernels::find(case.kernel).map(|k| k.cost(&case.problem)).unwrap_or_default();
            let needed = results.platforms.iter().any(|p| !on_cpu(p) || (cost.bytes <= o.suite.cpu_max_bytes && cost.flops <= o.suite.cpu_max_flops));
            let (name, problem, seed, cap) = (case.kernel, case.problem.clone(), o.seed, o.max_check_flops);
            rayon::spawn_fifo(move || {
                let prepared = crate::kernels::find(name).filter(|_| needed).map(|k| prepare(k.as_ref(), &problem, seed, cap));
                let _ = tx.send(prepared);
            });
            rx
        })
        .collect();

    // Copies of a problem's own bytes already timed: (device, f32 elements) -> median.
    let mut copied: HashMap<(usize, u64), Option<f64>> = HashMap::new();
    // Every case: the reference once, then each device and configuration.
    for (case, rx) in cases.into_iter().zip(receivers) {
        let Some(kernel) = crate::kernels::find(case.kernel) else { continue };
        let problem = &case.problem;
        let cost = kernel.cost(problem);
        let configs = match configs_to_time(kernel.as_ref(), problem, o, &Target::vulkan_baseline()) {
            Ok(c) => c,
            Err(m) => {
                // `tilekit bench` checks every --config first; a caller of `run` that did not
                // gets the reason in every device's entry.
                for device in &o.devices {
                    let mut e = blank(&run_id, &device.name(), case.kernel, "tilekit", problem, o.configs.join(" "), false, cost.bytes, cost.flops);
                    e.status = Status::Error;
                    e.message = Some(m.clone());
                    results.entries.push(e);
                }
                continue;
            }
        };
        let default_config = kernel.configs().into_iter().next().unwrap_or_default();
        let prepared = rx.recv().ok().flatten();
        for (di, device) in o.devices.iter().enumerate() {
            progress.step(&format!("{} {} {}", device.name(), case.kernel, problem));
            // The untuned configuration is the default that fits this device's target.
            let configs = configs_to_time(kernel.as_ref(), problem, o, &device.plan_target()).unwrap_or_else(|_| configs.clone());
            let cpu = on_cpu(&results.platforms[di]);
            let mut entries = Vec::new();
            if cpu && (cost.bytes > o.suite.cpu_max_bytes || cost.flops > o.suite.cpu_max_flops) {
                let mut e = blank(&run_id, &device.name(), case.kernel, "tilekit", problem, configs[0].to_string(), true, cost.bytes, cost.flops);
                e.message = Some(format!("larger than suite `{}` runs on CPU devices", o.suite.name));
                entries.push(e);
            } else if let Some(prepared) = &prepared {
                // Memory-bound kernels run no faster than the device copies their bytes.
                let floor_s =
                    results.platforms[di].ceilings.copy_gbps.filter(|_| cost.flops <= 16 * cost.bytes).map(|gbps| cost.bytes as f64 / (gbps * 1e9));
                let tuned = tuned_extra(kernel.as_ref(), problem, device, &configs, o);
                if let Some((c, path)) = &tuned {
                    progress.line(&format!("{:<28} {} {problem}: also the tuned configuration {c} ({})", device.name(), case.kernel, path.display()));
                }
                for c in configs.iter().chain(tuned.as_ref().map(|(c, _)| c)) {
                    let from_cache = tuned.as_ref().filter(|(t, _)| t == c).map(|(_, p)| p.display().to_string());
                    let fallback = |m: String| {
                        let mut e = blank(
                            &run_id,
                            &device.name(),
                            case.kernel,
                            "tilekit",
                            problem,
                            c.to_string(),
                            *c == default_config,
                            cost.bytes,
                            cost.flops,
                        );
                        e.status = Status::Error;
                        e.message = Some(m);
                        e.tuned_from = from_cache.clone();
                        e
                    };
                    let mut entry =
                        guarded(fallback, || measure(kernel.as_ref(), problem, c, *c == default_config, device, prepared, o, &run_id, floor_s));
                    entry.tuned_from = from_cache;
                    entries.push(entry);
                }
                #[cfg(any(feature = "ptx", feature = "ptx-static"))]
                if o.baselines {
                    if let Some(e) =
                        super::cublas::baseline(device, kernel.as_ref(), problem, prepared.reference.as_ref().ok(), &prepared.inputs, o, &run_id)
                    {
                        entries.push(e);
                    }
                }
                if o.baselines && matches!(device, Device::Wgpu { .. }) {
                    if let Some(e) = wgsl::baseline(device, kernel.as_ref(), problem, prepared.reference.as_ref().ok(), &prepared.inputs, o, &run_id)
                    {
                        entries.push(e);
                    }
                }
            }
            let (tk, base): (Vec<Entry>, Vec<Entry>) = entries.into_iter().partition(|e| e.implementation == "tilekit");
            // A timed memory-bound problem smaller than the ceiling's copy is also compared with a
            // copy of its own bytes (`of_copy_same_bytes`), timed once per size and device.
            let copy_n = copy_bytes(cost.bytes) / 8;
            let memory_bound = (cost.flops as f64) < MEMORY_BOUND_INTENSITY * cost.bytes as f64;
            let mut same_bytes = None;
            if let (true, true, Some((c, ceiling_n))) = (tk.iter().any(|e| e.median().is_some()), memory_bound, &copy_best[di]) {
                if copy_n > 0 && copy_n < *ceiling_n {
                    same_bytes = *copied.entry((di, copy_n)).or_insert_with(|| {
                        let n = copy_n as usize;
                        let e = time_copy(&prepare(&Copy, &copy_problem(n), o.seed, f64::INFINITY), n, c, false, device, o, &run_id);
                        let m = e.median();
                        results.entries.push(e);
                        m
                    });
                }
            }
            let mut line = case_line(&device.name(), case.kernel, &problem.to_string(), &tk);
            if let (Some(copy_s), Some(best_s)) = (same_bytes, tk.iter().filter_map(|e| e.median()).min_by(f64::total_cmp)) {
                line.push_str(&format!("  ({:.2}x of a copy of its bytes)", copy_s / best_s));
            }
            progress.line(&line);
            if !base.is_empty() {
                progress.line(&case_line(&device.name(), case.kernel, &problem.to_string(), &base));
            }
            results.entries.extend(tk);
            results.entries.extend(base);
            // After every device, not only every case: a run stopped while a later device
            // tunes keeps this device's entries (tuning a large problem on one device can take
            // minutes).
            results.derive();
            save(&results);
        }
    }
    progress.finish();
    results.derive();
    results
}

/// The configurations to time for `kernel`: `--config`'s, each merged over the kernel's default,
/// or the kernel's list (the suite may cap it); without tuning, the one an untuned run takes
/// (`kernels::default_config_for`) on `target`.
fn configs_to_time(kernel: &dyn Kernel, problem: &Problem, o: &BenchOptions, target: &Target) -> Result<Vec<Config>, String> {
    if !o.configs.is_empty() {
        return o.configs.iter().map(|c| crate::cli::resolve_config(kernel, std::slice::from_ref(c)).map_err(|e| e.to_string())).collect();
    }
    if !o.tune {
        return Ok(vec![crate::kernels::default_config_for(kernel, problem, target)]);
    }
    Ok(kernel.configs().into_iter().take(o.suite.max_configs.unwrap_or(usize::MAX).max(1)).collect())
}

/// The configuration the tuning cache holds for `problem` on `device` and its file, where the
/// run times only the untuned default (`configs`) and the cache holds something else.
fn tuned_extra(
    kernel: &dyn Kernel,
    problem: &Problem,
    device: &Device,
    configs: &[Config],
    o: &BenchOptions,
) -> Option<(Config, std::path::PathBuf)> {
    if o.tune || !o.configs.is_empty() {
        return None;
    }
    match tilekit::tune::tuned_config(kernel, problem, device, Some(o.tuning_cache.as_ref()?)) {
        (config, tilekit::tune::Source::Cached(path)) if !configs.contains(&config) => Some((config, path)),
        _ => None,
    }
}

/// Compile-only targets (AMDGCN code objects): each case's configurations compiled for each
/// architecture, the code objects' static resources recorded under status "compiled, not run".
#[cfg(any(feature = "amdgcn", feature = "amdgcn-static"))]
fn compile_only(o: &BenchOptions, cases: &[&Case], host: &str, machine: &str, run_id: &str, results: &mut Results, progress: &mut dyn Progress) {
    for name in &o.amdgcn {
        let Some(arch) = tilekit_amdgcn::Arch::parse(name) else { continue };
        let id = format!("amdgcn:{arch}");
        results.platforms.push(Platform {
            id: id.clone(),
            hardware: format!("AMD {arch} (compile-only)"),
            host: host.to_string(),
            machine: machine.to_string(),
            backend: Backend::Amdgcn,
            executes: false,
            device_type: "other".into(),
            vendor_id: Some(0x1002),
            device_id: None,
            driver: None,
            driver_info: None,
            api_version: None,
            extensions: vec![format!("wave{}", arch.wave_size()), "code object v5".into()],
            timer: tilekit_amdgcn::NOT_RUN.into(),
            ceilings: Ceilings::default(),
            run: run_id.to_string(),
        });
        for case in cases {
            let Some(kernel) = crate::kernels::find(case.kernel) else { continue };
            let problem = &case.problem;
            let cost = kernel.cost(problem);
            let mut entries = Vec::new();
            let default_config = kernel.configs().into_iter().next().unwrap_or_default();
            for config in configs_to_time(kernel.as_ref(), problem, o, &arch.target()).unwrap_or_default() {
                let mut e = blank(run_id, &id, case.kernel, "tilekit", problem, config.to_string(), config == default_config, cost.bytes, cost.flops);
                // A configuration with more threads than a program may have on this architecture
                // (32 warps of 64 lanes) is not one to tune over here: skipped, not an error.
                let threads = config.num_warps() as u64 * arch.wave_size() as u64;
                let max = arch.target().max_threads_per_program as u64;
                if threads > max {
                    e.message = Some(format!(
                        "{threads} threads per program ({} warps of {} lanes); {arch} allows {max}",
                        config.num_warps(),
                        arch.wave_size()
                    ));
                    entries.push(e);
                    continue;
                }
                match compile_amdgcn(kernel.as_ref(), problem, &config, arch) {
                    Ok((hash, secs, resources, lowering)) => {
                        e.status = Status::CompiledNotRun;
                        e.kernel_hash = Some(hash);
                        e.compile_s = Some(secs);
                        e.static_resources = Some(resources);
                        e.lowering = lowering;
                    }
                    Err(m) => {
                        e.status = Status::Error;
                        e.message = Some(m);
                    }
                }
                entries.push(e);
            }
            progress.line(&format!("{id} {} {problem}: {}", case.kernel, tilekit_amdgcn::NOT_RUN));
            results.entries.extend(entries);
        }
    }
}

/// Every launch of the plan compiled for `arch`: the plan's hash, the compile time, the
/// resources of its most demanding launch (most registers, LDS; spills summed; least
/// occupancy) and what the lowering chose (each dot's instruction).
#[cfg(any(feature = "amdgcn", feature = "amdgcn-static"))]
fn compile_amdgcn(
    kernel: &dyn Kernel,
    problem: &Problem,
    config: &Config,
    arch: tilekit_amdgcn::Arch,
) -> Result<(String, f64, super::schema::StaticResources, Vec<super::schema::Lowering>), String> {
    let target = arch.target();
    let plan = kernel.plan_on(problem, config, &target).map_err(|e| e.to_string())?;
    let t0 = std::time::Instant::now();
    let mut reports = Vec::new();
    for launch in &plan.launches {
        let options = crate::device::launch_options(&tilekit_core::gpu::lower::LowerOptions::for_config(config), launch);
        let c = tilekit_amdgcn::compile(&launch.program, &target, &options, arch).map_err(|e| e.to_string())?;
        reports.push(c.kernel.resources);
    }
    let secs = t0.elapsed().as_secs_f64();
    let r = |f: fn(&tilekit_amdgcn::CodeObjectReport) -> u32| reports.iter().map(f).max().unwrap_or(0);
    let occupancy = reports.iter().map(|x| x.occupancy.waves_per_simd).min().unwrap_or(0);
    let spills: u32 = reports.iter().map(|x| x.vgpr_spills + x.sgpr_spills).sum();
    // MFMA accumulators live in AGPRs on CDNA: counted in `registers` too, named apart here.
    let note = format!(
        "{}: wave{}, {} AGPRs, {} SGPRs, {} B scratch, occupancy in waves per SIMD; {}",
        arch,
        arch.wave_size(),
        r(|x| x.agprs),
        r(|x| x.sgprs),
        r(|x| x.scratch_bytes),
        tilekit_amdgcn::NOT_RUN
    );
    let resources = super::schema::StaticResources {
        registers: Some(r(|x| x.vgprs)),
        shared_bytes: Some(r(|x| x.lds_bytes)),
        spills: Some(spills),
        occupancy: Some(occupancy as f64),
        note: Some(note),
    };
    Ok((kernel_hash(&plan), secs, resources, target_lowering(&target, &plan, config)))
}

#[cfg(not(any(feature = "amdgcn", feature = "amdgcn-static")))]
fn compile_only(_: &BenchOptions, _: &[&Case], _: &str, _: &str, _: &str, _: &mut Results, _: &mut dyn Progress) {}
