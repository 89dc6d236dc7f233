//! Wrapping `abs` and negation in what the optimiser made of user code.
//!
//! The emitter writes tilekit's own `abs` and `neg` through [`Hooks::wrapping_abs_neg`], but
//! LLVM's pipeline also forms `llvm.abs` from a user's `x < 0 ? -x : x` and keeps a narrow
//! `sub 0, x`; NVPTX then selects `abs.sN` / `neg.s16`, whose most negative value ptxas takes
//! as positive or in range (it drops the sign extension after them and folds `abs(x) < 0`).
//! After the pipeline, [`rewrite`] replaces each such instruction with the target's inline
//! assembly ([`Hooks::wrapping_abs_neg_asm`]), which no later pass sees through.

use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::types::IntType;
use inkwell::values::{BasicValue, BasicValueEnum, InstructionOpcode, InstructionValue, IntValue};

use crate::hooks::Hooks;

/// What to do with one instruction: its operand and whether it negates.
fn untrusted<'ctx>(inst: &InstructionValue<'ctx>) -> Option<(BasicValueEnum<'ctx>, bool)> {
    match inst.get_opcode() {
        InstructionOpcode::Call => {
            let n = inst.get_num_operands();
            let callee = inst.get_operand(n.checked_sub(1)?)?.value()?;
            let name = callee.get_name().to_str().ok()?.to_string();
            name.starts_with("llvm.abs.").then(|| inst.get_operand(0).and_then(|o| o.value()).map(|x| (x, false)))?
        }
        InstructionOpcode::Sub => {
            let zero = inst.get_operand(0)?.value()?;
            let x = inst.get_operand(1)?.value()?;
            let is_zero = match zero {
                BasicValueEnum::IntValue(z) => z.is_const() && z.get_zero_extended_constant() == Some(0),
                BasicValueEnum::VectorValue(v) => v.is_const() && v.is_null(),
                _ => false,
            };
            is_zero.then_some((x, true))
        }
        _ => None,
    }
}

/// The wrapping operation on one integer `x` of `ty`, or `None` where the target's own
/// instruction is right for that width.
fn wrap_scalar<'ctx, H: Hooks>(
    context: &'ctx Context,
    builder: &Builder<'ctx>,
    hooks: &H,
    x: IntValue<'ctx>,
    ty: IntType<'ctx>,
    neg: bool,
) -> Option<IntValue<'ctx>> {
    let bits = ty.get_bit_width();
    let reg_bits = bits.max(32);
    let asm = hooks.wrapping_abs_neg_asm(neg, reg_bits, bits)?;
    let reg = if reg_bits == 64 { context.i64_type() } else { context.i32_type() };
    let wide = if bits < 32 { builder.build_int_s_extend(x, reg, "wrap.wide").ok()? } else { x };
    let constraint = if reg_bits == 64 { "=l,l" } else { "=r,r" };
    let fn_type = reg.fn_type(&[reg.into()], false);
    let asm = context.create_inline_asm(fn_type, asm.to_string(), constraint.to_string(), false, false, None, false);
    let call = builder.build_indirect_call(fn_type, asm, &[wide.into()], "wrap").ok()?;
    let r = call.try_as_basic_value().basic()?.into_int_value();
    if bits < 32 {
        builder.build_int_truncate(r, ty, "wrap.narrow").ok()
    } else {
        Some(r)
    }
}

/// Rewrites every `llvm.abs` and `sub 0, x` of `module` whose width the hooks do not trust
/// (vectors lane by lane). Returns how many instructions it replaced.
pub fn rewrite<H: Hooks>(context: &Context, module: &Module<'_>, hooks: &H) -> usize {
    let builder = context.create_builder();
    let mut found = Vec::new();
    let mut f = module.get_first_function();
    while let Some(func) = f {
        for bb in func.get_basic_blocks() {
            let mut i = bb.get_first_instruction();
            while let Some(inst) = i {
                if untrusted(&inst).is_some() {
                    found.push(inst);
                }
                i = inst.get_next_instruction();
            }
        }
        f = func.get_next_function();
    }
    let mut replaced = 0;
    for inst in found {
        let Some((x, neg)) = untrusted(&inst) else { continue };
        builder.position_before(&inst);
        let new: Option<BasicValueEnum> = match x {
            BasicValueEnum::IntValue(v) => wrap_scalar(context, &builder, hooks, v, v.get_type(), neg).map(Into::into),
            BasicValueEnum::VectorValue(v) if v.get_type().get_element_type().is_int_type() => {
                let ty = v.get_type();
                let lane_ty = ty.get_element_type().into_int_type();
                let lane_bits = lane_ty.get_bit_width();
                if hooks.wrapping_abs_neg_asm(neg, lane_bits.max(32), lane_bits).is_none() {
                    continue;
                }
                let mut out = Some(ty.get_undef());
                for lane in 0..ty.get_size() {
                    let idx = context.i32_type().const_int(u64::from(lane), false);
                    out = out.and_then(|acc| {
                        let e = builder.build_extract_element(v, idx, "wrap.lane").ok()?.into_int_value();
                        let w = wrap_scalar(context, &builder, hooks, e, lane_ty, neg)?;
                        builder.build_insert_element(acc, w, idx, "wrap.vec").ok()
                    });
                }
                out.map(Into::into)
            }
            _ => None,
        };
        let Some(new) = new else { continue };
        let Some(new_inst) = new.as_instruction_value() else { continue };
        inst.replace_all_uses_with(&new_inst);
        inst.erase_from_basic_block();
        replaced += 1;
    }
    replaced
}
