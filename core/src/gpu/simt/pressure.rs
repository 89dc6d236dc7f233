//! Register pressure of a recorded per-thread program: the most 32-bit registers its values hold
//! at once, from a liveness walk over the structured code.
//!
//! Every recorded register is defined once; a loop's carried values are the body's arguments.
//! A value is live from its definition to its last use, and a value defined before a loop and
//! used inside it stays live to the loop's end (the next iteration reads it again). The
//! recorded order is the tile program's, a whole tile at a time; an assembler schedules
//! arithmetic next to its use, so a pure instruction (arithmetic, conversions, constants) is
//! counted as if sunk to just before its first user in its block: the offsets and masks of a
//! tile's stores take registers one store at a time, not all together. A value read only as an
//! address counts nothing (an assembler folds a thread's constant offsets into the memory
//! instructions); 16-bit values count half a register (pairs pack), predicates a quarter,
//! 64-bit values two. The figure is an estimate of what the program's own values need, without
//! the temporaries an assembler adds.

use super::{Coop, Reg, SInst, WgA};
use crate::dtype::DType;
use crate::gpu::emit::SharedMatrix;

/// Registers defined and read by one instruction (nested bodies not included).
struct Access {
    defs: Vec<(Reg, u32)>,
    uses: Vec<Reg>,
}

/// A 32-bit register in the units widths are counted in.
const REG: u32 = 4;

/// What a value of `dtype` takes, in quarters of a register: 16-bit values pack in pairs
/// (f16x2), a predicate packs with others, a 64-bit value takes two registers.
fn width(dtype: DType) -> u32 {
    match dtype {
        DType::I1 => 1,
        d if d.size_bytes() == 2 => REG / 2,
        d if d.size_bytes() > 4 => 2 * REG,
        _ => REG,
    }
}

fn coop_regs(c: &Coop, warp: u32) -> impl Iterator<Item = Reg> {
    c.first..c.first + c.regs(warp)
}

fn access(inst: &SInst, warp: u32, widths: &std::collections::HashMap<Reg, u32>) -> Access {
    let one = |r: Reg| vec![(r, REG)];
    let w = |r: Reg, d: DType| vec![(r, width(d))];
    let (defs, uses): (Vec<(Reg, u32)>, Vec<Reg>) = match inst {
        SInst::Const { dst, dtype, .. } => (w(*dst, *dtype), vec![]),
        SInst::ThreadIndex { dst } | SInst::ProgramId { dst, .. } | SInst::NumPrograms { dst, .. } => (one(*dst), vec![]),
        SInst::Param { dst, .. } => (one(*dst), vec![]),
        SInst::Unary { dst, dtype, x, .. } => (w(*dst, *dtype), vec![*x]),
        SInst::Binary { dst, dtype, a, b, .. } => (w(*dst, *dtype), vec![*a, *b]),
        SInst::Cmp { dst, a, b, .. } => (w(*dst, DType::I1), vec![*a, *b]),
        SInst::Select { dst, c, a, b } => (vec![(*dst, widths.get(a).copied().unwrap_or(REG))], vec![*c, *a, *b]),
        SInst::Fma { dst, dtype, a, b, c } => (w(*dst, *dtype), vec![*a, *b, *c]),
        SInst::Cast { dst, to, x } => (w(*dst, *to), vec![*x]),
        SInst::Bitcast { dst, to, x, .. } => (w(*dst, *to), vec![*x]),
        SInst::Load { dst, dtype, index, .. } => (w(*dst, *dtype), vec![*index]),
        SInst::LoadMasked { dsts, dtype, index, mask, .. } => (dsts.iter().map(|&d| (d, width(*dtype))).collect(), vec![*index, *mask]),
        SInst::Store { index, value, .. } => (vec![], vec![*index, *value]),
        SInst::Atomic { dst, dtype, index, cmp, value, .. } => {
            let mut uses = vec![*index, *value];
            uses.extend(cmp);
            (w(*dst, *dtype), uses)
        }
        SInst::LoadShared { dst, dtype, index } => (w(*dst, *dtype), vec![*index]),
        SInst::StoreShared { index, value, .. } => (vec![], vec![*index, *value]),
        SInst::Barrier | SInst::AsyncCommit | SInst::AsyncWait { .. } | SInst::WgmmaWait { .. } | SInst::FenceAsync => (vec![], vec![]),
        SInst::AsyncCopy { index, shared_index, pred, .. } => (vec![], vec![*index, *shared_index, *pred]),
        SInst::MbarInit { barrier } | SInst::MbarInval { barrier } | SInst::MbarExpect { barrier, .. } => (vec![], vec![*barrier]),
        SInst::MbarWait { barrier, parity } => (vec![], vec![*barrier, *parity]),
        SInst::TensorCopy { shared_index, coords, barrier, .. } => (vec![], vec![*shared_index, coords[0], coords[1], *barrier]),
        SInst::LoadMatrix { row, d, .. } => (d.iter().map(|&r| (r, REG)).collect(), vec![*row]),
        SInst::Mma { a, b, c, d, .. } => (d.iter().map(|&r| (r, REG)).collect(), a.iter().chain(b).chain(c).copied().collect()),
        SInst::Wgmma { a, b, c, d, .. } => {
            let SharedMatrix { start, .. } = b;
            let mut uses: Vec<Reg> = c.clone();
            uses.push(*start);
            match a {
                WgA::Registers(r) => uses.extend(r),
                WgA::Shared(m) => uses.push(m.start),
            }
            (d.iter().map(|&r| (r, REG)).collect(), uses)
        }
        SInst::CoopFill { d, value } => (coop_regs(d, warp).map(|r| (r, REG)).collect(), vec![*value]),
        SInst::CoopLoad { d, dtype, index, .. } => (coop_regs(d, warp).map(|r| (r, width(*dtype))).collect(), vec![*index]),
        SInst::StoreStaging { index, values, .. } => (vec![], std::iter::once(*index).chain(values.iter().copied()).collect()),
        SInst::CoopStore { value, index, .. } => (vec![], coop_regs(value, warp).chain([*index]).collect()),
        SInst::CoopMulAdd { a, b, c, d } => {
            (coop_regs(d, warp).map(|r| (r, REG)).collect(), coop_regs(a, warp).chain(coop_regs(b, warp)).chain(coop_regs(c, warp)).collect())
        }
        SInst::ShuffleXor { dst, x, .. } => (vec![(*dst, widths.get(x).copied().unwrap_or(REG))], vec![*x]),
        // Control flow is walked by `Walk::block`.
        SInst::If { .. } | SInst::Loop { .. } => (vec![], vec![]),
    };
    Access { defs, uses }
}

/// The operands of a memory instruction that address it. An assembler folds the constant
/// steps between a thread's addresses into the instructions (base register plus immediate), so
/// a value read only as an address takes no register of its own here.
fn addresses(inst: &SInst) -> Vec<Reg> {
    match inst {
        SInst::Load { index, .. }
        | SInst::LoadMasked { index, .. }
        | SInst::Store { index, .. }
        | SInst::Atomic { index, .. }
        | SInst::LoadShared { index, .. }
        | SInst::StoreShared { index, .. }
        | SInst::CoopLoad { index, .. }
        | SInst::StoreStaging { index, .. }
        | SInst::CoopStore { index, .. } => vec![*index],
        SInst::AsyncCopy { index, shared_index, .. } => vec![*index, *shared_index],
        SInst::LoadMatrix { row, .. } => vec![*row],
        _ => vec![],
    }
}

/// The position of an instruction in a linear walk, scaled so that sunk instructions fit
/// between two recorded ones.
type Pos = u64;
const SCALE: u64 = 1 << 32;

fn pure(inst: &SInst) -> bool {
    matches!(
        inst,
        SInst::Const { .. }
            | SInst::ThreadIndex { .. }
            | SInst::ProgramId { .. }
            | SInst::NumPrograms { .. }
            | SInst::Param { .. }
            | SInst::Unary { .. }
            | SInst::Binary { .. }
            | SInst::Cmp { .. }
            | SInst::Select { .. }
            | SInst::Fma { .. }
            | SInst::Cast { .. }
            | SInst::Bitcast { .. }
    )
}

/// The walk both passes share: one position per instruction, one after each branch of an `if`
/// and one at a loop's back edge.
trait Visit {
    fn enter(&mut self, pos: u32, index: usize, inst: &SInst);
    fn open(&mut self) {}
    fn close(&mut self) {}
    fn if_end(&mut self, pos: u32, vals: &[Reg], first: bool, results: &[Reg]);
    fn loop_start(&mut self, pos: u32, iv: Reg, iv_dtype: DType, args: &[Reg], init: &[Reg]);
    fn loop_end(&mut self, pos: u32, bounds: [Reg; 4], next: &[Reg], results: &[Reg]);
}

fn walk(code: &[SInst], pos: &mut u32, v: &mut impl Visit) {
    v.open();
    for (index, inst) in code.iter().enumerate() {
        *pos += 1;
        v.enter(*pos, index, inst);
        match inst {
            SInst::If { then_body, then_vals, else_body, else_vals, results, .. } => {
                walk(then_body, pos, v);
                *pos += 1;
                v.if_end(*pos, then_vals, true, results);
                walk(else_body, pos, v);
                *pos += 1;
                v.if_end(*pos, else_vals, false, results);
            }
            SInst::Loop { lower, upper, step, init, iv, args, body, next, results, iv_dtype } => {
                v.loop_start(*pos, *iv, *iv_dtype, args, init);
                walk(body, pos, v);
                *pos += 1;
                v.loop_end(*pos, [*lower, *upper, *step, *iv], next, results);
            }
            _ => {}
        }
    }
    v.close();
}

/// What an instruction itself defines and reads; for control flow, what it reads on entry (its
/// results are defined where its regions end).
fn entry(inst: &SInst, warp: u32, widths: &std::collections::HashMap<Reg, u32>) -> Access {
    match inst {
        SInst::If { cond, .. } => Access { defs: vec![], uses: vec![*cond] },
        SInst::Loop { lower, upper, step, init, .. } => {
            Access { defs: vec![], uses: [*lower, *upper, *step].into_iter().chain(init.iter().copied()).collect() }
        }
        _ => access(inst, warp, widths),
    }
}

/// First pass: where each pure instruction's first user sits in its block, and so the position
/// the instruction is counted at.
#[derive(Default)]
struct Sink {
    warp: u32,
    /// The open blocks' ids and the index of the instruction being visited in each.
    stack: Vec<(usize, usize)>,
    next_block: usize,
    /// Per block: each instruction's recorded position and whether it is pure.
    blocks: Vec<Vec<(u32, bool)>>,
    /// Pure instructions' results: their block and index.
    defined: std::collections::HashMap<Reg, (usize, usize)>,
    /// Per pure instruction (block, index): the least index in its block that reads a result.
    first_user: std::collections::HashMap<(usize, usize), usize>,
}

impl Visit for Sink {
    fn open(&mut self) {
        self.stack.push((self.next_block, 0));
        self.blocks.push(Vec::new());
        self.next_block += 1;
    }
    fn close(&mut self) {
        self.stack.pop();
    }
    fn enter(&mut self, pos: u32, index: usize, inst: &SInst) {
        let Some(top) = self.stack.last_mut() else { return };
        top.1 = index;
        let block = top.0;
        let pure = pure(inst);
        self.blocks[block].push((pos, pure));
        let a = entry(inst, self.warp, &Default::default());
        self.read(&a.uses);
        if pure {
            for (r, _) in a.defs {
                self.defined.insert(r, (block, index));
            }
        }
    }
    fn if_end(&mut self, _: u32, vals: &[Reg], _: bool, _: &[Reg]) {
        self.read(vals);
    }
    fn loop_start(&mut self, _: u32, _: Reg, _: DType, _: &[Reg], _: &[Reg]) {}
    fn loop_end(&mut self, _: u32, _: [Reg; 4], next: &[Reg], _: &[Reg]) {
        self.read(next);
    }
}

impl Sink {
    fn read(&mut self, regs: &[Reg]) {
        for r in regs {
            let Some(&(block, index)) = self.defined.get(r) else { continue };
            // The instruction of the defining block that contains this read.
            let Some(&(_, user)) = self.stack.iter().find(|(b, _)| *b == block) else { continue };
            let first = self.first_user.entry((block, index)).or_insert(user);
            *first = (*first).min(user);
        }
    }

    /// The position each recorded position is counted at.
    fn positions(&self) -> std::collections::HashMap<u32, Pos> {
        let mut at = std::collections::HashMap::new();
        for (b, insts) in self.blocks.iter().enumerate() {
            let mut placed: Vec<Pos> = insts.iter().map(|&(pos, _)| pos as Pos * SCALE).collect();
            // From the last instruction back, so that a chain sinks as a whole: each sunk
            // instruction goes below everything sunk before it, and so below its users.
            let mut sunk: Pos = 0;
            for i in (0..insts.len()).rev() {
                if !insts[i].1 {
                    continue;
                }
                if let Some(&u) = self.first_user.get(&(b, i)).filter(|&&u| u > i) {
                    sunk += 1;
                    placed[i] = placed[u] - sunk;
                }
            }
            for (i, &(pos, _)) in insts.iter().enumerate() {
                at.insert(pos, placed[i]);
            }
        }
        at
    }
}

/// Second pass: live ranges at the counted positions.
struct Live {
    warp: u32,
    at: std::collections::HashMap<u32, Pos>,
    /// Per register: width, definition, last use.
    ranges: std::collections::HashMap<Reg, (u32, Pos, Pos)>,
    widths: std::collections::HashMap<Reg, u32>,
    /// Open loops: their start and the registers read inside that were defined before it.
    loops: Vec<(Pos, Vec<Reg>)>,
    /// Registers read other than as an address.
    data: std::collections::HashSet<Reg>,
}

impl Live {
    fn def(&mut self, r: Reg, width: u32, pos: Pos) {
        self.widths.insert(r, width);
        // A register written again (an accumulator updated in place) is one long range.
        self.ranges.entry(r).and_modify(|range| range.2 = range.2.max(pos)).or_insert((width, pos, pos));
    }

    fn read(&mut self, r: Reg, pos: Pos) {
        self.data.insert(r);
        self.reach(r, pos);
    }

    /// Extends `r`'s range to `pos` without counting the read as a data use.
    fn reach(&mut self, r: Reg, pos: Pos) {
        if let Some(range) = self.ranges.get_mut(&r) {
            range.2 = range.2.max(pos);
            // Defined before an open loop: read again by every iteration.
            for (start, outer) in &mut self.loops {
                if range.1 < *start {
                    outer.push(r);
                }
            }
        }
    }

    fn width_of(&self, r: Reg) -> u32 {
        self.widths.get(&r).copied().unwrap_or(REG)
    }
}

impl Visit for Live {
    fn enter(&mut self, pos: u32, _: usize, inst: &SInst) {
        let at = self.at.get(&pos).copied().unwrap_or(pos as Pos * SCALE);
        let addresses = addresses(inst);
        let a = entry(inst, self.warp, &self.widths);
        for r in a.uses {
            if addresses.contains(&r) {
                self.reach(r, at);
            } else {
                self.read(r, at);
            }
        }
        for (r, width) in a.defs {
            self.def(r, width, at);
        }
    }
    fn if_end(&mut self, pos: u32, vals: &[Reg], first: bool, results: &[Reg]) {
        let at = pos as Pos * SCALE;
        for &v in vals {
            self.read(v, at);
        }
        if !first {
            for (&r, &v) in results.iter().zip(vals) {
                let width = self.width_of(v);
                self.def(r, width, at);
            }
        }
    }
    fn loop_start(&mut self, pos: u32, iv: Reg, iv_dtype: DType, args: &[Reg], init: &[Reg]) {
        let at = pos as Pos * SCALE;
        self.def(iv, width(iv_dtype), at);
        for (&a, &i) in args.iter().zip(init) {
            let width = self.width_of(i);
            self.def(a, width, at);
        }
        self.loops.push((at, Vec::new()));
    }
    fn loop_end(&mut self, pos: u32, bounds: [Reg; 4], next: &[Reg], results: &[Reg]) {
        let at = pos as Pos * SCALE;
        for &v in next {
            self.read(v, at);
        }
        // The bounds and the induction variable are read at every back edge; a carried value's
        // register is the one its next value takes (coalesced), so it lives only to its last
        // read in the body.
        for r in bounds {
            self.read(r, at);
        }
        let (_, outer) = self.loops.pop().unwrap_or_default();
        for r in outer {
            if let Some(range) = self.ranges.get_mut(&r) {
                range.2 = range.2.max(at);
            }
        }
        for (&r, &n) in results.iter().zip(next) {
            let width = self.width_of(n);
            self.def(r, width, at);
        }
    }
}

/// The most 32-bit registers live at once in `code`.
pub(super) fn peak(code: &[SInst], warp: u32) -> u32 {
    let mut sink = Sink { warp, ..Sink::default() };
    walk(code, &mut 0, &mut sink);
    let mut live =
        Live { warp, at: sink.positions(), ranges: Default::default(), widths: Default::default(), loops: Vec::new(), data: Default::default() };
    walk(code, &mut 0, &mut live);
    // A sweep over the ranges: +width at the definition, -width at the last use. Ends sort
    // before starts at one position: an instruction's result may take the register of an
    // operand it reads for the last time (an accumulator updated in place), and a value never
    // read still takes its register for the instruction that defines it.
    let mut events: Vec<(Pos, i64)> = Vec::with_capacity(live.ranges.len() * 2);
    for (r, &(width, def, last)) in &live.ranges {
        let width = if live.data.contains(r) || last == def { width } else { 0 };
        events.push((def, width as i64));
        events.push((last.max(def + 1), -(width as i64)));
    }
    events.sort_by_key(|&(p, d)| (p, d));
    let (mut now, mut best) = (0i64, 0i64);
    for (_, d) in events {
        now += d;
        best = best.max(now);
    }
    (best as u32).div_ceil(REG)
}

#[cfg(test)]
mod tests {
    use crate::gpu::lower::LowerOptions;
    use crate::gpu::{simt, Target};
    use crate::text::parse;

    fn peak(text: &str, warps: u32) -> u32 {
        let program = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        simt::compile(&program, &Target::cuda_sm80(), &LowerOptions::new(warps)).unwrap().peak_registers()
    }

    /// A program over `x` and `y` of `dtype` whose body starts with `%5`, this program's `n`
    /// offsets (`%0` to `%5` computed for it), followed by `body`.
    fn with_offsets(n: usize, dtype: &str, body: &str) -> String {
        format!(
            "program p(x: buffer<{dtype}, read>, y: buffer<{dtype}, write>) grid 1 {{
  %0 = program_id 0 : i32
  %1 = const {n} : i32
  %2 = mul %0, %1 : i32
  %3 = arange 0, {n} : [{n}]xi32
  %4 = splat %2 : [{n}]xi32
  %5 = add %4, %3 : [{n}]xi32
{body}
}}"
        )
    }

    /// A row held across its reduction and used again after it: `n` elements of `dtype`.
    fn normalize(n: usize, dtype: &str) -> String {
        let body = format!(
            "  %6 = load x[%5] : [{n}]x{dtype}
  %7 = reduce sum %6, axis 0 : {dtype}
  %8 = splat %7 : [{n}]x{dtype}
  %9 = sub %6, %8 : [{n}]x{dtype}
  store y[%5], %9"
        );
        with_offsets(n, dtype, &body)
    }

    #[test]
    fn a_tile_held_across_a_reduction_takes_its_elements_per_thread() {
        // 1024 f32 on one warp: 32 per thread, live from the load to the store.
        let one = peak(&normalize(1024, "f32"), 1);
        let four = peak(&normalize(1024, "f32"), 4);
        assert!((32..32 + 16).contains(&one), "one warp: {one}");
        assert!((8..8 + 16).contains(&four), "four warps: {four}");
        // The 24 elements a thread no longer holds, give or take the cross-warp step's scalars.
        assert!((22..=26).contains(&(one - four)), "{one} against {four}");
    }

    #[test]
    fn wide_values_take_two_registers_and_half_words_pack() {
        let i32s = peak(&normalize(1024, "i32"), 1);
        let i64s = peak(&normalize(1024, "i64"), 1);
        let f16s = peak(&normalize(1024, "f16"), 1);
        assert!(i64s >= i32s + 32, "i64 {i64s} against i32 {i32s}");
        assert!(f16s + 16 <= i32s, "f16 {f16s} against i32 {i32s}");
    }

    #[test]
    fn addresses_are_not_held_and_arithmetic_is_counted_at_its_use() {
        // Offsets computed for the whole tile before the loads, used by the store again at the
        // end: folded into the memory instructions, they add nothing to the loaded values.
        let n = 1024;
        let body = format!(
            "  %6 = const 3 : i32
  %7 = splat %6 : [{n}]xi32
  %8 = mul %5, %7 : [{n}]xi32
  %9 = load x[%8] : [{n}]xf32
  %10 = const 2.0 : f32
  %11 = splat %10 : [{n}]xf32
  %12 = mul %9, %11 : [{n}]xf32
  store y[%8], %12"
        );
        let text = with_offsets(n, "f32", &body);
        let held = peak(&text, 1);
        assert!((32..32 + 8).contains(&held), "{held}: the 32 loaded values and a few scalars");
    }

    #[test]
    fn a_loop_carried_tile_is_counted_once() {
        // acc = acc + x[i]: the carried value and its next share registers, the tile loaded in
        // the body beside them; 256 f32 on one warp is 8 per thread.
        let text = "program p(x: buffer<f32, read>, y: buffer<f32, write>, n: i32) grid 1 {
  %0 = arange 0, 256 : [256]xi32
  %1 = const 0.0 : f32
  %2 = splat %1 : [256]xf32
  %3 = arg 2 : i32
  %4 = const 0 : i32
  %5 = const 1 : i32
  %6 = for %4 to %3 step %5 iter(%2) : [256]xf32 body(%7: i32, %8: [256]xf32) {
    %9 = const 256 : i32
    %10 = mul %7, %9 : i32
    %11 = splat %10 : [256]xi32
    %12 = add %11, %0 : [256]xi32
    %13 = load x[%12] : [256]xf32
    %14 = add %8, %13 : [256]xf32
    yield %14
  }
  store y[%0], %6
}";
        let held = peak(text, 1);
        assert!((16..16 + 8).contains(&held), "{held}: 8 carried and 8 loaded per thread");
    }
}
