"""Every kernel gives the same results emulated on numpy and compiled for each installed target."""

import numpy as np
import pytest

import loom
from loom.ir import expr as E
from loom.ir.functor import collect
from loom.te.tensor import Tensor

import hybrid_kernels as K
from loom.testing.conformance.harness import buildable_cpu_kinds as buildable_kinds


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _shape_vars(tensors):
    return {id(v) for t in tensors for s in t.shape for v in collect(s, lambda n: isinstance(n, E.Var))}


def run_case(kernel, np_args, loom_args, target, schedule=None):
    """Emulate ``kernel``, compile it from ``loom_args`` (scheduled by ``schedule``) and compare outputs."""
    expected = _as_tuple(kernel(*np_args))
    outs = _as_tuple(kernel(*loom_args))
    s = loom.create_schedule([o.op for o in outs])
    if schedule is not None:
        schedule(s, outs)
    tensors = [a for a in loom_args if isinstance(a, Tensor)]
    shape_vars = _shape_vars(tensors)
    build_args, call_args = [], []
    for lo, nu in zip(loom_args, np_args):
        if isinstance(lo, Tensor) or isinstance(lo, E.Var) and id(lo) not in shape_vars:
            build_args.append(lo)
            call_args.append(nu)
    results = [np.zeros(e.shape, e.dtype) for e in expected]
    f = loom.build(s, tensors + list(outs) + [a for a in build_args if isinstance(a, E.Var)], target=target)
    f(*[c for c in call_args if isinstance(c, np.ndarray)], *results,
      *[c for c, b in zip(call_args, build_args) if isinstance(b, E.Var)])
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    return f


@pytest.mark.parametrize("name", sorted(K.CASES))
def test_emulation_and_compilation_agree(name, target):
    kernel, make_np, make_loom = K.CASES[name]
    np_args = make_np()
    run_case(kernel, np_args, make_loom(np_args), target)


def _matmul_args():
    a, b = K._f32(13, 11), K._f32(11, 7)
    return [a, b], K.mirror([a, b])


def _split_vectorize(s, outs):
    (c,) = outs
    _, j, _ = c.op.axis
    _, ji = s[c].split(j, factor=4)
    s[c].vectorize(ji)


def _fuse_parallel(s, outs):
    (c,) = outs
    i, j, _ = c.op.axis
    s[c].parallel(s[c].fuse(i, j))


def _reorder_unroll(s, outs):
    (c,) = outs
    i, j, k = c.op.axis
    s[c].reorder(j, i)
    _, ki = s[c].split(k, nparts=2)
    s[c].unroll(ki)


def _tile(s, outs):
    (c,) = outs
    i, j, _ = c.op.axis
    s[c].tile(i, j, 4, 3)


@pytest.mark.parametrize("schedule", [_split_vectorize, _fuse_parallel, _reorder_unroll, _tile],
                         ids=lambda f: f.__name__.strip("_"))
def test_scheduled_hybrid_loops(schedule, target):
    """Split, fuse, reorder, unroll, vectorize, parallel and tile on the loops of a hybrid matmul."""
    np_args, loom_args = _matmul_args()
    run_case(K.matmul, np_args, loom_args, target, schedule)


def test_scheduled_triangle_split_of_a_dependent_extent(target):
    """Splitting a loop whose extent is the outer loop variable guards the tail."""
    a = K._f32(9, 9)

    def schedule(s, outs):
        (b,) = outs
        i, j = b.op.axis
        _, ji = s[b].split(j, factor=4)
        s[b].unroll(ji)

    run_case(K.triangle, [a], K.mirror([a]), target, schedule)


def _bind_schedule(s, outs):
    (b,) = outs
    i, j = b.op.axis
    _, ji = s[b].split(j, factor=4)
    s[b].bind(ji, loom.thread_axis("threadIdx.x"))
    s[b].bind(i, loom.thread_axis("blockIdx.x"))


@pytest.mark.parametrize("kind", buildable_kinds())
def test_bind_in_script_and_in_schedule(kind):
    """Thread binding written in the script (bind) and applied by the schedule (Stage.bind)."""
    a = K._f32(8)
    run_case(K.threads, [a], K.mirror([a]), kind)
    x = K._f32(6, 10)
    run_case(K.add_one_2d, [x], K.mirror([x]), kind, _bind_schedule)


def test_hybrid_output_feeds_a_compute_and_reads_one(target):
    """A hybrid stage between two compute stages, with a producer computed at one of its loops."""
    a = K._f32(6, 5)
    A = loom.placeholder((6, 5), name="A")
    B = loom.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B")
    C = K.row_sums(B)
    D = loom.compute((6,), lambda i: C[i] + 1.0, name="D")
    s = loom.create_schedule(D.op)
    s.cache_read(A, "local", [B])
    s[B].compute_at(s[C], C.op.axis[0])
    f = loom.build(s, [A, D], target=target)
    d = np.zeros(6, "float32")
    f(a, d)
    np.testing.assert_allclose(d, (a * 2).sum(1) + 1, rtol=1e-5)
