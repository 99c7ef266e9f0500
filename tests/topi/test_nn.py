"""topi.nn operators against numpy, built with topi's schedules on the interpreter (the oracle) and the CPU backends."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom import topi
from loom.topi.testing import conv2d_nchw_python, conv2d_nhwc_python, pool_nchw_python

from topi_programs import rand, run

TARGETS = ["interp", "llvm", "c"]


def _naive_conv2d_nchw(a, w, stride, pad, dilation):
    """The definition, one output element at a time (checks the numpy reference itself)."""
    (sh, sw), (dh, dw) = stride, dilation
    top, left, bottom, right = pad
    a = np.pad(a, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, h, wd = a.shape
    f, _, kh, kw = w.shape
    oh, ow = (h - (kh - 1) * dh - 1) // sh + 1, (wd - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, f, oh, ow), a.dtype)
    for b, o, y, x in np.ndindex(out.shape):
        for ci, ry, rx in np.ndindex(c, kh, kw):
            out[b, o, y, x] += a[b, ci, y * sh + ry * dh, x * sw + rx * dw] * w[o, ci, ry, rx]
    return out


@pytest.mark.parametrize("stride,padding,dilation,quad", [
    (1, 0, 1, (0, 0, 0, 0)),
    (2, 1, 1, (1, 1, 1, 1)),
    ((1, 2), (2, 1), 1, (2, 1, 2, 1)),
    (1, (0, 1, 2, 1), 2, (0, 1, 2, 1)),
    (1, "SAME", 1, (1, 1, 1, 1)),
])
def test_reference_conv2d_is_the_definition(stride, padding, dilation, quad):
    a, w = rand((1, 2, 7, 6)), rand((3, 2, 3, 3), seed=1)
    pair = lambda v: v if isinstance(v, tuple) else (v, v)  # noqa: E731
    want = _naive_conv2d_nchw(a, w, pair(stride), quad, pair(dilation))
    np.testing.assert_allclose(conv2d_nchw_python(a, w, stride, padding, dilation), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, 0, 1), ((2, 1), (1, 2), 1), (1, "SAME", 2),
                                                     (1, "VALID", 1)])
def test_conv2d_nchw(target, stride, padding, dilation):
    A = loom.placeholder((2, 3, 9, 8), name="A")
    W = loom.placeholder((4, 3, 3, 3), name="W")
    C = topi.nn.conv2d(A, W, stride, padding, dilation)
    a, w = rand((2, 3, 9, 8)), rand((4, 3, 3, 3), seed=1)
    (got,) = run(C, [A, W, C], [a, w], target, topi.generic.schedule_conv2d_nchw)
    np.testing.assert_allclose(got, conv2d_nchw_python(a, w, stride, padding, dilation), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_nhwc_with_relu(target):
    A = loom.placeholder((1, 8, 7, 3), name="A")
    W = loom.placeholder((3, 3, 3, 5), name="W")
    B = topi.nn.relu(topi.nn.conv2d(A, W, 1, 1, layout="NHWC"))
    a, w = rand((1, 8, 7, 3)), rand((3, 3, 3, 5), seed=2)
    (got,) = run(B, [A, W, B], [a, w], target, topi.generic.schedule_conv2d_nhwc)
    np.testing.assert_allclose(got, np.maximum(conv2d_nhwc_python(a, w, 1, 1), 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_out_dtype_and_scalar_consumer(target):
    """int8 data accumulated in int32; the convolution is an output next to its consumer ``C = B * 3``."""
    A = loom.placeholder((1, 2, 5, 5), name="A", dtype="int8")
    W = loom.placeholder((2, 2, 2, 2), name="W", dtype="int8")
    B = topi.nn.conv2d(A, W, 1, 0, out_dtype="int32")
    C = B * 3
    rng = np.random.default_rng(3)
    a, w = rng.integers(-100, 100, (1, 2, 5, 5)).astype("int8"), rng.integers(-100, 100, (2, 2, 2, 2)).astype("int8")
    got_b, got_c = run(C, [A, W, B, C], [a, w], target, topi.generic.schedule_conv2d_nchw)
    want = conv2d_nchw_python(a.astype("int32"), w.astype("int32"), 1, 0)
    np.testing.assert_array_equal(got_b, want)
    np.testing.assert_array_equal(got_c, want * 3)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,include_pad", [
    ((2, 2), (2, 2), (0, 0, 0, 0), False, True),
    ((3, 3), (2, 2), (1, 1, 1, 1), False, True),
    ((3, 3), (2, 2), (1, 1, 1, 1), False, False),
    ((3, 2), (2, 3), (0, 1, 1, 0), True, False),
])
def test_pool_nchw(target, pool_type, kernel, stride, padding, ceil_mode, include_pad):
    A = loom.placeholder((2, 3, 9, 10), name="A")
    P = topi.nn.pool(A, kernel, stride, padding, pool_type, ceil_mode=ceil_mode, count_include_pad=include_pad)
    a = rand((2, 3, 9, 10))
    (got,) = run(P, [A, P], [a], target, topi.generic.schedule_pool)
    want = pool_nchw_python(a, kernel, stride, padding, pool_type, ceil_mode, include_pad)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_pool_reference_keeps_a_window_of_padding_only_out():
    """Max pooling never returns the padding's fill, even where a window is mostly padding."""
    a = -np.ones((1, 1, 2, 2), "float32") * 5
    out = pool_nchw_python(a, (3, 3), (1, 1), (2, 2, 2, 2), "max")
    assert out.shape == (1, 1, 4, 4) and (out == -5).all()


@pytest.mark.parametrize("target", TARGETS)
def test_pool_in_nhwc_and_blocked_layouts(target):
    A = loom.placeholder((1, 6, 6, 4), name="A")
    P = topi.nn.pool(A, (2, 2), (2, 2), (0, 0, 0, 0), "max", layout="NHWC")
    a = rand((1, 6, 6, 4))
    (got,) = run(P, [A, P], [a], target, topi.generic.schedule_pool)
    want = pool_nchw_python(a.transpose(0, 3, 1, 2), (2, 2), (2, 2), (0, 0, 0, 0), "max").transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, want)
    B = loom.placeholder((1, 2, 5, 5, 4), name="B")  # NCHW4c
    Q = topi.nn.pool(B, (3, 3), (1, 1), (1, 1, 1, 1), "avg", layout="NCHW4c")
    b = rand((1, 2, 5, 5, 4))
    (got,) = run(Q, [B, Q], [b], target, topi.generic.schedule_pool)
    unblocked = b.transpose(0, 1, 4, 2, 3).reshape(1, 8, 5, 5)
    want = pool_nchw_python(unblocked, (3, 3), (1, 1), (1, 1, 1, 1), "avg").reshape(1, 2, 4, 5, 5).transpose(0, 1, 3, 4, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_pad_and_activations(target):
    A = loom.placeholder((3, 4), name="A")
    P = topi.nn.pad(A, (1, 0), (2, 3), pad_value=7.0)
    R = topi.nn.leaky_relu(A, 0.1)
    a = rand((3, 4))
    got_p, got_r = run([P, R], [A, P, R], [a], target)
    np.testing.assert_array_equal(got_p, np.pad(a, ((1, 2), (0, 3)), constant_values=7.0))
    np.testing.assert_allclose(got_r, np.where(a > 0, a, a * np.float32(0.1)), rtol=1e-6)


def test_pad_with_a_symbolic_shape():
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    P = topi.nn.pad(A, [2], [1])
    for target in TARGETS:
        with loom.Target(target):
            s = topi.generic.schedule_injective(P)
        a, p = np.arange(1, 6, dtype="float32"), np.full(8, -1, "float32")
        loom.build(s, [A, P], target)(a, p)
        np.testing.assert_array_equal(p, np.pad(a, (2, 1)), err_msg=target)


def test_no_padding_reads_the_input_directly():
    A = loom.placeholder((1, 1, 4, 4), name="A")
    W = loom.placeholder((1, 1, 3, 3), name="W")
    assert [t.op.name for t in topi.nn.conv2d(A, W, 1, 0).op.input_tensors] == ["A", "W"]
    assert [t.op.name for t in topi.nn.conv2d(A, W, 1, 1).op.input_tensors] == ["pad_temp", "W"]
    P = topi.nn.pool(A, (2, 2), (1, 1), (0, 0, 0, 0), "max")
    assert P.op.input_tensors == [A]


@pytest.mark.parametrize("call,message", [
    (lambda A, W: topi.nn.conv2d(A, W, 1, 1, layout="HWCN"), "layout must be 'NCHW' or 'NHWC'"),
    (lambda A, W: topi.nn.conv2d(A, loom.placeholder((2, 5, 3, 3)), 1, 1), "3 input channels but the kernel takes 5"),
    (lambda A, W: topi.nn.conv2d(A, W, 1, (1, 2, 3)), "padding must be an int, a pair or four ints"),
    (lambda A, W: topi.nn.conv2d(A, W, 1, "FULL"), "'SAME' or 'VALID'"),
    (lambda A, W: topi.nn.conv2d(A, W, (1, 1, 1), 1), "stride must be an int or a pair"),
    (lambda A, W: topi.nn.conv2d(A[0], W, 1, 1), "data must be a Tensor"),
    (lambda A, W: topi.nn.pool(A, (2, 2), (1, 1), (0, 0), "max"), "padding must be (top, left, bottom, right)"),
    (lambda A, W: topi.nn.pool(A, (2, 2), (1, 1), (0, 0, 0, 0), "min"), "pool_type must be 'max' or 'avg'"),
    (lambda A, W: topi.nn.pool(A, (2, 2), (1, 1), (0, 0, 0, 0), "max", layout="NCH2hW"), "H and W unsplit"),
    (lambda A, W: topi.nn.pool(loom.placeholder((1, 1, 4, 4), dtype="int32"), (2, 2), (1, 1), (0, 0, 0, 0), "avg"),
     "average pooling needs a float tensor"),
    (lambda A, W: topi.nn.pad(A, (0, 0, 1, 1), (0, 0)), "pad_after has 2 entries but the tensor has 4 dimensions"),
    (lambda A, W: topi.nn.pad(A, (0, 0, -1, 0)), "negative width -1"),
])
def test_bad_arguments_name_what_is_wrong(call, message):
    A = loom.placeholder((1, 3, 8, 8), name="A")
    W = loom.placeholder((2, 3, 3, 3), name="W")
    with pytest.raises(loom.LoomError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(A, W)
