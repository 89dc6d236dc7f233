//! GPU lowering (Triton's TTGIR level): targets, layouts and the shared per-thread emission.
//!
//! For one [`Target`], every tile value gets a [`layout::Layout`]: the function from
//! (register, lane, warp) to tile coordinates. [`lower`] walks the tile program and emits the
//! per-thread scalar program through a backend's [`emit::Emitter`].

pub mod emit;
pub mod layout;
pub mod target;

pub use emit::Emitter;
pub use target::{Isa, MatrixInstr, SubgroupOps, Target};
