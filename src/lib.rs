//! tilekit: Triton's tile programming model in Rust, with cross-vendor performance measurement.
//!
//! A kernel is a tile program built once with [`Builder`]; backends lower it per device; the
//! [`kernels`] library and the [`check`] harness run it anywhere it can reach and compare with an
//! f64 reference. See `tilekit_core` for the IR, the builder, the verifier, the text form and the
//! interpreter.

pub mod bench;
pub mod check;
pub mod cli;
pub mod device;
pub mod fuzz;
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

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
