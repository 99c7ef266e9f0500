"""Per-call overhead of the shared argument checker (not a test): microseconds per 3-argument call.

Run: ``python bench/call_overhead.py``.  It times ``ArgumentChecker.bind`` +
``BoundCall.finish`` for ``C[i] = A[i] + B[i]`` (symbolic length n) on the interp
module's checker, with 64-byte aligned ``loom.nd`` arrays and with plain numpy
arrays (copied when numpy did not align them), and the whole interp call for scale.
"""

from __future__ import annotations

import timeit

import numpy as np

import loom
from loom.ir import BufferStore, For, IRModule, PrimFunc
from loom.runtime import InterpModule, nd


def vadd() -> PrimFunc:
    n = loom.var("n")
    A, B, C = (loom.decl_buffer((n,), "float32", name=x) for x in "ABC")
    i = loom.var("i")
    body = For(i, 0, n, "serial", BufferStore(C, A[i] + B[i], [i]))
    return PrimFunc([A.data, B.data, C.data], body, buffer_map={A.data: A, B.data: B, C.data: C},
                    attrs={"global_symbol": "vadd"})


def per_call_us(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    module = InterpModule(IRModule({"vadd": vadd()}))
    func = module["vadd"]
    checker_bind = func._bind
    aligned = [nd.array(np.ones(64, "float32")) for _ in range(3)]
    plain = [np.ones(64, "float32") for _ in range(3)]
    misaligned = sum(a.ctypes.data % 64 != 0 for a in plain)

    def check(args):
        return lambda: checker_bind(args).finish()

    print(f"checker, loom.nd arrays (aligned):     {per_call_us(check(aligned), 20000):7.2f} us/call")
    print(f"checker, numpy arrays ({misaligned}/3 copied):    {per_call_us(check(plain), 20000):7.2f} us/call")
    print(f"whole interp call, n=64 (for scale):   {per_call_us(lambda: func(*aligned), 200):7.2f} us/call")


if __name__ == "__main__":
    main()
