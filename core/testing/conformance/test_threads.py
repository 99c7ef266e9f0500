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
from .programs import matmul, rand


def tiled_matmul(m: int, n: int, k: int, tile: int = 8) -> tuple[Any, list[Any]]:
    """C = A @ B; a tile x tile block of threads loads A's and B's tiles into shared memory together."""
    A, B, C = matmul(m, n, k)
    s = loom.create_schedule(C.op)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    ty, tx = loom.thread_axis("threadIdx.y"), loom.thread_axis("threadIdx.x")
    io, ii = s[C].split(C.op.axis[0], factor=tile)
    jo, ji = s[C].split(C.op.axis[1], factor=tile)
    s[C].reorder(io, jo, ii, ji)
    s[C].bind(io, loom.thread_axis("blockIdx.y"))
    s[C].bind(jo, loom.thread_axis("blockIdx.x"))
    s[C].bind(ii, ty)
    s[C].bind(ji, tx)
    s[CL].compute_at(s[C], ji)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=tile)
    for tile_stage in (AS, BS):
        s[tile_stage].compute_at(s[CL], ko)
        s[tile_stage].bind(s[tile_stage].op.axis[0], ty)
        s[tile_stage].bind(s[tile_stage].op.axis[1], tx)
    return s, [A, B, C]


def shared_reversal(n: int, block: int) -> tuple[Any, list[Any]]:
    """B[i] = A[n - 1 - i]: each block stages its window of A in shared memory, and each thread reads
    the element another thread of its block wrote."""
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[n - 1 - i] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=block)
    s[B].bind(bx, loom.thread_axis("blockIdx.x"))
    s[B].bind(tx, loom.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], bx)
    s[AS].bind(s[AS].op.axis[0], loom.thread_axis("threadIdx.x"))
    return s, [A, B]


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
