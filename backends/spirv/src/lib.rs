//! tilekit-spirv: GPU IR -> SPIR-V with rspirv, and the runtimes that launch it on Vulkan.
//!
//! [`emit::SpirvEmitter`] implements the backend primitives the shared GPU lowering emits
//! through; it produces a [`SpirvKernel`] (the words and the interface). [`vulkan::VulkanRuntime`]
//! runs such kernels on any Vulkan 1.2+ device through ash, loading the Vulkan loader at run time;
//! [`wgpu_rt::WgpuRuntime`] runs them through wgpu, on its own device or on a caller's.
//!
//! The runtimes are features: `vulkan` (ash) and `wgpu` (which includes `vulkan`, whose device
//! probe gives wgpu's devices their targets), both on by default. Without them the crate emits
//! and disassembles SPIR-V and depends on nothing that loads a driver.

pub mod compile;
pub mod coopmat2;
pub mod disasm;
pub mod emit;
pub mod kernel;
#[cfg(feature = "vulkan")]
pub mod vulkan;
#[cfg(feature = "wgpu")]
pub mod wgpu_rt;

pub use compile::{compile, CompileError, Compiled};
pub use disasm::disassemble;
pub use emit::{SpirvEmitter, SpirvError, SpirvValue};
pub use kernel::{Binding, DispatchError, PushConstant, PushConstantError, Requirements, SpirvKernel, MAX_WORKGROUPS_ENV};
#[cfg(feature = "vulkan")]
pub use vulkan::{
    DeviceBuffer, ExecutableStatistic, Pipeline, StatisticValue, ValidationLog, VulkanDeviceInfo, VulkanError, VulkanOptions, VulkanRuntime,
};
#[cfg(feature = "wgpu")]
pub use wgpu_rt::{keep_wgpu_matrix_instrs, WgpuBuffer, WgpuError, WgpuKernel, WgpuRuntime};
