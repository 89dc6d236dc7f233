//! tilekit-core: the tile IR and everything that works on it without a GPU.
//!
//! Data flows one way: [`builder`] -> [`ir`] -> [`verify`] -> (GPU lowering, backends) -> runtime.
//! [`text`] prints and parses programs; [`interp`] runs them on the CPU and is the oracle every
//! backend is tested against.
//!
//! ```
//! use tilekit_core::{Builder, DType, HostBuffer, interp::{self, Arg}, Scalar};
//!
//! const BLOCK: usize = 128;
//! let k = Builder::new("add");
//! let x = k.input("x", DType::F32);
//! let y = k.input("y", DType::F32);
//! let out = k.output("out", DType::F32);
//! let n = k.scalar("n", DType::I32);
//! let offs = k.program_id(0) * BLOCK as i32 + k.arange(0, BLOCK as i64);
//! let mask = offs.lt(n);
//! let sum = k.load_masked(x, offs, mask, 0.0) + k.load_masked(y, offs, mask, 0.0);
//! k.store_masked(out, offs, sum, mask);
//! let program = k.finish().unwrap();
//! ```

pub mod buffer;
pub mod builder;
pub mod dtype;
pub mod interp;
pub mod ir;
pub mod text;
pub mod verify;

pub use buffer::{Element, HostBuffer};
pub use builder::{Buf, Builder, Config, ConfigError, Operand, Tile};
pub use dtype::{DType, Scalar};
pub use ir::{Access, Program, Type};
