"""loom_c.intrinsic_rules: the c target's math choices as IR rules, the same with or without LowerIntrin."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.ir import register_lowering
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.function import PrimFunc
from loom.ir.op import Op
from loom.target import Target
from loom.transform.lower_intrin import LowerIntrin
from loom_c.codegen import generate
from loom_c.intrinsic_rules import C_FUNCTIONS, rules_for

from c_helpers import run_c
from test_c_exprs import N, elementwise

# The c rules under a kind of these tests' own, so LowerIntrin applies exactly them.
KIND = "c_rules_test"
for _op, _rule in rules_for(Target("c")).items():
    register_lowering(_op, KIND, _rule, override=True)

UNARY = sorted(name[4:] for name in C_FUNCTIONS if name != "tir.power") + ["sigmoid", "rsqrt"]


def ops_in(f: PrimFunc) -> set[str]:
    return {c.op.name for c in loom.ir.collect(f.body, lambda x: isinstance(x, E.Call) and isinstance(x.op, Op))}


@pytest.mark.parametrize("dtype,suffix", [("float32", "f"), ("float64", "")])
def test_each_op_becomes_a_libm_call_of_its_precision(dtype: str, suffix: str) -> None:
    x = loom.var("x", dtype)
    rules = rules_for(None)
    for op, fn in C_FUNCTIONS.items():
        call = E.Call(dtype, Op.get(op), [x, x] if op == "tir.power" else [x])
        out = rules[op](call)
        assert out.op.name == "tir.call_pure_extern" and out.args[0].value == fn + suffix
    assert "exp" + suffix in str(rules["tir.sigmoid"](loom.sigmoid(x)))
    assert rules["tir.exp"](loom.exp(loom.var("h", "float16"))) is None  # no C type: left to the renderer


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lowered_and_unlowered_render_alike(dtype: str, lanes: int) -> None:
    """A module LowerIntrin did not see renders exactly as the lowered one: the renderer applies the same rules."""
    for name in UNARY:
        f = elementwise(dtype, dtype, getattr(loom, name), nargs=1, lanes=lanes)
        lowered = LowerIntrin(KIND)(f)
        assert ops_in(lowered) == {"tir.call_pure_extern"}
        assert generate(lowered).text == generate(f).text, name
    f = elementwise(dtype, dtype, loom.power, nargs=2, lanes=lanes)
    assert generate(LowerIntrin(KIND)(f)).text == generate(f).text


@pytest.mark.parametrize("lanes", [1, 8])
def test_lowered_math_agrees_with_the_interpreter(lanes: int) -> None:
    for name in ("exp", "sigmoid", "rsqrt", "round", "tanh"):
        fn = getattr(loom, name)
        f = elementwise("float32", "float32", (lambda a: fn(loom.abs(a) + 0.5)) if name == "rsqrt" else fn,
                        nargs=1, lanes=lanes)
        x = (np.random.default_rng(1).standard_normal(N) * 3).astype("float32")
        x[:3] = [0.5, 1.5, -2.5]  # round: ties to even
        got, ref = np.zeros(N, "float32"), np.zeros(N, "float32")
        loom.testing.evaluate(f, x, ref)  # the interpreter runs the unlowered ops
        assert run_c(LowerIntrin(KIND)(f), x, got) == (0, None)
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7, err_msg=name)


def test_extern_calls_on_vectors_go_lane_by_lane() -> None:
    """call_pure_extern with vector operands (a scalar operand goes to every lane) is declared once, on scalars."""
    A = loom.decl_buffer((N,), "float64", name="A")
    i = loom.var("i")
    idx = E.Ramp(i * 4, loom.const(1), 4)
    call = loom.ir.intrin.call_pure_extern("float64x4", "hypot", E.BufferLoad(A, [idx]), loom.const(4.0, "float64"))
    f = PrimFunc([A.data], S.For(i, 0, N // 4, "serial", S.BufferStore(A, call, [idx])), buffer_map={A.data: A})
    text = generate(f).text
    assert "extern double hypot(double, double);" in text and "for (int _l = 0; _l < 4; ++_l)" in text
    a = (np.random.default_rng(2).standard_normal(N) * 3)
    want = np.hypot(a, 4.0)
    assert run_c(f, a) == (0, None)
    np.testing.assert_allclose(a, want)
