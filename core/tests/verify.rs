//! The verifier: valid programs pass; every class of error is caught at the offending op with the
//! caller's source line; and no program, however broken, makes it panic.
//!
//! Errors the builder can express are built with the builder and must point at the line of the
//! builder call (captured with `line!()` on the same line). Errors it cannot express (bad handles,
//! missing yields, duplicate definitions, ...) are built as raw IR.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilekit_core::ir::*;
use tilekit_core::verify::{verify, VerifyError, VerifyErrorKind, VerifyErrorKind as K};
use tilekit_core::{Access, Buf, Builder, DType, Scalar};

use DType::*;

// ----- helpers -----

/// The builder's program must be rejected at `line` of this file, by `op`, with `msg` in the
/// message.
#[track_caller]
fn rejected_at(result: Result<Program, VerifyError>, line: u32, op: &str, msg: &str) -> VerifyErrorKind {
    let e = match result {
        Ok(_) => panic!("the verifier accepted a program that `{op}` at line {line} should break"),
        Err(e) => e,
    };
    assert!(e.loc.file.ends_with("verify.rs"), "wrong file in `{e}`");
    assert_eq!(e.loc.line, line, "wrong line in `{e}`");
    assert_eq!(e.op, op, "wrong op in `{e}`");
    let text = e.to_string();
    assert!(text.contains(msg), "message `{text}` lacks `{msg}`");
    e.kind
}

/// A raw program must be rejected by `op` at line `line` of `raw.rs`, with `msg` in the message.
#[track_caller]
fn raw_rejected(p: &Program, op: &str, line: u32, msg: &str) -> VerifyErrorKind {
    let e = match verify(p) {
        Ok(()) => panic!("the verifier accepted a raw program that `{op}` should break"),
        Err(e) => e,
    };
    assert_eq!(e.op, op, "wrong op in `{e}`");
    if line != 0 {
        assert_eq!(e.loc, Loc::new("raw.rs", line, 1), "wrong location in `{e}`");
    }
    let text = e.to_string();
    assert!(text.contains(msg), "message `{text}` lacks `{msg}`");
    e.kind
}

/// Raw IR under construction: a value arena and parameters; instructions carry their line.
struct Raw {
    values: Arena<Type>,
    params: Vec<Param>,
}

impl Raw {
    fn new() -> Raw {
        Raw { values: Arena::new(), params: Vec::new() }
    }
    fn val(&mut self, ty: Type) -> Value {
        self.values.append(ty)
    }
    fn buffer(&mut self, name: &str, dtype: DType, access: Access) -> BufferId {
        self.params.push(Param { name: name.into(), kind: ParamKind::Buffer { dtype, access } });
        self.params.len() as BufferId - 1
    }
    fn program(self, insts: Vec<Inst>) -> Program {
        Program { name: "raw".into(), params: self.params, grid_rank: 1, values: self.values, body: Block { args: vec![], insts } }
    }
}

fn inst(op: Op, results: Vec<Value>, line: u32) -> Inst {
    Inst { op, results, loc: Loc::new("raw.rs", line, 1) }
}

fn yield_(values: Vec<Value>, line: u32) -> Inst {
    inst(Op::Yield { values }, vec![], line)
}

fn s(dtype: DType) -> Type {
    Type::scalar(dtype)
}

fn t(dtype: DType, shape: &[usize]) -> Type {
    Type::tile(dtype, shape)
}

/// `%c = const value` of `dtype`, defined in raw IR at `line`.
fn constant(r: &mut Raw, value: Scalar, dtype: DType, line: u32) -> (Value, Inst) {
    let v = r.val(s(dtype));
    (v, inst(Op::Const { value }, vec![v], line))
}

// ----- valid programs -----

fn vector_add() -> Program {
    let k = Builder::new("vector_add");
    let x = k.input("x", F32);
    let y = k.input("y", F32);
    let out = k.output("out", F32);
    let n = k.scalar("n", I32);
    let offs = k.program_id(0) * 1024 + k.arange(0, 1024);
    let mask = offs.lt(n);
    let a = k.load_masked(x, offs, mask, 0.0);
    let b = k.load_masked(y, offs, mask, 0.0);
    k.store_masked(out, offs, a + b, mask);
    k.finish().expect("vector add verifies")
}

/// Row sums, maxima, argmax and a softmax-like normalisation of a [4, 32] block.
fn row_reduce() -> Program {
    let k = Builder::new("row_reduce");
    let x = k.input("x", F32);
    let sums = k.output("sums", F32);
    let idx = k.output("idx", I32);
    let rows = k.program_id(0) * 4 + k.arange(0, 4);
    let cols = k.arange(0, 32);
    let offs = rows.expand_dims(1) * 32 + cols.expand_dims(0);
    let t = k.load(x, offs);
    let m = t.max(1);
    let e = (t - m.expand_dims(1)).exp();
    let total = e.sum(1);
    k.store(sums, rows, total / t.min(1).abs().maximum(1.0));
    k.store(idx, rows, t.argmax(1) + t.argmin(1));
    k.store(sums, offs, e / total.expand_dims(1));
    k.finish().expect("row reduction verifies")
}

/// A K loop carrying a 16x16 f32 accumulator fed by f16 dots.
fn matmul_loop() -> Program {
    let k = Builder::new("matmul");
    let a = k.input("a", F16);
    let b = k.input("b", F16);
    let c = k.output("c", F32);
    let kk = k.scalar("k", I32);
    let r = k.arange(0, 16);
    let offs = r.expand_dims(1) * 16 + r.expand_dims(0);
    let acc0 = k.zeros(&[16, 16], F32);
    let [acc, _] = k.for_range(0, kk, 16, [acc0, k.constant(0, I32)], |i, [acc, count]| {
        let ta = k.load(a, offs + i * 16);
        let tb = k.load(b, offs + i * 16);
        [ta.dot(tb.trans(), acc), count + 1]
    });
    k.store(c, offs, acc);
    k.finish().expect("matmul loop verifies")
}

fn if_else() -> Program {
    let k = Builder::new("branch");
    let x = k.input("x", F32);
    let out = k.output("out", F32);
    let flag = k.scalar("flag", I32);
    let offs = k.arange(0, 64);
    let v = k.load(x, offs);
    let [y, z] = k.if_else(flag.gt(0), || [v * 2.0, v.sum(0)], || [-v, v.max(0)]);
    k.if_then(flag.eq(3), || k.store(out, offs, y + z));
    k.store(out, offs, y);
    k.finish().expect("if/else verifies")
}

fn custom_reduce() -> Program {
    let k = Builder::new("custom");
    let x = k.input("x", F32);
    let out = k.output("out", F32);
    let offs = k.arange(0, 8).expand_dims(1) * 16 + k.arange(0, 16).expand_dims(0);
    let v = k.load(x, offs);
    let m = v.reduce(1, |a, b| k.select(a.gt(b), a, b) * 1.0);
    let c = v.scan(1, true, |a, b| a + b);
    let p = v.cumsum(0) + v.cumprod(1) + v.cummax(0);
    k.store(out, k.arange(0, 8), m);
    k.store(out, offs, c + p);
    k.finish().expect("custom reduce verifies")
}

fn tuple_reduce() -> Program {
    let k = Builder::new("tuple");
    let x = k.input("x", F32);
    let out = k.output("out", F32);
    let idx = k.output("idx", I32);
    let offs = k.arange(0, 8).expand_dims(1) * 16 + k.arange(0, 16).expand_dims(0);
    let v = k.load(x, offs);
    let i = k.arange(0, 16).expand_dims(0).broadcast_to(&[8, 16]);
    let [m, j] = k.reduce_tuple([v, i], 1, |[av, ai], [bv, bi]| {
        let win = bv.gt(av) | (bv.eq(av) & bi.lt(ai));
        [k.select(win, bv, av), k.select(win, bi, ai)]
    });
    k.store(out, k.arange(0, 8), m);
    k.store(idx, k.arange(0, 8), j);
    k.finish().expect("tuple reduce verifies")
}

fn atomics() -> Program {
    let k = Builder::new("atomics");
    let hist = k.buffer("hist", I32, Access::ReadWrite);
    let accum = k.buffer("accum", F32, Access::ReadWrite);
    let half = k.buffer("half", F16, Access::ReadWrite);
    let out = k.output("out", I32);
    let offs = k.arange(0, 128);
    let mask = offs.lt(100);
    let old = k.atomic_add(hist, offs % 16, 1, Some(mask));
    let mx = k.atomic_max(hist, offs, old, None);
    let mn = k.atomic_min(accum, offs, 2.5, Some(mask));
    let xc = k.atomic_xchg(accum, offs, mn, None);
    let cas = k.atomic_cas(hist, offs, mx, 7, Some(mask));
    k.atomic_add(half, offs, xc, None);
    k.store(out, offs, cas + k.num_programs(0) + k.program_id(1));
    k.finish().expect("atomics verify")
}

fn valid_programs() -> Vec<Program> {
    vec![vector_add(), row_reduce(), matmul_loop(), if_else(), custom_reduce(), tuple_reduce(), atomics()]
}

#[test]
fn valid_programs_pass() {
    for p in valid_programs() {
        verify(&p).unwrap_or_else(|e| panic!("{}: {e}", p.name));
    }
}

#[test]
fn every_dot_dtype_combination_passes() {
    for (ab, acc) in [(F16, F32), (F16, F16), (BF16, F32), (F32, F32), (I8, I32)] {
        let k = Builder::new("dot");
        let a = k.zeros(&[32, 16], ab);
        let b = k.zeros(&[16, 64], ab);
        let c = k.zeros(&[32, 64], acc);
        let out = k.output("out", acc);
        let r = k.arange(0, 32).expand_dims(1) * 64 + k.arange(0, 64).expand_dims(0);
        k.store(out, r, a.dot(b, c));
        k.finish().unwrap_or_else(|e| panic!("({ab}, {ab}) -> {acc}: {e}"));
    }
}

#[test]
fn display_names_op_location_and_problem() {
    let mut r = Raw::new();
    let x = r.val(t(I32, &[4]));
    let y = r.val(t(I32, &[4]));
    let p = r.program(vec![inst(Op::Arange { start: 0, end: 4 }, vec![x], 1), inst(Op::Unary { op: UnaryOp::Exp, x }, vec![y], 3)]);
    let e = verify(&p).unwrap_err();
    assert_eq!(e.to_string(), "`exp` at raw.rs:3:1: the operand has dtype i32, expected a float dtype (`exp` is defined on floats only)");
    assert!(matches!(e.kind, K::WrongDType { found: I32, .. }));
}

// ----- the program -----

#[test]
fn grid_rank_must_be_one_to_three() {
    for rank in [0, 4, u32::MAX] {
        let mut p = vector_add();
        p.grid_rank = rank;
        let kind = raw_rejected(&p, "program", 0, &format!("grid rank {rank} is outside 1..=3"));
        assert_eq!(kind, K::GridRank { rank });
    }
}

#[test]
fn program_body_takes_no_arguments() {
    let mut r = Raw::new();
    let a = r.val(s(I32));
    let mut p = r.program(vec![]);
    p.body.args.push(a);
    raw_rejected(&p, "program", 0, "the program body has 1 block arguments");
}

#[test]
fn parameter_names_are_non_empty() {
    let k = Builder::new("k");
    k.input("x", F32);
    k.output("", F32);
    let e = k.finish().unwrap_err();
    assert_eq!(e.op, "program");
    assert!(e.loc.is_unknown());
    assert_eq!(e.kind, K::EmptyParamName { index: 1 });
    assert!(e.to_string().contains("parameter 1 has an empty name"), "{e}");
}

#[test]
fn parameter_names_are_unique() {
    let k = Builder::new("k");
    k.input("x", F32);
    k.output("y", F32);
    k.scalar("x", I32);
    let e = k.finish().unwrap_err();
    assert_eq!(e.op, "program");
    assert!(e.to_string().contains("parameters 0 and 2 are both named `x`"), "{e}");
}

#[test]
fn arg_names_a_scalar_parameter_of_its_type() {
    let mut r = Raw::new();
    r.buffer("x", F32, Access::Read);
    r.params.push(Param { name: "n".into(), kind: ParamKind::Scalar { dtype: I64 } });
    let v = r.val(s(I32));
    let values = r.values.clone();
    let params = r.params.clone();
    let p = r.program(vec![inst(Op::Arg { param: 5 }, vec![v], 2)]);
    let kind = raw_rejected(&p, "arg", 2, "parameter index 5 is out of range: the program has 2 parameters");
    assert_eq!(kind, K::NoSuchParam { param: 5, count: 2 });

    let r = Raw { values: values.clone(), params: params.clone() };
    let p = r.program(vec![inst(Op::Arg { param: 0 }, vec![v], 2)]);
    raw_rejected(&p, "arg", 2, "parameter 0 `x` is a buffer, not a scalar");

    let r = Raw { values, params };
    let p = r.program(vec![inst(Op::Arg { param: 1 }, vec![v], 2)]);
    let kind = raw_rejected(&p, "arg", 2, "result has type i32, expected i64");
    assert!(matches!(kind, K::WrongType { .. }));
}

// ----- handles and SSA -----

#[test]
fn operand_handle_outside_the_arena_builder() {
    let k = Builder::new("k");
    let bogus = k.value(Value::from_index(999));
    let (_, l) = (bogus.exp(), line!());
    let kind = rejected_at(k.finish(), l, "exp", "value %999 is outside the value arena, which holds 1 values");
    assert_eq!(kind, K::BadHandle { value: 999, len: 1 });
}

#[test]
fn handles_outside_the_arena_raw() {
    // As an operand.
    let mut r = Raw::new();
    let y = r.val(s(F32));
    let p = r.program(vec![inst(Op::Unary { op: UnaryOp::Neg, x: Value::from_index(u32::MAX as usize) }, vec![y], 4)]);
    raw_rejected(&p, "neg", 4, "value %4294967295 is outside the value arena");

    // As a result.
    let r = Raw::new();
    let p = r.program(vec![inst(Op::ProgramId { axis: 0 }, vec![Value::from_index(3)], 5)]);
    raw_rejected(&p, "program_id", 5, "value %3 is outside the value arena, which holds 0 values");

    // As a block argument.
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(0), I32, 1);
    let (hi, c1) = constant(&mut r, Scalar::Int(4), I32, 2);
    let body = Block { args: vec![Value::from_index(77)], insts: vec![yield_(vec![], 3)] };
    let p = r.program(vec![c0, c1, inst(Op::For { lower: lo, upper: hi, step: hi, init: vec![], body }, vec![], 6)]);
    raw_rejected(&p, "for", 6, "value %77 is outside the value arena");

    // In a yield.
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Bool(true), I1, 1);
    let res = r.val(s(F32));
    let then_block = Block { args: vec![], insts: vec![yield_(vec![Value::from_index(50)], 8)] };
    let else_block = Block { args: vec![], insts: vec![yield_(vec![Value::from_index(50)], 9)] };
    let p = r.program(vec![ci, inst(Op::If { cond: c, then_block, else_block }, vec![res], 7)]);
    raw_rejected(&p, "yield", 8, "value %50 is outside the value arena");
}

#[test]
fn values_are_defined_once() {
    let mut r = Raw::new();
    let v = r.val(s(I32));
    let p = r.program(vec![inst(Op::Const { value: Scalar::Int(1) }, vec![v], 1), inst(Op::Const { value: Scalar::Int(2) }, vec![v], 2)]);
    let kind = raw_rejected(&p, "const", 2, "value %0 is defined more than once (first by `const` at raw.rs:1:1)");
    assert!(matches!(kind, K::Redefined { value: 0, .. }));

    // A block argument that is also an earlier instruction's result.
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(1), I32, 1);
    let body = Block { args: vec![lo], insts: vec![yield_(vec![], 3)] };
    let p = r.program(vec![c0, inst(Op::For { lower: lo, upper: lo, step: lo, init: vec![], body }, vec![], 2)]);
    raw_rejected(&p, "for", 2, "value %0 is defined more than once");

    // An op defining its own result twice.
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(0), I32, 1);
    let (init, c1) = constant(&mut r, Scalar::Int(5), I32, 2);
    let out = r.val(s(I32));
    let iv = r.val(s(I32));
    let carried = r.val(s(I32));
    let body = Block { args: vec![iv, carried], insts: vec![yield_(vec![carried], 4)] };
    let p = r.program(vec![c0, c1, inst(Op::For { lower: lo, upper: lo, step: init, init: vec![init, init], body }, vec![out, out], 3)]);
    let kind = raw_rejected(&p, "for", 3, "value %2 is listed twice among the results");
    assert_eq!(kind, K::DuplicateResult { value: 2 });
}

#[test]
fn values_are_used_after_their_definition() {
    let mut r = Raw::new();
    let a = r.val(s(F32));
    let b = r.val(s(F32));
    let p = r.program(vec![inst(Op::Unary { op: UnaryOp::Neg, x: a }, vec![b], 1), inst(Op::Const { value: Scalar::Float(1.0) }, vec![a], 2)]);
    let kind = raw_rejected(&p, "neg", 1, "value %0 is used before its definition by `const` at raw.rs:2:1");
    assert!(matches!(kind, K::UseBeforeDef { value: 0, .. }));

    // An instruction reading its own result.
    let mut r = Raw::new();
    let a = r.val(s(F32));
    let p = r.program(vec![inst(Op::Binary { op: BinaryOp::Add, lhs: a, rhs: a }, vec![a], 1)]);
    raw_rejected(&p, "add", 1, "value %0 is used before its definition");
}

#[test]
fn values_must_be_defined_somewhere() {
    let mut r = Raw::new();
    let a = r.val(s(F32));
    let b = r.val(s(F32));
    let p = r.program(vec![inst(Op::Unary { op: UnaryOp::Abs, x: a }, vec![b], 9)]);
    let kind = raw_rejected(&p, "abs", 9, "value %0 is used but never defined");
    assert_eq!(kind, K::Undefined { value: 0 });
}

#[test]
fn values_of_a_closed_block_are_invisible_builder() {
    let k = Builder::new("k");
    let mut leaked = None;
    k.for_range(0, 4, 1, [k.zeros(&[4], F32)], |i, [a]| {
        leaked = Some(i);
        [a]
    });
    let iv = leaked.expect("the body ran");
    let (_, l) = (iv * 3, line!());
    let kind = rejected_at(k.finish(), l, "mul", "is used outside the block that defines it (by an argument of the block of `for`");
    assert!(matches!(kind, K::OutOfScope { .. }));
}

#[test]
fn values_of_a_closed_block_are_invisible_raw() {
    // A value defined in the then branch, used after the `if`.
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Bool(false), I1, 1);
    let inner = r.val(s(F32));
    let after = r.val(s(F32));
    let then_block = Block { args: vec![], insts: vec![inst(Op::Const { value: Scalar::Float(2.0) }, vec![inner], 3), yield_(vec![], 4)] };
    let else_block = Block { args: vec![], insts: vec![yield_(vec![], 6)] };
    let p = r.program(vec![
        ci,
        inst(Op::If { cond: c, then_block: then_block.clone(), else_block: else_block.clone() }, vec![], 2),
        inst(Op::Unary { op: UnaryOp::Exp, x: inner }, vec![after], 7),
    ]);
    raw_rejected(&p, "exp", 7, "value %1 is used outside the block that defines it (by `const` at raw.rs:3:1)");

    // ... or in the sibling else branch.
    let mut p = p;
    p.body.insts.pop();
    if let Op::If { else_block, .. } = &mut p.body.insts[1].op {
        else_block.insts.insert(0, inst(Op::Unary { op: UnaryOp::Exp, x: inner }, vec![after], 5));
    }
    raw_rejected(&p, "exp", 5, "value %1 is used outside the block that defines it");
}

#[test]
fn combine_functions_see_only_their_own_values() {
    let k = Builder::new("k");
    let x = k.zeros(&[8], F32);
    let c = k.constant(2.0, F32);
    let (_, l) = (x.reduce(0, |a, b| a + b * c), line!());
    let kind = rejected_at(k.finish(), l, "mul", "is defined outside the combine function of `reduce`");
    assert!(matches!(kind, K::CombineCapture { owner: "reduce", .. }));

    let k = Builder::new("k");
    let x = k.zeros(&[8], I32);
    let c = k.constant(2, I32);
    let (_, l) = (x.scan(0, false, |a, b| a.maximum(b).minimum(c)), line!());
    rejected_at(k.finish(), l, "min", "is defined outside the combine function of `scan`");
}

#[test]
fn combine_functions_are_pure() {
    let k = Builder::new("k");
    let x = k.zeros(&[8], F32);
    let (_, l) = (x.reduce(0, |a, b| a + b + k.program_id(0).cast(F32)), line!());
    let kind = rejected_at(k.finish(), l, "program_id", "not allowed in the combine function of `reduce`, which must be a pure scalar function");
    assert_eq!(kind, K::ImpureCombine { owner: "reduce" });

    let k = Builder::new("k");
    let buf = k.input("buf", F32);
    let x = k.zeros(&[8], F32);
    let (_, l) = (x.scan(0, false, |a, b| a + k.load(buf, b.cast(I32))), line!());
    rejected_at(k.finish(), l, "load", "not allowed in the combine function of `scan`");

    let k = Builder::new("k");
    let x = k.zeros(&[8], I32);
    let (_, l) = (x.reduce(0, |a, b| a + b * k.scalar("n", I32)), line!());
    rejected_at(k.finish(), l, "arg", "not allowed in the combine function");

    let k = Builder::new("k");
    let x = k.zeros(&[8], I32);
    let l = line!() + 2;
    x.reduce(0, |a, b| {
        k.if_then(a.lt(b), || {});
        a
    });
    rejected_at(k.finish(), l, "if", "not allowed in the combine function");
}

#[test]
fn combine_functions_compute_on_scalars() {
    let k = Builder::new("k");
    let x = k.zeros(&[8], F32);
    let (_, l) = (x.reduce(0, |a, b| a + k.zeros(&[4], F32).sum(0) + b), line!());
    let kind = rejected_at(k.finish(), l, "splat", "defines the tile [4]xf32 inside the combine function of `reduce`");
    assert!(matches!(kind, K::TileInCombine { .. }));
}

#[test]
fn result_counts() {
    // store: none
    let mut r = Raw::new();
    let buf = r.buffer("out", I32, Access::Write);
    let o = r.val(t(I32, &[4]));
    let extra = r.val(t(I32, &[4]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![o], 1),
        inst(Op::Store { buffer: buf, offsets: o, value: o, mask: None }, vec![extra], 2),
    ]);
    let kind = raw_rejected(&p, "store", 2, "has 1 results, expected 0");
    assert_eq!(kind, K::ResultCount { expected: 0, found: 1 });

    // ordinary ops: one
    let r = Raw::new();
    let p = r.program(vec![inst(Op::ProgramId { axis: 0 }, vec![], 3)]);
    raw_rejected(&p, "program_id", 3, "has 0 results, expected 1");

    // for: one per carried value
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(0), I32, 1);
    let iv = r.val(s(I32));
    let a = r.val(s(I32));
    let body = Block { args: vec![iv], insts: vec![yield_(vec![], 5)] };
    let p = r.program(vec![c0, inst(Op::For { lower: lo, upper: lo, step: lo, init: vec![], body }, vec![a], 4)]);
    raw_rejected(&p, "for", 4, "has 1 results, expected 0");

    // yield: none
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Bool(true), I1, 1);
    let y = r.val(s(I32));
    let then_block = Block { args: vec![], insts: vec![inst(Op::Yield { values: vec![] }, vec![y], 6)] };
    let else_block = Block { args: vec![], insts: vec![yield_(vec![], 7)] };
    let p = r.program(vec![ci, inst(Op::If { cond: c, then_block, else_block }, vec![], 5)]);
    raw_rejected(&p, "yield", 6, "has 1 results, expected 0");
}

// ----- blocks -----

#[test]
fn region_blocks_end_with_yield() {
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(0), I32, 1);
    let (hi, c1) = constant(&mut r, Scalar::Int(8), I32, 2);
    let (st, c2) = constant(&mut r, Scalar::Int(1), I32, 3);
    let iv = r.val(s(I32));
    let sq = r.val(s(I32));
    let body = Block { args: vec![iv], insts: vec![inst(Op::Binary { op: BinaryOp::Mul, lhs: iv, rhs: iv }, vec![sq], 5)] };
    let p = r.program(vec![c0, c1, c2, inst(Op::For { lower: lo, upper: hi, step: st, init: vec![], body }, vec![], 4)]);
    let kind = raw_rejected(&p, "for", 4, "the body block does not end with `yield`");
    assert_eq!(kind, K::MissingYield { block: "body" });

    // An empty else branch.
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Bool(true), I1, 1);
    let then_block = Block { args: vec![], insts: vec![yield_(vec![], 3)] };
    let p = r.program(vec![ci, inst(Op::If { cond: c, then_block, else_block: Block::default() }, vec![], 2)]);
    raw_rejected(&p, "if", 2, "the else block does not end with `yield`");

    // A combine function without yield.
    let mut r = Raw::new();
    let x = r.val(t(I32, &[8]));
    let a = r.val(s(I32));
    let b = r.val(s(I32));
    let m = r.val(s(I32));
    let block = Block { args: vec![a, b], insts: vec![] };
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 8 }, vec![x], 1),
        inst(Op::Reduce { x, axis: 0, combine: Combine::Custom(block) }, vec![m], 2),
    ]);
    raw_rejected(&p, "reduce", 2, "the combine block does not end with `yield`");
}

#[test]
fn yield_is_the_last_instruction() {
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Bool(true), I1, 1);
    let one = r.val(s(I32));
    let then_block = Block { args: vec![], insts: vec![yield_(vec![], 3), inst(Op::Const { value: Scalar::Int(1) }, vec![one], 4)] };
    let else_block = Block { args: vec![], insts: vec![yield_(vec![], 6)] };
    let p = r.program(vec![ci, inst(Op::If { cond: c, then_block, else_block }, vec![], 2)]);
    let kind = raw_rejected(&p, "yield", 3, "`yield` is followed by 1 instructions");
    assert_eq!(kind, K::YieldNotLast { following: 1 });
}

#[test]
fn no_yield_in_the_program_body() {
    let mut r = Raw::new();
    let one = r.val(s(I32));
    let p = r.program(vec![inst(Op::Const { value: Scalar::Int(1) }, vec![one], 1), yield_(vec![one], 2)]);
    let kind = raw_rejected(&p, "yield", 2, "`yield` in the program body");
    assert_eq!(kind, K::YieldAtTopLevel);
}

#[test]
fn block_argument_counts() {
    // An if branch with an argument.
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Bool(true), I1, 1);
    let a = r.val(s(I32));
    let then_block = Block { args: vec![a], insts: vec![yield_(vec![], 3)] };
    let else_block = Block { args: vec![], insts: vec![yield_(vec![], 4)] };
    let p = r.program(vec![ci, inst(Op::If { cond: c, then_block, else_block }, vec![], 2)]);
    let kind = raw_rejected(&p, "if", 2, "the then block has 1 arguments, expected 0");
    assert_eq!(kind, K::BlockArgCount { block: "then", expected: 0, found: 1 });

    // A loop body without the induction variable.
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(1), I32, 1);
    let (init, c1) = constant(&mut r, Scalar::Float(0.0), F32, 2);
    let carried = r.val(s(F32));
    let res = r.val(s(F32));
    let body = Block { args: vec![carried], insts: vec![yield_(vec![carried], 4)] };
    let p = r.program(vec![c0, c1, inst(Op::For { lower: lo, upper: lo, step: lo, init: vec![init], body }, vec![res], 3)]);
    raw_rejected(&p, "for", 3, "the body block has 1 arguments, expected 2");

    // A combine function of one argument.
    let mut r = Raw::new();
    let x = r.val(t(I32, &[8]));
    let a = r.val(s(I32));
    let m = r.val(s(I32));
    let block = Block { args: vec![a], insts: vec![yield_(vec![a], 3)] };
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 8 }, vec![x], 1),
        inst(Op::Reduce { x, axis: 0, combine: Combine::Custom(block) }, vec![m], 2),
    ]);
    raw_rejected(&p, "reduce", 2, "the combine block has 1 arguments, expected 2");
}

#[test]
fn block_argument_types() {
    // Loop body argument of the wrong type.
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(1), I32, 1);
    let (init, c1) = constant(&mut r, Scalar::Float(0.0), F32, 2);
    let iv = r.val(s(I32));
    let carried = r.val(s(F16));
    let res = r.val(s(F32));
    let body = Block { args: vec![iv, carried], insts: vec![yield_(vec![init], 4)] };
    let p = r.program(vec![c0, c1, inst(Op::For { lower: lo, upper: lo, step: lo, init: vec![init], body }, vec![res], 3)]);
    raw_rejected(&p, "for", 3, "argument 1 of the body block has type f16, expected f32");

    // Induction variable of the wrong type.
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(1), I64, 1);
    let iv = r.val(s(I32));
    let body = Block { args: vec![iv], insts: vec![yield_(vec![], 4)] };
    let p = r.program(vec![c0, inst(Op::For { lower: lo, upper: lo, step: lo, init: vec![], body }, vec![], 3)]);
    raw_rejected(&p, "for", 3, "argument 0 of the body block has type i32, expected i64");

    // Combine argument of a tile type.
    let mut r = Raw::new();
    let x = r.val(t(I32, &[8]));
    let a = r.val(t(I32, &[8]));
    let b = r.val(s(I32));
    let m = r.val(s(I32));
    let block = Block { args: vec![a, b], insts: vec![yield_(vec![b], 3)] };
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 8 }, vec![x], 1),
        inst(Op::Reduce { x, axis: 0, combine: Combine::Custom(block) }, vec![m], 2),
    ]);
    raw_rejected(&p, "reduce", 2, "argument 0 of the combine block has type [8]xi32, expected i32");
}

#[test]
fn yield_counts() {
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Bool(true), I1, 1);
    let res = r.val(s(I1));
    let then_block = Block { args: vec![], insts: vec![yield_(vec![c], 3)] };
    let else_block = Block { args: vec![], insts: vec![yield_(vec![], 4)] };
    let p = r.program(vec![ci, inst(Op::If { cond: c, then_block, else_block }, vec![res], 2)]);
    let kind = raw_rejected(&p, "if", 2, "the else block yields 0 values, expected 1");
    assert_eq!(kind, K::YieldCount { block: "else", expected: 1, found: 0 });

    // A combine function yielding two values.
    let mut r = Raw::new();
    let x = r.val(t(I32, &[8]));
    let a = r.val(s(I32));
    let b = r.val(s(I32));
    let m = r.val(t(I32, &[8]));
    let block = Block { args: vec![a, b], insts: vec![yield_(vec![a, b], 3)] };
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 8 }, vec![x], 1),
        inst(Op::Scan { x, axis: 0, combine: Combine::Custom(block), reverse: false }, vec![m], 2),
    ]);
    raw_rejected(&p, "scan", 2, "the combine block yields 2 values, expected 1");
}

#[test]
fn yield_types_builder() {
    // if: the branches disagree.
    let k = Builder::new("k");
    let c = k.scalar("c", I32).gt(0);
    let (_, l) = (k.if_else(c, || [k.zeros(&[4], F32)], || [k.zeros(&[4], I32)]), line!());
    let kind = rejected_at(k.finish(), l, "if", "value 0 yielded by the else block has type [4]xi32, expected [4]xf32");
    assert!(matches!(kind, K::WrongType { .. }));

    // for: the body changes the carried type.
    let k = Builder::new("k");
    let (_, l) = (k.for_range(0, 4, 1, [k.zeros(&[4], F32)], |i, [_a]| [i]), line!());
    rejected_at(k.finish(), l, "for", "value 0 yielded by the body block has type i32, expected [4]xf32");

    // combine: the function changes the dtype.
    let k = Builder::new("k");
    let x = k.zeros(&[8], F32);
    let (_, l) = (x.reduce(0, |a, _b| a.cast(I32)), line!());
    rejected_at(k.finish(), l, "reduce", "value 0 yielded by the combine block has type i32, expected f32");
}

#[test]
fn loop_and_if_result_types_raw() {
    // for: results differ from the carried values.
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(1), I32, 1);
    let (init, c1) = constant(&mut r, Scalar::Float(0.0), F32, 2);
    let iv = r.val(s(I32));
    let carried = r.val(s(F32));
    let res = r.val(s(F16));
    let body = Block { args: vec![iv, carried], insts: vec![yield_(vec![carried], 4)] };
    let p = r.program(vec![c0, c1, inst(Op::For { lower: lo, upper: lo, step: lo, init: vec![init], body }, vec![res], 3)]);
    raw_rejected(&p, "for", 3, "result 0 has type f16, expected f32");

    // if: both branches agree with each other but not with the result.
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Bool(true), I1, 1);
    let res = r.val(s(I32));
    let then_block = Block { args: vec![], insts: vec![yield_(vec![c], 3)] };
    let else_block = Block { args: vec![], insts: vec![yield_(vec![c], 4)] };
    let p = r.program(vec![ci, inst(Op::If { cond: c, then_block, else_block }, vec![res], 2)]);
    raw_rejected(&p, "if", 2, "value 0 yielded by the then block has type i1, expected i32");
}

#[test]
fn nesting_depth_is_bounded() {
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Bool(true), I1, 1);
    let mut block = Block { args: vec![], insts: vec![yield_(vec![], 3)] };
    for _ in 0..100 {
        let nested = inst(Op::If { cond: c, then_block: block, else_block: Block { args: vec![], insts: vec![yield_(vec![], 3)] } }, vec![], 2);
        block = Block { args: vec![], insts: vec![nested, yield_(vec![], 3)] };
    }
    let p = r.program(vec![ci, block.insts.remove(0)]);
    let kind = raw_rejected(&p, "if", 2, "regions nest more than 64 levels deep");
    assert_eq!(kind, K::TooDeep { limit: 64 });
}

// ----- types -----

#[test]
fn extents_are_powers_of_two() {
    let k = Builder::new("k");
    let (_, l) = (k.zeros(&[4, 3], F32), line!());
    let kind = rejected_at(k.finish(), l, "splat", "type [4, 3]xf32: extent 3 is not a power of two");
    assert_eq!(kind, K::NotPowerOfTwo { ty: t(F32, &[4, 3]), extent: 3 });

    let k = Builder::new("k");
    let (_, l) = (k.full(&[0], 1.0, F32), line!());
    rejected_at(k.finish(), l, "splat", "extent 0 is not a power of two");

    let k = Builder::new("k");
    let (_, l) = (k.arange(0, 8).reshape(&[2, usize::MAX]), line!());
    rejected_at(k.finish(), l, "reshape", "cannot reshape [8]xi32 (8 elements)");
}

#[test]
fn tiles_hold_at_most_2_pow_20_elements() {
    let k = Builder::new("k");
    let (_, l) = (k.zeros(&[2048, 1024], F32), line!());
    let kind = rejected_at(k.finish(), l, "splat", "type [2048, 1024]xf32 has 2097152 elements, more than the limit of 2^20");
    assert!(matches!(kind, K::TooManyElements { numel: 2_097_152, .. }));

    // Extents whose product overflows.
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Float(1.0), F32, 1);
    let big = 1usize << 62;
    let v = r.val(t(F32, &[big, big, big]));
    let p = r.program(vec![ci, inst(Op::Splat { x: c }, vec![v], 2)]);
    raw_rejected(&p, "splat", 2, "more than the limit of 2^20");

    // The limit itself is fine.
    let k = Builder::new("k");
    k.zeros(&[1024, 1024], F32);
    k.finish().expect("2^20 elements are allowed");
}

// ----- program_id, const, arange -----

#[test]
fn grid_axes_are_within_the_grid() {
    let k = Builder::new("k");
    let (_, l) = (k.program_id(3), line!());
    let kind = rejected_at(k.finish(), l, "program_id", "grid axis 3 is out of range: the grid has rank 1");
    assert_eq!(kind, K::GridAxis { axis: 3, grid_rank: 1 });

    let mut r = Raw::new();
    let v = r.val(s(I32));
    let mut p = r.program(vec![inst(Op::NumPrograms { axis: 2 }, vec![v], 1)]);
    p.grid_rank = 2;
    raw_rejected(&p, "num_programs", 1, "grid axis 2 is out of range: the grid has rank 2");
}

#[test]
fn program_id_is_a_scalar_i32() {
    let mut r = Raw::new();
    let v = r.val(s(I64));
    let p = r.program(vec![inst(Op::ProgramId { axis: 0 }, vec![v], 1)]);
    raw_rejected(&p, "program_id", 1, "result has type i64, expected i32");

    let mut r = Raw::new();
    let v = r.val(t(I32, &[4]));
    let p = r.program(vec![inst(Op::NumPrograms { axis: 0 }, vec![v], 1)]);
    raw_rejected(&p, "num_programs", 1, "result has type [4]xi32, expected i32");
}

#[test]
fn constants_fit_their_dtype() {
    let k = Builder::new("k");
    let (_, l) = (k.constant(300, I8), line!());
    let kind = rejected_at(k.finish(), l, "const", "constant 300 does not fit i8");
    assert_eq!(kind, K::ConstRange { value: Scalar::Int(300), dtype: I8 });

    let k = Builder::new("k");
    let (_, l) = (k.constant(1.5, I32), line!());
    rejected_at(k.finish(), l, "const", "constant 1.5 does not fit i32");

    let k = Builder::new("k");
    let (_, l) = (k.constant(-1, U32), line!());
    rejected_at(k.finish(), l, "const", "constant -1 does not fit u32");

    let mut r = Raw::new();
    let v = r.val(s(I32));
    let p = r.program(vec![inst(Op::Const { value: Scalar::Bool(true) }, vec![v], 1)]);
    raw_rejected(&p, "const", 1, "constant true does not fit i32");
}

#[test]
fn constants_are_scalars() {
    let mut r = Raw::new();
    let v = r.val(t(F32, &[4]));
    let p = r.program(vec![inst(Op::Const { value: Scalar::Float(1.0) }, vec![v], 1)]);
    let kind = raw_rejected(&p, "const", 1, "result must be a scalar, found [4]xf32");
    assert!(matches!(kind, K::ExpectedScalar { .. }));
}

#[test]
fn arange_ranges() {
    let k = Builder::new("k");
    let (_, l) = (k.arange(4, 4), line!());
    let kind = rejected_at(k.finish(), l, "arange", "arange(4, 4): end must be greater than start");
    assert_eq!(kind, K::ArangeEmpty { start: 4, end: 4 });

    let k = Builder::new("k");
    let (_, l) = (k.arange(0, 12), line!());
    let kind = rejected_at(k.finish(), l, "arange", "arange(0, 12): the extent 12 is not a power of two");
    assert_eq!(kind, K::ArangeExtent { start: 0, end: 12, extent: 12 });

    let k = Builder::new("k");
    let (_, l) = (k.arange(0, 1 << 21), line!());
    rejected_at(k.finish(), l, "arange", "the extent 2097152 is not a power of two of at most 2^20");

    let k = Builder::new("k");
    let (_, l) = (k.arange(i32::MAX as i64 - 3, i32::MAX as i64 + 5), line!());
    let kind = rejected_at(k.finish(), l, "arange", "start and end must lie within i32");
    assert!(matches!(kind, K::ArangeBounds { .. }));

    let k = Builder::new("k");
    let (_, l) = (k.arange(i64::MIN, i64::MAX), line!());
    rejected_at(k.finish(), l, "arange", "start and end must lie within i32");

    // Result type.
    let mut r = Raw::new();
    let v = r.val(t(I64, &[8]));
    let p = r.program(vec![inst(Op::Arange { start: 8, end: 16 }, vec![v], 1)]);
    raw_rejected(&p, "arange", 1, "result has type [8]xi64, expected [8]xi32");

    // Negative starts are fine.
    let k = Builder::new("k");
    k.arange(-8, 8);
    k.finish().expect("arange(-8, 8) is valid");
}

// ----- shape ops -----

#[test]
fn splat_takes_a_scalar_to_a_tile() {
    let k = Builder::new("k");
    let x = k.arange(0, 4);
    let (_, l) = (k.splat(x, &[4]), line!());
    let kind = rejected_at(k.finish(), l, "splat", "the operand must be a scalar, found [4]xi32");
    assert!(matches!(kind, K::ExpectedScalar { .. }));

    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Int(1), I32, 1);
    let v = r.val(s(I32));
    let p = r.program(vec![ci.clone(), inst(Op::Splat { x: c }, vec![v], 2)]);
    let kind = raw_rejected(&p, "splat", 2, "the result must be a tile, found the scalar type i32");
    assert!(matches!(kind, K::ExpectedTile { .. }));

    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Int(1), I32, 1);
    let v = r.val(t(I64, &[4]));
    let p = r.program(vec![ci, inst(Op::Splat { x: c }, vec![v], 2)]);
    let kind = raw_rejected(&p, "splat", 2, "operand and result dtypes i32 and i64 differ");
    assert!(matches!(kind, K::DTypeMismatch { .. }));
}

#[test]
fn broadcast_rules() {
    let k = Builder::new("k");
    let (_, l) = (k.arange(0, 4).broadcast_to(&[8]), line!());
    let kind = rejected_at(k.finish(), l, "broadcast", "cannot broadcast [4] to [8]: extent 4 of dimension 0 is neither 1 nor 8");
    assert_eq!(kind, K::Broadcast { from: vec![4], to: vec![8] });

    let mut r = Raw::new();
    let x = r.val(t(I32, &[4]));
    let y = r.val(t(I32, &[4, 4]));
    let p = r.program(vec![inst(Op::Arange { start: 0, end: 4 }, vec![x], 1), inst(Op::Broadcast { x }, vec![y], 2)]);
    raw_rejected(&p, "broadcast", 2, "cannot broadcast [4] to [4, 4]: ranks 1 and 2 differ");

    let mut r = Raw::new();
    let x = r.val(t(I32, &[4]));
    let x1 = r.val(t(I32, &[1, 4]));
    let y = r.val(t(F32, &[8, 4]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![x], 1),
        inst(Op::ExpandDims { x, axis: 0 }, vec![x1], 2),
        inst(Op::Broadcast { x: x1 }, vec![y], 3),
    ]);
    raw_rejected(&p, "broadcast", 3, "operand and result dtypes i32 and f32 differ");
}

#[test]
fn expand_dims_rules() {
    let k = Builder::new("k");
    let (_, l) = (k.arange(0, 4).expand_dims(2), line!());
    let kind = rejected_at(k.finish(), l, "expand_dims", "axis 2 is out of range for the operand [4]xi32 (valid axes: 0..=1)");
    assert!(matches!(kind, K::AxisRange { axis: 2, .. }));

    let mut r = Raw::new();
    let x = r.val(t(I32, &[4]));
    let y = r.val(t(I32, &[4, 1]));
    let p = r.program(vec![inst(Op::Arange { start: 0, end: 4 }, vec![x], 1), inst(Op::ExpandDims { x, axis: 0 }, vec![y], 2)]);
    raw_rejected(&p, "expand_dims", 2, "result has type [4, 1]xi32, expected [1, 4]xi32");
}

#[test]
fn reshape_rules() {
    let k = Builder::new("k");
    let (_, l) = (k.arange(0, 8).reshape(&[4]), line!());
    let kind = rejected_at(k.finish(), l, "reshape", "cannot reshape [8]xi32 (8 elements) to [4]xi32 (4 elements)");
    assert!(matches!(kind, K::ReshapeNumel { .. }));

    let mut r = Raw::new();
    let x = r.val(t(I32, &[8]));
    let y = r.val(t(F32, &[2, 4]));
    let p = r.program(vec![inst(Op::Arange { start: 0, end: 8 }, vec![x], 1), inst(Op::Reshape { x }, vec![y], 2)]);
    raw_rejected(&p, "reshape", 2, "operand and result dtypes i32 and f32 differ");

    let k = Builder::new("k");
    k.arange(0, 8).reshape(&[2, 1, 4]).reshape(&[8]);
    k.finish().expect("reshape keeping 8 elements is valid");
}

#[test]
fn trans_rules() {
    let k = Builder::new("k");
    let x = k.zeros(&[4, 8], F32);
    let (_, l) = (x.permute(&[0, 0]), line!());
    let kind = rejected_at(k.finish(), l, "trans", "[0, 0] is not a permutation of 0..2");
    assert_eq!(kind, K::BadPermutation { perm: vec![0, 0], rank: 2 });

    let k = Builder::new("k");
    let (_, l) = (k.arange(0, 4).trans(), line!());
    rejected_at(k.finish(), l, "trans", "[1, 0] is not a permutation of 0..1");

    let k = Builder::new("k");
    let x = k.zeros(&[4, 8], F32);
    let (_, l) = (x.permute(&[0, u32::MAX]), line!());
    rejected_at(k.finish(), l, "trans", "is not a permutation of 0..2");

    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Float(0.0), F32, 1);
    let x = r.val(t(F32, &[4, 8]));
    let y = r.val(t(F32, &[4, 8]));
    let p = r.program(vec![ci, inst(Op::Splat { x: c }, vec![x], 2), inst(Op::Trans { x, perm: vec![1, 0] }, vec![y], 3)]);
    raw_rejected(&p, "trans", 3, "result has type [4, 8]xf32, expected [8, 4]xf32");
}

// ----- elementwise -----

#[test]
fn unary_dtypes() {
    let k = Builder::new("k");
    let (_, l) = (k.arange(0, 4).exp(), line!());
    let kind = rejected_at(k.finish(), l, "exp", "the operand has dtype i32, expected a float dtype (`exp` is defined on floats only)");
    assert!(matches!(kind, K::WrongDType { found: I32, .. }));

    let k = Builder::new("k");
    let (_, l) = (k.arange(0, 4).sqrt(), line!());
    rejected_at(k.finish(), l, "sqrt", "expected a float dtype");

    let k = Builder::new("k");
    let (_, l) = (!k.zeros(&[4], F32), line!());
    rejected_at(k.finish(), l, "not", "the operand has dtype f32, expected an integer dtype or i1");

    let mut r = Raw::new();
    let x = r.val(t(I32, &[4]));
    let y = r.val(t(I64, &[4]));
    let p = r.program(vec![inst(Op::Arange { start: 0, end: 4 }, vec![x], 1), inst(Op::Unary { op: UnaryOp::Neg, x }, vec![y], 2)]);
    raw_rejected(&p, "neg", 2, "result has type [4]xi64, expected [4]xi32");

    let k = Builder::new("k");
    let x = k.arange(0, 4);
    let _ = (-x, !x, x.abs(), k.zeros(&[4], F16).erf().floor().ceil().tanh().rsqrt());
    k.finish().expect("valid unary ops");
}

#[test]
fn binary_operand_shapes() {
    let k = Builder::new("k");
    let (a, b) = (k.arange(0, 4), k.arange(0, 8));
    let (_, l) = (a + b, line!());
    let kind = rejected_at(k.finish(), l, "add", "operand shapes [4] and [8] do not broadcast");
    assert_eq!(kind, K::OperandShapes { a_name: "lhs", a: vec![4], b_name: "rhs", b: vec![8] });

    let k = Builder::new("k");
    let (a, b) = (k.zeros(&[4, 2], F32), k.zeros(&[4, 8], F32));
    let (_, l) = (a.lt(b), line!());
    rejected_at(k.finish(), l, "cmp", "operand shapes [4, 2] and [4, 8] do not broadcast");

    // Shapes that would broadcast still need the explicit op.
    let mut r = Raw::new();
    let (c, ci) = constant(&mut r, Scalar::Float(0.0), F32, 1);
    let a = r.val(t(F32, &[4, 1]));
    let b = r.val(t(F32, &[4, 8]));
    let y = r.val(t(F32, &[4, 8]));
    let p = r.program(vec![
        ci,
        inst(Op::Splat { x: c }, vec![a], 2),
        inst(Op::Splat { x: c }, vec![b], 3),
        inst(Op::Binary { op: BinaryOp::Mul, lhs: a, rhs: b }, vec![y], 4),
    ]);
    raw_rejected(&p, "mul", 4, "operand shapes [4, 1] and [4, 8] differ (`lhs` and `rhs`); the IR needs identical shapes");
}

#[test]
fn binary_dtypes() {
    let mut r = Raw::new();
    let (a, ai) = constant(&mut r, Scalar::Float(1.0), F32, 1);
    let (b, bi) = constant(&mut r, Scalar::Float(1.0), F16, 2);
    let y = r.val(s(F32));
    let p = r.program(vec![ai, bi, inst(Op::Binary { op: BinaryOp::Sub, lhs: a, rhs: b }, vec![y], 3)]);
    let kind = raw_rejected(&p, "sub", 3, "operand dtypes f32 and f16 differ");
    assert_eq!(kind, K::DTypeMismatch { what: "operand".into(), a: F32, b: F16 });

    let k = Builder::new("k");
    let (a, b) = (k.zeros(&[4], F32), k.zeros(&[4], F32));
    let (_, l) = (a & b, line!());
    rejected_at(k.finish(), l, "and", "the operand has dtype f32, expected an integer dtype (`and` is defined on integers only)");

    let k = Builder::new("k");
    let a = k.zeros(&[4], BF16);
    let (_, l) = (a << 2, line!());
    rejected_at(k.finish(), l, "shl", "expected an integer dtype");

    let mut r = Raw::new();
    let (a, ai) = constant(&mut r, Scalar::Int(1), I32, 1);
    let y = r.val(s(I1));
    let p = r.program(vec![ai, inst(Op::Binary { op: BinaryOp::Add, lhs: a, rhs: a }, vec![y], 3)]);
    raw_rejected(&p, "add", 3, "result has type i1, expected i32");
}

#[test]
fn cmp_rules() {
    let mut r = Raw::new();
    let (a, ai) = constant(&mut r, Scalar::Int(1), I32, 1);
    let (b, bi) = constant(&mut r, Scalar::Int(1), U32, 2);
    let y = r.val(s(I1));
    let z = r.val(s(I32));
    let p = r.program(vec![ai.clone(), bi, inst(Op::Cmp { pred: CmpPred::Le, lhs: a, rhs: b }, vec![y], 3)]);
    raw_rejected(&p, "cmp", 3, "operand dtypes i32 and u32 differ");

    let p = Program { body: Block { args: vec![], insts: vec![ai, inst(Op::Cmp { pred: CmpPred::Eq, lhs: a, rhs: a }, vec![z], 4)] }, ..p };
    raw_rejected(&p, "cmp", 4, "result has type i32, expected i1");
}

#[test]
fn select_rules() {
    let k = Builder::new("k");
    let f = k.zeros(&[4], F32);
    let (_, l) = (k.select(f, f, f), line!());
    let kind = rejected_at(k.finish(), l, "select", "`cond` has dtype f32, expected i1");
    assert!(matches!(kind, K::WrongDType { .. }));

    let k = Builder::new("k");
    let c = k.arange(0, 8).lt(3);
    // The builder records the failed broadcast of `cond`, at the `select` call.
    let (_, l) = (k.select(c, k.zeros(&[4], F32), 1.0), line!());
    rejected_at(k.finish(), l, "broadcast", "cannot broadcast [8] to [4]");

    let mut r = Raw::new();
    let c = r.val(t(I1, &[8]));
    let (x, xi) = constant(&mut r, Scalar::Int(0), I32, 1);
    let (cb, cbi) = constant(&mut r, Scalar::Bool(true), I1, 2);
    let a = r.val(t(I32, &[4]));
    let y = r.val(t(I32, &[4]));
    let p = r.program(vec![
        xi,
        cbi,
        inst(Op::Splat { x: cb }, vec![c], 3),
        inst(Op::Splat { x }, vec![a], 4),
        inst(Op::Select { cond: c, on_true: a, on_false: a }, vec![y], 5),
    ]);
    raw_rejected(&p, "select", 5, "operand shapes [8] and [4] do not broadcast (`cond` and `on_true`)");

    let mut r = Raw::new();
    let c = r.val(t(I1, &[4]));
    let (x, xi) = constant(&mut r, Scalar::Int(0), I32, 1);
    let a = r.val(t(I32, &[4]));
    let b = r.val(t(I64, &[4]));
    let y = r.val(t(I32, &[4]));
    let (xb, xbi) = constant(&mut r, Scalar::Int(0), I64, 2);
    let (cb, cbi) = constant(&mut r, Scalar::Bool(true), I1, 3);
    let p = r.program(vec![
        xi,
        xbi,
        cbi,
        inst(Op::Splat { x: cb }, vec![c], 4),
        inst(Op::Splat { x }, vec![a], 5),
        inst(Op::Splat { x: xb }, vec![b], 6),
        inst(Op::Select { cond: c, on_true: a, on_false: b }, vec![y], 7),
    ]);
    raw_rejected(&p, "select", 7, "`on_true` and `on_false` dtypes i32 and i64 differ");
}

#[test]
fn fma_rules() {
    let k = Builder::new("k");
    let i = k.arange(0, 4);
    let (_, l) = (k.fma(i, i, i), line!());
    let kind = rejected_at(k.finish(), l, "fma", "the operand has dtype i32, expected a float dtype (`fma` is defined on floats only)");
    assert!(matches!(kind, K::WrongDType { .. }));

    let mut r = Raw::new();
    let (a, ai) = constant(&mut r, Scalar::Float(1.0), F32, 1);
    let (b, bi) = constant(&mut r, Scalar::Float(1.0), F16, 2);
    let y = r.val(s(F32));
    let p = r.program(vec![ai, bi, inst(Op::Fma { a, b: a, c: b }, vec![y], 3)]);
    raw_rejected(&p, "fma", 3, "`a` and `c` dtypes f32 and f16 differ");

    let mut r = Raw::new();
    let (z, zi) = constant(&mut r, Scalar::Float(1.0), F32, 1);
    let a = r.val(t(F32, &[4]));
    let c = r.val(t(F32, &[8]));
    let y = r.val(t(F32, &[4]));
    let p = r.program(vec![zi, inst(Op::Splat { x: z }, vec![a], 2), inst(Op::Splat { x: z }, vec![c], 3), inst(Op::Fma { a, b: a, c }, vec![y], 4)]);
    raw_rejected(&p, "fma", 4, "operand shapes [4] and [8] do not broadcast (`a` and `c`)");
}

#[test]
fn cast_keeps_the_shape() {
    let mut r = Raw::new();
    let x = r.val(t(I32, &[4]));
    let y = r.val(t(F32, &[8]));
    let p = r.program(vec![inst(Op::Arange { start: 0, end: 4 }, vec![x], 1), inst(Op::Cast { x }, vec![y], 2)]);
    raw_rejected(&p, "cast", 2, "result has type [8]xf32, expected [4]xf32");

    let k = Builder::new("k");
    let x = k.arange(0, 4);
    for d in DType::ALL {
        x.cast(d).cast(I1).cast(BF16);
    }
    k.finish().expect("every dtype pair casts");
}

// ----- memory -----

#[test]
fn load_buffer_must_exist_and_be_readable() {
    let k = Builder::new("k");
    let offs = k.arange(0, 4);
    let (_, l) = (k.load(Buf { id: 7, dtype: F32 }, offs), line!());
    let kind = rejected_at(k.finish(), l, "load", "buffer 7 is out of range: the program has 0 parameters");
    assert_eq!(kind, K::NoSuchBuffer { buffer: 7, count: 0 });

    let k = Builder::new("k");
    k.scalar("n", I32);
    let offs = k.arange(0, 4);
    let (_, l) = (k.load(Buf { id: 0, dtype: I32 }, offs), line!());
    let kind = rejected_at(k.finish(), l, "load", "parameter 0 `n` is a scalar, not a buffer");
    assert!(matches!(kind, K::NotABuffer { .. }));

    let k = Builder::new("k");
    let out = k.output("out", F32);
    let offs = k.arange(0, 4);
    let (_, l) = (k.load(out, offs), line!());
    let kind = rejected_at(k.finish(), l, "load", "buffer `out` is declared write, but this op needs read access");
    assert_eq!(kind, K::BufferAccess { name: "out".into(), declared: Access::Write, needed: Access::Read });
}

#[test]
fn load_operands() {
    let k = Builder::new("k");
    let x = k.input("x", F32);
    let offs = k.arange(0, 4).cast(F32);
    let (_, l) = (k.load(x, offs), line!());
    rejected_at(k.finish(), l, "load", "`offsets` has dtype f32, expected i32, u32 or i64");

    let k = Builder::new("k");
    let x = k.input("x", F32);
    let offs = k.arange(0, 4);
    let (_, l) = (k.load_masked(x, offs, offs.cast(F32), 0.0), line!());
    rejected_at(k.finish(), l, "load", "`mask` has dtype f32, expected i1");

    let k = Builder::new("k");
    let x = k.input("x", F32);
    let offs = k.arange(0, 4);
    let (_, l) = (k.load_masked(x, offs, k.arange(0, 8).lt(2), 0.0), line!());
    rejected_at(k.finish(), l, "load", "operand shapes [4] and [8] do not broadcast (`offsets` and `mask`)");

    // u32 and i64 offsets are fine.
    let k = Builder::new("k");
    let x = k.input("x", F32);
    k.load(x, k.arange(0, 4).cast(U32));
    k.load(x, k.arange(0, 4).cast(I64));
    k.finish().expect("u32 and i64 offsets");
}

#[test]
fn load_result_and_other_raw() {
    let mut r = Raw::new();
    let buf = r.buffer("x", F16, Access::Read);
    let o = r.val(t(I32, &[4]));
    let y = r.val(t(F32, &[4]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![o], 1),
        inst(Op::Load { buffer: buf, offsets: o, mask: None, other: None }, vec![y], 2),
    ]);
    raw_rejected(&p, "load", 2, "result has type [4]xf32, expected [4]xf16");

    // `other` without `mask`.
    let mut r = Raw::new();
    let buf = r.buffer("x", I32, Access::ReadWrite);
    let o = r.val(t(I32, &[4]));
    let y = r.val(t(I32, &[4]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![o], 1),
        inst(Op::Load { buffer: buf, offsets: o, mask: None, other: Some(o) }, vec![y], 2),
    ]);
    let kind = raw_rejected(&p, "load", 2, "`other` is given without `mask`");
    assert_eq!(kind, K::OtherWithoutMask);

    // `other` of another type.
    let mut r = Raw::new();
    let buf = r.buffer("x", I32, Access::Read);
    let o = r.val(t(I32, &[4]));
    let m = r.val(t(I1, &[4]));
    let (z, zi) = constant(&mut r, Scalar::Int(0), I32, 2);
    let y = r.val(t(I32, &[4]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![o], 1),
        zi,
        inst(Op::Cmp { pred: CmpPred::Lt, lhs: o, rhs: o }, vec![m], 3),
        inst(Op::Load { buffer: buf, offsets: o, mask: Some(m), other: Some(z) }, vec![y], 4),
    ]);
    raw_rejected(&p, "load", 4, "`other` has type i32, expected [4]xi32");
}

#[test]
fn store_rules() {
    let k = Builder::new("k");
    let x = k.input("x", F32);
    let offs = k.arange(0, 4);
    let (_, l) = (k.store(x, offs, 1.0), line!());
    let kind = rejected_at(k.finish(), l, "store", "buffer `x` is declared read, but this op needs write access");
    assert_eq!(kind, K::BufferAccess { name: "x".into(), declared: Access::Read, needed: Access::Write });

    let k = Builder::new("k");
    let out = k.output("out", F32);
    let offs = k.arange(0, 4);
    let (_, l) = (k.store_masked(out, offs, 1.0, offs.cast(F32)), line!());
    rejected_at(k.finish(), l, "store", "`mask` has dtype f32, expected i1");

    let k = Builder::new("k");
    let out = k.output("out", F32);
    let offs = k.arange(0, 4).cast(F16);
    let (_, l) = (k.store(out, offs, 1.0), line!());
    rejected_at(k.finish(), l, "store", "`offsets` has dtype f16, expected i32, u32 or i64");

    // Value dtype and shape (the builder casts and broadcasts, so raw IR).
    let mut r = Raw::new();
    let buf = r.buffer("out", F32, Access::Write);
    let o = r.val(t(I32, &[4]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![o], 1),
        inst(Op::Store { buffer: buf, offsets: o, value: o, mask: None }, vec![], 2),
    ]);
    raw_rejected(&p, "store", 2, "`value` has dtype i32, expected f32, the buffer's dtype");

    let mut r = Raw::new();
    let buf = r.buffer("out", I32, Access::ReadWrite);
    let o = r.val(t(I32, &[4]));
    let o8 = r.val(t(I32, &[8]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![o], 1),
        inst(Op::Arange { start: 0, end: 8 }, vec![o8], 2),
        inst(Op::Store { buffer: buf, offsets: o, value: o8, mask: None }, vec![], 3),
    ]);
    raw_rejected(&p, "store", 3, "operand shapes [4] and [8] do not broadcast (`offsets` and `value`)");
}

#[test]
fn atomics_need_read_write_buffers() {
    let k = Builder::new("k");
    let out = k.output("out", I32);
    let offs = k.arange(0, 4);
    let (_, l) = (k.atomic_add(out, offs, 1, None), line!());
    let kind = rejected_at(
        k.finish(),
        l,
        "atomic_add",
        "buffer `out` is declared write, but this op needs read_write access (an atomic reads the old value back)",
    );
    assert_eq!(kind, K::BufferAccess { name: "out".into(), declared: Access::Write, needed: Access::ReadWrite });

    let k = Builder::new("k");
    let x = k.input("x", I32);
    let offs = k.arange(0, 4);
    let (_, l) = (k.atomic_cas(x, offs, 0, 1, None), line!());
    rejected_at(k.finish(), l, "atomic_cas", "buffer `x` is declared read, but this op needs read_write access");
}

#[test]
fn atomic_dtypes() {
    let k = Builder::new("k");
    let buf = k.buffer("b", BF16, Access::ReadWrite);
    let (_, l) = (k.atomic_add(buf, k.arange(0, 4), 1, None), line!());
    let kind = rejected_at(k.finish(), l, "atomic_add", "this atomic does not support bf16; it takes i32, u32, i64, f32 or f16");
    assert_eq!(kind, K::AtomicDType { dtype: BF16, supported: "i32, u32, i64, f32 or f16" });

    let k = Builder::new("k");
    let buf = k.buffer("b", F16, Access::ReadWrite);
    let (_, l) = (k.atomic_max(buf, k.arange(0, 4), 1, None), line!());
    rejected_at(k.finish(), l, "atomic_max", "this atomic does not support f16; it takes i32, u32, i64 or f32");

    let k = Builder::new("k");
    let buf = k.buffer("b", I8, Access::ReadWrite);
    let (_, l) = (k.atomic_xchg(buf, k.arange(0, 4), 1, None), line!());
    rejected_at(k.finish(), l, "atomic_xchg", "this atomic does not support i8; it takes a 32- or 64-bit dtype");

    let k = Builder::new("k");
    let buf = k.buffer("b", F32, Access::ReadWrite);
    let (_, l) = (k.atomic_cas(buf, k.arange(0, 4), 0.0, 1.0, None), line!());
    rejected_at(k.finish(), l, "atomic_cas", "this atomic does not support f32; it takes i32, u32 or i64");

    let ok: [(&str, &[DType]); 5] = [
        ("add", &[I32, U32, I64, F32, F16]),
        ("max", &[I32, U32, I64, F32]),
        ("min", &[I32, U32, I64, F32]),
        ("xchg", &[I32, U32, I64, F32]),
        ("cas", &[I32, U32, I64]),
    ];
    for (op, dtypes) in ok {
        for &dtype in dtypes {
            let k = Builder::new("k");
            let buf = k.buffer("b", dtype, Access::ReadWrite);
            let offs = k.arange(0, 4);
            match op {
                "add" => k.atomic_add(buf, offs, 1, None),
                "max" => k.atomic_max(buf, offs, 1, None),
                "min" => k.atomic_min(buf, offs, 1, None),
                "xchg" => k.atomic_xchg(buf, offs, 1, None),
                _ => k.atomic_cas(buf, offs, 0, 1, None),
            };
            k.finish().unwrap_or_else(|e| panic!("atomic {op} on {dtype}: {e}"));
        }
    }
}

#[test]
fn atomic_operands_raw() {
    let mut r = Raw::new();
    let buf = r.buffer("b", I32, Access::ReadWrite);
    let o = r.val(t(I32, &[4]));
    let v64 = r.val(t(I64, &[4]));
    let y = r.val(t(I32, &[4]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![o], 1),
        inst(Op::Cast { x: o }, vec![v64], 2),
        inst(Op::Atomic { op: AtomicOp::Add, buffer: buf, offsets: o, value: v64, mask: None }, vec![y], 3),
    ]);
    raw_rejected(&p, "atomic_add", 3, "`value` has dtype i64, expected i32, the buffer's dtype");

    // cmp of another type.
    let mut r = Raw::new();
    let buf = r.buffer("b", I64, Access::ReadWrite);
    let o32 = r.val(t(I32, &[4]));
    let o = r.val(t(I64, &[4]));
    let (c, ci) = constant(&mut r, Scalar::Int(0), I64, 3);
    let y = r.val(t(I64, &[4]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![o32], 1),
        inst(Op::Cast { x: o32 }, vec![o], 2),
        ci,
        inst(Op::AtomicCas { buffer: buf, offsets: o, cmp: c, value: o, mask: None }, vec![y], 4),
    ]);
    raw_rejected(&p, "atomic_cas", 4, "`cmp` has type i64, expected [4]xi64");

    // The result is the old values, of the value's type.
    let mut r = Raw::new();
    let buf = r.buffer("b", F32, Access::ReadWrite);
    let o = r.val(t(I32, &[4]));
    let v = r.val(t(F32, &[4]));
    let y = r.val(t(F32, &[8]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 4 }, vec![o], 1),
        inst(Op::Cast { x: o }, vec![v], 2),
        inst(Op::Atomic { op: AtomicOp::Xchg, buffer: buf, offsets: o, value: v, mask: None }, vec![y], 3),
    ]);
    raw_rejected(&p, "atomic_xchg", 3, "result has type [8]xf32, expected [4]xf32");
}

#[test]
fn atomic_mask() {
    let k = Builder::new("k");
    let b = k.buffer("b", F32, Access::ReadWrite);
    let offs = k.arange(0, 8);
    let (_, l) = (k.atomic_min(b, offs, 1.0, Some(offs)), line!());
    rejected_at(k.finish(), l, "atomic_min", "`mask` has dtype i32, expected i1");
}

// ----- reduce and scan -----

#[test]
fn reduce_rules() {
    let k = Builder::new("k");
    let x = k.zeros(&[4, 8], F32);
    let (_, l) = (x.sum(2), line!());
    let kind = rejected_at(k.finish(), l, "reduce", "axis 2 is out of range for the operand [4, 8]xf32 (valid axes: 0..2)");
    assert!(matches!(kind, K::AxisRange { axis: 2, .. }));

    let k = Builder::new("k");
    let x = k.constant(1.0, F32);
    let (_, l) = (x.max(0), line!());
    rejected_at(k.finish(), l, "reduce", "(valid axes: none, the operand is a scalar)");

    let mut r = Raw::new();
    let x = r.val(t(F32, &[4, 8]));
    let (c, ci) = constant(&mut r, Scalar::Float(0.0), F32, 1);
    let y = r.val(t(F32, &[8]));
    let p = r.program(vec![ci, inst(Op::Splat { x: c }, vec![x], 2), inst(Op::Reduce { x, axis: 1, combine: Combine::Sum }, vec![y], 3)]);
    raw_rejected(&p, "reduce", 3, "result has type [8]xf32, expected [4]xf32");

    let mut p = p;
    p.body.insts[2].op = Op::Reduce { x, axis: 0, combine: Combine::ArgMax };
    raw_rejected(&p, "reduce", 3, "result has type [8]xf32, expected [8]xi32");
}

#[test]
fn scan_rules() {
    let k = Builder::new("k");
    let x = k.zeros(&[4, 8], F32);
    let (_, l) = (x.cumsum(2), line!());
    rejected_at(k.finish(), l, "scan", "axis 2 is out of range for the operand [4, 8]xf32");

    let mut r = Raw::new();
    let x = r.val(t(I32, &[8]));
    let y = r.val(t(I32, &[8]));
    let p = r.program(vec![
        inst(Op::Arange { start: 0, end: 8 }, vec![x], 1),
        inst(Op::Scan { x, axis: 0, combine: Combine::ArgMin, reverse: false }, vec![y], 2),
    ]);
    let kind = raw_rejected(&p, "scan", 2, "`argmin` cannot combine a scan");
    assert_eq!(kind, K::ScanCombine { combine: "argmin" });

    let mut p = p;
    p.values = p.values.iter().map(|(h, ty)| if h == y { t(I64, &[8]) } else { ty.clone() }).collect();
    p.body.insts[1].op = Op::Scan { x, axis: 0, combine: Combine::Max, reverse: true };
    raw_rejected(&p, "scan", 2, "result has type [8]xi64, expected [8]xi32");
}

// ----- dot -----

#[test]
fn dot_rules() {
    let k = Builder::new("k");
    let (a, b, c) = (k.zeros(&[16], F16), k.zeros(&[16, 16], F16), k.zeros(&[16, 16], F32));
    let (_, l) = (a.dot(b, c), line!());
    let kind = rejected_at(k.finish(), l, "dot", "`a` must be a 2-D tile, found [16]xf16");
    assert!(matches!(kind, K::DotRank { operand: "a", .. }));

    let k = Builder::new("k");
    let (a, b, c) = (k.zeros(&[16, 32], F16), k.zeros(&[64, 16], F16), k.zeros(&[16, 16], F32));
    let (_, l) = (a.dot(b, c), line!());
    let kind = rejected_at(k.finish(), l, "dot", "K extents differ: a is [16, 32], b is [64, 16]");
    assert_eq!(kind, K::DotK { a: vec![16, 32], b: vec![64, 16] });

    let k = Builder::new("k");
    let (a, b, c) = (k.zeros(&[16, 32], F16), k.zeros(&[32, 64], F16), k.zeros(&[16, 32], F32));
    let (_, l) = (a.dot(b, c), line!());
    rejected_at(k.finish(), l, "dot", "acc is [16, 32], expected [M, N] = [16, 64]");

    let k = Builder::new("k");
    let (a, b, c) = (k.zeros(&[8, 16], F16), k.zeros(&[16, 16], F16), k.zeros(&[8, 16], F32));
    let (_, l) = (a.dot(b, c), line!());
    let kind = rejected_at(k.finish(), l, "dot", "M = 8, N = 16, K = 16: every dot extent must be at least 16");
    assert_eq!(kind, K::DotTooSmall { m: 8, n: 16, k: 16 });

    let k = Builder::new("k");
    let (a, b, c) = (k.zeros(&[16, 16], F16), k.zeros(&[16, 16], BF16), k.zeros(&[16, 16], F32));
    let (_, l) = (a.dot(b, c), line!());
    let kind = rejected_at(k.finish(), l, "dot", "unsupported dtypes a f16, b bf16, acc f32");
    assert_eq!(kind, K::DotDTypes { a: F16, b: BF16, acc: F32 });

    for (ab, acc) in [(BF16, BF16), (I8, F32), (F32, F16), (I32, I32), (F16, I32)] {
        let k = Builder::new("k");
        let (a, b, c) = (k.zeros(&[16, 16], ab), k.zeros(&[16, 16], ab), k.zeros(&[16, 16], acc));
        let (_, l) = (a.dot(b, c), line!());
        rejected_at(k.finish(), l, "dot", "unsupported dtypes");
    }

    // tf32 names how f32 is rounded: other operands are refused, f32 ones taken.
    let k = Builder::new("k");
    let (a, b, c) = (k.zeros(&[16, 16], F16), k.zeros(&[16, 16], F16), k.zeros(&[16, 16], F32));
    let (_, l) = (a.dot_tf32(b, c), line!());
    let kind = rejected_at(k.finish(), l, "dot", "input precision tf32 needs f32 operands, found a f16, b f16");
    assert_eq!(kind, K::DotPrecision { precision: "tf32", a: F16, b: F16 });
    let k = Builder::new("k");
    let (a, b, c) = (k.zeros(&[16, 16], F32), k.zeros(&[16, 16], F32), k.zeros(&[16, 16], F32));
    let _ = a.dot_tf32(b, c);
    assert!(k.finish().is_ok());

    let mut r = Raw::new();
    let (z, zi) = constant(&mut r, Scalar::Float(0.0), F32, 1);
    let m = r.val(t(F32, &[16, 16]));
    let y = r.val(t(F16, &[16, 16]));
    let p =
        r.program(vec![zi, inst(Op::Splat { x: z }, vec![m], 2), inst(Op::Dot { a: m, b: m, acc: m, precision: InputPrecision::Ieee }, vec![y], 3)]);
    raw_rejected(&p, "dot", 3, "result has type [16, 16]xf16, expected [16, 16]xf32");
}

// ----- for and if -----

#[test]
fn loop_bounds() {
    let k = Builder::new("k");
    let lo = k.constant(0.0, F32);
    let (_, l) = (k.for_range(lo, 4, 1, [], |_, []| []), line!());
    let kind = rejected_at(k.finish(), l, "for", "the induction variable has dtype f32, expected an integer dtype other than i1");
    assert!(matches!(kind, K::WrongDType { .. }));

    let k = Builder::new("k");
    let (_, l) = (k.for_range(0, 8, 0, [], |_, []| []), line!());
    let kind = rejected_at(k.finish(), l, "for", "the step is the constant 0; a loop needs a positive step");
    assert_eq!(kind, K::LoopStep { step: 0 });

    let k = Builder::new("k");
    let (_, l) = (k.for_range(8, 0, -2, [], |_, []| []), line!());
    rejected_at(k.finish(), l, "for", "the step is the constant -2");

    // Bounds of mixed dtypes, a tile bound, an i1 loop (raw IR: the builder promotes and coerces).
    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(0), I32, 1);
    let (hi, c1) = constant(&mut r, Scalar::Int(8), I64, 2);
    let iv = r.val(s(I32));
    let body = Block { args: vec![iv], insts: vec![yield_(vec![], 4)] };
    let p = r.program(vec![c0, c1, inst(Op::For { lower: lo, upper: hi, step: lo, init: vec![], body }, vec![], 3)]);
    let kind = raw_rejected(&p, "for", 3, "loop bounds have different dtypes: lower i32, upper i64, step i32");
    assert_eq!(kind, K::LoopBoundDTypes { lower: I32, upper: I64, step: I32 });

    let mut r = Raw::new();
    let (lo, c0) = constant(&mut r, Scalar::Int(0), I32, 1);
    let hi = r.val(t(I32, &[4]));
    let iv = r.val(s(I32));
    let body = Block { args: vec![iv], insts: vec![yield_(vec![], 4)] };
    let p = r.program(vec![
        c0,
        inst(Op::Arange { start: 0, end: 4 }, vec![hi], 2),
        inst(Op::For { lower: lo, upper: hi, step: lo, init: vec![], body }, vec![], 3),
    ]);
    raw_rejected(&p, "for", 3, "the upper bound must be a scalar, found [4]xi32");

    let mut r = Raw::new();
    let (b, c0) = constant(&mut r, Scalar::Bool(true), I1, 1);
    let iv = r.val(s(I1));
    let body = Block { args: vec![iv], insts: vec![yield_(vec![], 4)] };
    let p = r.program(vec![c0, inst(Op::For { lower: b, upper: b, step: b, init: vec![], body }, vec![], 3)]);
    raw_rejected(&p, "for", 3, "the induction variable has dtype i1");

    // A step that is not a constant is checked at run time.
    let k = Builder::new("k");
    let step = k.scalar("step", I32);
    k.for_range(0, 8, step, [], |_, []| []);
    k.finish().expect("a run-time step is accepted");
}

#[test]
fn if_condition() {
    let k = Builder::new("k");
    let c = k.constant(1, I32);
    let (_, l) = (k.if_else(c, || [k.constant(1, I32)], || [k.constant(2, I32)]), line!());
    let kind = rejected_at(k.finish(), l, "if", "the condition has dtype i32, expected i1");
    assert!(matches!(kind, K::WrongDType { .. }));

    let k = Builder::new("k");
    let c = k.arange(0, 4).lt(2);
    let (_, l) = (k.if_then(c, || {}), line!());
    let kind = rejected_at(k.finish(), l, "if", "the condition must be a scalar, found [4]xi1");
    assert!(matches!(kind, K::ExpectedScalar { .. }));
}

#[test]
fn tuple_reduce_checks_operands_combine_and_results() {
    // Operands of different shapes.
    let k = Builder::new("k");
    let (a, b) = (k.zeros(&[4, 8], F32), k.zeros(&[8, 4], F32));
    let (_, l) = (k.reduce_tuple([a, b], 1, |x, _| x), line!());
    rejected_at(k.finish(), l, "reduce_tuple", "[4, 8]");
    // A combine that yields the wrong dtype for its second operand.
    let k = Builder::new("k");
    let (a, b) = (k.zeros(&[8], F32), k.zeros(&[8], I32));
    let (_, l) = (k.reduce_tuple([a, b], 0, |[x, _], [y, _]| [x + y, x]), line!());
    let kind = rejected_at(k.finish(), l, "reduce_tuple", "value 1 yielded by the combine block");
    assert!(matches!(kind, K::WrongType { .. }));
    // A combine that reads a tile from outside.
    let k = Builder::new("k");
    let (a, b) = (k.zeros(&[8], F32), k.zeros(&[8], F32));
    let (_, l) = (k.reduce_tuple([a, b], 0, |[x, _], [y, _]| [x + y, a]), line!());
    let kind = rejected_at(k.finish(), l, "yield", "combine function of `reduce_tuple`");
    assert!(matches!(kind, K::CombineCapture { .. }));
    // No operands.
    let k = Builder::new("k");
    let (_, l) = (k.reduce_tuple([], 0, |a: [tilekit_core::Tile<'_>; 0], _| a), line!());
    let kind = rejected_at(k.finish(), l, "reduce_tuple", "has no operands");
    assert_eq!(kind, K::EmptyTuple);
}

// ----- robustness -----

/// Mutable references to every value handle an op reads, and to its nested blocks.
fn parts(op: &mut Op) -> (Vec<&mut Value>, Vec<&mut Block>) {
    match op {
        Op::Arg { .. } | Op::ProgramId { .. } | Op::NumPrograms { .. } | Op::Const { .. } | Op::Arange { .. } => (vec![], vec![]),
        Op::Splat { x }
        | Op::Broadcast { x }
        | Op::ExpandDims { x, .. }
        | Op::Reshape { x }
        | Op::Trans { x, .. }
        | Op::Unary { x, .. }
        | Op::Cast { x } => (vec![x], vec![]),
        Op::Reduce { x, combine, .. } | Op::Scan { x, combine, .. } => match combine {
            Combine::Custom(b) => (vec![x], vec![b]),
            _ => (vec![x], vec![]),
        },
        Op::ReduceTuple { xs, combine, .. } => (xs.iter_mut().collect(), vec![combine]),
        Op::Binary { lhs, rhs, .. } | Op::Cmp { lhs, rhs, .. } => (vec![lhs, rhs], vec![]),
        Op::Select { cond, on_true, on_false } => (vec![cond, on_true, on_false], vec![]),
        Op::Fma { a, b, c } | Op::Dot { a, b, acc: c, .. } => (vec![a, b, c], vec![]),
        Op::Load { offsets, mask, other, .. } => {
            let mut v = vec![offsets];
            v.extend(mask.as_mut());
            v.extend(other.as_mut());
            (v, vec![])
        }
        Op::Store { offsets, value, mask, .. } | Op::Atomic { offsets, value, mask, .. } => {
            let mut v = vec![offsets, value];
            v.extend(mask.as_mut());
            (v, vec![])
        }
        Op::AtomicCas { offsets, cmp, value, mask, .. } => {
            let mut v = vec![offsets, cmp, value];
            v.extend(mask.as_mut());
            (v, vec![])
        }
        Op::For { lower, upper, step, init, body } => {
            let mut v = vec![lower, upper, step];
            v.extend(init.iter_mut());
            (v, vec![body])
        }
        Op::If { cond, then_block, else_block } => (vec![cond], vec![then_block, else_block]),
        Op::Yield { values } => (values.iter_mut().collect(), vec![]),
        Op::DeviceAssert { cond, .. } => (vec![cond], vec![]),
    }
}

/// Every handle in a block: arguments, results, operands, recursively.
fn handles<'a>(b: &'a mut Block, out: &mut Vec<&'a mut Value>) {
    out.extend(b.args.iter_mut());
    for inst in b.insts.iter_mut() {
        out.extend(inst.results.iter_mut());
        let (ops, blocks) = parts(&mut inst.op);
        out.extend(ops);
        for nested in blocks {
            handles(nested, out);
        }
    }
}

fn visit_blocks(b: &mut Block, f: &mut dyn FnMut(&mut Block)) {
    f(b);
    for inst in b.insts.iter_mut() {
        for nested in parts(&mut inst.op).1 {
            visit_blocks(nested, f);
        }
    }
}

fn count_blocks(b: &mut Block) -> usize {
    let mut n = 0;
    visit_blocks(b, &mut |_| n += 1);
    n
}

/// Applies `f` to a random block of `p`.
fn with_random_block(p: &mut Program, rng: &mut StdRng, f: &mut dyn FnMut(&mut Block, &mut StdRng)) {
    let target = rng.gen_range(0..count_blocks(&mut p.body));
    let mut i = 0;
    visit_blocks(&mut p.body, &mut |b| {
        if i == target {
            f(b, rng);
        }
        i += 1;
    });
}

fn pick<T: Copy>(rng: &mut StdRng, xs: &[T]) -> T {
    xs[rng.gen_range(0..xs.len())]
}

const EXTENTS: [usize; 9] = [0, 1, 2, 3, 16, 17, 1 << 20, 1 << 40, usize::MAX];
const NUMBERS: [u32; 8] = [0, 1, 2, 3, 15, 16, 1000, u32::MAX];
const INTS: [i64; 9] = [i64::MIN, i32::MIN as i64, -1, 0, 1, 7, 16, i32::MAX as i64 + 1, i64::MAX];

fn mutate_type(ty: &Type, rng: &mut StdRng) -> Type {
    let mut ty = ty.clone();
    match rng.gen_range(0..4) {
        0 => ty.dtype = pick(rng, &DType::ALL),
        1 => ty.shape.push(pick(rng, &EXTENTS)),
        2 => {
            ty.shape.pop();
        }
        _ => {
            if !ty.shape.is_empty() {
                let i = rng.gen_range(0..ty.shape.len());
                ty.shape[i] = pick(rng, &EXTENTS);
            }
        }
    }
    ty
}

fn mutate_numbers(op: &mut Op, rng: &mut StdRng) {
    match op {
        Op::Arg { param } => *param = pick(rng, &NUMBERS),
        Op::ProgramId { axis } | Op::NumPrograms { axis } | Op::ExpandDims { axis, .. } => *axis = pick(rng, &NUMBERS),
        Op::Reduce { axis, combine, .. } | Op::Scan { axis, combine, .. } => {
            if rng.gen_bool(0.5) {
                *axis = pick(rng, &NUMBERS);
            } else {
                *combine = match rng.gen_range(0..4) {
                    0 => Combine::ArgMax,
                    1 => Combine::ArgMin,
                    2 => Combine::Prod,
                    _ => Combine::Custom(Block::default()),
                };
            }
        }
        Op::Trans { perm, .. } => match rng.gen_range(0..3) {
            0 => perm.push(pick(rng, &NUMBERS)),
            1 => {
                perm.pop();
            }
            _ => perm.reverse(),
        },
        Op::Const { value } => {
            *value = match rng.gen_range(0..3) {
                0 => Scalar::Int(pick(rng, &INTS)),
                1 => Scalar::Float(pick(rng, &[f64::NAN, -0.0, 1e300, 2.5])),
                _ => Scalar::Bool(rng.gen()),
            }
        }
        Op::Arange { start, end } => {
            if rng.gen_bool(0.5) {
                *start = pick(rng, &INTS);
            } else {
                *end = pick(rng, &INTS);
            }
        }
        Op::Load { buffer, mask, other, .. } => match rng.gen_range(0..3) {
            0 => *buffer = pick(rng, &NUMBERS),
            1 => *mask = None,
            _ => *other = other.or(*mask),
        },
        Op::Store { buffer, .. } | Op::Atomic { buffer, .. } | Op::AtomicCas { buffer, .. } => *buffer = pick(rng, &NUMBERS),
        Op::Unary { op, .. } => *op = pick(rng, &UnaryOp::ALL),
        Op::Binary { op, .. } => *op = pick(rng, &BinaryOp::ALL),
        Op::For { init, .. } => {
            init.pop();
        }
        Op::If { then_block, else_block, .. } => std::mem::swap(then_block, else_block),
        Op::Yield { values } => {
            values.pop();
        }
        _ => {}
    }
}

fn mutate(p: &mut Program, rng: &mut StdRng) {
    match rng.gen_range(0..10) {
        // Retype a value.
        0 => {
            if p.values.is_empty() {
                return;
            }
            let target = rng.gen_range(0..p.values.len());
            let values: Vec<Type> = p.values.iter().map(|(h, ty)| if h.index() == target { mutate_type(ty, rng) } else { ty.clone() }).collect();
            p.values = values.into_iter().collect();
        }
        // Swap two handles.
        1 => {
            let mut hs = Vec::new();
            handles(&mut p.body, &mut hs);
            if hs.len() >= 2 {
                let (i, j) = (rng.gen_range(0..hs.len()), rng.gen_range(0..hs.len()));
                let (vi, vj) = (*hs[i], *hs[j]);
                *hs[i] = vj;
                *hs[j] = vi;
            }
        }
        // Point a handle past the arena.
        2 => {
            let len = p.values.len();
            let mut hs = Vec::new();
            handles(&mut p.body, &mut hs);
            if !hs.is_empty() {
                let i = rng.gen_range(0..hs.len());
                *hs[i] = Value::from_index(pick(rng, &[len, len + 1, len + 1000, u32::MAX as usize]));
            }
        }
        // Delete an instruction.
        3 => with_random_block(p, rng, &mut |b, rng| {
            if !b.insts.is_empty() {
                let i = rng.gen_range(0..b.insts.len());
                b.insts.remove(i);
            }
        }),
        // Duplicate an instruction.
        4 => with_random_block(p, rng, &mut |b, rng| {
            if !b.insts.is_empty() {
                let i = rng.gen_range(0..b.insts.len());
                let copy = b.insts[i].clone();
                let at = rng.gen_range(0..=b.insts.len());
                b.insts.insert(at, copy);
            }
        }),
        // Swap two instructions.
        5 => with_random_block(p, rng, &mut |b, rng| {
            if !b.insts.is_empty() {
                let (i, j) = (rng.gen_range(0..b.insts.len()), rng.gen_range(0..b.insts.len()));
                b.insts.swap(i, j);
            }
        }),
        // Axes, constants, buffer ids, combines.
        6 => with_random_block(p, rng, &mut |b, rng| {
            if !b.insts.is_empty() {
                let i = rng.gen_range(0..b.insts.len());
                mutate_numbers(&mut b.insts[i].op, rng);
            }
        }),
        // Results and block arguments.
        7 => with_random_block(p, rng, &mut |b, rng| {
            if rng.gen_bool(0.3) {
                if rng.gen_bool(0.5) {
                    b.args.pop();
                } else {
                    b.args.push(Value::from_index(rng.gen_range(0..64)));
                }
            } else if !b.insts.is_empty() {
                let i = rng.gen_range(0..b.insts.len());
                if rng.gen_bool(0.5) {
                    b.insts[i].results.pop();
                } else {
                    b.insts[i].results.push(Value::from_index(rng.gen_range(0..64)));
                }
            }
        }),
        // Program level: grid rank, parameters.
        8 => match rng.gen_range(0..4) {
            0 => p.grid_rank = pick(rng, &[0, 1, 2, 3, 4, u32::MAX]),
            1 if !p.params.is_empty() => {
                let i = rng.gen_range(0..p.params.len());
                p.params[i].kind = match rng.gen_range(0..4) {
                    0 => ParamKind::Scalar { dtype: pick(rng, &DType::ALL) },
                    1 => ParamKind::Buffer { dtype: pick(rng, &DType::ALL), access: Access::Read },
                    2 => ParamKind::Buffer { dtype: pick(rng, &DType::ALL), access: Access::Write },
                    _ => ParamKind::Buffer { dtype: pick(rng, &DType::ALL), access: Access::ReadWrite },
                };
            }
            2 if !p.params.is_empty() => {
                let i = rng.gen_range(0..p.params.len());
                p.params[i].name = pick(rng, &["", "x", "out", "n"]).to_string();
            }
            _ => {
                p.params.pop();
            }
        },
        // Move an instruction out of its block into the program body.
        _ => {
            let mut moved = None;
            with_random_block(p, rng, &mut |b, rng| {
                if !b.insts.is_empty() {
                    moved = Some(b.insts.remove(rng.gen_range(0..b.insts.len())));
                }
            });
            if let Some(inst) = moved {
                let at = rng.gen_range(0..=p.body.insts.len());
                p.body.insts.insert(at, inst);
            }
        }
    }
}

/// What later stages rely on after `verify` accepts: every handle indexes the arena and every
/// type is well formed. Panics (in the test) when the verifier let a broken program through.
fn accepted_program_is_sound(p: &Program) {
    let mut seen = 0;
    p.walk(&mut |inst| {
        for v in inst.op.operands().into_iter().chain(inst.results.iter().copied()) {
            let ty = p.ty(v);
            assert!(ty.shape.iter().all(|d| d.is_power_of_two()), "accepted a bad type {ty}");
            assert!(ty.numel() <= 1 << 20, "accepted a huge type {ty}");
            seen += 1;
        }
        for b in inst.op.blocks() {
            for &a in &b.args {
                p.ty(a);
            }
        }
    });
    let _ = seen;
}

#[test]
fn random_mutations_never_panic() {
    let mut rng = StdRng::seed_from_u64(0x7117_E5EE);
    let programs = valid_programs();
    let (mut total, mut rejected) = (0usize, 0usize);
    for base in &programs {
        for round in 0..1500 {
            let mut p = base.clone();
            for _ in 0..rng.gen_range(1..=3) {
                mutate(&mut p, &mut rng);
            }
            let result = catch_unwind(AssertUnwindSafe(|| verify(&p).map_err(|e| e.to_string())));
            let result = result.unwrap_or_else(|_| panic!("verify panicked on mutant {round} of `{}`:\n{p:#?}", base.name));
            total += 1;
            match result {
                Err(msg) => {
                    assert!(!msg.is_empty());
                    rejected += 1;
                }
                Ok(()) => {
                    if catch_unwind(AssertUnwindSafe(|| accepted_program_is_sound(&p))).is_err() {
                        panic!("verify accepted an unsound mutant {round} of `{}`:\n{p:#?}", base.name);
                    }
                }
            }
        }
    }
    // Most mutations break something; a verifier that accepts everything must fail here.
    assert!(rejected * 2 > total, "only {rejected} of {total} mutants were rejected");
}

#[test]
fn absurd_programs_never_panic() {
    let mut r = Raw::new();
    let huge = r.val(Type::tile(F32, vec![usize::MAX; 5]));
    let zero = r.val(Type::tile(I32, vec![0]));
    let empty_scalar = r.val(Type::scalar(I1));
    let mut programs = Vec::new();
    let ops = vec![
        Op::Arange { start: i64::MIN, end: i64::MAX },
        Op::Arange { start: i64::MAX, end: i64::MIN },
        Op::Reshape { x: huge },
        Op::Trans { x: huge, perm: vec![u32::MAX; 5] },
        Op::ExpandDims { x: zero, axis: u32::MAX },
        Op::Reduce { x: empty_scalar, axis: 0, combine: Combine::Custom(Block::default()) },
        Op::Dot { a: huge, b: zero, acc: empty_scalar, precision: InputPrecision::Tf32 },
        Op::Load { buffer: u32::MAX, offsets: huge, mask: Some(huge), other: Some(huge) },
        Op::Yield { values: vec![Value::from_index(usize::MAX)] },
    ];
    for op in ops {
        let values = r.values.clone();
        let mut p = Program { name: String::new(), params: vec![], grid_rank: 1, values, body: Block::default() };
        p.body.insts.push(Inst { op, results: vec![huge, zero, Value::from_index(1 << 31)], loc: Loc::default() });
        programs.push(p.clone());
        p.body.insts[0].results = vec![huge];
        programs.push(p);
    }
    for p in &programs {
        let result = catch_unwind(AssertUnwindSafe(|| verify(p).map(|_| ()).map_err(|e| e.to_string())));
        let result = result.unwrap_or_else(|_| panic!("verify panicked on {p:#?}"));
        assert!(result.is_err(), "accepted {p:#?}");
    }
}
