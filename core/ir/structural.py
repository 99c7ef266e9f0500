"""Structural equality and hashing of IR trees.

Two trees are structurally equal when they have the same node types and the
same field values, where variables are equal *up to renaming at their binding
sites*: a For loop var, a Let var, an Allocate buffer var, a function
parameter, or a variable first met inside a buffer declaration (its data
pointer, shape, strides and elem_offset) is paired with the variable at the
same position on the other side, and later uses must respect that pairing.
Free variables compare by identity unless ``map_free_vars=True``, in which
case they are paired on first use too.  Buffers are declarations: two buffers
are paired the first time they are met, when their fields agree.

Which fields bind is reflected from the ``binds`` metadata of node fields, so
every registered node type is covered without per-type code.

>>> import loom
>>> from loom.ir import For, BufferStore
>>> A = loom.decl_buffer((8,), name="A")
>>> def loop():
...     i = loom.var("i")
...     return For(i, 0, 8, "serial", BufferStore(A, loom.const(0.0), [i]))
>>> loom.structural_equal(loop(), loop())
True
>>> loom.structural_hash(loop()) == loom.structural_hash(loop())
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import LoomError, LoomValueError
from .node import Node, fields_of
from .recursion import deep_recursion

__all__ = ["structural_equal", "structural_hash", "assert_structural_equal", "StructuralMismatch"]


class StructuralMismatch(LoomValueError):
    """Raised by :func:`assert_structural_equal`; the message shows where the trees differ."""


_ORDER: dict[type, tuple[Any, ...]] = {}


def _compare_order(cls: type) -> tuple[Any, ...]:
    """Binding fields first: definitions are paired before the body uses them
    (a PrimFunc's buffer_map defines shape vars that its body reads)."""
    found = _ORDER.get(cls)
    if found is None:
        fields = fields_of(cls)
        found = tuple(f for f in fields if f.metadata.get("binds")) + tuple(f for f in fields if not f.metadata.get("binds"))
        _ORDER[cls] = found
    return found


def _is_plain(v: Any) -> bool:
    return not isinstance(v, (Node, tuple, dict))


def _plain_equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


class _Equal:
    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.lhs: dict[int, Any] = {}  # id(lhs binding object) -> rhs object
        self.rhs: dict[int, Any] = {}
        self.keep: list[Any] = []  # keep paired objects alive so ids stay valid
        self.path: list[str] = []
        self.mismatch: tuple[str, Any, Any] | None = None

    def fail(self, a: Any, b: Any) -> bool:
        if self.mismatch is None:
            self.mismatch = ("".join(self.path) or "<root>", a, b)
        return False

    def equal(self, a: Any, b: Any, defining: bool = False) -> bool:
        if isinstance(a, Node) or isinstance(b, Node):
            if type(a) is not type(b):
                return self.fail(a, b)
            if type(a).binding_identity:
                return self.identity_equal(a, b, defining)
            return self.fields_equal(a, b, defining)
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
                return self.fail(a, b)
            for k, (x, y) in enumerate(zip(a, b)):
                self.path.append(f"[{k}]")
                ok = self.equal(x, y, defining)
                self.path.pop()
                if not ok:
                    return False
            return True
        if isinstance(a, dict) or isinstance(b, dict):
            return self.dict_equal(a, b, defining)
        return True if _plain_equal(a, b) else self.fail(a, b)

    def identity_equal(self, a: Node, b: Node, defining: bool) -> bool:
        paired = self.lhs.get(id(a))
        if paired is not None:
            return True if paired is b else self.fail(a, b)
        if id(b) in self.rhs:
            return self.fail(a, b)
        is_var = not type(a).is_declaration
        if is_var and not (defining or self.map_free_vars):
            return True if a is b else self.fail(a, b)
        # A binding site (or a declaration): compare what the object carries, then pair.
        if not self.fields_equal(a, b, defining=True, skip_names=True):
            return False
        self.lhs[id(a)], self.rhs[id(b)] = b, a
        self.keep.extend((a, b))
        return True

    def fields_equal(self, a: Node, b: Node, defining: bool, skip_names: bool = False) -> bool:
        for f in _compare_order(type(a)):
            if skip_names and f.name == "name":
                continue  # variable names are hints, not identity
            self.path.append(f".{f.name}")
            ok = self.equal(getattr(a, f.name), getattr(b, f.name), defining or f.metadata.get("binds", False))
            self.path.pop()
            if not ok:
                return False
        return True

    def dict_equal(self, a: Any, b: Any, defining: bool) -> bool:
        if not (isinstance(a, dict) and isinstance(b, dict)) or len(a) != len(b):
            return self.fail(a, b)
        if all(isinstance(k, str) for k in a) and all(isinstance(k, str) for k in b):
            if set(a) != set(b):
                return self.fail(sorted(a), sorted(b))
            pairs = [(k, k) for k in sorted(a)]
        else:
            pairs = list(zip(a, b))
        for ka, kb in pairs:
            self.path.append(f"[{ka!r}]" if isinstance(ka, str) else "[key]")
            ok = self.equal(ka, kb, defining) and self.equal(a[ka], b[kb], defining)
            self.path.pop()
            if not ok:
                return False
        return True


def _scalar_sides(lhs: Any, rhs: Any) -> tuple[Any, Any]:
    """A Python number facing an expression becomes a constant of its dtype, as ``expr + 1`` would
    make it (TVM's ``ir_pass.Equal`` converted it too); every other pair stays as it is."""
    from . import expr as E
    from .expr_ops import _python_const

    def number(v: Any) -> bool:
        return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))

    try:
        if isinstance(lhs, E.PrimExpr) and number(rhs):
            return lhs, _python_const(rhs, lhs.dtype)
        if isinstance(rhs, E.PrimExpr) and number(lhs):
            return _python_const(lhs, rhs.dtype), rhs
    except LoomError:  # no constant holds it (2**80): it equals no expression
        pass
    return lhs, rhs


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """Whether two IR trees are equal up to renaming of bound variables.

    A Python number on one side of an expression is a constant of the expression's
    dtype (``structural_equal(n * 2 + 1 - n * 2, 1)`` after simplifying).

    :param map_free_vars: also pair free variables by position instead of identity.

    >>> import loom
    >>> n = loom.var("n", "int64")
    >>> structural_equal(loom.const(100, "int64"), 100), structural_equal(n, 100), structural_equal(1, 1.0)
    (True, False, False)
    """
    lhs, rhs = _scalar_sides(lhs, rhs)
    with deep_recursion("structural_equal"):
        return _Equal(map_free_vars).equal(lhs, rhs)


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """Raise :class:`StructuralMismatch` showing the first difference and both trees."""
    eq = _Equal(map_free_vars)
    lhs, rhs = _scalar_sides(lhs, rhs)
    with deep_recursion("assert_structural_equal"):
        ok = eq.equal(lhs, rhs)
    if not ok:
        where, a, b = eq.mismatch or ("<root>", lhs, rhs)
        raise StructuralMismatch(
            f"structural mismatch at {where}:\n  lhs: {a!s}\n  rhs: {b!s}\n"
            f"--- lhs ---\n{lhs!s}\n--- rhs ---\n{rhs!s}"
        )


_MASK = (1 << 64) - 1


def _mix(h: int, v: int) -> int:
    h ^= (v + 0x9E3779B97F4A7C15 + ((h << 6) & _MASK) + (h >> 2)) & _MASK
    return h & _MASK


class _Hash:
    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.index: dict[int, int] = {}
        self.keep: list[Any] = []

    def hash(self, v: Any, defining: bool = False) -> int:
        if isinstance(v, Node):
            cls = type(v)
            h = hash(cls.type_key) & _MASK
            if cls.binding_identity:
                known = self.index.get(id(v))
                if known is not None:
                    return _mix(h, known)
                is_var = not cls.is_declaration
                if is_var and not (defining or self.map_free_vars):
                    return _mix(h, id(v))
                self.index[id(v)] = len(self.index) + 1
                self.keep.append(v)
                defining = True
                skip_names = True
            else:
                skip_names = False
            for f in _compare_order(cls):
                if skip_names and f.name == "name":
                    continue
                h = _mix(h, self.hash(getattr(v, f.name), defining or f.metadata.get("binds", False)))
            return h
        if isinstance(v, tuple):
            h = 0x7475706C
            for x in v:
                h = _mix(h, self.hash(x, defining))
            return h
        if isinstance(v, dict):
            h = 0x64696374
            items = sorted(v.items()) if all(isinstance(k, str) for k in v) else list(v.items())
            for k, x in items:
                h = _mix(h, self.hash(k, defining))
                h = _mix(h, self.hash(x, defining))
            return h
        if isinstance(v, float) and math.isnan(v):
            return 0x6E616E
        return hash((type(v).__name__, v)) & _MASK


def structural_hash(node: Any, map_free_vars: bool = False) -> int:
    """A hash consistent with :func:`structural_equal`: equal trees hash equal."""
    with deep_recursion("structural_hash"):
        return _Hash(map_free_vars).hash(node)
