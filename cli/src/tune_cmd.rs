//! `tilekit tune`: the library's autotuner ([`tilekit::tune`]) on one kernel, problem and
//! device, with a progress bar, a table of every candidate and the cache entry it wrote.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::bench::runner::{fmt_time, Bars, Progress};
use crate::cli::{check_dtype, find_kernel, parse_dtype, resolve_problem, CliError, ProblemArgs};
use crate::device::Device;
use crate::tune::{self, Outcome, Strategy, TuneCache, TuneEvent, TuneOptions};

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Kernel name, as `tilekit kernels` lists it (not with --clear).
    #[arg(required_unless_present = "clear")]
    pub kernel: Option<String>,
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Device to tune on (as `tilekit run --device` takes it).
    #[arg(long, default_value = "interpreter", value_name = "DEVICE")]
    pub device: String,
    /// Time only the candidates the cost model ranks first (a fifth, and those it cannot tell
    /// apart from the first), instead of every candidate.
    #[arg(long)]
    pub model: bool,
    /// Tune even when the cache holds the key.
    #[arg(long)]
    pub retune: bool,
    /// The cache folder (default: $TILEKIT_CACHE_DIR/tune, else $XDG_CACHE_HOME/tilekit/tune,
    /// else ~/.cache/tilekit/tune).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Remove every entry of the cache and exit.
    #[arg(long, conflicts_with_all = ["kernel", "retune", "model"])]
    pub clear: bool,
    /// Untimed runs before each candidate's timed ones.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// At least this many timed runs per candidate...
    #[arg(long, default_value_t = 10)]
    pub min_runs: usize,
    /// ...and at least this much device time (milliseconds)...
    #[arg(long, default_value_t = 50.0)]
    pub min_time_ms: f64,
    /// ...but at most this many runs.
    #[arg(long, default_value_t = 500)]
    pub max_runs: usize,
    /// MiB overwritten on a GPU before each timed run (0: none).
    #[arg(long, default_value_t = 256)]
    pub flush_mib: u64,
    /// Seed of the random inputs every candidate is checked on.
    #[arg(long, default_value_t = 0xB3AC)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct CandidateJson {
    config: String,
    /// `timed`, `pruned`, `wrong`, `failed` or `skipped` (by the model).
    outcome: &'static str,
    median_s: Option<f64>,
    runs: Option<usize>,
    /// The model's estimate of a skipped candidate, seconds.
    estimate_s: Option<f64>,
    reason: Option<String>,
}

#[derive(Serialize)]
struct TuneJson {
    kernel: String,
    problem: String,
    device: String,
    key: tune::TuneKey,
    config: String,
    median_s: f64,
    from_cache: bool,
    strategy: &'static str,
    timed: usize,
    candidates: Vec<CandidateJson>,
    cache_file: Option<PathBuf>,
}

fn describe(o: &Outcome) -> (&'static str, Option<f64>, Option<usize>, Option<f64>, Option<String>) {
    match o {
        Outcome::Timed { median_s, runs } => ("timed", Some(*median_s), Some(*runs), None, None),
        Outcome::Pruned(r) => ("pruned", None, None, None, Some(r.clone())),
        Outcome::Wrong(r) => ("wrong", None, None, None, Some(r.clone())),
        Outcome::Failed(r) => ("failed", None, None, None, Some(r.clone())),
        Outcome::Skipped(Ok(e)) => ("skipped", None, None, Some(*e), None),
        Outcome::Skipped(Err(r)) => ("skipped", None, None, None, Some(r.clone())),
    }
}

pub fn tune(args: &TuneArgs, out: &mut dyn Write) -> Result<i32, CliError> {
    let cache = match &args.cache_dir {
        Some(d) => TuneCache::at(d),
        None => TuneCache::user().ok_or_else(|| CliError::Usage("no cache folder: set TILEKIT_CACHE_DIR or HOME, or pass --cache-dir".into()))?,
    };
    if args.clear {
        let n = cache.clear().map_err(|e| CliError::Usage(e.to_string()))?;
        writeln!(out, "removed {n} entries from {}", cache.dir().display())?;
        return Ok(0);
    }
    let name = args.kernel.as_deref().ok_or_else(|| CliError::Usage("name a kernel to tune".into()))?;
    let kernel = find_kernel(name)?;
    if !args.problem.configs.is_empty() {
        return Err(CliError::Usage("--config does not apply: the tuner tries every configuration of the kernel".into()));
    }
    let dtype = args.problem.dtype.as_deref().map(parse_dtype).transpose()?;
    if let Some(d) = dtype {
        check_dtype(kernel.as_ref(), d)?;
    }
    let problem = resolve_problem(kernel.as_ref(), &args.problem, dtype)?;
    let device = Device::find(&args.device)?;
    let options = TuneOptions {
        warmup: args.warmup,
        min_runs: args.min_runs.max(1),
        min_time_s: args.min_time_ms.max(0.0) / 1e3,
        max_runs: args.max_runs.max(args.min_runs).max(1),
        flush_bytes: args.flush_mib << 20,
        seed: args.seed,
        retune: args.retune,
        strategy: if args.model { Strategy::Model } else { Strategy::Exhaustive },
    };
    let mut bars = Bars::new();
    let mut progress = |e: TuneEvent<'_>| match e {
        TuneEvent::Begin { candidates, .. } => bars.start(candidates as u64),
        TuneEvent::Done { candidate, .. } => {
            let (what, median, ..) = describe(&candidate.outcome);
            bars.step(&format!("{} {what}{}", candidate.config, median.map(|m| format!(" {}", fmt_time(m))).unwrap_or_default()));
        }
    };
    let tuned = tune::tune(kernel.as_ref(), &problem, &device, Some(&cache), &options, &mut progress);
    bars.finish();
    let tuned = tuned.map_err(|e| CliError::Usage(e.to_string()))?;
    let strategy = match (tuned.from_cache, options.strategy) {
        (true, _) => "cache",
        (false, Strategy::Exhaustive) => "exhaustive",
        (false, Strategy::Model) => "model",
    };
    if args.json {
        let report = TuneJson {
            kernel: kernel.name().to_string(),
            problem: problem.to_string(),
            device: device.name(),
            key: tuned.key.clone(),
            config: tuned.config.to_string(),
            median_s: tuned.median_s,
            from_cache: tuned.from_cache,
            strategy,
            timed: tuned.timed(),
            candidates: tuned
                .candidates
                .iter()
                .map(|c| {
                    let (outcome, median_s, runs, estimate_s, reason) = describe(&c.outcome);
                    CandidateJson { config: c.config.to_string(), outcome, median_s, runs, estimate_s, reason }
                })
                .collect(),
            cache_file: tuned.stored.clone(),
        };
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
        return Ok(0);
    }
    writeln!(out, "{} {problem} on {device}", kernel.name())?;
    if tuned.from_cache {
        writeln!(
            out,
            "from the tuning cache (--retune to time again): {}",
            tuned.stored.as_ref().map(|p| p.display().to_string()).unwrap_or_default()
        )?;
    } else {
        let width = tuned.candidates.iter().map(|c| c.config.to_string().len()).max().unwrap_or(6).max(6);
        for c in &tuned.candidates {
            let (what, median, runs, estimate, reason) = describe(&c.outcome);
            let detail = match (median, runs, estimate, reason) {
                (Some(m), Some(r), _, _) => format!("{} (median of {r})", fmt_time(m)),
                (_, _, Some(e), _) => format!("model estimate {}", fmt_time(e)),
                (_, _, _, Some(r)) => r,
                _ => String::new(),
            };
            let mark = if c.config == tuned.config { "*" } else { " " };
            writeln!(out, "{mark} {:<width$}  {what:<8} {detail}", c.config.to_string())?;
        }
        writeln!(out, "timed {} of {} candidates ({strategy})", tuned.timed(), tuned.candidates.len())?;
        if let Some(p) = &tuned.stored {
            writeln!(out, "stored: {}", p.display())?;
        }
    }
    writeln!(out, "best: {} at {}", tuned.config, fmt_time(tuned.median_s))?;
    Ok(0)
}
