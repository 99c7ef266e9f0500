"""Small programs for the write, read-only and overlap tests (shared with their child processes)."""

from __future__ import annotations

from typing import Any

import loom
from loom.ir import BufferStore, For, PrimFunc
from loom.runtime.abi import ARG_DEVICES_ATTR
from loom.transform.make_api import make_api


def twice_program(kind: str, strided: bool = False) -> Any:
    """``B[i] = A[i] * 2`` over a symbolic n, built for ``kind``; B may be strided when ``strided``."""
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    binds = {B: loom.decl_buffer((n,), "float32", name="B", strides=[loom.var("s")])} if strided else None
    return loom.build(s, [A, B], target=kind, name="twice", binds=binds)


def mirror_program(kind: str, parallel: bool = False) -> Any:
    """``B[i] = A[i] + A[n - 1 - i]``: an output aliasing A would change what later iterations read."""
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] + A[n - 1 - i], name="B")
    s = loom.create_schedule(B.op)
    if parallel:
        s[B].parallel(B.op.axis[0])
    return loom.build(s, [A, B], target=kind, name="mirror")


def add_program(kind: str) -> Any:
    """``C[i] = A[i] + B[i]``."""
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] + B[i], name="C")
    return loom.build(loom.create_schedule(C.op), [A, B, C], target=kind, name="add")


def on_device_twice() -> PrimFunc:
    """``twice`` as a made PrimFunc whose buffers live on ext_dev (DLPack type 12)."""
    n = loom.var("n")
    A, B = (loom.decl_buffer((n,), "float32", name=x) for x in "AB")
    i = loom.var("i")
    f = PrimFunc([A.data, B.data], For(i, 0, n, "serial", BufferStore(B, A[i] * 2.0, [i])),
                 buffer_map={A.data: A, B.data: B})
    return make_api(f, "twice").with_attr(ARG_DEVICES_ATTR, [12, 12])
