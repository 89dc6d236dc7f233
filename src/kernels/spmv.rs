//! `y = A x` with A in CSR form: the irregular kernel of the library, whose loop bounds and
//! gather addresses come from data.
//!
//! Buffers: `row_ptr` (i32, ROWS + 1), `col_idx` (i32, NNZ), `values` (NNZ), `x` (COLS),
//! `y` (ROWS). The shape is `ROWS x COLS x NNZ_PER_ROW`: NNZ = ROWS * NNZ_PER_ROW nonzeros,
//! spread unevenly over the rows by [`Kernel::inputs`] (about one row in seven empty, one in ten
//! about eight times the average, capped at COLS; distinct sorted columns per row).
//!
//! Design: one program per row (CSR-scalar in the GPU literature, with the row's nonzeros spread
//! over the lanes of a `BLOCK` tile). The program loads `row_ptr[row]` and `row_ptr[row + 1]` as
//! scalars (a load whose offset is a scalar gives a scalar, as `tl.load(ptr + row)` does in
//! Triton) and uses them directly as the bounds of `for off in range(start, end, BLOCK)`: the trip
//! count is data-dependent, so an empty row does no iteration and a long row as many as it needs,
//! instead of every program running to a fixed maximum under masks. Each iteration loads `BLOCK`
//! column indices and values (masked at `end`), gathers `x[col]` with those indices, and adds the
//! products to an f32 tile; the row sum is one reduction after the loop, stored as a scalar.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program};

use super::*;

pub struct Spmv;

/// The tile program. Parameters: `row_ptr`, `col_idx`, `values`, `x`, `y`.
pub fn build(dtype: DType, block: usize) -> Result<Program, KernelError> {
    let k = Builder::new("spmv");
    let row_ptr = k.input("row_ptr", DType::I32);
    let col_idx = k.input("col_idx", DType::I32);
    let values = k.input("values", dtype);
    let x = k.input("x", dtype);
    let y = k.output("y", dtype);
    let row = k.program_id(0);
    let start = k.load(row_ptr, row);
    let end = k.load(row_ptr, row + 1);
    let lanes = k.arange(0, block as i64);
    let acc0 = k.zeros(&[block], DType::F32);
    let [acc] = k.for_range(start, end, block as i32, [acc0], |off, [acc]| {
        let idx = off + lanes;
        let mask = idx.lt(end);
        let cols = k.load_masked(col_idx, idx, mask, 0);
        let a = k.load_masked(values, idx, mask, 0).cast(DType::F32);
        let xv = k.load_masked(x, cols, mask, 0).cast(DType::F32);
        [acc + a * xv]
    });
    k.store(y, row, acc.sum(0).cast(dtype));
    Ok(k.finish()?)
}

/// `(ROWS, COLS, NNZ_PER_ROW)`; ROWS and COLS at least 1, NNZ_PER_ROW at most COLS.
fn dims(problem: &Problem) -> Result<(usize, usize, usize), KernelError> {
    match problem.shape[..] {
        [r, c, avg] if r > 0 && c > 0 && avg <= c => Ok((r, c, avg)),
        _ => Err(KernelError::Shape {
            shape: problem.shape.clone(),
            expected: "ROWS x COLS x NNZ_PER_ROW, ROWS and COLS at least 1, NNZ_PER_ROW at most COLS".into(),
        }),
    }
}

/// Row lengths summing to `nnz`, each at most `cols`: some rows empty, some long.
fn row_lengths(rng: &mut StdRng, rows: usize, cols: usize, nnz: usize) -> Vec<usize> {
    let mut weights: Vec<f64> = (0..rows)
        .map(|_| {
            let r: f64 = rng.gen();
            if r < 0.15 {
                0.0
            } else if r < 0.25 {
                8.0
            } else {
                rng.gen_range(0.25..2.0)
            }
        })
        .collect();
    if weights.iter().all(|&w| w == 0.0) {
        weights.fill(1.0);
    }
    let total: f64 = weights.iter().sum();
    let mut lens: Vec<usize> = weights.iter().map(|w| ((nnz as f64 * w / total) as usize).min(cols)).collect();
    let mut left = nnz.saturating_sub(lens.iter().sum());
    // Hand out what rounding and the COLS cap left over: weighted rows first, in random order,
    // then the empty ones if every other row is full. nnz <= rows * cols, so this ends.
    let mut order: Vec<usize> = (0..rows).collect();
    order.shuffle(rng);
    while left > 0 {
        let before = left;
        for pass_all in [false, true] {
            for &i in &order {
                if left > 0 && lens[i] < cols && (pass_all || weights[i] > 0.0) {
                    lens[i] += 1;
                    left -= 1;
                }
            }
            if left < before {
                break;
            }
        }
        if left == before {
            break;
        }
    }
    lens
}

/// `len` distinct columns below `cols`, sorted.
fn pick_columns(rng: &mut StdRng, cols: usize, len: usize) -> Vec<usize> {
    let mut picked = if 2 * len > cols {
        let mut all: Vec<usize> = (0..cols).collect();
        all.shuffle(rng);
        all.truncate(len);
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(len);
        while seen.len() < len {
            seen.insert(rng.gen_range(0..cols));
        }
        seen.into_iter().collect()
    };
    picked.sort_unstable();
    picked
}

impl Kernel for Spmv {
    fn name(&self) -> &'static str {
        "spmv"
    }
    fn description(&self) -> &'static str {
        "sparse CSR matrix times dense vector, one row per program"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x COLS x NNZ_PER_ROW (average nonzeros per row; rows vary, some empty)"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[1 << 16, 1 << 16, 32], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        // Long rows reach several BLOCKs at both test configurations; 1000 x 1000 x 20 has rows
        // of ~160 nonzeros next to empty ones; 40 x 50 x 45 fills most rows to COLS.
        [[1, 1, 1], [17, 31, 3], [67, 45, 7], [100, 67, 5], [5, 300, 40], [40, 50, 45], [1000, 1000, 20]]
            .iter()
            .map(|s| Problem::new(s, dtype))
            .collect()
    }
    fn configs(&self) -> Vec<Config> {
        let c = |b: i64, w: i64| Config::new().with("BLOCK", b).with("num_warps", w);
        vec![c(32, 1), c(8, 1), c(64, 2), c(128, 4), c(256, 8)]
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let (rows, cols, avg) = dims(problem)?;
        let block = config.block("BLOCK")?;
        let nnz = rows.saturating_mul(avg);
        // The last chunk's lanes run up to BLOCK past NNZ before the mask.
        i32::try_from(nnz.saturating_add(block)).map_err(|_| KernelError::BadConfig(format!("NNZ = {nnz} exceeds i32 offsets")))?;
        i32::try_from(cols).map_err(|_| KernelError::BadConfig(format!("COLS = {cols} exceeds i32 offsets")))?;
        let dtype = problem.dtype;
        let spec = |name: &str, dtype, len, role| BufferSpec { name: name.into(), dtype, len, role };
        Ok(Plan {
            buffers: vec![
                spec("row_ptr", DType::I32, rows + 1, Role::Input),
                spec("col_idx", DType::I32, nnz, Role::Input),
                spec("values", dtype, nnz, Role::Input),
                spec("x", dtype, cols, Role::Input),
                spec("y", dtype, rows, Role::Output { zeroed: false }),
            ],
            launches: vec![Launch { program: build(dtype, block)?, grid: [grid_dim(rows)?, 1, 1], args: (0..5).map(LaunchArg::Buffer).collect() }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok((rows, cols, avg)) = dims(problem) else { return Vec::new() };
        let nnz = rows * avg;
        let lens = row_lengths(rng, rows, cols, nnz);
        let mut row_ptr = Vec::with_capacity(rows + 1);
        let mut col_idx = Vec::with_capacity(nnz);
        row_ptr.push(0i32);
        for &len in &lens {
            col_idx.extend(pick_columns(rng, cols, len).into_iter().map(|c| c as i32));
            row_ptr.push(col_idx.len() as i32);
        }
        vec![
            HostBuffer::from_slice(&row_ptr),
            HostBuffer::from_slice(&col_idx),
            random_buffer(rng, problem.dtype, nnz, -1.0, 1.0),
            random_buffer(rng, problem.dtype, cols, -1.0, 1.0),
        ]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let Ok((rows, ..)) = dims(problem) else { return Vec::new() };
        let (row_ptr, col_idx, values, x) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
        let y = (0..rows)
            .map(|r| {
                let (lo, hi) = (row_ptr[r] as usize, row_ptr[r + 1] as usize);
                (lo..hi).map(|i| values[i] * x[col_idx[i] as usize]).sum()
            })
            .collect();
        vec![y]
    }
    fn tolerance(&self, problem: &Problem) -> f64 {
        match problem.dtype {
            // A sum of up to COLS products in f32, in lane-strided order.
            DType::F32 => 1e-5,
            // f16 products are exact in f32 and summed in f32: the output rounding dominates.
            DType::F16 => 1e-3,
            _ => 0.0,
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok((rows, cols, avg)) = dims(problem) else { return Cost::default() };
        let (rows, cols, nnz) = (rows as u64, cols as u64, (rows * avg) as u64);
        let size = problem.dtype.size_bytes() as u64;
        // row_ptr and col_idx (i32), values, x once, y once; a multiply-add per nonzero.
        Cost { bytes: 4 * (rows + 1) + 4 * nnz + size * (nnz + cols + rows), flops: 2 * nnz }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn row_lengths_sum_to_nnz_within_the_cap() {
        let mut rng = StdRng::seed_from_u64(3);
        for (rows, cols, avg) in [(1, 1, 1), (200, 30, 7), (50, 10, 10), (7, 1000, 0)] {
            let lens = row_lengths(&mut rng, rows, cols, rows * avg);
            assert_eq!(lens.iter().sum::<usize>(), rows * avg);
            assert!(lens.iter().all(|&l| l <= cols));
        }
        let lens = row_lengths(&mut rng, 200, 100, 200 * 5);
        assert!(lens.contains(&0), "some rows are empty");
        assert!(lens.iter().any(|&l| l >= 20), "some rows are long");
    }

    #[test]
    fn bad_problems_are_errors() {
        let config = Spmv.configs()[0].clone();
        for shape in [&[10, 5, 6][..], &[0, 5, 1], &[10, 5]] {
            assert!(matches!(Spmv.plan(&Problem::new(shape, DType::F32), &config), Err(KernelError::Shape { .. })), "{shape:?}");
        }
    }
}
