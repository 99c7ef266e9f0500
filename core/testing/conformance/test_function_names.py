"""Any function name works: the names of C library functions, OpenMP entry points, keywords, non-ASCII.

Native code calls ``expf``, ``memcpy`` or ``GOMP_parallel`` and includes C headers
(``NAN``, ``linux``); a function whose symbol were one of those would call itself,
or not compile.  A kind may give such a function another symbol, but the name
users call stays: ``mod[name]``, ``get_function(name)`` and a module exported and
loaded again all answer to it and compute the right thing.  Each name is built,
run, exported and loaded in a child process, which a function calling itself
would crash; the child reports one line per name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .harness import KindUnderTest, run_child

NAMES = ["exp", "expf", "log", "sinf", "sqrt", "memcpy", "aligned_alloc", "omp_get_thread_num", "GOMP_parallel",
         "int", "for", "linux", "NAN", "uint32_t", "loom_num_threads", "caf\u00e9", "a.b", "3d"]

_CHILD = """
import os
from loom.testing.conformance.harness import bind_root

folder = args[1]
n = 64
for k, name in enumerate(args[0]):
    try:
        A = loom.placeholder((n,), "float32", name="A")
        B = loom.compute((n,), lambda i: loom.exp(A[i]) + loom.log(A[i] + 2.0) + loom.sin(A[i]) + loom.sqrt(A[i]),
                         name="B")
        D = loom.compute((n,), lambda i: loom.exp(loom.cast(A[i], "float64")) + loom.sin(loom.cast(A[i], "float64")),
                         name="D")
        s = loom.create_schedule([B.op, D.op])
        for t in (B, D):
            if kind.on_device:
                bind_root(s, t, 16)
            else:
                s[t].parallel(t.op.axis[0])
        f = kind.build(s, [A, B, D], name=name)
        a = np.linspace(0.5, 3.0, n, dtype="float32")
        want_b = np.exp(a) + np.log(a + 2) + np.sin(a) + np.sqrt(a)
        want_d = np.exp(a.astype("float64")) + np.sin(a.astype("float64"))
        path = os.path.join(folder, f"lib{k}.so")
        f.export_library(path)
        loaded = loom.runtime.load_module(path)
        outcome = "ok"
        for how, fn in (("the module", f), ("mod[name]", f[name]), ("get_function", f.get_function(name)),
                        ("the loaded module", loaded), ("the loaded mod[name]", loaded[name])):
            _, b, d = kind.run(fn, a, np.zeros(n, "float32"), np.zeros(n, "float64"))
            if not (np.allclose(b, want_b, rtol=1e-5) and np.allclose(d, want_d, rtol=1e-12)):
                outcome = f"{how} computed a wrong result"
                break
    except Exception as err:  # noqa: BLE001 - the report names it
        outcome = f"{type(err).__name__}: {err}"
    print(json.dumps([name, outcome]), flush=True)
"""


def test_library_and_reserved_names_build_run_and_load(kind_under_test: KindUnderTest, tmp_path: Path) -> None:
    proc = run_child(_CHILD, kind_under_test, NAMES, str(tmp_path))
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    if proc.returncode != 0:
        done = [name for name, _ in lines]
        pytest.fail(f"the child ended with status {proc.returncode} (negative: the signal that killed it) after "
                    f"the names {done}:\n{proc.stderr[-3000:]}")
    failures = {name: outcome for name, outcome in lines if outcome != "ok"}
    assert [name for name, _ in lines] == NAMES
    assert not failures, "every function name must work:\n" + "\n".join(
        f"  {name!r}: {outcome}" for name, outcome in failures.items())
