//! Prints the GPU IR (the tile program with its layouts) of a library kernel for a target.
//!
//! `cargo run --example gpu_ir -- softmax lavapipe`
//!
//! Without arguments: softmax for the `vulkan-baseline` target. An unknown kernel or target is
//! an error that lists what exists, never a silent fallback to another target.

use tilekit::device::target_preset;
use tilekit::gpu::{describe, lower::LowerOptions, Target};
use tilekit::kernels;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "softmax".into());
    let target = match args.next() {
        None => Target::vulkan_baseline(),
        Some(t) => target_preset(&t).unwrap_or_else(|e| fail(&e.to_string())),
    };
    let Some(kernel) = kernels::find(&name) else {
        let known: Vec<&str> = kernels::all().iter().map(|k| k.name()).collect();
        fail(&format!("unknown kernel `{name}`; the library has: {}", known.join(", ")));
    };
    let problem = kernel.default_problem();
    let config = &kernel.configs()[0];
    let plan = kernel.plan(&problem, config).unwrap_or_else(|e| fail(&format!("kernel `{name}` cannot plan {problem}: {e}")));
    for launch in &plan.launches {
        let options = LowerOptions::for_config(config);
        match describe(&launch.program, &target, &options) {
            Ok(text) => println!("{text}"),
            Err(e) => fail(&format!("kernel `{name}` cannot be lowered for {}: {e}", target.name)),
        }
    }
}

/// One line on stderr and exit code 2, as the `tilekit` binary reports bad input.
fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2);
}
