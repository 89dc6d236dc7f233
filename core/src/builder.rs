//! The builder: Rust code that reads like a Triton kernel and records a tile [`Program`].
//!
//! Tiles are `Copy` handles ([`Tile`]) that borrow the [`Builder`], so arithmetic reads like
//! Triton: `let y = (x - mean) * rstd * w + b;`. Operands broadcast by Triton's (numpy's) rules and
//! mixed dtypes promote as in Triton; the builder makes both explicit in the IR (`broadcast`,
//! `splat`, `cast`), so later stages never re-derive them.
//!
//! The builder never panics and never fails half-way: it records what the caller asked for, with
//! the caller's source location (`#[track_caller]`), and [`Builder::finish`] runs the verifier,
//! whose error names the first offending operation and that location.
//!
//! Meta-parameters (BLOCK sizes, num_warps) are plain Rust values, usually read from a
//! [`Config`]: the Rust code may branch on them, and each configuration builds its own program.
//!
//! # Helper functions over tiles
//!
//! A [`Tile<'b>`](Tile) borrows the builder for `'b`, so code shared between kernels is written
//! as functions generic over that one lifetime: the builder and every tile in and out carry the
//! same `'b`. A closure whose parameter type is spelled `Tile<'_>` does not compile: each `'_`
//! in a closure's signature is a lifetime of its own, unrelated to the tile it returns, and
//! rustc reports "lifetime may not live long enough". Use a `fn` with a named lifetime, or a
//! closure whose parameter types are left to inference.
//!
//! ```
//! use tilekit_core::interp::{self, Arg};
//! use tilekit_core::{cdiv, Builder, DType, HostBuffer, Rounding, Scalar, Tile};
//!
//! /// A helper over tiles: one lifetime ties the input to the output.
//! fn gelu<'b>(x: Tile<'b>) -> Tile<'b> {
//!     let c = (2.0f64 / std::f64::consts::PI).sqrt();
//!     x * 0.5 * ((c * (x + x * x * x * 0.044715)).tanh() + 1.0)
//! }
//!
//! /// A kernel body as a function of the builder: GELU, then symmetric int8 quantisation.
//! fn body<'b>(k: &'b Builder, block: usize) {
//!     let x = k.input("x", DType::F32);
//!     let q = k.output("q", DType::I8);
//!     let n = k.scalar("n", DType::I32);
//!     let scale = k.scalar("scale", DType::F32);
//!     let offs = k.program_id(0) * block as i32 + k.arange(0, block as i64);
//!     let mask = offs.lt(n);
//!     let y = gelu(k.load_masked(x, offs, mask, 0.0));
//!     // Inference fixes a closure's lifetime to this builder's; `|t: Tile<'_>| ...` would not.
//!     let scaled = |t| t * scale;
//!     k.store_masked(q, offs, scaled(y).cast_saturating(DType::I8, Rounding::NearestEven), mask);
//! }
//!
//! let k = Builder::new("gelu_q8");
//! body(&k, 64);
//! let program = k.finish().expect("the verifier accepts it");
//!
//! let xs = [-3.0f32, -0.5, 0.0, 0.3, 1.0, 2.0, 100.0];
//! let (xb, qb) = (HostBuffer::from_slice(&xs), HostBuffer::zeros(DType::I8, xs.len()));
//! let grid = [cdiv(xs.len(), 64) as u32, 1, 1];
//! let args = [Arg::Buffer(&xb), Arg::Buffer(&qb), Arg::Scalar(Scalar::Int(xs.len() as i64)), Arg::Scalar(Scalar::Float(10.0))];
//! interp::run(&program, grid, &args).unwrap();
//! // 100 * 10 saturates at 127; gelu(0.3) * 10 = 1.85 rounds to 2.
//! assert_eq!(qb.to_vec::<i8>().unwrap(), [0, -2, 0, 2, 8, 20, 127]);
//! ```
//!
//! The closure with a written-out `Tile<'_>` parameter, for the record:
//!
//! ```compile_fail
//! # use tilekit_core::{Builder, DType, Tile};
//! let k = Builder::new("k");
//! let double = |t: Tile<'_>| t * 2.0; // error: lifetime may not live long enough
//! let x = k.arange(0, 16).cast(DType::F32);
//! let _ = double(x);
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use crate::ir::*;
use crate::verify::{verify, VerifyError};

/// Builds one [`Program`]. Methods take `&self` so that tiles can hold a shared borrow.
pub struct Builder {
    state: RefCell<State>,
}

struct State {
    name: String,
    params: Vec<Param>,
    values: Arena<ValueDecl>,
    /// Open blocks: `[0]` is the program body; region closures push and pop the rest.
    stack: Vec<Block>,
    max_axis: u32,
}

/// A handle to a tile (or scalar) value under construction.
#[derive(Clone, Copy)]
pub struct Tile<'b> {
    b: &'b Builder,
    v: Value,
}

/// A buffer parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buf {
    pub id: BufferId,
    pub dtype: DType,
}

/// Something that can stand where a tile is expected: a tile or a Rust literal. Literals take the
/// dtype of the tile they meet (an integer literal with an f16 tile is f16; a float literal with
/// an integer tile promotes both to f32), as Python constants do in Triton.
#[derive(Clone, Copy)]
pub enum Operand<'b> {
    Tile(Tile<'b>),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl<'b> From<Tile<'b>> for Operand<'b> {
    fn from(t: Tile<'b>) -> Self {
        Operand::Tile(t)
    }
}
impl<'b> From<&Tile<'b>> for Operand<'b> {
    fn from(t: &Tile<'b>) -> Self {
        Operand::Tile(*t)
    }
}
macro_rules! int_operand {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(x: $t) -> Self { Operand::Int(x as i64) }
        }
    )*};
}
int_operand!(i8, u8, i16, u16, i32, u32, i64);
impl From<usize> for Operand<'_> {
    fn from(x: usize) -> Self {
        // Sizes beyond i64 cannot be meant; saturate so the verifier reports the range.
        Operand::Int(i64::try_from(x).unwrap_or(i64::MAX))
    }
}
impl From<f32> for Operand<'_> {
    fn from(x: f32) -> Self {
        Operand::Float(x as f64)
    }
}
impl From<f64> for Operand<'_> {
    fn from(x: f64) -> Self {
        Operand::Float(x)
    }
}
impl From<bool> for Operand<'_> {
    fn from(x: bool) -> Self {
        Operand::Bool(x)
    }
}

/// The dtype two tiles compute in when they meet in an elementwise op (Triton's rules): floats
/// win over integers; f16 with bf16 gives f32; otherwise the wider type; for integers of mixed
/// signedness, the unsigned one if it is at least as wide (C's rule).
pub fn promote(a: DType, b: DType) -> DType {
    if a == b {
        return a;
    }
    match (a.is_float(), b.is_float()) {
        (true, true) => {
            if a.bits() == b.bits() {
                DType::F32
            } else if a.bits() > b.bits() {
                a
            } else {
                b
            }
        }
        (true, false) => a,
        (false, true) => b,
        (false, false) => {
            if a == DType::I1 {
                return b;
            }
            if b == DType::I1 {
                return a;
            }
            if a.is_signed_int() == b.is_signed_int() {
                if a.bits() >= b.bits() {
                    a
                } else {
                    b
                }
            } else {
                let (s, u) = if a.is_signed_int() { (a, b) } else { (b, a) };
                if u.bits() >= s.bits() {
                    u
                } else {
                    s
                }
            }
        }
    }
}

/// The shape two shapes broadcast to (numpy rules: right-aligned, equal or 1), if any.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() { 1 } else { a[i - (rank - a.len())] };
        let db = if i < rank - b.len() { 1 } else { b[i - (rank - b.len())] };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new("kernel")
    }
}

impl Builder {
    /// A builder for a program called `name`. The grid rank is the highest axis passed to
    /// [`Builder::program_id`] or [`Builder::num_programs`] plus one (at least 1).
    pub fn new(name: impl Into<String>) -> Builder {
        Builder {
            state: RefCell::new(State { name: name.into(), params: Vec::new(), values: Arena::new(), stack: vec![Block::default()], max_axis: 0 }),
        }
    }

    /// Runs the verifier and returns the program.
    pub fn finish(self) -> Result<Program, VerifyError> {
        let p = self.into_program_unchecked();
        verify(&p)?;
        Ok(p)
    }

    /// The program as recorded, without verification. For tests of the verifier and for tools
    /// that want to print a program the verifier rejects.
    pub fn into_program_unchecked(self) -> Program {
        let mut st = self.state.into_inner();
        // Regions left open (a closure that panicked) are folded back so nothing is lost.
        while st.stack.len() > 1 {
            let b = st.stack.pop().unwrap_or_default();
            if let Some(top) = st.stack.last_mut() {
                top.insts.extend(b.insts);
            }
        }
        Program { name: st.name, params: st.params, grid_rank: st.max_axis + 1, values: st.values, body: st.stack.pop().unwrap_or_default() }
    }

    // ----- parameters -----

    /// Declares a global buffer parameter.
    pub fn buffer(&self, name: impl Into<String>, dtype: DType, access: Access) -> Buf {
        let mut st = self.state.borrow_mut();
        let id = st.params.len() as BufferId;
        st.params.push(Param { name: name.into(), kind: ParamKind::Buffer { dtype, access } });
        Buf { id, dtype }
    }

    /// A read-only buffer parameter.
    pub fn input(&self, name: impl Into<String>, dtype: DType) -> Buf {
        self.buffer(name, dtype, Access::Read)
    }

    /// A write-only buffer parameter.
    pub fn output(&self, name: impl Into<String>, dtype: DType) -> Buf {
        self.buffer(name, dtype, Access::Write)
    }

    /// Declares a scalar parameter and returns its value.
    #[track_caller]
    pub fn scalar(&self, name: impl Into<String>, dtype: DType) -> Tile<'_> {
        let loc = Loc::caller();
        let index = {
            let mut st = self.state.borrow_mut();
            st.params.push(Param { name: name.into(), kind: ParamKind::Scalar { dtype } });
            st.params.len() as u32 - 1
        };
        self.emit1(Op::Arg { param: index }, Type::scalar(dtype), loc)
    }

    // ----- low-level recording -----

    fn ty(&self, v: Value) -> Type {
        self.state.borrow().values.get(v).cloned().unwrap_or(Type::scalar(DType::I32))
    }

    fn emit(&self, op: Op, result_types: Vec<Type>, loc: Loc) -> Vec<Value> {
        let mut st = self.state.borrow_mut();
        let results: Vec<Value> = result_types.into_iter().map(|t| st.values.append(t)).collect();
        let inst = Inst { op, results: results.clone(), loc };
        st.stack.last_mut().expect("the body block is never popped").insts.push(inst);
        results
    }

    fn emit1(&self, op: Op, ty: Type, loc: Loc) -> Tile<'_> {
        let v = self.emit(op, vec![ty], loc)[0];
        Tile { b: self, v }
    }

    fn emit0(&self, op: Op, loc: Loc) {
        self.emit(op, vec![], loc);
    }

    fn tile(&self, v: Value) -> Tile<'_> {
        Tile { b: self, v }
    }

    /// Wraps an existing value handle (for passes and tests that mix raw IR with the builder).
    pub fn value(&self, v: Value) -> Tile<'_> {
        self.tile(v)
    }

    /// Runs `f` inside a new block with arguments of `arg_types`; returns the closed block.
    fn region<'b>(&'b self, arg_types: Vec<Type>, f: impl FnOnce(Vec<Tile<'b>>) -> Vec<Value>, loc: &Loc) -> Block {
        let args: Vec<Value> = {
            let mut st = self.state.borrow_mut();
            let args = arg_types.into_iter().map(|t| st.values.append(t)).collect();
            st.stack.push(Block { args, insts: Vec::new() });
            st.stack.last().map(|b| b.args.clone()).unwrap_or_default()
        };
        let yields = f(args.iter().map(|&v| self.tile(v)).collect());
        self.emit0(Op::Yield { values: yields }, loc.clone());
        self.state.borrow_mut().stack.pop().unwrap_or_default()
    }

    // ----- constants and indices -----

    /// A scalar constant of `dtype`.
    #[track_caller]
    pub fn constant(&self, value: impl Into<Operand<'static>>, dtype: DType) -> Tile<'_> {
        self.constant_at(value.into(), dtype, Loc::caller())
    }

    /// A tile of `shape` filled with `value` (Triton's `tl.full`).
    #[track_caller]
    pub fn full(&self, shape: &[usize], value: impl Into<Operand<'static>>, dtype: DType) -> Tile<'_> {
        let loc = Loc::caller();
        let c = self.constant_at(value.into(), dtype, loc.clone());
        self.splat_at(c, shape, loc)
    }

    /// A tile of zeros.
    #[track_caller]
    pub fn zeros(&self, shape: &[usize], dtype: DType) -> Tile<'_> {
        let loc = Loc::caller();
        let c = self.constant_at(Operand::Int(0), dtype, loc.clone());
        self.splat_at(c, shape, loc)
    }

    /// `[start, end)` as an i32 tile; `end - start` must be a power of two.
    #[track_caller]
    pub fn arange(&self, start: i64, end: i64) -> Tile<'_> {
        let loc = Loc::caller();
        let n = usize::try_from(end.saturating_sub(start)).unwrap_or(0);
        self.emit1(Op::Arange { start, end }, Type::tile(DType::I32, [n]), loc)
    }

    /// This program instance's index along grid `axis` (0, 1 or 2).
    #[track_caller]
    pub fn program_id(&self, axis: u32) -> Tile<'_> {
        let loc = Loc::caller();
        self.note_axis(axis);
        self.emit1(Op::ProgramId { axis }, Type::scalar(DType::I32), loc)
    }

    /// The grid's extent along `axis`.
    #[track_caller]
    pub fn num_programs(&self, axis: u32) -> Tile<'_> {
        let loc = Loc::caller();
        self.note_axis(axis);
        self.emit1(Op::NumPrograms { axis }, Type::scalar(DType::I32), loc)
    }

    fn note_axis(&self, axis: u32) {
        let mut st = self.state.borrow_mut();
        // Out-of-range axes are left for the verifier; they must not inflate the grid rank.
        if axis < 3 {
            st.max_axis = st.max_axis.max(axis);
        }
    }

    /// Repeats a scalar over `shape`.
    #[track_caller]
    pub fn splat<'b>(&'b self, x: impl Into<Operand<'b>>, shape: &[usize]) -> Tile<'b> {
        let loc = Loc::caller();
        let v = match x.into() {
            Operand::Tile(t) => t,
            lit => self.constant_at(lit, literal_dtype(lit), loc.clone()),
        };
        self.splat_at(v, shape, loc)
    }

    // ----- memory -----

    /// `buffer[offsets]` for every lane.
    #[track_caller]
    pub fn load<'b>(&'b self, buffer: Buf, offsets: Tile<'b>) -> Tile<'b> {
        let loc = Loc::caller();
        let shape = offsets.shape();
        self.emit1(Op::Load { buffer: buffer.id, offsets: offsets.v, mask: None, other: None }, Type::tile(buffer.dtype, shape), loc)
    }

    /// `mask ? buffer[offsets] : other` per lane; masked-off lanes never touch memory.
    #[track_caller]
    pub fn load_masked<'b>(&'b self, buffer: Buf, offsets: Tile<'b>, mask: Tile<'b>, other: impl Into<Operand<'b>>) -> Tile<'b> {
        let loc = Loc::caller();
        let (offsets, mask) = self.broadcast_pair(offsets, mask, &loc);
        let shape = offsets.shape();
        let other = self.coerce(other.into(), buffer.dtype, &shape, &loc);
        self.emit1(Op::Load { buffer: buffer.id, offsets: offsets.v, mask: Some(mask.v), other: Some(other.v) }, Type::tile(buffer.dtype, shape), loc)
    }

    /// Writes `value`, broadcast to the offsets' shape and converted to the buffer's dtype
    /// (floats round to nearest even; integers wrap). A float value is never converted to an
    /// integer buffer implicitly, because the conversion has a rounding mode the caller must
    /// choose: the verifier rejects such a store and names `cast` (truncation) and
    /// [`Tile::cast_saturating`] (rounding) as the fixes.
    #[track_caller]
    pub fn store<'b>(&'b self, buffer: Buf, offsets: Tile<'b>, value: impl Into<Operand<'b>>) {
        let loc = Loc::caller();
        let shape = offsets.shape();
        let value = self.coerce_stored(value.into(), buffer.dtype, &shape, &loc);
        self.emit0(Op::Store { buffer: buffer.id, offsets: offsets.v, value: value.v, mask: None }, loc);
    }

    /// Writes `value` where `mask` holds; converts as [`Builder::store`] does.
    #[track_caller]
    pub fn store_masked<'b>(&'b self, buffer: Buf, offsets: Tile<'b>, value: impl Into<Operand<'b>>, mask: Tile<'b>) {
        let loc = Loc::caller();
        let (offsets, mask) = self.broadcast_pair(offsets, mask, &loc);
        let shape = offsets.shape();
        let value = self.coerce_stored(value.into(), buffer.dtype, &shape, &loc);
        self.emit0(Op::Store { buffer: buffer.id, offsets: offsets.v, value: value.v, mask: Some(mask.v) }, loc);
    }

    #[track_caller]
    fn atomic<'b>(&'b self, op: AtomicOp, buffer: Buf, offsets: Tile<'b>, value: Operand<'b>, mask: Option<Tile<'b>>, loc: Loc) -> Tile<'b> {
        let (offsets, mask) = match mask {
            Some(m) => {
                let (o, m) = self.broadcast_pair(offsets, m, &loc);
                (o, Some(m.v))
            }
            None => (offsets, None),
        };
        let shape = offsets.shape();
        let value = self.coerce_stored(value, buffer.dtype, &shape, &loc);
        self.emit1(Op::Atomic { op, buffer: buffer.id, offsets: offsets.v, value: value.v, mask }, Type::tile(buffer.dtype, shape), loc)
    }

    /// Atomically adds `value` per lane; returns the old values.
    #[track_caller]
    pub fn atomic_add<'b>(&'b self, buffer: Buf, offsets: Tile<'b>, value: impl Into<Operand<'b>>, mask: Option<Tile<'b>>) -> Tile<'b> {
        self.atomic(AtomicOp::Add, buffer, offsets, value.into(), mask, Loc::caller())
    }

    /// Atomic maximum per lane; returns the old values.
    #[track_caller]
    pub fn atomic_max<'b>(&'b self, buffer: Buf, offsets: Tile<'b>, value: impl Into<Operand<'b>>, mask: Option<Tile<'b>>) -> Tile<'b> {
        self.atomic(AtomicOp::Max, buffer, offsets, value.into(), mask, Loc::caller())
    }

    /// Atomic minimum per lane; returns the old values.
    #[track_caller]
    pub fn atomic_min<'b>(&'b self, buffer: Buf, offsets: Tile<'b>, value: impl Into<Operand<'b>>, mask: Option<Tile<'b>>) -> Tile<'b> {
        self.atomic(AtomicOp::Min, buffer, offsets, value.into(), mask, Loc::caller())
    }

    /// Atomic exchange per lane; returns the old values.
    #[track_caller]
    pub fn atomic_xchg<'b>(&'b self, buffer: Buf, offsets: Tile<'b>, value: impl Into<Operand<'b>>, mask: Option<Tile<'b>>) -> Tile<'b> {
        self.atomic(AtomicOp::Xchg, buffer, offsets, value.into(), mask, Loc::caller())
    }

    /// Atomic compare-and-swap per lane: where the element equals `cmp`, write `value`. Returns
    /// the old values.
    #[track_caller]
    pub fn atomic_cas<'b>(
        &'b self,
        buffer: Buf,
        offsets: Tile<'b>,
        cmp: impl Into<Operand<'b>>,
        value: impl Into<Operand<'b>>,
        mask: Option<Tile<'b>>,
    ) -> Tile<'b> {
        let loc = Loc::caller();
        let (offsets, mask) = match mask {
            Some(m) => {
                let (o, m) = self.broadcast_pair(offsets, m, &loc);
                (o, Some(m.v))
            }
            None => (offsets, None),
        };
        let shape = offsets.shape();
        let cmp = self.coerce_stored(cmp.into(), buffer.dtype, &shape, &loc);
        let value = self.coerce_stored(value.into(), buffer.dtype, &shape, &loc);
        self.emit1(Op::AtomicCas { buffer: buffer.id, offsets: offsets.v, cmp: cmp.v, value: value.v, mask }, Type::tile(buffer.dtype, shape), loc)
    }

    // ----- elementwise -----

    /// `cond ? on_true : on_false` elementwise (Triton's `tl.where`), with broadcasting.
    #[track_caller]
    pub fn select<'b>(&'b self, cond: impl Into<Operand<'b>>, on_true: impl Into<Operand<'b>>, on_false: impl Into<Operand<'b>>) -> Tile<'b> {
        let loc = Loc::caller();
        let (a, b) = self.resolve_pair(on_true.into(), on_false.into(), &loc);
        let cond = match cond.into() {
            Operand::Tile(t) => t,
            lit => self.constant_at(lit, DType::I1, loc.clone()),
        };
        let shape = broadcast_shapes(&cond.shape(), &a.shape()).unwrap_or_else(|| a.shape());
        let cond = self.broadcast_at(cond, &shape, &loc);
        let a = self.broadcast_at(a, &shape, &loc);
        let b = self.broadcast_at(b, &shape, &loc);
        let ty = a.ty();
        self.emit1(Op::Select { cond: cond.v, on_true: a.v, on_false: b.v }, ty, loc)
    }

    /// `a * b + c`, fused for floats.
    #[track_caller]
    pub fn fma<'b>(&'b self, a: impl Into<Operand<'b>>, b: impl Into<Operand<'b>>, c: impl Into<Operand<'b>>) -> Tile<'b> {
        let loc = Loc::caller();
        let (a, b, c) = (a.into(), b.into(), c.into());
        let dtype =
            [a, b, c].iter().filter_map(|o| if let Operand::Tile(t) = o { Some(t.dtype()) } else { None }).reduce(promote).unwrap_or(DType::F32);
        let shape = [a, b, c]
            .iter()
            .filter_map(|o| if let Operand::Tile(t) = o { Some(t.shape()) } else { None })
            .try_fold(Vec::new(), |acc, s| broadcast_shapes(&acc, &s));
        let shape = shape.unwrap_or_default();
        let a = self.coerce(a, dtype, &shape, &loc);
        let b = self.coerce(b, dtype, &shape, &loc);
        let c = self.coerce(c, dtype, &shape, &loc);
        let ty = a.ty();
        self.emit1(Op::Fma { a: a.v, b: b.v, c: c.v }, ty, loc)
    }

    // ----- control flow -----

    /// A counted loop with loop-carried values (Triton's `for i in range(lower, upper, step)`).
    /// `body` gets the induction variable and the carried values and returns the next ones; the
    /// call returns the values after the last iteration.
    #[track_caller]
    pub fn for_range<'b, const N: usize>(
        &'b self,
        lower: impl Into<Operand<'b>>,
        upper: impl Into<Operand<'b>>,
        step: impl Into<Operand<'b>>,
        init: [Tile<'b>; N],
        body: impl FnOnce(Tile<'b>, [Tile<'b>; N]) -> [Tile<'b>; N],
    ) -> [Tile<'b>; N] {
        let loc = Loc::caller();
        let (lower, upper, step) = (lower.into(), upper.into(), step.into());
        let iv_dtype = [lower, upper, step]
            .iter()
            .filter_map(|o| if let Operand::Tile(t) = o { Some(t.dtype()) } else { None })
            .reduce(promote)
            .unwrap_or(DType::I32);
        let lower = self.to_dtype(lower, iv_dtype, &loc);
        let upper = self.to_dtype(upper, iv_dtype, &loc);
        let step = self.to_dtype(step, iv_dtype, &loc);
        let mut arg_types = vec![Type::scalar(iv_dtype)];
        arg_types.extend(init.iter().map(|t| t.ty()));
        let block = self.region(
            arg_types,
            |args| {
                let carried: [Tile<'b>; N] = std::array::from_fn(|i| self.tile(args[i + 1].v));
                body(self.tile(args[0].v), carried).iter().map(|t| t.v).collect()
            },
            &loc,
        );
        let result_types = self.yield_types(&block);
        let results = self.emit(
            Op::For { lower: lower.v, upper: upper.v, step: step.v, init: init.iter().map(|t| t.v).collect(), body: block },
            result_types,
            loc,
        );
        std::array::from_fn(|i| self.tile(results[i]))
    }

    /// Reduces `axis` of the tiles `xs` (one shape, any dtypes) together, as Triton's
    /// `tl.reduce` over a tuple: `combine(a, b)` gets two tuples of scalars and returns their
    /// combination. It must be associative and commutative (the order of application is
    /// unspecified; see [`Op::ReduceTuple`]). An argmax returning its value:
    ///
    /// ```
    /// # use tilekit_core::{Builder, DType};
    /// let k = Builder::new("argmax");
    /// let x = k.load(k.input("x", DType::F32), k.arange(0, 64));
    /// let [value, index] = k.reduce_tuple([x, k.arange(0, 64)], 0, |[av, ai], [bv, bi]| {
    ///     // b wins when larger, or equal with a lower index: a total order, so commutative.
    ///     let win = bv.gt(av) | (bv.eq(av) & bi.lt(ai));
    ///     [k.select(win, bv, av), k.select(win, bi, ai)]
    /// });
    /// # let _ = (value, index);
    /// k.finish().unwrap();
    /// ```
    #[track_caller]
    pub fn reduce_tuple<'b, const N: usize>(
        &'b self,
        xs: [Tile<'b>; N],
        axis: u32,
        combine: impl FnOnce([Tile<'b>; N], [Tile<'b>; N]) -> [Tile<'b>; N],
    ) -> [Tile<'b>; N] {
        self.reduce_tuple_at(xs, axis, combine, Loc::caller())
    }

    fn reduce_tuple_at<'b, const N: usize>(
        &'b self,
        xs: [Tile<'b>; N],
        axis: u32,
        combine: impl FnOnce([Tile<'b>; N], [Tile<'b>; N]) -> [Tile<'b>; N],
        loc: Loc,
    ) -> [Tile<'b>; N] {
        let scalars: Vec<Type> = xs.iter().map(|t| Type::scalar(t.dtype())).collect();
        let arg_types: Vec<Type> = scalars.iter().chain(&scalars).cloned().collect();
        let block = self.region(
            arg_types,
            |args| {
                let a: [Tile<'b>; N] = std::array::from_fn(|i| args[i]);
                let b: [Tile<'b>; N] = std::array::from_fn(|i| args[N + i]);
                combine(a, b).iter().map(|t| t.v).collect()
            },
            &loc,
        );
        let result_types = xs
            .iter()
            .map(|t| {
                let mut shape = t.shape();
                if (axis as usize) < shape.len() {
                    shape.remove(axis as usize);
                }
                Type::tile(t.dtype(), shape)
            })
            .collect();
        let results = self.emit(Op::ReduceTuple { xs: xs.iter().map(|t| t.v).collect(), axis, combine: block }, result_types, loc);
        std::array::from_fn(|i| self.tile(results[i]))
    }

    /// Runs `then_` or `else_` on a scalar `i1` condition; both return values of the same types.
    #[track_caller]
    pub fn if_else<'b, const N: usize>(
        &'b self,
        cond: Tile<'b>,
        then_: impl FnOnce() -> [Tile<'b>; N],
        else_: impl FnOnce() -> [Tile<'b>; N],
    ) -> [Tile<'b>; N] {
        let loc = Loc::caller();
        let then_block = self.region(vec![], |_| then_().iter().map(|t| t.v).collect(), &loc);
        let else_block = self.region(vec![], |_| else_().iter().map(|t| t.v).collect(), &loc);
        let result_types = self.yield_types(&then_block);
        let results = self.emit(Op::If { cond: cond.v, then_block, else_block }, result_types, loc);
        std::array::from_fn(|i| self.tile(results[i]))
    }

    /// Runs `then_` when the scalar `i1` condition holds.
    #[track_caller]
    pub fn if_then<'b>(&'b self, cond: Tile<'b>, then_: impl FnOnce()) {
        let loc = Loc::caller();
        let then_block = self.region(
            vec![],
            |_| {
                then_();
                vec![]
            },
            &loc,
        );
        let else_block = self.region(vec![], |_| vec![], &loc);
        self.emit(Op::If { cond: cond.v, then_block, else_block }, vec![], loc);
    }

    /// Asserts that the `i1` scalar or tile `cond` holds on every lane (Triton's
    /// `tl.device_assert`). The interpreter and checked launches report a lane where it does not
    /// with `message`, this call's location, the program id and the lane; an unchecked GPU
    /// launch does not evaluate it.
    #[track_caller]
    pub fn device_assert<'b>(&'b self, cond: Tile<'b>, message: impl Into<String>) {
        let loc = Loc::caller();
        self.emit0(Op::DeviceAssert { cond: cond.v, message: message.into() }, loc);
    }

    fn yield_types(&self, block: &Block) -> Vec<Type> {
        match block.insts.last() {
            Some(Inst { op: Op::Yield { values }, .. }) => values.iter().map(|&v| self.ty(v)).collect(),
            _ => vec![],
        }
    }

    // ----- helpers shared by the tile methods -----

    fn constant_at(&self, lit: Operand<'_>, dtype: DType, loc: Loc) -> Tile<'_> {
        let value = match lit {
            Operand::Int(i) if dtype.is_float() => Scalar::Float(i as f64),
            Operand::Int(i) if dtype == DType::I1 => Scalar::Bool(i != 0),
            Operand::Int(i) => Scalar::Int(i),
            Operand::Float(f) if dtype.is_float() => Scalar::Float(f),
            // A float literal where an integer is required: keep it as written so the verifier
            // reports it instead of silently truncating.
            Operand::Float(f) => Scalar::Float(f),
            Operand::Bool(b) if dtype == DType::I1 => Scalar::Bool(b),
            Operand::Bool(b) if dtype.is_float() => Scalar::Float(b as i64 as f64),
            Operand::Bool(b) => Scalar::Int(b as i64),
            Operand::Tile(t) => return self.tile(t.v),
        };
        self.emit1(Op::Const { value }, Type::scalar(dtype), loc)
    }

    fn splat_at<'b>(&'b self, x: Tile<'b>, shape: &[usize], loc: Loc) -> Tile<'b> {
        if shape.is_empty() {
            return x;
        }
        let ty = Type::tile(x.dtype(), shape);
        self.emit1(Op::Splat { x: x.v }, ty, loc)
    }

    fn cast_at<'b>(&'b self, x: Tile<'b>, dtype: DType, loc: &Loc) -> Tile<'b> {
        if x.dtype() == dtype {
            return x;
        }
        let ty = x.ty().with_dtype(dtype);
        self.emit1(Op::Cast { x: x.v }, ty, loc.clone())
    }

    /// Makes `x` have `shape`: left-pads the rank with 1s (expand_dims), then splats a scalar or
    /// broadcasts extents of 1. Shapes that cannot broadcast are recorded as a `broadcast` the
    /// verifier rejects, with this location.
    fn broadcast_at<'b>(&'b self, x: Tile<'b>, shape: &[usize], loc: &Loc) -> Tile<'b> {
        let xs = x.shape();
        if xs == shape {
            return x;
        }
        if xs.is_empty() {
            return self.splat_at(x, shape, loc.clone());
        }
        let mut x = x;
        let mut cur = xs;
        while cur.len() < shape.len() {
            let mut s = cur.clone();
            s.insert(0, 1);
            x = self.emit1(Op::ExpandDims { x: x.v, axis: 0 }, Type::tile(x.dtype(), s.clone()), loc.clone());
            cur = s;
        }
        if cur == shape {
            return x;
        }
        self.emit1(Op::Broadcast { x: x.v }, Type::tile(x.dtype(), shape), loc.clone())
    }

    fn broadcast_pair<'b>(&'b self, a: Tile<'b>, b: Tile<'b>, loc: &Loc) -> (Tile<'b>, Tile<'b>) {
        match broadcast_shapes(&a.shape(), &b.shape()) {
            Some(shape) => (self.broadcast_at(a, &shape, loc), self.broadcast_at(b, &shape, loc)),
            // Leave the mismatch in place: the consuming op's verifier check names it.
            None => (a, b),
        }
    }

    /// Turns an operand into a value of `dtype`, keeping its shape (a literal becomes a scalar).
    fn to_dtype<'b>(&'b self, o: Operand<'b>, dtype: DType, loc: &Loc) -> Tile<'b> {
        match o {
            Operand::Tile(t) => self.cast_at(t, dtype, loc),
            lit => self.constant_at(lit, dtype, loc.clone()),
        }
    }

    /// Turns an operand into a tile of `dtype` and `shape` (literal -> constant + splat; tile ->
    /// cast + broadcast).
    fn coerce<'b>(&'b self, o: Operand<'b>, dtype: DType, shape: &[usize], loc: &Loc) -> Tile<'b> {
        let t = self.to_dtype(o, dtype, loc);
        self.broadcast_at(t, shape, loc)
    }

    /// As [`Builder::coerce`] for a value written to memory, except that a float tile meant
    /// for an integer buffer keeps its dtype: the verifier then rejects the write with a hint
    /// instead of the builder choosing a rounding mode for the caller.
    fn coerce_stored<'b>(&'b self, o: Operand<'b>, dtype: DType, shape: &[usize], loc: &Loc) -> Tile<'b> {
        match o {
            Operand::Tile(t) if t.dtype().is_float() && !dtype.is_float() => self.broadcast_at(t, shape, loc),
            o => self.coerce(o, dtype, shape, loc),
        }
    }

    /// Brings two operands to one dtype and one shape by Triton's rules.
    fn resolve_pair<'b>(&'b self, a: Operand<'b>, b: Operand<'b>, loc: &Loc) -> (Tile<'b>, Tile<'b>) {
        let dtype = match (a, b) {
            (Operand::Tile(x), Operand::Tile(y)) => promote(x.dtype(), y.dtype()),
            (Operand::Tile(t), lit) | (lit, Operand::Tile(t)) => literal_with(t.dtype(), lit),
            (x, y) => promote(literal_dtype(x), literal_dtype(y)),
        };
        let a = self.to_dtype(a, dtype, loc);
        let b = self.to_dtype(b, dtype, loc);
        self.broadcast_pair(a, b, loc)
    }

    fn binary<'b>(&'b self, op: BinaryOp, a: Operand<'b>, b: Operand<'b>, loc: Loc) -> Tile<'b> {
        let (a, b) = self.resolve_pair(a, b, &loc);
        let ty = a.ty();
        self.emit1(Op::Binary { op, lhs: a.v, rhs: b.v }, ty, loc)
    }

    fn cmp<'b>(&'b self, pred: CmpPred, a: Operand<'b>, b: Operand<'b>, loc: Loc) -> Tile<'b> {
        let (a, b) = self.resolve_pair(a, b, &loc);
        let ty = a.ty().with_dtype(DType::I1);
        self.emit1(Op::Cmp { pred, lhs: a.v, rhs: b.v }, ty, loc)
    }

    fn unary<'b>(&'b self, op: UnaryOp, x: Tile<'b>, loc: Loc) -> Tile<'b> {
        let ty = x.ty();
        self.emit1(Op::Unary { op, x: x.v }, ty, loc)
    }
}

/// The dtype a literal has on its own (Python constants in Triton: int -> i32, float -> f32).
fn literal_dtype(o: Operand<'_>) -> DType {
    match o {
        Operand::Tile(t) => t.dtype(),
        Operand::Int(_) => DType::I32,
        Operand::Float(_) => DType::F32,
        Operand::Bool(_) => DType::I1,
    }
}

/// The dtype a tile of `dtype` and a literal compute in.
fn literal_with(dtype: DType, lit: Operand<'_>) -> DType {
    match lit {
        Operand::Float(_) if !dtype.is_float() => DType::F32,
        Operand::Int(_) if dtype == DType::I1 => DType::I32,
        _ => dtype,
    }
}

impl<'b> Tile<'b> {
    /// The underlying IR value.
    pub fn value(self) -> Value {
        self.v
    }

    pub fn builder(self) -> &'b Builder {
        self.b
    }

    pub fn ty(self) -> Type {
        self.b.ty(self.v)
    }

    pub fn dtype(self) -> DType {
        self.ty().dtype
    }

    pub fn shape(self) -> Vec<usize> {
        self.ty().shape
    }

    /// Explicit conversion (Triton's `.to(dtype)`): floats round to nearest even; floats to
    /// integers truncate toward zero and saturate (NaN becomes 0); integers wrap. For a float
    /// to integer conversion that rounds, use [`Tile::cast_saturating`].
    #[track_caller]
    pub fn cast(self, dtype: DType) -> Tile<'b> {
        let loc = Loc::caller();
        self.b.cast_at(self, dtype, &loc)
    }

    /// Inserts an extent-1 dimension before `axis` (Triton's `x[:, None]` is `expand_dims(1)`).
    #[track_caller]
    pub fn expand_dims(self, axis: u32) -> Tile<'b> {
        let loc = Loc::caller();
        let mut shape = self.shape();
        let at = (axis as usize).min(shape.len());
        shape.insert(at, 1);
        self.b.emit1(Op::ExpandDims { x: self.v, axis }, Type::tile(self.dtype(), shape), loc)
    }

    /// Broadcasts to `shape` by numpy rules.
    #[track_caller]
    pub fn broadcast_to(self, shape: &[usize]) -> Tile<'b> {
        let loc = Loc::caller();
        self.b.broadcast_at(self, shape, &loc)
    }

    /// Same elements, row-major, new shape.
    #[track_caller]
    pub fn reshape(self, shape: &[usize]) -> Tile<'b> {
        let loc = Loc::caller();
        self.b.emit1(Op::Reshape { x: self.v }, Type::tile(self.dtype(), shape), loc)
    }

    /// Transposes a 2-D tile.
    #[track_caller]
    pub fn trans(self) -> Tile<'b> {
        let loc = Loc::caller();
        self.permute_at(vec![1, 0], loc)
    }

    /// Permutes dimensions: result dim `i` is dim `perm[i]`.
    #[track_caller]
    pub fn permute(self, perm: &[u32]) -> Tile<'b> {
        let loc = Loc::caller();
        self.permute_at(perm.to_vec(), loc)
    }

    fn permute_at(self, perm: Vec<u32>, loc: Loc) -> Tile<'b> {
        let shape = self.shape();
        let out: Vec<usize> = perm.iter().map(|&p| shape.get(p as usize).copied().unwrap_or(0)).collect();
        self.b.emit1(Op::Trans { x: self.v, perm }, Type::tile(self.dtype(), out), loc)
    }

    // comparisons (operators cannot return tiles for these)
    #[track_caller]
    pub fn lt(self, rhs: impl Into<Operand<'b>>) -> Tile<'b> {
        self.b.cmp(CmpPred::Lt, self.into(), rhs.into(), Loc::caller())
    }
    #[track_caller]
    pub fn le(self, rhs: impl Into<Operand<'b>>) -> Tile<'b> {
        self.b.cmp(CmpPred::Le, self.into(), rhs.into(), Loc::caller())
    }
    #[track_caller]
    pub fn gt(self, rhs: impl Into<Operand<'b>>) -> Tile<'b> {
        self.b.cmp(CmpPred::Gt, self.into(), rhs.into(), Loc::caller())
    }
    #[track_caller]
    pub fn ge(self, rhs: impl Into<Operand<'b>>) -> Tile<'b> {
        self.b.cmp(CmpPred::Ge, self.into(), rhs.into(), Loc::caller())
    }
    #[track_caller]
    #[allow(clippy::should_implement_trait)]
    pub fn eq(self, rhs: impl Into<Operand<'b>>) -> Tile<'b> {
        self.b.cmp(CmpPred::Eq, self.into(), rhs.into(), Loc::caller())
    }
    #[track_caller]
    #[allow(clippy::should_implement_trait)]
    pub fn ne(self, rhs: impl Into<Operand<'b>>) -> Tile<'b> {
        self.b.cmp(CmpPred::Ne, self.into(), rhs.into(), Loc::caller())
    }

    /// Elementwise maximum (Triton's `tl.maximum`).
    #[track_caller]
    pub fn maximum(self, rhs: impl Into<Operand<'b>>) -> Tile<'b> {
        self.b.binary(BinaryOp::Max, self.into(), rhs.into(), Loc::caller())
    }
    /// Elementwise minimum (Triton's `tl.minimum`).
    #[track_caller]
    pub fn minimum(self, rhs: impl Into<Operand<'b>>) -> Tile<'b> {
        self.b.binary(BinaryOp::Min, self.into(), rhs.into(), Loc::caller())
    }

    /// `x` limited to `[lo, hi]`: `minimum(maximum(x, lo), hi)`, except that a NaN `x` stays
    /// NaN (as numpy's `clip` and PyTorch's `clamp`). A NaN bound is no bound (IEEE
    /// maxNum/minNum ignore it); `lo > hi` gives `hi`; which zero `clamp(-0, 0, 1)` gives is
    /// left open, as for `maximum`. Operands broadcast and promote as in arithmetic.
    #[track_caller]
    pub fn clamp(self, lo: impl Into<Operand<'b>>, hi: impl Into<Operand<'b>>) -> Tile<'b> {
        let loc = Loc::caller();
        let lower = self.b.binary(BinaryOp::Max, self.into(), lo.into(), loc.clone());
        let r = self.b.binary(BinaryOp::Min, lower.into(), hi.into(), loc.clone());
        if !r.dtype().is_float() {
            return r;
        }
        let x = self.b.cast_at(self, r.dtype(), &loc);
        let x = self.b.broadcast_at(x, &r.shape(), &loc);
        let nan = self.b.cmp(CmpPred::Ne, x.into(), x.into(), loc.clone());
        let ty = r.ty();
        self.b.emit1(Op::Select { cond: nan.v, on_true: x.v, on_false: r.v }, ty, loc)
    }

    /// Ceiling division (Triton's `tl.cdiv`): the exact quotient rounded up, for signed and
    /// unsigned integers alike (`cdiv(7, 2) = 4`, `cdiv(-7, 2) = -3`, `cdiv(7, -2) = -3`), with
    /// no intermediate that can overflow. A zero divisor is a division by zero, as with `/`.
    /// On floats it is `ceil(self / rhs)`.
    #[track_caller]
    pub fn cdiv(self, rhs: impl Into<Operand<'b>>) -> Tile<'b> {
        let loc = Loc::caller();
        let (a, b) = self.b.resolve_pair(self.into(), rhs.into(), &loc);
        let q = self.b.binary(BinaryOp::Div, a.into(), b.into(), loc.clone());
        if q.dtype().is_float() {
            return self.b.unary(UnaryOp::Ceil, q, loc);
        }
        // Truncation rounded the quotient toward zero; it is one short exactly when the
        // division is inexact and the quotient positive (remainder and divisor share a sign).
        let r = self.b.binary(BinaryOp::Rem, a.into(), b.into(), loc.clone());
        let inexact = self.b.cmp(CmpPred::Ne, r.into(), Operand::Int(0), loc.clone());
        let up = if q.dtype().is_signed_int() {
            let r_neg = self.b.cmp(CmpPred::Lt, r.into(), Operand::Int(0), loc.clone());
            let b_neg = self.b.cmp(CmpPred::Lt, b.into(), Operand::Int(0), loc.clone());
            let same = self.b.cmp(CmpPred::Eq, r_neg.into(), b_neg.into(), loc.clone());
            self.b.binary(BinaryOp::And, inexact.into(), same.into(), loc.clone())
        } else {
            inexact
        };
        let q1 = self.b.binary(BinaryOp::Add, q.into(), Operand::Int(1), loc.clone());
        let ty = q.ty();
        self.b.emit1(Op::Select { cond: up.v, on_true: q1.v, on_false: q.v }, ty, loc)
    }

    /// Conversion to `dtype` that rounds by `mode` and saturates: a float becomes the integer
    /// `mode` rounds it to, clamped to `dtype`'s range, and NaN becomes 0 (the quantisation
    /// cast: `(x * scale).cast_saturating(DType::I8, Rounding::NearestEven)`). An integer is
    /// clamped to `dtype`'s range instead of wrapping. To a float dtype, a float is rounded to
    /// an integral value by `mode`, then converted as [`Tile::cast`] does; to `i1`, the result
    /// is `rounded != 0`.
    #[track_caller]
    pub fn cast_saturating(self, dtype: DType, mode: Rounding) -> Tile<'b> {
        let loc = Loc::caller();
        let src = self.dtype();
        if src.is_float() {
            let rounded = match mode {
                Rounding::NearestEven => self.b.unary(UnaryOp::Round, self, loc.clone()),
                Rounding::TowardZero => self,
                Rounding::Down => self.b.unary(UnaryOp::Floor, self, loc.clone()),
                Rounding::Up => self.b.unary(UnaryOp::Ceil, self, loc.clone()),
            };
            // `cast` truncates toward zero, saturates and takes NaN to 0, so an integral value
            // converts exactly, or to the bound it lies beyond.
            return self.b.cast_at(rounded, dtype, &loc);
        }
        let (Some((slo, shi)), Some((dlo, dhi))) = (src.int_range(), dtype.int_range()) else {
            return self.b.cast_at(self, dtype, &loc);
        };
        let mut x = self;
        if dlo > slo {
            x = self.b.binary(BinaryOp::Max, x.into(), Operand::Int(dlo), loc.clone());
        }
        if dhi < shi {
            x = self.b.binary(BinaryOp::Min, x.into(), Operand::Int(dhi), loc.clone());
        }
        self.b.cast_at(x, dtype, &loc)
    }

    /// To the nearest integer, halfway cases to even (IEEE roundToIntegralTiesToEven; see
    /// [`UnaryOp::Round`]): `round(2.5) = 2`, `round(3.5) = 4`, `round(-2.5) = -2`. Triton's
    /// `libdevice.rint`; C's `round`, which takes halves away from zero, is not this.
    #[track_caller]
    pub fn round(self) -> Tile<'b> {
        self.b.unary(UnaryOp::Round, self, Loc::caller())
    }

    /// [`Tile::round`] under the name C and CUDA give it (`rint` in the default rounding mode).
    #[track_caller]
    pub fn rint(self) -> Tile<'b> {
        self.b.unary(UnaryOp::Round, self, Loc::caller())
    }

    // ----- reductions and scans -----

    #[track_caller]
    fn reduce_with(self, axis: u32, combine: Combine, loc: Loc) -> Tile<'b> {
        let mut shape = self.shape();
        if (axis as usize) < shape.len() {
            shape.remove(axis as usize);
        }
        let dtype = match combine {
            Combine::ArgMax | Combine::ArgMin => DType::I32,
            _ => self.dtype(),
        };
        self.b.emit1(Op::Reduce { x: self.v, axis, combine }, Type::tile(dtype, shape), loc)
    }

    /// Sum along `axis` (the axis disappears).
    #[track_caller]
    pub fn sum(self, axis: u32) -> Tile<'b> {
        self.reduce_with(axis, Combine::Sum, Loc::caller())
    }
    /// Product along `axis`.
    #[track_caller]
    pub fn prod(self, axis: u32) -> Tile<'b> {
        self.reduce_with(axis, Combine::Prod, Loc::caller())
    }
    /// Maximum along `axis` (Triton's `tl.max`).
    #[track_caller]
    pub fn max(self, axis: u32) -> Tile<'b> {
        self.reduce_with(axis, Combine::Max, Loc::caller())
    }
    /// Minimum along `axis`.
    #[track_caller]
    pub fn min(self, axis: u32) -> Tile<'b> {
        self.reduce_with(axis, Combine::Min, Loc::caller())
    }
    /// Index of the maximum along `axis` (i32; lowest index on ties).
    #[track_caller]
    pub fn argmax(self, axis: u32) -> Tile<'b> {
        self.reduce_with(axis, Combine::ArgMax, Loc::caller())
    }
    /// Index of the minimum along `axis` (i32; lowest index on ties).
    #[track_caller]
    pub fn argmin(self, axis: u32) -> Tile<'b> {
        self.reduce_with(axis, Combine::ArgMin, Loc::caller())
    }
    /// Maximum along `axis` and its index (Triton's `tl.max(x, axis, return_indices=True)`), in
    /// one tuple reduction: the index is [`Tile::argmax`]'s (the lowest on ties; a NaN never
    /// wins over a number) and the value is the element there, bit for bit (a zero keeps its
    /// sign; NaN only where every element is).
    #[track_caller]
    pub fn max_with_index(self, axis: u32) -> (Tile<'b>, Tile<'b>) {
        self.extreme_with_index(axis, CmpPred::Gt, Loc::caller())
    }
    /// Minimum along `axis` and its index; see [`Tile::max_with_index`].
    #[track_caller]
    pub fn min_with_index(self, axis: u32) -> (Tile<'b>, Tile<'b>) {
        self.extreme_with_index(axis, CmpPred::Lt, Loc::caller())
    }

    fn extreme_with_index(self, axis: u32, better: CmpPred, loc: Loc) -> (Tile<'b>, Tile<'b>) {
        let k = self.b;
        let shape = self.shape();
        let n = shape.get(axis as usize).copied().unwrap_or(1);
        let mut line = vec![1; shape.len()];
        if let Some(d) = line.get_mut(axis as usize) {
            *d = n;
        }
        let idx = k.emit1(Op::Arange { start: 0, end: n as i64 }, Type::tile(DType::I32, [n]), loc.clone());
        let idx = k.emit1(Op::Reshape { x: idx.v }, Type::tile(DType::I32, line), loc.clone());
        let idx = k.broadcast_at(idx, &shape, &loc);
        let float = self.dtype().is_float();
        let l = loc.clone();
        let [v, i] = k.reduce_tuple_at(
            [self, idx],
            axis,
            |[av, ai], [bv, bi]| {
                // b wins when strictly better, or tied (equal, or both NaN) with a lower index,
                // or when a is NaN and b is not: a total order, as the lowering's argmax uses.
                let cmp = |p, x: Tile<'b>, y: Tile<'b>| k.cmp(p, x.into(), y.into(), l.clone());
                let or = |x: Tile<'b>, y: Tile<'b>| k.binary(BinaryOp::Or, x.into(), y.into(), l.clone());
                let and = |x: Tile<'b>, y: Tile<'b>| k.binary(BinaryOp::And, x.into(), y.into(), l.clone());
                let lower = cmp(CmpPred::Lt, bi, ai);
                let mut tie = cmp(CmpPred::Eq, bv, av);
                let mut win = cmp(better, bv, av);
                if float {
                    let (a_nan, b_num) = (cmp(CmpPred::Ne, av, av), cmp(CmpPred::Eq, bv, bv));
                    let b_nan = cmp(CmpPred::Ne, bv, bv);
                    tie = or(tie, and(a_nan, b_nan));
                    win = or(win, and(a_nan, b_num));
                }
                let win = or(win, and(tie, lower));
                let pick = |x: Tile<'b>, y: Tile<'b>| k.emit1(Op::Select { cond: win.v, on_true: x.v, on_false: y.v }, x.ty(), l.clone());
                [pick(bv, av), pick(bi, ai)]
            },
            loc,
        );
        (v, i)
    }
    /// Reduction with a custom associative combine function of two scalars.
    #[track_caller]
    pub fn reduce(self, axis: u32, combine: impl FnOnce(Tile<'b>, Tile<'b>) -> Tile<'b>) -> Tile<'b> {
        let loc = Loc::caller();
        let block = self.combine_block(combine, &loc);
        self.reduce_with(axis, Combine::Custom(block), loc)
    }

    fn combine_block(self, combine: impl FnOnce(Tile<'b>, Tile<'b>) -> Tile<'b>, loc: &Loc) -> Block {
        let s = Type::scalar(self.dtype());
        self.b.region(vec![s.clone(), s], |args| vec![combine(args[0], args[1]).v], loc)
    }

    #[track_caller]
    fn scan_with(self, axis: u32, combine: Combine, reverse: bool, loc: Loc) -> Tile<'b> {
        let ty = self.ty();
        self.b.emit1(Op::Scan { x: self.v, axis, combine, reverse }, ty, loc)
    }

    /// Inclusive prefix sum along `axis`.
    #[track_caller]
    pub fn cumsum(self, axis: u32) -> Tile<'b> {
        self.scan_with(axis, Combine::Sum, false, Loc::caller())
    }
    /// Inclusive prefix product along `axis`.
    #[track_caller]
    pub fn cumprod(self, axis: u32) -> Tile<'b> {
        self.scan_with(axis, Combine::Prod, false, Loc::caller())
    }
    /// Inclusive running maximum along `axis`.
    #[track_caller]
    pub fn cummax(self, axis: u32) -> Tile<'b> {
        self.scan_with(axis, Combine::Max, false, Loc::caller())
    }
    /// Inclusive scan with a custom associative combine function; from the end when `reverse`.
    #[track_caller]
    pub fn scan(self, axis: u32, reverse: bool, combine: impl FnOnce(Tile<'b>, Tile<'b>) -> Tile<'b>) -> Tile<'b> {
        let loc = Loc::caller();
        let block = self.combine_block(combine, &loc);
        self.scan_with(axis, Combine::Custom(block), reverse, loc)
    }

    /// `self @ b + acc` for 2-D tiles; the accumulator's dtype is the accumulation dtype.
    #[track_caller]
    pub fn dot(self, b: Tile<'b>, acc: Tile<'b>) -> Tile<'b> {
        self.dot_with(b, acc, InputPrecision::Ieee, Loc::caller())
    }

    /// [`Tile::dot`] with f32 operands rounded to tf32 first ([`InputPrecision::Tf32`]), which
    /// lets a target multiply them on its tf32 matrix instructions (Triton's
    /// `input_precision="tf32"`, `allow_tf32=True`).
    #[track_caller]
    pub fn dot_tf32(self, b: Tile<'b>, acc: Tile<'b>) -> Tile<'b> {
        self.dot_with(b, acc, InputPrecision::Tf32, Loc::caller())
    }

    /// [`Tile::dot`] with the operands' precision given.
    #[track_caller]
    pub fn dot_precision(self, b: Tile<'b>, acc: Tile<'b>, precision: InputPrecision) -> Tile<'b> {
        self.dot_with(b, acc, precision, Loc::caller())
    }

    fn dot_with(self, b: Tile<'b>, acc: Tile<'b>, precision: InputPrecision, loc: Loc) -> Tile<'b> {
        let ty = acc.ty();
        self.b.emit1(Op::Dot { a: self.v, b: b.v, acc: acc.v, precision }, ty, loc)
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl<'b> Tile<'b> {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(self) -> Tile<'b> {
                self.b.unary(UnaryOp::$op, self, Loc::caller())
            }
        )*}
    };
}
unary_methods! {
    /// `e^x`.
    exp => Exp;
    /// `2^x`.
    exp2 => Exp2;
    /// Natural logarithm.
    log => Log;
    log2 => Log2;
    sqrt => Sqrt;
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt;
    sin => Sin;
    cos => Cos;
    tanh => Tanh;
    /// The error function.
    erf => Erf;
    abs => Abs;
    /// Largest integer not above `x`.
    floor => Floor;
    /// Smallest integer not below `x`.
    ceil => Ceil;
}

macro_rules! binary_operator {
    ($($trait:ident $method:ident => $op:ident;)*) => {$(
        impl<'b, R: Into<Operand<'b>>> std::ops::$trait<R> for Tile<'b> {
            type Output = Tile<'b>;
            #[track_caller]
            fn $method(self, rhs: R) -> Tile<'b> {
                self.b.binary(BinaryOp::$op, self.into(), rhs.into(), Loc::caller())
            }
        }
        binary_operator!(@lhs $trait $method $op; i32 i64 u32 f32 f64);
    )*};
    (@lhs $trait:ident $method:ident $op:ident; $($t:ty)*) => {$(
        impl<'b> std::ops::$trait<Tile<'b>> for $t {
            type Output = Tile<'b>;
            #[track_caller]
            fn $method(self, rhs: Tile<'b>) -> Tile<'b> {
                rhs.b.binary(BinaryOp::$op, self.into(), rhs.into(), Loc::caller())
            }
        }
    )*};
}
binary_operator! {
    Add add => Add;
    Sub sub => Sub;
    Mul mul => Mul;
    Div div => Div;
    Rem rem => Rem;
    BitAnd bitand => And;
    BitOr bitor => Or;
    BitXor bitxor => Xor;
    Shl shl => Shl;
    Shr shr => Shr;
}

impl<'b> std::ops::Neg for Tile<'b> {
    type Output = Tile<'b>;
    #[track_caller]
    fn neg(self) -> Tile<'b> {
        self.b.unary(UnaryOp::Neg, self, Loc::caller())
    }
}

impl<'b> std::ops::Not for Tile<'b> {
    type Output = Tile<'b>;
    #[track_caller]
    fn not(self) -> Tile<'b> {
        self.b.unary(UnaryOp::Not, self, Loc::caller())
    }
}

impl fmt::Debug for Tile<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.v, self.ty())
    }
}

/// How [`Tile::cast_saturating`] rounds a float to an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// To the nearest integer, halves to even (`2.5 -> 2`, `3.5 -> 4`): quantisation's mode.
    NearestEven,
    /// Toward zero, as [`Tile::cast`] does (`-2.7 -> -2`).
    TowardZero,
    /// Toward negative infinity (`floor`).
    Down,
    /// Toward positive infinity (`ceil`).
    Up,
}

/// `ceil(a / b)` on the host: the number of programs of `b` elements that cover `a` elements
/// (`grid = [cdiv(n, BLOCK), 1, 1]`). `b = 0` is taken as 1, so that a size computed from a bad
/// configuration yields a grid the launch rejects rather than a panic.
pub fn cdiv(a: usize, b: usize) -> usize {
    a.div_ceil(b.max(1))
}

/// Meta-parameters of one kernel configuration: `BLOCK_M=64`, `num_warps=4`, ...
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Config {
    values: BTreeMap<String, i64>,
}

/// A configuration lacks a key, or a value is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration {config} has no meta-parameter `{key}`")]
    Missing { key: String, config: String },
    #[error("meta-parameter `{key}` = {value} is invalid: {why}")]
    Invalid { key: String, value: i64, why: String },
    #[error("cannot parse `{text}` as a configuration: {why}")]
    Parse { text: String, why: String },
}

impl Config {
    pub fn new() -> Config {
        Config::default()
    }

    /// Builder-style insertion: `Config::new().with("BLOCK", 1024)`.
    pub fn with(mut self, key: &str, value: i64) -> Config {
        self.values.insert(key.to_string(), value);
        self
    }

    pub fn set(&mut self, key: &str, value: i64) {
        self.values.insert(key.to_string(), value);
    }

    pub fn get(&self, key: &str) -> Result<i64, ConfigError> {
        self.values.get(key).copied().ok_or_else(|| ConfigError::Missing { key: key.to_string(), config: self.to_string() })
    }

    /// A tile extent: present, positive and a power of two.
    pub fn block(&self, key: &str) -> Result<usize, ConfigError> {
        let v = self.get(key)?;
        if v <= 0 || !(v as u64).is_power_of_two() || v > (1 << 24) {
            return Err(ConfigError::Invalid {
                key: key.to_string(),
                value: v,
                why: "a tile extent must be a power of two between 1 and 2^24".into(),
            });
        }
        Ok(v as usize)
    }

    /// A positive count (num_warps, num_stages, GROUP_M).
    pub fn count(&self, key: &str) -> Result<usize, ConfigError> {
        let v = self.get(key)?;
        if v <= 0 || v > 1 << 16 {
            return Err(ConfigError::Invalid { key: key.to_string(), value: v, why: "must be between 1 and 65536".into() });
        }
        Ok(v as usize)
    }

    /// `num_warps`, 4 when absent. The value is returned as given (0 or a negative value as
    /// 0), never replaced by a default: the lowering rejects what it cannot run.
    pub fn num_warps(&self) -> usize {
        match self.values.get("num_warps") {
            None => 4,
            Some(&v) => v.clamp(0, u32::MAX as i64) as usize,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.values.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Overrides values from `other`.
    pub fn merged(&self, other: &Config) -> Config {
        let mut c = self.clone();
        for (k, v) in other.iter() {
            c.set(k, v);
        }
        c
    }
}

impl fmt::Display for Config {
    /// `BLOCK=1024,num_warps=4`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.values.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Config {
    type Err = ConfigError;
    /// Parses `k=v` pairs separated by commas or whitespace.
    fn from_str(s: &str) -> Result<Config, ConfigError> {
        let mut c = Config::new();
        for part in s.split(|ch: char| ch == ',' || ch.is_whitespace()).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| ConfigError::Parse { text: part.to_string(), why: "expected key=value".into() })?;
            let v: i64 =
                v.trim().parse().map_err(|_| ConfigError::Parse { text: part.to_string(), why: format!("`{}` is not an integer", v.trim()) })?;
            c.set(k.trim(), v);
        }
        Ok(c)
    }
}
