"""How the ``c`` target computes each math intrinsic: rules that rewrite ``tir.*`` calls into IR.

``rules_for(target)`` is what the plugin contributes through
``loom_intrinsic_rules``; LowerIntrin applies it before code generation, and
:class:`~loom_c.codegen.CRenderer` applies the same table to any call
LowerIntrin did not see.  Every math op becomes a ``call_pure_extern`` of the
C library function of its precision (``tir.exp`` on float32 -> ``expf``, on
float64 -> ``exp``), which the renderer calls lane by lane on vectors;
``sigmoid`` is ``1 / (1 + exp(-x))`` and ``rsqrt`` ``1 / sqrt(x)`` in IR; ``round``
is ``nearbyint`` (ties to even under the default rounding mode, as numpy's round).
Other float widths have no C type here: their calls are left alone.
With ``-fast_math`` (``c -fast_math``), ``exp``, ``log``, ``tanh``, ``sigmoid``
and ``erf`` of float32/float64 become the expansions of :mod:`loom.ir.fast_math`
(a polynomial in plain IR, 1-2 ulp), which stay vector code instead of one
library call per lane.

>>> import loom
>>> rules = rules_for(None)
>>> print(rules["tir.exp"](loom.exp(loom.var("x", "float32"))))
call_pure_extern('float32', 'expf', x)
>>> print(rules["tir.rsqrt"](loom.rsqrt(loom.var("y", "float64"))))
float64(1.0) / call_pure_extern('float64', 'sqrt', y)
>>> fast = rules_for(loom.target.Target("c -fast_math"))
>>> "expf" in str(fast["tir.exp"](loom.exp(loom.var("x", "float32"))))
False
"""

from __future__ import annotations

from typing import Any, Callable

from loom.errors import LoomTypeError
from loom.ir import expr as E
from loom.ir.dtype import DataType
from loom.ir.fast_math import EXPANSIONS
from loom.ir.intrin import call_pure_extern

__all__ = ["rules_for", "C_FUNCTIONS"]

Rule = Callable[[E.Call], "E.PrimExpr | None"]

#: The C library function (double precision name; float32 appends ``f``) computing each op.
C_FUNCTIONS = {
    "tir.exp": "exp", "tir.exp2": "exp2", "tir.log": "log", "tir.log2": "log2", "tir.log10": "log10",
    "tir.sqrt": "sqrt", "tir.tanh": "tanh", "tir.sin": "sin", "tir.cos": "cos", "tir.floor": "floor",
    "tir.ceil": "ceil", "tir.trunc": "trunc", "tir.fabs": "fabs", "tir.erf": "erf", "tir.round": "nearbyint",
    "tir.power": "pow",
}


def _libm(name: str, t: DataType) -> str:
    return name + "f" if t.bits == 32 else name


def _c_float(build: Callable[[DataType, list[E.PrimExpr]], E.PrimExpr]) -> Rule:
    """A rule for float32/float64 calls; other dtypes are left to the renderer (which rejects them)."""

    def rule(call: E.Call) -> E.PrimExpr | None:
        if not call.dtype.is_float or not all(a.dtype.is_float for a in call.args):
            raise LoomTypeError(f"{call.op.name} needs float arguments, got "
                                f"{', '.join(str(a.dtype) for a in call.args)} in {call}")
        if call.dtype.code != "float" or call.dtype.bits not in (32, 64):
            return None
        return build(call.dtype, list(call.args))

    return rule


def _splat(t: DataType, value: float) -> E.PrimExpr:
    one = E.FloatImm(t.element_of(), value)
    return one if t.lanes == 1 else E.Broadcast(one, t.lanes)


def _function(name: str) -> Rule:
    def build(t: DataType, args: list[E.PrimExpr]) -> E.PrimExpr:
        args = [a if a.dtype == t else E.Cast(t, a if a.dtype.lanes == t.lanes else E.Broadcast(a, t.lanes))
                for a in args]
        return call_pure_extern(t, _libm(name, t), *args)

    return _c_float(build)


def _sigmoid(t: DataType, args: list[E.PrimExpr]) -> E.PrimExpr:
    # -0.0 - x is exactly -x.
    e = call_pure_extern(t, _libm("exp", t), E.Sub(_splat(t, -0.0), args[0]))
    return E.Div(_splat(t, 1.0), E.Add(_splat(t, 1.0), e))


def _rsqrt(t: DataType, args: list[E.PrimExpr]) -> E.PrimExpr:
    return E.Div(_splat(t, 1.0), call_pure_extern(t, _libm("sqrt", t), args[0]))


def _expansion(expand: Callable[[E.PrimExpr], E.PrimExpr]) -> Rule:
    """The :mod:`loom.ir.fast_math` expansion (float32/float64 only, as every rule here)."""
    return _c_float(lambda t, args: expand(args[0]))


def rules_for(target: Any) -> dict[str, Rule]:
    """The ``c`` target's lowering rule of each math op (``target`` may be None: the defaults)."""
    rules = {
        **{op: _function(name) for op, name in C_FUNCTIONS.items()},
        "tir.sigmoid": _c_float(_sigmoid),
        "tir.rsqrt": _c_float(_rsqrt),
        "tir.prefetch": lambda call: None,  # kept: the code generator emits the cache hint
    }
    if target is not None and target.attrs.get("fast_math"):
        rules.update({op: _expansion(expand) for op, expand in EXPANSIONS.items()})
    return rules
