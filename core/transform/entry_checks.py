"""Check, when a function starts, that its arguments keep every access to a parameter buffer in bounds.

The runtime checks each array against its buffer's declared shape, but that
alone does not keep the accesses in bounds when the shapes use separate
variables or the indices use scalar arguments::

    A = loom.placeholder((m,), name="A")
    C = loom.compute((n,), lambda i: A[i + off], name="C")   # safe only for off + n <= m

Native code would read past ``A`` (TVM does); the interpreter raises.  For each
access to a parameter buffer whose index range is exact (see
:mod:`loom.transform.affine_region`: affine in the loop variables, under guards
that bound them), the pass ``EntryAccessChecks`` (phase 1, after flattening; not in ``simple_mode``)
adds one assertion at the top of the function:
*if the access runs at all, its least index is at least 0 and its greatest is
below the extent*.  A call that would leave the buffer fails there with
:class:`loom.LoomError` naming the buffer, on every target, before anything is
written.  Where the range is not exact (an index read from memory, a guard it
cannot express, a loop whose bounds use another loop's variable), nothing is
added: a check that might refuse a correct call would be worse than none, and
``build_config(instrument_bound_checkers=True)`` checks every access.

Conditions that the loop bounds already prove (the usual case, where ``C[i]``
and ``A[i]`` share the extent ``n``) simplify away at compile time.

>>> import loom
>>> m, n = loom.var("m"), loom.var("n")
>>> A = loom.placeholder((m,), name="A")
>>> C = loom.compute((n,), lambda i: A[i], name="C")
>>> print(loom.lower(loom.create_schedule(C.op), [A, C]).body)
assert n < 1 or n <= m, 'out-of-bounds read of buffer A (shape [m]) for these arguments'
for i in range(n):
    C[i] = A[i]
"""

from __future__ import annotations

from typing import Any

from ..arith import Analyzer
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..ir.expr_ops import all as all_of
from ..ir.expr_ops import cast, const, logical_and, logical_not, logical_or
from ..ir.function import PrimFunc
from ..ir.functor import Mutator
from ..ir.node import traversal_fields
from ._util import is_op_call
from ._util2 import is_thread_attr
from .affine_region import I64, Region, as_int64
from .make_api import signature_vars
from .pass_base import Pass, PassContext, prim_func_pass

__all__ = ["EntryAccessChecks", "entry_access_checks"]


class _Accesses:
    """Walk a body, collecting for each parameter buffer the condition under which its accesses stay in bounds."""

    def __init__(self, buffers: dict[int, Buffer]) -> None:
        self.buffers = buffers
        self.found: dict[tuple[int, str], list[E.PrimExpr]] = {}

    # -- statements

    def stmt(self, s: S.Stmt | None, r: Region) -> None:
        if s is None:
            return
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x, r)
        elif isinstance(s, S.For):
            self.expr(s.min, r)
            self.expr(s.extent, r)
            self.stmt(s.body, r.with_loop(s.loop_var, s.min, s.extent))
        elif isinstance(s, S.AttrStmt):
            if isinstance(s.value, E.PrimExpr):
                self.expr(s.value, r)
            inner = r.with_loop(s.node.var, const(0, s.value.dtype), s.value) if is_thread_attr(s) else r
            self.stmt(s.body, inner)
        elif isinstance(s, S.IfThenElse):
            self.expr(s.condition, r)
            self.stmt(s.then_case, r.with_guard(s.condition))
            self.stmt(s.else_case, r.with_guard(s.condition, holds=False))
        elif isinstance(s, S.LetStmt):
            self.expr(s.value, r)
            self.stmt(s.body, r.with_let(s.var, s.value))
        elif isinstance(s, S.BufferStore):
            self.access(s.buffer, s.indices, r.with_lanes(s.value.dtype.lanes), "write")
            self.expr(s.value, r)
            for i in s.indices:
                self.expr(i, r)
        elif isinstance(s, S.AssertStmt):
            self.expr(s.condition, r)
            self.stmt(s.body, r)
        elif isinstance(s, S.Allocate):
            for e in (*s.extents, s.condition):
                self.expr(e, r)
            self.stmt(s.body, r)
        elif isinstance(s, S.Evaluate):
            self.expr(s.value, r)
        else:  # While, and statements this pass does not know: how often the body runs is unknown
            self.opaque_children(s, r)

    def opaque_children(self, node: Any, r: Region) -> None:
        dark = r.copy(opaque=True)
        for x in _children(node):
            if isinstance(x, S.Stmt):
                self.stmt(x, dark)
            elif isinstance(x, E.PrimExpr):
                self.expr(x, dark)

    # -- expressions

    def expr(self, e: E.PrimExpr, r: Region) -> None:
        r = r.with_lanes(e.dtype.lanes)
        if isinstance(e, E.BufferLoad):
            self.access(e.buffer, e.indices, r, "read")
            for i in e.indices:
                self.expr(i, r)
        elif is_op_call(e, "tir.if_then_else") or isinstance(e, E.Select):
            # A select whose side reads memory becomes if_then_else (RewriteUnsafeSelect, phase 3)
            c, t, f = e.args if isinstance(e, E.Call) else (e.condition, e.true_value, e.false_value)
            self.expr(c, r)
            self.expr(t, r.with_guard(c))
            self.expr(f, r.with_guard(c, holds=False))
        elif is_op_call(e, "tir.address_of"):
            # An address, not a read (one past the end is a fine C pointer); its index may still read
            for x in e.args[0].indices if isinstance(e.args[0], E.BufferLoad) else e.args:
                self.expr(x, r)
        elif isinstance(e, (E.And, E.Or)):
            self.expr(e.a, r)
            self.expr(e.b, r.copy(opaque=True))  # may be short-circuited
        elif isinstance(e, E.Let):
            self.expr(e.value, r)
            self.expr(e.body, r.with_let(e.var, e.value))
        elif isinstance(e, (E.Var, E.IntImm, E.FloatImm, E.StringImm)):
            return
        else:
            for x in _children(e):
                if isinstance(x, E.PrimExpr):
                    self.expr(x, r)

    # -- one access

    def access(self, buf: Buffer, indices: tuple[E.PrimExpr, ...], r: Region, kind: str) -> None:
        if self.buffers.get(id(buf.data)) is not buf or r.opaque or len(indices) != len(buf.shape):
            return
        checks: list[E.PrimExpr] = []
        for index, extent in zip(indices, buf.shape):
            span = r.index_range(index)
            if span is None:
                continue
            lo, hi = span
            checks.append(logical_and(lo >= const(0, I64), hi < as_int64(extent)))
        if checks:
            runs = r.runs()
            cond = all_of(*checks) if not runs else logical_or(logical_not(all_of(*runs)), all_of(*checks))
            self.found.setdefault((id(buf), kind), []).append(cond)


class _Narrow(Mutator):
    """``int64(a) < int64(b)`` as ``a < b`` when both sides are narrower values widened (or
    constants that fit), so the assertion reads in the program's own types."""

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        e = self.generic_visit(e)
        if not isinstance(e, E.CmpOp) or e.a.dtype != I64:
            return e
        a, b = _narrowed(e.a), _narrowed(e.b)
        if a is None or b is None:
            return e
        widened = {x.dtype for x in (a, b) if not isinstance(x, E.IntImm)}
        if widened != {"int32"} or any(isinstance(x, E.IntImm) and not -2**31 <= x.value < 2**31 for x in (a, b)):
            return e
        return type(e)(cast(a, "int32"), cast(b, "int32"))


def _narrowed(e: E.PrimExpr) -> E.PrimExpr | None:
    if isinstance(e, E.Cast) and e.value.dtype.is_int and e.value.dtype.lanes == 1:
        return e.value
    return e if isinstance(e, E.IntImm) else None


def _children(node: Any) -> list[Any]:
    out: list[Any] = []
    for f in traversal_fields(type(node)):
        v = getattr(node, f.name)
        out.extend(v if isinstance(v, tuple) else (v,))
    return out


def entry_access_checks(func: PrimFunc) -> S.Stmt:
    """``func.body`` behind one assertion per parameter buffer and access kind (read, write) whose
    accesses the arguments could put out of bounds; assertions the loop bounds prove are left out."""
    buffers = {id(b.data): b for b in func.buffer_map.values()}
    walker = _Accesses(buffers)
    walker.stmt(func.body, Region(frozenset(signature_vars(func)[0])))  # known when the function starts
    body = func.body
    analyzer = Analyzer()
    by_id = {id(b): b for b in func.buffer_map.values()}
    for (key, kind), conds in reversed(list(walker.found.items())):
        unique = {str(c): c for c in conds}
        cond = analyzer.simplify(_Narrow().visit(analyzer.simplify(all_of(*unique.values()))))
        if isinstance(cond, E.IntImm) and cond.value:
            continue
        buf = by_id[key]
        shape = ", ".join(str(x) for x in buf.shape)
        msg = f"out-of-bounds {kind} of buffer {buf.name} (shape [{shape}]) for these arguments"
        body = S.AssertStmt(cond, E.StringImm(msg), body)
    return body


def EntryAccessChecks() -> Pass:  # noqa: N802 - pass-factory naming
    """The pass: :func:`entry_access_checks` on every host PrimFunc (not in ``simple_mode``)."""

    def run(func: PrimFunc, mod: Any, ctx: PassContext) -> PrimFunc:
        if func.attrs.get("loom.api") or func.attrs.get("calling_conv") == "device_kernel":
            return func
        return func.with_(body=entry_access_checks(func))

    return prim_func_pass(run, name="EntryAccessChecks")
