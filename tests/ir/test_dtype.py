"""DataType: parsing, printing, lanes, numpy conversion and errors."""

import itertools

import ml_dtypes
import numpy as np
import pytest

from loom.errors import LoomTypeError
from loom.ir.dtype import DataType

SCALARS = [
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16", "bool", "handle",
]


@pytest.mark.parametrize("text", [s if lanes == 1 else f"{s}x{lanes}"
                                  for s, lanes in itertools.product(SCALARS, (1, 4, 16))])
def test_parse_print_round_trip(text):
    t = DataType.of(text)
    assert str(t) == text
    assert DataType.of(str(t)) == t
    assert t == text


@pytest.mark.parametrize("text, code, bits, lanes", [
    ("float32x8", "float", 32, 8),
    ("int8x16", "int", 8, 16),
    ("uint64", "uint", 64, 1),
    ("bfloat16x4", "bfloat", 16, 4),
    ("boolx4", "bool", 1, 4),
    ("handle", "handle", 64, 1),
])
def test_fields(text, code, bits, lanes):
    t = DataType.of(text)
    assert (t.code, t.bits, t.lanes) == (code, bits, lanes)


@pytest.mark.parametrize("short, full", [("int", "int32"), ("uint", "uint32"), ("float", "float32"),
                                         ("bfloat", "bfloat16"), ("float32x1", "float32")])
def test_default_bits_and_single_lane_are_canonicalised(short, full):
    assert str(DataType.of(short)) == full


def test_lanes_helpers():
    t = DataType.of("float16x8")
    assert t.element_of() == "float16"
    assert t.with_lanes(2) == "float16x2"
    assert t.with_bits(32) == "float32x8"
    assert t.bytes == 16 and DataType.of("bool").bytes == 1
    assert t.is_vector and not t.is_scalar


@pytest.mark.parametrize("text, predicates", [
    ("int8", {"is_int", "is_integer"}),
    ("uint32", {"is_uint", "is_integer"}),
    ("float64", {"is_float"}),
    ("bfloat16", {"is_float"}),
    ("bool", {"is_bool"}),
    ("handle", {"is_handle"}),
])
def test_predicates(text, predicates):
    t = DataType.of(text)
    every = {"is_int", "is_uint", "is_integer", "is_float", "is_bool", "is_handle"}
    assert {p for p in every if getattr(t, p)} == predicates


@pytest.mark.parametrize("text, np_dtype", [
    ("int8", np.int8), ("int64", np.int64), ("uint16", np.uint16), ("float16", np.float16),
    ("float32", np.float32), ("float64", np.float64), ("bool", np.bool_), ("float32x4", np.float32),
    ("bfloat16", ml_dtypes.bfloat16),
])
def test_to_numpy(text, np_dtype):
    assert DataType.of(text).numpy() == np.dtype(np_dtype)


@pytest.mark.parametrize("np_dtype, text", [
    (np.int32, "int32"), (np.dtype("uint8"), "uint8"), (np.float16, "float16"), (np.bool_, "bool"),
    (ml_dtypes.bfloat16, "bfloat16"), (np.dtype(ml_dtypes.bfloat16), "bfloat16"),
])
def test_from_numpy(np_dtype, text):
    assert str(DataType.of(np_dtype)) == text


def test_bfloat16_values_survive_numpy_conversion():
    arr = np.array([1.0, 0.5, -2.0], dtype=DataType.of("bfloat16").numpy())
    assert arr.dtype.name == "bfloat16"
    assert arr.astype(np.float32).tolist() == [1.0, 0.5, -2.0]


@pytest.mark.parametrize("bad", [
    "float8", "int7", "bool8", "handle32", "bfloat32", "x4", "float32x0", "", "int32x", "Float32",
    "complex64", "int32x65537", "float32x-1",
])
def test_invalid_strings_raise(bad):
    with pytest.raises(LoomTypeError, match="dtype"):
        DataType.of(bad)


@pytest.mark.parametrize("bad", [None, 3.5, object, np.complex64, np.dtype("M8[s]"), np.dtype("U4")])
def test_invalid_values_raise(bad):
    with pytest.raises(LoomTypeError):
        DataType.of(bad)


def test_equality_with_strings_and_hashing():
    assert DataType.of("int32") == "int32"
    assert DataType.of("int32") != "int64"
    assert DataType.of("int32") != "not a dtype"
    assert len({DataType.of("int32"), DataType("int", 32, 1), DataType.of("int")}) == 1


# -- dtypes are strings (as TVM's were): item 4 of the classic-API issue ------------------------------


def test_a_dtype_is_its_text() -> None:
    import pickle

    import loom

    A = loom.placeholder((4, 5), "float32", name="A")
    assert isinstance(A.dtype, str) and A.dtype == "float32" and "float32" == A.dtype
    assert f"{A.dtype}" == "float32" and str(A.dtype) == "float32" and type(str(A.dtype)) is str
    assert np.zeros(3, A.dtype).dtype == np.float32 and np.dtype(DataType.of("int8")) == np.int8
    assert {"float32": 1}[A.dtype] == 1 and hash(A.dtype) == hash("float32")
    assert DataType("float32x4") == DataType("float", 32, 4) == "float32x4"
    assert DataType.of("float") == "float32" and DataType.of("float32") != "int32"
    assert pickle.loads(pickle.dumps(DataType.of("int8x16"))).lanes == 16
    with pytest.raises(AttributeError):
        DataType.of("int32").bits = 8  # type: ignore[misc]


def test_dtypes_round_trip_through_json_as_dtypes() -> None:
    import loom

    x = loom.var("x", "int64")
    back = loom.load_json(loom.save_json(x))
    assert type(back.dtype) is DataType and back.dtype == "int64"
