//! tilekit-spirv: GPU IR -> SPIR-V with rspirv, and the runtimes that launch it on Vulkan.

pub mod kernel;

pub use kernel::{Binding, PushConstant, Requirements, SpirvKernel};
