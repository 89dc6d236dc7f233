	.text
	.amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
	.amdhsa_code_object_version 5
	.globl	vector_add
	.p2align	8
	.type	vector_add,@function
vector_add:
	s_clause 0x1
	s_load_b32 s9, s[0:1], 0x18
	s_load_b64 s[10:11], s[0:1], 0x0
	s_lshl_b32 s2, s15, 10
	s_delay_alu instid0(SALU_CYCLE_1) | instskip(NEXT) | instid1(VALU_DEP_1)
	v_lshl_or_b32 v16, v0, 2, s2
	v_or_b32_e32 v1, 1, v16
	v_or_b32_e32 v2, 2, v16
	v_or_b32_e32 v0, 3, v16
	s_waitcnt lgkmcnt(0)
	v_cmp_gt_i32_e64 s5, s9, v16
	v_cmp_gt_i32_e64 s2, s9, v1
	v_cmp_gt_i32_e32 vcc_lo, s9, v2
	v_cmp_le_i32_e64 s6, s9, v0
	s_delay_alu instid0(VALU_DEP_4) | instskip(NEXT) | instid1(VALU_DEP_4)
	v_cndmask_b32_e64 v8, 0, v16, s5
	v_cndmask_b32_e64 v12, 0, v1, s2
	v_cndmask_b32_e32 v10, 0, v2, vcc_lo
	s_delay_alu instid0(VALU_DEP_4) | instskip(NEXT) | instid1(SALU_CYCLE_1)
	s_and_saveexec_b32 s4, s6
	s_xor_b32 s4, exec_lo, s4
	s_cbranch_execz .LBB0_2
	v_ashrrev_i32_e32 v9, 31, v8
	v_ashrrev_i32_e32 v13, 31, v12
	v_ashrrev_i32_e32 v11, 31, v10
	s_delay_alu instid0(VALU_DEP_3) | instskip(NEXT) | instid1(VALU_DEP_3)
	v_lshlrev_b64 v[0:1], 2, v[8:9]
	v_lshlrev_b64 v[2:3], 2, v[12:13]
	s_delay_alu instid0(VALU_DEP_3) | instskip(NEXT) | instid1(VALU_DEP_3)
	v_lshlrev_b64 v[4:5], 2, v[10:11]
	v_add_co_u32 v0, s3, s10, v0
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_4)
	v_add_co_ci_u32_e64 v1, s3, s11, v1, s3
	v_add_co_u32 v2, s3, s10, v2
	s_delay_alu instid0(VALU_DEP_1) | instskip(SKIP_1) | instid1(VALU_DEP_1)
	v_add_co_ci_u32_e64 v3, s3, s11, v3, s3
	v_add_co_u32 v4, s3, s10, v4
	v_add_co_ci_u32_e64 v5, s3, s11, v5, s3
	s_clause 0x2
	global_load_b32 v0, v[0:1], off
	global_load_b32 v1, v[2:3], off
	global_load_b32 v2, v[4:5], off
	s_mov_b32 s3, 0
	s_waitcnt vmcnt(2)
	v_cndmask_b32_e64 v0, 0, v0, s5
	s_waitcnt vmcnt(1)
	v_cndmask_b32_e64 v1, 0, v1, s2
	s_waitcnt vmcnt(0)
	v_cndmask_b32_e32 v2, 0, v2, vcc_lo
.LBB0_2:
	s_or_saveexec_b32 s4, s4
	v_mov_b32_e32 v3, s3
	v_ashrrev_i32_e32 v17, 31, v16
	s_xor_b32 exec_lo, exec_lo, s4
	s_cbranch_execz .LBB0_4
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)
	v_lshlrev_b64 v[0:1], 2, v[16:17]
	v_add_co_u32 v0, s3, s10, v0
	s_delay_alu instid0(VALU_DEP_1)
	v_add_co_ci_u32_e64 v1, s3, s11, v1, s3
	global_load_b128 v[0:3], v[0:1], off
.LBB0_4:
	s_or_b32 exec_lo, exec_lo, s4
	v_or_b32_e32 v5, 0x200, v16
	v_or_b32_e32 v6, 0x201, v16
	v_or_b32_e32 v7, 0x202, v16
	v_or_b32_e32 v4, 0x203, v16
	s_delay_alu instid0(VALU_DEP_4) | instskip(NEXT) | instid1(VALU_DEP_4)
	v_cmp_gt_i32_e64 s7, s9, v5
	v_cmp_gt_i32_e64 s4, s9, v6
	s_delay_alu instid0(VALU_DEP_4) | instskip(NEXT) | instid1(VALU_DEP_4)
	v_cmp_gt_i32_e64 s3, s9, v7
	v_cmp_le_i32_e64 s8, s9, v4
	s_delay_alu instid0(VALU_DEP_4) | instskip(NEXT) | instid1(VALU_DEP_4)
	v_cndmask_b32_e64 v18, 0, v5, s7
	v_cndmask_b32_e64 v22, 0, v6, s4
	s_delay_alu instid0(VALU_DEP_4) | instskip(NEXT) | instid1(VALU_DEP_4)
	v_cndmask_b32_e64 v20, 0, v7, s3
	s_and_saveexec_b32 s12, s8
	s_delay_alu instid0(SALU_CYCLE_1)
	s_xor_b32 s12, exec_lo, s12
	s_cbranch_execz .LBB0_6
	v_ashrrev_i32_e32 v19, 31, v18
	v_ashrrev_i32_e32 v23, 31, v22
	v_ashrrev_i32_e32 v21, 31, v20
	s_delay_alu instid0(VALU_DEP_3) | instskip(NEXT) | instid1(VALU_DEP_3)
	v_lshlrev_b64 v[4:5], 2, v[18:19]
	v_lshlrev_b64 v[6:7], 2, v[22:23]
	s_delay_alu instid0(VALU_DEP_3) | instskip(NEXT) | instid1(VALU_DEP_3)
	v_lshlrev_b64 v[13:14], 2, v[20:21]
	v_add_co_u32 v4, s9, s10, v4
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_4)
	v_add_co_ci_u32_e64 v5, s9, s11, v5, s9
	v_add_co_u32 v6, s9, s10, v6
	s_delay_alu instid0(VALU_DEP_1) | instskip(SKIP_1) | instid1(VALU_DEP_1)
	v_add_co_ci_u32_e64 v7, s9, s11, v7, s9
	v_add_co_u32 v13, s9, s10, v13
	v_add_co_ci_u32_e64 v14, s9, s11, v14, s9
	s_clause 0x2
	global_load_b32 v4, v[4:5], off
	global_load_b32 v5, v[6:7], off
	global_load_b32 v6, v[13:14], off
	s_mov_b32 s9, 0
	s_waitcnt vmcnt(2)
	v_cndmask_b32_e64 v4, 0, v4, s7
	s_waitcnt vmcnt(1)
	v_cndmask_b32_e64 v5, 0, v5, s4
	s_waitcnt vmcnt(0)
	v_cndmask_b32_e64 v6, 0, v6, s3
.LBB0_6:
	s_or_saveexec_b32 s14, s12
	s_load_b64 s[12:13], s[0:1], 0x8
	v_mov_b32_e32 v7, s9
	s_xor_b32 exec_lo, exec_lo, s14
	s_cbranch_execz .LBB0_8
	v_lshlrev_b64 v[4:5], 2, v[16:17]
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)
	v_add_co_u32 v4, s9, s10, v4
	v_add_co_ci_u32_e64 v5, s9, s11, v5, s9
	global_load_b128 v[4:7], v[4:5], off offset:2048
.LBB0_8:
	s_or_b32 exec_lo, exec_lo, s14
	s_and_saveexec_b32 s10, s6
	s_delay_alu instid0(SALU_CYCLE_1)
	s_xor_b32 s10, exec_lo, s10
	s_cbranch_execz .LBB0_10
	v_ashrrev_i32_e32 v9, 31, v8
	v_ashrrev_i32_e32 v13, 31, v12
	v_ashrrev_i32_e32 v11, 31, v10
	s_delay_alu instid0(VALU_DEP_3) | instskip(NEXT) | instid1(VALU_DEP_3)
	v_lshlrev_b64 v[8:9], 2, v[8:9]
	v_lshlrev_b64 v[12:13], 2, v[12:13]
	s_delay_alu instid0(VALU_DEP_3) | instskip(SKIP_1) | instid1(VALU_DEP_3)
	v_lshlrev_b64 v[10:11], 2, v[10:11]
	s_waitcnt lgkmcnt(0)
	v_add_co_u32 v8, s9, s12, v8
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_4)
	v_add_co_ci_u32_e64 v9, s9, s13, v9, s9
	v_add_co_u32 v12, s9, s12, v12
	s_delay_alu instid0(VALU_DEP_1) | instskip(SKIP_1) | instid1(VALU_DEP_1)
	v_add_co_ci_u32_e64 v13, s9, s13, v13, s9
	v_add_co_u32 v10, s9, s12, v10
	v_add_co_ci_u32_e64 v11, s9, s13, v11, s9
	s_clause 0x2
	global_load_b32 v8, v[8:9], off
	global_load_b32 v9, v[12:13], off
	global_load_b32 v10, v[10:11], off
	s_mov_b32 s9, 0
	s_waitcnt vmcnt(2)
	v_cndmask_b32_e64 v12, 0, v8, s5
	s_waitcnt vmcnt(1)
	v_cndmask_b32_e64 v13, 0, v9, s2
	s_waitcnt vmcnt(0)
	v_cndmask_b32_e32 v14, 0, v10, vcc_lo
.LBB0_10:
	s_or_saveexec_b32 s10, s10
	v_mov_b32_e32 v15, s9
	s_xor_b32 exec_lo, exec_lo, s10
	s_cbranch_execz .LBB0_12
	v_lshlrev_b64 v[8:9], 2, v[16:17]
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)
	v_add_co_u32 v8, s9, s12, v8
	v_add_co_ci_u32_e64 v9, s9, s13, v9, s9
	global_load_b128 v[12:15], v[8:9], off
.LBB0_12:
	s_or_b32 exec_lo, exec_lo, s10
	s_and_saveexec_b32 s9, s8
	s_delay_alu instid0(SALU_CYCLE_1)
	s_xor_b32 s10, exec_lo, s9
	s_cbranch_execz .LBB0_14
	v_ashrrev_i32_e32 v19, 31, v18
	v_ashrrev_i32_e32 v23, 31, v22
	v_ashrrev_i32_e32 v21, 31, v20
	s_mov_b32 s14, 0
	s_delay_alu instid0(VALU_DEP_3) | instskip(NEXT) | instid1(VALU_DEP_3)
	v_lshlrev_b64 v[8:9], 2, v[18:19]
	v_lshlrev_b64 v[10:11], 2, v[22:23]
	s_delay_alu instid0(VALU_DEP_3) | instskip(SKIP_1) | instid1(VALU_DEP_3)
	v_lshlrev_b64 v[18:19], 2, v[20:21]
	s_waitcnt lgkmcnt(0)
	v_add_co_u32 v8, s9, s12, v8
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_4)
	v_add_co_ci_u32_e64 v9, s9, s13, v9, s9
	v_add_co_u32 v10, s9, s12, v10
	s_delay_alu instid0(VALU_DEP_1) | instskip(SKIP_1) | instid1(VALU_DEP_1)
	v_add_co_ci_u32_e64 v11, s9, s13, v11, s9
	v_add_co_u32 v18, s9, s12, v18
	v_add_co_ci_u32_e64 v19, s9, s13, v19, s9
	s_clause 0x2
	global_load_b32 v8, v[8:9], off
	global_load_b32 v9, v[10:11], off
	global_load_b32 v10, v[18:19], off
	s_waitcnt vmcnt(2)
	v_cndmask_b32_e64 v8, 0, v8, s7
	s_waitcnt vmcnt(1)
	v_cndmask_b32_e64 v9, 0, v9, s4
	s_waitcnt vmcnt(0)
	v_cndmask_b32_e64 v10, 0, v10, s3
.LBB0_14:
	s_or_saveexec_b32 s9, s10
	s_load_b64 s[10:11], s[0:1], 0x10
	v_mov_b32_e32 v11, s14
	s_xor_b32 exec_lo, exec_lo, s9
	s_cbranch_execz .LBB0_16
	v_lshlrev_b64 v[8:9], 2, v[16:17]
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)
	v_add_co_u32 v8, s0, s12, v8
	v_add_co_ci_u32_e64 v9, s0, s13, v9, s0
	global_load_b128 v[8:11], v[8:9], off offset:2048
.LBB0_16:
	s_or_b32 exec_lo, exec_lo, s9
	s_waitcnt vmcnt(0)
	v_dual_add_f32 v0, v0, v12 :: v_dual_add_f32 v1, v1, v13
	v_add_f32_e32 v2, v2, v14
	s_and_saveexec_b32 s0, s6
	s_delay_alu instid0(SALU_CYCLE_1)
	s_xor_b32 s1, exec_lo, s0
	s_cbranch_execz .LBB0_22
	s_and_saveexec_b32 s6, s5
	s_cbranch_execz .LBB0_33
	v_lshlrev_b64 v[12:13], 2, v[16:17]
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)
	v_add_co_u32 v12, s0, s10, v12
	v_add_co_ci_u32_e64 v13, s0, s11, v13, s0
	global_store_b32 v[12:13], v0, off
	s_or_b32 exec_lo, exec_lo, s6
	s_and_saveexec_b32 s5, s2
	s_cbranch_execnz .LBB0_34
.LBB0_19:
	s_or_b32 exec_lo, exec_lo, s5
	s_and_saveexec_b32 s0, vcc_lo
	s_cbranch_execz .LBB0_21
.LBB0_20:
	v_lshlrev_b64 v[0:1], 2, v[16:17]
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_2)
	v_add_co_u32 v0, vcc_lo, s10, v0
	v_add_co_ci_u32_e32 v1, vcc_lo, s11, v1, vcc_lo
	global_store_b32 v[0:1], v2, off offset:8
.LBB0_21:
	s_or_b32 exec_lo, exec_lo, s0
.LBB0_22:
	s_and_not1_saveexec_b32 s0, s1
	s_cbranch_execz .LBB0_24
	v_lshlrev_b64 v[12:13], 2, v[16:17]
	v_add_f32_e32 v3, v3, v15
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_2) | instskip(NEXT) | instid1(VALU_DEP_3)
	v_add_co_u32 v12, vcc_lo, s10, v12
	v_add_co_ci_u32_e32 v13, vcc_lo, s11, v13, vcc_lo
	global_store_b128 v[12:13], v[0:3], off
.LBB0_24:
	s_or_b32 exec_lo, exec_lo, s0
	v_dual_add_f32 v0, v4, v8 :: v_dual_add_f32 v1, v5, v9
	v_add_f32_e32 v2, v6, v10
	s_and_saveexec_b32 s0, s8
	s_delay_alu instid0(SALU_CYCLE_1)
	s_xor_b32 s0, exec_lo, s0
	s_cbranch_execz .LBB0_31
	s_and_saveexec_b32 s1, s7
	s_cbranch_execz .LBB0_35
	v_lshlrev_b64 v[3:4], 2, v[16:17]
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_2)
	v_add_co_u32 v3, vcc_lo, s10, v3
	v_add_co_ci_u32_e32 v4, vcc_lo, s11, v4, vcc_lo
	global_store_b32 v[3:4], v0, off offset:2048
	s_or_b32 exec_lo, exec_lo, s1
	s_and_saveexec_b32 s1, s4
	s_cbranch_execnz .LBB0_36
.LBB0_27:
	s_or_b32 exec_lo, exec_lo, s1
	s_and_saveexec_b32 s1, s3
	s_cbranch_execz .LBB0_29
.LBB0_28:
	v_lshlrev_b64 v[0:1], 2, v[16:17]
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_2)
	v_add_co_u32 v0, vcc_lo, s10, v0
	v_add_co_ci_u32_e32 v1, vcc_lo, s11, v1, vcc_lo
	global_store_b32 v[0:1], v2, off offset:2056
.LBB0_29:
	s_or_b32 exec_lo, exec_lo, s1
	s_and_not1_saveexec_b32 s0, s0
	s_cbranch_execnz .LBB0_32
.LBB0_30:
	s_nop 0
	s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)
	s_endpgm
.LBB0_31:
	s_and_not1_saveexec_b32 s0, s0
	s_cbranch_execz .LBB0_30
.LBB0_32:
	v_lshlrev_b64 v[4:5], 2, v[16:17]
	v_add_f32_e32 v3, v7, v11
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_2) | instskip(NEXT) | instid1(VALU_DEP_3)
	v_add_co_u32 v4, vcc_lo, s10, v4
	v_add_co_ci_u32_e32 v5, vcc_lo, s11, v5, vcc_lo
	global_store_b128 v[4:5], v[0:3], off offset:2048
	s_nop 0
	s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)
	s_endpgm
.LBB0_33:
	s_or_b32 exec_lo, exec_lo, s6
	s_and_saveexec_b32 s5, s2
	s_cbranch_execz .LBB0_19
.LBB0_34:
	v_lshlrev_b64 v[12:13], 2, v[16:17]
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)
	v_add_co_u32 v12, s0, s10, v12
	v_add_co_ci_u32_e64 v13, s0, s11, v13, s0
	global_store_b32 v[12:13], v1, off offset:4
	s_or_b32 exec_lo, exec_lo, s5
	s_and_saveexec_b32 s0, vcc_lo
	s_cbranch_execnz .LBB0_20
	s_branch .LBB0_21
.LBB0_35:
	s_or_b32 exec_lo, exec_lo, s1
	s_and_saveexec_b32 s1, s4
	s_cbranch_execz .LBB0_27
.LBB0_36:
	v_lshlrev_b64 v[3:4], 2, v[16:17]
	s_waitcnt lgkmcnt(0)
	s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_2)
	v_add_co_u32 v3, vcc_lo, s10, v3
	v_add_co_ci_u32_e32 v4, vcc_lo, s11, v4, vcc_lo
	global_store_b32 v[3:4], v1, off offset:2052
	s_or_b32 exec_lo, exec_lo, s1
	s_and_saveexec_b32 s1, s3
	s_cbranch_execnz .LBB0_28
	s_branch .LBB0_29
	.section	.rodata,"a",@progbits
	.p2align	6, 0x0
	.amdhsa_kernel vector_add
		.amdhsa_group_segment_fixed_size 0
		.amdhsa_private_segment_fixed_size 0
		.amdhsa_kernarg_size 28
		.amdhsa_user_sgpr_count 15
		.amdhsa_user_sgpr_dispatch_ptr 0
		.amdhsa_user_sgpr_queue_ptr 0
		.amdhsa_user_sgpr_kernarg_segment_ptr 1
		.amdhsa_user_sgpr_dispatch_id 0
		.amdhsa_user_sgpr_private_segment_size 0
		.amdhsa_wavefront_size32 1
		.amdhsa_uses_dynamic_stack 0
		.amdhsa_enable_private_segment 0
		.amdhsa_system_sgpr_workgroup_id_x 1
		.amdhsa_system_sgpr_workgroup_id_y 0
		.amdhsa_system_sgpr_workgroup_id_z 0
		.amdhsa_system_sgpr_workgroup_info 0
		.amdhsa_system_vgpr_workitem_id 0
		.amdhsa_next_free_vgpr 24
		.amdhsa_next_free_sgpr 16
		.amdhsa_reserve_vcc 1
		.amdhsa_float_round_mode_32 0
		.amdhsa_float_round_mode_16_64 0
		.amdhsa_float_denorm_mode_32 3
		.amdhsa_float_denorm_mode_16_64 3
		.amdhsa_dx10_clamp 1
		.amdhsa_ieee_mode 1
		.amdhsa_fp16_overflow 0
		.amdhsa_workgroup_processor_mode 1
		.amdhsa_memory_ordered 1
		.amdhsa_forward_progress 0
		.amdhsa_shared_vgpr_count 0
		.amdhsa_exception_fp_ieee_invalid_op 0
		.amdhsa_exception_fp_denorm_src 0
		.amdhsa_exception_fp_ieee_div_zero 0
		.amdhsa_exception_fp_ieee_overflow 0
		.amdhsa_exception_fp_ieee_underflow 0
		.amdhsa_exception_fp_ieee_inexact 0
		.amdhsa_exception_int_div_zero 0
	.end_amdhsa_kernel
	.text
.Lfunc_end0:
	.size	vector_add, .Lfunc_end0-vector_add

	.p2alignl 7, 3214868480
	.fill 96, 4, 3214868480
	.section	".note.GNU-stack","",@progbits
	.amdgpu_metadata
---
amdhsa.kernels:
  - .args:
      - .actual_access:  read_only
        .address_space:  global
        .name:           p0
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .actual_access:  read_only
        .address_space:  global
        .name:           p1
        .offset:         8
        .size:           8
        .value_kind:     global_buffer
      - .actual_access:  write_only
        .address_space:  global
        .name:           p2
        .offset:         16
        .size:           8
        .value_kind:     global_buffer
      - .name:           p3
        .offset:         24
        .size:           4
        .value_kind:     by_value
    .group_segment_fixed_size: 0
    .kernarg_segment_align: 8
    .kernarg_segment_size: 28
    .max_flat_workgroup_size: 128
    .name:           vector_add
    .private_segment_fixed_size: 0
    .sgpr_count:     18
    .sgpr_spill_count: 0
    .symbol:         vector_add.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     24
    .vgpr_spill_count: 0
    .wavefront_size: 32
    .workgroup_processor_mode: 1
amdhsa.target:   amdgcn-amd-amdhsa--gfx1100
amdhsa.version:
  - 1
  - 2
...

	.end_amdgpu_metadata
