# Call O: tf32 matmul after operand rounding with cvt.rna and `a` read by matrix loads: the test
# problems through CUDA (sm_90a and the sm_80 code), then 4096^3 and 8192^3 against cuBLAS's
# tf32 product in the same run, then Triton 3.6 and torch.matmul (tf32) in the same call.
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
timeout 300 $B bench --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:4096x4096x4096:f32:precision=tf32 --problem matmul:8192x8192x8192:f32:precision=tf32 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=3 --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=3 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=4 --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=3 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=16,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-matmul-tf32.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -30 > $OUT/bench-matmul-tf32.log
tail -16 $OUT/bench-matmul-tf32.log
step reference
timeout 120 python3 bench/triton/reference.py --only matmul_tf32 > $OUT/reference-tf32.jsonl 2> $OUT/reference-tf32.err
tail -4 $OUT/reference-tf32.jsonl | cut -c1-400
step end
