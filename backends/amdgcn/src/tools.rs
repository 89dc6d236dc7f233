//! The LLVM 19 tools the backend runs: `ld.lld` (object -> code object) and `llvm-objdump`
//! (disassembly for checks). `TILEKIT_LLD` / `TILEKIT_LLVM_OBJDUMP` name them explicitly;
//! otherwise the Debian names (`ld.lld-19`), the plain names and `/usr/lib/llvm-19/bin` are tried.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("{tool} not found (install lld-19 / llvm-19, or set {var}); tried {tried}")]
    NotFound { tool: &'static str, var: &'static str, tried: String },
    #[error("running {path}: {message}")]
    Run { path: String, message: String },
    #[error("{path} failed:\n{output}")]
    Failed { path: String, output: String },
}

fn find(tool: &'static str, var: &'static str) -> Result<PathBuf, ToolError> {
    if let Some(p) = std::env::var_os(var) {
        return Ok(PathBuf::from(p));
    }
    let mut tried = Vec::new();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in [format!("{tool}-19"), tool.to_string()] {
        for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/lib/llvm-19/bin")]) {
            let p = dir.join(&name);
            if p.is_file() {
                return Ok(p);
            }
        }
        tried.push(name);
    }
    tried.push("/usr/lib/llvm-19/bin".into());
    Err(ToolError::NotFound { tool, var, tried: tried.join(", ") })
}

pub fn lld_path() -> Result<PathBuf, ToolError> {
    find("ld.lld", "TILEKIT_LLD")
}

pub fn objdump_path() -> Result<PathBuf, ToolError> {
    find("llvm-objdump", "TILEKIT_LLVM_OBJDUMP")
}

/// A fresh scratch directory entry name: kernels compile in parallel.
fn scratch(stem: &str, ext: &str) -> Result<PathBuf, ToolError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("tilekit-amdgcn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| ToolError::Run { path: dir.display().to_string(), message: e.to_string() })?;
    Ok(dir.join(format!("{stem}-{}.{ext}", SEQ.fetch_add(1, Ordering::Relaxed))))
}

fn run(path: &Path, args: &[&std::ffi::OsStr]) -> Result<String, ToolError> {
    let out = Command::new(path).args(args).output().map_err(|e| ToolError::Run { path: path.display().to_string(), message: e.to_string() })?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(ToolError::Failed { path: path.display().to_string(), output: text });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Links a relocatable AMDGPU object into a code object (`ld.lld -shared`).
pub fn link(object: &[u8], stem: &str) -> Result<Vec<u8>, ToolError> {
    let lld = lld_path()?;
    let (o, so) = (scratch(stem, "o")?, scratch(stem, "hsaco")?);
    let io = |p: &Path, e: std::io::Error| ToolError::Run { path: p.display().to_string(), message: e.to_string() };
    std::fs::write(&o, object).map_err(|e| io(&o, e))?;
    let r = run(&lld, &["-shared".as_ref(), "--no-undefined".as_ref(), o.as_os_str(), "-o".as_ref(), so.as_os_str()]);
    let bytes = r.and_then(|_| std::fs::read(&so).map_err(|e| io(&so, e)));
    let _ = std::fs::remove_file(&o);
    let _ = std::fs::remove_file(&so);
    bytes
}

/// Disassembles a code object for `mcpu` with `llvm-objdump -d`.
pub fn disassemble(code_object: &[u8], mcpu: &str, stem: &str) -> Result<String, ToolError> {
    let objdump = objdump_path()?;
    let f = scratch(stem, "hsaco")?;
    std::fs::write(&f, code_object).map_err(|e| ToolError::Run { path: f.display().to_string(), message: e.to_string() })?;
    let r = run(&objdump, &["-d".as_ref(), format!("--mcpu={mcpu}").as_ref(), f.as_os_str()]);
    let _ = std::fs::remove_file(&f);
    r
}
