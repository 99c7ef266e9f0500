"""Bounds checking and memory: no access ever wraps around or lands outside its allocation."""

import numpy as np
import pytest

import loom
from loom.ir import Allocate, BufferStore, For
from loom.ir import expr as E
from loom.testing import OutOfBoundsError, evaluate

from interp_helpers import ALL_DTYPES, np_dtype, prim, sample

T = E.IntImm("bool", 1)


def _load_at(index, shape=(8,)):
    A = loom.decl_buffer(shape, "int32", name="A")
    out = loom.decl_buffer((1,), "int32", name="out")
    return prim(BufferStore(out, E.BufferLoad(A, [loom.const(x) for x in index]), [0]), A, out, name="peek")


@pytest.mark.parametrize("index", [8, -1, 1000])
def test_out_of_bounds_load_raises_with_buffer_and_index(index):
    a, out = np.arange(8, dtype=np.int32), np.zeros(1, np.int32)
    with pytest.raises(OutOfBoundsError, match=rf"peek: out-of-bounds load of A\[{index}\]"):
        evaluate(_load_at([index]), a, out)


@pytest.mark.parametrize("index", [8, -1, -8])
def test_out_of_bounds_store_raises_and_leaves_the_array_untouched(index):
    A = loom.decl_buffer((8,), "float32", name="A")
    f = prim(BufferStore(A, loom.const(1.0), [loom.const(index)]), A, name="poke")
    a = np.arange(8, dtype=np.float32)
    before = a.copy()
    with pytest.raises(OutOfBoundsError, match=rf"store to A\[{index}\]"):
        evaluate(f, a)
    np.testing.assert_array_equal(a, before)


def test_per_dimension_check_and_the_flat_fallback():
    """[0, 5] of a 4x4 buffer is caught by the dimension check; without it only the flat offset is checked."""
    a = np.arange(16, dtype=np.int32).reshape(4, 4)
    out = np.zeros(1, np.int32)
    with pytest.raises(OutOfBoundsError, match=r"index 5 of dimension 1 is outside \[0, 4\)"):
        evaluate(_load_at([0, 5], (4, 4)), a, out)
    evaluate(_load_at([0, 5], (4, 4)), a, out, check_dims=False)
    assert out[0] == 5  # flat offset 5 is inside the allocation
    with pytest.raises(OutOfBoundsError, match="flat element offset 16 is outside the 16 elements"):
        evaluate(_load_at([4, 0], (4, 4)), a, out, check_dims=False)


def test_vector_store_partly_out_of_bounds_writes_nothing():
    A = loom.decl_buffer((8,), "int16", name="A")
    f = prim(A.vstore([loom.const(6)], E.Broadcast(loom.const(9, "int16"), 4)), A, name="vpoke")
    a = np.zeros(8, np.int16)
    with pytest.raises(OutOfBoundsError, match=r"store to A\[\[6, 7, 8, 9\]\]"):
        evaluate(f, a)
    assert not a.any()


def test_vector_gather_out_of_bounds_raises():
    A = loom.decl_buffer((8,), "int32", name="A")
    C = loom.decl_buffer((4,), "int32", name="C")
    body = BufferStore(C, E.BufferLoad(A, [E.Ramp(loom.const(-3), loom.const(3), 4)]), [E.Ramp(loom.const(0), loom.const(1), 4)])
    with pytest.raises(OutOfBoundsError, match="load of A"):
        evaluate(prim(body, A, C), np.zeros(8, np.int32), np.zeros(4, np.int32))


def test_allocated_buffer_is_bounds_checked():
    ptr = loom.var("tmp", "handle")
    tmp = loom.decl_buffer((4,), "float32", name="tmp", data=ptr)
    i = loom.var("i")
    body = Allocate(ptr, "float32", [4], T, For(i, 0, 5, "serial", BufferStore(tmp, loom.const(0.0), [i])))
    with pytest.raises(OutOfBoundsError, match=r"store to tmp\[4\]"):
        evaluate(prim(body))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_round_trips_through_memory(dtype):
    """Load and store keep every value of every dtype bit-exactly (scalar and vector paths)."""
    A, B, C = (loom.decl_buffer((8,), dtype, name=x) for x in "ABC")
    i = loom.var("i")
    body = loom.ir.seq(For(i, 0, 8, "serial", BufferStore(B, A[i], [i])), C.vstore([0], A.vload([0], f"{dtype}x8")))
    a = sample(dtype, 8, np.random.default_rng(9))
    b, c = np.zeros(8, np_dtype(dtype)), np.zeros(8, np_dtype(dtype))
    evaluate(prim(body, A, B, C), a, b, c)
    assert a.tobytes() == b.tobytes() == c.tobytes()


def test_allocation_reused_through_another_dtype():
    """A buffer of another dtype over an allocation reads the same bytes (storage reuse)."""
    ptr = loom.var("tmp", "handle")
    as_float = loom.decl_buffer((2,), "float32", name="f", data=ptr)
    as_int = loom.decl_buffer((2,), "int32", name="i", data=ptr)
    out = loom.decl_buffer((2,), "int32", name="out")
    body = Allocate(ptr, "int32", [2], T, loom.ir.seq(
        BufferStore(as_float, loom.const(1.5), [1]), BufferStore(out, as_int[1], [0])))
    o = np.zeros(2, np.int32)
    evaluate(prim(body, out), o)
    assert o[0] == np.array(1.5, np.float32).view(np.int32)


def test_shapeless_buffer_indexes_like_a_pointer():
    """A buffer declared with no shape is read with one flat index, checked against the memory."""
    p = loom.var("p", "handle")
    A = loom.decl_buffer((8,), "int32", name="A", data=p)
    ptr = loom.decl_buffer((), "int32", name="ptr", data=p)
    out = loom.decl_buffer((1,), "int32", name="out")
    f = prim(BufferStore(out, E.BufferLoad(ptr, [loom.const(6)]), [0]), A, out)
    a, o = np.arange(8, dtype=np.int32) * 2, np.zeros(1, np.int32)
    evaluate(f, a, o)
    assert o[0] == 12
    bad = prim(BufferStore(out, E.BufferLoad(ptr, [loom.const(8)]), [0]), A, out)
    with pytest.raises(OutOfBoundsError):
        evaluate(bad, a, o)


def test_wrong_index_count_is_rejected():
    A = loom.decl_buffer((2, 2), "int32", name="A")
    out = loom.decl_buffer((1,), "int32", name="out")
    f = prim(BufferStore(out, E.BufferLoad(A, [loom.const(0)]), [0]), A, out)
    with pytest.raises(loom.LoomValueError, match="1 indices, but the buffer has 2 dimensions"):
        loom.testing.Interpreter(f)


def test_buffer_without_bound_data_is_rejected():
    A = loom.decl_buffer((2,), "int32", name="A")
    with pytest.raises(loom.LoomValueError, match="data pointer A is not bound"):
        loom.testing.Interpreter(prim(BufferStore(A, loom.const(0), [0])))
