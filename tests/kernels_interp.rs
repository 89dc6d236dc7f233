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
