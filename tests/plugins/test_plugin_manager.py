"""The plugin manager in process: entry-point loading, run-time registration, errors."""

from __future__ import annotations

import importlib.metadata
import threading

import pytest
from plugin_fakes import (
    FakeDist, FakeEntryPoint, entry_points_returning, kind_plugin, module_with,
)

import loom.plugins as plugins
import loom.target
from loom.errors import PluginError
from loom.plugins import hookimpl


def _info(name: str) -> plugins.PluginInfo:
    return next(p for p in plugins.list_plugins() if p.name == name)


@pytest.fixture
def fake_entry_points(monkeypatch: pytest.MonkeyPatch):
    """Install fake entry points (in place of the real ones) and rebuild the manager."""
    monkeypatch.delenv("LOOM_DISABLE_PLUGIN_AUTOLOAD", raising=False)

    def install(*eps: FakeEntryPoint):
        fake = entry_points_returning(*eps)
        monkeypatch.setattr(importlib.metadata, "entry_points", fake)
        plugins.reset_plugin_manager()
        return fake

    return install


def test_builtin_plugin_contributes_interp():
    """The core's own plugin goes through the manager like any other."""
    info = _info("builtin")
    assert (info.status, info.dist, info.module) == ("builtin", "loom-compiler", "loom.plugins.builtin")
    assert info.target_kinds == ("interp",) and info.hooks == ("loom_backend", "loom_device_api", "loom_load_module",
                                                            "loom_target_kinds")
    kind, owner = plugins.collect_target_kinds()["interp"]
    assert owner == "builtin" and kind.device_type == 1 and kind.default_keys == ("cpu", "interp")
    assert loom.target.Target("interp").keys == ("cpu", "interp")


def test_entry_point_plugin_is_loaded_with_its_metadata(fake_entry_points):
    fake = fake_entry_points(FakeEntryPoint("toy", kind_plugin("toy_mod", "toykind"),
                                            FakeDist("loom-toy", "1.2.3")))
    info = _info("toy")
    assert fake.calls == ["loom"]
    assert (info.version, info.dist, info.module, info.status) == ("1.2.3", "loom-toy", "toy_mod", "loaded")
    assert info.target_kinds == ("toykind",) and info.error is None
    assert loom.target.Target("toykind -lanes=8").attrs["lanes"] == 8
    assert plugins.broken_plugins() == []


def test_plugin_failing_on_import_is_recorded_and_skipped(fake_entry_points):
    """pluggy's own loader would stop at the first failure; ours records it and goes on."""
    with pytest.warns(plugins.PluginLoadWarning, match="'bad'.*loom-bad.*boom"):
        fake_entry_points(
            FakeEntryPoint("bad", RuntimeError("boom"), FakeDist("loom-bad", "0.1")),
            FakeEntryPoint("good", kind_plugin("good_mod", "goodkind"), FakeDist("loom-good", "1.0")),
        )
        [broken] = plugins.broken_plugins()
    assert (broken.name, broken.dist, broken.version, broken.status) == ("bad", "loom-bad", "0.1", "failed")
    assert broken.error.startswith("RuntimeError: boom")
    assert "goodkind" in loom.target.list_kinds()
    assert not plugins.get_plugin_manager().has_plugin("bad")


def test_misspelled_hook_is_reported_with_a_suggestion(fake_entry_points):
    typo = module_with("typo_mod", loom_target_kind=hookimpl(lambda: []))
    with pytest.warns(plugins.PluginLoadWarning):
        fake_entry_points(FakeEntryPoint("typo", typo, FakeDist("loom-typo", "0.1")))
        [broken] = plugins.broken_plugins()
    assert broken.name == "typo"
    assert "unknown hook 'loom_target_kind' in plugin 'typo'" in broken.error
    assert "did you mean 'loom_target_kinds'?" in broken.error
    plugins.get_plugin_manager().check_pending()  # the offender left nothing behind


def test_hook_with_an_argument_the_spec_lacks_is_reported(fake_entry_points):
    bad_args = module_with("args_mod", loom_backend=hookimpl(lambda target_kind, fast: None))
    with pytest.warns(plugins.PluginLoadWarning):
        fake_entry_points(FakeEntryPoint("args", bad_args))
        [broken] = plugins.broken_plugins()
    assert "invalid hook" in broken.error and "fast" in broken.error


def test_plugin_name_clash_between_distributions_is_reported(fake_entry_points):
    with pytest.warns(plugins.PluginLoadWarning, match="already taken"):
        fake_entry_points(
            FakeEntryPoint("toy", kind_plugin("toy_a", "kind_a"), FakeDist("loom-a", "1")),
            FakeEntryPoint("toy", kind_plugin("toy_b", "kind_b"), FakeDist("loom-b", "1")),
        )
        [broken] = plugins.broken_plugins()
    assert broken.dist == "loom-b" and "'loom-a'" in broken.error
    assert "kind_a" in plugins.collect_target_kinds()


def test_same_distribution_seen_twice_loads_once(fake_entry_points, recwarn):
    mod = kind_plugin("twice_mod", "twicekind")
    fake_entry_points(FakeEntryPoint("twice", mod, FakeDist("loom-twice", "1")),
                      FakeEntryPoint("twice", mod, FakeDist("loom-twice", "1")))
    assert [p.name for p in plugins.list_plugins()].count("twice") == 1
    assert plugins.broken_plugins() == [] and not recwarn.list


@pytest.mark.parametrize("value, autoload", [("1", False), ("yes", False), ("0", True), ("", True)])
def test_disable_autoload_environment_variable(fake_entry_points, monkeypatch, value, autoload):
    fake = fake_entry_points(FakeEntryPoint("toy", kind_plugin("toy_mod", "toykind")))
    monkeypatch.setenv("LOOM_DISABLE_PLUGIN_AUTOLOAD", value)
    names = [p.name for p in plugins.list_plugins()]
    assert names == (["builtin", "toy"] if autoload else ["builtin"])
    assert fake.calls == (["loom"] if autoload else [])


def test_register_at_run_time_contributes_and_unregister_removes():
    mod = kind_plugin("loom_test_rt", "rtkind")
    assert plugins.register(mod) == "loom_test_rt"
    assert "rtkind" in loom.target.list_kinds()  # the target registry's cache was refreshed
    assert _info("loom_test_rt").target_kinds == ("rtkind",)
    assert plugins.unregister("loom_test_rt") is mod
    assert "rtkind" not in loom.target.list_kinds()
    assert "loom_test_rt" not in [p.name for p in plugins.list_plugins()]


def test_unregister_by_object_and_unknown_name():
    obj = module_with("loom_test_obj")
    name = plugins.register(obj, name="by-object")
    assert name == "by-object" and plugins.unregister(obj) is obj
    with pytest.raises(PluginError, match="no plugin 'by-object' is registered; registered: builtin"):
        plugins.unregister("by-object")


def test_register_twice_is_an_error():
    mod = kind_plugin("loom_test_twice", "twicekind")
    plugins.register(mod)
    with pytest.raises(PluginError, match="already registered as 'loom_test_twice'"):
        plugins.register(mod, name="other")
    with pytest.raises(PluginError, match="a plugin named 'loom_test_twice' is already registered"):
        plugins.register(module_with("loom_test_twice"))


def test_register_rejects_unknown_hook_and_leaves_nothing_behind():
    typo = module_with("loom_test_typo", loom_bakend=hookimpl(lambda target_kind: None))
    with pytest.raises(PluginError, match="unknown hook 'loom_bakend'.*did you mean 'loom_backend'"):
        plugins.register(typo)
    assert not plugins.get_plugin_manager().has_plugin("loom_test_typo")


def test_duplicate_kind_names_name_both_plugins():
    """The first plugin keeps the kind; the second is reported broken, naming both (issue 11)."""
    plugins.register(kind_plugin("loom_test_one", "samekind"))
    plugins.register(kind_plugin("loom_test_two", "samekind"))
    with pytest.warns(plugins.PluginLoadWarning):
        assert plugins.collect_target_kinds()["samekind"][1] == "loom_test_one"
    [broken] = plugins.broken_plugins()
    assert broken.name == "loom_test_two"
    assert "'samekind'" in broken.error and "'loom_test_one'" in broken.error


def test_duplicate_kind_message_names_distributions(fake_entry_points):
    fake_entry_points(FakeEntryPoint("a", kind_plugin("a_mod", "clash"), FakeDist("loom-a", "1.0")),
                      FakeEntryPoint("b", kind_plugin("b_mod", "clash"), FakeDist("loom-b", "2.0")))
    with pytest.warns(plugins.PluginLoadWarning):
        plugins.collect_target_kinds()
    [broken] = plugins.broken_plugins()
    assert "'a' (distribution loom-a 1.0) and 'b' (distribution loom-b 2.0)" in broken.error


@pytest.mark.parametrize("answer, expected", [
    (RuntimeError("no hardware"), "loom_target_kinds raised RuntimeError: no hardware"),
    ("toykind", "returned str"),
    (["toykind"], "returned 'toykind' (str)"),
])
def test_plugin_breaking_the_kind_contract_is_quarantined(answer, expected):
    def loom_target_kinds():
        if isinstance(answer, Exception):
            raise answer
        return answer

    plugins.register(module_with("loom_test_liar", loom_target_kinds=hookimpl(loom_target_kinds)))
    with pytest.warns(plugins.PluginLoadWarning):
        infos = plugins.list_plugins()
    [broken] = [p for p in infos if p.status == "failed"]
    assert broken.name == "loom_test_liar" and expected in broken.error
    assert "interp" in plugins.collect_target_kinds()  # the others still work
    assert not plugins.get_plugin_manager().has_plugin("loom_test_liar")


def test_manager_is_built_once_across_threads():
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(plugins.get_plugin_manager()))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 8 and all(pm is seen[0] for pm in seen)


def test_plugin_info_to_dict_is_json_ready():
    d = _info("builtin").to_dict()
    assert d["target_kinds"] == ["interp"] and d["hooks"] == ["loom_backend", "loom_device_api", "loom_load_module",
                                                         "loom_target_kinds"]
    assert d["error"] is None and d["status"] == "builtin"
