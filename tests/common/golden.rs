//! Golden files of emitted code: `tests/golden/<file>` must hold exactly what a test emits;
//! `TILEKIT_BLESS=1` rewrites it instead.

use std::path::PathBuf;

/// Checks `text` against `tests/golden/<file>` (or rewrites it under `TILEKIT_BLESS=1`);
/// `what` names the module and the kind of code in the failure ("vector_add: the PTX").
pub fn check_golden(file: &str, text: &str, what: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(file);
    if std::env::var("TILEKIT_BLESS").is_ok_and(|v| v == "1") {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (TILEKIT_BLESS=1 writes it)", path.display()));
    if want != text {
        let line = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(want.lines().count().min(text.lines().count()));
        panic!(
            "{what} differs from {} at line {} (TILEKIT_BLESS=1 rewrites it)\nwant: {}\ngot:  {}",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            text.lines().nth(line).unwrap_or("<end>")
        );
    }
}
