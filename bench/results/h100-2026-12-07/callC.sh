# commit 9a68d69. Call C: cross_entropy and argmax against the copy, CUDA and Vulkan.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
c=9a68d69
step examples-c
timeout 540 $bin/tilekit bench --suite examples --no-baselines --min-runs 10 --min-time-ms 20 --device cuda --device vulkan \
  --problem cross_entropy:4096x32000:f32 --problem argmax:8192x8192:f32 -o $OUT/bench-examples-c-$c.json 2>&1 \
  | grep --line-buffered -v XDG_RUNTIME | tail -60 > $OUT/bench-examples-c-$c.log
grep -E "copy|x of a copy" $OUT/bench-examples-c-$c.log | cut -c1-200 | tail -12
step end
