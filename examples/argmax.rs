//! Index of each row's maximum, launched on the best device present.
//!
//! `cargo run --release --example argmax [ROWS COLS]`
//!
//! The kernel is `tilekit::kernels::argmax::build`: one program per row, a running best value
//! and column per lane over blocks of the row, then the best of the lanes (the first on ties).

use tilekit::kernels::argmax;
use tilekit::{Args, Config, DType, Device, HostBuffer, Kernel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut dims = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let rows = dims.next().transpose()?.unwrap_or(100);
    let cols = dims.next().transpose()?.unwrap_or(5003);
    let kernel = Kernel::new("argmax", |config: &Config| argmax::build(DType::F32, config));
    let device = Device::best();
    let xs: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 10_007) as f32).collect();
    let x = device.upload(&HostBuffer::from_slice(&xs))?;
    let index = device.alloc(DType::I32, rows)?;
    let config = Config::new().with("BLOCK", 2048).with("num_warps", 8);
    let args = Args::new().arg("x", &x).arg("index", &index).scalar("COLS", cols as i32);
    let report = kernel.launch(&device, [rows as u32, 1, 1], &args, &config)?;
    let want = argmax::reference_rows(&xs.iter().map(|&x| x as f64).collect::<Vec<_>>(), cols);
    let got = index.to_vec::<i32>()?;
    let wrong = got.iter().zip(&want).filter(|(&g, &w)| g as f64 != w).count();
    println!("{device}: argmax of {rows} rows of {cols} compiled in {:?}, ran in {:?}; {wrong} rows wrong", report.compile_time, report.run_time);
    if wrong > 0 {
        return Err(format!("{wrong} rows differ from the reference").into());
    }
    Ok(())
}
