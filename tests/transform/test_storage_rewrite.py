"""StorageRewrite: memory reuse by liveness, hoisting out of loops, conservative limits."""

import numpy as np
import pytest

import loom
from loom.ir import Allocate, AttrStmt, BufferStore, Evaluate, For, IterVar, PrimFunc, collect, seq
from loom.testing import evaluate
from loom.testing.random_programs import assert_same_result, random_func
from loom.transform.storage_rewrite import StorageRewrite, storage_rewrite

A = loom.decl_buffer((16,), "float32", name="A")
Y = loom.decl_buffer((16,), "float32", name="Y")


def func(body):
    return PrimFunc([A.data, Y.data], body, buffer_map={A.data: A, Y.data: Y})


def temp(name, n=4, dtype="float32", scope="global"):
    return loom.decl_buffer((n,), dtype, name=name, scope=scope)


def alloc(buf, body, n=None):
    return Allocate(buf.data, buf.dtype, [n or int(buf.shape[0])], True, body, buf.scope or "global")


def copy_loop(dst, src, n=4, offset=0):
    i = loom.var("i")
    at = lambda b: i + offset if b in (A, Y) else i  # noqa: E731 - params take the offset, temporaries not
    return For(i, 0, n, "serial", BufferStore(dst, src[at(src)] + 1.0, [at(dst)]))


def allocs(s):
    return collect(s, lambda x: isinstance(x, Allocate))


def results(f):
    a = np.arange(16, dtype="float32")
    y = np.zeros(16, dtype="float32")
    evaluate(f, a, y)
    return y


def assert_same(before, after):
    loom.verify_well_formed(after)
    np.testing.assert_array_equal(results(after), results(before))


def test_siblings_share_memory():
    T1, T2 = temp("T1"), temp("T2")
    body = seq(alloc(T1, seq(copy_loop(T1, A), copy_loop(Y, T1))),
               alloc(T2, seq(copy_loop(T2, A, offset=4), copy_loop(Y, T2, offset=4))))
    after = storage_rewrite(body)
    T2_in_T1 = loom.decl_buffer((4,), "float32", name="T2", data=T1.data, scope="global")
    i1, i2, i3, i4 = (loom.var("i") for _ in range(4))
    expected = Allocate(T1.data, "float32", [4], True, seq(
        For(i1, 0, 4, "serial", BufferStore(T1, A[i1] + 1.0, [i1])),
        For(i2, 0, 4, "serial", BufferStore(Y, T1[i2] + 1.0, [i2])),
        For(i3, 0, 4, "serial", BufferStore(T2_in_T1, A[i3 + 4] + 1.0, [i3])),
        For(i4, 0, 4, "serial", BufferStore(Y, T2_in_T1[i4] + 1.0, [i4 + 4]))))
    loom.assert_structural_equal(after, expected, map_free_vars=True)
    assert_same(func(body), func(after))


def test_dead_buffer_in_a_chain_is_reused():
    """T2 is written in place over T1 (T1[i] is read just before T2[i] is written); T3 has
    another shape, so it gets memory of its own."""
    T1, T2, T3 = temp("T1"), temp("T2"), temp("T3", 6)
    body = alloc(T1, seq(copy_loop(T1, A),
                         alloc(T2, seq(copy_loop(T2, T1),
                                       alloc(T3, seq(copy_loop(T3, T2), copy_loop(Y, T3)), 6)))))
    after = storage_rewrite(body)
    found = allocs(after)
    assert sorted(a.buffer_var.name for a in found) == ["T1", "T3"]
    stores = collect(after, lambda x: isinstance(x, BufferStore) and x.buffer.name == "T2")
    assert stores and all(st.buffer.data is T1.data for st in stores)
    assert_same(func(body), func(after))


def test_memory_grows_to_its_largest_occupant():
    """T1 is dead before T3 is first written, so T3 takes T1's memory, grown to 6."""
    T1, T2, T3 = temp("T1"), temp("T2"), temp("T3", 6)
    i = loom.var("i")
    reverse = For(i, 0, 4, "serial", BufferStore(T2, T1[3 - i] * 2.0, [i]))  # not elementwise: no in place
    body = alloc(T1, seq(copy_loop(T1, A),
                         alloc(T2, seq(reverse, alloc(T3, seq(copy_loop(T3, T2), copy_loop(Y, T3)), 6)))))
    after = storage_rewrite(body)
    found = allocs(after)
    assert len(found) == 2
    merged = next(a for a in found if a.buffer_var is T1.data)
    assert [int(e) for e in merged.extents] == [6]
    assert_same(func(body), func(after))


def test_overlapping_lifetimes_do_not_share():
    T1, T2 = temp("T1"), temp("T2")
    i = loom.var("i")
    both = For(i, 0, 4, "serial", BufferStore(Y, T1[i] + T2[i], [i]))
    body = alloc(T1, seq(copy_loop(T1, A), alloc(T2, seq(copy_loop(T2, A), both))))
    after = storage_rewrite(body)
    assert len(allocs(after)) == 2
    assert_same(func(body), func(after))


@pytest.mark.parametrize("other", [dict(scope="shared"), dict(dtype="int32", scope="local")])
def test_different_scope_or_dtype_in_local_memory_do_not_share(other):
    T1, T2 = temp("T1", scope=other["scope"] if "dtype" in other else "global"), temp("T2", **other)
    i = loom.var("i")
    second = For(i, 0, 4, "serial", BufferStore(T2, loom.const(1, T2.dtype), [i]))
    body = seq(alloc(T1, seq(copy_loop(T1, A), copy_loop(Y, T1))), alloc(T2, second))
    assert len(allocs(storage_rewrite(body))) == 2


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_other_dtypes_share_by_bytes(target):
    """float32 memory of 4 elements holds 6 int16 (12 bytes); 20 int8 grow it to 5 elements."""
    T1, T2, T3 = temp("T1"), temp("T2", 6, "int16"), temp("T3", 20, "int8")
    i, j, k, l, p, q = (loom.var(v) for v in "ijklpq")
    body = seq(
        alloc(T1, seq(For(i, 0, 4, "serial", BufferStore(T1, A[i] * 2.0, [i])),
                      For(j, 0, 4, "serial", BufferStore(Y, T1[3 - j], [j])))),
        alloc(T2, seq(For(k, 0, 6, "serial", BufferStore(T2, loom.cast(A[k], "int16") * 3, [k])),
                      For(l, 0, 6, "serial", BufferStore(Y, loom.cast(T2[5 - l], "float32"), [l + 4])))),
        alloc(T3, seq(For(p, 0, 6, "serial", BufferStore(T3, loom.cast(A[p], "int8") - 1, [p + 14])),
                      For(q, 0, 6, "serial", BufferStore(Y, loom.cast(T3[19 - q], "float32"), [q + 10])))))
    after = storage_rewrite(body)
    (merged,) = allocs(after)
    assert merged.dtype == "float32" and [int(e) for e in merged.extents] == [5]
    a = np.arange(16, dtype="float32")
    want = np.zeros(16, "float32")
    evaluate(func(body), a, want)
    np.testing.assert_array_equal(want[:16], np.concatenate([a[3::-1] * 2, a[5::-1] * 3, a[5::-1] - 1]))
    f = loom.build(PrimFunc([A.data, Y.data], after, buffer_map={A.data: A, Y.data: Y},
                            attrs={"global_symbol": "f"}), target=target)
    got = np.zeros(16, "float32")
    f(a, got)
    np.testing.assert_array_equal(got, want)


def test_allocation_is_hoisted_out_of_a_serial_loop():
    T = temp("T")
    o = loom.var("o")
    body = For(o, 0, 3, "serial", alloc(T, seq(copy_loop(T, A), copy_loop(Y, T))))
    after = storage_rewrite(body)
    assert isinstance(after, Allocate) and isinstance(after.body, For)
    assert_same(func(body), func(after))


@pytest.mark.parametrize("kind", ["parallel", "vectorized"])
def test_allocation_stays_inside_loops_with_private_iterations(kind):
    T = temp("T", 1)
    o = loom.var("o")
    body = For(o, 0, 4, kind, alloc(T, seq(BufferStore(T, A[o], [0]), BufferStore(Y, T[0], [o]))))
    after = storage_rewrite(body)
    assert isinstance(after, For) and isinstance(after.body, Allocate)


def test_allocation_stays_inside_a_thread_region():
    T = temp("T", 1, scope="local")
    tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
    o = loom.var("o")
    inner = For(o, 0, 2, "serial", alloc(T, seq(BufferStore(T, A[tx.var], [0]), BufferStore(Y, T[0], [tx.var]))))
    body = AttrStmt(tx, "thread_extent", 4, inner)
    after = storage_rewrite(body)
    assert isinstance(after, AttrStmt) and isinstance(after.body, Allocate)  # hoisted to the thread scope only
    assert_same(func(body), func(after))


def test_escaping_pointer_is_never_shared():
    T1, T2 = temp("T1"), temp("T2")
    leak = Evaluate(loom.call_extern("int32", "keep", T1.data))
    body = seq(alloc(T1, seq(copy_loop(T1, A), leak)), alloc(T2, seq(copy_loop(T2, A), copy_loop(Y, T2))))
    assert len(allocs(storage_rewrite(body))) == 2


def test_symbolic_allocation_inside_a_loop_stays_in_place():
    """Hoisting it out of the loop would allocate even when the loop runs no iteration."""
    n = loom.var("n")
    T = loom.decl_buffer((n,), "float32", name="T")
    o = loom.var("o")
    body = For(o, 0, 2, "serial", Allocate(T.data, "float32", [n], True, BufferStore(T, A[0], [0])))
    assert storage_rewrite(body) is body


def test_symbolic_allocations_share_memory():
    """Two allocations of n floats at the top of the scope, one dead before the other starts."""
    n = loom.var("n")
    T1, T2 = loom.decl_buffer((n,), "float32", name="T1"), loom.decl_buffer((n * 2,), "float32", name="T2")
    i, j, k = loom.var("i"), loom.var("j"), loom.var("k")
    body = seq(Allocate(T1.data, "float32", [n], True, seq(
                   For(i, 0, n, "serial", BufferStore(T1, A[i], [i])),
                   For(j, 0, n, "serial", BufferStore(Y, T1[n - 1 - j], [j])))),
               Allocate(T2.data, "float32", [n * 2], True,
                        For(k, 0, n, "serial", BufferStore(T2, A[k] * 2.0, [k + n]))))
    after = storage_rewrite(body)
    (merged,) = allocs(after)
    assert str(merged.extents[0]) == "max(int64(n), int64(n * 2))"  # n is free: it may be negative; counts in int64
    f = lambda b: PrimFunc([A.data, Y.data, n], b, buffer_map={A.data: A, Y.data: Y})  # noqa: E731
    a, y1, y2 = np.arange(16, dtype="float32"), np.zeros(16, "float32"), np.zeros(16, "float32")
    evaluate(f(body), a, y1, 5)
    evaluate(f(after), a, y2, 5)
    np.testing.assert_array_equal(y1, y2)


@pytest.mark.parametrize("seed", range(60))
def test_random_programs_unchanged(seed):
    f, make_args = random_func(seed)
    after = StorageRewrite()(f)
    loom.verify_well_formed(after)
    assert_same_result(f, after, make_args)


def test_scheduled_chain_through_the_driver():
    """X -> T1 -> T2 -> T3 -> Z: T1 is dead once T2 is made, so T3 lives in T1's memory."""
    from loom import te
    from loom.driver import build, lower

    X = te.placeholder((8,), name="X")
    T1 = te.compute((8,), lambda i: X[i] + 1.0, name="T1")
    T2 = te.compute((8,), lambda i: T1[7 - i] * 2.0, name="T2")
    T3 = te.compute((8,), lambda i: T2[7 - i] - 3.0, name="T3")
    Z = te.compute((8,), lambda i: T3[i] * T3[7 - i], name="Z")
    s = te.create_schedule(Z.op)
    body = lower(s, [X, Z])["default_function"].body
    assert len(allocs(body)) == 2
    x, z = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    build(s, [X, Z], target="interp")(x, z)
    t3 = (x + 1) * 2 - 3
    np.testing.assert_array_equal(z, t3 * t3[::-1])
