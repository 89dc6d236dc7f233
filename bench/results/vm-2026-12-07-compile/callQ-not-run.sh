# Call Q: compile latency of every configuration to PTX for the H200 target (sm_90a) on this
# machine's processors with the pipeline of 9bdd7bf (O3 less DROPPED_FROM_O3), twice; the CUDA
# kernel tests built with it on sm_90a and on the sm_90 code (mma.sync only).
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
nproc; grep -m1 "model name" /proc/cpuinfo
for r in 1 2; do
  step compile-$r
  (timeout 120 $bin/compile --bench 2>&1 | grep -v XDG_RUNTIME > $OUT/compile-$r.log); tail -2 $OUT/compile-$r.log
  cp bench/results/compile-ptx-*.json $OUT/compile-ptx-$r.json 2>/dev/null
done
step kernels_cuda
for arch in sm_90a sm_90; do
  for k in matmul matmul_pipelined attention attention_matrix; do
    echo "-- kernels_cuda $k $arch"; TILEKIT_CUDA_ARCH=$arch timeout 60 "$bin/kernels_cuda" --exact "$k" 2>&1 | grep -v XDG_RUNTIME | tail -4
  done
done > $OUT/kernels_cuda.txt 2>&1
grep -E "^-- |test result" $OUT/kernels_cuda.txt
step end
