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
An array of vector elements (``nd.empty((n,), "float32x4")``, as in TVM) has
its dtype's shape, while its data shows the lanes as a trailing axis:
``numpy()`` gives a ``float32`` array of shape ``(n, 4)``.
An array may be read-only (:attr:`NDArray.readonly`: a read-only numpy array
wrapped by :func:`from_dlpack`, or a DLPack 1.0 tensor flagged read-only): it
cannot be written by ``copyfrom`` nor passed where a function writes.

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
from .host_memory import (
    ALLOC_ALIGNMENT, Allocation, aligned_empty, compact_strides, host_view, is_compact, span, typed_view,
)

__all__ = ["NDArray", "array", "empty", "from_dlpack", "aligned_empty", "ALLOC_ALIGNMENT"]

_CPU = 1
_CPU0 = cpu(0)  # Devices are frozen values: one is enough


def _dtypes(dtype: Any) -> tuple[str, np.dtype]:
    """The Loom dtype string and numpy dtype of an element dtype."""
    try:
        t = DataType.of(dtype)
    except Exception as err:  # DataType.of raises for unknown names; keep the loom error type
        raise LoomTypeError(f"unknown dtype {dtype!r}: {err}") from None
    if t.lanes != 1:
        # A vector element is a numpy sub-array dtype: numpy shows it as a trailing axis of lanes.
        return str(t), np.dtype((t.element_of().numpy(), (t.lanes,)))
    return str(t), t.numpy()


def _as_device(dev: Any) -> Device:
    if dev is None:
        return _CPU0
    if isinstance(dev, Device):
        return dev
    if isinstance(dev, tuple) and len(dev) == 2:
        return Device(*dev)
    return Device(dev)


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
    :param readonly: the memory must not be written (a DLPack producer said so, or it is constant).

    >>> import numpy as np
    >>> from loom.runtime import nd
    >>> b = nd.empty((2,), "int32")
    >>> b.copyfrom(np.array([4, 5], dtype="int32")).numpy()
    array([4, 5], dtype=int32)
    >>> b.data_ptr % nd.ALLOC_ALIGNMENT, b.nbytes
    (0, 8)
    """

    __slots__ = ("_handle", "_shape", "_strides", "_dtype", "_npdtype", "_device", "_byte_offset", "_owner",
                 "_data", "_ptr", "_readonly", "__weakref__")

    def __init__(self, handle: int, shape: Sequence[int], dtype: Any, device: Any,
                 strides: Sequence[int] | None = None, byte_offset: int = 0, owner: Any = None,
                 readonly: bool = False) -> None:
        self._device = _as_device(device)
        self._shape = tuple(int(n) for n in shape)
        if any(n < 0 for n in self._shape):
            raise LoomValueError(f"NDArray: shape must be non-negative, got {self._shape}")
        self._dtype, self._npdtype = _dtypes(dtype)
        if strides is not None:
            strides = tuple(int(s) for s in strides)
            if len(strides) != len(self._shape):
                raise LoomValueError(f"NDArray: {len(strides)} strides for shape {self._shape}")
            if is_compact(self._shape, strides):
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
        #: Whether the memory is read-only (for a CPU array, its numpy view says so too).
        self._readonly = bool(readonly)
        self._data: np.ndarray | None = None
        if self._device.device_type == _CPU:
            self._data = host_view(self._ptr, self._shape, self._npdtype, strides, owner, self._readonly)

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
        self._readonly = not arr.flags.writeable
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
        return self._strides if self._strides is not None else compact_strides(self._shape)

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
    def readonly(self) -> bool:
        """Whether the memory must not be written (a CPU array: its numpy view is not writeable).

        >>> import numpy as np
        >>> from loom.runtime import nd
        >>> x = np.zeros(2); x.flags.writeable = False
        >>> nd.from_dlpack(x).readonly, nd.array(x).readonly
        (True, False)
        """
        data = self._data
        return self._readonly if data is None else not data.flags.writeable

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
        lo, hi = span(self._shape, self.strides)
        flat = np.empty(hi - lo, npd)
        api.copy_to_host(flat, self._ptr + lo * item, self._device)
        return flat, typed_view(flat, self._shape, npd, -lo * item, self.strides), lo

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

    def asnumpy(self) -> np.ndarray:
        """:meth:`numpy`, by TVM's older name.

        >>> from loom.runtime import nd
        >>> nd.array([1.5]).asnumpy()
        array([1.5])
        """
        return self.numpy()

    def copyfrom(self, source: Any) -> NDArray:
        """Overwrite the contents with ``source`` (same shape; converted to this dtype); return self.

        ``source`` is a numpy array (or anything ``numpy.asarray`` takes), an
        NDArray on any device, or a DLPack object on any device.  Arrays on one
        device copy within it; across devices the data passes through the host.

        :raises LoomValueError: when this array is read-only, or shapes differ.
        :raises LoomTypeError: when ``source``'s elements do not convert to this dtype.
        """
        if self.readonly:
            raise LoomValueError(f"copyfrom: this {self._dtype} array of shape {self._shape} on {self._device} "
                                 "is read-only")
        if not isinstance(source, NDArray) and _off_host(source):
            source = from_dlpack(source)
        if isinstance(source, NDArray):
            self._check_shape(source._shape + source._npdtype.shape)
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
        src = _as_numpy(source, "copyfrom")
        self._check_shape(src.shape)
        return self._write_host(src)

    def _check_shape(self, shape: tuple[int, ...]) -> None:
        lanes = self._npdtype.shape  # a vector dtype's data has a trailing axis of its lanes
        if shape != self._shape + lanes:
            takes = f" (it takes shape {self._shape + lanes})" if lanes else ""
            raise LoomValueError(f"copyfrom: {self._dtype} array of shape {self._shape} cannot take data of "
                                 f"shape {shape}{takes}")

    def _write_host(self, src: np.ndarray) -> NDArray:
        if src.dtype != self._npdtype.base:
            src = _converted(src, self._npdtype.base, "copyfrom")
        if self._data is not None:
            np.copyto(self._data, src)
            return self
        if src.size == 0:
            return self
        api = self._api()
        if self._strides is None:
            api.copy_from_host(self._ptr, self._device, np.ascontiguousarray(src))
            return self
        # Only the span can be copied: read it, write the elements, write it back.
        flat, view, lo = self._staged(api)
        np.copyto(view, src)
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
        """A DLPack capsule of this array (numpy's for CPU arrays, :func:`loom.runtime.dlpack.to_capsule` else).

        With ``max_version`` of 1.0 or later the capsule is a versioned one, which
        can say the array is read-only; a read-only array refuses a legacy capsule.
        """
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
        versioned = max_version is not None and int(tuple(max_version)[0]) >= 1
        return to_capsule(self.copyto(self._device) if copy else self, versioned=versioned)

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
    return NDArray(address, shape, name, dev, owner=Allocation(api, dev, address))


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
        src = _as_numpy(source, "loom.nd.array")
    if dtype is None:
        try:
            dtype = _dtypes(src.dtype)[0]
        except LoomTypeError:
            raise LoomTypeError(f"loom.nd.array: the source holds numpy dtype {src.dtype}, which has no Loom "
                                "dtype; pass dtype=... to convert its elements") from None
    else:
        dtype, npd = _dtypes(dtype)
        if src.dtype != npd.base:
            src = _converted(src, npd.base, "loom.nd.array")
        lanes = npd.shape
        if lanes:  # vector elements: the trailing axis holds the lanes
            if src.shape[-1:] != lanes:
                raise LoomValueError(f"loom.nd.array: {dtype} elements need a trailing axis of {lanes[0]} lanes, "
                                     f"got data of shape {src.shape}")
            return empty(src.shape[:-1], dtype, dev).copyfrom(src)
    return empty(src.shape, dtype, dev).copyfrom(src)


def _as_numpy(source: Any, where: str) -> np.ndarray:
    """``numpy.asarray(source)``; a LoomValueError for what numpy cannot make one array of (ragged lists)."""
    try:
        return np.asarray(source)
    except (ValueError, TypeError) as err:
        raise LoomValueError(f"{where}: cannot make an array of the {type(source).__name__}: {err}") from None


def _converted(src: np.ndarray, npd: np.dtype, where: str) -> np.ndarray:
    """``src``'s elements as ``npd`` (numpy's unsafe cast); a LoomTypeError naming both dtypes when they do not convert."""
    try:
        return src.astype(npd)
    except (ValueError, TypeError, OverflowError) as err:
        raise LoomTypeError(f"{where}: cannot convert elements of numpy dtype {src.dtype} to "
                            f"{DataType.of(npd)}: {err}") from None


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
    try:  # a versioned capsule can say the memory is read-only; producers older than DLPack 1.0 take no max_version
        capsule = obj.__dlpack__(stream=None, max_version=(1, 0))
    except TypeError:
        capsule = obj.__dlpack__(stream=None)
    return from_capsule(capsule)
