//! A compiled SPIR-V kernel and what a runtime needs to launch it.

use tilekit_core::ir::Access;
use tilekit_core::DType;

/// Device features a kernel needs; a runtime checks them and names any that is missing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    /// `shaderFloat16` (f16 arithmetic).
    pub float16: bool,
    /// `shaderInt8` / `shaderInt16` / `shaderInt64`.
    pub int8: bool,
    pub int16: bool,
    pub int64: bool,
    /// `storageBuffer8BitAccess` / `storageBuffer16BitAccess`.
    pub storage8: bool,
    pub storage16: bool,
    /// Subgroup shuffles and arithmetic in compute shaders.
    pub subgroup_shuffle: bool,
    pub subgroup_arithmetic: bool,
    /// The subgroup size the kernel was compiled for (its layouts assume it).
    pub subgroup_size: u32,
    /// `VK_EXT_shader_atomic_float` buffer float add.
    pub atomic_float_add: bool,
    /// Workgroup (shared) memory in bytes.
    pub shared_bytes: u32,
}

/// One storage buffer binding (descriptor set 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub binding: u32,
    /// Index of the program parameter it carries.
    pub param: u32,
    pub dtype: DType,
    pub access: Access,
}

/// One scalar parameter in the push-constant block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushConstant {
    pub param: u32,
    /// Byte offset in the push-constant block.
    pub offset: u32,
    pub dtype: DType,
}

/// A SPIR-V compute module with one entry point, and its interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpirvKernel {
    pub name: String,
    pub words: Vec<u32>,
    pub entry_point: String,
    /// Threads per program (workgroup size along x; y and z are 1).
    pub threads: u32,
    pub bindings: Vec<Binding>,
    pub push_constants: Vec<PushConstant>,
    /// Size of the push-constant block in bytes (a multiple of 4).
    pub push_constant_size: u32,
    pub requirements: Requirements,
}
