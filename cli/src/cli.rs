//! The `tilekit` command line: list the kernel library and the devices, print the tile IR a kernel
//! builds, and run kernels against their f64 reference.
//!
//! The binary is a thin `main` over [`main_with_args`], so the parsing and the error paths are
//! testable as a library. Every user mistake becomes a [`CliError`] whose message is one line and
//! whose exit code is 2; a run that completes but fails its comparison exits with 1.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use crate::check::{self, CheckError, CheckReport};
use crate::device::{Device, DeviceError, RunOptions};
use crate::kernels::{self, Kernel, KernelError, LaunchArg, Plan, Problem};
use crate::{Config, DType};
use tilekit_core::gpu::Target;

/// Exit code of a run whose results did not all pass.
pub const EXIT_FAIL: i32 = 1;
/// Exit code of bad input (unknown kernel, bad shape, dtype or configuration, a kernel that
/// cannot plan the problem). The same code clap uses for a malformed command line.
pub const EXIT_USAGE: i32 = 2;

const EXAMPLES: &str = "\
Examples:
  tilekit kernels                          list the kernel library
  tilekit ir vector_add --config BLOCK=256 print the tile IR of one configuration
  tilekit run vector_add --shape 1M        run on the interpreter and compare with the reference
  tilekit run --all --problems tests       every kernel on its small test problems
  tilekit run --all --all-dtypes           every kernel, every dtype, default problems
  tilekit devices --json                   devices reachable now, as JSON
  tilekit bench --suite quick -o r.json    check and time the quick suite on every device
  tilekit report r.json -o report/         Markdown, HTML, SVG charts and CSV from results
  tilekit tune softmax --device vulkan     time every configuration, cache the fastest right one
  tilekit fuzz --seed 1 --count 1000       1000 random programs, interpreter against the emulator
  tilekit fuzz --devices vulkan,wgpu --count 50 --save-failures fails/
                                           random programs through Vulkan and wgpu";

/// tilekit: Triton-style tile kernels written once in Rust, run and measured on every device.
#[derive(Parser, Debug)]
#[command(
    name = "tilekit",
    version,
    about = "Tile kernels written once in Rust, checked against an f64 reference on every device tilekit can reach",
    after_help = EXAMPLES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the kernel library: dtypes, shape, configurations and default problem of each kernel.
    Kernels(ListArgs),
    /// Print the tile IR of every launch a kernel plans for one problem.
    ///
    /// The problem starts from the kernel's default (see `tilekit kernels`); --shape, --dtype and
    /// --opt change it. --config overrides meta-parameters of the kernel's default configuration.
    Ir(IrArgs),
    /// Run kernels on a device and compare every output with the f64 reference.
    ///
    /// Prints, per output, the norm-wise relative error, the tolerance, PASS or FAIL and the
    /// wall time of the launches. Exits with 1 when any output fails and 2 on bad input.
    #[command(
        override_usage = "tilekit run [OPTIONS] <KERNEL>\n       tilekit run --all [--problems tests] [--all-dtypes | --dtype <DTYPE>] [OPTIONS]"
    )]
    Run(RunArgs),
    /// List the devices tilekit can run on now.
    Devices(ListArgs),
    /// Check, then time, a suite of problems on every device, with ceilings and baselines.
    ///
    /// Every (kernel, problem, configuration) is compared with the f64 reference on the device
    /// first; a wrong answer is recorded, never timed. Timing: device timestamps, warm-up, at
    /// least --min-runs runs and --min-time-ms of device time, every sample kept, the cache
    /// flushed before each run. Writes one JSON results file; exits with 1 when any case was
    /// wrong or failed.
    Bench(crate::bench::cmd::BenchArgs),
    /// Merge results files and render Markdown, HTML with SVG charts and a CSV.
    Report(crate::bench::cmd::ReportArgs),
    /// Differential fuzzing: random valid tile programs on the interpreter and other devices.
    ///
    /// Program i of a campaign is generated from (--seed, i) alone, run on the interpreter (the
    /// reference) and on each device, and compared under the tolerance rule of
    /// docs/semantics.md. Prints per device: agreed, explained differences by kind (documented
    /// backend freedoms, such as flushed subnormals), unexplained mismatches (with seed and
    /// index) and refusals (programs a device cannot compile, never a pass). Exits with 1 on any
    /// unexplained mismatch, 2 on bad input. --replay runs saved cases (tests/fuzz/*.tile).
    #[command(
        override_usage = "tilekit fuzz --seed S --count N [--start I] [--devices GROUP,...] [--jobs J] [--out SUMMARY.json] [--save-failures DIR] [--time-limit SECS] [--shrink-budget N]\n       tilekit fuzz --replay FILE.tile... [--devices GROUP,...]"
    )]
    Fuzz(crate::fuzz::cmd::FuzzArgs),
    /// Find a kernel's fastest right configuration for a problem on a device, and cache it.
    ///
    /// Every configuration of the kernel is planned (one the kernel cannot plan is pruned with
    /// its reason), checked once against the f64 reference and timed; the fastest right one is
    /// stored in the tuning cache under the kernel, its programs, the problem's bucket (each
    /// dimension rounded up to a power of two), the device and its driver. `tilekit run` then
    /// uses it when no --config is given. --model times only what the cost model ranks first.
    Tune(crate::tune_cmd::TuneArgs),
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// What to compute: the kernel's default problem changed by these options.
#[derive(Args, Debug, Default, Clone)]
pub struct ProblemArgs {
    /// Problem shape: dimensions separated by `x`, each a number (4096), a power (2^20) or a
    /// number with a K, M or G suffix (1M). Defaults to the kernel's default problem.
    #[arg(long, value_name = "SHAPE")]
    pub shape: Option<String>,
    /// Element dtype: f32, f16, bf16, i32, ... (`tilekit kernels` lists what each kernel supports).
    #[arg(long, value_name = "DTYPE")]
    pub dtype: Option<String>,
    /// A kernel option such as causal=1; repeat for several. A kernel takes only the options it
    /// declares (`tilekit kernels --json` lists them); flags take 0, 1, true or false.
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    pub opts: Vec<String>,
    /// Meta-parameters to override in the kernel's default configuration, such as
    /// BLOCK=256,num_warps=8; repeat to add more.
    #[arg(long = "config", value_name = "KEY=VALUE,...")]
    pub configs: Vec<String>,
}

#[derive(Args, Debug)]
pub struct IrArgs {
    /// Kernel name, as `tilekit kernels` lists it.
    #[arg(required_unless_present = "case", conflicts_with = "case")]
    pub kernel: Option<String>,
    /// A saved case instead of a kernel: a tile program in text form headed by `//` lines that
    /// give its grid, num_warps, num_stages and scalars (the form `tilekit fuzz
    /// --save-failures` and `--print` write, cli/tests/fuzz/*.tile).
    #[arg(long, value_name = "FILE.tile", conflicts_with_all = ["shape", "dtype", "opts", "configs"])]
    pub case: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Print the Rust source location each operation was built at.
    #[arg(long)]
    pub locations: bool,
    /// Print the GPU IR instead: every value's layout for a target, the threads and the shared
    /// memory the lowering needs.
    #[arg(long)]
    pub gpu: bool,
    /// The target for --gpu and --spirv: vulkan-baseline (default), lavapipe, h200-vulkan, and
    /// for --gpu also sm_80, sm_90, sm_90a or h200-cuda.
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
    /// Print the disassembled SPIR-V instead (for --target), as the Vulkan and wgpu runtimes
    /// load it.
    #[arg(long, conflicts_with_all = ["gpu", "locations"])]
    pub spirv: bool,
    /// Print the PTX instead (needs the `ptx` feature), with ptxas's resource report where
    /// ptxas is found.
    #[arg(long, conflicts_with_all = ["gpu", "locations", "spirv"])]
    pub ptx: bool,
    /// Print the AMDGCN assembly instead (needs the `amdgcn` feature), headed by the code
    /// object's resources and occupancy estimate. Compiled, not run: there is no AMD runtime.
    #[arg(long, conflicts_with_all = ["gpu", "locations", "ptx", "spirv"])]
    pub amdgcn: bool,
    /// Print the WGSL naga writes from the naga backend's module (for --target as a wgpu adapter
    /// with subgroups runs it: lane shuffles, no subgroup arithmetic, no float controls).
    #[arg(long, conflicts_with_all = ["gpu", "locations", "ptx", "spirv", "amdgcn"])]
    pub wgsl: bool,
    /// Print the Metal Shading Language naga writes from the same module.
    #[arg(long, conflicts_with_all = ["gpu", "locations", "ptx", "spirv", "amdgcn", "wgsl"])]
    pub msl: bool,
    /// Print the HLSL naga writes from the same module.
    #[arg(long, conflicts_with_all = ["gpu", "locations", "ptx", "spirv", "amdgcn", "wgsl", "msl"])]
    pub hlsl: bool,
    /// The architecture for --ptx (sm_80, sm_90 (default) or sm_90a) or --amdgcn (gfx90a,
    /// gfx942 (default) or gfx1100).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// With --ptx or --amdgcn: print the LLVM IR that backend writes for LLVM (before LLVM
    /// optimises it) instead of the assembly.
    #[arg(long)]
    pub llvm: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Kernel name, as `tilekit kernels` lists it.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub kernel: Option<String>,
    /// Run every kernel of the library, each in its default configuration.
    #[arg(long)]
    pub all: bool,
    /// Run once per dtype the kernel supports (with --all: for every kernel).
    #[arg(long, conflicts_with = "dtype")]
    pub all_dtypes: bool,
    /// Which problems to run: each kernel's default problem (sized for a GPU, so a large one can
    /// take minutes on the interpreter), or its test problems (small, odd sizes, every option).
    #[arg(long, value_enum, default_value_t = ProblemSet::Default, conflicts_with_all = ["shape", "opts"])]
    pub problems: ProblemSet,
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Device to run on: `interpreter` (the reference); `emulator:PRESET` for a target's GPU
    /// lowering emulated on the CPU thread by thread (presets: vulkan-baseline, lavapipe,
    /// h200-vulkan, sm_80, sm_90, sm_90a, h200-cuda, gfx90a, gfx942, gfx1100); `vulkan` or `wgpu` for
    /// the first Vulkan device through the raw Vulkan runtime or through wgpu (passthrough
    /// SPIR-V); `wgpu-naga` for the same adapter through naga modules; `cuda` for the
    /// first CUDA GPU (a build with the `ptx` feature); or a longer prefix of a name `tilekit
    /// devices` prints, such as `vulkan:llvmpipe`. A device that cannot be reached says why.
    #[arg(long, default_value = "interpreter", value_name = "DEVICE")]
    pub device: String,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed: u64,
    /// Checked launches: report the first out-of-bounds access, integer division by zero, shift
    /// out of range or failed device_assert, with its source location, program id and lane, on
    /// any device (slower; off by default).
    #[arg(long)]
    pub check: bool,
    /// Run the kernels' default configurations even where the tuning cache (`tilekit tune`)
    /// holds a tuned one for the problem and device.
    #[arg(long)]
    pub untuned: bool,
    /// Print JSON results instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The problems `tilekit run` runs when no --shape is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProblemSet {
    /// The kernel's default problem, changed by --shape, --dtype and --opt.
    Default,
    /// The kernel's test problems.
    Tests,
}

/// Bad input or a failure before anything ran. Each message is one line that names the problem.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("unknown kernel `{name}`; the library has: {available}")]
    UnknownKernel { name: String, available: String },
    #[error("bad --shape `{text}`: {why} (write dimensions like 4096x1024, 2^20 or 1M)")]
    Shape { text: String, why: String },
    #[error("kernel `{kernel}` takes a shape of {expected} ({rank} dimension{s}), got `{text}`", s = if *.rank == 1 { "" } else { "s" })]
    Rank { kernel: String, expected: String, rank: usize, text: String },
    #[error("unknown dtype `{name}`; known dtypes: {known}")]
    UnknownDType { name: String, known: String },
    #[error("kernel `{kernel}` does not support dtype {dtype}; it supports: {supported}")]
    UnsupportedDType { kernel: String, dtype: DType, supported: String },
    #[error("bad --opt `{text}`: expected KEY=VALUE, such as causal=1")]
    Opt { text: String },
    #[error("kernel `{kernel}` has no option `{key}`; its options: {known}")]
    OptKey { kernel: String, key: String, known: String },
    #[error("bad --opt {key}={value} for kernel `{kernel}`: {why}")]
    OptValue { kernel: String, key: String, value: String, why: String },
    #[error("bad --config: {0}")]
    Config(#[from] tilekit_core::ConfigError),
    #[error("kernel `{kernel}` has no meta-parameter `{key}`; its meta-parameters: {known}")]
    ConfigKey { kernel: String, key: String, known: String },
    #[error("kernel `{kernel}` cannot plan {problem} with config {config}: {source}")]
    Plan { kernel: String, problem: String, config: String, source: Box<KernelError> },
    #[error(transparent)]
    Device(Box<DeviceError>),
    #[error("kernel `{kernel}` cannot be lowered for {target}: {source}")]
    Lower { kernel: String, target: String, source: Box<tilekit_core::gpu::lower::LowerError> },
    #[error("{0}")]
    Usage(String),
    #[error("cannot write the output: {0}")]
    Io(#[from] io::Error),
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("fuzz: {0}")]
    Fuzz(String),
}

impl From<DeviceError> for CliError {
    fn from(e: DeviceError) -> CliError {
        CliError::Device(Box::new(e))
    }
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        EXIT_USAGE
    }
}

/// Parses `args` (the program name first), runs the command and returns the process exit code.
/// Results go to stdout, errors to stderr as one line.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // clap renders help and usage errors itself; a failed write to a closed pipe has
            // nowhere left to be reported.
            let _ = e.print();
            return e.exit_code();
        }
    };
    let mut stdout = io::stdout().lock();
    match execute(&cli.command, &mut stdout) {
        Ok(code) => code,
        Err(CliError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            let _ = stdout.flush();
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// Runs one command, writing its results to `out`; returns the exit code for a completed command.
pub fn execute(command: &Command, out: &mut dyn Write) -> Result<i32, CliError> {
    match command {
        Command::Kernels(a) => list_kernels(a.json, out).map(|_| 0),
        Command::Devices(a) => list_devices(a.json, out).map(|_| 0),
        Command::Ir(a) => print_ir(a, out).map(|_| 0),
        Command::Run(a) => run(a, out),
        Command::Bench(a) => crate::bench::cmd::bench(a, out),
        Command::Report(a) => crate::bench::cmd::report(a, out),
        Command::Fuzz(a) => crate::fuzz::cmd::fuzz(a, out),
        Command::Tune(a) => crate::tune_cmd::tune(a, out),
    }
}

// ---------------------------------------------------------------------------------------------
// Resolving the command line into kernels, problems and configurations

/// The kernel called `name`, or an error listing the library.
pub fn find_kernel(name: &str) -> Result<Box<dyn Kernel>, CliError> {
    kernels::find(name).ok_or_else(|| CliError::UnknownKernel { name: name.to_string(), available: kernel_names() })
}

fn kernel_names() -> String {
    kernels::all().iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// Parses a dtype name.
pub fn parse_dtype(name: &str) -> Result<DType, CliError> {
    DType::from_name(name.trim())
        .ok_or_else(|| CliError::UnknownDType { name: name.to_string(), known: DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ") })
}

/// Parses a `--shape` value.
pub fn parse_shape(text: &str) -> Result<Vec<usize>, CliError> {
    if text.trim().is_empty() {
        return Err(CliError::Shape { text: text.to_string(), why: "it is empty".into() });
    }
    Problem::parse_shape(text).map_err(|e| CliError::Shape {
        text: text.to_string(),
        why: match e {
            // The parser's own message repeats the whole shape; keep the part that names the
            // offending dimension.
            KernelError::Parse(m) => m.split(" in shape ").next().unwrap_or(&m).to_string() + " is not a size",
            other => other.to_string(),
        },
    })
}

/// Checks `dtype` is one the kernel supports, with a message that names the kernel.
pub fn check_dtype(kernel: &dyn Kernel, dtype: DType) -> Result<(), CliError> {
    if kernel.dtypes().contains(&dtype) {
        Ok(())
    } else {
        Err(CliError::UnsupportedDType {
            kernel: kernel.name().to_string(),
            dtype,
            supported: kernel.dtypes().iter().map(|d| d.name()).collect::<Vec<_>>().join(", "),
        })
    }
}

/// The kernel's default problem changed by `--shape`, `--dtype` (or `dtype`) and `--opt`.
pub fn resolve_problem(kernel: &dyn Kernel, args: &ProblemArgs, dtype: Option<DType>) -> Result<Problem, CliError> {
    let mut problem = kernel.default_problem();
    if let Some(text) = &args.shape {
        let shape = parse_shape(text)?;
        // A shape of the wrong rank would be read partly or not at all; the ranks the kernel
        // accepts are those of the problems it documents.
        let mut ranks: BTreeSet<usize> = BTreeSet::new();
        ranks.insert(problem.shape.len());
        ranks.extend(kernel.test_problems(problem.dtype).iter().map(|p| p.shape.len()));
        if !ranks.contains(&shape.len()) {
            return Err(CliError::Rank {
                kernel: kernel.name().to_string(),
                expected: kernel.shape_doc().split(" (").next().unwrap_or_default().to_string(),
                rank: problem.shape.len(),
                text: text.clone(),
            });
        }
        problem.shape = shape;
    }
    let dtype = match (dtype, &args.dtype) {
        (Some(d), _) => Some(d),
        (None, Some(name)) => Some(parse_dtype(name)?),
        (None, None) => None,
    };
    if let Some(d) = dtype {
        check_dtype(kernel, d)?;
        problem.dtype = d;
    }
    for text in &args.opts {
        match text.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                problem.opts.insert(k.trim().to_string(), v.trim().to_string());
            }
            _ => return Err(CliError::Opt { text: text.clone() }),
        }
    }
    // The kernel's declared options: an unknown key or a value of the wrong kind would otherwise
    // be ignored or misread.
    kernel.check_options(&problem).map_err(|e| match e {
        KernelError::UnknownOption { key, known } => CliError::OptKey { kernel: kernel.name().to_string(), key, known },
        KernelError::BadOption { key, value, why } => CliError::OptValue { kernel: kernel.name().to_string(), key, value, why },
        other => CliError::Usage(format!("kernel `{}`: {other}", kernel.name())),
    })?;
    Ok(problem)
}

/// The kernel's default configuration with every `--config` merged over it, in order.
pub fn resolve_config(kernel: &dyn Kernel, overrides: &[String]) -> Result<Config, CliError> {
    let configs = kernel.configs();
    let mut config = configs.first().cloned().unwrap_or_default();
    let mut known: BTreeSet<String> = configs.iter().flat_map(|c| c.iter().map(|(k, _)| k.to_string())).collect();
    // Read by the GPU lowering of every kernel, whatever the kernel's list holds: the warps of a
    // program, and the programs per multiprocessor the registers must leave room for.
    known.extend(["num_warps", "occupancy"].map(String::from));
    for text in overrides {
        let o: Config = text.parse()?;
        if o.get("occupancy").is_ok() {
            o.count("occupancy")?;
        }
        for (key, _) in o.iter() {
            // A key the kernel never reads would be ignored silently: almost always a typo.
            if !known.contains(key) {
                return Err(CliError::ConfigKey {
                    kernel: kernel.name().to_string(),
                    key: key.to_string(),
                    known: known.iter().cloned().collect::<Vec<_>>().join(", "),
                });
            }
        }
        config = config.merged(&o);
    }
    Ok(config)
}

/// The plan under `config`; when the user named no configuration and the default does not fit
/// the problem (`KernelError::Unfit`), under the first of the kernel's list that does, as a tuner
/// would choose. The configuration used comes back with the plan.
fn fitting_plan(
    kernel: &dyn Kernel,
    problem: &Problem,
    config: &Config,
    overridden: bool,
    target: &Target,
) -> (Config, Result<Plan, kernels::KernelError>) {
    match kernel.plan_on(problem, config, target) {
        Err(kernels::KernelError::Unfit(_)) if !overridden => {
            let c = kernels::default_config_for(kernel, problem, target);
            let p = kernel.plan_on(problem, &c, target);
            (c, p)
        }
        r => (config.clone(), r),
    }
}

/// `kernel` could not plan `problem` under `config`.
fn plan_error(kernel: &dyn Kernel, problem: &Problem, config: &Config, source: kernels::KernelError) -> CliError {
    CliError::Plan { kernel: kernel.name().to_string(), problem: problem.to_string(), config: config.to_string(), source: Box::new(source) }
}

// ---------------------------------------------------------------------------------------------
// tilekit kernels / devices

/// One kernel as `tilekit kernels --json` prints it.
#[derive(Debug, Serialize)]
pub struct KernelInfo {
    pub name: String,
    pub description: String,
    pub dtypes: Vec<String>,
    pub shape: String,
    /// Number of configurations in the kernel's space.
    pub configs: usize,
    pub default_config: String,
    pub default_problem: ProblemInfo,
    /// The options `--opt` takes, as `causal=0|1`.
    pub options: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct ProblemInfo {
    pub shape: Vec<usize>,
    pub dtype: String,
    pub opts: std::collections::BTreeMap<String, String>,
    /// The problem as the text output prints it: `1048576 f32`.
    pub text: String,
}

impl From<&Problem> for ProblemInfo {
    fn from(p: &Problem) -> ProblemInfo {
        ProblemInfo { shape: p.shape.clone(), dtype: p.dtype.to_string(), opts: p.opts.clone(), text: p.to_string() }
    }
}

pub fn kernel_infos() -> Vec<KernelInfo> {
    kernels::all()
        .iter()
        .map(|k| {
            let configs = k.configs();
            KernelInfo {
                name: k.name().to_string(),
                description: k.description().to_string(),
                dtypes: k.dtypes().iter().map(|d| d.to_string()).collect(),
                shape: k.shape_doc().to_string(),
                configs: configs.len(),
                default_config: configs.first().map(|c| c.to_string()).unwrap_or_default(),
                default_problem: ProblemInfo::from(&k.default_problem()),
                options: k.options().iter().map(|o| o.to_string()).collect(),
            }
        })
        .collect()
}

fn list_kernels(json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let infos = kernel_infos();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&infos)?)?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = infos
        .iter()
        .map(|k| {
            // A shape's explanation ("M x N x K (options: ...)") would make the column as wide as
            // the terminal; it moves to the end of the description, the free-width column.
            let (shape, note) = match k.shape.split_once(" (") {
                Some((shape, note)) => (shape.to_string(), format!(" ({note}")),
                None => (k.shape.clone(), String::new()),
            };
            vec![k.name.clone(), k.dtypes.join(","), shape, k.configs.to_string(), k.default_problem.text.clone(), k.description.clone() + &note]
        })
        .collect();
    out.write_all(table(&["KERNEL", "DTYPES", "SHAPE", "CONFIGS", "DEFAULT PROBLEM", "DESCRIPTION"], &rows).as_bytes())?;
    Ok(())
}

#[derive(Debug, Serialize)]
pub struct DeviceInfo {
    pub name: String,
    pub default: bool,
    /// True for targets tilekit compiles for but cannot run (AMDGCN: no AMD runtime).
    pub compile_only: bool,
    /// What the compiler assumes of the device (GPU devices): warp width, shared memory, the
    /// float controls and matrix instructions it uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetInfo>,
    /// Vulkan and wgpu devices: every cooperative-matrix configuration the driver lists and the
    /// matrix-related extensions present, beyond the ones `dot` uses (`target.matrix`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cooperative_matrix_listed: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matrix_extensions: Vec<String>,
    /// Vulkan devices with VK_NV_cooperative_matrix2: the features it has, its limits and
    /// the flexible-dimension configurations the driver lists.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cooperative_matrix2: Vec<String>,
}

/// The facts of a [`tilekit_core::gpu::Target`] a device report shows.
#[derive(Debug, Serialize)]
pub struct TargetInfo {
    pub warp: u32,
    pub shared_memory_bytes: u32,
    pub f16: bool,
    pub bf16: bool,
    pub i64: bool,
    pub ieee_preserve: bool,
    pub f16_rte: bool,
    pub f32_denorm_preserve: bool,
    pub matrix: Vec<String>,
}

impl TargetInfo {
    fn of(t: &tilekit_core::gpu::Target) -> TargetInfo {
        TargetInfo {
            warp: t.subgroup_size,
            shared_memory_bytes: t.shared_memory_bytes,
            f16: t.f16,
            bf16: t.bf16,
            i64: t.i64,
            ieee_preserve: t.ieee_preserve,
            f16_rte: t.f16_rte,
            f32_denorm_preserve: t.f32_denorm_preserve,
            matrix: t
                .matrix
                .iter()
                .map(|m| {
                    // f32 operands of a matrix instruction are tf32 (rounded first).
                    let (a, b) = if m.tf32() { ("tf32".to_string(), "tf32".to_string()) } else { (m.a.to_string(), m.b.to_string()) };
                    format!("{:?} m{}n{}k{} {a}x{b}->{}", m.kind, m.m, m.n, m.k, m.acc)
                })
                .collect(),
        }
    }
}

/// The AMDGCN architectures this build compiles code objects for; none run here.
fn compile_only_targets() -> Vec<String> {
    if cfg!(any(feature = "amdgcn", feature = "amdgcn-static")) {
        tilekit_core::gpu::Target::AMD_PRESETS.iter().map(|a| format!("amdgcn:{a}")).collect()
    } else {
        Vec::new()
    }
}

fn list_devices(json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let probes = if json { tilekit_spirv::VulkanRuntime::devices().unwrap_or_default() } else { Vec::new() };
    let devices: Vec<DeviceInfo> = Device::all()
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let name = d.name();
            let probe = probes.iter().find(|p| (name.starts_with("vulkan:") || name.starts_with("wgpu")) && name.ends_with(&format!(":{}", p.name)));
            DeviceInfo {
                default: i == 0,
                compile_only: false,
                target: d.target().map(TargetInfo::of),
                cooperative_matrix_listed: probe.map(|p| p.cooperative_matrix_listed.clone()).unwrap_or_default(),
                matrix_extensions: probe.map(|p| p.matrix_extensions.clone()).unwrap_or_default(),
                cooperative_matrix2: probe
                    .filter(|_| name.starts_with("vulkan:"))
                    .and_then(|p| p.cooperative_matrix2.as_ref())
                    .map(|c| c.describe())
                    .unwrap_or_default(),
                name,
            }
        })
        .chain(compile_only_targets().into_iter().map(|name| DeviceInfo {
            name,
            default: false,
            compile_only: true,
            target: None,
            cooperative_matrix_listed: Vec::new(),
            matrix_extensions: Vec::new(),
            cooperative_matrix2: Vec::new(),
        }))
        .collect();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&devices)?)?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = devices
        .iter()
        .map(|d| {
            let note = if d.compile_only { format!("compile-only ({})", "compiled, not run") } else { "runs".into() };
            vec![d.name.clone(), if d.default { "yes".into() } else { String::new() }, note]
        })
        .collect();
    out.write_all(table(&["DEVICE", "DEFAULT", "STATUS"], &rows).as_bytes())?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// tilekit ir

/// The PTX of one launch for `arch`, headed by ptxas's report when ptxas is found.
#[cfg(any(feature = "ptx", feature = "ptx-static"))]
fn ptx_text(
    kernel: &str,
    launch: &crate::kernels::Launch,
    arch: Option<&str>,
    config: &tilekit_core::Config,
    llvm: bool,
) -> Result<String, CliError> {
    use tilekit_ptx::Arch;
    let arch = match arch {
        None => Arch::Sm90,
        Some(a) => Arch::parse(a).ok_or_else(|| CliError::Usage(format!("unknown --arch `{a}`; known: sm_80, sm_90, sm_90a")))?,
    };
    let target = match arch {
        Arch::Sm80 => tilekit_core::gpu::Target::cuda_sm80(),
        Arch::Sm90 => tilekit_core::gpu::Target::cuda_sm90(),
        Arch::Sm90a => tilekit_core::gpu::Target::cuda_sm90a(),
    };
    // Specialized on this launch's arguments, as a device compiles it.
    let options = crate::device::launch_options(&tilekit_core::gpu::lower::LowerOptions::for_config(config), launch);
    let cannot = |e: tilekit_ptx::PtxError| CliError::Usage(format!("kernel `{kernel}` cannot be compiled to PTX for {arch}: {e}"));
    if llvm {
        return tilekit_ptx::llvm_ir(&launch.program, &target, &options, arch).map_err(cannot);
    }
    let mut c = tilekit_ptx::compile(&launch.program, &target, &options, arch).map_err(cannot)?;
    let mut out = String::new();
    match c.kernel.assemble() {
        Ok(r) => {
            let _ = writeln!(out, "// ptxas {r}");
        }
        Err(e) => {
            for line in e.to_string().lines() {
                let _ = writeln!(out, "// ptxas: {line}");
            }
        }
    }
    out.push_str(&c.kernel.ptx);
    Ok(out)
}

#[cfg(not(any(feature = "ptx", feature = "ptx-static")))]
fn ptx_text(_: &str, _: &crate::kernels::Launch, _: Option<&str>, _: &tilekit_core::Config, _: bool) -> Result<String, CliError> {
    Err(CliError::Usage("this tilekit was built without the `ptx` feature (cargo build --features ptx; it needs LLVM 19)".into()))
}

/// The AMDGCN assembly of one launch for `arch`, headed by the linked code object's resource
/// report (or why it could not be linked and read).
#[cfg(any(feature = "amdgcn", feature = "amdgcn-static"))]
fn amdgcn_text(
    kernel: &str,
    launch: &crate::kernels::Launch,
    arch: Option<&str>,
    config: &tilekit_core::Config,
    llvm: bool,
) -> Result<String, CliError> {
    use tilekit_amdgcn::Arch;
    let arch = match arch {
        None => Arch::Gfx942,
        Some(a) => Arch::parse(a).ok_or_else(|| CliError::Usage(format!("unknown --arch `{a}` for --amdgcn; known: gfx90a, gfx942, gfx1100")))?,
    };
    let target = arch.target();
    let options = crate::device::launch_options(&tilekit_core::gpu::lower::LowerOptions::for_config(config), launch);
    let cannot = |e: tilekit_amdgcn::AmdgcnError| CliError::Usage(format!("kernel `{kernel}` cannot be compiled to AMDGCN for {arch}: {e}"));
    if llvm {
        return tilekit_amdgcn::llvm_ir(&launch.program, &target, &options, arch).map_err(cannot);
    }
    let asm = tilekit_amdgcn::assembly(&launch.program, &target, &options, arch).map_err(cannot)?;
    let mut out = String::new();
    match tilekit_amdgcn::compile(&launch.program, &target, &options, arch) {
        Ok(c) => {
            let _ = writeln!(out, "; {}", c.kernel.resources);
        }
        Err(e) => {
            for line in e.to_string().lines() {
                let _ = writeln!(out, "; code object ({}): {line}", tilekit_amdgcn::NOT_RUN);
            }
        }
    }
    out.push_str(&asm);
    Ok(out)
}

#[cfg(not(any(feature = "amdgcn", feature = "amdgcn-static")))]
fn amdgcn_text(_: &str, _: &crate::kernels::Launch, _: Option<&str>, _: &tilekit_core::Config, _: bool) -> Result<String, CliError> {
    Err(CliError::Usage("this tilekit was built without the `amdgcn` feature (cargo build --features amdgcn; it needs LLVM 19 and lld-19)".into()))
}

fn print_ir(args: &IrArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if args.arch.is_some() && !args.ptx && !args.amdgcn {
        return Err(CliError::Usage("--arch needs --ptx or --amdgcn".into()));
    }
    if args.llvm && !args.ptx && !args.amdgcn {
        return Err(CliError::Usage("--llvm needs --ptx or --amdgcn (the backend whose LLVM IR to print)".into()));
    }
    let naga = if args.wgsl {
        Some(tilekit_naga::Language::Wgsl)
    } else if args.msl {
        Some(tilekit_naga::Language::Msl)
    } else if args.hlsl {
        Some(tilekit_naga::Language::Hlsl)
    } else {
        None
    };
    if args.target.is_some() && !args.gpu && !args.spirv && naga.is_none() {
        return Err(CliError::Usage("--target needs --gpu, --spirv, --wgsl, --msl or --hlsl".into()));
    }
    let target = match args.target.as_deref() {
        None => Target::vulkan_baseline(),
        Some(name) => crate::device::target_preset(name)?,
    };
    let (name, problem, config, plan) = match (&args.case, &args.kernel) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
            let test = crate::fuzz::filetest::parse(&text).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
            let (plan, config) = crate::fuzz::run::plan(&test.case);
            (test.case.program.name.clone(), path.display().to_string(), config, plan)
        }
        (None, Some(name)) => {
            let kernel = find_kernel(name)?;
            let problem = resolve_problem(kernel.as_ref(), &args.problem, None)?;
            let config = resolve_config(kernel.as_ref(), &args.problem.configs)?;
            let (config, plan) = match fitting_plan(kernel.as_ref(), &problem, &config, !args.problem.configs.is_empty(), &target) {
                (c, Ok(p)) => (c, p),
                (c, Err(source)) => return Err(plan_error(kernel.as_ref(), &problem, &c, source)),
            };
            (name.clone(), problem.to_string(), config, plan)
        }
        (None, None) => return Err(CliError::Usage("give a kernel or --case FILE.tile".into())),
    };
    let mut text = String::new();
    let count = plan.launches.len();
    for (i, launch) in plan.launches.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        let launch_args: Vec<String> = launch
            .args
            .iter()
            .map(|a| match a {
                LaunchArg::Buffer(b) => plan.buffers.get(*b).map_or_else(|| format!("buffer {b}"), |s| s.name.clone()),
                LaunchArg::Scalar(s) => s.to_string(),
            })
            .collect();
        // `;` starts a comment in the text form, so a single launch's output parses back as is;
        // PTX comments start with `//`, AMDGCN assembly's with `;`.
        let c = if (args.ptx && !args.llvm) || naga.is_some() { "//" } else { ";" };
        let _ = writeln!(text, "{c} {} {} [{}]", &name, problem, config);
        let _ = writeln!(
            text,
            "{c} launch {} of {count}: grid [{}, {}, {}], args ({})",
            i + 1,
            launch.grid[0],
            launch.grid[1],
            launch.grid[2],
            launch_args.join(", ")
        );
        if args.ptx {
            text.push_str(&ptx_text(&name, launch, args.arch.as_deref(), &config, args.llvm)?);
        } else if args.amdgcn {
            text.push_str(&amdgcn_text(&name, launch, args.arch.as_deref(), &config, args.llvm)?);
        } else if let Some(language) = naga {
            if target.isa != tilekit_core::gpu::target::Isa::SpirV {
                return Err(CliError::Usage(format!("--{} needs a Vulkan target; `{}` is not one", language.name().to_lowercase(), target.name)));
            }
            let options = crate::device::launch_options(&tilekit_core::gpu::lower::LowerOptions::for_config(&config), launch);
            // As an adapter with wgpu's SUBGROUP feature runs it.
            let naga_target = tilekit_naga::target_for(&target, true);
            let compiled = tilekit_naga::compile(&launch.program, &naga_target, &options)
                .and_then(|c| c.kernel.text(language).map_err(tilekit_naga::CompileError::from))
                .map_err(|e| CliError::Usage(format!("kernel `{}` cannot be written as {} for {}: {e}", &name, language.name(), naga_target.name)))?;
            text.push_str(&compiled);
        } else if args.spirv {
            if target.isa != tilekit_core::gpu::target::Isa::SpirV {
                return Err(CliError::Usage(format!("--spirv needs a Vulkan target; `{}` is not one", target.name)));
            }
            // Specialized on this launch's arguments, as a device compiles it.
            let options = crate::device::launch_options(&tilekit_core::gpu::lower::LowerOptions::for_config(&config), launch);
            let compiled = tilekit_spirv::compile(&launch.program, &target, &options)
                .map_err(|e| CliError::Usage(format!("kernel `{}` cannot be compiled to SPIR-V for {}: {e}", &name, target.name)))?;
            text.push_str(&tilekit_spirv::disassemble(&compiled.kernel.words));
        } else if args.gpu {
            // Specialized on this launch's arguments, as a device compiles it.
            let options = crate::device::launch_options(&tilekit_core::gpu::lower::LowerOptions::for_config(&config), launch);
            let gpu = tilekit_core::gpu::describe(&launch.program, &target, &options).map_err(|e| CliError::Lower {
                kernel: name.clone(),
                target: target.name.clone(),
                source: Box::new(e),
            })?;
            text.push_str(&gpu);
        } else {
            text.push_str(&program_text(&launch.program, args.locations));
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    out.write_all(text.as_bytes())?;
    Ok(())
}

fn program_text(program: &crate::Program, locations: bool) -> String {
    crate::text::print_with(program, &crate::text::PrintOptions { locations })
}

// ---------------------------------------------------------------------------------------------
// tilekit run

/// One run as `tilekit run --json` prints it.
#[derive(Debug, Serialize)]
pub struct RunRecord {
    pub kernel: String,
    pub problem: String,
    pub dtype: String,
    pub config: String,
    pub device: String,
    pub seed: u64,
    /// Where the configuration came from: `given` (--config), `tuned` (the tuning cache) or
    /// `default`.
    pub config_source: String,
    /// The tuning cache file of a tuned configuration.
    pub cache_file: Option<std::path::PathBuf>,
    /// `pass`, `fail` (an output is outside its tolerance) or `error` (nothing to compare).
    pub status: String,
    pub error: Option<String>,
    pub report: Option<CheckReport>,
}

/// Everything `tilekit run --json` prints.
#[derive(Debug, Serialize)]
pub struct RunSummary {
    pub device: String,
    pub seed: u64,
    pub passed: usize,
    pub failed: usize,
    pub results: Vec<RunRecord>,
}

struct Job {
    kernel: Arc<dyn Kernel>,
    problem: Problem,
    config: Config,
    /// Output buffer names, or why the kernel cannot plan the problem.
    outputs: Result<Vec<String>, String>,
    /// The tuning cache file the configuration came from.
    tuned: Option<std::path::PathBuf>,
}

/// The runs `args` asks for, each planned for `target` (the device's).
fn jobs(args: &RunArgs, target: &Target) -> Result<Vec<Job>, CliError> {
    if args.all {
        for (flag, set) in
            [("--shape", args.problem.shape.is_some()), ("--opt", !args.problem.opts.is_empty()), ("--config", !args.problem.configs.is_empty())]
        {
            if set {
                return Err(CliError::Usage(format!(
                    "{flag} cannot be used with --all: each kernel runs its own problems and default configuration"
                )));
            }
        }
    }
    let selected: Vec<Arc<dyn Kernel>> = if args.all {
        kernels::all().into_iter().map(Arc::from).collect()
    } else {
        let name = args.kernel.as_deref().ok_or_else(|| CliError::Usage("name a kernel or pass --all".into()))?;
        vec![Arc::from(find_kernel(name)?)]
    };
    let dtype = args.problem.dtype.as_deref().map(parse_dtype).transpose()?;

    let mut jobs = Vec::new();
    for kernel in selected {
        let dtypes: Vec<DType> = match dtype {
            // With --all, --dtype selects the kernels that support it.
            Some(d) if args.all && !kernel.dtypes().contains(&d) => continue,
            Some(d) => {
                check_dtype(kernel.as_ref(), d)?;
                vec![d]
            }
            None if args.all_dtypes => kernel.dtypes().to_vec(),
            None => vec![kernel.default_problem().dtype],
        };
        let config = resolve_config(kernel.as_ref(), &args.problem.configs)?;
        for d in dtypes {
            let problems = match args.problems {
                ProblemSet::Default => vec![resolve_problem(kernel.as_ref(), &args.problem, Some(d))?],
                ProblemSet::Tests => kernel.test_problems(d),
            };
            for problem in problems {
                let (config, planned) = fitting_plan(kernel.as_ref(), &problem, &config, !args.problem.configs.is_empty(), target);
                let outputs = match planned {
                    Ok(p) => Ok(output_names(&p)),
                    // One named kernel that cannot plan its problem is bad input, reported before
                    // anything runs; across the library it is one failed result among many.
                    Err(source) if !args.all => return Err(plan_error(kernel.as_ref(), &problem, &config, source)),
                    Err(e) => Err(e.to_string()),
                };
                jobs.push(Job { kernel: kernel.clone(), problem, config: config.clone(), outputs, tuned: None });
            }
        }
    }
    if jobs.is_empty() {
        return Err(CliError::Usage(match &args.problem.dtype {
            Some(d) => format!("no kernel supports dtype {d}"),
            None => "nothing to run".into(),
        }));
    }
    Ok(jobs)
}

fn output_names(plan: &Plan) -> Vec<String> {
    plan.outputs().map(|(_, b)| b.name.clone()).collect()
}

const RUN_HEADERS: [&str; 8] = ["KERNEL", "PROBLEM", "CONFIG", "OUTPUT", "REL ERR", "TOL", "RESULT", "TIME"];

fn run(args: &RunArgs, out: &mut dyn Write) -> Result<i32, CliError> {
    let device = Device::find(&args.device)?;
    let options = RunOptions { check: args.check };
    let mut jobs = jobs(args, &device.plan_target())?;
    // A configuration tuned for the problem on this device replaces the default (never one
    // given with --config).
    let cache = if args.problem.configs.is_empty() && !args.untuned { tilekit::tune::TuneCache::user() } else { None };
    if let Some(cache) = &cache {
        for job in jobs.iter_mut().filter(|j| j.outputs.is_ok()) {
            if let (config, tilekit::tune::Source::Cached(path)) =
                tilekit::tune::tuned_config(job.kernel.as_ref(), &job.problem, &device, Some(cache))
            {
                job.config = config;
                job.tuned = Some(path);
            }
        }
    }

    // Rows are printed as each run finishes (the interpreter can take a while), so the column
    // widths come from what is known before running.
    let mut widths: Vec<usize> = RUN_HEADERS.iter().map(|h| h.len()).collect();
    for j in &jobs {
        widths[0] = widths[0].max(j.kernel.name().len());
        widths[1] = widths[1].max(j.problem.to_string().len());
        widths[2] = widths[2].max(j.config.to_string().len());
        if let Ok(names) = &j.outputs {
            widths[3] = widths[3].max(names.iter().map(String::len).max().unwrap_or(0));
        }
    }
    widths[4] = widths[4].max(9);
    widths[5] = widths[5].max(7);
    widths[6] = widths[6].max(5);
    if !args.json {
        writeln!(out, "device: {device}, seed: {}", args.seed)?;
        for job in jobs.iter().filter(|j| j.tuned.is_some()) {
            let path = job.tuned.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
            writeln!(
                out,
                "{} {}: tuned configuration {} from the tuning cache ({path}; --untuned for the default)",
                job.kernel.name(),
                job.problem,
                job.config
            )?;
        }
        writeln!(out, "{}", row(&RUN_HEADERS.map(String::from), &widths))?;
        out.flush()?;
    }

    let mut records = Vec::with_capacity(jobs.len());
    for job in &jobs {
        let mut record = RunRecord {
            kernel: job.kernel.name().to_string(),
            problem: job.problem.to_string(),
            dtype: job.problem.dtype.to_string(),
            config: job.config.to_string(),
            device: device.name(),
            seed: args.seed,
            config_source: match (&job.tuned, args.problem.configs.is_empty()) {
                (Some(_), _) => "tuned",
                (None, false) => "given",
                (None, true) => "default",
            }
            .into(),
            cache_file: job.tuned.clone(),
            status: "error".into(),
            error: None,
            report: None,
        };
        let result = match &job.outputs {
            Err(e) => Err(e.clone()),
            Ok(_) => {
                check::check_with(job.kernel.as_ref(), &job.problem, &job.config, &device, args.seed, &options).map_err(|e: CheckError| e.to_string())
            }
        };
        match result {
            Ok(report) => {
                record.status = if report.pass() { "pass" } else { "fail" }.into();
                if !args.json {
                    for o in &report.outputs {
                        let cells = [
                            record.kernel.clone(),
                            record.problem.clone(),
                            record.config.clone(),
                            o.name.clone(),
                            format!("{:.2e}", o.rel_err),
                            format!("{:.1e}", o.tolerance),
                            if o.pass { "PASS" } else { "FAIL" }.to_string(),
                            format_seconds(report.elapsed_s),
                        ];
                        writeln!(out, "{}", row(&cells, &widths))?;
                        if o.non_finite > 0 {
                            writeln!(out, "    {} non-finite values where the reference is finite", o.non_finite)?;
                        }
                    }
                }
                record.report = Some(report);
            }
            Err(e) => {
                if !args.json {
                    let cells = [
                        record.kernel.clone(),
                        record.problem.clone(),
                        record.config.clone(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                        "ERROR".into(),
                        "-".into(),
                    ];
                    writeln!(out, "{}", row(&cells, &widths))?;
                    writeln!(out, "    error: {e}")?;
                }
                record.error = Some(e);
            }
        }
        out.flush()?;
        records.push(record);
    }

    let passed = records.iter().filter(|r| r.status == "pass").count();
    let failed = records.len() - passed;
    if args.json {
        let summary = RunSummary { device: device.name(), seed: args.seed, passed, failed, results: records };
        writeln!(out, "{}", serde_json::to_string_pretty(&summary)?)?;
    } else {
        writeln!(out, "{passed} passed, {failed} failed")?;
    }
    Ok(if failed == 0 { 0 } else { EXIT_FAIL })
}

/// `12.3 ms`, `840 µs`, `2.41 s`.
pub fn format_seconds(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

// ---------------------------------------------------------------------------------------------
// Tables

fn row(cells: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
        if i + 1 == cells.len() {
            line.push_str(c);
        } else {
            let _ = write!(line, "{c:<w$}  ");
        }
    }
    line.trim_end().to_string()
}

/// Left-aligned columns two spaces apart; the last column is not padded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = String::new();
    s.push_str(&row(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>(), &widths));
    s.push('\n');
    for r in rows {
        s.push_str(&row(r, &widths));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("tilekit").chain(args.iter().copied())).expect("parses")
    }

    fn problem_args(shape: Option<&str>, dtype: Option<&str>) -> ProblemArgs {
        ProblemArgs { shape: shape.map(String::from), dtype: dtype.map(String::from), ..Default::default() }
    }

    #[test]
    fn shapes_parse_in_every_documented_form() {
        assert_eq!(parse_shape("4096x1024").unwrap(), vec![4096, 1024]);
        assert_eq!(parse_shape("2^20").unwrap(), vec![1 << 20]);
        assert_eq!(parse_shape("1M").unwrap(), vec![1 << 20]);
        assert_eq!(parse_shape("3x5x7").unwrap(), vec![3, 5, 7]);
        let e = parse_shape("12xq").unwrap_err().to_string();
        assert!(e.contains("`12xq`") && e.contains("`q`"), "{e}");
        assert!(parse_shape("").is_err());
        assert!(parse_shape("2^99").is_err());
    }

    #[test]
    fn problem_overrides_the_default() {
        let k = find_kernel("vector_add").unwrap();
        let p = resolve_problem(k.as_ref(), &problem_args(Some("1000"), Some("f16")), None).unwrap();
        assert_eq!(p.shape, vec![1000]);
        assert_eq!(p.dtype, DType::F16);
        let p = resolve_problem(k.as_ref(), &problem_args(None, None), None).unwrap();
        assert_eq!(p, k.default_problem());
    }

    #[test]
    fn problem_errors_name_what_is_wrong() {
        let k = find_kernel("vector_add").unwrap();
        let e = resolve_problem(k.as_ref(), &problem_args(Some("4x4"), None), None).unwrap_err().to_string();
        assert!(e.contains("vector_add") && e.contains("4x4"), "{e}");
        let e = resolve_problem(k.as_ref(), &problem_args(None, Some("f99")), None).unwrap_err().to_string();
        assert!(e.contains("f99") && e.contains("bf16"), "{e}");
        let e = resolve_problem(k.as_ref(), &problem_args(None, Some("i8")), None).unwrap_err().to_string();
        assert!(e.contains("does not support dtype i8"), "{e}");
        let a = ProblemArgs { opts: vec!["causal".into()], ..Default::default() };
        let e = resolve_problem(k.as_ref(), &a, None).unwrap_err().to_string();
        assert!(e.contains("KEY=VALUE"), "{e}");
    }

    #[test]
    fn config_overrides_merge_over_the_default() {
        let k = find_kernel("vector_add").unwrap();
        let default = k.configs()[0].clone();
        let c = resolve_config(k.as_ref(), &["BLOCK=256".into()]).unwrap();
        assert_eq!(c.get("BLOCK").unwrap(), 256);
        assert_eq!(c.get("num_warps").unwrap(), default.get("num_warps").unwrap());
        let c = resolve_config(k.as_ref(), &["BLOCK=256".into(), "num_warps=8,BLOCK=64".into()]).unwrap();
        assert_eq!(c.to_string(), "BLOCK=64,num_warps=8");
        let e = resolve_config(k.as_ref(), &["BLOK=256".into()]).unwrap_err().to_string();
        assert!(e.contains("`BLOK`") && e.contains("BLOCK"), "{e}");
        let e = resolve_config(k.as_ref(), &["BLOCK=big".into()]).unwrap_err().to_string();
        assert!(e.contains("big"), "{e}");
    }

    #[test]
    fn invalid_config_values_fail_when_planning() {
        let k = find_kernel("vector_add").unwrap();
        let c = resolve_config(k.as_ref(), &["BLOCK=100".into()]).unwrap();
        let p = k.default_problem();
        let e = plan_error(k.as_ref(), &p, &c, k.plan(&p, &c).unwrap_err()).to_string();
        assert!(e.contains("BLOCK") && e.contains("100"), "{e}");
    }

    #[test]
    fn run_arguments_conflict_sensibly() {
        let tries = |args: &[&str]| Cli::try_parse_from(std::iter::once("tilekit").chain(args.iter().copied()));
        assert!(tries(&["run"]).is_err(), "a kernel or --all is required");
        assert!(tries(&["run", "vector_add", "--all"]).is_err());
        assert!(tries(&["run", "--all", "--all-dtypes", "--dtype", "f32"]).is_err());
        let Command::Run(a) = parse(&["run", "--all", "--shape", "7"]).command else { panic!("run") };
        let e = jobs(&a, &Target::vulkan_baseline()).err().expect("--shape with --all is refused").to_string();
        assert!(e.contains("--shape"), "{e}");
        let Command::Run(a) = parse(&["run", "vector_add", "--config", "BLOCK=64", "--config", "num_warps=2"]).command else { panic!("run") };
        assert_eq!(a.problem.configs.len(), 2);
        assert_eq!(a.device, "interpreter");
    }

    #[test]
    fn all_dtypes_plans_one_job_per_dtype() {
        let Command::Run(a) = parse(&["run", "vector_add", "--all-dtypes", "--shape", "33"]).command else { panic!("run") };
        let jobs = jobs(&a, &Target::vulkan_baseline()).unwrap();
        let k = find_kernel("vector_add").unwrap();
        assert_eq!(jobs.len(), k.dtypes().len());
        for (j, d) in jobs.iter().zip(k.dtypes()) {
            assert_eq!(j.problem.dtype, *d);
            assert_eq!(j.problem.shape, vec![33]);
            assert_eq!(j.outputs.as_ref().unwrap(), &vec!["out".to_string()]);
        }
    }

    #[test]
    fn run_all_plans_each_kernel_once_on_its_default_problem() {
        let Command::Run(a) = parse(&["run", "--all"]).command else { panic!("run") };
        let jobs = jobs(&a, &Target::vulkan_baseline()).unwrap();
        let all = kernels::all();
        assert_eq!(jobs.len(), all.len());
        for (j, k) in jobs.iter().zip(&all) {
            assert_eq!(j.kernel.name(), k.name());
            assert_eq!(j.problem, k.default_problem());
            assert_eq!(j.config, k.configs()[0]);
            assert!(j.outputs.is_ok(), "{}: {:?}", k.name(), j.outputs);
        }
        let Command::Run(a) = parse(&["run", "--all", "--all-dtypes"]).command else { panic!("run") };
        assert_eq!(jobs_count(&a), all.iter().map(|k| k.dtypes().len()).sum::<usize>());
    }

    fn jobs_count(a: &RunArgs) -> usize {
        jobs(a, &Target::vulkan_baseline()).map(|j| j.len()).unwrap_or(0)
    }

    #[test]
    fn tables_align_columns() {
        let t = table(&["A", "LONG HEADER", "C"], &[vec!["xyz".into(), "1".into(), "last".into()]]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "A    LONG HEADER  C");
        assert_eq!(lines[1], "xyz  1            last");
    }

    #[test]
    fn seconds_are_readable() {
        assert_eq!(format_seconds(0.000_25), "250 µs");
        assert_eq!(format_seconds(0.0123), "12.30 ms");
        assert_eq!(format_seconds(2.5), "2.500 s");
    }
}
