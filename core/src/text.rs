//! The text form of tile programs: a printer and a parser with `parse(&print(&p)) == Ok(p)`.
//!
//! The form holds a program exactly, arena included, so tests and bug reports can carry programs
//! as text. It reads like MLIR or cranelift IR, and names match the code ([`Op::name`],
//! [`Combine::name`], [`CmpPred::name`], [`DType::name`], [`Access::name`]):
//!
//! ```text
//! program vector_add(x: buffer<f32, read>, out: buffer<f32, write>, n: i32) grid 1 {
//!   %0 = arg 2 : i32                                      loc("src/kernels/vector_add.rs":14:15)
//!   %1 = program_id 0 : i32
//!   %2 = arange 0, 1024 : [1024]xi32
//!   %3 = splat %1 : [1024]xi32
//!   %4 = add %3, %2 : [1024]xi32
//!   %5 = splat %0 : [1024]xi32
//!   %6 = cmp lt %4, %5 : [1024]xi1
//!   %7 = const 0.0 : f32
//!   %8 = splat %7 : [1024]xf32
//!   %9 = load x[%4], mask %6, other %8 : [1024]xf32
//!   store out[%4], %9, mask %6
//!   %12 = reduce custom %9, axis 0 : f32 combine(%10: f32, %11: f32) {
//!     %13 = max %10, %11 : f32
//!     yield %13
//!   }
//!   %17, %18 = for %1 to %0 step %1 iter(%7, %12) : f32, f32 body(%14: i32, %15: f32, %16: f32) {
//!     yield %16, %15
//!   }
//!   %19 = if %6 : f32 then {
//!     yield %7
//!   } else {
//!     yield %12
//!   }
//!   device_assert %6, "offsets below n"
//! }
//! ```
//!
//! - `%N` is the value's index in the program's arena; the parser puts each value back at exactly
//!   that index. Indices need not appear in textual order (the builder allocates a `for` body's
//!   arguments and values before the loop's results), but every index from `%0` up must be
//!   defined exactly once, by an instruction result, a block argument, or an `unused` line (arena
//!   entries no instruction defines any more, as a dead-code pass leaves them).
//! - Every result is typed after `:` (`f32`, `[64, 32]xf16`), so the arena can be rebuilt without
//!   re-deriving types.
//! - Buffer operands are written by parameter name (`x[%4]`); `#N` names parameter `N` by index,
//!   which the printer uses only where a name would not read back to the same parameter.
//! - Names that are not identifiers are quoted (`program "my kernel"(...)`).
//! - Float constants print as the shortest text that reads back to the same bits; `nan` is the
//!   canonical NaN and `nan(0x7ff0000000000001)` any other bit pattern.
//! - `loc("file":line:col)` ends an instruction (after its closing brace for `for`, `if` and custom
//!   combines); without it the location is [`Loc::default`].
//! - `;` starts a comment that runs to the end of the line; whitespace never matters.
//!
//! The parser checks syntax, names and value numbering only: the verifier ([`crate::verify`])
//! checks the rest. It never panics, whatever the input.

use std::collections::BTreeMap;
use std::fmt;

use crate::dtype::{DType, Scalar};
use crate::ir::*;

/// A syntax or naming error: where (1-based line and column, counted in characters) and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {col}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// What the printer writes besides the program itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrintOptions {
    /// Source locations (`loc("file":line:col)`). Without them the text is shorter but parses
    /// back with unknown locations.
    pub locations: bool,
}

impl Default for PrintOptions {
    /// The full form, the one [`print()`] writes.
    fn default() -> Self {
        PrintOptions { locations: true }
    }
}

/// The full text form, locations included; [`parse`] reads it back to an equal program.
pub fn print(program: &Program) -> String {
    print_with(program, &PrintOptions::default())
}

/// The text form with `options`.
pub fn print_with(program: &Program, options: &PrintOptions) -> String {
    let mut p = Printer { p: program, opts: options, out: String::new(), buffer_refs: buffer_refs(program) };
    p.program();
    p.out
}

impl fmt::Display for Program {
    /// The full text form ([`print()`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print(self))
    }
}

// ---------------------------------------------------------------------------------------------
// Printer
// ---------------------------------------------------------------------------------------------

/// Locations start at this column when the instruction leaves room, so they read as a margin.
const LOC_COLUMN: usize = 56;

struct Printer<'a> {
    p: &'a Program,
    opts: &'a PrintOptions,
    out: String,
    /// How each parameter is written as a buffer operand.
    buffer_refs: Vec<String>,
}

/// The spelling of parameter `i` as a buffer operand: its name when that name reads back to `i`
/// (a buffer parameter with a unique name), otherwise `#i`.
fn buffer_refs(p: &Program) -> Vec<String> {
    p.params
        .iter()
        .enumerate()
        .map(|(i, param)| {
            let unique = p.params.iter().filter(|q| q.name == param.name).count() == 1;
            if unique && matches!(param.kind, ParamKind::Buffer { .. }) {
                name_text(&param.name)
            } else {
                format!("#{i}")
            }
        })
        .collect()
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A name as an identifier when it is one, otherwise as a quoted string.
fn name_text(s: &str) -> String {
    if is_ident(s) {
        s.to_string()
    } else {
        quoted(s)
    }
}

fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A constant in a form that reads back to the same [`Scalar`], bit for bit.
fn scalar_text(s: Scalar) -> String {
    match s {
        Scalar::Float(x) if x.is_nan() && x.to_bits() != f64::NAN.to_bits() => {
            format!("nan(0x{:016x})", x.to_bits())
        }
        // Display writes `nan`, `inf`, `-inf`, and otherwise the shortest round-tripping text,
        // always with a `.` or an exponent so it cannot be mistaken for an integer.
        s => s.to_string(),
    }
}

fn value_text(v: Value) -> String {
    format!("%{}", v.index())
}

fn values_text(vs: &[Value]) -> String {
    vs.iter().map(|&v| value_text(v)).collect::<Vec<_>>().join(", ")
}

fn loc_text(loc: &Loc) -> String {
    format!("loc({}:{}:{})", quoted(&loc.file), loc.line, loc.col)
}

impl Printer<'_> {
    fn ty(&self, v: Value) -> String {
        // A handle outside the arena (a broken program) still prints; `?` will not parse back.
        self.p.values.get(v).map_or_else(|| "?".to_string(), |t| t.to_string())
    }

    fn args_text(&self, args: &[Value]) -> String {
        args.iter().map(|&v| format!("{}: {}", value_text(v), self.ty(v))).collect::<Vec<_>>().join(", ")
    }

    fn program(&mut self) {
        let p = self.p;
        let params: Vec<String> = p
            .params
            .iter()
            .map(|param| {
                let ty = match &param.kind {
                    ParamKind::Buffer { dtype, access } => format!("buffer<{dtype}, {}>", access.name()),
                    ParamKind::Scalar { dtype } => dtype.to_string(),
                };
                format!("{}: {ty}", name_text(&param.name))
            })
            .collect();
        self.out.push_str(&format!("program {}({}) grid {}", name_text(&p.name), params.join(", "), p.grid_rank));
        if !p.body.args.is_empty() {
            let args = self.args_text(&p.body.args);
            self.out.push_str(&format!(" body({args})"));
        }
        self.out.push_str(" {\n");
        self.block_insts(&p.body, 1);
        for v in self.unused_values() {
            let line = format!("  unused {}", self.args_text(&[v]));
            self.out.push_str(&line);
            self.out.push('\n');
        }
        self.out.push_str("}\n");
    }

    /// Arena entries that no instruction result and no block argument defines.
    fn unused_values(&self) -> Vec<Value> {
        fn mark(b: &Block, defined: &mut [bool]) {
            fn set(defined: &mut [bool], vs: &[Value]) {
                for v in vs {
                    if let Some(d) = defined.get_mut(v.index()) {
                        *d = true;
                    }
                }
            }
            set(defined, &b.args);
            for inst in &b.insts {
                set(defined, &inst.results);
                for nested in inst.op.blocks() {
                    mark(nested, defined);
                }
            }
        }
        let mut defined = vec![false; self.p.values.len()];
        mark(&self.p.body, &mut defined);
        defined.iter().enumerate().filter(|(_, &d)| !d).map(|(i, _)| Value::from_index(i)).collect()
    }

    fn block_insts(&mut self, b: &Block, depth: usize) {
        for inst in &b.insts {
            self.inst(inst, depth);
        }
    }

    /// Writes `line` and, when asked for, the location in the margin.
    fn finish_line(&mut self, line: String, loc: &Loc) {
        self.out.push_str(&line);
        if self.opts.locations && *loc != Loc::default() {
            let width = line.chars().count();
            let pad = if width + 2 <= LOC_COLUMN { LOC_COLUMN - width } else { 2 };
            self.out.extend(std::iter::repeat(' ').take(pad));
            self.out.push_str(&loc_text(loc));
        }
        self.out.push('\n');
    }

    fn nested_block(&mut self, b: &Block, depth: usize) {
        self.block_insts(b, depth + 1);
    }

    fn inst(&mut self, inst: &Inst, depth: usize) {
        let indent = "  ".repeat(depth);
        let mut line = indent.clone();
        if !inst.results.is_empty() {
            line.push_str(&values_text(&inst.results));
            line.push_str(" = ");
        }
        line.push_str(&self.op_head(&inst.op));
        if !inst.results.is_empty() {
            let types: Vec<String> = inst.results.iter().map(|&v| self.ty(v)).collect();
            line.push_str(" : ");
            line.push_str(&types.join(", "));
        }
        let region = |this: &Self, keyword: &str, b: &Block, always_args: bool| -> String {
            if always_args || !b.args.is_empty() {
                format!(" {keyword}({}) {{", this.args_text(&b.args))
            } else {
                format!(" {keyword} {{")
            }
        };
        match &inst.op {
            Op::For { body, .. } => {
                line.push_str(&region(self, "body", body, true));
                self.out.push_str(&line);
                self.out.push('\n');
                self.nested_block(body, depth);
                line = format!("{indent}}}");
            }
            Op::If { then_block, else_block, .. } => {
                line.push_str(&region(self, "then", then_block, false));
                self.out.push_str(&line);
                self.out.push('\n');
                self.nested_block(then_block, depth);
                line = format!("{indent}}}{}", region(self, "else", else_block, false));
                self.out.push_str(&line);
                self.out.push('\n');
                self.nested_block(else_block, depth);
                line = format!("{indent}}}");
            }
            Op::Reduce { combine: Combine::Custom(b), .. } | Op::Scan { combine: Combine::Custom(b), .. } | Op::ReduceTuple { combine: b, .. } => {
                line.push_str(&region(self, "combine", b, true));
                self.out.push_str(&line);
                self.out.push('\n');
                self.nested_block(b, depth);
                line = format!("{indent}}}");
            }
            _ => {}
        }
        self.finish_line(line, &inst.loc);
    }

    fn buf(&self, id: BufferId) -> String {
        self.buffer_refs.get(id as usize).cloned().unwrap_or_else(|| format!("#{id}"))
    }

    /// The op's name and operands, without results, types or nested blocks.
    fn op_head(&self, op: &Op) -> String {
        let v = |x: &Value| value_text(*x);
        let mask = |m: &Option<Value>| m.map_or(String::new(), |m| format!(", mask {}", value_text(m)));
        let name = op.name();
        match op {
            Op::Arg { param } => format!("{name} {param}"),
            Op::ProgramId { axis } | Op::NumPrograms { axis } => format!("{name} {axis}"),
            Op::Const { value } => format!("{name} {}", scalar_text(*value)),
            Op::Arange { start, end } => format!("{name} {start}, {end}"),
            Op::Splat { x } | Op::Broadcast { x } | Op::Reshape { x } | Op::Cast { x } | Op::Unary { x, .. } => {
                format!("{name} {}", v(x))
            }
            Op::ExpandDims { x, axis } => format!("{name} {}, axis {axis}", v(x)),
            Op::Trans { x, perm } => {
                let perm: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
                format!("{name} {}, perm [{}]", v(x), perm.join(", "))
            }
            Op::Binary { lhs, rhs, .. } => format!("{name} {}, {}", v(lhs), v(rhs)),
            Op::Cmp { pred, lhs, rhs } => format!("{name} {} {}, {}", pred.name(), v(lhs), v(rhs)),
            Op::Select { cond: a, on_true: b, on_false: c } | Op::Fma { a, b, c } | Op::Dot { a, b, acc: c, precision: InputPrecision::Ieee } => {
                format!("{name} {}, {}, {}", v(a), v(b), v(c))
            }
            Op::Dot { a, b, acc, precision } => format!("{name} {}, {}, {}, input_precision {}", v(a), v(b), v(acc), precision.name()),
            Op::Load { buffer, offsets, mask: m, other } => {
                let other = other.map_or(String::new(), |o| format!(", other {}", value_text(o)));
                format!("{name} {}[{}]{}{other}", self.buf(*buffer), v(offsets), mask(m))
            }
            Op::Store { buffer, offsets, value, mask: m } | Op::Atomic { buffer, offsets, value, mask: m, .. } => {
                format!("{name} {}[{}], {}{}", self.buf(*buffer), v(offsets), v(value), mask(m))
            }
            Op::AtomicCas { buffer, offsets, cmp, value, mask: m } => {
                format!("{name} {}[{}], {}, {}{}", self.buf(*buffer), v(offsets), v(cmp), v(value), mask(m))
            }
            Op::Reduce { x, axis, combine } => format!("{name} {} {}, axis {axis}", combine.name(), v(x)),
            Op::ReduceTuple { xs, axis, .. } => format!("{name} {}, axis {axis}", values_text(xs)),
            Op::Scan { x, axis, combine, reverse } => {
                let rev = if *reverse { ", reverse" } else { "" };
                format!("{name} {} {}, axis {axis}{rev}", combine.name(), v(x))
            }
            Op::For { lower, upper, step, init, .. } => {
                let iter = if init.is_empty() { String::new() } else { format!(" iter({})", values_text(init)) };
                format!("{name} {} to {} step {}{iter}", v(lower), v(upper), v(step))
            }
            Op::If { cond, .. } => format!("{name} {}", v(cond)),
            Op::Yield { values } if values.is_empty() => name.to_string(),
            Op::Yield { values } => format!("{name} {}", values_text(values)),
            Op::DeviceAssert { cond, message } => format!("{name} {}, {}", v(cond), quoted(message)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `%N`, the digits as written.
    Value(String),
    /// An integer literal as written: decimal with an optional `-`, or `0x` hexadecimal.
    Int(String),
    /// A float literal as written (a `.` or an exponent), or `-inf`.
    Float(String),
    Str(String),
    Punct(char),
    Eof,
    /// A lexical error; the parser reports it when it reaches it, so earlier syntax errors win.
    Error(String),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
    col: usize,
}

struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: usize,
    col: usize,
}

impl Lexer {
    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    fn advance(&mut self) -> Option<char> {
        let c = self.chars.get(self.i).copied()?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn skip_trivia(&mut self) {
        while let Some(c) = self.peek_at(0) {
            if c.is_whitespace() {
                self.advance();
            } else if c == ';' {
                while let Some(c) = self.peek_at(0) {
                    if c == '\n' {
                        break;
                    }
                    self.advance();
                }
            } else {
                break;
            }
        }
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek_at(0) {
            if !f(c) {
                break;
            }
            s.push(c);
            self.advance();
        }
        s
    }

    fn is_ident_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_'
    }

    /// The next token; after an `Error` or `Eof` the caller stops.
    fn next_token(&mut self) -> Token {
        self.skip_trivia();
        let (line, col) = (self.line, self.col);
        let tok = |tok| Token { tok, line, col };
        let Some(c) = self.peek_at(0) else { return tok(Tok::Eof) };
        if c == '%' {
            self.advance();
            let digits = self.take_while(|c| c.is_ascii_digit());
            if digits.is_empty() {
                return tok(Tok::Error("expected a value number after `%`, like `%3`".into()));
            }
            return tok(Tok::Value(digits));
        }
        if c == '"' {
            return self.string(line, col);
        }
        if c.is_ascii_alphabetic() || c == '_' {
            return tok(Tok::Ident(self.take_while(Self::is_ident_char)));
        }
        if c.is_ascii_digit() || (c == '-' && self.peek_at(1).is_some_and(|d| d.is_ascii_digit())) {
            return self.number(line, col);
        }
        if c == '-'
            && self.peek_at(1) == Some('i')
            && self.peek_at(2) == Some('n')
            && self.peek_at(3) == Some('f')
            && !self.peek_at(4).is_some_and(Self::is_ident_char)
        {
            for _ in 0..4 {
                self.advance();
            }
            return tok(Tok::Float("-inf".into()));
        }
        if "(){}[]<>,:=#".contains(c) {
            self.advance();
            return tok(Tok::Punct(c));
        }
        tok(Tok::Error(format!("unexpected character `{}`", c.escape_debug())))
    }

    fn number(&mut self, line: usize, col: usize) -> Token {
        let tok = |tok| Token { tok, line, col };
        let mut text = String::new();
        if self.peek_at(0) == Some('-') {
            self.advance();
            text.push('-');
        }
        if text.is_empty() && self.peek_at(0) == Some('0') && matches!(self.peek_at(1), Some('x' | 'X')) {
            self.advance();
            self.advance();
            let digits = self.take_while(|c| c.is_ascii_hexdigit());
            if digits.is_empty() {
                return tok(Tok::Error("expected hexadecimal digits after `0x`".into()));
            }
            return tok(Tok::Int(format!("0x{digits}")));
        }
        text.push_str(&self.take_while(|c| c.is_ascii_digit()));
        let mut float = false;
        if self.peek_at(0) == Some('.') {
            self.advance();
            let frac = self.take_while(|c| c.is_ascii_digit());
            if frac.is_empty() {
                return tok(Tok::Error(format!("expected digits after `{text}.`")));
            }
            text.push('.');
            text.push_str(&frac);
            float = true;
        }
        if matches!(self.peek_at(0), Some('e' | 'E')) {
            let sign = matches!(self.peek_at(1), Some('+' | '-'));
            let first_digit = self.peek_at(if sign { 2 } else { 1 });
            if first_digit.is_some_and(|d| d.is_ascii_digit()) {
                text.push('e');
                self.advance();
                if sign {
                    text.extend(self.advance());
                }
                text.push_str(&self.take_while(|c| c.is_ascii_digit()));
                float = true;
            }
        }
        tok(if float { Tok::Float(text) } else { Tok::Int(text) })
    }

    fn string(&mut self, line: usize, col: usize) -> Token {
        let tok = |tok| Token { tok, line, col };
        self.advance();
        let mut s = String::new();
        loop {
            let (eline, ecol) = (self.line, self.col);
            match self.advance() {
                None | Some('\n') => return tok(Tok::Error("unterminated string: the closing `\"` is missing".into())),
                Some('"') => return tok(Tok::Str(s)),
                Some('\\') => {
                    let bad = |msg: String| Token { tok: Tok::Error(msg), line: eline, col: ecol };
                    match self.advance() {
                        Some('"') => s.push('"'),
                        Some('\\') => s.push('\\'),
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some('r') => s.push('\r'),
                        Some('0') => s.push('\0'),
                        Some('u') => {
                            if self.advance() != Some('{') {
                                return bad("expected `{` after `\\u` (escapes look like `\\u{7f}`)".into());
                            }
                            let hex = self.take_while(|c| c.is_ascii_hexdigit());
                            if self.advance() != Some('}') {
                                return bad("expected hexadecimal digits and `}` in a `\\u{...}` escape".into());
                            }
                            match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                                Some(c) => s.push(c),
                                None => return bad(format!("`\\u{{{hex}}}` is not a Unicode character")),
                            }
                        }
                        Some(c) => {
                            return bad(format!(
                                "unknown escape `\\{}` in a string (the escapes are \\\" \\\\ \\n \\t \\r \\0 \\u{{...}})",
                                c.escape_debug()
                            ))
                        }
                        None => return tok(Tok::Error("unterminated string: the closing `\"` is missing".into())),
                    }
                }
                Some(c) => s.push(c),
            }
        }
    }
}

fn lex(text: &str) -> Vec<Token> {
    let mut lexer = Lexer { chars: text.chars().collect(), i: 0, line: 1, col: 1 };
    let mut toks = Vec::new();
    loop {
        let t = lexer.next_token();
        let last = matches!(t.tok, Tok::Eof | Tok::Error(_));
        toks.push(t);
        if last {
            return toks;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------------

/// Region blocks nest at most this deep, so hostile input cannot overflow the stack (the parser
/// recurses once per level). Real programs nest a handful of levels.
const MAX_NESTING: usize = 100;

/// Parses the text form of one program. Checks syntax, names and value numbering, not the
/// program's invariants: run [`crate::verify::verify`] on the result.
pub fn parse(text: &str) -> Result<Program, ParseError> {
    let mut p = Parser { toks: lex(text), pos: 0, params: Vec::new(), defs: BTreeMap::new(), uses: Vec::new(), depth: 0 };
    p.program()
}

type Result<T, E = ParseError> = std::result::Result<T, E>;

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    params: Vec<Param>,
    /// Every value defined so far: its type and where.
    defs: BTreeMap<u32, (Type, usize, usize)>,
    /// Every value use, checked against `defs` at the end (uses may precede definitions).
    uses: Vec<(u32, usize, usize)>,
    depth: usize,
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Value(d) => format!("`%{d}`"),
        Tok::Int(s) | Tok::Float(s) => format!("`{s}`"),
        Tok::Str(s) => {
            let q = quoted(s);
            if q.chars().count() > 40 {
                format!("the string {}...\"", q.chars().take(36).collect::<String>())
            } else {
                format!("the string {q}")
            }
        }
        Tok::Punct(c) => format!("`{c}`"),
        Tok::Eof => "the end of the input".into(),
        Tok::Error(m) => m.clone(),
    }
}

const TYPE_EXAMPLE: &str = "a type like `[64, 32]xf16`";

fn dtype_list() -> String {
    DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

impl Parser {
    fn peek(&self) -> &Token {
        // The token list always ends with `Eof` or `Error`, and `pos` never passes it.
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn error_at(line: usize, col: usize, message: impl Into<String>) -> ParseError {
        ParseError { line, col, message: message.into() }
    }

    /// "expected {what}, found {token}" at `tok`, or the lexical error `tok` holds.
    fn unexpected(tok: &Token, what: &str) -> ParseError {
        match &tok.tok {
            Tok::Error(m) => Self::error_at(tok.line, tok.col, m.clone()),
            t => Self::error_at(tok.line, tok.col, format!("expected {what}, found {}", describe(t))),
        }
    }

    fn fail<T>(&self, what: &str) -> Result<T> {
        Err(Self::unexpected(self.peek(), what))
    }

    fn at_punct(&self, c: char) -> bool {
        self.peek().tok == Tok::Punct(c)
    }

    fn eat_punct(&mut self, c: char) -> bool {
        let yes = self.at_punct(c);
        if yes {
            self.bump();
        }
        yes
    }

    fn expect_punct(&mut self, c: char, context: &str) -> Result<()> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            self.fail(&format!("`{c}`{context}"))
        }
    }

    fn at_ident(&self, s: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(i) if i == s)
    }

    fn eat_ident(&mut self, s: &str) -> bool {
        let yes = self.at_ident(s);
        if yes {
            self.bump();
        }
        yes
    }

    fn expect_ident(&mut self, s: &str, context: &str) -> Result<()> {
        if self.eat_ident(s) {
            Ok(())
        } else {
            self.fail(&format!("`{s}`{context}"))
        }
    }

    fn ident(&mut self, what: &str) -> Result<(String, Token)> {
        match &self.peek().tok {
            Tok::Ident(s) => {
                let s = s.clone();
                Ok((s, self.bump()))
            }
            _ => self.fail(what),
        }
    }

    /// An identifier or a quoted string.
    fn name(&mut self, what: &str) -> Result<String> {
        match &self.peek().tok {
            Tok::Ident(s) | Tok::Str(s) => {
                let s = s.clone();
                self.bump();
                Ok(s)
            }
            _ => self.fail(what),
        }
    }

    /// A non-negative decimal integer that fits `T`.
    fn uint<T: std::str::FromStr>(&mut self, what: &str) -> Result<T> {
        let tok = self.peek().clone();
        match &tok.tok {
            Tok::Int(s) if !s.starts_with('-') && !s.starts_with("0x") => match s.parse::<T>() {
                Ok(v) => {
                    self.bump();
                    Ok(v)
                }
                Err(_) => Err(Self::error_at(tok.line, tok.col, format!("`{s}` is too large for {what}"))),
            },
            _ => Err(Self::unexpected(&tok, &format!("{what} (a non-negative integer)"))),
        }
    }

    /// A decimal integer that fits `i64`.
    fn int(&mut self, what: &str) -> Result<i64> {
        let tok = self.peek().clone();
        match &tok.tok {
            Tok::Int(s) if !s.starts_with("0x") => match s.parse::<i64>() {
                Ok(v) => {
                    self.bump();
                    Ok(v)
                }
                Err(_) => Err(Self::error_at(tok.line, tok.col, format!("`{s}` does not fit {what} (a 64-bit integer)"))),
            },
            _ => Err(Self::unexpected(&tok, &format!("{what} (an integer)"))),
        }
    }

    fn dtype_named(tok: &Token, name: &str) -> Result<DType> {
        DType::from_name(name).ok_or_else(|| Self::error_at(tok.line, tok.col, format!("unknown dtype `{name}` (the dtypes are {})", dtype_list())))
    }

    fn dtype(&mut self) -> Result<DType> {
        let (name, tok) = self.ident(&format!("a dtype ({})", dtype_list()))?;
        Self::dtype_named(&tok, &name)
    }

    /// `f32` or `[64, 32]xf16`.
    fn ty(&mut self) -> Result<Type> {
        match &self.peek().tok {
            Tok::Ident(_) => Ok(Type::scalar(self.dtype()?)),
            Tok::Punct('[') => {
                self.bump();
                let mut shape = Vec::new();
                if !self.at_punct(']') {
                    loop {
                        shape.push(self.uint::<usize>("a tile extent")?);
                        if !self.eat_punct(',') {
                            break;
                        }
                    }
                }
                self.expect_punct(']', " or `,` in a tile shape")?;
                let tok = self.peek().clone();
                let dtype = match &tok.tok {
                    Tok::Ident(s) if s == "x" => {
                        self.bump();
                        self.dtype()?
                    }
                    Tok::Ident(s) if s.starts_with('x') => {
                        self.bump();
                        Self::dtype_named(&tok, &s[1..]).map_err(|mut e| {
                            // Point at the dtype, past the `x`.
                            e.col += 1;
                            e
                        })?
                    }
                    _ => return Err(Self::unexpected(&tok, "`x` and a dtype after a tile shape, like `[64, 32]xf16`")),
                };
                Ok(Type { dtype, shape })
            }
            _ => self.fail(TYPE_EXAMPLE),
        }
    }

    fn value_index(&mut self, what: &str) -> Result<(u32, usize, usize)> {
        let tok = self.peek().clone();
        match &tok.tok {
            Tok::Value(d) => match d.parse::<u32>() {
                Ok(i) => {
                    self.bump();
                    Ok((i, tok.line, tok.col))
                }
                Err(_) => Err(Self::error_at(tok.line, tok.col, format!("value number `%{d}` is too large"))),
            },
            _ => Err(Self::unexpected(&tok, what)),
        }
    }

    /// A value use.
    fn value(&mut self, what: &str) -> Result<Value> {
        let (i, line, col) = self.value_index(what)?;
        self.uses.push((i, line, col));
        Ok(Value::from_index(i as usize))
    }

    fn operand(&mut self) -> Result<Value> {
        self.value("an operand like `%3`")
    }

    fn comma_operand(&mut self) -> Result<Value> {
        self.expect_punct(',', " and another operand")?;
        self.operand()
    }

    fn define(&mut self, i: u32, ty: Type, line: usize, col: usize) -> Result<Value> {
        if let Some((_, l, c)) = self.defs.get(&i) {
            return Err(Self::error_at(line, col, format!("value %{i} is defined twice (first at line {l}, column {c})")));
        }
        self.defs.insert(i, (ty, line, col));
        Ok(Value::from_index(i as usize))
    }

    fn program(&mut self) -> Result<Program> {
        self.expect_ident("program", " at the start of a program")?;
        let name = self.name("the program name (an identifier or a quoted string)")?;
        self.expect_punct('(', " and the parameter list after the program name")?;
        if !self.at_punct(')') {
            loop {
                self.param()?;
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        self.expect_punct(')', " or `,` in the parameter list")?;
        self.expect_ident("grid", " and the grid rank after the parameter list")?;
        let grid_rank = self.uint::<u32>("the grid rank")?;
        let mut body = Block::default();
        if self.eat_ident("body") {
            body.args = self.block_args()?;
        }
        self.expect_punct('{', " to open the program body")?;
        body.insts = self.block_insts(true)?;
        if !matches!(self.peek().tok, Tok::Eof) {
            return self.fail("the end of the input after the program's closing `}`");
        }
        let values = self.finish_values()?;
        Ok(Program { name, params: std::mem::take(&mut self.params), grid_rank, values, body })
    }

    fn param(&mut self) -> Result<()> {
        let name = self.name("a parameter name (an identifier or a quoted string)")?;
        self.expect_punct(':', " and the parameter's type after its name")?;
        let kind = if self.at_ident("buffer") {
            self.bump();
            self.expect_punct('<', " after `buffer`, as in `buffer<f32, read>`")?;
            let dtype = self.dtype()?;
            self.expect_punct(',', " and the access after the buffer's dtype, as in `buffer<f32, read>`")?;
            let (access, tok) = self.ident("the buffer access (read, write or read_write)")?;
            let access = match access.as_str() {
                "read" => Access::Read,
                "write" => Access::Write,
                "read_write" => Access::ReadWrite,
                other => {
                    return Err(Self::error_at(tok.line, tok.col, format!("unknown buffer access `{other}` (expected read, write or read_write)")))
                }
            };
            self.expect_punct('>', " to close `buffer<...>`")?;
            ParamKind::Buffer { dtype, access }
        } else if matches!(self.peek().tok, Tok::Ident(_)) {
            ParamKind::Scalar { dtype: self.dtype()? }
        } else {
            return self.fail("a parameter type (a dtype like `i32`, or `buffer<f32, read>`)");
        };
        self.params.push(Param { name, kind });
        Ok(())
    }

    /// `(%4: i32, %5: [64]xf32)`.
    fn block_args(&mut self) -> Result<Vec<Value>> {
        self.expect_punct('(', " and the block arguments")?;
        let mut args = Vec::new();
        if !self.at_punct(')') {
            loop {
                args.push(self.typed_def("a block argument like `%4: i32`")?);
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        self.expect_punct(')', " or `,` in the block arguments")?;
        Ok(args)
    }

    /// `%4: i32`, defining `%4`.
    fn typed_def(&mut self, what: &str) -> Result<Value> {
        let (i, line, col) = self.value_index(what)?;
        self.expect_punct(':', " and the value's type")?;
        let ty = self.ty()?;
        self.define(i, ty, line, col)
    }

    /// `{` already consumed: instructions up to and including the closing `}`.
    fn block_insts(&mut self, top: bool) -> Result<Vec<Inst>> {
        let mut insts = Vec::new();
        loop {
            match &self.peek().tok {
                Tok::Punct('}') => {
                    self.bump();
                    break;
                }
                Tok::Ident(s) if s == "unused" && top => {
                    self.bump();
                    loop {
                        self.typed_def("an unused value like `%4: i32`")?;
                        if !self.eat_punct(',') {
                            break;
                        }
                    }
                }
                Tok::Value(_) | Tok::Ident(_) => insts.push(self.inst()?),
                _ => return self.fail("an instruction or `}`"),
            }
        }
        Ok(insts)
    }

    fn block(&mut self, context: &str) -> Result<Block> {
        if self.depth >= MAX_NESTING && self.at_punct('{') {
            let t = self.peek();
            return Err(Self::error_at(t.line, t.col, format!("blocks nest more than {MAX_NESTING} levels deep")));
        }
        self.expect_punct('{', context)?;
        self.depth += 1;
        let insts = self.block_insts(false)?;
        self.depth -= 1;
        Ok(Block { args: Vec::new(), insts })
    }

    fn buffer_ref(&mut self) -> Result<BufferId> {
        let tok = self.peek().clone();
        match &tok.tok {
            Tok::Punct('#') => {
                self.bump();
                self.uint::<u32>("a parameter index after `#`")
            }
            Tok::Ident(name) | Tok::Str(name) => {
                self.bump();
                let matches: Vec<usize> = self.params.iter().enumerate().filter(|(_, p)| &p.name == name).map(|(i, _)| i).collect();
                let err = |m: String| Err(Self::error_at(tok.line, tok.col, m));
                match matches.as_slice() {
                    [] => {
                        let buffers: Vec<String> =
                            self.params.iter().filter(|p| matches!(p.kind, ParamKind::Buffer { .. })).map(|p| format!("`{}`", p.name)).collect();
                        let known = if buffers.is_empty() {
                            "the program has no buffer parameters".to_string()
                        } else {
                            format!("the buffers are {}", buffers.join(", "))
                        };
                        err(format!("unknown buffer `{name}` ({known})"))
                    }
                    [i] => match self.params[*i].kind {
                        ParamKind::Buffer { .. } => Ok(*i as BufferId),
                        ParamKind::Scalar { .. } => err(format!("`{name}` is a scalar parameter, not a buffer")),
                    },
                    _ => err(format!("`{name}` names several parameters; write `#N` to pick parameter N")),
                }
            }
            _ => Err(Self::unexpected(&tok, "a buffer parameter name")),
        }
    }

    /// `x[%3]`.
    fn address(&mut self) -> Result<(BufferId, Value)> {
        let buffer = self.buffer_ref()?;
        self.expect_punct('[', " and the offsets after the buffer name, as in `x[%3]`")?;
        let offsets = self.operand()?;
        self.expect_punct(']', " after the offsets")?;
        Ok((buffer, offsets))
    }

    /// `, mask %m` when present.
    fn opt_mask(&mut self) -> Result<Option<Value>> {
        if self.at_punct(',') {
            self.bump();
            self.expect_ident("mask", " (the only clause that may follow here)")?;
            return Ok(Some(self.operand()?));
        }
        Ok(None)
    }

    fn combine(&mut self) -> Result<Combine> {
        let (name, tok) = self.ident("a combine function (sum, prod, max, min, argmax, argmin or custom)")?;
        Ok(match name.as_str() {
            "sum" => Combine::Sum,
            "prod" => Combine::Prod,
            "max" => Combine::Max,
            "min" => Combine::Min,
            "argmax" => Combine::ArgMax,
            "argmin" => Combine::ArgMin,
            "custom" => Combine::Custom(Block::default()),
            other => {
                return Err(Self::error_at(
                    tok.line,
                    tok.col,
                    format!("unknown combine function `{other}` (expected sum, prod, max, min, argmax, argmin or custom)"),
                ))
            }
        })
    }

    fn axis(&mut self) -> Result<u32> {
        self.expect_punct(',', " and `axis N`")?;
        self.expect_ident("axis", "")?;
        self.uint::<u32>("an axis")
    }

    fn scalar(&mut self) -> Result<Scalar> {
        let tok = self.peek().clone();
        let what = "a constant (an integer, a float, `true`, `false`, `nan` or `inf`)";
        let bad = |m: String| Err(Self::error_at(tok.line, tok.col, m));
        let s = match &tok.tok {
            Tok::Ident(s) if s == "true" => Scalar::Bool(true),
            Tok::Ident(s) if s == "false" => Scalar::Bool(false),
            Tok::Ident(s) if s == "inf" => Scalar::Float(f64::INFINITY),
            Tok::Ident(s) if s == "nan" => {
                self.bump();
                if !self.eat_punct('(') {
                    return Ok(Scalar::Float(f64::NAN));
                }
                let t = self.peek().clone();
                let bits = match &t.tok {
                    Tok::Int(h) if h.starts_with("0x") => u64::from_str_radix(&h[2..], 16).ok(),
                    _ => return Err(Self::unexpected(&t, "the NaN's bits in hexadecimal, like `nan(0x7ff8000000000001)`")),
                };
                let x = bits.map(f64::from_bits).filter(|x| x.is_nan());
                let Some(x) = x else {
                    return Err(Self::error_at(t.line, t.col, "the bits in `nan(...)` must be those of a 64-bit NaN"));
                };
                self.bump();
                self.expect_punct(')', " to close `nan(...)`")?;
                return Ok(Scalar::Float(x));
            }
            Tok::Float(s) if s == "-inf" => Scalar::Float(f64::NEG_INFINITY),
            Tok::Float(s) => match s.parse::<f64>() {
                Ok(x) => Scalar::Float(x),
                Err(_) => return bad(format!("`{s}` is not a valid float")),
            },
            Tok::Int(s) if !s.starts_with("0x") => match s.parse::<i64>() {
                Ok(i) => Scalar::Int(i),
                Err(_) => return bad(format!("`{s}` does not fit a constant (a 64-bit integer)")),
            },
            _ => return Err(Self::unexpected(&tok, what)),
        };
        self.bump();
        Ok(s)
    }

    /// One instruction, with its nested blocks and location.
    fn inst(&mut self) -> Result<Inst> {
        let mut results = Vec::new();
        if matches!(self.peek().tok, Tok::Value(_)) {
            loop {
                results.push(self.value_index("a result like `%3`")?);
                if !self.eat_punct(',') {
                    break;
                }
            }
            self.expect_punct('=', " after the results")?;
        }
        let (name, name_tok) = self.ident("an operation name")?;
        let mut op = self.op(&name, &name_tok)?;
        let results = self.result_types(&name, results)?;
        self.regions(&mut op)?;
        let loc = if self.eat_ident("loc") { self.loc()? } else { Loc::default() };
        Ok(Inst { op, results, loc })
    }

    /// The op's name and operands, without results, types or nested blocks. Kept out of
    /// [`Parser::inst`] so the frames of the block recursion stay small.
    #[inline(never)]
    fn op(&mut self, name: &str, name_tok: &Token) -> Result<Op> {
        Ok(match name {
            "arg" => Op::Arg { param: self.uint("a parameter index")? },
            "program_id" => Op::ProgramId { axis: self.uint("a grid axis")? },
            "num_programs" => Op::NumPrograms { axis: self.uint("a grid axis")? },
            "const" => Op::Const { value: self.scalar()? },
            "arange" => {
                let start = self.int("the start of the range")?;
                self.expect_punct(',', " and the end of the range")?;
                Op::Arange { start, end: self.int("the end of the range")? }
            }
            "splat" => Op::Splat { x: self.operand()? },
            "broadcast" => Op::Broadcast { x: self.operand()? },
            "reshape" => Op::Reshape { x: self.operand()? },
            "cast" => Op::Cast { x: self.operand()? },
            "expand_dims" => {
                let x = self.operand()?;
                Op::ExpandDims { x, axis: self.axis()? }
            }
            "trans" => {
                let x = self.operand()?;
                self.expect_punct(',', " and `perm [...]`")?;
                self.expect_ident("perm", "")?;
                self.expect_punct('[', " to open the permutation")?;
                let mut perm = Vec::new();
                if !self.at_punct(']') {
                    loop {
                        perm.push(self.uint::<u32>("a dimension index")?);
                        if !self.eat_punct(',') {
                            break;
                        }
                    }
                }
                self.expect_punct(']', " or `,` in the permutation")?;
                Op::Trans { x, perm }
            }
            "cmp" => {
                let (pred, tok) = self.ident("a comparison predicate (eq, ne, lt, le, gt or ge)")?;
                let Some(pred) = CmpPred::ALL.into_iter().find(|p| p.name() == pred) else {
                    return Err(Self::error_at(
                        tok.line,
                        tok.col,
                        format!("unknown comparison predicate `{pred}` (expected eq, ne, lt, le, gt or ge)"),
                    ));
                };
                let lhs = self.operand()?;
                Op::Cmp { pred, lhs, rhs: self.comma_operand()? }
            }
            "select" => {
                let cond = self.operand()?;
                let on_true = self.comma_operand()?;
                Op::Select { cond, on_true, on_false: self.comma_operand()? }
            }
            "fma" => {
                let a = self.operand()?;
                let b = self.comma_operand()?;
                Op::Fma { a, b, c: self.comma_operand()? }
            }
            "dot" => {
                let a = self.operand()?;
                let b = self.comma_operand()?;
                let acc = self.comma_operand()?;
                let mut precision = InputPrecision::Ieee;
                if self.eat_punct(',') {
                    self.expect_ident("input_precision", " (the only clause that may follow the accumulator)")?;
                    let (name, tok) = self.ident("an input precision (`ieee` or `tf32`)")?;
                    precision = InputPrecision::from_name(&name).ok_or_else(|| {
                        Self::error_at(tok.line, tok.col, format!("unknown input precision `{name}` (the precisions are ieee, tf32)"))
                    })?;
                }
                Op::Dot { a, b, acc, precision }
            }
            "load" => {
                let (buffer, offsets) = self.address()?;
                let (mut mask, mut other) = (None, None);
                if self.eat_punct(',') {
                    if self.eat_ident("mask") {
                        mask = Some(self.operand()?);
                        if self.eat_punct(',') {
                            self.expect_ident("other", " (the only clause that may follow `mask`)")?;
                            other = Some(self.operand()?);
                        }
                    } else if self.eat_ident("other") {
                        other = Some(self.operand()?);
                    } else {
                        return self.fail("`mask` or `other`");
                    }
                }
                Op::Load { buffer, offsets, mask, other }
            }
            "store" => {
                let (buffer, offsets) = self.address()?;
                let value = self.comma_operand()?;
                Op::Store { buffer, offsets, value, mask: self.opt_mask()? }
            }
            "atomic_cas" => {
                let (buffer, offsets) = self.address()?;
                let cmp = self.comma_operand()?;
                let value = self.comma_operand()?;
                Op::AtomicCas { buffer, offsets, cmp, value, mask: self.opt_mask()? }
            }
            "reduce" => {
                let combine = self.combine()?;
                let x = self.operand()?;
                Op::Reduce { x, axis: self.axis()?, combine }
            }
            "reduce_tuple" => {
                let mut xs = vec![self.operand()?];
                loop {
                    self.expect_punct(',', " and another operand or `axis N`")?;
                    if self.eat_ident("axis") {
                        break;
                    }
                    xs.push(self.operand()?);
                }
                let axis = self.uint::<u32>("an axis")?;
                Op::ReduceTuple { xs, axis, combine: Block::default() }
            }
            "scan" => {
                let combine = self.combine()?;
                let x = self.operand()?;
                let axis = self.axis()?;
                let reverse = if self.eat_punct(',') {
                    self.expect_ident("reverse", " (the only clause that may follow the axis)")?;
                    true
                } else {
                    false
                };
                Op::Scan { x, axis, combine, reverse }
            }
            "for" => {
                let lower = self.operand()?;
                self.expect_ident("to", " after the lower bound")?;
                let upper = self.operand()?;
                self.expect_ident("step", " after the upper bound")?;
                let step = self.operand()?;
                let mut init = Vec::new();
                if self.eat_ident("iter") {
                    self.expect_punct('(', " and the initial values after `iter`")?;
                    if !self.at_punct(')') {
                        loop {
                            init.push(self.operand()?);
                            if !self.eat_punct(',') {
                                break;
                            }
                        }
                    }
                    self.expect_punct(')', " or `,` in the initial values")?;
                }
                Op::For { lower, upper, step, init, body: Block::default() }
            }
            "if" => Op::If { cond: self.operand()?, then_block: Block::default(), else_block: Block::default() },
            "device_assert" => {
                let cond = self.operand()?;
                self.expect_punct(',', " and the message, as in `device_assert %3, \"x is positive\"`")?;
                let message = match &self.peek().tok {
                    Tok::Str(s) => {
                        let s = s.clone();
                        self.bump();
                        s
                    }
                    _ => return self.fail("the message as a quoted string, as in `\"x is positive\"`"),
                };
                Op::DeviceAssert { cond, message }
            }
            "yield" => {
                let mut values = Vec::new();
                if matches!(self.peek().tok, Tok::Value(_)) {
                    loop {
                        values.push(self.operand()?);
                        if !self.eat_punct(',') {
                            break;
                        }
                    }
                }
                Op::Yield { values }
            }
            other => {
                if let Some(op) = UnaryOp::ALL.into_iter().find(|u| u.name() == other) {
                    Op::Unary { op, x: self.operand()? }
                } else if let Some(op) = BinaryOp::ALL.into_iter().find(|b| b.name() == other) {
                    let lhs = self.operand()?;
                    Op::Binary { op, lhs, rhs: self.comma_operand()? }
                } else if let Some(op) = AtomicOp::ALL.into_iter().find(|a| a.name() == other) {
                    let (buffer, offsets) = self.address()?;
                    let value = self.comma_operand()?;
                    Op::Atomic { op, buffer, offsets, value, mask: self.opt_mask()? }
                } else {
                    return Err(Self::error_at(name_tok.line, name_tok.col, format!("unknown operation `{other}`")));
                }
            }
        })
    }

    /// `: type, ...` after the operands, defining the results.
    fn result_types(&mut self, name: &str, results: Vec<(u32, usize, usize)>) -> Result<Vec<Value>> {
        let mut types = Vec::new();
        if self.at_punct(':') {
            let colon = self.bump();
            loop {
                types.push(self.ty()?);
                if !self.eat_punct(',') {
                    break;
                }
            }
            if types.len() != results.len() {
                return Err(Self::error_at(
                    colon.line,
                    colon.col,
                    format!("`{name}` has {} result(s) but {} result type(s)", results.len(), types.len()),
                ));
            }
        } else if !results.is_empty() {
            return self.fail("`:` and the result types");
        }
        let mut result_values = Vec::with_capacity(results.len());
        for ((i, line, col), ty) in results.into_iter().zip(types) {
            result_values.push(self.define(i, ty, line, col)?);
        }
        Ok(result_values)
    }

    /// The nested blocks of `for`, `if` and custom combines.
    fn regions(&mut self, op: &mut Op) -> Result<()> {
        match op {
            Op::For { body, .. } => {
                self.expect_ident("body", " and the loop body, as in `body(%4: i32) { ... }`")?;
                let args = self.block_args()?;
                *body = self.block(" to open the loop body")?;
                body.args = args;
            }
            Op::If { then_block, else_block, .. } => {
                self.expect_ident("then", " and the then-block")?;
                let args = if self.at_punct('(') { self.block_args()? } else { Vec::new() };
                *then_block = self.block(" to open the then-block")?;
                then_block.args = args;
                self.expect_ident("else", " and the else-block")?;
                let args = if self.at_punct('(') { self.block_args()? } else { Vec::new() };
                *else_block = self.block(" to open the else-block")?;
                else_block.args = args;
            }
            Op::Reduce { combine: Combine::Custom(b), .. } | Op::Scan { combine: Combine::Custom(b), .. } | Op::ReduceTuple { combine: b, .. } => {
                self.expect_ident("combine", " and the combine function, as in `combine(%a: f32, %b: f32) { ... }`")?;
                let args = self.block_args()?;
                *b = self.block(" to open the combine function")?;
                b.args = args;
            }
            _ => {}
        }
        Ok(())
    }

    /// After `loc`: `("file":line:col)`.
    fn loc(&mut self) -> Result<Loc> {
        self.expect_punct('(', " after `loc`, as in `loc(\"src/lib.rs\":12:5)`")?;
        let file = match &self.peek().tok {
            Tok::Str(s) => {
                let s = s.clone();
                self.bump();
                s
            }
            _ => return self.fail("a quoted file name, as in `loc(\"src/lib.rs\":12:5)`"),
        };
        self.expect_punct(':', " and the line after the file name")?;
        let line = self.uint::<u32>("a line number")?;
        self.expect_punct(':', " and the column after the line")?;
        let col = self.uint::<u32>("a column number")?;
        self.expect_punct(')', " to close `loc(...)`")?;
        Ok(Loc { file, line, col })
    }

    /// Checks every use names a defined value and the definitions number `%0..%N` without gaps,
    /// then builds the arena.
    fn finish_values(&mut self) -> Result<Arena<ValueDecl>> {
        if let Some((i, line, col)) = self.uses.iter().find(|(i, ..)| !self.defs.contains_key(i)) {
            return Err(Self::error_at(*line, *col, format!("use of undefined value %{i}")));
        }
        for (expected, (&i, (_, line, col))) in self.defs.iter().enumerate() {
            if i as usize != expected {
                return Err(Self::error_at(
                    *line,
                    *col,
                    format!("value %{i} leaves a gap: %{expected} is never defined (values are numbered from %0 without gaps)"),
                ));
            }
        }
        Ok(std::mem::take(&mut self.defs).into_values().map(|(ty, ..)| ty).collect())
    }
}
