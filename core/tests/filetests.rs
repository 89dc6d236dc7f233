//! Filetests: tile programs in text form with their expectations beside them, as in cranelift.
//!
//! Every `tests/filetests/*.tir` file opens with comment lines that say what to check, then holds
//! one program. The directives:
//!
//! - `; test: roundtrip` — parse, print; the printed text must equal the program text of the file
//!   exactly (the file is its own expectation). With `TILEKIT_BLESS=1` a mismatch rewrites the
//!   file from the printer instead of failing.
//! - `; test: verify` — parse and verify; the verifier must reject the program, and its message
//!   must contain the text of every `; error: <text>` line.
//! - `; test: interp` — run on the interpreter over `; grid = N` (or `[X, Y, Z]`) with one
//!   `; arg N = ...` per parameter (a list `[1.0, -2, nan, inf]` or `[value; count]` for a buffer,
//!   a number for a scalar), then compare buffers with `; expect N = [...]`, exactly unless
//!   `; tolerance = T` allows |got - want| <= T * max(1, |want|). A list may run over several
//!   comment lines.
//!
//! A file may name several kinds. Comment lines that are not directives are prose.

use std::path::{Path, PathBuf};

use tilekit_core::interp::{self, Arg};
use tilekit_core::ir::{ParamKind, Program};
use tilekit_core::{text, verify, DType, HostBuffer, Scalar};

const KINDS: &[&str] = &["roundtrip", "verify", "interp"];

#[derive(Debug, Default)]
struct Directives {
    kinds: Vec<String>,
    errors: Vec<String>,
    grid: Option<[u32; 3]>,
    args: Vec<(usize, Vec<f64>, bool)>,
    expects: Vec<(usize, Vec<f64>)>,
    tolerance: f64,
}

/// The leading comment and blank lines, and the program text after them.
fn split(src: &str) -> (&str, &str) {
    let mut at = 0;
    for line in src.split_inclusive('\n') {
        let t = line.trim();
        if !t.is_empty() && !t.starts_with(';') {
            break;
        }
        at += line.len();
    }
    src.split_at(at)
}

/// Parses `[1.0, -2, nan]`, `[0.5; 7]` or a lone number; the flag says whether it was a list.
fn values(text: &str) -> Result<(Vec<f64>, bool), String> {
    let num = |s: &str| -> Result<f64, String> {
        let s = s.trim();
        match s {
            "nan" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            "true" => Ok(1.0),
            "false" => Ok(0.0),
            _ => s.parse::<f64>().map_err(|_| format!("`{s}` is not a number")),
        }
    };
    let t = text.trim();
    let Some(inner) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
        return Ok((vec![num(t)?], false));
    };
    if let Some((v, n)) = inner.split_once(';') {
        let n: usize = n.trim().parse().map_err(|_| format!("`{}` is not a count", n.trim()))?;
        return Ok((vec![num(v)?; n], true));
    }
    if inner.trim().is_empty() {
        return Ok((vec![], true));
    }
    Ok((inner.split(',').map(num).collect::<Result<_, _>>()?, true))
}

fn directives(header: &str) -> Result<Directives, String> {
    let mut d = Directives::default();
    let lines: Vec<&str> = header.lines().map(|l| l.trim().trim_start_matches(';').trim()).collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if let Some(kind) = line.strip_prefix("test:") {
            let kind = kind.trim();
            if !KINDS.contains(&kind) {
                return Err(format!("unknown test kind `{kind}` (the kinds are {})", KINDS.join(", ")));
            }
            d.kinds.push(kind.to_string());
        } else if let Some(e) = line.strip_prefix("error:") {
            d.errors.push(e.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("tolerance =") {
            d.tolerance = rest.trim().parse().map_err(|_| format!("bad tolerance `{}`", rest.trim()))?;
        } else if let Some(rest) = line.strip_prefix("grid =") {
            let (g, _) = values(rest)?;
            if g.is_empty() || g.len() > 3 {
                return Err(format!("a grid has 1 to 3 extents, found `{}`", rest.trim()));
            }
            let mut grid = [1u32; 3];
            for (k, x) in g.iter().enumerate() {
                grid[k] = *x as u32;
            }
            d.grid = Some(grid);
        } else if line.starts_with("arg ") || line.starts_with("expect ") {
            let (lhs, rhs) = line.split_once('=').ok_or_else(|| format!("expected `=` in `{line}`"))?;
            let mut rhs = rhs.trim().to_string();
            // A list runs on over the following comment lines until its `]`.
            while rhs.starts_with('[') && !rhs.ends_with(']') && i < lines.len() {
                rhs.push(' ');
                rhs.push_str(lines[i]);
                i += 1;
            }
            let (word, index) = lhs.trim().split_once(' ').ok_or_else(|| format!("expected an index in `{lhs}`"))?;
            let index: usize = index.trim().parse().map_err(|_| format!("`{}` is not a parameter index", index.trim()))?;
            let (vals, list) = values(&rhs)?;
            if word == "arg" {
                d.args.push((index, vals, list));
            } else {
                d.expects.push((index, vals));
            }
        }
    }
    if d.kinds.is_empty() {
        return Err("no `; test: <kind>` line".into());
    }
    Ok(d)
}

fn bless() -> bool {
    std::env::var("TILEKIT_BLESS").is_ok_and(|v| v == "1")
}

fn roundtrip(path: &Path, header: &str, body: &str, program: &Program) -> Result<(), String> {
    let printed = text::print(program);
    if printed == body {
        return Ok(());
    }
    if bless() {
        std::fs::write(path, format!("{header}{printed}")).map_err(|e| format!("cannot bless: {e}"))?;
        eprintln!("blessed {}", path.display());
        return Ok(());
    }
    let diff = body
        .lines()
        .zip(printed.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| format!("first difference at program line {}:\n  file:    {a}\n  printed: {b}", i + 1))
        .unwrap_or_else(|| "the texts differ in length or trailing lines".into());
    Err(format!("the printed program differs from the file (TILEKIT_BLESS=1 rewrites it)\n{diff}\n--- printed:\n{printed}"))
}

fn verify_kind(d: &Directives, program: &Program) -> Result<(), String> {
    if d.errors.is_empty() {
        return Err("a verify test needs at least one `; error: <text>` line".into());
    }
    match verify::verify(program) {
        Ok(()) => Err(format!("the verifier accepted the program; expected an error containing {:?}", d.errors)),
        Err(e) => {
            let msg = e.to_string();
            match d.errors.iter().find(|want| !msg.contains(want.as_str())) {
                Some(want) => Err(format!("the verifier's error\n  {msg}\ndoes not contain\n  {want}")),
                None => Ok(()),
            }
        }
    }
}

fn interp_kind(d: &Directives, program: &Program) -> Result<(), String> {
    let grid = d.grid.ok_or("an interp test needs `; grid = N`")?;
    if d.expects.is_empty() {
        return Err("an interp test needs at least one `; expect N = [...]`".into());
    }
    let mut buffers: Vec<Option<HostBuffer>> = Vec::new();
    let mut scalars: Vec<Option<Scalar>> = Vec::new();
    for (i, param) in program.params.iter().enumerate() {
        let spec = d.args.iter().find(|(n, ..)| *n == i);
        let Some((_, vals, list)) = spec else {
            return Err(format!("no `; arg {i} = ...` for parameter `{}`", param.name));
        };
        match param.kind {
            ParamKind::Buffer { dtype, .. } => {
                if !list {
                    return Err(format!("parameter {i} `{}` is a buffer: give a list", param.name));
                }
                buffers.push(Some(HostBuffer::from_f64(dtype, vals)));
                scalars.push(None);
            }
            ParamKind::Scalar { dtype } => {
                let [v] = vals.as_slice() else {
                    return Err(format!("parameter {i} `{}` is a scalar: give one number", param.name));
                };
                let s = if dtype == DType::I1 {
                    Scalar::Bool(*v != 0.0)
                } else if dtype.is_float() {
                    Scalar::Float(*v)
                } else {
                    Scalar::Int(*v as i64)
                };
                buffers.push(None);
                scalars.push(Some(s));
            }
        }
    }
    let args: Vec<Arg<'_>> = buffers
        .iter()
        .zip(&scalars)
        .map(|(b, s)| match (b, s) {
            (Some(b), _) => Arg::Buffer(b),
            (None, Some(s)) => Arg::Scalar(*s),
            (None, None) => unreachable!("every parameter got a buffer or a scalar above"),
        })
        .collect();
    interp::run(program, grid, &args).map_err(|e| format!("the interpreter failed: {e}"))?;
    for (i, want) in &d.expects {
        let Some(Some(buf)) = buffers.get(*i) else {
            return Err(format!("`; expect {i}` does not name a buffer parameter"));
        };
        let got = buf.to_f64();
        if got.len() != want.len() {
            return Err(format!("buffer {i} has {} elements, the expectation {}", got.len(), want.len()));
        }
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            let ok = if w.is_nan() {
                g.is_nan()
            } else if w.is_infinite() {
                g == w
            } else {
                (g - w).abs() <= d.tolerance * w.abs().max(1.0)
            };
            if !ok {
                return Err(format!("buffer {i}, element {k}: got {g}, expected {w}\n  got: {got:?}"));
            }
        }
    }
    Ok(())
}

fn run_file(path: &Path) -> Result<Vec<String>, String> {
    let src = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    if !src.starts_with("; test:") {
        return Err("a filetest starts with a `; test: <kind>` line".into());
    }
    let (header, body) = split(&src);
    let d = directives(header)?;
    let program = text::parse(body).map_err(|e| {
        let line = header.lines().count() + e.line;
        format!("does not parse: file line {line}, column {}: {}", e.col, e.message)
    })?;
    for kind in &d.kinds {
        let r = match kind.as_str() {
            "roundtrip" => roundtrip(path, header, body, &program),
            "verify" => verify_kind(&d, &program),
            "interp" => interp_kind(&d, &program),
            _ => unreachable!("kinds are checked when the directives are read"),
        };
        r.map_err(|e| format!("[{kind}] {e}"))?;
    }
    Ok(d.kinds)
}

#[test]
fn filetests() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the filetests directory exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tir"))
        .collect();
    files.sort();
    let mut failures = Vec::new();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for f in &files {
        match run_file(f) {
            Ok(kinds) => kinds.into_iter().for_each(|k| *counts.entry(k).or_default() += 1),
            Err(e) => failures.push(format!("{}: {e}", f.file_name().unwrap_or_default().to_string_lossy())),
        }
    }
    assert!(failures.is_empty(), "{} of {} filetests failed:\n\n{}", failures.len(), files.len(), failures.join("\n\n"));
    eprintln!("filetests passed: {counts:?}");
    assert!(files.len() >= 8, "expected at least 8 filetests, found {}", files.len());
}

#[test]
fn the_harness_catches_mismatches() {
    // A roundtrip file whose text is not the printer's output fails (without bless).
    let body = "program k() grid 1 {\n  %0 = const 1 : i32\n}\n";
    let p = text::parse(body).unwrap();
    let odd = "program k() grid 1 {\n  %0 = const 1: i32\n}\n";
    if !bless() {
        assert!(roundtrip(Path::new("/nonexistent"), "", odd, &p).is_err());
    }
    assert!(roundtrip(Path::new("/nonexistent"), "", body, &p).is_ok());
    // Directive parsing.
    let d = directives("; test: interp\n; grid = [2, 3]\n; arg 0 = [1.5, nan,\n;   -inf]\n; arg 1 = [0; 4]\n; expect 0 = []\n; tolerance = 1e-6\n")
        .unwrap();
    assert_eq!(d.grid, Some([2, 3, 1]));
    assert_eq!(d.args[0].1.len(), 3);
    assert!(d.args[0].1[1].is_nan() && d.args[0].1[2] == f64::NEG_INFINITY);
    assert_eq!(d.args[1].1, vec![0.0; 4]);
    assert_eq!(d.tolerance, 1e-6);
    assert!(directives("; test: frob\n").is_err());
    assert!(directives("; a comment only\n").is_err());
}
