//! Sum of a long vector in two launches: each program of the first reduces ITERS blocks of BLOCK
//! elements (a loop, so that few partials are left) into one partial; the second launch is one
//! program that reduces the partials. Floats accumulate in f32, i32 in i32 (exact, wrapping).
//!
//! Two launches instead of one launch with an atomic add keep the result deterministic: the same
//! input gives the same bits on every run.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::softmax::numel;
use super::*;

pub struct Sum;

/// The dtype a sum of `dtype` accumulates in.
pub fn acc_dtype(dtype: DType) -> DType {
    if dtype.is_float() {
        DType::F32
    } else {
        dtype
    }
}

/// First launch: program `p` reduces elements `[p * block * iters, (p + 1) * block * iters)` into
/// `partials[p]`.
pub fn build_partials(dtype: DType, block: usize, iters: usize) -> Result<Program, KernelError> {
    let acc_t = acc_dtype(dtype);
    let k = Builder::new("sum_partials");
    let x = k.input("x", dtype);
    let partials = k.output("partials", acc_t);
    let n = k.scalar("n", DType::I32);
    let pid = k.program_id(0);
    let start = pid * (block * iters) as i32;
    let lanes = k.arange(0, block as i64);
    let acc0 = k.zeros(&[block], acc_t);
    // Lane-wise accumulation in the loop, one tree reduction at the end.
    let [acc] = k.for_range(0, iters as i32, 1, [acc0], |i, [acc]| {
        let offs = start + i * block as i32 + lanes;
        [acc + k.load_masked(x, offs, offs.lt(n), 0).cast(acc_t)]
    });
    k.store(partials, pid, acc.sum(0));
    Ok(k.finish()?)
}

/// Second launch, one program: `out[0] = sum(partials[..count])`, cast to `dtype`.
pub fn build_final(dtype: DType, block: usize) -> Result<Program, KernelError> {
    let acc_t = acc_dtype(dtype);
    let k = Builder::new("sum_final");
    let partials = k.input("partials", acc_t);
    let out = k.output("out", dtype);
    let count = k.scalar("count", DType::I32);
    let lanes = k.arange(0, block as i64);
    let acc0 = k.zeros(&[block], acc_t);
    let [acc] = k.for_range(0, count, block as i32, [acc0], |start, [acc]| {
        let offs = start + lanes;
        [acc + k.load_masked(partials, offs, offs.lt(count), 0)]
    });
    k.store(out, k.constant(0, DType::I32), acc.sum(0));
    Ok(k.finish()?)
}

impl Kernel for Sum {
    fn name(&self) -> &'static str {
        "sum"
    }
    fn description(&self) -> &'static str {
        "sum of a vector: per-program partials, then one program over the partials"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16, DType::BF16, DType::I32]
    }
    fn shape_doc(&self) -> &'static str {
        "N"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[1 << 24], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        // 40009 leaves 157 partials under BLOCK=128, ITERS=2, so the final loop runs twice. The
        // sum of 100003 inputs (about 1e5) is beyond f16's largest finite value, 65504.
        let mut sizes = vec![1, 7, 97, 1024, 1031, 4099, 40009];
        if dtype != DType::F16 {
            sizes.push(100003);
        }
        sizes.into_iter().map(|n| Problem::new(&[n], dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        [(1024, 4, 4), (128, 2, 1), (4096, 8, 8), (1024, 16, 4)]
            .iter()
            .map(|&(b, it, w)| Config::new().with("BLOCK", b).with("ITERS", it).with("num_warps", w))
            .collect()
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let block = config.block("BLOCK")?;
        let iters = config.count("ITERS")?;
        let span = block * iters;
        let n = match problem.shape[..] {
            [n] if n > 0 => n,
            _ => return Err(KernelError::Shape { shape: problem.shape.clone(), expected: "N, at least 1".into() }),
        };
        // The last program forms offsets up to `start + span`, the final one up to `count + block`.
        if n.checked_add(span).map_or(true, |e| e > i32::MAX as usize) {
            return Err(KernelError::Shape {
                shape: problem.shape.clone(),
                expected: format!("N + BLOCK * ITERS ({span}) below 2^31 (i32 offsets)"),
            });
        }
        let dtype = problem.dtype;
        let count = cdiv(n, span);
        Ok(Plan {
            buffers: vec![
                BufferSpec { name: "x".into(), dtype, len: n, role: Role::Input },
                BufferSpec { name: "partials".into(), dtype: acc_dtype(dtype), len: count, role: Role::Scratch },
                BufferSpec { name: "out".into(), dtype, len: 1, role: Role::Output { zeroed: false } },
            ],
            launches: vec![
                Launch {
                    program: build_partials(dtype, block, iters)?,
                    grid: [grid_dim(count)?, 1, 1],
                    args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Scalar(Scalar::Int(n as i64))],
                },
                Launch {
                    program: build_final(dtype, block)?,
                    grid: [1, 1, 1],
                    args: vec![LaunchArg::Buffer(1), LaunchArg::Buffer(2), LaunchArg::Scalar(Scalar::Int(count as i64))],
                },
            ],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        // Off-centre values keep the sum away from zero, so the relative error measures the
        // kernel's rounding rather than the cancellation of the data.
        let (lo, hi) = if problem.dtype.is_float() { (-1.0, 3.0) } else { (-1000.0, 3000.0) };
        vec![random_buffer(rng, problem.dtype, numel(problem), lo, hi)]
    }
    fn reference(&self, _problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        vec![vec![inputs[0].iter().sum()]]
    }
    fn tolerance(&self, problem: &Problem) -> f64 {
        // f32 accumulation of well-conditioned data (errors near 1e-6 at the tested sizes), then
        // one rounding to the output dtype: half an ulp is 4.9e-4 for f16 and 3.9e-3 for bf16.
        match problem.dtype {
            DType::F32 => 1e-5,
            DType::F16 => 1e-3,
            DType::BF16 => 8e-3,
            _ => 0.0,
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        // N - 1 additions, counted as N; the single output element is written once.
        let n = numel(problem) as u64;
        let size = problem.dtype.size_bytes() as u64;
        Cost { bytes: (n + 1) * size, flops: n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partials_cover_the_input() {
        let cfg = Config::new().with("BLOCK", 128).with("ITERS", 2);
        let plan = Sum.plan(&Problem::new(&[40009], DType::F16), &cfg).unwrap();
        assert_eq!(plan.buffers[1].len, 157);
        assert_eq!(plan.buffers[1].dtype, DType::F32);
        assert_eq!(plan.launches[0].grid, [157, 1, 1]);
        assert_eq!(plan.launches[1].grid, [1, 1, 1]);
    }

    #[test]
    fn bad_problems_are_errors() {
        let cfg = &Sum.configs()[0];
        for shape in [&[0][..], &[3, 4], &[i32::MAX as usize]] {
            let e = Sum.plan(&Problem::new(shape, DType::F32), cfg).unwrap_err();
            assert!(matches!(e, KernelError::Shape { .. }), "{shape:?}");
        }
        let no_iters = Config::new().with("BLOCK", 128);
        assert!(matches!(Sum.plan(&Problem::new(&[9], DType::F32), &no_iters), Err(KernelError::Config(_))));
    }

    #[test]
    fn cost() {
        assert_eq!(Sum.cost(&Problem::new(&[1000], DType::I32)), Cost { bytes: 4004, flops: 1000 });
    }
}
