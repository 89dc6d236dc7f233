//! Emission without a device: the interface, requirements as used, errors for misuse and for
//! targets that lack something, push-constant packing, disassembly. Every module that is
//! produced is checked by spirv-val.

#![allow(clippy::needless_range_loop, clippy::type_complexity)]

mod common;

use common::*;
use tilekit_core::gpu::{Emitter, SubgroupOps, Target};
use tilekit_core::ir::{AtomicOp, BinaryOp, CmpPred, ParamKind};
use tilekit_core::{Access, DType, Scalar};
use tilekit_spirv::{Binding, PushConstantError, Requirements, SpirvEmitter, SpirvError};

fn lavapipe() -> Target {
    Target::lavapipe()
}

/// Copies `src[idx]` to `dst[idx]` through `via` (a cast there and back when it differs).
fn copy_kernel(d: DType, via: DType) -> tilekit_spirv::SpirvKernel {
    let k = elementwise(&format!("copy_{d}_via_{via}"), &lavapipe(), 64, &[d], &[d], |e, v| {
        let t = e.cast(d, via, v[0]);
        vec![e.cast(via, d, t)]
    });
    spirv_val(&k);
    k
}

#[test]
fn requirements_follow_what_is_used() {
    let none = Requirements { subgroup_size: 8, ..Requirements::default() };
    assert_eq!(copy_kernel(DType::F32, DType::F32).requirements, none);
    // i1 and bf16 buffers need byte and 16-bit storage only: registers are 32-bit.
    assert_eq!(copy_kernel(DType::I1, DType::I1).requirements, Requirements { storage8: true, ..none.clone() });
    assert_eq!(copy_kernel(DType::BF16, DType::F32).requirements, Requirements { storage16: true, ..none.clone() });
    assert_eq!(copy_kernel(DType::F16, DType::F32).requirements, Requirements { storage16: true, float16: true, ..none.clone() });
    assert_eq!(copy_kernel(DType::I8, DType::I64).requirements, Requirements { storage8: true, int64: true, ..none.clone() });
    let k =
        elementwise("add_i8", &lavapipe(), 64, &[DType::I8, DType::I8], &[DType::I8], |e, v| vec![e.binary(BinaryOp::Add, DType::I8, v[0], v[1])]);
    spirv_val(&k);
    assert_eq!(k.requirements, Requirements { storage8: true, int8: true, ..none.clone() });
    // Loads, stores and width conversions of 8/16-bit values need only the storage features.
    assert_eq!(copy_kernel(DType::I16, DType::I32).requirements, Requirements { storage16: true, ..none.clone() });
    let k = elementwise("cmp_i16", &lavapipe(), 64, &[DType::I16, DType::I16], &[DType::I1], |e, v| vec![e.cmp(CmpPred::Lt, DType::I16, v[0], v[1])]);
    spirv_val(&k);
    assert_eq!(k.requirements, Requirements { storage16: true, storage8: true, int16: true, ..none.clone() });
    assert_eq!(copy_kernel(DType::I64, DType::I64).requirements, Requirements { int64: true, ..none.clone() });
    // f32 -> f16 is integer arithmetic plus a bitcast to f16: Float16 but no Int16.
    assert_eq!(copy_kernel(DType::F32, DType::F16).requirements, Requirements { float16: true, ..none.clone() });

    let k = elementwise("shared_bf16", &lavapipe(), 64, &[DType::F32], &[DType::F32], |e, v| {
        e.reserve_shared(DType::BF16, 100);
        let tid = e.thread_index();
        let b = e.cast(DType::F32, DType::BF16, v[0]);
        e.store_shared(DType::BF16, tid, b);
        e.barrier();
        let r = e.load_shared(DType::BF16, tid);
        vec![e.cast(DType::BF16, DType::F32, r)]
    });
    spirv_val(&k);
    assert_eq!(k.requirements, Requirements { int16: true, shared_bytes: 200, ..none.clone() });
}

/// On a target with the f16 float controls, any module with f16 values asks for them (the
/// driver must then keep f16 subnormals), not only one that rounds f32 to f16: a module that
/// only widens f16 does too (an `OpFConvert` that 16-bit storage allows without the Float16
/// capability). Without the controls nothing is asked.
#[test]
fn f16_float_controls_cover_every_module_with_f16() {
    let widen = |target: &Target| {
        let k = elementwise("widen_f16", target, 64, &[DType::F16], &[DType::F32], |e, v| vec![e.cast(DType::F16, DType::F32, v[0])]);
        spirv_val(&k);
        k
    };
    let with = Target::h200_vulkan();
    assert!(with.f16_rte && !with.f32_denorm_preserve);
    let k = widen(&with);
    assert!(k.requirements.f16_rte, "{:?}", k.requirements);
    let text = tilekit_spirv::disassemble(&k.words);
    for mode in ["RoundingModeRTE 16", "DenormPreserve 16"] {
        assert!(text.contains(mode), "{mode} missing:\n{text}");
    }
    assert!(!text.contains("DenormPreserve 32"), "f32 keeps the driver's default:\n{text}");
    let k = widen(&Target { f16_rte: false, ..with.clone() });
    assert!(!k.requirements.f16_rte);
    assert!(!tilekit_spirv::disassemble(&k.words).contains("DenormPreserve"));
    // A module without f16 asks for nothing even where the controls exist.
    let k = elementwise("neg_f32", &with, 64, &[DType::F32], &[DType::F32], |e, v| vec![e.unary(tilekit_core::ir::UnaryOp::Neg, DType::F32, v[0])]);
    assert!(!k.requirements.f16_rte);
}

#[test]
fn interface_bindings_and_push_constants() {
    let p = program(
        "iface",
        &[
            ("a", input(DType::F32)),
            ("n", scalar(DType::I32)),
            ("b", output(DType::I1)),
            ("flag", scalar(DType::I1)),
            ("big", scalar(DType::I64)),
            ("c", inout(DType::BF16)),
        ],
    );
    let e = SpirvEmitter::new(&p, &lavapipe(), 128).unwrap();
    let k = e.finish().unwrap();
    spirv_val(&k);
    assert_eq!(
        k.bindings,
        vec![
            Binding { binding: 0, param: 0, dtype: DType::F32, access: Access::Read, size_multiple: 4 },
            Binding { binding: 1, param: 2, dtype: DType::I1, access: Access::Write, size_multiple: 4 },
            Binding { binding: 2, param: 5, dtype: DType::BF16, access: Access::ReadWrite, size_multiple: 4 },
        ]
    );
    let pcs: Vec<(u32, u32)> = k.push_constants.iter().map(|p| (p.param, p.offset)).collect();
    assert_eq!(pcs, [(1, 0), (3, 4), (4, 8)]);
    assert_eq!(k.push_constant_size, 16);
    assert_eq!((k.threads, k.entry_point.as_str(), k.name.as_str()), (128, "main", "iface"));
    // Header: magic, version 1.5.
    assert_eq!(&k.words[..2], &[0x0723_0203, 0x0001_0500]);

    let block = k.pack_push_constants(&[(4, Scalar::Int(-2)), (1, Scalar::Int(7)), (3, Scalar::Bool(true))]).unwrap();
    let mut want = vec![7, 0, 0, 0, 1, 0, 0, 0];
    want.extend_from_slice(&(-2i64).to_le_bytes());
    assert_eq!(block, want);
    let err = |r: Result<Vec<u8>, PushConstantError>| r.unwrap_err();
    assert!(matches!(err(k.pack_push_constants(&[(1, Scalar::Int(7)), (3, Scalar::Bool(true))])), PushConstantError::Missing { param: 4, .. }));
    assert!(matches!(err(k.pack_push_constants(&[(0, Scalar::Int(7))])), PushConstantError::NotScalar { param: 0, .. }));
    assert!(matches!(
        err(k.pack_push_constants(&[(1, Scalar::Int(1 << 40)), (3, Scalar::Bool(true)), (4, Scalar::Int(0))])),
        PushConstantError::Mismatch { param: 1, .. }
    ));
    assert!(matches!(
        err(k.pack_push_constants(&[(1, Scalar::Int(1)), (3, Scalar::Int(1)), (4, Scalar::Int(0))])),
        PushConstantError::Mismatch { param: 3, .. }
    ));
}

fn contract_error(f: impl FnOnce(&mut SpirvEmitter)) -> String {
    let p = program("bad", &[("x", input(DType::F32)), ("y", output(DType::F32)), ("h", inout(DType::F16)), ("n", scalar(DType::I32))]);
    let mut e = SpirvEmitter::new(&p, &lavapipe(), 64).unwrap();
    f(&mut e);
    match e.finish() {
        Err(err @ (SpirvError::Contract { .. } | SpirvError::Unsupported { .. })) => err.to_string(),
        other => panic!("expected a misuse error, got {other:?}"),
    }
}

#[test]
fn misuse_is_reported_not_panicked() {
    let i = DType::I32;
    let m = contract_error(|e| {
        let t = e.constant(DType::I1, Scalar::Bool(true));
        e.begin_if(t, &[]);
    });
    assert!(m.contains("`if` is still open"), "{m}");
    let m = contract_error(|e| {
        let t = e.constant(DType::I1, Scalar::Bool(true));
        e.begin_if(t, &[]);
        e.end_loop(&[]);
        e.end_if(&[]);
    });
    assert!(m.contains("end_loop without an open loop"), "{m}");
    let m = contract_error(|e| {
        let a = e.constant(i, Scalar::Int(1));
        let b = e.constant(DType::F32, Scalar::Float(1.0));
        e.binary(BinaryOp::Add, i, a, b);
    });
    assert!(m.contains("binary rhs holds f32 where i32 was declared"), "{m}");
    let m = contract_error(|e| {
        let z = e.constant(i, Scalar::Int(0));
        let v = e.constant(DType::F32, Scalar::Float(1.0));
        e.store_global(0, DType::F32, z, i, v);
    });
    assert!(m.contains("writes buffer `x`, declared read"), "{m}");
    let m = contract_error(|e| {
        let z = e.constant(i, Scalar::Int(0));
        e.load_global(3, i, z, i);
    });
    assert!(m.contains("parameter 3 is not a buffer"), "{m}");
    let m = contract_error(|e| {
        let z = e.constant(i, Scalar::Int(0));
        e.load_global(0, i, z, i);
    });
    assert!(m.contains("buffer `x` holds f32, accessed as i32"), "{m}");
    let m = contract_error(|e| {
        let z = e.constant(i, Scalar::Int(0));
        let v = e.constant(DType::F16, Scalar::Float(1.0));
        e.atomic_global(Some(AtomicOp::Add), 2, DType::F16, z, i, None, v);
    });
    assert!(m.contains("cannot emit atomic_add on f16"), "{m}");
    let m = contract_error(|e| {
        e.scalar_param(3, DType::I64);
    });
    assert!(m.contains("scalar parameter 3 is i32, read as i64"), "{m}");
    let m = contract_error(|e| {
        e.program_id(3);
    });
    assert!(m.contains("axis 3"), "{m}");
    let m = contract_error(|e| {
        let z = e.constant(i, Scalar::Int(0));
        e.load_shared(DType::F32, z);
    });
    assert!(m.contains("no shared memory reserved for f32"), "{m}");
    let m = contract_error(|e| {
        let t = e.constant(DType::I1, Scalar::Bool(true));
        e.begin_if(t, &[i]);
        let one = e.constant(i, Scalar::Int(1));
        e.begin_else(&[one, one]);
        e.end_if(&[one]);
    });
    assert!(m.contains("yields 2 values, the if declares 1"), "{m}");
}

#[test]
fn targets_that_lack_something_are_named() {
    let p = program("t", &[("x", input(DType::F16)), ("n", scalar(DType::I32))]);
    let no_f16 = Target { f16: false, ..lavapipe() };
    let m = SpirvEmitter::new(&p, &no_f16, 64).err().expect("f16 buffer on a target without f16").to_string();
    assert!(m.contains("parameter `x`") && m.contains("f16 buffers are not supported"), "{m}");
    let m = SpirvEmitter::new(&p, &lavapipe(), 4096).err().expect("too many threads").to_string();
    assert!(m.contains("4096 threads per program"), "{m}");
    let many: Vec<(String, ParamKind)> = (0..20).map(|j| (format!("s{j}"), scalar(DType::I64))).collect();
    let named: Vec<(&str, ParamKind)> = many.iter().map(|(a, b)| (a.as_str(), b.clone())).collect();
    let m = SpirvEmitter::new(&program("many", &named), &lavapipe(), 64).err().expect("push constants too large").to_string();
    assert!(m.contains("160 bytes of push constants") && m.contains("128"), "{m}");

    let no_shuffle = Target { subgroup_ops: SubgroupOps { shuffle: false, arithmetic: false }, ..lavapipe() };
    let q = program("s", &[("n", scalar(DType::I32))]);
    let mut e = SpirvEmitter::new(&q, &no_shuffle, 64).unwrap();
    let v = e.scalar_param(0, DType::I32);
    e.shuffle_xor(DType::I32, v, 1);
    let m = e.finish().unwrap_err().to_string();
    assert!(m.contains("subgroup shuffles"), "{m}");
    let mut e = SpirvEmitter::new(&q, &lavapipe(), 64).unwrap();
    e.reserve_shared(DType::F32, 9000);
    let m = e.finish().unwrap_err().to_string();
    assert!(m.contains("36000 bytes of shared memory (the target has 32768)"), "{m}");
    let baseline = Target::vulkan_baseline();
    let m = SpirvEmitter::new(&program("i", &[("x", input(DType::I64))]), &baseline, 64).err().unwrap().to_string();
    assert!(m.contains("i64 buffers are not supported by target `vulkan-baseline`"), "{m}");
}

/// Every primitive, on the presets' subgroup sizes, passes spirv-val (nested control flow,
/// atomics through both paths, shuffles of every dtype).
#[test]
fn every_primitive_validates_for_every_preset() {
    for name in Target::PRESETS {
        let target = Target::preset(name).unwrap();
        let dtypes: Vec<DType> = DType::ALL.into_iter().filter(|&d| target.supports(d)).collect();
        for &d in &dtypes {
            let k = elementwise(&format!("all_{d}_{name}"), &target, 128, &[d, d], &[d, d, DType::I1], |e, v| {
                let c = e.cmp(CmpPred::Lt, d, v[0], v[1]);
                let s = e.select(d, c, v[0], v[1]);
                let sh = e.shuffle_xor(d, s, 1);
                e.reserve_shared(d, 128);
                let tid = e.thread_index();
                e.store_shared(d, tid, sh);
                let r = e.load_shared(d, tid);
                let zero = e.constant(DType::I32, Scalar::Int(0));
                let ten = e.constant(DType::I32, Scalar::Int(10));
                let one = e.constant(DType::I32, Scalar::Int(1));
                let (_, acc) = e.begin_loop(DType::I32, zero, ten, one, &[(d, r), (DType::I1, c)]);
                e.begin_if(acc[1], &[d]);
                let m = if d == DType::I1 { acc[0] } else { e.binary(BinaryOp::Max, d, acc[0], v[1]) };
                e.begin_else(&[m]);
                let back = e.end_if(&[acc[0]]);
                let out = e.end_loop(&[back[0], acc[1]]);
                let as_f = e.cast(d, DType::F32, out[0]);
                let as_d = e.cast(DType::F32, d, as_f);
                vec![out[0], as_d, out[1]]
            });
            spirv_val(&k);
        }
        let f = DType::F32;
        let k = elementwise(&format!("atomics_{name}"), &target, 64, &[f], &[f, f, f], |e, v| {
            let z = e.constant(DType::I32, Scalar::Int(0));
            e.store_global(1, f, z, DType::I32, v[0]);
            let a = e.atomic_global(Some(AtomicOp::Add), 1, f, z, DType::I32, None, v[0]);
            let b = e.atomic_global(Some(AtomicOp::Max), 2, f, z, DType::I32, None, v[0]);
            let c = e.atomic_global(None, 3, f, z, DType::I32, Some(a), b);
            vec![a, b, c]
        });
        spirv_val(&k);
    }
}

#[test]
fn disassembly_for_golden_files() {
    let k = copy_kernel(DType::F32, DType::F16);
    let text = tilekit_spirv::disassemble(&k.words);
    assert!(text.contains("OpEntryPoint GLCompute") && text.contains("LocalSize 64 1 1"), "{text}");
    let r = tilekit_spirv::disasm::disassemble_with_rspirv(&k.words);
    assert!(r.contains("OpEntryPoint GLCompute") && r.contains("OpCapability Float16"), "{r}");
    if let Some(s) = tilekit_spirv::disasm::disassemble_with_spirv_dis(&k.words) {
        assert!(s.contains("OpCapability Float16"), "{s}");
    }
    let bad = tilekit_spirv::disasm::disassemble_with_rspirv(&[1, 2, 3]);
    assert!(bad.starts_with("; rspirv could not parse"), "{bad}");
}

/// A long straight-line kernel (as a fully unrolled tile loop gives) emits quickly and validates.
#[test]
fn large_kernels_emit_in_linear_time() {
    let f = DType::F32;
    let start = std::time::Instant::now();
    let k = elementwise("large", &lavapipe(), 64, &[f], &[f], |e, v| {
        let mut acc = v[0];
        for j in 0..20_000 {
            let c = e.constant(f, Scalar::Float(j as f64 * 0.25));
            acc = e.fma(f, acc, c, v[0]);
        }
        vec![acc]
    });
    let took = start.elapsed();
    spirv_val(&k);
    assert!(took.as_secs_f64() < 5.0, "emitting 20000 instructions took {took:?}");
}
