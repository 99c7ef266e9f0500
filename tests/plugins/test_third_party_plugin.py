"""A third-party plugin package, made at test time, found through its entry points.

The package lives in a temporary folder with a ``toyaccel-0.1.dist-info`` beside
it, which is all ``importlib.metadata`` needs; each check runs in a fresh
interpreter with that folder on ``PYTHONPATH``, exactly as after ``pip install``.
Besides the good plugin, the distribution declares one that raises on import
and one with a misspelled hook: both must be reported, neither may break it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

PLUGIN = '''
from loom.plugins import hookimpl


@hookimpl
def loom_target_kinds():
    from loom.target import AttrSpec, TargetKind

    return [TargetKind("toyaccel", "ext_dev", {"lanes": AttrSpec(int, 4)}, default_keys=("toyaccel",))]
'''
BROKEN = 'raise RuntimeError("toyaccel driver not found")\n'
TYPO = '''
from loom.plugins import hookimpl


@hookimpl
def loom_target_kind():
    return []
'''
ENTRY_POINTS = """\
[loom]
toyaccel = toyaccel.plugin
toyaccel_broken = toyaccel.broken
toyaccel_typo = toyaccel.typo
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("site")
    pkg = root / "toyaccel"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('__version__ = "0.1"\n')
    (pkg / "plugin.py").write_text(PLUGIN)
    (pkg / "broken.py").write_text(BROKEN)
    (pkg / "typo.py").write_text(TYPO)
    info = root / "toyaccel-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyaccel\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return root


def _run(site: pathlib.Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "LOOM_DISABLE_PLUGIN_AUTOLOAD"}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), environ.get("PYTHONPATH")]))
    environ.update(env)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=environ,
                          timeout=120)


PROBE = textwrap.dedent("""
    import json, loom.plugins, loom.target
    t = loom.target.Target("toyaccel -lanes=16")
    print(json.dumps({
        "kinds": loom.target.list_kinds(),
        "target": str(t), "attrs": t.attrs, "device_type": t.kind.device_type,
        "plugins": [p.to_dict() for p in loom.plugins.list_plugins()],
        "broken": sorted(p.name for p in loom.plugins.broken_plugins()),
    }))
""")


@pytest.fixture(scope="module")
def probe(site: pathlib.Path) -> dict:
    proc = _run(site, ["-c", PROBE])
    assert proc.returncode == 0, proc.stderr
    return {**json.loads(proc.stdout), "stderr": proc.stderr}


def test_third_party_kind_is_usable(probe):
    assert "toyaccel" in probe["kinds"] and "interp" in probe["kinds"]
    assert probe["target"] == "toyaccel -lanes=16"
    assert probe["attrs"] == {"lanes": 16} and probe["device_type"] == 12


def test_third_party_plugin_metadata(probe):
    [info] = [p for p in probe["plugins"] if p["name"] == "toyaccel"]
    assert info["version"] == "0.1" and info["dist"] == "toyaccel" and info["status"] == "loaded"
    assert info["module"] == "toyaccel.plugin" and info["target_kinds"] == ["toyaccel"]


def test_plugin_raising_on_import_is_reported(probe):
    [info] = [p for p in probe["plugins"] if p["name"] == "toyaccel_broken"]
    assert info["status"] == "failed" and info["dist"] == "toyaccel"
    assert info["error"].startswith("RuntimeError: toyaccel driver not found (at broken.py:1)")
    assert "toyaccel_broken" in probe["broken"]
    assert "toyaccel driver not found" in probe["stderr"]  # the PluginLoadWarning


def test_plugin_with_misspelled_hook_is_reported(probe):
    [info] = [p for p in probe["plugins"] if p["name"] == "toyaccel_typo"]
    assert info["status"] == "failed"
    assert "unknown hook 'loom_target_kind' in plugin 'toyaccel_typo'" in info["error"]
    assert "did you mean 'loom_target_kinds'?" in info["error"]


def test_cli_lists_the_plugin_and_the_broken_ones(site):
    proc = _run(site, ["-m", "loom", "plugins"])
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.strip()}
    assert rows["toyaccel"][1:4] == ["0.1", "toyaccel", "loaded"]
    assert "toyaccel (ext_dev)" in rows["toyaccel"][-2] + " " + rows["toyaccel"][-1]
    broken = proc.stdout.split("Broken plugins")[1]
    assert "toyaccel_broken (distribution toyaccel 0.1): RuntimeError: toyaccel driver not found" in broken
    assert "toyaccel_typo (distribution toyaccel 0.1): unknown hook 'loom_target_kind'" in broken


def test_cli_json_and_targets(site):
    proc = _run(site, ["-m", "loom", "plugins", "--json"])
    assert proc.returncode == 0, proc.stderr
    status = {p["name"]: p["status"] for p in json.loads(proc.stdout)["plugins"]}
    assert status["toyaccel"] == "loaded" and status["toyaccel_broken"] == "failed"
    proc = _run(site, ["-m", "loom", "targets", "--json"])
    assert proc.returncode == 0, proc.stderr
    [kind] = [k for k in json.loads(proc.stdout)["target_kinds"] if k["name"] == "toyaccel"]
    assert kind["plugin"] == "toyaccel" and kind["device"] == "ext_dev"
    assert kind["attrs"] == [{"name": "lanes", "type": "int", "default": 4, "computed": False, "doc": ""}]


def test_disabled_autoload_loads_only_the_builtin_plugin(site):
    script = "import loom.plugins as p; print([(i.name, i.status) for i in p.list_plugins()])"
    proc = _run(site, ["-c", script], LOOM_DISABLE_PLUGIN_AUTOLOAD="1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[('builtin', 'builtin')]"
