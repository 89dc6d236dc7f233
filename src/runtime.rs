//! One interface to every device: [`Runtime`], in wgpu-hal's manner (one trait, the buffer and
//! kernel types associated), implemented by the interpreter, the emulator, Vulkan (ash, feature
//! `vulkan`), wgpu (feature `wgpu`) and CUDA (feature `ptx`).
//!
//! A runtime allocates device buffers, uploads and downloads them, compiles a program for a
//! configuration (or fetches it from the in-memory cache, [`kernel`]), launches it on a grid,
//! synchronises, times with device timestamps and reports static resources. Everything above it
//! (plans, checked launches, the benchmark, [`crate::launch`]) is written once over the trait;
//! [`Device`] only picks the runtime (`with_runtime!`, the one `match` over devices).
//!
//! Runtimes are opened once per device and shared (`open`); one whose device was lost is
//! dropped with its kernels (`forget`), so the next use opens the device afresh.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tilekit_core::gpu::lower::LowerOptions;
use tilekit_core::gpu::simt::{self, SimtError};
use tilekit_core::gpu::Target;
use tilekit_core::interp::{self, Arg};
use tilekit_core::{DType, HostBuffer, Program, Scalar, TransferCounter, Transfers};

use crate::device::{Device, DeviceError, KernelResources};

/// A device's runtime. Buffers and kernels belong to the runtime that made them.
pub trait Runtime: Send + Sync + 'static {
    /// A buffer in the device's memory, typed by dtype and length.
    type Buffer: Send + Sync + 'static;
    /// A program compiled and loaded for one configuration.
    type Kernel: Send + Sync + 'static;
    /// Device memory overwritten before each timed run, so runs start with cold caches.
    type Flush;

    /// Whether compiled kernels are worth keeping ([`kernel`]): false where compiling costs
    /// nothing next to running (the CPU devices).
    const CACHES_KERNELS: bool = true;
    /// Whether [`Runtime::time`] reads device timestamps; CPU devices time the wall clock of
    /// whole plans instead.
    const TIMES_ON_DEVICE: bool = true;
    /// Whether [`Runtime::resources`] says anything.
    const REPORTS_RESOURCES: bool = false;

    fn device(&self) -> &Device;
    /// What the runtime and its kernels are cached under: the device's name, with its index
    /// where identical devices share a name.
    fn key(&self) -> String {
        self.device().name()
    }
    /// Whether the device was lost (the runtime is then unusable).
    fn is_lost(&self) -> bool {
        false
    }

    fn alloc(&self, dtype: DType, len: usize) -> Result<Self::Buffer, DeviceError>;
    /// Copies `host` (same dtype and length) into `buffer`.
    fn upload(&self, buffer: &mut Self::Buffer, host: &HostBuffer) -> Result<(), DeviceError>;
    /// A host copy of `buffer`.
    fn download(&self, buffer: &Self::Buffer) -> Result<HostBuffer, DeviceError>;
    /// Host <-> device copies made so far through this runtime.
    fn transfers(&self) -> Transfers;

    /// Whether a launch over `grid` needs a kernel that folds its grid (more programs per axis
    /// than the device dispatches).
    fn needs_fold(&self, _grid: [u32; 3]) -> bool {
        false
    }
    /// The buffers of a launch (in binding order) that its kernel must access by elements
    /// ([`LowerOptions::element_bindings`]): those a whole-vector view of the runtime's modules
    /// could not cover.
    fn element_bindings(&self, _buffers: &[&Self::Buffer]) -> u64 {
        0
    }
    fn compile(&self, program: &Program, options: &LowerOptions) -> Result<Self::Kernel, DeviceError>;
    /// Runs `kernel` over `grid` with its buffer arguments in binding order and its scalars with
    /// their parameter index, and waits for it.
    fn launch(&self, kernel: &Self::Kernel, grid: [u32; 3], buffers: &[&Self::Buffer], scalars: &[(u32, Scalar)]) -> Result<(), DeviceError>;
    /// Waits for everything submitted.
    fn synchronize(&self) -> Result<(), DeviceError> {
        Ok(())
    }

    /// Flush memory of about `bytes` (0: none).
    fn flush(&self, bytes: u64) -> Result<Self::Flush, DeviceError>;
    /// Seconds per run of `runs` launches after `warmup`, `flush` overwritten before each.
    #[allow(clippy::too_many_arguments)]
    fn time(
        &self,
        kernel: &Self::Kernel,
        grid: [u32; 3],
        buffers: &[&Self::Buffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
        flush: &mut Self::Flush,
    ) -> Result<Vec<f64>, DeviceError>;

    /// What the compiler or driver says `kernel` takes.
    fn resources(&self, _kernel: &Self::Kernel) -> Option<KernelResources> {
        None
    }
    /// Messages the driver's validation reported since the last call.
    fn take_messages(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Open runtimes by [`Runtime::key`], each an `Arc<R>` for its runtime type.
static RUNTIMES: OnceLock<Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>> = OnceLock::new();

/// Runtime key, program text and the lowering options (warps per program, the scalar
/// arguments' divisibility marks, grid folding): what identifies a compiled kernel.
type KernelKey = (String, String, LowerOptions);

/// Compiled kernels, each an `Arc<Mutex<R::Kernel>>`: lavapipe compiles every pipeline with LLVM
/// and CUDA runs LLVM's O3, which costs far more than running small problems. A Vulkan
/// pipeline's descriptor set is rebound per launch, so each kernel is used by one thread at a
/// time.
static KERNELS: OnceLock<Mutex<HashMap<KernelKey, Arc<dyn Any + Send + Sync>>>> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The open runtime under `key`, or a new one from `make`. The registry stays locked while
/// `make` runs, so that threads opening one device at once share one runtime (kernels compiled
/// by one runtime cannot run on another).
pub(crate) fn open<R: Runtime>(key: String, make: impl FnOnce() -> Result<R, DeviceError>) -> Result<Arc<R>, DeviceError> {
    let mut map = lock(RUNTIMES.get_or_init(Default::default));
    let open = map.get(&key).and_then(|a| a.clone().downcast::<R>().ok());
    if let Some(rt) = open.as_ref().filter(|rt| !rt.is_lost()) {
        return Ok(rt.clone());
    }
    if open.is_some() {
        forget_kernels(&key);
    }
    let rt = Arc::new(make()?);
    map.insert(key, rt.clone());
    Ok(rt)
}

/// Registers `rt` under its key, replacing any runtime there (a caller's wgpu device).
#[cfg(feature = "wgpu")]
pub(crate) fn register<R: Runtime>(rt: Arc<R>) {
    lock(RUNTIMES.get_or_init(Default::default)).insert(rt.key(), rt);
}

/// Drops the runtime under `key` and its kernels (a GPU runtime whose device was lost).
#[cfg(any(feature = "vulkan", feature = "wgpu", feature = "ptx", feature = "ptx-static"))]
pub(crate) fn forget(key: &str) {
    if let Some(map) = RUNTIMES.get() {
        lock(map).remove(key);
    }
    forget_kernels(key);
}

/// Drops the kernels compiled by the runtime under `key` (the runtime stays open).
pub(crate) fn forget_kernels(key: &str) {
    if let Some(map) = KERNELS.get() {
        lock(map).retain(|k, _| k.0 != key);
    }
}

/// A kernel from [`kernel`]: compiled now (with the time it took) or found in the cache.
pub struct Fetched<K> {
    pub kernel: Arc<Mutex<K>>,
    /// `None` when the kernel came from the cache.
    pub compile_time: Option<Duration>,
}

/// `program` compiled for `rt` with `options`, from the cache when it was compiled before.
pub fn kernel<R: Runtime>(rt: &R, program: &Program, options: &LowerOptions) -> Result<Fetched<R::Kernel>, DeviceError> {
    let compile = || {
        let start = Instant::now();
        let k = rt.compile(program, options)?;
        Ok::<_, DeviceError>((Arc::new(Mutex::new(k)), start.elapsed()))
    };
    if !R::CACHES_KERNELS {
        let (kernel, t) = compile()?;
        return Ok(Fetched { kernel, compile_time: Some(t) });
    }
    let key = (rt.key(), tilekit_core::text::print(program), *options);
    let map = KERNELS.get_or_init(Default::default);
    if let Some(k) = lock(map).get(&key).and_then(|a| a.clone().downcast::<Mutex<R::Kernel>>().ok()) {
        return Ok(Fetched { kernel: k, compile_time: None });
    }
    let (kernel, t) = compile()?;
    lock(map).insert(key, kernel.clone());
    Ok(Fetched { kernel, compile_time: Some(t) })
}

/// Runs `kernel` under its lock.
pub(crate) fn with_kernel<K, T>(kernel: &Mutex<K>, f: impl FnOnce(&K) -> T) -> T {
    f(&lock(kernel))
}

/// Interpreter arguments in parameter order from buffers in binding order and indexed scalars.
fn positional<'a>(buffers: &[&'a HostBuffer], scalars: &[(u32, Scalar)]) -> Vec<Arg<'a>> {
    let mut bufs = buffers.iter();
    (0..(buffers.len() + scalars.len()) as u32)
        .filter_map(|p| match scalars.iter().find(|(i, _)| *i == p) {
            Some((_, s)) => Some(Arg::Scalar(*s)),
            None => bufs.next().map(|b| Arg::Buffer(b)),
        })
        .collect()
}

/// Overwrites `dst`'s elements with `src`'s (same dtype and length).
pub(crate) fn copy_into(dst: &HostBuffer, src: &HostBuffer) {
    if !dst.copy_from(src) {
        for i in 0..dst.len().min(src.len()) {
            dst.store_bits(i, src.load_bits(i));
        }
    }
}

fn check_host(device: &Device, buffer: &HostBuffer, host: &HostBuffer) -> Result<(), DeviceError> {
    if buffer.dtype() != host.dtype() || buffer.len() != host.len() {
        return Err(DeviceError::Transfer {
            device: device.name(),
            what: format!("upload of {} x {} into a device buffer of {} x {}", host.len(), host.dtype(), buffer.len(), buffer.dtype()),
        });
    }
    Ok(())
}

/// Wall-clock seconds of each of `runs` calls of `f` (CPU devices have no timestamps).
fn wall_clock(runs: usize, mut f: impl FnMut() -> Result<(), DeviceError>) -> Result<Vec<f64>, DeviceError> {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            f()?;
            Ok(start.elapsed().as_secs_f64())
        })
        .collect()
}

/// The interpreter: buffers are host memory, and an upload or download is a host copy.
pub struct InterpRuntime {
    device: Device,
    transfers: TransferCounter,
}

impl InterpRuntime {
    pub(crate) fn open() -> Result<Arc<InterpRuntime>, DeviceError> {
        open(Device::Interpreter.name(), || Ok(InterpRuntime { device: Device::Interpreter, transfers: TransferCounter::default() }))
    }
}

impl Runtime for InterpRuntime {
    type Buffer = HostBuffer;
    type Kernel = Program;
    type Flush = ();
    const CACHES_KERNELS: bool = false;
    const TIMES_ON_DEVICE: bool = false;

    fn device(&self) -> &Device {
        &self.device
    }
    fn alloc(&self, dtype: DType, len: usize) -> Result<HostBuffer, DeviceError> {
        Ok(HostBuffer::zeros(dtype, len))
    }
    fn upload(&self, buffer: &mut HostBuffer, host: &HostBuffer) -> Result<(), DeviceError> {
        check_host(&self.device, buffer, host)?;
        self.transfers.upload(host.size_bytes());
        copy_into(buffer, host);
        Ok(())
    }
    fn download(&self, buffer: &HostBuffer) -> Result<HostBuffer, DeviceError> {
        self.transfers.download(buffer.size_bytes());
        Ok(buffer.clone())
    }
    fn transfers(&self) -> Transfers {
        self.transfers.get()
    }
    fn compile(&self, program: &Program, _options: &LowerOptions) -> Result<Program, DeviceError> {
        Ok(program.clone())
    }
    fn launch(&self, program: &Program, grid: [u32; 3], buffers: &[&HostBuffer], scalars: &[(u32, Scalar)]) -> Result<(), DeviceError> {
        interp::run(program, grid, &positional(buffers, scalars)).map_err(|source| DeviceError::Interp {
            launch: 0,
            program: program.name.clone(),
            source,
        })
    }
    fn flush(&self, _bytes: u64) -> Result<(), DeviceError> {
        Ok(())
    }
    fn time(
        &self,
        kernel: &Program,
        grid: [u32; 3],
        buffers: &[&HostBuffer],
        scalars: &[(u32, Scalar)],
        _warmup: usize,
        runs: usize,
        _flush: &mut (),
    ) -> Result<Vec<f64>, DeviceError> {
        wall_clock(runs, || self.launch(kernel, grid, buffers, scalars))
    }
}

/// The emulator of the GPU lowering for a target: buffers are host memory.
pub struct EmulatorRuntime {
    device: Device,
    target: Target,
    transfers: TransferCounter,
}

impl EmulatorRuntime {
    pub(crate) fn open(target: &Target) -> Result<Arc<EmulatorRuntime>, DeviceError> {
        let device = Device::Emulator(target.clone());
        open(device.name(), || Ok(EmulatorRuntime { device, target: target.clone(), transfers: TransferCounter::default() }))
    }
}

impl Runtime for EmulatorRuntime {
    type Buffer = HostBuffer;
    type Kernel = (Program, simt::Lowered);
    type Flush = ();
    const CACHES_KERNELS: bool = false;
    const TIMES_ON_DEVICE: bool = false;

    fn device(&self) -> &Device {
        &self.device
    }
    fn alloc(&self, dtype: DType, len: usize) -> Result<HostBuffer, DeviceError> {
        Ok(HostBuffer::zeros(dtype, len))
    }
    fn upload(&self, buffer: &mut HostBuffer, host: &HostBuffer) -> Result<(), DeviceError> {
        check_host(&self.device, buffer, host)?;
        self.transfers.upload(host.size_bytes());
        copy_into(buffer, host);
        Ok(())
    }
    fn download(&self, buffer: &HostBuffer) -> Result<HostBuffer, DeviceError> {
        self.transfers.download(buffer.size_bytes());
        Ok(buffer.clone())
    }
    fn transfers(&self) -> Transfers {
        self.transfers.get()
    }
    fn compile(&self, program: &Program, options: &LowerOptions) -> Result<Self::Kernel, DeviceError> {
        let lowered = simt::compile(program, &self.target, options).map_err(|e| DeviceError::Simt {
            launch: 0,
            program: program.name.clone(),
            source: SimtError::from(e),
        })?;
        Ok((program.clone(), lowered))
    }
    fn launch(&self, kernel: &Self::Kernel, grid: [u32; 3], buffers: &[&HostBuffer], scalars: &[(u32, Scalar)]) -> Result<(), DeviceError> {
        let (program, lowered) = kernel;
        lowered.run(program, grid, &positional(buffers, scalars)).map_err(|source| DeviceError::Simt {
            launch: 0,
            program: program.name.clone(),
            source,
        })
    }
    fn flush(&self, _bytes: u64) -> Result<(), DeviceError> {
        Ok(())
    }
    fn time(
        &self,
        kernel: &Self::Kernel,
        grid: [u32; 3],
        buffers: &[&HostBuffer],
        scalars: &[(u32, Scalar)],
        _warmup: usize,
        runs: usize,
        _flush: &mut (),
    ) -> Result<Vec<f64>, DeviceError> {
        wall_clock(runs, || self.launch(kernel, grid, buffers, scalars))
    }
}

/// Sizes of the buffers that together hold `bytes` (rounded up to whole words), none larger
/// than `chunk`.
#[cfg(any(feature = "vulkan", feature = "wgpu"))]
fn flush_chunks(bytes: u64, chunk: u64) -> impl Iterator<Item = u64> {
    let bytes = bytes.div_ceil(4) * 4;
    (0..bytes.div_ceil(chunk)).map(move |i| chunk.min(bytes - i * chunk))
}

/// A Vulkan device through the raw Vulkan runtime (ash).
#[cfg(feature = "vulkan")]
pub struct VulkanRuntime {
    device: Device,
    index: usize,
    rt: tilekit_spirv::VulkanRuntime,
}

#[cfg(feature = "vulkan")]
impl VulkanRuntime {
    pub(crate) fn open(device: &Device) -> Result<Arc<VulkanRuntime>, DeviceError> {
        let Device::Vulkan { index, .. } = device else { unreachable!("opened for Vulkan devices") };
        let index = *index;
        open(format!("{}#{index}", device.name()), || {
            let rt = tilekit_spirv::VulkanRuntime::new(index).map_err(|source| DeviceError::Vulkan { device: device.name(), source })?;
            Ok(VulkanRuntime { device: device.clone(), index, rt })
        })
    }

    /// The backend's runtime, for what the trait does not cover.
    pub fn raw(&self) -> &tilekit_spirv::VulkanRuntime {
        &self.rt
    }

    fn err(&self, source: tilekit_spirv::VulkanError) -> DeviceError {
        if source.device_lost() {
            forget(&self.key());
        }
        DeviceError::Vulkan { device: self.device.name(), source }
    }
}

#[cfg(feature = "vulkan")]
impl Runtime for VulkanRuntime {
    type Buffer = tilekit_spirv::DeviceBuffer;
    type Kernel = tilekit_spirv::Pipeline;
    type Flush = Vec<tilekit_spirv::DeviceBuffer>;
    const REPORTS_RESOURCES: bool = true;

    fn device(&self) -> &Device {
        &self.device
    }
    fn key(&self) -> String {
        format!("{}#{}", self.device.name(), self.index)
    }
    fn is_lost(&self) -> bool {
        self.rt.is_lost()
    }
    fn alloc(&self, dtype: DType, len: usize) -> Result<Self::Buffer, DeviceError> {
        self.rt.alloc(dtype, len).map_err(|e| self.err(e))
    }
    fn upload(&self, buffer: &mut Self::Buffer, host: &HostBuffer) -> Result<(), DeviceError> {
        self.rt.upload(buffer, host).map_err(|e| self.err(e))
    }
    fn download(&self, buffer: &Self::Buffer) -> Result<HostBuffer, DeviceError> {
        self.rt.download(buffer).map_err(|e| self.err(e))
    }
    fn transfers(&self) -> Transfers {
        self.rt.transfers()
    }
    fn needs_fold(&self, grid: [u32; 3]) -> bool {
        self.rt.needs_fold(grid)
    }
    fn compile(&self, program: &Program, options: &LowerOptions) -> Result<Self::Kernel, DeviceError> {
        let target = self.device.target().expect("a Vulkan device has a target");
        self.rt.load(&tilekit_spirv::compile(program, target, options)?.kernel).map_err(|e| self.err(e))
    }
    fn launch(&self, kernel: &Self::Kernel, grid: [u32; 3], buffers: &[&Self::Buffer], scalars: &[(u32, Scalar)]) -> Result<(), DeviceError> {
        self.rt.launch(kernel, grid, buffers, scalars).map_err(|e| self.err(e))
    }
    fn flush(&self, bytes: u64) -> Result<Self::Flush, DeviceError> {
        // Buffers no larger than one storage binding may be, which is all alloc makes.
        let chunk = (self.rt.info().max_storage_buffer_range as u64 & !3).clamp(4, 256 << 20);
        flush_chunks(bytes, chunk).map(|n| self.rt.alloc(DType::U32, (n / 4) as usize).map_err(|e| self.err(e))).collect()
    }
    fn time(
        &self,
        kernel: &Self::Kernel,
        grid: [u32; 3],
        buffers: &[&Self::Buffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
        flush: &mut Self::Flush,
    ) -> Result<Vec<f64>, DeviceError> {
        let flush: Vec<_> = flush.iter().collect();
        self.rt.time_flushed(kernel, grid, buffers, scalars, warmup, runs, &flush).map_err(|e| self.err(e))
    }
    fn resources(&self, p: &Self::Kernel) -> Option<KernelResources> {
        Some(KernelResources {
            registers: p.statistic_u64("register").and_then(|r| u32::try_from(r).ok()),
            shared_bytes: Some(p.kernel().requirements.shared_bytes),
            spill_bytes: None,
            statistics: p.statistics().iter().map(|s| (s.name.clone(), s.value.to_string())).collect(),
        })
    }
    fn take_messages(&self) -> Vec<String> {
        self.rt.take_validation_messages()
    }
}

/// A Vulkan adapter through wgpu, on its own device or on a caller's ([`crate::Device::from_wgpu`]).
#[cfg(feature = "wgpu")]
pub struct WgpuRuntime {
    device: Device,
    rt: tilekit_spirv::WgpuRuntime,
}

#[cfg(feature = "wgpu")]
impl WgpuRuntime {
    pub(crate) fn open(device: &Device) -> Result<Arc<WgpuRuntime>, DeviceError> {
        let Device::Wgpu { name, naga, .. } = device else { unreachable!("opened for wgpu devices") };
        open(device.name(), || {
            let opened = if *naga { tilekit_spirv::WgpuRuntime::for_naga(Some(name)) } else { tilekit_spirv::WgpuRuntime::with_adapter(Some(name)) };
            let rt = opened.map_err(|source| DeviceError::Wgpu { device: device.name(), source })?;
            Ok(WgpuRuntime { device: device.clone(), rt })
        })
    }

    /// A caller's device and queue, known as `device` from now on.
    pub(crate) fn adopt(device: Device, rt: tilekit_spirv::WgpuRuntime) -> Arc<WgpuRuntime> {
        let rt = Arc::new(WgpuRuntime { device, rt });
        forget(&rt.key());
        register(rt.clone());
        rt
    }

    /// The backend's runtime: its wgpu device and queue.
    pub fn raw(&self) -> &tilekit_spirv::WgpuRuntime {
        &self.rt
    }

    pub(crate) fn err(&self, source: tilekit_spirv::WgpuError) -> DeviceError {
        if source.device_lost() {
            forget(&self.key());
        }
        DeviceError::Wgpu { device: self.device.name(), source }
    }
}

/// wgpu's view of a launch's buffers.
#[cfg(feature = "wgpu")]
pub(crate) fn wgpu_args<'a>(buffers: &[&'a tilekit_spirv::WgpuBuffer]) -> Vec<&'a dyn tilekit_spirv::wgpu_rt::KernelBuffer> {
    buffers.iter().map(|&b| b as &dyn tilekit_spirv::wgpu_rt::KernelBuffer).collect()
}

#[cfg(feature = "wgpu")]
impl Runtime for WgpuRuntime {
    type Buffer = tilekit_spirv::WgpuBuffer;
    type Kernel = tilekit_spirv::WgpuKernel;
    type Flush = Vec<tilekit_spirv::WgpuBuffer>;

    fn device(&self) -> &Device {
        &self.device
    }
    fn is_lost(&self) -> bool {
        self.rt.is_lost()
    }
    fn alloc(&self, dtype: DType, len: usize) -> Result<Self::Buffer, DeviceError> {
        self.rt.alloc(dtype, len).map_err(|e| self.err(e))
    }
    fn upload(&self, buffer: &mut Self::Buffer, host: &HostBuffer) -> Result<(), DeviceError> {
        if buffer.len != host.len() {
            return Err(DeviceError::Transfer {
                device: self.device.name(),
                what: format!("upload of {} x {} into a device buffer of {} x {}", host.len(), host.dtype(), buffer.len, buffer.dtype),
            });
        }
        self.rt.upload(buffer, host).map_err(|e| self.err(e))
    }
    fn download(&self, buffer: &Self::Buffer) -> Result<HostBuffer, DeviceError> {
        self.rt.download(buffer, buffer.dtype, buffer.len).map_err(|e| self.err(e))
    }
    fn transfers(&self) -> Transfers {
        self.rt.transfers()
    }
    fn needs_fold(&self, grid: [u32; 3]) -> bool {
        self.rt.needs_fold(grid)
    }
    /// A naga module declares a buffer it moves in 16-byte vectors as an array of vectors, which
    /// a caller's buffer that ends inside a vector does not fill: such a buffer's binding is
    /// compiled by elements instead (tilekit's own buffers are whole vectors).
    fn element_bindings(&self, buffers: &[&Self::Buffer]) -> u64 {
        if !matches!(self.device, Device::Wgpu { naga: true, .. }) {
            return 0;
        }
        buffers.iter().take(64).enumerate().filter(|(_, b)| b.buffer.size() % 16 != 0).fold(0, |m, (i, _)| m | 1 << i)
    }
    fn compile(&self, program: &Program, options: &LowerOptions) -> Result<Self::Kernel, DeviceError> {
        let target = self.device.target().expect("a wgpu device has a target");
        if let Device::Wgpu { naga: true, .. } = self.device {
            let k = tilekit_naga::compile(program, target, options)?.kernel;
            return self.rt.load_naga(&k.interface, &k.module).map_err(|e| self.err(e));
        }
        self.rt.load(&tilekit_spirv::compile(program, target, options)?.kernel).map_err(|e| self.err(e))
    }
    fn launch(&self, kernel: &Self::Kernel, grid: [u32; 3], buffers: &[&Self::Buffer], scalars: &[(u32, Scalar)]) -> Result<(), DeviceError> {
        self.rt.launch(kernel, grid, &wgpu_args(buffers), scalars).map_err(|e| self.err(e))
    }
    fn flush(&self, bytes: u64) -> Result<Self::Flush, DeviceError> {
        let chunk = (self.rt.limits().max_buffer_size & !3).clamp(4, 256 << 20);
        flush_chunks(bytes, chunk).map(|n| self.rt.alloc(DType::U32, (n / 4) as usize).map_err(|e| self.err(e))).collect()
    }
    fn time(
        &self,
        kernel: &Self::Kernel,
        grid: [u32; 3],
        buffers: &[&Self::Buffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
        flush: &mut Self::Flush,
    ) -> Result<Vec<f64>, DeviceError> {
        let flush: Vec<&wgpu::Buffer> = flush.iter().map(|b| &b.buffer).collect();
        self.rt.time_flushed(kernel, grid, &wgpu_args(buffers), scalars, warmup, runs, &flush).map_err(|e| self.err(e))
    }
}

/// A CUDA device (PTX through the driver's JIT).
#[cfg(any(feature = "ptx", feature = "ptx-static"))]
pub struct CudaRuntime {
    device: Device,
    ordinal: usize,
    rt: Arc<tilekit_ptx::CudaRuntime>,
}

#[cfg(any(feature = "ptx", feature = "ptx-static"))]
impl CudaRuntime {
    pub(crate) fn open(device: &Device) -> Result<Arc<CudaRuntime>, DeviceError> {
        let Device::Cuda { ordinal, .. } = device else { unreachable!("opened for CUDA devices") };
        let ordinal = *ordinal;
        // Modules belong to one device's context: the key names the ordinal, since identical
        // GPUs share a name.
        open(format!("{}#{ordinal}", device.name()), || {
            let rt = crate::device::cuda_runtime(ordinal).map_err(|source| DeviceError::Cuda { device: device.name(), source })?;
            Ok(CudaRuntime { device: device.clone(), ordinal, rt })
        })
    }

    /// The backend's runtime.
    pub fn raw(&self) -> &tilekit_ptx::CudaRuntime {
        &self.rt
    }

    fn err(&self, source: tilekit_ptx::CudaError) -> DeviceError {
        if source.context_lost() {
            forget(&self.key());
            crate::device::forget_cuda_runtime(self.ordinal);
        }
        DeviceError::Cuda { device: self.device.name(), source }
    }
}

#[cfg(any(feature = "ptx", feature = "ptx-static"))]
impl Runtime for CudaRuntime {
    type Buffer = tilekit_ptx::CudaBuffer;
    type Kernel = tilekit_ptx::CudaKernel;
    type Flush = Option<tilekit_ptx::CudaBuffer>;
    const REPORTS_RESOURCES: bool = true;

    fn device(&self) -> &Device {
        &self.device
    }
    fn key(&self) -> String {
        format!("{}#{}", self.device.name(), self.ordinal)
    }
    fn is_lost(&self) -> bool {
        self.rt.is_lost()
    }
    fn alloc(&self, dtype: DType, len: usize) -> Result<Self::Buffer, DeviceError> {
        self.rt.alloc(dtype, len).map_err(|e| self.err(e))
    }
    fn upload(&self, buffer: &mut Self::Buffer, host: &HostBuffer) -> Result<(), DeviceError> {
        self.rt.upload(buffer, host).map_err(|e| self.err(e))
    }
    fn download(&self, buffer: &Self::Buffer) -> Result<HostBuffer, DeviceError> {
        self.rt.download(buffer).map_err(|e| self.err(e))
    }
    fn transfers(&self) -> Transfers {
        self.rt.transfers()
    }
    fn compile(&self, program: &Program, options: &LowerOptions) -> Result<Self::Kernel, DeviceError> {
        let target = self.device.target().expect("a CUDA device has a target");
        let arch = self.rt.info().arch().unwrap_or(tilekit_ptx::Arch::Sm80);
        self.rt.load(&tilekit_ptx::compile(program, target, options, arch)?.kernel).map_err(|e| self.err(e))
    }
    fn launch(&self, kernel: &Self::Kernel, grid: [u32; 3], buffers: &[&Self::Buffer], scalars: &[(u32, Scalar)]) -> Result<(), DeviceError> {
        self.rt.launch(kernel, grid, buffers, scalars).map_err(|e| self.err(e))
    }
    fn synchronize(&self) -> Result<(), DeviceError> {
        self.rt.synchronize().map_err(|e| self.err(e))
    }
    fn flush(&self, bytes: u64) -> Result<Self::Flush, DeviceError> {
        // One allocation: CUDA has no per-binding size limit.
        match bytes {
            0 => Ok(None),
            n => self.rt.alloc(DType::U8, n as usize).map(Some).map_err(|e| self.err(e)),
        }
    }
    fn time(
        &self,
        kernel: &Self::Kernel,
        grid: [u32; 3],
        buffers: &[&Self::Buffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
        flush: &mut Self::Flush,
    ) -> Result<Vec<f64>, DeviceError> {
        self.rt.time_flushed(kernel, grid, buffers, scalars, warmup, runs, flush.as_mut()).map_err(|e| self.err(e))
    }
    fn resources(&self, k: &Self::Kernel) -> Option<KernelResources> {
        let ptxas = k.ptx().resources.as_ref();
        Some(KernelResources {
            registers: Some(k.registers),
            shared_bytes: Some(k.ptx().shared_bytes),
            spill_bytes: ptxas.map(|r| r.spill_store_bytes),
            statistics: Vec::new(),
        })
    }
}

/// Runs `$body` with `$rt` bound to `$device`'s open runtime (an `&Arc<R>` for its runtime type `R`):
/// the one place that matches on the kind of device. The enclosing function returns
/// `Result<_, DeviceError>`.
macro_rules! with_runtime {
    ($device:expr, |$rt:ident| $body:expr) => {{
        let device: &$crate::device::Device = $device;
        match device {
            $crate::device::Device::Interpreter => {
                let opened = $crate::runtime::InterpRuntime::open()?;
                let $rt = &opened;
                $body
            }
            $crate::device::Device::Emulator(target) => {
                let opened = $crate::runtime::EmulatorRuntime::open(target)?;
                let $rt = &opened;
                $body
            }
            #[cfg(feature = "vulkan")]
            $crate::device::Device::Vulkan { .. } => {
                let opened = $crate::runtime::VulkanRuntime::open(device)?;
                let $rt = &opened;
                $body
            }
            #[cfg(feature = "wgpu")]
            $crate::device::Device::Wgpu { .. } => {
                let opened = $crate::runtime::WgpuRuntime::open(device)?;
                let $rt = &opened;
                $body
            }
            #[cfg(any(feature = "ptx", feature = "ptx-static"))]
            $crate::device::Device::Cuda { .. } => {
                let opened = $crate::runtime::CudaRuntime::open(device)?;
                let $rt = &opened;
                $body
            }
        }
    }};
}
pub(crate) use with_runtime;
