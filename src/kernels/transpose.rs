//! Matrix transpose, `y[c, r] = x[r, c]`, tiled.
//!
//! One of the kernels of the kind users write first (`examples/transpose.rs` launches it): each
//! program loads a `BLOCK_R x BLOCK_C` tile of `x` (rows along the contiguous dimension), and
//! stores its `trans` at the mirrored place of `y`, masked on both edges. Where the elements
//! change threads is the lowering's business; how fast it runs is what the lowering makes of
//! `trans` between a load and a store that both want whole rows.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::*;

pub struct Transpose;

/// The tile program. Parameters: `x` (`ROWS x COLS`), `y` (`COLS x ROWS`), `ROWS`, `COLS` (i32).
pub fn build(dtype: DType, config: &Config) -> Result<Program, KernelError> {
    let (br, bc) = (config.block("BLOCK_R")?, config.block("BLOCK_C")?);
    let k = Builder::new("transpose");
    let x = k.input("x", dtype);
    let y = k.output("y", dtype);
    let rows = k.scalar("ROWS", DType::I32);
    let cols = k.scalar("COLS", DType::I32);
    let rr = (k.program_id(0) * br as i32 + k.arange(0, br as i64)).expand_dims(1);
    let cc = (k.program_id(1) * bc as i32 + k.arange(0, bc as i64)).expand_dims(0);
    let mask = rr.lt(rows) & cc.lt(cols);
    let tile = k.load_masked(x, rr * cols + cc, mask, 0);
    // [BLOCK_C, BLOCK_R]: row c of the result is column c of the tile.
    k.store_masked(y, cc.trans() * rows + rr.trans(), tile.trans(), mask.trans());
    Ok(k.finish()?)
}

fn dims(problem: &Problem) -> Result<(usize, usize), KernelError> {
    match problem.shape[..] {
        [r, c] if r > 0 && c > 0 => Ok((r, c)),
        _ => Err(KernelError::Shape { shape: problem.shape.clone(), expected: "ROWS x COLS, each at least 1".into() }),
    }
}

impl Kernel for Transpose {
    fn name(&self) -> &'static str {
        "transpose"
    }
    fn description(&self) -> &'static str {
        "y = x^T, tiled (a user kernel)"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x COLS"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[8192, 8192], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        [[1, 1], [1, 7], [7, 1], [17, 67], [64, 64], [33, 100], [127, 129]].iter().map(|s| Problem::new(s, dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        let c = |r: i64, cc: i64, w: i64| Config::new().with("BLOCK_R", r).with("BLOCK_C", cc).with("num_warps", w);
        vec![c(64, 64, 4), c(32, 32, 1), c(32, 32, 4), c(64, 64, 8), c(128, 32, 4), c(32, 128, 4), c(128, 128, 8)]
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let (rows, cols) = dims(problem)?;
        let (br, bc) = (config.block("BLOCK_R")?, config.block("BLOCK_C")?);
        // Masked-off lanes still form offsets: bound them over the padded extents.
        let span = (cdiv(rows, br) * br).saturating_mul(cdiv(cols, bc) * bc);
        i32::try_from(span).map_err(|_| KernelError::BadConfig(format!("ROWS*COLS = {span} (padded to the blocks) exceeds i32 offsets")))?;
        let dtype = problem.dtype;
        Ok(Plan {
            buffers: vec![
                BufferSpec { name: "x".into(), dtype, len: rows * cols, role: Role::Input },
                BufferSpec { name: "y".into(), dtype, len: rows * cols, role: Role::Output { zeroed: false } },
            ],
            launches: vec![Launch {
                program: build(dtype, config)?,
                grid: [grid_dim(cdiv(rows, br))?, grid_dim(cdiv(cols, bc))?, 1],
                args: vec![
                    LaunchArg::Buffer(0),
                    LaunchArg::Buffer(1),
                    LaunchArg::Scalar(Scalar::Int(rows as i64)),
                    LaunchArg::Scalar(Scalar::Int(cols as i64)),
                ],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok((rows, cols)) = dims(problem) else { return Vec::new() };
        vec![random_buffer(rng, problem.dtype, rows * cols, -1.0, 1.0)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let Ok((rows, cols)) = dims(problem) else { return Vec::new() };
        let x = &inputs[0];
        vec![(0..rows * cols).map(|i| x[(i % rows) * cols + i / rows]).collect()]
    }
    fn tolerance(&self, _problem: &Problem) -> f64 {
        0.0
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok((rows, cols)) = dims(problem) else { return Cost::default() };
        Cost { bytes: 2 * (rows * cols * problem.dtype.size_bytes()) as u64, flops: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_transposes() {
        let p = Problem::new(&[2, 3], DType::F32);
        let x: Vec<f64> = (0..6).map(f64::from).collect();
        assert_eq!(Transpose.reference(&p, &[x]), vec![vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]]);
    }
}
