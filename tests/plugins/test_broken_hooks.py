"""A broken plugin is named in the error it causes, and a duplicate target kind breaks only its plugin (issue 11, item 15)."""

from __future__ import annotations

import numpy as np
import pytest
from plugin_fakes import kind_plugin, module_with

import loom
import loom.plugins as plugins
from loom.cli import main
from loom.errors import PluginError
from loom.plugins import hookimpl


def _exp_program():
    A = loom.placeholder((4,), name="A")
    B = loom.compute((4,), lambda i: loom.exp(A[i]), name="B")
    return loom.create_schedule(B.op), [A, B]


def _boom(*_args, **_kwargs):
    raise RuntimeError("boom")


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_a_plugin_pass_that_raises_names_the_plugin_and_the_phase(target):
    def loom_lower_passes(target, phase):
        return [_boom] if phase == 1 else None

    plugins.register(module_with("loom_test_bad_pass", loom_lower_passes=hookimpl(loom_lower_passes)))
    s, args = _exp_program()
    with pytest.raises(PluginError, match=r"^pass _boom of plugin 'loom_test_bad_pass' \(loom_lower_passes, phase 1\) "
                                          r"failed: RuntimeError: boom$") as info:
        loom.build(s, args, target=target)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_lower_passes_hook_that_raises_names_the_plugin():
    plugins.register(module_with("loom_test_bad_hook", loom_lower_passes=hookimpl(lambda target, phase: _boom())))
    s, args = _exp_program()
    with pytest.raises(PluginError, match="plugin 'loom_test_bad_hook': loom_lower_passes.phase=0. raised "
                                          "RuntimeError: boom"):
        loom.build(s, args, target="interp")


def test_an_intrinsic_rule_that_raises_names_the_plugin_and_the_op():
    plugins.register(module_with("loom_test_bad_rule",
                                 loom_intrinsic_rules=hookimpl(lambda target: {"tir.exp": _boom}
                                                               if target.kind_name == "interp" else None)))
    s, args = _exp_program()
    with pytest.raises(PluginError, match=r"the tir.exp lowering rule of plugin 'loom_test_bad_rule' "
                                          r"\(loom_intrinsic_rules\) raised RuntimeError: boom"):
        loom.build(s, args, target="interp")


def test_a_rule_registered_directly_still_raises_what_it_raises():
    """Only plugins' rules are re-labelled: the op's own rules are not a plugin's fault."""
    from loom.ir.op import Op, register_lowering

    info = Op.get("tir.exp").info
    saved = info.lowering.get("interp")
    register_lowering("tir.exp", "interp", _boom, override=True)
    try:
        s, args = _exp_program()
        with pytest.raises(loom.LoomError, match="pass LowerIntrin failed: RuntimeError: boom") as err:
            loom.build(s, args, target="interp")
        assert not isinstance(err.value, PluginError)
    finally:
        if saved is None:
            del info.lowering["interp"]
        else:
            info.lowering["interp"] = saved


def _second_llvm():
    """A third-party plugin that declares the kind llvm again, with a backend that would take it over."""
    from loom.target import TargetKind

    return module_with("loom_test_llvm_again",
                       loom_target_kinds=hookimpl(lambda: [TargetKind("llvm", "cpu", {})]),
                       loom_backend=hookimpl(lambda target_kind: _boom()))


def test_a_second_llvm_kind_breaks_only_its_plugin():
    plugins.register(_second_llvm())
    with pytest.warns(plugins.PluginLoadWarning, match="loom_test_llvm_again"):
        kinds = plugins.collect_target_kinds()
    assert kinds["llvm"][1] == "llvm"
    for target in ("interp", "c", "llvm"):
        A = loom.placeholder((4,), name="A")
        B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
        f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
        b = np.zeros(4, "float32")
        f(np.arange(4, dtype="float32"), b)
        assert b.tolist() == [1, 2, 3, 4]
    [broken] = plugins.broken_plugins()
    assert broken.name == "loom_test_llvm_again" and broken.status == "failed"
    assert broken.error.startswith("target kind 'llvm' is contributed by two plugins: 'llvm' (distribution loom-llvm")
    assert "'loom_test_llvm_again' is ignored" in broken.error
    assert not plugins.get_plugin_manager().has_plugin("loom_test_llvm_again")  # nor its backend


def test_loom_plugins_lists_the_duplicate_as_broken(capsys):
    plugins.register(_second_llvm())
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if line.startswith("loom_test_llvm_again ")]
    assert row.split()[:4] == ["loom_test_llvm_again", "-", "-", "failed"]
    assert "loom_test_llvm_again: target kind 'llvm' is contributed by two plugins" in out.split("Broken plugins")[1]


def test_the_builtin_plugin_keeps_its_kind():
    plugins.register(kind_plugin("loom_test_interp_again", "interp"))
    with pytest.warns(plugins.PluginLoadWarning):
        assert plugins.collect_target_kinds()["interp"][1] == "builtin"
    assert [p.name for p in plugins.broken_plugins()] == ["loom_test_interp_again"]
    assert loom.target.Target("interp").kind.default_keys == ("cpu", "interp")


def test_a_plugin_declaring_one_kind_twice_is_broken():
    plugins.register(kind_plugin("loom_test_twice_kind", "twicekind", "twicekind"))
    with pytest.warns(plugins.PluginLoadWarning):
        assert "twicekind" not in plugins.collect_target_kinds()
    [broken] = plugins.broken_plugins()
    assert broken.error == "loom_target_kinds contributes target kind 'twicekind' twice"


def test_the_plugin_named_after_a_kind_owns_it_whatever_the_order():
    # A plugin that comes first (here: registered first) cannot take a kind from the plugin of that name.
    plugins.register(kind_plugin("loom_test_squatter", "loom_test_shiny", "loom_test_other"))
    plugins.register(kind_plugin("loom_test_shiny", "loom_test_shiny"))
    with pytest.warns(plugins.PluginLoadWarning, match="loom_test_squatter"):
        kinds = plugins.collect_target_kinds()
    assert kinds["loom_test_shiny"][1] == "loom_test_shiny"
    assert "loom_test_other" not in kinds  # the squatter is untrusted as a whole
    [broken] = plugins.broken_plugins()
    assert broken.name == "loom_test_squatter"
    assert "'loom_test_shiny' keeps the kind" in broken.error


def test_a_raising_device_api_hook_is_named():
    plugins.register(module_with("loom_test_bad_device",
                                 loom_device_api=hookimpl(lambda device_type: _boom() if device_type == 77 else None)))
    with pytest.raises(PluginError, match=r"plugin 'loom_test_bad_device' raised in "
                                          r"loom_device_api\(device_type=77\): RuntimeError: boom"):
        loom.runtime.device_api.get_device_api(77)
    assert loom.runtime.device_api.get_device_api(1).device_type == 1  # the CPU's is still served


def test_a_raising_load_module_hook_is_named(tmp_path):
    A = loom.placeholder((4,), name="A")
    B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
    loom.build(loom.create_schedule(B.op), [A, B], target="interp").export_library(tmp_path / "m.loom")
    plugins.register(module_with("loom_test_bad_loader", loom_load_module=hookimpl(lambda path, fmt: _boom())))
    with pytest.raises(PluginError, match=r"plugin 'loom_test_bad_loader' raised in loom_load_module\(.*"
                                          r"fmt='interp'\): RuntimeError: boom"):
        loom.runtime.load_module(tmp_path / "m.loom")
    plugins.unregister("loom_test_bad_loader")
    assert loom.runtime.load_module(tmp_path / "m.loom").function_names


def test_a_plugin_named_after_a_builtin_kind_cannot_take_it():
    plugins.register(kind_plugin("interp", "interp"))  # named like the built-in kind it declares again
    with pytest.warns(plugins.PluginLoadWarning, match="'interp'"):
        kinds = plugins.collect_target_kinds()
    assert kinds["interp"][1] == "builtin"
    assert [p.name for p in plugins.broken_plugins()] == ["interp"]
