//! cuBLAS on CUDA devices, loaded at run time: the matrix-rate ceiling of each CUDA device (an
//! f16 product of [`CEILING_SIZE`]^3, as Triton's matmul tutorial compares with) and a baseline
//! entry beside tilekit's matmul for every plain f16 and bf16 matmul problem. Checked against the same
//! f64 reference as tilekit's kernels before it is timed with the same protocol (CUDA events
//! around each product, the same cache flush, the same run counts).

use std::time::Instant;

use super::runner::{blank, BenchOptions};
use super::schema::{CheckRecord, Entry, OutputRecord, Status};
use super::stats::{runs_needed, summarize};
use crate::check::compare;
use crate::device::{cuda_runtime, Device};
use crate::kernels::{Kernel, Problem};
use crate::{DType, HostBuffer};
use tilekit_ptx::{CublasMatmul, CudaBuffer, CudaError, CudaRuntime};

/// M = N = K of the product the matrix ceiling is measured on.
pub const CEILING_SIZE: usize = 8192;

/// (m, n, k) when cuBLAS computes exactly what tilekit's matmul does for `problem`.
fn product(kernel: &str, problem: &Problem) -> Option<(usize, usize, usize)> {
    match (kernel, problem.dtype, &problem.shape[..]) {
        ("matmul", DType::F16 | DType::BF16, &[m, n, k]) if problem.opts.is_empty() => Some((m, n, k)),
        // tf32 against cuBLAS's tf32 tensor-core product.
        ("matmul", DType::F32, &[m, n, k]) if problem.opts.len() == 1 && problem.opt("precision") == Some("tf32") => Some((m, n, k)),
        _ => None,
    }
}

/// Runs the protocol on one product: a first batch, then more when it did not fill
/// `min_time_s`. Returns the samples.
fn time(rt: &CudaRuntime, gemm: &CublasMatmul, a: &CudaBuffer, b: &CudaBuffer, c: &mut CudaBuffer, o: &BenchOptions) -> Result<Vec<f64>, CudaError> {
    let mut flush = match o.flush_bytes {
        0 => None,
        n => Some(rt.alloc(DType::U8, n as usize)?),
    };
    let first = o.min_runs.min(o.max_runs).max(1);
    let mut samples = gemm.time(rt, a, b, c, o.warmup, first, flush.as_mut())?;
    let want = runs_needed(samples.len(), samples.iter().sum(), o.min_runs, o.min_time_s, o.max_runs);
    if want > samples.len() {
        samples.extend(gemm.time(rt, a, b, c, 0, want - samples.len(), flush.as_mut())?);
    }
    Ok(samples)
}

fn upload(rt: &CudaRuntime, host: &HostBuffer) -> Result<CudaBuffer, CudaError> {
    let mut d = rt.alloc(host.dtype(), host.len())?;
    rt.upload(&mut d, host)?;
    Ok(d)
}

/// The device's f16 matrix rate through cuBLAS, TFLOP/s (median), and how it was measured;
/// None on other devices; an error message where cuBLAS is missing or fails.
pub fn ceiling(device: &Device, o: &BenchOptions) -> Option<Result<(f64, String), String>> {
    let Device::Cuda { ordinal, .. } = device else { return None };
    let n = CEILING_SIZE;
    let run = || -> Result<(f64, String), CudaError> {
        let rt = cuda_runtime(*ordinal)?;
        let gemm = CublasMatmul::new(&rt, n, n, n)?;
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(o.seed);
        let a = upload(&rt, &crate::kernels::random_buffer(&mut rng, DType::F16, n * n, -1.0, 1.0))?;
        let b = upload(&rt, &crate::kernels::random_buffer(&mut rng, DType::F16, n * n, -1.0, 1.0))?;
        let mut c = rt.alloc(DType::F16, n * n)?;
        let samples = time(&rt, &gemm, &a, &b, &mut c, o)?;
        let s = summarize(&samples).ok_or_else(|| CudaError::Buffer("cuBLAS timing gave a sample that is not finite".into()))?;
        let tflops = 2.0 * (n as f64).powi(3) / s.median_s / 1e12;
        Ok((tflops, format!("cuBLAS cublasGemmEx f16 x f16 -> f16, f32 accumulate, {n}x{n}x{n}, median of {} runs", samples.len())))
    };
    Some(run().map_err(|e| e.to_string()))
}

/// cuBLAS's entry beside tilekit's for a plain f16 or bf16 matmul, or an f32 one multiplied as
/// tf32, on a CUDA device; None where
/// there is nothing to compare.
pub fn baseline(
    device: &Device,
    kernel: &dyn Kernel,
    problem: &Problem,
    reference: Option<&Vec<Vec<f64>>>,
    inputs: &[HostBuffer],
    o: &BenchOptions,
    run: &str,
) -> Option<Entry> {
    let Device::Cuda { ordinal, .. } = device else { return None };
    let (m, n, k) = product(kernel.name(), problem)?;
    let cost = kernel.cost(problem);
    let what = match problem.dtype {
        DType::F32 => "cublasGemmEx f32, CUBLAS_COMPUTE_32F_FAST_TF32".to_string(),
        d => format!("cublasGemmEx {d}, f32 accumulate"),
    };
    let mut e = blank(run, &device.name(), kernel.name(), "cublas", problem, what, true, cost.bytes, cost.flops);
    e.status = Status::Error;
    let Some(reference) = reference else {
        e.status = Status::Skipped;
        e.message = Some("no reference to check against".into());
        return Some(e);
    };
    let result = (|| -> Result<(), CudaError> {
        let rt = cuda_runtime(*ordinal)?;
        let gemm = CublasMatmul::of(&rt, problem.dtype, m, n, k)?;
        let (a, b) = (upload(&rt, &inputs[0])?, upload(&rt, &inputs[1])?);
        let mut c = rt.alloc(problem.dtype, m * n)?;
        let start = Instant::now();
        gemm.run(&rt, &a, &b, &mut c)?;
        let out = rt.download(&c)?;
        e.first_run_s = Some(start.elapsed().as_secs_f64());
        // cuBLAS rounds f32 to tf32 its own way (the reference rounds as tilekit's `dot` does):
        // checked within tf32's precision, 2^-11 per operand, instead.
        let tolerance = if problem.dtype == DType::F32 { kernel.tolerance(problem).max(2e-3) } else { kernel.tolerance(problem) };
        let cmp = compare("c", &out.to_f64(), &reference[0], tolerance);
        e.check = Some(CheckRecord {
            outputs: vec![OutputRecord {
                name: cmp.name,
                rel_err: cmp.rel_err,
                tolerance: cmp.tolerance,
                non_finite: cmp.non_finite,
                pass: cmp.pass,
            }],
        });
        if !cmp.pass {
            e.status = Status::Wrong;
            e.message = Some("the output failed its tolerance against the f64 reference; not timed".into());
            return Ok(());
        }
        let samples = time(&rt, &gemm, &a, &b, &mut c, o)?;
        e.summary = summarize(&samples);
        e.samples_s = samples;
        if e.summary.is_some() {
            e.status = Status::Ok;
        } else {
            e.message = Some("the timer returned a sample that is not finite".into());
        }
        Ok(())
    })();
    if let Err(err) = result {
        e.status = Status::Error;
        e.message = Some(err.to_string());
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_f16_and_bf16_matmuls_have_a_cublas_baseline() {
        assert_eq!(product("matmul", &Problem::new(&[100, 70, 33], DType::F16)), Some((100, 70, 33)));
        assert_eq!(product("matmul", &Problem::new(&[100, 70, 33], DType::BF16)), Some((100, 70, 33)));
        assert_eq!(product("matmul", &Problem::new(&[100, 70, 33], DType::F32)), None);
        assert_eq!(product("matmul", &Problem::new(&[100, 70, 33], DType::F16).with("bias", "1")), None);
        assert_eq!(product("softmax", &Problem::new(&[100, 70], DType::F16)), None);
    }
}
