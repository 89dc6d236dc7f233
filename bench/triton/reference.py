"""Triton 3.x reference figures on the machine that runs tilekit's benchmark, with tilekit's protocol.

Runs the Triton tutorial kernels that tilekit's library mirrors (vector add, fused softmax,
LayerNorm forward, matmul, and the `gelu` user kernel) and torch's baselines for the compute-bound
ones (torch.matmul, which is cuBLAS, and scaled-dot-product attention on its flash backend; torch's
GELU and copy beside Triton's GELU) at the shapes of the SPIR-V,
PTX and tensor-core issues, timed as `tilekit bench` times:
CUDA events around each run, a 256 MiB buffer written before every run (L2 flushed), 200 ms of
warm-up, then at least 30 runs and 100 ms; median, min, p10 and p90. Bytes counted as tilekit
counts them (every buffer read and written). Writes JSON lines to stdout and, with --dump DIR,
each kernel's PTX and TTGIR there so tilekit's code can be compared instruction by instruction.

Needs PyTorch and Triton with a CUDA GPU; tilekit does not depend on it.
"""
import argparse, ctypes, json, os, statistics, sys, time

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from tutorial_matmul import matmul_kernel as tutorial_matmul


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr,
                   num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_ptr = in_ptr + row_idx * in_stride
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        row = tl.load(row_ptr + cols, mask=mask, other=-float("inf"))
        row = row - tl.max(row, axis=0)
        num = tl.exp(row)
        out = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row_idx * out_stride + cols, out, mask=mask)


@triton.jit
def layernorm_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + cols, y, mask=mask)


FLUSH = None
NO_FLUSH = False
SYNC_EACH = False
FLUSH_WITH = "fill"
LIBCUDA = None


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
    # As tilekit's `gelu` (and a user) writes it: f32 math, libdevice's tanh, one rounding.
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    inner = (v + v * v * v * 0.044715) * 0.7978845608028654
    g = v * 0.5 * (libdevice.tanh(inner) + 1.0)
    tl.store(y_ptr + offs, g.to(y_ptr.dtype.element_ty), mask=mask)


def time_it(fn):
    """tilekit's protocol: flushed L2, 200 ms warm-up, >= 30 runs and >= 100 ms (--no-flush: runs
    back to back on whatever the previous run left in L2, as `tilekit bench --flush-mib 0`).
    Every timed run is enqueued (flush, event, kernel, event) before the first is waited for, as
    tilekit's runtimes and Triton's do_bench do; --sync-each waits after every run instead, which
    leaves the GPU idle between runs and reads vector add 2^20 0.7 us faster for either
    compiler's PTX (bench/results/h200-2026-12-03)."""
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.2:
        fn()
        torch.cuda.synchronize()

    def enqueue():
        if NO_FLUSH:
            pass
        elif FLUSH_WITH == "memset":
            # The driver's memset, as tilekit's CUDA runtime flushes (cudarc's memset_zeros).
            r = LIBCUDA.cuMemsetD8Async(ctypes.c_uint64(FLUSH.data_ptr()), 0, ctypes.c_size_t(FLUSH.numel()),
                                        ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
            assert r == 0, f"cuMemsetD8Async: {r}"
        else:
            FLUSH.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        return a, b

    samples = []
    t0 = time.perf_counter()
    if SYNC_EACH:
        while len(samples) < 30 or time.perf_counter() - t0 < 0.1:
            a, b = enqueue()
            b.synchronize()
            samples.append(a.elapsed_time(b) * 1e-3)
    else:
        # As many runs as fill 100 ms at one run's pace (flush included), at least 30.
        t1 = time.perf_counter()
        enqueue()
        torch.cuda.synchronize()
        count = max(30, int(0.1 / (time.perf_counter() - t1)))
        pairs = [enqueue() for _ in range(count)]
        torch.cuda.synchronize()
        samples = [a.elapsed_time(b) * 1e-3 for a, b in pairs]
    samples.sort()
    q = lambda f: samples[min(len(samples) - 1, int(f * len(samples)))]
    return {"median_s": statistics.median(samples), "min_s": samples[0], "p10_s": q(0.1), "p90_s": q(0.9),
            "runs": len(samples)}


def dump(kernel, name, args):
    if not args.dump:
        return
    os.makedirs(args.dump, exist_ok=True)
    for ext in ("ptx", "ttgir"):
        if ext in kernel.asm:
            with open(os.path.join(args.dump, f"{name}.{ext}"), "w") as f:
                f.write(kernel.asm[ext])


def report(name, shape, dtype, nbytes, t, kernel, extra=None):
    row = {"kernel": name, "shape": shape, "dtype": dtype, "bytes": nbytes, **t,
           "gbps": nbytes / t["median_s"] / 1e9, "triton": triton.__version__,
           "device": torch.cuda.get_device_name(), "l2_flushed": not NO_FLUSH, "flush_with": FLUSH_WITH, "sync_each": SYNC_EACH}
    if kernel is not None:
        row["registers"] = getattr(kernel, "n_regs", None)
        row["spills"] = getattr(kernel, "n_spills", None)
    row.update(extra or {})
    print(json.dumps(row), flush=True)


def vector_add(n, args):
    x, y = (torch.rand(n, device="cuda") for _ in range(2))
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    k = add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
    assert torch.allclose(out, x + y)
    dump(k, f"vector_add_{n}", args)
    report("vector_add", [n], "f32", 3 * 4 * n, time_it(lambda: add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)), k)


def gelu(n, args):
    """GELU (tanh form) over n bf16 values three ways: Triton written as tilekit's `gelu`, torch's
    `gelu(approximate="tanh")`, and torch's copy of the same bytes (the ceiling at this size)."""
    x = torch.rand(n, device="cuda", dtype=torch.bfloat16) * 10 - 5
    y = torch.empty_like(x)
    ref = torch.nn.functional.gelu(x.float(), approximate="tanh").to(torch.bfloat16)
    for block, warps in ((1024, 4), (2048, 4), (4096, 8)):
        grid = (triton.cdiv(n, block),)
        run = lambda: gelu_kernel[grid](x, y, n, BLOCK_SIZE=block, num_warps=warps)
        k = run()
        assert torch.allclose(y.float(), ref.float(), rtol=1e-2, atol=1e-2)
        dump(k, f"gelu_{n}_{block}", args)
        report("gelu", [n], "bf16", 2 * 2 * n, time_it(run), k,
               {"impl": "triton", "config": f"BLOCK={block},num_warps={warps}"})
    run = lambda: torch.nn.functional.gelu(x, approximate="tanh")
    report("gelu", [n], "bf16", 2 * 2 * n, time_it(run), None, {"impl": "torch"})
    report("copy", [n], "bf16", 2 * 2 * n, time_it(lambda: y.copy_(x)), None, {"impl": "torch"})


def softmax(rows, cols, args):
    x = torch.randn(rows, cols, device="cuda")
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    num_warps = 8
    # The tutorial's launch: a persistent grid sized from the compiled kernel's occupancy.
    props = triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())
    num_stages = 4 if props["max_shared_mem"] > 200000 else 2
    k = softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), rows, cols, BLOCK_SIZE=block,
                              num_stages=num_stages, num_warps=num_warps, grid=(1,))
    k._init_handles()
    occupancy = props["max_num_regs"] // (k.n_regs * 32 * num_warps)
    if k.metadata.shared > 0:
        occupancy = min(occupancy, props["max_shared_mem"] // k.metadata.shared)
    sms = props["multiprocessor_count"]
    programs = min(sms * max(occupancy, 1), rows)
    run = lambda: k[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), rows, cols, block, num_stages)
    run()
    assert torch.allclose(y, torch.softmax(x, dim=1), atol=1e-6)
    dump(k, f"softmax_{rows}x{cols}", args)
    report("softmax", [rows, cols], "f32", 2 * 4 * rows * cols, time_it(run), k,
           {"config": f"BLOCK={block},num_warps={num_warps},num_stages={num_stages},programs={programs}"})


def layernorm(rows, cols, args):
    x = (torch.rand(rows, cols, device="cuda", dtype=torch.float16) * 8 - 3)
    w = torch.rand(cols, device="cuda", dtype=torch.float16) + 0.5
    b = torch.rand(cols, device="cuda", dtype=torch.float16) * 2 - 1
    y = torch.empty_like(x)
    mean = torch.empty(rows, device="cuda", dtype=torch.float32)
    rstd = torch.empty(rows, device="cuda", dtype=torch.float32)
    block = min(65536 // x.element_size(), triton.next_power_of_2(cols))
    num_warps = min(max(block // 256, 1), 8)
    run = lambda: layernorm_kernel[(rows,)](x, y, w, b, mean, rstd, x.stride(0), cols, 1e-5,
                                             BLOCK_SIZE=block, num_warps=num_warps, num_ctas=1)
    k = run()
    ref = torch.nn.functional.layer_norm(x.float(), (cols,), w.float(), b.float(), 1e-5)
    assert torch.allclose(y.float(), ref, atol=1e-2), (y.float() - ref).abs().max()
    dump(k, f"layernorm_{rows}x{cols}", args)
    # tilekit counts every buffer: x read, y written, w and b read, mean and rstd written.
    nbytes = 2 * 2 * rows * cols + 2 * 2 * cols + 2 * 4 * rows
    report("layernorm", [rows, cols], "f16", nbytes, time_it(run), k,
           {"config": f"BLOCK={block},num_warps={num_warps}"})


# The tutorial's kernel (bench/triton/tutorial_matmul.py, which bench/ptx/triton_aot.py compiles
# without a GPU), autotuned over its configurations.
matmul_kernel = triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
    ],
    key=["M", "N", "K"],
)(tutorial_matmul)


def matmul(n, dtype, args):
    """Square f16/bf16 matmul, or f32 multiplied as tf32 (dtype "tf32": torch with
    allow_tf32, Triton's tl.dot at its default input precision, tf32): torch.matmul (cuBLAS) and
    Triton's tutorial kernel (autotuned over its configurations before timing), FLOPs 2 n^3."""
    td = {"f16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[dtype]
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    a = torch.randn(n, n, device="cuda", dtype=td)
    b = torch.randn(n, n, device="cuda", dtype=td)
    c = torch.empty(n, n, device="cuda", dtype=td)
    flops = 2 * n ** 3
    nbytes = 3 * a.element_size() * n * n
    t = time_it(lambda: torch.matmul(a, b, out=c))
    report("matmul", [n, n, n], dtype, nbytes, t, None, {"impl": "torch.matmul (cuBLAS)", "tflops": flops / t["median_s"] / 1e12})
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, n, n, n)
    ref = torch.matmul(a, b)
    # Two tf32 products (Triton's and cuBLAS's) differ by their roundings: about 2^-11 of
    # sqrt(n)-sized sums, 0.3 at n = 4096 at the largest element.
    atol = 1.0 if dtype == "tf32" else 1e-1
    assert torch.allclose(c.float(), ref.float(), atol=atol, rtol=2e-2), (c.float() - ref.float()).abs().max()
    t = time_it(lambda: matmul_kernel[grid](a, b, c, n, n, n))
    best = matmul_kernel.best_config
    report("matmul", [n, n, n], dtype, nbytes, t, None,
           {"impl": "triton", "tflops": flops / t["median_s"] / 1e12, "config": str(best)})


def attention(b, h, s, d, causal, args):
    """torch's scaled-dot-product attention on the flash backend, FLOPs 4 b h s^2 d (half when
    causal), as tilekit's attention counts them."""
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
    from torch.nn.attention import sdpa_kernel, SDPBackend
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        run = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        run()
        t = time_it(run)
    flops = 4 * b * h * s * s * d // (2 if causal else 1)
    nbytes = 4 * 2 * b * h * s * d
    report("attention", [b, h, s, d], "f16", nbytes, t, None,
           {"impl": "torch sdpa (flash)", "causal": causal, "tflops": flops / t["median_s"] / 1e12})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", help="directory for each kernel's PTX and TTGIR")
    ap.add_argument("--only", action="append", choices=["vector_add", "softmax", "layernorm", "matmul", "matmul_tf32", "attention", "gelu"],
                    help="run only these kernels (repeatable)")
    ap.add_argument("--softmax-cols", type=int, action="append", help="softmax row lengths (default 1024, 4096, 12800)")
    ap.add_argument("--layernorm-cols", type=int, action="append", help="LayerNorm row lengths (default 1024, 8192)")
    ap.add_argument("--no-flush", action="store_true", help="do not flush L2 between runs")
    ap.add_argument("--flush-with", choices=["fill", "memset"], default="fill",
                    help="flush L2 with torch's zero_ (a fill kernel, as do_bench) or the driver's memset (as tilekit)")
    ap.add_argument("--sync-each", action="store_true", help="wait for each timed run before enqueuing the next")
    args = ap.parse_args()
    global NO_FLUSH, SYNC_EACH, FLUSH_WITH, LIBCUDA
    NO_FLUSH = args.no_flush
    SYNC_EACH = args.sync_each
    FLUSH_WITH = args.flush_with
    if FLUSH_WITH == "memset":
        LIBCUDA = ctypes.CDLL("libcuda.so.1")
    want = lambda k: not args.only or k in args.only
    if want("vector_add"):
        for n in (1 << 20, 1 << 24, 1 << 28):
            vector_add(n, args)
    if want("softmax"):
        for c in args.softmax_cols or (1024, 4096, 12800):
            softmax(4096, c, args)
    if want("layernorm"):
        for c in args.layernorm_cols or (1024, 8192):
            layernorm(4096, c, args)
    if want("gelu"):
        gelu(1 << 24, args)
    if want("matmul"):
        for dtype in ("f16", "bf16"):
            for n in (1024, 2048, 4096, 8192):
                matmul(n, dtype, args)
    if want("matmul_tf32"):
        for n in (4096, 8192):
            matmul(n, "tf32", args)
    if want("attention"):
        for d in (64, 128):
            for causal in (False, True):
                attention(4, 32, 4096, d, causal, args)


if __name__ == "__main__":
    sys.exit(main())
