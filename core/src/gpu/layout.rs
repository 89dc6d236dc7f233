//! Layouts: which thread of a program holds which element of a tile.
//!
//! A layout is a function from (register, lane, warp) to tile coordinates, as in Triton's
//! linear layouts. Two kinds cover today's lowering:
//! - [`Blocked`]: each thread holds `size_per_thread` contiguous elements per dimension, the
//!   lanes of a warp tile `threads_per_warp`, the warps tile `warps_per_cta`; the resulting
//!   block repeats over larger shapes and wraps (replicates) over smaller ones;
//! - `Slice`: the layout of a reduction's result, its parent with one dimension removed; threads
//!   that differed only along that dimension hold the same values.
//!
//! A layout is independent of the shape it is applied to: applying one layout to shapes that
//! differ only in extents of 1 (a value and its broadcast) gives registers that correspond one to
//! one, so broadcasting and `expand_dims` move no data. [`Dist`] is a layout applied to a shape:
//! per register, a static offset per dimension, plus the thread-dependent terms shared by all
//! registers.

use std::collections::HashMap;
use std::fmt;

/// A distributed layout of a tile value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Rank-0 values: every thread holds the value.
    Uniform,
    Blocked(Blocked),
    /// `parent` with dimension `dim` removed.
    Slice {
        dim: u32,
        parent: Box<Layout>,
    },
    /// The accumulator of a warp-level matrix instruction (`mma.sync`), repeated over the
    /// warps and then over the tile.
    Mma(Mma),
    /// Operand `a` (`operand` 0, `[M, K]`) or `b` (1, `[K, N]`) of the matrix instruction whose
    /// accumulator is `parent`: the fragments each lane hands the instruction.
    DotOperand {
        operand: u8,
        parent: Mma,
    },
    /// The accumulator of subgroup-scope cooperative matrices (`VK_KHR_cooperative_matrix`).
    Coop(Coop),
}

/// Cooperative-matrix accumulators: which lane holds which element of one is the driver's, so
/// a value in this layout is one opaque matrix per `m x n` tile its warp owns (the warps tile M
/// and N as [`Mma`]'s do: warp `w` takes M-index `w % wm`), and it leaves the layout only
/// through shared memory ([`Coop::exchange`]). Its [`Dist`] says which warp holds which tile:
/// one register per tile, at the tile's first element, every lane a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Coop {
    pub warps: [u32; 2],
    pub m: u32,
    pub n: u32,
}

impl Coop {
    /// The register map a cooperative matrix is exchanged with, through a scratch tile in
    /// shared memory per warp: the accumulator of the 16 x 16 fragment of a warp of
    /// `warp_size` lanes (RDNA3's WMMA map for 32, CDNA's MFMA map for 64), with the same warps.
    pub fn exchange(&self, warp_size: u32) -> Option<Mma> {
        let frag = [Frag::Wmma16x16x16, Frag::Mfma16x16x16].into_iter().find(|f| f.lanes() == warp_size)?;
        let (fm, fn_, _) = frag.mnk();
        ((fm, fn_) == (self.m, self.n)).then_some(Mma { warps: self.warps, frag })
    }

    /// Tiles along M and N of `[m, n]`.
    pub fn repeats(&self, shape: &[usize]) -> [usize; 2] {
        let tile = [self.m * self.warps[0], self.n * self.warps[1]];
        [0, 1].map(|d| (shape[d] / tile[d] as usize).max(1))
    }

    fn dist(&self, shape: &[usize], warp_size: u32) -> Dist {
        let [wm, wn] = self.warps;
        let tile = [self.m * wm, self.n * wn];
        let reps = self.repeats(shape);
        let mut terms = vec![Vec::new(), Vec::new()];
        if wm > 1 {
            terms[0].push(ThreadTerm { src: ThreadSrc::Warp, shift: 0, mask: wm - 1, mult: self.m });
        }
        if wn > 1 {
            terms[1].push(ThreadTerm { src: ThreadSrc::Warp, shift: wm.trailing_zeros(), mask: wn - 1, mult: self.n });
        }
        let replica_terms = vec![ThreadTerm { src: ThreadSrc::Lane, shift: 0, mask: warp_size - 1, mult: 1 }];
        let regs = (0..reps[0] as u32).flat_map(|i| (0..reps[1] as u32).map(move |j| vec![tile[0] * i, tile[1] * j])).collect();
        let wrap = [0, 1].map(|d| shape[d] < tile[d] as usize).to_vec();
        Dist { shape: shape.to_vec(), regs, terms, wrap, replica_terms }
    }
}

/// The fragment map of one warp-level matrix instruction: which lane holds which element of
/// its operands and accumulator in which register. Each is written here as its vendor's ISA
/// documents it ([`Frag::lane`], [`Frag::reg`]); the layouts ([`Mma`]) are built from the same
/// maps as thread terms, and a test checks the two agree for every lane and register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Frag {
    /// NVIDIA's `mma.sync.aligned.m16n8k16` (PTX ISA, "Matrix Fragments for mma.m16n8k16"),
    /// warps of 32: lane `l` has group `g = l / 4` and thread-in-group `t = l % 4`; the
    /// accumulator's four registers hold rows `g` and `g + 8`, columns `2t` and `2t + 1` of a
    /// 16 x 8 tile; `a`'s eight hold rows `g`, `g + 8` by columns `2t, 2t + 1, 2t + 8, 2t + 9`
    /// of a 16 x 16 tile; `b`'s four hold rows (k) `2t, 2t + 1, 2t + 8, 2t + 9` of column `g`
    /// of a 16 x 8 tile.
    M16n8k16,
    /// NVIDIA's `mma.sync.aligned.m16n8k8` on tf32 operands (PTX ISA, "Matrix Fragments for
    /// mma.m16n8k8", `.tf32`), warps of 32, 32-bit elements: the accumulator is
    /// [`Frag::M16n8k16`]'s; `a`'s four registers hold rows `g`, `g + 8` by columns `t`,
    /// `t + 4` of a 16 x 8 tile (row fastest); `b`'s two hold rows (k) `t` and `t + 4` of
    /// column `g` of an 8 x 8 tile.
    M16n8k8,
    /// AMD CDNA's `v_mfma_f32_16x16x16f16` / `v_mfma_f32_16x16x16bf16_1k` (AMD Instinct ISA,
    /// "Dependent Matrix Operations"; the matrix instruction calculator's maps), wavefronts of
    /// 64: lane `l` has column (or row of `a`) `l % 16` and block `q = l / 16`; the
    /// accumulator's four registers hold rows `4q .. 4q + 3` of column `l % 16` of a 16 x 16
    /// tile; `a`'s four hold columns (k) `4q .. 4q + 3` of row `l % 16`; `b`'s four hold rows
    /// (k) `4q .. 4q + 3` of column `l % 16`.
    Mfma16x16x16,
    /// The same instruction issued with its operands exchanged (`b`'s fragments as `a`, `a`'s
    /// as `b`), so that it computes the transpose: the accumulator is MFMA's transposed, a lane
    /// holding columns `4q .. 4q + 3` of row `l % 16` (four contiguous elements of one row, a
    /// vector store; and exactly the `a` operand's map, so a result feeds the next dot's `a`
    /// without moving). Its operands' maps are [`Frag::Mfma16x16x16`]'s. Triton's AMD backend
    /// lays MFMA accumulators out the same way (`isTransposed`).
    Mfma16x16x16T,
    /// AMD RDNA3's `v_wmma_f32_16x16x16_f16` / `bf16` in wave32 (RDNA3 ISA, "Wave Matrix
    /// Multiply Accumulate"): lane `l` holds all sixteen k of row `l % 16` of `a` and of column
    /// `l % 16` of `b`, lanes 16-31 repeating lanes 0-15; the accumulator's eight registers
    /// hold rows `2j + l / 16` (j = 0..7) of column `l % 16` of a 16 x 16 tile.
    Wmma16x16x16,
}

impl Frag {
    /// Rows and columns of one instruction's accumulator, and its K.
    pub fn mnk(self) -> (u32, u32, u32) {
        match self {
            Frag::M16n8k16 => (16, 8, 16),
            Frag::M16n8k8 => (16, 8, 8),
            Frag::Mfma16x16x16 | Frag::Mfma16x16x16T | Frag::Wmma16x16x16 => (16, 16, 16),
        }
    }

    /// Lanes of the warp that executes the instruction.
    pub fn lanes(self) -> u32 {
        match self {
            Frag::M16n8k16 | Frag::M16n8k8 | Frag::Wmma16x16x16 => 32,
            Frag::Mfma16x16x16 | Frag::Mfma16x16x16T => 64,
        }
    }

    /// Registers per lane of the accumulator (`which` None) or operand `which`.
    pub fn regs(self, which: Option<u8>) -> u32 {
        match (self, which) {
            (Frag::M16n8k16, Some(0)) | (Frag::Wmma16x16x16, None) => 8,
            (Frag::Wmma16x16x16, _) => 16,
            (Frag::M16n8k8, Some(1)) => 2,
            _ => 4,
        }
    }

    /// The short name the GPU IR prints.
    pub fn name(self) -> &'static str {
        match self {
            Frag::M16n8k16 => "m16n8k16",
            Frag::M16n8k8 => "m16n8k8",
            Frag::Mfma16x16x16 => "mfma16x16x16",
            Frag::Mfma16x16x16T => "mfma16x16x16 transposed",
            Frag::Wmma16x16x16 => "wmma16x16x16",
        }
    }

    /// The instruction's name as the lowering records it.
    pub fn instruction(self) -> &'static str {
        match self {
            Frag::M16n8k16 => "mma.sync m16n8k16",
            Frag::M16n8k8 => "mma.sync m16n8k8",
            Frag::Mfma16x16x16 | Frag::Mfma16x16x16T => "mfma 16x16x16",
            Frag::Wmma16x16x16 => "wmma 16x16x16",
        }
    }

    /// The instruction as its ISA defines it, and whether the lowering hands it `b`'s fragments
    /// as `a` and `a`'s as `b` ([`Frag::Mfma16x16x16T`]).
    pub fn issued(self) -> (Frag, bool) {
        match self {
            Frag::Mfma16x16x16T => (Frag::Mfma16x16x16, true),
            f => (f, false),
        }
    }

    /// Static (row, column) of register `j` of the accumulator or of operand `which`, within
    /// one instruction's tile: what [`Frag::lane`] adds to.
    pub fn reg(self, which: Option<u8>, j: u32) -> (u32, u32) {
        match (self, which) {
            (Frag::Mfma16x16x16T, None) => (0, j),
            (Frag::Mfma16x16x16T, w) => Frag::Mfma16x16x16.reg(w, j),
            (Frag::M16n8k16 | Frag::M16n8k8, None) => (8 * (j >> 1), j & 1),
            (Frag::M16n8k8, Some(0)) => (8 * (j & 1), 4 * (j >> 1)),
            (Frag::M16n8k8, _) => (4 * j, 0),
            (Frag::M16n8k16, Some(0)) => (8 * ((j >> 1) & 1), 8 * (j >> 2) + (j & 1)),
            (Frag::M16n8k16, _) => (8 * (j >> 1) + (j & 1), 0),
            (Frag::Mfma16x16x16, None | Some(1)) => (j, 0),
            (Frag::Mfma16x16x16, _) | (Frag::Wmma16x16x16, Some(0)) => (0, j),
            (Frag::Wmma16x16x16, None) => (2 * j, 0),
            (Frag::Wmma16x16x16, _) => (j, 0),
        }
    }

    /// Lane `lane`'s offset (row, column) within one instruction's tile of the accumulator or
    /// operand `which`, as the ISA gives it.
    pub fn lane(self, which: Option<u8>, lane: u32) -> (u32, u32) {
        match (self, which) {
            (Frag::Mfma16x16x16T, None) => (lane % 16, 4 * (lane / 16)),
            (Frag::Mfma16x16x16T, w) => Frag::Mfma16x16x16.lane(w, lane),
            (Frag::M16n8k16, Some(1)) => (2 * (lane & 3), lane >> 2),
            (Frag::M16n8k16, _) | (Frag::M16n8k8, None) => (lane >> 2, 2 * (lane & 3)),
            (Frag::M16n8k8, Some(0)) => (lane >> 2, lane & 3),
            (Frag::M16n8k8, _) => (lane & 3, lane >> 2),
            (Frag::Mfma16x16x16, Some(0)) => (lane % 16, 4 * (lane / 16)),
            (Frag::Mfma16x16x16, _) => (4 * (lane / 16), lane % 16),
            (Frag::Wmma16x16x16, None) => ((lane / 16) % 2, lane % 16),
            (Frag::Wmma16x16x16, Some(0)) => (lane % 16, 0),
            (Frag::Wmma16x16x16, _) => (0, lane % 16),
        }
    }

    /// The longest run of consecutive k one lane holds in operand `which` (0: `a`, along its
    /// columns; 1: `b`, along its rows): how wide a read of a K-contiguous copy can be.
    pub fn k_run(self, which: Option<u8>) -> u32 {
        let mut ks: Vec<(u32, u32)> = (0..self.regs(which))
            .map(|j| {
                let (r, c) = self.reg(which, j);
                if which == Some(0) {
                    (r, c)
                } else {
                    (c, r)
                }
            })
            .collect();
        ks.sort_unstable();
        let (mut best, mut run) = (1, 1);
        for w in ks.windows(2) {
            run = if w[1].0 == w[0].0 && w[1].1 == w[0].1 + 1 { run + 1 } else { 1 };
            best = best.max(run);
        }
        best
    }

    /// Bank conflicts of one instruction's reads of operand `which` (0: `a`, 1: `b`) from a
    /// K-contiguous staged copy (element (outer, k) at `outer * pitch + k`, outer the row of
    /// `a` or the column of `b`) of `elem_bytes`-byte elements: the most distinct 4-byte words
    /// any bank serves at once. The model, AMD's LDS and NVIDIA's shared memory alike: 32 banks
    /// of 4 bytes serve 128 bytes a clock; a lane reads each run of consecutive k as accesses
    /// of at most 16 bytes; one access of a wave is served in groups of consecutive lanes that
    /// together ask for 128 bytes, and lanes of a group that name different words of one bank
    /// are served one after another (the same word, as replicated lanes read, is one). 1 is
    /// conflict-free.
    pub fn staged_read_conflicts(self, which: u8, pitch: u32, elem_bytes: u32) -> u32 {
        let w = Some(which);
        let elems = |lane: u32| -> Vec<(u32, u32)> {
            let (lo, lk) = if which == 0 { self.lane(w, lane) } else { (self.lane(w, lane).1, self.lane(w, lane).0) };
            let mut v: Vec<(u32, u32)> = (0..self.regs(w))
                .map(|j| {
                    let (r, c) = self.reg(w, j);
                    if which == 0 {
                        (lo + r, lk + c)
                    } else {
                        (lo + c, lk + r)
                    }
                })
                .collect();
            v.sort_unstable();
            v
        };
        // Each lane's accesses, in order: (first byte, bytes).
        let accesses = |lane: u32| -> Vec<(u32, u32)> {
            let mut out: Vec<(u32, u32)> = Vec::new();
            for (outer, k) in elems(lane) {
                let at = (outer * pitch + k) * elem_bytes;
                match out.last_mut() {
                    Some((first, bytes)) if *first + *bytes == at && *bytes + elem_bytes <= 16 => *bytes += elem_bytes,
                    _ => out.push((at, elem_bytes)),
                }
            }
            out
        };
        let lanes: Vec<Vec<(u32, u32)>> = (0..self.lanes()).map(accesses).collect();
        let mut worst = 1;
        for a in 0..lanes.iter().map(Vec::len).min().unwrap_or(0) {
            let bytes = lanes[0][a].1.max(4);
            let group = (128 / bytes).max(1) as usize;
            for g in lanes.chunks(group) {
                let mut banks: Vec<Vec<u32>> = vec![Vec::new(); 32];
                for l in g {
                    let (first, n) = l[a];
                    for word in first / 4..(first + n).div_ceil(4) {
                        let b = &mut banks[(word % 32) as usize];
                        if !b.contains(&word) {
                            b.push(word);
                        }
                    }
                }
                worst = worst.max(banks.iter().map(Vec::len).max().unwrap_or(1) as u32);
            }
        }
        worst
    }

    /// Elements to pad each row of a K-contiguous staged copy of operand `which` with `k`
    /// columns, so that [`Frag::staged_read_conflicts`] is 1: the smallest multiple of a
    /// lane's access (up to 16 bytes, which keeps every access aligned) that makes the reads
    /// conflict-free, or none where no pad below 64 elements does.
    pub fn staged_pad(self, which: u8, k: u32, elem_bytes: u32) -> u32 {
        let step = (self.k_run(Some(which)) * elem_bytes).min(16) / elem_bytes.max(1);
        let step = step.max(1);
        (0..64 / step).map(|i| i * step).find(|&pad| self.staged_read_conflicts(which, k + pad, elem_bytes) == 1).unwrap_or(0)
    }

    /// Whether lanes `l` and `l ^ 16` hold the same elements of operand `which` (RDNA3's WMMA
    /// reads its operands replicated across the two halves of the wave).
    pub fn replicated(self, which: Option<u8>) -> bool {
        self == Frag::Wmma16x16x16 && which.is_some()
    }

    /// [`Frag::lane`] as thread terms per dimension, and the lane term whose threads hold
    /// copies ([`Frag::replicated`]).
    pub fn lane_terms(self, which: Option<u8>) -> ([Option<ThreadTerm>; 2], Option<ThreadTerm>) {
        let lane = |shift, mask, mult| Some(ThreadTerm { src: ThreadSrc::Lane, shift, mask, mult });
        let terms = match (self, which) {
            (Frag::Mfma16x16x16T, None) => [lane(0, 15, 1), lane(4, 3, 4)],
            (Frag::Mfma16x16x16T, w) => return Frag::Mfma16x16x16.lane_terms(w),
            (Frag::M16n8k16, Some(1)) => [lane(0, 3, 2), lane(2, 7, 1)],
            (Frag::M16n8k16, _) | (Frag::M16n8k8, None) => [lane(2, 7, 1), lane(0, 3, 2)],
            (Frag::M16n8k8, Some(0)) => [lane(2, 7, 1), lane(0, 3, 1)],
            (Frag::M16n8k8, _) => [lane(0, 3, 1), lane(2, 7, 1)],
            (Frag::Mfma16x16x16, Some(0)) => [lane(0, 15, 1), lane(4, 3, 4)],
            (Frag::Mfma16x16x16, _) => [lane(4, 3, 4), lane(0, 15, 1)],
            (Frag::Wmma16x16x16, None) => [lane(4, 1, 1), lane(0, 15, 1)],
            (Frag::Wmma16x16x16, Some(0)) => [lane(0, 15, 1), None],
            (Frag::Wmma16x16x16, _) => [None, lane(0, 15, 1)],
        };
        (terms, if self.replicated(which) { lane(4, 1, 1) } else { None })
    }
}

/// The accumulator layout of a warp-level matrix instruction ([`Frag`]): `warps` = `[wm, wn]`
/// warps tile M and N (warp `w` takes M-index `w % wm`); the instruction tiles then repeat
/// over the value's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mma {
    pub warps: [u32; 2],
    pub frag: Frag,
}

impl Mma {
    /// Rows and columns of one `mma.sync` accumulator, and its K (the warpgroup instructions
    /// build on its fragments).
    pub const M: u32 = 16;
    pub const N: u32 = 8;
    pub const K: u32 = 16;

    /// Static (row, column) of `mma.sync` accumulator register `j` (0..4) of one instruction.
    pub fn acc_reg(j: u32) -> (u32, u32) {
        Frag::M16n8k16.reg(None, j)
    }

    /// Static (row, k) of `mma.sync` `a` register `j` (0..8) of one instruction.
    pub fn a_reg(j: u32) -> (u32, u32) {
        Frag::M16n8k16.reg(Some(0), j)
    }

    /// Lane `l`'s offsets within one `mma.sync` tile: (group, thread-in-group).
    pub fn lane_parts(lane: u32) -> (u32, u32) {
        (lane >> 2, lane & 3)
    }

    fn warp_terms(&self) -> (Option<ThreadTerm>, Option<ThreadTerm>) {
        let [wm, wn] = self.warps;
        let (fm, fn_, _) = self.frag.mnk();
        let m = (wm > 1).then_some(ThreadTerm { src: ThreadSrc::Warp, shift: 0, mask: wm - 1, mult: fm });
        let n = (wn > 1).then_some(ThreadTerm { src: ThreadSrc::Warp, shift: wm.trailing_zeros(), mask: wn - 1, mult: fn_ });
        (m, n)
    }

    /// The extent of the warps' tile of the accumulator or of operand `which`.
    fn tile(&self, which: Option<u8>) -> [u32; 2] {
        let [wm, wn] = self.warps;
        let (fm, fn_, fk) = self.frag.mnk();
        match which {
            None => [fm * wm, fn_ * wn],
            Some(0) => [fm * wm, fk],
            _ => [fk, fn_ * wn],
        }
    }

    /// Instruction tiles along each dimension of `shape` for operand `which` (None: the
    /// accumulator), and whether a dimension is smaller than the warps' tile (then it wraps).
    fn repeats(&self, shape: &[usize], which: Option<u8>) -> ([usize; 2], [bool; 2]) {
        let tile = self.tile(which);
        let reps = [0, 1].map(|d| (shape[d] / tile[d] as usize).max(1));
        let wrap = [0, 1].map(|d| shape[d] < tile[d] as usize);
        (reps, wrap)
    }

    fn dist(&self, shape: &[usize], which: Option<u8>) -> Dist {
        let (wterm_m, wterm_n) = self.warp_terms();
        let tile = self.tile(which);
        let (reps, wrap) = self.repeats(shape, which);
        let mut terms = vec![Vec::new(), Vec::new()];
        let (lane_terms, lane_replica) = self.frag.lane_terms(which);
        for (d, t) in lane_terms.into_iter().enumerate() {
            terms[d].extend(t);
        }
        let mut replica_terms: Vec<ThreadTerm> = lane_replica.into_iter().collect();
        match which {
            None => {
                terms[0].extend(wterm_m);
                terms[1].extend(wterm_n);
            }
            // An operand is shared by the warps along the other dimension of the result.
            Some(0) => {
                terms[0].extend(wterm_m);
                replica_terms.extend(wterm_n);
            }
            _ => {
                terms[1].extend(wterm_n);
                replica_terms.extend(wterm_m);
            }
        }
        let mut regs = Vec::new();
        for i in 0..reps[0] as u32 {
            for j in 0..reps[1] as u32 {
                for r in 0..self.frag.regs(which) {
                    let (row, col) = self.frag.reg(which, r);
                    regs.push(vec![tile[0] * i + row, tile[1] * j + col]);
                }
            }
        }
        Dist { shape: shape.to_vec(), regs, terms, wrap: wrap.to_vec(), replica_terms }
    }

    /// Registers of one instruction's operand or accumulator in the dist of `which` over
    /// `shape`: the register indices for instruction tile (`i`, `j`) (rows, columns of the
    /// operand's repeats), in fragment order.
    pub fn fragment(&self, shape: &[usize], which: Option<u8>, i: usize, j: usize) -> std::ops::Range<usize> {
        let (reps, _) = self.repeats(shape, which);
        let per = self.frag.regs(which) as usize;
        let first = (i * reps[1] + j) * per;
        first..first + per
    }

    /// Instruction tiles of the accumulator over `[m, n]` and the K steps over `k`:
    /// (M repeats, N repeats, K steps).
    pub fn steps(&self, m: usize, n: usize, k: usize) -> (usize, usize, usize) {
        let (acc, _) = self.repeats(&[m, n], None);
        (acc[0], acc[1], (k / self.frag.mnk().2 as usize).max(1))
    }
}

/// Triton's blocked layout. Every extent is a power of two.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Blocked {
    pub size_per_thread: Vec<u32>,
    pub threads_per_warp: Vec<u32>,
    pub warps_per_cta: Vec<u32>,
    /// Dimensions from fastest- to slowest-varying (Triton's convention): lanes, warps and
    /// registers are assigned to `order[0]` first.
    pub order: Vec<u32>,
}

/// Where a thread-dependent coordinate term comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadSrc {
    Lane,
    Warp,
}

/// `((src >> shift) & mask) * mult`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ThreadTerm {
    pub src: ThreadSrc,
    pub shift: u32,
    pub mask: u32,
    pub mult: u32,
}

/// A layout applied to a shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dist {
    pub shape: Vec<usize>,
    /// Per register, the static part of its coordinate in each dimension.
    pub regs: Vec<Vec<u32>>,
    /// Per dimension, the thread-dependent terms added to the static part.
    pub terms: Vec<Vec<ThreadTerm>>,
    /// Per dimension, whether the unwrapped coordinate can exceed the extent (the layout's block
    /// is larger than the shape), so coordinates are taken modulo the extent and only the
    /// thread whose unwrapped coordinate is in range owns the element.
    pub wrap: Vec<bool>,
    /// Thread components along dimensions sliced away: a thread owns its elements only where
    /// these are zero (the other threads hold copies).
    pub replica_terms: Vec<ThreadTerm>,
}

impl Layout {
    pub fn rank(&self) -> usize {
        match self {
            Layout::Uniform => 0,
            Layout::Blocked(b) => b.size_per_thread.len(),
            Layout::Slice { parent, .. } => parent.rank() - 1,
            Layout::Mma(_) | Layout::DotOperand { .. } | Layout::Coop(_) => 2,
        }
    }

    /// Applies the layout to `shape` (whose rank must equal the layout's).
    pub fn dist(&self, shape: &[usize], warp_size: u32) -> Dist {
        match self {
            Layout::Uniform => Dist { shape: vec![], regs: vec![vec![]], terms: vec![], wrap: vec![], replica_terms: vec![] },
            Layout::Blocked(b) => b.dist(shape, warp_size),
            Layout::Mma(m) => m.dist(shape, None),
            Layout::DotOperand { operand, parent } => parent.dist(shape, Some(*operand)),
            Layout::Coop(c) => c.dist(shape, warp_size),
            Layout::Slice { dim, parent } => {
                let d = *dim as usize;
                let mut pshape = shape.to_vec();
                pshape.insert(d, 1);
                let p = parent.dist(&pshape, warp_size);
                let regs = p
                    .regs
                    .iter()
                    .filter(|r| r[d] == 0)
                    .map(|r| {
                        let mut r = r.clone();
                        r.remove(d);
                        r
                    })
                    .collect();
                let mut terms = p.terms.clone();
                let dropped = terms.remove(d);
                let mut wrap = p.wrap.clone();
                wrap.remove(d);
                let mut replica_terms = p.replica_terms.clone();
                replica_terms.extend(dropped);
                Dist { shape: shape.to_vec(), regs, terms, wrap, replica_terms }
            }
        }
    }

    /// The same layout with dimensions permuted as `trans` permutes a tile: result dim `i` is
    /// operand dim `perm[i]`. `None` for slices (the lowering converts those first).
    pub fn permuted(&self, perm: &[u32]) -> Option<Layout> {
        match self {
            Layout::Blocked(b) => {
                let pick = |v: &[u32]| perm.iter().map(|&p| v[p as usize]).collect::<Vec<_>>();
                // order lists dims; rename each old dim to its new position.
                let mut inv = vec![0u32; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    inv[p as usize] = i as u32;
                }
                Some(Layout::Blocked(Blocked {
                    size_per_thread: pick(&b.size_per_thread),
                    threads_per_warp: pick(&b.threads_per_warp),
                    warps_per_cta: pick(&b.warps_per_cta),
                    order: b.order.iter().map(|&o| inv[o as usize]).collect(),
                }))
            }
            Layout::Uniform => Some(Layout::Uniform),
            Layout::Slice { .. } | Layout::Mma(_) | Layout::DotOperand { .. } | Layout::Coop(_) => None,
        }
    }
}

impl Blocked {
    fn dist(&self, shape: &[usize], warp_size: u32) -> Dist {
        let rank = shape.len();
        let _ = warp_size;
        let mut terms = vec![Vec::new(); rank];
        let mut lane_shift = 0;
        let mut warp_shift = 0;
        for &d in &self.order {
            let d = d as usize;
            let (spt, tpw, wpc) = (self.size_per_thread[d], self.threads_per_warp[d], self.warps_per_cta[d]);
            if tpw > 1 {
                terms[d].push(ThreadTerm { src: ThreadSrc::Lane, shift: lane_shift, mask: tpw - 1, mult: spt });
            }
            lane_shift += tpw.trailing_zeros();
            if wpc > 1 {
                terms[d].push(ThreadTerm { src: ThreadSrc::Warp, shift: warp_shift, mask: wpc - 1, mult: spt * tpw });
            }
            warp_shift += wpc.trailing_zeros();
        }
        let tile: Vec<usize> = (0..rank).map(|d| (self.size_per_thread[d] * self.threads_per_warp[d] * self.warps_per_cta[d]) as usize).collect();
        let reps: Vec<usize> = (0..rank).map(|d| (shape[d] / tile[d]).max(1)).collect();
        let wrap: Vec<bool> = (0..rank).map(|d| shape[d] < tile[d]).collect();
        // Registers: the fastest dimension varies fastest, the spt positions inside the reps, so
        // a thread's contiguous run along the fastest dimension is consecutive registers.
        let mut digits: Vec<(usize, usize, bool)> = Vec::new(); // (dim, count, is_rep) fastest first
        for &d in &self.order {
            digits.push((d as usize, self.size_per_thread[d as usize] as usize, false));
        }
        for &d in &self.order {
            digits.push((d as usize, reps[d as usize], true));
        }
        let n: usize = digits.iter().map(|x| x.1).product();
        let mut regs = Vec::with_capacity(n);
        for mut i in 0..n {
            let mut r = vec![0u32; rank];
            for &(d, count, is_rep) in &digits {
                let k = i % count;
                i /= count;
                r[d] += if is_rep { (k * tile[d]) as u32 } else { k as u32 };
            }
            regs.push(r);
        }
        Dist { shape: shape.to_vec(), regs, terms, wrap, replica_terms: Vec::new() }
    }

    /// A blocked layout for `shape` with `threads` threads in warps of `warp_size`, `vec`
    /// contiguous elements per thread along the last dimension, lanes along the last dimension
    /// first (row-major tiles coalesce), warps along the leading dimensions first.
    pub fn for_shape(shape: &[usize], vec: u32, warp_size: u32, num_warps: u32) -> Blocked {
        let mut vecs = vec![1u32; shape.len()];
        if let Some(last) = vecs.last_mut() {
            *last = vec;
        }
        Blocked::with_vectors(shape, &vecs, warp_size, num_warps)
    }

    /// [`Blocked::for_shape`] with `vecs[d]` contiguous elements per thread along every
    /// dimension `d`: a 2-D tile with vectors along both dimensions (`[4, 4]` of f32) gives each
    /// thread whole vectors of the tile and of its transpose, so `trans` between a load and a
    /// store moves no data between threads.
    pub fn with_vectors(shape: &[usize], vecs: &[u32], warp_size: u32, num_warps: u32) -> Blocked {
        let rank = shape.len();
        let order: Vec<u32> = (0..rank as u32).rev().collect();
        let mut spt = vec![1u32; rank];
        let mut tpw = vec![1u32; rank];
        let mut wpc = vec![1u32; rank];
        if rank == 0 {
            return Blocked { size_per_thread: spt, threads_per_warp: tpw, warps_per_cta: wpc, order };
        }
        let last = rank - 1;
        for d in 0..rank {
            spt[d] = vecs.get(d).copied().unwrap_or(1).min(shape[d] as u32).max(1);
        }
        // Narrower vectors rather than threads holding copies: a tile with fewer elements than
        // vec x threads would otherwise wrap, and every reduction over it would go through
        // shared memory. The leading dimensions give up theirs first.
        let total: u64 = shape.iter().map(|&s| s as u64).product();
        let threads = warp_size as u64 * num_warps as u64;
        let held = |spt: &[u32]| spt.iter().map(|&v| v as u64).product::<u64>();
        for d in (0..rank).filter(|&d| d != last).chain([last]) {
            while spt[d] > 1 && total < held(&spt) * threads {
                spt[d] /= 2;
            }
        }
        // Lanes: fastest dimension first, each taking what its extent can use.
        let mut lanes = warp_size;
        for &d in &order {
            let d = d as usize;
            let room = (shape[d] as u32 / (spt[d] * tpw[d])).max(1);
            let take = room.min(lanes);
            tpw[d] *= take;
            lanes /= take;
        }
        // Lanes left over replicate along the fastest dimension.
        tpw[last] *= lanes;
        // Warps: slowest dimension first, then the others.
        let mut warps = num_warps;
        for d in 0..rank {
            let room = (shape[d] as u32 / (spt[d] * tpw[d] * wpc[d])).max(1);
            let take = room.min(warps);
            wpc[d] *= take;
            warps /= take;
        }
        wpc[0] *= warps;
        Blocked { size_per_thread: spt, threads_per_warp: tpw, warps_per_cta: wpc, order }
    }
}

impl Dist {
    pub fn num_regs(&self) -> usize {
        self.regs.len()
    }

    /// Register index by static offsets (after reducing every extent-1 dimension to 0).
    pub fn index(&self) -> HashMap<Vec<u32>, usize> {
        let mut m = HashMap::new();
        for (i, r) in self.regs.iter().enumerate() {
            m.entry(self.key(r)).or_insert(i);
        }
        m
    }

    /// The lookup key of static offsets `r` in this distribution: offsets along extent-1
    /// dimensions are irrelevant (every position maps to coordinate 0).
    pub fn key(&self, r: &[u32]) -> Vec<u32> {
        r.iter().zip(&self.shape).map(|(&o, &s)| if s == 1 { 0 } else { o }).collect()
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[u32]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
        match self {
            Layout::Uniform => f.write_str("#uniform"),
            Layout::Blocked(b) => write!(
                f,
                "#blocked<spt [{}], tpw [{}], wpc [{}], order [{}]>",
                list(&b.size_per_thread),
                list(&b.threads_per_warp),
                list(&b.warps_per_cta),
                list(&b.order)
            ),
            Layout::Slice { dim, parent } => write!(f, "#slice<dim {dim}, {parent}>"),
            Layout::Mma(m) => write!(f, "#mma<{}, warps [{}, {}]>", m.frag.name(), m.warps[0], m.warps[1]),
            Layout::DotOperand { operand, parent } => write!(
                f,
                "#dot_operand<{}, #mma<{}, warps [{}, {}]>>",
                ["a", "b"][*operand as usize & 1],
                parent.frag.name(),
                parent.warps[0],
                parent.warps[1]
            ),
            Layout::Coop(c) => write!(f, "#coop<{}x{}, warps [{}, {}]>", c.m, c.n, c.warps[0], c.warps[1]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of the shape is owned by exactly one (thread, register).
    fn check_ownership(layout: &Layout, shape: &[usize], warp: u32, warps: u32) {
        let d = layout.dist(shape, warp);
        let numel: usize = shape.iter().product();
        let mut owners = vec![0usize; numel];
        for t in 0..warp * warps {
            let (lane, w) = (t % warp, t / warp);
            let val = |term: &ThreadTerm| {
                let s = if term.src == ThreadSrc::Lane { lane } else { w };
                ((s >> term.shift) & term.mask) * term.mult
            };
            if d.replica_terms.iter().any(|t| val(t) != 0) {
                continue;
            }
            for r in &d.regs {
                let mut lin = 0;
                let mut owned = true;
                for dim in 0..shape.len() {
                    let u = r[dim] + d.terms[dim].iter().map(val).sum::<u32>();
                    if u as usize >= shape[dim] {
                        owned = false;
                    }
                    lin = lin * shape[dim] + (u as usize % shape[dim]);
                }
                if owned {
                    owners[lin] += 1;
                }
            }
        }
        assert!(owners.iter().all(|&c| c == 1), "{layout} on {shape:?}: owners {owners:?}");
    }

    #[test]
    fn blocked_layouts_own_every_element_once() {
        for (shape, vec, warp, warps) in [
            (vec![1024usize], 4u32, 32u32, 4u32),
            (vec![8], 4, 32, 4),
            (vec![1], 1, 8, 2),
            (vec![64, 64], 4, 32, 4),
            (vec![16, 128], 1, 8, 8),
            (vec![2, 4], 1, 32, 4),
            (vec![4, 8, 16], 2, 32, 2),
        ] {
            let l = Layout::Blocked(Blocked::for_shape(&shape, vec, warp, warps));
            check_ownership(&l, &shape, warp, warps);
            // The same layout over a broadcast source shape and over smaller shapes too.
            let mut s1 = shape.clone();
            s1[0] = 1;
            check_ownership(&l, &s1, warp, warps);
        }
    }

    /// Vectors along both dimensions: the layout and its transpose own every element once, and
    /// a thread's registers hold whole runs along both dimensions.
    #[test]
    fn two_way_vectors_own_every_element_once() {
        for (shape, vecs, warp, warps) in [
            (vec![64usize, 64], [4u32, 4u32], 32u32, 4u32),
            (vec![32, 128], [4, 4], 32, 8),
            (vec![16, 16], [4, 4], 32, 4),
            (vec![1, 7usize.next_power_of_two()], [4, 4], 8, 1),
            (vec![64, 64], [8, 4], 32, 4),
        ] {
            let b = Blocked::with_vectors(&shape, &vecs, warp, warps);
            let l = Layout::Blocked(b.clone());
            check_ownership(&l, &shape, warp, warps);
            let t = l.permuted(&[1, 0]).unwrap();
            check_ownership(&t, &[shape[1], shape[0]], warp, warps);
            let numel = (shape[0] * shape[1]) as u32;
            if numel >= 16 * warp * warps {
                assert_eq!(b.size_per_thread, vecs.to_vec(), "{shape:?}");
            }
        }
        // Only the last dimension: exactly `for_shape`.
        assert_eq!(Blocked::with_vectors(&[64, 64], &[1, 4], 32, 4), Blocked::for_shape(&[64, 64], 4, 32, 4));
    }

    #[test]
    fn slices_own_every_element_once() {
        let shape = [32usize, 64];
        let l = Layout::Blocked(Blocked::for_shape(&shape, 4, 32, 4));
        for dim in 0..2u32 {
            let s = Layout::Slice { dim, parent: Box::new(l.clone()) };
            let mut rs = shape.to_vec();
            rs.remove(dim as usize);
            check_ownership(&s, &rs, 32, 4);
        }
    }

    #[test]
    fn mma_layouts_own_every_element_once() {
        for (warps, m, n, k) in [([1, 1], 16, 8, 16), ([2, 2], 64, 64, 32), ([4, 1], 128, 32, 64), ([2, 4], 32, 64, 16), ([1, 8], 16, 128, 16)] {
            let mma = Mma { warps, frag: Frag::M16n8k16 };
            let nw = warps[0] * warps[1];
            check_ownership(&Layout::Mma(mma), &[m, n], 32, nw);
            check_ownership(&Layout::DotOperand { operand: 0, parent: mma }, &[m, k], 32, nw);
            check_ownership(&Layout::DotOperand { operand: 1, parent: mma }, &[k, n], 32, nw);
        }
        for frag in [Frag::Mfma16x16x16, Frag::Mfma16x16x16T, Frag::Wmma16x16x16] {
            for (warps, m, n, k) in [([1, 1], 16, 16, 16), ([2, 2], 64, 64, 32), ([4, 1], 128, 32, 64), ([2, 4], 32, 128, 16)] {
                let mma = Mma { warps, frag };
                let (nw, lanes) = (warps[0] * warps[1], frag.lanes());
                check_ownership(&Layout::Mma(mma), &[m, n], lanes, nw);
                check_ownership(&Layout::DotOperand { operand: 0, parent: mma }, &[m, k], lanes, nw);
                check_ownership(&Layout::DotOperand { operand: 1, parent: mma }, &[k, n], lanes, nw);
            }
        }
    }

    /// The coordinate of register `r` of `lane` in a one-warp dist.
    fn at(d: &Dist, r: usize, lane: u32) -> Vec<u32> {
        (0..2).map(|dim| d.regs[r][dim] + d.terms[dim].iter().map(|t| ((lane >> t.shift) & t.mask) * t.mult).sum::<u32>()).collect()
    }

    /// Lane 5 (group 1, thread 1) holds the fragments the PTX ISA gives it.
    #[test]
    fn mma_fragments_follow_the_ptx_isa() {
        let mma = Mma { warps: [1, 1], frag: Frag::M16n8k16 };
        let c = Layout::Mma(mma).dist(&[16, 8], 32);
        assert_eq!((0..4).map(|r| at(&c, r, 5)).collect::<Vec<_>>(), [[1, 2], [1, 3], [9, 2], [9, 3]]);
        let a = Layout::DotOperand { operand: 0, parent: mma }.dist(&[16, 16], 32);
        assert_eq!((0..8).map(|r| at(&a, r, 5)).collect::<Vec<_>>(), [[1, 2], [1, 3], [9, 2], [9, 3], [1, 10], [1, 11], [9, 10], [9, 11]]);
        let b = Layout::DotOperand { operand: 1, parent: mma }.dist(&[16, 8], 32);
        assert_eq!((0..4).map(|r| at(&b, r, 5)).collect::<Vec<_>>(), [[2, 1], [3, 1], [10, 1], [11, 1]]);
    }

    /// Lane 21 (column 5, block 1) holds the fragments AMD's matrix instruction calculator
    /// gives it for v_mfma_f32_16x16x16f16: D[i][j] at lane j + 16 (i / 4), item i % 4;
    /// A[i][k] at lane i + 16 (k / 4), item k % 4; B[k][j] at lane j + 16 (k / 4), item k % 4.
    #[test]
    fn mfma_fragments_follow_the_amd_isa() {
        let mma = Mma { warps: [1, 1], frag: Frag::Mfma16x16x16 };
        let c = Layout::Mma(mma).dist(&[16, 16], 64);
        assert_eq!((0..4).map(|r| at(&c, r, 21)).collect::<Vec<_>>(), [[4, 5], [5, 5], [6, 5], [7, 5]]);
        let a = Layout::DotOperand { operand: 0, parent: mma }.dist(&[16, 16], 64);
        assert_eq!((0..4).map(|r| at(&a, r, 21)).collect::<Vec<_>>(), [[5, 4], [5, 5], [5, 6], [5, 7]]);
        let b = Layout::DotOperand { operand: 1, parent: mma }.dist(&[16, 16], 64);
        assert_eq!((0..4).map(|r| at(&b, r, 63)).collect::<Vec<_>>(), [[12, 15], [13, 15], [14, 15], [15, 15]]);
    }

    /// Lane 21 (column 5, upper half) holds what RDNA3's ISA gives it for
    /// v_wmma_f32_16x16x16_f16 in wave32: D[i][j] at lane j + 16 (i % 2), item i / 2; A[i][k]
    /// at lanes i and i + 16, item k; B[k][j] at lanes j and j + 16, item k.
    #[test]
    fn wmma_fragments_follow_the_amd_isa() {
        let mma = Mma { warps: [1, 1], frag: Frag::Wmma16x16x16 };
        let c = Layout::Mma(mma).dist(&[16, 16], 32);
        assert_eq!((0..8).map(|r| at(&c, r, 21)).collect::<Vec<_>>(), (0..8).map(|j| vec![2 * j + 1, 5]).collect::<Vec<_>>());
        let a = Layout::DotOperand { operand: 0, parent: mma }.dist(&[16, 16], 32);
        assert_eq!((0..16).map(|r| at(&a, r, 21)).collect::<Vec<_>>(), (0..16).map(|k| vec![5, k]).collect::<Vec<_>>());
        let b = Layout::DotOperand { operand: 1, parent: mma }.dist(&[16, 16], 32);
        assert_eq!((0..16).map(|r| at(&b, r, 21)).collect::<Vec<_>>(), (0..16).map(|k| vec![k, 5]).collect::<Vec<_>>());
        // The upper half holds copies: only lanes 0-15 own the operands' elements.
        assert_eq!(a.replica_terms, [ThreadTerm { src: ThreadSrc::Lane, shift: 4, mask: 1, mult: 1 }]);
        assert!(c.replica_terms.is_empty());
    }

    /// The transposed MFMA accumulator is what the instruction computes with its operands
    /// exchanged: its element (row, col) is where the instruction's own map puts (col, row); and
    /// a lane holds the same elements of it as of the `a` operand.
    #[test]
    fn transposed_mfma_is_the_exchanged_instruction() {
        let (hw, swapped) = Frag::Mfma16x16x16T.issued();
        assert_eq!((hw, swapped), (Frag::Mfma16x16x16, true));
        for lane in 0..64 {
            for j in 0..4 {
                let (r, c) = Frag::Mfma16x16x16.reg(None, j);
                let (lr, lc) = Frag::Mfma16x16x16.lane(None, lane);
                let (tr, tc) = Frag::Mfma16x16x16T.reg(None, j);
                let (tlr, tlc) = Frag::Mfma16x16x16T.lane(None, lane);
                assert_eq!((tr + tlr, tc + tlc), (c + lc, r + lr));
                let (ar, ac) = Frag::Mfma16x16x16.reg(Some(0), j);
                let (alr, alc) = Frag::Mfma16x16x16.lane(Some(0), lane);
                assert_eq!((tr + tlr, tc + tlc), (ar + alr, ac + alc));
            }
        }
    }

    /// mma.sync's operands hold k in pairs; MFMA's in fours, WMMA's all sixteen.
    #[test]
    fn k_runs_of_the_fragments() {
        let runs = |f: Frag| (f.k_run(Some(0)), f.k_run(Some(1)));
        assert_eq!(runs(Frag::M16n8k16), (2, 2));
        assert_eq!(runs(Frag::M16n8k8), (1, 1));
        assert_eq!(runs(Frag::Mfma16x16x16), (4, 4));
        assert_eq!(runs(Frag::Wmma16x16x16), (16, 16));
    }

    /// The bank-conflict model on AMD's fragments read from K-contiguous staged copies of f16:
    /// rows of 32 or 64 elements put the lanes of a group on a few banks (MFMA's b64 reads
    /// 8-way, WMMA's b128 reads 4-way at K = 32), and the pad `staged_pad` picks removes every
    /// conflict at each K the kernels stage, for `a` and `b` alike.
    #[test]
    fn staged_pads_make_fragment_reads_conflict_free() {
        assert_eq!(Frag::Mfma16x16x16.staged_read_conflicts(0, 32, 2), 8);
        assert_eq!(Frag::Wmma16x16x16.staged_read_conflicts(0, 32, 2), 4);
        for frag in [Frag::Mfma16x16x16, Frag::Mfma16x16x16T, Frag::Wmma16x16x16] {
            for which in [0, 1] {
                for k in [16, 32, 64, 128, 256] {
                    let pad = frag.staged_pad(which, k, 2);
                    assert_eq!(frag.staged_read_conflicts(which, k + pad, 2), 1, "{frag:?} operand {which}, K = {k}: pad {pad}");
                    // The pad keeps every access aligned to its width.
                    assert_eq!(pad % ((frag.k_run(Some(which)) * 2).min(16) / 2), 0, "{frag:?} {which} {k}");
                }
            }
        }
        assert_eq!(Frag::Mfma16x16x16.staged_pad(0, 32, 2), 4);
        assert_eq!(Frag::Wmma16x16x16.staged_pad(0, 32, 2), 8);
    }

    /// tf32's fragments read from K-contiguous staged copies of f32: a row of 32 puts the
    /// eight groups of `a`'s lanes on the same four banks, and a pad of four removes it.
    #[test]
    fn tf32_fragments_read_conflict_free_with_a_pad() {
        assert_eq!(Frag::M16n8k8.staged_read_conflicts(0, 32, 4), 8);
        for which in [0, 1] {
            for k in [8, 16, 32, 64, 128] {
                let pad = Frag::M16n8k8.staged_pad(which, k, 4);
                assert_eq!(Frag::M16n8k8.staged_read_conflicts(which, k + pad, 4), 1, "operand {which}, K = {k}: pad {pad}");
            }
        }
        assert_eq!(Frag::M16n8k8.staged_pad(0, 32, 4), 4);
    }

    /// The layouts' thread terms and the fragment maps the emulator's instruction model reads
    /// ([`Frag::lane`], [`Frag::reg`]) agree for every lane and register of every instruction.
    #[test]
    fn layouts_agree_with_the_fragment_maps() {
        for frag in [Frag::M16n8k16, Frag::M16n8k8, Frag::Mfma16x16x16, Frag::Mfma16x16x16T, Frag::Wmma16x16x16] {
            let mma = Mma { warps: [1, 1], frag };
            let (m, n, k) = frag.mnk();
            for (which, shape) in [(None, [m, n]), (Some(0), [m, k]), (Some(1), [k, n])] {
                let layout = match which {
                    None => Layout::Mma(mma),
                    Some(o) => Layout::DotOperand { operand: o, parent: mma },
                };
                let d = layout.dist(&shape.map(|x| x as usize), frag.lanes());
                assert_eq!(d.num_regs(), frag.regs(which) as usize);
                // Every element of the tile is held, by as many lanes as the operand repeats.
                let mut held = vec![0u32; (shape[0] * shape[1]) as usize];
                for lane in 0..frag.lanes() {
                    for r in 0..frag.regs(which) {
                        let ((rr, rc), (lr, lc)) = (frag.reg(which, r), frag.lane(which, lane));
                        assert_eq!(at(&d, r as usize, lane), [rr + lr, rc + lc], "{frag:?} {which:?} lane {lane} register {r}");
                        held[((rr + lr) * shape[1] + rc + lc) as usize] += 1;
                    }
                }
                let copies = if frag.replicated(which) { 2 } else { 1 };
                assert!(held.iter().all(|&h| h == copies), "{frag:?} {which:?}: {held:?}");
            }
        }
    }

    #[test]
    fn permuting_a_layout_permutes_its_registers() {
        let l = Layout::Blocked(Blocked::for_shape(&[16, 64], 4, 32, 4));
        let t = l.permuted(&[1, 0]).unwrap();
        let (a, b) = (l.dist(&[16, 64], 32), t.dist(&[64, 16], 32));
        assert_eq!(a.num_regs(), b.num_regs());
        let bi = b.index();
        for r in &a.regs {
            assert!(bi.contains_key(&vec![r[1], r[0]]));
        }
        check_ownership(&t, &[64, 16], 32, 4);
    }
}
