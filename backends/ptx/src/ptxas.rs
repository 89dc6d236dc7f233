//! Assembling PTX with `ptxas` and reading its resource report: registers, shared memory,
//! stack and spills per entry point. This is the offline check that the PTX is valid for an
//! architecture, and the numbers a launch-configuration choice needs.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::nvptx::Arch;
use crate::toolkit::{self, NotFound};

/// What `ptxas -v` reports for one entry point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasReport {
    pub arch: String,
    pub registers: u32,
    /// Static shared memory, bytes.
    pub shared_bytes: u32,
    pub stack_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    /// The assembled cubin.
    pub cubin: Vec<u8>,
}

impl PtxasReport {
    pub fn spills(&self) -> bool {
        self.spill_store_bytes > 0 || self.spill_load_bytes > 0
    }
}

impl std::fmt::Display for PtxasReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} registers, {} B shared, {} B stack, {} B spill stores, {} B spill loads",
            self.arch, self.registers, self.shared_bytes, self.stack_bytes, self.spill_store_bytes, self.spill_load_bytes
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PtxasError {
    #[error(transparent)]
    NotFound(#[from] NotFound),
    #[error("running {path}: {message}")]
    Run { path: String, message: String },
    #[error("ptxas rejects the PTX of `{entry}` for {arch}:\n{output}")]
    Rejected { entry: String, arch: String, output: String },
    #[error("ptxas printed no resource report for `{entry}`:\n{output}")]
    NoReport { entry: String, output: String },
}

/// Assembles `ptx` for `arch` and returns the report of entry point `entry`.
pub fn assemble(ptx: &str, entry: &str, arch: Arch) -> Result<PtxasReport, PtxasError> {
    let path = toolkit::ptxas_path()?;
    let dir = std::env::temp_dir().join(format!("tilekit-ptxas-{}", std::process::id()));
    let run_err = |message: String| PtxasError::Run { path: path.display().to_string(), message };
    std::fs::create_dir_all(&dir).map_err(|e| run_err(format!("creating {}: {e}", dir.display())))?;
    // One file per call: tests assemble in parallel.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cubin = dir.join(format!("{entry}-{n}.cubin"));
    let mut child = Command::new(&path)
        .args(["-v", &format!("-arch={}", arch.name()), "-o"])
        .arg(&cubin)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| run_err(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(ptx.as_bytes()).map_err(|e| run_err(format!("writing the PTX: {e}")))?;
    }
    let out = child.wait_with_output().map_err(|e| run_err(e.to_string()))?;
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&cubin).unwrap_or_default();
    let _ = std::fs::remove_file(&cubin);
    if !out.status.success() {
        return Err(PtxasError::Rejected { entry: entry.to_string(), arch: arch.name().to_string(), output });
    }
    let mut report = parse_report(&output, entry).ok_or_else(|| PtxasError::NoReport { entry: entry.to_string(), output: output.clone() })?;
    report.arch = arch.name().to_string();
    report.cubin = bytes;
    Ok(report)
}

/// Reads the lines of `ptxas -v` that follow `Compiling entry function 'ENTRY'`.
pub fn parse_report(output: &str, entry: &str) -> Option<PtxasReport> {
    let mut r = PtxasReport::default();
    let mut inside = false;
    let mut seen = false;
    let number_before = |line: &str, unit: &str| -> Option<u32> {
        let i = line.find(unit)?;
        line[..i].split_whitespace().last()?.parse().ok()
    };
    for line in output.lines() {
        if line.contains("Compiling entry function") {
            inside = line.contains(&format!("'{entry}'"));
            continue;
        }
        if !inside {
            continue;
        }
        if line.contains("bytes stack frame") {
            r.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
            r.spill_store_bytes = number_before(line, "bytes spill stores").unwrap_or(0);
            r.spill_load_bytes = number_before(line, "bytes spill loads").unwrap_or(0);
        }
        if line.contains("Used") && line.contains("registers") {
            r.registers = number_before(line, "registers")?;
            r.shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
            seen = true;
        }
    }
    seen.then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_report() {
        let text = "ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'softmax' for 'sm_90'\n\
                    ptxas info    : Function properties for softmax\n    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
                    ptxas info    : Used 40 registers, used 1 barriers, 136 bytes smem, 372 bytes cmem[0]\n";
        let r = parse_report(text, "softmax").unwrap();
        assert_eq!((r.registers, r.shared_bytes, r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes), (40, 136, 8, 4, 12));
        assert!(parse_report(text, "other").is_none());
    }
}
