"""``ext_dev``: a device with memory of its own, on the CPU, so multi-device code runs anywhere.

Register this module as a plugin to get it (it is not loaded by default)::

    import loom, loom.testing.ext_dev as ext_dev
    loom.plugins.register(ext_dev)

It contributes

* **device type 12** (``loom.device("ext_dev")``): a :class:`ExtDevAPI` whose
  memory is its own (host memory that no numpy array aliases: arrays on it are
  reached only through explicit copies, and :attr:`ExtDevAPI.counters` counts
  every allocation and copy);
* **target kind** ``ext_dev`` with ``max_num_threads``,
  ``max_shared_memory_per_block`` and an optional ``thread_warp_size`` (given,
  cross-thread reductions lower to warp shuffles as on cuda), whose kernels run on that memory through the
  reference interpreter, with GPU semantics (blocks of threads, shared memory,
  barriers, race detection): a split build ``loom.build(s, args,
  target="ext_dev", target_host="llvm")`` gives a host module (llvm, c or interp)
  that launches them;
* the lowering pass :func:`~loom.transform.verify_device.VerifyDeviceLimits`
  with the target's limits, after phase 3.

It is the worked example of docs/backend-authors.md: a complete device backend
in one file.

>>> import numpy as np, loom
>>> import loom.testing.ext_dev as ext_dev
>>> name = loom.plugins.register(ext_dev)
>>> x = loom.nd.array(np.arange(4, dtype="float32"), loom.device("ext_dev"))
>>> x.device, x.numpy()
(ext_dev(0), array([0., 1., 2., 3.], dtype=float32))
>>> _ = loom.plugins.unregister(name)
"""

from __future__ import annotations

import ctypes
import threading
from collections import Counter
from typing import Any

import numpy as np

from loom.plugins import hookimpl

from ..backend.base import ModuleInfo
from ..errors import LoomValueError
from ..ir.function import IRModule
from ..runtime.device_api import DeviceAPI, HostMemoryTable
from ..runtime.interp_module import InterpBackend, InterpModule, _module_from_json
from ..target.devices import Device

__all__ = ["KIND", "DEVICE_TYPE", "ExtDevAPI", "ExtDevBackend", "ExtDevModule", "device_api"]

#: The target kind's name.
KIND = "ext_dev"
#: DLPack's ``kDLExtDev``.
DEVICE_TYPE = 12


class ExtDevAPI(DeviceAPI):
    """The memory of ``ext_dev`` devices: private host buffers, with every operation counted.

    ``counters`` holds ``alloc``, ``free``, ``to_device``, ``to_host``, ``within``
    (copies) and ``bytes_to_device``, ``bytes_to_host``; :meth:`reset_counters`
    zeroes them.
    """

    device_type = DEVICE_TYPE

    def __init__(self) -> None:
        self.table = HostMemoryTable()
        self.counters: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _count(self, key: str, nbytes: int = 0) -> None:
        with self._lock:
            self.counters[key] += 1
            if nbytes:
                self.counters[f"bytes_{key}"] += nbytes

    def reset_counters(self) -> None:
        with self._lock:
            self.counters.clear()

    def exists(self, device: Device) -> bool:
        return device.device_type == DEVICE_TYPE and device.device_id == 0

    def _check(self, device: Device) -> None:
        if device.device_type != DEVICE_TYPE or device.device_id != 0:
            raise LoomValueError(f"ext_dev has one device, ext_dev(0); got {device}")

    def _span(self, address: int, nbytes: int, what: str) -> None:
        found = self.table.find(address)
        if nbytes and (found is None or address + nbytes > found[0] + found[1].shape[0]):
            raise LoomValueError(f"ext_dev: {what} of {nbytes} bytes at {address:#x} is outside every ext_dev "
                                 "allocation")

    def allocate(self, device: Device, nbytes: int, alignment: int) -> int:
        self._check(device)
        self._count("alloc")
        return self.table.allocate(nbytes, alignment)

    def free(self, device: Device, address: int) -> None:
        self._check(device)
        self._count("free")
        self.table.free(address)

    def copy_from_host(self, dst: int, device: Device, src: np.ndarray) -> None:
        self._check(device)
        src = np.ascontiguousarray(src)
        self._span(dst, src.nbytes, "a copy to the device")
        self._count("to_device", src.nbytes)
        ctypes.memmove(dst, src.ctypes.data, src.nbytes)

    def copy_to_host(self, dst: np.ndarray, src: int, device: Device) -> None:
        self._check(device)
        if not dst.flags.c_contiguous:
            raise LoomValueError("ext_dev: copy_to_host needs a C-contiguous destination")
        self._span(src, dst.nbytes, "a copy to the host")
        self._count("to_host", dst.nbytes)
        ctypes.memmove(dst.ctypes.data, src, dst.nbytes)

    def copy_within(self, dst: int, src: int, nbytes: int, device: Device) -> None:
        self._check(device)
        self._span(src, nbytes, "a copy's source")
        self._span(dst, nbytes, "a copy's destination")
        self._count("within", nbytes)
        ctypes.memmove(dst, src, nbytes)

    def host_view(self, address: int, device: Device) -> np.ndarray | None:
        return self.table.view(address)


_API = ExtDevAPI()


def device_api() -> ExtDevAPI:
    """The process's ext_dev device API (to read or reset its counters)."""
    return _API


class ExtDevModule(InterpModule):
    """Kernels built for ``ext_dev``: run by the interpreter on ext_dev memory, called from a host module."""

    format = KIND

    def __init__(self, mod: IRModule, target: Any = None, entry_name: str | None = None) -> None:
        super().__init__(mod, target, entry_name, device=Device(DEVICE_TYPE, 0))


class ExtDevBackend(InterpBackend):
    """The ``ext_dev`` kind's stages: the interpreter's (the kernels' IR is the source and the artifact),
    loading the kernels to run on ext_dev memory."""

    kind = KIND

    def load(self, data: bytes, info: ModuleInfo) -> ExtDevModule:
        return _module_from_json(ExtDevModule, data, info)  # type: ignore[return-value]


# --------------------------------------------------------------------------- hooks


@hookimpl
def loom_target_kinds() -> list[Any]:
    """The ``ext_dev`` kind (DLPack device type 12)."""
    from ..target import AttrSpec, TargetKind

    return [TargetKind(
        KIND, "ext_dev",
        {
            "max_num_threads": AttrSpec(int, 1024, doc="threads per block"),
            "max_shared_memory_per_block": AttrSpec(int, 49152, doc="bytes of shared memory per block"),
            # no default: given (ext_dev -thread_warp_size=32), cross-thread reductions use warp shuffles
            "thread_warp_size": AttrSpec(int, doc="threads per warp, when the kernels should use warp shuffles"),
        },
        default_keys=("ext_dev", "gpu"),  # a GPU-like device: topi's gpu schedules bind its threads
        doc="test device with memory of its own; kernels run on the interpreter with GPU semantics",
    )]


@hookimpl
def loom_device_api(device_type: int) -> Any:
    """ext_dev's memory."""
    return _API if device_type == DEVICE_TYPE else None


@hookimpl
def loom_backend(target_kind: str) -> Any:
    """The ext_dev backend."""
    return ExtDevBackend() if target_kind == KIND else None


@hookimpl
def loom_lower_passes(target: Any, phase: int) -> Any:
    """Check the kernels against the target's per-block limits, after phase 3's built-in passes."""
    if target.kind.name != KIND or phase != 3:
        return None
    from ..transform.verify_device import VerifyDeviceLimits

    return {"after": [VerifyDeviceLimits(int(target.attrs["max_num_threads"]),
                                         int(target.attrs["max_shared_memory_per_block"]))]}
