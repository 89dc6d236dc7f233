//! Random valid tile programs, built through the public [`Builder`].
//!
//! A program loads one to three input buffers over a 1-D or 2-D tile (ragged bounds: the last
//! program's lanes are masked off), grows a pool of values with random operations, and stores
//! some of them, each to its own output buffer. Every value in the pool carries what the
//! comparison needs to know about it:
//! - `tame`: its elements are small dyadic values ([`super::inputs::tame_values`]), so float sums,
//!   scans and `dot`s of it are exact in any order; float sums are only built over tame values.
//! - `loose`: it went through a float max or min, whose result for (+0, -0) is either zero, so
//!   its zeros may differ in sign between devices; its output is compared with +0 = -0.
//!
//! Approximate ops (transcendentals, float division) end a chain: their result is stored as it
//! is, compared within the op's bound on GPUs. Integer division and shifts get operands that
//! cannot fault (divisors in 1..=8, shift amounts masked to the width), atomics whose old values
//! are used touch unique addresses, and contended ones are integer add, max and min, whose final
//! memory does not depend on the order.

use std::cell::RefCell;

use super::inputs::{tame_values, tame_within};
use super::{Approx, BufferCase, Case, Check, Fill, Rng};
use crate::{Access, Builder, DType, Rounding, Scalar, Tile};
use tilekit_core::ir::InputPrecision;
use tilekit_core::verify::VerifyError;

/// A value of the pool and what is known about it.
#[derive(Clone, Copy)]
struct V<'b> {
    t: Tile<'b>,
    /// Tame for this dtype's set (see the module doc), if tame.
    tame: Option<DType>,
    loose: bool,
}

impl<'b> V<'b> {
    fn exact(t: Tile<'b>) -> V<'b> {
        V { t, tame: None, loose: false }
    }
    fn dtype(&self) -> DType {
        self.t.dtype()
    }
    fn float(&self) -> bool {
        self.dtype().is_float()
    }
    /// Whether float sums of this value are exact in its own dtype.
    fn summable(&self) -> bool {
        !self.float() || self.tame.is_some_and(|l| tame_within(l, self.dtype()))
    }
}

enum ParamCase {
    Buffer(BufferCase),
    Scalar(Scalar),
}

/// The shape of the program's main tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `[block]` per program.
    Flat { block: usize },
    /// `[rows, cols]` per program, row-major with a row stride of `cols`.
    Grid { rows: usize, cols: usize },
}

struct Gen<'b> {
    k: &'b Builder,
    rng: RefCell<Rng>,
    params: RefCell<Vec<ParamCase>>,
    shape: Vec<usize>,
    mode: Mode,
    /// Element offsets and mask of the main tile, and the length of buffers it addresses.
    offs: Tile<'b>,
    mask: Tile<'b>,
    len: usize,
    /// Whether every lane of every program is in bounds (unmasked accesses are allowed).
    full: bool,
    /// The program's linear index and the number of programs.
    pid: Tile<'b>,
    programs: usize,
    stores: RefCell<usize>,
}

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
const INTS: [DType; 7] = [DType::I1, DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::I64];

/// The case `index` of campaign `seed`. The builder's verifier accepts every case this returns;
/// a draw it rejects (a generator bug, never expected) is retried with the next draw, and after
/// a few the last error is returned.
pub fn generate(seed: u64, index: u64) -> Result<Case, VerifyError> {
    let mut rng = Rng::for_case(seed, index);
    let mut last = None;
    for _ in 0..8 {
        let draw = rng.next_u64();
        match build(Rng::new(draw), &format!("fuzz_{seed}_{index}")) {
            Ok(case) => return Ok(case),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("eight draws were made"))
}

fn ragged(rng: &mut Rng, total: usize) -> usize {
    let primes = [1usize, 2, 3, 5, 7, 11, 13, 17, 31, 61, 97, 127, 251, 509, 1021];
    match rng.below(5) {
        0 => 1,
        1 => total,
        2 => total.saturating_sub(1).max(1),
        3 => primes.iter().copied().rfind(|&p| p <= total).unwrap_or(1),
        _ => rng.range(1, total as i64) as usize,
    }
}

fn build(mut rng: Rng, name: &str) -> Result<Case, VerifyError> {
    let rank = rng.pick(&[1u32, 1, 1, 2, 3]);
    let mut grid = [1u32; 3];
    for g in grid.iter_mut().take(rank as usize) {
        *g = rng.range(1, if rank == 1 { 4 } else { 2 }) as u32;
    }
    let programs = grid.iter().product::<u32>() as usize;
    let num_warps = rng.pick(&[1u32, 1, 2, 4, 8]);
    let mode = match rng.below(10) {
        0..=4 => Mode::Flat { block: 1 << rng.range(0, 8) },
        5..=7 => Mode::Grid { rows: 1 << rng.range(0, 5), cols: 1 << rng.range(0, 5) },
        // Square tiles, where `dot` applies (64: warpgroup matrix instructions on sm_90a).
        _ => {
            let s = rng.pick(&[16usize, 32, 64]);
            Mode::Grid { rows: s, cols: s }
        }
    };
    let input_seed = rng.next_u64();
    // Drawn apart from the program's stream: a case's program does not depend on it.
    let num_stages = Rng::new(input_seed ^ 0x5747_4745).pick(&[1u32, 1, 2, 3, 4]);
    // Half the 64 x 64 programs run on 4 warps, the shape warpgroup matrix instructions take.
    let num_warps = if mode == (Mode::Grid { rows: 64, cols: 64 }) && Rng::new(input_seed ^ 0x5747_3634).chance(0.5) { 4 } else { num_warps };
    let k = Builder::new(name);
    let mut params = Vec::new();

    // Scalars first: `n` bounds the rows (or elements), `nc` the columns.
    let (shape, rows_total) = match mode {
        Mode::Flat { block } => (vec![block], programs * block),
        Mode::Grid { rows, cols } => (vec![rows, cols], programs * rows),
    };
    let n = ragged(&mut rng, rows_total);
    let n_t = k.scalar("n", DType::I32);
    params.push(ParamCase::Scalar(Scalar::Int(n as i64)));
    let (nc, nc_t) = match mode {
        Mode::Grid { cols, .. } => {
            let nc = ragged(&mut rng, cols);
            let t = k.scalar("nc", DType::I32);
            params.push(ParamCase::Scalar(Scalar::Int(nc as i64)));
            (nc, Some(t))
        }
        Mode::Flat { .. } => (0, None),
    };
    let extra_scalar = if rng.chance(0.3) {
        let d = rng.pick(&[DType::F32, DType::I32, DType::I64, DType::U32]);
        let v = if d.is_float() {
            Scalar::Float(super::inputs::values(&mut rng, DType::F32, 1, Fill::Wild).to_f64()[0])
        } else {
            let (lo, hi) = d.int_range().unwrap_or((0, 1));
            Scalar::Int(rng.pick(&[lo, hi, 0, 1, (-1i64).max(lo), 5]))
        };
        let t = k.scalar("s", d);
        params.push(ParamCase::Scalar(v));
        Some(t)
    } else {
        None
    };

    // The program's linear index over every grid axis.
    let mut pid = k.program_id(0);
    if rank >= 2 {
        pid = pid + k.program_id(1) * k.num_programs(0);
    }
    if rank >= 3 {
        pid = pid + k.program_id(2) * k.num_programs(0) * k.num_programs(1);
    }
    let (offs, mask, len, full) = match mode {
        Mode::Flat { block } => {
            let offs = pid * block as i32 + k.arange(0, block as i64);
            (offs, offs.lt(n_t), n, n == rows_total)
        }
        Mode::Grid { rows, cols } => {
            let r = (pid * rows as i32 + k.arange(0, rows as i64)).expand_dims(1);
            let c = k.arange(0, cols as i64).expand_dims(0);
            let offs = r * cols as i32 + c;
            let nc_t = nc_t.expect("grids have a column bound");
            let mask = r.lt(n_t) & c.lt(nc_t);
            (offs, mask, (n - 1) * cols + nc, n == rows_total && nc == cols)
        }
    };
    let g = Gen {
        k: &k,
        rng: RefCell::new(rng),
        params: RefCell::new(params),
        shape,
        mode,
        offs,
        mask,
        len,
        full,
        pid,
        programs,
        stores: RefCell::new(0),
    };
    g.body(n_t, extra_scalar);
    let params = std::mem::take(&mut *g.params.borrow_mut());
    drop(g);
    let program = k.finish()?;
    let mut buffers = Vec::new();
    let mut scalars = Vec::new();
    for (i, p) in params.into_iter().enumerate() {
        match p {
            ParamCase::Buffer(b) => buffers.push(b),
            ParamCase::Scalar(s) => scalars.push((i, s)),
        }
    }
    Ok(Case { program, grid, num_warps, num_stages, buffers, scalars, input_seed })
}

impl<'b> Gen<'b> {
    fn r(&self) -> std::cell::RefMut<'_, Rng> {
        self.rng.borrow_mut()
    }
    fn chance(&self, p: f64) -> bool {
        self.r().chance(p)
    }
    fn below(&self, n: u64) -> u64 {
        self.r().below(n)
    }
    fn pick<T: Copy>(&self, xs: &[T]) -> T {
        self.r().pick(xs)
    }

    fn buffer(&self, dtype: DType, access: Access, len: usize, fill: Fill, check: Check) -> crate::Buf {
        let mut params = self.params.borrow_mut();
        let name = match access {
            Access::Read => format!("x{}", params.len()),
            Access::Write => format!("y{}", params.len()),
            Access::ReadWrite => format!("a{}", params.len()),
        };
        let b = self.k.buffer(name.clone(), dtype, access);
        params.push(ParamCase::Buffer(BufferCase { name, dtype, len, fill, check, operands: Vec::new() }));
        b
    }

    fn any_dtype(&self) -> DType {
        if self.chance(0.5) {
            self.pick(&FLOATS)
        } else {
            self.pick(&INTS)
        }
    }

    /// Loads a new input over the main tile.
    fn load_input(&self, dtype: DType, tame: bool) -> V<'b> {
        let fill = if tame { Fill::Tame } else { Fill::Wild };
        let buf = self.buffer(dtype, Access::Read, self.len, fill, Check::Exact);
        let t = if self.full && self.chance(0.3) {
            self.k.load(buf, self.offs)
        } else {
            let other = self.constant(dtype, tame);
            self.k.load_masked(buf, self.offs, self.mask, other.t)
        };
        V { t, tame: if tame && dtype.is_float() { Some(dtype) } else { None }, loose: false }
    }

    /// A scalar constant of `dtype`: a special value, or a tame one when asked.
    fn constant(&self, dtype: DType, tame: bool) -> V<'b> {
        if dtype == DType::I1 {
            return V::exact(self.k.constant(self.chance(0.5), DType::I1));
        }
        if dtype.is_float() {
            let x = if tame {
                let t = tame_values(dtype);
                self.pick(&t)
            } else {
                self.pick(&[0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 3.0e38, 1.0e-40, 65504.0, 1.0e-7])
            };
            let level = FLOATS.iter().rev().copied().find(|&d| tame_values(d).iter().any(|&v| v.to_bits() == x.to_bits()));
            let level = level.filter(|&l| tame_within(l, dtype));
            return V { t: self.k.constant(x, dtype), tame: level, loose: false };
        }
        let (lo, hi) = dtype.int_range().unwrap_or((0, 1));
        let v = if tame { self.r().range(lo.max(-4), hi.min(4)) } else { self.pick(&[0, 1, -1, 7, 3, lo, hi]).clamp(lo, hi) };
        V::exact(self.k.constant(v, dtype))
    }

    /// Whether the shape of `v` is the main tile's.
    fn is_full(&self, v: &V<'b>) -> bool {
        v.t.shape() == self.shape
    }

    fn pick_from(&self, pool: &[V<'b>], pred: impl Fn(&V<'b>) -> bool) -> Option<V<'b>> {
        let c: Vec<V<'b>> = pool.iter().copied().filter(|v| pred(v)).collect();
        if c.is_empty() {
            None
        } else {
            Some(c[self.below(c.len() as u64) as usize])
        }
    }

    /// Builds the program body.
    fn body(&self, n: Tile<'b>, extra: Option<Tile<'b>>) {
        let mut pool: Vec<V<'b>> = Vec::new();
        let inputs = self.r().range(1, 3);
        for _ in 0..inputs {
            let d = self.any_dtype();
            let tame = d.is_float() && self.chance(0.5);
            pool.push(self.load_input(d, tame));
        }
        if self.chance(0.3) {
            pool.push(V::exact(self.offs));
        }
        if self.chance(0.2) {
            pool.push(V::exact(self.pid));
        }
        if self.chance(0.2) {
            pool.push(V::exact(n));
        }
        if let Some(s) = extra {
            pool.push(V::exact(s));
        }
        let ops = self.r().range(3, 14);
        for _ in 0..ops {
            self.step(&mut pool, true);
        }
        // Store one to three values, at least one of the main tile's shape or broadcast to it.
        let stores = self.r().range(1, 3);
        for _ in 0..stores {
            if let Some(v) = self.pick_from(&pool, |_| true) {
                self.store(v, None);
            }
        }
        if *self.stores.borrow() == 0 {
            let v = pool[0];
            self.store(v, None);
        }
    }

    /// Stores `v` to a new output: over the main tile when it broadcasts to it, at the program's
    /// index when it is a scalar. `approx` names the op that made it, if approximate.
    fn store(&self, v: V<'b>, approx: Option<Approx>) {
        self.store_with_operands(v, approx, &[]);
    }

    /// [`Self::store`], and `operands` (the approximate op's, at the result's shape) beside it
    /// in outputs of their own, written where the result is: the tolerance rule needs an
    /// element's operands to tell whether it lies where the op's error is bounded.
    fn store_with_operands(&self, v: V<'b>, approx: Option<Approx>, operands: &[V<'b>]) {
        *self.stores.borrow_mut() += 1;
        let check = match approx {
            Some(a) => Check::Approx(a),
            None if v.loose => Check::SignedZero,
            None => Check::Exact,
        };
        // Sometimes the store converts: the builder inserts the cast, except from a float to an
        // integer, which must be written out (it has a rounding mode).
        let dtype = if approx.is_none() && self.chance(0.2) { self.any_dtype() } else { v.dtype() };
        let check = if dtype.is_int() && matches!(check, Check::SignedZero) { Check::Exact } else { check };
        let v = if v.float() && !dtype.is_float() { V::exact(self.to_int(v.t, dtype)) } else { v };
        let at_pid = v.t.shape().is_empty() && self.chance(0.5);
        // Unmasked only where every lane is in bounds.
        let whole = !at_pid && self.full && self.chance(0.3);
        let masked = !at_pid && !whole;
        let write = |t: Tile<'b>, dtype: DType, check: Check| {
            let len = if at_pid { self.programs } else { self.len };
            let buf = self.buffer(dtype, Access::Write, len, Fill::Poison, check);
            if at_pid {
                self.k.store(buf, self.pid, t);
            } else if masked {
                self.k.store_masked(buf, self.offs, t, self.mask);
            } else {
                self.k.store(buf, self.offs, t);
            }
            self.params.borrow().len() - 1
        };
        let result = write(v.t, dtype, check);
        let mut names = Vec::new();
        for o in operands {
            let check = if o.float() && o.loose { Check::SignedZero } else { Check::Exact };
            let p = write(o.t.broadcast_to(&v.t.shape()), o.dtype(), check);
            if let ParamCase::Buffer(b) = &self.params.borrow()[p] {
                names.push(b.name.clone());
            }
        }
        if let ParamCase::Buffer(b) = &mut self.params.borrow_mut()[result] {
            b.operands = names;
        }
    }

    /// One random operation on the pool; `top` allows stores, atomics, loops and branches.
    fn step(&self, pool: &mut Vec<V<'b>>, top: bool) {
        let choice = self.below(if top { 20 } else { 9 });
        let made = match choice {
            0 | 1 => self.unary(pool),
            2..=4 => self.binary(pool),
            5 => self.compare(pool),
            6 => self.select(pool),
            7 => self.cast(pool),
            8 => Some(self.constant_tile(pool)),
            9 | 10 => self.reduce(pool),
            11 => self.scan(pool),
            12 => {
                self.approx(pool);
                None
            }
            13 => self.fma(pool),
            14 => self.for_loop(pool),
            15 => self.branch(pool),
            16 => self.atomic(pool),
            17 => self.dot(pool),
            18 => self.gather(pool),
            _ => Some(self.load_input(self.any_dtype(), self.chance(0.5))),
        };
        if let Some(v) = made {
            pool.push(v);
        }
    }

    fn constant_tile(&self, pool: &[V<'b>]) -> V<'b> {
        let d = pool.get(self.below(pool.len().max(1) as u64) as usize).map(|v| v.dtype()).unwrap_or(DType::F32);
        let c = self.constant(d, self.chance(0.5));
        if self.chance(0.5) {
            c
        } else {
            V { t: self.k.splat(c.t, &self.shape), ..c }
        }
    }

    fn unary(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let x = self.pick_from(pool, |_| true)?;
        Some(if x.float() {
            match self.below(5) {
                0 => V { t: -x.t, ..x },
                1 => V { t: x.t.abs(), ..x },
                2 => V { t: x.t.floor(), ..x },
                3 => V { t: x.t.ceil(), ..x },
                _ => V { t: x.t.round(), ..x },
            }
        } else if x.dtype() == DType::I1 || self.chance(0.4) {
            V::exact(!x.t)
        } else if self.chance(0.5) {
            V::exact(-x.t)
        } else {
            V::exact(x.t.abs())
        })
    }

    /// `x` as an integer fit for arithmetic (i1 becomes i32).
    fn arith(&self, x: V<'b>) -> V<'b> {
        if x.dtype() == DType::I1 {
            V::exact(x.t.cast(DType::I32))
        } else {
            x
        }
    }

    fn binary(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let a = self.pick_from(pool, |_| true)?;
        let b = self.pick_from(pool, |_| true)?;
        let loose = a.loose || b.loose;
        let both_int = !a.float() && !b.float();
        let tame_both = match (a.tame, b.tame) {
            (Some(x), Some(y)) => Some(if tame_within(x, y) { y } else { x }),
            _ => None,
        };
        Some(match self.below(8) {
            0 | 1 => {
                let (a, b) = (self.arith(a), self.arith(b));
                let t = match self.below(3) {
                    0 => a.t + b.t,
                    1 => a.t - b.t,
                    _ => a.t * b.t,
                };
                V { t, tame: None, loose }
            }
            2 => {
                // Maximum and minimum: a float pair leaves the sign of a zero open.
                let t = if self.chance(0.5) { a.t.maximum(b.t) } else { a.t.minimum(b.t) };
                V { t, tame: tame_both, loose: loose || t.dtype().is_float() }
            }
            3 if both_int => {
                let (a, b) = (self.arith(a), self.arith(b));
                // A divisor in 1..=8: no division by zero and no MIN / -1.
                let d = (b.t & 7) + 1;
                V::exact(if self.chance(0.5) { a.t / d } else { a.t % d })
            }
            3 if a.tame.is_some() && b.tame.is_some() => V { t: a.t % b.t, tame: tame_both, loose },
            4 | 5 if both_int => {
                if a.dtype() == DType::I1 || b.dtype() == DType::I1 {
                    let (a, b) = (a.t.cast(DType::I1), b.t.cast(DType::I1));
                    V::exact(match self.below(3) {
                        0 => a & b,
                        1 => a | b,
                        _ => a ^ b,
                    })
                } else {
                    V::exact(match self.below(3) {
                        0 => a.t & b.t,
                        1 => a.t | b.t,
                        _ => a.t ^ b.t,
                    })
                }
            }
            6 if both_int && a.dtype() != DType::I1 => {
                let amount = b.t.cast(a.dtype()) & (a.dtype().bits() as i64 - 1);
                V::exact(if self.chance(0.5) { a.t << amount } else { a.t >> amount })
            }
            _ => {
                let (a, b) = (self.arith(a), self.arith(b));
                V { t: a.t + b.t, tame: None, loose }
            }
        })
    }

    fn compare(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let a = self.pick_from(pool, |_| true)?;
        let b = self.pick_from(pool, |_| true)?;
        Some(V::exact(match self.below(6) {
            0 => a.t.lt(b.t),
            1 => a.t.le(b.t),
            2 => a.t.gt(b.t),
            3 => a.t.ge(b.t),
            4 => a.t.eq(b.t),
            _ => a.t.ne(b.t),
        }))
    }

    fn select(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let c = self.pick_from(pool, |v| v.dtype() == DType::I1).map(|v| v.t).or_else(|| {
            let a = self.pick_from(pool, |_| true)?;
            let b = self.pick_from(pool, |_| true)?;
            Some(a.t.lt(b.t))
        })?;
        let a = self.pick_from(pool, |_| true)?;
        let b = self.pick_from(pool, |_| true)?;
        let tame = match (a.tame, b.tame) {
            (Some(x), Some(y)) => Some(if tame_within(x, y) { y } else { x }),
            _ => None,
        };
        let t = self.k.select(c, a.t, b.t);
        let tame = tame.filter(|&l| tame_within(l, t.dtype()));
        Some(V { t, tame, loose: a.loose || b.loose })
    }

    fn cast(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let x = self.pick_from(pool, |_| true)?;
        let to = self.any_dtype();
        let t = if !to.is_float() && self.chance(0.4) { self.to_int(x.t, to) } else { x.t.cast(to) };
        Some(V { t, tame: x.tame.filter(|&l| tame_within(l, to)), loose: x.loose && to.is_float() })
    }

    /// `x` converted to the integer dtype `to` by a random one of the explicit conversions:
    /// the truncating `cast` or a saturating cast in one of its rounding modes.
    fn to_int(&self, x: Tile<'b>, to: DType) -> Tile<'b> {
        match self.below(5) {
            0 => x.cast(to),
            1 => x.cast_saturating(to, Rounding::NearestEven),
            2 => x.cast_saturating(to, Rounding::TowardZero),
            3 => x.cast_saturating(to, Rounding::Down),
            _ => x.cast_saturating(to, Rounding::Up),
        }
    }

    /// `a * b + c` with tame `a` and `b`: their product is exact, so a fused and an unfused
    /// multiply-add agree (Vulkan's `Fma` promises only a multiply then an add).
    fn fma(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let tame = |me: &Self| match me.pick_from(pool, |v| v.float() && v.tame.is_some()) {
            Some(v) if me.chance(0.7) => v,
            _ => me.load_input(me.pick(&FLOATS), true),
        };
        let a = tame(self);
        let b = tame(self);
        let c = self.pick_from(pool, |v| v.float())?;
        Some(V { t: self.k.fma(a.t, b.t, c.t), tame: None, loose: a.loose || b.loose || c.loose })
    }

    /// An approximate op, stored at once.
    fn approx(&self, pool: &[V<'b>]) {
        let Some(x) = self.pick_from(pool, |v| v.float()) else { return };
        let op = self.pick(&Approx::ALL);
        let t = match op {
            Approx::Exp => x.t.exp(),
            Approx::Exp2 => x.t.exp2(),
            Approx::Log => x.t.log(),
            Approx::Log2 => x.t.log2(),
            Approx::Sqrt => x.t.sqrt(),
            // 1/sqrt(+-0) is +-inf: only for values whose zeros have a known sign.
            Approx::Rsqrt if !x.loose => x.t.rsqrt(),
            // Vulkan bounds sin and cos on [-pi, pi] only (lavapipe's cos(3e38) is 1): on tame
            // values, within 4.
            Approx::Sin | Approx::Cos if x.tame.is_none() => return,
            Approx::Sin => x.t.sin(),
            Approx::Cos => x.t.cos(),
            Approx::Tanh => x.t.tanh(),
            Approx::Erf => x.t.erf(),
            Approx::Div => match self.pick_from(pool, |v| v.float() && !v.loose) {
                Some(d) => {
                    let q = x.t / d.t;
                    return self.store_with_operands(V { t: q, tame: None, loose: x.loose }, Some(op), &[x, d]);
                }
                None => return,
            },
            Approx::Rsqrt => return,
        };
        self.store_with_operands(V { t, tame: None, loose: x.loose }, Some(op), &[x]);
    }

    fn reduce(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let x = self.pick_from(pool, |v| self.is_full(v))?;
        let x = if x.dtype() == DType::I1 && self.chance(0.7) { V::exact(x.t.cast(DType::I32)) } else { x };
        let axis = self.below(self.shape.len() as u64) as u32;
        let int = !x.float();
        let (t, tame, loose) = match self.below(7) {
            0 | 1 if x.summable() && x.dtype() != DType::I1 => (x.t.sum(axis), None, x.loose),
            2 => (x.t.max(axis), x.tame, x.loose || x.float()),
            3 => (x.t.min(axis), x.tame, x.loose || x.float()),
            4 => (if self.chance(0.5) { x.t.argmax(axis) } else { x.t.argmin(axis) }, None, false),
            5 if int && x.dtype() != DType::I1 => (x.t.prod(axis), None, false),
            6 if int && x.dtype() != DType::I1 => {
                let which = self.below(3);
                (
                    x.t.reduce(axis, |a, b| match which {
                        0 => a + b,
                        1 => a ^ b,
                        _ => a.maximum(b),
                    }),
                    None,
                    false,
                )
            }
            6 => {
                let max = self.chance(0.5);
                (x.t.reduce(axis, |a, b| if max { a.maximum(b) } else { a.minimum(b) }), x.tame, x.loose || x.float())
            }
            _ => (x.t.max(axis), x.tame, x.loose || x.float()),
        };
        // A reduced 2-D tile comes back as a row or column that broadcasts against the pool.
        let t = if self.shape.len() == 2 { t.expand_dims(axis) } else { t };
        Some(V { t, tame, loose })
    }

    fn scan(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let x = self.pick_from(pool, |v| self.is_full(v) && v.dtype() != DType::I1)?;
        let axis = self.below(self.shape.len() as u64) as u32;
        let int = !x.float();
        Some(match self.below(4) {
            0 if x.summable() => V { t: x.t.cumsum(axis), tame: None, loose: x.loose },
            1 if int => V::exact(x.t.cumprod(axis)),
            2 if int => {
                let (which, reverse) = (self.below(2), self.chance(0.5));
                V::exact(x.t.scan(axis, reverse, |a, b| if which == 0 { a + b } else { a.maximum(b) }))
            }
            2 => {
                let reverse = self.chance(0.5);
                V { t: x.t.scan(axis, reverse, |a, b| a.minimum(b)), tame: x.tame, loose: true }
            }
            _ => V { t: x.t.cummax(axis), tame: x.tame, loose: x.loose || x.float() },
        })
    }

    /// `a @ b + acc` on square main tiles: tame floats (exact in any order) or i8 -> i32; or,
    /// for 16-bit floats, a K loop of such products ([`Gen::dot_loop`]).
    fn dot(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let Mode::Grid { rows, cols } = self.mode else { return None };
        if rows != cols || rows < 16 {
            return None;
        }
        if self.chance(0.4) {
            return Some(self.dot_loop(pool, rows));
        }
        let (ab, acc) = self.pick(&[
            (DType::F16, DType::F32),
            (DType::F16, DType::F16),
            (DType::BF16, DType::F32),
            (DType::F32, DType::F32),
            (DType::I8, DType::I32),
        ]);
        let operand = |pool: &[V<'b>]| -> V<'b> {
            let from_pool = if ab.is_float() {
                self.pick_from(pool, |v| self.is_full(v) && v.tame.is_some_and(|l| tame_within(l, ab)))
            } else {
                self.pick_from(pool, |v| self.is_full(v))
            };
            match from_pool {
                Some(v) if self.chance(0.6) => V { t: v.t.cast(ab), ..v },
                _ => self.load_input(ab, true),
            }
        };
        let a = operand(pool);
        let b = operand(pool);
        let c = if acc.is_float() {
            self.pick_from(pool, |v| self.is_full(v) && v.tame.is_some_and(|l| tame_within(l, acc)))
                .map(|v| v.t.cast(acc))
                .unwrap_or_else(|| self.k.zeros(&self.shape, acc))
        } else {
            self.pick_from(pool, |v| self.is_full(v)).map(|v| v.t.cast(acc)).unwrap_or_else(|| self.k.zeros(&self.shape, acc))
        };
        // f32 operands multiplied as tf32 half the time (tame values are exact in tf32: the
        // rounding keeps them, and the matrix path must too).
        let precision = if ab == DType::F32 && self.chance(0.5) { InputPrecision::Tf32 } else { InputPrecision::Ieee };
        let b_t = if self.chance(0.3) { b.t.trans() } else { b.t };
        let t = a.t.dot_precision(b_t, c, precision);
        Some(V { t, tame: None, loose: a.loose || b.loose })
    }

    /// A matmul's K loop on `s x s` tiles: `acc + A[rows, :K] @ B[:K, cols]` over `ceil(K / s)`
    /// iterations, A (`programs s x K`) and B (`K x s`, or stored `s x K` and read transposed)
    /// fresh tame inputs of f16, bf16 or f32 (multiplied as tf32), K ragged (the last tile
    /// masked along K, zeros filled), summed in f32: exact. What `num_stages` pipelines, and
    /// on sm_90a with 64-wide 16-bit tiles what warpgroup matrix instructions run.
    fn dot_loop(&self, pool: &[V<'b>], s: usize) -> V<'b> {
        let ab = self.pick(&[DType::F16, DType::BF16, DType::F16, DType::BF16, DType::F32]);
        let precision = if ab == DType::F32 { InputPrecision::Tf32 } else { InputPrecision::Ieee };
        // Multiples of 8 keep the masks whole over 16-byte vectors (what the pipeliner takes).
        let kdim = match self.below(5) {
            0 => s,
            1 => 2 * s,
            2 => 8 * self.r().range(1, 3 * s as i64 / 8) as usize,
            3 => self.r().range(1, s as i64) as usize,
            _ => self.r().range(s as i64 + 1, 3 * s as i64) as usize,
        };
        let trans_b = self.chance(0.3);
        let rows_total = self.programs * s;
        let a = self.buffer(ab, Access::Read, rows_total * kdim, Fill::Tame, Check::Exact);
        let b = self.buffer(ab, Access::Read, kdim * s, Fill::Tame, Check::Exact);
        let k = self.k;
        let r = (self.pid * s as i32 + k.arange(0, s as i64)).expand_dims(1);
        let c = k.arange(0, s as i64).expand_dims(0);
        let rk = k.arange(0, s as i64);
        let acc0 = self
            .pick_from(pool, |v| self.is_full(v) && v.tame.is_some_and(|l| tame_within(l, DType::F32)))
            .map(|v| v.t.cast(DType::F32))
            .unwrap_or_else(|| k.zeros(&self.shape, DType::F32));
        let tiles = kdim.div_ceil(s) as i32;
        let (kd, si) = (kdim as i32, s as i32);
        let [acc] = k.for_range(0, tiles, 1, [acc0], |t, [acc]| {
            let kk = t * si + rk;
            let a_tile = k.load_masked(a, r * kd + kk.expand_dims(0), kk.expand_dims(0).lt(kd), 0);
            let b_offs = if trans_b { c * kd + kk.expand_dims(1) } else { kk.expand_dims(1) * si + c };
            let b_tile = k.load_masked(b, b_offs, kk.expand_dims(1).lt(kd), 0);
            [a_tile.dot_precision(b_tile, acc, precision)]
        });
        V { t: acc, tame: None, loose: false }
    }

    /// A load at offsets computed from data (a gather), always in bounds.
    fn gather(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let x = self.pick_from(pool, |v| self.is_full(v))?;
        let idx = (x.t.cast(DType::I32) & 0x7fff_ffff) % self.len as i32;
        let d = self.any_dtype();
        let tame = d.is_float() && self.chance(0.5);
        let buf = self.buffer(d, Access::Read, self.len, if tame { Fill::Tame } else { Fill::Wild }, Check::Exact);
        Some(V { t: self.k.load(buf, idx), tame: if tame { Some(d) } else { None }, loose: false })
    }

    /// A `for` loop over a value of the main tile's shape, with a few exact ops in its body.
    fn for_loop(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let init = self.pick_from(pool, |v| self.is_full(v))?;
        let any_loose = pool.iter().any(|v| v.loose);
        let trips = self.r().range(0, 4);
        let step = self.pick(&[1i64, 1, 2]);
        let wide = self.chance(0.3);
        let outer: Vec<V<'b>> = pool.to_vec();
        // A float max in the body makes the carried value loose from then on: its zeros may
        // carry either sign when it leaves the loop.
        let body_max = std::cell::Cell::new(false);
        let loose = init.loose || any_loose;
        let [out] = if wide {
            self.k.for_range(
                self.k.constant(0, DType::I64),
                self.k.constant(trips, DType::I64),
                self.k.constant(step, DType::I64),
                [init.t],
                |iv, [acc]| [self.loop_body(&outer, iv, acc, loose, &body_max)],
            )
        } else {
            self.k.for_range(0, trips, step, [init.t], |iv, [acc]| [self.loop_body(&outer, iv, acc, loose, &body_max)])
        };
        Some(V { t: out, tame: None, loose: loose || body_max.get() })
    }

    /// The body of [`Self::for_loop`]; sets `float_max` when it takes a float max.
    fn loop_body(&self, outer: &[V<'b>], iv: Tile<'b>, acc: Tile<'b>, loose: bool, float_max: &std::cell::Cell<bool>) -> Tile<'b> {
        let mut pool = outer.to_vec();
        let acc_v = V { t: acc, tame: None, loose };
        pool.push(acc_v);
        pool.push(V::exact(iv));
        let mut last = acc_v;
        let ops = self.r().range(1, 3);
        for _ in 0..ops {
            let other = self.pick_from(&pool, |_| true).unwrap_or(acc_v);
            let (a, b) = (self.arith(last), self.arith(other));
            let t = match self.below(4) {
                0 => a.t + b.t,
                1 => a.t * b.t,
                2 => {
                    let t = a.t.maximum(b.t);
                    float_max.set(float_max.get() || t.dtype().is_float());
                    t
                }
                _ => {
                    if a.float() || b.float() {
                        a.t - b.t
                    } else {
                        a.t ^ b.t
                    }
                }
            };
            last = V { t, tame: None, loose };
            pool.push(last);
        }
        last.t.cast(acc.dtype()).broadcast_to(&acc.shape())
    }

    /// An `if` on a uniform condition, each branch a few exact ops from a value of the main tile.
    fn branch(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let base = self.pick_from(pool, |v| self.is_full(v))?;
        let cond = match self.below(3) {
            0 => (self.pid % 2).eq(0),
            1 => match self.pick_from(pool, |v| v.t.shape().is_empty()) {
                Some(s) => s.t.gt(0),
                None => self.pid.lt(1),
            },
            _ => self.pid.ge(self.programs as i32 / 2),
        };
        let loose = pool.iter().any(|v| v.loose);
        let outer: Vec<V<'b>> = pool.to_vec();
        let dtype = base.dtype();
        let arm = |salt: u64| -> [Tile<'b>; 1] {
            let mut last = base;
            for _ in 0..(1 + salt % 2) {
                let other = self.pick_from(&outer, |_| true).unwrap_or(base);
                let (a, b) = (self.arith(last), self.arith(other));
                let t = match self.below(3) {
                    0 => a.t + b.t,
                    1 => a.t.minimum(b.t),
                    _ => a.t * b.t,
                };
                last = V { t, tame: None, loose };
            }
            [last.t.cast(dtype).broadcast_to(&self.shape)]
        };
        let s1 = self.below(4);
        let s2 = self.below(4);
        let [out] = self.k.if_else(cond, || arm(s1), || arm(s2));
        Some(V { t: out, tame: None, loose: loose || dtype.is_float() })
    }

    /// An atomic on a new read-write buffer: on unique addresses (the old values are used) or
    /// contended (integer add, max, min; the old values are not used).
    fn atomic(&self, pool: &[V<'b>]) -> Option<V<'b>> {
        let v = self.pick_from(pool, |v| self.is_full(v))?;
        let contended = self.chance(0.4);
        let dtype = if contended {
            self.pick(&[DType::I32, DType::U32, DType::I32, DType::I64])
        } else {
            self.pick(&[DType::I32, DType::U32, DType::F32, DType::I64])
        };
        let check = if dtype.is_float() && v.loose { Check::SignedZero } else { Check::Exact };
        let buf = self.buffer(dtype, Access::ReadWrite, self.len, Fill::Wild, check);
        let value = v.t.cast(dtype);
        if contended {
            let c = self.r().range(1, 3).min(self.len as i64) as i32;
            let offs = self.offs % c;
            match self.below(3) {
                0 => self.k.atomic_add(buf, offs, value, Some(self.mask)),
                1 => self.k.atomic_max(buf, offs, value, Some(self.mask)),
                _ => self.k.atomic_min(buf, offs, value, Some(self.mask)),
            };
            return None;
        }
        let old = if dtype.is_float() {
            self.k.atomic_add(buf, self.offs, value, Some(self.mask))
        } else {
            match self.below(5) {
                0 => self.k.atomic_add(buf, self.offs, value, Some(self.mask)),
                1 => self.k.atomic_max(buf, self.offs, value, Some(self.mask)),
                2 => self.k.atomic_min(buf, self.offs, value, Some(self.mask)),
                3 => self.k.atomic_xchg(buf, self.offs, value, Some(self.mask)),
                _ => self.k.atomic_cas(buf, self.offs, value, 3, Some(self.mask)),
            }
        };
        // Masked-off lanes' old values are unspecified: replace them.
        let zero = self.k.constant(0, dtype);
        Some(V::exact(self.k.select(self.mask, old, zero)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_deterministic_and_valid() {
        for i in 0..300 {
            let a = generate(7, i).expect("valid");
            let b = generate(7, i).expect("valid");
            assert_eq!(a, b);
            tilekit_core::verify::verify(&a.program).expect("verified");
        }
    }

    /// The generator reaches the matrix paths: among the first programs of a seed, some `dot`
    /// loops are pipelined on sm_80 (mma.sync) and some run on warpgroup matrix instructions
    /// on sm_90a; some dots are tf32 (mma.sync m16n8k8 on sm_80).
    #[test]
    fn dot_loops_reach_the_pipeliner_and_wgmma() {
        use tilekit_core::gpu::lower::LowerOptions;
        use tilekit_core::gpu::{decisions, Target};
        let (mut pipelined, mut wgmma, mut tf32) = (0, 0, 0);
        for i in 0..1500 {
            let c = generate(33, i).expect("valid");
            let mut options = LowerOptions::new(c.num_warps);
            options.num_stages = c.num_stages;
            if let Ok(d) = decisions(&c.program, &Target::cuda_sm80(), &options) {
                pipelined += usize::from(d.pipelined_loads > 0);
                tf32 += d.dots.iter().filter(|d| d.contains("m16n8k8")).count();
            }
            if let Ok(d) = decisions(&c.program, &Target::cuda_sm90a(), &options) {
                wgmma += d.dots.iter().filter(|d| d.starts_with("wgmma")).count();
            }
        }
        assert!(pipelined >= 5 && wgmma >= 1 && tf32 >= 3, "{pipelined} programs pipelined, {wgmma} wgmma dots, {tf32} tf32 dots");
    }
}
