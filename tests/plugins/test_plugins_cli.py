"""``loom plugins`` / ``loom targets`` in process (the subprocess runs are in test_third_party_plugin)."""

from __future__ import annotations

import json

import pytest
from plugin_fakes import kind_plugin, module_with

import loom
import loom.plugins as plugins
from loom.cli import main
from loom.plugins import hookimpl


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plugins_table(capsys):
    code, out, _ = _run(capsys, "plugins")
    header, *rows = out.splitlines()
    assert code == 0 and header.split() == ["NAME", "VERSION", "DISTRIBUTION", "STATUS", "CONTRIBUTES"]
    assert rows[0].split() == ["builtin", loom.__version__, "loom-compiler", "builtin", "target", "kinds:",
                               "interp", "(cpu);", "hooks:", "loom_backend,", "loom_device_api,",
                               "loom_load_module"]


def test_plugins_table_lists_hooks_beyond_target_kinds(capsys):
    plugins.register(module_with("loom_test_cg", loom_backend=hookimpl(lambda target_kind: None)),
                     name="backend-only")
    _, out, _ = _run(capsys, "plugins")
    [row] = [line for line in out.splitlines() if line.startswith("backend-only")]
    assert row.split()[1:] == ["-", "-", "loaded", "hooks:", "loom_backend"]


def test_plugins_json_matches_list_plugins(capsys):
    plugins.register(kind_plugin("loom_test_cli", "clikind", device="cuda"))
    code, out, _ = _run(capsys, "plugins", "--json")
    data = json.loads(out)
    assert code == 0 and data["problems"] == []
    assert [p["name"] for p in data["plugins"]] == [p.name for p in plugins.list_plugins()]
    [row] = [p for p in data["plugins"] if p["name"] == "loom_test_cli"]
    assert row["target_kinds"] == [{"name": "clikind", "device_type": 2, "device": "cuda"}]


def test_broken_plugin_is_shown_and_exit_code_is_zero(capsys):
    def loom_target_kinds():
        raise ValueError("bad schema")

    plugins.register(module_with("loom_test_bad", loom_target_kinds=hookimpl(loom_target_kinds)))
    code, out, err = _run(capsys, "plugins")
    assert code == 0 and "PluginLoadWarning" not in err
    [row] = [line for line in out.splitlines() if line.startswith("loom_test_bad ")]
    assert row.split()[:4] == ["loom_test_bad", "-", "-", "failed"]
    assert "loom_test_bad: loom_target_kinds raised ValueError: bad schema" in out.split("Broken plugins")[1]


def test_duplicate_kinds_are_a_problem_not_a_crash(capsys):
    plugins.register(kind_plugin("loom_test_d1", "dupkind"))
    plugins.register(kind_plugin("loom_test_d2", "dupkind"))
    code, out, _ = _run(capsys, "targets", "--json")
    [problem] = json.loads(out)["problems"]
    assert code == 0 and "'dupkind'" in problem and "'loom_test_d1'" in problem and "'loom_test_d2'" in problem


def test_targets_lists_schemas(capsys):
    plugins.register(kind_plugin("loom_test_schema", "schemakind"))
    code, out, _ = _run(capsys, "targets")
    assert code == 0
    [block] = [b for b in out.split("\n\n") if b.startswith("schemakind ")]
    assert block.splitlines()[0] == "schemakind  device=cpu(1)  keys=schemakind  plugin=loom_test_schema"
    assert [line.split() for line in block.splitlines()[1:]] == [
        ["ATTRIBUTE", "TYPE", "DEFAULT"], ["lanes", "int", "4"]]
    assert "interp  device=cpu(1)  keys=cpu,interp  plugin=builtin" in out


def test_targets_json_shows_computed_defaults(capsys):
    def host(given):
        return {} if "isa" in given else {"isa": ("+a", "+b")}

    def loom_target_kinds():
        from loom.target import AttrSpec, TargetKind

        return [TargetKind("hostkind", "cpu", {"isa": AttrSpec(list), "n": AttrSpec(int, 2)},
                           default_attrs=host)]

    plugins.register(module_with("loom_test_host", loom_target_kinds=hookimpl(loom_target_kinds)))
    _, out, _ = _run(capsys, "targets", "--json")
    [kind] = [k for k in json.loads(out)["target_kinds"] if k["name"] == "hostkind"]
    assert kind["attrs"] == [
        {"name": "isa", "type": "list[str]", "default": ["+a", "+b"], "computed": True, "doc": ""},
        {"name": "n", "type": "int", "default": 2, "computed": False, "doc": ""}]
    _, text, _ = _run(capsys, "targets")
    assert "isa        list[str]  +a,+b (computed)" in text


@pytest.mark.parametrize("argv", [[], ["bogus"], ["plugins", "--bogus"]])
def test_usage_errors_exit_with_1(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        code = main(argv)
        raise SystemExit(code)
    assert exc.value.code == 1
    assert "usage: loom" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"loom {loom.__version__}"
