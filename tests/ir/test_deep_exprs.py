"""Deep expressions build, lower, compile and run; deeper than Loom can walk is a LoomError, never a
RecursionError or a crash (issue 11, item 14)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom.errors import LoomError, SerializationError
from loom.ir import recursion
from loom.ir.recursion import RECURSION_LIMIT, caused_by_recursion, deep_recursion


def _chain(n: int):
    """``B[i] = A[i, 0] + A[i, 1] + ... + A[i, n-1]``: an expression ``n`` levels deep."""
    A = loom.placeholder((4, n), name="A")
    B = loom.compute((4,), lambda i: sum(A[i, j] for j in range(n)), name="B")
    return A, B


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_a_300_deep_sum_builds_and_matches_numpy(target):
    old = sys.getrecursionlimit()
    A, B = _chain(300)
    f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    a = np.random.default_rng(1).random((4, 300)).astype("float32")
    b = np.zeros(4, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1, dtype="float64"), rtol=1e-4)
    assert sys.getrecursionlimit() == old  # raised only while Loom worked


def test_a_300_deep_sum_lowers_prints_compares_and_round_trips():
    A, B = _chain(300)
    mod = loom.lower(loom.create_schedule(B.op), [A, B])
    assert str(mod).count(" + ") >= 299
    assert loom.structural_equal(loom.load_json(loom.save_json(mod)), mod, map_free_vars=True)
    assert isinstance(loom.structural_hash(mod), int)
    assert loom.ir.verify.is_well_formed(mod["default_function"])


_VERY_DEEP = """
import sys
import numpy as np
import loom

def chain(n):
    A = loom.placeholder((2, n), name="A")
    B = loom.compute((2,), lambda i: sum(A[i, j] for j in range(n)), name="B")
    return A, B

n = int(sys.argv[1])
for target in sys.argv[2:]:
    try:
        A, B = chain(n)
        f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
        a = np.random.default_rng(0).random((2, n)).astype("float32")
        b = np.zeros(2, "float32")
        f(a, b)
        print(target, "ok" if np.allclose(b, a.sum(axis=1, dtype="float64"), rtol=1e-3) else "WRONG")
    except RecursionError:
        print(target, "RecursionError")
    except loom.LoomError as err:
        print(target, "LoomError", "nested too deeply" in str(err))
"""


def _child(*args: str) -> list[list[str]]:
    out = subprocess.run([sys.executable, "-c", _VERY_DEEP, *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]  # a segfault or an abort would end the child otherwise
    return [line.split() for line in out.stdout.splitlines()]


def test_5000_chained_operations_build_and_run_in_a_child_process():
    depth = "5000" if sys.version_info >= (3, 11) else "1500"  # 3.10 spends C stack on every frame
    assert _child(depth, "interp", "llvm", "c") == [["interp", "ok"], ["llvm", "ok"], ["c", "ok"]]


def test_far_too_deep_is_a_clean_loom_error_in_a_child_process():
    assert _child("30000", "interp", "c") == [["interp", "LoomError", "True"], ["c", "LoomError", "True"]]


def test_the_interpreter_reports_an_expression_too_deep_to_run():
    from loom.ir import PrimFunc, stmt as S

    A = loom.decl_buffer((1,), "float32", name="A")
    e = A[0]
    for _ in range(RECURSION_LIMIT):
        e = e + A[0]
    f = PrimFunc([A.data], S.BufferStore(A, e, [0]), buffer_map={A.data: A})
    with pytest.raises(LoomError, match="the interpreter: the IR is nested too deeply"):
        loom.testing.evaluate(f, np.ones(1, "float32"))


def test_a_recursion_error_a_pass_wrapped_is_reported_as_too_deep():
    def wrapped():
        try:
            raise RecursionError("maximum recursion depth exceeded")
        except RecursionError as err:
            raise LoomError("pass Simplify failed: RecursionError") from err

    with pytest.raises(LoomError, match="^lower: the IR is nested too deeply") as info:
        with deep_recursion("lower"):
            wrapped()
    assert info.value.too_deep and caused_by_recursion(info.value)


def test_a_deliberate_translation_is_left_alone():
    """``raise ... from None`` (load_json's SerializationError) is the error meant, whatever it replaced."""
    def translated():
        try:
            raise RecursionError()
        except RecursionError:
            raise SerializationError("load_json: input is nested too deeply") from None

    with pytest.raises(SerializationError):
        with deep_recursion("load_json"):
            translated()


def test_nested_entry_points_restore_the_limit_once():
    old = sys.getrecursionlimit()
    with deep_recursion("outer"):
        with deep_recursion("inner"):
            assert sys.getrecursionlimit() == max(old, RECURSION_LIMIT)
        assert sys.getrecursionlimit() == max(old, RECURSION_LIMIT)
    assert sys.getrecursionlimit() == old and recursion._active == 0


def test_a_limit_set_higher_by_the_user_is_kept():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(RECURSION_LIMIT + 1000)
    try:
        with deep_recursion("x"):
            assert sys.getrecursionlimit() == RECURSION_LIMIT + 1000
        assert sys.getrecursionlimit() == RECURSION_LIMIT + 1000
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="before 3.11 every Python frame takes C stack")
def test_expression_equality_does_not_recurse_through_c():
    """The simplifier's equality runs as plain Python calls: only the frame limit bounds it, not the C stack."""
    from loom.arith._exprkey import expr_equal, struct_key

    x = loom.var("x")
    a = b = x
    for k in range(5000):
        a, b = a + k, b + k
    code = textwrap.dedent("""
        import sys
        sys.setrecursionlimit(10**6)
        import loom
        from loom.arith._exprkey import expr_equal
        x = loom.var("x")
        a = b = x
        for k in range(200000):
            a, b = a + k, b + k
        print(expr_equal(a, b))
    """)
    with deep_recursion("test"):
        assert expr_equal(a, b) and struct_key(a) == struct_key(b)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr[-2000:]
