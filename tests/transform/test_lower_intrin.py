"""LowerIntrin: per-target rules replace intrinsic calls; others stay."""

import types

import numpy as np
import pytest

import loom
from loom.backend import Backend
from loom.errors import LoomTypeError
from loom.ir import BufferStore, For, PrimFunc, register_lowering
from loom.ir import expr as E
from loom.ir.op import Op
from loom.target import AttrSpec, Target, TargetKind, override_kinds
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


def test_target_object_or_kind_name():
    kinds = [TargetKind("lower_test", "cpu", {})]
    with override_kinds(*kinds):
        for target in (Target("lower_test"), "lower_test"):
            assert calls(LowerIntrin(target)(func(loom.exp(A[0]))).body) == {"tir.call_extern"}


def _plugin(name, **hooks):
    mod = types.ModuleType(name)
    for hook, fn in hooks.items():
        setattr(mod, hook, loom.plugins.hookimpl(fn))
    return mod


def test_plugin_rules_see_the_function_target(registered):
    """The hook receives each function's Target, so its rules can read the target's attributes."""
    def rules(target):
        if target.kind.name != "attr_test":
            return None
        name = "fast_exp" if target.attrs["fast"] else "exact_exp"
        return {"tir.exp": lambda call: loom.call_extern(call.dtype, name, *call.args)}

    registered(_plugin("attr_test_rules", loom_intrinsic_rules=rules))
    with override_kinds(TargetKind("attr_test", "cpu", {"fast": AttrSpec(bool, False)})):
        for text, want in (("attr_test", "exact_exp"), ("attr_test -fast=1", "fast_exp")):
            out = LowerIntrin()(func(loom.exp(A[0]), target=text))
            ext = loom.ir.collect(out.body, lambda x: isinstance(x, loom.ir.Call) and isinstance(x.op, Op))
            assert [c.args[0].value for c in ext] == [want]


def floor_func(target=None):
    n = 8
    C = loom.decl_buffer((n,), "int32", name="C")
    i = loom.var("i")
    body = For(i, 0, n, "serial", BufferStore(C, loom.floordiv(i + 3, 4) + loom.floormod(i, 3), [i]))
    attrs = {"target": Target(target)} if target else {}
    return PrimFunc([C.data], body, buffer_map={C.data: C}, attrs=attrs)


def divisions(f):
    found = loom.ir.collect(f.body, lambda x: isinstance(x, (E.Div, E.Mod, E.FloorDiv, E.FloorMod)))
    return sorted(type(x).__name__ for x in found)


class _KeepsFloor(Backend):
    kind = "floor_keep"
    rewrite_floor_division = False


def test_floor_division_of_non_negatives_truncates_unless_the_backend_opts_out(registered):
    registered(_plugin("floor_keep_backend",
                       loom_backend=lambda target_kind: _KeepsFloor() if target_kind == "floor_keep" else None))
    kinds = [TargetKind("floor_keep", "cpu", {}), TargetKind("no_backend", "cpu", {})]
    with override_kinds(*kinds):
        # no backend for the kind: the rewrite happens
        assert divisions(LowerIntrin()(floor_func("no_backend"))) == ["Div", "Mod"]
        kept = LowerIntrin()(floor_func("floor_keep"))
        assert divisions(kept) == ["FloorDiv", "FloorMod"]
    want, got = np.zeros(8, "int32"), np.zeros(8, "int32")
    evaluate(floor_func(), want)
    evaluate(kept.with_attr("target", None), got)
    np.testing.assert_array_equal(got, want)
