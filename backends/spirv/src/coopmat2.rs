//! A matmul on VK_NV_cooperative_matrix2's workgroup-scope matrices, built directly as SPIR-V.
//!
//! The tile programs' `dot` lowers to subgroup-scope matrices (VK_KHR_cooperative_matrix): every
//! warp holds 16 x 16 pieces and the program stages the operands in shared memory itself. The
//! NVIDIA extension offers a second strategy, which issue 16's configuration space is to choose
//! between: one matrix per program (any multiple of the driver's granularity), loaded and stored
//! through tensor layouts, the staging in the driver's hands. Before the lowering grows that
//! strategy, this module emits the matmul it would produce (`C = A @ B`, row-major, 16-bit
//! floats in and out, f32 accumulation) so that a device can say what the strategy is worth
//! (`examples/coopmat2_matmul.rs` runs and times it beside the subgroup-scope path).
//!
//! Each program computes one `block_m x block_n` block of C, its K loop loading `block_m x
//! block_k` of A and `block_k x block_n` of B. The layouts clamp to the matrices' bounds with
//! constant zero, so ragged edges read zeros and the store drops what lies outside: any M, N, K.
//! Programs are ordered as Triton's grouped ordering does (`group_m` rows of blocks at a time,
//! so consecutive programs share B's columns in the cache).

use rspirv::dr::{Builder, Operand};
use rspirv::spirv;
use tilekit_core::ir::Access;
use tilekit_core::DType;

use crate::kernel::{Binding, PushConstant, Requirements, SpirvKernel};

/// The shape of one [`tensor_matmul`] kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMatmul {
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    /// Threads per program (the driver's flexible-dimension list names the counts it takes).
    pub threads: u32,
    /// Rows of blocks walked together by consecutive programs.
    pub group_m: u32,
    /// Of A, B and C: f16, or bf16 (VK_KHR_shader_bfloat16's matrices).
    pub dtype: DType,
}

/// Why [`tensor_matmul`] refused a shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TensorMatmulError {
    #[error("tensor matmul {shape}: {what}")]
    Shape { shape: String, what: String },
    #[error("tensor matmul {shape}: building the module failed: {what}")]
    Build { shape: String, what: String },
}

impl std::fmt::Display for TensorMatmul {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{} {} threads {} group {}", self.block_m, self.block_n, self.block_k, self.threads, self.dtype, self.group_m)
    }
}

impl TensorMatmul {
    /// The grid of programs for an `m x n` result: one axis, `ceil(m / block_m) * ceil(n /
    /// block_n)` programs.
    pub fn grid(&self, m: u32, n: u32) -> [u32; 3] {
        [m.div_ceil(self.block_m) * n.div_ceil(self.block_n), 1, 1]
    }
}

/// The kernel for `shape`: parameters A (`M x K`), B (`K x N`), C (`M x N`, written) as
/// bindings 0-2 and M, N, K as i32 push constants (parameters 3-5).
pub fn tensor_matmul(shape: &TensorMatmul) -> Result<SpirvKernel, TensorMatmulError> {
    let refuse = |what: &str| TensorMatmulError::Shape { shape: shape.to_string(), what: what.to_string() };
    if !matches!(shape.dtype, DType::F16 | DType::BF16) {
        return Err(refuse("only f16 and bf16 operands are emitted"));
    }
    let TensorMatmul { block_m, block_n, block_k, threads, group_m, .. } = *shape;
    if [block_m, block_n, block_k].iter().any(|&d| d == 0 || d % 16 != 0) {
        return Err(refuse("block sizes must be positive multiples of 16"));
    }
    if threads == 0 || threads % 32 != 0 || group_m == 0 {
        return Err(refuse("threads must be a positive multiple of 32 and group_m positive"));
    }
    let words = build(shape).map_err(|e| TensorMatmulError::Build { shape: shape.to_string(), what: format!("{e:?}") })?;
    let bf16 = shape.dtype == DType::BF16;
    let binding = |binding: u32, access: Access| Binding { binding, param: binding, dtype: shape.dtype, access, size_multiple: 4 };
    Ok(SpirvKernel {
        name: format!("tensor_matmul_{}_{block_m}x{block_n}x{block_k}_t{threads}_g{group_m}", shape.dtype),
        words,
        entry_point: "main".into(),
        threads,
        bindings: vec![binding(0, Access::Read), binding(1, Access::Read), binding(2, Access::Write)],
        push_constants: (0..3).map(|i| PushConstant { param: 3 + i, offset: 4 * i, dtype: DType::I32 }).collect(),
        push_constant_size: 12,
        grid_fold: None,
        requirements: Requirements {
            float16: true,
            storage16: true,
            cooperative_matrix: true,
            cooperative_matrix_bf16: bf16,
            cooperative_matrix2: true,
            ..Default::default()
        },
    })
}

fn build(shape: &TensorMatmul) -> Result<Vec<u32>, rspirv::dr::Error> {
    use spirv::{Capability as Cap, Decoration as Dec, StorageClass as Sc};
    let mut b = Builder::new();
    b.set_version(1, 5);
    for cap in [
        Cap::Shader,
        Cap::Float16,
        Cap::StorageBuffer16BitAccess,
        Cap::VulkanMemoryModel,
        Cap::CooperativeMatrixKHR,
        Cap::CooperativeMatrixTensorAddressingNV,
        Cap::TensorAddressingNV,
    ] {
        b.capability(cap);
    }
    let bf16 = shape.dtype == DType::BF16;
    if bf16 {
        b.capability(Cap::BFloat16TypeKHR);
        b.capability(Cap::BFloat16CooperativeMatrixKHR);
    }
    for ext in ["SPV_KHR_cooperative_matrix", "SPV_NV_cooperative_matrix2", "SPV_NV_tensor_addressing"] {
        b.extension(ext);
    }
    if bf16 {
        b.extension("SPV_KHR_bfloat16");
    }
    b.memory_model(spirv::AddressingModel::Logical, spirv::MemoryModel::Vulkan);

    let void = b.type_void();
    let fnty = b.type_function(void, []);
    let boolean = b.type_bool();
    let u32t = b.type_int(32, 0);
    // The operands' and result's element type (the buffers hold it too).
    let f16 = b.type_float(16, bf16.then_some(spirv::FPEncoding::BFloat16KHR));
    let f32t = b.type_float(32, None);
    let c = |b: &mut Builder, v: u32| b.constant_bit32(u32t, v);

    // Storage buffers: a block of one runtime array of f16.
    let rta = b.type_runtime_array(f16);
    b.decorate(rta, Dec::ArrayStride, [Operand::LiteralBit32(2)]);
    let block = b.type_struct([rta]);
    b.decorate(block, Dec::Block, []);
    b.member_decorate(block, 0, Dec::Offset, [Operand::LiteralBit32(0)]);
    let block_ptr = b.type_pointer(None, Sc::StorageBuffer, block);
    let elem_ptr = b.type_pointer(None, Sc::StorageBuffer, f16);
    let mut buffers = Vec::new();
    for binding in 0..3u32 {
        let var = b.variable(block_ptr, None, Sc::StorageBuffer, None);
        b.decorate(var, Dec::DescriptorSet, [Operand::LiteralBit32(0)]);
        b.decorate(var, Dec::Binding, [Operand::LiteralBit32(binding)]);
        b.decorate(var, if binding < 2 { Dec::NonWritable } else { Dec::NonReadable }, []);
        buffers.push(var);
    }
    // M, N, K.
    let push = b.type_struct([u32t, u32t, u32t]);
    b.decorate(push, Dec::Block, []);
    for m in 0..3 {
        b.member_decorate(push, m, Dec::Offset, [Operand::LiteralBit32(4 * m)]);
    }
    let push_ptr = b.type_pointer(None, Sc::PushConstant, push);
    let push_var = b.variable(push_ptr, None, Sc::PushConstant, None);
    let u32_push_ptr = b.type_pointer(None, Sc::PushConstant, u32t);
    let v3 = b.type_vector(u32t, 3);
    let v3_ptr = b.type_pointer(None, Sc::Input, v3);
    let wgid = b.variable(v3_ptr, None, Sc::Input, None);
    b.decorate(wgid, Dec::BuiltIn, [Operand::BuiltIn(spirv::BuiltIn::WorkgroupId)]);

    let [bm, bn, bk, g] = [shape.block_m, shape.block_n, shape.block_k, shape.group_m].map(|v| c(&mut b, v));
    let [zero, one, two] = [0, 1, 2].map(|v| c(&mut b, v));
    let workgroup = c(&mut b, spirv::Scope::Workgroup as u32);
    let [use_a, use_b, use_acc] = [0, 1, 2].map(|v| c(&mut b, v));
    let mat_a = b.type_cooperative_matrix_khr(f16, workgroup, bm, bk, use_a);
    let mat_b = b.type_cooperative_matrix_khr(f16, workgroup, bk, bn, use_b);
    let mat_acc = b.type_cooperative_matrix_khr(f32t, workgroup, bm, bn, use_acc);
    let mat_out = b.type_cooperative_matrix_khr(f16, workgroup, bm, bn, use_acc);
    let f16_zero = b.constant_bit32(f16, 0);
    let f32_zero = b.constant_bit32(f32t, 0);
    let a_zero = b.constant_composite(mat_a, [f16_zero]);
    let b_zero = b.constant_composite(mat_b, [f16_zero]);
    let acc_zero = b.constant_composite(mat_acc, [f32_zero]);
    let clamp = c(&mut b, spirv::TensorClampMode::Constant as u32);
    let layout = b.type_tensor_layout_nv(two, clamp);

    let main = b.begin_function(void, None, spirv::FunctionControl::NONE, fnty)?;
    let entry = b.begin_block(None)?;
    let dims: Vec<u32> = (0..3)
        .map(|i| {
            let idx = c(&mut b, i);
            let p = b.access_chain(u32_push_ptr, None, push_var, [idx])?;
            b.load(u32t, None, p, None, [])
        })
        .collect::<Result<_, _>>()?;
    let (m, n, k) = (dims[0], dims[1], dims[2]);
    let id = b.load(v3, None, wgid, None, [])?;
    let pid = b.composite_extract(u32t, None, id, [0])?;
    // Triton's grouped ordering.
    let div_ceil = |b: &mut Builder, x, d| {
        let less = b.i_sub(u32t, None, d, one)?;
        let padded = b.i_add(u32t, None, x, less)?;
        b.u_div(u32t, None, padded, d)
    };
    let num_m = div_ceil(&mut b, m, bm)?;
    let num_n = div_ceil(&mut b, n, bn)?;
    let in_group = b.i_mul(u32t, None, g, num_n)?;
    let group = b.u_div(u32t, None, pid, in_group)?;
    let first_m = b.i_mul(u32t, None, group, g)?;
    let left = b.i_sub(u32t, None, num_m, first_m)?;
    let fewer = b.u_less_than(boolean, None, left, g)?;
    let group_size = b.select(u32t, None, fewer, left, g)?;
    let within = b.u_mod(u32t, None, pid, in_group)?;
    let row = b.u_mod(u32t, None, within, group_size)?;
    let pid_m = b.i_add(u32t, None, first_m, row)?;
    let pid_n = b.u_div(u32t, None, within, group_size)?;
    let m0 = b.i_mul(u32t, None, pid_m, bm)?;
    let n0 = b.i_mul(u32t, None, pid_n, bn)?;

    let fresh = b.create_tensor_layout_nv(layout, None)?;
    let la = b.tensor_layout_set_dimension_nv(layout, None, fresh, [m, k])?;
    let lb = b.tensor_layout_set_dimension_nv(layout, None, fresh, [k, n])?;
    let lc = b.tensor_layout_set_dimension_nv(layout, None, fresh, [m, n])?;
    let pa = b.access_chain(elem_ptr, None, buffers[0], [zero, zero])?;
    let pb = b.access_chain(elem_ptr, None, buffers[1], [zero, zero])?;
    let pc = b.access_chain(elem_ptr, None, buffers[2], [zero, zero])?;

    let (header, body, cont, merge) = (b.id(), b.id(), b.id(), b.id());
    let (k_next, acc_next) = (b.id(), b.id());
    b.branch(header)?;
    b.begin_block(Some(header))?;
    let kk = b.phi(u32t, None, [(zero, entry), (k_next, cont)])?;
    let acc = b.phi(mat_acc, None, [(acc_zero, entry), (acc_next, cont)])?;
    let more = b.u_less_than(boolean, None, kk, k)?;
    b.loop_merge(merge, cont, spirv::LoopControl::NONE, [])?;
    b.branch_conditional(more, body, merge, [])?;
    b.begin_block(Some(body))?;
    let sa = b.tensor_layout_slice_nv(layout, None, la, [m0, bm, kk, bk])?;
    let a = b.cooperative_matrix_load_tensor_nv(mat_a, None, pa, a_zero, sa, spirv::MemoryAccess::NONE, spirv::TensorAddressingOperands::NONE, [])?;
    let sb = b.tensor_layout_slice_nv(layout, None, lb, [kk, bk, n0, bn])?;
    let bt =
        b.cooperative_matrix_load_tensor_nv(mat_b, None, pb, b_zero, sb, spirv::MemoryAccess::NONE, spirv::TensorAddressingOperands::NONE, [])?;
    b.cooperative_matrix_mul_add_khr(mat_acc, Some(acc_next), a, bt, acc, None)?;
    b.branch(cont)?;
    b.begin_block(Some(cont))?;
    b.i_add(u32t, Some(k_next), kk, bk)?;
    b.branch(header)?;
    b.begin_block(Some(merge))?;
    let out = b.f_convert(mat_out, None, acc)?;
    let sc = b.tensor_layout_slice_nv(layout, None, lc, [m0, bm, n0, bn])?;
    b.cooperative_matrix_store_tensor_nv(pc, out, sc, spirv::MemoryAccess::NONE, spirv::TensorAddressingOperands::NONE, [])?;
    b.ret()?;
    b.end_function()?;
    b.entry_point(spirv::ExecutionModel::GLCompute, main, "main", [wgid, buffers[0], buffers[1], buffers[2], push_var]);
    b.execution_mode(main, spirv::ExecutionMode::LocalSize, [shape.threads, 1, 1]);
    use rspirv::binary::Assemble;
    Ok(b.module().assemble())
}
