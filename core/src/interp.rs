//! The interpreter: runs a tile program over its grid on the CPU. (Being written.)

use crate::buffer::HostBuffer;
use crate::ir::{Program, Scalar};

/// A launch argument, one per program parameter, in order.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Buffer(&'a HostBuffer),
    Scalar(Scalar),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    #[error("{0}")]
    Other(String),
}

pub fn run(_program: &Program, _grid: [u32; 3], _args: &[Arg<'_>]) -> Result<(), InterpError> {
    Err(InterpError::Other("the interpreter is not written yet".into()))
}
