"""Expression constructors accept Python and numpy numbers, typed after their sibling expression."""

import numpy as np
import pytest

import loom
from loom.errors import IRError, LoomTypeError
from loom.ir import expr as E


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16"])
def test_binary_and_compare_take_the_other_operands_dtype(dtype):
    x = loom.var("x", dtype)
    for node in (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max):
        right, left = node(x, 3), node(3, x)
        assert right.b.dtype == left.a.dtype == x.dtype
        assert right.b.value == left.a.value == 3
        assert loom.structural_equal(right, node(x, loom.const(3, dtype)))
    for node in (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE):
        e = node(5, x)
        assert str(e.dtype) == "bool" and e.a.dtype == x.dtype


def test_two_numbers_take_the_default_dtypes():
    assert str(E.Add(1, 2).dtype) == "int32"
    assert str(E.Mul(1.5, 2.0).dtype) == "float32"
    assert str(E.Cast("float32", 2).value.dtype) == "int32"
    assert str(E.Broadcast(1.5, 4).dtype) == "float32x4"


def test_numpy_numbers():
    x = loom.var("x", "int64")
    assert E.Add(x, np.int32(7)).b.dtype == x.dtype
    y = loom.var("y", "float16")
    assert E.Mul(y, np.float64(0.5)).b.dtype == y.dtype


def test_vector_operand_broadcasts_the_number():
    v = E.Ramp(loom.var("i"), 1, 4)
    e = E.Add(v, 1)
    assert isinstance(e.b, E.Broadcast) and str(e.dtype) == "int32x4"


def test_ramp_let_select_and_logic():
    i = loom.var("i", "int64")
    r = E.Ramp(i, 1, 4)
    assert str(r.dtype) == "int64x4" and r.stride.dtype == i.dtype
    r0 = E.Ramp(0, 2, 8)
    assert str(r0.dtype) == "int32x8"
    let = E.Let(i, 1, i * 2)
    assert let.value.dtype == i.dtype and let.value.value == 1
    y = loom.var("y", "float32")
    s = E.Select(y > 0.0, y, 0)
    assert s.false_value.dtype == y.dtype and s.false_value.value == 0.0
    assert str(E.Select(True, 1, 2).condition.dtype) == "bool"
    assert str(E.And(i > 0, True).b.dtype) == "bool"
    assert str(E.Not(False).a.dtype) == "bool"


def test_converted_nodes_evaluate_like_operator_built_ones():
    n = 16
    A = loom.placeholder((n,), name="A", dtype="int32")
    B = loom.compute((n,), lambda i: E.Select(E.LT(i, 8), E.Add(A[i], 100), E.Mul(2, A[i])), name="B")
    s = loom.create_schedule(B.op)
    f = loom.build(s, [A, B], "interp")
    a = np.arange(n, dtype="int32")
    b = np.zeros(n, dtype="int32")
    f(a, b)
    np.testing.assert_array_equal(b, np.where(np.arange(n) < 8, a + 100, 2 * a))


def test_lossy_or_wrong_literals_are_refused():
    x = loom.var("x")
    with pytest.raises(IRError, match="Add operands differ in dtype: int32 and float32"):
        E.Add(x, 1.5)
    with pytest.raises(LoomTypeError, match="Select.true_value expects PrimExpr or Number or bool, got str"):
        E.Select(x > 0, "a", 1)
    with pytest.raises(IRError, match="Add operands differ in dtype: int8 and int32"):  # 300 is no int8
        E.Add(loom.var("b", "int8"), 300)
