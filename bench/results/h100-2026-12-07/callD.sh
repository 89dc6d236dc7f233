# commit 9a68d69. Call D: fuzz seed 78 program 1774 with its outputs, and the naga path's large problems in the other device order.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
c=9a68d69
step replay-1774
timeout 40 $bin/tilekit fuzz --replay .h200/seed78-1774-vulkan.tile --devices cuda,vulkan,wgpu > $OUT/replay-1774.log 2>&1
tail -5 $OUT/replay-1774.log
step naga-order
timeout 200 $bin/tilekit bench --min-runs 10 --min-time-ms 20 --no-baselines --device wgpu-naga --device wgpu --problem softmax:4096x12800:f32 \
  --problem vector_add:2^26:f32 -o $OUT/bench-naga-order-$c.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -40 > $OUT/bench-naga-order-$c.log
grep -E "copy|x of a copy|wgpu" $OUT/bench-naga-order-$c.log | cut -c1-200 | tail -12
step end
