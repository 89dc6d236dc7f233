//! tilekit-core: the tile IR and everything that works on it without a GPU.
//!
//! Data flows one way: [`builder`] -> [`ir`] -> [`verify`] -> (GPU lowering, backends) -> runtime.
//! [`text`] prints and parses programs; [`interp`] runs them on the CPU and is the oracle every
//! backend is tested against.
//!
//! ```
//! use tilekit_core::interp::{self, Arg};
//! use tilekit_core::{Builder, DType, HostBuffer, Scalar};
//!
//! // A Triton-style vector add: each program handles BLOCK elements; the tail is masked.
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
//! let program = k.finish().expect("the verifier accepts it");
//!
//! // Run it on the interpreter over a grid of ceil(n / BLOCK) programs.
//! let len = 1000;
//! let xs: Vec<f32> = (0..len).map(|i| i as f32).collect();
//! let ys: Vec<f32> = (0..len).map(|i| 0.5 * i as f32).collect();
//! let (xb, yb) = (HostBuffer::from_slice(&xs), HostBuffer::from_slice(&ys));
//! let ob = HostBuffer::zeros(DType::F32, len);
//! let grid = [len.div_ceil(BLOCK) as u32, 1, 1];
//! interp::run(&program, grid, &[
//!     Arg::Buffer(&xb), Arg::Buffer(&yb), Arg::Buffer(&ob), Arg::Scalar(Scalar::Int(len as i64)),
//! ]).unwrap();
//! assert_eq!(ob.to_vec::<f32>().unwrap()[999], 1.5 * 999.0);
//! ```

pub mod buffer;
pub mod builder;
pub mod dtype;
pub mod gpu;
pub mod instrument;
pub mod interp;
pub mod ir;
pub mod precision;
pub mod text;
pub mod transfers;
pub mod verify;

pub use buffer::{Element, HostBuffer};
pub use builder::{cdiv, Buf, Builder, Config, ConfigError, Operand, Rounding, Tile};
pub use dtype::{DType, Scalar};
pub use ir::{Access, InputPrecision, Program, Type};
pub use transfers::{TransferCounter, Transfers};
