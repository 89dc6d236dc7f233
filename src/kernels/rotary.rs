//! Rotary position embedding, half-split (GPT-NeoX / LLaMA) layout.
//!
//! `x` and `out` are `S x H x D` (position, head, head dimension), contiguous, D even. For each
//! position `s`, head and pair `i < D/2`, the pair `(x1, x2) = (x[.., i], x[.., i + D/2])` is
//! rotated by the angle whose cosine and sine are `cos[s, i]`, `sin[s, i]` (f32 tables of shape
//! `S x D/2`): `(x1 cos - x2 sin, x1 sin + x2 cos)`.
//!
//! One program per (position, block of `BLOCK_H` heads), 2-D grid. Its tile is
//! `[BLOCK_H, BLOCK_D]` with `BLOCK_D` the next power of two of D/2, chosen by the plan from the
//! problem (Triton's `next_power_of_2` in the launcher), so D/2 need not be a power of two; the
//! cos/sin row is loaded once and broadcast over the heads. Math is f32.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::*;

pub struct Rotary;

/// The tile program. Parameters: `x`, `cos`, `sin`, `out`, then `H` and `D` (i32).
pub fn build(dtype: DType, block_h: usize, block_d: usize) -> Result<Program, KernelError> {
    let k = Builder::new("rotary");
    let x = k.input("x", dtype);
    let cos = k.input("cos", DType::F32);
    let sin = k.input("sin", DType::F32);
    let out = k.output("out", dtype);
    let heads = k.scalar("H", DType::I32);
    let dim = k.scalar("D", DType::I32);
    let half = dim / 2;
    let pos = k.program_id(0);
    let rh = k.program_id(1) * block_h as i32 + k.arange(0, block_h as i64);
    let ri = k.arange(0, block_d as i64);
    let mask_i = ri.lt(half);
    let mask = rh.expand_dims(1).lt(heads) & mask_i.expand_dims(0);

    let table = pos * half + ri;
    let c = k.load_masked(cos, table, mask_i, 0).expand_dims(0);
    let s = k.load_masked(sin, table, mask_i, 0).expand_dims(0);

    let offs1 = pos * heads * dim + rh.expand_dims(1) * dim + ri.expand_dims(0);
    let offs2 = offs1 + half;
    let x1 = k.load_masked(x, offs1, mask, 0).cast(DType::F32);
    let x2 = k.load_masked(x, offs2, mask, 0).cast(DType::F32);
    k.store_masked(out, offs1, (x1 * c - x2 * s).cast(dtype), mask);
    k.store_masked(out, offs2, (x1 * s + x2 * c).cast(dtype), mask);
    Ok(k.finish()?)
}

/// `(S, H, D)`, each at least 1, D even.
fn dims(problem: &Problem) -> Result<(usize, usize, usize), KernelError> {
    match problem.shape[..] {
        [s, h, d] if s > 0 && h > 0 && d > 0 && d % 2 == 0 => Ok((s, h, d)),
        _ => Err(KernelError::Shape { shape: problem.shape.clone(), expected: "S x H x D, each at least 1, D even".into() }),
    }
}

/// The rotation tables for positions `0..S` with LLaMA's frequencies `10000^(-2i/D)`, in f32.
fn tables(s: usize, d: usize) -> (Vec<f64>, Vec<f64>) {
    let half = d / 2;
    let mut cos = Vec::with_capacity(s * half);
    let mut sin = Vec::with_capacity(s * half);
    for p in 0..s {
        for i in 0..half {
            let angle = p as f64 * 10000f64.powf(-2.0 * i as f64 / d as f64);
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    (cos, sin)
}

impl Kernel for Rotary {
    fn name(&self) -> &'static str {
        "rotary"
    }
    fn description(&self) -> &'static str {
        "rotary position embedding, half-split layout, f32 cos/sin tables"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16, DType::BF16]
    }
    fn shape_doc(&self) -> &'static str {
        "S x H x D (D even)"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4096, 32, 128], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        // D/2 of 1, 3, 17 and 40 are not powers of two; head counts 3, 5, 7 leave partial head
        // blocks.
        [[1, 1, 2], [7, 2, 6], [17, 3, 64], [31, 5, 80], [67, 1, 128], [5, 7, 34]].iter().map(|s| Problem::new(s, dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        let c = |h: i64, w: i64| Config::new().with("BLOCK_H", h).with("num_warps", w);
        vec![c(4, 4), c(1, 1), c(8, 4), c(16, 8), c(2, 2)]
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let (s, h, d) = dims(problem)?;
        let bh = config.block("BLOCK_H")?;
        let bd = (d / 2).next_power_of_two();
        // Masked-off heads still compute offsets: bound them over the padded head count.
        let span = s.saturating_mul(cdiv(h, bh) * bh).saturating_mul(d);
        i32::try_from(span).map_err(|_| KernelError::BadConfig(format!("S*H*D = {span} (H padded to BLOCK_H) exceeds i32 offsets")))?;
        let dtype = problem.dtype;
        let spec = |name: &str, dtype, len, role| BufferSpec { name: name.into(), dtype, len, role };
        Ok(Plan {
            buffers: vec![
                spec("x", dtype, s * h * d, Role::Input),
                spec("cos", DType::F32, s * d / 2, Role::Input),
                spec("sin", DType::F32, s * d / 2, Role::Input),
                spec("out", dtype, s * h * d, Role::Output { zeroed: false }),
            ],
            launches: vec![Launch {
                program: build(dtype, bh, bd)?,
                grid: [grid_dim(s)?, grid_dim(cdiv(h, bh))?, 1],
                args: vec![
                    LaunchArg::Buffer(0),
                    LaunchArg::Buffer(1),
                    LaunchArg::Buffer(2),
                    LaunchArg::Buffer(3),
                    LaunchArg::Scalar(Scalar::Int(h as i64)),
                    LaunchArg::Scalar(Scalar::Int(d as i64)),
                ],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok((s, h, d)) = dims(problem) else { return Vec::new() };
        let (cos, sin) = tables(s, d);
        vec![random_buffer(rng, problem.dtype, s * h * d, -1.0, 1.0), HostBuffer::from_f64(DType::F32, &cos), HostBuffer::from_f64(DType::F32, &sin)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let Ok((s, h, d)) = dims(problem) else { return Vec::new() };
        let (x, cos, sin) = (&inputs[0], &inputs[1], &inputs[2]);
        let half = d / 2;
        let mut out = vec![0.0; s * h * d];
        for p in 0..s {
            for head in 0..h {
                let row = (p * h + head) * d;
                for i in 0..half {
                    let (x1, x2) = (x[row + i], x[row + i + half]);
                    let (c, sn) = (cos[p * half + i], sin[p * half + i]);
                    out[row + i] = x1 * c - x2 * sn;
                    out[row + i + half] = x1 * sn + x2 * c;
                }
            }
        }
        vec![out]
    }
    fn tolerance(&self, problem: &Problem) -> f64 {
        match problem.dtype {
            // Two products and a sum in f32.
            DType::F32 => 1e-6,
            // One rounding of the output dominates (2^-11 or 2^-8 at most, about half in the norm).
            DType::F16 => 1e-3,
            DType::BF16 => 8e-3,
            _ => 0.0,
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok((s, h, d)) = dims(problem) else { return Cost::default() };
        let (s, h, d) = (s as u64, h as u64, d as u64);
        // x read and out written once; each cos/sin table entry read once. Four multiplies and
        // two adds per pair, D/2 pairs per head and position.
        Cost { bytes: 2 * s * h * d * problem.dtype.size_bytes() as u64 + 2 * s * (d / 2) * 4, flops: 3 * s * h * d }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_head_dim_is_an_error() {
        let config = Rotary.configs()[0].clone();
        for shape in [&[4, 2, 7][..], &[4, 0, 8], &[4, 8]] {
            assert!(matches!(Rotary.plan(&Problem::new(shape, DType::F32), &config), Err(KernelError::Shape { .. })), "{shape:?}");
        }
    }
}
