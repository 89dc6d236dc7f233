	.text
	.amdgcn_target "amdgcn-amd-amdhsa--gfx942"
	.amdhsa_code_object_version 5
	.globl	softmax
	.p2align	8
	.type	softmax,@function
softmax:
	s_load_dword s3, s[0:1], 0x10
	s_load_dwordx2 s[4:5], s[0:1], 0x0
	v_and_b32_e32 v3, 0x7f, v0
	v_and_b32_e32 v0, 0x80, v0
	v_mov_b32_e32 v1, 0
	s_waitcnt lgkmcnt(0)
	s_mul_i32 s2, s2, s3
	v_add_u32_e32 v2, s2, v3
	v_cmp_gt_i32_e32 vcc, s3, v3
	v_lshlrev_b32_e32 v3, 2, v3
	v_cmp_eq_u32_e64 s[2:3], 0, v0
	v_cndmask_b32_e32 v4, 0, v2, vcc
	v_ashrrev_i32_e32 v5, 31, v4
	v_lshl_add_u64 v[4:5], v[4:5], 2, s[4:5]
	global_load_dword v4, v[4:5], off
	v_mov_b32_e32 v5, 0xff800000
	s_barrier
	s_mov_b32 s4, 0x3fb8aa3b
	s_mov_b32 s5, 0xc2ce8ed0
	s_mov_b32 s6, 0x42b17218
	v_mov_b32_e32 v56, 0x7f800000
	s_and_b64 s[2:3], s[2:3], vcc
	s_waitcnt vmcnt(0)
	v_cndmask_b32_e32 v0, v5, v4, vcc
	ds_write_b32 v3, v0
	s_waitcnt lgkmcnt(0)
	s_barrier
	ds_read_b128 v[4:7], v1
	ds_read_b128 v[8:11], v1 offset:16
	ds_read_b128 v[12:15], v1 offset:32
	ds_read_b128 v[16:19], v1 offset:48
	ds_read_b128 v[20:23], v1 offset:64
	ds_read_b128 v[24:27], v1 offset:80
	ds_read_b128 v[28:31], v1 offset:96
	ds_read_b128 v[32:35], v1 offset:112
	ds_read_b128 v[36:39], v1 offset:128
	ds_read_b128 v[40:43], v1 offset:144
	ds_read_b128 v[44:47], v1 offset:160
	ds_read_b128 v[48:51], v1 offset:176
	s_waitcnt lgkmcnt(11)
	v_max_f32_e32 v5, v5, v5
	v_max_f32_e32 v4, v4, v4
	v_max_f32_e32 v4, v4, v5
	v_max3_f32 v57, v4, v6, v7
	s_waitcnt lgkmcnt(10)
	v_max3_f32 v8, v57, v8, v9
	v_max3_f32 v8, v8, v10, v11
	s_waitcnt lgkmcnt(9)
	v_max3_f32 v8, v8, v12, v13
	v_max3_f32 v57, v8, v14, v15
	s_waitcnt lgkmcnt(8)
	v_max3_f32 v16, v57, v16, v17
	v_max3_f32 v16, v16, v18, v19
	s_waitcnt lgkmcnt(7)
	v_max3_f32 v16, v16, v20, v21
	v_max3_f32 v57, v16, v22, v23
	s_waitcnt lgkmcnt(6)
	v_max3_f32 v24, v57, v24, v25
	v_max3_f32 v24, v24, v26, v27
	s_waitcnt lgkmcnt(5)
	v_max3_f32 v24, v24, v28, v29
	v_max3_f32 v57, v24, v30, v31
	s_waitcnt lgkmcnt(4)
	v_max3_f32 v32, v57, v32, v33
	v_max3_f32 v32, v32, v34, v35
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v32, v32, v36, v37
	v_max3_f32 v57, v32, v38, v39
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v40, v57, v40, v41
	v_max3_f32 v40, v40, v42, v43
	ds_read_b128 v[4:7], v1 offset:192
	ds_read_b128 v[52:55], v1 offset:208
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v40, v40, v44, v45
	v_max3_f32 v57, v40, v46, v47
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v48, v57, v48, v49
	v_max3_f32 v48, v48, v50, v51
	ds_read_b128 v[8:11], v1 offset:224
	ds_read_b128 v[12:15], v1 offset:240
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v4, v48, v4, v5
	v_max3_f32 v57, v4, v6, v7
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v52, v57, v52, v53
	v_max3_f32 v52, v52, v54, v55
	ds_read_b128 v[16:19], v1 offset:256
	ds_read_b128 v[20:23], v1 offset:272
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v8, v52, v8, v9
	v_max3_f32 v57, v8, v10, v11
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v12, v57, v12, v13
	v_max3_f32 v12, v12, v14, v15
	ds_read_b128 v[24:27], v1 offset:288
	ds_read_b128 v[28:31], v1 offset:304
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v12, v12, v16, v17
	v_max3_f32 v57, v12, v18, v19
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v20, v57, v20, v21
	v_max3_f32 v20, v20, v22, v23
	ds_read_b128 v[32:35], v1 offset:320
	ds_read_b128 v[36:39], v1 offset:336
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v20, v20, v24, v25
	v_max3_f32 v57, v20, v26, v27
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v28, v57, v28, v29
	v_max3_f32 v28, v28, v30, v31
	ds_read_b128 v[40:43], v1 offset:352
	ds_read_b128 v[44:47], v1 offset:368
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v28, v28, v32, v33
	v_max3_f32 v28, v28, v34, v35
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v28, v28, v36, v37
	v_max3_f32 v28, v28, v38, v39
	ds_read_b128 v[4:7], v1 offset:384
	ds_read_b128 v[48:51], v1 offset:400
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v28, v28, v40, v41
	v_max3_f32 v28, v28, v42, v43
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v28, v28, v44, v45
	v_max3_f32 v28, v28, v46, v47
	ds_read_b128 v[8:11], v1 offset:416
	ds_read_b128 v[52:55], v1 offset:432
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v4, v28, v4, v5
	v_max3_f32 v4, v4, v6, v7
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v4, v4, v48, v49
	v_max3_f32 v4, v4, v50, v51
	ds_read_b128 v[12:15], v1 offset:448
	ds_read_b128 v[16:19], v1 offset:464
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v4, v4, v8, v9
	v_max3_f32 v4, v4, v10, v11
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v4, v4, v52, v53
	v_max3_f32 v4, v4, v54, v55
	ds_read_b128 v[20:23], v1 offset:480
	ds_read_b128 v[24:27], v1 offset:496
	s_waitcnt lgkmcnt(3)
	v_max3_f32 v4, v4, v12, v13
	v_max3_f32 v4, v4, v14, v15
	s_waitcnt lgkmcnt(2)
	v_max3_f32 v4, v4, v16, v17
	v_max3_f32 v4, v4, v18, v19
	s_waitcnt lgkmcnt(1)
	v_max3_f32 v4, v4, v20, v21
	v_max3_f32 v4, v4, v22, v23
	s_waitcnt lgkmcnt(0)
	v_max3_f32 v4, v4, v24, v25
	v_max3_f32 v4, v4, v26, v27
	v_sub_f32_e32 v0, v0, v4
	v_mul_f32_e32 v4, 0x3fb8aa3b, v0
	v_fma_f32 v5, v0, s4, -v4
	v_rndne_f32_e32 v6, v4
	v_fmamk_f32 v5, v0, 0x32a5705f, v5
	v_sub_f32_e32 v4, v4, v6
	v_add_f32_e32 v4, v4, v5
	v_cvt_i32_f32_e32 v6, v6
	v_exp_f32_e32 v4, v4
	v_cmp_ngt_f32_e64 s[4:5], s5, v0
	s_barrier
	v_ldexp_f32 v4, v4, v6
	v_cndmask_b32_e64 v4, 0, v4, s[4:5]
	v_cmp_nlt_f32_e64 s[4:5], s6, v0
	s_nop 1
	v_cndmask_b32_e64 v0, v56, v4, s[4:5]
	ds_write_b32 v3, v0
	s_waitcnt lgkmcnt(0)
	s_barrier
	s_and_saveexec_b64 s[4:5], s[2:3]
	s_cbranch_execz .LBB0_2
	ds_read_b128 v[4:7], v1
	ds_read_b128 v[8:11], v1 offset:16
	ds_read_b128 v[12:15], v1 offset:32
	ds_read_b128 v[16:19], v1 offset:48
	s_load_dwordx2 s[0:1], s[0:1], 0x8
	s_waitcnt lgkmcnt(0)
	v_add_f32_e32 v3, v4, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	v_add_f32_e32 v3, v3, v12
	v_add_f32_e32 v3, v3, v13
	v_add_f32_e32 v3, v3, v14
	v_add_f32_e32 v3, v3, v15
	ds_read_b128 v[4:7], v1 offset:64
	ds_read_b128 v[8:11], v1 offset:80
	v_add_f32_e32 v3, v3, v16
	v_add_f32_e32 v3, v3, v17
	v_add_f32_e32 v3, v3, v18
	v_add_f32_e32 v3, v3, v19
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:96
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:112
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:128
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:144
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:160
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:176
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:192
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:208
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:224
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:240
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:256
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:272
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:288
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:304
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:320
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:336
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:352
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:368
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:384
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:400
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:416
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:432
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:448
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:464
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v4
	v_add_f32_e32 v3, v3, v5
	v_add_f32_e32 v3, v3, v6
	v_add_f32_e32 v3, v3, v7
	ds_read_b128 v[4:7], v1 offset:480
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v3, v3, v8
	v_add_f32_e32 v3, v3, v9
	v_add_f32_e32 v3, v3, v10
	v_add_f32_e32 v3, v3, v11
	ds_read_b128 v[8:11], v1 offset:496
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v1, v3, v4
	v_add_f32_e32 v1, v1, v5
	v_add_f32_e32 v1, v1, v6
	v_add_f32_e32 v1, v1, v7
	s_waitcnt lgkmcnt(0)
	v_add_f32_e32 v1, v1, v8
	v_add_f32_e32 v1, v1, v9
	v_add_f32_e32 v1, v1, v10
	v_add_f32_e32 v1, v1, v11
	v_div_scale_f32 v3, s[2:3], v1, v1, 1.0
	v_rcp_f32_e32 v4, v3
	s_nop 0
	v_fma_f32 v5, -v3, v4, 1.0
	v_fmac_f32_e32 v4, v5, v4
	v_div_scale_f32 v5, vcc, 1.0, v1, 1.0
	v_mul_f32_e32 v6, v5, v4
	v_fma_f32 v7, -v3, v6, v5
	v_fmac_f32_e32 v6, v7, v4
	v_fma_f32 v3, -v3, v6, v5
	v_div_fmas_f32 v3, v3, v4, v6
	v_div_fixup_f32 v1, v3, v1, 1.0
	v_ashrrev_i32_e32 v3, 31, v2
	v_mul_f32_e32 v4, v0, v1
	v_lshl_add_u64 v[0:1], v[2:3], 2, s[0:1]
	global_store_dword v[0:1], v4, off
.LBB0_2:
	s_endpgm
	.section	.rodata,"a",@progbits
	.p2align	6, 0x0
	.amdhsa_kernel softmax
		.amdhsa_group_segment_fixed_size 512
		.amdhsa_private_segment_fixed_size 0
		.amdhsa_kernarg_size 20
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
		.amdhsa_next_free_vgpr 58
		.amdhsa_next_free_sgpr 7
		.amdhsa_accum_offset 60
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
	.size	softmax, .Lfunc_end0-softmax

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
      - .actual_access:  write_only
        .address_space:  global
        .name:           p1
        .offset:         8
        .size:           8
        .value_kind:     global_buffer
      - .name:           p2
        .offset:         16
        .size:           4
        .value_kind:     by_value
    .group_segment_fixed_size: 512
    .kernarg_segment_align: 8
    .kernarg_segment_size: 20
    .max_flat_workgroup_size: 256
    .name:           softmax
    .private_segment_fixed_size: 0
    .sgpr_count:     13
    .sgpr_spill_count: 0
    .symbol:         softmax.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     58
    .vgpr_spill_count: 0
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa--gfx942
amdhsa.version:
  - 1
  - 2
...

	.end_amdgpu_metadata
