"""Stage primitives: the loops they make, the IR attributes they leave, and their errors."""

import pytest

import loom
from loom.errors import LoomError, LoomTypeError, LoomValueError
from loom.ir import expr as E
from loom.ir.stmt import ForKind
from loom.te.operation import compute, placeholder, thread_axis
from loom.te.reduction import reduce_axis
from loom.te.reduction import sum as rsum
from loom.te.relations import Fuse, Split
from loom.te.schedule import Schedule, create_schedule
from loom.te.schedule_ops import schedule_to_stmt

from loom.ir.producer import ProducerStore
from loom.te._te_functor import te_collect

from sched_helpers import attrs_of, loop_names, loops, realizes


def _two_stage(n=16, m=12):
    A = placeholder((n, m), name="A")
    B = compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    C = compute((n, m), lambda i, j: B[i, j] * 2.0, name="C")
    return A, B, C


def names(ivs):
    return [iv.var.name for iv in ivs]


def test_schedule_stages_in_topological_order_and_lookup():
    A, B, C = _two_stage()
    s = create_schedule([C])
    assert [st.op.name for st in s.stages] == ["A", "B", "C"]
    assert s[C] is s[C.op] and s[C].is_output and not s[B].is_output
    with pytest.raises(LoomValueError, match="not part of this schedule"):
        s[placeholder((2,), name="Z")]
    with pytest.raises(LoomTypeError):
        s["C"]


def test_split_records_relation_and_leaf_order():
    _, _, C = _two_stage()
    s = create_schedule(C.op)
    i, j = C.op.axis
    xo, xi = s[C].split(i, factor=5)
    assert names(s[C].leaf_iter_vars) == ["i.outer", "i.inner", "j"]
    rel = s[C].relations[-1]
    assert isinstance(rel, Split) and rel.parent is i and rel.outer is xo and int(rel.factor) == 5
    jo, ji = s[C].split(j, nparts=3)
    assert s[C].relations[-1].nparts.value == 3 and s[C].relations[-1].factor is None
    assert names(s[C].leaf_iter_vars) == ["i.outer", "i.inner", "j.outer", "j.inner"]


@pytest.mark.parametrize("kwargs, err, msg", [
    ({}, LoomValueError, "exactly one of factor= and nparts="),
    ({"factor": 2, "nparts": 2}, LoomValueError, "exactly one"),
    ({"factor": 0}, LoomValueError, "must be positive"),
    ({"nparts": -3}, LoomValueError, "must be positive"),
    ({"factor": 2.5}, LoomTypeError, "int or an integer expression"),
])
def test_split_rejects_bad_factors(kwargs, err, msg):
    _, _, C = _two_stage()
    s = create_schedule(C.op)
    with pytest.raises(err, match=msg):
        s[C].split(C.op.axis[0], **kwargs)


def test_primitives_reject_axes_that_are_not_leaves():
    _, B, C = _two_stage()
    s = create_schedule(C.op)
    i = C.op.axis[0]
    s[C].split(i, factor=4)
    with pytest.raises(LoomValueError, match="already split"):
        s[C].split(i, factor=2)
    with pytest.raises(LoomValueError, match="not a loop of this stage"):
        s[C].unroll(B.op.axis[0])
    with pytest.raises(LoomTypeError, match="expected an IterVar"):
        s[C].vectorize(3)


def test_fuse_adjacent_axes_only():
    _, _, C = _two_stage()
    s = create_schedule(C.op)
    i, j = C.op.axis
    with pytest.raises(LoomValueError, match="not adjacent"):
        s[C].fuse(j, i)
    f = s[C].fuse(i, j)
    assert s[C].leaf_iter_vars == [f] and isinstance(s[C].relations[-1], Fuse)
    assert f.var.name == "i.j.fused"


def test_fuse_nothing_makes_a_singleton_loop():
    _, _, C = _two_stage(3, 2)
    s = create_schedule(C.op)
    single = s[C].fuse()
    assert s[C].leaf_iter_vars[0] is single
    assert "singleton" not in loop_names(schedule_to_stmt(s))  # extent one: no loop


def test_reorder_places_axes_in_given_positions():
    A = placeholder((2, 3, 4), name="A")
    B = compute((2, 3, 4), lambda x, y, z: A[x, y, z], name="B")
    s = create_schedule(B.op)
    x, y, z = B.op.axis
    s[B].reorder(z, x)
    assert names(s[B].leaf_iter_vars) == ["z", "y", "x"]
    with pytest.raises(LoomValueError, match="given twice"):
        s[B].reorder(x, x)
    assert loop_names(schedule_to_stmt(s)) == ["z", "y", "x"]


def test_tile_returns_four_axes_in_tiled_order():
    _, _, C = _two_stage()
    s = create_schedule(C.op)
    axes = s[C].tile(*C.op.axis, 4, 3)
    assert s[C].leaf_iter_vars == list(axes)
    assert names(axes) == ["i.outer", "j.outer", "i.inner", "j.inner"]


def test_annotations_become_loop_kinds():
    _, _, C = _two_stage()
    s = create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=4)
    s[C].parallel(i)
    s[C].unroll(jo)
    s[C].vectorize(ji)
    assert [f.kind for f in loops(realizes(schedule_to_stmt(s))["C"])] == [ForKind.PARALLEL, ForKind.UNROLLED, ForKind.VECTORIZED]


def test_vectorizing_or_binding_a_reduction_axis_is_an_error():
    A = placeholder((4, 8), name="A")
    k = reduce_axis((0, 8), name="k")
    B = compute((4,), lambda i: rsum(A[i, k], axis=k), name="B")
    s = create_schedule(B.op)
    with pytest.raises(LoomValueError, match="reduction loop"):
        s[B].vectorize(k)
    with pytest.raises(LoomValueError, match="cross-thread"):  # threads of a block can reduce; blocks cannot
        s[B].bind(k, thread_axis("blockIdx.x"))
    s[B].unroll(k)  # unrolling a reduction is fine


def test_bind_checks():
    _, _, C = _two_stage()
    s = create_schedule(C.op)
    i, j = C.op.axis
    tx = thread_axis("threadIdx.x")
    with pytest.raises(LoomTypeError, match="thread axis"):
        s[C].bind(i, C.op.axis[1])
    s[C].bind(i, tx)
    with pytest.raises(LoomValueError, match="already bound"):
        s[C].bind(i, thread_axis("threadIdx.y"))
    with pytest.raises(LoomValueError, match="already bound to loop"):
        s[C].bind(j, tx)


def test_thread_axis_with_declared_extent_must_match():
    _, _, C = _two_stage(16, 4)
    s = create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(xi, thread_axis((0, 4), "threadIdx.x"))
    with pytest.raises(LoomError, match="declared with extent 4"):
        schedule_to_stmt(s)


def test_pragma_attr_wraps_its_loop():
    _, _, C = _two_stage()
    s = create_schedule(C.op)
    s[C].pragma(C.op.axis[1], "auto_unroll", 16)
    s[C].pragma(C.op.axis[0], "debug")
    stmt = schedule_to_stmt(s)
    (unroll,), (debug,) = attrs_of(stmt, "pragma_auto_unroll"), attrs_of(stmt, "pragma_debug")
    assert int(unroll.value) == 16 and int(debug.value) == 1
    assert isinstance(unroll.node, E.IterVar) and unroll.body.loop_var.name == "j"
    with pytest.raises(LoomTypeError, match="pragma key"):
        s[C].pragma(C.op.axis[0], "")


def test_storage_align_attr_inside_realize():
    _, B, C = _two_stage()
    s = create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 16, 1)
    realize = realizes(schedule_to_stmt(s))["B"]
    attr = realize.body
    assert attr.attr_key == "storage_align" and attr.node is B
    assert attr.value.op.name == "tir.tvm_tuple" and [int(a) for a in attr.value.args] == [0, 16, 1]
    with pytest.raises(LoomValueError, match="not one of the operation's axes"):
        s[B].storage_align(C.op.axis[0], 16, 1)
    with pytest.raises(LoomValueError, match="factor > 0"):
        s[B].storage_align(B.op.axis[0], 0, 1)


def test_double_buffer_attr_wraps_the_producer():
    _, B, C = _two_stage()
    s = create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].double_buffer()
    (attr,) = attrs_of(schedule_to_stmt(s), "double_buffer_scope")
    assert attr.node is B and int(attr.value) == 1 and loop_names(attr) == ["j"]
    assert isinstance(realizes(schedule_to_stmt(s))["B"].body, loom.ir.SeqStmt)  # producer, then consumer
    with pytest.raises(LoomValueError, match="output"):
        s[C].double_buffer()


def test_set_scope_reaches_the_realize():
    _, B, C = _two_stage()
    s = create_schedule(C.op)
    s[B].set_scope("shared")
    assert realizes(schedule_to_stmt(s))["B"].storage_scope == "shared"


def test_compute_at_errors():
    A, B, C = _two_stage()
    s = create_schedule(C.op)
    with pytest.raises(LoomValueError, match="output"):
        s[C].compute_at(s[B], B.op.axis[0])
    with pytest.raises(LoomTypeError, match="s\\[C\\]"):
        s[B].compute_at(C, C.op.axis[0])
    with pytest.raises(LoomValueError, match="not a loop"):
        s[B].compute_at(s[C], B.op.axis[0])
    with pytest.raises(LoomValueError, match="own loops"):
        s[B].compute_at(s[B], B.op.axis[0])
    with pytest.raises(LoomValueError, match="only compute operations"):
        s[A].compute_at(s[C], C.op.axis[0])
    s[B].compute_inline()
    with pytest.raises(LoomValueError, match="inlined"):
        s[B].compute_at(s[C], C.op.axis[0])


def test_compute_at_a_loop_that_was_split_later_is_reported():
    _, B, C = _two_stage()
    s = create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].split(C.op.axis[0], factor=4)
    with pytest.raises(LoomError, match="no longer a loop of C"):
        schedule_to_stmt(s)


def test_compute_at_outside_a_consumer_is_reported():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] + 1.0, name="B")
    C = compute((8,), lambda i: B[i] * 2.0, name="C")
    D = compute((8,), lambda i: B[i] + C[i], name="D")
    s = create_schedule(D.op)
    s[B].compute_at(s[C], C.op.axis[0])
    with pytest.raises(LoomError, match="consumer D runs outside that loop"):
        schedule_to_stmt(s)


def test_compute_inline_errors():
    A = placeholder((4, 8), name="A")
    k = reduce_axis((0, 8), name="k")
    R = compute((4,), lambda i: rsum(A[i, k], axis=k), name="R")
    out = compute((4,), lambda i: R[i] + 1.0, name="out")
    s = create_schedule(out.op)
    with pytest.raises(LoomValueError, match="reduction cannot be inlined"):
        s[R].compute_inline()
    with pytest.raises(LoomValueError, match="output"):
        s[out].compute_inline()
    with pytest.raises(LoomValueError, match="only compute operations"):
        s[A].compute_inline()


def test_cache_read_rewires_only_the_readers():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] * 2.0, name="B")
    C = compute((8,), lambda i: A[i] + B[i], name="C")
    s = create_schedule(C.op)
    AA = s.cache_read(A, "local", [B])
    assert [st.op.name for st in s.stages] == ["A", "A.local", "B", "C"]
    assert s[B].op is not B.op and s[B].origin_op is B.op
    stmt = schedule_to_stmt(s)
    stores = {st.producer.name: st.value for st in te_collect(stmt, lambda n: isinstance(n, ProducerStore))}
    assert stores["B"].a.producer is AA and stores["C"].a.producer is A
    with pytest.raises(LoomValueError, match="does not read"):
        s.cache_read(B, "local", [s[B]])
    assert AA.shape[0].value == 8


def test_cache_write_after_a_split_lays_the_cache_out_like_the_loops():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] * 2.0, name="B")
    s = create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=2)
    BL = s.cache_write(B, "local")
    assert [int(d) for d in BL.shape] == [4, 2]


def test_cache_write_refuses_a_split_reduction_axis():
    A = placeholder((8, 8), name="A")
    k = reduce_axis((0, 8), name="k")
    B = compute((8,), lambda i: rsum(A[i, k], axis=k), name="B")
    s = create_schedule(B.op)
    s[B].split(k, factor=2)
    with pytest.raises(LoomValueError, match="reduction axis k was already split"):
        s.cache_write(B, "local")
    with pytest.raises(LoomValueError, match="only compute and tensor compute operations can be cached"):
        create_schedule(B.op).cache_write(A, "local")


def test_normalize_returns_a_rebased_copy():
    A = placeholder((8,), name="A")
    k = reduce_axis((2, 8), name="k")
    B = compute((1,), lambda i: rsum(A[k], axis=k), name="B")
    s = create_schedule(B.op)
    n = s.normalize()
    assert isinstance(n, Schedule) and n.is_normalized and not s.is_normalized
    assert s[B].leaf_iter_vars == list(B.op.axis) + list(B.op.reduce_axis)  # the original is untouched
    assert all(iv not in n[B].leaf_iter_vars for iv in B.op.reduce_axis)
    (loop,) = loops(schedule_to_stmt(s))
    assert int(loop.min) == 0 and int(loop.extent) == 6


def test_placeholder_only_schedule_is_an_error():
    A = placeholder((4,), name="A")
    with pytest.raises(LoomError, match="computes nothing"):
        schedule_to_stmt(create_schedule(A.op))


def test_guards_use_likely_and_only_where_needed():
    _, _, C = _two_stage(16, 12)
    s = create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=4)   # divides: no guard
    s[C].split(C.op.axis[1], factor=5)   # does not divide: one guard
    stmt = schedule_to_stmt(s)
    conds = [str(n.condition) for n in loom.ir.collect(stmt, lambda n: isinstance(n, loom.ir.IfThenElse))]
    assert conds == ["likely(j.outer * 5 + j.inner < 12)"]
