//! cuBLAS, loaded at run time like the driver: the vendor's f16, bf16 and tf32 matrix multiply,
//! which `tilekit bench` runs as the matrix-rate ceiling of a CUDA device and as the baseline
//! its matmul is compared with. Row-major operands as tilekit's matmul takes them.

use cudarc::cublas::sys::{self as blas_sys, cublasOperation_t};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{DevicePtr, DevicePtrMut};
use half::f16;
use tilekit_core::DType;

use crate::cuda::{CudaBuffer, CudaError, CudaRuntime};

/// Whether libcublas can be loaded.
pub fn cublas_present() -> bool {
    // SAFETY: only tries to load the library and reports whether it could.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

/// C = A B through cuBLAS, f16 or bf16 operands and result, f32 accumulation (or f32 operands
/// and result multiplied on tf32 tensor cores, `CUBLAS_COMPUTE_32F_FAST_TF32`): A is m x k, B
/// is k x n and C is m x n, each row-major and dense.
pub struct CublasMatmul {
    blas: CudaBlas,
    dtype: DType,
    m: usize,
    n: usize,
    k: usize,
}

impl CublasMatmul {
    /// A product of f16 matrices.
    pub fn new(rt: &CudaRuntime, m: usize, n: usize, k: usize) -> Result<CublasMatmul, CudaError> {
        CublasMatmul::of(rt, DType::F16, m, n, k)
    }

    /// A product of `dtype` matrices: f16 or bf16, or f32 multiplied as tf32.
    pub fn of(rt: &CudaRuntime, dtype: DType, m: usize, n: usize, k: usize) -> Result<CublasMatmul, CudaError> {
        if !cublas_present() {
            return Err(CudaError::NoCublas);
        }
        let err = |what: String| CudaError::Cublas { device: rt.info().name.clone(), what };
        if !matches!(dtype, DType::F16 | DType::BF16 | DType::F32) {
            return Err(err(format!("a product of {dtype} matrices: the baseline multiplies f16, bf16 or f32 (as tf32)")));
        }
        for (name, v) in [("m", m), ("n", n), ("k", k)] {
            if v == 0 || i32::try_from(v).is_err() {
                return Err(err(format!("{name} = {v}: cuBLAS takes extents from 1 to 2^31-1")));
            }
        }
        let blas = CudaBlas::new(rt.stream().clone()).map_err(|e| err(format!("creating a handle: {e}")))?;
        Ok(CublasMatmul { blas, dtype, m, n, k })
    }

    fn check(&self, rt: &CudaRuntime, name: &str, b: &CudaBuffer, len: usize) -> Result<(), CudaError> {
        if b.dtype() != self.dtype || b.len() != len {
            return Err(CudaError::Cublas {
                device: rt.info().name.clone(),
                what: format!("{name} is {} x {}, the product needs {len} x {}", b.len(), b.dtype(), self.dtype),
            });
        }
        Ok(())
    }

    /// Puts one product on the runtime's stream (no wait).
    pub fn enqueue(&self, rt: &CudaRuntime, a: &CudaBuffer, b: &CudaBuffer, c: &mut CudaBuffer) -> Result<(), CudaError> {
        let (m, n, k) = (self.m, self.n, self.k);
        self.check(rt, "A", a, m * k)?;
        self.check(rt, "B", b, k * n)?;
        self.check(rt, "C", c, m * n)?;
        match self.dtype {
            DType::BF16 => self.gemm::<half::bf16>(rt, a, b, c, half::bf16::ONE, half::bf16::ZERO),
            DType::F32 => self.gemm_tf32(rt, a, b, c),
            _ => self.gemm::<f16>(rt, a, b, c, f16::ONE, f16::ZERO),
        }
    }

    /// The f32 product on tf32 tensor cores: `cublasGemmEx` with f32 matrices and
    /// `CUBLAS_COMPUTE_32F_FAST_TF32` (cudarc's f32 `gemm` is `cublasSgemm`, full f32).
    fn gemm_tf32(&self, rt: &CudaRuntime, a: &CudaBuffer, b: &CudaBuffer, c: &mut CudaBuffer) -> Result<(), CudaError> {
        let (m, n, k) = (self.m, self.n, self.k);
        let stream = rt.stream();
        let (one, zero) = (1f32, 0f32);
        let (ap, _a_sync) = a.slice().device_ptr(stream);
        let (bp, _b_sync) = b.slice().device_ptr(stream);
        let (cp, _c_sync) = c.slice_mut().device_ptr_mut(stream);
        // Column-major, as `gemm`: C^T (n x m) = B^T A^T.
        // SAFETY: the handle is this product's; the three device pointers hold m * k, k * n and
        // m * n f32 (checked by `enqueue`) for the leading dimensions given; alpha and beta are
        // host f32 (the handle's default pointer mode) that outlive the call.
        let status = unsafe {
            blas_sys::cublasGemmEx(
                *self.blas.handle(),
                cublasOperation_t::CUBLAS_OP_N,
                cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                (&one as *const f32).cast(),
                bp as *const std::ffi::c_void,
                blas_sys::cudaDataType::CUDA_R_32F,
                n as i32,
                ap as *const std::ffi::c_void,
                blas_sys::cudaDataType::CUDA_R_32F,
                k as i32,
                (&zero as *const f32).cast(),
                cp as *mut std::ffi::c_void,
                blas_sys::cudaDataType::CUDA_R_32F,
                n as i32,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT_TENSOR_OP,
            )
        };
        match status {
            blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
            s => Err(CudaError::Cublas { device: rt.info().name.clone(), what: format!("cublasGemmEx tf32 {m}x{n}x{k}: {s:?}") }),
        }
    }

    /// The product in elements of `T` (the buffers' dtype, checked by the caller).
    fn gemm<T>(&self, rt: &CudaRuntime, a: &CudaBuffer, b: &CudaBuffer, c: &mut CudaBuffer, one: T, zero: T) -> Result<(), CudaError>
    where
        CudaBlas: Gemm<T>,
    {
        let (m, n, k) = (self.m, self.n, self.k);
        // cuBLAS is column-major: a row-major m x n C is a column-major n x m C^T = B^T A^T,
        // so the call multiplies B (n x k column-major) by A (k x m column-major).
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: n as i32,
            n: m as i32,
            k: k as i32,
            alpha: one,
            lda: n as i32,
            ldb: k as i32,
            beta: zero,
            ldc: n as i32,
        };
        // SAFETY: each buffer holds that many 16-bit elements of T's kind (checked by
        // `enqueue`); f16 and bf16 are plain bits.
        let (av, bv) = unsafe { (a.slice().transmute::<T>(m * k), b.slice().transmute::<T>(k * n)) };
        // SAFETY: as above, for the output.
        let cv = unsafe { c.slice_mut().transmute_mut::<T>(m * n) };
        let (Some(av), Some(bv), Some(mut cv)) = (av, bv, cv) else {
            return Err(CudaError::Cublas { device: rt.info().name.clone(), what: "a buffer is smaller than its elements".into() });
        };
        // SAFETY: the three views hold exactly the elements the column-major shapes above
        // address with these leading dimensions.
        unsafe { self.blas.gemm(cfg, &bv, &av, &mut cv) }
            .map_err(|e| CudaError::Cublas { device: rt.info().name.clone(), what: format!("cublasGemmEx {m}x{n}x{k}: {e}") })
    }

    /// One product, waited for.
    pub fn run(&self, rt: &CudaRuntime, a: &CudaBuffer, b: &CudaBuffer, c: &mut CudaBuffer) -> Result<(), CudaError> {
        self.enqueue(rt, a, b, c)?;
        rt.synchronize()
    }

    /// Device time of each of `runs` products after warm-up, with CUDA events, `flush`
    /// overwritten before each as [`CudaRuntime::time_flushed`] does for kernels.
    #[allow(clippy::too_many_arguments)]
    pub fn time(
        &self,
        rt: &CudaRuntime,
        a: &CudaBuffer,
        b: &CudaBuffer,
        c: &mut CudaBuffer,
        warmup: usize,
        runs: usize,
        flush: Option<&mut CudaBuffer>,
    ) -> Result<Vec<f64>, CudaError> {
        let what = format!("cublasGemmEx {}x{}x{}", self.m, self.n, self.k);
        rt.time_work(&what, warmup, runs, flush, || self.enqueue(rt, a, b, c))
    }
}
