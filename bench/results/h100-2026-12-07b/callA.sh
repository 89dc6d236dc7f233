# commit 2b1a2bc. Call A: the launch API with CUDA and Vulkan present, casts, fuzz seed 80 through Vulkan, wgpu and CUDA, replay of the saved cases.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
c=2b1a2bc
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu-$c.txt; cat $OUT/gpu-$c.txt
step launch_api
(timeout 150 $bin/launch_api --test-threads 1 2>&1 | grep -v XDG_RUNTIME | tail -60; echo rc=${PIPESTATUS[0]}) > $OUT/launch_api-$c.txt; grep -E "test result|panicked|^rc=|FAILED|failed" $OUT/launch_api-$c.txt | head
step ops
(timeout 35 $bin/ops --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -30; echo rc=${PIPESTATUS[0]}) > $OUT/ops-$c.txt; grep -E "test result|panicked|^rc=" $OUT/ops-$c.txt
step fuzz
timeout 240 $bin/tilekit fuzz --seed 80 --count 9000 --devices vulkan,wgpu,cuda --jobs 15 --max-per-thread 64 --time-limit 212 \
  --out $OUT/fuzz-seed80-$c.json --save-failures $OUT/fuzz-failures 2>&1 | grep -v XDG_RUNTIME | tail -30 > $OUT/fuzz-seed80-$c.log
tail -12 $OUT/fuzz-seed80-$c.log
step replay
mkdir -p /tmp/cases && tar -xf $bin/fuzz-cases.tar -C /tmp/cases
timeout 60 $bin/tilekit fuzz --replay /tmp/cases/fuzz/*.tile --devices cuda,vulkan,wgpu 2>&1 | grep -v XDG_RUNTIME | tail -30 > $OUT/fuzz-replay-$c.log
tail -4 $OUT/fuzz-replay-$c.log
step end
