"""Schedules built with loom.build for every installed target, checked against numpy.

Shapes are chosen so that no split factor divides them: guards and tails run.
"""

import numpy as np
import pytest

import loom

from programs import blocked_matmul, matmul

M, N, K = 13, 17, 19


def _rand(shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _matmul():
    return matmul(M, N, K)


def _run_matmul(s, target, A, B, C):
    f = loom.build(s, [A, B, C], target=target)
    a, b = _rand((M, K)), _rand((K, N), 1)
    c = np.zeros((M, N), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    return f


def test_matmul_default(target):
    A, B, C = _matmul()
    _run_matmul(loom.create_schedule(C.op), target, A, B, C)


def test_matmul_blocked(target):
    """The classic CPU schedule: tile, split k, reorder, vectorize, parallel, and unroll k.inner."""
    s, (A, B, C) = blocked_matmul(M, N, K)
    ki = s[C].leaf_iter_vars[4]
    assert ki.var.name == "k.inner"
    s[C].unroll(ki)
    with loom.build_config(auto_unroll_max_step=16, partition_const_loop=True):
        _run_matmul(s, target, A, B, C)


def test_matmul_fused_and_cached(target):
    A, B, C = _matmul()
    s = loom.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = C.op.axis
    fused = s[C].fuse(i, j)
    outer, inner = s[C].split(fused, factor=5)
    s[CC].compute_at(s[C], outer)
    _run_matmul(s, target, A, B, C)


def test_three_stage_pipeline_compute_at_and_inline(target):
    A = loom.placeholder((M, N), name="A")
    B = loom.compute((M, N), lambda i, j: A[i, j] * 2.0, name="B")
    C = loom.compute((M, N), lambda i, j: B[i, j] + 1.0, name="C")
    D = loom.compute((M, N), lambda i, j: C[i, j] * C[i, j], name="D")
    s = loom.create_schedule(D.op)
    s[B].compute_inline()
    do, di = s[D].split(D.op.axis[0], factor=4)
    s[C].compute_at(s[D], do)
    f = loom.build(s, [A, D], target=target)
    a = _rand((M, N))
    d = np.zeros_like(a)
    f(a, d)
    np.testing.assert_allclose(d, (a * 2 + 1) ** 2, rtol=1e-5)


def test_softmax_several_stages(target):
    X = loom.placeholder((M, N), name="X")
    k1 = loom.reduce_axis((0, N), name="k1")
    mx = loom.compute((M,), lambda i: loom.max(X[i, k1], axis=k1), name="mx")
    e = loom.compute((M, N), lambda i, j: loom.exp(X[i, j] - mx[i]), name="e")
    k2 = loom.reduce_axis((0, N), name="k2")
    total = loom.compute((M,), lambda i: loom.sum(e[i, k2], axis=k2), name="total")
    out = loom.compute((M, N), lambda i, j: e[i, j] / total[i], name="out")
    s = loom.create_schedule(out.op)
    oi, ii = s[out].split(out.op.axis[0], factor=3)
    for stage in (mx, e, total):
        s[stage].compute_at(s[out], oi)
    f = loom.build(s, [X, out], target=target)
    x = _rand((M, N))
    y = np.zeros_like(x)
    f(x, y)
    ref = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, ref / ref.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_conv2d_with_padding_stage(target):
    n, c, h, w, oc, kh = 1, 3, 7, 9, 4, 3
    data = loom.placeholder((n, c, h, w), name="data")
    weight = loom.placeholder((oc, c, kh, kh), name="weight")
    pad = loom.compute(
        (n, c, h + 2, w + 2),
        lambda b, ch, y, x: loom.if_then_else(
            loom.all(y >= 1, y < h + 1, x >= 1, x < w + 1), data[b, ch, y - 1, x - 1], loom.const(0.0)),
        name="pad")
    rc = loom.reduce_axis((0, c), name="rc")
    ry = loom.reduce_axis((0, kh), name="ry")
    rx = loom.reduce_axis((0, kh), name="rx")
    conv = loom.compute(
        (n, oc, h, w),
        lambda b, o, y, x: loom.sum(pad[b, rc, y + ry, x + rx] * weight[o, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv")
    s = loom.create_schedule(conv.op)
    yo, yi = s[conv].split(conv.op.axis[2], factor=4)
    s[pad].compute_at(s[conv], yo)
    f = loom.build(s, [data, weight, conv], target=target)
    d, wt = _rand((n, c, h, w)), _rand((oc, c, kh, kh), 1)
    out = np.zeros((n, oc, h, w), "float32")
    f(d, wt, out)
    padded = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros_like(out)
    for y in range(h):
        for x in range(w):
            ref[0, :, y, x] = np.tensordot(wt, padded[0, :, y:y + kh, x:x + kh], axes=([1, 2, 3], [0, 1, 2]))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("length", [1, 7, 33])
def test_symbolic_shapes(target, length):
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] * 3.0 + B[i], name="C")
    s = loom.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(xi)
    s[C].parallel(xo)
    f = loom.build(s, [A, B, C], target=target)
    a, b = _rand((length,)), _rand((length,), 1)
    c = np.zeros_like(a)
    f(a, b, c)
    np.testing.assert_allclose(c, a * 3 + b, rtol=1e-6, atol=1e-6)  # FMA rounds once


def test_bad_arguments_raise(target):
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    C = loom.compute((n,), lambda i: A[i] + 1.0, name="C")
    f = loom.build(loom.create_schedule(C.op), [A, C], target=target)
    a = np.zeros(4, "float32")
    with pytest.raises(loom.LoomError):
        f(a, np.zeros(5, "float32"))  # n bound inconsistently
    with pytest.raises(loom.LoomError):
        f(a.astype("float64"), np.zeros(4))
    with pytest.raises(loom.LoomError):
        f(a)


def test_unknown_target_lists_installed_kinds():
    A = loom.placeholder((4,), name="A")
    C = loom.compute((4,), lambda i: A[i] + 1.0, name="C")
    with pytest.raises(loom.LoomError, match="interp"):
        loom.build(loom.create_schedule(C.op), [A, C], target="no_such_kind")
