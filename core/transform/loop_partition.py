"""``LoopPartition``: split loops at the boundaries of their ``likely`` guards.

Non-divisible splits guard their body with ``if likely(i_o * 4 + i_i < 13)``.
For a loop over ``v`` containing such a guard, the pass deduces the range of
``v`` where the condition holds for *every* iteration of the loops inside
(their variables relaxed to their extremes), and splits the loop into a
middle part with the guard removed and the parts before and after it, which
keep the guard::

    for i_o in range(4):                 for i_o in range(3):
        for i_i in range(4):                 for i_i in range(4):
            if likely(i_o*4 + i_i < 13):  ->      A[i_o*4 + i_i] = ...
                A[i_o*4 + i_i] = ...      for i_o in range(3, 4):
                                              for i_i in range(4):
                                                  if likely(...): ...

Conditions must be conjunctions of integer comparisons affine in ``v`` and in
the inner loop variables (constant coefficients); others are left alone.
Loops with a symbolic extent are always candidates; loops with a constant
extent only under ``tir.partition_const_loop``, as in classic TVM.
"""

from __future__ import annotations

from typing import Any, Optional

import attrs

from ..arith import Analyzer
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.functor import Mutator
from ._util import body_pass, const_int, is_op_call, renew_defs, uses_vars
from .pass_base import Pass

__all__ = ["LoopPartition", "loop_partition"]


@attrs.frozen
class _Site:
    """A ``likely`` guard found under a loop, with the loops between them."""

    call: E.Call
    loops: tuple[tuple[E.Var, E.PrimExpr, E.PrimExpr], ...]  # (var, min, extent) of inner loops
    bound: tuple[E.Var, ...]  # other variables bound on the way (lets, allocations)


def _find_sites(s: Optional[S.Stmt], loops: tuple = (), bound: tuple = (), out: Optional[list] = None) -> list[_Site]:
    out = [] if out is None else out
    if s is None:
        return out
    if isinstance(s, S.SeqStmt):
        for x in s.seq:
            _find_sites(x, loops, bound, out)
    elif isinstance(s, S.For):
        _find_sites(s.body, loops + ((s.loop_var, s.min, s.extent),), bound, out)
    elif isinstance(s, S.IfThenElse):
        if is_op_call(s.condition, "tir.likely"):
            out.append(_Site(s.condition, loops, bound))
        _find_sites(s.then_case, loops, bound, out)
        _find_sites(s.else_case, loops, bound, out)
    elif isinstance(s, S.AttrStmt):
        iv = s.node
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(iv, E.IterVar):
            loops = loops + ((iv.var, ops.const(0, iv.var.dtype), s.value),)
        _find_sites(s.body, loops, bound, out)
    elif isinstance(s, (S.LetStmt, S.Allocate)):
        var = s.var if isinstance(s, S.LetStmt) else s.buffer_var
        _find_sites(s.body, loops, bound + (var,), out)
    elif isinstance(s, (S.AssertStmt, S.While)):
        _find_sites(s.body, loops, bound, out)
    return out


def _linear(an: Analyzer, e: E.PrimExpr, v: E.Var) -> Optional[tuple[int, E.PrimExpr]]:
    """``(k, rest)`` with ``e == k * v + rest`` and ``rest`` free of ``v``, or None."""
    if not uses_vars(e, [v]):
        return 0, e
    from ..ir.functor import substitute

    k = const_int(an.simplify(substitute(e, {v: v + 1}) - e))
    if k is None:
        return None
    rest = an.simplify(e - ops.mul(ops.const(k, v.dtype), v)) if v.dtype == e.dtype else None
    if rest is None or uses_vars(rest, [v]):
        return None
    return k, rest


def _negative_form(c: E.PrimExpr) -> Optional[E.PrimExpr]:
    """An integer ``d`` with ``c <=> d < 0``, for a comparison ``c``."""
    if not isinstance(c, (E.LT, E.LE, E.GT, E.GE)) or not c.a.dtype.is_integer or c.a.dtype.lanes != 1:
        return None
    one = ops.const(1, c.a.dtype)
    return {E.LT: lambda: c.a - c.b, E.LE: lambda: c.a - c.b - one,
            E.GT: lambda: c.b - c.a, E.GE: lambda: c.b - c.a - one}[type(c)]()


def _conjuncts(c: E.PrimExpr) -> list[E.PrimExpr]:
    return _conjuncts(c.a) + _conjuncts(c.b) if isinstance(c, E.And) else [c]


def _deduce(an: Analyzer, site: _Site, v: E.Var) -> Optional[tuple[Optional[E.PrimExpr], Optional[E.PrimExpr]]]:
    """``(lo, hi)``: the guard holds for every inner iteration when ``lo <= v < hi`` (None: unbounded)."""
    inner = [var for var, _, _ in site.loops] + list(site.bound)
    for _, mn, ext in site.loops:
        if uses_vars(mn, inner + [v]) or uses_vars(ext, inner + [v]):
            return None  # a loop whose range moves with v or another inner loop
    lo: Optional[E.PrimExpr] = None
    hi: Optional[E.PrimExpr] = None
    for conj in _conjuncts(site.call.args[0]):
        d = _negative_form(conj)
        if d is None:
            return None
        lin = _linear(an, an.simplify(d), v)
        if lin is None or lin[0] == 0:
            return None
        k, rest = lin
        for var, mn, ext in site.loops:  # the largest value of rest over the inner loops
            lin_u = _linear(an, rest, var)
            if lin_u is None:
                return None
            ku, rest_u = lin_u
            if ku:
                at = mn + ext - ops.const(1, ext.dtype) if ku > 0 else mn
                rest = an.simplify(rest_u + ops.mul(ops.const(ku, var.dtype), at))
        if uses_vars(rest, inner + [v]):
            return None
        kc = ops.const(abs(k), rest.dtype)
        if k > 0:  # k*v + rest < 0  <=>  v < floordiv(-rest - 1, k) + 1
            bound = an.simplify(ops.floordiv(ops.sub(ops.const(-1, rest.dtype), rest), kc) + 1)
            hi = bound if hi is None else an.simplify(ops.minimum(hi, bound))
        else:  # -|k|*v + rest < 0  <=>  v >= floordiv(rest, |k|) + 1
            bound = an.simplify(ops.floordiv(rest, kc) + 1)
            lo = bound if lo is None else an.simplify(ops.maximum(lo, bound))
    return lo, hi


class _DropGuards(Mutator):
    """Replace the chosen ``likely`` calls by ``true`` and take the branches they guard."""

    def __init__(self, calls: set[int]) -> None:
        self.calls = calls

    def visit_Buffer(self, b: Any) -> Any:
        return b

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        if id(s.condition) in self.calls:
            return self.visit(s.then_case)
        return self.generic_visit(s)


class _Partitioner(Mutator):
    def __init__(self, const_loops: bool) -> None:
        self.const_loops = const_loops
        self.an = Analyzer()

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def visit_Buffer(self, b: Any) -> Any:
        return b

    def visit_For(self, s: S.For) -> S.Stmt:
        if const_int(s.extent) is None or self.const_loops:
            done = self._partition(s)
            if done is not None:
                return done
        return self.generic_visit(s)

    def _partition(self, s: S.For) -> Optional[S.Stmt]:
        v, an = s.loop_var, self.an
        lo = hi = None
        chosen: set[int] = set()
        for site in _find_sites(s.body):
            found = _deduce(an, site, v)
            if found is None:
                continue
            chosen.add(id(site.call))
            if found[0] is not None:
                lo = found[0] if lo is None else an.simplify(ops.maximum(lo, found[0]))
            if found[1] is not None:
                hi = found[1] if hi is None else an.simplify(ops.minimum(hi, found[1]))
        if not chosen:
            return None
        end = an.simplify(s.min + s.extent)
        start = s.min if lo is None else an.simplify(ops.minimum(ops.maximum(s.min, lo), end))
        stop = end if hi is None else an.simplify(ops.maximum(start, ops.minimum(end, hi)))
        if an.can_prove(stop <= start):
            return None  # the guard never holds for a whole inner nest: nothing to gain
        main = s.with_(min=start, extent=an.simplify(stop - start), body=_DropGuards(chosen).visit(s.body))
        main = self.generic_visit(main)
        pieces = [self._piece(s, s.min, start), main, self._piece(s, stop, end)]
        return S.seq(*pieces)

    def _piece(self, s: S.For, start: E.PrimExpr, stop: E.PrimExpr) -> Optional[S.Stmt]:
        ext = self.an.simplify(stop - start)
        if self.an.can_prove(ext <= 0):
            return None
        v = E.Var(s.loop_var.name, s.loop_var.dtype)
        return S.For(v, start, ext, s.kind, renew_defs(s.body, {s.loop_var: v}), s.thread_tag, s.annotations)


def loop_partition(stmt: S.Stmt, partition_const_loop: bool = False) -> S.Stmt:
    """``stmt`` with loops split at their ``likely`` guards (see the module docstring)."""
    return _Partitioner(partition_const_loop).visit(stmt)


def LoopPartition() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """The loop-partitioning pass; reads ``tir.partition_const_loop`` when it runs."""
    return body_pass("LoopPartition",
                     lambda body, ctx: loop_partition(body, ctx.get_config("tir.partition_const_loop")))


