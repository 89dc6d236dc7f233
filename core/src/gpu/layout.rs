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
        }
    }

    /// Applies the layout to `shape` (whose rank must equal the layout's).
    pub fn dist(&self, shape: &[usize], warp_size: u32) -> Dist {
        match self {
            Layout::Uniform => Dist { shape: vec![], regs: vec![vec![]], terms: vec![], wrap: vec![], replica_terms: vec![] },
            Layout::Blocked(b) => b.dist(shape, warp_size),
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
            Layout::Slice { .. } => None,
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
        let rank = shape.len();
        let order: Vec<u32> = (0..rank as u32).rev().collect();
        let mut spt = vec![1u32; rank];
        let mut tpw = vec![1u32; rank];
        let mut wpc = vec![1u32; rank];
        if rank == 0 {
            return Blocked { size_per_thread: spt, threads_per_warp: tpw, warps_per_cta: wpc, order };
        }
        let last = rank - 1;
        spt[last] = vec.min(shape[last] as u32).max(1);
        // Narrower vectors rather than threads holding copies: a tile with fewer elements than
        // vec x threads would otherwise wrap, and every reduction over it would go through
        // shared memory.
        let total: u64 = shape.iter().map(|&s| s as u64).product();
        let threads = warp_size as u64 * num_warps as u64;
        while spt[last] > 1 && total < spt[last] as u64 * threads {
            spt[last] /= 2;
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
