//! Finding the CUDA toolkit pieces tilekit uses without requiring a CUDA install: `ptxas` (to
//! assemble and report resources) and `libdevice.10.bc` (the math library linked into PTX).
//! Both ship in the PyPI wheel `nvidia-cuda-nvcc-cu12`, which is how CI gets them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A toolkit file that was not found, with everywhere it was looked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} not found (set {env}, or install the PyPI wheel nvidia-cuda-nvcc-cu12 or a CUDA toolkit); looked in: {}", looked.join(", "))]
pub struct NotFound {
    pub what: &'static str,
    pub env: &'static str,
    pub looked: Vec<String>,
}

/// Directories that may hold a CUDA toolkit layout (`bin/`, `nvvm/libdevice/`): `CUDA_HOME`,
/// `CUDA_PATH`, `/usr/local/cuda`, the nvcc wheel in every Python `site-packages` directory,
/// and the directory of the running executable (where a packed binary carries its files).
fn roots() -> &'static [PathBuf] {
    static ROOTS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut r = Vec::new();
        for var in ["CUDA_HOME", "CUDA_PATH"] {
            if let Some(v) = std::env::var_os(var) {
                r.push(PathBuf::from(v));
            }
        }
        r.push(PathBuf::from("/usr/local/cuda"));
        if let Ok(exe) = std::env::current_exe() {
            if let Some(dir) = exe.parent() {
                r.push(dir.to_path_buf());
            }
        }
        // The wheel's package directory, asked of Python itself (site-packages differ between
        // pyenv, virtual environments, --user and Debian's dist-packages).
        let py = "import sys, os\nfor p in sys.path:\n    d = os.path.join(p, 'nvidia', 'cuda_nvcc')\n    if os.path.isdir(d): print(d)";
        if let Ok(out) = Command::new("python3").args(["-c", py]).output() {
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                r.push(PathBuf::from(line.trim()));
            }
        }
        r
    })
}

fn find(what: &'static str, env: &'static str, rels: &[&str], path_name: Option<&str>) -> Result<PathBuf, NotFound> {
    let mut looked = Vec::new();
    if let Some(v) = std::env::var_os(env) {
        let p = PathBuf::from(v);
        if p.is_file() {
            return Ok(p);
        }
        looked.push(format!("{env}={}", p.display()));
    }
    if let Some(name) = path_name {
        if let Some(paths) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&paths) {
                let p = dir.join(name);
                if p.is_file() {
                    return Ok(p);
                }
            }
            looked.push("PATH".into());
        }
    }
    for root in roots() {
        for rel in rels {
            let p = root.join(rel);
            if p.is_file() {
                return Ok(p);
            }
            looked.push(p.display().to_string());
        }
    }
    Err(NotFound { what, env, looked })
}

/// The `ptxas` executable: `TILEKIT_PTXAS`, `PATH`, then the toolkit roots.
pub fn ptxas_path() -> Result<PathBuf, NotFound> {
    static PATH: OnceLock<Result<PathBuf, NotFound>> = OnceLock::new();
    PATH.get_or_init(|| {
        let p = find("ptxas", "TILEKIT_PTXAS", &["bin/ptxas", "ptxas"], Some("ptxas"))?;
        make_executable(&p);
        Ok(p)
    })
    .clone()
}

/// The bytes of `libdevice.10.bc`: `TILEKIT_LIBDEVICE`, then the toolkit roots. Read once.
pub fn libdevice() -> Result<&'static [u8], NotFound> {
    static BYTES: OnceLock<Result<Vec<u8>, NotFound>> = OnceLock::new();
    BYTES
        .get_or_init(|| {
            let p = find("libdevice.10.bc", "TILEKIT_LIBDEVICE", &["nvvm/libdevice/libdevice.10.bc", "libdevice.10.bc"], None)?;
            std::fs::read(&p).map_err(|e| NotFound {
                what: "libdevice.10.bc",
                env: "TILEKIT_LIBDEVICE",
                looked: vec![format!("{} ({e})", p.display())],
            })
        })
        .as_ref()
        .map(|v| v.as_slice())
        .map_err(Clone::clone)
}

/// pip does not keep the executable bit of the wheel's ptxas everywhere; set it if we may.
fn make_executable(p: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(p) {
            let mode = meta.permissions().mode();
            if mode & 0o111 == 0 {
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o755));
            }
        }
    }
}
