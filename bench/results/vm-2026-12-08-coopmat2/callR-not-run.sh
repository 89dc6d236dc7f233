# Call R: issue 16's second strategy. The workgroup-scope matmul of VK_NV_cooperative_matrix2 (tilekit_spirv::coopmat2,
#    examples/coopmat2_matmul.rs) checked and timed through Vulkan; in the same call the
#    subgroup-scope path (tile programs' dot) and cuBLAS in one `tilekit bench`, and torch.matmul.
t0=$(date +%s); step() { echo "== $1 at $(( $(date +%s) - t0 )) s"; }
B="$bin/tilekit"
nproc; grep -m1 "model name" /proc/cpuinfo; cat $OUT/gpu.txt
step coopmat2
timeout 100 $bin/coopmat2_matmul --runs 20 > $OUT/coopmat2.jsonl 2> $OUT/coopmat2.err; echo rc=$?
cut -c1-330 $OUT/coopmat2.jsonl | head -30; tail -5 $OUT/coopmat2.err
timeout 40 $bin/coopmat2_matmul --runs 20 --dtype bf16 --size 4096x4096x4096 --shape 128x256x64:256 --shape 256x128x64:256 --shape 128x128x64:256 > $OUT/coopmat2-bf16.jsonl 2> $OUT/coopmat2-bf16.err; echo rc=$?
cut -c1-330 $OUT/coopmat2-bf16.jsonl | head; tail -3 $OUT/coopmat2-bf16.err
step bench-coop
timeout 100 $B bench --device vulkan --device cuda --min-runs 10 --min-time-ms 20 \
  --problem matmul:4096x4096x4096:f16 \
  --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,GROUP_M=8,num_warps=8,num_stages=1 --config BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4 \
  -o $OUT/bench-coop.json 2>&1 | grep --line-buffered -v XDG_RUNTIME | tail -30 > $OUT/bench-coop.log
tail -12 $OUT/bench-coop.log
step torch
timeout 30 python3 - > $OUT/torch.txt 2>&1 <<'PY'
import torch
for n in (4096, 8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.float16); b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    for _ in range(3): a @ b
    torch.cuda.synchronize(); ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    ts.sort(); print(f"torch.matmul f16 {n}^3 median {ts[10]:.6e} s {2*n**3/ts[10]/1e12:.1f} TFLOP/s")
PY
cat $OUT/torch.txt
step end
