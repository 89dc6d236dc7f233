//! A differential fuzzer: random valid tile programs, run on the interpreter (the reference)
//! and on every other device, compared under a stated tolerance rule.
//!
//! - [`gen`] builds a [`Case`] from `(seed, index)` through the public [`crate::Builder`]: a
//!   program, its grid and warps, and how to fill and compare every buffer. The same pair always
//!   gives the same case, on any machine and in any thread.
//! - [`inputs`] fills the buffers: specials (-0, subnormals, huge values, infinities, NaN,
//!   integer extremes) and random values, or "tame" small dyadic values where the program sums
//!   floats, so that any summation order gives the same bits.
//! - [`run`] runs a case on a device and classifies the outcome: agreement, an explained
//!   difference (a documented backend freedom, such as f32 subnormals flushed where the driver
//!   lacks the float controls), an unexplained mismatch, a refusal (a device that cannot
//!   compile the program, never counted as a pass), or a known bug (a failure with the
//!   signature of a bug an expect-fail filetest records: [`run::known_bug`]).
//! - [`compare`] is the tolerance rule (docs/semantics.md): exact where the semantics are exact,
//!   an error bound per approximate op on GPUs, any NaN for a NaN, and +0 = -0 only where the
//!   program's max/min leave the sign of a zero open.
//! - [`shrink`] reduces a failing case while it fails the same way; [`filetest`] saves it as a
//!   text-form program with a header, and replays saved ones (tests/fuzz/).
//! - [`cmd`] is `tilekit fuzz`.

pub mod cmd;
pub mod compare;
pub mod filetest;
pub mod gen;
pub mod inputs;
pub mod run;
pub mod shrink;

use crate::{DType, Program, Scalar};

/// How a buffer is filled before a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fill {
    /// Specials and random values of the dtype.
    Wild,
    /// Small dyadic values (see [`inputs::tame_values`]): sums of them are exact in any order.
    Tame,
    /// An output: one recognisable bit pattern, so an element nobody wrote compares equal.
    Poison,
}

impl Fill {
    pub fn name(self) -> &'static str {
        match self {
            Fill::Wild => "wild",
            Fill::Tame => "tame",
            Fill::Poison => "poison",
        }
    }
    pub fn from_name(s: &str) -> Option<Fill> {
        [Fill::Wild, Fill::Tame, Fill::Poison].into_iter().find(|f| f.name() == s)
    }
}

/// An approximate float operation, whose GPU result may differ from the interpreter's within
/// the bound [`compare::approx_bound`] gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Approx {
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tanh,
    Erf,
    Div,
}

impl Approx {
    pub const ALL: [Approx; 11] = [
        Approx::Exp,
        Approx::Exp2,
        Approx::Log,
        Approx::Log2,
        Approx::Sqrt,
        Approx::Rsqrt,
        Approx::Sin,
        Approx::Cos,
        Approx::Tanh,
        Approx::Erf,
        Approx::Div,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Approx::Exp => "exp",
            Approx::Exp2 => "exp2",
            Approx::Log => "log",
            Approx::Log2 => "log2",
            Approx::Sqrt => "sqrt",
            Approx::Rsqrt => "rsqrt",
            Approx::Sin => "sin",
            Approx::Cos => "cos",
            Approx::Tanh => "tanh",
            Approx::Erf => "erf",
            Approx::Div => "div",
        }
    }
    pub fn from_name(s: &str) -> Option<Approx> {
        Approx::ALL.into_iter().find(|a| a.name() == s)
    }
    /// The op in the library's table of error bounds.
    pub fn math_op(self) -> tilekit_core::precision::MathOp {
        use tilekit_core::precision::MathOp;
        match self {
            Approx::Exp => MathOp::Exp,
            Approx::Exp2 => MathOp::Exp2,
            Approx::Log => MathOp::Log,
            Approx::Log2 => MathOp::Log2,
            Approx::Sqrt => MathOp::Sqrt,
            Approx::Rsqrt => MathOp::Rsqrt,
            Approx::Sin => MathOp::Sin,
            Approx::Cos => MathOp::Cos,
            Approx::Tanh => MathOp::Tanh,
            Approx::Erf => MathOp::Erf,
            Approx::Div => MathOp::Div,
        }
    }
}

/// How a buffer's contents after the run are compared with the interpreter's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Check {
    /// Bit for bit (any NaN matches any NaN).
    Exact,
    /// Bit for bit, except that +0 and -0 are equal: values that went through a float max or
    /// min, whose result for (+0, -0) the semantics leave open.
    SignedZero,
    /// The result of one approximate op, stored directly: exact on the CPU devices, within the
    /// op's bound on GPUs.
    Approx(Approx),
}

impl Check {
    pub fn name(self) -> String {
        match self {
            Check::Exact => "exact".into(),
            Check::SignedZero => "signed-zero".into(),
            Check::Approx(a) => format!("approx-{}", a.name()),
        }
    }
    pub fn from_name(s: &str) -> Option<Check> {
        match s {
            "exact" => Some(Check::Exact),
            "signed-zero" => Some(Check::SignedZero),
            _ => s.strip_prefix("approx-").and_then(Approx::from_name).map(Check::Approx),
        }
    }
}

/// One buffer parameter of a case.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferCase {
    pub name: String,
    pub dtype: DType,
    pub len: usize,
    pub fill: Fill,
    pub check: Check,
    /// For the result of an approximate op: the outputs that hold its operands at the same
    /// elements (by name), so the tolerance rule can see where each element's operands lie.
    pub operands: Vec<String>,
}

/// A program with everything needed to run it: grid, warps, buffers and scalar arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub program: Program,
    pub grid: [u32; 3],
    pub num_warps: u32,
    /// The software-pipelining depth the case runs with (1: none).
    pub num_stages: u32,
    /// One per buffer parameter, in parameter order.
    pub buffers: Vec<BufferCase>,
    /// Scalar arguments: (parameter index, value).
    pub scalars: Vec<(usize, Scalar)>,
    /// Seed of the buffers' contents ([`inputs::fill`]).
    pub input_seed: u64,
}

/// splitmix64: a small, fast generator with no global state, so that `(seed, index)` gives the
/// same case in any thread.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The generator of program `index` of campaign `seed`.
    pub fn for_case(seed: u64, index: u64) -> Rng {
        let mut r = Rng(seed ^ 0x5851_F42D_4C95_7F2D);
        let a = r.next_u64();
        Rng(a ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo) as u64 + 1) as i64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}
