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
and the whole ``interp`` call for scale.  Loom's calls go through the native
fast path (``loom.runtime._fastcall``) after the first; the row "Python path
only" is what a call costs without that extension.  When ``bench/.venv-tvm``
exists, the same kernel built by Apache TVM is called there too, with
``tvm.runtime.tensor`` arrays and with numpy arrays (passed through DLPack).  The raw function comes from the
module itself: the JIT address of its symbol for llvm, the loaded shared
library for c; its ABI is :mod:`loom.runtime.abi` (one word per slot:
``A, B, C, n``).
"""

from __future__ import annotations

import ctypes
import json
import pathlib
import subprocess
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
            (f"{kind}: Loom, numpy arrays, the module: module(a, b, c)",
             per_call_us(lambda: module(a, b, c), number)),
            (f"{kind}: Loom, numpy arrays, Python path only (no native extension)",
             per_call_us(lambda: func._checked_call(*aligned), number)),
            (f"{kind}: Loom, misaligned views (copied in and out)",
             per_call_us(lambda: func(*misaligned), number // 4)),
        ]
    checker = ArgumentChecker(signature, "vadd")
    rows.append(("checker alone (bind + finish), loom.nd arrays",
                 per_call_us(lambda: checker.bind(nd).finish(), number)))
    interp = loom.build(s, args, target="interp", name="vadd")
    rows.append((f"interp: whole call, n={LENGTH} (for scale)", per_call_us(lambda: interp(*nd), 50)))
    return rows


TVM_PYTHON = pathlib.Path(__file__).resolve().parent / ".venv-tvm" / "bin" / "python"

#: The same kernel and timing in TVM's environment; prints one JSON list of rows.
_TVM_SNIPPET = """
import json, timeit, numpy as np, tvm
from tvm import te
n = te.var("n")
A = te.placeholder((n,), name="A"); B = te.placeholder((n,), name="B")
C = te.compute((n,), lambda i: A[i] + B[i], name="C")
mod = tvm.build(te.create_prim_func([A, B, C]), target="llvm")
fn = mod["main"]
arrays = [np.ones({n}, "float32") for _ in range(3)]
tensors = [tvm.runtime.tensor(a, tvm.cpu(0)) for a in arrays]
us = lambda f: min(timeit.repeat(f, number={number}, repeat=5)) / {number} * 1e6
print(json.dumps([["tvm: tvm.runtime.tensor arrays, mod['main']", us(lambda: fn(*tensors))],
                  ["tvm: tvm.runtime.tensor arrays, the module: mod(a, b, c)", us(lambda: mod(*tensors))],
                  ["tvm: numpy arrays (DLPack), mod['main']", us(lambda: fn(*arrays))]]))
"""


def measure_tvm(number: int = 20000) -> list[tuple[str, float]]:
    """TVM's rows for the same kernel, or none when bench/.venv-tvm is missing or fails."""
    if not TVM_PYTHON.exists():
        return []
    done = subprocess.run([str(TVM_PYTHON), "-c", _TVM_SNIPPET.format(n=LENGTH, number=number)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        print(f"call_overhead: TVM's rows failed: {done.stderr.strip()[-300:]}")
        return []
    return [(what, us) for what, us in json.loads(done.stdout.strip().splitlines()[-1])]


def markdown(rows: list[tuple[str, float]]) -> str:
    """The rows as a markdown table, with each native call's multiple of its raw ctypes floor."""
    floors = {what.split(":")[0]: us for what, us in rows if what.endswith("ctypes, words prebuilt")}
    lines = ["| call | us/call | vs raw ctypes |", "|---|---:|---:|"]
    for what, us in rows:
        floor = floors.get(what.split(":")[0])
        lines.append(f"| {what} | {us:.2f} | {f'{us / floor:.1f}x' if floor else '-'} |")
    return "\n".join(lines)


def main() -> None:
    print(markdown(measure() + measure_tvm()))


if __name__ == "__main__":
    main()
