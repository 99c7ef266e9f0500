"""verify_ssa / convert_ssa / uses_var (TVM's ir_pass.VerifySSA, ConvertSSA, ExprUseVar)."""

import numpy as np

import loom
from loom.ir import Allocate, BufferStore, Evaluate, For, Let, LetStmt, PrimFunc, seq
from loom.testing import evaluate
from loom.transform import convert_ssa, uses_var, verify_ssa

A = loom.decl_buffer((4,), "float32", name="A")


def test_expressions():
    x, y = loom.var("x"), loom.var("y")
    assert verify_ssa(Evaluate(x + y))
    z = Evaluate(Let(x, 1, x + 1) + Let(x, 1, x + y))
    assert not verify_ssa(z)
    fixed = convert_ssa(z)
    assert verify_ssa(fixed)
    assert fixed.value.a.var is x and fixed.value.b.var is not x  # the first site keeps its variable
    assert uses_var(x + 1, x) and not uses_var(loom.const(1) + 10, x)


def test_an_ssa_statement_comes_back_as_is():
    i = loom.var("i")
    s = For(i, 0, 4, "serial", BufferStore(A, A[i] * 2.0, [i]))
    assert verify_ssa(s) and convert_ssa(s) is s


def test_repeated_loops_lets_and_allocations_keep_their_meaning():
    i, t = loom.var("i"), loom.var("t", "float32")
    T = loom.decl_buffer((4,), "float32", name="T")

    def part(scale):
        return Allocate(T.data, "float32", [4], True, seq(
            For(i, 0, 4, "serial", LetStmt(t, A[i] * scale, BufferStore(T, t + 1.0, [i]))),
            For(i, 0, 4, "serial", BufferStore(A, T[3 - i], [i]))))

    body = seq(part(2.0), part(3.0))
    assert not verify_ssa(body)
    fixed = convert_ssa(body)
    assert verify_ssa(fixed)
    f = lambda b: PrimFunc([A.data], b, buffer_map={A.data: A})  # noqa: E731
    loom.verify_well_formed(f(fixed))
    a = np.arange(4, dtype="float32")
    evaluate(f(fixed), a)
    x = np.arange(4, dtype="float32")
    x = (x * 2 + 1)[::-1]
    np.testing.assert_array_equal(a, (x * 3 + 1)[::-1])
