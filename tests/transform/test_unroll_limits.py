"""Unrolling is capped at MAX_UNROLL_STEPS: a huge loop is a clear error, never a build that runs for hours (issue 11, item 13)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import loom
from loom.errors import LoomValueError
from loom.ir import BufferStore, For
from loom.ir.functor import collect
from loom.transform import unroll as unroll_mod
from loom.transform.unroll import UnrollOptions, unroll_loop


def _child(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter; a hang is a failure, not a stuck test run."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120)


def test_explicitly_unrolling_a_million_iterations_is_refused_quickly():
    out = _child("""
        import loom
        n = 10**6
        A = loom.placeholder((n,), name="A")
        B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
        s = loom.create_schedule(B.op)
        s[B].unroll(B.op.axis[0])
        for explicit in (True, False):
            try:
                with loom.build_config(unroll_explicit=explicit):
                    loom.lower(s, [A, B])
            except loom.LoomValueError as err:
                print(err)
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith("unroll of loop i: 1000000 iterations, more than the limit of 8192 steps")
        assert "MAX_UNROLL_STEPS" in line


def test_auto_unroll_never_goes_past_the_cap():
    out = _child("""
        import loom
        from loom.ir import For
        from loom.ir.functor import collect
        n = 10**6
        A = loom.placeholder((n,), name="A")
        B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
        s = loom.create_schedule(B.op)
        with loom.build_config(auto_unroll_max_step=10**9, auto_unroll_max_extent=10**9):
            mod = loom.lower(s, [A, B])
        [loop] = collect(mod["default_function"].body, lambda x: isinstance(x, For))
        print(loop.kind.name, loop.extent.value)
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["SERIAL", "1000000"]


def _loop(n: int, kind: str = "unrolled", body_loop: int | None = None) -> For:
    A = loom.decl_buffer((1,), "int32", name="A")
    i, j = loom.var("i"), loom.var("j")
    body = BufferStore(A, A[0] + i, [0])
    if body_loop is not None:
        body = For(j, 0, body_loop, "unrolled", BufferStore(A, A[0] + i + j, [0]))
    return For(i, 0, n, kind, body)


def _stores(stmt) -> int:
    return len(collect(stmt, lambda x: isinstance(x, BufferStore)))


def test_the_cap_is_the_limit_exactly(monkeypatch):
    monkeypatch.setattr(unroll_mod, "MAX_UNROLL_STEPS", 16)
    assert _stores(unroll_loop(_loop(16))) == 16
    with pytest.raises(LoomValueError, match=r"unroll of loop i: 17 iterations, more than the limit of 16 steps"):
        unroll_loop(_loop(17))


def test_nested_unrolled_loops_count_their_product(monkeypatch):
    monkeypatch.setattr(unroll_mod, "MAX_UNROLL_STEPS", 16)
    assert _stores(unroll_loop(_loop(4, body_loop=4))) == 16
    with pytest.raises(LoomValueError, match=r"unroll of loop i: 5 iterations of 4 steps make 20 steps, more than "
                                             r"the limit of 16"):
        unroll_loop(_loop(5, body_loop=4))


def test_auto_unroll_options_are_capped_too(monkeypatch):
    monkeypatch.setattr(unroll_mod, "MAX_UNROLL_STEPS", 16)
    opts = UnrollOptions(max_step=1000, max_depth=8, max_extent=1000, explicit=True)
    assert _stores(unroll_loop(_loop(16, "serial"), opts)) == 16
    kept = unroll_loop(_loop(17, "serial"), opts)
    assert isinstance(kept, For) and kept.extent.value == 17  # stays a loop, no error: it was not asked for
