# Call F: matmul 1024^3 and 2048^3 and the bias + GELU epilogue with cuBLAS; attention; Triton and torch in the same call.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
B="$bin/tilekit"
step bench-small
timeout 150 $B bench --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:1024x1024x1024:f16 --problem matmul:2048x2048x2048:f16 --problem matmul:4096x4096x4096:f16:bias=1,act=gelu \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 \
  -o $OUT/bench-matmul-small.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-matmul-small.log
tail -20 $OUT/bench-matmul-small.log
step bench-attention
timeout 200 $B bench --device cuda --min-runs 10 --min-time-ms 20 --no-baselines \
  --problem attention:4x32x4096x64:f16 --problem attention:4x32x4096x128:f16 --problem attention:4x32x4096x128:f16:causal=1 --problem attention:4x32x4096x64:f16:causal=1 \
  --config BLOCK_M=64,BLOCK_N=64,num_warps=4,num_stages=3 --config BLOCK_M=128,BLOCK_N=64,num_warps=8,num_stages=3 \
  -o $OUT/bench-attention.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-attention.log
tail -20 $OUT/bench-attention.log
step reference
timeout 150 python3 bench/triton/reference.py --only attention --only matmul > $OUT/reference.jsonl 2> $OUT/reference.err
tail -14 $OUT/reference.jsonl | cut -c1-300
step end
