//! tilekit-ptx: GPU IR -> PTX through LLVM's NVPTX back end, checked by ptxas, run on the CUDA
//! driver.
//!
//! [`nvptx::NvptxHooks`] supplies the NVIDIA pieces to the shared LLVM layer (tilekit-llvm):
//! special registers for ids, `bar.sync`, `shfl.sync.bfly`, libdevice for math, the kernel
//! calling convention and `maxntid`. [`compile()`] produces a [`PtxKernel`] for sm_80, sm_90 or
//! sm_90a; [`PtxKernel::assemble`] runs ptxas and keeps its register / shared-memory / spill
//! report. [`cuda::CudaRuntime`] loads the CUDA driver at run time (cudarc), so nothing here
//! needs CUDA to build, and a machine without a driver gets an error rather than a crash.

pub mod compile;
pub mod nvptx;
pub mod ptxas;
pub mod toolkit;

pub use compile::{arch_of, compile, llvm_ir, Compiled, PtxError, PtxKernel};
pub use nvptx::{Arch, NvptxHooks};
pub use ptxas::{PtxasError, PtxasReport};
pub mod cublas;
pub mod cuda;
pub use cublas::{cublas_present, CublasMatmul};
pub use cuda::{driver_version, CudaBuffer, CudaDeviceInfo, CudaError, CudaKernel, CudaRuntime};
