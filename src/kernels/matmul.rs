//! `C = act(A @ B + bias)`: Triton's matmul tutorial with a fused epilogue.
//!
//! A is `M x K`, B is `K x N`, C is `M x N`, all row-major and of one dtype (f16, bf16 or f32);
//! products accumulate in f32. Each program computes one `BLOCK_M x BLOCK_N` tile of C with a loop
//! over K in steps of `BLOCK_K`, one `dot` per step.
//!
//! Programs are numbered on a 1-D grid and mapped to tiles in *grouped* order: `GROUP_M` tile rows
//! form a super-row that is walked column by column, so programs running at the same time share
//! rows of A and columns of B in L2 instead of each streaming its own (the tutorial's "L2 cache
//! optimizations"). Every load and store is masked, so M, N and K need not be multiples of the
//! blocks.
//!
//! Options: `trans_b=1` takes B as `N x K` row-major and computes `A @ B^T` (a linear layer's
//! weight, as torch.nn.Linear stores it): the B tile is then contiguous along K, which the
//! pipeliner keeps as stored and the matrix instruction reads untransposed; `bias=1` adds a
//! length-N vector to every row; `act=` is `none`, `relu`, `gelu` or
//! `silu`, applied in f32 before the cast to the output dtype. `gelu` is the tanh approximation
//! `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (GPT-2's, and PyTorch's
//! `approximate="tanh"`), computed as `x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3)))`, the
//! same function: it needs only `exp` and a division, which every target has.
//! `precision=tf32` (f32 only; Triton's `input_precision="tf32"`) rounds A's and B's elements
//! to tf32 before the products, which lets NVIDIA targets use their tf32 tensor cores; the
//! default, `ieee`, multiplies the f32 values as they are.
//!
//! `num_warps` and `num_stages` are part of the configuration for GPU lowering (warps per program,
//! software-pipelining depth of the loads feeding `dot`); they do not change the tile program.

use rand::rngs::StdRng;
use rayon::prelude::*;
use tilekit_core::ir::{round_tf32, InputPrecision};
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar, Tile};

use super::*;

/// Rows of C the host reference computes together: 16 rows of 8192 f64 are 1 MiB, which stays
/// in a core's cache while a row of B is applied to all of them.
const REFERENCE_ROWS: usize = 16;

pub struct Matmul;

/// The fused activation of the epilogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    None,
    Relu,
    /// Tanh approximation.
    Gelu,
    Silu,
}

/// `sqrt(2 / pi)`, the tanh-GELU input scale.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const GELU_CUBIC: f64 = 0.044_715;

/// The `act` option's words, in [`Activation::ALL`]'s order.
const ACTIVATIONS: [&str; 4] = ["none", "relu", "gelu", "silu"];

/// The `precision` option's words.
const PRECISIONS: [&str; 2] = ["ieee", "tf32"];

/// The `dot`'s input precision a problem asks for: `precision=tf32` only on f32.
fn precision(problem: &Problem) -> Result<InputPrecision, KernelError> {
    let p = match problem.opt("precision") {
        None => InputPrecision::Ieee,
        Some(t) => InputPrecision::from_name(t).ok_or_else(|| KernelError::Parse(format!("precision=`{t}` is not ieee or tf32")))?,
    };
    if p == InputPrecision::Tf32 && problem.dtype != DType::F32 {
        return Err(KernelError::Parse(format!("precision=tf32 rounds f32 operands; the problem's dtype is {}", problem.dtype)));
    }
    Ok(p)
}

impl Activation {
    pub const ALL: [Activation; 4] = [Activation::None, Activation::Relu, Activation::Gelu, Activation::Silu];

    pub fn name(self) -> &'static str {
        match self {
            Activation::None => "none",
            Activation::Relu => "relu",
            Activation::Gelu => "gelu",
            Activation::Silu => "silu",
        }
    }

    /// Parses the `act` option; absent means `none`.
    pub fn parse(text: Option<&str>) -> Result<Activation, KernelError> {
        match text {
            None => Ok(Activation::None),
            Some(t) => Activation::ALL
                .into_iter()
                .find(|a| a.name() == t)
                .ok_or_else(|| KernelError::Parse(format!("act=`{t}` is not an activation (expected none, relu, gelu or silu)"))),
        }
    }

    /// The activation on an f32 tile.
    #[track_caller]
    pub fn apply(self, x: Tile<'_>) -> Tile<'_> {
        match self {
            Activation::None => x,
            Activation::Relu => x.maximum(0.0),
            Activation::Gelu => {
                // 0.5 x (1 + tanh(z)) = x / (1 + exp(-2 z)), z = sqrt(2/pi) (x + 0.044715 x^3),
                // -2 z = x (a x^2 + b): an exponential where tanh is a longer sequence on every
                // backend, in an epilogue no other work overlaps. The reciprocal of 1 + exp(-2 z)
                // (at least 1) as the square of its rsqrt, which every backend has as one
                // approximate instruction where a correctly rounded division is a long sequence.
                let m2z = x * (x * x * (-2.0 * SQRT_2_OVER_PI * GELU_CUBIC) + (-2.0 * SQRT_2_OVER_PI));
                let r = (m2z.exp() + 1.0).rsqrt();
                x * r * r
            }
            Activation::Silu => x / ((-x).exp() + 1.0),
        }
    }

    /// The activation in f64, for references.
    pub fn eval(self, x: f64) -> f64 {
        match self {
            Activation::None => x,
            Activation::Relu => x.max(0.0),
            Activation::Gelu => 0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x)).tanh()),
            Activation::Silu => x / (1.0 + (-x).exp()),
        }
    }
}

/// Tile sizes and program ordering of one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulMeta {
    pub block_m: usize,
    pub block_n: usize,
    pub block_k: usize,
    pub group_m: usize,
}

impl MatmulMeta {
    pub fn from_config(config: &Config) -> Result<MatmulMeta, KernelError> {
        let meta = MatmulMeta {
            block_m: config.block("BLOCK_M")?,
            block_n: config.block("BLOCK_N")?,
            block_k: config.block("BLOCK_K")?,
            group_m: config.count("GROUP_M")?,
        };
        for (key, v) in [("BLOCK_M", meta.block_m), ("BLOCK_N", meta.block_n), ("BLOCK_K", meta.block_k)] {
            if v < 16 {
                return Err(KernelError::BadConfig(format!("{key} = {v}: `dot` needs tile extents of at least 16")));
            }
        }
        // Recorded for GPU lowering; checked here so a bad value fails at plan time.
        for key in ["num_warps", "num_stages"] {
            if config.get(key).is_ok() {
                config.count(key)?;
            }
        }
        Ok(meta)
    }
}

/// The tile program for one configuration. Parameters: `a`, `b` (`K x N`, or `N x K` with
/// `trans_b`), \[`bias`\], `c`, then the i32 scalars `M`, `N`, `K`.
pub fn build(dtype: DType, meta: MatmulMeta, trans_b: bool, bias: bool, act: Activation) -> Result<Program, KernelError> {
    build_with(dtype, meta, trans_b, bias, act, InputPrecision::Ieee)
}

/// [`build`] with the `dot`'s input precision.
pub fn build_with(
    dtype: DType,
    meta: MatmulMeta,
    trans_b: bool,
    bias: bool,
    act: Activation,
    precision: InputPrecision,
) -> Result<Program, KernelError> {
    let MatmulMeta { block_m: bm, block_n: bn, block_k: bk, group_m } = meta;
    let k = Builder::new("matmul");
    let a = k.input("a", dtype);
    let b = k.input("b", dtype);
    let bias = bias.then(|| k.input("bias", dtype));
    let c = k.output("c", dtype);
    let m = k.scalar("M", DType::I32);
    let n = k.scalar("N", DType::I32);
    let kdim = k.scalar("K", DType::I32);
    let (bm_i, bn_i, bk_i, gm_i) = (bm as i32, bn as i32, bk as i32, group_m as i32);

    // Grouped ordering: pid -> (pid_m, pid_n), GROUP_M tile rows per group, the last group
    // possibly shorter.
    let pid = k.program_id(0);
    let num_pid_m = (m + (bm_i - 1)) / bm_i;
    let num_pid_n = (n + (bn_i - 1)) / bn_i;
    let num_pid_in_group = num_pid_n * gm_i;
    let group_id = pid / num_pid_in_group;
    let first_pid_m = group_id * gm_i;
    let group_size_m = (num_pid_m - first_pid_m).minimum(gm_i);
    let pid_in_group = pid % num_pid_in_group;
    let pid_m = first_pid_m + pid_in_group % group_size_m;
    let pid_n = pid_in_group / group_size_m;

    let rm = pid_m * bm_i + k.arange(0, bm as i64);
    let rn = pid_n * bn_i + k.arange(0, bn as i64);
    let rk = k.arange(0, bk as i64);
    let mask_m = rm.expand_dims(1).lt(m);
    let mask_n = rn.expand_dims(0).lt(n);

    let k_tiles = (kdim + (bk_i - 1)) / bk_i;
    let acc0 = k.zeros(&[bm, bn], DType::F32);
    let [acc] = k.for_range(0, k_tiles, 1, [acc0], |kt, [acc]| {
        let kk = kt * bk_i + rk;
        let a_offs = rm.expand_dims(1) * kdim + kk.expand_dims(0);
        let a_tile = k.load_masked(a, a_offs, mask_m & kk.expand_dims(0).lt(kdim), 0);
        // Element (k, n) of the B tile: row k of B, or row n of B stored as N x K.
        let b_offs = if trans_b { rn.expand_dims(0) * kdim + kk.expand_dims(1) } else { kk.expand_dims(1) * n + rn.expand_dims(0) };
        let b_tile = k.load_masked(b, b_offs, kk.expand_dims(1).lt(kdim) & mask_n, 0);
        [a_tile.dot_precision(b_tile, acc, precision)]
    });

    let mut acc = acc;
    if let Some(bias) = bias {
        let row = k.load_masked(bias, rn, rn.lt(n), 0).cast(DType::F32);
        acc = acc + row.expand_dims(0);
    }
    let out = act.apply(acc).cast(dtype);
    let c_offs = rm.expand_dims(1) * n + rn.expand_dims(0);
    k.store_masked(c, c_offs, out, mask_m & mask_n);
    Ok(k.finish()?)
}

/// `n` as an i32 offset bound, or an error saying which extent is too large.
fn offset_bound(what: &str, n: usize) -> Result<i32, KernelError> {
    i32::try_from(n).map_err(|_| KernelError::BadConfig(format!("{what} = {n} exceeds i32 offsets")))
}

/// `(M, N, K)` of a problem, each at least 1.
fn dims(problem: &Problem) -> Result<(usize, usize, usize), KernelError> {
    let expected = "M x N x K, each at least 1";
    if problem.shape.len() != 3 || problem.shape.contains(&0) {
        return Err(KernelError::Shape { shape: problem.shape.clone(), expected: expected.into() });
    }
    Ok((problem.shape[0], problem.shape[1], problem.shape[2]))
}

impl Kernel for Matmul {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn description(&self) -> &'static str {
        "C = act(A @ B + bias), f32 accumulation, grouped program order"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F16, DType::BF16, DType::F32]
    }
    fn shape_doc(&self) -> &'static str {
        "M x N x K (options: trans_b=1, bias=1, act=none|relu|gelu|silu, precision=ieee|tf32)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec { name: "trans_b", kind: OptionKind::Bool, doc: "B is N x K (A @ B^T, a linear layer's weight)" },
            OptionSpec { name: "bias", kind: OptionKind::Bool, doc: "add a bias row to the product" },
            OptionSpec { name: "act", kind: OptionKind::Choice(&ACTIVATIONS), doc: "activation applied to the result" },
            OptionSpec {
                name: "precision",
                kind: OptionKind::Choice(&PRECISIONS),
                doc: "f32 only: tf32 rounds A and B to tf32 first (tensor cores on NVIDIA)",
            },
        ]
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4096, 4096, 4096], DType::F16)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        // (M, N, K, bias, act): primes and odd sizes leave partial tiles on every edge; 67 rows
        // make 5 tile rows at BLOCK_M=16, so GROUP_M=2 leaves a short last group; K = 1 and 130
        // give one partial and several K steps; 520 rows make 9 tile rows at BLOCK_M=64, so
        // GROUP_M=8 has a full group and a short one; K and N multiples of 16 (67 x 48 x 96)
        // take the pipelined path and the largest tiles. The last three take B as N x K: a
        // ragged one, and two whose K is a multiple of 16 (N ragged in one), where B's tiles
        // are pipelined as stored.
        let cases: [(usize, usize, usize, bool, &str); 15] = [
            (1, 1, 1, false, "none"),
            (1, 1, 1, true, "relu"),
            (17, 31, 67, true, "relu"),
            (67, 17, 31, false, "gelu"),
            (31, 67, 17, true, "silu"),
            (67, 45, 33, true, "none"),
            (5, 70, 1, true, "gelu"),
            (3, 2, 130, false, "relu"),
            (67, 33, 19, false, "silu"),
            (130, 97, 75, true, "gelu"),
            (520, 40, 16, false, "none"),
            (67, 48, 96, true, "gelu"),
            (17, 31, 67, false, "none"),
            (67, 48, 96, false, "relu"),
            (130, 45, 160, true, "none"),
        ];
        let mut problems: Vec<Problem> = cases
            .iter()
            .enumerate()
            .map(|(i, &(m, n, kd, bias, act))| {
                let mut p = Problem::new(&[m, n, kd], dtype).with("act", act);
                if i >= 12 {
                    p = p.with("trans_b", "1");
                }
                if bias {
                    p.with("bias", "1")
                } else {
                    p
                }
            })
            .collect();
        // tf32 on f32: ragged (partial tiles everywhere, K odd), K a multiple of 8 with
        // several K steps, and B as N x K.
        if dtype == DType::F32 {
            for (m, n, kd, trans_b) in [(67, 45, 33, false), (130, 97, 160, false), (67, 48, 96, true)] {
                let p = Problem::new(&[m, n, kd], dtype).with("precision", "tf32");
                problems.push(if trans_b { p.with("trans_b", "1") } else { p });
            }
        }
        problems
    }
    fn configs(&self) -> Vec<Config> {
        let c = |bm: i64, bn: i64, bk: i64, g: i64, w: i64, s: i64| {
            Config::new().with("BLOCK_M", bm).with("BLOCK_N", bn).with("BLOCK_K", bk).with("GROUP_M", g).with("num_warps", w).with("num_stages", s)
        };
        // Most are sized for the FMA `dot`: at most 64 accumulator elements per thread
        // (BLOCK_M * BLOCK_N / threads) on at most 8 warps. Triton's tensor-core tile of
        // 128 x 256 on 8 warps holds 128 per thread and spilled on every NVIDIA target; on 16
        // warps a thread may have only 128 registers and it spilled too. The 128 x 128 tile on
        // 4 warps (128 per thread) is for matrix instructions, whose accumulator fragments
        // need no operand registers beside them. With pipelining, the shared memory a
        // configuration needs grows with `num_stages` (one copy of each operand tile per
        // stage): those that do not fit a target fail to compile there and are skipped.
        vec![
            c(64, 64, 32, 8, 4, 3),
            c(16, 16, 16, 2, 2, 2),
            c(128, 128, 32, 8, 8, 3),
            c(128, 64, 32, 8, 4, 4),
            c(64, 128, 32, 8, 4, 4),
            c(256, 64, 32, 8, 8, 2),
            c(64, 64, 64, 8, 4, 3),
            c(32, 64, 32, 8, 4, 5),
            c(128, 128, 32, 8, 4, 3),
            c(128, 64, 32, 8, 4, 3),
            c(128, 64, 64, 8, 4, 2),
            c(128, 256, 64, 8, 8, 3),
            c(128, 256, 32, 8, 8, 4),
            c(256, 128, 64, 8, 8, 3),
            c(128, 128, 64, 8, 4, 4),
            c(128, 128, 32, 8, 4, 4),
            // Warpgroup matrix instructions keep one iteration in flight, so the copies run
            // num_stages - 2 ahead: four stages for two tiles in flight.
            c(128, 256, 64, 8, 8, 4),
            c(256, 128, 64, 8, 8, 4),
            // Smaller tiles for the smaller problems (more programs than multiprocessors):
            // two warpgroups of 64 x 128, and one warpgroup of 64 x 64.
            c(128, 128, 64, 8, 8, 4),
            c(64, 64, 64, 8, 4, 4),
        ]
    }
    fn build_plan(&self, problem: &Problem, config: &Config, target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let (m, n, kd) = dims(problem)?;
        let bias = problem.flag("bias");
        let trans_b = problem.flag("trans_b");
        let act = Activation::parse(problem.opt("act"))?;
        let precision = precision(problem)?;
        let meta = MatmulMeta::from_config(config)?;
        // Masked-off lanes still compute offsets, so bound them over the padded extents.
        let (pm, pn, pk) = (cdiv(m, meta.block_m) * meta.block_m, cdiv(n, meta.block_n) * meta.block_n, cdiv(kd, meta.block_k) * meta.block_k);
        offset_bound("padded M * K", pm.saturating_mul(pk))?;
        offset_bound("padded K * N", pk.saturating_mul(pn))?;
        offset_bound("padded M * N", pm.saturating_mul(pn))?;
        // A thread that holds its accumulators and its share of both operand tiles in registers
        // (the FMA `dot`, or matrix instructions fed from registers) spilled past half of its
        // registers on NVIDIA (128 x 128 x 32 and 128 x 64 x 64 on 4 warps of 32: 128 of 255).
        // Those tiles need the pipelined path, where asynchronous copies keep the operands in
        // shared memory: 16-bit operands (or f32 ones multiplied as tf32), at least two stages,
        // and the operands' row lengths (K, and N or with `trans_b` K again) multiples of 16 so
        // that every 16-byte copy is whole.
        let threads = program_threads(config, target);
        let per_thread = (meta.block_m * meta.block_n + meta.block_m * meta.block_k + meta.block_k * meta.block_n) / threads;
        let stages = config.count("num_stages").unwrap_or(1);
        let whole_rows = kd % 16 == 0 && (trans_b || n % 16 == 0);
        let ringed = problem.dtype.size_bytes() == 2 || precision == InputPrecision::Tf32;
        if !(ringed && stages >= 2 && whole_rows) {
            let rows = if trans_b { "K a multiple" } else { "K and N multiples" };
            check_held(
                per_thread,
                (1, 2),
                target,
                &format!("{per_thread} accumulator and operand elements per thread"),
                &format!("the rest; they spill unless pipelined, which needs 16-bit operands or tf32, num_stages >= 2 and {rows} of 16"),
            )?;
        }
        let tiles = cdiv(m, meta.block_m).saturating_mul(cdiv(n, meta.block_n));
        offset_bound("number of tiles", tiles)?;
        let dtype = problem.dtype;
        let buf = |name: &str, len: usize, role| BufferSpec { name: name.into(), dtype, len, role };
        let mut buffers = vec![buf("a", m * kd, Role::Input), buf("b", kd * n, Role::Input)];
        if bias {
            buffers.push(buf("bias", n, Role::Input));
        }
        buffers.push(buf("c", m * n, Role::Output { zeroed: false }));
        let mut args: Vec<LaunchArg> = (0..buffers.len()).map(LaunchArg::Buffer).collect();
        for d in [m, n, kd] {
            args.push(LaunchArg::Scalar(Scalar::Int(d as i64)));
        }
        Ok(Plan {
            buffers,
            launches: vec![Launch { program: build_with(dtype, meta, trans_b, bias, act, precision)?, grid: [grid_dim(tiles)?, 1, 1], args }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok((m, n, kd)) = dims(problem) else { return Vec::new() };
        let dtype = problem.dtype;
        let mut v = vec![random_buffer(rng, dtype, m * kd, -1.0, 1.0), random_buffer(rng, dtype, kd * n, -1.0, 1.0)];
        if problem.flag("bias") {
            v.push(random_buffer(rng, dtype, n, -1.0, 1.0));
        }
        v
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let Ok((m, n, kd)) = dims(problem) else { return Vec::new() };
        let act = Activation::parse(problem.opt("act")).unwrap_or(Activation::None);
        // tf32: the products of the operands rounded as the `dot` rounds them.
        let rounded;
        let (a, b) = if precision(problem) == Ok(InputPrecision::Tf32) {
            let tf32 = |v: &Vec<f64>| v.iter().map(|&x| round_tf32(x as f32) as f64).collect::<Vec<f64>>();
            rounded = (tf32(&inputs[0]), tf32(&inputs[1]));
            (&rounded.0, &rounded.1)
        } else {
            (&inputs[0], &inputs[1])
        };
        let trans_b = problem.flag("trans_b");
        let bias = if problem.flag("bias") { inputs.get(2) } else { None };
        let mut c = vec![0.0; m * n];
        // Rows are independent: the host's cores share them (the benchmark checks 8192^3), a
        // block of rows at a time so that B streams through the cache once per block, not once
        // per row. Every element sums its K products in order from 0, whatever the blocking.
        c.par_chunks_mut(n * REFERENCE_ROWS).enumerate().for_each(|(blk, rows)| {
            let i0 = blk * REFERENCE_ROWS;
            if trans_b {
                // B is N x K: each element is a dot of two contiguous runs.
                for (r, row) in rows.chunks_mut(n).enumerate() {
                    let ai = &a[(i0 + r) * kd..(i0 + r + 1) * kd];
                    for (j, cj) in row.iter_mut().enumerate() {
                        *cj = ai.iter().zip(&b[j * kd..(j + 1) * kd]).fold(0.0, |s, (x, y)| s + x * y);
                    }
                }
            } else {
                for p in 0..kd {
                    let bp = &b[p * n..(p + 1) * n];
                    for (r, row) in rows.chunks_mut(n).enumerate() {
                        let aip = a[(i0 + r) * kd + p];
                        for (cj, bv) in row.iter_mut().zip(bp) {
                            *cj += aip * bv;
                        }
                    }
                }
            }
            for row in rows.chunks_mut(n) {
                for (j, cj) in row.iter_mut().enumerate() {
                    let x = *cj + bias.map_or(0.0, |bv| bv[j]);
                    *cj = act.eval(x);
                }
            }
        });
        vec![c]
    }
    fn tolerance(&self, problem: &Problem) -> f64 {
        match problem.dtype {
            // tf32: the reference rounds the operands as the `dot` does, so what is left is the
            // sum. Tensor cores add each instruction's products into the accumulator without
            // rounding to nearest (cuBLAS's tf32 product alike: 1.2e-5 at K = 4096 and 2.1e-5
            // at 8192 on an H100, tilekit's 9.6e-6 and 1.9e-5), an error that grows with K: one
            // f32 unit (2^-23) per instruction's 8 K, but never under the f32 bound. Omitting
            // the rounding (about 2^-11 per operand) stays well above it.
            DType::F32 if precision(problem) == Ok(InputPrecision::Tf32) => {
                let k = dims(problem).map_or(1, |(_, _, k)| k);
                (k as f64 / 8.0 * 2f64.powi(-23)).max(1e-5)
            }
            // f32 in and out: the f32 sum of K products carries a relative error around
            // sqrt(K) * 2^-24, far below this.
            DType::F32 => 1e-5,
            // f16/bf16 products are exact in f32 and the sum is f32, so the one rounding of the
            // output dominates: at most 2^-11 (f16) or 2^-8 (bf16) per element, about half that
            // in the norm; a bound twice the maximum still fails on any wrong element.
            DType::F16 => 1e-3,
            DType::BF16 => 8e-3,
            _ => 0.0,
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok((m, n, kd)) = dims(problem) else { return Cost::default() };
        let (m, n, kd) = (m as u64, n as u64, kd as u64);
        let elems = m * kd + kd * n + m * n + if problem.flag("bias") { n } else { 0 };
        // The multiply-adds only: the epilogue's O(MN) work is noise next to 2MNK.
        Cost { bytes: elems * problem.dtype.size_bytes() as u64, flops: 2 * m * n * kd }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_problems_and_configs_are_errors() {
        let config = Matmul.configs()[0].clone();
        let p = Problem::new(&[16, 16, 16], DType::F16);
        assert!(matches!(Matmul.plan(&p.clone().with("act", "tanh"), &config), Err(KernelError::BadOption { .. })));
        assert!(matches!(Matmul.plan(&p.clone().with("bias", "yes"), &config), Err(KernelError::BadOption { .. })));
        assert!(matches!(Matmul.plan(&p.clone().with("causal", "1"), &config), Err(KernelError::UnknownOption { .. })));
        assert!(matches!(Matmul.plan(&Problem::new(&[16, 0, 16], DType::F16), &config), Err(KernelError::Shape { .. })));
        assert!(matches!(Matmul.plan(&Problem::new(&[16, 16], DType::F16), &config), Err(KernelError::Shape { .. })));
        assert!(matches!(Matmul.plan(&p, &config.clone().with("BLOCK_K", 8)), Err(KernelError::BadConfig(_))));
        assert!(matches!(Matmul.plan(&p, &config.clone().with("GROUP_M", 0)), Err(KernelError::Config(_))));
        assert!(matches!(Matmul.plan(&Problem::new(&[1 << 16, 1 << 16, 64], DType::F16), &config), Err(KernelError::BadConfig(_))));
        assert!(matches!(Matmul.plan(&Problem::new(&[16, 16, 16], DType::I32), &config), Err(KernelError::DType { .. })));
    }

    #[test]
    fn the_act_option_lists_every_activation() {
        assert_eq!(Activation::ALL.map(Activation::name), ACTIVATIONS);
        for a in ACTIVATIONS {
            assert_eq!(Activation::parse(Some(a)).unwrap().name(), a);
        }
    }

    /// The blocked reference sums every element in the order a plain row-by-row loop does, so
    /// the two agree bit for bit, across a partial last block and with B either way round.
    #[test]
    fn the_blocked_reference_is_the_plain_loop() {
        use rand::SeedableRng;
        let mut rng = StdRng::seed_from_u64(17);
        for trans_b in [false, true] {
            let (m, n, kd) = (2 * REFERENCE_ROWS + 5, 13, 29);
            let p = Problem::new(&[m, n, kd], DType::F32).with("trans_b", if trans_b { "1" } else { "0" }).with("bias", "1");
            let inputs: Vec<Vec<f64>> = Matmul.inputs(&p, &mut rng).iter().map(|b| b.to_f64()).collect();
            let (a, b, bias) = (&inputs[0], &inputs[1], &inputs[2]);
            let mut plain = vec![0.0; m * n];
            for i in 0..m {
                for p in 0..kd {
                    for j in 0..n {
                        plain[i * n + j] += a[i * kd + p] * if trans_b { b[j * kd + p] } else { b[p * n + j] };
                    }
                }
            }
            plain.iter_mut().enumerate().for_each(|(e, c)| *c += bias[e % n]);
            assert_eq!(Matmul.reference(&p, &inputs)[0], plain, "trans_b = {trans_b}");
        }
    }

    #[test]
    fn cost_counts_each_operand_once() {
        let p = Problem::new(&[3, 5, 7], DType::F16).with("bias", "1");
        assert_eq!(Matmul.cost(&p), Cost { bytes: 2 * (21 + 35 + 15 + 5), flops: 2 * 105 });
    }
}
