"""The disk cache of compiled artifacts with the real native backends (llvm, c).

A second process building the same kernel compiles nothing; two processes
building it at once compile it once; compile errors are clear and never cached.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
import loom_c.cc as cc
from loom.backend import build_module, stats
from loom.target import Target
from loom_c.cc import CompileError

_PROGRAM = """
import loom
A = loom.placeholder((64,), name="A")
B = loom.compute((64,), lambda i: A[i] * 3.0 + 1.0, name="B")
s = loom.create_schedule(B.op)
xo, xi = s[B].split(B.op.axis[0], factor=8)
s[B].vectorize(xi)
"""


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Every test gets its own cache root; the user's cache is never touched."""
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    return tmp_path / "cache"


def _in_fresh_process(target: str) -> dict:
    code = _PROGRAM + textwrap.dedent(f"""
        import json, numpy as np
        from loom.backend import stats
        f = loom.build(s, [A, B], target={target!r})
        a = np.arange(64, dtype="float32"); b = np.zeros(64, "float32"); f(a, b)
        assert (b == a * 3 + 1).all()
        print(json.dumps(stats()))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120)
    assert out.returncode == 0, out.stderr
    import json

    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("target", ["llvm", "c -flags=-O1"])
def test_a_fresh_process_loads_what_another_compiled(target):
    first = _in_fresh_process(target)
    assert first["compiles"] == 1 and first["cache_misses"] == 1 and first["cache_hits"] == 0
    second = _in_fresh_process(target)
    assert second["compiles"] == 0 and second["cache_hits"] == 1 and second["loads"] == 1


def _vadd_module(target: str):
    ns: dict = {}
    exec(_PROGRAM, ns)  # noqa: S102 - the test's own program
    return loom.lower(ns["s"], [ns["A"], ns["B"]])


@pytest.mark.parametrize("change", ["c -flags=-O2", "c -openmp=0", "c -compiler=cc -flags=-O1", "llvm -opt_level=2",
                                    "llvm -fp_contract=0"])
def test_the_key_covers_the_options(change):
    base = "c -flags=-O1" if change.startswith("c") else "llvm"
    mod = _vadd_module(base)
    build_module(mod, Target(base))
    before = stats()["compiles"]
    build_module(mod, Target(change))
    assert stats()["compiles"] == before + (0 if change == "c -compiler=cc -flags=-O1" else 1)


def test_the_c_compiler_identity_covers_version_and_host(monkeypatch):
    mod = _vadd_module("c")
    build_module(mod, Target("c -flags=-O1"))
    before = stats()["compiles"]
    monkeypatch.setattr(cc, "compiler_version", lambda compiler="cc": "cc (an upgrade) 99.0")
    build_module(mod, Target("c -flags=-O1"))
    assert stats()["compiles"] == before + 1
    host = cc._host_specific("cc", ("-O3", "-march=native"))
    assert host and "/" not in host and cc._host_specific("cc", ("-O3",)) == ""


def test_built_c_modules_share_the_cached_library():
    mod = _vadd_module("c")
    f = build_module(mod, Target("c -flags=-O1"))
    g = build_module(mod, Target("c -flags=-O1"))
    assert f.artifact.path == g.artifact.path and os.path.dirname(f.artifact.path).endswith("backend-c")
    assert f.library_path != g.library_path  # each maps a private copy, never the cache's file
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    g(a, b)
    np.testing.assert_array_equal(b, a * 3 + 1)


def test_a_compile_error_is_clear_and_never_cached(cache_dir, monkeypatch):
    monkeypatch.setattr(cc, "_compile", _failing_compile)
    mod = _vadd_module("c")
    for _ in range(2):  # a failure is never cached as a success
        with pytest.raises(CompileError) as info:
            build_module(mod, Target("c -flags=-O1"))
        err = info.value
        assert "exit status" in str(err) and "undeclared_thing" in err.output
        assert err.command[:4] == ["cc", "-ffp-contract=off", "-O1", "-fwrapv"] and "-shared" in err.command
        assert "compile stage of the 'c' backend" in err.__notes__[0]
    folder = cache_dir / "backend-c"
    assert not [n for n in os.listdir(folder) if n.endswith(".so")] if folder.exists() else True


def _failing_compile(source, compiler, flags, openmp, output):
    return _REAL_COMPILE(source + "\nint broken(void) { return undeclared_thing; }\n", compiler, flags, openmp,
                         output)


_REAL_COMPILE = cc._compile


def test_a_missing_compiler_fails_clearly(cache_dir):
    with pytest.raises(CompileError, match="cannot run the C compiler.*\ncommand: /nonexistent/cc --version"):
        build_module(_vadd_module("c"), Target("c -compiler=/nonexistent/cc"))


# A compiler wrapper that logs every compilation (not --version/-### probes) and is slow,
# so that two processes missing the same key overlap.
_WRAPPER = textwrap.dedent("""\
    #!/bin/sh
    case " $* " in *" -shared "*) echo "$$" >> "$LOOM_TEST_LOG"; sleep 0.5;; esac
    exec cc "$@"
""")

_WORKER = _PROGRAM + textwrap.dedent("""
    import os, sys, time
    import numpy as np
    me, other, compiler = sys.argv[1:4]
    open(me, "w").close()
    while not os.path.exists(other):  # start both builds together
        time.sleep(0.005)
    f = loom.build(s, [A, B], target=f"c -compiler={compiler} -flags=-O1")
    a = np.arange(64, dtype="float32"); b = np.zeros(64, "float32"); f(a, b)
    print(f.artifact.path, int((b == a * 3 + 1).all()))
""")


def test_two_processes_compile_the_same_kernel_once(tmp_path):
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
    assert len(paths) == 1 and all(out.split()[1] == "1" for out, _ in outputs)
