"""Binding a call's arguments to a function's parameters, with the checks a compiled function makes.

A buffer parameter takes a numpy array: its dtype, ndim, shape, strides
(compact buffers need C-contiguous arrays) and element offset are checked
against the :class:`Buffer`, and the Vars in the buffer's shape, strides and
``elem_offset`` are bound from the array.  A Var that appears in several
places must get one value.  Other ``handle`` parameters take a C-contiguous
array (an opaque pointer); scalar parameters take Python or numpy scalars.

``elem_offset``: an array that is a view into a C-contiguous base array is
addressed from that base, so a non-constant ``elem_offset`` binds to the view's
element offset (which must be a multiple of ``offset_factor``); otherwise the
array's own first element is offset 0.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.function import PrimFunc
from ..ir.functor import collect
from ._errors import InterpreterError
from ._memory import Memory
from . import _values as V

__all__ = ["Binder"]

_Step = Callable[[Any, list, dict, list], None]


def _describe(k: int, p: E.Var, buf: Any = None) -> str:
    if buf is None:
        return f"argument {k} ({p.name}: {p.dtype})"
    dims = [str(s) for s in buf.shape]
    shape = f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"
    return f"argument {k} ({p.name}: {buf.dtype} buffer {buf.name} of shape {shape})"


class Binder:
    """Checks and binds arguments into a fresh frame; built once per function."""

    def __init__(self, comp: Any, func: PrimFunc) -> None:
        self.fname = comp.fname
        self.params = func.params
        self.steps: list[_Step] = []
        self.internal: list[Callable[[Any, list], None]] = []
        self._later: list[E.PrimExpr] = []
        scalars = {id(p) for p in func.params if not p.dtype.is_handle}
        for k, p in enumerate(func.params):
            buf = func.buffer_map.get(p)
            if buf is not None:
                self._buffer_param(comp, k, p, buf, scalars)
            elif p.dtype.is_handle:
                self._pointer_param(comp, k, p)
            else:
                self._scalar_param(comp, k, p)
        # Compound shape expressions (``2 * n``) are checked once every Var is bound.
        self.deferred = {id(e): comp.expr(e) for e in self._later}

    # -- parameter kinds -----------------------------------------------------
    def _scalar_param(self, comp: Any, k: int, p: E.Var) -> None:
        slot, what, fname = comp.bind(p), _describe(k, p), self.fname
        convert = _scalar_converter(p.dtype)

        def step(arg: Any, frame: list, seen: dict, pending: list) -> None:
            try:
                value = convert(arg)
            except (TypeError, ValueError, OverflowError) as err:
                raise LoomTypeError(f"{fname}: {what} expects a {p.dtype} scalar, got {arg!r} ({err})") from None
            _set(fname, frame, seen, p, slot, value, what)

        def internal(arg: Any, frame: list) -> None:
            try:
                frame[slot] = convert(arg)
            except (TypeError, ValueError, OverflowError) as err:
                raise InterpreterError(f"{fname}: {what} expects a {p.dtype} scalar, a call passed {arg!r} ({err})") \
                    from None

        self.steps.append(step)
        self.internal.append(internal)

    def _pointer_param(self, comp: Any, k: int, p: E.Var) -> None:
        slot, what, fname = comp.bind(p, memory_tag=None), _describe(k, p), self.fname

        def step(arg: Any, frame: list, seen: dict, pending: list) -> None:
            if not isinstance(arg, np.ndarray) or not arg.flags.c_contiguous:
                raise LoomTypeError(f"{fname}: {what} is a pointer; it takes a C-contiguous numpy array, "
                                    f"got {_kind_of(arg)}")
            frame[slot] = Memory(arg.reshape(-1), p.name)

        self.steps.append(step)
        self.internal.append(lambda arg, frame: frame.__setitem__(slot, _memory_arg(fname, what, arg)))

    def _buffer_param(self, comp: Any, k: int, p: E.Var, buf: Any, scalars: set[int]) -> None:
        if buf.dtype.lanes > 1:
            raise LoomTypeError(f"{self.fname}: buffer parameter {buf.name} has vector dtype {buf.dtype}; "
                                "the interpreter takes arrays of scalar element types")
        tag = V.tag(buf.dtype)
        slots = {comp.bind(p, memory_tag=tag), comp.bind(buf.data, memory_tag=tag)}
        what, fname, npd = _describe(k, p, buf), self.fname, V.np_dtype(buf.dtype)
        shape = [self._entry(comp, e) for e in buf.shape]
        strides = [self._entry(comp, e) for e in buf.strides]
        offset = self._entry(comp, buf.elem_offset)
        layout = [*buf.shape, *buf.strides, buf.elem_offset]
        free = sorted({v.name for e in layout for v in collect(e, lambda x: isinstance(x, E.Var)) if id(v) not in scalars})

        def step(arg: Any, frame: list, seen: dict, pending: list) -> None:
            if not isinstance(arg, np.ndarray):
                raise LoomTypeError(f"{fname}: {what} takes a numpy array, got {_kind_of(arg)}")
            if arg.dtype != npd:
                raise LoomTypeError(f"{fname}: {what} needs dtype {buf.dtype}, got an array of {arg.dtype}")
            if arg.ndim != len(shape):
                raise LoomValueError(f"{fname}: {what} needs {len(shape)} dimensions, got an array of shape {arg.shape}")
            item = arg.itemsize
            if any(s % item or s < 0 for s in arg.strides):
                raise LoomValueError(f"{fname}: {what}: array strides {arg.strides} (bytes) must be non-negative "
                                     f"multiples of the element size {item}; pass a copy")
            elems = [s // item for s in arg.strides]
            for d, (entry, n) in enumerate(zip(shape, arg.shape)):
                self._match(entry, n, frame, seen, pending, f"{what}: shape[{d}]", f"shape {arg.shape}")
            if not strides:
                if not arg.flags.c_contiguous:
                    raise LoomValueError(f"{fname}: {what} is compact (declared without strides) but the array "
                                         f"has strides {tuple(elems)} (elements); pass numpy.ascontiguousarray(...)")
            else:
                for d, (entry, s) in enumerate(zip(strides, elems)):
                    if arg.shape[d] > 1:
                        self._match(entry, s, frame, seen, pending, f"{what}: strides[{d}]", f"strides {tuple(elems)}")
                    elif entry[0] == "var" and id(entry[1]) not in seen:
                        # The stride of an extent-1 axis is never multiplied by a non-zero
                        # index, so numpy's arbitrary value there binds but never conflicts.
                        frame[entry[2]] = s
            mem, off = _memory_of(fname, what, arg, elems, offset[0] != "const" or offset[1] != 0)
            mem.name = buf.name
            self._match(offset, off, frame, seen, pending, f"{what}: elem_offset", "a plain array (offset 0)"
                        if off == 0 else f"a view {off} elements into its base array")
            if off % buf.offset_factor:
                raise LoomValueError(f"{fname}: {what}: elem_offset {off} is not a multiple of "
                                     f"offset_factor {buf.offset_factor}")
            for slot in slots:
                frame[slot] = mem

        def internal(arg: Any, frame: list) -> None:
            if free:
                raise InterpreterError(f"{fname}: cannot pass a pointer to {what}: its layout uses "
                                       f"{', '.join(free)}, which no scalar parameter provides")
            mem = _memory_arg(fname, what, arg)
            if mem.tag is not tag:  # a pointer of another type: read its bytes as this buffer's dtype
                mem = mem.view_as(tag)
            for slot in slots:
                frame[slot] = mem

        self.steps.append(step)
        self.internal.append(internal)

    # -- shape entries -------------------------------------------------------
    def _entry(self, comp: Any, e: E.PrimExpr) -> tuple[Any, ...]:
        if isinstance(e, E.IntImm):
            return ("const", e.value)
        if isinstance(e, E.Var):
            return ("var", e, comp.bind(e))
        self._later.append(e)
        return ("expr", e)

    def _match(self, entry: tuple[Any, ...], actual: int, frame: list, seen: dict, pending: list,
               origin: str, got: str) -> None:
        if entry[0] == "const":
            if entry[1] != actual:
                raise LoomValueError(f"{self.fname}: {origin} must be {entry[1]}, got {got}")
        elif entry[0] == "var":
            _set(self.fname, frame, seen, entry[1], entry[2], actual, origin)
        else:
            pending.append((entry[1], actual, origin, got))

    # -- entry points ----------------------------------------------------------
    def bind(self, frame: list, args: tuple[Any, ...]) -> None:
        """Check ``args`` and bind them (and the symbolic sizes they carry) into ``frame``."""
        if len(args) != len(self.steps):
            names = ", ".join(p.name for p in self.params)
            raise LoomTypeError(f"{self.fname} takes {len(self.steps)} arguments ({names}), got {len(args)}")
        seen: dict[int, tuple[int, str]] = {}
        pending: list[tuple[E.PrimExpr, int, str, str]] = []
        for step, arg in zip(self.steps, args):
            step(arg, frame, seen, pending)
        for e, actual, origin, got in pending:
            want = self.deferred[id(e)].fn(frame)
            if want != actual:
                raise LoomValueError(f"{self.fname}: {origin} must be {e} = {want}, got {got}")

    def bind_internal(self, frame: list, args: tuple[Any, ...]) -> None:
        """Bind interpreter values (scalars, Memory) from a call inside a module."""
        if len(args) != len(self.internal):
            raise InterpreterError(f"{self.fname} takes {len(self.internal)} arguments, a call passed {len(args)}")
        for step, arg in zip(self.internal, args):
            step(arg, frame)


def _set(fname: str, frame: list, seen: dict, var: E.Var, slot: int, value: Any, origin: str) -> None:
    prev = seen.get(id(var))
    if prev is not None:
        if prev[0] != value:
            raise LoomValueError(f"{fname}: {origin} is {value}, but {var.name} is already {prev[0]} "
                                 f"from {prev[1]}")
        return
    if isinstance(var, E.SizeVar) and value < 0:
        raise LoomValueError(f"{fname}: {origin} is {value}, but {var.name} is a size (non-negative)")
    if var.dtype.is_integer:
        lo, hi = V.int_range(var.dtype)
        if not lo <= value <= hi:
            raise LoomValueError(f"{fname}: {origin} is {value}, which does not fit {var.name}: {var.dtype}")
    seen[id(var)] = (value, origin)
    frame[slot] = value


def _scalar_converter(t: Any) -> Callable[[Any], Any]:
    k = V.kind(t)
    if k == "int":
        lo, hi = V.int_range(t)

        def to_int(x: Any) -> int:
            if isinstance(x, (float, np.floating)):
                raise TypeError("a float is not an integer")
            v = operator.index(x)
            if not lo <= v <= hi:
                raise ValueError(f"{v} is outside [{lo}, {hi}]")
            return v

        return to_int
    if k == "bool":
        def to_bool(x: Any) -> bool:
            if isinstance(x, (bool, np.bool_)) or (not isinstance(x, (float, np.floating)) and operator.index(x) in (0, 1)):
                return bool(x)
            raise ValueError("expected True/False")

        return to_bool
    npd = V.np_dtype(t)

    def to_float(x: Any) -> Any:
        if isinstance(x, np.ndarray) and x.ndim == 0:
            x = x[()]
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.generic)) \
                or (isinstance(x, np.generic) and x.dtype.kind not in "iuf" and x.dtype != npd):
            raise TypeError(f"{type(x).__name__} is not a real number")
        return npd.type(x)

    return to_float


def _kind_of(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return f"an array of {x.dtype} with shape {x.shape} and strides {x.strides}"
    return f"{type(x).__name__} {x!r}"[:120]


def _memory_arg(fname: str, what: str, arg: Any) -> Memory:
    if not isinstance(arg, Memory):
        raise InterpreterError(f"{fname}: {what} needs a pointer (a handle value), got {type(arg).__name__}")
    return arg


def _memory_of(fname: str, what: str, arg: np.ndarray, elems: list[int], from_base: bool) -> tuple[Memory, int]:
    """The flat memory an array lives in, and the array's element offset into it."""
    item = arg.itemsize
    root = arg
    while isinstance(root.base, np.ndarray):
        root = root.base
    if from_base and root is not arg and root.flags.c_contiguous:
        delta = arg.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        if delta % item:
            raise LoomValueError(f"{fname}: {what}: the array starts {delta} bytes into its base array, "
                                 f"not a whole number of {item}-byte elements")
        raw = root.reshape(-1).view(np.uint8)
        flat = raw[: raw.shape[0] // item * item].view(arg.dtype)
        if not arg.flags.writeable:
            flat = flat.view()
            flat.flags.writeable = False
        return Memory(flat, ""), delta // item
    if arg.flags.c_contiguous:
        return Memory(arg.reshape(-1), ""), 0
    span = 0 if arg.size == 0 else 1 + sum((n - 1) * s for n, s in zip(arg.shape, elems))
    flat = as_strided(arg, shape=(span,), strides=(item,), writeable=arg.flags.writeable)
    return Memory(flat, ""), 0
