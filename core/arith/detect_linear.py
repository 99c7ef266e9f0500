"""Linear forms of index expressions (classic TVM's ``DetectLinearEquation`` / ``DetectClipBound``).

:func:`linear_form` reads ``expr`` as ``c0*v0 + c1*v1 + ... + base`` by a walk
over ``+``, ``-`` and ``*``: the coefficients may be symbolic, but free of the
variables, and every other node holding one of the variables makes the form
non-linear.  The walk only rearranges the expression (no simplifier), so it is
cheap; :func:`detect_linear_equation` simplifies what it returns.
:func:`detect_clip_bound` reads a conjunction of comparisons as a box.

Like TVM, the forms are those of mathematical integers: the expression's
arithmetic is taken not to wrap around.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import collect
from .analyzer import Analyzer

__all__ = ["linear_form", "detect_linear_equation", "detect_clip_bound"]

_Form = tuple[dict[int, E.PrimExpr], E.PrimExpr]  # ({index of a variable: coefficient}, base)


def _combine(a: _Form, b: _Form, sign: int) -> _Form:
    coefs = dict(a[0])
    for k, c in b[0].items():
        if k in coefs:
            coefs[k] = ops.add(coefs[k], c) if sign > 0 else ops.sub(coefs[k], c)
        else:
            coefs[k] = c if sign > 0 else ops.sub(ops.const(0, c.dtype), c)
    return coefs, (ops.add if sign > 0 else ops.sub)(a[1], b[1])


def _walk(e: E.PrimExpr, ids: dict[int, int]) -> Optional[_Form]:
    if isinstance(e, E.Var):
        return ({ids[id(e)]: ops.const(1, e.dtype)}, ops.const(0, e.dtype)) if id(e) in ids else ({}, e)
    if isinstance(e, (E.Add, E.Sub, E.Mul)):
        a, b = _walk(e.a, ids), _walk(e.b, ids)
        if a is None or b is None:
            return None
        if not a[0] and not b[0]:
            return {}, e  # free of the variables: kept as written
        if not isinstance(e, E.Mul):
            return _combine(a, b, 1 if isinstance(e, E.Add) else -1)
        if a[0] and b[0]:
            return None  # a product of two of the variables is not linear
        scale, form = (a[1], b) if not a[0] else (b[1], a)
        return {k: ops.mul(c, scale) for k, c in form[0].items()}, ops.mul(form[1], scale)
    # Any other node holding a variable (min, division, cast...) is not linear in it.
    return None if collect(e, lambda n: isinstance(n, E.Var) and id(n) in ids) else ({}, e)


def _check_vars(variables: Iterable[Any], where: str) -> list[E.Var]:
    out = list(variables)
    for i, v in enumerate(out):
        if not isinstance(v, E.Var):
            raise LoomTypeError(f"{where}: vars[{i}] must be a Var, got {type(v).__name__} {v!r}")
    return out


def _check_expr(e: Any, where: str, what: str) -> E.PrimExpr:
    if isinstance(e, (bool, int)):
        return ops.convert_expr(e)
    if not isinstance(e, E.PrimExpr):
        raise LoomTypeError(f"{where}: {what} must be an expression, got {type(e).__name__} {e!r}")
    return e


def linear_form(expr: E.PrimExpr, variables: Sequence[E.Var]) -> Optional[tuple[list[E.PrimExpr], E.PrimExpr]]:
    """``(coefficients, base)`` with ``expr == sum(c*v) + base``, unsimplified; None when not linear.

    A coefficient may use other variables but none of ``variables``.

    >>> import loom
    >>> a, b = loom.var("a"), loom.var("b")
    >>> coefs, base = linear_form(a * 4 + (a + 1) * b, [a])
    >>> str(coefs[0]), str(base)
    ('4 + b', 'b')
    """
    ids: dict[int, int] = {}
    for i, v in enumerate(variables):
        ids.setdefault(id(v), i)
    form = _walk(expr, ids)
    if form is None:
        return None
    coefs = [form[0].get(ids[id(v)], ops.const(0, v.dtype)) for v in variables]
    return coefs, form[1]


def detect_linear_equation(expr: Any, vars: Iterable[E.Var]) -> list[E.PrimExpr]:  # noqa: A002 - TVM's name
    """The coefficients of ``expr`` in each of ``vars``, then its constant term, simplified.

    An empty list when ``expr`` is not linear in ``vars`` (a product of two of
    them, one inside a ``min`` or a division...).  Coefficients may be
    symbolic in other variables.

    >>> import loom
    >>> a, b = loom.var("a"), loom.var("b")
    >>> [str(x) for x in detect_linear_equation(a * 4 + b * 6 + 7, [a])]
    ['4', 'b * 6 + 7']
    >>> [str(x) for x in detect_linear_equation(a * b + 7, [a])], detect_linear_equation(a * a, [a])
    (['b', '7'], [])
    """
    expr = _check_expr(expr, "detect_linear_equation", "expr")
    variables = _check_vars(vars, "detect_linear_equation")
    found = linear_form(expr, variables)
    if found is None:
        return []
    an = Analyzer()
    return [an.simplify(c) for c in found[0]] + [an.simplify(found[1])]


def _conjuncts(c: E.PrimExpr) -> list[E.PrimExpr]:
    return _conjuncts(c.a) + _conjuncts(c.b) if isinstance(c, E.And) else [c]


def _mentions(e: E.PrimExpr, v: E.Var) -> bool:
    return bool(collect(e, lambda n: n is v))


def _nonneg_form(c: E.PrimExpr) -> Optional[E.PrimExpr]:
    """``d`` with ``c <=> d >= 0``, for an integer comparison ``<, <=, >, >=``."""
    if not isinstance(c, (E.LT, E.LE, E.GT, E.GE)) or not c.a.dtype.is_int or c.a.dtype.lanes != 1:
        return None
    one = ops.const(1, c.a.dtype)
    if isinstance(c, E.LT):
        return c.b - c.a - one
    if isinstance(c, E.LE):
        return c.b - c.a
    if isinstance(c, E.GT):
        return c.a - c.b - one
    return c.a - c.b


def detect_clip_bound(cond: Any, vars: Iterable[E.Var]) -> list[Optional[E.PrimExpr]]:  # noqa: A002 - TVM's name
    """``[min0, max0, min1, max1, ...]``: the box of ``vars`` a conjunction of comparisons describes.

    Every conjunct of ``cond`` must be a signed-integer comparison
    (``<, <=, >, >=``) of exactly one of ``vars``, linear in it with a constant
    coefficient; otherwise the answer is an empty list.  A side no conjunct
    bounds is None.  Bounds are inclusive and simplified.

    >>> import loom
    >>> a, b = loom.var("a"), loom.var("b")
    >>> [str(x) for x in detect_clip_bound(loom.all(a < b * 6, a - 1 > 0), [a])]
    ['2', 'b * 6 - 1']
    >>> detect_clip_bound(a < b, [a, b]), detect_clip_bound(a * 2 >= 7, [a])[0].value
    ([], 4)
    """
    cond = _check_expr(cond, "detect_clip_bound", "cond")
    variables = _check_vars(vars, "detect_clip_bound")
    lo: list[Optional[E.PrimExpr]] = [None] * len(variables)
    hi: list[Optional[E.PrimExpr]] = [None] * len(variables)
    for c in _conjuncts(cond):
        used = [i for i, v in enumerate(variables) if _mentions(c, v)]
        d = _nonneg_form(c)
        if len(used) != 1 or d is None:
            return []
        i = used[0]
        found = linear_form(d, [variables[i]])
        k = None if found is None else Analyzer().simplify(found[0][0])
        if found is None or not isinstance(k, E.IntImm) or k.value == 0:
            return []
        base, kv = found[1], ops.const(k.value, d.dtype)
        if k.value > 0:  # k*v + base >= 0  <=>  v >= ceil(-base / k)
            new = ops.sub(ops.const(0, d.dtype), ops.floordiv(base, kv))
            old = lo[i]
            lo[i] = new if old is None else ops.maximum(old, new)
        else:  # v <= floor(base / -k)
            new = ops.floordiv(base, ops.const(-k.value, d.dtype))
            old = hi[i]
            hi[i] = new if old is None else ops.minimum(old, new)
    an = Analyzer()
    out: list[Optional[E.PrimExpr]] = []
    for a, b in zip(lo, hi):
        out += [None if a is None else an.simplify(a), None if b is None else an.simplify(b)]
    return out
