"""Times PTX kernels of a square matmul side by side with torch.matmul (cuBLAS), in one process.

For A/B experiments on emitted code: each entry of the JSON spec names a PTX file, its entry
point, grid, threads, dynamic shared memory and argument form. Every kernel's result is checked
against torch.matmul first (unless the entry says "check": false), then the kernels are timed
in alternating rounds so that clock drift spreads over all of them.

    python3 bench/ptx/ab.py SPEC.json [--n 4096] [--rounds 7] [--iters 20] [--only NAME]

Argument forms: "abc_mnk" passes (a, b, c, M, N, K); "abc_mnk_00" adds two null pointers
(the scratch arguments of Triton's kernels).

A kernel's PTX comes from `tilekit ir matmul --ptx --arch sm_90a --shape NxNxN --config ...`
(its second header line gives the grid; shared memory is num_stages x (BLOCK_M + BLOCK_N) x
BLOCK_K x 2 bytes for 16-bit operands) or from bench/ptx/triton_aot.py.
"""
import argparse
import ctypes
import json
import statistics
import sys

import torch

cuda = ctypes.CDLL("libcuda.so.1")


def check(r, what):
    if r != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(r, ctypes.byref(name))
        raise RuntimeError(f"{what}: {name.value.decode() if name.value else r}")


def load(entry):
    ptx = open(entry["ptx"], "rb").read() + b"\0"
    mod = ctypes.c_void_p()
    log = ctypes.create_string_buffer(1 << 16)
    # CU_JIT_ERROR_LOG_BUFFER (5), CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES (6)
    opts = (ctypes.c_int * 2)(5, 6)
    vals = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(1 << 16))
    r = cuda.cuModuleLoadDataEx(ctypes.byref(mod), ptx, 2, opts, vals)
    if r != 0:
        sys.stderr.write(log.value.decode(errors="replace"))
    check(r, f"load {entry['ptx']}")
    fn = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, entry["entry"].encode()), "get function")
    # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(cuda.cuFuncSetAttribute(fn, 8, int(entry["smem"])), "opt in to shared memory")
    return fn


def launcher(entry, fn, a, b, c, n):
    ptrs = [ctypes.c_uint64(t.data_ptr()) for t in (a, b, c)]
    ints = [ctypes.c_int32(n) for _ in range(3)]
    vals = ptrs + ints
    if entry.get("args", "abc_mnk") == "abc_mnk_00":
        vals += [ctypes.c_uint64(0), ctypes.c_uint64(0)]
    params = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
    grid = entry["grid"]
    threads = entry["threads"]

    def go():
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        check(cuda.cuLaunchKernel(fn, grid, 1, 1, threads, 1, 1, int(entry["smem"]), stream, params, None), "launch")

    go.keep = (vals, params)
    return go


def time_it(run, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--dtype", default="f16")
    args = ap.parse_args()
    spec = json.load(open(args.spec))
    if args.only:
        spec = [e for e in spec if e["name"] in args.only]
    n = args.n
    td = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=td)
    b = torch.randn(n, n, device="cuda", dtype=td)
    ref = torch.matmul(a.float(), b.float())
    runs = {"torch.matmul": lambda: torch.matmul(a, b, out=c_t)}
    c_t = torch.empty(n, n, device="cuda", dtype=td)
    outs = {}
    for e in spec:
        for key in ("grid",):
            if isinstance(e[key], str):
                e[key] = eval(e[key], {"n": n, "cdiv": lambda x, y: -(-x // y)})
        c = torch.full((n, n), float("nan"), device="cuda", dtype=td)
        try:
            fn = load(e)
        except RuntimeError as err:
            print(json.dumps({"name": e["name"], "error": str(err)}), flush=True)
            continue
        go = launcher(e, fn, a, b, c, n)
        go()
        torch.cuda.synchronize()
        if e.get("check", True):
            err = (c.float() - ref).abs().max().item()
            ok = torch.allclose(c.float(), ref, atol=1e-1, rtol=2e-2)
            print(json.dumps({"name": e["name"], "check": "pass" if ok else "FAIL", "max_abs_err": err}), flush=True)
            if not ok:
                continue
        runs[e["name"]] = go
        outs[e["name"]] = c
    for run in runs.values():
        time_it(run, 3)
    times = {k: [] for k in runs}
    for _ in range(args.rounds):
        for k, run in runs.items():
            times[k].append(time_it(run, args.iters))
    base = statistics.median(times["torch.matmul"])
    for k, ts in times.items():
        med = statistics.median(ts)
        print(json.dumps({"name": k, "n": n, "dtype": args.dtype, "median_us": med * 1e6, "min_us": min(ts) * 1e6,
                          "tflops": 2 * n ** 3 / med / 1e12, "of_cublas": base / med}), flush=True)


if __name__ == "__main__":
    main()
