//! Cross-entropy loss per row of logits, launched on the best device present.
//!
//! `cargo run --release --example cross_entropy [ROWS V]`
//!
//! The kernel is `tilekit::kernels::cross_entropy::build`: one program per row, an online
//! logsumexp over blocks of the row, the label's logit by a scalar load.

use tilekit::kernels::cross_entropy;
use tilekit::{Args, Config, DType, Device, HostBuffer, Kernel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut dims = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let rows = dims.next().transpose()?.unwrap_or(64);
    let v = dims.next().transpose()?.unwrap_or(32_000);
    let kernel = Kernel::new("cross_entropy", |config: &Config| cross_entropy::build(DType::F32, config));
    let device = Device::best();
    let logits: Vec<f32> = (0..rows * v).map(|i| ((i * 7919) % 10_007) as f32 / 1250.0 - 4.0).collect();
    let labels: Vec<i32> = (0..rows).map(|r| ((r * 4093) % v) as i32).collect();
    let x = device.upload(&HostBuffer::from_slice(&logits))?;
    let l = device.upload(&HostBuffer::from_slice(&labels))?;
    let loss = device.alloc(DType::F32, rows)?;
    let config = Config::new().with("BLOCK", 2048).with("num_warps", 8);
    let args = Args::new().arg("logits", &x).arg("labels", &l).arg("loss", &loss).scalar("V", v as i32);
    let report = kernel.launch(&device, [rows as u32, 1, 1], &args, &config)?;
    let want = cross_entropy::reference_rows(
        &logits.iter().map(|&x| x as f64).collect::<Vec<_>>(),
        &labels.iter().map(|&l| l as f64).collect::<Vec<_>>(),
        v,
    );
    let got = loss.to_vec::<f32>()?;
    let worst = got.iter().zip(&want).map(|(&g, &w)| (g as f64 - w).abs() / w.abs().max(1.0)).fold(0.0, f64::max);
    println!(
        "{device}: cross-entropy over {rows} x {v} compiled in {:?}, ran in {:?}; worst error {worst:.2e}",
        report.compile_time, report.run_time
    );
    if worst > 1e-4 {
        return Err(format!("loss error {worst} is beyond f32 arithmetic").into());
    }
    Ok(())
}
