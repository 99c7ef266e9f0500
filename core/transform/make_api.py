"""``MakeAPI``: turn a lowered PrimFunc into a callable entry point.

Arguments are checked and symbolic sizes bound at call time by the shared
runtime checker, so this pass only makes the function's contract explicit:

- every free variable of the body must come from the signature: a parameter,
  or a var of a parameter buffer's shape, strides or ``elem_offset``; anything
  else is an error naming the variable (a size the caller cannot supply);
- a buffer whose ``elem_offset`` is a variable and whose ``offset_factor`` is
  above 1 gets an ``AssertStmt`` that the offset is a multiple of the factor;
- ``attrs["tir.noalias"]`` records ``tir.restricted_func`` (buffer arguments
  never overlap); ``attrs["loom.api"] = True`` marks the function as made;
  ``global_symbol`` defaults to the function's name in the module;
- ``attrs[WRITTEN_PARAMS_ATTR]`` lists the parameters whose memory the function
  may write (:func:`written_params`), computed here because the body is still
  whole (SplitHostDevice later moves the stores into kernels); the runtime
  refuses read-only and overlapping arrays for them at call time.

Device kernels (``calling_conv == "device_kernel"``) and functions already made
are left alone.

>>> import loom
>>> from loom.ir import BufferStore, PrimFunc
>>> A = loom.decl_buffer((4,), "float32", name="A", offset_factor=4)
>>> f = MakeAPI()(PrimFunc([A.data], BufferStore(A, loom.const(1.0), [0]), buffer_map={A.data: A}))
>>> f.attrs["loom.api"], f.attrs["tir.noalias"], f.attrs[WRITTEN_PARAMS_ATTR], type(f.body).__name__
(True, True, (0,), 'AssertStmt')
"""

from __future__ import annotations

from typing import Any

from ..errors import LoomError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import prefetch_parts
from ..ir.expr_ops import const, floormod
from ..ir.function import IRModule, PrimFunc
from ..ir.node import Node, traversal_fields
from ._util import is_op_call
from ._util2 import free_vars
from .pass_base import Pass, PassContext, prim_func_pass

__all__ = ["MakeAPI", "make_api", "written_params", "declared_writes", "signature_vars", "WRITTEN_PARAMS_ATTR"]

#: ``PrimFunc.attrs`` key: the indices of the handle parameters whose memory the function may write.
WRITTEN_PARAMS_ATTR = "loom.written_params"


def written_params(func: PrimFunc) -> tuple[int, ...]:
    """The indices of ``func``'s handle parameters whose memory its body may write (a safe over-estimate).

    A store writes through its buffer's data Var; a load only reads, unless its
    address is taken (``address_of``).  Any other
    use of a handle Var (passed to a call or an extern function, bound to
    another name by a Let) may let the memory be written, so it counts as a
    write.  The walk keeps its own stack: bodies may nest deeper than Python's
    recursion limit (a long unrolled sum).

    >>> import loom
    >>> from loom.ir import BufferStore, PrimFunc
    >>> A, B = (loom.decl_buffer((4,), "float32", name=x) for x in "AB")
    >>> written_params(PrimFunc([A.data, B.data], BufferStore(B, A[0], [0]), buffer_map={A.data: A, B.data: B}))
    (1,)
    """
    handles = {id(p) for p in func.params if p.dtype.is_handle}
    written: set[int] = set()
    stack: list[Any] = [func.body]
    while stack and len(written) < len(handles):
        node = stack.pop()
        if isinstance(node, S.BufferStore):
            if id(node.buffer.data) in handles:
                written.add(id(node.buffer.data))
            stack.append(node.value)
            stack.extend(node.indices)
        elif isinstance(node, E.BufferLoad):
            stack.extend(node.indices)
        elif is_op_call(node, "tir.prefetch"):  # a cache hint only reads, whatever form it names its element in
            where = prefetch_parts(node)[0]
            stack.extend(where.indices if isinstance(where, E.BufferLoad) else (where,))
            stack.extend(node.args[1:])
        elif is_op_call(node, "tir.address_of"):
            for load in node.args:  # the address escapes to the callee, which may write through it
                if isinstance(load, E.BufferLoad) and id(load.buffer.data) in handles:
                    written.add(id(load.buffer.data))
                stack.append(load)
        elif isinstance(node, E.Var):
            if id(node) in handles:
                written.add(id(node))
        elif isinstance(node, Node):
            stack.extend(getattr(node, f.name) for f in traversal_fields(type(node)))
        elif isinstance(node, tuple):
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
    return tuple(k for k, p in enumerate(func.params) if id(p) in written)


def declared_writes(func: PrimFunc) -> tuple[int, ...]:
    """The written parameters of ``func`` as recorded in its attrs, else computed from its body.

    A function that went through MakeAPI but has an empty body and no
    :data:`WRITTEN_PARAMS_ATTR` is a signature (body dropped) saved by a Loom that
    did not record writes: every handle parameter may then be written.

    :raises LoomError: when the recorded attribute does not name handle parameters.
    """
    found = func.attrs.get(WRITTEN_PARAMS_ATTR)
    if found is None:
        body = func.body
        if func.attrs.get("loom.api") and isinstance(body, S.Evaluate) and isinstance(body.value, E.IntImm):
            return tuple(k for k, p in enumerate(func.params) if p.dtype.is_handle)
        return written_params(func)
    try:
        out = tuple(sorted({int(getattr(k, "value", k)) for k in found}))
    except (TypeError, ValueError):
        out = (-1,)
    if any(not 0 <= k < len(func.params) or not func.params[k].dtype.is_handle for k in out):
        name = func.attrs.get("global_symbol", "a function")
        raise LoomError(f"{WRITTEN_PARAMS_ATTR} of {name} is {found!r}; expected indices of its handle parameters")
    return out


def signature_vars(func: PrimFunc) -> tuple[set[int], list[E.Var]]:
    """The variables the call binds (parameters, and whole shape/stride/offset entries of parameter
    buffers, read from the arrays), and those the other entries use: ``d`` of a shape ``d * 32`` is
    checked against the array, never read from it, so something else must bind it."""
    bound = {id(p) for p in func.params}
    used: list[E.Var] = []
    for buf in func.buffer_map.values():
        for e in (buf.data, *buf.shape, *buf.strides, buf.elem_offset):
            if isinstance(e, E.Var):
                bound.add(id(e))
            else:
                used.extend(free_vars(e))
    return bound, used


def _offset_checks(func: PrimFunc, body: S.Stmt) -> S.Stmt:
    for p in reversed(func.params):
        buf = func.buffer_map.get(p)
        if buf is None or not isinstance(buf.elem_offset, E.Var) or buf.offset_factor <= 1:
            continue
        off = buf.elem_offset
        cond = floormod(off, const(buf.offset_factor, off.dtype)) == const(0, off.dtype)
        msg = f"buffer {buf.name}: elem_offset must be a multiple of offset_factor {buf.offset_factor}"
        body = S.AssertStmt(cond, E.StringImm(msg), body)
    return body


def make_api(func: PrimFunc, name: str = "main", restricted: bool = True) -> PrimFunc:
    """Check ``func``'s free variables and add its API attributes and offset checks.

    Raises :class:`~loom.errors.LoomError` naming a variable the body uses but
    the signature does not provide.
    """
    allowed, in_shapes = signature_vars(func)
    missing = list({id(v): v for v in [*free_vars(func.body), *in_shapes] if id(v) not in allowed}.values())
    if missing:
        names = ", ".join(f"{v.name} ({v.dtype})" for v in missing)
        raise LoomError(f"function {name}: the body or a parameter's shape uses {names}, which is neither a "
                        "parameter nor a whole shape/stride/offset entry of a parameter buffer (a shape "
                        "d * 32 does not give d); add it to the arguments")
    attrs = {**func.attrs, "loom.api": True, "tir.noalias": bool(restricted), WRITTEN_PARAMS_ATTR: written_params(func)}
    attrs.setdefault("global_symbol", name)
    return func.with_(body=_offset_checks(func, func.body), attrs=attrs)


def MakeAPI() -> Pass:  # noqa: N802 - classic factory name
    """The pass: :func:`make_api` on every host PrimFunc, reading ``tir.restricted_func``."""

    def run(func: PrimFunc, mod: IRModule, ctx: PassContext) -> Any:
        if func.attrs.get("loom.api") or func.attrs.get("calling_conv") == "device_kernel":
            return func
        name = next((k for k, f in mod.functions.items() if f is func), "main")
        return make_api(func, name, ctx.get_config("tir.restricted_func"))

    return prim_func_pass(run, name="MakeAPI")
