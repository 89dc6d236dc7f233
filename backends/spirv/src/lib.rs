//! tilekit-spirv: GPU IR -> SPIR-V with rspirv, and the runtimes that launch it on Vulkan.

pub mod kernel;
#[cfg(feature = "wgpu")]
pub mod wgpu_rt;

pub use kernel::{Binding, PushConstant, PushConstantError, Requirements, SpirvKernel};
#[cfg(feature = "wgpu")]
pub use wgpu_rt::{WgpuBuffer, WgpuError, WgpuKernel, WgpuRuntime};
