"""End-to-end programs built for the kind under test, checked against numpy.

Each program runs with its CPU schedule (tile, vectorize, parallel, unroll) and
its bound one (blocks and threads, no barriers), which every kind must run:
device kinds take only the bound one, since their loops must all be bound.
"""

from __future__ import annotations

import numpy as np
import pytest

import loom

from .harness import KindUnderTest, bind_root
from .programs import PROGRAMS, M, N, K, matmul, rand


@pytest.mark.parametrize("variant", ["cpu", "bound"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(kind_under_test: KindUnderTest, name: str, variant: str) -> None:
    kind = kind_under_test
    if kind.on_device and variant == "cpu":
        pytest.skip(f"{kind.name} is a device kind: every loop that touches its memory must be bound")
    p = PROGRAMS[name](variant)
    with loom.build_config(**p.config):
        f = kind.build(p.s, p.args)
    got = kind.run(f, *p.values)
    np.testing.assert_allclose(got[-1], p.want, rtol=p.tol, atol=p.tol)
    for before, after in zip(p.values[:-1], got[:-1]):
        np.testing.assert_array_equal(after, before)  # inputs are read, never written


def test_bound_reduction_into_global_memory(kind_under_test: KindUnderTest) -> None:
    """Each thread accumulates its own element of C in global memory: no two threads share an element,
    so no barrier is needed, and kinds that run bound threads one after another build it too."""
    kind = kind_under_test
    A, B, C = matmul(M, N, K)
    s = loom.create_schedule(C.op)
    bind_root(s, C)
    f = kind.build(s, [A, B, C])
    a, b = rand((M, K)), rand((K, N), 1)
    c = kind.run(f, a, b, np.zeros((M, N), "float32"))[-1]
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_two_kernels_pass_an_intermediate(kind_under_test: KindUnderTest) -> None:
    """B is its own bound stage: on a device it lives in device memory between two kernels."""
    kind = kind_under_test
    A = loom.placeholder((M, N), name="A")
    B = loom.compute((M, N), lambda i, j: A[i, j] * 2.0 - 1.0, name="B")
    C = loom.compute((N, M), lambda j, i: B[i, j] + A[i, j], name="C")  # a transpose: another layout
    s = loom.create_schedule(C.op)
    for T in (B, C):
        bind_root(s, T)
    f = kind.build(s, [A, C])
    a = rand((M, N))
    got = kind.run(f, a, np.zeros((N, M), "float32"))[-1]
    np.testing.assert_allclose(got, (3 * a - 1).T, rtol=1e-6, atol=1e-6)


def test_scalar_parameters_and_several_outputs(kind_under_test: KindUnderTest) -> None:
    kind = kind_under_test
    n = loom.var("n")
    alpha = loom.var("alpha", "float32")
    A = loom.placeholder((n,), name="A")
    Y = loom.compute((n,), lambda i: A[i] * alpha, name="Y")
    Z = loom.compute((n,), lambda i: A[i] + alpha, name="Z")
    s = loom.create_schedule([Y.op, Z.op])
    if kind.on_device:
        for T in (Y, Z):
            bind_root(s, T)
    f = kind.build(s, [A, alpha, Y, Z])
    a = rand((29,))
    _, _, y, z = kind.run(f, a, 1.5, np.zeros_like(a), np.zeros_like(a))
    np.testing.assert_allclose(y, a * np.float32(1.5), rtol=1e-6)
    np.testing.assert_allclose(z, a + np.float32(1.5), rtol=1e-6)


def test_unknown_target_lists_the_installed_kinds(loom_kind: str) -> None:
    A = loom.placeholder((4,), name="A")
    C = loom.compute((4,), lambda i: A[i] + 1.0, name="C")
    with pytest.raises(loom.LoomError, match=loom_kind):
        loom.build(loom.create_schedule(C.op), [A, C], target="no_such_kind")
