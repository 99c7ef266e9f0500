"""``make_node``: build any registered node from its type key and fields (TVM's ``tvm.make.node``).

>>> import loom
>>> x = make_node("IntImm", dtype="int32", value=10)
>>> type(x).__name__, x.value
('IntImm', 10)
>>> A = loom.placeholder((10,), name="A")
>>> make_node("te.Tensor", shape=A.shape, dtype=A.dtype, op=A.op, value_index=0) is A
True
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import attrs

from ..errors import LoomError, LoomTypeError, LoomValueError
from .node import Node, fields_of, registered_types

__all__ = ["make_node"]


def _resolve(type_key: Any) -> type[Node]:
    """The class registered under ``type_key``, or under the one key ending in ``.type_key``."""
    if not isinstance(type_key, str):
        raise LoomTypeError(f"make_node: the type key must be a str, got {type(type_key).__name__}")
    known = {k: c for k, c in registered_types().items() if "__attrs_attrs__" in c.__dict__}
    if type_key in known:
        return known[type_key]
    matches = sorted(k for k in known if k.rsplit(".", 1)[-1] == type_key)
    if len(matches) == 1:
        return known[matches[0]]
    if matches:
        raise LoomValueError(f"make_node: the type key {type_key!r} is ambiguous; use one of {matches}")
    near = difflib.get_close_matches(type_key, list(known), n=3)
    hint = f"did you mean {near}? " if near else ""
    raise LoomValueError(f"make_node: no node type is registered as {type_key!r}; {hint}"
                         f"the registered type keys are {sorted(known)}")


def _derived(cls: type, name: str) -> bool:
    """Whether ``name`` is a public attribute ``cls`` computes from its fields (a Tensor's shape)."""
    if name.startswith("_"):
        return False
    field = getattr(attrs.fields(cls), name, None)
    return (field is not None and not field.init) or isinstance(getattr(cls, name, None), property)


def _agrees(actual: Any, given: Any) -> bool:
    from .structural import structural_equal

    if isinstance(actual, Sequence) and not isinstance(actual, str) and isinstance(given, Sequence) \
            and not isinstance(given, str):
        return len(actual) == len(given) and all(_agrees(a, g) for a, g in zip(actual, given))
    if isinstance(actual, Node) or isinstance(given, Node):
        return structural_equal(actual, given)
    return bool(actual == given)


def _field_value(field: attrs.Attribute, v: Any) -> Any:
    """Python numbers and strings in a node field become nodes (``value=10`` of an ``Add`` operand)."""
    from .container import convert

    kind = field.metadata.get("kind")
    plain = (bool, int, float, str)
    if kind == "child" and isinstance(v, plain):
        return convert(v)
    if kind == "children" and isinstance(v, (list, tuple)):
        return tuple(convert(x) if isinstance(x, plain) else x for x in v)
    return v


def make_node(type_key: str, **fields: Any) -> Node:
    """The node registered as ``type_key``, built from its fields by name.

    ``type_key`` is a full key (``"tir.IntImm"``) or, when it names one registered
    type, the part after the last dot (``"IntImm"``, as TVM spelled it).  Every field
    without a default is needed; a Python number given for a node field becomes a
    constant.  An attribute the node computes from its fields (a Tensor's ``shape``
    and ``dtype``) may be given too, and must agree with the computed value.

    :raises LoomValueError: for an unknown or ambiguous type key (listing the
        registered ones), an unknown or missing field (listing the fields), or a
        computed attribute that disagrees.
    :raises LoomTypeError: when a field has the wrong type.

    >>> make_node("EnvFunc", name="some.function").name
    'some.function'
    >>> make_node("IntImm", dtype="int32", valu=1)
    Traceback (most recent call last):
      ...
    loom.errors.LoomValueError: make_node('tir.IntImm'): unknown field(s) ['valu']; its fields are ['dtype', 'value']
    """
    cls = _resolve(type_key)
    key = cls.type_key
    by_name = {f.name: f for f in fields_of(cls)}
    derived = {n: v for n, v in fields.items() if n not in by_name and _derived(cls, n)}
    unknown = sorted(set(fields) - set(by_name) - set(derived))
    if unknown:
        raise LoomValueError(f"make_node({key!r}): unknown field(s) {unknown}; its fields are {list(by_name)}")
    missing = [n for n, f in by_name.items() if f.default is attrs.NOTHING and n not in fields]
    if missing:
        raise LoomValueError(f"make_node({key!r}): missing field(s) {missing}; its fields are {list(by_name)}")
    kwargs = {n: _field_value(by_name[n], v) for n, v in fields.items() if n in by_name}
    factory = getattr(cls, "__from_json_fields__", None) or cls  # one Tensor per output, as load_json keeps
    try:
        node = factory(**kwargs)
    except LoomError:
        raise
    except Exception as err:  # a converter or check of the class refused a value
        raise LoomTypeError(f"make_node({key!r}): {type(err).__name__}: {err}") from None
    for name, given in derived.items():
        actual = getattr(node, name)
        if not _agrees(actual, given):
            raise LoomValueError(f"make_node({key!r}): {name} is computed from the other fields as {actual}, "
                                 f"not the {given} given")
    return node
