//! Autotuning of library kernels: every candidate configuration is planned, checked against
//! the f64 reference once and timed with the benchmark's protocol; the fastest right one is
//! kept in a [`TuneCache`] under a key of the kernel, its programs, the problem's bucket, the
//! device, its driver and the tilekit version. [`tuned_config`] gives later runs (and other
//! processes) that configuration, or the kernel's default when none was tuned.

pub mod cache;
pub mod model;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use tilekit_core::Config;

pub use cache::{hash_hex, CacheEntry, CacheError, Lookup, Strategy, TuneCache, TuneKey};

use crate::check::Case;
use crate::device::{Device, DeviceError, KernelResources, RunOptions, TimingOptions};
use crate::kernels::{default_config_for, Kernel, KernelError, Problem};

/// The tuner times the model's first fifth of the candidates and every other candidate whose
/// estimate lies within this factor of the first's: where the model cannot tell candidates
/// apart, it does not pretend to.
pub const MODEL_SLACK: f64 = 1.0;

/// How [`tune`] times each candidate: `warmup` untimed runs, then at least `min_runs` and
/// `min_time_s` of device time, at most `max_runs` (the benchmark's protocol), each after
/// overwriting `flush_bytes` of device memory on GPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneOptions {
    pub warmup: usize,
    pub min_runs: usize,
    pub min_time_s: f64,
    pub max_runs: usize,
    pub flush_bytes: u64,
    /// Seed of the random inputs every candidate is checked on.
    pub seed: u64,
    /// Tune even when the cache holds the key.
    pub retune: bool,
    /// Time every candidate, or only those the cost model ranks first.
    pub strategy: Strategy,
}

impl Default for TuneOptions {
    fn default() -> TuneOptions {
        TuneOptions {
            warmup: 3,
            min_runs: 10,
            min_time_s: 0.05,
            max_runs: 500,
            flush_bytes: 256 << 20,
            seed: 0xB3AC,
            retune: false,
            strategy: Strategy::Exhaustive,
        }
    }
}

/// What became of one candidate.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Checked right and timed: the median of its samples, seconds.
    Timed { median_s: f64, runs: usize },
    /// Not run: the kernel cannot plan the problem with it (the reason).
    Pruned(String),
    /// Ran and disagreed with the reference (never timed).
    Wrong(String),
    /// The device refused or failed it.
    Failed(String),
    /// Not timed: the cost model ranked it below the candidates it timed (its estimate,
    /// seconds), or found it cannot run (the reason).
    Skipped(Result<f64, String>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub config: Config,
    pub outcome: Outcome,
}

/// The tuner's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuned {
    pub key: TuneKey,
    pub config: Config,
    pub median_s: f64,
    /// Every candidate and what became of it (empty when the answer came from the cache).
    pub candidates: Vec<Candidate>,
    /// The cache held the key; nothing was timed.
    pub from_cache: bool,
    /// Where the answer was stored (`None` without a cache).
    pub stored: Option<PathBuf>,
}

impl Tuned {
    pub fn timed(&self) -> usize {
        self.candidates.iter().filter(|c| matches!(c.outcome, Outcome::Timed { .. })).count()
    }
}

/// Progress of a [`tune`] call, for a progress bar.
#[derive(Debug)]
pub enum TuneEvent<'a> {
    /// About to try `candidates` configurations for `key`.
    Begin { key: &'a TuneKey, candidates: usize },
    /// Candidate `index` is done.
    Done { index: usize, candidate: &'a Candidate },
}

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error("kernel `{kernel}` has no configuration that runs {problem} right on {device}:\n{reasons}")]
    NoCandidate { kernel: String, problem: String, device: String, reasons: String },
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// The problem's bucket: each dimension rounded up to a power of two, dtype and options as
/// they are.
pub fn bucket(problem: &Problem) -> Problem {
    Problem { shape: problem.shape.iter().map(|d| (*d).max(1).next_power_of_two()).collect(), ..problem.clone() }
}

/// A hash of every program `kernel` builds for its candidate configurations on its default
/// problem in `problem`'s dtype (with `problem`'s options): it changes when the kernel's code or
/// its list of configurations does.
pub fn programs_hash(kernel: &dyn Kernel, problem: &Problem) -> String {
    let mut at = kernel.default_problem();
    at.dtype = problem.dtype;
    at.opts = problem.opts.clone();
    let mut text = String::new();
    for config in kernel.configs() {
        text.push_str(&config.to_string());
        text.push('\n');
        match kernel.plan(&at, &config) {
            Ok(plan) => {
                for l in &plan.launches {
                    text.push_str(&tilekit_core::text::print(&l.program));
                }
            }
            Err(e) => text.push_str(&e.to_string()),
        }
    }
    hash_hex(text.as_bytes())
}

/// The device's driver and its version: what the cache key holds so that a driver update
/// re-tunes. The CPU devices are tilekit itself. Looked up once per device and process.
pub fn driver(device: &Device) -> String {
    static SEEN: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    let name = device.name();
    if let Some(d) = seen.lock().unwrap_or_else(|e| e.into_inner()).get(&name) {
        return d.clone();
    }
    let own = format!("tilekit {}", env!("CARGO_PKG_VERSION"));
    let d = match device {
        Device::Interpreter | Device::Emulator(_) => own,
        #[cfg(feature = "vulkan")]
        Device::Vulkan { index, .. } => vulkan_driver(&|i| i.index == *index).unwrap_or_else(|| "unknown Vulkan driver".into()),
        #[cfg(feature = "wgpu")]
        Device::Wgpu { .. } => match device.wgpu() {
            Ok(rt) => {
                let info = rt.raw().adapter_info();
                format!("wgpu {:?} {} {}", info.backend, info.driver, info.driver_info)
            }
            Err(_) => "unknown wgpu driver".into(),
        },
        #[cfg(any(feature = "ptx", feature = "ptx-static"))]
        Device::Cuda { .. } => match tilekit_ptx::driver_version() {
            Some(v) => format!("CUDA driver {}.{}", v / 1000, (v % 1000) / 10),
            None => "unknown CUDA driver".into(),
        },
    };
    seen.lock().unwrap_or_else(|e| e.into_inner()).insert(name, d.clone());
    d
}

/// The Vulkan driver of the device `pick` chooses: name, info, version and API version.
#[cfg(feature = "vulkan")]
fn vulkan_driver(pick: &dyn Fn(&tilekit_spirv::VulkanDeviceInfo) -> bool) -> Option<String> {
    tilekit_spirv::VulkanRuntime::devices().ok().and_then(|infos| infos.into_iter().find(|i| pick(i))).map(|i| {
        let (a, b, c) = i.api_version;
        format!("{} {} (driverVersion {:#x}, Vulkan {a}.{b}.{c})", i.driver_name, i.driver_info, i.driver_version)
    })
}

/// The cache key of `problem` for `kernel` on `device`.
pub fn key(kernel: &dyn Kernel, problem: &Problem, device: &Device) -> TuneKey {
    TuneKey {
        kernel: kernel.name().to_string(),
        programs: programs_hash(kernel, problem),
        problem: bucket(problem).to_string(),
        device: device.name(),
        driver: driver(device),
        tilekit: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Where a configuration came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// Tuned earlier: the cache file.
    Cached(PathBuf),
    /// The kernel's default for the problem: nothing tuned for the key, or the tuned
    /// configuration does not plan this problem of the bucket (the reason).
    Default(Option<String>),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Cached(p) => write!(f, "tuned (cache {})", p.display()),
            Source::Default(None) => write!(f, "default (not tuned)"),
            Source::Default(Some(why)) => write!(f, "default ({why})"),
        }
    }
}

/// The configuration to run `problem` with on `device`: the tuned one when `cache` holds the
/// key and it plans the problem, else the kernel's default.
pub fn tuned_config(kernel: &dyn Kernel, problem: &Problem, device: &Device, cache: Option<&TuneCache>) -> (Config, Source) {
    let found = match cache {
        // The key plans every configuration of the kernel: not worth it before anything was
        // ever tuned.
        Some(cache) if cache.dir().is_dir() => cached(kernel, problem, device, cache, &key(kernel, problem, device)),
        _ => Err(None),
    };
    match found {
        Ok((config, _, path)) => (config, Source::Cached(path)),
        Err(why) => (default_config_for(kernel, problem, &device.plan_target()), Source::Default(why)),
    }
}

/// The configuration `cache` holds for `key`, with its entry and file, when it plans `problem`;
/// else why not (`None`: nothing usable is cached).
fn cached(
    kernel: &dyn Kernel,
    problem: &Problem,
    device: &Device,
    cache: &TuneCache,
    key: &TuneKey,
) -> Result<(Config, CacheEntry, PathBuf), Option<String>> {
    let entry = cache.get(key).ok_or(None)?;
    // `lookup` has checked that the configuration parses.
    let config = entry.config.parse::<Config>().map_err(|_| None)?;
    match kernel.plan_on(problem, &config, &device.plan_target()) {
        Ok(_) => Ok((config, entry, cache.path(key))),
        Err(e) => Err(Some(format!("the tuned configuration {config} does not plan {problem}: {e}"))),
    }
}

/// Why a candidate is not worth timing on a device, from what its backend reports statically.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// It cannot run there (the lowering or the backend refused it: shared memory over the
    /// device's limit, too many threads per program, ...).
    Cannot(String),
    /// A launch keeps values in local memory (ptxas's spill stores): pruned while any other
    /// candidate does not spill, timed when all do.
    Spills(String),
}

/// The refusal of a candidate whose launches compiled to `resources` (one per launch; empty
/// where the device reports none), or whose compilation failed.
pub fn static_refusal(resources: &Result<Vec<KernelResources>, DeviceError>) -> Option<Refusal> {
    match resources {
        Err(e) => Some(Refusal::Cannot(format!("does not compile for the device: {e}"))),
        Ok(res) => res.iter().enumerate().find_map(|(i, r)| {
            r.spill_bytes
                .filter(|&b| b > 0)
                .map(|b| Refusal::Spills(format!("launch {i} spills {b} bytes per thread to local memory (the assembler's report)")))
        }),
    }
}

/// Whether the model picked a candidate for timing, with its estimate.
#[derive(Clone, Debug, PartialEq)]
enum Pick {
    Time,
    Skip(Result<f64, String>),
}

impl Pick {
    fn is_timed(&self) -> bool {
        *self == Pick::Time
    }
    fn estimate(&self) -> Result<f64, String> {
        match self {
            Pick::Time => Ok(f64::NAN),
            Pick::Skip(e) => e.clone(),
        }
    }
}

/// The candidates the model has timed: the first fifth of its ranking (at least one) and every
/// other whose estimate is within [`MODEL_SLACK`] of the first's. Candidates that do not plan
/// are left to the caller (pruned).
fn model_choice(
    kernel: &dyn Kernel,
    problem: &Problem,
    device: &Device,
    configs: &[Config],
    plans: &[Result<crate::kernels::Plan, KernelError>],
    resources: &[Vec<KernelResources>],
) -> Vec<Pick> {
    let machine = model::Machine::for_device(device);
    let cost = kernel.cost(problem);
    let target = device.target();
    let estimates: Vec<Result<model::Estimate, String>> = configs
        .iter()
        .zip(plans)
        .zip(resources)
        .map(|((config, plan), resources)| match plan {
            Err(e) => Err(e.to_string()),
            // Static resources where the backend reports them without running (registers from
            // ptxas, shared memory from the lowering), registers from the lowering's estimate
            // where it reports none.
            Ok(plan) => match target {
                Some(t) => model::estimate(&machine, plan, config, cost, &model::with_estimated_registers(t, plan, config, resources)),
                None => model::estimate(&machine, plan, config, cost, resources),
            },
        })
        .collect();
    let mut picks: Vec<Pick> = estimates.iter().map(|e| Pick::Skip(e.as_ref().map(|e| e.seconds).map_err(Clone::clone))).collect();
    for i in model::timed_by_model(&estimates, MODEL_SLACK) {
        picks[i] = Pick::Time;
    }
    picks
}

/// Runs until the protocol has its samples: a first batch of `min_runs`, then enough more to
/// fill `min_time_s`, at most `max_runs` in all.
fn protocol(
    options: &TuneOptions,
    flush_bytes: u64,
    mut batch: impl FnMut(&TimingOptions) -> Result<Vec<f64>, DeviceError>,
) -> Result<Vec<f64>, DeviceError> {
    let first = options.min_runs.clamp(1, options.max_runs.max(1));
    let mut samples = batch(&TimingOptions { warmup: options.warmup, runs: first, flush_bytes, read_back: false })?;
    let spent: f64 = samples.iter().sum();
    if spent < options.min_time_s && !samples.is_empty() {
        let per = (spent / samples.len() as f64).max(1e-9);
        let want = ((options.min_time_s / per).ceil() as usize).min(options.max_runs.max(first));
        if want > samples.len() {
            samples.extend(batch(&TimingOptions { warmup: 0, runs: want - samples.len(), flush_bytes, read_back: false })?);
        }
    }
    Ok(samples)
}

fn median(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Tunes `kernel` for `problem` on `device`: from `cache` when it holds the key (unless
/// `options.retune`), else by checking and timing every candidate configuration; the answer is
/// stored in `cache`. `progress` hears of each candidate.
pub fn tune(
    kernel: &dyn Kernel,
    problem: &Problem,
    device: &Device,
    cache: Option<&TuneCache>,
    options: &TuneOptions,
    progress: &mut dyn FnMut(TuneEvent<'_>),
) -> Result<Tuned, TuneError> {
    kernel.check_problem(problem)?;
    let key = key(kernel, problem, device);
    if let (false, Some(cache)) = (options.retune, cache) {
        if let Ok((config, entry, path)) = cached(kernel, problem, device, cache, &key) {
            return Ok(Tuned { key, config, median_s: entry.median_s, candidates: Vec::new(), from_cache: true, stored: Some(path) });
        }
    }
    let mut configs = kernel.configs();
    let mut seen = std::collections::HashSet::new();
    configs.retain(|c| seen.insert(c.clone()));
    progress(TuneEvent::Begin { key: &key, candidates: configs.len() });
    let case = Case::new(kernel, problem, options.seed);
    let flush_bytes = if matches!(device, Device::Interpreter | Device::Emulator(_)) { 0 } else { options.flush_bytes };
    let target = device.plan_target();
    let plans: Vec<Result<crate::kernels::Plan, KernelError>> = configs.iter().map(|c| kernel.plan_on(problem, c, &target)).collect();
    // What the backend says before anything runs: a candidate that does not compile for the
    // device is pruned, and one that spills registers is while any other does not.
    let reports: Vec<Result<Vec<KernelResources>, DeviceError>> =
        configs.iter().zip(&plans).map(|(c, p)| p.as_ref().map_or(Ok(Vec::new()), |plan| device.resources(plan, c))).collect();
    let refusals: Vec<Option<Refusal>> = plans.iter().zip(&reports).map(|(p, r)| p.as_ref().ok().and_then(|_| static_refusal(r))).collect();
    let resources: Vec<Vec<KernelResources>> = reports.into_iter().map(Result::unwrap_or_default).collect();
    let clean = plans.iter().zip(&refusals).any(|(p, r)| p.is_ok() && r.is_none());
    let plans: Vec<Result<crate::kernels::Plan, KernelError>> = plans
        .into_iter()
        .zip(refusals)
        .map(|(plan, refusal)| match refusal {
            Some(Refusal::Cannot(why)) => Err(KernelError::Unfit(why)),
            Some(Refusal::Spills(why)) if clean => Err(KernelError::Unfit(why)),
            _ => plan,
        })
        .collect();
    let chosen = match options.strategy {
        Strategy::Exhaustive => vec![Pick::Time; configs.len()],
        Strategy::Model => model_choice(kernel, problem, device, &configs, &plans, &resources),
    };
    let mut candidates = Vec::with_capacity(configs.len());
    for (index, ((config, plan), pick)) in configs.into_iter().zip(plans).zip(chosen).enumerate() {
        let outcome = match plan {
            Err(e) => Outcome::Pruned(e.to_string()),
            Ok(_) if !pick.is_timed() => Outcome::Skipped(pick.estimate()),
            Ok(_) => {
                let time = |plan: &crate::kernels::Plan, buffers: &[tilekit_core::HostBuffer]| {
                    protocol(options, flush_bytes, |t| device.time_plan_with(plan, buffers, &config, t)).map(Some)
                };
                match case.check_then(kernel, &config, device, &RunOptions::default(), time) {
                    Ok((report, _)) if !report.pass() => {
                        let bad: Vec<String> = report
                            .outputs
                            .iter()
                            .filter(|o| !o.pass)
                            .map(|o| format!("{}: relative error {:.3e}, largest {:.3e} at {}", o.name, o.rel_err, o.max_abs_err, o.max_abs_index))
                            .collect();
                        Outcome::Wrong(bad.join("; "))
                    }
                    Ok((_, Some(samples))) if !samples.is_empty() => Outcome::Timed { median_s: median(&samples), runs: samples.len() },
                    Ok(_) => Outcome::Failed("no timing samples".into()),
                    Err(e) => Outcome::Failed(e.to_string()),
                }
            }
        };
        candidates.push(Candidate { config, outcome });
        progress(TuneEvent::Done { index, candidate: candidates.last().expect("just pushed") });
    }
    let best = candidates
        .iter()
        .filter_map(|c| match c.outcome {
            Outcome::Timed { median_s, .. } if median_s.is_finite() => Some((c, median_s)),
            _ => None,
        })
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let Some((best, median_s)) = best else {
        let reasons = candidates.iter().map(|c| format!("  {}: {:?}", c.config, c.outcome)).collect::<Vec<_>>().join("\n");
        return Err(TuneError::NoCandidate { kernel: kernel.name().into(), problem: problem.to_string(), device: device.name(), reasons });
    };
    let mut tuned = Tuned { key, config: best.config.clone(), median_s, candidates, from_cache: false, stored: None };
    if let Some(c) = cache {
        tuned.stored = Some(c.store(&CacheEntry {
            format: cache::FORMAT,
            key: tuned.key.clone(),
            config: tuned.config.to_string(),
            tuned_on: problem.to_string(),
            median_s,
            timed: tuned.timed(),
            candidates: tuned.candidates.len(),
            strategy: options.strategy,
            written: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        })?);
    }
    Ok(tuned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tilekit_core::DType;

    #[test]
    fn static_reports_prune_what_cannot_run_and_what_spills() {
        use crate::device::KernelResources;
        let spills = |b: Option<u32>| KernelResources { registers: Some(255), spill_bytes: b, ..KernelResources::default() };
        assert_eq!(static_refusal(&Ok(Vec::new())), None);
        assert_eq!(static_refusal(&Ok(vec![spills(None), spills(Some(0))])), None);
        match static_refusal(&Ok(vec![spills(Some(0)), spills(Some(96))])) {
            Some(Refusal::Spills(why)) => assert!(why.contains("launch 1 spills 96 bytes"), "{why}"),
            other => panic!("{other:?}"),
        }
        let refused =
            Err(DeviceError::Unavailable { name: "cuda:0".into(), why: "needs 49,152 bytes of shared memory".into(), available: "interp".into() });
        assert!(matches!(static_refusal(&refused), Some(Refusal::Cannot(why)) if why.contains("shared memory")));
    }

    #[test]
    fn buckets_round_dimensions_up_to_powers_of_two() {
        let p = Problem::new(&[1000, 12800, 1, 0], DType::F16).with("causal", "1");
        assert_eq!(bucket(&p).to_string(), "1024x16384x1x1 f16 causal=1");
    }

    #[test]
    fn the_protocol_fills_the_minimum_time_within_the_maximum_runs() {
        let o = TuneOptions { warmup: 2, min_runs: 4, min_time_s: 1.0, max_runs: 50, ..TuneOptions::default() };
        let mut calls = Vec::new();
        let samples = protocol(&o, 0, |t| {
            calls.push((t.warmup, t.runs));
            Ok(vec![0.1; t.runs])
        })
        .unwrap();
        assert_eq!(calls, vec![(2, 4), (0, 6)]);
        assert_eq!(samples.len(), 10);
        let capped = protocol(&o, 0, |t| Ok(vec![1e-6; t.runs])).unwrap();
        assert_eq!(capped.len(), 50);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}
