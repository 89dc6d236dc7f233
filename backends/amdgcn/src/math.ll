; f32 math for the AMDGPU hooks where no LLVM intrinsic lowers on AMDGPU (no ROCm device
; library is needed). Linked into each kernel that calls them, made internal and inlined.
; Constants are f32 values written as the hexadecimal doubles LLVM's parser requires.

declare float @llvm.fabs.f32(float)
declare float @llvm.fma.f32(float, float, float)
declare float @llvm.exp.f32(float)
declare float @llvm.sqrt.f32(float)
declare float @llvm.copysign.f32(float, float)

; 1 / sqrt(x) with the correctly rounded square root and division (v_rsq_f32 is 1 ulp and
; flushes denormals).
define float @tilekit_amdgcn_rsqrtf(float %x) {
  %s = call float @llvm.sqrt.f32(float %x)
  %r = fdiv float 1.0, %s
  ret float %r
}

; tanh: Cephes' odd polynomial below 0.625, where 1 - 2 / (exp(2|x|) + 1) would cancel; that
; formula above (it saturates to 1 once exp overflows). NaN takes the second branch and stays NaN.
define float @tilekit_amdgcn_tanhf(float %x) {
entry:
  %a = call float @llvm.fabs.f32(float %x)
  %small = fcmp olt float %a, 0x3FE4000000000000
  br i1 %small, label %poly, label %wide
poly:
  %z = fmul float %x, %x
  %tp0 = call float @llvm.fma.f32(float 0xBF775E1D40000000, float %z, float 0x3F952269C0000000)
  %tp1 = call float @llvm.fma.f32(float %tp0, float %z, float 0xBFAB83C5A0000000)
  %tp2 = call float @llvm.fma.f32(float %tp1, float %z, float 0x3FC1107260000000)
  %tp3 = call float @llvm.fma.f32(float %tp2, float %z, float 0xBFD5555320000000)
  %xz = fmul float %x, %z
  %p = call float @llvm.fma.f32(float %xz, float %tp3, float %x)
  ; -0 + +0 is +0: a zero is returned as it came.
  %zero = fcmp oeq float %x, 0.0
  %pz = select i1 %zero, float %x, float %p
  ret float %pz
wide:
  %a2 = fmul float %a, 2.0
  %e = call float @llvm.exp.f32(float %a2)
  %e1 = fadd float %e, 1.0
  %q = fdiv float 2.0, %e1
  %r = fsub float 1.0, %q
  %s = call float @llvm.copysign.f32(float %r, float %x)
  ret float %s
}

; erf: its Taylor series below 0.5 (keeps the relative accuracy near 0); above, 1 - erfc with
; the Chebyshev fit of Numerical Recipes (erfc's fractional error below 1.2e-7).
define float @tilekit_amdgcn_erff(float %x) {
entry:
  %a = call float @llvm.fabs.f32(float %x)
  %small = fcmp olt float %a, 0.5
  br i1 %small, label %series, label %wide
series:
  %z = fmul float %x, %x
  %ep0 = call float @llvm.fma.f32(float 0xBF4C02DB40000000, float %z, float 0x3F7565BCE0000000)
  %ep1 = call float @llvm.fma.f32(float %ep0, float %z, float 0xBF9B82CE40000000)
  %ep2 = call float @llvm.fma.f32(float %ep1, float %z, float 0x3FBCE2F220000000)
  %ep3 = call float @llvm.fma.f32(float %ep2, float %z, float 0xBFD8127460000000)
  %ep4 = call float @llvm.fma.f32(float %ep3, float %z, float 0x3FF20DD760000000)
  %p = fmul float %x, %ep4
  ret float %p
wide:
  %ha = fmul float %a, 0.5
  %d = fadd float %ha, 1.0
  %t = fdiv float 1.0, %d
  %np0 = call float @llvm.fma.f32(float 0x3FC5DF28A0000000, float %t, float 0xBFEA4F1240000000)
  %np1 = call float @llvm.fma.f32(float %np0, float %t, float 0x3FF7D0F600000000)
  %np2 = call float @llvm.fma.f32(float %np1, float %t, float 0xBFF229CBA0000000)
  %np3 = call float @llvm.fma.f32(float %np2, float %t, float 0x3FD1D8F980000000)
  %np4 = call float @llvm.fma.f32(float %np3, float %t, float 0xBFC7D84980000000)
  %np5 = call float @llvm.fma.f32(float %np4, float %t, float 0x3FB8C6D920000000)
  %np6 = call float @llvm.fma.f32(float %np5, float %t, float 0x3FD7F11F60000000)
  %np7 = call float @llvm.fma.f32(float %np6, float %t, float 0x3FF00018E0000000)
  %na = fneg float %a
  %aa = fmul float %na, %a
  %c0 = fadd float %aa, 0xBFF43F89C0000000
  %ee = call float @llvm.fma.f32(float %t, float %np7, float %c0)
  %ex = call float @llvm.exp.f32(float %ee)
  %erfc = fmul float %t, %ex
  %r = fsub float 1.0, %erfc
  %s = call float @llvm.copysign.f32(float %r, float %x)
  ret float %s
}

; fmod: LLVM's `frem`, which the AMDGPU back end expands to x - trunc(x / y) * y with an FMA.
define float @tilekit_amdgcn_fmodf(float %x, float %y) {
  %r = frem float %x, %y
  ret float %r
}
