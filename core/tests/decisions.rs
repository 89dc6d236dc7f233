//! `gpu::decisions`: what the lowering chose for a program on a target, as reports and results
//! files record it.

use tilekit_core::gpu::lower::LowerOptions;
use tilekit_core::gpu::{decisions, Target};
use tilekit_core::{Builder, DType, Program, Scalar};

/// A 64 x 64 x 64 f16 matmul with f32 accumulation in a k loop of 32.
fn matmul() -> Program {
    let k = Builder::new("mm");
    let a = k.input("a", DType::F16);
    let b = k.input("b", DType::F16);
    let c = k.output("c", DType::F32);
    let rows = k.arange(0, 64).expand_dims(1);
    let cols = k.arange(0, 64).expand_dims(0);
    let kk = k.arange(0, 32);
    let mut acc = k.full(&[64, 64], 0.0, DType::F32);
    for step in 0..2 {
        let ta = k.load(a, rows * 64 + (kk.expand_dims(0) + step * 32));
        let tb = k.load(b, (kk.expand_dims(1) + step * 32) * 64 + cols);
        acc = ta.dot(tb, acc);
    }
    k.store(c, rows * 64 + cols, acc);
    k.finish().unwrap()
}

#[test]
fn dots_name_their_instruction_per_target() {
    let p = matmul();
    let options = LowerOptions::new(4);
    let mma = decisions(&p, &Target::cuda_sm80(), &options).unwrap();
    assert_eq!(mma.dots, ["mma.sync m16n8k16", "mma.sync m16n8k16"]);
    assert_eq!(mma.threads, 128);
    let fma = decisions(&p, &Target::lavapipe(), &options).unwrap();
    assert_eq!(fma.dots, ["fma", "fma"]);
    assert_eq!(fma.threads, 32);
    assert_eq!(fma.pipelined_loads, 0);
    // A program without dot has none to name.
    let k = Builder::new("copy");
    let (x, y) = (k.input("x", DType::F32), k.output("y", DType::F32));
    let i = k.arange(0, 128);
    k.store(y, i, k.load(x, i));
    assert!(decisions(&k.finish().unwrap(), &Target::cuda_sm80(), &options).unwrap().dots.is_empty());
}

/// A 64 x 64 f16 matmul over K (at most 256, A's row stride) in a loop of K steps of 32; with
/// `square`, the k offset of iteration `kt` is `kt * kt * 32` (not affine in the induction
/// variable).
fn looped_matmul(square: bool) -> Program {
    let k = Builder::new("mm_loop");
    let a = k.input("a", DType::F16);
    let b = k.input("b", DType::F16);
    let c = k.output("c", DType::F32);
    let kdim = k.scalar("K", DType::I32);
    let rows = k.arange(0, 64).expand_dims(1);
    let cols = k.arange(0, 64).expand_dims(0);
    let kk = k.arange(0, 32);
    let acc0 = k.full(&[64, 64], 0.0, DType::F32);
    let steps = kdim / 32;
    let [acc] = k.for_range(0, steps, 1, [acc0], |kt, [acc]| {
        let k0 = if square { kt * kt * 32 } else { kt * 32 };
        let ka = kk + k0;
        let ta = k.load_masked(a, rows * 256 + ka.expand_dims(0), ka.expand_dims(0).lt(kdim), 0);
        let tb = k.load_masked(b, ka.expand_dims(1) * 64 + cols, ka.expand_dims(1).lt(kdim), 0);
        [ta.dot(tb, acc)]
    });
    k.store(c, rows * 64 + cols, acc);
    k.finish().unwrap()
}

#[test]
fn pipelined_copies_step_their_addresses_where_offsets_are_affine() {
    // K a multiple of 16 (parameter 3, after the three buffers), as a launch with K = 256
    // specializes it: A's mask is then the same across each 16-byte copy and A is pipelined too.
    let mut options = LowerOptions::new(4).specialize([(3, &Scalar::Int(256))]);
    options.num_stages = 3;
    for target in [Target::cuda_sm80(), Target::cuda_sm90a()] {
        // Both operands come from the loop's rings, so both loads step.
        let affine = decisions(&looped_matmul(false), &target, &options).unwrap();
        assert_eq!((affine.pipelined_loads, affine.stepped_loads), (2, 2), "{}", target.name);
        // kt * kt * 32 changes by a different amount each iteration: every copy computes its
        // address from its offset.
        let square = decisions(&looped_matmul(true), &target, &options).unwrap();
        assert_eq!((square.pipelined_loads, square.stepped_loads), (2, 0), "{}", target.name);
    }
    // A target without asynchronous copies pipelines nothing.
    let none = decisions(&looped_matmul(false), &Target::lavapipe(), &options).unwrap();
    assert_eq!((none.pipelined_loads, none.stepped_loads), (0, 0));
}
