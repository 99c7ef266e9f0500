"""Structural equality, hashing keys and a deterministic order for expressions.

The simplifier compares subexpressions by value (to merge like terms and to
match rule patterns).  Free variables compare by identity, as everywhere in
the simplifier: two different ``Var`` objects named ``x`` are different.

``order_key`` sorts terms in canonical sums.  It uses names rather than
identities so the order does not depend on where objects live in memory;
ties (two variables with one name) keep their order of appearance.

``map_operands`` rebuilds a node the simplifiers have no dedicated rule for.
"""

from __future__ import annotations

from typing import Any, Callable

from ..ir import expr as E
from ..ir.node import Node, fields_of, traversal_fields

__all__ = ["expr_equal", "struct_key", "order_key", "uses_var", "map_operands"]


# These functions recurse once per level of an expression, so they loop with ``for`` and
# comprehensions rather than ``all(...)``/``tuple(...)`` over generators: a generator resumed from
# C costs C stack on every level, plain Python calls do not (see loom.ir.recursion).


def expr_equal(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same expression tree (vars by identity)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, Node):
        if type(a).binding_identity:
            return False
        for f in fields_of(type(a)):
            if not _value_equal(getattr(a, f.name), getattr(b, f.name)):
                return False
        return True
    return _value_equal(a, b)


def _value_equal(x: Any, y: Any) -> bool:
    if isinstance(x, Node):
        return expr_equal(x, y)
    if isinstance(x, tuple):
        if not (isinstance(y, tuple) and len(x) == len(y)):
            return False
        for p, q in zip(x, y):
            if not _value_equal(p, q):
                return False
        return True
    if isinstance(x, dict):
        if x is y:
            return True
        if not (isinstance(y, dict) and x.keys() == y.keys()):
            return False
        for k, v in x.items():
            if not _value_equal(v, y[k]):
                return False
        return True
    return type(x) is type(y) and x == y


def struct_key(e: Any) -> Any:
    """A hashable key: equal for structurally equal trees (vars by identity).

    The key holds ``id`` of identity nodes, so keep the expression alive for as
    long as the key is used.
    """
    if isinstance(e, Node):
        if type(e).binding_identity:
            return ("@", id(e))
        return (type(e).type_index, *[struct_key(getattr(e, f.name)) for f in fields_of(type(e))])
    if isinstance(e, tuple):
        return tuple([struct_key(x) for x in e])
    if isinstance(e, dict):
        return tuple([(struct_key(k), struct_key(v)) for k, v in e.items()])
    return (type(e).__name__, str(e))


def order_key(e: E.PrimExpr) -> tuple:
    """A name-based sort key: variables first (by name), then constants, then
    compound expressions by kind and operands.  Every key has the shape
    ``(rank, label, children)`` so any two keys compare.
    """
    if isinstance(e, E.Var):
        return (0, f"{e.name}:{e.dtype}", ())
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return (1, f"{e.value}:{e.dtype}", ())
    label = [e.type_key, str(e.dtype)]
    kids = []
    for f in fields_of(type(e)):
        v = getattr(e, f.name)
        if isinstance(v, E.PrimExpr):
            kids.append(order_key(v))
        elif isinstance(v, tuple):
            kids.extend([order_key(x) for x in v if isinstance(x, E.PrimExpr)])
        elif isinstance(v, Node):
            label.append(str(getattr(v, "name", type(v).__name__)))
        else:
            label.append(str(v))
    return (2, "|".join(label), tuple(kids))


def uses_var(node: Any, var: E.Var) -> bool:
    """True when ``var`` (by identity) occurs anywhere in ``node``."""
    if node is var:
        return True
    if isinstance(node, (Node, tuple)):
        items = node if isinstance(node, tuple) else [getattr(node, f.name) for f in traversal_fields(type(node))]
        for v in items:
            if isinstance(v, (Node, tuple)) and uses_var(v, var):
                return True
    return False


def map_operands(e: E.PrimExpr, fn: Callable[[E.PrimExpr], E.PrimExpr]) -> E.PrimExpr:
    """``e`` with ``fn`` applied to each expression operand; ``e`` itself when none changed.

    Binding fields (a ``Let``'s variable) are left alone, and so are fields
    that are not expressions (a Call's op, a Ramp's lanes).
    """
    changes: dict[str, Any] = {}
    for f in fields_of(type(e)):
        if f.metadata.get("binds"):
            continue
        v = getattr(e, f.name)
        if isinstance(v, E.PrimExpr):
            nv: Any = fn(v)
        elif isinstance(v, tuple) and v and all(isinstance(x, E.PrimExpr) for x in v):
            new = tuple([fn(x) for x in v])
            nv = v if all(p is q for p, q in zip(new, v)) else new
        else:
            continue
        if nv is not v:
            changes[f.name] = nv
    return e.with_(**changes) if changes else e
