//! The results file: what `tilekit bench` writes and `tilekit report` reads.
//!
//! One file per run; files from many machines merge ([`Results::merge`]) into a value of the same
//! type, so a merged file is itself a valid results file. The JSON Schema generated from these
//! types (schemars) is committed as `bench/schema/results.schema.json`; a test fails when the
//! types change without the file being regenerated (`TILEKIT_BLESS=1`), and
//! [`SCHEMA_VERSION`] must go up whenever a reader of old files would misread new ones.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::stats::Summary;

/// Version of the results format. Version 2 added the machine label ([`RunInfo::machine`],
/// [`Platform::machine`]); files of version 1 are still read, their machine taken to be their
/// host. Readers refuse files of any other version.
pub const SCHEMA_VERSION: u32 = 2;

/// The oldest version [`Results::from_json`] reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;

/// A results file: the runs it holds, the platforms they measured and one entry per
/// (platform, kernel, implementation, problem, configuration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Results {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    pub runs: Vec<RunInfo>,
    pub platforms: Vec<Platform>,
    pub entries: Vec<Entry>,
}

/// One invocation of `tilekit bench`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunInfo {
    /// `machine-unixtime`, unique across machines in practice.
    pub id: String,
    pub host: String,
    /// What tells this machine apart from others of the same host name (every cloud VM may be
    /// called `vm`): `TILEKIT_MACHINE` where set, else the host name, the processor model and a
    /// hash of the machine id (see `runner::machine_label`). Version 1 files: their host.
    #[serde(default)]
    pub machine: String,
    /// The processor model (empty where unknown, and in version 1 files).
    #[serde(default)]
    pub cpu: String,
    pub started_unix: u64,
    pub tilekit_version: String,
    /// Git revision of the build (`TILEKIT_COMMIT` at build or run time, else `git rev-parse`).
    pub tilekit_commit: String,
    pub suite: String,
    /// The command line, for reproducing the run.
    pub command: String,
    pub protocol: Protocol,
}

/// The timing protocol, the same on every backend.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Protocol {
    /// Untimed runs before the timed ones.
    pub warmup: usize,
    /// At least this many timed runs...
    pub min_runs: usize,
    /// ...and at least enough to fill this much device time...
    pub min_time_s: f64,
    /// ...but never more than this many.
    pub max_runs: usize,
    pub l2: L2Policy,
    /// Seed of the random inputs.
    pub seed: u64,
    /// Cases whose f64 reference would cost more than this many FLOPs on the host are skipped
    /// (never timed unchecked).
    pub max_check_flops: f64,
}

/// What happens to the last-level cache between timed runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum L2Policy {
    /// A buffer of `bytes` (larger than the cache) is overwritten on the device, in a submission
    /// that completes before each timed run, so every run starts with a cold cache.
    Flush { bytes: u64 },
    /// Runs go back to back on the same buffers: problems that fit the cache measure the cache.
    None,
}

/// How a platform reaches its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Interpreter,
    Emulator,
    Vulkan,
    /// wgpu with SPIR-V passed through to the driver.
    Wgpu,
    /// wgpu with naga modules (the path of every wgpu backend).
    WgpuNaga,
    Cuda,
    /// AMDGCN code objects, compiled and analysed offline: static resources only.
    Amdgcn,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Interpreter => "interpreter",
            Backend::Emulator => "emulator",
            Backend::Vulkan => "vulkan",
            Backend::Wgpu => "wgpu",
            Backend::WgpuNaga => "wgpu-naga",
            Backend::Cuda => "cuda",
            Backend::Amdgcn => "amdgcn",
        }
    }
}

/// A platform: hardware plus the software stack that runs on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// Unique in a results file: the device name `tilekit devices` prints (`vulkan:NVIDIA H200`),
    /// with `@machine` appended when merged files measured same-named devices on different
    /// machines.
    pub id: String,
    /// The hardware: platforms with the same hardware and machine share the "best implementation
    /// on that platform" (the WGSL baseline through wgpu competes with tilekit through Vulkan).
    pub hardware: String,
    pub host: String,
    /// The machine label of the run that measured it ([`RunInfo::machine`]): platforms of the
    /// same hardware on the same machine share ceilings and the best implementation.
    #[serde(default)]
    pub machine: String,
    pub backend: Backend,
    /// False for compile-only targets (AMDGCN): their entries carry static resources, no times.
    pub executes: bool,
    /// `discrete`, `integrated`, `cpu`, `virtual`, `other`, or `host` for the CPU devices.
    pub device_type: String,
    pub vendor_id: Option<u32>,
    pub device_id: Option<u32>,
    pub driver: Option<String>,
    pub driver_info: Option<String>,
    /// API version the device reports (Vulkan `1.3.255`, CUDA `12.9`).
    pub api_version: Option<String>,
    /// Extensions and optional features tilekit enabled on the device.
    pub extensions: Vec<String>,
    /// `device timestamps` or `wall clock`.
    pub timer: String,
    /// Ceilings measured by the run.
    pub ceilings: Ceilings,
    /// The run that measured it.
    pub run: String,
}

/// The device's own limits, as measured by the suite.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ceilings {
    /// STREAM-style copy bandwidth (bytes read + written per second / 1e9).
    pub copy_gbps: Option<f64>,
    /// How the copy ceiling was measured.
    pub copy_source: Option<String>,
    /// Dense matrix multiply rate (a vendor library where one is reachable).
    pub matrix_tflops: Option<f64>,
    pub matrix_source: Option<String>,
}

/// Outcome of one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Checked against the reference, then timed.
    Ok,
    /// An output failed its tolerance: reported, never timed.
    Wrong,
    /// Planning, compiling or running failed (the message says where).
    Error,
    /// Not run by design (a size cap for CPU devices, a reference too costly to check).
    Skipped,
    /// Compiled for a target that is not run here; static resources only.
    CompiledNotRun,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Wrong => "wrong",
            Status::Error => "error",
            Status::Skipped => "skipped",
            Status::CompiledNotRun => "compiled, not run",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProblemRecord {
    pub shape: Vec<usize>,
    pub dtype: String,
    pub opts: BTreeMap<String, String>,
}

/// How the outputs compared with the f64 reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRecord {
    pub outputs: Vec<OutputRecord>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputRecord {
    pub name: String,
    pub rel_err: f64,
    pub tolerance: f64,
    pub non_finite: usize,
    pub pass: bool,
}

/// Figures derived from the samples, the cost and the ceilings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Derived {
    /// Problem bytes / median time / 1e9.
    pub gbps: f64,
    /// Problem FLOPs / median time / 1e12.
    pub tflops: f64,
    /// FLOPs per byte of the problem.
    pub intensity: f64,
    /// Achieved / attainable on the roofline of the hardware's measured ceilings (the best
    /// measured through any runtime of the same hardware and machine); absent when the ceiling it
    /// needs was not measured.
    pub efficiency_ceiling: Option<f64>,
    /// Best median time of any implementation of the same problem on the same hardware and machine
    /// / this median time.
    pub efficiency_best: Option<f64>,
    /// For a memory-bound problem: the median time of the platform's copy kernel moving this
    /// problem's bytes, in the same run / this median time. The copy ceiling is measured on a
    /// large copy, which a small problem cannot reach (launch and ramp-up are a larger share of
    /// a short run); this compares a kernel with a copy of its own size. Absent where no such
    /// copy was timed (compute-bound problems, CPU devices, problems as large as the ceiling's
    /// copy, older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of_copy_same_bytes: Option<f64>,
}

/// What the lowering chose for one launch on the platform's target (`tilekit::gpu::decisions`):
/// whether each `dot` ran on a matrix instruction or the FMA loop, and what `num_stages` did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lowering {
    /// Per `dot`, in program order: `mma.sync m16n8k16`, `cooperative matrix 16x16x16` (`,
    /// operands in two staging buffers` where they alternate by iteration), ... or `fma`.
    pub dots: Vec<String>,
    pub pipelined_loads: u64,
    /// Loads issued one iteration ahead into registers (`num_stages` where the target has no
    /// asynchronous copies: Vulkan's cooperative-matrix dots). Absent in older results.
    #[serde(default)]
    pub prefetched_loads: u64,
    /// Of the pipelined loads, those whose copies step carried addresses. Absent in older
    /// results.
    #[serde(default)]
    pub stepped_loads: u64,
    /// Of the pipelined loads, those one thread copies as boxes of a tensor map (sm_90a's
    /// tensor memory accelerator) instead of 16 bytes per thread. Absent in older results.
    #[serde(default)]
    pub tensor_loads: u64,
    pub shared_bytes: u64,
    pub threads: u32,
    /// The 32-bit registers a thread needs at the program's peak, as the lowering estimates
    /// them (`tilekit_core::gpu::registers`; beside the backend's own count, where it reports
    /// one, in `static_resources`). Absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<u32>,
}

/// Static resources of a compiled kernel (from the compiler, not from a run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StaticResources {
    /// Registers per thread (AMD: VGPRs).
    pub registers: Option<u32>,
    pub shared_bytes: Option<u32>,
    /// AMD: VGPRs spilled; CUDA: bytes spilled per thread (ptxas's spill stores).
    pub spills: Option<u32>,
    /// Programs (or waves) resident per compute unit, as the compiler estimates.
    pub occupancy: Option<f64>,
    pub note: Option<String>,
}

/// One (platform, kernel, implementation, problem, configuration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub run: String,
    pub platform: String,
    pub kernel: String,
    /// `tilekit`, or a baseline: `wgsl` (hand-written shaders through wgpu), `cublas`, ...
    pub implementation: String,
    pub problem: ProblemRecord,
    /// `4096x1024 f32`, the key problems are grouped by.
    pub problem_text: String,
    pub config: String,
    /// The kernel's default configuration (the "same configuration everywhere" set).
    pub default_config: bool,
    /// SHA-256 of the text of every program the plan launches.
    pub kernel_hash: Option<String>,
    pub bytes: u64,
    pub flops: u64,
    pub status: Status,
    pub message: Option<String>,
    pub check: Option<CheckRecord>,
    /// Host time to compile (lowering and code generation, every launch), seconds.
    pub compile_s: Option<f64>,
    /// Wall time of the checked first run, which includes the driver's pipeline build.
    pub first_run_s: Option<f64>,
    /// Seconds per run, every timed sample, in order.
    pub samples_s: Vec<f64>,
    pub summary: Option<Summary>,
    pub derived: Option<Derived>,
    pub static_resources: Option<StaticResources>,
    /// The tuning-cache file this configuration came from: `tilekit bench` without `--tune`
    /// times the default configuration and, where the cache holds another one for the
    /// problem and device (`tilekit tune`), that one too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned_from: Option<String>,
    /// One per launch of the plan, on GPU platforms (and the emulator, for its target).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lowering: Vec<Lowering>,
}

impl Entry {
    /// The median time of a timed entry.
    pub fn median(&self) -> Option<f64> {
        (self.status == Status::Ok).then_some(self.summary.as_ref()?.median_s)
    }
}

/// Why results cannot be read or merged.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not a tilekit results file: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: results schema version {found}, this tilekit reads versions {OLDEST_READABLE_VERSION} to {SCHEMA_VERSION}")]
    Version { path: String, found: u64 },
    #[error("{path}: entry {index} names platform `{platform}`, which the file does not describe")]
    UnknownPlatform { path: String, index: usize, platform: String },
}

impl Results {
    pub fn new() -> Results {
        Results { schema_version: SCHEMA_VERSION, runs: Vec::new(), platforms: Vec::new(), entries: Vec::new() }
    }

    /// Parses a results file, checking its version first so that an old file gets a clear
    /// message rather than a missing-field error.
    pub fn from_json(path: &str, text: &str) -> Result<Results, ResultsError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| ResultsError::Parse { path: path.into(), message: e.to_string() })?;
        match value.get("schema_version").and_then(|v| v.as_u64()) {
            Some(v) if (OLDEST_READABLE_VERSION as u64..=SCHEMA_VERSION as u64).contains(&v) => {}
            Some(found) => return Err(ResultsError::Version { path: path.into(), found }),
            None => return Err(ResultsError::Parse { path: path.into(), message: "no `schema_version`".into() }),
        }
        let mut r: Results = serde_json::from_value(value).map_err(|e| ResultsError::Parse { path: path.into(), message: e.to_string() })?;
        r.upgrade();
        for (index, e) in r.entries.iter().enumerate() {
            if !r.platforms.iter().any(|p| p.id == e.platform) {
                return Err(ResultsError::UnknownPlatform { path: path.into(), index, platform: e.platform.clone() });
            }
        }
        Ok(r)
    }

    /// Brings a file of an older version to this one: a version 1 file has no machine labels,
    /// so each run and platform is taken to be its own host.
    fn upgrade(&mut self) {
        for run in &mut self.runs {
            if run.machine.is_empty() {
                run.machine = run.host.clone();
            }
        }
        for p in &mut self.platforms {
            if p.machine.is_empty() {
                p.machine = p.host.clone();
            }
        }
        self.schema_version = SCHEMA_VERSION;
    }

    pub fn read(path: &str) -> Result<Results, ResultsError> {
        let text = std::fs::read_to_string(path).map_err(|source| ResultsError::Io { path: path.into(), source })?;
        Results::from_json(path, &text)
    }

    /// Compact JSON: a run keeps every sample (up to thousands per entry), which pretty
    /// printing would spread over a line each.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("results serialize")
    }

    pub fn platform(&self, id: &str) -> Option<&Platform> {
        self.platforms.iter().find(|p| p.id == id)
    }

    /// Merges results files from any number of machines into one. Platforms keep their ids
    /// unless two machines measured same-named devices, in which case the later file's platform
    /// becomes `id@machine`. Where two runs measured the same (platform, kernel, implementation,
    /// problem, configuration), the later run wins. Efficiencies against the best
    /// implementation are recomputed over the merged set.
    pub fn merge(files: impl IntoIterator<Item = Results>) -> Results {
        let mut out = Results::new();
        for mut file in files {
            file.upgrade();
            // Same-named platform from another machine: rename in this file before adding.
            let mut renames: HashMap<String, String> = HashMap::new();
            for p in &mut file.platforms {
                if let Some(existing) = out.platforms.iter().find(|q| q.id == p.id) {
                    if existing.machine != p.machine {
                        let new_id = format!("{}@{}", p.id, p.machine);
                        renames.insert(p.id.clone(), new_id.clone());
                        p.id = new_id;
                    }
                }
            }
            for e in &mut file.entries {
                if let Some(n) = renames.get(&e.platform) {
                    e.platform = n.clone();
                }
            }
            for r in file.runs {
                if !out.runs.iter().any(|q| q.id == r.id) {
                    out.runs.push(r);
                }
            }
            for p in file.platforms {
                match out.platforms.iter_mut().find(|q| q.id == p.id) {
                    // The same device measured again on the same machine: keep the newer
                    // description, and any ceiling only one of the runs measured.
                    Some(q) => {
                        let ceilings = Ceilings {
                            copy_gbps: p.ceilings.copy_gbps.or(q.ceilings.copy_gbps),
                            copy_source: p.ceilings.copy_source.clone().or(q.ceilings.copy_source.clone()),
                            matrix_tflops: p.ceilings.matrix_tflops.or(q.ceilings.matrix_tflops),
                            matrix_source: p.ceilings.matrix_source.clone().or(q.ceilings.matrix_source.clone()),
                        };
                        *q = Platform { ceilings, ..p };
                    }
                    None => out.platforms.push(p),
                }
            }
            let started: HashMap<String, u64> = out.runs.iter().map(|r| (r.id.clone(), r.started_unix)).collect();
            for e in file.entries {
                let key = |x: &Entry| (x.platform.clone(), x.kernel.clone(), x.implementation.clone(), x.problem_text.clone(), x.config.clone());
                match out.entries.iter_mut().find(|x| key(x) == key(&e)) {
                    Some(x) => {
                        if started.get(&e.run) >= started.get(&x.run) {
                            *x = e;
                        }
                    }
                    None => out.entries.push(e),
                }
            }
        }
        out.derive();
        out
    }

    /// (Re)computes every timed entry's derived figures from its samples, its cost, its
    /// platform's ceilings and the best implementation on the same hardware.
    pub fn derive(&mut self) {
        let hw: HashMap<String, (String, String)> = self.platforms.iter().map(|p| (p.id.clone(), (p.hardware.clone(), p.machine.clone()))).collect();
        let mut best: HashMap<(String, String, String, String), f64> = HashMap::new();
        for e in &self.entries {
            if let (Some(m), Some((h, machine))) = (e.median(), hw.get(&e.platform)) {
                let k = (h.clone(), machine.clone(), e.kernel.clone(), e.problem_text.clone());
                let b = best.entry(k).or_insert(m);
                *b = b.min(m);
            }
        }
        // A ceiling belongs to the hardware: the best measured through any of its runtimes.
        let best_of = |p: &Platform, f: fn(&Ceilings) -> Option<f64>| {
            self.platforms.iter().filter(|q| q.hardware == p.hardware && q.machine == p.machine).filter_map(|q| f(&q.ceilings)).reduce(f64::max)
        };
        let ceilings: HashMap<String, Ceilings> = self
            .platforms
            .iter()
            .map(|p| {
                let c = Ceilings { copy_gbps: best_of(p, |c| c.copy_gbps), matrix_tflops: best_of(p, |c| c.matrix_tflops), ..p.ceilings.clone() };
                (p.id.clone(), c)
            })
            .collect();
        // The copy kernel's best median per platform and byte count, for `of_copy_same_bytes`.
        let mut copies: HashMap<(String, u64), f64> = HashMap::new();
        for e in self.entries.iter().filter(|e| e.kernel == "copy" && e.implementation == "tilekit") {
            if let Some(m) = e.median() {
                let b = copies.entry((e.platform.clone(), e.bytes)).or_insert(m);
                *b = b.min(m);
            }
        }
        for e in &mut self.entries {
            let Some(m) = e.median() else {
                e.derived = None;
                continue;
            };
            let (h, machine) = hw.get(&e.platform).cloned().unwrap_or_default();
            let b = best.get(&(h, machine, e.kernel.clone(), e.problem_text.clone())).copied();
            let c = ceilings.get(&e.platform).cloned().unwrap_or_default();
            let mut d = derive_figures(e.bytes, e.flops, m, &c, b);
            if e.kernel != "copy" && d.intensity < MEMORY_BOUND_INTENSITY {
                d.of_copy_same_bytes = copies.get(&(e.platform.clone(), copy_bytes(e.bytes))).map(|c| c / m);
            }
            e.derived = Some(d);
        }
    }
}

impl Default for Results {
    fn default() -> Self {
        Results::new()
    }
}

/// Problems below this many FLOPs per byte are memory-bound on every device tilekit targets
/// (the ridge points of GPUs lie in the tens to hundreds, those of CPUs around ten or more), so
/// their attainable rate is the copy bandwidth alone even where no compute ceiling was measured.
pub const MEMORY_BOUND_INTENSITY: f64 = 4.0;

/// GB/s, TFLOP/s and the efficiencies of a run of `median_s` seconds.
pub fn derive_figures(bytes: u64, flops: u64, median_s: f64, c: &Ceilings, best_s: Option<f64>) -> Derived {
    let gbps = bytes as f64 / median_s / 1e9;
    let tflops = flops as f64 / median_s / 1e12;
    let intensity = if bytes > 0 { flops as f64 / bytes as f64 } else { 0.0 };
    // Attainable time on the roofline: the larger of the memory time and the compute time.
    let memory_s = c.copy_gbps.filter(|g| *g > 0.0).map(|g| bytes as f64 / (g * 1e9));
    let compute_s = c.matrix_tflops.filter(|t| *t > 0.0).map(|t| flops as f64 / (t * 1e12));
    let attainable_s = match (memory_s, compute_s) {
        (Some(m), Some(f)) => Some(m.max(f)),
        (Some(m), None) if intensity < MEMORY_BOUND_INTENSITY => Some(m),
        (None, Some(f)) if flops > 0 => Some(f),
        _ => None,
    };
    Derived {
        gbps,
        tflops,
        intensity,
        efficiency_ceiling: attainable_s.map(|a| a / median_s),
        efficiency_best: best_s.map(|b| b / median_s),
        of_copy_same_bytes: None,
    }
}

/// The bytes a copy of `bytes` moves with the copy kernel (f32 elements, each read and written):
/// `bytes` rounded up to a whole element's eight.
pub fn copy_bytes(bytes: u64) -> u64 {
    bytes.div_ceil(8) * 8
}

/// The JSON Schema of [`Results`], as committed in `bench/schema/results.schema.json`.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Results);
    serde_json::to_string_pretty(&schema).expect("schema serializes") + "\n"
}
