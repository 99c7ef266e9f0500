"""Packed calls on the interpreter: ``tir.call_packed`` and the ``tir.packed_array`` arguments it takes.

A ``packed_array`` evaluates to a :class:`loom.nd.NDArray` viewing the
buffer's memory (no copy), after checking that every element it describes lies
inside that memory (:class:`OutOfBoundsError` otherwise, as for any access).
``call_packed`` runs the global function registered under its name when it is
reached (:func:`loom.runtime.packed.invoke_packed`), with str, int, float and
bool arguments as such and a bare handle as its address; its value is 0.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir.dtype import DataType
from ..runtime.device_api import DevicePointer
from ..runtime.packed import TypeCode, array_view, check_array, invoke_packed, packed_layout
from ._codegen import Code
from ._device import _address
from ._errors import InterpreterError, OutOfBoundsError
from ._memory import Memory
from . import _values as V

__all__ = ["compile_packed_array", "compile_call_packed"]


def compile_packed_array(comp: Any, node: E.Call, want: bool) -> Code:
    try:
        ndim = check_array(node)
    except LoomTypeError as err:
        raise InterpreterError(f"{comp.fname}: {err}") from None
    data = comp.expr(node.args[0]).fn
    dtype = node.args[1].value
    tag = V.tag(DataType.of(dtype))
    ints = [comp.expr(a).fn for a in node.args[3:]]
    name = getattr(node.args[0], "name", "an array")
    fname = comp.fname

    def view(f: list) -> Any:
        mem = data(f)
        if isinstance(mem, DevicePointer):
            raise InterpreterError(f"{fname}: call_packed passes {name}, which lives in device memory; packed "
                                   "functions take host arrays")
        if not isinstance(mem, Memory):
            raise InterpreterError(f"{fname}: call_packed passes {name}, which holds no memory ({mem!r})")
        if mem.tag != tag:
            mem = mem.view_as(tag)
        offset, *rest = (int(x(f)) for x in ints)
        shape, strides = rest[:ndim], rest[ndim:]
        if all(n > 0 for n in shape):
            lo = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
            hi = offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
            if lo < 0 or hi >= mem.size:
                raise OutOfBoundsError(f"{fname}: call_packed passes {name} of shape {tuple(shape)} reaching "
                                       f"elements {lo}..{hi} of its memory {mem.name}, which has {mem.size}")
        return array_view(mem.arr.ctypes.data, dtype, shape, strides, offset, owner=mem.arr)

    return Code(view)


def _converter(code: TypeCode) -> Callable[[Any], Any]:
    if code == TypeCode.FLOAT:
        return float
    if code == TypeCode.BOOL:
        return bool
    if code == TypeCode.HANDLE:
        return _address
    if code in (TypeCode.INT, TypeCode.UINT):
        return int
    return lambda v: v  # arrays (already NDArrays) and strs


def compile_call_packed(comp: Any, node: E.Call, want: bool) -> Code:
    try:
        name, layout = packed_layout(node)
    except LoomTypeError as err:
        raise InterpreterError(f"{comp.fname}: {err}") from None
    ops = [comp.expr(a).fn for a in node.args[1:]]
    converters = [_converter(code) for code, _ in layout]
    zero = V.zero_of(node.dtype)

    def call(f: list) -> Any:
        invoke_packed(name, [c(op(f)) for c, op in zip(converters, ops)])
        return zero

    return Code(call)

