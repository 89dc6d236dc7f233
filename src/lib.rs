//! tilekit: Triton's tile programming model in Rust, with cross-vendor performance measurement.
//!
//! A kernel is a tile program built once with [`Builder`]; backends lower it per device; the
//! [`kernels`] library and the [`check`] harness run it anywhere it can reach and compare with an
//! f64 reference. See `tilekit_core` for the IR, the builder, the verifier, the text form and the
//! interpreter.
//!
//! This is the crate an application depends on: the builder, the kernel library, the devices and
//! the launch API, with nothing else. The `tilekit` command, the benchmark and its report, and
//! the fuzzer are the `tilekit-cli` crate (`cli/`), so their dependencies never reach an
//! application's build.

pub mod check;
pub mod device;
pub mod kernels;
pub mod launch;
pub mod runtime;
pub mod tune;

pub use device::{Device, DeviceError};
pub use launch::{Args, DeviceBuffer, Error, IntoScalar, Kernel, LaunchError, LaunchReport};
pub use tilekit_core::{
    builder, cdiv, gpu, instrument, interp, ir, precision, text, verify, Access, Buf, Builder, Config, DType, HostBuffer, Program, Rounding, Scalar,
    Tile, Transfers, Type,
};

/// The wgpu features a caller's device must have been opened with for tilekit to run on it
/// ([`Device::from_wgpu`]): SPIR-V passthrough and immediates (push constants).
#[cfg(feature = "wgpu")]
pub const WGPU_FEATURES: wgpu::Features = tilekit_spirv::wgpu_rt::REQUIRED_FEATURES;
/// The wgpu features a caller's device needs for [`Device::from_wgpu_naga`] (immediates; any
/// backend, no passthrough).
#[cfg(feature = "wgpu")]
pub const WGPU_NAGA_FEATURES: wgpu::Features = tilekit_spirv::wgpu_rt::NAGA_REQUIRED_FEATURES;

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
