"""Constant containers in hybrid scripts: captured tuples and lists, nested lists, lists of tensors.

TVM v0.6's ``test_capture`` and ``test_array_inputs`` ported, plus nested lists indexed by
``const_range`` variables (``b[i, j]`` and ``b[i][j]``) and the errors around them.
"""
# ruff: noqa: F821, F841 - hybrid keywords (output_tensor, range kinds, math) are injected, not imported

import numpy as np
import pytest

import loom
from loom.hybrid import HybridSyntaxError, script

from hybrid_classic import round_trip

N = 8
CONSTANT_TUPLE = (10, N)
CONSTANT_LIST = [[1, 2], [3, N]]
CONST_VALUE = 1
WEIGHTS = (np.float32(0.5), 2.0, [0.25, np.int64(3)])  # numpy scalars and a nested list
BAD_LIST = [1, np.zeros(2)]


@script
def add_something(a):
    c = output_tensor((CONSTANT_TUPLE[1],), "int32")
    for i in range(CONSTANT_TUPLE[1]):
        c[i] = a[i] + CONSTANT_LIST[1][CONST_VALUE]
    return c


def test_capture(target):
    a = loom.placeholder((N,), "int32", name="a")
    first, _ = round_trip(add_something, [a], target)
    assert "c[i] = a[i] + 8" in first.module.get_source()


def test_capture_in_a_closure(target):
    offsets = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    scale = (2.0, 3.0)

    @script
    def rows(a):
        b = output_tensor(a.shape, a.dtype)
        for i in const_range(2):
            for j in const_range(3):
                b[i, j] = a[i, j] * scale[i] + offsets[i][j]
        return b

    first, _ = round_trip(rows, [loom.placeholder((2, 3), name="a")], target)
    x = np.ones((2, 3), "float32")
    np.testing.assert_allclose(rows(x), x * np.array([[2.0], [3.0]]) + np.array(offsets))


def test_captured_numpy_scalars_and_nested_lists(target):
    @script
    def weighted(a):
        b = output_tensor(a.shape, a.dtype)
        for i in range(a.shape[0]):
            b[i] = a[i] * WEIGHTS[0] + WEIGHTS[1] + WEIGHTS[2][0] * WEIGHTS[2][1]
        return b

    first, _ = round_trip(weighted, [loom.placeholder((6,), name="a")], target)
    assert "a[i] * 0.5 + 2.0 + 0.75" in first.module.get_source()  # folded while parsing


def test_array_inputs(target):
    @script
    def sum_array(inputs):
        out = output_tensor((10,), inputs[0].dtype)
        n = len(inputs)
        for i in range(10):
            out[i] = 0.0
            for j in const_range(n):
                out[i] += inputs[j][i]
        return out

    inputs = [loom.placeholder((10,), "float32", name=f"t{k}") for k in range(5)]
    out = sum_array(loom.convert(inputs))
    assert len(out.op.inputs) == 5
    sch = loom.create_schedule(out.op)
    f = loom.build(sch, inputs + [out], target=target)
    arrays = [np.random.uniform(size=10).astype("float32") for _ in inputs]
    got = np.zeros(10, "float32")
    f(*arrays, got)
    np.testing.assert_allclose(got, sum(arrays), rtol=1e-5)
    np.testing.assert_allclose(sum_array(arrays), sum(arrays), rtol=1e-5)  # emulation: a list of arrays
    mod = loom.hybrid.build(sch, inputs, [out])
    assert mod.get_source().startswith("def hybrid_func(t0, t1, t2, t3, t4):")
    round_trip(mod, inputs, target)


def test_nested_list_declared_in_the_script(target):
    @script
    def stencil(a):
        b = output_tensor((a.shape[0] - 2,), a.dtype)
        taps = [[1.0, 2.0, 1.0], [0.5, 0.0, -0.5]]
        for i in range(a.shape[0] - 2):
            b[i] = 0.0
            for k in const_range(2):
                for j in const_range(3):
                    b[i] += a[i + j] * taps[k][j]  # emulated, a Python list: no taps[k, j]
        return b

    first, _ = round_trip(stencil, [loom.placeholder((12,), name="a")], target)
    assert "b[i] = b[i] + a[i + 2] * -0.5" in first.module.get_source()


def test_a_container_argument_indexed_by_tuples_and_chains(target):
    @script
    def pick(a, table):
        b = output_tensor((2, 2), a.dtype)
        for i in const_range(2):
            for j in const_range(2):
                b[i, j] = a[table[i, j]] + a[table[i][j]]
        return b

    round_trip(pick, [loom.placeholder((5,), "int32", name="a"), [[4, 0], [2, 3]]], target)


@script
def too_many_indices(a, table):
    b = output_tensor((2,), a.dtype)
    for i in const_range(2):
        b[i] = a[i] + table[i, 0, 1]
    return b


@script
def tensor_in_a_tuple_index(a, ts):
    b = output_tensor((2,), a.dtype)
    for i in const_range(2):
        b[i] = ts[i, 0]
    return b


@script
def reads_bad_list(a):
    b = output_tensor(a.shape, a.dtype)
    b[0] = BAD_LIST[0]
    return b


@script
def index_out_of_range(a, table):
    b = output_tensor((2,), a.dtype)
    for i in const_range(2):
        b[i] = a[i] + table[i][2]
    return b


def test_container_errors_point_at_the_index():
    a = loom.placeholder((2,), "int32", name="a")
    table = loom.convert([[1, 2], [3, 4]])
    with pytest.raises(HybridSyntaxError, match=r"table\[i\]\[0\] is the constant 1, not a container"):
        too_many_indices(a, table)
    with pytest.raises(HybridSyntaxError, match=r"ts\[i\] is the tensor p0, not a container.*index it apart"):
        tensor_in_a_tuple_index(a, loom.convert([loom.placeholder((2,), "int32", name=f"p{k}") for k in range(2)]))
    with pytest.raises(HybridSyntaxError, match=r"index 2 is out of range for table\[i\], which has 2 element"):
        index_out_of_range(a, table)
    with pytest.raises(HybridSyntaxError, match="BAD_LIST is a list from the enclosing Python scope; hybrid "
                                                "script can use numbers, strings, loom expressions, tuples"):
        reads_bad_list(a)
