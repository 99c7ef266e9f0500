"""The disk cache under hostile or damaged folders: odd files, other users, entries damaged while loaded, size cap.

Cases that used to hang or crash (a FIFO record, a library damaged while it is
mapped) run in a child process that must end normally.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import loom
from loom.backend import stats
from loom.runtime import disk_cache
from loom.runtime.disk_cache import (CacheError, DiskCache, cache_entries, cache_key, cache_usage, clear_cache,
                                     folder_problem, prune)

_TIMEOUT = 120


class Recorder:
    """A build function that writes ``payload`` and counts its calls."""

    def __init__(self, payload: bytes = b"artifact") -> None:
        self.payload = payload
        self.calls = 0

    def __call__(self, path: str) -> None:
        self.calls += 1
        with open(path, "wb") as fh:
            fh.write(self.payload)


def _private(path) -> str:
    os.makedirs(path, mode=0o700, exist_ok=True)
    return str(path)


def _child(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                          timeout=_TIMEOUT)
    assert done.returncode == 0, f"child ended with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


# --------------------------------------------------------------------------- odd files in the folder (item 9)

_FIFO_RECORD = """
    import os, stat, sys
    from loom.runtime.disk_cache import DiskCache, cache_key
    cache = DiskCache("ns", root=sys.argv[1])
    os.makedirs(cache.folder, mode=0o700)
    meta = os.path.join(cache.folder, cache_key(["k"]) + ".meta")
    os.mkfifo(meta, 0o600)
    print(cache.lookup(["k"]))
    def build(path):
        open(path, "wb").write(b"built")
    data, path = cache.fetch(["k"], build)
    print(data.decode(), stat.S_ISREG(os.stat(meta).st_mode), cache.lookup(["k"]) == path)
"""


def test_a_fifo_record_is_a_miss_not_a_hang(tmp_path):
    assert _child(_FIFO_RECORD, _private(tmp_path / "root")).split() == ["None", "built", "True", "True"]


@pytest.mark.parametrize("which", ["artifact", "record"])
def test_a_folder_in_place_of_an_entry_file_is_a_miss(tmp_path, which, caplog):
    cache = DiskCache("ns", root=_private(tmp_path / "root"), suffix=".so")
    path = cache.get_or_create(["k"], Recorder(b"first"))
    target = path if which == "artifact" else path[:-len(".so")] + ".meta"
    os.unlink(target)
    os.makedirs(os.path.join(target, "inside"))
    with caplog.at_level(logging.WARNING, "loom.cache"):
        assert cache.lookup(["k"]) is None
    assert "is a folder, not a regular file" in caplog.text
    rebuild = Recorder(b"second")
    assert cache.fetch(["k"], rebuild) == (b"second", path) and rebuild.calls == 1
    assert os.path.isfile(target)


def test_a_symlinked_artifact_is_not_followed(tmp_path):
    cache = DiskCache("ns", root=_private(tmp_path / "root"))
    path = cache.get_or_create(["k"], Recorder(b"ours"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"ours")  # the same bytes: the record would match if the link were followed
    os.unlink(path)
    os.symlink(elsewhere, path)
    assert cache.lookup(["k"]) is None
    assert cache.fetch(["k"], Recorder(b"ours"))[0] == b"ours"
    assert not os.path.islink(path) and elsewhere.read_bytes() == b"ours"


def test_a_damaged_entry_is_logged(tmp_path, caplog):
    cache = DiskCache("ns", root=_private(tmp_path / "root"))
    path = cache.get_or_create(["k"], Recorder(b"0123456789"))
    with open(path, "r+b") as fh:
        fh.write(b"X")
    with caplog.at_level(logging.WARNING, "loom.cache"):
        assert cache.fetch(["k"], Recorder(b"0123456789"))[0] == b"0123456789"
    assert "is damaged (its artifact does not match the size and sha256 of its record): rebuilding it" in caplog.text


_DAMAGED_WHILE_LOADED = """
    import numpy as np, loom
    from loom.backend import stats
    A = loom.placeholder((64,), name="A")
    B = loom.compute((64,), lambda i: A[i] * 3.0 + 1.0, name="B")
    s = loom.create_schedule(B.op)

    def check(f):
        a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
        f(a, b)
        assert (b == a * 3 + 1).all()

    f = loom.build(s, [A, B], target="c -flags=-O1")
    check(f)
    with open(f.artifact.path, "r+b") as fh:  # damaged in place: the same file, as a disk error or a tool would
        fh.truncate(100)
    g = loom.build(s, [A, B], target="c -flags=-O1")  # a miss: rebuilt into a new file
    check(g)
    check(f)  # the first module's code never was the cache's file
    print(stats()["cache_misses"], stats()["compiles"])
"""


def test_an_entry_damaged_while_loaded_is_rebuilt_and_nothing_crashes(tmp_path):
    env = {**os.environ, "LOOM_CACHE_DIR": _private(tmp_path / "root")}
    env.pop("LOOM_CACHE", None)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_DAMAGED_WHILE_LOADED)], capture_output=True,
                          text=True, timeout=_TIMEOUT, env=env)
    assert done.returncode == 0, f"child ended with {done.returncode}:\n{done.stderr}"
    assert done.stdout.split() == ["2", "2"]


# --------------------------------------------------------------------------- other users (item 10)


def test_cache_folders_are_created_private(tmp_path):
    root = tmp_path / "new" / "root"
    DiskCache("ns", root=root).get_or_create(["k"], Recorder())
    for folder in (root, root / "ns"):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    [artifact] = [n for n in os.listdir(root / "ns") if len(n) == 64]
    assert stat.S_IMODE(os.stat(root / "ns" / artifact).st_mode) == 0o600


@pytest.mark.parametrize("which", ["root", "namespace"])
@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_a_folder_writable_by_others_is_refused(tmp_path, which, mode):
    root = tmp_path / "shared"
    cache = DiskCache("ns", root=_private(root))
    cache.get_or_create(["k"], Recorder())
    os.chmod(root if which == "root" else cache.folder, mode)
    build = Recorder()
    with pytest.raises(CacheError, match="refusing the cache folder .* writable by group or others .*LOOM_CACHE_DIR"):
        cache.fetch(["k"], build)
    with pytest.raises(CacheError, match="refusing the cache folder"):
        cache.lookup(["k"])
    assert build.calls == 0
    assert "writable by group or others" in folder_problem(root if which == "root" else cache.folder)


def test_a_folder_of_another_user_is_refused(tmp_path, monkeypatch):
    cache = DiskCache("ns", root=_private(tmp_path / "root"))
    cache.get_or_create(["k"], Recorder())
    me = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: me + 1)  # the folder is now someone else's
    with pytest.raises(CacheError, match=f"belongs to user {me}, not to this user \\({me + 1}\\)"):
        cache.fetch(["k"], Recorder())


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give a file away")
def test_an_entry_of_another_user_is_a_miss(tmp_path):
    cache = DiskCache("ns", root=_private(tmp_path / "root"))
    path = cache.get_or_create(["k"], Recorder(b"planted"))
    os.chown(path, 65534, 65534)
    rebuild = Recorder(b"ours")
    assert cache.fetch(["k"], rebuild)[0] == b"ours" and rebuild.calls == 1 and os.stat(path).st_uid == 0


def test_an_entry_writable_by_others_is_a_miss(tmp_path):
    cache = DiskCache("ns", root=_private(tmp_path / "root"))
    path = cache.get_or_create(["k"], Recorder(b"first"))
    os.chmod(path, 0o666)
    assert cache.lookup(["k"]) is None
    rebuild = Recorder(b"rebuilt")
    assert cache.fetch(["k"], rebuild)[0] == b"rebuilt" and stat.S_IMODE(os.stat(path).st_mode) == 0o600


_PROGRAM = """
import loom
A = loom.placeholder((16,), name="A")
B = loom.compute((16,), lambda i: A[i] * FACTOR, name="B")
s = loom.create_schedule(B.op)
"""


def _build(factor: float):
    ns: dict = {"FACTOR": factor}
    exec(_PROGRAM, ns)  # noqa: S102 - the test's own program
    return loom.build(ns["s"], [ns["A"], ns["B"]], target="llvm")


def test_a_planted_entry_in_a_shared_folder_never_runs(tmp_path, monkeypatch, caplog):
    """A library plus a matching record planted in a world-writable cache folder is not loaded."""
    root = tmp_path / "shared"
    monkeypatch.setenv("LOOM_CACHE_DIR", _private(root))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    victim, planted = _build(3.0).artifact.path, _build(-1.0).artifact.path
    # The attacker's code under the victim's key, with a record that matches it.
    shutil.copyfile(planted, victim)
    record = json.loads(open(planted[:-len(".llvm")] + ".meta").read())
    record["key"] = os.path.basename(victim)[:-len(".llvm")]
    with open(victim[:-len(".llvm")] + ".meta", "w") as fh:
        json.dump(record, fh)
    os.chmod(root, 0o777)
    before = stats()
    with caplog.at_level(logging.WARNING, "loom"):
        f = _build(3.0)
    b = np.zeros(16, "float32")
    f(np.ones(16, "float32"), b)
    assert b.tolist() == [3.0] * 16
    assert stats()["compiles"] == before["compiles"] + 1 and stats()["cache_hits"] == before["cache_hits"]
    assert "refusing the cache folder" in caplog.text and "compiling without the cache" in caplog.text


# --------------------------------------------------------------------------- size cap (item 21)


def _age(cache: DiskCache, key_parts, seconds_ago: float) -> None:
    key = cache_key(key_parts)
    when = time.time() - seconds_ago
    for name in os.listdir(cache.folder):
        if name.startswith(key):
            os.utime(os.path.join(cache.folder, name), (when, when))


def test_the_least_recently_used_entries_are_evicted_past_the_cap(tmp_path, monkeypatch):
    cache = DiskCache("ns", root=_private(tmp_path / "root"))
    for k in "ab":
        cache.get_or_create([k], Recorder(b"x" * 1000))
    _age(cache, ["a"], 200)
    _age(cache, ["b"], 100)
    entry = max(e.size for e in cache.entries())
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", str(2 * entry + entry // 2))  # room for two entries
    hit = Recorder()
    assert cache.fetch(["a"], hit)[0] == b"x" * 1000 and hit.calls == 0  # a hit makes "a" the newest
    cache.get_or_create(["c"], Recorder(b"y" * 1000))
    assert cache.lookup(["b"]) is None  # the least recently used went
    assert cache.lookup(["a"]) is not None and cache.lookup(["c"]) is not None
    assert cache_usage(cache.root) == {"ns": (2, 2 * entry)}


def test_a_new_entry_is_kept_even_past_the_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", "10")
    cache = DiskCache("ns", root=_private(tmp_path / "root"))
    cache.get_or_create(["a"], Recorder(b"x" * 100))
    assert cache.fetch(["b"], Recorder(b"y" * 100))[0] == b"y" * 100
    assert cache.lookup(["a"]) is None and cache.lookup(["b"]) is not None


def test_a_malformed_cap_fails_before_building(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", "lots")
    build = Recorder()
    with pytest.raises(loom.LoomValueError, match="LOOM_CACHE_MAX_SIZE='lots'"):
        DiskCache("ns", root=_private(tmp_path / "root")).fetch(["k"], build)
    assert build.calls == 0


def test_prune_spans_namespaces_and_skips_entries_being_built(tmp_path):
    root = _private(tmp_path / "root")
    c, llvm = DiskCache("backend-c", root=root), DiskCache("backend-llvm", root=root)
    for cache, keys in ((c, "ab"), (llvm, "xy")):
        for k in keys:
            cache.get_or_create([k], Recorder(b"z" * 500))
    for age, (cache, k) in enumerate([(llvm, "y"), (c, "b"), (llvm, "x"), (c, "a")]):
        _age(cache, [k], 100 + age)  # oldest: c/a, then llvm/x, c/b, llvm/y
    entry = cache_entries(root)[0].size
    with c._locked(cache_key(["a"])):  # another build holds the oldest entry
        assert prune(2 * entry, root) == (2, 2 * entry)
    assert c.lookup(["a"]) is not None and llvm.lookup(["x"]) is None and c.lookup(["b"]) is None
    assert llvm.lookup(["y"]) is not None
    assert prune(10 ** 9, root) == (0, 0)


def test_clear_cache_removes_every_entry(tmp_path):
    root = _private(tmp_path / "root")
    for ns in ("one", "two"):
        DiskCache(ns, root=root).get_or_create([ns], Recorder(b"12345"))
    size = sum(e.size for e in cache_entries(root))
    assert clear_cache(root) == (2, size) and cache_entries(root) == [] and clear_cache(root) == (0, 0)
    assert clear_cache(tmp_path / "missing") == (0, 0)


def test_disk_cache_reads_the_cap_from_the_environment(monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", "500M")
    assert disk_cache.cache_max_size() == 500 << 20
    monkeypatch.delenv("LOOM_CACHE_MAX_SIZE")
    assert disk_cache.cache_max_size() == 2 << 30


def test_a_refused_folder_warns_once_per_process(tmp_path, monkeypatch, caplog):
    root = tmp_path / "shared"
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)
    monkeypatch.setenv("LOOM_CACHE_DIR", str(root))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    with caplog.at_level(logging.WARNING, "loom"):
        for factor in (2.0, 4.0):
            _build(factor)
    refusals = [r for r in caplog.records if "refusing the cache folder" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelname == "WARNING"


def test_a_malformed_cap_fails_every_build_alike(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_DIR", _private(tmp_path / "root"))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    _build(2.0)  # in the cache now
    monkeypatch.setenv("LOOM_CACHE_MAX_SIZE", "lots")
    for factor in (2.0, 5.0):  # a hit, then a miss
        with pytest.raises(loom.LoomValueError, match="LOOM_CACHE_MAX_SIZE='lots'"):
            _build(factor)
