"""Starting the CUDA driver (through pycuda) and making a GPU's primary context current.

The lower layer of :mod:`loom_cuda.driver`, which re-exports every name here:
see there.  pycuda is imported on first use, so this module imports without it.

>>> str(CUDAUnavailable("pycuda is not installed"))
'no CUDA driver or GPU was found: pycuda is not installed'
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from typing import Any, Iterator

from loom.errors import LoomError

__all__ = ["DEVICE_TYPE", "CUDAUnavailable", "CUDADriverError", "driver", "available", "compute_capability",
           "primary_context", "activate", "on_device", "forget"]

#: DLPack's ``kDLCUDA``.
DEVICE_TYPE = 2


class CUDAUnavailable(LoomError):
    """No CUDA driver or GPU to run on: pycuda is missing, the driver failed to start, or no such device.

    ``reason`` says which.

    >>> CUDAUnavailable("there is no CUDA device with ordinal 3").reason
    'there is no CUDA device with ordinal 3'
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"no CUDA driver or GPU was found: {reason}")
        self.reason = reason


class CUDADriverError(LoomError, RuntimeError):
    """The CUDA driver refused an operation: out of memory, an address outside every allocation, a failed launch."""


# --------------------------------------------------------------------------- the driver

_lock = threading.RLock()
_driver: Any = None
_failure: str | None = None  # why the driver is unavailable, once known: later calls fail without retrying


def _load() -> None:
    global _driver, _failure
    try:
        # Apart from the driver: a missing package and a missing driver get different advice.
        importlib.import_module("pycuda")
    except ImportError as e:
        _failure = f"pycuda is not installed ({e}); install loom-cuda[gpu]"
        return
    try:
        drv = importlib.import_module("pycuda.driver")
    except Exception as e:  # an ImportError naming libcuda when there is no driver
        _failure = f"pycuda could not load the CUDA driver: {e}"
        return
    try:
        drv.init()
    except Exception as e:
        _failure = f"pycuda.driver.init() failed: {e}"
        return
    _driver = drv


def driver() -> Any:
    """``pycuda.driver``, initialised (once per process, thread-safe).

    :raises CUDAUnavailable: without pycuda or when the driver fails to start
        (the reason is remembered: later calls raise at once).
    """
    drv = _driver
    if drv is not None:
        return drv
    with _lock:
        if _driver is None and _failure is None:
            _load()
        if _driver is None:
            raise CUDAUnavailable(str(_failure))
        return _driver


def available() -> bool:
    """Whether the CUDA driver started (pycuda is installed and ``init()`` succeeded); never raises."""
    try:
        driver()
    except CUDAUnavailable:
        return False
    return True


def check_ordinal(drv: Any, device_id: int) -> None:
    """Raise :class:`CUDAUnavailable` unless GPU ``device_id`` exists."""
    count = int(drv.Device.count())
    if not 0 <= device_id < count:
        raise CUDAUnavailable(f"there is no CUDA device with ordinal {device_id} (this machine has {count})")


def compute_capability(device_id: int = 0) -> tuple[int, int] | None:
    """``(major, minor)`` of GPU ``device_id`` (``(9, 0)`` for Hopper), or None without the driver or the device."""
    try:
        drv = driver()
        check_ordinal(drv, device_id)
        major, minor = drv.Device(device_id).compute_capability()
    except Exception:
        return None
    return int(major), int(minor)


def forget() -> None:
    """Forget the driver and the contexts known so far (:func:`loom_cuda.driver.reset` calls this)."""
    global _driver, _failure
    with _lock:
        _driver = None
        _failure = None
        _contexts.clear()


# --------------------------------------------------------------------------- contexts

_contexts: dict[int, Any] = {}


class _Current(threading.local):
    """The primary context this module made current in this thread (None outside :func:`activate`)."""

    context: Any = None


_current = _Current()


def primary_context(device_id: int) -> Any:
    """The primary context of GPU ``device_id``, retained once per process (the CUDA runtime's context too).

    :raises CUDAUnavailable: without the driver or the device.
    """
    ctx = _contexts.get(device_id)
    if ctx is not None:
        return ctx
    drv = driver()
    with _lock:
        ctx = _contexts.get(device_id)
        if ctx is None:
            check_ordinal(drv, device_id)
            try:
                ctx = drv.Device(device_id).retain_primary_context()
            except drv.Error as e:
                raise CUDADriverError(f"cuda({device_id}): retaining the primary context failed: {e}") from e
            _contexts[device_id] = ctx
    return ctx


@contextlib.contextmanager
def activate(device_id: int) -> Iterator[Any]:
    """Make GPU ``device_id``'s primary context current in the calling thread for the ``with`` block.

    The context is pushed when it is not current already (a thread-local check:
    nested blocks cost nothing) and popped after, so any Python thread may call
    the driver and none is left holding a context.
    """
    ctx = primary_context(device_id)
    if _current.context is ctx:
        yield ctx
        return
    ctx.push()
    outer, _current.context = _current.context, ctx
    try:
        yield ctx
    finally:
        _current.context = outer
        ctx.pop()  # static in pycuda: pops the calling thread's current context, which is ctx


@contextlib.contextmanager
def on_device(device_id: int, what: str) -> Iterator[Any]:
    """:func:`activate` for a block that calls the driver (which it yields), whose errors become a
    :class:`CUDADriverError` saying ``what`` failed on which device."""
    drv = driver()
    try:
        with activate(device_id):
            yield drv
    except drv.Error as e:
        raise CUDADriverError(f"cuda({device_id}): {what} failed: {e}") from e


