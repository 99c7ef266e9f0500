"""Generic visitors and mutators over every node type.

Traversal comes from reflection: a node's child fields (single nodes, tuples
of nodes, dicts of nodes) are found from its attrs fields, so the defaults here
cover every registered node.  Subclasses override ``visit_<Class>`` methods for
the node types they care about; dispatch is a per-class table built on first
use (no ``isinstance`` chains).

``Mutator`` rebuilds a node only when a child changed, and returns the same
object otherwise, so ``new is old`` tells whether anything happened.

>>> import loom
>>> from loom.ir.functor import Mutator
>>> class Twice(Mutator):
...     def visit_IntImm(self, node):
...         return loom.const(node.value * 2, node.dtype)
>>> x = loom.var("x")
>>> str(Twice().visit(x + 3))
'x + 6'
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from .node import Node, traversal_names

__all__ = ["Visitor", "Mutator", "post_order_visit", "collect", "substitute", "ir_transform"]


def _method_table(owner: type[_Dispatch], cls: type) -> Callable[[Any, Any], Any]:
    for klass in cls.__mro__:
        fn = getattr(owner, f"visit_{klass.__name__}", None)
        if fn is not None:
            return fn
    return owner.generic_visit


class _Dispatch:
    """``visit`` dispatches to ``visit_<Class>`` (nearest in the MRO) or ``generic_visit``."""

    _tables: dict[type, dict[type, Callable[[Any, Any], Any]]] = {}

    def visit(self, node: Any) -> Any:
        # The hottest call of every pass: two dict lookups, nothing allocated.
        owner = type(self)
        table = _Dispatch._tables.get(owner)
        if table is None:
            table = _Dispatch._tables[owner] = {}
        fn = table.get(type(node))
        if fn is None:
            fn = table[type(node)] = _method_table(owner, type(node))
        return fn(self, node)

    def generic_visit(self, node: Any) -> Any:  # pragma: no cover - overridden below
        raise NotImplementedError


class Visitor(_Dispatch):
    """Walks a tree, calling ``visit_<Class>`` where defined, else visiting children."""

    def generic_visit(self, node: Any) -> None:
        if not isinstance(node, Node):
            return
        for name in traversal_names(type(node)):
            self._visit_value(getattr(node, name))

    def _visit_value(self, v: Any) -> None:
        if isinstance(v, Node):
            self.visit(v)
        elif isinstance(v, tuple):
            for x in v:
                self._visit_value(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                self._visit_value(k)
                self._visit_value(x)


class Mutator(_Dispatch):
    """Rebuilds a tree bottom-up; unchanged subtrees come back as the same object."""

    def generic_visit(self, node: Any) -> Any:
        if not isinstance(node, Node):
            return node
        # A buffer (or IterVar) is one object however many loads and stores name
        # it, so it must be rebuilt once: otherwise each use gets its own copy.
        memo = self.__dict__.setdefault("_identity_memo", {}) if type(node).binding_identity else None
        if memo is not None and id(node) in memo:
            return memo[id(node)][1]
        changes: dict[str, Any] = {}
        for name in traversal_names(type(node)):
            old = getattr(node, name)
            new = self._mutate_value(old)
            if new is not old:
                changes[name] = new
        out = node.with_(**changes) if changes else node
        if memo is not None:
            memo[id(node)] = (node, out)  # the key object stays alive, so its id stays unique
        return out

    def _mutate_value(self, v: Any) -> Any:
        if isinstance(v, Node):
            return self.visit(v)
        if isinstance(v, tuple):
            out = [self._mutate_value(x) for x in v]
            for a, b in zip(out, v):
                if a is not b:
                    return tuple(out)
            return v
        if isinstance(v, dict):
            changed = False
            new: dict[Any, Any] = {}
            for k, x in v.items():
                k2, x2 = self._mutate_value(k), self._mutate_value(x)
                changed |= k2 is not k or x2 is not x
                new[k2] = x2
            return new if changed else v
        return v


class _Collector(Visitor):
    def __init__(self, pred: Callable[[Any], bool], fn: Callable[[Any], None] | None) -> None:
        self.pred, self.fn = pred, fn
        self.found: list[Any] = []

    def generic_visit(self, node: Any) -> None:
        Visitor.generic_visit(self, node)
        if self.pred(node):
            self.found.append(node)
            if self.fn is not None:
                self.fn(node)


def post_order_visit(node: Node, fn: Callable[[Any], None]) -> None:
    """Call ``fn`` on every node below (and including) ``node``, children first."""
    _Collector(lambda _: True, fn).visit(node)


def collect(node: Node, pred: Callable[[Any], bool]) -> list[Any]:
    """Every node (children first, repeats included) for which ``pred`` holds."""
    c = _Collector(pred, None)
    c.visit(node)
    return c.found


class _Substitute(Mutator):
    def __init__(self, vmap: dict[Any, Any]) -> None:
        self.vmap = vmap

    def visit_Var(self, node: Any) -> Any:
        return self.vmap.get(node, node)


def substitute(node: Any, vmap: dict[Any, Any]) -> Any:
    """Replace variables (by identity) according to ``vmap``.

    >>> import loom
    >>> x, y = loom.var("x"), loom.var("y")
    >>> str(substitute(x + 1, {x: y * 2}))
    'y * 2 + 1'
    """
    if not vmap:
        return node
    return _Substitute(vmap).visit(node)


Callback = Callable[[Any], Optional[Any]]


class _Transform(Mutator):
    def __init__(self, preorder: Optional[Callback], postorder: Optional[Callback],
                 only_enable: Optional[frozenset[str]]) -> None:
        self.preorder, self.postorder, self.only_enable = preorder, postorder, only_enable

    def _enabled(self, node: Any) -> bool:
        if self.only_enable is None:
            return True
        return any(k.__name__ in self.only_enable or getattr(k, "type_key", None) in self.only_enable
                   for k in type(node).__mro__)

    def generic_visit(self, node: Any) -> Any:
        enabled = isinstance(node, Node) and self._enabled(node)
        if enabled and self.preorder is not None:
            out = self.preorder(node)
            if out is not None:
                return out
        node = Mutator.generic_visit(self, node)
        if enabled and self.postorder is not None:
            out = self.postorder(node)
            if out is not None:
                return out
        return node


def ir_transform(node: Any, preorder: Optional[Callback], postorder: Optional[Callback],
                 only_enable: Optional[Iterable[str]] = None) -> Any:
    """Rewrite a tree with two callbacks, as TVM's ``ir_transform`` (``IRTransform``).

    For each node (limited to the classes named in ``only_enable``, by class
    name such as ``"Call"`` or type key such as ``"tir.Call"``, when given):
    ``preorder(node)`` runs first, and a non-None result replaces the node
    without visiting inside it; otherwise the children are transformed, then
    ``postorder(new_node)`` runs, and a non-None result replaces the node.

    >>> import loom
    >>> x = loom.var("x")
    >>> double = lambda n: loom.const(n.value * 2, n.dtype)
    >>> str(ir_transform(x * 3 + 1, None, double, ["IntImm"]))
    'x * 6 + 2'
    """
    names = None if only_enable is None else frozenset(str(n) for n in only_enable)
    return _Transform(preorder, postorder, names).visit(node)
