//! Shrinking a failing case while it fails the same way.
//!
//! Candidates, tried greedily within a budget of runs: one program and one warp; removing a
//! store or atomic; replacing a value by one of its operands of the same type (bypassing the
//! op); replacing a value by a zero constant. After each accepted step, instructions whose
//! results nobody uses are removed (they have no effects, so this needs no run).

use super::run::{self, FuzzDevice, Outcome};
use super::{inputs, Case};
use crate::ir::{Block, Combine, Inst, Op, Program, Type, Value};
use crate::Scalar;

/// Where an instruction is: the indices (instruction, nested block) down to its block, then
/// its index there.
type Path = (Vec<(usize, usize)>, usize);

fn blocks_mut(op: &mut Op) -> Vec<&mut Block> {
    match op {
        Op::For { body, .. } => vec![body],
        Op::If { then_block, else_block, .. } => vec![then_block, else_block],
        Op::Reduce { combine: Combine::Custom(b), .. } | Op::Scan { combine: Combine::Custom(b), .. } => vec![b],
        _ => vec![],
    }
}

fn replace_uses(block: &mut Block, from: Value, to: Value) {
    for inst in &mut block.insts {
        for v in inst.op.operands_mut() {
            if *v == from {
                *v = to;
            }
        }
        for b in blocks_mut(&mut inst.op) {
            replace_uses(b, from, to);
        }
    }
}

fn paths(block: &Block, prefix: &mut Vec<(usize, usize)>, out: &mut Vec<Path>) {
    for (i, inst) in block.insts.iter().enumerate() {
        out.push((prefix.clone(), i));
        for (bi, b) in inst.op.blocks().into_iter().enumerate() {
            prefix.push((i, bi));
            paths(b, prefix, out);
            prefix.pop();
        }
    }
}

fn block_at<'a>(block: &'a mut Block, path: &[(usize, usize)]) -> Option<&'a mut Block> {
    match path.split_first() {
        None => Some(block),
        Some((&(i, bi), rest)) => {
            let inst = block.insts.get_mut(i)?;
            let b = blocks_mut(&mut inst.op).into_iter().nth(bi)?;
            block_at(b, rest)
        }
    }
}

fn uses(block: &Block, counts: &mut Vec<usize>) {
    for inst in &block.insts {
        for v in inst.op.operands() {
            if let Some(c) = counts.get_mut(v.index()) {
                *c += 1;
            }
        }
        for b in inst.op.blocks() {
            uses(b, counts);
        }
    }
}

/// Removes instructions without effects whose results are all unused, until none is left.
pub fn remove_dead(p: &mut Program) {
    loop {
        let mut counts = vec![0usize; p.values.len()];
        uses(&p.body, &mut counts);
        fn sweep(block: &mut Block, counts: &[usize]) -> bool {
            let before = block.insts.len();
            block.insts.retain(|inst| {
                let pure = !inst.op.has_side_effects() && !matches!(inst.op, Op::Yield { .. } | Op::For { .. } | Op::If { .. });
                let control = matches!(inst.op, Op::For { .. } | Op::If { .. }) && !contains_effects(inst);
                !((pure || control) && inst.results.iter().all(|r| counts.get(r.index()).copied().unwrap_or(0) == 0))
            });
            let mut changed = block.insts.len() != before;
            for inst in &mut block.insts {
                for b in blocks_mut(&mut inst.op) {
                    changed |= sweep(b, counts);
                }
            }
            changed
        }
        if !sweep(&mut p.body, &counts) {
            return;
        }
    }
}

fn contains_effects(inst: &Inst) -> bool {
    inst.op.has_side_effects() || inst.op.blocks().iter().any(|b| b.insts.iter().any(contains_effects))
}

/// Values that the offsets of stores and atomics are computed from: replacing one could make
/// two lanes write one element, whose final value then depends on the order (a new, different
/// difference, not the one being shrunk).
fn protected(p: &Program) -> std::collections::HashSet<Value> {
    let mut defs: std::collections::HashMap<Value, Vec<Value>> = std::collections::HashMap::new();
    let mut roots = Vec::new();
    fn all_uses(b: &Block, out: &mut Vec<Value>) {
        for inst in &b.insts {
            out.extend(inst.op.operands());
            for nb in inst.op.blocks() {
                all_uses(nb, out);
            }
        }
    }
    p.walk(&mut |inst| {
        let mut from = inst.op.operands();
        for b in inst.op.blocks() {
            all_uses(b, &mut from);
        }
        for r in &inst.results {
            defs.insert(*r, from.clone());
        }
        match &inst.op {
            Op::Store { offsets, .. } | Op::Atomic { offsets, .. } | Op::AtomicCas { offsets, .. } => roots.push(*offsets),
            _ => {}
        }
    });
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = roots.pop() {
        if seen.insert(v) {
            roots.extend(defs.get(&v).into_iter().flatten().copied());
        }
    }
    seen
}

/// `p` without one instruction that has no effects and whose results nobody uses, for each.
fn dead_one_at_a_time(p: &Program) -> Vec<Program> {
    let mut counts = vec![0usize; p.values.len()];
    uses(&p.body, &mut counts);
    let mut ps = Vec::new();
    paths(&p.body, &mut Vec::new(), &mut ps);
    let mut out = Vec::new();
    for (path, i) in ps.iter().rev() {
        let mut q = p.clone();
        let Some(block) = block_at(&mut q.body, path) else { continue };
        let Some(inst) = block.insts.get(*i) else { continue };
        let unused = inst.results.iter().all(|r| counts.get(r.index()).copied().unwrap_or(0) == 0);
        if unused && !contains_effects(inst) && !matches!(inst.op, Op::Yield { .. }) {
            block.insts.remove(*i);
            out.push(q);
        }
    }
    out
}

/// The candidate programs one step from `p`.
fn candidates(p: &Program) -> Vec<Program> {
    let keep = protected(p);
    let mut all = Vec::new();
    let mut ps = Vec::new();
    paths(&p.body, &mut Vec::new(), &mut ps);
    // Removing stores and atomics first: they cut the most.
    for (path, i) in ps.iter().rev() {
        let mut q = p.clone();
        let Some(block) = block_at(&mut q.body, path) else { continue };
        let Some(inst) = block.insts.get(*i) else { continue };
        if inst.op.has_side_effects() {
            block.insts.remove(*i);
            all.push(q);
        }
    }
    for (path, i) in ps.iter().rev() {
        let mut base = p.clone();
        let Some(block) = block_at(&mut base.body, path) else { continue };
        let Some(inst) = block.insts.get(*i).cloned() else { continue };
        if inst.results.len() != 1 || matches!(inst.op, Op::Const { .. } | Op::Yield { .. }) {
            continue;
        }
        let r = inst.results[0];
        if keep.contains(&r) {
            continue;
        }
        let ty: Type = p.ty(r).clone();
        // Bypass: uses of the result take an operand of the same type.
        let mut seen = Vec::new();
        for x in inst.op.operands() {
            if p.ty(x) == &ty && !seen.contains(&x) {
                seen.push(x);
                let mut q = p.clone();
                replace_uses(&mut q.body, r, x);
                all.push(q);
            }
        }
        // A zero constant (splat to the result's shape) in the op's place.
        if !matches!(inst.op, Op::Splat { .. }) {
            let mut q = p.clone();
            let c = q.values.append(Type::scalar(ty.dtype));
            let zero = if ty.dtype.is_bool() {
                Scalar::Bool(false)
            } else if ty.dtype.is_float() {
                Scalar::Float(0.0)
            } else {
                Scalar::Int(0)
            };
            let mut new = vec![Inst { op: Op::Const { value: zero }, results: vec![c], loc: inst.loc.clone() }];
            let v = if ty.is_scalar() {
                c
            } else {
                let s = q.values.append(ty.clone());
                new.push(Inst { op: Op::Splat { x: c }, results: vec![s], loc: inst.loc.clone() });
                s
            };
            replace_uses(&mut q.body, r, v);
            if let Some(block) = block_at(&mut q.body, path) {
                for (k, n) in new.into_iter().enumerate() {
                    block.insts.insert(*i + k, n);
                }
                all.push(q);
            }
        }
    }
    all
}

/// Whether every approximate output the program stores still has the outputs that hold its
/// operands stored: the tolerance rule reads an approximate element's operands from them, and
/// an output nothing writes keeps its poison fill, which would make a new difference.
fn operands_stored(case: &Case) -> bool {
    let p = &case.program;
    let mut stored = std::collections::HashSet::new();
    p.walk(&mut |inst| {
        if let Op::Store { buffer, .. } | Op::Atomic { buffer, .. } | Op::AtomicCas { buffer, .. } = &inst.op {
            if let Some(param) = p.params.get(*buffer as usize) {
                stored.insert(param.name.clone());
            }
        }
    });
    case.buffers.iter().filter(|b| stored.contains(&b.name)).all(|b| b.operands.iter().all(|o| stored.contains(o)))
}

/// Shrinks `case`, which fails on `dev` as `failure`, within `budget` runs; returns the
/// smallest case found and its outcome.
pub fn shrink(case: &Case, dev: &FuzzDevice, failure: &Outcome, budget: usize) -> (Case, Outcome) {
    let mut best = case.clone();
    remove_dead(&mut best.program);
    let mut best_outcome = failure.clone();
    let mut runs = 0;
    let still_fails = |c: &Case, runs: &mut usize| -> Option<Outcome> {
        *runs += 1;
        if tilekit_core::verify::verify(&c.program).is_err() || !operands_stored(c) {
            return None;
        }
        let inputs = inputs::fill(c);
        let want = run::reference(c, &inputs).ok()?;
        let o = run::check_plain(c, &inputs, &want, dev);
        o.same_failure(failure).then_some(o)
    };
    // The dead code removed above must not hide the failure; where it does (a backend that
    // fails on code whose results nobody uses), dead code is removed one instruction at a time.
    let dce = match still_fails(&best, &mut runs) {
        Some(o) => {
            best_outcome = o;
            true
        }
        None => {
            best = case.clone();
            false
        }
    };
    for (grid, warps) in [([1, 1, 1], best.num_warps), (best.grid, 1)] {
        if runs >= budget || (grid == best.grid && warps == best.num_warps) {
            continue;
        }
        let c = Case { grid, num_warps: warps, ..best.clone() };
        if let Some(o) = still_fails(&c, &mut runs) {
            best = c;
            best_outcome = o;
        }
    }
    let mut progress = true;
    while progress && runs < budget {
        progress = false;
        let mut all = candidates(&best.program);
        if !dce {
            all.extend(dead_one_at_a_time(&best.program));
        }
        for mut program in all {
            if runs >= budget {
                break;
            }
            if dce {
                remove_dead(&mut program);
            }
            if program.num_insts() >= best.program.num_insts() {
                continue;
            }
            let c = Case { program, ..best.clone() };
            if let Some(o) = still_fails(&c, &mut runs) {
                best = c;
                best_outcome = o;
                progress = true;
                break;
            }
        }
    }
    (best, best_outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shrink may drop the store of an approximate output or keep it with its operands' stores,
    /// never keep it without them (their poison fill would make a new difference).
    #[test]
    fn approximate_outputs_keep_their_operands_stored() {
        let case = |stores: &str| {
            let text = format!(
                "// grid: 1 1 1
// num_warps: 1
// input_seed: 1
// buffer x: 4 wild exact
// buffer y: 4 poison approx-sqrt of z
// buffer z: 4 poison exact
program p(x: buffer<f32, read>, y: buffer<f32, write>, z: buffer<f32, write>) grid 1 {{
  %0 = arange 0, 4 : [4]xi32
  %1 = load x[%0] : [4]xf32
  %2 = sqrt %1 : [4]xf32
{stores}}}
"
            );
            super::super::filetest::parse(&text).unwrap().case
        };
        assert!(operands_stored(&case("  store y[%0], %2\n  store z[%0], %1\n")));
        assert!(operands_stored(&case("  store z[%0], %1\n")));
        assert!(operands_stored(&case("")));
        assert!(!operands_stored(&case("  store y[%0], %2\n")));
    }
}
