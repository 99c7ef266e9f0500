"""Target kinds: attribute specs, the registry, and lazy loading from plugins."""

import subprocess
import sys
import types

import pytest

import loom
import loom.plugins
from loom.errors import TargetError
from loom.target import (
    AttrSpec, TargetKind, get_kind, list_kinds, override_kinds, register_target_kind,
    unregister_target_kind,
)
from loom.target import kind as kind_module

from target_kinds import ALL, CUDA, LLVM


@pytest.mark.parametrize("type_, given, expected", [
    (str, "znver4", "znver4"),
    (int, 3, 3),
    (int, "42", 42),
    (float, 2, 2.0),
    (float, "1.5", 1.5),
    (bool, True, True),
    (bool, "false", False),
    (bool, "1", True),
    (bool, 0, False),
    (list, ["+avx2", "+fma"], ("+avx2", "+fma")),
    (list, "+avx2,+fma", ("+avx2", "+fma")),
    (list, "", ()),
    (list[str], ("a",), ("a",)),
])
def test_attr_spec_coerces_values_and_strings(type_, given, expected):
    got = AttrSpec(type_).coerce(given, "x")
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("type_, given, fragment", [
    (int, "fast", "expects int"),
    (int, True, "expects int, got bool"),
    (int, 1.5, "expects int, got float"),
    (str, 5, "expects str, got int"),
    (bool, "maybe", "write true/false"),
    (float, "x", "expects float"),
    (list, ["a,b"], "free of ','"),
    (list, [1], "elements must be str"),
])
def test_attr_spec_rejects_wrong_types(type_, given, fragment):
    with pytest.raises(TargetError, match=fragment):
        AttrSpec(type_).coerce(given, "x")


def test_attr_spec_format_parses_back():
    for spec, v in [(AttrSpec(bool), False), (AttrSpec(list), ("+a", "-b")), (AttrSpec(float), 0.1),
                    (AttrSpec(int), -7), (AttrSpec(str), "a b")]:
        assert spec.coerce(spec.format(v), "x") == v


def test_attr_spec_checks_type_and_default():
    with pytest.raises(TargetError, match="must be str, int, bool, float or list"):
        AttrSpec(dict)
    with pytest.raises(TargetError, match="expects int"):
        AttrSpec(int, "three")
    assert AttrSpec(list, ["a"]).default == ("a",)


def test_target_kind_validates_its_definition():
    with pytest.raises(TargetError, match="kind name"):
        TargetKind("bad name", "cpu")
    with pytest.raises(TargetError, match="invalid target attribute name 'host'"):
        TargetKind("k", "cpu", {"host": AttrSpec(str)})
    with pytest.raises(TargetError, match="unknown DLPack device type 99"):
        TargetKind("k", 99)
    kind = TargetKind("k", "cuda", {"b": int, "a": AttrSpec(str)}, default_keys="gpu")
    assert kind.device_type == 2 and list(kind.schema) == ["a", "b"]
    assert kind.schema["b"] == AttrSpec(int) and kind.default_keys == ("gpu",)
    assert repr(kind) == "TargetKind('k', device=cuda, attrs=[a, b])"


def test_list_and_get_kinds():
    assert list_kinds() == sorted(k.name for k in ALL)
    assert get_kind("cuda") is CUDA


def test_unknown_kind_lists_installed_kinds():
    with pytest.raises(TargetError) as err:
        get_kind("rocm")
    msg = str(err.value)
    assert "unknown target kind 'rocm'" in msg
    assert "installed kinds: c, cuda, ext_cpu, ext_gpu, interp, llvm" in msg


def test_unknown_kind_mentions_broken_plugins(monkeypatch):
    broken = types.SimpleNamespace(name="loom_rocm", error="ImportError: no module named hip")
    monkeypatch.setattr(loom.plugins, "broken_plugins", lambda: [broken])
    with override_kinds(LLVM, plugins=True), pytest.raises(TargetError) as err:
        get_kind("rocm")
    assert "plugin 'loom_rocm' failed: ImportError: no module named hip" in str(err.value)


def test_register_and_unregister_kind():
    toy = TargetKind("toy", "cpu")
    assert register_target_kind(toy) is toy
    assert get_kind("toy") is toy and "toy" in list_kinds()
    with pytest.raises(TargetError, match="already installed"):
        register_target_kind(TargetKind("toy", "cpu"))
    other = register_target_kind(TargetKind("llvm", "cpu"), override=True)
    assert get_kind("llvm") is other
    unregister_target_kind("toy")
    unregister_target_kind("llvm")
    assert "toy" not in list_kinds()
    with pytest.raises(TargetError, match="was not added by register_target_kind"):
        unregister_target_kind("toy")
    with pytest.raises(TargetError, match="expects a TargetKind"):
        register_target_kind("toy")


def test_override_kinds_restores_the_registry():
    with override_kinds(LLVM):
        assert list_kinds() == ["llvm"]
        with override_kinds():
            assert list_kinds() == []
        assert list_kinds() == ["llvm"]
    assert list_kinds() == sorted(k.name for k in ALL)


def _toy_plugin(name):
    mod = types.ModuleType(name)
    mod.loom_target_kinds = loom.plugins.hookimpl(lambda: [TargetKind("test_toy", "cpu", {"w": AttrSpec(int, 4)})])
    return mod


def test_plugin_kinds_are_asked_lazily_and_cached(monkeypatch):
    calls = []
    real = loom.plugins.collect_target_kinds

    def counting():
        calls.append(1)
        return real()

    monkeypatch.setattr(loom.plugins, "collect_target_kinds", counting)
    with override_kinds(plugins=True):
        assert calls == []  # nothing asked until a kind is needed
        assert "interp" in list_kinds()  # contributed by the built-in plugin
        get_kind("interp")
        assert len(calls) == 1
        kind_module.reset_kind_cache()
        list_kinds()
        assert len(calls) == 2


def test_kinds_follow_plugin_registration():
    with override_kinds(plugins=True):
        name = loom.plugins.register(_toy_plugin("test_target_toy_plugin"))
        try:
            assert get_kind("test_toy").schema["w"].default == 4
            assert loom.target.Target("test_toy").attrs == {"w": 4}
        finally:
            loom.plugins.unregister(name)
        assert "test_toy" not in list_kinds()


def test_manual_kind_collides_with_plugin_kind():
    with override_kinds(plugins=True):
        with pytest.raises(TargetError, match=r"'interp' is already installed \(by plugin 'builtin'\)"):
            register_target_kind(TargetKind("interp", "cpu"))


def test_importing_loom_loads_no_backend():
    code = ("import sys, loom; loom.target.Target; "
            "print(sorted(m for m in sys.modules if m.startswith('loom_')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
