"""Issue 15: small classic-API fixes in the IR: any/all, structural_equal of numbers, vload/vstore, make_node."""

import numpy as np
import pytest

import loom
from loom.errors import IRError, LoomTypeError, LoomValueError
from loom.ir import Add, Buffer, FloatImm, IntImm, Or, make_node, register_object
from loom.ir.node import Node, value

TARGETS = ["interp", "llvm", "c"]


# --------------------------------------------------------------------------- loom.any / loom.all (TVM's test_any/all)


@pytest.mark.parametrize("fn, node", [(loom.any, "Or"), (loom.all, "And")])
def test_any_all_need_a_condition(fn, node):
    x, y, z = loom.var("x"), loom.var("y"), loom.var("z")
    with pytest.raises(ValueError) as info:
        fn()
    assert isinstance(info.value, LoomValueError) and f"loom.{fn.__name__}() needs at least one" in str(info.value)
    with pytest.raises(ValueError):
        x or x  # noqa: B018 - an expression is no Python bool
    one = x < y
    assert fn(one) is one
    three = fn(x < y, y > z + 1, x < z * 2)
    assert type(three).__name__ == node and type(three.a).__name__ == node  # folded from the left
    assert loom.structural_equal(three.b, x < z * 2)


def test_any_all_fold_constants_and_check_bool():
    x = loom.var("x")
    assert loom.any(x > 0, True).value == 1 and loom.all(False, x > 0).value == 0
    assert loom.any(True).value == 1 and loom.all(False).value == 0
    with pytest.raises(LoomTypeError, match="bool operands"):
        loom.any(x)
    assert type(loom.any(x > 0, x < -5)) is Or


# --------------------------------------------------------------------------- structural_equal of Python numbers


def test_structural_equal_converts_a_number_facing_an_expression():
    """TVM's test_buffer_access_ptr_offset, through ir_pass.Equal's spelling."""
    m, n = loom.var("m"), loom.var("n")
    Ab = loom.decl_buffer((m, n), "float32")
    aptr = Ab.access_ptr("rw", offset=100)
    offset = loom.arith.simplify(aptr.args[2])
    assert loom.structural_equal(offset, 100) and loom.structural_equal(100, offset)
    assert not loom.structural_equal(offset, 101)
    v = loom.var("v")
    aptr = Ab.access_ptr("rw", offset=100 + 100 + v)
    assert loom.structural_equal(loom.arith.simplify(aptr.args[2]), v + 200)
    assert aptr.args[4].value == Buffer.READ | Buffer.WRITE


def test_structural_equal_numbers_follow_the_expression_dtype():
    assert loom.structural_equal(loom.const(7, "int64"), 7)
    assert loom.structural_equal(loom.const(2.0, "float64"), 2) and loom.structural_equal(2.5, loom.const(2.5))
    assert not loom.structural_equal(loom.const(2.5), 2)  # 2 as float32 is 2.0
    assert not loom.structural_equal(loom.const(3), 3.0)  # a float facing an int is a float constant
    assert loom.structural_equal(loom.const(True), True) and loom.structural_equal(loom.const(1, "uint8"), np.int64(1))
    assert not loom.structural_equal(loom.var("x"), 1)
    assert not loom.structural_equal(loom.const(1, "int64"), 2 ** 80)  # no constant holds it: unequal, no error
    loom.assert_structural_equal(loom.const(4, "int16"), 4)
    with pytest.raises(LoomValueError, match="structural mismatch"):
        loom.assert_structural_equal(loom.const(4), 5)


def test_structural_equal_of_other_objects_is_unchanged():
    assert loom.structural_equal(1, 1) and not loom.structural_equal(1, 1.0)
    assert not loom.structural_equal(loom.convert([1]), 1)  # an Array is no expression
    assert not loom.structural_equal(loom.ir.StringImm("a"), "a")
    assert loom.structural_equal(loom.convert([1, 2]), loom.convert([1, 2]))


# --------------------------------------------------------------------------- Buffer.vload / vstore with one index


@pytest.mark.parametrize("target", TARGETS)
def test_add_pipeline_vload_vstore_a_single_index(target):
    """TVM's test_codegen_extern::test_add_pipeline (CPU part): float32x2 loads and stores at ``i*2``."""
    nn = 64
    n = loom.convert(nn)
    A = loom.placeholder((n,), name="A")

    def extern_generator(ins, outs):
        ib = loom.ir_builder.create()
        with ib.for_range(0, (n + 1) // 2) as i:
            ib.emit(outs[0].vstore(i * 2, ins[0].vload(i * 2, "float32x2") + loom.const(1, "float32x2")))
        return ib.get()

    C = loom.extern(A.shape, [A], extern_generator, name="C")
    f = loom.build(loom.create_schedule(C.op), [A, C], target)
    a = np.random.default_rng(15).uniform(size=nn).astype("float32")
    c = np.zeros(nn, "float32")
    f(a, c)
    np.testing.assert_allclose(c, a + 1, rtol=1e-6)


def test_single_index_forms():
    A = loom.decl_buffer((8,), "float32", name="A")
    i = loom.var("i")
    assert loom.structural_equal(A.vload(i), A.vload([i]))
    assert loom.structural_equal(A.vload(3, "float32x4"), A.vload([3], "float32x4"))
    store = A.vstore(i, 1)  # a Python number is a constant of the buffer's dtype
    assert store.value.dtype == "float32" and store.indices[0] is i
    assert loom.structural_equal(A.vstore(2, loom.const(0.0, "float32x2")).indices[0], loom.ir.Ramp(loom.const(2), loom.const(1), 2))
    assert A.offset_of(5).value == 5
    V = loom.decl_buffer((4,), "float32x4", name="V")  # lanes counted in the buffer's elements
    assert V.vload(0, "float32x8").dtype == "float32x8" and V.vload(1).dtype == "float32x4"


@pytest.mark.parametrize("call", [
    lambda B, i: B.vload(i * 2, "float32x2"),
    lambda B, i: B.vstore(i, loom.const(1.0)),
    lambda B, i: B.offset_of(i),
])
def test_a_single_index_of_a_2d_buffer_is_a_clear_error(call):
    B = loom.decl_buffer((4, 8), "float32", name="B")
    with pytest.raises(IRError, match=r"buffer B has 2 dimensions, indexed with 1 \(i.*\); pass a list of 2 indices"):
        call(B, loom.var("i"))


def test_vload_vstore_check_counts_and_dtypes():
    B = loom.decl_buffer((4, 8), "float32", name="B")
    with pytest.raises(IRError, match=r"vload: buffer B has 2 dimensions, indexed with 3 \(1, 2, 3\)"):
        B.vload([1, 2, 3])
    with pytest.raises(IRError, match=r"vstore: buffer B has 2 dimensions, indexed with 1 \(0\)"):
        B.vstore([0], 1.0)
    with pytest.raises(LoomTypeError, match="vload: cannot load int32x2 from buffer B of float32"):
        B.vload([0, 0], "int32x2")
    with pytest.raises(LoomTypeError, match="vstore: cannot store a int32 value into buffer B of float32"):
        B.vstore([0, 0], loom.const(1))
    with pytest.raises(LoomTypeError, match="vload: index 1 of buffer B: expected an expression or a number, got str"):
        B.vload([0, "j"])
    with pytest.raises(LoomTypeError, match="vload: index 0 of buffer B"):
        loom.decl_buffer((4,), name="B").vload(None)


# --------------------------------------------------------------------------- make_node (TVM's tvm.make.node)


def test_make_node_as_tvm_test_make_node():
    x = make_node("IntImm", dtype="int32", value=10)
    assert isinstance(x, IntImm) and x.value == 10 and x.dtype == "int32"
    A = loom.placeholder((10,), name="A")
    AA = make_node("Tensor", shape=A.shape, dtype=A.dtype, op=A.op, value_index=A.value_index)
    assert AA.op is A.op and AA.value_index == A.value_index and AA is A  # one Tensor per output


def test_make_node_by_full_key_and_conversions():
    v = loom.var("v")
    add = make_node("tir.Add", a=v, b=1)  # a Python number for a node field is a constant
    assert type(add) is Add and add.a is v and add.b.value == 1
    assert loom.structural_equal(make_node("tir.FloatImm", dtype="float64", value=0.5), loom.const(0.5, "float64"))
    assert type(make_node("FloatImm", dtype="float32", value=1.0)) is FloatImm
    assert make_node("EnvFunc", name="some.function").name == "some.function"
    arr = make_node("ir.Array", items=[1, v])
    assert arr[0].value == 1 and arr[1] is v
    s = make_node("tir.Evaluate", value=loom.const(0))
    assert loom.structural_equal(loom.load_json(loom.save_json(s)), s)


def test_make_node_errors_list_what_is_valid():
    with pytest.raises(LoomValueError, match=r"no node type is registered as 'IntImmm'; did you mean \['tir.IntImm'\]\? "
                                             r"the registered type keys are \[.*'tir.Var'"):
        make_node("IntImmm", value=1)
    with pytest.raises(LoomValueError, match=r"make_node\('tir.IntImm'\): unknown field\(s\) \['unknown_key'\]; "
                                             r"its fields are \['dtype', 'value'\]"):
        make_node("IntImm", dtype="int32", value=1, unknown_key=1)
    with pytest.raises(LoomValueError, match=r"missing field\(s\) \['value'\]"):
        make_node("IntImm", dtype="int32")
    with pytest.raises(LoomTypeError, match="IntImm.value expects int, got str"):
        make_node("IntImm", dtype="int32", value="ten")
    with pytest.raises(LoomTypeError, match="the type key must be a str, got int"):
        make_node(3)
    A = loom.placeholder((10,), name="A")
    with pytest.raises(LoomValueError, match=r"shape is computed from the other fields as \(10,\), not the \[11\]"):
        make_node("te.Tensor", op=A.op, shape=[11])
    with pytest.raises(LoomValueError, match="no node type is registered as 'Object'"):
        make_node("Object")  # the abstract base


@register_object("test.classic_a.Twin")
class _TwinA(Node):
    tag: str = value(str)


@register_object("test.classic_b.Twin")
class _TwinB(Node):
    tag: str = value(str)


def test_make_node_ambiguous_short_key():
    with pytest.raises(LoomValueError, match=r"'Twin' is ambiguous; use one of \['test.classic_a.Twin', "
                                             r"'test.classic_b.Twin'\]"):
        make_node("Twin", tag="x")
    assert type(make_node("test.classic_b.Twin", tag="x")) is _TwinB


@pytest.mark.parametrize("value", [np.bool_(1), np.uint8(1), np.uint16(1), np.uint32(1), np.uint64(1), np.int8(1),
                                   np.int16(1), np.int32(1), np.int64(1), np.float16(1), np.float32(1), np.float64(1)])
def test_convert_keeps_a_numpy_scalars_dtype(value):
    """As TVM's convert did (and loom.const does): np.uint8(1) is a uint8 constant, not an int32."""
    node = loom.convert(value)
    assert node.dtype == str(np.array(value).dtype) and loom.const(value).dtype == node.dtype
    assert node.value == 1


def test_convert_keeps_pythons_defaults():
    assert [str(loom.convert(v).dtype) for v in (1, 1 << 40, 1.0, True)] == ["int32", "int64", "float32", "bool"]
