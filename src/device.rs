//! Devices tilekit can run on. Today: the interpreter; GPU runtimes join as their backends land.

use std::fmt;
use std::time::{Duration, Instant};

use tilekit_core::interp::{self, Arg, InterpError};
use tilekit_core::HostBuffer;

use crate::kernels::{LaunchArg, Plan};

/// A place to run plans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU interpreter, the reference every backend is checked against.
    Interpreter,
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("no device called `{name}`; available: {available}")]
    Unknown { name: String, available: String },
    #[error("launch {launch} (`{program}`): {source}")]
    Interp { launch: usize, program: String, source: InterpError },
    #[error("launch {launch} argument {arg} names buffer {buffer}, but the plan has {count}")]
    BadPlan { launch: usize, arg: usize, buffer: usize, count: usize },
}

impl Device {
    /// Every device reachable now.
    pub fn all() -> Vec<Device> {
        vec![Device::Interpreter]
    }

    /// Finds a device by the name [`Device::name`] prints (`interp` is accepted too).
    pub fn find(name: &str) -> Result<Device, DeviceError> {
        let all = Device::all();
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
        }
    }

    /// Runs every launch of `plan` in order over `buffers` (one per plan buffer) and returns the
    /// wall time of the launches.
    pub fn run_plan(&self, plan: &Plan, buffers: &[HostBuffer]) -> Result<Duration, DeviceError> {
        match self {
            Device::Interpreter => {
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
                    interp::run(&launch.program, launch.grid, &args).map_err(|source| DeviceError::Interp {
                        launch: li,
                        program: launch.program.name.clone(),
                        source,
                    })?;
                }
                Ok(start.elapsed())
            }
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}
