"""topi.generic: which schedule each target gets, and that every one computes the same values."""

from __future__ import annotations

import numpy as np
import pytest

import loom
import loom.testing.ext_dev as ext_dev
from loom import topi
from loom.topi.testing import conv2d_nchw_python

from topi_programs import rand, run


@pytest.fixture
def ext() -> object:
    name = loom.plugins.register(ext_dev)
    yield ext_dev.device_api()
    loom.plugins.unregister(name)


def _annotations(s, tensor):
    return {iv.var.name: attr.iter_type for iv, attr in s[tensor].iter_var_attrs.items()}


def test_cpu_schedule_runs_outer_axes_in_parallel_and_vectorizes_the_innermost():
    A = loom.placeholder((4, 6, 32), name="A")
    B = topi.nn.relu(A + 1.0)
    with loom.Target("llvm"):
        s = topi.generic.schedule_injective(B)
    assert s[B.op.input_tensors[0]].attach_type == "inline"  # A + 1 is not an output
    kinds = sorted(_annotations(s, B).values())
    assert kinds == ["parallelized", "vectorized"]
    lowered = str(loom.lower(s, [A, B]))
    assert "in parallel(24)" in lowered and "ramp(i2.outer * 8, 1, 8)" in lowered
    a = rand((4, 6, 32))
    (got,) = run(B, [A, B], [a], "llvm")
    np.testing.assert_allclose(got, np.maximum(a + 1, 0))


def test_cpu_schedule_of_a_1d_output_runs_vector_chunks_in_parallel():
    A = loom.placeholder((1000,), name="A")
    B = A * 2.0
    with loom.Target("c"):
        s = topi.generic.schedule_elemwise(B)
    lowered = str(loom.lower(s, [A, B]))
    assert "parallel(125)" in lowered and "ramp" in lowered
    a = rand((1000,))
    np.testing.assert_allclose(run(B, [A, B], [a], "c", topi.generic.schedule_elemwise)[0], a * 2)


def test_cpu_conv2d_schedule_puts_the_reduction_outside_the_vector():
    A = loom.placeholder((1, 3, 10, 16), name="A")
    W = loom.placeholder((4, 3, 3, 3), name="W")
    C = topi.nn.conv2d(A, W, 1, 1)
    with loom.Target("llvm"):
        s = topi.generic.schedule_conv2d_nchw(C)
    pad = C.op.input_tensors[0]
    assert s[pad].attach_type == "inline"
    names = [iv.var.name for iv in s[C].leaf_iter_vars]
    assert names == ["n.f.fused.y.fused", "x.outer", "rc", "ry", "rx", "x.inner"]
    assert sorted(_annotations(s, C).values()) == ["parallelized", "vectorized"]


@pytest.mark.parametrize("target", ["llvm", "c", "interp"])
def test_cpu_conv2d_schedule_tiles_channels_and_columns_in_registers(target):
    """16 output channels x 16 columns: 8 x 8 register blocks accumulated in a cache, the padding its own stage."""
    A = loom.placeholder((2, 5, 9, 16), name="A")
    W = loom.placeholder((16, 5, 3, 3), name="W")
    B = topi.nn.conv2d(A, W, (2, 1), 1)
    C = topi.nn.relu(B)
    with loom.Target(target):
        s = topi.generic.schedule_conv2d_nchw(C)
    pad = B.op.input_tensors[0]
    assert s[pad].attach_type == "root" and "parallelized" in _annotations(s, pad).values()
    assert [iv.var.name for iv in s[B].leaf_iter_vars] == ["n.y.fused", "f.outer", "x.outer", "f.inner", "x.inner"]
    cache = [st for st in s.stages if st.op.name == "conv2d_nchw.global"]
    assert len(cache) == 1 and cache[0].attach_type == "scope"  # at x.outer: n.c and y.c have extent 1 there
    assert [iv.var.name for iv in cache[0].leaf_iter_vars] == ["n.c", "rc", "y.c", "ry", "rx", "f.c", "x.c"]
    assert sorted(_annotations(s, cache[0].op.output(0)).values()) == ["unrolled", "vectorized"]
    a, w = rand((2, 5, 9, 16)), rand((16, 5, 3, 3), seed=5)
    got_b, got_c = run(C, [A, W, B, C], [a, w], target, topi.generic.schedule_conv2d_nchw)
    want = conv2d_nchw_python(a, w, (2, 1), 1)
    np.testing.assert_allclose(got_b, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_c, np.maximum(want, 0), rtol=1e-4, atol=1e-4)


def test_symbolic_shapes_and_a_scalar_parameter_on_the_cpu():
    """TVM's tensor-scalar test: ``A + k`` over shape variables, the vector tail guarded."""
    n0, n1 = loom.var("n0"), loom.var("n1")
    k = loom.var("k", "float32")
    A = loom.placeholder((n0, n1), name="A")
    B = A / k
    for target in ("llvm", "c", "interp"):
        with loom.Target(target):
            s = topi.generic.schedule_elemwise(B)
        f = loom.build(s, [A, B, k, n0, n1], target)
        for shape in ((3, 13), (1, 1), (2, 8)):
            a = rand(shape)
            b = np.zeros(shape, "float32")
            f(a, b, 2.0, *shape)
            np.testing.assert_allclose(b, a / 2, rtol=1e-6, err_msg=f"{target} {shape}")


def test_gpu_schedule_binds_every_stage_to_blocks_and_threads():
    A = loom.placeholder((1, 2, 6, 6), name="A")
    W = loom.placeholder((3, 2, 3, 3), name="W")
    B = topi.nn.conv2d(A, W, 1, 1)
    C = topi.nn.relu(B)
    with loom.Target("cuda"):
        s = topi.generic.schedule_conv2d_nchw(C)
    for t in (B, C):
        tags = sorted(attr.bind_thread.thread_tag for attr in s[t].iter_var_attrs.values() if attr.bind_thread)
        assert tags == ["blockIdx.x", "threadIdx.x"], t
    text = str(loom.lower(s, [A, W, C]))
    assert "'thread_extent', 256" in text  # at most 256 threads per block, though cuda allows 1024


def test_gpu_schedule_runs_on_the_test_device(ext):
    """ext_dev carries the ``gpu`` key: the same schedule runs there, with GPU semantics."""
    A = loom.placeholder((1, 2, 7, 7), name="A")
    W = loom.placeholder((3, 2, 3, 3), name="W")
    B = topi.nn.conv2d(A, W, 2, 1)
    C = B + 10.0
    P = topi.nn.pool(C, (2, 2), (1, 1), (0, 0, 1, 1), "avg", count_include_pad=False)
    with loom.Target("ext_dev"):
        s = topi.generic.schedule_pool(P)
    f = loom.build(s, [A, W, P], target="ext_dev", target_host="llvm")
    a, w = rand((1, 2, 7, 7)), rand((3, 2, 3, 3), seed=4)
    dev = loom.device("ext_dev")
    out = loom.nd.array(np.zeros((1, 3, 4, 4), "float32"), dev)
    f(loom.nd.array(a, dev), loom.nd.array(w, dev), out)
    conv = conv2d_nchw_python(a, w, 2, 1) + 10
    want = topi.testing.pool_nchw_python(conv, (2, 2), (1, 1), (0, 0, 1, 1), "avg", count_include_pad=False)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_without_a_target_the_output_axes_are_fused_and_nothing_else():
    A = loom.placeholder((3, 5), name="A")
    B = topi.nn.relu(A - 0.5)
    s = topi.generic.schedule_injective(B)
    assert [iv.var.name for iv in s[B].leaf_iter_vars] == ["i0.i1.fused"]
    assert not _annotations(s, B)
    a = rand((3, 5))
    b = np.zeros((3, 5), "float32")
    loom.build(s, [A, B], "interp")(a, b)
    np.testing.assert_allclose(b, np.maximum(a - 0.5, 0))


def test_a_target_key_of_ones_own_overrides_the_schedule():
    seen = []

    def mine(outs):
        seen.append(outs)
        return loom.create_schedule(outs.op)

    topi.generic.schedule_injective.register("my_accel", mine)
    try:
        A = loom.placeholder((4,), name="A")
        with loom.Target("llvm -keys=my_accel,cpu"):
            topi.generic.schedule_injective(A + 1.0)
        assert len(seen) == 1
        with loom.Target("llvm"):
            topi.generic.schedule_injective(A + 1.0)
        assert len(seen) == 1
    finally:
        del topi.generic.schedule_injective.overrides["my_accel"]


def test_several_outputs_and_bad_outputs():
    A = loom.placeholder((8,), name="A")
    B, C = A + 1.0, A * 3.0
    a = rand((8,))
    got_b, got_c = run([B, C], [A, B, C], [a], "llvm")
    np.testing.assert_allclose(got_b, a + 1)
    np.testing.assert_allclose(got_c, a * 3)
    with pytest.raises(loom.LoomTypeError, match="an output tensor or a list of them"):
        topi.generic.schedule_injective([])
    with pytest.raises(loom.LoomTypeError, match="an output tensor or a list of them"):
        topi.generic.schedule_injective("B")
