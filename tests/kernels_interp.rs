//! Every library kernel, every supported dtype, every test problem and its first two
//! configurations, on the interpreter, against the kernel's f64 reference.

#[macro_use]
mod common;

use tilekit::Device;

fn check_kernel(name: &str) {
    common::check_kernel(name, &Device::Interpreter)
}

/// Every LayerNorm configuration on rows that fill its block exactly.
#[test]
fn layernorm_every_configuration() {
    common::check_every_config("layernorm", &common::whole_row_layernorms(), &Device::Interpreter);
}

kernel_tests!();

/// Attention's tensor-core tiles plan where their registers fit and are refused as unfit, with
/// the reason, where they would spill (f16 at D = 128 fits 128 x 64 on 8 warps; bf16 does not).
#[test]
fn attention_refuses_tiles_that_would_spill() {
    use tilekit::kernels::{self, KernelError, Problem};
    use tilekit::{Config, DType};
    let k = kernels::find("attention").unwrap();
    let config = Config::new().with("BLOCK_M", 128).with("BLOCK_N", 64).with("num_warps", 8).with("num_stages", 3);
    assert!(k.plan(&Problem::new(&[1, 1, 256, 128], DType::F16), &config).is_ok());
    assert!(k.plan(&Problem::new(&[1, 1, 256, 64], DType::BF16), &config).is_ok());
    match k.plan(&Problem::new(&[1, 1, 256, 128], DType::BF16), &config) {
        Err(e @ KernelError::Unfit(_)) => {
            let msg = e.to_string();
            assert!(msg.contains("BLOCK_M = 128, BLOCK_N = 64 at D = 128") && msg.contains("spill"), "{msg}");
        }
        other => panic!("bf16 D = 128 on 128 x 64: {:?}", other.map(|_| ())),
    }
    // The default configuration plans every test problem of every dtype.
    let default = k.configs()[0].clone();
    for &dtype in k.dtypes() {
        for problem in k.test_problems(dtype) {
            assert!(k.plan(&problem, &default).is_ok(), "{problem}");
        }
    }
}
