//! Offset analysis (Triton's AxisInfo): for every integer value, per dimension, how long its
//! runs of consecutive values are (contiguity), how long its runs of equal values are
//! (constancy), and the largest power of two dividing the first element of each run
//! (divisibility). Loads and stores use it to pick how many contiguous elements one thread
//! accesses at once.

use crate::dtype::Scalar;
use crate::ir::*;

/// Largest divisibility tracked (a value known to be 0 is divisible by everything).
pub const MAX_DIVISIBILITY: u64 = 1 << 30;

/// Facts about an integer value, one entry per dimension (one entry for a scalar).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisInfo {
    pub contiguity: Vec<u64>,
    pub divisibility: Vec<u64>,
    pub constancy: Vec<u64>,
}

impl AxisInfo {
    fn unknown(rank: usize) -> AxisInfo {
        let n = rank.max(1);
        AxisInfo { contiguity: vec![1; n], divisibility: vec![1; n], constancy: vec![1; n] }
    }

    fn scalar(div: u64) -> AxisInfo {
        AxisInfo { contiguity: vec![1], divisibility: vec![div], constancy: vec![1] }
    }
}

/// Largest power of two dividing `x` (capped; 0 gives the cap).
pub fn pow2_divisor(x: i64) -> u64 {
    if x == 0 {
        MAX_DIVISIBILITY
    } else {
        (1u64 << x.unsigned_abs().trailing_zeros()).min(MAX_DIVISIBILITY)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Analyses every value of `program`; `scalar_divisibility[p]` is what is known about scalar
/// parameter `p` (1 when nothing is).
pub fn analyse(program: &Program, scalar_divisibility: &[u64]) -> Vec<Option<AxisInfo>> {
    let mut info: Vec<Option<AxisInfo>> = vec![None; program.values.len()];
    fn go(p: &Program, b: &Block, info: &mut Vec<Option<AxisInfo>>, sdiv: &[u64]) {
        for &a in &b.args {
            // Kept when already known (a loop's induction variable, set before its body).
            if info[a.index()].is_none() {
                info[a.index()] = Some(AxisInfo::unknown(p.ty(a).rank()));
            }
        }
        for inst in &b.insts {
            // A loop's induction variable takes the values lower + k * step: what divides both
            // divides it (a chunked loop over columns keeps its accesses aligned).
            if let Op::For { lower, step, body, .. } = &inst.op {
                if let Some(&iv) = body.args.first() {
                    let div =
                        |v: &Value, info: &Vec<Option<AxisInfo>>| info[v.index()].as_ref().and_then(|a| a.divisibility.first().copied()).unwrap_or(1);
                    info[iv.index()] = Some(AxisInfo::scalar(gcd(div(lower, info), div(step, info))));
                }
            }
            for nb in inst.op.blocks() {
                go(p, nb, info, sdiv);
            }
            let Some(&r) = inst.results.first() else { continue };
            let ty = p.ty(r);
            let get = |v: Value, info: &Vec<Option<AxisInfo>>| info[v.index()].clone().unwrap_or_else(|| AxisInfo::unknown(p.ty(v).rank()));
            let rank = ty.rank();
            let ai = match &inst.op {
                Op::Const { value: Scalar::Int(c) } => AxisInfo::scalar(pow2_divisor(*c)),
                Op::Arg { param } => AxisInfo::scalar(sdiv.get(*param as usize).copied().unwrap_or(1)),
                Op::Arange { start, end } => {
                    AxisInfo { contiguity: vec![(end - start) as u64], divisibility: vec![pow2_divisor(*start)], constancy: vec![1] }
                }
                Op::Splat { x } => {
                    let xi = get(*x, info);
                    AxisInfo {
                        contiguity: vec![1; rank],
                        divisibility: vec![xi.divisibility[0]; rank],
                        constancy: ty.shape.iter().map(|&s| s as u64).collect(),
                    }
                }
                Op::Broadcast { x } => {
                    let xi = get(*x, info);
                    let xs = &p.ty(*x).shape;
                    let mut o = AxisInfo::unknown(rank);
                    for (d, &xd) in xs.iter().enumerate().take(rank) {
                        if xd == 1 && ty.shape[d] != 1 {
                            o.contiguity[d] = 1;
                            o.constancy[d] = ty.shape[d] as u64;
                            o.divisibility[d] = xi.divisibility[d];
                        } else {
                            o.contiguity[d] = xi.contiguity[d];
                            o.constancy[d] = xi.constancy[d];
                            o.divisibility[d] = xi.divisibility[d];
                        }
                    }
                    o
                }
                Op::ExpandDims { x, axis } => {
                    let mut xi = get(*x, info);
                    if p.ty(*x).is_scalar() {
                        xi = AxisInfo { contiguity: vec![], divisibility: vec![], constancy: vec![] };
                    }
                    let a = (*axis as usize).min(xi.contiguity.len());
                    // Along the new dimension every element is its own run: what divides every
                    // element (a run longer than one element holds consecutive, odd values).
                    let div =
                        xi.divisibility.iter().zip(&xi.contiguity).map(|(&dv, &c)| if c > 1 { 1 } else { dv }).min().unwrap_or(MAX_DIVISIBILITY);
                    xi.contiguity.insert(a, 1);
                    xi.divisibility.insert(a, div);
                    xi.constancy.insert(a, 1);
                    xi
                }
                Op::Trans { x, perm } => {
                    let xi = get(*x, info);
                    let pick = |v: &[u64]| perm.iter().map(|&q| v[q as usize]).collect();
                    AxisInfo { contiguity: pick(&xi.contiguity), divisibility: pick(&xi.divisibility), constancy: pick(&xi.constancy) }
                }
                Op::Cast { x } if ty.dtype.is_int() && p.ty(*x).dtype.is_int() && ty.dtype.bits() >= p.ty(*x).dtype.bits() => get(*x, info),
                Op::Binary { op, lhs, rhs } if ty.dtype.is_int() => {
                    let (a, b) = (get(*lhs, info), get(*rhs, info));
                    let n = rank.max(1);
                    let mut o = AxisInfo::unknown(rank);
                    for d in 0..n {
                        o.constancy[d] = gcd(a.constancy[d], b.constancy[d]);
                        match op {
                            BinaryOp::Add | BinaryOp::Sub => {
                                let from_lhs = gcd(a.contiguity[d], b.constancy[d]);
                                let from_rhs = if *op == BinaryOp::Add { gcd(b.contiguity[d], a.constancy[d]) } else { 1 };
                                o.contiguity[d] = from_lhs.max(from_rhs);
                                o.divisibility[d] = gcd(a.divisibility[d], b.divisibility[d]);
                            }
                            BinaryOp::Mul => {
                                o.divisibility[d] = a.divisibility[d].saturating_mul(b.divisibility[d]).min(MAX_DIVISIBILITY);
                            }
                            _ => {}
                        }
                    }
                    o
                }
                Op::Cmp { pred, lhs, rhs } => {
                    // `x < n` over a contiguous run of `x` starting at a multiple of D, with `n`
                    // constant and a multiple of D', changes value only where `x` crosses a
                    // multiple of gcd(D, D'): the mask is constant over aligned blocks of that
                    // size (Triton's rule; it lets a masked access stay one vector access).
                    let (a, b) = (get(*lhs, info), get(*rhs, info));
                    let mut o = AxisInfo::unknown(rank);
                    let run =
                        |x: &AxisInfo, k: &AxisInfo, d: usize| gcd(gcd(x.contiguity[d], k.constancy[d]), gcd(x.divisibility[d], k.divisibility[d]));
                    for d in 0..rank.max(1) {
                        let both_constant = gcd(a.constancy[d], b.constancy[d]);
                        let boundary = match pred {
                            CmpPred::Lt | CmpPred::Ge => run(&a, &b, d),
                            CmpPred::Gt | CmpPred::Le => run(&b, &a, d),
                            CmpPred::Eq | CmpPred::Ne => 1,
                        };
                        o.constancy[d] = both_constant.max(boundary);
                    }
                    o
                }
                Op::Select { on_true, on_false, .. } if ty.dtype.is_int() => {
                    let (a, b) = (get(*on_true, info), get(*on_false, info));
                    let mut o = AxisInfo::unknown(rank);
                    for d in 0..rank.max(1) {
                        o.divisibility[d] = gcd(a.divisibility[d], b.divisibility[d]);
                    }
                    o
                }
                _ => AxisInfo::unknown(rank),
            };
            info[r.index()] = Some(ai);
        }
    }
    go(program, &program.body, &mut info, scalar_divisibility);
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::Builder;
    use crate::dtype::DType;

    #[test]
    fn block_offsets_are_contiguous_and_aligned() {
        let k = Builder::new("t");
        let x = k.input("x", DType::F32);
        let n = k.scalar("n", DType::I32);
        let offs = k.program_id(0) * 1024 + k.arange(0, 1024);
        let rows = k.arange(0, 16).expand_dims(1) * n + k.arange(0, 64).expand_dims(0);
        k.load(x, offs);
        k.load(x, rows);
        let (offs, rows) = (offs.value(), rows.value());
        let p = k.into_program_unchecked();
        let info = analyse(&p, &[1, 1]);
        let oi = info[offs.index()].clone().unwrap();
        assert_eq!(oi.contiguity, vec![1024]);
        assert_eq!(oi.divisibility, vec![1024]);
        let ri = info[rows.index()].clone().unwrap();
        // Consecutive along columns, rows start at unknown multiples of n.
        assert_eq!(ri.contiguity, vec![1, 64]);
        assert_eq!(ri.divisibility[1], 1);
        // With n known divisible by 16 the row starts are 16-aligned.
        let info = analyse(&p, &[1, 16]);
        let ri = info[rows.index()].clone().unwrap();
        assert_eq!(ri.divisibility[1], 16);
    }
}
