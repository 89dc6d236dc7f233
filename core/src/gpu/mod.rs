//! GPU lowering (Triton's TTGIR level): targets, layouts and the shared per-thread emission.
//!
//! For one [`Target`], every tile value gets a [`layout::Layout`]: the function from
//! (register, lane, warp) to tile coordinates. [`lower`] walks the tile program and emits the
//! per-thread scalar program through a backend's [`emit::Emitter`].

pub mod axis;
pub mod emit;
pub mod grid;
pub mod layout;
pub mod legalize;
pub mod lower;
pub mod math;
pub mod simt;
pub mod target;
pub mod tma;
pub mod warmup;

pub use emit::Emitter;
pub use target::{Isa, MatrixInstr, MatrixKind, SubgroupOps, Target};

use crate::ir::Program;
use crate::text::{print_with, PrintOptions};

/// What the lowering chose for a program on a target, for reports and results files: the
/// instruction every `dot` runs on (a matrix instruction or the FMA loop), the loads pipelined
/// into shared memory by `num_stages`, and the threads and shared memory a program takes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decisions {
    /// One entry per `dot` in program order: `mma.sync m16n8k16`, `cooperative matrix
    /// 16x16x16`, ... or `fma`.
    pub dots: Vec<String>,
    pub pipelined_loads: usize,
    /// Pipelined loads whose copies read from addresses the loop carries and steps
    /// ([`lower::RingInfo::stepped`]).
    pub stepped_loads: usize,
    /// Pipelined loads copied as boxes of tensor maps ([`lower::RingInfo::tensor`]).
    pub tensor_loads: usize,
    /// Loads issued one iteration ahead into registers (see [`lower::LowerInfo::prefetched`]).
    pub prefetched_loads: usize,
    pub shared_bytes: u64,
    pub threads: u32,
    /// The 32-bit registers a thread's values need at the program's peak ([`registers`]).
    pub registers: u32,
}

/// The 32-bit registers one thread of `program` needs at its peak, lowered for `target` with
/// `options`: a liveness count over the per-thread program (the emulator's recording), with
/// arithmetic counted next to its first use and addresses folded into the memory instructions
/// that take them, as an assembler schedules and encodes them. It is an estimate, not an
/// allocation, and not yet a limit the planning enforces: tests/registers.rs holds it to
/// ptxas's counts in the committed H200 results and states where it is far from them.
pub fn registers(program: &Program, target: &Target, options: &lower::LowerOptions) -> Result<u32, lower::LowerError> {
    Ok(simt::compile(program, target, options)?.peak_registers())
}

/// [`Decisions`] of lowering `program` for `target` with `options`.
pub fn decisions(program: &Program, target: &Target, options: &lower::LowerOptions) -> Result<Decisions, lower::LowerError> {
    let lowered = simt::compile(program, target, options)?;
    let info = &lowered.info;
    let mut dots = Vec::new();
    program.walk(&mut |inst| {
        if let crate::ir::Op::Dot { .. } = inst.op {
            let r = inst.results[0];
            let home = info.homes.get(r.index()).and_then(Option::as_ref);
            let coop = info.coop.iter().find(|(v, _)| *v == r.index()).map(|(_, s)| *s);
            dots.push(match home {
                _ if coop.is_some() => {
                    let [m, n, k] = coop.unwrap_or_default();
                    let two = if info.double_staged.contains(&r.index()) { ", operands in two staging buffers" } else { "" };
                    format!("cooperative matrix {m}x{n}x{k}{two}")
                }
                Some(layout::Layout::Mma(_)) if info.wgmma.contains(&r.index()) => {
                    let n = program.ty(r).shape.get(1).copied().unwrap_or(0);
                    format!("wgmma m64n{n}k16{}", if info.in_flight.contains(&r.index()) { ", in flight across iterations" } else { "" })
                }
                Some(layout::Layout::Mma(m)) => m.frag.instruction().to_string(),
                _ => "fma".to_string(),
            });
        }
    });
    Ok(Decisions {
        dots,
        pipelined_loads: info.pipelined_loads(),
        stepped_loads: info.rings.iter().filter(|r| r.stepped).count(),
        tensor_loads: info.rings.iter().filter(|r| r.tensor).count(),
        prefetched_loads: info.prefetched.len(),
        shared_bytes: info.shared_bytes,
        threads: info.threads,
        registers: lowered.peak_registers(),
    })
}

/// The GPU IR as text: the tile program with the layout the lowering gave every data value
/// (recipes, materialized per use, and scalars are marked as such; a pipelined load, its
/// shared-memory ring), headed by the launch shape and resources. This is what `tilekit ir
/// --gpu` prints.
pub fn describe(program: &Program, target: &Target, options: &lower::LowerOptions) -> Result<String, lower::LowerError> {
    let lowered = simt::compile(program, target, options)?;
    let info = &lowered.info;
    let mut out = String::new();
    out.push_str(&format!("; target {target}\n"));
    if options.divisible_by_16 != 0 {
        let marked: Vec<&str> = program
            .params
            .iter()
            .enumerate()
            .filter(|(p, _)| *p < 64 && options.divisible_by_16 >> p & 1 == 1)
            .map(|(_, param)| param.name.as_str())
            .collect();
        let verb = if marked.len() == 1 { "is a multiple" } else { "are multiples" };
        out.push_str(&format!("; specialized: {} {verb} of 16\n", marked.join(", ")));
    }
    if !info.tensor_maps.is_empty() {
        let name = |p: u32| program.params.get(p as usize).map_or_else(|| format!("parameter {p}"), |q| q.name.clone());
        let extent = |e: tma::Extent| match e {
            tma::Extent::Const(c) => c.to_string(),
            tma::Extent::Param(p) => name(p),
        };
        let maps: Vec<String> = info
            .tensor_maps
            .iter()
            .map(|m| {
                format!(
                    "{} ({} rows of {}, row stride {}, boxes of {} x {})",
                    name(m.param),
                    extent(m.dims[1]),
                    extent(m.dims[0]),
                    extent(m.stride),
                    m.box_dims[1],
                    m.box_dims[0]
                )
            })
            .collect();
        out.push_str(&format!("; tensor maps, kernel parameters after the program's: {}\n", maps.join("; ")));
    }
    if options.fold_grid {
        out.push_str("; grid folded: program ids come from the linear workgroup index and the launched grid (push constants)\n");
    }
    out.push_str(&format!(
        "; {} threads ({} warps of {}), {} bytes of shared memory{}, {} layout conversions, {} per-thread instructions, an estimated {} registers per thread at the peak\n",
        info.threads,
        options.num_warps,
        target.subgroup_size,
        info.shared_bytes,
        if info.shared.is_empty() && info.staged.is_empty() {
            String::new()
        } else {
            let staged = info.staged.iter().map(|(d, n)| format!("{n} x {d} staged in 16-byte vectors"));
            format!(" ({})", info.shared.iter().map(|(d, n)| format!("{n} x {d}")).chain(staged).collect::<Vec<_>>().join(" + "))
        },
        info.conversions,
        lowered.num_instructions(),
        lowered.peak_registers(),
    ));
    if options.num_stages > 1 {
        // Whether the knob took effect, and where it could not, what it needs.
        out.push_str(&match info.pipelined_loads() {
            0 if !info.prefetched.is_empty() => format!(
                "; num_stages = {}: {} loads issued one iteration ahead into registers (no asynchronous copies on this target: \
                 one iteration whatever the depth){}\n",
                options.num_stages,
                info.prefetched.len(),
                match info.double_staged.len() {
                    0 => String::new(),
                    n => format!(", the operands of {n} dot(s) staged in two buffers by iteration parity (one barrier per iteration)"),
                }
            ),
            0 => format!(
                "; num_stages = {}: no load pipelined (it takes a target with asynchronous copies and NVIDIA's matrix \
                 instructions, and 2-D loads of 16-bit floats, or of f32 for a tf32 dot, that only feed a matrix dot in a loop, with masks \
                 whole over 16 bytes)\n",
                options.num_stages
            ),
            n => {
                let mut ahead: Vec<u32> = info.rings.iter().map(|r| r.ahead).collect();
                ahead.sort();
                ahead.dedup();
                let ahead = ahead.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" or ");
                let why = if info.in_flight.is_empty() { "" } else { " (one less than num_stages - 1: warpgroup dots stay in flight an iteration)" };
                format!("; num_stages = {}: {n} loads pipelined, {ahead} iterations ahead{why}\n", options.num_stages)
            }
        });
    }
    let text = print_with(program, &PrintOptions { locations: false });
    for line in text.lines() {
        out.push_str(line);
        let t = line.trim_start();
        let first = t.strip_prefix('%').and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next());
        if let Some(idx) = first.and_then(|d| d.parse::<usize>().ok()) {
            if t.contains(" = ") {
                let ring = info.rings.iter().find(|r| r.value == idx);
                let note = match (ring, info.homes.get(idx)) {
                    (Some(r), _) => {
                        let [rows, cols] = r.stored;
                        let swizzled = if r.swizzled { ", swizzled" } else { "" };
                        let transposed = if r.transposed { ", stored transposed" } else { "" };
                        let panels = if r.panels { ", 64-column panels" } else { "" };
                        let stepped = if r.stepped { ", addresses stepped" } else { "" };
                        let tensor = if r.tensor { ", tensor copies" } else { "" };
                        format!("#ring<{} stages, {rows} x {cols}{swizzled}{panels}{transposed}{stepped}{tensor}>", r.stages)
                    }
                    (None, Some(Some(l))) if info.in_flight.contains(&idx) => format!("{l} via wgmma, in flight into the next iteration"),
                    (None, Some(Some(l))) if info.wgmma.contains(&idx) => format!("{l} via wgmma"),
                    (None, Some(Some(l))) if info.prefetched.contains(&idx) => format!("{l}, loaded one iteration ahead"),
                    (None, Some(Some(l))) if info.coop.iter().any(|(v, _)| *v == idx) && !matches!(l, layout::Layout::Coop(_)) => {
                        format!("{l} via cooperative matrices")
                    }
                    (None, Some(Some(l))) => format!("{l}"),
                    _ if program.values.get(crate::ir::Value::from_index(idx)).is_some_and(|ty| ty.is_scalar()) => "#uniform".to_string(),
                    _ => "#recipe".to_string(),
                };
                out.push_str("  ; ");
                out.push_str(&note);
            }
        }
        out.push('\n');
    }
    Ok(out)
}
