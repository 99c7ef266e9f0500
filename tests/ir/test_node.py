"""The object registry, reflection, immutability and convert()."""

import pickle

import attrs
import pytest

import loom
from loom.errors import LoomError, LoomTypeError
from loom.ir import expr as E
from loom.ir.node import Node, fields_of, register_object, registered_types, type_index_to_key, value


def test_registry_maps_key_index_and_class():
    reg = registered_types()
    assert reg["tir.Add"] is E.Add
    assert type_index_to_key(E.Add.type_index) == "tir.Add"
    assert E.Add.parent_key == "Object"  # abstract bases are not registered
    assert E.SizeVar.parent_key == "tir.Var"
    indices = [cls.type_index for cls in reg.values()]
    assert len(set(indices)) == len(indices)


def test_register_object_builds_a_frozen_attrs_class():
    @register_object("test.Pair")
    class Pair(Node):
        first: int = value(int)
        second: str = value(str, default="b")

    p = Pair(1)
    assert attrs.has(Pair) and p.type_key == "test.Pair"
    assert [f.name for f in fields_of(Pair)] == ["first", "second"]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.first = 2
    with pytest.raises(LoomTypeError, match="Pair.first expects int, got str"):
        Pair("x")


def test_duplicate_type_key_is_an_error():
    with pytest.raises(LoomError, match="already registered"):
        register_object("tir.Add")(type("Dup", (Node,), {}))


def test_reflection_skips_derived_fields():
    assert [f.name for f in fields_of(E.Add)] == ["a", "b"]
    assert [f.name for f in fields_of(E.Ramp)] == ["base", "stride", "lanes"]


def test_with_returns_self_when_nothing_changes():
    x = loom.var("x")
    e = x + 1
    assert e.with_(a=x) is e
    e2 = e.with_(b=loom.const(2))
    assert e2 is not e and e2.b.value == 2 and e.b.value == 1


def test_nodes_hash_by_identity():
    x = loom.var("x")
    assert len({x + 1, x + 1}) == 2
    d = {x: 1}
    assert d[x] == 1


def test_pickle_keeps_sharing():
    x = loom.var("x")
    e = x * x
    back = pickle.loads(pickle.dumps(e))
    assert back.a is back.b and loom.structural_equal(back, e, map_free_vars=True)
    # One Var pickled with two expressions is one Var after loading (a memo per pickle, as for any object).
    a, b = pickle.loads(pickle.dumps((x + 1, x * 2)))
    assert a.a is b.a and a.a is not x


def test_ops_pickle_to_their_registered_singleton():
    op = loom.ir.Op.get("tir.exp")
    assert pickle.loads(pickle.dumps(op)) is op
    call = loom.exp(loom.var("y", "float32"))
    assert pickle.loads(pickle.dumps(call)).op is op


@pytest.mark.parametrize(
    "value,type_name,dtype",
    [
        (1, "IntImm", "int32"),
        (-(2**31), "IntImm", "int32"),
        (2**31, "IntImm", "int64"),
        (-(2**40), "IntImm", "int64"),
        (2.5, "FloatImm", "float32"),
        (True, "IntImm", "bool"),
        ("hi", "StringImm", "handle"),
    ],
)
def test_convert_scalars(value, type_name, dtype):
    node = loom.convert(value)
    assert type(node).__name__ == type_name and str(node.dtype) == dtype


def test_convert_containers_and_nodes():
    x = loom.var("x")
    assert loom.convert(x) is x
    arr = loom.convert([1, (2, 3)])
    assert type(arr).__name__ == "Array" and type(arr[1]).__name__ == "Array"
    m = loom.convert({"a": 1, "b": [x]})
    assert type(m).__name__ == "Map" and m["b"][0] is x


@pytest.mark.parametrize("bad", [object(), 2**70, {1, 2}, None, b"bytes"])
def test_convert_rejects_other_values(bad):
    with pytest.raises(TypeError):
        loom.convert(bad)
