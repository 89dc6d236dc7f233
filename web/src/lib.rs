//! tilekit on the web (wasm32-unknown-unknown, through wasm-bindgen): a library kernel's WGSL,
//! written by the naga backend, and its outputs on random inputs, computed by the interpreter,
//! next to the kernel's f64 reference.
//!
//! The interpreter runs on the calling thread there: rayon's global pool falls back to the
//! current thread where threads cannot be spawned. Nothing here reads a clock
//! (`std::time::Instant` panics on wasm32-unknown-unknown), so plans are run through
//! `tilekit_core::interp` directly rather than through `Device::run_plan`, which times them.

use rand::rngs::StdRng;
use rand::SeedableRng;
use tilekit::device::launch_options;
use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::Target;
use tilekit::interp::{self, Arg};
use tilekit::kernels::{self, LaunchArg, Problem, Role};
use tilekit::{DType, HostBuffer};
use wasm_bindgen::prelude::*;

/// One kernel on one problem: the WGSL of its launches and its first output, from the
/// interpreter and from the f64 reference.
#[wasm_bindgen(getter_with_clone)]
#[derive(Clone, Debug)]
pub struct KernelRun {
    /// The WGSL of every launch, in launch order, separated by a comment naming the launch.
    pub wgsl: String,
    /// The first output buffer as the interpreter left it.
    pub output: Vec<f64>,
    /// The kernel's f64 reference for that output.
    pub reference: Vec<f64>,
    /// The largest |output - reference|.
    pub max_abs_error: f64,
}

/// Builds `kernel` (a library kernel's name, e.g. `vector_add`) for `shape` (e.g. `1000` or
/// `64x128`) in f32 with its first configuration, writes each launch's WGSL for the baseline
/// Vulkan target without lane shuffles, and runs the plan on the interpreter over random inputs
/// drawn from `seed`.
#[wasm_bindgen]
pub fn run_kernel(kernel: &str, shape: &str, seed: u64) -> Result<KernelRun, String> {
    let k = kernels::find(kernel).ok_or_else(|| format!("no library kernel is called `{kernel}`"))?;
    let problem = Problem::new(&Problem::parse_shape(shape).map_err(|e| e.to_string())?, DType::F32);
    let config = k.configs().into_iter().next().ok_or_else(|| format!("`{kernel}` has no configuration"))?;
    let plan = k.plan(&problem, &config).map_err(|e| e.to_string())?;

    let target = tilekit_naga::target_for(&Target::vulkan_baseline(), false);
    let base = LowerOptions::for_config(&config);
    let mut wgsl = String::new();
    for (i, launch) in plan.launches.iter().enumerate() {
        let compiled = tilekit_naga::compile(&launch.program, &target, &launch_options(&base, launch)).map_err(|e| e.to_string())?;
        wgsl.push_str(&format!("// launch {i}: {} on {}\n", launch.program.name, target.name));
        wgsl.push_str(&compiled.kernel.wgsl().map_err(|e| e.to_string())?);
    }

    let mut rng = StdRng::seed_from_u64(seed);
    let inputs = k.inputs(&problem, &mut rng);
    let reference = k.reference(&problem, &inputs.iter().map(HostBuffer::to_f64).collect::<Vec<_>>());
    let mut inputs = inputs.into_iter();
    let buffers: Vec<HostBuffer> = plan
        .buffers
        .iter()
        .map(|spec| match spec.role {
            Role::Input => inputs.next().unwrap_or_else(|| HostBuffer::zeros(spec.dtype, spec.len)),
            Role::Output { .. } | Role::Scratch => HostBuffer::zeros(spec.dtype, spec.len),
        })
        .collect();
    for launch in &plan.launches {
        let args: Vec<Arg<'_>> = launch
            .args
            .iter()
            .map(|a| match a {
                LaunchArg::Buffer(i) => Arg::Buffer(&buffers[*i]),
                LaunchArg::Scalar(s) => Arg::Scalar(*s),
            })
            .collect();
        interp::run(&launch.program, launch.grid, &args).map_err(|e| e.to_string())?;
    }

    let (first, _) = plan.outputs().next().ok_or_else(|| format!("`{kernel}` has no output"))?;
    let output = buffers[first].to_f64();
    let reference = reference.into_iter().next().unwrap_or_default();
    let max_abs_error = output.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    Ok(KernelRun { wgsl, output, reference, max_abs_error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_add_writes_wgsl_and_matches_its_reference() {
        let run = run_kernel("vector_add", "1000", 7).unwrap();
        assert!(run.wgsl.contains("@compute"), "{}", run.wgsl);
        assert_eq!(run.output.len(), 1000);
        assert_eq!(run.reference.len(), 1000);
        assert!(run.max_abs_error <= 1e-5, "{}", run.max_abs_error);
    }

    #[test]
    fn an_unknown_kernel_is_an_error() {
        assert!(run_kernel("no_such_kernel", "8", 0).unwrap_err().contains("no_such_kernel"));
    }
}
