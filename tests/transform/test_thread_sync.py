"""ThreadSync: barriers for shared-memory communication, loop-carried, global barriers."""

import numpy as np
import pytest

import loom
from loom.errors import LoomError, LoomValueError
from loom.ir import Allocate, AttrStmt, BufferStore, Evaluate, For, IfThenElse, IterVar, PrimFunc, collect, seq
from loom.testing import evaluate
from loom.testing.random_programs import random_func
from loom.transform import PassContext
from loom.transform.thread_sync import ThreadSync, storage_sync, thread_sync

A = loom.decl_buffer((8,), "float32", name="A")
Y = loom.decl_buffer((8,), "float32", name="Y")
S = loom.decl_buffer((8,), "float32", name="S", scope="shared")


def kernel(body_of, extent=8):
    tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
    inner = Allocate(S.data, "float32", [8], True, body_of(tx.var), "shared")
    return AttrStmt(tx, "thread_extent", extent, inner)


def func(body):
    return PrimFunc([A.data, Y.data], body, buffer_map={A.data: A, Y.data: Y})


def syncs(s, scope="shared"):
    return [x for x in collect(s, lambda x: isinstance(x, Evaluate)) if "tvm_storage_sync" in str(x)
            and f"'{scope}'" in str(x)]


def test_read_after_write_by_another_thread():
    body = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]), BufferStore(Y, S[7 - tx], [tx])))
    after = thread_sync(body)
    stmts = after.body.body.seq
    assert len(stmts) == 3
    loom.assert_structural_equal(stmts[1], storage_sync("shared"))


def test_same_index_needs_no_barrier():
    body = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]), BufferStore(Y, S[tx] * 2.0, [tx])))
    assert thread_sync(body) is body


def test_write_after_read():
    body = kernel(lambda tx: seq(BufferStore(Y, S[7 - tx], [tx]), BufferStore(S, A[tx], [tx])))
    assert len(syncs(thread_sync(body))) == 1


def test_existing_barrier_is_respected():
    body = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]), storage_sync("shared"),
                                 BufferStore(Y, S[7 - tx], [tx])))
    assert thread_sync(body) is body


def test_loop_carried_conflict_gets_a_barrier_at_the_loop_start():
    def body(tx):
        k = loom.var("k")
        return For(k, 0, 3, "serial", seq(BufferStore(S, A[tx] + loom.cast(k, "float32"), [tx]),
                                          BufferStore(Y, S[7 - tx], [tx])))

    after = thread_sync(kernel(body))
    loop = collect(after, lambda x: isinstance(x, For))[0]
    assert len(loop.body.seq) == 4
    assert "tvm_storage_sync" in str(loop.body.seq[0]) and "tvm_storage_sync" in str(loop.body.seq[2])


def test_barrier_before_a_loop_that_reads():
    def body(tx):
        k = loom.var("k")
        return seq(BufferStore(S, A[tx], [tx]), For(k, 0, 8, "serial", BufferStore(Y, S[k], [tx])))

    after = thread_sync(kernel(body))
    assert len(syncs(after)) == 1 and isinstance(after.body.body.seq[1], Evaluate)


def test_local_buffers_are_ignored():
    L = loom.decl_buffer((8,), "float32", name="L", scope="local")
    tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
    body = AttrStmt(tx, "thread_extent", 8, Allocate(L.data, "float32", [8], True, seq(
        BufferStore(L, A[tx.var], [tx.var]), BufferStore(Y, L[7 - tx.var], [tx.var])), "local"))
    assert thread_sync(body) is body


def test_barrier_under_thread_dependent_condition_is_an_error():
    body = kernel(lambda tx: IfThenElse(tx < 4, seq(BufferStore(S, A[tx], [tx]), BufferStore(Y, S[7 - tx], [tx]))))
    with pytest.raises(LoomError, match="thread index"):
        thread_sync(body)


def test_code_outside_thread_regions_is_untouched():
    body = seq(BufferStore(Y, A[0], [0]), BufferStore(A, Y[1], [0]))
    assert thread_sync(body, "global") is body


def test_result_unchanged_and_barrier_runs():
    body = kernel(lambda tx: seq(BufferStore(S, A[tx] * 2.0, [tx]), BufferStore(Y, S[tx] + 1.0, [tx])))
    f = func(seq(body, kernel(lambda tx: seq(BufferStore(S, Y[tx], [tx]), BufferStore(Y, S[tx] - A[tx], [tx])))))
    with_sync = func(seq(storage_sync("shared"), f.body))
    after = ThreadSync("shared")(with_sync)
    a, y1, y2 = np.arange(8, dtype="float32"), np.zeros(8, "float32"), np.zeros(8, "float32")
    evaluate(f, a, y1)
    evaluate(after, a.copy(), y2)
    np.testing.assert_array_equal(y1, y2)


def test_global_barrier_follows_the_option():
    bx = IterVar(None, loom.var("bx"), "thread_index", "blockIdx.x")
    body = AttrStmt(bx, "thread_extent", 8, seq(BufferStore(Y, A[bx.var], [bx.var]),
                                                 BufferStore(A, Y[7 - bx.var], [bx.var])))
    f = func(body)
    on = ThreadSync("global")(f)
    assert len(syncs(on.body, "global")) == 1
    with PassContext(config={"tir.detect_global_barrier": False}):
        assert ThreadSync("global")(f) is f


def test_device_kernel_is_planned_whole():
    body = seq(BufferStore(S, A[0], [1]), BufferStore(Y, S[1], [0]))
    f = func(Allocate(S.data, "float32", [8], True, seq(BufferStore(S, A[0], [2]), BufferStore(Y, S[3], [1])),
                      "shared")).with_attr("calling_conv", "device_kernel")
    assert len(syncs(ThreadSync()(f).body)) == 1
    assert thread_sync(body) is body  # not a kernel and no thread region: host code


def test_bad_scope_name():
    with pytest.raises(LoomValueError):
        ThreadSync("")


@pytest.mark.parametrize("seed", range(15))
def test_host_programs_are_left_alone(seed):
    f, _ = random_func(seed)
    assert ThreadSync("shared")(f) is f and ThreadSync("global")(f) is f


def _accumulate(index_uses_loop_var: bool):
    """Each thread sums A[k, tx] over k into C[tx] (its own element), or into C[k] (shared by all)."""
    A = loom.decl_buffer((4, 8), "float32", name="A")
    C = loom.decl_buffer((8,), "float32", name="C")
    tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
    k = loom.var("k")
    where = k if index_uses_loop_var else tx.var
    body = AttrStmt(tx, "thread_extent", 8, For(k, 0, 4, "serial",
                                                BufferStore(C, C[where] + A[k, tx.var], [where])))
    return PrimFunc([A.data, C.data], body, buffer_map={A.data: A, C.data: C})


def test_a_thread_accumulating_into_its_own_element_needs_no_barrier():
    f = _accumulate(index_uses_loop_var=False)
    with loom.build_config(detect_global_barrier=True):
        assert ThreadSync("global")(f).body is f.body
    A, C = np.ones((4, 8), "float32"), np.zeros(8, "float32")
    with loom.target.Target("llvm"):  # serial threads: nothing to refuse
        loom.build(f.with_attr("global_symbol", "acc"), target="llvm")(A, C)
    assert C.tolist() == [4.0] * 8


def test_elements_that_change_with_the_iteration_still_get_a_barrier():
    with loom.build_config(detect_global_barrier=True):
        synced = ThreadSync("global")(_accumulate(index_uses_loop_var=True))
    assert _syncs(synced.body) == ["global"]


def test_a_barrier_in_a_loop_whose_trip_count_depends_on_the_thread_is_an_error():
    S_ = loom.decl_buffer((8,), "float32", name="S", scope="shared")
    A = loom.decl_buffer((8,), "float32", name="A")
    tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
    k = loom.var("k")
    loop = For(k, 0, tx.var, "serial", seq(BufferStore(S_, A[tx.var], [tx.var]),
                                         BufferStore(A, S_[7 - tx.var], [tx.var])))
    body = AttrStmt(tx, "thread_extent", 8, Allocate(S_.data, "float32", [8], True, loop, "shared"))
    with pytest.raises(loom.LoomError, match=r"barrier is needed inside `for k in range\(0, 0 \+ tx\)`, whose trip "
                                             r"count depends on a thread index"):
        ThreadSync("shared")(PrimFunc([A.data], body, buffer_map={A.data: A}))


def _syncs(stmt) -> list[str]:
    return [c.args[0].value for c in collect(stmt, lambda n: isinstance(n, loom.ir.Call)
                                              and getattr(n.op, "name", "") == "tir.tvm_storage_sync")]


def test_a_value_one_thread_stores_for_the_block_needs_a_barrier():
    """``if tx == 0: S[0] = ...`` then every thread reads ``S[0]``: the same index, but not the same thread."""
    body = kernel(lambda tx: seq(IfThenElse(tx == 0, BufferStore(S, A[0], [0])), BufferStore(Y, S[0] * 2.0, [tx])))
    assert len(syncs(thread_sync(body))) == 1
    out = np.zeros(8, "float32")
    evaluate(func(thread_sync(body)), np.arange(8, dtype="float32") + 3, out)
    assert (out == 6).all()
    with pytest.raises(loom.testing.RaceError, match="S"):  # the interpreter agrees: without it, a race
        evaluate(func(body), np.zeros(8, "float32"), np.zeros(8, "float32"))


def test_the_same_thread_pinned_on_both_sides_needs_no_barrier():
    body = kernel(lambda tx: seq(IfThenElse(tx == 0, BufferStore(S, A[0], [0])),
                                 IfThenElse(loom.likely(tx == 0), BufferStore(Y, S[0], [0]))))
    assert thread_sync(body) is body
    other = kernel(lambda tx: seq(IfThenElse(tx == 0, BufferStore(S, A[0], [0])),
                                  IfThenElse(tx == 1, BufferStore(Y, S[0], [0]))))
    assert len(syncs(thread_sync(other))) == 1
