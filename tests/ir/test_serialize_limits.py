"""load_json's size limits bound its time and memory: over them, a SerializationError before any work (issue 11, item 16).

Measured on the 2-core test machine: the worst document at MAX_JSON_BYTES (millions of
tiny JSON values) loads or fails in about 3 s and 450 MB; a table of ordinary nodes in
about 1.5 s and 250 MB.  The old limit (256 MiB) allowed 16 s and 1.4 GB at 117 MB.
"""

from __future__ import annotations

import json

import numpy as np

import pytest

import loom
from loom.errors import SerializationError
from loom.ir import serialize


def _table(n: int) -> str:
    var = {"type": "tir.Var", "fields": {"name": "x", "dtype": {"$dtype": "int32"}}}
    return json.dumps({"loom_json": 1, "root": 0, "nodes": [var] * n}, separators=(",", ":"))


def test_the_character_limit_is_checked_before_parsing():
    text = " " * (serialize.MAX_JSON_BYTES + 1)
    with pytest.raises(SerializationError, match=f"input of {serialize.MAX_JSON_BYTES + 1} characters exceeds the "
                                                 f"limit of {serialize.MAX_JSON_BYTES}"):
        loom.load_json(text)
    with pytest.raises(SerializationError, match="exceeds the limit"):
        loom.load_json(text.encode())


def test_the_limits_bound_a_document_to_about_16_mib():
    assert serialize.MAX_JSON_BYTES <= 16 << 20
    smallest_entry = len('{"type":"ir.Array","fields":{}},')
    assert serialize.MAX_NODES <= serialize.MAX_JSON_BYTES // smallest_entry


def test_a_table_over_the_node_limit_is_refused_before_any_node_is_built(monkeypatch):
    monkeypatch.setattr(serialize, "MAX_NODES", 10)
    monkeypatch.setattr(serialize._Reader, "build_all", lambda self: pytest.fail("built nodes"))
    with pytest.raises(SerializationError, match="11 nodes exceed the limit of 10"):
        loom.load_json(_table(11))


def test_a_table_at_the_node_limit_loads(monkeypatch):
    monkeypatch.setattr(serialize, "MAX_NODES", 10)
    assert isinstance(loom.load_json(_table(10)), loom.ir.expr.Var)


@pytest.mark.parametrize("items, error", [
    ([{"$ref": 0}, {"$ref": 2}], "reference 2 does not name an earlier node"),
    ([{"$ref": 0}, {"$ref": True}], "reference True does not name an earlier node"),
    ([{"$ref": 0}, {"$ref": -1}], "reference -1 does not name an earlier node"),
    ([{"$ref": 0}, {"$ref": 0, "x": 1}], "malformed value"),
])
def test_references_in_arrays_are_still_checked(items, error):
    """Arrays resolve references inline (they can hold millions): the checks stay the same."""
    var = {"type": "tir.Var", "fields": {"name": "x", "dtype": {"$dtype": "int32"}}}
    doc = {"loom_json": 1, "root": 1, "nodes": [var, {"type": "ir.Array", "fields": {"items": items}}]}
    with pytest.raises(SerializationError, match=error):
        loom.load_json(json.dumps(doc))


def test_a_field_reference_must_name_an_earlier_node():
    var = {"type": "tir.Var", "fields": {"name": "x", "dtype": {"$dtype": "int32"}}}
    add = {"type": "tir.Add", "fields": {"a": {"$ref": 0}, "b": {"$ref": 1}}}
    with pytest.raises(SerializationError, match=r"node 1 \(tir.Add\): reference 1 does not name an earlier node"):
        loom.load_json(json.dumps({"loom_json": 1, "root": 1, "nodes": [var, add]}))


def test_the_size_limits_do_not_apply_to_a_builds_own_round_trip(monkeypatch):
    monkeypatch.setattr(serialize, "MAX_JSON_BYTES", 2000)
    monkeypatch.setattr(serialize, "MAX_NODES", 50)
    A = loom.placeholder((16,), name="A")
    B = loom.compute((16,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = loom.create_schedule(B.op)
    text = loom.save_json(loom.lower(s, [A, B]))
    assert len(text) > 2000
    with pytest.raises(loom.SerializationError, match="exceeds the limit"):
        loom.load_json(text)
    assert loom.load_json(text, limits=False) is not None
    f = loom.build(s, [A, B], target="interp")  # the interp backend's artifact is such a JSON text
    b = np.zeros(16, "float32")
    f(np.arange(16, dtype="float32"), b)
    np.testing.assert_array_equal(b, np.arange(16, dtype="float32") * 2 + 1)
