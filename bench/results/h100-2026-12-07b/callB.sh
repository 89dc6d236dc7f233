# commit 4ebcdac. Call B: the launch API with CUDA and Vulkan present (after the naga test's fix), semantics and casts on every device there.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
c=4ebcdac
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu-$c.txt; cat $OUT/gpu-$c.txt
step launch_api
(timeout 150 $bin/launch_api --test-threads 1 2>&1 | grep -v XDG_RUNTIME | tail -80; echo rc=${PIPESTATUS[0]}) > $OUT/launch_api-$c.txt; grep -E "^test |test result|panicked|^rc=" $OUT/launch_api-$c.txt | head -20
step semantics
(timeout 60 $bin/semantics --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -60; echo rc=${PIPESTATUS[0]}) > $OUT/semantics-$c.txt; grep -E "test result|panicked|^rc=" $OUT/semantics-$c.txt
step end
