"""ir_transform: TVM's two-callback rewriter (preorder replaces without descending, postorder rebuilds)."""

import numpy as np
import pytest

import loom
from loom.ir import expr as E
from loom.ir import ir_transform, stmt as S


def _extern_calls():
    ib = loom.ir_builder.create()
    n = loom.var("n")
    with ib.for_range(0, n, name="i") as i:
        with ib.for_range(0, 10, name="j") as j:
            x = loom.call_extern("int32", "TestA", i * 3 + j)
            ib.emit(loom.call_extern("int32", "TestB", x))
            ib.emit(loom.call_extern("int32", "TestC", x))
    return ib.get()


def _callee(call):
    return call.args[0].value


def test_preorder_replaces_without_descending_and_postorder_sees_rebuilt_nodes():
    seen_post = []

    def preorder(node):
        if _callee(node) == "TestC":
            return loom.const(0, "int32")
        return None

    def postorder(node):
        seen_post.append(_callee(node))
        if _callee(node) == "TestA":
            return loom.call_extern("int32", "TestB", node.args[1] + 1)
        return None

    body = ir_transform(_extern_calls(), preorder, postorder, ["Call"])
    first, second = body.body.body.seq
    assert _callee(first.value) == "TestB" and _callee(first.value.args[1]) == "TestB"
    assert loom.structural_equal(first.value.args[1].args[1], body.loop_var * 3 + body.body.loop_var + 1)
    assert isinstance(second.value, E.IntImm) and second.value.value == 0
    # TestC was replaced in preorder, so its argument (a TestA call) was never visited
    assert seen_post == ["TestA", "TestB"]


def test_only_enable_takes_class_names_or_type_keys_and_none_means_every_node():
    e = loom.var("x") * 3 + 1
    twice = (lambda n: loom.const(n.value * 2, n.dtype) if isinstance(n, E.IntImm) else None)
    for names in (["IntImm"], ["tir.IntImm"], None):
        assert str(ir_transform(e, None, twice, names)) == "x * 6 + 2"
    assert ir_transform(e, None, twice, ["FloatImm"]) is e  # nothing enabled: the same object back


def test_base_class_names_enable_subclasses():
    x = loom.var("x")
    visited = []
    ir_transform(x * 2 + x // 3, None, lambda n: visited.append(type(n).__name__), ["BinaryOp"])
    assert visited == ["Mul", "FloorDiv", "Add"]


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_a_lower_pass_written_with_ir_transform_changes_the_result(target):
    n = 64
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = loom.create_schedule(B.op)

    def reverse_loads(stmt):
        def post(node):
            if isinstance(node, E.BufferLoad) and node.buffer.name == "A":
                (idx,) = node.indices
                return node.with_(indices=(n - 1 - idx,))
            return None
        return ir_transform(stmt, None, post, ["BufferLoad"])

    with loom.build_config(add_lower_pass=[(1, reverse_loads)]):
        f = loom.build(s, [A, B], target)
    a = np.random.rand(n).astype("float32")
    b = np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a[::-1] * 2.0)


def test_statements_can_be_replaced():
    body = _extern_calls()
    out = ir_transform(body, lambda s: S.Evaluate(loom.const(7)) if isinstance(s, S.For) and s.loop_var.name == "j" else None,
                       None, ["For"])
    assert isinstance(out.body, S.Evaluate) and out.body.value.value == 7
