//! The verifier: one pass that checks every invariant of [`crate::ir`].
//!
//! It walks the program in order (an instruction's operands, its results, its own typing rules,
//! then its nested blocks) and stops at the first violation, so the error names the earliest
//! offending instruction and the source line that built it. Scoping is tracked with one depth per
//! value: a value is visible while the block that defined it is open, and a custom combine
//! function raises a barrier so that it sees only its own arguments and values.
//!
//! After `verify` accepts a program, later stages may index the value arena and rely on every
//! shape and dtype rule below without re-checking. The verifier itself never panics, whatever the
//! program holds: every handle is looked up fallibly and all size arithmetic is checked.
//!
//! Rules the op docs in [`crate::ir`] imply and this pass spells out:
//! - a tile has at most 2^20 elements (Triton's limit), and `dot` extents are at least 16;
//! - a combine function is a pure scalar function: it sees only its own arguments and values,
//!   defines only scalars, and holds no memory access, control flow, `program_id`,
//!   `num_programs`, `arg` or `device_assert` (a failure there could name no lane);
//! - a loop's induction variable is an integer other than `i1`, and a constant step is positive;
//! - the program body takes no arguments, and regions nest at most 64 levels deep, so that every
//!   recursive stage stays within its stack;
//! - arena entries that nothing defines or uses are allowed (a pass may drop instructions without
//!   compacting the arena); a value that is used must be defined, once, where it dominates the use.

// A verify error is built once per failed program and carries the facts its message needs;
// boxing it would only move that cost around.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;

use crate::ir::*;

/// A program breaks an invariant: which op, where it was built, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{op}` at {loc}: {kind}")]
pub struct VerifyError {
    /// The offending op's name (`program` for program-level errors such as parameter names).
    pub op: String,
    /// Where the offending instruction was built (unknown for program-level errors).
    pub loc: Loc,
    pub kind: VerifyErrorKind,
}

/// What is wrong. Each variant is one class of violation and carries the facts its message
/// needs; errors about nested blocks (arguments, `yield`) are reported at the op owning them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyErrorKind {
    // ----- the program -----
    #[error("grid rank {rank} is outside 1..=3")]
    GridRank { rank: u32 },
    #[error("the program body has {count} block arguments; it takes none (scalar parameters are read with `arg`)")]
    BodyArgs { count: usize },
    #[error("parameter {index} has an empty name")]
    EmptyParamName { index: usize },
    #[error("parameters {first} and {second} are both named `{name}`")]
    DuplicateParamName { name: String, first: usize, second: usize },
    #[error("parameter index {param} is out of range: the program has {count} parameters")]
    NoSuchParam { param: u32, count: usize },
    #[error("parameter {param} `{name}` is a buffer, not a scalar")]
    NotScalarParam { param: u32, name: String },
    #[error("buffer {buffer} is out of range: the program has {count} parameters")]
    NoSuchBuffer { buffer: u32, count: usize },
    #[error("parameter {buffer} `{name}` is a scalar, not a buffer")]
    NotABuffer { buffer: u32, name: String },
    #[error("buffer `{name}` is declared {}, but this op needs {} access{}", .declared.name(), .needed.name(), access_why(*.needed))]
    BufferAccess { name: String, declared: Access, needed: Access },

    // ----- handles and SSA -----
    #[error("value %{value} is outside the value arena, which holds {len} values")]
    BadHandle { value: usize, len: usize },
    #[error("value %{value} is defined more than once (first by {first})")]
    Redefined { value: usize, first: String },
    #[error("value %{value} is listed twice among the results")]
    DuplicateResult { value: usize },
    #[error("value %{value} is used but never defined")]
    Undefined { value: usize },
    #[error("value %{value} is used before its definition by {def}")]
    UseBeforeDef { value: usize, def: String },
    #[error("value %{value} is used outside the block that defines it (by {def}); values defined in a region are not visible after it closes")]
    OutOfScope { value: usize, def: String },
    #[error("value %{value} is defined outside the combine function of `{owner}`; a combine function sees only its own arguments and the values it defines")]
    CombineCapture { value: usize, owner: &'static str },
    #[error("not allowed in the combine function of `{owner}`, which must be a pure scalar function")]
    ImpureCombine { owner: &'static str },
    #[error("defines the tile {ty} inside the combine function of `{owner}`, which computes on scalars only")]
    TileInCombine { ty: Type, owner: &'static str },
    #[error("has {found} results, expected {expected}")]
    ResultCount { expected: usize, found: usize },

    // ----- blocks -----
    #[error("the {block} block does not end with `yield`")]
    MissingYield { block: &'static str },
    #[error("`yield` is followed by {following} instructions; it must be the last instruction of its block")]
    YieldNotLast { following: usize },
    #[error("`yield` in the program body; only region blocks (loop bodies, if branches, combine functions) end with `yield`")]
    YieldAtTopLevel,
    #[error("the {block} block has {found} arguments, expected {expected}")]
    BlockArgCount { block: &'static str, expected: usize, found: usize },
    #[error("the {block} block yields {found} values, expected {expected}")]
    YieldCount { block: &'static str, expected: usize, found: usize },
    #[error("regions nest more than {limit} levels deep")]
    TooDeep { limit: u32 },

    // ----- types -----
    #[error("type {ty}: extent {extent} is not a power of two")]
    NotPowerOfTwo { ty: Type, extent: usize },
    #[error("type {ty} has {numel} elements, more than the limit of 2^20 = 1048576")]
    TooManyElements { ty: Type, numel: u128 },
    #[error("{what} has type {found}, expected {expected}")]
    WrongType { what: String, found: Type, expected: Type },
    #[error("{what} has dtype {found}, expected {expected}")]
    WrongDType { what: String, found: DType, expected: String },
    #[error("{what} dtypes {a} and {b} differ")]
    DTypeMismatch { what: String, a: DType, b: DType },
    #[error("{what} must be a scalar, found {ty}")]
    ExpectedScalar { what: String, ty: Type },
    #[error("{what} must be a tile, found the scalar type {ty}")]
    ExpectedTile { what: String, ty: Type },
    #[error("{}", operand_shapes(.a_name, .a, .b_name, .b))]
    OperandShapes { a_name: &'static str, a: Vec<usize>, b_name: &'static str, b: Vec<usize> },

    // ----- op-specific rules -----
    #[error("writes {value} values to the {dtype} buffer `{name}`; a float is not converted to an integer implicitly: convert with `.cast({dtype})` (truncates toward zero) or `.cast_saturating({dtype}, Rounding::NearestEven)` (rounds), both saturating")]
    FloatToIntWrite { name: String, value: DType, dtype: DType },
    #[error("grid axis {axis} is out of range: the grid has rank {grid_rank}")]
    GridAxis { axis: u32, grid_rank: u32 },
    #[error("constant {value} does not fit {dtype}")]
    ConstRange { value: Scalar, dtype: DType },
    #[error("arange({start}, {end}): end must be greater than start")]
    ArangeEmpty { start: i64, end: i64 },
    #[error("arange({start}, {end}): the extent {extent} is not a power of two of at most 2^20")]
    ArangeExtent { start: i64, end: i64, extent: i128 },
    #[error("arange({start}, {end}): start and end must lie within i32")]
    ArangeBounds { start: i64, end: i64 },
    #[error("{}", broadcast_message(.from, .to))]
    Broadcast { from: Vec<usize>, to: Vec<usize> },
    #[error("axis {axis} is out of range for the operand {ty} (valid axes: {valid})")]
    AxisRange { axis: u32, ty: Type, valid: String },
    #[error("cannot reshape {from} ({} elements) to {to} ({} elements)", .from.numel(), .to.numel())]
    ReshapeNumel { from: Type, to: Type },
    #[error("{perm:?} is not a permutation of 0..{rank}")]
    BadPermutation { perm: Vec<u32>, rank: usize },
    #[error("`other` is given without `mask`; only masked-off lanes read `other`")]
    OtherWithoutMask,
    #[error("this atomic does not support {dtype}; it takes {supported}")]
    AtomicDType { dtype: DType, supported: &'static str },
    #[error("`{combine}` cannot combine a scan; argmax and argmin are reductions only")]
    ScanCombine { combine: &'static str },
    #[error("has no operands; a tuple reduction reduces one or more tiles")]
    EmptyTuple,
    #[error("`{operand}` must be a 2-D tile, found {ty}")]
    DotRank { operand: &'static str, ty: Type },
    #[error("K extents differ: a is {a:?}, b is {b:?}")]
    DotK { a: Vec<usize>, b: Vec<usize> },
    #[error("acc is {acc:?}, expected [M, N] = {expected:?}")]
    DotAcc { acc: Vec<usize>, expected: Vec<usize> },
    #[error("M = {m}, N = {n}, K = {k}: every dot extent must be at least 16 (the smallest matrix-unit tile)")]
    DotTooSmall { m: usize, n: usize, k: usize },
    #[error("unsupported dtypes a {a}, b {b}, acc {acc}; supported (a, b) -> acc: (f16, f16) -> f32 or f16, (bf16, bf16) -> f32, (f32, f32) -> f32, (i8, i8) -> i32")]
    DotDTypes { a: DType, b: DType, acc: DType },
    #[error("input precision {precision} needs f32 operands, found a {a}, b {b} (it says how f32 is rounded before the products)")]
    DotPrecision { precision: &'static str, a: DType, b: DType },
    #[error("loop bounds have different dtypes: lower {lower}, upper {upper}, step {step}")]
    LoopBoundDTypes { lower: DType, upper: DType, step: DType },
    #[error("the step is the constant {step}; a loop needs a positive step")]
    LoopStep { step: i64 },
}

fn access_why(needed: Access) -> &'static str {
    if needed == Access::ReadWrite {
        " (an atomic reads the old value back)"
    } else {
        ""
    }
}

/// Numpy's rule: right-aligned extents are equal or one of them is 1.
fn broadcastable(a: &[usize], b: &[usize]) -> bool {
    a.iter().rev().zip(b.iter().rev()).all(|(x, y)| x == y || *x == 1 || *y == 1)
}

fn operand_shapes(a_name: &str, a: &[usize], b_name: &str, b: &[usize]) -> String {
    if broadcastable(a, b) {
        format!("operand shapes {a:?} and {b:?} differ (`{a_name}` and `{b_name}`); the IR needs identical shapes, with an explicit `broadcast`")
    } else {
        format!("operand shapes {a:?} and {b:?} do not broadcast (`{a_name}` and `{b_name}`)")
    }
}

fn broadcast_message(from: &[usize], to: &[usize]) -> String {
    if from.len() != to.len() {
        return format!(
            "cannot broadcast {from:?} to {to:?}: ranks {} and {} differ (add dimensions with `expand_dims` first)",
            from.len(),
            to.len()
        );
    }
    match from.iter().zip(to).enumerate().find(|(_, (f, t))| f != t && **f != 1) {
        Some((i, (f, t))) => {
            format!("cannot broadcast {from:?} to {to:?}: extent {f} of dimension {i} is neither 1 nor {t}")
        }
        None => format!("cannot broadcast {from:?} to {to:?}"),
    }
}

/// Checks every invariant of `program` and returns the first violation, in program order.
pub fn verify(program: &Program) -> Result<(), VerifyError> {
    Verifier::new(program).run()
}

/// Triton's limit on the number of elements of one tile.
const MAX_NUMEL: u128 = 1 << 20;
/// Deeper nesting than this is surely a generator bug, and every stage that recurses over blocks
/// (this one included) must be able to do so without exhausting the stack.
const MAX_DEPTH: u32 = 64;
/// `depth[v]` for a value that is not visible.
const HIDDEN: u32 = u32::MAX;

struct Verifier<'p> {
    p: &'p Program,
    /// Whether each value has been defined yet (anywhere).
    defined: Vec<bool>,
    /// Block depth of each visible value's definition, or [`HIDDEN`].
    depth: Vec<u32>,
    /// Values defined by each open block, to hide them when it closes.
    scopes: Vec<Vec<usize>>,
    /// Values below this depth are invisible (the innermost custom combine function's depth).
    barrier: u32,
    /// The op owning the innermost combine function being walked.
    combine_owner: Option<&'static str>,
    /// Integer constants, for the loop-step check.
    const_ints: HashMap<usize, i64>,
}

#[derive(Clone, Copy)]
struct Region<'p> {
    name: &'static str,
    owner: &'p Inst,
}

type Check<T = ()> = Result<T, VerifyErrorKind>;

fn at(inst: &Inst, kind: VerifyErrorKind) -> VerifyError {
    VerifyError { op: inst.op.name().to_string(), loc: inst.loc.clone(), kind }
}

fn program_error(kind: VerifyErrorKind) -> VerifyError {
    VerifyError { op: "program".to_string(), loc: Loc::default(), kind }
}

fn wrong_type(what: impl Into<String>, found: &Type, expected: &Type) -> Check {
    if found == expected {
        Ok(())
    } else {
        Err(VerifyErrorKind::WrongType { what: what.into(), found: found.clone(), expected: expected.clone() })
    }
}

fn wrong_dtype(what: impl Into<String>, found: DType, expected: impl Into<String>) -> VerifyErrorKind {
    VerifyErrorKind::WrongDType { what: what.into(), found, expected: expected.into() }
}

fn same_shape(a_name: &'static str, a: &Type, b_name: &'static str, b: &Type) -> Check {
    if a.shape == b.shape {
        Ok(())
    } else {
        Err(VerifyErrorKind::OperandShapes { a_name, a: a.shape.clone(), b_name, b: b.shape.clone() })
    }
}

fn same_dtype(what: &str, a: &Type, b: &Type) -> Check {
    if a.dtype == b.dtype {
        Ok(())
    } else {
        Err(VerifyErrorKind::DTypeMismatch { what: what.to_string(), a: a.dtype, b: b.dtype })
    }
}

fn scalar(what: &str, t: &Type) -> Check {
    if t.is_scalar() {
        Ok(())
    } else {
        Err(VerifyErrorKind::ExpectedScalar { what: what.to_string(), ty: t.clone() })
    }
}

fn mask_dtype(t: &Type) -> Check {
    if t.dtype == DType::I1 {
        Ok(())
    } else {
        Err(wrong_dtype("`mask`", t.dtype, "i1"))
    }
}

fn offsets_dtype(t: &Type) -> Check {
    match t.dtype {
        DType::I32 | DType::U32 | DType::I64 => Ok(()),
        d => Err(wrong_dtype("`offsets`", d, "i32, u32 or i64")),
    }
}

/// Extents are powers of two and a tile holds at most 2^20 elements.
fn well_formed(ty: &Type) -> Check {
    if let Some(&extent) = ty.shape.iter().find(|d| !d.is_power_of_two()) {
        return Err(VerifyErrorKind::NotPowerOfTwo { ty: ty.clone(), extent });
    }
    let numel = ty.shape.iter().fold(1u128, |n, &d| n.saturating_mul(d as u128));
    if numel > MAX_NUMEL {
        return Err(VerifyErrorKind::TooManyElements { ty: ty.clone(), numel });
    }
    Ok(())
}

fn is_yield(inst: Option<&Inst>) -> bool {
    matches!(inst, Some(Inst { op: Op::Yield { .. }, .. }))
}

/// Ops a combine function may not contain: memory, control flow and anything that depends on
/// the program instance or its parameters.
fn impure(op: &Op) -> bool {
    matches!(
        op,
        Op::Load { .. }
            | Op::Store { .. }
            | Op::Atomic { .. }
            | Op::AtomicCas { .. }
            | Op::For { .. }
            | Op::If { .. }
            | Op::ProgramId { .. }
            | Op::NumPrograms { .. }
            | Op::Arg { .. }
            | Op::DeviceAssert { .. }
    )
}

impl<'p> Verifier<'p> {
    fn new(p: &'p Program) -> Self {
        let n = p.values.len();
        Verifier {
            p,
            defined: vec![false; n],
            depth: vec![HIDDEN; n],
            scopes: Vec::new(),
            barrier: 0,
            combine_owner: None,
            const_ints: HashMap::new(),
        }
    }

    fn run(mut self) -> Result<(), VerifyError> {
        let p = self.p;
        if !(1..=3).contains(&p.grid_rank) {
            return Err(program_error(VerifyErrorKind::GridRank { rank: p.grid_rank }));
        }
        if !p.body.args.is_empty() {
            return Err(program_error(VerifyErrorKind::BodyArgs { count: p.body.args.len() }));
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (index, param) in p.params.iter().enumerate() {
            if param.name.is_empty() {
                return Err(program_error(VerifyErrorKind::EmptyParamName { index }));
            }
            if let Some(&first) = seen.get(param.name.as_str()) {
                return Err(program_error(VerifyErrorKind::DuplicateParamName { name: param.name.clone(), first, second: index }));
            }
            seen.insert(&param.name, index);
        }
        self.scopes.push(Vec::new());
        self.walk(&p.body, None)
    }

    // ----- values and scopes -----

    fn ty(&self, v: Value) -> Check<&'p Type> {
        self.p.values.get(v).ok_or(VerifyErrorKind::BadHandle { value: v.index(), len: self.p.values.len() })
    }

    fn handle(&self, v: Value) -> Check {
        self.ty(v).map(|_| ())
    }

    fn check_use(&self, v: Value) -> Check {
        self.handle(v)?;
        let i = v.index();
        let d = self.depth[i];
        if d == HIDDEN {
            let def = find_def(self.p, v);
            return Err(match (self.defined[i], def) {
                (true, def) => VerifyErrorKind::OutOfScope { value: i, def: def.unwrap_or_default() },
                (false, Some(def)) => VerifyErrorKind::UseBeforeDef { value: i, def },
                (false, None) => VerifyErrorKind::Undefined { value: i },
            });
        }
        if d < self.barrier {
            return Err(VerifyErrorKind::CombineCapture { value: i, owner: self.combine_owner.unwrap_or("reduce") });
        }
        Ok(())
    }

    fn not_defined_yet(&self, v: Value) -> Check {
        self.handle(v)?;
        if self.defined[v.index()] {
            return Err(VerifyErrorKind::Redefined { value: v.index(), first: find_def(self.p, v).unwrap_or_default() });
        }
        Ok(())
    }

    fn define(&mut self, v: Value) -> Check {
        self.not_defined_yet(v)?;
        let i = v.index();
        self.defined[i] = true;
        self.depth[i] = (self.scopes.len() as u32).saturating_sub(1);
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(i);
        }
        Ok(())
    }

    // ----- blocks -----

    /// Walks the instructions of a block whose scope is already open.
    fn walk(&mut self, block: &'p Block, region: Option<Region<'p>>) -> Result<(), VerifyError> {
        let n = block.insts.len();
        for (i, inst) in block.insts.iter().enumerate() {
            if let Op::Yield { .. } = inst.op {
                if region.is_none() {
                    return Err(at(inst, VerifyErrorKind::YieldAtTopLevel));
                }
                if i + 1 != n {
                    return Err(at(inst, VerifyErrorKind::YieldNotLast { following: n - i - 1 }));
                }
            }
            self.inst(inst)?;
        }
        if let Some(r) = region {
            if !is_yield(block.insts.last()) {
                return Err(at(r.owner, VerifyErrorKind::MissingYield { block: r.name }));
            }
        }
        Ok(())
    }

    /// Checks a region block of `owner`: its arguments against `arg_types`, its body, and its
    /// `yield` against `yield_types`.
    fn region(
        &mut self,
        owner: &'p Inst,
        name: &'static str,
        block: &'p Block,
        arg_types: &[Type],
        yield_types: &[Type],
        combine: bool,
    ) -> Result<(), VerifyError> {
        let err = |k| at(owner, k);
        if self.scopes.len() as u32 > MAX_DEPTH {
            return Err(err(VerifyErrorKind::TooDeep { limit: MAX_DEPTH }));
        }
        if block.args.len() != arg_types.len() {
            return Err(err(VerifyErrorKind::BlockArgCount { block: name, expected: arg_types.len(), found: block.args.len() }));
        }
        let saved = (self.barrier, self.combine_owner);
        self.scopes.push(Vec::new());
        if combine {
            self.barrier = (self.scopes.len() as u32).saturating_sub(1);
            self.combine_owner = Some(owner.op.name());
        }
        let result = self.region_inner(owner, name, block, arg_types);
        for i in self.scopes.pop().unwrap_or_default() {
            self.depth[i] = HIDDEN;
        }
        (self.barrier, self.combine_owner) = saved;
        result?;

        // The yield's handles were checked when the block was walked.
        let values = match block.insts.last() {
            Some(Inst { op: Op::Yield { values }, .. }) => values,
            _ => return Err(err(VerifyErrorKind::MissingYield { block: name })),
        };
        if values.len() != yield_types.len() {
            return Err(err(VerifyErrorKind::YieldCount { block: name, expected: yield_types.len(), found: values.len() }));
        }
        for (i, (&v, expected)) in values.iter().zip(yield_types).enumerate() {
            let found = self.ty(v).map_err(err)?;
            wrong_type(format!("value {i} yielded by the {name} block"), found, expected).map_err(err)?;
        }
        Ok(())
    }

    fn region_inner(&mut self, owner: &'p Inst, name: &'static str, block: &'p Block, arg_types: &[Type]) -> Result<(), VerifyError> {
        let err = |k| at(owner, k);
        for (i, (&a, expected)) in block.args.iter().zip(arg_types).enumerate() {
            self.define(a).map_err(err)?;
            let found = self.ty(a).map_err(err)?;
            wrong_type(format!("argument {i} of the {name} block"), found, expected).map_err(err)?;
        }
        self.walk(block, Some(Region { name, owner }))
    }

    // ----- instructions -----

    fn inst(&mut self, inst: &'p Inst) -> Result<(), VerifyError> {
        let err = |k| at(inst, k);
        if let Some(owner) = self.combine_owner {
            if impure(&inst.op) {
                return Err(err(VerifyErrorKind::ImpureCombine { owner }));
            }
        }
        for v in inst.op.operands() {
            self.check_use(v).map_err(err)?;
        }
        self.results(inst).map_err(err)?;
        self.op(inst).map_err(err)?;
        for &r in &inst.results {
            let ty = self.ty(r).map_err(err)?;
            well_formed(ty).map_err(err)?;
            if let Some(owner) = self.combine_owner {
                if !ty.is_scalar() {
                    return Err(err(VerifyErrorKind::TileInCombine { ty: ty.clone(), owner }));
                }
            }
        }
        self.regions(inst)?;
        for &r in &inst.results {
            self.define(r).map_err(err)?;
        }
        if let (Op::Const { value: Scalar::Int(c) }, [r]) = (&inst.op, inst.results.as_slice()) {
            self.const_ints.insert(r.index(), *c);
        }
        Ok(())
    }

    /// Result count, handles, and no result defined before.
    fn results(&self, inst: &Inst) -> Check {
        let expected = match &inst.op {
            Op::Store { .. } | Op::Yield { .. } | Op::DeviceAssert { .. } => Some(0),
            Op::For { init, .. } => Some(init.len()),
            Op::ReduceTuple { xs, .. } => Some(xs.len()),
            // The branches' yields fix the count; they are checked against the results.
            Op::If { .. } => None,
            _ => Some(1),
        };
        if let Some(expected) = expected {
            if inst.results.len() != expected {
                return Err(VerifyErrorKind::ResultCount { expected, found: inst.results.len() });
            }
        }
        for &r in &inst.results {
            self.not_defined_yet(r)?;
        }
        let mut sorted: Vec<usize> = inst.results.iter().map(|r| r.index()).collect();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(VerifyErrorKind::DuplicateResult { value: w[0] });
        }
        Ok(())
    }

    /// The result type of a single-result op (its count was checked).
    fn result(&self, inst: &Inst) -> Check<&'p Type> {
        match inst.results.first() {
            Some(&r) => self.ty(r),
            None => Err(VerifyErrorKind::ResultCount { expected: 1, found: 0 }),
        }
    }

    fn buffer(&self, buffer: BufferId, needed: Access) -> Check<DType> {
        let p = self.p;
        let param = p.params.get(buffer as usize).ok_or(VerifyErrorKind::NoSuchBuffer { buffer, count: p.params.len() })?;
        let ParamKind::Buffer { dtype, access } = param.kind else {
            return Err(VerifyErrorKind::NotABuffer { buffer, name: param.name.clone() });
        };
        let ok = match needed {
            Access::Read => access.can_read(),
            Access::Write => access.can_write(),
            Access::ReadWrite => access == Access::ReadWrite,
        };
        if !ok {
            return Err(VerifyErrorKind::BufferAccess { name: param.name.clone(), declared: access, needed });
        }
        Ok(dtype)
    }

    /// The op's own typing rules (its nested blocks are checked by [`Verifier::regions`]).
    fn op(&self, inst: &Inst) -> Check {
        use VerifyErrorKind as K;
        let p = self.p;
        match &inst.op {
            &Op::Arg { param } => {
                let prm = p.params.get(param as usize).ok_or(K::NoSuchParam { param, count: p.params.len() })?;
                let ParamKind::Scalar { dtype } = prm.kind else {
                    return Err(K::NotScalarParam { param, name: prm.name.clone() });
                };
                wrong_type("result", self.result(inst)?, &Type::scalar(dtype))
            }
            &Op::ProgramId { axis } | &Op::NumPrograms { axis } => {
                if axis >= p.grid_rank {
                    return Err(K::GridAxis { axis, grid_rank: p.grid_rank });
                }
                wrong_type("result", self.result(inst)?, &Type::scalar(DType::I32))
            }
            Op::Const { value } => {
                let r = self.result(inst)?;
                scalar("result", r)?;
                if !value.fits(r.dtype) {
                    return Err(K::ConstRange { value: *value, dtype: r.dtype });
                }
                Ok(())
            }
            &Op::Arange { start, end } => {
                if end <= start {
                    return Err(K::ArangeEmpty { start, end });
                }
                let i32_range = i32::MIN as i64..=i32::MAX as i64;
                if !i32_range.contains(&start) || !i32_range.contains(&end) {
                    return Err(K::ArangeBounds { start, end });
                }
                let extent = end as i128 - start as i128;
                if extent > MAX_NUMEL as i128 || !(extent as u128).is_power_of_two() {
                    return Err(K::ArangeExtent { start, end, extent });
                }
                wrong_type("result", self.result(inst)?, &Type::tile(DType::I32, [extent as usize]))
            }
            &Op::Splat { x } => {
                let (t, r) = (self.ty(x)?, self.result(inst)?);
                scalar("the operand", t)?;
                if r.is_scalar() {
                    return Err(K::ExpectedTile { what: "the result".into(), ty: r.clone() });
                }
                same_dtype("operand and result", t, r)
            }
            &Op::Broadcast { x } => {
                let (t, r) = (self.ty(x)?, self.result(inst)?);
                let ok = t.rank() == r.rank() && t.shape.iter().zip(&r.shape).all(|(a, b)| a == b || *a == 1);
                if !ok {
                    return Err(K::Broadcast { from: t.shape.clone(), to: r.shape.clone() });
                }
                same_dtype("operand and result", t, r)
            }
            &Op::ExpandDims { x, axis } => {
                let (t, r) = (self.ty(x)?, self.result(inst)?);
                if axis as usize > t.rank() {
                    return Err(K::AxisRange { axis, ty: t.clone(), valid: format!("0..={}", t.rank()) });
                }
                let mut shape = t.shape.clone();
                shape.insert(axis as usize, 1);
                wrong_type("result", r, &Type::tile(t.dtype, shape))
            }
            &Op::Reshape { x } => {
                let (t, r) = (self.ty(x)?, self.result(inst)?);
                if t.numel() != r.numel() {
                    return Err(K::ReshapeNumel { from: t.clone(), to: r.clone() });
                }
                same_dtype("operand and result", t, r)
            }
            Op::Trans { x, perm } => {
                let (t, r) = (self.ty(*x)?, self.result(inst)?);
                let mut seen = vec![false; t.rank()];
                let is_perm = perm.len() == t.rank()
                    && perm.iter().all(|&i| match seen.get_mut(i as usize) {
                        Some(s) if !*s => {
                            *s = true;
                            true
                        }
                        _ => false,
                    });
                if !is_perm {
                    return Err(K::BadPermutation { perm: perm.clone(), rank: t.rank() });
                }
                let shape: Vec<usize> = perm.iter().map(|&i| t.shape[i as usize]).collect();
                wrong_type("result", r, &Type::tile(t.dtype, shape))
            }
            &Op::Unary { op, x } => {
                let (t, r) = (self.ty(x)?, self.result(inst)?);
                if op.float_only() && !t.dtype.is_float() {
                    return Err(wrong_dtype("the operand", t.dtype, format!("a float dtype (`{}` is defined on floats only)", op.name())));
                }
                if op == UnaryOp::Not && t.dtype.is_float() {
                    return Err(wrong_dtype("the operand", t.dtype, "an integer dtype or i1 (`not` is bitwise)"));
                }
                wrong_type("result", r, t)
            }
            &Op::Binary { op, lhs, rhs } => {
                let (a, b, r) = (self.ty(lhs)?, self.ty(rhs)?, self.result(inst)?);
                same_shape("lhs", a, "rhs", b)?;
                same_dtype("operand", a, b)?;
                if op.int_only() && a.dtype.is_float() {
                    return Err(wrong_dtype("the operand", a.dtype, format!("an integer dtype (`{}` is defined on integers only)", op.name())));
                }
                wrong_type("result", r, a)
            }
            &Op::Cmp { lhs, rhs, .. } => {
                let (a, b, r) = (self.ty(lhs)?, self.ty(rhs)?, self.result(inst)?);
                same_shape("lhs", a, "rhs", b)?;
                same_dtype("operand", a, b)?;
                wrong_type("result", r, &a.with_dtype(DType::I1))
            }
            &Op::Select { cond, on_true, on_false } => {
                let (c, a, b, r) = (self.ty(cond)?, self.ty(on_true)?, self.ty(on_false)?, self.result(inst)?);
                if c.dtype != DType::I1 {
                    return Err(wrong_dtype("`cond`", c.dtype, "i1"));
                }
                same_shape("cond", c, "on_true", a)?;
                same_shape("on_true", a, "on_false", b)?;
                same_dtype("`on_true` and `on_false`", a, b)?;
                wrong_type("result", r, a)
            }
            &Op::Fma { a, b, c } => {
                let (ta, tb, tc, r) = (self.ty(a)?, self.ty(b)?, self.ty(c)?, self.result(inst)?);
                same_shape("a", ta, "b", tb)?;
                same_shape("a", ta, "c", tc)?;
                same_dtype("`a` and `b`", ta, tb)?;
                same_dtype("`a` and `c`", ta, tc)?;
                if !ta.dtype.is_float() {
                    return Err(wrong_dtype("the operand", ta.dtype, "a float dtype (`fma` is defined on floats only)"));
                }
                wrong_type("result", r, ta)
            }
            &Op::Cast { x } => {
                let (t, r) = (self.ty(x)?, self.result(inst)?);
                wrong_type("result", r, &t.with_dtype(r.dtype))
            }
            &Op::Load { buffer, offsets, mask, other } => {
                let dtype = self.buffer(buffer, Access::Read)?;
                let (o, r) = (self.ty(offsets)?, self.result(inst)?);
                offsets_dtype(o)?;
                let expected = o.with_dtype(dtype);
                wrong_type("result", r, &expected)?;
                if let Some(m) = mask {
                    let m = self.ty(m)?;
                    mask_dtype(m)?;
                    same_shape("offsets", o, "mask", m)?;
                }
                if let Some(other) = other {
                    if mask.is_none() {
                        return Err(K::OtherWithoutMask);
                    }
                    wrong_type("`other`", self.ty(other)?, &expected)?;
                }
                Ok(())
            }
            &Op::Store { buffer, offsets, value, mask } => {
                let dtype = self.buffer(buffer, Access::Write)?;
                let (o, v) = (self.ty(offsets)?, self.ty(value)?);
                offsets_dtype(o)?;
                self.written_dtype(buffer, v.dtype, dtype)?;
                same_shape("offsets", o, "value", v)?;
                if let Some(m) = mask {
                    let m = self.ty(m)?;
                    mask_dtype(m)?;
                    same_shape("offsets", o, "mask", m)?;
                }
                Ok(())
            }
            &Op::Atomic { op, buffer, offsets, value, mask } => {
                let (ok, supported): (fn(DType) -> bool, _) = match op {
                    AtomicOp::Add => (|d| matches!(d, DType::I32 | DType::U32 | DType::I64 | DType::F32 | DType::F16), "i32, u32, i64, f32 or f16"),
                    AtomicOp::Max | AtomicOp::Min => (|d| matches!(d, DType::I32 | DType::U32 | DType::I64 | DType::F32), "i32, u32, i64 or f32"),
                    AtomicOp::Xchg => {
                        (|d| matches!(d, DType::I32 | DType::U32 | DType::I64 | DType::F32), "a 32- or 64-bit dtype: i32, u32, i64 or f32")
                    }
                };
                self.atomic(inst, buffer, offsets, None, value, mask, ok, supported)
            }
            &Op::AtomicCas { buffer, offsets, cmp, value, mask } => {
                self.atomic(inst, buffer, offsets, Some(cmp), value, mask, |d| matches!(d, DType::I32 | DType::U32 | DType::I64), "i32, u32 or i64")
            }
            Op::Reduce { x, axis, combine } => {
                let (t, r) = (self.ty(*x)?, self.result(inst)?);
                self.axis(*axis, t)?;
                let mut shape = t.shape.clone();
                shape.remove(*axis as usize);
                let dtype = match combine {
                    Combine::ArgMax | Combine::ArgMin => DType::I32,
                    _ => t.dtype,
                };
                wrong_type("result", r, &Type::tile(dtype, shape))
            }
            Op::ReduceTuple { xs, axis, .. } => {
                let Some(&first) = xs.first() else {
                    return Err(K::EmptyTuple);
                };
                let t0 = self.ty(first)?;
                self.axis(*axis, t0)?;
                let mut shape = t0.shape.clone();
                shape.remove(*axis as usize);
                for (i, (&x, &r)) in xs.iter().zip(&inst.results).enumerate() {
                    let t = self.ty(x)?;
                    same_shape("the first operand", t0, "another operand", t)?;
                    wrong_type(format!("result {i}"), self.ty(r)?, &Type::tile(t.dtype, shape.clone()))?;
                }
                Ok(())
            }
            Op::Scan { x, axis, combine, .. } => {
                let (t, r) = (self.ty(*x)?, self.result(inst)?);
                self.axis(*axis, t)?;
                if matches!(combine, Combine::ArgMax | Combine::ArgMin) {
                    return Err(K::ScanCombine { combine: combine.name() });
                }
                wrong_type("result", r, t)
            }
            &Op::Dot { a, b, acc, precision } => {
                let (ta, tb, tc, r) = (self.ty(a)?, self.ty(b)?, self.ty(acc)?, self.result(inst)?);
                for (operand, t) in [("a", ta), ("b", tb), ("acc", tc)] {
                    if t.rank() != 2 {
                        return Err(K::DotRank { operand, ty: t.clone() });
                    }
                }
                let (m, k, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
                if tb.shape[0] != k {
                    return Err(K::DotK { a: ta.shape.clone(), b: tb.shape.clone() });
                }
                if tc.shape != [m, n] {
                    return Err(K::DotAcc { acc: tc.shape.clone(), expected: vec![m, n] });
                }
                if m < 16 || n < 16 || k < 16 {
                    return Err(K::DotTooSmall { m, n, k });
                }
                use DType::*;
                let supported =
                    matches!((ta.dtype, tb.dtype, tc.dtype), (F16, F16, F32) | (F16, F16, F16) | (BF16, BF16, F32) | (F32, F32, F32) | (I8, I8, I32));
                if !supported {
                    return Err(K::DotDTypes { a: ta.dtype, b: tb.dtype, acc: tc.dtype });
                }
                if precision == InputPrecision::Tf32 && ta.dtype != F32 {
                    return Err(K::DotPrecision { precision: precision.name(), a: ta.dtype, b: tb.dtype });
                }
                wrong_type("result", r, tc)
            }
            Op::For { lower, upper, step, .. } => {
                let (l, u, s) = (self.ty(*lower)?, self.ty(*upper)?, self.ty(*step)?);
                scalar("the lower bound", l)?;
                scalar("the upper bound", u)?;
                scalar("the step", s)?;
                if l.dtype != u.dtype || l.dtype != s.dtype {
                    return Err(K::LoopBoundDTypes { lower: l.dtype, upper: u.dtype, step: s.dtype });
                }
                if !l.dtype.is_int() || l.dtype == DType::I1 {
                    return Err(wrong_dtype("the induction variable", l.dtype, "an integer dtype other than i1"));
                }
                if let Some(&c) = self.const_ints.get(&step.index()) {
                    if c <= 0 {
                        return Err(K::LoopStep { step: c });
                    }
                }
                // Result types are checked after the body, whose yield explains most mismatches.
                Ok(())
            }
            &Op::If { cond, .. } => {
                let c = self.ty(cond)?;
                scalar("the condition", c)?;
                if c.dtype != DType::I1 {
                    return Err(wrong_dtype("the condition", c.dtype, "i1"));
                }
                Ok(())
            }
            // Placement is checked by the block walk, yielded types by the owner.
            Op::Yield { .. } => Ok(()),
            &Op::DeviceAssert { cond, .. } => {
                let c = self.ty(cond)?;
                if c.dtype != DType::I1 {
                    return Err(wrong_dtype("the condition", c.dtype, "i1"));
                }
                Ok(())
            }
        }
    }

    fn axis(&self, axis: u32, t: &Type) -> Check {
        if (axis as usize) < t.rank() {
            return Ok(());
        }
        let valid = if t.rank() == 0 { "none, the operand is a scalar".to_string() } else { format!("0..{}", t.rank()) };
        Err(VerifyErrorKind::AxisRange { axis, ty: t.clone(), valid })
    }

    /// A value written to a buffer has the buffer's dtype; a float meant for an integer buffer
    /// gets an error that names both conversions the caller can choose from.
    fn written_dtype(&self, buffer: BufferId, value: DType, dtype: DType) -> Check {
        if value == dtype {
            return Ok(());
        }
        if value.is_float() && !dtype.is_float() {
            let name = self.p.params.get(buffer as usize).map(|p| p.name.clone()).unwrap_or_default();
            return Err(VerifyErrorKind::FloatToIntWrite { name, value, dtype });
        }
        Err(wrong_dtype("`value`", value, format!("{dtype}, the buffer's dtype")))
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic(
        &self,
        inst: &Inst,
        buffer: BufferId,
        offsets: Value,
        cmp: Option<Value>,
        value: Value,
        mask: Option<Value>,
        supported: fn(DType) -> bool,
        names: &'static str,
    ) -> Check {
        let dtype = self.buffer(buffer, Access::ReadWrite)?;
        if !supported(dtype) {
            return Err(VerifyErrorKind::AtomicDType { dtype, supported: names });
        }
        let (o, v) = (self.ty(offsets)?, self.ty(value)?);
        offsets_dtype(o)?;
        self.written_dtype(buffer, v.dtype, dtype)?;
        same_shape("offsets", o, "value", v)?;
        if let Some(c) = cmp {
            wrong_type("`cmp`", self.ty(c)?, v)?;
        }
        if let Some(m) = mask {
            let m = self.ty(m)?;
            mask_dtype(m)?;
            same_shape("offsets", o, "mask", m)?;
        }
        wrong_type("result", self.result(inst)?, v)
    }

    /// Nested blocks, with the argument and yield types their owner implies.
    fn regions(&mut self, inst: &'p Inst) -> Result<(), VerifyError> {
        let err = |k| at(inst, k);
        match &inst.op {
            Op::For { lower, init, body, .. } => {
                let iv = self.ty(*lower).map_err(err)?;
                let carried = init.iter().map(|&v| self.ty(v).cloned()).collect::<Check<Vec<Type>>>().map_err(err)?;
                let mut args = vec![iv.clone()];
                args.extend(carried.iter().cloned());
                self.region(inst, "body", body, &args, &carried, false)?;
                for (i, (&r, expected)) in inst.results.iter().zip(&carried).enumerate() {
                    wrong_type(format!("result {i}"), self.ty(r).map_err(err)?, expected).map_err(err)?;
                }
                Ok(())
            }
            Op::If { then_block, else_block, .. } => {
                let results = inst.results.iter().map(|&v| self.ty(v).cloned()).collect::<Check<Vec<Type>>>().map_err(err)?;
                self.region(inst, "then", then_block, &[], &results, false)?;
                self.region(inst, "else", else_block, &[], &results, false)
            }
            Op::Reduce { x, combine: Combine::Custom(block), .. } | Op::Scan { x, combine: Combine::Custom(block), .. } => {
                let s = Type::scalar(self.ty(*x).map_err(err)?.dtype);
                self.region(inst, "combine", block, &[s.clone(), s.clone()], &[s], true)
            }
            Op::ReduceTuple { xs, combine, .. } => {
                let scalars = xs.iter().map(|&x| self.ty(x).map(|t| Type::scalar(t.dtype))).collect::<Check<Vec<Type>>>().map_err(err)?;
                let args: Vec<Type> = scalars.iter().chain(&scalars).cloned().collect();
                self.region(inst, "combine", combine, &args, &scalars, true)
            }
            _ => Ok(()),
        }
    }
}

/// Describes where `v` is defined (the first definition in program order), for messages.
fn find_def(p: &Program, v: Value) -> Option<String> {
    fn go(b: &Block, v: Value, depth: u32) -> Option<String> {
        if depth > MAX_DEPTH + 1 {
            return None;
        }
        for inst in &b.insts {
            for nested in inst.op.blocks() {
                if nested.args.contains(&v) {
                    return Some(format!("an argument of the block of `{}` at {}", inst.op.name(), inst.loc));
                }
                if let Some(d) = go(nested, v, depth + 1) {
                    return Some(d);
                }
            }
            if inst.results.contains(&v) {
                return Some(format!("`{}` at {}", inst.op.name(), inst.loc));
            }
        }
        None
    }
    if p.body.args.contains(&v) {
        return Some("an argument of the program body".into());
    }
    go(&p.body, v, 0)
}
