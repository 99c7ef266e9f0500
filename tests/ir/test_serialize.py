"""save_json / load_json: every node type round-trips; hostile input raises SerializationError only."""

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom
from loom.errors import LoomError, SerializationError
from loom.ir import expr as E
from loom.ir.node import registered_types

from ir_samples import SAMPLES, TEST_ONLY_PREFIXES


def _roundtrip(node):
    text = loom.save_json(node)
    back = loom.load_json(text)
    assert type(back) is type(node)
    assert loom.structural_equal(back, node, map_free_vars=True), f"{node}\n!=\n{back}"
    assert loom.save_json(back) == text, "saving the loaded object gives the same document"
    return back


def test_every_registered_type_has_a_sample():
    import loom.te.schedule_json  # noqa: F401 - registers its record types on import: load it whichever tests ran first
    keys = {k for k in registered_types() if k != "Object" and not k.startswith(TEST_ONLY_PREFIXES)}
    missing = sorted(keys - set(SAMPLES))
    assert not missing, f"add samples to tests/ir/ir_samples.py for: {missing}"


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_roundtrip_every_registered_type(key):
    node = SAMPLES[key]()
    assert node.type_key == key
    if key == "te.ScheduleRecord":  # the JSON form of a Schedule: loading it gives the Schedule back
        from loom.te.schedule_json import schedule_record

        back = loom.load_json(loom.save_json(node))
        assert isinstance(back, loom.te.Schedule)
        assert loom.structural_equal(schedule_record(back), node, map_free_vars=True)
        return
    _roundtrip(node)


def test_shared_var_comes_back_as_one_object():
    x = loom.var("x")
    e = (x + 1) * (x - 2) + loom.select(x > 0, x, x * x)
    back = loom.load_json(loom.save_json(e))
    found = {id(v) for v in loom.ir.collect(back, lambda n: isinstance(n, E.Var))}
    assert len(found) == 1


def test_function_roundtrip_is_equal_without_mapping_free_vars():
    f = SAMPLES["tir.PrimFunc"]()
    back = loom.load_json(loom.save_json(f))
    assert loom.structural_equal(back, f)
    assert loom.structural_hash(back) == loom.structural_hash(f)
    assert back.buffer_map[back.params[0]].data is back.params[0]


def test_op_identity_is_preserved():
    call = loom.sqrt(loom.var("y", "float32"))
    assert loom.load_json(loom.save_json(call)).op is call.op


def test_python_values_are_converted():
    back = loom.load_json(loom.save_json([1, 2.5, "s", {"k": True}]))
    assert [type(v).__name__ for v in back] == ["IntImm", "FloatImm", "StringImm", "Map"]


def test_document_has_version_and_table():
    doc = json.loads(loom.save_json(loom.var("n") + 1))
    assert doc["loom_json"] == 1 and isinstance(doc["nodes"], list) and doc["root"] == len(doc["nodes"]) - 1


# --- hypothesis-generated expressions -------------------------------------------------

_INT = st.sampled_from(["int8", "int32", "int64", "uint16"])


@st.composite
def exprs(draw, depth=4):
    dtype = draw(_INT)
    pool = [loom.var(n, dtype) for n in "abc"]
    return draw(_expr(pool, dtype, depth))


def _expr(pool, dtype, depth):
    info = loom.DataType.of(dtype)
    lo, hi = (0, 2 ** info.bits - 1) if info.is_uint else (-(2 ** (info.bits - 1)), 2 ** (info.bits - 1) - 1)
    leaf = st.one_of(st.sampled_from(pool), st.integers(lo, hi).map(lambda v: E.IntImm(dtype, v)))
    if depth == 0:
        return leaf
    sub = _expr(pool, dtype, depth - 1)
    binary = st.tuples(st.sampled_from([E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max]), sub, sub)
    select = st.tuples(sub, sub, sub, sub).map(lambda t: E.Select(E.LT(t[0], t[1]), t[2], t[3]))
    cast = sub.map(lambda e: E.Cast(loom.DataType.of("float64"), e)).map(lambda f: E.Cast(info, f))
    return st.one_of(leaf, binary.map(lambda t: t[0](t[1], t[2])), select, cast)


@given(exprs())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_roundtrip_random_expressions(e):
    back = _roundtrip(e)
    assert str(back) == str(e)


@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["float16", "float32", "float64"]))
@settings(max_examples=100, deadline=None)
def test_roundtrip_float_constants(v, dtype):
    _roundtrip(E.FloatImm(dtype, v))


# --- hostile input ------------------------------------------------------------------------

def _valid_doc():
    return loom.save_json(SAMPLES["tir.PrimFunc"]())


def _only_serialization_error(text):
    try:
        loom.load_json(text)
    except SerializationError:
        return
    except Exception as err:  # pragma: no cover - the assertion below reports it
        pytest.fail(f"load_json raised {type(err).__name__}: {err}")


def test_truncated_documents():
    text = _valid_doc()
    for cut in range(0, len(text), max(1, len(text) // 300)):
        with pytest.raises(SerializationError):
            loom.load_json(text[:cut])


def test_mutated_documents_raise_only_serialization_error():
    text = _valid_doc()
    rng = random.Random(1234)
    alphabet = '{}[]",:0123456789-abcdefghijklmnopqrstuvwxyz$ .eE'
    for _ in range(1500):
        chars = list(text)
        for _ in range(rng.randint(1, 4)):
            chars[rng.randrange(len(chars))] = rng.choice(alphabet)
        mutated = "".join(chars)
        try:
            loom.load_json(mutated)
        except SerializationError:
            pass


def _mutations():
    doc = json.loads(_valid_doc())
    first_var = next(i for i, n in enumerate(doc["nodes"]) if n["type"] == "tir.Var")

    def edit(fn):
        d = json.loads(json.dumps(doc))
        fn(d)
        return json.dumps(d)

    yield "unknown type", edit(lambda d: d["nodes"][0].update(type="os.system"))
    yield "abstract type", edit(lambda d: d["nodes"][0].update(type="Object"))
    yield "forward ref", edit(lambda d: d.update(nodes=[{"type": "tir.Not", "fields": {"a": {"$ref": 1}}}] + d["nodes"]))
    yield "self ref", edit(lambda d: d.update(nodes=[{"type": "tir.Not", "fields": {"a": {"$ref": 0}}}], root=0))
    yield "bool ref", edit(lambda d: d["nodes"][-1]["fields"].update(body={"$ref": True}))
    yield "negative ref", edit(lambda d: d["nodes"][-1]["fields"].update(body={"$ref": -1}))
    yield "wrong field type", edit(lambda d: d["nodes"][first_var]["fields"].update(name={"$ref": 0}))
    yield "int for node", edit(lambda d: d["nodes"][-1]["fields"].update(body=5))
    yield "unknown field", edit(lambda d: d["nodes"][first_var]["fields"].update(__class__="x"))
    yield "missing field", edit(lambda d: d["nodes"][-1]["fields"].pop("body"))
    yield "extra key", edit(lambda d: d["nodes"][0].update(code="print(1)"))
    yield "bad dtype", edit(lambda d: d["nodes"][first_var]["fields"].update(dtype={"$dtype": "float7"}))
    yield "unknown tag", edit(lambda d: d["nodes"][first_var]["fields"].update(dtype={"$eval": "1"}))
    yield "bad root", edit(lambda d: d.update(root=10 ** 9))
    yield "future version", edit(lambda d: d.update(loom_json=99))
    yield "string version", edit(lambda d: d.update(loom_json="1"))
    yield "extra top key", edit(lambda d: d.update(more=1))
    yield "nodes not list", edit(lambda d: d.update(nodes={}))
    yield "int out of range", edit(lambda d: d["nodes"].append({"type": "tir.IntImm", "fields": {"dtype": {"$dtype": "int8"}, "value": 1000}}))
    yield "bad map item", json.dumps({"loom_json": 1, "root": 0, "nodes": [{"type": "ir.Map", "fields": {"data": {"$map": [[1]]}}}]})
    yield "unhashable key", json.dumps({"loom_json": 1, "root": 0, "nodes": [{"type": "ir.Map", "fields": {"data": {"$map": [[{"$map": []}, 1]]}}}]})
    yield "deep nesting", "[" * 100000 + "]" * 100000
    deep = []
    for _ in range(80):
        deep = [deep]
    yield "deep values", json.dumps({"loom_json": 1, "root": 0, "nodes": [{"type": "ir.Array", "fields": {"items": deep}}]})
    yield "NaN constant", '{"loom_json": NaN}'
    yield "not json", "not json at all"
    yield "json list", "[1, 2, 3]"
    yield "empty", ""
    yield "bytes garbage", b"\xff\xfe\x00"


@pytest.mark.parametrize("name,text", list(_mutations()))
def test_hostile_documents(name, text):
    with pytest.raises(SerializationError):
        loom.load_json(text)


def test_non_string_input():
    with pytest.raises(SerializationError):
        loom.load_json(12345)


def test_serialization_error_is_a_loom_error():
    assert issubclass(SerializationError, LoomError) and issubclass(SerializationError, ValueError)


def test_saving_unknown_values_fails_cleanly():
    from loom.ir.container import Map

    with pytest.raises(SerializationError):
        loom.save_json(Map({"k": loom.const(1)}).with_(data={"k": object()}))


def test_very_deep_trees_save_load_or_fail_cleanly_in_a_subprocess():
    """A 20000-deep sum saves and loads; walking a 100000-deep one is a LoomError, not a crash."""
    import subprocess
    import sys

    code = """
import loom
from loom.ir import Add
def deep(n):
    e, c = loom.var("x"), loom.const(1)
    for _ in range(n):
        e = Add(e, c)
    return e
e = deep(20000)
back = loom.load_json(loom.save_json(e))
assert type(back) is Add and back.b.value == 1
try:
    loom.structural_equal(deep(100000), deep(100000), map_free_vars=True)
except loom.LoomError:
    print("clean error")
else:
    print("compared")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() in ("clean error", "compared")
