# Call E: the CUDA kernel tests on the tensor-core paths, then matmul f16/bf16 4096^3 and 8192^3 with cuBLAS.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
B="$bin/tilekit"
step kernels_cuda
(timeout 150 $bin/kernels_cuda --test-threads 4 matmul attention 2>&1 | grep -v XDG_RUNTIME | tail -20; echo rc=${PIPESTATUS[0]}) > $OUT/kernels_cuda.txt; grep -E "test result|panicked|^rc=|FAILED" $OUT/kernels_cuda.txt
step bench-large
timeout 300 $B bench --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:4096x4096x4096:f16 --problem matmul:8192x8192x8192:f16 --problem matmul:4096x4096x4096:bf16 --problem matmul:8192x8192x8192:bf16 \
  --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-matmul-large.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-matmul-large.log
tail -25 $OUT/bench-matmul-large.log
step end
