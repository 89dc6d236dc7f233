//! GELU (tanh form) over bf16, launched on the best device present.
//!
//! `cargo run --release --example gelu [N]`
//!
//! The kernel is `tilekit::kernels::gelu::build`, written the way a user writes an elementwise
//! kernel first: `BLOCK` elements per program, the last one masked, f32 math. This program is
//! the host side: upload, launch by parameter name, download, and compare with f64.

use tilekit::kernels::gelu;
use tilekit::{Args, Config, DType, Device, HostBuffer, Kernel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(1_000_003);
    let kernel = Kernel::new("gelu", |config: &Config| gelu::build(DType::BF16, config));
    let device = Device::best();
    let xs: Vec<f64> = (0..n).map(|i| ((i * 7919) % 10_007) as f64 / 1000.0 - 5.0).collect();
    let x = device.upload(&HostBuffer::from_f64(DType::BF16, &xs))?;
    let y = device.alloc(DType::BF16, n)?;
    let config = Config::new().with("BLOCK", 1024).with("num_warps", 4);
    let args = Args::new().arg("x", &x).arg("y", &y).scalar("n", n as i32);
    let report = kernel.launch(&device, [n.div_ceil(1024) as u32, 1, 1], &args, &config)?;
    let got = y.download()?.to_f64();
    // x as stored (rounded to bf16), then one rounding of the result: 2^-8 relative.
    let stored = x.download()?.to_f64();
    let worst = stored.iter().zip(&got).map(|(&x, &g)| (g - gelu::gelu_f64(x)).abs() / gelu::gelu_f64(x).abs().max(1e-3)).fold(0.0, f64::max);
    println!("{device}: gelu over {n} bf16 compiled in {:?}, ran in {:?}; worst relative error {worst:.2e}", report.compile_time, report.run_time);
    if worst > 1e-2 {
        return Err(format!("relative error {worst} exceeds bf16's rounding").into());
    }
    Ok(())
}
