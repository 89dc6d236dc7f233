//! Histogram of i32 values into BINS counters with atomic adds: one program per BLOCK values,
//! each lane adding 1 to the bin of its value. Values outside `[0, BINS)` are masked off, so they
//! are ignored and never touch memory.

use rand::rngs::StdRng;
use rand::Rng;
use tilekit_core::{Access, Builder, Config, DType, HostBuffer, Program, Scalar};

use super::*;

pub struct Histogram;

/// The tile program for one block of `block` values.
pub fn build(block: usize) -> Result<Program, KernelError> {
    let k = Builder::new("histogram");
    let x = k.input("x", DType::I32);
    let hist = k.buffer("hist", DType::I32, Access::ReadWrite);
    let n = k.scalar("n", DType::I32);
    let bins = k.scalar("bins", DType::I32);
    let offs = k.program_id(0) * block as i32 + k.arange(0, block as i64);
    let mask = offs.lt(n);
    let v = k.load_masked(x, offs, mask, 0);
    let in_range = mask & v.ge(0) & v.lt(bins);
    k.atomic_add(hist, v, 1, Some(in_range));
    Ok(k.finish()?)
}

/// `(N, BINS)` of an `N x BINS` problem.
fn n_bins(problem: &Problem, slack: usize) -> Result<(usize, usize), KernelError> {
    let bad = |why: &str| KernelError::Shape { shape: problem.shape.clone(), expected: format!("N x BINS{why}") };
    let (n, bins) = match problem.shape[..] {
        [n, b] => (n, b),
        _ => return Err(bad("")),
    };
    if n == 0 || bins == 0 {
        return Err(bad(", both at least 1"));
    }
    if n.checked_add(slack).map_or(true, |e| e > i32::MAX as usize) || bins > i32::MAX as usize {
        return Err(bad(", below 2^31 (i32 offsets)"));
    }
    Ok((n, bins))
}

impl Kernel for Histogram {
    fn name(&self) -> &'static str {
        "histogram"
    }
    fn description(&self) -> &'static str {
        "counts of i32 values in [0, BINS) with atomic adds"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::I32]
    }
    fn shape_doc(&self) -> &'static str {
        "N x BINS (N values, BINS bins)"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[1 << 24, 256], DType::I32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        // Few bins make many lanes of one tile hit the same counter.
        [[1, 1], [7, 3], [97, 1], [1031, 17], [4099, 100], [2053, 1000]].iter().map(|s| Problem::new(s, dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        [(1024, 4), (128, 1), (4096, 8)].iter().map(|&(b, w)| Config::new().with("BLOCK", b).with("num_warps", w)).collect()
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let block = config.block("BLOCK")?;
        let (n, bins) = n_bins(problem, block)?;
        Ok(Plan {
            buffers: vec![
                BufferSpec { name: "x".into(), dtype: DType::I32, len: n, role: Role::Input },
                BufferSpec { name: "hist".into(), dtype: DType::I32, len: bins, role: Role::Output { zeroed: true } },
            ],
            launches: vec![Launch {
                program: build(block)?,
                grid: [grid_dim(cdiv(n, block))?, 1, 1],
                args: vec![
                    LaunchArg::Buffer(0),
                    LaunchArg::Buffer(1),
                    LaunchArg::Scalar(Scalar::Int(n as i64)),
                    LaunchArg::Scalar(Scalar::Int(bins as i64)),
                ],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let n = problem.shape.first().copied().unwrap_or(0);
        let bins = problem.shape.get(1).copied().unwrap_or(1).min(i32::MAX as usize) as i32;
        // About one value in sixteen lies outside [0, BINS), from just outside to the extremes,
        // so a kernel that does not mask them writes out of bounds or miscounts.
        let outside = [-1, bins, bins.saturating_add(1), -bins.saturating_add(7), i32::MIN, i32::MAX];
        let vals: Vec<i32> =
            (0..n).map(|_| if rng.gen_ratio(1, 16) { outside[rng.gen_range(0..outside.len())] } else { rng.gen_range(0..bins) }).collect();
        vec![HostBuffer::from_slice(&vals)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let bins = problem.shape.get(1).copied().unwrap_or(1);
        let mut hist = vec![0.0; bins];
        for &v in &inputs[0] {
            if v >= 0.0 && v < bins as f64 {
                hist[v as usize] += 1.0;
            }
        }
        vec![hist]
    }
    fn cost(&self, problem: &Problem) -> Cost {
        // Each value is read once and each bin written once; one increment per value.
        let n = problem.shape.first().copied().unwrap_or(0) as u64;
        let bins = problem.shape.get(1).copied().unwrap_or(0) as u64;
        Cost { bytes: 4 * (n + bins), flops: n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn inputs_include_out_of_range_values() {
        let p = Problem::new(&[4099, 100], DType::I32);
        let x = Histogram.inputs(&p, &mut StdRng::seed_from_u64(1))[0].to_f64();
        let outside = x.iter().filter(|&&v| !(0.0..100.0).contains(&v)).count();
        assert!(outside > 100 && outside < 500, "{outside} of 4099 outside [0, 100)");
        let counted: f64 = Histogram.reference(&p, &[x]).concat().iter().sum();
        assert_eq!(counted as usize, 4099 - outside);
    }

    #[test]
    fn bad_problems_are_errors() {
        let cfg = &Histogram.configs()[0];
        for shape in [&[7][..], &[0, 3], &[7, 0], &[i32::MAX as usize, 3]] {
            let e = Histogram.plan(&Problem::new(shape, DType::I32), cfg).unwrap_err();
            assert!(matches!(e, KernelError::Shape { .. }), "{shape:?}");
        }
        assert!(matches!(Histogram.plan(&Problem::new(&[7, 3], DType::F32), cfg), Err(KernelError::DType { .. })));
    }
}
