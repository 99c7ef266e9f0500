"""GPU semantics of the interpreter: launch regions, barriers, shared/local memory, race detection."""

import numpy as np
import pytest

import loom
from loom.ir import BufferStore, For, IfThenElse, seq
from loom.ir import expr as E
from loom.testing import BarrierError, InterpreterError, Interpreter, RaceError, evaluate
from loom.transform.thread_sync import ThreadSync

from interp_helpers import alloc, axis, barrier, launch, prim, tiled_matmul

N = 8
A = loom.decl_buffer((N,), "float32", name="A")
Y = loom.decl_buffer((N,), "float32", name="Y")
S = loom.decl_buffer((N,), "float32", name="S", scope="shared")


def kernel(body_of, extent=N, name="kern"):
    """One block of ``extent`` threads around ``Allocate S (shared)``; ``body_of(tx)`` is the thread body."""
    tx = axis("threadIdx.x")
    return prim(launch(tx, extent, alloc(S, body_of(tx.var))), A, Y, name=name)


def run(f, a=None):
    a = np.arange(N, dtype="float32") if a is None else a
    y = np.zeros(N, "float32")
    evaluate(f, a, y)
    return y


# -- the tiled matmul ----------------------------------------------------------------------------


@pytest.mark.parametrize("n, m, k", [(32, 32, 32), (20, 18, 13)])
def test_tiled_matmul_with_thread_sync_matches_numpy(n, m, k):
    mod = ThreadSync("shared")(tiled_matmul(n, m, k))
    assert "tvm_storage_sync" in str(mod)
    rng = np.random.default_rng(0)
    a, b = rng.random((n, k), dtype="float32"), rng.random((k, m), dtype="float32")
    c = np.zeros((n, m), "float32")
    evaluate(mod, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_tiled_matmul_without_barriers_races():
    mod = tiled_matmul(32, 32, 32)
    a, b, c = np.ones((32, 32), "float32"), np.ones((32, 32), "float32"), np.zeros((32, 32), "float32")
    with pytest.raises(RaceError, match=r"race on shared memory (A|B)\.shared") as info:
        evaluate(mod, a, b, c)
    assert "threadIdx.x=" in str(info.value) and "blockIdx.y=0" in str(info.value)
    assert isinstance(info.value, loom.LoomError)


def test_interpreter_runs_a_launch_again():
    f = Interpreter(ThreadSync("shared")(tiled_matmul(16, 16, 16)))
    for seed in range(2):
        a = np.random.default_rng(seed).random((16, 16), dtype="float32")
        c = np.zeros((16, 16), "float32")
        f(a, a, c)
        np.testing.assert_allclose(c, a @ a, rtol=1e-5)


# -- barriers ------------------------------------------------------------------------------------


def test_shared_reversal_with_a_barrier():
    f = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]), barrier(), BufferStore(Y, S[N - 1 - tx], [tx])))
    assert run(f).tolist() == list(range(N))[::-1]


def test_shared_reversal_without_a_barrier_races():
    f = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]), BufferStore(Y, S[N - 1 - tx], [tx])))
    with pytest.raises(RaceError, match=r"kern: read/write race on shared memory S, element \d+ \(S\[\d+\]\)"):
        run(f)


def test_warp_barrier_syncs_like_shared():
    f = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]), barrier("warp"), BufferStore(Y, S[N - 1 - tx], [tx])))
    assert run(f).tolist() == list(range(N))[::-1]


def _stride(k):
    """8, 4, 2, 1 for k = 0..3."""
    c = loom.const
    return E.Select(k == 0, c(8), E.Select(k == 1, c(4), E.Select(k == 2, c(2), c(1))))


def test_block_tree_reduction_with_barriers_in_a_loop():
    """Two blocks of 16 threads each sum their 16 inputs; the halving steps are a loop with a barrier."""
    X = loom.decl_buffer((32,), "float32", name="X")
    R = loom.decl_buffer((2,), "float32", name="R")
    T = loom.decl_buffer((16,), "float32", name="T", scope="shared")
    bx, tx = axis("blockIdx.x"), axis("threadIdx.x")
    b, t, k = bx.var, tx.var, loom.var("k")
    step = For(k, 0, 4, "serial", seq(
        IfThenElse(t < _stride(k), BufferStore(T, T[t] + T[t + _stride(k)], [t])), barrier()))
    body = seq(BufferStore(T, X[b * 16 + t], [t]), barrier(), step,
               IfThenElse(t == 0, BufferStore(R, T[0], [b])))
    f = prim(launch(bx, 2, launch(tx, 16, alloc(T, body))), X, R, name="reduce")
    x, r = np.arange(32, dtype="float32"), np.zeros(2, "float32")
    evaluate(f, x, r)
    assert r.tolist() == [x[:16].sum(), x[16:].sum()]


def test_barrier_under_a_thread_condition_deadlocks():
    f = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]),
                              IfThenElse(tx < 4, barrier()), BufferStore(Y, S[tx], [tx])))
    with pytest.raises(BarrierError, match=r"kern: deadlock at barrier #0 .*'shared'.*4 threads \(threadIdx.x=4\)"):
        run(f)


def test_threads_at_different_barriers_diverge():
    f = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]),
                              IfThenElse(tx < 4, barrier(), barrier()), BufferStore(Y, S[tx], [tx])))
    with pytest.raises(BarrierError, match=r"kern: barrier divergence in the only block: 4 threads .* wait at "
                                           r"barrier #0 .*; 4 threads .*threadIdx.x=4.* wait at barrier #1"):
        run(f)


def test_barrier_outside_a_launch_is_a_no_op():
    i = loom.var("i")
    f = prim(For(i, 0, N, "serial", seq(BufferStore(Y, A[i], [i]), barrier())), A, Y)
    assert run(f).tolist() == list(range(N))


# -- launch extents and guards ---------------------------------------------------------------------


def test_threads_beyond_an_attrs_extent_skip_its_body():
    """Launch extent 8 (the max); the outer attr covers 6 threads, a nested attr of the same tag only 3."""
    Z = loom.decl_buffer((N,), "float32", name="Z")
    tx, inner = axis("threadIdx.x"), axis("threadIdx.x")
    body = seq(BufferStore(Y, loom.const(1.0), [tx.var]),
               launch(inner, 3, BufferStore(Z, loom.const(2.0), [inner.var])))
    other = axis("threadIdx.x")
    f = prim(seq(launch(tx, 6, body), launch(other, 8, BufferStore(Z, Z[other.var] + 10.0, [other.var]))), Y, Z)
    y, z = np.zeros(N, "float32"), np.zeros(N, "float32")
    evaluate(f, y, z)
    assert y.tolist() == [1] * 6 + [0] * 2
    assert z.tolist() == [12] * 3 + [10] * 5


def test_a_launch_extent_must_be_known_at_entry():
    bx, tx, i = axis("blockIdx.x"), axis("threadIdx.x"), loom.var("i")
    body = For(i, 1, 3, "serial", launch(tx, i, BufferStore(Y, loom.const(1.0), [tx.var])))
    with pytest.raises(InterpreterError, match=r"the extent i of threadIdx.x uses i, which is not bound where the "
                                               "launch begins"):
        Interpreter(prim(launch(bx, 2, body), Y))


def test_symbolic_extents_from_parameters():
    n = loom.var("n")
    P = loom.decl_buffer((n,), "float32", name="P")
    bx, tx = axis("blockIdx.x"), axis("threadIdx.x")
    idx = bx.var * 4 + tx.var
    f = prim(launch(bx, (n + 3) // 4, launch(tx, 4, IfThenElse(idx < n, BufferStore(P, P[idx] * 2.0, [idx])))),
             P, n)
    p = np.arange(10, dtype="float32")
    evaluate(f, p, 10)
    assert p.tolist() == [2.0 * v for v in range(10)]


def test_vthread_still_loops():
    vt, tx = axis("vthread"), axis("threadIdx.x")
    W = loom.decl_buffer((2, 4), "float32", name="W")
    f = prim(launch(tx, 4, launch(vt, 2, BufferStore(W, loom.cast(vt.var * 10 + tx.var, "float32"),
                                                    [vt.var, tx.var]))), W)
    w = np.zeros((2, 4), "float32")
    evaluate(f, w)
    assert w.tolist() == [[0, 1, 2, 3], [10, 11, 12, 13]]


# -- memory scopes ---------------------------------------------------------------------------------


def test_shared_memory_is_per_block_and_starts_as_garbage():
    """Block 0 fills S; block 1 reads S without writing it: it sees garbage (NaN), never block 0's data."""
    A2 = loom.decl_buffer((2 * N,), "float32", name="A2")
    Y2 = loom.decl_buffer((2 * N,), "float32", name="Y2")
    bx, tx = axis("blockIdx.x"), axis("threadIdx.x")
    g = bx.var * N + tx.var
    body = seq(IfThenElse(bx.var == 0, BufferStore(S, A2[g], [tx.var])), barrier(), BufferStore(Y2, S[tx.var], [g]))
    f = prim(launch(bx, 2, launch(tx, N, alloc(S, body))), A2, Y2)
    a, y = np.arange(2 * N, dtype="float32") + 1, np.zeros(2 * N, "float32")
    evaluate(f, a, y)
    assert y[:N].tolist() == a[:N].tolist() and np.isnan(y[N:]).all()


def test_local_memory_is_per_thread():
    L = loom.decl_buffer((1,), "float32", name="L", scope="local")
    f = kernel(lambda tx: alloc(L, seq(BufferStore(L, A[tx], [0]), barrier(), BufferStore(Y, L[0], [tx]))))
    assert run(f).tolist() == list(range(N))


def test_shared_allocation_in_a_loop_keeps_its_memory():
    """Executed again in the next iteration, a shared Allocate gives the block the same (unrefilled) memory."""
    k = loom.var("k")

    def body(tx):
        it = seq(IfThenElse(k == 0, BufferStore(S, A[tx] * 3.0, [tx])), barrier(),
                 IfThenElse(k == 1, BufferStore(Y, S[N - 1 - tx], [tx])), barrier())
        return For(k, 0, 2, "serial", alloc(S, it))

    tx = axis("threadIdx.x")
    f = prim(launch(tx, N, body(tx.var)), A, Y)
    assert run(f).tolist() == [3.0 * v for v in range(N)][::-1]


def test_global_barrier_orders_blocks():
    """Each block writes its half of G; after a global barrier each block reads the other block's half."""
    A2 = loom.decl_buffer((2 * N,), "float32", name="A2")
    G = loom.decl_buffer((2 * N,), "float32", name="G")
    Z = loom.decl_buffer((2 * N,), "float32", name="Z")
    bx, tx = axis("blockIdx.x"), axis("threadIdx.x")
    g = bx.var * N + tx.var
    other = (1 - bx.var) * N + tx.var
    body = seq(BufferStore(G, A2[g] * 2.0, [g]), barrier("global"), BufferStore(Z, G[other], [g]))
    f = prim(launch(bx, 2, launch(tx, N, body)), A2, G, Z)
    a, gm, z = np.arange(2 * N, dtype="float32"), np.zeros(2 * N, "float32"), np.zeros(2 * N, "float32")
    evaluate(f, a, gm, z)
    assert z.tolist() == np.roll(a * 2, N).tolist()


def test_global_barrier_one_block_skips_deadlocks():
    bx, tx = axis("blockIdx.x"), axis("threadIdx.x")
    body = seq(IfThenElse(bx.var == 0, barrier("global")), BufferStore(Y, loom.const(1.0), [tx.var]))
    f = prim(launch(bx, 2, launch(tx, 4, body)), Y)
    with pytest.raises(BarrierError, match=r"deadlock at barrier #0 .*'global'.*block \(blockIdx.x=1\)"):
        evaluate(f, np.zeros(N, "float32"))


def test_shared_barriers_inside_a_launch_with_a_global_barrier():
    A2 = loom.decl_buffer((2 * N,), "float32", name="A2")
    Y2 = loom.decl_buffer((2 * N,), "float32", name="Y2")
    bx, tx = axis("blockIdx.x"), axis("threadIdx.x")
    g, t = bx.var * N + tx.var, tx.var
    body = seq(BufferStore(S, A2[g], [t]), barrier(), BufferStore(Y2, S[N - 1 - t], [g]), barrier("global"))
    f = prim(launch(bx, 2, launch(tx, N, alloc(S, body))), A2, Y2)
    a, y = np.arange(2 * N, dtype="float32"), np.zeros(2 * N, "float32")
    evaluate(f, a, y)
    assert y.tolist() == a[:N][::-1].tolist() + a[N:][::-1].tolist()


# -- races -----------------------------------------------------------------------------------------


def test_write_write_race():
    f = kernel(lambda tx: BufferStore(S, loom.cast(tx, "float32"), [0]), extent=2)
    with pytest.raises(RaceError, match=r"write/write race on shared memory S, element 0 \(S\[0\]\), in the only "
                                        r"block: thread \(threadIdx.x=1\) writes it after thread \(threadIdx.x=0\) "
                                        "wrote it"):
        run(f)


def test_read_write_race_read_first():
    f = kernel(lambda tx: IfThenElse(tx == 0, BufferStore(Y, S[1], [0]), BufferStore(S, A[tx], [tx])), extent=2)
    with pytest.raises(RaceError, match=r"read/write race .* thread \(threadIdx.x=1\) writes it after thread "
                                        r"\(threadIdx.x=0\) read it"):
        run(f)


def test_read_write_race_write_first():
    f = kernel(lambda tx: IfThenElse(tx == 0, BufferStore(S, A[tx], [1]), BufferStore(Y, S[1], [tx])), extent=2)
    with pytest.raises(RaceError, match=r"read/write race .* thread \(threadIdx.x=1\) reads it after thread "
                                        r"\(threadIdx.x=0\) wrote it"):
        run(f)


def test_threads_touching_only_their_own_elements_do_not_race():
    f = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]), BufferStore(S, S[tx] * 2.0, [tx]),
                              BufferStore(Y, S[tx], [tx])))
    assert run(f).tolist() == [2.0 * v for v in range(N)]


def test_many_readers_then_one_writer_races():
    f = kernel(lambda tx: seq(BufferStore(Y, S[0], [tx]), barrier(), BufferStore(Y, S[0], [tx]),
                              IfThenElse(tx == 2, BufferStore(S, A[0], [0]))), extent=4)
    with pytest.raises(RaceError, match=r"thread \(threadIdx.x=2\) writes it after thread \(threadIdx.x=[01]\) read"):
        run(f)


def test_vector_accesses_track_every_lane():
    ramp = E.Ramp(loom.const(0), loom.const(1), 4)
    f = kernel(lambda tx: IfThenElse(tx == 0, BufferStore(S, E.Broadcast(loom.const(1.0), 4), [ramp]),
                                     BufferStore(Y, S[3], [tx])), extent=2)
    with pytest.raises(RaceError, match=r"element 3 .*threadIdx.x=1\) reads it after thread \(threadIdx.x=0\) wrote"):
        run(f)


def test_races_in_two_dimensional_blocks_name_both_coordinates():
    T = loom.decl_buffer((2, 2), "float32", name="T", scope="shared")
    tx, ty = axis("threadIdx.x"), axis("threadIdx.y")
    f = prim(launch(ty, 2, launch(tx, 2, alloc(T, IfThenElse(tx.var == 1, BufferStore(T, loom.const(1.0), [0, tx.var]))))), Y)
    with pytest.raises(RaceError, match=r"element 1 \(T\[0, 1\]\).*\(threadIdx.x=1, threadIdx.y=1\) writes it "
                                        r"after thread \(threadIdx.x=1, threadIdx.y=0\) wrote"):
        evaluate(f, np.zeros(N, "float32"))


def test_errors_in_a_thread_propagate():
    f = kernel(lambda tx: seq(BufferStore(S, A[tx], [tx]), barrier(), BufferStore(Y, S[tx + 1], [tx])))
    with pytest.raises(loom.testing.OutOfBoundsError):
        run(f)
