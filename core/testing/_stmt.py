"""Compilation of statement nodes into closures (one rule per node class).

Every loop kind runs serially and in order: the interpreter defines *what* a
program computes, not how fast.  A ``thread_extent`` attr of a ``blockIdx``/
``threadIdx`` IterVar starts (or, inside one, binds a coordinate of) a launch
region that runs with GPU semantics (see ``_gpu``).  Any other
``thread_extent``/``virtual_thread`` ``AttrStmt`` on an IterVar that nothing
outside binds iterates its variable over ``range(extent)``; every other
``AttrStmt`` is transparent.  ``Allocate`` creates fresh memory filled with a
fixed garbage pattern, or no memory at all when its condition is false; in a
launch region a ``shared`` allocation is one per block, and an allocation
annotated with a device type holds device memory (see ``_device``).
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable

from ..ir import expr as E
from ..ir import stmt as S
from ._calls import compile_call
from ._codegen import Code, function
from ._device import device_allocate, is_device_allocate
from ._errors import AssertionFailed, InterpreterError
from ._gpu import compile_bound_attr, compile_region, is_launch_attr, is_shared_scope, shared_allocate
from ._memory import Memory, compile_store, element_count
from . import _values as V

__all__ = ["STMT_RULES", "MAX_ALLOCATION"]

#: The most elements one ``Allocate`` may ask for (a guard against runaway sizes).
MAX_ALLOCATION = 1 << 31
_NOOP = Code.of_const(None)
_SEQ_UNROLL = 16


def _is_noop(code: Code) -> bool:
    return code.is_const


def _seq(comp: Any, node: S.SeqStmt) -> Code:
    codes = [c for c in (comp.stmt(s) for s in node.seq) if not _is_noop(c)]
    if not codes:
        return _NOOP
    if len(codes) == 1:
        return codes[0]
    if len(codes) <= _SEQ_UNROLL:
        return function("\n".join("{%d}" % i for i in range(len(codes))), codes)
    fns = tuple(c.fn for c in codes)

    def run(f: list) -> None:
        for fn in fns:
            fn(f)

    return Code(run)


def _loop(comp: Any, var: E.Var, lo: Code, extent: Code, body_of: Callable[[], Code]) -> Code:
    shadows = comp.in_scope(var)
    slot = comp.bind(var)
    try:
        body = body_of()
    finally:
        comp.unbind(var)
    if _is_noop(body):
        return _NOOP
    _, vmax = V.int_range(var.dtype)
    fname = comp.fname

    def overflow(lo_v: int, hi_v: int) -> None:
        raise InterpreterError(f"{fname}: loop {var.name} in [{lo_v}, {hi_v}) overflows its dtype {var.dtype}")

    return function(_shadowed("""
        lo = {0}
        hi = lo + {1}
        if hi > LIMIT and hi > lo:
            OVERFLOW(lo, hi)
        for v in range(lo, hi):
            f[SLOT] = v
            {2}
        """, shadows), [lo, extent, body], SLOT=slot, LIMIT=vmax + 1, OVERFLOW=overflow)


def _shadowed(template: str, shadows: bool) -> str:
    """Save and restore the slot around ``template`` when it rebinds a Var that is already live."""
    if not shadows:
        return template
    return "old = f[SLOT]\n" + textwrap.dedent(template).strip("\n") + "\nf[SLOT] = old"


def _for(comp: Any, node: S.For) -> Code:
    return _loop(comp, node.loop_var, comp.expr(node.min), comp.expr(node.extent), lambda: comp.stmt(node.body))


def _while(comp: Any, node: S.While) -> Code:
    cond, body = comp.expr(node.condition), comp.stmt(node.body)
    cap, fname = comp.ctx.max_while_iterations, comp.fname

    def runaway() -> None:
        raise InterpreterError(f"{fname}: while loop ran more than {cap} iterations (max_while_iterations); "
                               f"condition: {node.condition}")

    return function("""
        n = 0
        while {0}:
            n += 1
            if n > CAP:
                RUNAWAY()
            {1}
        """, [cond, body], CAP=cap, RUNAWAY=runaway)


def _if(comp: Any, node: S.IfThenElse) -> Code:
    cond, then = comp.expr(node.condition), comp.stmt(node.then_case)
    other = comp.stmt(node.else_case) if node.else_case is not None else _NOOP
    if _is_noop(other):
        return function("if {0}:\n    {1}", [cond, then])
    return function("if {0}:\n    {1}\nelse:\n    {2}", [cond, then, other])


def _let(comp: Any, node: S.LetStmt) -> Code:
    value = comp.expr(node.value)
    shadows = comp.in_scope(node.var)
    slot = comp.bind(node.var)
    if isinstance(node.value, E.Var) and id(node.value) in comp.device_vars:
        comp.device_vars.add(id(node.var))  # an alias of device memory is device memory
    try:
        body = comp.stmt(node.body)
    finally:
        comp.unbind(node.var)
    return function(_shadowed("f[SLOT] = {0}\n{1}", shadows), [value, body], SLOT=slot)


def _attr(comp: Any, node: S.AttrStmt) -> Code:
    if is_launch_attr(node):
        return compile_bound_attr(comp, node) if comp.region is not None else compile_region(comp, node)
    iv = node.node
    if node.attr_key in ("thread_extent", "virtual_thread") and isinstance(iv, E.IterVar) \
            and not comp.in_scope(iv.var):
        zero = V.zero_of(iv.var.dtype)
        return _loop(comp, iv.var, Code.of_const(zero), comp.expr(node.value), lambda: comp.stmt(node.body))
    return comp.stmt(node.body)


def _assert(comp: Any, node: S.AssertStmt) -> Code:
    cond, message, body = comp.expr(node.condition), comp.expr(node.message), comp.stmt(node.body)
    fname = comp.fname

    def fail(msg: Any) -> None:
        raise AssertionFailed(str(msg), fname)

    return function("if not {0}:\n    FAIL({1})\n{2}", [cond, message, body], FAIL=fail)


def _store(comp: Any, node: S.BufferStore) -> Code:
    return compile_store(comp, node)


def _allocate(comp: Any, node: S.Allocate) -> Code:
    if is_device_allocate(node):
        return device_allocate(comp, node)
    extents = [comp.expr(e) for e in node.extents]
    cond = comp.expr(node.condition)
    var, t = node.buffer_var, node.dtype
    shadows = comp.in_scope(var)
    slot = comp.bind(var, memory_tag=V.tag(t))
    key = shared_allocate(comp, var) if comp.region is not None and is_shared_scope(node.scope) else None
    try:
        body = comp.stmt(node.body)
    finally:
        comp.unbind(var)
    fname, name = comp.fname, var.name
    ext_fns = [e.fn for e in extents]

    def make(f: list) -> Memory:
        count = element_count(fname, name, ext_fns, f)
        if count > MAX_ALLOCATION:
            raise InterpreterError(f"{fname}: allocate {name} of {count} elements exceeds the limit {MAX_ALLOCATION}")
        return Memory.allocate(t, count, name)

    def empty(f: list) -> Memory:
        return Memory.allocate(t, 0, name)

    if key is not None:  # one memory per block: the first thread to get here creates it
        return function(_shadowed("""
            shared = f[THR].block.shared
            mem = shared.get(KEY)
            if mem is None:
                mem = shared[KEY] = MAKE(f) if {0} else EMPTY(f)
            f[SLOT] = mem
            {1}
            f[SLOT] = None
            """, shadows), [cond, body], SLOT=slot, MAKE=make, EMPTY=empty, KEY=key, THR=comp.region.thr_slot)
    return function(_shadowed("""
        f[SLOT] = MAKE(f) if {0} else EMPTY(f)
        {1}
        f[SLOT] = None
        """, shadows), [cond, body], SLOT=slot, MAKE=make, EMPTY=empty)


def _evaluate(comp: Any, node: S.Evaluate) -> Code:
    value = node.value
    if isinstance(value, (E.IntImm, E.FloatImm, E.StringImm)):
        return _NOOP
    code = compile_call(comp, value, want_result=False) if isinstance(value, E.Call) else comp.expr(value)
    return _NOOP if code.slot is not None or code.is_const else code


STMT_RULES: dict[type, Callable[[Any, Any], Code]] = {
    S.SeqStmt: _seq, S.For: _for, S.While: _while, S.IfThenElse: _if, S.LetStmt: _let,
    S.AttrStmt: _attr, S.AssertStmt: _assert, S.BufferStore: _store, S.Allocate: _allocate,
    S.Evaluate: _evaluate,
}
