//! Prints the GPU IR (the tile program with its layouts) of a library kernel for a target.
//!
//! `cargo run --example gpu_ir -- softmax lavapipe`

use tilekit::gpu::{describe, lower::LowerOptions, Target};
use tilekit::kernels;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "softmax".into());
    let target = args.next().and_then(|t| Target::preset(&t)).unwrap_or_else(Target::vulkan_baseline);
    let Some(kernel) = kernels::find(&name) else {
        eprintln!("no kernel `{name}`");
        std::process::exit(2);
    };
    let problem = kernel.default_problem();
    let config = &kernel.configs()[0];
    match kernel.plan(&problem, config) {
        Ok(plan) => {
            for launch in &plan.launches {
                let options = LowerOptions::for_config(config);
                match describe(&launch.program, &target, &options) {
                    Ok(text) => println!("{text}"),
                    Err(e) => eprintln!("{e}"),
                }
            }
        }
        Err(e) => eprintln!("{e}"),
    }
}
