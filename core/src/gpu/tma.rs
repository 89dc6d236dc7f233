//! Tensor copies (the tensor memory accelerator of sm_90a): which pipelined loads one thread
//! can copy as whole boxes of a 2-D tensor, described on the host by a tensor map.
//!
//! A load qualifies where its offsets and mask say, as polynomials over the tile's element
//! indices and the program's scalars, exactly what a tensor map says: element `(r, c)` of the
//! tile is element `(o_r + r, o_c + c)` of a row-major matrix with `rows x cols` elements and a
//! row stride of `stride` elements, read where `o_r + r < rows` and `o_c + c < cols`, zero
//! elsewhere. `rows`, `cols` and `stride` must be constants or scalar parameters (the host
//! builds the map from the launch's arguments), and the launch's specialization must say they
//! are positive and that the stride is a multiple of 16 bytes: a launch for which that does
//! not hold compiles another kernel, with per-thread copies. The origins `o_r`, `o_c` are
//! computed in the kernel, for each iteration.

use std::collections::{BTreeMap, HashMap};

use crate::dtype::{DType, Scalar};
use crate::ir::{BinaryOp, CmpPred, Op, Program, Value};

/// A tensor map's extent or stride: a constant, or the value of a scalar parameter at launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    Const(i64),
    Param(u32),
}

impl Extent {
    /// Its value at a launch whose scalar parameter `p` is `scalar(p)`.
    pub fn value(&self, scalar: &dyn Fn(u32) -> Option<i64>) -> Option<i64> {
        match *self {
            Extent::Const(c) => Some(c),
            Extent::Param(p) => scalar(p),
        }
    }
}

/// A 2-D tensor map the host encodes for a launch and passes as a kernel parameter (after the
/// program's own, in this order): tiled, 128-byte swizzle, out-of-bounds elements zero.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorMap {
    /// The buffer's parameter index in the program.
    pub param: u32,
    pub dtype: DType,
    /// Elements along the contiguous dimension, then rows.
    pub dims: [Extent; 2],
    /// Elements between consecutive rows.
    pub stride: Extent,
    /// The box one copy moves: elements along the contiguous dimension (128 bytes), then rows.
    pub box_dims: [u32; 2],
}

/// A tensor map's values at one launch ([`TensorMap::resolve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedMap {
    pub dims: [u64; 2],
    /// Bytes between consecutive rows.
    pub row_bytes: u64,
}

impl TensorMap {
    /// Its extents at a launch, or what keeps the launch from using it (the specialization
    /// that compiled the kernel promised otherwise: a caller bypassing it).
    pub fn resolve(&self, scalar: &dyn Fn(u32) -> Option<i64>) -> Result<ResolvedMap, String> {
        let get = |e: Extent, what: &str| e.value(scalar).ok_or_else(|| format!("the tensor map's {what} has no scalar argument"));
        let (cols, rows, stride) = (get(self.dims[0], "columns")?, get(self.dims[1], "rows")?, get(self.stride, "row stride")?);
        let bytes = self.dtype.size_bytes() as i64;
        if cols <= 0 || rows <= 0 || stride <= 0 {
            return Err(format!("a tensor map of {rows} x {cols} elements with a row stride of {stride} (all must be positive)"));
        }
        if (stride * bytes) % 16 != 0 {
            return Err(format!("a row stride of {stride} {} elements is not a multiple of 16 bytes", self.dtype));
        }
        Ok(ResolvedMap { dims: [cols as u64, rows as u64], row_bytes: (stride * bytes) as u64 })
    }
}

/// A term's atom: a scalar value of the program, or the index along one dimension of the tile
/// the polynomial describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Atom {
    Index(u8),
    Value(Value),
}

/// An i32 polynomial: monomials (sorted atoms) with their coefficients, in wrapping 32-bit
/// arithmetic (a ring homomorphism of the program's own, so equal polynomials are equal
/// values).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Poly(BTreeMap<Vec<Atom>, i64>);

fn wrap32(x: i64) -> i64 {
    x as i32 as i64
}

impl Poly {
    fn constant(c: i64) -> Poly {
        let mut p = Poly::default();
        p.add_term(Vec::new(), c);
        p
    }
    fn atom(a: Atom) -> Poly {
        let mut p = Poly::default();
        p.add_term(vec![a], 1);
        p
    }
    fn add_term(&mut self, mono: Vec<Atom>, c: i64) {
        let e = self.0.entry(mono).or_insert(0);
        *e = wrap32(*e + c);
        self.0.retain(|_, c| *c != 0);
    }
    fn add(&self, o: &Poly, sign: i64) -> Poly {
        let mut p = self.clone();
        for (m, c) in &o.0 {
            p.add_term(m.clone(), wrap32(sign * c));
        }
        p
    }
    fn mul(&self, o: &Poly) -> Poly {
        let mut p = Poly::default();
        for (ma, ca) in &self.0 {
            for (mb, cb) in &o.0 {
                let mut m: Vec<Atom> = ma.iter().chain(mb).copied().collect();
                m.sort();
                p.add_term(m, wrap32(ca.wrapping_mul(*cb)));
            }
        }
        p
    }
    /// Index atoms renamed by `f` (`None`: the index is always 0, the monomial vanishes).
    fn reindex(&self, f: impl Fn(u8) -> Option<u8>) -> Poly {
        let mut p = Poly::default();
        'terms: for (m, c) in &self.0 {
            let mut out = Vec::with_capacity(m.len());
            for a in m {
                match *a {
                    Atom::Index(d) => match f(d) {
                        Some(e) => out.push(Atom::Index(e)),
                        None => continue 'terms,
                    },
                    v => out.push(v),
                }
            }
            out.sort();
            p.add_term(out, *c);
        }
        p
    }
    /// The part free of index atoms, and per dimension `d < rank` the coefficient of the
    /// index alone (`None` where another product of indices appears).
    fn split(&self, rank: u8) -> Option<(Poly, Vec<Poly>)> {
        let mut base = Poly::default();
        let mut coef = vec![Poly::default(); rank as usize];
        for (m, c) in &self.0 {
            let idx: Vec<u8> = m.iter().filter_map(|a| if let Atom::Index(d) = a { Some(*d) } else { None }).collect();
            let rest: Vec<Atom> = m.iter().copied().filter(|a| !matches!(a, Atom::Index(_))).collect();
            match idx.as_slice() {
                [] => base.add_term(rest, *c),
                [d] if *d < rank => coef[*d as usize].add_term(rest, *c),
                _ => return None,
            }
        }
        Some((base, coef))
    }
    fn as_constant(&self) -> Option<i64> {
        match self.0.len() {
            0 => Some(0),
            1 => self.0.get(&Vec::new()).copied(),
            _ => None,
        }
    }
    /// The scalar values it is a polynomial in.
    pub(crate) fn values(&self) -> Vec<Value> {
        let mut out: Vec<Value> = self.0.keys().flatten().filter_map(|a| if let Atom::Value(v) = a { Some(*v) } else { None }).collect();
        out.sort();
        out.dedup();
        out
    }
    /// Each monomial's coefficient and its scalar values (with repeats), for emission.
    pub(crate) fn terms(&self) -> impl Iterator<Item = (i64, Vec<Value>)> + '_ {
        self.0.iter().map(|(m, c)| (*c, m.iter().filter_map(|a| if let Atom::Value(v) = a { Some(*v) } else { None }).collect()))
    }
}

/// How one pipelined load is copied with a tensor map.
#[derive(Clone, Debug)]
pub(crate) struct TensorLoad {
    pub map: TensorMap,
    /// The tile's first element in the tensor: column, then row, as polynomials in the
    /// program's scalars.
    pub origin: [Poly; 2],
}

/// Polynomials of a program's i32 values, by definition.
pub(crate) struct Polys<'p> {
    program: &'p Program,
    defs: &'p HashMap<Value, &'p Op>,
    memo: HashMap<Value, Option<Poly>>,
}

impl<'p> Polys<'p> {
    pub(crate) fn new(program: &'p Program, defs: &'p HashMap<Value, &'p Op>) -> Polys<'p> {
        Polys { program, defs, memo: HashMap::new() }
    }

    /// `v` (i32) as a polynomial in its tile's indices and opaque scalars; `None` where a tile
    /// is not such a polynomial.
    fn poly(&mut self, v: Value) -> Option<Poly> {
        if let Some(p) = self.memo.get(&v) {
            return p.clone();
        }
        let t = self.program.ty(v);
        let scalar = t.is_scalar();
        let r = if t.dtype != DType::I32 {
            None
        } else {
            match self.defs.get(&v).copied() {
                Some(Op::Const { value: Scalar::Int(c) }) => Some(Poly::constant(wrap32(*c))),
                Some(Op::Arange { start, .. }) => Some(Poly::constant(wrap32(*start)).add(&Poly::atom(Atom::Index(0)), 1)),
                Some(Op::Splat { x }) => self.poly(*x),
                Some(op @ (Op::Broadcast { x } | Op::ExpandDims { x, .. })) => self.poly(*x).map(|p| self.lift(op, &p)),
                Some(Op::Binary { op: op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul), lhs, rhs }) => match (self.poly(*lhs), self.poly(*rhs)) {
                    (Some(a), Some(b)) => Some(match op {
                        BinaryOp::Add => a.add(&b, 1),
                        BinaryOp::Sub => a.add(&b, -1),
                        _ => a.mul(&b),
                    }),
                    _ if scalar => Some(Poly::atom(Atom::Value(v))),
                    _ => None,
                },
                Some(Op::Binary { op: BinaryOp::Shl, lhs, rhs }) => match (self.poly(*lhs), self.poly(*rhs).and_then(|s| s.as_constant())) {
                    (Some(a), Some(s)) if (0..31).contains(&s) => Some(a.mul(&Poly::constant(wrap32(1 << s)))),
                    _ if scalar => Some(Poly::atom(Atom::Value(v))),
                    _ => None,
                },
                _ if scalar => Some(Poly::atom(Atom::Value(v))),
                _ => None,
            }
        };
        self.memo.insert(v, r.clone());
        r
    }

    /// The comparisons `lhs < rhs` whose conjunction `mask` is, in the mask's coordinates.
    fn bounds(&mut self, mask: Value) -> Option<Vec<(Poly, Poly)>> {
        match self.defs.get(&mask).copied() {
            Some(Op::Binary { op: BinaryOp::And, lhs, rhs }) => {
                let mut a = self.bounds(*lhs)?;
                a.extend(self.bounds(*rhs)?);
                Some(a)
            }
            Some(Op::Cmp { pred: CmpPred::Lt, lhs, rhs }) => Some(vec![(self.poly(*lhs)?, self.poly(*rhs)?)]),
            Some(Op::Cmp { pred: CmpPred::Gt, lhs, rhs }) => Some(vec![(self.poly(*rhs)?, self.poly(*lhs)?)]),
            Some(op @ (Op::Broadcast { x } | Op::ExpandDims { x, .. })) => {
                Some(self.bounds(*x)?.into_iter().map(|(a, b)| (self.lift(op, &a), self.lift(op, &b))).collect())
            }
            _ => None,
        }
    }

    /// `p`, a polynomial in the indices of a broadcast's or an expansion's operand, in the
    /// indices of its result: a dimension of extent 1 that a broadcast widens is always 0 there,
    /// and an expansion shifts the dimensions from its axis on.
    fn lift(&self, op: &Op, p: &Poly) -> Poly {
        match op {
            Op::Broadcast { x } => {
                let from = &self.program.ty(*x).shape;
                p.reindex(|d| if from[d as usize] == 1 { None } else { Some(d) })
            }
            Op::ExpandDims { axis, .. } => {
                let axis = *axis as u8;
                p.reindex(|d| Some(if d < axis { d } else { d + 1 }))
            }
            _ => p.clone(),
        }
    }

    /// A constant, or a scalar parameter as it is.
    fn extent(&self, p: &Poly) -> Option<Extent> {
        if let Some(c) = p.as_constant() {
            return Some(Extent::Const(c));
        }
        let (m, c) = p.0.iter().next().filter(|_| p.0.len() == 1)?;
        match (m.as_slice(), c) {
            ([Atom::Value(v)], 1) => match self.defs.get(v).copied() {
                Some(Op::Arg { param }) => Some(Extent::Param(*param)),
                _ => None,
            },
            _ => None,
        }
    }

    /// How the load of a `shape` tile from buffer parameter `param` at `offsets` where `mask`
    /// holds is copied with a tensor map, contiguous along dimension `1 - transposed`; `known`
    /// says whether an extent is positive (and a stride, whether a multiple of 16 bytes).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tensor_load(
        &mut self,
        param: u32,
        dtype: DType,
        offsets: Value,
        mask: Option<Value>,
        shape: [usize; 2],
        transposed: bool,
        known: &dyn Fn(Extent, bool) -> bool,
    ) -> Option<TensorLoad> {
        let (c, r) = if transposed { (0u8, 1u8) } else { (1, 0) };
        let stored_rows = shape[r as usize];
        let stored_cols = shape[c as usize];
        let box_cols = 128 / dtype.size_bytes();
        if dtype.size_bytes() != 2 || stored_cols % box_cols != 0 || stored_rows > 256 {
            return None;
        }
        let (base, coef) = self.poly(offsets)?.split(2)?;
        if coef[c as usize].as_constant() != Some(1) {
            return None;
        }
        let stride_poly = coef[r as usize].clone();
        let stride = self.extent(&stride_poly)?;
        let mut origin: [Option<Poly>; 2] = [None, None];
        let mut dims: [Option<Extent>; 2] = [None, None];
        for (lhs, rhs) in self.bounds(mask?)? {
            let (lo, lc) = lhs.split(2)?;
            let (ro, rc) = rhs.split(2)?;
            if rc.iter().any(|p| !p.0.is_empty()) {
                return None;
            }
            let d = match (lc[0].as_constant(), lc[1].as_constant()) {
                (Some(1), Some(0)) => 0,
                (Some(0), Some(1)) => 1,
                _ => return None,
            };
            // The contiguous dimension is the map's first.
            let k = usize::from(d != c);
            if origin[k].is_some() {
                return None;
            }
            origin[k] = Some(lo);
            dims[k] = Some(self.extent(&ro)?);
        }
        let [Some(oc), Some(or)] = origin else { return None };
        let [Some(cols), Some(rows)] = dims else { return None };
        // The offsets are the origin's, moved by the tile's indices.
        if base != or.mul(&stride_poly).add(&oc, 1) {
            return None;
        }
        if !known(cols, false) || !known(rows, false) || !known(stride, true) {
            return None;
        }
        Some(TensorLoad {
            map: TensorMap { param, dtype, dims: [cols, rows], stride, box_dims: [box_cols as u32, stored_rows as u32] },
            origin: [oc, or],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_resolves_only_to_extents_a_tensor_map_takes() {
        let map =
            TensorMap { param: 0, dtype: DType::F16, dims: [Extent::Param(4), Extent::Param(3)], stride: Extent::Param(4), box_dims: [64, 128] };
        let args = |m: i64, k: i64| {
            move |p: u32| match p {
                3 => Some(m),
                4 => Some(k),
                _ => None,
            }
        };
        assert_eq!(map.resolve(&args(200, 256)), Ok(ResolvedMap { dims: [256, 200], row_bytes: 512 }));
        // 100 f16 elements are 200 bytes, not a multiple of 16.
        assert!(map.resolve(&args(200, 100)).unwrap_err().contains("not a multiple of 16 bytes"));
        assert!(map.resolve(&args(0, 256)).unwrap_err().contains("must be positive"));
        assert!(map.resolve(&|_| None).unwrap_err().contains("no scalar argument"));
    }

    #[test]
    fn polynomials_compare_in_wrapping_i32() {
        let x = Poly::atom(Atom::Value(Value::from_index(7)));
        let i = Poly::atom(Atom::Index(0));
        // (x + i) * 3 - 3 i = 3 x, and 2^31 * 2 wraps to 0.
        let lhs = x.add(&i, 1).mul(&Poly::constant(3)).add(&i.mul(&Poly::constant(3)), -1);
        assert_eq!(lhs, x.mul(&Poly::constant(3)));
        assert_eq!(Poly::constant(1 << 31).mul(&Poly::constant(2)), Poly::default());
        let (base, coef) = lhs.add(&i, 1).split(2).unwrap();
        assert_eq!((base, coef[0].as_constant(), coef[1].as_constant()), (x.mul(&Poly::constant(3)), Some(1), Some(0)));
        // A product of indices is no affine form.
        assert!(i.mul(&i).split(2).is_none());
    }
}
