"""What a hybrid function parses to: the operation, its loops, variables and scheduling rules."""
# ruff: noqa: F821, F841 - hybrid keywords (output_tensor, range kinds, math) are injected, not imported

import numpy as np
import pytest

import loom
from loom.hybrid import HybridOp, parse, script
from loom.ir.functor import collect
from loom.ir.producer import ProducerRealize, ProducerStore
from loom.ir.stmt import AssertStmt, For, IfThenElse, LetStmt
from loom.te._te_functor import te_collect
from loom.te.schedule_ops import schedule_to_stmt

import hybrid_kernels as K


def _nodes(node, cls):
    return collect(node, lambda n: isinstance(n, cls))


def test_tensor_arguments_make_an_operation_with_one_axis_per_loop():
    a, b = loom.placeholder((100,), name="a"), loom.placeholder((99,), name="b")
    c = K.outer_product(a, b)
    assert isinstance(c.op, HybridOp) and c.op.name == "outer_product"
    assert c.shape == (100, 99) or [int(x) for x in c.shape] == [100, 99]
    assert [t.name for t in c.op.inputs] == ["a", "b"] and c.op.input_tensors == [a, b]
    i, j = c.op.axis
    assert (i.var.name, int(i.dom.extent), j.var.name, int(j.dom.extent)) == ("i", 100, "j", 99)
    assert str(c.op) == (
        "hybrid outer_product(a, b) -> (c):\n"
        "    for i in range(100):\n"
        "        for j in range(99):\n"
        "            c[i, j] = a[i] * b[j]")


def test_seed_tuning_example_splits_and_vectorizes_the_inner_loop():
    a, b = loom.placeholder((100,), name="a"), loom.placeholder((99,), name="b")
    c = K.outer_product(a, b)
    i, j = c.op.axis
    sch = loom.create_schedule(c.op)
    jo, ji = sch[c].split(j, 4)
    sch[c].vectorize(ji)
    loops = te_collect(schedule_to_stmt(sch), lambda n: isinstance(n, For))
    assert [(f.loop_var.name, int(f.extent), f.kind.value) for f in loops] == \
        [("i", 100, "serial"), ("j.outer", 25, "serial"), ("j.inner", 4, "vectorized")]


def test_several_outputs_come_back_as_a_list_of_one_operation():
    outs = K.min_max(loom.placeholder((4, 6), name="a"))
    assert isinstance(outs, list)  # as TVM's hybrid functions return them
    lo, hi = outs
    assert lo.op is hi.op and (lo.value_index, hi.value_index) == (0, 1)
    assert [t.name for t in lo.op.outputs] == ["lo", "hi"]


def test_a_variable_stored_twice_is_a_one_element_local_tensor():
    b = K.row_sums(loom.placeholder((4, 6), name="a"))
    [realize] = _nodes(b.op.body, ProducerRealize)
    assert realize.producer.name == "s" and realize.storage_scope == "local"
    assert [int(x) for x in realize.producer.shape] == [1]
    assert isinstance(b.op.body, For) and b.op.body.body is realize  # realized in the block that declares it


def test_a_name_assigned_once_is_a_let_binding_and_constants_fold():
    @script
    def lets(a):
        b = output_tensor(a.shape, a.dtype)
        k = 2 * 3
        for i in range(a.shape[0]):
            x = a[i] * 2.0
            b[i] = x + k
        return b

    op = parse(lets, [loom.placeholder((4,), name="a")])
    [let] = _nodes(op.body, LetStmt)
    assert let.var.name == "x" and str(let.value) == "a[i] * 2.0"
    [store] = _nodes(op.body, ProducerStore)
    assert str(store.value) == "x + 6.0"
    assert not _nodes(op.body, ProducerRealize)


def test_const_range_unrolls_while_parsing():
    op = parse(K.add_offsets, [loom.placeholder((3, 5), name="a"), loom.convert([1.0, 2.0, 3.0])])
    assert [f.loop_var.name for f in _nodes(op.body, For)] == ["i", "i", "i"]
    stores = [str(s.value) for s in _nodes(op.body, ProducerStore)]
    assert stores == ["a[0, i] + 1.0", "a[1, i] + 2.0", "a[2, i] + 3.0"]
    assert len(op.axis) == 3 and len({id(iv.var) for iv in op.axis}) == 3


def test_constant_conditions_keep_only_the_taken_branch():
    op = parse(K.classify, [loom.placeholder((8,), name="a")])
    text = str(op)
    assert "999" not in text  # `if False:` is gone
    assert "if i % 2 == 0:" in text  # `True and i % 2 == 0` is just the comparison
    assert "select(a[i] > 0.0, 5, 7)" in text
    assert len(_nodes(op.body, IfThenElse)) == 4  # if/elif, the nested if, and `if i % 2 == 0`


def test_assert_encloses_the_rest_of_its_block():
    n = loom.var("n")
    op = parse(K.scaled, [loom.placeholder((n,), name="a"), n, 1.5])
    assert isinstance(op.body, AssertStmt) and op.body.message.value == "n must be positive"
    assert isinstance(op.body.body, For) and str(op.body.body.extent) == "n"


def test_symbolic_sizes_flow_into_shapes_and_loops():
    n = loom.var("n")
    b = K.scaled(loom.placeholder((n,), name="a"), n, loom.var("k", "float32"))
    assert b.shape[0] is n and b.op.axis[0].dom.extent is n


def test_called_functions_are_inlined_and_their_loops_become_axes():
    a, b = loom.placeholder((5,), name="a"), loom.placeholder((5,), name="b")
    c = K.sum_of_squares(a, b)
    assert len(c.op.axis) == 3 and c.op.inputs == (a, b)
    assert sorted(r.producer.name for r in _nodes(c.op.body, ProducerRealize)) == ["b", "b"]  # square's results
    d = K.first_square(a)
    assert d.op.outputs[0].name == "b" and not _nodes(d.op.body, ProducerRealize)


def test_each_call_makes_a_new_operation():
    a = loom.placeholder((5,), name="a")
    assert K.square(a).op is not K.square(a).op


def test_script_loop_kinds_survive_until_a_schedule_reshapes_the_loop():
    a = loom.placeholder((5, 8), name="a")
    b = K.loop_kinds(a)
    s = loom.create_schedule(b.op)

    def kinds(s):
        return [f.kind.value for f in te_collect(schedule_to_stmt(s), lambda n: isinstance(n, For))]

    assert kinds(s) == ["parallel", "serial", "unrolled", "vectorized"]
    s[b].split(b.op.axis[0], factor=2)  # the reshaped loop is serial unless annotated again
    assert kinds(s) == ["serial", "serial", "serial", "unrolled", "vectorized"]


@pytest.mark.parametrize("primitive, message", [
    (lambda st, i, j, k: st.fuse(j, k), "fuse on hybrid matmul: j and k are not perfectly nested"),
    (lambda st, i, j, k: st.reorder(k, j), "reorder on hybrid matmul: loop j was moved across k"),
])
def test_schedules_cannot_mix_loops_of_different_nests(primitive, message):
    a, b = loom.placeholder((4, 4), name="a"), loom.placeholder((4, 4), name="b")
    c = K.matmul(a, b)
    s = loom.create_schedule(c.op)
    primitive(s[c], *c.op.axis)
    with pytest.raises(loom.LoomValueError, match=message):
        loom.lower(s, [a, b, c])


def test_a_triangular_loop_is_its_own_nest():
    a = loom.placeholder((6, 6), name="a")
    b = K.triangle(a)
    s = loom.create_schedule(b.op)
    with pytest.raises(loom.LoomValueError, match="not perfectly nested"):
        s[b].fuse(*b.op.axis)
        loom.lower(s, [a, b])


def test_operation_round_trips_through_json():
    op = parse(K.row_sums, [loom.placeholder((4, 6), name="a")])
    back = loom.load_json(loom.save_json(op))
    assert isinstance(back, HybridOp) and loom.structural_equal(back, op, map_free_vars=True)
    again = parse(K.row_sums, [loom.placeholder((4, 6), name="a")])
    assert loom.structural_equal(again, op, map_free_vars=True) and str(again) == str(op)


def test_an_inlined_compute_cannot_feed_a_hybrid_operation():
    a = loom.placeholder((4,), name="a")
    t = loom.compute((4,), lambda i: a[i] + 1.0, name="t")
    b = K.square(t)
    s = loom.create_schedule(b.op)
    s[t].compute_inline()
    with pytest.raises(loom.LoomError, match="t is inlined but a hybrid operation square reads it"):
        loom.lower(s, [a, b])


def test_int64_sizes_make_int64_loops():
    n = loom.var("n", "int64")
    b = K.square(loom.placeholder((n,), name="a"))
    assert str(b.op.axis[0].var.dtype) == "int64"
    f = loom.build(loom.create_schedule(b.op), [b.op.inputs[0], b], target="interp")
    x, y = np.arange(5, dtype="float32"), np.zeros(5, "float32")
    f(x, y)
    np.testing.assert_array_equal(y, x * x)
