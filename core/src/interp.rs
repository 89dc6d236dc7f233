//! The interpreter: runs a tile program over its grid on the CPU.
//!
//! It is the oracle every backend is tested against and the debugging mode users expect
//! (Triton's `TRITON_INTERPRET=1`), so it favours exact, checked semantics over speed:
//! - program instances run in parallel (rayon), as on a GPU; their buffer accesses go through
//!   relaxed atomics ([`HostBuffer`]), so racing instances behave like racing GPU blocks;
//! - values of a float dtype are held as f32 and rounded to their dtype after every operation,
//!   which gives bit-exact f16/bf16 results for `+ - * / sqrt fma` (f32 carries more than
//!   2p + 2 bits for p = 11 and 8, so the double rounding is innocuous) and correctly rounded
//!   results of the f32 functions for the transcendental ones;
//! - integers are held as i64 and wrapped to their width after every operation;
//! - a masked-off lane reads `other` and never touches memory; an unmasked out-of-bounds access,
//!   an integer division by zero, a shift past the width, a zero loop step and a failed
//!   `device_assert` are errors that name the operation, its source location, the program id
//!   and the offending value (or the assert's message).
//!
//! The program is verified before it runs, so nothing below panics on a program the verifier
//! accepted.

use half::{bf16, f16};
use rayon::prelude::*;
use std::collections::HashMap;

use crate::buffer::HostBuffer;
use crate::dtype::DType;
use crate::ir::*;
use crate::verify::{verify, VerifyError};

/// A launch argument, one per program parameter, in order.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Buffer(&'a HostBuffer),
    Scalar(Scalar),
}

/// Why a launch failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    #[error("program `{program}` is invalid: {source}")]
    Verify { program: String, source: VerifyError },
    #[error("program `{program}` takes {want} arguments, the launch passed {got}")]
    ArgCount { program: String, want: usize, got: usize },
    #[error("argument {index} (`{param}`): expected {want}, got {got}")]
    ArgType { index: usize, param: String, want: String, got: String },
    #[error("`{op}` at {loc}, program {pid:?}, lane {lane}: offset {offset} is out of bounds of buffer `{buffer}` ({len} elements)")]
    OutOfBounds { op: String, loc: Loc, pid: [u32; 3], lane: usize, offset: i64, buffer: String, len: usize },
    #[error("`{op}` at {loc}, program {pid:?}, lane {lane}: integer division by zero")]
    DivisionByZero { op: String, loc: Loc, pid: [u32; 3], lane: usize },
    #[error("`{op}` at {loc}, program {pid:?}, lane {lane}: shift by {amount} is outside 0..{bits}")]
    ShiftOutOfRange { op: String, loc: Loc, pid: [u32; 3], lane: usize, amount: i64, bits: u32 },
    #[error("`device_assert` at {loc}, program {pid:?}, lane {lane}: assertion failed: {message}")]
    AssertFailed { loc: Loc, pid: [u32; 3], lane: usize, message: String },
    #[error("`for` at {loc}, program {pid:?}: the loop step is zero")]
    ZeroStep { loc: Loc, pid: [u32; 3] },
    #[error("grid {grid:?} has {total} program instances, more than the interpreter's limit of 2^32")]
    GridTooLarge { grid: [u32; 3], total: u64 },
}

/// How the interpreter computes floats.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InterpOptions {
    /// Model a device that flushes subnormals (no `shaderDenormPreserveFloat32`): arithmetic,
    /// comparisons, conversions, reductions' combines and `dot` read a subnormal operand as a
    /// zero of its sign and flush a subnormal result; moves (loads, stores, `select`,
    /// broadcasts, reshapes, a cast to its own dtype) and `neg` / `abs` keep the bits. What a
    /// device does is a choice per instruction within these two models, so an element that
    /// this model (or [`InterpOptions::arithmetic_flush_only`]'s) changes is explained by
    /// flushing (the fuzzer's rule).
    pub flush_subnormals: bool,
    /// With `flush_subnormals`: only float arithmetic flushes. Comparisons read their operands
    /// as they are, and bf16 widens to f32 by its bits (a shift on every backend). NVIDIA's
    /// Vulkan driver without DenormPreserve does this, so `f32(b) >= fma(0, y, f32(b))` of a
    /// bf16 subnormal `b < 0` is false there: a per-instruction choice the all-flushing model
    /// misses.
    pub arithmetic_flush_only: bool,
    /// With `flush_subnormals`: bf16 widens to f32 by its bits, everything else flushes
    /// (comparisons included). NVIDIA's Vulkan driver chooses this too, per instruction:
    /// `select(x < f32(b), x, f32(b))` of a bf16 subnormal `b > 0` and `x = 0` stored `f32(b)`
    /// unflushed there (the comparison read `b` as zero), which neither of the other two models
    /// gives.
    pub bf16_widening_keeps: bool,
    /// With `flush_subnormals`: f16 subnormals are kept everywhere, only f32 (and bf16, whose
    /// arithmetic is f32's) flushes. A SPIR-V module that uses f16 on a target with
    /// `Target::f16_rte` declares DenormPreserve for 16 bits, so the driver must keep them
    /// while it may still flush f32 subnormals.
    pub f16_subnormals_kept: bool,
    /// With `flush_subnormals`: only the instruction that defines this value flushes (its
    /// operands and its result, as the flags above say), every other keeps subnormals. A
    /// device without DenormPreserve chooses per instruction: NVIDIA's Vulkan driver flushed
    /// the addend of `fma(a, 0, x + x) == x + x` for a subnormal `x` and kept it in the
    /// addition and the comparison, storing false, which no model that flushes every
    /// instruction of a kind gives. The fuzzer runs one such model per float instruction.
    pub flush_only_at: Option<Value>,
    /// Model a device whose `dot` of f16, bf16 or tf32 operands runs on matrix instructions: a zero
    /// element of the result is +0 (NVIDIA's tensor cores do not keep the sign of a zero sum,
    /// so a -0 accumulator plus -0 products comes back +0).
    pub matrix_zero_positive: bool,
    /// Model WGSL's rule that a shader may assume no infinities and NaNs (the naga path): every
    /// float value that is not finite where it is made (an operation's result, a load, an
    /// argument, a conversion that overflows) is replaced by this value. Run with two different
    /// values, the elements that change are those that depend on a non-finite value, which such
    /// a device leaves indeterminate (the fuzzer's `non-finite` rule).
    pub nonfinite_as: Option<f32>,
    /// Model a compiler free to contract (SPIR-V without `NoContraction`, the naga path): a
    /// float addition or subtraction of a multiplication's result is one fused multiply-add,
    /// rounded once.
    pub contract: bool,
}

/// Runs `program` once per point of `grid` with `args`.
pub fn run(program: &Program, grid: [u32; 3], args: &[Arg<'_>]) -> Result<(), InterpError> {
    run_with(program, grid, args, InterpOptions::default())
}

/// [`run`] with `options`.
pub fn run_with(program: &Program, grid: [u32; 3], args: &[Arg<'_>], options: InterpOptions) -> Result<(), InterpError> {
    verify(program).map_err(|source| InterpError::Verify { program: program.name.clone(), source })?;
    check_args(program, args)?;
    let total = grid.iter().map(|&g| g as u64).product::<u64>();
    if total > u32::MAX as u64 {
        return Err(InterpError::GridTooLarge { grid, total });
    }
    // With `contract`, each float multiplication's operands, by its result.
    let mut muls = HashMap::new();
    if options.contract {
        program.walk(&mut |inst| {
            if let Op::Binary { op: BinaryOp::Mul, lhs, rhs } = inst.op {
                if program.ty(lhs).dtype.is_float() {
                    muls.insert(inst.results[0], (lhs, rhs));
                }
            }
        });
    }
    (0..total).into_par_iter().try_for_each(|lin| {
        let pid = [(lin % grid[0] as u64) as u32, ((lin / grid[0] as u64) % grid[1] as u64) as u32, (lin / (grid[0] as u64 * grid[1] as u64)) as u32];
        let mut inst = Instance {
            program,
            args,
            grid,
            pid,
            env: vec![None; program.values.len()],
            ftz: options.flush_subnormals,
            ftz_f16: options.flush_subnormals && !options.f16_subnormals_kept,
            ftz_beyond_arithmetic: options.flush_subnormals && !options.arithmetic_flush_only,
            ftz_bf16_widening: options.flush_subnormals && !options.arithmetic_flush_only && !options.bf16_widening_keeps,
            matrix_zero_positive: options.matrix_zero_positive,
            nonfinite_as: options.nonfinite_as,
            flush_only_at: options.flush_only_at.filter(|_| options.flush_subnormals),
            muls: &muls,
        };
        inst.block(&program.body, &[]).map(|_| ())
    })
}

fn check_args(program: &Program, args: &[Arg<'_>]) -> Result<(), InterpError> {
    if args.len() != program.params.len() {
        return Err(InterpError::ArgCount { program: program.name.clone(), want: program.params.len(), got: args.len() });
    }
    for (index, (param, arg)) in program.params.iter().zip(args).enumerate() {
        let mismatch = |want: String, got: String| InterpError::ArgType { index, param: param.name.clone(), want, got };
        match (&param.kind, arg) {
            (ParamKind::Buffer { dtype, .. }, Arg::Buffer(b)) => {
                if b.dtype() != *dtype {
                    return Err(mismatch(format!("a buffer of {dtype}"), format!("a buffer of {}", b.dtype())));
                }
            }
            (ParamKind::Scalar { dtype }, Arg::Scalar(s)) => {
                if !s.fits(*dtype) {
                    return Err(mismatch(format!("a {dtype} scalar"), format!("{s}")));
                }
            }
            (ParamKind::Buffer { dtype, .. }, Arg::Scalar(s)) => {
                return Err(mismatch(format!("a buffer of {dtype}"), format!("the scalar {s}")));
            }
            (ParamKind::Scalar { dtype }, Arg::Buffer(b)) => {
                return Err(mismatch(format!("a {dtype} scalar"), format!("a buffer of {}", b.dtype())));
            }
        }
    }
    Ok(())
}

/// The elements of one value, row-major. Scalars have one element.
#[derive(Clone, Debug)]
enum Data {
    Int(Vec<i64>),
    Float(Vec<f32>),
}

impl Data {
    fn len(&self) -> usize {
        match self {
            Data::Int(v) => v.len(),
            Data::Float(v) => v.len(),
        }
    }
    fn ints(&self) -> &[i64] {
        match self {
            Data::Int(v) => v,
            // The verifier guarantees dtypes, so this arm is never taken for a verified program.
            Data::Float(_) => &[],
        }
    }
    fn floats(&self) -> &[f32] {
        match self {
            Data::Float(v) => v,
            Data::Int(_) => &[],
        }
    }
    /// Elements as f64, whatever the representation.
    fn get_f64(&self, i: usize) -> f64 {
        match self {
            Data::Int(v) => v[i] as f64,
            Data::Float(v) => v[i] as f64,
        }
    }
    /// Gathers `idx` (indices into self).
    fn gather(&self, idx: &[usize]) -> Data {
        match self {
            Data::Int(v) => Data::Int(idx.iter().map(|&i| v[i]).collect()),
            Data::Float(v) => Data::Float(idx.iter().map(|&i| v[i]).collect()),
        }
    }
}

/// Rounds an f32 to the nearest value of a float dtype (ties to even).
pub(crate) fn round_to(dtype: DType, x: f32) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(x).to_f32(),
        DType::BF16 => bf16::from_f32(x).to_f32(),
        _ => x,
    }
}

/// Wraps an i64 to an integer dtype's width (sign- or zero-extending back).
pub(crate) fn wrap_to(dtype: DType, x: i64) -> i64 {
    match dtype {
        DType::I1 => x & 1,
        DType::I8 => x as i8 as i64,
        DType::U8 => x as u8 as i64,
        DType::I16 => x as i16 as i64,
        DType::I32 => x as i32 as i64,
        DType::U32 => x as u32 as i64,
        _ => x,
    }
}

pub(crate) fn from_bits(dtype: DType, bits: u64) -> Result<i64, f32> {
    match dtype {
        DType::F16 => Err(f16::from_bits(bits as u16).to_f32()),
        DType::BF16 => Err(bf16::from_bits(bits as u16).to_f32()),
        DType::F32 => Err(f32::from_bits(bits as u32)),
        d => Ok(wrap_to(d, bits as i64)),
    }
}

pub(crate) fn float_bits(dtype: DType, x: f32) -> u64 {
    match dtype {
        DType::F16 => f16::from_f32(x).to_bits() as u64,
        DType::BF16 => bf16::from_f32(x).to_bits() as u64,
        _ => x.to_bits() as u64,
    }
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// For each element of `out_shape` (row-major), the source index given per-dimension source
/// strides (0 for broadcast dimensions).
fn strided_indices(out_shape: &[usize], src_strides: &[usize]) -> Vec<usize> {
    let n: usize = out_shape.iter().product();
    let mut idx = Vec::with_capacity(n);
    let mut counter = vec![0usize; out_shape.len()];
    for _ in 0..n {
        idx.push(counter.iter().zip(src_strides).map(|(c, s)| c * s).sum());
        for d in (0..out_shape.len()).rev() {
            counter[d] += 1;
            if counter[d] < out_shape[d] {
                break;
            }
            counter[d] = 0;
        }
    }
    idx
}

struct Instance<'a> {
    program: &'a Program,
    args: &'a [Arg<'a>],
    grid: [u32; 3],
    pid: [u32; 3],
    env: Vec<Option<Data>>,
    /// [`InterpOptions::flush_subnormals`].
    ftz: bool,
    /// Whether f16 values flush too ([`InterpOptions::f16_subnormals_kept`]).
    ftz_f16: bool,
    /// Whether comparisons and bf16 widening flush ([`InterpOptions::arithmetic_flush_only`]).
    ftz_beyond_arithmetic: bool,
    /// Whether bf16 widening flushes ([`InterpOptions::bf16_widening_keeps`]).
    ftz_bf16_widening: bool,
    /// [`InterpOptions::matrix_zero_positive`].
    matrix_zero_positive: bool,
    /// [`InterpOptions::nonfinite_as`].
    nonfinite_as: Option<f32>,
    /// [`InterpOptions::flush_only_at`] (with `flush_subnormals`).
    flush_only_at: Option<Value>,
    /// [`InterpOptions::contract`]: the operands of each float multiplication, by its result.
    muls: &'a HashMap<Value, (Value, Value)>,
}

type R<T> = Result<T, InterpError>;

impl<'a> Instance<'a> {
    /// `x` as a flushing device reads or writes it (see [`InterpOptions`]).
    fn fz(&self, dtype: DType, x: f32) -> f32 {
        if self.ftz && (dtype != DType::F16 || self.ftz_f16) {
            flush_subnormal(dtype, x)
        } else {
            x
        }
    }

    fn get(&self, v: Value) -> &Data {
        // Defined before use: the verifier checked dominance.
        self.env[v.index()].as_ref().expect("verified programs define values before use")
    }

    fn ty(&self, v: Value) -> &'a Type {
        self.program.ty(v)
    }

    fn set(&mut self, v: Value, d: Data) {
        let d = match (self.nonfinite_as, d) {
            (Some(r), Data::Float(xs)) => Data::Float(xs.into_iter().map(|x| if x.is_finite() { x } else { r }).collect()),
            (_, d) => d,
        };
        self.env[v.index()] = Some(d);
    }

    /// Runs a block with `args` bound; returns the values of its `yield` (empty for the body).
    fn block(&mut self, block: &'a Block, args: &[Data]) -> R<Vec<Data>> {
        for (&a, d) in block.args.iter().zip(args) {
            self.set(a, d.clone());
        }
        for inst in &block.insts {
            if let Op::Yield { values } = &inst.op {
                return Ok(values.iter().map(|&v| self.get(v).clone()).collect());
            }
            if let Some(at) = self.flush_only_at {
                self.ftz = inst.results.first() == Some(&at);
            }
            self.inst(inst)?;
        }
        Ok(Vec::new())
    }

    fn inst(&mut self, inst: &'a Inst) -> R<()> {
        let res = |i: usize| inst.results[i];
        let out = match &inst.op {
            Op::Arg { param } => match self.args[*param as usize] {
                Arg::Scalar(s) => {
                    let dtype = self.ty(res(0)).dtype;
                    scalar_data(s, dtype)
                }
                Arg::Buffer(_) => unreachable!("arguments were checked against the parameters"),
            },
            Op::ProgramId { axis } => Data::Int(vec![self.pid[*axis as usize] as i64]),
            Op::NumPrograms { axis } => Data::Int(vec![self.grid[*axis as usize] as i64]),
            Op::Const { value } => scalar_data(*value, self.ty(res(0)).dtype),
            Op::Arange { start, end } => Data::Int((*start..*end).collect()),
            Op::Splat { x } => {
                let n = self.ty(res(0)).numel();
                match self.get(*x) {
                    Data::Int(v) => Data::Int(vec![v[0]; n]),
                    Data::Float(v) => Data::Float(vec![v[0]; n]),
                }
            }
            Op::Broadcast { x } => {
                let src = &self.ty(*x).shape;
                let out_shape = &self.ty(res(0)).shape;
                let st: Vec<usize> = strides(src).iter().zip(src).map(|(&s, &d)| if d == 1 { 0 } else { s }).collect();
                self.get(*x).gather(&strided_indices(out_shape, &st))
            }
            Op::ExpandDims { x, .. } | Op::Reshape { x } => self.get(*x).clone(),
            Op::Trans { x, perm } => {
                let src_strides = strides(&self.ty(*x).shape);
                let st: Vec<usize> = perm.iter().map(|&p| src_strides[p as usize]).collect();
                self.get(*x).gather(&strided_indices(&self.ty(res(0)).shape, &st))
            }
            Op::Unary { op, x } => self.unary(*op, *x, inst)?,
            Op::Binary { op, lhs, rhs } => self.binary(*op, *lhs, *rhs, inst)?,
            Op::Cmp { pred, lhs, rhs } => {
                let p = *pred;
                match (self.get(*lhs), self.get(*rhs)) {
                    (Data::Int(a), Data::Int(b)) => Data::Int(a.iter().zip(b).map(|(x, y)| p.holds(Some(x.cmp(y))) as i64).collect()),
                    (Data::Float(a), Data::Float(b)) => {
                        let dtype = self.ty(*lhs).dtype;
                        let fz = |v: f32| if self.ftz_beyond_arithmetic { self.fz(dtype, v) } else { v };
                        Data::Int(a.iter().zip(b).map(|(&x, &y)| p.holds(fz(x).partial_cmp(&fz(y))) as i64).collect())
                    }
                    _ => unreachable!("verified: operands share a dtype"),
                }
            }
            Op::Select { cond, on_true, on_false } => {
                let c = self.get(*cond).ints();
                match (self.get(*on_true), self.get(*on_false)) {
                    (Data::Int(a), Data::Int(b)) => {
                        Data::Int(c.iter().zip(a.iter().zip(b)).map(|(&c, (&a, &b))| if c != 0 { a } else { b }).collect())
                    }
                    (Data::Float(a), Data::Float(b)) => {
                        Data::Float(c.iter().zip(a.iter().zip(b)).map(|(&c, (&a, &b))| if c != 0 { a } else { b }).collect())
                    }
                    _ => unreachable!("verified: both values share a dtype"),
                }
            }
            Op::Fma { a, b, c } => {
                let dtype = self.ty(res(0)).dtype;
                let (a, b, c) = (self.get(*a).floats(), self.get(*b).floats(), self.get(*c).floats());
                let f = |x: f32| self.fz(dtype, x);
                Data::Float((0..a.len()).map(|i| f(round_to(dtype, f(a[i]).mul_add(f(b[i]), f(c[i]))))).collect())
            }
            Op::Cast { x } => {
                let (from, to) = (self.ty(*x).dtype, self.ty(res(0)).dtype);
                // A cast to its own dtype is a move; bf16 to f32 is a shift where only
                // arithmetic flushes, or where bf16 widening keeps subnormals.
                let ftz = self.ftz && from != to && (self.ftz_bf16_widening || (from, to) != (DType::BF16, DType::F32));
                match (ftz, self.get(*x)) {
                    (true, Data::Float(v)) => {
                        let read = Data::Float(v.iter().map(|&a| self.fz(from, a)).collect());
                        match cast(&read, from, to) {
                            Data::Float(r) => Data::Float(r.into_iter().map(|a| self.fz(to, a)).collect()),
                            ints => ints,
                        }
                    }
                    (true, ints) => match cast(ints, from, to) {
                        Data::Float(r) => Data::Float(r.into_iter().map(|a| self.fz(to, a)).collect()),
                        other => other,
                    },
                    (false, x) => cast(x, from, to),
                }
            }
            Op::Load { buffer, offsets, mask, other } => self.load(inst, *buffer, *offsets, *mask, *other, res(0))?,
            Op::Store { buffer, offsets, value, mask } => {
                self.store(inst, *buffer, *offsets, *value, *mask)?;
                return Ok(());
            }
            Op::Atomic { op, buffer, offsets, value, mask } => self.atomic(inst, Some(*op), *buffer, *offsets, None, *value, *mask)?,
            Op::AtomicCas { buffer, offsets, cmp, value, mask } => self.atomic(inst, None, *buffer, *offsets, Some(*cmp), *value, *mask)?,
            Op::Reduce { x, axis, combine } => self.reduce(*x, *axis as usize, combine, res(0))?,
            Op::ReduceTuple { xs, axis, combine } => {
                let outs = self.reduce_tuple(xs, *axis as usize, combine)?;
                for (&r, d) in inst.results.iter().zip(outs) {
                    self.set(r, d);
                }
                return Ok(());
            }
            Op::Scan { x, axis, combine, reverse } => self.scan(*x, *axis as usize, combine, *reverse)?,
            Op::Dot { a, b, acc, precision } => self.dot(*a, *b, *acc, *precision, res(0)),
            Op::For { lower, upper, step, init, body } => {
                let lo = self.get(*lower).ints()[0];
                let hi = self.get(*upper).ints()[0];
                let st = self.get(*step).ints()[0];
                if st == 0 {
                    return Err(InterpError::ZeroStep { loc: inst.loc.clone(), pid: self.pid });
                }
                let iv_dtype = self.ty(*lower).dtype;
                let mut carried: Vec<Data> = init.iter().map(|&v| self.get(v).clone()).collect();
                let mut iv = lo;
                while (st > 0 && iv < hi) || (st < 0 && iv > hi) {
                    let mut args = Vec::with_capacity(carried.len() + 1);
                    args.push(Data::Int(vec![iv]));
                    args.append(&mut carried);
                    carried = self.block(body, &args)?;
                    // The induction variable lives in its dtype; stop rather than wrap around.
                    match iv.checked_add(st) {
                        Some(next) if wrap_to(iv_dtype, next) == next => iv = next,
                        _ => break,
                    }
                }
                for (&r, d) in inst.results.iter().zip(carried) {
                    self.set(r, d);
                }
                return Ok(());
            }
            Op::If { cond, then_block, else_block } => {
                let c = self.get(*cond).ints()[0] != 0;
                let outs = self.block(if c { then_block } else { else_block }, &[])?;
                for (&r, d) in inst.results.iter().zip(outs) {
                    self.set(r, d);
                }
                return Ok(());
            }
            Op::Yield { .. } => return Ok(()),
            Op::DeviceAssert { cond, message } => {
                // The lowest failing lane, as for every other fault the interpreter reports.
                if let Some(lane) = self.get(*cond).ints().iter().position(|&c| c == 0) {
                    return Err(InterpError::AssertFailed { loc: inst.loc.clone(), pid: self.pid, lane, message: message.clone() });
                }
                return Ok(());
            }
        };
        self.set(res(0), out);
        Ok(())
    }

    fn unary(&self, op: UnaryOp, x: Value, inst: &Inst) -> R<Data> {
        let dtype = self.ty(x).dtype;
        let _ = inst;
        Ok(match self.get(x) {
            Data::Int(v) => Data::Int(v.iter().map(|&a| unary_int(op, dtype, a)).collect()),
            // neg and abs only touch the sign bit: no device needs to flush for them.
            Data::Float(v) if matches!(op, UnaryOp::Neg | UnaryOp::Abs) => Data::Float(v.iter().map(|&a| unary_float(op, dtype, a)).collect()),
            Data::Float(v) => Data::Float(v.iter().map(|&a| self.fz(dtype, unary_float(op, dtype, self.fz(dtype, a)))).collect()),
        })
    }

    fn binary(&self, op: BinaryOp, lhs: Value, rhs: Value, inst: &Inst) -> R<Data> {
        let dtype = self.ty(lhs).dtype;
        Ok(match (self.get(lhs), self.get(rhs)) {
            (Data::Int(a), Data::Int(b)) => {
                let bits = dtype.bits();
                let mut out = Vec::with_capacity(a.len());
                for (lane, (&x, &y)) in a.iter().zip(b).enumerate() {
                    let r = binary_int(op, dtype, x, y).map_err(|e| match e {
                        IntFault::DivisionByZero => {
                            InterpError::DivisionByZero { op: inst.op.name().into(), loc: inst.loc.clone(), pid: self.pid, lane }
                        }
                        IntFault::Shift => {
                            InterpError::ShiftOutOfRange { op: inst.op.name().into(), loc: inst.loc.clone(), pid: self.pid, lane, amount: y, bits }
                        }
                    })?;
                    out.push(r);
                }
                Data::Int(out)
            }
            (Data::Float(a), Data::Float(b)) => {
                if let Some(fused) = self.contracted(op, lhs, rhs, dtype) {
                    return Ok(fused);
                }
                Data::Float(a.iter().zip(b).map(|(&x, &y)| self.fz(dtype, binary_float(op, dtype, self.fz(dtype, x), self.fz(dtype, y)))).collect())
            }
            _ => unreachable!("verified: operands share a dtype"),
        })
    }

    /// `lhs op rhs` as one fused multiply-add where `op` adds or subtracts the result of a
    /// multiplication ([`InterpOptions::contract`]); the left operand's product first.
    fn contracted(&self, op: BinaryOp, lhs: Value, rhs: Value, dtype: DType) -> Option<Data> {
        // Without `contract` the map is empty: no lookup on every float operation.
        if self.muls.is_empty() || !matches!(op, BinaryOp::Add | BinaryOp::Sub) {
            return None;
        }
        let (prod, other, negate_prod, negate_other) = match (self.muls.get(&lhs), self.muls.get(&rhs)) {
            (Some(&m), _) => (m, rhs, false, op == BinaryOp::Sub),
            (None, Some(&m)) => (m, lhs, op == BinaryOp::Sub, false),
            (None, None) => return None,
        };
        let (a, b, c) = (self.get(prod.0).floats(), self.get(prod.1).floats(), self.get(other).floats());
        let f = |x: f32| self.fz(dtype, x);
        Some(Data::Float(
            (0..c.len())
                .map(|i| {
                    let a = if negate_prod { -f(a[i]) } else { f(a[i]) };
                    let c = if negate_other { -f(c[i]) } else { f(c[i]) };
                    f(round_to(dtype, a.mul_add(f(b[i]), c)))
                })
                .collect(),
        ))
    }

    fn buffer(&self, id: BufferId) -> (&'a HostBuffer, &'a str) {
        match self.args[id as usize] {
            Arg::Buffer(b) => (b, self.program.params[id as usize].name.as_str()),
            Arg::Scalar(_) => unreachable!("arguments were checked against the parameters"),
        }
    }

    /// Checks every active lane's offset; returns them as element indices.
    fn offsets(&self, inst: &Inst, buffer: BufferId, offsets: Value, mask: Option<Value>) -> R<Vec<Option<usize>>> {
        let (buf, name) = self.buffer(buffer);
        let offs = self.get(offsets).ints();
        let mask = mask.map(|m| self.get(m).ints());
        offs.iter()
            .enumerate()
            .map(|(lane, &o)| {
                if mask.is_some_and(|m| m[lane] == 0) {
                    return Ok(None);
                }
                if o < 0 || o as u64 >= buf.len() as u64 {
                    return Err(InterpError::OutOfBounds {
                        op: inst.op.name().into(),
                        loc: inst.loc.clone(),
                        pid: self.pid,
                        lane,
                        offset: o,
                        buffer: name.to_string(),
                        len: buf.len(),
                    });
                }
                Ok(Some(o as usize))
            })
            .collect()
    }

    fn load(&self, inst: &Inst, buffer: BufferId, offsets: Value, mask: Option<Value>, other: Option<Value>, res: Value) -> R<Data> {
        let (buf, _) = self.buffer(buffer);
        let dtype = self.ty(res).dtype;
        let idx = self.offsets(inst, buffer, offsets, mask)?;
        let other = other.map(|o| self.get(o));
        Ok(if dtype.is_float() {
            Data::Float(
                idx.iter()
                    .enumerate()
                    .map(|(lane, i)| match i {
                        Some(i) => from_bits(dtype, buf.load_bits(*i)).unwrap_err(),
                        // Without `other` a masked-off lane is unspecified: NaN makes its use visible.
                        None => other.map_or(f32::NAN, |o| o.floats()[lane]),
                    })
                    .collect(),
            )
        } else {
            Data::Int(
                idx.iter()
                    .enumerate()
                    .map(|(lane, i)| match i {
                        Some(i) => from_bits(dtype, buf.load_bits(*i)).unwrap_or_default(),
                        None => other.map_or(0, |o| o.ints()[lane]),
                    })
                    .collect(),
            )
        })
    }

    fn store(&self, inst: &Inst, buffer: BufferId, offsets: Value, value: Value, mask: Option<Value>) -> R<()> {
        let (buf, _) = self.buffer(buffer);
        let dtype = buf.dtype();
        let idx = self.offsets(inst, buffer, offsets, mask)?;
        let val = self.get(value);
        for (lane, i) in idx.iter().enumerate() {
            if let Some(i) = i {
                let bits = match val {
                    Data::Float(v) => float_bits(dtype, v[lane]),
                    Data::Int(v) => v[lane] as u64,
                };
                buf.store_bits(*i, bits);
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic(
        &self,
        inst: &Inst,
        op: Option<AtomicOp>,
        buffer: BufferId,
        offsets: Value,
        cmp: Option<Value>,
        value: Value,
        mask: Option<Value>,
    ) -> R<Data> {
        let (buf, _) = self.buffer(buffer);
        let dtype = buf.dtype();
        let idx = self.offsets(inst, buffer, offsets, mask)?;
        let val = self.get(value);
        let cmpv = cmp.map(|c| self.get(c));
        let mut old = Vec::with_capacity(idx.len());
        for (lane, i) in idx.iter().enumerate() {
            let Some(i) = *i else {
                old.push(None);
                continue;
            };
            let value = Elem::of(val, lane);
            let cmp = cmpv.map(|c| Elem::of(c, lane));
            let prev = buf.atomic_update_bits(i, |bits| atomic_new_bits(op, dtype, bits, value, cmp));
            old.push(Some(from_bits(dtype, prev)));
        }
        Ok(if dtype.is_float() {
            Data::Float(old.into_iter().map(|o| o.map_or(f32::NAN, |r| r.unwrap_err())).collect())
        } else {
            Data::Int(old.into_iter().map(|o| o.map_or(0, |r| r.unwrap_or_default())).collect())
        })
    }

    /// Combines two elements with a built-in or custom function.
    fn combine2(&mut self, combine: &'a Combine, dtype: DType, a: Elem, b: Elem) -> R<Elem> {
        Ok(match (combine, a, b) {
            (Combine::Sum, Elem::I(x), Elem::I(y)) => Elem::I(wrap_to(dtype, x.wrapping_add(y))),
            (Combine::Prod, Elem::I(x), Elem::I(y)) => Elem::I(wrap_to(dtype, x.wrapping_mul(y))),
            (Combine::Max, Elem::I(x), Elem::I(y)) => Elem::I(x.max(y)),
            (Combine::Min, Elem::I(x), Elem::I(y)) => Elem::I(x.min(y)),
            (Combine::Sum, Elem::F(x), Elem::F(y)) => Elem::F(self.fz(dtype, round_to(dtype, self.fz(dtype, x) + self.fz(dtype, y)))),
            (Combine::Prod, Elem::F(x), Elem::F(y)) => Elem::F(self.fz(dtype, round_to(dtype, self.fz(dtype, x) * self.fz(dtype, y)))),
            (Combine::Max, Elem::F(x), Elem::F(y)) => Elem::F(self.fz(dtype, x).max(self.fz(dtype, y))),
            (Combine::Min, Elem::F(x), Elem::F(y)) => Elem::F(self.fz(dtype, x).min(self.fz(dtype, y))),
            (Combine::Custom(block), a, b) => {
                let out = self.block(block, &[a.data(), b.data()])?;
                match out.first() {
                    Some(Data::Int(v)) => Elem::I(v[0]),
                    Some(Data::Float(v)) => Elem::F(v[0]),
                    None => a,
                }
            }
            // Argmax/argmin are handled by the caller; mixed kinds cannot occur (verified).
            (_, a, _) => a,
        })
    }

    /// The axis slices of `x`: for each output position (row-major over the other dims), the
    /// indices of the elements along `axis`.
    fn slices(shape: &[usize], axis: usize) -> Vec<Vec<usize>> {
        let st = strides(shape);
        let n = shape[axis];
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..].iter().product();
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let base = o * n * inner + i;
                out.push((0..n).map(|k| base + k * st[axis]).collect());
            }
        }
        out
    }

    fn reduce(&mut self, x: Value, axis: usize, combine: &'a Combine, res: Value) -> R<Data> {
        let ty = self.ty(x);
        let dtype = ty.dtype;
        let data = self.get(x).clone();
        let slices = Self::slices(&ty.shape, axis);
        let arg = matches!(combine, Combine::ArgMax | Combine::ArgMin);
        let mut out = Vec::with_capacity(slices.len());
        for s in &slices {
            if arg {
                // Lowest index wins ties; a NaN never wins over a number, as with maxNum.
                // Integers compare as integers: through f64, i64 values 2^53 apart are ties.
                let max = matches!(combine, Combine::ArgMax);
                let mut best = 0usize;
                for k in 1..s.len() {
                    let better = match &data {
                        Data::Int(v) => {
                            let (b, c) = (v[s[best]], v[s[k]]);
                            if max {
                                c > b
                            } else {
                                c < b
                            }
                        }
                        Data::Float(_) => {
                            let (b, c) = (data.get_f64(s[best]), data.get_f64(s[k]));
                            (if max { c > b } else { c < b }) || (b.is_nan() && !c.is_nan())
                        }
                    };
                    if better {
                        best = k;
                    }
                }
                out.push(Elem::I(best as i64));
                continue;
            }
            // Pairwise tree over the power-of-two extent, the order a GPU's butterfly takes.
            let mut v: Vec<Elem> = s.iter().map(|&i| Elem::of(&data, i)).collect();
            let mut half = v.len() / 2;
            while half > 0 {
                for i in 0..half {
                    v[i] = self.combine2(combine, dtype, v[i], v[i + half])?;
                }
                v.truncate(half);
                half /= 2;
            }
            out.push(v[0]);
        }
        let _ = res;
        Ok(Elem::collect(out, if arg { DType::I32 } else { dtype }))
    }

    /// `reduce_tuple`: the same pairwise tree as [`Instance::reduce`], on tuples of elements.
    fn reduce_tuple(&mut self, xs: &[Value], axis: usize, combine: &'a Block) -> R<Vec<Data>> {
        let shape = &self.ty(xs[0]).shape;
        let data: Vec<Data> = xs.iter().map(|&x| self.get(x).clone()).collect();
        let mut outs: Vec<Vec<Elem>> = vec![Vec::new(); xs.len()];
        for s in Self::slices(shape, axis) {
            let mut v: Vec<Vec<Elem>> = s.iter().map(|&i| data.iter().map(|d| Elem::of(d, i)).collect()).collect();
            let mut half = v.len() / 2;
            while half > 0 {
                for i in 0..half {
                    let args: Vec<Data> = v[i].iter().chain(&v[i + half]).map(|e| e.data()).collect();
                    v[i] = self.block(combine, &args)?.iter().map(|d| Elem::of(d, 0)).collect();
                }
                v.truncate(half);
                half /= 2;
            }
            for (o, &e) in outs.iter_mut().zip(&v[0]) {
                o.push(e);
            }
        }
        Ok(outs.into_iter().zip(xs).map(|(o, &x)| Elem::collect(o, self.ty(x).dtype)).collect())
    }

    fn scan(&mut self, x: Value, axis: usize, combine: &'a Combine, reverse: bool) -> R<Data> {
        let ty = self.ty(x);
        let dtype = ty.dtype;
        let data = self.get(x).clone();
        let mut out: Vec<Elem> = (0..data.len()).map(|i| Elem::of(&data, i)).collect();
        for mut s in Self::slices(&ty.shape, axis) {
            if reverse {
                s.reverse();
            }
            for k in 1..s.len() {
                out[s[k]] = self.combine2(combine, dtype, out[s[k - 1]], out[s[k]])?;
            }
        }
        Ok(Elem::collect(out, dtype))
    }

    fn dot(&self, a: Value, b: Value, acc: Value, precision: InputPrecision, res: Value) -> Data {
        let (a_v, b_v) = (a, b);
        let (m, k) = (self.ty(a).shape[0], self.ty(a).shape[1]);
        let n = self.ty(b).shape[1];
        let dtype = self.ty(res).dtype;
        match (self.get(a), self.get(b), self.get(acc)) {
            (Data::Float(a), Data::Float(b), Data::Float(c)) => {
                // Products of f16/bf16 are exact in f32; accumulation is in f32 and the result
                // is rounded once to the accumulator's dtype.
                let (ad, bd) = (self.ty(a_v).dtype, self.ty(b_v).dtype);
                // tf32 operands: products of 11-bit significands, exact in f32 as well.
                let rounded;
                let (a, b) = if precision == InputPrecision::Tf32 {
                    rounded = (
                        a.iter().map(|&x| round_tf32(self.fz(ad, x))).collect::<Vec<f32>>(),
                        b.iter().map(|&x| round_tf32(self.fz(bd, x))).collect::<Vec<f32>>(),
                    );
                    (&rounded.0, &rounded.1)
                } else {
                    (a, b)
                };
                let mut out: Vec<f32> = c.iter().map(|&x| self.fz(dtype, x)).collect();
                for i in 0..m {
                    let row = &mut out[i * n..(i + 1) * n];
                    for kk in 0..k {
                        let av = self.fz(ad, a[i * k + kk]);
                        let brow = &b[kk * n..(kk + 1) * n];
                        for (o, &bv) in row.iter_mut().zip(brow) {
                            *o = self.fz(DType::F32, av.mul_add(self.fz(bd, bv), *o));
                        }
                    }
                }
                if dtype != DType::F32 {
                    out.iter_mut().for_each(|x| *x = round_to(dtype, *x));
                }
                if self.matrix_zero_positive && (matches!(ad, DType::F16 | DType::BF16) || precision == InputPrecision::Tf32) {
                    out.iter_mut().filter(|x| **x == 0.0).for_each(|x| *x = 0.0);
                }
                Data::Float(out)
            }
            (Data::Int(a), Data::Int(b), Data::Int(c)) => {
                let mut out = c.clone();
                for i in 0..m {
                    for kk in 0..k {
                        let av = a[i * k + kk];
                        for j in 0..n {
                            out[i * n + j] = out[i * n + j].wrapping_add(av.wrapping_mul(b[kk * n + j]));
                        }
                    }
                }
                Data::Int(out.into_iter().map(|x| wrap_to(dtype, x)).collect())
            }
            _ => unreachable!("verified: dot dtypes"),
        }
    }
}

/// One element during reductions and scans.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Elem {
    I(i64),
    F(f32),
}

impl Elem {
    fn of(d: &Data, i: usize) -> Elem {
        match d {
            Data::Int(v) => Elem::I(v[i]),
            Data::Float(v) => Elem::F(v[i]),
        }
    }
    fn data(self) -> Data {
        match self {
            Elem::I(x) => Data::Int(vec![x]),
            Elem::F(x) => Data::Float(vec![x]),
        }
    }
    fn collect(v: Vec<Elem>, dtype: DType) -> Data {
        if dtype.is_float() {
            Data::Float(v.into_iter().map(|e| if let Elem::F(x) = e { x } else { 0.0 }).collect())
        } else {
            Data::Int(v.into_iter().map(|e| if let Elem::I(x) = e { x } else { 0 }).collect())
        }
    }
}

fn scalar_data(s: Scalar, dtype: DType) -> Data {
    if dtype.is_float() {
        Data::Float(vec![round_to(dtype, s.as_f64() as f32)])
    } else {
        let i = match s {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        };
        Data::Int(vec![wrap_to(dtype, i)])
    }
}

/// Conversion semantics of [`Op::Cast`].
fn cast(x: &Data, from: DType, to: DType) -> Data {
    let _ = from;
    match (x, to.is_float()) {
        (Data::Float(v), true) => Data::Float(v.iter().map(|&a| round_to(to, a)).collect()),
        (Data::Int(v), true) => Data::Float(v.iter().map(|&a| int_to_float(to, a)).collect()),
        (Data::Float(v), false) => Data::Int(v.iter().map(|&a| float_to_int(to, a)).collect()),
        (Data::Int(v), false) => Data::Int(v.iter().map(|&a| int_to_int(to, a)).collect()),
    }
}

/// [`Op::Cast`] of one value from `from` to `to`: a float is `Scalar::Float` (of the dtype's
/// value), an integer or i1 `Scalar::Int`. For backends that fold the conversion of a constant.
pub fn cast_scalar(x: Scalar, from: DType, to: DType) -> Scalar {
    let data = match x {
        _ if from.is_float() => Data::Float(vec![x.as_f64() as f32]),
        Scalar::Bool(b) => Data::Int(vec![b as i64]),
        Scalar::Int(i) => Data::Int(vec![i]),
        Scalar::Float(f) => Data::Int(vec![f as i64]),
    };
    match cast(&data, from, to) {
        Data::Float(v) => Scalar::Float(f64::from(v[0])),
        Data::Int(v) => Scalar::Int(v[0]),
    }
}

/// [`Op::Cmp`] of two values of `dtype`, given as [`cast_scalar`] gives them (subnormals
/// compared as they are). For backends that fold the comparison of constants.
pub fn cmp_scalar(pred: CmpPred, dtype: DType, x: Scalar, y: Scalar) -> bool {
    if dtype.is_float() {
        pred.holds((x.as_f64() as f32).partial_cmp(&(y.as_f64() as f32)))
    } else {
        let int = |s: Scalar| wrap_to(dtype, if let Scalar::Int(i) = s { i } else { s.as_f64() as i64 });
        pred.holds(Some(int(x).cmp(&int(y))))
    }
}

/// `x` with a subnormal of `dtype` (f16's range for f16, f32's otherwise) replaced by a zero
/// of its sign.
pub fn flush_subnormal(dtype: DType, x: f32) -> f32 {
    let min_normal = if dtype == DType::F16 { 6.103_515_6e-5 } else { f32::MIN_POSITIVE };
    if x != 0.0 && x.abs() < min_normal {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// An integer converted to a float dtype, rounded once (exact in f64 below 2^53).
pub(crate) fn int_to_float(to: DType, a: i64) -> f32 {
    match to {
        DType::F16 => crate::dtype::f16_from_f64(a as f64).to_f32(),
        DType::BF16 => crate::dtype::bf16_from_f64(a as f64).to_f32(),
        _ => a as f32,
    }
}

/// A float converted to an integer dtype: truncated toward zero, saturated, NaN -> 0; `i1` is
/// `a != 0`.
pub(crate) fn float_to_int(to: DType, a: f32) -> i64 {
    if to == DType::I1 {
        return (a != 0.0) as i64;
    }
    let (lo, hi) = to.int_range().unwrap_or((i64::MIN, i64::MAX));
    (a as i64).clamp(lo, hi)
}

/// An integer converted to another: wrapped, or `a != 0` for `i1`.
pub(crate) fn int_to_int(to: DType, a: i64) -> i64 {
    if to == DType::I1 {
        (a != 0) as i64
    } else {
        wrap_to(to, a)
    }
}

/// `op a` on an integer held as i64, wrapped to `dtype`.
pub(crate) fn unary_int(op: UnaryOp, dtype: DType, a: i64) -> i64 {
    let r = match op {
        UnaryOp::Neg => a.wrapping_neg(),
        UnaryOp::Not => !a,
        UnaryOp::Abs => a.wrapping_abs(),
        // float-only ops never reach integers (verified)
        _ => a,
    };
    wrap_to(dtype, r)
}

/// `op a` on a float held as f32, rounded to `dtype`: the interpreter's rule, which emitters
/// fold constants by.
pub fn unary_float(op: UnaryOp, dtype: DType, a: f32) -> f32 {
    let r = match op {
        UnaryOp::Neg => -a,
        UnaryOp::Not => a,
        UnaryOp::Abs => a.abs(),
        UnaryOp::Exp => a.exp(),
        UnaryOp::Exp2 => a.exp2(),
        UnaryOp::Log => a.ln(),
        UnaryOp::Log2 => a.log2(),
        UnaryOp::Sqrt => a.sqrt(),
        UnaryOp::Rsqrt => 1.0 / a.sqrt(),
        UnaryOp::Sin => a.sin(),
        UnaryOp::Cos => a.cos(),
        UnaryOp::Tanh => a.tanh(),
        UnaryOp::Erf => libm::erff(a),
        UnaryOp::Floor => a.floor(),
        UnaryOp::Ceil => a.ceil(),
        UnaryOp::Round => a.round_ties_even(),
    };
    round_to(dtype, r)
}

/// An integer fault the interpreter reports with its location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntFault {
    DivisionByZero,
    Shift,
}

/// `x op y` on integers held as i64, wrapped to `dtype` (the interpreter's rule, which emitters
/// fold constants by).
pub fn binary_int(op: BinaryOp, dtype: DType, x: i64, y: i64) -> Result<i64, IntFault> {
    let r = match op {
        BinaryOp::Add => x.wrapping_add(y),
        BinaryOp::Sub => x.wrapping_sub(y),
        BinaryOp::Mul => x.wrapping_mul(y),
        BinaryOp::Div | BinaryOp::Rem => {
            if y == 0 {
                return Err(IntFault::DivisionByZero);
            }
            // Values of unsigned dtypes are held non-negative, so i64 division is unsigned
            // division for them; wrapping covers i64::MIN / -1.
            if op == BinaryOp::Div {
                x.wrapping_div(y)
            } else {
                x.wrapping_rem(y)
            }
        }
        BinaryOp::And => x & y,
        BinaryOp::Or => x | y,
        BinaryOp::Xor => x ^ y,
        BinaryOp::Shl | BinaryOp::Shr => {
            if y < 0 || y >= dtype.bits() as i64 {
                return Err(IntFault::Shift);
            }
            if op == BinaryOp::Shl {
                x.wrapping_shl(y as u32)
            } else if dtype.is_signed_int() {
                x >> y
            } else {
                // Unsigned values are held zero-extended: a plain shift is logical.
                ((x as u64) >> y) as i64
            }
        }
        BinaryOp::Max => x.max(y),
        BinaryOp::Min => x.min(y),
    };
    Ok(wrap_to(dtype, r))
}

/// `x op y` on floats held as f32, rounded to `dtype` (the interpreter's rule, which emitters
/// fold constants by).
pub fn binary_float(op: BinaryOp, dtype: DType, x: f32, y: f32) -> f32 {
    let r = match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        BinaryOp::Rem => x % y,
        // f32::max/min are IEEE maxNum/minNum: a NaN loses to a number.
        BinaryOp::Max => x.max(y),
        BinaryOp::Min => x.min(y),
        // integer-only ops never reach floats (verified)
        _ => x,
    };
    round_to(dtype, r)
}

/// The new bits of an atomic's element: `op` applied to the old bits and `value`, or, for
/// compare-and-swap (`op` is `None`), `value` where the old value equals `cmp` bitwise.
pub(crate) fn atomic_new_bits(op: Option<AtomicOp>, dtype: DType, bits: u64, value: Elem, cmp: Option<Elem>) -> u64 {
    match (from_bits(dtype, bits), value) {
        (Ok(c), Elem::I(x)) => {
            let n = match op {
                Some(AtomicOp::Add) => c.wrapping_add(x),
                Some(AtomicOp::Max) => c.max(x),
                Some(AtomicOp::Min) => c.min(x),
                Some(AtomicOp::Xchg) => x,
                None => {
                    if Some(Elem::I(c)) == cmp {
                        x
                    } else {
                        c
                    }
                }
            };
            wrap_to(dtype, n) as u64
        }
        (Err(c), Elem::F(x)) => {
            let n = match op {
                Some(AtomicOp::Add) => c + x,
                Some(AtomicOp::Max) => c.max(x),
                Some(AtomicOp::Min) => c.min(x),
                Some(AtomicOp::Xchg) => x,
                None => {
                    if matches!(cmp, Some(Elem::F(y)) if y.to_bits() == c.to_bits()) {
                        x
                    } else {
                        c
                    }
                }
            };
            float_bits(dtype, n)
        }
        _ => bits,
    }
}
