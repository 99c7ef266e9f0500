"""loom.nd arrays: allocation, alignment, copies, and DLPack both ways with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.runtime import NDArray, nd
from loom.runtime.ndarray import ALLOC_ALIGNMENT, aligned_empty


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "uint64", "bool"])
def test_array_copies_and_describes(dtype):
    src = np.arange(12).reshape(3, 4).astype(loom.DataType.of(dtype).numpy())
    a = nd.array(src)
    assert isinstance(a, NDArray)
    assert (a.shape, a.dtype, a.device, a.ndim, a.size) == ((3, 4), dtype, loom.cpu(0), 2, 12)
    out = a.numpy()
    np.testing.assert_array_equal(out, src)
    out[0, 0] = 1
    src[0, 1] = 0
    assert a.numpy()[0, 0] == src.dtype.type(0) and a.numpy()[0, 1] == src.dtype.type(1), "array() and numpy() copy"


@pytest.mark.parametrize("shape", [(0,), (), (1,), (7, 3), (2, 0, 5)])
def test_allocations_are_aligned(shape):
    for make in (lambda: nd.empty(shape, "float64"), lambda: nd.array(np.ones(shape, "int16"))):
        a = make()
        assert a.shape == shape
        assert np.from_dlpack(a).ctypes.data % ALLOC_ALIGNMENT == 0
    assert aligned_empty((5,), "int8", 4096).ctypes.data % 4096 == 0


def test_numpy_from_dlpack_shares_memory():
    a = nd.array(np.zeros(4, "float32"))
    view = np.from_dlpack(a)
    view[2] = 3.0
    assert a.numpy().tolist() == [0, 0, 3, 0]
    assert a.__dlpack_device__() == (1, 0)


def test_from_dlpack_of_numpy_shares_memory():
    x = np.arange(6, dtype="int32").reshape(2, 3)
    a = nd.from_dlpack(x)
    assert a.shape == (2, 3) and a.dtype == "int32"
    x[1, 2] = -1
    assert a.numpy()[1, 2] == -1
    assert nd.from_dlpack(a) is a


def test_copyfrom_and_copyto():
    a = nd.empty((3,), "float32").copyfrom(np.array([1, 2, 3]))
    assert a.numpy().tolist() == [1.0, 2.0, 3.0]
    b = nd.empty((3,), "float32")
    a.copyto(b)
    assert b.numpy().tolist() == [1.0, 2.0, 3.0]
    c = a.copyto(loom.cpu(0))
    assert c is not a and c.numpy().tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(loom.LoomValueError, match=r"array of shape \(3,\) cannot take data of shape \(4,\)"):
        a.copyfrom(np.zeros(4))


def test_errors():
    with pytest.raises(loom.LoomTypeError, match="from_dlpack needs an object with __dlpack__"):
        nd.from_dlpack([1, 2])
    with pytest.raises(loom.LoomValueError, match=r"no installed plugin provides arrays on cuda\(0\)"):
        nd.empty((2,), "float32", loom.cuda(0))
    with pytest.raises(loom.LoomValueError, match="shape must be non-negative integers"):
        nd.empty((2, -1), "float32")
    with pytest.raises(loom.LoomTypeError, match="unknown dtype 'float7'"):
        nd.empty((2,), "float7")


def test_device_forms_and_dtype_conversion():
    a = nd.array([1.5, 2.5], "cpu", dtype="float64")
    assert a.device == loom.cpu(0) and a.dtype == "float64"
    assert nd.empty(3, "int32", (1, 0)).shape == (3,)
    assert "NDArray shape=(2,) dtype=float64 device=cpu(0)" in repr(a)
