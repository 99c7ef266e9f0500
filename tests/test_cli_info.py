"""``loom info``: versions, plugins, CPU, compilers, GPUs, the compile cache and the LOOM_* variables."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

import loom
import loom.plugins as plugins
from loom import cli_info
from loom.cli import main


def _run(capsys, *argv):
    code = main(["info", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys):
    code, out, _ = _run(capsys, "--json")
    assert code == 0
    return json.loads(out)


def _tool(folder, name, script):
    path = folder / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_text_has_every_section_and_exits_zero(capsys):
    code, out, err = _run(capsys)
    assert code == 0 and err == ""
    assert out.startswith(f"Loom {loom.__version__} (loom-compiler ")
    for section in ("\nPython ", "\nnumpy ", "\nPlugins:\n  builtin ", "\nCPU: ", "\nCompilers:\n  cc ",
                    "\nGPUs:", "\nCompile cache: ", "\nLOOM_* variables in effect:"):
        assert section in out


def test_json_lists_plugins_versions_and_the_cache_folder(capsys):
    data = _json(capsys)
    assert data["loom"]["version"] == loom.__version__
    assert data["loom"]["distribution"]["name"] == "loom-compiler"
    assert [p["name"] for p in data["plugins"]] == [p.name for p in plugins.list_plugins()]
    assert data["packages"]["numpy"] == __import__("numpy").__version__
    assert data["cache"]["folder"] == os.environ["LOOM_CACHE_DIR"]  # tests/conftest.py sets it
    [row] = [r for r in data["environment"] if r["name"] == "LOOM_CACHE_DIR"]
    assert row["known"] and row["value"] == os.environ["LOOM_CACHE_DIR"] and row["problem"] is None
    assert {c["name"] for c in data["compilers"]} == set(cli_info.COMPILERS)


@pytest.mark.skipif(importlib.util.find_spec("llvmlite") is None, reason="llvmlite is not installed")
def test_llvm_version_and_cpu_features_come_from_llvmlite(capsys):
    import llvmlite.binding as binding

    data = _json(capsys)
    assert data["packages"]["llvm"] == ".".join(map(str, binding.llvm_version_info))
    assert data["cpu"]["name"] == binding.get_host_cpu_name() and data["cpu"]["source"] == "llvmlite"
    assert data["cpu"]["features"] == sorted(f for f, on in binding.get_host_cpu_features().items() if on)


def test_unknown_and_malformed_variables_are_flagged(capsys, monkeypatch):
    monkeypatch.setenv("LOOM_NUM_THEADS", "3")
    monkeypatch.setenv("LOOM_ZQXW", "1")
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", "lots")
    monkeypatch.setenv("LOOM_VERIFY", "1")
    data = _json(capsys)
    rows = {r["name"]: r for r in data["environment"]}
    assert rows["LOOM_NUM_THEADS"]["known"] is False
    assert rows["LOOM_NUM_THEADS"]["problem"] == "unknown variable: did you mean LOOM_NUM_THREADS?"
    assert rows["LOOM_ZQXW"]["problem"] == "unknown variable; Loom does not read it"
    assert "expected a size such as 500M or 2G" in rows["LOOM_CACHE_MAX_SIZE"]["problem"]
    assert rows["LOOM_VERIFY"]["problem"] is None and rows["LOOM_VERIFY"]["doc"]
    # The cache section still reports what it can.
    assert data["cache"]["max_bytes"] is None and data["cache"]["folder"]
    assert any("LOOM_CACHE_MAX_SIZE" in p for p in data["cache"]["problems"])
    code, out, _ = _run(capsys)
    assert code == 0 and "  LOOM_NUM_THEADS=3  <- unknown variable: did you mean LOOM_NUM_THREADS?\n" in out


def test_missing_tools_are_reported_not_raised(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no compiler, no nvidia-smi
    data = _json(capsys)
    assert all(c["version"] is None and c["problem"] == "not found on PATH" for c in data["compilers"])
    assert data["gpus"] == {"devices": [], "source": "nvidia-smi -L", "problem": "not found on PATH"}
    code, out, _ = _run(capsys)
    assert code == 0 and "  nvcc   not found on PATH\n" in out and "GPUs: none (nvidia-smi: not found on PATH)" in out


def test_gpus_compilers_and_broken_tools_on_path(capsys, monkeypatch, tmp_path):
    _tool(tmp_path, "nvidia-smi", 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)"')
    _tool(tmp_path, "nvcc", 'echo "nvcc: NVIDIA (R) Cuda compiler driver"; '
                            'echo "Cuda compilation tools, release 12.4, V12.4.131"')
    _tool(tmp_path, "gcc", 'echo "gcc: fatal error: broken install" >&2; exit 4')
    _tool(tmp_path, "clang", f"exec {shutil.which('sleep')} 5")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(cli_info, "TOOL_TIMEOUT", 0.3)
    data = _json(capsys)
    assert data["gpus"]["devices"] == ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)"]
    compilers = {c["name"]: c for c in data["compilers"]}
    assert compilers["nvcc"]["version"] == "Cuda compilation tools, release 12.4, V12.4.131"
    assert compilers["gcc"]["problem"] == "`gcc --version` exited 4: gcc: fatal error: broken install"
    assert compilers["clang"]["problem"] == "`clang --version` did not answer within 0.3 s"
    code, out, _ = _run(capsys)
    assert code == 0 and "\nGPUs:\n  GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)\n" in out


def test_cache_entries_and_size(capsys, monkeypatch, tmp_path):
    from loom.runtime.disk_cache import DiskCache

    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))

    def write(path):
        with open(path, "wb") as fh:
            fh.write(b"x" * 3000)

    DiskCache("backend-test", root=str(tmp_path / "cache")).get_or_create(["one"], write)
    cache = _json(capsys)["cache"]
    assert cache["folder"] == str(tmp_path / "cache") and cache["enabled"] is True
    assert cache["entries"] == 1 and cache["bytes"] >= 3000
    assert cache["namespaces"]["backend-test"]["entries"] == 1
    monkeypatch.setenv("LOOM_CACHE", "0")
    code, out, _ = _run(capsys)
    assert code == 0 and f"Compile cache: {tmp_path / 'cache'} (off by LOOM_CACHE): 1 entries, " in out


def test_python_m_loom_info_in_a_child_process(tmp_path):
    env = {**os.environ, "LOOM_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "loom", "info", "--json"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["loom"]["version"] == loom.__version__
