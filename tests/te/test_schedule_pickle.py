"""Schedules pickle with their sharing intact, so work can be shipped to worker processes."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np

import loom


def _tiled_gpu_matmul(n: int = 32, tile: int = 8):
    """A matmul with shared-memory tiles loaded cooperatively by bound threads (a cache_read/write schedule)."""
    A = loom.placeholder((n, n), name="A")
    B = loom.placeholder((n, n), name="B")
    k = loom.reduce_axis((0, n), name="k")
    C = loom.compute((n, n), lambda i, j: loom.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = loom.create_schedule(C.op)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    ty, tx = loom.thread_axis("threadIdx.y"), loom.thread_axis("threadIdx.x")
    io, ii = s[C].split(C.op.axis[0], factor=tile)
    jo, ji = s[C].split(C.op.axis[1], factor=tile)
    s[C].reorder(io, jo, ii, ji)
    for axis, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, ty), (ji, tx)):
        s[C].bind(axis, loom.thread_axis(tag) if isinstance(tag, str) else tag)
    s[CL].compute_at(s[C], ji)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=tile)
    for S in (AS, BS):
        s[S].compute_at(s[CL], ko)
        s[S].bind(s[S].op.axis[0], ty)
        s[S].bind(s[S].op.axis[1], tx)
    return s, [A, B, C]


def test_a_pickled_schedule_lowers_to_the_same_ir():
    s, args = _tiled_gpu_matmul()
    s2, args2 = pickle.loads(pickle.dumps((s, args)))
    assert loom.structural_equal(loom.lower(s2, args2), loom.lower(s, args))


def test_a_pickled_cpu_schedule_builds_and_runs():
    A = loom.placeholder((13, 17), name="A")
    B = loom.compute((13, 17), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = loom.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[1], factor=4)
    s[B].vectorize(xi)
    s2, (A2, B2) = pickle.loads(pickle.dumps((s, [A, B])))
    f = loom.build(s2, [A2, B2], target="interp")
    a = np.random.default_rng(0).standard_normal((13, 17)).astype("float32")
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_allclose(b, a * 2 + 1)


def test_a_schedule_pickled_in_one_process_lowers_in_another():
    s, args = _tiled_gpu_matmul()
    data = pickle.dumps((s, args))
    code = ("import pickle, sys, loom\n"
            "s, args = pickle.loads(sys.stdin.buffer.read())\n"
            "print(loom.lower(s, args))\n")
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().strip() == str(loom.lower(s, args)).strip()
