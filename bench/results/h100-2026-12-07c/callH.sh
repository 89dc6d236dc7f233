# Call H (c48751b): kernel tests on CUDA; matmul with cuBLAS in the same runs (bf16 against cuBLAS bf16,
# the bias + GELU epilogue beside the plain product, 1024^3 over smaller tiles); the PTX A/B of the GELU forms.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
B="$bin/tilekit"
step kernels_cuda
(timeout 100 $bin/kernels_cuda --test-threads 4 matmul 2>&1 | grep -v XDG_RUNTIME | tail -12; echo rc=${PIPESTATUS[0]}) > $OUT/kernels_cuda.txt; grep -E "test result|panicked|^rc=|FAILED" $OUT/kernels_cuda.txt
step bench-epilogue-bf16
timeout 200 $B bench --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:4096x4096x4096:f16 --problem matmul:4096x4096x4096:f16:bias=1,act=gelu --problem matmul:4096x4096x4096:bf16 --problem matmul:8192x8192x8192:bf16 \
  --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-matmul-epilogue-bf16.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-matmul-epilogue-bf16.log
tail -12 $OUT/bench-matmul-epilogue-bf16.log
step bench-1024
timeout 100 $B bench --device cuda --min-runs 10 --min-time-ms 20 --problem matmul:1024x1024x1024:f16 --problem matmul:2048x2048x2048:f16 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 --config BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 \
  --config BLOCK_M=128,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 --config BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 \
  --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-matmul-1024.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-matmul-1024.log
tail -12 $OUT/bench-matmul-1024.log
step ptx-ab
bash .h200/callG.sh > $OUT/ep-ab.txt 2>&1; cat $OUT/ep-ab.txt
step end
