//! A tiled f32 transpose, launched on the best device present.
//!
//! `cargo run --release --example transpose [ROWS COLS]`
//!
//! The kernel is `tilekit::kernels::transpose::build`: each program loads a tile and stores its
//! `trans` at the mirrored place, as a user writes it first; where the elements change threads
//! is the lowering's business.

use tilekit::kernels::transpose;
use tilekit::{Args, Config, DType, Device, HostBuffer, Kernel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut dims = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let rows = dims.next().transpose()?.unwrap_or(1000);
    let cols = dims.next().transpose()?.unwrap_or(777);
    let kernel = Kernel::new("transpose", |config: &Config| transpose::build(DType::F32, config));
    let device = Device::best();
    let xs: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let x = device.upload(&HostBuffer::from_slice(&xs))?;
    let y = device.alloc(DType::F32, rows * cols)?;
    let config = Config::new().with("BLOCK_R", 64).with("BLOCK_C", 64).with("num_warps", 4);
    let args = Args::new().arg("x", &x).arg("y", &y).scalar("ROWS", rows as i32).scalar("COLS", cols as i32);
    let grid = [rows.div_ceil(64) as u32, cols.div_ceil(64) as u32, 1];
    let report = kernel.launch(&device, grid, &args, &config)?;
    let got = y.to_vec::<f32>()?;
    let wrong = (0..rows * cols).filter(|&i| got[i] != xs[(i % rows) * cols + i / rows]).count();
    println!("{device}: transpose of {rows} x {cols} f32 compiled in {:?}, ran in {:?}; {wrong} wrong", report.compile_time, report.run_time);
    if wrong > 0 {
        return Err(format!("{wrong} elements differ from x^T").into());
    }
    Ok(())
}
