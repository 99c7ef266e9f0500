"""topi's operators with the schedules topi picks for the kind, against numpy references, on every kind.

The kind's target is in scope while scheduling, so a CPU kind gets the parallel,
vectorized schedule and a kind with the ``gpu`` key the thread-bound one: the
same operator graph reaches each backend through its own kind of loops.
"""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom import topi

from .harness import KindUnderTest
from .programs import rand


def _schedule(kind: KindUnderTest, schedule, outs):
    target = loom.Target(kind.name)
    if kind.on_device and "gpu" not in target.keys:
        pytest.skip(f"{kind.name} has no 'gpu' key: topi has no schedule that binds its loops")
    with target:
        return schedule(outs)


def test_conv2d_relu_and_max_pool(kind_under_test: KindUnderTest) -> None:
    kind = kind_under_test
    A = loom.placeholder((2, 3, 9, 16), name="A")  # 8 channels x 16 columns: the CPU's register-tiled schedule
    W = loom.placeholder((8, 3, 3, 3), name="W")
    R = topi.nn.relu(topi.nn.conv2d(A, W, strides=1, padding=1))
    P = topi.nn.pool(R, (3, 3), (2, 2), (1, 1, 1, 1), "max")
    s = _schedule(kind, topi.generic.schedule_pool, P)
    f = kind.build(s, [A, W, P])
    a, w = rand((2, 3, 9, 16)), rand((8, 3, 3, 3), seed=1)
    got = kind.run(f, a, w, np.zeros((2, 8, 5, 8), "float32"))[-1]
    conv = np.maximum(topi.testing.conv2d_nchw_python(a, w, 1, 1), 0)
    want = topi.testing.pool_nchw_python(conv, (3, 3), (2, 2), (1, 1, 1, 1), "max")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_strided_dilated_nhwc_conv2d_with_a_bias(kind_under_test: KindUnderTest) -> None:
    """A strided, dilated NHWC convolution plus a bias broadcast along the channels."""
    kind = kind_under_test
    A = loom.placeholder((1, 11, 10, 3), name="A")
    W = loom.placeholder((3, 3, 3, 5), name="W")
    bias = loom.placeholder((5,), name="bias")
    C = topi.nn.conv2d(A, W, strides=2, padding="SAME", dilation=2, layout="NHWC") + bias
    s = _schedule(kind, topi.generic.schedule_conv2d_nhwc, C)
    f = kind.build(s, [A, W, bias, C])
    a, w, b = rand((1, 11, 10, 3)), rand((3, 3, 3, 5), seed=1), rand((5,), seed=2)
    out_shape = topi.util.get_const_tuple(C.shape)
    got = kind.run(f, a, w, b, np.zeros(out_shape, "float32"))[-1]
    want = topi.testing.conv2d_nhwc_python(a, w, 2, "SAME", 2) + b
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_padded_average_pool_not_counting_the_border(kind_under_test: KindUnderTest) -> None:
    kind = kind_under_test
    A = loom.placeholder((1, 2, 7, 6), name="A")
    P = topi.nn.pool(A, (3, 3), (2, 2), (1, 1, 1, 1), "avg", ceil_mode=True, count_include_pad=False)
    s = _schedule(kind, topi.generic.schedule_pool, P)
    f = kind.build(s, [A, P])
    a = rand((1, 2, 7, 6))
    got = kind.run(f, a, np.zeros(topi.util.get_const_tuple(P.shape), "float32"))[-1]
    want = topi.testing.pool_nchw_python(a, (3, 3), (2, 2), (1, 1, 1, 1), "avg", True, False)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
