//! `out = silu(gate) * up` elementwise (the SwiGLU of LLaMA-style MLPs), `silu(x) = x / (1 + e^-x)`.
//!
//! gate, up and out are `ROWS x COLS`, contiguous. Each program owns a `BLOCK_R x BLOCK_C` tile
//! on a 2-D grid, masked on both edges; the math is f32 whatever the storage dtype, with one
//! rounding at the store.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::*;

pub struct Swiglu;

/// The tile program. Parameters: `gate`, `up`, `out`, then `ROWS` and `COLS` (i32).
pub fn build(dtype: DType, block_r: usize, block_c: usize) -> Result<Program, KernelError> {
    let k = Builder::new("swiglu");
    let gate = k.input("gate", dtype);
    let up = k.input("up", dtype);
    let out = k.output("out", dtype);
    let rows = k.scalar("ROWS", DType::I32);
    let cols = k.scalar("COLS", DType::I32);
    let rr = k.program_id(0) * block_r as i32 + k.arange(0, block_r as i64);
    let cc = k.program_id(1) * block_c as i32 + k.arange(0, block_c as i64);
    let offs = rr.expand_dims(1) * cols + cc.expand_dims(0);
    let mask = rr.expand_dims(1).lt(rows) & cc.expand_dims(0).lt(cols);
    let g = k.load_masked(gate, offs, mask, 0).cast(DType::F32);
    let u = k.load_masked(up, offs, mask, 0).cast(DType::F32);
    let y = g / ((-g).exp() + 1.0) * u;
    k.store_masked(out, offs, y.cast(dtype), mask);
    Ok(k.finish()?)
}

fn dims(problem: &Problem) -> Result<(usize, usize), KernelError> {
    match problem.shape[..] {
        [r, c] if r > 0 && c > 0 => Ok((r, c)),
        _ => Err(KernelError::Shape { shape: problem.shape.clone(), expected: "ROWS x COLS, each at least 1".into() }),
    }
}

impl Kernel for Swiglu {
    fn name(&self) -> &'static str {
        "swiglu"
    }
    fn description(&self) -> &'static str {
        "out = silu(gate) * up, f32 math"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16, DType::BF16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x COLS"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4096, 11008], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        [[1, 1], [7, 13], [17, 67], [31, 1000], [3, 4099], [67, 257]].iter().map(|s| Problem::new(s, dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        let c = |r: i64, cc: i64, w: i64| Config::new().with("BLOCK_R", r).with("BLOCK_C", cc).with("num_warps", w);
        vec![c(4, 256, 4), c(1, 64, 1), c(1, 1024, 4), c(8, 512, 8), c(16, 128, 4), c(2, 2048, 8)]
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let (rows, cols) = dims(problem)?;
        let br = config.block("BLOCK_R")?;
        let bc = config.block("BLOCK_C")?;
        // Masked-off lanes still compute offsets: bound them over the padded extents.
        let span = (cdiv(rows, br) * br).saturating_mul(cdiv(cols, bc) * bc);
        i32::try_from(span).map_err(|_| KernelError::BadConfig(format!("ROWS*COLS = {span} (padded to the blocks) exceeds i32 offsets")))?;
        let dtype = problem.dtype;
        let buf = |name: &str, role| BufferSpec { name: name.into(), dtype, len: rows * cols, role };
        Ok(Plan {
            buffers: vec![buf("gate", Role::Input), buf("up", Role::Input), buf("out", Role::Output { zeroed: false })],
            launches: vec![Launch {
                program: build(dtype, br, bc)?,
                grid: [grid_dim(cdiv(rows, br))?, grid_dim(cdiv(cols, bc))?, 1],
                args: vec![
                    LaunchArg::Buffer(0),
                    LaunchArg::Buffer(1),
                    LaunchArg::Buffer(2),
                    LaunchArg::Scalar(Scalar::Int(rows as i64)),
                    LaunchArg::Scalar(Scalar::Int(cols as i64)),
                ],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok((rows, cols)) = dims(problem) else { return Vec::new() };
        // gate over [-6, 6] reaches both silu tails and its curved middle.
        vec![random_buffer(rng, problem.dtype, rows * cols, -6.0, 6.0), random_buffer(rng, problem.dtype, rows * cols, -1.0, 1.0)]
    }
    fn reference(&self, _problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        vec![inputs[0].iter().zip(&inputs[1]).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect()]
    }
    fn tolerance(&self, problem: &Problem) -> f64 {
        match problem.dtype {
            // exp, add, divide, multiply in f32: a few units of 2^-24.
            DType::F32 => 1e-6,
            // One rounding of the output dominates: at most 2^-11 (f16) or 2^-8 (bf16) relative,
            // about half that in the norm.
            DType::F16 => 1e-3,
            DType::BF16 => 8e-3,
            _ => 0.0,
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok((rows, cols)) = dims(problem) else { return Cost::default() };
        let n = (rows * cols) as u64;
        // Per element: negate, exp, add, divide (silu), multiply by up.
        Cost { bytes: 3 * n * problem.dtype.size_bytes() as u64, flops: 5 * n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_shapes_are_errors() {
        let config = Swiglu.configs()[0].clone();
        for shape in [&[4][..], &[4, 0], &[2, 3, 4]] {
            assert!(matches!(Swiglu.plan(&Problem::new(shape, DType::F32), &config), Err(KernelError::Shape { .. })), "{shape:?}");
        }
    }
}
