//! The tile IR: hardware-agnostic programs over tiles (Triton's TTIR level).
//!
//! A [`Program`] is what one *program instance* does; the grid runs many instances. Values are
//! SSA: each is defined once, by an instruction result or a block argument, and lives in the
//! program's [`Arena`] addressed by a [`Value`] handle. The type of every value (dtype and shape)
//! is recorded in the arena, so ops whose result shape is not implied by their operands
//! (`splat`, `broadcast`, `reshape`, `cast`, `const`) read it from their result.
//!
//! Invariants, all checked by [`crate::verify`] and relied on by every later stage:
//! - elementwise operands have identical shapes (the builder inserts explicit `broadcast`s) and,
//!   except where an op says otherwise, identical dtypes (the builder inserts explicit `cast`s);
//! - every tile extent is a power of two (scalars have shape `[]`);
//! - a value is used only where its definition dominates the use: earlier in the same block or in
//!   an enclosing block, never from inside a nested block after that block has closed;
//! - region blocks (`for` bodies, `if` branches, custom combine functions) end with `yield`, and
//!   the top-level body has no `yield`.
//!
//! Addresses are a buffer parameter plus element offsets, never pointers: this maps to SPIR-V's
//! logical addressing as well as to PTX/AMDGCN pointers, and keeps offset analysis simple.

use std::fmt;
use std::marker::PhantomData;

pub use crate::dtype::{DType, Scalar};

/// A typed index into an [`Arena`].
pub struct Handle<T> {
    index: u32,
    _marker: PhantomData<fn() -> T>,
}

impl<T> Handle<T> {
    /// Builds a handle from a raw index; the caller keeps it within its arena.
    pub const fn from_index(index: usize) -> Self {
        Handle { index: index as u32, _marker: PhantomData }
    }

    pub const fn index(self) -> usize {
        self.index as usize
    }
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}
impl<T> PartialEq for Handle<T> {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
    }
}
impl<T> Eq for Handle<T> {}
impl<T> PartialOrd for Handle<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Handle<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.index.cmp(&other.index)
    }
}
impl<T> std::hash::Hash for Handle<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.index.hash(state)
    }
}
impl<T> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.index)
    }
}

/// Append-only storage addressed by [`Handle`]s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arena<T> {
    items: Vec<T>,
}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Arena { items: Vec::new() }
    }
}

impl<T> Arena<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn append(&mut self, item: T) -> Handle<T> {
        let h = Handle::from_index(self.items.len());
        self.items.push(item);
        h
    }

    pub fn get(&self, h: Handle<T>) -> Option<&T> {
        self.items.get(h.index())
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Handle<T>, &T)> {
        self.items.iter().enumerate().map(|(i, t)| (Handle::from_index(i), t))
    }
}

impl<T> std::ops::Index<Handle<T>> for Arena<T> {
    type Output = T;
    fn index(&self, h: Handle<T>) -> &T {
        &self.items[h.index()]
    }
}

impl<T> FromIterator<T> for Arena<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Arena { items: iter.into_iter().collect() }
    }
}

/// The type of a value: a dtype and a shape. Shape `[]` is a scalar.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl Type {
    pub fn scalar(dtype: DType) -> Type {
        Type { dtype, shape: Vec::new() }
    }

    pub fn tile(dtype: DType, shape: impl Into<Vec<usize>>) -> Type {
        Type { dtype, shape: shape.into() }
    }

    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (1 for a scalar). Saturates rather than overflowing on absurd shapes.
    pub fn numel(&self) -> usize {
        self.shape.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }

    pub fn with_dtype(&self, dtype: DType) -> Type {
        Type { dtype, shape: self.shape.clone() }
    }
}

impl fmt::Display for Type {
    /// `f32` for a scalar, `[64, 32]xf16` for a tile.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.shape.is_empty() {
            write!(f, "{}", self.dtype)
        } else {
            f.write_str("[")?;
            for (i, d) in self.shape.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{d}")?;
            }
            write!(f, "]x{}", self.dtype)
        }
    }
}

/// What the arena stores per value.
pub type ValueDecl = Type;
/// Handle of an SSA value.
pub type Value = Handle<ValueDecl>;

/// Where in the caller's source an instruction was built (from `#[track_caller]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Loc {
    pub file: String,
    pub line: u32,
    pub col: u32,
}

impl Loc {
    pub fn new(file: impl Into<String>, line: u32, col: u32) -> Loc {
        Loc { file: file.into(), line, col }
    }

    /// The location of the caller of the `#[track_caller]` function this is called from.
    #[track_caller]
    pub fn caller() -> Loc {
        let l = std::panic::Location::caller();
        Loc { file: l.file().to_string(), line: l.line(), col: l.column() }
    }

    /// True for the default location (instructions made without a known source position).
    pub fn is_unknown(&self) -> bool {
        self.file.is_empty() && self.line == 0 && self.col == 0
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unknown() {
            f.write_str("<unknown>")
        } else {
            write!(f, "{}:{}:{}", self.file, self.line, self.col)
        }
    }
}

/// How a kernel may touch a buffer parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "read_write",
        }
    }
    pub fn can_read(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
    pub fn can_write(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
}

/// A kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A global buffer of `dtype` elements, addressed by element offsets.
    Buffer { dtype: DType, access: Access },
    /// A scalar passed at launch; read in the body with [`Op::Arg`].
    Scalar { dtype: DType },
}

/// Index of a buffer parameter in [`Program::params`].
pub type BufferId = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// Arithmetic negation (wrapping for integers).
    Neg,
    /// Bitwise not for integers, logical not for `i1`.
    Not,
    Abs,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tanh,
    Erf,
    Floor,
    Ceil,
    /// To the nearest integer, halfway cases to the even one (IEEE roundToIntegralTiesToEven,
    /// C's `rint` in the default rounding mode, Rust's `round_ties_even`): `round(2.5) = 2`,
    /// `round(-0.5) = -0`. Unlike C's `round`, halves do not go away from zero. NaN, infinities
    /// and zeros are returned unchanged; the result is exact in every float dtype.
    Round,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Float division, or integer division truncating toward zero (C semantics).
    Div,
    /// Remainder with the sign of the dividend (C `%`, Rust `%`, `fmod` for floats).
    Rem,
    And,
    Or,
    Xor,
    Shl,
    /// Arithmetic shift for signed integers, logical for unsigned.
    Shr,
    /// IEEE maxNum / minNum for floats: a NaN operand loses to a number.
    Max,
    Min,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpPred {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpPred {
    /// Whether the predicate holds for operands ordered `o`; unordered (a NaN) compares false
    /// except for `ne`. The one rule of the interpreter, the emulator and constant folding.
    pub fn holds(self, o: Option<std::cmp::Ordering>) -> bool {
        match o {
            None => self == CmpPred::Ne,
            Some(o) => match self {
                CmpPred::Eq => o.is_eq(),
                CmpPred::Ne => o.is_ne(),
                CmpPred::Lt => o.is_lt(),
                CmpPred::Le => o.is_le(),
                CmpPred::Gt => o.is_gt(),
                CmpPred::Ge => o.is_ge(),
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Max,
    Min,
    Xchg,
}

/// How a `dot` treats f32 operands (Triton's `input_precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum InputPrecision {
    /// Every operand is used as it is: products exact, summed in f32.
    #[default]
    Ieee,
    /// Each f32 operand element is first rounded to tf32 (10 fraction bits, to nearest with
    /// ties away from zero, as `cvt.rna.tf32.f32`; NaN and infinities kept, a finite value that
    /// rounds past the largest f32 becomes an infinity), then multiplied exactly and summed in
    /// f32: what tensor cores compute from f32 inputs, on every backend, so that a kernel gives
    /// the same answer with and without them. Only for f32 operands.
    Tf32,
}

impl InputPrecision {
    /// The name the text form uses.
    pub fn name(self) -> &'static str {
        match self {
            InputPrecision::Ieee => "ieee",
            InputPrecision::Tf32 => "tf32",
        }
    }

    pub fn from_name(s: &str) -> Option<InputPrecision> {
        [InputPrecision::Ieee, InputPrecision::Tf32].into_iter().find(|p| p.name() == s)
    }
}

/// `x` rounded to tf32 ([`InputPrecision::Tf32`]): to nearest with ties away from zero at the
/// 13th bit below the fraction's top, in f32 bits.
pub fn round_tf32(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    f32::from_bits(x.to_bits().wrapping_add(0x1000) & !0x1fff)
}

/// The combining function of a `reduce` or `scan`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Combine {
    Sum,
    Prod,
    /// IEEE maxNum for floats.
    Max,
    Min,
    /// Index (i32) of the largest element; the lowest index wins ties. `reduce` only.
    ArgMax,
    /// Index (i32) of the smallest element; the lowest index wins ties. `reduce` only.
    ArgMin,
    /// A user function: a block with two scalar arguments of the operand dtype that yields one
    /// value of that dtype. It must be associative; the order of application is unspecified.
    Custom(Block),
}

/// An operation. Result types live in the value arena, addressed by [`Inst::results`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// The value of scalar parameter `param` (an index into [`Program::params`]).
    Arg {
        param: u32,
    },
    /// Index of this program instance along `axis` of the grid (i32).
    ProgramId {
        axis: u32,
    },
    /// Number of program instances along `axis` (i32).
    NumPrograms {
        axis: u32,
    },
    /// A scalar constant of the result dtype.
    Const {
        value: Scalar,
    },
    /// `[start, end)` as a 1-D i32 tile; `end - start` is a power of two.
    Arange {
        start: i64,
        end: i64,
    },
    /// A scalar repeated over the result shape.
    Splat {
        x: Value,
    },
    /// Expands dimensions of extent 1 to the result shape (same rank).
    Broadcast {
        x: Value,
    },
    /// Inserts a dimension of extent 1 before `axis` (`axis == rank` appends).
    ExpandDims {
        x: Value,
        axis: u32,
    },
    /// Same elements in row-major order, result shape from the result type.
    Reshape {
        x: Value,
    },
    /// Permutes dimensions: result dim `i` is operand dim `perm[i]`.
    Trans {
        x: Value,
        perm: Vec<u32>,
    },
    Unary {
        op: UnaryOp,
        x: Value,
    },
    Binary {
        op: BinaryOp,
        lhs: Value,
        rhs: Value,
    },
    /// Elementwise comparison; the result is `i1`.
    Cmp {
        pred: CmpPred,
        lhs: Value,
        rhs: Value,
    },
    /// `cond ? on_true : on_false` elementwise; `cond` is `i1`.
    Select {
        cond: Value,
        on_true: Value,
        on_false: Value,
    },
    /// `a * b + c`, fused for floats.
    Fma {
        a: Value,
        b: Value,
        c: Value,
    },
    /// Conversion to the result dtype: float rounding is round-to-nearest-even; float to integer
    /// truncates toward zero and saturates (NaN becomes 0); integer to integer wraps; anything to
    /// `i1` is `x != 0`.
    Cast {
        x: Value,
    },
    /// Reads `buffer[offsets]` where `mask` holds; masked-off lanes take `other` (or are
    /// unspecified when `other` is absent). Offsets are i32, u32 or i64; the result has their shape.
    Load {
        buffer: BufferId,
        offsets: Value,
        mask: Option<Value>,
        other: Option<Value>,
    },
    /// Writes `value` to `buffer[offsets]` where `mask` holds.
    Store {
        buffer: BufferId,
        offsets: Value,
        value: Value,
        mask: Option<Value>,
    },
    /// Atomic read-modify-write per lane; the result is the old value.
    Atomic {
        op: AtomicOp,
        buffer: BufferId,
        offsets: Value,
        value: Value,
        mask: Option<Value>,
    },
    /// Atomic compare-and-swap per lane; the result is the old value.
    AtomicCas {
        buffer: BufferId,
        offsets: Value,
        cmp: Value,
        value: Value,
        mask: Option<Value>,
    },
    /// Reduces `axis` away.
    Reduce {
        x: Value,
        axis: u32,
        combine: Combine,
    },
    /// Reduces `axis` of several tiles of one shape together, as Triton's `tl.reduce` over a
    /// tuple: `combine` takes the N accumulated scalars then the N scalars of another element
    /// (2N arguments of the operands' dtypes, in order) and yields N values of those dtypes;
    /// the N results are the operands' shape with `axis` removed. `combine` must be associative
    /// and commutative: the order of application and of its two sides is unspecified (the
    /// interpreter combines a pairwise tree, lower indices first; lanes of a GPU butterfly each
    /// put their own side first). An argmax with ties broken by the lower index is both.
    ReduceTuple {
        xs: Vec<Value>,
        axis: u32,
        combine: Block,
    },
    /// Inclusive scan along `axis` (from the end when `reverse`).
    Scan {
        x: Value,
        axis: u32,
        combine: Combine,
        reverse: bool,
    },
    /// `a @ b + acc` for 2-D tiles `[M, K] x [K, N] + [M, N]`. The result has the
    /// accumulator's dtype. Float products are exact and are summed with `acc` in f32 (an f16
    /// accumulator is widened first), in an order each backend chooses (matrix instructions
    /// sum K in chunks); the sum is rounded once to the accumulator's dtype at the end of the
    /// `dot`, not after every product. Integer dots sum in i32, wrapping. `precision` says
    /// whether f32 operands are first rounded to tf32 ([`InputPrecision`]).
    Dot {
        a: Value,
        b: Value,
        acc: Value,
        precision: InputPrecision,
    },
    /// `for iv in (lower..upper).step_by(step)` with loop-carried values. The body's arguments are
    /// the induction variable then one per carried value; its `yield` gives the next values; the
    /// results are the carried values after the last iteration.
    For {
        lower: Value,
        upper: Value,
        step: Value,
        init: Vec<Value>,
        body: Block,
    },
    /// Runs one branch; both yield values of the result types.
    If {
        cond: Value,
        then_block: Block,
        else_block: Block,
    },
    /// Ends a region block, handing values to the enclosing op.
    Yield {
        values: Vec<Value>,
    },
    /// Asserts that `cond` (an `i1` scalar or tile) holds on every lane. A lane where it is false
    /// is a failed assertion: the interpreter and checked launches report `message` with the
    /// op's location, the program id and the lane. An unchecked GPU lowering drops the op, so
    /// asserts cost nothing unless a launch is checked.
    DeviceAssert {
        cond: Value,
        message: String,
    },
}

impl Op {
    /// The op's name in the text form and in error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Arg { .. } => "arg",
            Op::ProgramId { .. } => "program_id",
            Op::NumPrograms { .. } => "num_programs",
            Op::Const { .. } => "const",
            Op::Arange { .. } => "arange",
            Op::Splat { .. } => "splat",
            Op::Broadcast { .. } => "broadcast",
            Op::ExpandDims { .. } => "expand_dims",
            Op::Reshape { .. } => "reshape",
            Op::Trans { .. } => "trans",
            Op::Unary { op, .. } => op.name(),
            Op::Binary { op, .. } => op.name(),
            Op::Cmp { .. } => "cmp",
            Op::Select { .. } => "select",
            Op::Fma { .. } => "fma",
            Op::Cast { .. } => "cast",
            Op::Load { .. } => "load",
            Op::Store { .. } => "store",
            Op::Atomic { op, .. } => op.name(),
            Op::AtomicCas { .. } => "atomic_cas",
            Op::Reduce { .. } => "reduce",
            Op::ReduceTuple { .. } => "reduce_tuple",
            Op::Scan { .. } => "scan",
            Op::Dot { .. } => "dot",
            Op::For { .. } => "for",
            Op::If { .. } => "if",
            Op::Yield { .. } => "yield",
            Op::DeviceAssert { .. } => "device_assert",
        }
    }

    /// Mutable handles to the values this op reads directly, in [`Op::operands`]' order.
    pub fn operands_mut(&mut self) -> Vec<&mut Value> {
        match self {
            Op::Arg { .. } | Op::ProgramId { .. } | Op::NumPrograms { .. } | Op::Const { .. } | Op::Arange { .. } => vec![],
            Op::Splat { x }
            | Op::Broadcast { x }
            | Op::ExpandDims { x, .. }
            | Op::Reshape { x }
            | Op::Trans { x, .. }
            | Op::Unary { x, .. }
            | Op::Cast { x }
            | Op::Reduce { x, .. }
            | Op::Scan { x, .. } => vec![x],
            Op::Binary { lhs, rhs, .. } | Op::Cmp { lhs, rhs, .. } => vec![lhs, rhs],
            Op::Select { cond, on_true, on_false } => vec![cond, on_true, on_false],
            Op::Fma { a, b, c } => vec![a, b, c],
            Op::Load { offsets, mask, other, .. } => {
                let mut v = vec![offsets];
                v.extend(mask.iter_mut());
                v.extend(other.iter_mut());
                v
            }
            Op::Store { offsets, value, mask, .. } | Op::Atomic { offsets, value, mask, .. } => {
                let mut v = vec![offsets, value];
                v.extend(mask.iter_mut());
                v
            }
            Op::AtomicCas { offsets, cmp, value, mask, .. } => {
                let mut v = vec![offsets, cmp, value];
                v.extend(mask.iter_mut());
                v
            }
            Op::Dot { a, b, acc, .. } => vec![a, b, acc],
            Op::For { lower, upper, step, init, .. } => {
                let mut v = vec![lower, upper, step];
                v.extend(init.iter_mut());
                v
            }
            Op::If { cond, .. } | Op::DeviceAssert { cond, .. } => vec![cond],
            Op::Yield { values } | Op::ReduceTuple { xs: values, .. } => values.iter_mut().collect(),
        }
    }

    /// Values this op reads directly (not those used inside its nested blocks).
    pub fn operands(&self) -> Vec<Value> {
        match self {
            Op::Arg { .. } | Op::ProgramId { .. } | Op::NumPrograms { .. } | Op::Const { .. } | Op::Arange { .. } => vec![],
            Op::Splat { x }
            | Op::Broadcast { x }
            | Op::ExpandDims { x, .. }
            | Op::Reshape { x }
            | Op::Trans { x, .. }
            | Op::Unary { x, .. }
            | Op::Cast { x }
            | Op::Reduce { x, .. }
            | Op::Scan { x, .. } => vec![*x],
            Op::Binary { lhs, rhs, .. } | Op::Cmp { lhs, rhs, .. } => vec![*lhs, *rhs],
            Op::Select { cond, on_true, on_false } => vec![*cond, *on_true, *on_false],
            Op::Fma { a, b, c } => vec![*a, *b, *c],
            Op::Load { offsets, mask, other, .. } => {
                let mut v = vec![*offsets];
                v.extend(mask.iter().copied());
                v.extend(other.iter().copied());
                v
            }
            Op::Store { offsets, value, mask, .. } | Op::Atomic { offsets, value, mask, .. } => {
                let mut v = vec![*offsets, *value];
                v.extend(mask.iter().copied());
                v
            }
            Op::AtomicCas { offsets, cmp, value, mask, .. } => {
                let mut v = vec![*offsets, *cmp, *value];
                v.extend(mask.iter().copied());
                v
            }
            Op::Dot { a, b, acc, .. } => vec![*a, *b, *acc],
            Op::For { lower, upper, step, init, .. } => {
                let mut v = vec![*lower, *upper, *step];
                v.extend(init.iter().copied());
                v
            }
            Op::If { cond, .. } | Op::DeviceAssert { cond, .. } => vec![*cond],
            Op::Yield { values } | Op::ReduceTuple { xs: values, .. } => values.clone(),
        }
    }

    /// Nested blocks, in order (for bodies, if branches, custom combine functions).
    pub fn blocks(&self) -> Vec<&Block> {
        match self {
            Op::For { body, .. } => vec![body],
            Op::If { then_block, else_block, .. } => vec![then_block, else_block],
            Op::Reduce { combine: Combine::Custom(b), .. } | Op::Scan { combine: Combine::Custom(b), .. } | Op::ReduceTuple { combine: b, .. } => {
                vec![b]
            }
            _ => vec![],
        }
    }

    /// Whether the op writes memory (and so must not be removed or reordered across others that
    /// touch the same buffer), or reports a failure (`device_assert`, which defines nothing but
    /// must not be removed).
    pub fn has_side_effects(&self) -> bool {
        matches!(self, Op::Store { .. } | Op::Atomic { .. } | Op::AtomicCas { .. } | Op::DeviceAssert { .. })
    }
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 16] = [
        UnaryOp::Neg,
        UnaryOp::Not,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Erf,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
    ];
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Not => "not",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log => "log",
            UnaryOp::Log2 => "log2",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Erf => "erf",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
        }
    }
    /// Ops defined only on floats (the rest also take integers; `not` takes only integers).
    pub fn float_only(self) -> bool {
        !matches!(self, UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs)
    }
    /// Ops whose result is exact in the operand's own dtype (no rounding of an f32 result back
    /// to f16 or bf16 is needed, and every backend gives the same bits).
    pub fn exact(self) -> bool {
        matches!(self, UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round)
    }
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 12] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::Shl,
        BinaryOp::Shr,
        BinaryOp::Max,
        BinaryOp::Min,
    ];
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
            BinaryOp::Shl => "shl",
            BinaryOp::Shr => "shr",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
        }
    }
    /// Bitwise ops and shifts take integers only.
    pub fn int_only(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Shl | BinaryOp::Shr)
    }
}

impl CmpPred {
    pub const ALL: [CmpPred; 6] = [CmpPred::Eq, CmpPred::Ne, CmpPred::Lt, CmpPred::Le, CmpPred::Gt, CmpPred::Ge];
    pub fn name(self) -> &'static str {
        match self {
            CmpPred::Eq => "eq",
            CmpPred::Ne => "ne",
            CmpPred::Lt => "lt",
            CmpPred::Le => "le",
            CmpPred::Gt => "gt",
            CmpPred::Ge => "ge",
        }
    }
}

impl AtomicOp {
    pub const ALL: [AtomicOp; 4] = [AtomicOp::Add, AtomicOp::Max, AtomicOp::Min, AtomicOp::Xchg];
    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "atomic_add",
            AtomicOp::Max => "atomic_max",
            AtomicOp::Min => "atomic_min",
            AtomicOp::Xchg => "atomic_xchg",
        }
    }
}

impl Combine {
    pub fn name(&self) -> &'static str {
        match self {
            Combine::Sum => "sum",
            Combine::Prod => "prod",
            Combine::Max => "max",
            Combine::Min => "min",
            Combine::ArgMax => "argmax",
            Combine::ArgMin => "argmin",
            Combine::Custom(_) => "custom",
        }
    }
}

/// One instruction: an op, the values it defines, and where it was built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inst {
    pub op: Op,
    pub results: Vec<Value>,
    pub loc: Loc,
}

/// A straight-line list of instructions with arguments. Region blocks end with `yield`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Block {
    pub args: Vec<Value>,
    pub insts: Vec<Inst>,
}

/// A tile program: what one program instance of the grid does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    pub params: Vec<Param>,
    /// Number of grid axes the program uses, 1 to 3.
    pub grid_rank: u32,
    /// Type of every value, addressed by [`Value`].
    pub values: Arena<ValueDecl>,
    pub body: Block,
}

impl Program {
    /// The type of `v`. Panics only on a handle from another program, which the verifier rejects.
    pub fn ty(&self, v: Value) -> &Type {
        &self.values[v]
    }

    /// Buffer parameter `id`, if `id` names one.
    pub fn buffer(&self, id: BufferId) -> Option<(&str, DType, Access)> {
        match self.params.get(id as usize) {
            Some(Param { name, kind: ParamKind::Buffer { dtype, access } }) => Some((name.as_str(), *dtype, *access)),
            _ => None,
        }
    }

    /// Visits every instruction, nested blocks included, in program order.
    pub fn walk(&self, f: &mut impl FnMut(&Inst)) {
        fn go(b: &Block, f: &mut impl FnMut(&Inst)) {
            for inst in &b.insts {
                f(inst);
                for nested in inst.op.blocks() {
                    go(nested, f);
                }
            }
        }
        go(&self.body, f)
    }

    /// Total number of instructions, nested ones included.
    pub fn num_insts(&self) -> usize {
        let mut n = 0;
        self.walk(&mut |_| n += 1);
        n
    }
}
