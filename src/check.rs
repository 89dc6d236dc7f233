//! Runs a library kernel on a device and compares every output with its f64 reference.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use tilekit_core::{Config, HostBuffer};

use crate::device::{Device, DeviceError, RunOptions};
use crate::kernels::{Kernel, KernelError, Plan, Problem, Role, Tolerance};

/// How one output compares with the reference.
#[derive(Clone, Debug, Serialize)]
pub struct OutputCheck {
    pub name: String,
    /// ‖out − ref‖₂ / ‖ref‖₂ (absolute norm when the reference is all zeros).
    pub rel_err: f64,
    /// Largest |out − ref| and where it is.
    pub max_abs_err: f64,
    pub max_abs_index: usize,
    /// The relative bound [`OutputCheck::rel_err`] is held to.
    pub tolerance: f64,
    /// The element-wise bound: the output also passes when `max_abs_err` is within it.
    pub abs_tolerance: f64,
    /// Elements that are NaN or infinite where the reference is finite.
    pub non_finite: usize,
    pub pass: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    pub kernel: String,
    pub problem: String,
    pub config: String,
    pub device: String,
    pub outputs: Vec<OutputCheck>,
    /// Wall time of the launches on the device.
    pub elapsed_s: f64,
}

impl CheckReport {
    pub fn pass(&self) -> bool {
        self.outputs.iter().all(|o| o.pass)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("kernel `{kernel}` gave {got} input buffers for a plan with {want}")]
    Inputs { kernel: String, got: usize, want: usize },
    #[error("kernel `{kernel}` gave {got} reference outputs for a plan with {want}")]
    Outputs { kernel: String, got: usize, want: usize },
    #[error("input `{name}` is {got_len} x {got_dtype}, the plan expects {want_len} x {want_dtype}")]
    InputShape { name: String, got_len: usize, got_dtype: String, want_len: usize, want_dtype: String },
}

/// Compares `out` with `reference` in the norm-wise relative error.
pub fn compare(name: &str, out: &[f64], reference: &[f64], tolerance: f64) -> OutputCheck {
    compare_within(name, out, reference, Tolerance::rel(tolerance))
}

/// Compares `out` with `reference`: it passes within the relative or the element-wise bound of
/// `tolerance`.
pub fn compare_within(name: &str, out: &[f64], reference: &[f64], tolerance: Tolerance) -> OutputCheck {
    let mut diff2 = 0.0;
    let mut ref2 = 0.0;
    let mut max_abs = 0.0f64;
    let mut max_i = 0;
    let mut non_finite = 0;
    for (i, (&o, &r)) in out.iter().zip(reference).enumerate() {
        if !o.is_finite() && r.is_finite() {
            non_finite += 1;
            continue;
        }
        if o.is_nan() && r.is_nan() || (o.is_infinite() && o == r) {
            continue;
        }
        // A number where the reference is NaN is infinitely wrong (and must not pass the
        // element-wise bound, which a NaN difference would).
        let d = if r.is_nan() { f64::INFINITY } else { (o - r).abs() };
        diff2 += d * d;
        ref2 += r * r;
        if d > max_abs {
            max_abs = d;
            max_i = i;
        }
    }
    let mut rel = if ref2 > 0.0 { (diff2 / ref2).sqrt() } else { diff2.sqrt() };
    if non_finite > 0 {
        // The finite elements alone could show a passing error beside a failing output.
        rel = f64::INFINITY;
        max_abs = f64::INFINITY;
        max_i = out.iter().zip(reference).position(|(o, r)| !o.is_finite() && r.is_finite()).unwrap_or(0);
    }
    let pass = non_finite == 0 && out.len() == reference.len() && (rel <= tolerance.rel || max_abs <= tolerance.abs);
    OutputCheck {
        name: name.to_string(),
        rel_err: rel,
        max_abs_err: max_abs,
        max_abs_index: max_i,
        tolerance: tolerance.rel,
        abs_tolerance: tolerance.abs,
        non_finite,
        pass,
    }
}

/// The relative error the device's math may add to the plan's results
/// ([`tilekit_core::precision::program_relative`] over its launches): a kernel's tolerance
/// covers its own arithmetic, this the approximate functions it calls, so that a correct kernel
/// using `tanh` or `exp` passes on every conforming device, and only there.
pub fn math_tolerance(plan: &crate::kernels::Plan, device: &Device) -> f64 {
    let backend = device.math_backend();
    plan.launches.iter().map(|l| tilekit_core::precision::program_relative(&l.program, backend)).fold(0.0, f64::max)
}

/// Bits that read as NaN for floats and as an implausible value for integers.
fn poison_bits(dtype: tilekit_core::DType) -> u64 {
    match dtype.size_bytes() {
        1 => 0xA5,
        2 => 0x7E01, // an f16 NaN; a large bf16 value
        4 => 0x7FC0_0001,
        _ => 0x7FF8_0000_0000_0001,
    }
}

/// Plans, fills random inputs from `seed`, runs on `device` and compares.
pub fn check(kernel: &dyn Kernel, problem: &Problem, config: &Config, device: &Device, seed: u64) -> Result<CheckReport, CheckError> {
    check_and_time(kernel, problem, config, device, seed, None).map(|(r, _)| r)
}

/// As [`check`], run with `options` (a checked launch reports the first fault as an error).
pub fn check_with(
    kernel: &dyn Kernel,
    problem: &Problem,
    config: &Config,
    device: &Device,
    seed: u64,
    options: &RunOptions,
) -> Result<CheckReport, CheckError> {
    Case::new(kernel, problem, seed).check_and_time_with(kernel, config, device, None, options).map(|(r, _)| r)
}

/// As [`check`], then, when `timing` is `(warmup, runs)` and the answer was right, the device
/// time of each of `runs` executions (seconds, device timestamps on GPUs). A wrong answer is
/// never timed.
pub fn check_and_time(
    kernel: &dyn Kernel,
    problem: &Problem,
    config: &Config,
    device: &Device,
    seed: u64,
    timing: Option<(usize, usize)>,
) -> Result<(CheckReport, Option<Vec<f64>>), CheckError> {
    Case::new(kernel, problem, seed).check_and_time(kernel, config, device, timing)
}

/// A problem made ready for checking: its random inputs and the f64 reference outputs. Both
/// depend on the problem and the seed only, so every configuration and device checked against
/// one case shares them (on large problems they cost far more than the run).
pub struct Case {
    problem: Problem,
    inputs: Vec<HostBuffer>,
    reference: Vec<Vec<f64>>,
}

impl Case {
    pub fn new(kernel: &dyn Kernel, problem: &Problem, seed: u64) -> Case {
        let mut rng = StdRng::seed_from_u64(seed);
        let inputs = kernel.inputs(problem, &mut rng);
        let values: Vec<Vec<f64>> = inputs.iter().map(HostBuffer::to_f64).collect();
        let reference = kernel.reference(problem, &values);
        Case { problem: problem.clone(), inputs, reference }
    }

    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// Runs `kernel` (the case's kernel) under `config` on `device` and compares its outputs;
    /// then, when `timing` is `(warmup, runs)` and the answer was right, times `runs` executions.
    pub fn check_and_time(
        &self,
        kernel: &dyn Kernel,
        config: &Config,
        device: &Device,
        timing: Option<(usize, usize)>,
    ) -> Result<(CheckReport, Option<Vec<f64>>), CheckError> {
        self.check_and_time_with(kernel, config, device, timing, &RunOptions::default())
    }

    /// As [`Case::check_and_time`], with the run (not the timing, which runs the plan as built)
    /// under `options`.
    pub fn check_and_time_with(
        &self,
        kernel: &dyn Kernel,
        config: &Config,
        device: &Device,
        timing: Option<(usize, usize)>,
        options: &RunOptions,
    ) -> Result<(CheckReport, Option<Vec<f64>>), CheckError> {
        let time = |plan: &Plan, buffers: &[HostBuffer]| match timing {
            Some((warmup, runs)) => device.time_plan(plan, buffers, config, warmup, runs).map(Some),
            None => Ok(None),
        };
        self.check_then(kernel, config, device, options, time)
    }

    /// Runs `kernel` under `config` on `device` (with `options`) and compares its outputs; when
    /// the answer was right, `time` gets the plan and its buffers (inputs uploaded, outputs as
    /// the run left them) and its samples come back. A wrong answer is never timed.
    pub fn check_then(
        &self,
        kernel: &dyn Kernel,
        config: &Config,
        device: &Device,
        options: &RunOptions,
        time: impl FnOnce(&Plan, &[HostBuffer]) -> Result<Option<Vec<f64>>, DeviceError>,
    ) -> Result<(CheckReport, Option<Vec<f64>>), CheckError> {
        let plan = kernel.plan_on(&self.problem, config, &device.plan_target())?;
        let want = plan.inputs().count();
        if self.inputs.len() != want {
            return Err(CheckError::Inputs { kernel: kernel.name().into(), got: self.inputs.len(), want });
        }
        let want = plan.outputs().count();
        if self.reference.len() != want {
            return Err(CheckError::Outputs { kernel: kernel.name().into(), got: self.reference.len(), want });
        }
        let mut inputs = self.inputs.iter();
        let mut buffers = Vec::with_capacity(plan.buffers.len());
        for spec in &plan.buffers {
            let b = match spec.role {
                Role::Input => {
                    let b = inputs.next().map_or_else(|| HostBuffer::zeros(spec.dtype, 0), HostBuffer::clone);
                    if b.len() != spec.len || b.dtype() != spec.dtype {
                        return Err(CheckError::InputShape {
                            name: spec.name.clone(),
                            got_len: b.len(),
                            got_dtype: b.dtype().to_string(),
                            want_len: spec.len,
                            want_dtype: spec.dtype.to_string(),
                        });
                    }
                    b
                }
                Role::Output { zeroed: false } => {
                    let b = HostBuffer::zeros(spec.dtype, spec.len);
                    b.fill_bits(poison_bits(spec.dtype));
                    b
                }
                Role::Output { zeroed: true } | Role::Scratch => HostBuffer::zeros(spec.dtype, spec.len),
            };
            buffers.push(b);
        }
        let elapsed: Duration = device.run_plan_with(&plan, &buffers, config, options)?;
        let math = math_tolerance(&plan, device);
        let outputs = plan
            .outputs()
            .zip(&self.reference)
            .enumerate()
            .map(|(j, ((i, spec), r))| {
                let mut tolerance = kernel.output_tolerance(&self.problem, j, spec.dtype);
                if spec.dtype.is_float() && tolerance.rel > 0.0 {
                    tolerance.rel += math;
                }
                compare_within(&spec.name, &buffers[i].to_f64(), r, tolerance)
            })
            .collect();
        let report = CheckReport {
            kernel: kernel.name().to_string(),
            problem: self.problem.to_string(),
            config: config.to_string(),
            device: device.name(),
            outputs,
            elapsed_s: elapsed.as_secs_f64(),
        };
        let samples = if report.pass() { time(&plan, &buffers)? } else { None };
        Ok((report, samples))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_element_wise_bound_accepts_off_by_one_integers() {
        let reference = [0.0, -128.0, 127.0, 5.0];
        let off = [1.0, -127.0, 127.0, 4.0];
        assert!(!compare_within("q", &off, &reference, Tolerance::EXACT).pass);
        assert!(compare_within("q", &off, &reference, Tolerance::abs(1.0)).pass);
        assert!(!compare_within("q", &[2.0, -128.0, 127.0, 5.0], &reference, Tolerance::abs(1.0)).pass);
        // Either bound suffices; the report carries both.
        let c = compare_within("q", &off, &reference, Tolerance { rel: 1e-9, abs: 1.0 });
        assert!(c.pass && c.rel_err > 1e-9 && c.abs_tolerance == 1.0);
    }

    #[test]
    fn nan_and_infinities_match_only_themselves() {
        let t = Tolerance { rel: 1.0, abs: 1e300 };
        assert!(compare_within("y", &[f64::NAN, f64::INFINITY], &[f64::NAN, f64::INFINITY], t).pass);
        assert!(!compare_within("y", &[1.0, 2.0], &[f64::NAN, 2.0], t).pass);
        assert!(!compare_within("y", &[f64::NAN, 2.0], &[1.0, 2.0], t).pass);
        assert!(!compare_within("y", &[f64::INFINITY], &[1.0], t).pass);
        assert!(!compare_within("y", &[f64::NEG_INFINITY], &[f64::INFINITY], t).pass);
    }
}
