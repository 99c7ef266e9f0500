"""A hybrid script may write its inputs (as TVM's could): the write goes to the caller's array.

Emulated, the numpy array passed in is modified; compiled, the array given to the built
function is; dumped by ``loom.hybrid.build``, the write stays a write to the parameter.
"""
# ruff: noqa: F821, F841 - hybrid keywords (output_tensor, range kinds, math) are injected, not imported

import numpy as np

import loom
from loom.hybrid import script

from hybrid_classic import round_trip


@script
def clamp_and_sum(a):
    """Clamps ``a`` in place to [0, 1] and returns its running sum."""
    b = output_tensor(a.shape, a.dtype)
    s = 0.0
    for i in range(a.shape[0]):
        if a[i] < 0.0:
            a[i] = 0.0
        elif a[i] > 1.0:
            a[i] = 1.0
        s += a[i]
        b[i] = s
    return b


def _data():
    return np.array([-1.0, 0.25, 2.0, 0.5, -0.5, 0.75], "float32")


def _want(x):
    clamped = np.clip(x, 0.0, 1.0)
    return clamped, np.cumsum(clamped)


def test_emulation_writes_the_numpy_array():
    x = _data()
    clamped, sums = _want(x)
    np.testing.assert_allclose(clamp_and_sum(x), sums, rtol=1e-6)
    np.testing.assert_array_equal(x, clamped)


def test_the_built_function_writes_its_argument(target):
    A = loom.placeholder((6,), name="a")
    B = clamp_and_sum(A)
    assert B.op.inputs == (A,)  # a written input stays an input
    f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    x, out = _data(), np.zeros(6, "float32")
    clamped, sums = _want(x)
    f(x, out)
    np.testing.assert_allclose(out, sums, rtol=1e-6)
    np.testing.assert_array_equal(x, clamped)


def test_the_dumped_module_writes_its_parameter(target):
    A = loom.placeholder((6,), name="a")
    first, _ = round_trip(clamp_and_sum, [A], target)  # compares the written inputs too
    assert "a[i] = 0.0" in first.module.get_source()
    x = _data()
    first.module(x)
    np.testing.assert_array_equal(x, _want(_data())[0])


def test_a_write_to_an_intermediate_is_seen_by_later_stages(target):
    """The written input is another stage's output: the stages after the hybrid one read the new values."""
    @script
    def zero_first(b):
        c = output_tensor((1,), b.dtype)
        c[0] = b[0]
        b[0] = 0.0
        return c

    A = loom.placeholder((4,), name="A")
    B = loom.compute((4,), lambda i: A[i] * 2.0, name="B")
    C = zero_first(B)
    D = loom.compute((4,), lambda i: B[i] + C[0], name="D")
    f = loom.build(loom.create_schedule(D.op), [A, D], target=target)
    x, out = np.arange(1, 5, dtype="float32"), np.zeros(4, "float32")
    f(x, out)
    np.testing.assert_allclose(out, [2.0, 6.0, 8.0, 10.0])
