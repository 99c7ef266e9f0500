"""loom.transform.inline (TVM's ir_pass.Inline): reads of an operation's output replaced by its body."""

import pytest

import loom
from loom.ir import Evaluate, Let, ProducerLoad, collect
from loom.transform import inline, verify_ssa


def program():
    m = loom.size_var("m")
    A = loom.placeholder((m,), name="A")
    T = loom.compute((m,), lambda i: A[i] + 10, name="T")
    return A, T


def axes(T):
    return [iv.var for iv in T.op.axis]


def test_reads_become_the_body_at_their_indices():
    A, T = program()
    out = inline(Evaluate(T[10] + 11 * T[100]), T.op, axes(T), T.op.body[0])
    assert verify_ssa(out)
    assert loom.structural_equal(out, Evaluate(A[10] + 10 + 11 * (A[100] + 10)))
    assert not [n for n in collect(out, lambda n: isinstance(n, ProducerLoad)) if n.producer is T]


def test_inside_calls_and_expressions():
    A, T = program()
    out = inline(loom.exp(T[10]) + T[2], T.op, axes(T), T.op.body[0])
    assert loom.structural_equal(out, loom.exp(A[10] + 10) + (A[2] + 10))


def test_a_body_with_a_let_is_renamed_at_each_copy():
    """Two copies of a body binding x would bind x twice: the second gets a fresh variable."""
    A, _ = program()
    i, x = loom.var("i"), loom.var("x", "float32")
    T = loom.compute(A.shape, lambda j: A[j] * 2.0 + 1.0, name="T")
    out = inline(Evaluate(T[0] + T[1]), T.op, [i], Let(x, A[i] * 2.0, x + 1.0))
    assert verify_ssa(out)
    first, second = out.value.a, out.value.b
    assert first.var is x and second.var is not x and second.var.name.startswith("x")
    assert loom.structural_equal(second.body, second.var + 1.0)


def test_a_two_dimensional_output():
    A = loom.placeholder((4, 5), name="A")
    T = loom.compute((4, 5), lambda i, j: A[i, j] * A[j % 4, i], name="T")
    out = inline(T[1, 2] - T[3, 0], T.op, axes(T), T.op.body[0])
    assert loom.structural_equal(loom.arith.Analyzer().simplify(out), A[1, 2] * A[2, 1] - A[3, 0] * A[0, 3])


@pytest.mark.parametrize("call, match", [
    (lambda T, s: inline(T.op, [1, 2, 3], T.op.body, s), "first argument must be a statement or expression"),
    (lambda T, s: inline(s, T, axes(T), T.op.body[0]), "op must be an operation"),
    (lambda T, s: inline(s, T.op, [1], T.op.body[0]), "args must be a list of variables"),
    (lambda T, s: inline(s, T.op, axes(T), T.op.body), "body must be an expression"),
    (lambda T, s: inline(s, T.op, axes(T) * 2, T.op.body[0]), "has 1 dimension\\(s\\), given 2"),
])
def test_wrong_arguments_are_errors(call, match):
    _, T = program()
    with pytest.raises(loom.LoomError, match=match):
        call(T, Evaluate(T[0]))


def test_a_reduction_body_is_refused():
    A = loom.placeholder((8, 8), name="A")
    k = loom.reduce_axis((0, 8), name="k")
    S = loom.compute((8,), lambda i: loom.sum(A[i, k], axis=k), name="S")
    with pytest.raises(loom.LoomError, match="reduction, which cannot be inlined"):
        inline(Evaluate(S[0]), S.op, axes(S), S.op.body[0])
