"""loom.nd arrays: allocation, alignment, copies, descriptors, and devices other than the CPU."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import loom
from loom.runtime import NDArray, nd
from loom.runtime.device_api import CPU_DEVICE_API
from loom.runtime.ndarray import ALLOC_ALIGNMENT, aligned_empty

from fake_device import DEV, ext_dev  # noqa: F401  (ext_dev is a fixture)

DTYPES = ["float32", "float16", "bfloat16", "int8", "uint64", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
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
    with pytest.raises(loom.LoomValueError, match="no installed plugin provides memory on vulkan devices"):
        nd.empty((2,), "float32", loom.device("vulkan", 0))
    with pytest.raises(loom.LoomValueError, match="shape must be non-negative integers"):
        nd.empty((2, -1), "float32")
    with pytest.raises(loom.LoomTypeError, match="unknown dtype 'float7'"):
        nd.empty((2,), "float7")


def test_device_forms_and_dtype_conversion():
    a = nd.array([1.5, 2.5], "cpu", dtype="float64")
    assert a.device == loom.cpu(0) and a.dtype == "float64"
    assert nd.empty(3, "int32", (1, 0)).shape == (3,)
    assert "NDArray shape=(2,) dtype=float64 device=cpu(0)" in repr(a)


# -- the descriptor --------------------------------------------------------------------------------


def test_cpu_descriptor_fields():
    a = nd.array(np.arange(12, dtype="int16").reshape(3, 4))
    assert (a.byte_offset, a.strides, a.is_compact, a.nbytes) == (0, (4, 1), True, 24)
    assert a.data_ptr == a.handle == np.asarray(a).ctypes.data and a.handle % ALLOC_ALIGNMENT == 0
    view = NDArray(a.handle, (3, 2), "int16", loom.cpu(0), strides=(4, 2), byte_offset=2, owner=a)
    assert (view.strides, view.is_compact, view.data_ptr, view.nbytes) == ((4, 2), False, a.handle + 2, 12)
    np.testing.assert_array_equal(view.numpy(), a.numpy()[:, 1::2])
    np.testing.assert_array_equal(np.asarray(view), a.numpy()[:, 1::2])
    # Compact strides given explicitly are compact; extent-1 axes do not matter, as in numpy.
    assert NDArray(a.handle, (3, 1), "int16", "cpu", strides=(1, 99), owner=a).is_compact


def test_numpy_wrapping_arrays_describe_the_numpy_layout():
    x = np.arange(20, dtype="float32").reshape(4, 5)
    a = nd.from_dlpack(x[1:, ::2])
    assert (a.shape, a.strides, a.byte_offset) == ((3, 3), (5, 2), 0)
    assert a.data_ptr == x[1:, ::2].ctypes.data
    np.testing.assert_array_equal(a.numpy(), x[1:, ::2])


def test_cpu_memory_outlives_the_array_while_numpy_views_hold_it():
    before = len(CPU_DEVICE_API.table)
    a = nd.array(np.arange(5, dtype="int32"))
    view = np.asarray(a)
    del a
    gc.collect()
    assert len(CPU_DEVICE_API.table) == before + 1
    view[0] = 7
    assert view.tolist() == [7, 1, 2, 3, 4]
    del view
    gc.collect()
    assert len(CPU_DEVICE_API.table) == before


def test_descriptor_errors():
    a = nd.empty((4,), "float32")
    with pytest.raises(loom.LoomValueError, match=r"1 strides for shape \(2, 2\)"):
        NDArray(a.handle, (2, 2), "float32", "cpu", strides=(1,), owner=a)
    with pytest.raises(loom.LoomValueError, match="byte_offset must be non-negative"):
        NDArray(a.handle, (4,), "float32", "cpu", byte_offset=-4, owner=a)
    with pytest.raises(loom.LoomValueError, match="null data address"):
        NDArray(0, (4,), "float32", "cpu")
    with pytest.raises(loom.LoomTypeError, match="unknown dtype"):
        nd.empty((4,), "float33")
    assert NDArray(0, (0, 3), "float32", "cpu").numpy().shape == (0, 3)


# -- a device with memory of its own --------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_device_round_trip(ext_dev, dtype):
    src = np.arange(12).reshape(3, 4).astype(loom.DataType.of(dtype).numpy())
    a = nd.array(src, DEV)
    assert (a.shape, a.dtype, a.device, a.ndim, a.size, a.strides) == ((3, 4), dtype, DEV, 2, 12, (4, 1))
    assert a._data is None and a.handle % ALLOC_ALIGNMENT == 0 and ext_dev.table.find(a.handle) is not None
    src[0, 0] = 1  # the device holds its own copy
    out = a.numpy()
    assert out[0, 0] == src.dtype.type(0)
    np.testing.assert_array_equal(out[1:], src[1:])
    assert ext_dev.copies() == {"to_device": 1, "to_host": 1}


def test_device_memory_is_freed_with_the_array(ext_dev):
    a = nd.empty((16,), "float64", DEV)
    b = nd.empty((0,), "float64", DEV)
    assert ext_dev.live() == 2
    del a, b
    assert ext_dev.live() == 0 and ext_dev.counts["free"] == 2


def test_copies_between_devices_go_through_the_device_apis(ext_dev):
    x = np.arange(6, dtype="float32")
    d = nd.empty((6,), "float32", DEV).copyfrom(x)
    assert ext_dev.copies() == {"to_device": 1}
    d2 = d.copyto(DEV)
    assert d2.device == DEV and d2.handle != d.handle and ext_dev.copies() == {"to_device": 1, "within": 1}
    c = d2.copyto(loom.cpu())
    assert c.device == loom.cpu(0) and c.numpy().tolist() == x.tolist()
    assert ext_dev.copies() == {"to_device": 1, "within": 1, "to_host": 1}
    c2 = nd.empty((6,), "float32").copyfrom(d)  # straight into the CPU array's memory
    assert c2.numpy().tolist() == x.tolist() and ext_dev.counts["to_host"] == 2
    d.copyfrom(nd.array(x * 2))  # CPU NDArray to the device
    assert ext_dev.counts["to_device"] == 2 and d.numpy().tolist() == (x * 2).tolist()
    i = nd.empty((6,), "int32", DEV).copyfrom(d)  # another dtype: converted on the host
    assert i.numpy().tolist() == [0, 2, 4, 6, 8, 10]
    assert nd.array(d, DEV).handle != d.handle and nd.array(d, "cpu", dtype="int8").dtype == "int8"
    with pytest.raises(loom.LoomValueError, match=r"array of shape \(6,\) cannot take data of shape \(5,\)"):
        d.copyfrom(np.zeros(5))
    with pytest.raises(loom.LoomValueError, match=r"array of shape \(6,\) cannot take data of shape \(3,\)"):
        d.copyfrom(nd.empty((3,), "float32", DEV))


def test_strided_device_arrays_copy_their_span(ext_dev):
    base = nd.array(np.arange(12, dtype="int32"), DEV)
    view = NDArray(base.handle, (2, 2), "int32", DEV, strides=(6, 2), byte_offset=4, owner=base)
    assert view.numpy().tolist() == [[1, 3], [7, 9]]
    view.copyfrom(np.array([[-1, -3], [-7, -9]]))
    assert base.numpy().tolist() == [0, -1, 2, -3, 4, 5, 6, -7, 8, -9, 10, 11]
    back = NDArray(base.handle, (3,), "int32", DEV, strides=(-2,), byte_offset=40, owner=base)
    assert back.numpy().tolist() == [10, 8, 6]
    assert view.copyto(DEV).numpy().tolist() == [[-1, -3], [-7, -9]]


def test_device_arrays_are_never_read_as_host_memory(ext_dev):
    a = nd.array(np.ones(3, "float32"), DEV)
    for convert in (np.asarray, np.array, lambda x: np.add(x, 1)):
        with pytest.raises(loom.LoomTypeError, match=r"on ext_dev\(0\), whose memory is not host memory; call "
                                                     r"\.numpy\(\)"):
            convert(a)
    counts = dict(ext_dev.counts)
    assert repr(a) == "<loom.nd.NDArray shape=(3,) dtype=float32 device=ext_dev(0)>"
    assert dict(ext_dev.counts) == counts, "repr read device memory"


def test_empty_arrays_on_a_device(ext_dev):
    a = nd.array(np.zeros((2, 0), "float32"), DEV)
    assert a.numpy().shape == (2, 0) and a.copyto(DEV).shape == (2, 0)
    assert ext_dev.copies() == {}
