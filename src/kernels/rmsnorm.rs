//! RMSNorm over the last dimension, `y = x / sqrt(mean(x^2) + eps) * w`: one program per row, a
//! loop over column blocks for the mean square, then one that normalizes; statistics in f32.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::softmax::{last_dim, numel, rows_cols};
use super::*;

pub struct RmsNorm;

pub const EPS: f64 = 1e-5;

/// The tile program, streaming each row in blocks of `block` columns.
pub fn build(dtype: DType, block: usize) -> Result<Program, KernelError> {
    let k = Builder::new("rmsnorm");
    let x = k.input("x", dtype);
    let w = k.input("w", dtype);
    let y = k.output("y", dtype);
    let n_cols = k.scalar("n_cols", DType::I32);
    let base = k.program_id(0) * n_cols;
    let lanes = k.arange(0, block as i64);

    let acc0 = k.zeros(&[block], DType::F32);
    let [acc] = k.for_range(0, n_cols, block as i32, [acc0], |start, [acc]| {
        let cols = start + lanes;
        let a = k.load_masked(x, base + cols, cols.lt(n_cols), 0).cast(DType::F32);
        [acc + a * a]
    });
    let rstd = (acc.sum(0) / n_cols.cast(DType::F32) + EPS).rsqrt();

    k.for_range(0, n_cols, block as i32, [], |start, []| {
        let cols = start + lanes;
        let mask = cols.lt(n_cols);
        let a = k.load_masked(x, base + cols, mask, 0).cast(DType::F32);
        let wv = k.load_masked(w, cols, mask, 0).cast(DType::F32);
        k.store_masked(y, base + cols, a * rstd * wv, mask);
        []
    });
    Ok(k.finish()?)
}

impl Kernel for RmsNorm {
    fn name(&self) -> &'static str {
        "rmsnorm"
    }
    fn description(&self) -> &'static str {
        "RMSNorm over rows with weight"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16, DType::BF16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x COLS"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4096, 4096], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        [[1, 1], [1, 7], [64, 1], [3, 97], [5, 1024], [17, 1031], [2, 2053]].iter().map(|s| Problem::new(s, dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        [(1024, 4), (64, 1), (256, 2), (4096, 8)].iter().map(|&(b, w)| Config::new().with("BLOCK", b).with("num_warps", w)).collect()
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let block = config.block("BLOCK")?;
        let (rows, cols) = rows_cols(problem, "ROWS x COLS", false, block)?;
        let dtype = problem.dtype;
        Ok(Plan {
            buffers: vec![
                BufferSpec { name: "x".into(), dtype, len: rows * cols, role: Role::Input },
                BufferSpec { name: "w".into(), dtype, len: cols, role: Role::Input },
                BufferSpec { name: "y".into(), dtype, len: rows * cols, role: Role::Output { zeroed: false } },
            ],
            launches: vec![Launch {
                program: build(dtype, block)?,
                grid: [grid_dim(rows)?, 1, 1],
                args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Buffer(2), LaunchArg::Scalar(Scalar::Int(cols as i64))],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let dtype = problem.dtype;
        vec![random_buffer(rng, dtype, numel(problem), -3.0, 5.0), random_buffer(rng, dtype, last_dim(problem), -2.0, 2.0)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let cols = last_dim(problem);
        let w = &inputs[1];
        let mut y = Vec::with_capacity(inputs[0].len());
        for row in inputs[0].chunks(cols) {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / cols as f64;
            let rstd = 1.0 / (ms + EPS).sqrt();
            y.extend(row.iter().zip(w).map(|(v, w)| v * rstd * w));
        }
        vec![y]
    }
    fn cost(&self, problem: &Problem) -> Cost {
        // Per element: a square and an add for the mean square, a multiply by rstd and one by w
        // (4). Per row: the division by COLS, the eps add and the rsqrt (3).
        let n = numel(problem) as u64;
        let cols = last_dim(problem) as u64;
        let rows = n / cols.max(1);
        let size = problem.dtype.size_bytes() as u64;
        Cost { bytes: (2 * n + cols) * size, flops: 4 * n + 3 * rows }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_problems_are_errors() {
        let cfg = &RmsNorm.configs()[0];
        for shape in [&[7][..], &[0, 7], &[1 << 16, 1 << 15]] {
            let e = RmsNorm.plan(&Problem::new(shape, DType::F32), cfg).unwrap_err();
            assert!(matches!(e, KernelError::Shape { .. }), "{shape:?}");
        }
        assert!(matches!(RmsNorm.plan(&Problem::new(&[2, 8], DType::I32), cfg), Err(KernelError::DType { .. })));
    }

    #[test]
    fn cost() {
        let p = Problem::new(&[3, 10], DType::BF16);
        assert_eq!(RmsNorm.cost(&p), Cost { bytes: (60 + 10) * 2, flops: 4 * 30 + 9 });
    }
}
