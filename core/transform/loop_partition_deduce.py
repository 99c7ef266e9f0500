"""Where a ``likely`` guard is decided: the intervals of a loop variable on which it holds or fails.

For a loop over ``v`` the partitioner asks, of every ``likely(cond)`` inside
the loop, two questions: on which interval of ``v`` is ``cond`` true for every
iteration of the loops between (their variables *relaxed* to their extremes),
and on which interval is it false for all of them?  Both answers are
half-open intervals ``[lo, hi)`` whose ends (None: unbounded) are expressions
of what is fixed while the loop runs: parameters and outer loop variables.

Only what can be solved exactly is answered: a conjunction of integer
comparisons ``<, <=, >, >=`` affine in ``v`` and in the relaxed variables
(constant coefficients), and ``==`` / ``!=`` with ``v``'s coefficient +-1.
Conditions that read memory, call impure functions or use variables bound
inside the loop (lets, allocations) are left alone: their value could change
between the loop's entry, where the split point is computed, and the guard.
Like classic TVM, the deduction treats the guard's integer arithmetic as not
wrapping around (guards are index expressions of buffers that fit in memory).
"""

from __future__ import annotations

from typing import Optional

import attrs

from ..arith import Analyzer
from ..arith.detect_linear import linear_form
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.functor import Visitor, collect
from ._util import const_int, has_side_effect, is_op_call, uses_vars

__all__ = ["Loop", "Interval", "Site", "find_sites", "decide", "intersect"]

Loop = tuple[E.Var, E.PrimExpr, E.PrimExpr]  # (var, min, extent)
Interval = tuple[Optional[E.PrimExpr], Optional[E.PrimExpr]]  # [lo, hi); None is unbounded


@attrs.frozen
class Site:
    """One occurrence of a ``likely`` call, with the loops and bindings between it and the loop."""

    call: E.Call
    loops: tuple[Loop, ...]  # inner loops and thread scopes, outermost first
    bound: tuple[E.Var, ...]  # variables bound on the way (lets, allocations)


class _SiteFinder(Visitor):
    def __init__(self) -> None:
        self.loops: list[Loop] = []
        self.bound: list[E.Var] = []
        self.sites: list[Site] = []
        self.cross_thread = False

    def visit_Buffer(self, b: object) -> None:
        return None  # shapes and strides are not evaluated inside the loop

    def visit_For(self, s: S.For) -> None:
        self.visit(s.min)
        self.visit(s.extent)
        self._inside((s.loop_var, s.min, s.extent), s.body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        self.visit(s.value)
        iv = s.node
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(iv, E.IterVar):
            self._inside((iv.var, ops.const(0, iv.var.dtype), s.value), s.body)
        else:
            self.visit(s.body)

    def _inside(self, loop: Loop, body: S.Stmt) -> None:
        self.loops.append(loop)
        self.visit(body)
        self.loops.pop()

    def _binding(self, var: E.Var, *nodes: object) -> None:
        self.bound.append(var)
        for n in nodes:
            self.visit(n)
        self.bound.pop()

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self.visit(s.value)
        self._binding(s.var, s.body)

    def visit_Let(self, e: E.Let) -> None:
        self.visit(e.value)
        self._binding(e.var, e.body)

    def visit_Allocate(self, s: S.Allocate) -> None:
        for x in s.extents:
            self.visit(x)
        self.visit(s.condition)
        self._binding(s.buffer_var, s.body)

    def visit_Call(self, e: E.Call) -> None:
        if is_op_call(e, "tir.likely") and len(e.args) == 1:
            self.sites.append(Site(e, tuple(self.loops), tuple(self.bound)))
        # A cross-thread reduction must run in every thread alike: never split around one.
        if "thread_allreduce" in str(getattr(e.op, "name", "")):
            self.cross_thread = True
        self.generic_visit(e)


def find_sites(body: S.Stmt) -> tuple[list[Site], bool]:
    """The ``likely`` sites of ``body``, and whether it holds a cross-thread reduction."""
    finder = _SiteFinder()
    finder.visit(body)
    return finder.sites, finder.cross_thread


def _linear(an: Analyzer, e: E.PrimExpr, v: E.Var) -> Optional[tuple[int, E.PrimExpr]]:
    """``(k, rest)`` with ``e == k * v + rest``, ``k`` a constant and ``rest`` free of ``v``, or None."""
    form = linear_form(e, [v])
    k = None if form is None else const_int(an.simplify(form[0][0]))
    return None if form is None or k is None else (k, an.simplify(form[1]))


def _extremes(an: Analyzer, d: E.PrimExpr, v: E.Var,
              relaxed: list[Loop]) -> Optional[tuple[int, E.PrimExpr, E.PrimExpr]]:
    """``(k, hi, lo)``: ``d == k*v + r`` where ``r`` ranges over ``[lo, hi]`` as the relaxed loops do."""
    form = linear_form(d, [v] + [var for var, _, _ in relaxed])
    # Constant coefficients as written: no need to ask the simplifier for the affine form.
    ints = [] if form is None else [k for k in map(const_int, form[0]) if k is not None]
    if form is not None and len(ints) == len(form[0]):
        coefs, hi, lo = ints, form[1], form[1]
        for (var, mn, ext), c in zip(relaxed, coefs[1:]):
            if c:
                last = mn + ext - ops.const(1, ext.dtype)
                hi = hi + ops.mul(ops.const(c, var.dtype), last if c > 0 else mn)
                lo = lo + ops.mul(ops.const(c, var.dtype), mn if c > 0 else last)
        return coefs[0], an.simplify(hi), an.simplify(lo)
    lin = _linear(an, an.simplify(d), v)  # a form the simplifier must bring to affine first
    if lin is None:
        return None
    hi_d, lo_d = _relax(an, lin[1], relaxed, True), _relax(an, lin[1], relaxed, False)
    return None if hi_d is None or lo_d is None else (lin[0], hi_d, lo_d)


def _relax(an: Analyzer, e: E.PrimExpr, loops: list[Loop], upper: bool) -> Optional[E.PrimExpr]:
    """The largest (``upper``) or smallest value of ``e`` over the relaxed ``loops``, or None."""
    for var, mn, ext in reversed(loops):
        lin = _linear(an, e, var)
        if lin is None:
            return None
        k, rest = lin
        if k:
            at = mn + ext - ops.const(1, ext.dtype) if (k > 0) == upper else mn
            e = an.simplify(rest + ops.mul(ops.const(k, var.dtype), at))
    return e


def _max(a: Optional[E.PrimExpr], b: Optional[E.PrimExpr], an: Analyzer) -> Optional[E.PrimExpr]:
    return b if a is None else a if b is None else an.simplify(ops.maximum(a, b))


def _min(a: Optional[E.PrimExpr], b: Optional[E.PrimExpr], an: Analyzer) -> Optional[E.PrimExpr]:
    return b if a is None else a if b is None else an.simplify(ops.minimum(a, b))


def intersect(an: Analyzer, a: Interval, b: Interval) -> Interval:
    """The intersection of two intervals."""
    return _max(a[0], b[0], an), _min(a[1], b[1], an)


_EVERYWHERE: Interval = (None, None)


def _difference(c: E.PrimExpr) -> Optional[tuple[str, E.PrimExpr]]:
    """``(kind, d)``: ``c <=> d < 0`` (kind "lt"), ``d == 0`` ("eq") or ``d != 0`` ("ne")."""
    if not isinstance(c, E.CmpOp) or not c.a.dtype.is_integer or c.a.dtype.lanes != 1:
        return None
    one = ops.const(1, c.a.dtype)
    if isinstance(c, E.LT):
        return "lt", c.a - c.b
    if isinstance(c, E.LE):
        return "lt", c.a - c.b - one
    if isinstance(c, E.GT):
        return "lt", c.b - c.a
    if isinstance(c, E.GE):
        return "lt", c.b - c.a - one
    return ("eq" if isinstance(c, E.EQ) else "ne"), c.a - c.b


def _decide_less(an: Analyzer, k: int, hi_d: E.PrimExpr, lo_d: E.PrimExpr) -> tuple[Interval, Interval]:
    """For ``k*v + r < 0`` with ``r`` in ``[lo_d, hi_d]``: where it always holds, where it never does."""
    dt = hi_d.dtype
    if k > 0:
        kc = ops.const(k, dt)
        true_hi = an.simplify(ops.floordiv(ops.const(-1, dt) - hi_d, kc) + ops.const(1, dt))
        false_lo = an.simplify(ops.floordiv(ops.const(k - 1, dt) - lo_d, kc))
        return (None, true_hi), (false_lo, None)
    qc = ops.const(-k, dt)
    true_lo = an.simplify(ops.floordiv(hi_d, qc) + ops.const(1, dt))
    false_hi = an.simplify(ops.floordiv(lo_d, qc) + ops.const(1, dt))
    return (true_lo, None), (None, false_hi)


def _decide_conjunct(an: Analyzer, c: E.PrimExpr, v: E.Var, relaxed: list[Loop],
                     fixed: list[E.Var]) -> tuple[Optional[Interval], Optional[Interval]]:
    """``(T, F)`` for one conjunct (see :func:`decide`)."""
    diff = _difference(c)
    if diff is None:
        return None, None
    kind, d = diff
    found = _extremes(an, d, v, relaxed)
    if found is None:
        return None, None
    k, hi_d, lo_d = found
    if uses_vars(hi_d, fixed) or uses_vars(lo_d, fixed):
        return None, None
    if k == 0:  # a condition of the relaxed loops alone: decided everywhere or nowhere
        if kind != "lt":
            return None, None
        return (_EVERYWHERE if an.can_prove(hi_d < 0) else None), (_EVERYWHERE if an.can_prove(lo_d >= 0) else None)
    if kind == "lt":
        return _decide_less(an, k, hi_d, lo_d)
    # ``k*v + r == 0`` for every relaxed value: r must not vary, and v is one point.
    point: Optional[Interval] = None
    if abs(k) == 1 and an.can_prove_equal(hi_d, lo_d):
        p = an.simplify(-hi_d if k == 1 else hi_d)
        point = (p, an.simplify(p + ops.const(1, p.dtype)))
    return (point, None) if kind == "eq" else (None, point)


def _conjuncts(c: E.PrimExpr) -> list[E.PrimExpr]:
    return _conjuncts(c.a) + _conjuncts(c.b) if isinstance(c, E.And) else [c]


def _reads_state(e: E.PrimExpr) -> bool:
    """Whether ``e``'s value could change while the loop runs (a memory read, an impure call)."""
    return bool(collect(e, lambda x: isinstance(x, E.BufferLoad))) or has_side_effect(e)


def decide(an: Analyzer, site: Site, v: E.Var,
           outer: tuple[Loop, ...] = ()) -> tuple[Optional[Interval], Optional[Interval]]:
    """``(T, F)``: the guard of ``site`` holds (T) or fails (F) for every relaxed iteration when ``v`` is inside.

    ``outer`` lists relaxed variables from outside the loop (thread indices,
    which must not make threads of one block split their loops differently).
    None is "unknown".

    >>> import loom
    >>> from loom.arith import Analyzer
    >>> v, j, n = loom.var("v"), loom.var("j"), loom.var("n")
    >>> site = Site(loom.likely(v * 4 + j < n), ((j, loom.const(0), loom.const(4)),), ())
    >>> holds, fails = decide(Analyzer(), site, v)
    >>> holds[0] is None and fails[1] is None   # v < ... holds, v >= ... fails
    True
    >>> print(holds[1], "|", fails[0])
    (n - 4) // 4 + 1 | (n + 3) // 4
    """
    cond = site.call.args[0]
    relaxed = list(outer) + list(site.loops)
    fixed = [v] + [var for var, _, _ in relaxed] + list(site.bound)
    if uses_vars(cond, list(site.bound)) or _reads_state(cond):
        return None, None
    for _, mn, ext in relaxed:  # a range that moves with v or with another relaxed variable
        if uses_vars(mn, fixed) or uses_vars(ext, fixed):
            return None, None
    true_iv: Optional[Interval] = _EVERYWHERE
    false_iv: Optional[Interval] = None
    for c in _conjuncts(cond):
        t, f = _decide_conjunct(an, c, v, relaxed, fixed)
        true_iv = None if t is None or true_iv is None else intersect(an, true_iv, t)
        if false_iv is None:  # one conjunct failing is enough for the conjunction to fail
            false_iv = f
    return true_iv, false_iv
