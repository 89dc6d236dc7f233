# commit 9a68d69. Call E: the naga path against passthrough, each problem in its own process (a fresh pair of wgpu devices).
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
c=9a68d69
for p in softmax:4096x12800:f32 softmax:4096x4096:f32 softmax:4096x1024:f32 vector_add:2^24:f32 layernorm:4096x1024:f16; do
  step "$p"
  f=$(echo "$p" | tr ':^' '__')
  timeout 75 $bin/tilekit bench --min-runs 10 --min-time-ms 20 --no-baselines --device wgpu --device wgpu-naga --problem $p \
    -o $OUT/bench-naga-$f-$c.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -20 > $OUT/bench-naga-$f-$c.log
  grep -E "wgpu" $OUT/bench-naga-$f-$c.log | cut -c1-170 | tail -4
done
step end
