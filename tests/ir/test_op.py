"""Intrinsic ops: the registry, and lowering rules registered directly or by plugins."""

import types

import pytest

import loom
from loom.errors import LoomError, LoomValueError, PluginError
from loom.ir.op import Op, list_ops, lowering_rule, register_lowering


def _rules_plugin(name, kind, rules):
    mod = types.ModuleType(name)

    @loom.plugins.hookimpl
    def loom_intrinsic_rules(target_kind):
        return rules if target_kind == kind else None

    mod.loom_intrinsic_rules = loom_intrinsic_rules
    return mod


@pytest.fixture
def registered():
    mods = []

    def add(mod):
        loom.plugins.register(mod)
        mods.append(mod)
        return mod

    yield add
    for mod in mods:
        loom.plugins.unregister(mod)


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
    assert lowering_rule("sqrt", "toy") is rule
    assert lowering_rule("sqrt", "other") is None
    loom.plugins.unregister(mod)
    assert lowering_rule("sqrt", "toy") is None
    loom.plugins.register(mod)  # the fixture unregisters it again


def test_two_plugins_with_one_rule_conflict(registered):
    registered(_rules_plugin("rules_one", "toy2", {"tir.log": lambda c: c}))
    registered(_rules_plugin("rules_two", "toy2", {"tir.log": lambda c: c}))
    with pytest.raises(PluginError, match="rules_one.*rules_two|rules_two.*rules_one"):
        lowering_rule("log", "toy2")
