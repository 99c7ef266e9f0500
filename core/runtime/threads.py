"""How many threads a parallel region may ask for: what this process can actually start.

Both native backends run parallel loops on libgomp's thread team, and libgomp
ends the process (``libgomp: Thread creation failed``) when it cannot create a
thread of the team: under a memory limit (``RLIMIT_AS``: every thread's stack is
mapped, 8 MiB by default), a process limit (``RLIMIT_NPROC``) or a large
``OMP_STACKSIZE``.  Python cannot catch that, so the count is checked before
native code ever asks for it: :func:`usable_threads` starts that many threads
once (with libgomp's stack size), and when they do not all start, returns fewer
with a ``RuntimeWarning``: half of what started, so that the team's stacks,
which libgomp keeps for the life of the process, leave memory for the rest.

Counts up to the number of cores (the common case, and OpenMP's own default)
and counts already found to start are not probed: they cost nothing.

>>> usable_threads(1, "LOOM_NUM_THREADS")
1
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import warnings

from .. import envvars
from ..errors import LoomValueError

__all__ = ["usable_threads", "openmp_stack_size", "prepare_openmp", "DEFAULT_SPIN_COUNT"]

#: How long an idle libgomp thread spins before it sleeps (``GOMP_SPINCOUNT``), unless the
#: user chose (``OMP_WAIT_POLICY``/``GOMP_SPINCOUNT``).  libgomp's default, 300000 spins
#: (about a millisecond), lets a finished thread hold its core while a busy process waits
#: for it; on two cores with one busy process that made the conv2d benchmark 2.3x slower at
#: two threads than at one.  3000 spins (a few microseconds) cover the gap between
#: back-to-back parallel regions, so a quiet machine loses nothing (docs/runtime.md).
DEFAULT_SPIN_COUNT = 3000

_HAS_SIGMASK = hasattr(signal, "pthread_sigmask")
_lock = threading.Lock()
#: The largest team known to start in this process (probed, or at most one per core).
_verified = 0
#: Counts a probe found too many to start, with the count parallel regions use instead.
_short: dict[int, int] = {}
_UNITS = {"": 1 << 10, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def openmp_stack_size() -> int:
    """The stack size of libgomp's threads from ``OMP_STACKSIZE``/``GOMP_STACKSIZE``; 0 for the default.

    The default is the process's default thread stack (glibc: the ``RLIMIT_STACK``
    soft limit), which is also what Python's threads get.  ``OMP_STACKSIZE`` is a
    number with an optional unit ``B``, ``K`` (the default), ``M`` or ``G``;
    ``GOMP_STACKSIZE`` a number of KiB.  Malformed values are ignored, as libgomp does.
    """
    for name in ("OMP_STACKSIZE", "GOMP_STACKSIZE"):
        text = os.environ.get(name, "").strip().lower()
        if not text:
            continue
        digits = text.rstrip("bkmg").strip()
        unit = text[len(digits):].strip() if name == "OMP_STACKSIZE" else ""
        if digits.isdigit() and unit in _UNITS:
            return int(digits) * _UNITS[unit]
    return 0


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _Pthreads:
    """libc's threads and semaphores through ctypes (None where the C library lacks them)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.create = libc.pthread_create
        self.create.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.join = libc.pthread_join
        self.join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        self.attr_init, self.attr_destroy = libc.pthread_attr_init, libc.pthread_attr_destroy
        self.attr_setstacksize = libc.pthread_attr_setstacksize
        self.attr_setstacksize.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.sem_init, self.sem_post, self.sem_destroy = libc.sem_init, libc.sem_post, libc.sem_destroy
        self.sem_init.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint]
        # The threads' start routine: sem_wait(sem) blocks until the probe posts the semaphore.  It runs no
        # Python and allocates nothing, so a thread costs what one of libgomp's costs: its stack.
        self.wait = ctypes.cast(libc.sem_wait, ctypes.c_void_p).value


def _pthreads() -> _Pthreads | None:
    try:
        return _Pthreads()
    except (OSError, AttributeError):
        return None


def _startable(count: int) -> int:
    """How many of ``count`` threads start at once (with libgomp's stack size); all are joined before returning."""
    lib = _pthreads()
    if lib is None:
        return _startable_in_python(count)
    sem = ctypes.create_string_buffer(128)  # a sem_t (32 bytes on Linux), generously
    if lib.sem_init(sem, 0, 0) != 0:
        return _startable_in_python(count)
    attr = ctypes.create_string_buffer(256)  # a pthread_attr_t (56 or 64 bytes), generously
    ids = (ctypes.c_ulong * max(1, count))()
    started = 0
    lib.attr_init(attr)
    # The threads inherit a mask blocking every signal: none is delivered to them, none ends their wait early.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals()) if _HAS_SIGMASK else None
    try:
        size = openmp_stack_size()
        if size:
            lib.attr_setstacksize(attr, size)
        while started < count and lib.create(ctypes.byref(ids, started * ctypes.sizeof(ctypes.c_ulong)), attr,
                                             lib.wait, sem) == 0:
            started += 1
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for _ in range(started):
            lib.sem_post(sem)
        for k in range(started):
            lib.join(ids[k], None)
        lib.attr_destroy(attr)
        lib.sem_destroy(sem)
    return started


def _startable_in_python(count: int) -> int:
    """:func:`_startable` with Python threads (each also allocates, so it errs on the low side)."""
    release = threading.Event()
    started: list[threading.Thread] = []
    size = openmp_stack_size()
    previous = None
    try:
        if size:
            # Process-wide, so restored at once; a thread started meanwhile elsewhere gets this size too.
            previous = threading.stack_size(max(size, 32 << 10))
        for _ in range(count):
            t = threading.Thread(target=release.wait, name="loom-thread-probe", daemon=True)
            try:
                t.start()
            except (RuntimeError, MemoryError):  # "can't start new thread"
                break
            started.append(t)
    finally:
        if previous is not None:
            threading.stack_size(previous)
        release.set()
        for t in started:
            t.join()
    return len(started)


def prepare_openmp() -> None:
    """Set libgomp's idle spinning to :data:`DEFAULT_SPIN_COUNT` before libgomp loads.

    libgomp reads its environment once, when it is loaded: call this before loading
    any library that needs it.  It changes nothing when the user set
    ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` (or ``LOOM_OMP_SPIN=default``), or when
    libgomp is already loaded (by another package).

    >>> prepare_openmp()
    """
    if _openmp_prepared:
        return
    _openmp_prepared.append(True)
    if any(os.environ.get(name) for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
        return
    if envvars.OMP_SPIN.get().strip().lower() == "default":
        return
    os.environ["GOMP_SPINCOUNT"] = str(DEFAULT_SPIN_COUNT)


_openmp_prepared: list[bool] = []


def usable_threads(count: int, source: str) -> int:
    """The thread count parallel regions may use when ``count`` is asked for (0: OpenMP's default, unchecked).

    :param count: the asked-for team size.
    :param source: where ``count`` comes from, for the warning (``"LOOM_NUM_THREADS"``).
    :raises LoomValueError: when ``count`` is negative.

    A count above :data:`loom.envvars.MAX_THREADS` is capped with a warning;
    one above the cores is checked by starting ``count - 1`` threads (the
    calling thread is the team's first member) once per process and size.
    """
    global _verified
    count = int(count)
    if count < 0:
        raise LoomValueError(f"{source}: a thread count must be non-negative, got {count}")
    if count > envvars.MAX_THREADS:
        warnings.warn(f"{source}={count} is more than {envvars.MAX_THREADS} threads per parallel region "
                      f"(8 per core, at least 256); using {envvars.MAX_THREADS}", RuntimeWarning, stacklevel=2)
        count = envvars.MAX_THREADS
    if count <= max(_verified, _cores()):
        return count
    with _lock:
        if count <= _verified:
            return count
        if count in _short:  # already probed and found short: warned then, not again
            return _short[count]
        started = _startable(count - 1) + 1
        if started >= count:
            _verified = count
            return count
        usable = _short[count] = max(1, started // 2)
    warnings.warn(f"{source} asks for {count} threads per parallel region, but this process could start only "
                  f"{started} (a memory or process limit: RLIMIT_AS, RLIMIT_NPROC, OMP_STACKSIZE); parallel loops "
                  f"use {usable}", RuntimeWarning, stacklevel=2)
    return usable
