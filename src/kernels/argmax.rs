//! Index of the largest element of each row (the first, on ties), as numpy's `argmax`.
//!
//! One of the kernels of the kind users write first (`examples/argmax.rs` launches it): one
//! program per row, one pass over the row in blocks of `BLOCK` columns keeping each lane's best
//! value and its column, then the best of the lanes.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::softmax::rows_cols;
use super::*;

pub struct Argmax;

/// The tile program. Parameters: `x` (`ROWS x COLS`), `index` (i32, one per row), `COLS` (i32).
pub fn build(dtype: DType, config: &Config) -> Result<Program, KernelError> {
    let block = config.block("BLOCK")?;
    let k = Builder::new("argmax");
    let x = k.input("x", dtype);
    let index = k.output("index", DType::I32);
    let cols = k.scalar("COLS", DType::I32);
    let row = k.program_id(0);
    let lanes = k.arange(0, block as i64);
    let best0 = k.full(&[block], f64::NEG_INFINITY, DType::F32);
    let at0 = k.full(&[block], i32::MAX, DType::I32);
    let [best, at] = k.for_range(0, cols, block as i32, [best0, at0], |start, [best, at]| {
        let c = start + lanes;
        let v = k.load_masked(x, row * cols + c, c.lt(cols), f64::NEG_INFINITY).cast(DType::F32);
        // Strictly greater: a lane keeps the earlier column on ties, and a first -inf still
        // takes a column (at starts past every column).
        let take = v.gt(best) | (c.lt(cols) & at.eq(i32::MAX));
        [k.select(take, v, best), k.select(take, c, at)]
    });
    let top = best.max(0);
    let first = k.select(best.eq(top), at, i32::MAX).min(0);
    k.store(index, row, first);
    Ok(k.finish()?)
}

/// The first index of each row's maximum.
pub fn reference_rows(x: &[f64], cols: usize) -> Vec<f64> {
    x.chunks(cols)
        .map(|row| {
            let mut best = 0;
            for (i, &v) in row.iter().enumerate() {
                if v > row[best] {
                    best = i;
                }
            }
            best as f64
        })
        .collect()
}

impl Kernel for Argmax {
    fn name(&self) -> &'static str {
        "argmax"
    }
    fn description(&self) -> &'static str {
        "index of each row's maximum, first on ties (a user kernel)"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::BF16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x COLS"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[8192, 8192], DType::F32)
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
        let (rows, cols) = rows_cols(problem, "ROWS x COLS", false, block)?;
        let dtype = problem.dtype;
        Ok(Plan {
            buffers: vec![
                BufferSpec { name: "x".into(), dtype, len: rows * cols, role: Role::Input },
                BufferSpec { name: "index".into(), dtype: DType::I32, len: rows, role: Role::Output { zeroed: false } },
            ],
            launches: vec![Launch {
                program: build(dtype, config)?,
                grid: [grid_dim(rows)?, 1, 1],
                args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Scalar(Scalar::Int(cols as i64))],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok((rows, cols)) = rows_cols(problem, "", false, 0) else { return Vec::new() };
        vec![random_buffer(rng, problem.dtype, rows * cols, -4.0, 4.0)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let Ok((_, cols)) = rows_cols(problem, "", false, 0) else { return Vec::new() };
        vec![reference_rows(&inputs[0], cols)]
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok((rows, cols)) = rows_cols(problem, "", false, 0) else { return Cost::default() };
        let n = (rows * cols) as u64;
        // One compare per element (and the select it drives, not counted).
        Cost { bytes: n * problem.dtype.size_bytes() as u64 + 4 * rows as u64, flops: n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_takes_the_first_of_ties() {
        assert_eq!(reference_rows(&[1.0, 3.0, 3.0, 2.0, 5.0, 5.0], 3), vec![1.0, 1.0]);
    }
}
