//! An emulator of lowered programs: the per-thread program the GPU lowering emits, recorded and
//! run on the CPU with every thread of a program in lock-step.
//!
//! It checks the shared lowering (layouts, conversions, reductions, barriers) without a GPU and
//! without a backend: its element semantics are the interpreter's, so any difference between the
//! two is a lowering bug, with one stated exception: a float `reduce` (sum, prod) combines in the
//! order of its operand's layout (within a thread, then across lanes, then across warps) where
//! the interpreter combines a pairwise tree, so the two may round differently. It also catches what lock-step would hide on a real device: a read of
//! shared memory that another thread wrote since the last barrier (a missing barrier), a barrier
//! reached by only some threads, and shuffles across warps.

mod pressure;

use std::collections::HashMap;

use rayon::prelude::*;

use crate::buffer::HostBuffer;
use crate::dtype::{DType, Scalar};
use crate::gpu::emit::{CoopRole, Emitter, SharedMatrix, WgmmaA};
use crate::gpu::layout::Mma;
use crate::gpu::lower::{lower_fitting, LowerError, LowerInfo, LowerOptions};
use crate::gpu::target::MatrixInstr;
use crate::gpu::target::Target;
use crate::interp::{
    atomic_new_bits, binary_float, binary_int, float_bits, float_to_int, from_bits, int_to_float, int_to_int, round_to, unary_float, unary_int, Arg,
    Elem,
};
use crate::ir::*;

/// A register of the recorded program.
pub type Reg = u32;

/// The `a` operand of [`SInst::Wgmma`].
#[derive(Clone, Debug)]
enum WgA {
    Registers(Vec<Reg>),
    Shared(SharedMatrix<Reg>),
}

/// One recorded per-thread instruction.
#[derive(Clone, Debug)]
enum SInst {
    Const {
        dst: Reg,
        dtype: DType,
        value: Scalar,
    },
    ThreadIndex {
        dst: Reg,
    },
    ProgramId {
        dst: Reg,
        axis: u32,
    },
    NumPrograms {
        dst: Reg,
        axis: u32,
    },
    Param {
        dst: Reg,
        param: u32,
    },
    Unary {
        dst: Reg,
        op: UnaryOp,
        dtype: DType,
        x: Reg,
    },
    Binary {
        dst: Reg,
        op: BinaryOp,
        dtype: DType,
        a: Reg,
        b: Reg,
    },
    Cmp {
        dst: Reg,
        pred: CmpPred,
        a: Reg,
        b: Reg,
    },
    Select {
        dst: Reg,
        c: Reg,
        a: Reg,
        b: Reg,
    },
    Fma {
        dst: Reg,
        dtype: DType,
        a: Reg,
        b: Reg,
        c: Reg,
    },
    Cast {
        dst: Reg,
        to: DType,
        x: Reg,
    },
    Bitcast {
        dst: Reg,
        from: DType,
        to: DType,
        x: Reg,
    },
    Load {
        dst: Reg,
        buffer: u32,
        dtype: DType,
        index: Reg,
    },
    /// `n` consecutive elements where `mask` holds; zeros and no access elsewhere.
    LoadMasked {
        dsts: Vec<Reg>,
        buffer: u32,
        dtype: DType,
        index: Reg,
        mask: Reg,
    },
    Store {
        buffer: u32,
        dtype: DType,
        index: Reg,
        value: Reg,
    },
    Atomic {
        dst: Reg,
        op: Option<AtomicOp>,
        buffer: u32,
        dtype: DType,
        index: Reg,
        cmp: Option<Reg>,
        value: Reg,
    },
    LoadShared {
        dst: Reg,
        dtype: DType,
        index: Reg,
    },
    StoreShared {
        dtype: DType,
        index: Reg,
        value: Reg,
    },
    Barrier,
    /// An asynchronous copy of `n` elements from global to shared memory.
    AsyncCopy {
        buffer: u32,
        dtype: DType,
        index: Reg,
        shared_index: Reg,
        n: u32,
        pred: Reg,
    },
    AsyncCommit,
    AsyncWait {
        pending: u32,
    },
    /// A warp-level load of 8 x 8 matrices from shared memory (`ldmatrix`).
    LoadMatrix {
        dtype: DType,
        row: Reg,
        trans: bool,
        d: Vec<Reg>,
    },
    /// A warp-level matrix instruction: every lane's fragments in, every lane's results out.
    Mma {
        instr: MatrixInstr,
        a: Vec<Reg>,
        b: Vec<Reg>,
        c: Vec<Reg>,
        d: Vec<Reg>,
    },
    /// A warpgroup-level matrix instruction: the four warps' accumulators in and out, `a` in
    /// fragments or shared memory, `b` in shared memory ([`Emitter::wgmma`]).
    Wgmma {
        instr: MatrixInstr,
        n: u32,
        a: WgA,
        b: SharedMatrix<Reg>,
        c: Vec<Reg>,
        d: Vec<Reg>,
    },
    /// Closes each warpgroup's group of warpgroup matrix instructions and completes all but its
    /// `pending` newest groups: the shared memory they read may be written again.
    WgmmaWait {
        pending: u32,
    },
    /// `fence.proxy.async.shared::cta`: this thread's shared-memory writes so far become
    /// visible to warpgroup matrix instructions (after a barrier, for other threads' ones).
    FenceAsync,
    /// A shared-memory barrier (`shared_i64[barrier]`) initialized for one arrival per phase.
    MbarInit {
        barrier: Reg,
    },
    MbarInval {
        barrier: Reg,
    },
    /// An arrival that also expects `bytes` of copies on the barrier's phase.
    MbarExpect {
        barrier: Reg,
        bytes: u32,
    },
    /// Waits for the barrier's phase of parity `parity`.
    MbarWait {
        barrier: Reg,
        parity: Reg,
    },
    /// A box of tensor map `map` at (`coords[0]`, `coords[1]`) copied to `shared[dtype]` at
    /// `shared_index`, in 128-byte swizzled rows, completing on `barrier`.
    TensorCopy {
        map: u32,
        dtype: DType,
        shared_index: Reg,
        coords: [Reg; 2],
        barrier: Reg,
    },
    /// A cooperative matrix ([`Coop`]) with every element `value`.
    CoopFill {
        d: Coop,
        value: Reg,
    },
    /// A cooperative matrix loaded from shared memory: element (`r`, `c`) at `index + r *
    /// stride + c` (`col_major`: `index + c * stride + r`); `staged`: from the staging array.
    CoopLoad {
        d: Coop,
        dtype: DType,
        index: Reg,
        stride: u32,
        col_major: bool,
        staged: bool,
    },
    /// 16 bytes stored to the staging array of `dtype` at `index ..`.
    StoreStaging {
        dtype: DType,
        index: Reg,
        values: Vec<Reg>,
    },
    /// An accumulator stored to shared f32 as [`SInst::CoopLoad`] addresses it.
    CoopStore {
        value: Coop,
        index: Reg,
        stride: u32,
    },
    CoopMulAdd {
        a: Coop,
        b: Coop,
        c: Coop,
        d: Coop,
    },
    ShuffleXor {
        dst: Reg,
        x: Reg,
        mask: u32,
    },
    If {
        cond: Reg,
        then_body: Vec<SInst>,
        then_vals: Vec<Reg>,
        else_body: Vec<SInst>,
        else_vals: Vec<Reg>,
        results: Vec<Reg>,
    },
    Loop {
        /// The induction variable's dtype: the loop stops where the next value would leave it.
        iv_dtype: DType,
        lower: Reg,
        upper: Reg,
        step: Reg,
        init: Vec<Reg>,
        iv: Reg,
        args: Vec<Reg>,
        body: Vec<SInst>,
        next: Vec<Reg>,
        results: Vec<Reg>,
    },
}

/// A cooperative matrix of `rows x cols` as the emulator holds it: element `e` (row-major) in
/// register `first + e / warp` of lane `e % warp`, transposed (`e` counted column-major) to
/// keep the lowering from depending on any map; the driver's is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Coop {
    first: Reg,
    rows: u32,
    cols: u32,
}

impl Coop {
    fn regs(&self, warp: u32) -> u32 {
        (self.rows * self.cols).div_ceil(warp)
    }

    /// Lane and register of element (`r`, `c`).
    fn place(&self, warp: u32, r: u32, c: u32) -> (u32, Reg) {
        let e = c * self.rows + r;
        (e % warp, self.first + e / warp)
    }
}

/// Open control-flow regions while recording.
enum Frame {
    If { cond: Reg, outer: Vec<SInst>, then_body: Option<(Vec<SInst>, Vec<Reg>)>, results: Vec<Reg> },
    Loop { outer: Vec<SInst>, iv_dtype: DType, lower: Reg, upper: Reg, step: Reg, init: Vec<Reg>, iv: Reg, args: Vec<Reg>, results: Vec<Reg> },
}

/// Records the per-thread program through the [`Emitter`] trait.
#[derive(Default)]
pub struct Recorder {
    code: Vec<SInst>,
    frames: Vec<Frame>,
    next: Reg,
    shared: Vec<(DType, u32)>,
    /// Staging arrays ([`Emitter::reserve_staging`]): the emulator places each after the
    /// shared array of its dtype.
    staging: Vec<(DType, u32)>,
    /// Lanes per warp (the size of a cooperative matrix's register block).
    warp: u32,
    /// Cooperative matrices by their first register.
    coops: std::collections::HashMap<Reg, Coop>,
    /// Whether the target copies tensors ([`Emitter::tensor_copies`]): those with warpgroup
    /// matrix instructions.
    tensor: bool,
}

impl Recorder {
    fn reg(&mut self) -> Reg {
        self.next += 1;
        self.next - 1
    }

    /// A new cooperative matrix of `rows x cols`: a block of registers, named by its first.
    fn coop(&mut self, rows: u32, cols: u32) -> Coop {
        let c = Coop { first: self.next, rows, cols };
        self.next += c.regs(self.warp.max(1));
        self.coops.insert(c.first, c);
        c
    }

    /// A [`SInst::CoopLoad`] of `instr`'s operand `role`.
    #[allow(clippy::too_many_arguments)]
    fn record_coop_load(&mut self, instr: MatrixInstr, role: CoopRole, dtype: DType, index: Reg, stride: u32, col_major: bool, staged: bool) -> Reg {
        let (rows, cols) = match role {
            CoopRole::A => (instr.m, instr.k),
            CoopRole::B => (instr.k, instr.n),
            CoopRole::Acc => (instr.m, instr.n),
        };
        let d = self.coop(rows, cols);
        self.push(SInst::CoopLoad { d, dtype, index, stride, col_major, staged });
        d.first
    }

    /// `regs` with each cooperative matrix replaced by its block of registers.
    fn expand(&self, regs: &[Reg]) -> Vec<Reg> {
        regs.iter()
            .flat_map(|r| match self.coops.get(r) {
                Some(c) => (c.first..c.first + c.regs(self.warp.max(1))).collect(),
                None => vec![*r],
            })
            .collect()
    }

    /// Fresh registers shaped like `like` (a block for each cooperative matrix).
    fn fresh_like(&mut self, like: &[Reg]) -> Vec<Reg> {
        like.iter()
            .map(|r| match self.coops.get(r).copied() {
                Some(c) => self.coop(c.rows, c.cols).first,
                None => self.reg(),
            })
            .collect()
    }

    fn coop_of(&self, r: Reg) -> Option<Coop> {
        self.coops.get(&r).copied()
    }
    fn push(&mut self, i: SInst) {
        self.code.push(i);
    }
}

impl Emitter for Recorder {
    type V = Reg;
    fn constant(&mut self, dtype: DType, value: Scalar) -> Reg {
        let dst = self.reg();
        self.push(SInst::Const { dst, dtype, value });
        dst
    }
    fn thread_index(&mut self) -> Reg {
        let dst = self.reg();
        self.push(SInst::ThreadIndex { dst });
        dst
    }
    fn program_id(&mut self, axis: u32) -> Reg {
        let dst = self.reg();
        self.push(SInst::ProgramId { dst, axis });
        dst
    }
    fn num_programs(&mut self, axis: u32) -> Reg {
        let dst = self.reg();
        self.push(SInst::NumPrograms { dst, axis });
        dst
    }
    fn scalar_param(&mut self, param: u32, _dtype: DType) -> Reg {
        let dst = self.reg();
        self.push(SInst::Param { dst, param });
        dst
    }
    fn unary(&mut self, op: UnaryOp, dtype: DType, x: Reg) -> Reg {
        let dst = self.reg();
        self.push(SInst::Unary { dst, op, dtype, x });
        dst
    }
    fn binary(&mut self, op: BinaryOp, dtype: DType, a: Reg, b: Reg) -> Reg {
        let dst = self.reg();
        self.push(SInst::Binary { dst, op, dtype, a, b });
        dst
    }
    fn cmp(&mut self, pred: CmpPred, _dtype: DType, a: Reg, b: Reg) -> Reg {
        let dst = self.reg();
        self.push(SInst::Cmp { dst, pred, a, b });
        dst
    }
    fn select(&mut self, _dtype: DType, c: Reg, a: Reg, b: Reg) -> Reg {
        let dst = self.reg();
        self.push(SInst::Select { dst, c, a, b });
        dst
    }
    fn fma(&mut self, dtype: DType, a: Reg, b: Reg, c: Reg) -> Reg {
        let dst = self.reg();
        self.push(SInst::Fma { dst, dtype, a, b, c });
        dst
    }
    fn cast(&mut self, from: DType, to: DType, x: Reg) -> Reg {
        let dst = self.reg();
        let _ = from;
        self.push(SInst::Cast { dst, to, x });
        dst
    }
    fn bitcast(&mut self, from: DType, to: DType, x: Reg) -> Reg {
        let dst = self.reg();
        self.push(SInst::Bitcast { dst, from, to, x });
        dst
    }
    fn load_global(&mut self, buffer: u32, dtype: DType, index: Reg, _index_dtype: DType) -> Reg {
        let dst = self.reg();
        self.push(SInst::Load { dst, buffer, dtype, index });
        dst
    }
    fn load_global_masked(&mut self, buffer: u32, dtype: DType, index: Reg, _index_dtype: DType, n: u32, mask: Reg) -> Vec<Reg> {
        let dsts: Vec<Reg> = (0..n).map(|_| self.reg()).collect();
        self.push(SInst::LoadMasked { dsts: dsts.clone(), buffer, dtype, index, mask });
        dsts
    }
    fn store_global(&mut self, buffer: u32, dtype: DType, index: Reg, _index_dtype: DType, value: Reg) {
        self.push(SInst::Store { buffer, dtype, index, value });
    }
    fn atomic_global(
        &mut self,
        op: Option<AtomicOp>,
        buffer: u32,
        dtype: DType,
        index: Reg,
        _index_dtype: DType,
        cmp: Option<Reg>,
        value: Reg,
    ) -> Reg {
        let dst = self.reg();
        self.push(SInst::Atomic { dst, op, buffer, dtype, index, cmp, value });
        dst
    }
    fn max_vector(&self, dtype: DType) -> u32 {
        // Vector accesses run as consecutive scalar ones here, but the lowering takes its
        // vector paths (layouts, whole-vector masks), which is what the emulator checks.
        16 / dtype.size_bytes() as u32
    }
    fn reserve_shared(&mut self, dtype: DType, len: u32) {
        match self.shared.iter_mut().find(|(d, _)| *d == dtype) {
            Some((_, n)) => *n = (*n).max(len),
            None => self.shared.push((dtype, len)),
        }
    }
    fn load_shared(&mut self, dtype: DType, index: Reg) -> Reg {
        let dst = self.reg();
        self.push(SInst::LoadShared { dst, dtype, index });
        dst
    }
    fn store_shared(&mut self, dtype: DType, index: Reg, value: Reg) {
        self.push(SInst::StoreShared { dtype, index, value });
    }
    fn barrier(&mut self) {
        self.push(SInst::Barrier);
    }
    fn async_copies(&self) -> bool {
        true
    }
    fn async_copy(&mut self, buffer: u32, dtype: DType, index: Reg, _index_dtype: DType, shared_index: Reg, n: u32, pred: Reg) {
        self.push(SInst::AsyncCopy { buffer, dtype, index, shared_index, n, pred });
    }
    fn async_commit(&mut self) {
        self.push(SInst::AsyncCommit);
    }
    fn async_wait(&mut self, pending: u32) {
        self.push(SInst::AsyncWait { pending });
    }
    fn load_shared_matrix(&mut self, dtype: DType, row: Reg, count: u32, trans: bool) -> Option<Vec<Reg>> {
        // Two 16-bit elements a matrix, or one of f32.
        let per = if dtype == DType::F32 { 1 } else { 2 };
        let d: Vec<Reg> = (0..per * count).map(|_| self.reg()).collect();
        self.push(SInst::LoadMatrix { dtype, row, trans, d: d.clone() });
        Some(d)
    }
    fn mma(&mut self, instr: MatrixInstr, a: &[Reg], b: &[Reg], c: &[Reg]) -> Option<Vec<Reg>> {
        let d: Vec<Reg> = c.iter().map(|_| self.reg()).collect();
        self.push(SInst::Mma { instr, a: a.to_vec(), b: b.to_vec(), c: c.to_vec(), d: d.clone() });
        Some(d)
    }
    fn coop_matrices(&self) -> bool {
        true
    }
    fn coop_fill(&mut self, instr: MatrixInstr, value: Reg) -> Option<Reg> {
        let d = self.coop(instr.m, instr.n);
        self.push(SInst::CoopFill { d, value });
        Some(d.first)
    }
    fn coop_load(&mut self, instr: MatrixInstr, role: CoopRole, dtype: DType, index: Reg, stride: u32, col_major: bool) -> Option<Reg> {
        Some(self.record_coop_load(instr, role, dtype, index, stride, col_major, false))
    }
    fn staging_vectors(&self) -> bool {
        true
    }
    fn reserve_staging(&mut self, dtype: DType, len: u32) {
        match self.staging.iter_mut().find(|(d, _)| *d == dtype) {
            Some((_, n)) => *n = (*n).max(len),
            None => self.staging.push((dtype, len)),
        }
    }
    fn store_staging(&mut self, dtype: DType, index: Reg, values: &[Reg]) {
        self.push(SInst::StoreStaging { dtype, index, values: values.to_vec() });
    }
    fn coop_load_staged(&mut self, instr: MatrixInstr, role: CoopRole, dtype: DType, index: Reg, stride: u32, col_major: bool) -> Option<Reg> {
        Some(self.record_coop_load(instr, role, dtype, index, stride, col_major, true))
    }
    fn coop_store(&mut self, _instr: MatrixInstr, value: Reg, index: Reg, stride: u32) -> Option<()> {
        let value = self.coop_of(value)?;
        self.push(SInst::CoopStore { value, index, stride });
        Some(())
    }
    fn coop_mul_add(&mut self, instr: MatrixInstr, a: Reg, b: Reg, c: Reg) -> Option<Reg> {
        let (a, b, c) = (self.coop_of(a)?, self.coop_of(b)?, self.coop_of(c)?);
        let d = self.coop(instr.m, instr.n);
        self.push(SInst::CoopMulAdd { a, b, c, d });
        Some(d.first)
    }
    fn wgmma(&mut self, instr: MatrixInstr, n: u32, a: WgmmaA<'_, Reg>, b: SharedMatrix<Reg>, c: &[Reg]) -> Option<Vec<Reg>> {
        let d: Vec<Reg> = c.iter().map(|_| self.reg()).collect();
        let a = match a {
            WgmmaA::Registers(regs) => WgA::Registers(regs.to_vec()),
            WgmmaA::Shared(m) => WgA::Shared(m),
        };
        self.push(SInst::Wgmma { instr, n, a, b, c: c.to_vec(), d: d.clone() });
        Some(d)
    }
    fn wgmma_wait(&mut self, pending: u32, values: &[Reg]) -> Vec<Reg> {
        self.push(SInst::WgmmaWait { pending });
        values.to_vec()
    }
    fn fence_async_shared(&mut self) {
        self.push(SInst::FenceAsync);
    }
    fn tensor_copies(&self) -> bool {
        self.tensor
    }
    fn mbarrier_init(&mut self, barrier: Reg) {
        self.push(SInst::MbarInit { barrier });
    }
    fn mbarrier_invalidate(&mut self, barrier: Reg) {
        self.push(SInst::MbarInval { barrier });
    }
    fn mbarrier_expect(&mut self, barrier: Reg, bytes: u32) {
        self.push(SInst::MbarExpect { barrier, bytes });
    }
    fn mbarrier_wait(&mut self, barrier: Reg, parity: Reg) {
        self.push(SInst::MbarWait { barrier, parity });
    }
    fn tensor_copy(&mut self, map: u32, dtype: DType, shared_index: Reg, coords: [Reg; 2], barrier: Reg) {
        self.push(SInst::TensorCopy { map, dtype, shared_index, coords, barrier });
    }
    fn shuffle_xor(&mut self, _dtype: DType, x: Reg, mask: u32) -> Reg {
        let dst = self.reg();
        self.push(SInst::ShuffleXor { dst, x, mask });
        dst
    }
    fn begin_if(&mut self, cond: Reg, result_dtypes: &[DType]) {
        let results = result_dtypes.iter().map(|_| self.reg()).collect();
        let outer = std::mem::take(&mut self.code);
        self.frames.push(Frame::If { cond, outer, then_body: None, results });
    }
    fn begin_else(&mut self, then_values: &[Reg]) {
        let body = std::mem::take(&mut self.code);
        if let Some(Frame::If { then_body, .. }) = self.frames.last_mut() {
            *then_body = Some((body, then_values.to_vec()));
        }
    }
    fn end_if(&mut self, else_values: &[Reg]) -> Vec<Reg> {
        let else_body = std::mem::take(&mut self.code);
        match self.frames.pop() {
            Some(Frame::If { cond, outer, then_body, results }) => {
                let (then_body, then_vals) = then_body.unwrap_or_default();
                self.code = outer;
                self.push(SInst::If { cond, then_body, then_vals, else_body, else_vals: else_values.to_vec(), results: results.clone() });
                results
            }
            _ => panic!("end_if without begin_if: a lowering bug"),
        }
    }
    fn begin_loop(&mut self, iv_dtype: DType, lower: Reg, upper: Reg, step: Reg, carried: &[(DType, Reg)]) -> (Reg, Vec<Reg>) {
        let iv = self.reg();
        // A carried cooperative matrix is carried as its block of registers.
        let init: Vec<Reg> = carried.iter().map(|c| c.1).collect();
        let args = self.fresh_like(&init);
        let results = self.fresh_like(&init);
        let outer = std::mem::take(&mut self.code);
        self.frames.push(Frame::Loop { outer, iv_dtype, lower, upper, step, init, iv, args: args.clone(), results });
        (iv, args)
    }
    fn end_loop(&mut self, next: &[Reg]) -> Vec<Reg> {
        let body = std::mem::take(&mut self.code);
        match self.frames.pop() {
            Some(Frame::Loop { outer, iv_dtype, lower, upper, step, init, iv, args, results }) => {
                self.code = outer;
                let (init, args_x, next, results_x) = (self.expand(&init), self.expand(&args), self.expand(next), self.expand(&results));
                if init.len() != args_x.len() || next.len() != args_x.len() {
                    panic!("a loop carries cooperative matrices where it started with other values: a lowering bug");
                }
                self.push(SInst::Loop { iv_dtype, lower, upper, step, init, iv, args: args_x, body, next, results: results_x });
                results
            }
            _ => panic!("end_loop without begin_loop: a lowering bug"),
        }
    }
}

/// Why an emulated launch failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimtError {
    #[error(transparent)]
    Lower(#[from] LowerError),
    #[error(transparent)]
    Args(#[from] crate::interp::InterpError),
    #[error("program {pid:?}, thread {thread}: {what}")]
    Fault { pid: [u32; 3], thread: u32, what: String },
}

/// A lowered program ready to run on the emulator.
pub struct Lowered {
    code: Vec<SInst>,
    regs: u32,
    shared: Vec<(DType, u32)>,
    /// Where each staging array starts in the shared array of its dtype.
    staging_base: Vec<(DType, u32)>,
    pub info: LowerInfo,
    warp: u32,
    /// Dtype of each scalar parameter (None for buffers).
    param_dtypes: Vec<Option<DType>>,
}

/// Lowers `program` for `target` and records the per-thread program.
pub fn compile(program: &Program, target: &Target, options: &LowerOptions) -> Result<Lowered, LowerError> {
    let (rec, info) = lower_fitting(
        program,
        target,
        options,
        || {
            let tensor = target.matrix.iter().any(|m| m.kind == crate::gpu::MatrixKind::Wgmma);
            Ok(Recorder { warp: target.subgroup_size, tensor, ..Recorder::default() })
        },
        |e| e,
    )?;
    let param_dtypes = program
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Scalar { dtype } => Some(dtype),
            ParamKind::Buffer { .. } => None,
        })
        .collect();
    // Each staging array after the shared array of its dtype, at a 16-byte boundary.
    let mut shared = rec.shared;
    let mut staging_base = Vec::new();
    for &(d, n) in &rec.staging {
        let per = (16 / crate::gpu::lower::smem_elem_bytes(d)) as u32;
        let at = match shared.iter_mut().find(|(s, _)| *s == d) {
            Some((_, len)) => {
                let base = len.div_ceil(per) * per;
                *len = base + n;
                base
            }
            None => {
                shared.push((d, n));
                0
            }
        };
        staging_base.push((d, at));
    }
    Ok(Lowered { code: rec.code, regs: rec.next, shared, staging_base, info, warp: target.subgroup_size, param_dtypes })
}

impl Lowered {
    /// The most 32-bit registers the program's values hold at once in one thread (a floor
    /// under an assembler's allocation: its addresses and temporaries come on top).
    pub fn peak_registers(&self) -> u32 {
        pressure::peak(&self.code, self.warp)
    }

    /// Number of recorded per-thread instructions (nested ones included).
    pub fn num_instructions(&self) -> usize {
        fn count(c: &[SInst]) -> usize {
            c.iter()
                .map(|i| match i {
                    SInst::If { then_body, else_body, .. } => 1 + count(then_body) + count(else_body),
                    SInst::Loop { body, .. } => 1 + count(body),
                    _ => 1,
                })
                .sum()
        }
        count(&self.code)
    }

    /// Runs the lowered program over `grid` with `args` (as [`crate::interp::run`] takes them).
    pub fn run(&self, program: &Program, grid: [u32; 3], args: &[Arg<'_>]) -> Result<(), SimtError> {
        // Argument checking is the interpreter's: run it on an empty grid.
        crate::interp::run(program, [0, 1, 1], args)?;
        let total = grid.iter().map(|&g| g as u64).product::<u64>();
        (0..total).into_par_iter().try_for_each(|lin| {
            let pid =
                [(lin % grid[0] as u64) as u32, ((lin / grid[0] as u64) % grid[1] as u64) as u32, (lin / (grid[0] as u64 * grid[1] as u64)) as u32];
            let threads = self.info.threads as usize;
            let mut m = Machine {
                lowered: self,
                args,
                grid,
                pid,
                threads,
                regs: vec![Vec::new(); self.regs as usize],
                shared: self.shared.iter().map(|&(d, n)| (d, vec![SharedSlot::default(); n as usize])).collect(),
                epoch: 0,
                copies: vec![Default::default(); threads],
                writes: 0,
                fenced: vec![0; threads],
                wg_reads: vec![Default::default(); threads.div_ceil(128)],
                mbarriers: HashMap::new(),
            };
            let active = vec![true; threads];
            m.exec(&self.code, &active)
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct SharedSlot {
    value: Elem,
    /// Barrier epoch and thread of the last write (None: never written).
    written: Option<(u64, u32)>,
    /// An asynchronous copy to this slot has started and not been waited for: reading it, or
    /// writing it otherwise, is a race.
    pending: bool,
    /// The write's sequence number ([`Machine::writes`]).
    seq: u64,
    /// Reads of this slot by warpgroup matrix instructions not yet waited for: writing it is
    /// a race.
    readers: u32,
    /// Barrier epoch of the last read, the warp that made it first in that epoch, and whether
    /// another warp read it too: another value written in that epoch by another warp is a
    /// write-after-read race (the read may see the new value on a GPU).
    read: Option<(u64, u32, bool)>,
}

/// Whether a warp other than `warp` read `slot` in barrier epoch `epoch` and `v` would change
/// what it read: a write of `v` by `warp` is then a write-after-read race.
fn read_by_other_warp(slot: &SharedSlot, epoch: u64, warp: u32, v: Elem) -> bool {
    matches!(slot.read, Some((e, first, others)) if e == epoch && (first != warp || others)) && !same_elem(slot.value, v)
}

impl Default for SharedSlot {
    fn default() -> Self {
        SharedSlot { value: Elem::I(0), written: None, pending: false, seq: 0, readers: 0, read: None }
    }
}

struct Machine<'a> {
    lowered: &'a Lowered,
    args: &'a [Arg<'a>],
    grid: [u32; 3],
    pid: [u32; 3],
    threads: usize,
    /// Per register, per thread.
    regs: Vec<Vec<Elem>>,
    shared: Vec<(DType, Vec<SharedSlot>)>,
    epoch: u64,
    /// Per thread, the committed groups of asynchronous copies not yet waited for (oldest
    /// first), then the group being filled; each copy is (shared dtype, index, value).
    copies: Vec<(Vec<CopyGroup>, CopyGroup)>,
    /// Shared-memory writes so far (each slot keeps the number of its last).
    writes: u64,
    /// Per thread, [`Machine::writes`] at its last [`SInst::FenceAsync`].
    fenced: Vec<u64>,
    /// Per warpgroup, the shared slots its warpgroup matrix instructions read, by group:
    /// committed groups not yet complete (oldest first), then the open one.
    wg_reads: Vec<(Vec<WgReads>, WgReads)>,
    /// Shared-memory barriers by their index in the i64 array.
    mbarriers: HashMap<i64, Mbarrier>,
}

/// A shared-memory barrier of tensor copies: one arrival per phase, and the bytes of copies
/// the phase still waits for. The copies' writes land when the phase completes and become
/// readable at the first wait for it (slots stay pending until then: a read before the wait
/// is a race the emulator reports).
#[derive(Default)]
struct Mbarrier {
    /// Phases completed.
    phase: u64,
    arrived: bool,
    bytes: i64,
    /// Writes of the copies of the current phase, then of the last completed one not yet
    /// waited for.
    copies: CopyGroup,
    landed: CopyGroup,
}

type WgReads = Vec<(DType, usize)>;

type CopyGroup = Vec<(DType, usize, Elem)>;

impl Machine<'_> {
    fn fault(&self, thread: usize, what: String) -> SimtError {
        SimtError::Fault { pid: self.pid, thread: thread as u32, what }
    }

    fn get(&self, r: Reg, t: usize) -> Elem {
        self.regs[r as usize].get(t).copied().unwrap_or(Elem::I(0))
    }

    fn set(&mut self, r: Reg, t: usize, v: Elem) {
        let col = &mut self.regs[r as usize];
        if col.len() < self.threads {
            col.resize(self.threads, Elem::I(0));
        }
        col[t] = v;
    }

    fn int(&self, r: Reg, t: usize) -> i64 {
        match self.get(r, t) {
            Elem::I(x) => x,
            Elem::F(x) => x as i64,
        }
    }

    fn buffer(&self, id: u32) -> &HostBuffer {
        match self.args[id as usize] {
            Arg::Buffer(b) => b,
            Arg::Scalar(_) => unreachable!("arguments were checked"),
        }
    }

    /// Where the staging array of `dtype` starts in its shared array.
    fn staging_base(&self, dtype: DType) -> i64 {
        self.lowered.staging_base.iter().find(|(d, _)| *d == dtype).map_or(0, |&(_, b)| b as i64)
    }

    fn shared_array(&mut self, dtype: DType) -> Option<&mut Vec<SharedSlot>> {
        self.shared.iter_mut().find(|(d, _)| *d == dtype).map(|(_, v)| v)
    }

    // Threads index several per-thread arrays (activity, registers) in lock-step.
    #[allow(clippy::needless_range_loop)]
    fn exec(&mut self, code: &[SInst], active: &[bool]) -> Result<(), SimtError> {
        let threads = self.threads;
        for inst in code {
            match inst {
                SInst::Barrier => {
                    if let Some(t) = active.iter().position(|a| !a) {
                        return Err(self.fault(t, "a barrier is reached by only some threads".into()));
                    }
                    self.epoch += 1;
                }
                SInst::If { cond, then_body, then_vals, else_body, else_vals, results } => {
                    let c: Vec<bool> = (0..threads).map(|t| active[t] && self.int(*cond, t) != 0).collect();
                    let e: Vec<bool> = (0..threads).map(|t| active[t] && self.int(*cond, t) == 0).collect();
                    // A branch no thread takes is not run: a barrier in it is reached by none
                    // (a uniform condition). One some threads take runs with the others
                    // inactive, and a barrier in it faults.
                    if c.iter().any(|&x| x) {
                        self.exec(then_body, &c)?;
                    }
                    if e.iter().any(|&x| x) {
                        self.exec(else_body, &e)?;
                    }
                    for t in 0..threads {
                        if active[t] {
                            let src = if c[t] { then_vals } else { else_vals };
                            for (r, s) in results.iter().zip(src) {
                                let v = self.get(*s, t);
                                self.set(*r, t, v);
                            }
                        }
                    }
                }
                SInst::Mma { instr, a, b, c, d } => self.mma(instr, a, b, c, d, active)?,
                SInst::CoopFill { .. } | SInst::CoopLoad { .. } | SInst::CoopStore { .. } | SInst::CoopMulAdd { .. } => self.coop(inst, active)?,
                SInst::LoadMatrix { dtype, row, trans, d } => self.load_matrix(*dtype, *row, *trans, d, active)?,
                SInst::Wgmma { instr, n, a, b, c, d } => self.wgmma(instr, *n, a, b, c, d, active)?,
                SInst::WgmmaWait { pending } => {
                    if let Some(t) = active.iter().position(|a| !a) {
                        return Err(self.fault(t, "a warpgroup matrix wait is reached by only some threads".into()));
                    }
                    for g in 0..self.wg_reads.len() {
                        let open = std::mem::take(&mut self.wg_reads[g].1);
                        self.wg_reads[g].0.push(open);
                        while self.wg_reads[g].0.len() > *pending as usize {
                            let done = self.wg_reads[g].0.remove(0);
                            for (d, i) in done {
                                if let Some(slot) = self.shared_array(d).and_then(|a| a.get_mut(i)) {
                                    slot.readers -= 1;
                                }
                            }
                        }
                    }
                }
                SInst::Loop { iv_dtype, lower, upper, step, init, iv, args, body, next, results } => {
                    for t in 0..threads {
                        if active[t] {
                            let lo = self.get(*lower, t);
                            self.set(*iv, t, lo);
                            for (a, i) in args.iter().zip(init) {
                                let v = self.get(*i, t);
                                self.set(*a, t, v);
                            }
                        }
                    }
                    let mut iterations = 0u64;
                    loop {
                        let running: Vec<bool> = (0..threads)
                            .map(|t| {
                                if !active[t] {
                                    return false;
                                }
                                let (i, hi, st) = (self.int(*iv, t), self.int(*upper, t), self.int(*step, t));
                                (st > 0 && i < hi) || (st < 0 && i > hi)
                            })
                            .collect();
                        if !running.iter().any(|&r| r) {
                            break;
                        }
                        if running != active {
                            return Err(self.fault(0, "loop trip counts differ between threads".into()));
                        }
                        iterations += 1;
                        if iterations > 1 << 32 {
                            return Err(self.fault(0, "loop runs more than 2^32 iterations".into()));
                        }
                        self.exec(body, &running)?;
                        for t in 0..threads {
                            if running[t] {
                                let vals: Vec<Elem> = next.iter().map(|n| self.get(*n, t)).collect();
                                for (a, v) in args.iter().zip(vals) {
                                    self.set(*a, t, v);
                                }
                                // Past the end of the induction variable's dtype the loop stops
                                // (the backends' loops do not wrap): iv becomes the bound.
                                let (i, st) = (self.int(*iv, t), self.int(*step, t));
                                let next = i.checked_add(st).filter(|&n| int_to_int(*iv_dtype, n) == n);
                                let next = next.unwrap_or_else(|| self.int(*upper, t));
                                self.set(*iv, t, Elem::I(next));
                            }
                        }
                    }
                    for t in 0..threads {
                        if active[t] {
                            for (r, a) in results.iter().zip(args) {
                                let v = self.get(*a, t);
                                self.set(*r, t, v);
                            }
                        }
                    }
                }
                _ => {
                    for t in 0..threads {
                        if active[t] {
                            self.step(inst, t)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn step(&mut self, inst: &SInst, t: usize) -> Result<(), SimtError> {
        let (dst, v) = match inst {
            SInst::Const { dst, dtype, value } => (*dst, const_elem(*dtype, *value)),
            SInst::ThreadIndex { dst } => (*dst, Elem::I(t as i64)),
            SInst::ProgramId { dst, axis } => (*dst, Elem::I(self.pid[*axis as usize] as i64)),
            SInst::NumPrograms { dst, axis } => (*dst, Elem::I(self.grid[*axis as usize] as i64)),
            SInst::Param { dst, param } => {
                let dtype = match self.lowered_param_dtype(*param) {
                    Some(d) => d,
                    None => return Err(self.fault(t, format!("parameter {param} is not a scalar"))),
                };
                let s = match self.args[*param as usize] {
                    Arg::Scalar(s) => s,
                    Arg::Buffer(_) => return Err(self.fault(t, format!("parameter {param} is a buffer"))),
                };
                (*dst, const_elem(dtype, s))
            }
            SInst::Unary { dst, op, dtype, x } => (
                *dst,
                match self.get(*x, t) {
                    Elem::I(a) => Elem::I(unary_int(*op, *dtype, a)),
                    Elem::F(a) => Elem::F(unary_float(*op, *dtype, a)),
                },
            ),
            SInst::Binary { dst, op, dtype, a, b } => (
                *dst,
                match (self.get(*a, t), self.get(*b, t)) {
                    (Elem::I(x), Elem::I(y)) => {
                        Elem::I(binary_int(*op, *dtype, x, y).map_err(|e| self.fault(t, format!("`{}`: {e:?} ({x}, {y})", op.name())))?)
                    }
                    (Elem::F(x), Elem::F(y)) => Elem::F(binary_float(*op, *dtype, x, y)),
                    (x, y) => return Err(self.fault(t, format!("`{}` on mixed operands {x:?}, {y:?}", op.name()))),
                },
            ),
            SInst::Cmp { dst, pred, a, b } => {
                let o = match (self.get(*a, t), self.get(*b, t)) {
                    (Elem::I(x), Elem::I(y)) => Some(x.cmp(&y)),
                    (Elem::F(x), Elem::F(y)) => x.partial_cmp(&y),
                    (x, y) => return Err(self.fault(t, format!("cmp on mixed operands {x:?}, {y:?}"))),
                };
                (*dst, Elem::I(pred.holds(o) as i64))
            }
            SInst::Select { dst, c, a, b } => (*dst, if self.int(*c, t) != 0 { self.get(*a, t) } else { self.get(*b, t) }),
            SInst::Fma { dst, dtype, a, b, c } => match (self.get(*a, t), self.get(*b, t), self.get(*c, t)) {
                (Elem::F(x), Elem::F(y), Elem::F(z)) => (*dst, Elem::F(round_to(*dtype, x.mul_add(y, z)))),
                _ => return Err(self.fault(t, "fma on non-float operands".into())),
            },
            SInst::Cast { dst, to, x } => (
                *dst,
                match (self.get(*x, t), to.is_float()) {
                    (Elem::F(a), true) => Elem::F(round_to(*to, a)),
                    (Elem::I(a), true) => Elem::F(int_to_float(*to, a)),
                    (Elem::F(a), false) => Elem::I(float_to_int(*to, a)),
                    (Elem::I(a), false) => Elem::I(int_to_int(*to, a)),
                },
            ),
            SInst::Bitcast { dst, from, to, x } => (*dst, bits_elem(*to, elem_bits(*from, self.get(*x, t)))),
            SInst::Load { dst, buffer, dtype, index } => {
                let i = self.index(*buffer, *index, t, "load")?;
                let bits = self.buffer(*buffer).load_bits(i);
                (*dst, bits_elem(*dtype, bits))
            }
            SInst::LoadMasked { dsts, buffer, dtype, index, mask } => {
                let on = self.int(*mask, t) != 0;
                for (j, &dst) in dsts.iter().enumerate() {
                    let v = if on {
                        let i = self.index_at(*buffer, self.int(*index, t) + j as i64, t, "load")?;
                        bits_elem(*dtype, self.buffer(*buffer).load_bits(i))
                    } else {
                        bits_elem(*dtype, 0)
                    };
                    self.set(dst, t, v);
                }
                return Ok(());
            }
            SInst::Store { buffer, dtype, index, value } => {
                let i = self.index(*buffer, *index, t, "store")?;
                let bits = elem_bits(*dtype, self.get(*value, t));
                self.buffer(*buffer).store_bits(i, bits);
                return Ok(());
            }
            SInst::Atomic { dst, op, buffer, dtype, index, cmp, value } => {
                let i = self.index(*buffer, *index, t, "atomic")?;
                let (val, c) = (self.get(*value, t), cmp.map(|c| self.get(c, t)));
                let old = self.buffer(*buffer).atomic_update_bits(i, |bits| atomic_new_bits(*op, *dtype, bits, val, c));
                (*dst, bits_elem(*dtype, old))
            }
            SInst::LoadShared { dst, dtype, index } => {
                let i = self.int(*index, t);
                (*dst, self.read_shared(*dtype, i, t)?)
            }
            SInst::StoreShared { dtype, index, value } => {
                let i = self.int(*index, t);
                let v = self.get(*value, t);
                return self.write_shared(*dtype, i, v, t);
            }
            SInst::StoreStaging { dtype, index, values } => {
                let i = self.int(*index, t);
                if (i * crate::gpu::lower::smem_elem_bytes(*dtype) as i64) % 16 != 0 {
                    return Err(self.fault(t, format!("a staging store at {dtype}[{i}] is not 16-byte aligned")));
                }
                let base = self.staging_base(*dtype);
                for (k, r) in values.iter().enumerate() {
                    let v = self.get(*r, t);
                    self.write_shared(*dtype, base + i + k as i64, v, t)?;
                }
                return Ok(());
            }
            SInst::ShuffleXor { dst, x, mask } => {
                let other = t ^ *mask as usize;
                if *mask >= self.lowered.warp || other >= self.threads {
                    return Err(self.fault(t, format!("shuffle_xor {mask} leaves the warp")));
                }
                (*dst, self.get(*x, other))
            }
            SInst::AsyncCopy { buffer, dtype, index, shared_index, n, pred } => {
                let (epoch, warp) = (self.epoch, self.lowered.warp as usize);
                let on = self.int(*pred, t) != 0;
                let base = self.int(*shared_index, t);
                for j in 0..*n as i64 {
                    let v = if on {
                        let i = self.index_at(*buffer, self.int(*index, t) + j, t, "asynchronous copy")?;
                        bits_elem(*dtype, self.buffer(*buffer).load_bits(i))
                    } else {
                        bits_elem(*dtype, 0)
                    };
                    let i = base + j;
                    let pid = self.pid;
                    let slot = self.shared_array(*dtype).and_then(|a| usize::try_from(i).ok().and_then(|i| a.get_mut(i))).ok_or_else(|| {
                        SimtError::Fault { pid, thread: t as u32, what: format!("asynchronous copy to shared {dtype}[{i}] is out of bounds") }
                    })?;
                    if slot.readers > 0 {
                        return Err(SimtError::Fault {
                            pid,
                            thread: t as u32,
                            what: format!("asynchronous copy to shared {dtype}[{i}] while a warpgroup matrix instruction not waited for reads it"),
                        });
                    }
                    if read_by_other_warp(slot, epoch, (t / warp) as u32, v) {
                        return Err(SimtError::Fault {
                            pid,
                            thread: t as u32,
                            what: format!(
                                "asynchronous copy to shared {dtype}[{i}] after another warp read it since the last barrier (missing barrier)"
                            ),
                        });
                    }
                    slot.pending = true;
                    self.copies[t].1.push((*dtype, i as usize, v));
                }
                return Ok(());
            }
            SInst::AsyncCommit => {
                let group = std::mem::take(&mut self.copies[t].1);
                self.copies[t].0.push(group);
                return Ok(());
            }
            SInst::AsyncWait { pending } => {
                while self.copies[t].0.len() > *pending as usize {
                    let group = self.copies[t].0.remove(0);
                    let epoch = self.epoch;
                    for (d, i, v) in group {
                        self.writes += 1;
                        let seq = self.writes;
                        if let Some(slot) = self.shared_array(d).and_then(|a| a.get_mut(i)) {
                            *slot = SharedSlot { value: v, written: Some((epoch, t as u32)), pending: false, seq, ..*slot };
                        }
                    }
                }
                return Ok(());
            }
            SInst::FenceAsync => {
                self.fenced[t] = self.writes;
                return Ok(());
            }
            SInst::MbarInit { barrier } => {
                let b = self.mbarrier_index(*barrier, t)?;
                if self.mbarriers.insert(b, Mbarrier::default()).is_some() {
                    return Err(self.fault(t, format!("barrier i64[{b}] is initialized again without being invalidated")));
                }
                return Ok(());
            }
            SInst::MbarInval { barrier } => {
                let b = self.mbarrier_index(*barrier, t)?;
                match self.mbarriers.remove(&b) {
                    Some(m) if m.arrived || m.bytes != 0 || !m.copies.is_empty() || !m.landed.is_empty() => {
                        return Err(self.fault(t, format!("barrier i64[{b}] is invalidated with copies or an arrival pending")))
                    }
                    Some(_) => {}
                    None => return Err(self.fault(t, format!("barrier i64[{b}] is invalidated but was never initialized"))),
                }
                return Ok(());
            }
            SInst::MbarExpect { barrier, bytes } => {
                let b = self.mbarrier_index(*barrier, t)?;
                let pid = self.pid;
                let fault = |what: String| SimtError::Fault { pid, thread: t as u32, what };
                let m = self.mbarriers.get_mut(&b).ok_or_else(|| fault(format!("arrival on barrier i64[{b}], never initialized")))?;
                if m.arrived {
                    return Err(fault(format!("a second arrival on barrier i64[{b}] in one phase (it expects one)")));
                }
                m.arrived = true;
                m.bytes += *bytes as i64;
                return self.mbarrier_progress(b, t);
            }
            SInst::MbarWait { barrier, parity } => {
                let b = self.mbarrier_index(*barrier, t)?;
                let parity = self.int(*parity, t) as u64 & 1;
                let pid = self.pid;
                let fault = |what: String| SimtError::Fault { pid, thread: t as u32, what };
                let m = self.mbarriers.get_mut(&b).ok_or_else(|| fault(format!("wait on barrier i64[{b}], never initialized")))?;
                // The phase of that parity is complete when the current phase has the other.
                if m.phase & 1 == parity {
                    return Err(fault(format!("waits for phase {} of barrier i64[{b}], which nothing completes (a hang)", m.phase)));
                }
                let landed = std::mem::take(&mut m.landed);
                let epoch = self.epoch.wrapping_sub(1);
                for (d, i, v) in landed {
                    if let Some(slot) = self.shared_array(d).and_then(|a| a.get_mut(i)) {
                        // Visible through the barrier, not a thread's write: written before
                        // this epoch, and through the async proxy (no fence asked for).
                        *slot = SharedSlot { value: v, written: Some((epoch, 0)), pending: false, seq: 0, ..*slot };
                    }
                }
                return Ok(());
            }
            SInst::TensorCopy { map, dtype, shared_index, coords, barrier } => {
                return self.tensor_copy(*map, *dtype, *shared_index, *coords, *barrier, t);
            }
            SInst::Barrier
            | SInst::If { .. }
            | SInst::Loop { .. }
            | SInst::Mma { .. }
            | SInst::CoopFill { .. }
            | SInst::CoopLoad { .. }
            | SInst::CoopStore { .. }
            | SInst::CoopMulAdd { .. }
            | SInst::LoadMatrix { .. }
            | SInst::Wgmma { .. }
            | SInst::WgmmaWait { .. } => return Ok(()),
        };
        self.set(dst, t, v);
        Ok(())
    }

    /// `ldmatrix` in lock-step over every warp: lane `8 i + r` names row `r` of matrix `i`;
    /// each row's 16 bytes (eight 16-bit elements, or four f32) are read with the checks of
    /// any shared-memory load, the row's start 16-byte aligned.
    fn load_matrix(&mut self, dtype: DType, row: Reg, trans: bool, d: &[Reg], active: &[bool]) -> Result<(), SimtError> {
        let warp = self.lowered.warp as usize;
        if let Some(t) = active.iter().position(|a| !a) {
            return Err(self.fault(t, "a matrix load is reached by only some threads of a warp".into()));
        }
        // Elements a lane receives per matrix, and per row.
        let per = if dtype == DType::F32 { 1 } else { 2 };
        let row_elems = 4 * per;
        let count = d.len() / per;
        if warp != 32 || !(1..=4).contains(&count) || d.len() % per != 0 || (per == 1 && trans) {
            return Err(self.fault(0, format!("no model of a matrix load of {count} matrices of {dtype} with {warp} lanes")));
        }
        for w in 0..self.threads / warp {
            let mut m = vec![[[Elem::I(0); 8]; 8]; count];
            for (i, mat) in m.iter_mut().enumerate() {
                for (r, out) in mat.iter_mut().enumerate() {
                    let t = w * warp + 8 * i + r;
                    let base = self.int(row, t);
                    if base.rem_euclid(row_elems as i64) != 0 {
                        return Err(self.fault(t, format!("a matrix load's row at {dtype} element {base} is not 16-byte aligned")));
                    }
                    for (c, e) in out.iter_mut().take(row_elems).enumerate() {
                        *e = self.read_shared(dtype, base + c as i64, t)?;
                    }
                }
            }
            for lane in 0..32 {
                let t = w * warp + lane;
                let (g, q) = (lane / 4, lane % 4);
                for (i, mat) in m.iter().enumerate() {
                    for j in 0..per {
                        let v = if trans { mat[per * q + j][g] } else { mat[g][per * q + j] };
                        self.set(d[per * i + j], t, v);
                    }
                }
            }
        }
        Ok(())
    }

    /// One matrix instruction in lock-step over every warp: the fragments of the warp's lanes
    /// are gathered into whole tiles (the instruction's fragment maps as its ISA states them,
    /// [`crate::gpu::layout::Frag::lane`] and [`crate::gpu::layout::Frag::reg`]), multiplied
    /// with the products summed in f32 in ascending K, and scattered back.
    fn mma(&mut self, instr: &MatrixInstr, a: &[Reg], b: &[Reg], c: &[Reg], d: &[Reg], active: &[bool]) -> Result<(), SimtError> {
        let warp = self.lowered.warp;
        if let Some(t) = active.iter().position(|a| !a) {
            return Err(self.fault(t, "a matrix instruction is reached by only some threads of a warp".into()));
        }
        let frag = instr.frag().filter(|f| {
            f.lanes() == warp
                && a.len() == f.regs(Some(0)) as usize
                && b.len() == f.regs(Some(1)) as usize
                && c.len() == f.regs(None) as usize
                && d.len() == c.len()
        });
        let Some(frag) = frag else {
            return Err(self.fault(0, format!("no model of {instr:?} with {} lanes and {}/{}/{} fragments", warp, a.len(), b.len(), c.len())));
        };
        let f = |me: &Self, r: Reg, t: usize| match me.get(r, t) {
            Elem::F(x) => x,
            Elem::I(x) => x as f32,
        };
        let (m, n, k) = frag.mnk();
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let at = |which: Option<u8>, lane: u32, j: usize| {
            let ((r, c), (lr, lc)) = (frag.reg(which, j as u32), frag.lane(which, lane));
            ((r + lr) as usize, (c + lc) as usize)
        };
        let warp = warp as usize;
        for w in 0..self.threads / warp {
            let (mut ta, mut tb, mut tc) = (vec![None; m * k], vec![None; k * n], vec![0f32; m * n]);
            for lane in 0..warp as u32 {
                let t = w * warp + lane as usize;
                // An operand the instruction reads replicated (RDNA3's WMMA) must hold the
                // same element in every copy.
                for (which, regs, tile, cols) in [(0u8, a, &mut ta, k), (1, b, &mut tb, n)] {
                    for (j, &r) in regs.iter().enumerate() {
                        let (row, col) = at(Some(which), lane, j);
                        let x = f(self, r, t);
                        // A tf32 instruction ignores the 13 low fraction bits: the lowering
                        // must hand it values rounded to tf32 (the IR's rounding, not the
                        // hardware's truncation).
                        if instr.tf32() && !x.is_nan() && x.to_bits() & 0x1fff != 0 {
                            let what = ["a", "b"][which as usize];
                            return Err(self.fault(t, format!("{what}[{row}][{col}] of a tf32 matrix instruction is {x}, not rounded to tf32")));
                        }
                        match tile[row * cols + col] {
                            Some(y) if f32::to_bits(y) != x.to_bits() => {
                                let what = ["a", "b"][which as usize];
                                return Err(self.fault(t, format!("the copies of {what}[{row}][{col}] of a matrix instruction differ: {y} and {x}")));
                            }
                            _ => tile[row * cols + col] = Some(x),
                        }
                    }
                }
                for (j, &r) in c.iter().enumerate() {
                    let (row, col) = at(None, lane, j);
                    tc[row * n + col] = f(self, r, t);
                }
            }
            // Every element of a whole-warp instruction's operands is some lane's.
            let ta: Vec<f32> = ta.into_iter().map(|x| x.unwrap_or(f32::NAN)).collect();
            let tb: Vec<f32> = tb.into_iter().map(|x| x.unwrap_or(f32::NAN)).collect();
            for i in 0..m {
                for j in 0..n {
                    for kk in 0..k {
                        tc[i * n + j] = ta[i * k + kk].mul_add(tb[kk * n + j], tc[i * n + j]);
                    }
                }
            }
            for lane in 0..warp as u32 {
                let t = w * warp + lane as usize;
                for (j, &r) in d.iter().enumerate() {
                    let (row, col) = at(None, lane, j);
                    self.set(r, t, Elem::F(tc[row * n + col]));
                }
            }
        }
        Ok(())
    }

    /// One warpgroup matrix instruction in lock-step over every warpgroup: `a` gathered from
    /// the fragments of its four warps (warp `w % 4` holds rows `16 (w % 4)..`) or read from
    /// shared memory as the descriptor says, `b` read from shared memory, the accumulator
    /// gathered from the mma.sync fragments of the four warps along N; products summed in f32
    /// in ascending K. A shared element must have been written before the last barrier and
    /// fenced for the async proxy by its writer ([`SInst::FenceAsync`]).
    #[allow(clippy::too_many_arguments)]
    fn wgmma(&mut self, instr: &MatrixInstr, n: u32, a: &WgA, b: &SharedMatrix<Reg>, c: &[Reg], d: &[Reg], active: &[bool]) -> Result<(), SimtError> {
        let warp = self.lowered.warp as usize;
        if let Some(t) = active.iter().position(|a| !a) {
            return Err(self.fault(t, "a warpgroup matrix instruction is reached by only some threads".into()));
        }
        let nn = n as usize;
        let a_ok = match a {
            WgA::Registers(r) => r.len() == 8,
            WgA::Shared(m) => m.k_major,
        };
        if (instr.m, instr.k) != (64, Mma::K)
            || n % 8 != 0
            || n > instr.n
            || c.len() != nn / 2
            || d.len() != nn / 2
            || warp != 32
            || self.threads % 128 != 0
            || !a_ok
        {
            return Err(
                self.fault(0, format!("no model of {instr:?} with n = {n}, {} lanes, {} threads and {} accumulators", warp, self.threads, c.len()))
            );
        }
        let f = |me: &Self, r: Reg, t: usize| match me.get(r, t) {
            Elem::F(x) => x,
            Elem::I(x) => x as f32,
        };
        for t0 in (0..self.threads).step_by(128) {
            let reads = std::cell::RefCell::new(Vec::new());
            let read = |me: &Self, m: &SharedMatrix<Reg>, dtype: DType, i: u32, k: u32| -> Result<f32, SimtError> {
                let start = me.int(m.start, t0);
                if let Some(t) = (t0..t0 + 128).find(|&t| me.int(m.start, t) != start) {
                    return Err(me.fault(t, "a warpgroup matrix operand's start differs between the warpgroup's threads".into()));
                }
                let addr = SharedMatrix::<Reg>::swizzle((start * 2) as u32 + m.offset(i, k));
                let e = me.read_async(dtype, (addr / 2) as i64, t0)?;
                reads.borrow_mut().push((dtype, (addr / 2) as usize));
                Ok(match e {
                    Elem::F(x) => x,
                    Elem::I(x) => x as f32,
                })
            };
            let mut ta = vec![[0f32; 16]; 64];
            match a {
                WgA::Registers(regs) => {
                    for w in 0..4u32 {
                        for lane in 0..32u32 {
                            let t = t0 + (32 * w + lane) as usize;
                            let (g, q) = Mma::lane_parts(lane);
                            for (j, &r) in regs.iter().enumerate() {
                                let (row, k) = Mma::a_reg(j as u32);
                                ta[(16 * w + row + g) as usize][(k + 2 * q) as usize] = f(self, r, t);
                            }
                        }
                    }
                }
                WgA::Shared(m) => {
                    for (i, row) in ta.iter_mut().enumerate() {
                        for (k, x) in row.iter_mut().enumerate() {
                            *x = read(self, m, instr.a, i as u32, k as u32)?;
                        }
                    }
                }
            }
            let mut tb = vec![vec![0f32; nn]; 16];
            for (k, row) in tb.iter_mut().enumerate() {
                for (j, x) in row.iter_mut().enumerate() {
                    *x = read(self, b, instr.b, j as u32, k as u32)?;
                }
            }
            let at = |w: u32, lane: u32, r: usize| {
                let (g, q) = Mma::lane_parts(lane);
                let (row, col) = Mma::acc_reg(r as u32 % 4);
                ((16 * w + row + g) as usize, (8 * (r as u32 / 4) + col + 2 * q) as usize)
            };
            let mut tc = vec![vec![0f32; nn]; 64];
            for w in 0..4u32 {
                for lane in 0..32u32 {
                    let t = t0 + (32 * w + lane) as usize;
                    for (r, &reg) in c.iter().enumerate() {
                        let (i, j) = at(w, lane, r);
                        tc[i][j] = f(self, reg, t);
                    }
                }
            }
            for (i, row) in tc.iter_mut().enumerate() {
                for (j, acc) in row.iter_mut().enumerate() {
                    for (kk, brow) in tb.iter().enumerate() {
                        *acc = ta[i][kk].mul_add(brow[j], *acc);
                    }
                }
            }
            let reads = reads.into_inner();
            for &(dtype, i) in &reads {
                if let Some(slot) = self.shared_array(dtype).and_then(|a| a.get_mut(i)) {
                    slot.readers += 1;
                }
            }
            self.wg_reads[t0 / 128].1.extend(reads);
            for w in 0..4u32 {
                for lane in 0..32u32 {
                    let t = t0 + (32 * w + lane) as usize;
                    for (r, &reg) in d.iter().enumerate() {
                        let (i, j) = at(w, lane, r);
                        self.set(reg, t, Elem::F(tc[i][j]));
                    }
                }
            }
        }
        Ok(())
    }

    /// `shared dtype[i]`, if it exists.
    fn slot(&self, dtype: DType, i: i64) -> Option<SharedSlot> {
        let arr = self.shared.iter().find(|(d, _)| *d == dtype).map(|(_, v)| v);
        arr.and_then(|a| usize::try_from(i).ok().and_then(|i| a.get(i))).copied()
    }

    /// The warpgroup of thread `t` reads `shared dtype[i]` through the async proxy: a fault
    /// when out of bounds, never written, written since the last barrier, or written without
    /// a proxy fence by its writer after the write.
    fn read_async(&self, dtype: DType, i: i64, t: usize) -> Result<Elem, SimtError> {
        let fault = |what: String| SimtError::Fault { pid: self.pid, thread: t as u32, what };
        let slot = self.slot(dtype, i).ok_or_else(|| fault(format!("warpgroup matrix read of shared {dtype}[{i}] is out of bounds")))?;
        if slot.pending {
            return Err(fault(format!("shared {dtype}[{i}] is read by a warpgroup matrix instruction while a copy to it is in flight")));
        }
        match slot.written {
            None => Err(fault(format!("shared {dtype}[{i}] is read by a warpgroup matrix instruction before anything wrote it"))),
            Some((e, w)) if e == self.epoch => Err(fault(format!(
                "shared {dtype}[{i}] was written by thread {w} since the last barrier (missing barrier before a warpgroup matrix instruction)"
            ))),
            Some((_, w)) if slot.seq > self.fenced[w as usize] => Err(fault(format!(
                "shared {dtype}[{i}] written by thread {w} is read by a warpgroup matrix instruction without a proxy fence after the write"
            ))),
            _ => Ok(slot.value),
        }
    }

    /// Thread `t` reads `shared dtype[i]`: a fault when out of bounds, never written, or written
    /// by another thread since the last barrier.
    fn read_shared(&mut self, dtype: DType, i: i64, t: usize) -> Result<Elem, SimtError> {
        let (epoch, warp) = (self.epoch, t as u32 / self.lowered.warp);
        let fault = |what: String| SimtError::Fault { pid: self.pid, thread: t as u32, what };
        let slot = self.slot(dtype, i).ok_or_else(|| fault(format!("shared {dtype} load at {i} is out of bounds")))?;
        if slot.pending {
            return Err(fault(format!("shared {dtype}[{i}] is read while an asynchronous copy to it is in flight (a missing wait)")));
        }
        match slot.written {
            Some((e, w)) if e == epoch && w != t as u32 => {
                return Err(fault(format!("shared {dtype}[{i}] was written by thread {w} since the last barrier (missing barrier)")))
            }
            None => return Err(fault(format!("shared {dtype}[{i}] is read before anything wrote it"))),
            _ => {}
        }
        let read = match slot.read {
            Some((e, first, others)) if e == epoch => Some((e, first, others || first != warp)),
            _ => Some((epoch, warp, false)),
        };
        if let Some(s) = self.shared_array(dtype).and_then(|a| a.get_mut(i as usize)) {
            s.read = read;
        }
        Ok(slot.value)
    }

    /// A cooperative-matrix operation in lock-step over every warp, on the emulator's own map
    /// of the matrices ([`Coop`]). Loads and stores check what the SPIR-V extension requires: a
    /// pointer the same in every lane of the warp, pointer and stride multiples of 16 bytes,
    /// and the shared-memory rules of any load or store; the multiply-add sums products in f32
    /// in ascending K, as [`Machine::mma`].
    fn coop(&mut self, inst: &SInst, active: &[bool]) -> Result<(), SimtError> {
        let warp = self.lowered.warp;
        if let Some(t) = active.iter().position(|a| !a) {
            return Err(self.fault(t, "a cooperative-matrix operation is reached by only some threads of a warp".into()));
        }
        let f = |e: Elem| match e {
            Elem::F(x) => x,
            Elem::I(x) => x as f32,
        };
        for w in 0..self.threads / warp as usize {
            let lane0 = w * warp as usize;
            let address = |me: &Self, index: Reg, stride: u32, dtype: DType| -> Result<i64, SimtError> {
                let i = me.int(index, lane0);
                if let Some(l) = (0..warp as usize).find(|&l| me.int(index, lane0 + l) != i) {
                    return Err(me.fault(
                        lane0 + l,
                        format!("a cooperative matrix is addressed at {} here and {i} in lane 0 of the warp", me.int(index, lane0 + l)),
                    ));
                }
                let bytes = crate::gpu::lower::smem_elem_bytes(dtype) as i64;
                if (i * bytes) % 16 != 0 || (stride as i64 * bytes) % 16 != 0 {
                    return Err(me.fault(lane0, format!("a cooperative matrix at shared {dtype}[{i}] with stride {stride} is not 16-byte aligned")));
                }
                Ok(i)
            };
            match inst {
                SInst::CoopFill { d, value } => {
                    for l in 0..warp as usize {
                        let v = Elem::F(f(self.get(*value, lane0 + l)));
                        for r in d.first..d.first + d.regs(warp) {
                            self.set(r, lane0 + l, v);
                        }
                    }
                }
                SInst::CoopLoad { d, dtype, index, stride, col_major, staged } => {
                    let i = address(self, *index, *stride, *dtype)? + if *staged { self.staging_base(*dtype) } else { 0 };
                    for r in 0..d.rows {
                        for c in 0..d.cols {
                            let at = if *col_major { i + (c * stride + r) as i64 } else { i + (r * stride + c) as i64 };
                            let (lane, reg) = d.place(warp, r, c);
                            let t = lane0 + lane as usize;
                            let v = self.read_shared(*dtype, at, t)?;
                            self.set(reg, t, Elem::F(f(v)));
                        }
                    }
                }
                SInst::CoopStore { value, index, stride } => {
                    let i = address(self, *index, *stride, DType::F32)?;
                    for r in 0..value.rows {
                        for c in 0..value.cols {
                            let (lane, reg) = value.place(warp, r, c);
                            let t = lane0 + lane as usize;
                            let v = self.get(reg, t);
                            self.write_shared(DType::F32, i + (r * stride + c) as i64, v, t)?;
                        }
                    }
                }
                SInst::CoopMulAdd { a, b, c, d } => {
                    let (m, n, k) = (c.rows, c.cols, a.cols);
                    if (a.rows, b.rows, b.cols, d.rows, d.cols) != (m, k, n, m, n) {
                        return Err(self.fault(
                            lane0,
                            format!("cooperative matrices of {}x{}, {}x{} and {}x{} do not multiply", a.rows, a.cols, b.rows, b.cols, m, n),
                        ));
                    }
                    let get = |me: &Self, x: &Coop, r: u32, col: u32| {
                        let (lane, reg) = x.place(warp, r, col);
                        f(me.get(reg, lane0 + lane as usize))
                    };
                    let mut out = Vec::with_capacity((m * n) as usize);
                    for i in 0..m {
                        for j in 0..n {
                            let mut acc = get(self, c, i, j);
                            for kk in 0..k {
                                acc = get(self, a, i, kk).mul_add(get(self, b, kk, j), acc);
                            }
                            out.push(acc);
                        }
                    }
                    for i in 0..m {
                        for j in 0..n {
                            let (lane, reg) = d.place(warp, i, j);
                            self.set(reg, lane0 + lane as usize, Elem::F(out[(i * n + j) as usize]));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A shared-memory store by thread `t`, with the checks of [`SInst::StoreShared`].
    fn write_shared(&mut self, dtype: DType, i: i64, v: Elem, t: usize) -> Result<(), SimtError> {
        let (epoch, warp) = (self.epoch, self.lowered.warp);

        let pid = self.pid;
        let arr = self.shared_array(dtype);
        let slot = arr.and_then(|a| usize::try_from(i).ok().and_then(|i| a.get_mut(i))).ok_or_else(|| SimtError::Fault {
            pid,
            thread: t as u32,
            what: format!("shared {dtype} store at {i} is out of bounds"),
        })?;
        // Several threads may write the same value in one epoch (replicated elements).
        if let Some((e, w)) = slot.written {
            if e == epoch && w != t as u32 && !same_elem(slot.value, v) {
                return Err(SimtError::Fault {
                    pid,
                    thread: t as u32,
                    what: format!("shared {dtype}[{i}] written with different values by threads {w} and {t} without a barrier"),
                });
            }
        }
        if slot.pending {
            return Err(SimtError::Fault {
                pid,
                thread: t as u32,
                what: format!("shared {dtype}[{i}] is written while an asynchronous copy to it is in flight"),
            });
        }
        if slot.readers > 0 {
            return Err(SimtError::Fault {
                pid,
                thread: t as u32,
                what: format!("shared {dtype}[{i}] is written while a warpgroup matrix instruction not waited for reads it"),
            });
        }
        if read_by_other_warp(slot, epoch, t as u32 / warp, v) {
            return Err(SimtError::Fault {
                pid,
                thread: t as u32,
                what: format!("shared {dtype}[{i}] is written by thread {t} after another warp read it since the last barrier (missing barrier)"),
            });
        }
        self.writes += 1;
        let seq = self.writes;
        if let Some(slot) = self.shared_array(dtype).and_then(|a| a.get_mut(i as usize)) {
            *slot = SharedSlot { value: v, written: Some((epoch, t as u32)), pending: false, seq, ..*slot };
        }
        Ok(())
    }

    fn lowered_param_dtype(&self, param: u32) -> Option<DType> {
        self.lowered.param_dtypes.get(param as usize).copied().flatten()
    }

    fn index(&self, buffer: u32, index: Reg, t: usize, what: &str) -> Result<usize, SimtError> {
        self.index_at(buffer, self.int(index, t), t, what)
    }

    /// A barrier's index in the shared i64 array, checked against it.
    fn mbarrier_index(&mut self, barrier: Reg, t: usize) -> Result<i64, SimtError> {
        let b = self.int(barrier, t);
        let len = self.shared_array(DType::I64).map_or(0, |a| a.len());
        if b < 0 || b as usize >= len {
            return Err(self.fault(t, format!("barrier i64[{b}] is outside shared memory ({len} i64 elements)")));
        }
        Ok(b)
    }

    /// Completes the barrier's phase once its arrival came and its copies' bytes landed.
    fn mbarrier_progress(&mut self, b: i64, t: usize) -> Result<(), SimtError> {
        let m = self.mbarriers.get_mut(&b).expect("checked by the caller");
        if m.bytes < 0 && m.arrived {
            return Err(self.fault(t, format!("barrier i64[{b}] received more bytes than its arrival expected")));
        }
        if m.arrived && m.bytes == 0 {
            if !m.landed.is_empty() {
                return Err(self.fault(t, format!("barrier i64[{b}] completes a phase while the last one's copies were never waited for")));
            }
            m.landed = std::mem::take(&mut m.copies);
            m.phase += 1;
            m.arrived = false;
        }
        Ok(())
    }

    /// One thread's tensor copy ([`SInst::TensorCopy`]): the box read where it lies inside the
    /// tensor (the map resolved from the launch's scalars), zeros elsewhere, each 128-byte row
    /// swizzled as [`SharedMatrix::swizzle`] places it, pending until a wait on the barrier.
    fn tensor_copy(&mut self, map: u32, dtype: DType, shared_index: Reg, coords: [Reg; 2], barrier: Reg, t: usize) -> Result<(), SimtError> {
        let b = self.mbarrier_index(barrier, t)?;
        if !self.mbarriers.contains_key(&b) {
            return Err(self.fault(t, format!("a tensor copy completes on barrier i64[{b}], never initialized")));
        }
        let m = self.lowered.info.tensor_maps.get(map as usize).ok_or_else(|| self.fault(t, format!("tensor map {map} is not the kernel's")))?;
        if m.dtype != dtype || dtype.size_bytes() != 2 || m.box_dims[0] as usize * 2 != 128 {
            return Err(self.fault(t, format!("no model of a tensor copy of {dtype} boxes {:?} from a {} map", m.box_dims, m.dtype)));
        }
        let args = self.args;
        let scalar = |p: u32| match args.get(p as usize) {
            Some(Arg::Scalar(Scalar::Int(v))) => Some(*v),
            _ => None,
        };
        let r = m.resolve(&scalar).map_err(|e| self.fault(t, format!("tensor map {map}: {e}")))?;
        let stride = (r.row_bytes / 2) as i64;
        let (c0, r0) = (self.int(coords[0], t), self.int(coords[1], t));
        let dst = self.int(shared_index, t);
        if dst * 2 % 1024 != 0 {
            return Err(self.fault(t, format!("a tensor copy to shared {dtype}[{dst}], not 1024-byte aligned")));
        }
        let (epoch, warp) = (self.epoch, t as u32 / self.lowered.warp);
        let mut writes = Vec::new();
        for row in 0..m.box_dims[1] as i64 {
            for col in 0..m.box_dims[0] as i64 {
                let (gr, gc) = (r0 + row, c0 + col);
                let v = if (0..r.dims[1] as i64).contains(&gr) && (0..r.dims[0] as i64).contains(&gc) {
                    let i = self.index_at(m.param, gr * stride + gc, t, "tensor copy")?;
                    bits_elem(dtype, self.buffer(m.param).load_bits(i))
                } else {
                    bits_elem(dtype, 0)
                };
                let addr = SharedMatrix::<Reg>::swizzle((dst * 2 + row * 128 + col * 2) as u32);
                let i = (addr / 2) as usize;
                let pid = self.pid;
                let slot = self.shared_array(dtype).and_then(|a| a.get_mut(i)).ok_or_else(|| SimtError::Fault {
                    pid,
                    thread: t as u32,
                    what: format!("tensor copy to shared {dtype}[{i}] is out of bounds"),
                })?;
                let what = if slot.pending {
                    Some("while another copy to it is in flight")
                } else if slot.readers > 0 {
                    Some("while a warpgroup matrix instruction not waited for reads it")
                } else if read_by_other_warp(slot, epoch, warp, v) {
                    Some("after another warp read it since the last barrier (missing barrier)")
                } else {
                    None
                };
                if let Some(what) = what {
                    return Err(SimtError::Fault { pid, thread: t as u32, what: format!("tensor copy to shared {dtype}[{i}] {what}") });
                }
                slot.pending = true;
                writes.push((dtype, i, v));
            }
        }
        let bytes = (m.box_dims[0] * m.box_dims[1]) as i64 * 2;
        let mb = self.mbarriers.get_mut(&b).expect("checked above");
        mb.copies.extend(writes);
        mb.bytes -= bytes;
        self.mbarrier_progress(b, t)
    }

    fn index_at(&self, buffer: u32, i: i64, t: usize, what: &str) -> Result<usize, SimtError> {
        let len = self.buffer(buffer).len();
        if i < 0 || i as u64 >= len as u64 {
            return Err(self.fault(t, format!("{what} at offset {i} is out of bounds of buffer {buffer} ({len} elements)")));
        }
        Ok(i as usize)
    }
}

fn const_elem(dtype: DType, s: Scalar) -> Elem {
    if dtype.is_float() {
        Elem::F(round_to(dtype, s.as_f64() as f32))
    } else {
        let i = match s {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        };
        Elem::I(int_to_int(dtype, i))
    }
}

fn bits_elem(dtype: DType, bits: u64) -> Elem {
    match from_bits(dtype, bits) {
        Ok(i) => Elem::I(i),
        Err(f) => Elem::F(f),
    }
}

fn elem_bits(dtype: DType, v: Elem) -> u64 {
    match v {
        Elem::F(x) => float_bits(dtype, x),
        Elem::I(x) => x as u64,
    }
}

/// Whether two values replicated threads store to one shared slot are the same: equal bits,
/// or two NaNs, or two zeros. A reduction's copies may combine (+0, -0) or NaNs in different
/// orders, and max/min leave which zero (or NaN) wins open, so copies that hold +0 and -0 hold
/// one value under the semantics and do not race.
fn same_elem(a: Elem, b: Elem) -> bool {
    match (a, b) {
        (Elem::F(x), Elem::F(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) || (x == 0.0 && y == 0.0),
        (x, y) => x == y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program that computes `c = a @ b` for row-major `a` (`m x k`, `dtype`), `b` (`k x n`)
    /// and f32 `c` (`m x n`) in one `dot`, one program.
    fn dot_text(m: usize, k: usize, n: usize, dtype: DType) -> String {
        // The row-major offsets of an `r x c` tile in values %v to %v+9 (the last one).
        let offsets = |v: usize, r: usize, c: usize| {
            let [rows, row_ids, cols, col_ids, width, widths, row_offs, row_tile, col_tile, offs]: [usize; 10] = std::array::from_fn(|i| v + i);
            format!(
                "  %{rows} = arange 0, {r} : [{r}]xi32
  %{row_ids} = expand_dims %{rows}, axis 1 : [{r}, 1]xi32
  %{cols} = arange 0, {c} : [{c}]xi32
  %{col_ids} = expand_dims %{cols}, axis 0 : [1, {c}]xi32
  %{width} = const {c} : i32
  %{widths} = splat %{width} : [{r}, 1]xi32
  %{row_offs} = mul %{row_ids}, %{widths} : [{r}, 1]xi32
  %{row_tile} = broadcast %{row_offs} : [{r}, {c}]xi32
  %{col_tile} = broadcast %{col_ids} : [{r}, {c}]xi32
  %{offs} = add %{row_tile}, %{col_tile} : [{r}, {c}]xi32
"
            )
        };
        format!(
            "program d(a: buffer<{dtype}, read>, b: buffer<{dtype}, read>, c: buffer<f32, write>) grid 1 {{
{}{}{}  %30 = load a[%9] : [{m}, {k}]x{dtype}
  %31 = load b[%19] : [{k}, {n}]x{dtype}
  %32 = const 0.0 : f32
  %33 = splat %32 : [{m}, {n}]xf32
  %34 = dot %30, %31, %33 : [{m}, {n}]xf32
  store c[%29], %34
}}",
            offsets(0, m, k),
            offsets(10, k, n),
            offsets(20, m, n)
        )
    }

    /// A 16 x 16 x 16 f16 dot ([`dot_text`]) on one warp with its inputs (a 16 x 16 `a` and
    /// `b` of small integers in f16, `c` zeroed): the program, its options, the input values and
    /// the buffers.
    fn dot_case() -> (Program, LowerOptions, Vec<f64>, [HostBuffer; 3]) {
        let program = crate::text::parse(&dot_text(16, 16, 16, DType::F16)).unwrap();
        let options = LowerOptions { num_warps: 1, ..LowerOptions::default() };
        let values: Vec<f64> = (0..256).map(|i| (i % 7) as f64 - 3.0).collect();
        let (a, b) = (HostBuffer::from_f64(DType::F16, &values), HostBuffer::from_f64(DType::F16, &values));
        let c = HostBuffer::from_f64(DType::F32, &[0.0; 256]);
        (program, options, values, [a, b, c])
    }

    fn mma_a_regs(code: &mut [SInst]) -> Option<&mut Vec<Reg>> {
        code.iter_mut().find_map(|i| match i {
            SInst::Mma { a, .. } => Some(a),
            _ => None,
        })
    }

    /// RDNA3's WMMA reads its operands repeated in both halves of the wave: the model runs the
    /// lowering's fragments, and faults when lanes `l` and `l + 16` hand it different copies
    /// (here one `a` register replaced by the lane's thread index).
    #[test]
    fn wmma_copies_that_differ_fault() {
        let (program, options, values, [a, b, c]) = dot_case();
        let args = [Arg::Buffer(&a), Arg::Buffer(&b), Arg::Buffer(&c)];
        let mut lowered = compile(&program, &Target::amd_gfx1100(), &options).unwrap();
        lowered.run(&program, [1, 1, 1], &args).unwrap();
        let want: f64 = (0..16).map(|k| values[k] * values[k * 16]).sum();
        assert_eq!(c.to_f64()[0], want);
        let tid = lowered.regs;
        lowered.regs += 1;
        lowered.code.insert(0, SInst::ThreadIndex { dst: tid });
        mma_a_regs(&mut lowered.code).expect("a WMMA instruction")[0] = tid;
        let err = lowered.run(&program, [1, 1, 1], &args).unwrap_err().to_string();
        assert!(err.contains("the copies of a[") && err.contains("of a matrix instruction differ"), "{err}");
    }
    fn first_coop_load(code: &mut [SInst]) -> Option<&mut Reg> {
        code.iter_mut().find_map(|i| match i {
            SInst::CoopLoad { index, .. } => Some(index),
            _ => None,
        })
    }

    /// Cooperative matrices on the H200's Vulkan target: the dot's value through the model,
    /// and the extension's addressing rules checked: a load whose pointer differs between the
    /// lanes of a warp, or is not 16-byte aligned, faults.
    #[test]
    fn cooperative_matrix_addresses_are_checked() {
        let (program, options, values, [a, b, c]) = dot_case();
        let args = [Arg::Buffer(&a), Arg::Buffer(&b), Arg::Buffer(&c)];
        let lowered = compile(&program, &Target::h200_vulkan(), &options).unwrap();
        assert_eq!(lowered.info.coop.len(), 1, "the dot runs on cooperative matrices");
        lowered.run(&program, [1, 1, 1], &args).unwrap();
        let want: f64 = (0..16).map(|k| values[k] * values[k * 16]).sum();
        assert_eq!(c.to_f64()[0], want);
        for (what, inst) in [
            ("is addressed at", SInst::ThreadIndex { dst: 0 }),
            ("is not 16-byte aligned", SInst::Const { dst: 0, dtype: DType::I32, value: Scalar::Int(4) }),
        ] {
            let mut broken = compile(&program, &Target::h200_vulkan(), &options).unwrap();
            let r = broken.regs;
            broken.regs += 1;
            let inst = match inst {
                SInst::ThreadIndex { .. } => SInst::ThreadIndex { dst: r },
                SInst::Const { dtype, value, .. } => SInst::Const { dst: r, dtype, value },
                other => other,
            };
            broken.code.insert(0, inst);
            *first_coop_load(&mut broken.code).expect("a cooperative matrix load") = r;
            let err = broken.run(&program, [1, 1, 1], &args).unwrap_err().to_string();
            assert!(err.contains(what), "{err}");
        }
    }

    /// The dot's operands go to the staging array 16 bytes per store (one row of eight f16 per
    /// run of registers) and the matrix loads read them there: a staging store moved by one
    /// element faults as misaligned, and without the first one the matrix load reads elements
    /// nothing wrote.
    #[test]
    fn staged_operands_are_checked() {
        let (program, options, values, [a, b, c]) = dot_case();
        let args = [Arg::Buffer(&a), Arg::Buffer(&b), Arg::Buffer(&c)];
        let lowered = compile(&program, &Target::h200_vulkan(), &options).unwrap();
        assert_eq!(lowered.info.staged, vec![(DType::F16, 16 * 24 * 2)], "a and b in rows of 16 + 8");
        assert!(lowered.info.shared.iter().all(|&(d, _)| d != DType::F16), "{:?}", lowered.info.shared);
        let stores = |code: &[SInst]| code.iter().filter(|i| matches!(i, SInst::StoreStaging { .. })).count();
        assert_eq!(stores(&lowered.code), 2, "each thread stores a run of eight of a and of b");
        lowered.run(&program, [1, 1, 1], &args).unwrap();
        let want: f64 = (0..16).map(|k| values[k] * values[k * 16]).sum();
        assert_eq!(c.to_f64()[0], want);
        let first_store = |code: &mut Vec<SInst>| code.iter().position(|i| matches!(i, SInst::StoreStaging { .. })).unwrap();
        let mut moved = compile(&program, &Target::h200_vulkan(), &options).unwrap();
        let (one, sum) = (moved.regs, moved.regs + 1);
        moved.regs += 2;
        let at = first_store(&mut moved.code);
        let SInst::StoreStaging { index, .. } = &mut moved.code[at] else { unreachable!() };
        let old = std::mem::replace(index, sum);
        moved.code.insert(at, SInst::Binary { dst: sum, op: BinaryOp::Add, dtype: DType::I32, a: old, b: one });
        moved.code.insert(0, SInst::Const { dst: one, dtype: DType::I32, value: Scalar::Int(1) });
        let err = moved.run(&program, [1, 1, 1], &args).unwrap_err().to_string();
        assert!(err.contains("staging store at f16[") && err.contains("not 16-byte aligned"), "{err}");
        let mut dropped = compile(&program, &Target::h200_vulkan(), &options).unwrap();
        let at = first_store(&mut dropped.code);
        dropped.code.remove(at);
        let err = dropped.run(&program, [1, 1, 1], &args).unwrap_err().to_string();
        assert!(err.contains("is read before anything wrote it"), "{err}");
    }

    /// Each iteration sums a different tile across two warps through shared memory. The
    /// lowering's barriers keep it race-free; without any one of them the emulator faults, and
    /// without the one between a round's reads and the next round's writes it names the
    /// write-after-read race (a GPU may let a warp's next write reach a slot another warp has
    /// not read yet, which lock-step emulation alone would never show).
    #[test]
    fn every_barrier_of_a_cross_warp_loop_is_needed() {
        let text = "program w(x: buffer<f32, read>, y: buffer<f32, write>) grid 1 {
  %0 = arange 0, 64 : [64]xi32
  %1 = load x[%0] : [64]xf32
  %2 = const 0.0 : f32
  %3 = const 0 : i32
  %4 = const 3 : i32
  %5 = const 1 : i32
  %12 = for %3 to %4 step %5 iter(%2) : f32 body(%6: i32, %7: f32) {
    %8 = cast %6 : f32
    %9 = splat %8 : [64]xf32
    %10 = mul %1, %9 : [64]xf32
    %11 = reduce sum %10, axis 0 : f32
    %13 = add %7, %11 : f32
    yield %13
  }
  %14 = const 0 : i32
  store y[%14], %12
}";
        let program = crate::text::parse(text).unwrap();
        let options = LowerOptions { num_warps: 2, ..LowerOptions::default() };
        let x = HostBuffer::from_f64(DType::F32, &(0..64).map(|i| (i % 5) as f64 + 1.0).collect::<Vec<_>>());
        let y = HostBuffer::from_f64(DType::F32, &[0.0]);
        let args = [Arg::Buffer(&x), Arg::Buffer(&y)];
        let lowered = compile(&program, &Target::vulkan_baseline(), &options).unwrap();
        lowered.run(&program, [1, 1, 1], &args).unwrap();
        let sum: f64 = (0..64).map(|i| (i % 5) as f64 + 1.0).sum();
        assert_eq!(y.to_f64()[0], 3.0 * sum);
        fn loop_body(code: &mut [SInst]) -> Option<&mut Vec<SInst>> {
            code.iter_mut().find_map(|i| match i {
                SInst::Loop { body, .. } => Some(body),
                _ => None,
            })
        }
        let mut lowered = lowered;
        let body = loop_body(&mut lowered.code).expect("the loop");
        let barriers: Vec<usize> = body.iter().enumerate().filter(|(_, i)| matches!(i, SInst::Barrier)).map(|(j, _)| j).collect();
        assert!(barriers.len() >= 2, "a cross-warp sum per iteration takes barriers");
        let mut write_after_read = 0;
        for &j in &barriers {
            let mut broken = compile(&program, &Target::vulkan_baseline(), &options).unwrap();
            loop_body(&mut broken.code).expect("the loop").remove(j);
            let err = broken.run(&program, [1, 1, 1], &args).expect_err("a missing barrier faults").to_string();
            assert!(err.contains("missing barrier"), "{err}");
            write_after_read += usize::from(err.contains("after another warp read it"));
        }
        assert!(write_after_read >= 1, "no barrier guards a write after another warp's read");
    }

    /// A dot whose operands do not fit the H200's 48 KiB of shared memory at once on
    /// cooperative matrices (64 x 256 by 256 x 64 in f16 and bf16) stages K in chunks and
    /// computes the exact sums, where it was refused for shared memory.
    #[test]
    fn a_cooperative_matrix_dot_too_large_to_stage_at_once_runs_in_chunks() {
        for dtype in [DType::F16, DType::BF16] {
            let text = dot_text(64, 256, 64, dtype);
            let program = crate::text::parse(&text).unwrap();
            let options = LowerOptions { num_warps: 4, ..LowerOptions::default() };
            let va: Vec<f64> = (0..64 * 256).map(|i| ((i * 7) % 9) as f64 - 4.0).collect();
            let vb: Vec<f64> = (0..256 * 64).map(|i| ((i * 5) % 7) as f64 - 3.0).collect();
            let (a, b) = (HostBuffer::from_f64(dtype, &va), HostBuffer::from_f64(dtype, &vb));
            let c = HostBuffer::from_f64(DType::F32, &vec![0.0; 64 * 64]);
            let lowered = compile(&program, &Target::h200_vulkan(), &options).unwrap();
            assert_eq!(lowered.info.coop.len(), 1, "{dtype}: the dot runs on cooperative matrices");
            lowered.run(&program, [1, 1, 1], &[Arg::Buffer(&a), Arg::Buffer(&b), Arg::Buffer(&c)]).unwrap();
            let got = c.to_f64();
            for i in 0..64 {
                for j in 0..64 {
                    let want: f64 = (0..256).map(|k| va[i * 256 + k] * vb[k * 64 + j]).sum();
                    assert_eq!(got[i * 64 + j], want, "{dtype}: c[{i}][{j}]");
                }
            }
        }
    }
}
