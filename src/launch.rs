//! Launching a tile program on any device in a few lines, on buffers that stay on the device.
//!
//! A [`Kernel`] is a builder function (a configuration in, a [`Program`] out) and a name;
//! [`Kernel::launch`] builds the program for the configuration, compiles it for the device (once:
//! the binary is kept in memory per program, configuration and device) and runs it over a grid
//! with [`Args`] given by parameter name. Buffers are [`DeviceBuffer`]s: allocated on a device,
//! uploaded and downloaded only when asked, so a chain of launches moves no data through the host
//! ([`Device::transfers`] counts the copies).
//!
//! ```
//! use tilekit::{Args, Builder, Config, DType, Device, Kernel, Program};
//!
//! // out = 2 * x, BLOCK elements per program, the tail masked.
//! let double = Kernel::new("double", |config: &Config| -> Result<Program, tilekit::Error> {
//!     let block = config.get("BLOCK")?;
//!     let k = Builder::new("double");
//!     let x = k.input("x", DType::F32);
//!     let out = k.output("out", DType::F32);
//!     let n = k.scalar("n", DType::I32);
//!     let offs = k.program_id(0) * block as i32 + k.arange(0, block);
//!     let mask = offs.lt(n);
//!     k.store_masked(out, offs, k.load_masked(x, offs, mask, 0.0) * 2.0, mask);
//!     Ok(k.finish()?)
//! });
//!
//! let device = Device::Interpreter;
//! let n = 1000;
//! let x = device.upload(&tilekit::HostBuffer::from_slice(&vec![1.5f32; n]))?;
//! let out = device.alloc(DType::F32, n)?;
//! let config = Config::new().with("BLOCK", 256);
//! let report = double.launch(&device, [n.div_ceil(256) as u32, 1, 1], &Args::new().arg("x", &x).arg("out", &out).scalar("n", n), &config)?;
//! assert_eq!(out.to_vec::<f32>()?[n - 1], 3.0);
//! assert!(report.compile_time.is_some()); // the first launch compiles; later ones do not
//! # Ok::<(), tilekit::Error>(())
//! ```

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tilekit_core::gpu::lower::LowerOptions;
use tilekit_core::ir::ParamKind;
use tilekit_core::{Config, DType, Element, HostBuffer, Program, Scalar, Transfers};

use crate::device::{Device, DeviceError, TimingOptions};
use crate::runtime::{self, with_runtime, Runtime};

/// Why a launch did not run: the argument, the build, or the device.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("kernel `{kernel}`: no argument for parameter `{param}` ({expected})")]
    Missing { kernel: String, param: String, expected: String },
    #[error("kernel `{kernel}` has no parameter `{name}`; parameters: {params}")]
    Unknown { kernel: String, name: String, params: String },
    #[error("kernel `{kernel}`: argument `{param}` given twice")]
    Twice { kernel: String, param: String },
    /// One buffer given for two parameters. Kernels are compiled for distinct buffers (PTX
    /// declares them `noalias` and reads inputs through the read-only cache; SPIR-V's distinct
    /// variables may be assumed not to alias), so an in-place launch could read stale data on
    /// one device and not on another: every device refuses it alike.
    #[error("kernel `{kernel}`: parameters `{first}` and `{second}` are given the same buffer; kernels take distinct buffers (write to another buffer, then swap)")]
    Aliased { kernel: String, first: String, second: String },
    #[error("kernel `{kernel}`, parameter `{param}`: expected {expected}, given {given}")]
    Mismatch { kernel: String, param: String, expected: String, given: String },
    #[error("kernel `{kernel}` failed to build for {config}: {source}")]
    Build { kernel: String, config: String, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("kernel `{kernel}`: {what}")]
    Unsupported { kernel: String, what: String },
    #[error("kernel `{kernel}`: {source}")]
    Device { kernel: String, source: Box<DeviceError> },
}

/// Any error of building, launching or moving data: what examples and applications `?` into.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Verify(#[from] tilekit_core::verify::VerifyError),
    #[error(transparent)]
    Config(#[from] tilekit_core::ConfigError),
    #[error(transparent)]
    Kernel(#[from] crate::kernels::KernelError),
}

/// A buffer held by one runtime.
trait Held: Send + Sync {
    fn download(&self) -> Result<HostBuffer, DeviceError>;
    fn upload(&mut self, host: &HostBuffer) -> Result<(), DeviceError>;
    fn as_any(&self) -> &dyn Any;
}

struct On<R: Runtime> {
    rt: Arc<R>,
    buffer: R::Buffer,
}

impl<R: Runtime> Held for On<R> {
    fn download(&self) -> Result<HostBuffer, DeviceError> {
        self.rt.download(&self.buffer)
    }
    fn upload(&mut self, host: &HostBuffer) -> Result<(), DeviceError> {
        self.rt.upload(&mut self.buffer, host)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A buffer of `len` elements of `dtype` in a device's memory. It stays there across launches;
/// data moves to and from the host only through [`DeviceBuffer::upload`] and
/// [`DeviceBuffer::download`] (and [`Device::upload`], which allocates and uploads).
pub struct DeviceBuffer {
    device: Device,
    dtype: DType,
    len: usize,
    held: Box<dyn Held>,
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceBuffer({} x {} on {})", self.len, self.dtype, self.device)
    }
}

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
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Copies `host` (same dtype and length) into the buffer.
    pub fn upload(&mut self, host: &HostBuffer) -> Result<(), DeviceError> {
        if host.dtype() != self.dtype || host.len() != self.len {
            return Err(DeviceError::Transfer {
                device: self.device.name(),
                what: format!("upload of {} x {} into a device buffer of {} x {}", host.len(), host.dtype(), self.len, self.dtype),
            });
        }
        self.held.upload(host)
    }

    /// A host copy of the buffer (waits for the launches that write it).
    pub fn download(&self) -> Result<HostBuffer, DeviceError> {
        self.held.download()
    }

    /// The buffer's elements as `T` (which must be its dtype's Rust type).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, DeviceError> {
        let host = self.download()?;
        host.to_vec::<T>().ok_or_else(|| DeviceError::Transfer {
            device: self.device.name(),
            what: format!("the buffer holds {}, not {}", self.dtype, std::any::type_name::<T>()),
        })
    }

    /// The runtime's buffer, when the buffer lives on runtime `R` (`rt`).
    fn on<R: Runtime>(&self, rt: &Arc<R>) -> Option<&R::Buffer> {
        self.held.as_any().downcast_ref::<On<R>>().filter(|on| Arc::ptr_eq(&on.rt, rt)).map(|on| &on.buffer)
    }
}

fn held<R: Runtime>(rt: &Arc<R>, dtype: DType, len: usize) -> Result<DeviceBuffer, DeviceError> {
    let buffer = rt.alloc(dtype, len)?;
    Ok(DeviceBuffer { device: rt.device().clone(), dtype, len, held: Box::new(On { rt: rt.clone(), buffer }) })
}

impl Device {
    /// A buffer of `len` elements of `dtype` on this device. Its contents are unspecified until
    /// written (zeros on the CPU devices, CUDA and wgpu); [`Device::zeros`] guarantees zeros.
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, DeviceError> {
        with_runtime!(self, |rt| held(rt, dtype, len))
    }

    /// A zero-filled buffer.
    pub fn zeros(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, DeviceError> {
        self.upload(&HostBuffer::zeros(dtype, len))
    }

    /// A buffer holding a copy of `host`.
    pub fn upload(&self, host: &HostBuffer) -> Result<DeviceBuffer, DeviceError> {
        let mut b = self.alloc(host.dtype(), host.len())?;
        b.upload(host)?;
        Ok(b)
    }

    /// Host <-> device copies made so far through this device's runtime.
    pub fn transfers(&self) -> Result<Transfers, DeviceError> {
        with_runtime!(self, |rt| Ok(rt.transfers()))
    }

    /// Waits for everything launched on this device.
    pub fn synchronize(&self) -> Result<(), DeviceError> {
        with_runtime!(self, |rt| rt.synchronize())
    }

    /// The best device present: a CUDA GPU, else a Vulkan GPU, else lavapipe (Vulkan on the
    /// CPU), else the interpreter. Vulkan devices go through the raw Vulkan runtime where it is
    /// built, else through wgpu.
    pub fn best() -> Device {
        #[allow(unused_variables)] // a build without GPU runtimes has only the interpreter
        let gpus = Device::gpus();
        #[cfg(any(feature = "ptx", feature = "ptx-static"))]
        if let Some(d) = gpus.iter().find(|d| matches!(d, Device::Cuda { .. })) {
            return d.clone();
        }
        #[cfg(any(feature = "vulkan", feature = "wgpu"))]
        {
            let vulkan: Vec<&Device> = gpus.iter().filter(|d| d.name().starts_with("vulkan:")).collect();
            let vulkan = if vulkan.is_empty() { gpus.iter().filter(|d| d.name().starts_with("wgpu:")).collect() } else { vulkan };
            let infos = tilekit_spirv::VulkanRuntime::devices().unwrap_or_default();
            let cpu = |d: &Device| {
                let name = d.name();
                let name = name.split_once(':').map_or("", |(_, n)| n);
                infos.iter().find(|i| i.name == name).map_or(true, |i| i.device_type == "cpu")
            };
            if let Some(d) = vulkan.iter().find(|d| !cpu(d)).or_else(|| vulkan.first()) {
                return (*d).clone();
            }
        }
        Device::Interpreter
    }
}

#[cfg(feature = "wgpu")]
impl Device {
    /// A device for a caller's wgpu device and queue (an engine's): kernels run on it, and
    /// [`DeviceBuffer::from_wgpu`] wraps the caller's buffers. `target` is what kernels compile
    /// for (`Target::vulkan_baseline()` where unsure); its cooperative matrices are used only
    /// where the device was opened with wgpu's `EXPERIMENTAL_COOPERATIVE_MATRIX`. The device is
    /// known by `name` from now on; a later call with the same name replaces it.
    pub fn from_wgpu(
        name: &str,
        device: wgpu::Device,
        queue: wgpu::Queue,
        adapter_info: wgpu::AdapterInfo,
        target: tilekit_core::gpu::Target,
    ) -> Result<Device, DeviceError> {
        // Cooperative matrices only where the caller's device enabled them (wgpu's
        // EXPERIMENTAL_COOPERATIVE_MATRIX); elsewhere `dot` keeps its other lowerings.
        let mut target = target;
        tilekit_spirv::keep_wgpu_matrix_instrs(&mut target, device.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX));
        let d = Device::Wgpu { name: name.to_string(), target, naga: false };
        Device::adopt_wgpu(d, tilekit_spirv::WgpuRuntime::from_device(device, queue, adapter_info))
    }

    /// Registers the runtime `rt` wraps a caller's device in as device `d`.
    fn adopt_wgpu(d: Device, rt: Result<tilekit_spirv::WgpuRuntime, tilekit_spirv::WgpuError>) -> Result<Device, DeviceError> {
        let rt = rt.map_err(|source| DeviceError::Wgpu { device: d.name(), source })?;
        runtime::WgpuRuntime::adopt(d.clone(), rt);
        Ok(d)
    }

    /// [`Device::from_wgpu`] through naga: kernels become naga modules that wgpu writes for the
    /// caller's backend (Vulkan, Metal, DX12, GL), so the device needs only `IMMEDIATES`, not
    /// passthrough; `SUBGROUP`, where the caller enabled it and the adapter has one subgroup
    /// size, gives lane shuffles. `target` is the device's (what the adapter can do); the
    /// kernels compile for [`tilekit_naga::target_for`] it. WGSL's floating-point rules hold
    /// there (docs/semantics.md).
    pub fn from_wgpu_naga(
        name: &str,
        device: wgpu::Device,
        queue: wgpu::Queue,
        adapter_info: wgpu::AdapterInfo,
        target: tilekit_core::gpu::Target,
    ) -> Result<Device, DeviceError> {
        let shuffles = device.features().contains(wgpu::Features::SUBGROUP) && adapter_info.subgroup_min_size == adapter_info.subgroup_max_size;
        let d = Device::Wgpu { name: name.to_string(), target: tilekit_naga::target_for(&target, shuffles), naga: true };
        Device::adopt_wgpu(d, tilekit_spirv::WgpuRuntime::from_device_for_naga(device, queue, adapter_info))
    }

    /// The wgpu runtime behind a wgpu device: its device and queue.
    pub fn wgpu(&self) -> Result<Arc<runtime::WgpuRuntime>, DeviceError> {
        match self {
            Device::Wgpu { .. } => runtime::WgpuRuntime::open(self),
            _ => Err(DeviceError::Transfer { device: self.name(), what: "not a wgpu device".into() }),
        }
    }
}

impl DeviceBuffer {
    /// Whether `self` and `other` are the same device memory: one buffer, or two wrappers of
    /// one `wgpu::Buffer`.
    fn same_memory(&self, other: &DeviceBuffer) -> bool {
        #[cfg(feature = "wgpu")]
        if matches!((self.as_wgpu(), other.as_wgpu()), (Some(a), Some(b)) if a == b) {
            return true;
        }
        std::ptr::eq(self, other)
    }
}

#[cfg(feature = "wgpu")]
impl DeviceBuffer {
    /// Wraps a caller's `wgpu::Buffer` (STORAGE usage; COPY_SRC / COPY_DST to download and
    /// upload) holding `len` elements of `dtype`, on a wgpu `device`.
    pub fn from_wgpu(device: &Device, buffer: wgpu::Buffer, dtype: DType, len: usize) -> Result<DeviceBuffer, DeviceError> {
        let rt = device.wgpu()?;
        let mut b = tilekit_spirv::WgpuBuffer::from_raw(buffer, dtype, len);
        b.device = Some(rt.raw().device().clone());
        Ok(DeviceBuffer { device: device.clone(), dtype, len, held: Box::new(On { rt, buffer: b }) })
    }

    /// The `wgpu::Buffer` behind a buffer of a wgpu device.
    pub fn as_wgpu(&self) -> Option<&wgpu::Buffer> {
        self.held.as_any().downcast_ref::<On<runtime::WgpuRuntime>>().map(|on| &on.buffer.buffer)
    }
}

/// One argument: a buffer or a scalar.
#[derive(Clone, Copy, Debug)]
enum Value<'a> {
    Buffer(&'a DeviceBuffer),
    Scalar(Scalar),
}

/// A kernel's arguments, by parameter name: `Args::new().arg("x", &x).scalar("n", 17)`.
#[derive(Clone, Debug, Default)]
pub struct Args<'a> {
    values: Vec<(String, Value<'a>)>,
}

/// A Rust value a scalar parameter takes.
pub trait IntoScalar {
    fn into_scalar(self) -> Scalar;
}

macro_rules! into_scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl IntoScalar for $t {
            fn into_scalar(self) -> Scalar {
                Scalar::$v(self as _)
            }
        }
    )*};
}
into_scalar!(i8 => Int, i16 => Int, i32 => Int, i64 => Int, u8 => Int, u16 => Int, u32 => Int, usize => Int, f32 => Float, f64 => Float);

impl IntoScalar for bool {
    fn into_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
}

impl IntoScalar for Scalar {
    fn into_scalar(self) -> Scalar {
        self
    }
}

impl<'a> Args<'a> {
    pub fn new() -> Args<'a> {
        Args::default()
    }

    /// The buffer for parameter `name`.
    pub fn arg(mut self, name: &str, buffer: &'a DeviceBuffer) -> Args<'a> {
        self.values.push((name.to_string(), Value::Buffer(buffer)));
        self
    }

    /// The value of scalar parameter `name`.
    pub fn scalar(mut self, name: &str, value: impl IntoScalar) -> Args<'a> {
        self.values.push((name.to_string(), Value::Scalar(value.into_scalar())));
        self
    }
}

fn scalar_text(s: &Scalar) -> String {
    match s {
        Scalar::Bool(b) => format!("the bool {b}"),
        Scalar::Int(i) => format!("the integer {i}"),
        Scalar::Float(f) => format!("the float {f}"),
    }
}

/// Whether `s` is a value of a scalar parameter of `dtype` (an integer fits the dtype's range;
/// a float parameter takes integers too).
fn scalar_fits(s: &Scalar, dtype: DType) -> bool {
    match (s, dtype) {
        (Scalar::Bool(_), DType::I1) => true,
        (Scalar::Int(_) | Scalar::Float(_), d) if d.is_float() => true,
        (Scalar::Int(i), d) => d != DType::I1 && i64_fits(*i, d),
        _ => false,
    }
}

fn i64_fits(i: i64, d: DType) -> bool {
    let (lo, hi): (i128, i128) = match d {
        DType::I8 => (i8::MIN as i128, i8::MAX as i128),
        DType::U8 => (0, u8::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        _ => (i64::MIN as i128, i64::MAX as i128),
    };
    (lo..=hi).contains(&(i as i128))
}

/// A configuration, a runtime's key and the launch's lowering options: what a kernel keeps a
/// compiled binary under.
type CompiledKey = (Config, String, LowerOptions);

/// A compiled kernel and, when it was compiled now, how long that took.
type Compiled<K> = (Arc<Mutex<K>>, Option<Duration>);

/// What a kernel's build function gives: a program or the reason it has none.
type BuildResult = Result<Program, Box<dyn std::error::Error + Send + Sync>>;

/// A tile program by builder function, launched on any device. Programs are built once per
/// configuration and compiled once per (configuration, device, launch specialisation); both
/// live as long as the kernel (compiled binaries are also shared by kernels of the same program
/// text, [`crate::runtime::kernel`]).
pub struct Kernel {
    name: String,
    build: Box<dyn Fn(&Config) -> BuildResult + Send + Sync>,
    programs: Mutex<HashMap<Config, Arc<Program>>>,
    compiled: Mutex<HashMap<CompiledKey, Arc<dyn Any + Send + Sync>>>,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kernel({})", self.name)
    }
}

/// What one launch cost: compiling (absent when the binary came from the cache) and running.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LaunchReport {
    pub compile_time: Option<Duration>,
    /// Wall time of the launch, from submission until the device finished it.
    pub run_time: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A launch made ready on a runtime: its buffers in binding order, its scalars with their
/// parameter index, the kernel and its compile time (when compiled now).
struct Prepared<'a, R: Runtime> {
    buffers: Vec<&'a R::Buffer>,
    scalars: Vec<(u32, Scalar)>,
    kernel: Arc<Mutex<R::Kernel>>,
    compile_time: Option<Duration>,
}

/// A launch's arguments resolved against the program: buffers in binding order, scalars with
/// their parameter index.
struct Resolved<'a> {
    buffers: Vec<(&'a str, &'a DeviceBuffer)>,
    scalars: Vec<(u32, Scalar)>,
}

impl Kernel {
    /// A kernel called `name` whose programs `build` makes for a configuration.
    pub fn new<E>(name: &str, build: impl Fn(&Config) -> Result<Program, E> + Send + Sync + 'static) -> Kernel
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Kernel {
            name: name.to_string(),
            build: Box::new(move |c| build(c).map_err(Into::into)),
            programs: Mutex::default(),
            compiled: Mutex::default(),
        }
    }

    /// A kernel of one program, whatever the configuration (which still gives `num_warps`).
    pub fn from_program(program: Program) -> Kernel {
        let name = program.name.clone();
        Kernel::new(&name, move |_: &Config| Ok::<_, LaunchError>(program.clone()))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The program for `config`, built on first use.
    pub fn program(&self, config: &Config) -> Result<Arc<Program>, LaunchError> {
        if let Some(p) = lock(&self.programs).get(config) {
            return Ok(p.clone());
        }
        let p =
            Arc::new((self.build)(config).map_err(|source| LaunchError::Build { kernel: self.name.clone(), config: config.to_string(), source })?);
        lock(&self.programs).insert(config.clone(), p.clone());
        Ok(p)
    }

    fn resolve<'a>(&self, program: &'a Program, args: &Args<'a>) -> Result<Resolved<'a>, LaunchError> {
        let kernel = || self.name.clone();
        for (i, (name, _)) in args.values.iter().enumerate() {
            if !program.params.iter().any(|p| &p.name == name) {
                let params = program.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
                return Err(LaunchError::Unknown { kernel: kernel(), name: name.clone(), params });
            }
            if args.values[..i].iter().any(|(n, _)| n == name) {
                return Err(LaunchError::Twice { kernel: kernel(), param: name.clone() });
            }
        }
        let mut out = Resolved { buffers: Vec::new(), scalars: Vec::new() };
        for (pi, p) in program.params.iter().enumerate() {
            let expected = match &p.kind {
                ParamKind::Buffer { dtype, .. } => format!("a buffer of {dtype}"),
                ParamKind::Scalar { dtype } => format!("a scalar of {dtype}"),
            };
            let given = args.values.iter().find(|(n, _)| *n == p.name).map(|(_, v)| *v);
            let mismatch = |given: String| LaunchError::Mismatch { kernel: kernel(), param: p.name.clone(), expected: expected.clone(), given };
            match (&p.kind, given) {
                (_, None) => return Err(LaunchError::Missing { kernel: kernel(), param: p.name.clone(), expected }),
                (ParamKind::Buffer { dtype, .. }, Some(Value::Buffer(b))) => {
                    if b.dtype != *dtype {
                        return Err(mismatch(format!("a buffer of {} x {}", b.len, b.dtype)));
                    }
                    out.buffers.push((p.name.as_str(), b));
                }
                (ParamKind::Buffer { .. }, Some(Value::Scalar(s))) => return Err(mismatch(scalar_text(&s))),
                (ParamKind::Scalar { .. }, Some(Value::Buffer(b))) => return Err(mismatch(format!("a buffer of {} x {}", b.len, b.dtype))),
                (ParamKind::Scalar { dtype }, Some(Value::Scalar(s))) => {
                    if !scalar_fits(&s, *dtype) {
                        return Err(mismatch(scalar_text(&s)));
                    }
                    out.scalars.push((pi as u32, s));
                }
            }
        }
        for (i, (second, b)) in out.buffers.iter().enumerate() {
            if let Some((first, _)) = out.buffers[..i].iter().find(|(_, a)| a.same_memory(b)) {
                return Err(LaunchError::Aliased { kernel: kernel(), first: first.to_string(), second: second.to_string() });
            }
        }
        Ok(out)
    }

    /// The compiled kernel for `program` on `rt`, with the compile time when compiled now.
    fn compiled<R: Runtime>(
        &self,
        rt: &Arc<R>,
        config: &Config,
        program: &Program,
        options: &LowerOptions,
    ) -> Result<Compiled<R::Kernel>, DeviceError> {
        let key = (config.clone(), rt.key(), *options);
        if let Some(k) = lock(&self.compiled).get(&key).and_then(|k| k.clone().downcast::<Mutex<R::Kernel>>().ok()) {
            return Ok((k, None));
        }
        let fetched = runtime::kernel(&**rt, program, options)?;
        if R::CACHES_KERNELS {
            lock(&self.compiled).insert(key, fetched.kernel.clone());
        }
        Ok((fetched.kernel, fetched.compile_time))
    }

    /// Everything a launch on `rt` needs: the program's arguments on `rt`, the kernel.
    fn prepare<'a, R: Runtime>(
        &self,
        rt: &Arc<R>,
        program: &'a Program,
        grid: [u32; 3],
        args: &Args<'a>,
        config: &Config,
    ) -> Result<Prepared<'a, R>, LaunchError> {
        let resolved = self.resolve(program, args)?;
        let device = rt.device();
        let buffers = resolved
            .buffers
            .iter()
            .map(|(name, b)| {
                b.on(rt).ok_or_else(|| LaunchError::Mismatch {
                    kernel: self.name.clone(),
                    param: name.to_string(),
                    expected: format!("a buffer on {device}"),
                    given: if b.device == *device {
                        format!("a buffer of an earlier runtime of {device} (the device was lost and reopened)")
                    } else {
                        format!("a buffer on {}", b.device)
                    },
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let base = LowerOptions::for_config(config);
        base.check().map_err(|e| self.device_err(e.into()))?;
        let options = base
            .specialize(resolved.scalars.iter().map(|(p, s)| (*p, s)))
            .with_fold_grid(rt.needs_fold(grid))
            .with_element_bindings(rt.element_bindings(&buffers));
        let (kernel, compile_time) = self.compiled(rt, config, program, &options).map_err(|e| self.device_err(e))?;
        Ok(Prepared { buffers, scalars: resolved.scalars, kernel, compile_time })
    }

    fn device_err(&self, source: DeviceError) -> LaunchError {
        LaunchError::Device { kernel: self.name.clone(), source: Box::new(source) }
    }

    fn launch_on<R: Runtime>(
        &self,
        rt: &Arc<R>,
        program: &Program,
        grid: [u32; 3],
        args: &Args<'_>,
        config: &Config,
    ) -> Result<LaunchReport, LaunchError> {
        let Prepared { buffers, scalars, kernel, compile_time } = self.prepare(rt, program, grid, args, config)?;
        let start = Instant::now();
        runtime::with_kernel(&kernel, |k| rt.launch(k, grid, &buffers, &scalars)).map_err(|e| self.device_err(e))?;
        rt.synchronize().map_err(|e| self.device_err(e))?;
        let run_time = start.elapsed();
        let messages = rt.take_messages();
        if !messages.is_empty() {
            return Err(self.device_err(DeviceError::Validation { device: rt.device().name(), program: program.name.clone(), messages }));
        }
        Ok(LaunchReport { compile_time, run_time })
    }

    /// Runs the program for `config` over `grid` programs on `device` with `args` (every
    /// parameter by name), and waits for it. The first launch for a (configuration, device,
    /// specialisation) compiles; the report says how long that took, apart from the run.
    pub fn launch(&self, device: &Device, grid: [u32; 3], args: &Args<'_>, config: &Config) -> Result<LaunchReport, LaunchError> {
        let program = self.program(config)?;
        let run = || -> Result<Result<LaunchReport, LaunchError>, DeviceError> {
            with_runtime!(device, |rt| Ok(self.launch_on(rt, &program, grid, args, config)))
        };
        run().map_err(|e| self.device_err(e))?
    }

    /// Device time of each of `timing.runs` launches after `timing.warmup` untimed ones, in
    /// seconds (device timestamps on GPUs, the wall clock on the CPU devices). With
    /// `timing.flush_bytes` set, that much device memory is overwritten before each timed launch
    /// so that it starts with cold caches, as `tilekit bench` times; the arguments' buffers keep
    /// their contents on the device (`read_back` does not apply: nothing is copied to the host).
    pub fn time(&self, device: &Device, grid: [u32; 3], args: &Args<'_>, config: &Config, timing: &TimingOptions) -> Result<Vec<f64>, LaunchError> {
        let program = self.program(config)?;
        fn time_on<R: Runtime>(
            k: &Kernel,
            rt: &Arc<R>,
            program: &Program,
            grid: [u32; 3],
            args: &Args<'_>,
            config: &Config,
            timing: &TimingOptions,
        ) -> Result<Vec<f64>, LaunchError> {
            let Prepared { buffers, scalars, kernel, .. } = k.prepare(rt, program, grid, args, config)?;
            let mut flush = rt.flush(timing.flush_bytes).map_err(|e| k.device_err(e))?;
            runtime::with_kernel(&kernel, |kernel| rt.time(kernel, grid, &buffers, &scalars, timing.warmup, timing.runs, &mut flush))
                .map_err(|e| k.device_err(e))
        }
        let run = || -> Result<Result<Vec<f64>, LaunchError>, DeviceError> {
            with_runtime!(device, |rt| Ok(time_on(self, rt, &program, grid, args, config, timing)))
        };
        run().map_err(|e| self.device_err(e))?
    }

    /// Records one launch into a caller's wgpu `encoder` (which the caller finishes and submits
    /// with its own work around it), on a wgpu device. Returns the compile time when it
    /// compiled.
    #[cfg(feature = "wgpu")]
    pub fn record(
        &self,
        device: &Device,
        encoder: &mut wgpu::CommandEncoder,
        grid: [u32; 3],
        args: &Args<'_>,
        config: &Config,
    ) -> Result<Option<Duration>, LaunchError> {
        let program = self.program(config)?;
        let rt = device.wgpu().map_err(|_| LaunchError::Unsupported {
            kernel: self.name.clone(),
            what: format!("recording into a wgpu command encoder needs a wgpu device, not {device}"),
        })?;
        let Prepared { buffers, scalars, kernel, compile_time } = self.prepare(&rt, &program, grid, args, config)?;
        runtime::with_kernel(&kernel, |k| rt.raw().record(encoder, k, grid, &runtime::wgpu_args(&buffers), &scalars))
            .map_err(|e| self.device_err(rt.err(e)))?;
        Ok(compile_time)
    }
}
