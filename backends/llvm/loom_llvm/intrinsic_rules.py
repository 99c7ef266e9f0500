"""How the llvm target computes each math intrinsic: rules that rewrite ``tir.*`` calls into IR.

``rules_for(target)`` is what the plugin contributes through
``loom_intrinsic_rules``; LowerIntrin applies it before code generation, and the
code generator applies the same table to any call LowerIntrin did not see.

* An op with an LLVM intrinsic becomes ``tir.call_llvm_pure_intrin`` of it
  (``tir.exp`` -> ``llvm.exp``), which the code generator overloads on the
  operand type, vectors included (``llvm.exp.v8f32``): vectorized loops stay
  vectorized.  ``round`` is round-half-to-even, as numpy's, hence
  ``llvm.roundeven``.
* ``tanh`` and ``erf`` have no exact intrinsic: a ``call_pure_extern`` of libm
  (``tanhf``/``tanh``), lane by lane on vectors.
* ``sigmoid`` is ``1 / (1 + exp(-x))`` and ``rsqrt`` is ``1 / sqrt(x)``, in IR.
* 16-bit floats compute as the interpreter does: a bfloat16 op in float32,
  rounded once; a float16 op in float16 steps, with each library call made in
  float32 (operands cast up, the result cast back).
* With ``-fast_math`` (``llvm -fast_math``), ``exp``, ``log``, ``tanh``,
  ``sigmoid`` and ``erf`` become the vectorizable expansions of
  :mod:`loom.ir.fast_math` (a polynomial in plain IR, 1-2 ulp) instead of
  ``llvm.exp`` (which LLVM scalarizes into one ``expf`` call per lane) or libm.
  Nothing else changes: float arithmetic is still not reassociated, which
  would break the expansions' exact steps (and change reductions' results).

>>> import loom
>>> from loom.ir.op import Op
>>> rules = rules_for(None)
>>> print(rules["tir.exp"](loom.exp(loom.var("x", "float32"))))
call_llvm_pure_intrin('float32', 'llvm.exp', x)
>>> print(rules["tir.tanh"](loom.tanh(loom.var("y", "float64"))))
call_pure_extern('float64', 'tanh', y)
>>> fast = rules_for(loom.target.Target("llvm -fast_math"))
>>> "llvm.exp" in str(fast["tir.exp"](loom.exp(loom.var("x", "float32"))))
False
"""

from __future__ import annotations

from typing import Any, Callable

from loom.errors import LoomTypeError
from loom.ir import expr as E
from loom.ir.dtype import DataType
from loom.ir.fast_math import EXPANSIONS
from loom.ir.intrin import call_llvm_pure_intrin, call_pure_extern

__all__ = ["rules_for", "LLVM_INTRINSICS", "LIBM_FUNCTIONS"]

Rule = Callable[[E.Call], "E.PrimExpr | None"]  # None: keep the call

#: Ops computed by an LLVM intrinsic taking and returning the operand's type.
LLVM_INTRINSICS = {
    "tir.exp": "llvm.exp", "tir.exp2": "llvm.exp2", "tir.log": "llvm.log", "tir.log2": "llvm.log2",
    "tir.log10": "llvm.log10", "tir.sqrt": "llvm.sqrt", "tir.sin": "llvm.sin", "tir.cos": "llvm.cos",
    "tir.floor": "llvm.floor", "tir.ceil": "llvm.ceil", "tir.round": "llvm.roundeven",
    "tir.trunc": "llvm.trunc", "tir.fabs": "llvm.fabs",
}
#: Ops computed by libm (double precision name; float32 appends ``f``).
LIBM_FUNCTIONS = {"tir.tanh": "tanh", "tir.erf": "erf"}


def _check_float(call: E.Call) -> None:
    if not call.dtype.is_float or not all(a.dtype.is_float for a in call.args):
        raise LoomTypeError(f"{call.op.name} needs float arguments, got {', '.join(str(a.dtype) for a in call.args)} "
                            f"in {call}")


def _widened(t: DataType, make: Callable[[DataType, list[E.PrimExpr]], E.PrimExpr],
             args: list[E.PrimExpr]) -> E.PrimExpr:
    """``make(t, args)``, computed in float32 when ``t`` is float16 (LLVM would promote it anyway)."""
    if t.code != "float" or t.bits != 16:
        return make(t, args)
    wide: list[E.PrimExpr] = [E.Cast(DataType("float", 32, a.dtype.lanes), a) for a in args]
    return E.Cast(t, make(DataType("float", 32, t.lanes), wide))


def _float_rule(build: Callable[[DataType, list[E.PrimExpr]], E.PrimExpr]) -> Rule:
    """A rule computing ``build(dtype, operands)``.

    bfloat16 computes the whole op in float32 and rounds once (as the interpreter
    does); float16 keeps the op's own arithmetic in float16, rounded after each
    step as numpy's is, with only the library calls in float32 (:func:`_widened`).
    """

    def rule(call: E.Call) -> E.PrimExpr:
        _check_float(call)
        t = call.dtype
        if t.code != "bfloat":
            return build(t, list(call.args))
        args: list[E.PrimExpr] = [E.Cast(DataType("float", 32, a.dtype.lanes), a) for a in call.args]
        return E.Cast(t, build(DataType("float", 32, t.lanes), args))

    return rule


def _splat(t: DataType, value: float) -> E.PrimExpr:
    one = E.FloatImm(t.element_of(), value)
    return one if t.lanes == 1 else E.Broadcast(one, t.lanes)


def _llvm(name: str) -> Callable[[DataType, list[E.PrimExpr]], E.PrimExpr]:
    return lambda t, args: _widened(t, lambda u, xs: call_llvm_pure_intrin(u, name, *xs), args)


def _libm(name: str) -> Callable[[DataType, list[E.PrimExpr]], E.PrimExpr]:
    return lambda t, args: _widened(
        t, lambda u, xs: call_pure_extern(u, name + ("f" if u.bits == 32 else ""), *xs), args)


def _sigmoid(t: DataType, args: list[E.PrimExpr]) -> E.PrimExpr:
    # -0.0 - x is exactly -x (LLVM folds it to fneg).
    e = _llvm("llvm.exp")(t, [E.Sub(_splat(t, -0.0), args[0])])
    return E.Div(_splat(t, 1.0), E.Add(_splat(t, 1.0), e))


def _rsqrt(t: DataType, args: list[E.PrimExpr]) -> E.PrimExpr:
    return E.Div(_splat(t, 1.0), _llvm("llvm.sqrt")(t, args))


def _power(t: DataType, args: list[E.PrimExpr]) -> E.PrimExpr:
    x, y = args
    if y.dtype.lanes != t.lanes:
        y = E.Broadcast(y, t.lanes)
    if y.dtype != t:
        y = E.Cast(t, y)
    return _llvm("llvm.pow")(t, [x, y])


def _fast(op: str) -> Rule:
    """The :mod:`loom.ir.fast_math` expansion of ``op`` (16-bit floats in float32, rounded once)."""
    expand = EXPANSIONS[op]

    def rule(call: E.Call) -> E.PrimExpr:
        _check_float(call)
        return expand(call.args[0])

    return rule


def rules_for(target: Any) -> dict[str, Rule]:
    """The llvm target's lowering rule of each math op (``target`` may be None: the defaults)."""
    rules = {
        **{op: _float_rule(_llvm(name)) for op, name in LLVM_INTRINSICS.items()},
        **{op: _float_rule(_libm(name)) for op, name in LIBM_FUNCTIONS.items()},
        "tir.sigmoid": _float_rule(_sigmoid),
        "tir.rsqrt": _float_rule(_rsqrt),
        "tir.power": _float_rule(_power),
        "tir.prefetch": lambda call: None,  # kept: the code generator emits the cache hint
    }
    if target is not None and target.attrs.get("fast_math"):
        rules.update({op: _fast(op) for op in EXPANSIONS})
    return rules
