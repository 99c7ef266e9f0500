"""``Array`` and ``Map`` nodes, and :func:`convert` from Python values.

>>> import loom
>>> a = loom.convert([1, 2.5, "s"])
>>> type(a).__name__, [type(x).__name__ for x in a]
('Array', ['IntImm', 'FloatImm', 'StringImm'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Iterator, overload

import numpy as np

from ..errors import LoomTypeError
from . import expr as E
from .node import DictOf, Node, TupleOf, children, mapping, register_object

if TYPE_CHECKING:
    from ..runtime.packed_func import PackedFunc

__all__ = ["Array", "Map", "convert"]


@register_object("ir.Array")
class Array(Node, Sequence):
    """An immutable sequence of nodes."""

    items: TupleOf[Node] = children(Node)

    def __getitem__(self, i: Any) -> Any:
        return self.items[i]

    def __contains__(self, item: object) -> bool:
        """Membership; a Python string matches a StringImm of the same text (``"a" in convert(["a"])``)."""
        from .expr import StringImm
        from .structural import structural_equal

        if isinstance(item, str):
            return any(isinstance(x, StringImm) and x.value == item for x in self)
        if isinstance(item, (int, float)):  # as convert() stores it
            from .expr_ops import convert_expr

            item = convert_expr(item)
        return any(x is item or structural_equal(x, item) for x in self)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.items)


@register_object("ir.Map")
class Map(Node, Mapping):
    """An immutable mapping; keys are strings or nodes (by identity)."""

    data: DictOf[Any, Node] = mapping()
    # Mapping's value equality would make Map unhashable; nodes compare by identity.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __getitem__(self, k: Any) -> Node:
        return self.data[k]

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.data)


@overload
def convert(value: Node) -> Node: ...
@overload
def convert(value: Callable[..., Any]) -> PackedFunc: ...
@overload
def convert(value: Any) -> Node: ...
def convert(value: Any) -> Any:
    """Convert a Python value to a node.

    int -> IntImm int32 (int64 when it does not fit), float -> FloatImm float32,
    bool -> IntImm bool, a numpy scalar -> a constant of its own dtype (as
    :func:`loom.const`), str -> StringImm, list/tuple -> Array, dict -> Map;
    a node stays itself.  A Python callable becomes a :class:`loom.runtime.PackedFunc`
    (as TVM's ``convert`` made a ``Function``), the one value that is not a node.
    Anything else is a ``TypeError``.

    >>> import loom, numpy as np
    >>> str(loom.convert(1 << 40).dtype), str(loom.convert(True).dtype), str(loom.convert(np.uint8(1)).dtype)
    ('int64', 'bool', 'uint8')
    >>> loom.convert(abs)
    <loom.runtime.PackedFunc abs>
    """
    if isinstance(value, Node):
        return value
    if hasattr(value, "as_node"):
        return value.as_node()
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        from .expr_ops import const  # expr_ops imports the containers: import on use

        return const(value)
    if isinstance(value, bool):
        return E.IntImm("bool", int(value))
    if isinstance(value, int):
        v = int(value)
        if -(2**31) <= v < 2**31:
            return E.IntImm("int32", v)
        if -(2**63) <= v < 2**63:
            return E.IntImm("int64", v)
        raise LoomTypeError(f"integer {v} does not fit in int64")
    if isinstance(value, float):
        return E.FloatImm("float32", float(value))
    if isinstance(value, str):
        return E.StringImm(value)
    if isinstance(value, (list, tuple)):
        return Array([convert(v) for v in value])
    if isinstance(value, dict):
        return Map({(k if isinstance(k, (str, Node)) else convert(k)): convert(v) for k, v in value.items()})
    if callable(value):
        from ..runtime.packed_func import PackedFunc  # the runtime imports the IR: import on use

        return value if isinstance(value, PackedFunc) else PackedFunc(value)
    raise LoomTypeError(f"cannot convert a {type(value).__name__} to a Loom node")
