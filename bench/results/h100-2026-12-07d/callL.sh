# Call L: attention on sm_90a with torch SDPA (flash) and Triton in the same call, then the mma.sync code (sm_90)
# for matmul and attention: kernel tests and figures beside cuBLAS.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
B="$bin/tilekit"
step bench-attention
timeout 200 $B bench --device cuda --min-runs 10 --min-time-ms 20 --no-baselines \
  --problem attention:4x32x4096x64:f16 --problem attention:4x32x4096x128:f16 --problem attention:4x32x4096x128:f16:causal=1 --problem attention:4x32x4096x64:f16:causal=1 \
  --config BLOCK_M=64,BLOCK_N=64,num_warps=4,num_stages=3 --config BLOCK_M=128,BLOCK_N=64,num_warps=8,num_stages=3 \
  -o $OUT/bench-attention.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-attention.log
tail -10 $OUT/bench-attention.log
step reference
timeout 150 python3 bench/triton/reference.py --only attention > $OUT/reference.jsonl 2> $OUT/reference.err
tail -8 $OUT/reference.jsonl | cut -c1-300
step kernels_cuda-sm_90
(TILEKIT_CUDA_ARCH=sm_90 timeout 120 $bin/kernels_cuda --test-threads 4 matmul attention 2>&1 | grep -v XDG_RUNTIME | tail -12; echo rc=${PIPESTATUS[0]}) > $OUT/kernels_cuda-sm_90.txt; grep -E "test result|panicked|^rc=|FAILED" $OUT/kernels_cuda-sm_90.txt
step bench-mma-sync
TILEKIT_CUDA_ARCH=sm_90 timeout 120 $B bench --device cuda --min-runs 10 --min-time-ms 20 --problem matmul:4096x4096x4096:f16 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,num_warps=4,num_stages=4 --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3 \
  -o $OUT/bench-mma-sync-matmul.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-mma-sync-matmul.log
tail -6 $OUT/bench-mma-sync-matmul.log
TILEKIT_CUDA_ARCH=sm_90 timeout 150 $B bench --device cuda --min-runs 10 --min-time-ms 20 --no-baselines \
  --problem attention:4x32x4096x64:f16 --problem attention:4x32x4096x128:f16 \
  --config BLOCK_M=64,BLOCK_N=64,num_warps=4,num_stages=3 --config BLOCK_M=128,BLOCK_N=64,num_warps=8,num_stages=3 \
  -o $OUT/bench-mma-sync-attention.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-mma-sync-attention.log
tail -6 $OUT/bench-mma-sync-attention.log
step end
