"""``loom.scan`` (issue 15, item 7): recurrences over a time axis, run on every target against numpy.

The programs follow TVM's scan tutorial (cumulative sum, a multi-stage cell, two
states) and its scan unit tests; each is built for the interpreter (the oracle),
llvm and C and compared with a numpy loop.
"""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.ir.producer import ProducerRealize, ProducerStore
from loom.ir.stmt import For
from loom.te._te_functor import te_collect
from loom.te.bound import infer_bound
from loom.te.scan import ScanOp, scan
from loom.te.schedule_ops import schedule_to_stmt

TARGETS = ["interp", "llvm", "c"]


def _rand(shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(dtype)


def _run(s, args, target, *arrays):
    """Build ``s`` for ``target``, call it on copies of ``arrays`` and return them."""
    f = loom.build(s, args, target=target)
    out = [np.array(a, copy=True) for a in arrays]
    f(*out)
    return out


def _cumsum(m, n):
    X = loom.placeholder((m, n), name="X")
    state = loom.placeholder((m, n), name="state")
    init = loom.compute((1, n), lambda _, i: X[0, i], name="init")
    update = loom.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    return X, init, update, scan(init, update, state, inputs=[X], name="cumsum")


@pytest.mark.parametrize("target", TARGETS)
def test_cumulative_sum(target):
    X, _, _, S = _cumsum(9, 13)
    x = _rand((9, 13))
    _, out = _run(loom.create_schedule(S.op), [X, S], target, x, np.zeros_like(x))
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("index", ["int32", "int64"])
def test_symbolic_shapes_run_at_any_size(target, index):
    """The tutorial's ``s_state[t-1, i] + X[t, i]`` with symbolic ``m`` and ``n``: one build, several sizes."""
    X, _, _, S = _cumsum(loom.var("m", index), loom.var("n"))
    assert str(S.op.scan_axis.var.dtype) == index
    f = loom.build(loom.create_schedule(S.op), [X, S], target=target)
    for m, n in ((1, 4), (2, 1), (7, 5)):
        x = _rand((m, n), seed=m)
        out = np.full((m, n), np.nan, "float32")
        f(x, out)
        np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_the_tutorials_thread_bound_schedule(target):
    """Init and update split by 256 and bound to blocks and threads; 300 columns leave a partial block."""
    X, init, update, S = _cumsum(6, 300)
    s = loom.create_schedule(S.op)
    bx, tx = loom.thread_axis("blockIdx.x"), loom.thread_axis("threadIdx.x")
    for stage in (init, update):
        xo, xi = s[stage].split(stage.op.axis[1], factor=256)
        s[stage].bind(xo, bx)
        s[stage].bind(xi, tx)
    x = _rand((6, 300))
    _, out = _run(s, [X, S], target, x, np.zeros_like(x))
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_multi_stage_cell(target):
    """The tutorial's two-stage cell: s1 = 2 * state[t-1], s2 = s1 + X, s1 computed per block of s2."""
    m, n = loom.var("m"), loom.var("n")
    X = loom.placeholder((m, n), name="X")
    state = loom.placeholder((m, n), name="state")
    init = loom.compute((1, n), lambda _, i: X[0, i], name="init")
    s1 = loom.compute((m, n), lambda t, i: state[t - 1, i] * 2, name="s1")
    s2 = loom.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    S = scan(init, s2, state, inputs=[X])
    s = loom.create_schedule(S.op)
    xo, _ = s[s2].split(s2.op.axis[1], factor=4)
    s[s1].compute_at(s[s2], xo)
    x = _rand((5, 10))
    _, out = _run(s, [X, S], target, x, np.zeros_like(x))
    ref = x.copy()
    for t in range(1, 5):
        ref[t] = ref[t - 1] * 2 + x[t]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_multiple_states(target):
    """The tutorial's two states of different widths; the second reads the first."""
    m, n, l = loom.var("m"), loom.var("n"), loom.var("l")
    X = loom.placeholder((m, n), name="X")
    st1, st2 = loom.placeholder((m, n), name="st1"), loom.placeholder((m, l), name="st2")
    init1 = loom.compute((1, n), lambda _, i: X[0, i], name="init1")
    init2 = loom.compute((1, l), lambda _, i: 0.0, name="init2")
    upd1 = loom.compute((m, n), lambda t, i: st1[t - 1, i] + X[t, i], name="upd1")
    upd2 = loom.compute((m, l), lambda t, i: st2[t - 1, i] + st1[t - 1, 0], name="upd2")
    S1, S2 = scan([init1, init2], [upd1, upd2], [st1, st2], inputs=[X])
    assert (S1.value_index, S2.value_index) == (0, 1) and S1.op is S2.op
    x = _rand((6, 4))
    _, o1, o2 = _run(loom.create_schedule(S1.op), [X, S1, S2], target, x, np.zeros_like(x),
                     np.zeros((6, 3), "float32"))
    r1 = np.cumsum(x, axis=0)
    r2 = np.zeros((6, 3), "float32")
    for t in range(1, 6):
        r2[t] = r2[t - 1] + r1[t - 1, 0]
    np.testing.assert_allclose(o1, r1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o2, r2, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_an_init_of_two_rows_and_an_update_reading_two_steps_back(target):
    """Fibonacci in int64 per column: rows 0 and 1 from the init, row t from rows t-1 and t-2."""
    n = 3
    F = loom.placeholder((30, n), "int64", name="F")
    init = loom.compute((2, n), lambda r, i: loom.cast(r + i, "int64"), name="init")
    update = loom.compute((30, n), lambda t, i: F[t - 1, i] + F[t - 2, i], name="update")
    S = scan(init, update, F, name="fib")
    assert str(S.op.scan_axis.dom.min) == "2" and str(S.op.scan_axis.dom.extent) == "28"
    (out,) = _run(loom.create_schedule(S.op), [S], target, np.zeros((30, n), "int64"))
    ref = np.zeros((30, n), "int64")
    ref[0], ref[1] = np.arange(n), np.arange(n) + 1
    for t in range(2, 30):
        ref[t] = ref[t - 1] + ref[t - 2]
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("target", TARGETS)
def test_a_placeholder_init_and_a_consumer_of_the_scan(target):
    """An init given as an input is copied into the scan; a compute after the scan reads its last row."""
    I0 = loom.placeholder((1, 5), name="I0")
    state = loom.placeholder((8, 5), name="state")
    update = loom.compute((8, 5), lambda t, i: state[t - 1, i] * 0.5 + 1.0, name="update")
    S = scan(I0, update, state)
    last = loom.compute((5,), lambda i: S[7, i] * 2.0, name="last")
    i0 = _rand((1, 5))
    _, out = _run(loom.create_schedule(last.op), [I0, last], target, i0, np.zeros(5, "float32"))
    ref = i0[0].copy()
    for _ in range(7):
        ref = ref * 0.5 + 1.0
    np.testing.assert_allclose(out, ref * 2.0, rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_an_init_read_by_another_output_is_copied(target):
    X, init, update, S = _cumsum(4, 3)
    both = [S.op, init.op]
    x = _rand((4, 3))
    _, out, first = _run(loom.create_schedule(both), [X, S, init], target, x, np.zeros_like(x),
                         np.zeros((1, 3), "float32"))
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(first, x[:1])


@pytest.mark.parametrize("with_inputs", [False, True])
def test_the_inputs_hint_decides_which_stages_run_per_step(with_inputs):
    """``X2 = X * 2`` runs once at the root, or (with ``inputs=[X]``) one row per step inside the scan."""
    X = loom.placeholder((6, 4), name="X")
    X2 = loom.compute((6, 4), lambda t, i: X[t, i] * 2.0, name="X2")
    state = loom.placeholder((6, 4), name="state")
    init = loom.compute((1, 4), lambda _, i: X[0, i], name="init")
    update = loom.compute((6, 4), lambda t, i: state[t - 1, i] + X2[t, i], name="update")
    S = scan(init, update, state, inputs=[X] if with_inputs else None)
    s = loom.create_schedule(S.op)
    stmt = schedule_to_stmt(s)
    [loop] = [f for f in te_collect(stmt, lambda n: isinstance(n, For)) if f.loop_var.name == "scan.idx"]
    inside = [r.producer.name for r in te_collect(loop, lambda n: isinstance(n, ProducerRealize))]
    assert inside == (["X2"] if with_inputs else [])
    x = _rand((6, 4))
    _, out = _run(s, [X, S], "interp", x, np.zeros_like(x))
    ref = np.cumsum(x * 2.0, axis=0)
    ref -= x[:1]  # row 0 is X itself, not 2 * X
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_lowering_writes_the_scan_outputs_in_place():
    """One realize (the scan's output); the init runs before the loop and the update inside, both into it."""
    X, init, update, S = _cumsum(5, 3)
    stmt = schedule_to_stmt(loom.create_schedule(S.op))
    assert [r.producer for r in te_collect(stmt, lambda n: isinstance(n, ProducerRealize))] == [S]
    stores = te_collect(stmt, lambda n: isinstance(n, ProducerStore))
    assert [st.producer for st in stores] == [S, S]
    [loop] = [f for f in te_collect(stmt, lambda n: isinstance(n, For)) if f.loop_var.name == "cumsum.idx"]
    assert str(loop.extent) == "4" and loop.kind.value == "serial"
    assert stores[1] in te_collect(loop, lambda n: isinstance(n, ProducerStore))
    assert stores[0] not in te_collect(loop, lambda n: isinstance(n, ProducerStore))


def test_an_explicit_compute_at_the_scan_axis_is_the_default():
    X, _, update, S = _cumsum(5, 3)
    default = schedule_to_stmt(loom.create_schedule(S.op))
    s = loom.create_schedule(S.op)
    s[update].compute_at(s[S], S.op.scan_axis)
    loom.assert_structural_equal(schedule_to_stmt(s), default)


@pytest.mark.parametrize("target", TARGETS)
def test_bound_inference_with_a_cache_read_inside_the_step(target):
    """TVM's test_bound_scan: a cached input computed per block of 4 columns of the update."""
    m, n = loom.var("m"), loom.var("n")
    X = loom.compute((m, n), lambda i, j: loom.cast(i * 10 + j, "float32"), name="x")
    state = loom.placeholder((m, n), name="state")
    init = loom.compute((1, n), lambda _, i: X[0, i], name="s_init")
    update = loom.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="s_update")
    S = scan(init, update, state)
    s = loom.create_schedule(S.op)
    XX = s.cache_read(X, "local", update)
    xo, _ = s[update].split(update.op.axis[1], factor=4)
    s[XX].compute_at(s[update], xo)
    bounds = infer_bound(s)
    assert bounds[XX.op.axis[1]].extent.value == 4
    assert bounds[S.op.scan_axis].min.value == 1
    (out,) = _run(s, [S], target, np.zeros((5, 6), "float32"))
    x = np.arange(5)[:, None] * 10.0 + np.arange(6)[None, :]
    np.testing.assert_allclose(out, np.cumsum(x, axis=0))


@pytest.mark.parametrize("target", TARGETS)
def test_inlined_stages_of_the_cell(target):
    """TVM's test_scan_inline2: every intermediate stage of a two-state cell inlined."""
    m, n = loom.var("m"), loom.var("n")
    x = loom.compute((m, n), lambda i, j: loom.const(1, "float32"), name="x")
    st1, st2 = loom.placeholder((m, n), name="st1"), loom.placeholder((m, n), name="st2")
    init1 = loom.compute((1, n), lambda _, i: x[0, i], name="init1")
    init2 = loom.compute((1, n), lambda _, i: x[0, i], name="init2")
    xx = loom.compute((m, n), lambda t, i: st1[t - 1, i] + x[t, i], name="xx")
    x1 = loom.compute((m, n), lambda t, i: xx[t, i] + 1, name="x1")
    x2 = loom.compute((m, n), lambda t, i: xx[t, i] + st2[t - 1, 2], name="x2")
    u1 = loom.compute((m, n), lambda t, i: x1[t, i], name="u1")
    u2 = loom.compute((m, n), lambda t, i: x2[t, i], name="u2")
    R1, R2 = scan([init1, init2], [u1, u2], [st1, st2])
    s = loom.create_schedule(R1.op)
    for stage in (xx, x1, x2):
        s[stage].compute_inline()
    _, r1, r2 = _run(s, [x, R1, R2], target, np.zeros((4, 3), "float32"), np.zeros((4, 3), "float32"),
                     np.zeros((4, 3), "float32"))
    e1, e2 = np.ones((4, 3)), np.ones((4, 3))
    for t in range(1, 4):
        e1[t] = e1[t - 1] + 2
        e2[t] = e1[t - 1] + 1 + e2[t - 1, 2]
    np.testing.assert_array_equal(r1, e1)
    np.testing.assert_array_equal(r2, e2)


@pytest.mark.parametrize("target", TARGETS)
def test_an_unrolled_scan_axis(target):
    X, _, _, S = _cumsum(4, 3)
    s = loom.create_schedule(S.op)
    s[S].unroll(S.op.scan_axis)
    stmt = schedule_to_stmt(s)
    [loop] = [f for f in te_collect(stmt, lambda n: isinstance(n, For)) if f.loop_var.name == "cumsum.idx"]
    assert loop.kind.value == "unrolled"
    x = _rand((4, 3))
    _, out = _run(s, [X, S], target, x, np.zeros_like(x))
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)


def test_json_round_trip_builds_the_same_program():
    X, _, _, S = _cumsum(loom.var("m"), 3)
    back = loom.load_json(loom.save_json(S.op))
    assert isinstance(back, ScanOp) and back.num_outputs == 1
    assert loom.structural_equal(back, S.op, map_free_vars=True)
    T = back.output(0)
    [Xb] = [t for t in back.inputs]
    x = _rand((6, 3))
    _, out = _run(loom.create_schedule(T.op), [Xb, T], "interp", x, np.zeros_like(x))
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)


def test_printing():
    _, _, _, S = _cumsum(4, 3)
    assert str(S.op) == ("scan cumsum = scan(init=[init], update=[update], state=[state])  "
                         "# over cumsum.idx: range(1, 4)")
    assert S.op.input_tensors == [S.op.init[0], S.op.update[0]]
