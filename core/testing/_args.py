"""Binding a call's arguments into an interpreter frame.

Arguments from Python are checked and bound by the runtime's shared
:class:`~loom.runtime.arguments.ArgumentChecker`, exactly as a compiled
function's are; this module only moves the checked call into frame slots: each
buffer's flat memory (see :meth:`~loom.runtime.arguments.BoundCall.memory`)
becomes a :class:`Memory`, and every bound Var (sizes, strides, offsets,
scalar parameters) its value.

Calls between functions of a module (:meth:`Binder.bind_internal`) pass
interpreter values, not arrays: scalars and :class:`Memory` handles.

A handle parameter whose memory lives on a device (``abi.arg_devices``) is
bound to a :class:`~loom.runtime.device_api.DevicePointer`: host code passes
it on to kernels but cannot read or write through it.
"""

from __future__ import annotations

from typing import Any, Callable

from ..ir import expr as E
from ..ir.function import PrimFunc
from ..ir.functor import collect
from ..runtime.abi import arg_devices
from ..runtime.arguments import ArgumentChecker, BoundCall
from ..runtime.device_api import DevicePointer
from ..runtime._values import scalar_converter
from ._errors import InterpreterError
from ._memory import Memory
from . import _values as V

__all__ = ["Binder"]

#: The interpreter never needs aligned memory, so direct calls never copy arguments.
_NO_ALIGNMENT = 1


def _describe(k: int, p: E.Var, buf: Any = None) -> str:
    if buf is None:
        return f"argument {k} ({p.name}: {p.dtype})"
    dims = [str(s) for s in buf.shape]
    shape = f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"
    return f"argument {k} ({p.name}: {buf.dtype} buffer {buf.name} of shape {shape})"


class Binder:
    """Moves checked arguments into a fresh frame; built once per function."""

    def __init__(self, comp: Any, func: PrimFunc) -> None:
        self.fname = comp.fname
        self.func = func
        self._checker: ArgumentChecker | None = None
        # (param index, frame slots, memory name) for each handle parameter.
        self.handles: list[tuple[int, tuple[int, ...], str]] = []
        self.internal: list[Callable[[Any, list], None]] = []
        scalars = {id(p) for p in func.params if not p.dtype.is_handle}
        for k, p in enumerate(func.params):
            buf = func.buffer_map.get(p)
            if buf is not None:
                self._buffer_param(comp, k, p, buf, scalars)
            elif p.dtype.is_handle:
                self._pointer_param(comp, k, p)
            else:
                self._scalar_param(comp, k, p)
        # Parameters whose memory is on a device: their handle Vars hold DevicePointers.
        devices = arg_devices(func)
        self.on_device = {k for k, slots, _ in self.handles if devices[k] != 1}
        for k in self.on_device:
            p = func.params[k]
            comp.device_vars.add(id(p))
            if p in func.buffer_map:
                comp.device_vars.add(id(func.buffer_map[p].data))
        # Every Var a call can bind, keyed by identity: the Var objects of the BoundCall's binding.
        self.var_slots: dict[E.Var, int] = {}
        for p in func.params:
            if not p.dtype.is_handle:
                self.var_slots[p] = comp.slot_of(p)
        for buf in func.buffer_map.values():
            for e in (*buf.shape, *buf.strides, buf.elem_offset):
                if isinstance(e, E.Var):
                    self.var_slots[e] = comp.slot_of(e)

    # -- parameter kinds -----------------------------------------------------
    def _scalar_param(self, comp: Any, k: int, p: E.Var) -> None:
        slot, what, fname = comp.bind(p), _describe(k, p), self.fname
        convert = scalar_converter(p.dtype)

        def internal(arg: Any, frame: list) -> None:
            try:
                frame[slot] = convert(arg)
            except (TypeError, ValueError, OverflowError) as err:
                raise InterpreterError(f"{fname}: {what} expects a {p.dtype} scalar, a call passed {arg!r} ({err})") \
                    from None

        self.internal.append(internal)

    def _pointer_param(self, comp: Any, k: int, p: E.Var) -> None:
        slot, what, fname = comp.bind(p, memory_tag=None), _describe(k, p), self.fname
        self.handles.append((k, (slot,), p.name))
        self.internal.append(lambda arg, frame: frame.__setitem__(slot, _memory_arg(fname, what, arg)))

    def _buffer_param(self, comp: Any, k: int, p: E.Var, buf: Any, scalars: set[int]) -> None:
        tag = V.tag(buf.dtype)
        slots = tuple({comp.bind(p, memory_tag=tag), comp.bind(buf.data, memory_tag=tag)})
        for e in (*buf.shape, *buf.strides, buf.elem_offset):
            if isinstance(e, E.Var):
                comp.bind(e)
        self.handles.append((k, slots, buf.name))
        what, fname = _describe(k, p, buf), self.fname
        layout = [*buf.shape, *buf.strides, buf.elem_offset]
        free = sorted({v.name for e in layout for v in collect(e, lambda x: isinstance(x, E.Var)) if id(v) not in scalars})

        def internal(arg: Any, frame: list) -> None:
            if isinstance(arg, DevicePointer):
                for slot in slots:
                    frame[slot] = arg
                return
            if free:
                raise InterpreterError(f"{fname}: cannot pass a pointer to {what}: its layout uses "
                                       f"{', '.join(free)}, which no scalar parameter provides")
            mem = _memory_arg(fname, what, arg)
            assert isinstance(mem, Memory)  # a DevicePointer returned above
            if mem.tag is not tag:  # a pointer of another type: read its bytes as this buffer's dtype
                mem = mem.view_as(tag)
            for slot in slots:
                frame[slot] = mem

        self.internal.append(internal)

    # -- entry points ----------------------------------------------------------
    def bind(self, frame: list, args: tuple[Any, ...]) -> None:
        """Check ``args`` with the shared checker and bind them (and the sizes they carry) into ``frame``."""
        checker = self._checker
        if checker is None:  # built on the first direct call: an interp Module brings its own
            checker = self._checker = ArgumentChecker(self.func, self.fname, assumed_alignment=_NO_ALIGNMENT)
        self.bind_checked(frame, checker.bind(args))

    def bind_checked(self, frame: list, call: BoundCall) -> None:
        """Bind a :class:`~loom.runtime.arguments.BoundCall` of this function (already checked) into ``frame``."""
        on_device = self.on_device
        for k, slots, name in self.handles:
            if k in on_device:
                pointer = call.pointers[k]
                assert pointer is not None  # set for every device array
                mem: Any = DevicePointer(pointer, call.values[k].device)
            else:
                flat, _ = call.memory(k)
                if flat.dtype.kind == "V":  # vector elements: memory holds their lanes
                    flat = flat.view(self.func.buffer_map[self.func.params[k]].dtype.element_of().numpy())
                mem = Memory(flat, name)
            for slot in slots:
                frame[slot] = mem
        var_slots = self.var_slots
        for var, value in call.binding.items():
            frame[var_slots[var]] = value

    def bind_internal(self, frame: list, args: tuple[Any, ...]) -> None:
        """Bind interpreter values (scalars, Memory) from a call inside a module."""
        if len(args) != len(self.internal):
            raise InterpreterError(f"{self.fname} takes {len(self.internal)} arguments, a call passed {len(args)}")
        for step, arg in zip(self.internal, args):
            step(arg, frame)


def _memory_arg(fname: str, what: str, arg: Any) -> Memory | DevicePointer:
    if not isinstance(arg, (Memory, DevicePointer)):
        raise InterpreterError(f"{fname}: {what} needs a pointer (a handle value), got {type(arg).__name__}")
    return arg
