//! Forward LayerNorm over the last dimension with weight and bias (Triton's layer-norm tutorial):
//! one program per row, three loops over column blocks (mean, then variance around the mean, then
//! normalize), statistics in f32. When one block holds the whole row, the row is read once and
//! kept in registers instead (the tutorial reads it three times even then). The mean and 1/std of each row are outputs too, as the backward
//! pass needs them. With `residual=1` the kernel normalizes `x + r` and also writes that sum, as
//! the fused add-and-norm of transformer blocks does.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Scalar, Tile};

use super::softmax::{numel, rows_cols};
use super::*;

pub struct LayerNorm;

pub const EPS: f64 = 1e-5;

/// How a program covers its row, as the plan knows from COLS and the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowPlan {
    /// One block holds the whole row (`n_cols <= block`): the row is read once and kept in
    /// registers, instead of once per loop.
    pub whole_row: bool,
    /// `n_cols == block` exactly: no lane is masked (whole rows only).
    pub exact: bool,
    /// Load w and b before the reductions rather than after (whole rows only): their latency
    /// hides behind the reductions, but their registers are held through them.
    pub preload: bool,
}

/// The tile program, streaming each row in blocks of `block` columns unless `plan.whole_row`.
/// The program takes what `plan` says of `n_cols` as given; `LayerNorm::plan` checks it.
pub fn build(dtype: DType, block: usize, residual: bool, plan: RowPlan) -> Result<Program, KernelError> {
    let k = Builder::new(if residual { "layernorm_residual" } else { "layernorm" });
    let x = k.input("x", dtype);
    let r = residual.then(|| k.input("r", dtype));
    let w = k.input("w", dtype);
    let b = k.input("b", dtype);
    let y = k.output("y", dtype);
    let sum_out = residual.then(|| k.output("x_plus_r", dtype));
    let mean_out = k.output("mean", DType::F32);
    let rstd_out = k.output("rstd", DType::F32);
    let n_cols = k.scalar("n_cols", DType::I32);
    let row = k.program_id(0);
    let base = row * n_cols;
    let lanes = k.arange(0, block as i64);
    let n = n_cols.cast(DType::F32);

    // One block of the row to normalize, in f32. The sum x + r is recomputed in every pass rather
    // than read back from `x_plus_r`: that keeps it unrounded and needs no ordering between this
    // program's stores and loads.
    let load_row = |start| {
        let start: Tile = start;
        let cols = start + lanes;
        let mask = cols.lt(n_cols);
        let offs = base + cols;
        let mut a = k.load_masked(x, offs, mask, 0).cast(DType::F32);
        if let Some(r) = r {
            a = a + k.load_masked(r, offs, mask, 0).cast(DType::F32);
        }
        (cols, offs, mask, a)
    };

    if plan.whole_row {
        // Without masks where every lane is a column: no predicate, select or branch per vector,
        // which on NVIDIA leaves registers for a fourth program per multiprocessor.
        let mask = (!plan.exact).then(|| lanes.lt(n_cols));
        let load = |buf, offs| match mask {
            Some(m) => k.load_masked(buf, offs, m, 0),
            None => k.load(buf, offs),
        };
        let store = |buf, offs, v| match mask {
            Some(m) => k.store_masked(buf, offs, v, m),
            None => k.store(buf, offs, v),
        };
        let offs = base + lanes;
        let mut a = load(x, offs).cast(DType::F32);
        if let Some(r) = r {
            a = a + load(r, offs).cast(DType::F32);
        }
        // Kept in the buffers' dtype until used, for half the registers in f16 and bf16.
        let wb = || (load(w, lanes), load(b, lanes));
        let early = plan.preload.then(wb);
        if let Some(s) = sum_out {
            store(s, offs, a);
        }
        let mean = a.sum(0) / n;
        let d = match mask {
            Some(m) => k.select(m, a - mean, 0.0),
            None => a - mean,
        };
        let rstd = ((d * d).sum(0) / n + EPS).rsqrt();
        k.store(mean_out, row, mean);
        k.store(rstd_out, row, rstd);
        let (wv, bv) = early.unwrap_or_else(wb);
        store(y, offs, d * rstd * wv.cast(DType::F32) + bv.cast(DType::F32));
        return Ok(k.finish()?);
    }

    let acc0 = k.zeros(&[block], DType::F32);
    let [acc] = k.for_range(0, n_cols, block as i32, [acc0], |start, [acc]| {
        let (_, offs, mask, a) = load_row(start);
        if let Some(s) = sum_out {
            k.store_masked(s, offs, a, mask);
        }
        [acc + a]
    });
    let mean = acc.sum(0) / n;

    // A second pass around the mean instead of E[x^2] - E[x]^2, which cancels catastrophically
    // when the mean is large against the spread.
    let [acc] = k.for_range(0, n_cols, block as i32, [acc0], |start, [acc]| {
        let (_, _, mask, a) = load_row(start);
        let d = k.select(mask, a - mean, 0.0);
        [acc + d * d]
    });
    let rstd = (acc.sum(0) / n + EPS).rsqrt();
    k.store(mean_out, row, mean);
    k.store(rstd_out, row, rstd);

    k.for_range(0, n_cols, block as i32, [], |start, []| {
        let (cols, offs, mask, a) = load_row(start);
        let wv = k.load_masked(w, cols, mask, 0).cast(DType::F32);
        let bv = k.load_masked(b, cols, mask, 0).cast(DType::F32);
        k.store_masked(y, offs, (a - mean) * rstd * wv + bv, mask);
        []
    });
    Ok(k.finish()?)
}

impl Kernel for LayerNorm {
    fn name(&self) -> &'static str {
        "layernorm"
    }
    fn description(&self) -> &'static str {
        "LayerNorm over rows with weight and bias (residual=1: of x + r, also writing x + r)"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32, DType::F16, DType::BF16]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x COLS (options: residual=1)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[OptionSpec { name: "residual", kind: OptionKind::Bool, doc: "add a residual input first and store the sum" }]
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4096, 4096], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        let shapes: &[[usize; 2]] = &[[1, 1], [1, 7], [64, 1], [3, 97], [5, 1024], [17, 1031], [2, 2053]];
        let mut out = Vec::new();
        for residual in ["0", "1"] {
            out.extend(shapes.iter().map(|s| Problem::new(s, dtype).with("residual", residual)));
        }
        out
    }
    fn configs(&self) -> Vec<Config> {
        // From (8192, 8) on, a whole row of up to 8192 columns in registers, read once. The last
        // two load w and b after the reductions and ask ptxas for 3 or 4 programs per
        // multiprocessor: an f16 row of 8192 is 16 KiB, and on the H200 more rows in flight per
        // multiprocessor keep memory busier (2.54 -> 2.96 TB/s from two to three). Four fit in
        // 64 registers since addresses take their per-element offsets as immediates.
        let mut configs: Vec<Config> =
            [(1024, 4), (64, 1), (256, 2), (4096, 8), (8192, 8)].iter().map(|&(b, w)| Config::new().with("BLOCK", b).with("num_warps", w)).collect();
        for occupancy in [3, 4] {
            configs.push(Config::new().with("BLOCK", 8192).with("num_warps", 8).with("PRELOAD", 0).with("occupancy", occupancy));
        }
        configs
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let block = config.block("BLOCK")?;
        let (rows, cols) = rows_cols(problem, "ROWS x COLS", false, block)?;
        let residual = problem.flag("residual");
        let preload = match config.get("PRELOAD") {
            Ok(v @ (0 | 1)) => v == 1,
            Ok(v) => return Err(KernelError::BadConfig(format!("PRELOAD = {v}: 0 or 1"))),
            Err(_) => true,
        };
        let row_plan = RowPlan { whole_row: cols <= block, exact: cols == block, preload };
        // The registers an occupancy request leaves hold a row of exactly BLOCK 16-bit columns,
        // nothing larger: masks, f32 rows or layout conversions (odd COLS) make ptxas spill.
        if config.get("occupancy").is_ok() && !(row_plan.exact && problem.dtype.size_bytes() == 2) {
            return Err(KernelError::Unfit(format!(
                "with `occupancy`, a configuration holds rows of exactly BLOCK = {block} f16 or bf16 columns, not {cols} {}",
                problem.dtype
            )));
        }
        let dtype = problem.dtype;
        let buf = |name: &str, dtype, len, role| BufferSpec { name: name.into(), dtype, len, role };
        let out = Role::Output { zeroed: false };
        let mut buffers = vec![buf("x", dtype, rows * cols, Role::Input)];
        if residual {
            buffers.push(buf("r", dtype, rows * cols, Role::Input));
        }
        buffers.push(buf("w", dtype, cols, Role::Input));
        buffers.push(buf("b", dtype, cols, Role::Input));
        buffers.push(buf("y", dtype, rows * cols, out));
        if residual {
            buffers.push(buf("x_plus_r", dtype, rows * cols, out));
        }
        buffers.push(buf("mean", DType::F32, rows, out));
        buffers.push(buf("rstd", DType::F32, rows, out));
        // The program's buffer parameters are declared in plan order.
        let mut args: Vec<LaunchArg> = (0..buffers.len()).map(LaunchArg::Buffer).collect();
        args.push(LaunchArg::Scalar(Scalar::Int(cols as i64)));
        Ok(Plan { buffers, launches: vec![Launch { program: build(dtype, block, residual, row_plan)?, grid: [grid_dim(rows)?, 1, 1], args }] })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let dtype = problem.dtype;
        let n = numel(problem);
        let cols = problem.shape.last().copied().unwrap_or(1);
        // x is off-centre so that subtracting the mean matters.
        let mut v = vec![random_buffer(rng, dtype, n, -3.0, 5.0)];
        if problem.flag("residual") {
            v.push(random_buffer(rng, dtype, n, -2.0, 2.0));
        }
        v.push(random_buffer(rng, dtype, cols, 0.5, 1.5));
        v.push(random_buffer(rng, dtype, cols, -1.0, 1.0));
        v
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let residual = problem.flag("residual");
        let cols = problem.shape.last().copied().unwrap_or(1);
        let a: Vec<f64> = if residual { inputs[0].iter().zip(&inputs[1]).map(|(x, r)| x + r).collect() } else { inputs[0].clone() };
        let (w, b) = if residual { (&inputs[2], &inputs[3]) } else { (&inputs[1], &inputs[2]) };
        let (mut y, mut means, mut rstds) = (Vec::new(), Vec::new(), Vec::new());
        for row in a.chunks(cols) {
            let mean = row.iter().sum::<f64>() / cols as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
            let rstd = 1.0 / (var + EPS).sqrt();
            y.extend(row.iter().enumerate().map(|(j, v)| (v - mean) * rstd * w[j] + b[j]));
            means.push(mean);
            rstds.push(rstd);
        }
        let mut out = vec![y];
        if residual {
            out.push(a);
        }
        out.push(means);
        out.push(rstds);
        out
    }
    fn cost(&self, problem: &Problem) -> Cost {
        // Per element: an add for the mean, a subtraction, a square and an add for the variance,
        // then a multiply by rstd, one by w and an add of b (7), plus the residual add. Per row: the
        // two divisions by COLS, the eps add and the rsqrt (4).
        let (rows, cols) = match problem.shape[..] {
            [r, c] => (r as u64, c as u64),
            _ => (1, numel(problem) as u64),
        };
        let residual = problem.flag("residual") as u64;
        let size = problem.dtype.size_bytes() as u64;
        let matrices = 2 + 2 * residual; // x and y, plus r and x + r
        Cost { bytes: matrices * rows * cols * size + 2 * cols * size + 2 * rows * 4, flops: (7 + residual) * rows * cols + 4 * rows }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residual_adds_an_input_and_an_output() {
        let cfg = &LayerNorm.configs()[0];
        let names = |p: &Problem| {
            let plan = LayerNorm.plan(p, cfg).unwrap();
            assert_eq!(plan.launches[0].program.params.len(), plan.buffers.len() + 1);
            plan.buffers.iter().map(|b| b.name.clone()).collect::<Vec<_>>().join(",")
        };
        let p = Problem::new(&[3, 10], DType::F16);
        assert_eq!(names(&p), "x,w,b,y,mean,rstd");
        assert_eq!(names(&p.clone().with("residual", "1")), "x,r,w,b,y,x_plus_r,mean,rstd");
    }

    #[test]
    fn bad_problems_are_errors() {
        let cfg = &LayerNorm.configs()[0];
        for shape in [&[7][..], &[0, 7], &[7, 0], &[1 << 16, 1 << 15]] {
            let e = LayerNorm.plan(&Problem::new(shape, DType::F32), cfg).unwrap_err();
            assert!(matches!(e, KernelError::Shape { .. }), "{shape:?}");
        }
        let e = LayerNorm.plan(&Problem::new(&[2, 8], DType::F32), &Config::new().with("BLOCK", 3));
        assert!(matches!(e, Err(KernelError::Config(_))));
    }

    #[test]
    fn cost() {
        // x, y: 2*30*2 bytes; w, b: 2*10*2; mean, rstd: 2*3*4.
        let p = Problem::new(&[3, 10], DType::F16);
        assert_eq!(LayerNorm.cost(&p), Cost { bytes: 120 + 40 + 24, flops: 7 * 30 + 12 });
        // r and x + r add 2*30*2 bytes and one add per element.
        assert_eq!(LayerNorm.cost(&p.with("residual", "1")), Cost { bytes: 240 + 40 + 24, flops: 8 * 30 + 12 });
    }
}
