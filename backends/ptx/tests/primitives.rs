//! Every primitive of the LLVM emitter, for every dtype the CUDA targets support, goes through
//! LLVM's NVPTX back end and assembles with ptxas for sm_80 without spills, and the PTX uses
//! the IEEE instructions the numerics need. Needs ptxas and libdevice (the nvcc wheel, a CUDA
//! toolkit, or `TILEKIT_PTXAS` / `TILEKIT_LIBDEVICE`).

use tilekit_core::gpu::{Emitter, Target};
use tilekit_core::ir::{AtomicOp, BinaryOp, Block, CmpPred, Param, ParamKind, Program, UnaryOp};
use tilekit_core::{Access, DType, Scalar};
use tilekit_llvm::inkwell::targets::FileType;
use tilekit_llvm::{LlvmEmitter, LlvmValue};
use tilekit_ptx::{ptxas, Arch, NvptxHooks};

const UNARY: [UnaryOp; 16] = [
    UnaryOp::Neg,
    UnaryOp::Not,
    UnaryOp::Abs,
    UnaryOp::Exp,
    UnaryOp::Exp2,
    UnaryOp::Log,
    UnaryOp::Log2,
    UnaryOp::Sqrt,
    UnaryOp::Rsqrt,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tanh,
    UnaryOp::Erf,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
];
const BINARY: [BinaryOp; 12] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Rem,
    BinaryOp::And,
    BinaryOp::Or,
    BinaryOp::Xor,
    BinaryOp::Shl,
    BinaryOp::Shr,
    BinaryOp::Max,
    BinaryOp::Min,
];

fn program(name: &str, params: Vec<(String, ParamKind)>) -> Program {
    Program {
        name: name.into(),
        params: params.into_iter().map(|(name, kind)| Param { name, kind }).collect(),
        grid_rank: 3,
        values: Default::default(),
        body: Block::default(),
    }
}

/// A kernel reading `ins[tid]`, computing `body`, writing `outs[tid]`; compiled to PTX for sm_80
/// and assembled by ptxas. Returns the PTX.
fn kernel(name: &str, ins: &[DType], outs: &[DType], body: impl FnOnce(&mut LlvmEmitter<'_, NvptxHooks>, &[LlvmValue]) -> Vec<LlvmValue>) -> String {
    let target = Target::cuda_sm80();
    let hooks = NvptxHooks { arch: Arch::Sm80 };
    let mut params = Vec::new();
    for (i, &d) in ins.iter().enumerate() {
        params.push((format!("in{i}"), ParamKind::Buffer { dtype: d, access: Access::Read }));
    }
    for (i, &d) in outs.iter().enumerate() {
        params.push((format!("out{i}"), ParamKind::Buffer { dtype: d, access: Access::ReadWrite }));
    }
    let prog = program(name, params);
    let mut e = LlvmEmitter::new(&prog, &target, 128, &hooks).unwrap();
    let tid = e.thread_index();
    let vals: Vec<LlvmValue> = ins.iter().enumerate().map(|(i, &d)| e.load_global(i as u32, d, tid, DType::I32)).collect();
    let res = body(&mut e, &vals);
    for (j, (&d, v)) in outs.iter().zip(&res).enumerate() {
        e.store_global((ins.len() + j) as u32, d, tid, DType::I32, *v);
    }
    let (ir, interface) = e.finish().unwrap_or_else(|err| panic!("{name}: {err}"));
    let cg = tilekit_llvm::codegen(&ir, &interface, &hooks, FileType::Assembly, false).unwrap_or_else(|err| panic!("{name}: {err}\n{ir}"));
    let ptx = String::from_utf8(cg.bytes).unwrap();
    let r = ptxas::assemble(&ptx, &interface.entry, Arch::Sm80).unwrap_or_else(|err| panic!("{name}: {err}"));
    assert!(!r.spills(), "{name}: {r}");
    ptx
}

fn dtypes() -> Vec<DType> {
    let t = Target::cuda_sm80();
    DType::ALL.into_iter().filter(|&d| t.supports(d)).collect()
}

#[test]
fn arithmetic_of_every_dtype() {
    for d in dtypes() {
        let float = d.is_float();
        kernel(&format!("arith_{d}"), &[d, d, d], &[d; 4], |e, v| {
            let mut acc = v[0];
            for op in BINARY {
                // f16 division and remainder are computed in f32 by the lowering.
                if d == DType::F16 && matches!(op, BinaryOp::Div | BinaryOp::Rem) {
                    continue;
                }
                if float && matches!(op, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Shl | BinaryOp::Shr) {
                    continue;
                }
                acc = e.binary(op, d, acc, v[1]);
            }
            let mut u = v[2];
            for op in UNARY {
                let ok = if float { op != UnaryOp::Not } else { matches!(op, UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs) };
                if ok {
                    u = e.unary(op, d, u);
                }
            }
            let c = e.cmp(CmpPred::Ne, d, v[0], v[1]);
            let c2 = e.cmp(CmpPred::Lt, d, v[1], v[2]);
            let c = e.binary(BinaryOp::And, DType::I1, c, c2);
            let s = e.select(d, c, v[0], v[2]);
            let f = if d == DType::I1 { v[0] } else { e.fma(d, v[0], v[1], v[2]) };
            vec![acc, u, s, f]
        });
    }
}

#[test]
fn casts_between_every_pair_of_dtypes() {
    let ds = dtypes();
    for &from in &ds {
        let ptx = kernel(&format!("cast_from_{from}"), &[from], &ds, |e, v| ds.iter().map(|&to| e.cast(from, to, v[0])).collect());
        if from == DType::F32 {
            // f32 -> f16 rounds to nearest even in one instruction.
            assert!(ptx.contains("cvt.rn.f16.f32"), "{ptx}");
        }
    }
}

#[test]
fn ieee_division_square_root_and_max() {
    let f = DType::F32;
    let ptx = kernel("ieee", &[f, f], &[f, f, f], |e, v| {
        vec![e.binary(BinaryOp::Div, f, v[0], v[1]), e.unary(UnaryOp::Sqrt, f, v[0]), e.binary(BinaryOp::Max, f, v[0], v[1])]
    });
    for want in ["div.rn.f32", "sqrt.rn.f32", "max.f32"] {
        assert!(ptx.contains(want), "no {want}:\n{ptx}");
    }
    assert!(!ptx.contains(".ftz"), "subnormals must be kept:\n{ptx}");
}

#[test]
fn shared_memory_barriers_shuffles_and_control_flow() {
    for d in dtypes() {
        let ptx = kernel(&format!("control_{d}"), &[d, d], &[d, d, DType::I1], |e, v| {
            let c = e.cmp(CmpPred::Lt, d, v[0], v[1]);
            let s = e.select(d, c, v[0], v[1]);
            let sh = e.shuffle_xor(d, s, 16);
            e.reserve_shared(d, 128);
            let tid = e.thread_index();
            e.store_shared(d, tid, sh);
            e.barrier();
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
        assert!(ptx.contains("shfl.sync.bfly.b32") && ptx.contains("bar.sync"), "{ptx}");
    }
}

#[test]
fn atomics_of_every_atomic_dtype() {
    for d in [DType::I32, DType::U32, DType::I64, DType::F32] {
        kernel(&format!("atomics_{d}"), &[d], &[d; 5], |e, v| {
            let z = e.constant(DType::I32, Scalar::Int(0));
            let mut outs = Vec::new();
            for (i, op) in [AtomicOp::Add, AtomicOp::Max, AtomicOp::Min, AtomicOp::Xchg].into_iter().enumerate() {
                outs.push(e.atomic_global(Some(op), 1 + i as u32, d, z, DType::I32, None, v[0]));
            }
            let c = outs[0];
            outs.push(e.atomic_global(None, 5, d, z, DType::I32, Some(c), v[0]));
            outs
        });
    }
}

#[test]
fn vector_loads_and_stores() {
    for d in dtypes() {
        let n = (16 / d.size_bytes()).min(8) as u32;
        let ptx = kernel(&format!("vec_{d}"), &[d], &[d], |e, _| {
            let tid = e.thread_index();
            let k = e.constant(DType::I32, Scalar::Int(n as i64));
            let base = e.binary(BinaryOp::Mul, DType::I32, tid, k);
            let vals = e.load_global_vec(0, d, base, DType::I32, n);
            e.store_global_vec(1, d, base, DType::I32, &vals);
            vec![vals[0]]
        });
        if d.size_bytes() >= 4 {
            assert!(ptx.contains("ld.global.nc.v"), "{d}:\n{ptx}");
        }
    }
}

/// `round` is one instruction, `cvt.rni` (to the nearest integer, ties to even), in f32 and
/// in f16 (whose f32 detour LLVM folds away: rounding an f16 to an integer is exact).
#[test]
fn round_is_cvt_rni() {
    for d in [DType::F32, DType::F16] {
        let ptx = kernel(&format!("round_{d}"), &[d], &[d], |e, v| vec![e.unary(UnaryOp::Round, d, v[0])]);
        assert!(ptx.contains(&format!("cvt.rni.{d}.{d}")) && !ptx.contains("call"), "{ptx}");
    }
}
