//! A CUDA runtime on the driver API through cudarc, with libcuda loaded at run time: buffers,
//! PTX modules (JIT-compiled by the driver for the device), launches, and timing with CUDA
//! events.
//!
//! Every call binds the context to the calling thread, so one runtime may be shared by threads;
//! launches go to one stream in order.

use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use half::{bf16, f16};
use tilekit_core::gpu::Target;
use tilekit_core::{DType, HostBuffer, Scalar};
use tilekit_llvm::KernelParam;

use crate::compile::PtxKernel;
use crate::nvptx::Arch;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CudaError {
    #[error("the CUDA driver (libcuda.so) is not installed or cannot be loaded")]
    NoDriver,
    #[error("CUDA device {ordinal}: {what}: {source}")]
    Driver { ordinal: usize, what: String, source: DriverError },
    #[error("CUDA device {ordinal} ({name}) has compute capability {major}.{minor}; the PTX backend needs 8.0 or newer")]
    TooOld { ordinal: usize, name: String, major: i32, minor: i32 },
    #[error("kernel `{kernel}` on {device}: {what}")]
    Launch { kernel: String, device: String, what: String },
    #[error("{0}")]
    Buffer(String),
    #[error("cuBLAS (libcublas.so) is not installed or cannot be loaded")]
    NoCublas,
    #[error("cuBLAS on {device}: {what}")]
    Cublas { device: String, what: String },
}

/// A CUDA device as the driver describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaDeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub multiprocessors: u32,
    pub shared_per_block: u32,
    pub max_threads_per_block: u32,
}

impl CudaDeviceInfo {
    /// The architecture PTX is generated for on this device, if the backend supports it.
    pub fn arch(&self) -> Option<Arch> {
        Arch::for_compute_capability(self.compute_capability.0, self.compute_capability.1)
    }

    /// The compiler's target for this device.
    pub fn target(&self) -> Target {
        let base = if self.compute_capability.0 >= 9 { Target::cuda_sm90() } else { Target::cuda_sm80() };
        Target {
            name: format!("cuda:{}", self.name),
            max_threads_per_program: self.max_threads_per_block.min(base.max_threads_per_program),
            shared_memory_bytes: self.shared_per_block.min(base.shared_memory_bytes),
            ..base
        }
    }
}

/// Whether the CUDA driver library can be loaded. cudarc panics on the first call without it.
pub fn driver_present() -> bool {
    // SAFETY: only tries to load the library and reports whether it could.
    unsafe { sys::is_culib_present() }
}

fn driver_err(ordinal: usize, what: &str) -> impl Fn(DriverError) -> CudaError + '_ {
    move |source| CudaError::Driver { ordinal, what: what.to_string(), source }
}

/// A device buffer of `len` elements of `dtype`.
pub struct CudaBuffer {
    slice: CudaSlice<u8>,
    dtype: DType,
    len: usize,
}

impl CudaBuffer {
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A kernel loaded on a device.
pub struct CudaKernel {
    _module: Arc<CudaModule>,
    func: CudaFunction,
    kernel: PtxKernel,
    /// Registers per thread, from the driver's JIT.
    pub registers: u32,
}

impl CudaKernel {
    pub fn ptx(&self) -> &PtxKernel {
        &self.kernel
    }
}

/// One CUDA device's context and stream.
pub struct CudaRuntime {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: CudaDeviceInfo,
}

impl CudaRuntime {
    /// Every CUDA device, or an error when there is no driver.
    pub fn devices() -> Result<Vec<CudaDeviceInfo>, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        let n = CudaContext::device_count().map_err(driver_err(0, "counting devices"))?;
        (0..n.max(0) as usize).map(|i| CudaRuntime::new(i).map(|rt| rt.info)).collect()
    }

    /// Opens device `ordinal` (its primary context).
    pub fn new(ordinal: usize) -> Result<CudaRuntime, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        let ctx = CudaContext::new(ordinal).map_err(driver_err(ordinal, "creating a context"))?;
        let attr = |a| ctx.attribute(a).map_err(driver_err(ordinal, "reading an attribute"));
        let info = CudaDeviceInfo {
            ordinal,
            name: ctx.name().map_err(driver_err(ordinal, "reading its name"))?,
            compute_capability: ctx.compute_capability().map_err(driver_err(ordinal, "reading its compute capability"))?,
            multiprocessors: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            shared_per_block: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)? as u32,
            max_threads_per_block: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
        };
        if info.arch().is_none() {
            let (major, minor) = info.compute_capability;
            return Err(CudaError::TooOld { ordinal, name: info.name, major, minor });
        }
        let stream = ctx.default_stream();
        Ok(CudaRuntime { ctx, stream, info })
    }

    pub fn info(&self) -> &CudaDeviceInfo {
        &self.info
    }

    fn err(&self, what: &str) -> impl Fn(DriverError) -> CudaError + '_ {
        let ordinal = self.info.ordinal;
        let what = what.to_string();
        move |source| CudaError::Driver { ordinal, what: what.clone(), source }
    }

    /// A zeroed buffer. Sizes are rounded up to 16 bytes, the widest vector access.
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<CudaBuffer, CudaError> {
        let bytes = (len * dtype.size_bytes()).div_ceil(16).max(1) * 16;
        let slice = self.stream.alloc_zeros::<u8>(bytes).map_err(self.err(&format!("allocating {bytes} bytes")))?;
        Ok(CudaBuffer { slice, dtype, len })
    }

    pub fn upload(&self, buf: &mut CudaBuffer, host: &HostBuffer) -> Result<(), CudaError> {
        if host.dtype() != buf.dtype || host.len() != buf.len {
            return Err(CudaError::Buffer(format!(
                "upload of {} x {} into a device buffer of {} x {}",
                host.len(),
                host.dtype(),
                buf.len,
                buf.dtype
            )));
        }
        let bytes = host.to_bytes();
        if bytes.is_empty() {
            return Ok(());
        }
        let mut view = buf.slice.slice_mut(0..bytes.len());
        self.stream.memcpy_htod(&bytes, &mut view).map_err(self.err("copying to the device"))
    }

    pub fn download(&self, buf: &CudaBuffer) -> Result<HostBuffer, CudaError> {
        let n = buf.len * buf.dtype.size_bytes();
        let mut bytes = vec![0u8; n];
        if n > 0 {
            let view = buf.slice.slice(0..n);
            self.stream.memcpy_dtoh(&view, &mut bytes).map_err(self.err("copying from the device"))?;
        }
        self.stream.synchronize().map_err(self.err("waiting for the copy"))?;
        HostBuffer::from_bytes(buf.dtype, &bytes).map_err(|e| CudaError::Buffer(e.to_string()))
    }

    /// Loads a kernel's PTX; the driver compiles it for the device.
    pub fn load(&self, kernel: &PtxKernel) -> Result<CudaKernel, CudaError> {
        let lerr = |what: String| CudaError::Launch { kernel: kernel.name.clone(), device: self.info.name.clone(), what };
        if kernel.threads > self.info.max_threads_per_block {
            return Err(lerr(format!("{} threads per block, the device allows {}", kernel.threads, self.info.max_threads_per_block)));
        }
        let module = self.ctx.load_module(Ptx::from_src(kernel.ptx.clone())).map_err(|e| lerr(format!("the driver cannot load the PTX ({e})")))?;
        let func = module.load_function(&kernel.entry).map_err(|e| lerr(format!("no entry point `{}` ({e})", kernel.entry)))?;
        let registers = func.num_regs().unwrap_or(0).max(0) as u32;
        Ok(CudaKernel { _module: module, func, kernel: kernel.clone(), registers })
    }

    /// Checks a launch's arguments against the kernel and packs its scalars.
    fn check_launch(&self, k: &CudaKernel, grid: [u32; 3], buffers: &[&CudaBuffer], scalars: &[(u32, Scalar)]) -> Result<Vec<Arg>, CudaError> {
        let lerr = |what: String| CudaError::Launch { kernel: k.kernel.name.clone(), device: self.info.name.clone(), what };
        if grid.contains(&0) {
            return Err(lerr(format!("empty grid {grid:?}")));
        }
        if grid[1] > 65535 || grid[2] > 65535 {
            return Err(lerr(format!("grid {grid:?}: the y and z extents are limited to 65535")));
        }
        let mut args = Vec::with_capacity(k.kernel.params.len());
        let mut next_buffer = 0;
        for (i, p) in k.kernel.params.iter().enumerate() {
            match *p {
                KernelParam::Buffer { dtype, .. } => {
                    let b = buffers.get(next_buffer).ok_or_else(|| lerr(format!("{} buffers given, the kernel takes more", buffers.len())))?;
                    if b.dtype != dtype {
                        return Err(lerr(format!("parameter {i} is a {dtype} buffer, given {}", b.dtype)));
                    }
                    // The kernel declares its buffers `noalias`: one allocation may not be two of them.
                    if buffers[..next_buffer].iter().any(|o| std::ptr::eq(*o, *b)) {
                        return Err(lerr(format!("buffer argument {next_buffer} is also an earlier argument; kernels take distinct buffers")));
                    }
                    args.push(Arg::Buffer(next_buffer));
                    next_buffer += 1;
                }
                KernelParam::Scalar { dtype } => {
                    let s = scalars
                        .iter()
                        .find(|(pi, _)| *pi as usize == i)
                        .map(|(_, s)| *s)
                        .ok_or_else(|| lerr(format!("no value for scalar parameter {i}")))?;
                    args.push(pack_scalar(dtype, s));
                }
            }
        }
        if next_buffer != buffers.len() {
            return Err(lerr(format!("{} buffers given, the kernel takes {next_buffer}", buffers.len())));
        }
        Ok(args)
    }

    fn enqueue(&self, k: &CudaKernel, grid: [u32; 3], buffers: &[&CudaBuffer], args: &[Arg]) -> Result<(), CudaError> {
        let cfg = LaunchConfig { grid_dim: (grid[0], grid[1], grid[2]), block_dim: (k.kernel.threads, 1, 1), shared_mem_bytes: 0 };
        let mut b = self.stream.launch_builder(&k.func);
        for a in args {
            match a {
                Arg::Buffer(i) => {
                    b.arg(&buffers[*i].slice);
                }
                Arg::U32(v) => {
                    b.arg(v);
                }
                Arg::I64(v) => {
                    b.arg(v);
                }
                Arg::F32(v) => {
                    b.arg(v);
                }
            }
        }
        // SAFETY: the arguments match the kernel's parameters in number, order and type
        // (checked by `check_launch` against the interface the emitter wrote), buffers are
        // live device allocations of this context, and the kernel indexes them only within
        // the bounds the tile program's masks allow.
        unsafe { b.launch(cfg) }.map_err(|e| CudaError::Launch {
            kernel: k.kernel.name.clone(),
            device: self.info.name.clone(),
            what: format!("launch failed ({e})"),
        })?;
        Ok(())
    }

    /// Launches `k` on `grid` and waits for it.
    pub fn launch(&self, k: &CudaKernel, grid: [u32; 3], buffers: &[&CudaBuffer], scalars: &[(u32, Scalar)]) -> Result<(), CudaError> {
        let args = self.check_launch(k, grid, buffers, scalars)?;
        self.enqueue(k, grid, buffers, &args)?;
        self.stream.synchronize().map_err(|e| CudaError::Launch {
            kernel: k.kernel.name.clone(),
            device: self.info.name.clone(),
            what: format!("the kernel failed ({e})"),
        })
    }

    /// Device time of `runs` launches after `warmup`, seconds each, from CUDA events around
    /// every launch.
    pub fn time(
        &self,
        k: &CudaKernel,
        grid: [u32; 3],
        buffers: &[&CudaBuffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
    ) -> Result<Vec<f64>, CudaError> {
        self.time_flushed(k, grid, buffers, scalars, warmup, runs, None)
    }

    /// As [`CudaRuntime::time`], with `flush` (a buffer larger than the L2 cache) overwritten
    /// before every timed launch, outside its events: each run starts with its inputs out of
    /// the cache, as the Vulkan and wgpu runtimes time them.
    #[allow(clippy::too_many_arguments)]
    pub fn time_flushed(
        &self,
        k: &CudaKernel,
        grid: [u32; 3],
        buffers: &[&CudaBuffer],
        scalars: &[(u32, Scalar)],
        warmup: usize,
        runs: usize,
        flush: Option<&mut CudaBuffer>,
    ) -> Result<Vec<f64>, CudaError> {
        let args = self.check_launch(k, grid, buffers, scalars)?;
        self.time_work(&k.kernel.name, warmup, runs, flush, || self.enqueue(k, grid, buffers, &args))
    }

    /// The timing protocol around any work `enqueue` puts on the stream: warm-up, then one
    /// pair of events around each of `runs` enqueues, `flush` overwritten before each.
    pub(crate) fn time_work(
        &self,
        what: &str,
        warmup: usize,
        runs: usize,
        mut flush: Option<&mut CudaBuffer>,
        mut enqueue: impl FnMut() -> Result<(), CudaError>,
    ) -> Result<Vec<f64>, CudaError> {
        let failed =
            |e: DriverError| CudaError::Launch { kernel: what.to_string(), device: self.info.name.clone(), what: format!("the kernel failed ({e})") };
        tilekit_core::gpu::warmup::warm_up(warmup, |batch| {
            for _ in 0..batch {
                enqueue()?;
            }
            self.stream.synchronize().map_err(failed)
        })?;
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        // Without a flush the runs are back to back and one event ends a run and starts the
        // next; with one, each run has its own pair so the fill stays outside.
        let pairs = flush.is_some();
        let count = if pairs { 2 * runs } else { runs + 1 };
        let events = (0..count).map(|_| self.ctx.new_event(timing)).collect::<Result<Vec<_>, _>>().map_err(self.err("creating events"))?;
        let record = |i: usize| events[i].record(&self.stream).map_err(self.err("recording an event"));
        if !pairs {
            record(0)?;
        }
        for r in 0..runs {
            if let Some(f) = flush.as_deref_mut() {
                self.stream.memset_zeros(&mut f.slice).map_err(self.err("flushing the L2 cache"))?;
                record(2 * r)?;
            }
            enqueue()?;
            record(if pairs { 2 * r + 1 } else { r + 1 })?;
        }
        self.stream.synchronize().map_err(failed)?;
        let elapsed = |a: usize, b: usize| events[a].elapsed_ms(&events[b]).map(|ms| ms as f64 * 1e-3).map_err(self.err("reading an event"));
        (0..runs).map(|r| if pairs { elapsed(2 * r, 2 * r + 1) } else { elapsed(r, r + 1) }).collect()
    }

    /// Waits for everything on the runtime's stream.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream.synchronize().map_err(self.err("waiting for the stream"))
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl CudaBuffer {
    pub(crate) fn slice(&self) -> &CudaSlice<u8> {
        &self.slice
    }
    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<u8> {
        &mut self.slice
    }
}

/// One packed kernel argument.
enum Arg {
    Buffer(usize),
    U32(u32),
    I64(i64),
    F32(f32),
}

/// A scalar as the kernel parameter [`KernelParam::Scalar`] describes.
fn pack_scalar(dtype: DType, s: Scalar) -> Arg {
    let int = |s: Scalar| match s {
        Scalar::Bool(b) => b as i64,
        Scalar::Int(i) => i,
        Scalar::Float(f) => f as i64,
    };
    match dtype {
        DType::I64 => Arg::I64(int(s)),
        DType::F32 => Arg::F32(s.as_f64() as f32),
        // Through f32 first, as the interpreter rounds constants.
        DType::F16 => Arg::U32(f16::from_f32(s.as_f64() as f32).to_bits() as u32),
        DType::BF16 => Arg::U32(bf16::from_f32(s.as_f64() as f32).to_bits() as u32),
        DType::I1 => Arg::U32((int(s) != 0) as u32),
        _ => Arg::U32(int(s) as u32),
    }
}
