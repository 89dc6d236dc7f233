//! A raw Vulkan runtime on ash: device discovery, buffers, pipelines, launches and device timing.
//!
//! The Vulkan loader is opened at run time (`ash::Entry::load`), so a build never needs Vulkan
//! and a machine without it gets [`VulkanError::Loader`]. Every call is synchronous: a launch
//! records one command buffer, submits it and waits for its fence, and each command buffer starts
//! with a full memory barrier, so consecutive launches, uploads and downloads are ordered without
//! further bookkeeping.
//!
//! Memory: on CPU and integrated devices (lavapipe, APUs) buffers live in host-visible coherent
//! memory and are mapped once; on discrete GPUs they live in device-local memory and uploads and
//! downloads go through a temporary staging buffer. `VulkanOptions::force_staging` selects the
//! staging path everywhere (to test it on lavapipe).
//!
//! Validation: with `TILEKIT_VULKAN_VALIDATION=1` (or [`VulkanOptions::validation`]) the instance
//! enables `VK_LAYER_KHRONOS_validation` with synchronization validation, and a debug-utils
//! messenger collects every warning and error; [`VulkanRuntime::take_validation_messages`] and
//! [`ValidationLog`] hand them to tests, including those reported when the device and instance
//! are destroyed (leaks).
//!
//! Grids: a launch over a grid beyond maxComputeWorkGroupCount (or
//! [`VulkanOptions::max_workgroups_per_dim`]) needs a kernel compiled with
//! `LowerOptions::fold_grid`; launches and timing then dispatch its folded shape
//! ([`tilekit_core::gpu::grid`]).

use std::ffi::{c_void, CStr, CString};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tilekit_core::gpu::warmup::warm_up;

use ash::vk;
use tilekit_core::gpu::{Isa, MatrixInstr, SubgroupOps, Target};
use tilekit_core::{DType, HostBuffer, Scalar};

use crate::kernel::{DispatchError, PushConstantError, SpirvKernel};

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// `VK_KHR_shader_bfloat16`, which the Vulkan headers of this build (ash's, Vulkan 1.3.281)
/// predate: its name, `VK_COMPONENT_TYPE_BFLOAT16_KHR` and the feature structure, from the
/// registry (extension 142).
const SHADER_BFLOAT16: &CStr = c"VK_KHR_shader_bfloat16";
const COMPONENT_TYPE_BFLOAT16: vk::ComponentTypeKHR = vk::ComponentTypeKHR::from_raw(1_000_141_000);

/// `VkPhysicalDeviceShaderBfloat16FeaturesKHR`.
#[repr(C)]
#[derive(Clone, Copy)]
struct ShaderBfloat16Features {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    shader_bfloat16_type: vk::Bool32,
    shader_bfloat16_dot_product: vk::Bool32,
    shader_bfloat16_cooperative_matrix: vk::Bool32,
}

impl Default for ShaderBfloat16Features {
    fn default() -> Self {
        ShaderBfloat16Features {
            s_type: vk::StructureType::from_raw(1_000_141_000),
            p_next: std::ptr::null_mut(),
            shader_bfloat16_type: vk::FALSE,
            shader_bfloat16_dot_product: vk::FALSE,
            shader_bfloat16_cooperative_matrix: vk::FALSE,
        }
    }
}

// SAFETY: laid out as the registry's structure (sType and pNext first), which extends both.
unsafe impl vk::ExtendsPhysicalDeviceFeatures2 for ShaderBfloat16Features {}
unsafe impl vk::ExtendsDeviceCreateInfo for ShaderBfloat16Features {}

/// VK_NV_cooperative_matrix2's name; this build's Vulkan headers predate it, so its structures
/// and the query of its flexible dimensions are declared here from the registry.
const COOPERATIVE_MATRIX2: &CStr = c"VK_NV_cooperative_matrix2";

/// `VkPhysicalDeviceCooperativeMatrix2FeaturesNV`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CooperativeMatrix2Features {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    workgroup_scope: vk::Bool32,
    flexible_dimensions: vk::Bool32,
    reductions: vk::Bool32,
    conversions: vk::Bool32,
    per_element_operations: vk::Bool32,
    tensor_addressing: vk::Bool32,
    block_loads: vk::Bool32,
}

impl Default for CooperativeMatrix2Features {
    fn default() -> Self {
        CooperativeMatrix2Features {
            s_type: vk::StructureType::from_raw(1_000_593_000),
            p_next: std::ptr::null_mut(),
            workgroup_scope: vk::FALSE,
            flexible_dimensions: vk::FALSE,
            reductions: vk::FALSE,
            conversions: vk::FALSE,
            per_element_operations: vk::FALSE,
            tensor_addressing: vk::FALSE,
            block_loads: vk::FALSE,
        }
    }
}

// SAFETY: laid out as the registry's structure (sType and pNext first), which extends both.
unsafe impl vk::ExtendsPhysicalDeviceFeatures2 for CooperativeMatrix2Features {}
unsafe impl vk::ExtendsDeviceCreateInfo for CooperativeMatrix2Features {}

/// `VkPhysicalDeviceCooperativeMatrix2PropertiesNV`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CooperativeMatrix2Properties {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    workgroup_scope_max_workgroup_size: u32,
    flexible_dimensions_max_dimension: u32,
    workgroup_scope_reserved_shared_memory: u32,
}

impl Default for CooperativeMatrix2Properties {
    fn default() -> Self {
        CooperativeMatrix2Properties {
            s_type: vk::StructureType::from_raw(1_000_593_002),
            p_next: std::ptr::null_mut(),
            workgroup_scope_max_workgroup_size: 0,
            flexible_dimensions_max_dimension: 0,
            workgroup_scope_reserved_shared_memory: 0,
        }
    }
}

// SAFETY: laid out as the registry's structure (sType and pNext first).
unsafe impl vk::ExtendsPhysicalDeviceProperties2 for CooperativeMatrix2Properties {}

/// `VkCooperativeMatrixFlexibleDimensionsPropertiesNV`.
#[repr(C)]
#[derive(Clone, Copy)]
struct FlexibleDimensions {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    m_granularity: u32,
    n_granularity: u32,
    k_granularity: u32,
    a_type: vk::ComponentTypeKHR,
    b_type: vk::ComponentTypeKHR,
    c_type: vk::ComponentTypeKHR,
    result_type: vk::ComponentTypeKHR,
    saturating_accumulation: vk::Bool32,
    scope: vk::ScopeKHR,
    workgroup_invocations: u32,
}

impl Default for FlexibleDimensions {
    fn default() -> Self {
        FlexibleDimensions {
            s_type: vk::StructureType::from_raw(1_000_593_001),
            p_next: std::ptr::null_mut(),
            m_granularity: 0,
            n_granularity: 0,
            k_granularity: 0,
            a_type: vk::ComponentTypeKHR::FLOAT16,
            b_type: vk::ComponentTypeKHR::FLOAT16,
            c_type: vk::ComponentTypeKHR::FLOAT16,
            result_type: vk::ComponentTypeKHR::FLOAT16,
            saturating_accumulation: vk::FALSE,
            scope: vk::ScopeKHR::SUBGROUP,
            workgroup_invocations: 0,
        }
    }
}

type FlexibleDimensionsQuery = unsafe extern "system" fn(vk::PhysicalDevice, *mut u32, *mut FlexibleDimensions) -> vk::Result;

/// What a device offers of VK_NV_cooperative_matrix2: workgroup-scope matrices whose sizes are
/// multiples of a granularity (the driver stages their operands itself), loads and stores
/// addressed through tensor layouts (bounds-checked, so ragged edges need no masks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CooperativeMatrix2 {
    pub workgroup_scope: bool,
    pub flexible_dimensions: bool,
    pub reductions: bool,
    pub conversions: bool,
    pub per_element_operations: bool,
    pub tensor_addressing: bool,
    pub block_loads: bool,
    /// `cooperativeMatrixWorkgroupScopeMaxWorkgroupSize`: the most threads a program using
    /// workgroup-scope matrices may have.
    pub max_workgroup_size: u32,
    /// `cooperativeMatrixFlexibleDimensionsMaxDimension`: the largest M, N or K.
    pub max_dimension: u32,
    /// `cooperativeMatrixWorkgroupScopeReservedSharedMemory`: shared memory the driver keeps for
    /// its own staging, out of what a program may declare.
    pub reserved_shared_memory: u32,
    /// `vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV`, each as
    /// `MgxNgxKg A*B+C->R scope, T threads` (the granularities of M, N and K).
    pub flexible: Vec<String>,
}

impl CooperativeMatrix2 {
    /// Whether a kernel built on workgroup-scope matrices with flexible dimensions and tensor
    /// addressing (what [`crate::coopmat2`] emits) can run.
    pub fn runs_tensor_matmul(&self) -> bool {
        self.workgroup_scope && self.flexible_dimensions && self.tensor_addressing
    }

    /// For device reports: the features present, the limits, then the flexible dimensions.
    pub fn describe(&self) -> Vec<String> {
        let features = [
            (self.workgroup_scope, "workgroup scope"),
            (self.flexible_dimensions, "flexible dimensions"),
            (self.reductions, "reductions"),
            (self.conversions, "conversions"),
            (self.per_element_operations, "per-element operations"),
            (self.tensor_addressing, "tensor addressing"),
            (self.block_loads, "block loads"),
        ];
        let on: Vec<&str> = features.iter().filter(|(has, _)| *has).map(|(_, name)| *name).collect();
        let mut out = vec![
            format!("features: {}", if on.is_empty() { "none".to_string() } else { on.join(", ") }),
            format!(
                "at most {} threads with workgroup-scope matrices, dimensions up to {}, {} bytes of shared memory reserved",
                self.max_workgroup_size, self.max_dimension, self.reserved_shared_memory
            ),
        ];
        out.extend(self.flexible.iter().map(|f| format!("flexible {f}")));
        out
    }
}

/// Why a Vulkan operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VulkanError {
    #[error("cannot load the Vulkan loader (libvulkan.so.1 on Linux, vulkan-1.dll on Windows): {0}")]
    Loader(String),
    #[error("{call} failed: {result}")]
    Vk { call: &'static str, result: vk::Result },
    #[error("there is no Vulkan device {index} ({count} found)")]
    NoDevice { index: usize, count: usize },
    #[error("device `{device}`: {what}")]
    Device { device: String, what: String },
    #[error("validation was requested (TILEKIT_VULKAN_VALIDATION) but {0}")]
    Validation(String),
    #[error("kernel `{kernel}` needs {feature}, which {device} does not support")]
    MissingFeature { kernel: String, feature: String, device: String },
    #[error("kernel `{kernel}` exceeds a limit of {device}: {what}")]
    Limit { kernel: String, device: String, what: String },
    #[error("launch of kernel `{kernel}`: {what}")]
    Launch { kernel: String, what: String },
    #[error("buffer: {0}")]
    Buffer(String),
    #[error(transparent)]
    PushConstants(#[from] PushConstantError),
    /// The device is gone (a fault, a reset, a driver crash): this runtime can do nothing more;
    /// a new runtime on the device may work.
    #[error("device `{device}` was lost {during} ({result}); open a new runtime for the next launch")]
    DeviceLost { device: String, during: String, result: vk::Result },
    #[error("device `{device}`: out of memory allocating {bytes} bytes ({result}; its largest heap holds {heap_bytes} bytes)")]
    OutOfMemory { device: String, bytes: u64, heap_bytes: u64, result: vk::Result },
    /// The driver refused a kernel that passed tilekit's own checks.
    #[error("device `{device}` refused kernel `{kernel}`: {call} failed: {result}")]
    Refused { kernel: String, device: String, call: &'static str, result: vk::Result },
}

impl VulkanError {
    /// Whether the error lost the device: the runtime that returned it refuses further work.
    pub fn device_lost(&self) -> bool {
        matches!(self, VulkanError::DeviceLost { .. })
    }
}

fn vk_err(call: &'static str) -> impl FnOnce(vk::Result) -> VulkanError {
    move |result| VulkanError::Vk { call, result }
}

/// What a physical device offers tilekit.
#[derive(Clone, Debug, PartialEq)]
pub struct VulkanDeviceInfo {
    /// Index in the loader's enumeration (what [`VulkanRuntime::new`] takes).
    pub index: usize,
    pub name: String,
    pub vendor_id: u32,
    pub device_id: u32,
    /// `cpu`, `integrated`, `discrete`, `virtual` or `other`.
    pub device_type: String,
    pub driver_name: String,
    pub driver_info: String,
    pub driver_version: u32,
    pub api_version: (u32, u32, u32),
    /// Default subgroup size, and the range a pipeline may require (equal without control).
    pub subgroup_size: u32,
    pub min_subgroup_size: u32,
    pub max_subgroup_size: u32,
    /// Compute pipelines may require a subgroup size (Vulkan 1.3 `subgroupSizeControl`).
    pub subgroup_size_control: bool,
    pub compute_full_subgroups: bool,
    /// Subgroup operations are available in compute shaders.
    pub subgroup_in_compute: bool,
    /// Float controls can keep infinities, NaNs and signed zeros for f32 and f16.
    pub ieee_preserve: bool,
    /// f16 results can round to nearest even with subnormals kept (see `Target::f16_rte`).
    pub f16_rte: bool,
    /// f32 subnormals can be kept (`shaderDenormPreserveFloat32`, settable for 32 bits alone).
    pub denorm_preserve_f32: bool,
    /// Supported subgroup operation classes (`basic`, `vote`, `arithmetic`, `ballot`, `shuffle`,
    /// `shuffle_relative`, `clustered`, `quad`).
    pub subgroup_ops: Vec<&'static str>,
    pub shared_memory_bytes: u32,
    pub max_workgroup_size: [u32; 3],
    pub max_workgroup_invocations: u32,
    pub max_workgroup_count: [u32; 3],
    pub max_push_constant_bytes: u32,
    pub max_storage_buffer_range: u32,
    /// `maxPerStageDescriptorStorageBuffers`: how many buffers one kernel may bind.
    pub max_storage_buffers: u32,
    pub storage_buffer_8bit: bool,
    pub storage_buffer_16bit: bool,
    pub shader_float16: bool,
    pub shader_int8: bool,
    pub shader_int16: bool,
    pub shader_int64: bool,
    pub shader_int64_atomics: bool,
    /// `shaderBufferFloat32AtomicAdd` (VK_EXT_shader_atomic_float).
    pub atomic_float_add: bool,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period_ns: f32,
    /// The compute queue records timestamps.
    pub timestamps: bool,
    pub pipeline_statistics: bool,
    /// VK_KHR_pipeline_executable_properties: the driver reports what it compiled each pipeline
    /// to (registers, shared memory, instruction counts: whatever statistics it names).
    pub executable_statistics: bool,
    /// Multiprocessors (NVIDIA's SMs, from VK_NV_shader_sm_builtins) and warps each holds,
    /// where the driver says; the cost model's waves of programs count them.
    pub multiprocessors: Option<u32>,
    pub warps_per_multiprocessor: Option<u32>,
    /// The subgroup-scope cooperative matrices `vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`
    /// lists with 16-bit float operands and f32 accumulators (what `dot` may lower to), where
    /// the device has `cooperativeMatrix` and `vulkanMemoryModel` (their SPIR-V requires it);
    /// bf16 ones where it also has `shaderBFloat16Type` and `shaderBFloat16CooperativeMatrix`
    /// (VK_KHR_shader_bfloat16).
    pub cooperative_matrices: Vec<MatrixInstr>,
    /// Every configuration `vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR` lists, as
    /// `MxNxK A*B+C->R scope` (component types as Vulkan names them, raw numbers where this
    /// build's Vulkan headers do not): what the device has beyond what `dot` uses.
    pub cooperative_matrix_listed: Vec<String>,
    /// The matrix-related device extensions present (VK_KHR_cooperative_matrix,
    /// VK_NV_cooperative_matrix2, VK_KHR_shader_bfloat16, VK_NV_cooperative_matrix).
    pub matrix_extensions: Vec<String>,
    /// VK_NV_cooperative_matrix2's features and limits, where the device has the extension
    /// (and VK_KHR_cooperative_matrix's subgroup matrices, which it extends).
    pub cooperative_matrix2: Option<CooperativeMatrix2>,
}

impl VulkanDeviceInfo {
    pub fn has_subgroup_op(&self, op: &str) -> bool {
        self.subgroup_in_compute && self.subgroup_ops.contains(&op)
    }

    /// The compile target this device implies.
    pub fn target(&self) -> Target {
        Target {
            name: format!("vulkan:{}", self.name),
            isa: Isa::SpirV,
            subgroup_size: self.subgroup_size,
            max_threads_per_program: self.max_workgroup_invocations.min(self.max_workgroup_size[0]),
            shared_memory_bytes: self.shared_memory_bytes,
            subgroup_ops: SubgroupOps { shuffle: self.has_subgroup_op("shuffle"), arithmetic: self.has_subgroup_op("arithmetic") },
            f16: self.shader_float16 && self.storage_buffer_16bit,
            bf16: false,
            i8: self.shader_int8 && self.storage_buffer_8bit,
            i16: self.shader_int16 && self.storage_buffer_16bit,
            i64: self.shader_int64,
            atomic_float_add: self.atomic_float_add,
            ieee_preserve: self.ieee_preserve,
            f16_rte: self.f16_rte,
            f32_denorm_preserve: self.denorm_preserve_f32,
            max_vector_bytes: 16,
            max_push_constant_bytes: self.max_push_constant_bytes,
            max_grid: self.max_workgroup_count,
            registers_per_thread: Target::vulkan_registers_per_thread(self.device_type == "cpu", self.vendor_id),
            matrix: self.cooperative_matrices.clone(),
        }
    }

    /// `name (driver info)`, as errors name the device.
    pub fn display_name(&self) -> String {
        if self.driver_info.is_empty() {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.driver_info)
        }
    }

    /// Checks `kernel`'s requirements and limits against this device; returns the subgroup size
    /// its pipeline must require, if the device has to be told.
    pub fn check_kernel(&self, kernel: &SpirvKernel) -> Result<Option<u32>, VulkanError> {
        let info = self;
        let device = self.display_name();
        let req = &kernel.requirements;
        let missing =
            |feature: &str| VulkanError::MissingFeature { kernel: kernel.name.clone(), feature: feature.to_string(), device: device.clone() };
        for (need, have, feature) in [
            (req.float16, info.shader_float16, "shaderFloat16"),
            (req.int8, info.shader_int8, "shaderInt8"),
            (req.int16, info.shader_int16, "shaderInt16"),
            (req.int64, info.shader_int64, "shaderInt64"),
            (req.storage8, info.storage_buffer_8bit, "storageBuffer8BitAccess"),
            (req.storage16, info.storage_buffer_16bit, "storageBuffer16BitAccess"),
            (req.subgroup_shuffle, info.has_subgroup_op("shuffle"), "subgroup shuffles in compute shaders"),
            (req.subgroup_arithmetic, info.has_subgroup_op("arithmetic"), "subgroup arithmetic in compute shaders"),
            (req.atomic_float_add, info.atomic_float_add, "shaderBufferFloat32AtomicAdd (VK_EXT_shader_atomic_float)"),
            (req.int64_atomics, info.shader_int64_atomics, "shaderBufferInt64Atomics"),
            (req.f16_rte, info.f16_rte, "shaderRoundingModeRTEFloat16 and shaderDenormPreserveFloat16"),
            (req.denorm_preserve_f32, info.denorm_preserve_f32, "shaderDenormPreserveFloat32"),
            (req.cooperative_matrix, !info.cooperative_matrices.is_empty(), "cooperativeMatrix (VK_KHR_cooperative_matrix) and vulkanMemoryModel"),
            (
                req.cooperative_matrix_bf16,
                info.cooperative_matrices.iter().any(|m| m.a == DType::BF16),
                "shaderBFloat16Type and shaderBFloat16CooperativeMatrix (VK_KHR_shader_bfloat16)",
            ),
            (
                req.cooperative_matrix2,
                info.cooperative_matrix2.as_ref().is_some_and(|c| c.runs_tensor_matmul()),
                "cooperativeMatrixWorkgroupScope, cooperativeMatrixFlexibleDimensions and cooperativeMatrixTensorAddressing (VK_NV_cooperative_matrix2)",
            ),
        ] {
            if need && !have {
                return Err(missing(feature));
            }
        }
        let limit = |what: String| VulkanError::Limit { kernel: kernel.name.clone(), device: device.clone(), what };
        if kernel.threads == 0 || kernel.threads > info.max_workgroup_invocations || kernel.threads > info.max_workgroup_size[0] {
            return Err(limit(format!(
                "{} threads per program (maxComputeWorkGroupInvocations = {}, maxComputeWorkGroupSize.x = {})",
                kernel.threads, info.max_workgroup_invocations, info.max_workgroup_size[0]
            )));
        }
        if let Some(c) = info.cooperative_matrix2.as_ref().filter(|_| req.cooperative_matrix2) {
            if kernel.threads > c.max_workgroup_size {
                return Err(limit(format!(
                    "{} threads per program with workgroup-scope matrices (cooperativeMatrixWorkgroupScopeMaxWorkgroupSize = {})",
                    kernel.threads, c.max_workgroup_size
                )));
            }
        }
        if req.shared_bytes > info.shared_memory_bytes {
            return Err(limit(format!("{} bytes of shared memory (maxComputeSharedMemorySize = {})", req.shared_bytes, info.shared_memory_bytes)));
        }
        if kernel.bindings.len() as u64 > info.max_storage_buffers as u64 {
            return Err(limit(format!("{} buffers (maxPerStageDescriptorStorageBuffers = {})", kernel.bindings.len(), info.max_storage_buffers)));
        }
        if kernel.push_constant_size > info.max_push_constant_bytes {
            return Err(limit(format!(
                "{} bytes of push constants (maxPushConstantsSize = {})",
                kernel.push_constant_size, info.max_push_constant_bytes
            )));
        }
        // Kernels that exchange values between lanes assume the subgroup size they were built for.
        let sg = req.subgroup_size;
        if !(req.subgroup_shuffle || req.subgroup_arithmetic) || sg == 0 {
            return Ok(None);
        }
        let fixed = info.min_subgroup_size == info.max_subgroup_size;
        if fixed && sg == info.subgroup_size {
            Ok(None)
        } else if info.subgroup_size_control && sg.is_power_of_two() && (info.min_subgroup_size..=info.max_subgroup_size).contains(&sg) {
            Ok(Some(sg))
        } else if sg == info.subgroup_size {
            // Without control the default size is the best promise the device makes.
            Ok(None)
        } else {
            Err(limit(format!(
                "it was compiled for subgroups of {sg}, the device runs {} ({}..{}{})",
                info.subgroup_size,
                info.min_subgroup_size,
                info.max_subgroup_size,
                if info.subgroup_size_control { "" } else { ", no subgroup size control" }
            )))
        }
    }

    fn host_visible_buffers(&self) -> bool {
        matches!(self.device_type.as_str(), "cpu" | "integrated")
    }
}

/// How to open a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VulkanOptions {
    /// Enable `VK_LAYER_KHRONOS_validation` and collect its messages.
    pub validation: bool,
    /// Use device-local memory and staging copies even where host-visible memory would do.
    pub force_staging: bool,
    /// How long one submission may run before it counts as hung.
    pub timeout: Duration,
    /// Dispatch at most this many workgroups per grid axis, fewer than the device allows, so
    /// that smaller grids take the folded path (kernels compiled with `LowerOptions::fold_grid`);
    /// for tests and for trying folding out. `None`: the device's maxComputeWorkGroupCount.
    pub max_workgroups_per_dim: Option<u32>,
}

impl Default for VulkanOptions {
    fn default() -> Self {
        VulkanOptions { validation: false, force_staging: false, timeout: Duration::from_secs(120), max_workgroups_per_dim: None }
    }
}

impl VulkanOptions {
    /// `TILEKIT_VULKAN_VALIDATION=1` turns on validation, `TILEKIT_VULKAN_STAGING=1` staging,
    /// `TILEKIT_MAX_WORKGROUPS_PER_DIM=N` limits the workgroups per axis.
    pub fn from_env() -> Self {
        let on = |k: &str| std::env::var(k).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
        let timeout = std::env::var("TILEKIT_VULKAN_TIMEOUT_S")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .map_or(VulkanOptions::default().timeout, Duration::from_secs_f64);
        VulkanOptions {
            validation: on("TILEKIT_VULKAN_VALIDATION"),
            force_staging: on("TILEKIT_VULKAN_STAGING"),
            timeout,
            max_workgroups_per_dim: crate::kernel::max_workgroups_from_env(),
        }
    }
}

/// Validation messages collected by the debug messenger; clones share the same log, which
/// outlives the runtime (messages about leaks arrive when the device is destroyed).
#[derive(Clone, Debug, Default)]
pub struct ValidationLog(Arc<Mutex<Vec<String>>>);

impl ValidationLog {
    /// Every message collected since the last call.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

unsafe extern "system" fn debug_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    if user.is_null() {
        return vk::FALSE;
    }
    // SAFETY: `user` is the Mutex inside the log's Arc, which the instance owner keeps alive
    // until after the instance is destroyed; `data` and its message are valid for this call.
    let log = unsafe { &*(user as *const Mutex<Vec<String>>) };
    let message = unsafe {
        if data.is_null() || (*data).p_message.is_null() {
            String::from("(no message)")
        } else {
            CStr::from_ptr((*data).p_message).to_string_lossy().into_owned()
        }
    };
    log.lock().unwrap_or_else(|e| e.into_inner()).push(format!("[{severity:?} {types:?}] {message}"));
    vk::FALSE
}

/// Khronos' validation layer of Vulkan SDK 1.3.239 (Debian 12's) finds its state for each call
/// in a process-wide map keyed by the loader's dispatch table, and creating or destroying an
/// instance or device writes that map with no lock while calls on other devices read it
/// (upstream Vulkan-ValidationLayers issue 4391): test binaries that opened and dropped validated
/// runtimes on several threads crashed in the layer now and then. Under validation, tilekit
/// therefore takes this lock exclusively to create or destroy an instance or device and shared
/// for every other call; without validation it is never touched.
static LAYER_MAP: std::sync::RwLock<()> = std::sync::RwLock::new(());

thread_local! {
    /// Guards of [`LAYER_MAP`] this thread holds: inner calls (a staging buffer dropped inside
    /// an upload, an owner dropped on an error path of device creation) take none, which keeps
    /// a thread from waiting on itself.
    static LAYER_MAP_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// What [`layer_call`] or [`layer_lifecycle`] holds until dropped.
struct LayerGuard {
    _read: Option<std::sync::RwLockReadGuard<'static, ()>>,
    _write: Option<std::sync::RwLockWriteGuard<'static, ()>>,
    counted: bool,
}

impl Drop for LayerGuard {
    fn drop(&mut self) {
        if self.counted {
            LAYER_MAP_DEPTH.with(|d| d.set(d.get() - 1));
        }
    }
}

fn layer_guard(validation: bool, exclusive: bool) -> LayerGuard {
    let mut guard = LayerGuard { _read: None, _write: None, counted: false };
    if !validation {
        return guard;
    }
    let outer = LAYER_MAP_DEPTH.with(|d| {
        d.set(d.get() + 1);
        d.get() == 1
    });
    guard.counted = true;
    if outer {
        if exclusive {
            guard._write = Some(LAYER_MAP.write().unwrap_or_else(|e| e.into_inner()));
        } else {
            guard._read = Some(LAYER_MAP.read().unwrap_or_else(|e| e.into_inner()));
        }
    }
    guard
}

/// Held across a call on a validated device or instance.
fn layer_call(validation: bool) -> LayerGuard {
    layer_guard(validation, false)
}

/// Held across creating or destroying a validated device or instance.
fn layer_lifecycle(validation: bool) -> LayerGuard {
    layer_guard(validation, true)
}

/// The instance and its messenger; destroyed last.
struct InstanceOwner {
    entry: ash::Entry,
    instance: ash::Instance,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    log: ValidationLog,
}

impl Drop for InstanceOwner {
    fn drop(&mut self) {
        let _layer = layer_lifecycle(self.debug.is_some());
        // SAFETY: every child object was destroyed by the owners that hold this one.
        unsafe {
            if let Some((utils, messenger)) = self.debug.take() {
                utils.destroy_debug_utils_messenger(messenger, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}

/// Whether a module may ask for f16 rounding to nearest even with subnormals kept: the driver
/// supports both f16 modes and lets 16-bit modes be set on their own (independence ALL), so the
/// module's f32 arithmetic keeps the driver's defaults. Otherwise f32 -> f16 stays emulated.
fn f16_rte(fc: &vk::PhysicalDeviceFloatControlsProperties) -> bool {
    let alone = |i: vk::ShaderFloatControlsIndependence| i == vk::ShaderFloatControlsIndependence::ALL;
    fc.shader_rounding_mode_rte_float16 == vk::TRUE
        && fc.shader_denorm_preserve_float16 == vk::TRUE
        && alone(fc.rounding_mode_independence)
        && alone(fc.denorm_behavior_independence)
}

fn load_entry() -> Result<ash::Entry, VulkanError> {
    // SAFETY: loading the system's Vulkan loader runs its initialisation, as any Vulkan
    // application does.
    unsafe { ash::Entry::load() }.map_err(|e| VulkanError::Loader(e.to_string()))
}

fn create_instance(validation: bool) -> Result<InstanceOwner, VulkanError> {
    let _layer = layer_lifecycle(validation);
    let entry = load_entry()?;
    let log = ValidationLog::default();
    // SAFETY: plain Vulkan calls with valid create infos; handles are owned by InstanceOwner.
    unsafe {
        let loader_version = entry.try_enumerate_instance_version().map_err(vk_err("vkEnumerateInstanceVersion"))?;
        let api = loader_version.unwrap_or(vk::API_VERSION_1_0).min(vk::API_VERSION_1_3);
        if api < vk::API_VERSION_1_1 {
            return Err(VulkanError::Loader(format!(
                "the Vulkan loader supports only version {}.{}, tilekit needs 1.1 or newer",
                vk::api_version_major(api),
                vk::api_version_minor(api)
            )));
        }
        let app = vk::ApplicationInfo::default().application_name(c"tilekit").engine_name(c"tilekit").api_version(api);
        let mut layers: Vec<*const i8> = Vec::new();
        let mut exts: Vec<*const i8> = Vec::new();
        let mut sync_validation = false;
        if validation {
            let available = entry.enumerate_instance_layer_properties().map_err(vk_err("vkEnumerateInstanceLayerProperties"))?;
            if !available.iter().any(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER)) {
                return Err(VulkanError::Validation(
                    "the layer VK_LAYER_KHRONOS_validation is not installed (Debian: vulkan-validationlayers)".into(),
                ));
            }
            layers.push(VALIDATION_LAYER.as_ptr());
            let instance_exts = entry.enumerate_instance_extension_properties(None).map_err(vk_err("vkEnumerateInstanceExtensionProperties"))?;
            if !instance_exts.iter().any(|e| e.extension_name_as_c_str() == Ok(ash::ext::debug_utils::NAME)) {
                return Err(VulkanError::Validation("the loader lacks VK_EXT_debug_utils".into()));
            }
            exts.push(ash::ext::debug_utils::NAME.as_ptr());
            let layer_exts =
                entry.enumerate_instance_extension_properties(Some(VALIDATION_LAYER)).map_err(vk_err("vkEnumerateInstanceExtensionProperties"))?;
            if layer_exts.iter().any(|e| e.extension_name_as_c_str() == Ok(ash::ext::validation_features::NAME)) {
                exts.push(ash::ext::validation_features::NAME.as_ptr());
                sync_validation = true;
            }
        }
        let user = Arc::as_ptr(&log.0) as *mut c_void;
        let mut messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR)
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(debug_callback))
            .user_data(user);
        let enables = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&enables);
        let mut info = vk::InstanceCreateInfo::default().application_info(&app).enabled_layer_names(&layers).enabled_extension_names(&exts);
        if validation {
            // Chained, the messenger also sees vkCreateInstance and vkDestroyInstance.
            info = info.push_next(&mut messenger_info);
            if sync_validation {
                info = info.push_next(&mut features);
            }
        }
        let instance = entry.create_instance(&info, None).map_err(vk_err("vkCreateInstance"))?;
        let mut owner = InstanceOwner { entry, instance, debug: None, log };
        if validation {
            let utils = ash::ext::debug_utils::Instance::new(&owner.entry, &owner.instance);
            let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR)
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                        | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                        | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
                )
                .pfn_user_callback(Some(debug_callback))
                .user_data(user);
            let messenger = utils.create_debug_utils_messenger(&info, None).map_err(vk_err("vkCreateDebugUtilsMessengerEXT"))?;
            owner.debug = Some((utils, messenger));
        }
        Ok(owner)
    }
}

fn c_string(s: Result<&CStr, std::ffi::FromBytesUntilNulError>) -> String {
    s.map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Everything known about one physical device, and the queue family tilekit uses.
struct Probe {
    info: VulkanDeviceInfo,
    queue_family: u32,
    timestamp_bits: u32,
    api: u32,
}

fn probe(entry: &ash::Entry, instance: &ash::Instance, pdev: vk::PhysicalDevice, index: usize) -> Result<Option<Probe>, VulkanError> {
    // SAFETY: queries on a physical device enumerated from this instance.
    unsafe {
        let props = instance.get_physical_device_properties(pdev);
        let api = props.api_version;
        let families = instance.get_physical_device_queue_family_properties(pdev);
        let compute: Vec<(u32, &vk::QueueFamilyProperties)> = families
            .iter()
            .enumerate()
            .filter(|(_, f)| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.queue_count > 0)
            .map(|(i, f)| (i as u32, f))
            .collect();
        let Some(&(queue_family, family)) = compute.iter().find(|(_, f)| f.timestamp_valid_bits > 0).or(compute.first()) else {
            return Ok(None);
        };
        let exts = instance.enumerate_device_extension_properties(pdev).map_err(vk_err("vkEnumerateDeviceExtensionProperties"))?;
        let has_ext = |name: &CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(name));
        let has_atomic_float_ext = has_ext(ash::ext::shader_atomic_float::NAME);
        let has_executable_ext = has_ext(ash::khr::pipeline_executable_properties::NAME);
        let has_coop_ext = has_ext(ash::khr::cooperative_matrix::NAME);
        let has_coop2_ext = has_coop_ext && has_ext(COOPERATIVE_MATRIX2);
        let has_bf16_ext = has_coop_ext && has_ext(SHADER_BFLOAT16);
        let v12 = api >= vk::API_VERSION_1_2;
        let v13 = api >= vk::API_VERSION_1_3;

        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut size_control = vk::PhysicalDeviceSubgroupSizeControlProperties::default();
        let mut float_controls = vk::PhysicalDeviceFloatControlsProperties::default();
        let mut sm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
        let has_sm = has_ext(ash::nv::shader_sm_builtins::NAME);
        let mut pm = CooperativeMatrix2Properties::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
        if has_coop2_ext {
            p2 = p2.push_next(&mut pm);
        }
        if has_sm {
            p2 = p2.push_next(&mut sm);
        }
        if v12 {
            p2 = p2.push_next(&mut driver).push_next(&mut float_controls);
        }
        if v13 {
            p2 = p2.push_next(&mut size_control);
        }
        instance.get_physical_device_properties2(pdev, &mut p2);

        let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut fa = vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT::default();
        let mut fx = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
        let mut fc = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut fb = ShaderBfloat16Features::default();
        let mut fm = CooperativeMatrix2Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default();
        if v12 {
            f2 = f2.push_next(&mut f11).push_next(&mut f12);
        }
        if v13 {
            f2 = f2.push_next(&mut f13);
        }
        if has_atomic_float_ext {
            f2 = f2.push_next(&mut fa);
        }
        if has_executable_ext {
            f2 = f2.push_next(&mut fx);
        }
        if has_coop_ext {
            f2 = f2.push_next(&mut fc);
        }
        if has_bf16_ext {
            f2 = f2.push_next(&mut fb);
        }
        if has_coop2_ext {
            f2 = f2.push_next(&mut fm);
        }
        instance.get_physical_device_features2(pdev, &mut f2);
        let base = f2.features;
        let bf16_coop = has_bf16_ext && fb.shader_bfloat16_type == vk::TRUE && fb.shader_bfloat16_cooperative_matrix == vk::TRUE;
        let (cooperative_matrices, cooperative_matrix_listed) =
            if has_coop_ext && fc.cooperative_matrix == vk::TRUE && v12 && f12.vulkan_memory_model == vk::TRUE {
                let ext = ash::khr::cooperative_matrix::Instance::new(entry, instance);
                let props = ext
                    .get_physical_device_cooperative_matrix_properties(pdev)
                    .map_err(vk_err("vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"))?;
                (cooperative_matrix_instrs(&props, bf16_coop), props.iter().map(describe_cooperative_matrix).collect())
            } else {
                (Vec::new(), Vec::new())
            };
        let cooperative_matrix2 = (has_coop2_ext && !cooperative_matrices.is_empty()).then(|| {
            let on = |b: vk::Bool32| b == vk::TRUE;
            CooperativeMatrix2 {
                workgroup_scope: on(fm.workgroup_scope),
                flexible_dimensions: on(fm.flexible_dimensions),
                reductions: on(fm.reductions),
                conversions: on(fm.conversions),
                per_element_operations: on(fm.per_element_operations),
                tensor_addressing: on(fm.tensor_addressing),
                block_loads: on(fm.block_loads),
                max_workgroup_size: pm.workgroup_scope_max_workgroup_size,
                max_dimension: pm.flexible_dimensions_max_dimension,
                reserved_shared_memory: pm.workgroup_scope_reserved_shared_memory,
                flexible: if on(fm.flexible_dimensions) { flexible_dimensions(entry, instance, pdev) } else { Vec::new() },
            }
        });
        let matrix_extensions: Vec<String> =
            ["VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2", "VK_KHR_shader_bfloat16", "VK_NV_cooperative_matrix"]
                .into_iter()
                .filter(|name| exts.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|n| n.to_bytes() == name.as_bytes())))
                .map(String::from)
                .collect();

        let ops = subgroup.supported_operations;
        let subgroup_ops: Vec<&'static str> = [
            (vk::SubgroupFeatureFlags::BASIC, "basic"),
            (vk::SubgroupFeatureFlags::VOTE, "vote"),
            (vk::SubgroupFeatureFlags::ARITHMETIC, "arithmetic"),
            (vk::SubgroupFeatureFlags::BALLOT, "ballot"),
            (vk::SubgroupFeatureFlags::SHUFFLE, "shuffle"),
            (vk::SubgroupFeatureFlags::SHUFFLE_RELATIVE, "shuffle_relative"),
            (vk::SubgroupFeatureFlags::CLUSTERED, "clustered"),
            (vk::SubgroupFeatureFlags::QUAD, "quad"),
        ]
        .into_iter()
        .filter(|(f, _)| ops.contains(*f))
        .map(|(_, n)| n)
        .collect();
        let limits = props.limits;
        let (min_sg, max_sg) = if v13 && size_control.min_subgroup_size > 0 {
            (size_control.min_subgroup_size, size_control.max_subgroup_size)
        } else {
            (subgroup.subgroup_size, subgroup.subgroup_size)
        };
        let device_type = match props.device_type {
            vk::PhysicalDeviceType::CPU => "cpu",
            vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
            vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
            vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
            _ => "other",
        };
        let info = VulkanDeviceInfo {
            multiprocessors: (has_sm && sm.shader_sm_count > 0).then_some(sm.shader_sm_count),
            warps_per_multiprocessor: (has_sm && sm.shader_warps_per_sm > 0).then_some(sm.shader_warps_per_sm),
            index,
            name: c_string(props.device_name_as_c_str()),
            vendor_id: props.vendor_id,
            device_id: props.device_id,
            device_type: device_type.into(),
            driver_name: if v12 { c_string(driver.driver_name_as_c_str()) } else { String::new() },
            driver_info: if v12 { c_string(driver.driver_info_as_c_str()) } else { String::new() },
            driver_version: props.driver_version,
            api_version: (vk::api_version_major(api), vk::api_version_minor(api), vk::api_version_patch(api)),
            subgroup_size: subgroup.subgroup_size,
            min_subgroup_size: min_sg,
            max_subgroup_size: max_sg,
            subgroup_size_control: v13
                && f13.subgroup_size_control == vk::TRUE
                && size_control.required_subgroup_size_stages.contains(vk::ShaderStageFlags::COMPUTE),
            compute_full_subgroups: v13 && f13.compute_full_subgroups == vk::TRUE,
            subgroup_in_compute: subgroup.supported_stages.contains(vk::ShaderStageFlags::COMPUTE),
            ieee_preserve: v12
                && float_controls.shader_signed_zero_inf_nan_preserve_float32 == vk::TRUE
                && float_controls.shader_signed_zero_inf_nan_preserve_float16 == vk::TRUE,
            f16_rte: v12 && f16_rte(&float_controls),
            denorm_preserve_f32: v12
                && float_controls.shader_denorm_preserve_float32 == vk::TRUE
                && matches!(
                    float_controls.denorm_behavior_independence,
                    vk::ShaderFloatControlsIndependence::ALL | vk::ShaderFloatControlsIndependence::TYPE_32_ONLY
                ),
            subgroup_ops,
            shared_memory_bytes: limits.max_compute_shared_memory_size,
            max_workgroup_size: limits.max_compute_work_group_size,
            max_workgroup_invocations: limits.max_compute_work_group_invocations,
            max_workgroup_count: limits.max_compute_work_group_count,
            max_push_constant_bytes: limits.max_push_constants_size,
            max_storage_buffer_range: limits.max_storage_buffer_range,
            max_storage_buffers: limits.max_per_stage_descriptor_storage_buffers,
            storage_buffer_8bit: v12 && f12.storage_buffer8_bit_access == vk::TRUE,
            storage_buffer_16bit: v12 && f11.storage_buffer16_bit_access == vk::TRUE,
            shader_float16: v12 && f12.shader_float16 == vk::TRUE,
            shader_int8: v12 && f12.shader_int8 == vk::TRUE,
            shader_int16: base.shader_int16 == vk::TRUE,
            shader_int64: base.shader_int64 == vk::TRUE,
            shader_int64_atomics: v12 && f12.shader_buffer_int64_atomics == vk::TRUE,
            atomic_float_add: has_atomic_float_ext && fa.shader_buffer_float32_atomic_add == vk::TRUE,
            timestamp_period_ns: limits.timestamp_period,
            timestamps: family.timestamp_valid_bits > 0,
            pipeline_statistics: base.pipeline_statistics_query == vk::TRUE,
            executable_statistics: has_executable_ext && fx.pipeline_executable_info == vk::TRUE,
            cooperative_matrices,
            cooperative_matrix_listed,
            matrix_extensions,
            cooperative_matrix2,
        };
        Ok(Some(Probe { info, queue_family, timestamp_bits: family.timestamp_valid_bits, api }))
    }
}

/// The flexible-dimension configurations of VK_NV_cooperative_matrix2, described as
/// [`CooperativeMatrix2::flexible`] says; empty where the query is missing or fails (the
/// features still say what the device has).
fn flexible_dimensions(entry: &ash::Entry, instance: &ash::Instance, pdev: vk::PhysicalDevice) -> Vec<String> {
    // SAFETY: the function is the loader's for this instance, called with the registry's
    // signature; the array it fills is sized by its own first call.
    unsafe {
        let Some(f) = entry.get_instance_proc_addr(instance.handle(), c"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV".as_ptr())
        else {
            return Vec::new();
        };
        let query: FlexibleDimensionsQuery = std::mem::transmute::<unsafe extern "system" fn(), FlexibleDimensionsQuery>(f);
        let mut count = 0u32;
        if query(pdev, &mut count, std::ptr::null_mut()) != vk::Result::SUCCESS {
            return Vec::new();
        }
        let mut props = vec![FlexibleDimensions::default(); count as usize];
        if !matches!(query(pdev, &mut count, props.as_mut_ptr()), vk::Result::SUCCESS | vk::Result::INCOMPLETE) {
            return Vec::new();
        }
        props.truncate(count as usize);
        let t = component_name;
        props
            .iter()
            .map(|p| {
                let sat = if p.saturating_accumulation == vk::TRUE { " saturating" } else { "" };
                format!(
                    "{}x{}x{} {}*{}+{}->{} {}{sat}, {} threads",
                    p.m_granularity,
                    p.n_granularity,
                    p.k_granularity,
                    t(p.a_type),
                    t(p.b_type),
                    t(p.c_type),
                    t(p.result_type),
                    format!("{:?}", p.scope).to_lowercase(),
                    p.workgroup_invocations
                )
            })
            .collect()
    }
}

/// A component type as the device reports name it: Vulkan's name in lower case, `bfloat16`
/// for the type this build's headers predate.
fn component_name(c: vk::ComponentTypeKHR) -> String {
    if c == COMPONENT_TYPE_BFLOAT16 {
        "bfloat16".to_string()
    } else {
        format!("{c:?}").to_lowercase()
    }
}

/// One listed cooperative-matrix configuration, for the device report.
fn describe_cooperative_matrix(p: &vk::CooperativeMatrixPropertiesKHR<'_>) -> String {
    let t = component_name;
    let scope = format!("{:?}", p.scope).to_lowercase();
    let sat = if p.saturating_accumulation == vk::TRUE { " saturating" } else { "" };
    format!("{}x{}x{} {}*{}+{}->{} {scope}{sat}", p.m_size, p.n_size, p.k_size, t(p.a_type), t(p.b_type), t(p.c_type), t(p.result_type))
}

/// The configurations of `props` `dot` may lower to: subgroup scope, no saturation, f16
/// operands (and bf16 where `bf16` says the device takes them: VK_KHR_shader_bfloat16), f32
/// accumulator and result; each once, in the driver's order.
fn cooperative_matrix_instrs(props: &[vk::CooperativeMatrixPropertiesKHR<'_>], bf16: bool) -> Vec<MatrixInstr> {
    let mut out: Vec<MatrixInstr> = Vec::new();
    for p in props {
        let f32 = vk::ComponentTypeKHR::FLOAT32;
        if p.scope != vk::ScopeKHR::SUBGROUP || p.saturating_accumulation == vk::TRUE || (p.c_type, p.result_type) != (f32, f32) {
            continue;
        }
        let dtype = match p.a_type {
            vk::ComponentTypeKHR::FLOAT16 => DType::F16,
            COMPONENT_TYPE_BFLOAT16 if bf16 => DType::BF16,
            _ => continue,
        };
        if p.b_type != p.a_type {
            continue;
        }
        let instr = MatrixInstr { m: p.m_size, n: p.n_size, k: p.k_size, ..MatrixInstr::coop_16x16x16(dtype) };
        if !out.contains(&instr) {
            out.push(instr);
        }
    }
    out
}

/// The logical device; destroyed after every buffer and pipeline (they hold an `Arc` to it).
struct Inner {
    device: ash::Device,
    memory: vk::PhysicalDeviceMemoryProperties,
    info: VulkanDeviceInfo,
    host_visible: bool,
    /// Set when a submission reports VK_ERROR_DEVICE_LOST: nothing more runs on this device.
    lost: std::sync::atomic::AtomicBool,
    /// Whether the validation layer is on: calls then hold [`layer_call`].
    validation: bool,
    // Declared last: dropped after the device is destroyed.
    instance: InstanceOwner,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: the last owner is going away, so no command is pending on this device and
        // every child object has been destroyed.
        unsafe {
            let _layer = layer_lifecycle(self.validation);
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
        }
    }
}

impl Inner {
    /// Held across every call on this device ([`LAYER_MAP`]).
    fn call(&self) -> LayerGuard {
        layer_call(self.validation)
    }

    fn memory_type(&self, bits: u32, flags: vk::MemoryPropertyFlags) -> Option<u32> {
        (0..self.memory.memory_type_count).find(|&i| bits & (1 << i) != 0 && self.memory.memory_types[i as usize].property_flags.contains(flags))
    }

    fn device_name(&self) -> String {
        self.info.display_name()
    }

    /// The largest memory heap, in bytes.
    fn largest_heap(&self) -> u64 {
        self.memory.memory_heaps[..self.memory.memory_heap_count as usize].iter().map(|h| h.size).max().unwrap_or(0)
    }

    /// The error of a Vulkan call on this device: device loss and exhausted memory get their own
    /// variants; loss also marks the device lost.
    fn vk_error(&self, call: &'static str, result: vk::Result) -> VulkanError {
        match result {
            vk::Result::ERROR_DEVICE_LOST => {
                self.lost.store(true, std::sync::atomic::Ordering::Relaxed);
                VulkanError::DeviceLost { device: self.device_name(), during: format!("in {call}"), result }
            }
            _ => VulkanError::Vk { call, result },
        }
    }

    /// Refuses work on a device that was lost.
    fn usable(&self) -> Result<(), VulkanError> {
        if self.lost.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(VulkanError::DeviceLost { device: self.device_name(), during: "earlier".into(), result: vk::Result::ERROR_DEVICE_LOST });
        }
        Ok(())
    }
}

/// A buffer in device memory holding `len` elements of one dtype.
pub struct DeviceBuffer {
    inner: Arc<Inner>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: *mut u8,
    size: u64,
    dtype: DType,
    len: usize,
}

// SAFETY: the mapped pointer refers to memory owned by this buffer; the runtime only touches it
// between synchronous submissions.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes of the elements (the allocation is at least 4 bytes and a multiple of 4).
    pub fn size_bytes(&self) -> usize {
        self.len * self.dtype.size_bytes()
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({} x {}, {} bytes)", self.len, self.dtype, self.size)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _layer = self.inner.call();
        // SAFETY: launches are synchronous, so the GPU no longer uses the buffer.
        unsafe {
            self.inner.device.destroy_buffer(self.buffer, None);
            self.inner.device.free_memory(self.memory, None);
        }
    }
}

/// A loaded kernel: its compute pipeline and descriptor set.
pub struct Pipeline {
    inner: Arc<Inner>,
    kernel: SpirvKernel,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    statistics: Vec<ExecutableStatistic>,
}

/// One statistic the driver reports about a compiled pipeline (VK_KHR_pipeline_executable_properties),
/// such as NVIDIA's "Register Count" or lavapipe's instruction count.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutableStatistic {
    /// The executable (shader stage) it belongs to, as the driver names it.
    pub executable: String,
    pub name: String,
    pub description: String,
    pub value: StatisticValue,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StatisticValue {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
}

impl std::fmt::Display for StatisticValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatisticValue::Bool(b) => write!(f, "{b}"),
            StatisticValue::Int(i) => write!(f, "{i}"),
            StatisticValue::Uint(u) => write!(f, "{u}"),
            StatisticValue::Float(x) => write!(f, "{x}"),
        }
    }
}

impl Pipeline {
    pub fn kernel(&self) -> &SpirvKernel {
        &self.kernel
    }

    /// What the driver says it compiled this pipeline to; empty where the device lacks
    /// VK_KHR_pipeline_executable_properties.
    pub fn statistics(&self) -> &[ExecutableStatistic] {
        &self.statistics
    }

    /// The statistic whose name contains `needle` (case-insensitive), as an integer: e.g.
    /// `register` for the registers per thread.
    pub fn statistic_u64(&self, needle: &str) -> Option<u64> {
        let needle = needle.to_ascii_lowercase();
        self.statistics.iter().find(|s| s.name.to_ascii_lowercase().contains(&needle)).and_then(|s| match s.value {
            StatisticValue::Int(i) => u64::try_from(i).ok(),
            StatisticValue::Uint(u) => Some(u),
            StatisticValue::Float(x) if x >= 0.0 => Some(x as u64),
            _ => None,
        })
    }
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pipeline({})", self.kernel.name)
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        let _layer = self.inner.call();
        // SAFETY: launches are synchronous, so no command buffer still uses these objects.
        unsafe {
            let d = &self.inner.device;
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_pool(self.pool, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

struct Submitter {
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
}

/// One Vulkan device with a compute queue.
pub struct VulkanRuntime {
    inner: Arc<Inner>,
    queue: vk::Queue,
    submit: Mutex<Submitter>,
    /// Held from a query pool's reset to the read of its results: the runtime is shared between
    /// threads, and another thread's timed submission would reset the queries in between.
    queries: Mutex<()>,
    timestamps: vk::QueryPool,
    statistics: vk::QueryPool,
    timestamp_mask: u64,
    options: VulkanOptions,
    transfers: tilekit_core::TransferCounter,
}

impl Drop for VulkanRuntime {
    fn drop(&mut self) {
        let _layer = self.inner.call();
        let s = self.submit.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: submissions are synchronous; nothing is pending.
        unsafe {
            let d = &self.inner.device;
            let _ = d.device_wait_idle();
            d.destroy_query_pool(self.timestamps, None);
            d.destroy_query_pool(self.statistics, None);
            d.destroy_fence(s.fence, None);
            d.destroy_command_pool(s.pool, None);
        }
    }
}

/// A full memory barrier between everything before and everything after.
/// Timestamp queries in the runtime's pool: two per timed run of one submission.
const TIMESTAMP_SLOTS: u32 = 512;

fn full_barrier(d: &ash::Device, cmd: vk::CommandBuffer) {
    let b = vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
        .dst_access_mask(vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE);
    // SAFETY: recording into a command buffer in the recording state.
    unsafe {
        d.cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::DependencyFlags::empty(),
            &[b],
            &[],
            &[],
        )
    };
}

/// Makes device writes visible to host reads of mapped memory.
fn host_barrier(d: &ash::Device, cmd: vk::CommandBuffer) {
    let b = vk::MemoryBarrier::default().src_access_mask(vk::AccessFlags::MEMORY_WRITE).dst_access_mask(vk::AccessFlags::HOST_READ);
    // SAFETY: recording into a command buffer in the recording state.
    unsafe {
        d.cmd_pipeline_barrier(cmd, vk::PipelineStageFlags::ALL_COMMANDS, vk::PipelineStageFlags::HOST, vk::DependencyFlags::empty(), &[b], &[], &[])
    };
}

impl VulkanRuntime {
    /// Every Vulkan physical device that has a compute queue.
    pub fn devices() -> Result<Vec<VulkanDeviceInfo>, VulkanError> {
        // Enumerated once per process, one caller at a time: the physical devices do not change
        // while it runs, and each enumeration creates and destroys an instance, which every
        // `Device::gpus()` did from any thread while others ran work on their devices: with
        // NVIDIA's driver, test threads doing so crashed the process at random points.
        static DEVICES: Mutex<Option<Vec<VulkanDeviceInfo>>> = Mutex::new(None);
        let mut known = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(devices) = &*known {
            return Ok(devices.clone());
        }
        let devices = VulkanRuntime::enumerate()?;
        *known = Some(devices.clone());
        Ok(devices)
    }

    /// [`VulkanRuntime::devices`] from a fresh instance.
    fn enumerate() -> Result<Vec<VulkanDeviceInfo>, VulkanError> {
        let owner = create_instance(false)?;
        // SAFETY: enumeration on a live instance.
        let pdevs = unsafe { owner.instance.enumerate_physical_devices() }.map_err(vk_err("vkEnumeratePhysicalDevices"))?;
        let mut out = Vec::new();
        for (i, &p) in pdevs.iter().enumerate() {
            if let Some(probe) = probe(&owner.entry, &owner.instance, p, i)? {
                out.push(probe.info);
            }
        }
        Ok(out)
    }

    /// Opens device `index` of [`VulkanRuntime::devices`] (by its `index` field), with options
    /// from the environment ([`VulkanOptions::from_env`]).
    pub fn new(index: usize) -> Result<VulkanRuntime, VulkanError> {
        VulkanRuntime::with_options(index, VulkanOptions::from_env())
    }

    pub fn with_options(index: usize, options: VulkanOptions) -> Result<VulkanRuntime, VulkanError> {
        let _layer = layer_lifecycle(options.validation);
        let owner = create_instance(options.validation)?;
        // SAFETY: Vulkan calls on the live instance; every handle created here is owned by an
        // object whose Drop destroys it, so early returns leak nothing.
        unsafe {
            let pdevs = owner.instance.enumerate_physical_devices().map_err(vk_err("vkEnumeratePhysicalDevices"))?;
            let Some(&pdev) = pdevs.get(index) else {
                return Err(VulkanError::NoDevice { index, count: pdevs.len() });
            };
            let Some(probe) = probe(&owner.entry, &owner.instance, pdev, index)? else {
                return Err(VulkanError::Device {
                    device: c_string(owner.instance.get_physical_device_properties(pdev).device_name_as_c_str()),
                    what: "it has no compute queue".into(),
                });
            };
            let info = &probe.info;
            if probe.api < vk::API_VERSION_1_1 {
                return Err(VulkanError::Device {
                    device: info.name.clone(),
                    what: format!("it supports Vulkan {}.{}, tilekit needs 1.1", info.api_version.0, info.api_version.1),
                });
            }
            let v12 = probe.api >= vk::API_VERSION_1_2;
            let v13 = probe.api >= vk::API_VERSION_1_3;
            let on = |b: bool| if b { vk::TRUE } else { vk::FALSE };
            let base = vk::PhysicalDeviceFeatures {
                shader_int64: on(info.shader_int64),
                shader_int16: on(info.shader_int16),
                pipeline_statistics_query: on(info.pipeline_statistics),
                ..Default::default()
            };
            let mut f11 = vk::PhysicalDeviceVulkan11Features { storage_buffer16_bit_access: on(info.storage_buffer_16bit), ..Default::default() };
            let mut f12 = vk::PhysicalDeviceVulkan12Features {
                storage_buffer8_bit_access: on(info.storage_buffer_8bit),
                shader_float16: on(info.shader_float16),
                shader_int8: on(info.shader_int8),
                shader_buffer_int64_atomics: on(info.shader_int64_atomics),
                vulkan_memory_model: on(!info.cooperative_matrices.is_empty()),
                ..Default::default()
            };
            let mut f13 = vk::PhysicalDeviceVulkan13Features {
                subgroup_size_control: on(info.subgroup_size_control),
                compute_full_subgroups: on(info.compute_full_subgroups),
                ..Default::default()
            };
            let mut fa =
                vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT { shader_buffer_float32_atomic_add: on(info.atomic_float_add), ..Default::default() };
            let mut f2 = vk::PhysicalDeviceFeatures2::default().features(base);
            if v12 {
                f2 = f2.push_next(&mut f11).push_next(&mut f12);
            }
            if v13 {
                f2 = f2.push_next(&mut f13);
            }
            let mut fx = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR { pipeline_executable_info: vk::TRUE, ..Default::default() };
            let mut exts: Vec<*const i8> = Vec::new();
            if info.atomic_float_add {
                f2 = f2.push_next(&mut fa);
                exts.push(ash::ext::shader_atomic_float::NAME.as_ptr());
            }
            if info.executable_statistics {
                f2 = f2.push_next(&mut fx);
                exts.push(ash::khr::pipeline_executable_properties::NAME.as_ptr());
            }
            let mut fc = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR { cooperative_matrix: vk::TRUE, ..Default::default() };
            if !info.cooperative_matrices.is_empty() {
                f2 = f2.push_next(&mut fc);
                exts.push(ash::khr::cooperative_matrix::NAME.as_ptr());
            }
            let mut fb =
                ShaderBfloat16Features { shader_bfloat16_type: vk::TRUE, shader_bfloat16_cooperative_matrix: vk::TRUE, ..Default::default() };
            if info.cooperative_matrices.iter().any(|m| m.a == DType::BF16) {
                f2 = f2.push_next(&mut fb);
                exts.push(SHADER_BFLOAT16.as_ptr());
            }
            let mut fm = CooperativeMatrix2Features::default();
            if info.cooperative_matrix2.as_ref().is_some_and(|c| c.runs_tensor_matmul()) {
                // What `coopmat2` modules use, and nothing else.
                fm.workgroup_scope = vk::TRUE;
                fm.flexible_dimensions = vk::TRUE;
                fm.tensor_addressing = vk::TRUE;
                f2 = f2.push_next(&mut fm);
                exts.push(COOPERATIVE_MATRIX2.as_ptr());
            }
            let priorities = [1.0f32];
            let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(probe.queue_family).queue_priorities(&priorities)];
            let device_info = vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_extension_names(&exts).push_next(&mut f2);
            let device = owner.instance.create_device(pdev, &device_info, None).map_err(vk_err("vkCreateDevice"))?;
            let memory = owner.instance.get_physical_device_memory_properties(pdev);
            let host_visible = info.host_visible_buffers() && !options.force_staging;
            let inner = Arc::new(Inner {
                device,
                memory,
                info: probe.info.clone(),
                host_visible,
                lost: std::sync::atomic::AtomicBool::new(false),
                validation: options.validation,
                instance: owner,
            });
            let queue = inner.device.get_device_queue(probe.queue_family, 0);
            let mut rt = VulkanRuntime {
                inner: inner.clone(),
                queue,
                submit: Mutex::new(Submitter { pool: vk::CommandPool::null(), cmd: vk::CommandBuffer::null(), fence: vk::Fence::null() }),
                queries: Mutex::new(()),
                timestamps: vk::QueryPool::null(),
                statistics: vk::QueryPool::null(),
                timestamp_mask: if probe.timestamp_bits >= 64 { u64::MAX } else { (1u64 << probe.timestamp_bits) - 1 },
                options,
                transfers: Default::default(),
            };
            let d = &inner.device;
            let s = rt.submit.get_mut().unwrap_or_else(|e| e.into_inner());
            s.pool = d
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .queue_family_index(probe.queue_family)
                        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                    None,
                )
                .map_err(vk_err("vkCreateCommandPool"))?;
            s.cmd = d
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default().command_pool(s.pool).level(vk::CommandBufferLevel::PRIMARY).command_buffer_count(1),
                )
                .map_err(vk_err("vkAllocateCommandBuffers"))?[0];
            s.fence = d.create_fence(&vk::FenceCreateInfo::default(), None).map_err(vk_err("vkCreateFence"))?;
            if probe.info.timestamps {
                rt.timestamps = d
                    .create_query_pool(&vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(TIMESTAMP_SLOTS), None)
                    .map_err(vk_err("vkCreateQueryPool"))?;
            }
            if probe.info.pipeline_statistics {
                rt.statistics = d
                    .create_query_pool(
                        &vk::QueryPoolCreateInfo::default()
                            .query_type(vk::QueryType::PIPELINE_STATISTICS)
                            .query_count(1)
                            .pipeline_statistics(vk::QueryPipelineStatisticFlags::COMPUTE_SHADER_INVOCATIONS),
                        None,
                    )
                    .map_err(vk_err("vkCreateQueryPool"))?;
            }
            Ok(rt)
        }
    }

    pub fn info(&self) -> &VulkanDeviceInfo {
        &self.inner.info
    }

    /// Host <-> device copies made through this runtime so far.
    pub fn transfers(&self) -> tilekit_core::Transfers {
        self.transfers.get()
    }

    pub fn target(&self) -> Target {
        self.inner.info.target()
    }

    pub fn options(&self) -> &VulkanOptions {
        &self.options
    }

    /// The messages collected by the validation layer since the last call (always empty without
    /// validation).
    pub fn take_validation_messages(&self) -> Vec<String> {
        self.inner.instance.log.take()
    }

    /// A handle on the validation messages that stays valid after the runtime is dropped.
    pub fn validation_log(&self) -> ValidationLog {
        self.inner.instance.log.clone()
    }

    fn device_name(&self) -> String {
        self.inner.device_name()
    }

    /// Whether the device was lost (VK_ERROR_DEVICE_LOST): the runtime refuses further work and
    /// a new one must be opened.
    pub fn is_lost(&self) -> bool {
        self.inner.lost.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records with `record`, submits, and waits.
    fn run_commands(&self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<(), VulkanError> {
        let _layer = self.inner.call();
        self.inner.usable()?;
        let s = self.submit.lock().unwrap_or_else(|e| e.into_inner());
        let d = &self.inner.device;
        // SAFETY: the command buffer is not pending (every submission is waited for) and the
        // mutex gives this call exclusive use of it.
        unsafe {
            d.reset_command_buffer(s.cmd, vk::CommandBufferResetFlags::empty()).map_err(vk_err("vkResetCommandBuffer"))?;
            d.begin_command_buffer(s.cmd, &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT))
                .map_err(vk_err("vkBeginCommandBuffer"))?;
            full_barrier(d, s.cmd);
            record(d, s.cmd);
            host_barrier(d, s.cmd);
            d.end_command_buffer(s.cmd).map_err(vk_err("vkEndCommandBuffer"))?;
            let cmds = [s.cmd];
            let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
            d.queue_submit(self.queue, &submit, s.fence).map_err(|r| self.inner.vk_error("vkQueueSubmit", r))?;
            let timeout = self.options.timeout.as_nanos().min(u64::MAX as u128) as u64;
            let waited = d.wait_for_fences(&[s.fence], true, timeout);
            if waited == Err(vk::Result::TIMEOUT) {
                // The fence is still pending: wait for the device before reusing anything.
                let _ = d.device_wait_idle();
                let _ = d.reset_fences(&[s.fence]);
                return Err(VulkanError::Device {
                    device: self.device_name(),
                    what: format!("a submission ran longer than {:?}", self.options.timeout),
                });
            }
            waited.map_err(|r| self.inner.vk_error("vkWaitForFences", r))?;
            d.reset_fences(&[s.fence]).map_err(vk_err("vkResetFences"))?;
        }
        Ok(())
    }

    // ---- buffers ----

    fn create_buffer(&self, size: u64, usage: vk::BufferUsageFlags, host: bool) -> Result<(vk::Buffer, vk::DeviceMemory, *mut u8), VulkanError> {
        let _layer = self.inner.call();
        let d = &self.inner.device;
        // SAFETY: creation calls with valid infos; on failure everything created is destroyed.
        unsafe {
            let buffer = d
                .create_buffer(&vk::BufferCreateInfo::default().size(size).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE), None)
                .map_err(vk_err("vkCreateBuffer"))?;
            let req = d.get_buffer_memory_requirements(buffer);
            let flags = if host {
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT
            } else {
                vk::MemoryPropertyFlags::DEVICE_LOCAL
            };
            // Every device has device-local memory for buffers; the fallback is for odd drivers.
            let found = self
                .inner
                .memory_type(req.memory_type_bits, flags)
                .or_else(|| (!host).then(|| self.inner.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::empty())).flatten());
            let Some(type_index) = found else {
                d.destroy_buffer(buffer, None);
                return Err(VulkanError::Device { device: self.device_name(), what: format!("no memory type with {flags:?} for a buffer") });
            };
            let memory = match d.allocate_memory(&vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(type_index), None) {
                Ok(m) => m,
                Err(result) => {
                    d.destroy_buffer(buffer, None);
                    return Err(match result {
                        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                            VulkanError::OutOfMemory { device: self.device_name(), bytes: req.size, heap_bytes: self.inner.largest_heap(), result }
                        }
                        r => self.inner.vk_error("vkAllocateMemory", r),
                    });
                }
            };
            let mapped = match d.bind_buffer_memory(buffer, memory, 0).and_then(|_| {
                if host {
                    d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()).map(|p| p as *mut u8)
                } else {
                    Ok(std::ptr::null_mut())
                }
            }) {
                Ok(p) => p,
                Err(e) => {
                    d.destroy_buffer(buffer, None);
                    d.free_memory(memory, None);
                    return Err(vk_err("vkBindBufferMemory/vkMapMemory")(e));
                }
            };
            Ok((buffer, memory, mapped))
        }
    }

    /// A buffer of `len` elements of `dtype`, contents undefined (at least 4 bytes even when
    /// empty, as Vulkan forbids empty buffers).
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, VulkanError> {
        let _layer = self.inner.call();
        self.inner.usable()?;
        let bytes = len
            .checked_mul(dtype.size_bytes())
            .ok_or_else(|| VulkanError::Buffer(format!("{len} elements of {dtype} overflow the address space")))?;
        // Whole 16-byte vectors: a masked-off vector load reads the first 16 bytes of a buffer.
        let size = (bytes.max(16) as u64).div_ceil(16) * 16;
        let range = self.inner.info.max_storage_buffer_range as u64;
        if size > range {
            return Err(VulkanError::Buffer(format!(
                "{len} elements of {dtype} take {size} bytes, more than {} binds in one storage buffer (maxStorageBufferRange = {range})",
                self.device_name()
            )));
        }
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        let (buffer, memory, mapped) = self.create_buffer(size, usage, self.inner.host_visible)?;
        Ok(DeviceBuffer { inner: self.inner.clone(), buffer, memory, mapped, size, dtype, len })
    }

    fn check_own(&self, buf: &DeviceBuffer) -> Result<(), VulkanError> {
        if Arc::ptr_eq(&buf.inner, &self.inner) {
            Ok(())
        } else {
            Err(VulkanError::Buffer("the buffer belongs to another Vulkan runtime".into()))
        }
    }

    /// Copies `host` into `buf`; dtypes and lengths must match.
    pub fn upload(&self, buf: &DeviceBuffer, host: &HostBuffer) -> Result<(), VulkanError> {
        let _layer = self.inner.call();
        self.check_own(buf)?;
        self.inner.usable()?;
        if host.dtype() != buf.dtype || host.len() != buf.len {
            return Err(VulkanError::Buffer(format!(
                "upload of {} x {} into a device buffer of {} x {}",
                host.len(),
                host.dtype(),
                buf.len,
                buf.dtype
            )));
        }
        let bytes = host.to_bytes();
        self.transfers.upload(bytes.len());
        if bytes.is_empty() {
            return Ok(());
        }
        if !buf.mapped.is_null() {
            // SAFETY: the mapping covers `size >= bytes.len()` bytes; no submission is pending.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.mapped, bytes.len()) };
            return Ok(());
        }
        let (staging, memory, mapped) = self.create_buffer(buf.size, vk::BufferUsageFlags::TRANSFER_SRC, true)?;
        // SAFETY: the staging mapping covers buf.size bytes; staging objects are destroyed after
        // the synchronous copy.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), mapped, bytes.len());
            let size = bytes.len() as u64;
            let r = self.run_commands(|d, cmd| d.cmd_copy_buffer(cmd, staging, buf.buffer, &[vk::BufferCopy { src_offset: 0, dst_offset: 0, size }]));
            self.inner.device.destroy_buffer(staging, None);
            self.inner.device.free_memory(memory, None);
            r
        }
    }

    /// A host copy of `buf`.
    pub fn download(&self, buf: &DeviceBuffer) -> Result<HostBuffer, VulkanError> {
        let _layer = self.inner.call();
        self.check_own(buf)?;
        // Mapped memory of a lost device holds whatever the fault left: never read back as results.
        self.inner.usable()?;
        let n = buf.size_bytes();
        self.transfers.download(n);
        let mut bytes = vec![0u8; n];
        if n > 0 {
            if !buf.mapped.is_null() {
                // SAFETY: as in upload; device writes were made visible to the host by the
                // barrier that ends every submission.
                unsafe { std::ptr::copy_nonoverlapping(buf.mapped, bytes.as_mut_ptr(), n) };
            } else {
                let (staging, memory, mapped) = self.create_buffer(buf.size, vk::BufferUsageFlags::TRANSFER_DST, true)?;
                let size = n as u64;
                let r = self.run_commands(|d, cmd| unsafe {
                    d.cmd_copy_buffer(cmd, buf.buffer, staging, &[vk::BufferCopy { src_offset: 0, dst_offset: 0, size }])
                });
                // SAFETY: the copy finished (run_commands waits) and was made visible to the host.
                unsafe {
                    if r.is_ok() {
                        std::ptr::copy_nonoverlapping(mapped, bytes.as_mut_ptr(), n);
                    }
                    self.inner.device.destroy_buffer(staging, None);
                    self.inner.device.free_memory(memory, None);
                }
                r?;
            }
        }
        HostBuffer::from_bytes(buf.dtype, &bytes).map_err(|e| VulkanError::Buffer(e.to_string()))
    }

    // ---- pipelines ----

    /// Checks the kernel's requirements against the device and creates its pipeline.
    pub fn load(&self, kernel: &SpirvKernel) -> Result<Pipeline, VulkanError> {
        let _layer = self.inner.call();
        self.inner.usable()?;
        let info = &self.inner.info;
        let required_subgroup = info.check_kernel(kernel)?;
        let limit = |what: String| VulkanError::Limit { kernel: kernel.name.clone(), device: info.display_name(), what };
        let full_subgroups = required_subgroup.is_some_and(|s| kernel.threads % s == 0) && info.compute_full_subgroups;

        let d = &self.inner.device;
        let mut p = Pipeline {
            inner: self.inner.clone(),
            kernel: kernel.clone(),
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            pool: vk::DescriptorPool::null(),
            set: vk::DescriptorSet::null(),
            statistics: Vec::new(),
        };
        // SAFETY: creation calls with valid infos; partially built pipelines are destroyed by
        // Pipeline's Drop (null handles are ignored).
        unsafe {
            let bindings: Vec<vk::DescriptorSetLayoutBinding> = kernel
                .bindings
                .iter()
                .map(|b| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b.binding)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            p.set_layout = d
                .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
                .map_err(vk_err("vkCreateDescriptorSetLayout"))?;
            let set_layouts = [p.set_layout];
            let ranges = [vk::PushConstantRange { stage_flags: vk::ShaderStageFlags::COMPUTE, offset: 0, size: kernel.push_constant_size }];
            let mut layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
            if kernel.push_constant_size > 0 {
                layout_info = layout_info.push_constant_ranges(&ranges);
            }
            p.layout = d.create_pipeline_layout(&layout_info, None).map_err(vk_err("vkCreatePipelineLayout"))?;
            if !bindings.is_empty() {
                let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: bindings.len() as u32 }];
                p.pool = d
                    .create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None)
                    .map_err(vk_err("vkCreateDescriptorPool"))?;
                p.set = d
                    .allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(p.pool).set_layouts(&set_layouts))
                    .map_err(vk_err("vkAllocateDescriptorSets"))?[0];
            }
            let refused = |call: &'static str, result: vk::Result| match result {
                vk::Result::ERROR_DEVICE_LOST => self.inner.vk_error(call, result),
                result => VulkanError::Refused { kernel: kernel.name.clone(), device: info.display_name(), call, result },
            };
            let module = d
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&kernel.words), None)
                .map_err(|r| refused("vkCreateShaderModule", r))?;
            let entry = CString::new(kernel.entry_point.clone())
                .map_err(|_| limit(format!("entry point name {:?} contains a NUL byte", kernel.entry_point)))?;
            let mut subgroup_info =
                vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default().required_subgroup_size(required_subgroup.unwrap_or(0));
            let mut stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(&entry);
            if required_subgroup.is_some() {
                stage = stage.push_next(&mut subgroup_info);
            }
            if full_subgroups {
                stage = stage.flags(vk::PipelineShaderStageCreateFlags::REQUIRE_FULL_SUBGROUPS);
            }
            let mut create_flags = vk::PipelineCreateFlags::empty();
            if info.executable_statistics {
                create_flags |= vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR;
            }
            let infos = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(p.layout).flags(create_flags)];
            let created = d.create_compute_pipelines(vk::PipelineCache::null(), &infos, None);
            d.destroy_shader_module(module, None);
            p.pipeline = match created {
                Ok(v) => v[0],
                Err((v, e)) => {
                    for pl in v {
                        d.destroy_pipeline(pl, None);
                    }
                    return Err(refused("vkCreateComputePipelines", e));
                }
            };
            if info.executable_statistics {
                p.statistics = self.executable_statistics(p.pipeline)?;
            }
        }
        Ok(p)
    }

    /// The driver's statistics of every executable of `pipeline` (created with
    /// CAPTURE_STATISTICS_KHR on a device with the extension enabled).
    ///
    /// # Safety
    /// `pipeline` must be a live pipeline of this device.
    unsafe fn executable_statistics(&self, pipeline: vk::Pipeline) -> Result<Vec<ExecutableStatistic>, VulkanError> {
        let ext = ash::khr::pipeline_executable_properties::Device::new(&self.inner.instance.instance, &self.inner.device);
        let info = vk::PipelineInfoKHR::default().pipeline(pipeline);
        let executables = ext.get_pipeline_executable_properties(&info).map_err(vk_err("vkGetPipelineExecutablePropertiesKHR"))?;
        let mut out = Vec::new();
        for (i, exe) in executables.iter().enumerate() {
            let executable = exe.name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
            let ei = vk::PipelineExecutableInfoKHR::default().pipeline(pipeline).executable_index(i as u32);
            let stats = ext.get_pipeline_executable_statistics(&ei).map_err(vk_err("vkGetPipelineExecutableStatisticsKHR"))?;
            for st in stats {
                let value = match st.format {
                    vk::PipelineExecutableStatisticFormatKHR::BOOL32 => StatisticValue::Bool(st.value.b32 == vk::TRUE),
                    vk::PipelineExecutableStatisticFormatKHR::INT64 => StatisticValue::Int(st.value.i64),
                    vk::PipelineExecutableStatisticFormatKHR::UINT64 => StatisticValue::Uint(st.value.u64),
                    _ => StatisticValue::Float(st.value.f64),
                };
                let text = |c: Result<&CStr, _>| c.map(|c: &CStr| c.to_string_lossy().into_owned()).unwrap_or_default();
                out.push(ExecutableStatistic {
                    executable: executable.clone(),
                    name: text(st.name_as_c_str()),
                    description: text(st.description_as_c_str()),
                    value,
                });
            }
        }
        Ok(out)
    }

    /// The most workgroups this runtime dispatches along each axis: maxComputeWorkGroupCount,
    /// or less where [`VulkanOptions::max_workgroups_per_dim`] says so.
    pub fn max_workgroups(&self) -> [u32; 3] {
        let max = self.inner.info.max_workgroup_count;
        match self.options().max_workgroups_per_dim {
            Some(n) => max.map(|m| m.min(n.max(1))),
            None => max,
        }
    }

    /// Whether a launch over `grid` needs a kernel that folds its grid.
    pub fn needs_fold(&self, grid: [u32; 3]) -> bool {
        !tilekit_core::gpu::grid::fits(grid, self.max_workgroups())
    }

    /// Checks a launch; returns the push constants and the workgroups to dispatch (the grid, or
    /// its folded shape for a kernel that folds its grid).
    fn check_launch(
        &self,
        p: &Pipeline,
        grid: [u32; 3],
        buffers: &[&DeviceBuffer],
        scalars: &[(u32, Scalar)],
    ) -> Result<(Vec<u8>, [u32; 3]), VulkanError> {
        let k = &p.kernel;
        let err = |what: String| VulkanError::Launch { kernel: k.name.clone(), what };
        if !Arc::ptr_eq(&p.inner, &self.inner) {
            return Err(err("the pipeline was loaded by another Vulkan runtime".into()));
        }
        if buffers.len() != k.bindings.len() {
            return Err(err(format!("{} buffers given, the kernel binds {}", buffers.len(), k.bindings.len())));
        }
        for (b, buf) in k.bindings.iter().zip(buffers) {
            self.check_own(buf)?;
            if buf.dtype != b.dtype {
                return Err(err(format!("binding {} (parameter {}) takes a buffer of {}, got {}", b.binding, b.param, b.dtype, buf.dtype)));
            }
        }
        let workgroups = k.dispatch_shape(grid, self.max_workgroups()).map_err(|e| match e {
            DispatchError::Unfolded { grid, axis, extent, max } => err(format!(
                "grid {grid:?}: extent {extent} along axis {axis} exceeds maxComputeWorkGroupCount[{axis}] = {max} on {}{}; \
                 compile it with LowerOptions::fold_grid to launch such grids",
                self.device_name(),
                if max < self.inner.info.max_workgroup_count[axis] { " (as limited by max_workgroups_per_dim)" } else { "" },
            )),
            DispatchError::Fold(source) => err(format!("cannot be launched on {} even folded: {source}", self.device_name())),
        })?;
        Ok((k.pack_launch(scalars, grid)?, workgroups))
    }

    /// Records binding, push constants and the dispatch, between optional queries.
    /// Points the pipeline's descriptor set at the job's buffers and binds pipeline, set and
    /// push constants. Called once per command buffer: updating a set already bound in a
    /// recording command buffer would invalidate it.
    fn record_bind(&self, d: &ash::Device, cmd: vk::CommandBuffer, job: &Dispatch<'_>) {
        let Dispatch { pipeline: p, push, buffers, .. } = *job;
        let infos: Vec<vk::DescriptorBufferInfo> =
            buffers.iter().map(|b| vk::DescriptorBufferInfo { buffer: b.buffer, offset: 0, range: vk::WHOLE_SIZE }).collect();
        // SAFETY: the descriptor set is not in use by any pending command buffer (submissions are
        // synchronous and this runs under the submit mutex); every handle is live.
        unsafe {
            if !infos.is_empty() {
                let writes: Vec<vk::WriteDescriptorSet> = p
                    .kernel
                    .bindings
                    .iter()
                    .zip(&infos)
                    .map(|(b, info)| {
                        vk::WriteDescriptorSet::default()
                            .dst_set(p.set)
                            .dst_binding(b.binding)
                            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                            .buffer_info(std::slice::from_ref(info))
                    })
                    .collect();
                d.update_descriptor_sets(&writes, &[]);
            }
            d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, p.pipeline);
            if !infos.is_empty() {
                d.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, p.layout, 0, &[p.set], &[]);
            }
            if !push.is_empty() {
                d.cmd_push_constants(cmd, p.layout, vk::ShaderStageFlags::COMPUTE, 0, push);
            }
        }
    }

    fn record_dispatch(&self, d: &ash::Device, cmd: vk::CommandBuffer, job: &Dispatch<'_>, query: Query) {
        self.record_bind(d, cmd, job);
        let grid = job.workgroups;
        // SAFETY: recording into a command buffer in the recording state; the pools are live.
        unsafe {
            match query {
                Query::None => d.cmd_dispatch(cmd, grid[0], grid[1], grid[2]),
                Query::Statistics => {
                    d.cmd_reset_query_pool(cmd, self.statistics, 0, 1);
                    d.cmd_begin_query(cmd, self.statistics, 0, vk::QueryControlFlags::empty());
                    d.cmd_dispatch(cmd, grid[0], grid[1], grid[2]);
                    d.cmd_end_query(cmd, self.statistics, 0);
                }
            }
        }
    }

    /// `n` dispatches of `job` back to back in one command buffer, each after a full barrier so
    /// that runs do not overlap; with `timed`, each bracketed by timestamps `2i`, `2i + 1`.
    /// Before each run every buffer of `flush` is overwritten, with a value that changes from run
    /// to run (`first` numbers the batch's first run) so no driver can skip a fill as redundant.
    #[allow(clippy::too_many_arguments)]
    fn record_batch(&self, d: &ash::Device, cmd: vk::CommandBuffer, job: &Dispatch<'_>, n: u32, timed: bool, flush: &[&DeviceBuffer], first: usize) {
        self.record_bind(d, cmd, job);
        let grid = job.workgroups;
        // SAFETY: recording into a command buffer in the recording state; the pool holds
        // TIMESTAMP_SLOTS queries and n <= TIMESTAMP_SLOTS / 2 when timed; the flush buffers are
        // live and owned by this runtime.
        unsafe {
            if timed {
                d.cmd_reset_query_pool(cmd, self.timestamps, 0, 2 * n);
            }
            for i in 0..n {
                if !flush.is_empty() {
                    full_barrier(d, cmd);
                    let value = 0x9E37_79B9u32.wrapping_mul((first + i as usize) as u32 + 1);
                    for f in flush {
                        d.cmd_fill_buffer(cmd, f.buffer, 0, vk::WHOLE_SIZE, value);
                    }
                }
                full_barrier(d, cmd);
                if timed {
                    d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, self.timestamps, 2 * i);
                }
                d.cmd_dispatch(cmd, grid[0], grid[1], grid[2]);
                if timed {
                    d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, self.timestamps, 2 * i + 1);
                }
            }
        }
    }

    /// Runs `pipeline` on `grid` programs with `buffers` (one per binding, in binding order) and
    /// `scalars` (`(parameter index, value)` for every scalar parameter); returns when it is done.
    pub fn launch(&self, pipeline: &Pipeline, grid: [u32; 3], buffers: &[&DeviceBuffer], scalars: &[(u32, Scalar)]) -> Result<(), VulkanError> {
        let _layer = self.inner.call();
        let (push, workgroups) = self.check_launch(pipeline, grid, buffers, scalars)?;
        let job = Dispatch { pipeline, workgroups, push: &push, buffers };
        self.run_commands(|d, cmd| self.record_dispatch(d, cmd, &job, Query::None))
    }

    /// Device time of `runs` launches after `warmup` untimed ones, in seconds, one sample per run
    /// (timestamps around the dispatch).
    pub fn time(
        &self,
        pipeline: &Pipeline,
        grid: [u32; 3],
        buffers: &[&DeviceBuffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
    ) -> Result<Vec<f64>, VulkanError> {
        let _layer = self.inner.call();
        self.time_flushed(pipeline, grid, buffers, scalars, warmup, runs, &[])
    }

    /// As [`VulkanRuntime::time`], but before each timed run every buffer of `flush` is
    /// overwritten (`vkCmdFillBuffer`) in a submission of its own that completes first, so that
    /// each run starts with none of its own data in the device's caches. Together the flush
    /// buffers must be larger than the last-level cache.
    #[allow(clippy::too_many_arguments)]
    pub fn time_flushed(
        &self,
        pipeline: &Pipeline,
        grid: [u32; 3],
        buffers: &[&DeviceBuffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
        flush: &[&DeviceBuffer],
    ) -> Result<Vec<f64>, VulkanError> {
        let _layer = self.inner.call();
        for f in flush {
            self.check_own(f)?;
        }
        if self.timestamps == vk::QueryPool::null() {
            return Err(VulkanError::Device { device: self.device_name(), what: "its compute queue has no timestamps".into() });
        }
        let (push, workgroups) = self.check_launch(pipeline, grid, buffers, scalars)?;
        let job = Dispatch { pipeline, workgroups, push: &push, buffers };
        let _queries = self.queries.lock().unwrap_or_else(|e| e.into_inner());
        let per_run = warm_up(warmup, |n| self.run_commands(|d, cmd| self.record_batch(d, cmd, &job, n as u32, false, &[], 0)))?;
        let period = self.inner.info.timestamp_period_ns as f64;
        let mut samples = Vec::with_capacity(runs);
        // Timed runs back to back, as many per submission as the query pool holds and as fit in
        // about a quarter of a second.
        let per_submit = ((0.25 / per_run.max(1e-7)) as usize).clamp(1, TIMESTAMP_SLOTS as usize / 2);
        while samples.len() < runs {
            let n = (runs - samples.len()).min(per_submit) as u32;
            self.run_commands(|d, cmd| self.record_batch(d, cmd, &job, n, true, flush, samples.len()))?;
            let mut ticks = vec![0u64; 2 * n as usize];
            // SAFETY: every query in 0..2n was written by the submission that just completed.
            unsafe {
                self.inner
                    .device
                    .get_query_pool_results(self.timestamps, 0, &mut ticks, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT)
                    .map_err(|r| self.inner.vk_error("vkGetQueryPoolResults", r))?;
            }
            for pair in ticks.chunks_exact(2) {
                let dt = pair[1].wrapping_sub(pair[0]) & self.timestamp_mask;
                samples.push(dt as f64 * period * 1e-9);
            }
        }
        Ok(samples)
    }

    /// Launches once and returns the compute-shader invocations the device counted (pipeline
    /// statistics), where the device supports them.
    pub fn count_invocations(
        &self,
        pipeline: &Pipeline,
        grid: [u32; 3],
        buffers: &[&DeviceBuffer],
        scalars: &[(u32, Scalar)],
    ) -> Result<u64, VulkanError> {
        let _layer = self.inner.call();
        if self.statistics == vk::QueryPool::null() {
            return Err(VulkanError::Device { device: self.device_name(), what: "it has no pipeline statistics queries".into() });
        }
        let (push, workgroups) = self.check_launch(pipeline, grid, buffers, scalars)?;
        let job = Dispatch { pipeline, workgroups, push: &push, buffers };
        let _queries = self.queries.lock().unwrap_or_else(|e| e.into_inner());
        self.run_commands(|d, cmd| self.record_dispatch(d, cmd, &job, Query::Statistics))?;
        let mut count = [0u64; 1];
        // SAFETY: the query was written by the submission that just completed.
        unsafe {
            self.inner
                .device
                .get_query_pool_results(self.statistics, 0, &mut count, vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT)
                .map_err(|r| self.inner.vk_error("vkGetQueryPoolResults", r))?;
        }
        Ok(count[0])
    }
}

/// One dispatch: what `record_dispatch` binds and runs.
#[derive(Clone, Copy)]
struct Dispatch<'a> {
    pipeline: &'a Pipeline,
    /// The grid, or its folded shape.
    workgroups: [u32; 3],
    push: &'a [u8],
    buffers: &'a [&'a DeviceBuffer],
}

#[derive(Clone, Copy)]
enum Query {
    None,
    Statistics,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(
        m: u32,
        n: u32,
        k: u32,
        ab: vk::ComponentTypeKHR,
        c: vk::ComponentTypeKHR,
        scope: vk::ScopeKHR,
    ) -> vk::CooperativeMatrixPropertiesKHR<'static> {
        vk::CooperativeMatrixPropertiesKHR {
            m_size: m,
            n_size: n,
            k_size: k,
            a_type: ab,
            b_type: ab,
            c_type: c,
            result_type: c,
            scope,
            ..Default::default()
        }
    }

    /// What an NVIDIA driver lists (f16 and int8 shapes, f16 and f32 accumulators, subgroup
    /// and workgroup scope): only subgroup-scope f16 x f16 + f32 configurations become matrix
    /// instructions, each once.
    #[test]
    fn cooperative_matrix_configurations_dot_may_use() {
        use vk::ComponentTypeKHR as C;
        let sg = vk::ScopeKHR::SUBGROUP;
        let listed = [
            props(16, 16, 16, C::FLOAT16, C::FLOAT16, sg),
            props(16, 16, 16, C::FLOAT16, C::FLOAT32, sg),
            props(16, 8, 16, C::FLOAT16, C::FLOAT32, sg),
            props(16, 16, 32, C::SINT8, C::SINT32, sg),
            props(16, 16, 16, C::FLOAT16, C::FLOAT32, sg),
            props(64, 64, 16, C::FLOAT16, C::FLOAT32, vk::ScopeKHR::WORKGROUP),
        ];
        let got = cooperative_matrix_instrs(&listed, true);
        let want = vec![MatrixInstr::coop_16x16x16(DType::F16), MatrixInstr { n: 8, ..MatrixInstr::coop_16x16x16(DType::F16) }];
        assert_eq!(got, want);
        let mut saturating = props(16, 16, 16, C::FLOAT16, C::FLOAT32, sg);
        saturating.saturating_accumulation = vk::TRUE;
        assert!(cooperative_matrix_instrs(&[saturating], true).is_empty());
        // bf16 operands only where the device takes bf16 cooperative matrices; a bf16
        // accumulator is not one `dot` uses.
        let bf16 =
            [props(16, 16, 16, COMPONENT_TYPE_BFLOAT16, C::FLOAT32, sg), props(16, 16, 16, COMPONENT_TYPE_BFLOAT16, COMPONENT_TYPE_BFLOAT16, sg)];
        assert_eq!(cooperative_matrix_instrs(&bf16, true), vec![MatrixInstr::coop_16x16x16(DType::BF16)]);
        assert!(cooperative_matrix_instrs(&bf16, false).is_empty());
        assert_eq!(describe_cooperative_matrix(&bf16[0]), "16x16x16 bfloat16*bfloat16+float32->float32 subgroup");
    }
}
