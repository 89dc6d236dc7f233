//! [`NagaEmitter`]: the shared lowering's primitives as a `naga::Module`.
//!
//! The module has one compute entry point, `main`, with the interface of a SPIR-V kernel of the
//! same program: one storage buffer per buffer parameter in bind group 0 (binding = buffer
//! order), scalars in one immediate block (push constants) laid out as
//! [`tilekit_spirv::PushConstant`] says, and, for a kernel that folds its grid, the logical grid
//! after them. A runtime launches it exactly as the SPIR-V kernel.
//!
//! naga has no 8-bit, 16-bit integer or bf16 types: registers hold i8 and i16 as i32 and u8 as
//! u32, sign- or zero-extended and wrapped after every operation, and bf16 as its 16 bits in a
//! u32 (arithmetic is in f32, as the lowering computes it). Buffers of those dtypes and of
//! booleans are arrays of u32 words, two or four elements each; a buffer the program writes
//! single elements of holds atomic words, so that threads storing neighbouring elements of one
//! word do not overwrite each other. A buffer the program moves whole 16-byte vectors of (and
//! no single packed elements into, and no atomics) is an array of 4-vectors of its words, its
//! single elements components of them: [`crate::compile`] builds twice to find those. What naga
//! cannot express is refused by name ([`NagaError::Unsupported`]), never approximated: atomics
//! on such buffers, f32 atomics other than `add`, i64 to bf16.

use std::collections::HashMap;

use naga::{
    AddressSpace, Arena, ArraySize, AtomicFunction, BinaryOperator as BO, Block, Expression, Function, FunctionArgument, GlobalVariable, Handle,
    Literal, LocalVariable, MathFunction as MF, ResourceBinding, ScalarKind, Span, Statement, StorageAccess, StructMember, Type, TypeInner,
    UnaryOperator,
};
use tilekit_core::gpu::emit::Emitter;
use tilekit_core::gpu::legalize;
use tilekit_core::gpu::{MatrixInstr, Target};
use tilekit_core::ir::{Access, AtomicOp, BinaryOp, CmpPred, ParamKind, UnaryOp};
use tilekit_core::{DType, Program, Scalar};
use tilekit_spirv::{Binding, PushConstant, Requirements};

/// Why a program did not become a naga module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NagaError {
    #[error("kernel `{kernel}`: {what} cannot be expressed through naga ({why})")]
    Unsupported { kernel: String, what: String, why: String },
    #[error("kernel `{kernel}` on target `{target}`: {what}")]
    Target { kernel: String, target: String, what: String },
    /// The lowering called a primitive in a way its contract rules out (a tilekit bug).
    #[error("kernel `{kernel}`: the naga backend was asked for {what}")]
    Contract { kernel: String, what: String },
    #[error("kernel `{kernel}`: naga's validator rejected the module: {message}")]
    Invalid { kernel: String, message: String },
}

/// A scalar SSA value: a naga expression and the dtype it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NagaValue {
    pub h: Handle<Expression>,
    pub dtype: DType,
}

struct BufferSlot {
    name: String,
    var: Handle<GlobalVariable>,
    dtype: DType,
    access: Access,
    atomic: bool,
    /// Elements per u32 word, for a buffer of packed narrow elements.
    packed: Option<u32>,
    /// Declared as an array of 4-vectors of its words (f32, i32, u32, f16, or the u32 words of
    /// packed elements), so that one access moves a whole vector; a single element is a
    /// component of one. See [`NagaEmitter::vector_views`].
    vector: bool,
    /// What the program did with the buffer, for the views of a second build: a vector
    /// access, and a store of packed elements narrower than a word.
    vector_access: bool,
    part_word_store: bool,
}

enum Frame {
    If { cond: Handle<Expression>, results: Vec<(DType, Handle<LocalVariable>)>, accept: Option<Block> },
    Loop { carried: Vec<(DType, Handle<LocalVariable>)>, iv: Handle<LocalVariable>, iv_dtype: DType, step: Handle<Expression> },
}

/// Builds one compute entry point through [`Emitter`].
pub struct NagaEmitter {
    kernel: String,
    target: Target,
    threads: u32,
    module: naga::Module,
    expressions: Arena<Expression>,
    locals: Arena<LocalVariable>,
    arguments: Vec<FunctionArgument>,
    blocks: Vec<Block>,
    frames: Vec<Frame>,
    error: Option<NagaError>,
    buffers: Vec<Option<BufferSlot>>,
    bindings: Vec<Binding>,
    scalars: Vec<Option<NagaValue>>,
    push_constants: Vec<PushConstant>,
    push_size: u32,
    grid_fold: Option<u32>,
    shared: HashMap<DType, (Handle<GlobalVariable>, u32)>,
    /// Constant zeros of float dtypes, with their sign (true: -0).
    zeros: HashMap<Handle<Expression>, bool>,
    /// bf16 constants (registers of bits) and their bits: widened, they stay constants.
    bf16_consts: HashMap<Handle<Expression>, u16>,
    /// Integer constant zeros (their conversion to float stays a known zero).
    int_zeros: std::collections::HashSet<Handle<Expression>>,
    /// The expressions that are pointers (variables and accesses into them).
    pointers: std::collections::HashSet<Handle<Expression>>,
    thread_index: Handle<Expression>,
    program_id: [Handle<Expression>; 3],
    num_programs: [Handle<Expression>; 3],
    uses_f16: bool,
    uses_i64: bool,
    uses_f32_atomic: bool,
    uses_subgroups: bool,
    /// How deep each expression nests (by index), and the names that cut deep nests.
    depth: Vec<u32>,
    named: Vec<(Handle<Expression>, String)>,
    /// Statements that open the entry point: non-finite constants, built from their bits (naga
    /// takes only finite literals) once, where every later use sees them.
    prologue: Block,
    non_finite: HashMap<(DType, u32), Handle<Expression>>,
}

const GRID_FOLD_BYTES: u32 = 12;

/// How deep one written expression may nest before it is bound to a name.
const MAX_NESTING: u32 = 16;

/// The operands of the expressions this emitter builds (others have none that nest).
fn operands(e: &Expression) -> [Option<Handle<Expression>>; 3] {
    match *e {
        Expression::Binary { left, right, .. } => [Some(left), Some(right), None],
        Expression::Unary { expr, .. } | Expression::As { expr, .. } => [Some(expr), None, None],
        Expression::Select { condition, accept, reject } => [Some(condition), Some(accept), Some(reject)],
        Expression::Math { arg, arg1, arg2, .. } => [Some(arg), arg1, arg2],
        Expression::Access { base, index } => [Some(base), Some(index), None],
        Expression::AccessIndex { base, .. } => [Some(base), None, None],
        Expression::Load { pointer } => [Some(pointer), None, None],
        _ => [None, None, None],
    }
}

/// The kind of a register of dtype `d`.
fn kind_of(d: DType) -> ScalarKind {
    naga_scalar(d).kind
}

/// The naga type of a register of dtype `d`.
fn naga_scalar(d: DType) -> naga::Scalar {
    match d {
        DType::I1 => naga::Scalar::BOOL,
        DType::F16 => naga::Scalar::F16,
        DType::F32 => naga::Scalar::F32,
        DType::U32 | DType::U8 | DType::BF16 => naga::Scalar::U32,
        DType::I64 => naga::Scalar::I64,
        _ => naga::Scalar::I32,
    }
}

/// The dtype whose naga type holds a register of `d` (narrow integers in 32 bits).
fn register_dtype(d: DType) -> DType {
    match d {
        DType::I8 | DType::I16 => DType::I32,
        DType::U8 | DType::BF16 => DType::U32,
        d => d,
    }
}

/// Elements of `d` per u32 word of a buffer that packs them (8-bit and 16-bit dtypes other than
/// f16, and booleans, stored as bytes).
fn packed(d: DType) -> Option<u32> {
    match d {
        DType::I1 | DType::I8 | DType::U8 => Some(4),
        DType::I16 | DType::BF16 => Some(2),
        _ => None,
    }
}

/// The bits of one of `per` packed elements in a u32 word, and their mask.
fn packed_bits(per: u32) -> (u32, u32) {
    let bits = 32 / per;
    (bits, (1 << bits) - 1)
}

/// Elements of `d` in one 4-vector of its buffer's words: four of a 32-bit or f16 dtype, 4 x 2 or
/// 4 x 4 of packed ones; `None` for the dtypes whose buffers stay arrays of scalars (booleans and
/// i64, which the SPIR-V path does not vectorise either).
fn vector_words(d: DType) -> Option<u32> {
    match d {
        DType::F32 | DType::I32 | DType::U32 | DType::F16 => Some(4),
        DType::I1 | DType::I64 => None,
        d => packed(d).map(|per| 4 * per),
    }
}

/// The type of shared-memory elements of dtype `d`: its register type, booleans as u32.
fn shared_scalar(d: DType) -> DType {
    match d {
        DType::I1 | DType::U8 | DType::BF16 => DType::U32,
        DType::I8 | DType::I16 => DType::I32,
        d => d,
    }
}

impl NagaEmitter {
    /// An emitter for `program` on `target` with `threads` per program, its interface declared
    /// and the entry's first statements (builtins, scalars) emitted.
    ///
    /// `vectors[p]` declares buffer parameter `p` as an array of 4-vectors (absent: false), as
    /// [`NagaEmitter::vector_views`] of a first build asks.
    pub fn new(program: &Program, target: &Target, threads: u32, fold_grid: bool, vectors: &[bool]) -> Result<NagaEmitter, NagaError> {
        let kernel = program.name.clone();
        if threads == 0 || threads > target.max_threads_per_program {
            return Err(NagaError::Target {
                kernel,
                target: target.name.clone(),
                what: format!("{threads} threads per program (the target allows 1 to {})", target.max_threads_per_program),
            });
        }
        // Placeholders until the builtins below are read.
        let mut expressions = Arena::new();
        let placeholder = expressions.append(Expression::Literal(Literal::I32(0)), Span::UNDEFINED);
        let mut e = NagaEmitter {
            kernel,
            target: target.clone(),
            threads,
            module: naga::Module::default(),
            expressions,
            locals: Arena::new(),
            arguments: Vec::new(),
            blocks: vec![Block::new()],
            frames: Vec::new(),
            error: None,
            buffers: Vec::new(),
            bindings: Vec::new(),
            scalars: Vec::new(),
            push_constants: Vec::new(),
            push_size: 0,
            grid_fold: None,
            shared: HashMap::new(),
            zeros: HashMap::new(),
            bf16_consts: HashMap::new(),
            int_zeros: Default::default(),
            pointers: Default::default(),
            thread_index: placeholder,
            program_id: [placeholder; 3],
            num_programs: [placeholder; 3],
            uses_f16: false,
            uses_i64: false,
            uses_f32_atomic: false,
            uses_subgroups: false,
            depth: Vec::new(),
            named: Vec::new(),
            prologue: Block::new(),
            non_finite: HashMap::new(),
        };
        let mut members = Vec::new();
        for (i, p) in program.params.iter().enumerate() {
            match &p.kind {
                ParamKind::Buffer { dtype, access } => {
                    let unsupported = |why: &str| NagaError::Unsupported {
                        kernel: e.kernel.clone(),
                        what: format!("parameter `{}` ({dtype} buffer)", p.name),
                        why: why.to_string(),
                    };
                    if !target.supports(*dtype) {
                        return Err(unsupported(&format!("target `{}` has no {dtype}", target.name)));
                    }
                    let binding = e.bindings.len() as u32;
                    let packed = packed(*dtype);
                    let vector = vectors.get(i).copied().unwrap_or(false) && vector_words(*dtype).is_some();
                    // Packed words a program writes element by element are atomic: neighbouring
                    // elements of one word may belong to different threads. A vector view is
                    // only asked for where every store writes whole words.
                    let atomic = packed.is_some() && access.can_write() && !vector;
                    let word = match packed {
                        Some(_) => DType::U32,
                        None => *dtype,
                    };
                    let (elem, stride) = if atomic {
                        (e.ty(TypeInner::Atomic(naga::Scalar::U32)), 4)
                    } else if vector {
                        let v = e.ty(TypeInner::Vector { size: naga::VectorSize::Quad, scalar: naga_scalar(word) });
                        (v, 4 * word.size_bytes() as u32)
                    } else {
                        (e.scalar_ty(word), word.size_bytes() as u32)
                    };
                    // A last, partial vector would lie outside the array: such a buffer must be
                    // a whole number of vectors (tilekit's runtimes allocate 16-byte multiples).
                    let size_multiple = if vector { stride } else { 4 };
                    e.bindings.push(Binding { binding, param: i as u32, dtype: *dtype, access: *access, size_multiple });
                    let arr = e.ty(TypeInner::Array { base: elem, size: ArraySize::Dynamic, stride });
                    let var = e.module.global_variables.append(
                        GlobalVariable {
                            name: Some(p.name.clone()),
                            space: AddressSpace::Storage { access: storage_access(*access) },
                            binding: Some(ResourceBinding { group: 0, binding }),
                            ty: arr,
                            init: None,
                            memory_decorations: Default::default(),
                        },
                        Span::UNDEFINED,
                    );
                    e.buffers.push(Some(BufferSlot {
                        name: p.name.clone(),
                        var,
                        dtype: *dtype,
                        access: *access,
                        atomic,
                        packed,
                        vector,
                        vector_access: false,
                        part_word_store: false,
                    }));
                    e.scalars.push(None);
                }
                ParamKind::Scalar { dtype } => {
                    let size = PushConstant::slot_bytes(*dtype);
                    let offset = e.push_size.div_ceil(size) * size;
                    e.push_size = offset + size;
                    e.push_constants.push(PushConstant { param: i as u32, offset, dtype: *dtype });
                    members.push((i, p.name.clone(), *dtype, offset));
                    e.buffers.push(None);
                    e.scalars.push(None);
                }
            }
        }
        if e.push_size > target.max_push_constant_bytes {
            return Err(e.target_error(format!(
                "its scalar parameters take {} bytes of immediates, the target has {}",
                e.push_size, target.max_push_constant_bytes
            )));
        }
        if fold_grid {
            let offset = e.push_size.div_ceil(4) * 4;
            if offset + GRID_FOLD_BYTES > target.max_push_constant_bytes {
                return Err(e.target_error(format!(
                    "folding its grid needs {GRID_FOLD_BYTES} bytes of immediates after the {} its scalars take, the target has {}",
                    e.push_size, target.max_push_constant_bytes
                )));
            }
            e.grid_fold = Some(offset);
            e.push_size = offset + GRID_FOLD_BYTES;
        }
        // An i64 member aligns the block to 8 bytes.
        let align = if members.iter().any(|m| m.2 == DType::I64) { 8 } else { 4 };
        e.push_size = e.push_size.div_ceil(align) * align;

        // Builtins, as entry-point arguments.
        let u32t = e.scalar_ty(DType::U32);
        let v3 = e.ty(TypeInner::Vector { size: naga::VectorSize::Tri, scalar: naga::Scalar::U32 });
        for (name, ty, builtin) in [
            ("local_invocation_index", u32t, naga::BuiltIn::LocalInvocationIndex),
            ("workgroup_id", v3, naga::BuiltIn::WorkGroupId),
            ("num_workgroups", v3, naga::BuiltIn::NumWorkGroups),
        ] {
            e.arguments.push(FunctionArgument { name: Some(name.into()), ty, binding: Some(naga::Binding::BuiltIn(builtin)) });
        }
        let lii = e.add(Expression::FunctionArgument(0));
        e.thread_index = e.bitcast(lii, ScalarKind::Sint);
        let wg = e.add(Expression::FunctionArgument(1));
        let nw = e.add(Expression::FunctionArgument(2));
        let mut wg_u = [lii; 3];
        let mut nw_u = [lii; 3];
        for axis in 0..3 {
            wg_u[axis] = e.add(Expression::AccessIndex { base: wg, index: axis as u32 });
            nw_u[axis] = e.add(Expression::AccessIndex { base: nw, index: axis as u32 });
        }

        // The immediate block.
        if !members.is_empty() || e.grid_fold.is_some() {
            let mut struct_members = Vec::new();
            for (_, name, dtype, offset) in &members {
                let ty = match dtype {
                    // f16 as its bits in the low half, i1 as 0 or 1 (PushConstant::encode).
                    DType::F16 | DType::I1 => u32t,
                    // Narrow integers sign- or zero-extended and bf16 bits: their registers.
                    d => e.scalar_ty(*d),
                };
                struct_members.push(StructMember { name: Some(name.clone()), ty, binding: None, offset: *offset });
            }
            if let Some(offset) = e.grid_fold {
                for (axis, name) in ["grid_x", "grid_y", "grid_z"].into_iter().enumerate() {
                    struct_members.push(StructMember { name: Some(name.into()), ty: u32t, binding: None, offset: offset + 4 * axis as u32 });
                }
            }
            let st = e.module.types.insert(
                Type { name: Some("Scalars".into()), inner: TypeInner::Struct { members: struct_members, span: e.push_size } },
                Span::UNDEFINED,
            );
            let var = e.module.global_variables.append(
                GlobalVariable {
                    name: Some("scalars".into()),
                    space: AddressSpace::Immediate,
                    binding: None,
                    ty: st,
                    init: None,
                    memory_decorations: Default::default(),
                },
                Span::UNDEFINED,
            );
            let base = e.add(Expression::GlobalVariable(var));
            for (m, &(param, _, dtype, _)) in members.iter().enumerate() {
                let ptr = e.add(Expression::AccessIndex { base, index: m as u32 });
                let raw = e.add(Expression::Load { pointer: ptr });
                let v = match dtype {
                    DType::I1 => {
                        let zero = e.lit_u32(0);
                        e.bin(BO::NotEqual, raw, zero)
                    }
                    DType::F16 => {
                        let pair = e.math(MF::Unpack2x16float, &[raw]);
                        let lo = e.add(Expression::AccessIndex { base: pair, index: 0 });
                        e.uses_f16 = true;
                        e.convert(lo, DType::F16)
                    }
                    _ => raw,
                };
                e.scalars[param] = Some(NagaValue { h: v, dtype });
            }
            if e.grid_fold.is_some() {
                let grid = [0, 1, 2].map(|axis| {
                    let ptr = e.add(Expression::AccessIndex { base, index: (members.len() + axis) as u32 });
                    e.add(Expression::Load { pointer: ptr })
                });
                let [x, y, z] = e.unfold_grid(wg_u, nw_u, grid);
                wg_u = [x, y, z];
                nw_u = grid;
            }
        }
        for axis in 0..3 {
            e.program_id[axis] = e.bitcast(wg_u[axis], ScalarKind::Sint);
            e.num_programs[axis] = e.bitcast(nw_u[axis], ScalarKind::Sint);
        }
        match e.error.take() {
            Some(err) => Err(err),
            None => Ok(e),
        }
    }

    /// The folded grid's entry, as the SPIR-V emitter's: workgroup `wg` of the dispatch is
    /// program `L` of the logical grid in linear order, or idle and returns at once.
    fn unfold_grid(&mut self, wg: [Handle<Expression>; 3], nw: [Handle<Expression>; 3], grid: [Handle<Expression>; 3]) -> [Handle<Expression>; 3] {
        let [wx, wy, wz] = wg;
        let [nx, ny, _] = nw;
        let layer = self.bin(BO::Multiply, nx, ny);
        let row = self.bin(BO::Multiply, wy, nx);
        let inner = self.bin(BO::Add, wx, row);
        let gxy = self.bin(BO::Multiply, grid[0], grid[1]);
        let total = self.bin(BO::Multiply, gxy, grid[2]);
        let full_layers = self.bin(BO::Divide, total, layer);
        let rest = self.bin(BO::Modulo, total, layer);
        let past = self.bin(BO::Greater, wz, full_layers);
        let last = self.bin(BO::Equal, wz, full_layers);
        let past_rest = self.bin(BO::GreaterEqual, inner, rest);
        let idle_in_last = self.bin(BO::LogicalAnd, last, past_rest);
        let idle = self.bin(BO::LogicalOr, past, idle_in_last);
        let mut ret = Block::new();
        ret.push(Statement::Return { value: None }, Span::UNDEFINED);
        self.stmt(Statement::If { condition: idle, accept: ret, reject: Block::new() });
        let base = self.bin(BO::Multiply, wz, layer);
        let l = self.bin(BO::Add, inner, base);
        let x = self.bin(BO::Modulo, l, grid[0]);
        let q = self.bin(BO::Divide, l, grid[0]);
        let y = self.bin(BO::Modulo, q, grid[1]);
        let z = self.bin(BO::Divide, l, gxy);
        [x, y, z]
    }

    fn target_error(&self, what: String) -> NagaError {
        NagaError::Target { kernel: self.kernel.clone(), target: self.target.name.clone(), what }
    }

    fn fail(&mut self, err: NagaError) {
        if self.error.is_none() {
            self.error = Some(err);
        }
    }

    fn fail_contract(&mut self, what: String) {
        let err = NagaError::Contract { kernel: self.kernel.clone(), what };
        self.fail(err);
    }

    fn unsupported(&mut self, what: String, why: &str) {
        let err = NagaError::Unsupported { kernel: self.kernel.clone(), what, why: why.to_string() };
        self.fail(err);
    }

    fn expect(&mut self, v: NagaValue, dtype: DType, what: &str) {
        if v.dtype != dtype {
            self.fail_contract(format!("{what} holding {} where {dtype} was declared", v.dtype));
        }
    }

    fn v(&self, h: Handle<Expression>, dtype: DType) -> NagaValue {
        NagaValue { h, dtype }
    }

    // ---- building blocks ----

    fn ty(&mut self, inner: TypeInner) -> Handle<Type> {
        self.module.types.insert(Type { name: None, inner }, Span::UNDEFINED)
    }

    fn scalar_ty(&mut self, d: DType) -> Handle<Type> {
        match d {
            DType::F16 => self.uses_f16 = true,
            DType::I64 => self.uses_i64 = true,
            _ => {}
        }
        self.ty(TypeInner::Scalar(naga_scalar(d)))
    }

    fn stmt(&mut self, s: Statement) {
        self.blocks.last_mut().expect("the entry block is never closed").push(s, Span::UNDEFINED);
    }

    /// Appends `expr`, emitting it where it is evaluated (everything but literals, arguments
    /// and variables, which naga evaluates where they are used). An expression that would nest
    /// deeper than [`MAX_NESTING`] single-use operands gets a name, which naga's writers bind
    /// with `let`: a reduction's chain written as one expression passes the recursion limits of
    /// WGSL front ends (naga's own among them).
    fn add(&mut self, expr: Expression) -> Handle<Expression> {
        let pre = expr.needs_pre_emit();
        let depth = 1 + operands(&expr).into_iter().flatten().map(|o| self.depth.get(o.index()).copied().unwrap_or(0)).max().unwrap_or(0);
        // WGSL cannot name a pointer to a vector's component: pointers are never named (their
        // load is, where it nests deep).
        let pointer = match expr {
            Expression::GlobalVariable(_) | Expression::LocalVariable(_) => true,
            Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => self.pointers.contains(&base),
            _ => false,
        };
        let h = self.expressions.append(expr, Span::UNDEFINED);
        if pointer {
            self.pointers.insert(h);
        }
        let depth = if depth > MAX_NESTING && !pre && !pointer {
            self.named.push((h, format!("v{}", h.index())));
            0
        } else {
            depth
        };
        if self.depth.len() <= h.index() {
            self.depth.resize(h.index() + 1, 0);
        }
        self.depth[h.index()] = depth;
        if !pre {
            self.stmt(Statement::Emit(naga::Range::new_from_bounds(h, h)));
        }
        h
    }

    fn lit(&mut self, d: DType, value: Scalar) -> Handle<Expression> {
        let x = value.as_f64();
        if d.is_float() && !x.is_finite() {
            return self.non_finite(d, x as f32);
        }
        let lit = match (d, value) {
            (DType::I1, Scalar::Bool(b)) => Literal::Bool(b),
            (DType::I1, _) => Literal::Bool(x != 0.0),
            (DType::F32, _) => Literal::F32(x as f32),
            (DType::F16, _) => {
                self.uses_f16 = true;
                Literal::F16(half::f16::from_f32(x as f32))
            }
            (DType::BF16, _) => Literal::U32(half::bf16::from_f64(x).to_bits() as u32),
            (DType::U32 | DType::U8, Scalar::Int(i)) => Literal::U32(i as u32),
            (DType::I64, Scalar::Int(i)) => {
                self.uses_i64 = true;
                Literal::I64(i)
            }
            (DType::U32 | DType::U8, _) => Literal::U32(x as u32),
            (DType::I64, _) => Literal::I64(x as i64),
            (_, Scalar::Int(i)) => Literal::I32(i as i32),
            _ => Literal::I32(x as i32),
        };
        self.expressions.append(Expression::Literal(lit), Span::UNDEFINED)
    }

    /// An infinity or NaN of f32 or f16, emitted in the prologue: the bits of a function-local
    /// variable, read and reinterpreted. WGSL has no non-finite values in constant expressions
    /// (Tint rejects `bitcast<f32>(4286578688u)` as a `-inf` that "cannot be represented"), so
    /// the value is made at run time.
    fn non_finite(&mut self, d: DType, x: f32) -> Handle<Expression> {
        if let Some(&h) = self.non_finite.get(&(d, x.to_bits())) {
            return h;
        }
        let ty = self.scalar_ty(DType::U32);
        let init = self.expressions.append(Expression::Literal(Literal::U32(x.to_bits())), Span::UNDEFINED);
        let var = self.locals.append(LocalVariable { name: Some(format!("bits_{:08x}", x.to_bits())), ty, init: Some(init) }, Span::UNDEFINED);
        let pointer = self.expressions.append(Expression::LocalVariable(var), Span::UNDEFINED);
        let bits = self.expressions.append(Expression::Load { pointer }, Span::UNDEFINED);
        let f = self.expressions.append(Expression::As { expr: bits, kind: ScalarKind::Float, convert: None }, Span::UNDEFINED);
        self.prologue.push(Statement::Emit(naga::Range::new_from_bounds(bits, f)), Span::UNDEFINED);
        let h = if d == DType::F16 {
            self.uses_f16 = true;
            let h = self.expressions.append(Expression::As { expr: f, kind: ScalarKind::Float, convert: Some(2) }, Span::UNDEFINED);
            self.prologue.push(Statement::Emit(naga::Range::new_from_bounds(h, h)), Span::UNDEFINED);
            h
        } else {
            f
        };
        self.non_finite.insert((d, x.to_bits()), h);
        h
    }

    fn lit_u32(&mut self, v: u32) -> Handle<Expression> {
        self.expressions.append(Expression::Literal(Literal::U32(v)), Span::UNDEFINED)
    }

    fn lit_f32(&mut self, v: f32) -> Handle<Expression> {
        if !v.is_finite() {
            return self.non_finite(DType::F32, v);
        }
        self.expressions.append(Expression::Literal(Literal::F32(v)), Span::UNDEFINED)
    }

    fn lit_bool(&mut self, v: bool) -> Handle<Expression> {
        self.expressions.append(Expression::Literal(Literal::Bool(v)), Span::UNDEFINED)
    }

    fn bin(&mut self, op: BO, left: Handle<Expression>, right: Handle<Expression>) -> Handle<Expression> {
        self.add(Expression::Binary { op, left, right })
    }

    fn un(&mut self, op: UnaryOperator, expr: Handle<Expression>) -> Handle<Expression> {
        self.add(Expression::Unary { op, expr })
    }

    fn math(&mut self, fun: MF, args: &[Handle<Expression>]) -> Handle<Expression> {
        self.add(Expression::Math { fun, arg: args[0], arg1: args.get(1).copied(), arg2: args.get(2).copied(), arg3: None })
    }

    fn sel(&mut self, condition: Handle<Expression>, accept: Handle<Expression>, reject: Handle<Expression>) -> Handle<Expression> {
        self.add(Expression::Select { condition, accept, reject })
    }

    fn not(&mut self, x: Handle<Expression>) -> Handle<Expression> {
        self.un(UnaryOperator::LogicalNot, x)
    }

    /// Same bits, another kind (same width).
    fn bitcast(&mut self, x: Handle<Expression>, kind: ScalarKind) -> Handle<Expression> {
        self.add(Expression::As { expr: x, kind, convert: None })
    }

    /// A value conversion to dtype `to`.
    fn convert(&mut self, x: Handle<Expression>, to: DType) -> Handle<Expression> {
        let s = naga_scalar(to);
        if to == DType::F16 {
            self.uses_f16 = true;
        }
        if to == DType::I64 {
            self.uses_i64 = true;
        }
        self.add(Expression::As { expr: x, kind: s.kind, convert: Some(s.width) })
    }

    /// `x` of float dtype `d` as f32 (exact).
    fn widen(&mut self, d: DType, x: Handle<Expression>) -> Handle<Expression> {
        match d {
            DType::F32 => x,
            // A constant converts to a constant, which the zero rules recognise.
            DType::BF16 => match self.bf16_consts.get(&x) {
                Some(&bits) => {
                    let v = f32::from_bits((bits as u32) << 16);
                    let c = self.lit_f32(v);
                    if v == 0.0 {
                        self.zeros.insert(c, v.is_sign_negative());
                    }
                    c
                }
                None => {
                    let v = self.v(x, DType::U32);
                    legalize::f32_from_bf16_bits(self, v).h
                }
            },
            DType::F16 => match self.zeros.get(&x) {
                Some(&neg) => {
                    let z = self.lit_f32(if neg { -0.0 } else { 0.0 });
                    self.zeros.insert(z, neg);
                    z
                }
                None => self.convert(x, DType::F32),
            },
            _ => {
                self.fail_contract(format!("widening {d} to f32"));
                x
            }
        }
    }

    /// An f32 as `to` (f32 or f16).
    fn narrow(&mut self, to: DType, x: Handle<Expression>) -> Handle<Expression> {
        match to {
            DType::F16 => match self.zeros.get(&x) {
                Some(&neg) => {
                    let z = self.lit(DType::F16, Scalar::Float(if neg { -0.0 } else { 0.0 }));
                    self.zeros.insert(z, neg);
                    z
                }
                None => self.convert(x, DType::F16),
            },
            DType::BF16 => match self.zeros.get(&x) {
                Some(&neg) => self.lit(DType::BF16, Scalar::Float(if neg { -0.0 } else { 0.0 })),
                None => {
                    let v = self.v(x, DType::F32);
                    legalize::bf16_bits_from_f32(self, v).h
                }
            },
            _ => x,
        }
    }

    /// A 32-bit register result brought back into narrow integer dtype `d`'s range (wrapping):
    /// sign-extended from 8 or 16 bits, or the low byte of a u8.
    fn wrap(&mut self, d: DType, x: Handle<Expression>) -> Handle<Expression> {
        match d {
            DType::I8 | DType::I16 => {
                let k = self.lit_u32(if d == DType::I8 { 24 } else { 16 });
                let up = self.bin(BO::ShiftLeft, x, k);
                self.bin(BO::ShiftRight, up, k)
            }
            DType::U8 => {
                let m = self.lit_u32(0xFF);
                self.bin(BO::And, x, m)
            }
            _ => x,
        }
    }

    /// The word index, the bit shift and the mask of element `index` (a u32) of a packed buffer
    /// with `per` elements a word.
    fn packed_place(&mut self, index: Handle<Expression>, per: u32) -> (Handle<Expression>, Handle<Expression>, u32) {
        let (bits, mask) = packed_bits(per);
        let log = per.trailing_zeros();
        let k = self.lit_u32(log);
        let word = self.bin(BO::ShiftRight, index, k);
        let lane_mask = self.lit_u32(per - 1);
        let lane = self.bin(BO::And, index, lane_mask);
        let b = self.lit_u32(bits);
        let shift = self.bin(BO::Multiply, lane, b);
        (word, shift, mask)
    }

    /// f32 `a op b` for the float ops.
    fn binary_f32(&mut self, op: BinaryOp, a: Handle<Expression>, b: Handle<Expression>) -> Option<Handle<Expression>> {
        if let Some(r) = self.with_constant_zero(op, a, b) {
            return Some(r);
        }
        let (av, bv) = (self.v(a, DType::F32), self.v(b, DType::F32));
        Some(match op {
            BinaryOp::Add => self.bin(BO::Add, a, b),
            BinaryOp::Sub => self.bin(BO::Subtract, a, b),
            BinaryOp::Mul => self.bin(BO::Multiply, a, b),
            BinaryOp::Div => self.bin(BO::Divide, a, b),
            // naga's `%` is the driver's a - b * trunc(a / b).
            BinaryOp::Rem => {
                let raw = self.bin(BO::Modulo, a, b);
                let raw = self.v(raw, DType::F32);
                legalize::fmod(self, av, bv, raw).h
            }
            // IEEE maxNum / minNum: a NaN operand gives the other one. naga's max and min leave
            // NaNs to the driver.
            BinaryOp::Max | BinaryOp::Min => {
                let m = self.math(if op == BinaryOp::Max { MF::Max } else { MF::Min }, &[a, b]);
                let nb = legalize::is_nan(self, bv).h;
                let m = self.sel(nb, a, m);
                let na = legalize::is_nan(self, av).h;
                self.sel(na, b, m)
            }
            _ => return None,
        })
    }

    /// `log` / `log2`, subnormal inputs scaled first ([`legalize::log`]).
    fn log_f32(&mut self, natural: bool, x: Handle<Expression>) -> Handle<Expression> {
        let x = self.v(x, DType::F32);
        legalize::log(self, natural, x, |me, xs| {
            let r = me.math(if natural { MF::Log } else { MF::Log2 }, &[xs.h]);
            me.v(r, DType::F32)
        })
        .h
    }

    /// f32 `a op b` where `a` or `b` is a constant zero ([`legalize::with_constant_zero`]).
    fn with_constant_zero(&mut self, op: BinaryOp, a: Handle<Expression>, b: Handle<Expression>) -> Option<Handle<Expression>> {
        let (za, zb) = (self.zeros.get(&a).copied(), self.zeros.get(&b).copied());
        let (av, bv) = (self.v(a, DType::F32), self.v(b, DType::F32));
        legalize::with_constant_zero(self, op, av, bv, za, zb).map(|r| r.h)
    }

    fn unary_f32(&mut self, op: UnaryOp, x: Handle<Expression>) -> Handle<Expression> {
        match op {
            UnaryOp::Neg => self.un(UnaryOperator::Negate, x),
            UnaryOp::Not => x,
            UnaryOp::Abs => self.math(MF::Abs, &[x]),
            UnaryOp::Exp => self.math(MF::Exp, &[x]),
            UnaryOp::Exp2 => self.math(MF::Exp2, &[x]),
            UnaryOp::Log | UnaryOp::Log2 => self.log_f32(op == UnaryOp::Log, x),
            UnaryOp::Sqrt => self.math(MF::Sqrt, &[x]),
            UnaryOp::Rsqrt => self.math(MF::InverseSqrt, &[x]),
            // The shared implementations: the drivers' sin and cos are only accurate near 0,
            // tanh cancels near 0 and there is no erf.
            UnaryOp::Sin | UnaryOp::Cos => {
                let v = self.v(x, DType::F32);
                tilekit_core::gpu::math::sin_cos(self, v, op == UnaryOp::Cos).h
            }
            UnaryOp::Tanh => {
                let v = self.v(x, DType::F32);
                tilekit_core::gpu::math::tanh(self, v).h
            }
            UnaryOp::Erf => {
                let v = self.v(x, DType::F32);
                tilekit_core::gpu::math::erf(self, v).h
            }
            UnaryOp::Floor => self.math(MF::Floor, &[x]),
            UnaryOp::Ceil => self.math(MF::Ceil, &[x]),
            UnaryOp::Round => self.math(MF::Round, &[x]),
        }
    }

    /// f32 -> integer dtype `to`: NaN -> 0, saturated, truncated toward zero.
    fn f32_to_int(&mut self, x: Handle<Expression>, to: DType) -> Handle<Expression> {
        let x = self.v(x, DType::F32);
        legalize::f32_to_int(self, x, to, |me, c| {
            let r = me.convert(c.h, to);
            me.v(r, to)
        })
        .h
    }

    /// `x` of integer dtype `from` converted to integer dtype `to` (wrapping, sign- or
    /// zero-extending by `from`'s signedness).
    fn int_to_int(&mut self, from: DType, to: DType, x: Handle<Expression>) -> Handle<Expression> {
        let (fw, tw) = (naga_scalar(from).width, naga_scalar(to).width);
        if fw == tw {
            return if kind_of(from) == kind_of(to) { x } else { self.bitcast(x, kind_of(to)) };
        }
        if tw < fw {
            // i64 -> 32 bits: the low word.
            return self.convert(x, to);
        }
        // 32 -> 64 bits.
        if from == DType::U32 {
            self.uses_i64 = true;
            let wide = self.add(Expression::As { expr: x, kind: ScalarKind::Uint, convert: Some(8) });
            self.bitcast(wide, ScalarKind::Sint)
        } else {
            // Zero-extended, then (z ^ m) - m with m = 2^31, not a signed conversion: lavapipe
            // (Mesa 22.3.6) compared a sign-converted value with zero as if zero-extended, as
            // on the SPIR-V path (`sign_extend_to_64` there).
            self.uses_i64 = true;
            let u = self.bitcast(x, ScalarKind::Uint);
            let wide = self.add(Expression::As { expr: u, kind: ScalarKind::Uint, convert: Some(8) });
            let z = self.bitcast(wide, ScalarKind::Sint);
            let m = self.constant(DType::I64, Scalar::Int(1i64 << 31)).h;
            let flipped = self.bin(BO::ExclusiveOr, z, m);
            self.bin(BO::Subtract, flipped, m)
        }
    }

    fn index(&mut self, index: NagaValue, index_dtype: DType, what: &str) -> Handle<Expression> {
        self.expect(index, index_dtype, what);
        match index_dtype {
            DType::I32 | DType::U32 => index.h,
            // Buffers here hold fewer than 2^32 elements: the low word indexes them.
            DType::I64 => self.add(Expression::As { expr: index.h, kind: ScalarKind::Uint, convert: Some(4) }),
            d => {
                self.fail_contract(format!("{what}: index dtype {d} (i32, u32 or i64 expected)"));
                index.h
            }
        }
    }

    /// The value `x` (a register of dtype `d`) of lane `lane ^ mask`.
    fn gather_xor(&mut self, x: Handle<Expression>, d: DType, mask: u32) -> Handle<Expression> {
        let ty = self.scalar_ty(d);
        let m = self.lit_u32(mask);
        let result = self.expressions.append(Expression::SubgroupOperationResult { ty }, Span::UNDEFINED);
        self.stmt(Statement::SubgroupGather { mode: naga::GatherMode::ShuffleXor(m), argument: x, result });
        result
    }

    /// An index as u32 (indices are in bounds, so non-negative).
    fn index_u32(&mut self, index: Handle<Expression>, index_dtype: DType) -> Handle<Expression> {
        // (An i64 index is already its low word: see `index`.)
        if index_dtype == DType::U32 || index_dtype == DType::I64 {
            index
        } else {
            self.bitcast(index, ScalarKind::Uint)
        }
    }

    /// The variable of buffer parameter `buffer`, after checking the contract of an access of
    /// `dtype` that reads and / or writes it.
    fn buffer_var(&mut self, buffer: u32, dtype: DType, read: bool, write: bool, what: &str) -> Option<Handle<GlobalVariable>> {
        let Some(Some(slot)) = self.buffers.get(buffer as usize) else {
            self.fail_contract(format!("{what}: parameter {buffer} is not a buffer"));
            return None;
        };
        let (var, name, access, held) = (slot.var, slot.name.clone(), slot.access, slot.dtype);
        if held != dtype {
            self.fail_contract(format!("{what}: buffer `{name}` holds {held}, accessed as {dtype}"));
            return None;
        }
        if write && !access.can_write() {
            self.fail_contract(format!("{what} writes buffer `{name}`, declared {}", access.name()));
        }
        if read && !write && !access.can_read() {
            self.fail_contract(format!("{what} reads buffer `{name}`, declared {}", access.name()));
        }
        Some(var)
    }

    /// A pointer to word `index` of `buffer` (its element, or the u32 word of packed ones),
    /// after checking the contract; `index` is a u32 where the buffer is declared as vectors.
    fn element(&mut self, buffer: u32, dtype: DType, index: Handle<Expression>, read: bool, write: bool, what: &str) -> Option<Handle<Expression>> {
        let var = self.buffer_var(buffer, dtype, read, write, what)?;
        let base = self.add(Expression::GlobalVariable(var));
        if self.is_vector(buffer) {
            // Word `index` is component index % 4 of vector index / 4.
            let two = self.lit_u32(2);
            let v = self.bin(BO::ShiftRight, index, two);
            let three = self.lit_u32(3);
            let c = self.bin(BO::And, index, three);
            let vector = self.add(Expression::Access { base, index: v });
            return Some(self.add(Expression::Access { base: vector, index: c }));
        }
        Some(self.add(Expression::Access { base, index }))
    }

    /// A pointer to vector `n x index / n` of a buffer declared as 4-vectors whose vectors
    /// hold `n` elements each (`index` a multiple of n), after checking the contract.
    #[allow(clippy::too_many_arguments)]
    fn vector_of(
        &mut self,
        buffer: u32,
        dtype: DType,
        index: NagaValue,
        index_dtype: DType,
        n: u32,
        write: bool,
        what: &str,
    ) -> Option<Handle<Expression>> {
        let var = self.buffer_var(buffer, dtype, !write, write, what)?;
        let i = self.index(index, index_dtype, what);
        let iu = self.index_u32(i, index_dtype);
        let shift = self.lit_u32(n.trailing_zeros());
        let vi = self.bin(BO::ShiftRight, iu, shift);
        let base = self.add(Expression::GlobalVariable(var));
        Some(self.add(Expression::Access { base, index: vi }))
    }

    /// Whether buffer parameter `buffer` is declared as 4-vectors.
    fn is_vector(&self, buffer: u32) -> bool {
        self.buffers.get(buffer as usize).is_some_and(|s| s.as_ref().is_some_and(|s| s.vector))
    }

    /// The packed element of dtype `d` at bit `shift` of `word`, as a register.
    fn unpack(&mut self, d: DType, word: Handle<Expression>, shift: Handle<Expression>, mask: u32) -> Handle<Expression> {
        let down = self.bin(BO::ShiftRight, word, shift);
        let m = self.lit_u32(mask);
        let raw = self.bin(BO::And, down, m);
        match d {
            DType::I1 => {
                let zero = self.lit_u32(0);
                self.bin(BO::NotEqual, raw, zero)
            }
            DType::I8 | DType::I16 => {
                let r = self.bitcast(raw, ScalarKind::Sint);
                self.wrap(d, r)
            }
            _ => raw,
        }
    }

    /// The bits a register of packed dtype `d` stores (masked to its width, not yet shifted).
    fn pack_bits(&mut self, d: DType, x: Handle<Expression>, mask: u32) -> Handle<Expression> {
        let bits = match d {
            DType::I1 => {
                let (one, zero) = (self.lit_u32(1), self.lit_u32(0));
                self.sel(x, one, zero)
            }
            DType::I8 | DType::I16 => self.bitcast(x, ScalarKind::Uint),
            _ => x,
        };
        let m = self.lit_u32(mask);
        self.bin(BO::And, bits, m)
    }

    /// Which buffer parameters a second build should declare as 4-vectors: those this build
    /// accessed with vectors, unless atomics or stores of single packed elements need them as
    /// arrays of scalars (atomic words).
    pub fn vector_views(&self) -> Vec<bool> {
        self.buffers
            .iter()
            .map(|s| s.as_ref().is_some_and(|s| s.vector || (s.vector_access && !s.part_word_store && !(s.atomic && s.packed.is_none()))))
            .collect()
    }

    fn shared_ptr(&mut self, dtype: DType, index: NagaValue, what: &str) -> Option<Handle<Expression>> {
        self.expect(index, DType::I32, what);
        let Some(&(var, _)) = self.shared.get(&dtype) else {
            self.fail_contract(format!("{what}: no shared memory reserved for {dtype}"));
            return None;
        };
        let base = self.add(Expression::GlobalVariable(var));
        Some(self.add(Expression::Access { base, index: index.h }))
    }

    fn local(&mut self, d: DType) -> Handle<LocalVariable> {
        let ty = self.scalar_ty(d);
        self.locals.append(LocalVariable { name: None, ty, init: None }, Span::UNDEFINED)
    }

    fn store_local(&mut self, var: Handle<LocalVariable>, value: Handle<Expression>) {
        let pointer = self.add(Expression::LocalVariable(var));
        self.stmt(Statement::Store { pointer, value });
    }

    fn load_local(&mut self, var: Handle<LocalVariable>) -> Handle<Expression> {
        let pointer = self.add(Expression::LocalVariable(var));
        self.add(Expression::Load { pointer })
    }

    /// Closes the entry point, sizes shared memory and atomic buffers, and validates the module
    /// with the capabilities it uses.
    pub fn finish(mut self) -> Result<crate::NagaKernel, NagaError> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        if !self.frames.is_empty() || self.blocks.len() != 1 {
            return Err(NagaError::Contract { kernel: self.kernel.clone(), what: "an if or loop left open".into() });
        }
        // Atomic buffers hold atomic elements; their plain loads and stores are atomic loads
        // and stores, which naga expresses as Load and Store.
        let atomic: Vec<(Handle<GlobalVariable>, DType)> =
            self.buffers.iter().flatten().filter(|s| s.atomic && s.packed.is_none()).map(|s| (s.var, s.dtype)).collect();
        for (var, dtype) in atomic {
            let elem = self.ty(TypeInner::Atomic(naga_scalar(dtype)));
            let arr = self.ty(TypeInner::Array { base: elem, size: ArraySize::Dynamic, stride: dtype.size_bytes() as u32 });
            self.module.global_variables[var].ty = arr;
        }
        let mut shared_bytes = 0u32;
        let shared: Vec<(DType, Handle<GlobalVariable>, u32)> = self.shared.iter().map(|(&d, &(v, n))| (d, v, n)).collect();
        for (d, var, len) in shared {
            let store = shared_scalar(d);
            let elem = self.scalar_ty(store);
            let size = ArraySize::Constant(std::num::NonZeroU32::new(len.max(1)).expect("at least one element"));
            let arr = self.ty(TypeInner::Array { base: elem, size, stride: store.size_bytes() as u32 });
            self.module.global_variables[var].ty = arr;
            shared_bytes += len.max(1) * store.size_bytes() as u32;
        }
        if shared_bytes > self.target.shared_memory_bytes {
            return Err(self.target_error(format!("{shared_bytes} bytes of shared memory, the target has {}", self.target.shared_memory_bytes)));
        }
        let mut body = std::mem::take(&mut self.prologue);
        body.append(&mut self.blocks.pop().expect("the entry block"));
        let function = Function {
            name: Some("main".into()),
            arguments: std::mem::take(&mut self.arguments),
            result: None,
            local_variables: std::mem::take(&mut self.locals),
            expressions: std::mem::take(&mut self.expressions),
            named_expressions: Default::default(),
            body,
            diagnostic_filter_leaf: None,
        };
        let mut function = function;
        for (h, name) in std::mem::take(&mut self.named) {
            function.named_expressions.insert(h, name);
        }
        self.module.entry_points.push(naga::EntryPoint {
            name: "main".into(),
            stage: naga::ShaderStage::Compute,
            early_depth_test: None,
            workgroup_size: [self.threads, 1, 1],
            workgroup_size_overrides: None,
            function,
            mesh_info: None,
            task_payload: None,
            incoming_ray_payload: None,
        });
        let mut caps = naga::valid::Capabilities::IMMEDIATES;
        if self.uses_f16 {
            caps |= naga::valid::Capabilities::SHADER_FLOAT16;
        }
        if self.uses_i64 {
            caps |= naga::valid::Capabilities::SHADER_INT64 | naga::valid::Capabilities::SHADER_INT64_ATOMIC_ALL_OPS;
        }
        if self.uses_f32_atomic {
            caps |= naga::valid::Capabilities::SHADER_FLOAT32_ATOMIC;
        }
        if self.uses_subgroups {
            caps |= naga::valid::Capabilities::SUBGROUP;
        }
        let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
            .validate(&self.module)
            .map_err(|e| NagaError::Invalid { kernel: self.kernel.clone(), message: format!("{:?}", e.as_inner()) })?;
        let uses_atomics = self.buffers.iter().flatten().any(|s| s.atomic && s.packed.is_none());
        let requirements = Requirements {
            float16: self.uses_f16,
            int64: self.uses_i64,
            storage16: self.bindings.iter().any(|b| b.dtype == DType::F16),
            atomic_float_add: self.uses_f32_atomic,
            int64_atomics: uses_atomics && self.buffers.iter().flatten().any(|s| s.atomic && s.dtype == DType::I64),
            shared_bytes,
            subgroup_shuffle: self.uses_subgroups,
            subgroup_size: self.target.subgroup_size,
            ..Requirements::default()
        };
        Ok(crate::NagaKernel {
            module: self.module,
            info,
            capabilities: caps,
            interface: tilekit_spirv::SpirvKernel {
                name: self.kernel,
                words: Vec::new(),
                entry_point: "main".into(),
                threads: self.threads,
                bindings: self.bindings,
                push_constants: self.push_constants,
                push_constant_size: self.push_size,
                grid_fold: self.grid_fold,
                requirements,
            },
        })
    }
}

fn storage_access(a: Access) -> StorageAccess {
    match a {
        Access::Read => StorageAccess::LOAD,
        _ => StorageAccess::LOAD | StorageAccess::STORE,
    }
}

impl Emitter for NagaEmitter {
    type V = NagaValue;

    fn constant(&mut self, dtype: DType, value: Scalar) -> NagaValue {
        let h = self.lit(dtype, value);
        let x = value.as_f64();
        if dtype == DType::BF16 {
            self.bf16_consts.insert(h, half::bf16::from_f64(x).to_bits());
        } else if dtype.is_float() && x == 0.0 {
            self.zeros.insert(h, x.is_sign_negative());
        } else if dtype.is_int() && dtype != DType::I1 && x == 0.0 {
            self.int_zeros.insert(h);
        }
        self.v(h, dtype)
    }

    fn thread_index(&mut self) -> NagaValue {
        self.v(self.thread_index, DType::I32)
    }

    fn folds_grid(&self) -> bool {
        self.grid_fold.is_some()
    }

    fn program_id(&mut self, axis: u32) -> NagaValue {
        match self.program_id.get(axis as usize) {
            Some(&h) => self.v(h, DType::I32),
            None => {
                self.fail_contract(format!("program_id along axis {axis}"));
                self.v(self.thread_index, DType::I32)
            }
        }
    }

    fn num_programs(&mut self, axis: u32) -> NagaValue {
        match self.num_programs.get(axis as usize) {
            Some(&h) => self.v(h, DType::I32),
            None => {
                self.fail_contract(format!("num_programs along axis {axis}"));
                self.v(self.thread_index, DType::I32)
            }
        }
    }

    fn scalar_param(&mut self, param: u32, dtype: DType) -> NagaValue {
        match self.scalars.get(param as usize).copied().flatten() {
            Some(v) => {
                self.expect(v, dtype, &format!("scalar parameter {param}"));
                v
            }
            None => {
                self.fail_contract(format!("parameter {param} is not a scalar parameter"));
                self.constant(dtype, Scalar::Int(0))
            }
        }
    }

    fn unary(&mut self, op: UnaryOp, dtype: DType, x: NagaValue) -> NagaValue {
        self.expect(x, dtype, "unary operand");
        let x = x.h;
        let h = match dtype {
            DType::I1 => match op {
                UnaryOp::Neg | UnaryOp::Abs => x,
                UnaryOp::Not => self.not(x),
                _ => {
                    self.fail_contract(format!("{} on i1", op.name()));
                    x
                }
            },
            DType::F32 => self.unary_f32(op, x),
            // bf16 as its bits: the sign is one bit; the rest in f32.
            DType::BF16 => match op {
                UnaryOp::Neg => {
                    let m = self.lit_u32(0x8000);
                    self.bin(BO::ExclusiveOr, x, m)
                }
                UnaryOp::Abs => {
                    let m = self.lit_u32(0x7FFF);
                    self.bin(BO::And, x, m)
                }
                UnaryOp::Not => x,
                _ => {
                    let xf = self.widen(DType::BF16, x);
                    let r = self.unary_f32(op, xf);
                    self.narrow(DType::BF16, r)
                }
            },
            DType::F16 => match op {
                UnaryOp::Neg => self.un(UnaryOperator::Negate, x),
                UnaryOp::Abs => self.math(MF::Abs, &[x]),
                UnaryOp::Not => x,
                _ => {
                    let xf = self.widen(DType::F16, x);
                    let r = self.unary_f32(op, xf);
                    self.narrow(DType::F16, r)
                }
            },
            d => {
                let r = self.unary_int(op, d, x);
                self.wrap(d, r)
            }
        };
        self.v(h, dtype)
    }

    fn binary(&mut self, op: BinaryOp, dtype: DType, a: NagaValue, b: NagaValue) -> NagaValue {
        self.expect(a, dtype, "binary lhs");
        self.expect(b, dtype, "binary rhs");
        let (a, b) = (a.h, b.h);
        let h = match dtype {
            DType::I1 => match op {
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Xor => self.bin(BO::NotEqual, a, b),
                BinaryOp::Mul | BinaryOp::And | BinaryOp::Min => self.bin(BO::LogicalAnd, a, b),
                BinaryOp::Or | BinaryOp::Max => self.bin(BO::LogicalOr, a, b),
                // The only valid divisor and shift amount of an i1 are 1 and 0.
                BinaryOp::Div | BinaryOp::Shl | BinaryOp::Shr => a,
                BinaryOp::Rem => self.lit_bool(false),
            },
            DType::F32 | DType::F16 | DType::BF16 => {
                // f16 and bf16 in f32, rounded once: the interpreter's semantics.
                let (af, bf) = (self.widen(dtype, a), self.widen(dtype, b));
                match self.binary_f32(op, af, bf) {
                    Some(r) => self.narrow(dtype, r),
                    None => {
                        self.fail_contract(format!("{} on {dtype}", op.name()));
                        a
                    }
                }
            }
            d => {
                let r = self.binary_int(op, d, a, b);
                self.wrap(d, r)
            }
        };
        self.v(h, dtype)
    }

    fn cmp(&mut self, pred: CmpPred, dtype: DType, a: NagaValue, b: NagaValue) -> NagaValue {
        self.expect(a, dtype, "cmp lhs");
        self.expect(b, dtype, "cmp rhs");
        let (mut a, mut b) = (a.h, b.h);
        if dtype == DType::BF16 {
            a = self.widen(dtype, a);
            b = self.widen(dtype, b);
        }
        let h = match dtype {
            DType::I1 => {
                let (na, nb) = (self.not(a), self.not(b));
                match pred {
                    CmpPred::Eq => self.bin(BO::Equal, a, b),
                    CmpPred::Ne => self.bin(BO::NotEqual, a, b),
                    CmpPred::Lt => self.bin(BO::LogicalAnd, na, b),
                    CmpPred::Le => self.bin(BO::LogicalOr, na, b),
                    CmpPred::Gt => self.bin(BO::LogicalAnd, a, nb),
                    CmpPred::Ge => self.bin(BO::LogicalOr, a, nb),
                }
            }
            _ => match pred {
                CmpPred::Eq => self.bin(BO::Equal, a, b),
                // Unordered: true for NaN operands.
                CmpPred::Ne if dtype.is_float() => {
                    let eq = self.bin(BO::Equal, a, b);
                    self.not(eq)
                }
                CmpPred::Ne => self.bin(BO::NotEqual, a, b),
                CmpPred::Lt => self.bin(BO::Less, a, b),
                CmpPred::Le => self.bin(BO::LessEqual, a, b),
                CmpPred::Gt => self.bin(BO::Greater, a, b),
                CmpPred::Ge => self.bin(BO::GreaterEqual, a, b),
            },
        };
        self.v(h, DType::I1)
    }

    fn select(&mut self, dtype: DType, cond: NagaValue, a: NagaValue, b: NagaValue) -> NagaValue {
        self.expect(cond, DType::I1, "select condition");
        self.expect(a, dtype, "select true value");
        self.expect(b, dtype, "select false value");
        let h = self.sel(cond.h, a.h, b.h);
        self.v(h, dtype)
    }

    fn fma(&mut self, dtype: DType, a: NagaValue, b: NagaValue, c: NagaValue) -> NagaValue {
        self.expect(a, dtype, "fma a");
        self.expect(b, dtype, "fma b");
        self.expect(c, dtype, "fma c");
        let h = match dtype {
            DType::F32 | DType::F16 | DType::BF16 => {
                // In f32, rounded once (the product of two f16 or bf16 values is exact in f32).
                let (af, bf, cf) = (self.widen(dtype, a.h), self.widen(dtype, b.h), self.widen(dtype, c.h));
                let r = if self.zeros.contains_key(&cf) {
                    // A driver turns fma(a, b, 0) into the product (-0 where a * b + 0 is +0).
                    let p = self.bin(BO::Multiply, af, bf);
                    self.with_constant_zero(BinaryOp::Add, p, cf).unwrap_or(p)
                } else {
                    self.math(MF::Fma, &[af, bf, cf])
                };
                self.narrow(dtype, r)
            }
            d if d.is_int() && d != DType::I1 => {
                let m = self.bin(BO::Multiply, a.h, b.h);
                let r = self.bin(BO::Add, m, c.h);
                self.wrap(d, r)
            }
            d => {
                self.fail_contract(format!("fma on {d}"));
                a.h
            }
        };
        self.v(h, dtype)
    }

    fn cast(&mut self, from: DType, to: DType, x: NagaValue) -> NagaValue {
        self.expect(x, from, "cast operand");
        let x = x.h;
        if from == to {
            return self.v(x, to);
        }
        // An integer constant zero converts to a float constant zero, which the zero rules
        // above recognise.
        if to.is_float() && self.int_zeros.contains(&x) {
            return self.constant(to, Scalar::Float(0.0));
        }
        let h = if to == DType::I1 {
            if from == DType::BF16 {
                // Nonzero magnitude bits (NaN included, as for f32).
                let m = self.lit_u32(0x7FFF);
                let mag = self.bin(BO::And, x, m);
                let zero = self.lit_u32(0);
                self.bin(BO::NotEqual, mag, zero)
            } else if from.is_float() {
                let zero = self.lit(from, Scalar::Float(0.0));
                let eq = self.bin(BO::Equal, x, zero);
                self.not(eq)
            } else {
                let zero = self.lit(from, Scalar::Int(0));
                self.bin(BO::NotEqual, x, zero)
            }
        } else if from == DType::I1 {
            let one = self.lit(to, Scalar::Int(1));
            let zero = self.lit(to, Scalar::Int(0));
            if to.is_float() && to != DType::BF16 {
                self.zeros.insert(zero, false);
            }
            self.sel(x, one, zero)
        } else if to == DType::BF16 && matches!(from, DType::I32 | DType::U32) {
            // Rounded to odd in f32, then to bf16: one correct rounding.
            let v = self.v(x, from);
            let odd = legalize::int_to_f32_round_odd(self, from, v).h;
            self.narrow(to, odd)
        } else if to == DType::BF16 && from == DType::I64 {
            self.unsupported(
                format!("a cast from {from} to {to}"),
                "its one rounding needs 64-bit integer bit scans, which this backend does not build",
            );
            x
        } else if to.is_float() {
            // From an integer through f32: exact below 2^24 (every 8- and 16-bit integer), and
            // an f16 overflows above it whichever way it rounds, so the f16 is rounded once.
            let xf = if from.is_float() { self.widen(from, x) } else { self.convert(x, DType::F32) };
            self.narrow(to, xf)
        } else if from.is_float() {
            let xf = self.widen(from, x);
            self.f32_to_int(xf, to)
        } else {
            // Between registers, then into the narrow dtype's range.
            let r = self.int_to_int(register_dtype(from), register_dtype(to), x);
            self.wrap(to, r)
        };
        self.v(h, to)
    }

    fn bitcast(&mut self, from: DType, to: DType, x: NagaValue) -> NagaValue {
        self.expect(x, from, "bitcast operand");
        let h = match (from, to) {
            (DType::F32, DType::I32 | DType::U32) | (DType::I32 | DType::U32, DType::F32) => self.bitcast(x.h, kind_of(to)),
            _ => {
                self.fail_contract(format!("a bitcast from {from} to {to}"));
                x.h
            }
        };
        self.v(h, to)
    }

    fn load_global(&mut self, buffer: u32, dtype: DType, index: NagaValue, index_dtype: DType) -> NagaValue {
        let index = self.index(index, index_dtype, "load_global");
        if let Some(per) = packed(dtype) {
            // The element's bits out of its word, into a register.
            let iu = self.index_u32(index, index_dtype);
            let (word, shift, mask) = self.packed_place(iu, per);
            let Some(ptr) = self.element(buffer, dtype, word, true, false, "load_global") else {
                return self.constant(dtype, Scalar::Int(0));
            };
            let w = self.add(Expression::Load { pointer: ptr });
            let h = self.unpack(dtype, w, shift, mask);
            return self.v(h, dtype);
        }
        let index = if self.is_vector(buffer) { self.index_u32(index, index_dtype) } else { index };
        let Some(ptr) = self.element(buffer, dtype, index, true, false, "load_global") else {
            return self.constant(dtype, Scalar::Int(0));
        };
        let h = self.add(Expression::Load { pointer: ptr });
        self.v(h, dtype)
    }

    fn store_global(&mut self, buffer: u32, dtype: DType, index: NagaValue, index_dtype: DType, value: NagaValue) {
        let index = self.index(index, index_dtype, "store_global");
        self.expect(value, dtype, "stored value");
        if let Some(per) = packed(dtype) {
            // Clear the element's bits and set the new ones, each an atomic operation on the
            // word: other threads may store the word's other elements meanwhile.
            if let Some(Some(slot)) = self.buffers.get_mut(buffer as usize) {
                slot.part_word_store = true;
                if !slot.atomic {
                    let name = slot.name.clone();
                    self.fail_contract(format!("a store of one {dtype} element into buffer `{name}`, declared as whole words"));
                    return;
                }
            }
            let iu = self.index_u32(index, index_dtype);
            let (word, shift, mask) = self.packed_place(iu, per);
            let Some(pointer) = self.element(buffer, dtype, word, false, true, "store_global") else {
                return;
            };
            let bits = self.pack_bits(dtype, value.h, mask);
            let m = self.lit_u32(mask);
            let placed_mask = self.bin(BO::ShiftLeft, m, shift);
            let keep = self.un(UnaryOperator::BitwiseNot, placed_mask);
            let placed = self.bin(BO::ShiftLeft, bits, shift);
            self.stmt(Statement::Atomic { pointer, fun: AtomicFunction::And, value: keep, result: None });
            self.stmt(Statement::Atomic { pointer, fun: AtomicFunction::InclusiveOr, value: placed, result: None });
            return;
        }
        let index = if self.is_vector(buffer) { self.index_u32(index, index_dtype) } else { index };
        if let Some(pointer) = self.element(buffer, dtype, index, false, true, "store_global") {
            self.stmt(Statement::Store { pointer, value: value.h });
        }
    }

    fn max_vector(&self, dtype: DType) -> u32 {
        // One 4-vector of the buffer's words (16 bytes, 8 for f16), within the target's widest
        // access.
        match vector_words(dtype) {
            Some(n) if dtype.size_bytes() as u32 * n <= self.target.max_vector_bytes.max(1) => n,
            _ => 1,
        }
    }

    fn load_global_vec(&mut self, buffer: u32, dtype: DType, index: NagaValue, index_dtype: DType, n: u32) -> Vec<NagaValue> {
        let whole = Some(n) == vector_words(dtype);
        if let Some(Some(slot)) = self.buffers.get_mut(buffer as usize) {
            slot.vector_access |= whole;
        }
        if !whole || !self.is_vector(buffer) {
            return tilekit_core::gpu::emit::load_elementwise(self, buffer, dtype, index, index_dtype, n);
        }
        let Some(ptr) = self.vector_of(buffer, dtype, index, index_dtype, n, false, "load_global_vec") else {
            return (0..n).map(|_| self.constant(dtype, Scalar::Int(0))).collect();
        };
        let v = self.add(Expression::Load { pointer: ptr });
        let mut out = Vec::with_capacity(n as usize);
        for c in 0..4 {
            let word = self.add(Expression::AccessIndex { base: v, index: c });
            match packed(dtype) {
                None => out.push(self.v(word, dtype)),
                Some(per) => {
                    let (bits, mask) = packed_bits(per);
                    for k in 0..per {
                        let sh = self.lit_u32(k * bits);
                        let h = self.unpack(dtype, word, sh, mask);
                        out.push(self.v(h, dtype));
                    }
                }
            }
        }
        out
    }

    fn store_global_vec(&mut self, buffer: u32, dtype: DType, index: NagaValue, index_dtype: DType, values: &[NagaValue]) {
        let n = values.len() as u32;
        let whole = Some(n) == vector_words(dtype);
        if !whole {
            return tilekit_core::gpu::emit::store_elementwise(self, buffer, dtype, index, index_dtype, values);
        }
        let Some(Some(slot)) = self.buffers.get_mut(buffer as usize) else {
            self.fail_contract(format!("store_global_vec: parameter {buffer} is not a buffer"));
            return;
        };
        slot.vector_access = true;
        if !slot.vector {
            // Whole words, which a second build declared as vectors stores as they are: its
            // element stores here do not count as stores of single packed elements.
            let part = slot.part_word_store;
            tilekit_core::gpu::emit::store_elementwise(self, buffer, dtype, index, index_dtype, values);
            if let Some(Some(slot)) = self.buffers.get_mut(buffer as usize) {
                slot.part_word_store = part;
            }
            return;
        }
        for &v in values {
            self.expect(v, dtype, "stored value");
        }
        let Some(pointer) = self.vector_of(buffer, dtype, index, index_dtype, n, true, "store_global_vec") else {
            return;
        };
        let words: Vec<Handle<Expression>> = match packed(dtype) {
            None => values.iter().map(|v| v.h).collect(),
            Some(per) => {
                let (bits, mask) = packed_bits(per);
                values
                    .chunks(per as usize)
                    .map(|chunk| {
                        let mut word = None;
                        for (k, v) in chunk.iter().enumerate() {
                            let b = self.pack_bits(dtype, v.h, mask);
                            let placed = if k == 0 {
                                b
                            } else {
                                let sh = self.lit_u32(k as u32 * bits);
                                self.bin(BO::ShiftLeft, b, sh)
                            };
                            word = Some(match word {
                                None => placed,
                                Some(w) => self.bin(BO::InclusiveOr, w, placed),
                            });
                        }
                        word.expect("a word has elements")
                    })
                    .collect()
            }
        };
        let word = match packed(dtype) {
            Some(_) => DType::U32,
            None => dtype,
        };
        let ty = self.ty(TypeInner::Vector { size: naga::VectorSize::Quad, scalar: naga_scalar(word) });
        let v = self.add(Expression::Compose { ty, components: words });
        self.stmt(Statement::Store { pointer, value: v });
    }

    fn atomic_global(
        &mut self,
        op: Option<AtomicOp>,
        buffer: u32,
        dtype: DType,
        index: NagaValue,
        index_dtype: DType,
        cmp: Option<NagaValue>,
        value: NagaValue,
    ) -> NagaValue {
        let index = self.index(index, index_dtype, "atomic_global");
        self.expect(value, dtype, "atomic value");
        let name = op.map_or("atomic_cas", |o| o.name());
        match dtype {
            DType::I32 | DType::U32 | DType::I64 => {}
            DType::F32 if op == Some(AtomicOp::Add) && self.target.atomic_float_add => self.uses_f32_atomic = true,
            d => {
                let why = if d == DType::F32 {
                    "naga has float atomics for `add` only (SHADER_FLOAT32_ATOMIC), and no bit view of a float buffer".to_string()
                } else {
                    format!("no {d} atomics in naga")
                };
                self.unsupported(format!("`{name}` on a {d} buffer"), &why);
                return self.constant(dtype, Scalar::Int(0));
            }
        }
        if let Some(Some(slot)) = self.buffers.get_mut(buffer as usize) {
            slot.atomic = true;
        }
        // (Only 32- and 64-bit dtypes reach here: the match above refuses the narrow ones.)
        let Some(pointer) = self.element(buffer, dtype, index, true, true, name) else {
            return self.constant(dtype, Scalar::Int(0));
        };
        let scalar = naga_scalar(dtype);
        let (fun, ty, comparison) = match op {
            Some(AtomicOp::Add) => (AtomicFunction::Add, self.scalar_ty(dtype), false),
            Some(AtomicOp::Max) => (AtomicFunction::Max, self.scalar_ty(dtype), false),
            Some(AtomicOp::Min) => (AtomicFunction::Min, self.scalar_ty(dtype), false),
            Some(AtomicOp::Xchg) => (AtomicFunction::Exchange { compare: None }, self.scalar_ty(dtype), false),
            None => {
                let Some(c) = cmp else {
                    self.fail_contract("compare-and-swap without a compare value".into());
                    return self.constant(dtype, Scalar::Int(0));
                };
                self.expect(c, dtype, "atomic compare value");
                let ty = self.module.generate_predeclared_type(naga::PredeclaredType::AtomicCompareExchangeWeakResult(scalar));
                (AtomicFunction::Exchange { compare: Some(c.h) }, ty, true)
            }
        };
        let result = self.expressions.append(Expression::AtomicResult { ty, comparison }, Span::UNDEFINED);
        self.stmt(Statement::Atomic { pointer, fun, value: value.h, result: Some(result) });
        let h = if comparison { self.add(Expression::AccessIndex { base: result, index: 0 }) } else { result };
        self.v(h, dtype)
    }

    fn reserve_shared(&mut self, dtype: DType, len: u32) {
        if let Some(entry) = self.shared.get_mut(&dtype) {
            entry.1 = entry.1.max(len);
            return;
        }
        // A placeholder type: `finish` gives the array its final length.
        let elem = self.scalar_ty(shared_scalar(dtype));
        let var = self.module.global_variables.append(
            GlobalVariable {
                name: Some(format!("shared_{dtype}")),
                space: AddressSpace::WorkGroup,
                binding: None,
                ty: elem,
                init: None,
                memory_decorations: Default::default(),
            },
            Span::UNDEFINED,
        );
        self.shared.insert(dtype, (var, len));
    }

    fn load_shared(&mut self, dtype: DType, index: NagaValue) -> NagaValue {
        let Some(pointer) = self.shared_ptr(dtype, index, "load_shared") else {
            return self.constant(dtype, Scalar::Int(0));
        };
        let raw = self.add(Expression::Load { pointer });
        let h = if dtype == DType::I1 {
            let zero = self.lit_u32(0);
            self.bin(BO::NotEqual, raw, zero)
        } else {
            raw
        };
        self.v(h, dtype)
    }

    fn store_shared(&mut self, dtype: DType, index: NagaValue, value: NagaValue) {
        self.expect(value, dtype, "stored value");
        let Some(pointer) = self.shared_ptr(dtype, index, "store_shared") else {
            return;
        };
        let v = if dtype == DType::I1 {
            let (one, zero) = (self.lit_u32(1), self.lit_u32(0));
            self.sel(value.h, one, zero)
        } else {
            value.h
        };
        self.stmt(Statement::Store { pointer, value: v });
    }

    fn barrier(&mut self) {
        self.stmt(Statement::ControlBarrier(naga::Barrier::WORK_GROUP));
    }

    fn shuffle_xor(&mut self, dtype: DType, value: NagaValue, lane_mask: u32) -> NagaValue {
        self.expect(value, dtype, "shuffled value");
        if !self.target.subgroup_ops.shuffle {
            self.fail_contract(format!("a lane shuffle of {dtype} (mask {lane_mask}) on a target without shuffles"));
            return value;
        }
        self.uses_subgroups = true;
        // 32-bit words move: booleans as 0 or 1, f16 as f32 (exact), i64 as two halves.
        let h = match dtype {
            DType::I1 => {
                let (one, zero) = (self.lit_u32(1), self.lit_u32(0));
                let w = self.sel(value.h, one, zero);
                let r = self.gather_xor(w, DType::U32, lane_mask);
                let zero = self.lit_u32(0);
                self.bin(BO::NotEqual, r, zero)
            }
            DType::F16 => {
                let w = self.widen(DType::F16, value.h);
                let r = self.gather_xor(w, DType::F32, lane_mask);
                self.convert(r, DType::F16)
            }
            DType::I64 => {
                let lo = self.add(Expression::As { expr: value.h, kind: ScalarKind::Uint, convert: Some(4) });
                let k = self.lit_u32(32);
                let up = self.bin(BO::ShiftRight, value.h, k);
                let hi = self.add(Expression::As { expr: up, kind: ScalarKind::Uint, convert: Some(4) });
                let lo = self.gather_xor(lo, DType::U32, lane_mask);
                let hi = self.gather_xor(hi, DType::U32, lane_mask);
                let lo = self.int_to_int(DType::U32, DType::I64, lo);
                let hi = self.int_to_int(DType::U32, DType::I64, hi);
                let hi = self.bin(BO::ShiftLeft, hi, k);
                self.bin(BO::InclusiveOr, hi, lo)
            }
            d => self.gather_xor(value.h, register_dtype(d), lane_mask),
        };
        self.v(h, dtype)
    }

    fn begin_if(&mut self, cond: NagaValue, result_dtypes: &[DType]) {
        self.expect(cond, DType::I1, "if condition");
        let results = result_dtypes.iter().map(|&d| (d, self.local(d))).collect();
        self.frames.push(Frame::If { cond: cond.h, results, accept: None });
        self.blocks.push(Block::new());
    }

    fn begin_else(&mut self, then_values: &[NagaValue]) {
        let Some(Frame::If { results, .. }) = self.frames.last() else {
            self.fail_contract("begin_else outside an if".into());
            return;
        };
        let results = results.clone();
        if results.len() != then_values.len() {
            self.fail_contract(format!("the then-branch yields {} values for {}", then_values.len(), results.len()));
        }
        for (&(d, var), &v) in results.iter().zip(then_values) {
            self.expect(v, d, "then value");
            self.store_local(var, v.h);
        }
        let block = self.blocks.pop().unwrap_or_default();
        if let Some(Frame::If { accept, .. }) = self.frames.last_mut() {
            *accept = Some(block);
        }
        self.blocks.push(Block::new());
    }

    fn end_if(&mut self, else_values: &[NagaValue]) -> Vec<NagaValue> {
        let Some(Frame::If { cond, results, accept }) = self.frames.pop() else {
            self.fail_contract("end_if outside an if".into());
            return Vec::new();
        };
        if results.len() != else_values.len() {
            self.fail_contract(format!("the else-branch yields {} values for {}", else_values.len(), results.len()));
        }
        for (&(d, var), &v) in results.iter().zip(else_values) {
            self.expect(v, d, "else value");
            self.store_local(var, v.h);
        }
        let last = self.blocks.pop().unwrap_or_default();
        // Without begin_else the branch just closed is the then-branch.
        let (accept, reject) = match accept {
            Some(a) => (a, last),
            None => (last, Block::new()),
        };
        self.stmt(Statement::If { condition: cond, accept, reject });
        results.iter().map(|&(d, var)| NagaValue { h: self.load_local(var), dtype: d }).collect()
    }

    fn begin_loop(
        &mut self,
        iv_dtype: DType,
        lower: NagaValue,
        upper: NagaValue,
        step: NagaValue,
        carried: &[(DType, NagaValue)],
    ) -> (NagaValue, Vec<NagaValue>) {
        self.expect(lower, iv_dtype, "loop lower bound");
        self.expect(upper, iv_dtype, "loop upper bound");
        self.expect(step, iv_dtype, "loop step");
        let iv = self.local(iv_dtype);
        self.store_local(iv, lower.h);
        let vars: Vec<(DType, Handle<LocalVariable>)> = carried
            .iter()
            .map(|&(d, v)| {
                self.expect(v, d, "loop-carried value");
                let var = self.local(d);
                self.store_local(var, v.h);
                (d, var)
            })
            .collect();
        self.frames.push(Frame::Loop { carried: vars.clone(), iv, iv_dtype, step: step.h });
        self.blocks.push(Block::new());
        // `for iv in lower..upper step step`: a negative step counts down.
        let i = self.load_local(iv);
        let zero = self.lit(iv_dtype, Scalar::Int(0));
        let up = self.bin(BO::Greater, step.h, zero);
        let below = self.bin(BO::Less, i, upper.h);
        let above = self.bin(BO::Greater, i, upper.h);
        let go = self.sel(up, below, above);
        let stop = self.not(go);
        let mut brk = Block::new();
        brk.push(Statement::Break, Span::UNDEFINED);
        self.stmt(Statement::If { condition: stop, accept: brk, reject: Block::new() });
        let values = vars.iter().map(|&(d, var)| NagaValue { h: self.load_local(var), dtype: d }).collect();
        (self.v(i, iv_dtype), values)
    }

    fn end_loop(&mut self, next: &[NagaValue]) -> Vec<NagaValue> {
        let Some(Frame::Loop { carried, iv, iv_dtype, step }) = self.frames.pop() else {
            self.fail_contract("end_loop outside a loop".into());
            return Vec::new();
        };
        if carried.len() != next.len() {
            self.fail_contract(format!("the loop body yields {} values for {}", next.len(), carried.len()));
        }
        for (&(d, var), &v) in carried.iter().zip(next) {
            self.expect(v, d, "next loop-carried value");
            self.store_local(var, v.h);
        }
        let i = self.load_local(iv);
        let n = self.bin(BO::Add, i, step);
        let _ = iv_dtype;
        self.store_local(iv, n);
        let body = self.blocks.pop().unwrap_or_default();
        self.stmt(Statement::Loop { body, continuing: Block::new(), break_if: None });
        carried.iter().map(|&(d, var)| NagaValue { h: self.load_local(var), dtype: d }).collect()
    }

    fn mma(&mut self, instr: MatrixInstr, a: &[NagaValue], b: &[NagaValue], c: &[NagaValue]) -> Option<Vec<NagaValue>> {
        let _ = (instr, a, b, c);
        None
    }
}

impl NagaEmitter {
    /// Integer `op x` on a 32- or 64-bit register (narrow dtypes wrap afterwards).
    fn unary_int(&mut self, op: UnaryOp, d: DType, x: Handle<Expression>) -> Handle<Expression> {
        match op {
            UnaryOp::Not => self.un(UnaryOperator::BitwiseNot, x),
            UnaryOp::Neg => {
                let zero = self.lit(d, Scalar::Int(0));
                self.bin(BO::Subtract, zero, x)
            }
            UnaryOp::Abs if kind_of(d) == ScalarKind::Uint => x,
            UnaryOp::Abs => {
                // (x ^ s) + (s >>> 1) with s = x >> (w - 1): MIN wraps to itself, and no
                // driver reads it as a non-negative abs.
                let w = naga_scalar(d).width as u32 * 8;
                let k = self.lit_u32(w - 1);
                let s = self.bin(BO::ShiftRight, x, k);
                let flipped = self.bin(BO::ExclusiveOr, x, s);
                let ux = self.bitcast(x, ScalarKind::Uint);
                let neg = self.bin(BO::ShiftRight, ux, k);
                let neg = self.bitcast(neg, ScalarKind::Sint);
                self.bin(BO::Add, flipped, neg)
            }
            _ => {
                self.fail_contract(format!("{} on integer dtype {d}", op.name()));
                x
            }
        }
    }

    /// Integer `a op b` on 32- or 64-bit registers (narrow dtypes wrap afterwards).
    fn binary_int(&mut self, op: BinaryOp, d: DType, a: Handle<Expression>, b: Handle<Expression>) -> Handle<Expression> {
        match op {
            BinaryOp::Add => self.bin(BO::Add, a, b),
            BinaryOp::Sub => self.bin(BO::Subtract, a, b),
            BinaryOp::Mul => self.bin(BO::Multiply, a, b),
            // naga's integer division truncates and wraps MIN / -1 (WGSL's rules), as C.
            BinaryOp::Div => self.bin(BO::Divide, a, b),
            BinaryOp::Rem => self.bin(BO::Modulo, a, b),
            BinaryOp::And => self.bin(BO::And, a, b),
            BinaryOp::Or => self.bin(BO::InclusiveOr, a, b),
            BinaryOp::Xor => self.bin(BO::ExclusiveOr, a, b),
            BinaryOp::Shl | BinaryOp::Shr => {
                // Shift amounts are u32 in naga.
                let k = if d == DType::U32 { b } else { self.add(Expression::As { expr: b, kind: ScalarKind::Uint, convert: Some(4) }) };
                self.bin(if op == BinaryOp::Shl { BO::ShiftLeft } else { BO::ShiftRight }, a, k)
            }
            BinaryOp::Max | BinaryOp::Min => {
                let lt = self.bin(BO::Less, a, b);
                if op == BinaryOp::Max {
                    self.sel(lt, b, a)
                } else {
                    self.sel(lt, a, b)
                }
            }
        }
    }
}
