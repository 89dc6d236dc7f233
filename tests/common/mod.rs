//! Shared by the kernel tests: every dtype, test problem and the first two configurations of a
//! kernel on one device, against the kernel's f64 reference.

/// One test per library kernel, calling the including file's `check_kernel(name)`, and a test
/// that no library kernel is missing from the list.
#[macro_export]
macro_rules! kernel_tests {
    // Every library kernel: the one list the test files share.
    () => {
        kernel_tests!(
            vector_add,
            softmax,
            softmax_online,
            layernorm,
            rmsnorm,
            sum,
            cumsum,
            histogram,
            matmul,
            attention,
            swiglu,
            rotary,
            spmv,
            gelu,
            transpose,
            rmsnorm_quant,
            cross_entropy,
            argmax,
        );
    };
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check_kernel(stringify!($name));
            }
        )*

        #[test]
        fn every_kernel_is_tested() {
            let tested = [$(stringify!($name)),*];
            for k in tilekit::kernels::all() {
                assert!(tested.contains(&k.name()), "kernel `{}` has no test here", k.name());
            }
        }
    };
}

/// Says on stderr that the running test (or the part of it named in `reason`) did not run and
/// why, as `SKIPPED: <test> (<reason>)`. Written to the stream itself, past the harness's
/// capture, so the line shows although the test passes; scripts/test.sh lists them at the end.
/// The line goes out in one write: written piecewise, the harness's `test NAME ... ok` lines of
/// tests running beside it could land inside it in the merged log.
#[allow(dead_code)]
pub fn skipped(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let line = format!("SKIPPED: {test} ({reason})\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

use tilekit::check::check;
use tilekit::kernels;
use tilekit::Device;

#[allow(dead_code)]
pub fn check_kernel(name: &str, device: &Device) {
    let kernel = kernels::find(name).unwrap_or_else(|| panic!("no kernel `{name}`"));
    let configs = kernel.configs();
    assert!(configs.len() >= 2, "{name}: tests need at least two configurations");
    let mut failures = Vec::new();
    let mut runs = 0;
    for &dtype in kernel.dtypes() {
        let problems = kernel.test_problems(dtype);
        assert!(!problems.is_empty(), "{name}: no test problems for {dtype}");
        for (pi, problem) in problems.iter().enumerate() {
            for config in configs.iter().take(2) {
                let seed = 0x5EED ^ (pi as u64) << 8 ^ dtype as u64;
                match check(kernel.as_ref(), problem, config, device, seed) {
                    Ok(report) => {
                        runs += 1;
                        failures.extend(failed_outputs(&report, problem, config));
                    }
                    Err(e) => failures.push(format!("{problem} [{config}]: {e}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{name}: {} of {} runs failed:\n{}", failures.len(), runs + failures.len(), failures.join("\n"));
}

/// Every configuration of the kernel's list that plans each problem, on one device; a
/// configuration that does not fit a problem (`KernelError::Unfit`) is skipped, but each problem
/// must run under at least two.
#[allow(dead_code)]
pub fn check_every_config(name: &str, problems: &[kernels::Problem], device: &Device) {
    let kernel = kernels::find(name).unwrap_or_else(|| panic!("no kernel `{name}`"));
    let mut failures = Vec::new();
    for (pi, problem) in problems.iter().enumerate() {
        let mut ran = 0;
        for config in kernel.configs() {
            match kernel.plan_on(problem, &config, &device.plan_target()) {
                Err(kernels::KernelError::Unfit(_)) => continue,
                Err(e) => {
                    failures.push(format!("{problem} [{config}]: {e}"));
                    continue;
                }
                Ok(_) => {}
            }
            ran += 1;
            match check(kernel.as_ref(), problem, &config, device, 0xC0F1 ^ pi as u64) {
                Ok(report) => failures.extend(failed_outputs(&report, problem, &config)),
                Err(e) => failures.push(format!("{problem} [{config}]: {e}")),
            }
        }
        assert!(ran >= 2, "{name} {problem}: only {ran} configurations plan it");
    }
    assert!(failures.is_empty(), "{name} on {}: {}", device.name(), failures.join("\n"));
}

/// LayerNorm rows of exactly 8192 columns, where the whole-row configurations run without masks
/// and the occupancy configuration applies (16-bit), and an f32 row of 8192 beside them.
#[allow(dead_code)]
pub fn whole_row_layernorms() -> Vec<kernels::Problem> {
    use tilekit::DType;
    vec![
        kernels::Problem::new(&[3, 8192], DType::F16),
        kernels::Problem::new(&[2, 8192], DType::BF16).with("residual", "1"),
        kernels::Problem::new(&[2, 8192], DType::F32),
    ]
}

/// One line per output of `report` outside its tolerance.
pub fn failed_outputs(report: &tilekit::check::CheckReport, problem: &kernels::Problem, config: &tilekit::Config) -> Vec<String> {
    report
        .outputs
        .iter()
        .filter(|o| !o.pass)
        .map(|o| {
            format!(
                "{problem} [{config}] output `{}`: rel err {:.3e} > tol {:.1e}, max abs err {:.3e} at {}, {} non-finite",
                o.name, o.rel_err, o.tolerance, o.max_abs_err, o.max_abs_index, o.non_finite
            )
        })
        .collect()
}

/// Attention on the tiles tensor cores take (128 and 64 query rows, every warp along them, both
/// of its dots on `mma.sync`): the probabilities reach the second dot in registers, the row
/// statistics stay in the accumulator's row layout, and with `num_stages` K (contiguous along
/// D, the dot's K) and V arrive by asynchronous copies. Partial key and query blocks (S = 1,
/// primes), causal and not, D from 16 to 128, f16 and bf16.
#[allow(dead_code)]
pub fn check_attention_matrix(device: &Device) {
    use tilekit::{Config, DType};
    let kernel = kernels::find("attention").expect("attention");
    let mut failures = Vec::new();
    let mut runs = 0;
    let problems =
        [(1, 2, 67, 64, true), (1, 1, 200, 64, false), (2, 1, 45, 128, true), (1, 1, 129, 16, false), (1, 1, 1, 32, true), (1, 1, 131, 32, true)];
    let configs = [(64, 64, 4, 1), (64, 64, 4, 2), (64, 64, 4, 3), (128, 64, 8, 3), (128, 32, 8, 2), (64, 128, 4, 2)];
    let shared = device.target().map_or(u32::MAX, |t| t.shared_memory_bytes);
    for (i, &(b, h, s, d, causal)) in problems.iter().enumerate() {
        for dtype in [DType::F16, DType::BF16] {
            let problem = kernels::Problem::new(&[b, h, s, d], dtype).with("causal", if causal { "1" } else { "0" });
            for &(bm, bn, w, stages) in &configs {
                let config = Config::new().with("BLOCK_M", bm).with("BLOCK_N", bn).with("num_warps", w).with("num_stages", stages);
                // Tiles that would spill at this D and dtype are refused by the plan.
                if let Err(kernels::KernelError::Unfit(_)) = kernel.plan_on(&problem, &config, &device.plan_target()) {
                    continue;
                }
                match check(kernel.as_ref(), &problem, &config, device, 0xA77E ^ i as u64) {
                    Ok(report) => failures.extend(failed_outputs(&report, &problem, &config)),
                    // 64 KiB of LDS (AMD) does not hold the largest tiles' operand staging at
                    // D = 128; the refusal names the bytes. CUDA's shared memory holds them all.
                    Err(e) if shared < 96 * 1024 && e.to_string().contains("bytes of shared memory") => continue,
                    Err(e) => failures.push(format!("{problem} [{config}]: {e}")),
                }
                runs += 1;
            }
        }
    }
    assert!(failures.is_empty(), "attention on {}: {} of {runs} runs failed:\n{}", device.name(), failures.len(), failures.join("\n"));
}

/// Matmul's software-pipelined loop (`num_stages` 2 to 5: asynchronous copies into a ring of
/// shared-memory buffers, read with matrix loads, where the backend has them) for sizes whose
/// tiles take it: K loops shorter than, as long as and longer than the pipeline, rows past
/// the last whole tile, f16 and bf16, one and several warps along each side of the tile.
#[allow(dead_code)]
pub fn check_matmul_pipelined(device: &Device) {
    use tilekit::{Config, DType};
    let kernel = kernels::find("matmul").expect("matmul");
    let mut failures = Vec::new();
    let mut runs = 0;
    // The last two 16-bit ones take B as N x K (`trans_b`): its ring holds the tile as stored.
    // f32 multiplied as tf32 (rings of f32, four to a copy, read element by element) last.
    let problems = [
        (64, 64, 32, DType::F16, false),
        (128, 64, 96, DType::F16, false),
        (96, 128, 160, DType::BF16, false),
        (64, 64, 256, DType::F16, false),
        (80, 64, 64, DType::BF16, false),
        (128, 67, 96, DType::F16, true),
        (80, 64, 160, DType::BF16, true),
        (96, 64, 160, DType::F32, false),
        (80, 67, 96, DType::F32, true),
    ];
    for (i, &(m, n, k, dtype, trans_b)) in problems.iter().enumerate() {
        let mut problem = kernels::Problem::new(&[m, n, k], dtype).with("trans_b", if trans_b { "1" } else { "0" });
        if dtype == DType::F32 {
            problem = problem.with("precision", "tf32");
        }
        // The last three fill 64-column panels (warpgroup matrix instructions on sm_90a; two
        // panels along K in the last).
        for (bm, bn, bk, w, most) in
            [(64, 64, 32, 4, 5), (32, 64, 32, 2, 5), (64, 32, 64, 4, 3), (64, 64, 64, 4, 3), (128, 128, 64, 8, 2), (64, 64, 128, 4, 2)]
        {
            for stages in 2..=most {
                let config = Config::new()
                    .with("BLOCK_M", bm)
                    .with("BLOCK_N", bn)
                    .with("BLOCK_K", bk)
                    .with("GROUP_M", 8)
                    .with("num_warps", w)
                    .with("num_stages", stages);
                match check(kernel.as_ref(), &problem, &config, device, 0x919E ^ i as u64) {
                    Ok(report) => failures.extend(failed_outputs(&report, &problem, &config)),
                    Err(e) => failures.push(format!("{problem} [{config}]: {e}")),
                }
                runs += 1;
            }
        }
    }
    // Every configuration of the kernel's list, on problems whose K and N take the pipelined
    // path (the largest tiles need it, and shared memory beyond 48 KiB on CUDA). Every one fits
    // sm_90's shared memory, so none may fail to compile there; on sm_80 (163 KiB) the four-stage
    // 128 x 256 tiles are refused with the bytes they need.
    let shared = device.target().map_or(u32::MAX, |t| t.shared_memory_bytes);
    for (i, &(m, n, k, dtype)) in [(200, 272, 96, DType::F16), (67, 48, 160, DType::BF16)].iter().enumerate() {
        let problem = kernels::Problem::new(&[m, n, k], dtype);
        for config in kernel.configs() {
            match check(kernel.as_ref(), &problem, &config, device, 0x51AB ^ i as u64) {
                Ok(report) => failures.extend(failed_outputs(&report, &problem, &config)),
                Err(e) if shared < 200 * 1024 && e.to_string().contains("bytes of shared memory") => continue,
                Err(e) => failures.push(format!("{problem} [{config}]: {e}")),
            }
            runs += 1;
        }
    }
    assert!(failures.is_empty(), "{} on {}: {} of {runs} runs failed:\n{}", kernel.name(), device.name(), failures.len(), failures.join("\n"));
}
