//! tilekit-cli: the `tilekit` command and what only it needs, apart from the library an
//! application depends on.
//!
//! [`cli`] is the command line (list the kernel library and the devices, print a kernel's IR,
//! run and check kernels); [`mod@bench`] the benchmark suite, its versioned results and the
//! performance-portability report; [`fuzz`] the differential fuzzer. They are written over the
//! public API of the `tilekit` crate, so they hold no device or kernel code of their own, and
//! their dependencies (clap, plotters, schemars, indicatif, sha2) stay out of an
//! application's build.

// The modules were written inside the tilekit crate and name its items as `crate::device`,
// `crate::kernels`, `crate::DType`, ...; importing the library's root here keeps those paths
// meaning what they did, so the command line reads the same as the library's own code.
#[allow(unused_imports)]
use tilekit::*;

pub mod bench;
pub mod cli;
pub mod fuzz;
pub mod tune_cmd;
