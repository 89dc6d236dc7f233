//! `tilekit report`: merged results rendered as Markdown, a self-contained HTML page with SVG
//! charts (plotters), and a CSV in the column layout of Intel's p3-analysis-library.
//!
//! Two efficiencies per timed entry:
//! - *application efficiency*: the best median time of any implementation of the same problem
//!   on the same hardware (tilekit through Vulkan or wgpu, any configuration, the WGSL
//!   baseline, a vendor library) divided by this entry's median;
//! - *architectural efficiency*: achieved against attainable on the roofline of the device's
//!   measured ceilings (its copy bandwidth; its matrix rate where measured).
//!
//! Two configuration policies: *tuned* (the best of the kernel's configurations on each
//! platform) and *same configuration everywhere* (the kernel's default configuration).
//! The performance-portability metric is computed per (kernel, problem) and per kernel over
//! the problems every platform of the set attempted: a platform where the kernel failed or gave
//! a wrong answer counts as unsupported (PP 0); problems skipped by design (size caps for CPU
//! devices) are left out of the per-kernel figure and listed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use super::pp::{self, CascadeStep};
use super::schema::{Backend, Derived, Entry, Platform, Results, Status, MEMORY_BOUND_INTENSITY};

#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    /// Platform ids or prefixes of the PP platform set (empty: every platform that ran, the
    /// emulator excepted).
    pub platforms: Vec<String>,
    pub set_name: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("no platform matches `{name}` in the results; platforms: {available}")]
    UnknownPlatform { name: String, available: String },
    #[error("the results hold no entries")]
    Empty,
    #[error("drawing chart `{chart}`: {message}")]
    Chart { chart: String, message: String },
}

/// The rendered report.
pub struct Rendered {
    pub markdown: String,
    pub html: String,
    pub csv: String,
    /// The merged results, as JSON.
    pub merged: String,
    /// (file name under `charts/`, SVG text).
    pub charts: Vec<(String, String)>,
}

impl Rendered {
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir.join("charts"))?;
        std::fs::write(dir.join("report.md"), &self.markdown)?;
        std::fs::write(dir.join("index.html"), &self.html)?;
        std::fs::write(dir.join("p3.csv"), &self.csv)?;
        std::fs::write(dir.join("results.json"), &self.merged)?;
        for (name, svg) in &self.charts {
            std::fs::write(dir.join("charts").join(name), svg)?;
        }
        Ok(())
    }
}

/// A block of the report, rendered to both Markdown and HTML.
enum Block {
    Heading(u8, String),
    Para(String),
    Table(Vec<String>, Vec<Vec<String>>),
    Chart { file: String, title: String },
    List(Vec<String>),
}

/// An efficiency as the metric sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Eff {
    Value(f64),
    /// Failed, wrong, or not timed for a reason other than a size cap: counts as 0.
    Unsupported,
    /// Not run by design (size cap, reference too costly): left out.
    Skipped,
    /// Timed, but the ceiling this efficiency needs was not measured.
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// The fastest configuration timed: exhaustively tuned.
    Tuned,
    /// The kernel's default: the same configuration everywhere.
    Same,
    /// The fastest of the configurations the cost model would have had timed
    /// (`tilekit::tune::model`): tuned by the model.
    Model,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    App,
    Arch,
}

/// Everything the report is computed from.
struct View<'a> {
    r: &'a Results,
    set: Vec<&'a Platform>,
    set_name: String,
    kernels: Vec<String>,
    problems: BTreeMap<String, Vec<String>>,
}

impl<'a> View<'a> {
    fn entries(&self, kernel: &str, problem: &str, platform: &str) -> impl Iterator<Item = &'a Entry> + 'a {
        let (k, p, pl) = (kernel.to_string(), problem.to_string(), platform.to_string());
        self.r.entries.iter().filter(move |e| e.kernel == k && e.problem_text == p && e.platform == pl)
    }

    /// The tilekit entry a policy picks on a platform, and whether the platform attempted the
    /// problem at all.
    fn pick(&self, kernel: &str, problem: &str, platform: &str, policy: Policy) -> (Option<&'a Entry>, bool, bool) {
        let tk: Vec<&Entry> = self.entries(kernel, problem, platform).filter(|e| e.implementation == "tilekit").collect();
        let attempted = tk.iter().any(|e| e.status != Status::Skipped);
        let skipped = !tk.is_empty() && tk.iter().all(|e| e.status == Status::Skipped);
        let chosen = match policy {
            Policy::Tuned => tk.iter().copied().filter(|e| e.median().is_some()).min_by(|a, b| a.median().unwrap().total_cmp(&b.median().unwrap())),
            Policy::Same => tk.iter().copied().find(|e| e.default_config && e.median().is_some()),
            Policy::Model => {
                let timed: Vec<&Entry> = tk.iter().copied().filter(|e| e.median().is_some()).collect();
                let platform = self.r.platforms.iter().find(|p| p.id == platform);
                model_picks(&timed, platform).into_iter().map(|i| timed[i]).min_by(|a, b| a.median().unwrap().total_cmp(&b.median().unwrap()))
            }
        };
        (chosen, attempted, skipped)
    }

    fn eff(&self, kernel: &str, problem: &str, platform: &str, policy: Policy, kind: Kind) -> Eff {
        let (chosen, attempted, skipped) = self.pick(kernel, problem, platform, policy);
        match chosen {
            Some(e) => {
                let d = e.derived.as_ref();
                let v = match kind {
                    Kind::App => d.and_then(|d| d.efficiency_best),
                    Kind::Arch => arch_eff(d),
                };
                v.map_or(Eff::Unknown, Eff::Value)
            }
            None if skipped || !attempted && self.entries(kernel, problem, platform).next().is_none() => Eff::Skipped,
            None => Eff::Unsupported,
        }
    }

    /// PP over the set for one problem; `None` when a platform skipped it or an efficiency is
    /// unknown.
    fn pp_problem(&self, kernel: &str, problem: &str, policy: Policy, kind: Kind) -> Option<f64> {
        let mut effs = Vec::new();
        for p in &self.set {
            match self.eff(kernel, problem, &p.id, policy, kind) {
                Eff::Value(v) => effs.push(Some(v)),
                Eff::Unsupported => effs.push(None),
                Eff::Skipped | Eff::Unknown => return None,
            }
        }
        pp::pp(&effs)
    }

    /// Problems of a kernel that no platform of the set skipped.
    fn common_problems(&self, kernel: &str) -> Vec<String> {
        self.problems[kernel]
            .iter()
            .filter(|pr| self.set.iter().all(|p| self.eff(kernel, pr, &p.id, Policy::Tuned, Kind::App) != Eff::Skipped))
            .cloned()
            .collect()
    }

    /// Each platform's efficiency for a kernel over its common problems (harmonic mean; `None`
    /// = unsupported), or `Err` when one is unknown.
    fn kernel_effs(&self, kernel: &str, policy: Policy, kind: Kind) -> Result<Vec<(String, Option<f64>)>, ()> {
        let problems = self.common_problems(kernel);
        if problems.is_empty() {
            return Err(());
        }
        let mut out = Vec::new();
        for p in &self.set {
            let mut effs = Vec::new();
            for pr in &problems {
                match self.eff(kernel, pr, &p.id, policy, kind) {
                    Eff::Value(v) => effs.push(Some(v)),
                    Eff::Unsupported => effs.push(None),
                    Eff::Unknown | Eff::Skipped => return Err(()),
                }
            }
            out.push((p.id.clone(), pp::over_problems(&effs)));
        }
        Ok(out)
    }
}

fn fmt_time(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// GB/s for memory-bound problems, GFLOP/s for the others.
fn rate(e: &Entry) -> (f64, &'static str) {
    let m = e.median().unwrap_or(f64::NAN);
    if (e.flops as f64) < MEMORY_BOUND_INTENSITY * e.bytes as f64 {
        (e.bytes as f64 / m / 1e9, "GB/s")
    } else {
        (e.flops as f64 / m / 1e9, "GFLOP/s")
    }
}

/// A rate with three significant figures, in TFLOP/s or TB/s from 1000 G up.
pub fn fmt_rate(x: f64, unit: &str) -> String {
    let (x, unit) = if x >= 1000.0 { (x / 1000.0, unit.replacen('G', "T", 1)) } else { (x, unit.to_string()) };
    let digits = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else if x >= 1.0 {
        2
    } else {
        3
    };
    format!("{x:.digits$} {unit}")
}

fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{:.0}%", v * 100.0))
}

/// The architectural efficiency, where it means one: an entry faster than its platform's
/// measured ceiling shows that the ceiling was measured low (a CPU busy with other work while
/// the copy ran, say), so it has none; [`above_ceiling`] lists such entries.
fn arch_eff(d: Option<&Derived>) -> Option<f64> {
    d.and_then(|d| d.efficiency_ceiling).filter(|x| *x <= 1.0)
}

fn arch_pct(d: Option<&Derived>) -> String {
    match d.and_then(|d| d.efficiency_ceiling) {
        Some(x) if x > 1.0 => "above its ceiling".into(),
        x => pct(x),
    }
}

/// Timed entries faster than the attainable time under their platform's measured ceilings.
fn above_ceiling<'a>(r: &'a Results) -> impl Iterator<Item = (&'a Entry, f64)> + 'a {
    r.entries.iter().filter_map(|e| {
        let x = e.derived.as_ref()?.efficiency_ceiling?;
        (e.median().is_some() && x > 1.0).then_some((e, x))
    })
}

fn slug(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.trim_matches('-').chars().take(60).collect()
}

/// `YYYY-MM-DD` of a Unix time (civil calendar from days, proleptic Gregorian).
pub fn date(unix: u64) -> String {
    let z = (unix / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn resolve_set<'a>(r: &'a Results, o: &ReportOptions) -> Result<Vec<&'a Platform>, ReportError> {
    if o.platforms.is_empty() {
        return Ok(r.platforms.iter().filter(|p| p.executes && p.backend != Backend::Emulator).collect());
    }
    let mut set = Vec::new();
    for name in &o.platforms {
        let found = r.platforms.iter().find(|p| &p.id == name).or_else(|| r.platforms.iter().find(|p| p.id.starts_with(name.as_str())));
        match found {
            Some(p) if !set.iter().any(|q: &&Platform| q.id == p.id) => set.push(p),
            Some(_) => {}
            None => {
                return Err(ReportError::UnknownPlatform {
                    name: name.clone(),
                    available: r.platforms.iter().map(|p| p.id.clone()).collect::<Vec<_>>().join(", "),
                })
            }
        }
    }
    Ok(set)
}

/// Renders the report.
pub fn render(r: &Results, o: &ReportOptions) -> Result<Rendered, ReportError> {
    if r.entries.is_empty() {
        return Err(ReportError::Empty);
    }
    let set = resolve_set(r, o)?;
    let mut kernels: Vec<String> = Vec::new();
    let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in &r.entries {
        if e.kernel == "copy" {
            continue;
        }
        if !kernels.contains(&e.kernel) {
            kernels.push(e.kernel.clone());
        }
        let ps = problems.entry(e.kernel.clone()).or_default();
        if !ps.contains(&e.problem_text) {
            ps.push(e.problem_text.clone());
        }
    }
    // Problems in order of size, whichever file they came from.
    let sizes: BTreeMap<&str, (u128, usize)> =
        r.entries.iter().map(|e| (e.problem_text.as_str(), (e.problem.shape.iter().map(|&d| d as u128).product(), e.problem.shape.len()))).collect();
    for ps in problems.values_mut() {
        ps.sort_by(|a, b| sizes[a.as_str()].cmp(&sizes[b.as_str()]).then(a.cmp(b)));
    }
    let set_name =
        o.set_name.clone().unwrap_or_else(|| if o.platforms.is_empty() { "every platform measured".into() } else { "the named platforms".into() });
    let v = View { r, set, set_name, kernels, problems };
    let mut blocks = Vec::new();
    let mut charts = Vec::new();

    blocks.push(Block::Heading(1, "tilekit performance report".into()));
    blocks.push(Block::Para(
        "Every time below is the median of device-timestamp samples taken after the answer was checked against an f64 reference \
         on the same device; wrong answers are listed, never timed. Application efficiency: the best time of any implementation \
         of the same problem on the same hardware over this time. Architectural efficiency: achieved over attainable on the \
         roofline of the device's measured copy bandwidth (and matrix rate, where measured). PP: the harmonic mean of the \
         per-platform efficiencies over the platform set, 0 if any platform is unsupported (Pennycook et al. 2016)."
            .into(),
    ));
    runs_section(&v, &mut blocks);
    platforms_section(&v, &mut blocks);
    ceilings_section(&v, &mut blocks);
    pp_section(&v, &mut blocks, &mut charts)?;
    kernels_section(&v, &mut blocks, &mut charts)?;
    roofline_section(&v, &mut blocks, &mut charts)?;
    tuning_section(&v, &mut blocks);
    dot_section(&v, &mut blocks);
    compiled_section(&v, &mut blocks);
    untimed_section(&v, &mut blocks);

    let markdown = to_markdown(&blocks);
    let html = to_html(&blocks, &charts);
    Ok(Rendered { markdown, html, csv: p3_csv(&v), merged: r.to_json(), charts })
}

fn runs_section(v: &View, blocks: &mut Vec<Block>) {
    blocks.push(Block::Heading(2, "Runs".into()));
    let rows =
        v.r.runs
            .iter()
            .map(|run| {
                let p = &run.protocol;
                let l2 = match &p.l2 {
                    super::schema::L2Policy::Flush { bytes } => format!("flush {} MiB before each run", bytes >> 20),
                    super::schema::L2Policy::None => "none (warm caches)".into(),
                };
                let machine = if run.cpu.is_empty() { run.machine.clone() } else { format!("{} ({})", run.machine, run.cpu) };
                vec![
                    run.host.clone(),
                    machine,
                    date(run.started_unix),
                    run.suite.clone(),
                    run.tilekit_commit.chars().take(12).collect(),
                    format!("{} warm-up, ≥{} runs and ≥{} ms, ≤{} runs", p.warmup, p.min_runs, p.min_time_s * 1e3, p.max_runs),
                    l2,
                ]
            })
            .collect();
    blocks.push(Block::Table(["host", "machine", "date", "suite", "commit", "timing", "L2 policy"].map(String::from).to_vec(), rows));
}

fn platforms_section(v: &View, blocks: &mut Vec<Block>) {
    blocks.push(Block::Heading(2, "Platforms".into()));
    let rows =
        v.r.platforms
            .iter()
            .map(|p| {
                vec![
                    p.id.clone(),
                    p.backend.name().into(),
                    p.device_type.clone(),
                    format!("{} {}", p.driver.clone().unwrap_or_default(), p.driver_info.clone().unwrap_or_default()).trim().to_string(),
                    p.api_version.clone().unwrap_or_default(),
                    p.ceilings.copy_gbps.map_or("n/a".into(), |g| format!("{g:.1}")),
                    p.ceilings.matrix_tflops.map_or("n/a".into(), |t| format!("{t:.1}")),
                    if p.executes { p.timer.clone() } else { "compiled, not run".into() },
                    if v.set.iter().any(|q| q.id == p.id) { "yes".into() } else { String::new() },
                ]
            })
            .collect();
    blocks.push(Block::Table(
        ["platform", "backend", "type", "driver", "API", "copy GB/s", "matrix TFLOP/s", "timer", "in PP set"].map(String::from).to_vec(),
        rows,
    ));
}

fn ceilings_section(v: &View, blocks: &mut Vec<Block>) {
    blocks.push(Block::Heading(2, "Ceilings".into()));
    let sources: Vec<String> =
        v.r.platforms
            .iter()
            .filter(|p| p.executes)
            .map(|p| {
                let copy = p.ceilings.copy_source.clone().unwrap_or_else(|| "not measured".into());
                let matrix = p.ceilings.matrix_source.clone().unwrap_or_else(|| "not measured".into());
                format!("`{}`: copy: {copy}; matrix: {matrix}", p.id)
            })
            .collect();
    blocks.push(Block::Para(
        "How the ceilings are taken: each run first times tilekit's copy kernel on every device (the best median over its \
         configurations, by the same protocol as every kernel) for the copy bandwidth, and cuBLAS's matrix multiply on CUDA \
         devices for the matrix rate; platforms of the same hardware on the same machine share the best of their ceilings. \
         A ceiling measured while the machine was busy (a CPU device shared with other work) comes out low. An entry faster \
         than its ceiling allows shows that the ceiling is wrong, not that the kernel beat the hardware: it gets no \
         architectural efficiency (\"above its ceiling\"), is left out of PP arch and of p3.csv's `arch eff`, and is listed \
         below."
            .into(),
    ));
    blocks.push(Block::List(sources));
    let rows: Vec<Vec<String>> = above_ceiling(v.r)
        .map(|(e, x)| {
            let (rate_value, unit) = rate(e);
            vec![
                e.platform.clone(),
                e.kernel.clone(),
                e.problem_text.clone(),
                format!("{} {}", e.implementation, e.config),
                fmt_rate(rate_value, unit),
                format!("{x:.2}x"),
            ]
        })
        .collect();
    if rows.is_empty() {
        blocks.push(Block::Para("No entry is faster than its platform's measured ceilings.".into()));
    } else {
        blocks.push(Block::Para(format!(
            "{} entr{} faster than the measured ceilings allow (flagged: the ceiling of that platform was measured low):",
            rows.len(),
            if rows.len() == 1 { "y is" } else { "ies are" }
        )));
        blocks.push(Block::Table(
            ["platform", "kernel", "problem", "implementation", "achieved", "achieved / attainable"].map(String::from).to_vec(),
            rows,
        ));
    }
}

fn pp_section(v: &View, blocks: &mut Vec<Block>, charts: &mut Vec<(String, String)>) -> Result<(), ReportError> {
    blocks.push(Block::Heading(2, "Performance portability".into()));
    blocks.push(Block::Para(format!(
        "Platform set ({}): {}. Per kernel, each platform's efficiency is the harmonic mean over the problems every platform of \
         the set attempted; problems skipped by design on some platform are left out (listed under \"Not timed\").",
        v.set_name,
        v.set.iter().map(|p| format!("`{}`", p.id)).collect::<Vec<_>>().join(", ")
    )));
    let fmt = |x: Result<Vec<(String, Option<f64>)>, ()>| match x {
        Ok(effs) => {
            let e: Vec<Option<f64>> = effs.iter().map(|x| x.1).collect();
            pp::pp(&e).map_or("n/a".into(), |p| format!("{p:.2}"))
        }
        Err(()) => "n/a".into(),
    };
    let rows = v
        .kernels
        .iter()
        .map(|k| {
            vec![
                k.clone(),
                format!("{} of {}", v.common_problems(k).len(), v.problems[k].len()),
                fmt(v.kernel_effs(k, Policy::Tuned, Kind::App)),
                fmt(v.kernel_effs(k, Policy::Model, Kind::App)),
                fmt(v.kernel_effs(k, Policy::Same, Kind::App)),
                fmt(v.kernel_effs(k, Policy::Tuned, Kind::Arch)),
                fmt(v.kernel_effs(k, Policy::Same, Kind::Arch)),
            ]
        })
        .collect();
    blocks.push(Block::Table(
        ["kernel", "problems", "PP app, tuned", "PP app, model-tuned", "PP app, same config", "PP arch, tuned", "PP arch, same config"]
            .map(String::from)
            .to_vec(),
        rows,
    ));
    for (policy, kind, file, title) in [
        (Policy::Tuned, Kind::App, "cascade-app-tuned.svg", "Cascade: application efficiency, tuned per platform"),
        (Policy::Same, Kind::App, "cascade-app-same.svg", "Cascade: application efficiency, same configuration everywhere"),
        (Policy::Tuned, Kind::Arch, "cascade-arch-tuned.svg", "Cascade: architectural efficiency, tuned per platform"),
    ] {
        let cascades: Vec<(String, Vec<CascadeStep>)> =
            v.kernels.iter().filter_map(|k| v.kernel_effs(k, policy, kind).ok().map(|effs| (k.clone(), pp::cascade(&effs)))).collect();
        if cascades.is_empty() {
            continue;
        }
        let svg = cascade_chart(title, &cascades).map_err(|m| ReportError::Chart { chart: file.into(), message: m })?;
        charts.push((file.into(), svg));
        blocks.push(Block::Chart { file: file.into(), title: title.into() });
        let items = cascades
            .iter()
            .map(|(k, steps)| {
                format!(
                    "{k}: {}",
                    steps
                        .iter()
                        .map(|s| format!("{} ({})", s.platform, s.efficiency.map_or("unsupported".into(), |e| format!("{:.0}%", e * 100.0))))
                        .collect::<Vec<_>>()
                        .join(" → ")
                )
            })
            .collect();
        blocks.push(Block::List(items));
    }
    Ok(())
}

fn kernels_section(v: &View, blocks: &mut Vec<Block>, charts: &mut Vec<(String, String)>) -> Result<(), ReportError> {
    blocks.push(Block::Heading(2, "Kernels".into()));
    let platforms: Vec<&Platform> = v.r.platforms.iter().filter(|p| p.executes).collect();
    for k in &v.kernels {
        blocks.push(Block::Heading(3, k.clone()));
        let mut headers = vec!["problem".to_string(), "implementation".into()];
        headers.extend(platforms.iter().map(|p| p.id.clone()));
        headers.push("PP app (tuned)".into());
        let mut rows = Vec::new();
        let mut series: BTreeMap<String, Vec<(usize, f64)>> = BTreeMap::new();
        let mut unit = "GB/s";
        for (pi, pr) in v.problems[k].iter().enumerate() {
            let mut impls: Vec<String> = vec!["tilekit tuned".into(), "tilekit same config".into()];
            for e in v.r.entries.iter().filter(|e| &e.kernel == k && &e.problem_text == pr && e.implementation != "tilekit") {
                if !impls.contains(&e.implementation) {
                    impls.push(e.implementation.clone());
                }
            }
            for (ii, imp) in impls.iter().enumerate() {
                let mut row = vec![if ii == 0 { pr.clone() } else { String::new() }, imp.clone()];
                for p in &platforms {
                    let entry = match imp.as_str() {
                        "tilekit tuned" => v.pick(k, pr, &p.id, Policy::Tuned).0,
                        "tilekit same config" => v.pick(k, pr, &p.id, Policy::Same).0,
                        other => v.entries(k, pr, &p.id).find(|e| e.implementation == other && e.median().is_some()),
                    };
                    row.push(match entry {
                        Some(e) => {
                            let (x, u) = rate(e);
                            unit = u;
                            if imp != "tilekit same config" {
                                series.entry(format!("{} {}", p.id, if imp == "tilekit tuned" { "tilekit" } else { imp })).or_default().push((pi, x));
                            }
                            let d = e.derived.as_ref();
                            format!(
                                "{} · {} · app {} · arch {}{}{}",
                                fmt_time(e.median().unwrap_or(0.0)),
                                fmt_rate(x, u),
                                pct(d.and_then(|d| d.efficiency_best)),
                                arch_pct(d),
                                d.and_then(|d| d.of_copy_same_bytes).map_or(String::new(), |c| format!(" · copy of its bytes {}", pct(Some(c)))),
                                if imp == "tilekit tuned" { format!(" · [{}]", e.config) } else { String::new() }
                            )
                        }
                        None => {
                            let eff = v.eff(k, pr, &p.id, Policy::Tuned, Kind::App);
                            let any = v
                                .entries(k, pr, &p.id)
                                .any(|e| imp.starts_with("tilekit") && e.implementation == "tilekit" || e.implementation == *imp);
                            if !any {
                                "—".into()
                            } else if eff == Eff::Skipped {
                                "skipped".into()
                            } else {
                                "not timed".into()
                            }
                        }
                    });
                }
                row.push(if ii == 0 {
                    v.pp_problem(k, pr, Policy::Tuned, Kind::App).map_or("n/a".into(), |x| format!("{x:.2}"))
                } else {
                    String::new()
                });
                rows.push(row);
            }
        }
        blocks.push(Block::Table(headers, rows));
        if !series.is_empty() {
            let file = format!("kernel-{}.svg", slug(k));
            let svg = throughput_chart(&format!("{k}: best configuration per platform ({unit})"), &v.problems[k], unit, &series)
                .map_err(|m| ReportError::Chart { chart: file.clone(), message: m })?;
            charts.push((file.clone(), svg));
            blocks.push(Block::Chart { file, title: format!("{k} throughput") });
        }
    }
    Ok(())
}

fn roofline_section(v: &View, blocks: &mut Vec<Block>, charts: &mut Vec<(String, String)>) -> Result<(), ReportError> {
    let mut any = false;
    for p in v.r.platforms.iter().filter(|p| p.executes) {
        let Some(bw) = p.ceilings.copy_gbps else { continue };
        let mut points: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for k in &v.kernels {
            for pr in &v.problems[k] {
                if let (Some(e), _, _) = v.pick(k, pr, &p.id, Policy::Tuned) {
                    if e.flops > 0 && e.bytes > 0 {
                        let m = e.median().unwrap_or(f64::NAN);
                        points.entry(k.clone()).or_default().push((e.flops as f64 / e.bytes as f64, e.flops as f64 / m / 1e9));
                    }
                }
            }
        }
        if points.is_empty() {
            continue;
        }
        if !any {
            blocks.push(Block::Heading(2, "Rooflines".into()));
            blocks.push(Block::Para(
                "Achieved GFLOP/s of the best configuration of each problem against its arithmetic intensity (FLOPs per byte the \
                 problem must move), under the device's measured copy bandwidth (and matrix rate, where measured)."
                    .into(),
            ));
            any = true;
        }
        let file = format!("roofline-{}.svg", slug(&p.id));
        let svg = roofline_chart(&format!("Roofline: {}", p.id), bw, p.ceilings.matrix_tflops, &points)
            .map_err(|m| ReportError::Chart { chart: file.clone(), message: m })?;
        charts.push((file.clone(), svg));
        blocks.push(Block::Chart { file, title: format!("roofline of {}", p.id) });
    }
    Ok(())
}

/// The target a recorded platform's configurations were planned for
/// ([`tilekit_core::gpu::Target::for_platform`]); the baseline GPU's where nothing tells.
fn platform_target(platform: Option<&Platform>) -> tilekit_core::gpu::Target {
    use tilekit_core::gpu::Target;
    platform
        .and_then(|p| Target::for_platform(p.backend.name(), &p.hardware, p.device_type == "cpu", p.vendor_id))
        .unwrap_or_else(Target::vulkan_baseline)
}

/// The indices of `timed` (one problem's timed tilekit entries on one platform) a tuner that
/// follows the cost model would have timed; empty when the model cannot place any of them.
fn model_picks(timed: &[&Entry], platform: Option<&Platform>) -> Vec<usize> {
    use tilekit::tune::model::{self, Machine};
    let Some(first) = timed.first() else { return Vec::new() };
    let Some(kernel) = crate::kernels::find(&first.kernel) else { return Vec::new() };
    let Some(dtype) = crate::DType::from_name(&first.problem.dtype) else { return Vec::new() };
    let mut problem = crate::kernels::Problem::new(&first.problem.shape, dtype);
    for (k, v) in &first.problem.opts {
        problem = problem.with(k, v);
    }
    let machine = match platform {
        Some(p) => {
            Machine::for_platform(&p.hardware, matches!(p.device_type.as_str(), "host" | "cpu"), p.ceilings.copy_gbps, p.ceilings.matrix_tflops)
        }
        None => Machine::generic(64, 32, 1e12),
    };
    let cost = kernel.cost(&problem);
    let target = platform_target(platform);
    let estimates: Vec<Result<model::Estimate, String>> = timed
        .iter()
        .map(|e| {
            let config: crate::Config = e.config.parse().map_err(|err: tilekit_core::ConfigError| err.to_string())?;
            let plan = kernel.plan_on(&problem, &config, &target).map_err(|err| err.to_string())?;
            // Where the backend reported no registers, the lowering's estimate the entry records.
            let estimated = e.lowering.iter().filter_map(|l| l.registers).max().map(model::allocated_from_estimate);
            let resources: Vec<crate::device::KernelResources> = match &e.static_resources {
                Some(s) => vec![crate::device::KernelResources {
                    registers: s.registers.or(estimated),
                    shared_bytes: s.shared_bytes,
                    spill_bytes: s.spills,
                    statistics: Vec::new(),
                }],
                None => estimated.map(|r| vec![crate::device::KernelResources { registers: Some(r), ..Default::default() }]).unwrap_or_default(),
            };
            model::estimate(&machine, &plan, &config, cost, &resources)
        })
        .collect();
    model::timed_by_model(&estimates, tilekit::tune::MODEL_SLACK)
}

/// Per platform and problem timed under several configurations: the default configuration,
/// what the cost model would have chosen (timing only its picks) and the exhaustive best.
fn tuning_section(v: &View, blocks: &mut Vec<Block>) {
    let mut rows = Vec::new();
    let (mut within5, mut groups, mut timed_total, mut all_total) = (0, 0, 0, 0);
    for p in &v.set {
        for k in &v.kernels {
            for pr in &v.problems[k] {
                let timed: Vec<&Entry> = v.entries(k, pr, &p.id).filter(|e| e.implementation == "tilekit" && e.median().is_some()).collect();
                if timed.len() < 2 {
                    continue;
                }
                let picks = model_picks(&timed, Some(p));
                let med = |e: &Entry| e.median().unwrap_or(f64::NAN);
                let best = timed.iter().copied().min_by(|a, b| med(a).total_cmp(&med(b))).expect("two or more");
                let model = picks.iter().map(|&i| timed[i]).min_by(|a, b| med(a).total_cmp(&med(b)));
                let default = timed.iter().copied().find(|e| e.default_config);
                let cell = |e: Option<&Entry>| e.map_or("n/a".to_string(), |e| format!("{} ({})", fmt_time(med(e)), e.config));
                let ratio = model.map(|m| med(m) / med(best));
                groups += 1;
                within5 += usize::from(ratio.is_some_and(|r| r <= 1.05));
                timed_total += picks.len();
                all_total += timed.len();
                rows.push(vec![
                    p.id.clone(),
                    k.clone(),
                    pr.clone(),
                    cell(default),
                    cell(model),
                    cell(Some(best)),
                    ratio.map_or("n/a".into(), |r| format!("{r:.3}")),
                    format!("{} of {}", picks.len(), timed.len()),
                ]);
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    blocks.push(Block::Heading(2, "Tuning: same configuration, model-tuned, exhaustively tuned".into()));
    blocks.push(Block::Para(format!(
        "For every problem timed under several configurations: the kernel's default configuration (the same everywhere), the \
         fastest of those the cost model (`tilekit::tune::model`, from the plan and the static resources) would have had timed, \
         and the fastest of all. The model's choice is within 5 % of the exhaustive best on {within5} of {groups}, timing \
         {timed_total} of {all_total} configurations. `tilekit tune --model` follows the same rule."
    )));
    blocks.push(Block::Table(
        ["platform", "kernel", "problem", "same config", "model-tuned", "exhaustive", "model / best", "model timed"].map(String::from).to_vec(),
        rows,
    ));
}

/// How each timed problem with a `dot` ran at its fastest configuration: on a matrix
/// instruction or the FMA loop, and what `num_stages` pipelined (the results' `lowering`, absent
/// from files written before it was recorded).
fn dot_section(v: &View, blocks: &mut Vec<Block>) {
    let mut fastest: BTreeMap<(String, String, String), &Entry> = BTreeMap::new();
    for e in v.r.entries.iter().filter(|e| e.implementation == "tilekit" && e.lowering.iter().any(|l| !l.dots.is_empty())) {
        let Some(m) = e.median() else { continue };
        let key = (e.platform.clone(), e.kernel.clone(), e.problem_text.clone());
        if fastest.get(&key).and_then(|f| f.median()).map_or(true, |f| m < f) {
            fastest.insert(key, e);
        }
    }
    if fastest.is_empty() {
        return;
    }
    let rows = fastest
        .into_iter()
        .map(|((platform, kernel, problem), e)| {
            let mut dots: Vec<String> = e.lowering.iter().flat_map(|l| l.dots.iter().cloned()).collect();
            dots.dedup();
            let pipelined: u64 = e.lowering.iter().map(|l| l.pipelined_loads).sum();
            vec![platform, kernel, problem, e.config.clone(), dots.join(", "), pipelined.to_string()]
        })
        .collect();
    blocks.push(Block::Heading(2, "How `dot` ran".into()));
    blocks.push(Block::Para(
        "At each problem's fastest configuration: the instruction every `dot` was lowered to on the platform's target (a matrix \
         instruction, or the FMA loop where the target has none tilekit emits), and the loads `num_stages` kept in flight."
            .into(),
    ));
    blocks.push(Block::Table(["platform", "kernel", "problem", "fastest config", "dot", "loads pipelined"].map(String::from).to_vec(), rows));
}

fn compiled_section(v: &View, blocks: &mut Vec<Block>) {
    let rows: Vec<Vec<String>> =
        v.r.entries
            .iter()
            .filter(|e| e.status == Status::CompiledNotRun)
            .map(|e| {
                let s = e.static_resources.as_ref();
                let n = |x: Option<u32>| x.map_or("n/a".into(), |x| x.to_string());
                vec![
                    e.platform.clone(),
                    e.kernel.clone(),
                    e.problem_text.clone(),
                    e.config.clone(),
                    n(s.and_then(|s| s.registers)),
                    n(s.and_then(|s| s.shared_bytes)),
                    n(s.and_then(|s| s.spills)),
                    s.and_then(|s| s.occupancy).map_or("n/a".into(), |o| format!("{o:.1}")),
                    s.and_then(|s| s.note.clone()).unwrap_or_default(),
                ]
            })
            .collect();
    if rows.is_empty() {
        return;
    }
    blocks.push(Block::Heading(2, "Compiled, not run".into()));
    blocks.push(Block::Para("Static resources from the compiler for targets this report has no device for; no times.".into()));
    blocks.push(Block::Table(
        ["platform", "kernel", "problem", "config", "registers", "shared bytes", "spills", "occupancy", "note"].map(String::from).to_vec(),
        rows,
    ));
}

fn untimed_section(v: &View, blocks: &mut Vec<Block>) {
    let rows: Vec<Vec<String>> =
        v.r.entries
            .iter()
            .filter(|e| matches!(e.status, Status::Wrong | Status::Error | Status::Skipped))
            .map(|e| {
                let err = e.check.as_ref().and_then(|c| c.outputs.iter().map(|o| o.rel_err).reduce(f64::max));
                vec![
                    e.platform.clone(),
                    e.kernel.clone(),
                    e.problem_text.clone(),
                    format!("{} {}", e.implementation, e.config),
                    e.status.name().into(),
                    err.map_or(String::new(), |x| format!("{x:.2e}")),
                    e.message.clone().unwrap_or_default().lines().next().unwrap_or("").chars().take(200).collect(),
                ]
            })
            .collect();
    blocks.push(Block::Heading(2, "Not timed".into()));
    if rows.is_empty() {
        blocks.push(Block::Para("Every case was checked and timed.".into()));
        return;
    }
    blocks.push(Block::Table(["platform", "kernel", "problem", "implementation", "status", "max rel err", "why"].map(String::from).to_vec(), rows));
}

// ---- charts ----

fn chart_err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

fn color(i: usize) -> RGBColor {
    // Distinguishable on white, repeating after ten.
    const C: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = C[i % C.len()];
    RGBColor(r, g, b)
}

fn cascade_chart(title: &str, cascades: &[(String, Vec<CascadeStep>)]) -> Result<String, String> {
    let n = cascades.iter().map(|c| c.1.len()).max().unwrap_or(1).max(1);
    let top = cascades.iter().flat_map(|c| c.1.iter().filter_map(|s| s.efficiency)).fold(1.0f64, f64::max) * 1.05;
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (760, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0.5f64..(n as f64 + 0.5), 0f64..top)
            .map_err(chart_err)?;
        c.configure_mesh()
            .x_desc("platforms, most to least efficient (per kernel)")
            .y_desc("efficiency (points) and PP of the first k (lines)")
            .x_labels(n)
            .x_label_formatter(&|x| if (x - x.round()).abs() < 1e-6 { format!("{}", x.round() as i64) } else { String::new() })
            .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
            .draw()
            .map_err(chart_err)?;
        for (i, (k, steps)) in cascades.iter().enumerate() {
            let col = color(i);
            let line: Vec<(f64, f64)> = steps.iter().enumerate().map(|(j, s)| ((j + 1) as f64, s.pp)).collect();
            c.draw_series(LineSeries::new(line, col.stroke_width(2)))
                .map_err(chart_err)?
                .label(k.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2)));
            let pts: Vec<(f64, f64)> = steps.iter().enumerate().map(|(j, s)| ((j + 1) as f64, s.efficiency.unwrap_or(0.0))).collect();
            c.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, col.filled()))).map_err(chart_err)?;
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
    }
    Ok(s)
}

fn throughput_chart(title: &str, problems: &[String], unit: &str, series: &BTreeMap<String, Vec<(usize, f64)>>) -> Result<String, String> {
    let values = series.values().flat_map(|v| v.iter().map(|p| p.1)).filter(|x| *x > 0.0 && x.is_finite());
    let (lo, hi) = values.fold((f64::INFINITY, 0f64), |(a, b), x| (a.min(x), b.max(x)));
    let (lo, hi) = if lo.is_finite() && hi > 0.0 { (lo / 2.0, hi * 2.0) } else { (1e-3, 1.0) };
    let n = problems.len().max(1);
    let labels: Vec<String> = problems.iter().map(|p| p.split(' ').next().unwrap_or(p).to_string()).collect();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (760, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (lo..hi).log_scale())
            .map_err(chart_err)?;
        c.configure_mesh()
            .x_desc("problem")
            .y_desc(unit)
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| format!("{y:.3}"))
            .draw()
            .map_err(chart_err)?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let col = color(i);
            let pts: Vec<(f64, f64)> = pts.iter().filter(|p| p.1 > 0.0).map(|&(x, y)| (x as f64, y)).collect();
            c.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))
                .map_err(chart_err)?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2)));
            c.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, col.filled()))).map_err(chart_err)?;
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
    }
    Ok(s)
}

fn roofline_chart(title: &str, bw_gbps: f64, peak_tflops: Option<f64>, points: &BTreeMap<String, Vec<(f64, f64)>>) -> Result<String, String> {
    let all: Vec<(f64, f64)> = points.values().flatten().copied().filter(|p| p.0 > 0.0 && p.1 > 0.0 && p.1.is_finite()).collect();
    let xmin = all.iter().map(|p| p.0).fold(f64::INFINITY, f64::min).min(0.05) / 2.0;
    let xmax = all.iter().map(|p| p.0).fold(0.0, f64::max).max(10.0) * 2.0;
    let peak = peak_tflops.map(|t| t * 1e3);
    let roof = |x: f64| peak.map_or(bw_gbps * x, |p| (bw_gbps * x).min(p));
    let ymin = all.iter().map(|p| p.1).fold(f64::INFINITY, f64::min).min(roof(xmin)) / 2.0;
    let ymax = all.iter().map(|p| p.1).fold(0.0, f64::max).max(roof(xmax)) * 2.0;
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (760, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d((xmin..xmax).log_scale(), (ymin..ymax).log_scale())
            .map_err(chart_err)?;
        c.configure_mesh()
            .x_desc("arithmetic intensity (FLOP/byte)")
            .y_desc("GFLOP/s")
            .x_label_formatter(&|x| format!("{x:.2}"))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .draw()
            .map_err(chart_err)?;
        let xs: Vec<f64> = (0..=200).map(|i| xmin * (xmax / xmin).powf(i as f64 / 200.0)).collect();
        c.draw_series(LineSeries::new(xs.iter().map(|&x| (x, roof(x))), BLACK.stroke_width(2)))
            .map_err(chart_err)?
            .label(format!("roof: copy {bw_gbps:.1} GB/s{}", peak_tflops.map_or(String::new(), |t| format!(", {t:.1} TFLOP/s"))))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
        for (i, (k, pts)) in points.iter().enumerate() {
            let col = color(i);
            c.draw_series(pts.iter().filter(|p| p.0 > 0.0 && p.1 > 0.0).map(|&p| Circle::new(p, 4, col.filled())))
                .map_err(chart_err)?
                .label(k.as_str())
                .legend(move |(x, y)| Circle::new((x + 9, y), 4, col.filled()));
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
    }
    Ok(s)
}

// ---- output formats ----

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn to_markdown(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            Block::Heading(l, t) => {
                let _ = writeln!(out, "{} {t}\n", "#".repeat(*l as usize));
            }
            Block::Para(t) => {
                let _ = writeln!(out, "{t}\n");
            }
            Block::Table(h, rows) => {
                let _ = writeln!(out, "| {} |", h.iter().map(|c| md_cell(c)).collect::<Vec<_>>().join(" | "));
                let _ = writeln!(out, "|{}|", h.iter().map(|_| "---").collect::<Vec<_>>().join("|"));
                for r in rows {
                    let _ = writeln!(out, "| {} |", r.iter().map(|c| md_cell(c)).collect::<Vec<_>>().join(" | "));
                }
                out.push('\n');
            }
            Block::Chart { file, title } => {
                let _ = writeln!(out, "![{title}](charts/{file})\n");
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(out, "- {}", i.replace('\n', " "));
                }
                out.push('\n');
            }
        }
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Backticks in prose become code spans.
fn inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in esc(s).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

fn to_html(blocks: &[Block], charts: &[(String, String)]) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>tilekit performance report</title>\n<style>\n\
         body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }\n\
         table { border-collapse: collapse; margin: 1em 0; font-size: 0.85em; }\n\
         th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; text-align: left; vertical-align: top; }\n\
         th { background: #f0f0f0; }\n figure { margin: 1em 0; }\n figure svg { max-width: 100%; height: auto; }\n\
         code { background: #f4f4f4; padding: 0 0.2em; }\n</style>\n</head>\n<body>\n",
    );
    for b in blocks {
        match b {
            Block::Heading(l, t) => {
                let _ = writeln!(out, "<h{l}>{}</h{l}>", inline(t));
            }
            Block::Para(t) => {
                let _ = writeln!(out, "<p>{}</p>", inline(t));
            }
            Block::Table(h, rows) => {
                out.push_str("<table>\n<thead><tr>");
                for c in h {
                    let _ = write!(out, "<th>{}</th>", esc(c));
                }
                out.push_str("</tr></thead>\n<tbody>\n");
                for r in rows {
                    out.push_str("<tr>");
                    for c in r {
                        let _ = write!(out, "<td>{}</td>", esc(c));
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</tbody>\n</table>\n");
            }
            Block::Chart { file, title } => {
                let svg = charts.iter().find(|c| &c.0 == file).map(|c| c.1.as_str()).unwrap_or("");
                let _ = writeln!(out, "<figure class=\"chart\" id=\"{}\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>", esc(file), esc(title));
            }
            Block::List(items) => {
                out.push_str("<ul>\n");
                for i in items {
                    let _ = writeln!(out, "<li>{}</li>", inline(i));
                }
                out.push_str("</ul>\n");
            }
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row per (problem, platform, application) in the layout p3-analysis-library reads:
/// `problem`, `platform`, `application`, `fom` (median seconds, lower is better), `date`,
/// `arch eff` and `app eff` (in [0, 1]; `arch eff` empty where the ceiling was not measured or
/// the entry beat it (see [`above_ceiling`]), never clamped; 0 where the
/// application did not run correctly). Applications: `tilekit-tuned`, `tilekit-same-config`,
/// and each baseline. Problems skipped by design are left out, as the library reads a missing
/// row as "did not run" only when the application ran the problem elsewhere.
fn p3_csv(v: &View) -> String {
    let mut out = String::from("problem,platform,application,fom,date,arch eff,app eff\n");
    let dates: BTreeMap<&str, String> = v.r.runs.iter().map(|r| (r.id.as_str(), date(r.started_unix))).collect();
    for k in &v.kernels {
        for pr in &v.problems[k] {
            let problem = format!("{k} {pr}");
            for p in v.r.platforms.iter().filter(|p| p.executes) {
                let mut rows: Vec<(String, Option<&Entry>, bool)> = Vec::new();
                for (app, policy) in [("tilekit-tuned", Policy::Tuned), ("tilekit-same-config", Policy::Same)] {
                    let (e, attempted, _) = v.pick(k, pr, &p.id, policy);
                    rows.push((app.into(), e, attempted));
                }
                let mut baselines: Vec<&Entry> = v.entries(k, pr, &p.id).filter(|e| e.implementation != "tilekit").collect();
                baselines.sort_by(|a, b| a.implementation.cmp(&b.implementation));
                for e in baselines {
                    rows.push((e.implementation.clone(), e.median().map(|_| e), e.status != Status::Skipped));
                }
                for (app, e, attempted) in rows {
                    if !attempted {
                        continue;
                    }
                    let run = e.map(|e| e.run.as_str()).unwrap_or_else(|| v.r.runs.last().map_or("", |r| r.id.as_str()));
                    let date = dates.get(run).cloned().unwrap_or_default();
                    let (fom, arch, app_eff) = match e {
                        Some(e) => {
                            let d = e.derived.as_ref();
                            (
                                format!("{:e}", e.median().unwrap_or(f64::NAN)),
                                arch_eff(d).map_or(String::new(), |x| format!("{x:.6}")),
                                d.and_then(|d| d.efficiency_best).map_or(String::new(), |x| format!("{x:.6}")),
                            )
                        }
                        None => (String::new(), "0".into(), "0".into()),
                    };
                    let _ = writeln!(out, "{},{},{},{fom},{date},{arch},{app_eff}", csv_field(&problem), csv_field(&p.id), csv_field(&app));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_unix_time() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(1_767_225_600), "2026-01-01");
    }

    #[test]
    fn rates_read_well() {
        assert_eq!(fmt_rate(4321.0, "GB/s"), "4.32 TB/s");
        assert_eq!(fmt_rate(123.4, "GFLOP/s"), "123 GFLOP/s");
        assert_eq!(fmt_rate(0.2914, "GB/s"), "0.291 GB/s");
        assert_eq!(fmt_rate(650_000.0, "GFLOP/s"), "650 TFLOP/s");
    }

    #[test]
    fn slugs_and_escapes() {
        assert_eq!(slug("vulkan:NVIDIA H200"), "vulkan-nvidia-h200");
        assert_eq!(slug("wgpu:llvmpipe (LLVM 15.0.7, 256 bits)"), "wgpu-llvmpipe-llvm-15-0-7-256-bits");
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        assert_eq!(inline("set `a<b`"), "set <code>a&lt;b</code>");
        assert_eq!(csv_field("a, b"), "\"a, b\"");
        assert_eq!(csv_field("x\"y"), "\"x\"\"y\"");
    }
}
