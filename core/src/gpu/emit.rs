//! The primitives a backend supplies to the shared per-thread emission.
//!
//! [`super::lower`] decides, for every tile value, which thread holds which element and emits
//! the per-thread scalar program through this trait. A backend (SPIR-V, LLVM) implements only
//! these primitives: scalar arithmetic, thread and program ids, global and shared memory,
//! barriers, lane shuffles and structured control flow. Everything about tiles, layouts and
//! reductions stays in the shared lowering.
//!
//! Every value is a scalar of a [`DType`]; `i1` is the backend's boolean. bf16 arithmetic never
//! reaches a backend: the lowering computes in f32 and converts, so a backend needs bf16 only for
//! loads, stores and casts to and from f32. Control flow is structured and uniform across the
//! program (conditions and loop bounds are the same in every thread), so barriers may appear
//! inside `if` and loop bodies.

use std::fmt::Debug;

use crate::dtype::{DType, Scalar};
use crate::gpu::target::MatrixInstr;
use crate::ir::{AtomicOp, BinaryOp, CmpPred, UnaryOp};

pub trait Emitter {
    /// A scalar SSA value in the backend: each is defined once, so the lowering may remember
    /// facts about one (the bf16 bits an f32 register was widened from).
    type V: Copy + Debug + Eq + std::hash::Hash;

    /// A constant of `dtype`.
    fn constant(&mut self, dtype: DType, value: Scalar) -> Self::V;
    /// This thread's index within its program, i32 in `0..threads`.
    fn thread_index(&mut self) -> Self::V;
    /// This program's index along grid `axis`, i32.
    fn program_id(&mut self, axis: u32) -> Self::V;
    /// The grid extent along `axis`, i32.
    fn num_programs(&mut self, axis: u32) -> Self::V;
    /// Whether [`Emitter::program_id`] and [`Emitter::num_programs`] come from a folded grid
    /// ([`crate::gpu::grid`]); the lowering checks it against
    /// [`crate::gpu::lower::LowerOptions::fold_grid`].
    fn folds_grid(&self) -> bool {
        false
    }
    /// The value of scalar parameter `param` (index into the program's parameters).
    fn scalar_param(&mut self, param: u32, dtype: DType) -> Self::V;

    /// `op x`; never called with bf16, nor with f16 for transcendental ops.
    fn unary(&mut self, op: UnaryOp, dtype: DType, x: Self::V) -> Self::V;
    /// `a op b`; never called with bf16, nor with f16 `Div`/`Rem` (the lowering computes those
    /// in f32: devices may divide f16 approximately). Integer `Div`/`Rem` truncate (C semantics); `Shr` is
    /// arithmetic for signed dtypes; float `Max`/`Min` are IEEE maxNum/minNum.
    fn binary(&mut self, op: BinaryOp, dtype: DType, a: Self::V, b: Self::V) -> Self::V;
    /// Comparison giving `i1`; unordered float compares are false except `Ne`.
    fn cmp(&mut self, pred: CmpPred, dtype: DType, a: Self::V, b: Self::V) -> Self::V;
    fn select(&mut self, dtype: DType, cond: Self::V, a: Self::V, b: Self::V) -> Self::V;
    /// Fused `a * b + c` (f32 or f16).
    fn fma(&mut self, dtype: DType, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// Conversion with [`crate::ir::Op::Cast`] semantics.
    fn cast(&mut self, from: DType, to: DType, x: Self::V) -> Self::V;
    /// `x`'s bits as a value of `to`: f32 to or from i32 or u32, the pair the shared
    /// legalizations ([`crate::gpu::legalize`]) read signs and NaNs through.
    fn bitcast(&mut self, from: DType, to: DType, x: Self::V) -> Self::V;

    /// `buffer[index]`; `index_dtype` is i32, u32 or i64 and the index is in bounds.
    fn load_global(&mut self, buffer: u32, dtype: DType, index: Self::V, index_dtype: DType) -> Self::V;
    /// `buffer[index] = value`.
    fn store_global(&mut self, buffer: u32, dtype: DType, index: Self::V, index_dtype: DType, value: Self::V);
    /// Atomic read-modify-write (`op`), or compare-and-swap when `op` is `None` (`cmp` given);
    /// returns the old value.
    #[allow(clippy::too_many_arguments)]
    fn atomic_global(
        &mut self,
        op: Option<AtomicOp>,
        buffer: u32,
        dtype: DType,
        index: Self::V,
        index_dtype: DType,
        cmp: Option<Self::V>,
        value: Self::V,
    ) -> Self::V;

    /// The most consecutive elements of `dtype` this backend loads or stores with one
    /// instruction (16 bytes on every GPU of interest); 1 disables vector access.
    fn max_vector(&self, dtype: DType) -> u32 {
        let _ = dtype;
        1
    }

    /// Loads `n` consecutive elements `buffer[index .. index + n]`, `index` a multiple of `n`.
    fn load_global_vec(&mut self, buffer: u32, dtype: DType, index: Self::V, index_dtype: DType, n: u32) -> Vec<Self::V> {
        load_elementwise(self, buffer, dtype, index, index_dtype, n)
    }

    /// `buffer[index .. index + n]` where `mask` holds, else unspecified values (the caller
    /// selects its `other` for them); a masked-off access touches no element of the buffer.
    /// The default reads from index 0 instead, with no branch (a branch around each load
    /// would make a thread wait for it before issuing the next): runtimes allocate every
    /// buffer in whole 16-byte vectors, so those first elements exist even in an empty
    /// buffer. The emulator overrides it to check that masked-off lanes stay out of memory.
    fn load_global_masked(&mut self, buffer: u32, dtype: DType, index: Self::V, index_dtype: DType, n: u32, mask: Self::V) -> Vec<Self::V> {
        let zero = self.constant(index_dtype, Scalar::Int(0));
        let safe = self.select(index_dtype, mask, index, zero);
        if n == 1 {
            vec![self.load_global(buffer, dtype, safe, index_dtype)]
        } else {
            self.load_global_vec(buffer, dtype, safe, index_dtype, n)
        }
    }

    /// Stores consecutive elements at `buffer[index ..]`, `index` a multiple of `values.len()`.
    fn store_global_vec(&mut self, buffer: u32, dtype: DType, index: Self::V, index_dtype: DType, values: &[Self::V]) {
        store_elementwise(self, buffer, dtype, index, index_dtype, values)
    }

    /// Declares that shared memory holds at least `len` elements of `dtype` (one array per
    /// dtype; calls only grow it).
    fn reserve_shared(&mut self, dtype: DType, len: u32);
    /// `shared[index]` with an i32 index.
    fn load_shared(&mut self, dtype: DType, index: Self::V) -> Self::V;
    fn store_shared(&mut self, dtype: DType, index: Self::V, value: Self::V);
    /// `n` consecutive elements at `shared[index ..]`, `index` a multiple of `n` (at most 16
    /// bytes).
    fn load_shared_vec(&mut self, dtype: DType, index: Self::V, n: u32) -> Vec<Self::V> {
        (0..n)
            .map(|i| {
                let off = self.constant(DType::I32, Scalar::Int(i as i64));
                let idx = self.binary(BinaryOp::Add, DType::I32, index, off);
                self.load_shared(dtype, idx)
            })
            .collect()
    }
    /// Stores consecutive elements at `shared[index ..]`, `index` a multiple of `values.len()`
    /// (at most 16 bytes).
    fn store_shared_vec(&mut self, dtype: DType, index: Self::V, values: &[Self::V]) {
        for (i, &v) in values.iter().enumerate() {
            let off = self.constant(DType::I32, Scalar::Int(i as i64));
            let idx = self.binary(BinaryOp::Add, DType::I32, index, off);
            self.store_shared(dtype, idx, v);
        }
    }
    /// Every thread of the program reaches this point and sees the shared-memory writes made
    /// before it.
    fn barrier(&mut self);
    /// The value held by lane `lane ^ lane_mask` of this warp.
    fn shuffle_xor(&mut self, dtype: DType, value: Self::V, lane_mask: u32) -> Self::V;

    /// Opens `if cond { ... }` whose branches yield values of `result_dtypes`.
    fn begin_if(&mut self, cond: Self::V, result_dtypes: &[DType]);
    /// Ends the then-branch with its yielded values and opens the else-branch.
    fn begin_else(&mut self, then_values: &[Self::V]);
    /// Ends the else-branch; returns the values the `if` produces.
    fn end_if(&mut self, else_values: &[Self::V]) -> Vec<Self::V>;

    /// Opens `for iv in lower..upper step step` (a negative step counts down) carrying
    /// `carried`; returns the induction variable and the carried values inside the body.
    fn begin_loop(&mut self, iv_dtype: DType, lower: Self::V, upper: Self::V, step: Self::V, carried: &[(DType, Self::V)])
        -> (Self::V, Vec<Self::V>);
    /// Closes the body with the next carried values; returns the values after the loop.
    fn end_loop(&mut self, next: &[Self::V]) -> Vec<Self::V>;

    /// `x` (f32) rounded to tf32 as [`crate::ir::round_tf32`] says, in one instruction
    /// (`cvt.rna.tf32.f32` on NVIDIA); `None` where the backend has none: the lowering then
    /// rounds with integer operations.
    fn round_tf32(&mut self, x: Self::V) -> Option<Self::V> {
        let _ = x;
        None
    }

    /// One warp-level matrix instruction of kind [`crate::gpu::MatrixKind::MmaSync`]:
    /// `d = a x b + c` on this thread's fragments, laid out as [`crate::gpu::layout::Mma`]
    /// says (for m16n8k16: eight `a` values of `instr.a`, four `b` values of `instr.b`, four
    /// f32 `c` values; four f32 results). Every thread of the warp executes it together.
    /// `None` when the backend has no such instruction: the lowering then refuses the program
    /// (a target lists only what its backend issues).
    fn mma(&mut self, instr: MatrixInstr, a: &[Self::V], b: &[Self::V], c: &[Self::V]) -> Option<Vec<Self::V>> {
        let _ = (instr, a, b, c);
        None
    }

    /// Warp-level load of `count` (1, 2 or 4) 8 x 8 matrices of 16-bit `dtype` from shared
    /// memory (`ldmatrix` on NVIDIA): lane `8 i + r` gives `row`, the index of row `r` of
    /// matrix `i` (eight consecutive elements, 16-byte aligned); each lane receives, per
    /// matrix, the two elements at row `lane / 4`, columns `2 (lane % 4)` and `+ 1` (with
    /// `trans`, at column `lane / 4`, rows `2 (lane % 4)` and `+ 1`). Of f32 (`trans` false
    /// only), each matrix is 8 rows of four 32-bit elements and a lane receives the one at row
    /// `lane / 4`, column `lane % 4`. Every thread of the warp executes it together. `None`
    /// where the backend has no such load: the lowering then reads the elements one by one.
    fn load_shared_matrix(&mut self, dtype: DType, row: Self::V, count: u32, trans: bool) -> Option<Vec<Self::V>> {
        let _ = (dtype, row, count, trans);
        None
    }

    /// One warpgroup-level matrix instruction of kind [`crate::gpu::MatrixKind::Wgmma`]
    /// (`wgmma.mma_async` on sm_90a), `d = a x b + c` for an `instr.m x n x instr.k` tile: the
    /// four warps of the warpgroup execute it together. `c` holds this thread's `n / 2` f32
    /// accumulator values in the order of [`crate::gpu::layout::Mma`]'s fragments along N
    /// (warp `w % 4` of the warpgroup holds rows `16 (w % 4)..`); `a` is eight values of
    /// `instr.a` per thread (the mma.sync fragment of its warp's 16 rows) or a shared-memory
    /// operand, `b` is in shared memory. The instruction is asynchronous: its results may be
    /// read only through [`Emitter::wgmma_wait`], and shared memory written by ordinary stores
    /// or asynchronous copies must be made visible to it first ([`Emitter::fence_async_shared`]
    /// and a barrier). `None` when the backend has no such instruction.
    fn wgmma(&mut self, instr: MatrixInstr, n: u32, a: WgmmaA<'_, Self::V>, b: SharedMatrix<Self::V>, c: &[Self::V]) -> Option<Vec<Self::V>> {
        let _ = (instr, n, a, b, c);
        None
    }

    /// Orders this warpgroup's register writes before the warpgroup matrix instructions issued
    /// next (`wgmma.fence`): issued before the first of them that reads registers written since.
    fn wgmma_fence(&mut self) {}

    /// Closes the group of warpgroup matrix instructions issued since the last wait and waits
    /// until at most `pending` groups of this warpgroup's are incomplete; returns `values`
    /// (results of the completed ones), readable from here on. Shared memory a pending group
    /// reads must not be written until a later wait completes it.
    fn wgmma_wait(&mut self, pending: u32, values: &[Self::V]) -> Vec<Self::V> {
        let _ = pending;
        values.to_vec()
    }

    /// Makes this thread's earlier shared-memory writes (stores and completed asynchronous
    /// copies) visible to the asynchronous matrix instructions that read shared memory
    /// (`fence.proxy.async.shared::cta`); a barrier after it extends that to every thread.
    fn fence_async_shared(&mut self) {}

    /// Whether the backend has asynchronous copies from global to shared memory
    /// ([`Emitter::async_copy`]); without them the lowering does not pipeline loops.
    fn async_copies(&self) -> bool {
        false
    }

    /// The address of `buffer[index]` as an i64 value that [`Emitter::async_copy_from`] reads
    /// and [`Emitter::address_step`]s advance (by default the element index itself: a backend
    /// without addresses of its own, as the emulator, copies from `buffer` at that index).
    fn global_address(&mut self, buffer: u32, dtype: DType, index: Self::V, index_dtype: DType) -> Self::V {
        let _ = (buffer, dtype);
        self.cast(index_dtype, DType::I64, index)
    }

    /// `elements` (i32) elements of `dtype` as the i64 difference of two
    /// [`Emitter::global_address`]es.
    fn address_step(&mut self, dtype: DType, elements: Self::V) -> Self::V {
        let _ = dtype;
        self.cast(DType::I32, DType::I64, elements)
    }

    /// The address of `shared[index]` in `dtype`'s array as an i32 value that
    /// [`Emitter::async_copy_from`] writes to and [`Emitter::shared_step`]s advance (by default
    /// the index itself).
    fn shared_address(&mut self, dtype: DType, index: Self::V) -> Self::V {
        let _ = dtype;
        index
    }

    /// `elements` (i32) elements of `dtype` as the difference of two
    /// [`Emitter::shared_address`]es.
    fn shared_step(&mut self, dtype: DType, elements: Self::V) -> Self::V {
        let _ = dtype;
        elements
    }

    /// [`Emitter::async_copy`] from an address of [`Emitter::global_address`]'s in `buffer` to
    /// one of [`Emitter::shared_address`]'s.
    fn async_copy_from(&mut self, buffer: u32, dtype: DType, address: Self::V, shared_address: Self::V, n: u32, pred: Self::V) {
        self.async_copy(buffer, dtype, address, DType::I64, shared_address, n, pred)
    }

    /// Starts copying `n` consecutive elements of `dtype` (16 bytes) from `buffer[index..]` to
    /// shared memory at `shared_index` (a multiple of `n`), without waiting for it (`cp.async`);
    /// where `pred` is false nothing is read and the shared elements become zeros. This thread
    /// sees them after an [`Emitter::async_wait`] that completes the copy's group, others after
    /// a barrier after that. Only called where [`Emitter::async_copies`] holds.
    #[allow(clippy::too_many_arguments)]
    fn async_copy(&mut self, buffer: u32, dtype: DType, index: Self::V, index_dtype: DType, shared_index: Self::V, n: u32, pred: Self::V) {
        let _ = (buffer, dtype, index, index_dtype, shared_index, n, pred);
    }

    /// Closes the group of asynchronous copies started since the last commit.
    fn async_commit(&mut self) {}

    /// Waits until at most `pending` committed groups of this thread's copies are incomplete.
    fn async_wait(&mut self, pending: u32) {
        let _ = pending;
    }

    /// Whether the backend copies whole boxes of a tensor with one thread's instruction
    /// ([`Emitter::tensor_copy`], the tensor memory accelerator of sm_90a), completing on
    /// shared-memory barriers ([`Emitter::mbarrier_init`] and the rest). The other methods of
    /// this group are called only where it holds.
    fn tensor_copies(&self) -> bool {
        false
    }

    /// Initializes the barrier at `shared_i64[barrier]` for one arrival per phase (one thread).
    fn mbarrier_init(&mut self, barrier: Self::V) {
        let _ = barrier;
    }

    /// Orders this thread's barrier initializations before their use by the copies
    /// (`fence.mbarrier_init`); a barrier after it extends that to every thread.
    fn mbarrier_init_fence(&mut self) {}

    /// Ends the barrier at `shared_i64[barrier]` (its memory may be reused or initialized
    /// again); nothing may be pending on it.
    fn mbarrier_invalidate(&mut self, barrier: Self::V) {
        let _ = barrier;
    }

    /// Arrives on the barrier and tells it that `bytes` of copies will complete on its
    /// current phase.
    fn mbarrier_expect(&mut self, barrier: Self::V, bytes: u32) {
        let _ = (barrier, bytes);
    }

    /// Waits until the barrier's phase of parity `parity` (i32, 0 or 1) has completed; the
    /// copies that completed on it are then visible to this thread.
    fn mbarrier_wait(&mut self, barrier: Self::V, parity: Self::V) {
        let _ = (barrier, parity);
    }

    /// Starts copying the box at (`coords[0]` columns, `coords[1]` rows) of tensor map `map`
    /// ([`crate::gpu::lower::LowerInfo::tensor_maps`], a kernel parameter after the
    /// program's) to `shared[dtype][shared_index..]` (1024-byte aligned), in rows of 128
    /// bytes with the 128-byte swizzle; elements outside the tensor become zeros. It completes
    /// on the barrier at `shared_i64[barrier]`.
    fn tensor_copy(&mut self, map: u32, dtype: DType, shared_index: Self::V, coords: [Self::V; 2], barrier: Self::V) {
        let _ = (map, dtype, shared_index, coords, barrier);
    }

    /// Whether the backend issues cooperative matrices ([`crate::gpu::MatrixKind::CooperativeMatrix`]):
    /// [`Emitter::coop_fill`], [`Emitter::coop_load`], [`Emitter::coop_store`] and
    /// [`Emitter::coop_mul_add`], which return `None` on a backend without them. A cooperative matrix is one value of the backend's, opaque
    /// to the lowering; it may be carried by a loop ([`Emitter::begin_loop`] with the
    /// accumulator's dtype), and every thread of the warp takes part in each operation.
    fn coop_matrices(&self) -> bool {
        false
    }

    /// An accumulator of `instr` with every element `value` (f32).
    fn coop_fill(&mut self, instr: MatrixInstr, value: Self::V) -> Option<Self::V> {
        let _ = (instr, value);
        None
    }

    /// Loads a cooperative matrix of `instr` for `role` (`a`: `m x k` of `instr.a`, `b`: `k x n`
    /// of `instr.b`, accumulator: `m x n` f32) from the shared array of `dtype` (the role's):
    /// element (`r`, `c`) at `index + r * stride + c` (`col_major`: `index + c * stride + r`).
    /// `index` is the same in every thread of the warp, and `index` and `stride` are multiples
    /// of 16 bytes.
    #[allow(clippy::too_many_arguments)]
    fn coop_load(&mut self, instr: MatrixInstr, role: CoopRole, dtype: DType, index: Self::V, stride: u32, col_major: bool) -> Option<Self::V> {
        let _ = (instr, role, dtype, index, stride, col_major);
        None
    }

    /// Stores accumulator `value` of `instr` to the shared array of f32 as [`Emitter::coop_load`]
    /// addresses it.
    fn coop_store(&mut self, instr: MatrixInstr, value: Self::V, index: Self::V, stride: u32) -> Option<()> {
        let _ = (instr, value, index, stride);
        None
    }

    /// Whether the backend has a staging array for cooperative-matrix operands
    /// ([`Emitter::reserve_staging`]): shared memory of its own, written 16 bytes at a time
    /// ([`Emitter::store_staging`]) and read by [`Emitter::coop_load_staged`]. A thread that
    /// stages its tile with one store per 16 bytes instead of one per element issues an eighth
    /// of the stores for 16-bit operands.
    fn staging_vectors(&self) -> bool {
        false
    }

    /// Declares that the staging array of `dtype` holds at least `len` elements (a multiple of
    /// 16 bytes); apart from the shared array of the same dtype ([`Emitter::reserve_shared`]).
    fn reserve_staging(&mut self, dtype: DType, len: u32) {
        let _ = (dtype, len);
    }

    /// Stores 16 bytes of `dtype` (`values`, as registers hold them: bf16 as its bits) at
    /// elements `index ..` of the staging array; `index` is a multiple of `values.len()`.
    fn store_staging(&mut self, dtype: DType, index: Self::V, values: &[Self::V]) {
        let _ = (dtype, index, values);
    }

    /// [`Emitter::coop_load`] from the staging array of `dtype` instead of the shared array;
    /// `index` and `stride` count elements and are multiples of 16 bytes.
    #[allow(clippy::too_many_arguments)]
    fn coop_load_staged(
        &mut self,
        instr: MatrixInstr,
        role: CoopRole,
        dtype: DType,
        index: Self::V,
        stride: u32,
        col_major: bool,
    ) -> Option<Self::V> {
        let _ = (instr, role, dtype, index, stride, col_major);
        None
    }

    /// `a x b + c` on cooperative matrices of `instr`: products summed in f32.
    fn coop_mul_add(&mut self, instr: MatrixInstr, a: Self::V, b: Self::V, c: Self::V) -> Option<Self::V> {
        let _ = (instr, a, b, c);
        None
    }

    /// Marks the loop opened next as the k loop of a `dot`: its body already holds a step of
    /// every accumulator register, so unrolling it multiplies the shared-memory loads in flight
    /// (and the registers they need) without adding independent work. Emitters whose code
    /// generator takes loop hints pass it on where the target asks for it; others ignore it.
    fn mark_dot_loop(&mut self) {}
}

/// `buffer[index .. index + n]` one element at a time: the vector load of a backend without
/// vector accesses, or of a width it cannot move in one.
pub fn load_elementwise<E: Emitter + ?Sized>(e: &mut E, buffer: u32, dtype: DType, index: E::V, index_dtype: DType, n: u32) -> Vec<E::V> {
    (0..n)
        .map(|i| {
            let off = e.constant(index_dtype, Scalar::Int(i as i64));
            let idx = e.binary(BinaryOp::Add, index_dtype, index, off);
            e.load_global(buffer, dtype, idx, index_dtype)
        })
        .collect()
}

/// The store counterpart of [`load_elementwise`].
pub fn store_elementwise<E: Emitter + ?Sized>(e: &mut E, buffer: u32, dtype: DType, index: E::V, index_dtype: DType, values: &[E::V]) {
    for (i, &v) in values.iter().enumerate() {
        let off = e.constant(index_dtype, Scalar::Int(i as i64));
        let idx = e.binary(BinaryOp::Add, index_dtype, index, off);
        e.store_global(buffer, dtype, idx, index_dtype, v);
    }
}

/// What a cooperative matrix is to its multiply-add.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoopRole {
    A,
    B,
    Acc,
}

/// The `a` operand of [`Emitter::wgmma`].
#[derive(Clone, Debug)]
pub enum WgmmaA<'a, V> {
    /// This thread's eight values of its warp's 16 x 16 fragment (mma.sync's `a`).
    Registers(&'a [V]),
    /// An `instr.m x instr.k` tile in shared memory, K contiguous.
    Shared(SharedMatrix<V>),
}

/// A matrix instruction's operand in shared memory as a descriptor gives it: 16-bit elements
/// in 128-byte rows (64 elements) whose 16-byte chunks are XOR-swizzled with bits 7 to 9 of
/// the byte address (`wgmma`'s 128-byte swizzle; the array holding it starts 1024-byte
/// aligned). With K contiguous (`k_major`), element (`i`, `k`) of the operand (`i` its row
/// along M or N) is at byte `start + (i / 8) sbo + (i % 8) 128 + 2 k` before swizzling;
/// otherwise element (`k`, `i`) is at `start + (i / 64) lbo + (k / 8) sbo + (k % 8) 128 +
/// 2 (i % 64)`.
#[derive(Clone, Copy, Debug)]
pub struct SharedMatrix<V> {
    /// Element index, in the dtype's shared array, of the operand's first element.
    pub start: V,
    pub k_major: bool,
    /// Bytes between 64-element panels along M or N (unused with K contiguous).
    pub lbo: u32,
    /// Bytes between groups of eight 128-byte rows.
    pub sbo: u32,
}

impl<V> SharedMatrix<V> {
    /// The byte offset from `start`, before swizzling, of element (`i`, `k`): `i` along M or
    /// N, `k` along K.
    pub fn offset(&self, i: u32, k: u32) -> u32 {
        if self.k_major {
            (i / 8) * self.sbo + (i % 8) * 128 + 2 * k
        } else {
            (i / 64) * self.lbo + (k / 8) * self.sbo + (k % 8) * 128 + 2 * (i % 64)
        }
    }

    /// A byte address as the 128-byte swizzle places it.
    pub fn swizzle(addr: u32) -> u32 {
        addr ^ (((addr >> 7) & 7) << 4)
    }
}
