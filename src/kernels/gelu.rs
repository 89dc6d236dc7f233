//! GELU in its tanh form, elementwise: `y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
//!
//! One of the kernels of the kind users write first (`examples/gelu.rs` launches it): each
//! program handles `BLOCK` elements, the last one masked; the math is f32 whatever the storage
//! dtype, with one rounding at the store. Nothing in it is tuned: how fast it runs is what the
//! lowering makes of a plain elementwise kernel over a 16-bit dtype.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::*;

pub struct Gelu;

/// `sqrt(2 / pi)`.
pub const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// The tile program. Parameters: `x`, `y`, then `n` (i32).
pub fn build(dtype: DType, config: &Config) -> Result<Program, KernelError> {
    let block = config.block("BLOCK")?;
    let k = Builder::new("gelu");
    let x = k.input("x", dtype);
    let y = k.output("y", dtype);
    let n = k.scalar("n", DType::I32);
    let offs = k.program_id(0) * block as i32 + k.arange(0, block as i64);
    let mask = offs.lt(n);
    let v = k.load_masked(x, offs, mask, 0).cast(DType::F32);
    let inner = (v + v * v * v * 0.044715) * SQRT_2_OVER_PI;
    let g = v * 0.5 * (inner.tanh() + 1.0);
    k.store_masked(y, offs, g.cast(dtype), mask);
    Ok(k.finish()?)
}

/// GELU (tanh form) of one value, in f64.
pub fn gelu_f64(x: f64) -> f64 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)).tanh())
}

fn len(problem: &Problem) -> Result<usize, KernelError> {
    match problem.shape[..] {
        [n] if n > 0 && n < i32::MAX as usize / 2 => Ok(n),
        _ => Err(KernelError::Shape { shape: problem.shape.clone(), expected: "N, from 1 to 2^30".into() }),
    }
}

impl Kernel for Gelu {
    fn name(&self) -> &'static str {
        "gelu"
    }
    fn description(&self) -> &'static str {
        "GELU (tanh form) elementwise, f32 math (a user kernel)"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::BF16, DType::F32]
    }
    fn shape_doc(&self) -> &'static str {
        "N"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[1 << 24], DType::BF16)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        [1, 7, 97, 1024, 4099, 65_537].iter().map(|&n| Problem::new(&[n], dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        let c = |b: i64, w: i64| Config::new().with("BLOCK", b).with("num_warps", w);
        vec![c(1024, 4), c(256, 1), c(2048, 4), c(4096, 8), c(8192, 8), c(512, 2)]
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let n = len(problem)?;
        let block = config.block("BLOCK")?;
        if cdiv(n, block).saturating_mul(block) > i32::MAX as usize {
            return Err(KernelError::BadConfig(format!("N = {n} padded to BLOCK = {block} exceeds i32 offsets")));
        }
        let dtype = problem.dtype;
        Ok(Plan {
            buffers: vec![
                BufferSpec { name: "x".into(), dtype, len: n, role: Role::Input },
                BufferSpec { name: "y".into(), dtype, len: n, role: Role::Output { zeroed: false } },
            ],
            launches: vec![Launch {
                program: build(dtype, config)?,
                grid: [grid_dim(cdiv(n, block))?, 1, 1],
                args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Scalar(Scalar::Int(n as i64))],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok(n) = len(problem) else { return Vec::new() };
        // [-5, 5] covers both tails (y ~ 0 and y ~ x) and the curved middle.
        vec![random_buffer(rng, problem.dtype, n, -5.0, 5.0)]
    }
    fn reference(&self, _problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        vec![inputs[0].iter().map(|&x| gelu_f64(x)).collect()]
    }
    fn tolerance(&self, problem: &Problem) -> f64 {
        match problem.dtype {
            // tanh within the few ulp Vulkan allows (lavapipe's is the loosest near 0, where
            // the x/2 term dominates the output anyway).
            DType::F32 => 1e-5,
            // One rounding of the output: at most 2^-8 relative, about half that in the norm.
            DType::BF16 => 8e-3,
            _ => 0.0,
        }
    }
    /// Besides the relative bound, each element may be off by what f32 loses in `1 + tanh(u)`
    /// where tanh is near -1 (the left tail, where y is tiny): half an ulp of 1 times |x| <= 5,
    /// a few times over for tanh's own ulps. A problem of one element in that tail has nothing
    /// else in its norm.
    fn output_tolerance(&self, problem: &Problem, _index: usize, dtype: DType) -> Tolerance {
        let rel = self.tolerance(problem);
        match dtype {
            DType::F32 => Tolerance { rel, abs: 5.0 * 4.0 * f64::from(f32::EPSILON) },
            _ => Tolerance::rel(rel),
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok(n) = len(problem) else { return Cost::default() };
        let n = n as u64;
        // Per element: x^3 (2), fma-able polynomial (2), scale, tanh, +1, x/2, product: 9.
        Cost { bytes: 2 * n * problem.dtype.size_bytes() as u64, flops: 9 * n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_shapes_are_errors() {
        let config = Gelu.configs()[0].clone();
        for shape in [&[0][..], &[4, 4], &[1 << 31]] {
            assert!(matches!(Gelu.plan(&Problem::new(shape, DType::BF16), &config), Err(KernelError::Shape { .. })), "{shape:?}");
        }
        assert!(matches!(Gelu.plan(&Problem::new(&[8], DType::I32), &config), Err(KernelError::DType { .. })));
    }

    #[test]
    fn reference_has_the_tanh_form() {
        assert_eq!(gelu_f64(0.0), 0.0);
        assert!((gelu_f64(1.0) - 0.841_191_990).abs() < 1e-8);
        assert!((gelu_f64(-10.0)).abs() < 1e-20);
    }
}
