"""Host memory behind ``loom.nd`` arrays: aligned allocation, layout arithmetic, numpy views of addresses.

An array's memory is an address plus an owner that keeps it alive; these
helpers turn that into numpy views without copying, allocate aligned host
buffers, and compute what a shape and strides (in elements) reach.

>>> span((2, 3), (3, 1)), is_compact((2, 3), (3, 1)), compact_strides((2, 3))
((0, 6), True, (3, 1))
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..target.devices import Device
from .device_api import DeviceAPI

__all__ = ["ALLOC_ALIGNMENT", "Allocation", "aligned_empty", "compact_strides", "host_view", "is_compact", "span",
           "typed_view"]

#: Byte alignment of every allocation made by ``loom.nd``.
ALLOC_ALIGNMENT = 64


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
    flat = np.frombuffer(raw[start:start + nbytes].data, dtype=npd)
    return flat.reshape(shape)


def compact_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def is_compact(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Row-major compact, by numpy's rule: strides of extent-1 axes (and of empty arrays) do not matter."""
    if 0 in shape:
        return True
    step = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def span(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int]:
    """Element offsets (from the data pointer) of the first element reached and one past the last."""
    if 0 in shape:
        return 0, 0
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return lo, hi + 1


class _HostMemory:
    """Host bytes at an address, as numpy sees them; keeps the memory's owner alive as long as any view lives."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address: int, nbytes: int, owner: Any, readonly: bool = False) -> None:
        # Through the array interface rather than a ctypes array: ctypes caches one type per length, forever.
        self.__array_interface__ = {"data": (address, readonly), "shape": (nbytes,), "typestr": "|u1",
                                    "version": 3}
        self.owner = owner


def host_view(ptr: int, shape: tuple[int, ...], npd: np.dtype, strides: tuple[int, ...] | None,
               owner: Any, readonly: bool = False) -> np.ndarray:
    """A numpy view of host memory at ``ptr`` that keeps ``owner`` alive as long as any view of it lives."""
    item = npd.itemsize
    lo, hi = span(shape, strides or compact_strides(shape))
    if hi == lo and not ptr:  # no element at a null address: numpy before 2.3 refuses to map it
        empty = np.empty(shape, npd)
        empty.flags.writeable = not readonly
        return empty
    raw = np.asarray(_HostMemory(ptr + lo * item, (hi - lo) * item, owner, readonly))
    return typed_view(raw, shape, npd, -lo * item, strides)


def typed_view(raw: np.ndarray, shape: tuple[int, ...], npd: np.dtype, offset: int,
               strides: tuple[int, ...] | None) -> np.ndarray:
    """A view of the bytes ``raw`` as elements ``npd`` laid out by ``shape`` and ``strides`` (in elements).

    A vector dtype (``npd`` a numpy sub-array dtype, ``float32x4`` being
    ``(float32, (4,))``) becomes trailing axes of its element dtype: a
    ``float32x4`` array of shape ``(n,)`` is viewed as ``float32`` of shape ``(n, 4)``.
    """
    item, base, lanes = npd.itemsize, npd.base, npd.shape
    if strides is None:
        if not lanes and offset == 0:
            return raw.view(npd).reshape(shape)
        strides = compact_strides(shape)
    inner = compact_strides(lanes)
    return np.ndarray(shape + lanes, base, buffer=raw, offset=offset,
                      strides=tuple(s * item for s in strides) + tuple(s * base.itemsize for s in inner))


class Allocation:
    """The owner of memory allocated through a device API: frees it when collected."""

    __slots__ = ("api", "device", "address", "__weakref__")

    def __init__(self, api: DeviceAPI, device: Device, address: int) -> None:
        self.api, self.device, self.address = api, device, address

    def __del__(self) -> None:
        self.api.free(self.device, self.address)
