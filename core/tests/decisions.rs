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

/// How [`tensor_matmul`] departs from a load a tensor map describes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Departure {
    None,
    /// A's offsets start a row past the origin its mask bounds.
    Shifted,
    /// A's column bound is `2 K`, not a parameter.
    Computed,
}

/// A `BM x 64` tile of `A (M x K) @ B (K x 64)` in a K loop of 64, every load masked as
/// Triton's tutorial masks them. Parameters: a, b, c, then M (3) and K (4).
fn tensor_matmul(departure: Departure) -> Program {
    let k = Builder::new("mm_tensor");
    let a = k.input("a", DType::F16);
    let b = k.input("b", DType::F16);
    let c = k.output("c", DType::F32);
    let m = k.scalar("M", DType::I32);
    let kdim = k.scalar("K", DType::I32);
    let rm = k.program_id(0) * 128 + k.arange(0, 128);
    let cols = k.arange(0, 64);
    let kk = k.arange(0, 64);
    let acc0 = k.full(&[128, 64], 0.0, DType::F32);
    let steps = (kdim + 63) / 64;
    let [acc] = k.for_range(0, steps, 1, [acc0], |kt, [acc]| {
        let ka = kk + kt * 64;
        let col = ka.expand_dims(0);
        let bound = if departure == Departure::Computed { kdim * 2 } else { kdim };
        let mask_a = rm.expand_dims(1).lt(m) & ka.expand_dims(0).lt(bound);
        let offsets = rm.expand_dims(1) * kdim + col;
        let offsets = if departure == Departure::Shifted { offsets + kdim } else { offsets };
        let ta = k.load_masked(a, offsets, mask_a, 0);
        let tb = k.load_masked(b, ka.expand_dims(1) * 64 + cols.expand_dims(0), ka.expand_dims(1).lt(kdim) & cols.expand_dims(0).lt(64), 0);
        [ta.dot(tb, acc)]
    });
    k.store_masked(c, rm.expand_dims(1) * 64 + cols.expand_dims(0), acc, rm.expand_dims(1).lt(m));
    k.finish().unwrap()
}

#[test]
fn tensor_copies_where_offsets_and_masks_describe_a_tensor_map() {
    let options = |m: i64, kd: i64| {
        let mut o = LowerOptions::new(4).specialize([(3, &Scalar::Int(m)), (4, &Scalar::Int(kd))]);
        o.num_stages = 3;
        o
    };
    let d = |departure, target: &Target, o: &LowerOptions| decisions(&tensor_matmul(departure), target, o).unwrap();
    // On sm_90a both loads are boxes of tensor maps: one thread copies them, nothing steps.
    let tma = d(Departure::None, &Target::cuda_sm90a(), &options(200, 256));
    assert_eq!((tma.pipelined_loads, tma.tensor_loads, tma.stepped_loads), (2, 2, 0));
    // sm_80 and sm_90 have no tensor copies.
    for target in [Target::cuda_sm80(), Target::cuda_sm90()] {
        assert_eq!(d(Departure::None, &target, &options(200, 256)).tensor_loads, 0, "{}", target.name);
    }
    // K = 200 is not known to be a multiple of 16: A's mask changes inside a 16-byte copy, so A
    // is not pipelined at all; B (rows bounded by K, a constant stride) still is a tensor map.
    let odd_k = d(Departure::None, &Target::cuda_sm90a(), &options(200, 200));
    assert_eq!((odd_k.pipelined_loads, odd_k.tensor_loads), (1, 1));
    // M = 0 is not a tensor map's extent: A takes per-thread copies, and so does B (a loop's
    // copies are all of one kind).
    let zero = d(Departure::None, &Target::cuda_sm90a(), &options(0, 256));
    assert_eq!((zero.pipelined_loads, zero.tensor_loads, zero.stepped_loads), (2, 0, 2));
    // Offsets that are not the masked origin's and a bound that is not a parameter are not
    // tensor maps: both loads take per-thread copies.
    for departure in [Departure::Shifted, Departure::Computed] {
        let got = d(departure, &Target::cuda_sm90a(), &options(200, 256));
        assert_eq!((got.pipelined_loads, got.tensor_loads), (2, 0));
    }
}
