"""Small spellings a TVM 0.6 user reaches for (issue 15, item 13), each with its behaviour."""

import numpy as np
import pytest

import loom
import loom.testing.ext_dev as ext_dev


def test_an_expression_as_a_python_bool_is_a_value_error_and_a_type_error() -> None:
    x = loom.var("x")
    for kind in (ValueError, TypeError, loom.LoomError):
        with pytest.raises(kind, match="as a Python bool"):
            bool(x > 1)


def test_input_tensors_is_a_property() -> None:
    A = loom.placeholder((4,), name="A")
    B = loom.compute((4,), lambda i: A[i] * 2.0, name="B")
    assert B.op.input_tensors == [A] and A.op.input_tensors == []


def test_strings_are_members_of_converted_lists() -> None:
    names = loom.convert(["a", "b"])
    assert "a" in names and "b" in names and "c" not in names
    x = loom.var("x")
    assert x in loom.convert([x, 1]) and 1 in loom.convert([x, 1]) and loom.var("x") not in loom.convert([x])


def test_exact_math_intrinsics_fold_on_constants() -> None:
    assert loom.ceil(loom.const(3.55)).value == 4.0 and loom.floor(loom.const(-3.5)).value == -4.0
    assert loom.round(loom.const(2.5)).value == 2.0 and loom.trunc(loom.const(-2.7, "float64")).value == -2.0
    assert loom.fabs(loom.const(-1.5)).value == 1.5
    assert not isinstance(loom.exp(loom.const(1.0)), type(loom.const(1.0)))  # libm and numpy may differ: a call


def test_device_exist() -> None:
    assert loom.cpu(0).exist and not loom.device("vulkan", 0).exist
    name = loom.plugins.register(ext_dev)
    try:
        assert loom.device("ext_dev", 0).exist and not loom.device("ext_dev", 1).exist
    finally:
        loom.plugins.unregister(name)


def test_integral_float_shapes_are_ints() -> None:
    A = loom.placeholder((4.0, np.float32(3)), name="A")
    assert [int(s) for s in A.shape] == [4, 3]
    with pytest.raises(loom.LoomTypeError, match="shape entry 0 must be an int"):
        loom.placeholder((4.5,), name="B")
