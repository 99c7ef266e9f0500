"""Exact index ranges over a loop nest: affine forms, boxes and guards.

:mod:`loom.transform.entry_checks` checks a parameter buffer's accesses once,
when the function starts.  For that check to refuse only calls that really go
out of bounds, the range it computes for an index must be *attained*, not just
contain the index.  This module computes ranges only where they are exact:

- an index is an affine form ``sum(c_v * v) + rest`` of loop variables ``v``
  (``For`` loops, bound threads, the lanes of a ``Ramp``), where ``rest`` and
  every ``c_v`` use only the function's parameters; its minimum and maximum
  over a box of integers are attained at corners;
- a guard that bounds one loop variable (``i - pad >= 0``, ``i < n``) narrows
  that variable's box, which stays a box;
- a guard on a sum of loop variables (``io * 8 + ii < n``, a split's tail) is
  a :class:`Group`: an index that is the same sum plus a constant gets the
  clipped range, which is attained when the sum takes every integer between its
  ends (:meth:`Group.contiguous`, part of the check's condition);
- anything else (a guard the forms cannot express, a loop whose bounds use
  another loop's variable, an index read from memory) is *opaque*: no range.

Every expression this module builds is ``int64`` over the parameters, so an
``int32`` sum that would wrap in the program is compared unwrapped.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import attrs

from ..ir import expr as E
from ..ir.expr_ops import all as all_of
from ..ir.expr_ops import cast, const, floordiv, maximum, minimum
from ..ir.functor import collect
from ._util import has_side_effect, is_op_call

__all__ = ["Affine", "Group", "Region", "LANE", "as_int64"]

I64 = "int64"

#: The lane index of a vector expression: a ``Ramp`` is ``base + stride * LANE``.
LANE = E.Var("lane", "int32")


def as_int64(e: E.PrimExpr) -> E.PrimExpr:
    """``e`` widened to int64 (the type of every expression built here)."""
    return e if e.dtype == I64 else cast(e, I64)


def _int(e: E.PrimExpr) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


@attrs.frozen
class Affine:
    """``sum(coef * var for var, coef in terms) + rest``; ``terms`` maps ``id(var)`` to ``(var, coef)``."""

    terms: dict[int, tuple[E.Var, E.PrimExpr]]
    rest: E.PrimExpr

    @staticmethod
    def constant(e: E.PrimExpr) -> "Affine":
        return Affine({}, as_int64(e))

    def plus(self, other: "Affine", sign: int = 1) -> "Affine":
        terms = dict(self.terms)
        for k, (v, c) in other.terms.items():
            c = c if sign > 0 else const(0, I64) - c
            terms[k] = (v, terms[k][1] + c) if k in terms else (v, c)
        rest = self.rest + other.rest if sign > 0 else self.rest - other.rest
        return Affine({k: vc for k, vc in terms.items() if _int(vc[1]) != 0}, rest)

    def scaled(self, factor: E.PrimExpr) -> "Affine":
        terms = {k: (v, c * factor) for k, (v, c) in self.terms.items()}
        return Affine({k: vc for k, vc in terms.items() if _int(vc[1]) != 0}, self.rest * factor)

    def int_coefs(self) -> dict[int, int] | None:
        """The coefficients as Python ints, or None if one is symbolic."""
        out = {k: _int(c) for k, (_, c) in self.terms.items()}
        return None if any(c is None for c in out.values()) else out  # type: ignore[return-value]


@attrs.define
class Group:
    """A guard ``lo <= sum(coefs[v] * v) <= hi`` over two or more loop variables (``lo``/``hi`` may be None)."""

    coefs: dict[int, int]  # normalized: divided by their gcd, the first positive
    lo: Optional[E.PrimExpr] = None
    hi: Optional[E.PrimExpr] = None


@attrs.define
class Region:
    """What is known where an access runs: the loop variables' boxes, the conditions on the
    parameters, the guards on sums of loop variables, and the values of let-bound variables.

    ``opaque`` means something on the way down could not be expressed: no range is computed."""

    params: frozenset[int]
    box: dict[int, tuple[E.Var, E.PrimExpr, E.PrimExpr]] = attrs.field(factory=dict)  # id -> (var, lo, hi)
    conds: tuple[E.PrimExpr, ...] = ()
    groups: tuple[Group, ...] = ()
    lets: dict[int, E.PrimExpr] = attrs.field(factory=dict)
    lanes: int = 1
    opaque: bool = False

    def copy(self, **changes: Any) -> "Region":
        fields = {"box": dict(self.box), "groups": tuple(attrs.evolve(g) for g in self.groups),
                  "lets": dict(self.lets)}
        return attrs.evolve(self, **{**fields, **changes})

    # -- extending the region on the way down

    def with_loop(self, var: E.Var, start: E.PrimExpr, extent: E.PrimExpr) -> "Region":
        lo, n = self.affine(start), self.affine(extent)
        if self.opaque or lo is None or n is None or lo.terms or n.terms:
            return self.copy(opaque=True)  # bounds that use another loop's variable: not a box
        out = self.copy()
        out.box[id(var)] = (var, lo.rest, lo.rest + n.rest - const(1, I64))
        return out

    def with_let(self, var: E.Var, value: E.PrimExpr) -> "Region":
        out = self.copy()
        out.lets[id(var)] = value
        return out

    def with_lanes(self, lanes: int) -> "Region":
        if lanes == self.lanes or lanes == 1:
            return self
        if self.lanes != 1:
            return self.copy(opaque=True)  # a vector of another width inside a vector
        out = self.copy(lanes=lanes)
        out.box[id(LANE)] = (LANE, const(0, I64), const(lanes - 1, I64))
        return out

    def with_guard(self, cond: E.PrimExpr, holds: bool = True) -> "Region":
        """The region narrowed to where ``cond`` is ``holds``; opaque if that cannot be expressed."""
        out = self.copy()
        if not out.opaque and not out._assume(cond, holds):
            out.opaque = True
        return out

    def _assume(self, c: E.PrimExpr, holds: bool) -> bool:
        if is_op_call(c, "tir.likely"):
            return self._assume(c.args[0], holds)
        if isinstance(c, E.Not):
            return self._assume(c.a, not holds)
        if isinstance(c, (E.And, E.Or)) and holds == isinstance(c, E.And):
            return self._assume(c.a, holds) and self._assume(c.b, holds)
        if isinstance(c, E.CmpOp):
            return self._compare(c, holds)
        return False

    def _compare(self, c: E.CmpOp, holds: bool) -> bool:
        a, b = self.affine(c.a), self.affine(c.b)
        if a is None or b is None:
            return False
        d = a.plus(b, -1)  # the guard is `d OP 0`
        op: type[E.CmpOp] = type(c) if holds else _NEGATED[type(c)]
        if not d.terms:
            self.conds += (op(d.rest, const(0, I64)),)
            return True
        coefs = d.int_coefs()
        if coefs is None or op is E.NE:
            return False
        neg = const(0, I64) - d.rest  # sum(coefs * v) OP neg
        one = const(1, I64)
        hi = {E.LT: neg - one, E.LE: neg, E.EQ: neg}.get(op)
        lo = {E.GT: neg + one, E.GE: neg, E.EQ: neg}.get(op)
        if len(coefs) == 1:
            (k, coef), = coefs.items()
            self._narrow(k, coef, lo, hi)
            return True
        return self._group(coefs, lo, hi)

    def _narrow(self, k: int, coef: int, lo: E.PrimExpr | None, hi: E.PrimExpr | None) -> None:
        """Narrow var ``k``'s box by ``lo <= coef * v <= hi``."""
        var, vlo, vhi = self.box[k]
        m = const(abs(coef), I64)
        if coef < 0:  # -m*v in [lo, hi]  <=>  v in [-hi/m, -lo/m]
            lo, hi = (None if hi is None else const(0, I64) - hi), (None if lo is None else const(0, I64) - lo)
        if hi is not None:
            vhi = minimum(vhi, floordiv(hi, m))
        if lo is not None:
            vlo = maximum(vlo, const(0, I64) - floordiv(const(0, I64) - lo, m))  # ceil(lo / m)
        self.box[k] = (var, vlo, vhi)

    def _group(self, coefs: dict[int, int], lo: E.PrimExpr | None, hi: E.PrimExpr | None) -> bool:
        g = 0
        for c in coefs.values():
            g = math.gcd(g, c)
        first = next(iter(sorted(coefs)))
        if coefs[first] < 0:
            g = -g
        norm = {k: c // g for k, c in coefs.items()}
        m = const(abs(g), I64)
        if g < 0:
            lo, hi = (None if hi is None else const(0, I64) - hi), (None if lo is None else const(0, I64) - lo)
        hi = None if hi is None else floordiv(hi, m)
        lo = None if lo is None else const(0, I64) - floordiv(const(0, I64) - lo, m)
        for grp in self.groups:
            if grp.coefs == norm:
                grp.hi = hi if grp.hi is None else (grp.hi if hi is None else minimum(grp.hi, hi))
                grp.lo = lo if grp.lo is None else (grp.lo if lo is None else maximum(grp.lo, lo))
                return True
            if set(grp.coefs) & set(norm):
                return False  # two sums over one variable: their joint range is not a box
        self.groups += (Group(norm, lo, hi),)
        return True

    # -- affine forms

    def affine(self, e: E.PrimExpr) -> Affine | None:
        """``e`` as an affine form of the loop variables, or None."""
        if isinstance(e, E.IntImm):
            return Affine.constant(e)
        if isinstance(e, E.Var):
            if id(e) in self.box:
                return Affine({id(e): (e, const(1, I64))}, const(0, I64))
            if id(e) in self.lets:
                return self.affine(self.lets[id(e)])
            return Affine.constant(e) if id(e) in self.params and e.dtype.is_integer else None
        if isinstance(e, (E.Add, E.Sub)):
            a, b = self.affine(e.a), self.affine(e.b)
            return None if a is None or b is None else a.plus(b, 1 if isinstance(e, E.Add) else -1)
        if isinstance(e, E.Mul):
            a, b = self.affine(e.a), self.affine(e.b)
            if a is None or b is None or (a.terms and b.terms):
                return None
            return b.scaled(a.rest) if not a.terms else a.scaled(b.rest)
        if isinstance(e, E.Ramp):
            base, stride = self.affine(e.base), self.affine(e.stride)
            if base is None or stride is None or stride.terms or self.lanes != e.lanes:
                return None
            return base.plus(Affine({id(LANE): (LANE, stride.rest)}, const(0, I64)))
        if isinstance(e, E.Broadcast):
            return self.affine(e.value)
        if isinstance(e, E.Cast) and e.dtype.is_integer and e.value.dtype.is_integer:
            inner = self.affine(e.value)
            widening = e.value.dtype.is_int and e.dtype.is_int and e.dtype.bits >= e.value.dtype.bits
            if inner is not None and (widening or not inner.terms):
                return inner if widening else (Affine.constant(e) if e.dtype.lanes == 1 else None)
            return None
        if e.dtype.is_integer and e.dtype.lanes == 1 and self._of_params(e):
            return Affine.constant(e)  # n // 2, min(n, m): exact as the program computes it
        return None

    def _of_params(self, e: E.PrimExpr) -> bool:
        if has_side_effect(e) or collect(e, lambda n: isinstance(n, (E.BufferLoad, E.Let))):
            return False
        return all(id(v) in self.params for v in collect(e, lambda n: isinstance(n, E.Var)))

    # -- ranges

    def runs(self) -> list[E.PrimExpr]:
        """Conditions on the parameters under which some point of the region exists."""
        out = list(self.conds)
        out += [lo <= hi for _, lo, hi in self.box.values()]
        for g in self.groups:
            glo, ghi = self._clipped(g)
            out += [glo <= ghi, self.contiguous(g)]
        return out

    def span(self, coefs: dict[int, tuple[E.Var, E.PrimExpr]]) -> tuple[E.PrimExpr, E.PrimExpr]:
        """The least and greatest ``sum(c * v)`` over the box (attained at corners)."""
        lo, hi = const(0, I64), const(0, I64)
        for k, (_, c) in coefs.items():
            _, vlo, vhi = self.box[k]
            n = _int(c)
            if n is not None:
                a, b = (c * vlo, c * vhi) if n >= 0 else (c * vhi, c * vlo)
            else:
                a, b = minimum(c * vlo, c * vhi), maximum(c * vlo, c * vhi)
            lo, hi = lo + a, hi + b
        return lo, hi

    def _clipped(self, g: Group) -> tuple[E.PrimExpr, E.PrimExpr]:
        lo, hi = self.span({k: (self.box[k][0], const(c, I64)) for k, c in g.coefs.items()})
        return (lo if g.lo is None else maximum(lo, g.lo)), (hi if g.hi is None else minimum(hi, g.hi))

    def contiguous(self, g: Group) -> E.PrimExpr:
        """Whether the group's sum takes every integer between its least and greatest value: with
        coefficients ``c1 <= c2 <= ...`` (absolute), ``c1 == 1`` and each next one at most one more
        than the span of the ones before."""
        terms = sorted(g.coefs.items(), key=lambda kc: abs(kc[1]))
        if abs(terms[0][1]) != 1:
            return const(False)
        reach: E.PrimExpr = const(0, I64)
        conds: list[E.PrimExpr] = []
        for k, c in terms:
            _, vlo, vhi = self.box[k]
            conds.append(const(abs(c), I64) <= reach + const(1, I64))
            reach = reach + const(abs(c), I64) * (vhi - vlo)
        return all_of(*conds)

    def index_range(self, index: E.PrimExpr) -> tuple[E.PrimExpr, E.PrimExpr] | None:
        """The exact least and greatest value of ``index`` over the region, or None."""
        form = self.affine(index)
        if self.opaque or form is None:
            return None
        if any(k not in self.box for k in form.terms):
            return None
        for g in self.groups:
            if not set(g.coefs) & set(form.terms):
                continue
            coefs = form.int_coefs()
            factor = _multiple(coefs, g.coefs)  # the form's part over the group's variables is `factor * sum`
            if factor is None:
                return None
            glo, ghi = self._clipped(g)
            f = const(factor, I64)
            lo, hi = (glo * f, ghi * f) if factor > 0 else (ghi * f, glo * f)
            rlo, rhi = self.span({k: vc for k, vc in form.terms.items() if k not in g.coefs})
            return lo + rlo + form.rest, hi + rhi + form.rest
        lo, hi = self.span(form.terms)
        return lo + form.rest, hi + form.rest


_NEGATED: dict[type[E.CmpOp], type[E.CmpOp]] = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT, E.EQ: E.NE, E.NE: E.EQ}


def _multiple(coefs: dict[int, int] | None, group: dict[int, int]) -> int | None:
    """``f`` with ``coefs[k] == f * group[k]`` for each of the group's variables, or None."""
    if coefs is None or not set(group) <= set(coefs):
        return None
    k0 = next(iter(group))
    f, r = divmod(coefs[k0], group[k0])
    return f if r == 0 and f != 0 and all(coefs[k] == f * c for k, c in group.items()) else None
