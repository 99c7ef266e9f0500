"""The caches of ``@loom.jit`` kernels: in memory, on disk, across threads and processes, and damaged entries.

Every test points ``LOOM_CACHE_DIR`` at its own folder.  Child processes import
the kernels of :mod:`jit_cache_kernels` (a file, so they compile the very same
kernel) and report ``cache_info()`` and ``loom.backend.stats()`` as JSON.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import logging
import os
import pickle
import stat
import subprocess
import threading

import numpy as np
import pytest

import loom
from loom.backend import stats
from loom.backend.base import pack_sections, unpack_sections
from loom.jit.cache import JIT_FORMAT
from loom.testing.conformance.harness import buildable_cpu_kinds

import jit_cache_kernels as K

KINDS = buildable_cpu_kinds()  # interp, llvm and c where installed
_TIMEOUT = 120


@pytest.fixture
def root(tmp_path, monkeypatch):
    """The cache root of this test (not created yet): the disk cache on, in a private folder."""
    path = tmp_path / "cache"
    monkeypatch.setenv("LOOM_CACHE_DIR", str(path))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    return path


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


def jit_entries(root) -> list[str]:
    """The artifact paths of the JIT namespace (records, locks and temporaries have a dot in their names)."""
    folder = root / "jit"
    return sorted(str(p) for p in folder.iterdir() if "." not in p.name) if folder.exists() else []


def only_entry(root) -> str:
    [path] = jit_entries(root)
    return path


def children(root, *targets: str, count: int = 1) -> list[dict]:
    """The reports of ``count`` child processes calling the kernel for ``targets``, released together."""
    procs = [subprocess.Popen(K.child_command(*targets, wait=True), env=K.child_env(root), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(count)]
    try:
        for p in procs:  # every child has imported loom and made its kernel: the first calls start together
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=_TIMEOUT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]


def fresh_hit(kind: str) -> None:
    """A new kernel object (nothing in memory) loads the disk entry: no compile, no build, the right result."""
    builds = stats()["builds"]
    kernel = K.make(kind)
    np.testing.assert_array_equal(K.run(kernel), K.expected())
    info = kernel.cache_info()
    assert (info.compiles, info.disk_loads) == (0, 1)
    assert stats()["builds"] == builds


# --------------------------------------------------------------------------- a new process hits the disk

def test_a_new_process_loads_the_compiled_kernel_without_compiling(root):
    [first] = children(root, *KINDS)
    [second] = children(root, *KINDS)
    for kind in KINDS:
        assert first["targets"][kind]["info"] == {"hits": 0, "misses": 1, "compiles": 1, "disk_loads": 0, "size": 1}
        assert second["targets"][kind]["info"] == {"hits": 0, "misses": 1, "compiles": 0, "disk_loads": 1, "size": 1}
        for report in (first, second):
            np.testing.assert_array_equal(report["targets"][kind]["out"], K.expected())
    assert first["stats"]["builds"] == len(KINDS)
    # No lowering and no backend build: the compiled bytes were loaded through each backend.
    assert second["stats"]["builds"] == second["stats"]["compiles"] == 0
    assert second["stats"]["loads"] == len(KINDS)
    assert len(jit_entries(root)) == len(KINDS)


# --------------------------------------------------------------------------- what an entry holds

def test_an_entry_is_json_metadata_and_compiled_bytes_never_pickle(root, kind, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the JIT cache used pickle")

    for name in ("dumps", "loads", "dump", "load", "Pickler", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    kernel = K.make(kind)
    np.testing.assert_array_equal(K.run(kernel), K.expected())  # a miss: compiled and written
    assert kernel.cache_info().compiles == 1
    fresh_hit(kind)  # a disk hit: read and loaded
    monkeypatch.undo()

    path = only_entry(root)
    with open(path, "rb") as fh:
        data = fh.read()
    data.decode("utf-8")  # text through and through (a pickle stream of protocol 2+ starts with byte 0x80)
    sections = unpack_sections(data, path)
    assert set(sections) == {"meta", "modules"}
    meta = json.loads(sections["meta"])
    assert meta["loom_jit"] == JIT_FORMAT and meta["kernel"] == "jit_cache_kernels.scale_fn"
    assert meta["key"]["args"]["k"] == "static value 2.0" and meta["key"]["target"]["target"].startswith(kind)
    [module] = json.loads(sections["modules"])
    info = json.loads(module["info"])
    assert (info["kind"], info["entry"], module["imports"]) == (kind, "scale_fn", [])
    compiled = base64.b64decode(module["artifact"], validate=True)
    if kind == "interp":
        assert compiled.startswith(b'{"loom_json"')  # the interpreter's artifact is the IR as JSON
    else:  # the backend's own compiled bytes, as its compile cache holds them
        [artifact] = [p for p in (root / f"backend-{kind}").iterdir() if not p.name.endswith((".meta", ".lock"))]
        assert artifact.read_bytes() == compiled


def test_the_cache_folder_and_its_entries_are_private(root, kind):
    old = os.umask(0)  # a permissive umask changes nothing
    try:
        np.testing.assert_array_equal(K.run(K.make(kind)), K.expected())
    finally:
        os.umask(old)
    for folder in (root, root / "jit"):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    path = only_entry(root)
    for name in (path, path + ".meta"):
        assert stat.S_IMODE(os.stat(name).st_mode) == 0o600
    for name in (root / "jit").iterdir():  # the lock files too: nobody else may write anything there
        assert not os.stat(name).st_mode & (stat.S_IWGRP | stat.S_IWOTH), name


# --------------------------------------------------------------------------- damaged entries

def _rewrite(path: str, data: bytes) -> None:
    """Replace the artifact and update its DiskCache record to match, so that only the JIT can tell."""
    with open(path, "wb") as fh:
        fh.write(data)
    with open(path + ".meta") as fh:
        record = json.load(fh)
    record.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    with open(path + ".meta", "w") as fh:
        json.dump(record, fh)


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _truncate(path: str) -> None:
    data = _read(path)
    with open(path, "wb") as fh:
        fh.write(data[: len(data) // 2])


def _flip(path: str) -> None:
    data = bytearray(_read(path))
    data[len(data) // 2] ^= 0xFF
    with open(path, "wb") as fh:
        fh.write(bytes(data))


def _other_version(path: str) -> None:
    sections = unpack_sections(_read(path))
    meta = json.loads(sections["meta"])
    meta["loom_jit"] = JIT_FORMAT + 1
    _rewrite(path, pack_sections({"meta": json.dumps(meta), "modules": sections["modules"]}))


def _unloadable_bytes(path: str) -> None:
    sections = unpack_sections(_read(path))
    [module] = json.loads(sections["modules"])
    module["artifact"] = base64.b64encode(b"\x7fELF not a library at all").decode()
    _rewrite(path, pack_sections({"meta": sections["meta"], "modules": json.dumps([module])}))


def _symlink_to_a_copy(path: str) -> None:
    copy = os.path.join(os.path.dirname(os.path.dirname(path)), "elsewhere")
    os.replace(path, copy)  # a valid artifact, but reached through a link: never read
    os.symlink(copy, path)


# (name, damage, words of the warning)
DAMAGES = [
    ("truncated", _truncate, "does not match the size and sha256 of its record"),
    ("flipped byte", _flip, "does not match the size and sha256 of its record"),
    ("garbage matching its record", lambda p: _rewrite(p, b"garbage, consistently recorded"), "cannot be loaded"),
    ("another loom_jit version", _other_version, f"not a loom.jit cache entry of format {JIT_FORMAT}"),
    ("unloadable compiled bytes", _unloadable_bytes, "cannot be loaded"),
    ("artifact writable by others", lambda p: os.chmod(p, 0o666), "writable by group or others"),
    ("record writable by group", lambda p: os.chmod(p + ".meta", 0o620), "writable by group or others"),
    ("artifact is a symbolic link", _symlink_to_a_copy, "is a symbolic link"),
]
_AS_ROOT = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away")


@pytest.mark.parametrize("damage, words", [pytest.param(d, w, id=n) for n, d, w in DAMAGES] + [
    pytest.param(lambda p: os.chown(p, 65534, 65534), "belongs to user 65534", id="artifact of another user",
                 marks=_AS_ROOT)])
def test_a_damaged_entry_is_a_miss_with_a_warning_and_is_replaced(root, kind, caplog, damage, words):
    K.run(K.make(kind))
    path = only_entry(root)
    damage(path)
    kernel = K.make(kind)
    with caplog.at_level(logging.WARNING, "loom.cache"):
        np.testing.assert_array_equal(K.run(kernel), K.expected())
    warnings = [r.getMessage() for r in caplog.records if r.name == "loom.cache" and r.levelno == logging.WARNING]
    assert any(words in w and os.path.basename(path) in w for w in warnings), warnings
    assert (kernel.cache_info().compiles, kernel.cache_info().disk_loads) == (1, 0)
    # Replaced by a valid entry of ours: a regular private file that the next kernel loads.
    assert only_entry(root) == path
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    assert stat.S_IMODE(os.stat(path + ".meta").st_mode) == 0o600
    fresh_hit(kind)


def test_repaired_entries_are_hit_by_a_new_process(root, caplog):
    for kind in KINDS:
        K.run(K.make(kind))
    for _, damage, _ in DAMAGES:
        for path in jit_entries(root):
            damage(path)
        for kind in KINDS:
            np.testing.assert_array_equal(K.run(K.make(kind)), K.expected())
    [report] = children(root, *KINDS)
    assert report["stats"]["builds"] == 0
    for kind in KINDS:
        assert report["targets"][kind]["info"]["disk_loads"] == 1
        np.testing.assert_array_equal(report["targets"][kind]["out"], K.expected())


@pytest.mark.parametrize("how", ["folder writable by others", "folder of another user"])
def test_a_folder_that_is_not_private_is_never_read(root, kind, caplog, monkeypatch, how):
    K.run(K.make(kind))
    path = only_entry(root)
    valid = _read(path)
    if how == "folder writable by others":
        os.chmod(root / "jit", 0o777)
    else:
        me = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: me + 1)
    kernel = K.make(kind)
    with caplog.at_level(logging.WARNING, "loom.cache"):
        np.testing.assert_array_equal(K.run(kernel), K.expected())
    assert "refusing the cache folder" in caplog.text and "without the disk cache" in caplog.text
    assert (kernel.cache_info().compiles, kernel.cache_info().disk_loads) == (1, 0)  # its entry was not loaded
    assert jit_entries(root) == [path] and _read(path) == valid  # and nothing was written there


# --------------------------------------------------------------------------- threads and processes

def _in_threads(*kernels, count: int = 8) -> list:
    """The outputs of ``count`` threads released together by a barrier, thread ``k`` calling ``kernels[k % len]``."""
    barrier = threading.Barrier(count)
    outs: list = [None] * count

    def call(k: int) -> None:
        barrier.wait()
        outs[k] = K.run(kernels[k % len(kernels)])

    threads = [threading.Thread(target=call, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(_TIMEOUT)
    return outs


def test_threads_making_the_same_first_call_compile_once(root, kind):
    kernel = K.make(kind)
    for out in _in_threads(kernel):
        np.testing.assert_array_equal(out, K.expected())
    info = kernel.cache_info()
    assert (info.compiles, info.disk_loads, info.size, info.hits + info.misses) == (1, 0, 1, 8)
    assert len(jit_entries(root)) == 1
    builds = stats()["builds"]
    kernel = K.make(kind)  # a warm disk: threads of a new kernel object load it once, build nothing
    for out in _in_threads(kernel):
        np.testing.assert_array_equal(out, K.expected())
    assert (kernel.cache_info().compiles, kernel.cache_info().disk_loads) == (0, 1)
    assert stats()["builds"] == builds


def test_threads_of_two_kernel_objects_compile_once_between_them(root, kind):
    # Two objects share no memory cache: the disk entry's file lock makes the second wait and load.
    kernels = [K.make(kind), K.make(kind)]
    for out in _in_threads(*kernels):
        np.testing.assert_array_equal(out, K.expected())
    infos = sorted((k.cache_info().compiles, k.cache_info().disk_loads) for k in kernels)
    assert infos == [(0, 1), (1, 0)]


def test_processes_making_the_same_first_call_compile_once(root):
    reports = children(root, *KINDS, count=4)
    for kind in KINDS:
        infos = sorted((r["targets"][kind]["info"]["compiles"], r["targets"][kind]["info"]["disk_loads"])
                       for r in reports)
        assert infos == [(0, 1), (0, 1), (0, 1), (1, 0)], kind
        for r in reports:
            np.testing.assert_array_equal(r["targets"][kind]["out"], K.expected())
    assert sum(r["stats"]["builds"] for r in reports) == len(KINDS)
    assert len(jit_entries(root)) == len(KINDS)


# --------------------------------------------------------------------------- turning the disk cache off

def _memory_only(kernel) -> None:
    for _ in range(2):
        np.testing.assert_array_equal(K.run(kernel), K.expected())
    info = kernel.cache_info()
    assert (info.hits, info.misses, info.compiles, info.disk_loads) == (1, 1, 1, 0)


def test_loom_cache_0_turns_the_disk_cache_off(root, kind, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE", "0")
    _memory_only(K.make(kind))
    _memory_only(K.make(kind))  # a new object compiles again: there is nothing on disk
    assert not root.exists()


def test_a_kernel_without_disk_cache_writes_nothing(root, kind):
    _memory_only(K.make(kind, disk_cache=False))
    assert jit_entries(root) == []
    kernel = K.make(kind)  # the same kernel with the disk cache finds nothing to load
    K.run(kernel)
    assert (kernel.cache_info().compiles, len(jit_entries(root))) == (1, 1)


@pytest.mark.parametrize("where", ["build_config around the call", "the kernel's pass_configs"])
def test_a_kernel_built_with_a_user_pass_stays_in_memory(root, kind, where):
    ran: list[int] = []

    def spy(stmt):  # known by identity only: no stable text for an on-disk key
        ran.append(1)
        return stmt

    if where == "build_config around the call":
        kernel = K.make(kind)
        with loom.build_config(add_lower_pass=[(1, spy)]):
            _memory_only(kernel)
    else:
        _memory_only(K.make(kind, pass_configs={"add_lower_pass": [(1, spy)]}))
    assert ran == [1]  # the pass ran in the one build
    assert jit_entries(root) == []


# --------------------------------------------------------------------------- what tells entries apart

def test_targets_and_static_values_have_their_own_entries(root):
    for kind in KINDS:
        np.testing.assert_array_equal(K.run(K.make(kind)), K.expected())
    assert len(jit_entries(root)) == len(KINDS)
    for kind in KINDS:
        kernel = K.make(kind)
        np.testing.assert_array_equal(K.run(kernel, k=3.0), K.expected(k=3.0))  # k is static: compiled in
        np.testing.assert_array_equal(K.run(kernel, n=4), K.expected(n=4))  # n is a runtime size: not in the key
        assert (kernel.cache_info().compiles, kernel.cache_info().disk_loads) == (1, 1)
    assert len(jit_entries(root)) == 2 * len(KINDS)


_VARIANT = '''
import loom
import loom.language as T


@loom.jit(target={kind!r})
def shift(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"], n: T.dyn["N"]):
    for i in T.serial(n):
        B[i] = A[i] + {amount}
'''


def _variant(tmp_path, kind: str, folder: str, amount: float):
    """Kernel ``jit_cache_variant.shift`` from a file of its own (the same module and name, another body)."""
    path = tmp_path / folder / "jit_cache_variant.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(_VARIANT.format(kind=kind, amount=amount))
    spec = importlib.util.spec_from_file_location("jit_cache_variant", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.shift


def test_different_source_text_has_its_own_entry(root, kind, tmp_path):
    a = np.arange(5, dtype="float32")

    def call(kernel):
        out = np.zeros(5, "float32")
        kernel(a, out, 5)
        return out, (kernel.cache_info().compiles, kernel.cache_info().disk_loads)

    assert call(_variant(tmp_path, kind, "one", 1.0))[1] == (1, 0)
    out, counts = call(_variant(tmp_path, kind, "two", 2.0))  # another body under the same name: no hit
    np.testing.assert_array_equal(out, a + 2)
    assert counts == (1, 0) and len(jit_entries(root)) == 2
    out, counts = call(_variant(tmp_path, kind, "again", 1.0))  # the first body again: its entry
    np.testing.assert_array_equal(out, a + 1)
    assert counts == (0, 1) and len(jit_entries(root)) == 2
