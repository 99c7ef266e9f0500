"""DLPack capsules both ways: against numpy on the CPU, and through our own functions on a fake device."""

from __future__ import annotations

import ctypes
import gc
import sys
import weakref

import numpy as np
import pytest

import loom
from loom.runtime import NDArray, nd
from loom.runtime.dlpack import DLDataType, DLDevice, DLManagedTensor, dl_dtype, from_capsule, loom_dtype, to_capsule

from fake_device import DEV, CapsuleHolder, DLPackObject, ext_dev  # noqa: F401  (ext_dev is a fixture)


def _alive(ref: weakref.ref) -> bool:
    gc.collect()
    return ref() is not None


# -- numpy's capsules into Loom ----------------------------------------------------------------------

NUMPY_VIEWS = {
    "compact": lambda x: x,
    "strided": lambda x: x[:, ::2],
    "offset": lambda x: x[1:, 1:],
    "transposed": lambda x: x.T,
    "reversed": lambda x: x[::-1],
    "scalar": lambda x: x[1, 2, ...],
    "empty": lambda x: x[:0],
}


@pytest.mark.parametrize("view", NUMPY_VIEWS, ids=list(NUMPY_VIEWS))
def test_numpy_capsules_become_arrays_sharing_memory(view):
    x = np.arange(24, dtype="float32").reshape(4, 6)
    v = NUMPY_VIEWS[view](x)
    a = from_capsule(v.__dlpack__())
    assert (a.shape, a.dtype, a.device) == (v.shape, "float32", loom.cpu(0))
    assert a.strides == tuple(s // 4 for s in v.strides) or a.is_compact
    np.testing.assert_array_equal(a.numpy(), v)
    if v.size:
        assert a.data_ptr == v.ctypes.data
        v[...] = -1
        assert (a.numpy() == -1).all()


def test_numpy_memory_is_released_when_the_array_goes():
    x = np.arange(6, dtype="int64")
    base = sys.getrefcount(x)
    a = from_capsule(x[2:].__dlpack__())
    view = np.asarray(a)
    assert sys.getrefcount(x) > base
    del a
    gc.collect()
    assert sys.getrefcount(x) > base and view.tolist() == [2, 3, 4, 5], "a view keeps the memory"
    del view
    gc.collect()
    assert sys.getrefcount(x) == base, "the producer's deleter was not called"


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "uint64", "float16", "float64"])
def test_numpy_dtypes(dtype):
    x = np.arange(4).astype(dtype)
    a = from_capsule(x.__dlpack__())
    assert a.dtype == dtype
    np.testing.assert_array_equal(a.numpy(), x)


def test_capsules_are_consumed_once_and_other_kinds_refused():
    cap = np.zeros(2).__dlpack__()
    from_capsule(cap)
    with pytest.raises(loom.LoomValueError, match="already consumed"):
        from_capsule(cap)
    versioned = np.ones(2).__dlpack__(max_version=(1, 0))
    assert from_capsule(versioned).numpy().tolist() == [1.0, 1.0]
    with pytest.raises(loom.LoomValueError, match="already consumed"):
        from_capsule(versioned)
    new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
        ("PyCapsule_New", ctypes.pythonapi))
    with pytest.raises(loom.LoomTypeError, match="named b'other'"):
        from_capsule(new(ctypes.addressof(ctypes.c_int(0)), b"other", None))
    with pytest.raises(loom.LoomTypeError, match="needs a DLPack PyCapsule, got list"):
        from_capsule([1])
    assert nd.from_dlpack(np.ones(2).__dlpack__()).numpy().tolist() == [1.0, 1.0]


def test_a_minimal_producer_without_strides_or_deleter():
    """NULL strides mean compact; a NULL deleter is simply not called."""
    x = np.arange(6, dtype="float32")
    shape = (ctypes.c_int64 * 2)(2, 2)
    managed = DLManagedTensor()
    t = managed.dl_tensor
    t.data, t.device, t.ndim, t.dtype = x.ctypes.data, DLDevice(1, 0), 2, DLDataType(2, 32, 1)
    t.shape, t.byte_offset = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)), 8
    new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
        ("PyCapsule_New", ctypes.pythonapi))
    a = from_capsule(new(ctypes.addressof(managed), b"dltensor", None))
    assert (a.shape, a.is_compact, a.byte_offset) == ((2, 2), True, 8)
    assert a.numpy().tolist() == [[2, 3], [4, 5]]
    del a
    gc.collect()
    assert x.sum() == 15


# -- Loom's capsules into numpy -------------------------------------------------------------------------


def _cpu_views(base: NDArray) -> dict[str, NDArray]:
    h = base.handle
    return {
        "compact": base,
        "strided": NDArray(h, (3, 2), "int32", "cpu", strides=(4, 2), owner=base),
        "byte-offset": NDArray(h, (2, 3), "int32", "cpu", strides=(4, 1), byte_offset=8, owner=base),
        "both": NDArray(h, (2, 2), "int32", "cpu", strides=(6, 3), byte_offset=4, owner=base),
    }


@pytest.mark.parametrize("kind", ["compact", "strided", "byte-offset", "both"])
def test_our_capsules_become_numpy_arrays_sharing_memory(kind):
    base = nd.array(np.arange(12, dtype="int32").reshape(3, 4))
    a = _cpu_views(base)[kind]
    x = np.from_dlpack(CapsuleHolder(to_capsule(a), (1, 0)))
    np.testing.assert_array_equal(x, a.numpy())
    assert x.ctypes.data == a.data_ptr
    a.copyfrom(-a.numpy())
    np.testing.assert_array_equal(x, a.numpy())
    ref = weakref.ref(a)
    del base, a
    assert _alive(ref), "numpy's array keeps the exported array alive"
    assert x.sum() < 0
    del x
    assert not _alive(ref)


def test_unconsumed_capsules_release_the_array():
    a = nd.empty((3,), "float32")
    cap, ref = to_capsule(a), weakref.ref(a)
    del a
    assert _alive(ref)
    del cap
    assert not _alive(ref)


def test_dropped_while_an_exception_propagates():
    """Deleters run as the consumer's arrays go, here during unwinding: the exception must survive."""
    a = nd.array(np.arange(3, dtype="float32"))
    ref = weakref.ref(a)

    def fails(arr):
        x = np.from_dlpack(CapsuleHolder(to_capsule(arr), (1, 0)))  # noqa: F841  (dropped while unwinding)
        raise KeyError("kept")

    with pytest.raises(KeyError, match="kept"):
        fails(a)
    del a
    assert not _alive(ref)


def test_cpu_arrays_export_through_numpy_and_read_only_ones_refuse_legacy_capsules():
    a = nd.array(np.arange(3, dtype="float32"))
    assert np.from_dlpack(a).ctypes.data == a.data_ptr
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        to_capsule(nd.from_dlpack(ro))


def test_dtype_mapping_round_trips():
    for t in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint32", "float16", "float32", "float64",
              "bfloat16", "handle"]:
        assert loom_dtype(*dl_dtype(t)) == t
    with pytest.raises(loom.LoomTypeError, match=r"code 5, 64 bits, 1 lanes\) has no Loom equivalent"):
        loom_dtype(5, 64)
    assert loom_dtype(*dl_dtype("float32x4")) == "float32x4"
    with pytest.raises(loom.LoomTypeError, match="4 lanes"):
        loom_dtype(6, 8, 4)


def test_vector_dtype_device_arrays_round_trip_through_capsules(ext_dev):
    a = nd.array(np.arange(8, dtype="float32").reshape(4, 2), DEV, dtype="float32x2")
    b = from_capsule(to_capsule(a))
    assert (b.dtype, b.shape, b.handle) == ("float32x2", (4,), a.handle)
    np.testing.assert_array_equal(b.numpy(), np.arange(8).reshape(4, 2))


# -- a device other than the CPU ------------------------------------------------------------------------


def test_device_capsules_round_trip_through_our_functions(ext_dev):
    a = nd.array(np.arange(8, dtype="float32"), DEV)
    view = NDArray(a.handle, (3,), "float32", DEV, strides=(2,), byte_offset=4, owner=a)
    b = from_capsule(to_capsule(view))
    assert (b.device, b.shape, b.strides, b.byte_offset, b.handle) == (DEV, (3,), (2,), 4, a.handle)
    assert b._data is None and b.numpy().tolist() == [1.0, 3.0, 5.0]
    b.copyfrom(np.array([10, 30, 50]))
    assert a.numpy().tolist() == [0, 10, 2, 30, 4, 50, 6, 7]
    del a, view
    assert ext_dev.live() == 1, "the imported array keeps the memory"
    del b
    assert ext_dev.live() == 0


def test_from_dlpack_keeps_the_device_and_shares_memory(ext_dev):
    a = nd.array(np.arange(4, dtype="int32"), DEV)
    producer = DLPackObject(a)
    b = nd.from_dlpack(producer)
    assert b is not a and b.device == DEV and b.data_ptr == a.data_ptr
    assert producer.calls == [{"stream": None, "max_version": (1, 0)}]  # versioned: it can say read-only
    assert nd.from_dlpack(a) is a
    assert ext_dev.copies() == {"to_device": 1}


def test_numpy_refuses_device_capsules_cleanly(ext_dev):
    a = nd.array(np.arange(4, dtype="int32"), DEV)
    with pytest.raises((BufferError, RuntimeError, ValueError)):
        np.from_dlpack(a)
    with pytest.raises((BufferError, RuntimeError, ValueError), match="device"):
        np.from_dlpack(CapsuleHolder(to_capsule(a), (1, 0)))  # a capsule on ext_dev claiming the CPU
    ref = weakref.ref(a)
    del a
    assert not _alive(ref) and ext_dev.live() == 0


def test_device_dlpack_options(ext_dev):
    a = nd.array(np.arange(4, dtype="int32"), DEV)
    ext_dev.counts.clear()
    from_capsule(a.__dlpack__(stream=-1))
    assert ext_dev.counts["sync"] == 0
    c = from_capsule(a.__dlpack__(copy=True, dl_device=(12, 0)))
    assert c.handle != a.handle and c.numpy().tolist() == [0, 1, 2, 3]
    assert ext_dev.counts["sync"] == 1 and ext_dev.counts["within"] == 1
    with pytest.raises(BufferError, match=r"cannot export an array on ext_dev\(0\) to device \(1, 0\)"):
        a.__dlpack__(dl_device=(1, 0))
    assert a.__dlpack_device__() == (12, 0)


def test_foreign_device_arrays_need_no_device_api():
    """A producer on a device no plugin serves (a GPU without its backend) can still be wrapped and described."""
    host = nd.array(np.arange(3, dtype="float32"))
    vulkan = loom.device("vulkan", 0)
    fake_gpu = NDArray(host.handle, (3,), "float32", vulkan, owner=host)
    b = from_capsule(fake_gpu.__dlpack__(stream=None))
    assert b.device == vulkan and b.data_ptr == host.data_ptr
    with pytest.raises(loom.LoomValueError, match="no installed plugin provides memory on vulkan devices"):
        b.numpy()
