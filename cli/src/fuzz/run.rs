//! Running a case on a device and classifying the outcome against the interpreter's.

use super::compare::{self, Mismatch};
use super::{inputs, Case};
use crate::device::{Device, DeviceError};
use crate::kernels::{BufferSpec, Launch, LaunchArg, Plan, Role};
use crate::{Config, HostBuffer};
use tilekit_core::gpu::lower::LowerError;
use tilekit_core::gpu::simt::SimtError;
use tilekit_core::gpu::Target;
use tilekit_core::interp::InterpOptions;

/// What happened on one device.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every buffer passes the tolerance rule.
    Agreed,
    /// Differences a documented backend freedom explains (the kind is named).
    Explained(String),
    /// Differences nothing explains: the first one and how many elements differ.
    Mismatch(Mismatch, usize),
    /// The device ran the program and reported an error (an emulator fault, a driver error).
    Failed(String),
    /// The device cannot run this program (a dtype it lacks, registers, shared memory): the
    /// reason's kind and the message. Never a pass.
    Refused(String, String),
    /// Not run on this device: a tile holds more elements per thread there than the campaign's
    /// `--max-per-thread` allows (the reason says how many).
    OverBudget(String),
    /// A mismatch or failure with the signature of a known, not yet fixed bug that a filetest
    /// in tests/fuzz/ records as an expected failure: the bug's name and what happened.
    Known(&'static str, String),
}

impl Outcome {
    /// Whether this is a difference or failure nothing explains.
    pub fn unexplained(&self) -> bool {
        matches!(self, Outcome::Mismatch(..) | Outcome::Failed(_))
    }

    /// The same kind of failure as `other` (for shrinking): both mismatches in an output they
    /// share, or both failures whose messages start alike. A mismatch elsewhere is another
    /// difference, which a shrink must not wander off to.
    pub fn same_failure(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::Mismatch(a, _), Outcome::Mismatch(b, _)) => a.spread.iter().any(|(n, _)| b.spread.iter().any(|(m, _)| m == n)),
            (Outcome::Failed(a), Outcome::Failed(b)) => failure_kind(a) == failure_kind(b),
            _ => false,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Outcome::Agreed => "agreed".into(),
            Outcome::Explained(k) => format!("explained ({k})"),
            Outcome::Mismatch(m, n) => format!("mismatch at {n} element(s) {}; first: {m}", m.spread()),
            Outcome::Failed(e) => format!("failed: {e}"),
            Outcome::Refused(k, e) => format!("refused ({k}): {e}"),
            Outcome::Known(k, e) => format!("known bug ({k}): {e}"),
            Outcome::OverBudget(why) => format!("over budget: {why}"),
        }
    }
}

/// A failure message without its numbers (program ids, threads, indices), to tell kinds apart.
fn failure_kind(msg: &str) -> String {
    let tail = msg.rsplit(": ").next().unwrap_or(msg);
    tail.chars().filter(|c| !c.is_ascii_digit()).collect()
}

/// A device the fuzzer runs on, with what the comparison needs to know about it.
#[derive(Clone, Debug)]
pub struct FuzzDevice {
    pub device: Device,
    /// Whether approximate ops may differ within their bounds (GPUs) or must be exact (the
    /// emulator runs the interpreter's functions).
    pub gpu: bool,
    /// Whether the device may flush float subnormals (a documented, explained difference).
    pub flushes_subnormals: bool,
    /// Whether, flushing f32 subnormals, the device keeps f16 ones: a SPIR-V module with f16
    /// values asks for DenormPreserve for 16 bits where the target has the f16 float controls
    /// (`Target::f16_rte`; not on the naga path, which cannot ask).
    pub f16_subnormals_kept: bool,
    /// Whether f32 atomic adds flush subnormal operands and results to zero (PTX's `atom.add.f32`
    /// and `red.add.f32` do, whatever the kernel's float controls; NVIDIA's Vulkan driver uses
    /// the same instruction).
    pub atomic_add_ftz: bool,
    /// Whether approximate ops are bounded only on Vulkan's ranges (SPIR-V devices): a
    /// division's error is bounded only for divisors in [2^-126, 2^126].
    pub vulkan_ranges: bool,
    /// Whether the device may lose the sign of a zero: a Vulkan module that does not request
    /// SignedZeroInfNanPreserve (the naga path: naga's SPIR-V carries no float controls and no
    /// NoContraction, so a driver may fold `s - s` to +0 and `fma(a, b, +0)` to the product).
    pub zero_sign_free: bool,
    /// Whether WGSL's floating-point rules bind the device (the naga path: the module is what
    /// a WGSL shader is): a shader may assume no infinities and NaNs, so what depends on one is
    /// indeterminate, and a multiplication may be contracted with the addition that uses it.
    pub wgsl_rules: bool,
    /// Whether a `dot` of 16-bit floats may run on matrix instructions (CUDA on sm_80 and
    /// later, cooperative matrices through Vulkan), whose zero sums come back +0 whatever the
    /// IEEE sign.
    pub matrix_dot: bool,
}

impl FuzzDevice {
    pub fn new(device: Device) -> FuzzDevice {
        let gpu = !matches!(device, Device::Interpreter | Device::Emulator(_));
        let flushes_subnormals = gpu && device.target().is_some_and(|t| !t.f32_denorm_preserve || !t.f16_rte);
        let naga = matches!(device, Device::Wgpu { naga: true, .. });
        let f16_subnormals_kept = flushes_subnormals && !naga && device.target().is_some_and(|t| t.f16_rte);
        // NVIDIA's f32 atomic add flushes through Vulkan as through CUDA: one instruction.
        let atomic_add_ftz = gpu && (device.target().is_some_and(|t| t.isa == tilekit_core::gpu::Isa::Ptx) || device.name().contains("NVIDIA"));
        let vulkan_ranges = gpu && device.target().is_some_and(|t| t.isa == tilekit_core::gpu::Isa::SpirV);
        let zero_sign_free = gpu && device.target().is_some_and(|t| !t.ieee_preserve);
        let wgsl_rules = naga;
        let matrix_dot = gpu && device.target().is_some_and(|t| !t.matrix.is_empty());
        FuzzDevice { device, gpu, flushes_subnormals, f16_subnormals_kept, atomic_add_ftz, vulkan_ranges, zero_sign_free, wgsl_rules, matrix_dot }
    }

    pub fn name(&self) -> String {
        self.device.name()
    }
}

/// The emulator targets the fuzzer uses: warps of 32 (CUDA sm_80's, which also has every dtype
/// and lowers f16/bf16 `dot`s to the emulator's model of `mma.sync`; sm_90a's, whose pipelined
/// `dot`s on 64-column panels run on its model of `wgmma`), warps of 8 (lavapipe's, with bf16
/// allowed so that the emulator covers it; lavapipe itself refuses bf16), and AMD's layouts
/// (gfx942: wavefronts of 64 and MFMA; gfx1100: wave32 and WMMA, whose operands are repeated
/// in both halves of the wave), and the H200's Vulkan target, whose f16 and bf16 `dot`s run on
/// cooperative matrices (held in a map of the emulator's own).
pub fn emulator_targets() -> Vec<Target> {
    vec![
        Target::cuda_sm80(),
        Target::cuda_sm90a(),
        Target { name: "vulkan:llvmpipe+bf16".into(), bf16: true, ..Target::lavapipe() },
        Target::amd_gfx942(),
        Target::amd_gfx1100(),
        Target::h200_vulkan(),
    ]
}

/// The number of elements of `case`'s largest tile (what [`over_budget`] divides among threads).
pub fn largest_tile(case: &Case) -> usize {
    let mut largest = 0;
    case.program.walk(&mut |inst| {
        for &r in &inst.results {
            largest = largest.max(case.program.ty(r).numel());
        }
    });
    largest
}

/// Why `case`, whose largest tile holds `largest` elements ([`largest_tile`]), exceeds `max`
/// elements per thread on `dev`, if it does: that tile over num_warps times the device's warp
/// width. Only GPU devices are budgeted (the interpreter and the emulator run every program).
pub fn over_budget(case: &Case, largest: usize, dev: &FuzzDevice, max: usize) -> Option<String> {
    let target = dev.device.target().filter(|_| dev.gpu)?;
    let threads = (case.num_warps.max(1) * target.subgroup_size.max(1)) as usize;
    let per_thread = largest.div_ceil(threads);
    (per_thread > max).then(|| format!("a tile of {largest} elements on {threads} threads is {per_thread} per thread, over {max}"))
}

/// The plan, buffers and configuration that run `case`.
pub fn plan(case: &Case) -> (Plan, Config) {
    let mut specs = Vec::new();
    let mut args = Vec::new();
    let mut b = 0;
    for p in 0..case.program.params.len() {
        match case.scalars.iter().find(|(i, _)| *i == p) {
            Some((_, s)) => args.push(LaunchArg::Scalar(*s)),
            None => {
                let buf = &case.buffers[b];
                specs.push(BufferSpec { name: buf.name.clone(), dtype: buf.dtype, len: buf.len, role: Role::Input });
                args.push(LaunchArg::Buffer(b));
                b += 1;
            }
        }
    }
    let plan = Plan { buffers: specs, launches: vec![Launch { program: case.program.clone(), grid: case.grid, args }] };
    (plan, Config::new().with("num_warps", case.num_warps as i64).with("num_stages", case.num_stages as i64))
}

/// Runs `case` on `device` from `inputs` (copied first) and returns the buffers after the run.
pub fn run_on(device: &Device, case: &Case, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, DeviceError> {
    let (plan, config) = plan(case);
    let bufs: Vec<HostBuffer> = inputs.iter().map(copy).collect();
    let result = device.run_plan(&plan, &bufs, &config);
    // Each program runs once: keep the pipeline caches from growing over a campaign.
    device.forget_pipelines();
    result.map(|_| bufs)
}

fn copy(b: &HostBuffer) -> HostBuffer {
    HostBuffer::from_bytes(b.dtype(), &b.to_bytes()).expect("a buffer's own bytes fit it")
}

/// The interpreter's buffers for `case` from `inputs`; an error is a generator bug (a program
/// that faults on the reference).
pub fn reference(case: &Case, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
    run_on(&Device::Interpreter, case, inputs).map_err(|e| e.to_string())
}

/// The interpreter's buffers for `case` from `inputs` as a device that flushes subnormals
/// computes them ([`tilekit_core::interp::InterpOptions::flush_subnormals`]).
pub fn flushing_reference(case: &Case, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, String> {
    modelled_reference(case, inputs, tilekit_core::interp::InterpOptions { flush_subnormals: true, ..Default::default() })
}

/// The interpreter's buffers for `case` from `inputs` under `options` (a device's model).
pub fn modelled_reference(case: &Case, inputs: &[HostBuffer], options: tilekit_core::interp::InterpOptions) -> Result<Vec<HostBuffer>, String> {
    let bufs: Vec<HostBuffer> = inputs.iter().map(copy).collect();
    let mut next = bufs.iter();
    let mut args = Vec::with_capacity(case.program.params.len());
    for p in 0..case.program.params.len() {
        match case.scalars.iter().find(|(i, _)| *i == p) {
            Some((_, s)) => args.push(tilekit_core::interp::Arg::Scalar(*s)),
            None => args.push(tilekit_core::interp::Arg::Buffer(next.next().ok_or("fewer input buffers than buffer parameters")?)),
        }
    }
    tilekit_core::interp::run_with(&case.program, case.grid, &args, options).map_err(|e| e.to_string())?;
    Ok(bufs)
}

/// Why a device error is a refusal, if it is one: the device cannot compile this program.
fn refusal(e: &DeviceError) -> Option<&'static str> {
    if let DeviceError::Naga(tilekit_naga::CompileError::Emit(tilekit_naga::NagaError::Unsupported { .. })) = e {
        return Some("naga");
    }
    let lower = match e {
        DeviceError::Compile(tilekit_spirv::CompileError::Lower { source, .. }) => Some(source),
        DeviceError::Naga(tilekit_naga::CompileError::Lower { source, .. }) => Some(source),
        DeviceError::Simt { source: SimtError::Lower(l), .. } => Some(l),
        DeviceError::Options(l) => Some(l),
        _ => None,
    };
    match lower {
        Some(LowerError::DType { .. }) => Some("dtype"),
        Some(LowerError::Registers { .. }) => Some("registers"),
        Some(LowerError::SharedMemory { .. }) => Some("shared-memory"),
        Some(LowerError::Threads { .. }) => Some("threads"),
        Some(LowerError::Unsupported { .. }) => Some("unsupported"),
        _ if e.to_string().contains("does not support") => Some("unsupported"),
        _ => None,
    }
}

/// The known bug whose signature `case` has on `dev`, if any. A bug the fuzzer finds that is
/// not fixed at once gets a signature here (a test of the program's shape and the device) and
/// an expect-fail filetest in tests/fuzz/ with what is known of it, so that campaigns count it
/// apart and the filetest notices its fix.
pub fn known_bug(case: &Case, dev: &FuzzDevice) -> Option<&'static str> {
    use tilekit_core::ir::Op;
    // lavapipe folds `y + 0.0` to `y` (losing -0 + 0 = +0) wherever it can prove the zero,
    // such as a self-comparison or an integer self-subtraction reaching the addition through a
    // conversion. The SPIR-V emitter writes those operations themselves as constants
    // (tests/fuzz/lavapipe-self-compare-folded-here.tile), which its zero rules then see, but a
    // zero the driver derives further on (a reduction over that constant, seed 46 program 100)
    // stays the driver's to fold: such programs keep the known bug's signature.
    if dev.name().contains("llvmpipe") {
        let mut self_compare = false;
        case.program.walk(&mut |inst| match inst.op {
            Op::Cmp { lhs, rhs, .. } => self_compare |= lhs == rhs,
            Op::Binary { op: tilekit_core::ir::BinaryOp::Sub | tilekit_core::ir::BinaryOp::Xor, lhs, rhs } => {
                self_compare |= lhs == rhs && !case.program.ty(lhs).dtype.is_float()
            }
            _ => {}
        });
        if self_compare {
            return Some("lavapipe-self-compare-fold");
        }
    }
    None
}

/// Runs `case` on `dev` and compares with `want` (the interpreter's buffers from `inputs`); a
/// failure with a known bug's signature is [`Outcome::Known`].
pub fn check(case: &Case, inputs: &[HostBuffer], want: &[HostBuffer], dev: &FuzzDevice) -> Outcome {
    let o = check_plain(case, inputs, want, dev);
    match known_bug(case, dev) {
        Some(bug) if o.unexplained() => Outcome::Known(bug, o.describe()),
        _ => o,
    }
}

/// [`check`] without the known bugs.
pub fn check_plain(case: &Case, inputs: &[HostBuffer], want: &[HostBuffer], dev: &FuzzDevice) -> Outcome {
    let got = match run_on(&dev.device, case, inputs) {
        Ok(got) => got,
        Err(e) => {
            return match refusal(&e) {
                Some(kind) => Outcome::Refused(kind.into(), e.to_string()),
                None => Outcome::Failed(e.to_string()),
            }
        }
    };
    judge(case, inputs, want, &got, dev)
}

/// Compares `got`, what `dev` computed from `inputs`, with `want`, the interpreter's buffers:
/// agreed, explained by the device's documented freedoms, or the first unexplained difference.
pub fn judge(case: &Case, inputs: &[HostBuffer], want: &[HostBuffer], got: &[HostBuffer], dev: &FuzzDevice) -> Outcome {
    let at = compare::mismatches(case, want, got, dev.gpu);
    if at.is_empty() {
        return Outcome::Agreed;
    }
    // Each differing element must be explained by one of the device's documented freedoms;
    // the kind names every freedom the program needed.
    let f16_kept = dev.f16_subnormals_kept;
    let flushing = InterpOptions { flush_subnormals: true, f16_subnormals_kept: f16_kept, ..Default::default() };
    let (inputs_flushed, flushing_model, arithmetic_only, widening_kept) = if dev.flushes_subnormals {
        let kept = InterpOptions { arithmetic_flush_only: true, ..flushing };
        let widening = InterpOptions { bf16_widening_keeps: true, ..flushing };
        (
            reference(case, &inputs::flushed(inputs, f16_kept)).ok(),
            modelled_reference(case, inputs, flushing).ok(),
            modelled_reference(case, inputs, kept).ok(),
            modelled_reference(case, inputs, widening).ok(),
        )
    } else {
        (None, None, None, None)
    };
    // A device without DenormPreserve may flush at some instructions and not at others: an
    // element that a flushing model changes depends on such a choice. Three models: everything
    // flushes; only arithmetic (comparisons and bf16 widening keep them); everything but bf16
    // widening (a shift). NVIDIA's driver has been seen making each of the last two choices,
    // which the first one misses.
    let mixed: Vec<&[HostBuffer]> = flushing_model.iter().chain(&arithmetic_only).chain(&widening_kept).map(Vec::as_slice).collect();
    let flushed_wants: Vec<&[HostBuffer]> = inputs_flushed.iter().chain(&flushing_model).map(Vec::as_slice).collect();
    // WGSL's rules: the reference with every non-finite value replaced by two different finite
    // ones (what changes depends on a non-finite value), and with multiplications contracted
    // into the additions that use them (flushing too where the device flushes).
    let (substituted, contracted) = if dev.wgsl_rules {
        let with = |o: InterpOptions| modelled_reference(case, inputs, o).ok();
        let substituted: Vec<Vec<HostBuffer>> =
            [1.0, -3.5].iter().filter_map(|&r| with(InterpOptions { nonfinite_as: Some(r), ..Default::default() })).collect();
        let mut flushes = vec![false];
        if dev.flushes_subnormals {
            flushes.push(true);
        }
        let contracted: Vec<Vec<HostBuffer>> = flushes
            .into_iter()
            .filter_map(|flush_subnormals| {
                with(InterpOptions { contract: true, flush_subnormals, f16_subnormals_kept: f16_kept, ..Default::default() })
            })
            .collect();
        (substituted, contracted)
    } else {
        (Vec::new(), Vec::new())
    };
    let substituted: Vec<&[HostBuffer]> = substituted.iter().map(Vec::as_slice).collect();
    let contracted: Vec<&[HostBuffer]> = contracted.iter().map(Vec::as_slice).collect();
    // Tensor cores: a zero element of a dot of 16-bit floats may lose its sign.
    let matrix = if dev.matrix_dot && has_dot(&case.program) {
        modelled_reference(case, inputs, InterpOptions { matrix_zero_positive: true, ..Default::default() }).ok()
    } else {
        None
    };
    let matrix: Vec<&[HostBuffer]> = matrix.iter().map(Vec::as_slice).collect();
    let mut used = 0usize;
    let mut unexplained = Vec::new();
    for &e in &at {
        let one = [e];
        let rules = [
            !flushed_wants.is_empty() && compare::explained_by_flush(case, want, &flushed_wants, got, &one, f16_kept),
            dev.atomic_add_ftz && compare::explained_by_atomic_ftz(case, want, got, &one),
            compare::explained_by_approx_domain(case, want, got, &one, dev.vulkan_ranges, dev.flushes_subnormals, f16_kept),
            dev.zero_sign_free && compare::explained_by_zero_sign(case, want, got, &one),
            !substituted.is_empty() && compare::explained_by_dependence(case, want, &substituted, &one),
            !contracted.is_empty() && compare::explained_by_model(case, &contracted, got, &one),
            !mixed.is_empty() && compare::explained_by_dependence(case, want, &mixed, &one),
            !matrix.is_empty() && compare::explained_by_model(case, &matrix, got, &one),
        ];
        match rules.iter().position(|&r| r) {
            Some(r) => used |= 1 << r,
            None => unexplained.push(e),
        }
    }
    // The choice may also be one instruction's alone: one model per float instruction, run
    // only for what the others left unexplained.
    if !unexplained.is_empty() && dev.flushes_subnormals {
        let singles = single_flush_models(case, inputs, flushing);
        let singles: Vec<&[HostBuffer]> = singles.iter().map(Vec::as_slice).collect();
        let before = unexplained.len();
        unexplained.retain(|&e| !compare::explained_by_dependence(case, want, &singles, &[e]));
        if unexplained.len() < before {
            used |= freedom_bit("subnormal-flush-mixed");
        }
    }
    match unexplained.first() {
        None => Outcome::Explained(explained_kind(used)),
        Some(&first) => {
            let mut m = compare::describe(case, want, got, first);
            for &(bi, _) in &unexplained {
                match m.spread.last_mut() {
                    Some((name, n)) if *name == case.buffers[bi].name => *n += 1,
                    _ => m.spread.push((case.buffers[bi].name.clone(), 1)),
                }
            }
            Outcome::Mismatch(m, unexplained.len())
        }
    }
}

/// The reference under `flushing` with only one instruction flushing
/// ([`InterpOptions::flush_only_at`]), one model per instruction that reads or makes a float.
fn single_flush_models(case: &Case, inputs: &[HostBuffer], flushing: InterpOptions) -> Vec<Vec<HostBuffer>> {
    let p = &case.program;
    let mut at = Vec::new();
    p.walk(&mut |inst| {
        let float = |v: &tilekit_core::ir::Value| p.ty(*v).dtype.is_float();
        if let Some(&r) = inst.results.first() {
            if float(&r) || inst.op.operands().iter().any(float) {
                at.push(r);
            }
        }
    });
    at.into_iter().filter_map(|v| modelled_reference(case, inputs, InterpOptions { flush_only_at: Some(v), ..flushing }).ok()).collect()
}

/// Whether the program has a `dot` anywhere.
fn has_dot(p: &tilekit_core::ir::Program) -> bool {
    let mut found = false;
    p.walk(&mut |inst| found |= matches!(inst.op, tilekit_core::ir::Op::Dot { .. }));
    found
}

/// The device freedoms [`judge`] tries, in the order of its rules: bit `i` of a `used` set is
/// `FREEDOMS[i]`.
const FREEDOMS: [&str; 8] =
    ["subnormal-flush", "atomic-add-ftz", "approx-domain", "zero-sign", "non-finite", "contraction", "subnormal-flush-mixed", "matrix-zero-sign"];

/// The bit of the freedom named `name` in a `used` set.
fn freedom_bit(name: &str) -> usize {
    1 << FREEDOMS.iter().position(|&n| n == name).expect("a freedom of FREEDOMS")
}

/// The name of an explanation that needed the freedoms in `used` (one bit per rule of
/// [`judge`], in its order): the freedoms' names joined by `+`.
fn explained_kind(used: usize) -> String {
    let names: Vec<&str> = FREEDOMS.iter().enumerate().filter(|(i, _)| used >> i & 1 == 1).map(|(_, n)| *n).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join("+")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::Check;

    fn mismatch(spread: &[(&str, usize)]) -> Outcome {
        let m = Mismatch {
            buffer: 0,
            name: spread[0].0.into(),
            element: 0,
            want: 1.0,
            got: 0.0,
            check: Check::Exact,
            spread: spread.iter().map(|&(n, c)| (n.to_string(), c)).collect(),
        };
        Outcome::Mismatch(m, spread.iter().map(|s| s.1).sum())
    }

    /// A shrink keeps a candidate only where it still mismatches in an output the original
    /// mismatched in; a difference elsewhere is another one.
    #[test]
    fn the_same_failure_shares_an_output() {
        let original = mismatch(&[("y11", 2)]);
        assert!(mismatch(&[("y11", 5)]).same_failure(&original));
        assert!(mismatch(&[("y6", 1), ("y11", 1)]).same_failure(&original));
        assert!(!mismatch(&[("y6", 52)]).same_failure(&original));
        assert!(!Outcome::Failed("x".into()).same_failure(&original));
    }
}
