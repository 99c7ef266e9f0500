"""loom.call_intrin / loom.call_pure_intrin: TVM's calls of intrinsics by name, classic names included."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.ir.op import Op

KINDS = ["interp", "llvm", "c"]


def run(kind, fcompute, a):
    A = loom.placeholder((16,), "float32", name="A")
    B = loom.compute((16,), lambda i: fcompute(A[i]), name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target=kind)
    b = np.zeros(16, "float32")
    f(a, b)
    return b


@pytest.mark.parametrize("kind", KINDS)
def test_a_float_intrinsic_by_name_computes_as_the_typed_builder(kind):
    a = np.linspace(-2, 2, 16).astype("float32")
    got = run(kind, lambda x: loom.call_pure_intrin("float32", "exp", x) + loom.call_intrin("float32", "tir.sqrt",
                                                                                             x * x), a)
    np.testing.assert_allclose(got, np.exp(a) + np.abs(a), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_the_classic_names_tvm_if_then_else_and_pow(kind):
    a = np.linspace(-2, 2, 16).astype("float32")
    got = run(kind, lambda x: loom.call_pure_intrin("float32", "tvm_if_then_else", x > 0.0,
                                                    loom.call_pure_intrin("float32", "pow", x, loom.const(2.0)), -x), a)
    np.testing.assert_allclose(got, np.where(a > 0, a * a, -a), rtol=1e-6)


def test_the_call_is_the_same_node_the_typed_builders_make():
    x = loom.var("x", "float32")
    loom.assert_structural_equal(loom.call_intrin("float32", "exp", x), loom.exp(x))
    loom.assert_structural_equal(loom.call_pure_intrin("float32", "pow", x, x), loom.power(x, x))
    assert loom.call_intrin("float32", Op.get("tir.log"), x).op is Op.get("tir.log")


def test_an_integer_intrinsic_keeps_its_integer_type():
    i = loom.var("i")
    call = loom.call_pure_intrin("int32", "popcount", i)
    assert call.dtype == "int32" and call.op is Op.get("tir.popcount")


@pytest.mark.parametrize("make, message", [
    (lambda i, x: loom.call_pure_intrin("float32", "exp", i), "one float type"),
    (lambda i, x: loom.call_pure_intrin("float64", "exp", x), "one float type"),
    (lambda i, x: loom.call_intrin("float32", "exp", x, x), "takes 1 argument"),
    (lambda i, x: loom.call_intrin("int32", "no_such_intrinsic", i), "unknown intrinsic op 'no_such_intrinsic'"),
])
def test_bad_calls_are_clear_errors(make, message):
    with pytest.raises(loom.LoomError, match=message):
        make(loom.var("i"), loom.var("x", "float32"))
