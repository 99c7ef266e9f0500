"""decl_buffer as seed 000 describes it, and Buffer's indexing helpers."""

import pytest

import loom
from loom.errors import IRError, LoomValueError
from loom.ir import expr as E
from loom.ir.buffer import DEFAULT_DATA_ALIGNMENT
from loom.ir.stmt import BufferStore


def test_defaults():
    B = loom.decl_buffer((4, 8))
    assert B.name == "buffer" and B.dtype == "float32" and B.scope == ""
    assert B.data.dtype == "handle" and B.data.name == "buffer"


def test_compact_by_default():
    B = loom.decl_buffer((4, 8), "float32", name="B")
    assert B.strides == () and B.is_compact
    assert [int(s) for s in B.effective_strides()] == [8, 1]


def test_symbolic_strides_are_kept():
    s0 = loom.var("s0")
    B = loom.decl_buffer((4, 8), "float32", name="B", strides=[s0, 1])
    assert not B.is_compact
    assert B.strides[0] is s0 and isinstance(B.strides[1], E.IntImm) and B.strides[1].value == 1
    assert B.effective_strides() == B.strides


def test_offset_factor_creates_an_elem_offset_var():
    B = loom.decl_buffer((16,), "float32", name="B", offset_factor=4)
    assert type(B.elem_offset) is E.Var and B.elem_offset.name == "B_elem_offset"
    assert B.elem_offset.dtype == "int32" and B.offset_factor == 4


def test_offset_factor_zero_means_factor_one_and_offset_zero():
    B = loom.decl_buffer((16,), "float32", name="B", offset_factor=0)
    assert B.offset_factor == 1
    assert isinstance(B.elem_offset, E.IntImm) and B.elem_offset.value == 0


def test_explicit_elem_offset_wins_over_the_factor():
    off = loom.var("off")
    B = loom.decl_buffer((16,), name="B", elem_offset=off, offset_factor=8)
    assert B.elem_offset is off and B.offset_factor == 8
    assert loom.decl_buffer((16,), elem_offset=3).elem_offset.value == 3


@pytest.mark.parametrize("given, stored", [(-1, DEFAULT_DATA_ALIGNMENT), (16, 16), (128, 128)])
def test_data_alignment(given, stored):
    assert DEFAULT_DATA_ALIGNMENT == 64
    assert loom.decl_buffer((4,), data_alignment=given).data_alignment == stored


def test_explicit_data_var_is_used():
    ptr = loom.var("ptr", "handle")
    B = loom.decl_buffer((4,), "int8", name="B", data=ptr)
    assert B.data is ptr


def test_scope_is_kept():
    assert loom.decl_buffer((4,), scope="shared").scope == "shared"


def test_int_shapes_are_converted():
    B = loom.decl_buffer((4, 8))
    assert all(isinstance(s, E.IntImm) and s.dtype == "int32" for s in B.shape)
    assert [s.value for s in B.shape] == [4, 8]
    assert loom.decl_buffer(5).shape[0].value == 5, "a scalar shape is one dimension"


def test_int64_shape_gives_int64_index_dtype():
    n = loom.var("n", "int64")
    B = loom.decl_buffer((n, 4), name="B", strides=[4, 1], offset_factor=2)
    assert B.shape[1].dtype == "int64", "Python ints follow the shape's index dtype"
    assert [s.dtype for s in B.strides] == ["int64", "int64"]
    assert B.elem_offset.dtype == "int64"
    assert loom.decl_buffer((n,)).elem_offset.dtype == "int64"
    assert loom.decl_buffer((loom.const(8, "int64"),), offset_factor=1).elem_offset.dtype == "int64"


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(shape=(4,), offset_factor=-1), LoomValueError, "offset_factor must be >= 0"),
    (dict(shape=(4.0,)), LoomValueError, "shape entries must be scalar integers"),
    (dict(shape=(4,), data_alignment=3), IRError, "power of two"),
    (dict(shape=(4, 4), strides=[1]), IRError, "1 strides for 2 dimensions"),
    (dict(shape=(4,), data=loom.var("p", "int64")), IRError, "data must be a handle Var"),
])
def test_invalid_declarations(kwargs, error, message):
    with pytest.raises(error, match=message):
        loom.decl_buffer(**kwargs)


def test_offset_of_compact_buffer():
    B = loom.decl_buffer((4, 8), name="B")
    i, j = loom.var("i"), loom.var("j")
    assert str(B.offset_of([i, j])) == "i * 8 + j"
    assert B.offset_of([2, 3]).value == 19


def test_offset_of_includes_strides_and_elem_offset():
    s0 = loom.var("s0")
    B = loom.decl_buffer((4, 8), name="B", strides=[s0, 1], offset_factor=4)
    i, j = loom.var("i"), loom.var("j")
    assert str(B.offset_of([i, j])) == "B_elem_offset + i * s0 + j"


def test_offset_of_checks_the_index_count():
    with pytest.raises(IRError, match="has 2 dimensions, indexed with 1"):
        loom.decl_buffer((4, 8), name="B").offset_of([0])


def test_getitem_builds_a_load():
    B = loom.decl_buffer((4, 8), "float16", name="B")
    i = loom.var("i")
    load = B[i, 2]
    assert type(load) is E.BufferLoad and load.buffer is B and load.indices[0] is i
    assert load.indices[1].value == 2 and load.dtype == "float16"
    assert B[1, 1].indices[0].dtype == "int32"


def test_vload_makes_a_ramp_over_the_last_axis():
    B = loom.decl_buffer((4, 8), "float32", name="B")
    i = loom.var("i")
    load = B.vload([i, 4], "float32x4")
    assert load.dtype == "float32x4" and load.indices[0] is i
    ramp = load.indices[1]
    assert type(ramp) is E.Ramp and ramp.base.value == 4 and ramp.stride.value == 1 and ramp.lanes == 4
    assert type(B.vload([i, 0]).indices[1]) is E.IntImm, "a scalar dtype loads one element"


def test_vstore_makes_a_ramp_from_the_value_lanes():
    B = loom.decl_buffer((16,), "float32", name="B")
    store = B.vstore([8], E.Broadcast(loom.const(1.0), 8))
    assert type(store) is BufferStore and store.buffer is B
    ramp = store.indices[0]
    assert type(ramp) is E.Ramp and ramp.lanes == 8 and ramp.base.value == 8
    assert type(B.vstore([3], 2.0).indices[0]) is E.IntImm
