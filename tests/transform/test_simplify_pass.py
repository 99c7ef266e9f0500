"""Simplify / CanonicalSimplify as passes."""

import numpy as np
import pytest

import loom
from loom.testing import evaluate
from loom.testing.random_programs import assert_same_result, random_func
from loom.ir import BufferStore, For, IfThenElse, PrimFunc
from loom.transform.simplify import CanonicalSimplify, Simplify

A = loom.decl_buffer((16,), "int32", name="A")


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("factory", [Simplify, CanonicalSimplify])
def test_random_programs_keep_their_result(seed, factory):
    f, make_args = random_func(seed)
    g = factory()(f)
    loom.verify_well_formed(g)
    assert_same_result(f, g, make_args)


def test_loop_bounds_fold_guards_and_indices():
    """Inside ``for i in range(4)``, ``i < 4`` is true and ``(i*4 + 3) // 4`` is ``i``."""
    i = loom.var("i")
    before = For(i, 0, 4, "serial", IfThenElse(i < 4, BufferStore(A, loom.const(1), [loom.floordiv(i * 4 + 3, 4)])))
    want = For(i, 0, 4, "serial", BufferStore(A, loom.const(1), [i]))
    f = PrimFunc([A.data], before, buffer_map={A.data: A})
    loom.assert_structural_equal(Simplify()(f).body, want)
    assert Simplify().info.name == "Simplify" and CanonicalSimplify().info.name == "CanonicalSimplify"


def test_buffers_keep_their_identity():
    """Simplification never copies a buffer."""
    i = loom.var("i")
    f = PrimFunc([A.data], For(i, 0, 16, "serial", BufferStore(A, A[i] + 0 * i, [i])), buffer_map={A.data: A})
    g = Simplify()(f)
    assert g.body.body.buffer is A and g.body.body.value.buffer is A


def _run_both(before, after):
    """Run two functions over the same input and return their outputs."""
    outs = []
    for f in (before, after):
        a = np.arange(16, dtype="int32")
        evaluate(f, a)
        outs.append(a)
    return outs


def test_likely_of_a_constant_folds_and_its_if_goes():
    """``if likely(j < 4)`` with ``j`` known to be 0 keeps only the then-branch; a symbolic hint stays."""
    i, j = loom.var("i"), loom.var("j")
    guarded = IfThenElse(loom.likely(j * 4 + i < 16), BufferStore(A, A[i] + 1, [i]))
    before = For(i, 0, 4, "serial", For(j, 0, 1, "serial", guarded))
    want = For(i, 0, 4, "serial", BufferStore(A, A[i] + 1, [i]))
    f = PrimFunc([A.data], before, buffer_map={A.data: A})
    g = Simplify()(f)
    loom.assert_structural_equal(g.body, want)
    got, expected = _run_both(f, g)
    assert (got == expected).all() and expected[0] == 1

    k = loom.var("k")
    kept = loom.arith.simplify(loom.likely(k + 0 < 16))
    assert isinstance(kept, loom.ir.Call) and kept.op.name == "tir.likely"
    assert str(kept.args[0]) == "k < 16"
    folded = loom.arith.simplify(loom.likely(k - k < 1))
    assert isinstance(folded, loom.ir.IntImm) and folded.value == 1


@pytest.mark.parametrize("kind", ["serial", "unrolled"])
def test_unit_loop_becomes_its_body(kind):
    """A serial or unrolled loop of one iteration is its body at ``i = min``."""
    i, j = loom.var("i"), loom.var("j")
    before = For(j, 0, 8, "serial", For(i, 3, 1, kind, BufferStore(A, A[i + j] * 2, [i + j])))
    want = For(j, 0, 8, "serial", BufferStore(A, A[j + 3] * 2, [j + 3]))
    f = PrimFunc([A.data], before, buffer_map={A.data: A})
    g = Simplify()(f)
    loom.assert_structural_equal(g.body, want)
    got, expected = _run_both(f, g)
    assert (got == expected).all() and expected[3] == 6 and expected[2] == 2


@pytest.mark.parametrize("kind", ["parallel", "vectorized"])
def test_unit_loops_that_say_how_they_run_stay(kind):
    i = loom.var("i")
    before = For(i, 0, 1, kind, BufferStore(A, loom.const(1), [i]))
    f = PrimFunc([A.data], before, buffer_map={A.data: A})
    assert isinstance(Simplify()(f).body, For)


def test_annotated_unit_loop_stays():
    i = loom.var("i")
    before = For(i, 0, 1, "serial", BufferStore(A, loom.const(1), [i]), annotations={"pragma_x": 1})
    f = PrimFunc([A.data], before, buffer_map={A.data: A})
    out = Simplify()(f).body
    assert isinstance(out, For) and out.annotations == {"pragma_x": 1}


def test_arith_simplify_keeps_unit_loops():
    """Only the pass inlines unit loops; ``loom.arith.simplify`` keeps the loop structure."""
    i = loom.var("i")
    before = For(i, 0, 1, "serial", BufferStore(A, loom.const(1), [i]))
    assert isinstance(loom.arith.simplify(before), For)


@pytest.mark.parametrize("kind", ["interp", "llvm", "c"])
def test_scan_guard_goes_inside_its_allocation(kind):
    """TVM's test_complex_likely_elimination: a cumulative sum by ``loom.scan`` feeding a sparse-lengths sum.

    The scan's guard ``likely(t + 1 < n + 1)`` goes: inside ``allocate([n + 1])`` the extent is not
    negative (every backend fails first otherwise), so ``n + 1`` does not wrap and the guard is ``t < n``.
    """
    def cumsum(X):
        (m,) = X.shape
        state = loom.placeholder((m + 1,), dtype="int32", name="state")
        init = loom.compute((1,), lambda _: loom.const(0, "int32"))
        update = loom.compute((m + 1,), lambda t: state[t - 1] + X[t - 1])
        return loom.scan(init, update, state, inputs=[X], name="cumsum")

    m, n, d, i = loom.var("m"), loom.var("n"), loom.var("d"), loom.var("i")
    data = loom.placeholder((m, d * 32), name="data")
    indices = loom.placeholder((i,), name="indices", dtype="int32")
    lengths = loom.placeholder((n,), name="lengths", dtype="int32")
    offsets = cumsum(lengths)

    def sls(row, col):
        g = loom.reduce_axis((0, lengths[row]))
        return loom.sum(data[indices[offsets[row] + g], col], axis=g)

    Y = loom.compute((n, d * 32), sls, name="Y")
    s = loom.create_schedule(Y.op)
    row, col = s[Y].op.axis
    co, ci = s[Y].split(col, factor=32)
    s[Y].reorder(row, co, s[Y].op.reduce_axis[0], ci)
    s[Y].vectorize(ci)
    assert "if" not in str(loom.lower(s, [data, indices, lengths, Y], simple_mode=True))
    f = loom.build(s, [data, indices, lengths, Y, d], target=kind)  # d: a shape d * 32 does not give it
    rng = np.random.default_rng(0)
    lens = np.array([2, 0, 3, 1], "int32")
    idx = rng.integers(0, 5, size=int(lens.sum())).astype("int32")
    x = rng.uniform(size=(5, 64)).astype("float32")
    y = np.zeros((4, 64), "float32")
    f(x, idx, lens, y, 2)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    want = np.stack([x[idx[a:a + k]].sum(axis=0) for a, k in zip(starts, lens)])
    np.testing.assert_allclose(y, want, rtol=1e-6)
