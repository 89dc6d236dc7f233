	.text
	.amdgcn_target "amdgcn-amd-amdhsa--gfx942"
	.amdhsa_code_object_version 5
	.globl	vector_add
	.p2align	8
	.type	vector_add,@function
vector_add:
	s_load_dwordx2 s[10:11], s[0:1], 0x0
	s_load_dword s8, s[0:1], 0x18
	s_lshl_b32 s2, s2, 10
	v_lshl_or_b32 v8, v0, 2, s2
	v_or_b32_e32 v0, 1, v8
	v_or_b32_e32 v1, 2, v8
	v_or_b32_e32 v2, 3, v8
	s_waitcnt lgkmcnt(0)
	v_cmp_gt_i32_e64 s[2:3], s8, v8
	v_cmp_gt_i32_e64 s[6:7], s8, v0
	v_cmp_gt_i32_e32 vcc, s8, v1
	v_cmp_le_i32_e64 s[4:5], s8, v2
	v_cndmask_b32_e64 v12, 0, v8, s[2:3]
	v_cndmask_b32_e64 v10, 0, v0, s[6:7]
	v_cndmask_b32_e32 v4, 0, v1, vcc
	s_and_saveexec_b64 s[8:9], s[4:5]
	s_xor_b64 s[8:9], exec, s[8:9]
	s_cbranch_execz .LBB0_2
	v_ashrrev_i32_e32 v13, 31, v12
	v_lshl_add_u64 v[0:1], v[12:13], 2, s[10:11]
	v_ashrrev_i32_e32 v11, 31, v10
	v_ashrrev_i32_e32 v5, 31, v4
	v_lshl_add_u64 v[2:3], v[10:11], 2, s[10:11]
	v_lshl_add_u64 v[6:7], v[4:5], 2, s[10:11]
	global_load_dword v5, v[0:1], off
	global_load_dword v9, v[2:3], off
	global_load_dword v11, v[6:7], off
	s_mov_b32 s14, 0
	s_waitcnt vmcnt(2)
	v_cndmask_b32_e64 v0, 0, v5, s[2:3]
	s_waitcnt vmcnt(1)
	v_cndmask_b32_e64 v1, 0, v9, s[6:7]
	s_waitcnt vmcnt(0)
	v_cndmask_b32_e32 v2, 0, v11, vcc
.LBB0_2:
	s_or_saveexec_b64 s[12:13], s[8:9]
	s_load_dwordx2 s[8:9], s[0:1], 0x8
	v_mov_b32_e32 v3, s14
	v_ashrrev_i32_e32 v9, 31, v8
	s_xor_b64 exec, exec, s[12:13]
	s_cbranch_execz .LBB0_4
	v_lshl_add_u64 v[0:1], v[8:9], 2, s[10:11]
	global_load_dwordx4 v[0:3], v[0:1], off
.LBB0_4:
	s_or_b64 exec, exec, s[12:13]
	s_and_saveexec_b64 s[10:11], s[4:5]
	s_xor_b64 s[10:11], exec, s[10:11]
	s_cbranch_execz .LBB0_6
	v_ashrrev_i32_e32 v13, 31, v12
	s_waitcnt lgkmcnt(0)
	v_lshl_add_u64 v[6:7], v[12:13], 2, s[8:9]
	v_ashrrev_i32_e32 v11, 31, v10
	v_ashrrev_i32_e32 v5, 31, v4
	v_lshl_add_u64 v[10:11], v[10:11], 2, s[8:9]
	v_lshl_add_u64 v[4:5], v[4:5], 2, s[8:9]
	global_load_dword v12, v[6:7], off
	global_load_dword v13, v[10:11], off
	global_load_dword v14, v[4:5], off
	s_mov_b32 s12, 0
	s_waitcnt vmcnt(2)
	v_cndmask_b32_e64 v4, 0, v12, s[2:3]
	s_waitcnt vmcnt(1)
	v_cndmask_b32_e64 v5, 0, v13, s[6:7]
	s_waitcnt vmcnt(0)
	v_cndmask_b32_e32 v6, 0, v14, vcc
.LBB0_6:
	s_or_saveexec_b64 s[10:11], s[10:11]
	s_load_dwordx2 s[0:1], s[0:1], 0x10
	v_mov_b32_e32 v7, s12
	s_xor_b64 exec, exec, s[10:11]
	s_cbranch_execz .LBB0_8
	s_waitcnt lgkmcnt(0)
	v_lshl_add_u64 v[4:5], v[8:9], 2, s[8:9]
	global_load_dwordx4 v[4:7], v[4:5], off
.LBB0_8:
	s_or_b64 exec, exec, s[10:11]
	s_waitcnt vmcnt(0)
	v_add_f32_e32 v0, v0, v4
	v_add_f32_e32 v1, v1, v5
	v_add_f32_e32 v2, v2, v6
	s_waitcnt lgkmcnt(0)
	s_and_saveexec_b64 s[8:9], s[4:5]
	s_xor_b64 s[4:5], exec, s[8:9]
	s_cbranch_execnz .LBB0_11
	s_andn2_saveexec_b64 s[2:3], s[4:5]
	s_cbranch_execnz .LBB0_16
.LBB0_10:
	s_endpgm
.LBB0_11:
	s_and_saveexec_b64 s[8:9], s[2:3]
	s_cbranch_execnz .LBB0_17
	s_or_b64 exec, exec, s[8:9]
	s_and_saveexec_b64 s[2:3], s[6:7]
	s_cbranch_execnz .LBB0_18
.LBB0_13:
	s_or_b64 exec, exec, s[2:3]
	s_and_saveexec_b64 s[2:3], vcc
	s_cbranch_execz .LBB0_15
.LBB0_14:
	v_lshl_add_u64 v[0:1], v[8:9], 2, s[0:1]
	global_store_dword v[0:1], v2, off offset:8
.LBB0_15:
	s_or_b64 exec, exec, s[2:3]
	s_andn2_saveexec_b64 s[2:3], s[4:5]
	s_cbranch_execz .LBB0_10
.LBB0_16:
	v_add_f32_e32 v3, v3, v7
	v_lshl_add_u64 v[4:5], v[8:9], 2, s[0:1]
	global_store_dwordx4 v[4:5], v[0:3], off
	s_endpgm
.LBB0_17:
	v_lshl_add_u64 v[4:5], v[8:9], 2, s[0:1]
	global_store_dword v[4:5], v0, off
	s_or_b64 exec, exec, s[8:9]
	s_and_saveexec_b64 s[2:3], s[6:7]
	s_cbranch_execz .LBB0_13
.LBB0_18:
	v_lshl_add_u64 v[4:5], v[8:9], 2, s[0:1]
	global_store_dword v[4:5], v1, off offset:4
	s_or_b64 exec, exec, s[2:3]
	s_and_saveexec_b64 s[2:3], vcc
	s_cbranch_execnz .LBB0_14
	s_branch .LBB0_15
	.section	.rodata,"a",@progbits
	.p2align	6, 0x0
	.amdhsa_kernel vector_add
		.amdhsa_group_segment_fixed_size 0
		.amdhsa_private_segment_fixed_size 0
		.amdhsa_kernarg_size 28
		.amdhsa_user_sgpr_count 2
		.amdhsa_user_sgpr_dispatch_ptr 0
		.amdhsa_user_sgpr_queue_ptr 0
		.amdhsa_user_sgpr_kernarg_segment_ptr 1
		.amdhsa_user_sgpr_dispatch_id 0
		.amdhsa_user_sgpr_kernarg_preload_length 0
		.amdhsa_user_sgpr_kernarg_preload_offset 0
		.amdhsa_user_sgpr_private_segment_size 0
		.amdhsa_uses_dynamic_stack 0
		.amdhsa_enable_private_segment 0
		.amdhsa_system_sgpr_workgroup_id_x 1
		.amdhsa_system_sgpr_workgroup_id_y 0
		.amdhsa_system_sgpr_workgroup_id_z 0
		.amdhsa_system_sgpr_workgroup_info 0
		.amdhsa_system_vgpr_workitem_id 0
		.amdhsa_next_free_vgpr 15
		.amdhsa_next_free_sgpr 15
		.amdhsa_accum_offset 16
		.amdhsa_reserve_vcc 1
		.amdhsa_reserve_xnack_mask 1
		.amdhsa_float_round_mode_32 0
		.amdhsa_float_round_mode_16_64 0
		.amdhsa_float_denorm_mode_32 3
		.amdhsa_float_denorm_mode_16_64 3
		.amdhsa_dx10_clamp 1
		.amdhsa_ieee_mode 1
		.amdhsa_fp16_overflow 0
		.amdhsa_tg_split 0
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

	.p2alignl 6, 3212836864
	.fill 256, 4, 3212836864
	.section	".note.GNU-stack","",@progbits
	.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .args:
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
    .max_flat_workgroup_size: 256
    .name:           vector_add
    .private_segment_fixed_size: 0
    .sgpr_count:     21
    .sgpr_spill_count: 0
    .symbol:         vector_add.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     15
    .vgpr_spill_count: 0
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa--gfx942
amdhsa.version:
  - 1
  - 2
...

	.end_amdgpu_metadata
