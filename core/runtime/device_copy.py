"""The runtime's own functions that generated host code calls: copies between devices.

A heterogeneous build's host function moves a tensor from one device to
another with a call of :data:`~loom.runtime.abi.DEVICE_COPY_FUNCTION`, through
the same convention as any call to another module (one 64-bit word per
argument, see :mod:`loom.runtime.abi`)::

    loom.device_copy(dst, src, byte_offset, nbytes, dst_type, dst_id, src_type, src_id)

copies ``nbytes`` bytes from ``src + byte_offset`` on device ``(src_type,
src_id)`` to ``dst + byte_offset`` on ``(dst_type, dst_id)`` through the
devices' :class:`~loom.runtime.device_api.DeviceAPI` (through host memory
between two non-CPU devices).  :func:`runtime_services` is the module that
defines it; :func:`~loom.runtime.linking.link` falls back to it for names no
imported module defines, so exported libraries need not embed it.

>>> import numpy as np
>>> src, dst = np.arange(4, dtype="int32"), np.zeros(4, "int32")
>>> runtime_services().call_words("loom.device_copy",
...     [dst.ctypes.data, src.ctypes.data, 4, 8, 1, 0, 1, 0])
>>> dst
array([0, 1, 2, 0], dtype=int32)
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

import numpy as np

from ..errors import LoomValueError
from ..ir import expr as E
from ..ir.function import PrimFunc
from ..ir.stmt import no_op
from ..target.devices import Device
from .abi import DEVICE_COPY_FUNCTION, value_of
from .module import Module

__all__ = ["RuntimeServices", "runtime_services", "device_copy"]


def _host_bytes(address: int, nbytes: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))


def device_copy(dst: int, src: int, nbytes: int, dst_device: Device, src_device: Device) -> None:
    """Copy ``nbytes`` bytes from ``src`` on ``src_device`` to ``dst`` on ``dst_device``."""
    from .device_api import get_device_api

    if nbytes < 0:
        raise LoomValueError(f"device copy of a negative size ({nbytes} bytes)")
    if nbytes == 0:
        return
    if not dst or not src:
        raise LoomValueError(f"device copy of {nbytes} bytes with a null pointer ({src:#x} -> {dst:#x})")
    src_cpu, dst_cpu = src_device.device_type == 1, dst_device.device_type == 1
    if src_cpu and dst_cpu:
        ctypes.memmove(dst, src, nbytes)
    elif src_cpu:
        get_device_api(dst_device).copy_from_host(dst, dst_device, _host_bytes(src, nbytes))
    elif dst_cpu:
        get_device_api(src_device).copy_to_host(_host_bytes(dst, nbytes), src, src_device)
    elif src_device == dst_device:
        get_device_api(src_device).copy_within(dst, src, nbytes, src_device)
    else:  # two devices: through host memory
        staging = np.empty(nbytes, np.uint8)
        get_device_api(src_device).copy_to_host(staging, src, src_device)
        get_device_api(dst_device).copy_from_host(dst, dst_device, staging)


def _signature() -> PrimFunc:
    names = [("dst", "handle"), ("src", "handle"), ("byte_offset", "int64"), ("nbytes", "int64"),
             ("dst_type", "int32"), ("dst_id", "int32"), ("src_type", "int32"), ("src_id", "int32")]
    return PrimFunc([E.Var(n, t) for n, t in names], no_op(), attrs={"global_symbol": DEVICE_COPY_FUNCTION})


class RuntimeServices(Module):
    """The functions the runtime itself provides to generated code (:data:`DEVICE_COPY_FUNCTION`)."""

    format = "runtime"

    def __init__(self) -> None:
        super().__init__({DEVICE_COPY_FUNCTION: _signature()})

    def call_words(self, name: str, words: Sequence[int]) -> None:
        if name != DEVICE_COPY_FUNCTION:
            raise LoomValueError(f"the runtime defines no function {name!r}")
        params = self._signatures[name].params
        dst, src, offset, nbytes, dt, di, st, si = (value_of(p.dtype, w) for p, w in zip(params, words))
        device_copy(dst + offset, src + offset, nbytes, Device(dt, di), Device(st, si))

    def _make_runner(self, name: str, func: PrimFunc) -> Any:
        raise LoomValueError(f"{name} is called by generated code, not from Python")


_SERVICES: RuntimeServices | None = None


def runtime_services() -> RuntimeServices:
    """The process's :class:`RuntimeServices` module."""
    global _SERVICES
    if _SERVICES is None:
        _SERVICES = RuntimeServices()
    return _SERVICES
