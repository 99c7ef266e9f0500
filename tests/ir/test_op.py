"""Intrinsic ops: the registry, and lowering rules registered directly or by plugins."""

import types

import pytest

import loom
from loom.errors import LoomError, LoomValueError, PluginError
from loom.ir.op import Op, list_ops, lowering_rule, register_lowering
from loom.target import AttrSpec, Target, TargetKind, override_kinds

TOY_KINDS = [TargetKind(name, "cpu", {"fast": AttrSpec(bool, False)}) for name in ("toy", "toy2", "other")]


@pytest.fixture(autouse=True)
def toy_kinds():
    with override_kinds(*TOY_KINDS):
        yield


def _rules_plugin(name, kind, rules, seen=None):
    mod = types.ModuleType(name)

    @loom.plugins.hookimpl
    def loom_intrinsic_rules(target):
        if seen is not None:
            seen.append(target)
        return rules if target.kind.name == kind else None

    mod.loom_intrinsic_rules = loom_intrinsic_rules
    return mod


def test_one_op_object_per_name():
    assert Op.get("exp") is Op.get("tir.exp") is loom.exp(loom.var("x", "float32")).op
    assert {"tir.exp", "tir.if_then_else", "tir.reinterpret", "tir.erf"} <= set(list_ops())


def test_unknown_op_lists_registered_ones():
    with pytest.raises(LoomValueError, match="unknown intrinsic op 'nope'.*tir.exp"):
        Op.get("nope")


def test_duplicate_registration_is_an_error():
    with pytest.raises(LoomError, match="already registered"):
        loom.ir.register_op("tir.exp", 1)


def test_direct_rule_and_default_fallback():
    rule = lambda call: call  # noqa: E731
    register_lowering("tir.erf", "test-kind-a", rule)
    assert lowering_rule("erf", "test-kind-a") is rule
    assert lowering_rule("erf", "test-kind-b") is None
    with pytest.raises(LoomError, match="already has a lowering rule"):
        register_lowering("tir.erf", "test-kind-a", rule)


def test_plugin_contributes_rules(registered):
    rule = lambda call: call  # noqa: E731
    mod = registered(_rules_plugin("toy_rules", "toy", {"tir.sqrt": rule}))
    assert lowering_rule("sqrt", Target("toy")) is rule
    assert lowering_rule("sqrt", "toy") is rule  # a kind name stands for its default Target
    assert lowering_rule("sqrt", Target("other")) is None
    loom.plugins.unregister(mod)
    assert lowering_rule("sqrt", Target("toy")) is None
    loom.plugins.register(mod)  # the fixture unregisters it again


def test_plugins_receive_the_target_and_are_asked_once_per_target(registered):
    """Rules may depend on the target's attributes: the hook gets the Target, cached by its canonical string."""
    seen = []
    slow, fast = (lambda call: call), (lambda call: call)
    mod = types.ModuleType("attr_rules")

    @loom.plugins.hookimpl
    def loom_intrinsic_rules(target):
        seen.append(str(target))
        return {"tir.exp": fast if target.attrs["fast"] else slow} if target.kind.name == "toy" else None

    mod.loom_intrinsic_rules = loom_intrinsic_rules
    registered(mod)
    assert lowering_rule("exp", Target("toy -fast=1")) is fast
    assert lowering_rule("exp", Target("toy")) is slow
    assert lowering_rule("log", Target("toy -fast=1")) is None
    assert lowering_rule("exp", Target("toy -fast=1")) is fast
    assert seen == ["toy -fast=true", "toy"]


def test_direct_rules_win_over_plugin_rules(registered):
    mine, theirs = (lambda call: call), (lambda call: call)
    registered(_rules_plugin("cos_rules", "toy", {"tir.cos": theirs}))
    register_lowering("tir.cos", "toy", mine)
    try:
        assert lowering_rule("cos", Target("toy")) is mine
    finally:
        Op.get("cos").info.lowering.pop("toy")
    assert lowering_rule("cos", Target("toy")) is theirs


def test_unregistered_kind_names_ask_no_plugin(registered):
    seen = []
    registered(_rules_plugin("never_rules", "toy", {"tir.sin": lambda c: c}, seen))
    assert lowering_rule("sin", "no-such-kind") is None
    assert seen == []


def test_two_plugins_with_one_rule_conflict(registered):
    registered(_rules_plugin("rules_one", "toy2", {"tir.log": lambda c: c}))
    registered(_rules_plugin("rules_two", "toy2", {"tir.log": lambda c: c}))
    with pytest.raises(PluginError, match="rules_one.*rules_two|rules_two.*rules_one"):
        lowering_rule("log", Target("toy2"))


def test_a_broken_plugin_is_named(registered):
    mod = types.ModuleType("broken_rules")

    @loom.plugins.hookimpl
    def loom_intrinsic_rules(target):
        raise RuntimeError("boom")

    mod.loom_intrinsic_rules = loom_intrinsic_rules
    registered(mod)
    with pytest.raises(PluginError, match="broken_rules.*boom"):
        lowering_rule("log2", Target("toy"))
