# commit 9a68d69. Call B: the naga path against passthrough SPIR-V (both through wgpu, one run), then transpose and rmsnorm_quant against the copy.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
c=9a68d69
step bench-naga
timeout 250 $bin/tilekit bench --min-runs 10 --min-time-ms 20 --device wgpu --device wgpu-naga --problem softmax:4096x12800:f32 \
  --problem softmax:4096x4096:f32 --problem softmax:4096x1024:f32 --problem vector_add:2^24:f32 --problem layernorm:4096x1024:f16 \
  -o $OUT/bench-naga-$c.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -80 > $OUT/bench-naga-$c.log
grep -E "copy|x of a copy|wgpu" $OUT/bench-naga-$c.log | cut -c1-200 | tail -30
step examples-b
timeout 300 $bin/tilekit bench --suite examples --no-baselines --min-runs 10 --min-time-ms 20 --device cuda --device vulkan \
  --problem transpose:8192x8192:f32 --problem rmsnorm_quant:4096x8192:bf16 -o $OUT/bench-examples-b-$c.json 2>&1 \
  | grep --line-buffered -v XDG_RUNTIME | tail -60 > $OUT/bench-examples-b-$c.log
grep -E "copy|x of a copy" $OUT/bench-examples-b-$c.log | cut -c1-200 | tail -12
step end
