//! Runs and times the workgroup-scope matmul of `tilekit_spirv::coopmat2` (VK_NV_cooperative_matrix2)
//! on a Vulkan device: what the second cooperative-matrix strategy is worth before the lowering
//! chooses it.
//!
//! `cargo run --release -p tilekit-spirv --example coopmat2_matmul -- [--device N] [--runs R]
//! [--dtype f16|bf16] [--size MxNxK]... [--shape BMxBNxBK:THREADS]...`
//!
//! Prints the device's VK_NV_cooperative_matrix2 features and flexible dimensions, then one JSON
//! line per (size, shape): the check of sampled elements of C against an f64 reference on the
//! host (every shape is checked before it is timed; a wrong one is reported, not timed), the
//! median device time of `--runs` launches and its TFLOP/s, and the driver's statistics of the
//! pipeline. Exits with 1 when any result is wrong, 2 on bad arguments or a device without the
//! extension.

use tilekit_core::{DType, HostBuffer, Scalar};
use tilekit_spirv::coopmat2::{tensor_matmul, TensorMatmul};
use tilekit_spirv::{VulkanOptions, VulkanRuntime};

fn parse_dims(s: &str, n: usize) -> Option<Vec<u32>> {
    let v: Vec<u32> = s.split('x').map(|d| d.parse().ok()).collect::<Option<_>>()?;
    (v.len() == n).then_some(v)
}

struct Args {
    device: Option<usize>,
    runs: usize,
    dtype: DType,
    sizes: Vec<[u32; 3]>,
    shapes: Vec<TensorMatmul>,
}

fn args() -> Result<Args, String> {
    let mut a = Args { device: None, runs: 20, dtype: DType::F16, sizes: Vec::new(), shapes: Vec::new() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--device" => a.device = Some(value.parse().map_err(|_| format!("--device {value}: not an index"))?),
            "--runs" => a.runs = value.parse().map_err(|_| format!("--runs {value}: not a count"))?,
            "--dtype" => {
                a.dtype = match value.as_str() {
                    "f16" => DType::F16,
                    "bf16" => DType::BF16,
                    _ => return Err(format!("--dtype {value}: f16 or bf16")),
                }
            }
            "--size" => {
                let d = parse_dims(&value, 3).ok_or_else(|| format!("--size {value}: expected MxNxK"))?;
                a.sizes.push([d[0], d[1], d[2]]);
            }
            "--shape" => {
                let (dims, threads) = value.split_once(':').ok_or_else(|| format!("--shape {value}: expected BMxBNxBK:THREADS"))?;
                let d = parse_dims(dims, 3).ok_or_else(|| format!("--shape {value}: expected BMxBNxBK:THREADS"))?;
                let threads = threads.parse().map_err(|_| format!("--shape {value}: threads not a number"))?;
                a.shapes.push(TensorMatmul { block_m: d[0], block_n: d[1], block_k: d[2], threads, group_m: 8, dtype: DType::F16 });
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    for shape in &mut a.shapes {
        shape.dtype = a.dtype;
    }
    if a.sizes.is_empty() {
        a.sizes = vec![[1000, 999, 1001], [4096, 4096, 4096], [8192, 8192, 8192]];
    }
    if a.shapes.is_empty() {
        a.shapes = [(128, 256, 64, 256), (256, 128, 64, 256), (128, 128, 64, 256), (128, 128, 32, 128), (64, 64, 64, 128), (128, 256, 32, 256)]
            .map(|(m, n, k, t)| TensorMatmul { block_m: m, block_n: n, block_k: k, threads: t, group_m: 8, dtype: a.dtype })
            .to_vec();
    }
    Ok(a)
}

/// Values in [-1, 1) from a xorshift stream, never all zeros.
fn random(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("coopmat2_matmul: {e}");
            std::process::exit(2);
        }
    };
    let devices = VulkanRuntime::devices().unwrap_or_else(|e| {
        eprintln!("coopmat2_matmul: {e}");
        std::process::exit(2);
    });
    let index = args.device.or_else(|| devices.iter().position(|d| d.device_type == "discrete")).unwrap_or(0);
    let Some(info) = devices.get(index) else {
        eprintln!("coopmat2_matmul: no Vulkan device {index} ({} present)", devices.len());
        std::process::exit(2);
    };
    println!("device {index}: {} (driver {})", info.name, info.driver_info);
    match &info.cooperative_matrix2 {
        Some(c) => println!("VK_NV_cooperative_matrix2: {c:?}"),
        None => {
            eprintln!("coopmat2_matmul: {} has no VK_NV_cooperative_matrix2", info.name);
            std::process::exit(2);
        }
    }
    let rt = VulkanRuntime::with_options(index, VulkanOptions::from_env()).unwrap_or_else(|e| {
        eprintln!("coopmat2_matmul: {e}");
        std::process::exit(2);
    });
    let mut wrong = 0;
    for &[m, n, k] in &args.sizes {
        let (a_host, b_host) = (random((m * k) as usize, 1 + m as u64), random((k * n) as usize, 7 + n as u64));
        let a16 = HostBuffer::from_f64(args.dtype, &a_host);
        let b16 = HostBuffer::from_f64(args.dtype, &b_host);
        // The reference reads the operands as the device does: rounded to the dtype.
        let (a_ref, b_ref) = (a16.to_f64(), b16.to_f64());
        let alloc = |len: u32| rt.alloc(args.dtype, len as usize);
        let (Ok(da), Ok(db), Ok(dc)) = (alloc(m * k), alloc(k * n), alloc(m * n)) else {
            eprintln!("{m}x{n}x{k}: allocation failed");
            wrong += 1;
            continue;
        };
        if let Err(e) = rt.upload(&da, &a16).and_then(|_| rt.upload(&db, &b16)) {
            eprintln!("{m}x{n}x{k}: upload failed: {e}");
            wrong += 1;
            continue;
        }
        let mut samples: Vec<(u32, u32)> = vec![(0, 0), (m - 1, n - 1), (m - 1, 0), (0, n - 1)];
        let picks = random(128, 99);
        samples.extend(picks.chunks(2).map(|p| ((((p[0] + 1.0) / 2.0) * m as f64) as u32 % m, (((p[1] + 1.0) / 2.0) * n as f64) as u32 % n)));
        let unit = if args.dtype == DType::BF16 { 2f64.powi(-7) } else { 2f64.powi(-10) };
        let scalars = [(3, Scalar::Int(m as i64)), (4, Scalar::Int(n as i64)), (5, Scalar::Int(k as i64))];
        for shape in &args.shapes {
            let head = format!("\"size\":\"{m}x{n}x{k}\",\"shape\":\"{shape}\"");
            let kernel = match tensor_matmul(shape) {
                Ok(kernel) => kernel,
                Err(e) => {
                    println!("{{{head},\"error\":{:?}}}", e.to_string());
                    continue;
                }
            };
            let pipeline = match rt.load(&kernel) {
                Ok(p) => p,
                Err(e) => {
                    println!("{{{head},\"error\":{:?}}}", e.to_string());
                    continue;
                }
            };
            let grid = shape.grid(m, n);
            // A stale C must not pass: fill it with NaN first.
            let _ = rt.upload(&dc, &HostBuffer::from_f64(args.dtype, &vec![f64::NAN; (m * n) as usize]));
            if let Err(e) = rt.launch(&pipeline, grid, &[&da, &db, &dc], &scalars) {
                println!("{{{head},\"error\":{:?}}}", e.to_string());
                wrong += 1;
                continue;
            }
            let c = match rt.download(&dc) {
                Ok(c) => c.to_f64(),
                Err(e) => {
                    println!("{{{head},\"error\":{:?}}}", e.to_string());
                    wrong += 1;
                    continue;
                }
            };
            let mut worst: f64 = 0.0;
            for &(i, j) in &samples {
                let (mut exact, mut magnitude) = (0.0, 0.0);
                for kk in 0..k as usize {
                    let p = a_ref[i as usize * k as usize + kk] * b_ref[kk * n as usize + j as usize];
                    exact += p;
                    magnitude += p.abs();
                }
                // f32 accumulation, then one rounding to the dtype (8 bits of bf16's mantissa).
                let got = c[(i * n + j) as usize];
                let ratio = (got - exact).abs() / (magnitude * unit + 1e-30);
                worst = if ratio.is_nan() { f64::INFINITY } else { worst.max(ratio) };
            }
            if worst > 1.0 {
                println!("{{{head},\"check\":\"FAIL\",\"worst_error_over_bound\":{worst:.3}}}");
                wrong += 1;
                continue;
            }
            let times = match rt.time(&pipeline, grid, &[&da, &db, &dc], &scalars, 3, args.runs) {
                Ok(mut t) => {
                    t.sort_by(f64::total_cmp);
                    t
                }
                Err(e) => {
                    println!("{{{head},\"check\":\"PASS\",\"error\":{:?}}}", e.to_string());
                    continue;
                }
            };
            let median = times[times.len() / 2];
            let tflops = 2.0 * m as f64 * n as f64 * k as f64 / median / 1e12;
            let stats: Vec<String> = pipeline.statistics().iter().map(|s| format!("{:?}", format!("{}={:?}", s.name, s.value))).collect();
            println!(
                "{{{head},\"check\":\"PASS\",\"worst_error_over_bound\":{worst:.3},\"median_s\":{median:.6e},\"min_s\":{:.6e},\"tflops\":{tflops:.1},\"statistics\":[{}]}}",
                times[0],
                stats.join(",")
            );
        }
    }
    std::process::exit(if wrong > 0 { 1 } else { 0 });
}
