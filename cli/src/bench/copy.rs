//! The STREAM-style copy that measures a device's bandwidth ceiling: `out = x`, built with the
//! same builder and compiler as every library kernel, so the ceiling is what tilekit's own code
//! generation reaches on the simplest memory-bound problem.

use rand::rngs::StdRng;

use crate::kernels::{self, BufferSpec, Cost, Kernel, KernelError, Launch, LaunchArg, Plan, Problem, Role};
use crate::{Builder, Config, DType, HostBuffer, Scalar};
use tilekit_core::gpu::Target;

#[derive(Clone, Copy, Debug)]
pub struct Copy;

impl Kernel for Copy {
    fn name(&self) -> &'static str {
        "copy"
    }
    fn description(&self) -> &'static str {
        "out = x, the copy-bandwidth ceiling"
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32]
    }
    fn shape_doc(&self) -> &'static str {
        "N"
    }
    fn default_problem(&self) -> Problem {
        Problem::new(&[1 << 28], DType::F32)
    }
    fn test_problems(&self, dtype: DType) -> Vec<Problem> {
        vec![Problem::new(&[1], dtype), Problem::new(&[1000], dtype), Problem::new(&[4099], dtype)]
    }
    fn configs(&self) -> Vec<Config> {
        [(1024, 4), (2048, 4), (4096, 8)].iter().map(|&(b, w)| Config::new().with("BLOCK", b).with("num_warps", w)).collect()
    }
    fn build_plan(&self, problem: &Problem, config: &Config, _target: &Target) -> Result<Plan, KernelError> {
        self.check_problem(problem)?;
        let n = problem.dim(0, "N")?;
        let block = config.block("BLOCK")?;
        let k = Builder::new("copy");
        let x = k.input("x", DType::F32);
        let out = k.output("out", DType::F32);
        let nn = k.scalar("n", DType::I32);
        let offs = k.program_id(0) * block as i32 + k.arange(0, block as i64);
        let mask = offs.lt(nn);
        k.store_masked(out, offs, k.load_masked(x, offs, mask, 0.0), mask);
        let program = k.finish()?;
        let spec = |name: &str, role| BufferSpec { name: name.into(), dtype: DType::F32, len: n, role };
        Ok(Plan {
            buffers: vec![spec("x", Role::Input), spec("out", Role::Output { zeroed: false })],
            launches: vec![Launch {
                program,
                grid: [kernels::grid_dim(kernels::cdiv(n, block))?, 1, 1],
                args: vec![LaunchArg::Buffer(0), LaunchArg::Buffer(1), LaunchArg::Scalar(Scalar::Int(n as i64))],
            }],
        })
    }
    fn inputs(&self, problem: &Problem, rng: &mut StdRng) -> Vec<HostBuffer> {
        vec![kernels::random_buffer(rng, DType::F32, problem.shape[0], -1.0, 1.0)]
    }
    fn reference(&self, _problem: &Problem, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        vec![inputs[0].clone()]
    }
    fn tolerance(&self, _problem: &Problem) -> f64 {
        0.0
    }
    fn cost(&self, problem: &Problem) -> Cost {
        // Every element read once and written once.
        Cost { bytes: 8 * problem.shape.first().copied().unwrap_or(0) as u64, flops: 0 }
    }
}
