"""Per-call overhead of Loom's Python call path (not a test): microseconds per 3-array call.

Run: ``python bench/call_overhead.py`` (``run.py`` includes it).  The kernel is
``C[i] = A[i] + B[i]`` over a symbolic length ``n = 64``, so the work is a few
nanoseconds and the time is all overhead.  For each native backend it compares:

* **ctypes, words prebuilt**: the compiled function called through ctypes with
  a ``uint64`` argument array made once; the floor of any Python call;
* **ctypes, words per call**: the same, filling the array from the numpy
  arrays' data pointers on every call, as the smallest hand-written wrapper does;
* **Loom, loom.nd arrays** and **Loom, numpy arrays** (aligned as numpy
  allocates them, so nothing is copied): ``module(A, B, C)``, arguments checked;
* **Loom, misaligned views**: arrays 4 bytes off the 16-byte alignment native
  code assumes, copied in and out (see ``loom.runtime.arguments``).

plus the shared argument checker alone (``ArgumentChecker.bind`` + ``finish``)
and the whole ``interp`` call for scale.  The raw function comes from the
module itself: the JIT address of its symbol for llvm, the loaded shared
library for c; its ABI is :mod:`loom.runtime.abi` (one word per slot:
``A, B, C, n``).
"""

from __future__ import annotations

import ctypes
import timeit
from typing import Any, Callable

import numpy as np

import loom
from loom.runtime import abi
from loom.runtime.arguments import ArgumentChecker
from loom.runtime.ndarray import aligned_empty

__all__ = ["measure", "markdown", "main"]

LENGTH = 64


def vadd_schedule():
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] + B[i], name="C")
    return loom.create_schedule(C.op), [A, B, C]


def raw_function(module: Any, kind: str, symbol: str) -> Callable[..., int]:
    """The compiled ``symbol`` of a native module as a bare ctypes function of the native ABI."""
    if kind == "llvm":
        return abi.NATIVE_SIGNATURE(module.jit.address(symbol))
    fn = getattr(ctypes.CDLL(module.library_path), symbol)
    fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_char_p)]
    fn.restype = ctypes.c_int32
    return fn


def per_call_us(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def _unaligned(n: int) -> np.ndarray:
    """A float32 view whose data is 4 bytes past a 64-byte boundary: misaligned for vector code."""
    raw = aligned_empty((n + 16,), "float32")
    return raw[1:1 + n]


def measure(kinds: tuple[str, ...] = ("llvm", "c"), number: int = 20000) -> list[tuple[str, float]]:
    """``(what, microseconds per call)`` rows for every installed native kind in ``kinds``."""
    s, args = vadd_schedule()
    signature = loom.lower(s, args, name="vadd")["vadd"]
    rows: list[tuple[str, float]] = []
    aligned = [aligned_empty((LENGTH,), "float32") for _ in range(3)]
    nd = [loom.nd.array(a) for a in aligned]
    misaligned = [_unaligned(LENGTH) for _ in range(3)]
    for kind in kinds:
        if kind not in loom.target.list_kinds():
            continue
        module = loom.build(s, args, target=kind, name="vadd")
        fn = raw_function(module, kind, "vadd")
        words_t = ctypes.c_uint64 * 4
        words = words_t(*(a.ctypes.data for a in aligned), LENGTH)
        err = ctypes.c_char_p()
        err_ref = ctypes.byref(err)
        a, b, c = aligned
        func = module["vadd"]
        rows += [
            (f"{kind}: ctypes, words prebuilt", per_call_us(lambda: fn(words, err_ref), number)),
            (f"{kind}: ctypes, words per call",
             per_call_us(lambda: fn(words_t(a.ctypes.data, b.ctypes.data, c.ctypes.data, LENGTH),
                                    ctypes.byref(err)), number)),
            (f"{kind}: Loom, loom.nd arrays", per_call_us(lambda: func(*nd), number)),
            (f"{kind}: Loom, numpy arrays (aligned)", per_call_us(lambda: func(*aligned), number)),
            (f"{kind}: Loom, misaligned views (copied in and out)",
             per_call_us(lambda: func(*misaligned), number // 4)),
        ]
    checker = ArgumentChecker(signature, "vadd")
    rows.append(("checker alone (bind + finish), loom.nd arrays",
                 per_call_us(lambda: checker.bind(nd).finish(), number)))
    interp = loom.build(s, args, target="interp", name="vadd")
    rows.append((f"interp: whole call, n={LENGTH} (for scale)", per_call_us(lambda: interp(*nd), 50)))
    return rows


def markdown(rows: list[tuple[str, float]]) -> str:
    """The rows as a markdown table, with each native call's multiple of its raw ctypes floor."""
    floors = {what.split(":")[0]: us for what, us in rows if what.endswith("ctypes, words prebuilt")}
    lines = ["| call | us/call | vs raw ctypes |", "|---|---:|---:|"]
    for what, us in rows:
        floor = floors.get(what.split(":")[0])
        lines.append(f"| {what} | {us:.2f} | {f'{us / floor:.1f}x' if floor else '-'} |")
    return "\n".join(lines)


def main() -> None:
    print(markdown(measure()))


if __name__ == "__main__":
    main()
