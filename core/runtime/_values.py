"""Argument values as the checker reads them: scalars, layout expressions, and arrays on the host or a device.

The argument errors are defined here, for these helpers to raise, and published
by :mod:`loom.runtime.arguments`.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import LoomError, LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.dtype import DataType
from ..target.devices import Device, device_type_name
from .ndarray import NDArray, aligned_empty, from_dlpack

__all__ = ["ArgumentError", "ArgumentTypeError", "ArgumentValueError", "int_range", "scalar_converter",
           "int_evaluator", "elems", "span", "root_of", "flat_memory", "aligned_clone", "kind_of", "check_strides",
           "describe", "host_array", "device_array", "data_of", "HOST_MEMORY", "reaches_twice",
           "first_overlap", "read_only_error", "self_overlap_error"]

_CPU = 1
#: The address space of every host array (numpy and CPU ``loom.nd`` arrays alike), in memory ranges.
HOST_MEMORY = (_CPU, 0)


class ArgumentError(LoomError):
    """A call's arguments do not match the function's parameters."""

    __module__ = "loom.runtime.arguments"  # its public home (defined here so the helpers below can raise it)


class ArgumentTypeError(ArgumentError, LoomTypeError):
    """Wrong number of arguments, wrong kind of argument or wrong dtype."""

    __module__ = "loom.runtime.arguments"


class ArgumentValueError(ArgumentError, LoomValueError):
    """Right kind of argument with the wrong shape, layout, offset, device or value."""

    __module__ = "loom.runtime.arguments"


def int_range(t: DataType) -> tuple[int, int]:
    """The inclusive value range of an integer dtype."""
    if t.is_uint:
        return 0, (1 << t.bits) - 1
    return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1


def scalar_converter(t: DataType) -> Callable[[Any], Any]:
    """A function taking a Python/numpy scalar to ``t``: TypeError for the wrong kind, ValueError out of range."""
    if t.is_integer:
        lo, hi = int_range(t)

        def to_int(x: Any) -> int:
            if isinstance(x, (float, np.floating)):
                raise TypeError("a float is not an integer")
            v = operator.index(x)
            if not lo <= v <= hi:
                raise ValueError(f"{v} is outside [{lo}, {hi}]")
            return v

        return to_int
    if t.is_bool:
        def to_bool(x: Any) -> bool:
            if isinstance(x, (bool, np.bool_)):
                return bool(x)
            if isinstance(x, (float, np.floating)):
                raise TypeError("a float is not a bool")
            if operator.index(x) in (0, 1):
                return bool(x)
            raise ValueError("expected True/False or 0/1")

        return to_bool
    if t.is_float:
        npd = t.numpy()

        def to_float(x: Any) -> Any:
            if isinstance(x, np.ndarray) and x.ndim == 0:
                x = x[()]
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.generic)) \
                    or (isinstance(x, np.generic) and x.dtype.kind not in "iuf" and x.dtype != npd):
                raise TypeError(f"{type(x).__name__} is not a real number")
            return npd.type(x)

        return to_float
    raise LoomTypeError(f"a scalar parameter of dtype {t} cannot be passed from Python")


_BINARY: dict[type, Callable[[int, int], int]] = {
    E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul, E.FloorDiv: operator.floordiv,
    E.FloorMod: operator.mod, E.Min: min, E.Max: max,
    E.Div: lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    E.Mod: lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)),
}


def int_evaluator(e: E.PrimExpr, fname: str) -> Callable[[dict], int]:
    """Compile an integer layout expression (``2 * n + 1``) over ``{id(var): value}``."""
    if isinstance(e, E.IntImm):
        value = e.value
        return lambda env: value
    if isinstance(e, E.Var):
        key = id(e)
        return lambda env: env[key]
    if isinstance(e, E.Cast):
        return int_evaluator(e.value, fname)
    op = _BINARY.get(type(e))
    if op is None or not isinstance(e, E.BinaryOp):  # the keys are binary operations
        raise LoomTypeError(f"{fname}: cannot evaluate the layout expression {e} ({type(e).__name__}) at call time")
    a, b = int_evaluator(e.a, fname), int_evaluator(e.b, fname)
    return lambda env: op(a(env), b(env))


# -- host arrays (numpy) ---------------------------------------------------------------------------


def elems(arr: np.ndarray) -> tuple[int, ...]:
    """The strides of ``arr`` in elements (whole elements: the checker has refused others)."""
    item = arr.itemsize
    return tuple(s // item for s in arr.strides)


def span(arr: np.ndarray) -> int:
    """How many elements from the first the array reaches (non-negative strides)."""
    item = arr.itemsize
    return 0 if arr.size == 0 else 1 + sum((n - 1) * (s // item) for n, s in zip(arr.shape, arr.strides))


def root_of(arr: np.ndarray) -> np.ndarray | None:
    """The C-contiguous array ``arr`` is a view into, or None when it is its own memory."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    return None if root is arr or not root.flags.c_contiguous else root


def flat_memory(arr: np.ndarray, from_base: bool) -> tuple[np.ndarray, int]:
    """See :meth:`BoundCall.memory`; ``arr`` has passed its checks (so offsets are whole elements)."""
    item = arr.itemsize
    root = root_of(arr) if from_base else None
    if root is not None:
        raw = root.reshape(-1).view(np.uint8)
        flat = raw[: raw.shape[0] // item * item].view(arr.dtype)
        if not arr.flags.writeable and flat.flags.writeable:
            flat = flat.view()
            flat.flags.writeable = False
        return flat, (arr.ctypes.data - root.ctypes.data) // item
    if arr.flags.c_contiguous:
        return arr.reshape(-1), 0
    return as_strided(arr, shape=(span(arr),), strides=(item,), writeable=arr.flags.writeable), 0


def aligned_clone(arr: np.ndarray, offset: int, align: int) -> tuple[np.ndarray, int]:
    """A copy of ``arr`` at an ``align``-aligned data pointer, same strides and element offset; and that pointer."""
    flat = aligned_empty((offset + span(arr),), arr.dtype, align)
    clone = np.ndarray(arr.shape, arr.dtype, buffer=flat, offset=offset * arr.itemsize, strides=arr.strides)
    clone[...] = arr
    return clone, flat.ctypes.data


def kind_of(x: Any) -> str:
    """A short description of an argument, for error messages."""
    if isinstance(x, np.ndarray):
        return f"an array of {x.dtype} with shape {x.shape}"
    return f"{type(x).__name__} {x!r}"[:120]


# -- what a call may pass for an array parameter ------------------------------------------------------


def check_strides(arr: np.ndarray, what: str) -> None:
    item = arr.itemsize
    if any(s % item or s < 0 for s in arr.strides):
        raise ArgumentValueError(f"{what}: array strides {arr.strides} (bytes) must be non-negative "
                                 f"multiples of the element size {item}; pass a copy")


def describe(arr: Any, kind: str, actual: int) -> str:
    if kind == "shape":
        return f"shape {arr.shape}"
    if kind == "strides":
        return f"strides {arr.strides if isinstance(arr, NDArray) else elems(arr)}"
    return "a plain array (offset 0)" if actual == 0 else f"a view {actual} elements into its base array"


def _device_text(dev_type: Any, dev_id: Any) -> str:
    return f"{device_type_name(int(dev_type))}({int(dev_id)})"


def host_array(arg: Any, what: str) -> np.ndarray:
    """The numpy view of a CPU array argument (no copy)."""
    if type(arg) is np.ndarray:
        return arg
    if isinstance(arg, NDArray):
        if arg._data is None:
            raise ArgumentValueError(f"{what} must be on cpu(0), got an array on {arg.device}; copy it to the "
                                     "host with .numpy() or .copyto(loom.cpu())")
        return arg._data
    if isinstance(arg, np.ndarray):
        return np.asarray(arg)
    dev = getattr(arg, "__dlpack_device__", None)
    if dev is not None and hasattr(arg, "__dlpack__"):
        dev_type, dev_id = dev()
        if int(dev_type) != _CPU:
            raise ArgumentValueError(f"{what} must be on cpu(0), got a {type(arg).__name__} on "
                                     f"{_device_text(dev_type, dev_id)}; copy it to the host first")
        try:
            return np.from_dlpack(arg)
        except (BufferError, TypeError, ValueError, RuntimeError) as err:
            raise ArgumentTypeError(f"{what}: cannot read the {type(arg).__name__} through DLPack: {err}") from None
    if hasattr(arg, "__array_interface__"):
        return np.asarray(arg)
    raise ArgumentTypeError(f"{what} takes an array (numpy, loom.nd or DLPack), got {kind_of(arg)}")


def _copy_hint(dev_type: int) -> str:
    """How to put a host array on a device of ``dev_type``, and why there is no such device here when its
    device API says so (asked only for an error message: it may query a driver)."""
    from .device_api import get_device_api

    name = device_type_name(dev_type)
    try:
        reason = get_device_api(dev_type).unavailable_reason(Device(dev_type, 0))
    except LoomError:
        reason = f"no device API serves {name} here"
    return f"; copy it with loom.nd.array(x, loom.device({name!r}))" + (f" ({reason})" if reason else "")


def device_array(arg: Any, what: str, dev_type: int) -> NDArray:
    """The ``loom.nd.NDArray`` of an argument on a device of type ``dev_type`` (DLPack objects are wrapped)."""
    name = device_type_name(dev_type)
    if isinstance(arg, NDArray):
        if arg._device.device_type == dev_type:
            return arg
        hint = _copy_hint(dev_type) if arg._device.device_type == _CPU else ""
        raise ArgumentValueError(f"{what} must be on {name}, got an array on {arg._device}{hint}")
    if isinstance(arg, np.ndarray):
        raise ArgumentValueError(f"{what} must be on {name}, got a numpy array on the host{_copy_hint(dev_type)}")
    dev = getattr(arg, "__dlpack_device__", None)
    if dev is not None and hasattr(arg, "__dlpack__"):
        got_type, got_id = dev()
        if int(got_type) != dev_type:
            hint = _copy_hint(dev_type) if int(got_type) == _CPU else ""
            raise ArgumentValueError(f"{what} must be on {name}, got a {type(arg).__name__} on "
                                     f"{_device_text(got_type, got_id)}{hint}")
        try:
            return from_dlpack(arg)
        except (BufferError, TypeError, ValueError, RuntimeError) as err:
            raise ArgumentTypeError(f"{what}: cannot read the {type(arg).__name__} through DLPack: {err}") from None
    if hasattr(arg, "__array_interface__"):
        raise ArgumentValueError(f"{what} must be on {name}, got a {type(arg).__name__} on the host{_copy_hint(dev_type)}")
    raise ArgumentTypeError(f"{what} takes an array on {name} (a loom.nd.NDArray or a DLPack object), got "
                            f"{kind_of(arg)}")


def data_of(arr: np.ndarray, what: str) -> tuple[int, int]:
    """The data pointer and element offset of ``arr`` for a buffer with an ``elem_offset``."""
    ptr = arr.ctypes.data
    root = root_of(arr)
    if root is None:
        return ptr, 0
    base = root.ctypes.data
    delta = ptr - base
    if delta % arr.itemsize:
        raise ArgumentValueError(f"{what}: the array starts {delta} bytes into its base array, not a whole "
                                 f"number of {arr.itemsize}-byte elements")
    return base, delta // arr.itemsize


# -- writes and overlap ----------------------------------------------------------------------------


def read_only_error(what: str, fname: str) -> None:
    """Raise the error of a read-only array passed where ``fname`` writes."""
    raise ArgumentValueError(f"{what} is read-only, but {fname} writes to it; pass a writable array "
                             "(numpy.array(x) copies one)")


def self_overlap_error(what: str, fname: str, strides: tuple[int, ...]) -> None:
    """Raise the error of a written array whose layout reaches one element from two indices."""
    raise ArgumentValueError(f"{what}: its strides {strides} (elements) reach some element from two indices, "
                             f"and {fname} writes to it; pass a copy (numpy.ascontiguousarray)")


#: Above this many elements, a layout that fails the quick test is not enumerated (and counts as overlapping).
_ENUMERATE_LIMIT = 1 << 22


def reaches_twice(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether two indices of the layout (strides in elements, non-negative) reach the same element.

    Quick test: with the axes sorted by stride, each stride at least the reach of
    the smaller ones means distinct offsets (every view numpy makes by slicing,
    transposing or reshaping passes it).  Otherwise the offsets are enumerated.

    >>> reaches_twice((4, 3), (3, 1)), reaches_twice((4, 3), (1, 4)), reaches_twice((4,), (0,))
    (False, False, True)
    >>> reaches_twice((2, 2), (1, 1)), reaches_twice((3, 2), (2, 3))
    (True, False)
    """
    axes = sorted((s, n) for n, s in zip(shape, strides) if n > 1)
    reach = 1
    for s, n in axes:
        if s == 0:
            return True
        if s < reach:
            break
        reach += s * (n - 1)
    else:
        return False
    count = 1
    for _, n in axes:
        count *= n
    if count > _ENUMERATE_LIMIT:
        return True
    offsets = np.zeros(1, dtype=np.int64)
    for s, n in axes:
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
    return len(np.unique(offsets)) != len(offsets)


def first_overlap(ranges: list[tuple[tuple[int, int], int, int] | None], written: tuple[int, ...]) \
        -> tuple[int, int] | None:
    """Two arguments whose memory ranges overlap, at least one of them written; None when there are none.

    ``ranges[k]`` is ``(address space, lowest byte, one past the highest)`` or
    None.  A few ranges are compared pairwise; many are swept in address order,
    each compared with the farthest-reaching written and read ranges before it.

    >>> first_overlap([(HOST_MEMORY, 0, 8), (HOST_MEMORY, 0, 8), (HOST_MEMORY, 4, 12)], (2,))
    (2, 0)
    >>> first_overlap([(HOST_MEMORY, 0, 8), (HOST_MEMORY, 0, 8), (HOST_MEMORY, 8, 12)], (2,))
    """
    if len(ranges) <= _PAIRWISE:
        for i in written:
            ri = ranges[i]
            if ri is None:
                continue
            where, lo, hi = ri
            for j, rj in enumerate(ranges):
                if rj is not None and j != i and rj[1] < hi and lo < rj[2] and rj[0] == where:
                    return i, j
        return None
    spans = sorted((r[0], r[1], r[2], k) for k, r in enumerate(ranges) if r is not None)
    space: Any = None
    read_hi = read_k = write_hi = write_k = 0
    for where, lo, hi, k in spans:
        if where != space:
            space, read_hi, write_hi = where, lo, lo
        if write_hi > lo:
            return write_k, k
        if k in written:
            if read_hi > lo:
                return read_k, k
            if hi > write_hi:
                write_hi, write_k = hi, k
        elif hi > read_hi:
            read_hi, read_k = hi, k
    return None


#: Up to this many arguments, :func:`first_overlap` compares pairs (cheaper than sorting).
_PAIRWISE = 8
