"""StorageRewrite's finer liveness (per allocation level) and its in-place rule, against the interpreter."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import loom
from loom.ir import Allocate, BufferStore, For, IfThenElse, PrimFunc, collect, seq
from loom.testing import evaluate
from loom.transform.storage_inplace import writes_in_place
from loom.transform.storage_rewrite import storage_rewrite

N = 8
A = loom.decl_buffer((N,), "float32", name="A")
Y = loom.decl_buffer((N,), "float32", name="Y")


def temp(name, n=N):
    return loom.decl_buffer((n,), "float32", name=name)


def alloc(buf, body):
    return Allocate(buf.data, buf.dtype, list(buf.shape), True, body, "global")


def run(body, a=None):
    f = PrimFunc([A.data, Y.data], body, buffer_map={A.data: A, Y.data: Y})
    loom.verify_well_formed(f)
    a = np.arange(N, dtype="float32") * 1.5 + 1 if a is None else a
    y = np.zeros(N, "float32")
    evaluate(f, a, y)
    return y


def n_allocs(s):
    return len(collect(s, lambda x: isinstance(x, Allocate)))


def loop(n, fn, kind="serial"):
    i = loom.var("i")
    return For(i, 0, n, kind, fn(i))


# -- the in-place rule ----------------------------------------------------------------------------------

def test_elementwise_store_is_in_place():
    X, Z = temp("X"), temp("Z")
    assert writes_in_place(loop(N, lambda i: BufferStore(Z, X[i] * X[i] + A[i], [i])), X.data, Z.data)


def test_split_main_loop_and_tail_are_in_place():
    """Two stores (a vector main loop and its scalar tail) write disjoint ranges."""
    X, Z = temp("X", 11), temp("Z", 11)
    o = loom.var("o")
    main = For(o, 0, 1, "serial", BufferStore(Z, X[loom.ir.Ramp(o * 8, 1, 8)] + 1.0, [loom.ir.Ramp(o * 8, 1, 8)]))
    tail = loop(3, lambda i: BufferStore(Z, X[8 + i] + 1.0, [8 + i]))
    assert writes_in_place(seq(main, tail), X.data, Z.data)
    overlapping = loop(3, lambda i: BufferStore(Z, X[7 + i] + 1.0, [7 + i]))
    assert not writes_in_place(seq(main, overlapping), X.data, Z.data)


def test_not_in_place():
    X, Z = temp("X"), temp("Z")
    cases = {
        "reads another element": loop(N, lambda i: BufferStore(Z, X[N - 1 - i], [i])),
        "also reads a fixed element": loop(N, lambda i: BufferStore(Z, X[i] + X[0], [i])),
        "writes an element twice": loop(2, lambda r: loop(N, lambda i: BufferStore(Z, X[i] * 2.0, [i]))),
        "reads what it writes": loop(N, lambda i: BufferStore(Z, Z[i] + X[i], [i])),
        "src read by another statement": seq(loop(N, lambda i: BufferStore(Z, X[i], [i])),
                                             loop(N, lambda i: BufferStore(Y, X[i], [i]))),
        "src read in the index": loop(N, lambda i: BufferStore(Z, X[i], [loom.cast(X[i], "int32") % N])),
        "index not affine": loop(N, lambda i: BufferStore(Z, X[(i * i) % N], [(i * i) % N])),
    }
    for why, unit in cases.items():
        assert not writes_in_place(unit, X.data, Z.data), why


def test_in_place_chain_leaves_one_allocation():
    T1, T2, T3 = temp("T1"), temp("T2"), temp("T3")
    body = alloc(T1, seq(loop(N, lambda i: BufferStore(T1, A[i] + 1.0, [i])),
                         alloc(T2, seq(loop(N, lambda i: BufferStore(T2, T1[i] * 2.0, [i])),
                                       alloc(T3, seq(loop(N, lambda i: BufferStore(T3, T2[i] - 3.0, [i])),
                                                     loop(N, lambda i: BufferStore(Y, T3[i], [i]))))))))
    after = storage_rewrite(body)
    assert n_allocs(after) == 1
    np.testing.assert_array_equal(run(after), run(body))


# -- liveness at the allocation's level ----------------------------------------------------------------

def test_buffers_of_sibling_inner_loops_share():
    """Both are allocated per outer iteration and used in sibling inner loops."""
    T1, T2 = temp("T1", 4), temp("T2", 4)
    body = loop(2, lambda o: seq(
        alloc(T1, seq(loop(4, lambda i: BufferStore(T1, A[o * 4 + i], [i])),
                      loop(4, lambda i: BufferStore(Y, T1[3 - i], [o * 4 + i])))),
        alloc(T2, seq(loop(4, lambda i: BufferStore(T2, Y[o * 4 + i] * 2.0, [i])),
                      loop(4, lambda i: BufferStore(Y, T2[3 - i] + 1.0, [o * 4 + i]))))))
    after = storage_rewrite(body)
    assert n_allocs(after) == 1 and isinstance(after, Allocate)
    np.testing.assert_array_equal(run(after), run(body))


def test_buffers_of_two_branches_share():
    T1, T2 = temp("T1"), temp("T2")
    reverse = lambda T: loop(N, lambda i: BufferStore(Y, T[N - 1 - i], [i]))  # noqa: E731
    then = alloc(T1, seq(loop(N, lambda i: BufferStore(T1, A[i], [i])), reverse(T1)))
    other = alloc(T2, seq(loop(N, lambda i: BufferStore(T2, A[i] * 3.0, [i])), reverse(T2)))
    body = loop(2, lambda o: IfThenElse(o == 0, then, other))
    after = storage_rewrite(body)
    assert n_allocs(after) == 1
    np.testing.assert_array_equal(run(after), run(body))


def test_buffer_live_across_a_loop_does_not_share_with_one_inside():
    """T1 is allocated outside the loop and read on every iteration: T2, inside, needs its own memory."""
    T1, T2 = temp("T1"), temp("T2")
    body = alloc(T1, seq(
        loop(N, lambda i: BufferStore(T1, A[i], [i])),
        loop(2, lambda o: alloc(T2, seq(loop(N, lambda i: BufferStore(T2, T1[N - 1 - i] + o, [i])),
                                        loop(N, lambda i: BufferStore(Y, Y[i] + T2[i], [i])))))))
    after = storage_rewrite(body)
    assert n_allocs(after) == 2
    np.testing.assert_array_equal(run(after), run(body))


# -- soundness: random chains of stages keep their results ---------------------------------------------

READS = {  # how a stage reads its producer at loop variable i
    "same": lambda T, i: T[i],
    "reversed": lambda T, i: T[N - 1 - i],
    "shifted": lambda T, i: T[loom.min(i + 1, N - 1)],
    "plus first": lambda T, i: T[i] + T[0],
    "pairs": lambda T, i: T[i // 2 * 2],
}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(READS)), st.integers(1, 2)), min_size=2, max_size=5))
def test_random_chains_keep_their_results(stages):
    """Each stage reads its producer in one of several ways, some stages twice over (a repeated loop):
    whatever memory the planner shares, the values are those of the program without sharing."""
    bufs = [temp(f"T{k}") for k in range(len(stages))]

    def stage(k, prev):
        how, repeat = stages[k]
        store = lambda i: BufferStore(bufs[k], READS[how](prev, i) * 0.5 + k, [i])  # noqa: E731
        return loop(repeat, lambda r: loop(N, store)) if repeat > 1 else loop(N, store)

    body = loop(N, lambda i: BufferStore(Y, bufs[-1][i], [i]))
    for k in reversed(range(len(stages))):
        body = alloc(bufs[k], seq(stage(k, bufs[k - 1] if k else A), body))
    after = storage_rewrite(body)
    np.testing.assert_array_equal(run(after), run(body))


def test_in_place_in_shared_memory_gets_its_barrier():
    """S2 is written over S1, which other threads read just before: with the memory shared,
    ThreadSync (after StorageRewrite) puts a barrier between that read and the write."""
    from loom.ir import AttrStmt, IterVar

    S1, S2 = (loom.decl_buffer((N,), "float32", name=k, scope="shared") for k in ("S1", "S2"))
    tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
    t = tx.var
    body = AttrStmt(tx, "thread_extent", N, Allocate(S1.data, "float32", [N], True, seq(
        BufferStore(S1, A[t], [t]),
        BufferStore(Y, S1[N - 1 - t], [t]),  # thread t reads S1[N-1-t] ...
        Allocate(S2.data, "float32", [N], True, seq(
            BufferStore(S2, S1[t] * 2.0, [t]),  # ... which thread N-1-t overwrites here
            BufferStore(Y, Y[t] + S2[N - 1 - t], [t])), "shared")), "shared"))
    f = PrimFunc([A.data, Y.data], body, buffer_map={A.data: A, Y.data: Y}, attrs={"global_symbol": "k"})
    mod = loom.build(f, target="interp")
    lowered = str(mod.get_source())
    assert "S2 = allocate" not in lowered and lowered.count("tvm_storage_sync") == 3
    a, y = np.arange(N, dtype="float32"), np.zeros(N, "float32")
    mod(a, y)
    np.testing.assert_array_equal(y, 3 * a[::-1])
