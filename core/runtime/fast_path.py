"""The per-call fast path of native functions: skip re-checking a layout already checked.

Calling a compiled kernel in a loop passes arrays of the same dtypes, shapes and
strides every time; only the data pointers change.  After a call passes the full
:class:`~loom.runtime.arguments.ArgumentChecker` (and needed no aligned copy),
:meth:`FastPath.learn` records its *layout key* (per argument: dtype, shape and
strides of an array, or type and value of a scalar) with the packed ABI words.
The next call whose key matches reuses those words, filling in only the data
pointers, each checked for alignment: the argument checks depend on nothing but
the key and the pointers, so they hold by construction.  A miss (any other
argument kind, a misaligned pointer, a new layout) takes the full check.

``loom.nd`` arrays on a device take it too: their key holds the device and the
descriptor's dtype, shape and strides, and their pointer is the data address.
Keys are learned only from calls that passed, and a numpy array's key never
equals an NDArray's, so a host array for a device parameter always meets the
checker's error.

Writes and overlap (see :mod:`loom.runtime.arguments`) depend on more than the
key: every array the function writes is checked to be writable, and the
memory ranges of the arguments that must not overlap, whose sizes the key
fixes, are compared: a few integer comparisons per written argument.  A
read-only or overlapping call misses, and the full check raises its error.

The fast path serves functions whose buffers all have a zero ``elem_offset``
(views into a base array bind an offset that the key does not capture).

**The native half.**  Where the C extension ``loom.runtime._fastcall`` is built
(it is optional: ``pip install`` compiles it when a C compiler is present), a
function's calls go first to a ``FastCall`` object that every learned layout of
numpy arrays and Python scalars is copied into.  It makes the same comparisons
and checks as :meth:`FastPath.__call__` in C and calls the compiled function
directly, with the GIL released, which brings a call from a few microseconds to
well under one; anything it was not taught goes on to this module's Python path.
"""

from __future__ import annotations

import ctypes
import logging
import math
from typing import Any, Callable, Sequence

import numpy as np

from .arguments import ArgumentChecker, BoundCall
from .ndarray import NDArray
from .ndarray import array as nd_array

__all__ = ["FastPath", "native_extension"]

log = logging.getLogger(__name__)

_MEMO_LIMIT = 16
_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _pointer(arr: np.ndarray) -> int:
    # c_char.from_buffer is about twice as fast as arr.ctypes.data; it needs a writable, contiguous, non-empty array.
    try:
        return _addressof(_from_buffer(arr))  # type: ignore[arg-type]  # numpy types its buffer protocol on 3.12+
    except (TypeError, ValueError, BufferError):
        return arr.ctypes.data


def _writable_pointer(arr: np.ndarray) -> int | None:
    """The data pointer of an array the call writes, or None when it is read-only."""
    try:
        return _addressof(_from_buffer(arr))  # type: ignore[arg-type]  # refuses read-only arrays, as numpy's does
    except (TypeError, ValueError, BufferError):
        return arr.ctypes.data if arr.flags.writeable else None


def _key_of(args: Sequence[Any]) -> tuple[Any, ...] | None:
    key: list[Any] = []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            key.append((a.dtype, a.shape, a.strides))
        elif t is NDArray:
            d = a._data
            if d is not None:  # on the CPU: the numpy view's layout, as the checker reads it
                key.append((NDArray, d.dtype, d.shape, d.strides))
            else:
                key.append((NDArray, a._device, a._dtype, a._shape, a._strides))
        elif t is int or t is bool:
            key.append((t, a))
        elif t is float:
            key.append((t, a, math.copysign(1.0, a)))  # 0.0 == -0.0, but their words differ
        else:
            return None
    return tuple(key)


def _probe_native() -> Any:
    """``loom.runtime._fastcall`` when it is built and reads numpy arrays as numpy reports them, else None."""
    try:
        from . import _fastcall
    except ImportError:
        return None
    _fastcall.init(np.ndarray, NDArray, NDArray.__dict__["_data"])  # the __slots__ member holding the numpy view
    readonly = np.arange(6, dtype=np.int16).reshape(2, 3)
    readonly.flags.writeable = False
    samples: list[Any] = [np.zeros((3, 5), np.float32), np.zeros((4, 6))[::2, 1::2], readonly, np.array(2.5),
                          np.empty(0, "u1"), nd_array(np.zeros((2, 3), "int8"))]
    for sample in samples:
        arr: Any = sample._data if isinstance(sample, NDArray) else sample
        data, nd, shape, strides, descr, writeable = _fastcall.probe(sample)
        if (data, nd, shape, strides, writeable) != (arr.ctypes.data, arr.ndim, arr.shape, arr.strides,
                                                     arr.flags.writeable) or descr is not arr.dtype:
            log.warning("loom.runtime._fastcall reads numpy %s arrays differently from numpy %s; calls take "
                        "the Python path", arr.dtype, np.__version__)
            return None
    return _fastcall


_UNPROBED: Any = object()
_NATIVE: Any = _UNPROBED  # probed when the first function is made: the probe allocates a loom.nd array


def native_extension() -> Any:
    """The loaded native fast-path extension, or None when calls take the Python path only."""
    global _NATIVE
    if _NATIVE is _UNPROBED:
        _NATIVE = _probe_native()
    return _NATIVE


class FastPath:
    """Memoized argument layouts of one native function (see module docstring).

    :param checker: the function's argument checker.
    :param invoke: runs the function on packed ABI words (``NativeRunner.invoke``).
    :param pack: packs the words of a checked call (``pack_values`` over the slots).
    """

    __slots__ = ("_invoke", "_pack", "_alignments", "_slots", "_written", "_memo", "_native")

    def __init__(self, checker: ArgumentChecker, invoke: Callable[[list[int]], None],
                 pack: Callable[[BoundCall], list[int]]) -> None:
        self._invoke = invoke
        self._pack = pack
        self._written = checker.written
        #: (parameter index, required alignment, whether the function writes it) of every pointer parameter.
        alignments = checker.pointer_alignments
        assert alignments is not None, "FastPath.applies_to(checker) is False"
        self._alignments = alignments
        self._slots = tuple((k, a, k in checker.written) for k, a in enumerate(alignments) if a is not None)
        #: Per layout key: the packed words, and (i, bytes of i, j, bytes of j) for each pair of
        #: arguments whose memory must not overlap.
        self._memo: dict[tuple[Any, ...], tuple[list[int], tuple[tuple[int, int, int, int], ...]]] = {}
        self._native: Any = None

    def native_caller(self, runner: Any, fallback: Callable[..., Any]) -> Callable[..., Any] | None:
        """A native ``FastCall`` of ``runner``'s compiled function that hands what it cannot run to ``fallback``.

        ``runner`` needs ``address`` (the function's address), ``fail(error_address)``
        (raises a failed call's error) and ``slots`` (the ABI words).  None when the
        extension is not built or the runner is not a compiled function; from then
        on :meth:`learn` teaches the caller every layout it can run.
        """
        native = native_extension()
        address = getattr(runner, "address", 0) if native is not None else 0
        if not address:
            return None
        written = tuple(k in self._written for k in range(len(self._alignments)))
        self._native = native.FastCall(address, self._alignments, written, fallback, runner.fail, runner,
                                        len(runner.slots))
        return self._native

    @staticmethod
    def applies_to(checker: ArgumentChecker) -> bool:
        """Whether every buffer of the checked function has a zero ``elem_offset``."""
        return checker.pointer_alignments is not None

    def __call__(self, args: Sequence[Any]) -> bool:
        """Run the call if its layout is known; False (nothing done) on a miss."""
        key = _key_of(args)
        found = self._memo.get(key) if key is not None else None
        if found is None:
            return False
        template, disjoint = found
        words = list(template)
        ptr: int | None
        for k, align, written in self._slots:
            a = args[k]
            if type(a) is NDArray:
                if written and a.readonly:
                    return False
                ptr = a._ptr
            elif written:
                ptr = _writable_pointer(a)
                if ptr is None:
                    return False
            else:
                ptr = _pointer(a)
            if ptr % align:
                return False
            words[k] = ptr
        for i, size_i, j, size_j in disjoint:
            if words[i] < words[j] + size_j and words[j] < words[i] + size_i:
                return False
        self._invoke(words)
        return True

    def learn(self, args: Sequence[Any], call: BoundCall) -> None:
        """Record the layout of a call that passed the full check, unless it needed aligned copies."""
        key = _key_of(args)
        if key is None:
            return
        ranges, written = call._ranges, self._written
        for k, _, _ in self._slots:
            a = args[k]
            ptr = call.pointers[k]
            if ptr != (a._ptr if type(a) is NDArray else _pointer(a)):
                return  # the checker substituted an aligned copy
            rk = ranges[k]
            if rk is not None and rk[1] != ptr:
                return  # memory below the data pointer: not a layout this path describes
        disjoint = []
        for i in written:
            ri = ranges[i]
            if ri is None:
                continue
            for j, _, _ in self._slots:
                rj = ranges[j]
                if j != i and not (j in written and j < i) and rj is not None and rj[0] == ri[0]:
                    disjoint.append((i, ri[2] - ri[1], j, rj[2] - rj[1]))
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        words, pairs = self._pack(call), tuple(disjoint)
        self._memo[key] = (words, pairs)
        if self._native is not None:
            self._native.learn(tuple(args), words, pairs)  # False (nothing learned) for loom.nd arrays

