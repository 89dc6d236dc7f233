//! Benchmarks and the cross-platform performance report.
//!
//! `tilekit bench` runs a [`suite`] of problems over the kernel library on every device it can
//! reach ([`runner`]): each (kernel, problem, configuration) is first checked against the f64
//! reference on the device, and only a right answer is timed, with device timestamps, warm-up,
//! an explicit cache policy and every sample kept. Ceilings (copy bandwidth) and baselines
//! (hand-written WGSL through wgpu, [`wgsl`]; cuBLAS on CUDA devices, `cublas`) are measured by the same run. Results go to a
//! versioned JSON file ([`schema`]); `tilekit report` merges any number of them and renders
//! Markdown, HTML with SVG charts and a CSV ([`report`]), with the performance-portability
//! metric ([`pp`]).

pub mod cmd;
pub mod copy;
#[cfg(any(feature = "ptx", feature = "ptx-static"))]
pub mod cublas;
pub mod pp;
pub mod report;
pub mod runner;
pub mod schema;
pub mod stats;
pub mod suite;
pub mod wgsl;

pub use schema::{Entry, Platform, Results, ResultsError, Status, SCHEMA_VERSION};
