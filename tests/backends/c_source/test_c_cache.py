"""The on-disk cache of compiled C libraries: hits, misses, keys, damage, errors, concurrent processes."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
import loom_c.cc as cc
from loom.runtime.disk_cache import DiskCache
from loom_c.cc import CompileError, compile_source

SOURCE = "int answer(void) { return 42; }"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Every test gets its own cache root; the user's cache is never touched."""
    root = tmp_path / "cache"
    monkeypatch.setenv("LOOM_CACHE_DIR", str(root))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    return root / "c"


@pytest.fixture()
def compiles(monkeypatch):
    """The list of output paths the C compiler was run for."""
    calls: list[str] = []
    real = cc._compile

    def counting(source, compiler, flags, openmp, output):
        calls.append(output)
        return real(source, compiler, flags, openmp, output)

    monkeypatch.setattr(cc, "_compile", counting)
    return calls


def _answer(lib: cc.SharedLibrary) -> int:
    lib.cdll.answer.restype = ctypes.c_int
    return lib.cdll.answer()


def _entries(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".so")) if os.path.isdir(folder) else []


def test_miss_compiles_and_hit_reuses(cache_dir, compiles) -> None:
    first = compile_source(SOURCE, flags="-O0", openmp=False)
    assert len(compiles) == 1 and os.path.dirname(first.path) == str(cache_dir)
    assert _entries(cache_dir) == [os.path.basename(first.path)] and _answer(first) == 42
    again = compile_source(SOURCE, flags="-O0", openmp=False)
    assert again.path == first.path and len(compiles) == 1 and _answer(again) == 42


@pytest.mark.parametrize("change", [
    {"source": SOURCE + "\n"}, {"flags": "-O1"}, {"openmp": True}, {"compiler": "cc -DLOOM_TEST=1"},
])
def test_key_covers_source_flags_openmp_and_compiler(cache_dir, compiles, change) -> None:
    base = {"source": SOURCE, "flags": "-O0", "openmp": False}
    first = compile_source(**base)
    other = compile_source(**{**base, **change})
    assert other.path != first.path and len(compiles) == 2 and len(_entries(cache_dir)) == 2


def test_compiler_version_is_part_of_the_key(compiles, monkeypatch) -> None:
    first = compile_source(SOURCE, flags="-O0", openmp=False)
    assert any(ch.isdigit() for ch in cc.compiler_version("cc"))  # e.g. "cc (Debian 12.2.0-14) 12.2.0"
    monkeypatch.setattr(cc, "compiler_version", lambda compiler="cc": "cc (an upgrade) 99.0")
    upgraded = compile_source(SOURCE, flags="-O0", openmp=False)
    assert upgraded.path != first.path and len(compiles) == 2


def test_native_flags_are_resolved_for_this_host() -> None:
    host = cc._host_specific("cc", ("-O3", "-march=native"))
    assert host and "/" not in host and host == cc._host_specific.__wrapped__("cc", ("-O3", "-march=native"))
    assert cc._host_specific("cc", ("-O3",)) == ""


@pytest.mark.parametrize("damage", [b"", b"\x7fELF garbage", None])
def test_corrupted_entry_is_recompiled(compiles, damage) -> None:
    path = compile_source(SOURCE, flags="-O0", openmp=False).path
    if damage is None:  # flip one byte in the middle: same length, wrong digest
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0xFF
        damage = bytes(data)
    # Damage a new file and rename it over the entry: writing into the mapped library in
    # place would crash this process, which still has it loaded.
    with open(path + ".damaged", "wb") as fh:
        fh.write(damage)
    os.replace(path + ".damaged", path)
    fresh = compile_source(SOURCE, flags="-O0", openmp=False)
    assert fresh.path == path and len(compiles) == 2
    # This process would reuse its loaded handle; a fresh one loads the repaired file.
    check = f"import ctypes; f = ctypes.CDLL({path!r}).answer; f.restype = ctypes.c_int; print(f())"
    assert subprocess.run([sys.executable, "-c", check], capture_output=True, text=True).stdout.strip() == "42"


def test_compile_error_is_clear_and_leaves_no_entry(cache_dir) -> None:
    bad = "int f(void) { return undeclared_thing; }"
    with pytest.raises(CompileError) as info:
        compile_source(bad, flags="-O0", openmp=False)
    err = info.value
    assert isinstance(err, loom.LoomError) and "exit status" in str(err) and "undeclared_thing" in str(err)
    assert err.source == bad and "undeclared_thing" in err.output
    assert err.command[:4] == ["cc", "-ffp-contract=off", "-O0", "-fwrapv"] and "-shared" in err.command
    assert _entries(cache_dir) == [] and not [n for n in os.listdir(cache_dir) if n.startswith(".tmp-")]
    with pytest.raises(CompileError, match="undeclared_thing"):  # a failure is never cached as a success
        compile_source(bad, flags="-O0", openmp=False)


def test_missing_compiler_fails_before_the_cache(cache_dir) -> None:
    with pytest.raises(CompileError, match="cannot run the C compiler.*\ncommand: /nonexistent/cc --version"):
        compile_source(SOURCE, compiler="/nonexistent/cc", openmp=False)
    assert not cache_dir.exists()


def test_cache_can_be_turned_off(cache_dir, compiles, monkeypatch) -> None:
    uncached = compile_source(SOURCE, flags="-O0", openmp=False, cache=False)
    assert not cache_dir.exists() and _answer(uncached) == 42
    monkeypatch.setenv("LOOM_CACHE", "0")
    other = compile_source(SOURCE, flags="-O0", openmp=False)
    assert not cache_dir.exists() and other.path != uncached.path and len(compiles) == 2
    folder = os.path.dirname(other.path)
    del other
    assert not os.path.exists(folder)  # the temporary folder lives as long as its library


def test_explicit_cache_object(tmp_path, compiles) -> None:
    mine = DiskCache("mine", root=tmp_path / "elsewhere", suffix=".so")
    lib = compile_source(SOURCE, flags="-O0", openmp=False, cache=mine)
    assert os.path.dirname(lib.path) == mine.folder and _answer(lib) == 42


def test_unusable_cache_warns_and_compiles_anyway(tmp_path, monkeypatch) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("the cache root must be a folder")
    monkeypatch.setenv("LOOM_CACHE_DIR", str(not_a_folder))
    with pytest.warns(RuntimeWarning, match="cannot create the cache folder .*; compiling without the cache"):
        lib = compile_source(SOURCE, flags="-O0", openmp=False)
    assert _answer(lib) == 42 and not lib.path.startswith(str(not_a_folder))


def test_built_modules_share_the_cached_library() -> None:
    A = loom.placeholder((8,), "float32", name="A")
    B = loom.compute((8,), lambda i: A[i] + 1.0, name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target="c -flags=-O1")
    g = loom.build(loom.create_schedule(B.op), [A, B], target="c -flags=-O1")
    assert f.library_path == g.library_path
    b = np.zeros(8, "float32")
    g(np.arange(8, dtype="float32"), b)
    np.testing.assert_array_equal(b, np.arange(1, 9, dtype="float32"))


# A compiler wrapper that logs every compilation (not --version/-### probes) and is slow,
# so that two processes missing the same key overlap.
_WRAPPER = textwrap.dedent("""\
    #!/bin/sh
    case " $* " in *" -shared "*) echo "$$" >> "$LOOM_TEST_LOG"; sleep 0.5;; esac
    exec cc "$@"
""")

_WORKER = textwrap.dedent("""
    import ctypes, os, sys, time
    from loom_c.cc import compile_source
    me, other, compiler = sys.argv[1:4]
    open(me, "w").close()
    while not os.path.exists(other):  # start both lookups together
        time.sleep(0.005)
    lib = compile_source("int answer(void) { return 42; }", compiler=compiler, flags="-O0", openmp=False)
    lib.cdll.answer.restype = ctypes.c_int
    print(lib.path, lib.cdll.answer())
""")


def test_two_processes_compile_the_same_kernel_once(tmp_path) -> None:
    wrapper = tmp_path / "slow-cc"
    wrapper.write_text(_WRAPPER)
    wrapper.chmod(0o755)
    log = tmp_path / "compiles.log"
    env = {**os.environ, "LOOM_TEST_LOG": str(log)}
    ready = [str(tmp_path / "ready-a"), str(tmp_path / "ready-b")]
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, me, other, str(wrapper)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me, other in (ready, ready[::-1])]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert len(log.read_text().splitlines()) == 1
    paths = {out.split()[0] for out, _ in outputs}
    assert len(paths) == 1 and all(out.split()[1] == "42" for out, _ in outputs)
