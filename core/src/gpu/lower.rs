//! Lowering a tile program to a per-thread scalar program, shared by every backend.
//!
//! Values fall in three classes:
//! - *scalars* (rank 0) are computed by every thread (`#uniform`);
//! - *recipes* are pure functions of thread coordinates and scalars (`arange`, `splat`,
//!   `broadcast`, `expand_dims`, `trans` and elementwise ops over recipes). They have no home: a
//!   use materializes them directly in the layout it needs, so index arithmetic never moves data
//!   between threads;
//! - *data* (loads, reductions, scans, dots, loop-carried and `if` values, elementwise ops over
//!   data) live in one *home* layout, computed once; a use in another layout converts through
//!   shared memory.
//!
//! Homes are chosen for coalescing: a blocked layout with lanes along the contiguous last
//! dimension ([`Blocked::for_shape`]), inherited by everything computed from a value, and a
//! slice of its operand's layout for a reduction. Reductions combine within a thread, then
//! across lanes with shuffles (xor butterfly) when the target has them, then across warps
//! through shared memory. Every shared-memory use starts with a barrier, so uses never overlap
//! and the requirement is the largest single use per dtype, checked against the target.
//!
//! bf16 values are held in f32 registers rounded to bf16 after every operation, which is exactly
//! the interpreter's semantics; backends see bf16 only at loads, stores and casts.

use std::collections::{HashMap, HashSet};

use crate::dtype::{DType, Scalar};
use crate::gpu::axis::{analyse, AxisInfo};
use crate::gpu::emit::{CoopRole, Emitter, SharedMatrix, WgmmaA};
use crate::gpu::layout::{Blocked, Coop, Dist, Frag, Layout, Mma, ThreadSrc, ThreadTerm};
use crate::gpu::target::{Isa, MatrixInstr, MatrixKind, Target};
use crate::gpu::tma::{Extent, Poly, Polys, TensorMap};
use crate::ir::*;
use crate::verify::{verify, VerifyError};

/// Launch-shape choices that are not part of the tile program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LowerOptions {
    /// Warps per program; threads = num_warps * subgroup size.
    pub num_warps: u32,
    /// Scalar parameters known to be multiples of 16 (bit `p` for parameter `p`; parameters past
    /// 63 are never marked). As in Triton, a launch specializes on this: row strides and sizes
    /// that are multiples of 16 let loads and stores along rows become vector accesses, so a
    /// compiled kernel is valid only for arguments with the same marks.
    pub divisible_by_16: u64,
    /// Scalar parameters known to be positive (bit `p` for parameter `p`), the launch's other
    /// specialization: a tensor map ([`crate::gpu::tma`]) takes only positive extents, so a
    /// pipelined load is copied with one only where its extents are marked.
    pub positive: u64,
    /// Fold the grid ([`crate::gpu::grid`]): the kernel takes the logical grid at launch and
    /// derives program ids from its linear workgroup index, so a runtime can dispatch a grid
    /// larger than the device's per-axis limit. Runtimes choose it per launch, only for grids
    /// that do not fit; backends that cannot fold refuse it ([`LowerError::GridFold`]).
    pub fold_grid: bool,
    /// Programs the code generator should leave registers for on one multiprocessor (the
    /// configuration's `occupancy`; 0: the backend's choice). NVPTX passes it to ptxas as
    /// `.minnctapersm`, which caps registers per thread at 65536 / (threads * occupancy): a
    /// program that keeps a long row in registers otherwise gets so many that one program fills a
    /// multiprocessor and nothing hides its load latency. SPIR-V and AMDGCN ignore it.
    pub occupancy: u32,
    /// Software-pipelining depth of the loads that feed a matrix `dot` in a loop (the
    /// configuration's `num_stages`; 1: none). With `s` stages, `s - 1` iterations of those
    /// loads are in flight, as asynchronous copies into a ring of `s` shared-memory buffers,
    /// on backends that have asynchronous copies (PTX for sm_80 and newer; on sm_90a one thread's
    /// tensor copies where the loads are boxes of tensor maps, [`crate::gpu::tma`]). Elsewhere the next
    /// iteration's loads are issued into registers (one iteration ahead whatever the depth),
    /// and a loop's one dot on cooperative matrices stages its operands in one buffer with two
    /// stages and alternates between two from three (where both fit); loads that cannot be
    /// issued early run as written.
    pub num_stages: u32,
    /// How far cooperative-matrix operands may use the staging array
    /// ([`crate::gpu::emit::Emitter::reserve_staging`]). Compilers start at
    /// [`Staging::Double`] and lower again a step down when the program's shared memory does
    /// not fit ([`LowerOptions::fallback`]): the staging arrays do not share memory with the
    /// shared arrays, and a loop's second buffer is sized before what the program reserves
    /// after it.
    pub staging: Staging,
    /// Buffer parameters (bit `b` for the `b`-th buffer parameter, in parameter order) that a
    /// backend declaring whole-vector views of its buffers must declare by elements: the launch
    /// binds a buffer there whose size is not a whole number of 16-byte vectors (a caller's
    /// buffer), which such a view cannot cover. Runtimes set it per launch
    /// (`Runtime::element_bindings`); only the naga backend declares such views (a binding has
    /// one type there), so it is the one that reads it: the SPIR-V module has both views of a
    /// binding and reads a vector only where the program's masks allow it.
    pub element_bindings: u64,
}

/// What [`LowerOptions::staging`] allows, most first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Staging {
    /// Staging in 16-byte vectors, in two buffers for a loop's one dot with `num_stages >= 3`
    /// where they fit.
    #[default]
    Double,
    /// Staging in 16-byte vectors, one buffer.
    Single,
    /// Element stores into the shared array.
    Elements,
}

impl LowerOptions {
    /// `num_warps` warps, nothing known about the scalar arguments.
    pub fn new(num_warps: u32) -> LowerOptions {
        LowerOptions {
            num_warps,
            divisible_by_16: 0,
            positive: 0,
            fold_grid: false,
            occupancy: 0,
            num_stages: 1,
            staging: Staging::Double,
            element_bindings: 0,
        }
    }

    /// The options to lower with again after `err`: a step below the staging the program used
    /// where `err` is a shared-memory refusal of a program that staged.
    pub fn fallback(&self, err: &LowerError) -> Option<LowerOptions> {
        let LowerError::SharedMemory { staging, .. } = err else { return None };
        let next = match staging {
            Staging::Double => Staging::Single,
            Staging::Single => Staging::Elements,
            Staging::Elements => return None,
        };
        Some(LowerOptions { staging: next, ..*self })
    }

    /// The options a configuration asks for: its `num_warps` (4 when absent) and `occupancy`
    /// (0 when absent).
    pub fn for_config(config: &crate::Config) -> LowerOptions {
        LowerOptions {
            occupancy: config.count("occupancy").unwrap_or(0) as u32,
            num_stages: config.count("num_stages").unwrap_or(1) as u32,
            ..LowerOptions::new(config.num_warps() as u32)
        }
    }

    /// The marks for a launch's scalar arguments, given as (parameter index, value): integers
    /// that are multiples of 16, and integers that are positive.
    pub fn specialize<'s>(mut self, scalars: impl IntoIterator<Item = (u32, &'s Scalar)>) -> LowerOptions {
        self.divisible_by_16 = 0;
        self.positive = 0;
        for (p, s) in scalars {
            if let (true, Scalar::Int(v)) = (p < 64, s) {
                if v % 16 == 0 {
                    self.divisible_by_16 |= 1 << p;
                }
                if *v > 0 {
                    self.positive |= 1 << p;
                }
            }
        }
        self
    }
}

impl LowerOptions {
    /// Whether the lowering can run these options: `num_warps` a power of two.
    pub fn check(&self) -> Result<(), LowerError> {
        if self.num_warps.is_power_of_two() {
            Ok(())
        } else {
            Err(LowerError::NumWarps { num_warps: self.num_warps })
        }
    }

    /// These options with grid folding on or off.
    pub fn with_fold_grid(mut self, fold_grid: bool) -> LowerOptions {
        self.fold_grid = fold_grid;
        self
    }

    /// These options with [`LowerOptions::element_bindings`] set to `mask`.
    pub fn with_element_bindings(mut self, mask: u64) -> LowerOptions {
        self.element_bindings = mask;
        self
    }
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions::new(4)
    }
}

/// Most registers one tile value may take per thread before the lowering refuses: beyond this
/// every GPU spills.
pub const MAX_REGS_PER_VALUE: usize = 256;

/// Why a program cannot be lowered for a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LowerError {
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error("num_warps = {num_warps}: warps are numbered by the bits of the warp index, so num_warps must be a power of two (1, 2, 4, 8, ...)")]
    NumWarps { num_warps: u32 },
    #[error("{threads} threads per program ({num_warps} warps of {warp}) exceed the target's limit of {max}")]
    Threads { threads: u32, num_warps: u32, warp: u32, max: u32 },
    #[error("`{op}` at {loc}: target {target} does not support {dtype}")]
    DType { op: String, loc: Loc, dtype: DType, target: String },
    #[error("`{op}` at {loc}: {ty} needs {regs} registers per thread with {threads} threads; at most {max} (use smaller blocks or more warps)")]
    Registers { op: String, loc: Loc, ty: String, regs: usize, threads: u32, max: usize },
    #[error("the program needs {needed} bytes of shared memory ({detail}), the target has {available}")]
    SharedMemory {
        needed: u64,
        available: u32,
        detail: String,
        /// The most staging any `dot` used ([`LowerOptions::fallback`] steps down from it).
        staging: Staging,
    },
    #[error("`{op}` at {loc}: {what} is not supported by this lowering yet")]
    Unsupported { op: String, loc: Loc, what: String },
    #[error(
        "program `{program}`: LowerOptions::fold_grid is {asked}, but the backend's emitter {}",
        if *.asked { "does not fold grids" } else { "was built to fold them" }
    )]
    GridFold { program: String, asked: bool },
}

/// What the lowering decided, for reports and for `tilekit ir --gpu`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerInfo {
    pub threads: u32,
    /// Home layout of every data value (index = value), `None` for scalars and recipes.
    pub homes: Vec<Option<Layout>>,
    /// Shared memory per dtype in elements, and the total in bytes.
    pub shared: Vec<(DType, u32)>,
    /// Elements per dtype of the cooperative-matrix operands' staging arrays
    /// ([`Emitter::reserve_staging`]), counted in `shared_bytes` too.
    pub staged: Vec<(DType, u32)>,
    pub shared_bytes: u64,
    /// Layout conversions through shared memory that were emitted.
    pub conversions: usize,
    /// Loads issued `num_stages - 1` iterations ahead into shared-memory rings, by value
    /// (none with one stage, and where neither the target nor any loop allows it).
    pub rings: Vec<RingInfo>,
    /// The `dot`s lowered to warpgroup matrix instructions (`wgmma`), by value.
    pub wgmma: Vec<usize>,
    /// Of those, the ones whose instructions stay in flight into the next iteration.
    pub in_flight: Vec<usize>,
    /// The `dot`s lowered to cooperative matrices, by value, with their shape (m, n, k).
    pub coop: Vec<(usize, [u32; 3])>,
    /// Loads issued one iteration ahead into registers (`num_stages` on a target without
    /// asynchronous copies), by value.
    pub prefetched: Vec<usize>,
    /// The cooperative-matrix `dot`s whose operands alternate between two staging buffers
    /// (one barrier per iteration instead of two), by value.
    pub double_staged: Vec<usize>,
    /// The tensor maps the kernel takes after the program's parameters, in order: one per
    /// distinct tensor its pipelined loads copy with [`Emitter::tensor_copy`].
    pub tensor_maps: Vec<TensorMap>,
}

impl LowerInfo {
    /// Loads pipelined by `num_stages`.
    pub fn pipelined_loads(&self) -> usize {
        self.rings.len()
    }
}

/// A pipelined load's ring of shared-memory buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingInfo {
    /// The load's value index.
    pub value: usize,
    pub stages: u32,
    /// Rows and columns of one buffer as stored.
    pub stored: [usize; 2],
    pub swizzled: bool,
    /// The tile is contiguous along its first dimension and stored transposed.
    pub transposed: bool,
    /// Stored in panels of 64 columns with the 128-byte swizzle warpgroup matrix instructions
    /// read.
    pub panels: bool,
    /// Iterations its copies run ahead: `stages - 1`, one less where the loop's warpgroup
    /// matrix instructions stay in flight into the next iteration.
    pub ahead: u32,
    /// Its copies read from addresses the loop carries and advances by a fixed step
    /// (offsets affine in the induction variable), not from offsets computed per iteration.
    pub stepped: bool,
    /// Copied by one thread as boxes of a tensor map ([`crate::gpu::tma`]), completing on a
    /// shared-memory barrier per slot, instead of 16 bytes per thread and copy.
    pub tensor: bool,
}

type R<T> = Result<T, LowerError>;

/// A reduction's running value, with its index for arg reductions.
type Partial<V> = (V, Option<V>);

/// Lowers `program` for `target` through `emitter`.
pub fn lower<E: Emitter>(program: &Program, target: &Target, options: &LowerOptions, emitter: &mut E) -> R<LowerInfo> {
    verify(program)?;
    if options.fold_grid != emitter.folds_grid() {
        // A backend that ignored the option would run every program as program 0 of a grid
        // of extents it never received.
        return Err(LowerError::GridFold { program: program.name.clone(), asked: options.fold_grid });
    }
    options.check()?;
    let warp = target.subgroup_size.max(1);
    let threads = options.num_warps.saturating_mul(warp);
    if threads > target.max_threads_per_program {
        return Err(LowerError::Threads { threads, num_warps: options.num_warps, warp, max: target.max_threads_per_program });
    }
    check_dtypes(program, target)?;
    let mut lw = Lowerer {
        p: program,
        target,
        e: emitter,
        warp,
        num_warps: options.num_warps,
        threads,
        tid: None,
        lane: None,
        warp_id: None,
        scalars: HashMap::new(),
        data: HashMap::new(),
        memo: HashMap::new(),
        depth: 0,
        shared: HashMap::new(),
        staging: HashMap::new(),
        conversions: 0,
        homes: vec![None; program.values.len()],
        axis: analyse(
            program,
            &(0..program.params.len()).map(|p| if p < 64 && options.divisible_by_16 >> p & 1 == 1 { 16 } else { 1 }).collect::<Vec<_>>(),
        ),
        default_vector: 1,
        mma: HashMap::new(),
        coop: HashMap::new(),
        coop_kept: std::collections::HashSet::new(),
        stage_parity: None,
        double_staged: Vec::new(),
        staging_level: options.staging,
        carried: HashMap::new(),
        pipelines: HashMap::new(),
        prefetch: HashMap::new(),
        prefetched: Vec::new(),
        rings: HashMap::new(),
        floors: HashMap::new(),
        stepped: HashSet::new(),
        num_stages: options.num_stages.max(1),
        divisible_by_16: options.divisible_by_16,
        positive: options.positive,
        tensor_maps: Vec::new(),
        bf16_bits: HashMap::new(),
        preferred: HashMap::new(),
        wgmma_dots: Vec::new(),
    };
    lw.default_vector = lw.program_vector();
    plan_transposes(&mut lw);
    plan_matrix(&mut lw);
    plan_pipelines(&mut lw);
    plan_prefetch(&mut lw);
    let tid = lw.e.thread_index();
    let wmask = lw.e.constant(DType::I32, Scalar::Int(warp as i64 - 1));
    let lane = lw.e.binary(BinaryOp::And, DType::I32, tid, wmask);
    let wshift = lw.e.constant(DType::I32, Scalar::Int(warp.trailing_zeros() as i64));
    let warp_id = lw.e.binary(BinaryOp::Shr, DType::I32, tid, wshift);
    lw.tid = Some(tid);
    lw.lane = Some(lane);
    lw.warp_id = Some(warp_id);
    lw.block(&program.body)?;
    let mut shared: Vec<(DType, u32)> = lw.shared.iter().map(|(&d, &n)| (d, n)).collect();
    shared.sort();
    let mut staged: Vec<(DType, u32)> = lw.staging.iter().map(|(&d, &n)| (d, n)).collect();
    staged.sort();
    let shared_bytes: u64 = shared.iter().chain(&staged).map(|&(d, n)| n as u64 * smem_elem_bytes(d)).sum();
    if shared_bytes > target.shared_memory_bytes as u64 {
        let mut detail = shared
            .iter()
            .map(|(d, n)| format!("{n} x {d}"))
            .chain(staged.iter().map(|(d, n)| format!("{n} x {d} staged")))
            .collect::<Vec<_>>()
            .join(" + ");
        let rings: usize = lw.pipelines.values().flat_map(|p| &p.loads).map(|l| l.numel() * lw.num_stages as usize).sum();
        if rings > 0 {
            detail.push_str(&format!(", of which {rings} elements are num_stages = {} copies of the pipelined tiles", lw.num_stages));
        }
        let staging = match (lw.double_staged.is_empty(), staged.is_empty()) {
            (false, _) => Staging::Double,
            (true, false) => Staging::Single,
            (true, true) => Staging::Elements,
        };
        return Err(LowerError::SharedMemory { needed: shared_bytes, available: target.shared_memory_bytes, detail, staging });
    }
    let mut rings: Vec<RingInfo> = lw
        .pipelines
        .values()
        .flat_map(|p| p.loads.iter().map(move |l| (p, l)))
        .map(|(p, l)| RingInfo {
            value: l.result.index(),
            stages: lw.num_stages,
            stored: if l.transposed { [l.shape[1], l.shape[0]] } else { l.shape },
            swizzled: l.swizzle.max_phase > 1,
            panels: l.swizzle.panel > 0,
            ahead: lw.num_stages - 1 - p.lag(),
            transposed: l.transposed,
            stepped: lw.stepped.contains(&l.result),
            tensor: p.tensor.is_some(),
        })
        .collect();
    rings.sort_by_key(|r| r.value);
    let mut wgmma = lw.wgmma_dots;
    wgmma.sort();
    wgmma.dedup();
    let mut in_flight: Vec<usize> = lw.pipelines.values().flat_map(|p| &p.deferred).map(|v| v.index()).filter(|v| wgmma.contains(v)).collect();
    in_flight.sort();
    let mut coop: Vec<(usize, [u32; 3])> = lw.coop.iter().map(|(v, (i, _))| (v.index(), [i.m, i.n, i.k])).collect();
    coop.sort();
    let mut prefetched = lw.prefetched;
    prefetched.sort_unstable();
    prefetched.dedup();
    let mut double_staged = lw.double_staged;
    double_staged.sort_unstable();
    double_staged.dedup();
    Ok(LowerInfo {
        threads,
        homes: lw.homes,
        shared,
        staged,
        shared_bytes,
        conversions: lw.conversions,
        rings,
        wgmma,
        in_flight,
        coop,
        prefetched,
        double_staged,
        tensor_maps: lw.tensor_maps,
    })
}

/// [`lower`] into an emitter from `make`, lowered again into a fresh one with less staging
/// while the shared memory does not fit ([`LowerOptions::fallback`]); `lowering` wraps the
/// last error. Every compiler of a backend with a staging array lowers through this, so the
/// emulator decides as the backend does.
pub fn lower_fitting<E: Emitter, X>(
    program: &Program,
    target: &Target,
    options: &LowerOptions,
    mut make: impl FnMut() -> Result<E, X>,
    lowering: impl Fn(LowerError) -> X,
) -> Result<(E, LowerInfo), X> {
    let mut options = *options;
    loop {
        let mut e = make()?;
        match lower(program, target, &options, &mut e) {
            Ok(info) => return Ok((e, info)),
            Err(err) => match options.fallback(&err) {
                Some(next) => options = next,
                None => return Err(lowering(err)),
            },
        }
    }
}

/// Bytes one shared-memory element of `dtype` takes (booleans are stored as 32-bit).
pub(crate) fn smem_elem_bytes(d: DType) -> u64 {
    if d == DType::I1 {
        4
    } else {
        d.size_bytes() as u64
    }
}

fn check_dtypes(program: &Program, target: &Target) -> R<()> {
    let mut err = None;
    program.walk(&mut |inst| {
        if err.is_some() {
            return;
        }
        for &r in &inst.results {
            let d = program.ty(r).dtype;
            if !target.supports(d) {
                err = Some(LowerError::DType { op: inst.op.name().into(), loc: inst.loc.clone(), dtype: d, target: target.name.clone() });
            }
        }
    });
    for p in &program.params {
        let d = match p.kind {
            ParamKind::Buffer { dtype, .. } | ParamKind::Scalar { dtype } => dtype,
        };
        if !target.supports(d) && err.is_none() {
            err = Some(LowerError::DType { op: format!("parameter {}", p.name), loc: Loc::default(), dtype: d, target: target.name.clone() });
        }
    }
    err.map_or(Ok(()), Err)
}

/// The dtype a value of `d` has in registers.
fn reg_dtype(d: DType) -> DType {
    if d == DType::BF16 {
        DType::F32
    } else {
        d
    }
}

/// Memoized per-layout materializations, valid at `depth` and deeper.
struct MemoEntry<V> {
    depth: usize,
    regs: Vec<V>,
}

struct Lowerer<'a, E: Emitter> {
    p: &'a Program,
    target: &'a Target,
    e: &'a mut E,
    warp: u32,
    num_warps: u32,
    threads: u32,
    tid: Option<E::V>,
    lane: Option<E::V>,
    warp_id: Option<E::V>,
    scalars: HashMap<Value, E::V>,
    /// Data values: home layout and registers.
    data: HashMap<Value, (Layout, Vec<E::V>)>,
    memo: HashMap<(Value, Layout), MemoEntry<E::V>>,
    depth: usize,
    shared: HashMap<DType, u32>,
    /// Elements of each dtype's staging array ([`Emitter::reserve_staging`]).
    staging: HashMap<DType, u32>,
    conversions: usize,
    homes: Vec<Option<Layout>>,
    /// Offset analysis of every value.
    axis: Vec<Option<AxisInfo>>,
    /// Consecutive elements per thread in the default layout (see `program_vector`).
    default_vector: u32,
    /// The matrix instruction and warp arrangement of each `dot` (by result) that lowers to
    /// one, chosen before emission ([`plan_matrix`]).
    mma: HashMap<Value, (MatrixInstr, Mma)>,
    /// The cooperative-matrix instruction and warp arrangement of each `dot` (by result) that
    /// lowers to one ([`plan_matrix`]).
    coop: HashMap<Value, (MatrixInstr, Coop)>,
    /// Those whose result stays in cooperative matrices: a K loop's accumulator, which only
    /// this `dot` reads and only the loop's `yield` takes.
    coop_kept: std::collections::HashSet<Value>,
    /// Layouts chosen ahead for values whose best layout a later op decides: the loop-carried
    /// accumulators of matrix-instruction `dot`s (by body argument).
    carried: HashMap<Value, Layout>,
    /// Software-pipelined loops (by their induction variable) and the loads they issue early.
    pipelines: HashMap<Value, Pipeline>,
    /// Loops (by induction variable) whose cooperative-matrix operands are loaded one iteration
    /// ahead into registers, where the target has no asynchronous copies ([`plan_prefetch`]),
    /// and the loads.
    prefetch: HashMap<Value, Vec<Prefetch>>,
    /// The loads emitted that way, by value index.
    prefetched: Vec<usize>,
    /// The loop's iteration parity (0 or 1) for the loop's one cooperative-matrix `dot`, which
    /// stages its operands in two buffers, one per parity, where they fit (`num_stages >= 3`).
    stage_parity: Option<E::V>,
    /// The `dot`s that took it, by value index.
    double_staged: Vec<usize>,
    /// [`LowerOptions::staging`].
    staging_level: Staging,
    /// Pipelined loads of the loop being lowered: not emitted where they stand, their `dot`s
    /// read the ring.
    rings: HashMap<Value, Ring<E::V>>,
    /// Shared-memory elements per dtype below which a pipelined loop's rings live: every other
    /// use starts above them while the loop runs.
    floors: HashMap<DType, u32>,
    /// Pipelined loads whose copies step through memory by carried addresses.
    stepped: HashSet<Value>,
    num_stages: u32,
    /// [`LowerOptions::divisible_by_16`] and [`LowerOptions::positive`].
    divisible_by_16: u64,
    positive: u64,
    /// [`LowerInfo::tensor_maps`].
    tensor_maps: Vec<TensorMap>,
    /// The bf16 bits each f32 register holding a bf16 value was widened from: a store or a
    /// cast back to bf16 reuses them instead of converting again (a `cast(bf16)` followed by a
    /// store would otherwise round twice, the costliest part of a bf16 elementwise kernel where
    /// the backend emulates the conversion). The bits are defined just before the register, so
    /// they are available wherever it is.
    bf16_bits: HashMap<E::V, E::V>,
    /// Home layouts chosen ahead for loads whose tile a store writes transposed
    /// ([`plan_transposes`]).
    preferred: HashMap<Value, Layout>,
    /// The `dot`s emitted with warpgroup matrix instructions, by value index.
    wgmma_dots: Vec<usize>,
}

/// A loop whose matrix-operand loads are issued `num_stages - 1` iterations ahead, or
/// `num_stages - 2` where its warpgroup matrix instructions stay in flight into the next
/// iteration.
#[derive(Clone, Debug)]
struct Pipeline {
    loads: Vec<PipeLoad>,
    /// The warpgroup `dot`s whose instructions are waited for one iteration later (the next
    /// iteration's, chained on the same accumulator, are issued first): each accumulates into
    /// a loop-carried value that nothing else reads and its result only goes to the `yield`.
    /// Their last iteration's are waited for after the loop. While a group is in flight its
    /// ring slot must not be refilled, so the copies run one iteration less ahead.
    deferred: Vec<Value>,
    /// The body's instructions (indices, in order) that compute those loads' offsets and masks:
    /// pure functions of the induction variable and values defined outside the loop, so they
    /// can be evaluated for a later iteration.
    slice: Vec<usize>,
    /// Where every load is copied with a tensor map: how.
    tensor: Option<TensorPipe>,
}

/// A pipelined loop whose loads one thread copies as boxes of tensor maps, completing on one
/// shared-memory barrier per ring slot.
#[derive(Clone, Debug)]
struct TensorPipe {
    /// Per load (in [`Pipeline::loads`]' order): its map's index in [`LowerInfo::tensor_maps`]
    /// and the box's origin.
    loads: Vec<(u32, [Poly; 2])>,
    /// The instructions of [`Pipeline::slice`] the origins need.
    slice: Vec<usize>,
}

/// The source addresses of a pipelined loop's copies ([`Lowerer::pipe_addresses`]): one per
/// copy, in [`Lowerer::pipe_copies`]' order, and what each advances by per iteration.
struct CopyAddresses<V> {
    at: Vec<V>,
    steps: Vec<V>,
}

/// What a pipelined loop's next iteration starts from ([`Lowerer::pipe_step`]): the ring slots it
/// reads and writes and its copies' addresses (empty where they are not carried).
struct NextSlots<V> {
    read: V,
    write: V,
    addresses: Vec<V>,
    /// With tensor copies, the parity of the phase to wait for on the barrier of `read`.
    phase: Option<V>,
}

/// A load a pipelined loop issues early, into a ring of `num_stages` shared-memory buffers.
#[derive(Clone, Debug)]
struct PipeLoad {
    result: Value,
    buffer: u32,
    offsets: Value,
    mask: Option<Value>,
    dtype: DType,
    shape: [usize; 2],
    /// The tile is contiguous in memory along its first dimension (a `b` operand `[K, N]`
    /// read from an `N x K` row-major matrix, as attention's K^T): the ring holds it
    /// transposed, `shape[1]` rows of `shape[0]`, and the dot reads it with untransposed
    /// matrix loads.
    transposed: bool,
    swizzle: Swizzle,
}

impl Pipeline {
    /// Iterations the copies run less than `num_stages - 1` ahead.
    fn lag(&self) -> u32 {
        u32::from(!self.deferred.is_empty())
    }
}

impl PipeLoad {
    fn numel(&self) -> usize {
        self.shape[0] * self.shape[1]
    }

    /// Elements per 16-byte copy: 8 of a 16-bit dtype, 4 of f32.
    fn vec(&self) -> u32 {
        (16 / smem_elem_bytes(self.dtype).max(1)) as u32
    }
}

/// A load a loop issues one iteration ahead into registers ([`plan_prefetch`]).
#[derive(Clone, Debug)]
struct Prefetch {
    load: Value,
    /// The body instructions (indices, in order) that compute its offsets, mask and `other`.
    slice: Vec<usize>,
}

/// Where a `dot` operand's fragments come from.
enum Source<V> {
    Registers(Vec<V>),
    /// Written to shared memory by the dot itself, at this offset.
    Staged {
        base: usize,
    },
    Ring(Ring<V>),
}

/// The current buffer of a pipelined load's ring.
#[derive(Clone, Debug)]
struct Ring<V> {
    dtype: DType,
    swizzle: Swizzle,
    /// See [`PipeLoad::transposed`].
    transposed: bool,
    /// Shared-memory index of the buffer this iteration reads.
    slot_base: V,
}

/// Per-lane parts of matrix-load addresses ([`Lowerer::matrix_lanes`]).
struct MatrixLanes<V> {
    l15: V,
    a_row: V,
    a_col: V,
    b_col: V,
    /// For a `b` stored transposed (rows n, columns k): the lane's row `warp_n * 8 + l % 8 +
    /// (l / 16) * 8 wn` and column `8 ((l / 8) % 2)`.
    bt: Option<(V, V)>,
}

/// Coordinates of a distribution's registers in this thread.
struct Coords<V> {
    /// Per register, per dimension.
    coords: Vec<Vec<V>>,
    /// Per register, whether this thread owns the element (None: always).
    owner: Vec<Option<V>>,
}

impl<'a, E: Emitter> Lowerer<'a, E> {
    fn ty(&self, v: Value) -> &'a Type {
        self.p.ty(v)
    }

    fn c_i32(&mut self, x: i64) -> E::V {
        self.e.constant(DType::I32, Scalar::Int(x))
    }

    fn push_scope(&mut self) {
        self.depth += 1;
    }

    fn pop_scope(&mut self) {
        self.depth -= 1;
        let d = self.depth;
        self.memo.retain(|_, m| m.depth <= d);
    }

    fn default_layout(&self, shape: &[usize]) -> Layout {
        if shape.is_empty() {
            return Layout::Uniform;
        }
        // Four consecutive elements per thread (16 bytes of f32) rather than one: values without
        // a memory access to follow, such as loop accumulators started from a constant, pass
        // their layout on to the loads and stores in the loop, which then move whole vectors.
        Layout::Blocked(Blocked::for_shape(shape, self.default_vector(), self.warp, self.num_warps))
    }

    /// Consecutive elements per thread in the default layout.
    fn default_vector(&self) -> u32 {
        self.default_vector
    }

    /// The default layout's elements per thread: enough for a 16-byte access of the narrowest
    /// dtype the program streams through global memory (contiguous tile loads and stores), and at
    /// least four (16 bytes of f32). One width for the whole program, because values in different
    /// layouts meet through shared memory: an f16 LayerNorm whose f32 statistics and accumulators
    /// hold 4 elements per thread would load f16 8 bytes at a time (Triton's are 16); with 8 per
    /// thread, f16 moves 16 bytes per access and f32 two 16-byte vectors. An i8 stream asks for
    /// 16 (a quantised output stored 8 bytes at a time takes twice the store instructions). The
    /// width costs no registers: a tile with fewer elements than width x threads gets narrower
    /// vectors ([`Blocked::for_shape`]), and a larger one holds as many per thread either way.
    fn program_vector(&self) -> u32 {
        let floor = (self.target.max_vector_bytes / 4).clamp(1, 4);
        let mut v = floor;
        self.p.walk(&mut |inst| {
            let (offsets, dtype) = match &inst.op {
                Op::Load { offsets, .. } => (*offsets, self.p.ty(inst.results[0]).dtype),
                Op::Store { offsets, value, .. } => (*offsets, self.p.ty(*value).dtype),
                _ => return,
            };
            if self.p.ty(offsets).is_scalar() {
                return;
            }
            let w = self.vector_width(offsets, dtype);
            if w > 1 {
                v = v.max(w);
            }
        });
        v.min(16)
    }

    fn dist(&self, layout: &Layout, shape: &[usize]) -> Dist {
        layout.dist(shape, self.warp)
    }

    fn check_regs(&self, inst: &Inst, ty: &Type, layout: &Layout) -> R<()> {
        let n = self.dist(layout, &ty.shape).num_regs();
        if n > MAX_REGS_PER_VALUE {
            return Err(LowerError::Registers {
                op: inst.op.name().into(),
                loc: inst.loc.clone(),
                ty: ty.to_string(),
                regs: n,
                threads: self.threads,
                max: MAX_REGS_PER_VALUE,
            });
        }
        Ok(())
    }

    fn reserve(&mut self, dtype: DType, len: usize) {
        let len = len as u32 + self.floors.get(&dtype).copied().unwrap_or(0);
        let e = self.shared.entry(dtype).or_insert(0);
        *e = (*e).max(len);
        self.e.reserve_shared(dtype, len);
    }

    /// Shared-memory accesses of everything but a pipelined loop's rings, which sit below the
    /// floor of their dtype while the loop runs.
    fn floored(&mut self, dtype: DType, index: E::V) -> E::V {
        match self.floors.get(&dtype).copied() {
            Some(f) if f > 0 => self.offset(index, f as i64),
            _ => index,
        }
    }

    fn st_sh(&mut self, dtype: DType, index: E::V, value: E::V) {
        let index = self.floored(dtype, index);
        self.e.store_shared(dtype, index, value);
    }

    fn ld_sh(&mut self, dtype: DType, index: E::V) -> E::V {
        let index = self.floored(dtype, index);
        self.e.load_shared(dtype, index)
    }

    // ----- classes -----

    fn is_data(&self, v: Value) -> bool {
        self.data.contains_key(&v)
    }

    fn set_data(&mut self, v: Value, layout: Layout, regs: Vec<E::V>) {
        self.homes[v.index()] = Some(layout.clone());
        self.data.insert(v, (layout, regs));
    }

    fn scalar(&self, v: Value) -> E::V {
        self.scalars[&v]
    }

    // ----- thread coordinates -----

    fn term_value(&mut self, t: &ThreadTerm) -> E::V {
        let src = match t.src {
            ThreadSrc::Lane => self.lane,
            ThreadSrc::Warp => self.warp_id,
        }
        .expect("thread ids are emitted first");
        let sh = self.c_i32(t.shift as i64);
        let x = self.e.binary(BinaryOp::Shr, DType::I32, src, sh);
        let m = self.c_i32(t.mask as i64);
        let x = self.e.binary(BinaryOp::And, DType::I32, x, m);
        if t.mult == 1 {
            x
        } else {
            let mult = self.c_i32(t.mult as i64);
            self.e.binary(BinaryOp::Mul, DType::I32, x, mult)
        }
    }

    /// Per-register coordinates and ownership of `dist` in this thread.
    fn coords(&mut self, dist: &Dist) -> Coords<E::V> {
        let all: Vec<usize> = (0..dist.regs.len()).collect();
        self.coords_of(dist, &all)
    }

    /// [`Lowerer::coords`] of the registers `which` only (in that order): where a thread
    /// addresses one access per run of registers, the others' coordinates are never used.
    fn coords_of(&mut self, dist: &Dist, which: &[usize]) -> Coords<E::V> {
        let rank = dist.shape.len();
        let bases: Vec<Option<E::V>> = (0..rank)
            .map(|d| {
                let terms = dist.terms[d].clone();
                let mut acc: Option<E::V> = None;
                for t in &terms {
                    let v = self.term_value(t);
                    acc = Some(match acc {
                        None => v,
                        Some(a) => self.e.binary(BinaryOp::Add, DType::I32, a, v),
                    });
                }
                acc
            })
            .collect();
        let mut replica_ok: Option<E::V> = None;
        for t in dist.replica_terms.clone() {
            let v = self.term_value(&t);
            let zero = self.c_i32(0);
            let c = self.e.cmp(CmpPred::Eq, DType::I32, v, zero);
            replica_ok = Some(match replica_ok {
                None => c,
                Some(a) => self.e.binary(BinaryOp::And, DType::I1, a, c),
            });
        }
        let mut coords = Vec::with_capacity(which.len());
        let mut owner = Vec::with_capacity(which.len());
        for r in which.iter().map(|&i| &dist.regs[i]) {
            let mut cs = Vec::with_capacity(rank);
            let mut own = replica_ok;
            for d in 0..rank {
                let st = self.c_i32(r[d] as i64);
                let u = match bases[d] {
                    Some(b) => self.e.binary(BinaryOp::Add, DType::I32, st, b),
                    None => st,
                };
                if dist.wrap[d] {
                    let ext = self.c_i32(dist.shape[d] as i64);
                    let inb = self.e.cmp(CmpPred::Lt, DType::I32, u, ext);
                    own = Some(match own {
                        None => inb,
                        Some(a) => self.e.binary(BinaryOp::And, DType::I1, a, inb),
                    });
                    let m = self.c_i32(dist.shape[d] as i64 - 1);
                    cs.push(self.e.binary(BinaryOp::And, DType::I32, u, m));
                } else {
                    cs.push(u);
                }
            }
            coords.push(cs);
            owner.push(own);
        }
        Coords { coords, owner }
    }

    /// Row-major linear index of coordinates in `shape`.
    fn linear(&mut self, coords: &[E::V], shape: &[usize]) -> E::V {
        let mut acc: Option<E::V> = None;
        for (d, &c) in coords.iter().enumerate() {
            acc = Some(match acc {
                None => c,
                Some(a) => {
                    let ext = self.c_i32(shape[d] as i64);
                    let m = self.e.binary(BinaryOp::Mul, DType::I32, a, ext);
                    self.e.binary(BinaryOp::Add, DType::I32, m, c)
                }
            });
        }
        acc.unwrap_or_else(|| self.c_i32(0))
    }

    // ----- materialization -----

    /// The registers of tile `v` in `layout`.
    fn get(&mut self, v: Value, layout: &Layout) -> R<Vec<E::V>> {
        let ty = self.ty(v);
        if ty.is_scalar() {
            return Ok(vec![self.scalar(v)]);
        }
        if let Some((home, regs)) = self.data.get(&v) {
            if home == layout {
                return Ok(regs.clone());
            }
        }
        if let Some(m) = self.memo.get(&(v, layout.clone())) {
            return Ok(m.regs.clone());
        }
        let regs = if let Some((home, regs)) = self.data.get(&v).cloned() {
            self.convert(&ty.shape, ty.dtype, &home, &regs, layout)?
        } else {
            self.materialize(v, layout)?
        };
        self.memo.insert((v, layout.clone()), MemoEntry { depth: self.depth, regs: regs.clone() });
        Ok(regs)
    }

    /// Registers of `v` in its home if it is data, else in the default layout for its shape.
    fn get_natural(&mut self, v: Value) -> R<(Layout, Vec<E::V>)> {
        if let Some((home, regs)) = self.data.get(&v) {
            return Ok((home.clone(), regs.clone()));
        }
        let l = self.default_layout(&self.ty(v).shape);
        let regs = self.get(v, &l)?;
        Ok((l, regs))
    }

    /// The layout an op over `operands` computes in: the home of its first data operand, else
    /// the default for `shape`.
    fn pick_layout(&self, operands: &[Value], shape: &[usize]) -> Layout {
        operands.iter().find_map(|v| self.data.get(v).map(|(l, _)| l.clone())).unwrap_or_else(|| self.default_layout(shape))
    }

    /// Emits a recipe value in `layout`.
    fn materialize(&mut self, v: Value, layout: &Layout) -> R<Vec<E::V>> {
        let inst = self.def(v);
        let ty = self.ty(v);
        if let Layout::Coop(coop) = layout {
            // A splat fills each matrix; anything else is computed in the exchange map.
            if let Op::Splat { x } = &inst.op {
                let s = self.scalar(*x);
                let s = self.cast(ty.dtype, DType::F32, s);
                let n = coop.repeats(&ty.shape).iter().product();
                let instr = Self::coop_acc_instr(*coop);
                let fill = self.e.coop_fill(instr, s).ok_or_else(|| LowerError::Unsupported {
                    op: "dot".into(),
                    loc: inst.loc.clone(),
                    what: "no cooperative matrices in the backend".into(),
                })?;
                return Ok(vec![fill; n]);
            }
            let ex = self.coop_exchange(*coop)?;
            let regs = self.get(v, &Layout::Mma(ex))?;
            return self.coop_from_exchange(*coop, ex, &ty.shape, &regs);
        }
        let dist = self.dist(layout, &ty.shape);
        match &inst.op {
            Op::Arange { start, .. } => {
                let c = self.coords(&dist);
                let s = self.c_i32(*start);
                Ok(c.coords.iter().map(|cs| self.e.binary(BinaryOp::Add, DType::I32, cs[0], s)).collect())
            }
            Op::Splat { x } => {
                let s = self.scalar(*x);
                Ok(vec![s; dist.num_regs()])
            }
            Op::Broadcast { x } => {
                let xin = self.get(*x, layout)?;
                let din = self.dist(layout, &self.ty(*x).shape);
                self.remap(&dist, &din, &xin, |r| r.to_vec())
            }
            Op::ExpandDims { x, axis } => {
                let sl = Layout::Slice { dim: *axis, parent: Box::new(layout.clone()) };
                let xin = self.get(*x, &sl)?;
                let din = self.dist(&sl, &self.ty(*x).shape);
                let a = *axis as usize;
                self.remap(&dist, &din, &xin, |r| {
                    let mut r = r.to_vec();
                    r.remove(a);
                    r
                })
            }
            Op::Trans { x, perm } => {
                let mut inv = vec![0u32; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    inv[p as usize] = i as u32;
                }
                match layout.permuted(&inv) {
                    Some(xl) => {
                        let xin = self.get(*x, &xl)?;
                        let din = self.dist(&xl, &self.ty(*x).shape);
                        let perm = perm.clone();
                        self.remap(&dist, &din, &xin, |r| {
                            let mut o = vec![0u32; r.len()];
                            for (i, &p) in perm.iter().enumerate() {
                                o[p as usize] = r[i];
                            }
                            o
                        })
                    }
                    None => {
                        // A slice layout has no permuted form: exchange through shared memory.
                        let (xl, xregs) = self.get_natural(*x)?;
                        let xshape = self.ty(*x).shape.clone();
                        let perm = perm.clone();
                        let xs = xshape.clone();
                        self.exchange(ty.dtype, &xshape, &xl, &xregs, &ty.shape, layout, move |me, c| {
                            let mut o = vec![c[0]; c.len()];
                            for (i, &p) in perm.iter().enumerate() {
                                o[p as usize] = c[i];
                            }
                            me.linear(&o, &xs)
                        })
                    }
                }
            }
            Op::Unary { .. } | Op::Binary { .. } | Op::Cmp { .. } | Op::Select { .. } | Op::Fma { .. } | Op::Cast { .. } => {
                let ops = inst.op.operands();
                let mut regs_in = Vec::with_capacity(ops.len());
                for &o in &ops {
                    regs_in.push(self.get(o, layout)?);
                }
                let n = dist.num_regs();
                let mut out = Vec::with_capacity(n);
                for r in 0..n {
                    let args: Vec<E::V> = regs_in.iter().map(|rs| rs[r]).collect();
                    out.push(self.scalar_op(inst, &args));
                }
                Ok(out)
            }
            _ => unreachable!("only recipe ops are materialized lazily"),
        }
    }

    /// Picks, for every register of `out`, the register of `input` with the same static offsets
    /// (after `key_of` maps output offsets to input offsets).
    fn remap(&mut self, out: &Dist, input: &Dist, regs: &[E::V], key_of: impl Fn(&[u32]) -> Vec<u32>) -> R<Vec<E::V>> {
        let idx = input.index();
        out.regs
            .iter()
            .map(|r| {
                let k = input.key(&key_of(r));
                idx.get(&k).map(|&i| regs[i]).ok_or_else(|| LowerError::Unsupported {
                    op: "layout".into(),
                    loc: Loc::default(),
                    what: format!("register {r:?} has no source in {:?}", input.shape),
                })
            })
            .collect()
    }

    /// Moves a tile from one layout to another: within each thread where both layouts give
    /// every thread the same elements (an `mma` accumulator and the `a` operand of a dot with
    /// the same warps, as attention's probabilities feed its second dot), else through shared
    /// memory.
    fn convert(&mut self, shape: &[usize], dtype: DType, from: &Layout, regs: &[E::V], to: &Layout) -> R<Vec<E::V>> {
        // Cooperative matrices move through their exchange map.
        if let Layout::Coop(coop) = from {
            let ex = self.coop_exchange(*coop)?;
            let regs = self.coop_to_exchange(*coop, ex, shape, regs)?;
            let exl = Layout::Mma(ex);
            return if *to == exl { Ok(regs) } else { self.convert(shape, dtype, &exl, &regs, to) };
        }
        if let Layout::Coop(coop) = to {
            let ex = self.coop_exchange(*coop)?;
            let exl = Layout::Mma(ex);
            let regs = if *from == exl { regs.to_vec() } else { self.convert(shape, dtype, from, regs, &exl)? };
            return self.coop_from_exchange(*coop, ex, shape, &regs);
        }
        let (fd, td) = (self.dist(from, shape), self.dist(to, shape));
        if same_threads(&fd, &td) {
            return self.remap(&td, &fd, regs, |r| r.to_vec());
        }
        if let Some(out) = self.exchange_vec(dtype, shape, from, regs, to, false)? {
            return Ok(out);
        }
        let shape_owned = shape.to_vec();
        self.exchange(dtype, shape, from, regs, shape, to, move |me, c| me.linear(c, &shape_owned))
    }

    /// Whether layout conversions move shared memory in vectors ([`Lowerer::exchange_vec`]):
    /// on the backends built on LLVM (PTX and AMDGCN), whose vector accesses are single
    /// instructions, and in the emulator when it runs their targets. SPIR-V modules keep their
    /// element-wise exchanges.
    fn vector_exchanges(&self) -> bool {
        self.target.isa != Isa::SpirV
    }

    /// Shared-memory elements (of the register dtype) [`Lowerer::exchange_vec`] takes for a
    /// `shape` tile of `dtype` moved as `bits` or not: the tile with its rows padded by 16 bytes
    /// where a row is a multiple of 128 bytes, so that the rows a warp's vectors touch start in
    /// different banks.
    fn exchange_vec_len(shape: &[usize], dtype: DType) -> (usize, usize) {
        let bytes = dtype.size_bytes().max(1);
        let row = shape.last().copied().unwrap_or(1);
        let pad = if shape.len() >= 2 && (row * bytes) % 128 == 0 { 16 / bytes } else { 0 };
        let rows: usize = shape[..shape.len().saturating_sub(1)].iter().product();
        (rows * (row + pad), pad)
    }

    /// [`Lowerer::exchange`] of a conversion within one shape, in vectors: each thread writes
    /// its runs of consecutive elements of `from` and reads its runs of `to` with one access per
    /// run ([`vector_runs`]), through rows padded as [`Lowerer::exchange_vec_len`] says. With
    /// `bits`, a bf16 tile crosses as its 16-bit values instead of f32 registers (exact: a bf16
    /// value's register holds a bf16 number; for a store, which rounds to those bits anyway).
    /// `None` where the backend has no vector accesses to shared memory, or neither layout has
    /// runs of two: the element-wise exchange then does it.
    fn exchange_vec(&mut self, dtype: DType, shape: &[usize], from: &Layout, regs: &[E::V], to: &Layout, bits: bool) -> R<Option<Vec<E::V>>> {
        let bits = bits && dtype == DType::BF16;
        let sd = if bits { DType::BF16 } else { reg_dtype(dtype) };
        if !self.vector_exchanges() || shape.is_empty() || sd.size_bytes() < 2 {
            return Ok(None);
        }
        let max = 16 / sd.size_bytes();
        let (sdist, ddist) = (self.dist(from, shape), self.dist(to, shape));
        let (sperm, ws) = vector_runs(&sdist, max);
        let (dperm, wd) = vector_runs(&ddist, max);
        let floor = self.floors.get(&sd).copied().unwrap_or(0) as usize;
        if ws.max(wd) < 2 || floor % ws.max(wd) != 0 {
            return Ok(None);
        }
        let (len, pad) = Self::exchange_vec_len(shape, sd);
        self.conversions += 1;
        self.reserve(sd, len);
        self.e.barrier();
        let sdist = permute_dist(sdist, &Some(sperm.clone()));
        let starts: Vec<usize> = (0..sperm.len()).step_by(ws).collect();
        let sc = self.coords_of(&sdist, &starts);
        for (&start, at) in starts.iter().zip(&sc.coords) {
            let idx = self.padded_index(at, shape, pad);
            let vals: Vec<E::V> = sperm[start..start + ws].iter().map(|&r| if bits { self.narrow_bf16(regs[r]) } else { regs[r] }).collect();
            let idx = self.floored(sd, idx);
            self.e.store_shared_vec(sd, idx, &vals);
        }
        self.e.barrier();
        let ddist = permute_dist(ddist, &Some(dperm.clone()));
        let starts: Vec<usize> = (0..dperm.len()).step_by(wd).collect();
        let dc = self.coords_of(&ddist, &starts);
        let mut out: Vec<Option<E::V>> = vec![None; dperm.len()];
        for (&start, at) in starts.iter().zip(&dc.coords) {
            let idx = self.padded_index(at, shape, pad);
            let idx = self.floored(sd, idx);
            let vals = self.e.load_shared_vec(sd, idx, wd as u32);
            for (j, v) in vals.into_iter().enumerate() {
                out[dperm[start + j]] = Some(if bits { self.widen_bf16(v) } else { v });
            }
        }
        Ok(Some(out.into_iter().map(|v| v.expect("every register of `to` is read")).collect()))
    }

    /// The row-major index of `coords` in a `shape` tile whose rows (along the last dimension)
    /// are `pad` elements longer.
    fn padded_index(&mut self, coords: &[E::V], shape: &[usize], pad: usize) -> E::V {
        let Some((&c_last, outer)) = coords.split_last() else { return self.c_i32(0) };
        if outer.is_empty() {
            return c_last;
        }
        let row = self.linear(outer, &shape[..outer.len()]);
        let stride = self.c_i32((shape[outer.len()] + pad) as i64);
        let at = self.e.binary(BinaryOp::Mul, DType::I32, row, stride);
        self.e.binary(BinaryOp::Add, DType::I32, at, c_last)
    }

    /// Whether converting a `shape` tile from `from` to `to` is a renaming of each thread's
    /// registers: the same thread-dependent terms and wrapping along every dimension, and every
    /// register `to` needs at static offsets `from` has.
    fn moves_no_data(&self, from: &Layout, to: &Layout, shape: &[usize]) -> bool {
        same_threads(&self.dist(from, shape), &self.dist(to, shape))
    }

    /// Writes `regs` (layout `from` over `src_shape`) to shared memory, row-major, and reads back
    /// `to` over `dst_shape`, where destination coordinates `c` read the element at linear index
    /// `src_index(c)`.
    #[allow(clippy::too_many_arguments)]
    fn exchange(
        &mut self,
        dtype: DType,
        src_shape: &[usize],
        from: &Layout,
        regs: &[E::V],
        dst_shape: &[usize],
        to: &Layout,
        src_index: impl Fn(&mut Self, &[E::V]) -> E::V,
    ) -> R<Vec<E::V>> {
        self.conversions += 1;
        let sd = reg_dtype(dtype);
        let numel: usize = src_shape.iter().product();
        self.reserve(sd, numel);
        self.e.barrier();
        let sdist = self.dist(from, src_shape);
        let sc = self.coords(&sdist);
        for (r, cs) in sc.coords.iter().enumerate() {
            let lin = self.linear(cs, src_shape);
            self.st_sh(sd, lin, regs[r]);
        }
        self.e.barrier();
        let ddist = self.dist(to, dst_shape);
        let dc = self.coords(&ddist);
        let mut out = Vec::with_capacity(ddist.num_regs());
        for cs in &dc.coords {
            let lin = src_index(self, cs);
            out.push(self.ld_sh(sd, lin));
        }
        Ok(out)
    }

    fn def(&self, v: Value) -> &'a Inst {
        // Built once per lowering; programs are small, a linear search per recipe is cheap
        // compared with emitting it.
        fn find(b: &Block, v: Value) -> Option<&Inst> {
            for inst in &b.insts {
                if inst.results.contains(&v) {
                    return Some(inst);
                }
                for nb in inst.op.blocks() {
                    if let Some(i) = find(nb, v) {
                        return Some(i);
                    }
                }
            }
            None
        }
        find(&self.p.body, v).expect("verified: every value used is defined")
    }

    // ----- scalar arithmetic -----

    /// One element of an elementwise op, in register dtypes.
    fn scalar_op(&mut self, inst: &Inst, args: &[E::V]) -> E::V {
        let res_dtype = self.ty(inst.results[0]).dtype;
        match &inst.op {
            Op::Unary { op, x } => {
                let d = self.ty(*x).dtype;
                let transcendental = !op.exact();
                if d == DType::F16 && transcendental {
                    let a = self.e.cast(DType::F16, DType::F32, args[0]);
                    let r = self.e.unary(*op, DType::F32, a);
                    self.e.cast(DType::F32, DType::F16, r)
                } else {
                    let r = self.e.unary(*op, reg_dtype(d), args[0]);
                    self.round(d, r)
                }
            }
            Op::Binary { op, lhs, .. } => {
                let d = self.ty(*lhs).dtype;
                if d == DType::F16 && matches!(op, BinaryOp::Div | BinaryOp::Rem) {
                    // Devices may divide f16 approximately (NVIDIA does); f32 then one rounding
                    // is the interpreter's exact result.
                    let a = self.e.cast(DType::F16, DType::F32, args[0]);
                    let b = self.e.cast(DType::F16, DType::F32, args[1]);
                    let r = self.e.binary(*op, DType::F32, a, b);
                    return self.e.cast(DType::F32, DType::F16, r);
                }
                let r = self.e.binary(*op, reg_dtype(d), args[0], args[1]);
                self.round(d, r)
            }
            Op::Cmp { pred, lhs, .. } => {
                let d = self.ty(*lhs).dtype;
                self.e.cmp(*pred, reg_dtype(d), args[0], args[1])
            }
            Op::Select { .. } => self.e.select(reg_dtype(res_dtype), args[0], args[1], args[2]),
            Op::Fma { .. } => {
                let r = self.e.fma(reg_dtype(res_dtype), args[0], args[1], args[2]);
                self.round(res_dtype, r)
            }
            Op::Cast { x } => self.cast(self.ty(*x).dtype, res_dtype, args[0]),
            _ => unreachable!("not elementwise"),
        }
    }

    /// Rounds an f32 register holding a bf16 value.
    fn round(&mut self, d: DType, r: E::V) -> E::V {
        if d == DType::BF16 {
            let b = self.narrow_bf16(r);
            self.widen_bf16(b)
        } else {
            r
        }
    }

    /// bf16 bits as the f32 register that holds them, remembered for [`Lowerer::narrow_bf16`].
    fn widen_bf16(&mut self, bits: E::V) -> E::V {
        let w = self.e.cast(DType::BF16, DType::F32, bits);
        self.bf16_bits.insert(w, bits);
        w
    }

    /// An f32 register rounded to bf16 bits: the bits it was widened from, when it was.
    fn narrow_bf16(&mut self, r: E::V) -> E::V {
        match self.bf16_bits.get(&r) {
            Some(&b) => b,
            None => self.e.cast(DType::F32, DType::BF16, r),
        }
    }

    /// A cast between dtypes, in register dtypes.
    fn cast(&mut self, from: DType, to: DType, x: E::V) -> E::V {
        if from == to {
            return x;
        }
        match (from == DType::BF16, to == DType::BF16) {
            (true, _) => {
                // Held as f32: cast from f32 (exactly the bf16 value).
                if to == DType::F32 {
                    x
                } else {
                    self.e.cast(DType::F32, to, x)
                }
            }
            (false, true) if from.is_float() => {
                let f = if from == DType::F32 { x } else { self.e.cast(from, DType::F32, x) };
                self.round(DType::BF16, f)
            }
            (false, true) => {
                // Integers straight to bf16 (one rounding; through f32 they would round twice
                // above 2^24), then held as f32.
                let b = self.e.cast(from, DType::BF16, x);
                self.widen_bf16(b)
            }
            _ => self.e.cast(from, to, x),
        }
    }

    fn load_elem(&mut self, buffer: u32, dtype: DType, index: E::V, index_dtype: DType) -> E::V {
        let v = self.e.load_global(buffer, dtype, index, index_dtype);
        if dtype == DType::BF16 {
            self.widen_bf16(v)
        } else {
            v
        }
    }

    fn store_elem(&mut self, buffer: u32, dtype: DType, index: E::V, index_dtype: DType, value: E::V) {
        let v = if dtype == DType::BF16 { self.narrow_bf16(value) } else { value };
        self.e.store_global(buffer, dtype, index, index_dtype, v);
    }

    // ----- blocks -----

    fn block(&mut self, b: &'a Block) -> R<Vec<&'a Inst>> {
        for inst in &b.insts {
            if let Op::Yield { .. } = inst.op {
                return Ok(vec![inst]);
            }
            self.inst(inst)?;
        }
        Ok(vec![])
    }

    fn yielded(&self, b: &'a Block) -> Vec<Value> {
        match b.insts.last() {
            Some(Inst { op: Op::Yield { values }, .. }) => values.clone(),
            _ => vec![],
        }
    }

    /// Flattened registers of `values` in `layouts` (scalars: one register).
    fn flatten(&mut self, values: &[Value], layouts: &[Layout]) -> R<Vec<E::V>> {
        let mut out = Vec::new();
        for (v, l) in values.iter().zip(layouts) {
            out.extend(self.get(*v, l)?);
        }
        Ok(out)
    }

    /// Register dtypes of `values` in `layouts`, flattened.
    fn flat_dtypes(&self, types: &[&Type], layouts: &[Layout]) -> Vec<DType> {
        let mut out = Vec::new();
        for (t, l) in types.iter().zip(layouts) {
            let n = if t.is_scalar() { 1 } else { self.dist(l, &t.shape).num_regs() };
            out.extend(std::iter::repeat(reg_dtype(t.dtype)).take(n));
        }
        out
    }

    /// Binds results/args from flattened registers.
    fn bind(&mut self, values: &[Value], layouts: &[Layout], regs: &[E::V]) {
        let mut i = 0;
        for (v, l) in values.iter().zip(layouts) {
            let t = self.ty(*v);
            if t.is_scalar() {
                self.scalars.insert(*v, regs[i]);
                i += 1;
            } else {
                let n = self.dist(l, &t.shape).num_regs();
                self.set_data(*v, l.clone(), regs[i..i + n].to_vec());
                i += n;
            }
        }
    }

    /// The layout a carried or yielded value keeps: its home if data, else the default.
    fn carried_layout(&self, v: Value) -> Layout {
        let t = self.ty(v);
        if t.is_scalar() {
            return Layout::Uniform;
        }
        self.data.get(&v).map(|(l, _)| l.clone()).unwrap_or_else(|| self.default_layout(&t.shape))
    }

    fn inst(&mut self, inst: &'a Inst) -> R<()> {
        let res = inst.results.first().copied();
        for &r in &inst.results {
            let t = self.ty(r);
            if !t.is_scalar() {
                let l = self.default_layout(&t.shape);
                self.check_regs(inst, t, &l)?;
            }
        }
        let rank0 = res.is_some_and(|r| self.ty(r).is_scalar());
        match &inst.op {
            Op::Arg { param } => {
                let d = self.ty(inst.results[0]).dtype;
                let v = self.e.scalar_param(*param, d);
                let v = if d == DType::BF16 { self.widen_bf16(v) } else { v };
                self.scalars.insert(inst.results[0], v);
            }
            Op::ProgramId { axis } => {
                let v = self.e.program_id(*axis);
                self.scalars.insert(inst.results[0], v);
            }
            Op::NumPrograms { axis } => {
                let v = self.e.num_programs(*axis);
                self.scalars.insert(inst.results[0], v);
            }
            Op::Const { value } => {
                let d = self.ty(inst.results[0]).dtype;
                let v = if d == DType::BF16 {
                    // The constant's bf16 value, held as f32.
                    let r = crate::dtype::bf16_from_f64(value.as_f64()).to_f64();
                    self.e.constant(DType::F32, Scalar::Float(r))
                } else {
                    self.e.constant(d, *value)
                };
                self.scalars.insert(inst.results[0], v);
            }
            Op::Unary { .. } | Op::Binary { .. } | Op::Cmp { .. } | Op::Select { .. } | Op::Fma { .. } | Op::Cast { .. } if rank0 => {
                let args: Vec<E::V> = inst.op.operands().iter().map(|&o| self.scalar(o)).collect();
                let v = self.scalar_op(inst, &args);
                self.scalars.insert(inst.results[0], v);
            }
            Op::Unary { .. } | Op::Binary { .. } | Op::Cmp { .. } | Op::Select { .. } | Op::Fma { .. } | Op::Cast { .. } => {
                let ops = inst.op.operands();
                if ops.iter().any(|o| self.is_data(*o)) {
                    // Data: computed once, in the home of its first data operand.
                    let r = inst.results[0];
                    let layout = self.pick_layout(&ops, &self.ty(r).shape);
                    let regs = self.materialize(r, &layout)?;
                    self.set_data(r, layout, regs);
                }
                // Otherwise a recipe: emitted where it is used.
            }
            Op::Arange { .. } | Op::Splat { .. } | Op::Broadcast { .. } | Op::ExpandDims { .. } | Op::Trans { .. } => {}
            Op::Reshape { x } => {
                let r = inst.results[0];
                let (xl, xregs) = self.get_natural(*x)?;
                let t = self.ty(r).clone();
                let xshape = self.ty(*x).shape.clone();
                let out_layout = self.default_layout(&t.shape);
                // Row-major reshape: the linear index is preserved ([1, 1] -> [] reads element 0).
                let (to, dst_shape) = if t.is_scalar() { (Layout::Uniform, vec![]) } else { (out_layout.clone(), t.shape.clone()) };
                let ds = dst_shape.clone();
                let regs = self.exchange(t.dtype, &xshape, &xl, &xregs, &dst_shape, &to, move |me, c| me.linear(c, &ds))?;
                if t.is_scalar() {
                    self.scalars.insert(r, regs[0]);
                } else {
                    self.set_data(r, out_layout, regs);
                }
            }
            // A pipelined load's tile is already on its way to the ring its `dot` reads.
            Op::Load { .. } if self.rings.contains_key(&inst.results[0]) => {}
            // A prefetched load's tile came with the loop's carried registers.
            Op::Load { .. } if self.prefetch.values().flatten().any(|f| f.load == inst.results[0]) && self.is_data(inst.results[0]) => {}
            Op::Load { buffer, offsets, mask, other } => self.load(inst, *buffer, *offsets, *mask, *other)?,
            Op::Store { buffer, offsets, value, mask } => self.store(inst, *buffer, *offsets, *value, *mask)?,
            Op::Atomic { op, buffer, offsets, value, mask } => self.atomic(inst, Some(*op), *buffer, *offsets, None, *value, *mask)?,
            Op::AtomicCas { buffer, offsets, cmp, value, mask } => self.atomic(inst, None, *buffer, *offsets, Some(*cmp), *value, *mask)?,
            Op::Reduce { x, axis, combine } => self.reduce(inst, *x, *axis as usize, combine)?,
            Op::ReduceTuple { xs, axis, combine } => self.reduce_tuple(inst, xs, *axis as usize, combine)?,
            Op::Scan { x, axis, combine, reverse } => self.scan(inst, *x, *axis as usize, combine, *reverse)?,
            Op::Dot { a, b, acc, precision } => self.dot(inst, *a, *b, *acc, *precision)?,
            Op::For { lower, upper, step, init, body } => {
                let iv_dtype = self.ty(*lower).dtype;
                let (lo, hi, st) = (self.scalar(*lower), self.scalar(*upper), self.scalar(*step));
                let layouts: Vec<Layout> =
                    init.iter().zip(&body.args[1..]).map(|(&v, a)| self.carried.get(a).cloned().unwrap_or_else(|| self.carried_layout(v))).collect();
                let init_regs = self.flatten(init, &layouts)?;
                // Operands of the body's matrix dots defined out here move into their fragment
                // layouts once, not once per iteration.
                self.hoist_operands(body)?;
                let types: Vec<&Type> = init.iter().map(|&v| self.ty(v)).collect();
                let dtypes = self.flat_dtypes(&types, &layouts);
                let mut carried: Vec<(DType, E::V)> = dtypes.iter().copied().zip(init_regs).collect();
                let nflat = carried.len();
                // Loads issued an iteration ahead: the first iteration's tiles, where there is one.
                let prefetch = self.prefetch.get(&body.args[0]).cloned();
                let pre = match &prefetch {
                    Some(loads) => {
                        let go = self.e.cmp(CmpPred::Lt, iv_dtype, lo, hi);
                        let tiles = self.prefetch_tiles(loads, body, lo, Some(go))?;
                        for (l, (_, regs)) in loads.iter().zip(&tiles) {
                            let d = reg_dtype(self.ty(l.load).dtype);
                            carried.extend(regs.iter().map(|&r| (d, r)));
                        }
                        Some(tiles)
                    }
                    None => None,
                };
                let pipe = self.pipelines.get(&body.args[0]).cloned();
                // A pipelined loop also carries the ring slots it reads and writes.
                let ring = match &pipe {
                    Some(pipe) => {
                        let (bases, floors) = self.pipe_prologue(pipe, body, iv_dtype, lo, hi, st)?;
                        let (read, write) = (self.c_i32(0), self.c_i32((self.num_stages - 1 - pipe.lag()) as i64));
                        carried.push((DType::I32, read));
                        carried.push((DType::I32, write));
                        if pipe.tensor.is_some() {
                            // The phase parity the slot read next waits for.
                            let zero = self.c_i32(0);
                            carried.push((DType::I32, zero));
                        }
                        Some((bases, floors))
                    }
                    None => None,
                };
                // The copies' addresses, carried from one iteration to the next where they step
                // (tensor copies take none).
                let addresses = match &pipe {
                    Some(pipe) if pipe.tensor.is_none() => self.pipe_addresses(pipe, body, iv_dtype, lo, st)?,
                    _ => None,
                };
                let addresses_at = carried.len();
                if let Some(a) = &addresses {
                    carried.extend(a.at.iter().map(|&x| (DType::I64, x)));
                }
                // A loop whose one dot is on cooperative matrices with prefetched operands and
                // at least three stages (the registers the next tiles arrive in, then two
                // staging buffers; with two stages the registers and one buffer) carries the
                // parity its staging buffers alternate by (the dot decides whether two fit),
                // and opens with a barrier: the dot's first staging waits for none after
                // whatever used shared memory before the loop. Two stages stay one buffer: the
                // second buffer is not always faster through NVIDIA's driver
                // (bench/results/h100-2026-12-06c), so a configuration chooses by its depth.
                // An enclosing loop's parity stays its own.
                let outer = self.stage_parity.take();
                let parity_at = if prefetch.is_some() && self.num_stages >= 3 && pipe.is_none() && single_coop_dot(body, &self.coop) {
                    self.e.barrier();
                    let zero = self.c_i32(0);
                    carried.push((DType::I32, zero));
                    Some(carried.len() - 1)
                } else {
                    None
                };
                let (iv, args) = self.e.begin_loop(iv_dtype, lo, hi, st, &carried);
                self.push_scope();
                self.scalars.insert(body.args[0], iv);
                self.bind(&body.args[1..], &layouts, &args[..nflat]);
                let slots = match (&pipe, &ring) {
                    (Some(pipe), Some((bases, _))) => {
                        let current = addresses
                            .as_ref()
                            .map(|a| CopyAddresses { at: args[addresses_at..addresses_at + a.at.len()].to_vec(), steps: a.steps.clone() });
                        let phase = pipe.tensor.as_ref().map(|_| args[nflat + 2]);
                        Some(self.pipe_step(pipe, body, bases, iv_dtype, iv, hi, st, args[nflat], args[nflat + 1], current.as_ref(), phase)?)
                    }
                    _ => None,
                };
                let mut next_tiles = Vec::new();
                if let (Some(loads), Some(pre)) = (&prefetch, &pre) {
                    let mut k = nflat;
                    for (l, (layout, regs)) in loads.iter().zip(pre) {
                        self.set_data(l.load, layout.clone(), args[k..k + regs.len()].to_vec());
                        k += regs.len();
                    }
                    // The next iteration's tiles, before this one's matrix work (past the end,
                    // this iteration's again: in bounds, and never read).
                    let later = self.e.binary(BinaryOp::Add, iv_dtype, iv, st);
                    let below = self.e.cmp(CmpPred::Lt, iv_dtype, later, hi);
                    let forward = self.e.cmp(CmpPred::Gt, iv_dtype, later, iv);
                    let in_range = self.e.binary(BinaryOp::And, DType::I1, below, forward);
                    let it = self.e.select(iv_dtype, in_range, later, iv);
                    let tiles = self.prefetch_tiles(loads, body, it, None)?;
                    for ((l, (layout, regs)), (home, _)) in loads.iter().zip(tiles).zip(pre) {
                        let t = self.ty(l.load).clone();
                        let regs = if layout == *home { regs } else { self.convert(&t.shape, t.dtype, &layout, &regs, home)? };
                        next_tiles.extend(regs);
                    }
                }
                self.stage_parity = parity_at.map(|i| args[i]);
                self.block(body)?;
                let ys = self.yielded(body);
                let mut next = self.flatten(&ys, &layouts)?;
                next.extend(next_tiles);
                self.stage_parity = outer;
                if let Some(i) = parity_at {
                    let one = self.c_i32(1);
                    next.push(self.e.binary(BinaryOp::Xor, DType::I32, args[i], one));
                }
                if let Some(slots) = slots {
                    next.push(slots.read);
                    next.push(slots.write);
                    next.extend(slots.phase);
                    next.extend(slots.addresses);
                }
                if let Some(pipe) = &pipe {
                    for l in &pipe.loads {
                        self.rings.remove(&l.result);
                    }
                }
                self.pop_scope();
                let results = self.e.end_loop(&next);
                if let Some((bases, floors)) = ring {
                    match pipe.as_ref().filter(|p| p.tensor.is_some()) {
                        Some(pipe) => {
                            // Every copy issued was waited for (none is issued past the end):
                            // once every thread is past its last wait, the barriers end, so
                            // that their memory may be used again (or initialized again by
                            // the next run of this loop).
                            self.e.barrier();
                            let first = self.first_thread();
                            let base = bases[pipe.loads.len()] as i64;
                            self.only_if(Some(first), |me| {
                                for j in 0..me.num_stages as i64 {
                                    let b = me.c_i32(base + j);
                                    me.e.mbarrier_invalidate(b);
                                }
                            });
                            self.e.barrier();
                        }
                        None => {
                            // The last iterations' copies (of tiles past the end, all masked
                            // off) land before anything else uses that memory.
                            self.e.async_wait(0);
                            self.e.barrier();
                        }
                    }
                    self.floors = floors;
                }
                self.bind(&inst.results, &layouts, &results[..nflat]);
                // Accumulators kept in cooperative matrices leave them with the loop.
                for (&v, l) in inst.results.iter().zip(&layouts) {
                    if let Layout::Coop(coop) = l {
                        let ex = self.coop_exchange(*coop)?;
                        let shape = self.ty(v).shape.clone();
                        let mats = self.data.get(&v).map(|(_, regs)| regs.clone()).unwrap_or_default();
                        let regs = self.coop_to_exchange(*coop, ex, &shape, &mats)?;
                        self.set_data(v, Layout::Mma(ex), regs);
                    }
                }
                if let Some(pipe) = pipe.filter(|p| !p.deferred.is_empty()) {
                    self.wait_deferred(&pipe, body, inst)?;
                }
            }
            Op::If { cond, then_block, else_block } => {
                let c = self.scalar(*cond);
                let layouts: Vec<Layout> = inst
                    .results
                    .iter()
                    .map(|&r| {
                        let t = self.ty(r);
                        if t.is_scalar() {
                            Layout::Uniform
                        } else {
                            self.default_layout(&t.shape)
                        }
                    })
                    .collect();
                let types: Vec<&Type> = inst.results.iter().map(|&r| self.ty(r)).collect();
                let dtypes = self.flat_dtypes(&types, &layouts);
                self.e.begin_if(c, &dtypes);
                self.push_scope();
                self.block(then_block)?;
                let tv = self.yielded(then_block);
                let then_regs = self.flatten(&tv, &layouts)?;
                self.pop_scope();
                self.e.begin_else(&then_regs);
                self.push_scope();
                self.block(else_block)?;
                let ev = self.yielded(else_block);
                let else_regs = self.flatten(&ev, &layouts)?;
                self.pop_scope();
                let results = self.e.end_if(&else_regs);
                self.bind(&inst.results, &layouts, &results);
            }
            Op::Yield { .. } => {}
            // Asserts are evaluated only by checked launches, which replace them before lowering
            // (crate::instrument); an unchecked program runs exactly as without them.
            Op::DeviceAssert { .. } => {}
        }
        Ok(())
    }

    // ----- memory -----

    /// The layout a load or store over `offsets` uses: the home of data offsets, else a blocked
    /// layout giving each thread as many consecutive elements as one vector access moves and the
    /// offsets allow (contiguity and alignment from the offset analysis).
    fn access_layout(&self, offsets: Value, also: Option<Value>, dtype: DType) -> Layout {
        let shape = &self.ty(offsets).shape;
        if let Some(v) = also {
            if let Some((l, _)) = self.data.get(&v) {
                return l.clone();
            }
        }
        if let Some((l, _)) = self.data.get(&offsets) {
            return l.clone();
        }
        // No wider than the default layout: values loaded here mostly meet values in the default
        // layout (accumulators, constants), and a wider load would cost a conversion through
        // shared memory at every use. As wide, where the offsets run that far, even past one
        // vector: a bf16 tile computed into an i8 one that is stored then holds 16 consecutive
        // elements per thread, two 16-byte loads and one 16-byte store, where runs of one bf16
        // vector would leave the i8 store 8 bytes wide.
        let w = self.vector_width(offsets, dtype);
        let v = if w > 1 { w.max(self.run_width(offsets)) } else { 1 }.min(self.default_vector());
        Layout::Blocked(Blocked::for_shape(shape, v, self.warp, self.num_warps))
    }

    /// Consecutive elements along the last dimension that start at a multiple of their number
    /// at `offsets` (a power of two), whatever one access moves.
    fn run_width(&self, offsets: Value) -> u32 {
        let shape = &self.ty(offsets).shape;
        let (Some(last), Some(ai)) = (shape.len().checked_sub(1), self.axis[offsets.index()].as_ref()) else {
            return 1;
        };
        let w = ai.contiguity[last].min(ai.divisibility[last]).min(shape[last] as u64).min(1 << 16);
        1u32 << (63 - w.max(1).leading_zeros())
    }

    /// Consecutive elements along the last dimension that one access may move at `offsets`.
    fn vector_width(&self, offsets: Value, dtype: DType) -> u32 {
        match self.ty(offsets).shape.len().checked_sub(1) {
            Some(last) => self.vector_width_along(offsets, dtype, last),
            None => 1,
        }
    }

    /// [`Self::vector_width`] along dimension `d`.
    fn vector_width_along(&self, offsets: Value, dtype: DType, d: usize) -> u32 {
        let shape = &self.ty(offsets).shape;
        let Some(ai) = self.axis[offsets.index()].as_ref() else {
            return 1;
        };
        let max = self.e.max_vector(dtype).min(16 / dtype.size_bytes().max(1) as u32).max(1) as u64;
        let w = max.min(ai.contiguity[d]).min(ai.divisibility[d]).min(shape[d] as u64);
        // A power of two (contiguity and divisibility need not be).
        1u32 << (63 - w.max(1).leading_zeros())
    }

    /// Groups of `width` registers of `dist` that hold consecutive elements along the last
    /// dimension, as (first register, count); registers outside such groups come alone.
    fn vector_groups(dist: &Dist, width: u32) -> Vec<(usize, usize)> {
        Self::vector_groups_along(dist, width, dist.shape.len().saturating_sub(1))
    }

    /// [`Self::vector_groups`] along dimension `last` (any dimension: the registers of a group
    /// are consecutive and differ only along it).
    fn vector_groups_along(dist: &Dist, width: u32, last: usize) -> Vec<(usize, usize)> {
        let n = dist.num_regs();
        let w = width as usize;
        let mut out = Vec::with_capacity(n);
        let mut i = 0;
        while i < n {
            let ok = w > 1
                && i + w <= n
                && dist.regs[i][last] % width == 0
                && !dist.wrap.get(last).copied().unwrap_or(false)
                && (1..w).all(|j| {
                    let (a, b) = (&dist.regs[i], &dist.regs[i + j]);
                    b[last] == a[last] + j as u32 && (0..a.len()).all(|d| d == last || a[d] == b[d])
                });
            if ok {
                out.push((i, w));
                i += w;
            } else {
                out.push((i, 1));
                i += 1;
            }
        }
        out
    }

    /// For a store of `trans(x)` where `x` is data: the permuted home of `x`, when that layout
    /// gives the store vectors as wide as its offsets allow, so the transpose moves no data
    /// ([`plan_transposes`] chose such a home for the loads of `x`). `None` otherwise: the store
    /// takes its usual layout and the transpose goes through shared memory.
    fn transposed_home(&self, offsets: Value, value: Value, dtype: DType) -> Option<Layout> {
        if self.is_data(value) {
            return None;
        }
        let Op::Trans { x, perm } = &self.def(value).op else { return None };
        let (home, _) = self.data.get(x)?;
        let layout = home.permuted(perm)?;
        // Half as wide still beats the exchange: a 64 x 64 f16 tile on 128 threads holds 4 x 8
        // blocks, 16-byte loads and 8-byte stores of the transpose.
        let want = self.vector_width(offsets, dtype).min(self.default_vector());
        (want > 1 && 2 * self.layout_vector_width(&layout, offsets, dtype) >= want).then_some(layout)
    }

    /// The layout a store of `value` at `offsets` takes: the value's home, unless that is a
    /// matrix accumulator whose runs per thread are narrow (pairs) where a blocked layout gives
    /// the store vectors at least four times as wide, on a target with warpgroup matrix
    /// instructions whose backend moves shared memory in vectors ([`Lowerer::vector_exchanges`]),
    /// and the program's shared memory has room for the tile: then the value crosses
    /// shared memory first (in 16-byte vectors, converted here so that a bf16 tile crosses as
    /// its 16-bit values), as Triton converts an accumulator before its store. A 128 x 256
    /// accumulator of eight warps is then stored with 16 vectors of 16 bytes per thread
    /// instead of 128 stores of two.
    fn store_layout(&mut self, offsets: Value, value: Value, dtype: DType) -> R<Layout> {
        let home = self.access_layout(offsets, Some(value), dtype);
        let shape = self.ty(offsets).shape.clone();
        // Where dots read their operands from shared memory (warpgroup matrix instructions):
        // with mma.sync the fragments of register operands sit beside the accumulator, and the
        // exchange's addressing pushed attention's largest tiles past the registers (spills on
        // sm_80 and sm_90).
        let room = self.target.matrix.iter().any(|m| m.kind == MatrixKind::Wgmma);
        if !room || !self.vector_exchanges() || !matches!(home, Layout::Mma(_)) || shape.len() != 2 || self.data.contains_key(&offsets) {
            return Ok(home);
        }
        let want = self.vector_width(offsets, dtype).min(self.default_vector());
        let blocked = Layout::Blocked(Blocked::for_shape(&shape, want, self.warp, self.num_warps));
        let wide = self.layout_vector_width(&blocked, offsets, dtype) as usize;
        let (_, run) = vector_runs(&self.dist(&home, &shape), 16 / dtype.size_bytes().max(1));
        let narrow = run.min(self.vector_width(offsets, dtype) as usize).max(1);
        if wide < 4 * narrow {
            return Ok(home);
        }
        let sd = if dtype == DType::BF16 { DType::BF16 } else { reg_dtype(dtype) };
        let (len, _) = Self::exchange_vec_len(&shape, sd);
        let have = self.shared.get(&sd).copied().unwrap_or(0) as u64;
        let growth = (len as u64).saturating_sub(have) * smem_elem_bytes(sd);
        let used: u64 = self.shared.iter().chain(&self.staging).map(|(&d, &n)| n as u64 * smem_elem_bytes(d)).sum();
        if used + growth > self.target.shared_memory_bytes as u64 {
            return Ok(home);
        }
        let Some((home_layout, regs)) = self.data.get(&value).cloned() else { return Ok(home) };
        match self.exchange_vec(dtype, &shape, &home_layout, &regs, &blocked, true)? {
            Some(out) => {
                self.memo.insert((value, blocked.clone()), MemoEntry { depth: self.depth, regs: out });
                Ok(blocked)
            }
            None => Ok(home),
        }
    }

    /// The vector width `layout` gives accesses at `offsets`: its contiguous run per thread along
    /// the last dimension, if the offsets allow a vector that wide.
    fn layout_vector_width(&self, layout: &Layout, offsets: Value, dtype: DType) -> u32 {
        match layout {
            // Whatever the order, a thread holds runs of `spt` along the last dimension; loads
            // and stores visit its registers in row-major order (`row_major_registers`).
            Layout::Blocked(b) => {
                let spt = *b.size_per_thread.last().unwrap_or(&1);
                spt.min(self.vector_width(offsets, dtype))
            }
            _ => 1,
        }
    }

    /// AND of `preds` (None when empty).
    fn all(&mut self, preds: &[E::V]) -> Option<E::V> {
        let mut acc: Option<E::V> = None;
        for &p in preds {
            acc = self.and(acc, Some(p));
        }
        acc
    }

    fn load(&mut self, inst: &'a Inst, buffer: u32, offsets: Value, mask: Option<Value>, other: Option<Value>) -> R<()> {
        let r = inst.results[0];
        let t = self.ty(r);
        let dtype = t.dtype;
        let idx_dtype = self.ty(offsets).dtype;
        if t.is_scalar() {
            let off = self.scalar(offsets);
            let v = match mask {
                None => self.load_elem(buffer, dtype, off, idx_dtype),
                Some(m) => {
                    let mv = self.scalar(m);
                    let v = self.load_masked(buffer, dtype, off, idx_dtype, 1, mv)[0];
                    let o = match other {
                        Some(o) => self.scalar(o),
                        None => self.zero(dtype),
                    };
                    self.e.select(reg_dtype(dtype), mv, v, o)
                }
            };
            self.scalars.insert(r, v);
            return Ok(());
        }
        let layout = match self.preferred.get(&r) {
            Some(l) => l.clone(),
            None => self.access_layout(offsets, None, dtype),
        };
        // Registers in row-major order of their elements (see `row_major_registers`); the
        // loaded values are put back in the layout's order at the end.
        let dist = self.dist(&layout, &t.shape);
        let perm = row_major_registers(&layout, &dist);
        let offs = permute(self.get(offsets, &layout)?, &perm);
        let mregs = match mask {
            Some(m) => Some(permute(self.get(m, &layout)?, &perm)),
            None => None,
        };
        let oregs = match other {
            Some(o) => Some(permute(self.get(o, &layout)?, &perm)),
            None => None,
        };
        let dist = permute_dist(dist, &perm);
        let width = self.layout_vector_width(&layout, offsets, dtype);
        let rd = reg_dtype(dtype);
        let mut out = Vec::with_capacity(offs.len());
        for (first, count) in Self::vector_groups(&dist, width) {
            let range = first..first + count;
            if count > 1 {
                let masks: Vec<E::V> = mregs.as_ref().map(|m| m[range.clone()].to_vec()).unwrap_or_default();
                match self.all(&masks) {
                    None => {
                        let vals = self.load_vec(buffer, dtype, offs[first], idx_dtype, count as u32);
                        out.extend(vals);
                    }
                    Some(_) if self.mask_uniform(mask, count) => {
                        // The mask is the same for the whole vector: load from a safe index and
                        // select, with no branch (a branch around each load would make the
                        // thread wait for it before the next).
                        let m = masks[0];
                        let vals = self.load_masked(buffer, dtype, offs[first], idx_dtype, count as u32, m);
                        for (j, v) in vals.into_iter().enumerate() {
                            let o = match &oregs {
                                Some(o) => o[first + j],
                                None => self.zero(dtype),
                            };
                            out.push(self.e.select(rd, m, v, o));
                        }
                    }
                    Some(all) => {
                        // Whole vector in bounds: one access; a partial one at a tail: per lane.
                        self.e.begin_if(all, &vec![rd; count]);
                        let vals = self.load_vec(buffer, dtype, offs[first], idx_dtype, count as u32);
                        self.e.begin_else(&vals);
                        let mut scalar = Vec::with_capacity(count);
                        for i in range.clone() {
                            scalar.push(self.masked_load_elem(buffer, dtype, offs[i], idx_dtype, masks[i - first], oregs.as_ref().map(|o| o[i])));
                        }
                        out.extend(self.e.end_if(&scalar));
                    }
                }
                continue;
            }
            let i = first;
            let v = match &mregs {
                None => self.load_elem(buffer, dtype, offs[i], idx_dtype),
                Some(m) => self.masked_load_elem(buffer, dtype, offs[i], idx_dtype, m[i], oregs.as_ref().map(|o| o[i])),
            };
            out.push(v);
        }
        self.set_data(r, layout, unpermute(out, &perm));
        Ok(())
    }

    /// Whether `mask` is constant over every aligned run of `count` elements along the last
    /// dimension (from the offset analysis), so one lane's mask stands for a whole vector.
    fn mask_uniform(&self, mask: Option<Value>, count: usize) -> bool {
        let Some(m) = mask else { return true };
        let last = self.ty(m).shape.len().saturating_sub(1);
        self.mask_uniform_along(mask, count, last)
    }

    /// [`Self::mask_uniform`] along dimension `d`.
    fn mask_uniform_along(&self, mask: Option<Value>, count: usize, d: usize) -> bool {
        let Some(m) = mask else { return true };
        let Some(ai) = self.axis[m.index()].as_ref() else {
            return false;
        };
        ai.constancy.get(d).is_some_and(|&c| c % count as u64 == 0)
    }

    /// `mask ? buffer[index] : other`.
    fn masked_load_elem(&mut self, buffer: u32, dtype: DType, index: E::V, idx_dtype: DType, mask: E::V, other: Option<E::V>) -> E::V {
        let v = self.load_masked(buffer, dtype, index, idx_dtype, 1, mask)[0];
        let o = match other {
            Some(o) => o,
            None => self.zero(dtype),
        };
        self.e.select(reg_dtype(dtype), mask, v, o)
    }

    /// `n` elements at `index` where `mask` holds, unspecified values elsewhere (in register
    /// dtypes).
    fn load_masked(&mut self, buffer: u32, dtype: DType, index: E::V, idx_dtype: DType, n: u32, mask: E::V) -> Vec<E::V> {
        let vals = self.e.load_global_masked(buffer, dtype, index, idx_dtype, n, mask);
        if dtype == DType::BF16 {
            vals.into_iter().map(|v| self.widen_bf16(v)).collect()
        } else {
            vals
        }
    }

    fn load_vec(&mut self, buffer: u32, dtype: DType, index: E::V, idx_dtype: DType, n: u32) -> Vec<E::V> {
        let vals = self.e.load_global_vec(buffer, dtype, index, idx_dtype, n);
        if dtype == DType::BF16 {
            vals.into_iter().map(|v| self.widen_bf16(v)).collect()
        } else {
            vals
        }
    }

    fn store_vec(&mut self, buffer: u32, dtype: DType, index: E::V, idx_dtype: DType, values: &[E::V]) {
        let vals: Vec<E::V> = if dtype == DType::BF16 { values.iter().map(|&v| self.narrow_bf16(v)).collect() } else { values.to_vec() };
        self.e.store_global_vec(buffer, dtype, index, idx_dtype, &vals);
    }

    fn zero(&mut self, dtype: DType) -> E::V {
        let d = reg_dtype(dtype);
        let s = if d.is_float() {
            Scalar::Float(0.0)
        } else if d == DType::I1 {
            Scalar::Bool(false)
        } else {
            Scalar::Int(0)
        };
        self.e.constant(d, s)
    }

    /// `pred`s combined with `and`, `None` when there is none.
    fn and(&mut self, a: Option<E::V>, b: Option<E::V>) -> Option<E::V> {
        match (a, b) {
            (Some(x), Some(y)) => Some(self.e.binary(BinaryOp::And, DType::I1, x, y)),
            (x, None) => x,
            (None, y) => y,
        }
    }

    /// For a scalar side effect: only thread 0 performs it.
    fn first_thread(&mut self) -> E::V {
        let zero = self.c_i32(0);
        let tid = self.tid.expect("thread ids are emitted first");
        self.e.cmp(CmpPred::Eq, DType::I32, tid, zero)
    }

    fn store(&mut self, inst: &'a Inst, buffer: u32, offsets: Value, value: Value, mask: Option<Value>) -> R<()> {
        let t = self.ty(offsets);
        let dtype = self.ty(value).dtype;
        let idx_dtype = t.dtype;
        if t.is_scalar() {
            let (off, v) = (self.scalar(offsets), self.scalar(value));
            let first = self.first_thread();
            let m = mask.map(|m| self.scalar(m));
            let pred = self.and(Some(first), m).expect("first is some");
            self.e.begin_if(pred, &[]);
            self.store_elem(buffer, dtype, off, idx_dtype, v);
            self.e.begin_else(&[]);
            self.e.end_if(&[]);
            return Ok(());
        }
        let layout = match self.transposed_home(offsets, value, dtype) {
            Some(l) => l,
            None => self.store_layout(offsets, value, dtype)?,
        };
        let _ = inst;
        let dist = self.dist(&layout, &t.shape);
        let perm = row_major_registers(&layout, &dist);
        let offs = permute(self.get(offsets, &layout)?, &perm);
        let vals = permute(self.get(value, &layout)?, &perm);
        let mregs = match mask {
            Some(m) => Some(permute(self.get(m, &layout)?, &perm)),
            None => None,
        };
        let dist = permute_dist(dist, &perm);
        let replicated = dist.wrap.iter().any(|&w| w) || !dist.replica_terms.is_empty();
        let owners = if replicated { self.coords(&dist).owner } else { vec![None; dist.num_regs()] };
        let width = if replicated { 1 } else { self.layout_vector_width(&layout, offsets, dtype) };
        for (first, count) in Self::vector_groups(&dist, width) {
            if count > 1 {
                let range = first..first + count;
                let masks: Vec<E::V> = mregs.as_ref().map(|m| m[range.clone()].to_vec()).unwrap_or_default();
                match self.all(&masks) {
                    None => self.store_vec(buffer, dtype, offs[first], idx_dtype, &vals[range]),
                    Some(_) if self.mask_uniform(mask, count) => {
                        self.e.begin_if(masks[0], &[]);
                        self.store_vec(buffer, dtype, offs[first], idx_dtype, &vals[range]);
                        self.e.begin_else(&[]);
                        self.e.end_if(&[]);
                    }
                    Some(all) => {
                        self.e.begin_if(all, &[]);
                        self.store_vec(buffer, dtype, offs[first], idx_dtype, &vals[range.clone()]);
                        self.e.begin_else(&[]);
                        for i in range {
                            self.e.begin_if(masks[i - first], &[]);
                            self.store_elem(buffer, dtype, offs[i], idx_dtype, vals[i]);
                            self.e.begin_else(&[]);
                            self.e.end_if(&[]);
                        }
                        self.e.end_if(&[]);
                    }
                }
                continue;
            }
            let i = first;
            let m = mregs.as_ref().map(|m| m[i]);
            match self.and(m, owners[i]) {
                None => self.store_elem(buffer, dtype, offs[i], idx_dtype, vals[i]),
                Some(p) => {
                    self.e.begin_if(p, &[]);
                    self.store_elem(buffer, dtype, offs[i], idx_dtype, vals[i]);
                    self.e.begin_else(&[]);
                    self.e.end_if(&[]);
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic(
        &mut self,
        inst: &'a Inst,
        op: Option<AtomicOp>,
        buffer: u32,
        offsets: Value,
        cmp: Option<Value>,
        value: Value,
        mask: Option<Value>,
    ) -> R<()> {
        let r = inst.results[0];
        let t = self.ty(offsets);
        let dtype = self.ty(value).dtype;
        let idx_dtype = t.dtype;
        if dtype == DType::BF16 || dtype == DType::F16 && op != Some(AtomicOp::Xchg) {
            return Err(LowerError::Unsupported { op: inst.op.name().into(), loc: inst.loc.clone(), what: format!("{} on {dtype}", inst.op.name()) });
        }
        if t.is_scalar() {
            let (off, v) = (self.scalar(offsets), self.scalar(value));
            let c = cmp.map(|c| self.scalar(c));
            let first = self.first_thread();
            let m = mask.map(|m| self.scalar(m));
            let pred = self.and(Some(first), m).expect("first is some");
            let rd = reg_dtype(dtype);
            self.e.begin_if(pred, &[rd]);
            let old = self.e.atomic_global(op, buffer, dtype, off, idx_dtype, c, v);
            self.e.begin_else(&[old]);
            let z = self.zero(dtype);
            let old = self.e.end_if(&[z])[0];
            // Every thread gets thread 0's old value.
            self.reserve(rd, 1);
            self.e.barrier();
            let zero = self.c_i32(0);
            self.e.begin_if(first, &[]);
            self.st_sh(rd, zero, old);
            self.e.begin_else(&[]);
            self.e.end_if(&[]);
            self.e.barrier();
            let v = self.ld_sh(rd, zero);
            self.scalars.insert(r, v);
            return Ok(());
        }
        let layout = self.pick_layout(&[value, offsets], &t.shape);
        let offs = self.get(offsets, &layout)?;
        let vals = self.get(value, &layout)?;
        let cregs = match cmp {
            Some(c) => Some(self.get(c, &layout)?),
            None => None,
        };
        let mregs = match mask {
            Some(m) => Some(self.get(m, &layout)?),
            None => None,
        };
        let dist = self.dist(&layout, &t.shape);
        let owners =
            if dist.wrap.iter().any(|&w| w) || !dist.replica_terms.is_empty() { self.coords(&dist).owner } else { vec![None; dist.num_regs()] };
        let rd = reg_dtype(dtype);
        let mut out = Vec::with_capacity(offs.len());
        for i in 0..offs.len() {
            let m = mregs.as_ref().map(|m| m[i]);
            let c = cregs.as_ref().map(|c| c[i]);
            match self.and(m, owners[i]) {
                None => out.push(self.e.atomic_global(op, buffer, dtype, offs[i], idx_dtype, c, vals[i])),
                Some(p) => {
                    self.e.begin_if(p, &[rd]);
                    let old = self.e.atomic_global(op, buffer, dtype, offs[i], idx_dtype, c, vals[i]);
                    self.e.begin_else(&[old]);
                    let z = self.zero(dtype);
                    out.push(self.e.end_if(&[z])[0]);
                }
            }
        }
        if owners.iter().any(Option::is_some) {
            // Only the owner of an element performed its atomic; its copies in other threads
            // take the old value from it through shared memory.
            let numel = t.numel();
            self.reserve(rd, numel);
            self.e.barrier();
            let c = self.coords(&dist);
            let lins: Vec<E::V> = c.coords.iter().map(|cs| self.linear(cs, &t.shape)).collect();
            for (i, &lin) in lins.iter().enumerate() {
                self.store_shared_if(c.owner[i], rd, lin, out[i]);
            }
            self.e.barrier();
            out = lins.iter().map(|&lin| self.ld_sh(rd, lin)).collect();
        }
        self.set_data(r, layout, out);
        Ok(())
    }

    // ----- reductions -----

    /// `combine(a, b)` for one pair of elements (values; indices for arg reductions).
    fn combine(&mut self, combine: &'a Combine, dtype: DType, a: (E::V, Option<E::V>), b: (E::V, Option<E::V>)) -> R<(E::V, Option<E::V>)> {
        let rd = reg_dtype(dtype);
        Ok(match combine {
            Combine::Sum => {
                let v = self.e.binary(BinaryOp::Add, rd, a.0, b.0);
                (self.round(dtype, v), None)
            }
            Combine::Prod => {
                let v = self.e.binary(BinaryOp::Mul, rd, a.0, b.0);
                (self.round(dtype, v), None)
            }
            Combine::Max => (self.e.binary(BinaryOp::Max, rd, a.0, b.0), None),
            Combine::Min => (self.e.binary(BinaryOp::Min, rd, a.0, b.0), None),
            Combine::ArgMax | Combine::ArgMin => {
                let (ai, bi) = (a.1.expect("arg index"), b.1.expect("arg index"));
                let pred = if matches!(combine, Combine::ArgMax) { CmpPred::Gt } else { CmpPred::Lt };
                // b wins if strictly better, or equal with a lower index, or a is NaN and b not,
                // or both are NaN and b's index is lower: a total order on (value, index), so
                // the winner does not depend on the order of the combining tree (lanes of a
                // butterfly combine in opposite orders and must agree).
                let better = self.e.cmp(pred, rd, b.0, a.0);
                let eq = self.e.cmp(CmpPred::Eq, rd, b.0, a.0);
                let lower = self.e.cmp(CmpPred::Lt, DType::I32, bi, ai);
                let win = if rd.is_float() {
                    let a_nan = self.e.cmp(CmpPred::Ne, rd, a.0, a.0);
                    let b_nan = self.e.cmp(CmpPred::Ne, rd, b.0, b.0);
                    let both_nan = self.e.binary(BinaryOp::And, DType::I1, a_nan, b_nan);
                    let same = self.e.binary(BinaryOp::Or, DType::I1, eq, both_nan);
                    let tie = self.e.binary(BinaryOp::And, DType::I1, same, lower);
                    let win = self.e.binary(BinaryOp::Or, DType::I1, better, tie);
                    // a NaN and b a number: b wins (a NaN never wins over a number).
                    let b_num = self.e.cmp(CmpPred::Eq, rd, b.0, b.0);
                    let nan_case = self.e.binary(BinaryOp::And, DType::I1, a_nan, b_num);
                    self.e.binary(BinaryOp::Or, DType::I1, win, nan_case)
                } else {
                    let tie = self.e.binary(BinaryOp::And, DType::I1, eq, lower);
                    self.e.binary(BinaryOp::Or, DType::I1, better, tie)
                };
                let v = self.e.select(rd, win, b.0, a.0);
                let i = self.e.select(DType::I32, win, bi, ai);
                (v, Some(i))
            }
            Combine::Custom(block) => {
                self.push_scope();
                self.scalars.insert(block.args[0], a.0);
                self.scalars.insert(block.args[1], b.0);
                self.block(block)?;
                let y = self.yielded(block);
                let v = self.scalar(y[0]);
                self.pop_scope();
                (v, None)
            }
        })
    }

    fn reduce(&mut self, inst: &'a Inst, x: Value, axis: usize, combine: &'a Combine) -> R<()> {
        let r = inst.results[0];
        let xt = self.ty(x).clone();
        let dtype = xt.dtype;
        let arg = matches!(combine, Combine::ArgMax | Combine::ArgMin);
        let (xl, xregs) = self.get_natural(x)?;
        let xdist = self.dist(&xl, &xt.shape);
        let res_layout = Layout::Slice { dim: axis as u32, parent: Box::new(xl.clone()) };
        let rt = self.ty(r).clone();
        let rdist = self.dist(&res_layout, &rt.shape);
        let xc = self.coords(&xdist);
        let use_shuffles = !xdist.wrap[axis] && self.target.subgroup_ops.shuffle;
        let mut partial: Vec<(E::V, Option<E::V>)> = Vec::with_capacity(rdist.num_regs());
        if use_shuffles {
            // 1. Within the thread: registers that differ only along the axis.
            let ridx = rdist.index();
            let mut groups: Vec<Vec<usize>> = vec![Vec::new(); rdist.num_regs()];
            for (i, reg) in xdist.regs.iter().enumerate() {
                let mut k = reg.clone();
                k.remove(axis);
                let key = rdist.key(&k);
                if let Some(&g) = ridx.get(&key) {
                    groups[g].push(i);
                }
            }
            for g in &groups {
                let mut acc: Option<(E::V, Option<E::V>)> = None;
                for &i in g {
                    let e = (xregs[i], if arg { Some(xc.coords[i][axis]) } else { None });
                    acc = Some(match acc {
                        None => e,
                        Some(a) => self.combine(combine, dtype, a, e)?,
                    });
                }
                partial.push(acc.expect("every result register has sources"));
            }
            // 2. Across lanes: xor butterfly over the lane bits along the axis.
            let rd = reg_dtype(dtype);
            for t in xdist.terms[axis].clone().iter().filter(|t| t.src == ThreadSrc::Lane) {
                for bit in 0..t.mask.count_ones() {
                    let lane_mask = 1u32 << (t.shift + bit);
                    for p in partial.iter_mut() {
                        let ov = self.e.shuffle_xor(rd, p.0, lane_mask);
                        let oi = p.1.map(|i| self.e.shuffle_xor(DType::I32, i, lane_mask));
                        *p = self.combine(combine, dtype, *p, (ov, oi))?;
                    }
                }
            }
            // 3. Across warps through shared memory.
            let wterms: Vec<ThreadTerm> = xdist.terms[axis].iter().filter(|t| t.src == ThreadSrc::Warp).copied().collect();
            if !wterms.is_empty() {
                let nw: u32 = wterms.iter().map(|t| t.mask + 1).product();
                let rnumel = rt.numel().max(1);
                let slots = nw as usize * rnumel;
                // Shared memory holds one array per dtype: an arg reduction over i32 values keeps
                // its indices after the values, not on top of them.
                let index_base = if arg && rd == DType::I32 { slots } else { 0 };
                self.reserve(rd, slots);
                if arg {
                    self.reserve(DType::I32, index_base + slots);
                }
                self.e.barrier();
                // This warp's index along the axis.
                let mut widx: Option<E::V> = None;
                let mut scale = 1u32;
                for t in &wterms {
                    let term = ThreadTerm { mult: scale, ..*t };
                    let v = self.term_value(&term);
                    widx = Some(match widx {
                        None => v,
                        Some(a) => self.e.binary(BinaryOp::Add, DType::I32, a, v),
                    });
                    scale *= t.mask + 1;
                }
                let widx = widx.expect("non-empty");
                let rc = self.coords(&rdist);
                let rn = self.c_i32(rnumel as i64);
                let base = self.e.binary(BinaryOp::Mul, DType::I32, widx, rn);
                let mut lins = Vec::new();
                for (i, cs) in rc.coords.iter().enumerate() {
                    let lin = self.linear(cs, &rt.shape);
                    let slot = self.e.binary(BinaryOp::Add, DType::I32, base, lin);
                    self.st_sh(rd, slot, partial[i].0);
                    if let Some(ix) = partial[i].1 {
                        let islot = self.offset(slot, index_base as i64);
                        self.st_sh(DType::I32, islot, ix);
                    }
                    lins.push(lin);
                }
                self.e.barrier();
                for (i, lin) in lins.iter().enumerate() {
                    let mut acc: Option<(E::V, Option<E::V>)> = None;
                    for w in 0..nw {
                        let off = self.c_i32((w as usize * rnumel) as i64);
                        let slot = self.e.binary(BinaryOp::Add, DType::I32, off, *lin);
                        let v = self.ld_sh(rd, slot);
                        let ix = if arg {
                            let islot = self.offset(slot, index_base as i64);
                            Some(self.ld_sh(DType::I32, islot))
                        } else {
                            None
                        };
                        acc = Some(match acc {
                            None => (v, ix),
                            Some(a) => self.combine(combine, dtype, a, (v, ix))?,
                        });
                    }
                    partial[i] = acc.expect("at least one warp");
                }
            }
        } else {
            partial = self.reduce_shared(&xt, &xl, &xregs, axis, combine, &rdist)?;
        }
        let out: Vec<E::V> = partial.iter().map(|p| if arg { p.1.expect("arg index") } else { p.0 }).collect();
        if rt.is_scalar() {
            self.scalars.insert(r, out[0]);
        } else {
            self.set_data(r, res_layout, out);
        }
        Ok(())
    }

    /// `combine(a, b)` of a tuple reduction: one register per operand on each side.
    fn combine_tuple(&mut self, block: &'a Block, a: &[E::V], b: &[E::V]) -> R<Vec<E::V>> {
        self.push_scope();
        for (&arg, &v) in block.args.iter().zip(a.iter().chain(b)) {
            self.scalars.insert(arg, v);
        }
        self.block(block)?;
        let out = self.yielded(block).iter().map(|&y| self.scalar(y)).collect();
        self.pop_scope();
        Ok(out)
    }

    /// `reduce_tuple`: the steps of [`Lowerer::reduce`] (within the thread, across lanes,
    /// across warps; or through shared memory), with one register per operand where `reduce`
    /// carries a value and an optional index. Every operand is brought to the first one's layout.
    fn reduce_tuple(&mut self, inst: &'a Inst, xs: &[Value], axis: usize, block: &'a Block) -> R<()> {
        let xt = self.ty(xs[0]).clone();
        let rds: Vec<DType> = xs.iter().map(|&x| reg_dtype(self.ty(x).dtype)).collect();
        let (xl, first) = self.get_natural(xs[0])?;
        let mut xregs = vec![first];
        for &x in &xs[1..] {
            xregs.push(self.get(x, &xl)?);
        }
        let xdist = self.dist(&xl, &xt.shape);
        let res_layout = Layout::Slice { dim: axis as u32, parent: Box::new(xl.clone()) };
        let mut rshape = xt.shape.clone();
        rshape.remove(axis);
        let rdist = self.dist(&res_layout, &rshape);
        let rnumel: usize = rshape.iter().product::<usize>().max(1);
        // Operands of one register dtype share that dtype's shared-memory array, one after
        // another: `bases[j]` is operand j's start, in units of `per_operand` elements.
        let mut count: HashMap<DType, usize> = HashMap::new();
        let slots_of: Vec<usize> = rds
            .iter()
            .map(|d| {
                let c = count.entry(*d).or_insert(0);
                *c += 1;
                *c - 1
            })
            .collect();
        let use_shuffles = !xdist.wrap[axis] && self.target.subgroup_ops.shuffle;
        let mut partial: Vec<Vec<E::V>> = Vec::with_capacity(rdist.num_regs());
        if use_shuffles {
            let ridx = rdist.index();
            let mut groups: Vec<Vec<usize>> = vec![Vec::new(); rdist.num_regs()];
            for (i, reg) in xdist.regs.iter().enumerate() {
                let mut k = reg.clone();
                k.remove(axis);
                if let Some(&g) = ridx.get(&rdist.key(&k)) {
                    groups[g].push(i);
                }
            }
            for g in &groups {
                let mut acc: Option<Vec<E::V>> = None;
                for &i in g {
                    let e: Vec<E::V> = xregs.iter().map(|r| r[i]).collect();
                    acc = Some(match acc {
                        None => e,
                        Some(a) => self.combine_tuple(block, &a, &e)?,
                    });
                }
                partial.push(acc.expect("every result register has sources"));
            }
            for t in xdist.terms[axis].clone().iter().filter(|t| t.src == ThreadSrc::Lane) {
                for bit in 0..t.mask.count_ones() {
                    let lane_mask = 1u32 << (t.shift + bit);
                    for p in partial.iter_mut() {
                        let other: Vec<E::V> = p.iter().zip(&rds).map(|(&v, &d)| self.e.shuffle_xor(d, v, lane_mask)).collect();
                        *p = self.combine_tuple(block, p, &other)?;
                    }
                }
            }
            let wterms: Vec<ThreadTerm> = xdist.terms[axis].iter().filter(|t| t.src == ThreadSrc::Warp).copied().collect();
            if !wterms.is_empty() {
                let nw: u32 = wterms.iter().map(|t| t.mask + 1).product();
                let per_operand = nw as usize * rnumel;
                for (d, c) in &count {
                    self.reserve(*d, c * per_operand);
                }
                self.e.barrier();
                let mut widx: Option<E::V> = None;
                let mut scale = 1u32;
                for t in &wterms {
                    let term = ThreadTerm { mult: scale, ..*t };
                    let v = self.term_value(&term);
                    widx = Some(match widx {
                        None => v,
                        Some(a) => self.e.binary(BinaryOp::Add, DType::I32, a, v),
                    });
                    scale *= t.mask + 1;
                }
                let widx = widx.expect("non-empty");
                let rc = self.coords(&rdist);
                let rn = self.c_i32(rnumel as i64);
                let base = self.e.binary(BinaryOp::Mul, DType::I32, widx, rn);
                let mut lins = Vec::new();
                for (i, cs) in rc.coords.iter().enumerate() {
                    let lin = self.linear(cs, &rshape);
                    let slot = self.e.binary(BinaryOp::Add, DType::I32, base, lin);
                    for (j, &d) in rds.iter().enumerate() {
                        let s = self.offset(slot, (slots_of[j] * per_operand) as i64);
                        self.st_sh(d, s, partial[i][j]);
                    }
                    lins.push(lin);
                }
                self.e.barrier();
                for (i, lin) in lins.iter().enumerate() {
                    let mut acc: Option<Vec<E::V>> = None;
                    for w in 0..nw {
                        let off = self.c_i32((w as usize * rnumel) as i64);
                        let slot = self.e.binary(BinaryOp::Add, DType::I32, off, *lin);
                        let mut e = Vec::with_capacity(rds.len());
                        for (j, &d) in rds.iter().enumerate() {
                            let s = self.offset(slot, (slots_of[j] * per_operand) as i64);
                            e.push(self.ld_sh(d, s));
                        }
                        acc = Some(match acc {
                            None => e,
                            Some(a) => self.combine_tuple(block, &a, &e)?,
                        });
                    }
                    partial[i] = acc.expect("at least one warp");
                }
            }
        } else {
            // Through shared memory: every thread reads its result elements' whole axis.
            let per_operand = xt.numel();
            for (d, c) in &count {
                self.reserve(*d, c * per_operand);
            }
            self.e.barrier();
            let xc = self.coords(&xdist);
            for (i, cs) in xc.coords.iter().enumerate() {
                let lin = self.linear(cs, &xt.shape);
                for (j, &d) in rds.iter().enumerate() {
                    let s = self.offset(lin, (slots_of[j] * per_operand) as i64);
                    self.st_sh(d, s, xregs[j][i]);
                }
            }
            self.e.barrier();
            let rc = self.coords(&rdist);
            let n = xt.shape[axis];
            let stride: usize = xt.shape[axis + 1..].iter().product();
            for cs in &rc.coords {
                let mut full = cs.clone();
                let zero = self.c_i32(0);
                full.insert(axis, zero);
                let base = self.linear(&full, &xt.shape);
                let mut init = Vec::with_capacity(rds.len());
                for (j, &d) in rds.iter().enumerate() {
                    let s = self.offset(base, (slots_of[j] * per_operand) as i64);
                    init.push((d, self.ld_sh(d, s)));
                }
                let (lo, hi, st) = (self.c_i32(1), self.c_i32(n as i64), self.c_i32(1));
                let (k, args) = self.e.begin_loop(DType::I32, lo, hi, st, &init);
                self.push_scope();
                let sv = self.c_i32(stride as i64);
                let off = self.e.binary(BinaryOp::Mul, DType::I32, k, sv);
                let slot = self.e.binary(BinaryOp::Add, DType::I32, base, off);
                let mut e = Vec::with_capacity(rds.len());
                for (j, &d) in rds.iter().enumerate() {
                    let s = self.offset(slot, (slots_of[j] * per_operand) as i64);
                    e.push(self.ld_sh(d, s));
                }
                let next = self.combine_tuple(block, &args, &e)?;
                self.pop_scope();
                partial.push(self.e.end_loop(&next));
            }
        }
        for (j, &r) in inst.results.iter().enumerate() {
            let out: Vec<E::V> = partial.iter().map(|p| p[j]).collect();
            if rshape.is_empty() {
                self.scalars.insert(r, out[0]);
            } else {
                self.set_data(r, res_layout.clone(), out);
            }
        }
        Ok(())
    }

    /// Reduction through shared memory: every thread reads its result elements' whole axis.
    #[allow(clippy::too_many_arguments)]
    fn reduce_shared(&mut self, xt: &Type, xl: &Layout, xregs: &[E::V], axis: usize, combine: &'a Combine, rdist: &Dist) -> R<Vec<Partial<E::V>>> {
        let dtype = xt.dtype;
        let rd = reg_dtype(dtype);
        let arg = matches!(combine, Combine::ArgMax | Combine::ArgMin);
        self.reserve(rd, xt.numel());
        self.e.barrier();
        let xdist = self.dist(xl, &xt.shape);
        let xc = self.coords(&xdist);
        for (i, cs) in xc.coords.iter().enumerate() {
            let lin = self.linear(cs, &xt.shape);
            self.st_sh(rd, lin, xregs[i]);
        }
        self.e.barrier();
        let rc = self.coords(rdist);
        let n = xt.shape[axis];
        let stride: usize = xt.shape[axis + 1..].iter().product();
        let mut out = Vec::with_capacity(rdist.num_regs());
        for cs in &rc.coords {
            // Coordinates of element 0 along the axis.
            let mut full = cs.clone();
            let zero = self.c_i32(0);
            full.insert(axis, zero);
            let base = self.linear(&full, &xt.shape);
            let first = self.ld_sh(rd, base);
            let zero = self.c_i32(0);
            let init: Vec<(DType, E::V)> = if arg { vec![(rd, first), (DType::I32, zero)] } else { vec![(rd, first)] };
            let (lo, hi, st) = (self.c_i32(1), self.c_i32(n as i64), self.c_i32(1));
            let (k, args) = self.e.begin_loop(DType::I32, lo, hi, st, &init);
            self.push_scope();
            let sv = self.c_i32(stride as i64);
            let off = self.e.binary(BinaryOp::Mul, DType::I32, k, sv);
            let slot = self.e.binary(BinaryOp::Add, DType::I32, base, off);
            let v = self.ld_sh(rd, slot);
            let (nv, ni) = self.combine(combine, dtype, (args[0], args.get(1).copied()), (v, if arg { Some(k) } else { None }))?;
            self.pop_scope();
            let next: Vec<E::V> = if arg { vec![nv, ni.expect("arg")] } else { vec![nv] };
            let res = self.e.end_loop(&next);
            out.push((res[0], res.get(1).copied()));
        }
        Ok(out)
    }

    /// Inclusive scan along an axis: Hillis-Steele steps through shared memory.
    fn scan(&mut self, inst: &'a Inst, x: Value, axis: usize, combine: &'a Combine, reverse: bool) -> R<()> {
        let r = inst.results[0];
        let xt = self.ty(x).clone();
        let dtype = xt.dtype;
        let rd = reg_dtype(dtype);
        let (xl, mut regs) = self.get_natural(x)?;
        let dist = self.dist(&xl, &xt.shape);
        let c = self.coords(&dist);
        let n = xt.shape[axis];
        let stride: usize = xt.shape[axis + 1..].iter().product();
        self.reserve(rd, xt.numel());
        let lins: Vec<E::V> = c.coords.iter().map(|cs| self.linear(cs, &xt.shape)).collect();
        let mut step = 1usize;
        while step < n {
            self.e.barrier();
            for (i, &lin) in lins.iter().enumerate() {
                self.st_sh(rd, lin, regs[i]);
            }
            self.e.barrier();
            for (i, cs) in c.coords.iter().enumerate() {
                // Forward: combine with element `k - step` when k >= step; reverse: `k + step`
                // when k + step < n. Out-of-range lanes read themselves and keep their value.
                let k = cs[axis];
                let sv = self.c_i32(step as i64);
                let (ok, nb) = if reverse {
                    let kn = self.e.binary(BinaryOp::Add, DType::I32, k, sv);
                    let lim = self.c_i32(n as i64);
                    (self.e.cmp(CmpPred::Lt, DType::I32, kn, lim), BinaryOp::Add)
                } else {
                    (self.e.cmp(CmpPred::Ge, DType::I32, k, sv), BinaryOp::Sub)
                };
                let delta = self.c_i32((step * stride) as i64);
                let other = self.e.binary(nb, DType::I32, lins[i], delta);
                let slot = self.e.select(DType::I32, ok, other, lins[i]);
                let v = self.ld_sh(rd, slot);
                let (comb, _) = if reverse {
                    self.combine(combine, dtype, (regs[i], None), (v, None))?
                } else {
                    self.combine(combine, dtype, (v, None), (regs[i], None))?
                };
                regs[i] = self.e.select(rd, ok, comb, regs[i]);
            }
            step *= 2;
        }
        self.set_data(r, xl, regs);
        Ok(())
    }

    /// `a @ b + acc` with FMAs: the operands go through shared memory, K in chunks, and every
    /// thread accumulates its registers over each chunk.
    /// An f32 rounded to tf32 ([`InputPrecision::Tf32`]) in integer operations every backend
    /// has: add half of the dropped part's unit to the bits and clear the dropped part (to
    /// nearest, ties away; a carry moves into the exponent, up to an infinity), NaN kept.
    fn round_tf32(&mut self, x: E::V) -> E::V {
        if let Some(r) = self.e.round_tf32(x) {
            return r;
        }
        let bits = self.e.bitcast(DType::F32, DType::I32, x);
        let half = self.c_i32(0x1000);
        let keep = self.c_i32(!0x1fff);
        let up = self.e.binary(BinaryOp::Add, DType::I32, bits, half);
        let cleared = self.e.binary(BinaryOp::And, DType::I32, up, keep);
        let rounded = self.e.bitcast(DType::I32, DType::F32, cleared);
        let magnitude_mask = self.c_i32(0x7fff_ffff);
        let infinity = self.c_i32(0x7f80_0000);
        let magnitude = self.e.binary(BinaryOp::And, DType::I32, bits, magnitude_mask);
        let nan = self.e.cmp(CmpPred::Gt, DType::I32, magnitude, infinity);
        self.e.select(DType::F32, nan, x, rounded)
    }

    fn dot(&mut self, inst: &'a Inst, a: Value, b: Value, acc: Value, precision: InputPrecision) -> R<()> {
        let r = inst.results[0];
        if let Some(&(instr, mma)) = self.mma.get(&r) {
            return self.dot_mma(inst, a, b, acc, instr, mma);
        }
        let tf32 = precision == InputPrecision::Tf32;
        if let Some(&(instr, coop)) = self.coop.get(&r) {
            return self.dot_coop(inst, a, b, acc, instr, coop);
        }
        let (at, bt) = (self.ty(a).clone(), self.ty(b).clone());
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        let (ad, bd) = (reg_dtype(at.dtype), reg_dtype(bt.dtype));
        // The IR's semantics (Op::Dot): products summed in f32 (i32 for integers) and rounded
        // once to the accumulator's dtype, so an f16 accumulator is carried in f32 here.
        let accd = self.ty(acc).dtype;
        let racc = if accd.is_float() { DType::F32 } else { reg_dtype(accd) };
        let layout = self.pick_layout(&[acc], &[m, n]);
        let acc_in = self.get(acc, &layout)?;
        let mut accregs: Vec<E::V> = acc_in.iter().map(|&v| self.cast(accd, racc, v)).collect();
        let (al, aregs) = self.get_natural(a)?;
        let (bl, bregs) = self.get_natural(b)?;
        let (adist, bdist) = (self.dist(&al, &at.shape), self.dist(&bl, &bt.shape));
        let (kc, chunking) = dot_chunk(&adist, 1, &bdist, 0, m, n, k);
        // Operands share one array when their dtypes match: a at 0, b after it.
        let b_base = if ad == bd { m * kc } else { 0 };
        if ad == bd {
            self.reserve(ad, m * kc + kc * n);
        } else {
            self.reserve(ad, m * kc);
            self.reserve(bd, kc * n);
        }
        let dist = self.dist(&layout, &[m, n]);
        // Distinct rows and columns among this thread's accumulator registers.
        let mut rows: Vec<u32> = dist.regs.iter().map(|r| r[0]).collect();
        rows.sort_unstable();
        rows.dedup();
        let mut cols: Vec<u32> = dist.regs.iter().map(|r| r[1]).collect();
        cols.sort_unstable();
        cols.dedup();
        let row_of: Vec<usize> = dist.regs.iter().map(|r| rows.binary_search(&r[0]).unwrap_or(0)).collect();
        let col_of: Vec<usize> = dist.regs.iter().map(|r| cols.binary_search(&r[1]).unwrap_or(0)).collect();
        let kcv = self.c_i32(kc as i64);
        let nv = self.c_i32(n as i64);
        let bb = self.c_i32(b_base as i64);
        // Shared-memory slots are written as one thread-dependent base plus a constant per
        // register wherever the layout's coordinates do not wrap (a coordinate is then its
        // register's static part plus the thread's terms). The code generators fold the
        // constant into the load or store's immediate offset, so a thread keeps one address
        // live per operand instead of one per register or row: those addresses do not depend
        // on the loop around a dot (attention's key loop), are hoisted out of it, and dozens of
        // them outlived it, which spilled on AMD targets.
        let a_split = !adist.wrap[0] && !adist.wrap[1];
        let b_split = !bdist.wrap[0] && !bdist.wrap[1];
        let c_split = !dist.wrap[0] && !dist.wrap[1];
        // Per-register coordinates, only where a slot or a chunk test needs them.
        let dynamic = chunking == Chunking::Dynamic;
        let ac = if !a_split || dynamic { Some(self.coords(&adist)) } else { None };
        let bc = if !b_split || dynamic { Some(self.coords(&bdist)) } else { None };
        // a[i, k] -> i * kc + k: this thread's part; b[k, j] -> k * n + j likewise.
        let a_thread = if a_split {
            let (i, k) = (self.thread_coord(&adist, 0), self.thread_coord(&adist, 1));
            let row = self.e.binary(BinaryOp::Mul, DType::I32, i, kcv);
            Some(self.e.binary(BinaryOp::Add, DType::I32, row, k))
        } else {
            None
        };
        let b_thread = if b_split {
            let (k, j) = (self.thread_coord(&bdist, 0), self.thread_coord(&bdist, 1));
            let row = self.e.binary(BinaryOp::Mul, DType::I32, k, nv);
            Some(self.e.binary(BinaryOp::Add, DType::I32, row, j))
        } else {
            None
        };
        // The k loop reads a[row, kk] at row * kc + kk and b[kk, col] at b_base + kk * n + col.
        let (a_row_base, b_col_base): (Vec<E::V>, Vec<E::V>) = if c_split {
            let tr = self.thread_coord(&dist, 0);
            let tc = self.thread_coord(&dist, 1);
            (vec![self.e.binary(BinaryOp::Mul, DType::I32, tr, kcv)], vec![tc])
        } else {
            let c = self.coords(&dist);
            let first_with = |dim: usize, v: u32| dist.regs.iter().position(|r| r[dim] == v).unwrap_or(0);
            let row_coord: Vec<E::V> = rows.iter().map(|&rw| c.coords[first_with(0, rw)][0]).collect();
            let col_coord: Vec<E::V> = cols.iter().map(|&cl| c.coords[first_with(1, cl)][1]).collect();
            (
                row_coord.iter().map(|&rc| self.e.binary(BinaryOp::Mul, DType::I32, rc, kcv)).collect(),
                col_coord.iter().map(|&cc| self.e.binary(BinaryOp::Add, DType::I32, cc, bb)).collect(),
            )
        };
        for chunk in 0..k.div_ceil(kc) {
            let k0 = (chunk * kc) as u32;
            self.e.barrier();
            // a[i, k] -> slot i * kc + (k - k0); b[k, j] -> b_base + (k - k0) * n + j, for the
            // registers whose k falls in this chunk (known statically, see `dot_chunk`).
            let k0v = self.c_i32(k0 as i64);
            // This chunk's thread bases: the constants added to them stay non-negative, as
            // immediate offsets must.
            let a_chunk = a_thread.map(|t| if k0 == 0 { t } else { self.e.binary(BinaryOp::Sub, DType::I32, t, k0v) });
            let b_chunk = b_thread.map(|t| {
                if k0 == 0 {
                    t
                } else {
                    let off = self.c_i32(k0 as i64 * n as i64);
                    self.e.binary(BinaryOp::Sub, DType::I32, t, off)
                }
            });
            for (i, reg) in adist.regs.iter().enumerate() {
                let pred = match chunking {
                    Chunking::Whole => None,
                    Chunking::Static if reg[1] / kc as u32 != chunk as u32 => continue,
                    Chunking::Static => None,
                    Chunking::Dynamic => Some(self.in_chunk(ac.as_ref().expect("coordinates for the chunk test").coords[i][1], k0, kc)),
                };
                let slot = match a_chunk {
                    Some(t) => self.offset(t, reg[0] as i64 * kc as i64 + reg[1] as i64),
                    None => {
                        let ac = ac.as_ref().expect("coordinates where the slot needs them");
                        let kk = self.e.binary(BinaryOp::Sub, DType::I32, ac.coords[i][1], k0v);
                        let row = self.e.binary(BinaryOp::Mul, DType::I32, ac.coords[i][0], kcv);
                        self.e.binary(BinaryOp::Add, DType::I32, row, kk)
                    }
                };
                self.store_shared_if(pred, ad, slot, aregs[i]);
            }
            for (i, reg) in bdist.regs.iter().enumerate() {
                let pred = match chunking {
                    Chunking::Whole => None,
                    Chunking::Static if reg[0] / kc as u32 != chunk as u32 => continue,
                    Chunking::Static => None,
                    Chunking::Dynamic => Some(self.in_chunk(bc.as_ref().expect("coordinates for the chunk test").coords[i][0], k0, kc)),
                };
                let slot = match b_chunk {
                    Some(t) => self.offset(t, b_base as i64 + reg[0] as i64 * n as i64 + reg[1] as i64),
                    None => {
                        let bc = bc.as_ref().expect("coordinates where the slot needs them");
                        let kk = self.e.binary(BinaryOp::Sub, DType::I32, bc.coords[i][0], k0v);
                        let row = self.e.binary(BinaryOp::Mul, DType::I32, kk, nv);
                        let rb = self.e.binary(BinaryOp::Add, DType::I32, row, bb);
                        self.e.binary(BinaryOp::Add, DType::I32, rb, bc.coords[i][1])
                    }
                };
                self.store_shared_if(pred, bd, slot, bregs[i]);
            }
            self.e.barrier();
            let carried: Vec<(DType, E::V)> = accregs.iter().map(|&v| (racc, v)).collect();
            let (lo, hi, st) = (self.c_i32(0), self.c_i32(kc.min(k) as i64), self.c_i32(1));
            self.e.mark_dot_loop();
            let (kk, args) = self.e.begin_loop(DType::I32, lo, hi, st, &carried);
            let bk = self.e.binary(BinaryOp::Mul, DType::I32, kk, nv);
            let a_row_k: Vec<E::V> = a_row_base.iter().map(|&rb| self.e.binary(BinaryOp::Add, DType::I32, rb, kk)).collect();
            let b_col_k: Vec<E::V> = b_col_base.iter().map(|&cb| self.e.binary(BinaryOp::Add, DType::I32, cb, bk)).collect();
            let mut av = Vec::with_capacity(rows.len());
            for (r, &rw) in rows.iter().enumerate() {
                let idx = if c_split { self.offset(a_row_k[0], rw as i64 * kc as i64) } else { a_row_k[r] };
                let v = self.ld_sh(ad, idx);
                let v = self.cast(at.dtype, racc, v);
                av.push(if tf32 { self.round_tf32(v) } else { v });
            }
            let mut bv = Vec::with_capacity(cols.len());
            for (cix, &cl) in cols.iter().enumerate() {
                let idx = if c_split { self.offset(b_col_k[0], b_base as i64 + cl as i64) } else { b_col_k[cix] };
                let v = self.ld_sh(bd, idx);
                let v = self.cast(bt.dtype, racc, v);
                bv.push(if tf32 { self.round_tf32(v) } else { v });
            }
            let mut next = Vec::with_capacity(args.len());
            for (i, &accv) in args.iter().enumerate() {
                let (x, y) = (av[row_of[i]], bv[col_of[i]]);
                let v = if racc.is_float() {
                    self.e.fma(racc, x, y, accv)
                } else {
                    let p = self.e.binary(BinaryOp::Mul, racc, x, y);
                    self.e.binary(BinaryOp::Add, racc, accv, p)
                };
                next.push(v);
            }
            accregs = self.e.end_loop(&next);
        }
        let accregs = accregs.into_iter().map(|v| self.cast(racc, accd, v)).collect();
        self.set_data(r, layout, accregs);
        Ok(())
    }

    /// `a @ b + acc` on cooperative matrices. Both operands are written to shared memory
    /// row-major, each row padded by 16 bytes so that the rows a driver's matrix load reads at
    /// once start in different banks; each warp loads its operands' tiles from there and
    /// multiplies them into its accumulator tiles, K outermost (every element sums its products
    /// in ascending K). The accumulator stays in cooperative matrices where the plan keeps it (a
    /// K loop's), else it moves into the exchange map ([`Coop::exchange`]).
    fn dot_coop(&mut self, inst: &'a Inst, a: Value, b: Value, acc: Value, instr: MatrixInstr, coop: Coop) -> R<()> {
        let r = inst.results[0];
        let unsupported = |what: String| LowerError::Unsupported { op: "dot".into(), loc: inst.loc.clone(), what };
        let (at, bt) = (self.ty(a).clone(), self.ty(b).clone());
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        let accd = self.ty(acc).dtype;
        let ex = self.coop_exchange(coop)?;
        let cl = Layout::Coop(coop);
        let mut accs = if accd == DType::F32 {
            self.get(acc, &cl)?
        } else {
            // Rounded to its dtype by every dot: in f32 through the exchange map.
            let regs = self.get(acc, &Layout::Mma(ex))?;
            let regs: Vec<E::V> = regs.iter().map(|&v| self.cast(accd, DType::F32, v)).collect();
            self.coop_from_exchange(coop, ex, &[m, n], &regs)?
        };
        let (al, aregs) = self.get_natural(a)?;
        let (bl, bregs) = self.get_natural(b)?;
        // bf16 (held in f32 registers) is staged as bf16 bits: what the matrix loads read.
        let sd = at.dtype;
        let (tm, tn, tk) = (instr.m as usize, instr.n as usize, instr.k as usize);
        // K is staged whole where it fits beside the exchange's scratch, else in chunks (each a
        // multiple of the instruction's K dividing K), so a large tile is never refused here
        // when a smaller staging would run.
        let budget = (self.target.shared_memory_bytes as usize).saturating_sub(Self::COOP_SCRATCH * 4);
        let bytes = |kc: usize| (m * (kc + Self::COOP_PAD) + kc * (n + Self::COOP_PAD)) * smem_elem_bytes(sd) as usize;
        let kc = (1..=k / tk).rev().map(|c| c * tk).find(|&kc| k % kc == 0 && bytes(kc) <= budget).unwrap_or(tk);
        let adist = self.dist(&al, &at.shape);
        let bdist = self.dist(&bl, &bt.shape);
        let chunking = if kc == k {
            Chunking::Whole
        } else if chunk_is_static(&adist, 1, kc) && chunk_is_static(&bdist, 0, kc) {
            Chunking::Static
        } else {
            Chunking::Dynamic
        };
        // Each operand is stored in rows of its contiguous dimension, padded by 16 bytes; a
        // `b` whose registers run along K (attention's K^T) is stored as rows of K and read
        // column-major. Where the backend has a staging array and each thread's registers form
        // runs of 16 bytes along the stored rows, the operand goes there one 16-byte store per
        // run, else element by element into the shared array.
        let vec = (16 / smem_elem_bytes(sd)) as usize;
        let can_stage = self.e.staging_vectors()
            && self.staging_level != Staging::Elements
            && matches!(sd, DType::F16 | DType::BF16)
            && chunking != Chunking::Dynamic;
        let a_staged = can_stage && stores_in_vectors(&adist, vec, 1);
        let (b_staged, b_col_major) = match can_stage {
            true if stores_in_vectors(&bdist, vec, 1) => (true, false),
            true if stores_in_vectors(&bdist, vec, 0) => (true, true),
            _ => (false, false),
        };
        let a_pitch = kc + Self::COOP_PAD;
        let b_pitch = if b_col_major { kc + Self::COOP_PAD } else { n + Self::COOP_PAD };
        let (a_len, b_len) = (m * a_pitch, if b_col_major { n * b_pitch } else { kc * b_pitch });
        let b_base = if a_staged == b_staged { a_len } else { 0 };
        let mut lens = [0usize; 2];
        lens[usize::from(a_staged)] += a_len;
        lens[usize::from(b_staged)] += b_len;
        // The one dot of a loop stages each iteration in the buffer of its parity where two fit
        // beside what is reserved so far and the accumulator exchange: its stores then need no
        // barrier before them (the buffer they overwrite was last read two iterations back, and
        // every thread has passed the previous iteration's barrier since).
        let parity = self.stage_parity.take();
        let double = parity.filter(|_| {
            let elem = smem_elem_bytes(sd) as usize;
            let others: usize = self.shared.iter().map(|(&d, &n)| n as usize * smem_elem_bytes(d) as usize).sum::<usize>()
                + self.staging.iter().filter(|(&d, _)| d != sd).map(|(&d, &n)| n as usize * smem_elem_bytes(d) as usize).sum::<usize>();
            let staged = (2 * lens[1]).max(self.staging.get(&sd).copied().unwrap_or(0) as usize) * elem;
            self.staging_level == Staging::Double
                && a_staged
                && b_staged
                && chunking == Chunking::Whole
                && others + staged + Self::COOP_SCRATCH * 4 <= self.target.shared_memory_bytes as usize
        });
        if lens[0] > 0 {
            self.reserve(sd, lens[0]);
        }
        if lens[1] > 0 {
            let len = if double.is_some() { 2 * lens[1] } else { lens[1] } as u32;
            let e = self.staging.entry(sd).or_insert(0);
            *e = (*e).max(len);
            self.e.reserve_staging(sd, len);
        }
        // The buffer of this iteration's parity.
        let stage_off = match double {
            Some(p) => {
                self.double_staged.push(r.index());
                let len = self.c_i32(lens[1] as i64);
                Some(self.e.binary(BinaryOp::Mul, DType::I32, p, len))
            }
            None => None,
        };
        let (ac, bc) = (self.coords(&adist), self.coords(&bdist));
        // This warp's first row of `a` and column of `b`.
        let (wm, wn) = (coop.warps[0] as usize, coop.warps[1] as usize);
        let dist = self.dist(&cl, &[m, n]);
        let (row0, col0) = (self.thread_coord(&dist, 0), self.thread_coord(&dist, 1));
        let ap = self.c_i32(a_pitch as i64);
        let mut a_warp = self.e.binary(BinaryOp::Mul, DType::I32, row0, ap);
        let mut b_warp = if b_col_major {
            let bp = self.c_i32(b_pitch as i64);
            let c = self.e.binary(BinaryOp::Mul, DType::I32, col0, bp);
            self.offset(c, b_base as i64)
        } else {
            self.offset(col0, b_base as i64)
        };
        if let Some(off) = stage_off {
            a_warp = self.e.binary(BinaryOp::Add, DType::I32, a_warp, off);
            b_warp = self.e.binary(BinaryOp::Add, DType::I32, b_warp, off);
        }
        let [reps_m, reps_n] = coop.repeats(&[m, n]);
        for chunk in 0..k / kc {
            let k0 = chunk * kc;
            if double.is_none() {
                self.e.barrier();
            }
            // Element (r, c) of an operand goes to base + major * pitch + minor, (major, minor)
            // being (r, c) in rows or (c, r) in columns, K counted from the chunk's k0.
            let operands = [(&adist, &ac, &aregs, a_pitch, 0, 1, a_staged, false), (&bdist, &bc, &bregs, b_pitch, b_base, 0, b_staged, b_col_major)];
            for (dist, c, regs, pitch, base, kdim, staged, col_major) in operands {
                let p = self.c_i32(pitch as i64);
                let step = if staged { vec } else { 1 };
                for j in (0..c.coords.len()).step_by(step) {
                    let in_chunk = match chunking {
                        Chunking::Whole => None,
                        Chunking::Static if dist.regs[j][kdim] as usize / kc != chunk => continue,
                        Chunking::Static => None,
                        Chunking::Dynamic => Some(self.in_chunk(c.coords[j][kdim], k0 as u32, kc)),
                    };
                    let mut rc = [c.coords[j][0], c.coords[j][1]];
                    if k0 > 0 {
                        let k0v = self.c_i32(k0 as i64);
                        rc[kdim] = self.e.binary(BinaryOp::Sub, DType::I32, rc[kdim], k0v);
                    }
                    let (major, minor) = if col_major { (rc[1], rc[0]) } else { (rc[0], rc[1]) };
                    let major = self.e.binary(BinaryOp::Mul, DType::I32, major, p);
                    let lin = self.e.binary(BinaryOp::Add, DType::I32, major, minor);
                    let mut slot = self.offset(lin, base as i64);
                    if let (true, Some(off)) = (staged, stage_off) {
                        slot = self.e.binary(BinaryOp::Add, DType::I32, slot, off);
                    }
                    let values: Vec<E::V> = (j..j + step).map(|i| if sd == DType::BF16 { self.narrow_bf16(regs[i]) } else { regs[i] }).collect();
                    let pred = match (c.owner[j], in_chunk) {
                        (Some(x), Some(y)) => Some(self.e.binary(BinaryOp::And, DType::I1, x, y)),
                        (x, y) => x.or(y),
                    };
                    // A run shares its row, hence its owner (stores_in_vectors).
                    self.only_if(pred, |me| if staged { me.e.store_staging(sd, slot, &values) } else { me.st_sh(sd, slot, values[0]) });
                }
            }
            self.e.barrier();
            for kk in 0..kc / tk {
                let mut fa = Vec::with_capacity(reps_m);
                for mi in 0..reps_m {
                    let idx = self.offset(a_warp, ((mi * tm * wm) * a_pitch + kk * tk) as i64);
                    let x = self.coop_operand(instr, CoopRole::A, sd, idx, a_pitch, a_staged, false)?;
                    fa.push(x);
                }
                let mut fb = Vec::with_capacity(reps_n);
                for ni in 0..reps_n {
                    let at = if b_col_major { ni * tn * wn * b_pitch + kk * tk } else { kk * tk * b_pitch + ni * tn * wn };
                    let idx = self.offset(b_warp, at as i64);
                    let y = self.coop_operand(instr, CoopRole::B, sd, idx, b_pitch, b_staged, b_col_major)?;
                    fb.push(y);
                }
                for (mi, &x) in fa.iter().enumerate() {
                    for (ni, &y) in fb.iter().enumerate() {
                        let t = mi * reps_n + ni;
                        accs[t] = self
                            .e
                            .coop_mul_add(instr, x, y, accs[t])
                            .ok_or_else(|| unsupported(format!("the backend has no {instr:?} the target lists")))?;
                    }
                }
            }
        }
        if self.coop_kept.contains(&r) {
            self.set_data(r, cl, accs);
        } else {
            let regs = self.coop_to_exchange(coop, ex, &[m, n], &accs)?;
            let regs = regs.into_iter().map(|v| self.cast(DType::F32, accd, v)).collect();
            self.set_data(r, Layout::Mma(ex), regs);
        }
        Ok(())
    }

    /// A cooperative-matrix operand loaded from where [`Lowerer::dot_coop`] staged it.
    #[allow(clippy::too_many_arguments)]
    fn coop_operand(&mut self, instr: MatrixInstr, role: CoopRole, sd: DType, idx: E::V, pitch: usize, staged: bool, col_major: bool) -> R<E::V> {
        let v = if staged {
            self.e.coop_load_staged(instr, role, sd, idx, pitch as u32, col_major)
        } else {
            let idx = self.floored(sd, idx);
            self.e.coop_load(instr, role, sd, idx, pitch as u32, col_major)
        };
        v.ok_or_else(|| LowerError::Unsupported { op: "dot".into(), loc: Loc::default(), what: "no cooperative matrix loads".into() })
    }

    /// The exchange map of `coop` on this target's warps.
    fn coop_exchange(&self, coop: Coop) -> R<Mma> {
        coop.exchange(self.warp).ok_or_else(|| LowerError::Unsupported {
            op: "dot".into(),
            loc: Loc::default(),
            what: format!("no exchange map for {}x{} cooperative matrices on warps of {}", coop.m, coop.n, self.warp),
        })
    }

    /// Elements a cooperative-matrix operand's staged rows are padded by: 16 bytes of 16-bit
    /// elements, so consecutive rows start four banks apart.
    const COOP_PAD: usize = 8;

    /// Shared memory, in f32 elements, the exchange between cooperative matrices and registers
    /// takes per round (each warp moves as many of its tiles per round as fit).
    const COOP_SCRATCH: usize = 2048;

    /// The cooperative-matrix accumulator type of `coop` (its multiply-adds' other operands do
    /// not change it).
    fn coop_acc_instr(coop: Coop) -> MatrixInstr {
        MatrixInstr { kind: MatrixKind::CooperativeMatrix, m: coop.m, n: coop.n, k: 16, a: DType::F16, b: DType::F16, acc: DType::F32 }
    }

    /// Per round: tiles a warp moves, its scratch region's first index and, for this thread,
    /// the scratch index of its first exchange-map element (the region plus its lane's place
    /// in a tile).
    fn coop_scratch(&mut self, coop: Coop, ex: Mma, tiles: usize) -> (usize, E::V, E::V) {
        let tile = (coop.m * coop.n) as usize;
        let per_round = (Self::COOP_SCRATCH / (tile * self.num_warps as usize)).clamp(1, tiles.max(1));
        self.reserve(DType::F32, per_round * tile * self.num_warps as usize);
        let (terms, _) = ex.frag.lane_terms(None);
        let mut parts = Vec::new();
        for (d, t) in terms.iter().enumerate() {
            if let Some(t) = t {
                let v = self.term_value(t);
                parts.push(if d == 0 {
                    let c = self.c_i32(coop.n as i64);
                    self.e.binary(BinaryOp::Mul, DType::I32, v, c)
                } else {
                    v
                });
            }
        }
        let region = self.c_i32((per_round * tile) as i64);
        let warp = self.warp_id.expect("thread ids are emitted first");
        let start = self.e.binary(BinaryOp::Mul, DType::I32, warp, region);
        let mut base = start;
        for p in parts {
            base = self.e.binary(BinaryOp::Add, DType::I32, base, p);
        }
        (per_round, start, base)
    }

    /// Accumulator tiles of `coop` over `shape` from registers in its exchange map `ex`: each
    /// warp writes its tiles to its own scratch and loads them as cooperative matrices.
    fn coop_from_exchange(&mut self, coop: Coop, ex: Mma, shape: &[usize], regs: &[E::V]) -> R<Vec<E::V>> {
        self.conversions += 1;
        let instr = Self::coop_acc_instr(coop);
        let [rm, rn] = coop.repeats(shape);
        let tiles = rm * rn;
        let (per_round, start, base) = self.coop_scratch(coop, ex, tiles);
        let tile = (coop.m * coop.n) as usize;
        let per = ex.frag.regs(None) as usize;
        let mut out = Vec::with_capacity(tiles);
        for first in (0..tiles).step_by(per_round) {
            let round = first..(first + per_round).min(tiles);
            self.e.barrier();
            for t in round.clone() {
                for j in 0..per {
                    let (row, col) = ex.frag.reg(None, j as u32);
                    let idx = self.offset(base, ((t - first) * tile + (row * coop.n + col) as usize) as i64);
                    self.st_sh(DType::F32, idx, regs[t * per + j]);
                }
            }
            self.e.barrier();
            for t in round {
                let idx = self.offset(start, ((t - first) * tile) as i64);
                let idx = self.floored(DType::F32, idx);
                let v = self.e.coop_load(instr, CoopRole::Acc, DType::F32, idx, coop.n, false).ok_or_else(|| LowerError::Unsupported {
                    op: "dot".into(),
                    loc: Loc::default(),
                    what: "no cooperative matrix loads".into(),
                })?;
                out.push(v);
            }
        }
        Ok(out)
    }

    /// Registers in the exchange map `ex` of accumulator tiles `mats` of `coop` over `shape`:
    /// each warp stores its tiles to its own scratch and reads its lanes' elements back.
    fn coop_to_exchange(&mut self, coop: Coop, ex: Mma, shape: &[usize], mats: &[E::V]) -> R<Vec<E::V>> {
        self.conversions += 1;
        let instr = Self::coop_acc_instr(coop);
        let tiles = mats.len();
        let (per_round, start, base) = self.coop_scratch(coop, ex, tiles);
        let tile = (coop.m * coop.n) as usize;
        let per = ex.frag.regs(None) as usize;
        let _ = shape;
        let mut out = Vec::with_capacity(tiles * per);
        for first in (0..tiles).step_by(per_round) {
            let round = first..(first + per_round).min(tiles);
            self.e.barrier();
            for t in round.clone() {
                let idx = self.offset(start, ((t - first) * tile) as i64);
                let idx = self.floored(DType::F32, idx);
                self.e.coop_store(instr, mats[t], idx, coop.n).ok_or_else(|| LowerError::Unsupported {
                    op: "dot".into(),
                    loc: Loc::default(),
                    what: "no cooperative matrix stores".into(),
                })?;
            }
            self.e.barrier();
            for t in round {
                for j in 0..per {
                    let (row, col) = ex.frag.reg(None, j as u32);
                    let idx = self.offset(base, ((t - first) * tile + (row * coop.n + col) as usize) as i64);
                    out.push(self.ld_sh(DType::F32, idx));
                }
            }
        }
        Ok(out)
    }

    /// A matrix dot's accumulator in the instruction's layout, in f32: its dtype, the layout
    /// and the registers.
    fn dot_acc(&mut self, acc: Value, mma: Mma) -> R<(DType, Layout, Vec<E::V>)> {
        let accd = self.ty(acc).dtype;
        let acc_layout = Layout::Mma(mma);
        let acc_in = self.get(acc, &acc_layout)?;
        let regs = acc_in.iter().map(|&v| self.cast(accd, DType::F32, v)).collect();
        Ok((accd, acc_layout, regs))
    }

    /// `a @ b + acc` with warp-level matrix instructions. The accumulator lives in the
    /// instruction's layout. Each operand comes from one of three places: registers already in
    /// its fragment layout (a loop-invariant operand converted before the loop); the ring of
    /// shared-memory buffers a pipelined loop fills with asynchronous copies (swizzled, read
    /// with matrix loads); or, otherwise, shared memory it is written to here, row-major, and
    /// read back a fragment element at a time. Either way a K step reads just the fragments it
    /// multiplies, so no thread holds a whole operand tile. Each instruction tile of the result
    /// takes one instruction per K step, K outermost: every element sums its products in
    /// ascending K, as the interpreter does.
    fn dot_mma(&mut self, inst: &'a Inst, a: Value, b: Value, acc: Value, instr: MatrixInstr, mma: Mma) -> R<()> {
        let r = inst.results[0];
        let (at, bt) = (self.ty(a).clone(), self.ty(b).clone());
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        let (accd, acc_layout, mut accregs) = self.dot_acc(acc, mma)?;
        let layouts = [Layout::DotOperand { operand: 0, parent: mma }, Layout::DotOperand { operand: 1, parent: mma }];
        let types = [&at, &bt];
        let mut sources: Vec<Source<E::V>> = Vec::with_capacity(2);
        for (i, v) in [a, b].into_iter().enumerate() {
            let ty = types[i];
            let in_registers = self.data.get(&v).is_some_and(|(home, _)| self.moves_no_data(home, &layouts[i], &ty.shape));
            sources.push(match (self.rings.get(&v), self.held(v, &layouts[i])) {
                (Some(ring), _) => Source::Ring(ring.clone()),
                (None, Some(regs)) => Source::Registers(regs),
                (None, None) if in_registers => Source::Registers(self.get(v, &layouts[i])?),
                (None, None) => Source::Staged { base: 0 },
            });
        }
        let panels = |s: &Source<E::V>| matches!(s, Source::Ring(r) if r.swizzle.panel > 0);
        let instr = if instr.kind != MatrixKind::Wgmma {
            instr
        } else if panels(&sources[1]) && (panels(&sources[0]) || !matches!(sources[0], Source::Ring(_))) {
            return self.dot_wgmma(inst, [a, b], acc, instr, mma, sources);
        } else {
            // Not read from panels: the warp-level instruction, in the same layouts.
            mma_sync_for(self.target, at.dtype).ok_or_else(|| LowerError::Unsupported {
                op: "dot".into(),
                loc: inst.loc.clone(),
                what: format!("{} operands on a target without mma.sync for them", at.dtype),
            })?
        };
        // bf16 (held in f32 registers) is staged as bf16: half the bytes, and what the
        // instruction takes.
        let staged_dtype = |d: DType| if d == DType::BF16 { DType::BF16 } else { reg_dtype(d) };
        // `b` is staged K-contiguous (as [N, K]) where a lane's fragment holds runs of at least
        // four consecutive k (AMD's MFMA and WMMA), so the run is one vector read, and for tf32
        // (whose single elements a padded K-contiguous copy serves without conflicts);
        // row-major otherwise (mma.sync's pairs).
        let tf32 = instr.tf32();
        let k_major = [false, mma.frag.k_run(Some(1)) >= 4 || tf32];
        // Elements per row of each staged copy: on AMD, and for tf32, a K-contiguous copy's
        // rows are padded so that the fragments' reads are free of bank conflicts
        // (`Frag::staged_pad`'s model; rows of 32 or 64 f16 put MFMA's reads 8-way on the same
        // banks, rows of 32 f32 tf32's `a` reads 8-way).
        let pitch: [usize; 2] = [0, 1].map(|i| {
            let t = types[i];
            let inner = if k_major[i] { t.shape[0] } else { t.shape[1] };
            let k_contiguous = i == 0 || k_major[i];
            let pad = if (self.target.isa == Isa::Amdgcn || tf32) && k_contiguous {
                mma.frag.staged_pad(i as u8, inner as u32, smem_elem_bytes(staged_dtype(t.dtype)) as u32) as usize
            } else {
                0
            };
            inner + pad
        });
        // Operands through shared memory, `a` first then `b` when both go (one array per
        // register dtype: both are f16, or both bf16 held as f32).
        let mut staged = 0usize;
        for (i, src) in sources.iter_mut().enumerate() {
            if let Source::Staged { base } = src {
                *base = staged;
                let inner = if k_major[i] { types[i].shape[0] } else { types[i].shape[1] };
                staged += types[i].numel() / inner * pitch[i];
            }
        }
        // Offset of element (row, col) of operand `i` in its staged copy.
        let staged_offset = |i: usize, row: i64, col: i64| -> i64 {
            if k_major[i] {
                col * pitch[i] as i64 + row
            } else {
                row * pitch[i] as i64 + col
            }
        };
        if staged > 0 {
            // Both operands are computed before anything is staged: computing one (a `trans`
            // exchanged through shared memory) reuses the shared memory the other's staging
            // would already hold (`b = trans(x)` made `a` read x's elements).
            let mut natural = [None, None];
            for (i, v) in [a, b].into_iter().enumerate() {
                if matches!(sources[i], Source::Staged { .. }) {
                    natural[i] = Some(self.get_natural(v)?);
                }
            }
            let rd = staged_dtype(at.dtype);
            self.reserve(rd, staged);
            self.e.barrier();
            for (i, t) in types.into_iter().enumerate() {
                let Source::Staged { base } = sources[i] else { continue };
                let Some((home, regs)) = natural[i].take() else { continue };
                let dist = self.dist(&home, &t.shape);
                let c = self.coords(&dist);
                for (j, cs) in c.coords.iter().enumerate() {
                    let lin =
                        if k_major[i] { self.linear(&[cs[1], cs[0]], &[t.shape[1], pitch[i]]) } else { self.linear(cs, &[t.shape[0], pitch[i]]) };
                    let slot = self.offset(lin, base as i64);
                    let value = if rd == DType::BF16 { self.narrow_bf16(regs[j]) } else { regs[j] };
                    match c.owner[j] {
                        // Copies in other threads write the same value; one write is enough.
                        Some(own) => self.store_shared_if(Some(own), rd, slot, value),
                        None => self.st_sh(rd, slot, value),
                    }
                }
            }
            self.e.barrier();
        }
        // The operands' fragment layouts over their shapes, for the reads that name elements.
        let dists = [0, 1].map(|i| self.dist(&layouts[i], &types[i].shape));
        // Staged operands are read at one thread base plus a constant per register (fragment
        // layouts never wrap: `matrix_choice` sizes the warps to fit).
        let mut thread_base = [None, None];
        for i in 0..2 {
            if let Source::Staged { base } = sources[i] {
                let dist = &dists[i];
                let row = self.thread_coord(dist, 0);
                let col = self.thread_coord(dist, 1);
                let (outer, inner) = if k_major[i] { (col, row) } else { (row, col) };
                let pitch = self.c_i32(pitch[i] as i64);
                let rb = self.e.binary(BinaryOp::Mul, DType::I32, outer, pitch);
                let tb = self.e.binary(BinaryOp::Add, DType::I32, rb, inner);
                thread_base[i] = Some(self.offset(tb, base as i64));
            }
        }
        // Ring operands are read with matrix loads: lane `l` names row `l % 16` of the
        // instruction tile and its 8-column block `l / 16` (a: four matrices, a0..a7; b:
        // transposed, two matrices per instruction tile, two tiles per load).
        let [wm, wn] = mma.warps;
        // A tf32 `b` ring held as `[K, N]` is read element by element (a matrix load moves
        // whole 32-bit words of a row, and the fragment wants a column's): at this thread's
        // coordinates in the fragment layout plus each register's.
        let element_ring = |s: &Source<E::V>, i: usize| tf32 && i == 1 && matches!(s, Source::Ring(r) if !r.transposed);
        let mut ring_thread = [None, None];
        for i in 0..2 {
            if element_ring(&sources[i], i) {
                ring_thread[i] = Some((self.thread_coord(&dists[i], 0), self.thread_coord(&dists[i], 1)));
            }
        }
        // Elements per 16-byte matrix row: eight 16-bit ones, four tf32 ones.
        let row_elems = if tf32 { 4 } else { 8 };
        let lanes = if (0..2).any(|i| matches!(sources[i], Source::Ring(_)) && !element_ring(&sources[i], i)) {
            let bt = matches!(&sources[1], Source::Ring(r) if r.transposed);
            Some(self.matrix_lanes(mma, bt, row_elems))
        } else {
            None
        };
        let fk = mma.frag.mnk().2 as usize;
        let (reps_m, reps_n, steps_k) = mma.steps(m, n, k);
        for ki in 0..steps_k {
            let frag = |me: &mut Self, i: usize, row: usize, col: usize, count: usize| -> R<Vec<Vec<E::V>>> {
                let t = types[i];
                let ranges: Vec<_> = (0..count)
                    .map(|c| if i == 0 { mma.fragment(&t.shape, Some(0), row, col) } else { mma.fragment(&t.shape, Some(1), row, col + c) })
                    .collect();
                Ok(match &sources[i] {
                    // bf16 is held in f32 registers; the instruction takes bf16.
                    Source::Registers(regs) => ranges
                        .into_iter()
                        .map(|r| if t.dtype == DType::BF16 { regs[r].iter().map(|&v| me.narrow_bf16(v)).collect() } else { regs[r].to_vec() })
                        .collect(),
                    Source::Staged { .. } => {
                        let dist = &dists[i];
                        let rd = staged_dtype(t.dtype);
                        ranges
                            .into_iter()
                            .map(|r| {
                                r.map(|j| {
                                    let off = staged_offset(i, dist.regs[j][0] as i64, dist.regs[j][1] as i64);
                                    let idx = me.offset(thread_base[i].expect("a base for staged operands"), off);
                                    me.ld_sh(rd, idx)
                                })
                                .collect()
                            })
                            .collect()
                    }
                    Source::Ring(ring) if ring_thread[i].is_some() => {
                        let (tr, tc) = ring_thread[i].expect("thread coordinates for a tf32 ring");
                        let dist = &dists[i];
                        ranges
                            .into_iter()
                            .map(|r| {
                                r.map(|j| {
                                    // Held as `[K, N]`, as the fragment names it.
                                    let row = me.offset(tr, dist.regs[j][0] as i64);
                                    let col = me.offset(tc, dist.regs[j][1] as i64);
                                    let idx = ring.swizzle.index(me, row, col);
                                    let idx = me.e.binary(BinaryOp::Add, DType::I32, idx, ring.slot_base);
                                    // Below the floor: the ring's own index, not floored.
                                    me.e.load_shared(DType::F32, idx)
                                })
                                .collect()
                            })
                            .collect()
                    }
                    Source::Ring(ring) => {
                        let l = lanes.as_ref().expect("lane parts for matrix loads");
                        let (r, c) = match (i, l.bt) {
                            (0, _) => (me.offset(l.a_row, (row * 16 * wm as usize) as i64), me.offset(l.a_col, (col * fk) as i64)),
                            // Stored transposed: row n, column k; matrices (n tile, k half)
                            // in the order the fragments take them.
                            (_, Some((bt_row, bt_col))) if ring.transposed => {
                                (me.offset(bt_row, (col * 8 * wn as usize) as i64), me.offset(bt_col, (row * fk) as i64))
                            }
                            _ => (me.offset(l.l15, (row * 16) as i64), me.offset(l.b_col, (col * 8 * wn as usize) as i64)),
                        };
                        let idx = ring.swizzle.index(me, r, c);
                        let idx = me.e.binary(BinaryOp::Add, DType::I32, idx, ring.slot_base);
                        let n = if i == 0 { 4 } else { 2 * count as u32 };
                        match me.e.load_shared_matrix(ring.dtype, idx, n, i == 1 && !ring.transposed) {
                            Some(vals) => vals.chunks(mma.frag.regs(Some(i as u8)) as usize).map(|c| c.to_vec()).collect(),
                            None => {
                                return Err(LowerError::Unsupported {
                                    op: "dot".into(),
                                    loc: inst.loc.clone(),
                                    what: "a pipelined operand on a backend without matrix loads from shared memory".into(),
                                })
                            }
                        }
                    }
                })
            };
            let mut fa: Vec<Vec<E::V>> = Vec::with_capacity(reps_m);
            for mi in 0..reps_m {
                fa.extend(frag(self, 0, mi, ki, 1)?);
            }
            let mut fb: Vec<Vec<E::V>> = Vec::with_capacity(reps_n);
            for ni in (0..reps_n).step_by(2) {
                let count = (reps_n - ni).min(2);
                fb.extend(frag(self, 1, ki, ni, count)?);
            }
            if tf32 {
                // The instruction reads tf32: each operand element rounded as the IR says, once
                // per K step (an `a` element feeds every N repeat).
                for f in fa.iter_mut().chain(fb.iter_mut()) {
                    for v in f.iter_mut() {
                        *v = self.round_tf32(*v);
                    }
                }
            }
            for (mi, fa) in fa.iter().enumerate() {
                for (ni, fb) in fb.iter().enumerate() {
                    let fc = mma.fragment(&[m, n], None, mi, ni);
                    let (first, second) = if mma.frag.issued().1 { (fb, fa) } else { (fa, fb) };
                    let d = self.e.mma(instr, first, second, &accregs[fc.clone()]).ok_or_else(|| LowerError::Unsupported {
                        op: "dot".into(),
                        loc: inst.loc.clone(),
                        what: format!("the backend has no {instr:?} instruction the target lists"),
                    })?;
                    accregs.splice(fc, d);
                }
            }
        }
        let out = accregs.into_iter().map(|v| self.cast(DType::F32, accd, v)).collect();
        self.set_data(r, acc_layout, out);
        Ok(())
    }

    /// A `dot` on warpgroup matrix instructions ([`wgmma_choice`]): `b` (and `a`, where it is
    /// pipelined into panels too) read from its ring through descriptors, otherwise `a` from
    /// registers in the fragment layout; per K step and M repeat one instruction per
    /// warpgroup for all `n` columns, then one wait for all of them.
    fn dot_wgmma(&mut self, inst: &'a Inst, [a, b]: [Value; 2], acc: Value, instr: MatrixInstr, mma: Mma, sources: Vec<Source<E::V>>) -> R<()> {
        let r = inst.results[0];
        let (at, bt) = (self.ty(a).clone(), self.ty(b).clone());
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        let (accd, acc_layout, mut accregs) = self.dot_acc(acc, mma)?;
        let a_layout = Layout::DotOperand { operand: 0, parent: mma };
        let a_regs = match &sources[0] {
            Source::Ring(_) => None,
            Source::Registers(regs) => Some(regs.clone()),
            Source::Staged { .. } => Some(self.get(a, &a_layout)?),
        };
        // bf16 is held in f32 registers; the instruction takes bf16.
        let a_regs = a_regs.map(|regs| if at.dtype == DType::BF16 { regs.iter().map(|&v| self.narrow_bf16(v)).collect::<Vec<_>>() } else { regs });
        let warps_m = mma.warps[0] as usize;
        // This warpgroup's first row: 64 per warpgroup.
        let warp_id = self.warp_id.expect("thread ids are emitted first");
        let two = self.c_i32(2);
        let group = self.e.binary(BinaryOp::Shr, DType::I32, warp_id, two);
        let rows = self.c_i32(64);
        let group_row = self.e.binary(BinaryOp::Mul, DType::I32, group, rows);
        let (reps_m, _, steps_k) = mma.steps(m, n, k);
        let per_rep = accregs.len() / reps_m;
        let ring = |s: &Source<E::V>| match s {
            Source::Ring(r) => Some(r.clone()),
            _ => None,
        };
        let (a_ring, b_ring) = (ring(&sources[0]), ring(&sources[1]).expect("dot_wgmma reads b from a ring"));
        self.e.wgmma_fence();
        for ki in 0..steps_k {
            let k0 = ki * Mma::K as usize;
            // `b` is [k, n]: stored as is (N contiguous) or transposed (K contiguous).
            let b_desc = if b_ring.transposed {
                let off = (k0 / 64 * b_ring.swizzle.panel + k0 % 64) as i64;
                SharedMatrix { start: self.offset(b_ring.slot_base, off), k_major: true, lbo: 16, sbo: 1024 }
            } else {
                let off = (k0 * 64) as i64;
                let lbo = (b_ring.swizzle.panel * 2) as u32;
                SharedMatrix { start: self.offset(b_ring.slot_base, off), k_major: false, lbo, sbo: 1024 }
            };
            for mi in 0..reps_m {
                let frag_a = mma.fragment(&at.shape, Some(0), mi, ki);
                let a_op = match (&a_regs, &a_ring) {
                    (Some(regs), _) => WgmmaA::Registers(&regs[frag_a]),
                    (None, Some(ar)) => {
                        // Row `16 warps_m mi + 64 group` of the ring, K chunk k0.
                        let row0 = self.offset(group_row, (16 * warps_m * mi) as i64);
                        let pitch = self.c_i32(64);
                        let row_off = self.e.binary(BinaryOp::Mul, DType::I32, row0, pitch);
                        let base = self.offset(ar.slot_base, (k0 / 64 * ar.swizzle.panel + k0 % 64) as i64);
                        let start = self.e.binary(BinaryOp::Add, DType::I32, base, row_off);
                        WgmmaA::Shared(SharedMatrix { start, k_major: true, lbo: 16, sbo: 1024 })
                    }
                    (None, None) => unreachable!("an `a` from registers or a ring"),
                };
                let range = mi * per_rep..(mi + 1) * per_rep;
                let d = self.e.wgmma(instr, n as u32, a_op, b_desc, &accregs[range.clone()]).ok_or_else(|| LowerError::Unsupported {
                    op: "dot".into(),
                    loc: inst.loc.clone(),
                    what: format!("the backend has no {instr:?} instruction the target lists"),
                })?;
                accregs.splice(range, d);
            }
        }
        let accregs = if self.pipelines.values().any(|p| p.deferred.contains(&r)) {
            // The previous iteration's instructions are done (their ring slot may be
            // refilled); this iteration's run on into the next.
            self.e.wgmma_wait(1, &[]);
            accregs
        } else {
            self.e.wgmma_wait(0, &accregs)
        };
        self.wgmma_dots.push(r.index());
        let out = accregs.into_iter().map(|v| self.cast(DType::F32, accd, v)).collect();
        self.set_data(r, acc_layout, out);
        Ok(())
    }

    /// After a loop whose warpgroup dots were left in flight ([`Pipeline::deferred`]): waits
    /// for the last iteration's and rebinds the loop's results for those accumulators to the
    /// wait's.
    fn wait_deferred(&mut self, pipe: &Pipeline, body: &'a Block, inst: &'a Inst) -> R<()> {
        let Some(Inst { op: Op::Yield { values }, .. }) = body.insts.last() else { return Ok(()) };
        let mut held = Vec::new();
        for (j, y) in values.iter().enumerate() {
            if pipe.deferred.contains(y) {
                let r = inst.results[j];
                let (layout, regs) = self.data.get(&r).cloned().ok_or_else(|| LowerError::Unsupported {
                    op: "dot".into(),
                    loc: inst.loc.clone(),
                    what: "a loop result in flight that is not held in registers".into(),
                })?;
                held.push((r, layout, regs));
            }
        }
        let all: Vec<E::V> = held.iter().flat_map(|(_, _, regs)| regs.iter().copied()).collect();
        let mut done = self.e.wgmma_wait(0, &all).into_iter();
        for (r, layout, regs) in held {
            let regs: Vec<E::V> = done.by_ref().take(regs.len()).collect();
            self.set_data(r, layout, regs);
        }
        Ok(())
    }

    /// Before a pipelined loop: places its rings below a raised floor (returning each load's
    /// ring base and the floors to restore afterwards) and issues the copies of its first
    /// `num_stages - 1` iterations, one group each.
    fn pipe_prologue(
        &mut self,
        pipe: &Pipeline,
        body: &'a Block,
        iv_dtype: DType,
        lo: E::V,
        hi: E::V,
        st: E::V,
    ) -> R<(Vec<usize>, HashMap<DType, u32>)> {
        let s = self.num_stages as usize;
        let saved = self.floors.clone();
        let mut bases = Vec::with_capacity(pipe.loads.len() + 1);
        for l in &pipe.loads {
            let f = self.floors.entry(l.dtype).or_insert(0);
            if l.swizzle.panel > 0 {
                // The swizzle is on absolute addresses: each buffer starts 1024-byte aligned
                // (the array is).
                *f = f.next_multiple_of(1024 / smem_elem_bytes(l.dtype) as u32);
            }
            bases.push(*f as usize);
            *f += (s * l.numel()) as u32;
        }
        for l in &pipe.loads {
            self.reserve(l.dtype, 0);
        }
        if pipe.tensor.is_some() {
            // One barrier per slot (8-byte words above the i64 floor), after the rings' bases.
            let f = self.floors.entry(DType::I64).or_insert(0);
            bases.push(*f as usize);
            *f += s as u32;
            self.reserve(DType::I64, 0);
            let first = self.first_thread();
            let base = bases[pipe.loads.len()] as i64;
            self.only_if(Some(first), |me| {
                for j in 0..s as i64 {
                    let b = me.c_i32(base + j);
                    me.e.mbarrier_init(b);
                }
                me.e.mbarrier_init_fence();
            });
            // What the threads read or wrote of this memory through the generic proxy comes
            // before the copies' writes through the asynchronous one.
            self.e.fence_async_shared();
        }
        // Memory now under the rings may still be read by an earlier use in other threads.
        self.e.barrier();
        let mut ivj = lo;
        for j in 0..s - 1 - pipe.lag() as usize {
            if j > 0 {
                ivj = self.e.binary(BinaryOp::Add, iv_dtype, ivj, st);
            }
            let in_range = self.e.cmp(CmpPred::Lt, iv_dtype, ivj, hi);
            let slot = self.c_i32(j as i64);
            self.pipe_issue(pipe, body, &bases, ivj, in_range, slot, None)?;
            if pipe.tensor.is_none() {
                self.e.async_commit();
            }
        }
        Ok((bases, saved))
    }

    /// At the top of a pipelined loop's body: waits for this iteration's tiles, issues the
    /// copies of iteration `iv + (num_stages - 1) step` into the slot the previous iteration
    /// finished reading, and points the `dot`s at this iteration's slot. Returns the next
    /// iteration's (read, write) slots.
    #[allow(clippy::too_many_arguments)]
    fn pipe_step(
        &mut self,
        pipe: &Pipeline,
        body: &'a Block,
        bases: &[usize],
        iv_dtype: DType,
        iv: E::V,
        hi: E::V,
        st: E::V,
        read: E::V,
        write: E::V,
        addresses: Option<&CopyAddresses<E::V>>,
        phase: Option<E::V>,
    ) -> R<NextSlots<E::V>> {
        let s = self.num_stages;
        let ahead = s - 1 - pipe.lag();
        if let (Some(_), Some(phase)) = (&pipe.tensor, phase) {
            // This iteration's boxes have landed: their slot's barrier finished the phase.
            let bar = self.offset(read, bases[pipe.loads.len()] as i64);
            self.e.mbarrier_wait(bar, phase);
        } else {
            // Groups committed so far: ahead + i; this iteration's is the (i + 1)-th.
            self.e.async_wait(ahead - 1);
            if pipe.loads.iter().any(|l| l.swizzle.panel > 0) {
                // The copies are written through the generic proxy; warpgroup matrix instructions
                // read through the async one.
                self.e.fence_async_shared();
            }
        }
        // Everyone's copies are visible, and everyone is done with the slot written next.
        self.e.barrier();
        let ahead = self.e.constant(iv_dtype, Scalar::Int(ahead as i64));
        let jump = self.e.binary(BinaryOp::Mul, iv_dtype, st, ahead);
        let later = self.e.binary(BinaryOp::Add, iv_dtype, iv, jump);
        // Past the end, or wrapped past the dtype's range: nothing to copy.
        let below = self.e.cmp(CmpPred::Lt, iv_dtype, later, hi);
        let forward = self.e.cmp(CmpPred::Gt, iv_dtype, later, iv);
        let in_range = self.e.binary(BinaryOp::And, DType::I1, below, forward);
        self.pipe_issue(pipe, body, bases, later, in_range, write, addresses.map(|a| a.at.as_slice()))?;
        if pipe.tensor.is_none() {
            self.e.async_commit();
        }
        let next_addresses = match addresses {
            Some(a) => a.at.iter().zip(&a.steps).map(|(&x, &d)| self.e.binary(BinaryOp::Add, DType::I64, x, d)).collect(),
            None => Vec::new(),
        };
        for (l, &base) in pipe.loads.iter().zip(bases) {
            let n = self.c_i32(l.numel() as i64);
            let off = self.e.binary(BinaryOp::Mul, DType::I32, read, n);
            let slot_base = self.offset(off, base as i64);
            self.rings.insert(l.result, Ring { dtype: l.dtype, swizzle: l.swizzle, transposed: l.transposed, slot_base });
        }
        let advance = |me: &mut Self, x: E::V| {
            let one = me.offset(x, 1);
            let last = me.c_i32(s as i64);
            let wrap = me.e.cmp(CmpPred::Eq, DType::I32, one, last);
            let zero = me.c_i32(0);
            me.e.select(DType::I32, wrap, zero, one)
        };
        // A slot's barrier finishes one phase per fill: the parity flips as the reads wrap.
        let next_phase = phase.map(|phase| {
            let one = self.offset(read, 1);
            let last = self.c_i32(s as i64);
            let wrap = self.e.cmp(CmpPred::Eq, DType::I32, one, last);
            let flip = self.c_i32(1);
            let flipped = self.e.binary(BinaryOp::Xor, DType::I32, phase, flip);
            self.e.select(DType::I32, wrap, flipped, phase)
        });
        Ok(NextSlots { read: advance(self, read), write: advance(self, write), addresses: next_addresses, phase: next_phase })
    }

    /// Runs `f` with the address slice `slice` (instructions of the loop body `body`) evaluated
    /// at induction variable `iv`, in a scope of its own: what the slice and `extra` define is
    /// set aside first and restored after, so the iteration being lowered keeps its own values.
    fn at_iteration<T>(&mut self, body: &'a Block, slice: &[usize], extra: &[Value], iv: E::V, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        let mut defined: Vec<Value> = vec![body.args[0]];
        for &i in slice {
            defined.extend(body.insts[i].results.iter().copied());
        }
        defined.extend_from_slice(extra);
        // Each value, with what it held before (scalar or per-thread data).
        type Saved<V> = (Value, Option<V>, Option<(Layout, Vec<V>)>);
        let saved: Vec<Saved<E::V>> = defined.iter().map(|&v| (v, self.scalars.remove(&v), self.data.remove(&v))).collect();
        self.push_scope();
        self.scalars.insert(body.args[0], iv);
        let out = slice.iter().try_for_each(|&i| self.inst(&body.insts[i])).and_then(|()| f(self));
        self.pop_scope();
        for (v, sc, d) in saved {
            self.scalars.remove(&v);
            self.data.remove(&v);
            if let Some(x) = sc {
                self.scalars.insert(v, x);
            }
            if let Some(x) = d {
                self.data.insert(v, x);
            }
        }
        out
    }

    /// Loads the tiles of a loop's prefetched loads for the iteration whose induction variable
    /// is `iv`: evaluates their address slices at `iv` (the values they define are set aside
    /// and restored) and loads each tile in the layout its load takes; with `guard`, only where
    /// it holds (zeros otherwise: before a loop that may run no iteration, nothing is read).
    fn prefetch_tiles(&mut self, loads: &[Prefetch], body: &'a Block, iv: E::V, guard: Option<E::V>) -> R<Vec<(Layout, Vec<E::V>)>> {
        let mut slice: Vec<usize> = loads.iter().flat_map(|l| l.slice.iter().copied()).collect();
        slice.sort_unstable();
        slice.dedup();
        let extra: Vec<Value> = loads.iter().map(|l| l.load).collect();
        self.at_iteration(body, &slice, &extra, iv, |me| me.prefetch_loads(loads, body, guard))
    }

    /// The loads of [`Lowerer::prefetch_tiles`], with the address slice evaluated.
    fn prefetch_loads(&mut self, loads: &[Prefetch], body: &'a Block, guard: Option<E::V>) -> R<Vec<(Layout, Vec<E::V>)>> {
        let mut out = Vec::with_capacity(loads.len());
        for l in loads {
            let li = body.insts.iter().find(|x| x.results.first() == Some(&l.load)).ok_or_else(|| LowerError::Unsupported {
                op: "load".into(),
                loc: Loc::default(),
                what: "a prefetched load outside its loop's body".into(),
            })?;
            let Op::Load { buffer, offsets, mask, other } = &li.op else { continue };
            match guard {
                None => self.load(li, *buffer, *offsets, *mask, *other)?,
                Some(g) => {
                    let t = self.ty(l.load).clone();
                    let layout = match self.preferred.get(&l.load) {
                        Some(p) => p.clone(),
                        None => self.access_layout(*offsets, None, t.dtype),
                    };
                    let n = self.dist(&layout, &t.shape).num_regs();
                    let rd = reg_dtype(t.dtype);
                    self.e.begin_if(g, &vec![rd; n]);
                    self.push_scope();
                    self.load(li, *buffer, *offsets, *mask, *other)?;
                    let (home, regs) = self.data.remove(&l.load).unwrap_or((layout.clone(), Vec::new()));
                    let regs = if home == layout { regs } else { self.convert(&t.shape, t.dtype, &home, &regs, &layout)? };
                    self.pop_scope();
                    self.e.begin_else(&regs);
                    let z = self.zero(t.dtype);
                    let regs = self.e.end_if(&vec![z; n]);
                    self.set_data(l.load, layout, regs);
                }
            }
            let tile = self.data.remove(&l.load).ok_or_else(|| LowerError::Unsupported {
                op: "load".into(),
                loc: li.loc.clone(),
                what: "a prefetched load that gave no tile".into(),
            })?;
            out.push(tile);
            self.prefetched.push(l.load.index());
        }
        Ok(out)
    }

    /// Issues the asynchronous copies of a pipelined loop's loads for the iteration whose
    /// induction variable is `iv`, into ring slot `slot`: evaluates the loop's address slice
    /// at `iv` (the values it defines are set aside and restored), then copies 16 bytes per
    /// thread and vector, zero-filled where the mask or `in_range` is false.
    #[allow(clippy::too_many_arguments)]
    fn pipe_issue(
        &mut self,
        pipe: &Pipeline,
        body: &'a Block,
        bases: &[usize],
        iv: E::V,
        in_range: E::V,
        slot: E::V,
        addresses: Option<&[E::V]>,
    ) -> R<()> {
        if let Some(tp) = &pipe.tensor {
            // One thread copies every tile of the iteration.
            let first = self.first_thread();
            let go = self.e.binary(BinaryOp::And, DType::I1, first, in_range);
            self.e.begin_if(go, &[]);
            let done = self.at_iteration(body, &tp.slice, &[], iv, |me| me.tensor_copies(pipe, tp, bases, slot));
            self.e.begin_else(&[]);
            self.e.end_if(&[]);
            return done;
        }
        let masks: Vec<Option<(Vec<Value>, Vec<Value>)>> = pipe.loads.iter().map(|l| l.mask.map(|m| mask_conjuncts(body, &pipe.slice, m))).collect();
        self.at_iteration(body, &pipe.slice, &[], iv, |me| me.pipe_copies(pipe, bases, in_range, slot, addresses, &masks))
    }

    /// The tensor copies of [`Lowerer::pipe_issue`] into ring slot `slot`, with the origins'
    /// slice evaluated: the slot's barrier expects every box's bytes, then each load's tile
    /// is copied one 64-column panel at a time.
    fn tensor_copies(&mut self, pipe: &Pipeline, tp: &TensorPipe, bases: &[usize], slot: E::V) -> R<()> {
        let bar = self.offset(slot, bases[pipe.loads.len()] as i64);
        let bytes: usize = pipe.loads.iter().map(|l| l.numel() * smem_elem_bytes(l.dtype) as usize).sum();
        self.e.mbarrier_expect(bar, bytes as u32);
        for ((l, &base), (map, origin)) in pipe.loads.iter().zip(bases).zip(&tp.loads) {
            let col = self.poly_value(&origin[0])?;
            let row = self.poly_value(&origin[1])?;
            let n = self.c_i32(l.numel() as i64);
            let off = self.e.binary(BinaryOp::Mul, DType::I32, slot, n);
            let slot_base = self.offset(off, base as i64);
            let cols = if l.transposed { l.shape[0] } else { l.shape[1] };
            for p in 0..cols / 64 {
                let dst = self.offset(slot_base, (p * l.swizzle.panel) as i64);
                let c = self.offset(col, (p * 64) as i64);
                self.e.tensor_copy(*map, l.dtype, dst, [c, row], bar);
            }
        }
        Ok(())
    }

    /// The value of an i32 polynomial in the program's scalars ([`crate::gpu::tma`]).
    fn poly_value(&mut self, p: &Poly) -> R<E::V> {
        let mut sum: Option<E::V> = None;
        for (c, values) in p.terms() {
            let mut term: Option<E::V> = None;
            for v in values {
                let x = *self.scalars.get(&v).ok_or_else(|| LowerError::Unsupported {
                    op: "load".into(),
                    loc: Loc::default(),
                    what: format!("a tensor copy's origin needs scalar %{} where it is not defined", v.index()),
                })?;
                term = Some(match term {
                    Some(t) => self.e.binary(BinaryOp::Mul, DType::I32, t, x),
                    None => x,
                });
            }
            let term = match (term, c) {
                (Some(t), 1) => t,
                (Some(t), c) => {
                    let k = self.c_i32(c);
                    self.e.binary(BinaryOp::Mul, DType::I32, t, k)
                }
                (None, c) => self.c_i32(c),
            };
            sum = Some(match sum {
                Some(s) => self.e.binary(BinaryOp::Add, DType::I32, s, term),
                None => term,
            });
        }
        Ok(sum.unwrap_or_else(|| self.c_i32(0)))
    }

    /// The copies of a pipelined loop's load `l`: its copy layout, the layout applied to its
    /// tile, and the first register of each 16-byte copy a thread issues.
    fn pipe_copy_groups(&self, l: &PipeLoad) -> (Layout, Dist, Vec<usize>) {
        let layout = pipe_copy_layout(l, self.warp, self.num_warps);
        let along = if l.transposed { 0 } else { 1 };
        let dist = self.dist(&layout, &l.shape);
        let firsts = Self::vector_groups_along(&dist, l.vec(), along).into_iter().map(|(first, _)| first).collect();
        (layout, dist, firsts)
    }

    /// Where every load of a pipelined loop has offsets affine in the induction variable
    /// ([`affine_in_iv`]), every dot of the loop reads both operands from its rings and the
    /// target is not SPIR-V (which has no asynchronous copies): per copy (in
    /// [`Lowerer::pipe_copies`]' order) its source address for the loop's first issue
    /// (iteration `lo + ahead step`) and the step between iterations, the difference of the
    /// offsets of two consecutive iterations. The loop then carries the addresses and adds the
    /// steps, as Triton's loops advance their pointers, instead of computing every copy's
    /// address from its offset in each iteration. In wrapping i32 arithmetic the offsets of an
    /// affine slice are exactly the first plus a multiple of the difference, so the addresses
    /// agree wherever the offsets stay in the i32 range, which every copy that reads does
    /// (its offset is inside its buffer).
    fn pipe_addresses(&mut self, pipe: &Pipeline, body: &'a Block, iv_dtype: DType, lo: E::V, st: E::V) -> R<Option<CopyAddresses<E::V>>> {
        // Only where every dot of the loop reads both operands from its rings: a carried
        // address takes two registers where a computed one takes none between iterations, and
        // a dot with an operand held in registers (attention's queries) leaves no room for them
        // (its configurations spilled on sm_80 and sm_90).
        let from_rings = |v: &Value| pipe.loads.iter().any(|l| l.result == *v);
        let dots: Vec<&Inst> = body.insts.iter().filter(|i| matches!(i.op, Op::Dot { .. })).collect();
        if dots.is_empty() || !dots.iter().all(|i| matches!(&i.op, Op::Dot { a, b, .. } if from_rings(a) && from_rings(b))) {
            return Ok(None);
        }
        let mut uniform = Vec::with_capacity(pipe.loads.len());
        for l in &pipe.loads {
            match affine_in_iv(self.p, body, &pipe.slice, l.offsets) {
                Some(u) if self.ty(l.offsets).dtype == DType::I32 && self.target.isa != Isa::SpirV => uniform.push(u),
                _ => return Ok(None),
            }
        }
        let ahead = self.e.constant(iv_dtype, Scalar::Int((self.num_stages - 1 - pipe.lag()) as i64));
        let jump = self.e.binary(BinaryOp::Mul, iv_dtype, st, ahead);
        let first = self.e.binary(BinaryOp::Add, iv_dtype, lo, jump);
        let second = self.e.binary(BinaryOp::Add, iv_dtype, first, st);
        let offsets_at = |me: &mut Self, iv: E::V| -> R<Vec<Vec<E::V>>> {
            me.at_iteration(body, &pipe.slice, &[], iv, |me| {
                pipe.loads
                    .iter()
                    .map(|l| {
                        let (layout, _, firsts) = me.pipe_copy_groups(l);
                        let offs = me.get(l.offsets, &layout)?;
                        Ok(firsts.iter().map(|&f| offs[f]).collect())
                    })
                    .collect()
            })
        };
        let at_first = offsets_at(self, first)?;
        let at_second = offsets_at(self, second)?;
        let (mut addresses, mut steps) = (Vec::new(), Vec::new());
        for (((l, a), b), uniform) in pipe.loads.iter().zip(at_first).zip(at_second).zip(uniform) {
            self.stepped.insert(l.result);
            let mut shared_step = None;
            for (x, y) in a.into_iter().zip(b) {
                addresses.push(self.e.global_address(l.buffer, l.dtype, x, DType::I32));
                let step = match shared_step {
                    Some(step) => step,
                    None => {
                        let d = self.e.binary(BinaryOp::Sub, DType::I32, y, x);
                        self.e.address_step(l.dtype, d)
                    }
                };
                if uniform {
                    shared_step = Some(step);
                }
                steps.push(step);
            }
        }
        Ok(Some(CopyAddresses { at: addresses, steps }))
    }

    /// The copies of [`Lowerer::pipe_issue`], with the address slice evaluated.
    /// With `addresses` (from [`Lowerer::pipe_addresses`]), each copy reads from its address
    /// and the offsets are not computed.
    /// `masks` are each load's mask split into the terms of its conjunction that change
    /// between iterations and those that do not ([`mask_conjuncts`]): the predicate of a copy
    /// is `in_range` and the changing terms, then the others, so that what selects the copy's
    /// size from the terms that do not change is computed once, outside the loop.
    #[allow(clippy::too_many_arguments)]
    fn pipe_copies(
        &mut self,
        pipe: &Pipeline,
        bases: &[usize],
        in_range: E::V,
        slot: E::V,
        addresses: Option<&[E::V]>,
        masks: &[Option<(Vec<Value>, Vec<Value>)>],
    ) -> R<()> {
        let mut k = 0;
        for ((l, &base), terms) in pipe.loads.iter().zip(bases).zip(masks) {
            let (layout, dist, firsts) = self.pipe_copy_groups(l);
            let along = if l.transposed { 0 } else { 1 };
            let idx_dtype = self.ty(l.offsets).dtype;
            let offs = if addresses.is_none() { Some(self.get(l.offsets, &layout)?) } else { None };
            let mut term_regs = |vs: &[Value]| -> R<Vec<Vec<E::V>>> { vs.iter().map(|&v| self.get(v, &layout)).collect() };
            let (varying, fixed) = match terms {
                Some((varying, fixed)) => (term_regs(varying)?, term_regs(fixed)?),
                None => (Vec::new(), Vec::new()),
            };
            let c = self.coords_of(&dist, &firsts);
            let n = self.c_i32(l.numel() as i64);
            let off = self.e.binary(BinaryOp::Mul, DType::I32, slot, n);
            let slot_base = self.offset(off, base as i64);
            // With addresses, the slot's address once and each copy's place in it (the same
            // in every iteration) added: one addition per copy.
            let slot_address = addresses.map(|_| self.e.shared_address(l.dtype, slot_base));
            for (first, at) in firsts.into_iter().zip(&c.coords) {
                let mut pred = in_range;
                for t in varying.iter().chain(&fixed) {
                    pred = self.e.binary(BinaryOp::And, DType::I1, pred, t[first]);
                }
                let (r, col) = (at[along ^ 1], at[along]);
                let at = l.swizzle.index(self, r, col);
                match (addresses, slot_address, &offs) {
                    (Some(a), Some(slot_address), _) => {
                        let step = self.e.shared_step(l.dtype, at);
                        let dst = self.e.binary(BinaryOp::Add, DType::I32, slot_address, step);
                        self.e.async_copy_from(l.buffer, l.dtype, a[k], dst, l.vec(), pred);
                    }
                    (_, _, Some(o)) => {
                        let at = self.e.binary(BinaryOp::Add, DType::I32, at, slot_base);
                        self.e.async_copy(l.buffer, l.dtype, o[first], idx_dtype, at, l.vec(), pred);
                    }
                    _ => unreachable!("offsets are computed where no addresses are given"),
                }
                k += 1;
            }
        }
        Ok(())
    }

    /// This lane's parts of the matrix-load row addresses of a dot's operands: `a` row
    /// `warp_m * 16 + l % 16` and column `w (l / 16)`; `b` row (k) `l % 16` and column
    /// `warp_n * 8 + (l / 16) * 8 wn`; `w` the elements of a 16-byte matrix row (8, or 4 of
    /// tf32, whose `a` then takes k halves of 4).
    fn matrix_lanes(&mut self, mma: Mma, transposed_b: bool, w: u32) -> MatrixLanes<E::V> {
        let [wm, wn] = mma.warps;
        let lane = self.lane.expect("thread ids are emitted first");
        let warp_id = self.warp_id.expect("thread ids are emitted first");
        let c15 = self.c_i32(15);
        let l15 = self.e.binary(BinaryOp::And, DType::I32, lane, c15);
        let c4 = self.c_i32(4);
        let hi = self.e.binary(BinaryOp::Shr, DType::I32, lane, c4);
        let warp_part = |me: &mut Self, shift: u32, count: u32| -> E::V {
            let sh = me.c_i32(shift as i64);
            let x = me.e.binary(BinaryOp::Shr, DType::I32, warp_id, sh);
            let mask = me.c_i32(count as i64 - 1);
            me.e.binary(BinaryOp::And, DType::I32, x, mask)
        };
        let warp_m = warp_part(self, 0, wm);
        let warp_n = warp_part(self, wm.trailing_zeros(), wn);
        let sixteen = self.c_i32(16);
        let a_row = self.e.binary(BinaryOp::Mul, DType::I32, warp_m, sixteen);
        let a_row = self.e.binary(BinaryOp::Add, DType::I32, a_row, l15);
        let eight = self.c_i32(8);
        let wv = if w == 8 { eight } else { self.c_i32(w as i64) };
        let a_col = self.e.binary(BinaryOp::Mul, DType::I32, hi, wv);
        let b_col = self.e.binary(BinaryOp::Mul, DType::I32, warp_n, eight);
        let step = self.c_i32(8 * wn as i64);
        let b_hi = self.e.binary(BinaryOp::Mul, DType::I32, hi, step);
        let b_col = self.e.binary(BinaryOp::Add, DType::I32, b_col, b_hi);
        let bt = transposed_b.then(|| {
            let c7 = self.c_i32(7);
            let l7 = self.e.binary(BinaryOp::And, DType::I32, lane, c7);
            let n = self.e.binary(BinaryOp::Mul, DType::I32, warp_n, eight);
            let n = self.e.binary(BinaryOp::Add, DType::I32, n, l7);
            let n = self.e.binary(BinaryOp::Add, DType::I32, n, b_hi);
            let c3 = self.c_i32(3);
            let half = self.e.binary(BinaryOp::Shr, DType::I32, lane, c3);
            let one = self.c_i32(1);
            let half = self.e.binary(BinaryOp::And, DType::I32, half, one);
            let k = self.e.binary(BinaryOp::Mul, DType::I32, half, wv);
            (n, k)
        });
        MatrixLanes { l15, a_row, a_col, b_col, bt }
    }

    /// The registers of `v` in `layout` if they exist already (its home, or a conversion
    /// memoized in scope), without emitting anything.
    fn held(&self, v: Value, layout: &Layout) -> Option<Vec<E::V>> {
        match self.data.get(&v) {
            Some((home, regs)) if home == layout => Some(regs.clone()),
            _ => self.memo.get(&(v, layout.clone())).map(|m| m.regs.clone()),
        }
    }

    /// Converts the operands of the matrix `dot`s in `body` (and blocks nested in it) that are
    /// already computed outside it to their fragment layouts now, at this depth, so the
    /// conversion is memoized for every iteration.
    fn hoist_operands(&mut self, body: &'a Block) -> R<()> {
        let mut wanted: Vec<(Value, Layout)> = Vec::new();
        walk_block(body, &mut |inst| {
            if let Op::Dot { a, b, .. } = &inst.op {
                if let Some(&(_, mma)) = self.mma.get(&inst.results[0]) {
                    for (operand, v) in [(0u8, *a), (1, *b)] {
                        if self.data.contains_key(&v) {
                            wanted.push((v, Layout::DotOperand { operand, parent: mma }));
                        }
                    }
                }
            }
        });
        for (v, l) in wanted {
            self.get(v, &l)?;
        }
        Ok(())
    }

    /// This thread's part of its coordinate along `d` of `dist`: the sum of the dimension's
    /// thread terms (0 without any). A register's coordinate adds its static part unless the
    /// dimension wraps.
    fn thread_coord(&mut self, dist: &Dist, d: usize) -> E::V {
        let mut acc: Option<E::V> = None;
        for t in dist.terms[d].clone() {
            let v = self.term_value(&t);
            acc = Some(match acc {
                None => v,
                Some(a) => self.e.binary(BinaryOp::Add, DType::I32, a, v),
            });
        }
        acc.unwrap_or_else(|| self.c_i32(0))
    }

    /// `base + off`, or `base` itself for 0.
    fn offset(&mut self, base: E::V, off: i64) -> E::V {
        if off == 0 {
            base
        } else {
            let o = self.c_i32(off);
            self.e.binary(BinaryOp::Add, DType::I32, base, o)
        }
    }

    /// `k0 <= k < k0 + kc`.
    fn in_chunk(&mut self, k: E::V, k0: u32, kc: usize) -> E::V {
        let lo = self.c_i32(k0 as i64);
        let hi = self.c_i32(k0 as i64 + kc as i64);
        let a = self.e.cmp(CmpPred::Ge, DType::I32, k, lo);
        let b = self.e.cmp(CmpPred::Lt, DType::I32, k, hi);
        self.e.binary(BinaryOp::And, DType::I1, a, b)
    }

    fn store_shared_if(&mut self, pred: Option<E::V>, dtype: DType, index: E::V, value: E::V) {
        self.only_if(pred, |me| me.st_sh(dtype, index, value));
    }

    /// `f`'s code, under `if pred` where there is one.
    fn only_if(&mut self, pred: Option<E::V>, f: impl FnOnce(&mut Self)) {
        match pred {
            None => f(self),
            Some(p) => {
                self.e.begin_if(p, &[]);
                f(self);
                self.e.begin_else(&[]);
                self.e.end_if(&[]);
            }
        }
    }
}

/// Whether `body`'s only `dot`, nested blocks included, is one of its own instructions and
/// lowers to cooperative matrices.
fn single_coop_dot(body: &Block, coop: &HashMap<Value, (MatrixInstr, Coop)>) -> bool {
    let mut dots = 0;
    walk_block(body, &mut |i| dots += usize::from(matches!(i.op, Op::Dot { .. })));
    dots == 1 && body.insts.iter().any(|i| matches!(i.op, Op::Dot { .. }) && coop.contains_key(&i.results[0]))
}

/// Whether every register of `dist` (rank 2) is one of a run of `vec` that a thread can store
/// with one 16-byte store into a copy of the tile stored in rows along dimension `along`:
/// registers `j .. j + vec` (`j` a multiple of `vec`) agree in the other dimension and take
/// consecutive coordinates along `along` from a multiple of `vec`, and every thread-dependent
/// part of that coordinate is a multiple of `vec` too.
fn stores_in_vectors(dist: &Dist, vec: usize, along: usize) -> bool {
    let other = 1 - along;
    dist.regs.len() % vec == 0
        && !dist.wrap[along]
        && dist.terms[along].iter().all(|t| t.mult as usize % vec == 0)
        && dist.regs.chunks(vec).all(|run| {
            run[0][along] as usize % vec == 0
                && run.iter().enumerate().all(|(i, r)| r[other] == run[0][other] && r[along] as usize == run[0][along] as usize + i)
        })
}

/// The registers of `dist` in row-major order of their static coordinates, and the widest run
/// `w` (a power of two, at most `max`) that every `w` consecutive of them form: the same
/// coordinates but along the last dimension, where they are consecutive from a multiple of `w`,
/// with every thread-dependent part of that coordinate a multiple of `w` too. One thread can
/// then move each run with one vector access.
fn vector_runs(dist: &Dist, max: usize) -> (Vec<usize>, usize) {
    let mut perm: Vec<usize> = (0..dist.num_regs()).collect();
    perm.sort_by(|&a, &b| dist.regs[a].cmp(&dist.regs[b]));
    let Some(last) = dist.shape.len().checked_sub(1) else { return (perm, 1) };
    if dist.wrap[last] {
        return (perm, 1);
    }
    let mut w = max.max(1).next_power_of_two();
    while w > 1 {
        let ok = perm.len() % w == 0
            && dist.terms[last].iter().all(|t| t.mult as usize % w == 0)
            && perm.chunks(w).all(|run| {
                let first = &dist.regs[run[0]];
                first[last] as usize % w == 0
                    && run.iter().enumerate().all(|(j, &r)| {
                        let c = &dist.regs[r];
                        c[last] as usize == first[last] as usize + j && (0..last).all(|d| c[d] == first[d])
                    })
            });
        if ok {
            break;
        }
        w /= 2;
    }
    (perm, w)
}

/// Whether `v` is, element by element, an affine function of the induction variable of the
/// loop whose body is `body`, with a coefficient that does not change between iterations, in
/// wrapping integer arithmetic: built from the induction variable and values that do not depend
/// on it (defined outside the loop, or computed in `slice` from such values) by additions,
/// subtractions, multiplications and left shifts by values that do not depend on it, and
/// shape operations. `slice` (indices into `body.insts`) holds the instructions computing
/// `v`, pure functions of the induction variable and values from outside ([`Pipeline::slice`]).
/// `Some(true)` where the coefficient is moreover the same for every element (the induction
/// variable times scalars), so that one step serves the whole tile.
fn affine_in_iv(program: &Program, body: &Block, slice: &[usize], v: Value) -> Option<bool> {
    let defs = slice_defs(body, slice);
    let iv = body.args[0];
    struct Walk<'d, 'o> {
        defs: &'d HashMap<Value, &'o Op>,
        program: &'d Program,
        iv: Value,
        varies: HashMap<Value, bool>,
        affine: HashMap<Value, Option<bool>>,
    }
    impl Walk<'_, '_> {
        fn varies(&mut self, v: Value) -> bool {
            depends_on_iv(v, self.iv, self.defs, &mut self.varies)
        }
        /// The same value in every element: a scalar, or one spread over a tile.
        fn uniform(&self, v: Value) -> bool {
            if self.program.ty(v).is_scalar() {
                return true;
            }
            match self.defs.get(&v) {
                Some(Op::Splat { .. } | Op::Const { .. }) => true,
                Some(Op::Broadcast { x } | Op::ExpandDims { x, .. } | Op::Reshape { x } | Op::Trans { x, .. }) => self.uniform(*x),
                _ => false,
            }
        }
        /// `None`: not affine; `Some(uniform)`: affine, with a coefficient the same for every
        /// element or not.
        fn affine(&mut self, v: Value) -> Option<bool> {
            if v == self.iv || !self.varies(v) {
                return Some(true);
            }
            if let Some(&a) = self.affine.get(&v) {
                return a;
            }
            let r = match self.defs.get(&v) {
                Some(Op::Binary { op: BinaryOp::Add | BinaryOp::Sub, lhs, rhs }) => Some(self.affine(*lhs)? && self.affine(*rhs)?),
                Some(Op::Binary { op: BinaryOp::Mul | BinaryOp::Shl, lhs, rhs }) if !self.varies(*rhs) => {
                    Some(self.affine(*lhs)? && self.uniform(*rhs))
                }
                Some(Op::Binary { op: BinaryOp::Mul, lhs, rhs }) if !self.varies(*lhs) => Some(self.affine(*rhs)? && self.uniform(*lhs)),
                Some(Op::Splat { x } | Op::Broadcast { x } | Op::ExpandDims { x, .. } | Op::Reshape { x } | Op::Trans { x, .. }) => self.affine(*x),
                _ => None,
            };
            self.affine.insert(v, r);
            r
        }
    }
    Walk { defs: &defs, program, iv, varies: HashMap::new(), affine: HashMap::new() }.affine(v)
}

/// The terms of the conjunction `mask` (`a & b & ...`, through shape operations that keep
/// the conjunction's shape) split into those that depend on the induction variable of the
/// loop whose body is `body` and those that do not; `slice` as in [`affine_in_iv`].
fn mask_conjuncts(body: &Block, slice: &[usize], mask: Value) -> (Vec<Value>, Vec<Value>) {
    let defs = slice_defs(body, slice);
    let iv = body.args[0];
    let mut memo = HashMap::new();
    fn terms(v: Value, defs: &HashMap<Value, &Op>, out: &mut Vec<Value>) {
        match defs.get(&v) {
            Some(Op::Binary { op: BinaryOp::And, lhs, rhs }) => {
                terms(*lhs, defs, out);
                terms(*rhs, defs, out);
            }
            _ => out.push(v),
        }
    }
    let mut all = Vec::new();
    terms(mask, &defs, &mut all);
    all.into_iter().partition(|&t| depends_on_iv(t, iv, &defs, &mut memo))
}

/// The op defining each value that the instructions `slice` (indices into `body.insts`) define.
fn slice_defs<'b>(body: &'b Block, slice: &[usize]) -> HashMap<Value, &'b Op> {
    slice.iter().flat_map(|&i| body.insts[i].results.iter().map(move |&r| (r, &body.insts[i].op))).collect()
}

/// Whether `v` depends on the induction variable `iv` through the instructions `defs` (a
/// loop's slice: anything not in it comes from outside the loop).
fn depends_on_iv(v: Value, iv: Value, defs: &HashMap<Value, &Op>, memo: &mut HashMap<Value, bool>) -> bool {
    if v == iv {
        return true;
    }
    let Some(op) = defs.get(&v) else { return false };
    if let Some(&m) = memo.get(&v) {
        return m;
    }
    let r = op.operands().into_iter().any(|x| depends_on_iv(x, iv, defs, memo));
    memo.insert(v, r);
    r
}

/// How a dot's K chunks are staged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunking {
    /// All of K at once.
    Whole,
    /// Each register's chunk is known at compile time.
    Static,
    /// Each register checks at run time whether its K falls in the chunk.
    Dynamic,
}

/// Bytes of shared memory a dot may stage at once before it splits K into chunks.
const DOT_STAGING_BYTES: usize = 16 * 1024;

/// The K chunk a dot stages at a time: all of K when it fits in [`DOT_STAGING_BYTES`] (at 4
/// bytes an element); else the smallest power of two >= 16 for which every register's chunk is
/// known statically (its static offset along K plus the largest thread term stays inside one
/// chunk); else chunks of 16 to 64 with a run-time check per register.
fn dot_chunk(a: &Dist, a_k: usize, b: &Dist, b_k: usize, m: usize, n: usize, k: usize) -> (usize, Chunking) {
    if (m + n) * k * 4 <= DOT_STAGING_BYTES {
        return (k, Chunking::Whole);
    }
    let mut kc = 16;
    while kc < k && ((m + n) * kc * 4 <= DOT_STAGING_BYTES || kc == 16) {
        if chunk_is_static(a, a_k, kc) && chunk_is_static(b, b_k, kc) {
            return (kc, Chunking::Static);
        }
        kc *= 2;
    }
    let mut kc = 64;
    while kc > 16 && (m + n) * kc * 4 > DOT_STAGING_BYTES {
        kc /= 2;
    }
    (kc.min(k), Chunking::Dynamic)
}

/// Whether every register of `d` stays inside one `kc`-element chunk along `dim` whatever the
/// thread (its static offset plus the largest thread term), so its chunk is known statically.
fn chunk_is_static(d: &Dist, dim: usize, kc: usize) -> bool {
    let max_term = d.terms[dim].iter().map(|t| t.mask * t.mult).sum::<u32>() as usize;
    !d.wrap[dim] && d.regs.iter().all(|r| (r[dim] as usize % kc) + max_term < kc)
}

/// Calls `f` on every instruction of `b` and of the blocks nested in it.
/// The order in which loads and stores visit the registers of `dist`: row-major by element,
/// so that a thread's run along the last dimension is consecutive whatever the layout's
/// register order (a permuted layout numbers its registers along another dimension first).
/// `None` when the registers already are in that order, as in every layout with the last
/// dimension fastest.
fn row_major_registers(layout: &Layout, dist: &Dist) -> Option<Vec<usize>> {
    let last = dist.shape.len().checked_sub(1)?;
    match layout {
        Layout::Blocked(b) if b.order.first().map(|&o| o as usize) != Some(last) => {
            let mut idx: Vec<usize> = (0..dist.num_regs()).collect();
            idx.sort_by(|&a, &b| dist.regs[a].cmp(&dist.regs[b]));
            Some(idx)
        }
        _ => None,
    }
}

/// `regs` in the order `perm` visits them.
fn permute<V: Copy>(regs: Vec<V>, perm: &Option<Vec<usize>>) -> Vec<V> {
    match perm {
        Some(p) => p.iter().map(|&i| regs[i]).collect(),
        None => regs,
    }
}

/// The inverse of [`permute`].
fn unpermute<V: Copy>(regs: Vec<V>, perm: &Option<Vec<usize>>) -> Vec<V> {
    match perm {
        Some(p) => {
            let mut out = regs.clone();
            for (k, &i) in p.iter().enumerate() {
                out[i] = regs[k];
            }
            out
        }
        None => regs,
    }
}

/// `dist` with its registers in the order `perm` visits them.
fn permute_dist(mut dist: Dist, perm: &Option<Vec<usize>>) -> Dist {
    if let Some(p) = perm {
        dist.regs = p.iter().map(|&i| dist.regs[i].clone()).collect();
    }
    dist
}

/// Chooses the home of every load whose tile (directly or through elementwise ops) a store
/// writes transposed: vectors along both dimensions, as wide as the load's and the store's
/// offsets allow, so that each thread holds whole vectors of the tile and of its transpose and
/// the store takes the permuted layout ([`Lowerer::transposed_home`]) with no exchange through
/// shared memory. The usual homes, vectors along rows only, would put a column of the tile in
/// different threads, and its transpose would cross shared memory with every read of a
/// column hitting one bank.
fn plan_transposes<E: Emitter>(lw: &mut Lowerer<'_, E>) {
    let mut stores = Vec::new();
    walk_block(&lw.p.body, &mut |inst| {
        if let Op::Store { offsets, value, .. } = &inst.op {
            stores.push((*offsets, *value));
        }
    });
    for (offsets, value) in stores {
        let Op::Trans { x, perm } = &lw.def(value).op else { continue };
        let shape = lw.ty(*x).shape.clone();
        if shape.len() != 2 || perm[..] != [1, 0] {
            continue;
        }
        let along_cols = lw.vector_width(offsets, lw.ty(value).dtype).min(lw.default_vector());
        if along_cols < 2 {
            continue;
        }
        // The loads `x` is computed from, through elementwise ops.
        let mut todo = vec![*x];
        let mut loads = Vec::new();
        while let Some(v) = todo.pop() {
            let op = &lw.def(v).op;
            match op {
                Op::Load { offsets, .. } if lw.ty(v).shape == shape => loads.push((v, *offsets)),
                Op::Unary { .. } | Op::Binary { .. } | Op::Select { .. } | Op::Fma { .. } | Op::Cast { .. } => {
                    todo.extend(op.operands().into_iter().filter(|o| lw.ty(*o).shape == shape));
                }
                _ => {}
            }
        }
        for (load, offs) in loads {
            let along_rows = lw.vector_width(offs, lw.ty(load).dtype).min(lw.default_vector());
            let layout = Layout::Blocked(Blocked::with_vectors(&shape, &[along_cols, along_rows], lw.warp, lw.num_warps));
            lw.preferred.entry(load).or_insert(layout);
        }
    }
}

fn walk_block<'a>(b: &'a Block, f: &mut impl FnMut(&'a Inst)) {
    for inst in &b.insts {
        f(inst);
        for nb in inst.op.blocks() {
            walk_block(nb, f);
        }
    }
}

/// Chooses, before anything is emitted, the `dot`s that lower to a warp-level matrix
/// instruction of the target and how warps tile them, and the layout of the loop-carried
/// accumulators they update, so a `for` around such a `dot` carries its accumulator in the
/// instruction's layout rather than converting it twice per iteration.
fn plan_matrix<E: Emitter>(lw: &mut Lowerer<'_, E>) {
    let p = lw.p;
    // Dots that share a loop body with another dot (attention's QK^T then PV) put every warp
    // along M: each warp then owns whole rows, the rows of the first dot's result are the rows
    // of the second's `a`, and a loop-invariant `a` (Q) is split over warps, not copied into
    // each.
    let mut chained = std::collections::HashSet::new();
    p.walk(&mut |inst| {
        for b in inst.op.blocks() {
            let dots: Vec<Value> = b.insts.iter().filter(|i| matches!(i.op, Op::Dot { .. })).map(|i| i.results[0]).collect();
            if dots.len() > 1 {
                chained.extend(dots);
            }
        }
    });
    let mut mma = HashMap::new();
    let mut coop = HashMap::new();
    let coop_matrices = lw.e.coop_matrices();
    p.walk(&mut |inst| {
        if let Op::Dot { a, b, acc, precision } = &inst.op {
            let (at, bt, ct) = (p.ty(*a), p.ty(*b), p.ty(*acc));
            let rows_first = chained.contains(&inst.results[0]);
            let wgmma = if lw.num_stages > 1 { wgmma_choice(lw.target, lw.num_warps, at, bt, ct) } else { None };
            if let Some(choice) = wgmma.or_else(|| matrix_choice(lw.target, lw.num_warps, at, bt, ct, *precision, rows_first)) {
                mma.insert(inst.results[0], choice);
            } else if let Some(choice) =
                // Cooperative matrices take operands as they are: a tf32 dot's rounding stays
                // with the FMA `dot`.
                coop_choice(lw.target, lw.num_warps, at, bt, ct, rows_first)
                    .filter(|_| coop_matrices && *precision == InputPrecision::Ieee)
            {
                coop.insert(inst.results[0], choice);
            }
        }
    });
    // A cooperative-matrix dot keeps its result in cooperative matrices where it is a K loop's
    // f32 accumulator: the result only goes to the loop's `yield`, and the body argument that
    // carries it is only this dot's accumulator. Anywhere else its result moves into the
    // exchange map at once (an opaque matrix has no elements the lowering can name).
    let mut uses: HashMap<Value, usize> = HashMap::new();
    p.walk(&mut |inst| {
        for o in inst.op.operands() {
            *uses.entry(o).or_insert(0) += 1;
        }
    });
    let mut kept = std::collections::HashSet::new();
    let mut carried = HashMap::new();
    p.walk(&mut |inst| {
        if let Op::For { body, .. } = &inst.op {
            if let Some(Inst { op: Op::Yield { values }, .. }) = body.insts.last() {
                for (i, y) in values.iter().enumerate() {
                    let arg = body.args[i + 1];
                    if let Some(&(_, m)) = mma.get(y) {
                        carried.insert(arg, Layout::Mma(m));
                    } else if let Some(&(_, c)) = coop.get(y) {
                        let alone = body.insts.iter().any(|d| matches!(d.op, Op::Dot { acc, .. } if acc == arg && d.results[0] == *y))
                            && uses.get(y) == Some(&1)
                            && uses.get(&arg) == Some(&1)
                            && p.ty(*y).dtype == DType::F32;
                        if alone {
                            kept.insert(*y);
                            carried.insert(arg, Layout::Coop(c));
                        } else if let Some(ex) = c.exchange(lw.warp) {
                            carried.insert(arg, Layout::Mma(ex));
                        }
                    }
                }
            }
        }
    });
    let mut dots: HashMap<Value, Layout> = mma.iter().map(|(&v, &(_, m))| (v, Layout::Mma(m))).collect();
    for (&v, &(_, c)) in &coop {
        match c.exchange(lw.warp) {
            Some(_) if kept.contains(&v) => dots.insert(v, Layout::Coop(c)),
            Some(ex) => dots.insert(v, Layout::Mma(ex)),
            None => None,
        };
    }
    carry_dot_slices(p, &dots, &|shape: &[usize]| lw.default_layout(shape), &mut carried);
    lw.mma = mma;
    lw.coop = coop;
    lw.coop_kept = kept;
    lw.carried = carried;
}

/// Loop-carried values a body computes from a `dot`'s result (attention's running row maximum
/// and sum) are carried in the layout that computation gives them, a slice of the dot's (the
/// matrix instruction's accumulator, or the FMA dot's blocked layout), instead of the default
/// for their shape: carried in that, every iteration converts them through shared memory once
/// into the body's layout and once back. Inference follows the lowering's rules for the body's
/// top level (a reduction's result is a slice of its operand's home; an elementwise op computes
/// in its first data operand's home; values not derived from a `dot` in the body keep their
/// homes unknown) and is optimistic about carried values not yet placed, so a value carried
/// through its own update (`m = max(m, rowmax(s))`) can be placed. A wrong guess costs a
/// conversion at the `yield`, never a wrong value.
fn carry_dot_slices(p: &Program, dots: &HashMap<Value, Layout>, default_layout: &dyn Fn(&[usize]) -> Layout, carried: &mut HashMap<Value, Layout>) {
    let mut loops: Vec<&Block> = Vec::new();
    walk_block(&p.body, &mut |inst| {
        if let Op::For { body, .. } = &inst.op {
            loops.push(body);
        }
    });
    // Recipes and scalars have no home; everything else is data. As `Lowerer::inst` decides:
    // views (arange, splat, broadcast, expand_dims, trans) are always recipes, materialized per
    // use from their operand's home; an elementwise op is a recipe unless an operand is data.
    let mut recipe: std::collections::HashSet<Value> = std::collections::HashSet::new();
    p.walk(&mut |inst| {
        let is_recipe = match &inst.op {
            Op::Arange { .. } | Op::Splat { .. } | Op::Broadcast { .. } | Op::ExpandDims { .. } | Op::Trans { .. } => true,
            Op::Unary { .. } | Op::Binary { .. } | Op::Cmp { .. } | Op::Select { .. } | Op::Fma { .. } | Op::Cast { .. } => {
                inst.op.operands().iter().all(|o| recipe.contains(o) || p.ty(*o).is_scalar())
            }
            _ => false,
        };
        if is_recipe && inst.results.len() == 1 && !p.ty(inst.results[0]).is_scalar() {
            recipe.insert(inst.results[0]);
        }
    });
    loop {
        let mut placed = false;
        for body in &loops {
            let Some(Inst { op: Op::Yield { values }, .. }) = body.insts.last() else { continue };
            // Some(layout): derived from a dot, in that layout; None: data in some other home.
            // Carried values not placed yet are absent (optimistic).
            let mut homes: HashMap<Value, Option<Layout>> = HashMap::new();
            for a in &body.args[1..] {
                if let Some(l) = carried.get(a) {
                    homes.insert(*a, Some(l.clone()));
                }
            }
            let unplaced: std::collections::HashSet<Value> = body.args[1..].iter().filter(|a| !carried.contains_key(a)).copied().collect();
            for inst in &body.insts {
                let Some(&r) = inst.results.first() else { continue };
                if p.ty(r).is_scalar() || recipe.contains(&r) {
                    continue;
                }
                let home = match &inst.op {
                    // The FMA dot computes in its accumulator's home, or the default.
                    Op::Dot { acc, .. } => match dots.get(&r) {
                        Some(l) => Some(l.clone()),
                        None if recipe.contains(acc) => Some(default_layout(&p.ty(r).shape)),
                        None => homes.get(acc).cloned().flatten(),
                    },
                    Op::Reduce { x, axis, .. } => homes.get(x).cloned().flatten().map(|l| Layout::Slice { dim: *axis, parent: Box::new(l) }),
                    Op::Unary { .. } | Op::Binary { .. } | Op::Cmp { .. } | Op::Select { .. } | Op::Fma { .. } | Op::Cast { .. } => inst
                        .op
                        .operands()
                        .into_iter()
                        .filter(|o| !recipe.contains(o) && !p.ty(*o).is_scalar() && !unplaced.contains(o))
                        .map(|o| homes.get(&o).cloned().flatten())
                        .next()
                        .flatten(),
                    _ => None,
                };
                homes.insert(r, home);
            }
            for (i, y) in values.iter().enumerate() {
                let arg = body.args[i + 1];
                if carried.contains_key(&arg) {
                    continue;
                }
                if let Some(Some(l)) = homes.get(y) {
                    if l.rank() == p.ty(arg).shape.len() {
                        carried.insert(arg, l.clone());
                        placed = true;
                    }
                }
            }
        }
        if !placed {
            break;
        }
    }
}

/// Chooses the loops to software-pipeline and the loads they issue early (with `num_stages`
/// of at least 2 on a backend with asynchronous copies): a load in a `for` body, not nested
/// deeper, of a 2-D f16 or bf16 tile (or f32 feeding a tf32 `dot`) whose only uses are as an
/// operand of a matrix-instruction `dot` in that body on NVIDIA's fragments (the ring is read
/// with `ldmatrix` or through descriptors); whose offsets and mask are pure functions of the
/// induction variable and values from outside the loop (no division, no loads, no carried
/// values); that moves whole aligned 16-byte vectors (offset analysis: 8 contiguous, aligned
/// 16-bit elements or 4 f32; the mask constant over them), each thread its own (no copies in
/// several threads); and that fills masked-off elements with zero (no `other`, or a zero).
/// Everything else is loaded where it stands.
fn plan_pipelines<E: Emitter>(lw: &mut Lowerer<'_, E>) {
    if lw.num_stages < 2 || !lw.e.async_copies() || lw.mma.is_empty() {
        return;
    }
    let p = lw.p;
    let mut defs: HashMap<Value, &Op> = HashMap::new();
    let mut loops: Vec<&Inst> = Vec::new();
    fn go<'p>(b: &'p Block, defs: &mut HashMap<Value, &'p Op>, loops: &mut Vec<&'p Inst>) {
        for inst in &b.insts {
            for &r in &inst.results {
                defs.insert(r, &inst.op);
            }
            if let Op::For { .. } = inst.op {
                loops.push(inst);
            }
            for nb in inst.op.blocks() {
                go(nb, defs, loops);
            }
        }
    }
    go(&p.body, &mut defs, &mut loops);
    let is_zero = |v: Value| -> bool {
        let c = match defs.get(&v).copied() {
            Some(Op::Splat { x }) => defs.get(x).copied(),
            d => d,
        };
        match c {
            Some(Op::Const { value: Scalar::Int(0) }) => true,
            Some(Op::Const { value: Scalar::Float(f) }) => f.to_bits() == 0,
            _ => false,
        }
    };
    let mut pipelines = HashMap::new();
    for inst in loops {
        let Op::For { step, body, .. } = &inst.op else { continue };
        if !matches!(defs.get(step), Some(Op::Const { value: Scalar::Int(x) }) if *x > 0) {
            continue;
        }
        // Where each value of the body is defined, and every use of each inside it.
        let local: HashMap<Value, usize> = body.insts.iter().enumerate().flat_map(|(i, inst)| inst.results.iter().map(move |&r| (r, i))).collect();
        let mut uses: HashMap<Value, Vec<(usize, &Inst)>> = HashMap::new();
        for (i, inst) in body.insts.iter().enumerate() {
            let mut all = inst.op.operands();
            for nb in inst.op.blocks() {
                fn nested(b: &Block, out: &mut Vec<Value>) {
                    for inst in &b.insts {
                        out.extend(inst.op.operands());
                        for nb in inst.op.blocks() {
                            nested(nb, out);
                        }
                    }
                }
                nested(nb, &mut all);
            }
            for v in all {
                uses.entry(v).or_default().push((i, inst));
            }
        }
        let slice_of = |v: Value, out: &mut std::collections::BTreeSet<usize>| address_slice(p, body, &local, v, out);
        let mut loads = Vec::new();
        let mut slice = std::collections::BTreeSet::new();
        for (i, li) in body.insts.iter().enumerate() {
            let Op::Load { buffer, offsets, mask, other } = &li.op else { continue };
            let r = li.results[0];
            let t = p.ty(r);
            // 16-bit tiles for m16n8k16, f32 ones for tf32's m16n8k8 (four to a 16-byte copy;
            // `a`, and a `b` held transposed, read with matrix loads of 32-bit words, a `b`
            // held as `[K, N]` element by element).
            let frag = match t.dtype {
                DType::F16 | DType::BF16 => Frag::M16n8k16,
                DType::F32 => Frag::M16n8k8,
                _ => continue,
            };
            let vec = (16 / smem_elem_bytes(t.dtype)) as usize;
            if t.rank() != 2 || t.shape[1] % vec != 0 {
                continue;
            }
            let nvidia_fragments = |dot: Value| lw.mma.get(&dot).is_some_and(|(_, m)| m.frag == frag);
            let only_dot_operand = uses.get(&r).is_some_and(|us| {
                us.iter().all(|&(j, u)| {
                    j > i && matches!(&u.op, Op::Dot { a, b, acc, .. } if *acc != r && (*a == r || *b == r) && nvidia_fragments(u.results[0]))
                })
            });
            if !only_dot_operand || other.is_some_and(|o| !is_zero(o)) {
                continue;
            }
            // Contiguous along the rows (as stored), or, for a `b` operand only, along the
            // columns (stored transposed).
            let only_b = uses.get(&r).is_some_and(|us| us.iter().all(|&(_, u)| matches!(&u.op, Op::Dot { a, b, .. } if *b == r && *a != r)));
            let v = vec as u32;
            let transposed = if lw.vector_width(*offsets, t.dtype) >= v && lw.mask_uniform(*mask, vec) {
                false
            } else if only_b && t.shape[0] % vec == 0 && lw.vector_width_along(*offsets, t.dtype, 0) >= v && lw.mask_uniform_along(*mask, vec, 0) {
                true
            } else {
                continue;
            };
            let shape = [t.shape[0], t.shape[1]];
            // Read by warpgroup matrix instructions only: stored as their descriptors name it
            // where the stored rows fill whole panels.
            let wgmma =
                uses.get(&r).is_some_and(|us| us.iter().all(|&(_, u)| lw.mma.get(&u.results[0]).is_some_and(|(i, _)| i.kind == MatrixKind::Wgmma)));
            let stored = if transposed { [shape[1], shape[0]] } else { shape };
            // A tf32 `b` held as `[K, N]` is read a column of the fragment at a time (lanes
            // `t` apart in k, `g` in n): groups of eight elements permuted by the row put the
            // four k rows a read touches on four different sets of eight banks.
            let group = if t.dtype == DType::F32 && only_b && !transposed { 8 } else { vec };
            let swizzle = if wgmma && stored[1] % 64 == 0 && stored[0] % 8 == 0 {
                Swizzle::panels(stored[0], stored[1])
            } else {
                Swizzle::for_row(stored[1], smem_elem_bytes(t.dtype) as usize, group)
            };
            let probe = PipeLoad { result: r, buffer: *buffer, offsets: *offsets, mask: *mask, dtype: t.dtype, shape, transposed, swizzle };
            let dist = pipe_copy_layout(&probe, lw.warp, lw.num_warps).dist(&shape, lw.warp);
            let whole = Lowerer::<E>::vector_groups_along(&dist, v, if transposed { 0 } else { 1 }).iter().all(|&(_, n)| n == vec);
            if !whole || dist.num_regs() as u64 * lw.threads as u64 != (shape[0] * shape[1]) as u64 {
                continue;
            }
            let mut s = slice.clone();
            if !slice_of(*offsets, &mut s) || !mask.map_or(true, |m| slice_of(m, &mut s)) {
                continue;
            }
            slice = s;
            loads.push(probe);
        }
        if !loads.is_empty() {
            let deferred = if lw.num_stages >= 3 { deferred_dots(p, body, &loads, &lw.mma, &uses) } else { Vec::new() };
            let slice: Vec<usize> = slice.into_iter().collect();
            let tensor = plan_tensor_copies(lw, &defs, body, &loads, &slice);
            pipelines.insert(body.args[0], Pipeline { loads, slice, deferred, tensor });
        }
    }
    lw.pipelines = pipelines;
}

/// A pipelined loop's tensor copies ([`TensorPipe`]): where the backend has them and every
/// load of the loop is stored in swizzled panels and is a box of a tensor map whose extents
/// the launch's specialization knows to be valid ([`Polys::tensor_load`]). The maps join
/// [`LowerInfo::tensor_maps`] (equal maps once).
fn plan_tensor_copies<E: Emitter>(
    lw: &mut Lowerer<'_, E>,
    defs: &HashMap<Value, &Op>,
    body: &Block,
    loads: &[PipeLoad],
    slice: &[usize],
) -> Option<TensorPipe> {
    if !lw.e.tensor_copies() || loads.iter().any(|l| l.swizzle.panel == 0) {
        return None;
    }
    let (divisible, positive) = (lw.divisible_by_16, lw.positive);
    let marked = |mask: u64, p: u32| p < 64 && mask >> p & 1 == 1;
    // Extents positive; a row stride also a multiple of 16 bytes (of 2-byte elements).
    let known = |e: Extent, stride: bool| match e {
        Extent::Const(c) => c > 0 && (!stride || c % 8 == 0),
        Extent::Param(p) => marked(positive, p) && (!stride || marked(divisible, p)),
    };
    let mut polys = Polys::new(lw.p, defs);
    let mut found = Vec::with_capacity(loads.len());
    for l in loads {
        found.push(polys.tensor_load(l.buffer, l.dtype, l.offsets, l.mask, l.shape, l.transposed, &known)?);
    }
    // The slice's instructions that the origins need, in order.
    let mut need: HashSet<Value> = found.iter().flat_map(|t| t.origin.iter().flat_map(|p| p.values())).collect();
    let mut needed = Vec::new();
    for &i in slice.iter().rev() {
        let inst = &body.insts[i];
        if inst.results.iter().any(|r| need.contains(r)) {
            need.extend(inst.op.operands());
            needed.push(i);
        }
    }
    needed.reverse();
    let mut out = Vec::with_capacity(found.len());
    for t in found {
        let index = match lw.tensor_maps.iter().position(|m| *m == t.map) {
            Some(i) => i,
            None => {
                lw.tensor_maps.push(t.map);
                lw.tensor_maps.len() - 1
            }
        };
        out.push((index as u32, t.origin));
    }
    Some(TensorPipe { loads: out, slice: needed })
}

/// Adds to `out` the body instructions (indices) that `v` needs, if it is a pure function of
/// the induction variable and values from outside the loop (no carried values, loads,
/// divisions or float casts); `local` maps the body's values to their instructions. A loop
/// evaluates such a slice for a later iteration to issue that iteration's loads early.
fn address_slice(p: &Program, body: &Block, local: &HashMap<Value, usize>, v: Value, out: &mut std::collections::BTreeSet<usize>) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        if body.args[1..].contains(&v) {
            return false;
        }
        let Some(&i) = local.get(&v) else { continue };
        let op = &body.insts[i].op;
        let pure = match op {
            Op::Const { .. }
            | Op::Arange { .. }
            | Op::Splat { .. }
            | Op::Broadcast { .. }
            | Op::ExpandDims { .. }
            | Op::Cmp { .. }
            | Op::Select { .. } => true,
            Op::ProgramId { .. } | Op::NumPrograms { .. } | Op::Arg { .. } => true,
            Op::Binary { op, .. } => !matches!(op, BinaryOp::Div | BinaryOp::Rem),
            Op::Cast { .. } => !p.ty(body.insts[i].results[0]).dtype.is_float(),
            _ => false,
        };
        if !pure {
            return false;
        }
        if out.insert(i) {
            stack.extend(op.operands());
        }
    }
    true
}

/// Chooses, with `num_stages` of at least 2 on a target without asynchronous copies (Vulkan),
/// the loads to issue one iteration ahead into registers, as Triton does without cp.async: a
/// load in a `for` body (not nested deeper, positive constant step) of a tile whose only uses
/// are as an operand of a `dot` on cooperative matrices in that body, filling masked-off
/// elements with zero, whose offsets and mask are pure functions of the induction variable and
/// values from outside the loop. The loop then carries the next iteration's tile, loaded before
/// this iteration's matrix work.
fn plan_prefetch<E: Emitter>(lw: &mut Lowerer<'_, E>) {
    // Cooperative matrices exist only on Vulkan targets, which have no asynchronous copies
    // (the emulator offers them on every target; the target decides, so that the emulator's
    // program is the device's).
    if lw.num_stages < 2 || lw.coop.is_empty() {
        return;
    }
    let p = lw.p;
    let mut defs: HashMap<Value, &Op> = HashMap::new();
    let mut loops: Vec<&Inst> = Vec::new();
    walk_block(&p.body, &mut |inst| {
        for &r in &inst.results {
            defs.insert(r, &inst.op);
        }
        if let Op::For { .. } = inst.op {
            loops.push(inst);
        }
    });
    let zero_or_none = |o: &Option<Value>| -> bool {
        let Some(v) = o else { return true };
        let c = match defs.get(v).copied() {
            Some(Op::Splat { x }) => defs.get(x).copied(),
            d => d,
        };
        matches!(c, Some(Op::Const { value: Scalar::Int(0) })) || matches!(c, Some(Op::Const { value: Scalar::Float(f) }) if f.to_bits() == 0)
    };
    let mut uses: HashMap<Value, usize> = HashMap::new();
    p.walk(&mut |inst| {
        for o in inst.op.operands() {
            *uses.entry(o).or_insert(0) += 1;
        }
    });
    let mut out = HashMap::new();
    for inst in loops {
        let Op::For { step, body, .. } = &inst.op else { continue };
        if !matches!(defs.get(step), Some(Op::Const { value: Scalar::Int(x) }) if *x > 0) || lw.pipelines.contains_key(&body.args[0]) {
            continue;
        }
        let local: HashMap<Value, usize> = body.insts.iter().enumerate().flat_map(|(i, inst)| inst.results.iter().map(move |&r| (r, i))).collect();
        let slice_of = |v: Value, out: &mut std::collections::BTreeSet<usize>| address_slice(p, body, &local, v, out);
        // Uses of each value inside the body's top level (a nested use disqualifies a load).
        let mut top: HashMap<Value, Vec<&Inst>> = HashMap::new();
        for u in &body.insts {
            for o in u.op.operands() {
                top.entry(o).or_default().push(u);
            }
        }
        let mut loads = Vec::new();
        for li in &body.insts {
            let Op::Load { offsets, mask, other, .. } = &li.op else { continue };
            let r = li.results[0];
            if p.ty(r).rank() != 2 || !zero_or_none(other) {
                continue;
            }
            let coop_operand = top.get(&r).is_some_and(|us| {
                us.len() == uses.get(&r).copied().unwrap_or(0)
                    && us.iter().all(
                        |u| matches!(&u.op, Op::Dot { a, b, acc, .. } if *acc != r && (*a == r || *b == r) && lw.coop.contains_key(&u.results[0])),
                    )
            });
            if !coop_operand {
                continue;
            }
            let mut slice = std::collections::BTreeSet::new();
            if !slice_of(*offsets, &mut slice) || !mask.map_or(true, |m| slice_of(m, &mut slice)) || !other.map_or(true, |o| slice_of(o, &mut slice))
            {
                continue;
            }
            loads.push(Prefetch { load: r, slice: slice.into_iter().collect() });
        }
        if !loads.is_empty() {
            out.insert(body.args[0], loads);
        }
    }
    lw.prefetch = out;
}

/// The `dot`s of a pipelined loop's body that may leave their warpgroup matrix instructions in
/// flight until the next iteration ([`Pipeline::deferred`]): planned on `wgmma`, fed from
/// panels (`b`, and `a` unless it is not pipelined), accumulating in f32 into a loop-carried
/// value only they read, their result only yielded back to it.
fn deferred_dots(
    p: &Program,
    body: &Block,
    loads: &[PipeLoad],
    mma: &HashMap<Value, (MatrixInstr, Mma)>,
    uses: &HashMap<Value, Vec<(usize, &Inst)>>,
) -> Vec<Value> {
    let Some(Inst { op: Op::Yield { values }, .. }) = body.insts.last() else { return Vec::new() };
    let panel = |v: Value| loads.iter().find(|l| l.result == v).map(|l| l.swizzle.panel > 0);
    let mut out = Vec::new();
    for inst in &body.insts {
        let Op::Dot { a, b, acc, .. } = &inst.op else { continue };
        let r = inst.results[0];
        let wgmma = mma.get(&r).is_some_and(|(i, _)| i.kind == MatrixKind::Wgmma);
        if !wgmma || panel(*b) != Some(true) || panel(*a) == Some(false) || p.ty(*acc).dtype != DType::F32 {
            continue;
        }
        let Some(j) = body.args[1..].iter().position(|x| x == acc) else { continue };
        let only = |v: Value, user: &dyn Fn(&Inst) -> bool| uses.get(&v).is_some_and(|us| us.len() == 1 && user(us[0].1));
        let acc_only_here = only(*acc, &|u: &Inst| std::ptr::eq(u, inst));
        let yielded_only = values.get(j) == Some(&r) && only(r, &|u: &Inst| matches!(u.op, Op::Yield { .. }));
        if acc_only_here && yielded_only {
            out.push(r);
        }
    }
    out
}

/// Whether every register `to` needs is held by the same thread at the same static offsets in
/// `from`: the same thread-dependent terms and wrapping along every dimension, and every static
/// offset of `to` present in `from` ([`Lowerer::moves_no_data`]).
fn same_threads(from: &Dist, to: &Dist) -> bool {
    if from.terms != to.terms || from.wrap != to.wrap {
        return false;
    }
    let idx = from.index();
    to.regs.iter().all(|r| idx.contains_key(&from.key(r)))
}

/// The layout a pipelined load's copies are issued in: 16-byte vectors along the tile's
/// contiguous dimension (the last, or the first for a transposed one), lanes along it first.
fn pipe_copy_layout(l: &PipeLoad, warp: u32, num_warps: u32) -> Layout {
    if l.transposed {
        let stored = [l.shape[1], l.shape[0]];
        let b = Layout::Blocked(Blocked::for_shape(&stored, l.vec(), warp, num_warps));
        b.permuted(&[1, 0]).expect("a blocked layout permutes")
    } else {
        Layout::Blocked(Blocked::for_shape(&l.shape, l.vec(), warp, num_warps))
    }
}

/// The warp-level matrix instruction a `dot` of these operand types lowers to on `target` with
/// `num_warps` warps, and the warps' arrangement, if any: operands of the instruction's
/// dtypes (f32 ones only as tf32, for a `dot` whose input precision says so), a float
/// accumulator (summed in f32, as the IR's semantics say), and extents the warps' tile
/// divides. Warps go to M while M has more instruction rows per warp than N has columns
/// (Triton's rule for mma v2), or, with `rows_first`, while M has rows for them.
fn matrix_choice(
    target: &Target,
    num_warps: u32,
    a: &Type,
    b: &Type,
    acc: &Type,
    precision: InputPrecision,
    rows_first: bool,
) -> Option<(MatrixInstr, Mma)> {
    if !acc.dtype.is_float() {
        return None;
    }
    let tf32 = precision == InputPrecision::Tf32;
    let (instr, frag) = target.matrix.iter().find_map(|i| {
        let frag = i.frag()?;
        let precision = !i.tf32() || tf32;
        (frag.lanes() == target.subgroup_size && i.a == a.dtype && i.b == b.dtype && i.acc == DType::F32 && precision).then_some((*i, frag))
    })?;
    // MFMA's accumulator is laid out transposed (the instruction issued with its operands
    // exchanged): rows' columns contiguous in a lane, and a result that feeds another dot's `a`
    // stays in registers.
    let frag = if frag == Frag::Mfma16x16x16 { Frag::Mfma16x16x16T } else { frag };
    let (fm, fn_, fk) = frag.mnk();
    let (m, k, n) = (a.shape[0] as u32, a.shape[1] as u32, b.shape[1] as u32);
    if m % fm != 0 || n % fn_ != 0 || k % fk != 0 {
        return None;
    }
    let mut warps = [1u32, 1];
    while warps[0] * warps[1] < num_warps {
        let more_rows = rows_first || m / fm / warps[0] >= n / (fn_ * warps[1]);
        if more_rows && warps[0] < m / fm {
            warps[0] *= 2;
        } else {
            warps[1] *= 2;
        }
    }
    (fm * warps[0] <= m && fn_ * warps[1] <= n).then_some((instr, Mma { warps, frag }))
}

/// The cooperative matrix a `dot` of these operand types lowers to on `target` with
/// `num_warps` warps, if any: as [`matrix_choice`], for the target's subgroup-scope
/// cooperative matrices with f32 accumulators, whose shape has an exchange map for the
/// target's warp width ([`Coop::exchange`]).
fn coop_choice(target: &Target, num_warps: u32, a: &Type, b: &Type, acc: &Type, rows_first: bool) -> Option<(MatrixInstr, Coop)> {
    if !acc.dtype.is_float() {
        return None;
    }
    let instr = *target.matrix.iter().find(|i| {
        i.kind == MatrixKind::CooperativeMatrix
            && i.a == a.dtype
            && i.b == b.dtype
            && i.acc == DType::F32
            && Coop { warps: [1, 1], m: i.m, n: i.n }.exchange(target.subgroup_size).is_some()
    })?;
    let (m, k, n) = (a.shape[0] as u32, a.shape[1] as u32, b.shape[1] as u32);
    if m % instr.m != 0 || n % instr.n != 0 || k % instr.k != 0 {
        return None;
    }
    let mut warps = [1u32, 1];
    while warps[0] * warps[1] < num_warps {
        let more_rows = rows_first || m / instr.m / warps[0] >= n / (instr.n * warps[1]);
        if more_rows && warps[0] < m / instr.m {
            warps[0] *= 2;
        } else {
            warps[1] *= 2;
        }
    }
    (instr.m * warps[0] <= m && instr.n * warps[1] <= n).then_some((instr, Coop { warps, m: instr.m, n: instr.n }))
}

/// The warpgroup matrix instruction a `dot` lowers to on `target` with `num_warps` warps, if
/// any: every warp along M (a warpgroup's four take 64 rows), `n` columns at once. A `dot`
/// whose operands do not come from shared memory as the instruction reads it (a `b` not
/// pipelined into 64-column panels) is emitted with the target's mma.sync instead, in the same
/// layouts. Only pipelined loops (`num_stages > 1`) take it: they fill the panels.
fn wgmma_choice(target: &Target, num_warps: u32, a: &Type, b: &Type, acc: &Type) -> Option<(MatrixInstr, Mma)> {
    if target.subgroup_size != 32 || !acc.dtype.is_float() || num_warps % 4 != 0 {
        return None;
    }
    let instr =
        *target.matrix.iter().find(|i| i.kind == MatrixKind::Wgmma && i.a == a.dtype && i.b == b.dtype && i.acc == DType::F32 && i.k == Mma::K)?;
    mma_sync_for(target, a.dtype)?;
    let (m, k, n) = (a.shape[0] as u32, a.shape[1] as u32, b.shape[1] as u32);
    // K in whole 64-element panels, so a pipelined `a` is read through descriptors as well
    // (one fed from registers would hold the warp-level layout's operand traffic).
    let fits = m % (Mma::M * num_warps) == 0 && n % Mma::N == 0 && n <= instr.n && k % 64 == 0;
    fits.then_some((instr, Mma { warps: [num_warps, 1], frag: Frag::M16n8k16 }))
}

/// The target's mma.sync instruction for `dtype` operands.
fn mma_sync_for(target: &Target, dtype: DType) -> Option<MatrixInstr> {
    target
        .matrix
        .iter()
        .find(|i| i.kind == MatrixKind::MmaSync && i.a == dtype && i.b == dtype && i.acc == DType::F32 && (i.m, i.n, i.k) == (Mma::M, Mma::N, Mma::K))
        .copied()
}

/// The XOR swizzle of a row-major tile of 16-bit elements staged for matrix loads: each row's
/// 16-byte chunks are permuted by a phase that changes every `128 / row bytes` rows, so the
/// eight rows one 8 x 8 matrix load reads (and the eight chunks a warp's rows write) fall in
/// eight different groups of four banks. Triton's shared layout for mma operands. A tile that
/// warpgroup matrix instructions read is stored in panels of 64 columns instead
/// ([`Swizzle::panels`]), the 128-byte swizzle their descriptors name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Swizzle {
    cols: usize,
    /// log2 of the rows sharing a phase.
    per_phase_shift: u32,
    max_phase: u32,
    /// Elements per panel of 64 columns (all rows), 0 for one row-major tile.
    panel: usize,
    /// log2 of the elements in a 16-byte chunk (3 for 16-bit elements, 2 for f32).
    vec_shift: u32,
}

impl Swizzle {
    /// Rows of `cols` elements of `elem_bytes` each, groups of `group` elements (a 16-byte
    /// chunk or a multiple of one, a power of two) permuted by the phase.
    fn for_row(cols: usize, elem_bytes: usize, group: usize) -> Swizzle {
        let row_bytes = cols * elem_bytes;
        let per_phase = (128 / row_bytes.max(1)).max(1) as u32;
        let max_phase = (cols / group.max(1)).clamp(1, 8) as u32;
        Swizzle { cols, per_phase_shift: per_phase.trailing_zeros(), max_phase, panel: 0, vec_shift: group.trailing_zeros() }
    }

    /// `rows x cols` (`cols` a multiple of 64) stored as `cols / 64` panels of `rows x 64`,
    /// each row's eight chunks XOR-ed with the row's index mod 8: in bytes, with the tile
    /// 1024-byte aligned, the 128-byte swizzle of [`crate::gpu::emit::SharedMatrix`].
    fn panels(rows: usize, cols: usize) -> Swizzle {
        debug_assert!(cols % 64 == 0 && rows % 8 == 0);
        Swizzle { cols, per_phase_shift: 0, max_phase: 8, panel: rows * 64, vec_shift: 3 }
    }

    /// The swizzled index of element (`r`, `c`): `r * cols + ((c / v) ^ phase(r)) * v + c % v`
    /// for `v` elements to a chunk (in panels, of 16-bit elements: `(c / 64) panel + r * 64 +
    /// ((c % 64 / 8) ^ r % 8) * 8 + c % 8`).
    fn index<E: Emitter>(&self, me: &mut Lowerer<'_, E>, r: E::V, c: E::V) -> E::V {
        let (pitch, c, panel) = if self.panel > 0 {
            let six = me.c_i32(6);
            let p = me.e.binary(BinaryOp::Shr, DType::I32, c, six);
            let size = me.c_i32(self.panel as i64);
            let panel = me.e.binary(BinaryOp::Mul, DType::I32, p, size);
            let m63 = me.c_i32(63);
            (64, me.e.binary(BinaryOp::And, DType::I32, c, m63), Some(panel))
        } else {
            (self.cols, c, None)
        };
        let cols = me.c_i32(pitch as i64);
        let row = me.e.binary(BinaryOp::Mul, DType::I32, r, cols);
        let row = match panel {
            Some(p) => me.e.binary(BinaryOp::Add, DType::I32, row, p),
            None => row,
        };
        if self.max_phase == 1 {
            return me.e.binary(BinaryOp::Add, DType::I32, row, c);
        }
        let sh = me.c_i32(self.per_phase_shift as i64);
        let phase = me.e.binary(BinaryOp::Shr, DType::I32, r, sh);
        let pm = me.c_i32(self.max_phase as i64 - 1);
        let phase = me.e.binary(BinaryOp::And, DType::I32, phase, pm);
        let shift = me.c_i32(self.vec_shift as i64);
        let phase = me.e.binary(BinaryOp::Shl, DType::I32, phase, shift);
        // (c / v ^ phase) * v + c % v == c ^ (phase * v)
        let col = me.e.binary(BinaryOp::Xor, DType::I32, c, phase);
        me.e.binary(BinaryOp::Add, DType::I32, row, col)
    }
}
