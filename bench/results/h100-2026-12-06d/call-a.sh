# One device call: semantics and casts on the GPU, the fuzz campaign, the examples suite.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
step semantics
(timeout 40 $bin/semantics --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -40; echo rc=$?) > $OUT/semantics.txt; grep -E "test result|panicked" $OUT/semantics.txt
step ops
(timeout 30 $bin/ops --test-threads 2 2>&1 | grep -v XDG_RUNTIME | tail -30; echo rc=$?) > $OUT/ops.txt; grep -E "test result|panicked" $OUT/ops.txt
step fuzz
timeout 250 $bin/tilekit fuzz --seed 64 --count 6000 --devices vulkan,wgpu,cuda --jobs 15 --max-per-thread 64 --time-limit 225 \
  --out $OUT/fuzz-seed64.json --save-failures $OUT/fuzz-failures 2>&1 | grep -v XDG_RUNTIME | tail -30 > $OUT/fuzz-seed64.log
tail -12 $OUT/fuzz-seed64.log
step bench
timeout 150 $bin/tilekit bench --suite examples --min-runs 10 --min-time-ms 20 --device cuda --device vulkan --problem gelu:2^24:bf16 \
  --problem gelu:2^26:bf16 --problem transpose:8192x8192:f32 --problem rmsnorm_quant:4096x8192:bf16 --problem cross_entropy:4096x32000:f32 \
  --problem argmax:8192x8192:f32 -o $OUT/bench-examples.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -60 > $OUT/bench-examples.log
grep -E "copy|x of a copy" $OUT/bench-examples.log | cut -c1-170
step replay
mkdir -p /tmp/cases && tar -xf $bin/fuzz-cases.tar -C /tmp/cases
timeout 30 $bin/tilekit fuzz --replay /tmp/cases/fuzz/*.tile --devices cuda,vulkan,wgpu 2>&1 | grep -v XDG_RUNTIME | tail -20 > $OUT/fuzz-replay.log
tail -3 $OUT/fuzz-replay.log
step end
