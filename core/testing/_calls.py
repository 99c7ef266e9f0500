"""Calls: registered intrinsic ops, extern functions and other functions of the module.

* An op with a ``numpy_impl`` runs it on numpy values of the exact argument
  dtypes; the result is converted to the call's dtype.
* ``tir.if_then_else`` evaluates only the taken side when its condition is a
  scalar; ``tir.likely`` is the identity; ``tir.reinterpret`` views the bits;
  ``tir.prefetch`` reads its element (bounds checked) and does nothing else.
* ``tir.call_extern``/``tir.call_pure_extern`` call a Python function found in
  the ``externs`` given to the interpreter, else in :func:`register_extern`'s
  registry.  It receives numpy scalars/arrays of the argument dtypes (a
  ``handle`` argument arrives as the flat numpy array of its memory).
* A ``Call`` of a :class:`GlobalVar` runs that function of the IRModule with
  the call's arguments (scalars and handles) and evaluates to 0, the success
  code of a packed call.  A function the module does not define is looked up
  with the interpreter's ``imports`` resolver and called with one 64-bit word
  per argument (see ``_device``).
* ``tir.tvm_storage_sync`` is a barrier inside a launch region (``_gpu``), a
  no-op elsewhere; ``tir.tvm_warp_shuffle_down``/``tir.tvm_warp_shuffle`` are
  collectives of a warp (``_warp``), only inside a launch region.
* ``tir.call_packed`` runs a global function (``_packed``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import IRError, LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.dtype import DataType
from ..ir.function import GlobalVar
from ._codegen import Code, lambda_
from ._device import import_call
from ._errors import InterpreterError
from ._gpu import compile_barrier, compile_shuffle
from ._packed import compile_call_packed, compile_packed_array
from . import _values as V

__all__ = ["compile_call", "register_extern", "unregister_extern", "registered_externs"]

_EXTERNS: dict[str, Callable[..., Any]] = {}


def register_extern(name: str, fn: Callable[..., Any] | None = None, *, override: bool = False) -> Any:
    """Make ``fn`` the interpreter's implementation of the extern function ``name``.

    Usable as a decorator.  Registering a name twice is an error unless
    ``override=True``.

    >>> @register_extern("doc_example_fma")
    ... def fma(a, b, c):
    ...     return a * b + c
    >>> unregister_extern("doc_example_fma")
    """
    def add(func: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(func):
            raise LoomTypeError(f"register_extern({name!r}) needs a callable, got {type(func).__name__}")
        if name in _EXTERNS and not override:
            raise LoomValueError(f"extern {name!r} is already registered; pass override=True to replace it")
        _EXTERNS[name] = func
        return func

    return add if fn is None else add(fn)


def unregister_extern(name: str) -> None:
    """Remove ``name`` from the extern registry (an error if it is not there)."""
    if _EXTERNS.pop(name, None) is None:
        raise LoomValueError(f"extern {name!r} is not registered")


def registered_externs() -> list[str]:
    """Names in the extern registry."""
    return sorted(_EXTERNS)


def _arg_list(n: int, prefix: str = "C") -> str:
    return ", ".join(f"{prefix}{i}({{{i}}})" for i in range(n))


def _converters(args: tuple[E.PrimExpr, ...]) -> dict[str, Any]:
    return {f"C{i}": V.numpy_converter(a.dtype) for i, a in enumerate(args)}


def _result(t: DataType, what: str, want: bool) -> Callable[[Any], Any]:
    if t.is_handle or not want:
        return lambda r: r

    def out(r: Any) -> Any:
        if r is None:
            raise InterpreterError(f"{what} returned None, but the call has dtype {t}")
        return V.from_numpy(r, t)

    return out


def _numpy_op(comp: Any, node: E.Call) -> Code:
    info = node.op.info
    if info.numpy_impl is None:
        raise LoomValueError(f"{comp.fname}: the interpreter cannot run {info.name}: it has no numpy implementation "
                             "(register the op with loom.ir.register_op(..., numpy_impl=...), or give it a "
                             "lowering rule for 'interp' or 'default' with loom.register_intrin_rule)")
    if info.num_inputs >= 0 and len(node.args) != info.num_inputs:
        raise IRError(f"{comp.fname}: {info.name} takes {info.num_inputs} arguments, got {len(node.args)} in {node}")
    args = [comp.expr(a) for a in node.args]
    return lambda_(f"OUT(IMPL({_arg_list(len(args))}))", args, IMPL=info.numpy_impl,
                   OUT=_result(node.dtype, info.name, True), **_converters(node.args))


def _if_then_else(comp: Any, node: E.Call, want: bool) -> Code:
    if len(node.args) != 3:
        raise IRError(f"{comp.fname}: tir.if_then_else takes 3 arguments, got {len(node.args)}")
    ops = [comp.expr(a) for a in node.args]
    if node.args[0].dtype.lanes > 1:
        return lambda_("WHERE({0}, {1}, {2})", ops, WHERE=np.where)
    return lambda_("({1} if {0} else {2})", ops)


def _prefetch(comp: Any, node: E.Call, want: bool) -> Code:
    from ..ir.buffer import prefetch_parts

    # A cache hint does nothing, but the element it names must exist (the load checks its bounds).
    return lambda_("({0}, ZERO)[1]", [comp.expr(prefetch_parts(node)[0])], ZERO=np.int32(0))


def _likely(comp: Any, node: E.Call, want: bool) -> Code:
    if len(node.args) != 1:
        raise IRError(f"{comp.fname}: tir.likely takes 1 argument, got {len(node.args)}")
    return comp.expr(node.args[0])


def _reinterpret(comp: Any, node: E.Call, want: bool) -> Code:
    src, dst = node.args[0].dtype, node.dtype
    if src.bits * src.lanes != dst.bits * dst.lanes or V.kind(src) in ("bool", "handle") \
            or V.kind(dst) in ("bool", "handle"):
        raise LoomTypeError(f"{comp.fname}: cannot reinterpret {src} as {dst}")
    to_np, dst_np = V.numpy_converter(src), V.np_dtype(dst)

    def bits(v: Any) -> Any:
        return V.from_numpy(np.asarray(to_np(v)).reshape(-1).view(dst_np), dst)

    return lambda_("BITS({0})", [comp.expr(node.args[0])], BITS=bits)


def _extern(comp: Any, node: E.Call, want: bool) -> Code:
    if not node.args or not isinstance(node.args[0], E.StringImm):
        raise IRError(f"{comp.fname}: {node.op.name} needs the function name (a StringImm) first, in {node}")
    name = node.args[0].value
    fn = comp.ctx.externs.get(name)
    if fn is None:
        if name not in _EXTERNS:
            known = sorted(set(comp.ctx.externs) | set(_EXTERNS))
            raise InterpreterError(
                f"{comp.fname}: no implementation of extern function {name!r} (known: {known}); pass "
                f"externs={{{name!r}: fn}} or register it with loom.testing.register_extern")
        fn = _lookup(name)
    args = node.args[1:]
    ops = [comp.expr(a) for a in args]
    return lambda_(f"OUT(FN({_arg_list(len(ops))}))", ops, FN=fn,
                   OUT=_result(node.dtype, f"extern {name!r}", want), **_converters(args))


def _lookup(name: str) -> Callable[..., Any]:
    """Call through the registry so that ``override`` takes effect in compiled programs."""

    def call(*args: Any) -> Any:
        fn = _EXTERNS.get(name)
        if fn is None:
            raise InterpreterError(f"extern function {name!r} was unregistered")
        return fn(*args)

    return call


def _global(comp: Any, node: E.Call, want: bool) -> Code:
    name = node.op.name_hint
    ctx = comp.ctx
    if ctx.imports is not None and (ctx.module is None or name not in ctx.module):
        return import_call(comp, node)
    callee = ctx.callee(name, comp.fname)
    zero = V.zero_of(node.dtype) if node.dtype.lanes == 1 else None
    ops = [comp.expr(a) for a in node.args]
    return lambda_(f"CALL(({''.join('{%d}, ' % i for i in range(len(ops)))})) or ZERO", ops,
                   CALL=callee.run_internal, ZERO=zero)


def _storage_sync(comp: Any, node: E.Call, want: bool) -> Code:
    barrier = compile_barrier(comp, node)
    return barrier if barrier is not None else Code.of_const(V.zero_of(node.dtype))


_SPECIAL = {
    "tir.if_then_else": _if_then_else, "tir.likely": _likely, "tir.prefetch": _prefetch, "tir.reinterpret": _reinterpret,
    "tir.call_extern": _extern, "tir.call_pure_extern": _extern, "tir.tvm_storage_sync": _storage_sync,
    "tir.call_packed": compile_call_packed, "tir.packed_array": compile_packed_array,
    "tir.tvm_warp_shuffle_down": lambda comp, node, want: compile_shuffle(comp, node, True),
    "tir.tvm_warp_shuffle": lambda comp, node, want: compile_shuffle(comp, node, False),
}


def compile_call(comp: Any, node: E.Call, want_result: bool = True) -> Code:
    """Compile a call; ``want_result=False`` when its value is discarded (``Evaluate``)."""
    if isinstance(node.op, GlobalVar):
        return _global(comp, node, want_result)
    special = _SPECIAL.get(node.op.name)
    if special is not None:
        return special(comp, node, want_result)
    return _numpy_op(comp, node)
