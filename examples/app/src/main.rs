//! An application built on tilekit as a library: a kernel of its own (a scaled add) and a
//! library kernel (softmax) launched on the best device this build can reach, which with only
//! the `wgpu` runtime is a wgpu adapter, else the interpreter. `cargo tree -p
//! tilekit-example-app -e normal` lists what that costs an application: no command-line, plotting
//! or benchmark crates, and no runtime it did not ask for.
//!
//! `cargo run --release -p tilekit-example-app`

use tilekit::kernels;
use tilekit::{Args, Builder, Config, DType, Device, HostBuffer, Kernel, Program};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    // out = a * x + y over n elements, BLOCK per program.
    let axpy = Kernel::new("axpy", |config: &Config| -> Result<Program, tilekit::Error> {
        let block = config.get("BLOCK")?;
        let k = Builder::new("axpy");
        let x = k.input("x", DType::F32);
        let y = k.input("y", DType::F32);
        let out = k.output("out", DType::F32);
        let a = k.scalar("a", DType::F32);
        let n = k.scalar("n", DType::I32);
        let offs = k.program_id(0) * block as i32 + k.arange(0, block);
        let mask = offs.lt(n);
        let sum = a * k.load_masked(x, offs, mask, 0) + k.load_masked(y, offs, mask, 0);
        k.store_masked(out, offs, sum, mask);
        Ok(k.finish()?)
    });

    let device = Device::best();
    let n = 10_000;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = device.upload(&HostBuffer::from_slice(&xs))?;
    let y = device.upload(&HostBuffer::from_slice(&vec![1.0f32; n]))?;
    let out = device.alloc(DType::F32, n)?;
    let config = Config::new().with("BLOCK", 256);
    let args = Args::new().arg("x", &x).arg("y", &y).arg("out", &out).scalar("a", 2.0f32).scalar("n", n);
    let report = axpy.launch(&device, [n.div_ceil(256) as u32, 1, 1], &args, &config)?;
    let out = out.to_vec::<f32>()?;
    let wrong = out.iter().enumerate().filter(|&(i, &v)| v != 2.0 * i as f32 + 1.0).count();
    let compiled = report.compile_time.map_or("cached".to_string(), |t| format!("compiled in {t:?}"));
    println!("{device}: axpy over {n} elements {compiled}, ran in {:?}, {wrong} wrong", report.run_time);

    // A library kernel, on its smallest test problem, checked against its f64 reference.
    let softmax = kernels::find("softmax").ok_or("the library has no softmax")?;
    let problem = softmax.test_problems(DType::F32).into_iter().next().ok_or("softmax has no test problem")?;
    let config = kernels::default_config_for(&*softmax, &problem, &device.plan_target());
    let check = tilekit::check::check(&*softmax, &problem, &config, &device, 0)?;
    let worst = check.outputs.iter().map(|o| o.rel_err).fold(0.0, f64::max);
    println!("{device}: softmax {problem}: relative error {worst:.2e}, {}", if check.pass() { "pass" } else { "FAIL" });
    if wrong > 0 || !check.pass() {
        return Err("a result is wrong".into());
    }
    Ok(())
}
