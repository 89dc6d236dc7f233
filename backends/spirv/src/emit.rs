//! SPIR-V emission: the backend primitives of [`tilekit_core::gpu::Emitter`], written with rspirv.
//!
//! One module holds one GLCompute entry point `main` (SPIR-V 1.5, Logical addressing, GLSL450
//! memory model). Buffer parameters become storage buffers in descriptor set 0, bound in parameter
//! order; scalar parameters become members of one push-constant block. The module only declares
//! the capabilities its instructions use, and [`SpirvEmitter::finish`] reports them as
//! [`Requirements`] for the runtime to check against a device. A kernel that folds its grid
//! ([`SpirvEmitter::with_grid_fold`]) takes the logical grid after the scalars and derives its
//! program ids from the linear workgroup index; any other reads them from `WorkgroupId` and
//! `NumWorkgroups`.
//!
//! Representation of values in registers:
//! - `i1` is `OpTypeBool`; in buffers it is a byte (0 or 1), in shared memory a 32-bit word.
//! - Every integer width has one type of signedness 0; signed and unsigned dtypes differ only in
//!   the opcodes chosen (`OpSDiv`/`OpUDiv`, `OpSLessThan`/`OpULessThan`, ...).
//! - `bf16` is a 32-bit integer holding the bf16 bits in its low half: conversions to f32 are a
//!   shift, and bf16 buffers need only 16-bit storage, not 16-bit arithmetic (bf16 shared memory
//!   holds 16-bit integers).
//!
//! Control flow is structured: `if` is a selection with `OpPhi`s at its merge, `for` a loop whose
//! header carries the induction variable and every carried value in `OpPhi`s. A loop stops
//! rather than wrap its induction variable past the dtype's range, and a zero step runs no
//! iteration (the interpreter reports it; a GPU must not hang).
//!
//! Numerics, and what Vulkan guarantees about them:
//! - Vulkan leaves the rounding mode of float conversions and arithmetic to the implementation
//!   (round-to-nearest-even or round-toward-zero) unless the module opts into float controls, and
//!   allows the `FPRoundingMode` decoration only on conversions stored straight to memory. So
//!   f32 -> f16 and f32 -> bf16 are computed with integer arithmetic, round-to-nearest-even, exact
//!   on every device; f16 -> f32 (`OpFConvert`) and bf16 -> f32 (a shift) are exact, except
//!   that Vulkan lets a device flush f16 subnormal inputs to zero (lavapipe keeps them).
//! - Integer -> f32 conversions (`OpConvertSToF`) are exact below 2^24; above it they round in
//!   the device's mode. Integer -> bf16 rounds to odd in f32 first, so the final rounding to
//!   nearest even is exact; integer -> f16 is exact (anything above 2^24 overflows f16 anyway).
//! - Float -> integer conversions replace NaN by 0, clamp to the destination range and truncate,
//!   so they never reach the undefined out-of-range case of `OpConvertFToS`.
//! - Signed division and remainder are computed on magnitudes with `OpUDiv`/`OpUMod`: Vulkan
//!   leaves `OpSRem` undefined for negative operands and SPIR-V leaves `MIN / -1` undefined; this
//!   way both follow C (and wrap for `MIN / -1`).
//! - f16 arithmetic uses native f16 instructions, rounding in the device's default mode
//!   (nearest-even on lavapipe); f16 `rem`, bf16 arithmetic and f16/bf16 functions other than
//!   `neg`/`abs` compute in f32 and round once, as the interpreter does.
//! - `fma` is GLSL.std.450 `Fma`; Vulkan only promises the precision of a multiply then an add.
//! - `OpFDiv` carries Vulkan's precision (2.5 ulp; lavapipe is exact). `OpFRem` is allowed to be
//!   `x - y * trunc(x / y)`, exact only while the quotient is small; `x % inf` is fixed up to `x`.
//! - `erf`, `tanh`, `sin` and `cos` are tilekit's own sequences, shared with AMDGCN
//!   ([`tilekit_core::gpu::math`]): GLSL.std.450 has no `Erf`, its `Tanh` cancels near 0 and its
//!   `Sin`/`Cos` are 2^-11 absolute on [-pi, pi] only; `rsqrt` is `InverseSqrt`. The bounds are in [`tilekit_core::precision`].
//!
//! Atomics are relaxed (like GLSL's `atomicAdd`), at device scope. f32 atomics other than a
//! native add (`SPV_EXT_shader_atomic_float_add`) run as compare-and-swap loops on the bits; for
//! those the buffer gets a second, `Aliased` u32 view bound at the same binding.

use std::collections::{BTreeMap, HashMap, HashSet};

use half::{bf16, f16};
use rspirv::binary::Assemble;
use rspirv::dr::{Builder, InsertPoint, Instruction, Operand};
use rspirv::spirv::{self, GlslStd450Op as Gl, Op, Word};
use tilekit_core::gpu::emit::CoopRole;
use tilekit_core::gpu::{legalize, Emitter, MatrixInstr, Target};
use tilekit_core::ir::{Access, AtomicOp, BinaryOp, CmpPred, ParamKind, UnaryOp};
use tilekit_core::{DType, Program, Scalar};

use crate::kernel::{Binding, PushConstant, Requirements, SpirvKernel};

/// The SPIR-V version emitted: 1.5 is core in Vulkan 1.2 and has 8- and 16-bit storage built in.
pub const SPIRV_VERSION: (u8, u8) = (1, 5);

const SCOPE_DEVICE: u32 = 1;
const SCOPE_WORKGROUP: u32 = 2;
const SCOPE_SUBGROUP: u32 = 3;
const SEMANTICS_RELAXED: u32 = 0;
/// The logical grid of a folded kernel: three u32 push constants.
const GRID_FOLD_BYTES: u32 = 12;
/// AcquireRelease | WorkgroupMemory.
const SEMANTICS_BARRIER: u32 = 0x8 | 0x100;
/// MakeAvailable and MakeVisible (Vulkan memory model only).
const SEMANTICS_MAKE_AVAILABLE: u32 = 0x2000;
const SEMANTICS_MAKE_VISIBLE: u32 = 0x4000;

/// Why a kernel could not be emitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpirvError {
    #[error("kernel `{kernel}`, parameter `{param}`: {reason}")]
    Param { kernel: String, param: String, reason: String },
    #[error("kernel `{kernel}`: the SPIR-V backend cannot emit {what}")]
    Unsupported { kernel: String, what: String },
    #[error("kernel `{kernel}`: emitter misuse: {what}")]
    Contract { kernel: String, what: String },
    #[error("kernel `{kernel}` does not fit target `{target}`: {what}")]
    Target { kernel: String, target: String, what: String },
    #[error("kernel `{kernel}`: rspirv: {what}")]
    Builder { kernel: String, what: String },
}

/// A scalar SSA value: its SPIR-V id and the dtype it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpirvValue {
    pub id: Word,
    pub dtype: DType,
}

/// What the module uses, to declare capabilities and fill [`Requirements`].
#[derive(Clone, Copy, Debug, Default)]
struct Used {
    int8: bool,
    int16: bool,
    int64: bool,
    float16: bool,
    storage8: bool,
    storage16: bool,
    shuffle: bool,
    atomic_float_add: bool,
    int64_atomics: bool,
    /// Cooperative matrices (`SPV_KHR_cooperative_matrix`, with the Vulkan memory model).
    coop: bool,
    /// Cooperative matrices of bf16 (`SPV_KHR_bfloat16`; the module's only bf16 type).
    coop_bf16: bool,
}

struct BufferSlot {
    name: String,
    binding: u32,
    dtype: DType,
    access: Access,
    /// The variables through which the buffer is accessed, one per view, created on first use.
    views: Vec<(View, Word)>,
    read: bool,
    written: bool,
}

/// How a storage buffer's binding is typed. Several views of one binding are separate variables
/// decorated with the same binding; they are `Aliased` when the buffer is written through more
/// than one of them, so the driver keeps their accesses in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum View {
    /// An array of the dtype's storage type.
    Elem,
    /// An array of u32 words over an f32 buffer, for compare-and-swap atomics.
    Bits,
    /// An array of `n`-element vectors: 32- and 64-bit dtypes as vectors of their storage type,
    /// 16-bit dtypes as vectors of u32 words holding two elements each, so that one access moves
    /// up to 16 bytes.
    Vec(u32),
}

struct SharedSlot {
    var: Word,
    len: u32,
}

enum Frame {
    If {
        merge: Word,
        else_label: Word,
        results: Vec<DType>,
        then_out: Option<(Word, Vec<SpirvValue>)>,
    },
    Loop {
        header: Word,
        cont: Word,
        merge: Word,
        iv: SpirvValue,
        step: Word,
        upper: Word,
        step_pos: Word,
        limit: Word,
        iv_next: Word,
        go_next: Word,
        carried: Vec<(SpirvValue, Word)>,
    },
}

/// Emits one compute kernel; drive it through [`Emitter`], then call [`SpirvEmitter::finish`].
pub struct SpirvEmitter {
    b: Builder,
    kernel: String,
    target: Target,
    threads: u32,
    error: Option<SpirvError>,
    glsl: Word,
    cur_block: Word,
    consts: HashMap<(Word, u64), Word>,
    /// Float constants that are zeros, with their sign (true: -0.0).
    zeros: HashMap<Word, bool>,
    /// The bits of every scalar constant made by `constant_bits`, so that conversions of a
    /// constant can give a constant the zero rules above recognise.
    const_bits: HashMap<Word, u64>,
    /// f16 values this module rounded from f32 with `OpFConvert`, and the `OpPhi`s and
    /// selections that may hold one. NVIDIA's driver folds `OpFConvert` to f16 and back to f32
    /// into nothing (the value keeps its f32 bits), through a loop-carried value too (an i16
    /// cast to f16 came back unrounded), so these widen through their bits instead.
    rounded_f16: HashSet<Word>,
    /// bf16 bits (a u32) rounded from an f32, to the u32 that holds them in its high half
    /// (`legalize::bf16_in_high_half`): two stored packed take the high halves as they are.
    bf16_high: HashMap<Word, Word>,
    buffers: Vec<Option<BufferSlot>>,
    bindings: Vec<Binding>,
    scalars: Vec<Option<SpirvValue>>,
    push_constants: Vec<PushConstant>,
    push_size: u32,
    interface: Vec<Word>,
    thread_index: Word,
    program_id: [Word; 3],
    num_programs: [Word; 3],
    /// Byte offset of the logical grid in the push-constant block when the grid is folded.
    grid_fold: Option<u32>,
    shared: BTreeMap<DType, SharedSlot>,
    /// Staging arrays of cooperative-matrix operands (`uvec4` arrays; lengths in elements of
    /// their dtype), apart from the shared arrays.
    staging: BTreeMap<DType, SharedSlot>,
    frames: Vec<Frame>,
    used: Used,
    /// Struct types already decorated (`Block`, `Offset`), by runtime-array type.
    buffer_structs: HashMap<Word, Word>,
    strided: HashSet<Word>,
    /// Type ids by shape: rspirv's own deduplication scans every global, once per call.
    types: HashMap<TypeKey, Word>,
    /// The cooperative-matrix type of every value that holds one (their dtype is their
    /// component's).
    coop_types: HashMap<Word, Word>,
    /// Pointers into workgroup memory (shared arrays), for the Vulkan memory model's
    /// non-private accesses.
    workgroup_ptrs: HashSet<Word>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum TypeKey {
    Int(u32),
    Float(u32),
    /// 16-bit brain float (`SPV_KHR_bfloat16`): only cooperative matrices hold it; bf16
    /// arithmetic elsewhere widens its bits to f32.
    BFloat16,
    Bool,
    Vector(Word, u32),
    Pointer(spirv::StorageClass, Word),
    /// Component type, rows, columns, use (`MatrixAKHR` 0, `MatrixBKHR` 1, accumulator 2).
    Coop(Word, u32, u32, u32),
}

/// The component dtype of `instr`'s operand `role`.
fn coop_component(instr: MatrixInstr, role: CoopRole) -> DType {
    match role {
        CoopRole::A => instr.a,
        CoopRole::B => instr.b,
        CoopRole::Acc => instr.acc,
    }
}

fn is_signed(d: DType) -> bool {
    d.is_signed_int()
}

fn int_width(d: DType) -> u32 {
    match d {
        DType::I8 | DType::U8 => 8,
        DType::I16 => 16,
        DType::I64 => 64,
        _ => 32,
    }
}

impl SpirvEmitter {
    /// Declares the interface of `program` (buffers, push constants, builtins) for `threads`
    /// threads per program on `target`, and opens the entry point.
    pub fn new(program: &Program, target: &Target, threads: u32) -> Result<SpirvEmitter, SpirvError> {
        SpirvEmitter::with_grid_fold(program, target, threads, false)
    }

    /// As [`SpirvEmitter::new`]; with `fold_grid`, the kernel folds its grid
    /// ([`tilekit_core::gpu::grid`]): the logical grid follows the scalars in the push-constant
    /// block as three u32 (`grid_x`, `grid_y`, `grid_z`, at [`SpirvKernel::grid_fold`]), the
    /// entry block returns for the idle workgroups of the folded dispatch, and program ids and
    /// extents are those of the logical grid. Without it nothing of this is emitted.
    pub fn with_grid_fold(program: &Program, target: &Target, threads: u32, fold_grid: bool) -> Result<SpirvEmitter, SpirvError> {
        let kernel = program.name.clone();
        if threads == 0 || threads > target.max_threads_per_program {
            return Err(SpirvError::Target {
                kernel,
                target: target.name.clone(),
                what: format!("{threads} threads per program (the target allows 1 to {})", target.max_threads_per_program),
            });
        }
        let mut b = Builder::new();
        b.set_version(SPIRV_VERSION.0, SPIRV_VERSION.1);
        b.memory_model(spirv::AddressingModel::Logical, spirv::MemoryModel::GLSL450);
        let glsl = b.ext_inst_import("GLSL.std.450");
        let mut e = SpirvEmitter {
            b,
            kernel,
            target: target.clone(),
            threads,
            error: None,
            glsl,
            cur_block: 0,
            consts: HashMap::new(),
            zeros: HashMap::new(),
            const_bits: HashMap::new(),
            rounded_f16: HashSet::new(),
            bf16_high: HashMap::new(),
            buffers: Vec::new(),
            bindings: Vec::new(),
            scalars: Vec::new(),
            push_constants: Vec::new(),
            push_size: 0,
            interface: Vec::new(),
            thread_index: 0,
            program_id: [0; 3],
            num_programs: [0; 3],
            grid_fold: None,
            shared: BTreeMap::new(),
            staging: BTreeMap::new(),
            frames: Vec::new(),
            used: Used::default(),
            buffer_structs: HashMap::new(),
            strided: HashSet::new(),
            types: HashMap::new(),
            coop_types: HashMap::new(),
            workgroup_ptrs: HashSet::new(),
        };

        // Interface: buffers in parameter order, scalars packed into one push-constant block.
        let mut members = Vec::new();
        for (i, p) in program.params.iter().enumerate() {
            match &p.kind {
                ParamKind::Buffer { dtype, access } => {
                    if !target.supports(*dtype) {
                        return Err(e.param_error(&p.name, format!("{dtype} buffers are not supported by target `{}`", target.name)));
                    }
                    let binding = e.bindings.len() as u32;
                    e.bindings.push(Binding { binding, param: i as u32, dtype: *dtype, access: *access, size_multiple: 4 });
                    e.buffers.push(Some(BufferSlot {
                        name: p.name.clone(),
                        binding,
                        dtype: *dtype,
                        access: *access,
                        views: Vec::new(),
                        read: false,
                        written: false,
                    }));
                    e.scalars.push(None);
                }
                ParamKind::Scalar { dtype } => {
                    if !target.supports(*dtype) {
                        return Err(e.param_error(&p.name, format!("{dtype} scalars are not supported by target `{}`", target.name)));
                    }
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
            return Err(SpirvError::Target {
                kernel: e.kernel.clone(),
                target: target.name.clone(),
                what: format!(
                    "its scalar parameters take {} bytes of push constants, the target has {}",
                    e.push_size, target.max_push_constant_bytes
                ),
            });
        }
        if fold_grid {
            let offset = e.push_size.div_ceil(4) * 4;
            if offset + GRID_FOLD_BYTES > target.max_push_constant_bytes {
                return Err(SpirvError::Target {
                    kernel: e.kernel.clone(),
                    target: target.name.clone(),
                    what: format!(
                        "folding its grid of more programs than the device dispatches per axis needs {GRID_FOLD_BYTES} bytes of \
                         push constants after the {} its scalar parameters take, the target has {}",
                        e.push_size, target.max_push_constant_bytes
                    ),
                });
            }
            e.grid_fold = Some(offset);
            e.push_size = offset + GRID_FOLD_BYTES;
        }

        // Builtins.
        let u32t = e.u32_ty();
        let v3 = e.vec_ty(u32t, 3);
        let p_u32 = e.ptr_ty(spirv::StorageClass::Input, u32t);
        let p_v3 = e.ptr_ty(spirv::StorageClass::Input, v3);
        let lii = e.global_var(p_u32, spirv::StorageClass::Input);
        let wgid = e.global_var(p_v3, spirv::StorageClass::Input);
        let nwg = e.global_var(p_v3, spirv::StorageClass::Input);
        for (var, builtin, name) in [
            (lii, spirv::BuiltIn::LocalInvocationIndex, "local_invocation_index"),
            (wgid, spirv::BuiltIn::WorkgroupId, "workgroup_id"),
            (nwg, spirv::BuiltIn::NumWorkgroups, "num_workgroups"),
        ] {
            e.b.decorate(var, spirv::Decoration::BuiltIn, [Operand::BuiltIn(builtin)]);
            e.b.name(var, name);
            e.interface.push(var);
        }

        // Push-constant block.
        let mut push_var = None;
        if !members.is_empty() || e.grid_fold.is_some() {
            let mut tys: Vec<Word> = members.iter().map(|&(_, _, d, _)| e.push_member_ty(d)).collect();
            let mut names: Vec<(String, u32)> = members.iter().map(|(_, name, _, offset)| (name.clone(), *offset)).collect();
            if let Some(offset) = e.grid_fold {
                for (axis, name) in ["grid_x", "grid_y", "grid_z"].into_iter().enumerate() {
                    tys.push(u32t);
                    names.push((name.to_string(), offset + 4 * axis as u32));
                }
            }
            let st = e.b.type_struct(tys.clone());
            e.b.decorate(st, spirv::Decoration::Block, []);
            for (m, (name, offset)) in names.iter().enumerate() {
                e.b.member_decorate(st, m as u32, spirv::Decoration::Offset, [Operand::LiteralBit32(*offset)]);
                e.b.member_name(st, m as u32, name.as_str());
            }
            e.b.name(st, "Scalars");
            let p = e.b.type_pointer(None, spirv::StorageClass::PushConstant, st);
            let var = e.global_var(p, spirv::StorageClass::PushConstant);
            e.b.name(var, "scalars");
            e.interface.push(var);
            push_var = Some((var, tys));
        }

        // The entry point and its first block: builtins and scalars are read once, here, so that
        // their values dominate every use.
        let void = e.b.type_void();
        let fnty = e.b.type_function(void, []);
        let main = e.b.begin_function(void, None, spirv::FunctionControl::NONE, fnty).map_err(|err| e.builder_error(err))?;
        e.b.name(main, "main");
        e.cur_block = e.b.begin_block(None).map_err(|err| e.builder_error(err))?;
        e.thread_index = e.emit(Op::Load, u32t, &[lii]);
        let wg = e.emit(Op::Load, v3, &[wgid]);
        let nw = e.emit(Op::Load, v3, &[nwg]);
        for axis in 0..3 {
            e.program_id[axis] = e.extract(u32t, wg, axis as u32);
            e.num_programs[axis] = e.extract(u32t, nw, axis as u32);
        }
        if let Some((var, tys)) = &push_var {
            for (m, &(param, _, dtype, _)) in members.iter().enumerate() {
                let p = e.ptr_ty(spirv::StorageClass::PushConstant, tys[m]);
                let idx = e.c_u32(m as u32);
                let ptr = e.emit(Op::AccessChain, p, &[*var, idx]);
                let raw = e.emit(Op::Load, tys[m], &[ptr]);
                let v = e.unpack_push_slot(dtype, raw);
                e.scalars[param] = Some(SpirvValue { id: v, dtype });
            }
            if e.grid_fold.is_some() {
                let p = e.ptr_ty(spirv::StorageClass::PushConstant, u32t);
                let grid = [0, 1, 2].map(|axis| {
                    let idx = e.c_u32((members.len() + axis) as u32);
                    let ptr = e.emit(Op::AccessChain, p, &[*var, idx]);
                    e.emit(Op::Load, u32t, &[ptr])
                });
                e.unfold_grid(grid);
            }
        }
        if let Some(err) = e.error.take() {
            return Err(err);
        }
        Ok(e)
    }

    /// The folded grid's entry: workgroup `wg` of the dispatch is program `L` of the logical
    /// `grid` in linear order, or idle and returns at once (a selection whose one branch returns:
    /// `L` is the same in every thread of the workgroup, so barriers after it stay in uniform
    /// control flow). The idle test compares the layer `wg.z` and the index within it rather
    /// than `L`, which wraps past 2^32 in the last layer of the largest grids.
    fn unfold_grid(&mut self, grid: [Word; 3]) {
        let [wx, wy, wz] = self.program_id;
        let [nx, ny, _] = self.num_programs;
        let layer = self.u_op(Op::IMul, nx, ny);
        let row = self.u_op(Op::IMul, wy, nx);
        let inner = self.u_op(Op::IAdd, wx, row);
        let gxy = self.u_op(Op::IMul, grid[0], grid[1]);
        let total = self.u_op(Op::IMul, gxy, grid[2]);
        let full_layers = self.u_op(Op::UDiv, total, layer);
        let rest = self.u_op(Op::UMod, total, layer);
        let past = self.b_op(Op::UGreaterThan, wz, full_layers);
        let last = self.b_op(Op::IEqual, wz, full_layers);
        let past_rest = self.b_op(Op::UGreaterThanEqual, inner, rest);
        let idle_in_last = self.b_op(Op::LogicalAnd, last, past_rest);
        let idle = self.b_op(Op::LogicalOr, past, idle_in_last);
        let (exit, body) = (self.b.id(), self.b.id());
        let r = self.b.selection_merge(body, spirv::SelectionControl::NONE);
        self.check_build(r);
        let r = self.b.branch_conditional(idle, exit, body, []);
        self.check_build(r);
        self.begin_block(exit);
        let r = self.b.ret();
        self.check_build(r);
        self.begin_block(body);
        let base = self.u_op(Op::IMul, wz, layer);
        let l = self.u_op(Op::IAdd, inner, base);
        let x = self.u_op(Op::UMod, l, grid[0]);
        let q = self.u_op(Op::UDiv, l, grid[0]);
        let y = self.u_op(Op::UMod, q, grid[1]);
        let z = self.u_op(Op::UDiv, l, gxy);
        self.program_id = [x, y, z];
        self.num_programs = grid;
    }

    /// Closes the entry point, declares shared memory and capabilities, and assembles the module.
    pub fn finish(mut self) -> Result<SpirvKernel, SpirvError> {
        if let Some(f) = self.frames.last() {
            let what = match f {
                Frame::If { .. } => "an `if` is still open at the end of the kernel",
                Frame::Loop { .. } => "a loop is still open at the end of the kernel",
            };
            self.fail_contract(what.to_string());
        }
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        let r = self.b.ret();
        self.check_build(r);
        let r = self.b.end_function();
        self.check_build(r);
        let main = self.b.module_ref().functions.last().and_then(|f| f.def.as_ref()).and_then(|d| d.result_id).unwrap_or(0);

        // Shared memory: one array per dtype, sized by the largest reservation, and the staging
        // arrays of 16-byte vectors.
        let mut shared_bytes: u64 = 0;
        let shared: Vec<(DType, Word, u32)> = self.shared.iter().map(|(d, s)| (*d, s.var, s.len)).collect();
        for (dtype, var, len) in shared {
            let (elem, bytes) = self.shared_elem_ty(dtype);
            self.declare_workgroup_array(var, elem, len.max(1), format!("shared_{dtype}"));
            shared_bytes += len.max(1) as u64 * bytes as u64;
        }
        let staging: Vec<(DType, Word, u32)> = self.staging.iter().map(|(d, s)| (*d, s.var, s.len)).collect();
        for (dtype, var, len) in staging {
            let (_, bytes) = self.shared_elem_ty(dtype);
            let u = self.u32_ty();
            let v4 = self.vec_ty(u, 4);
            let vectors = (len as u64 * bytes as u64).div_ceil(16).max(1);
            self.declare_workgroup_array(var, v4, vectors as u32, format!("staging_{dtype}"));
            shared_bytes += vectors * 16;
        }

        // Access decorations, now that every use is known.
        for slot in self.buffers.iter().flatten() {
            let both = slot.views.len() > 1 && slot.written;
            for var in slot.views.iter().map(|&(_, v)| v) {
                if slot.access == Access::Read {
                    self.b.decorate(var, spirv::Decoration::NonWritable, []);
                }
                if slot.access == Access::Write && !slot.read {
                    self.b.decorate(var, spirv::Decoration::NonReadable, []);
                }
                if both {
                    self.b.decorate(var, spirv::Decoration::Aliased, []);
                }
            }
        }

        let used = self.used;
        // Any f16 value in a module (f16 arithmetic, or only a conversion that 16-bit storage
        // allows) asks for the f16 float controls where the target has them, not only an
        // f32 -> f16 rounding: without DenormPreserve for 16 bits a driver may flush an f16
        // subnormal it widens, which docs/semantics.md promises it keeps.
        let has_f16 = self.types.contains_key(&TypeKey::Float(16));
        let f16_rte = has_f16 && self.target.f16_rte;
        let mut caps = vec![spirv::Capability::Shader];
        for (on, cap) in [
            (used.int8, spirv::Capability::Int8),
            (used.int16, spirv::Capability::Int16),
            (used.int64, spirv::Capability::Int64),
            (used.float16, spirv::Capability::Float16),
            (used.storage8, spirv::Capability::StorageBuffer8BitAccess),
            (used.storage16, spirv::Capability::StorageBuffer16BitAccess),
            (used.shuffle, spirv::Capability::GroupNonUniform),
            (used.shuffle, spirv::Capability::GroupNonUniformShuffle),
            (used.atomic_float_add, spirv::Capability::AtomicFloat32AddEXT),
            (used.int64_atomics, spirv::Capability::Int64Atomics),
            (self.target.ieee_preserve, spirv::Capability::SignedZeroInfNanPreserve),
            (f16_rte, spirv::Capability::RoundingModeRTE),
            (f16_rte || self.target.f32_denorm_preserve, spirv::Capability::DenormPreserve),
            (used.coop, spirv::Capability::CooperativeMatrixKHR),
            (used.coop, spirv::Capability::VulkanMemoryModel),
            (used.coop_bf16, spirv::Capability::BFloat16TypeKHR),
            (used.coop_bf16, spirv::Capability::BFloat16CooperativeMatrixKHR),
        ] {
            if on {
                caps.push(cap);
            }
        }
        for cap in caps {
            self.b.capability(cap);
        }
        let version = SPIRV_VERSION.0 as u32 * 100 + SPIRV_VERSION.1 as u32;
        if used.storage8 && version < 105 {
            self.b.extension("SPV_KHR_8bit_storage");
        }
        if used.storage16 && version < 103 {
            self.b.extension("SPV_KHR_16bit_storage");
        }
        if used.atomic_float_add {
            self.b.extension("SPV_EXT_shader_atomic_float_add");
        }
        if used.coop {
            // The extension requires the Vulkan memory model in shaders. Under it a barrier
            // orders only non-private accesses: every workgroup-memory access is marked
            // NonPrivatePointer, and the barriers make the writes before them available and
            // visible (what GLSL's `shared` and `barrier()` become under that model).
            self.b.extension("SPV_KHR_cooperative_matrix");
            if used.coop_bf16 {
                self.b.extension("SPV_KHR_bfloat16");
            }
            self.b.memory_model(spirv::AddressingModel::Logical, spirv::MemoryModel::Vulkan);
            self.non_private_workgroup_accesses();
        }
        // From SPIR-V 1.4 the interface lists every global the entry point uses; before, only
        // Input and Output variables.
        let interface = if version >= 104 { self.interface.clone() } else { self.interface[..3].to_vec() };
        self.b.entry_point(spirv::ExecutionModel::GLCompute, main, "main", interface);
        self.b.execution_mode(main, spirv::ExecutionMode::LocalSize, [self.threads, 1, 1]);
        if self.target.ieee_preserve {
            // Without this a driver may assume no infinities or NaNs: NVIDIA's folds
            // `a < b ? a : b` into a min that drops NaNs, and `-inf` masks depend on infinities.
            self.b.execution_mode(main, spirv::ExecutionMode::SignedZeroInfNanPreserve, [32]);
            if has_f16 {
                self.b.execution_mode(main, spirv::ExecutionMode::SignedZeroInfNanPreserve, [16]);
            }
        }
        if self.target.f32_denorm_preserve {
            // f32 subnormals stay what they are (the interpreter's semantics); a driver may
            // flush them otherwise.
            self.b.execution_mode(main, spirv::ExecutionMode::DenormPreserve, [32]);
        }
        if f16_rte {
            // f32 -> f16 conversions (and f16 arithmetic) round to nearest even and keep
            // subnormals, as the interpreter's do.
            self.b.execution_mode(main, spirv::ExecutionMode::RoundingModeRTE, [16]);
            self.b.execution_mode(main, spirv::ExecutionMode::DenormPreserve, [16]);
        }

        let requirements = Requirements {
            float16: used.float16,
            int8: used.int8,
            int16: used.int16,
            int64: used.int64,
            storage8: used.storage8,
            storage16: used.storage16,
            subgroup_shuffle: used.shuffle,
            subgroup_arithmetic: false,
            subgroup_size: self.target.subgroup_size,
            atomic_float_add: used.atomic_float_add,
            int64_atomics: used.int64_atomics,
            shared_bytes: shared_bytes.min(u32::MAX as u64) as u32,
            f16_rte,
            denorm_preserve_f32: self.target.f32_denorm_preserve,
            cooperative_matrix: used.coop,
            cooperative_matrix_bf16: used.coop_bf16,
            cooperative_matrix2: false,
        };
        let t = &self.target;
        let mut missing = Vec::new();
        for (need, have, what) in [
            (used.float16, t.f16, "f16 arithmetic"),
            (used.int8, t.i8, "8-bit integers"),
            (used.int16, t.i16, "16-bit integers"),
            (used.int64, t.i64, "64-bit integers"),
            (used.shuffle, t.subgroup_ops.shuffle, "subgroup shuffles"),
        ] {
            if need && !have {
                missing.push(what.to_string());
            }
        }
        if shared_bytes > t.shared_memory_bytes as u64 {
            missing.push(format!("{shared_bytes} bytes of shared memory (the target has {})", t.shared_memory_bytes));
        }
        if !missing.is_empty() {
            return Err(SpirvError::Target { kernel: self.kernel.clone(), target: t.name.clone(), what: format!("it needs {}", missing.join(", ")) });
        }
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        let words = self.b.module().assemble();
        Ok(SpirvKernel {
            name: self.kernel,
            words,
            entry_point: "main".into(),
            threads: self.threads,
            bindings: self.bindings,
            push_constants: self.push_constants,
            push_constant_size: self.push_size,
            grid_fold: self.grid_fold,
            requirements,
        })
    }

    // ---- errors ----

    fn param_error(&self, param: &str, reason: String) -> SpirvError {
        SpirvError::Param { kernel: self.kernel.clone(), param: param.to_string(), reason }
    }

    fn builder_error(&self, err: rspirv::dr::Error) -> SpirvError {
        SpirvError::Builder { kernel: self.kernel.clone(), what: err.to_string() }
    }

    fn fail(&mut self, err: SpirvError) {
        if self.error.is_none() {
            self.error = Some(err);
        }
    }

    fn fail_contract(&mut self, what: String) {
        let err = SpirvError::Contract { kernel: self.kernel.clone(), what };
        self.fail(err);
    }

    fn fail_unsupported(&mut self, what: String) {
        let err = SpirvError::Unsupported { kernel: self.kernel.clone(), what };
        self.fail(err);
    }

    fn check_build<T: Default>(&mut self, r: Result<T, rspirv::dr::Error>) -> T {
        match r {
            Ok(t) => t,
            Err(err) => {
                let err = self.builder_error(err);
                self.fail(err);
                T::default()
            }
        }
    }

    /// Records a misuse when `v` does not hold `dtype`.
    fn expect(&mut self, v: SpirvValue, dtype: DType, what: &str) {
        if v.dtype != dtype {
            self.fail_contract(format!("{what} holds {} where {dtype} was declared", v.dtype));
        }
    }

    fn value(&self, id: Word, dtype: DType) -> SpirvValue {
        SpirvValue { id, dtype }
    }

    // ---- types and constants ----

    fn cached(&mut self, key: TypeKey) -> Word {
        if let Some(&t) = self.types.get(&key) {
            return t;
        }
        let t = match key {
            TypeKey::Int(w) => self.b.type_int(w, 0),
            TypeKey::Float(w) => self.b.type_float(w, None),
            TypeKey::BFloat16 => self.b.type_float(16, Some(spirv::FPEncoding::BFloat16KHR)),
            TypeKey::Bool => self.b.type_bool(),
            TypeKey::Vector(c, n) => self.b.type_vector(c, n),
            TypeKey::Pointer(class, pointee) => self.b.type_pointer(None, class, pointee),
            TypeKey::Coop(component, rows, cols, role) => {
                let (scope, rows, cols, role) = (self.c_u32(SCOPE_SUBGROUP), self.c_u32(rows), self.c_u32(cols), self.c_u32(role));
                let id = self.b.id();
                self.b.module_mut().types_global_values.push(Instruction::new(
                    Op::TypeCooperativeMatrixKHR,
                    None,
                    Some(id),
                    vec![Operand::IdRef(component), Operand::IdRef(scope), Operand::IdRef(rows), Operand::IdRef(cols), Operand::IdRef(role)],
                ));
                id
            }
        };
        self.types.insert(key, t);
        t
    }

    /// Marks every load and store through a workgroup pointer `NonPrivatePointer` and gives
    /// every workgroup barrier MakeAvailable and MakeVisible semantics (the Vulkan memory
    /// model's).
    fn non_private_workgroup_accesses(&mut self) {
        let plain = self.c_u32(SEMANTICS_BARRIER);
        let vmm = self.c_u32(SEMANTICS_BARRIER | SEMANTICS_MAKE_AVAILABLE | SEMANTICS_MAKE_VISIBLE);
        let wg = std::mem::take(&mut self.workgroup_ptrs);
        let non_private = || Operand::MemoryAccess(spirv::MemoryAccess::NON_PRIVATE_POINTER);
        for f in &mut self.b.module_mut().functions {
            for block in &mut f.blocks {
                for inst in &mut block.instructions {
                    let through_wg = matches!(inst.operands.first(), Some(Operand::IdRef(p)) if wg.contains(p));
                    match inst.class.opcode {
                        Op::Load if through_wg && inst.operands.len() == 1 => inst.operands.push(non_private()),
                        Op::Store if through_wg && inst.operands.len() == 2 => inst.operands.push(non_private()),
                        Op::ControlBarrier if inst.operands.get(2) == Some(&Operand::IdMemorySemantics(plain)) => {
                            inst.operands[2] = Operand::IdMemorySemantics(vmm)
                        }
                        _ => {}
                    }
                }
            }
        }
        self.workgroup_ptrs = wg;
    }

    /// The cooperative-matrix type of `instr`'s operand `role`, or `None` (with the error
    /// recorded) for components the module cannot hold.
    fn coop_ty(&mut self, instr: MatrixInstr, role: CoopRole) -> Option<Word> {
        let component = coop_component(instr, role);
        let c = match component {
            DType::F16 => self.f16_ty(),
            DType::F32 => self.f32_ty(),
            DType::BF16 => {
                self.used.coop_bf16 = true;
                self.cached(TypeKey::BFloat16)
            }
            d => {
                self.fail_unsupported(format!("cooperative matrices of {d}"));
                return None;
            }
        };
        let (rows, cols, use_) = match role {
            CoopRole::A => (instr.m, instr.k, 0),
            CoopRole::B => (instr.k, instr.n, 1),
            CoopRole::Acc => (instr.m, instr.n, 2),
        };
        self.used.coop = true;
        Some(self.cached(TypeKey::Coop(c, rows, cols, use_)))
    }

    fn ptr_ty(&mut self, class: spirv::StorageClass, pointee: Word) -> Word {
        self.cached(TypeKey::Pointer(class, pointee))
    }

    fn vec_ty(&mut self, component: Word, n: u32) -> Word {
        self.cached(TypeKey::Vector(component, n))
    }

    fn int_ty(&mut self, bits: u32) -> Word {
        match bits {
            8 => self.used.int8 = true,
            16 => self.used.int16 = true,
            64 => self.used.int64 = true,
            _ => {}
        }
        self.cached(TypeKey::Int(bits))
    }

    fn u32_ty(&mut self) -> Word {
        self.cached(TypeKey::Int(32))
    }

    fn f32_ty(&mut self) -> Word {
        self.cached(TypeKey::Float(32))
    }

    fn f16_ty(&mut self) -> Word {
        self.used.float16 = true;
        self.cached(TypeKey::Float(16))
    }

    fn bool_ty(&mut self) -> Word {
        self.cached(TypeKey::Bool)
    }

    /// The register type of `dtype`.
    fn ty(&mut self, d: DType) -> Word {
        match d {
            DType::I1 => self.bool_ty(),
            DType::I8 | DType::U8 => self.int_ty(8),
            DType::I16 => self.int_ty(16),
            DType::I64 => self.int_ty(64),
            DType::F16 => self.f16_ty(),
            DType::F32 => self.f32_ty(),
            _ => self.u32_ty(),
        }
    }

    /// The register type of `dtype` without declaring a capability: for results of width
    /// conversions, which 8/16-bit storage allows on its own (arithmetic declares it).
    /// The 8/16-bit storage capability (and extension) is declared with it: without a buffer
    /// of that width the module would otherwise hold the type with no capability allowing it.
    fn conv_ty(&mut self, d: DType) -> Word {
        match d {
            DType::I8 | DType::U8 => {
                self.used.storage8 = true;
                self.cached(TypeKey::Int(8))
            }
            DType::I16 => {
                self.used.storage16 = true;
                self.cached(TypeKey::Int(16))
            }
            d => self.ty(d),
        }
    }

    /// The element type of a storage buffer of `dtype` seen through `view`, and its array
    /// stride in bytes. 8- and 16-bit elements need only the storage capabilities as long as the
    /// values are converted to 32 bits after loading.
    fn storage_ty(&mut self, d: DType, view: View) -> (Word, u32) {
        match view {
            View::Bits => (self.u32_ty(), 4),
            View::Elem => {
                let t = match d {
                    DType::I1 | DType::I8 | DType::U8 => {
                        self.used.storage8 = true;
                        self.cached(TypeKey::Int(8))
                    }
                    DType::I16 | DType::BF16 => {
                        self.used.storage16 = true;
                        self.cached(TypeKey::Int(16))
                    }
                    DType::F16 => {
                        self.used.storage16 = true;
                        self.cached(TypeKey::Float(16))
                    }
                    DType::I64 => self.int_ty(64),
                    DType::F32 => self.f32_ty(),
                    _ => self.u32_ty(),
                };
                (t, d.size_bytes() as u32)
            }
            View::Vec(n) => {
                let bytes = n * d.size_bytes() as u32;
                let component = match d {
                    DType::F32 => self.f32_ty(),
                    DType::I64 => self.int_ty(64),
                    _ => self.u32_ty(),
                };
                let count = match d {
                    DType::F32 | DType::I32 | DType::U32 | DType::I64 => n,
                    _ => bytes / 4,
                };
                let t = if count == 1 { component } else { self.vec_ty(component, count) };
                (t, bytes)
            }
        }
    }

    /// Shared-memory element type and its size in bytes (`i1` as a 32-bit word).
    fn shared_elem_ty(&mut self, d: DType) -> (Word, u32) {
        match d {
            DType::I1 => (self.u32_ty(), 4),
            DType::BF16 => (self.int_ty(16), 2),
            d => (self.ty(d), d.size_bytes() as u32),
        }
    }

    fn push_member_ty(&mut self, d: DType) -> Word {
        match d {
            DType::I64 => self.int_ty(64),
            DType::F32 => self.f32_ty(),
            _ => self.u32_ty(),
        }
    }

    fn constant_bits(&mut self, ty: Word, bits: u64, wide: bool) -> Word {
        if let Some(&id) = self.consts.get(&(ty, bits)) {
            return id;
        }
        let id = if wide { self.b.constant_bit64(ty, bits) } else { self.b.constant_bit32(ty, bits as u32) };
        self.consts.insert((ty, bits), id);
        self.const_bits.insert(id, bits);
        let is = |w: u32| self.types.get(&TypeKey::Float(w)) == Some(&ty);
        let sign_bit = if is(32) {
            Some(31)
        } else if is(16) {
            Some(15)
        } else {
            None
        };
        if let Some(sb) = sign_bit {
            if bits & !(1u64 << sb) == 0 {
                self.zeros.insert(id, bits >> sb == 1);
            }
        }
        id
    }

    /// `a op b` of two constants this emitter made, as the constant the interpreter computes:
    /// floats where operands and result are finite and normal (a subnormal is the device's to
    /// flush), integers where the interpreter reports no fault; `None` otherwise.
    fn fold_binary(&mut self, op: BinaryOp, dtype: DType, a: Word, b: Word) -> Option<Word> {
        let (x, y) = (self.const_value(dtype, a)?, self.const_value(dtype, b)?);
        let r = match dtype {
            DType::F32 | DType::F16 => {
                let normal = |v: f32| v.is_finite() && !subnormal(dtype, v);
                let (x, y) = (x.as_f64() as f32, y.as_f64() as f32);
                let r = tilekit_core::interp::binary_float(op, dtype, x, y);
                if !(normal(x) && normal(y) && normal(r)) {
                    return None;
                }
                Scalar::Float(f64::from(r))
            }
            DType::I8 | DType::U8 | DType::I16 | DType::I32 | DType::U32 | DType::I64 => {
                let (Scalar::Int(x), Scalar::Int(y)) = (x, y) else { return None };
                Scalar::Int(tilekit_core::interp::binary_int(op, dtype, x, y).ok()?)
            }
            _ => return None,
        };
        Some(self.const_of(dtype, r))
    }

    /// The value of `x` as dtype `d` where `x` is a constant this emitter made.
    fn const_value(&self, d: DType, x: Word) -> Option<Scalar> {
        let bits = *self.const_bits.get(&x)?;
        Some(match d {
            DType::F32 => Scalar::Float(f64::from(f32::from_bits(bits as u32))),
            DType::F16 => Scalar::Float(f16::from_bits(bits as u16).to_f64()),
            DType::BF16 => Scalar::Float(bf16::from_bits(bits as u16).to_f64()),
            DType::I1 => Scalar::Int((bits != 0) as i64),
            d => {
                let w = int_width(d);
                Scalar::Int(if is_signed(d) && w < 64 { ((bits << (64 - w)) as i64) >> (64 - w) } else { bits as i64 })
            }
        })
    }

    fn c_u32(&mut self, v: u32) -> Word {
        let t = self.u32_ty();
        self.constant_bits(t, v as u64, false)
    }

    fn c_f32(&mut self, v: f32) -> Word {
        let t = self.f32_ty();
        self.constant_bits(t, v.to_bits() as u64, false)
    }

    fn c_bool(&mut self, v: bool) -> Word {
        let t = self.bool_ty();
        if let Some(&id) = self.consts.get(&(t, v as u64)) {
            return id;
        }
        let id = if v { self.b.constant_true(t) } else { self.b.constant_false(t) };
        self.consts.insert((t, v as u64), id);
        self.const_bits.insert(id, v as u64);
        id
    }

    /// An integer constant of register dtype `d` holding `v` wrapped to its width.
    fn c_int(&mut self, d: DType, v: i64) -> Word {
        let w = int_width(d);
        let t = self.int_ty(w);
        let bits = if w == 64 { v as u64 } else { (v as u64) & ((1u64 << w) - 1) };
        self.constant_bits(t, bits, w == 64)
    }

    fn c_f16(&mut self, v: f16) -> Word {
        let t = self.f16_ty();
        self.constant_bits(t, v.to_bits() as u64, false)
    }

    fn const_of(&mut self, d: DType, s: Scalar) -> Word {
        match d {
            DType::I1 => {
                let b = match s {
                    Scalar::Bool(b) => b,
                    Scalar::Int(i) => i != 0,
                    Scalar::Float(f) => f != 0.0,
                };
                self.c_bool(b)
            }
            DType::F32 => self.c_f32(s.as_f64() as f32),
            // Constants round through f32 first, as the interpreter's do.
            DType::F16 => self.c_f16(f16::from_f32(s.as_f64() as f32)),
            DType::BF16 => self.c_u32(bf16::from_f32(s.as_f64() as f32).to_bits() as u32),
            d => {
                let i = match s {
                    Scalar::Bool(b) => b as i64,
                    Scalar::Int(i) => i,
                    Scalar::Float(f) => f as i64,
                };
                self.c_int(d, i)
            }
        }
    }

    /// The constant `v` of register dtype `d` (integers, floats and bf16).
    fn c_num(&mut self, d: DType, v: f64) -> Word {
        if d.is_float() {
            self.const_of(d, Scalar::Float(v))
        } else {
            self.const_of(d, Scalar::Int(v as i64))
        }
    }

    // ---- instructions ----

    fn push_inst(&mut self, inst: Instruction) {
        let r = self.b.insert_into_block(InsertPoint::End, inst);
        self.check_build(r);
    }

    fn emit(&mut self, op: Op, ty: Word, args: &[Word]) -> Word {
        let id = self.b.id();
        self.push_inst(Instruction::new(op, Some(ty), Some(id), args.iter().map(|&a| Operand::IdRef(a)).collect()));
        id
    }

    fn emit_with_id(&mut self, id: Word, op: Op, ty: Word, args: &[Word]) {
        self.push_inst(Instruction::new(op, Some(ty), Some(id), args.iter().map(|&a| Operand::IdRef(a)).collect()));
    }

    fn ext(&mut self, op: Gl, ty: Word, args: &[Word]) -> Word {
        let id = self.b.id();
        let mut ops = vec![Operand::IdRef(self.glsl), Operand::LiteralExtInstInteger(op as u32)];
        ops.extend(args.iter().map(|&a| Operand::IdRef(a)));
        self.push_inst(Instruction::new(Op::ExtInst, Some(ty), Some(id), ops));
        id
    }

    fn extract(&mut self, ty: Word, composite: Word, index: u32) -> Word {
        let id = self.b.id();
        self.push_inst(Instruction::new(Op::CompositeExtract, Some(ty), Some(id), vec![Operand::IdRef(composite), Operand::LiteralBit32(index)]));
        id
    }

    fn global_var(&mut self, ptr_ty: Word, class: spirv::StorageClass) -> Word {
        let id = self.b.id();
        self.b.module_mut().types_global_values.push(Instruction::new(Op::Variable, Some(ptr_ty), Some(id), vec![Operand::StorageClass(class)]));
        id
    }

    fn begin_block(&mut self, label: Word) {
        let r = self.b.begin_block(Some(label));
        self.check_build(r);
        self.cur_block = label;
    }

    fn branch(&mut self, target: Word) {
        let r = self.b.branch(target);
        self.check_build(r);
    }

    // 32-bit unsigned helpers used by the conversions.
    fn u_op(&mut self, op: Op, a: Word, b: Word) -> Word {
        let t = self.u32_ty();
        self.emit(op, t, &[a, b])
    }
    fn u_opk(&mut self, op: Op, a: Word, k: u32) -> Word {
        let k = self.c_u32(k);
        self.u_op(op, a, k)
    }
    fn b_op(&mut self, op: Op, a: Word, b: Word) -> Word {
        let t = self.bool_ty();
        self.emit(op, t, &[a, b])
    }
    fn sel(&mut self, ty: Word, c: Word, a: Word, b: Word) -> Word {
        self.emit(Op::Select, ty, &[c, a, b])
    }
    fn sel_u32(&mut self, c: Word, a: Word, b: Word) -> Word {
        let t = self.u32_ty();
        self.sel(t, c, a, b)
    }
    fn f_op(&mut self, op: Op, a: Word, b: Word) -> Word {
        let t = self.f32_ty();
        self.emit(op, t, &[a, b])
    }
    fn bitcast(&mut self, ty: Word, x: Word) -> Word {
        self.emit(Op::Bitcast, ty, &[x])
    }

    // ---- conversions ----

    /// f16 value from 16 bits in the low half of a u32 (through a 2 x f16 vector: no 16-bit
    /// integer type needed).
    fn f16_from_bits(&mut self, bits: Word) -> Word {
        let h = self.f16_ty();
        let v2 = self.vec_ty(h, 2);
        let v = self.bitcast(v2, bits);
        self.extract(h, v, 0)
    }

    /// The bits of an f16 value in the low half of a u32.
    fn f16_to_bits(&mut self, x: Word) -> Word {
        let h = self.f16_ty();
        let v2 = self.vec_ty(h, 2);
        let zero = self.c_f16(f16::ZERO);
        let v = self.emit(Op::CompositeConstruct, v2, &[x, zero]);
        let t = self.u32_ty();
        self.bitcast(t, v)
    }

    /// f32 bits -> f16 bits, round to nearest even, NaN stays NaN (as `half::f16::from_f32`).
    fn f32_bits_to_f16_bits(&mut self, x: Word) -> Word {
        let a = self.u_opk(Op::BitwiseAnd, x, 0x7fff_ffff);
        let hi = self.u_opk(Op::ShiftRightLogical, x, 16);
        let sign = self.u_opk(Op::BitwiseAnd, hi, 0x8000);
        // Inf and NaN (a quiet NaN keeps the top of its payload).
        let k = self.c_u32(0x7f80_0000);
        let is_nan = self.b_op(Op::UGreaterThan, a, k);
        let a13 = self.u_opk(Op::ShiftRightLogical, a, 13);
        let payload = self.u_opk(Op::BitwiseAnd, a13, 0x3ff);
        let nan = self.u_opk(Op::BitwiseOr, payload, 0x7e00);
        let inf = self.c_u32(0x7c00);
        let special = self.sel_u32(is_nan, nan, inf);
        // Normal results: rebias the exponent, round on the 13 dropped bits.
        let lsb = self.u_opk(Op::BitwiseAnd, a13, 1);
        let n = self.u_opk(Op::ISub, a, 0x3800_0000);
        let n = self.u_opk(Op::IAdd, n, 0xfff);
        let n = self.u_op(Op::IAdd, n, lsb);
        let normal = self.u_opk(Op::ShiftRightLogical, n, 13);
        // Subnormal results: shift the full significand right by 126 - exponent (>= 14), round.
        let e = self.u_opk(Op::ShiftRightLogical, a, 23);
        let k112 = self.c_u32(112);
        let e_lt = self.b_op(Op::ULessThan, e, k112);
        let e = self.sel_u32(e_lt, e, k112);
        let k126 = self.c_u32(126);
        let sh = self.u_op(Op::ISub, k126, e);
        let k31 = self.c_u32(31);
        let sh_lt = self.b_op(Op::ULessThan, sh, k31);
        let sh = self.sel_u32(sh_lt, sh, k31);
        let m = self.u_opk(Op::BitwiseAnd, a, 0x007f_ffff);
        let m = self.u_opk(Op::BitwiseOr, m, 0x0080_0000);
        let q = self.u_op(Op::ShiftRightLogical, m, sh);
        let one = self.c_u32(1);
        let sh1 = self.u_op(Op::ISub, sh, one);
        let rb = self.u_op(Op::ShiftLeftLogical, one, sh1);
        let rb2 = self.u_op(Op::ShiftLeftLogical, one, sh);
        let mask = self.u_op(Op::ISub, rb2, one);
        let rem = self.u_op(Op::BitwiseAnd, m, mask);
        let gt = self.b_op(Op::UGreaterThan, rem, rb);
        let eq = self.b_op(Op::IEqual, rem, rb);
        let qodd = self.u_op(Op::BitwiseAnd, q, one);
        let odd = self.b_op(Op::IEqual, qodd, one);
        let tie_up = self.b_op(Op::LogicalAnd, eq, odd);
        let up = self.b_op(Op::LogicalOr, gt, tie_up);
        let zero = self.c_u32(0);
        let inc = self.sel_u32(up, one, zero);
        let sub = self.u_op(Op::IAdd, q, inc);
        // Select by range of |x|.
        let k = self.c_u32(0x3880_0000);
        let is_sub = self.b_op(Op::ULessThan, a, k);
        let r = self.sel_u32(is_sub, sub, normal);
        let k = self.c_u32(0x4780_0000);
        let is_big = self.b_op(Op::UGreaterThanEqual, a, k);
        let r = self.sel_u32(is_big, inf, r);
        let k = self.c_u32(0x7f80_0000);
        let is_special = self.b_op(Op::UGreaterThanEqual, a, k);
        let r = self.sel_u32(is_special, special, r);
        self.u_op(Op::BitwiseOr, r, sign)
    }

    /// An f16 as f32, exactly, from its bits (no `OpFConvert` a driver could pair with the one
    /// that rounded it).
    fn f16_to_f32_by_bits(&mut self, x: Word) -> Word {
        let f = self.f32_ty();
        let u = self.u32_ty();
        let bt = self.bool_ty();
        let h = self.f16_to_bits(x);
        let h = self.u_opk(Op::BitwiseAnd, h, 0xFFFF);
        let sign = self.u_opk(Op::BitwiseAnd, h, 0x8000);
        let sign = self.u_opk(Op::ShiftLeftLogical, sign, 16);
        let e = self.u_opk(Op::ShiftRightLogical, h, 10);
        let e = self.u_opk(Op::BitwiseAnd, e, 0x1F);
        let m = self.u_opk(Op::BitwiseAnd, h, 0x3FF);
        let m13 = self.u_opk(Op::ShiftLeftLogical, m, 13);
        // Normal: exponent rebiased by 127 - 15.
        let e_f32 = self.u_opk(Op::IAdd, e, 112);
        let e_f32 = self.u_opk(Op::ShiftLeftLogical, e_f32, 23);
        let normal = self.u_op(Op::BitwiseOr, e_f32, m13);
        // Infinity and NaN keep their mantissa.
        let special = self.u_opk(Op::BitwiseOr, m13, 0x7F80_0000);
        // Zero and subnormal: m * 2^-24, exact in f32.
        let mf = self.emit(Op::ConvertUToF, f, &[m]);
        let scale = self.c_f32(2f32.powi(-24));
        let small = self.emit(Op::FMul, f, &[mf, scale]);
        let small = self.bitcast(u, small);
        let max_e = self.c_u32(31);
        let zero_e = self.c_u32(0);
        let is_special = self.emit(Op::IEqual, bt, &[e, max_e]);
        let is_small = self.emit(Op::IEqual, bt, &[e, zero_e]);
        let mag = self.sel(u, is_special, special, normal);
        let mag = self.sel(u, is_small, small, mag);
        let bits = self.u_op(Op::BitwiseOr, mag, sign);
        self.bitcast(f, bits)
    }

    /// A value of register dtype `from` (any but `i1`) as f32.
    fn widen_to_f32(&mut self, from: DType, x: Word) -> Word {
        let f = self.f32_ty();
        match from {
            DType::F32 => x,
            // A constant zero stays a known constant (see `with_constant_zero`).
            DType::F16 if self.zeros.contains_key(&x) => {
                let negative = self.zeros[&x];
                self.c_f32(if negative { -0.0 } else { 0.0 })
            }
            DType::F16 if self.rounded_f16.contains(&x) => self.f16_to_f32_by_bits(x),
            DType::F16 => self.emit(Op::FConvert, f, &[x]),
            // A constant converts to a constant, which `with_constant_zero` recognises when it
            // is a zero (a driver folds the shift of a constant and then `x + 0` to `x`).
            DType::BF16 if self.const_bits.contains_key(&x) => {
                let bits = self.const_bits[&x] as u32;
                self.c_f32(f32::from_bits(bits << 16))
            }
            DType::BF16 => {
                let s = self.u_opk(Op::ShiftLeftLogical, x, 16);
                self.bitcast(f, s)
            }
            DType::I1 => {
                let one = self.c_f32(1.0);
                let zero = self.c_f32(0.0);
                self.sel(f, x, one, zero)
            }
            // 8- and 16-bit integers widen to 32 bits first: without the Int8/Int16
            // capabilities only width conversions may take them.
            d if int_width(d) < 32 && is_signed(d) => {
                let w = self.sign_extend_narrow(d, x);
                self.emit(Op::ConvertSToF, f, &[w])
            }
            d if int_width(d) < 32 => {
                let u = self.u32_ty();
                let w = self.emit(Op::UConvert, u, &[x]);
                self.emit(Op::ConvertUToF, f, &[w])
            }
            d if is_signed(d) => self.emit(Op::ConvertSToF, f, &[x]),
            _ => self.emit(Op::ConvertUToF, f, &[x]),
        }
    }

    /// A 32- or 64-bit integer as f32 rounded to odd (truncated, lowest bit set when inexact):
    /// rounding that again to bf16's 8 bits is then the single correctly rounded conversion.
    fn int_to_f32_round_odd(&mut self, from: DType, x: Word) -> Word {
        let t = self.ty(from);
        let u = self.u32_ty();
        let f = self.f32_ty();
        let wide = int_width(from) == 64;
        let zero = self.c_int(from, 0);
        let neg = if is_signed(from) { self.b_op(Op::SLessThan, x, zero) } else { self.c_bool(false) };
        let mag = if is_signed(from) { self.wrapping_abs_neg(false, from, x) } else { x };
        let msb = if wide {
            let lo = self.emit(Op::UConvert, u, &[mag]);
            let k32 = self.c_int(DType::I64, 32);
            let hi64 = self.emit(Op::ShiftRightLogical, t, &[mag, k32]);
            let hi = self.emit(Op::UConvert, u, &[hi64]);
            let z = self.c_u32(0);
            let hi_nz = self.b_op(Op::INotEqual, hi, z);
            let mh = self.ext(Gl::FindUMsb, u, &[hi]);
            let mh = self.u_opk(Op::IAdd, mh, 32);
            let ml = self.ext(Gl::FindUMsb, u, &[lo]);
            self.sel_u32(hi_nz, mh, ml)
        } else {
            self.ext(Gl::FindUMsb, u, &[mag])
        };
        // FindUMsb(0) is -1, which the signed compare keeps below 23.
        let k23 = self.c_u32(23);
        let big = self.b_op(Op::SGreaterThan, msb, k23);
        let excess = self.u_op(Op::ISub, msb, k23);
        let z = self.c_u32(0);
        let sh = self.sel_u32(big, excess, z);
        let sh_t = if wide { self.emit(Op::UConvert, t, &[sh]) } else { sh };
        let one = self.c_int(from, 1);
        let top = self.emit(Op::ShiftLeftLogical, t, &[one, sh_t]);
        let mask = self.emit(Op::ISub, t, &[top, one]);
        let dropped = self.emit(Op::BitwiseAnd, t, &[mag, mask]);
        let sticky = self.b_op(Op::INotEqual, dropped, zero);
        let q = self.emit(Op::ShiftRightLogical, t, &[mag, sh_t]);
        let jam = self.sel(t, sticky, one, zero);
        let q = self.emit(Op::BitwiseOr, t, &[q, jam]);
        let q = if wide { self.emit(Op::UConvert, u, &[q]) } else { q };
        let qf = self.emit(Op::ConvertUToF, f, &[q]);
        let r = self.ext(Gl::Ldexp, f, &[qf, sh]);
        let nr = self.emit(Op::FNegate, f, &[r]);
        self.sel(f, neg, nr, r)
    }

    /// An f32 as a value of float dtype `to`, rounded to nearest even.
    fn round_from_f32(&mut self, to: DType, x: Word) -> Word {
        if let (DType::F16, Some(&negative)) = (to, self.zeros.get(&x)) {
            return self.c_f16(if negative { f16::NEG_ZERO } else { f16::ZERO });
        }
        match to {
            DType::F16 if self.target.f16_rte => {
                // Exact under the RoundingModeRTE and DenormPreserve modes `finish` declares.
                self.used.float16 = true;
                let h = self.f16_ty();
                let r = self.emit(Op::FConvert, h, &[x]);
                self.rounded_f16.insert(r);
                r
            }
            DType::F16 => {
                let t = self.u32_ty();
                let bits = self.bitcast(t, x);
                let h = self.f32_bits_to_f16_bits(bits);
                self.f16_from_bits(h)
            }
            DType::BF16 => {
                // The NaN test as one float instruction where the module keeps NaNs, else on
                // the bits.
                let v = self.value(x, DType::F32);
                let nan = if self.target.ieee_preserve {
                    let bt = self.bool_ty();
                    let n = self.emit(Op::IsNan, bt, &[x]);
                    self.value(n, DType::I1)
                } else {
                    legalize::is_nan(self, v)
                };
                let top = legalize::bf16_in_high_half(self, v, nan).id;
                let bits = self.u_opk(Op::ShiftRightLogical, top, 16);
                self.bf16_high.insert(bits, top);
                bits
            }
            _ => x,
        }
    }

    /// f32 -> integer dtype `to` (not `i1`): NaN -> 0, clamp, truncate toward zero
    /// ([`legalize::f32_to_int`] around the driver's conversion).
    fn f32_to_int(&mut self, x: Word, to: DType) -> Word {
        let x = self.value(x, DType::F32);
        let r = legalize::f32_to_int(self, x, to, |me, c| {
            let w = int_width(to);
            let wide = if w == 64 { 64 } else { 32 };
            let it = me.int_ty(wide);
            let op = if is_signed(to) { Op::ConvertFToS } else { Op::ConvertFToU };
            let mut r = me.emit(op, it, &[c.id]);
            if w < 32 {
                let t = me.conv_ty(to);
                r = me.emit(Op::UConvert, t, &[r]);
            }
            me.value(r, to)
        });
        r.id
    }

    fn unpack_push_slot(&mut self, d: DType, raw: Word) -> Word {
        match d {
            DType::I1 => {
                let zero = self.c_u32(0);
                self.b_op(Op::INotEqual, raw, zero)
            }
            DType::I8 | DType::U8 | DType::I16 => {
                let t = self.conv_ty(d);
                self.emit(Op::UConvert, t, &[raw])
            }
            DType::F16 => self.f16_from_bits(raw),
            _ => raw,
        }
    }

    // ---- memory ----

    /// The variable of buffer parameter `param` seen through `view`, declared on first use,
    /// and the view's element type.
    fn buffer_var(&mut self, param: u32, dtype: DType, view: View, what: &str) -> Option<(Word, Word)> {
        let Some(Some(slot)) = self.buffers.get(param as usize) else {
            self.fail_contract(format!("{what}: parameter {param} is not a buffer"));
            return None;
        };
        if slot.dtype != dtype {
            let msg = format!("{what}: buffer `{}` holds {}, accessed as {dtype}", slot.name, slot.dtype);
            self.fail_contract(msg);
            return None;
        }
        let existing = slot.views.iter().find(|(v, _)| *v == view).map(|&(_, var)| var);
        let (binding, name) = (slot.binding, slot.name.clone());
        let (elem, stride) = self.storage_ty(dtype, view);
        if let Some(var) = existing {
            return Some((var, elem));
        }
        let rt = self.b.type_runtime_array(elem);
        if self.strided.insert(rt) {
            self.b.decorate(rt, spirv::Decoration::ArrayStride, [Operand::LiteralBit32(stride)]);
        }
        let st = match self.buffer_structs.get(&rt) {
            Some(&st) => st,
            None => {
                let st = self.b.type_struct([rt]);
                self.b.decorate(st, spirv::Decoration::Block, []);
                self.b.member_decorate(st, 0, spirv::Decoration::Offset, [Operand::LiteralBit32(0)]);
                self.buffer_structs.insert(rt, st);
                st
            }
        };
        let p = self.ptr_ty(spirv::StorageClass::StorageBuffer, st);
        let var = self.global_var(p, spirv::StorageClass::StorageBuffer);
        self.b.decorate(var, spirv::Decoration::DescriptorSet, [Operand::LiteralBit32(0)]);
        self.b.decorate(var, spirv::Decoration::Binding, [Operand::LiteralBit32(binding)]);
        self.b.name(
            var,
            match view {
                View::Elem => name,
                View::Bits => format!("{name}_bits"),
                View::Vec(n) => format!("{name}_v{n}"),
            },
        );
        self.interface.push(var);
        if let Some(Some(slot)) = self.buffers.get_mut(param as usize) {
            slot.views.push((view, var));
        }
        Some((var, elem))
    }

    fn mark_access(&mut self, param: u32, read: bool, write: bool, what: &str) {
        let Some(Some(slot)) = self.buffers.get_mut(param as usize) else {
            return;
        };
        slot.read |= read;
        slot.written |= write;
        let (name, access) = (slot.name.clone(), slot.access);
        if write && !access.can_write() {
            self.fail_contract(format!("{what} writes buffer `{name}`, declared {}", access.name()));
        }
        if read && !access.can_read() && !write {
            self.fail_contract(format!("{what} reads buffer `{name}`, declared {}", access.name()));
        }
    }

    fn index_id(&mut self, index: SpirvValue, index_dtype: DType, what: &str) -> Word {
        self.expect(index, index_dtype, what);
        if !matches!(index_dtype, DType::I32 | DType::U32 | DType::I64) {
            self.fail_contract(format!("{what}: index dtype {index_dtype} (i32, u32 or i64 expected)"));
        }
        index.id
    }

    /// Whether `n` elements of `dtype` make one vector access here: a power of two of at least
    /// two elements, whole u32 words for 16-bit dtypes, at most four components.
    fn vector_ok(&self, dtype: DType, n: u32) -> bool {
        n >= 2
            && n.is_power_of_two()
            && n <= self.max_vector(dtype)
            && match dtype.size_bytes() {
                1 => dtype != DType::I1 && n >= 4 && n / 4 <= 4,
                2 => n / 2 <= 4,
                4 | 8 => n <= 4,
                _ => false,
            }
    }

    /// The index of the `n`-element vector starting at element `index` (a multiple of `n`).
    fn vector_index(&mut self, index: SpirvValue, index_dtype: DType, n: u32, what: &str) -> Word {
        let id = self.index_id(index, index_dtype, what);
        // Indices are in bounds, so non-negative: a logical shift divides.
        let shift = self.const_of(index_dtype, Scalar::Int(n.trailing_zeros() as i64));
        let t = self.ty(index_dtype);
        self.emit(Op::ShiftRightLogical, t, &[id, shift])
    }

    /// Values of `dtype` (ids) as the words a vector of 32-bit components holds: 32- and 64-bit
    /// values as they are, 16-bit ones two to a word and 8-bit ones four (the first lowest).
    fn pack_words(&mut self, dtype: DType, ids: Vec<Word>) -> Vec<Word> {
        match dtype {
            DType::F32 | DType::I32 | DType::U32 | DType::I64 => ids,
            DType::F16 => {
                let h = self.f16_ty();
                let (v2, u) = (self.vec_ty(h, 2), self.u32_ty());
                ids.chunks(2)
                    .map(|p| {
                        let pair = self.emit(Op::CompositeConstruct, v2, p);
                        self.bitcast(u, pair)
                    })
                    .collect()
            }
            DType::BF16 => ids
                .chunks(2)
                .map(|p| {
                    // Both rounded here: the low one's register form has its upper half clear,
                    // the high one's bf16 is already where the word wants it.
                    if let (true, Some(&b)) = (self.bf16_high.contains_key(&p[0]), self.bf16_high.get(&p[1])) {
                        let (a, b) = (self.value(p[0], DType::U32), self.value(b, DType::U32));
                        return legalize::bf16_pack_high_halves(self, a, b).id;
                    }
                    let lo = self.u_opk(Op::BitwiseAnd, p[0], 0xFFFF);
                    let hi = self.u_opk(Op::ShiftLeftLogical, p[1], 16);
                    self.u_op(Op::BitwiseOr, lo, hi)
                })
                .collect(),
            DType::I8 | DType::U8 => {
                let u = self.u32_ty();
                ids.chunks(4)
                    .map(|p| {
                        let mut word = self.emit(Op::UConvert, u, &[p[0]]);
                        for (k, &b) in p.iter().enumerate().skip(1) {
                            let b = self.emit(Op::UConvert, u, &[b]);
                            let b = self.u_opk(Op::ShiftLeftLogical, b, 8 * k as u32);
                            word = self.u_op(Op::BitwiseOr, word, b);
                        }
                        word
                    })
                    .collect()
            }
            _ => {
                let u = self.u32_ty();
                ids.chunks(2)
                    .map(|p| {
                        let lo = self.emit(Op::UConvert, u, &[p[0]]);
                        let hi = self.emit(Op::UConvert, u, &[p[1]]);
                        let hi = self.u_opk(Op::ShiftLeftLogical, hi, 16);
                        self.u_op(Op::BitwiseOr, lo, hi)
                    })
                    .collect()
            }
        }
    }

    /// The components of a loaded vector view (`raw` itself when it is one word).
    fn vector_parts(&mut self, raw: Word, dtype: DType, n: u32) -> Vec<Word> {
        let (component, count) = match dtype {
            DType::F32 => (self.f32_ty(), n),
            DType::I64 => (self.int_ty(64), n),
            DType::I32 | DType::U32 => (self.u32_ty(), n),
            _ => (self.u32_ty(), n * dtype.size_bytes() as u32 / 4),
        };
        if count == 1 {
            return vec![raw];
        }
        (0..count).map(|k| self.extract(component, raw, k)).collect()
    }

    /// Pointer to element `index` of `buffer` seen through `view`.
    fn element_ptr(&mut self, buffer: u32, dtype: DType, index: Word, view: View, what: &str) -> Option<(Word, Word)> {
        let (var, elem) = self.buffer_var(buffer, dtype, view, what)?;
        let p = self.ptr_ty(spirv::StorageClass::StorageBuffer, elem);
        let zero = self.c_u32(0);
        Some((self.emit(Op::AccessChain, p, &[var, zero, index]), elem))
    }

    /// Pointer to the 16-byte vector of the staging array of `dtype` that starts at element
    /// `index` (`per` elements to a vector, `index` a multiple of it), and the vector type.
    fn staging_ptr(&mut self, dtype: DType, index: SpirvValue, per: usize, what: &str) -> Option<(Word, Word)> {
        self.expect(index, DType::I32, what);
        if !matches!(dtype, DType::F16 | DType::BF16) || per as u32 * self.shared_elem_ty(dtype).1 != 16 {
            self.fail_contract(format!("{what}: staging holds 16 bytes of f16 or bf16 per access, not {per} x {dtype}"));
            return None;
        }
        let Some(slot) = self.staging.get(&dtype) else {
            self.fail_contract(format!("{what}: no staging array reserved for {dtype}"));
            return None;
        };
        let var = slot.var;
        let vindex = self.vector_index(index, DType::I32, per as u32, what);
        let u = self.u32_ty();
        let v4 = self.vec_ty(u, 4);
        let p = self.ptr_ty(spirv::StorageClass::Workgroup, v4);
        let ptr = self.emit(Op::AccessChain, p, &[var, vindex]);
        self.workgroup_ptrs.insert(ptr);
        Some((ptr, v4))
    }

    /// A cooperative matrix of type `ty` loaded through workgroup pointer `ptr`, rows (or
    /// columns) `stride` pointees apart.
    fn coop_load_at(&mut self, ty: Word, component: DType, ptr: Word, stride: u32, col_major: bool) -> Option<SpirvValue> {
        let (layout, stride) = (self.c_u32(u32::from(col_major)), self.c_u32(stride));
        let id = self.b.id();
        self.push_inst(Instruction::new(
            Op::CooperativeMatrixLoadKHR,
            Some(ty),
            Some(id),
            vec![
                Operand::IdRef(ptr),
                Operand::IdRef(layout),
                Operand::IdRef(stride),
                Operand::MemoryAccess(spirv::MemoryAccess::NON_PRIVATE_POINTER),
            ],
        ));
        self.coop_types.insert(id, ty);
        Some(self.value(id, component))
    }

    /// Declares `var`, a workgroup array of `len` elements of type `elem`, in the entry point's
    /// interface.
    fn declare_workgroup_array(&mut self, var: Word, elem: Word, len: u32, name: String) {
        let n = self.c_u32(len);
        let arr = self.b.type_array(elem, n);
        let p = self.b.type_pointer(None, spirv::StorageClass::Workgroup, arr);
        self.b.module_mut().types_global_values.push(Instruction::new(
            Op::Variable,
            Some(p),
            Some(var),
            vec![Operand::StorageClass(spirv::StorageClass::Workgroup)],
        ));
        self.b.name(var, name);
        self.interface.push(var);
    }

    fn shared_ptr(&mut self, dtype: DType, index: SpirvValue, what: &str) -> Option<(Word, Word)> {
        self.expect(index, DType::I32, what);
        let Some(slot) = self.shared.get(&dtype) else {
            self.fail_contract(format!("{what}: no shared memory reserved for {dtype}"));
            return None;
        };
        let var = slot.var;
        let (elem, _) = self.shared_elem_ty(dtype);
        let p = self.ptr_ty(spirv::StorageClass::Workgroup, elem);
        let ptr = self.emit(Op::AccessChain, p, &[var, index.id]);
        self.workgroup_ptrs.insert(ptr);
        Some((ptr, elem))
    }

    // ---- arithmetic pieces ----

    /// `a` and `b` of integer dtype `d` as operands of an ordering: 8- and 16-bit values widened
    /// to 32 bits explicitly. NVIDIA's driver compares narrow values as the 32-bit registers
    /// that hold them, which after a truncation (a narrowed -(-32768), a value unpacked from a
    /// shuffle) are not the sign extension it assumes: a `reduce min` of i16 returned -32766.
    fn ordered_operands(&mut self, d: DType, a: Word, b: Word) -> (Word, Word) {
        match int_width(d) {
            8 | 16 if is_signed(d) => (self.sign_extend_narrow(d, a), self.sign_extend_narrow(d, b)),
            8 | 16 => {
                let u = self.u32_ty();
                (self.emit(Op::UConvert, u, &[a]), self.emit(Op::UConvert, u, &[b]))
            }
            _ => (a, b),
        }
    }

    fn int_min_max(&mut self, op: BinaryOp, d: DType, a: Word, b: Word) -> Word {
        let lt = if is_signed(d) { Op::SLessThan } else { Op::ULessThan };
        let (wa, wb) = self.ordered_operands(d, a, b);
        let c = self.b_op(lt, wa, wb);
        let t = self.ty(d);
        if op == BinaryOp::Max {
            self.sel(t, c, b, a)
        } else {
            self.sel(t, c, a, b)
        }
    }

    /// |x| (or, with `neg`, -x) of the signed integer `x` of dtype `d`, MIN wrapping to itself.
    /// NVIDIA's driver takes an abs it recognises (`x < 0 ? -x : x`, `(x ^ s) - s`) as
    /// non-negative and folds `abs(x) < 0` to false: abs is written as a form it does not take
    /// for one. 8- and 16-bit values are negated in 32 bits and truncated.
    fn wrapping_abs_neg(&mut self, neg: bool, d: DType, x: Word) -> Word {
        let t = self.ty(d);
        let w = int_width(d);
        let (wt, wd, wx) = if w < 32 { (self.int_ty(32), DType::I32, self.sign_extend_narrow(d, x)) } else { (t, d, x) };
        let r = if neg {
            self.emit(Op::SNegate, wt, &[wx])
        } else {
            // (x ^ s) + (s >>> 1): the driver saw through `(x ^ s) - s` at 64 bits.
            let bits = self.c_int(wd, i64::from(w.max(32)) - 1);
            let s = self.emit(Op::ShiftRightArithmetic, wt, &[wx, bits]);
            let flipped = self.emit(Op::BitwiseXor, wt, &[wx, s]);
            let negative = self.emit(Op::ShiftRightLogical, wt, &[wx, bits]);
            self.emit(Op::IAdd, wt, &[flipped, negative])
        };
        if w < 32 {
            self.emit(Op::UConvert, t, &[r])
        } else {
            r
        }
    }

    /// The 8- or 16-bit signed integer `x` of dtype `from` sign-extended to 32 bits, as
    /// `(zext(x) ^ m) - m` with m its sign bit. NVIDIA's driver drops `OpSConvert` from 8 and 16
    /// bits when it believes the value already fits, which a narrowed -(-128) does not.
    fn sign_extend_narrow(&mut self, from: DType, x: Word) -> Word {
        self.sign_extend_by_xor(int_width(from), false, x)
    }

    /// `x`, a signed integer of `bits`, sign-extended to 32 bits (or 64 with `wide`) as
    /// `(zext(x) ^ m) - m` with m = 2^(bits - 1): the form every driver here keeps (see
    /// `sign_extend_narrow` and `sign_extend_to_64`).
    fn sign_extend_by_xor(&mut self, bits: u32, wide: bool, x: Word) -> Word {
        let (t, m) = if wide {
            let t = self.ty(DType::I64);
            (t, self.c_int(DType::I64, 1i64 << (bits - 1)))
        } else {
            (self.u32_ty(), self.c_u32(1u32 << (bits - 1)))
        };
        let z = self.emit(Op::UConvert, t, &[x]);
        let flipped = self.emit(Op::BitwiseXor, t, &[z, m]);
        self.emit(Op::ISub, t, &[flipped, m])
    }

    /// A 32-bit signed integer sign-extended to 64 bits as `(zext(x) ^ m) - m` (m = 2^31), not
    /// `OpSConvert`: lavapipe (Mesa 22.3.6) compared an `OpSConvert`ed value with zero as if it
    /// were zero-extended (`i64(x) < 0` false for negative x; the fuzzer's seed 44 program 1795,
    /// an i16 through i64 to bf16 that lost its sign), while the value itself was right.
    fn sign_extend_to_64(&mut self, x: Word) -> Word {
        self.sign_extend_by_xor(32, true, x)
    }

    /// Signed division or remainder on magnitudes (C semantics, `MIN / -1` wraps).
    fn signed_div_rem(&mut self, rem: bool, d: DType, a: Word, b: Word) -> Word {
        let t = self.ty(d);
        let zero = self.c_int(d, 0);
        let na = self.b_op(Op::SLessThan, a, zero);
        let nb = self.b_op(Op::SLessThan, b, zero);
        // The magnitudes are only read as unsigned, which holds for 32 and 64 bits whatever a
        // compiler assumes of an abs; narrow ones it may leave unextended.
        let (abs_a, abs_b) = if int_width(d) < 32 {
            (self.wrapping_abs_neg(false, d, a), self.wrapping_abs_neg(false, d, b))
        } else {
            let neg_a = self.emit(Op::SNegate, t, &[a]);
            let neg_b = self.emit(Op::SNegate, t, &[b]);
            (self.sel(t, na, neg_a, a), self.sel(t, nb, neg_b, b))
        };
        if rem {
            let r = self.emit(Op::UMod, t, &[abs_a, abs_b]);
            let neg_r = self.emit(Op::SNegate, t, &[r]);
            self.sel(t, na, neg_r, r)
        } else {
            let q = self.emit(Op::UDiv, t, &[abs_a, abs_b]);
            let neg_q = self.emit(Op::SNegate, t, &[q]);
            let differ = self.b_op(Op::LogicalNotEqual, na, nb);
            self.sel(t, differ, neg_q, q)
        }
    }

    /// `log` / `log2` of f32, subnormal inputs scaled first ([`legalize::log`]).
    fn log_f32(&mut self, natural: bool, x: Word) -> Word {
        let x = self.value(x, DType::F32);
        let r = legalize::log(self, natural, x, |me, xs| {
            let f = me.f32_ty();
            let r = me.ext(if natural { Gl::Log } else { Gl::Log2 }, f, &[xs.id]);
            me.value(r, DType::F32)
        });
        r.id
    }

    /// `|x|` of f32 or f16. A constant -0.0 gives the constant +0.0: lavapipe answers `FAbs` of
    /// the constant -0.0 with -0.0 (other constants and computed zeros come out right).
    fn abs_float(&mut self, d: DType, x: Word) -> Word {
        if self.zeros.get(&x) == Some(&true) {
            return self.const_of(d, Scalar::Float(0.0));
        }
        let t = self.ty(d);
        self.ext(Gl::FAbs, t, &[x])
    }

    fn unary_f32(&mut self, op: UnaryOp, x: Word) -> Word {
        let f = self.f32_ty();
        match op {
            UnaryOp::Neg => self.emit(Op::FNegate, f, &[x]),
            UnaryOp::Not => x,
            UnaryOp::Abs => self.abs_float(DType::F32, x),
            UnaryOp::Exp => self.ext(Gl::Exp, f, &[x]),
            UnaryOp::Exp2 => self.ext(Gl::Exp2, f, &[x]),
            UnaryOp::Log | UnaryOp::Log2 => self.log_f32(op == UnaryOp::Log, x),
            UnaryOp::Sqrt => self.ext(Gl::Sqrt, f, &[x]),
            UnaryOp::Rsqrt => self.ext(Gl::InverseSqrt, f, &[x]),
            // GLSL.std.450 `Sin` and `Cos` are only 2^-11 absolute on [-pi, pi] and unbounded
            // outside (lavapipe's `cos(3e38)` is 1).
            UnaryOp::Sin | UnaryOp::Cos => {
                let v = self.value(x, DType::F32);
                tilekit_core::gpu::math::sin_cos(self, v, op == UnaryOp::Cos).id
            }
            // GLSL's `Tanh` cancels near 0 and there is no `Erf`: tilekit's own, shared with
            // AMDGCN.
            UnaryOp::Tanh => {
                let v = self.value(x, DType::F32);
                tilekit_core::gpu::math::tanh(self, v).id
            }
            UnaryOp::Erf => {
                let v = self.value(x, DType::F32);
                tilekit_core::gpu::math::erf(self, v).id
            }
            UnaryOp::Floor => self.ext(Gl::Floor, f, &[x]),
            UnaryOp::Ceil => self.ext(Gl::Ceil, f, &[x]),
            UnaryOp::Round => self.ext(Gl::RoundEven, f, &[x]),
        }
    }

    /// A float instruction the driver must compute as written: `NoContraction` keeps it from
    /// being fused with a neighbour (an FMA rounds once where the interpreter rounds twice) and
    /// marks it exact, so algebraic rules that hold only without NaNs, infinities and signed
    /// zeros (`x * 0 -> 0`, `x - y * trunc(x / 0) -> x`) leave it alone: Mesa applied them to
    /// constant operands whatever the float controls said.
    fn exact(&mut self, op: Op, ty: Word, args: &[Word]) -> Word {
        let id = self.emit(op, ty, args);
        self.b.decorate(id, spirv::Decoration::NoContraction, []);
        id
    }

    fn binary_float(&mut self, op: BinaryOp, ty: Word, a: Word, b: Word) -> Option<Word> {
        if let Some(r) = self.with_constant_zero(op, ty, a, b) {
            return Some(r);
        }
        Some(match op {
            BinaryOp::Add => self.exact(Op::FAdd, ty, &[a, b]),
            BinaryOp::Sub => self.exact(Op::FSub, ty, &[a, b]),
            BinaryOp::Mul => self.exact(Op::FMul, ty, &[a, b]),
            BinaryOp::Div => self.exact(Op::FDiv, ty, &[a, b]),
            // Only f32 reaches here (the lowering computes f16 remainders in f32). Vulkan
            // computes OpFRem as x - y * trunc(x / y); `legalize::fmod` makes it C's fmod.
            BinaryOp::Rem => {
                let raw = self.exact(Op::FRem, ty, &[a, b]);
                let (a, b, raw) = (self.value(a, DType::F32), self.value(b, DType::F32), self.value(raw, DType::F32));
                legalize::fmod(self, a, b, raw).id
            }
            BinaryOp::Max => self.ext(Gl::NMax, ty, &[a, b]),
            BinaryOp::Min => self.ext(Gl::NMin, ty, &[a, b]),
            _ => return None,
        })
    }

    /// f32 `a * b + c`, rounded once. Where `c` is a constant zero the result is the rounded
    /// product plus that zero, computed as such (`with_constant_zero`): lavapipe turns
    /// `Fma(a, b, 0.0)` into the product, which is -0 where `a * b + 0.0` is +0. Where `a` or
    /// `b` is one, the product is exact (a zero, or NaN) and computed apart by the same rules:
    /// lavapipe turns `Fma(0.0, 0.0, c)` into `c`, which is -0 where `+0 + c` is +0.
    fn fma_f32(&mut self, a: Word, b: Word, c: Word) -> Word {
        let f = self.f32_ty();
        if let (Some(&na), Some(&nb)) = (self.zeros.get(&a), self.zeros.get(&b)) {
            // A zero of known sign: c plus that constant.
            let z = self.c_f32(if na != nb { -0.0 } else { 0.0 });
            let (c, z) = (self.value(c, DType::F32), self.value(z, DType::F32));
            return self.binary(BinaryOp::Add, DType::F32, c, z).id;
        }
        if ![a, b, c].iter().any(|v| self.zeros.contains_key(v)) {
            return self.ext(Gl::Fma, f, &[a, b, c]);
        }
        let (a, b, c) = (self.value(a, DType::F32), self.value(b, DType::F32), self.value(c, DType::F32));
        let product = self.binary(BinaryOp::Mul, DType::F32, a, b);
        self.binary(BinaryOp::Add, DType::F32, product, c).id
    }

    /// `a op b` where `a` or `b` is a constant zero, computed without handing the driver an
    /// arithmetic instruction on that constant ([`legalize::with_constant_zero`]); f16 through
    /// f32, which holds every value the rules select exactly.
    fn with_constant_zero(&mut self, op: BinaryOp, ty: Word, a: Word, b: Word) -> Option<Word> {
        let (za, zb) = (self.zeros.get(&a).copied(), self.zeros.get(&b).copied());
        if za.is_none() && zb.is_none() {
            return None;
        }
        let wide = self.types.get(&TypeKey::Float(32)) == Some(&ty);
        let d = if wide { DType::F32 } else { DType::F16 };
        let (af, bf) = (self.widen_to_f32(d, a), self.widen_to_f32(d, b));
        let (av, bv) = (self.value(af, DType::F32), self.value(bf, DType::F32));
        let r = legalize::with_constant_zero(self, op, av, bv, za, zb)?;
        Some(if wide { r.id } else { self.round_from_f32(DType::F16, r.id) })
    }

    /// A value of any dtype as 32 bits, and back: shuffles move 32-bit words only, which every
    /// device with subgroup shuffles supports (8/16/64-bit shuffles need extended types).
    fn pack_word(&mut self, d: DType, x: Word) -> Word {
        let u = self.u32_ty();
        match d {
            DType::I1 => {
                let one = self.c_u32(1);
                let zero = self.c_u32(0);
                self.sel(u, x, one, zero)
            }
            DType::I8 | DType::U8 | DType::I16 => self.emit(Op::UConvert, u, &[x]),
            DType::F32 => self.bitcast(u, x),
            DType::F16 => self.f16_to_bits(x),
            _ => x,
        }
    }

    fn unpack_word(&mut self, d: DType, w: Word) -> Word {
        match d {
            DType::I1 => {
                let zero = self.c_u32(0);
                self.b_op(Op::INotEqual, w, zero)
            }
            DType::I8 | DType::U8 | DType::I16 => {
                let t = self.conv_ty(d);
                self.emit(Op::UConvert, t, &[w])
            }
            DType::F32 => {
                let f = self.f32_ty();
                self.bitcast(f, w)
            }
            DType::F16 => self.f16_from_bits(w),
            _ => w,
        }
    }

    /// Compare-and-swap loop applying `op` to the f32 at `ptr` (a u32 view); returns the old bits.
    fn f32_cas_loop(&mut self, ptr: Word, op: AtomicOp, value: Word) -> Word {
        let u = self.u32_ty();
        let f = self.f32_ty();
        let scope = self.c_u32(SCOPE_DEVICE);
        let sem = self.c_u32(SEMANTICS_RELAXED);
        let old0 = self.emit(Op::AtomicLoad, u, &[ptr, scope, sem]);
        let pre = self.cur_block;
        let (header, body, cont, merge) = (self.b.id(), self.b.id(), self.b.id(), self.b.id());
        let seen = self.b.id();
        self.branch(header);
        self.begin_block(header);
        let cur = self.b.id();
        self.push_inst(Instruction::new(
            Op::Phi,
            Some(u),
            Some(cur),
            vec![Operand::IdRef(old0), Operand::IdRef(pre), Operand::IdRef(seen), Operand::IdRef(cont)],
        ));
        let r = self.b.loop_merge(merge, cont, spirv::LoopControl::NONE, []);
        self.check_build(r);
        self.branch(body);
        self.begin_block(body);
        let cf = self.bitcast(f, cur);
        let nf = match op {
            AtomicOp::Add => self.f_op(Op::FAdd, cf, value),
            AtomicOp::Max => self.ext(Gl::NMax, f, &[cf, value]),
            AtomicOp::Min => self.ext(Gl::NMin, f, &[cf, value]),
            AtomicOp::Xchg => value,
        };
        let nb = self.bitcast(u, nf);
        self.emit_with_id(seen, Op::AtomicCompareExchange, u, &[ptr, scope, sem, sem, nb, cur]);
        let done = self.b_op(Op::IEqual, seen, cur);
        let r = self.b.branch_conditional(done, merge, cont, []);
        self.check_build(r);
        self.begin_block(cont);
        self.branch(header);
        self.begin_block(merge);
        seen
    }
}

impl Emitter for SpirvEmitter {
    type V = SpirvValue;

    fn constant(&mut self, dtype: DType, value: Scalar) -> SpirvValue {
        let id = self.const_of(dtype, value);
        self.value(id, dtype)
    }

    fn thread_index(&mut self) -> SpirvValue {
        self.value(self.thread_index, DType::I32)
    }

    fn folds_grid(&self) -> bool {
        self.grid_fold.is_some()
    }

    fn program_id(&mut self, axis: u32) -> SpirvValue {
        if axis > 2 {
            self.fail_contract(format!("program_id along axis {axis}"));
            return self.value(0, DType::I32);
        }
        self.value(self.program_id[axis as usize], DType::I32)
    }

    fn num_programs(&mut self, axis: u32) -> SpirvValue {
        if axis > 2 {
            self.fail_contract(format!("num_programs along axis {axis}"));
            return self.value(0, DType::I32);
        }
        self.value(self.num_programs[axis as usize], DType::I32)
    }

    fn scalar_param(&mut self, param: u32, dtype: DType) -> SpirvValue {
        match self.scalars.get(param as usize).copied().flatten() {
            Some(v) => {
                if v.dtype != dtype {
                    self.fail_contract(format!("scalar parameter {param} is {}, read as {dtype}", v.dtype));
                }
                v
            }
            None => {
                self.fail_contract(format!("parameter {param} is not a scalar parameter"));
                self.value(0, dtype)
            }
        }
    }

    fn unary(&mut self, op: UnaryOp, dtype: DType, x: SpirvValue) -> SpirvValue {
        self.expect(x, dtype, "unary operand");
        // A sign change, magnitude or rounding of a finite constant is the constant it makes,
        // exact in the dtype, and so is a square root, tanh, sine or erf of a zero (that zero):
        // lavapipe folds such an operation itself and then `fma(a, b, 0)` to `a * b` or `y + 0`
        // to `y`, losing -0 + 0 = +0 (the fuzzer's seed 67 program 2350), where a zero this
        // emitter knows goes through `with_constant_zero`. A subnormal is left to the device,
        // which may flush it (as for comparisons of constants).
        if matches!(dtype, DType::F32 | DType::F16) {
            if let Some(v) = self.const_value(dtype, x.id).map(|v| v.as_f64()) {
                let exact = match op {
                    UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => true,
                    UnaryOp::Sqrt | UnaryOp::Tanh | UnaryOp::Sin | UnaryOp::Erf => v == 0.0,
                    _ => false,
                };
                if exact && v.is_finite() && !subnormal(dtype, v as f32) {
                    let r = tilekit_core::interp::unary_float(op, dtype, v as f32);
                    return self.constant(dtype, Scalar::Float(f64::from(r)));
                }
            }
        }
        let x = x.id;
        let id = match dtype {
            DType::I1 => match op {
                UnaryOp::Neg | UnaryOp::Abs => x,
                UnaryOp::Not => {
                    let t = self.bool_ty();
                    self.emit(Op::LogicalNot, t, &[x])
                }
                _ => {
                    self.fail_contract(format!("{} on i1", op.name()));
                    x
                }
            },
            DType::F32 => self.unary_f32(op, x),
            DType::F16 => match op {
                UnaryOp::Neg | UnaryOp::Abs => {
                    let r = if op == UnaryOp::Neg {
                        let h = self.f16_ty();
                        self.emit(Op::FNegate, h, &[x])
                    } else {
                        self.abs_float(DType::F16, x)
                    };
                    // A sign change of a rounding is the rounding of the sign change (see
                    // binary's minimum).
                    if self.rounded_f16.contains(&x) {
                        self.rounded_f16.insert(r);
                    }
                    r
                }
                UnaryOp::Not => x,
                _ => {
                    let xf = self.widen_to_f32(DType::F16, x);
                    let r = self.unary_f32(op, xf);
                    self.round_from_f32(DType::F16, r)
                }
            },
            DType::BF16 => match op {
                UnaryOp::Neg => self.u_opk(Op::BitwiseXor, x, 0x8000),
                UnaryOp::Abs => self.u_opk(Op::BitwiseAnd, x, 0x7fff),
                UnaryOp::Not => x,
                _ => {
                    let xf = self.widen_to_f32(DType::BF16, x);
                    let r = self.unary_f32(op, xf);
                    self.round_from_f32(DType::BF16, r)
                }
            },
            d => {
                let t = self.ty(d);
                match op {
                    UnaryOp::Neg if is_signed(d) => self.wrapping_abs_neg(true, d, x),
                    UnaryOp::Neg => self.emit(Op::SNegate, t, &[x]),
                    UnaryOp::Not => self.emit(Op::Not, t, &[x]),
                    UnaryOp::Abs if is_signed(d) => self.wrapping_abs_neg(false, d, x),
                    UnaryOp::Abs => x,
                    _ => {
                        self.fail_contract(format!("{} on integer dtype {d}", op.name()));
                        x
                    }
                }
            }
        };
        self.value(id, dtype)
    }

    fn binary(&mut self, op: BinaryOp, dtype: DType, a: SpirvValue, b: SpirvValue) -> SpirvValue {
        self.expect(a, dtype, "binary lhs");
        self.expect(b, dtype, "binary rhs");
        let (a, b) = (a.id, b.id);
        // x - x and x ^ x of integers are zero: written as the constant, so that a conversion
        // or an addition of it sees one. lavapipe folds them itself and then `y + 0.0` to `y`,
        // losing -0 + 0 = +0 (the fuzzer's seed 42 program 2815).
        if a == b && !dtype.is_float() && matches!(op, BinaryOp::Sub | BinaryOp::Xor) {
            let zero = if dtype == DType::I1 { self.c_bool(false) } else { self.c_int(dtype, 0) };
            return self.value(zero, dtype);
        }
        // Two constants: the answer as a constant, for the same reason (lavapipe folds `3 * 0`
        // or `0.5 - 0.5` itself and then `y + f32(..)` to `y`), by the interpreter's rule.
        if let Some(r) = self.fold_binary(op, dtype, a, b) {
            return self.value(r, dtype);
        }
        let id = match dtype {
            DType::I1 => {
                let t = self.bool_ty();
                match op {
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Xor => self.emit(Op::LogicalNotEqual, t, &[a, b]),
                    BinaryOp::Mul | BinaryOp::And | BinaryOp::Min => self.emit(Op::LogicalAnd, t, &[a, b]),
                    BinaryOp::Or | BinaryOp::Max => self.emit(Op::LogicalOr, t, &[a, b]),
                    // The only valid divisor and shift amount of an i1 are 1 and 0.
                    BinaryOp::Div | BinaryOp::Shl | BinaryOp::Shr => a,
                    BinaryOp::Rem => self.c_bool(false),
                }
            }
            DType::F32 | DType::F16 if !(dtype == DType::F16 && op == BinaryOp::Rem) => {
                let t = self.ty(dtype);
                match self.binary_float(op, t, a, b) {
                    // The minimum of roundings is the rounding of the minimum: NVIDIA's driver
                    // moves the rounding past it and then folds it with the widening.
                    Some(id) if dtype == DType::F16 && matches!(op, BinaryOp::Min | BinaryOp::Max) => {
                        if self.rounded_f16.contains(&a) || self.rounded_f16.contains(&b) {
                            self.rounded_f16.insert(id);
                        }
                        id
                    }
                    Some(id) => id,
                    None => {
                        self.fail_contract(format!("{} on {dtype}", op.name()));
                        a
                    }
                }
            }
            DType::F16 | DType::BF16 => {
                // In f32, rounded once: the interpreter's semantics (and exact fmod for f16).
                let af = self.widen_to_f32(dtype, a);
                let bf = self.widen_to_f32(dtype, b);
                let f = self.f32_ty();
                match self.binary_float(op, f, af, bf) {
                    Some(r) => self.round_from_f32(dtype, r),
                    None => {
                        self.fail_contract(format!("{} on {dtype}", op.name()));
                        a
                    }
                }
            }
            d => {
                let t = self.ty(d);
                let signed = is_signed(d);
                match op {
                    BinaryOp::Add => self.emit(Op::IAdd, t, &[a, b]),
                    BinaryOp::Sub => self.emit(Op::ISub, t, &[a, b]),
                    BinaryOp::Mul => self.emit(Op::IMul, t, &[a, b]),
                    BinaryOp::Div if signed => self.signed_div_rem(false, d, a, b),
                    BinaryOp::Div => self.emit(Op::UDiv, t, &[a, b]),
                    BinaryOp::Rem if signed => self.signed_div_rem(true, d, a, b),
                    BinaryOp::Rem => self.emit(Op::UMod, t, &[a, b]),
                    BinaryOp::And => self.emit(Op::BitwiseAnd, t, &[a, b]),
                    BinaryOp::Or => self.emit(Op::BitwiseOr, t, &[a, b]),
                    BinaryOp::Xor => self.emit(Op::BitwiseXor, t, &[a, b]),
                    BinaryOp::Shl => self.emit(Op::ShiftLeftLogical, t, &[a, b]),
                    BinaryOp::Shr if signed => self.emit(Op::ShiftRightArithmetic, t, &[a, b]),
                    BinaryOp::Shr => self.emit(Op::ShiftRightLogical, t, &[a, b]),
                    BinaryOp::Max | BinaryOp::Min => self.int_min_max(op, d, a, b),
                }
            }
        };
        self.value(id, dtype)
    }

    fn cmp(&mut self, pred: CmpPred, dtype: DType, a: SpirvValue, b: SpirvValue) -> SpirvValue {
        self.expect(a, dtype, "cmp lhs");
        self.expect(b, dtype, "cmp rhs");
        // A value compared with itself, where the answer holds for every value (NaN included):
        // the constant, for the same reason as `x - x` in `binary` (lavapipe folds `x < x` to
        // false and then `y + f32(false)` to `y`).
        if a.id == b.id {
            let known = match pred {
                CmpPred::Lt | CmpPred::Gt => Some(false),
                CmpPred::Ne if !dtype.is_float() => Some(false),
                CmpPred::Eq | CmpPred::Le | CmpPred::Ge if !dtype.is_float() => Some(true),
                _ => None,
            };
            if let Some(v) = known {
                let c = self.c_bool(v);
                return self.value(c, DType::I1);
            }
        }
        // Two constants: the answer as a constant, by the interpreter's rule, for the same
        // reason (lavapipe folds `2.0 < 0.0` and then `y + f32(i32(false))` to `y`: the
        // fuzzer's seed 62 program 2196). A subnormal is left to the device, whose comparison
        // may flush it.
        if let (Some(x), Some(y)) = (self.const_value(dtype, a.id), self.const_value(dtype, b.id)) {
            let flushable = |v: Scalar| dtype.is_float() && subnormal(dtype, v.as_f64() as f32);
            if !flushable(x) && !flushable(y) {
                let c = self.c_bool(tilekit_core::interp::cmp_scalar(pred, dtype, x, y));
                return self.value(c, DType::I1);
            }
        }
        let (mut a, mut b) = (a.id, b.id);
        let bt = self.bool_ty();
        // Declares the capability of the operand type (loads alone do not).
        self.ty(dtype);
        let id = match dtype {
            DType::I1 => {
                let (na, nb) = (self.emit(Op::LogicalNot, bt, &[a]), self.emit(Op::LogicalNot, bt, &[b]));
                match pred {
                    CmpPred::Eq => self.emit(Op::LogicalEqual, bt, &[a, b]),
                    CmpPred::Ne => self.emit(Op::LogicalNotEqual, bt, &[a, b]),
                    CmpPred::Lt => self.emit(Op::LogicalAnd, bt, &[na, b]),
                    CmpPred::Le => self.emit(Op::LogicalOr, bt, &[na, b]),
                    CmpPred::Gt => self.emit(Op::LogicalAnd, bt, &[a, nb]),
                    CmpPred::Ge => self.emit(Op::LogicalOr, bt, &[a, nb]),
                }
            }
            DType::F16 | DType::F32 | DType::BF16 => {
                if dtype == DType::BF16 {
                    a = self.widen_to_f32(dtype, a);
                    b = self.widen_to_f32(dtype, b);
                }
                let op = match pred {
                    CmpPred::Eq => Op::FOrdEqual,
                    CmpPred::Ne => Op::FUnordNotEqual,
                    CmpPred::Lt => Op::FOrdLessThan,
                    CmpPred::Le => Op::FOrdLessThanEqual,
                    CmpPred::Gt => Op::FOrdGreaterThan,
                    CmpPred::Ge => Op::FOrdGreaterThanEqual,
                };
                self.emit(op, bt, &[a, b])
            }
            d => {
                let s = is_signed(d);
                let op = match pred {
                    CmpPred::Eq => Op::IEqual,
                    CmpPred::Ne => Op::INotEqual,
                    CmpPred::Lt if s => Op::SLessThan,
                    CmpPred::Lt => Op::ULessThan,
                    CmpPred::Le if s => Op::SLessThanEqual,
                    CmpPred::Le => Op::ULessThanEqual,
                    CmpPred::Gt if s => Op::SGreaterThan,
                    CmpPred::Gt => Op::UGreaterThan,
                    CmpPred::Ge if s => Op::SGreaterThanEqual,
                    CmpPred::Ge => Op::UGreaterThanEqual,
                };
                let (a, b) = self.ordered_operands(d, a, b);
                self.emit(op, bt, &[a, b])
            }
        };
        self.value(id, DType::I1)
    }

    fn select(&mut self, dtype: DType, cond: SpirvValue, a: SpirvValue, b: SpirvValue) -> SpirvValue {
        self.expect(cond, DType::I1, "select condition");
        self.expect(a, dtype, "select true value");
        self.expect(b, dtype, "select false value");
        let t = self.ty(dtype);
        let id = self.sel(t, cond.id, a.id, b.id);
        if self.rounded_f16.contains(&a.id) || self.rounded_f16.contains(&b.id) {
            self.rounded_f16.insert(id);
        }
        self.value(id, dtype)
    }

    fn fma(&mut self, dtype: DType, a: SpirvValue, b: SpirvValue, c: SpirvValue) -> SpirvValue {
        self.expect(a, dtype, "fma a");
        self.expect(b, dtype, "fma b");
        self.expect(c, dtype, "fma c");
        let id = match dtype {
            DType::F32 => self.fma_f32(a.id, b.id, c.id),
            // In f32, as the interpreter computes it: an f16 Fma may round (and overflow) after
            // the multiply (lavapipe's gives -inf for 65504 * -1.5 + 65504), and the product
            // of two f16 or bf16 values is exact in f32.
            DType::F16 | DType::BF16 => {
                let (af, bf, cf) = (self.widen_to_f32(dtype, a.id), self.widen_to_f32(dtype, b.id), self.widen_to_f32(dtype, c.id));
                let r = self.fma_f32(af, bf, cf);
                self.round_from_f32(dtype, r)
            }
            d if d.is_int() && d != DType::I1 => {
                let t = self.ty(d);
                let m = self.emit(Op::IMul, t, &[a.id, b.id]);
                self.emit(Op::IAdd, t, &[m, c.id])
            }
            d => {
                self.fail_contract(format!("fma on {d}"));
                a.id
            }
        };
        self.value(id, dtype)
    }

    fn cast(&mut self, from: DType, to: DType, x: SpirvValue) -> SpirvValue {
        self.expect(x, from, "cast operand");
        let x = x.id;
        if from == to {
            return self.value(x, to);
        }
        // A constant converts to a constant (the interpreter's conversion), which the zero rules
        // of `with_constant_zero` recognise where it is a float zero: drivers fold the
        // conversion of a constant (`f32(u8(0.5))`, say) and then `x + 0` to `x`, which is
        // wrong for x = -0.
        if let Some(v) = self.const_value(from, x) {
            let c = self.const_of(to, tilekit_core::interp::cast_scalar(v, from, to));
            return self.value(c, to);
        }
        let id = if to == DType::I1 {
            let bt = self.bool_ty();
            match from {
                DType::F16 | DType::F32 => {
                    let zero = self.c_num(from, 0.0);
                    self.emit(Op::FUnordNotEqual, bt, &[x, zero])
                }
                DType::BF16 => {
                    let mag = self.u_opk(Op::BitwiseAnd, x, 0x7fff);
                    let zero = self.c_u32(0);
                    self.b_op(Op::INotEqual, mag, zero)
                }
                d => {
                    let zero = self.c_int(d, 0);
                    self.b_op(Op::INotEqual, x, zero)
                }
            }
        } else if from == DType::I1 {
            let t = self.ty(to);
            let one = self.c_num(to, 1.0);
            let zero = self.c_num(to, 0.0);
            self.sel(t, x, one, zero)
        } else if to == DType::BF16 && matches!(from, DType::I32 | DType::U32 | DType::I64) {
            let xf = self.int_to_f32_round_odd(from, x);
            self.round_from_f32(to, xf)
        } else if to.is_float() {
            let xf = self.widen_to_f32(from, x);
            self.round_from_f32(to, xf)
        } else if from.is_float() {
            let xf = self.widen_to_f32(from, x);
            self.f32_to_int(xf, to)
        } else {
            let (fw, tw) = (int_width(from), int_width(to));
            let t = self.conv_ty(to);
            if fw == tw {
                x
            } else if tw < fw || !is_signed(from) {
                self.emit(Op::UConvert, t, &[x])
            } else if fw < 32 {
                let r = self.sign_extend_narrow(from, x);
                match tw {
                    32 => r,
                    64 => self.sign_extend_to_64(r),
                    _ => self.emit(Op::UConvert, t, &[r]),
                }
            } else if tw == 64 {
                self.sign_extend_to_64(x)
            } else {
                self.emit(Op::SConvert, t, &[x])
            }
        };
        self.value(id, to)
    }

    fn bitcast(&mut self, from: DType, to: DType, x: SpirvValue) -> SpirvValue {
        self.expect(x, from, "bitcast operand");
        let id = match (from, to) {
            (DType::F32, DType::I32 | DType::U32) => {
                let u = self.u32_ty();
                self.bitcast(u, x.id)
            }
            (DType::I32 | DType::U32, DType::F32) => {
                let f = self.f32_ty();
                self.bitcast(f, x.id)
            }
            _ => {
                self.fail_contract(format!("a bitcast from {from} to {to}"));
                x.id
            }
        };
        self.value(id, to)
    }

    fn load_global(&mut self, buffer: u32, dtype: DType, index: SpirvValue, index_dtype: DType) -> SpirvValue {
        let index = self.index_id(index, index_dtype, "load_global");
        self.mark_access(buffer, true, false, "load_global");
        let Some((ptr, elem)) = self.element_ptr(buffer, dtype, index, View::Elem, "load_global") else {
            return self.value(0, dtype);
        };
        let raw = self.emit(Op::Load, elem, &[ptr]);
        let id = match dtype {
            DType::I1 => {
                let u = self.u32_ty();
                let w = self.emit(Op::UConvert, u, &[raw]);
                let zero = self.c_u32(0);
                self.b_op(Op::INotEqual, w, zero)
            }
            DType::BF16 => {
                let u = self.u32_ty();
                self.emit(Op::UConvert, u, &[raw])
            }
            _ => raw,
        };
        self.value(id, dtype)
    }

    fn store_global(&mut self, buffer: u32, dtype: DType, index: SpirvValue, index_dtype: DType, value: SpirvValue) {
        let index = self.index_id(index, index_dtype, "store_global");
        self.expect(value, dtype, "stored value");
        self.mark_access(buffer, false, true, "store_global");
        let Some((ptr, elem)) = self.element_ptr(buffer, dtype, index, View::Elem, "store_global") else {
            return;
        };
        let v = match dtype {
            DType::I1 => {
                let w = self.pack_word(DType::I1, value.id);
                self.emit(Op::UConvert, elem, &[w])
            }
            DType::BF16 => self.emit(Op::UConvert, elem, &[value.id]),
            _ => value.id,
        };
        let r = self.b.store(ptr, v, None, []);
        self.check_build(r);
    }

    fn max_vector(&self, dtype: DType) -> u32 {
        // 32- and 64-bit elements load as vectors of themselves, 16- and 8-bit ones as u32
        // words of two or four (a quantised output streams i8); boolean buffers stay scalar.
        let widest = self.target.max_vector_bytes.min(16);
        match dtype {
            DType::F32 | DType::I32 | DType::U32 | DType::I64 | DType::F16 | DType::BF16 | DType::I16 | DType::I8 | DType::U8 => {
                (widest / dtype.size_bytes() as u32).max(1)
            }
            _ => 1,
        }
    }

    fn load_global_vec(&mut self, buffer: u32, dtype: DType, index: SpirvValue, index_dtype: DType, n: u32) -> Vec<SpirvValue> {
        if !self.vector_ok(dtype, n) {
            return tilekit_core::gpu::emit::load_elementwise(self, buffer, dtype, index, index_dtype, n);
        }
        let vindex = self.vector_index(index, index_dtype, n, "load_global_vec");
        self.mark_access(buffer, true, false, "load_global_vec");
        let Some((ptr, elem)) = self.element_ptr(buffer, dtype, vindex, View::Vec(n), "load_global_vec") else {
            return (0..n).map(|_| self.value(0, dtype)).collect();
        };
        let raw = self.emit(Op::Load, elem, &[ptr]);
        let words = self.vector_parts(raw, dtype, n);
        let mut out = Vec::with_capacity(n as usize);
        match dtype {
            DType::F32 | DType::I32 | DType::U32 | DType::I64 => {
                out.extend(words.into_iter().map(|w| self.value(w, dtype)));
            }
            DType::F16 => {
                let h = self.f16_ty();
                let v2 = self.vec_ty(h, 2);
                for w in words {
                    let pair = self.bitcast(v2, w);
                    for k in 0..2 {
                        let e = self.extract(h, pair, k);
                        out.push(self.value(e, dtype));
                    }
                }
            }
            DType::BF16 => {
                // Registers hold bf16 as the 16 bits in a u32.
                for w in words {
                    let lo = self.u_opk(Op::BitwiseAnd, w, 0xFFFF);
                    let hi = self.u_opk(Op::ShiftRightLogical, w, 16);
                    out.push(self.value(lo, dtype));
                    out.push(self.value(hi, dtype));
                }
            }
            DType::I8 | DType::U8 => {
                // Four bytes per word, the lowest first.
                let t = self.ty(dtype);
                for w in words {
                    for k in 0..4 {
                        let part = if k == 0 { w } else { self.u_opk(Op::ShiftRightLogical, w, 8 * k) };
                        let e = self.emit(Op::UConvert, t, &[part]);
                        out.push(self.value(e, dtype));
                    }
                }
            }
            _ => {
                // I16: the low and high halves of each word.
                let t = self.ty(DType::I16);
                for w in words {
                    let hi_w = self.u_opk(Op::ShiftRightLogical, w, 16);
                    let lo = self.emit(Op::UConvert, t, &[w]);
                    let hi = self.emit(Op::UConvert, t, &[hi_w]);
                    out.push(self.value(lo, dtype));
                    out.push(self.value(hi, dtype));
                }
            }
        }
        out
    }

    fn store_global_vec(&mut self, buffer: u32, dtype: DType, index: SpirvValue, index_dtype: DType, values: &[SpirvValue]) {
        let n = values.len() as u32;
        if !self.vector_ok(dtype, n) {
            return tilekit_core::gpu::emit::store_elementwise(self, buffer, dtype, index, index_dtype, values);
        }
        for &v in values {
            self.expect(v, dtype, "stored value");
        }
        let vindex = self.vector_index(index, index_dtype, n, "store_global_vec");
        self.mark_access(buffer, false, true, "store_global_vec");
        let Some((ptr, elem)) = self.element_ptr(buffer, dtype, vindex, View::Vec(n), "store_global_vec") else {
            return;
        };
        let ids: Vec<Word> = values.iter().map(|v| v.id).collect();
        let parts = self.pack_words(dtype, ids);
        let v = if parts.len() == 1 { parts[0] } else { self.emit(Op::CompositeConstruct, elem, &parts) };
        let r = self.b.store(ptr, v, None, []);
        self.check_build(r);
    }

    fn atomic_global(
        &mut self,
        op: Option<AtomicOp>,
        buffer: u32,
        dtype: DType,
        index: SpirvValue,
        index_dtype: DType,
        cmp: Option<SpirvValue>,
        value: SpirvValue,
    ) -> SpirvValue {
        let index = self.index_id(index, index_dtype, "atomic_global");
        self.expect(value, dtype, "atomic value");
        if let Some(c) = cmp {
            self.expect(c, dtype, "atomic compare value");
        }
        let name = op.map_or("atomic_cas", |o| o.name());
        if op.is_none() && cmp.is_none() {
            self.fail_contract("compare-and-swap without a compare value".into());
            return self.value(0, dtype);
        }
        self.mark_access(buffer, true, true, name);
        let scope = self.c_u32(SCOPE_DEVICE);
        let sem = self.c_u32(SEMANTICS_RELAXED);
        let id = match dtype {
            DType::I32 | DType::U32 | DType::I64 => {
                if dtype == DType::I64 {
                    self.used.int64_atomics = true;
                }
                let Some((ptr, _)) = self.element_ptr(buffer, dtype, index, View::Elem, name) else {
                    return self.value(0, dtype);
                };
                let t = self.ty(dtype);
                let s = is_signed(dtype);
                let v = value.id;
                match op {
                    Some(AtomicOp::Add) => self.emit(Op::AtomicIAdd, t, &[ptr, scope, sem, v]),
                    Some(AtomicOp::Max) => self.emit(if s { Op::AtomicSMax } else { Op::AtomicUMax }, t, &[ptr, scope, sem, v]),
                    Some(AtomicOp::Min) => self.emit(if s { Op::AtomicSMin } else { Op::AtomicUMin }, t, &[ptr, scope, sem, v]),
                    Some(AtomicOp::Xchg) => self.emit(Op::AtomicExchange, t, &[ptr, scope, sem, v]),
                    None => {
                        let c = cmp.map_or(0, |c| c.id);
                        self.emit(Op::AtomicCompareExchange, t, &[ptr, scope, sem, sem, v, c])
                    }
                }
            }
            DType::F32 => {
                let f = self.f32_ty();
                if op == Some(AtomicOp::Add) && self.target.atomic_float_add {
                    self.used.atomic_float_add = true;
                    let Some((ptr, _)) = self.element_ptr(buffer, dtype, index, View::Elem, name) else {
                        return self.value(0, dtype);
                    };
                    self.emit(Op::AtomicFAddEXT, f, &[ptr, scope, sem, value.id])
                } else {
                    let Some((ptr, _)) = self.element_ptr(buffer, dtype, index, View::Bits, name) else {
                        return self.value(0, dtype);
                    };
                    let u = self.u32_ty();
                    let old = match op {
                        Some(AtomicOp::Xchg) => {
                            let vb = self.bitcast(u, value.id);
                            self.emit(Op::AtomicExchange, u, &[ptr, scope, sem, vb])
                        }
                        None => {
                            let vb = self.bitcast(u, value.id);
                            let cb = self.bitcast(u, cmp.map_or(0, |c| c.id));
                            self.emit(Op::AtomicCompareExchange, u, &[ptr, scope, sem, sem, vb, cb])
                        }
                        Some(o) => self.f32_cas_loop(ptr, o, value.id),
                    };
                    self.bitcast(f, old)
                }
            }
            d => {
                self.fail_unsupported(format!("{name} on {d} buffers (atomics take i32, u32, i64 or f32)"));
                0
            }
        };
        self.value(id, dtype)
    }

    fn coop_matrices(&self) -> bool {
        true
    }

    fn coop_fill(&mut self, instr: MatrixInstr, value: SpirvValue) -> Option<SpirvValue> {
        self.expect(value, DType::F32, "cooperative matrix fill");
        let ty = self.coop_ty(instr, CoopRole::Acc)?;
        let id = self.emit(Op::CompositeConstruct, ty, &[value.id]);
        self.coop_types.insert(id, ty);
        Some(self.value(id, DType::F32))
    }

    fn coop_load(&mut self, instr: MatrixInstr, role: CoopRole, dtype: DType, index: SpirvValue, stride: u32, col_major: bool) -> Option<SpirvValue> {
        let component = coop_component(instr, role);
        if component != dtype {
            self.fail_contract(format!("a cooperative matrix of {component} loaded from shared {dtype}"));
            return None;
        }
        let ty = self.coop_ty(instr, role)?;
        let (ptr, _) = self.shared_ptr(dtype, index, "cooperative matrix load")?;
        self.coop_load_at(ty, component, ptr, stride, col_major)
    }

    fn staging_vectors(&self) -> bool {
        true
    }

    fn reserve_staging(&mut self, dtype: DType, len: u32) {
        if let Some(slot) = self.staging.get_mut(&dtype) {
            slot.len = slot.len.max(len);
            return;
        }
        let var = self.b.id();
        self.staging.insert(dtype, SharedSlot { var, len });
    }

    fn store_staging(&mut self, dtype: DType, index: SpirvValue, values: &[SpirvValue]) {
        for &v in values {
            self.expect(v, dtype, "staged value");
        }
        let Some((ptr, elem)) = self.staging_ptr(dtype, index, values.len(), "store_staging") else {
            return;
        };
        let ids: Vec<Word> = values.iter().map(|v| v.id).collect();
        let parts = self.pack_words(dtype, ids);
        let v = self.emit(Op::CompositeConstruct, elem, &parts);
        let r = self.b.store(ptr, v, None, []);
        self.check_build(r);
    }

    fn coop_load_staged(
        &mut self,
        instr: MatrixInstr,
        role: CoopRole,
        dtype: DType,
        index: SpirvValue,
        stride: u32,
        col_major: bool,
    ) -> Option<SpirvValue> {
        let component = coop_component(instr, role);
        if component != dtype {
            self.fail_contract(format!("a cooperative matrix of {component} loaded from staged {dtype}"));
            return None;
        }
        let ty = self.coop_ty(instr, role)?;
        let per = 16 / self.shared_elem_ty(dtype).1;
        if stride % per != 0 {
            self.fail_contract(format!("a staged cooperative matrix with a stride of {stride} elements, not whole 16-byte vectors"));
            return None;
        }
        let (ptr, _) = self.staging_ptr(dtype, index, per as usize, "cooperative matrix load")?;
        self.coop_load_at(ty, component, ptr, stride / per, col_major)
    }
    fn coop_store(&mut self, instr: MatrixInstr, value: SpirvValue, index: SpirvValue, stride: u32) -> Option<()> {
        let ty = self.coop_ty(instr, CoopRole::Acc)?;
        if self.coop_types.get(&value.id) != Some(&ty) {
            self.fail_contract("a cooperative matrix store of a value that is not an accumulator".into());
            return None;
        }
        let (ptr, _) = self.shared_ptr(DType::F32, index, "cooperative matrix store")?;
        let (layout, stride) = (self.c_u32(0), self.c_u32(stride));
        self.push_inst(Instruction::new(
            Op::CooperativeMatrixStoreKHR,
            None,
            None,
            vec![
                Operand::IdRef(ptr),
                Operand::IdRef(value.id),
                Operand::IdRef(layout),
                Operand::IdRef(stride),
                Operand::MemoryAccess(spirv::MemoryAccess::NON_PRIVATE_POINTER),
            ],
        ));
        Some(())
    }

    fn coop_mul_add(&mut self, instr: MatrixInstr, a: SpirvValue, b: SpirvValue, c: SpirvValue) -> Option<SpirvValue> {
        let ty = self.coop_ty(instr, CoopRole::Acc)?;
        for (v, role) in [(a, CoopRole::A), (b, CoopRole::B), (c, CoopRole::Acc)] {
            let want = self.coop_ty(instr, role)?;
            if self.coop_types.get(&v.id) != Some(&want) {
                self.fail_contract(format!("a cooperative matrix multiply-add whose {role:?} operand is not one of its type"));
                return None;
            }
        }
        let id = self.emit(Op::CooperativeMatrixMulAddKHR, ty, &[a.id, b.id, c.id]);
        self.coop_types.insert(id, ty);
        Some(self.value(id, DType::F32))
    }

    fn reserve_shared(&mut self, dtype: DType, len: u32) {
        if let Some(slot) = self.shared.get_mut(&dtype) {
            slot.len = slot.len.max(len);
            return;
        }
        let var = self.b.id();
        self.shared.insert(dtype, SharedSlot { var, len });
    }

    fn load_shared(&mut self, dtype: DType, index: SpirvValue) -> SpirvValue {
        let Some((ptr, elem)) = self.shared_ptr(dtype, index, "load_shared") else {
            return self.value(0, dtype);
        };
        let raw = self.emit(Op::Load, elem, &[ptr]);
        let id = match dtype {
            DType::I1 => self.unpack_word(DType::I1, raw),
            DType::BF16 => {
                let u = self.u32_ty();
                self.emit(Op::UConvert, u, &[raw])
            }
            _ => raw,
        };
        self.value(id, dtype)
    }

    fn store_shared(&mut self, dtype: DType, index: SpirvValue, value: SpirvValue) {
        self.expect(value, dtype, "shared store value");
        let Some((ptr, elem)) = self.shared_ptr(dtype, index, "store_shared") else {
            return;
        };
        let v = match dtype {
            DType::I1 => self.pack_word(DType::I1, value.id),
            DType::BF16 => self.emit(Op::UConvert, elem, &[value.id]),
            _ => value.id,
        };
        let r = self.b.store(ptr, v, None, []);
        self.check_build(r);
    }

    fn barrier(&mut self) {
        let wg = self.c_u32(SCOPE_WORKGROUP);
        let sem = self.c_u32(SEMANTICS_BARRIER);
        let r = self.b.control_barrier(wg, wg, sem);
        self.check_build(r);
    }

    fn shuffle_xor(&mut self, dtype: DType, value: SpirvValue, lane_mask: u32) -> SpirvValue {
        self.expect(value, dtype, "shuffle value");
        self.used.shuffle = true;
        let u = self.u32_ty();
        let scope = self.c_u32(SCOPE_SUBGROUP);
        let mask = self.c_u32(lane_mask);
        let id = if dtype == DType::I64 {
            let t64 = self.int_ty(64);
            let lo = self.emit(Op::UConvert, u, &[value.id]);
            let k32 = self.c_int(DType::I64, 32);
            let hi64 = self.emit(Op::ShiftRightLogical, t64, &[value.id, k32]);
            let hi = self.emit(Op::UConvert, u, &[hi64]);
            let lo = self.emit(Op::GroupNonUniformShuffleXor, u, &[scope, lo, mask]);
            let hi = self.emit(Op::GroupNonUniformShuffleXor, u, &[scope, hi, mask]);
            let lo = self.emit(Op::UConvert, t64, &[lo]);
            let hi = self.emit(Op::UConvert, t64, &[hi]);
            let hi = self.emit(Op::ShiftLeftLogical, t64, &[hi, k32]);
            self.emit(Op::BitwiseOr, t64, &[hi, lo])
        } else {
            let w = self.pack_word(dtype, value.id);
            let s = self.emit(Op::GroupNonUniformShuffleXor, u, &[scope, w, mask]);
            self.unpack_word(dtype, s)
        };
        self.value(id, dtype)
    }

    fn begin_if(&mut self, cond: SpirvValue, result_dtypes: &[DType]) {
        self.expect(cond, DType::I1, "if condition");
        let (merge, then_label, else_label) = (self.b.id(), self.b.id(), self.b.id());
        let r = self.b.selection_merge(merge, spirv::SelectionControl::NONE);
        self.check_build(r);
        let r = self.b.branch_conditional(cond.id, then_label, else_label, []);
        self.check_build(r);
        self.begin_block(then_label);
        self.frames.push(Frame::If { merge, else_label, results: result_dtypes.to_vec(), then_out: None });
    }

    fn begin_else(&mut self, then_values: &[SpirvValue]) {
        let cur = self.cur_block;
        let (merge, else_label, results) = match self.frames.last_mut() {
            Some(Frame::If { merge, else_label, results, then_out }) if then_out.is_none() => {
                *then_out = Some((cur, then_values.to_vec()));
                (*merge, *else_label, results.clone())
            }
            _ => {
                self.fail_contract("begin_else outside an open then-branch".into());
                return;
            }
        };
        self.check_yield(&results, then_values, "then-branch");
        self.branch(merge);
        self.begin_block(else_label);
    }

    fn end_if(&mut self, else_values: &[SpirvValue]) -> Vec<SpirvValue> {
        if !matches!(self.frames.last(), Some(Frame::If { .. })) {
            self.fail_contract("end_if without an open if".into());
            return Vec::new();
        }
        let Some(Frame::If { merge, else_label, results, then_out }) = self.frames.pop() else {
            return Vec::new();
        };
        let then_out = match then_out {
            Some(t) => t,
            None => {
                // An `if` without else: the then-branch ends here and the else-branch is empty.
                if !results.is_empty() {
                    self.fail_contract("end_if without begin_else on an if that yields values".into());
                    return Vec::new();
                }
                let cur = self.cur_block;
                self.branch(merge);
                self.begin_block(else_label);
                (cur, Vec::new())
            }
        };
        self.check_yield(&results, else_values, "else-branch");
        let else_block = self.cur_block;
        self.branch(merge);
        self.begin_block(merge);
        let mut out = Vec::with_capacity(results.len());
        for (i, &d) in results.iter().enumerate() {
            let (Some(t), Some(e)) = (then_out.1.get(i), else_values.get(i)) else {
                break;
            };
            let ty = self.ty(d);
            let r = self.b.phi(ty, None, [(t.id, then_out.0), (e.id, else_block)]);
            let id = self.check_build(r);
            if self.rounded_f16.contains(&t.id) || self.rounded_f16.contains(&e.id) {
                self.rounded_f16.insert(id);
            }
            out.push(self.value(id, d));
        }
        out
    }

    fn begin_loop(
        &mut self,
        iv_dtype: DType,
        lower: SpirvValue,
        upper: SpirvValue,
        step: SpirvValue,
        carried: &[(DType, SpirvValue)],
    ) -> (SpirvValue, Vec<SpirvValue>) {
        self.expect(lower, iv_dtype, "loop lower bound");
        self.expect(upper, iv_dtype, "loop upper bound");
        self.expect(step, iv_dtype, "loop step");
        for (i, &(d, v)) in carried.iter().enumerate() {
            self.expect(v, d, &format!("loop-carried value {i}"));
        }
        if !iv_dtype.is_int() || iv_dtype == DType::I1 {
            self.fail_contract(format!("loop induction variable of dtype {iv_dtype}"));
        }
        let t = self.ty(iv_dtype);
        let bt = self.bool_ty();
        let signed = is_signed(iv_dtype);
        let (lo, hi) = iv_dtype.int_range().unwrap_or((0, 0));
        // Loop-invariant pieces, in the preheader: the direction, the last iv from which a step
        // would leave the dtype (the loop stops there instead of wrapping, as the interpreter
        // does), and whether the first iteration runs at all. A zero step runs nothing.
        let zero = self.c_int(iv_dtype, 0);
        let step_pos = self.b_op(if signed { Op::SGreaterThan } else { Op::UGreaterThan }, step.id, zero);
        let max = self.c_int(iv_dtype, hi);
        let min = self.c_int(iv_dtype, lo);
        let up_lim = self.emit(Op::ISub, t, &[max, step.id]);
        let down_lim = self.emit(Op::ISub, t, &[min, step.id]);
        let limit = self.sel(t, step_pos, up_lim, down_lim);
        let (lt, gt) = if signed { (Op::SLessThan, Op::SGreaterThan) } else { (Op::ULessThan, Op::UGreaterThan) };
        let first_up = self.b_op(lt, lower.id, upper.id);
        let first_down = self.b_op(gt, lower.id, upper.id);
        let first = self.sel(bt, step_pos, first_up, first_down);
        let nonzero = self.b_op(Op::INotEqual, step.id, zero);
        let first = self.b_op(Op::LogicalAnd, first, nonzero);
        let pre = self.cur_block;
        let (header, body, cont, merge) = (self.b.id(), self.b.id(), self.b.id(), self.b.id());
        let (iv_next, go_next) = (self.b.id(), self.b.id());
        self.branch(header);
        self.begin_block(header);
        let iv = self.b.id();
        self.push_inst(Instruction::new(
            Op::Phi,
            Some(t),
            Some(iv),
            vec![Operand::IdRef(lower.id), Operand::IdRef(pre), Operand::IdRef(iv_next), Operand::IdRef(cont)],
        ));
        let go = self.b.id();
        self.push_inst(Instruction::new(
            Op::Phi,
            Some(bt),
            Some(go),
            vec![Operand::IdRef(first), Operand::IdRef(pre), Operand::IdRef(go_next), Operand::IdRef(cont)],
        ));
        let mut phis = Vec::with_capacity(carried.len());
        let mut frame_carried = Vec::with_capacity(carried.len());
        for &(d, v) in carried {
            let coop = self.coop_types.get(&v.id).copied();
            let ty = match coop {
                Some(t) => t,
                None => self.ty(d),
            };
            let (phi, next) = (self.b.id(), self.b.id());
            if let Some(t) = coop {
                self.coop_types.insert(phi, t);
                self.coop_types.insert(next, t);
            }
            self.push_inst(Instruction::new(
                Op::Phi,
                Some(ty),
                Some(phi),
                vec![Operand::IdRef(v.id), Operand::IdRef(pre), Operand::IdRef(next), Operand::IdRef(cont)],
            ));
            // Its next value is not emitted yet: any carried f16 may hold a rounded one.
            if d == DType::F16 {
                self.rounded_f16.insert(phi);
            }
            let pv = self.value(phi, d);
            phis.push(pv);
            frame_carried.push((pv, next));
        }
        let r = self.b.loop_merge(merge, cont, spirv::LoopControl::NONE, []);
        self.check_build(r);
        let r = self.b.branch_conditional(go, body, merge, []);
        self.check_build(r);
        self.begin_block(body);
        let ivv = self.value(iv, iv_dtype);
        self.frames.push(Frame::Loop {
            header,
            cont,
            merge,
            iv: ivv,
            step: step.id,
            upper: upper.id,
            step_pos,
            limit,
            iv_next,
            go_next,
            carried: frame_carried,
        });
        (ivv, phis)
    }

    fn end_loop(&mut self, next: &[SpirvValue]) -> Vec<SpirvValue> {
        if !matches!(self.frames.last(), Some(Frame::Loop { .. })) {
            self.fail_contract("end_loop without an open loop".into());
            return Vec::new();
        }
        let Some(Frame::Loop { header, cont, merge, iv, step, upper, step_pos, limit, iv_next, go_next, carried }) = self.frames.pop() else {
            return Vec::new();
        };
        if next.len() != carried.len() {
            self.fail_contract(format!("end_loop with {} values for {} carried", next.len(), carried.len()));
        }
        self.branch(cont);
        self.begin_block(cont);
        for (i, &(phi, next_id)) in carried.iter().enumerate() {
            let v = next.get(i).copied().unwrap_or(phi);
            self.expect(v, phi.dtype, &format!("next value of loop-carried value {i}"));
            let ty = match self.coop_types.get(&phi.id).copied() {
                Some(t) => {
                    if self.coop_types.get(&v.id) != Some(&t) {
                        self.fail_contract(format!("loop-carried value {i} is a cooperative matrix whose next value is not one of its type"));
                    }
                    t
                }
                None => self.ty(phi.dtype),
            };
            self.emit_with_id(next_id, Op::CopyObject, ty, &[v.id]);
        }
        let t = self.ty(iv.dtype);
        let bt = self.bool_ty();
        let signed = is_signed(iv.dtype);
        self.emit_with_id(iv_next, Op::IAdd, t, &[iv.id, step]);
        let (lt, gt) = if signed { (Op::SLessThan, Op::SGreaterThan) } else { (Op::ULessThan, Op::UGreaterThan) };
        let over_up = self.b_op(gt, iv.id, limit);
        let over_down = self.b_op(lt, iv.id, limit);
        let overflow = self.sel(bt, step_pos, over_up, over_down);
        let in_up = self.b_op(lt, iv_next, upper);
        let in_down = self.b_op(gt, iv_next, upper);
        let in_range = self.sel(bt, step_pos, in_up, in_down);
        let no_overflow = self.emit(Op::LogicalNot, bt, &[overflow]);
        self.emit_with_id(go_next, Op::LogicalAnd, bt, &[no_overflow, in_range]);
        self.branch(header);
        self.begin_block(merge);
        carried.iter().map(|&(phi, _)| phi).collect()
    }
}

impl SpirvEmitter {
    fn check_yield(&mut self, results: &[DType], values: &[SpirvValue], what: &str) {
        if results.len() != values.len() {
            self.fail_contract(format!("the {what} yields {} values, the if declares {}", values.len(), results.len()));
            return;
        }
        for (i, (&d, v)) in results.iter().zip(values).enumerate() {
            self.expect(*v, d, &format!("value {i} yielded by the {what}"));
        }
    }
}

/// Whether the constant `v` of float dtype `d` is subnormal: a device without denormal
/// preservation may flush it, so operations on it are not folded to the interpreter's answer.
fn subnormal(d: DType, v: f32) -> bool {
    tilekit_core::interp::flush_subnormal(d, v).to_bits() != v.to_bits()
}
