"""Tensors: indexing spellings."""
# -- classic spellings (issue 15, item 1) ------------------------------------------------------------


def test_call_syntax_and_partial_indexing_are_loads() -> None:
    import numpy as np

    import loom
    from loom.ir.structural import structural_equal
    from loom.te.tensor import TensorSlice

    A = loom.placeholder((4, 5), "float32", name="A")
    i, j = loom.var("i"), loom.var("j")
    assert structural_equal(A(i, j), A[i, j]) and structural_equal(A[i][j], A[i, j])
    assert isinstance(A[i], TensorSlice) and A[i].dtype == "float32"
    B = loom.compute((4, 5), lambda x, y: A[x][y] * 2.0 + A(x, y), name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target="interp")
    a, b = np.arange(20, dtype="float32").reshape(4, 5), np.zeros((4, 5), "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 3)


def test_an_incomplete_slice_used_as_a_value_names_the_missing_dimensions() -> None:
    import pytest

    import loom

    A = loom.placeholder((4, 5), "float32", name="A")
    with pytest.raises(loom.LoomError, match=r"A\[i\] indexes 1 of the 2 dimensions of tensor A; index the rest"):
        loom.compute((4,), lambda i: A[i] + 1.0)
    with pytest.raises(loom.LoomError, match="indexed with 3"):
        A[1][2, 3]
