# Call T: the shortest form of call R. The workgroup-scope matmul of VK_NV_cooperative_matrix2
# (examples/coopmat2_matmul.rs) at a ragged size and 4096^3 over three shapes, then the
# subgroup-scope path and cuBLAS in one `tilekit bench` run.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
cat $OUT/gpu.txt
step coopmat2
timeout 60 $bin/coopmat2_matmul --runs 20 --size 1000x999x1001 --size 4096x4096x4096 --shape 128x256x64:256 --shape 128x128x64:256 --shape 128x128x32:128 > $OUT/coopmat2.jsonl 2> $OUT/coopmat2.err; echo rc=$?
cut -c1-400 $OUT/coopmat2.jsonl; tail -5 $OUT/coopmat2.err
step bench-coop
timeout 75 $bin/tilekit bench --device vulkan --device cuda --min-runs 10 --min-time-ms 20 --problem matmul:4096x4096x4096:f16 \
  --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=1 \
  -o $OUT/bench-coop.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -20 > $OUT/bench-coop.log
tail -8 $OUT/bench-coop.log
step end
