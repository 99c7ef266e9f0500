"""Classic-API schedule and target spellings (issue 15, item 13), each checked by what it computes.

cache_write after split/reorder (relayout), create_group, AutoInline*, save_json of a schedule,
pragma "unroll"/"vectorize", loom.schedule.InferBound/ScheduleOps, auto_broadcast buffers,
target generic options and generic_func, call_llvm_intrin.
"""

import numpy as np
import pytest

import loom
from loom.errors import LoomValueError, SerializationError, TargetError
from loom.ir.stmt import For
from loom.te._te_functor import te_collect

from loom.testing.conformance.harness import buildable_cpu_kinds as buildable_kinds

KINDS = buildable_kinds()


def _rand(*shape, dtype="float32"):
    return np.random.default_rng(0).random(shape).astype(dtype)


# --------------------------------------------------------------------------- cache_write relayout

def _mul_then_rowsum(M, N):
    A = loom.placeholder((M, N), name="A")
    B = loom.placeholder((M, N), name="B")
    k = loom.reduce_axis((0, N), name="k")
    C = loom.compute((M, N), lambda i, j: A[i, j] * B[i, j], name="C")
    D = loom.compute((M,), lambda i: loom.sum(C[i, k], axis=k), name="D")
    return A, B, C, D


def _split_reorder(s, C, D):
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].reorder(xo, C.op.axis[1], xi)
    return s.cache_write(C, "global")


def _reorder(s, C, D):
    s[C].reorder(C.op.axis[1], C.op.axis[0])
    return s.cache_write(C, "local")


def _fuse_split_and_reduction(s, C, D):
    fused = s[C].fuse(*C.op.axis)
    s[C].split(fused, 7)
    s.cache_write(C, "global")
    io, ii = s[D].split(D.op.axis[0], 3)
    s[D].reorder(ii, io, D.op.reduce_axis[0])
    return s.cache_write(D, "local")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("schedule", [_split_reorder, _reorder, _fuse_split_and_reduction])
@pytest.mark.parametrize("M,N", [(8, 5), (10, 3)])  # 10 rows: splits by 4 and 3 overshoot
def test_cache_write_after_loop_changes_computes_the_same(kind, schedule, M, N):
    A, B, C, D = _mul_then_rowsum(M, N)
    s = loom.create_schedule([C.op, D.op])
    schedule(s, C, D)
    f = loom.build(s, [A, B, C, D], kind)
    a, b = _rand(M, N), _rand(M, N) + 1
    c, d = np.zeros((M, N), "float32"), np.zeros(M, "float32")
    f(a, b, c, d)
    np.testing.assert_allclose(c, a * b, rtol=1e-6)
    np.testing.assert_allclose(d, (a * b).sum(1), rtol=1e-5)


def test_cache_write_relayout_follows_the_leaf_loops():
    A, B, C, D = _mul_then_rowsum(8, 5)
    s = loom.create_schedule([C.op, D.op])
    CC = _split_reorder(s, C, D)
    assert [int(e) for e in CC.shape] == [2, 5, 4]  # (i.outer, j, i.inner)
    assert [iv.var.name for iv in CC.op.axis] == ["i.outer.c", "j.c", "i.inner.c"]
    # The original stage keeps its split and reorder, and copies the cache out.
    assert [iv.var.name for iv in s[C].leaf_iter_vars] == ["i.outer", "j", "i.inner"]


# --------------------------------------------------------------------------- groups

def _chain():
    x = loom.compute((6, 5), lambda i, j: (i * 5 + j).astype("float32"), name="x")
    x1 = loom.compute(x.shape, lambda *i: x(*i) + 1, name="x1")
    x2 = loom.compute(x.shape, lambda *i: x1(*i) * 2, name="x2")
    return x, x1, x2


def test_nested_groups_record_their_members():
    x, x1, x2 = _chain()
    s = loom.create_schedule(x2.op)
    g1 = s.create_group(outputs=x1, inputs=x)
    g2 = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    assert set(s.groups) == {g1, g2}
    assert s[x].group is g2 and s[x1].group is g1 and g1.group is g2
    assert (g2.num_child_stages, g1.num_child_stages) == (2, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_group_compute_at_moves_every_member_and_bounds_shrink_to_a_row(kind):
    x, x1, x2 = _chain()
    s = loom.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    g.compute_at(s[x2], x2.op.axis[0])
    assert g.attach_stage is s[x2] and s[x].attach_stage is s[x2] and s[x1].attach_ivar is x2.op.axis[0]
    bounds = loom.schedule.InferBound(s)
    assert int(bounds[x.op.axis[0]].extent) == 1 and int(bounds[x.op.axis[1]].extent) == 5
    out = np.zeros((6, 5), "float32")
    loom.build(s, [x2], kind)(out)
    np.testing.assert_allclose(out, (np.arange(30).reshape(6, 5) + 1) * 2)
    g.compute_root()
    assert s[x].attach_type == "root" and s[x1].attach_type == "root"


def test_a_member_placed_on_its_own_leaves_the_group_placement_alone():
    x, x1, x2 = _chain()
    s = loom.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    s[x].compute_at(s[x1], x1.op.axis[0])
    g.compute_at(s[x2], x2.op.axis[0])
    assert s[x].attach_stage is s[x1] and s[x1].attach_stage is s[x2]


def test_group_errors_name_the_problem():
    x, x1, x2 = _chain()
    s = loom.create_schedule(x2.op)
    g = s.create_group(outputs=x2, inputs=x)
    with pytest.raises(LoomValueError, match="inside the group itself"):
        g.compute_at(s[x2], x2.op.axis[0])
    with pytest.raises(LoomValueError, match="no stage lies between"):
        s.create_group(outputs=x, inputs=x)


# --------------------------------------------------------------------------- auto inline

def test_auto_inline_elemwise_and_injective():
    A = loom.placeholder((8, 8), name="A")
    B = loom.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")           # element-wise
    T = loom.compute((8, 8), lambda i, j: B[j, i] * 2.0, name="T")           # injective, not element-wise
    k = loom.reduce_axis((0, 8), name="k")
    R = loom.compute((8,), lambda i: loom.sum(T[i, k], axis=k), name="R")   # a reduction
    O = loom.compute((8,), lambda i: R[i] - 1.0, name="O")
    s = loom.create_schedule(O.op)
    loom.schedule.AutoInlineElemWise(s)
    assert [s[t].attach_type for t in (B, T, R, O)] == ["inline", "root", "root", "root"]
    loom.schedule.AutoInlineInjective(s)
    assert [s[t].attach_type for t in (B, T, R, O)] == ["inline", "inline", "root", "root"]
    a = _rand(8, 8)
    out = np.zeros(8, "float32")
    loom.build(s, [A, O], "interp")(a, out)
    np.testing.assert_allclose(out, ((a + 1) * 2).T.sum(1) - 1, rtol=1e-5)


# --------------------------------------------------------------------------- save_json of a schedule

@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_schedule_loads_back_and_lowers_to_the_same_code(kind):
    A = loom.placeholder((16, 8), name="A")
    k = loom.reduce_axis((0, 8), name="k")
    B = loom.compute((16, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = loom.compute((16,), lambda i: loom.sum(B[i, k], axis=k), name="C")
    s = loom.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(xo)
    s[CC].compute_at(s[C], xi)
    s[B].compute_at(s[CC], CC.op.axis[0])
    s[B].storage_align(B.op.axis[0], 8, 1)
    s[C].pragma(xo, "auto_unroll_max_step", 16)
    text = loom.save_json(s)
    s2 = loom.load_json(text)
    assert isinstance(s2, loom.te.Schedule) and loom.save_json(s2) == text
    A2, C2 = s2.stages[0].op.output(0), s2.outputs[0].output(0)
    assert str(loom.lower(s2, [A2, C2])) == str(loom.lower(s, [A, C]))
    a, c = _rand(16, 8), np.zeros(16, "float32")
    loom.build(s2, [A2, C2], kind)(a, c)
    np.testing.assert_allclose(c, 2 * a.sum(1), rtol=1e-5)


def test_a_saved_schedule_keeps_its_groups():
    x, x1, x2 = _chain()
    s = loom.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    g.compute_at(s[x2], x2.op.axis[0])
    s2 = loom.load_json(loom.save_json(s))
    [g2] = s2.groups
    assert g2.attach_stage is s2.stages[-1] and g2.num_child_stages == 2
    assert str(loom.lower(s2, [s2.outputs[0].output(0)])) == str(loom.lower(s, [x2]))


def test_a_corrupt_schedule_record_is_a_serialization_error():
    x, x1, x2 = _chain()
    s = loom.create_schedule(x2.op)
    s[x].compute_at(s[x2], x2.op.axis[0])
    text = loom.save_json(s).replace('"attach_stage":2', '"attach_stage":9')
    with pytest.raises(SerializationError, match="index 9 is out of range"):
        loom.load_json(text)


# --------------------------------------------------------------------------- pragma, InferBound, ScheduleOps

def test_pragma_unroll_and_vectorize_are_the_loop_annotations():
    A = loom.placeholder((16,), name="A")
    B = loom.compute((16,), lambda i: A[i] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].pragma(xo, "unroll")
    s[B].pragma(xi, "vectorize")
    assert s[B].iter_var_attrs[xo].iter_type == "unrolled" and s[B].iter_var_attrs[xi].iter_type == "vectorized"
    assert not s[B].iter_var_attrs[xo].pragmas
    kinds = [str(f.kind) for f in te_collect(loom.schedule.ScheduleOps(s), lambda n: isinstance(n, For))]
    assert kinds == ["unrolled", "vectorized"]
    with pytest.raises(LoomValueError, match="takes no value"):
        s[B].pragma(xo, "unroll", 4)


# --------------------------------------------------------------------------- auto_broadcast

@pytest.mark.parametrize("kind", KINDS)
def test_auto_broadcast_buffers_broadcast_dimensions_of_extent_one(kind):
    m = [loom.var(f"m{d}") for d in range(3)]
    n = [loom.var(f"n{d}") for d in range(3)]
    o = [loom.var(f"o{d}") for d in range(3)]
    A = loom.placeholder(m, name="A")
    B = loom.placeholder(n, name="B")
    C = loom.compute(o, lambda i, j, k: A[i, j, k] + B[i, j, k], name="C")
    Ab = loom.decl_buffer(A.shape, A.dtype, name="Ab", buffer_type="auto_broadcast")
    Bb = loom.decl_buffer(B.shape, B.dtype, name="Bb", buffer_type="auto_broadcast")
    f = loom.build(loom.create_schedule(C.op), [A, B, C], kind, binds={A: Ab, B: Bb})
    a = _rand(2, 4, 3)
    for bshape in [(2, 1, 1), (1, 4, 1), (1, 1, 3), (2, 4, 3)]:
        b = _rand(*bshape) + 1
        c = np.zeros((2, 4, 3), "float32")
        f(a, b, c)
        np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_buffer_type_is_checked_and_kept_by_json():
    with pytest.raises(LoomValueError, match="buffer_type"):
        loom.decl_buffer((4,), "float32", buffer_type="broadcast")
    b = loom.decl_buffer((4,), "float32", buffer_type="auto_broadcast")
    assert loom.load_json(loom.save_json(b)).buffer_type == "auto_broadcast"
    assert loom.decl_buffer((4,), "float32", buffer_type="default").buffer_type == ""


# --------------------------------------------------------------------------- targets

def test_generic_target_options():
    t = loom.Target("llvm -model=x86 -libs=cblas,mkl -device=arm_cpu")
    assert (t.model, t.libs, t.device_name) == ("x86", ("cblas", "mkl"), "arm_cpu")
    assert t.keys[0] == "arm_cpu" and "cpu" in t.keys
    assert loom.structural_equal(loom.Target(str(t)), t)
    assert loom.structural_equal(loom.load_json(loom.save_json(t)), t)
    assert loom.Target("llvm").model == "unknown" and loom.Target("llvm").libs == ()
    assert loom.target.create("c -model=m").model == "m"
    with pytest.raises(TargetError, match="generic device, libs, model"):
        loom.Target("llvm -modl=x")


def test_generic_func_dispatches_on_the_target_keys():
    @loom.target.generic_func
    def pick(x):
        return ("generic", x)

    @pick.register(["cpu"])
    def _cpu(x):
        return ("cpu", x)

    @pick.register("arm_cpu")
    def _arm(x):
        return ("arm", x)

    assert pick(1) == ("generic", 1)
    with loom.Target("llvm"):
        assert pick(2) == ("cpu", 2) and loom.target.current_target().kind.name == "llvm"
    with loom.Target("llvm -device=arm_cpu"):
        assert pick(3) == ("arm", 3)  # -device comes first among the keys
    with pytest.raises(TargetError, match="already has an override"):
        pick.register("cpu", lambda x: x)
    pick.register("cpu", lambda x: ("new", x), override=True)
    with loom.Target("c"):
        assert pick(4) == ("new", 4)


# --------------------------------------------------------------------------- call_llvm_intrin

def test_call_llvm_intrin_runs_on_llvm_scalar_and_vector():
    A = loom.placeholder((8,), name="A", dtype="uint8")
    X = loom.placeholder((8,), name="X")
    C = loom.compute((8,), lambda i: loom.call_llvm_intrin("uint8", "llvm.ctpop.i8", loom.const(1, "uint32"), A[i]),
                     name="C")
    S = loom.compute((8,), lambda i: loom.call_llvm_pure_intrin("float32", "llvm.sqrt", X[i]), name="S")
    s = loom.create_schedule([C.op, S.op])
    s[C].vectorize(C.op.axis[0])
    f = loom.build(s, [A, X, C, S], "llvm")
    a = (np.arange(8) * 37).astype("uint8")
    x = np.arange(8, dtype="float32")
    c, sq = np.zeros(8, "uint8"), np.zeros(8, "float32")
    f(a, x, c, sq)
    assert c.tolist() == [bin(v).count("1") for v in a.tolist()]
    np.testing.assert_allclose(sq, np.sqrt(x))


def test_call_llvm_intrin_names_the_mistake():
    x = loom.var("x", "float32")
    with pytest.raises(LoomValueError, match="must start with 'llvm.'"):
        loom.call_llvm_intrin("float32", "sqrt", x)
    with pytest.raises(LoomValueError, match="signature count must be 1"):
        loom.call_llvm_intrin("float32", "llvm.fma", loom.const(3, "uint32"), x, x, x)


# --------------------------------------------------------------------------- bound inference

def _fused_split_producer(l, split):
    m = loom.var("m")
    A = loom.placeholder((m, l), name="A")
    A1 = loom.compute((m, l), lambda i, j: A[i, j], name="A1")
    A2 = loom.compute((m, l), lambda i, j: A1[i, j] + 3, name="A2")
    s = loom.create_schedule(A2.op)
    fused = s[A2].fuse(A2.op.axis[0], A2.op.axis[1])
    xo, _ = s[A2].split(fused, split)
    s[A1].compute_at(s[A2], xo)
    return A, A1, A2, s, xo


def test_a_producer_at_a_split_of_a_fused_loop_computes_only_the_row_part_it_needs():
    A, A1, A2, s, xo = _fused_split_producer(6, 3)
    bounds = loom.schedule.InferBound(s)
    an = loom.arith.Analyzer()
    at5 = {xo.var: loom.const(5)}
    got = [(int(an.simplify(loom.ir.functor.substitute(bounds[ax].min, at5))),
            int(an.simplify(loom.ir.functor.substitute(bounds[ax].extent, at5)))) for ax in A1.op.axis]
    assert got == [(2, 1), (3, 3)]  # fused values 15..17: row 2, columns 3..5


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("l,split", [(6, 3), (6, 4), (5, 2), (4, 8)])
def test_fused_split_producers_compute_the_right_values(kind, l, split):
    A, A1, A2, s, _ = _fused_split_producer(l, split)
    f = loom.build(s, [A, A2], kind)
    a = _rand(5, l)
    out = np.zeros_like(a)
    f(a, out)
    np.testing.assert_allclose(out, a + 3)


def test_warp_memory_is_relaxed_over_threadIdx_x():
    m, l = loom.var("m"), loom.var("l")
    A = loom.placeholder((m, l), name="A")
    A1 = loom.compute((m, l), lambda i, j: A[i, j], name="A1")
    A2 = loom.compute((m, l), lambda i, j: A1[i, j] + 3, name="A2")
    s = loom.create_schedule(A2.op)
    s[A1].set_scope("warp")
    _, xi = s[A2].split(A2.op.axis[0], 32)
    xi0, xi1 = s[A2].split(xi, factor=16)
    tx = loom.thread_axis("threadIdx.x")
    s[A2].bind(xi1, tx)
    s[A2].bind(xi0, loom.thread_axis("threadIdx.y"))
    s[A1].compute_at(s[A2], A2.op.axis[1])
    _, ai = s[A1].split(s[A1].op.axis[0], factor=16)
    s[A1].bind(ai, tx)
    bounds = loom.schedule.InferBound(s)
    assert int(bounds[A1.op.axis[0]].extent) == 16  # the warp's 16 threadIdx.x rows, one threadIdx.y
