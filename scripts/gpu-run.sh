#!/usr/bin/env bash
# Runs tilekit's GPU tests and benchmark on a machine with an NVIDIA GPU and no toolchain: the
# binaries are built elsewhere (scripts/gpu-pack.sh) and carried in .h200/ with the Vulkan
# loader packages in .gl/. Results go to $OUT (default ./gpu-out). Modes: tests, bench (the
# benches/gpu.rs benchmark), all (both), report (`tilekit bench` on the default suite and
# `tilekit report`: $OUT/bench-h200.json and $OUT/report.tgz), h200 (every kernel through
# Vulkan and CUDA, then report on the `memory` suite through Vulkan and CUDA), pending and
# pending-tests / -bench / -tune / -coop (= -coop-tests, -coop-bench) / -examples / -fuzz (the
# measurements open issues wait for, below), exec (a command).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-gpu-out}"
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES="${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}"
# No validation layer and no spirv-val on that machine: both checks run in CI on lavapipe.
export TILEKIT_VULKAN_VALIDATION=0 TILEKIT_SKIP_SPIRV_VAL=1
# A kernel that hangs fails its test after this long instead of holding the machine.
export TILEKIT_VULKAN_TIMEOUT_S="${TILEKIT_VULKAN_TIMEOUT_S:-20}"
bin=$(mktemp -d)
for f in .h200/*.xz; do xz -dc "$f" > "$bin/$(basename "$f" .xz)"; done
chmod +x "$bin"/*
# The PTX backend links libdevice from beside the binaries.
export TILEKIT_LIBDEVICE="$bin/libdevice.10.bc"
# libffi and libzstd for the statically linked LLVM, where the machine lacks them.
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$OUT/gpu.txt" 2>&1
"$bin/tilekit" devices --json > "$OUT/devices.json" 2>"$OUT/devices.err"
case "${1:-all}" in
  exec)
    # A command of one's own with the binaries in $bin (and the environment above), for
    # diagnosis: `bash scripts/gpu-run.sh exec 'cmd'`.
    shift; export bin; bash -c "$*"
    ;;
  pending|pending-attention)
    # Issue 15: matmul and attention on tensor cores. The H200 compiles for sm_90a (warpgroup
    # matrix instructions); TILEKIT_CUDA_ARCH=sm_90 gives the mma.sync code beside it. The CUDA
    # kernel tests for both, then the issue's problems with cuBLAS in each `tilekit bench` run,
    # then torch's SDPA (flash) and Triton in the same call.
    for arch in sm_90a sm_90; do
      for k in attention attention_matrix matmul matmul_pipelined; do
        echo "== kernels_cuda $k $arch"; TILEKIT_CUDA_ARCH=$arch timeout 150 "$bin/kernels_cuda" --exact "$k" 2>&1 | tail -8; echo "rc=$?"
      done
    done > "$OUT/attention-tests.txt" 2>&1
    grep -E "^== |test result|^rc=" "$OUT/attention-tests.txt"
    for arch in sm_90a sm_90; do
      TILEKIT_CUDA_ARCH=$arch timeout 200 "$bin/tilekit" bench --device cuda --problem attention:4x32x4096x64:f16 --problem attention:4x32x4096x128:f16 \
        --problem attention:4x32x4096x64:f16:causal=1 --problem attention:4x32x4096x128:f16:causal=1 \
        --problem matmul:4096x4096x4096:f16 --problem matmul:4096x4096x4096:bf16 --problem matmul:8192x8192x8192:f16 \
        --problem matmul:2048x2048x2048:f16 --problem matmul:1024x1024x1024:f16 -o "$OUT/bench-tc-$arch.json" 2>&1 \
        | grep --line-buffered -v XDG_RUNTIME | tail -60 > "$OUT/bench-tc-$arch.log"
      tail -14 "$OUT/bench-tc-$arch.log"
    done
    timeout 150 python3 bench/triton/reference.py --only attention --only matmul > "$OUT/reference-attention.jsonl" 2> "$OUT/reference-attention.err"
    tail -12 "$OUT/reference-attention.jsonl"
    ;;&
  pending|pending-tests)
    # What the open issues still need measured; `pending` runs every part (more than one call's
    # ten minutes when all run long), `pending-<part>` one of them. Each step is bounded and
    # written as it finishes. Tests: the library's tests that gain from CUDA (accuracy bounds,
    # launch API, builder ops, tuner, semantics) on every device there.
    for t in accuracy launch_api builder_ops tune semantics; do
      echo "== $t"; timeout 150 "$bin/$t" --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -30; echo "rc=$?"
    done > "$OUT/pending-tests.txt" 2>&1
    grep -E "^== |test result|^rc=|SKIPPED" "$OUT/pending-tests.txt"
    ;;&
  pending|pending-bench)
    # Issue 20: the `examples` suite (user-written kernels) against the copy, CUDA and Vulkan.
    timeout 240 "$bin/tilekit" bench --suite examples --device cuda --device vulkan -o "$OUT/bench-h200-examples.json" 2>&1 \
      | grep --line-buffered -v XDG_RUNTIME | tail -40 > "$OUT/bench-examples.log"
    tail -3 "$OUT/bench-examples.log"
    # Issue 18: the naga path against passthrough SPIR-V on the same GPU, memory-bound suite,
    # one run (target: >= 0.9x), and every kernel through naga against the reference.
    timeout 240 "$bin/tilekit" bench --suite memory --device wgpu --device wgpu-naga -o "$OUT/bench-h200-naga.json" 2>&1 \
      | grep --line-buffered -v XDG_RUNTIME | tail -40 > "$OUT/bench-naga.log"
    tail -3 "$OUT/bench-naga.log"
    timeout 200 "$bin/tilekit" run --all --problems tests --all-dtypes --device wgpu-naga 2>&1 | grep -v XDG_RUNTIME | tail -60 > "$OUT/run-naga.log"
    tail -1 "$OUT/run-naga.log"
    ;;&
  pending|pending-tune)
    # Issue 17: the tuner, exhaustive against the cost model, on problems of the committed
    # results, through CUDA and Vulkan; each answer as JSON (a cache of the call's own).
    for d in cuda vulkan; do
      for p in "softmax --shape 4096x12800 --dtype f16" "layernorm --shape 4096x8192 --dtype f16" \
               "matmul --shape 4096x4096x4096 --dtype f16" "rmsnorm --shape 4096x8192 --dtype f16" "vector_add --shape 2^26"; do
        for s in exhaustive model; do
          extra=""; [ "$s" = model ] && extra="--model"
          echo "== tune $p --device $d $s"
          timeout 120 "$bin/tilekit" tune $p --device "$d" $extra --retune --json --cache-dir "$OUT/tune-cache" 2>/dev/null \
            > "$OUT/tune-$d-$(echo "$p" | cut -d' ' -f1)-$s.json"; echo "rc=$?"
        done
      done
    done > "$OUT/pending-tune.txt" 2>&1
    grep -c "rc=0" "$OUT/pending-tune.txt"
    ;;&
  pending|pending-coop|pending-coop-tests)
    # Issue 16: dots on cooperative matrices through the driver. What it lists is in
    # devices.json (cooperative_matrix_listed, matrix_extensions: bf16 needs
    # VK_KHR_shader_bfloat16); then the kernel tests that run matmul and attention on them
    # (Vulkan and wgpu), every configuration checked at ragged sizes, then the issue's problems
    # timed with cuBLAS (CUDA) in the same run and torch's SDPA in the same call.
    for k in matmul_and_attention_cooperative_matrices matmul attention; do
      echo "== kernels_vulkan $k"; timeout 150 "$bin/kernels_vulkan" --exact "$k" 2>&1 | grep -v XDG_RUNTIME | tail -12; echo "rc=$?"
    done > "$OUT/coop-tests.txt" 2>&1
    grep -E "^== |test result|^rc=|SKIPPED" "$OUT/coop-tests.txt"
    ;;&
  pending|pending-coop|pending-coop-bench)
    # Tuning every configuration on three devices did not fit a call (each is compiled by the
    # driver, checked at the problem's size and timed): the tensor-core tiles only, matmul and
    # attention apart (their meta-parameters differ), most wanted first, so a call that runs out
    # of time keeps what was written. SDPA first: it is the attention baseline of this call.
    timeout 40 python3 bench/triton/reference.py --only attention > "$OUT/coop-reference.jsonl" 2> "$OUT/coop-reference.err"
    tail -4 "$OUT/coop-reference.jsonl" | cut -c1-160
    timeout 200 "$bin/tilekit" bench --device vulkan --device wgpu --device cuda --min-runs 10 --min-time-ms 20 \
      --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,num_warps=8,num_stages=4 --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,num_warps=4,num_stages=3 \
      --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,num_warps=4,num_stages=4 --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,num_warps=8,num_stages=3 \
      --problem matmul:4096x4096x4096:f16 --problem matmul:4096x4096x4096:bf16 --problem matmul:8192x8192x8192:f16 \
      -o "$OUT/coop-bench-matmul.json" 2>&1 | grep --line-buffered -v XDG_RUNTIME > "$OUT/coop-bench-matmul.log"
    grep -v skipped "$OUT/coop-bench-matmul.log" | tail -16
    timeout 150 "$bin/tilekit" bench --device vulkan --device wgpu --device cuda --min-runs 10 --min-time-ms 20 \
      --config BLOCK_M=128,BLOCK_N=64,num_warps=8,num_stages=3 --config BLOCK_M=64,BLOCK_N=64,num_warps=4,num_stages=3 \
      --config BLOCK_M=128,BLOCK_N=128,num_warps=8,num_stages=2 \
      --problem attention:4x32x4096x64:f16 --problem attention:4x32x4096x128:f16 \
      -o "$OUT/coop-bench-attention.json" 2>&1 | grep --line-buffered -v XDG_RUNTIME > "$OUT/coop-bench-attention.log"
    grep -v skipped "$OUT/coop-bench-attention.log" | tail -12
    ;;&
  pending|pending-examples)
    # Issue 20 part 7: the user kernels against the copy, with the copy at each kernel's own size
    # beside (vector add 2^24 bf16 moves 96 MiB, gelu 2^24 bf16 64 MiB), and Triton's and torch's
    # GELU with torch's copy of the same bytes in the same call.
    timeout 150 "$bin/tilekit" bench --suite examples --min-runs 10 --min-time-ms 20 --device cuda --device vulkan --problem gelu:2^24:bf16 \
      --problem gelu:2^26:bf16 --problem gelu:2^24:f32 --problem vector_add:2^24:bf16 --problem vector_add:2^23:f32 \
      --problem rmsnorm_quant:4096x8192:bf16 --problem argmax:8192x8192:f32 -o "$OUT/bench-examples.json" 2>&1 \
      | grep --line-buffered -v XDG_RUNTIME | tail -60 > "$OUT/bench-examples.log"
    tail -20 "$OUT/bench-examples.log"
    timeout 60 python3 bench/triton/reference.py --only gelu > "$OUT/examples-reference.jsonl" 2> "$OUT/examples-reference.err"
    tail -8 "$OUT/examples-reference.jsonl"
    ;;&
  pending|pending-fuzz)
    # Issue 19: the campaign it asks for through the GPU's Vulkan, wgpu and CUDA paths (seed 61
    # ran its 6,000 on an H100 at 7e3f718 in 206 s with 0 unexplained), then every saved case.
    timeout 420 "$bin/tilekit" fuzz --seed 61 --count 6000 --devices vulkan,wgpu,cuda --jobs 15 --max-per-thread 64 \
      --time-limit 380 --out "$OUT/fuzz-seed61.json" --save-failures "$OUT/fuzz-failures" 2>&1 | grep -v XDG_RUNTIME | tail -20 > "$OUT/fuzz-seed61.log"
    tail -10 "$OUT/fuzz-seed61.log"
    mkdir -p /tmp/cases && tar -xf "$bin/fuzz-cases.tar" -C /tmp/cases
    timeout 120 "$bin/tilekit" fuzz --replay /tmp/cases/fuzz/*.tile --devices cuda,vulkan,wgpu 2>&1 | grep -v XDG_RUNTIME | tail -20 > "$OUT/fuzz-replay.log"
    tail -3 "$OUT/fuzz-replay.log"
    ;;
  tests|all)
    # grid_fold: grids past the workgroup limit, folded (wgpu caps every axis at 65535).
    for t in ops control runtime grid_fold; do
      echo "== $t"; timeout 120 "$bin/$t" --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -40
    done > "$OUT/tests.txt" 2>&1
    # wgpu's tests one at a time, each bounded: a hang names its test.
    for k in $("$bin/wgpu_rt" --list 2>/dev/null | sed -n 's/: test$//p'); do
      echo "== wgpu_rt $k"; timeout 30 "$bin/wgpu_rt" --exact "$k" --nocapture 2>&1 | grep -v XDG_RUNTIME | tail -12
      echo "rc=$?"
    done >> "$OUT/tests.txt" 2>&1
    # One kernel at a time, each bounded, so one hang cannot hide the others.
    for k in $("$bin/kernels_vulkan" --list 2>/dev/null | sed -n 's/: test$//p'); do
      echo "== kernels_vulkan $k"; timeout 90 "$bin/kernels_vulkan" --exact "$k" 2>&1 | grep -v XDG_RUNTIME | tail -12
      echo "rc=$?"
    done >> "$OUT/tests.txt" 2>&1
    # Every kernel on every CUDA device (PTX), one kernel at a time as above.
    for k in $("$bin/kernels_cuda" --list 2>/dev/null | sed -n 's/: test$//p'); do
      echo "== kernels_cuda $k"; timeout 120 "$bin/kernels_cuda" --exact "$k" 2>&1 | tail -12
      echo "rc=$?"
    done >> "$OUT/tests.txt" 2>&1
    grep -E "^== |test result|^rc=" "$OUT/tests.txt"
    ;;&
  h200)
    # One call's worth: every kernel through Vulkan and CUDA (not wgpu: the same SPIR-V; or the
    # test binaries named in TILEKIT_H200_TESTS), folded grids through wgpu (which caps every
    # axis at 65535, so vector add 2^28 needs them), then the report below on the `memory` suite.
    for t in ${TILEKIT_H200_TESTS:-kernels_vulkan kernels_cuda}; do
      for k in $("$bin/$t" --list 2>/dev/null | sed -n 's/: test$//p'); do
        echo "== $t $k"; timeout 60 "$bin/$t" --exact "$k" 2>&1 | grep -v XDG_RUNTIME | tail -8
        echo "rc=$?"
      done
    done > "$OUT/tests.txt" 2>&1
    { echo "== grid_fold"; timeout 60 "$bin/grid_fold" 2>&1 | grep -v XDG_RUNTIME | tail -8; echo "rc=$?"
      echo "== tilekit run vector_add --device wgpu --shape 2^28 --config BLOCK=1024"
      timeout 60 "$bin/tilekit" run vector_add --device wgpu --shape 2^28 --config BLOCK=1024 2>&1 | grep -v XDG_RUNTIME | tail -8; echo "rc=$?"
    } >> "$OUT/tests.txt" 2>&1
    grep -E "^== |test result|^rc=" "$OUT/tests.txt"
    export TILEKIT_SUITE="${TILEKIT_SUITE:-memory}" TILEKIT_BENCH_DEVICES="${TILEKIT_BENCH_DEVICES:---device vulkan --device cuda}"
    ;;&
  report|h200)
    # The default suite on the GPU through both runtimes (no CPU devices: the interpreter would
    # spend minutes on shapes sized for a GPU), bounded so that the results saved after every
    # case survive; then the report, packed (the charts sit one folder too deep to come back).
    timeout "${TILEKIT_BENCH_TIMEOUT_S:-540}" "$bin/tilekit" bench --suite "${TILEKIT_SUITE:-default}" \
      ${TILEKIT_BENCH_DEVICES:---device vulkan --device wgpu} -o "$OUT/bench-h200.json" 2>&1 | grep --line-buffered -v XDG_RUNTIME | tee "$OUT/bench.log"
    "$bin/tilekit" report "$OUT/bench-h200.json" -o "$OUT/report" 2>&1 | tee -a "$OUT/bench.log"
    tar czf "$OUT/report.tgz" -C "$OUT" report && rm -rf "$OUT/report"
    ;;
  bench|all)
    TILEKIT_BENCH_OUT="$OUT/gpu-bench.json" TILEKIT_BENCH_RUNS="${TILEKIT_BENCH_RUNS:-30}" "$bin/gpu" 2>&1 | grep --line-buffered -v XDG_RUNTIME | tee "$OUT/bench.txt"
    ;;
esac
# The device tool brings back at most 8 files a call: past that, everything goes back as one
# archive (`tar -xJf all.tar.xz` here), so no result is dropped by count.
if [ "$(find "$OUT" -type f | wc -l)" -gt 8 ]; then
  tar -cJf /tmp/gpu-run-all.tar.xz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/gpu-run-all.tar.xz "$OUT/all.tar.xz"
  echo "more than 8 files: packed into all.tar.xz"
fi
