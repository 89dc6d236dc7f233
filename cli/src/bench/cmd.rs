//! The `tilekit bench` and `tilekit report` commands.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::report::{self, ReportOptions};
use super::runner::{self, Bars, BenchOptions};
use super::schema::{Results, Status};
use super::suite;
use crate::cli::{CliError, EXIT_FAIL};
use crate::device::Device;

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// The suite of problems: `default` (Triton's tutorial shapes), `quick` (small, for CPU
    /// devices and CI), `memory` or `examples` (kernels as users write them first).
    #[arg(long, default_value = "default")]
    pub suite: String,
    /// Also compile every case for an AMD architecture (gfx90a, gfx942, gfx1100, or `all`;
    /// repeatable; needs the `amdgcn` feature): static resources, "compiled, not run".
    #[arg(long = "amdgcn", value_name = "ARCH")]
    pub amdgcn: Vec<String>,
    /// Devices to measure (repeatable): `interpreter`, `emulator:PRESET`, `vulkan`, `wgpu`,
    /// `cuda` (with the `ptx` feature), or a longer prefix of a name `tilekit devices` prints.
    /// Default: the interpreter and every GPU device (CUDA, then Vulkan through both runtimes).
    #[arg(long = "device", value_name = "DEVICE")]
    pub devices: Vec<String>,
    /// Kernels to keep (repeatable). Default: every kernel of the suite.
    #[arg(long = "kernel", value_name = "KERNEL")]
    pub kernels: Vec<String>,
    /// Problems to time instead of the suite's (repeatable): `KERNEL:SHAPE[:DTYPE][:KEY=VALUE,...]`,
    /// the shape as `tilekit run --shape` takes it, the dtype the kernel's default when absent,
    /// options as `tilekit run --opt` takes them, e.g. `layernorm:4096x8192:f32` or
    /// `attention:4x32x4096x128:f16:causal=1`. The suite still sets the copy ceiling's size.
    #[arg(long = "problem", value_name = "KERNEL:SHAPE[:DTYPE][:OPTS]")]
    pub problems: Vec<String>,
    /// Results file, which must not exist yet: a run never replaces results it did not
    /// produce. Default: `bench/local/bench-<host>-<suite>-<UTC time>.json` (git ignores
    /// bench/local/; the committed results in bench/results/ are never written).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Time only each kernel's default configuration (no per-device tuning).
    #[arg(long)]
    pub no_tune: bool,
    /// Time these configurations instead of each kernel's list (repeatable): meta-parameters
    /// merged over the kernel's default configuration, as `tilekit run --config` takes them,
    /// e.g. `--config BLOCK=8192,num_warps=16 --config num_warps=32,occupancy=2`.
    #[arg(long = "config", value_name = "KEY=VALUE,...", conflicts_with = "no_tune")]
    pub configs: Vec<String>,
    /// With --no-tune, time only each default configuration, also where the tuning cache
    /// (`tilekit tune`) holds a tuned one for the problem and device (which is otherwise timed
    /// beside it, marked `tuned_from` in the results).
    #[arg(long, requires = "no_tune")]
    pub untuned: bool,
    /// Skip the baselines: hand-written WGSL on wgpu devices, cuBLAS on CUDA devices.
    #[arg(long)]
    pub no_baselines: bool,
    /// Untimed runs before the timed ones.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// At least this many timed runs...
    #[arg(long, default_value_t = 30)]
    pub min_runs: usize,
    /// ...and at least this much device time (milliseconds)...
    #[arg(long, default_value_t = 100.0)]
    pub min_time_ms: f64,
    /// ...but at most this many runs.
    #[arg(long, default_value_t = 1000)]
    pub max_runs: usize,
    /// MiB overwritten on the device before each timed run, to start it with a cold
    /// last-level cache (0: no flush). Default: 256, or 64 when every device is a CPU.
    #[arg(long)]
    pub flush_mib: Option<u64>,
    /// Skip (never time unchecked) problems whose host f64 reference costs more GFLOP.
    #[arg(long, default_value_t = 1200.0)]
    pub max_check_gflop: f64,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0xB3AC)]
    pub seed: u64,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Results files (`tilekit bench` output), from any number of machines.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Directory for report.md, index.html, p3.csv, results.json (merged) and the SVG charts.
    #[arg(short, long)]
    pub output: PathBuf,
    /// The platform set of the performance-portability metric: platform ids or prefixes,
    /// comma-separated. Default: every platform that ran (the emulator excepted).
    #[arg(long, value_delimiter = ',')]
    pub platforms: Vec<String>,
    /// A name for that platform set, shown in the report.
    #[arg(long)]
    pub set_name: Option<String>,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `bench/local/bench-<host>-<suite>-<YYYYMMDDTHHMMSSZ>.json`: a name of the run's own, outside
/// the committed results.
pub fn default_output(host: &str, suite: &str, unix: u64) -> PathBuf {
    let day = report::date(unix).replace('-', "");
    let s = unix % 86_400;
    PathBuf::from(format!("bench/local/bench-{host}-{suite}-{day}T{:02}{:02}{:02}Z.json", s / 3600, s / 60 % 60, s % 60))
}

/// Checks that `path` can receive a new results file: not a directory, not an existing file
/// (results are never replaced), in a directory that exists (or can be made) and takes a file.
pub fn check_output(path: &Path) -> Result<(), CliError> {
    let shown = path.display();
    if path.is_dir() {
        return Err(CliError::Usage(format!(
            "-o {shown} is a directory; -o takes a results file name, such as {}",
            path.join("results.json").display()
        )));
    }
    if path.exists() {
        return Err(CliError::Usage(format!("{shown} exists; tilekit bench never replaces a results file (choose another -o, or remove it first)")));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::Usage(format!("cannot create {}: {e}", dir.display())))?;
    }
    // The file the results are written through, created and removed now, so that a place that
    // cannot take the results fails before the run.
    let probe = temp_path(path);
    std::fs::write(&probe, b"").map_err(|e| CliError::Usage(format!("cannot write {shown}: {e}")))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The file beside `path` that [`write_atomically`] writes first.
fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(|| "results".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Writes `text` to a file beside `path`, then renames it over `path`: a reader (or a run
/// interrupted mid-write) sees the previous complete file or the new one, never half of one.
pub(crate) fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = temp_path(path);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn devices(names: &[String]) -> Result<Vec<Device>, CliError> {
    if names.is_empty() {
        let mut d = vec![Device::Interpreter];
        d.extend(Device::every_gpu());
        return Ok(d);
    }
    let mut out: Vec<Device> = Vec::new();
    for n in names {
        let d = Device::find(n)?;
        if !out.contains(&d) {
            out.push(d);
        }
    }
    Ok(out)
}

/// A `--problem` value: `KERNEL:SHAPE[:DTYPE][:KEY=VALUE,...]`.
fn parse_problem(text: &str) -> Result<suite::Case, CliError> {
    let parts: Vec<&str> = text.split(':').collect();
    let usage = || CliError::Usage(format!("--problem `{text}`: expected KERNEL:SHAPE, KERNEL:SHAPE:DTYPE or KERNEL:SHAPE[:DTYPE]:KEY=VALUE,..."));
    let (dtype_part, opts_part) = match parts.get(2..).unwrap_or(&[]) {
        [] => (None, None),
        [o] if o.contains('=') => (None, Some(*o)),
        [d] => (Some(*d), None),
        [d, o] => (Some(*d), Some(*o)),
        _ => return Err(usage()),
    };
    if parts.len() < 2 {
        return Err(usage());
    }
    let kernel = crate::kernels::find(parts[0].trim()).ok_or_else(|| {
        let known: Vec<&str> = crate::kernels::all().iter().map(|k| k.name()).collect();
        CliError::Usage(format!("--problem `{text}`: no kernel `{}`; kernels: {}", parts[0], known.join(", ")))
    })?;
    let shape = crate::cli::parse_shape(parts[1])?;
    let dtype = match dtype_part {
        Some(d) => crate::cli::parse_dtype(d)?,
        None => kernel.default_problem().dtype,
    };
    if !kernel.dtypes().contains(&dtype) {
        let known: Vec<&str> = kernel.dtypes().iter().map(|d| d.name()).collect();
        return Err(CliError::Usage(format!("--problem `{text}`: {} does not take {dtype}; it takes {}", kernel.name(), known.join(", "))));
    }
    let mut problem = crate::kernels::Problem::new(&shape, dtype);
    for opt in opts_part.map(|o| o.split(',').collect::<Vec<_>>()).unwrap_or_default() {
        match opt.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                problem.opts.insert(k.trim().to_string(), v.trim().to_string());
            }
            _ => return Err(CliError::Usage(format!("--problem `{text}`: option `{opt}` is not KEY=VALUE"))),
        }
    }
    kernel.check_options(&problem).map_err(|e| CliError::Usage(format!("--problem `{text}`: {e}")))?;
    Ok(suite::Case { kernel: kernel.name(), problem })
}

pub fn bench(args: &BenchArgs, out: &mut dyn Write) -> Result<i32, CliError> {
    let mut suite =
        suite::find(&args.suite).ok_or_else(|| CliError::Usage(format!("unknown suite `{}`; suites: {}", args.suite, suite::NAMES.join(", "))))?;
    if !args.problems.is_empty() {
        suite.cases = args.problems.iter().map(|p| parse_problem(p)).collect::<Result<_, _>>()?;
        suite.name = "problems";
        suite.description = "problems named on the command line";
    }
    for k in &args.kernels {
        if !suite.cases.iter().any(|c| c.kernel == k) {
            let mut names: Vec<&str> = suite.cases.iter().map(|c| c.kernel).collect();
            names.dedup();
            return Err(CliError::Usage(format!("suite `{}` has no kernel `{k}`; it has: {}", suite.name, names.join(", "))));
        }
    }
    if args.min_runs == 0 || args.max_runs == 0 {
        return Err(CliError::Usage("--min-runs and --max-runs must be at least 1".into()));
    }
    if [args.min_time_ms, args.max_check_gflop].iter().any(|x| x.is_nan() || *x < 0.0) {
        return Err(CliError::Usage("--min-time-ms and --max-check-gflop must be non-negative numbers".into()));
    }
    // Every --config must mean something to every kernel it will be applied to: checked here,
    // before any device time is spent.
    let mut named: Vec<&str> =
        suite.cases.iter().map(|c| c.kernel).filter(|k| args.kernels.is_empty() || args.kernels.iter().any(|n| n == k)).collect();
    named.sort_unstable();
    named.dedup();
    for name in named {
        if let Some(kernel) = crate::kernels::find(name) {
            for c in &args.configs {
                crate::cli::resolve_config(kernel.as_ref(), std::slice::from_ref(c))?;
            }
        }
    }
    let devices = devices(&args.devices)?;
    let all_cpu = devices.iter().all(|d| match d {
        Device::Interpreter | Device::Emulator(_) => true,
        d => d.target().is_some_and(|t| t.name.contains("llvmpipe")),
    });
    let flush_mib = args.flush_mib.unwrap_or(if all_cpu { 64 } else { 256 });
    let known = tilekit_core::gpu::Target::AMD_PRESETS;
    let mut amdgcn = Vec::new();
    for a in &args.amdgcn {
        if !cfg!(any(feature = "amdgcn", feature = "amdgcn-static")) {
            return Err(CliError::Usage("--amdgcn needs a tilekit built with the `amdgcn` feature (it needs LLVM 19 and lld-19)".into()));
        }
        match a.as_str() {
            "all" => amdgcn.extend(known.iter().map(|k| k.to_string())),
            k if known.contains(&k) => amdgcn.push(k.to_string()),
            k => return Err(CliError::Usage(format!("unknown --amdgcn `{k}`; known: {}, all", known.join(", ")))),
        }
    }
    amdgcn.dedup();
    let output = args.output.clone().unwrap_or_else(|| default_output(&runner::host_name(), suite.name, unix_now()));
    // Last of the checks, before any device time is spent: a run that cannot save its results
    // is not started.
    check_output(&output)?;
    let options = BenchOptions {
        suite,
        devices,
        kernels: args.kernels.clone(),
        warmup: args.warmup,
        min_runs: args.min_runs,
        min_time_s: args.min_time_ms / 1e3,
        max_runs: args.max_runs.max(args.min_runs),
        flush_bytes: flush_mib << 20,
        tune: !args.no_tune,
        configs: args.configs.clone(),
        baselines: !args.no_baselines,
        max_check_flops: args.max_check_gflop * 1e9,
        seed: args.seed,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        amdgcn,
        tuning_cache: if args.no_tune && args.configs.is_empty() && !args.untuned { tilekit::tune::TuneCache::user() } else { None },
    };
    let mut write_error = None;
    let mut save = |r: &Results| {
        if let Err(e) = write_atomically(&output, &r.to_json()) {
            write_error = Some(format!("cannot write {}: {e}", output.display()));
        }
    };
    let results = runner::run(&options, &mut Bars::new(), &mut save);
    save(&results);
    if let Some(e) = write_error {
        return Err(CliError::Usage(e));
    }
    let count = |s: Status| results.entries.iter().filter(|e| e.status == s).count();
    writeln!(
        out,
        "{} timed, {} wrong, {} errors, {} skipped, {} compiled, not run; wrote {}",
        count(Status::Ok),
        count(Status::Wrong),
        count(Status::Error),
        count(Status::Skipped),
        count(Status::CompiledNotRun),
        output.display()
    )?;
    // A configuration a target cannot take (too many registers, say) is an error entry, not a
    // failure of the run; a wrong answer is, and so is a case no configuration could time.
    let mut cases: std::collections::BTreeMap<(&str, &str, &str), bool> = Default::default();
    // Compile-only targets are never timed; a case none of whose configurations compiled
    // there counts like an untimed one.
    for e in results.entries.iter().filter(|e| e.implementation == "tilekit" && e.status != Status::Skipped) {
        *cases.entry((&e.platform, &e.kernel, &e.problem_text)).or_default() |= matches!(e.status, Status::Ok | Status::CompiledNotRun);
    }
    let untimed: Vec<String> = cases.iter().filter(|(_, ok)| !**ok).map(|((p, k, pr), _)| format!("{k} {pr} on {p}")).collect();
    if !untimed.is_empty() {
        writeln!(out, "no configuration was timed for: {}", untimed.join("; "))?;
    }
    Ok(if count(Status::Wrong) > 0 || !untimed.is_empty() { EXIT_FAIL } else { 0 })
}

pub fn report(args: &ReportArgs, out: &mut dyn Write) -> Result<i32, CliError> {
    let mut files = Vec::new();
    for p in &args.results {
        let path = p.display().to_string();
        files.push(Results::read(&path).map_err(|e| CliError::Usage(e.to_string()))?);
    }
    let merged = Results::merge(files);
    let options = ReportOptions { platforms: args.platforms.clone(), set_name: args.set_name.clone() };
    let rendered = report::render(&merged, &options).map_err(|e| CliError::Usage(e.to_string()))?;
    rendered.write(Path::new(&args.output)).map_err(|e| CliError::Usage(format!("cannot write the report to {}: {e}", args.output.display())))?;
    writeln!(out, "wrote {}/report.md, index.html, p3.csv, results.json and {} charts", args.output.display(), rendered.charts.len())?;
    Ok(0)
}
