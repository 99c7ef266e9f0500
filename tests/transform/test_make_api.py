"""MakeAPI: API attributes, free-variable check, offset_factor assertion."""

import numpy as np
import pytest

import loom
from loom.errors import LoomError
from loom.ir import AssertStmt, BufferStore, For, IRModule, PrimFunc
from loom.testing import AssertionFailed, evaluate
from loom.transform import PassContext
from loom.transform.make_api import MakeAPI, make_api


def copy_func(A, B, extra=()):
    i = loom.var("i")
    body = For(i, 0, A.shape[0], "serial", BufferStore(B, A[i], [i]))
    return PrimFunc([A.data, B.data, *extra], body, buffer_map={A.data: A, B.data: B})


def test_attrs_and_unchanged_body():
    n = loom.size_var("n")
    A, B = loom.decl_buffer((n,), "float32", name="A"), loom.decl_buffer((n,), "float32", name="B")
    f = copy_func(A, B)
    mod = MakeAPI()(IRModule({"copy": f}))
    out = mod["copy"]
    assert out.attrs["loom.api"] is True and out.attrs["tir.noalias"] is True
    assert out.attrs["global_symbol"] == "copy"
    assert out.params == f.params and out.buffer_map == f.buffer_map
    loom.assert_structural_equal(out.body, f.body)
    assert MakeAPI()(mod) is mod  # already made: left alone


def test_restricted_func_option():
    A, B = loom.decl_buffer((4,), "float32", name="A"), loom.decl_buffer((4,), "float32", name="B")
    with PassContext(config={"tir.restricted_func": False}):
        out = MakeAPI()(copy_func(A, B))
    assert out.attrs["tir.noalias"] is False


def test_free_variable_is_an_error_naming_it():
    A, B = loom.decl_buffer((4,), "float32", name="A"), loom.decl_buffer((4,), "float32", name="B")
    stray = loom.var("stray_scale", "float32")
    f = PrimFunc([A.data, B.data], BufferStore(B, A[0] * stray, [0]), buffer_map={A.data: A, B.data: B})
    with pytest.raises(LoomError, match="stray_scale"):
        MakeAPI()(f)
    ok = PrimFunc([A.data, B.data, stray], f.body, buffer_map={A.data: A, B.data: B})
    assert MakeAPI()(ok).attrs["loom.api"]


def test_shape_and_stride_vars_come_from_buffers():
    n, m, s0 = loom.size_var("n"), loom.size_var("m"), loom.size_var("s0")
    A = loom.decl_buffer((n, m), "float32", name="A", strides=[s0, 1])
    B = loom.decl_buffer((n,), "float32", name="B")
    i = loom.var("i")
    f = PrimFunc([A.data, B.data], For(i, 0, n, "serial", BufferStore(B, A[i, m - 1] + loom.cast(s0, "float32"), [i])),
                 buffer_map={A.data: A, B.data: B})
    assert make_api(f).attrs["loom.api"]


@pytest.mark.parametrize("in_body", [True, False])
def test_a_variable_only_inside_a_shape_expression_is_not_bound(in_body):
    """A shape ``d * 32`` is checked against the array, never read into ``d``: before, the c backend handed
    the C compiler an undeclared ``d``; now it is MakeAPI's error on every backend, unless ``d`` is passed."""
    d = loom.var("d")
    A, B = loom.decl_buffer((d * 32,), "float32", name="A"), loom.decl_buffer((4,), "float32", name="B")
    i = loom.var("i")
    body = For(i, 0, d if in_body else 4, "serial", BufferStore(B, A[i], [i]))
    f = PrimFunc([A.data, B.data], body, buffer_map={A.data: A, B.data: B})
    with pytest.raises(LoomError, match=r"uses d \(int32\), which is neither a parameter nor a whole shape"):
        make_api(f)
    assert make_api(PrimFunc([A.data, B.data, d], body, buffer_map={A.data: A, B.data: B})).attrs["loom.api"]


def test_offset_factor_assertion():
    A = loom.decl_buffer((4,), "float32", name="A", offset_factor=4)
    B = loom.decl_buffer((4,), "float32", name="B")
    out = MakeAPI()(copy_func(A, B))
    assert isinstance(out.body, AssertStmt) and "buffer A" in out.body.message.value
    off = A.elem_offset
    loom.assert_structural_equal(out.body.condition, loom.floormod(off, 4) == 0)
    base = np.arange(12, dtype="float32")
    b = np.zeros(4, dtype="float32")
    evaluate(out, base[4:8], b)
    np.testing.assert_array_equal(b, base[4:8])
    with pytest.raises((AssertionFailed, loom.LoomError)):
        evaluate(out, base[2:6], b)


def test_no_assertion_without_offset_factor():
    A, B = loom.decl_buffer((4,), "float32", name="A"), loom.decl_buffer((4,), "float32", name="B")
    assert not isinstance(MakeAPI()(copy_func(A, B)).body, AssertStmt)


def test_device_kernels_are_skipped():
    A, B = loom.decl_buffer((4,), "float32", name="A"), loom.decl_buffer((4,), "float32", name="B")
    f = copy_func(A, B).with_attr("calling_conv", "device_kernel")
    assert MakeAPI()(f) is f
