# Call K: every matmul row of issue 15 with cuBLAS in the same runs (tensor-map copies on sm_90a), then Triton 3.6
# and torch.matmul in the same call.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
B="$bin/tilekit"
step bench-large
timeout 240 $B bench --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:4096x4096x4096:f16 --problem matmul:8192x8192x8192:f16 --problem matmul:4096x4096x4096:bf16 --problem matmul:8192x8192x8192:bf16 \
  --problem matmul:4096x4096x4096:f16:bias=1,act=gelu \
  --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-matmul-large.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-matmul-large.log
tail -24 $OUT/bench-matmul-large.log
step bench-small
timeout 150 $B bench --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:1024x1024x1024:f16 --problem matmul:2048x2048x2048:f16 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 --config BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-matmul-small.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-matmul-small.log
tail -14 $OUT/bench-matmul-small.log
step reference
timeout 180 python3 bench/triton/reference.py --only matmul > $OUT/reference.jsonl 2> $OUT/reference.err
tail -8 $OUT/reference.jsonl | cut -c1-300
step end
