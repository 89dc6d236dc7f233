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
use tilekit::{Access, DType, HostBuffer, Scalar};
use wasm_bindgen::prelude::*;

/// One kernel on one problem: the WGSL of its launches and its first output, from the
/// interpreter and from the f64 reference.
#[wasm_bindgen(getter_with_clone)]
#[derive(Clone, Debug)]
pub struct KernelRun {
    /// The WGSL of every launch, in launch order, separated by a comment naming the launch.
    pub wgsl: String,
    /// Each launch's WGSL module alone, in launch order.
    pub launch_wgsl: Vec<String>,
    /// The first output buffer as the interpreter left it.
    pub output: Vec<f64>,
    /// The kernel's f64 reference for that output.
    pub reference: Vec<f64>,
    /// The largest |output - reference|.
    pub max_abs_error: f64,
    /// What a WebGPU dispatch of the plan's launch needs, for plans of one launch (empty
    /// otherwise): the WGSL's entry point, ...
    pub entry_point: String,
    /// the immediates (scalar arguments, and the grid for a kernel that folds it), ...
    pub immediates: Vec<u8>,
    /// the workgroups to dispatch (x, y, z), ...
    pub workgroups: Vec<u32>,
    /// each binding's access (1 read-only, 0 read-write), in binding order, ...
    pub binding_read_only: Vec<u8>,
    /// and the binding of the output compared, ...
    pub output_binding: u32,
    /// whose dtype this is (`f32`, `i8`, ...).
    pub output_dtype: String,
    /// Each binding's contents before the launch (the inputs the interpreter ran on, zeros).
    binding_data: Vec<Vec<u8>>,
}

#[wasm_bindgen]
impl KernelRun {
    /// The bytes binding `binding` holds before the launch.
    pub fn binding_bytes(&self, binding: usize) -> Vec<u8> {
        self.binding_data.get(binding).cloned().unwrap_or_default()
    }
}

/// Builds `kernel` (a library kernel's name, e.g. `vector_add`) for `shape` (e.g. `1000` or
/// `64x128`; empty: the kernel's largest f32 test problem) in f32 with its first configuration, writes each launch's WGSL for the baseline
/// Vulkan target without lane shuffles, and runs the plan on the interpreter over random inputs
/// drawn from `seed`. For a plan of one launch, the run also carries what a WebGPU dispatch of
/// that WGSL needs (web/index.html dispatches it and compares with the interpreter).
#[wasm_bindgen]
pub fn run_kernel(kernel: &str, shape: &str, seed: u64) -> Result<KernelRun, String> {
    let k = kernels::find(kernel).ok_or_else(|| format!("no library kernel is called `{kernel}`"))?;
    let problem = if shape.is_empty() {
        k.test_problems(DType::F32).pop().ok_or_else(|| format!("`{kernel}` has no f32 test problem"))?
    } else {
        Problem::new(&Problem::parse_shape(shape).map_err(|e| e.to_string())?, DType::F32)
    };
    let config = k.configs().into_iter().next().ok_or_else(|| format!("`{kernel}` has no configuration"))?;
    let plan = k.plan(&problem, &config).map_err(|e| e.to_string())?;

    let target = tilekit_naga::target_for(&Target::vulkan_baseline(), false);
    let base = LowerOptions::for_config(&config);
    let mut wgsl = String::new();
    let mut launch_wgsl = Vec::new();
    let mut interfaces = Vec::new();
    for (i, launch) in plan.launches.iter().enumerate() {
        let compiled = tilekit_naga::compile(&launch.program, &target, &launch_options(&base, launch)).map_err(|e| e.to_string())?;
        wgsl.push_str(&format!("// launch {i}: {} on {}\n", launch.program.name, target.name));
        let module = compiled.kernel.wgsl().map_err(|e| e.to_string())?;
        wgsl.push_str(&module);
        launch_wgsl.push(module);
        interfaces.push(compiled.kernel.interface);
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
    let before: Vec<Vec<u8>> = buffers.iter().map(HostBuffer::to_bytes).collect();
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
    let mut run = KernelRun {
        wgsl,
        launch_wgsl,
        output,
        reference,
        max_abs_error,
        entry_point: String::new(),
        immediates: Vec::new(),
        workgroups: Vec::new(),
        binding_read_only: Vec::new(),
        output_binding: 0,
        output_dtype: plan.buffers[first].dtype.name().to_string(),
        binding_data: Vec::new(),
    };
    if let ([launch], [k]) = (&plan.launches[..], &interfaces[..]) {
        let scalars: Vec<(u32, Scalar)> =
            launch.args.iter().enumerate().filter_map(|(p, a)| if let LaunchArg::Scalar(s) = a { Some((p as u32, *s)) } else { None }).collect();
        let buffer_of = |param: u32| match launch.args.get(param as usize) {
            Some(LaunchArg::Buffer(i)) => Ok(*i),
            _ => Err(format!("binding of parameter {param} carries no buffer")),
        };
        let mut bindings = k.bindings.clone();
        bindings.sort_by_key(|b| b.binding);
        for (i, b) in bindings.iter().enumerate() {
            if b.binding != i as u32 {
                return Err(format!("`{kernel}`'s bindings are not 0..{}", bindings.len()));
            }
            let buffer = buffer_of(b.param)?;
            run.binding_read_only.push(u8::from(b.access == Access::Read));
            run.binding_data.push(before[buffer].clone());
            if buffer == first {
                run.output_binding = b.binding;
            }
        }
        run.entry_point = k.entry_point.clone();
        run.immediates = k.pack_launch(&scalars, launch.grid).map_err(|e| e.to_string())?;
        run.workgroups = k.dispatch_shape(launch.grid, [65535; 3]).map_err(|e| e.to_string())?.to_vec();
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_add_writes_wgsl_and_matches_its_reference() {
        let run = run_kernel("vector_add", "1000", 7).unwrap();
        assert!(run.wgsl.contains("@compute"), "{}", run.wgsl);
        assert_eq!(run.launch_wgsl.len(), 1);
        assert_eq!(run.output.len(), 1000);
        assert_eq!(run.reference.len(), 1000);
        assert!(run.max_abs_error <= 1e-5, "{}", run.max_abs_error);
        // x, y read-only; out read-write; n (and no folded grid) in the immediates.
        assert_eq!(run.binding_read_only, [1, 1, 0]);
        assert_eq!(run.output_binding, 2);
        assert_eq!(run.output_dtype, "f32");
        assert_eq!(run.binding_bytes(0).len(), 4000);
        assert_eq!(run.immediates, 1000i32.to_le_bytes());
        assert_eq!(run.workgroups, [1, 1, 1]);
        assert!(run.wgsl.contains(&format!("fn {}(", run.entry_point)), "{}", run.entry_point);
    }

    #[test]
    fn an_unknown_kernel_is_an_error() {
        assert!(run_kernel("no_such_kernel", "8", 0).unwrap_err().contains("no_such_kernel"));
    }
}
