//! `tilekit fuzz`: a campaign over `(seed, start..start + count)` on the chosen devices, or the
//! replay of saved cases.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use super::run::{self, FuzzDevice, Outcome};
use super::{filetest, gen, inputs, shrink, Case};
use crate::cli::CliError;
use crate::device::Device;

/// The device groups `--devices` takes.
pub const GROUPS: &str = "interp-vs-emulator (or emulator), vulkan, wgpu, wgpu-naga, cuda, all";

#[derive(Args, Debug)]
pub struct FuzzArgs {
    /// Seed of the campaign: program `i` is generated from (seed, i) alone.
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub seed: u64,
    /// Number of programs.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub count: u64,
    /// Index of the first program.
    #[arg(long, default_value_t = 0, value_name = "I")]
    pub start: u64,
    /// Devices compared with the interpreter, comma separated: interp-vs-emulator (the emulator
    /// on sm_80, sm_90a, lavapipe's warps of 8, gfx942, gfx1100 and the H200's Vulkan target
    /// with cooperative matrices), vulkan and wgpu (every
    /// Vulkan device through each runtime), wgpu-naga (the wgpu adapters through naga modules;
    /// what naga cannot express is refused), cuda (a build with the `ptx` feature), all. A group
    /// with no device here is skipped with the reason.
    #[arg(long, default_value = "interp-vs-emulator", value_delimiter = ',', value_name = "GROUP,...")]
    pub devices: Vec<String>,
    /// Worker threads (each program is independent).
    #[arg(long, default_value_t = 1, value_name = "J")]
    pub jobs: usize,
    /// Write a JSON summary here (atomically): the command line, commit, machine and counts.
    /// While the campaign runs, a partial summary (`finished: false`) is rewritten every minute,
    /// so a campaign stopped by hand keeps what it counted.
    #[arg(long, value_name = "SUMMARY.json")]
    pub out: Option<PathBuf>,
    /// Shrink each unexplained mismatch and save it here as a text-form filetest.
    #[arg(long, value_name = "DIR")]
    pub save_failures: Option<PathBuf>,
    /// Stop starting new programs after this many seconds (the summary says so).
    #[arg(long, value_name = "SECS")]
    pub time_limit: Option<f64>,
    /// Skip, on a GPU device, a program whose largest tile holds more than N elements per thread
    /// there (the tile's elements over num_warps times the device's warp width): lavapipe, with
    /// warps of 8, compiles such programs for minutes each. The programs stay the same as
    /// without the option (a campaign's program i depends on the seed and i alone); each device
    /// counts what it skipped apart, never as agreed.
    #[arg(long, value_name = "N")]
    pub max_per_thread: Option<usize>,
    /// With --save-failures: also shrink and save failures with a known bug's signature.
    #[arg(long, requires = "save_failures")]
    pub save_known: bool,
    /// Runs a shrink may spend on one failure.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub shrink_budget: usize,
    /// Print the programs (as filetests: header and text form) instead of running them.
    #[arg(long, conflicts_with_all = ["replay", "save_failures", "out"])]
    pub print: bool,
    /// Replay saved cases (tests/fuzz/*.tile) instead of generating programs.
    #[arg(long, num_args = 1.., value_name = "FILE.tile", conflicts_with_all = ["count", "start", "save_failures"])]
    pub replay: Vec<PathBuf>,
}

/// Device groups asked for with no device here: (group, why).
pub type Skipped = Vec<(String, String)>;

/// Device groups resolved: the devices, and the groups skipped with the reason.
pub fn resolve_devices(groups: &[String]) -> Result<(Vec<FuzzDevice>, Skipped), CliError> {
    let mut out: Vec<FuzzDevice> = Vec::new();
    let mut skipped = Vec::new();
    let mut gpus: Option<Vec<Device>> = None;
    let add = |d: FuzzDevice, out: &mut Vec<FuzzDevice>| {
        if !out.iter().any(|o| o.device == d.device) {
            out.push(d);
        }
    };
    let mut names: Vec<&str> = Vec::new();
    for g in groups {
        match g.trim() {
            "all" => names.extend(["emulator", "vulkan", "wgpu", "wgpu-naga", "cuda"]),
            "" => return Err(CliError::Fuzz(format!("an empty device group in --devices; groups: {GROUPS}"))),
            other => names.push(other),
        }
    }
    for name in names {
        match name {
            "interp-vs-emulator" | "emulator" => {
                for t in run::emulator_targets() {
                    add(FuzzDevice::new(Device::Emulator(t)), &mut out);
                }
            }
            "vulkan" | "wgpu" | "wgpu-naga" | "cuda" => {
                let all = gpus.get_or_insert_with(Device::every_gpu);
                let found: Vec<Device> = all.iter().filter(|d| d.name().starts_with(&format!("{name}:"))).cloned().collect();
                if found.is_empty() {
                    let why = match Device::find(name) {
                        Err(e) => e.to_string(),
                        Ok(_) => format!("no {name} device"),
                    };
                    skipped.push((name.to_string(), why));
                }
                for d in found {
                    add(FuzzDevice::new(d), &mut out);
                }
            }
            other => return Err(CliError::Fuzz(format!("unknown device group `{other}`; groups: {GROUPS}"))),
        }
    }
    Ok((out, skipped))
}

/// Counts for one device.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceSummary {
    pub device: String,
    pub agreed: u64,
    /// Explained differences by kind.
    pub explained: BTreeMap<String, u64>,
    pub unexplained: u64,
    /// Refusals by kind (the device cannot compile the program): never counted as a pass.
    pub refused: BTreeMap<String, u64>,
    /// Failures with the signature of a known bug (an expect-fail filetest records each), by bug.
    pub known_bugs: BTreeMap<String, u64>,
    /// Programs not run here because a tile exceeded --max-per-thread on this device.
    pub over_budget: u64,
    /// The first unexplained mismatches (index, what).
    pub mismatches: Vec<(u64, String)>,
    /// The first refusals (index, the device's error), so that one can be looked at.
    pub refusals: Vec<(u64, String)>,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub command: Vec<String>,
    pub commit: String,
    pub machine: String,
    pub seed: u64,
    pub start: u64,
    pub requested: u64,
    pub programs_run: u64,
    pub seconds: f64,
    pub programs_per_second: f64,
    /// Whether --time-limit stopped the campaign before `requested` programs.
    pub stopped_by_time_limit: bool,
    /// False in the partial summaries written while the campaign runs.
    pub finished: bool,
    /// Programs started and not yet reported when this summary was written (a partial summary
    /// only: these may be the ones that never finish).
    pub in_flight: Vec<u64>,
    pub devices: Vec<DeviceSummary>,
    /// Device groups asked for with no device here, and why.
    pub skipped: Vec<(String, String)>,
    /// Draws the verifier rejected after every retry (generator bugs): (index, error).
    pub generator_errors: Vec<(u64, String)>,
    /// Programs the interpreter faulted on (generator bugs): (index, error).
    pub reference_errors: Vec<(u64, String)>,
    /// Files the shrunk failures were saved to.
    pub saved: Vec<String>,
}

impl Summary {
    fn set_time(&mut self, seconds: f64) {
        self.seconds = seconds;
        self.programs_per_second = self.programs_run as f64 / seconds.max(1e-9);
    }

    pub fn unexplained(&self) -> u64 {
        self.devices.iter().map(|d| d.unexplained).sum::<u64>() + self.generator_errors.len() as u64 + self.reference_errors.len() as u64
    }
}

enum Report {
    Started(u64),
    Done(u64, Vec<Outcome>, Vec<String>),
    GenError(u64, String),
    RefError(u64, String),
}

const MAX_LISTED: usize = 50;

/// How often a campaign with `--out` rewrites its partial summary.
const PARTIAL_EVERY: Duration = Duration::from_secs(60);

/// Writes a summary atomically (a reader sees the previous one or this one, never a torn file).
fn write_summary(path: &Path, summary: &Summary) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(summary)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::Fuzz(format!("cannot create {}: {e}", dir.display())))?;
    }
    crate::bench::cmd::write_atomically(path, &(text + "\n")).map_err(|e| CliError::Fuzz(format!("cannot write {}: {e}", path.display())))
}

/// Runs `tilekit fuzz`.
pub fn fuzz(args: &FuzzArgs, out: &mut dyn Write) -> Result<i32, CliError> {
    if args.jobs == 0 {
        return Err(CliError::Fuzz("--jobs must be at least 1".into()));
    }
    if args.time_limit.is_some_and(|t| t.is_nan() || t <= 0.0 || t.is_infinite()) {
        return Err(CliError::Fuzz("--time-limit must be a positive number of seconds".into()));
    }
    if args.max_per_thread == Some(0) {
        return Err(CliError::Fuzz("--max-per-thread must be at least 1 (0 would skip every program on every GPU)".into()));
    }
    let (devices, skipped) = resolve_devices(&args.devices)?;
    for (g, why) in &skipped {
        writeln!(out, "skipped {g}: {why}")?;
    }
    if !args.replay.is_empty() {
        return replay(&args.replay, &devices, out);
    }
    if args.count == 0 {
        return Err(CliError::Fuzz("--count must be at least 1".into()));
    }
    let end = args.start.checked_add(args.count).ok_or_else(|| CliError::Fuzz("--start + --count overflows".into()))?;
    if args.print {
        for i in args.start..end {
            let case = gen::generate(args.seed, i).map_err(|e| CliError::Fuzz(format!("seed {} index {i}: {e}", args.seed)))?;
            write!(out, "{}", filetest::to_text(&case, &[format!("fuzz: seed {} index {i}", args.seed)]))?;
        }
        return Ok(0);
    }
    if devices.is_empty() {
        return Err(CliError::Fuzz("no device to compare with the interpreter (every group asked for was skipped)".into()));
    }
    if let Some(dir) = &args.save_failures {
        std::fs::create_dir_all(dir).map_err(|e| CliError::Fuzz(format!("cannot create {}: {e}", dir.display())))?;
    }
    writeln!(
        out,
        "fuzz: seed {}, programs {}..{}, {} job(s), against the interpreter: {}",
        args.seed,
        args.start,
        end,
        args.jobs,
        devices.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
    )?;
    // The revision is taken before the run: a checkout may move on while a campaign runs.
    let started = Instant::now();
    let mut summary = Summary {
        command: std::env::args().collect(),
        commit: crate::bench::runner::commit(),
        machine: crate::bench::runner::machine_label(),
        seed: args.seed,
        start: args.start,
        requested: args.count,
        programs_run: 0,
        seconds: 0.0,
        programs_per_second: 0.0,
        stopped_by_time_limit: false,
        finished: false,
        in_flight: Vec::new(),
        devices: devices.iter().map(|d| DeviceSummary { device: d.name(), ..Default::default() }).collect(),
        skipped,
        generator_errors: Vec::new(),
        reference_errors: Vec::new(),
        saved: Vec::new(),
    };
    let next = AtomicU64::new(args.start);
    let stopped = AtomicBool::new(false);
    let mut in_flight = std::collections::BTreeSet::new();
    let mut last_progress = Instant::now();
    let mut last_written = Instant::now();
    std::thread::scope(|s| -> Result<(), CliError> {
        let (tx, rx) = mpsc::channel::<Report>();
        for _ in 0..args.jobs {
            let tx = tx.clone();
            let (next, stopped, devices) = (&next, &stopped, &devices);
            s.spawn(move || loop {
                if args.time_limit.is_some_and(|t| started.elapsed().as_secs_f64() > t) {
                    stopped.store(true, Ordering::Relaxed);
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    return;
                }
                if tx.send(Report::Started(i)).is_err() || tx.send(one(args, i, devices)).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        loop {
            let report = match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(r) => Some(r),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            match report {
                None => {}
                Some(Report::Started(i)) => {
                    in_flight.insert(i);
                }
                Some(Report::Done(i, outcomes, files)) => {
                    in_flight.remove(&i);
                    summary.programs_run += 1;
                    for (sum, o) in summary.devices.iter_mut().zip(outcomes) {
                        match o {
                            Outcome::Agreed => sum.agreed += 1,
                            Outcome::Explained(k) => *sum.explained.entry(k.to_string()).or_default() += 1,
                            Outcome::Refused(k, e) => {
                                *sum.refused.entry(k).or_default() += 1;
                                if sum.refusals.len() < MAX_LISTED {
                                    sum.refusals.push((i, e));
                                }
                            }
                            Outcome::Known(k, _) => *sum.known_bugs.entry(k.to_string()).or_default() += 1,
                            Outcome::OverBudget(_) => sum.over_budget += 1,
                            o @ (Outcome::Mismatch(..) | Outcome::Failed(_)) => {
                                sum.unexplained += 1;
                                writeln!(out, "UNEXPLAINED seed {} index {i} on {}: {}", args.seed, sum.device, o.describe())?;
                                if sum.mismatches.len() < MAX_LISTED {
                                    sum.mismatches.push((i, o.describe()));
                                }
                            }
                        }
                    }
                    for f in files {
                        writeln!(out, "saved {f}")?;
                        summary.saved.push(f);
                    }
                }
                Some(Report::GenError(i, e)) => {
                    in_flight.remove(&i);
                    summary.programs_run += 1;
                    writeln!(out, "GENERATOR ERROR seed {} index {i}: {e}", args.seed)?;
                    summary.generator_errors.push((i, e));
                }
                Some(Report::RefError(i, e)) => {
                    in_flight.remove(&i);
                    summary.programs_run += 1;
                    writeln!(out, "REFERENCE ERROR seed {} index {i}: {e}", args.seed)?;
                    summary.reference_errors.push((i, e));
                }
            }
            if last_progress.elapsed() > Duration::from_secs(10) {
                last_progress = Instant::now();
                let secs = started.elapsed().as_secs_f64();
                let bad: u64 = summary.devices.iter().map(|d| d.unexplained).sum();
                writeln!(out, "  {}/{} programs, {:.1}/s, {bad} unexplained", summary.programs_run, args.count, summary.programs_run as f64 / secs)?;
                out.flush()?;
            }
            if let Some(path) = args.out.as_deref().filter(|_| last_written.elapsed() > PARTIAL_EVERY) {
                last_written = Instant::now();
                summary.in_flight = in_flight.iter().copied().collect();
                summary.stopped_by_time_limit = stopped.load(Ordering::Relaxed);
                summary.set_time(started.elapsed().as_secs_f64());
                write_summary(path, &summary)?;
            }
        }
        Ok(())
    })?;
    summary.finished = true;
    summary.in_flight.clear();
    summary.stopped_by_time_limit = stopped.load(Ordering::Relaxed) && summary.programs_run < args.count;
    summary.set_time(started.elapsed().as_secs_f64());
    print_summary(&summary, out)?;
    if let Some(path) = &args.out {
        write_summary(path, &summary)?;
        writeln!(out, "wrote {}", path.display())?;
    }
    Ok(if summary.unexplained() > 0 { crate::cli::EXIT_FAIL } else { 0 })
}

/// Generates, runs and compares program `i`; shrinks and saves unexplained failures.
fn one(args: &FuzzArgs, i: u64, devices: &[FuzzDevice]) -> Report {
    let case = match guarded(|| gen::generate(args.seed, i)) {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Report::GenError(i, e.to_string()),
        Err(e) => return Report::GenError(i, e),
    };
    let inputs = inputs::fill(&case);
    let want = match guarded(|| run::reference(&case, &inputs)) {
        Ok(Ok(w)) => w,
        Ok(Err(e)) | Err(e) => return Report::RefError(i, e),
    };
    let mut outcomes = Vec::new();
    let mut files = Vec::new();
    // Walked once per case, not once per device.
    let largest = args.max_per_thread.map(|_| run::largest_tile(&case)).unwrap_or(0);
    for dev in devices {
        if let Some(why) = args.max_per_thread.and_then(|max| run::over_budget(&case, largest, dev, max)) {
            outcomes.push(Outcome::OverBudget(why));
            continue;
        }
        let o = guarded(|| run::check(&case, &inputs, &want, dev)).unwrap_or_else(Outcome::Failed);
        let save = o.unexplained() || (args.save_known && matches!(o, Outcome::Known(..)));
        if save {
            if let Some(dir) = &args.save_failures {
                let plain = match &o {
                    Outcome::Known(..) => guarded(|| run::check_plain(&case, &inputs, &want, dev)).unwrap_or_else(Outcome::Failed),
                    o => o.clone(),
                };
                match save_failure(dir, args.seed, i, &case, dev, &plain, args.shrink_budget) {
                    Ok(f) => files.push(f),
                    Err(e) => files.push(format!("(not saved: {e})")),
                }
            }
        }
        outcomes.push(o);
    }
    Report::Done(i, outcomes, files)
}

/// Runs `f`, turning a panic into an error message (a panic is a bug in tilekit that the
/// campaign reports rather than dying of).
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default();
        format!("panic: {msg}")
    })
}

/// The device kind a file name and an `expect-fail` line use: `vulkan`, `wgpu`, `emulator`, ...
fn device_kind(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

fn save_failure(dir: &Path, seed: u64, i: u64, case: &Case, dev: &FuzzDevice, failure: &Outcome, budget: usize) -> Result<String, String> {
    let (small, outcome) = guarded(|| shrink::shrink(case, dev, failure, budget))?;
    let kind = device_kind(&dev.name()).to_string();
    let path = dir.join(format!("seed{seed}-{i}-{kind}.tile"));
    let comments = vec![
        format!("fuzz: seed {seed} index {i} (shrunk from {} to {} instructions)", case.program.num_insts(), small.program.num_insts()),
        format!("found on: {}", dev.name()),
        format!("outcome: {}", outcome.describe()),
    ];
    std::fs::write(&path, filetest::to_text(&small, &comments)).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path.display().to_string())
}

fn print_summary(s: &Summary, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "\n{} program(s) in {:.1} s ({:.1}/s){}",
        s.programs_run,
        s.seconds,
        s.programs_per_second,
        if s.stopped_by_time_limit { ", stopped by --time-limit" } else { "" }
    )?;
    // The column only where something was skipped, so that other campaigns print as before.
    let budgeted = s.devices.iter().any(|d| d.over_budget > 0);
    let rows: Vec<Vec<String>> = s
        .devices
        .iter()
        .map(|d| {
            let kinds = |m: &BTreeMap<String, u64>| {
                if m.is_empty() {
                    "0".to_string()
                } else {
                    m.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")
                }
            };
            let mut row =
                vec![d.device.clone(), d.agreed.to_string(), kinds(&d.explained), d.unexplained.to_string(), kinds(&d.refused), kinds(&d.known_bugs)];
            if budgeted {
                row.push(d.over_budget.to_string());
            }
            row
        })
        .collect();
    let mut header = vec!["device", "agreed", "explained", "unexplained", "refused", "known bugs"];
    if budgeted {
        header.push("over budget");
    }
    write!(out, "{}", crate::cli::table(&header, &rows))?;
    for d in &s.devices {
        for (i, what) in &d.mismatches {
            writeln!(out, "  {} seed {} index {i}: {what}", d.device, s.seed)?;
        }
    }
    if !s.generator_errors.is_empty() || !s.reference_errors.is_empty() {
        writeln!(out, "{} generator error(s), {} reference error(s)", s.generator_errors.len(), s.reference_errors.len())?;
    }
    Ok(())
}

/// `tilekit fuzz --replay`: each file on each device; an `expect-fail` device must still fail,
/// every other must agree (or differ in an explained way, or refuse).
fn replay(files: &[PathBuf], devices: &[FuzzDevice], out: &mut dyn Write) -> Result<i32, CliError> {
    let mut bad = 0;
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| CliError::Fuzz(format!("cannot read {}: {e}", f.display())))?;
        let t = filetest::parse(&text).map_err(|e| CliError::Fuzz(format!("{}: {e}", f.display())))?;
        let results = replay_one(&t, devices);
        for (dev, outcome, verdict) in results {
            writeln!(out, "{}: {dev}: {} -- {}", f.display(), outcome.describe(), verdict.describe())?;
            if !verdict.ok() {
                bad += 1;
            }
        }
    }
    writeln!(out, "{} replay failure(s)", bad)?;
    Ok(if bad > 0 { crate::cli::EXIT_FAIL } else { 0 })
}

/// How a replayed outcome stands against the file's expectations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Expected to fail here and still does.
    StillFails(String),
    /// Expected to fail here but agrees: the bug may be fixed; remove the `expect-fail` line.
    NowPasses(String),
    /// Fails unexpectedly.
    Unexpected,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        matches!(self, Verdict::Ok | Verdict::StillFails(_))
    }
    pub fn describe(&self) -> String {
        match self {
            Verdict::Ok => "ok".into(),
            Verdict::StillFails(r) => format!("expected failure ({r})"),
            Verdict::NowPasses(r) => format!("EXPECTED TO FAIL BUT PASSED: remove the expect-fail line ({r})"),
            Verdict::Unexpected => "UNEXPECTED FAILURE".into(),
        }
    }
}

/// Runs a saved case on every device: (device, outcome, verdict).
pub fn replay_one(t: &filetest::FileTest, devices: &[FuzzDevice]) -> Vec<(String, Outcome, Verdict)> {
    let inputs = inputs::fill(&t.case);
    let want = match guarded(|| run::reference(&t.case, &inputs)) {
        Ok(Ok(w)) => w,
        Ok(Err(e)) | Err(e) => return vec![("interpreter".into(), Outcome::Failed(e), Verdict::Unexpected)],
    };
    devices
        .iter()
        .map(|dev| {
            let o = guarded(|| run::check_plain(&t.case, &inputs, &want, dev)).unwrap_or_else(Outcome::Failed);
            let verdict = match (t.expected_failure(&dev.name()), o.unexplained()) {
                (Some(r), true) => Verdict::StillFails(r.to_string()),
                (Some(r), false) if matches!(o, Outcome::Refused(..)) => Verdict::StillFails(format!("refused here; {r}")),
                (Some(r), false) => Verdict::NowPasses(r.to_string()),
                (None, true) => Verdict::Unexpected,
                (None, false) => Verdict::Ok,
            };
            (dev.name(), o, verdict)
        })
        .collect()
}
