"""Small builders shared by the interpreter tests."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import loom
from loom.ir import Buffer, BufferStore, For, PrimFunc
from loom.testing import evaluate

ALL_DTYPES = [
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "bool",
]
INT_DTYPES = ALL_DTYPES[:8]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]


def np_dtype(dtype: str) -> np.dtype:
    return loom.DataType.of(dtype).numpy()


def prim(body: Any, *params: Any, name: str | None = None) -> PrimFunc:
    """A PrimFunc whose Buffer parameters go through the buffer map."""
    plist, bmap = [], {}
    for p in params:
        if isinstance(p, Buffer):
            plist.append(p.data)
            bmap[p.data] = p
        else:
            plist.append(p)
    f = PrimFunc(plist, body, buffer_map=bmap)
    return f.with_attr("global_symbol", name) if name else f


def elementwise(fn: Callable[..., Any], in_dtypes: Sequence[str], out_dtype: str, n: int) -> PrimFunc:
    """``C[i] = fn(A0[i], A1[i], ...)`` over ``n`` elements."""
    ins = [loom.decl_buffer((n,), t, name=f"A{k}") for k, t in enumerate(in_dtypes)]
    out = loom.decl_buffer((n,), out_dtype, name="C")
    i = loom.var("i")
    body = For(i, 0, n, "serial", BufferStore(out, fn(*[b[i] for b in ins]), [i]))
    return prim(body, *ins, out, name="elementwise")


def run_elementwise(fn: Callable[..., Any], arrays: Sequence[np.ndarray], out_dtype: str) -> np.ndarray:
    """Evaluate :func:`elementwise` on ``arrays`` and return the output array."""
    n = len(arrays[0])
    in_dtypes = [str(loom.DataType.of(a.dtype)) for a in arrays]
    out = np.zeros(n, dtype=np_dtype(out_dtype))
    evaluate(elementwise(fn, in_dtypes, out_dtype, n), *arrays, out)
    return out


def sample(dtype: str, n: int, rng: np.random.Generator, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    """``n`` values of ``dtype``: the full range for integers, [lo, hi) for floats."""
    t = loom.DataType.of(dtype)
    npd = t.numpy()
    if t.is_bool:
        return rng.integers(0, 2, n).astype(bool)
    if t.is_float:
        with np.errstate(over="ignore"):  # float16 saturates to inf, on purpose
            return rng.uniform(lo, hi, n).astype(npd)
    info = np.iinfo(npd)
    vals = rng.integers(info.min, info.max, n, dtype=npd, endpoint=True)
    vals[:2] = (info.min, info.max)
    return vals


# -- thread-bound programs ---------------------------------------------------------------------


def axis(tag: str) -> Any:
    """A fresh thread IterVar for ``tag`` (``"threadIdx.x"``...), its Var named like the tag."""
    from loom.ir import IterVar

    return IterVar(None, loom.var(tag), "thread_index", tag)


def launch(iv: Any, extent: Any, body: Any) -> Any:
    """``thread_extent`` attr binding ``iv`` over ``extent``."""
    from loom.ir import AttrStmt

    return AttrStmt(iv, "thread_extent", extent, body)


def alloc(buf: Buffer, body: Any, scope: str | None = None) -> Any:
    """Allocate ``buf``'s memory (in ``scope``, default the buffer's own) around ``body``."""
    from loom.ir import Allocate

    return Allocate(buf.data, buf.dtype, list(buf.shape), True, body, scope or buf.scope or "global")


def barrier(scope: str = "shared") -> Any:
    """``tvm_storage_sync(scope)``."""
    from loom.transform.thread_sync import storage_sync

    return storage_sync(scope)


def tiled_matmul(n: int, m: int, k: int, tile: int = 8) -> Any:
    """The classic cooperative-fetch tiled matmul ``C[n, m] = A[n, k] @ B[k, m]``, lowered (no barriers yet)."""
    from loom.testing.conformance.programs import tiled_matmul as schedule

    s, args = schedule(n, m, k, tile)
    return loom.lower(s, args)
