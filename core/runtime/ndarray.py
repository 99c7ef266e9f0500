"""``loom.nd``: device-generic arrays that runtime Modules take, exchanged through DLPack.

An :class:`NDArray` is a descriptor, as DLPack's ``DLTensor``: a data address
(``handle``), a ``byte_offset``, shape, strides (in elements), dtype and device,
plus an *owner* keeping the memory alive.  The memory belongs to the device API
of the device's type (:func:`loom.runtime.device_api.get_device_api`): arrays
allocate through it (64-byte aligned, :data:`ALLOC_ALIGNMENT`, the alignment
every buffer assumes by default, so passing one to a built function never needs
an aligned copy) and copy through it.  Device memory is never read as host
memory by accident: only ``.numpy()`` and ``.copyto()`` move it, and
``numpy.asarray`` refuses an array that is not on the CPU.

A CPU array also keeps a numpy view of its memory, which is what calls use.

>>> import numpy as np
>>> from loom.runtime import nd
>>> a = nd.array(np.arange(6, dtype="float32").reshape(2, 3))
>>> a.shape, a.dtype, a.device, a.strides
((2, 3), 'float32', cpu(0), (3, 1))
>>> np.from_dlpack(a).sum()
np.float32(15.0)
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..errors import LoomTypeError, LoomValueError
from ..ir.dtype import DataType
from ..target.devices import Device, cpu
from .device_api import DeviceAPI, get_device_api

__all__ = ["NDArray", "array", "empty", "from_dlpack", "aligned_empty", "ALLOC_ALIGNMENT"]

#: Byte alignment of every allocation made by ``loom.nd``.
ALLOC_ALIGNMENT = 64

_CPU = 1
_CPU0 = cpu(0)  # Devices are frozen values: one is enough


def aligned_empty(shape: Sequence[int], dtype: Any, alignment: int = ALLOC_ALIGNMENT) -> np.ndarray:
    """An uninitialised C-contiguous numpy array whose data pointer is a multiple of ``alignment``.

    >>> aligned_empty((3, 5), "float64", 256).ctypes.data % 256
    0
    """
    npd = np.dtype(dtype)
    shape = tuple(int(n) for n in shape)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    nbytes = count * npd.itemsize
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    if nbytes == 0:  # numpy gives empty buffers a placeholder pointer; keep the aligned one
        return np.ndarray(shape, npd, buffer=raw, offset=start)
    # Through a memoryview the result is its own root array (its ``base`` is no
    # ndarray), so views of it report element offsets from the aligned start.
    flat = np.frombuffer(memoryview(raw[start:start + nbytes]), dtype=npd)
    return flat.reshape(shape)


def _dtypes(dtype: Any) -> tuple[str, np.dtype]:
    """The Loom dtype string and numpy dtype of an element dtype."""
    try:
        t = DataType.of(dtype)
    except Exception as err:  # DataType.of raises for unknown names; keep the loom error type
        raise LoomTypeError(f"unknown dtype {dtype!r}: {err}") from None
    if t.lanes != 1:
        raise LoomTypeError(f"arrays hold scalar elements, not {t} vectors")
    return str(t), t.numpy()


def _as_device(dev: Any) -> Device:
    if dev is None:
        return _CPU0
    if isinstance(dev, Device):
        return dev
    if isinstance(dev, tuple) and len(dev) == 2:
        return Device(*dev)
    return Device(dev)


def _compact_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _is_compact(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Row-major compact, by numpy's rule: strides of extent-1 axes (and of empty arrays) do not matter."""
    if 0 in shape:
        return True
    step = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def _span(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int]:
    """Element offsets (from the data pointer) of the first element reached and one past the last."""
    if 0 in shape:
        return 0, 0
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return lo, hi + 1


class _HostMemory:
    """Host bytes at an address, as numpy sees them; keeps the memory's owner alive as long as any view lives."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address: int, nbytes: int, owner: Any) -> None:
        # Through the array interface rather than a ctypes array: ctypes caches one type per length, forever.
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}
        self.owner = owner


def _host_view(ptr: int, shape: tuple[int, ...], npd: np.dtype, strides: tuple[int, ...] | None,
               owner: Any) -> np.ndarray:
    """A numpy view of host memory at ``ptr`` that keeps ``owner`` alive as long as any view of it lives."""
    item = npd.itemsize
    lo, hi = _span(shape, strides or _compact_strides(shape))
    raw = np.asarray(_HostMemory(ptr + lo * item, (hi - lo) * item, owner))
    if strides is None:
        return raw.view(npd).reshape(shape)
    return np.ndarray(shape, npd, buffer=raw, offset=-lo * item, strides=tuple(s * item for s in strides))


class _Allocation:
    """The owner of memory allocated through a device API: frees it when collected."""

    __slots__ = ("api", "device", "address", "__weakref__")

    def __init__(self, api: DeviceAPI, device: Device, address: int) -> None:
        self.api, self.device, self.address = api, device, address

    def __del__(self) -> None:
        self.api.free(self.device, self.address)


class NDArray:
    """An n-dimensional array on a device: a descriptor of memory its device API owns.

    Built by :func:`array`, :func:`empty` or :func:`from_dlpack`; backends may
    also describe memory of their device directly.

    :param handle: the address of the memory (as the device API names it).
    :param shape: the extents.
    :param dtype: the element dtype (a Loom dtype string or a numpy dtype).
    :param device: the device holding the memory.
    :param strides: the strides in elements; None (or the compact strides) for row-major compact.
    :param byte_offset: where element 0 lies, in bytes from ``handle``.
    :param owner: any object keeping the memory alive as long as the array (and its views) live.

    >>> import numpy as np
    >>> from loom.runtime import nd
    >>> b = nd.empty((2,), "int32")
    >>> b.copyfrom(np.array([4, 5], dtype="int32")).numpy()
    array([4, 5], dtype=int32)
    >>> b.data_ptr % nd.ALLOC_ALIGNMENT, b.nbytes
    (0, 8)
    """

    __slots__ = ("_handle", "_shape", "_strides", "_dtype", "_npdtype", "_device", "_byte_offset", "_owner",
                 "_data", "_ptr", "__weakref__")

    def __init__(self, handle: int, shape: Sequence[int], dtype: Any, device: Any,
                 strides: Sequence[int] | None = None, byte_offset: int = 0, owner: Any = None) -> None:
        self._device = _as_device(device)
        self._shape = tuple(int(n) for n in shape)
        if any(n < 0 for n in self._shape):
            raise LoomValueError(f"NDArray: shape must be non-negative, got {self._shape}")
        self._dtype, self._npdtype = _dtypes(dtype)
        if strides is not None:
            strides = tuple(int(s) for s in strides)
            if len(strides) != len(self._shape):
                raise LoomValueError(f"NDArray: {len(strides)} strides for shape {self._shape}")
            if _is_compact(self._shape, strides):
                strides = None
        self._strides: tuple[int, ...] | None = strides
        self._handle = int(handle or 0)
        self._byte_offset = int(byte_offset)
        if self._byte_offset < 0:
            raise LoomValueError(f"NDArray: byte_offset must be non-negative, got {self._byte_offset}")
        if not self._handle and 0 not in self._shape:
            raise LoomValueError(f"NDArray: a null data address for an array of shape {self._shape}")
        self._owner = owner
        #: The data pointer, cached: calls read it every time.
        self._ptr = self._handle + self._byte_offset
        self._data: np.ndarray | None = None
        if self._device.device_type == _CPU:
            self._data = _host_view(self._ptr, self._shape, self._npdtype, strides, owner)

    @classmethod
    def _wrap_numpy(cls, arr: np.ndarray, device: Device | None = None) -> NDArray:
        """A CPU array over a numpy array's memory (shared; the numpy array is the owner)."""
        self = cls.__new__(cls)
        self._device = device or _CPU0
        self._dtype, self._npdtype = str(DataType.of(arr.dtype)), arr.dtype
        self._shape = arr.shape
        self._strides = None
        if not arr.flags.c_contiguous:
            item = arr.itemsize
            if any(s % item for s in arr.strides):
                raise LoomValueError(f"array strides {arr.strides} (bytes) are not whole elements of {item} bytes")
            self._strides = tuple(s // item for s in arr.strides)
        self._handle = self._ptr = arr.ctypes.data
        self._byte_offset = 0
        self._owner = self._data = arr
        return self

    # -- description ---------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> str:
        """The element dtype as a Loom dtype string (``"float32"``)."""
        return self._dtype

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def strides(self) -> tuple[int, ...]:
        """The strides in elements (computed for a compact array)."""
        return self._strides if self._strides is not None else _compact_strides(self._shape)

    @property
    def is_compact(self) -> bool:
        """Whether the elements are row-major and contiguous."""
        return self._strides is None

    @property
    def handle(self) -> int:
        """The address of the memory (element 0 lies ``byte_offset`` bytes after it)."""
        return self._handle

    @property
    def byte_offset(self) -> int:
        return self._byte_offset

    @property
    def data_ptr(self) -> int:
        """The address of element 0: ``handle + byte_offset``."""
        return self._ptr

    @property
    def nbytes(self) -> int:
        """The bytes of the elements (not of the span a strided array reaches)."""
        return self.size * self._npdtype.itemsize

    # -- data ------------------------------------------------------------------
    def _api(self) -> DeviceAPI:
        return get_device_api(self._device.device_type)

    def _staged(self, api: DeviceAPI) -> tuple[np.ndarray, np.ndarray, int]:
        """A host copy of the span of a strided device array: (flat copy, strided view of it, first element)."""
        npd, item = self._npdtype, self._npdtype.itemsize
        lo, hi = _span(self._shape, self.strides)
        flat = np.empty(hi - lo, npd)
        api.copy_to_host(flat, self._ptr + lo * item, self._device)
        view = np.ndarray(self._shape, npd, buffer=flat, offset=-lo * item,
                          strides=tuple(s * item for s in self.strides))
        return flat, view, lo

    def numpy(self) -> np.ndarray:
        """A numpy copy of the contents (device memory is copied to the host through its device API)."""
        if self._data is not None:
            return np.array(self._data, copy=True)
        out = np.empty(self._shape, self._npdtype)
        if out.size == 0:
            return out
        api = self._api()
        if self._strides is None:
            api.copy_to_host(out, self._ptr, self._device)
        else:
            out[...] = self._staged(api)[1]
        return out

    def copyfrom(self, source: Any) -> NDArray:
        """Overwrite the contents with ``source`` (same shape; converted to this dtype); return self.

        ``source`` is a numpy array (or anything ``numpy.asarray`` takes), an
        NDArray on any device, or a DLPack object on any device.  Arrays on one
        device copy within it; across devices the data passes through the host.
        """
        if not isinstance(source, NDArray) and _off_host(source):
            source = from_dlpack(source)
        if isinstance(source, NDArray):
            self._check_shape(source._shape)
            if source._data is None:
                if not source.size:
                    return self
                if source._device == self._device and source._dtype == self._dtype and \
                        source._strides is None and self._strides is None:
                    self._api().copy_within(self._ptr, source._ptr, self.nbytes, self._device)
                    return self
                if self._data is not None and self._data.flags.c_contiguous and source._strides is None and \
                        source._dtype == self._dtype:
                    source._api().copy_to_host(self._data, source._ptr, source._device)
                    return self
                return self._write_host(source.numpy())
            return self._write_host(source._data)
        src = np.asarray(source)
        self._check_shape(src.shape)
        return self._write_host(src)

    def _check_shape(self, shape: tuple[int, ...]) -> None:
        if shape != self._shape:
            raise LoomValueError(f"copyfrom: array of shape {self._shape} cannot take data of shape {shape}")

    def _write_host(self, src: np.ndarray) -> NDArray:
        if self._data is not None:
            np.copyto(self._data, src, casting="unsafe")
            return self
        if src.size == 0:
            return self
        api = self._api()
        if self._strides is None:
            api.copy_from_host(self._ptr, self._device, np.asarray(src, dtype=self._npdtype, order="C"))
            return self
        # Only the span can be copied: read it, write the elements, write it back.
        flat, view, lo = self._staged(api)
        np.copyto(view, src, casting="unsafe")
        api.copy_from_host(self._ptr + lo * self._npdtype.itemsize, self._device, flat)
        return self

    def copyto(self, target: Any) -> NDArray:
        """Copy into another NDArray (returned), or to a device (returning the new compact array).

        >>> from loom.runtime import nd
        >>> nd.array([1, 2], dtype="int8").copyto("cpu").numpy()
        array([1, 2], dtype=int8)
        """
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        return empty(self._shape, self._dtype, target).copyfrom(self)

    # -- DLPack ------------------------------------------------------------------
    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """A DLPack capsule of this array (numpy's for CPU arrays, :func:`loom.runtime.dlpack.to_capsule` else)."""
        if self._data is not None:
            kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device), ("copy", copy))
                      if v is not None}
            return self._data.__dlpack__(stream=stream, **kwargs)
        from .dlpack import to_capsule  # dlpack imports this module: import on use

        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cannot export an array on {self._device} to device {tuple(dl_device)}; copy it "
                              "with .copyto() first")
        if stream != -1:  # -1: the consumer asks for no synchronization
            api = _api_or_none(self._device)
            if api is not None:
                api.synchronize(self._device)
        return to_capsule(self.copyto(self._device) if copy else self)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._device.device_type, self._device.device_id)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = self._data
        if data is None:
            raise LoomTypeError(f"this array is on {self._device}, whose memory is not host memory; call "
                                ".numpy() for a host copy")
        if copy:
            return np.array(data, dtype=dtype, copy=True)
        return data if dtype is None else data.astype(dtype, copy=False)

    def __repr__(self) -> str:
        head = f"<loom.nd.NDArray shape={self._shape} dtype={self._dtype} device={self._device}>"
        return head if self._data is None else f"{head}\n{self._data!r}"


def _api_or_none(dev: Device) -> DeviceAPI | None:
    try:
        return get_device_api(dev.device_type)
    except LoomValueError:  # memory imported from a device no installed plugin serves
        return None


def _off_host(obj: Any) -> bool:
    """Whether ``obj`` is a DLPack object whose memory is not on the CPU."""
    dev = getattr(obj, "__dlpack_device__", None)
    return dev is not None and not isinstance(obj, np.ndarray) and int(dev()[0]) != _CPU


def empty(shape: Sequence[int] | int, dtype: Any = "float32", dev: Any = None) -> NDArray:
    """An uninitialised compact array of ``shape`` and ``dtype`` on ``dev`` (default ``cpu(0)``).

    >>> from loom.runtime import nd
    >>> nd.empty((4, 4), "float16").shape
    (4, 4)
    """
    dev = _as_device(dev)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(not isinstance(n, (int, np.integer)) or n < 0 for n in shape):
        raise LoomValueError(f"empty: shape must be non-negative integers, got {shape}")
    name, npd = _dtypes(dtype)
    api = get_device_api(dev.device_type)
    address = api.allocate(dev, math.prod(shape) * npd.itemsize, ALLOC_ALIGNMENT)
    return NDArray(address, shape, name, dev, owner=_Allocation(api, dev, address))


def array(source: Any, dev: Any = None, dtype: Any = None) -> NDArray:
    """Copy ``source`` to ``dev``: numpy, an NDArray or DLPack object on any device, or what ``numpy.asarray`` takes.

    >>> import numpy as np
    >>> from loom.runtime import nd
    >>> nd.array([[1, 2]], dtype="int8").numpy()
    array([[1, 2]], dtype=int8)
    """
    dev = _as_device(dev)
    if not isinstance(source, NDArray) and _off_host(source):
        source = from_dlpack(source)
    if isinstance(source, NDArray):
        if dtype is None or _dtypes(dtype)[0] == source._dtype:
            return source.copyto(dev)
        src = source.numpy()
    else:
        src = np.asarray(source)
    if dtype is not None:
        src = src.astype(_dtypes(dtype)[1], copy=False)
    return empty(src.shape, src.dtype, dev).copyfrom(src)


def from_dlpack(obj: Any) -> NDArray:
    """Wrap a DLPack array (numpy, torch, cupy, a capsule...) on its own device, without copying it.

    >>> import numpy as np
    >>> from loom.runtime import nd
    >>> x = np.zeros(3, dtype="float32")
    >>> a = nd.from_dlpack(x); x[1] = 7.0
    >>> a.numpy()
    array([0., 7., 0.], dtype=float32)
    """
    from .dlpack import from_capsule  # dlpack imports this module: import on use

    if isinstance(obj, NDArray):
        return obj
    if type(obj).__name__ == "PyCapsule":
        return from_capsule(obj)
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise LoomTypeError(f"from_dlpack needs an object with __dlpack__ and __dlpack_device__, "
                            f"got {type(obj).__name__}")
    dev_type, dev_id = obj.__dlpack_device__()
    if int(dev_type) == _CPU:
        return NDArray._wrap_numpy(np.from_dlpack(obj), Device(_CPU, int(dev_id)))
    return from_capsule(obj.__dlpack__(stream=None))
