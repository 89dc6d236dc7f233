//! Flash-attention forward (Triton's fused-attention tutorial): `O = softmax(Q K^T * sm_scale) V`
//! without materialising the `S x S` score matrix.
//!
//! Q, K, V and O are `B x H x S x D`, contiguous. The grid is 2-D: axis 0 walks blocks of
//! `BLOCK_M` query rows, axis 1 the `B * H` heads. A program keeps its Q tile in registers and
//! loops over key blocks of `BLOCK_N` with the online softmax: a running row maximum `m_i`, a
//! running sum `l_i` and an accumulator rescaled by `exp(m_old - m_new)` whenever the maximum
//! grows; it divides by `l_i` once at the end. Scores are computed in base 2 (`sm_scale` folded
//! with `log2(e)`, then `exp2`), as the tutorial does, because `exp2` is the native instruction.
//!
//! `QK^T` is a `dot` of the `[BLOCK_M, D]` Q tile with a `[D, BLOCK_N]` K^T tile loaded directly
//! through transposed offsets; `PV` casts the f32 probabilities to the input dtype (the tensor
//! core operand type) and accumulates in f32. Softmax arithmetic is f32 throughout.
//!
//! `causal=1` masks keys after the query. The key loop then runs in two stages, as in the
//! tutorial: blocks entirely below the diagonal (no mask: every key precedes every query of the
//! program) and the blocks crossing the diagonal (masked), stopping at the last query row, so the
//! blocks above the diagonal are never visited. S need not be a multiple of either block: keys
//! past S score `-inf`, query rows past S are not stored. The first key block always holds key
//! 0, which every query row may see, so the running maximum is finite after it and `exp2(m_old -
//! m_new)` never meets `-inf - -inf`.
//!
//! Options: `causal=1`; `sm_scale=<float>` (default `1/sqrt(D)`).

use rand::rngs::StdRng;
use rayon::prelude::*;
use tilekit_core::{Buf, Builder, Config, DType, HostBuffer, Program, Scalar, Tile};

use super::*;

pub struct Attention;

const LOG2_E: f64 = std::f64::consts::LOG2_E;

/// The tile program. Parameters: `q`, `k`, `v`, `o`, then `S` (i32) and `sm_scale` (f32).
pub fn build(dtype: DType, block_m: usize, block_n: usize, head_dim: usize, causal: bool) -> Result<Program, KernelError> {
    let (bm, bn, d) = (block_m, block_n, head_dim);
    let k = Builder::new("attention");
    let q_buf = k.input("q", dtype);
    let k_buf = k.input("k", dtype);
    let v_buf = k.input("v", dtype);
    let o_buf = k.output("o", dtype);
    let s_len = k.scalar("S", DType::I32);
    let sm_scale = k.scalar("sm_scale", DType::F32);

    let start_m = k.program_id(0);
    let base = k.program_id(1) * s_len * d as i32;
    let offs_m = start_m * bm as i32 + k.arange(0, bm as i64);
    let offs_n = k.arange(0, bn as i64);
    let offs_d = k.arange(0, d as i64);

    let q_offs = base + offs_m.expand_dims(1) * d as i32 + offs_d.expand_dims(0);
    let q_mask = offs_m.expand_dims(1).lt(s_len);
    let q = k.load_masked(q_buf, q_offs, q_mask, 0);
    let qk_scale = sm_scale * LOG2_E;

    let ctx = Ctx { k: &k, dtype, bm, bn, d, k_buf, v_buf, s_len, base, q, qk_scale, offs_m, offs_n, offs_d };
    let state = [k.zeros(&[bm, d], DType::F32), k.full(&[bm], f64::NEG_INFINITY, DType::F32), k.zeros(&[bm], DType::F32)];
    let [acc, _m_i, l_i] = if causal {
        // Stage 1: key blocks that end at or before this program's first query row.
        let diag_lo = start_m * bm as i32 / bn as i32 * bn as i32;
        let state = ctx.key_loop(0, diag_lo, false, state);
        // Stage 2: the blocks crossing the diagonal, up to the last query row (or S).
        let hi = ((start_m + 1) * bm as i32).minimum(s_len);
        ctx.key_loop(diag_lo, hi, true, state)
    } else {
        ctx.key_loop(0, s_len, false, state)
    };

    let o = acc / l_i.expand_dims(1);
    k.store_masked(o_buf, q_offs, o.cast(dtype), q_mask);
    Ok(k.finish()?)
}

/// What the key loop reads from the enclosing program.
struct Ctx<'b> {
    k: &'b Builder,
    dtype: DType,
    bm: usize,
    bn: usize,
    d: usize,
    k_buf: Buf,
    v_buf: Buf,
    s_len: Tile<'b>,
    base: Tile<'b>,
    q: Tile<'b>,
    qk_scale: Tile<'b>,
    offs_m: Tile<'b>,
    offs_n: Tile<'b>,
    offs_d: Tile<'b>,
}

impl<'b> Ctx<'b> {
    /// Key blocks starting at `lo, lo + BLOCK_N, ..` below `hi`, carrying `[acc, m_i, l_i]`.
    /// Keys at or past S are always masked; `causal` also masks keys after the query.
    fn key_loop(&self, lo: impl Into<tilekit_core::Operand<'b>>, hi: Tile<'b>, causal: bool, state: [Tile<'b>; 3]) -> [Tile<'b>; 3] {
        let k = self.k;
        let (bm, bn, d) = (self.bm, self.bn, self.d);
        k.for_range(lo, hi, bn as i32, state, |start_n, [acc, m_i, l_i]| {
            let cols = start_n + self.offs_n;
            let kv_mask = cols.lt(self.s_len);
            // K^T tile [D, BLOCK_N]: element (j, n) is K[start_n + n, j].
            let kt_offs = self.base + cols.expand_dims(0) * d as i32 + self.offs_d.expand_dims(1);
            let kt = k.load_masked(self.k_buf, kt_offs, kv_mask.expand_dims(0), 0);
            let qk = self.q.dot(kt, k.zeros(&[bm, bn], DType::F32));
            let mut valid = kv_mask.expand_dims(0);
            if causal {
                valid = valid & self.offs_m.expand_dims(1).ge(cols.expand_dims(0));
            }
            let qk = k.select(valid, qk * self.qk_scale, f64::NEG_INFINITY);
            let m_ij = m_i.maximum(qk.max(1));
            let p = (qk - m_ij.expand_dims(1)).exp2();
            let alpha = (m_i - m_ij).exp2();
            let l_ij = p.sum(1);
            let v_offs = self.base + cols.expand_dims(1) * d as i32 + self.offs_d.expand_dims(0);
            let v = k.load_masked(self.v_buf, v_offs, kv_mask.expand_dims(1), 0);
            let acc = p.cast(self.dtype).dot(v, acc * alpha.expand_dims(1));
            [acc, m_ij, l_i * alpha + l_ij]
        })
    }
}

/// The share of a thread's registers ([`Target::register_share`]) the tiles of
/// [`register_words`] may take: the rest holds addresses, the row statistics and the operand
/// fragments in flight. Past five eighths (160 of NVIDIA's 255) configurations spilled in
/// ptxas (sm_80 and sm_90).
const TILE_SHARE: (u32, u32) = (5, 8);

/// 32-bit words per thread (warps of `lanes` threads) that a program's tiles take in registers:
/// the f32 output `[BLOCK_M, D]` and scores `[BLOCK_M, BLOCK_N]`, plus Q and the
/// probabilities in the input dtype (f16 packs two per register; bf16 is held in f32
/// registers, as f32 is).
fn register_words(dtype: DType, bm: usize, bn: usize, d: usize, num_warps: usize, lanes: u32) -> usize {
    let threads = lanes.max(1) as usize * num_warps.max(1);
    let operand = |n: usize| if dtype == DType::F16 { n.div_ceil(2) } else { n };
    (bm * d + bm * bn + operand(bm * d) + operand(bm * bn)).div_ceil(threads)
}

/// `(B, H, S, D)` of a problem, checked.
fn dims(problem: &Problem) -> Result<(usize, usize, usize, usize), KernelError> {
    let expected = "B x H x S x D, each at least 1, D a power of two from 16 to 256";
    let bad = || KernelError::Shape { shape: problem.shape.clone(), expected: expected.into() };
    let [b, h, s, d] = problem.shape[..] else { return Err(bad()) };
    if b == 0 || h == 0 || s == 0 || !d.is_power_of_two() || !(16..=256).contains(&d) {
        return Err(bad());
    }
    Ok((b, h, s, d))
}

/// The softmax scale: `sm_scale=` if given, else `1/sqrt(D)`.
fn sm_scale(problem: &Problem, d: usize) -> Result<f64, KernelError> {
    match problem.opt("sm_scale") {
        None => Ok(1.0 / (d as f64).sqrt()),
        Some(t) => {
            t.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| KernelError::Parse(format!("sm_scale=`{t}` is not a finite number")))
        }
    }
}

impl Kernel for Attention {
    fn name(&self) -> &'static str {
        "attention"
    }
    fn description(&self) -> &'static str {
        "flash-attention forward, online softmax, optional causal mask"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F16, DType::BF16, DType::F32]
    }
    fn shape_doc(&self) -> &'static str {
        "B x H x S x D (options: causal=1, sm_scale=<float>)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec { name: "causal", kind: OptionKind::Bool, doc: "mask keys after the query (decoder attention)" },
            OptionSpec { name: "sm_scale", kind: OptionKind::Float, doc: "softmax scale (default 1/sqrt(D))" },
        ]
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4, 32, 4096, 64], DType::F16)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        // S = 1 and primes leave partial query and key blocks; 67 rows give several blocks on
        // both axes, so both causal stages run; D covers 16 to 128.
        let cases: [(usize, usize, usize, usize, bool); 10] = [
            (1, 1, 1, 16, false),
            (1, 1, 1, 16, true),
            (2, 3, 17, 32, true),
            (2, 1, 31, 16, false),
            (1, 2, 67, 64, false),
            (1, 2, 67, 64, true),
            (1, 1, 45, 128, true),
            (1, 1, 70, 32, true),
            (1, 1, 200, 64, true),
            (2, 2, 129, 16, false),
        ];
        cases.iter().map(|&(b, h, s, d, causal)| Problem::new(&[b, h, s, d], dtype).with("causal", if causal { "1" } else { "0" })).collect()
    }
    fn configs(&self) -> Vec<Config> {
        let c = |bm: i64, bn: i64, w: i64, s: i64| Config::new().with("BLOCK_M", bm).with("BLOCK_N", bn).with("num_warps", w).with("num_stages", s);
        // The first two differ in which block is larger, so the diagonal stage starts inside
        // a key block in one and spans several in the other. The first six are sized for the
        // FMA `dot` (lavapipe, Vulkan, AMDGCN and f32 everywhere): a thread holds about
        // (BLOCK_M * BLOCK_N + 2 * BLOCK_M * D) / threads elements (scores, queries and the
        // output) in registers. The default is 32 x 16 on 4 warps: 64 x 32 on 4 spilled on
        // gfx1100 (wave32, at most 256 VGPRs) in f32 at D = 128; 32 x 16 needs at most 186
        // registers on NVIDIA and 135 VGPRs on gfx1100 at D = 128. 64 x 128 on 8 warps is out:
        // the slowest to compile (243 ms to PTX on the H200 machine's processors, against a
        // goal of 150). The last five are tensor-core tiles (FlashAttention's and Triton's
        // choices: 64 or 128 query rows, every warp along them, so each warp's probabilities
        // feed its second `mma.sync` in registers); where their registers would spill (D = 128
        // in bf16 and f32, 128 x 128 past D = 64) `plan` refuses them as unfit
        // ([`register_words`]).
        vec![
            c(32, 16, 4, 3),
            c(16, 32, 4, 2),
            c(64, 64, 8, 3),
            c(32, 32, 4, 3),
            c(32, 64, 4, 3),
            c(64, 32, 4, 3),
            c(128, 64, 8, 3),
            c(64, 64, 4, 3),
            c(128, 128, 8, 2),
            c(64, 128, 4, 2),
            c(128, 64, 8, 4),
        ]
    }
    fn build_plan(&self, problem: &Problem, config: &Config, target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let (b, h, s, d) = dims(problem)?;
        let scale = sm_scale(problem, d)?;
        let bm = config.block("BLOCK_M")?;
        let bn = config.block("BLOCK_N")?;
        if bm < 16 || bn < 16 {
            return Err(KernelError::BadConfig(format!("BLOCK_M = {bm}, BLOCK_N = {bn}: `dot` needs tile extents of at least 16")));
        }
        for key in ["num_warps", "num_stages"] {
            if config.get(key).is_ok() {
                config.count(key)?;
            }
        }
        let words = register_words(problem.dtype, bm, bn, d, config.num_warps(), target.subgroup_size);
        check_held(
            words,
            TILE_SHARE,
            target,
            &format!(
                "BLOCK_M = {bm}, BLOCK_N = {bn} at D = {d} in {} on {} warps keep {words} 32-bit words per thread of a warp of {} \
                 (output, scores, Q and probabilities)",
                problem.dtype,
                config.num_warps(),
                target.subgroup_size
            ),
            "addresses; it would spill",
        )?;
        // Masked-off rows still compute offsets: bound them over S padded to either block.
        let padded = (cdiv(s, bm) * bm).max(cdiv(s, bn) * bn);
        let span = b.saturating_mul(h).saturating_mul(padded).saturating_mul(d);
        i32::try_from(span).map_err(|_| KernelError::BadConfig(format!("B*H*S*D = {span} (S padded to the blocks) exceeds i32 offsets")))?;
        let len = b * h * s * d;
        let dtype = problem.dtype;
        let buf = |name: &str, role| BufferSpec { name: name.into(), dtype, len, role };
        Ok(Plan {
            buffers: vec![buf("q", Role::Input), buf("k", Role::Input), buf("v", Role::Input), buf("o", Role::Output { zeroed: false })],
            launches: vec![Launch {
                program: build(dtype, bm, bn, d, problem.flag("causal"))?,
                grid: [grid_dim(cdiv(s, bm))?, grid_dim(b * h)?, 1],
                args: vec![
                    LaunchArg::Buffer(0),
                    LaunchArg::Buffer(1),
                    LaunchArg::Buffer(2),
                    LaunchArg::Buffer(3),
                    LaunchArg::Scalar(Scalar::Int(s as i64)),
                    LaunchArg::Scalar(Scalar::Float(scale)),
                ],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok((b, h, s, d)) = dims(problem) else { return Vec::new() };
        let n = b * h * s * d;
        // Q and K in [-2, 2] give scaled scores with a spread of about 1.3, so the softmax is
        // neither flat nor one-hot; V in [-1, 1].
        vec![
            random_buffer(rng, problem.dtype, n, -2.0, 2.0),
            random_buffer(rng, problem.dtype, n, -2.0, 2.0),
            random_buffer(rng, problem.dtype, n, -1.0, 1.0),
        ]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let Ok((b, h, s, d)) = dims(problem) else { return Vec::new() };
        let scale = sm_scale(problem, d).unwrap_or(1.0 / (d as f64).sqrt());
        let causal = problem.flag("causal");
        let (q, kk, v) = (&inputs[0], &inputs[1], &inputs[2]);
        let mut o = vec![0.0; b * h * s * d];
        // Rows are independent: the host's cores share them (the benchmark checks problems of
        // trillions of FLOPs), each summing in the same order as a sequential loop would.
        o.par_chunks_mut(d).enumerate().for_each(|(row, oi)| {
            let (base, i) = ((row / s) * s * d, row % s);
            let keys = if causal { i + 1 } else { s };
            let qi = &q[base + i * d..base + (i + 1) * d];
            let mut scores = vec![0.0; keys];
            for (j, sc) in scores.iter_mut().enumerate() {
                let kj = &kk[base + j * d..base + (j + 1) * d];
                *sc = scale * qi.iter().zip(kj).map(|(x, y)| x * y).sum::<f64>();
            }
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let mut sum = 0.0;
            for sc in &mut scores {
                *sc = (*sc - max).exp();
                sum += *sc;
            }
            for (j, &p) in scores.iter().enumerate() {
                let vj = &v[base + j * d..base + (j + 1) * d];
                for (x, y) in oi.iter_mut().zip(vj) {
                    *x += p * y;
                }
            }
            for x in oi.iter_mut() {
                *x /= sum;
            }
        });
        vec![o]
    }
    fn tolerance(&self, problem: &Problem) -> f64 {
        match problem.dtype {
            // exp2, the rescaling and the f32 sums: a few f32 roundings per score.
            DType::F32 => 1e-5,
            // Two roundings to the input dtype: P before the PV `dot` (2^-11 or 2^-8 relative,
            // random across keys) and the output; each contributes about half its unit roundoff
            // in the norm, so the bound is about twice their sum.
            DType::F16 => 2e-3,
            DType::BF16 => 1.6e-2,
            _ => 0.0,
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok((b, h, s, d)) = dims(problem) else { return Cost::default() };
        let (b, h, s, d) = (b as u64, h as u64, s as u64, d as u64);
        // Query-key pairs that take part: all S^2, or the S(S+1)/2 on and below the diagonal
        // when causal (about half). Each pair costs 2D for its QK^T entry and 2D in PV.
        let pairs = if problem.flag("causal") { s * (s + 1) / 2 } else { s * s };
        Cost { bytes: 4 * b * h * s * d * problem.dtype.size_bytes() as u64, flops: 4 * b * h * pairs * d }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_problems_and_configs_are_errors() {
        let config = Attention.configs()[0].clone();
        for shape in [&[1, 1, 16, 24][..], &[1, 1, 16, 8], &[1, 0, 16, 64], &[1, 16, 64]] {
            assert!(matches!(Attention.plan(&Problem::new(shape, DType::F16), &config), Err(KernelError::Shape { .. })), "{shape:?}");
        }
        let p = Problem::new(&[1, 1, 16, 64], DType::F16);
        assert!(matches!(Attention.plan(&p.clone().with("sm_scale", "x"), &config), Err(KernelError::BadOption { .. })));
        assert!(matches!(Attention.plan(&p, &config.clone().with("BLOCK_N", 8)), Err(KernelError::BadConfig(_))));
    }

    #[test]
    fn causal_cost_counts_the_lower_triangle() {
        let full = Attention.cost(&Problem::new(&[1, 2, 4, 16], DType::F16));
        let causal = Attention.cost(&Problem::new(&[1, 2, 4, 16], DType::F16).with("causal", "1"));
        assert_eq!(full.flops, 4 * 2 * 16 * 16);
        assert_eq!(causal.flops, 4 * 2 * 10 * 16);
        assert_eq!(full.bytes, causal.bytes);
    }
}
