//! Grid folding ([`tilekit::gpu::grid`]) on both Vulkan runtimes: grids beyond the device's
//! workgroups per axis run as the interpreter runs them.
//!
//! One case is real: vector add over 65537 programs along axis 0, past the 65535 that lavapipe
//! and wgpu dispatch, launched, recorded into a caller's encoder and timed. The others lower the
//! runtimes' limit to 7 workgroups per axis (`max_workgroups_per_dim`) so that grids of a few
//! hundred programs fold: a program that writes its ids and extents (checked exactly, idle
//! workgroups included), and library kernels with reductions, barriers and several launches,
//! folded against unfolded bit for bit. The Vulkan runtime runs with the validation layer on
//! (`TILEKIT_VULKAN_VALIDATION=0` turns it off); every message fails the test.

use rand::rngs::StdRng;
use rand::SeedableRng;
use tilekit::device::launch_options;
use tilekit::gpu::grid::{self, folded_program};
use tilekit::gpu::lower::{LowerError, LowerOptions};
use tilekit::gpu::Target;
use tilekit::interp::{self, Arg};
use tilekit::kernels::{self, LaunchArg, Plan, Problem, Role};
use tilekit::{Builder, Config, DType, HostBuffer, Program, Scalar};
use tilekit_spirv::wgpu_rt::KernelBuffer;
use tilekit_spirv::{compile, SpirvKernel, VulkanOptions, VulkanRuntime, WgpuRuntime};

/// The limit the small-grid tests fold under.
const LIMIT: u32 = 7;

/// One launch of a plan, compiled for one runtime.
struct Job {
    kernel: SpirvKernel,
    grid: [u32; 3],
    buffers: Vec<usize>,
    scalars: Vec<(u32, Scalar)>,
}

/// The two runtimes behind one interface: upload, run the jobs in order, download everything.
/// (Two of them live in a test at a time: their sizes do not matter.)
#[allow(clippy::large_enum_variant)]
enum Rt {
    Vulkan(VulkanRuntime),
    Wgpu(WgpuRuntime, Target),
}

impl Rt {
    fn name(&self) -> &'static str {
        match self {
            Rt::Vulkan(_) => "vulkan",
            Rt::Wgpu(..) => "wgpu",
        }
    }

    fn target(&self) -> Target {
        match self {
            Rt::Vulkan(rt) => rt.target(),
            Rt::Wgpu(_, t) => t.clone(),
        }
    }

    fn needs_fold(&self, grid: [u32; 3]) -> bool {
        match self {
            Rt::Vulkan(rt) => rt.needs_fold(grid),
            Rt::Wgpu(rt, _) => rt.needs_fold(grid),
        }
    }

    fn run(&self, jobs: &[Job], host: &[HostBuffer]) -> Vec<HostBuffer> {
        match self {
            Rt::Vulkan(rt) => {
                let dev: Vec<_> = host
                    .iter()
                    .map(|h| {
                        let d = rt.alloc(h.dtype(), h.len()).unwrap();
                        rt.upload(&d, h).unwrap();
                        d
                    })
                    .collect();
                for j in jobs {
                    let p = rt.load(&j.kernel).unwrap_or_else(|e| panic!("load {}: {e}", j.kernel.name));
                    let bufs: Vec<_> = j.buffers.iter().map(|&i| &dev[i]).collect();
                    rt.launch(&p, j.grid, &bufs, &j.scalars).unwrap_or_else(|e| panic!("launch {} over {:?}: {e}", j.kernel.name, j.grid));
                }
                let out = dev.iter().map(|d| rt.download(d).unwrap()).collect();
                assert_clean(rt);
                out
            }
            Rt::Wgpu(rt, _) => {
                let dev: Vec<_> = host.iter().map(|h| rt.alloc_from(h).unwrap()).collect();
                for j in jobs {
                    let k = rt.load(&j.kernel).unwrap_or_else(|e| panic!("load {}: {e}", j.kernel.name));
                    let bufs: Vec<&dyn KernelBuffer> = j.buffers.iter().map(|&i| &dev[i] as &dyn KernelBuffer).collect();
                    rt.launch(&k, j.grid, &bufs, &j.scalars).unwrap_or_else(|e| panic!("launch {} over {:?}: {e}", j.kernel.name, j.grid));
                }
                host.iter().zip(&dev).map(|(h, d)| rt.download(d, h.dtype(), h.len()).unwrap()).collect()
            }
        }
    }
}

/// Says on stderr that the running test (or the part of it named in `reason`) did not run and
/// why, as `SKIPPED: <test> (<reason>)`. Written to the stream itself, past the harness's
/// capture, so the line shows although the test passes; scripts/test.sh lists them at the end.
fn skipped(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // One write: piecewise, lines of tests running beside it could land inside it.
    let _ = std::io::stderr().lock().write_all(format!("SKIPPED: {test} ({reason})\n").as_bytes());
}

fn assert_clean(rt: &VulkanRuntime) {
    let msgs = rt.take_validation_messages();
    assert!(msgs.is_empty(), "validation messages:\n{}", msgs.join("\n"));
}

/// The Vulkan runtime and the wgpu runtime on the same device (TILEKIT_VULKAN_DEVICE, else
/// lavapipe, else the first), dispatching at most `limit` workgroups per axis; `None` without a
/// Vulkan device when TILEKIT_SKIP_GPU_TESTS=1.
fn runtimes(limit: Option<u32>) -> Option<[Rt; 2]> {
    let devices = VulkanRuntime::devices().unwrap_or_default();
    if devices.is_empty() {
        if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
            skipped("no Vulkan device, and TILEKIT_SKIP_GPU_TESTS=1");
            return None;
        }
        panic!("no Vulkan device found: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1");
    }
    let info = match std::env::var("TILEKIT_VULKAN_DEVICE") {
        Ok(v) => devices.iter().find(|d| d.index.to_string() == v).expect("TILEKIT_VULKAN_DEVICE names a device index"),
        Err(_) => devices.iter().find(|d| d.name.contains("llvmpipe")).unwrap_or(&devices[0]),
    };
    let options = VulkanOptions {
        validation: !std::env::var("TILEKIT_VULKAN_VALIDATION").is_ok_and(|v| v == "0"),
        max_workgroups_per_dim: limit,
        ..VulkanOptions::default()
    };
    let vk = VulkanRuntime::with_options(info.index, options).unwrap_or_else(|e| panic!("opening {}: {e}", info.name));
    let mut wg = WgpuRuntime::with_adapter(Some(&info.name)).unwrap_or_else(|e| panic!("wgpu on {}: {e}", info.name));
    if let Some(n) = limit {
        wg = wg.limit_workgroups_per_dimension(n);
    }
    Some([Rt::Vulkan(vk), Rt::Wgpu(wg, info.target())])
}

/// Host buffers for `plan`: inputs from `kernel.inputs`, outputs poisoned (or zeroed where
/// the plan accumulates into them).
fn plan_buffers(kernel: &dyn kernels::Kernel, problem: &Problem, plan: &Plan, seed: u64) -> Vec<HostBuffer> {
    let mut inputs = kernel.inputs(problem, &mut StdRng::seed_from_u64(seed)).into_iter();
    plan.buffers
        .iter()
        .map(|spec| match spec.role {
            Role::Input => inputs.next().expect("an input per input buffer"),
            Role::Output { zeroed: false } => {
                let b = HostBuffer::zeros(spec.dtype, spec.len);
                b.fill_bits(0x7FC0_0001_7FC0_0001);
                b
            }
            Role::Output { zeroed: true } | Role::Scratch => HostBuffer::zeros(spec.dtype, spec.len),
        })
        .collect()
}

/// Runs `plan` on the interpreter over copies of `host`.
fn interpret(plan: &Plan, host: &[HostBuffer]) -> Vec<HostBuffer> {
    let bufs: Vec<HostBuffer> = host.to_vec();
    for l in &plan.launches {
        let args: Vec<Arg<'_>> = l
            .args
            .iter()
            .map(|a| match a {
                LaunchArg::Buffer(i) => Arg::Buffer(&bufs[*i]),
                LaunchArg::Scalar(s) => Arg::Scalar(*s),
            })
            .collect();
        interp::run(&l.program, l.grid, &args).unwrap_or_else(|e| panic!("interpreter: {e}"));
    }
    bufs
}

/// `plan`'s launches compiled for `rt` with `num_warps`, folded or not.
fn jobs(rt: &Rt, plan: &Plan, num_warps: u32, fold: bool) -> Vec<Job> {
    plan.launches
        .iter()
        .map(|l| {
            let options = launch_options(&LowerOptions::new(num_warps), l).with_fold_grid(fold);
            let kernel = compile(&l.program, &rt.target(), &options).unwrap_or_else(|e| panic!("{e}")).kernel;
            assert_eq!(kernel.grid_fold.is_some(), fold);
            let mut buffers = Vec::new();
            let mut scalars = Vec::new();
            for (p, a) in l.args.iter().enumerate() {
                match a {
                    LaunchArg::Buffer(i) => buffers.push(*i),
                    LaunchArg::Scalar(s) => scalars.push((p as u32, *s)),
                }
            }
            Job { kernel, grid: l.grid, buffers, scalars }
        })
        .collect()
}

fn assert_same_bits(what: &str, got: &HostBuffer, want: &HostBuffer) {
    assert_eq!((got.dtype(), got.len()), (want.dtype(), want.len()), "{what}");
    if let Some(i) = (0..want.len()).find(|&i| got.load_bits(i) != want.load_bits(i)) {
        panic!("{what}: element {i} is {:#x}, expected {:#x}", got.load_bits(i), want.load_bits(i));
    }
}

#[test]
fn vector_add_past_65535_programs_matches_the_interpreter() {
    let Some(rts) = runtimes(None) else { return };
    let kernel = kernels::find("vector_add").unwrap();
    let n = 65536 * 16 + 7;
    let problem = Problem::new(&[n], DType::F32);
    let config: Config = "BLOCK=16,num_warps=1".parse().unwrap();
    let plan = kernel.plan(&problem, &config).unwrap();
    let grid = plan.launches[0].grid;
    assert_eq!(grid, [65537, 1, 1]);
    let host = plan_buffers(kernel.as_ref(), &problem, &plan, 11);
    let want = interpret(&plan, &host);
    let mut folded = 0;
    for rt in &rts {
        let fold = rt.needs_fold(grid);
        let jobs = jobs(rt, &plan, 1, fold);
        let got = rt.run(&jobs, &host);
        assert_same_bits(&format!("{}: out", rt.name()), &got[2], &want[2]);
        if !fold {
            eprintln!("{}: the device dispatches {grid:?} unfolded", rt.name());
            continue;
        }
        folded += 1;
        // The kernel compiled without folding is refused, with the way out named.
        let plain = &self::jobs(rt, &plan, 1, false)[0];
        let folded_job = &jobs[0];
        let m = match rt {
            Rt::Vulkan(v) => {
                let bufs: Vec<_> = (0..3).map(|_| v.alloc(DType::F32, n).unwrap()).collect();
                let refs: Vec<_> = bufs.iter().collect();
                let e = v.launch(&v.load(&plain.kernel).unwrap(), grid, &refs, &plain.scalars).unwrap_err().to_string();
                // Timing dispatches the folded shape too: the validation layer would report a
                // dispatch past maxComputeWorkGroupCount.
                let p = v.load(&folded_job.kernel).unwrap();
                let t = v.time(&p, grid, &refs, &folded_job.scalars, 1, 2).unwrap();
                assert!(t.len() == 2 && t.iter().all(|s| *s > 0.0), "{t:?}");
                assert_clean(v);
                e
            }
            Rt::Wgpu(w, _) => {
                let x = w.alloc_from(&host[0]).unwrap();
                let y = w.alloc_from(&host[1]).unwrap();
                let out = w.alloc(DType::F32, n).unwrap();
                let bufs: [&dyn KernelBuffer; 3] = [&x, &y, &out];
                let e = w.launch(&w.load(&plain.kernel).unwrap(), grid, &bufs, &plain.scalars).unwrap_err().to_string();
                let p = w.load(&folded_job.kernel).unwrap();
                // Recorded into the caller's encoder: wgpu would refuse an unfolded dispatch.
                let mut enc = w.device().create_command_encoder(&Default::default());
                w.record(&mut enc, &p, grid, &bufs, &folded_job.scalars).unwrap();
                let index = w.queue().submit([enc.finish()]);
                w.device().poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None }).unwrap();
                let got = w.download(&out, DType::F32, n).unwrap();
                assert_same_bits("wgpu record: out", &got, &want[2]);
                let t = w.time(&p, grid, &bufs, &folded_job.scalars, 1, 2).unwrap();
                assert!(t.len() == 2 && t.iter().all(|s| *s > 0.0), "{t:?}");
                e
            }
        };
        assert!(m.contains("65537") && m.contains("fold_grid"), "{}: {m}", rt.name());
    }
    // lavapipe caps every axis at 65535, and wgpu does on every Vulkan device.
    assert!(folded >= 1, "no runtime needed to fold {grid:?}");
}

/// A program that writes, per program, its ids, the grid's extents, its linear index and a
/// reduction across its threads (so barriers follow the early return), at that linear index.
fn ids_program() -> Program {
    let k = Builder::new("grid_ids");
    let out = k.output("out", DType::I32);
    let (p0, p1, p2) = (k.program_id(0), k.program_id(1), k.program_id(2));
    let (n0, n1, n2) = (k.num_programs(0), k.num_programs(1), k.num_programs(2));
    let lin = p0 + p1 * n0 + p2 * n0 * n1;
    let lane = k.arange(0, 8);
    let sum = (k.arange(0, 64) + p0).sum(0);
    let mut v = sum;
    for (i, x) in [p0, p1, p2, n0, n1, n2, lin].into_iter().enumerate() {
        v = k.select(lane.eq(i as i32), x, v);
    }
    k.store(out, lin * 8 + lane, v);
    k.finish().unwrap()
}

#[test]
fn folded_program_ids_match_the_interpreter_exactly() {
    let Some(rts) = runtimes(Some(LIMIT)) else { return };
    let program = ids_program();
    for rt in &rts {
        let kernel = compile(&program, &rt.target(), &LowerOptions::new(2).with_fold_grid(true)).unwrap().kernel;
        // Uneven folds: 299 programs in 7 x 7 x 7 workgroups, a 3-D grid, and grids along one
        // axis past the limit.
        for grid in [[23, 13, 1], [5, 7, 9], [1, 1, 300], [300, 1, 1], [17, 1, 19], [2, 3, 1]] {
            let total = grid::total(grid) as usize;
            let dispatch = grid::fold_dispatch(grid, [LIMIT; 3]).unwrap();
            let idle = grid::total(dispatch) as usize - total;
            // Room past the end for every idle workgroup, which must write nothing.
            let host = HostBuffer::zeros(DType::I32, 8 * (total + idle));
            host.fill_bits(0xA5A5_A5A5);
            let program_plan =
                Plan { buffers: Vec::new(), launches: vec![kernels::Launch { program: program.clone(), grid, args: vec![LaunchArg::Buffer(0)] }] };
            let want = interpret(&program_plan, std::slice::from_ref(&host));
            let job = Job { kernel: kernel.clone(), grid, buffers: vec![0], scalars: Vec::new() };
            let got = rt.run(&[job], std::slice::from_ref(&host));
            assert_same_bits(&format!("{} over {grid:?}", rt.name()), &got[0], &want[0]);
            // The interpreter is the reference; the mapping is also checked on its own.
            let out = got[0].to_vec::<i32>().unwrap();
            for l in 0..total {
                let p = [l % grid[0] as usize, l / grid[0] as usize % grid[1] as usize, l / (grid[0] * grid[1]) as usize];
                let g = grid.map(|g| g as usize);
                let expect = [p[0], p[1], p[2], g[0], g[1], g[2], l, 2016 + 64 * p[0]];
                let row: Vec<usize> = out[8 * l..8 * l + 8].iter().map(|&v| v as usize).collect();
                assert_eq!(row, expect, "{} over {grid:?}, program {l}", rt.name());
            }
            assert!(out[8 * total..].iter().all(|&v| v as u32 == 0xA5A5_A5A5), "{}: an idle workgroup wrote", rt.name());
            // And the reference mapping agrees with the workgroups' view.
            let mut seen = vec![false; total];
            for z in 0..dispatch[2] {
                for y in 0..dispatch[1] {
                    for x in 0..dispatch[0] {
                        if let Some(p) = folded_program([x, y, z], dispatch, grid) {
                            seen[(p[0] + p[1] * grid[0] + p[2] * grid[0] * grid[1]) as usize] = true;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&s| s));
        }
    }
}

#[test]
fn library_kernels_fold_bit_for_bit() {
    let Some(rts) = runtimes(Some(LIMIT)) else { return };
    let Some([plain_vk, _]) = runtimes(None) else { return };
    let mut cases = 0;
    // Reductions across warps (barriers after the early return), scans, dot products, several
    // launches per plan and 2-D grids.
    for name in ["softmax", "layernorm", "cumsum", "sum", "matmul", "histogram", "rotary", "spmv"] {
        let kernel = kernels::find(name).unwrap();
        let dtype = kernel.dtypes()[0];
        let config = &kernel.configs()[0];
        for (pi, problem) in kernel.test_problems(dtype).iter().enumerate() {
            let Ok(plan) = kernel.plan(problem, config) else { continue };
            let grids: Vec<[u32; 3]> = plan.launches.iter().map(|l| l.grid).collect();
            if grids.iter().any(|&g| grid::fold_dispatch(g, [LIMIT; 3]).is_err()) || grids.iter().all(|&g| grid::fits(g, [LIMIT; 3])) {
                continue;
            }
            let host = plan_buffers(kernel.as_ref(), problem, &plan, pi as u64);
            let num_warps = config.num_warps() as u32;
            let want = plain_vk.run(&jobs(&plain_vk, &plan, num_warps, false), &host);
            for rt in &rts {
                let got = rt.run(&jobs(rt, &plan, num_warps, true), &host);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_same_bits(&format!("{name} {problem} [{config}] on {} folded, buffer {i}", rt.name()), g, w);
                }
            }
            cases += 1;
        }
    }
    assert!(cases >= 12, "only {cases} folded cases ran");
}

#[test]
fn backends_that_cannot_fold_refuse_it() {
    // The emulator's emitter does not fold: the lowering refuses the option rather than run
    // every program as program 0.
    let program = ids_program();
    let options = LowerOptions::new(2).with_fold_grid(true);
    let Err(err) = tilekit::gpu::simt::compile(&program, &Target::lavapipe(), &options) else { panic!("the emulator accepted a folded grid") };
    assert!(matches!(err, LowerError::GridFold { asked: true, .. }), "{err}");
    assert!(err.to_string().contains("grid_ids") && err.to_string().contains("does not fold"), "{err}");
    // The folded grid needs 12 bytes of push constants past the scalars: 29 i32 scalars leave
    // exactly room for it in lavapipe's 128 bytes, 30 do not.
    let target = Target::lavapipe();
    assert_eq!(target.max_push_constant_bytes, 128);
    let many = |n: usize| {
        let k = Builder::new("many_scalars");
        let out = k.output("out", DType::I32);
        let mut acc = k.program_id(0);
        for i in 0..n {
            acc = acc + k.scalar(format!("s{i}"), DType::I32);
        }
        k.store(out, k.arange(0, 8), k.splat(acc, &[8]));
        k.finish().unwrap()
    };
    let folded = compile(&many(29), &target, &LowerOptions::new(1).with_fold_grid(true)).unwrap().kernel;
    assert_eq!((folded.push_constant_size, folded.grid_fold), (128, Some(116)));
    let plain = compile(&many(30), &target, &LowerOptions::new(1)).unwrap().kernel;
    assert_eq!((plain.push_constant_size, plain.grid_fold), (120, None));
    let Err(err) = compile(&many(30), &target, &LowerOptions::new(1).with_fold_grid(true)) else {
        panic!("a folded grid past the push-constant limit compiled")
    };
    let err = err.to_string();
    assert!(err.contains("many_scalars") && err.contains("12 bytes") && err.contains("120") && err.contains("128"), "{err}");
}
