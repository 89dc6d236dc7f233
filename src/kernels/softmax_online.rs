//! Row softmax for rows longer than one tile: the online softmax of Milakov & Gimelshein (2018).
//! One program per row; a first loop over column blocks keeps the running max `m` and the running
//! sum `l` of `exp(x - m)`, rescaling `l` by `exp(m_old - m_new)` whenever the max grows, so the
//! row is read twice (not three times) and never held whole; a second loop writes `exp(x - m) / l`.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::softmax::{last_dim, numel, rows_cols, softmax_cost, softmax_rows};
use super::*;

pub struct SoftmaxOnline;

/// The tile program, streaming each row in blocks of `block` columns.
pub fn build(dtype: DType, block: usize) -> Result<Program, KernelError> {
    let k = Builder::new("softmax_online");
    let x = k.input("x", dtype);
    let y = k.output("y", dtype);
    let n_cols = k.scalar("n_cols", DType::I32);
    let base = k.program_id(0) * n_cols;
    let lanes = k.arange(0, block as i64);

    let m0 = k.constant(f64::NEG_INFINITY, DType::F32);
    let l0 = k.constant(0.0, DType::F32);
    let [m, l] = k.for_range(0, n_cols, block as i32, [m0, l0], |start, [m, l]| {
        let cols = start + lanes;
        let mask = cols.lt(n_cols);
        let v = k.load_masked(x, base + cols, mask, f64::NEG_INFINITY).cast(DType::F32);
        // Every block holds at least one real column (start < n_cols), so m_new is finite and
        // neither exp() below sees -inf - -inf.
        let m_new = m.maximum(v.max(0));
        let l_new = l * (m - m_new).exp() + (v - m_new).exp().sum(0);
        [m_new, l_new]
    });

    let inv_l = 1.0 / l;
    k.for_range(0, n_cols, block as i32, [], |start, []| {
        let cols = start + lanes;
        let mask = cols.lt(n_cols);
        let v = k.load_masked(x, base + cols, mask, 0.0).cast(DType::F32);
        k.store_masked(y, base + cols, (v - m).exp() * inv_l, mask);
        []
    });
    Ok(k.finish()?)
}

impl Kernel for SoftmaxOnline {
    fn name(&self) -> &'static str {
        "softmax_online"
    }
    fn description(&self) -> &'static str {
        "row softmax for long rows: online max and sum over column blocks"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16, DType::BF16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x COLS"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[1024, 32768], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        // 3001 columns take 3 blocks of 1024 and 47 of 64; 1 and 7 fit in one partial block; 8193
        // leaves one column for a last block.
        [[1, 1], [1, 7], [64, 1], [3, 97], [33, 255], [17, 1031], [2, 3001], [3, 8193]].iter().map(|s| Problem::new(s, dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        [(1024, 4), (64, 1), (256, 2)].iter().map(|&(b, w)| Config::new().with("BLOCK", b).with("num_warps", w)).collect()
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let block = config.block("BLOCK")?;
        let (rows, cols) = rows_cols(problem, "ROWS x COLS", false, block)?;
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
        use rand::Rng;
        // Noise on a rising ramp along each row: the running max grows in nearly every block, so
        // a kernel that forgot to rescale the running sum fails clearly.
        let cols = last_dim(problem);
        let vals: Vec<f64> = (0..numel(problem)).map(|i| rng.gen_range(-4.0..4.0) + 8.0 * (i % cols) as f64 / cols as f64).collect();
        vec![HostBuffer::from_f64(problem.dtype, &vals)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        vec![softmax_rows(&inputs[0], last_dim(problem))]
    }
    fn cost(&self, problem: &Problem) -> Cost {
        // The same minimum as the one-tile softmax: the second read of the row is the kernel's
        // choice, not the problem's need.
        softmax_cost(problem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_problems_are_errors() {
        let p = Problem::new(&[4, 100], DType::F32);
        for block in [0, 100, -64] {
            let cfg = Config::new().with("BLOCK", block);
            assert!(matches!(SoftmaxOnline.plan(&p, &cfg), Err(KernelError::Config(_))), "BLOCK={block}");
        }
        assert!(SoftmaxOnline.plan(&p, &Config::new()).is_err());
        let cfg = &SoftmaxOnline.configs()[0];
        for shape in [&[0, 8][..], &[100], &[1 << 16, 1 << 15]] {
            let e = SoftmaxOnline.plan(&Problem::new(shape, DType::F32), cfg).unwrap_err();
            assert!(matches!(e, KernelError::Shape { .. }), "{shape:?}");
        }
        // Rows longer than the one-tile kernel allows are this kernel's purpose.
        assert!(SoftmaxOnline.plan(&Problem::new(&[2, 1 << 20], DType::BF16), cfg).is_ok());
    }
}
