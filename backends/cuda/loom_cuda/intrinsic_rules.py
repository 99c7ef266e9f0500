"""How the ``cuda`` target computes each math intrinsic: rules that rewrite ``tir.*`` calls into IR.

``rules_for(target)`` is what the plugin contributes through
``loom_intrinsic_rules``; LowerIntrin applies it before code generation, and
:class:`~loom_cuda.codegen.CUDARenderer` applies the same table to calls
LowerIntrin did not see.  Each op becomes a ``call_pure_extern`` of CUDA's
device math library at the operand's precision (``expf`` for float32, ``exp``
for float64).  With ``-fast_math`` the float32 functions that have a fast
hardware approximation use it (``__expf``, ``__logf``, ``__sinf``, ``__powf``...:
a few ulp instead of one, see the CUDA programming guide's table of intrinsic
functions).  ``float16``/``bfloat16`` are computed in float32 and rounded back,
so their results are the correctly rounded float32 result rounded once more.

>>> import loom
>>> rules = rules_for(None)
>>> print(rules["tir.exp"](loom.exp(loom.var("x", "float32"))))
call_pure_extern('float32', 'expf', x)
>>> fast = rules_for(loom.target.Target("cuda -fast_math"))
>>> print(fast["tir.exp"](loom.exp(loom.var("x", "float32"))))
call_pure_extern('float32', '__expf', x)
>>> print(rules["tir.exp"](loom.exp(loom.var("h", "float16"))))
float16(call_pure_extern('float32', 'expf', float32(h)))
"""

from __future__ import annotations

from typing import Any, Callable

from loom.errors import LoomTypeError
from loom.ir import expr as E
from loom.ir.dtype import DataType
from loom.ir.intrin import call_pure_extern

__all__ = ["rules_for", "math_rules", "CUDA_FUNCTIONS", "FAST_FUNCTIONS", "DEVICE_MATH"]

Rule = Callable[[E.Call], "E.PrimExpr | None"]

#: The CUDA math function (double precision name; float32 appends ``f``) computing each op.
CUDA_FUNCTIONS = {
    "tir.exp": "exp", "tir.exp2": "exp2", "tir.log": "log", "tir.log2": "log2", "tir.log10": "log10",
    "tir.sqrt": "sqrt", "tir.rsqrt": "rsqrt", "tir.tanh": "tanh", "tir.sin": "sin", "tir.cos": "cos",
    "tir.floor": "floor", "tir.ceil": "ceil", "tir.trunc": "trunc", "tir.fabs": "fabs", "tir.erf": "erf",
    "tir.round": "rint", "tir.power": "pow",
}
#: float32 functions with a fast approximate hardware form, used under ``-fast_math``.
FAST_FUNCTIONS = {"expf": "__expf", "logf": "__logf", "log2f": "__log2f", "log10f": "__log10f", "sinf": "__sinf",
                  "cosf": "__cosf", "powf": "__powf"}
#: Every function the rules call: CUDA's device headers declare them.
DEVICE_MATH = frozenset({*CUDA_FUNCTIONS.values(), *(f + "f" for f in CUDA_FUNCTIONS.values()),
                         *FAST_FUNCTIONS.values(), "fmod", "fmodf", "floor", "floorf"})


def _splat(t: DataType, value: float) -> E.PrimExpr:
    one = E.FloatImm(t.element_of(), value)
    return one if t.lanes == 1 else E.Broadcast(one, t.lanes)


def _float_rule(build: Callable[[DataType, list[E.PrimExpr]], E.PrimExpr]) -> Rule:
    """A rule for float calls: float32/float64 directly, float16/bfloat16 through float32."""

    def rule(call: E.Call) -> E.PrimExpr | None:
        if not call.dtype.is_float or not all(a.dtype.is_float for a in call.args):
            raise LoomTypeError(f"{call.op.name} needs float arguments, got "
                                f"{', '.join(str(a.dtype) for a in call.args)} in {call}")
        t = call.dtype
        args = [a if a.dtype == t else E.Cast(t, a if a.dtype.lanes == t.lanes else E.Broadcast(a, t.lanes))
                for a in call.args]
        if t.bits in (32, 64) and t.code == "float":
            return build(t, args)
        if t.bits == 16:
            wide = DataType("float", 32, t.lanes)
            return E.Cast(t, build(wide, [E.Cast(wide, a) for a in args]))
        return None

    return rule


def _name(name: str, t: DataType, fast: bool) -> str:
    """The CUDA function computing ``name`` at ``t``'s precision."""
    fn = name + "f" if t.bits == 32 else name
    return FAST_FUNCTIONS.get(fn, fn) if fast and t.bits == 32 else fn


def _function(name: str, fast: bool) -> Rule:
    return _float_rule(lambda t, args: call_pure_extern(t, _name(name, t, fast), *args))


def rules_for(target: Any) -> dict[str, Rule]:
    """The ``cuda`` target's lowering rule of each math op (``target`` may be None: the defaults)."""
    return math_rules(bool(target is not None and target.attrs.get("fast_math")))


def math_rules(fast: bool) -> dict[str, Rule]:
    """The rules with or without the fast approximate float32 functions."""

    def sigmoid(t: DataType, args: list[E.PrimExpr]) -> E.PrimExpr:
        # -0.0 - x is exactly -x.
        e = call_pure_extern(t, _name("exp", t, fast), E.Sub(_splat(t, -0.0), args[0]))
        return E.Div(_splat(t, 1.0), E.Add(_splat(t, 1.0), e))

    return {**{op: _function(name, fast) for op, name in CUDA_FUNCTIONS.items()}, "tir.sigmoid": _float_rule(sigmoid)}
