"""Host code and device memory: device pointers, device allocations, calls to other modules, word arguments.

Host code holds device memory as :class:`~loom.runtime.device_api.DevicePointer`
values: it passes them on (to kernels of imported modules) but never reads or
writes through them.  A kernel run from 64-bit words (:func:`word_args`) sees
device memory through the device API's host view, as a :class:`Memory`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.function import PrimFunc
from ..runtime.abi import DEVICE_ID_ANNOTATION, DEVICE_TYPE_ANNOTATION, value_of, word_of
from ..runtime.device_api import DevicePointer, get_device_api
from ..target.devices import Device
from ._codegen import Code
from ._errors import InterpreterError
from ._memory import Memory, element_count
from . import _values as V

__all__ = ["device_allocate", "import_call", "word_args", "is_device_allocate", "DEVICE_ALIGNMENT"]

#: The alignment of device allocations (what device code assumes for vector access).
DEVICE_ALIGNMENT = 64


def _int(v: Any) -> int:
    return int(getattr(v, "value", v))


def is_device_allocate(node: S.Allocate) -> bool:
    return DEVICE_TYPE_ANNOTATION in node.annotations


def device_allocate(comp: Any, node: S.Allocate) -> Code:
    """An ``Allocate`` of device memory: allocated through the device API, freed when its scope ends."""
    dt = _int(node.annotations[DEVICE_TYPE_ANNOTATION])
    dev = Device(dt, _int(node.annotations.get(DEVICE_ID_ANNOTATION, 0)))
    extents = [comp.expr(e).fn for e in node.extents]
    cond = comp.expr(node.condition).fn
    var, t = node.buffer_var, node.dtype
    shadows = comp.in_scope(var)
    slot = comp.bind(var)
    comp.device_vars.add(id(var))
    try:
        body = comp.stmt(node.body).fn
    finally:
        comp.unbind(var)
    elem_bytes = max(1, (t.bits + 7) // 8) * t.lanes
    fname, name = comp.fname, var.name

    def run(f: list) -> None:
        old = f[slot] if shadows else None
        address, api = 0, None
        if cond(f):
            count = element_count(fname, name, extents, f)
            api = get_device_api(dt)
            address = api.allocate(dev, count * elem_bytes, DEVICE_ALIGNMENT)
        f[slot] = DevicePointer(address, dev)
        try:
            body(f)
        finally:
            f[slot] = old
            if api is not None:
                api.free(dev, address)

    return Code(run)


def _address(v: Any) -> int:
    if isinstance(v, Memory):
        return v.arr.ctypes.data
    if isinstance(v, DevicePointer):
        return v.address
    return 0 if v is None else int(v)


def _packer(t: Any) -> Callable[[Any], int]:
    if t.is_handle:
        return lambda v: _address(v) & 0xFFFFFFFFFFFFFFFF
    return lambda v: word_of(t, v)


def import_call(comp: Any, node: E.Call) -> Code:
    """A call of a function another module defines, found through the interpreter's ``imports`` resolver.

    One 64-bit word per argument (:func:`~loom.runtime.abi.word_of`; a pointer
    is its address); the call evaluates to 0, as a successful packed call.
    """
    name, caller, resolve = node.op.name_hint, comp.fname, comp.ctx.imports
    for a in node.args:
        if a.dtype.lanes > 1:
            raise LoomTypeError(f"{caller}: the call of {name!r} passes a vector ({a.dtype}); a call to another "
                                "module takes one 64-bit word per argument")
    ops = [comp.expr(a).fn for a in node.args]
    packers = [_packer(a.dtype) for a in node.args]
    zero = V.zero_of(node.dtype) if node.dtype.lanes == 1 else None

    def call(f: list) -> Any:
        # Resolved on every call: the runtime may link (or relink) imports after compiling.
        fn = resolve(name)
        if fn is None:
            raise InterpreterError(f"{caller} calls {name!r}, which neither the module nor its imports define")
        fn([p(op(f)) for p, op in zip(packers, ops)])
        return zero

    return Code(call)


def word_args(fname: str, func: PrimFunc, words: Sequence[int], device: Device) -> list[Any]:
    """Interpreter values of a kernel's parameters given as 64-bit words (handles: addresses on ``device``)."""
    if func.buffer_map:
        names = ", ".join(b.name for b in func.buffer_map.values())
        raise InterpreterError(f"{fname} has buffer parameters ({names}); run_words runs kernels whose parameters "
                               "are pointers and scalars (call it with arrays instead)")
    if not isinstance(device, Device):
        raise LoomTypeError(f"run_words needs a loom Device for the memory of the addresses, got {device!r}")
    words = list(words)
    if len(words) != len(func.params):
        raise InterpreterError(f"{fname} takes {len(func.params)} words (one per parameter), got {len(words)}")
    api = get_device_api(device)
    args: list[Any] = []
    for k, (p, w) in enumerate(zip(func.params, words)):
        w = int(w) & 0xFFFFFFFFFFFFFFFF
        if not p.dtype.is_handle:
            args.append(value_of(p.dtype, w))
            continue
        view = api.host_view(w, device)
        if view is None:
            raise InterpreterError(f"{fname}: argument {k} ({p.name}) is the address {w:#x}, which is not memory "
                                   f"of {device}")
        args.append(Memory(view, p.name))
    return args
