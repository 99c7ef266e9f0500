"""``loom.nd``: device arrays that runtime Modules take, exchanged through DLPack.

On the CPU an :class:`NDArray` is a thin wrapper over a numpy array whose data
pointer is aligned to :data:`ALLOC_ALIGNMENT` bytes, the alignment every buffer
assumes by default (``data_alignment=64``), so passing one to a built function
never needs an aligned copy (see :mod:`loom.runtime.arguments`).

Arrays of other devices come from the plugin serving that device type through
the ``loom_device_api`` hook.  Such a device API is an object with
``empty(shape, dtype, device) -> NDArray``, ``from_numpy(array, device) -> NDArray``
and ``from_dlpack(obj) -> NDArray``; without one, a non-CPU device is a clear error.

>>> import numpy as np
>>> from loom.runtime import nd
>>> a = nd.array(np.arange(6, dtype="float32").reshape(2, 3))
>>> a.shape, a.dtype, a.device
((2, 3), 'float32', cpu(0))
>>> np.from_dlpack(a).sum()
np.float32(15.0)
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import LoomTypeError, LoomValueError
from ..ir.dtype import DataType
from ..target.devices import Device, cpu, device_type_name

__all__ = ["NDArray", "array", "empty", "from_dlpack", "aligned_empty", "ALLOC_ALIGNMENT"]

#: Byte alignment of every CPU allocation made by ``loom.nd``.
ALLOC_ALIGNMENT = 64

_CPU = 1


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


def _np_dtype(dtype: Any) -> np.dtype:
    try:
        return DataType.of(dtype).numpy() if not isinstance(dtype, np.dtype) else dtype
    except Exception as err:  # DataType.of raises for unknown names; keep the loom error type
        raise LoomTypeError(f"unknown dtype {dtype!r}: {err}") from None


def _as_device(dev: Any) -> Device:
    if dev is None:
        return cpu(0)
    if isinstance(dev, Device):
        return dev
    if isinstance(dev, tuple) and len(dev) == 2:
        return Device(*dev)
    return Device(dev)


def _device_api(dev: Device) -> Any:
    from loom.plugins import get_plugin_manager  # lazy: the plugin manager imports loom

    api = get_plugin_manager().hook.loom_device_api(device_type=dev.device_type)
    if api is None:
        raise LoomValueError(f"no installed plugin provides arrays on {dev} (device type "
                             f"{device_type_name(dev.device_type)}); install its backend, or use loom.cpu()")
    return api


class NDArray:
    """An n-dimensional array on a device.

    Built by :func:`array`, :func:`empty` or :func:`from_dlpack`, not directly.
    For the CPU the storage is a numpy array (``.numpy()`` copies it out;
    ``np.from_dlpack(a)`` shares it).  Backend device APIs subclass this class
    for their devices, overriding :meth:`numpy`, :meth:`copyfrom` and the
    DLPack methods.

    >>> import numpy as np
    >>> from loom.runtime import nd
    >>> b = nd.empty((2,), "int32")
    >>> b.copyfrom(np.array([4, 5], dtype="int32")).numpy()
    array([4, 5], dtype=int32)
    """

    __slots__ = ("_data", "_device", "_ptr")

    def __init__(self, data: np.ndarray, device: Device) -> None:
        self._data = data
        self._device = device
        # Cached: reading a numpy data pointer costs microseconds, and calls check it every time.
        self._ptr: int = data.ctypes.data if device.device_type == _CPU else 0

    # -- description ---------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> str:
        """The element dtype as a Loom dtype string (``"float32"``)."""
        return str(DataType.of(self._data.dtype))

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return int(self._data.size)

    # -- data ------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A numpy copy of the contents."""
        return np.array(self._data, copy=True)

    def copyfrom(self, source: Any) -> NDArray:
        """Overwrite the contents with ``source`` (same shape; converted to this dtype)."""
        src = source.numpy() if isinstance(source, NDArray) else np.asarray(source)
        if src.shape != self._data.shape:
            raise LoomValueError(f"copyfrom: array of shape {self.shape} cannot take data of shape {src.shape}")
        np.copyto(self._data, src, casting="unsafe")
        return self

    def copyto(self, target: Any) -> NDArray:
        """Copy into another NDArray, or to a device (returning the new array)."""
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        return array(self._data, target)

    # -- DLPack ------------------------------------------------------------------
    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device), ("copy", copy))
                  if v is not None}
        return self._data.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._device.device_type, self._device.device_id)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy:
            return np.array(self._data, dtype=dtype, copy=True)
        return self._data if dtype is None else self._data.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"<loom.nd.NDArray shape={self.shape} dtype={self.dtype} device={self._device}>\n{self._data!r}"


def empty(shape: Sequence[int] | int, dtype: Any = "float32", dev: Any = None) -> NDArray:
    """An uninitialised array of ``shape`` and ``dtype`` on ``dev`` (default ``cpu(0)``).

    >>> from loom.runtime import nd
    >>> nd.empty((4, 4), "float16").shape
    (4, 4)
    """
    dev = _as_device(dev)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(not isinstance(n, (int, np.integer)) or n < 0 for n in shape):
        raise LoomValueError(f"empty: shape must be non-negative integers, got {shape}")
    if dev.device_type != _CPU:
        return _device_api(dev).empty(shape, dtype, dev)
    return NDArray(aligned_empty(shape, _np_dtype(dtype)), dev)


def array(source: Any, dev: Any = None, dtype: Any = None) -> NDArray:
    """Copy ``source`` (a numpy array, an NDArray, or anything ``numpy.asarray`` takes) to ``dev``.

    >>> import numpy as np
    >>> from loom.runtime import nd
    >>> nd.array([[1, 2]], dtype="int8").numpy()
    array([[1, 2]], dtype=int8)
    """
    dev = _as_device(dev)
    src = source.numpy() if isinstance(source, NDArray) else np.asarray(source)
    if dtype is not None:
        src = src.astype(_np_dtype(dtype), copy=False)
    if dev.device_type != _CPU:
        return _device_api(dev).from_numpy(src, dev)
    out = aligned_empty(src.shape, src.dtype)
    np.copyto(out, src)
    return NDArray(out, dev)


def from_dlpack(obj: Any) -> NDArray:
    """Wrap a DLPack-capable array (numpy, torch, cupy...) without copying it.

    >>> import numpy as np
    >>> from loom.runtime import nd
    >>> x = np.zeros(3, dtype="float32")
    >>> a = nd.from_dlpack(x); x[1] = 7.0
    >>> a.numpy()
    array([0., 7., 0.], dtype=float32)
    """
    if isinstance(obj, NDArray):
        return obj
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise LoomTypeError(f"from_dlpack needs an object with __dlpack__ and __dlpack_device__, "
                            f"got {type(obj).__name__}")
    dev_type, dev_id = obj.__dlpack_device__()
    dev = Device(int(dev_type), int(dev_id))
    if dev.device_type != _CPU:
        return _device_api(dev).from_dlpack(obj)
    return NDArray(np.from_dlpack(obj), dev)
