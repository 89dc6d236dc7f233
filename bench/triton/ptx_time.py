"""Times a vector-add PTX kernel through the CUDA driver, with tilekit's protocol.

    python3 bench/triton/ptx_time.py FILE.ptx ENTRY [--n 1048576] [--block 1024] [--threads 128]
        [--params P] [--variant nc|plain] [--flush d32|d8] [--batch]

Loads the PTX with cuModuleLoadData (the driver JIT-compiles it), launches ENTRY(x, y, out, n,
null...) over n/block programs of `threads` threads, and times it as `tilekit bench` does: CUDA
events around each run, a 256 MiB buffer written before every run (L2 flushed), 200 ms of
warm-up, then at least 30 runs and 100 ms; prints one JSON line (median, min, p10, p90 in
seconds, GB/s over the 12 bytes an element moves). Parameters after n (Triton 3.x appends
scratch pointers) are passed as null; their count is read from the PTX unless --params says. `--variant plain`
rewrites `ld.global.nc` to `ld.global` first, to see what the read-only path costs.

It lets the PTX tilekit writes and the PTX Triton writes (reference.py --dump) be timed by one
program, so that a difference between them is the code's, not the harness's. Needs only the
CUDA driver (libcuda.so.1) and NumPy; the output is checked against x + y.
"""
import argparse, ctypes, json, re, statistics, sys, time

import numpy as np

cu = ctypes.CDLL("libcuda.so.1")


def check(r, what):
    if r != 0:
        s = ctypes.c_char_p()
        cu.cuGetErrorString(r, ctypes.byref(s))
        sys.exit(f"{what}: CUDA error {r} {s.value.decode() if s.value else ''}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx")
    ap.add_argument("entry")
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=128)
    ap.add_argument("--params", type=int, help="the kernel's parameter count (default: read from the PTX)")
    ap.add_argument("--variant", choices=["nc", "plain"], default="nc")
    ap.add_argument("--flush", choices=["d32", "d8"], default="d32", help="cuMemsetD32Async or cuMemsetD8Async of the 256 MiB")
    ap.add_argument("--batch", action="store_true", help="enqueue every timed run before waiting (as tilekit's CUDA runtime and do_bench do), not one at a time")
    a = ap.parse_args()
    ptx = open(a.ptx).read()
    if a.params is None:
        a.params = len(set(re.findall(re.escape(a.entry) + r"_param_(\d+)", ptx)))
    if a.variant == "plain":
        ptx = ptx.replace("ld.global.nc.", "ld.global.")
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    mod = ctypes.c_void_p()
    check(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(ptx.encode() + b"\0")), "cuModuleLoadData")
    fn = ctypes.c_void_p()
    check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, a.entry.encode()), "cuModuleGetFunction")

    n = a.n
    alloc = lambda size: (lambda p: (check(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size)), "cuMemAlloc"), p)[1])(ctypes.c_uint64())
    x, y, out = alloc(4 * n), alloc(4 * n), alloc(4 * n)
    flush = alloc(256 << 20)
    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, n).astype(np.float32)
    ys = rng.uniform(-1, 1, n).astype(np.float32)
    check(cu.cuMemcpyHtoD_v2(x, xs.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(4 * n)), "copy x")
    check(cu.cuMemcpyHtoD_v2(y, ys.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(4 * n)), "copy y")

    nul = ctypes.c_uint64(0)
    nn = ctypes.c_int32(n)
    vals = [x, y, out, nn] + [nul] * (a.params - 4)
    args = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
    grid = (n + a.block - 1) // a.block

    def launch():
        check(cu.cuLaunchKernel(fn, grid, 1, 1, a.threads, 1, 1, 0, None, args, None), "cuLaunchKernel")

    start, end = ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
    check(cu.cuEventCreate(ctypes.byref(end), 0), "cuEventCreate")

    def flush_once():
        if a.flush == "d32":
            check(cu.cuMemsetD32Async(flush, 0x3f800000, ctypes.c_size_t(64 << 20), None), "flush")
        else:
            check(cu.cuMemsetD8Async(flush, 0, ctypes.c_size_t(256 << 20), None), "flush")

    def run():
        flush_once()
        check(cu.cuEventRecord(start, None), "record")
        launch()
        check(cu.cuEventRecord(end, None), "record")
        check(cu.cuEventSynchronize(end), "sync")
        ms = ctypes.c_float()
        check(cu.cuEventElapsedTime(ctypes.byref(ms), start, end), "elapsed")
        return ms.value / 1e3

    run()
    got = np.empty(n, dtype=np.float32)
    check(cu.cuMemcpyDtoH_v2(got.ctypes.data_as(ctypes.c_void_p), out, ctypes.c_size_t(4 * n)), "copy out")
    bad = int(np.count_nonzero(got != xs + ys))
    if bad:
        sys.exit(f"{bad} of {n} elements differ from x + y")
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.2:
        run()
    samples = []
    t0 = time.perf_counter()
    if a.batch:
        count = max(30, int(0.1 / max(statistics.median([run() for _ in range(10)]) + 70e-6, 1e-6)))
        evs = [ctypes.c_void_p() for _ in range(2 * count)]
        for e in evs:
            check(cu.cuEventCreate(ctypes.byref(e), 0), "cuEventCreate")
        for r in range(count):
            flush_once()
            check(cu.cuEventRecord(evs[2 * r], None), "record")
            launch()
            check(cu.cuEventRecord(evs[2 * r + 1], None), "record")
        check(cu.cuCtxSynchronize(), "sync")
        for r in range(count):
            ms = ctypes.c_float()
            check(cu.cuEventElapsedTime(ctypes.byref(ms), evs[2 * r], evs[2 * r + 1]), "elapsed")
            samples.append(ms.value / 1e3)
    while len(samples) < 30 or time.perf_counter() - t0 < 0.1:
        samples.append(run())
    samples.sort()
    med = statistics.median(samples)
    q = lambda f: samples[min(len(samples) - 1, int(f * len(samples)))]
    print(json.dumps({"ptx": a.ptx, "entry": a.entry, "variant": a.variant, "flush": a.flush, "batch": a.batch, "n": n, "block": a.block, "threads": a.threads,
                      "runs": len(samples), "median_s": med, "min_s": samples[0], "p10_s": q(0.1), "p90_s": q(0.9),
                      "gbps": 12 * n / med / 1e9}))


main()
