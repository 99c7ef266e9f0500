"""JSON save and load of any node graph.

The format is a flat node table.  Each entry names a registered type key and
its fields; a field that holds another node holds ``{"$ref": index}`` of an
*earlier* entry, so shared sub-objects (a Var used in many places) are written
once and come back as one object, and cycles cannot be expressed at all.

    {"loom_json": 1, "root": 3, "nodes": [{"type": "tir.Var", "fields": {...}}, ...]}

Loading never evaluates code: it only instantiates registered node types
through their validating constructors.  Malformed, truncated, oversized or
hostile input raises :class:`~loom.errors.SerializationError` and nothing else.

>>> import loom
>>> x = loom.var("x")
>>> e = loom.load_json(loom.save_json(x * x + 1))
>>> e.a.a is e.a.b  # x is one object after loading
True
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import LoomTypeError, SerializationError
from .dtype import DataType
from .node import Node, field_names, fields_of, type_key_to_class
from .recursion import caused_by_recursion, deep_recursion

__all__ = ["save_json", "load_json", "FORMAT_VERSION", "MAX_JSON_BYTES", "MAX_NODES"]

#: Version of the table format written by :func:`save_json`.
FORMAT_VERSION = 1
#: Inputs larger than this many characters are refused.  Parsing is bounded by it: the worst
#: document this size (millions of tiny JSON values) loads or fails in about 3 s and 450 MB; a
#: typical one (about 65 characters a node) in about 1.5 s and 250 MB.
MAX_JSON_BYTES = 16 << 20
#: Tables with more entries than this are refused (before any node is built).
MAX_NODES = 500_000
#: Nesting depth of plain values (lists, maps) inside one entry.
MAX_VALUE_DEPTH = 64

# Upgraders from older format versions: {from_version: fn(document) -> document}.
_UPGRADERS: dict[int, Any] = {}


# ---------------------------------------------------------------------------
# save


class _Writer:
    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.nodes: list[dict[str, Any]] = []
        self.keep: list[Any] = []

    def node(self, root: Node) -> int:
        """Add ``root`` and everything below it, children first (iteratively: trees can be deep)."""
        index, value = self.index, self.value
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if id(n) in index:
                continue
            cls = type(n)
            names = field_names(cls)
            if not expanded:
                stack.append((n, True))
                children = _child_nodes(n, names)
                if children:
                    stack += [(c, False) for c in reversed(children) if id(c) not in index]
                continue
            key = cls.type_key
            if type_key_to_class(key) is not cls:
                raise SerializationError(f"cannot save {cls.__qualname__}: it is not a registered node type")
            fields = {name: value(getattr(n, name), key, name) for name in names}
            index[id(n)] = len(self.nodes)
            self.keep.append(n)
            self.nodes.append({"type": key, "fields": fields})
        return index[id(root)]

    def value(self, v: Any, key: str, field: str) -> Any:
        """The JSON form of ``v``, found in field ``key.field`` (named in the error when it has none)."""
        t = type(v)
        if t is str or t is int or t is bool or v is None:  # the common cases first (a DataType is a str subclass)
            return v
        if isinstance(v, Node):
            return {"$ref": self.index[id(v)]}  # children were added first
        if isinstance(v, DataType):  # before str: a DataType is a str too
            return {"$dtype": str(v)}
        if isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return v if math.isfinite(v) else {"$float": repr(v)}
        if isinstance(v, (tuple, list)):  # strings inline: a target's feature list holds hundreds
            return [x if type(x) is str else self.value(x, key, field) for x in v]
        if isinstance(v, dict):
            return {"$map": [[self.value(k, key, field), self.value(x, key, field)] for k, x in v.items()]}
        raise SerializationError(f"cannot save a {type(v).__name__} found in field {key}.{field}")


def _child_nodes(n: Node, names: tuple[str, ...]) -> list[Node]:
    """The nodes in fields ``names`` of ``n`` and in their lists, tuples and dicts, in order."""
    out: list[Node] = []
    for name in names:
        v = getattr(n, name)
        if isinstance(v, Node):
            out.append(v)
        elif isinstance(v, (tuple, list, dict)):
            _nested_nodes(v, out)
    return out


def _nested_nodes(v: Any, out: list[Node]) -> None:
    if isinstance(v, Node):
        out.append(v)
    elif isinstance(v, (tuple, list)):
        for x in v:
            _nested_nodes(x, out)
    elif isinstance(v, dict):
        for k, x in v.items():
            _nested_nodes(k, out)
            _nested_nodes(x, out)


def save_json(node: Any) -> str:
    """Serialize a node (and everything it reaches) to a JSON string.

    >>> import loom
    >>> '"loom_json":1' in loom.save_json(loom.var("n"))
    True
    """
    from .container import convert

    root = node if isinstance(node, Node) else convert(node)
    if not isinstance(root, Node):  # a callable converts to a PackedFunc, which has no JSON form
        raise LoomTypeError(f"save_json: a {type(node).__name__} is not a node and has no JSON form")
    w = _Writer()
    idx = w.node(root)
    return json.dumps({"loom_json": FORMAT_VERSION, "root": idx, "nodes": w.nodes}, separators=(",", ":"))


# ---------------------------------------------------------------------------
# load


def _bad(msg: str) -> SerializationError:
    return SerializationError(f"load_json: {msg}")


class _Reader:
    def __init__(self, entries: list[Any]) -> None:
        self.entries = entries
        self.built: list[Any] = []
        self.types: dict[str, tuple[Any, tuple[str, ...], frozenset[str], Any]] = {}

    def build_all(self) -> None:
        append = self.built.append
        for i, entry in enumerate(self.entries):
            append(self.build(i, entry))

    def _type(self, i: int, key: Any) -> tuple[Any, tuple[str, ...], frozenset[str], Any]:
        """``(class, field names, their set, constructor)`` of a type key, looked up once per document."""
        found = self.types.get(key) if isinstance(key, str) else None
        if found is not None:
            return found
        if not isinstance(key, str):
            raise _bad(f"node {i}: 'type' must be a string")
        cls = type_key_to_class(key)
        if cls is None or not hasattr(cls, "__attrs_attrs__"):
            raise _bad(f"node {i}: unknown or abstract type key {key!r}")
        names = tuple(f.name for f in fields_of(cls))
        found = self.types[key] = (cls, names, frozenset(names), getattr(cls, "__from_json_fields__", None) or cls)
        return found

    def build(self, i: int, entry: Any) -> Node:
        if type(entry) is not dict or len(entry) != 2 or "type" not in entry or "fields" not in entry:
            raise _bad(f"node {i} must be an object with exactly 'type' and 'fields'")
        key, fields = entry["type"], entry["fields"]
        cls, names, name_set, factory = self._type(i, key)
        if type(fields) is not dict:
            raise _bad(f"node {i} ({key}): 'fields' must be an object")
        if not name_set.issuperset(fields):
            unknown = set(fields) - name_set
            raise _bad(f"node {i} ({key}): unknown field(s) {sorted(unknown)}; expected {list(names)}")
        built, kwargs = self.built, {}
        for name, v in fields.items():
            # The common case first: a reference to an earlier node.
            if type(v) is dict and len(v) == 1:
                ref = v.get("$ref", self)
                if type(ref) is int and 0 <= ref < i:
                    kwargs[name] = built[ref]
                    continue
            kwargs[name] = self.value(v, i, key, 0)
        try:
            return factory(**kwargs)
        except SerializationError:
            raise
        except Exception as err:  # a validator refused a field: the input is wrong
            raise _bad(f"node {i} ({key}) is invalid: {type(err).__name__}: {err}") from None

    def value(self, v: Any, i: int, key: str, depth: int) -> Any:
        if depth > MAX_VALUE_DEPTH:
            raise _bad(f"node {i} ({key}): values nested deeper than {MAX_VALUE_DEPTH}")
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            built, out = self.built, []
            for x in v:
                tx = type(x)
                if tx is str or tx is int:  # plain items inline too (a target's feature list holds hundreds)
                    out.append(x)
                    continue
                if tx is dict and len(x) == 1:  # a reference, inline: arrays hold many
                    ref = x.get("$ref", self)
                    if type(ref) is int and 0 <= ref < i:
                        out.append(built[ref])
                        continue
                out.append(self.value(x, i, key, depth + 1))
            return tuple(out)
        if not isinstance(v, dict) or len(v) != 1:
            raise _bad(f"node {i} ({key}): malformed value {str(v)[:80]}")
        (tag, payload), = v.items()
        if tag == "$ref":
            if not isinstance(payload, int) or isinstance(payload, bool) or not 0 <= payload < i:
                raise _bad(f"node {i} ({key}): reference {payload!r} does not name an earlier node")
            return self.built[payload]
        if tag == "$dtype" and isinstance(payload, str):
            try:
                return DataType.of(payload)
            except Exception as err:
                raise _bad(f"node {i} ({key}): {err}") from None
        if tag == "$float" and payload in ("nan", "inf", "-inf"):
            return float(payload)
        if tag == "$map" and isinstance(payload, list):
            entries: dict[Any, Any] = {}
            for item in payload:
                if not isinstance(item, list) or len(item) != 2:
                    raise _bad(f"node {i} ({key}): a map item must be a [key, value] pair")
                k = self.value(item[0], i, key, depth + 1)
                try:
                    hash(k)
                except TypeError:
                    raise _bad(f"node {i} ({key}): unhashable map key") from None
                entries[k] = self.value(item[1], i, key, depth + 1)
            return entries
        raise _bad(f"node {i} ({key}): unknown value tag {tag!r}")


def load_json(text: str | bytes, *, limits: bool = True) -> Any:
    """Rebuild the node saved by :func:`save_json`.

    Raises :class:`~loom.errors.SerializationError` for any malformed input.
    ``limits=False`` lifts :data:`MAX_JSON_BYTES` and :data:`MAX_NODES`, for text
    this process wrote itself (a build's own round trip); every other check stays.
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as err:
            raise _bad(f"input is not UTF-8: {err}") from None
    if not isinstance(text, str):
        raise _bad(f"expected a JSON string, got {type(text).__name__}")
    if limits and len(text) > MAX_JSON_BYTES:
        raise _bad(f"input of {len(text)} characters exceeds the limit of {MAX_JSON_BYTES}")
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except SerializationError:
        raise
    except RecursionError:
        raise _bad("input is nested too deeply") from None
    except (ValueError, TypeError) as err:
        raise _bad(f"not valid JSON ({err})") from None
    if not isinstance(doc, dict) or "loom_json" not in doc:
        raise _bad("not a Loom document (no 'loom_json' version)")
    version = doc.get("loom_json")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _bad(f"invalid format version {version!r}")
    while version < FORMAT_VERSION and version in _UPGRADERS:
        doc, version = _UPGRADERS[version](doc), version + 1
    if version != FORMAT_VERSION:
        raise _bad(f"format version {version} is not supported (this Loom reads version {FORMAT_VERSION})")
    nodes, root = doc.get("nodes"), doc.get("root")
    if set(doc) != {"loom_json", "root", "nodes"} or not isinstance(nodes, list):
        raise _bad("the document must hold exactly 'loom_json', 'root' and a 'nodes' list")
    if limits and len(nodes) > MAX_NODES:
        raise _bad(f"{len(nodes)} nodes exceed the limit of {MAX_NODES}")
    if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < len(nodes):
        raise _bad(f"root {root!r} does not name a node")
    reader = _Reader(nodes)
    try:
        with deep_recursion("load_json"):  # constructors may walk what they are given
            reader.build_all()
    except SerializationError:
        raise
    except Exception as err:  # defensive: nothing else may escape
        if getattr(err, "too_deep", False) or caused_by_recursion(err):
            raise _bad("input is nested too deeply") from None
        raise _bad(f"{type(err).__name__}: {err}") from None
    out = reader.built[root]
    # A record of a non-node object (a te Schedule) turns back into that object.
    restore = getattr(out, "restore_object", None)
    return restore() if callable(restore) else out


def _reject_constant(name: str) -> Any:
    raise _bad(f"non-standard JSON constant {name}")
