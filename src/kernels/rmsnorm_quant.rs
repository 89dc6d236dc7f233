//! Residual add, RMSNorm and int8 quantisation fused, one program per row:
//! `h = x + residual` (written back as the new residual stream), `y = h / rms(h) * w`, and `y`
//! quantised symmetrically per row, `q = round(y * 127 / max|y|)` saturated to i8, with
//! `scale = max|y| / 127`.
//!
//! One of the kernels of the kind users write first (`examples/rmsnorm_quant.rs` launches it):
//! the whole row in one block of the next power of two, statistics in f32. How fast it runs is
//! what the lowering makes of three 16-bit streams and an 8-bit one in one program.

use rand::rngs::StdRng;
use tilekit_core::{Builder, Config, DType, HostBuffer, Program, Rounding, Scalar};

use super::softmax::rows_cols;
use super::*;

pub struct RmsNormQuant;

pub const EPS: f64 = 1e-6;

/// Longest row: a whole row is one tile value, which must stay within the registers the
/// lowering allows ([`tilekit_core::gpu::lower::MAX_REGS_PER_VALUE`]) at 16 warps.
pub const MAX_COLS: usize = 16384;

/// The tile program for rows of up to `block` columns. Parameters: `x`, `residual`, `w`, `h`,
/// `q` (i8), `scale` (f32, one per row), `cols` (i32).
pub fn build(dtype: DType, block: usize) -> Result<Program, KernelError> {
    let k = Builder::new("rmsnorm_quant");
    let x = k.input("x", dtype);
    let residual = k.input("residual", dtype);
    let w = k.input("w", dtype);
    let h_out = k.output("h", dtype);
    let q_out = k.output("q", DType::I8);
    let scale_out = k.output("scale", DType::F32);
    let cols = k.scalar("cols", DType::I32);
    let row = k.program_id(0);
    let c = k.arange(0, block as i64);
    let mask = c.lt(cols);
    let offs = row * cols + c;
    let h = k.load_masked(x, offs, mask, 0).cast(DType::F32) + k.load_masked(residual, offs, mask, 0).cast(DType::F32);
    k.store_masked(h_out, offs, h.cast(dtype), mask);
    let rstd = ((h * h).sum(0) / cols.cast(DType::F32) + EPS).rsqrt();
    let y = h * rstd * k.load_masked(w, c, mask, 0).cast(DType::F32);
    let amax = y.abs().max(0).maximum(1e-12);
    let q = (y * (127.0 / amax)).cast_saturating(DType::I8, Rounding::NearestEven);
    k.store_masked(q_out, offs, q, mask);
    k.store(scale_out, row, amax / 127.0);
    Ok(k.finish()?)
}

/// `(h, q, scale)` of one problem, in f64.
pub fn reference_rows(x: &[f64], residual: &[f64], w: &[f64], cols: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut h_all, mut q_all, mut scales) = (Vec::with_capacity(x.len()), Vec::with_capacity(x.len()), Vec::new());
    for (xr, rr) in x.chunks(cols).zip(residual.chunks(cols)) {
        let h: Vec<f64> = xr.iter().zip(rr).map(|(a, b)| a + b).collect();
        let ms = h.iter().map(|v| v * v).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (ms + EPS).sqrt();
        let y: Vec<f64> = h.iter().zip(w).map(|(v, wv)| v * rstd * wv).collect();
        let amax = y.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-12);
        q_all.extend(y.iter().map(|v| (v * 127.0 / amax).round_ties_even().clamp(-128.0, 127.0)));
        scales.push(amax / 127.0);
        h_all.extend(h);
    }
    (h_all, q_all, scales)
}

impl Kernel for RmsNormQuant {
    fn name(&self) -> &'static str {
        "rmsnorm_quant"
    }
    fn description(&self) -> &'static str {
        "residual add + RMSNorm + int8 quantisation per row (a user kernel)"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::BF16, DType::F32]
    }
    fn shape_doc(&self) -> &'static str {
        "ROWS x COLS"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[4096, 8192], DType::BF16)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        [[1, 1], [1, 7], [64, 1], [3, 97], [5, 1024], [17, 1031], [2, 4099]].iter().map(|s| Problem::new(s, dtype)).collect()
    }
    fn configs(&self) -> Vec<Config> {
        [8, 4, 16, 2].iter().map(|&w| Config::new().with("num_warps", w)).collect()
    }
    fn build_plan(&self, problem: &Problem, config: &Config, target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let (rows, cols) = rows_cols(problem, "ROWS x COLS", false, 0)?;
        if cols > MAX_COLS {
            return Err(KernelError::Shape { shape: problem.shape.clone(), expected: format!("ROWS x COLS, COLS at most {MAX_COLS}") });
        }
        let block = cols.next_power_of_two();
        // The row stays in registers from the sum of squares to the quantisation, as softmax's.
        let threads = program_threads(config, target);
        let per_thread = block / threads.max(1);
        check_held(
            per_thread,
            super::softmax::ROW_SHARE,
            target,
            &format!("{block} columns on {threads} threads hold {per_thread} elements per thread"),
            "their masks and addresses",
        )?;
        let dtype = problem.dtype;
        let buf = |name: &str, dtype, len, role| BufferSpec { name: name.into(), dtype, len, role };
        let out = Role::Output { zeroed: false };
        Ok(Plan {
            buffers: vec![
                buf("x", dtype, rows * cols, Role::Input),
                buf("residual", dtype, rows * cols, Role::Input),
                buf("w", dtype, cols, Role::Input),
                buf("h", dtype, rows * cols, out),
                buf("q", DType::I8, rows * cols, out),
                buf("scale", DType::F32, rows, out),
            ],
            launches: vec![Launch {
                program: build(dtype, block)?,
                grid: [grid_dim(rows)?, 1, 1],
                args: (0..6).map(LaunchArg::Buffer).chain([LaunchArg::Scalar(Scalar::Int(cols as i64))]).collect(),
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        let Ok((rows, cols)) = rows_cols(problem, "", false, 0) else { return Vec::new() };
        let d = problem.dtype;
        vec![random_buffer(rng, d, rows * cols, -2.0, 2.0), random_buffer(rng, d, rows * cols, -2.0, 2.0), random_buffer(rng, d, cols, 0.5, 1.5)]
    }
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let Ok((_, cols)) = rows_cols(problem, "", false, 0) else { return Vec::new() };
        let (h, q, scale) = reference_rows(&inputs[0], &inputs[1], &inputs[2], cols);
        vec![h, q, scale]
    }
    fn output_tolerance(&self, problem: &Problem, index: usize, dtype: DType) -> Tolerance {
        match index {
            // h: one rounding of the sum to the storage dtype.
            0 => Tolerance::rel(match problem.dtype {
                DType::F32 => 1e-6,
                _ => 8e-3,
            }),
            // q: f32 statistics against f64 move a value across a rounding boundary by one.
            1 => Tolerance::abs(1.0),
            // scale: a max over f32 products, a few units of 2^-24.
            _ => {
                let _ = dtype;
                Tolerance::rel(1e-5)
            }
        }
    }
    fn cost(&self, problem: &Problem) -> Cost {
        let Ok((rows, cols)) = rows_cols(problem, "", false, 0) else { return Cost::default() };
        let (n, s) = ((rows * cols) as u64, problem.dtype.size_bytes() as u64);
        // Reads x, residual and w, writes h, q and the scales. Per element: add, square and sum,
        // two products, abs and max, scale, round.
        Cost { bytes: 3 * n * s + cols as u64 * s + n + 4 * rows as u64, flops: 8 * n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_quantises_the_largest_to_127() {
        let (h, q, scale) = reference_rows(&[1.0, -3.0, 0.5], &[0.0, 1.0, 0.0], &[1.0, 1.0, 1.0], 3);
        assert_eq!(h, vec![1.0, -2.0, 0.5]);
        assert_eq!(q[1], -127.0);
        assert_eq!(q[2], 32.0);
        assert!(scale[0] > 0.0);
    }

    #[test]
    fn rows_too_long_are_errors() {
        let e = RmsNormQuant.plan(&Problem::new(&[2, MAX_COLS + 1], DType::BF16), &RmsNormQuant.configs()[0]);
        assert!(matches!(e, Err(KernelError::Shape { .. })));
    }
}
