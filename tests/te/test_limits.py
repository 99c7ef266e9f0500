"""Loop counts past int32, and schedule arguments past what a loop or a vector can hold (issue 11, items 4, 17)."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.errors import LoomValueError
from loom.ir import For, PrimFunc
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.functor import collect
from loom.transform import VectorizeLoop


def _loops(mod: loom.ir.IRModule) -> dict[str, For]:
    body = mod["default_function"].body
    return {f.loop_var.name: f for f in collect(body, lambda n: isinstance(n, For))}


def _count(extents: tuple[int, ...], split: int | None = None):
    """``C[0] = sum over the fused reduction axes of 1`` (a count of the fused loop's iterations)."""
    A = loom.placeholder((1,), name="A", dtype="int64")
    ks = [loom.reduce_axis((0, n), f"k{d}") for d, n in enumerate(extents)]
    C = loom.compute((1,), lambda x: loom.sum(A[x] + 1, axis=ks), name="C")
    s = loom.create_schedule(C.op)
    fused = s[C].fuse(*ks)
    if split is not None:
        s[C].split(fused, factor=split)
    return s, A, C, fused


def test_a_fused_count_past_int32_is_an_int64_loop():
    s, A, C, fused = _count((2**16, 2**16, 2))
    assert str(fused.var.dtype) == "int64"
    [loop] = _loops(loom.lower(s, [A, C], simple_mode=True)).values()
    assert str(loop.loop_var.dtype) == "int64" and loop.extent.value == 2**33


def test_a_fused_count_within_int32_stays_int32():
    s, A, C, fused = _count((2**15, 2**16 - 1))
    assert str(fused.var.dtype) == "int32"
    [loop] = _loops(loom.lower(s, [A, C], simple_mode=True)).values()
    assert loop.extent.value == 2**15 * (2**16 - 1)


@pytest.mark.parametrize("target", ["llvm", "c"])
@pytest.mark.parametrize("split", [None, 1000])
def test_native_code_runs_every_iteration_of_an_int64_fused_loop(target, split):
    """2**33 iterations (the compiler folds the count, so this is quick); an int32 count ran none."""
    s, A, C, _ = _count((2**16, 2**16, 2), split)
    f = loom.build(s, [A, C], target=target)
    c = np.zeros(1, "int64")
    f(np.zeros(1, "int64"), c)
    assert c[0] == 2**33


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
@pytest.mark.parametrize("int64_outer", [True, False])
def test_fusing_an_int64_axis_with_an_int32_one_counts_in_int64(target, int64_outer):
    """The fused loop takes the wider type (not the outer one's); each part is narrowed back to its own type."""
    X = loom.placeholder((4, 5), name="X", dtype="int64")
    k1 = loom.reduce_axis((0, loom.const(4, "int64")), "k1")
    k2 = loom.reduce_axis((0, 5), "k2")
    C = loom.compute((1,), lambda _: loom.sum(X[k1, k2] * loom.cast(k2 + 1, "int64"), axis=[k1, k2]), name="C")
    assert (str(k1.var.dtype), str(k2.var.dtype)) == ("int64", "int32")
    s = loom.create_schedule(C.op)
    if not int64_outer:
        s[C].reorder(k2, k1)
    fused = s[C].fuse(k1, k2) if int64_outer else s[C].fuse(k2, k1)
    assert str(fused.var.dtype) == "int64"
    x = np.arange(20, dtype="int64").reshape(4, 5)
    c = np.zeros(1, "int64")
    loom.build(s, [X, C], target=target)(x, c)
    assert c[0] == (x * np.arange(1, 6)).sum()


def test_split_of_a_split_of_a_huge_axis_counts_exactly():
    """ceil(2**31 - 1 / 1000): ``extent + factor - 1`` would wrap int32 and make the outer loop empty."""
    s, A, C, _ = _count((2**31 - 1,), split=1000)
    loops = _loops(loom.lower(s, [A, C], simple_mode=True))
    assert loops["k0.outer"].extent.value == -(-(2**31 - 1) // 1000)


def test_fusing_past_int64_is_refused():
    A = loom.placeholder((2**40, 2**40), name="Huge")
    B = loom.compute((2**40, 2**40), lambda i, j: A[i, j], name="B")
    s = loom.create_schedule(B.op)
    with pytest.raises(LoomValueError, match=r"fuse on B: fusing i \(1099511627776 iterations\) and j .* "
                                             r"more than an int64 loop can count"):
        s[B].fuse(*B.op.axis)


def test_split_factor_past_the_loop_type_names_stage_operation_and_value():
    A = loom.placeholder((2**20,), name="A")
    B = loom.compute((2**20,), lambda i: A[i] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    with pytest.raises(LoomValueError, match=r"split of i on B: factor=1000000000000 is more than a loop of type "
                                             r"int32 can count \(at most 2147483647\)"):
        s[B].split(B.op.axis[0], factor=10**12)
    with pytest.raises(LoomValueError, match="split of i on B: nparts=4294967296"):
        s[B].split(B.op.axis[0], nparts=2**32)


def test_vectorizing_more_lanes_than_a_vector_has_names_stage_operation_and_value():
    A = loom.placeholder((2**20,), name="A")
    B = loom.compute((2**20,), lambda i: A[i] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    with pytest.raises(LoomValueError, match=r"vectorize on B: loop i has 1048576 iterations, more than the 65536 "
                                             r"lanes a vector can have; split it"):
        loom.lower(s, [A, B])


def test_vectorize_loop_pass_refuses_an_over_wide_loop_by_name():
    A = loom.decl_buffer((2**20,), "int32", name="A")
    i = loom.var("i")
    f = PrimFunc([A.data], For(i, 0, 2**20, "vectorized", S.BufferStore(A, A[i] + 1, [i])), buffer_map={A.data: A})
    with pytest.raises(LoomValueError, match=r"vectorize: loop i has 1048576 iterations, more than the 65536 lanes"):
        VectorizeLoop()(f)
    narrow = PrimFunc([A.data], For(i, 0, 8, "vectorized", S.BufferStore(A, A[i] + 1, [i])), buffer_map={A.data: A})
    assert isinstance(VectorizeLoop()(narrow).body.indices[0], E.Ramp)


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_a_stage_computed_inside_an_int64_fused_loop_reads_the_right_elements(target):
    X = loom.placeholder((4, 5), name="X", dtype="int64")
    B = loom.compute((4, 5), lambda i, j: X[i, j] * 2, name="B")
    k1 = loom.reduce_axis((0, loom.const(4, "int64")), "k1")
    k2 = loom.reduce_axis((0, 5), "k2")
    C = loom.compute((1,), lambda _: loom.sum(B[k1, k2] * loom.cast(k2 + 1, "int64"), axis=[k1, k2]), name="C")
    s = loom.create_schedule(C.op)
    s[B].compute_at(s[C], s[C].fuse(k1, k2))
    x = np.arange(20, dtype="int64").reshape(4, 5)
    c = np.zeros(1, "int64")
    loom.build(s, [X, C], target=target)(x, c)
    assert c[0] == (2 * x * np.arange(1, 6)).sum()


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_a_parallel_int64_fused_loop_runs_every_iteration(target):
    """Native parallel loops (OpenMP chunks) take an int64 loop variable as they take an int32 one."""
    n = 1000
    X = loom.placeholder((n, 3), name="X", dtype="int64")
    Y = loom.compute((loom.const(n, "int64"), 3), lambda i, j: X[i, j] + i, name="Y")
    s = loom.create_schedule(Y.op)
    fused = s[Y].fuse(*Y.op.axis)
    s[Y].parallel(fused)
    assert str(fused.var.dtype) == "int64"
    x = np.arange(3 * n, dtype="int64").reshape(n, 3)
    y = np.zeros((n, 3), "int64")
    loom.build(s, [X, Y], target=target)(x, y)
    assert (y == x + np.arange(n)[:, None]).all()
