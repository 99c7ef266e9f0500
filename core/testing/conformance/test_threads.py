"""Threads that share memory: kinds with GPU thread semantics run them, serial kinds refuse them.

A kind whose backend's ``thread_semantics`` is ``"gpu"`` (interp, ext_dev,
cuda) runs blocks of threads with shared memory and barriers and must give
numpy's result; a ``"serial"`` kind (llvm, c) runs bound threads one after
another, so a program that needs a barrier must be refused with a LoomError
that says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import loom

from .harness import KindUnderTest
from .programs import rand, shared_reversal, tiled_matmul


def _expect_gpu_or_refusal(kind: KindUnderTest, s: Any, args: list[Any]) -> Any:
    """The built module on a GPU-semantics kind; on a serial one, check the refusal and skip the run."""
    if kind.gpu_threads:
        return kind.build(s, args)
    with pytest.raises(loom.LoomError, match="barrier"):
        kind.build(s, args)
    return None


@pytest.mark.parametrize("shape", [(32, 32, 32), (20, 13, 18)], ids=["even", "guarded"])
def test_shared_memory_tiled_matmul(kind_under_test: KindUnderTest, shape: tuple[int, int, int]) -> None:
    m, n, k = shape
    s, args = tiled_matmul(m, n, k)
    f = _expect_gpu_or_refusal(kind_under_test, s, args)
    if f is not None:
        a, b = rand((m, k)), rand((k, n), 1)
        c = kind_under_test.run(f, a, b, np.zeros((m, n), "float32"))[-1]
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [32, 45])
def test_shared_memory_reversal(kind_under_test: KindUnderTest, n: int) -> None:
    s, args = shared_reversal(n, 16)
    f = _expect_gpu_or_refusal(kind_under_test, s, args)
    if f is not None:
        a = rand((n,))
        b = kind_under_test.run(f, a, np.zeros_like(a))[-1]
        np.testing.assert_array_equal(b, a[::-1] * 2)


def test_bound_two_dimensional_grid_without_barriers(kind_under_test: KindUnderTest) -> None:
    """blockIdx.y/x and threadIdx.y/x over a transpose; each thread reads and writes its own elements."""
    A = loom.placeholder((19, 23), name="A")
    B = loom.compute((23, 19), lambda j, i: A[i, j] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    jo, io, ji, ii = s[B].tile(B.op.axis[0], B.op.axis[1], 4, 8)
    for axis, tag in ((jo, "blockIdx.y"), (io, "blockIdx.x"), (ji, "threadIdx.y"), (ii, "threadIdx.x")):
        s[B].bind(axis, loom.thread_axis(tag))
    f = kind_under_test.build(s, [A, B])
    a = rand((19, 23))
    b = kind_under_test.run(f, a, np.zeros((23, 19), "float32"))[-1]
    np.testing.assert_array_equal(b, a.T + np.float32(1))
