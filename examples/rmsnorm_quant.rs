//! Residual add, RMSNorm and int8 quantisation fused, launched on the best device present.
//!
//! `cargo run --release --example rmsnorm_quant [ROWS COLS]`
//!
//! The kernel is `tilekit::kernels::rmsnorm_quant::build`: one program per row, the whole row
//! in one block, as a user writes it first. It writes the new residual stream `h` (bf16), the
//! quantised row `q` (i8) and the row's scale (f32).

use tilekit::kernels::rmsnorm_quant;
use tilekit::{Args, Config, DType, Device, HostBuffer, Kernel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut dims = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let rows = dims.next().transpose()?.unwrap_or(33);
    let cols = dims.next().transpose()?.unwrap_or(4099);
    let block = cols.next_power_of_two();
    let kernel = Kernel::new("rmsnorm_quant", move |_: &Config| rmsnorm_quant::build(DType::BF16, block));
    let device = Device::best();
    let wave = |k: usize| -> Vec<f64> { (0..rows * cols).map(|i| (((i * k) % 1009) as f64 / 252.0) - 2.0).collect() };
    let x = device.upload(&HostBuffer::from_f64(DType::BF16, &wave(31)))?;
    let residual = device.upload(&HostBuffer::from_f64(DType::BF16, &wave(17)))?;
    let w = device.upload(&HostBuffer::from_f64(DType::BF16, &(0..cols).map(|c| 0.5 + (c % 7) as f64 / 7.0).collect::<Vec<_>>()))?;
    let h = device.alloc(DType::BF16, rows * cols)?;
    let q = device.alloc(DType::I8, rows * cols)?;
    let scale = device.alloc(DType::F32, rows)?;
    let config = Config::new().with("num_warps", 8);
    let args =
        Args::new().arg("x", &x).arg("residual", &residual).arg("w", &w).arg("h", &h).arg("q", &q).arg("scale", &scale).scalar("cols", cols as i32);
    let report = kernel.launch(&device, [rows as u32, 1, 1], &args, &config)?;
    let (_, want_q, _) = rmsnorm_quant::reference_rows(&x.download()?.to_f64(), &residual.download()?.to_f64(), &w.download()?.to_f64(), cols);
    let got_q = q.download()?.to_f64();
    let off = got_q.iter().zip(&want_q).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
    println!(
        "{device}: {rows} x {cols} bf16 compiled in {:?}, ran in {:?}; q within {off} of the f64 reference",
        report.compile_time, report.run_time
    );
    if off > 1.0 {
        return Err(format!("a quantised value is {off} away from the reference").into());
    }
    Ok(())
}
