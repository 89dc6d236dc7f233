//! Every library kernel, every supported dtype, every test problem and its first two
//! configurations, on the interpreter, against the kernel's f64 reference.

use tilekit::check::check;
use tilekit::kernels;
use tilekit::Device;

/// Kernels with a test below; `every_kernel_is_tested` keeps this list honest.
const TESTED: &[&str] = &[
    "vector_add",
    "softmax",
    "softmax_online",
    "layernorm",
    "rmsnorm",
    "sum",
    "cumsum",
    "histogram",
    "matmul",
    "attention",
    "swiglu",
    "rotary",
    "spmv",
];

fn check_kernel(name: &str) {
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
                match check(kernel.as_ref(), problem, config, &Device::Interpreter, seed) {
                    Ok(report) => {
                        runs += 1;
                        for o in report.outputs.iter().filter(|o| !o.pass) {
                            failures.push(format!(
                                "{problem} [{config}] output `{}`: rel err {:.3e} > tol {:.1e}, max abs err {:.3e} at {}, {} non-finite",
                                o.name, o.rel_err, o.tolerance, o.max_abs_err, o.max_abs_index, o.non_finite
                            ));
                        }
                    }
                    Err(e) => failures.push(format!("{problem} [{config}]: {e}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{name}: {} of {} runs failed:\n{}", failures.len(), runs + failures.len(), failures.join("\n"));
}

#[test]
fn every_kernel_is_tested() {
    for k in kernels::all() {
        assert!(TESTED.contains(&k.name()), "kernel `{}` has no interpreter test", k.name());
    }
}

#[test]
fn vector_add() {
    check_kernel("vector_add");
}

#[test]
fn softmax() {
    check_kernel("softmax");
}

#[test]
fn softmax_online() {
    check_kernel("softmax_online");
}

#[test]
fn layernorm() {
    check_kernel("layernorm");
}

#[test]
fn rmsnorm() {
    check_kernel("rmsnorm");
}

#[test]
fn sum() {
    check_kernel("sum");
}

#[test]
fn cumsum() {
    check_kernel("cumsum");
}

#[test]
fn histogram() {
    check_kernel("histogram");
}

#[test]
fn matmul() {
    check_kernel("matmul");
}

#[test]
fn attention() {
    check_kernel("attention");
}

#[test]
fn swiglu() {
    check_kernel("swiglu");
}

#[test]
fn rotary() {
    check_kernel("rotary");
}

#[test]
fn spmv() {
    check_kernel("spmv");
}
