//! The kernel library: each kernel is written once with the builder, with an f64 reference in
//! plain Rust, the shapes it is tested on, and the bytes and FLOPs a problem must move.
//!
//! A kernel turns a [`Problem`] (shape, dtype, options) and a [`Config`] (meta-parameters) into a
//! [`Plan`]: the buffers to allocate and one or more launches. Plans are device-independent; the
//! harness in [`crate::check`] runs them on any device and compares with the reference.

use std::collections::BTreeMap;
use std::fmt;

use rand::rngs::StdRng;
use tilekit_core::gpu::Target;
use tilekit_core::{Config, ConfigError, DType, HostBuffer, Program, Scalar};

pub mod argmax;
pub mod attention;
pub mod cross_entropy;
pub mod cumsum;
pub mod gelu;
pub mod histogram;
pub mod layernorm;
pub mod matmul;
pub mod rmsnorm;
pub mod rmsnorm_quant;
pub mod rotary;
pub mod softmax;
pub mod softmax_online;
pub mod spmv;
pub mod sum;
pub mod swiglu;
pub mod transpose;
pub mod vector_add;

/// What one run computes: a shape, the element dtype and kernel-specific options.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Problem {
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Kernel-specific switches (`causal=1`, `residual=1`, `act=gelu`), printed as `k=v`.
    pub opts: BTreeMap<String, String>,
}

impl Problem {
    pub fn new(shape: &[usize], dtype: DType) -> Problem {
        Problem { shape: shape.to_vec(), dtype, opts: BTreeMap::new() }
    }

    pub fn with(mut self, key: &str, value: &str) -> Problem {
        self.opts.insert(key.to_string(), value.to_string());
        self
    }

    pub fn opt(&self, key: &str) -> Option<&str> {
        self.opts.get(key).map(String::as_str)
    }

    /// True when the option is `1` or `true`. Other values are refused before a plan is made
    /// ([`Kernel::check_problem`]), so no spelling means "on" by accident.
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.opt(key), Some("1" | "true"))
    }

    /// `shape[i]`, or an error naming the kernel's expected shape.
    pub fn dim(&self, i: usize, expected: &str) -> Result<usize, KernelError> {
        self.shape.get(i).copied().ok_or_else(|| KernelError::Shape { shape: self.shape.clone(), expected: expected.to_string() })
    }

    /// Parses `4096x1024` (or `4096,1024`) into a shape.
    pub fn parse_shape(text: &str) -> Result<Vec<usize>, KernelError> {
        text.split(['x', 'X', ','])
            .map(|d| {
                let d = d.trim();
                let v = parse_size(d).ok_or_else(|| KernelError::Parse(format!("`{d}` in shape `{text}` is not a size")))?;
                Ok(v)
            })
            .collect()
    }

    /// `4096x1024 f32 causal=1`.
    pub fn shape_string(&self) -> String {
        self.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
    }
}

/// Parses `1024`, `2^20` or `1M`/`1K`.
fn parse_size(s: &str) -> Option<usize> {
    if let Some((b, e)) = s.split_once('^') {
        let b: usize = b.parse().ok()?;
        let e: u32 = e.parse().ok()?;
        return b.checked_pow(e);
    }
    let (num, mul) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1usize << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mul)
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.shape_string(), self.dtype)?;
        for (k, v) in &self.opts {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// What values an option of a kernel takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionKind {
    /// `0`, `1`, `true` or `false`.
    Bool,
    /// A finite number.
    Float,
    /// One of these words.
    Choice(&'static [&'static str]),
}

impl OptionKind {
    /// Why `value` is not one of this kind's values, or `None` when it is.
    pub fn reject(self, value: &str) -> Option<String> {
        match self {
            OptionKind::Bool => (!matches!(value, "0" | "1" | "true" | "false")).then(|| "expected 0, 1, true or false".to_string()),
            OptionKind::Float => (!value.parse::<f64>().is_ok_and(f64::is_finite)).then(|| "expected a finite number".to_string()),
            OptionKind::Choice(words) => (!words.contains(&value)).then(|| format!("expected one of {}", words.join(", "))),
        }
    }
}

impl fmt::Display for OptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionKind::Bool => f.write_str("0|1"),
            OptionKind::Float => f.write_str("<float>"),
            OptionKind::Choice(words) => f.write_str(&words.join("|")),
        }
    }
}

/// One option a kernel reads from [`Problem::opts`]: its declared schema, checked before a
/// plan is made so that a misspelt key or an unreadable value is refused, never ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionSpec {
    pub name: &'static str,
    pub kind: OptionKind,
    /// What it does, for `tilekit kernels`.
    pub doc: &'static str,
}

impl fmt::Display for OptionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.kind)
    }
}

/// `causal=0|1, sm_scale=<float>`, or `none` for a kernel without options.
pub fn options_doc(options: &[OptionSpec]) -> String {
    if options.is_empty() {
        return "none".into();
    }
    options.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(", ")
}

/// Bytes and floating-point operations a problem must move and do at the least (each input read
/// once, each output written once), counted from the problem, not from a kernel's traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    pub bytes: u64,
    pub flops: u64,
}

/// Who provides a buffer's contents before the launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Filled from [`Kernel::inputs`], in plan order.
    Input,
    /// Compared with [`Kernel::reference`], in plan order. Poisoned before the run unless
    /// `zeroed`, so an element the kernel forgot to write cannot pass.
    Output { zeroed: bool },
    /// Temporary storage between launches, zero-filled.
    Scratch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferSpec {
    pub name: String,
    pub dtype: DType,
    pub len: usize,
    pub role: Role,
}

/// One launch argument: a buffer of the plan or a scalar.
#[derive(Clone, Debug, PartialEq)]
pub enum LaunchArg {
    Buffer(usize),
    Scalar(Scalar),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub program: Program,
    pub grid: [u32; 3],
    pub args: Vec<LaunchArg>,
}

/// Buffers and launches for one problem under one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub buffers: Vec<BufferSpec>,
    pub launches: Vec<Launch>,
}

impl Plan {
    pub fn inputs(&self) -> impl Iterator<Item = (usize, &BufferSpec)> {
        self.buffers.iter().enumerate().filter(|(_, b)| b.role == Role::Input)
    }
    pub fn outputs(&self) -> impl Iterator<Item = (usize, &BufferSpec)> {
        self.buffers.iter().enumerate().filter(|(_, b)| matches!(b.role, Role::Output { .. }))
    }
}

/// Why a kernel cannot plan a problem.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelError {
    #[error("shape {shape:?} does not fit this kernel: expected {expected}")]
    Shape { shape: Vec<usize>, expected: String },
    #[error("dtype {dtype} is not supported (supported: {supported})")]
    DType { dtype: DType, supported: String },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the configuration is not valid for this problem: {0}")]
    BadConfig(String),
    /// A valid configuration that this problem would make spill or waste (tuning skips it).
    #[error("the configuration does not fit this problem: {0}")]
    Unfit(String),
    #[error("the kernel failed to build: {0}")]
    Build(#[from] tilekit_core::verify::VerifyError),
    #[error("{0}")]
    Parse(String),
    #[error("no option `{key}`; options: {known}")]
    UnknownOption { key: String, known: String },
    #[error("option {key}=`{value}`: {why}")]
    BadOption { key: String, value: String, why: String },
}

/// The configuration an untuned run of `problem` on `target` takes: the kernel's default, or,
/// where the default does not fit the problem there (`KernelError::Unfit`), the first of its
/// list that plans it.
pub fn default_config_for(kernel: &dyn Kernel, problem: &Problem, target: &Target) -> Config {
    let configs = kernel.configs();
    let default = configs.first().cloned().unwrap_or_default();
    match kernel.plan_on(problem, &default, target) {
        Err(KernelError::Unfit(_)) => configs.into_iter().find(|c| kernel.plan_on(problem, c, target).is_ok()).unwrap_or(default),
        _ => default,
    }
}

/// Threads of one program of `config` on `target`: its warps of the target's width.
pub fn program_threads(config: &Config, target: &Target) -> usize {
    target.subgroup_size.max(1) as usize * config.num_warps().max(1)
}

/// Checks that `held` values a thread keeps in registers (what [`Kernel::build_plan`] counts for
/// its configuration) stay within `share` (numerator, denominator) of the registers a thread has
/// on `target` ([`Target::register_share`]; nothing bounds them where the target counts none).
/// Past it the configuration is [`KernelError::Unfit`] there: `what` says what is held (it
/// starts the message, `held` among its words), `why` what the rest of the file is for.
pub fn check_held(held: usize, share: (u32, u32), target: &Target, what: &str, why: &str) -> Result<(), KernelError> {
    match target.register_share(share.0, share.1).filter(|&most| held > most) {
        None => Ok(()),
        Some(most) => Err(KernelError::Unfit(format!(
            "{what} in registers, more than the {most} ({}/{} of the {} a thread has on {}) that leave room for {why}",
            share.0, share.1, target.registers_per_thread, target.name
        ))),
    }
}

/// Checks a configuration's `occupancy` (programs per multiprocessor the code generator leaves
/// registers for) on `target`: a count, and only where the backend passes it on. Only ptxas
/// takes such a request (`.minnctapersm`); SPIR-V and AMDGCN would build the same program as
/// without it, so there the configuration is unfit rather than timed twice.
pub fn check_occupancy(config: &Config, target: &Target) -> Result<(), KernelError> {
    if config.get("occupancy").is_err() {
        return Ok(());
    }
    config.count("occupancy")?;
    if target.isa != tilekit_core::gpu::Isa::Ptx {
        return Err(KernelError::Unfit(format!(
            "`occupancy` reaches only ptxas (.minnctapersm); {} would build the same program as without it",
            target.name
        )));
    }
    Ok(())
}

/// What an output must match its reference within: it passes when its norm-wise relative
/// error ‖out − ref‖₂ / ‖ref‖₂ is at most `rel`, or when every element lies within `abs` of the
/// reference (for integers, `abs: 1.0` accepts off-by-one). NaN matches only NaN, and an
/// infinity only itself, whatever the bounds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Tolerance {
    pub rel: f64,
    pub abs: f64,
}

impl Tolerance {
    /// Bit-exact values (up to the sign of zero, which f64 comparison ignores).
    pub const EXACT: Tolerance = Tolerance { rel: 0.0, abs: 0.0 };

    /// A norm-wise relative bound.
    pub const fn rel(rel: f64) -> Tolerance {
        Tolerance { rel, abs: 0.0 }
    }

    /// An element-wise absolute bound.
    pub const fn abs(abs: f64) -> Tolerance {
        Tolerance { rel: 0.0, abs }
    }
}

/// A library kernel.
pub trait Kernel: Send + Sync {
    /// Short name used by the CLI (`softmax`).
    fn name(&self) -> &'static str;
    /// One line for `tilekit kernels`.
    fn description(&self) -> &'static str;
    /// Element dtypes the kernel supports; the first is the default.
    fn dtypes(&self) -> &'static [DType];
    /// What a shape means, for messages and help: `"N"`, `"ROWS x COLS"`.
    fn shape_doc(&self) -> &'static str;
    /// A representative problem (the CLI's default).
    fn default_problem(&self) -> Problem;
    /// Problems the tests run: sizes that are not multiples of the block (1, primes, odd rows),
    /// every option. Run once per supported dtype.
    fn test_problems(&self, dtype: DType) -> Vec<Problem>;
    /// The configuration space; the first is the default. Tests run at least two of them.
    fn configs(&self) -> Vec<Config>;
    /// The kernel's own planning of `problem` under `config` on `target`, which
    /// [`Kernel::plan_on`] calls after the checks every kernel shares: a configuration that
    /// would hold more in registers than the target's file leaves room for, counted with its
    /// warp width, is [`KernelError::Unfit`] there (and may fit another target). The backend's
    /// static report (ptxas's spills) decides what this cannot see. Call `plan_on`, not this.
    fn build_plan(&self, problem: &Problem, config: &Config, target: &Target) -> Result<Plan, KernelError>;
    /// Buffers and launches for `problem` under `config` on `target`. The lowering reads
    /// `num_warps` and `occupancy` from every configuration, whatever the kernel's list holds,
    /// so what they ask is checked here for every kernel ([`check_occupancy`]: an `occupancy`
    /// only where the backend passes it on) before [`Kernel::build_plan`].
    fn plan_on(&self, problem: &Problem, config: &Config, target: &Target) -> Result<Plan, KernelError> {
        check_occupancy(config, target)?;
        self.build_plan(problem, config, target)
    }
    /// [`Kernel::plan_on`] for the conservative baseline GPU ([`Target::vulkan_baseline`]: warps
    /// of 32, 255 registers a thread), what the interpreter and a device-less caller plan for.
    fn plan(&self, problem: &Problem, config: &Config) -> Result<Plan, KernelError> {
        self.plan_on(problem, config, &Target::vulkan_baseline())
    }
    /// Random input contents (never all zeros), one per [`Role::Input`] buffer in plan order.
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer>;
    /// The f64 reference, one vector per [`Role::Output`] buffer in plan order, computed from the
    /// inputs as stored (after rounding to their dtype).
    fn reference(&self, problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>>;
    /// Largest accepted relative error ‖out − ref‖₂ / ‖ref‖₂ for an output of `dtype`
    /// (0 means exact).
    fn tolerance(&self, problem: &Problem) -> f64 {
        default_tolerance(problem.dtype)
    }
    /// What output `index` (counted among the plan's outputs), of `dtype`, must match its
    /// reference within: [`Kernel::tolerance`] for floats, exact for integers. A kernel whose
    /// integer output may differ legitimately widens it: a quantised value rounds the other
    /// way when the float it came from differs in its last bit, so `Tolerance::abs(1.0)`.
    fn output_tolerance(&self, problem: &Problem, index: usize, dtype: DType) -> Tolerance {
        let _ = index;
        if dtype.is_float() {
            Tolerance::rel(self.tolerance(problem))
        } else {
            Tolerance::EXACT
        }
    }
    /// Bytes and FLOPs the problem needs.
    fn cost(&self, problem: &Problem) -> Cost;
    /// The options the kernel reads from [`Problem::opts`]; none by default.
    fn options(&self) -> &'static [OptionSpec] {
        &[]
    }

    /// Checks every option of `problem` is one the kernel declares, with a value of its kind.
    fn check_options(&self, problem: &Problem) -> Result<(), KernelError> {
        let specs = self.options();
        for (key, value) in &problem.opts {
            let spec =
                specs.iter().find(|s| s.name == key).ok_or_else(|| KernelError::UnknownOption { key: key.clone(), known: options_doc(specs) })?;
            if let Some(why) = spec.kind.reject(value) {
                return Err(KernelError::BadOption { key: key.clone(), value: value.clone(), why });
            }
        }
        Ok(())
    }

    /// Checks the problem's dtype and options: what every `plan` does first.
    fn check_problem(&self, problem: &Problem) -> Result<(), KernelError> {
        self.check_dtype(problem)?;
        self.check_options(problem)
    }

    /// Checks `problem.dtype` is supported.
    fn check_dtype(&self, problem: &Problem) -> Result<(), KernelError> {
        if self.dtypes().contains(&problem.dtype) {
            Ok(())
        } else {
            Err(KernelError::DType { dtype: problem.dtype, supported: self.dtypes().iter().map(|d| d.name()).collect::<Vec<_>>().join(", ") })
        }
    }
}

/// Relative-error bound by dtype for floating-point results computed with f32 arithmetic.
pub fn default_tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 0.0,
    }
}

/// Every library kernel.
pub fn all() -> Vec<Box<dyn Kernel>> {
    vec![
        Box::new(vector_add::VectorAdd),
        Box::new(softmax::Softmax),
        Box::new(softmax_online::SoftmaxOnline),
        Box::new(layernorm::LayerNorm),
        Box::new(rmsnorm::RmsNorm),
        Box::new(sum::Sum),
        Box::new(cumsum::Cumsum),
        Box::new(histogram::Histogram),
        Box::new(matmul::Matmul),
        Box::new(attention::Attention),
        Box::new(swiglu::Swiglu),
        Box::new(rotary::Rotary),
        Box::new(spmv::Spmv),
        // Kernels written as a user writes them first, untuned (the `examples` suite).
        Box::new(gelu::Gelu),
        Box::new(transpose::Transpose),
        Box::new(rmsnorm_quant::RmsNormQuant),
        Box::new(cross_entropy::CrossEntropy),
        Box::new(argmax::Argmax),
    ]
}

/// The kernel called `name`.
pub fn find(name: &str) -> Option<Box<dyn Kernel>> {
    all().into_iter().find(|k| k.name() == name)
}

/// Random values in `[lo, hi)` rounded to `dtype`, never all zero. Chunks of the buffer draw
/// from their own generators, seeded from `rng`, so large buffers fill on every core and the
/// values depend only on `rng`'s state, not on the number of threads.
pub fn random_buffer(rng: &mut StdRng, dtype: DType, len: usize, lo: f64, hi: f64) -> HostBuffer {
    use rand::{Rng, SeedableRng};
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    let base: u64 = rng.gen();
    let mut vals = vec![0.0f64; len];
    vals.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| {
        let mut r = StdRng::seed_from_u64(base ^ (c as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for v in chunk {
            let x = r.gen_range(lo..hi);
            *v = if dtype.is_float() { x } else { x.floor() };
        }
    });
    HostBuffer::from_f64(dtype, &vals)
}

pub use tilekit_core::cdiv;

/// Test problems of the kernels that stream each row in BLOCK-wide chunks (argmax,
/// cross_entropy): one column, one row, odd and prime widths, a row longer than any block.
pub(crate) fn streamed_row_problems(dtype: DType) -> Vec<Problem> {
    [[1, 1], [1, 7], [64, 1], [3, 97], [5, 1024], [17, 1031], [2, 4099]].iter().map(|s| Problem::new(s, dtype)).collect()
}

/// Their configurations: the block streamed per step and the warps over it.
pub(crate) fn streamed_row_configs() -> Vec<Config> {
    let c = |b: i64, w: i64| Config::new().with("BLOCK", b).with("num_warps", w);
    vec![c(2048, 8), c(256, 1), c(1024, 4), c(4096, 8), c(4096, 16)]
}

/// Grid extent as u32, or an error when the problem is too large for one launch.
pub fn grid_dim(n: usize) -> Result<u32, KernelError> {
    u32::try_from(n.max(1)).map_err(|_| KernelError::BadConfig(format!("grid of {n} programs exceeds 2^32")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_problem_passes_its_kernels_option_schema() {
        for k in all() {
            for d in k.dtypes() {
                for p in k.test_problems(*d).iter().chain([&k.default_problem()]) {
                    k.check_problem(p).unwrap_or_else(|e| panic!("{} {p}: {e}", k.name()));
                    for key in p.opts.keys() {
                        assert!(k.options().iter().any(|o| o.name == key.as_str()), "{}: `{key}` is undeclared", k.name());
                    }
                }
            }
        }
    }

    #[test]
    fn option_values_are_checked_by_kind() {
        for bad in ["maybe", "2", "yes", "", "True"] {
            assert!(OptionKind::Bool.reject(bad).is_some(), "{bad:?}");
        }
        for good in ["0", "1", "true", "false"] {
            assert_eq!(OptionKind::Bool.reject(good), None);
        }
        assert!(OptionKind::Float.reject("nan").is_some() && OptionKind::Float.reject("x").is_some());
        assert_eq!(OptionKind::Float.reject("0.125"), None);
        assert!(OptionKind::Choice(&["a", "b"]).reject("c").unwrap().contains("a, b"));

        let attention = find("attention").unwrap();
        let p = attention.default_problem();
        let e = attention.check_problem(&p.clone().with("causal", "maybe")).unwrap_err().to_string();
        assert!(e.contains("causal") && e.contains("maybe") && e.contains("0, 1, true or false"), "{e}");
        let e = attention.check_problem(&p.clone().with("casual", "1")).unwrap_err().to_string();
        assert!(e.contains("`casual`") && e.contains("causal=0|1") && e.contains("sm_scale=<float>"), "{e}");
        // A flag is on only when it says so.
        assert!(p.clone().with("causal", "true").flag("causal") && !p.with("causal", "0").flag("causal"));
        let e = find("vector_add").unwrap().check_problem(&Problem::new(&[8], DType::F32).with("causal", "1")).unwrap_err();
        assert!(e.to_string().contains("options: none"), "{e}");
    }
}
