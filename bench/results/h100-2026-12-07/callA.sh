# commit 9a68d69. Call A: semantics and casts on the GPU, fuzz seed 78 through Vulkan, wgpu and CUDA, replay of the saved cases, GELU bf16 against the copy.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
c=9a68d69
step semantics
(timeout 45 $bin/semantics --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -40; echo rc=$?) > $OUT/semantics-$c.txt; grep -E "test result|panicked" $OUT/semantics-$c.txt
step ops
(timeout 35 $bin/ops --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -30; echo rc=$?) > $OUT/ops-$c.txt; grep -E "test result|panicked" $OUT/ops-$c.txt
step fuzz
timeout 240 $bin/tilekit fuzz --seed 78 --count 9000 --devices vulkan,wgpu,cuda --jobs 15 --max-per-thread 64 --time-limit 212 \
  --out $OUT/fuzz-seed78-$c.json --save-failures $OUT/fuzz-failures 2>&1 | grep -v XDG_RUNTIME | tail -30 > $OUT/fuzz-seed78-$c.log
tail -12 $OUT/fuzz-seed78-$c.log
step replay
mkdir -p /tmp/cases && tar -xf $bin/fuzz-cases.tar -C /tmp/cases
timeout 60 $bin/tilekit fuzz --replay /tmp/cases/fuzz/*.tile --devices cuda,vulkan,wgpu 2>&1 | grep -v XDG_RUNTIME | tail -30 > $OUT/fuzz-replay-$c.log
tail -4 $OUT/fuzz-replay-$c.log
step examples-gelu
timeout 130 $bin/tilekit bench --suite examples --no-baselines --min-runs 10 --min-time-ms 20 --device cuda --device vulkan \
  --problem gelu:2^24:bf16 -o $OUT/bench-examples-a-$c.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -60 > $OUT/bench-examples-a-$c.log
grep -E "copy|x of a copy" $OUT/bench-examples-a-$c.log | cut -c1-200 | tail -12
step end
