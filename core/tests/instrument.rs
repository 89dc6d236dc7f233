//! `device_assert` in the builder, verifier and interpreter, and the checked-launch pass
//! (`instrument`): the program it makes, its sites, and how a fault record reads back. The runs
//! of checked programs on every device are in the tilekit crate's tests/checked.rs.

use tilekit_core::instrument::{instrument, FaultKind, InstrumentError, SiteKind, FAULT_WORDS};
use tilekit_core::interp::{run, Arg, InterpError};
use tilekit_core::ir::{Combine, Op, ParamKind};
use tilekit_core::verify::VerifyErrorKind;
use tilekit_core::{text, Builder, DType, HostBuffer, Program, Scalar};

/// `y = x` over 16 lanes with `device_assert(x != 0)`.
fn asserting() -> (Program, u32) {
    let k = Builder::new("nonzero");
    let (x, y) = (k.input("x", DType::I32), k.output("y", DType::I32));
    let offs = k.arange(0, 16);
    let v = k.load(x, offs);
    #[rustfmt::skip]
    let line = { k.device_assert(v.ne(0), "x is nonzero"); line!() };
    k.store(y, offs, v);
    (k.finish().unwrap(), line)
}

#[test]
fn a_failed_assert_names_the_lowest_failing_lane() {
    let (p, line) = asserting();
    let x = HostBuffer::from_slice(&[5i32, 3, 9, 0, 7, 0, 1, 2, 8, 4, 6, 3, 2, 1, 9, 7]);
    let y = HostBuffer::zeros(DType::I32, 16);
    let err = run(&p, [1, 1, 1], &[Arg::Buffer(&x), Arg::Buffer(&y)]).unwrap_err();
    let InterpError::AssertFailed { loc, pid, lane, message } = &err else { panic!("{err}") };
    assert_eq!((loc.line, *pid, *lane, message.as_str()), (line, [0, 0, 0], 3, "x is nonzero"));
    assert!(loc.file.ends_with("instrument.rs"), "{loc}");
    let msg = err.to_string();
    assert!(msg.starts_with("`device_assert` at ") && msg.ends_with("lane 3: assertion failed: x is nonzero"), "{msg}");

    // Where it holds, nothing happens.
    let x = HostBuffer::from_slice(&(1..=16).collect::<Vec<i32>>());
    run(&p, [1, 1, 1], &[Arg::Buffer(&x), Arg::Buffer(&y)]).unwrap();
    assert_eq!(y.to_vec::<i32>().unwrap(), (1..=16).collect::<Vec<i32>>());
}

#[test]
fn a_scalar_assert_and_its_text_form() {
    let k = Builder::new("scalar");
    let n = k.scalar("n", DType::I32);
    k.device_assert(n.gt(0), "n is positive, \"always\"");
    let p = k.finish().unwrap();
    let printed = text::print(&p);
    assert!(printed.contains(r#"device_assert %2, "n is positive, \"always\"""#), "{printed}");
    assert_eq!(text::parse(&printed).unwrap(), p);
    let err = run(&p, [2, 1, 1], &[Arg::Scalar(Scalar::Int(0))]).unwrap_err();
    assert!(matches!(err, InterpError::AssertFailed { lane: 0, .. }), "{err}");
    run(&p, [2, 1, 1], &[Arg::Scalar(Scalar::Int(3))]).unwrap();
}

#[test]
fn the_verifier_checks_asserts() {
    // The condition is i1.
    let k = Builder::new("bad");
    let x = k.input("x", DType::I32);
    let v = k.load(x, k.arange(0, 8));
    k.device_assert(v, "not a mask");
    let e = k.finish().unwrap_err();
    assert_eq!(e.op, "device_assert");
    assert!(matches!(e.kind, VerifyErrorKind::WrongDType { found: DType::I32, .. }), "{e}");

    // Not inside a combine function, which could name no lane.
    let k = Builder::new("combine");
    let x = k.input("x", DType::F32);
    let v = k.load(x, k.arange(0, 8));
    v.reduce(0, |a, b| {
        k.device_assert(a.ge(0.0), "never negative");
        a + b
    });
    let e = k.finish().unwrap_err();
    assert!(matches!(e.kind, VerifyErrorKind::ImpureCombine { .. }), "{e}");

    // A message with no quotes does not parse.
    let bad = "program p(n: i32) grid 1 {\n  %0 = arg 0 : i32\n  %1 = cmp gt %0, %0 : i1\n  device_assert %1, oops\n}\n";
    let e = text::parse(bad).unwrap_err();
    assert!(e.message.contains("quoted string") && e.line == 4, "{e}");
}

#[test]
fn the_checked_program_takes_a_record_and_the_lengths() {
    let k = Builder::new("mixed");
    // A parameter already called `faults`: the record takes another name.
    let x = k.input("faults", DType::F32);
    let w = k.input("w", DType::F32);
    let y = k.output("y", DType::F32);
    let n = k.scalar("n", DType::I32);
    let offs = k.arange(0, 32);
    let v = k.load_masked(x, offs, offs.lt(n), 0.0) + k.load(w, offs.cast(DType::I64));
    let q = offs / (offs + 1) + offs % 3;
    k.store(y, offs, v + q.cast(DType::F32));
    k.device_assert(v.ge(0.0), "v is not negative");
    let p = k.finish().unwrap();
    let c = instrument(&p).unwrap();

    // The original parameters, the record, then one length per buffer: i64 for the buffer
    // indexed with i64 offsets, u32 for the rest.
    let params: Vec<(&str, &ParamKind)> = c.program.params.iter().map(|p| (p.name.as_str(), &p.kind)).collect();
    assert_eq!(params.len(), 4 + 1 + 3);
    assert_eq!(c.fault_param, 4);
    assert_eq!(params[4].0, "faults_1");
    assert_eq!(
        params[5..].iter().map(|(n, k)| format!("{n}: {k:?}")).collect::<Vec<_>>(),
        ["faults_len: Scalar { dtype: U32 }", "w_len: Scalar { dtype: I64 }", "y_len: Scalar { dtype: U32 }"]
    );
    assert_eq!(
        c.lengths.iter().map(|l| (l.param, l.buffer, l.dtype)).collect::<Vec<_>>(),
        [(5, 0, DType::U32), (6, 1, DType::I64), (7, 2, DType::U32)]
    );
    assert_eq!(c.lengths[0].value(7), Scalar::Int(7));
    assert_eq!(c.lengths[0].value(1 << 40), Scalar::Int(u32::MAX as i64));
    assert_eq!(c.lengths[1].value(1 << 40), Scalar::Int(1 << 40));

    // One site per access, division, remainder and assert, in program order.
    let kinds: Vec<String> = c
        .sites
        .iter()
        .map(|s| match &s.kind {
            SiteKind::OutOfBounds { name, offsets, .. } => format!("{} {name} {offsets}", s.op),
            other => format!("{} {other:?}", s.op),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "load faults i32",
            "load w i64",
            "div DivisionByZero",
            "rem DivisionByZero",
            "store y i32",
            "device_assert Assert { message: \"v is not negative\" }"
        ]
    );

    // No assert is left; it verifies (instrument checks) and reads back from its text.
    let mut asserts = 0;
    c.program.walk(&mut |i| asserts += matches!(i.op, Op::DeviceAssert { .. }) as usize);
    assert_eq!(asserts, 0);
    assert_eq!(text::parse(&text::print(&c.program)).unwrap(), c.program);
}

#[test]
fn combine_functions_are_left_as_written() {
    let k = Builder::new("combine_div");
    let x = k.input("x", DType::I32);
    let y = k.output("y", DType::I32);
    let v = k.load(x, k.arange(0, 8));
    let r = v.reduce(0, |a, b| a / b + b);
    k.store(y, k.program_id(0), r);
    let p = k.finish().unwrap();
    let c = instrument(&p).unwrap();
    let combine = |p: &Program| {
        let mut found = None;
        p.walk(&mut |i| {
            if let Op::Reduce { combine: Combine::Custom(b), .. } = &i.op {
                found = Some(b.clone());
            }
        });
        found.unwrap()
    };
    assert_eq!(combine(&c.program), combine(&p));
    // The load and the scalar store are still checked.
    assert_eq!(c.sites.len(), 2);
}

#[test]
fn an_invalid_program_is_refused() {
    let k = Builder::new("bad");
    let x = k.input("x", DType::F32);
    k.store(x, k.arange(0, 4), 1.0);
    let e = instrument(&k.into_program_unchecked()).unwrap_err();
    assert!(matches!(e, InstrumentError::Verify { .. }), "{e}");
    assert!(e.to_string().contains("`store`"), "{e}");
}

/// The checked program on the interpreter: a record that stays zero where nothing faults, and
/// one that reads back as the interpreter's own error where a lane does.
#[test]
fn records_read_back_as_the_interpreters_errors() {
    let k = Builder::new("shifts");
    let x = k.input("x", DType::I64);
    let y = k.output("y", DType::I64);
    let d = k.scalar("d", DType::I64);
    let offs = k.program_id(0) * 8 + k.arange(0, 8);
    let v = k.load(x, offs.cast(DType::I64) + d);
    k.store(y, offs, v << (v & 63));
    let p = k.finish().unwrap();
    let c = instrument(&p).unwrap();
    let run_checked = |xs: &[i64], d: i64| {
        let x = HostBuffer::from_slice(xs);
        let (y, y_plain) = (HostBuffer::zeros(DType::I64, 16), HostBuffer::zeros(DType::I64, 16));
        let record = HostBuffer::zeros(DType::I32, FAULT_WORDS);
        let lens = [x.len(), y.len()];
        let d = Arg::Scalar(Scalar::Int(d));
        let mut args = vec![Arg::Buffer(&x), Arg::Buffer(&y), d, Arg::Buffer(&record)];
        args.extend(c.lengths.iter().map(|l| Arg::Scalar(l.value(lens[l.buffer as usize]))));
        run(&c.program, [2, 1, 1], &args).unwrap();
        let fault = c.fault(&record.to_vec::<i32>().unwrap(), |b| lens[b as usize]).unwrap();
        let plain = run(&p, [2, 1, 1], &[Arg::Buffer(&x), Arg::Buffer(&y_plain), d]);
        (fault, plain, y.to_vec::<i64>().unwrap(), y_plain.to_vec::<i64>().unwrap())
    };
    // Program 0's lanes 0..3 read x[-3..0): the first is lane 0, offset -3 (an i64 negative).
    let xs: Vec<i64> = (0..16).map(|i| 1 + 7 * i).collect();
    let (fault, plain, _, _) = run_checked(&xs, -3);
    let fault = fault.expect("a fault");
    assert_eq!((fault.pid, fault.lane), ([0, 0, 0], 0));
    assert_eq!(fault.kind, FaultKind::OutOfBounds { offset: -3, buffer: "x".into(), len: 16 });
    assert_eq!(fault.to_string(), plain.unwrap_err().to_string());

    // In bounds: no fault, the same outputs as the program as written.
    let xs: Vec<i64> = (0..19).map(|i| 3 + 5 * i).collect();
    let (fault, plain, ys, ys_plain) = run_checked(&xs, 3);
    assert!(fault.is_none() && plain.is_ok());
    let want: Vec<i64> = (0..16).map(|i| xs[i + 3] << (xs[i + 3] & 63)).collect();
    assert_eq!(ys, want);
    assert_eq!(ys_plain, want);
}

#[test]
fn malformed_records_are_errors() {
    let (p, _) = asserting();
    let c = instrument(&p).unwrap();
    assert_eq!(c.fault(&[0; FAULT_WORDS], |_| 16).unwrap(), None);
    let e = c.fault(&[1, 0, 0], |_| 16).unwrap_err();
    assert!(matches!(e, InstrumentError::RecordSize { got: 3, .. }), "{e}");
    let mut record = [0; FAULT_WORDS];
    record[0] = 99;
    let e = c.fault(&record, |_| 16).unwrap_err();
    assert!(matches!(e, InstrumentError::RecordSite { site: 98, .. }), "{e}");
    // Program (7, 0, 0), lane 5 of the assert (site 1, between the load and the store).
    record[..5].copy_from_slice(&[2, 7, 0, 0, 5]);
    let f = c.fault(&record, |_| 16).unwrap().unwrap();
    assert_eq!((f.op.as_str(), f.pid, f.lane), ("device_assert", [7, 0, 0], 5));
    assert_eq!(f.kind, FaultKind::AssertFailed { message: "x is nonzero".into() });
}
