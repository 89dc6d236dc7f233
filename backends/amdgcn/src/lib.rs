//! tilekit-amdgcn: GPU IR -> AMDGCN code objects through LLVM's AMDGPU back end. Compile-only:
//! no AMD GPU is reachable from here, so every kernel is compiled, linked and checked, never run,
//! and every report says so.
//!
//! [`amdgpu::AmdgpuHooks`] supplies the AMD pieces to the shared LLVM layer (tilekit-llvm):
//! work-item and workgroup ids, the grid size from the code object v5 implicit arguments,
//! `s_barrier` between workgroup-scope fences, LDS in address space 3, `ds_swizzle` (lane masks
//! below 32) and `ds_bpermute` (across the halves of a wave64) for the butterfly shuffles, LLVM
//! intrinsics and a small IR library for math (no ROCm device library needed), and the
//! `amdgpu_kernel` calling convention (91). [`compile()`] produces an [`AmdgcnKernel`]: LLVM
//! object -> `ld.lld -shared` -> `.hsaco` (code object v5), whose metadata note is read back into
//! a [`CodeObjectReport`] (registers, spills, LDS, scratch, wavefront size, argument layout) with
//! a static occupancy estimate per architecture.

pub mod amdgpu;
pub mod compile;
pub mod metadata;
pub mod msgpack;
pub mod tools;

pub use amdgpu::{AmdgpuHooks, Arch};
pub use compile::{assembly, compile, llvm_ir, AmdgcnError, AmdgcnKernel, Compiled};
pub use metadata::{ArgInfo, CodeObjectReport, MetadataError, Occupancy};
pub use tilekit_llvm::KernelParam;
pub use tools::ToolError;

/// What every AMD result says about itself: the code is checked offline, not executed.
pub const NOT_RUN: &str = "compiled, not run";
