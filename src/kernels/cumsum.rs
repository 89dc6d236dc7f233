//! Inclusive prefix sum along rows: one program per row, a loop over column blocks that scans each
//! block and adds the total carried from the blocks before it. A 1-D shape `N` is one row.
//! Floats accumulate in f32 (f16/bf16 are rounded once, at the store), i32 in i32 (exact,
//! wrapping).

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::softmax::{last_dim, numel, rows_cols};
use super::sum::acc_dtype;
use super::*;

pub struct Cumsum;

/// The tile program, scanning each row in blocks of `block` columns.
pub fn build(dtype: DType, block: usize) -> Result<Program, KernelError> {
    let acc_t = acc_dtype(dtype);
    let k = Builder::new("cumsum");
    let x = k.input("x", dtype);
    let y = k.output("y", dtype);
    let n_cols = k.scalar("n_cols", DType::I32);
    let base = k.program_id(0) * n_cols;
    let lanes = k.arange(0, block as i64);
    let carry0 = k.constant(0, acc_t);
    k.for_range(0, n_cols, block as i32, [carry0], |start, [carry]| {
        let cols = start + lanes;
        let mask = cols.lt(n_cols);
        // Padding lanes read 0, so they add nothing to the carry.
        let v = k.load_masked(x, base + cols, mask, 0).cast(acc_t);
        k.store_masked(y, base + cols, v.cumsum(0) + carry, mask);
        [carry + v.sum(0)]
    });
    Ok(k.finish()?)
}

impl Kernel for Cumsum {
    fn name(&self) -> &'static str {
        "cumsum"
    }
    fn description(&self) -> &'static str {
        "inclusive prefix sum along rows, a carried total across column blocks"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::I32, DType::F16, DType::BF16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x N, or N"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[1024, 16384], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        let shapes: &[&[usize]] = &[&[1], &[7], &[3001], &[10007], &[1, 1], &[64, 1], &[3, 97], &[5, 1024], &[17, 1031], &[2, 2053]];
        shapes.iter().map(|s| Problem::new(s, dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        [(1024, 4), (64, 1), (256, 2), (4096, 8)].iter().map(|&(b, w)| Config::new().with("BLOCK", b).with("num_warps", w)).collect()
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let block = config.block("BLOCK")?;
        let (rows, cols) = rows_cols(problem, "ROWS x N or N", true, block)?;
        let dtype = problem.dtype;
        let len = rows * cols;
        Ok(Plan {
            buffers: vec![
                BufferSpec { name: "x".into(), dtype, len, role: Role::Input },
                BufferSpec { name: "y".into(), dtype, len, role: Role::Output { zeroed: false } },
            ],
            launches: vec![Launch {
                program: build(dtype, block)?,
                grid: [grid_dim(rows)?, 1, 1],
                args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Scalar(Scalar::Int(cols as i64))],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        // Off-centre values make the prefix sums grow, so every output is far from zero and an
        // error in the carry shows in the relative error.
        let (lo, hi) = if problem.dtype.is_float() { (-1.0, 3.0) } else { (-1000.0, 3000.0) };
        vec![random_buffer(rng, problem.dtype, numel(problem), lo, hi)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let cols = last_dim(problem).max(1);
        let mut out = Vec::with_capacity(inputs[0].len());
        for row in inputs[0].chunks(cols) {
            let mut total = 0.0;
            out.extend(row.iter().map(|v| {
                total += v;
                total
            }));
        }
        vec![out]
    }
    fn tolerance(&self, problem: &Problem) -> f64 {
        // f32 sums carried over up to a few thousand elements (rounding near 1e-6 relative on
        // these off-centre inputs), then one rounding at the store for f16 (half an ulp: 4.9e-4)
        // and bf16 (3.9e-3).
        match problem.dtype {
            DType::F32 => 1e-5,
            DType::F16 => 1e-3,
            DType::BF16 => 8e-3,
            _ => 0.0,
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        // One addition per element.
        let n = numel(problem) as u64;
        Cost { bytes: 2 * n * problem.dtype.size_bytes() as u64, flops: n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_dimension_is_one_row() {
        let plan = Cumsum.plan(&Problem::new(&[3001], DType::I32), &Cumsum.configs()[0]).unwrap();
        assert_eq!(plan.launches[0].grid, [1, 1, 1]);
        assert_eq!(plan.launches[0].args[2], LaunchArg::Scalar(Scalar::Int(3001)));
    }

    #[test]
    fn bad_problems_are_errors() {
        let cfg = &Cumsum.configs()[0];
        for shape in [&[0][..], &[2, 0], &[2, 3, 4], &[1 << 16, 1 << 15]] {
            let e = Cumsum.plan(&Problem::new(shape, DType::F32), cfg).unwrap_err();
            assert!(matches!(e, KernelError::Shape { .. }), "{shape:?}");
        }
    }
}
