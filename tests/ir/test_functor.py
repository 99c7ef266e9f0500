"""Visitor and Mutator dispatch, identity preservation, substitute, post_order_visit, collect."""

import loom
from loom.ir import expr as E
from loom.ir.functor import Mutator, Visitor, collect, post_order_visit, substitute
from loom.ir.stmt import BufferStore, For, SeqStmt


class _Record(Visitor):
    def __init__(self):
        self.seen = []


def test_visitor_dispatches_by_class():
    class Vars(_Record):
        def visit_Var(self, node):
            self.seen.append(node.name)

    x, y = loom.var("x"), loom.var("y")
    v = Vars()
    v.visit(x * 2 + y)
    assert v.seen == ["x", "y"]


def test_visitor_falls_back_along_the_mro():
    class Kinds(_Record):
        def visit_Var(self, node):
            self.seen.append(("var", node.name))

        def visit_BinaryOp(self, node):
            self.seen.append(("binary", type(node).__name__))
            self.generic_visit(node)

    n = loom.size_var("n")  # SizeVar -> visit_Var
    v = Kinds()
    v.visit(E.LT(n + 1, loom.const(3)))  # LT -> CmpOp -> BinaryOp
    assert v.seen == [("binary", "LT"), ("binary", "Add"), ("var", "n")]


def test_most_specific_method_wins():
    class Both(_Record):
        def visit_Var(self, node):
            self.seen.append("var")

        def visit_SizeVar(self, node):
            self.seen.append("size_var")

    v = Both()
    v.visit(loom.size_var("n") + loom.var("x"))
    assert v.seen == ["size_var", "var"]


def test_dispatch_tables_are_per_class():
    class A(_Record):
        def visit_Var(self, node):
            self.seen.append("A")

    class B(_Record):
        def visit_Var(self, node):
            self.seen.append("B")

    a, b = A(), B()
    a.visit(loom.var("x"))
    b.visit(loom.var("x"))
    assert (a.seen, b.seen) == (["A"], ["B"])


def test_visitor_walks_statements_and_buffers():
    A = loom.decl_buffer((8,), "float32", name="A")
    i = loom.var("i")
    loop = For(i, 0, 8, "serial", BufferStore(A, A[i] + 1.0, [i]))
    names = [v.name for v in collect(loop, lambda n: isinstance(n, E.Var))]
    assert names.count("i") == 3 and "A" in names


class _Double(Mutator):
    def visit_IntImm(self, node):
        return loom.const(node.value * 2, node.dtype)


def test_mutator_returns_the_same_object_when_nothing_changes():
    x, y = loom.var("x"), loom.var("y")
    e = (x + y) * (y - x)
    assert Mutator().visit(e) is e
    A = loom.decl_buffer((8,), "float32", name="A")
    loop = For(x, 0, 8, "serial", BufferStore(A, A[x], [x]))
    assert Mutator().visit(loop) is loop
    assert _Double().visit(e) is e, "no IntImm below: nothing to rebuild"


def test_mutator_rebuilds_only_the_spine():
    x, y = loom.var("x"), loom.var("y")
    left, right = x + 3, y * y
    e = left - right
    out = _Double().visit(e)
    assert out is not e and type(out) is E.Sub
    assert out.b is right, "the untouched sibling is shared"
    assert out.a is not left and out.a.a is x and out.a.b.value == 6


def test_mutator_rebuilds_tuple_fields():
    A = loom.decl_buffer((8,), "float32", name="A")
    i, j, k = loom.var("i"), loom.var("j"), loom.var("k")
    a, b = BufferStore(A, A[k], [k]), BufferStore(A, loom.const(0.0), [i])
    s = SeqStmt([a, b])
    out = substitute(s, {i: j})
    assert out.seq[0] is a and out.seq[1] is not b and out.seq[1].indices[0] is j


def test_mutator_rebuilds_a_shared_buffer_once():
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    i = loom.var("i")
    s = SeqStmt([BufferStore(A, A[i] + 1.0, [i]), BufferStore(A, A[i] * 2.0, [i])])
    out = substitute(s, {n: loom.const(16)})
    new = out.seq[0].buffer
    assert new is not A and new.shape[0].value == 16
    assert out.seq[0].value.a.buffer is new and out.seq[1].buffer is new and out.seq[1].value.a.buffer is new


def test_mutator_may_replace_a_node_type():
    class NegToSub(Mutator):
        def visit_Add(self, node):
            node = self.generic_visit(node)
            return node.a - node.b

    x, y = loom.var("x"), loom.var("y")
    out = NegToSub().visit((x + y) * 2)
    assert type(out.a) is E.Sub and out.a.a is x and out.a.b is y


def test_substitute_replaces_by_identity():
    x, x2, y = loom.var("x"), loom.var("x"), loom.var("y")
    e = x * 2 + x2
    out = substitute(e, {x: y + 1})
    assert out.b is x2, "a different Var with the same name is untouched"
    assert type(out.a.a) is E.Add and out.a.a.a is y


def test_substitute_with_nothing_to_do_returns_the_input():
    x = loom.var("x")
    e = x + 1
    assert substitute(e, {}) is e
    assert substitute(e, {loom.var("z"): x}) is e


def test_post_order_visit_is_children_first():
    x, y = loom.var("x"), loom.var("y")
    e = (x + 1) * y
    order = []
    post_order_visit(e, order.append)
    assert [type(n).__name__ for n in order] == ["Var", "IntImm", "Add", "Var", "Mul"]
    assert order[0] is x and order[-1] is e


def test_collect_keeps_repeats_in_post_order():
    x = loom.var("x")
    e = x * x + loom.const(1)
    assert collect(e, lambda n: n is x) == [x, x]
    found = collect(e, lambda n: isinstance(n, E.BinaryOp))
    assert [type(n).__name__ for n in found] == ["Mul", "Add"]
