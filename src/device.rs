//! Devices tilekit can run on. Today: the interpreter; GPU runtimes join as their backends land.

use std::fmt;
use std::time::{Duration, Instant};

use tilekit_core::gpu::lower::LowerOptions;
use tilekit_core::gpu::simt::{self, SimtError};
use tilekit_core::gpu::Target;
use tilekit_core::interp::{self, Arg, InterpError};
use tilekit_core::{Config, HostBuffer};

use crate::kernels::{LaunchArg, Plan};

/// A place to run plans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU interpreter, the reference every backend is checked against.
    Interpreter,
    /// The GPU lowering for a target, emulated on the CPU thread by thread: it checks layouts,
    /// reductions and barriers without a GPU.
    Emulator(Target),
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("no device called `{name}`; available: {available}")]
    Unknown { name: String, available: String },
    #[error("launch {launch} (`{program}`): {source}")]
    Interp { launch: usize, program: String, source: InterpError },
    #[error("launch {launch} (`{program}`) on the emulator: {source}")]
    Simt { launch: usize, program: String, source: SimtError },
    #[error("launch {launch} argument {arg} names buffer {buffer}, but the plan has {count}")]
    BadPlan { launch: usize, arg: usize, buffer: usize, count: usize },
}

impl Device {
    /// Every device reachable now.
    pub fn all() -> Vec<Device> {
        vec![Device::Interpreter, Device::Emulator(Target::vulkan_baseline())]
    }

    /// Finds a device by the name [`Device::name`] prints (`interp` is accepted too).
    pub fn find(name: &str) -> Result<Device, DeviceError> {
        let all = Device::all();
        if let Some(preset) = name.strip_prefix("emulator:").and_then(Target::preset) {
            return Ok(Device::Emulator(preset));
        }
        all.iter()
            .find(|d| d.name() == name || (name == "interp" && **d == Device::Interpreter))
            .cloned()
            .ok_or_else(|| DeviceError::Unknown {
                name: name.to_string(),
                available: all.iter().map(|d| d.name()).collect::<Vec<_>>().join(", "),
            })
    }

    pub fn name(&self) -> String {
        match self {
            Device::Interpreter => "interpreter".into(),
            Device::Emulator(t) => format!("emulator:{}", t.name),
        }
    }

    /// Runs every launch of `plan` in order over `buffers` (one per plan buffer), with the
    /// configuration's `num_warps`, and returns the wall time of the launches.
    pub fn run_plan(&self, plan: &Plan, buffers: &[HostBuffer], config: &Config) -> Result<Duration, DeviceError> {
        let start = Instant::now();
        for (li, launch) in plan.launches.iter().enumerate() {
            let mut args = Vec::with_capacity(launch.args.len());
            for (ai, a) in launch.args.iter().enumerate() {
                args.push(match a {
                    LaunchArg::Buffer(i) => Arg::Buffer(buffers.get(*i).ok_or(DeviceError::BadPlan {
                        launch: li,
                        arg: ai,
                        buffer: *i,
                        count: buffers.len(),
                    })?),
                    LaunchArg::Scalar(s) => Arg::Scalar(*s),
                });
            }
            let program = launch.program.name.clone();
            match self {
                Device::Interpreter => interp::run(&launch.program, launch.grid, &args)
                    .map_err(|source| DeviceError::Interp { launch: li, program, source })?,
                Device::Emulator(target) => {
                    let options = LowerOptions { num_warps: config.num_warps() as u32 };
                    simt::compile(&launch.program, target, &options)
                        .map_err(SimtError::from)
                        .and_then(|l| l.run(&launch.program, launch.grid, &args))
                        .map_err(|source| DeviceError::Simt { launch: li, program, source })?
                }
            }
        }
        Ok(start.elapsed())
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}
