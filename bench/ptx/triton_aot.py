"""Compiles the matmul kernel of bench/triton/reference.py (Triton's tutorial) for sm_90a
without a GPU, and writes its PTX, TTGIR and cubin, to compare with tilekit's PTX of the same
tile (and to time beside it with bench/ptx/ab.py). Needs only the triton wheel (3.6.0 here).

    python3 bench/ptx/triton_aot.py BLOCK_M BLOCK_N BLOCK_K NUM_WARPS NUM_STAGES [fp16|bf16]

M, N and K are marked multiples of 16, as Triton's launcher specializes them for 4096. Prints
the name and the dynamic shared memory the kernel takes.
"""
import os
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "triton"))
from tutorial_matmul import matmul_kernel  # noqa: E402


def main():
    bm, bn, bk, w, s = [int(x) for x in sys.argv[1:6]]
    dt = sys.argv[6] if len(sys.argv) > 6 else "fp16"
    sig = {"a_ptr": "*" + dt, "b_ptr": "*" + dt, "c_ptr": "*" + dt, "M": "i32", "N": "i32", "K": "i32",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "GROUP_M": "constexpr"}
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(6)}
    src = ASTSource(fn=matmul_kernel, signature=sig, constexprs=consts, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": w, "num_stages": s})
    name = f"tri_{bm}x{bn}x{bk}_w{w}_s{s}" + ("" if dt == "fp16" else "_" + dt)
    open(name + ".ptx", "w").write(k.asm["ptx"])
    open(name + ".ttgir", "w").write(k.asm["ttgir"])
    open(name + ".cubin", "wb").write(k.asm["cubin"])
    print(name, k.metadata.shared)


if __name__ == "__main__":
    main()
