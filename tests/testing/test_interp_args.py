"""Argument checking and binding: counts, dtypes, shapes, symbolic sizes, strides, offsets."""

import numpy as np
import pytest

import loom
from loom.errors import LoomTypeError, LoomValueError
from loom.ir import BufferStore, For
from loom.ir import expr as E
from loom.testing import evaluate

from interp_helpers import prim


def _copy_func(shape_a, shape_b, dtype="float32", **decl):
    """B[i] = A[i] * 2 over A's first dimension."""
    A = loom.decl_buffer(shape_a, dtype, name="A", **decl)
    B = loom.decl_buffer(shape_b, dtype, name="B")
    i = loom.var("i", A.shape[0].dtype)
    return prim(For(i, loom.const(0, i.dtype), A.shape[0], "serial", BufferStore(B, A[i] * loom.const(2, dtype), [i])),
                A, B, name="copy")


def test_wrong_argument_count_names_the_function():
    f = _copy_func((4,), (4,))
    with pytest.raises(LoomTypeError, match=r"copy takes 2 arguments \(A, B\), got 1"):
        evaluate(f, np.zeros(4, np.float32))


def test_wrong_dtype_names_the_argument():
    f = _copy_func((4,), (4,))
    with pytest.raises(LoomTypeError, match=r"copy: argument 1 \(B: float32 buffer B .*\) needs dtype float32, got an array of float64"):
        evaluate(f, np.zeros(4, np.float32), np.zeros(4))


def test_wrong_ndim_and_non_array():
    f = _copy_func((4,), (4,))
    with pytest.raises(LoomValueError, match="needs 1 dimensions, got an array of shape"):
        evaluate(f, np.zeros((2, 2), np.float32), np.zeros(4, np.float32))
    with pytest.raises(LoomTypeError, match=r"takes an array \(numpy, loom.nd or DLPack\), got list"):
        evaluate(f, [0.0] * 4, np.zeros(4, np.float32))


def test_constant_shape_mismatch():
    f = _copy_func((4,), (4,))
    with pytest.raises(LoomValueError, match=r"shape\[0\] must be 4, got shape \(5,\)"):
        evaluate(f, np.zeros(5, np.float32), np.zeros(4, np.float32))


def test_symbolic_dimension_binds_once_across_buffers():
    """``n`` shared by two buffers takes one value; a mismatch names both origins."""
    n = loom.size_var("n")
    f = _copy_func((n,), (n,))
    a, b = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    evaluate(f, a, b)
    np.testing.assert_array_equal(b, a * 2)
    with pytest.raises(LoomValueError, match=r"shape\[0\]: n is 6 here, but 5 from copy: argument 0"):
        evaluate(f, a, np.zeros(6, np.float32))


def test_compound_shape_expression_is_checked_after_binding():
    """B of shape (2 * n,) must be twice as long as A."""
    n = loom.size_var("n")
    f = _copy_func((n,), (n * 2,))
    b = np.zeros(6, np.float32)
    evaluate(f, np.ones(3, np.float32), b)
    assert b.tolist() == [2, 2, 2, 0, 0, 0]
    with pytest.raises(LoomValueError, match=r"shape\[0\] must be n \* 2 = 6, got shape \(5,\)"):
        evaluate(f, np.ones(3, np.float32), np.zeros(5, np.float32))


def test_scalar_parameter_consistent_with_a_shape():
    """A scalar parameter that also sizes a buffer must agree with the array."""
    n = loom.var("n")
    A = loom.decl_buffer((n,), "int32", name="A")
    i = loom.var("i")
    f = prim(For(i, 0, n, "serial", BufferStore(A, i, [i])), A, n, name="iota")
    a = np.zeros(3, np.int32)
    evaluate(f, a, 3)
    assert a.tolist() == [0, 1, 2]
    with pytest.raises(LoomValueError, match=r"n is 4 here, but 3 from"):
        evaluate(f, a, 4)


@pytest.mark.parametrize("dtype, good, wrong_kind, out_of_range", [
    ("int32", [3, np.int64(3), np.array(3), True], [2.5, "3", None], [2**40]),
    ("uint8", [255, np.uint8(7)], [1.0], [-1, 256]),
    ("float32", [1, 2.5, np.float64(0.1), np.float16(1)], ["x", True, 1j, np.zeros(2)], []),
    ("bool", [True, np.bool_(False), 0, 1], [0.5, "yes"], [2]),
])
def test_scalar_parameters_accept_numbers_of_their_kind(dtype, good, wrong_kind, out_of_range):
    """A value of the wrong kind is a type error; a number of the right kind out of range, a value error."""
    x = loom.var("x", dtype)
    f = prim(loom.ir.Evaluate(x), x, name="scalar")
    for v in good:
        evaluate(f, v)
    for error, bad in ((LoomTypeError, wrong_kind), (LoomValueError, out_of_range)):
        for v in bad:
            with pytest.raises(error, match=f"argument 0 \\(x: {dtype}\\) expects a {dtype} scalar"):
                evaluate(f, v)


def test_scalar_parameter_values_reach_the_body():
    x, y = loom.var("x", "float32"), loom.var("y", "int8")
    A = loom.decl_buffer((2,), "float32", name="A")
    body = loom.ir.seq(BufferStore(A, x, [0]), BufferStore(A, E.Cast("float32", y), [1]))
    a = np.zeros(2, np.float32)
    evaluate(prim(body, x, y, A), 0.1, -5, a)
    assert a.tolist() == [np.float32(0.1), -5.0]


def test_non_contiguous_array_for_a_compact_buffer():
    f = _copy_func((4,), (4,))
    with pytest.raises(LoomValueError, match="is compact .* pass numpy.ascontiguousarray"):
        evaluate(f, np.zeros(8, np.float32)[::2], np.zeros(4, np.float32))


def test_negative_strides_are_rejected():
    s = loom.var("s")
    f = _copy_func((4,), (4,), strides=[s])
    with pytest.raises(LoomValueError, match="non-negative"):
        evaluate(f, np.arange(4, dtype=np.float32)[::-1], np.zeros(4, np.float32))


def test_symbolic_strides_bind_from_a_non_contiguous_view():
    """A strided buffer reads and writes a numpy view in place, element strides bound from the array."""
    m, n, s0, s1 = (loom.size_var(x) for x in ("m", "n", "s0", "s1"))
    A = loom.decl_buffer((m, n), "float64", name="A", strides=[s0, s1])
    B = loom.decl_buffer((m, n), "float64", name="B", strides=[loom.var("t0"), loom.var("t1")])
    i, j = loom.var("i"), loom.var("j")
    body = For(i, 0, m, "serial", For(j, 0, n, "serial", BufferStore(B, A[i, j] + 1.0, [i, j])))
    f = prim(body, A, B, name="strided")
    base_a = np.arange(60, dtype=np.float64).reshape(6, 10)
    base_b = np.zeros((3, 12), np.float64)
    view_a, view_b = base_a[::2, 1::3], base_b[:, ::4]
    assert view_a.shape == view_b.shape == (3, 3)
    evaluate(f, view_a, view_b)
    expect = np.zeros((3, 12))
    expect[:, ::4] = base_a[::2, 1::3] + 1
    np.testing.assert_array_equal(base_b, expect)


def test_constant_stride_mismatch():
    A = loom.decl_buffer((2, 3), "int32", name="A", strides=[loom.const(4), loom.const(1)])
    f = prim(BufferStore(A, loom.const(1), [0, 0]), A, name="padded")
    evaluate(f, np.zeros((2, 4), np.int32)[:, :3])
    with pytest.raises(LoomValueError, match=r"strides\[0\] must be 4"):
        evaluate(f, np.zeros((2, 3), np.int32))


def test_elem_offset_binds_from_a_view_and_honours_offset_factor():
    """With offset_factor 4, a view 4 elements into its base binds elem_offset 4; 3 is rejected."""
    B = loom.decl_buffer((4,), "float32", name="B", offset_factor=4)
    out = loom.decl_buffer((1,), "int32", name="out")
    i = loom.var("i")
    body = loom.ir.seq(For(i, 0, 4, "serial", BufferStore(B, B[i] + 10.0, [i])),
                       BufferStore(out, B.elem_offset, [0]))
    f = prim(body, B, out, name="offset")
    base, o = np.zeros(12, np.float32), np.zeros(1, np.int32)
    evaluate(f, base[4:8], o)
    assert o[0] == 4
    assert base.tolist() == [0] * 4 + [10] * 4 + [0] * 4
    evaluate(f, np.zeros(4, np.float32), o)  # a plain array has offset 0
    assert o[0] == 0
    with pytest.raises(LoomValueError, match="elem_offset 3 is not a multiple of offset_factor 4"):
        evaluate(f, base[3:7], o)


def test_constant_elem_offset_must_match():
    B = loom.decl_buffer((2,), "int32", name="B", elem_offset=2)
    f = prim(BufferStore(B, loom.const(7), [0]), B, name="fixed")
    base = np.zeros(4, np.int32)
    evaluate(f, base[2:])
    assert base.tolist() == [0, 0, 7, 0]
    with pytest.raises(LoomValueError, match="elem_offset must be 2, got a plain array"):
        evaluate(f, np.zeros(2, np.int32))


def test_raw_pointer_parameter_takes_a_contiguous_array():
    """A handle parameter without a buffer_map entry is an opaque pointer the body declares buffers on."""
    p = loom.var("p", "handle")
    view = loom.decl_buffer((4,), "int32", name="view", data=p)
    i = loom.var("i")
    f = prim(For(i, 0, 4, "serial", BufferStore(view, i * 3, [i])), p, name="raw")
    a = np.zeros((2, 2), np.int32)
    evaluate(f, a)
    assert a.ravel().tolist() == [0, 3, 6, 9]
    with pytest.raises(LoomValueError, match="pointer; it takes a C-contiguous array"):
        evaluate(f, np.zeros((2, 4), np.int32)[:, ::2])


def test_read_only_array_can_be_read_but_not_written():
    f = _copy_func((3,), (3,))
    a = np.ones(3, np.float32)
    a.flags.writeable = False
    b = np.zeros(3, np.float32)
    evaluate(f, a, b)
    assert b.tolist() == [2, 2, 2]
    b.flags.writeable = False
    with pytest.raises(LoomValueError, match="is read-only, but copy writes to it"):
        evaluate(f, np.ones(3, np.float32), b)
    assert b.tolist() == [2, 2, 2]


def test_stride_of_an_extent_one_axis_is_not_checked():
    """numpy gives size-1 axes arbitrary strides; a symbolic stride there still binds and never conflicts."""
    n, s0, s1 = loom.size_var("n"), loom.var("s0"), loom.var("s1")
    A = loom.decl_buffer((1, n), "int32", name="A", strides=[s0, s1])
    j = loom.var("j")
    f = prim(For(j, 0, n, "serial", BufferStore(A, j, [loom.const(0), j])), A, name="row")
    base = np.zeros((3, 8), np.int32)
    evaluate(f, base[1:2, ::2])
    assert base[1].tolist() == [0, 0, 1, 0, 2, 0, 3, 0] and not base[0].any() and not base[2].any()


def test_size_var_parameter_rejects_negative_values():
    n = loom.size_var("n")
    with pytest.raises(LoomValueError, match="n is a size"):
        evaluate(prim(loom.ir.Evaluate(n), n, name="sized"), -1)


def test_loom_nd_arrays_are_accepted():
    f = _copy_func((3,), (3,))
    a, b = loom.runtime.nd.array(np.arange(3, dtype=np.float32)), loom.runtime.nd.empty((3,), "float32")
    evaluate(f, a, b)
    assert b.numpy().tolist() == [0, 2, 4]


def test_misaligned_arrays_are_used_in_place():
    """The interpreter needs no alignment: a misaligned read-only output is still refused, not copied."""
    raw = np.zeros(3 * 4 + 64, np.uint8)
    start = (-raw.ctypes.data) % 64 + 4
    b = raw[start:start + 12].view(np.float32)
    assert b.ctypes.data % 64 == 4
    f = _copy_func((3,), (3,))
    evaluate(f, np.ones(3, np.float32), b)
    assert b.tolist() == [2, 2, 2]
    b.flags.writeable = False
    with pytest.raises(LoomValueError, match="is read-only, but copy writes to it"):
        evaluate(f, np.full(3, 5, np.float32), b)
    assert b.tolist() == [2, 2, 2]
