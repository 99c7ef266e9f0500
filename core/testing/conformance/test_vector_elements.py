"""Buffers of vector elements (``float32x2``, ``int32x4``) as function arguments.

A buffer of ``float32x4`` elements and shape ``(n,)`` takes the data of a
``loom.nd.empty((n,), "float32x4")`` array, or a numpy ``float32`` array of
shape ``(n, 4)``: the lanes are a trailing axis.  Each kind must compute what
numpy computes on the lanes, with the schedule of TVM's vector-pipeline test
on CPU kinds (a vectorized loop over vector elements, a parallel outer loop)
and bound threads on device kinds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import loom

from .harness import KindUnderTest, bind_root


def _place(kind: KindUnderTest, data: np.ndarray, dtype: str) -> Any:
    """``data`` (lanes last) as the kind takes it: numpy on CPU kinds, a vector-dtype array on a device."""
    return loom.nd.array(data, kind.device, dtype=dtype) if kind.on_device else data


def _host(value: Any) -> np.ndarray:
    return value.numpy() if isinstance(value, loom.nd.NDArray) else value


@pytest.mark.parametrize("n, lanes", [(64, 2), (512, 2), (40, 4)])
def test_vector_add_pipeline(kind_under_test: KindUnderTest, n: int, lanes: int) -> None:
    kind = kind_under_test
    dtype = f"float32x{lanes}"
    A = loom.placeholder((n,), name="A", dtype=dtype)
    B = loom.compute((n,), lambda i: A[i], name="B")
    C = loom.compute((n,), lambda i: B[i] + loom.const(1, A.dtype), name="C")
    s = loom.create_schedule(C.op)
    if kind.on_device:
        _, tx = bind_root(s, C)
        s[B].compute_inline()
    else:
        xo, xi = s[C].split(C.op.axis[0], nparts=2)
        _, xi = s[C].split(xi, factor=2)
        s[C].parallel(xo)
        s[C].vectorize(xi)
        s[B].compute_at(s[C], xo)
        _, bi = s[B].split(B.op.axis[0], factor=2)
        s[B].vectorize(bi)
    f = kind.build(s, [A, C])
    a = np.random.default_rng(n).uniform(size=(n, lanes)).astype("float32")
    c = _place(kind, np.zeros((n, lanes), "float32"), dtype)
    f(_place(kind, a, dtype), c)
    np.testing.assert_allclose(_host(c), a + 1, rtol=1e-6)


def test_symbolic_2d_int_vectors(kind_under_test: KindUnderTest) -> None:
    kind = kind_under_test
    m, n = loom.var("m"), loom.var("n")
    A = loom.placeholder((m, n), name="A", dtype="int32x4")
    B = loom.placeholder((m, n), name="B", dtype="int32x4")
    C = loom.compute((m, n), lambda i, j: A[i, j] * B[i, j] - A[i, n - 1 - j], name="C")
    s = loom.create_schedule(C.op)
    if kind.on_device:
        bind_root(s, C)
    f = kind.build(s, [A, B, C])
    rng = np.random.default_rng(5)
    a = rng.integers(-1000, 1000, (3, 5, 4), dtype="int32")
    b = rng.integers(-1000, 1000, (3, 5, 4), dtype="int32")
    c = _place(kind, np.zeros((3, 5, 4), "int32"), "int32x4")
    f(_place(kind, a, "int32x4"), _place(kind, b, "int32x4"), c)
    np.testing.assert_array_equal(_host(c), a * b - a[:, ::-1, :])


def test_misaligned_vector_output_is_written_back(kind_under_test: KindUnderTest) -> None:
    kind = kind_under_test
    if kind.on_device:
        pytest.skip("device arrays are allocated aligned; host arrays are not passed to a device kind")
    n = 16
    A = loom.placeholder((n,), name="A", dtype="float64x2")
    C = loom.compute((n,), lambda i: A[i] * loom.const(3, A.dtype), name="C")
    f = kind.build(loom.create_schedule(C.op), [A, C])
    raw = np.zeros(n * 2 + 1, "float64")
    out = raw[1:].reshape(n, 2)  # 8 bytes past a 16-byte boundary at best: copied in and back
    a = np.arange(n * 2, dtype="float64").reshape(n, 2)
    f(a, out)
    np.testing.assert_array_equal(out, a * 3)
    assert raw[0] == 0
