"""The on-disk artifact cache: hits, misses, damaged entries, the environment, concurrent builders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from loom.errors import LoomError
from loom.runtime.disk_cache import CacheError, DiskCache, cache_enabled, cache_key, cache_root


class Recorder:
    """A build function that writes ``payload`` and counts its calls."""

    def __init__(self, payload: bytes = b"artifact") -> None:
        self.payload = payload
        self.calls: list[str] = []

    def __call__(self, path: str) -> None:
        self.calls.append(path)
        with open(path, "wb") as fh:
            fh.write(self.payload)


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def test_miss_builds_then_hits(tmp_path) -> None:
    cache = DiskCache("ns", root=tmp_path, suffix=".bin")
    build = Recorder()
    assert cache.lookup(["src", "-O2"]) is None
    path = cache.get_or_create(["src", "-O2"], build)
    assert len(build.calls) == 1 and build.calls[0] != path
    assert path == os.path.join(tmp_path, "ns", cache_key(["src", "-O2"]) + ".bin")
    assert _read(path) == b"artifact"
    assert cache.get_or_create(["src", "-O2"], build) == path and cache.lookup(["src", "-O2"]) == path
    assert len(build.calls) == 1
    # Different key material is a different entry; no temporaries are left behind.
    other = cache.get_or_create(["src", "-O3"], Recorder(b"other"))
    assert other != path and _read(other) == b"other"
    assert not [n for n in os.listdir(tmp_path / "ns") if n.startswith(".tmp-")]


def test_keys_separate_their_parts() -> None:
    assert cache_key(["ab", "c"]) != cache_key(["a", "bc"])
    assert cache_key(["x", b"y"]) == cache_key([b"x", "y"])
    assert len(cache_key([])) == 64


@pytest.mark.parametrize("damage", ["truncate", "flip", "append", "delete_artifact", "garbage_record",
                                    "binary_record", "delete_record", "other_key_record"])
def test_damaged_entry_is_a_miss_and_is_repaired(tmp_path, damage: str) -> None:
    cache = DiskCache("ns", root=tmp_path)
    path = cache.get_or_create(["k"], Recorder(b"0123456789"))
    meta = path + ".meta"
    if damage == "truncate":
        open(path, "wb").write(b"01234")
    elif damage == "flip":
        open(path, "wb").write(b"0123456780")  # same length, other content
    elif damage == "append":
        open(path, "ab").write(b"!")
    elif damage == "delete_artifact":
        os.unlink(path)
    elif damage == "garbage_record":
        open(meta, "w").write("{not json")
    elif damage == "binary_record":
        open(meta, "wb").write(b"\xff\xfe\x00")
    elif damage == "delete_record":
        os.unlink(meta)
    else:  # a well-formed record of another entry
        other = cache.get_or_create(["other"], Recorder(b"0123456789"))
        os.replace(other + ".meta", meta)
    assert cache.lookup(["k"]) is None
    rebuild = Recorder(b"0123456789")
    assert cache.get_or_create(["k"], rebuild) == path
    assert len(rebuild.calls) == 1 and _read(path) == b"0123456789"
    assert cache.lookup(["k"]) == path


def test_foreign_file_is_a_miss_and_is_replaced(tmp_path) -> None:
    cache = DiskCache("ns", root=tmp_path, suffix=".so")
    key = cache_key(["k"])
    os.makedirs(cache.folder)
    with open(cache.path_of(key), "wb") as fh:
        fh.write(b"\x7fELF not ours")
    with open(os.path.join(cache.folder, key + ".meta"), "w") as fh:
        json.dump({"loom_cache": 999, "key": key, "size": 13, "sha256": "0" * 64}, fh)
    assert cache.lookup(["k"]) is None
    build = Recorder(b"ours")
    assert _read(cache.get_or_create(["k"], build)) == b"ours" and len(build.calls) == 1


def test_stale_temporaries_are_removed_on_rebuild(tmp_path) -> None:
    cache = DiskCache("ns", root=tmp_path)
    key = cache_key(["k"])
    os.makedirs(cache.folder)
    stale = os.path.join(cache.folder, f".tmp-{key[:16]}-crashed")
    open(stale, "w").write("half written")
    cache.get_or_create(["k"], Recorder())
    assert not os.path.exists(stale)


def test_failing_build_leaves_no_entry(tmp_path) -> None:
    cache = DiskCache("ns", root=tmp_path)

    def broken(path: str) -> None:
        open(path, "wb").write(b"partial")
        raise LoomError("the compiler failed")

    with pytest.raises(LoomError, match="the compiler failed"):
        cache.get_or_create(["k"], broken)
    assert cache.lookup(["k"]) is None
    assert not [n for n in os.listdir(cache.folder) if n.startswith(".tmp-")]
    assert _read(cache.get_or_create(["k"], Recorder(b"ok"))) == b"ok"


def test_clear_deletes_every_entry(tmp_path) -> None:
    cache = DiskCache("ns", root=tmp_path)
    for k in "abc":
        cache.get_or_create([k], Recorder())
    assert cache.clear() == 3
    assert all(cache.lookup([k]) is None for k in "abc")
    assert DiskCache("never-created", root=tmp_path).clear() == 0


def test_environment_picks_the_folder_and_turns_caching_off(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "root"))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    assert cache_root() == str(tmp_path / "root") and cache_enabled()
    cache = DiskCache.default("c", suffix=".so")
    assert cache is not None and cache.folder == str(tmp_path / "root" / "c")
    path = cache.get_or_create(["k"], Recorder())
    assert path.startswith(str(tmp_path / "root" / "c") + os.sep) and path.endswith(".so")
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv("LOOM_CACHE", off)
        assert not cache_enabled() and DiskCache.default("c") is None
    monkeypatch.setenv("LOOM_CACHE", "1")
    assert cache_enabled()
    monkeypatch.delenv("LOOM_CACHE_DIR")
    assert cache_root().rstrip(os.sep).endswith("loom")


def test_unusable_folder_is_a_cache_error(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = DiskCache("ns", root=blocker)
    with pytest.raises(CacheError, match="cannot create the cache folder .*LOOM_CACHE_DIR"):
        cache.get_or_create(["k"], Recorder())
    assert cache.lookup(["k"]) is None


@pytest.mark.parametrize("namespace", ["", "..", "a/b"])
def test_namespace_is_one_folder_name(namespace: str) -> None:
    with pytest.raises(CacheError, match="one folder name"):
        DiskCache(namespace, root="/tmp")


_WORKER = textwrap.dedent("""
    import os, sys, time
    from loom.runtime.disk_cache import DiskCache
    root, log, me, other = sys.argv[1:5]
    open(os.path.join(root, me), "w").close()
    while not os.path.exists(os.path.join(root, other)):  # start both lookups together
        time.sleep(0.005)

    def build(path):
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(0.5)  # a slow compiler: the other process misses meanwhile
        with open(path, "w") as fh:
            fh.write("built once")

    path = DiskCache("ns", root=root).get_or_create(["same kernel"], build)
    print(path, open(path).read())
""")


def test_two_processes_build_the_same_key_once(tmp_path) -> None:
    log = tmp_path / "builds.log"
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path), str(log), me, other],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me, other in (("ready-a", "ready-b"), ("ready-b", "ready-a"))]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert len(log.read_text().splitlines()) == 1
    assert outputs[0][0] == outputs[1][0] and outputs[0][0].strip().endswith("built once")
