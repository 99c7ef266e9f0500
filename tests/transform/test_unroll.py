"""UnrollLoop: explicit unrolling, automatic thresholds and the unroll hint."""

import pytest

import loom
from loom.ir import BufferStore, For, ForKind, PrimFunc, seq
from loom.testing.random_programs import assert_same_result, random_func
from loom.transform import PassContext
from loom.transform.unroll import UnrollLoop, UnrollOptions, unroll_loop

A = loom.decl_buffer((64,), "int32", name="A")


def func(body):
    return PrimFunc([A.data], body, buffer_map={A.data: A})


def nest(outer_extent=4, inner_extent=4, kind="serial", inner_kind="serial"):
    i, j = loom.var("i"), loom.var("j")
    return For(i, 0, outer_extent, kind, For(j, 0, inner_extent, inner_kind, BufferStore(A, i * 8 + j, [i * 8 + j])))


def run_with(config, f):
    with PassContext(config=config):
        return UnrollLoop()(f)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("config", [{"tir.auto_unroll_max_step": 16, "tir.auto_unroll_max_extent": 3},
                                    {"tir.auto_unroll_max_step": 64, "tir.unroll_explicit": False}])
def test_random_programs_keep_their_result(seed, config):
    f, make_args = random_func(seed)
    g = run_with(config, f)
    loom.verify_well_formed(g)
    assert_same_result(f, g, make_args)


def test_loop_of_kind_unrolled_is_copied():
    """``for i in unroll(1, 4)`` becomes three stores with i = 1, 2, 3 (folding is Simplify's job)."""
    i = loom.var("i")
    got = unroll_loop(For(i, 1, 3, "unrolled", BufferStore(A, i * 2, [i])))
    want = seq(*(BufferStore(A, loom.ir.Mul(loom.const(k), loom.const(2)), [loom.const(k)]) for k in (1, 2, 3)))
    loom.assert_structural_equal(got, want)


def test_copies_get_fresh_inner_loop_vars():
    """Each copy of an unrolled body binds its own inner loop variable (SSA)."""
    got = run_with({}, func(nest(2, 4, kind="unrolled")))
    loom.verify_well_formed(got)
    inner = list(got.body.seq)
    assert len(inner) == 2 and inner[0].loop_var is not inner[1].loop_var


def test_default_options_leave_serial_loops_alone():
    """auto_unroll_max_step defaults to 0: serial loops stay loops."""
    f = func(nest())
    assert run_with({}, f) is f


@pytest.mark.parametrize("max_step, unrolled_levels", [(4, 1), (15, 1), (16, 2), (100, 2)])
def test_max_step_counts_the_whole_nest(max_step, unrolled_levels):
    """A 4x4 nest has 16 steps: the inner loop (4 steps) unrolls from 4, both from 16."""
    got = run_with({"tir.auto_unroll_max_step": max_step}, func(nest())).body
    loops = loom.ir.collect(got, lambda n: isinstance(n, For))
    assert len(loops) == {1: 1, 2: 0}[unrolled_levels]
    assert len(loom.ir.collect(got, lambda n: isinstance(n, loom.ir.BufferStore))) == {1: 4, 2: 16}[unrolled_levels]


def test_max_depth_limits_nest_depth():
    """With max_depth 1 only the innermost loop of a nest can unroll."""
    got = run_with({"tir.auto_unroll_max_step": 100, "tir.auto_unroll_max_depth": 1}, func(nest())).body
    assert isinstance(got, For) and isinstance(got.body, loom.ir.SeqStmt) and len(got.body) == 4


def test_max_extent_unrolls_short_loops():
    """auto_unroll_max_extent unrolls constant loops up to that extent whatever their steps."""
    got = run_with({"tir.auto_unroll_max_extent": 2}, func(nest(4, 2))).body
    assert isinstance(got, For) and got.extent.value == 4 and len(got.body) == 2


def test_unroll_explicit_false_marks_loops_instead():
    """Without explicit unrolling the chosen loops become kind unrolled hints."""
    got = run_with({"tir.auto_unroll_max_step": 100, "tir.unroll_explicit": False}, func(nest())).body
    assert got.kind is ForKind.UNROLLED and got.body.kind is ForKind.UNROLLED


def test_loop_around_non_unrolled_loop_stays():
    """A loop containing a loop that stays a loop (symbolic extent) is not unrolled."""
    n, i, j = loom.var("n"), loom.var("i"), loom.var("j")
    s = For(i, 0, 2, "serial", For(j, 0, n, "serial", BufferStore(A, i, [j])))
    assert unroll_loop(s, UnrollOptions(max_step=1000)) is s


def test_parallel_loops_are_never_auto_unrolled():
    """Only serial loops are candidates for automatic unrolling."""
    f = func(nest(kind="parallel"))
    got = run_with({"tir.auto_unroll_max_step": 1000}, f).body
    assert got.kind is ForKind.PARALLEL and len(got.body) == 4


@pytest.mark.parametrize("extent", [0, 1])
@pytest.mark.parametrize("explicit", [True, False])
def test_max_extent_one_removes_single_iteration_loops_whatever_their_body(extent, explicit):
    """TVM's rule: with auto_unroll_max_extent 1 a loop of at most one iteration goes, even around a kept loop."""
    i, j = loom.var("i"), loom.var("j")
    inner = For(j, 0, 10, "serial", BufferStore(A, j + 1, [j + 1]))
    f = func(For(i, 0, extent, "serial", seq(BufferStore(A, 3, [i * 2]), inner)))
    g = run_with({"tir.auto_unroll_max_step": 8, "tir.auto_unroll_max_depth": 0,
                  "tir.auto_unroll_max_extent": 1, "tir.unroll_explicit": explicit}, f)
    if extent == 0:
        assert not [n for n in loom.ir.collect(g.body, lambda n: isinstance(n, (For, BufferStore)))]
    else:
        first, second = g.body.seq
        assert isinstance(first, BufferStore) and str(first.indices[0]) == "0 * 2"
        assert isinstance(second, For) and second.extent.value == 10  # the 10-step loop stays
    assert_same_result(f, g, lambda: [__import__("numpy").zeros(64, "int32")])


def test_max_extent_one_keeps_loops_of_two_iterations_and_thread_loops():
    f = func(nest(outer_extent=2, inner_extent=10))
    g = run_with({"tir.auto_unroll_max_step": 0, "tir.auto_unroll_max_extent": 1}, f)
    assert isinstance(g.body, For) and g.body.extent.value == 2
