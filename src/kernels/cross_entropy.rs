//! Cross-entropy loss per row of logits: `loss[r] = logsumexp(x[r, :]) - x[r, label[r]]`.
//!
//! One of the kernels of the kind users write first (`examples/cross_entropy.rs` launches it):
//! one program per row, one pass over the row in blocks of `BLOCK` columns with a running
//! maximum and sum per lane (the online logsumexp), then the label's logit by a scalar load.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::softmax::rows_cols;
use super::*;

pub struct CrossEntropy;

/// The tile program. Parameters: `logits` (`ROWS x V`), `labels` (i32, one per row), `loss`
/// (f32, one per row), `V` (i32).
pub fn build(dtype: DType, config: &Config) -> Result<Program, KernelError> {
    let block = config.block("BLOCK")?;
    let k = Builder::new("cross_entropy");
    let logits = k.input("logits", dtype);
    let labels = k.input("labels", DType::I32);
    let loss = k.output("loss", DType::F32);
    let v = k.scalar("V", DType::I32);
    let row = k.program_id(0);
    let base = row * v;
    let lanes = k.arange(0, block as i64);
    // A finite start, so that a lane whose every column is masked off (-inf) stays at exp(0) * 0.
    let m0 = k.full(&[block], -1e30, DType::F32);
    let s0 = k.zeros(&[block], DType::F32);
    let [m, s] = k.for_range(0, v, block as i32, [m0, s0], |start, [m, s]| {
        let cols = start + lanes;
        let x = k.load_masked(logits, base + cols, cols.lt(v), f64::NEG_INFINITY).cast(DType::F32);
        let m_new = m.maximum(x);
        [m_new, s * (m - m_new).exp() + (x - m_new).exp()]
    });
    let row_max = m.max(0);
    let lse = (s * (m - row_max).exp()).sum(0).log() + row_max;
    let label = k.load(labels, row);
    let target = k.load(logits, base + label).cast(DType::F32);
    k.store(loss, row, lse - target);
    Ok(k.finish()?)
}

/// The loss of each row, in f64.
pub fn reference_rows(x: &[f64], labels: &[f64], v: usize) -> Vec<f64> {
    x.chunks(v)
        .zip(labels)
        .map(|(row, &l)| {
            let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row.iter().map(|x| (x - m).exp()).sum();
            s.ln() + m - row[l as usize]
        })
        .collect()
}

impl Kernel for CrossEntropy {
    fn name(&self) -> &'static str {
        "cross_entropy"
    }
    fn description(&self) -> &'static str {
        "cross-entropy loss per row of logits, online logsumexp (a user kernel)"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::BF16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x V"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4096, 32000], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        streamed_row_problems(dtype)
    }
    fn configs(&self) -> Vec<Config> {
        streamed_row_configs()
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let block = config.block("BLOCK")?;
        let (rows, v) = rows_cols(problem, "ROWS x V", false, block)?;
        let dtype = problem.dtype;
        let buf = |name: &str, dtype, len, role| BufferSpec { name: name.into(), dtype, len, role };
        Ok(Plan {
            buffers: vec![
                buf("logits", dtype, rows * v, Role::Input),
                buf("labels", DType::I32, rows, Role::Input),
                buf("loss", DType::F32, rows, Role::Output { zeroed: false }),
            ],
            launches: vec![Launch {
                program: build(dtype, config)?,
                grid: [grid_dim(rows)?, 1, 1],
                args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Buffer(2), LaunchArg::Scalar(Scalar::Int(v as i64))],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok((rows, v)) = rows_cols(problem, "", false, 0) else { return Vec::new() };
        // Labels are drawn in [0, V) and floored: every one names a column.
        vec![random_buffer(rng, problem.dtype, rows * v, -8.0, 8.0), random_buffer(rng, DType::I32, rows, 0.0, v as f64)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let Ok((_, v)) = rows_cols(problem, "", false, 0) else { return Vec::new() };
        vec![reference_rows(&inputs[0], &inputs[1], v)]
    }
    fn output_tolerance(&self, _problem: &Problem, _index: usize, _dtype: DType) -> Tolerance {
        // The loss is computed in f32 whatever the logits' dtype: a sum of up to V exps and a
        // log, each within a few units of 2^-24; a loss near 0 (one dominant logit) is
        // compared with an absolute bound instead.
        Tolerance { rel: 1e-5, abs: 1e-4 }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok((rows, v)) = rows_cols(problem, "", false, 0) else { return Cost::default() };
        let n = (rows * v) as u64;
        // Reads the logits and labels once, writes the losses. Per logit: a max, two
        // subtractions, two exps, a product and a sum.
        Cost { bytes: n * problem.dtype.size_bytes() as u64 + 8 * rows as u64, flops: 7 * n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_of_uniform_logits_is_log_v() {
        let loss = reference_rows(&[3.0; 8], &[5.0], 8);
        assert!((loss[0] - 8f64.ln()).abs() < 1e-12);
    }
}
