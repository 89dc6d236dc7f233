//! Saved cases: a header of `//` lines, then the program in tilekit's text form.
//!
//! ```text
//! // fuzz: seed 1 index 42
//! // found on: vulkan:llvmpipe (LLVM 15.0.6, 256 bits)
//! // mismatch: buffer 2 (`y2`, exact) element 5: want 1e0 got -inf
//! // expect-fail: vulkan: lavapipe folds x + cast(x < x) with x = -0 to -0
//! // grid: 3 1 1
//! // num_warps: 2
//! // input_seed: 12345
//! // buffer x1: 37 wild exact
//! // buffer y2: 37 poison exact
//! // scalar n = 37
//! program fuzz_1_42(...) grid 1 { ... }
//! ```
//!
//! `buffer` lines come in parameter order; the dtypes are the program's. Scalars are named by
//! their parameter. `expect-fail` lines name a device kind (the start of a device name:
//! `vulkan`, `wgpu`, `emulator`, `cuda`) where the case is known to fail, with the diagnosis so
//! far; on every other device it must agree. Other lines are comments.

use super::{BufferCase, Case, Check, Fill};
use crate::{ir::ParamKind, Scalar};

/// A case read from a file, with its header's expectations.
#[derive(Clone, Debug)]
pub struct FileTest {
    pub case: Case,
    /// `(device kind, reason)` for each `expect-fail` line.
    pub expect_fail: Vec<(String, String)>,
}

impl FileTest {
    /// The reason `device` (a device name) is expected to fail, if it is.
    pub fn expected_failure(&self, device: &str) -> Option<&str> {
        self.expect_fail.iter().find(|(kind, _)| device.starts_with(kind.as_str())).map(|(_, r)| r.as_str())
    }
}

/// The text of `case` with `comments` (each becomes a `// ` line) before the case's own lines.
pub fn to_text(case: &Case, comments: &[String]) -> String {
    let mut out = String::new();
    for c in comments {
        for line in c.lines() {
            out.push_str(&format!("// {line}\n"));
        }
    }
    out.push_str(&format!("// grid: {} {} {}\n", case.grid[0], case.grid[1], case.grid[2]));
    out.push_str(&format!("// num_warps: {}\n", case.num_warps));
    if case.num_stages != 1 {
        out.push_str(&format!("// num_stages: {}\n", case.num_stages));
    }
    out.push_str(&format!("// input_seed: {}\n", case.input_seed));
    for b in &case.buffers {
        let of = if b.operands.is_empty() { String::new() } else { format!(" of {}", b.operands.join(" ")) };
        out.push_str(&format!("// buffer {}: {} {} {}{of}\n", b.name, b.len, b.fill.name(), b.check.name()));
    }
    for (i, s) in &case.scalars {
        out.push_str(&format!("// scalar {} = {}\n", case.program.params[*i].name, s));
    }
    out.push_str(&tilekit_core::text::print_with(&case.program, &tilekit_core::text::PrintOptions { locations: false }));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Reads a saved case.
pub fn parse(text: &str) -> Result<FileTest, String> {
    let mut grid = None;
    let mut num_warps = None;
    let mut num_stages = 1;
    let mut input_seed = None;
    let mut buffers: Vec<(String, usize, Fill, Check, Vec<String>)> = Vec::new();
    let mut scalars: Vec<(String, String)> = Vec::new();
    let mut expect_fail = Vec::new();
    let mut body = String::new();
    for (ln, line) in text.lines().enumerate() {
        let bad = |what: &str| format!("line {}: {what}: `{line}`", ln + 1);
        let Some(h) = line.trim_start().strip_prefix("//") else {
            body.push_str(line);
            body.push('\n');
            continue;
        };
        let h = h.trim();
        if let Some(v) = h.strip_prefix("grid:") {
            let g: Vec<u32> = v.split_whitespace().map(|x| x.parse().map_err(|_| bad("bad grid"))).collect::<Result<_, _>>()?;
            if g.len() != 3 {
                return Err(bad("a grid has three extents"));
            }
            grid = Some([g[0], g[1], g[2]]);
        } else if let Some(v) = h.strip_prefix("num_warps:") {
            num_warps = Some(v.trim().parse().map_err(|_| bad("bad num_warps"))?);
        } else if let Some(v) = h.strip_prefix("num_stages:") {
            num_stages = v.trim().parse().ok().filter(|&s: &u32| s >= 1).ok_or_else(|| bad("bad num_stages (a count of at least 1)"))?;
        } else if let Some(v) = h.strip_prefix("input_seed:") {
            input_seed = Some(v.trim().parse().map_err(|_| bad("bad input_seed"))?);
        } else if let Some(v) = h.strip_prefix("buffer ") {
            const FORM: &str = "expected `buffer NAME: LEN FILL CHECK [of OPERAND...]`";
            let (name, rest) = v.split_once(':').ok_or_else(|| bad(FORM))?;
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.len() < 3 || (f.len() > 3 && (f[3] != "of" || f.len() == 4)) {
                return Err(bad(FORM));
            }
            let len = f[0].parse().map_err(|_| bad("bad length"))?;
            let fill = Fill::from_name(f[1]).ok_or_else(|| bad("unknown fill (wild, tame, poison)"))?;
            let check = Check::from_name(f[2]).ok_or_else(|| bad("unknown check (exact, signed-zero, approx-OP)"))?;
            let operands = f.iter().skip(4).map(|o| o.to_string()).collect();
            buffers.push((name.trim().to_string(), len, fill, check, operands));
        } else if let Some(v) = h.strip_prefix("scalar ") {
            let (name, value) = v.split_once('=').ok_or_else(|| bad("expected `scalar NAME = VALUE`"))?;
            scalars.push((name.trim().to_string(), value.trim().to_string()));
        } else if let Some(v) = h.strip_prefix("expect-fail:") {
            // Device names hold colons (`emulator:cuda:sm_80`); the reason follows ": ".
            let (kind, reason) = v.trim().split_once(": ").ok_or_else(|| bad("expected `expect-fail: DEVICE: REASON`"))?;
            expect_fail.push((kind.trim().to_string(), reason.trim().to_string()));
        }
    }
    let program = tilekit_core::text::parse(&body).map_err(|e| format!("program: {e}"))?;
    tilekit_core::verify::verify(&program).map_err(|e| format!("program: {e}"))?;
    let mut case_buffers = Vec::new();
    let mut case_scalars = Vec::new();
    let mut bi = 0;
    for (i, p) in program.params.iter().enumerate() {
        match p.kind {
            ParamKind::Buffer { dtype, .. } => {
                let (name, len, fill, check, operands) =
                    buffers.get(bi).cloned().ok_or_else(|| format!("no `buffer` line for parameter `{}`", p.name))?;
                if name != p.name {
                    return Err(format!("buffer line {} names `{name}`, parameter {i} is `{}`", bi + 1, p.name));
                }
                case_buffers.push(BufferCase { name, dtype, len, fill, check, operands });
                bi += 1;
            }
            ParamKind::Scalar { dtype } => {
                let (_, v) = scalars.iter().find(|(n, _)| *n == p.name).ok_or_else(|| format!("no `scalar` line for parameter `{}`", p.name))?;
                let s = if dtype.is_float() {
                    Scalar::Float(v.parse::<f64>().map_err(|_| format!("scalar `{}`: bad float `{v}`", p.name))?)
                } else if dtype.is_bool() {
                    Scalar::Bool(v == "true")
                } else {
                    Scalar::Int(v.parse::<i64>().map_err(|_| format!("scalar `{}`: bad integer `{v}`", p.name))?)
                };
                case_scalars.push((i, s));
            }
        }
    }
    for b in &case_buffers {
        if let Some(o) = b.operands.iter().find(|o| !case_buffers.iter().any(|c| &c.name == *o)) {
            return Err(format!("buffer `{}`: its operand `{o}` is not a buffer of the program", b.name));
        }
    }
    let case = Case {
        program,
        grid: grid.ok_or("no `grid:` line")?,
        num_warps: num_warps.ok_or("no `num_warps:` line")?,
        num_stages,
        buffers: case_buffers,
        scalars: case_scalars,
        input_seed: input_seed.ok_or("no `input_seed:` line")?,
    };
    Ok(FileTest { case, expect_fail })
}

#[cfg(test)]
mod tests {
    #[test]
    fn saved_cases_read_back() {
        for i in 0..50 {
            let case = super::super::gen::generate(3, i).unwrap();
            let text = super::to_text(&case, &["fuzz: seed 3".into(), "expect-fail: vulkan: because".into()]);
            let back = super::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(back.case.buffers, case.buffers);
            assert_eq!(back.case.scalars, case.scalars);
            assert_eq!(back.case.grid, case.grid);
            assert_eq!(back.expected_failure("vulkan:llvmpipe"), Some("because"));
        }
    }
}
