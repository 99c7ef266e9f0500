"""LowerIntrin: per-target rules replace intrinsic calls; others stay."""

import numpy as np
import pytest

import loom
from loom.errors import LoomTypeError
from loom.ir import BufferStore, PrimFunc, register_lowering
from loom.ir.op import Op
from loom.target import Target, TargetKind, override_kinds
from loom.testing import evaluate
from loom.transform.lower_intrin import LowerIntrin, lower_intrin

A = loom.decl_buffer((4,), "float32", name="A")
B = loom.decl_buffer((4,), "float32", name="B")

# Rules for kinds only these tests use (registries are global; the kinds keep them apart).
register_lowering("tir.sigmoid", "lower_test",
                  lambda call: 1.0 / (1.0 + loom.exp(loom.const(0.0, "float32") - call.args[0])))
register_lowering("tir.exp", "lower_test", lambda call: loom.call_extern(call.dtype, "test_expf", *call.args))
register_lowering("tir.tanh", "lower_bad", lambda call: loom.const(1, "int32"))


def func(value, target=None):
    attrs = {"target": Target(target)} if target else {}
    return PrimFunc([A.data, B.data], BufferStore(B, value, [0]), buffer_map={A.data: A, B.data: B}, attrs=attrs)


def calls(s):
    return {x.op.name for x in loom.ir.collect(s, lambda x: isinstance(x, loom.ir.Call) and isinstance(x.op, Op))}


def test_rules_apply_innermost_first_and_once():
    out = lower_intrin(func(loom.sigmoid(A[0])).body, "lower_test")
    # sigmoid became an expression with exp, which is not lowered again (one pass, innermost first)
    assert calls(out) == {"tir.exp"}
    out2 = lower_intrin(func(loom.sigmoid(loom.exp(A[0]))).body, "lower_test")
    assert calls(out2) == {"tir.exp", "tir.call_extern"}


def test_result_unchanged():
    f = func(loom.sigmoid(A[1]) + loom.sqrt(A[2]))
    after = LowerIntrin("lower_test")(f)
    assert "tir.sqrt" in calls(after.body) and "tir.sigmoid" not in calls(after.body)
    a = np.array([0.0, 0.5, 4.0, 1.0], "float32")
    want, got = np.zeros(4, "float32"), np.zeros(4, "float32")
    evaluate(f, a, want)
    evaluate(after, a, got)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_target_kind_from_function_attrs():
    """Without an argument the function's own target kind picks the rules."""
    kinds = [TargetKind("lower_test", "cpu", {}), TargetKind("other_test", "cpu", {})]
    with override_kinds(*kinds):
        mine, other = func(loom.exp(A[0]), target="lower_test"), func(loom.exp(A[0]), target="other_test")
        assert calls(LowerIntrin()(mine).body) == {"tir.call_extern"}
        assert LowerIntrin()(other) is other
        # an explicit kind wins over the attribute
        assert calls(LowerIntrin("lower_test")(other).body) == {"tir.call_extern"}


def test_function_without_target_is_left_alone():
    f = func(loom.exp(A[0]))
    assert LowerIntrin()(f) is f


def test_rule_of_wrong_dtype_is_an_error():
    with pytest.raises(LoomTypeError, match="tir.tanh"):
        LowerIntrin("lower_bad")(func(loom.tanh(A[0])))
