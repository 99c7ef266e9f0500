"""LoopPartition: guarded split loops become a guard-free main part and a guarded tail."""

import numpy as np
import pytest

import loom
from loom.ir import BufferStore, For, IfThenElse, PrimFunc, seq
from loom.testing import evaluate
from loom.testing.random_programs import assert_same_result, random_func
from loom.transform import PassContext
from loom.transform.loop_partition import LoopPartition, loop_partition
from loom.transform.simplify import simplify_stmt

A = loom.decl_buffer((13,), "int32", name="A")


def split_13_by_4(io, ii, kind="serial"):
    idx = io * 4 + ii
    return For(io, 0, 4, "serial", For(ii, 0, 4, kind, IfThenElse(loom.likely(idx < 13), BufferStore(A, idx, [idx]))))


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("const_loops", [True, False])
def test_random_programs_keep_their_result(seed, const_loops):
    f, make_args = random_func(seed)
    with PassContext(config={"tir.partition_const_loop": const_loops}):
        g = LoopPartition()(f)
    loom.verify_well_formed(g)
    assert_same_result(f, g, make_args)


def test_constant_split_partitions_into_main_and_tail():
    """13 = 3*4 + 1: io in [0, 3) needs no guard; the tail io = 3 is split again: ii = 0 stores, ii > 0 is gone."""
    io, ii = loom.var("io"), loom.var("ii")
    got = simplify_stmt(loop_partition(split_13_by_4(io, ii), partition_const_loop=True))
    idx = io * 4 + ii
    want = seq(For(io, 0, 3, "serial", For(ii, 0, 4, "serial", BufferStore(A, idx, [idx]))),
               BufferStore(A, loom.const(12), [loom.const(12)]))
    loom.assert_structural_equal(got, want)


def test_constant_loops_need_partition_const_loop():
    """Without tir.partition_const_loop a constant loop is left alone."""
    f = PrimFunc([A.data], split_13_by_4(loom.var("io"), loom.var("ii")), buffer_map={A.data: A})
    assert LoopPartition()(f) is f
    with PassContext(config={"tir.partition_const_loop": True}):
        assert isinstance(LoopPartition()(f).body, loom.ir.SeqStmt)


@pytest.mark.parametrize("n", [1, 4, 7, 12, 13])
def test_symbolic_split_is_partitioned_and_correct(n):
    """A loop over (n + 3) // 4 is partitioned by default and computes the same values."""
    nv, io, ii = loom.var("n"), loom.var("io"), loom.var("ii")
    B = loom.decl_buffer((nv,), "int32", name="B")
    idx = io * 4 + ii
    body = For(io, 0, loom.floordiv(nv + 3, 4), "serial",
               For(ii, 0, 4, "serial", IfThenElse(loom.likely(idx < nv), BufferStore(B, idx * 3, [idx]))))
    f = PrimFunc([B.data, nv], body, buffer_map={B.data: B})
    g = LoopPartition()(f)
    loom.verify_well_formed(g)
    assert isinstance(g.body, loom.ir.SeqStmt)
    main = g.body.seq[0]
    assert not loom.ir.collect(main, lambda x: isinstance(x, IfThenElse))
    b = np.zeros(n, "int32")
    evaluate(g, b, n)
    np.testing.assert_array_equal(b, np.arange(n) * 3)


def test_lower_bound_guard_drops_the_false_head():
    """``likely(i >= 2)`` is false on [0, 2), which goes, and true on [2, 8), which loses the guard."""
    i = loom.var("i")
    s = For(i, 0, 8, "serial", IfThenElse(loom.likely(i >= 2), BufferStore(A, i, [i])))
    main = loop_partition(s, partition_const_loop=True)
    assert (main.min.value, main.extent.value) == (2, 6) and isinstance(main.body, BufferStore)


def test_non_affine_guard_is_left_alone():
    """A guard the pass cannot solve (i * i) keeps the loop whole."""
    i = loom.var("i")
    s = For(i, 0, 8, "serial", IfThenElse(loom.likely(i * i < 20), BufferStore(A, i, [i])))
    assert loop_partition(s, partition_const_loop=True) is s
