# One device call at 46b0b72: semantics and casts on the GPU, the fuzz campaign (Vulkan, wgpu, CUDA), replay of the saved cases.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
step semantics
(timeout 40 $bin/semantics --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -40; echo rc=$?) > $OUT/semantics.txt; grep -E "test result|panicked" $OUT/semantics.txt
step ops
(timeout 30 $bin/ops --test-threads 2 2>&1 | grep -v XDG_RUNTIME | tail -30; echo rc=$?) > $OUT/ops.txt; grep -E "test result|panicked" $OUT/ops.txt
step fuzz
timeout 270 $bin/tilekit fuzz --seed 70 --count 7000 --devices vulkan,wgpu,cuda --jobs 15 --max-per-thread 64 --time-limit 245 \
  --out $OUT/fuzz-seed70.json --save-failures $OUT/fuzz-failures 2>&1 | grep -v XDG_RUNTIME | tail -30 > $OUT/fuzz-seed70.log
tail -12 $OUT/fuzz-seed70.log
step replay
mkdir -p /tmp/cases && tar -xf $bin/fuzz-cases.tar -C /tmp/cases
timeout 30 $bin/tilekit fuzz --replay /tmp/cases/fuzz/*.tile --devices cuda,vulkan,wgpu 2>&1 | grep -v XDG_RUNTIME | tail -20 > $OUT/fuzz-replay.log
tail -3 $OUT/fuzz-replay.log
step end
