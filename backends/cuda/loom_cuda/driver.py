"""The GPU runtime of loom-cuda, over pycuda: the driver, contexts, device memory, kernels and timing events.

pycuda (the ``gpu`` extra: ``pip install loom-cuda[gpu]``) talks to the CUDA
driver.  This module imports without it: code generation needs no GPU, and
every way of lacking one (pycuda not installed, a driver that fails to start, a
device ordinal that does not exist) raises the one error :class:`CUDAUnavailable`.

* :func:`driver` starts the driver once per process and returns ``pycuda.driver``;
* :func:`activate` makes a device's primary context current in the calling thread;
* :class:`CUDADeviceAPI` (``device_api()``) owns the memory of ``cuda`` devices
  (DLPack device type 2), and its :meth:`~CUDADeviceAPI.timer` times work with CUDA events;
* :class:`KernelImage` loads compiled kernels (cubin, PTX as the fallback) and launches them.

>>> from loom_cuda import driver
>>> isinstance(driver.available(), bool)
True
>>> str(CUDAUnavailable("pycuda is not installed"))
'no CUDA driver or GPU was found: pycuda is not installed'
"""

from __future__ import annotations

import operator
import threading
from typing import Any, Sequence

import numpy as np

from loom.errors import LoomError, LoomValueError
from loom.runtime.device_api import DeviceAPI
from loom.target.devices import Device

from . import context as _context
from .context import (DEVICE_TYPE, CUDADriverError, CUDAUnavailable, activate, available, check_ordinal,
                      compute_capability, driver, on_device, primary_context)

__all__ = ["DEVICE_TYPE", "CUDAUnavailable", "CUDADriverError", "driver", "available", "compute_capability",
           "primary_context", "activate", "on_device", "CUDADeviceAPI", "CUDATimer", "KernelImage",
           "KernelFunction", "device_api", "reset"]

#: cudaMalloc returns memory aligned to this many bytes, and no more.
MAX_ALIGNMENT = 256


# --------------------------------------------------------------------------- memory


class CUDADeviceAPI(DeviceAPI):
    """The memory of ``cuda`` devices (DLPack type 2): ``cudaMalloc`` memory, copied by the driver.

    Allocations are 256-byte aligned; the host cannot read them
    (:meth:`host_view` is None).  :meth:`timer` measures device time.
    """

    device_type = DEVICE_TYPE

    def __init__(self) -> None:
        self._allocations: dict[int, tuple[int, Any]] = {}  # address -> (ordinal, pycuda DeviceAllocation)
        self._lock = threading.Lock()

    def _ordinal(self, device: Device) -> int:
        if device.device_type != DEVICE_TYPE:
            raise LoomValueError(f"the CUDA device API serves cuda devices (DLPack type {DEVICE_TYPE}), not {device}")
        return int(device.device_id)

    def exists(self, device: Device) -> bool:
        if device.device_type != DEVICE_TYPE:
            return False
        try:
            check_ordinal(driver(), int(device.device_id))
        except Exception:
            return False
        return True

    def unavailable_reason(self, device: Device) -> str | None:
        """Why ``device`` cannot be used (no pycuda, no driver, no such GPU), else None."""
        try:
            check_ordinal(driver(), self._ordinal(device))
        except CUDAUnavailable as err:
            return str(err)
        except Exception as err:  # a driver error while counting devices
            return f"no CUDA driver or GPU was found: {err}"
        return None

    def allocate(self, device: Device, nbytes: int, alignment: int) -> int:
        dev = self._ordinal(device)
        if nbytes < 0:
            raise LoomValueError(f"{device}: cannot allocate {nbytes} bytes")
        if alignment > MAX_ALIGNMENT or (alignment > 0 and alignment & (alignment - 1)):
            raise LoomValueError(f"{device}: cannot align an allocation to {alignment} bytes: CUDA memory is aligned "
                                 f"to {MAX_ALIGNMENT} bytes, so alignments must be powers of two up to that")
        # cudaMalloc(0) gives no address: a 1-byte allocation gives empty arrays one of their own.
        with on_device(dev, f"allocating {nbytes} bytes") as drv:
            mem = drv.mem_alloc(max(1, int(nbytes)))
        address = int(mem)
        with self._lock:
            self._allocations[address] = (dev, mem)
        return address

    def ordinal_of(self, address: int) -> int | None:
        """The GPU of the allocation starting at ``address``, or None (not one of ours, or inside one)."""
        found = self._allocations.get(address)
        return None if found is None else found[0]

    def free(self, device: Device, address: int) -> None:
        dev = self._ordinal(device)
        with self._lock:
            entry = self._allocations.get(address)
            if entry is None or entry[0] != dev:
                raise LoomValueError(f"{device}: free of address {address:#x}, which is not an allocation of {device}")
            del self._allocations[address]
        with on_device(dev, f"freeing the allocation at {address:#x}"):
            entry[1].free()

    def copy_from_host(self, dst: int, device: Device, src: np.ndarray) -> None:
        dev = self._ordinal(device)
        src = np.ascontiguousarray(src)
        if src.nbytes:
            with on_device(dev, f"copying {src.nbytes} bytes from the host to {dst:#x}") as drv:
                drv.memcpy_htod(dst, src)

    def copy_to_host(self, dst: np.ndarray, src: int, device: Device) -> None:
        dev = self._ordinal(device)
        if not (dst.flags.c_contiguous and dst.flags.writeable):
            raise LoomValueError(f"{device}: copy_to_host needs a writeable C-contiguous destination array")
        if dst.nbytes:
            with on_device(dev, f"copying {dst.nbytes} bytes from {src:#x} to the host") as drv:
                drv.memcpy_dtoh(dst, src)

    def copy_within(self, dst: int, src: int, nbytes: int, device: Device) -> None:
        dev = self._ordinal(device)
        if nbytes < 0:
            raise LoomValueError(f"{device}: cannot copy {nbytes} bytes")
        if nbytes:
            with on_device(dev, f"copying {nbytes} bytes from {src:#x} to {dst:#x}") as drv:
                drv.memcpy_dtod(dst, src, nbytes)

    def synchronize(self, device: Device) -> None:
        dev = self._ordinal(device)
        with on_device(dev, "synchronizing") as drv:
            drv.Context.synchronize()

    def host_view(self, address: int, device: Device) -> np.ndarray | None:
        return None

    def timer(self, device: Device) -> CUDATimer:
        """A :class:`CUDATimer` of ``device``'s time: ``start()``, run work, ``stop()`` -> seconds."""
        return CUDATimer(self._ordinal(device))

    @property
    def live_allocations(self) -> int:
        """How many allocations are not freed yet."""
        return len(self._allocations)


class CUDATimer:
    """Seconds of device time between :meth:`start` and :meth:`stop`, from two CUDA events on the default stream.

    ``stop`` waits for the work queued before it, so the time is that of the
    kernels and copies in between, not of the host's queueing.
    """

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        with on_device(device_id, "creating timing events") as drv:
            self._start = drv.Event()
            self._end = drv.Event()
        self._started = False

    def start(self) -> None:
        with on_device(self.device_id, "recording a timing event"):
            self._start.record()
        self._started = True

    def stop(self) -> float:
        if not self._started:
            raise LoomValueError("CUDATimer.stop() was called before start()")
        with on_device(self.device_id, "timing with events"):
            self._end.record()
            self._end.synchronize()
            ms = self._end.time_since(self._start)
        self._started = False
        return float(ms) / 1e3


# --------------------------------------------------------------------------- kernels

#: pycuda's struct format of each parameter kind: native alignment, as the kernel's parameters are laid out.
#: f16 travels as its bits and bool as a byte: the same size and alignment, and pycuda's packer knows them.
_FORMATS = {"ptr": "Q", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "u8": "B", "u16": "H", "u32": "I",
            "u64": "Q", "f16": "H", "f32": "f", "f64": "d", "bool": "B"}
_INT_RANGES = {k: (-(1 << (b - 1)), (1 << (b - 1)) - 1) for k, b in (("i8", 8), ("i16", 16), ("i32", 32), ("i64", 64))}
_INT_RANGES.update({k: (0, (1 << b) - 1) for k, b in (("u8", 8), ("u16", 16), ("u32", 32), ("u64", 64), ("ptr", 64))})

MAX_THREADS_PER_BLOCK = 1024
_BLOCK_LIMITS = (1024, 1024, 64)
_GRID_LIMITS = ((1 << 31) - 1, 65535, 65535)

# Messages of the driver's errors that mean "this cubin is not for this GPU" (NO_BINARY_FOR_GPU, INVALID_IMAGE).
_WRONG_ARCH = ("kernel image", "no binary", "invalid image", "invalid_image", "no_binary")


def _pack(symbol: str, params: Sequence[tuple[str, Any]]) -> tuple[str, list[Any]]:
    """The struct format and the values to pack of a kernel's parameters, checked."""
    fmt = []
    values: list[Any] = []
    for i, (kind, value) in enumerate(params):
        code = _FORMATS.get(kind)
        if code is None:
            raise LoomValueError(f"kernel {symbol!r}: parameter {i} has kind {kind!r}; expected one of "
                                 f"{', '.join(_FORMATS)}")
        fmt.append(code)
        try:
            if kind in ("f32", "f64"):
                values.append(float(value))
            elif kind == "f16":
                values.append(int(np.array(value, np.float16).view(np.uint16)))
            elif kind == "bool":
                values.append(1 if value else 0)
            else:
                v = operator.index(value)
                lo, hi = _INT_RANGES[kind]
                if not lo <= v <= hi:
                    raise LoomValueError(f"kernel {symbol!r}: parameter {i} ({kind}) = {v} is out of range "
                                         f"[{lo}, {hi}]")
                values.append(v)
        except (TypeError, ValueError) as e:
            if isinstance(e, LoomError):
                raise
            raise LoomValueError(f"kernel {symbol!r}: parameter {i} ({kind}) cannot be {value!r}: {e}") from e
    return "".join(fmt), values


def _dims(symbol: str, what: str, dims: Sequence[int]) -> tuple[int, int, int]:
    try:
        out = tuple(operator.index(d) for d in dims)
    except TypeError:
        out = ()
    if len(out) != 3 or min(out) < 0:
        raise LoomValueError(f"kernel {symbol!r}: the {what} must be three non-negative integers, got {dims!r}")
    return out


def _check_launch(symbol: str, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK or any(b > m for b, m in zip(block, _BLOCK_LIMITS)):
        raise LoomValueError(f"kernel {symbol!r}: block {block} has {threads} threads; CUDA allows at most "
                             f"{MAX_THREADS_PER_BLOCK} per block, with x, y <= 1024 and z <= 64")
    if any(g > m for g, m in zip(grid, _GRID_LIMITS)):
        raise LoomValueError(f"kernel {symbol!r}: grid {grid} is too large; CUDA allows at most "
                             f"{_GRID_LIMITS[0]} blocks in x and {_GRID_LIMITS[1]} in y and z")


class KernelFunction:
    """One kernel of a :class:`KernelImage`, loaded on one device; calling it launches it.

    It prepares pycuda's launcher once per parameter format and reuses it.
    """

    def __init__(self, symbol: str, device_id: int, module: Any) -> None:
        self.symbol = symbol
        self.device_id = device_id
        self._module = module
        self._prepared: dict[str, Any] = {}
        self._function()  # a symbol that is not in the module fails here, not at the first launch

    def _function(self) -> Any:
        with on_device(self.device_id, f"finding kernel {self.symbol!r} in its module"):
            return self._module.get_function(self.symbol)

    def __call__(self, grid: tuple[int, int, int], block: tuple[int, int, int], params: Sequence[tuple[str, Any]],
                 shared_bytes: int = 0, stream: Any = None) -> None:
        """Launch on ``grid`` blocks of ``block`` threads; see :meth:`KernelImage.launch`."""
        g = _dims(self.symbol, "grid", grid)
        b = _dims(self.symbol, "block", block)
        if 0 in g or 0 in b:
            return  # no thread to run
        _check_launch(self.symbol, g, b)
        if shared_bytes < 0:
            raise LoomValueError(f"kernel {self.symbol!r}: {shared_bytes} bytes of dynamic shared memory")
        fmt, values = _pack(self.symbol, params)
        fn = self._prepared.get(fmt)
        if fn is None:
            # pycuda keeps the format on the Function object: one object per format.
            fn = self._prepared[fmt] = self._function().prepare(fmt)
        drv = driver()
        try:
            with activate(self.device_id):
                if stream is None:
                    fn.prepared_call(g, b, *values, shared_size=int(shared_bytes))
                else:
                    fn.prepared_async_call(g, b, stream, *values, shared_size=int(shared_bytes))
        except drv.Error as e:
            raise CUDADriverError(f"cuda({self.device_id}): launching kernel {self.symbol!r} with grid {g} and "
                                  f"block {b} ({shared_bytes} bytes of dynamic shared memory) failed: {e}") from e


class KernelImage:
    """Compiled kernels (a cubin and its PTX), loaded on a GPU the first time they are used.

    The cubin is loaded when it matches the GPU; when the driver refuses it as
    built for another architecture, the PTX is JIT-compiled by the driver
    instead (``loaded_from[device_id]`` says which was used).

    ``KernelImage(cubin, ptx).launch("add", (n // 256, 1, 1), (256, 1, 1),
    [("ptr", a), ("ptr", b), ("i32", n)])`` runs kernel ``add`` on GPU 0.
    """

    def __init__(self, cubin: bytes, ptx: str, device_id: int = 0) -> None:
        if not cubin and not ptx:
            raise LoomValueError("a KernelImage needs a cubin or PTX; both are empty")
        self.cubin = bytes(cubin)
        self.ptx = ptx
        self.device_id = device_id
        self.loaded_from: dict[int, str] = {}
        self._modules: dict[int, Any] = {}
        self._functions: dict[tuple[int, str], KernelFunction] = {}
        self._lock = threading.Lock()

    def module(self, device_id: int | None = None) -> Any:
        """The pycuda module of these kernels on ``device_id`` (default: the image's), loaded once."""
        dev = self.device_id if device_id is None else device_id
        mod = self._modules.get(dev)
        if mod is None:
            with self._lock:
                mod = self._modules.get(dev)
                if mod is None:
                    mod = self._modules[dev] = self._load(dev)
        return mod

    def _load(self, dev: int) -> Any:
        drv = driver()
        with on_device(dev, "loading kernels"):
            cubin_error = None
            if self.cubin:
                try:
                    mod = drv.module_from_buffer(self.cubin)
                    self.loaded_from[dev] = "cubin"
                    return mod
                except drv.Error as e:
                    if not self.ptx or not any(k in str(e).lower() for k in _WRONG_ARCH):
                        raise CUDADriverError(f"cuda({dev}): loading the kernels' cubin failed: {e}") from e
                    cubin_error = e
            log: list[str] = []

            def keep_log(ok: bool, info: str, error: str) -> None:
                log.append(error or info)

            # The driver reads PTX up to a NUL byte.
            ptx = self.ptx.encode()
            try:
                mod = drv.module_from_buffer(ptx if ptx.endswith(b"\0") else ptx + b"\0", message_handler=keep_log)
            except drv.Error as e:
                why = f"the cubin does not fit this GPU ({cubin_error}) and " if cubin_error else ""
                detail = "".join(f"\n{line}" for line in log if line.strip())
                raise CUDADriverError(f"cuda({dev}): {why}JIT-compiling the kernels' PTX failed: {e}{detail}") from e
            self.loaded_from[dev] = "ptx"
            return mod

    def function(self, symbol: str, device_id: int | None = None) -> KernelFunction:
        """The launcher of kernel ``symbol`` on ``device_id`` (default: the image's), cached."""
        dev = self.device_id if device_id is None else device_id
        fn = self._functions.get((dev, symbol))
        if fn is None:
            fn = self._functions[(dev, symbol)] = KernelFunction(symbol, dev, self.module(dev))
        return fn

    def launch(self, symbol: str, grid: tuple[int, int, int], block: tuple[int, int, int],
               params: Sequence[tuple[str, Any]], shared_bytes: int = 0, stream: Any = None, *,
               device_id: int | None = None) -> None:
        """Launch kernel ``symbol`` on ``grid`` blocks of ``block`` threads, asynchronously.

        ``params`` are ``(kind, value)`` pairs in the kernel's parameter order:
        kind ``"ptr"`` (a device address), ``"i8"``... ``"u64"``, ``"f16"``,
        ``"f32"``, ``"f64"`` or ``"bool"``.  A grid or block with a zero
        dimension launches nothing.  ``stream`` is a pycuda ``Stream`` (None: the
        default stream).

        :raises LoomValueError: for a block of more than 1024 threads, a grid
            beyond CUDA's limits, or a parameter of the wrong kind or range.
        :raises CUDADriverError: when the driver refuses the launch.
        """
        self.function(symbol, device_id)(grid, block, params, shared_bytes, stream)


_API = CUDADeviceAPI()


def device_api() -> CUDADeviceAPI:
    """The process's CUDA device API (what the plugin serves for device type 2)."""
    return _API


def reset() -> None:
    """Forget the driver, the contexts and the allocations known so far.

    For tests that replace ``pycuda`` with a fake: memory of the old driver is
    dropped, not freed.
    """
    _context.forget()
    with _API._lock:
        _API._allocations.clear()
