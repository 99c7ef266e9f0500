"""``@loom.jit`` kernels (seed 001) compiled for the kind under test, checked against the interpreter.

Each kernel is the same Python function compiled twice, for the kind and for
the reference interpreter, and both results are compared (and with numpy).
The kernels bind their loops to blocks and threads, without barriers, so every
kind runs them: device kinds take their arrays on the device, CPU kinds run
the bound loops one thread after another.  They cover an elementwise kernel
with a compiled-in scalar, a reduction whose static ``BLOCK`` parameter sizes
a tensor and a loop, and a ``T.dyn`` size shared by name with the shapes of
two tensors (as an int32 and as an int64).
"""
# ruff: noqa: F821 - the strings in T.Tensor[...] / T.dyn[...] annotations are sizes and dtypes, not names

from __future__ import annotations

from typing import Any, Callable, no_type_check

import numpy as np

import loom
import loom.language as T

from .harness import BLOCK, KindUnderTest

__all__ = ["test_elementwise_kernel", "test_reduction_with_a_static_block", "test_dyn_size_shared_with_shapes"]


@no_type_check  # mypy cannot read loom.language annotations
def scale_shift(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"], k: float) -> None:
    for bx in T.thread_binding((A.shape[0] + 15) // 16, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            if bx * 16 + tx < A.shape[0]:
                B[bx * 16 + tx] = A[bx * 16 + tx] * k - 1.0


@no_type_check  # mypy cannot read loom.language annotations
def row_sums(A: T.Tensor[("M", "BLOCK"), "int32"], S: T.Tensor[("M",), "int32"], BLOCK: int) -> None:
    for bx in T.thread_binding((A.shape[0] + 15) // 16, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            if bx * 16 + tx < A.shape[0]:
                acc = T.alloc_local((1,), "int32")
                acc[0] = 0
                for j in T.serial(BLOCK):
                    acc[0] += A[bx * 16 + tx, j] * (j + 1)
                S[bx * 16 + tx] = acc[0]


@no_type_check  # mypy cannot read loom.language annotations
def reverse_add(A: T.Tensor[("N",), "int32"], B: T.Tensor[("N",), "int32"],
                C: T.Tensor[("N",), "int32"], n: T.dyn["N"]) -> None:
    for bx in T.thread_binding((n + 15) // 16, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            if bx * 16 + tx < n:
                C[bx * 16 + tx] = A[bx * 16 + tx] + B[n - 1 - (bx * 16 + tx)]


@no_type_check  # mypy cannot read loom.language annotations
def reverse_add64(A: T.Tensor[("N",), "int32"], B: T.Tensor[("N",), "int32"],
                  C: T.Tensor[("N",), "int32"], n: T.dyn[T.int64, "N"]) -> None:
    for bx in T.thread_binding((n + 15) // 16, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            if bx * 16 + tx < n:
                C[bx * 16 + tx] = A[bx * 16 + tx] + B[n - 1 - (bx * 16 + tx)]


class Both:
    """A kernel function compiled for the kind under test and for the interpreter."""

    def __init__(self, kind: KindUnderTest, func: Callable[..., Any]) -> None:
        self.kind = kind
        self.kernel = loom.jit(func, target=loom.Target(kind.name, host=kind.host))
        self.oracle = loom.jit(func, target="interp")

    def __call__(self, *values: Any) -> list[Any]:
        """Both kernels on copies of ``values``, which must agree: every argument after the kind's call."""
        got = self.kind.run(self.kernel, *values)
        want = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
        self.oracle(*want)
        for g, w in zip(got, want):
            if isinstance(w, np.ndarray):
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
        return got


def test_elementwise_kernel(kind_under_test: KindUnderTest) -> None:
    both = Both(kind_under_test, scale_shift)
    for n in (BLOCK * 3 + 5, 1):
        a = np.linspace(-2, 2, n, dtype="float32")
        _, b, _ = both(a, np.zeros(n, "float32"), 2.5)
        np.testing.assert_allclose(b, a * 2.5 - 1, rtol=1e-6)


def test_reduction_with_a_static_block(kind_under_test: KindUnderTest) -> None:
    both, rng = Both(kind_under_test, row_sums), np.random.default_rng(7)
    for block in (4, 9):
        a = rng.integers(-50, 50, (BLOCK + 3, block), dtype="int32")
        _, s, _ = both(a, np.zeros(BLOCK + 3, "int32"), block)
        np.testing.assert_array_equal(s, a @ np.arange(1, block + 1, dtype="int32"))


def test_dyn_size_shared_with_shapes(kind_under_test: KindUnderTest) -> None:
    for func in (reverse_add, reverse_add64):
        both = Both(kind_under_test, func)
        for n in (BLOCK * 2 + 3, 5):
            a, b = np.arange(n, dtype="int32") * 3, np.arange(n, dtype="int32") - 7
            *_, c, _ = both(a, b, np.zeros(n, "int32"), n)
            np.testing.assert_array_equal(c, a + b[::-1])
