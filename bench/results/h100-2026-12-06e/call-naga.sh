# The naga path against passthrough SPIR-V at 46b0b72, both through wgpu, one run.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
step bench-naga
timeout 300 $bin/tilekit bench --min-runs 10 --min-time-ms 20 --device wgpu --device wgpu-naga --problem softmax:4096x12800:f32 \
  --problem softmax:4096x4096:f32 --problem softmax:4096x1024:f32 --problem vector_add:2^24:f32 --problem layernorm:4096x1024:f16 \
  -o $OUT/bench-naga.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -80 > $OUT/bench-naga.log
grep -E "copy|x of a copy|wgpu" $OUT/bench-naga.log | cut -c1-170 | tail -30
step end
