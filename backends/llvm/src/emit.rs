//! LLVM IR emission: the backend primitives of [`tilekit_core::gpu::Emitter`], written as LLVM 19
//! textual IR for one kernel function, with the target-specific pieces asked of [`Hooks`].
//!
//! Representation of values in registers:
//! - `i1` is LLVM `i1`; in buffers and shared memory it is a byte (0 or 1).
//! - Every integer width has one LLVM type; signed and unsigned dtypes differ only in the
//!   instructions chosen (`sdiv`/`udiv`, `icmp slt`/`icmp ult`, ...).
//! - `f16` is `half` (native arithmetic on every GPU of interest); `bf16` is an `i16` holding
//!   the bits: conversions to f32 are a shift, and no backend needs bf16 arithmetic.
//!
//! Numerics, chosen to match the SPIR-V backend and the interpreter:
//! - `fdiv` and `llvm.sqrt` stay IEEE (correctly rounded): no fast-math flags are ever set, so
//!   NVPTX emits `div.rn` / `sqrt.rn` and keeps subnormals.
//! - Float max/min are `llvm.maxnum`/`llvm.minnum` (IEEE maxNum/minNum: a NaN operand loses).
//! - f32 -> f16 is `fptrunc` (round to nearest even); f32 -> bf16 rounds to nearest even with
//!   integer arithmetic (exact on every target, NaN stays NaN); integer -> bf16 rounds to odd in
//!   f32 first, so the final rounding is the single correctly rounded one.
//! - Float -> integer is `llvm.fpto[su]i.sat`: NaN gives 0, out-of-range values saturate, never
//!   poison.
//! - Signed division and remainder are computed on magnitudes with `udiv`/`urem` (C semantics;
//!   `MIN / -1` wraps instead of being undefined).
//! - Transcendental functions, `rsqrt` and `fmod` are what [`Hooks::math`] names (libdevice on
//!   NVPTX); f16 and bf16 functions other than `neg`/`abs` compute in f32 and round once.
//!
//! Control flow: `if` is a diamond with `phi`s at its merge; `for` a loop whose header carries
//! the induction variable, a "keep going" flag and every carried value in `phi`s. As in the
//! SPIR-V backend, a loop stops rather than wrap its induction variable past the dtype's range,
//! and a zero step runs no iteration.

use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use half::{bf16, f16};
use tilekit_core::gpu::emit::{SharedMatrix, WgmmaA};
use tilekit_core::gpu::{Emitter, MatrixInstr, Target};
use tilekit_core::ir::{Access, AtomicOp, BinaryOp, CmpPred, ParamKind, UnaryOp};
use tilekit_core::{DType, Program, Scalar};

use crate::hooks::{Hooks, MathFn, WgmmaOperand};
use crate::LlvmError;

/// An operand: an SSA register or an immediate. `Copy`, so it can be the emitter's value type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    Reg(u32),
    /// A global symbol by index into the emitter's symbol table (the kernel's parameters).
    Param(u32),
    Int(i64),
    /// f32 bits.
    F32(u32),
    /// f16 bits.
    F16(u16),
    Bool(bool),
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Operand::Reg(r) => write!(f, "%v{r}"),
            Operand::Param(p) => write!(f, "%p{p}"),
            Operand::Int(i) => write!(f, "{i}"),
            // LLVM writes float literals as the hex of the equal double.
            Operand::F32(b) => write!(f, "0x{:016X}", (f32::from_bits(b) as f64).to_bits()),
            Operand::F16(b) => write!(f, "0xH{b:04X}"),
            Operand::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A scalar SSA value and the dtype it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LlvmValue {
    pub op: Operand,
    pub dtype: DType,
}

/// The LLVM register type of a dtype.
pub fn reg_ty(d: DType) -> &'static str {
    match d {
        DType::I1 => "i1",
        DType::I8 | DType::U8 => "i8",
        DType::I16 | DType::BF16 => "i16",
        DType::I32 | DType::U32 => "i32",
        DType::I64 => "i64",
        DType::F16 => "half",
        DType::F32 => "float",
        // A later dtype (fp8) is a byte until it gets arithmetic.
        _ => "i8",
    }
}

/// The number of 32-bit words a vector access of `n` one-byte elements moves as, when it is
/// wider than one word.
fn byte_words(dtype: DType, n: usize) -> Option<usize> {
    (dtype.size_bytes() == 1 && n > 4 && n % 4 == 0).then_some(n / 4)
}

/// The LLVM type of a dtype in memory (`i1` is a byte).
pub fn mem_ty(d: DType) -> &'static str {
    if d == DType::I1 {
        "i8"
    } else {
        reg_ty(d)
    }
}

fn int_width(d: DType) -> u32 {
    match d {
        DType::I1 => 1,
        DType::I8 | DType::U8 => 8,
        DType::I16 | DType::BF16 => 16,
        DType::I64 => 64,
        _ => 32,
    }
}

/// The kernel's parameter `i`: how the function receives it.
#[derive(Clone, Debug)]
enum ParamSlot {
    Buffer { name: String, dtype: DType, access: Access, read: bool, written: bool },
    Scalar { dtype: DType },
}

enum Frame {
    If {
        merge: u32,
        else_label: u32,
        results: Vec<DType>,
        then_out: Option<(u32, Vec<LlvmValue>)>,
    },
    Loop {
        header: u32,
        merge: u32,
        /// Lines of the header's phis, filled in at `end_loop`: (line index, dtype, initial, pre).
        phis: Vec<(usize, DType, Operand, u32)>,
        iv: LlvmValue,
        step: Operand,
        upper: Operand,
        step_pos: Operand,
        limit: Operand,
        /// The unroll count its back edge asks for (see [`Hooks::dot_loop_unroll`]).
        unroll: Option<u32>,
    },
}

/// What the emitted kernel is, besides its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInterface {
    /// The entry point's symbol (the program name made a valid identifier).
    pub entry: String,
    pub threads: u32,
    /// Kernel parameters in program parameter order: buffers are pointers, scalars values.
    pub params: Vec<KernelParam>,
    /// Shared memory, in bytes (static and dynamic).
    pub shared_bytes: u32,
    /// Of `shared_bytes`, how many are dynamic ([`Hooks::static_shared_limit`]): the launch
    /// must ask for them; 0 when the kernel's shared memory is static.
    pub dynamic_shared_bytes: u32,
    /// External functions the module calls ([`Hooks::math`] names) and the backend must link.
    pub externals: Vec<String>,
    /// Tensor maps the kernel takes after `params` (128 bytes each, by value).
    pub tensor_maps: u32,
}

/// One kernel parameter as the runtime passes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelParam {
    /// A device pointer to the buffer's first element.
    Buffer { dtype: DType, access: Access },
    /// A scalar: 64-bit for `i64`, f32 for `f32`, otherwise a 32-bit word holding the value
    /// (sign- or zero-extended integers, 0/1 for `i1`, the bits of f16 and bf16 in the low half).
    Scalar { dtype: DType },
}

/// Emits one kernel; drive it through [`Emitter`], then call [`LlvmEmitter::finish`].
pub struct LlvmEmitter<'h, H: Hooks> {
    hooks: &'h H,
    kernel: String,
    target: Target,
    threads: u32,
    /// Programs per multiprocessor to leave room for (`tilekit_core::gpu::lower::LowerOptions::occupancy`).
    occupancy: u32,
    error: Option<LlvmError>,
    lines: Vec<String>,
    next_reg: u32,
    next_label: u32,
    cur_block: u32,
    params: Vec<ParamSlot>,
    scalars: Vec<Option<LlvmValue>>,
    thread_index: Operand,
    program_id: [Operand; 3],
    num_programs: [Operand; 3],
    shared: BTreeMap<DType, u32>,
    frames: Vec<Frame>,
    declarations: BTreeSet<String>,
    externals: BTreeSet<String>,
    /// The unroll count for the loop opened next ([`Emitter::mark_dot_loop`]).
    next_unroll: Option<u32>,
    /// A warpgroup matrix instruction was emitted: its shared-memory operands are swizzled
    /// on absolute addresses, so the arrays start 1024-byte aligned.
    uses_wgmma: bool,
    /// Tensor maps the kernel takes after the program's parameters ([`Emitter::tensor_copy`]).
    tensor_maps: u32,
    /// Loop metadata nodes, written after the function.
    loop_metadata: Vec<String>,
    /// Pure instructions of the current block by their text, so that the per-element index
    /// arithmetic the lowering repeats is written once: the module LLVM parses and optimises
    /// shrinks by a third for the large dot tiles, and with it the compile time.
    cse: HashMap<String, Operand>,
    /// i32 sums the lowering built, by register, as `base + constant` (wrapping arithmetic,
    /// so the split is exact): an element's index is a thread's base plus the element's
    /// constant, and an address built from the split takes the constant as an immediate offset
    /// instead of a 64-bit register per element (see [`Self::element_ptr`]).
    sums: HashMap<u32, (Operand, i64)>,
    /// Barriers and loop boundaries (openings and closings) emitted so far.
    barriers: u32,
    loop_marks: u32,
    /// Where each compare (and each i1 combination of them) was made: `(barriers, loop_marks)`
    /// then (see [`Emitter::begin_if`]).
    cond_made: HashMap<u32, (u32, u32)>,
}

/// The label of the entry block.
const ENTRY: u32 = 0;

/// The first metadata node number of loop hints.
const LOOP_MD: u32 = 1000;

impl<'h, H: Hooks> LlvmEmitter<'h, H> {
    /// Asks the target's code generator to leave room for `occupancy` programs per
    /// multiprocessor (0: its own choice).
    pub fn with_occupancy(mut self, occupancy: u32) -> Self {
        self.occupancy = occupancy;
        self
    }

    /// Declares the interface of `program` for `threads` threads per program on `target`, and
    /// reads the thread and program ids and the scalar parameters in the entry block (so that
    /// they dominate every use).
    pub fn new(program: &Program, target: &Target, threads: u32, hooks: &'h H) -> Result<Self, LlvmError> {
        let kernel = program.name.clone();
        if threads == 0 || threads > target.max_threads_per_program {
            return Err(LlvmError::Target {
                kernel,
                target: target.name.clone(),
                what: format!("{threads} threads per program (the target allows 1 to {})", target.max_threads_per_program),
            });
        }
        let mut params = Vec::new();
        let mut scalar_bytes = 0;
        for p in &program.params {
            let dtype = match p.kind {
                ParamKind::Buffer { dtype, .. } | ParamKind::Scalar { dtype } => dtype,
            };
            if !target.supports(dtype) {
                return Err(LlvmError::Param {
                    kernel,
                    param: p.name.clone(),
                    reason: format!("{dtype} is not supported by target `{}`", target.name),
                });
            }
            params.push(match p.kind {
                ParamKind::Buffer { dtype, access } => {
                    scalar_bytes += 8;
                    ParamSlot::Buffer { name: p.name.clone(), dtype, access, read: false, written: false }
                }
                ParamKind::Scalar { dtype } => {
                    scalar_bytes += if dtype == DType::I64 { 8 } else { 4 };
                    ParamSlot::Scalar { dtype }
                }
            });
        }
        if scalar_bytes > target.max_push_constant_bytes {
            return Err(LlvmError::Target {
                kernel,
                target: target.name.clone(),
                what: format!("its parameters take {scalar_bytes} bytes, the target has {}", target.max_push_constant_bytes),
            });
        }
        let mut e = LlvmEmitter {
            hooks,
            kernel,
            target: target.clone(),
            threads,
            occupancy: 0,
            error: None,
            lines: Vec::new(),
            next_reg: 0,
            next_label: 1,
            cur_block: ENTRY,
            params,
            scalars: vec![None; program.params.len()],
            thread_index: Operand::Int(0),
            program_id: [Operand::Int(0); 3],
            num_programs: [Operand::Int(0); 3],
            shared: BTreeMap::new(),
            frames: Vec::new(),
            declarations: BTreeSet::new(),
            externals: BTreeSet::new(),
            next_unroll: None,
            uses_wgmma: false,
            tensor_maps: 0,
            cse: HashMap::new(),
            sums: HashMap::new(),
            barriers: 0,
            loop_marks: 0,
            cond_made: HashMap::new(),
            loop_metadata: Vec::new(),
        };
        e.lines.push("L0:".into());
        e.thread_index = hooks.thread_index(&mut e.builder());
        for axis in 0..3 {
            e.program_id[axis] = hooks.program_id(&mut e.builder(), axis as u32);
            e.num_programs[axis] = hooks.num_programs(&mut e.builder(), axis as u32);
        }
        for i in 0..e.params.len() {
            if let ParamSlot::Scalar { dtype } = e.params[i] {
                let p = Operand::Param(i as u32);
                let v = match dtype {
                    DType::I1 => e.inst(format!("icmp ne i32 {p}, 0")),
                    DType::I8 | DType::U8 | DType::I16 => e.inst(format!("trunc i32 {p} to {}", reg_ty(dtype))),
                    DType::F16 => {
                        let t = e.inst(format!("trunc i32 {p} to i16"));
                        e.inst(format!("bitcast i16 {t} to half"))
                    }
                    DType::BF16 => e.inst(format!("trunc i32 {p} to i16")),
                    _ => p,
                };
                e.scalars[i] = Some(LlvmValue { op: v, dtype });
            }
        }
        Ok(e)
    }

    fn builder(&mut self) -> Builder<'_> {
        Builder { lines: &mut self.lines, next_reg: &mut self.next_reg, declarations: &mut self.declarations }
    }

    /// Closes the kernel and returns the module's LLVM IR text and the kernel's interface.
    pub fn finish(mut self) -> Result<(String, KernelInterface), LlvmError> {
        if let Some(f) = self.frames.last() {
            let what = match f {
                Frame::If { .. } => "an `if` is still open at the end of the kernel",
                Frame::Loop { .. } => "a loop is still open at the end of the kernel",
            };
            self.fail_contract(what.to_string());
        }
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        self.lines.push("  ret void".into());
        let mut shared_bytes: u64 = 0;
        for (d, len) in &self.shared {
            shared_bytes += *len.max(&1) as u64 * d.size_bytes() as u64;
        }
        if shared_bytes > self.target.shared_memory_bytes as u64 {
            return Err(LlvmError::Target {
                kernel: self.kernel.clone(),
                target: self.target.name.clone(),
                what: format!("it needs {shared_bytes} bytes of shared memory (the target has {})", self.target.shared_memory_bytes),
            });
        }
        let entry = sanitize(&self.kernel);
        let h = self.hooks;
        let mut m = String::new();
        let _ = writeln!(m, "; tilekit kernel `{}`, {} threads per program", self.kernel, self.threads);
        let _ = writeln!(m, "target triple = \"{}\"\n", h.triple());
        let sas = h.shared_addrspace();
        let dynamic = h.static_shared_limit().is_some_and(|limit| shared_bytes > limit);
        if dynamic {
            // One external array sized at launch; each dtype's buffer starts at a 16-byte
            // aligned offset in it, widest dtypes first. The accesses named `@shared_<dtype>`
            // as they were emitted, which becomes a constant address into the array.
            let mut order: Vec<(DType, u32)> = self.shared.iter().map(|(d, l)| (*d, *l)).collect();
            order.sort_by_key(|(d, _)| std::cmp::Reverse(d.size_bytes()));
            let align: u64 = if self.uses_wgmma { 1024 } else { 16 };
            let mut offset: u64 = 0;
            let mut bases = Vec::new();
            for (d, len) in order {
                offset = offset.next_multiple_of(align);
                let base = if offset == 0 {
                    "@shared_dyn".to_string()
                } else {
                    format!("getelementptr inbounds (i8, ptr addrspace({sas}) @shared_dyn, i32 {offset})")
                };
                bases.push((format!("@shared_{},", d.name()), format!("{base},")));
                offset += (len.max(1) as u64 * d.size_bytes() as u64).div_ceil(16) * 16;
            }
            offset = offset.next_multiple_of(16);
            for line in self.lines.iter_mut() {
                if line.contains("@shared_") {
                    for (name, base) in &bases {
                        if line.contains(name.as_str()) {
                            *line = line.replace(name.as_str(), base);
                        }
                    }
                }
            }
            shared_bytes = offset;
            let _ = writeln!(m, "@shared_dyn = external addrspace({sas}) global [0 x i8], align {align}");
        } else {
            let align = if self.uses_wgmma { 1024 } else { 16 };
            for (d, len) in &self.shared {
                let _ =
                    writeln!(m, "@shared_{} = internal addrspace({sas}) global [{} x {}] undef, align {align}", d.name(), len.max(&1), mem_ty(*d));
            }
        }
        if !self.shared.is_empty() {
            m.push('\n');
        }
        for d in &self.declarations {
            let _ = writeln!(m, "{d}");
        }
        let gas = h.global_addrspace();
        let mut sig = Vec::new();
        let mut iface = Vec::new();
        for (i, p) in self.params.iter().enumerate() {
            match p {
                ParamSlot::Buffer { dtype, access, read, written, .. } => {
                    // Buffers of one launch are distinct allocations (the runtimes check it), so
                    // `noalias` holds; it lets read-only buffers go through the read-only cache.
                    let mut attrs = format!("noalias nocapture align {}", h.buffer_align());
                    if !written {
                        attrs.push_str(" readonly");
                    } else if !read {
                        attrs.push_str(" writeonly");
                    }
                    sig.push(format!("ptr addrspace({gas}) {attrs} %p{i}"));
                    iface.push(KernelParam::Buffer { dtype: *dtype, access: *access });
                }
                ParamSlot::Scalar { dtype } => {
                    let ty = match dtype {
                        DType::I64 => "i64",
                        DType::F32 => "float",
                        _ => "i32",
                    };
                    sig.push(format!("{ty} %p{i}"));
                    iface.push(KernelParam::Scalar { dtype: *dtype });
                }
            }
        }
        // Tensor maps: 128-byte, 64-byte aligned parameters passed by value, whose address the
        // copies take.
        let mut grid_constants = Vec::new();
        for j in 0..self.tensor_maps {
            sig.push(format!("ptr byval([128 x i8]) align 64 %tmap{j}"));
            grid_constants.push(self.params.len() as u32 + j + 1);
        }
        let attrs = h.function_attributes(self.threads);
        let _ = writeln!(
            m,
            "\ndefine {} void @{entry}({}){} {{",
            h.kernel_calling_convention(),
            sig.join(", "),
            if attrs.is_empty() { "" } else { " #0" }
        );
        for l in &self.lines {
            m.push_str(l);
            m.push('\n');
        }
        m.push_str("}\n");
        if !attrs.is_empty() {
            let _ = writeln!(m, "\nattributes #0 = {{ {attrs} }}");
        }
        let meta = h.module_metadata(&entry, self.threads, self.occupancy, &grid_constants);
        if !meta.is_empty() {
            m.push('\n');
            m.push_str(&meta);
        }
        if !self.loop_metadata.is_empty() {
            m.push('\n');
            for l in &self.loop_metadata {
                m.push_str(l);
                m.push('\n');
            }
        }
        let interface = KernelInterface {
            entry,
            threads: self.threads,
            params: iface,
            shared_bytes: shared_bytes as u32,
            dynamic_shared_bytes: if dynamic { shared_bytes as u32 } else { 0 },
            externals: self.externals.into_iter().collect(),
            tensor_maps: self.tensor_maps,
        };
        Ok((m, interface))
    }

    // ---- errors ----

    fn fail(&mut self, err: LlvmError) {
        if self.error.is_none() {
            self.error = Some(err);
        }
    }

    fn fail_contract(&mut self, what: String) {
        let err = LlvmError::Contract { kernel: self.kernel.clone(), what };
        self.fail(err);
    }

    fn expect(&mut self, v: LlvmValue, dtype: DType, what: &str) {
        if v.dtype != dtype {
            self.fail_contract(format!("{what} is {}, expected {dtype}", v.dtype));
        }
    }

    // ---- text ----

    fn inst(&mut self, text: String) -> Operand {
        if !is_pure(&text) {
            return self.builder().inst(text);
        }
        if let Some(&r) = self.cse.get(&text) {
            return r;
        }
        let r = self.builder().inst(text.clone());
        self.cse.insert(text, r);
        r
    }

    fn stmt(&mut self, text: String) {
        self.lines.push(format!("  {text}"));
    }

    fn declare(&mut self, decl: String) {
        self.declarations.insert(decl);
    }

    fn label(&mut self) -> u32 {
        let l = self.next_label;
        self.next_label += 1;
        l
    }

    fn begin_block(&mut self, label: u32) {
        self.lines.push(format!("L{label}:"));
        self.cur_block = label;
        // An earlier block's values need not dominate this one.
        self.cse.clear();
    }

    fn br(&mut self, label: u32) {
        self.stmt(format!("br label %L{label}"));
    }

    /// Two 16-bit elements per 32-bit word, the first in the low half (matrix operands).
    fn pack_halves(&mut self, vals: &[LlvmValue], dtype: DType) -> Vec<Operand> {
        vals.chunks(2)
            .map(|pair| {
                let half = |me: &mut Self, v: LlvmValue| {
                    me.expect(v, dtype, "matrix operand");
                    let bits = if dtype == DType::F16 { me.inst(format!("bitcast half {} to i16", v.op)) } else { v.op };
                    me.inst(format!("zext i16 {bits} to i32"))
                };
                let lo = half(self, pair[0]);
                let hi = match pair.get(1) {
                    Some(&v) => half(self, v),
                    None => Operand::Int(0),
                };
                let hi = self.bin("shl", "i32", hi, Operand::Int(16));
                self.bin("or", "i32", hi, lo)
            })
            .collect()
    }

    /// The 64-bit shared-memory matrix descriptor of `m` (`wgmma`'s): the start address, the
    /// leading and stride byte offsets, each in 16-byte units in 14 bits, and the 128-byte
    /// swizzle (mode 1, bits 62-63).
    fn matrix_descriptor(&mut self, dtype: DType, m: SharedMatrix<LlvmValue>) -> Option<Operand> {
        // A start a constant number of 16-byte units past another (a K step of the same tile)
        // is that start's descriptor plus the units, as Triton's loops step theirs: the address
        // field holds a shared-memory address in 16-byte units, below 2^14 for every address
        // shared memory has, so the addition never carries out of it. The base's descriptor is
        // the same expression for every step, computed once.
        if let (Some(base), c) = self.split_sum(m.start.op) {
            let bytes = c * dtype.size_bytes() as i64;
            if c != 0 && bytes % 16 == 0 {
                let base = self.val(base, DType::I32);
                let d = self.matrix_descriptor(dtype, SharedMatrix { start: base, ..m })?;
                return Some(self.bin("add", "i64", d, Operand::Int(bytes / 16)));
            }
        }
        let p = self.shared_ptr(dtype, m.start, "matrix descriptor")?;
        let sas = self.hooks.shared_addrspace();
        let addr = self.inst(format!("ptrtoint ptr addrspace({sas}) {p} to i32"));
        let addr = self.inst(format!("zext i32 {addr} to i64"));
        let field = self.bin("lshr", "i64", addr, Operand::Int(4));
        let field = self.bin("and", "i64", field, Operand::Int(0x3fff));
        let fixed = ((m.lbo as i64 >> 4) & 0x3fff) << 16 | ((m.sbo as i64 >> 4) & 0x3fff) << 32 | 1 << 62;
        Some(self.bin("or", "i64", field, Operand::Int(fixed)))
    }

    fn val(&self, op: Operand, dtype: DType) -> LlvmValue {
        LlvmValue { op, dtype }
    }

    /// A call of intrinsic `name` returning `ret` on `(type, operand)` arguments.
    fn call(&mut self, ret: &str, name: &str, args: &[(&str, Operand)]) -> Operand {
        self.builder().call(ret, name, args)
    }

    fn sel(&mut self, ty: &str, c: Operand, a: Operand, b: Operand) -> Operand {
        match c {
            Operand::Bool(true) => a,
            Operand::Bool(false) => b,
            _ if a == b => a,
            _ => self.inst(format!("select i1 {c}, {ty} {a}, {ty} {b}")),
        }
    }

    fn bin(&mut self, op: &str, ty: &str, a: Operand, b: Operand) -> Operand {
        match fold_int(op, ty, a, b) {
            Some(r) => r,
            None => self.inst(format!("{op} {ty} {a}, {b}")),
        }
    }

    /// `x` as `(base, constant)`: a constant has no base; a register the lowering summed keeps
    /// its split.
    fn split_sum(&self, x: Operand) -> (Option<Operand>, i64) {
        match x {
            Operand::Int(c) => (None, c),
            Operand::Reg(r) => match self.sums.get(&r) {
                Some(&(b, c)) => (Some(b), c),
                None => (Some(x), 0),
            },
            _ => (Some(x), 0),
        }
    }

    /// An i32 add, remembering the sum's split into a base and a constant.
    fn add_i32(&mut self, a: Operand, b: Operand) -> Operand {
        let r = self.bin("add", "i32", a, b);
        let ((ba, ca), (bb, cb)) = (self.split_sum(a), self.split_sum(b));
        let c = (ca.wrapping_add(cb)) as i32 as i64;
        if let (Operand::Reg(reg), true) = (r, c != 0) {
            let base = match (ba, bb) {
                (Some(x), Some(y)) => Some(self.bin("add", "i32", x, y)),
                (x, y) => x.or(y),
            };
            if let Some(base) = base {
                self.sums.insert(reg, (base, c));
            }
        }
        r
    }

    /// Remembers where condition `r` was made, for [`Emitter::begin_if`].
    fn note_cond(&mut self, r: Operand) {
        if let Operand::Reg(reg) = r {
            self.cond_made.entry(reg).or_insert((self.barriers, self.loop_marks));
        }
    }

    fn icmp(&mut self, pred: &str, ty: &str, a: Operand, b: Operand) -> Operand {
        self.inst(format!("icmp {pred} {ty} {a}, {b}"))
    }

    // ---- constants ----

    fn const_of(&self, d: DType, s: Scalar) -> Operand {
        match d {
            DType::I1 => Operand::Bool(match s {
                Scalar::Bool(b) => b,
                Scalar::Int(i) => i != 0,
                Scalar::Float(f) => f != 0.0,
            }),
            DType::F32 => Operand::F32((s.as_f64() as f32).to_bits()),
            // Constants round through f32 first, as the interpreter's do.
            DType::F16 => Operand::F16(f16::from_f32(s.as_f64() as f32).to_bits()),
            DType::BF16 => Operand::Int(bf16::from_f32(s.as_f64() as f32).to_bits() as i16 as i64),
            d => {
                let i = match s {
                    Scalar::Bool(b) => b as i64,
                    Scalar::Int(i) => i,
                    Scalar::Float(f) => f as i64,
                };
                Operand::Int(wrap(d, i))
            }
        }
    }

    fn c_num(&self, d: DType, v: f64) -> Operand {
        if d.is_float() {
            self.const_of(d, Scalar::Float(v))
        } else {
            self.const_of(d, Scalar::Int(v as i64))
        }
    }

    // ---- conversions ----

    /// A value of register dtype `from` as f32.
    fn widen_to_f32(&mut self, from: DType, x: Operand) -> Operand {
        match from {
            DType::F32 => x,
            DType::F16 => self.inst(format!("fpext half {x} to float")),
            // Bits shifted into place even where the target converts bf16 natively: LLVM
            // (19) shrinks `fptrunc(fmul(fpext a, fpext b))` to a half multiply when the
            // operands' mantissas fit half's, which bf16's do while its exponents do not, so a
            // bf16 operand of 3e38 became inf in an f16 product (seed 43 program 2219 on the
            // H200). An integer widening is no `fpext` to shrink through, and exact.
            DType::BF16 => {
                let w = self.inst(format!("zext i16 {x} to i32"));
                let s = self.inst(format!("shl i32 {w}, 16"));
                self.inst(format!("bitcast i32 {s} to float"))
            }
            DType::I1 => self.sel("float", x, Operand::F32(1f32.to_bits()), Operand::F32(0)),
            d if d.is_signed_int() => self.inst(format!("sitofp {} {x} to float", reg_ty(d))),
            d => self.inst(format!("uitofp {} {x} to float", reg_ty(d))),
        }
    }

    /// f32 -> bf16 bits, round to nearest even, NaN stays NaN (as `half::bf16::from_f32`).
    fn f32_to_bf16(&mut self, x: Operand) -> Operand {
        if self.hooks.native_bf16() {
            let b = self.inst(format!("fptrunc float {x} to bfloat"));
            return self.inst(format!("bitcast bfloat {b} to i16"));
        }
        let bits = self.inst(format!("bitcast float {x} to i32"));
        let a = self.bin("and", "i32", bits, Operand::Int(0x7fff_ffff));
        let is_nan = self.icmp("ugt", "i32", a, Operand::Int(0x7f80_0000));
        let hi = self.bin("lshr", "i32", bits, Operand::Int(16));
        let lsb = self.bin("and", "i32", hi, Operand::Int(1));
        let r = self.bin("add", "i32", bits, Operand::Int(0x7fff));
        let r = self.bin("add", "i32", r, lsb);
        let r = self.bin("lshr", "i32", r, Operand::Int(16));
        let nan = self.bin("or", "i32", hi, Operand::Int(0x40));
        let r = self.sel("i32", is_nan, nan, r);
        self.inst(format!("trunc i32 {r} to i16"))
    }

    /// An f32 as a value of float dtype `to`, rounded to nearest even.
    fn round_from_f32(&mut self, to: DType, x: Operand) -> Operand {
        match to {
            DType::F16 => self.inst(format!("fptrunc float {x} to half")),
            DType::BF16 => self.f32_to_bf16(x),
            _ => x,
        }
    }

    /// |x| of the signed integer `x` (`neg` is `x < 0`), MIN wrapping to itself, to be read as
    /// unsigned. LLVM turns the select into `llvm.abs`; where the target's abs instruction
    /// cannot be trusted with MIN ([`Hooks::wrapping_abs_neg`]) the hook's form is used.
    fn magnitude(&mut self, t: &str, neg: Operand, x: Operand) -> Operand {
        let h = self.hooks;
        if let Some(r) = h.wrapping_abs_neg(&mut self.builder(), false, t, x) {
            return r;
        }
        let nx = self.bin("sub", t, Operand::Int(0), x);
        self.sel(t, neg, nx, x)
    }

    /// A 32- or 64-bit integer as f32 rounded to odd (truncated, lowest bit set when inexact):
    /// rounding that again to bf16's 8 bits is then the single correctly rounded conversion.
    fn int_to_f32_round_odd(&mut self, from: DType, x: Operand) -> Operand {
        let t = reg_ty(from);
        let w = int_width(from) as i64;
        let signed = from.is_signed_int();
        let neg = if signed { self.icmp("slt", t, x, Operand::Int(0)) } else { Operand::Bool(false) };
        let mag = if signed { self.magnitude(t, neg, x) } else { x };
        // Bits beyond the 24 an f32 holds are dropped, and leave a sticky bit.
        let lz = self.call(t, &format!("llvm.ctlz.{t}"), &[(t, mag), ("i1", Operand::Bool(false))]);
        let msb = self.bin("sub", t, Operand::Int(w - 1), lz);
        let big = self.icmp("sgt", t, msb, Operand::Int(23));
        let excess = self.bin("sub", t, msb, Operand::Int(23));
        let sh = self.sel(t, big, excess, Operand::Int(0));
        let top = self.bin("shl", t, Operand::Int(1), sh);
        let mask = self.bin("sub", t, top, Operand::Int(1));
        let dropped = self.bin("and", t, mag, mask);
        let sticky = self.icmp("ne", t, dropped, Operand::Int(0));
        let q = self.bin("lshr", t, mag, sh);
        let jam = self.inst(format!("zext i1 {sticky} to {t}"));
        let q = self.bin("or", t, q, jam);
        let qf = self.inst(format!("uitofp {t} {q} to float"));
        let sh32 = if w == 64 { self.inst(format!("trunc i64 {sh} to i32")) } else { sh };
        // Scaled back by 2^sh (sh <= 40), built from its exponent bits: an exact multiply, and no
        // `ldexp`, which not every GPU target lowers.
        let e = self.bin("add", "i32", sh32, Operand::Int(127));
        let e = self.bin("shl", "i32", e, Operand::Int(23));
        let scale = self.inst(format!("bitcast i32 {e} to float"));
        let r = self.bin("fmul", "float", qf, scale);
        let nr = self.inst(format!("fneg float {r}"));
        self.sel("float", neg, nr, r)
    }

    // ---- memory ----

    /// Pointer to `buffer[index]`, after checking the buffer and recording the access.
    #[allow(clippy::too_many_arguments)]
    fn element_ptr(
        &mut self,
        buffer: u32,
        dtype: DType,
        index: LlvmValue,
        index_dtype: DType,
        read: bool,
        write: bool,
        what: &str,
    ) -> Option<Operand> {
        self.expect(index, index_dtype, what);
        if !matches!(index_dtype, DType::I32 | DType::U32 | DType::I64) {
            self.fail_contract(format!("{what}: index dtype {index_dtype} (i32, u32 or i64 expected)"));
            return None;
        }
        let Some(ParamSlot::Buffer { name, dtype: bd, access, read: r, written: w }) = self.params.get_mut(buffer as usize) else {
            self.fail_contract(format!("{what}: parameter {buffer} is not a buffer"));
            return None;
        };
        let (name, bd, access) = (name.clone(), *bd, *access);
        *r |= read;
        *w |= write;
        if bd != dtype {
            self.fail_contract(format!("{what}: buffer `{name}` holds {bd}, accessed as {dtype}"));
            return None;
        }
        if write && !access.can_write() {
            self.fail_contract(format!("{what} writes buffer `{name}`, declared {}", access.name()));
        }
        if read && !write && !access.can_read() {
            self.fail_contract(format!("{what} reads buffer `{name}`, declared {}", access.name()));
        }
        let gas = self.hooks.global_addrspace();
        let mt = mem_ty(dtype);
        if let (DType::I32, Operand::Reg(r)) = (index_dtype, index.op) {
            // For 0 < c < 2^31, sext(base + c) == sext(base) + c unless base + c wraps past
            // i32::MAX, and then the index itself is negative: no access a program may make.
            // So the constant moves into the address (an immediate offset), and elements
            // that share a base share its 64-bit register. No `inbounds`: the base alone may
            // point before the buffer.
            if let Some(&(base, c)) = self.sums.get(&r) {
                if c > 0 {
                    let b64 = self.inst(format!("sext i32 {base} to i64"));
                    let pb = self.inst(format!("getelementptr {mt}, ptr addrspace({gas}) %p{buffer}, i64 {b64}"));
                    return Some(self.inst(format!("getelementptr {mt}, ptr addrspace({gas}) {pb}, i64 {c}")));
                }
            }
        }
        let idx = match index_dtype {
            DType::I64 => index.op,
            DType::U32 => self.inst(format!("zext i32 {} to i64", index.op)),
            _ => self.inst(format!("sext i32 {} to i64", index.op)),
        };
        Some(self.inst(format!("getelementptr inbounds {mt}, ptr addrspace({gas}) %p{buffer}, i64 {idx}")))
    }

    fn shared_ptr(&mut self, dtype: DType, index: LlvmValue, what: &str) -> Option<Operand> {
        self.expect(index, DType::I32, what);
        if !self.shared.contains_key(&dtype) {
            self.fail_contract(format!("{what}: no shared memory reserved for {dtype}"));
            return None;
        }
        let sas = self.hooks.shared_addrspace();
        Some(self.inst(format!("getelementptr inbounds {}, ptr addrspace({sas}) @shared_{}, i32 {}", mem_ty(dtype), dtype.name(), index.op)))
    }

    /// Declares at least `n` tensor-map parameters.
    pub fn declare_tensor_maps(&mut self, n: u32) {
        self.tensor_maps = self.tensor_maps.max(n);
    }

    /// The i32 shared-memory address of `shared[dtype][index]`.
    fn shared_address_of(&mut self, dtype: DType, index: LlvmValue, what: &str) -> Option<Operand> {
        let p = self.shared_ptr(dtype, index, what)?;
        let sas = self.hooks.shared_addrspace();
        Some(self.inst(format!("ptrtoint ptr addrspace({sas}) {p} to i32")))
    }

    /// A loaded memory value as a register value.
    fn reg_from_mem(&mut self, dtype: DType, raw: Operand) -> Operand {
        if dtype == DType::I1 {
            self.icmp("ne", "i8", raw, Operand::Int(0))
        } else {
            raw
        }
    }

    fn reg_to_mem(&mut self, dtype: DType, v: Operand) -> Operand {
        if dtype == DType::I1 {
            self.inst(format!("zext i1 {v} to i8"))
        } else {
            v
        }
    }

    // ---- arithmetic pieces ----

    /// Signed division or remainder on magnitudes (C semantics, `MIN / -1` wraps).
    fn signed_div_rem(&mut self, rem: bool, d: DType, a: Operand, b: Operand) -> Operand {
        let t = reg_ty(d);
        let na = self.icmp("slt", t, a, Operand::Int(0));
        let nb = self.icmp("slt", t, b, Operand::Int(0));
        // The magnitudes are only read as unsigned, which ptxas gets right for 32 and 64 bits;
        // LLVM keeps seeing through the select there (divisions by constants stay cheap).
        let (abs_a, abs_b) = if int_width(d) < 32 {
            (self.magnitude(t, na, a), self.magnitude(t, nb, b))
        } else {
            let neg_a = self.bin("sub", t, Operand::Int(0), a);
            let neg_b = self.bin("sub", t, Operand::Int(0), b);
            (self.sel(t, na, neg_a, a), self.sel(t, nb, neg_b, b))
        };
        if rem {
            let r = self.bin("urem", t, abs_a, abs_b);
            let neg_r = self.bin("sub", t, Operand::Int(0), r);
            self.sel(t, na, neg_r, r)
        } else {
            let q = self.bin("udiv", t, abs_a, abs_b);
            let neg_q = self.bin("sub", t, Operand::Int(0), q);
            let differ = self.bin("xor", "i1", na, nb);
            self.sel(t, differ, neg_q, q)
        }
    }

    /// A function the hooks implement (libdevice on NVPTX), on f32.
    fn math_call(&mut self, f: MathFn, args: &[Operand]) -> Operand {
        let name = self.hooks.math(f);
        let sig = vec!["float"; args.len()].join(", ");
        self.declare(format!("declare float @{name}({sig})"));
        if !name.starts_with("llvm.") {
            self.externals.insert(name.to_string());
        }
        let a: Vec<String> = args.iter().map(|a| format!("float {a}")).collect();
        self.inst(format!("call float @{name}({})", a.join(", ")))
    }

    fn unary_f32(&mut self, op: UnaryOp, x: Operand) -> Operand {
        match op {
            UnaryOp::Neg => self.inst(format!("fneg float {x}")),
            UnaryOp::Not => x,
            UnaryOp::Abs => self.call("float", "llvm.fabs.f32", &[("float", x)]),
            UnaryOp::Sqrt => self.call("float", "llvm.sqrt.f32", &[("float", x)]),
            UnaryOp::Floor => self.call("float", "llvm.floor.f32", &[("float", x)]),
            UnaryOp::Ceil => self.call("float", "llvm.ceil.f32", &[("float", x)]),
            UnaryOp::Round => self.call("float", "llvm.roundeven.f32", &[("float", x)]),
            UnaryOp::Exp => self.math_call(MathFn::Exp, &[x]),
            UnaryOp::Exp2 => self.math_call(MathFn::Exp2, &[x]),
            UnaryOp::Log => self.math_call(MathFn::Log, &[x]),
            UnaryOp::Log2 => self.math_call(MathFn::Log2, &[x]),
            UnaryOp::Rsqrt => self.math_call(MathFn::Rsqrt, &[x]),
            UnaryOp::Sin | UnaryOp::Cos if self.hooks.own_sin_cos() => {
                let v = self.val(x, DType::F32);
                tilekit_core::gpu::math::sin_cos(self, v, op == UnaryOp::Cos).op
            }
            UnaryOp::Sin => self.math_call(MathFn::Sin, &[x]),
            UnaryOp::Cos => self.math_call(MathFn::Cos, &[x]),
            UnaryOp::Tanh | UnaryOp::Erf if self.hooks.own_tanh_erf() => {
                let v = self.val(x, DType::F32);
                if op == UnaryOp::Tanh {
                    tilekit_core::gpu::math::tanh(self, v).op
                } else {
                    tilekit_core::gpu::math::erf(self, v).op
                }
            }
            UnaryOp::Tanh => self.math_call(MathFn::Tanh, &[x]),
            UnaryOp::Erf => self.math_call(MathFn::Erf, &[x]),
        }
    }

    fn binary_float(&mut self, op: BinaryOp, d: DType, a: Operand, b: Operand) -> Option<Operand> {
        let t = reg_ty(d);
        let sfx = if d == DType::F16 { "f16" } else { "f32" };
        Some(match op {
            BinaryOp::Add => self.bin("fadd", t, a, b),
            BinaryOp::Sub => self.bin("fsub", t, a, b),
            BinaryOp::Mul => self.bin("fmul", t, a, b),
            BinaryOp::Div => self.bin("fdiv", t, a, b),
            BinaryOp::Rem if d == DType::F32 => self.math_call(MathFn::Fmod, &[a, b]),
            BinaryOp::Max => self.call(t, &format!("llvm.maxnum.{sfx}"), &[(t, a), (t, b)]),
            BinaryOp::Min => self.call(t, &format!("llvm.minnum.{sfx}"), &[(t, a), (t, b)]),
            _ => return None,
        })
    }

    /// A value of any dtype but i64 as a 32-bit word, and back (shuffles move 32-bit words).
    fn pack_word(&mut self, d: DType, x: Operand) -> Operand {
        match d {
            DType::I1 | DType::I8 | DType::U8 | DType::I16 | DType::BF16 => self.inst(format!("zext {} {x} to i32", reg_ty(d))),
            DType::F32 => self.inst(format!("bitcast float {x} to i32")),
            DType::F16 => {
                let h = self.inst(format!("bitcast half {x} to i16"));
                self.inst(format!("zext i16 {h} to i32"))
            }
            _ => x,
        }
    }

    fn unpack_word(&mut self, d: DType, w: Operand) -> Operand {
        match d {
            DType::I1 | DType::I8 | DType::U8 | DType::I16 | DType::BF16 => self.inst(format!("trunc i32 {w} to {}", reg_ty(d))),
            DType::F32 => self.inst(format!("bitcast i32 {w} to float")),
            DType::F16 => {
                let h = self.inst(format!("trunc i32 {w} to i16"));
                self.inst(format!("bitcast i16 {h} to half"))
            }
            _ => w,
        }
    }

    fn check_yield(&mut self, results: &[DType], values: &[LlvmValue], what: &str) {
        if results.len() != values.len() {
            self.fail_contract(format!("the {what} yields {} values, the if declares {}", values.len(), results.len()));
            return;
        }
        for (i, (&d, v)) in results.iter().zip(values).enumerate() {
            self.expect(*v, d, &format!("value {i} yielded by the {what}"));
        }
    }
}

/// `v` wrapped to the width of integer dtype `d`, as the signed value LLVM prints.
/// Whether an instruction's text (after `%vN = `) computes its result from its operands alone,
/// without side effects or memory: the same text later in a block gives the same value.
fn is_pure(text: &str) -> bool {
    const PURE: &[&str] = &[
        "add",
        "sub",
        "mul",
        "udiv",
        "sdiv",
        "urem",
        "srem",
        "and",
        "or",
        "xor",
        "shl",
        "ashr",
        "lshr",
        "icmp",
        "fcmp",
        "select",
        "sext",
        "zext",
        "trunc",
        "getelementptr",
        "fpext",
        "fptrunc",
        "bitcast",
        "sitofp",
        "uitofp",
        "fptosi",
        "fptoui",
        "fadd",
        "fsub",
        "fmul",
        "fdiv",
        "frem",
        "fneg",
        "extractelement",
        "insertelement",
        "shufflevector",
        "extractvalue",
        "insertvalue",
    ];
    let op = text.split(' ').next().unwrap_or("");
    PURE.contains(&op)
}

/// `op` on two integer constants, or an identity (`x + 0`, `x * 1`, `x >> 0`, ...), as the
/// operand it reduces to; `None` where an instruction is needed.
fn fold_int(op: &str, ty: &str, a: Operand, b: Operand) -> Option<Operand> {
    let width: u32 = match ty {
        "i8" => 8,
        "i16" => 16,
        "i32" => 32,
        "i64" => 64,
        _ => return None,
    };
    let w = |v: i64| wrap_bits(width, v);
    // Constants are written sign-extended; unsigned operations see the low `width` bits.
    let unsigned = |v: i64| if width == 64 { v as u64 } else { (v as u64) & ((1u64 << width) - 1) };
    if let (Operand::Int(x), Operand::Int(y)) = (a, b) {
        let shift = (0..width as i64).contains(&y).then_some(y as u32);
        let r = match op {
            "add" => Some(w(x.wrapping_add(y))),
            "sub" => Some(w(x.wrapping_sub(y))),
            "mul" => Some(w(x.wrapping_mul(y))),
            "and" => Some(w(x & y)),
            "or" => Some(w(x | y)),
            "xor" => Some(w(x ^ y)),
            "shl" => shift.map(|s| w(x.wrapping_shl(s))),
            "ashr" => shift.map(|s| w(w(x) >> s)),
            "lshr" => shift.map(|s| w((unsigned(x) >> s) as i64)),
            _ => None,
        };
        return r.map(Operand::Int);
    }
    let zero = Operand::Int(0);
    let one = Operand::Int(1);
    match op {
        "add" | "or" | "xor" if a == zero => Some(b),
        "add" | "sub" | "or" | "xor" | "shl" | "ashr" | "lshr" if b == zero => Some(a),
        "mul" if a == one => Some(b),
        "mul" | "udiv" | "sdiv" if b == one => Some(a),
        "mul" | "and" if a == zero || b == zero => Some(zero),
        "and" if a == Operand::Int(-1) => Some(b),
        "and" if b == Operand::Int(-1) => Some(a),
        _ => None,
    }
}

fn wrap(d: DType, v: i64) -> i64 {
    wrap_bits(int_width(d), v)
}

/// `v` as an integer of `width` bits holds it: sign-extended, `i1` as 0 or 1.
fn wrap_bits(width: u32, v: i64) -> i64 {
    match width {
        1 => v & 1,
        8 => v as i8 as i64,
        16 => v as i16 as i64,
        32 => v as i32 as i64,
        _ => v,
    }
}

/// A program name as a symbol every assembler accepts (letters, digits, `_`, not starting with
/// a digit).
pub fn sanitize(name: &str) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert_str(0, "k_");
    }
    s
}

/// What [`Hooks`] write with: appends instructions to the kernel's current block.
pub struct Builder<'a> {
    lines: &'a mut Vec<String>,
    next_reg: &'a mut u32,
    declarations: &'a mut BTreeSet<String>,
}

impl Builder<'_> {
    /// Appends `%vN = text` and returns `%vN`.
    pub fn inst(&mut self, text: String) -> Operand {
        let r = *self.next_reg;
        *self.next_reg += 1;
        self.lines.push(format!("  %v{r} = {text}"));
        Operand::Reg(r)
    }

    /// Appends an instruction without a result.
    pub fn stmt(&mut self, text: String) {
        self.lines.push(format!("  {text}"));
    }

    /// Adds a module-level declaration (deduplicated).
    pub fn declare(&mut self, decl: String) {
        self.declarations.insert(decl);
    }

    /// Calls intrinsic or function `name` returning `ret` (`void` for none) on
    /// `(type, operand)` arguments, declaring it.
    pub fn call(&mut self, ret: &str, name: &str, args: &[(&str, Operand)]) -> Operand {
        let sig: Vec<&str> = args.iter().map(|(t, _)| *t).collect();
        self.declare(format!("declare {ret} @{name}({})", sig.join(", ")));
        let a: Vec<String> = args.iter().map(|(t, v)| format!("{t} {v}")).collect();
        if ret == "void" {
            self.stmt(format!("call void @{name}({})", a.join(", ")));
            Operand::Int(0)
        } else {
            self.inst(format!("call {ret} @{name}({})", a.join(", ")))
        }
    }
}

impl<H: Hooks> Emitter for LlvmEmitter<'_, H> {
    type V = LlvmValue;

    fn constant(&mut self, dtype: DType, value: Scalar) -> LlvmValue {
        let op = self.const_of(dtype, value);
        self.val(op, dtype)
    }

    fn thread_index(&mut self) -> LlvmValue {
        self.val(self.thread_index, DType::I32)
    }

    fn program_id(&mut self, axis: u32) -> LlvmValue {
        if axis > 2 {
            self.fail_contract(format!("program_id along axis {axis}"));
            return self.val(Operand::Int(0), DType::I32);
        }
        self.val(self.program_id[axis as usize], DType::I32)
    }

    fn num_programs(&mut self, axis: u32) -> LlvmValue {
        if axis > 2 {
            self.fail_contract(format!("num_programs along axis {axis}"));
            return self.val(Operand::Int(0), DType::I32);
        }
        self.val(self.num_programs[axis as usize], DType::I32)
    }

    fn scalar_param(&mut self, param: u32, dtype: DType) -> LlvmValue {
        match self.scalars.get(param as usize).copied().flatten() {
            Some(v) => {
                if v.dtype != dtype {
                    self.fail_contract(format!("scalar parameter {param} is {}, read as {dtype}", v.dtype));
                }
                v
            }
            None => {
                self.fail_contract(format!("parameter {param} is not a scalar parameter"));
                self.val(Operand::Int(0), dtype)
            }
        }
    }

    fn unary(&mut self, op: UnaryOp, dtype: DType, x: LlvmValue) -> LlvmValue {
        self.expect(x, dtype, "unary operand");
        let x = x.op;
        let r = match dtype {
            DType::I1 => match op {
                UnaryOp::Neg | UnaryOp::Abs => x,
                UnaryOp::Not => self.bin("xor", "i1", x, Operand::Bool(true)),
                _ => {
                    self.fail_contract(format!("{} on i1", op.name()));
                    x
                }
            },
            DType::F32 => self.unary_f32(op, x),
            DType::F16 => match op {
                UnaryOp::Neg => self.inst(format!("fneg half {x}")),
                UnaryOp::Abs => self.call("half", "llvm.fabs.f16", &[("half", x)]),
                UnaryOp::Not => x,
                _ => {
                    let xf = self.widen_to_f32(DType::F16, x);
                    let r = self.unary_f32(op, xf);
                    self.round_from_f32(DType::F16, r)
                }
            },
            DType::BF16 => match op {
                UnaryOp::Neg => self.bin("xor", "i16", x, Operand::Int(-0x8000)),
                UnaryOp::Abs => self.bin("and", "i16", x, Operand::Int(0x7fff)),
                UnaryOp::Not => x,
                _ => {
                    let xf = self.widen_to_f32(DType::BF16, x);
                    let r = self.unary_f32(op, xf);
                    self.round_from_f32(DType::BF16, r)
                }
            },
            d => {
                let t = reg_ty(d);
                let signed = d.is_signed_int();
                let h = self.hooks;
                let target_own = match op {
                    UnaryOp::Neg | UnaryOp::Abs if signed => h.wrapping_abs_neg(&mut self.builder(), op == UnaryOp::Neg, t, x),
                    _ => None,
                };
                if let Some(r) = target_own {
                    r
                } else {
                    match op {
                        UnaryOp::Neg => self.bin("sub", t, Operand::Int(0), x),
                        UnaryOp::Not => self.bin("xor", t, x, Operand::Int(-1)),
                        // `abs` of MIN wraps to MIN, as the interpreter's does.
                        UnaryOp::Abs if signed => self.call(t, &format!("llvm.abs.{t}"), &[(t, x), ("i1", Operand::Bool(false))]),
                        UnaryOp::Abs => x,
                        _ => {
                            self.fail_contract(format!("{} on integer dtype {d}", op.name()));
                            x
                        }
                    }
                }
            }
        };
        self.val(r, dtype)
    }

    fn binary(&mut self, op: BinaryOp, dtype: DType, a: LlvmValue, b: LlvmValue) -> LlvmValue {
        self.expect(a, dtype, "binary lhs");
        self.expect(b, dtype, "binary rhs");
        let (a, b) = (a.op, b.op);
        let r = match dtype {
            DType::I1 => match op {
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Xor => self.bin("xor", "i1", a, b),
                BinaryOp::Mul | BinaryOp::And | BinaryOp::Min => self.bin("and", "i1", a, b),
                BinaryOp::Or | BinaryOp::Max => self.bin("or", "i1", a, b),
                // The only valid divisor and shift amount of an i1 are 1 and 0.
                BinaryOp::Div | BinaryOp::Shl | BinaryOp::Shr => a,
                BinaryOp::Rem => Operand::Bool(false),
            },
            DType::F32 | DType::F16 if !(dtype == DType::F16 && op == BinaryOp::Rem) => match self.binary_float(op, dtype, a, b) {
                Some(r) => r,
                None => {
                    self.fail_contract(format!("{} on {dtype}", op.name()));
                    a
                }
            },
            DType::F16 | DType::BF16 => {
                // In f32, rounded once: the interpreter's semantics (and exact fmod for f16).
                let af = self.widen_to_f32(dtype, a);
                let bf = self.widen_to_f32(dtype, b);
                match self.binary_float(op, DType::F32, af, bf) {
                    Some(r) => self.round_from_f32(dtype, r),
                    None => {
                        self.fail_contract(format!("{} on {dtype}", op.name()));
                        a
                    }
                }
            }
            d => {
                let t = reg_ty(d);
                let signed = d.is_signed_int();
                match op {
                    BinaryOp::Add if d == DType::I32 => self.add_i32(a, b),
                    BinaryOp::Add => self.bin("add", t, a, b),
                    BinaryOp::Sub => self.bin("sub", t, a, b),
                    BinaryOp::Mul => self.bin("mul", t, a, b),
                    BinaryOp::Div if signed => self.signed_div_rem(false, d, a, b),
                    BinaryOp::Div => self.bin("udiv", t, a, b),
                    BinaryOp::Rem if signed => self.signed_div_rem(true, d, a, b),
                    BinaryOp::Rem => self.bin("urem", t, a, b),
                    BinaryOp::And => self.bin("and", t, a, b),
                    BinaryOp::Or => self.bin("or", t, a, b),
                    BinaryOp::Xor => self.bin("xor", t, a, b),
                    BinaryOp::Shl => self.bin("shl", t, a, b),
                    BinaryOp::Shr if signed => self.bin("ashr", t, a, b),
                    BinaryOp::Shr => self.bin("lshr", t, a, b),
                    BinaryOp::Max | BinaryOp::Min => {
                        let f = match (op, signed) {
                            (BinaryOp::Max, true) => "smax",
                            (BinaryOp::Max, false) => "umax",
                            (_, true) => "smin",
                            _ => "umin",
                        };
                        self.call(t, &format!("llvm.{f}.{t}"), &[(t, a), (t, b)])
                    }
                }
            }
        };
        if dtype == DType::I1 {
            self.note_cond(r);
        }
        self.val(r, dtype)
    }

    fn cmp(&mut self, pred: CmpPred, dtype: DType, a: LlvmValue, b: LlvmValue) -> LlvmValue {
        self.expect(a, dtype, "cmp lhs");
        self.expect(b, dtype, "cmp rhs");
        let (mut a, mut b) = (a.op, b.op);
        let r = match dtype {
            DType::I1 => {
                let p = match pred {
                    CmpPred::Eq => "eq",
                    CmpPred::Ne => "ne",
                    // false < true, as unsigned bits.
                    CmpPred::Lt => "ult",
                    CmpPred::Le => "ule",
                    CmpPred::Gt => "ugt",
                    CmpPred::Ge => "uge",
                };
                self.icmp(p, "i1", a, b)
            }
            DType::F16 | DType::F32 | DType::BF16 => {
                let mut t = reg_ty(dtype);
                if dtype == DType::BF16 {
                    a = self.widen_to_f32(dtype, a);
                    b = self.widen_to_f32(dtype, b);
                    t = "float";
                }
                let p = match pred {
                    CmpPred::Eq => "oeq",
                    CmpPred::Ne => "une",
                    CmpPred::Lt => "olt",
                    CmpPred::Le => "ole",
                    CmpPred::Gt => "ogt",
                    CmpPred::Ge => "oge",
                };
                self.inst(format!("fcmp {p} {t} {a}, {b}"))
            }
            d => {
                let s = d.is_signed_int();
                let p = match pred {
                    CmpPred::Eq => "eq",
                    CmpPred::Ne => "ne",
                    CmpPred::Lt if s => "slt",
                    CmpPred::Lt => "ult",
                    CmpPred::Le if s => "sle",
                    CmpPred::Le => "ule",
                    CmpPred::Gt if s => "sgt",
                    CmpPred::Gt => "ugt",
                    CmpPred::Ge if s => "sge",
                    CmpPred::Ge => "uge",
                };
                self.icmp(p, reg_ty(d), a, b)
            }
        };
        self.note_cond(r);
        self.val(r, DType::I1)
    }

    fn select(&mut self, dtype: DType, cond: LlvmValue, a: LlvmValue, b: LlvmValue) -> LlvmValue {
        self.expect(cond, DType::I1, "select condition");
        self.expect(a, dtype, "select true value");
        self.expect(b, dtype, "select false value");
        let r = self.sel(reg_ty(dtype), cond.op, a.op, b.op);
        self.val(r, dtype)
    }

    fn fma(&mut self, dtype: DType, a: LlvmValue, b: LlvmValue, c: LlvmValue) -> LlvmValue {
        self.expect(a, dtype, "fma a");
        self.expect(b, dtype, "fma b");
        self.expect(c, dtype, "fma c");
        let r = match dtype {
            DType::F32 => self.call("float", "llvm.fma.f32", &[("float", a.op), ("float", b.op), ("float", c.op)]),
            DType::F16 => self.call("half", "llvm.fma.f16", &[("half", a.op), ("half", b.op), ("half", c.op)]),
            DType::BF16 => {
                let af = self.widen_to_f32(dtype, a.op);
                let bf = self.widen_to_f32(dtype, b.op);
                let cf = self.widen_to_f32(dtype, c.op);
                let r = self.call("float", "llvm.fma.f32", &[("float", af), ("float", bf), ("float", cf)]);
                self.round_from_f32(dtype, r)
            }
            d if d.is_int() && d != DType::I1 => {
                let t = reg_ty(d);
                let m = self.bin("mul", t, a.op, b.op);
                self.bin("add", t, m, c.op)
            }
            d => {
                self.fail_contract(format!("fma on {d}"));
                a.op
            }
        };
        self.val(r, dtype)
    }

    fn cast(&mut self, from: DType, to: DType, x: LlvmValue) -> LlvmValue {
        self.expect(x, from, "cast operand");
        let x = x.op;
        if from == to {
            return self.val(x, to);
        }
        let r = if to == DType::I1 {
            match from {
                DType::F16 | DType::F32 => {
                    let zero = self.c_num(from, 0.0);
                    self.inst(format!("fcmp une {} {x}, {zero}", reg_ty(from)))
                }
                DType::BF16 => {
                    let mag = self.bin("and", "i16", x, Operand::Int(0x7fff));
                    self.icmp("ne", "i16", mag, Operand::Int(0))
                }
                d => self.icmp("ne", reg_ty(d), x, Operand::Int(0)),
            }
        } else if from == DType::I1 {
            let one = self.c_num(to, 1.0);
            let zero = self.c_num(to, 0.0);
            self.sel(reg_ty(to), x, one, zero)
        } else if to == DType::BF16 && matches!(from, DType::I32 | DType::U32 | DType::I64) {
            let xf = self.int_to_f32_round_odd(from, x);
            self.round_from_f32(to, xf)
        } else if to.is_float() {
            let xf = self.widen_to_f32(from, x);
            self.round_from_f32(to, xf)
        } else if from.is_float() {
            let xf = self.widen_to_f32(from, x);
            let t = reg_ty(to);
            let f = if to.is_signed_int() { "fptosi" } else { "fptoui" };
            self.call(t, &format!("llvm.{f}.sat.{t}.f32"), &[("float", xf)])
        } else {
            let (fw, tw) = (int_width(from), int_width(to));
            let (ft, tt) = (reg_ty(from), reg_ty(to));
            if fw == tw {
                x
            } else if tw < fw {
                self.inst(format!("trunc {ft} {x} to {tt}"))
            } else if from.is_signed_int() {
                self.inst(format!("sext {ft} {x} to {tt}"))
            } else {
                self.inst(format!("zext {ft} {x} to {tt}"))
            }
        };
        self.val(r, to)
    }

    fn bitcast(&mut self, from: DType, to: DType, x: LlvmValue) -> LlvmValue {
        self.expect(x, from, "bitcast operand");
        let r = match (from, to) {
            (DType::F32, DType::I32 | DType::U32) => self.inst(format!("bitcast float {} to i32", x.op)),
            (DType::I32 | DType::U32, DType::F32) => self.inst(format!("bitcast i32 {} to float", x.op)),
            _ => {
                self.fail_contract(format!("a bitcast from {from} to {to}"));
                x.op
            }
        };
        self.val(r, to)
    }

    fn load_global(&mut self, buffer: u32, dtype: DType, index: LlvmValue, index_dtype: DType) -> LlvmValue {
        let Some(p) = self.element_ptr(buffer, dtype, index, index_dtype, true, false, "load_global") else {
            return self.val(Operand::Int(0), dtype);
        };
        let gas = self.hooks.global_addrspace();
        let mt = mem_ty(dtype);
        let raw = self.inst(format!("load {mt}, ptr addrspace({gas}) {p}, align {}", dtype.size_bytes()));
        let r = self.reg_from_mem(dtype, raw);
        self.val(r, dtype)
    }

    fn store_global(&mut self, buffer: u32, dtype: DType, index: LlvmValue, index_dtype: DType, value: LlvmValue) {
        self.expect(value, dtype, "stored value");
        let Some(p) = self.element_ptr(buffer, dtype, index, index_dtype, false, true, "store_global") else {
            return;
        };
        let gas = self.hooks.global_addrspace();
        let v = self.reg_to_mem(dtype, value.op);
        self.stmt(format!("store {} {v}, ptr addrspace({gas}) {p}, align {}", mem_ty(dtype), dtype.size_bytes()));
    }

    fn atomic_global(
        &mut self,
        op: Option<AtomicOp>,
        buffer: u32,
        dtype: DType,
        index: LlvmValue,
        index_dtype: DType,
        cmp: Option<LlvmValue>,
        value: LlvmValue,
    ) -> LlvmValue {
        self.expect(value, dtype, "atomic value");
        if let Some(c) = cmp {
            self.expect(c, dtype, "atomic compare value");
        }
        let name = op.map_or("atomic_cas", |o| o.name());
        if !matches!(dtype, DType::I32 | DType::U32 | DType::I64 | DType::F32) {
            let err = LlvmError::Unsupported {
                kernel: self.kernel.clone(),
                what: format!("{name} on {dtype} buffers (atomics take i32, u32, i64 or f32)"),
            };
            self.fail(err);
            return self.val(Operand::Int(0), dtype);
        }
        let Some(p) = self.element_ptr(buffer, dtype, index, index_dtype, true, true, name) else {
            return self.val(Operand::Int(0), dtype);
        };
        let gas = self.hooks.global_addrspace();
        let t = reg_ty(dtype);
        let v = value.op;
        // Relaxed, at device scope (what GLSL's atomicAdd is).
        let scope = self.hooks.device_scope().map(|s| format!(" syncscope(\"{s}\")")).unwrap_or_default();
        let r = match op {
            Some(o) => {
                let rmw = match (o, dtype) {
                    (AtomicOp::Add, DType::F32) => "fadd",
                    (AtomicOp::Add, _) => "add",
                    (AtomicOp::Max, DType::F32) => "fmax",
                    (AtomicOp::Min, DType::F32) => "fmin",
                    (AtomicOp::Max, d) if d.is_signed_int() => "max",
                    (AtomicOp::Min, d) if d.is_signed_int() => "min",
                    (AtomicOp::Max, _) => "umax",
                    (AtomicOp::Min, _) => "umin",
                    (AtomicOp::Xchg, _) => "xchg",
                };
                self.inst(format!("atomicrmw {rmw} ptr addrspace({gas}) {p}, {t} {v}{scope} monotonic, align {}", dtype.size_bytes()))
            }
            None => {
                let Some(c) = cmp else {
                    self.fail_contract("compare-and-swap without a compare value".into());
                    return self.val(Operand::Int(0), dtype);
                };
                // cmpxchg takes integers: f32 goes through its bits.
                let (it, cv, nv) = if dtype == DType::F32 {
                    let cb = self.inst(format!("bitcast float {} to i32", c.op));
                    let nb = self.inst(format!("bitcast float {v} to i32"));
                    ("i32", cb, nb)
                } else {
                    (t, c.op, v)
                };
                let pair = self
                    .inst(format!("cmpxchg ptr addrspace({gas}) {p}, {it} {cv}, {it} {nv}{scope} monotonic monotonic, align {}", dtype.size_bytes()));
                let old = self.inst(format!("extractvalue {{ {it}, i1 }} {pair}, 0"));
                if dtype == DType::F32 {
                    self.inst(format!("bitcast i32 {old} to float"))
                } else {
                    old
                }
            }
        };
        self.val(r, dtype)
    }

    fn max_vector(&self, dtype: DType) -> u32 {
        (self.target.max_vector_bytes / dtype.size_bytes().max(1) as u32).max(1)
    }

    fn load_global_vec(&mut self, buffer: u32, dtype: DType, index: LlvmValue, index_dtype: DType, n: u32) -> Vec<LlvmValue> {
        if n <= 1 {
            return vec![self.load_global(buffer, dtype, index, index_dtype)];
        }
        let Some(p) = self.element_ptr(buffer, dtype, index, index_dtype, true, false, "load_global_vec") else {
            return vec![self.val(Operand::Int(0), dtype); n as usize];
        };
        let gas = self.hooks.global_addrspace();
        let mt = mem_ty(dtype);
        // `index` is a multiple of `n` and buffers are aligned to 16 bytes, so the vector is
        // aligned to its size: one `ld.global.v4` (or v2) per thread.
        let align = n as usize * dtype.size_bytes();
        if let Some(words) = byte_words(dtype, n as usize) {
            // Bytes as 32-bit words, taken apart with shifts: NVPTX splits a vector of more
            // than four bytes into 4-byte accesses, a vector of words not (and InstCombine turns
            // a bitcast of the loaded words back into a vector of bytes).
            let w = self.inst(format!("load <{words} x i32>, ptr addrspace({gas}) {p}, align {align}"));
            return (0..n)
                .map(|i| {
                    let word = self.inst(format!("extractelement <{words} x i32> {w}, i32 {}", i / 4));
                    let sh = if i % 4 == 0 { word } else { self.bin("lshr", "i32", word, Operand::Int(8 * (i % 4) as i64)) };
                    let raw = self.inst(format!("trunc i32 {sh} to i8"));
                    let r = self.reg_from_mem(dtype, raw);
                    self.val(r, dtype)
                })
                .collect();
        }
        let vec = self.inst(format!("load <{n} x {mt}>, ptr addrspace({gas}) {p}, align {align}"));
        (0..n)
            .map(|i| {
                let raw = self.inst(format!("extractelement <{n} x {mt}> {vec}, i32 {i}"));
                let r = self.reg_from_mem(dtype, raw);
                self.val(r, dtype)
            })
            .collect()
    }

    fn store_global_vec(&mut self, buffer: u32, dtype: DType, index: LlvmValue, index_dtype: DType, values: &[LlvmValue]) {
        let n = values.len();
        if n <= 1 {
            if let Some(&v) = values.first() {
                self.store_global(buffer, dtype, index, index_dtype, v);
            }
            return;
        }
        for (i, v) in values.iter().enumerate() {
            self.expect(*v, dtype, &format!("stored vector element {i}"));
        }
        let Some(p) = self.element_ptr(buffer, dtype, index, index_dtype, false, true, "store_global_vec") else {
            return;
        };
        let gas = self.hooks.global_addrspace();
        let mt = mem_ty(dtype);
        let align = n * dtype.size_bytes();
        if let Some(words) = byte_words(dtype, n) {
            // Bytes assembled into 32-bit words with shifts (see `load_global_vec`).
            let mut vec_text = "poison".to_string();
            for (k, chunk) in values.chunks(4).enumerate() {
                let mut word = Operand::Int(0);
                for (j, v) in chunk.iter().enumerate() {
                    let m = self.reg_to_mem(dtype, v.op);
                    let z = self.inst(format!("zext i8 {m} to i32"));
                    let part = if j == 0 { z } else { self.bin("shl", "i32", z, Operand::Int(8 * j as i64)) };
                    word = if j == 0 { part } else { self.bin("or", "i32", word, part) };
                }
                let vec = self.inst(format!("insertelement <{words} x i32> {vec_text}, i32 {word}, i32 {k}"));
                vec_text = vec.to_string();
            }
            self.stmt(format!("store <{words} x i32> {vec_text}, ptr addrspace({gas}) {p}, align {align}"));
            return;
        }
        let mut vec = Operand::Int(0);
        let mut vec_text = "poison".to_string();
        for (i, v) in values.iter().enumerate() {
            let m = self.reg_to_mem(dtype, v.op);
            vec = self.inst(format!("insertelement <{n} x {mt}> {vec_text}, {mt} {m}, i32 {i}"));
            vec_text = vec.to_string();
        }
        self.stmt(format!("store <{n} x {mt}> {vec}, ptr addrspace({gas}) {p}, align {align}"));
    }

    fn reserve_shared(&mut self, dtype: DType, len: u32) {
        let e = self.shared.entry(dtype).or_insert(0);
        *e = (*e).max(len);
    }

    fn load_shared(&mut self, dtype: DType, index: LlvmValue) -> LlvmValue {
        let Some(p) = self.shared_ptr(dtype, index, "load_shared") else {
            return self.val(Operand::Int(0), dtype);
        };
        let sas = self.hooks.shared_addrspace();
        let raw = self.inst(format!("load {}, ptr addrspace({sas}) {p}, align {}", mem_ty(dtype), dtype.size_bytes()));
        let r = self.reg_from_mem(dtype, raw);
        self.val(r, dtype)
    }

    fn store_shared(&mut self, dtype: DType, index: LlvmValue, value: LlvmValue) {
        self.expect(value, dtype, "shared store value");
        let Some(p) = self.shared_ptr(dtype, index, "store_shared") else {
            return;
        };
        let sas = self.hooks.shared_addrspace();
        let v = self.reg_to_mem(dtype, value.op);
        self.stmt(format!("store {} {v}, ptr addrspace({sas}) {p}, align {}", mem_ty(dtype), dtype.size_bytes()));
    }

    fn load_shared_vec(&mut self, dtype: DType, index: LlvmValue, n: u32) -> Vec<LlvmValue> {
        if n <= 1 || dtype.size_bytes() < 2 {
            return (0..n)
                .map(|i| {
                    let idx = self.add_i32(index.op, Operand::Int(i as i64));
                    let idx = self.val(idx, DType::I32);
                    self.load_shared(dtype, idx)
                })
                .collect();
        }
        let Some(p) = self.shared_ptr(dtype, index, "load_shared_vec") else {
            return vec![self.val(Operand::Int(0), dtype); n as usize];
        };
        let sas = self.hooks.shared_addrspace();
        let mt = mem_ty(dtype);
        // `index` is a multiple of `n` and every dtype's array is 16-byte aligned.
        let align = n as usize * dtype.size_bytes();
        let vec = self.inst(format!("load <{n} x {mt}>, ptr addrspace({sas}) {p}, align {align}"));
        (0..n)
            .map(|i| {
                let raw = self.inst(format!("extractelement <{n} x {mt}> {vec}, i32 {i}"));
                self.val(raw, dtype)
            })
            .collect()
    }

    fn store_shared_vec(&mut self, dtype: DType, index: LlvmValue, values: &[LlvmValue]) {
        let n = values.len();
        if n <= 1 || dtype.size_bytes() < 2 {
            for (i, &v) in values.iter().enumerate() {
                let idx = self.add_i32(index.op, Operand::Int(i as i64));
                let idx = self.val(idx, DType::I32);
                self.store_shared(dtype, idx, v);
            }
            return;
        }
        for (i, v) in values.iter().enumerate() {
            self.expect(*v, dtype, &format!("shared vector element {i}"));
        }
        let Some(p) = self.shared_ptr(dtype, index, "store_shared_vec") else {
            return;
        };
        let sas = self.hooks.shared_addrspace();
        let mt = mem_ty(dtype);
        let mut vec_text = "poison".to_string();
        for (i, v) in values.iter().enumerate() {
            let vec = self.inst(format!("insertelement <{n} x {mt}> {vec_text}, {mt} {}, i32 {i}", v.op));
            vec_text = vec.to_string();
        }
        self.stmt(format!("store <{n} x {mt}> {vec_text}, ptr addrspace({sas}) {p}, align {}", n * dtype.size_bytes()));
    }

    fn barrier(&mut self) {
        self.barriers += 1;
        let h = self.hooks;
        h.barrier(&mut self.builder());
    }

    fn round_tf32(&mut self, x: LlvmValue) -> Option<LlvmValue> {
        self.expect(x, DType::F32, "tf32 rounding");
        let h = self.hooks;
        let bits = h.round_tf32(&mut self.builder(), x.op)?;
        let f = self.inst(format!("bitcast i32 {bits} to float"));
        Some(self.val(f, DType::F32))
    }

    fn mma(&mut self, instr: MatrixInstr, a: &[LlvmValue], b: &[LlvmValue], c: &[LlvmValue]) -> Option<Vec<LlvmValue>> {
        if !matches!(instr.a, DType::F16 | DType::BF16 | DType::F32) || instr.b != instr.a {
            return None;
        }
        let (aw, bw) = if instr.a == DType::F32 {
            // tf32: one element per 32-bit word, its f32 bits (already rounded by the lowering).
            let words = |me: &mut Self, vals: &[LlvmValue]| -> Vec<Operand> {
                vals.iter()
                    .map(|&v| {
                        me.expect(v, DType::F32, "matrix operand");
                        me.inst(format!("bitcast float {} to i32", v.op))
                    })
                    .collect()
            };
            (words(self, a), words(self, b))
        } else {
            (self.pack_halves(a, instr.a), self.pack_halves(b, instr.b))
        };
        for &v in c {
            self.expect(v, DType::F32, "matrix accumulator");
        }
        let cw: Vec<Operand> = c.iter().map(|v| v.op).collect();
        let h = self.hooks;
        let d = h.mma(&mut self.builder(), &instr, &aw, &bw, &cw)?;
        Some(d.into_iter().map(|op| self.val(op, DType::F32)).collect())
    }

    fn wgmma(&mut self, instr: MatrixInstr, n: u32, a: WgmmaA<'_, LlvmValue>, b: SharedMatrix<LlvmValue>, c: &[LlvmValue]) -> Option<Vec<LlvmValue>> {
        if !matches!(instr.a, DType::F16 | DType::BF16) || instr.b != instr.a {
            return None;
        }
        let words;
        let a_op = match a {
            WgmmaA::Registers(vals) => {
                words = self.pack_halves(vals, instr.a);
                WgmmaOperand::Words(&words)
            }
            WgmmaA::Shared(m) => WgmmaOperand::Descriptor(self.matrix_descriptor(instr.a, m)?),
        };
        let b_desc = self.matrix_descriptor(instr.b, b)?;
        for &v in c {
            self.expect(v, DType::F32, "matrix accumulator");
        }
        let cw: Vec<Operand> = c.iter().map(|v| v.op).collect();
        self.uses_wgmma = true;
        let h = self.hooks;
        let d = h.wgmma(&mut self.builder(), &instr, n, a_op, b_desc, !b.k_major, &cw)?;
        Some(d.into_iter().map(|op| self.val(op, DType::F32)).collect())
    }

    fn wgmma_fence(&mut self) {
        let h = self.hooks;
        h.wgmma_fence(&mut self.builder());
    }

    fn wgmma_wait(&mut self, pending: u32, values: &[LlvmValue]) -> Vec<LlvmValue> {
        let ops: Vec<Operand> = values.iter().map(|v| v.op).collect();
        let h = self.hooks;
        let out = h.wgmma_wait(&mut self.builder(), pending, &ops);
        out.into_iter().zip(values).map(|(op, v)| self.val(op, v.dtype)).collect()
    }

    fn fence_async_shared(&mut self) {
        let h = self.hooks;
        h.fence_async_shared(&mut self.builder());
    }

    fn load_shared_matrix(&mut self, dtype: DType, row: LlvmValue, count: u32, trans: bool) -> Option<Vec<LlvmValue>> {
        let f32_words = dtype == DType::F32 && !trans;
        if !(matches!(dtype, DType::F16 | DType::BF16) || f32_words) || !matches!(count, 1 | 2 | 4) {
            return None;
        }
        let p = self.shared_ptr(dtype, row, "load_shared_matrix")?;
        let sas = self.hooks.shared_addrspace();
        let addr = self.inst(format!("ptrtoint ptr addrspace({sas}) {p} to i32"));
        let h = self.hooks;
        let words = h.load_shared_matrix(&mut self.builder(), addr, count, trans)?;
        if f32_words {
            // One 32-bit element a word.
            return Some(
                words
                    .into_iter()
                    .map(|w| {
                        let x = self.inst(format!("bitcast i32 {w} to float"));
                        self.val(x, DType::F32)
                    })
                    .collect(),
            );
        }
        let mut out = Vec::with_capacity(2 * words.len());
        for w in words {
            for shift in [0, 16] {
                let x = if shift == 0 { w } else { self.bin("lshr", "i32", w, Operand::Int(16)) };
                let x = self.inst(format!("trunc i32 {x} to i16"));
                let x = if dtype == DType::F16 { self.inst(format!("bitcast i16 {x} to half")) } else { x };
                out.push(self.val(x, dtype));
            }
        }
        Some(out)
    }

    fn async_copies(&self) -> bool {
        self.hooks.async_copies()
    }

    fn async_copy(&mut self, buffer: u32, dtype: DType, index: LlvmValue, index_dtype: DType, shared_index: LlvmValue, n: u32, pred: LlvmValue) {
        let src = self.global_address(buffer, dtype, index, index_dtype);
        let dst = self.shared_address(dtype, shared_index);
        self.async_copy_from(buffer, dtype, src, dst, n, pred);
    }

    fn global_address(&mut self, buffer: u32, dtype: DType, index: LlvmValue, index_dtype: DType) -> LlvmValue {
        let Some(src) = self.element_ptr(buffer, dtype, index, index_dtype, true, false, "global_address") else {
            return self.val(Operand::Int(0), DType::I64);
        };
        let gas = self.hooks.global_addrspace();
        let a = self.inst(format!("ptrtoint ptr addrspace({gas}) {src} to i64"));
        self.val(a, DType::I64)
    }

    fn address_step(&mut self, dtype: DType, elements: LlvmValue) -> LlvmValue {
        self.expect(elements, DType::I32, "address step");
        let wide = self.inst(format!("sext i32 {} to i64", elements.op));
        let bytes = self.bin("mul", "i64", wide, Operand::Int(dtype.size_bytes() as i64));
        self.val(bytes, DType::I64)
    }

    fn shared_address(&mut self, dtype: DType, index: LlvmValue) -> LlvmValue {
        let Some(p) = self.shared_ptr(dtype, index, "shared_address") else {
            return self.val(Operand::Int(0), DType::I32);
        };
        let sas = self.hooks.shared_addrspace();
        let a = self.inst(format!("ptrtoint ptr addrspace({sas}) {p} to i32"));
        self.val(a, DType::I32)
    }

    fn shared_step(&mut self, dtype: DType, elements: LlvmValue) -> LlvmValue {
        self.expect(elements, DType::I32, "shared step");
        let bytes = self.bin("mul", "i32", elements.op, Operand::Int(dtype.size_bytes() as i64));
        self.val(bytes, DType::I32)
    }

    fn async_copy_from(&mut self, buffer: u32, dtype: DType, address: LlvmValue, shared_address: LlvmValue, n: u32, pred: LlvmValue) {
        let _ = buffer;
        self.expect(pred, DType::I1, "async_copy predicate");
        self.expect(address, DType::I64, "async_copy address");
        self.expect(shared_address, DType::I32, "async_copy shared address");
        if n as usize * dtype.size_bytes() != 16 {
            self.fail_contract(format!("async_copy of {n} x {dtype} (16 bytes expected)"));
            return;
        }
        // Masked off: the source is not read (its address may lie outside the buffer) and the
        // destination becomes zeros.
        let h = self.hooks;
        h.async_copy(&mut self.builder(), shared_address.op, address.op, pred.op);
    }

    fn async_commit(&mut self) {
        let h = self.hooks;
        h.async_commit(&mut self.builder());
    }

    fn tensor_copies(&self) -> bool {
        self.hooks.tensor_copies()
    }

    fn mbarrier_init(&mut self, barrier: LlvmValue) {
        let Some(bar) = self.shared_address_of(DType::I64, barrier, "mbarrier_init") else { return };
        let h = self.hooks;
        h.mbarrier_init(&mut self.builder(), bar);
    }

    fn mbarrier_init_fence(&mut self) {
        let h = self.hooks;
        h.mbarrier_init_fence(&mut self.builder());
    }

    fn mbarrier_invalidate(&mut self, barrier: LlvmValue) {
        let Some(bar) = self.shared_address_of(DType::I64, barrier, "mbarrier_invalidate") else { return };
        let h = self.hooks;
        h.mbarrier_invalidate(&mut self.builder(), bar);
    }

    fn mbarrier_expect(&mut self, barrier: LlvmValue, bytes: u32) {
        let Some(bar) = self.shared_address_of(DType::I64, barrier, "mbarrier_expect") else { return };
        let h = self.hooks;
        h.mbarrier_expect(&mut self.builder(), bar, bytes);
    }

    fn mbarrier_wait(&mut self, barrier: LlvmValue, parity: LlvmValue) {
        self.expect(parity, DType::I32, "mbarrier_wait parity");
        let Some(bar) = self.shared_address_of(DType::I64, barrier, "mbarrier_wait") else { return };
        let h = self.hooks;
        h.mbarrier_wait(&mut self.builder(), bar, parity.op);
    }

    fn tensor_copy(&mut self, map: u32, dtype: DType, shared_index: LlvmValue, coords: [LlvmValue; 2], barrier: LlvmValue) {
        for c in coords {
            self.expect(c, DType::I32, "tensor_copy coordinate");
        }
        let Some(dst) = self.shared_address_of(dtype, shared_index, "tensor_copy") else { return };
        let Some(bar) = self.shared_address_of(DType::I64, barrier, "tensor_copy barrier") else { return };
        self.tensor_maps = self.tensor_maps.max(map + 1);
        let address = self.inst(format!("ptrtoint ptr %tmap{map} to i64"));
        let h = self.hooks;
        h.tensor_copy(&mut self.builder(), address, dst, [coords[0].op, coords[1].op], bar);
    }

    fn async_wait(&mut self, pending: u32) {
        let h = self.hooks;
        h.async_wait(&mut self.builder(), pending);
    }

    fn shuffle_xor(&mut self, dtype: DType, value: LlvmValue, lane_mask: u32) -> LlvmValue {
        self.expect(value, dtype, "shuffle value");
        let h = self.hooks;
        let warp = self.target.subgroup_size;
        let r = if dtype == DType::I64 {
            let lo = self.inst(format!("trunc i64 {} to i32", value.op));
            let hi64 = self.bin("lshr", "i64", value.op, Operand::Int(32));
            let hi = self.inst(format!("trunc i64 {hi64} to i32"));
            let lo = h.shuffle_xor_i32(&mut self.builder(), lo, lane_mask, warp);
            let hi = h.shuffle_xor_i32(&mut self.builder(), hi, lane_mask, warp);
            let lo = self.inst(format!("zext i32 {lo} to i64"));
            let hi = self.inst(format!("zext i32 {hi} to i64"));
            let hi = self.bin("shl", "i64", hi, Operand::Int(32));
            self.bin("or", "i64", hi, lo)
        } else {
            let w = self.pack_word(dtype, value.op);
            let s = h.shuffle_xor_i32(&mut self.builder(), w, lane_mask, warp);
            self.unpack_word(dtype, s)
        };
        self.val(r, dtype)
    }

    fn begin_if(&mut self, cond: LlvmValue, result_dtypes: &[DType]) {
        self.expect(cond, DType::I1, "if condition");
        let (merge, then_label, else_label) = (self.label(), self.label(), self.label());
        // A condition made before a barrier, in the same loop region: branch on it frozen.
        // LLVM's CodeGenPrepare copies a compare into the block of each branch it feeds, which
        // keeps the compare's operands live across the barrier (for softmax's masked stores
        // after its reductions, a 32-bit register per vector where a predicate would do: 32
        // warps at occupancy 2 spilled). Across a loop the copy is the better trade (the loop
        // needs the predicates more), so there the compare is left to LLVM. Freezing a
        // condition that is never poison changes no value.
        let cond = match cond.op {
            Operand::Reg(r) if self.cond_made.get(&r).is_some_and(|&(b, l)| b < self.barriers && l == self.loop_marks) => {
                self.builder().inst(format!("freeze i1 {}", cond.op))
            }
            c => c,
        };
        self.stmt(format!("br i1 {cond}, label %L{then_label}, label %L{else_label}"));
        self.begin_block(then_label);
        self.frames.push(Frame::If { merge, else_label, results: result_dtypes.to_vec(), then_out: None });
    }

    fn begin_else(&mut self, then_values: &[LlvmValue]) {
        let cur = self.cur_block;
        let (merge, else_label, results) = match self.frames.last_mut() {
            Some(Frame::If { merge, else_label, results, then_out }) if then_out.is_none() => {
                *then_out = Some((cur, then_values.to_vec()));
                (*merge, *else_label, results.clone())
            }
            _ => {
                self.fail_contract("begin_else outside an open then-branch".into());
                return;
            }
        };
        self.check_yield(&results, then_values, "then-branch");
        self.br(merge);
        self.begin_block(else_label);
    }

    fn end_if(&mut self, else_values: &[LlvmValue]) -> Vec<LlvmValue> {
        if !matches!(self.frames.last(), Some(Frame::If { .. })) {
            self.fail_contract("end_if without an open if".into());
            return Vec::new();
        }
        let Some(Frame::If { merge, else_label, results, then_out }) = self.frames.pop() else {
            return Vec::new();
        };
        let then_out = match then_out {
            Some(t) => t,
            None => {
                if !results.is_empty() {
                    self.fail_contract("end_if without begin_else on an if that yields values".into());
                    return Vec::new();
                }
                let cur = self.cur_block;
                self.br(merge);
                self.begin_block(else_label);
                (cur, Vec::new())
            }
        };
        self.check_yield(&results, else_values, "else-branch");
        let else_block = self.cur_block;
        self.br(merge);
        self.begin_block(merge);
        let mut out = Vec::with_capacity(results.len());
        for (i, &d) in results.iter().enumerate() {
            let (Some(t), Some(e)) = (then_out.1.get(i), else_values.get(i)) else { break };
            let r = self.inst(format!("phi {} [ {}, %L{} ], [ {}, %L{else_block} ]", reg_ty(d), t.op, then_out.0, e.op));
            out.push(self.val(r, d));
        }
        out
    }

    fn begin_loop(
        &mut self,
        iv_dtype: DType,
        lower: LlvmValue,
        upper: LlvmValue,
        step: LlvmValue,
        carried: &[(DType, LlvmValue)],
    ) -> (LlvmValue, Vec<LlvmValue>) {
        self.loop_marks += 1;
        self.expect(lower, iv_dtype, "loop lower bound");
        self.expect(upper, iv_dtype, "loop upper bound");
        self.expect(step, iv_dtype, "loop step");
        for (i, &(d, v)) in carried.iter().enumerate() {
            self.expect(v, d, &format!("loop-carried value {i}"));
        }
        if !iv_dtype.is_int() || iv_dtype == DType::I1 {
            self.fail_contract(format!("loop induction variable of dtype {iv_dtype}"));
        }
        let t = reg_ty(iv_dtype);
        let signed = iv_dtype.is_signed_int();
        let (lo, hi) = iv_dtype.int_range().unwrap_or((0, 0));
        // Loop-invariant pieces, in the preheader: the direction, the last iv from which a step
        // would leave the dtype (the loop stops there instead of wrapping, as the interpreter
        // does), and whether the first iteration runs at all. A zero step runs nothing.
        let (lt, gt) = if signed { ("slt", "sgt") } else { ("ult", "ugt") };
        let step_pos = self.icmp(gt, t, step.op, Operand::Int(0));
        let up_lim = self.bin("sub", t, Operand::Int(wrap(iv_dtype, hi)), step.op);
        let down_lim = self.bin("sub", t, Operand::Int(wrap(iv_dtype, lo)), step.op);
        let limit = self.sel(t, step_pos, up_lim, down_lim);
        let first_up = self.icmp(lt, t, lower.op, upper.op);
        let first_down = self.icmp(gt, t, lower.op, upper.op);
        let first = self.sel("i1", step_pos, first_up, first_down);
        let nonzero = self.icmp("ne", t, step.op, Operand::Int(0));
        let first = self.bin("and", "i1", first, nonzero);
        let pre = self.cur_block;
        let (header, body, merge) = (self.label(), self.label(), self.label());
        self.br(header);
        self.begin_block(header);
        // Phis are written with their back-edge operands at `end_loop`; their lines are kept.
        let mut phis = Vec::new();
        let mut push_phi = |e: &mut Self, d: DType, init: Operand| -> Operand {
            let r = e.inst(String::new());
            phis.push((e.lines.len() - 1, d, init, pre));
            r
        };
        let iv = push_phi(self, iv_dtype, lower.op);
        let go = push_phi(self, DType::I1, first);
        let mut inner = Vec::with_capacity(carried.len());
        for &(d, v) in carried {
            let r = push_phi(self, d, v.op);
            inner.push(self.val(r, d));
        }
        self.stmt(format!("br i1 {go}, label %L{body}, label %L{merge}"));
        self.begin_block(body);
        let ivv = self.val(iv, iv_dtype);
        let unroll = self.next_unroll.take();
        self.frames.push(Frame::Loop { header, merge, phis, iv: ivv, step: step.op, upper: upper.op, step_pos, limit, unroll });
        (ivv, inner)
    }

    fn mark_dot_loop(&mut self) {
        self.next_unroll = self.hooks.dot_loop_unroll();
    }

    fn end_loop(&mut self, next: &[LlvmValue]) -> Vec<LlvmValue> {
        self.loop_marks += 1;
        if !matches!(self.frames.last(), Some(Frame::Loop { .. })) {
            self.fail_contract("end_loop without an open loop".into());
            return Vec::new();
        }
        let Some(Frame::Loop { header, merge, phis, iv, step, upper, step_pos, limit, unroll }) = self.frames.pop() else {
            return Vec::new();
        };
        let carried = &phis[2..];
        if next.len() != carried.len() {
            self.fail_contract(format!("end_loop with {} values for {} carried", next.len(), carried.len()));
        }
        let t = reg_ty(iv.dtype);
        let signed = iv.dtype.is_signed_int();
        let (lt, gt) = if signed { ("slt", "sgt") } else { ("ult", "ugt") };
        let iv_next = self.bin("add", t, iv.op, step);
        let over_up = self.icmp(gt, t, iv.op, limit);
        let over_down = self.icmp(lt, t, iv.op, limit);
        let overflow = self.sel("i1", step_pos, over_up, over_down);
        let in_up = self.icmp(lt, t, iv_next, upper);
        let in_down = self.icmp(gt, t, iv_next, upper);
        let in_range = self.sel("i1", step_pos, in_up, in_down);
        let no_overflow = self.bin("xor", "i1", overflow, Operand::Bool(true));
        let go_next = self.bin("and", "i1", no_overflow, in_range);
        let latch = self.cur_block;
        match unroll {
            // Loop metadata hangs on the latch's branch. Its nodes are numbered from LOOP_MD up,
            // clear of the few the hooks' module metadata uses.
            Some(count) => {
                let id = LOOP_MD + self.loop_metadata.len() as u32;
                let hint = if count <= 1 {
                    "!{!\"llvm.loop.unroll.disable\"}".to_string()
                } else {
                    format!("!{{!\"llvm.loop.unroll.count\", i32 {count}}}")
                };
                self.loop_metadata.push(format!("!{id} = distinct !{{!{id}, !{}}}", id + 1));
                self.loop_metadata.push(format!("!{} = {hint}", id + 1));
                self.stmt(format!("br label %L{header}, !llvm.loop !{id}"));
            }
            None => self.br(header),
        }
        self.begin_block(merge);
        let mut backs = vec![iv_next, go_next];
        for (i, &(_, d, init, _)) in carried.iter().enumerate() {
            let v = next.get(i).copied().unwrap_or(LlvmValue { op: init, dtype: d });
            self.expect(v, d, &format!("next value of loop-carried value {i}"));
            backs.push(v.op);
        }
        let mut out = Vec::with_capacity(carried.len());
        for (k, &(line, d, init, pre)) in phis.iter().enumerate() {
            let reg = self.lines[line].trim_start().split(' ').next().unwrap_or("").to_string();
            self.lines[line] = format!("  {reg} = phi {} [ {init}, %L{pre} ], [ {}, %L{latch} ]", reg_ty(d), backs[k]);
            if k >= 2 {
                let r = reg.trim_start_matches("%v").parse().map(Operand::Reg).unwrap_or(Operand::Int(0));
                out.push(self.val(r, d));
            }
        }
        out
    }
}
