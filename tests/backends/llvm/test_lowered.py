"""Lowered schedules (``loom.lower``) compiled through the LLVM code generator."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import loom  # noqa: E402

from llvm_programs import build  # noqa: E402
from programs import blocked_matmul  # noqa: E402


def _run(mod, name, *arrays):
    rc, err = build(mod, name)(*arrays)
    assert rc == 0, err


def test_vector_add_split_vectorize_emits_vector_code():
    n = loom.var("n")
    A, B = loom.placeholder((n,), name="A"), loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] + B[i], name="C")
    s = loom.create_schedule(C.op)
    _, inner = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(inner)
    with loom.build_config(partition_const_loop=True):
        mod = loom.lower(s, [A, B, C], name="vadd")
    run = build(mod, "vadd")
    for size in (5, 64, 203):
        a, b = (np.random.default_rng(size).standard_normal(size).astype("float32") for _ in range(2))
        c = np.zeros(size, "float32")
        assert run(a, b, c)[0] == 0
        np.testing.assert_allclose(c, a + b, rtol=1e-6)
    asm = run.jit.asm()
    assert any(tok in asm for tok in ("xmm", "ymm", "zmm")) and ("addps" in asm)


@pytest.mark.parametrize("partition", [False, True])
def test_blocked_matmul(partition):
    M, N, K = 13, 17, 19
    s, args = blocked_matmul(M, N, K)
    with loom.build_config(partition_const_loop=partition):
        mod = loom.lower(s, args, name="matmul")
    a = np.random.default_rng(0).standard_normal((M, K)).astype("float32")
    b = np.random.default_rng(1).standard_normal((K, N)).astype("float32")
    c = np.zeros((M, N), "float32")
    _run(mod, "matmul", a, b, c)
    np.testing.assert_allclose(c, a @ b, atol=1e-4)


def test_compute_at_pipeline():
    M, N = 13, 17
    X = loom.placeholder((M, N), name="X")
    Y = loom.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = loom.compute((M, N), lambda i, j: Y[i, j] + 1.0, name="Z")
    s = loom.create_schedule(Z.op)
    zo, _ = s[Z].split(Z.op.axis[0], factor=4)
    s[Y].compute_at(s[Z], zo)
    mod = loom.lower(s, [X, Z], name="pipe")
    x = np.random.default_rng(3).standard_normal((M, N)).astype("float32")
    z = np.zeros_like(x)
    _run(mod, "pipe", x, z)
    np.testing.assert_allclose(z, x * 2 + 1, rtol=1e-6)


def test_softmax_with_symbolic_shape():
    m, n = loom.var("m"), loom.var("n")
    X = loom.placeholder((m, n), name="X")
    k1, k2 = loom.reduce_axis((0, n), name="k1"), loom.reduce_axis((0, n), name="k2")
    mx = loom.compute((m,), lambda i: loom.max(X[i, k1], axis=k1), name="mx")
    ex = loom.compute((m, n), lambda i, j: loom.exp(X[i, j] - mx[i]), name="ex")
    sm = loom.compute((m,), lambda i: loom.sum(ex[i, k2], axis=k2), name="sm")
    Y = loom.compute((m, n), lambda i, j: ex[i, j] / sm[i], name="Y")
    s = loom.create_schedule(Y.op)
    mod = loom.lower(s, [X, Y], name="softmax")
    run = build(mod, "softmax")
    for shape in ((3, 7), (5, 33)):
        x = np.random.default_rng(4).standard_normal(shape).astype("float32")
        y = np.zeros_like(x)
        assert run(x, y)[0] == 0
        e = np.exp(x - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5)
