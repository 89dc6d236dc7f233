//! Checked launches: a tile-IR to tile-IR pass that makes a program record its first fault.
//!
//! [`instrument`] rewrites a verified program so that it checks, on every lane, what the
//! interpreter checks: each `load`, `store` and atomic offset against its buffer's length, each
//! integer `div` / `rem` divisor against zero, each integer shift amount against the width, and
//! each `device_assert`. Every backend runs the result unchanged, so a fault a GPU would pass
//! over silently (or turn into undefined behaviour) is reported with the op's source location,
//! the program id and the lane, in the interpreter's words ([`Fault`]'s message is the
//! [`crate::interp::InterpError`] message for the same fault).
//!
//! The checked program takes, after the original parameters, a fault record
//! (`buffer<i32, read_write>` of [`FAULT_WORDS`] zeroed words) and one scalar per buffer
//! parameter holding its length ([`LengthParam`]). What it does differently:
//! - an access's mask becomes `mask & 0 <= offsets < len`, so the checked program never touches
//!   memory out of bounds, whatever the backend; the lanes masked in but out of bounds are the
//!   fault (masked-off lanes never are);
//! - a division whose divisor is zero divides by 1 instead, and a shift by an amount outside
//!   `0..bits` shifts by 0, so no backend meets undefined behaviour;
//! - `device_assert` disappears; its failing lanes are the fault.
//!
//! Recording the first fault: each site reduces its faulting lanes to the lowest one (the lane
//! the interpreter would name), then one compare-and-swap of word 0 from 0 to the site's id + 1
//! picks a single winner in the whole grid, which alone writes the program id, the lane and the
//! offending value into the following words. Working on scalars after the reduction keeps the
//! record independent of how the lowering spreads a tile over threads: an atomic's old value is
//! the same in every thread only for a scalar. A program with no fault writes nothing, and an
//! unchecked program is exactly the program without this pass.
//!
//! Not checked: integer divisions and shifts inside a custom combine function (a combine is a
//! pure scalar function and cannot write the record); they run as written.

use std::collections::HashMap;
use std::fmt;

use crate::dtype::{DType, Scalar};
use crate::ir::*;
use crate::verify::{verify, VerifyError};

/// Words in a fault record: the site id + 1 (0: no fault), the program id (x, y, z), the lane,
/// the offending value's low and high 32 bits, and one spare.
pub const FAULT_WORDS: usize = 8;

/// Word index of the site id + 1 in a fault record.
const WORD_SITE: i64 = 0;
/// Word index of the program id's x; y and z follow.
const WORD_PID: i64 = 1;
const WORD_LANE: i64 = 4;
const WORD_VALUE_LO: i64 = 5;
const WORD_VALUE_HI: i64 = 6;

/// Why a program cannot be instrumented, or a fault record cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstrumentError {
    #[error("program `{program}` is invalid: {source}")]
    Verify { program: String, source: Box<VerifyError> },
    #[error("the checked form of program `{program}` does not verify (a bug in the instrumentation): {source}")]
    Checked { program: String, source: Box<VerifyError> },
    #[error("the fault record of `{program}` holds {got} words, expected {FAULT_WORDS}")]
    RecordSize { program: String, got: usize },
    #[error("the fault record of `{program}` names site {site}, but the program has {count} sites")]
    RecordSite { program: String, site: i64, count: usize },
}

/// What a site checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SiteKind {
    /// An access's offsets against the length of buffer parameter `buffer` (called `name`).
    OutOfBounds { buffer: BufferId, name: String, offsets: DType },
    /// An integer division's divisor against zero.
    DivisionByZero,
    /// A shift amount of dtype `amount` against `0..bits`.
    Shift { amount: DType, bits: u32 },
    /// A `device_assert`.
    Assert { message: String },
}

/// One checked instruction: its op's name and source location, and what it checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub op: String,
    pub loc: Loc,
    pub kind: SiteKind,
}

/// A length scalar the checked program takes: the buffer it bounds and how it is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LengthParam {
    /// Index of the scalar among the checked program's parameters.
    pub param: u32,
    /// The buffer parameter it bounds (the same index in the original and the checked program).
    pub buffer: BufferId,
    /// `i64` where the program indexes the buffer with i64 offsets, `u32` otherwise (so that a
    /// target without 64-bit integers runs the checked program too).
    pub dtype: DType,
}

impl LengthParam {
    /// The scalar to pass for a buffer of `len` elements. A u32 length saturates at 2^32 - 1,
    /// which every i32 or u32 offset but the largest u32 stays below.
    pub fn value(&self, len: usize) -> Scalar {
        let len = len as u64;
        Scalar::Int(match self.dtype {
            DType::I64 => len.min(i64::MAX as u64) as i64,
            _ => len.min(u32::MAX as u64) as i64,
        })
    }
}

/// A program made to record its first fault, and what it needs to be launched and read.
#[derive(Clone, Debug, PartialEq)]
pub struct Instrumented {
    /// The checked program: the original parameters, then the fault record, then the lengths.
    pub program: Program,
    /// Checked instructions, by site id.
    pub sites: Vec<Site>,
    /// Index of the fault record among the checked program's parameters.
    pub fault_param: u32,
    /// One per buffer parameter of the original program, in parameter order.
    pub lengths: Vec<LengthParam>,
}

/// A fault a checked launch recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub op: String,
    pub loc: Loc,
    pub pid: [u32; 3],
    /// The lane's row-major index in the op's tile (0 for a scalar).
    pub lane: usize,
    pub kind: FaultKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    OutOfBounds { offset: i64, buffer: String, len: usize },
    DivisionByZero,
    ShiftOutOfRange { amount: i64, bits: u32 },
    AssertFailed { message: String },
}

impl fmt::Display for Fault {
    /// The interpreter's message for the same fault.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Fault { op, loc, pid, lane, kind } = self;
        match kind {
            FaultKind::OutOfBounds { offset, buffer, len } => {
                write!(f, "`{op}` at {loc}, program {pid:?}, lane {lane}: offset {offset} is out of bounds of buffer `{buffer}` ({len} elements)")
            }
            FaultKind::DivisionByZero => write!(f, "`{op}` at {loc}, program {pid:?}, lane {lane}: integer division by zero"),
            FaultKind::ShiftOutOfRange { amount, bits } => {
                write!(f, "`{op}` at {loc}, program {pid:?}, lane {lane}: shift by {amount} is outside 0..{bits}")
            }
            FaultKind::AssertFailed { message } => {
                write!(f, "`{op}` at {loc}, program {pid:?}, lane {lane}: assertion failed: {message}")
            }
        }
    }
}

impl std::error::Error for Fault {}

impl Instrumented {
    /// The fault in a record read back after a launch, or `None` when no lane faulted.
    /// `buffer_len(b)` is the length of buffer parameter `b` at the launch, for the message.
    pub fn fault(&self, record: &[i32], buffer_len: impl Fn(BufferId) -> usize) -> Result<Option<Fault>, InstrumentError> {
        let program = || self.program.name.clone();
        if record.len() != FAULT_WORDS {
            return Err(InstrumentError::RecordSize { program: program(), got: record.len() });
        }
        let word = |w: i64| record[w as usize];
        let id = word(WORD_SITE) as i64 - 1;
        if id < 0 {
            return Ok(None);
        }
        let site = self.sites.get(id as usize).ok_or(InstrumentError::RecordSite { program: program(), site: id, count: self.sites.len() })?;
        let pid = [0, 1, 2].map(|a| word(WORD_PID + a) as u32);
        let (lo, hi) = (word(WORD_VALUE_LO), word(WORD_VALUE_HI));
        // The value as its dtype reads it: sign- or zero-extended from its width.
        let value = |dtype: DType| -> i64 {
            match dtype {
                DType::I64 => ((hi as i64) << 32) | (lo as u32 as i64),
                DType::U32 => lo as u32 as i64,
                _ => lo as i64,
            }
        };
        let kind = match &site.kind {
            SiteKind::OutOfBounds { buffer, name, offsets } => {
                FaultKind::OutOfBounds { offset: value(*offsets), buffer: name.clone(), len: buffer_len(*buffer) }
            }
            SiteKind::DivisionByZero => FaultKind::DivisionByZero,
            SiteKind::Shift { amount, bits } => FaultKind::ShiftOutOfRange { amount: value(*amount), bits: *bits },
            SiteKind::Assert { message } => FaultKind::AssertFailed { message: message.clone() },
        };
        Ok(Some(Fault { op: site.op.clone(), loc: site.loc.clone(), pid, lane: word(WORD_LANE) as u32 as usize, kind }))
    }
}

/// Instruments a program (see the module doc). The program is verified first; the checked
/// program is verified before it is returned.
pub fn instrument(program: &Program) -> Result<Instrumented, InstrumentError> {
    verify(program).map_err(|source| InstrumentError::Verify { program: program.name.clone(), source: Box::new(source) })?;

    let mut params = program.params.clone();
    let taken = |params: &[Param], name: &str| params.iter().any(|p| p.name == name);
    let unique = |params: &[Param], base: &str| {
        let mut name = base.to_string();
        let mut k = 1;
        while taken(params, &name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    };
    let fault_param = params.len() as u32;
    let name = unique(&params, "faults");
    params.push(Param { name, kind: ParamKind::Buffer { dtype: DType::I32, access: Access::ReadWrite } });

    // A buffer indexed with i64 offsets anywhere gets an i64 length; the rest u32.
    let mut wide: Vec<bool> = vec![false; program.params.len()];
    program.walk(&mut |inst| {
        if let Op::Load { buffer, offsets, .. }
        | Op::Store { buffer, offsets, .. }
        | Op::Atomic { buffer, offsets, .. }
        | Op::AtomicCas { buffer, offsets, .. } = &inst.op
        {
            if program.ty(*offsets).dtype == DType::I64 {
                wide[*buffer as usize] = true;
            }
        }
    });
    let mut lengths = Vec::new();
    let mut length_of = HashMap::new();
    for (b, p) in program.params.iter().enumerate() {
        if let ParamKind::Buffer { .. } = p.kind {
            let dtype = if wide[b] { DType::I64 } else { DType::U32 };
            let name = unique(&params, &format!("{}_len", p.name));
            let lp = LengthParam { param: params.len() as u32, buffer: b as BufferId, dtype };
            params.push(Param { name, kind: ParamKind::Scalar { dtype } });
            length_of.insert(b as BufferId, lp);
            lengths.push(lp);
        }
    }

    let mut pass = Pass { src: program, values: program.values.clone(), sites: Vec::new(), fault: fault_param, length_of };
    let body = pass.block(&program.body);
    let Pass { values, sites, .. } = pass;
    let checked = Program { name: program.name.clone(), params, grid_rank: program.grid_rank, values, body };
    verify(&checked).map_err(|source| InstrumentError::Checked { program: program.name.clone(), source: Box::new(source) })?;
    Ok(Instrumented { program: checked, sites, fault_param, lengths })
}

struct Pass<'a> {
    src: &'a Program,
    /// The original arena, to which the checked program's new values are appended.
    values: Arena<ValueDecl>,
    sites: Vec<Site>,
    fault: BufferId,
    length_of: HashMap<BufferId, LengthParam>,
}

impl Pass<'_> {
    fn block(&mut self, b: &Block) -> Block {
        let mut out = Vec::with_capacity(b.insts.len());
        for inst in &b.insts {
            self.inst(inst, &mut out);
        }
        Block { args: b.args.clone(), insts: out }
    }

    fn inst(&mut self, inst: &Inst, out: &mut Vec<Inst>) {
        let mut op = inst.op.clone();
        // Loop bodies and branches are checked like the body; combine functions stay as written.
        match &mut op {
            Op::For { body, .. } => *body = self.block(body),
            Op::If { then_block, else_block, .. } => {
                *then_block = self.block(then_block);
                *else_block = self.block(else_block);
            }
            _ => {}
        }
        let mut e = Emit { values: &mut self.values, out, loc: inst.loc.clone() };
        let op_name = inst.op.name().to_string();
        match &mut op {
            Op::Load { buffer, offsets, mask, .. }
            | Op::Store { buffer, offsets, mask, .. }
            | Op::Atomic { buffer, offsets, mask, .. }
            | Op::AtomicCas { buffer, offsets, mask, .. } => {
                let (b, o) = (*buffer, *offsets);
                let lp = self.length_of[&b];
                let (ok, bad) = e.bounds(o, *mask, lp);
                let name = self.src.params[b as usize].name.clone();
                let odt = e.ty(o).dtype;
                let id = push_site(&mut self.sites, &op_name, &inst.loc, SiteKind::OutOfBounds { buffer: b, name, offsets: odt });
                e.record(self.fault, self.src.grid_rank, id, bad, Some(o));
                *mask = Some(ok);
            }
            Op::Binary { op: BinaryOp::Div | BinaryOp::Rem, rhs, .. } if e.ty(*rhs).dtype.is_int() => {
                let d = e.ty(*rhs).dtype;
                let shape = e.ty(*rhs).shape.clone();
                let zero = e.full(d, 0, &shape);
                let one = e.full(d, 1, &shape);
                let bad = e.cmp(CmpPred::Eq, *rhs, zero);
                let id = push_site(&mut self.sites, &op_name, &inst.loc, SiteKind::DivisionByZero);
                e.record(self.fault, self.src.grid_rank, id, bad, None);
                *rhs = e.select(bad, one, *rhs);
            }
            Op::Binary { op: BinaryOp::Shl | BinaryOp::Shr, rhs, .. } if e.ty(*rhs).dtype.is_int() => {
                let d = e.ty(*rhs).dtype;
                let shape = e.ty(*rhs).shape.clone();
                let bits = d.bits();
                // Every width below 64 holds its own bit count, except i1's.
                let bad = if d == DType::I1 {
                    *rhs
                } else {
                    let width = e.full(d, bits as i64, &shape);
                    let over = e.cmp(CmpPred::Ge, *rhs, width);
                    if d.is_signed_int() {
                        let zero = e.full(d, 0, &shape);
                        let under = e.cmp(CmpPred::Lt, *rhs, zero);
                        e.bin(BinaryOp::Or, under, over)
                    } else {
                        over
                    }
                };
                let id = push_site(&mut self.sites, &op_name, &inst.loc, SiteKind::Shift { amount: d, bits });
                e.record(self.fault, self.src.grid_rank, id, bad, Some(*rhs));
                let zero = e.full(d, 0, &shape);
                *rhs = e.select(bad, zero, *rhs);
            }
            Op::DeviceAssert { cond, message } => {
                let bad = e.unary(UnaryOp::Not, *cond);
                let id = push_site(&mut self.sites, &op_name, &inst.loc, SiteKind::Assert { message: message.clone() });
                e.record(self.fault, self.src.grid_rank, id, bad, None);
                return;
            }
            _ => {}
        }
        out.push(Inst { op, results: inst.results.clone(), loc: inst.loc.clone() });
    }
}

fn push_site(sites: &mut Vec<Site>, op: &str, loc: &Loc, kind: SiteKind) -> usize {
    sites.push(Site { op: op.to_string(), loc: loc.clone(), kind });
    sites.len() - 1
}

/// An integer constant of `dtype` (`i1` takes booleans).
fn int_scalar(dtype: DType, v: i64) -> Scalar {
    if dtype == DType::I1 {
        Scalar::Bool(v != 0)
    } else {
        Scalar::Int(v)
    }
}

/// Appends instructions, located at the checked op, to the block being rewritten.
struct Emit<'e> {
    values: &'e mut Arena<ValueDecl>,
    out: &'e mut Vec<Inst>,
    loc: Loc,
}

impl Emit<'_> {
    fn ty(&self, v: Value) -> &Type {
        &self.values[v]
    }

    /// Emits a one-result op.
    fn emit(&mut self, op: Op, ty: Type) -> Value {
        let r = self.values.append(ty);
        self.out.push(Inst { op, results: vec![r], loc: self.loc.clone() });
        r
    }

    fn konst(&mut self, dtype: DType, v: i64) -> Value {
        self.emit(Op::Const { value: int_scalar(dtype, v) }, Type::scalar(dtype))
    }

    fn splat(&mut self, x: Value, shape: &[usize]) -> Value {
        if shape.is_empty() {
            return x;
        }
        let dtype = self.ty(x).dtype;
        self.emit(Op::Splat { x }, Type::tile(dtype, shape))
    }

    fn full(&mut self, dtype: DType, v: i64, shape: &[usize]) -> Value {
        let c = self.konst(dtype, v);
        self.splat(c, shape)
    }

    fn bin(&mut self, op: BinaryOp, lhs: Value, rhs: Value) -> Value {
        let ty = self.ty(lhs).clone();
        self.emit(Op::Binary { op, lhs, rhs }, ty)
    }

    fn cmp(&mut self, pred: CmpPred, lhs: Value, rhs: Value) -> Value {
        let ty = self.ty(lhs).with_dtype(DType::I1);
        self.emit(Op::Cmp { pred, lhs, rhs }, ty)
    }

    fn unary(&mut self, op: UnaryOp, x: Value) -> Value {
        let ty = self.ty(x).clone();
        self.emit(Op::Unary { op, x }, ty)
    }

    fn select(&mut self, cond: Value, on_true: Value, on_false: Value) -> Value {
        let ty = self.ty(on_true).clone();
        self.emit(Op::Select { cond, on_true, on_false }, ty)
    }

    fn cast(&mut self, x: Value, dtype: DType) -> Value {
        if self.ty(x).dtype == dtype {
            return x;
        }
        let ty = self.ty(x).with_dtype(dtype);
        self.emit(Op::Cast { x }, ty)
    }

    fn and(&mut self, a: Option<Value>, b: Value) -> Value {
        match a {
            Some(a) => self.bin(BinaryOp::And, a, b),
            None => b,
        }
    }

    /// `(mask & in bounds, mask & !in bounds)` for an access through `offsets`.
    fn bounds(&mut self, offsets: Value, mask: Option<Value>, len: LengthParam) -> (Value, Value) {
        let t = self.ty(offsets).clone();
        let n = self.emit(Op::Arg { param: len.param }, Type::scalar(len.dtype));
        let n = self.splat(n, &t.shape);
        let below = match t.dtype {
            DType::U32 if len.dtype == DType::U32 => self.cmp(CmpPred::Lt, offsets, n),
            d => {
                // Signed offsets compare in the length's dtype once known to be non-negative;
                // u32 offsets against an i64 length widen, exactly.
                let wide = self.cast(offsets, len.dtype);
                let below = self.cmp(CmpPred::Lt, wide, n);
                if d.is_signed_int() {
                    let zero = self.full(d, 0, &t.shape);
                    let nonneg = self.cmp(CmpPred::Ge, offsets, zero);
                    self.bin(BinaryOp::And, nonneg, below)
                } else {
                    below
                }
            }
        };
        let ok = self.and(mask, below);
        let outside = self.unary(UnaryOp::Not, below);
        let bad = self.and(mask, outside);
        (ok, bad)
    }

    /// Each lane's row-major index in a tile of `shape` (i32), built from `arange`s so that the
    /// lowering computes it where it is used, in any layout.
    fn lanes(&mut self, shape: &[usize]) -> Value {
        let rank = shape.len();
        let mut acc: Option<Value> = None;
        let mut stride = 1i64;
        for d in (0..rank).rev() {
            let n = shape[d];
            let mut a = self.emit(Op::Arange { start: 0, end: n as i64 }, Type::tile(DType::I32, [n]));
            if stride != 1 {
                let s = self.full(DType::I32, stride, &[n]);
                a = self.bin(BinaryOp::Mul, a, s);
            }
            let mut cur = vec![n];
            for axis in 0..d {
                cur.insert(axis, 1);
                a = self.emit(Op::ExpandDims { x: a, axis: axis as u32 }, Type::tile(DType::I32, cur.clone()));
            }
            while cur.len() < rank {
                let axis = cur.len() as u32;
                cur.push(1);
                a = self.emit(Op::ExpandDims { x: a, axis }, Type::tile(DType::I32, cur.clone()));
            }
            if cur != shape {
                a = self.emit(Op::Broadcast { x: a }, Type::tile(DType::I32, shape));
            }
            acc = Some(match acc {
                Some(b) => self.bin(BinaryOp::Add, a, b),
                None => a,
            });
            stride *= n as i64;
        }
        acc.expect("a tile has at least one dimension")
    }

    /// Reduces every axis of `x` away with `combine`.
    fn reduce_all(&mut self, mut x: Value, combine: Combine) -> Value {
        while !self.ty(x).is_scalar() {
            let t = self.ty(x).clone();
            let axis = t.rank() - 1;
            let mut shape = t.shape.clone();
            shape.pop();
            x = self.emit(Op::Reduce { x, axis: axis as u32, combine: combine.clone() }, Type::tile(t.dtype, shape));
        }
        x
    }

    /// Records site `id` when any lane of `bad` holds: the lowest such lane, and `value` there.
    fn record(&mut self, fault: BufferId, grid_rank: u32, id: usize, bad: Value, value: Option<Value>) {
        let shape = self.ty(bad).shape.clone();
        let (any, lane, value) = if shape.is_empty() {
            let zero = self.konst(DType::I32, 0);
            (bad, zero, value)
        } else {
            let lanes = self.lanes(&shape);
            let none = self.full(DType::I32, i32::MAX as i64, &shape);
            let candidates = self.select(bad, lanes, none);
            let first = self.reduce_all(candidates, Combine::Min);
            let none = self.konst(DType::I32, i32::MAX as i64);
            let any = self.cmp(CmpPred::Ne, first, none);
            // The value at the first lane: the only term of the sum that is not zero.
            let value = value.map(|v| {
                let d = self.ty(v).dtype;
                let at = self.splat(first, &shape);
                let here = self.cmp(CmpPred::Eq, lanes, at);
                let zero = self.full(d, 0, &shape);
                let only = self.select(here, v, zero);
                self.reduce_all(only, Combine::Sum)
            });
            (any, first, value)
        };
        let zero = self.konst(DType::I32, 0);
        let tag = self.konst(DType::I32, id as i64 + 1);
        let old = self.emit(Op::AtomicCas { buffer: fault, offsets: zero, cmp: zero, value: tag, mask: Some(any) }, Type::scalar(DType::I32));
        let first = self.cmp(CmpPred::Eq, old, zero);
        let won = self.bin(BinaryOp::And, any, first);
        let mut words: Vec<(i64, Value)> = Vec::new();
        for axis in 0..3 {
            let p = if axis < grid_rank { self.emit(Op::ProgramId { axis }, Type::scalar(DType::I32)) } else { self.konst(DType::I32, 0) };
            words.push((WORD_PID + axis as i64, p));
        }
        words.push((WORD_LANE, lane));
        if let Some(v) = value {
            let lo = self.cast(v, DType::I32);
            words.push((WORD_VALUE_LO, lo));
            if self.ty(v).dtype == DType::I64 {
                let k = self.konst(DType::I64, 32);
                let high = self.bin(BinaryOp::Shr, v, k);
                let hi = self.cast(high, DType::I32);
                words.push((WORD_VALUE_HI, hi));
            }
        }
        for (w, v) in words {
            let at = self.konst(DType::I32, w);
            self.out.push(Inst {
                op: Op::Store { buffer: fault, offsets: at, value: v, mask: Some(won) },
                results: Vec::new(),
                loc: self.loc.clone(),
            });
        }
    }
}
