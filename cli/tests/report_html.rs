//! The HTML report opens in a browser and its charts render: a small real run (the interpreter,
//! and lavapipe through both runtimes where installed), its report, and headless Chromium
//! screenshots of the page and of every chart, each decoded and checked for drawn pixels.
//! scripts/test.sh installs Debian's `chromium`; without it this test fails, naming it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(o) = Command::new("which").arg(name).output() {
            if o.status.success() {
                return PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
            }
        }
    }
    panic!("headless Chromium is needed for this test: install Debian's `chromium` (scripts/test.sh does)");
}

/// Screenshots `page` at `width` x `height` and returns the fraction of pixels that are not
/// (near) white and the number of distinct colours.
fn screenshot(browser: &Path, page: &Path, out: &Path, width: u32, height: u32) -> (f64, usize) {
    let _ = std::fs::remove_file(out);
    let o = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", out.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(out.exists(), "no screenshot of {}: {}", page.display(), String::from_utf8_lossy(&o.stderr));
    let decoder = png::Decoder::new(std::fs::File::open(out).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let px = &buf[..info.buffer_size()];
    let mut ink = 0usize;
    let mut colours = std::collections::HashSet::new();
    let n = px.len() / channels;
    for p in px.chunks_exact(channels) {
        if p[..3].iter().any(|&c| c < 235) {
            ink += 1;
        }
        colours.insert((p[0] >> 3, p[1] >> 3, p[2] >> 3));
    }
    (ink as f64 / n as f64, colours.len())
}

#[test]
fn report_renders_in_headless_chromium() {
    let browser = chromium();
    let dir = std::env::temp_dir().join(format!("tilekit-report-html-{}", std::process::id()));
    let results = dir.join("r.json");
    let report = dir.join("report");
    let bin = env!("CARGO_BIN_EXE_tilekit");
    let o = Command::new(bin)
        .args(["bench", "--suite", "quick", "--kernel", "vector_add", "--kernel", "softmax"])
        .args(["--min-runs", "5", "--max-runs", "5", "--min-time-ms", "0", "--warmup", "1", "--flush-mib", "8", "-o"])
        .arg(&results)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let o = Command::new(bin).arg("report").arg(&results).arg("-o").arg(&report).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));

    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    let svgs = html.matches("<svg").count();
    assert!(svgs >= 4, "{svgs} charts in the page");
    let (ink, colours) = screenshot(&browser, &report.join("index.html"), &dir.join("page.png"), 1280, 2400);
    assert!(ink > 0.02 && colours > 8, "the page looks blank: {:.3} of pixels drawn, {colours} colours", ink);

    let mut charts: Vec<PathBuf> = std::fs::read_dir(report.join("charts")).unwrap().map(|e| e.unwrap().path()).collect();
    charts.sort();
    assert!(charts.len() >= 4, "{charts:?}");
    for chart in &charts {
        let svg = std::fs::read_to_string(chart).unwrap();
        assert!(svg.matches("<circle").count() >= 1 && svg.matches("<line").count() > 10, "{} is empty", chart.display());
        let (ink, colours) = screenshot(&browser, chart, &dir.join("chart.png"), 800, 460);
        // Axes, grid, labels and at least one coloured series.
        assert!(ink > 0.01 && colours > 4, "{} renders blank: {:.4} drawn, {colours} colours", chart.display(), ink);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
