; f32 math for the AMDGPU hooks where no LLVM intrinsic lowers on AMDGPU (no ROCm device
; library is needed). Linked into each kernel that calls them, made internal and inlined.
; Constants are f32 values written as the hexadecimal doubles LLVM's parser requires.

declare float @llvm.sqrt.f32(float)

; 1 / sqrt(x) with the correctly rounded square root and division (v_rsq_f32 is 1 ulp and
; flushes denormals).
define float @tilekit_amdgcn_rsqrtf(float %x) {
  %s = call float @llvm.sqrt.f32(float %x)
  %r = fdiv float 1.0, %s
  ret float %r
}

; fmod: LLVM's `frem`, which the AMDGPU back end expands to x - trunc(x / y) * y with an FMA.
define float @tilekit_amdgcn_fmodf(float %x, float %y) {
  %r = frem float %x, %y
  ret float %r
}
