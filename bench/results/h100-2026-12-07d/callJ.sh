# Call J: tensor-map copies (TMA) on sm_90a. Smoke runs, the CUDA kernel tests, then matmul with cuBLAS in the
# same run for this build and, beside it, the build before (cp.async copies).
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
B="$bin/tilekit"; OLD="$bin/tilekit_old"
step smoke
for s in 512x384x256 136x144x80 4096x4096x4096; do
  timeout 60 $B run matmul --device cuda --shape $s --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 2>&1 | grep -v XDG_RUNTIME | tail -2 | head -1
done
timeout 60 $B run matmul --device cuda --shape 136x144x80 --opt trans_b=1 --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3 2>&1 | grep -v XDG_RUNTIME | tail -2 | head -1
timeout 60 $B run attention --device cuda 2>&1 | grep -v XDG_RUNTIME | tail -2 | head -1
step kernels_cuda
(timeout 150 $bin/kernels_cuda --test-threads 4 matmul attention 2>&1 | grep -v XDG_RUNTIME | tail -20; echo rc=${PIPESTATUS[0]}) > $OUT/kernels_cuda.txt; grep -E "test result|panicked|^rc=|FAILED" $OUT/kernels_cuda.txt
step bench-new
timeout 170 $B bench --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:4096x4096x4096:f16 --problem matmul:8192x8192x8192:f16 --problem matmul:4096x4096x4096:bf16 \
  --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-new.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-new.log
tail -14 $OUT/bench-new.log
step end; exit 0
step bench-old
timeout 100 $OLD bench --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:4096x4096x4096:f16 --problem matmul:4096x4096x4096:bf16 \
  --config BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-old.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-old.log
tail -8 $OUT/bench-old.log
step end
