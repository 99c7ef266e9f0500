"""Tensor arithmetic with numpy broadcasting (``A + B``, ``2.0 * A``, ``-A``)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import loom
from loom.errors import LoomTypeError, LoomValueError
from loom.te import tensor_ops
from loom.te.operation import placeholder
from loom.te.tensor import ComputeOp, Tensor
from loom.te.tensor_ops import broadcast_shape
from te_reference import Reference

RNG = np.random.default_rng(3)


def _ints(shape):
    return [int(s) for s in shape]


# ---------------------------------------------------------------------------
# broadcast_shape


@pytest.mark.parametrize("a, b, out", [
    ((4, 3), (3,), (4, 3)), ((4, 1), (1, 5), (4, 5)), ((1,), (2, 3, 4), (2, 3, 4)),
    ((), (2, 2), (2, 2)), ((1, 1), (1,), (1, 1)), ((2, 1, 3), (4, 1), (2, 4, 3)),
])
def test_broadcast_shape_constants(a, b, out):
    c = lambda s: tuple(loom.const(x) for x in s)  # noqa: E731
    assert _ints(broadcast_shape(c(a), c(b))) == list(out) == list(np.broadcast_shapes(a, b))


def test_broadcast_shape_symbolic():
    n, m = loom.var("n"), loom.var("m")
    one, four = loom.const(1), loom.const(4)
    assert broadcast_shape((n, four), (n, one)) == (n, four)
    assert broadcast_shape((one,), (m,))[0] is m
    assert broadcast_shape((n + 1,), (n + 1,))[0] is not None  # equal by structure
    with pytest.raises(LoomValueError, match=r"T_add: shapes \(n\) and \(m\) do not broadcast: dimension -1 is n vs m"):
        broadcast_shape((n,), (m,), "T_add")
    with pytest.raises(LoomValueError, match="dimension -1 is n vs 4"):
        broadcast_shape((n,), (four,))


def test_mismatched_tensor_shapes_are_an_error():
    A, B = placeholder((4, 3), name="A"), placeholder((4, 2), name="B")
    with pytest.raises(LoomValueError, match=r"T_multiply: shapes \(4, 3\) and \(4, 2\) do not broadcast"):
        A * B


# ---------------------------------------------------------------------------
# structure


@pytest.mark.parametrize("build, name", [
    (lambda a, b: a + b, "T_add"), (lambda a, b: a - b, "T_subtract"), (lambda a, b: a * b, "T_multiply"),
    (lambda a, b: a / b, "T_divide"), (lambda a, b: a // b, "T_floor_divide"), (lambda a, b: a % b, "T_floor_mod"),
    (tensor_ops.maximum, "T_maximum"), (tensor_ops.minimum, "T_minimum"),
])
def test_operator_names_and_broadcast_loads(build, name):
    dtype = "int32" if "floor" in name else "float32"
    A, B = placeholder((4, 1), dtype, name="A"), placeholder((3,), dtype, name="B")
    C = build(A, B)
    assert isinstance(C, Tensor) and isinstance(C.op, ComputeOp)
    assert C.op.name == name and C.op.tag == "broadcast" and _ints(C.shape) == [4, 3]
    assert [iv.var.name for iv in C.op.axis] == ["i0", "i1"] and str(C.dtype) == dtype
    assert C.op.input_tensors[:2] == [A, B]
    loads = [C.op.body[0].a, C.op.body[0].b]
    assert str(loads[0]) == "A[i0, 0]" and str(loads[1]) == "B[i1]"


def test_scalar_operands():
    n = loom.var("n")
    A = placeholder((n, 2), "float32", name="A")
    for C, text in ((A + 1.0, "A[i0, i1] + 1.0"), (2.0 * A, "2.0 * A[i0, i1]"), (1.0 - A, "1.0 - A[i0, i1]"),
                    (A / 4.0, "A[i0, i1] / 4.0"), (-A, "0.0 - A[i0, i1]")):
        assert C.op.tag == "elemwise" and C.shape[0] is n and str(C.op.body[0]) == text
    assert (-A).op.name == "T_negative"
    m = loom.var("m", "float32")
    assert str((m * A).op.body[0]) == "m * A[i0, i1]" and str((A - m).op.body[0]) == "A[i0, i1] - m"


def test_dtype_promotion_follows_expressions():
    I = placeholder((3,), "int8", name="I")
    F = placeholder((3,), "float16", name="F")
    assert str((I + F).dtype) == "float16"
    assert str((I + 1.5).dtype) == "float32"  # a float literal promotes an integer, as in TVM
    assert str((I * 3).dtype) == "int8"


def test_errors():
    I = placeholder((3,), "int32", name="I")
    with pytest.raises(LoomTypeError, match="ambiguous"):
        I / I
    with pytest.raises(LoomTypeError, match="T_add: operands must be tensors, expressions or numbers, got str"):
        tensor_ops.add(I, "x")
    with pytest.raises(LoomTypeError, match="T_negative: expected a Tensor"):
        tensor_ops.negative(3)


def test_two_scalars_give_an_expression():
    x = loom.var("x")
    assert str(tensor_ops.add(x, 2)) == "x + 2" and tensor_ops.maximum(2, 5).value == 5


def test_zero_dim_tensors():
    S = placeholder((), name="S")
    A = placeholder((2,), name="A")
    C = A * S
    assert _ints(C.shape) == [2] and str(C.op.body[0]) == "A[i0] * S[]"
    assert (S + S).ndim == 0


# ---------------------------------------------------------------------------
# numerics against numpy


_OPS = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "max": (tensor_ops.maximum, np.maximum),
    "min": (tensor_ops.minimum, np.minimum),
}


@settings(max_examples=60, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       op=st.sampled_from(sorted(_OPS)))
def test_broadcasting_matches_numpy(shapes, op):
    sa, sb = shapes.input_shapes
    A, B = placeholder(sa, name="A"), placeholder(sb, name="B")
    build, ref_fn = _OPS[op]
    C = build(A, B)
    assert tuple(_ints(C.shape)) == shapes.result_shape
    a = RNG.standard_normal(sa).astype("float32")
    b = RNG.standard_normal(sb).astype("float32")
    np.testing.assert_allclose(Reference({A: a, B: b}).run(C), ref_fn(a, b), rtol=1e-6)


def test_integer_floor_semantics_match_numpy():
    A, B = placeholder((2, 3), "int32", name="A"), placeholder((3,), "int32", name="B")
    a = np.array([[-7, 7, -1], [5, -5, 0]], "int32")
    b = np.array([2, -3, 4], "int32")
    ref = Reference({A: a, B: b})
    np.testing.assert_array_equal(ref.run(A // B), a // b)
    np.testing.assert_array_equal(ref.run(A % B), a % b)
    np.testing.assert_array_equal(ref.run(-A + 3 * A), -a + 3 * a)
