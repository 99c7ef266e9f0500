"""loom_llvm.intrinsic_rules: the llvm target's math choices as IR rules, the same with or without LowerIntrin."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import loom  # noqa: E402
from loom.ir import BufferStore, For, IRModule, PrimFunc, register_lowering  # noqa: E402
from loom.ir import expr as E  # noqa: E402
from loom.ir.intrin import call_llvm_pure_intrin, call_pure_extern  # noqa: E402
from loom.ir.op import Op  # noqa: E402
from loom.target import Target  # noqa: E402
from loom.transform.lower_intrin import LowerIntrin  # noqa: E402
from loom_llvm.codegen import codegen_module  # noqa: E402
from loom_llvm.intrinsic_rules import LIBM_FUNCTIONS, LLVM_INTRINSICS, rules_for  # noqa: E402

from llvm_programs import build  # noqa: E402

KIND = "llvm_rules_test"  # the llvm rules under a kind of these tests' own
for _op, _rule in rules_for(Target("llvm")).items():
    register_lowering(_op, KIND, _rule, override=True)

NAMES = ["exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos", "floor", "ceil",
         "round", "trunc", "fabs", "erf", "power"]


def unary(dtype: str, lanes: int, name: str, n: int = 64) -> PrimFunc:
    A, B = loom.decl_buffer((n,), dtype, name="A"), loom.decl_buffer((n,), dtype, name="B")
    i = loom.var("i")
    idx = E.Ramp(i * lanes, loom.const(1), lanes) if lanes > 1 else i
    x = A[idx]
    fn = getattr(loom, name)
    value = fn(x, x) if name == "power" else fn(x)
    return PrimFunc([A.data, B.data], For(i, 0, n // lanes, "serial", BufferStore(B, value, [idx])),
                    buffer_map={A.data: A, B.data: B}).with_attr("global_symbol", "f")


def ops_in(f: PrimFunc) -> set[str]:
    return {c.op.name for c in loom.ir.collect(f.body, lambda x: isinstance(x, E.Call) and isinstance(x.op, Op))}


def test_rules_name_llvm_intrinsics_and_libm() -> None:
    rules = rules_for(None)
    x, y = loom.var("x", "float32"), loom.var("y", "float64")
    for op, name in LLVM_INTRINSICS.items():
        out = rules[op](E.Call("float32", Op.get(op), [x]))
        assert out.op.name == "tir.call_llvm_pure_intrin" and out.args[0].value == name
    for op, name in LIBM_FUNCTIONS.items():
        assert rules[op](E.Call("float32", Op.get(op), [x])).args[0].value == name + "f"
        assert rules[op](E.Call("float64", Op.get(op), [y])).args[0].value == name
    h = rules["tir.exp"](loom.exp(loom.var("h", "float16")))
    assert isinstance(h, E.Cast) and h.value.dtype == "float32"  # float16 calls the float32 intrinsic
    with pytest.raises(loom.LoomTypeError, match="float"):
        rules["tir.exp"](E.Call("int32", Op.get("tir.exp"), [loom.var("i")]))


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_lowered_and_unlowered_generate_the_same_ir(dtype: str, lanes: int) -> None:
    """The code generator applies the same rules to what LowerIntrin left: identical LLVM IR either way."""
    for name in NAMES:
        f = unary(dtype, lanes, name)
        lowered = LowerIntrin(KIND)(f)
        assert ops_in(lowered) <= {"tir.call_llvm_pure_intrin", "tir.call_pure_extern"}, name
        assert str(codegen_module(IRModule({"f": lowered}))) == str(codegen_module(IRModule({"f": f}))), name


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_lowered_math_agrees_with_the_interpreter(dtype: str) -> None:
    import ml_dtypes

    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    for name in NAMES:
        f = unary(dtype, 8, name)
        x = (np.random.default_rng(3).standard_normal(64) * 2).astype(np_dtype)
        x[:4] = np.array([0.5, 1.5, -2.5, 0.0]).astype(np_dtype)
        got, want = np.zeros(64, np_dtype), np.zeros(64, np_dtype)
        loom.testing.evaluate(f, x, want)
        rc, err = build(LowerIntrin(KIND)(f))(x, got)
        assert rc == 0, err
        np.testing.assert_allclose(got.astype("float64"), want.astype("float64"), rtol=2e-6 if dtype != "float16"
                                   else 1e-3, err_msg=name)


def test_vector_math_stays_vector_intrinsics() -> None:
    text = str(codegen_module(IRModule({"f": LowerIntrin(KIND)(unary("float32", 8, "sigmoid"))})))
    assert "call <8 x float> @\"llvm.exp.v8f32\"" in text


def test_generic_forms_any_intrinsic_and_extern_lane_by_lane() -> None:
    """call_llvm_pure_intrin of any overloaded intrinsic, and C functions on vectors one lane at a time."""
    n = 16
    A, B, C = (loom.decl_buffer((n,), "float32", name=x) for x in "ABC")
    i = loom.var("i")
    idx = E.Ramp(i * 4, loom.const(1), 4)
    a, b = E.BufferLoad(A, [idx]), E.BufferLoad(B, [idx])
    body = BufferStore(C, call_llvm_pure_intrin("float32x4", "llvm.copysign", a, b)
                       + call_pure_extern("float32x4", "fmaxf", a, loom.const(0.25, "float32")), [idx])
    f = PrimFunc([A.data, B.data, C.data], For(i, 0, n // 4, "serial", body),
                 buffer_map={X.data: X for X in (A, B, C)}).with_attr("global_symbol", "f")
    text = str(codegen_module(IRModule({"f": f})))
    assert "llvm.copysign.v4f32" in text and 'declare float @"fmaxf"(float %".1", float %".2")' in text
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
    out = np.zeros(n, "float32")
    assert build(f)(x, y, out)[0] == 0
    np.testing.assert_array_equal(out, np.copysign(x, y) + np.maximum(x, 0.25))


@pytest.mark.parametrize("name", ["loom_llvm", "loom_llvm.codegen", "loom_llvm.intrinsic_rules"])
def test_docstring_examples(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
