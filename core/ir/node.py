"""The object system: registered, immutable, reflectable nodes.

Every IR object is a frozen, slotted attrs class registered under a *type key*
(``"tir.Add"``).  Registration allocates a *type index* and records the parent's
key, so the registry maps key <-> index <-> class.  A node's fields (in order)
come from attrs, so one generic visitor, mutator, structural-equality routine
and JSON writer serve every node type; adding a node never means editing them.

Field helpers (:func:`child`, :func:`children`, :func:`value`) attach a
validator to each field.  Construction therefore rejects wrong field types,
which is also what makes ``load_json`` safe against hostile input.

Example
-------
>>> @register_object("example.Pair")
... class Pair(Node):
...     first: object = value(int)
...     second: object = value(int)
>>> Pair(1, 2).type_key
'example.Pair'
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Optional, TypeVar, overload

import attrs

from ..errors import LoomError, LoomTypeError

if TYPE_CHECKING:  # typing.dataclass_transform is 3.11+; type checkers know typing_extensions
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda f: f

__all__ = [
    "Node",
    "register_object",
    "registered_types",
    "type_key_to_class",
    "type_index_to_key",
    "fields_of",
    "traversal_fields",
    "child",
    "children",
    "value",
    "mapping",
    "Converted",
    "TupleOf",
    "DictOf",
]

_BY_KEY: dict[str, type[Node]] = {}
_BY_INDEX: list[type[Node]] = []

N = TypeVar("N", bound="type[Node]")
_T = TypeVar("_T")
_In = TypeVar("_In")
_K = TypeVar("_K")
_V = TypeVar("_V")


class Converted(Generic[_T, _In]):
    """How type checkers see a field whose constructor argument is converted.

    ``x: Converted[DataType, DTypeLike] = value(DataType, converter=DataType.of)``
    reads as a ``DataType`` while the constructor accepts any ``DTypeLike``: a
    descriptor type, which is how field specifiers (PEP 681) tell a constructor
    parameter's type from the attribute's.  It is only an annotation: at run time
    the field is an ordinary attrs field.
    """

    if TYPE_CHECKING:
        @overload
        def __get__(self, obj: None, owner: Any) -> Converted[_T, _In]: ...
        @overload
        def __get__(self, obj: object, owner: Any) -> _T: ...
        def __get__(self, obj: Any, owner: Any) -> Any: ...
        def __set__(self, obj: object, value: _In) -> None: ...


#: A :func:`children` field: reads as a tuple, the constructor accepts any sequence.
TupleOf = Converted[tuple[_T, ...], Sequence[_T]]
#: A :func:`mapping` field: reads as a dict, the constructor accepts any mapping (None for empty).
DictOf = Converted[dict[_K, _V], Optional[Mapping[_K, _V]]]


class Node:
    """Base of every registered object.

    Nodes are immutable.  ``==`` on a node is identity unless a subclass says
    otherwise (expressions overload it to build comparisons); use
    :func:`loom.structural_equal` to compare by value.
    """

    __slots__ = ("__weakref__",)
    type_key: ClassVar[str] = "Object"
    type_index: ClassVar[int] = 0
    parent_key: ClassVar[str | None] = None
    #: Nodes with an identity of their own (variables, buffers).  Structural
    #: equality maps them at binding sites instead of comparing them in place.
    binding_identity: ClassVar[bool] = False
    #: Identity nodes that declare something (buffers, iteration variables):
    #: paired on first meeting, whatever the context, when their fields agree.
    is_declaration: ClassVar[bool] = False

    def with_(self: Any, **changes: Any) -> Any:
        """Return a copy with some fields replaced (``self`` if none change)."""
        if all(getattr(self, k) is v for k, v in changes.items()):
            return self
        return attrs.evolve(self, **changes)

    def same_as(self, other: object) -> bool:
        """Pointer equality, as TVM's ``same_as``."""
        return self is other

    def __repr__(self) -> str:
        from .printer import to_text

        return to_text(self)

    __str__ = __repr__

    def script(self) -> str:
        """The readable, Python-like text of this node (same as ``str``)."""
        from .printer import to_text

        return to_text(self)

    def __copy__(self) -> Any:
        return self  # immutable: a copy is the same object

    def __deepcopy__(self, memo: Any) -> Any:
        return self

    # Pickling is attrs' default for slotted classes: field by field, so one Var (or Buffer,
    # or Tensor) referenced from many places is one object again after loading, as the
    # pickle memo preserves sharing.  JSON (save_json) is the format for untrusted data.


_BY_KEY[Node.type_key] = Node
_BY_INDEX.append(Node)


# ---------------------------------------------------------------------------
# Field helpers.  Validators raise LoomTypeError naming the node and field.


def _type_name(types: Any) -> str:
    if isinstance(types, tuple):
        return " or ".join(_type_name(t) for t in types)
    return getattr(types, "__name__", str(types))


def _lazy(types: Any) -> Any:
    """Resolve a type given as a zero-argument callable (for forward references)."""
    if isinstance(types, (type, tuple)):
        return types
    return types()


_UNSET: Any = object()


def _type_check(types: Any, optional: bool) -> Callable[[Any, str, Any], None]:
    """A check ``(inst, where, v)`` that ``v`` is an instance of ``types`` (resolved lazily)."""
    resolved: list[Any] = []

    def check(inst: Any, where: str, v: Any) -> None:
        if not resolved:
            resolved.append(_lazy(types))
        if v is None and optional:
            return
        if not isinstance(v, resolved[0]):
            raise LoomTypeError(
                f"{type(inst).__name__}.{where} expects {_type_name(resolved[0])}, got {type(v).__name__}"
            )

    return check


def child(types: Any, *, default: Any = _UNSET, optional: bool = False, nullable: bool = False,
          binds: bool = False, converter: Callable[[Any], Any] | None = None, reference: bool = False) -> Any:
    """A field holding one node.

    ``optional=True`` accepts None and makes it the default (write it as
    ``default=None`` too: type checkers see a default only when it is written);
    ``nullable=True`` accepts None with no default.  ``binds=True`` marks a
    binding site (a loop var).  ``reference=True`` marks a link to a definition
    that lives elsewhere (a tensor's operation): visitors and mutators do not
    descend into it, while JSON and structural equality do.
    """
    check = _type_check(types, optional or nullable)
    if default is _UNSET:
        default = None if optional else attrs.NOTHING
    return attrs.field(default=default, validator=lambda inst, attr, v: check(inst, attr.name, v),
                       converter=converter, metadata={"binds": binds, "kind": "child", "reference": reference})


def _to_tuple(v: Any) -> Any:
    if isinstance(v, tuple):
        return v
    if isinstance(v, (list, range)) or (hasattr(v, "__iter__") and hasattr(v, "__len__") and not isinstance(v, (str, bytes, Mapping))):
        return tuple(v)
    return v


def children(types: Any, *, default: Any = attrs.NOTHING, binds: bool = False,
             element_converter: Callable[[Any], Any] | None = None) -> Any:
    """A field holding a tuple of nodes (lists are converted)."""
    check = _type_check(types, False)

    def convert(v: Any) -> Any:
        v = _to_tuple(v)
        if element_converter is not None and isinstance(v, tuple):
            v = tuple(element_converter(x) for x in v)
        return v

    def validate(inst: Any, attr: attrs.Attribute, v: Any) -> None:
        if not isinstance(v, tuple):
            raise LoomTypeError(f"{type(inst).__name__}.{attr.name} expects a sequence, got {type(v).__name__}")
        for i, x in enumerate(v):
            check(inst, f"{attr.name}[{i}]", x)

    if default is not attrs.NOTHING and isinstance(default, tuple):
        fixed = default
        default = attrs.Factory(lambda: fixed)
    return attrs.field(default=default, converter=convert, validator=validate,
                       metadata={"binds": binds, "kind": "children"})


def value(types: Any, *, default: Any = attrs.NOTHING, optional: bool = False,
          converter: Callable[[Any], Any] | None = None) -> Any:
    """A field holding a plain value (str, int, float, bool, DataType, enum).

    ``optional=True`` accepts None and makes it the default (write ``default=None`` too, as for
    :func:`child`).
    """
    check = _type_check(types, optional)
    if optional and default is attrs.NOTHING:
        default = None
    return attrs.field(default=default, converter=converter, validator=lambda inst, attr, v: check(inst, attr.name, v),
                       metadata={"kind": "value"})


def _to_dict(v: Any) -> Any:
    if v is None:
        return {}
    if isinstance(v, Mapping) and not isinstance(v, dict):
        return dict(v.items())
    return v


def mapping(*, binds: bool = False) -> Any:
    """A field holding a dict (keys str or nodes; values nodes or plain values)."""

    def validate(inst: Any, attr: attrs.Attribute, v: Any) -> None:
        if not isinstance(v, dict):
            raise LoomTypeError(f"{type(inst).__name__}.{attr.name} expects a dict, got {type(v).__name__}")

    return attrs.field(factory=dict, converter=_to_dict, validator=validate,
                       metadata={"binds": binds, "kind": "mapping"})


# The field helpers are declared to type checkers as field specifiers, so that a registered class
# has a typed constructor.  They see a field's default only when it is written as ``default=``.
@dataclass_transform(frozen_default=True, eq_default=False, field_specifiers=(attrs.field, child, children, value))
def register_object(type_key: str) -> Callable[[N], N]:
    """Register a node class under ``type_key``.

    The class is turned into a frozen, slotted attrs class (unless it already
    is one) with identity equality and the printer's ``repr``.  Put this
    decorator outermost.

    >>> @register_object("example.Leaf")
    ... class Leaf(Node):
    ...     name: str = value(str)
    >>> Leaf("x").name
    'x'
    """

    def wrap(cls: N) -> N:
        if type_key in _BY_KEY:
            raise LoomError(f"type key {type_key!r} is already registered by {_BY_KEY[type_key].__qualname__}")
        if "__attrs_attrs__" not in cls.__dict__:
            cls = attrs.define(frozen=True, eq=False, repr=False, slots=True, weakref_slot=False)(cls)
        parent = next((b for b in cls.__mro__[1:] if issubclass(b, Node)), Node)
        cls.type_key = type_key
        cls.type_index = len(_BY_INDEX)
        cls.parent_key = parent.type_key
        _BY_KEY[type_key] = cls
        _BY_INDEX.append(cls)
        _FIELDS.pop(cls, None)
        return cls

    return wrap


@dataclass_transform(frozen_default=True, eq_default=False, field_specifiers=(attrs.field, child, children, value))
def abstract_node(cls: N) -> N:
    """Make an abstract (unregistered) attrs base for a family of nodes."""
    return attrs.define(frozen=True, eq=False, repr=False, slots=True, weakref_slot=False)(cls)


def registered_types() -> dict[str, type[Node]]:
    """Every registered type key and its class (a copy)."""
    return dict(_BY_KEY)


def type_key_to_class(key: str) -> type[Node] | None:
    return _BY_KEY.get(key)


def type_index_to_key(index: int) -> str:
    return _BY_INDEX[index].type_key


_FIELDS: dict[type, tuple[attrs.Attribute, ...]] = {}


def fields_of(cls: type) -> tuple[attrs.Attribute, ...]:
    """The reflected fields of a node class, in order (constructor fields only)."""
    found = _FIELDS.get(cls)
    if found is None:
        found = tuple(f for f in attrs.fields(cls) if f.init)
        _FIELDS[cls] = found
    return found


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """The names of :func:`fields_of`, per class once (what writers and copiers read with ``getattr``)."""
    found = _FIELD_NAMES.get(cls)
    if found is None:
        found = _FIELD_NAMES[cls] = tuple(f.name for f in fields_of(cls))
    return found


_TRAVERSED: dict[type, tuple[attrs.Attribute, ...]] = {}


def traversal_fields(cls: type) -> tuple[attrs.Attribute, ...]:
    """The fields a visitor walks: :func:`fields_of` less ``reference`` links."""
    found = _TRAVERSED.get(cls)
    if found is None:
        found = tuple(f for f in fields_of(cls) if not f.metadata.get("reference", False))
        _TRAVERSED[cls] = found
    return found


_TRAVERSED_NAMES: dict[type, tuple[str, ...]] = {}


def traversal_names(cls: type) -> tuple[str, ...]:
    """The names of :func:`traversal_fields` (what hot walkers read with ``getattr``), per class once."""
    found = _TRAVERSED_NAMES.get(cls)
    if found is None:
        found = _TRAVERSED_NAMES[cls] = tuple(f.name for f in traversal_fields(cls))
    return found


class StrEnum(str, enum.Enum):
    """An enum whose members are their string values (JSON writes them as text)."""

    def __str__(self) -> str:
        return self.value
