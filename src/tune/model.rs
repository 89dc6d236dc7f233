//! An analytical cost model that ranks a kernel's candidate configurations on a device before
//! any is timed, so the tuner times the few the model puts first.
//!
//! Per launch: the programs of the grid and the threads of one program; how many programs fit
//! on a multiprocessor at once (threads, registers and shared memory from the backend's static
//! resources); the waves that gives. The time is the largest of
//! - the bytes the problem must move at the copy bandwidth, scaled down when too few loads are
//!   in flight to cover the memory latency (Little's law: threads resident x bytes each thread
//!   has outstanding against bandwidth x latency);
//! - for tiled `dot` kernels (`BLOCK_M` / `BLOCK_N`), the operand tiles every program streams,
//!   at the bandwidth of the last-level cache, and the FLOPs at the matrix (or FMA) peak;
//! - the serial latency of each wave: loads (at the cache's latency for a loop that re-reads
//!   what the program read before or what every program reads), then the reductions across the
//!   program's warps;
//!
//! plus the launch overhead. It ranks; its absolute figures are rough.

use tilekit_core::Config;

use crate::device::KernelResources;
use crate::kernels::{Cost, Plan};

/// What the model needs of a device.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub multiprocessors: u32,
    pub threads_per_multiprocessor: u32,
    pub registers_per_multiprocessor: u32,
    pub shared_per_multiprocessor: u32,
    pub programs_per_multiprocessor: u32,
    pub warp: u32,
    /// Measured (or nominal) copy bandwidth, bytes/s.
    pub copy_bytes_per_s: f64,
    /// Matrix-unit peak, FLOP/s, where `dot` uses one.
    pub matrix_flops_per_s: Option<f64>,
    pub fma_flops_per_s: f64,
    /// Last-level cache bandwidth over the copy bandwidth.
    pub cache_over_copy: f64,
    /// Seconds from a load's issue to its data.
    pub memory_latency_s: f64,
    /// The same for data the cache holds.
    pub cache_latency_s: f64,
    /// Seconds one barrier-separated step of a cross-warp reduction takes.
    pub barrier_s: f64,
    pub launch_s: f64,
}

impl Machine {
    /// An NVIDIA H200 (132 multiprocessors of sm_90) with the given measured ceilings.
    pub fn h200(copy_bytes_per_s: f64, matrix_flops_per_s: Option<f64>) -> Machine {
        Machine {
            multiprocessors: 132,
            threads_per_multiprocessor: 2048,
            registers_per_multiprocessor: 65536,
            shared_per_multiprocessor: 228 << 10,
            programs_per_multiprocessor: 32,
            warp: 32,
            copy_bytes_per_s,
            matrix_flops_per_s,
            fma_flops_per_s: 67e12,
            cache_over_copy: 2.5,
            // Under load, not idle: with the idle latency (0.8 us) the model ranked the committed
            // H200 and H100 results worse on every count tests/tune.rs prints.
            memory_latency_s: 1.4e-6,
            // The last-level cache's, under load: 0.4 to 0.8 us ranked the committed results alike.
            cache_latency_s: 0.6e-6,
            barrier_s: 0.15e-6,
            launch_s: 3e-6,
        }
    }

    /// A device the model knows nothing particular about: `multiprocessors` units of an
    /// sm_80-like shape with a nominal bandwidth.
    pub fn generic(multiprocessors: u32, warp: u32, copy_bytes_per_s: f64) -> Machine {
        Machine {
            multiprocessors: multiprocessors.max(1),
            warp: warp.max(1),
            copy_bytes_per_s,
            matrix_flops_per_s: None,
            fma_flops_per_s: 20e12,
            ..Machine::h200(copy_bytes_per_s, None)
        }
    }
}

/// Whether a device's name is one of the GPUs the model has figures for (the H100 of 132
/// multiprocessors: SXM or NVL, not PCIe).
fn known_hopper(name: &str) -> bool {
    name.contains("H200") || (name.contains("H100") && !name.contains("PCIe"))
}

impl Machine {
    /// The model's view of `device`: an H200's or H100's figures where the device is one, the
    /// CUDA driver's multiprocessor count on other CUDA devices, the host's cores for the CPU
    /// devices (lavapipe included), and a nominal mid-range GPU otherwise. Bandwidths are
    /// nominal: the model ranks configurations, it does not predict times.
    pub fn for_device(device: &crate::Device) -> Machine {
        let name = device.name();
        let warp = device.target().map_or(32, |t| t.subgroup_size);
        #[cfg(any(feature = "ptx", feature = "ptx-static"))]
        if let crate::Device::Cuda { ordinal, .. } = device {
            if known_hopper(&name) {
                return Machine::for_platform(&name, false, None, None);
            }
            if let Some(info) = tilekit_ptx::CudaRuntime::devices().ok().and_then(|d| d.into_iter().find(|i| i.ordinal == *ordinal)) {
                return Machine::generic(info.multiprocessors, warp, 1e12);
            }
        }
        // A Vulkan driver that reports its multiprocessors (NVIDIA's VK_NV_shader_sm_builtins)
        // sizes the waves; the H200 and H100 keep their own figures below.
        #[cfg(feature = "vulkan")]
        {
            let vulkan_name = match device {
                crate::Device::Vulkan { name, .. } => Some(name),
                #[cfg(feature = "wgpu")]
                crate::Device::Wgpu { name, .. } => Some(name),
                _ => None,
            };
            if let Some(vulkan_name) = vulkan_name.filter(|_| !known_hopper(&name)) {
                let info = tilekit_spirv::VulkanRuntime::devices().ok().and_then(|d| d.into_iter().find(|i| &i.name == vulkan_name));
                if let Some(info) = info.filter(|i| i.multiprocessors.is_some()) {
                    return Machine::from_vulkan(&info, warp);
                }
            }
        }
        let cpu = matches!(device, crate::Device::Interpreter | crate::Device::Emulator(_)) || name.contains("llvmpipe");
        // No matrix peak unmeasured: the FMA rate ranks the library's dot kernels better than
        // cuBLAS's peak, which they are far from (tests/tune.rs).
        let machine = Machine::for_platform(&name, cpu, None, None);
        if known_hopper(&name) {
            machine
        } else {
            Machine { warp, ..machine }
        }
    }
}

#[cfg(feature = "vulkan")]
impl Machine {
    /// A GPU whose Vulkan driver gives its multiprocessors and the warps each holds.
    pub fn from_vulkan(info: &tilekit_spirv::VulkanDeviceInfo, warp: u32) -> Machine {
        let generic = Machine::generic(info.multiprocessors.unwrap_or(64), warp, 1e12);
        match info.warps_per_multiprocessor {
            Some(w) => Machine { threads_per_multiprocessor: w * warp.max(1), ..generic },
            None => generic,
        }
    }
}

impl Machine {
    /// The model's view of a platform a results file describes: an H200 or an H100 by its
    /// hardware name (with the copy and matrix ceilings measured beside the results, where
    /// present), a CPU device by its type, a nominal GPU otherwise.
    pub fn for_platform(hardware: &str, cpu: bool, copy_gbps: Option<f64>, matrix_tflops: Option<f64>) -> Machine {
        let copy = copy_gbps.map(|g| g * 1e9);
        if hardware.contains("H200") {
            return Machine::h200(copy.unwrap_or(4.2e12), matrix_tflops.map(|t| t * 1e12));
        }
        if known_hopper(hardware) {
            // An H100 of 132 multiprocessors: the H200's shape with less memory bandwidth.
            return Machine::h200(copy.unwrap_or(3.35e12), matrix_tflops.map(|t| t * 1e12));
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        if cpu {
            Machine { memory_latency_s: 0.1e-6, cache_latency_s: 0.1e-6, launch_s: 20e-6, ..Machine::generic(cores, 8, copy.unwrap_or(10e9)) }
        } else {
            Machine { matrix_flops_per_s: matrix_tflops.map(|t| t * 1e12), ..Machine::generic(64, 32, copy.unwrap_or(1e12)) }
        }
    }
}

/// The candidates a tuner following the model times, as indices into `estimates`: the first
/// fifth of its ranking (at least one) and every other whose estimate is within `slack` of the
/// first's (the model cannot tell those apart). Candidates that cannot run are never timed.
pub fn timed_by_model(estimates: &[Result<Estimate, String>], slack: f64) -> Vec<usize> {
    let order = rank(estimates);
    let runnable = estimates.iter().filter(|e| e.is_ok()).count();
    let fifth = runnable.div_ceil(5).max(1);
    let first = order.first().and_then(|&i| estimates[i].as_ref().ok()).map_or(f64::INFINITY, |e| e.seconds);
    order
        .iter()
        .enumerate()
        .filter(|(r, &i)| estimates[i].as_ref().is_ok_and(|e| *r < fifth || e.seconds <= first * slack))
        .map(|(_, &i)| i)
        .collect()
}

/// The model's view of one candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub seconds: f64,
    /// Programs resident per multiprocessor, and what limits it.
    pub resident: u32,
    pub limit: &'static str,
    pub waves: u64,
}

/// Registers are allocated per warp in units of 256 (8 per thread).
fn allocated_registers(r: u32) -> u32 {
    r.max(1).div_ceil(8) * 8
}

/// The registers an assembler allocates for a thread the lowering estimates to need `need`
/// (`tilekit_core::gpu::registers`): ptxas allocated 1.2 times the estimate at the median of
/// the committed H200 results (tests/registers.rs), at most the 255 a thread may have.
pub fn allocated_from_estimate(need: u32) -> u32 {
    (need * 6 / 5).min(255)
}

/// `resources` (one per launch of `plan`, as the backend reported them) with, where a launch
/// has no register count (wgpu, a Vulkan driver without pipeline statistics), what the
/// lowering estimates its threads need on `target` ([`allocated_from_estimate`]).
pub fn with_estimated_registers(
    target: &tilekit_core::gpu::Target,
    plan: &Plan,
    config: &Config,
    resources: &[KernelResources],
) -> Vec<KernelResources> {
    let base = tilekit_core::gpu::lower::LowerOptions::for_config(config);
    plan.launches
        .iter()
        .enumerate()
        .map(|(i, launch)| {
            let mut r = resources.get(i).cloned().unwrap_or_default();
            if r.registers.is_none() {
                r.registers = tilekit_core::gpu::registers(&launch.program, target, &crate::device::launch_options(&base, launch))
                    .ok()
                    .map(allocated_from_estimate);
            }
            r
        })
        .collect()
}

/// Estimated seconds of `plan` under `config` on `machine`; `resources` per launch where the
/// backend reports them (else no shared memory, and registers from the widest tile a thread
/// holds; [`with_estimated_registers`] gives the lowering's count instead). An error says
/// why a launch cannot run at all (one program needs more than a multiprocessor has).
pub fn estimate(machine: &Machine, plan: &Plan, config: &Config, cost: Cost, resources: &[KernelResources]) -> Result<Estimate, String> {
    let warps = config.num_warps().max(1) as u32;
    let threads = warps * machine.warp;
    let launches = plan.launches.len().max(1) as f64;
    let elem = plan.inputs().next().map_or(2.0, |(_, b)| b.dtype.size_bytes() as f64);
    let mut total = 0.0;
    let mut first: Option<Estimate> = None;
    for (li, launch) in plan.launches.iter().enumerate() {
        let programs: u64 = launch.grid.iter().map(|&g| u64::from(g.max(1))).product();
        let res = resources.get(li);
        let program_traffic = traffic(launch);
        // Without the backend's count, registers follow from the widest tile each thread holds
        // (its elements as 32-bit values, half again for addresses and temporaries).
        let held = program_traffic.widest_load.div_ceil(threads as usize) as u32;
        let registers = res.and_then(|r| r.registers).unwrap_or_else(|| (24 + held + held / 2).min(255));
        // A compiler fits every program of a size the launch may have into the register file
        // (ptxas is told the threads, `reqntid`; a Vulkan driver must run any workgroup within
        // its limits), spilling what does not fit: an estimate above that share is what the
        // thread wants, not what it gets.
        let fitting = (machine.registers_per_multiprocessor / threads.max(1)) / 8 * 8;
        let registers = if fitting >= 8 { registers.min(fitting) } else { registers };
        let shared = res.and_then(|r| r.shared_bytes).unwrap_or(0);
        let limits = [
            (machine.threads_per_multiprocessor / threads, "threads"),
            (machine.registers_per_multiprocessor / (allocated_registers(registers) * threads), "registers"),
            (machine.shared_per_multiprocessor.checked_div(shared).unwrap_or(u32::MAX), "shared memory"),
            (machine.programs_per_multiprocessor, "programs"),
        ];
        let (resident, limit) = limits.into_iter().min_by_key(|l| l.0).expect("four limits");
        if resident == 0 {
            return Err(format!(
                "a program of {threads} threads with {registers} registers each and {shared} bytes of shared memory does not fit on a multiprocessor ({limit})"
            ));
        }
        let slots = u64::from(machine.multiprocessors) * u64::from(resident);
        let waves = programs.div_ceil(slots);
        let concurrent = programs.min(slots) as f64;
        // This launch's share of the problem's traffic and work; what its programs move beyond
        // it (a row read twice) comes from the cache.
        let bytes = cost.bytes as f64 / launches;
        let flops = cost.flops as f64 / launches;
        let moved = program_traffic.bytes * programs as f64;
        let per_thread = bytes / (programs as f64 * f64::from(threads));
        // A thread has outstanding what one access of the program's widest loaded tile gives it
        // (a block loop that loads small tiles keeps little in flight), a few times over, at most
        // four 16-byte accesses.
        let tile = program_traffic.widest_load;
        let per_access = if tile == 0 { per_thread } else { tile as f64 * elem / f64::from(threads) };
        let in_flight = concurrent * f64::from(threads) * per_thread.min(4.0 * per_access).min(64.0);
        let needed = machine.copy_bytes_per_s * machine.memory_latency_s;
        // While one program reduces, the others resident beside it keep memory busy: with one
        // per multiprocessor its phases do not overlap.
        let overlap = f64::from(resident) / (f64::from(resident) + 0.5);
        let bandwidth = machine.copy_bytes_per_s * (in_flight / needed).min(1.0) * overlap;
        let mut t = bytes / bandwidth.max(1.0) + (moved - bytes).max(0.0) / (bandwidth * machine.cache_over_copy).max(1.0);
        if let (Ok(bm), Ok(bn)) = (config.get("BLOCK_M"), config.get("BLOCK_N")) {
            // Every program streams a BLOCK_M x K and a K x BLOCK_N tile for BLOCK_M x BLOCK_N x K
            // multiply-adds: the operand bytes per flop fall as the tiles grow.
            let tiles = flops / 2.0 * (1.0 / bn.max(1) as f64 + 1.0 / bm.max(1) as f64) * elem;
            t = t.max(tiles / (machine.copy_bytes_per_s * machine.cache_over_copy));
            let peak = machine.matrix_flops_per_s.unwrap_or(machine.fma_flops_per_s);
            // The matrix units of a multiprocessor need four warps resident to be kept busy.
            let fill = (concurrent * f64::from(warps) / (f64::from(machine.multiprocessors) * 4.0)).min(1.0);
            t = t.max(flops / (peak * fill));
        } else if flops > 0.0 {
            t = t.max(flops / machine.fma_flops_per_s);
        }
        // Each wave waits for its loads, then combines across its warps: log2(warps) steps of
        // shuffles and barriers, each about a barrier.
        let steps = f64::from(warps).log2().ceil() + 1.0;
        let serial = waves as f64
            * ((1.0 + program_traffic.steps) * machine.memory_latency_s
                + program_traffic.cached_steps * machine.cache_latency_s
                + steps * machine.barrier_s);
        t = t.max(serial);
        total += t + machine.launch_s;
        if first.is_none() {
            first = Some(Estimate { seconds: 0.0, resident, limit, waves });
        }
    }
    let mut e = first.unwrap_or(Estimate { seconds: 0.0, resident: 0, limit: "nothing launched", waves: 0 });
    e.seconds = total;
    Ok(e)
}

/// What one program of a launch reads and writes, from its text: bytes of every load and
/// store times the trip counts of the loops around it (bounds from constants and the launch's
/// scalar arguments; a loop whose trip count cannot be known counts once), and the loop
/// iterations it runs one after the other (each waits for its loads).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Traffic {
    pub bytes: f64,
    pub steps: f64,
    /// Loop iterations whose loads all come from the cache (they re-read buffers the program
    /// read before, or read what every program reads): they wait for the cache, not memory.
    pub cached_steps: f64,
    /// Elements of the widest tile a load reads.
    pub widest_load: usize,
}

/// [`Traffic`] of `launch`'s program, taking program 0 as representative.
pub fn traffic(launch: &crate::kernels::Launch) -> Traffic {
    use std::collections::{HashMap, HashSet};
    use tilekit_core::ir::{BinaryOp, Block, Op, ParamKind};
    use tilekit_core::Scalar;
    let program = &launch.program;
    /// What the walk knows of the program beyond the constants.
    #[derive(Default)]
    struct Seen {
        /// Values that differ between programs (they depend on a program id).
        per_program: HashSet<tilekit_core::ir::Value>,
        /// Buffers (parameter indices) loaded from so far, in program order.
        read: Vec<u32>,
    }
    let mut known: HashMap<tilekit_core::ir::Value, i64> = HashMap::new();
    fn walk(
        program: &tilekit_core::Program,
        launch: &crate::kernels::Launch,
        block: &Block,
        times: f64,
        known: &mut HashMap<tilekit_core::ir::Value, i64>,
        seen: &mut Seen,
        out: &mut Traffic,
    ) {
        let elem = |buffer: u32| match program.params.get(buffer as usize).map(|p| &p.kind) {
            Some(ParamKind::Buffer { dtype, .. }) => dtype.size_bytes() as f64,
            _ => 4.0,
        };
        for inst in &block.insts {
            let result = inst.results.first().copied();
            let value = match &inst.op {
                Op::Const { value: Scalar::Int(v) } => Some(*v),
                Op::Arg { param } => match launch.args.get(*param as usize) {
                    Some(crate::kernels::LaunchArg::Scalar(Scalar::Int(v))) => Some(*v),
                    _ => None,
                },
                Op::ProgramId { .. } => Some(0),
                Op::NumPrograms { axis } => launch.grid.get(*axis as usize).map(|&g| i64::from(g)),
                Op::Binary { op, lhs, rhs } => match (known.get(lhs), known.get(rhs)) {
                    (Some(&a), Some(&b)) => match op {
                        BinaryOp::Add => a.checked_add(b),
                        BinaryOp::Sub => a.checked_sub(b),
                        BinaryOp::Mul => a.checked_mul(b),
                        BinaryOp::Div => a.checked_div(b),
                        BinaryOp::Rem => a.checked_rem(b),
                        BinaryOp::Max => Some(a.max(b)),
                        BinaryOp::Min => Some(a.min(b)),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            };
            if let (Some(r), Some(v)) = (result, value) {
                if program.ty(r).is_scalar() {
                    known.insert(r, v);
                }
            }
            match &inst.op {
                Op::Load { buffer, .. } => {
                    if !seen.read.contains(buffer) {
                        seen.read.push(*buffer);
                    }
                    if let Some(r) = result {
                        let n = program.ty(r).numel();
                        out.bytes += times * n as f64 * elem(*buffer);
                        out.widest_load = out.widest_load.max(n);
                    }
                }
                Op::Store { buffer, value, .. } => out.bytes += times * program.ty(*value).numel() as f64 * elem(*buffer),
                Op::For { lower, upper, step, body, .. } => {
                    let trips = match (known.get(lower), known.get(upper), known.get(step)) {
                        (Some(&l), Some(&u), Some(&s)) if s > 0 => ((u - l).max(0) as f64 / s as f64).ceil(),
                        _ => 1.0,
                    };
                    // A loop whose loads all come from the cache waits for the cache: it re-reads
                    // buffers the program read before (LayerNorm's second pass over its row), or
                    // reads what every program reads (the row's weights).
                    let mut reads = Vec::new();
                    loads_in(body, &mut reads);
                    let cached = !reads.is_empty() && reads.iter().all(|(b, offsets)| seen.read.contains(b) || !seen.per_program.contains(offsets));
                    if cached {
                        out.cached_steps += times * trips;
                    } else {
                        out.steps += times * trips;
                    }
                    walk(program, launch, body, times * trips, known, seen, out);
                }
                Op::If { then_block, else_block, .. } => {
                    walk(program, launch, then_block, times, known, seen, out);
                    walk(program, launch, else_block, times, known, seen, out);
                }
                _ => {}
            }
        }
    }
    fn loads_in(block: &Block, out: &mut Vec<(u32, tilekit_core::ir::Value)>) {
        for inst in &block.insts {
            match &inst.op {
                Op::Load { buffer, offsets, .. } => out.push((*buffer, *offsets)),
                Op::For { body, .. } => loads_in(body, out),
                Op::If { then_block, else_block, .. } => {
                    loads_in(then_block, out);
                    loads_in(else_block, out);
                }
                _ => {}
            }
        }
    }
    // Values that differ between programs: what depends on a program id, through loops and
    // branches (a loop's arguments and results depend on what it starts from and yields).
    fn taint(block: &Block, set: &mut HashSet<tilekit_core::ir::Value>) -> bool {
        let mut changed = false;
        for inst in &block.insts {
            let mut depends = matches!(inst.op, Op::ProgramId { .. }) || inst.op.operands().iter().any(|v| set.contains(v));
            match &inst.op {
                Op::For { body, .. } => {
                    // The caller repeats the walk until nothing changes, so arguments marked
                    // here reach the body's values on the next walk.
                    changed |= taint(body, set);
                    depends |= yields_tainted(body, set);
                    if depends {
                        for a in &body.args {
                            changed |= set.insert(*a);
                        }
                    }
                }
                Op::If { then_block, else_block, .. } => {
                    changed |= taint(then_block, set);
                    changed |= taint(else_block, set);
                    depends |= yields_tainted(then_block, set) || yields_tainted(else_block, set);
                }
                _ => {}
            }
            if depends {
                for r in &inst.results {
                    changed |= set.insert(*r);
                }
            }
        }
        changed
    }
    fn yields_tainted(block: &Block, set: &HashSet<tilekit_core::ir::Value>) -> bool {
        block.insts.iter().any(|i| matches!(&i.op, Op::Yield { values } if values.iter().any(|v| set.contains(v))))
    }
    let mut seen = Seen::default();
    while taint(&program.body, &mut seen.per_program) {}
    let mut out = Traffic { steps: 1.0, ..Traffic::default() };
    walk(program, launch, &program.body, 1.0, &mut known, &mut seen, &mut out);
    out
}

/// Indices of `estimates` from the fastest estimate to the slowest (those that cannot run
/// last, in their order).
pub fn rank(estimates: &[Result<Estimate, String>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..estimates.len()).collect();
    let key = |i: &usize| estimates[*i].as_ref().map_or(f64::INFINITY, |e| e.seconds);
    order.sort_by(|a, b| key(a).total_cmp(&key(b)).then(a.cmp(b)));
    order
}
