"""Tutorial "Schedule Primitives": each primitive's schedule lowers, builds and computes the right values."""

import numpy as np
import pytest

import loom

m, n = loom.var("m"), loom.var("n")
M, N = 37, 23  # not multiples of the split factors


def _run(s, args, expect, kind="llvm", outputs=1):
    """Build ``s``, run it on random inputs and compare its last ``outputs`` arguments with ``expect(*inputs)``."""
    print(loom.lower(s, args, simple_mode=True))
    f = loom.build(s, args, kind)
    sizes = {m: M, n: N}
    arrays = [np.random.uniform(size=[sizes.get(d, d) for d in t.shape]).astype(t.dtype) for t in args]
    ins, outs = arrays[:-outputs], arrays[-outputs:]
    for out in outs:
        out[...] = 0
    f(*arrays)
    for got, want in zip(outs, expect(*ins)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_default_schedule():
    A = loom.placeholder((m, n), name="A")
    B = loom.placeholder((m, n), name="B")
    C = loom.compute((m, n), lambda i, j: A[i, j] * B[i, j], name="C")
    s = loom.create_schedule([C.op])
    _run(s, [A, B, C], lambda a, b: [a * b])


@pytest.mark.parametrize("how", ["factor", "nparts"])
def test_split(how):
    A = loom.placeholder((m,), name="A")
    B = loom.compute((m,), lambda i: A[i] * 2, name="B")
    s = loom.create_schedule(B.op)
    s[B].split(B.op.axis[0], **{how: 32})
    _run(s, [A, B], lambda a: [a * 2])


@pytest.mark.parametrize("then", ["none", "fuse", "reorder"])
def test_tile_then_fuse_or_reorder(then):
    A = loom.placeholder((m, n), name="A")
    B = loom.compute((m, n), lambda i, j: A[i, j], name="B")
    s = loom.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    if then == "fuse":
        s[B].fuse(xi, yi)
    elif then == "reorder":
        s[B].reorder(xi, yo, xo, yi)
    _run(s, [A, B], lambda a: [a])


def test_bind_runs_threads_on_the_cpu():
    A = loom.placeholder((n,), name="A")
    B = loom.compute(A.shape, lambda i: A[i] * 2, name="B")
    s = loom.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, loom.thread_axis("blockIdx.x"))
    s[B].bind(tx, loom.thread_axis("threadIdx.x"))
    _run(s, [A, B], lambda a: [a * 2], kind="interp")  # GPU semantics on the interpreter


@pytest.mark.parametrize("where", ["root", "at", "inline", "at_then_root"])
def test_compute_at_inline_root(where):
    A = loom.placeholder((m,), name="A")
    B = loom.compute((m,), lambda i: A[i] + 1, name="B")
    C = loom.compute((m,), lambda i: B[i] * 2, name="C")
    s = loom.create_schedule(C.op)
    if where in ("at", "at_then_root"):
        s[B].compute_at(s[C], C.op.axis[0])
    if where == "inline":
        s[B].compute_inline()
    if where == "at_then_root":
        s[B].compute_root()
    if where == "inline":
        _run(s, [A, C], lambda a: [(a + 1) * 2])
    else:
        _run(s, [A, B, C], lambda a: [a + 1, (a + 1) * 2], outputs=2)
