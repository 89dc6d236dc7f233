# NOT RUN on 2026-12-07: no device machine started for it (the session's device time went to failed starts).
# Call M: compile latency of every configuration to PTX for the H200 target (sm_90a, tensor copies included) on
# this machine's processors; matmul 1024^3 over more tiles, cuBLAS in the same run.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
B="$bin/tilekit"
step compile
(timeout 150 $bin/compile --bench 2>&1 | grep -v XDG_RUNTIME > $OUT/compile.log); tail -4 $OUT/compile.log
cp bench/results/compile-ptx-*.json $OUT/ 2>/dev/null; ls $OUT
step bench-1024
timeout 70 $B bench --device cuda --min-runs 20 --min-time-ms 40 --problem matmul:1024x1024x1024:f16 \
  --config BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 --config BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 \
  --config BLOCK_M=128,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=4 --config BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=3 \
  --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-matmul-1024.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -20 > $OUT/bench-matmul-1024.log
tail -5 $OUT/bench-matmul-1024.log
step end
