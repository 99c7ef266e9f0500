"""loom.layout / loom.bijective_layout (TVM's tvm.layout and tvm.bijective_layout)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loom


def ints(xs):
    return tuple(int(x) for x in xs)


def test_layout_axes():
    lay = loom.layout("NCHW16c")
    assert isinstance(lay, loom.te.Layout) and len(lay) == 5 and str(lay) == "NCHW16c"
    assert (lay.factor_of("c"), lay.factor_of("C"), lay.factor_of("N")) == (16, 16, -1)
    assert [lay.index_of(a) for a in "NCHWcO"] == [0, 1, 2, 3, 4, -1]
    assert all(a in lay for a in "NCHWc") and "O" not in lay
    assert [lay[i] for i in range(5)] == list("NCHWc") and lay[-1] == "c"


@pytest.mark.parametrize("bad, why", [("NCHW16", "cannot read"), ("NCHWc", "positive factor"),
                                      ("NCHW0c", "positive factor"), ("NCH16W", "takes no factor"),
                                      ("NCHW16o", "no primal axis 'O'"), ("NCHWC", "twice"), ("NC-HW", "cannot read")])
def test_bad_layouts_say_what_is_wrong(bad, why):
    with pytest.raises(loom.LoomValueError, match=why):
        loom.layout(bad)


def test_convertible_only_with_the_same_primal_axes():
    assert loom.bijective_layout("NCHW", "ABCD") is None
    assert loom.bijective_layout("NCHW", "NCH8c") is None  # no W
    assert isinstance(loom.bijective_layout("NCHW", "NCHW16c"), loom.te.BijectiveLayout)


def test_shapes_and_indices():
    bl = loom.bijective_layout("NCHW", "NCHW16c")
    dst = bl.forward_shape((1, 32, 7, 7))
    assert ints(dst) == (1, 2, 7, 7, 16) and ints(bl.backward_shape(dst)) == (1, 32, 7, 7)
    assert ints(bl.forward_index([0, 18, 6, 6])) == (0, 1, 6, 6, 2)
    assert ints(bl.backward_index([0, 1, 6, 6, 2])) == (0, 18, 6, 6)
    with pytest.raises(loom.LoomValueError, match="not a multiple of 16"):
        bl.forward_shape((1, 30, 7, 7))
    with pytest.raises(loom.LoomValueError, match="4 axes, got 3"):
        bl.forward_index([0, 1, 2])
    c = loom.var("c")
    assert [str(x) for x in bl.forward_index([0, c, 1, 2])] == ["0", "c // 16", "1", "2", "c % 16"]


LAYOUTS = ["NCHW", "NHWC", "NCHW4c", "NCHW8c", "NCHW2c4h", "HWCN", "CHWN16n", "NC8hWH"]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(LAYOUTS), st.sampled_from(LAYOUTS), st.data())
def test_index_maps_are_inverse_bijections(src, dst, data):
    """Over a shape both layouts can hold, forward then backward is the identity, and forward stays in bounds."""
    bl = loom.bijective_layout(src, dst)
    full = {"N": 16, "C": 16, "H": 8, "W": 3}  # multiples of every factor used
    s = loom.layout(src)
    shape = [full[a] if a.isupper() else s.factor_of(a) for a in s]
    shape = [n // s.factor_of(a) if a.isupper() and s.factor_of(a) > 0 else n for a, n in zip(s, shape)]
    dshape = ints(bl.forward_shape(shape))
    assert np.prod(dshape) == np.prod(shape)
    index = [data.draw(st.integers(0, n - 1)) for n in shape]
    there = ints(bl.forward_index(index))
    assert all(0 <= i < n for i, n in zip(there, dshape))
    assert ints(bl.backward_index(there)) == tuple(index)


@pytest.mark.parametrize("target", ["interp", "llvm"])
def test_layout_transform_as_a_compute(target):
    bl = loom.bijective_layout("NCHW", "NCHW8c")
    A = loom.placeholder((2, 16, 3, 5), name="A")
    B = loom.compute(bl.forward_shape(A.shape), lambda *i: A[tuple(bl.backward_index(i))], name="B")
    C = loom.compute(A.shape, lambda *i: B[tuple(bl.forward_index(i))] * 2.0, name="C")
    f = loom.build(loom.create_schedule(C.op), [A, B, C], target=target)
    a = np.random.default_rng(0).random((2, 16, 3, 5), dtype="float32")
    b, c = np.zeros((2, 2, 3, 5, 8), "float32"), np.zeros_like(a)
    f(a, b, c)
    np.testing.assert_array_equal(b, a.reshape(2, 2, 8, 3, 5).transpose(0, 1, 3, 4, 2))
    np.testing.assert_array_equal(c, a * 2)
