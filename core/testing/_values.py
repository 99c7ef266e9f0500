"""How the interpreter represents values of each dtype, and how it converts them.

* scalar ``int*``/``uint*``: a Python ``int`` kept inside the dtype's range
  (arithmetic wraps explicitly, see :func:`wrap_template`);
* scalar ``bool``: a Python ``bool`` (``numpy.bool_`` from float comparisons);
* scalar floats: a numpy scalar of the exact dtype (``numpy.float32``,
  ``ml_dtypes.bfloat16``...), so every operation rounds as the dtype does;
* vectors (lanes > 1): a 1-D numpy array of the element dtype;
* ``handle``: the :class:`~loom.testing._memory.Memory` a pointer refers to.

Conversions follow C where C defines them (float -> int truncates toward zero,
int -> int wraps); float -> narrower float rounds as numpy/ml_dtypes do.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

import numpy as np

from ..errors import LoomTypeError
from ..ir.dtype import DataType
from ._errors import InterpreterError

__all__ = [
    "kind", "int_range", "wrap_template", "wrap_fn", "np_dtype", "tag", "const_of", "from_numpy",
    "numpy_converter", "cast_fn", "zero_of",
]


def kind(t: DataType) -> str:
    """``"int"`` (signed or unsigned), ``"bool"``, ``"float"`` or ``"handle"``."""
    if t.is_integer:
        return "int"
    if t.is_bool:
        return "bool"
    if t.is_float:
        return "float"
    return "handle"


def int_range(t: DataType) -> tuple[int, int]:
    """The inclusive value range of an integer or bool dtype."""
    if t.is_bool:
        return 0, 1
    if t.is_uint:
        return 0, (1 << t.bits) - 1
    return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1


def wrap_template(t: DataType) -> tuple[str, dict[str, int]]:
    """A template ``"...{}..."`` that brings a Python int back into ``t``'s range."""
    if t.is_bool:
        return "bool({})", {}
    mask = (1 << t.bits) - 1
    if t.is_uint:
        return "(({}) & MASK)", {"MASK": mask}
    return "((({}) + HALF) & MASK) - HALF", {"MASK": mask, "HALF": 1 << (t.bits - 1)}


def wrap_fn(t: DataType) -> Callable[[int], Any]:
    """Two's-complement wrapping of a Python int to ``t`` (``bool`` for bool)."""
    if t.is_bool:
        return bool
    mask = (1 << t.bits) - 1
    if t.is_uint:
        return lambda x: x & mask
    half = 1 << (t.bits - 1)
    return lambda x: ((x + half) & mask) - half


def np_dtype(t: DataType) -> np.dtype:
    """The numpy dtype of one element of ``t``."""
    return t.numpy()


def tag(t: DataType) -> str:
    """An interned name of ``t``'s element type (compared with ``is`` on hot paths)."""
    return sys.intern(str(t.element_of()))


def zero_of(t: DataType) -> Any:
    """The zero value of a scalar dtype."""
    k = kind(t)
    if k == "int":
        return 0
    if k == "bool":
        return False
    if k == "float":
        return np_dtype(t).type(0)
    return None


def const_of(value: Any, t: DataType) -> Any:
    """The interpreter value of an IntImm/FloatImm constant."""
    k = kind(t)
    if k == "bool":
        return bool(value)
    if k == "int":
        return int(value)
    return np_dtype(t).type(value)


def from_numpy(x: Any, t: DataType) -> Any:
    """Convert a numpy (or Python) result to the interpreter value of ``t``.

    The value is converted with numpy's casting rules when its dtype differs.
    """
    npd = np_dtype(t)
    arr = np.asarray(x)
    if arr.dtype != npd:
        with np.errstate(all="ignore"):
            arr = arr.astype(npd)
    if t.lanes > 1:
        if arr.size != t.lanes:
            raise InterpreterError(f"expected {t.lanes} lanes of {t.element_of()}, got a value of shape {arr.shape}")
        return np.array(arr.reshape(t.lanes))  # a copy: a vector value never aliases memory
    if arr.size != 1:
        raise InterpreterError(f"expected a scalar {t}, got a value of shape {arr.shape}")
    arr = arr.reshape(())
    k = kind(t)
    if k == "int":
        return int(arr)
    if k == "bool":
        return bool(arr)
    return arr[()]


def numpy_converter(t: DataType) -> Callable[[Any], Any]:
    """A function giving the numpy scalar/array of the exact dtype for a value of ``t`` (ops, externs).

    A handle (a Memory) becomes its flat numpy array; a string stays a string.
    """
    if t.is_handle:
        return lambda v: getattr(v, "arr", v)
    if t.lanes > 1:
        return lambda v: v
    return np_dtype(t).type


# ---------------------------------------------------------------------------
# casts


def _int_to_float(src: DataType, dst: DataType) -> Callable[[int], Any]:
    to, src_np = np_dtype(dst).type, np_dtype(src)
    exact = 1 << 53

    def conv(x: int) -> Any:
        if -exact <= x <= exact:
            return to(float(x))  # exact in a double, so rounded once
        return np.array(x, dtype=src_np).astype(np_dtype(dst))[()]

    return conv


def _float_to_int(src: DataType, dst: DataType) -> Callable[[Any], int]:
    wrap = wrap_fn(dst)

    def conv(x: Any) -> int:
        v = float(x)
        if not math.isfinite(v):
            raise InterpreterError(f"cast of {v} from {src} to {dst} is undefined (not a finite number)")
        return wrap(math.trunc(v))

    return conv


def _scalar_cast(src: DataType, dst: DataType) -> Callable[[Any], Any]:
    ks, kd = kind(src), kind(dst)
    if kd == "bool":
        return lambda x: bool(x != 0)
    if ks == "bool":
        one, zero = (1, 0) if kd == "int" else (np_dtype(dst).type(1), np_dtype(dst).type(0))
        return lambda x: one if x else zero
    if ks == "int" and kd == "int":
        lo, hi = int_range(src)
        dlo, dhi = int_range(dst)
        return (lambda x: x) if dlo <= lo and hi <= dhi else wrap_fn(dst)
    if ks == "int":
        return _int_to_float(src, dst)
    if kd == "int":
        return _float_to_int(src, dst)
    to = np_dtype(dst).type
    return lambda x: to(x)


def _vector_cast(src: DataType, dst: DataType) -> Callable[[np.ndarray], np.ndarray]:
    ks, kd = kind(src), kind(dst)
    npd = np_dtype(dst)
    if kd == "bool":
        return lambda x: x != 0
    if ks == "float" and kd == "int":
        scalar = _float_to_int(src.element_of(), dst.element_of())
        return lambda x: np.array([scalar(v) for v in x.tolist()], dtype=npd)
    return lambda x: x.astype(npd)


def cast_fn(src: DataType, dst: DataType) -> Callable[[Any], Any]:
    """A function converting values of ``src`` to ``dst`` (lanes must agree)."""
    if src.is_handle or dst.is_handle:
        if src == dst:
            return lambda x: x
        raise LoomTypeError(f"the interpreter cannot cast between {src} and {dst}")
    if src == dst:
        return lambda x: x
    if src.lanes > 1:
        return _vector_cast(src, dst)
    return _scalar_cast(src, dst)
