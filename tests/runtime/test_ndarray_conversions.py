"""``loom.nd.array`` and ``copyfrom`` of what has no Loom dtype: a clear LoomTypeError/LoomValueError, never numpy's."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.runtime import nd

NO_LOOM_DTYPE = {
    "object": (np.array([1, None], dtype=object), "object"),
    "mixed-list": ([1, "a"], "<U21"),
    "strings": (["a", "b"], "<U1"),
    "bytes": (np.array([b"ab"]), "|S2"),
    "structured": (np.zeros(2, "i4,f4"), r"\[\('f0', '<i4'\), \('f1', '<f4'\)\]"),
}


@pytest.mark.parametrize("case", NO_LOOM_DTYPE, ids=list(NO_LOOM_DTYPE))
def test_a_source_without_a_loom_dtype_names_it(case):
    source, dtype = NO_LOOM_DTYPE[case]
    with pytest.raises(loom.LoomTypeError, match=f"loom.nd.array: the source holds numpy dtype {dtype}, which has "
                                                 "no Loom dtype; pass dtype="):
        nd.array(source)


@pytest.mark.parametrize("source, dtype, pattern", [
    (np.array([1, None], dtype=object), "int32", "numpy dtype object to int32"),
    (np.array([{"a": 1}], dtype=object), "float32", "numpy dtype object to float32"),
    (["a", "b"], "float32", "numpy dtype <U1 to float32"),
    (np.zeros(2, "i4,f4"), "float32", r"numpy dtype \[\('f0', '<i4'\), \('f1', '<f4'\)\] to float32"),
])
def test_elements_that_do_not_convert_name_both_dtypes(source, dtype, pattern):
    with pytest.raises(loom.LoomTypeError, match=f"loom.nd.array: cannot convert elements of {pattern}"):
        nd.array(source, dtype=dtype)


def test_objects_that_convert_do():
    assert nd.array(np.array([1.5, 2], dtype=object), dtype="float32").numpy().tolist() == [1.5, 2.0]


def test_ragged_lists_are_a_value_error():
    with pytest.raises(loom.LoomValueError, match="loom.nd.array: cannot make an array of the list: .*inhomogeneous"):
        nd.array([[1, 2], [3]])


def test_copyfrom_wraps_conversion_errors_too():
    a = nd.empty((2,), "int32")
    with pytest.raises(loom.LoomTypeError, match="copyfrom: cannot convert elements of numpy dtype object to int32"):
        a.copyfrom(np.array([1, None], dtype=object))
    with pytest.raises(loom.LoomValueError, match="copyfrom: cannot make an array"):
        a.copyfrom([[1], [2, 3]])
    assert a.copyfrom([7.9, -1]).numpy().tolist() == [7, -1]  # numpy's conversion, as before
