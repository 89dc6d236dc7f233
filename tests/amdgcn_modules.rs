//! The AMDGCN code objects of every library kernel, for every dtype, test problem and
//! configuration, on gfx90a and gfx942 (wave64) and gfx1100 (wave32): each links into a code
//! object v5, disassembles with `llvm-objdump --mcpu=ARCH`, and its metadata, read back from the
//! note, matches the kernel (argument layout, workgroup size, wave size, LDS within 64 KiB); the
//! library's default configurations use no scratch and do not spill, on any of the three.
//! Golden AMDGCN assembly for vector add and softmax on gfx942 and gfx1100 (`tests/golden/*.s`;
//! `TILEKIT_BLESS=1` rewrites them). Reductions shuffle across the whole wave: 64 lanes on CDNA,
//! 32 on RDNA in wave32. f16 and bf16 dots are MFMA instructions on CDNA, WMMA on RDNA3.
//!
//! Spilling non-default configurations are printed.
//!
//! Compiled, not run: no AMD GPU is reachable. Needs the `amdgcn` feature, ld.lld-19 and
//! llvm-objdump-19 (lld-19, llvm-19).
#![cfg(any(feature = "amdgcn", feature = "amdgcn-static"))]

use std::collections::HashSet;
#[path = "common/golden.rs"]
mod golden;
use golden::check_golden;
use std::sync::Mutex;

use rayon::prelude::*;
use tilekit::gpu::lower::LowerOptions;
use tilekit::gpu::Target;
use tilekit::kernels::{self, Problem};
use tilekit::{Config, DType};
use tilekit_amdgcn::KernelParam;
use tilekit_amdgcn::{compile, AmdgcnKernel, Arch};

/// Checks what the code object says against what the emitter decided for the kernel.
fn check_metadata(k: &AmdgcnKernel) -> Result<(), String> {
    let r = &k.resources;
    let mut problems = Vec::new();
    if r.version != (1, 2) {
        problems.push(format!("code object version {:?}, want [1, 2] (v5)", r.version));
    }
    if !r.target.ends_with(k.arch.name()) {
        problems.push(format!("target `{}`", r.target));
    }
    if r.wavefront_size != k.arch.wave_size() {
        problems.push(format!("wavefront size {}", r.wavefront_size));
    }
    if r.max_flat_workgroup_size != k.threads {
        problems.push(format!("max workgroup size {} for {} threads", r.max_flat_workgroup_size, k.threads));
    }
    if r.symbol != format!("{}.kd", k.entry) {
        problems.push(format!("descriptor symbol `{}`", r.symbol));
    }
    if r.lds_bytes > 64 * 1024 || r.lds_bytes < k.shared_bytes {
        problems.push(format!("{} B of LDS for {} B of shared memory", r.lds_bytes, k.shared_bytes));
    }
    // Explicit arguments: one per parameter, in order, at naturally aligned offsets.
    let explicit: Vec<_> = r.explicit_args().collect();
    if explicit.len() != k.params.len() {
        problems.push(format!("{} explicit arguments for {} parameters", explicit.len(), k.params.len()));
    }
    let mut end = 0u32;
    for (i, (a, p)) in explicit.iter().zip(&k.params).enumerate() {
        let (kind, size) = match p {
            KernelParam::Buffer { .. } => ("global_buffer", 8),
            KernelParam::Scalar { dtype: DType::I64 } => ("by_value", 8),
            KernelParam::Scalar { .. } => ("by_value", 4),
        };
        let offset = end.div_ceil(size) * size;
        if a.value_kind != kind || a.size != size || a.offset != offset {
            problems.push(format!("argument {i}: {} of {} B at {}, want {kind} of {size} B at {offset}", a.value_kind, a.size, a.offset));
        }
        if kind == "global_buffer" && a.address_space.as_deref() != Some("global") {
            problems.push(format!("argument {i}: address space {:?}", a.address_space));
        }
        end = a.offset + a.size;
    }
    if r.kernarg_bytes < end {
        problems.push(format!("kernarg segment of {} B ends before the arguments ({end} B)", r.kernarg_bytes));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[test]
fn every_library_kernel_builds_a_checked_code_object_for_gfx90a_gfx942_gfx1100() {
    // Distinct programs only, per wave size (the lowering depends on it). A job is a default
    // configuration when any problem reaches it through the kernel's first configuration.
    // TILEKIT_AMDGCN_FILTER=text keeps the jobs whose description contains it.
    let filter = std::env::var("TILEKIT_AMDGCN_FILTER").ok();
    let mut jobs: Vec<(String, tilekit::Program, u32, bool)> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for k in kernels::all() {
        let default = k.configs().first().cloned();
        for &dtype in k.dtypes() {
            for problem in k.test_problems(dtype) {
                for config in k.configs() {
                    // Planned for the strictest of the three (gfx1100: wave32, 256 VGPRs).
                    let Ok(plan) = k.plan_on(&problem, &config, &Target::amd_gfx1100()) else { continue };
                    let is_default = Some(&config) == default.as_ref();
                    for launch in plan.launches {
                        let what = format!("{} {problem} [{config}]", k.name());
                        if filter.as_deref().is_some_and(|f| !what.contains(f)) {
                            continue;
                        }
                        let key = (tilekit::text::print(&launch.program), config.num_warps());
                        match seen.get(&key) {
                            Some(&i) => {
                                let job: &mut (String, tilekit::Program, u32, bool) = &mut jobs[i];
                                job.3 |= is_default;
                            }
                            None => {
                                seen.insert(key, jobs.len());
                                jobs.push((what, launch.program, config.num_warps() as u32, is_default));
                            }
                        }
                    }
                }
            }
        }
    }
    let failures = Mutex::new(Vec::new());
    let built = Mutex::new(0usize);
    let others = Mutex::new(Vec::new());
    let skipped: Mutex<HashSet<String>> = Mutex::new(HashSet::new());
    let work: Vec<_> = jobs.iter().flat_map(|j| Arch::ALL.map(|a| (j, a))).collect();
    work.par_iter().for_each(|((what, program, num_warps, is_default), arch)| {
        let options = LowerOptions::new(*num_warps);
        let c = match compile(program, &arch.target(), &options, *arch) {
            Ok(c) => c,
            // A configuration too large for the target (threads, LDS) is an error, not a module.
            Err(e)
                if e.to_string().contains("shared memory")
                    || e.to_string().contains("exceed the target")
                    || e.to_string().contains("does not fit target") =>
            {
                skipped.lock().unwrap().insert(format!("{what} on {arch}"));
                return;
            }
            Err(e) => {
                failures.lock().unwrap().push(format!("{what} on {arch}: {e}"));
                return;
            }
        };
        let k = &c.kernel;
        if let Err(e) = check_metadata(k) {
            failures.lock().unwrap().push(format!("{what} on {arch}: metadata: {e}"));
            return;
        }
        let r = &k.resources;
        let scratch = r.spills() || r.scratch_bytes > 0 || r.dynamic_stack;
        if scratch && !*is_default {
            others.lock().unwrap().push(format!("{what} on {arch}: {r}"));
        } else if scratch {
            failures.lock().unwrap().push(format!("{what} on {arch} (a default configuration) uses scratch: {r}"));
            return;
        }
        match k.disassemble() {
            Ok(d) if d.contains(&format!("<{}>:", k.entry)) && d.contains("s_endpgm") => *built.lock().unwrap() += 1,
            Ok(d) => failures.lock().unwrap().push(format!("{what} on {arch}: the disassembly lacks the entry or s_endpgm:\n{d}")),
            Err(e) => failures.lock().unwrap().push(format!("{what} on {arch}: {e}")),
        }
    });
    let failures = failures.into_inner().unwrap();
    let built = built.into_inner().unwrap();
    let skipped = skipped.into_inner().unwrap();
    let mut others = others.into_inner().unwrap();
    others.sort();
    if !others.is_empty() {
        eprintln!("{} non-default configurations use scratch:\n{}", others.len(), others.join("\n"));
    }
    if !skipped.is_empty() {
        eprintln!("{} configurations exceed a target's limits (threads or LDS) and were rejected by the lowering", skipped.len());
    }
    assert!(failures.is_empty(), "{} of {} failed:\n{}", failures.len(), failures.len() + built, failures.join("\n"));
    assert!(built > 300 || filter.is_some(), "only {built} code objects were built");
}

fn options_for(config: &Config) -> LowerOptions {
    LowerOptions::for_config(config)
}

fn program(kernel: &str, shape: &[usize], dtype: DType, config: &str) -> (tilekit::Program, LowerOptions) {
    let k = kernels::find(kernel).unwrap();
    let config: Config = config.parse().unwrap();
    let plan = k.plan(&Problem::new(shape, dtype), &config).unwrap();
    (plan.launches[0].program.clone(), options_for(&config))
}

fn golden(name: &str, kernel: &str, shape: &[usize], dtype: DType, config: &str) {
    for arch in [Arch::Gfx942, Arch::Gfx1100] {
        let (p, options) = program(kernel, shape, dtype, config);
        let text = tilekit_amdgcn::assembly(&p, &arch.target(), &options, arch).unwrap();
        check_golden(&format!("{name}.{arch}.s"), &text, &format!("{name} on {arch}: the assembly"));
    }
}

#[test]
fn golden_vector_add() {
    golden("vector_add", "vector_add", &[1000], DType::F32, "BLOCK=1024,num_warps=4");
}

#[test]
fn golden_softmax() {
    golden("softmax", "softmax", &[7, 100], DType::F32, "num_warps=4");
}

/// The instructions of the kernel's disassembly (mnemonic and operands), without addresses.
fn instructions(arch: Arch, kernel: &str, shape: &[usize], config: &str) -> (AmdgcnKernel, Vec<String>) {
    let (p, options) = program(kernel, shape, DType::F32, config);
    let k = compile(&p, &arch.target(), &options, arch).unwrap().kernel;
    let d = k.disassemble().unwrap();
    let lines = d.lines().filter(|l| l.starts_with('\t') || l.starts_with("  ")).map(|l| l.split("//").next().unwrap().trim().to_string()).collect();
    (k, lines)
}

/// The butterfly reduction of a softmax row crosses every lane of the wave: on wave64 five
/// `ds_swizzle` steps (xor 1..16 within 32 lanes) and a `ds_bpermute` across the halves (xor
/// 32); on wave32 the five swizzles and no `ds_bpermute`.
#[test]
fn reductions_shuffle_across_the_whole_wave() {
    for arch in Arch::ALL {
        let (k, ins) = instructions(arch, "softmax", &[64, 1024], "num_warps=4");
        assert_eq!(k.resources.wavefront_size, arch.wave_size());
        let mut xor_masks = HashSet::new();
        for i in ins.iter().filter(|i| i.starts_with("ds_swizzle_b32")) {
            // `offset:swizzle(BITMASK_PERM,"...")` or a raw offset: decode the xor mask either way.
            let mask = if let Some(raw) = i.split("offset:").nth(1).and_then(|o| o.trim().parse::<u32>().ok()) {
                (raw >> 10) & 0x1f
            } else if let Some(n) = i.split("swizzle(SWAP,").nth(1).and_then(|n| n.trim_end_matches(')').parse::<u32>().ok()) {
                // SWAP,n exchanges groups of n lanes: xor n.
                n
            } else if let Some(pat) = i.split('"').nth(1) {
                // BITMASK_PERM: 5 characters for lanes bit 4..0; `i` inverts (xor) the bit.
                pat.chars().rev().enumerate().filter(|(_, c)| *c == 'i').map(|(b, _)| 1 << b).sum()
            } else {
                panic!("{arch}: cannot read the swizzle pattern of `{i}`")
            };
            xor_masks.insert(mask);
        }
        for m in [1, 2, 4, 8, 16] {
            assert!(xor_masks.contains(&m), "{arch}: no ds_swizzle with xor mask {m} (found {xor_masks:?})");
        }
        let bpermute = ins.iter().filter(|i| i.starts_with("ds_bpermute_b32")).count();
        if arch.wave_size() == 64 {
            assert!(bpermute > 0, "{arch}: wave64 reduction lacks the xor-32 step (ds_bpermute)");
            assert!(ins.iter().any(|i| i.starts_with("v_mbcnt_hi_u32_b32")), "{arch}: the lane id needs mbcnt.hi on wave64");
        } else {
            assert_eq!(bpermute, 0, "{arch}: wave32 has no lanes above 31 to exchange with");
        }
    }
}

/// The CLI-facing report says what it is: compiled, not run, with the occupancy estimate.
#[test]
fn report_says_compiled_not_run() {
    let (k, _) = instructions(Arch::Gfx942, "vector_add", &[1000], "BLOCK=1024,num_warps=4");
    let text = k.resources.to_string();
    assert!(text.contains("compiled, not run") && text.contains("waves per SIMD"), "{text}");
    assert!(k.resources.occupancy.waves_per_simd >= 1, "{text}");
}

/// A dot's k loop carries `llvm.loop.unroll.disable` on AMDGPU: fully unrolled, each k chunk
/// issued all its LDS loads before the FMAs and attention at D = 128 spilled past 512 VGPRs on
/// wave64. With the hint (and one LDS base address per dot operand) it fits in half the file.
/// f32 dots keep those loops on CDNA; f16 and bf16 ones are MFMA instructions there, one per
/// 16 x 16 x 16 step, with no k loop to hint, and fit the register file without spilling.
#[test]
fn dot_k_loops_are_not_unrolled_and_attention_fits_wave64() {
    let k = kernels::find("attention").unwrap();
    let config: Config = "BLOCK_M=64,BLOCK_N=32,num_warps=4,num_stages=3".parse().unwrap();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let problem = Problem::new(&[1, 1, 45, 128], dtype).with("causal", "1");
        let plan = k.plan(&problem, &config).unwrap();
        for arch in [Arch::Gfx90a, Arch::Gfx942] {
            let c = compile(&plan.launches[0].program, &arch.target(), &options_for(&config), arch).unwrap();
            let hinted = c.llvm_ir.lines().filter(|l| l.contains("br label") && l.contains("!llvm.loop")).count();
            let mfma = c.kernel.disassemble().unwrap().lines().filter(|l| l.trim_start().starts_with("v_mfma_f32_16x16x16")).count();
            if dtype == DType::F32 {
                // Two causal stages, each with a QK dot in 4 k chunks and a PV dot in 2.
                assert_eq!(hinted, 12, "{dtype} on {arch}: {hinted} hinted k loops");
                assert!(c.llvm_ir.contains("!{!\"llvm.loop.unroll.disable\"}"), "{dtype} on {arch}: no unroll.disable node");
                assert_eq!(mfma, 0, "{dtype} on {arch}: f32 has no MFMA here");
            } else {
                assert_eq!(hinted, 0, "{dtype} on {arch}: {hinted} hinted k loops beside MFMA");
                assert!(mfma > 0, "{dtype} on {arch}: no MFMA instruction");
            }
            // MFMA's bf16 operands are held widened to f32 between loads and instructions:
            // bf16 on gfx90a takes a few more than half the file (VGPRs, AGPRs included on
            // CDNA), within the whole of it.
            let r = &c.kernel.resources;
            let bound = if dtype == DType::F32 { r.vgprs <= 256 } else { r.vgprs <= 512 };
            assert!(!r.spills() && r.scratch_bytes == 0 && bound, "{dtype} on {arch}: {r}");
        }
    }
}

/// `dot` on f16 and bf16 lowers to MFMA 16x16x16 on CDNA (gfx90a's `f16` and `bf16_1k`
/// forms, gfx942's `_f16` and `_bf16`: LLVM's names for the same instructions) and to WMMA
/// 16x16x16 on RDNA3 in wave32, in matmul's default configuration, with no spills, no
/// scratch and no operand read narrower than 32 bits; f32 keeps FMA everywhere.
#[test]
fn sixteen_bit_dots_lower_to_mfma_and_wmma() {
    let k = kernels::find("matmul").unwrap();
    let config = k.configs()[0].clone();
    for dtype in [DType::F16, DType::BF16, DType::F32] {
        let plan = k.plan(&Problem::new(&[256, 192, 160], dtype), &config).unwrap();
        for arch in Arch::ALL {
            let c = compile(&plan.launches[0].program, &arch.target(), &options_for(&config), arch).unwrap();
            let d = c.kernel.disassemble().unwrap();
            let mnemonics: HashSet<&str> =
                d.lines().filter_map(|l| l.split_whitespace().next()).filter(|m| m.starts_with("v_mfma") || m.starts_with("v_wmma")).collect();
            let want: &[&str] = match (arch, dtype) {
                (Arch::Gfx90a, DType::F16) => &["v_mfma_f32_16x16x16f16"],
                (Arch::Gfx90a, DType::BF16) => &["v_mfma_f32_16x16x16bf16_1k"],
                (Arch::Gfx942, DType::F16) => &["v_mfma_f32_16x16x16_f16"],
                (Arch::Gfx942, DType::BF16) => &["v_mfma_f32_16x16x16_bf16"],
                (Arch::Gfx1100, DType::F16) => &["v_wmma_f32_16x16x16_f16"],
                (Arch::Gfx1100, DType::BF16) => &["v_wmma_f32_16x16x16_bf16"],
                _ => &[],
            };
            assert_eq!(mnemonics, want.iter().copied().collect(), "{dtype} on {arch}");
            // Staged operands are read a fragment run at a time (b held K-contiguous), never
            // element by element.
            if !want.is_empty() {
                let narrow = d
                    .lines()
                    .filter_map(|l| l.split_whitespace().next())
                    .filter(|m| m.starts_with("ds_read_u16") || m.starts_with("ds_load_u16"))
                    .count();
                assert_eq!(narrow, 0, "{dtype} on {arch}: {narrow} 16-bit LDS reads");
            }
            let r = &c.kernel.resources;
            assert!(!r.spills() && r.scratch_bytes == 0, "{dtype} on {arch}: {r}");
        }
    }
}
