"""InjectVirtualThread: interleaved copies, per-thread allocations, loop fallback."""

import numpy as np
import pytest

import loom
from loom.errors import LoomValueError
from loom.ir import Allocate, AttrStmt, BufferStore, For, IterVar, PrimFunc, collect, seq
from loom.testing import evaluate
from loom.testing.random_programs import random_func
from loom.transform.inject_virtual_thread import InjectVirtualThread, inject_virtual_thread

A = loom.decl_buffer((64,), "int32", name="A")
B = loom.decl_buffer((64,), "int32", name="B")


def func(body):
    return PrimFunc([A.data, B.data], body, buffer_map={A.data: A, B.data: B})


def vthread(n, body_of, tag="vthread"):
    iv = IterVar(None, loom.var("vt"), "thread_index", tag)
    return AttrStmt(iv, "virtual_thread", n, body_of(iv.var))


def results(f):
    a = np.arange(64, dtype="int32")
    b = np.zeros(64, dtype="int32")
    evaluate(f, a, b)
    return a, b


def assert_same(before, after):
    loom.verify_well_formed(after)
    for x, y in zip(results(before), results(after)):
        np.testing.assert_array_equal(x, y)


def local_pipeline(n_vt):
    """Each virtual thread stages 4 elements through a local buffer."""
    L = loom.decl_buffer((4,), "int32", name="L", scope="local")

    def body(vt):
        i, j = loom.var("i"), loom.var("j")
        return Allocate(L.data, "int32", [4], True, seq(
            For(i, 0, 4, "serial", BufferStore(L, A[vt * 4 + i] * 2, [i])),
            For(j, 0, 4, "serial", BufferStore(B, L[j] + 1, [vt * 4 + j]))), "local")

    return func(vthread(n_vt, body))


def test_store_copies_are_unrolled():
    """A loop-free region becomes one copy per virtual thread."""
    f = func(vthread(2, lambda vt: BufferStore(B, A[vt], [vt])))
    after = InjectVirtualThread()(f)
    expected = seq(BufferStore(B, A[0], [0]), BufferStore(B, A[1], [1]))
    loom.assert_structural_equal(after.body, expected)
    assert_same(f, after)


def test_touched_allocation_gets_a_copy_per_thread():
    f = local_pipeline(2)
    after = InjectVirtualThread()(f)
    allocs = collect(after.body, lambda x: isinstance(x, Allocate))
    assert len(allocs) == 1 and [int(e) for e in allocs[0].extents] == [2, 4]
    assert not collect(after.body, lambda x: isinstance(x, AttrStmt))
    # the copies are interleaved inside the loops: both loops survive, each with 2 stores
    loops = collect(after.body, lambda x: isinstance(x, For))
    assert len(loops) == 2
    assert all(len(loop.body.seq) == 2 for loop in loops)
    assert_same(f, after)


def test_many_threads_become_a_serial_loop():
    f = local_pipeline(16)
    after = inject_virtual_thread(f.body)
    loops = collect(after, lambda x: isinstance(x, For))
    assert any(loop.loop_var.name == "vt.s" and int(loop.extent) == 16 for loop in loops)
    assert_same(f, func(after))


def test_untouched_statements_run_once_for_vthread_but_not_cthread():
    def body(vt):
        return seq(BufferStore(A, loom.const(5), [40]), BufferStore(B, A[vt], [vt]))

    shared = inject_virtual_thread(vthread(2, body))
    own = inject_virtual_thread(vthread(2, body, tag="cthread"))
    count = lambda s: len(collect(s, lambda x: isinstance(x, BufferStore)))  # noqa: E731
    assert count(shared) == 3 and count(own) == 4
    assert_same(func(vthread(2, body)), func(shared))


def test_read_modify_write_is_not_shared():
    """``B[0] += 1`` does not depend on the thread but is not idempotent: it stays per thread."""
    f = func(vthread(3, lambda vt: BufferStore(B, B[0] + 1, [0])))
    after = InjectVirtualThread()(f)
    assert results(after)[1][0] == 3
    assert_same(f, after)


def test_touched_loop_bound_copies_the_whole_loop():
    def body(vt):
        i = loom.var("i")
        return For(i, 0, vt + 1, "serial", BufferStore(B, A[i] + vt, [vt * 8 + i]))

    f = func(vthread(3, body))
    after = InjectVirtualThread()(f)
    # the copied statement holds a loop, so the copies are a serial loop around it
    assert isinstance(after.body, For) and after.body.loop_var.name == "vt.s"
    assert isinstance(after.body.body, For)
    assert_same(f, after)


def test_non_constant_extent_is_an_error():
    n = loom.var("n")
    iv = IterVar(None, loom.var("vt"), "thread_index", "vthread")
    f = PrimFunc([A.data, B.data, n], AttrStmt(iv, "virtual_thread", n, BufferStore(B, A[iv.var], [iv.var])),
                 buffer_map={A.data: A, B.data: B})
    with pytest.raises(LoomValueError, match="positive constant"):
        InjectVirtualThread()(f)


def test_nested_virtual_threads():
    def body(vy):
        return vthread(2, lambda vx: BufferStore(B, A[vy * 2 + vx] * 3, [vy * 2 + vx]))

    f = func(vthread(2, body))
    after = InjectVirtualThread()(f)
    assert len(collect(after.body, lambda x: isinstance(x, BufferStore))) == 4
    assert_same(f, after)


@pytest.mark.parametrize("seed", range(15))
def test_programs_without_virtual_threads_are_left_alone(seed):
    f, _ = random_func(seed)
    assert InjectVirtualThread()(f) is f


def test_expanded_buffer_in_a_header_inside_a_copied_loop():
    """A loop bound read from a per-thread buffer, inside a loop copied whole, reads its own copy."""
    L = loom.decl_buffer((1,), "int32", name="L", scope="local")

    def body(vt):
        j, k = loom.var("j"), loom.var("k")
        inner = For(k, 0, L[0], "serial", BufferStore(B, A[k] + j, [vt * 16 + j * 4 + k]))
        return Allocate(L.data, "int32", [1], True, seq(BufferStore(L, vt + 1, [0]),
                                                        For(j, 0, vt + 1, "serial", inner)), "local")

    f = func(vthread(2, body))
    after = InjectVirtualThread()(f)
    assert all(len(load.buffer.shape) == 2 for load in collect(after.body, lambda x: isinstance(x, loom.ir.BufferLoad))
               if load.buffer.name == "L")
    assert_same(f, after)


def test_scheduled_vthread_through_the_driver():
    """A stage computed at a virtual-thread axis gets one local copy per virtual thread."""
    from loom import te
    from loom.driver import build, lower

    X = te.placeholder((16,), name="X")
    T = te.compute((16,), lambda i: X[i] * 2.0, name="T")
    Z = te.compute((16,), lambda i: T[i] + 1.0, name="Z")
    s = te.create_schedule(Z.op)
    xo, _ = s[Z].split(Z.op.axis[0], factor=4)
    s[Z].bind(xo, te.thread_axis("vthread"))
    s[T].compute_at(s[Z], xo)
    s[T].set_scope("local")
    body = lower(s, [X, Z], simple_mode=True)["default_function"].body
    assert not collect(body, lambda x: isinstance(x, AttrStmt) and x.attr_key == "virtual_thread")
    assert [int(e) for e in collect(body, lambda x: isinstance(x, Allocate))[0].extents][0] == 4
    x, z = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    build(s, [X, Z], target="interp")(x, z)
    np.testing.assert_array_equal(z, x * 2 + 1)


def _sum_through_a_pointer(pointer_of):
    """Each virtual thread stages 4 elements in a local buffer and sums them in an extern function."""
    L = loom.decl_buffer((4,), "int32", name="L", scope="local")
    i = loom.var("i")

    def body(vt):
        return Allocate(L.data, "int32", [4], True, seq(
            For(i, 0, 4, "serial", BufferStore(L, A[vt * 4 + i] * 2, [i])),
            BufferStore(B, loom.call_extern("int32", "sum4", pointer_of(L)), [vt])), "local")

    return func(vthread(2, body))


def test_access_ptr_points_into_the_threads_own_copy():
    """``L.access_ptr`` of a buffer each virtual thread has a copy of moves by one copy per thread.

    Before, every copy of the call got offset 0, so thread 1 summed thread 0's elements.
    """
    f = _sum_through_a_pointer(lambda L: L.access_ptr("r"))
    after = InjectVirtualThread()(f)
    offsets = [str(loom.arith.Analyzer().simplify(c.args[2]))
               for c in collect(after.body, lambda x: getattr(getattr(x, "op", None), "name", "") == "tir.tvm_access_ptr")]
    assert offsets == ["0", "4"]

    def sum4(p):
        return int(np.asarray(p)[:4].sum())

    for g in (f, after):
        a, b = np.arange(64, dtype="int32"), np.zeros(64, "int32")
        evaluate(g, a, b, externs={"sum4": sum4})
        assert list(b[:2]) == [(0 + 1 + 2 + 3) * 2, (4 + 5 + 6 + 7) * 2]


def test_a_bare_address_of_a_copied_buffer_is_an_error():
    f = _sum_through_a_pointer(lambda L: L.data)
    with pytest.raises(LoomValueError, match="the address of L, of which each virtual thread has its own copy, "
                                             "is passed to tir.call_extern"):
        InjectVirtualThread()(f)
