"""``loom cache info | prune | clear``: the compile cache from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from loom.cli import main
from loom.cli_cache import human_size
from loom.runtime.disk_cache import DiskCache, cache_entries, cache_key


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A cache root with two namespaces: backend-c (2 entries, a older) and backend-llvm (1 entry)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("LOOM_CACHE_DIR", str(folder))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    monkeypatch.delenv("LOOM_CACHE_MAX_SIZE", raising=False)
    for ns, key, payload in (("backend-c", "a", b"a" * 3000), ("backend-c", "b", b"b" * 3000),
                             ("backend-llvm", "x", b"x" * 1000)):
        cache = DiskCache(ns, suffix=".bin")
        path = cache.get_or_create([key], lambda p, data=payload: open(p, "wb").write(data))
        if key == "a":
            os.utime(path, (1, 1))  # the least recently used
            os.utime(path[:-4] + ".meta", (1, 1))
    return folder


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _sizes(root) -> dict[str, int]:
    return {ns: sum(e.size for e in cache_entries(root) if e.namespace == ns) for ns in ("backend-c", "backend-llvm")}


def test_info_json(root, capsys):
    code, out, _ = _run(capsys, "cache", "info", "--json")
    data = json.loads(out)
    sizes = _sizes(root)
    assert code == 0 and data["folder"] == str(root) and data["enabled"] is True and data["problems"] == []
    assert data["max_size"] == 2 << 30 and data["entries"] == 3 and data["size"] == sum(sizes.values())
    assert data["namespaces"] == {"backend-c": {"entries": 2, "size": sizes["backend-c"]},
                                  "backend-llvm": {"entries": 1, "size": sizes["backend-llvm"]}}


def test_info_text(root, capsys, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", "500M")
    code, out, _ = _run(capsys, "cache", "info")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["folder", str(root)] and lines[1].split() == ["enabled", "yes"]
    assert lines[2] == "max size  500.0 MiB (LOOM_CACHE_MAX_SIZE)"
    assert lines[3] == f"entries   3 entries, {human_size(sum(_sizes(root).values()))}"
    assert lines[5].split() == ["NAMESPACE", "ENTRIES", "SIZE"]
    assert lines[6].split()[:2] == ["backend-c", "2"] and lines[7].split()[:2] == ["backend-llvm", "1"]


def test_info_reports_problems_and_still_exits_0(root, capsys, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", "huge")
    os.chmod(root, 0o777)
    code, out, _ = _run(capsys, "cache", "info", "--json")
    data = json.loads(out)
    assert code == 0 and data["max_size"] is None and data["entries"] == 3
    assert any("LOOM_CACHE_MAX_SIZE='huge'" in p for p in data["problems"])
    assert any("writable by group or others" in p for p in data["problems"])


def test_prune_evicts_the_least_recently_used(root, capsys):
    before = _sizes(root)
    code, out, _ = _run(capsys, "cache", "prune", "--max-size", str(sum(before.values()) - 1), "--json")
    data = json.loads(out)
    a = DiskCache("backend-c", suffix=".bin")
    assert code == 0 and data["removed"] == 1 and data["entries"] == 2
    assert a.lookup(["a"]) is None and a.lookup(["b"]) is not None
    code, out, _ = _run(capsys, "cache", "prune", "--max-size", "1k")
    assert code == 0 and out.startswith("removed 2 entries (") and out.rstrip().endswith("left: 0 entries, 0 B")


def test_prune_defaults_to_the_configured_cap(root, capsys, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", "0")
    code, out, _ = _run(capsys, "cache", "prune", "--json")
    assert code == 0 and json.loads(out)["removed"] == 3 and cache_entries(root) == []
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", "plenty")
    code, out, err = _run(capsys, "cache", "prune")
    assert code == 1 and out == "" and "loom cache prune: error: LOOM_CACHE_MAX_SIZE='plenty'" in err


def test_clear_removes_every_entry(root, capsys):
    size = sum(_sizes(root).values())
    code, out, _ = _run(capsys, "cache", "clear")
    assert code == 0 and out == f"removed 3 entries ({human_size(size)}) from {root}; left: 0 entries, 0 B\n"
    assert cache_entries(root) == [] and DiskCache("backend-c", suffix=".bin").lookup(["b"]) is None
    code, out, _ = _run(capsys, "cache", "clear", "--json")
    assert code == 0 and json.loads(out)["removed"] == 0


def test_clear_removes_artifacts_of_any_suffix_and_keeps_lock_files(root, capsys):
    # Lock files are not entries: a build may be waiting on one.
    folder = root / "backend-c"
    assert any(name.endswith(".lock") for name in os.listdir(folder))
    assert _run(capsys, "cache", "clear")[0] == 0
    assert not [n for n in os.listdir(folder) if n.startswith(cache_key(["b"])) and not n.endswith(".lock")]


@pytest.mark.parametrize("argv", [["cache"], ["cache", "frobnicate"], ["cache", "prune", "--max-size", "lots"],
                                  ["cache", "info", "--bogus"]])
def test_a_bad_command_line_exits_1(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse rejects it
        code = exc.code
    assert code == 1 and "usage: loom" in capsys.readouterr().err


def test_the_command_runs_as_a_program(root):
    done = subprocess.run([sys.executable, "-m", "loom", "cache", "info", "--json"], capture_output=True, text=True,
                          timeout=120, env=os.environ)
    assert done.returncode == 0 and json.loads(done.stdout)["entries"] == 3


def test_clear_and_prune_delete_the_temporaries_of_killed_builds_only(root, capsys):
    folder = root / "backend-c"
    stale, fresh = folder / ".tmp-0123456789abcdef-dead.bin", folder / ".tmp-fedcba9876543210-live.bin"
    for path in (stale, fresh):
        path.write_bytes(b"t" * 700)
    os.utime(stale, (1, 1))  # a build killed long ago; `fresh` may still be renamed into place
    assert _run(capsys, "cache", "prune", "--max-size", "1G")[0] == 0
    assert not stale.exists() and fresh.exists()
    stale.write_bytes(b"t" * 700)
    os.utime(stale, (1, 1))
    assert _run(capsys, "cache", "clear")[0] == 0
    assert not stale.exists() and fresh.exists()
