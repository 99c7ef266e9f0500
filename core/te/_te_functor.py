"""Traversal helpers that treat a tensor read as a leaf.

The generic functors follow every child field, and a ``ProducerLoad``'s
producer is a Tensor whose operation holds a whole compute body.  Walking into
it would be slow and, for a mutator, wrong: a substitution that happens to
touch a variable inside another operation would rebuild that operation and so
create a different tensor.  The classes here visit only a load's indices.
"""

from __future__ import annotations

from typing import Any, Callable

from ..ir import expr as E
from ..ir.functor import Mutator, Visitor
from ..ir.producer import ProducerLoad, ProducerRealize, ProducerStore

__all__ = ["TeMutator", "TeVisitor", "te_substitute", "uses_any_var", "tensor_reads", "te_collect"]


class TeMutator(Mutator):
    """A Mutator that never descends into a Tensor (of a ProducerLoad/Store/Realize or an AttrStmt)."""

    def visit_Tensor(self, node: Any) -> Any:
        return node

    def visit_ProducerLoad(self, node: ProducerLoad) -> Any:
        indices = tuple(self.visit(i) for i in node.indices)
        if all(a is b for a, b in zip(indices, node.indices)):
            return node
        return ProducerLoad(node.producer, indices)

    def visit_ProducerStore(self, node: ProducerStore) -> Any:
        value = self.visit(node.value)
        indices = tuple(self.visit(i) for i in node.indices)
        if value is node.value and all(a is b for a, b in zip(indices, node.indices)):
            return node
        return ProducerStore(node.producer, value, indices)

    def visit_ProducerRealize(self, node: ProducerRealize) -> Any:
        bounds = tuple(self.visit(r) for r in node.bounds)
        cond, body = self.visit(node.condition), self.visit(node.body)
        if cond is node.condition and body is node.body and all(a is b for a, b in zip(bounds, node.bounds)):
            return node
        return ProducerRealize(node.producer, bounds, cond, body, node.storage_scope)


class TeVisitor(Visitor):
    """A Visitor that never descends into a Tensor (it visits a ProducerLoad's indices only)."""

    def visit_Tensor(self, node: Any) -> None:
        return None

    def visit_ProducerLoad(self, node: ProducerLoad) -> None:
        for i in node.indices:
            self.visit(i)


class _Substitute(TeMutator):
    def __init__(self, vmap: dict[E.Var, Any]) -> None:
        self.vmap = vmap

    def visit_Var(self, node: E.Var) -> Any:
        return self.vmap.get(node, node)


def te_substitute(node: Any, vmap: dict[E.Var, Any]) -> Any:
    """Replace variables by identity, leaving the operations of read tensors alone."""
    return _Substitute(vmap).visit(node) if vmap else node


class _Uses(TeVisitor):
    def __init__(self, pred: Callable[[E.Var], bool]) -> None:
        self.pred, self.found = pred, False

    def visit_Var(self, node: E.Var) -> None:
        if self.pred(node):
            self.found = True


def uses_any_var(node: Any, variables: Any) -> bool:
    """Whether ``node`` mentions any variable in the container ``variables``."""
    if not variables:
        return False
    v = _Uses(lambda x: x in variables)
    v.visit(node)
    return v.found


class _Reads(TeVisitor):
    def __init__(self) -> None:
        self.found: dict[int, Any] = {}

    def visit_ProducerLoad(self, node: ProducerLoad) -> None:
        self.found.setdefault(id(node.producer), node.producer)
        super().visit_ProducerLoad(node)


def tensor_reads(node: Any) -> list[Any]:
    """The tensors ``node`` reads, in first-read order, without repeats."""
    r = _Reads()
    r.visit(node)
    return list(r.found.values())


class _Collect(TeVisitor):
    def __init__(self, pred: Callable[[Any], bool]) -> None:
        self.pred, self.found = pred, []

    def generic_visit(self, node: Any) -> None:
        if self.pred(node):
            self.found.append(node)
        super().generic_visit(node)


def te_collect(node: Any, pred: Callable[[Any], bool]) -> list[Any]:
    """Every node below ``node`` (pre-order, outermost first) for which ``pred`` holds; tensors are leaves."""
    c = _Collect(pred)
    c.visit(node)
    return c.found
