"""Compilation of expression nodes into closures (one rule per node class).

Integer scalars are Python ints wrapped to their width after each operation
that can overflow; ``Div``/``Mod`` truncate toward zero and ``FloorDiv``/
``FloorMod`` round toward negative infinity; integer division by zero raises
:class:`DivisionByZero`.  Floats are numpy scalars/arrays of the exact dtype
(IEEE; the caller runs under ``numpy.errstate(all="ignore")``).  ``Min``/``Max``
are ``a if a < b else b`` / ``a if a > b else b`` for every dtype (as TVM's
code generators emit them), so a NaN operand chooses the other side only when it
is ``a``.  ``And``/``Or``/``Select`` evaluate both operands.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir.dtype import DataType
from ._codegen import Code, function, lambda_, plain
from ._errors import DivisionByZero
from ._memory import compile_load
from . import _values as V

__all__ = ["EXPR_RULES"]

_CMP = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}
_MIN = "(x if (x := {0}) < (y := {1}) else y)"
_MAX = "(x if (x := {0}) > (y := {1}) else y)"
_VMIN = "WHERE((x := {0}) < (y := {1}), x, y)"
_VMAX = "WHERE((x := {0}) > (y := {1}), x, y)"


def _int_helpers(fname: str, node: E.PrimExpr) -> dict[type, Callable[[int, int], int]]:
    """Division helpers that name the offending expression when the divisor is zero."""

    def zero() -> None:
        raise DivisionByZero(f"{fname}: integer division by zero in {node}")

    def tdiv(a: int, b: int) -> int:
        if b == 0:
            zero()
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    def tmod(a: int, b: int) -> int:
        if b == 0:
            zero()
        r = abs(a) % abs(b)
        return -r if a < 0 else r

    def fdiv(a: int, b: int) -> int:
        if b == 0:
            zero()
        return a // b

    def fmod(a: int, b: int) -> int:
        if b == 0:
            zero()
        return a % b

    return {E.Div: tdiv, E.Mod: tmod, E.FloorDiv: fdiv, E.FloorMod: fmod}


def _int_template(cls: type, t: DataType, divisor: Any) -> tuple[str, dict[str, Any]]:
    """The scalar integer template of ``cls``; ``divisor`` is a known constant divisor or None."""
    wrap, env = V.wrap_template(t)
    simple = {E.Add: "{0} + {1}", E.Sub: "{0} - {1}", E.Mul: "{0} * {1}"}
    if cls in simple:
        return wrap.format(simple[cls]), env
    if cls is E.Min:
        return _MIN, {}
    if cls is E.Max:
        return _MAX, {}
    fast = isinstance(divisor, int) and not t.is_bool and divisor > 0
    if fast and cls is E.Div:  # no overflow: |result| <= |a|
        return ("{0} // {1}" if t.is_uint else "(x // {1} if (x := {0}) >= 0 else -(-x // {1}))"), {}
    if fast and cls is E.Mod:
        return ("{0} % {1}" if t.is_uint else "(x % {1} if (x := {0}) >= 0 else -(-x % {1}))"), {}
    if fast and cls is E.FloorDiv:
        return "{0} // {1}", {}
    if fast and cls is E.FloorMod:
        return "{0} % {1}", {}
    if cls in (E.Div, E.FloorDiv):  # INT_MIN / -1 overflows
        return wrap.format("DIV({0}, {1})"), env
    return ("bool(DIV({0}, {1}))" if t.is_bool else "DIV({0}, {1})"), {}


_FLOAT = {
    E.Add: "{0} + {1}", E.Sub: "{0} - {1}", E.Mul: "{0} * {1}", E.Div: "{0} / {1}",
    E.Mod: "FMOD({0}, {1})", E.FloorDiv: "FLOOR({0} / {1})",
}
_FLOAT_FLOORMOD = "x = {0}\ny = {1}\nreturn x - FLOOR(x / y) * y"


def _binary(comp: Any, node: E.BinaryOp) -> Code:
    cls = type(node)
    t = node.a.dtype
    a, b = comp.expr(node.a), comp.expr(node.b)
    k = V.kind(t)
    if k == "handle":
        raise LoomTypeError(f"{comp.fname}: the interpreter cannot compute {cls.__name__} of handles in {node}")
    if cls in _CMP:
        return lambda_("{0} %s {1}" % _CMP[cls], [a, b])
    if cls is E.And:
        return lambda_("({0}) & ({1})", [a, b])
    if cls is E.Or:
        return lambda_("({0}) | ({1})", [a, b])
    vector = t.lanes > 1
    if k == "float":
        if cls in (E.Min, E.Max):
            return lambda_((_VMIN if cls is E.Min else _VMAX) if vector else (_MIN if cls is E.Min else _MAX),
                           [a, b], WHERE=np.where)
        if cls is E.FloorMod:
            return function(_FLOAT_FLOORMOD, [a, b], FLOOR=np.floor)
        template = _FLOAT[cls]
        helpers = {k: fn for k, fn in (("FMOD", np.fmod), ("FLOOR", np.floor)) if k in template}
        return lambda_(template, [a, b], **helpers)
    int_helpers = _int_helpers(comp.fname, node)
    if not vector:
        divisor = b.const if b.is_const else None
        template, env = _int_template(cls, t, divisor)
        if "DIV" in template:
            env["DIV"] = int_helpers[cls]
        return lambda_(template, [a, b], **env)
    if cls in (E.Min, E.Max):
        return lambda_(_VMIN if cls is E.Min else _VMAX, [a, b], WHERE=np.where)
    if k == "int" and cls in (E.Add, E.Sub, E.Mul):  # numpy integer arrays wrap natively
        return lambda_({E.Add: "{0} + {1}", E.Sub: "{0} - {1}", E.Mul: "{0} * {1}"}[cls], [a, b])
    # Division and bool arithmetic: lane by lane with the exact scalar rules.
    template, env = _int_template(cls, t.element_of(), None)
    if "DIV" in template:
        env["DIV"] = int_helpers[cls]
    lane = plain(template, 2, **env)
    npd = V.np_dtype(t)

    def lanes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.array([lane(p, q) for p, q in zip(x.tolist(), y.tolist())], dtype=npd)

    return lambda_("LANES({0}, {1})", [a, b], LANES=lanes)


def _var(comp: Any, node: E.Var) -> Code:
    return Code.of_slot(comp.slot_of(node))


def _imm(comp: Any, node: Any) -> Code:
    return Code.of_const(V.const_of(node.value, node.dtype))


def _string(comp: Any, node: E.StringImm) -> Code:
    return Code.of_const(node.value)


def _cast(comp: Any, node: E.Cast) -> Code:
    value = comp.expr(node.value)
    src = node.value.dtype
    if src == node.dtype:
        return value
    if V.kind(src) == "int" and V.kind(node.dtype) == "int" and src.lanes == 1:
        lo, hi = V.int_range(src)
        dlo, dhi = V.int_range(node.dtype)
        if dlo <= lo and hi <= dhi:
            return value  # widening: the Python int is already right
        wrap, env = V.wrap_template(node.dtype)
        return lambda_(wrap.format("{0}"), [value], **env)
    return lambda_("CAST({0})", [value], CAST=V.cast_fn(src, node.dtype))


def _not(comp: Any, node: E.Not) -> Code:
    return lambda_("~{0}" if node.dtype.lanes > 1 else "not {0}", [comp.expr(node.a)])


def _select(comp: Any, node: E.Select) -> Code:
    ops = [comp.expr(node.condition), comp.expr(node.true_value), comp.expr(node.false_value)]
    if node.condition.dtype.lanes > 1:
        return lambda_("WHERE({0}, {1}, {2})", ops, WHERE=np.where)
    return function("c = {0}\nt = {1}\ne = {2}\nreturn t if c else e", ops)


def _ramp(comp: Any, node: E.Ramp) -> Code:
    t = node.dtype
    if V.kind(t) not in ("int", "float"):
        raise LoomTypeError(f"{comp.fname}: cannot evaluate a Ramp of {t}")
    npd = V.np_dtype(t)
    steps = np.arange(node.lanes, dtype=npd)
    steps.flags.writeable = False
    return lambda_("STEPS * T({1}) + T({0})", [comp.expr(node.base), comp.expr(node.stride)], STEPS=steps, T=npd.type)


def _broadcast(comp: Any, node: E.Broadcast) -> Code:
    return lambda_("FULL(LANES, {0}, NP)", [comp.expr(node.value)], FULL=np.full, LANES=node.lanes,
                   NP=V.np_dtype(node.dtype))


def _shuffle(comp: Any, node: E.Shuffle) -> Code:
    t = node.dtype
    if V.kind(t) == "handle":
        raise LoomTypeError(f"{comp.fname}: cannot evaluate a Shuffle of {t}")
    picks = np.array(node.index_values, dtype=np.intp)
    picks.flags.writeable = False
    npd, ops = V.np_dtype(t), [comp.expr(v) for v in node.vectors]
    # Scalars and vectors alike become 1-D arrays; their concatenation's lanes are picked.
    lanes = "CAT((" + "".join(f"ATLEAST1(ASARRAY({{{k}}}, NP)), " for k in range(len(ops))) + "))[PICKS]"
    env = dict(CAT=np.concatenate, ATLEAST1=np.atleast_1d, ASARRAY=np.asarray, NP=npd, PICKS=picks)
    if t.lanes > 1:
        return lambda_(lanes, ops, **env)
    return lambda_(f"SCALAR({lanes})", ops, SCALAR=lambda x: V.from_numpy(x, t), **env)


def _let(comp: Any, node: E.Let) -> Code:
    value = comp.expr(node.value)
    shadows = comp.in_scope(node.var)  # the same Var bound again inside its own scope
    slot = comp.bind(node.var)
    try:
        body = comp.expr(node.body)
    finally:
        comp.unbind(node.var)
    if shadows:
        return function("old = f[SLOT]\nf[SLOT] = {0}\nr = {1}\nf[SLOT] = old\nreturn r", [value, body], SLOT=slot)
    return function("f[SLOT] = {0}\nreturn {1}", [value, body], SLOT=slot)


def _load(comp: Any, node: E.BufferLoad) -> Code:
    return compile_load(comp, node)


def _call(comp: Any, node: E.Call) -> Code:
    from ._calls import compile_call

    return compile_call(comp, node, want_result=True)


EXPR_RULES: dict[type, Callable[[Any, Any], Code]] = {
    E.Var: _var, E.IntImm: _imm, E.FloatImm: _imm, E.StringImm: _string, E.Cast: _cast,
    E.BinaryOp: _binary, E.Not: _not, E.Select: _select, E.Ramp: _ramp, E.Broadcast: _broadcast,
    E.Shuffle: _shuffle,
    E.Let: _let, E.BufferLoad: _load, E.Call: _call,
}
