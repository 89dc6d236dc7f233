//! `out = x + y`, the first Triton tutorial: one program per BLOCK elements, masked tail.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::*;

pub struct VectorAdd;

/// The tile program for one BLOCK of elements.
pub fn build(dtype: DType, block: usize) -> Result<Program, KernelError> {
    let k = Builder::new("vector_add");
    let x = k.input("x", dtype);
    let y = k.input("y", dtype);
    let out = k.output("out", dtype);
    let n = k.scalar("n", DType::I32);
    let offs = k.program_id(0) * block as i32 + k.arange(0, block as i64);
    let mask = offs.lt(n);
    let a = k.load_masked(x, offs, mask, 0);
    let b = k.load_masked(y, offs, mask, 0);
    k.store_masked(out, offs, a + b, mask);
    Ok(k.finish()?)
}

impl Kernel for VectorAdd {
    fn name(&self) -> &'static str {
        "vector_add"
    }
    fn description(&self) -> &'static str {
        "elementwise out = x + y"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16, DType::BF16, DType::I32]
    }
    fn shape_doc(&self) -> &'static str {
        "N"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[1 << 20], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        [1, 7, 1000, 1024, 4099].iter().map(|&n| Problem::new(&[n], dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        [1024, 256, 4096].iter().map(|&b| Config::new().with("BLOCK", b).with("num_warps", 4)).collect()
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let n = problem.dim(0, "N")?;
        let n_i32 = i32::try_from(n).map_err(|_| KernelError::BadConfig(format!("N = {n} exceeds i32 offsets")))?;
        let block = config.block("BLOCK")?;
        let dtype = problem.dtype;
        let buf = |name: &str, role| BufferSpec { name: name.into(), dtype, len: n, role };
        Ok(Plan {
            buffers: vec![buf("x", Role::Input), buf("y", Role::Input), buf("out", Role::Output { zeroed: false })],
            launches: vec![Launch {
                program: build(dtype, block)?,
                grid: [grid_dim(cdiv(n, block))?, 1, 1],
                args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Buffer(2), LaunchArg::Scalar(Scalar::Int(n_i32 as i64))],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let n = problem.shape.first().copied().unwrap_or(0);
        let (lo, hi) = if problem.dtype.is_float() { (-4.0, 4.0) } else { (-1000.0, 1000.0) };
        vec![random_buffer(rng, problem.dtype, n, lo, hi), random_buffer(rng, problem.dtype, n, lo, hi)]
    }
    fn reference(&self, _problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        vec![inputs[0].iter().zip(&inputs[1]).map(|(a, b)| a + b).collect()]
    }
    fn tolerance(&self, problem: &Problem) -> f64 {
        // One rounding of an exact sum.
        match problem.dtype {
            DType::F32 => 1e-7,
            DType::F16 => 1e-3,
            DType::BF16 => 8e-3,
            _ => 0.0,
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let n = problem.shape.first().copied().unwrap_or(0) as u64;
        Cost { bytes: 3 * n * problem.dtype.size_bytes() as u64, flops: n }
    }
}
