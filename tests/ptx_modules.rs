//! The PTX of every library kernel, for every dtype, test problem and configuration, assembles
//! with ptxas for sm_80 and sm_90 without spilling registers; the PTX of vector add and softmax
//! matches its golden file (`tests/golden/*.ptx`; `TILEKIT_BLESS=1` rewrites them).
//! Any spill fails: the library's configurations are sized so that none spills (see matmul's and
//! attention's `configs`), and shared-memory addresses are 32-bit (`-nvptx-short-ptr`).
//!
//! Needs the `ptx` feature, and ptxas (the PyPI wheel nvidia-cuda-nvcc-cu12, `TILEKIT_PTXAS`, or
//! a CUDA toolkit) plus libdevice from the same place.
#![cfg(any(feature = "ptx", feature = "ptx-static"))]

use std::collections::HashSet;
#[path = "common/golden.rs"]
mod golden;
use golden::check_golden;
use std::sync::Mutex;

use rayon::prelude::*;
use tilekit::device::launch_options;
use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::Target;
use tilekit::kernels::{self, Problem};
use tilekit::{Config, DType};
use tilekit_ptx::{compile, Arch};

#[test]
fn every_library_kernel_assembles_for_sm80_sm90_and_sm90a_without_spills() {
    // Distinct programs only: many test problems of a kernel share one program.
    // TILEKIT_PTX_FILTER=text keeps the jobs whose description contains it.
    let filter = std::env::var("TILEKIT_PTX_FILTER").ok();
    let mut jobs = Vec::new();
    let mut seen = HashSet::new();
    for k in kernels::all() {
        for &dtype in k.dtypes() {
            for problem in k.test_problems(dtype) {
                for config in k.configs() {
                    // Planned for sm_80; sm_90 and sm_90a have the same warps and registers.
                    let Ok(plan) = k.plan_on(&problem, &config, &Target::cuda_sm80()) else { continue };
                    for launch in plan.launches {
                        // Specialised on the launch's scalars as the CUDA runtime compiles it
                        // (multiples of 16 make vector accesses): the module that runs.
                        let options = launch_options(&LowerOptions::for_config(&config), &launch);
                        let key = (tilekit::text::print(&launch.program), options);
                        let what = format!("{} {problem} [{config}]", k.name());
                        if filter.as_deref().is_some_and(|f| !what.contains(f)) {
                            continue;
                        }
                        if seen.insert(key) {
                            jobs.push((what, launch.program, options));
                        }
                    }
                }
            }
        }
    }
    let failures = Mutex::new(Vec::new());
    let assembled = Mutex::new(0usize);
    let targets = [(Target::cuda_sm80(), Arch::Sm80), (Target::cuda_sm90(), Arch::Sm90), (Target::cuda_sm90a(), Arch::Sm90a)];
    jobs.par_iter().for_each(|(what, program, options)| {
        for (target, arch) in &targets {
            let options = *options;
            let mut c = match compile(program, target, &options, *arch) {
                Ok(c) => c,
                // A configuration too large for the target is an error, not a module.
                Err(e) if e.to_string().contains("shared memory") => continue,
                Err(e) => {
                    failures.lock().unwrap().push(format!("{what} on {arch}: {e}"));
                    continue;
                }
            };
            match c.kernel.assemble() {
                Ok(r) if r.spills() => failures.lock().unwrap().push(format!("{what} on {arch}: spills ({r})")),
                Ok(_) => *assembled.lock().unwrap() += 1,
                Err(e) => failures.lock().unwrap().push(format!("{what} on {arch}: {e}")),
            }
        }
    });
    let failures = failures.into_inner().unwrap();
    let assembled = assembled.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} failed:\n{}", failures.len(), failures.len() + assembled, failures.join("\n"));
    assert!(assembled > 200 || filter.is_some(), "only {assembled} kernels were assembled");
}

/// The sm_90 PTX of `kernel`'s first launch for one problem, specialised on the launch's
/// scalars as the CUDA runtime compiles it.
fn compiled(kernel: &str, shape: &[usize], dtype: DType, config: &str) -> tilekit_ptx::Compiled {
    compiled_for(kernel, &Problem::new(shape, dtype), config, &Target::cuda_sm90(), Arch::Sm90)
}

fn compiled_for(kernel: &str, problem: &Problem, config: &str, target: &Target, arch: Arch) -> tilekit_ptx::Compiled {
    let k = kernels::find(kernel).unwrap();
    let config: Config = config.parse().unwrap();
    let plan = k.plan_on(problem, &config, target).unwrap();
    let options = launch_options(&LowerOptions::for_config(&config), &plan.launches[0]);
    compile(&plan.launches[0].program, target, &options, arch).unwrap()
}

fn golden(name: &str, kernel: &str, shape: &[usize], dtype: DType, config: &str) {
    let mut c = compiled(kernel, shape, dtype, config);
    c.kernel.assemble().unwrap();
    let text = c.kernel.ptx;
    check_golden(&format!("{name}.ptx"), &text, &format!("{name}: the PTX"));
}

#[test]
fn golden_vector_add() {
    golden("vector_add", "vector_add", &[1000], DType::F32, "BLOCK=1024,num_warps=4");
}

#[test]
fn golden_softmax() {
    golden("softmax", "softmax", &[7, 100], DType::F32, "num_warps=4");
}

/// A matmul whose `dot` lowers to `mma.sync.aligned.m16n8k16` (f16 operands, f32 accumulation).
#[test]
fn golden_matmul_mma() {
    golden("matmul_mma", "matmul", &[64, 64, 64], DType::F16, "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4");
}

/// Every `dot` on f16 and bf16 reaches the tensor cores on sm_80 and sm_90: matmul and both of
/// attention's.
#[test]
fn dots_use_mma_sync() {
    for dtype in [DType::F16, DType::BF16] {
        let ty = if dtype == DType::F16 { "f16" } else { "bf16" };
        let want = format!("mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32");
        let ptx = ptx_of("matmul", &[256, 256, 256], dtype, "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4");
        assert!(ptx.contains(&want), "matmul {dtype}: no {want}");
        let ptx = ptx_of("attention", &[1, 2, 128, 64], dtype, "BLOCK_M=64,BLOCK_N=32,num_warps=4");
        assert!(ptx.matches(&want).count() >= 2, "attention {dtype}: fewer than two {want}");
    }
    // With num_stages, the K loop's tiles arrive by asynchronous copies `num_stages - 1`
    // iterations ahead and the dots read them with matrix loads; without, neither.
    for (stages, pending) in [(2, 0), (3, 1), (4, 2)] {
        let ptx =
            ptx_of("matmul", &[256, 256, 256], DType::F16, &format!("BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages={stages}"));
        assert!(ptx.contains("cp.async.cg.shared.global"), "num_stages={stages}: no cp.async\n{ptx}");
        assert!(ptx.contains(&format!("cp.async.wait_group {pending};")), "num_stages={stages}: no wait_group {pending}\n{ptx}");
        assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), "num_stages={stages}: no ldmatrix\n{ptx}");
        assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), "num_stages={stages}: no transposed ldmatrix\n{ptx}");
    }
    // Attention's K^T tile is contiguous along D (the first dot's K): its ring holds it as
    // stored and the dot reads it with untransposed matrix loads; V's with transposed ones. The
    // probabilities reach the second dot in registers and the row statistics stay in the
    // accumulator's rows, so the key loop's only barrier is the pipeline's.
    let ptx = ptx_of("attention", &[1, 2, 256, 64], DType::F16, "BLOCK_M=128,BLOCK_N=64,num_warps=8,num_stages=3");
    assert!(ptx.contains("cp.async.cg.shared.global"), "attention: no cp.async\n{ptx}");
    assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), "attention: K is not read by ldmatrix\n{ptx}");
    assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), "attention: V is not read by ldmatrix.trans\n{ptx}");
    let barriers = ptx.matches("bar.sync").count();
    assert!(barriers <= 5, "attention: {barriers} barriers (Q's conversion takes two, the rings' start and end two, each iteration one)\n{ptx}");
    let ptx = ptx_of("matmul", &[256, 256, 256], DType::F16, "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=1");
    assert!(!ptx.contains("cp.async") && !ptx.contains("ldmatrix"), "num_stages=1 pipelines");
    // Past 48 KiB the shared memory is one dynamic array the launch sizes; below, static arrays.
    let big = compiled("matmul", &[256, 256, 256], DType::F16, "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3").kernel;
    assert_eq!((big.shared_bytes, big.dynamic_shared_bytes), (3 * (128 * 64 + 64 * 256) * 2, 3 * (128 * 64 + 64 * 256) * 2));
    assert!(big.ptx.contains(".extern .shared .align 16 .b8 shared_dyn[];"), "{}", big.ptx);
    let small = compiled("matmul", &[256, 256, 256], DType::F16, "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=3").kernel;
    assert_eq!(small.dynamic_shared_bytes, 0);
    assert!(!small.ptx.contains(".extern .shared"));
    // f32 operands keep the FMA dot unless the dot's input precision is tf32.
    let ptx = ptx_of("matmul", &[64, 64, 64], DType::F32, "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4");
    assert!(!ptx.contains("mma.sync"));
}

/// A tf32 `dot` (f32 operands, `precision=tf32`) runs on `mma.sync.aligned.m16n8k8` on every
/// NVIDIA target, sm_90a included (wgmma's tf32 reads only K-major operands); with
/// `num_stages` its f32 tiles arrive by asynchronous copies `num_stages - 1` iterations ahead
/// and `a` is read from its ring with matrix loads of 32-bit words (never transposed); every
/// operand is rounded with `cvt.rna.tf32.f32` before the instruction, and ptxas takes the
/// modules without spills.
#[test]
fn tf32_dots_use_mma_m16n8k8() {
    let want = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
    let tf32 = |shape: &[usize]| Problem::new(shape, DType::F32).with("precision", "tf32");
    for (target, arch) in [(Target::cuda_sm80(), Arch::Sm80), (Target::cuda_sm90(), Arch::Sm90), (Target::cuda_sm90a(), Arch::Sm90a)] {
        for (stages, pending) in [(1, None), (2, Some(0)), (3, Some(1))] {
            let config = format!("BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages={stages}");
            let mut c = compiled_for("matmul", &tf32(&[256, 256, 256]), &config, &target, arch);
            let ptx = &c.kernel.ptx;
            assert!(ptx.contains(want), "{arch} num_stages={stages}: no {want}");
            assert!(ptx.contains("cvt.rna.tf32.f32"), "{arch} num_stages={stages}: operands not rounded");
            assert!(!ptx.contains("wgmma") && !ptx.contains("ldmatrix.sync.aligned.m8n8.x4.trans"), "{arch} num_stages={stages}: a 16-bit path");
            match pending {
                Some(p) => {
                    assert!(ptx.contains("cp.async.cg.shared.global") && ptx.contains(&format!("cp.async.wait_group {p};")), "{arch} {stages}");
                    assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), "{arch} {stages}: `a` not read by matrix loads");
                }
                None => assert!(!ptx.contains("cp.async") && !ptx.contains("ldmatrix"), "{arch}: num_stages=1 pipelines"),
            }
            let r = c.kernel.assemble().unwrap_or_else(|e| panic!("{arch} num_stages={stages}: {e}"));
            assert!(!r.spills(), "{arch} num_stages={stages}: spills ({r})");
        }
    }
}

/// On sm_90a the pipelined dots are warpgroup matrix instructions: matmul's reads both
/// operands through descriptors (B N-contiguous, so transposed; as a linear layer's N x K
/// weight, not), attention's reads Q and the probabilities from registers; the copies are
/// fenced for the async proxy, each dot waits for its instructions once, and ptxas takes the
/// modules without spills.
#[test]
fn dots_use_wgmma_on_sm90a() {
    let target = Target::cuda_sm90a();
    let config = "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3";
    for (dtype, trans_b) in [(DType::F16, "0"), (DType::BF16, "0"), (DType::F16, "1")] {
        let ty = if dtype == DType::F16 { "f16" } else { "bf16" };
        let problem = Problem::new(&[4096, 4096, 4096], dtype).with("trans_b", trans_b);
        let mut c = compiled_for("matmul", &problem, config, &target, Arch::Sm90a);
        let ptx = c.kernel.ptx.clone();
        let want = format!("wgmma.mma_async.sync.aligned.m64n256k16.f32.{ty}.{ty}");
        // Four K steps per iteration, one instruction each (a warpgroup, 64 x 256).
        assert_eq!(ptx.matches(&want).count(), 4, "matmul {dtype} trans_b={trans_b}: {want}\n{ptx}");
        let imm = if trans_b == "1" { "p, 1, 1, 0, 0;" } else { "p, 1, 1, 0, 1;" };
        assert!(ptx.contains(imm), "matmul {dtype} trans_b={trans_b}: {imm}\n{ptx}");
        assert!(ptx.contains("wgmma.fence.sync.aligned") && ptx.contains("wgmma.wait_group.sync.aligned 0"), "{ptx}");
        assert!(ptx.contains("fence.proxy.async.shared::cta"), "{ptx}");
        // The tiles are boxes of tensor maps: one thread's tensor copies per panel, completing on
        // a barrier the others wait on; no per-thread copies.
        assert!(ptx.contains("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"), "{ptx}");
        assert!(ptx.contains("mbarrier.try_wait.parity.shared::cta.b64") && ptx.contains("mbarrier.arrive.expect_tx"), "{ptx}");
        assert!(ptx.contains(".param .align 64 .b8 matmul_param_6[128]") && !ptx.contains("cp.async.cg"), "{ptx}");
        assert_eq!(c.kernel.tensor_maps.len(), 2, "matmul {dtype} trans_b={trans_b}");
        assert!(!ptx.contains("mma.sync") && !ptx.contains("ldmatrix"), "{ptx}");
        assert!(ptx.contains(".extern .shared .align 1024 .b8 shared_dyn[];"), "{ptx}");
        let r = c.kernel.assemble().unwrap_or_else(|e| panic!("matmul {dtype} trans_b={trans_b}: {e}"));
        assert!(!r.spills(), "matmul {dtype}: {r}");
    }
    for d in [64, 128] {
        let problem = Problem::new(&[4, 32, 4096, d], DType::F16);
        let mut c = compiled_for("attention", &problem, "BLOCK_M=128,BLOCK_N=64,num_warps=8,num_stages=3", &target, Arch::Sm90a);
        let ptx = c.kernel.ptx.clone();
        // QK^T: n = BLOCK_N, A (Q) in registers, K-major K; PV: n = D, P in registers, V N-major.
        let qk = "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16";
        let pv = format!("wgmma.mma_async.sync.aligned.m64n{d}k16.f32.f16.f16");
        assert!(ptx.contains(qk) && ptx.contains(&pv), "attention D={d}\n{ptx}");
        assert!(ptx.contains("p, 1, 1, 0;") && ptx.contains("p, 1, 1, 1;"), "attention D={d}: K K-major, V N-major\n{ptx}");
        let r = c.kernel.assemble().unwrap_or_else(|e| panic!("attention D={d}: {e}"));
        assert!(!r.spills(), "attention D={d}: {r}");
    }
}

/// A matmul on sm_90a whose `dot` lowers to `wgmma.mma_async` with both operands read through
/// shared-memory descriptors.
#[test]
fn golden_matmul_wgmma() {
    let mut c = compiled_for(
        "matmul",
        &Problem::new(&[256, 256, 256], DType::F16),
        "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=3",
        &Target::cuda_sm90a(),
        Arch::Sm90a,
    );
    c.kernel.assemble().unwrap();
    check_golden("matmul_wgmma.ptx", &c.kernel.ptx, "matmul_wgmma: the PTX");
}

fn ptx_of(kernel: &str, shape: &[usize], dtype: DType, config: &str) -> String {
    compiled(kernel, shape, dtype, config).kernel.ptx
}

/// Contiguous global accesses are 16-byte vectors (read-only buffers through the non-coherent
/// cache), reductions use warp shuffles, and the block size reaches ptxas.
#[test]
fn vector_accesses_and_shuffles() {
    let ptx = ptx_of("vector_add", &[1 << 20], DType::F32, "BLOCK=1024,num_warps=4");
    assert!(ptx.contains("ld.global.nc.v4.f32"), "{ptx}");
    assert!(ptx.contains("st.global.v4.f32"), "{ptx}");
    assert!(ptx.contains(".reqntid 128, 1, 1"), "{ptx}");
    let ptx = ptx_of("softmax", &[64, 1024], DType::F32, "num_warps=4");
    assert!(ptx.contains("shfl.sync.bfly.b32"), "{ptx}");
}

/// Kernels as users write them first move 16 bytes per thread per access and convert bf16 in
/// hardware: GELU's 8 bf16 in and out, the transpose with no exchange through shared memory
/// (each thread holds 4 x 4 blocks of the tile and of its transpose), and the quantised i8
/// row stored 16 elements at a time.
#[test]
fn user_kernels_move_16_bytes_per_access() {
    let ptx = ptx_of("gelu", &[1 << 20], DType::BF16, "BLOCK=1024,num_warps=4");
    assert_eq!(ptx.matches("ld.global.nc.v4.u32").count(), 1, "{ptx}");
    assert_eq!(ptx.matches("st.global.v4.b32").count(), 1, "{ptx}");
    assert!(ptx.contains("cvt.rn.bf16x2.f32") || ptx.contains("cvt.rn.bf16.f32"), "{ptx}");
    let ptx = ptx_of("transpose", &[4096, 4096], DType::F32, "BLOCK_R=64,BLOCK_C=64,num_warps=4");
    assert!(!ptx.contains(".shared"), "the transpose needs no shared memory\n{ptx}");
    assert_eq!(ptx.matches("ld.global.nc.v4.f32").count(), 8, "{ptx}");
    assert_eq!(ptx.matches("st.global.v4.f32").count(), 8, "{ptx}");
    let ptx = ptx_of("rmsnorm_quant", &[64, 8192], DType::BF16, "num_warps=8");
    assert_eq!(ptx.matches("st.global.v4.u32").count(), 2, "q: two 16-byte stores\n{ptx}");
    assert!(!ptx.contains("st.global.u32"), "{ptx}");
}

/// A row's elements share one 64-bit address per buffer and reach the loads and stores as
/// immediate offsets: LayerNorm's 8192 f16 columns on 8 warps are four 16-byte vectors a
/// thread, 4096 bytes apart. Each 64-bit register an element kept instead cost the registers
/// that let four programs share a multiprocessor.
#[test]
fn element_offsets_are_immediates() {
    let ptx = ptx_of("layernorm", &[64, 8192], DType::F16, "BLOCK=8192,num_warps=8,PRELOAD=0,occupancy=4");
    assert_eq!(ptx.matches("ld.global.nc.v4.u32").count(), 12, "x, w and b: four vector loads each\n{ptx}");
    assert_eq!(ptx.matches("st.global.v4.b32").count(), 4, "y: four vector stores\n{ptx}");
    for off in [4096, 8192, 12288] {
        assert_eq!(ptx.matches(&format!("+{off}];")).count(), 3, "x, w and b at +{off}\n{ptx}");
        assert_eq!(ptx.matches(&format!("+{off}], {{")).count(), 1, "y at +{off}\n{ptx}");
    }
    assert!(ptx.matches("cvt.s64.s32").count() <= 1, "one sign extension, of the row's base\n{ptx}");
}

/// Softmax's masked stores after its two reductions branch on the predicates the loads used:
/// LLVM's copy of each compare into its store's block had kept a 32-bit offset per vector live
/// across both barriers, and 32 warps at two programs per multiprocessor (32 registers)
/// spilled 20 bytes on 12800 columns.
#[test]
fn masked_stores_after_barriers_keep_their_predicates() {
    let mut c = compiled("softmax", &[64, 12800], DType::F32, "num_warps=32,occupancy=2");
    let (spills, report) = {
        let r = c.kernel.assemble().unwrap();
        (r.spills(), r.to_string())
    };
    assert!(!spills, "{report}\n{}", c.kernel.ptx);
}

/// Where the `occurrence`-th pass named `name` stands in a pipeline text, as the byte range to
/// cut to leave it out (with one comma beside it), or `None` when there is no such pass. A pass
/// is an element of a comma-separated list, perhaps with `<parameters>`: `instcombine` does not
/// match inside `aggressive-instcombine` or `instcombine-foo`.
fn pass_range(text: &str, name: &str, occurrence: usize) -> Option<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let starts = text.match_indices(name).map(|(i, _)| i).filter(|&i| {
        let before = if i == 0 { None } else { Some(bytes[i - 1]) };
        let after = bytes.get(i + name.len()).copied();
        matches!(before, None | Some(b',' | b'(')) && matches!(after, None | Some(b'<' | b',' | b')'))
    });
    let start = starts.into_iter().nth(occurrence)?;
    let mut end = start + name.len();
    if bytes.get(end) == Some(&b'<') {
        let mut depth = 0;
        while end < bytes.len() {
            match bytes[end] {
                b'<' => depth += 1,
                b'>' => depth -= 1,
                _ => {}
            }
            end += 1;
            if depth == 0 {
                break;
            }
        }
    }
    match (bytes.get(end), start.checked_sub(1).map(|i| bytes[i])) {
        (Some(b','), _) => Some(start..end + 1),
        // The last element of its list: the comma before it goes (a list's only element is not
        // a pass this can drop).
        (_, Some(b',')) => Some(start - 1..end),
        _ => None,
    }
}

/// The NVPTX optimisation pipeline is LLVM's own `default<O3>` less exactly the passes
/// `DROPPED_FROM_O3` names: `opt-19 -print-pipeline-passes` (Debian's llvm-19, which the test
/// command installs with llvm-19-dev) writes the pipeline the text must equal once they are cut.
#[test]
fn nvptx_pipeline_is_o3_less_the_dropped_passes() {
    let module = std::env::temp_dir().join(format!("tilekit-pipeline-{}.ll", std::process::id()));
    std::fs::write(&module, "target triple = \"nvptx64-nvidia-cuda\"\n").expect("write a module");
    let opt = std::env::var("TILEKIT_OPT").unwrap_or_else(|_| "opt-19".into());
    let out = std::process::Command::new(&opt)
        .args(["-mtriple=nvptx64-nvidia-cuda", "-mcpu=sm_90", "-passes=default<O3>", "-print-pipeline-passes", "-disable-output"])
        .arg(&module)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {opt} (Debian's llvm-19; TILEKIT_OPT names another): {e}"));
    let _ = std::fs::remove_file(&module);
    assert!(out.status.success(), "{opt} failed: {}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    let o3 = printed.trim();
    let mut cuts: Vec<std::ops::Range<usize>> = tilekit_ptx::nvptx::DROPPED_FROM_O3
        .iter()
        .map(|&(name, k)| pass_range(o3, name, k).unwrap_or_else(|| panic!("LLVM's O3 pipeline has no {name} #{k} that can be dropped: {o3}")))
        .collect();
    cuts.sort_by_key(|r| r.start);
    assert!(cuts.windows(2).all(|w| w[0].end <= w[1].start), "two dropped passes overlap: {cuts:?}");
    let mut expected = o3.to_string();
    for r in cuts.into_iter().rev() {
        expected.replace_range(r, "");
    }
    assert_eq!(tilekit_ptx::nvptx::NVPTX_PIPELINE, expected);
}

#[test]
fn pass_ranges_cut_whole_list_elements() {
    let text = "a,instcombine<x;y>,f(aggressive-instcombine,instcombine),instcombine";
    let cut = |name, k| pass_range(text, name, k).map(|r| format!("{}{}", &text[..r.start], &text[r.end..]));
    assert_eq!(cut("instcombine", 0).as_deref(), Some("a,f(aggressive-instcombine,instcombine),instcombine"));
    assert_eq!(cut("instcombine", 1).as_deref(), Some("a,instcombine<x;y>,f(aggressive-instcombine),instcombine"));
    assert_eq!(cut("instcombine", 2).as_deref(), Some("a,instcombine<x;y>,f(aggressive-instcombine,instcombine)"));
    assert_eq!(cut("aggressive-instcombine", 0).as_deref(), Some("a,instcombine<x;y>,f(instcombine),instcombine"));
    assert_eq!(cut("instcombine", 3), None);
    assert_eq!(cut("combine", 0), None);
}

/// What the optimiser makes of a user's `x < 0 ? 0 - x : x` and `0 - x` reaches ptxas as inline
/// assembly that wraps, never as `abs.sN` or a narrow `neg` (whose most negative value ptxas
/// takes as positive): see `user_written_abs_and_neg_of_the_most_negative_integer_stay_negative`
/// in tests/semantics.rs for the values.
#[test]
fn user_written_abs_and_narrow_neg_become_wrapping_assembly() {
    for dtype in ["i8", "i16", "i32", "i64"] {
        let text = format!(
            "program u(x: buffer<{dtype}, read>, a: buffer<{dtype}, write>, n: buffer<{dtype}, write>) grid 1 {{
  %0 = arange 0, 64 : [64]xi32
  %1 = load x[%0] : [64]x{dtype}
  %2 = const 0 : {dtype}
  %3 = splat %2 : [64]x{dtype}
  %4 = cmp lt %1, %3 : [64]xi1
  %5 = sub %3, %1 : [64]x{dtype}
  %6 = select %4, %5, %1 : [64]x{dtype}
  store a[%0], %6
  store n[%0], %5
}}"
        );
        let program = tilekit::text::parse(&text).unwrap();
        for (target, arch) in [(Target::cuda_sm80(), Arch::Sm80), (Target::cuda_sm90(), Arch::Sm90)] {
            let ptx = compile(&program, &target, &LowerOptions::new(2), arch).unwrap().kernel.ptx;
            assert!(!ptx.contains("abs.s"), "{dtype}: {ptx}");
            assert!(!ptx.contains("neg.s8") && !ptx.contains("neg.s16") && !ptx.contains("neg.s32"), "{dtype}: {ptx}");
            assert!(ptx.contains("xor.b"), "{dtype}: the wrapping abs: {ptx}");
            tilekit_ptx::ptxas::assemble(&ptx, "u", arch).unwrap_or_else(|e| panic!("{dtype}: {e}"));
        }
    }
}

/// The row maximum of -x over 32-bit integers (the shape of the fuzzer's seed 43 program 3082):
/// the H200's driver compiled `max(neg a, neg b, neg c)` to one three-input `VIMNMX3` that took
/// an operand un-negated, so no negation reaches ptxas as `neg.s32`, on every arch.
#[test]
fn negated_maxima_never_meet_neg_s32() {
    let text = "program m(x: buffer<i32, read>, y: buffer<i32, write>) grid 1 {
  %0 = arange 0, 128 : [128]xi32
  %1 = load x[%0] : [128]xi32
  %2 = neg %1 : [128]xi32
  %3 = reduce max %2, axis 0 : i32
  %4 = const 0 : i32
  store y[%4], %3
}";
    let program = tilekit::text::parse(text).unwrap();
    for (target, arch) in [(Target::cuda_sm80(), Arch::Sm80), (Target::cuda_sm90(), Arch::Sm90), (Target::cuda_sm90a(), Arch::Sm90a)] {
        let ptx = compile(&program, &target, &LowerOptions::new(1), arch).unwrap().kernel.ptx;
        assert!(!ptx.contains("neg.s32"), "{arch:?}: {ptx}");
        assert!(ptx.contains("not.b32"), "{arch:?}: the complement-plus-one negation: {ptx}");
        tilekit_ptx::ptxas::assemble(&ptx, "m", arch).unwrap_or_else(|e| panic!("{arch:?}: {e}"));
    }
}

/// An f16 times a bf16, rounded to f16 (seed 43 program 2219): LLVM shrank the f32 product
/// of two widened 16-bit floats to a half multiply, turning a bf16 of 3e38 into inf. The bf16
/// is widened by a shift, which LLVM cannot shrink through, so no f16 arithmetic is left.
#[test]
fn bf16_operands_are_never_narrowed_to_half() {
    let text = "program h(a: buffer<f16, read>, b: buffer<bf16, read>, y: buffer<f16, write>) grid 1 {
  %0 = arange 0, 128 : [128]xi32
  %1 = load a[%0] : [128]xf16
  %2 = load b[%0] : [128]xbf16
  %3 = cast %1 : [128]xf32
  %4 = cast %2 : [128]xf32
  %5 = mul %3, %4 : [128]xf32
  %6 = add %3, %4 : [128]xf32
  %7 = add %5, %6 : [128]xf32
  %8 = cast %5 : [128]xf16
  %9 = cast %6 : [128]xf16
  %10 = add %8, %9 : [128]xf16
  store y[%0], %10
}";
    let program = tilekit::text::parse(text).unwrap();
    for (target, arch) in [(Target::cuda_sm80(), Arch::Sm80), (Target::cuda_sm90a(), Arch::Sm90a)] {
        let ptx = compile(&program, &target, &LowerOptions::new(1), arch).unwrap().kernel.ptx;
        assert!(!ptx.contains("mul.rn.f16") && !ptx.contains("mul.f16"), "{arch:?}: {ptx}");
        assert!(!ptx.contains("cvt.f32.bf16"), "{arch:?}: bf16 is widened by a shift: {ptx}");
        tilekit_ptx::ptxas::assemble(&ptx, "h", arch).unwrap_or_else(|e| panic!("{arch:?}: {e}"));
    }
}
