# Call N: tf32 matmul on the GPU (correctness on the test problems through CUDA on sm_90a and on
# the sm_80 code, then 4096^3 and 8192^3 against cuBLAS's tf32 product in the same runs), the
# compile latency of every configuration to PTX for the H200 target (sm_90a) on this machine's
# processors, matmul f16 1024^3 over more tiles and 4096^3 with cuBLAS, then Triton 3.6 and
# torch.matmul (tf32) in the same call.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
B="$bin/tilekit"
step tf32-tests
for arch in sm_90a sm_80; do
  for cfg in BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=3 BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=3 BLOCK_M=16,BLOCK_N=16,BLOCK_K=16,GROUP_M=2,num_warps=2,num_stages=2; do
    echo "-- $arch $cfg"; TILEKIT_CUDA_ARCH=$arch timeout 60 $B run matmul --device cuda --problems tests --dtype f32 --config $cfg 2>&1 | grep -v XDG_RUNTIME | grep -E "tf32|passed|FAIL|ERROR|error"
  done
done > $OUT/tf32-tests.log 2>&1
grep -E "^-- |passed" $OUT/tf32-tests.log
step bench-tf32
timeout 200 $B bench --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:4096x4096x4096:f32:precision=tf32 --problem matmul:8192x8192x8192:f32:precision=tf32 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=3 --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=3 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=4 --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=3 \
  --config BLOCK_M=128,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=4 \
  -o $OUT/bench-matmul-tf32.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -30 > $OUT/bench-matmul-tf32.log
tail -16 $OUT/bench-matmul-tf32.log
step compile
(timeout 150 $bin/compile --bench 2>&1 | grep -v XDG_RUNTIME > $OUT/compile.log); tail -4 $OUT/compile.log
cp bench/results/compile-ptx-*.json $OUT/ 2>/dev/null
step bench-f16
timeout 100 $B bench --device cuda --min-runs 20 --min-time-ms 40 --problem matmul:1024x1024x1024:f16 --problem matmul:4096x4096x4096:f16 \
  --config BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 --config BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 \
  --config BLOCK_M=128,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-matmul-f16.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -20 > $OUT/bench-matmul-f16.log
tail -10 $OUT/bench-matmul-f16.log
step reference
timeout 120 python3 bench/triton/reference.py --only matmul_tf32 > $OUT/reference-tf32.jsonl 2> $OUT/reference-tf32.err
tail -4 $OUT/reference-tf32.jsonl | cut -c1-300
step end
