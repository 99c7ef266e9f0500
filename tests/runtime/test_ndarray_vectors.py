"""Arrays of vector elements: ``loom.nd.empty((n,), "float32x4")`` and vector-dtype buffer arguments."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.runtime import nd


def test_empty_vector_array_shows_lanes_as_a_trailing_axis() -> None:
    a = nd.empty((5,), "float32x4")
    assert a.shape == (5,) and a.dtype == "float32x4" and a.nbytes == 80
    data = np.arange(20, dtype="float64").reshape(5, 4)
    a.copyfrom(data)  # converted to the element dtype, as for scalar arrays
    got = a.numpy()
    assert got.dtype == np.float32 and got.shape == (5, 4)
    np.testing.assert_array_equal(got, data)
    np.testing.assert_array_equal(a.asnumpy(), np.asarray(a))


def test_array_with_a_vector_dtype_takes_the_lanes_from_the_last_axis() -> None:
    a = nd.array(np.ones((3, 2, 2), "int64"), dtype="int16x2")
    assert (a.shape, a.dtype) == ((3, 2), "int16x2")
    assert a.numpy().dtype == np.int16 and a.numpy().shape == (3, 2, 2)
    with pytest.raises(loom.LoomValueError, match="trailing axis of 4 lanes"):
        nd.array(np.ones((3, 2)), dtype="float32x4")


def test_copyfrom_names_the_shape_a_vector_array_takes() -> None:
    a = nd.empty((4,), "float32x2")
    with pytest.raises(loom.LoomValueError, match=r"it takes shape \(4, 2\)"):
        a.copyfrom(np.zeros(4))
    b = nd.empty((4,), "float32x2").copyfrom(np.full((4, 2), 7.0))
    np.testing.assert_array_equal(a.copyfrom(b).numpy(), np.full((4, 2), 7.0))
    np.testing.assert_array_equal(b.copyto("cpu").numpy(), b.numpy())


def test_strided_vector_array_views_whole_vectors() -> None:
    base = nd.empty((6,), "float32x2").copyfrom(np.arange(12, dtype="float32").reshape(6, 2))
    every_other = nd.NDArray(base.handle, (3,), "float32x2", "cpu", strides=(2,), owner=base)
    np.testing.assert_array_equal(every_other.numpy(), [[0, 1], [4, 5], [8, 9]])


def _double(dtype: str, n: int = 8) -> tuple:
    A = loom.placeholder((n,), name="A", dtype=dtype)
    C = loom.compute((n,), lambda i: A[i] + A[i], name="C")
    return loom.build(loom.create_schedule(C.op), [A, C], "llvm"), A


def test_vector_buffer_argument_mistakes_are_named() -> None:
    f, _ = _double("float32x4")
    out = np.zeros((8, 4), "float32")
    with pytest.raises(loom.runtime.ArgumentTypeError, match="float32 data with a trailing axis of 4 lanes"):
        f(np.zeros((8, 4), "float64"), out)
    with pytest.raises(loom.runtime.ArgumentValueError, match="trailing axis of 4 contiguous lanes"):
        f(np.zeros((8, 2), "float32"), out)
    with pytest.raises(loom.runtime.ArgumentValueError, match="trailing axis of 4 contiguous lanes"):
        f(np.zeros((4, 8), "float32").T, out)
    with pytest.raises(loom.runtime.ArgumentValueError, match=r"shape\[0\] must be 8"):
        f(np.zeros((7, 4), "float32"), out)
    with pytest.raises(loom.runtime.ArgumentTypeError, match="needs dtype float32x4"):
        f(nd.empty((8,), "float32x2"), out)


def test_vector_buffer_takes_numpy_and_nd_arrays_alike() -> None:
    f, _ = _double("int32x2")
    a = np.arange(16, dtype="int32").reshape(8, 2)
    out = nd.empty((8,), "int32x2")
    f(nd.array(a, dtype="int32x2"), out)
    np.testing.assert_array_equal(out.numpy(), 2 * a)
    out_np = np.zeros((8, 2), "int32")
    f(a, out_np)
    np.testing.assert_array_equal(out_np, 2 * a)


def test_read_only_vector_output_is_refused() -> None:
    f, _ = _double("float32x2")
    out = np.zeros((8, 2), "float32")
    out.flags.writeable = False
    with pytest.raises(loom.runtime.ArgumentValueError, match="read-only"):
        f(np.zeros((8, 2), "float32"), out)
