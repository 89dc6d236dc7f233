# The examples suite's other four problems at the same commit, then the casts test.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
step bench
timeout 235 $bin/tilekit bench --suite examples --min-runs 10 --min-time-ms 20 --device cuda --device vulkan \
  --problem transpose:8192x8192:f32 --problem rmsnorm_quant:4096x8192:bf16 --problem cross_entropy:4096x32000:f32 \
  --problem argmax:8192x8192:f32 -o $OUT/bench-examples2.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -60 > $OUT/bench-examples2.log
grep -E "copy|x of a copy" $OUT/bench-examples2.log | cut -c1-170
step ops
(timeout 60 $bin/ops --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -30; echo rc=$?) > $OUT/ops.txt; grep -E "test result|panicked" $OUT/ops.txt
step end
