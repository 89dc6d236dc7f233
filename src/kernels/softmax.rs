//! Row softmax with the whole row in one tile (Triton's fused-softmax tutorial): one program per
//! row, the row read once and written once, the statistics in f32.
//!
//! Also home of the helpers the other row-wise kernels share (shape checks, the f64 softmax).

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar};

use super::*;

pub struct Softmax;

/// Longest row the one-tile kernel takes. On a GPU the tile lives in registers; longer rows belong
/// to `softmax_online`, which streams the row in blocks.
pub const MAX_COLS: usize = 1 << 16;

/// The share of a thread's registers ([`Target::register_share`]) its part of the row may take:
/// each element also needs its mask and address where the row is not a whole number of vectors,
/// and at half the file (128 elements of 255 registers, 8192 columns on 2 warps of 32) ptxas
/// spilled on every NVIDIA target.
pub const ROW_SHARE: (u32, u32) = (1, 4);

/// The tile program for rows of up to `block` columns (`block` a power of two).
pub fn build(dtype: DType, block: usize) -> Result<Program, KernelError> {
    let k = Builder::new("softmax");
    let x = k.input("x", dtype);
    let y = k.output("y", dtype);
    let n_cols = k.scalar("n_cols", DType::I32);
    let row = k.program_id(0);
    let cols = k.arange(0, block as i64);
    let mask = cols.lt(n_cols);
    let offs = row * n_cols + cols;
    // Padding lanes read -inf: they never win the max and exp() turns them into zeros in the sum.
    let v = k.load_masked(x, offs, mask, f64::NEG_INFINITY).cast(DType::F32);
    // Subtracting the max keeps exp() from overflowing; the result is unchanged.
    let e = (v - v.max(0)).exp();
    // One division per program and a multiply per element: an IEEE f32 division per element is a
    // long instruction sequence on NVIDIA whose registers cost occupancy on long rows (at 12800
    // columns on 32 warps, 50 registers instead of the 32 two programs per multiprocessor need).
    let inv_sum = 1.0 / e.sum(0);
    k.store_masked(y, offs, e * inv_sum, mask);
    Ok(k.finish()?)
}

impl Kernel for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }
    fn description(&self) -> &'static str {
        "row softmax, one row per program in one tile"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16, DType::BF16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x COLS"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4096, 1024], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        [[1, 1], [1, 7], [64, 1], [3, 97], [7, 80], [5, 1024], [17, 1031], [2, 4099]].iter().map(|s| Problem::new(s, dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        // BLOCK follows from COLS; the choices are the warps spread over the row and, for long
        // rows, the programs per multiprocessor the registers must leave room for: the row sits
        // in registers, and at 12800 columns ptxas otherwise gives 16 or 32 warps so many that
        // one program fills a multiprocessor (`occupancy`: ptxas's .minnctapersm).
        let mut configs: Vec<Config> = [4, 8, 16, 2, 32].iter().map(|&w| Config::new().with("num_warps", w)).collect();
        configs.extend([16, 32].iter().map(|&w| Config::new().with("num_warps", w).with("occupancy", 2)));
        configs
    }
    fn build_plan(&self, problem: &Problem, config: &Config, target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        config.count("num_warps")?;
        let (rows, cols) = rows_cols(problem, "ROWS x COLS", false, 0)?;
        if cols > MAX_COLS {
            return Err(KernelError::Shape {
                shape: problem.shape.clone(),
                expected: format!("ROWS x COLS with COLS <= {MAX_COLS} (longer rows: softmax_online)"),
            });
        }
        let block = cols.next_power_of_two();
        let threads = program_threads(config, target);
        let per_thread = block / threads.min(block);
        check_held(
            per_thread,
            ROW_SHARE,
            target,
            &format!("{cols} columns on {} warps of {} threads hold {per_thread} elements per thread", config.num_warps(), target.subgroup_size),
            "their masks and addresses: take more warps",
        )?;
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
        vec![random_buffer(rng, problem.dtype, numel(problem), -6.0, 6.0)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        vec![softmax_rows(&inputs[0], last_dim(problem))]
    }
    fn cost(&self, problem: &Problem) -> Cost {
        softmax_cost(problem)
    }
}

/// Softmax needs one read and one write of the matrix, and per element a compare for the max,
/// a subtraction, an exp, an add for the sum and a division: 5 FLOPs.
pub(crate) fn softmax_cost(problem: &Problem) -> Cost {
    let n = numel(problem) as u64;
    Cost { bytes: 2 * n * problem.dtype.size_bytes() as u64, flops: 5 * n }
}

/// Softmax of each row of `cols` elements, in f64.
pub(crate) fn softmax_rows(x: &[f64], cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols.max(1)) {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}

/// `(ROWS, COLS)` of a `ROWS x COLS` problem (or `N` as one row when `allow_1d`), both at least
/// 1, and small enough that every i32 element offset the kernel forms, up to `slack` past the end
/// (padding lanes of the last block), stays below 2^31.
pub(crate) fn rows_cols(problem: &Problem, expected: &str, allow_1d: bool, slack: usize) -> Result<(usize, usize), KernelError> {
    let bad = |why: &str| KernelError::Shape { shape: problem.shape.clone(), expected: format!("{expected}{why}") };
    let (rows, cols) = match problem.shape[..] {
        [n] if allow_1d => (1, n),
        [r, c] => (r, c),
        _ => return Err(bad("")),
    };
    if rows == 0 || cols == 0 {
        return Err(bad(", every extent at least 1"));
    }
    let end = rows.checked_mul(cols).and_then(|n| n.checked_add(slack));
    if end.map_or(true, |e| e > i32::MAX as usize) {
        return Err(bad(", fewer than 2^31 elements (i32 offsets)"));
    }
    Ok((rows, cols))
}

/// Number of elements of the problem's shape.
pub(crate) fn numel(problem: &Problem) -> usize {
    problem.shape.iter().product()
}

/// The innermost extent (the row length of a row-wise kernel).
pub(crate) fn last_dim(problem: &Problem) -> usize {
    problem.shape.last().copied().unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_problems_are_errors() {
        let cfg = &Softmax.configs()[0];
        let err = |shape: &[usize], dtype| Softmax.plan(&Problem::new(shape, dtype), cfg).unwrap_err();
        assert!(matches!(err(&[4, 8], DType::I32), KernelError::DType { .. }));
        for shape in [&[8][..], &[0, 8], &[8, 0], &[2, 3, 4], &[1 << 20, 1 << 12], &[2, MAX_COLS + 1]] {
            assert!(matches!(err(shape, DType::F32), KernelError::Shape { .. }), "{shape:?}");
        }
        let bad_warps = Config::new().with("num_warps", 0);
        assert!(Softmax.plan(&Problem::new(&[2, 8], DType::F32), &bad_warps).is_err());
    }

    #[test]
    fn block_covers_the_row() {
        let plan = Softmax.plan(&Problem::new(&[3, 1031], DType::F16), &Softmax.configs()[0]).unwrap();
        assert_eq!(plan.launches[0].grid, [3, 1, 1]);
        let arange = plan.launches[0].program.values.iter().any(|(_, t)| t.shape == [2048]);
        assert!(arange, "a 1031-column row needs a 2048-wide tile");
    }

    #[test]
    fn cost_counts_one_read_and_one_write() {
        let c = Softmax.cost(&Problem::new(&[3, 100], DType::F16));
        assert_eq!(c, Cost { bytes: 2 * 300 * 2, flops: 5 * 300 });
    }
}
