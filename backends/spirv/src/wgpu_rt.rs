//! Runs [`SpirvKernel`]s through wgpu on Vulkan.
//!
//! The SPIR-V goes to the driver unchanged (`Features::PASSTHROUGH_SHADERS`): naga's SPIR-V
//! reader rejects much of what tilekit emits and would add bounds checks. Passthrough modules carry
//! no reflection, so every pipeline gets an explicit layout built from the kernel's interface:
//! storage buffers in bind group 0 (= descriptor set 0) and scalars as immediates (= push
//! constants, packed by [`SpirvKernel::pack_push_constants`]).
//!
//! Two ways in: [`WgpuRuntime::new`] opens its own device; [`WgpuRuntime::from_device`] wraps a
//! device an application (a graphics engine) already owns, and [`WgpuRuntime::record`] then
//! dispatches into the application's own command encoder, next to its own work.
//!
//! Grids beyond the device's `max_compute_workgroups_per_dimension` (65535 on most Vulkan
//! drivers) launch with kernels compiled with `LowerOptions::fold_grid`: every launch path here
//! (launch, record, timing) then dispatches the folded shape and passes the logical grid after
//! the scalars ([`tilekit_core::gpu::grid`]).
//!
//! wgpu reports validation errors to an uncaptured-error handler that panics by default. Every
//! wgpu call here that can fail runs inside error scopes, so failures come back as
//! [`WgpuError`]; what a caller records into its own encoder after [`WgpuRuntime::record`] is
//! checked up front (buffer count, dtypes, usages, sizes against binding limits, grid limits,
//! push constants) because wgpu only reports pass errors when the caller finishes the encoder.

use std::sync::{mpsc, Arc, Mutex};

use ash::vk;
use tilekit_core::ir::Access;
use tilekit_core::{DType, HostBuffer, Scalar};

use crate::kernel::{max_workgroups_from_env, DispatchError, PushConstantError, SpirvKernel};

/// Keeps in `target` the matrix instructions passthrough modules may use on a wgpu device:
/// cooperative matrices where the device has wgpu's `EXPERIMENTAL_COOPERATIVE_MATRIX`
/// (`cooperative_matrix`), of f16 only, since wgpu enables no `VK_KHR_shader_bfloat16`.
pub fn keep_wgpu_matrix_instrs(target: &mut tilekit_core::gpu::Target, cooperative_matrix: bool) {
    target.matrix.retain(|m| m.kind != tilekit_core::gpu::MatrixKind::CooperativeMatrix || (cooperative_matrix && m.a != DType::BF16));
}

/// Environment variable selecting an adapter: a substring of its name, case-insensitive.
pub const ADAPTER_ENV: &str = "TILEKIT_WGPU_ADAPTER";

/// Features a device must have for any tilekit kernel.
pub const REQUIRED_FEATURES: wgpu::Features = wgpu::Features::PASSTHROUGH_SHADERS.union(wgpu::Features::IMMEDIATES);

/// Features a device must have for naga modules: their scalars are immediates.
pub const NAGA_REQUIRED_FEATURES: wgpu::Features = wgpu::Features::IMMEDIATES;

/// Features [`WgpuRuntime::new`] turns on when the adapter has them.
///
/// `SUBGROUP` is left out on purpose: subgroup operations are core Vulkan 1.1 and need no wgpu
/// feature in passthrough SPIR-V, while enabling it makes wgpu create every pipeline with
/// `ALLOW_VARYING_SUBGROUP_SIZE`, which would break kernels whose layouts assume one subgroup
/// size on devices with a range of sizes.
pub const OPTIONAL_FEATURES: wgpu::Features = wgpu::Features::TIMESTAMP_QUERY
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES)
    .union(wgpu::Features::SHADER_F16)
    .union(wgpu::Features::SHADER_I16)
    .union(wgpu::Features::SHADER_INT64)
    .union(wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS)
    .union(wgpu::Features::SHADER_INT64_ATOMIC_MIN_MAX)
    .union(wgpu::Features::SHADER_FLOAT32_ATOMIC);

/// Everything that can go wrong in this runtime; each variant names what failed and where.
/// Environment variable: `off` builds naga modules without wgpu's runtime checks.
pub const NAGA_CHECKS_ENV: &str = "TILEKIT_NAGA_RUNTIME_CHECKS";

#[derive(Debug, thiserror::Error)]
pub enum WgpuError {
    #[error("no Vulkan adapter found (install a Vulkan driver; lavapipe, Mesa's CPU driver, is in `mesa-vulkan-drivers`)")]
    NoAdapter,
    #[error("no Vulkan adapter name contains `{wanted}` ({ADAPTER_ENV}); adapters: {available}")]
    AdapterNotFound { wanted: String, available: String },
    #[error("adapter `{adapter}` lacks required wgpu features: {missing}")]
    MissingFeatures { adapter: String, missing: String },
    #[error("opening a device on adapter `{adapter}` failed: {message}")]
    RequestDevice { adapter: String, message: String },
    #[error("kernel `{kernel}` needs what device `{adapter}` lacks: {missing}")]
    MissingCapabilities { kernel: String, adapter: String, missing: String },
    #[error("kernel `{kernel}`: {message}")]
    InvalidKernel { kernel: String, message: String },
    #[error("kernel `{kernel}`: {what} is {value}, above the device limit {limit} = {max}")]
    Limit { kernel: String, what: String, value: u64, limit: &'static str, max: u64 },
    #[error(
        "grid {grid:?} of kernel `{kernel}`: {extent} programs along axis {axis} exceed the device limit \
         max_compute_workgroups_per_dimension = {max}; compile it with LowerOptions::fold_grid to launch such grids"
    )]
    GridTooLarge { kernel: String, grid: [u32; 3], axis: usize, extent: u32, max: u32 },
    #[error("grid {grid:?} of kernel `{kernel}` cannot be launched on this device even folded: {source}")]
    GridFold { kernel: String, grid: [u32; 3], source: tilekit_core::gpu::grid::FoldError },
    #[error("kernel `{kernel}` takes {expected} buffers, the launch passed {got}")]
    BufferCount { kernel: String, expected: usize, got: usize },
    #[error("kernel `{kernel}`: buffer {index} (binding {binding}) holds {got}, the kernel reads it as {expected}")]
    BufferDType { kernel: String, index: usize, binding: u32, expected: DType, got: DType },
    #[error("kernel `{kernel}`: buffer {index} (binding {binding}): {message}")]
    BadBuffer { kernel: String, index: usize, binding: u32, message: String },
    #[error("kernel `{kernel}` was loaded on another device than this runtime's")]
    ForeignKernel { kernel: String },
    #[error(transparent)]
    PushConstants(#[from] PushConstantError),
    #[error("{op}: {message}")]
    Transfer { op: String, message: String },
    #[error("{op}: wgpu validation error: {message}")]
    Validation { op: String, message: String },
    #[error("{op}: out of memory: {message}")]
    OutOfMemory { op: String, message: String },
    #[error("{op}: wgpu internal error: {message}")]
    Internal { op: String, message: String },
    #[error("{op}: waiting for the device failed: {message}")]
    Poll { op: String, message: String },
    #[error("timing needs the TIMESTAMP_QUERY feature, which device `{adapter}` lacks")]
    NoTimestamps { adapter: String },
    /// The device is gone (a fault, a reset, a driver crash): this runtime can do nothing more;
    /// a new runtime on the adapter may work.
    #[error("device `{adapter}` was lost ({message}); open a new runtime for the next launch")]
    DeviceLost { adapter: String, message: String },
    /// An error wgpu raised outside the error scopes of this runtime's calls (work a caller
    /// recorded into its own encoder, say), reported at the next call.
    #[error("device `{adapter}` reported an error outside this runtime's calls: {message}")]
    Uncaptured { adapter: String, message: String },
}

impl WgpuError {
    /// Whether the error lost the device: the runtime that returned it refuses further work.
    pub fn device_lost(&self) -> bool {
        matches!(self, WgpuError::DeviceLost { .. })
    }
}

/// What a device reported outside any call: its loss, and errors no error scope caught (wgpu's
/// default for those is to panic).
#[derive(Debug, Default)]
struct Faults {
    lost: Mutex<Option<String>>,
    uncaptured: Mutex<Vec<String>>,
}

impl Faults {
    /// Installs the callbacks that fill a new `Faults` on `device`.
    fn watch(device: &wgpu::Device) -> Arc<Faults> {
        let faults = Arc::new(Faults::default());
        let f = faults.clone();
        device.set_device_lost_callback(move |reason, message| {
            *f.lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{reason:?}: {message}"));
        });
        let f = faults.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            f.uncaptured.lock().unwrap_or_else(|e| e.into_inner()).push(e.to_string());
        }));
        faults
    }
}

/// An adapter [`WgpuRuntime::adapters`] found, and the required features it lacks (if any).
#[derive(Clone, Debug)]
pub struct AdapterEntry {
    pub info: wgpu::AdapterInfo,
    pub missing: Vec<String>,
    /// The adapter has wgpu's `SUBGROUP` feature (subgroup operations in naga modules).
    pub subgroups: bool,
    /// The adapter has wgpu's `EXPERIMENTAL_COOPERATIVE_MATRIX` (which enables
    /// `VK_KHR_cooperative_matrix` and the Vulkan memory model): passthrough modules may use
    /// cooperative matrices on a device tilekit opens.
    pub cooperative_matrices: bool,
}

/// What the open device lets kernels use, matched against [`crate::Requirements`] at load time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub float16: bool,
    pub int8: bool,
    pub int16: bool,
    pub int64: bool,
    pub int64_atomics: bool,
    pub storage8: bool,
    pub storage16: bool,
    pub subgroup_shuffle: bool,
    pub subgroup_arithmetic: bool,
    /// The subgroup size a pipeline gets when it asks for none (Vulkan's `subgroupSize`).
    pub subgroup_size: u32,
    /// Whether the subgroup size may vary between pipelines or dispatches (the device was opened
    /// with wgpu's `SUBGROUP` feature, which makes wgpu allow varying sizes).
    pub subgroup_size_varies: bool,
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
    pub atomic_float_add: bool,
    pub timestamps: bool,
    /// Cooperative matrices (wgpu's `EXPERIMENTAL_COOPERATIVE_MATRIX` on the device).
    pub cooperative_matrix: bool,
}

/// A storage buffer that knows its element type, so launches can check it against the kernel.
#[derive(Debug, Clone)]
pub struct WgpuBuffer {
    pub buffer: wgpu::Buffer,
    pub dtype: DType,
    pub len: usize,
    /// The device it lives on, when known: launches refuse buffers of another device up front
    /// (wgpu panics on resources of another instance).
    pub device: Option<wgpu::Device>,
}

impl std::ops::Deref for WgpuBuffer {
    type Target = wgpu::Buffer;
    fn deref(&self) -> &wgpu::Buffer {
        &self.buffer
    }
}

impl WgpuBuffer {
    /// Attaches an element type to a buffer made elsewhere.
    pub fn from_raw(buffer: wgpu::Buffer, dtype: DType, len: usize) -> WgpuBuffer {
        WgpuBuffer { buffer, dtype, len, device: None }
    }
}

/// A buffer argument of a launch: a typed [`WgpuBuffer`], or a plain `wgpu::Buffer` whose element
/// type is the caller's responsibility.
// `len` is an optional fact about the buffer (`None` for a plain one), not a collection's size.
#[allow(clippy::len_without_is_empty)]
pub trait KernelBuffer {
    fn raw(&self) -> &wgpu::Buffer;
    /// The element type, when known.
    fn dtype(&self) -> Option<DType>;
    /// The device the buffer lives on, when known.
    fn device(&self) -> Option<&wgpu::Device> {
        None
    }
    /// Elements the buffer holds, when known (allocations are rounded up to whole 16-byte
    /// vectors, so the byte size says less).
    fn len(&self) -> Option<usize> {
        None
    }
}

impl KernelBuffer for wgpu::Buffer {
    fn raw(&self) -> &wgpu::Buffer {
        self
    }
    fn dtype(&self) -> Option<DType> {
        None
    }
}

impl KernelBuffer for WgpuBuffer {
    fn raw(&self) -> &wgpu::Buffer {
        &self.buffer
    }
    fn dtype(&self) -> Option<DType> {
        Some(self.dtype)
    }
    fn device(&self) -> Option<&wgpu::Device> {
        self.device.as_ref()
    }
    fn len(&self) -> Option<usize> {
        Some(self.len)
    }
}

/// A kernel loaded on a device: its pipeline and the interface to check launches against.
#[derive(Debug)]
pub struct WgpuKernel {
    pub kernel: SpirvKernel,
    pipeline: wgpu::ComputePipeline,
    bind_group_layout: wgpu::BindGroupLayout,
    device: wgpu::Device,
}

impl WgpuKernel {
    pub fn name(&self) -> &str {
        &self.kernel.name
    }
    pub fn pipeline(&self) -> &wgpu::ComputePipeline {
        &self.pipeline
    }
}

/// A wgpu device and queue that run tilekit kernels.
#[derive(Debug)]
pub struct WgpuRuntime {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    caps: Capabilities,
    /// Workgroups per axis to dispatch at most, below the device's limit (see
    /// [`WgpuRuntime::limit_workgroups_per_dimension`]).
    workgroup_limit: Option<u32>,
    faults: Arc<Faults>,
    transfers: Arc<tilekit_core::TransferCounter>,
}

/// The one instance behind every [`WgpuRuntime::new`]: resources of devices from different wgpu
/// instances live in different registries, and mixing them makes wgpu panic instead of
/// reporting a validation error.
fn shared_instance() -> &'static wgpu::Instance {
    static INSTANCE: std::sync::OnceLock<wgpu::Instance> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(new_instance)
}

fn new_instance() -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::VULKAN;
    // No validation layers unless asked for (WGPU_VALIDATION=1): debug builds would otherwise
    // turn them on, slowing every test down.
    desc.flags = wgpu::InstanceFlags::empty().with_env();
    wgpu::Instance::new(desc)
}

fn feature_names(f: wgpu::Features) -> String {
    f.iter_names().map(|(name, _)| name).collect::<Vec<_>>().join(", ")
}

fn device_type_rank(t: wgpu::DeviceType) -> u32 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// Vulkan properties wgpu does not report, read through `wgpu::hal`.
#[derive(Clone, Copy, Debug, Default)]
struct VulkanQuery {
    int8: bool,
    storage8: bool,
    storage8_needs_extension: bool,
    subgroup_size: u32,
    subgroup_shuffle: bool,
    subgroup_arithmetic: bool,
}

/// # Safety
/// `instance` and `phd` must be live handles of one Vulkan instance.
unsafe fn query_vulkan(
    instance: &wgpu::hal::vulkan::InstanceShared,
    phd: vk::PhysicalDevice,
    supports_extension: impl Fn(&std::ffi::CStr) -> bool,
) -> VulkanQuery {
    let raw = instance.raw_instance();
    let api = unsafe { raw.get_physical_device_properties(phd) }.api_version;
    // The *2 queries are Vulkan 1.1; wgpu itself needs 1.1 for everything tilekit uses.
    if instance.instance_api_version() < vk::API_VERSION_1_1 || api < vk::API_VERSION_1_1 {
        return VulkanQuery::default();
    }
    let has_f16i8 = api >= vk::API_VERSION_1_2 || supports_extension(ash::khr::shader_float16_int8::NAME);
    let has_8bit = api >= vk::API_VERSION_1_2 || supports_extension(ash::khr::_8bit_storage::NAME);
    let mut f16i8 = vk::PhysicalDeviceShaderFloat16Int8Features::default();
    let mut bit8 = vk::PhysicalDevice8BitStorageFeatures::default();
    let mut features = vk::PhysicalDeviceFeatures2::default();
    if has_f16i8 {
        features = features.push_next(&mut f16i8);
    }
    if has_8bit {
        features = features.push_next(&mut bit8);
    }
    unsafe { raw.get_physical_device_features2(phd, &mut features) };
    let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
    let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
    unsafe { raw.get_physical_device_properties2(phd, &mut props) };
    let compute = subgroup.supported_stages.contains(vk::ShaderStageFlags::COMPUTE);
    let ops = subgroup.supported_operations;
    VulkanQuery {
        int8: has_f16i8 && f16i8.shader_int8 == vk::TRUE,
        storage8: has_8bit && bit8.storage_buffer8_bit_access == vk::TRUE,
        storage8_needs_extension: api < vk::API_VERSION_1_2,
        subgroup_size: subgroup.subgroup_size,
        subgroup_shuffle: compute && ops.contains(vk::SubgroupFeatureFlags::BASIC | vk::SubgroupFeatureFlags::SHUFFLE),
        subgroup_arithmetic: compute && ops.contains(vk::SubgroupFeatureFlags::BASIC | vk::SubgroupFeatureFlags::ARITHMETIC),
    }
}

fn capabilities(features: wgpu::Features, info: &wgpu::AdapterInfo, vq: &VulkanQuery, storage8: bool) -> Capabilities {
    use wgpu::Features as F;
    Capabilities {
        float16: features.contains(F::SHADER_F16),
        // wgpu turns shaderInt8 on whenever the device has it.
        int8: vq.int8,
        int16: features.contains(F::SHADER_I16),
        int64: features.contains(F::SHADER_INT64),
        int64_atomics: features.intersects(F::SHADER_INT64_ATOMIC_ALL_OPS | F::SHADER_INT64_ATOMIC_MIN_MAX),
        storage8,
        storage16: features.intersects(F::SHADER_F16 | F::SHADER_I16),
        subgroup_shuffle: vq.subgroup_shuffle,
        subgroup_arithmetic: vq.subgroup_arithmetic,
        subgroup_size: vq.subgroup_size,
        subgroup_size_varies: features.contains(F::SUBGROUP),
        subgroup_min_size: info.subgroup_min_size,
        subgroup_max_size: info.subgroup_max_size,
        atomic_float_add: features.contains(F::SHADER_FLOAT32_ATOMIC),
        timestamps: features.contains(F::TIMESTAMP_QUERY),
        cooperative_matrix: features.contains(F::EXPERIMENTAL_COOPERATIVE_MATRIX),
    }
}

/// Runs `f` inside validation, out-of-memory and internal error scopes and turns what they
/// caught into a [`WgpuError`] naming `op`.
fn scoped<T>(device: &wgpu::Device, op: impl Fn() -> String, f: impl FnOnce() -> T) -> Result<T, WgpuError> {
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let out = f();
    let errors = [pollster::block_on(validation.pop()), pollster::block_on(oom.pop()), pollster::block_on(internal.pop())];
    match errors.into_iter().flatten().next() {
        None => Ok(out),
        Some(wgpu::Error::Validation { description, .. }) => Err(WgpuError::Validation { op: op(), message: description }),
        Some(wgpu::Error::OutOfMemory { source }) => Err(WgpuError::OutOfMemory { op: op(), message: source.to_string() }),
        Some(wgpu::Error::Internal { description, .. }) => Err(WgpuError::Internal { op: op(), message: description }),
    }
}

fn poll_wait(device: &wgpu::Device, index: Option<wgpu::SubmissionIndex>, op: &str) -> Result<(), WgpuError> {
    device
        .poll(wgpu::PollType::Wait { submission_index: index, timeout: None })
        .map(|_| ())
        .map_err(|e| WgpuError::Poll { op: op.to_string(), message: e.to_string() })
}

impl WgpuRuntime {
    /// Every Vulkan adapter, with the required features each lacks.
    pub fn adapters() -> Vec<AdapterEntry> {
        pollster::block_on(shared_instance().enumerate_adapters(wgpu::Backends::VULKAN))
            .into_iter()
            .map(|a| AdapterEntry {
                info: a.get_info(),
                missing: REQUIRED_FEATURES.difference(a.features()).iter_names().map(|(n, _)| n.to_string()).collect(),
                subgroups: a.features().contains(wgpu::Features::SUBGROUP),
                cooperative_matrices: a.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX),
            })
            .collect()
    }

    /// Opens a device on the adapter named by `TILEKIT_WGPU_ADAPTER` (a substring of its name),
    /// or else on the best adapter that has the required features (discrete before integrated
    /// before virtual before CPU).
    pub fn new() -> Result<WgpuRuntime, WgpuError> {
        let wanted = std::env::var(ADAPTER_ENV).ok().filter(|s| !s.trim().is_empty());
        WgpuRuntime::with_adapter(wanted.as_deref())
    }

    /// As [`WgpuRuntime::new`], with the adapter chosen by `name` (a substring) instead of the
    /// environment.
    pub fn with_adapter(name: Option<&str>) -> Result<WgpuRuntime, WgpuError> {
        WgpuRuntime::open_adapter(name, wgpu::Features::empty())
    }

    /// Like [`WgpuRuntime::with_adapter`], for naga modules: with wgpu's `SUBGROUP` feature
    /// where the adapter has it, which naga modules need for subgroup operations (passthrough
    /// SPIR-V does not, and the feature lets the driver vary a pipeline's subgroup size, see
    /// [`OPTIONAL_FEATURES`]; the naga target shuffles only on devices of one size).
    pub fn for_naga(name: Option<&str>) -> Result<WgpuRuntime, WgpuError> {
        WgpuRuntime::open_adapter(name, wgpu::Features::SUBGROUP)
    }

    fn open_adapter(name: Option<&str>, extra: wgpu::Features) -> Result<WgpuRuntime, WgpuError> {
        let adapters = pollster::block_on(shared_instance().enumerate_adapters(wgpu::Backends::VULKAN));
        if adapters.is_empty() {
            return Err(WgpuError::NoAdapter);
        }
        let adapter = match name {
            Some(wanted) => {
                let lower = wanted.to_lowercase();
                adapters.iter().find(|a| a.get_info().name.to_lowercase().contains(&lower)).ok_or_else(|| WgpuError::AdapterNotFound {
                    wanted: wanted.to_string(),
                    available: adapters.iter().map(|a| format!("`{}`", a.get_info().name)).collect::<Vec<_>>().join(", "),
                })?
            }
            None => adapters
                .iter()
                .filter(|a| a.features().contains(REQUIRED_FEATURES))
                .min_by_key(|a| device_type_rank(a.get_info().device_type))
                .unwrap_or(&adapters[0]),
        };
        let info = adapter.get_info();
        let missing = REQUIRED_FEATURES.difference(adapter.features());
        if !missing.is_empty() {
            return Err(WgpuError::MissingFeatures { adapter: info.name.clone(), missing: feature_names(missing) });
        }
        // Passthrough modules may use cooperative matrices: requested where the adapter has them
        // (naga modules never do).
        let coop = if extra.contains(wgpu::Features::SUBGROUP) { wgpu::Features::empty() } else { wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX };
        let features = REQUIRED_FEATURES | ((OPTIONAL_FEATURES | extra | coop) & adapter.features());
        let limits = adapter.limits();
        let (device, queue, vq, storage8) = open_device(adapter, features, &limits)?;
        let caps = capabilities(device.features(), &info, &vq, storage8);
        let faults = Faults::watch(&device);
        Ok(WgpuRuntime { device, queue, info, caps, workgroup_limit: max_workgroups_from_env(), faults, transfers: Arc::default() })
    }

    /// Wraps a device the caller owns. It must have been opened with `PASSTHROUGH_SHADERS` and
    /// `IMMEDIATES`; kernels that need more (f16, 64-bit integers, ...) are refused at
    /// [`WgpuRuntime::load`] when the device lacks it. wgpu never enables 8-bit storage buffers;
    /// a caller that did so through `wgpu::hal` says so with [`WgpuRuntime::assume_storage8`].
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue, adapter_info: wgpu::AdapterInfo) -> Result<WgpuRuntime, WgpuError> {
        WgpuRuntime::from_device_needing(device, queue, adapter_info, REQUIRED_FEATURES)
    }

    /// Wraps a device the caller owns, for naga modules only ([`WgpuRuntime::load_naga`]):
    /// any wgpu backend, opened with `IMMEDIATES` (passthrough is not needed; `SUBGROUP` where
    /// the caller wants lane shuffles). [`WgpuRuntime::load`] on it fails where the device lacks
    /// `PASSTHROUGH_SHADERS`.
    pub fn from_device_for_naga(device: wgpu::Device, queue: wgpu::Queue, adapter_info: wgpu::AdapterInfo) -> Result<WgpuRuntime, WgpuError> {
        WgpuRuntime::from_device_needing(device, queue, adapter_info, NAGA_REQUIRED_FEATURES)
    }

    fn from_device_needing(
        device: wgpu::Device,
        queue: wgpu::Queue,
        adapter_info: wgpu::AdapterInfo,
        required: wgpu::Features,
    ) -> Result<WgpuRuntime, WgpuError> {
        let missing = required.difference(device.features());
        if !missing.is_empty() {
            return Err(WgpuError::MissingFeatures { adapter: adapter_info.name.clone(), missing: feature_names(missing) });
        }
        // SAFETY: the hal device lives as long as `device`; only queries are made through it.
        let vq = unsafe {
            match device.as_hal::<wgpu::hal::api::Vulkan>() {
                Some(hal) => {
                    let exts = hal.enabled_device_extensions().to_vec();
                    query_vulkan(hal.shared_instance(), hal.raw_physical_device(), |e| exts.contains(&e))
                }
                None => VulkanQuery::default(),
            }
        };
        let caps = capabilities(device.features(), &adapter_info, &vq, false);
        // The caller's device keeps the caller's own loss and error callbacks.
        Ok(WgpuRuntime { device, queue, info: adapter_info, caps, workgroup_limit: None, faults: Arc::default(), transfers: Arc::default() })
    }

    /// Declares that the caller's device (see [`WgpuRuntime::from_device`]) was opened with
    /// `storageBuffer8BitAccess`.
    pub fn assume_storage8(mut self) -> WgpuRuntime {
        self.caps.storage8 = true;
        self
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }
    /// Host <-> device copies made through this runtime so far (a partial last word read back to
    /// complete an upload counts as a download).
    pub fn transfers(&self) -> tilekit_core::Transfers {
        self.transfers.get()
    }

    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    pub fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }

    /// Dispatches at most `n` workgroups per grid axis, fewer than the device allows (at least
    /// 1): grids beyond it then need kernels compiled with `LowerOptions::fold_grid`, which this
    /// runtime dispatches folded. Tests use it to reach the folded path with small grids;
    /// [`WgpuRuntime::new`] takes it from `TILEKIT_MAX_WORKGROUPS_PER_DIM`.
    pub fn limit_workgroups_per_dimension(mut self, n: u32) -> WgpuRuntime {
        self.workgroup_limit = Some(n.max(1));
        self
    }

    /// The most workgroups this runtime dispatches along each axis: the device's
    /// `max_compute_workgroups_per_dimension`, or less when limited.
    pub fn max_workgroups(&self) -> [u32; 3] {
        let max = self.device.limits().max_compute_workgroups_per_dimension;
        [self.workgroup_limit.map_or(max, |l| l.min(max)); 3]
    }

    /// Whether a launch over `grid` needs a kernel that folds its grid.
    pub fn needs_fold(&self, grid: [u32; 3]) -> bool {
        !tilekit_core::gpu::grid::fits(grid, self.max_workgroups())
    }

    /// Whether the device was lost: the runtime refuses further work and a new one must be
    /// opened.
    pub fn is_lost(&self) -> bool {
        self.faults.lost.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Refuses work on a lost device, and reports errors raised outside this runtime's calls.
    fn usable(&self) -> Result<(), WgpuError> {
        if let Some(message) = self.faults.lost.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Err(WgpuError::DeviceLost { adapter: self.info.name.clone(), message });
        }
        let uncaptured = std::mem::take(&mut *self.faults.uncaptured.lock().unwrap_or_else(|e| e.into_inner()));
        if !uncaptured.is_empty() {
            return Err(WgpuError::Uncaptured { adapter: self.info.name.clone(), message: uncaptured.join("; ") });
        }
        Ok(())
    }

    /// Waits for submission `index` (or everything), then reports a loss the wait revealed.
    fn wait(&self, index: Option<wgpu::SubmissionIndex>, op: &str) -> Result<(), WgpuError> {
        let waited = poll_wait(&self.device, index, op);
        self.usable()?;
        waited
    }

    /// Checks `kernel` against the device and builds its pipeline from its SPIR-V, handed to
    /// the driver unchanged.
    pub fn load(&self, kernel: &SpirvKernel) -> Result<WgpuKernel, WgpuError> {
        self.usable()?;
        self.check_kernel(kernel)?;
        self.build(kernel, None)
    }

    /// Builds the pipeline of a naga module (tilekit-naga's) whose launch interface is
    /// `interface` (its `words` are not read). wgpu validates the module against the device's
    /// features and writes it for its backend itself, with its bounds-check policy: the path
    /// every wgpu backend has, Metal, DX12 and GL included.
    ///
    /// `TILEKIT_NAGA_RUNTIME_CHECKS=off` builds it without wgpu's runtime checks (index
    /// clamping, loop bounding), as passthrough SPIR-V runs: for measuring what they cost. An
    /// offset no mask guards then reads or writes outside its buffer as on the passthrough path.
    pub fn load_naga(&self, interface: &SpirvKernel, module: &wgpu::naga::Module) -> Result<WgpuKernel, WgpuError> {
        self.usable()?;
        self.check_interface(interface, None)?;
        let checked = match std::env::var(NAGA_CHECKS_ENV).as_deref() {
            Err(_) | Ok("on") => true,
            Ok("off") => false,
            Ok(other) => {
                return Err(WgpuError::InvalidKernel {
                    kernel: interface.name.clone(),
                    message: format!("{NAGA_CHECKS_ENV} is `{other}`: expected `on` or `off`"),
                })
            }
        };
        self.build(interface, Some((module, checked)))
    }

    fn build(&self, kernel: &SpirvKernel, naga: Option<(&wgpu::naga::Module, bool)>) -> Result<WgpuKernel, WgpuError> {
        let name = kernel.name.clone();
        let device = &self.device;
        let entries: Vec<wgpu::BindGroupLayoutEntry> = kernel
            .bindings
            .iter()
            .map(|b| wgpu::BindGroupLayoutEntry {
                binding: b.binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: b.access == Access::Read },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let (module, bind_group_layout, pipeline) = scoped(
            device,
            || format!("building the pipeline of kernel `{name}`"),
            || {
                let module = match naga {
                    Some((m, checked)) => {
                        let desc =
                            wgpu::ShaderModuleDescriptor { label: Some(&name), source: wgpu::ShaderSource::Naga(std::borrow::Cow::Owned(m.clone())) };
                        if checked {
                            device.create_shader_module(desc)
                        } else {
                            // SAFETY: asked for by name (NAGA_CHECKS_ENV); tilekit's lowering
                            // masks every access a program masks, and what it does not guard is
                            // the same on the passthrough path, which has no runtime checks.
                            unsafe { device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
                        }
                    }
                    // SAFETY: passthrough SPIR-V is not validated by wgpu; the words come from
                    // tilekit's emitter (or a test), were checked for the SPIR-V magic number,
                    // and their interface matches the explicit layout built from the same kernel.
                    None => unsafe {
                        device.create_shader_module_passthrough(wgpu::ShaderModuleDescriptorPassthrough {
                            label: Some(&name),
                            entry_points: vec![wgpu::PassthroughShaderEntryPoint {
                                name: kernel.entry_point.clone().into(),
                                workgroup_size: (kernel.threads, 1, 1),
                            }]
                            .into(),
                            spirv: Some(kernel.words.as_slice().into()),
                            ..Default::default()
                        })
                    },
                };
                let bgl = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(&name), entries: &entries });
                let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some(&name),
                    bind_group_layouts: &[Some(&bgl)],
                    immediate_size: kernel.push_constant_size,
                });
                let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&name),
                    layout: Some(&layout),
                    module: &module,
                    entry_point: Some(&kernel.entry_point),
                    compilation_options: Default::default(),
                    cache: None,
                });
                (module, bgl, pipeline)
            },
        )?;
        drop(module);
        // wgpu takes a pipeline the driver refuses for a driver fault: no error scope sees it,
        // the device is lost instead.
        if let Some(reason) = self.faults.lost.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Err(WgpuError::DeviceLost {
                adapter: self.info.name.clone(),
                message: format!("while building the pipeline of kernel `{name}`: {reason}"),
            });
        }
        Ok(WgpuKernel { kernel: kernel.clone(), pipeline, bind_group_layout, device: self.device.clone() })
    }

    fn check_kernel(&self, k: &SpirvKernel) -> Result<(), WgpuError> {
        // A caller's device wrapped for naga modules only.
        let missing = REQUIRED_FEATURES.difference(self.device.features());
        if !missing.is_empty() {
            return Err(WgpuError::MissingFeatures { adapter: self.info.name.clone(), missing: feature_names(missing) });
        }
        if k.words.len() < 5 || k.words[0] != 0x0723_0203 {
            let message = format!("its {} words are not a SPIR-V module (no magic number 0x07230203)", k.words.len());
            return Err(WgpuError::InvalidKernel { kernel: k.name.clone(), message });
        }
        self.check_interface(k, Some(k.words[1]))
    }

    /// Checks a kernel's interface and requirements against the device; `spirv_version` is the
    /// module's for passthrough SPIR-V, `None` for a naga module.
    fn check_interface(&self, k: &SpirvKernel, spirv_version: Option<u32>) -> Result<(), WgpuError> {
        let invalid = |message: String| WgpuError::InvalidKernel { kernel: k.name.clone(), message };
        if k.entry_point.is_empty() {
            return Err(invalid("the entry point has no name".into()));
        }
        if k.threads == 0 {
            return Err(invalid("0 threads per program".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for b in &k.bindings {
            if !seen.insert(b.binding) {
                return Err(invalid(format!("binding {} is declared twice", b.binding)));
            }
        }
        if k.push_constant_size % 4 != 0 {
            return Err(invalid(format!("push-constant block of {} bytes is not a multiple of 4", k.push_constant_size)));
        }
        let limits = self.device.limits();
        let limit = |what: &str, value: u64, limit: &'static str, max: u64| {
            if value > max {
                Err(WgpuError::Limit { kernel: k.name.clone(), what: what.to_string(), value, limit, max })
            } else {
                Ok(())
            }
        };
        limit("threads per program", k.threads as u64, "max_compute_workgroup_size_x", limits.max_compute_workgroup_size_x as u64)?;
        limit("threads per program", k.threads as u64, "max_compute_invocations_per_workgroup", limits.max_compute_invocations_per_workgroup as u64)?;
        limit(
            "the number of buffers",
            k.bindings.len() as u64,
            "max_storage_buffers_per_shader_stage",
            limits.max_storage_buffers_per_shader_stage as u64,
        )?;
        if let Some(top) = k.bindings.iter().map(|b| b.binding).max() {
            limit("the highest binding number", top as u64 + 1, "max_bindings_per_bind_group", limits.max_bindings_per_bind_group as u64)?;
        }
        limit("the push-constant block (bytes)", k.push_constant_size as u64, "max_immediate_size", limits.max_immediate_size as u64)?;
        limit(
            "shared memory (bytes)",
            k.requirements.shared_bytes as u64,
            "max_compute_workgroup_storage_size",
            limits.max_compute_workgroup_storage_size as u64,
        )?;

        let r = &k.requirements;
        let c = &self.caps;
        let mut missing = Vec::new();
        let mut need = |wanted: bool, have: bool, what: &str| {
            if wanted && !have {
                missing.push(what.to_string());
            }
        };
        need(r.float16, c.float16, "shaderFloat16 (wgpu SHADER_F16)");
        need(r.int8, c.int8, "shaderInt8");
        need(r.int16, c.int16, "shaderInt16 (wgpu SHADER_I16)");
        need(r.int64, c.int64, "shaderInt64 (wgpu SHADER_INT64)");
        need(r.int64_atomics, c.int64_atomics, "shaderBufferInt64Atomics (wgpu SHADER_INT64_ATOMIC_*)");
        need(r.storage8, c.storage8, "storageBuffer8BitAccess");
        need(r.storage16, c.storage16, "storageBuffer16BitAccess (wgpu SHADER_F16 or SHADER_I16)");
        need(r.subgroup_shuffle, c.subgroup_shuffle, "subgroup shuffles in compute shaders");
        need(r.subgroup_arithmetic, c.subgroup_arithmetic, "subgroup arithmetic in compute shaders");
        need(r.atomic_float_add, c.atomic_float_add, "shaderBufferFloat32AtomicAdd (wgpu SHADER_FLOAT32_ATOMIC)");
        need(r.cooperative_matrix, c.cooperative_matrix, "cooperative matrices (wgpu EXPERIMENTAL_COOPERATIVE_MATRIX: VK_KHR_cooperative_matrix)");
        // wgpu enables no VK_KHR_shader_bfloat16 on the devices it opens.
        need(r.cooperative_matrix_bf16, false, "bf16 cooperative matrices (VK_KHR_shader_bfloat16, which wgpu does not enable)");
        // The subgroup size matters only to kernels that talk across lanes. SPIR-V 1.6 modules
        // may get any size in the device's range (Vulkan 1.3), and so may every module once
        // wgpu's SUBGROUP feature is on.
        if r.subgroup_size != 0 && (r.subgroup_shuffle || r.subgroup_arithmetic) {
            // wgpu writes a naga module in a SPIR-V version of its choosing: assume it varies.
            let varies = c.subgroup_size_varies || spirv_version.map_or(true, |v| v >= 0x0001_0600);
            let fixed = if varies { (c.subgroup_min_size == c.subgroup_max_size).then_some(c.subgroup_min_size) } else { Some(c.subgroup_size) };
            if fixed != Some(r.subgroup_size) {
                missing.push(format!(
                    "subgroups of exactly {} lanes (the device gives {})",
                    r.subgroup_size,
                    match fixed {
                        Some(s) => s.to_string(),
                        None => format!("{} to {}", c.subgroup_min_size, c.subgroup_max_size),
                    }
                ));
            }
        }
        if !missing.is_empty() {
            return Err(WgpuError::MissingCapabilities { kernel: k.name.clone(), adapter: self.info.name.clone(), missing: missing.join(", ") });
        }
        Ok(())
    }

    /// A storage buffer of `len` elements (at least 4 bytes, rounded up to a multiple of 4 so
    /// that it can be copied whole).
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<WgpuBuffer, WgpuError> {
        self.usable()?;
        let bytes = (len as u64).saturating_mul(dtype.size_bytes() as u64);
        // Whole 16-byte vectors: a masked-off vector load reads the first 16 bytes of a buffer
        // (a caller's own buffers rely on wgpu's bounds-checked access instead).
        let size = bytes.max(16).div_ceil(16).saturating_mul(16);
        let max = self.device.limits().max_buffer_size;
        if size > max {
            return Err(WgpuError::Transfer {
                op: format!("allocating {len} x {dtype}"),
                message: format!("{size} bytes exceed the device limit max_buffer_size = {max}"),
            });
        }
        let buffer = scoped(
            &self.device,
            || format!("allocating {len} x {dtype}"),
            || {
                self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("tilekit buffer"),
                    size,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            },
        )?;
        Ok(WgpuBuffer { buffer, dtype, len, device: Some(self.device.clone()) })
    }

    /// [`WgpuRuntime::alloc`] and [`WgpuRuntime::upload`] in one.
    pub fn alloc_from(&self, host: &HostBuffer) -> Result<WgpuBuffer, WgpuError> {
        let b = self.alloc(host.dtype(), host.len())?;
        self.upload(&b, host)?;
        Ok(b)
    }

    /// Writes `host` to the start of `buffer`. The write happens before the next submission on
    /// this runtime's queue (whoever submits it).
    pub fn upload(&self, buffer: &dyn KernelBuffer, host: &HostBuffer) -> Result<(), WgpuError> {
        self.usable()?;
        let op = || format!("uploading {} x {}", host.len(), host.dtype());
        if buffer.device().is_some_and(|d| *d != self.device) {
            return Err(WgpuError::Transfer { op: op(), message: "the buffer belongs to another device".into() });
        }
        if let Some(d) = buffer.dtype() {
            if d != host.dtype() {
                return Err(WgpuError::Transfer { op: op(), message: format!("the device buffer holds {d}") });
            }
        }
        let raw = buffer.raw();
        if !raw.usage().contains(wgpu::BufferUsages::COPY_DST) {
            return Err(WgpuError::Transfer { op: op(), message: "the buffer lacks COPY_DST usage".into() });
        }
        let mut bytes = host.to_bytes();
        if bytes.is_empty() {
            return Ok(());
        }
        if let Some(n) = buffer.len().filter(|&n| host.len() > n) {
            return Err(WgpuError::Transfer { op: op(), message: format!("the device buffer holds {n} elements") });
        }
        if bytes.len() as u64 > raw.size() {
            return Err(WgpuError::Transfer { op: op(), message: format!("{} bytes do not fit the {}-byte buffer", bytes.len(), raw.size()) });
        }
        // Copies move whole 4-byte words; the bytes that complete the last word keep the
        // buffer's contents (they are padding after alloc, but may be live data otherwise).
        let tail = bytes.len() % 4;
        if tail != 0 {
            let word_start = (bytes.len() - tail) as u64;
            if word_start + 4 > raw.size() {
                return Err(WgpuError::Transfer {
                    op: op(),
                    message: format!("the {}-byte buffer is not a whole number of 4-byte words", raw.size()),
                });
            }
            let old = self.read_bytes(raw, word_start, 4, &op())?;
            bytes.extend_from_slice(&old[tail..]);
        }
        self.transfers.upload(bytes.len());
        scoped(&self.device, op, || self.queue.write_buffer(raw, 0, &bytes))
    }

    /// Reads the first `len` elements of `buffer` as `dtype`.
    pub fn download(&self, buffer: &dyn KernelBuffer, dtype: DType, len: usize) -> Result<HostBuffer, WgpuError> {
        self.usable()?;
        let op = format!("downloading {len} x {dtype}");
        if buffer.device().is_some_and(|d| *d != self.device) {
            return Err(WgpuError::Transfer { op, message: "the buffer belongs to another device".into() });
        }
        if let Some(d) = buffer.dtype() {
            if d != dtype {
                return Err(WgpuError::Transfer { op, message: format!("the device buffer holds {d}") });
            }
        }
        if let Some(n) = buffer.len().filter(|&n| len > n) {
            return Err(WgpuError::Transfer { op, message: format!("the buffer holds {n} elements") });
        }
        let bytes = len as u64 * dtype.size_bytes() as u64;
        let raw = buffer.raw();
        if bytes > raw.size() {
            return Err(WgpuError::Transfer { op, message: format!("the buffer holds only {} bytes, {bytes} asked for", raw.size()) });
        }
        let words = bytes.div_ceil(4) * 4;
        if words > raw.size() {
            return Err(WgpuError::Transfer { op, message: format!("the {}-byte buffer is not a whole number of 4-byte words", raw.size()) });
        }
        let mut data = if words == 0 { Vec::new() } else { self.read_bytes(raw, 0, words, &op)? };
        data.truncate(bytes as usize);
        HostBuffer::from_bytes(dtype, &data).map_err(|e| WgpuError::Transfer { op, message: e.to_string() })
    }

    /// Copies `size` bytes (a multiple of 4) at `offset` of `buffer` to the host.
    fn read_bytes(&self, buffer: &wgpu::Buffer, offset: u64, size: u64, op: &str) -> Result<Vec<u8>, WgpuError> {
        if !buffer.usage().contains(wgpu::BufferUsages::COPY_SRC) {
            return Err(WgpuError::Transfer { op: op.to_string(), message: "the buffer lacks COPY_SRC usage".into() });
        }
        self.transfers.download(size as usize);
        let staging = scoped(
            &self.device,
            || format!("{op}: staging buffer"),
            || {
                self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("tilekit staging"),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            },
        )?;
        let index = scoped(
            &self.device,
            || format!("{op}: copy"),
            || {
                let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(op) });
                enc.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
                self.queue.submit([enc.finish()])
            },
        )?;
        self.map_read(&staging, Some(index), op)
    }

    fn map_read(&self, staging: &wgpu::Buffer, index: Option<wgpu::SubmissionIndex>, op: &str) -> Result<Vec<u8>, WgpuError> {
        let (tx, rx) = mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.wait(index, op)?;
        // The callback runs inside poll once the copy is done; a map error arrives the same way.
        let mapped = match rx.try_recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => {
                self.wait(None, op)?;
                match rx.recv_timeout(std::time::Duration::from_secs(60)) {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(e) => Err(format!("the mapping never completed ({e})")),
                }
            }
        };
        mapped.map_err(|message| WgpuError::Transfer { op: op.to_string(), message })?;
        let out =
            staging.get_mapped_range(..).map(|view| view.to_vec()).map_err(|e| WgpuError::Transfer { op: op.to_string(), message: e.to_string() })?;
        staging.unmap();
        Ok(out)
    }

    /// Checks a launch against the kernel's interface and the device limits, and returns the
    /// packed push constants and the workgroups to dispatch (the grid, or its folded shape).
    fn check_launch(
        &self,
        kernel: &WgpuKernel,
        grid: [u32; 3],
        buffers: &[&dyn KernelBuffer],
        scalars: &[(u32, Scalar)],
    ) -> Result<(Vec<u8>, [u32; 3]), WgpuError> {
        self.usable()?;
        let k = &kernel.kernel;
        if kernel.device != self.device {
            return Err(WgpuError::ForeignKernel { kernel: k.name.clone() });
        }
        if buffers.len() != k.bindings.len() {
            return Err(WgpuError::BufferCount { kernel: k.name.clone(), expected: k.bindings.len(), got: buffers.len() });
        }
        let limits = self.device.limits();
        let workgroups = k.dispatch_shape(grid, self.max_workgroups()).map_err(|e| match e {
            DispatchError::Unfolded { grid, axis, extent, max } => WgpuError::GridTooLarge { kernel: k.name.clone(), grid, axis, extent, max },
            DispatchError::Fold(source) => WgpuError::GridFold { kernel: k.name.clone(), grid, source },
        })?;
        for (index, (b, binding)) in buffers.iter().zip(&k.bindings).enumerate() {
            let bad = |message: String| WgpuError::BadBuffer { kernel: k.name.clone(), index, binding: binding.binding, message };
            if let Some(d) = b.dtype() {
                if d != binding.dtype {
                    return Err(WgpuError::BufferDType { kernel: k.name.clone(), index, binding: binding.binding, expected: binding.dtype, got: d });
                }
            }
            if b.device().is_some_and(|d| *d != self.device) {
                return Err(bad("the buffer belongs to another device".into()));
            }
            let raw = b.raw();
            if !raw.usage().contains(wgpu::BufferUsages::STORAGE) {
                return Err(bad("the buffer lacks STORAGE usage".into()));
            }
            if raw.size() == 0 || raw.size() % 4 != 0 {
                return Err(bad(format!("a storage binding must be a non-zero multiple of 4 bytes, the buffer has {}", raw.size())));
            }
            let multiple = u64::from(binding.size_multiple.max(4));
            if raw.size() % multiple != 0 {
                return Err(bad(format!(
                    "the module reads this binding as {multiple}-byte vectors, so its buffer must be a multiple of {multiple} bytes; it has {} \
                     (tilekit's own buffers are)",
                    raw.size()
                )));
            }
            if raw.size() > limits.max_storage_buffer_binding_size {
                return Err(bad(format!(
                    "{} bytes exceed the device limit max_storage_buffer_binding_size = {}",
                    raw.size(),
                    limits.max_storage_buffer_binding_size
                )));
            }
            // One dispatch may not use a buffer both read-only and writable (wgpu usage rules).
            for (j, (other, ob)) in buffers.iter().zip(&k.bindings).enumerate().take(index) {
                if other.raw() == raw && ((binding.access == Access::Read) != (ob.access == Access::Read)) {
                    return Err(bad(format!(
                        "it is also buffer {j} (binding {}); one dispatch cannot bind a buffer both read-only and writable",
                        ob.binding
                    )));
                }
            }
        }
        Ok((k.pack_launch(scalars, grid)?, workgroups))
    }

    /// Records one dispatch of `kernel` over `grid` programs into `encoder`, which the caller
    /// finishes and submits (with its own work around it); a kernel that folds its grid is
    /// dispatched folded. Buffers follow `kernel.bindings` in order; their sizes are the
    /// caller's responsibility.
    pub fn record(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        kernel: &WgpuKernel,
        grid: [u32; 3],
        buffers: &[&dyn KernelBuffer],
        scalars: &[(u32, Scalar)],
    ) -> Result<(), WgpuError> {
        let (immediates, workgroups) = self.check_launch(kernel, grid, buffers, scalars)?;
        let bind_group = self.bind_group(kernel, buffers)?;
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(&kernel.kernel.name), timestamp_writes: None });
        Self::dispatch(&mut pass, kernel, &bind_group, &immediates, workgroups);
        Ok(())
    }

    fn bind_group(&self, kernel: &WgpuKernel, buffers: &[&dyn KernelBuffer]) -> Result<wgpu::BindGroup, WgpuError> {
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .zip(&kernel.kernel.bindings)
            .map(|(b, binding)| wgpu::BindGroupEntry { binding: binding.binding, resource: b.raw().as_entire_binding() })
            .collect();
        scoped(
            &self.device,
            || format!("binding the buffers of kernel `{}`", kernel.kernel.name),
            || {
                self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(&kernel.kernel.name),
                    layout: &kernel.bind_group_layout,
                    entries: &entries,
                })
            },
        )
    }

    fn dispatch(pass: &mut wgpu::ComputePass<'_>, kernel: &WgpuKernel, bind_group: &wgpu::BindGroup, immediates: &[u8], workgroups: [u32; 3]) {
        pass.set_pipeline(&kernel.pipeline);
        pass.set_bind_group(0, bind_group, &[]);
        if !immediates.is_empty() {
            pass.set_immediates(0, immediates);
        }
        pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
    }

    /// Runs `kernel` once and waits for it.
    pub fn launch(&self, kernel: &WgpuKernel, grid: [u32; 3], buffers: &[&dyn KernelBuffer], scalars: &[(u32, Scalar)]) -> Result<(), WgpuError> {
        let (immediates, workgroups) = self.check_launch(kernel, grid, buffers, scalars)?;
        let bind_group = self.bind_group(kernel, buffers)?;
        let name = &kernel.kernel.name;
        let index = scoped(
            &self.device,
            || format!("launching kernel `{name}` over {grid:?}"),
            || {
                let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(name) });
                {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(name), timestamp_writes: None });
                    Self::dispatch(&mut pass, kernel, &bind_group, &immediates, workgroups);
                }
                self.queue.submit([enc.finish()])
            },
        )?;
        self.wait(Some(index), &format!("launching kernel `{name}`"))
    }

    /// Device time of `runs` dispatches of `kernel` in seconds, one sample per dispatch, taken
    /// by timestamps at the start and end of each dispatch's compute pass, after `warmup`
    /// untimed dispatches.
    pub fn time(
        &self,
        kernel: &WgpuKernel,
        grid: [u32; 3],
        buffers: &[&dyn KernelBuffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
    ) -> Result<Vec<f64>, WgpuError> {
        self.time_flushed(kernel, grid, buffers, scalars, warmup, runs, &[])
    }

    /// As [`WgpuRuntime::time`], but before each timed dispatch every buffer of `flush` is
    /// cleared in a submission that completes first, and each timed dispatch is waited for, so
    /// that each run starts with none of its own data in the device's caches. Together the flush
    /// buffers must be larger than the last-level cache. Without flush buffers the timed
    /// dispatches go back to back in one submission.
    #[allow(clippy::too_many_arguments)]
    pub fn time_flushed(
        &self,
        kernel: &WgpuKernel,
        grid: [u32; 3],
        buffers: &[&dyn KernelBuffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
        flush: &[&wgpu::Buffer],
    ) -> Result<Vec<f64>, WgpuError> {
        if !self.caps.timestamps {
            return Err(WgpuError::NoTimestamps { adapter: self.info.name.clone() });
        }
        let (immediates, workgroups) = self.check_launch(kernel, grid, buffers, scalars)?;
        let bind_group = self.bind_group(kernel, buffers)?;
        let name = &kernel.kernel.name;
        let op = format!("timing kernel `{name}` over {grid:?}");
        tilekit_core::gpu::warmup::warm_up(warmup, |batch| {
            let index = scoped(
                &self.device,
                || format!("{op}: warm-up"),
                || {
                    let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(name) });
                    for _ in 0..batch {
                        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(name), timestamp_writes: None });
                        Self::dispatch(&mut pass, kernel, &bind_group, &immediates, workgroups);
                    }
                    self.queue.submit([enc.finish()])
                },
            )?;
            self.wait(Some(index), &op)
        })?;
        let period_s = self.queue.get_timestamp_period() as f64 * 1e-9;
        // A query set holds at most 4096 queries: time in batches of 2048 dispatches.
        const BATCH: usize = 2048;
        let mut samples = Vec::with_capacity(runs);
        let mut done = 0;
        while done < runs {
            let n = (runs - done).min(BATCH);
            let bytes = (2 * n * 8) as u64;
            let (query_set, resolve, readback) = scoped(
                &self.device,
                || format!("{op}: query buffers"),
                || {
                    let qs = self.device.create_query_set(&wgpu::QuerySetDescriptor {
                        label: Some("tilekit timestamps"),
                        ty: wgpu::QueryType::Timestamp,
                        count: 2 * n as u32,
                    });
                    let resolve = self.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("tilekit timestamps resolve"),
                        size: bytes,
                        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                        mapped_at_creation: false,
                    });
                    let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("tilekit timestamps readback"),
                        size: bytes,
                        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    });
                    (qs, resolve, readback)
                },
            )?;
            if !flush.is_empty() {
                for i in 0..n as u32 {
                    let index = scoped(
                        &self.device,
                        || format!("{op}: cache flush"),
                        || {
                            let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("tilekit flush") });
                            for f in flush {
                                enc.clear_buffer(f, 0, None);
                            }
                            self.queue.submit([enc.finish()])
                        },
                    )?;
                    self.wait(Some(index), &op)?;
                    let index = scoped(
                        &self.device,
                        || op.clone(),
                        || {
                            let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(name) });
                            {
                                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                                    label: Some(name),
                                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                                        query_set: &query_set,
                                        beginning_of_pass_write_index: Some(2 * i),
                                        end_of_pass_write_index: Some(2 * i + 1),
                                    }),
                                });
                                Self::dispatch(&mut pass, kernel, &bind_group, &immediates, workgroups);
                            }
                            self.queue.submit([enc.finish()])
                        },
                    )?;
                    self.wait(Some(index), &op)?;
                }
            }
            let index = scoped(
                &self.device,
                || op.clone(),
                || {
                    let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(name) });
                    for i in (0..n as u32).filter(|_| flush.is_empty()) {
                        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label: Some(name),
                            timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                                query_set: &query_set,
                                beginning_of_pass_write_index: Some(2 * i),
                                end_of_pass_write_index: Some(2 * i + 1),
                            }),
                        });
                        Self::dispatch(&mut pass, kernel, &bind_group, &immediates, workgroups);
                    }
                    enc.resolve_query_set(&query_set, 0..2 * n as u32, &resolve, 0);
                    enc.copy_buffer_to_buffer(&resolve, 0, &readback, 0, bytes);
                    self.queue.submit([enc.finish()])
                },
            )?;
            let data = self.map_read(&readback, Some(index), &op)?;
            for pair in data.chunks_exact(16) {
                let begin = u64::from_le_bytes(pair[..8].try_into().expect("8 bytes"));
                let end = u64::from_le_bytes(pair[8..].try_into().expect("8 bytes"));
                samples.push(end.wrapping_sub(begin) as f64 * period_s);
            }
            done += n;
        }
        Ok(samples)
    }
}

/// Opens a device with `features`; through `wgpu::hal` when the adapter is Vulkan and supports
/// 8-bit storage buffers, so as to switch those on (wgpu never does). Returns the Vulkan query
/// and whether 8-bit storage is on.
fn open_device(
    adapter: &wgpu::Adapter,
    features: wgpu::Features,
    limits: &wgpu::Limits,
) -> Result<(wgpu::Device, wgpu::Queue, VulkanQuery, bool), WgpuError> {
    let info = adapter.get_info();
    let desc = wgpu::DeviceDescriptor {
        label: Some("tilekit"),
        required_features: features,
        required_limits: limits.clone(),
        // wgpu gates cooperative matrices behind its experimental features; tilekit requests
        // that one only for passthrough SPIR-V it has validated itself.
        experimental_features: if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
            // SAFETY: the only experimental feature requested is cooperative matrices, used by
            // tilekit's own modules within what the driver lists.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        },
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    };
    let request_error = |message: String| WgpuError::RequestDevice { adapter: info.name.clone(), message };
    let mut vq = VulkanQuery::default();
    let mut opened = None;
    // SAFETY: the hal adapter is used while `adapter` lives, and dropped before the device is
    // made from what it opened; the device-creation callback only adds a feature the adapter
    // reports as supported (and, on Vulkan 1.1, the extension that carries it).
    if let Some(hal) = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() } {
        let caps = hal.physical_device_capabilities();
        vq = unsafe { query_vulkan(hal.shared_instance(), hal.raw_physical_device(), |e| caps.supports_extension(e)) };
        if vq.storage8 {
            let mut bit8 = vk::PhysicalDevice8BitStorageFeatures::default().storage_buffer8_bit_access(true);
            let needs_ext = vq.storage8_needs_extension;
            let bit8_ref = &mut bit8;
            let callback = device_callback(move |args| {
                if needs_ext && !args.extensions.contains(&ash::khr::_8bit_storage::NAME) {
                    args.extensions.push(ash::khr::_8bit_storage::NAME);
                }
                *args.create_info = std::mem::take(args.create_info).push_next(bit8_ref);
            });
            opened = Some(unsafe { hal.open_with_callback(features, limits, &desc.memory_hints, Some(callback)) });
        }
    }
    // Should the device with 8-bit storage fail, a plain one still runs every other kernel.
    let hal_error = match opened {
        // SAFETY: `open` was opened on this adapter with exactly `desc`'s features and limits.
        Some(Ok(open)) => match unsafe { adapter.create_device_from_hal(open, &desc) } {
            Ok((d, q)) => return Ok((d, q, vq, true)),
            Err(e) => Some(e.to_string()),
        },
        Some(Err(e)) => Some(format!("vkCreateDevice: {e}")),
        None => None,
    };
    match pollster::block_on(adapter.request_device(&desc)) {
        Ok((d, q)) => Ok((d, q, vq, false)),
        Err(e) => Err(request_error(match hal_error {
            Some(h) => format!("{e} (with 8-bit storage buffers: {h})"),
            None => e.to_string(),
        })),
    }
}

/// Gives a device-creation closure its higher-ranked signature.
fn device_callback<'this, F>(f: F) -> Box<wgpu::hal::vulkan::CreateDeviceCallback<'this>>
where
    F: for<'arg, 'pnext> FnOnce(wgpu::hal::vulkan::CreateDeviceCallbackArgs<'arg, 'pnext, 'this>) + 'this,
{
    Box::new(f)
}
