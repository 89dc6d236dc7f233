//! The text form: every op and enum variant round-trips through print and parse, parse errors say
//! where and what, and no input makes the parser panic.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tilekit_core::ir::*;
use tilekit_core::text::{parse, print, print_with, ParseError, PrintOptions};
use tilekit_core::{Access, Builder, DType, Scalar};

/// Asserts `parse(print(p)) == p` and that printing is a fixed point, with a readable diff.
#[track_caller]
fn assert_round_trip(p: &Program) {
    let text = print(p);
    let back = match parse(&text) {
        Ok(back) => back,
        Err(e) => panic!("the printed program does not parse: {e}\n{}", numbered(&text)),
    };
    if &back != p {
        let again = print(&back);
        panic!(
            "the program changed in a round trip\n--- printed\n{text}\n--- reprinted\n{again}\n--- first difference: {:?}",
            first_difference(p, &back)
        );
    }
    assert_eq!(print(&back), text, "printing is not a fixed point");
}

fn numbered(text: &str) -> String {
    text.lines().enumerate().map(|(i, l)| format!("{:4} {l}\n", i + 1)).collect()
}

fn first_difference(a: &Program, b: &Program) -> String {
    if a.name != b.name {
        return format!("name {:?} vs {:?}", a.name, b.name);
    }
    if a.params != b.params {
        return format!("params {:?} vs {:?}", a.params, b.params);
    }
    if a.grid_rank != b.grid_rank {
        return "grid rank".into();
    }
    if a.values != b.values {
        return format!("values {:?} vs {:?}", a.values, b.values);
    }
    let mut ia = Vec::new();
    let mut ib = Vec::new();
    a.walk(&mut |i| ia.push(i.clone()));
    b.walk(&mut |i| ib.push(i.clone()));
    for (x, y) in ia.iter().zip(&ib) {
        if x != y {
            return format!("{x:?}\n  vs\n{y:?}");
        }
    }
    "block structure".into()
}

/// Every op through the builder, so the program carries real locations and the builder's value
/// numbering (a `for` body before its results).
fn everything_program() -> Program {
    let k = Builder::new("everything");
    // One buffer per dtype and access.
    let bufs: Vec<_> = DType::ALL
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let access = [Access::Read, Access::Write, Access::ReadWrite][i % 3];
            k.buffer(format!("b_{}", d.name()), d, access)
        })
        .collect();
    let xf = k.input("xf", DType::F32);
    let xi = k.input("xi", DType::I32);
    let out = k.buffer("out", DType::F32, Access::ReadWrite);
    let outi = k.buffer("outi", DType::I32, Access::ReadWrite);
    let n = k.scalar("n", DType::I32);
    let _s = k.scalar("s", DType::I64);
    let pid = k.program_id(0);
    let _ = k.program_id(1);
    let nprog = k.num_programs(2);
    let offs = pid * 64 + k.arange(0, 64);
    let mask = offs.lt(n);
    let f = k.load_masked(xf, offs, mask, 0.0);
    let i = k.load(xi, offs);
    // Constants of every dtype, and casts to every dtype.
    for &d in DType::ALL.iter() {
        let c = if d == DType::I1 {
            k.constant(true, d)
        } else if d.is_float() {
            k.constant(1.5, d)
        } else {
            k.constant(7, d)
        };
        let _ = c.cast(DType::F32);
        let _ = f.cast(d);
    }
    for op in UnaryOp::ALL {
        let x = if op == UnaryOp::Not { i } else { f };
        let y = match op {
            UnaryOp::Neg => -x,
            UnaryOp::Not => !x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Exp2 => x.exp2(),
            UnaryOp::Log => x.log(),
            UnaryOp::Log2 => x.log2(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => x.rsqrt(),
            UnaryOp::Sin => x.sin(),
            UnaryOp::Cos => x.cos(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Erf => x.erf(),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::Round => x.round(),
        };
        k.store(out, offs, y.cast(DType::F32));
    }
    for op in BinaryOp::ALL {
        let (a, b) = if op.int_only() { (i, offs) } else { (f, f * 2.0) };
        let y = match op {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Rem => a % b,
            BinaryOp::And => a & b,
            BinaryOp::Or => a | b,
            BinaryOp::Xor => a ^ b,
            BinaryOp::Shl => a << b,
            BinaryOp::Shr => a >> b,
            BinaryOp::Max => a.maximum(b),
            BinaryOp::Min => a.minimum(b),
        };
        k.store(out, offs, y);
    }
    for pred in CmpPred::ALL {
        let c = match pred {
            CmpPred::Eq => f.eq(1.0),
            CmpPred::Ne => f.ne(1.0),
            CmpPred::Lt => f.lt(1.0),
            CmpPred::Le => f.le(1.0),
            CmpPred::Gt => f.gt(1.0),
            CmpPred::Ge => f.ge(1.0),
        };
        k.store(out, offs, k.select(c, f, -1.0));
    }
    k.store(out, offs, k.fma(f, f, 1.0));
    for op in AtomicOp::ALL {
        let old = match op {
            AtomicOp::Add => k.atomic_add(out, offs, f, Some(mask)),
            AtomicOp::Max => k.atomic_max(out, offs, f, None),
            AtomicOp::Min => k.atomic_min(outi, offs, i, Some(mask)),
            AtomicOp::Xchg => k.atomic_xchg(outi, offs, 3, None),
        };
        k.store(bufs[9], offs, old.cast(DType::F32));
    }
    let _ = k.atomic_cas(outi, offs, 0, 1, Some(mask));
    let _ = k.atomic_cas(outi, offs, i, offs, None);
    // Shapes.
    let m = k.arange(0, 16).expand_dims(1).broadcast_to(&[16, 8]);
    let t = m.trans();
    let p = k.arange(0, 8).reshape(&[2, 4]).expand_dims(0).permute(&[2, 0, 1]);
    let _ = k.full(&[4, 4], 2.5, DType::F16);
    let _ = k.zeros(&[8], DType::BF16);
    let _ = k.splat(nprog, &[2, 2]);
    // Reductions and scans with every combine.
    let mf = m.cast(DType::F32);
    for y in [mf.sum(0), mf.prod(1), mf.max(0), mf.min(1), mf.argmax(1), mf.argmin(0), mf.reduce(1, |a, b| a * b + a)] {
        let _ = y;
    }
    for y in [mf.cumsum(0), mf.cumprod(1), mf.cummax(0), mf.scan(1, true, |a, b| a.maximum(b)), mf.scan(0, false, |a, b| a + b)] {
        let _ = y;
    }
    let _ = t;
    let _ = p;
    // Dot inside a loop, loop inside an if inside a loop.
    let a = k.load(xf, k.arange(0, 16).expand_dims(1) * 16 + k.arange(0, 16).expand_dims(0));
    let acc0 = k.zeros(&[16, 16], DType::F32);
    let [acc, total] = k.for_range(0, n, 1, [acc0, k.constant(0.0, DType::F32)], |iv, [acc, total]| {
        let [acc2] = k.if_else(
            iv.lt(4),
            || {
                let [inner] = k.for_range(iv, 8, 2, [acc], |_, [x]| [a.dot(a, x)]);
                let inner = a.dot_tf32(a, inner);
                [inner]
            },
            || [acc],
        );
        k.if_then(iv.eq(0), || k.store(out, offs, f));
        [acc2, total + iv.cast(DType::F32)]
    });
    k.store(out, offs, total);
    let _ = acc.sum(0);
    let _ = k.for_range(pid, nprog, 1, [], |_, []| []);
    k.into_program_unchecked()
}

#[test]
fn every_op_and_variant_round_trips() {
    let p = everything_program();
    let text = print(&p);
    // The program really holds what the test claims to cover.
    let mut names = std::collections::BTreeSet::new();
    p.walk(&mut |i| {
        names.insert(i.op.name());
        if let Op::Reduce { combine, .. } | Op::Scan { combine, .. } = &i.op {
            names.insert(combine.name());
        }
    });
    for op in UnaryOp::ALL.map(|u| u.name()).iter().chain(BinaryOp::ALL.map(|b| b.name()).iter()).chain(AtomicOp::ALL.map(|a| a.name()).iter()) {
        assert!(names.contains(op), "{op} missing");
    }
    for op in [
        "arg",
        "program_id",
        "num_programs",
        "const",
        "arange",
        "splat",
        "broadcast",
        "expand_dims",
        "reshape",
        "trans",
        "cmp",
        "select",
        "fma",
        "cast",
        "load",
        "store",
        "atomic_cas",
        "reduce",
        "scan",
        "dot",
        "for",
        "if",
        "yield",
        "sum",
        "prod",
        "argmax",
        "argmin",
        "custom",
    ] {
        assert!(names.contains(op), "{op} missing");
    }
    for pred in CmpPred::ALL {
        assert!(text.contains(&format!("cmp {} ", pred.name())), "cmp {} missing", pred.name());
    }
    for d in DType::ALL {
        assert!(text.contains(&format!("buffer<{}, ", d.name())), "{d} missing");
    }
    for a in ["read>", "write>", "read_write>"] {
        assert!(text.contains(a));
    }
    assert!(text.contains(", reverse"));
    assert!(text.contains("loc(\""), "the builder's locations are printed");
    assert_round_trip(&p);
}

/// A tiny raw-IR builder for programs the builder would not make.
struct Raw {
    p: Program,
}

impl Raw {
    fn new(name: &str) -> Raw {
        Raw { p: Program { name: name.into(), params: vec![], grid_rank: 1, values: Arena::new(), body: Block::default() } }
    }
    fn val(&mut self, ty: Type) -> Value {
        self.p.values.append(ty)
    }
    fn inst(&mut self, op: Op, results: Vec<Value>) {
        self.p.body.insts.push(Inst { op, results, loc: Loc::default() })
    }
    fn konst(&mut self, value: Scalar, dtype: DType) -> Value {
        let v = self.val(Type::scalar(dtype));
        self.inst(Op::Const { value }, vec![v]);
        v
    }
}

#[test]
fn constants_keep_their_bits() {
    let mut r = Raw::new("constants");
    let floats = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        0.1,
        1.0 / 3.0,
        1e300,
        -1e-300,
        f64::MIN_POSITIVE,
        5e-324,
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        123456789.0,
        1e16,
        1e21,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        f64::from_bits(0xfff8_dead_beef_0001),
        f32::NAN as f64,
        f32::MAX as f64,
        half::f16::MAX.to_f64(),
    ];
    for x in floats {
        r.konst(Scalar::Float(x), DType::F32);
    }
    for i in [0, 1, -1, i64::MIN, i64::MAX, i32::MIN as i64, u32::MAX as i64] {
        r.konst(Scalar::Int(i), DType::I64);
    }
    r.konst(Scalar::Bool(true), DType::I1);
    r.konst(Scalar::Bool(false), DType::I1);
    // Kinds that do not fit their dtype still print as written (the verifier rejects them).
    r.konst(Scalar::Float(2.5), DType::I32);
    r.konst(Scalar::Int(3), DType::F16);
    r.konst(Scalar::Bool(true), DType::BF16);
    assert_round_trip(&r.p);
    let text = print(&r.p);
    assert!(text.contains("const nan : f32"));
    assert!(text.contains("const nan(0x7ff0000000000001) : f32"));
    assert!(text.contains("const -inf : f32"));
    assert!(text.contains("const -0.0 : f32"));
    assert!(text.contains("const -9223372036854775808 : i64"));
}

#[test]
fn odd_names_params_and_locations_round_trip() {
    let mut r = Raw::new("my kernel \"v2\"\n\t\\ é ☃ \u{1}");
    r.p.grid_rank = 3;
    r.p.params = vec![
        Param { name: "x".into(), kind: ParamKind::Buffer { dtype: DType::F32, access: Access::Read } },
        Param { name: "x".into(), kind: ParamKind::Buffer { dtype: DType::F16, access: Access::Write } },
        Param { name: "with space".into(), kind: ParamKind::Buffer { dtype: DType::U8, access: Access::ReadWrite } },
        Param { name: "n".into(), kind: ParamKind::Scalar { dtype: DType::U32 } },
        Param { name: "".into(), kind: ParamKind::Scalar { dtype: DType::I1 } },
        Param { name: "buffer".into(), kind: ParamKind::Buffer { dtype: DType::I8, access: Access::Read } },
    ];
    let off = r.val(Type::tile(DType::I32, [4]));
    r.inst(Op::Arange { start: -2, end: 2 }, vec![off]);
    let mut loads = Vec::new();
    // Duplicate names fall back to `#N`; a quoted name; a buffer id that names a scalar; one
    // past the end; a buffer called `buffer`.
    for buffer in [0, 1, 2, 3, 99, 5] {
        let v = r.val(Type::tile(DType::F32, [4]));
        r.inst(Op::Load { buffer, offsets: off, mask: None, other: None }, vec![v]);
        loads.push(v);
    }
    let c = r.konst(Scalar::Float(0.0), DType::F32);
    r.inst(Op::Load { buffer: 2, offsets: off, mask: None, other: Some(c) }, vec![]);
    r.inst(Op::Arg { param: u32::MAX }, vec![]);
    r.inst(Op::ProgramId { axis: 7 }, vec![]);
    r.inst(Op::Arange { start: i64::MIN, end: i64::MAX }, vec![]);
    r.inst(Op::Trans { x: off, perm: vec![] }, vec![]);
    r.inst(Op::Yield { values: vec![] }, vec![]);
    let files = ["src/kernels/a.rs", "C:\\path\\with \"quotes\"\n", "", "名前.rs"];
    for (i, inst) in r.p.body.insts.iter_mut().enumerate() {
        inst.loc = Loc::new(files[i % files.len()], i as u32 * 1000, u32::MAX - i as u32);
    }
    r.p.body.insts[2].loc = Loc::new("", 0, 5);
    assert_round_trip(&r.p);
    let text = print(&r.p);
    assert!(text.contains("#0["), "{text}");
    assert!(text.contains("#99["), "{text}");
    assert!(text.contains("\"with space\"["), "{text}");
    assert!(text.contains("buffer[%0]"), "{text}");
}

#[test]
fn arena_order_unused_values_and_block_arguments_round_trip() {
    // Values defined out of textual order, arena entries nothing defines, and block arguments in
    // places the builder never puts them.
    let mut r = Raw::new("arena");
    let unused_first = r.val(Type::tile(DType::F32, [2, 2]));
    let top_arg = r.val(Type::scalar(DType::I32));
    r.p.body.args = vec![top_arg];
    let then_arg = r.val(Type::scalar(DType::F32));
    let c = r.val(Type::scalar(DType::I1));
    let y = r.val(Type::scalar(DType::F32));
    let res = r.val(Type::scalar(DType::F32));
    let _unused_last = r.val(Type::tile(DType::BF16, [1]));
    let y_early = r.val(Type::scalar(DType::F32));
    // The `if` uses `%c`, defined after it in the text.
    r.inst(
        Op::If {
            cond: c,
            then_block: Block {
                args: vec![then_arg],
                insts: vec![Inst { op: Op::Yield { values: vec![then_arg] }, results: vec![], loc: Loc::default() }],
            },
            else_block: Block { args: vec![], insts: vec![Inst { op: Op::Yield { values: vec![y_early] }, results: vec![], loc: Loc::default() }] },
        },
        vec![res],
    );
    r.inst(Op::Const { value: Scalar::Bool(true) }, vec![c]);
    r.inst(Op::Const { value: Scalar::Float(1.0) }, vec![y_early]);
    // Several results on an op that has one, and none on one that has one.
    r.inst(Op::Binary { op: BinaryOp::Add, lhs: y_early, rhs: y_early }, vec![y]);
    r.inst(Op::Unary { op: UnaryOp::Exp, x: y }, vec![]);
    let _ = unused_first;
    assert_round_trip(&r.p);
    let text = print(&r.p);
    assert!(text.contains("unused %0: [2, 2]xf32"), "{text}");
    assert!(text.contains("unused %6: [1]xbf16"), "{text}");
    assert!(text.contains("body(%1: i32) {"), "{text}");
    assert!(text.contains("then(%2: f32) {"), "{text}");
}

#[test]
fn nested_regions_round_trip() {
    // for { if { for { reduce custom { } } } else { scan custom reverse { } } }
    let k = Builder::new("nested");
    let out = k.output("out", DType::F32);
    let x = k.load(out, k.arange(0, 8));
    let [r] = k.for_range(0, 4, 1, [x], |i, [acc]| {
        k.if_else(
            i.gt(1),
            || {
                let [y] = k.for_range(i, 8, 2, [acc], |j, [a]| {
                    let s = a.reduce(0, |p, q| (p + q) * 0.5);
                    [a + s + j.cast(DType::F32)]
                });
                [y]
            },
            || [acc.scan(0, true, |p, q| p.maximum(q) - q)],
        )
    });
    k.store(out, k.arange(0, 8), r);
    let p = k.into_program_unchecked();
    assert_round_trip(&p);
    let text = print(&p);
    assert!(text.contains("reduce custom"));
    assert!(text.contains("scan custom"));
    assert!(text.contains(", reverse : [8]xf32 combine("));
}

#[test]
fn without_locations_parses_to_unknown_locations() {
    let p = everything_program();
    let text = print_with(&p, &PrintOptions { locations: false });
    assert!(!text.contains("loc("));
    let back = parse(&text).unwrap();
    let mut stripped = p.clone();
    fn strip(b: &mut Block) {
        for inst in &mut b.insts {
            inst.loc = Loc::default();
            match &mut inst.op {
                Op::For { body, .. } => strip(body),
                Op::If { then_block, else_block, .. } => {
                    strip(then_block);
                    strip(else_block)
                }
                Op::Reduce { combine: Combine::Custom(b), .. } | Op::Scan { combine: Combine::Custom(b), .. } => strip(b),
                _ => {}
            }
        }
    }
    strip(&mut stripped.body);
    assert_eq!(back, stripped);
    assert_eq!(print_with(&back, &PrintOptions { locations: false }), text);
    assert_eq!(print(&p), p.to_string(), "Display is the full form");
    assert_eq!(PrintOptions::default(), PrintOptions { locations: true });
}

#[test]
fn hand_written_text_is_whitespace_and_comment_insensitive() {
    let text = r#"
        ; a comment before the program
        program   add ( x : buffer < f32 , read > ,out:buffer<f32,write>, n:i32 )grid 1{
          %0=arg 2:i32 ; the length
          %1 = program_id 0 : i32    loc( "a.rs" : 3 : 4 )
          %2 = arange 0,4:[4] x f32
          %3 = load x[%2] , mask %5 , other %4 : [ 4 ]xf32
          %4 = const -0.0 : f32
          %5 = cmp ge %2,%2:[4]xi1
          store out [ %2 ] , %3
        }
        ; and after it
    "#;
    let p = parse(text).unwrap();
    assert_eq!(p.name, "add");
    assert_eq!(p.params.len(), 3);
    assert_eq!(p.values.len(), 6);
    assert_eq!(p.body.insts[1].loc, Loc::new("a.rs", 3, 4));
    assert_eq!(p.body.insts[0].loc, Loc::default());
    assert_eq!(p.ty(Value::from_index(2)), &Type::tile(DType::F32, [4]));
    assert!(matches!(p.body.insts[3].op, Op::Load { buffer: 0, mask: Some(m), other: Some(o), .. } if m.index() == 5 && o.index() == 4));
    assert!(matches!(p.body.insts[6].op, Op::Store { buffer: 1, .. }));
    assert_round_trip(&p);
}

#[test]
fn broken_programs_print_without_panicking() {
    // A result handle outside the arena and a use of a value that does not exist.
    let mut r = Raw::new("broken");
    let v = r.val(Type::scalar(DType::F32));
    r.inst(Op::Unary { op: UnaryOp::Exp, x: Value::from_index(40) }, vec![v, Value::from_index(77)]);
    let text = print(&r.p);
    assert!(text.contains("%0, %77 = exp %40 : f32, ?"), "{text}");
    assert!(parse(&text).is_err());
    // A value defined twice prints; the parser refuses it.
    let mut r = Raw::new("twice");
    let v = r.val(Type::scalar(DType::I32));
    r.inst(Op::ProgramId { axis: 0 }, vec![v]);
    r.inst(Op::ProgramId { axis: 1 }, vec![v]);
    let e = parse(&print(&r.p)).unwrap_err();
    assert_eq!((e.line, e.col), (3, 3));
    assert!(e.message.contains("%0 is defined twice (first at line 2, column 3)"), "{e}");
}

/// (text, line, col, what the message must contain)
const BAD: &[(&str, usize, usize, &str)] = &[
    (
        "program k() grid 1 {\n  %0 = const 1 : i32\n  %1 = splat %0 : [64, 32]xi32\n  %2 = reshape %1 : ]\n}",
        4,
        21,
        "expected a type like `[64, 32]xf16`, found `]`",
    ),
    ("program k() grid 1 {\n  %0 = const 1 : f64\n}", 2, 18, "unknown dtype `f64` (the dtypes are i1, i8, u8"),
    ("program k() grid 1 {\n  %0 = frobnicate 1 : i32\n}", 2, 8, "unknown operation `frobnicate`"),
    ("program k() grid 1 {\n  %0 = const 1 : i32\n  %1 = add %0, %7 : i32\n}", 3, 16, "use of undefined value %7"),
    ("program k() grid 1 {\n  %0 = const 1 : i32\n  %0 = const 2 : i32\n}", 3, 3, "value %0 is defined twice (first at line 2, column 3)"),
    ("program k() grid 1 {\n  %0 = const 1 : i32\n  %2 = const 2 : i32\n}", 3, 3, "value %2 leaves a gap: %1 is never defined"),
    (
        "program k(x: buffer<f32, read>) grid 1 {\n  %0 = arange 0, 4 : [4]xi32\n  %1 = load y[%0] : [4]xf32\n}",
        3,
        13,
        "unknown buffer `y` (the buffers are `x`)",
    ),
    ("program k() grid 1 {\n  %0 = const 1 : i32\n", 3, 1, "expected an instruction or `}`, found the end of the input"),
    ("program k() grid 1 {\n  %0 = program_id 0\n}", 3, 1, "expected `:` and the result types, found `}`"),
    ("program k() grid 1 {\n  %0 = const 1 : i32 loc(\"a.rs:3:4)\n}", 2, 26, "unterminated string"),
    ("program k() grid 1 {\n  %0 = const 1 : i32\n  %1 = cmp less %0, %0 : i1\n}", 3, 12, "unknown comparison predicate `less`"),
    ("program k() grid 1 {\n  %0, %1 = const 1 : i32\n}", 2, 20, "`const` has 2 result(s) but 1 result type(s)"),
    ("program k() grid 1 {\n  %0 = program_id 99999999999 : i32\n}", 2, 19, "`99999999999` is too large for a grid axis"),
    ("kernel k() grid 1 {}", 1, 1, "expected `program` at the start of a program, found `kernel`"),
    ("program k(n: i32) grid 1 {\n  %0 = const 1 : i32\n  store n[%0], %0\n}", 3, 9, "`n` is a scalar parameter, not a buffer"),
    ("program k(x: buffer<f32, rw>) grid 1 {}", 1, 26, "unknown buffer access `rw`"),
    ("program k() grid 1 {\n  %0 = const 1 : i32\n  yield %0 $\n}", 3, 12, "unexpected character `$`"),
    ("program k() grid 1 {}\nprogram j() grid 1 {}", 2, 1, "expected the end of the input after the program's closing `}`, found `program`"),
    ("program k() grid 1 {\n  %0 = const 1 : [4]f32\n}", 2, 21, "expected `x` and a dtype after a tile shape"),
    ("program k() grid 1 {\n  %0 = const 1 : [4]xf8\n}", 2, 22, "unknown dtype `f8`"),
    (
        "program k() grid 1 {\n  %0 = const 0.0 : f32\n  %1 = splat %0 : [16, 16]xf32\n  %2 = dot %1, %1, %1, input_precision tf16 : [16, 16]xf32\n}",
        4,
        40,
        "unknown input precision `tf16` (the precisions are ieee, tf32)",
    ),
    (
        "program k() grid 1 {\n  %0 = const 0.0 : f32\n  %1 = splat %0 : [16, 16]xf32\n  %2 = dot %1, %1, %1, tf32 : [16, 16]xf32\n}",
        4,
        24,
        "expected `input_precision` (the only clause that may follow the accumulator), found `tf32`",
    ),
    ("program k() grid 1 {\n  %0 = const 0 : i32\n  %2 = for %0 to %0 step %0 iter(%0) : i32 {\n  }\n}", 3, 44, "expected `body` and the loop body"),
];

#[test]
fn parse_errors_say_where_and_what() {
    for (text, line, col, message) in BAD {
        match parse(text) {
            Ok(_) => panic!("parsed, should not have:\n{text}"),
            Err(ParseError { line: l, col: c, message: m }) => {
                assert!(
                    (l, c) == (*line, *col) && m.contains(message),
                    "for\n{}\nwanted line {line}, column {col}: {message}\n   got line {l}, column {c}: {m}",
                    numbered(text)
                );
            }
        }
    }
    // The Display form leads with the position.
    let e = parse(BAD[0].0).unwrap_err();
    assert_eq!(e.to_string(), "line 4, column 21: expected a type like `[64, 32]xf16`, found `]`");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let mut text = String::from("program k() grid 1 {\n%0 = const true : i1\n");
    for _ in 0..100_000 {
        text.push_str("if %0 then {\n");
    }
    let e = parse(&text).unwrap_err();
    assert_eq!(e.message, "blocks nest more than 100 levels deep");
    assert_eq!((e.line, e.col), (103, 12), "at the `{{` that goes one level too deep");
    // 100 levels still parse, print and parse back, in a thread with a modest stack.
    let mut text = String::from("program k() grid 1 {\n  %0 = const true : i1\n");
    for _ in 0..100 {
        text.push_str("if %0 then {\n");
    }
    for _ in 0..100 {
        text.push_str("yield } else { yield }\n");
    }
    text.push('}');
    let ok = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let p = parse(&text).unwrap();
            assert_eq!(parse(&print(&p)).unwrap(), p);
        })
        .unwrap()
        .join();
    assert!(ok.is_ok());
}

/// Splits printed text into tokens and separators, so mutations can act on whole tokens.
fn tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '%' || c == '_' || c == '.' || c == '-' {
            cur.push(c);
        } else {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            out.push(c.to_string());
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn mutate(rng: &mut StdRng, text: &str) -> String {
    const NOISE: &[&str] = &[
        "%",
        "%0",
        "%99999999999",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        ":",
        ",",
        "=",
        "\"",
        "\\",
        ";",
        "#",
        "-",
        "0x",
        "nan(",
        "for",
        "if",
        "then",
        "else",
        "yield",
        "body",
        "combine",
        "loc",
        "unused",
        "custom",
        "reduce",
        "-inf",
        "1e999",
        "18446744073709551616",
        "é",
        "\u{0}",
        "\n",
        "buffer<",
        "xf32",
        "[]x",
        "\"\\u{110000}\"",
    ];
    let mut toks = tokens(text);
    let n = rng.gen_range(1..=4);
    for _ in 0..n {
        if toks.is_empty() {
            toks.push(NOISE[rng.gen_range(0..NOISE.len())].to_string());
            continue;
        }
        let i = rng.gen_range(0..toks.len());
        match rng.gen_range(0..8) {
            0 => {
                toks.remove(i);
            }
            1 => {
                let t = toks[i].clone();
                toks.insert(i, t);
            }
            2 => {
                let j = rng.gen_range(0..toks.len());
                toks.swap(i, j);
            }
            3 => toks[i] = NOISE[rng.gen_range(0..NOISE.len())].to_string(),
            4 => toks.insert(i, NOISE[rng.gen_range(0..NOISE.len())].to_string()),
            5 => {
                // Delete, duplicate or swap single characters inside the token.
                let mut chars: Vec<char> = toks[i].chars().collect();
                if !chars.is_empty() {
                    let c = rng.gen_range(0..chars.len());
                    match rng.gen_range(0..3) {
                        0 => {
                            chars.remove(c);
                        }
                        1 => chars.insert(c, chars[c]),
                        _ => {
                            let d = rng.gen_range(0..chars.len());
                            chars.swap(c, d);
                        }
                    }
                }
                toks[i] = chars.into_iter().collect();
            }
            6 => {
                // Cut the text short.
                toks.truncate(i);
            }
            _ => {
                let j = rng.gen_range(i..toks.len());
                let span: Vec<String> = toks[i..=j].to_vec();
                let at = rng.gen_range(0..toks.len());
                toks.splice(at..at, span);
            }
        }
    }
    toks.concat()
}

#[test]
fn random_mutations_never_panic() {
    let sources = [print(&everything_program()), {
        let mut r = Raw::new("small \"q\"");
        let a = r.konst(Scalar::Float(f64::from_bits(0x7ff0_0000_0000_0001)), DType::F32);
        r.inst(Op::Yield { values: vec![a] }, vec![]);
        print(&r.p)
    }];
    let mut rng = StdRng::seed_from_u64(0x7E47);
    let mut parsed = 0;
    let mut failed = 0;
    for round in 0..6000 {
        let src = &sources[round % sources.len()];
        // The big program is slow to mutate many times over; cut a random window of it.
        let text = if src.len() > 4000 && rng.gen_bool(0.8) {
            let lines: Vec<&str> = src.lines().collect();
            let a = rng.gen_range(0..lines.len());
            let b = (a + rng.gen_range(1..40)).min(lines.len());
            let mut t = lines[0].to_string() + "\n";
            t.push_str(&lines[a..b].join("\n"));
            t.push_str("\n}\n");
            t
        } else {
            src.clone()
        };
        let mutated = mutate(&mut rng, &text);
        let result = std::panic::catch_unwind(|| parse(&mutated));
        match result {
            Ok(Ok(p)) => {
                parsed += 1;
                // Whatever parses must print and parse back to itself.
                let again =
                    std::panic::catch_unwind(|| print(&p)).unwrap_or_else(|_| panic!("printing panicked on a parsed program from\n{mutated}"));
                assert_eq!(parse(&again).as_ref(), Ok(&p), "re-parse changed the program from\n{mutated}");
            }
            Ok(Err(e)) => {
                failed += 1;
                assert!(e.line >= 1 && e.col >= 1 && !e.message.is_empty());
            }
            Err(_) => panic!("parse panicked on:\n{mutated}"),
        }
    }
    // The mutations hit both sides: some texts still parse, most do not.
    assert!(parsed > 50 && failed > 1000, "parsed {parsed}, failed {failed}");
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut rng = StdRng::seed_from_u64(99);
    let alphabet: Vec<char> = "%0123456789-.exf[](){}<>,:=#;\"\\ \n\tabcdiloprsuvy_é".chars().collect();
    for _ in 0..3000 {
        let len = rng.gen_range(0..120);
        let mut s: String = "program k() grid 1 {".into();
        s.extend((0..len).map(|_| alphabet[rng.gen_range(0..alphabet.len())]));
        assert!(std::panic::catch_unwind(|| parse(&s)).is_ok(), "parse panicked on {s:?}");
    }
}

#[test]
fn the_module_doc_example_parses_and_is_printer_output() {
    let src = include_str!("../src/text.rs");
    let example: String = src
        .lines()
        .skip_while(|l| !l.starts_with("//! ```text"))
        .skip(1)
        .take_while(|l| !l.starts_with("//! ```"))
        .map(|l| format!("{}\n", l.strip_prefix("//! ").unwrap_or("")))
        .collect();
    assert!(example.starts_with("program "), "{example}");
    let p = parse(&example).unwrap_or_else(|e| panic!("{e}\n{}", numbered(&example)));
    assert_eq!(print(&p), example);
}
