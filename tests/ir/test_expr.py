"""Expressions: operator overloading, folding, dtype promotion, builders and validation."""

import math
import operator

import numpy as np
import pytest

import loom
from loom.errors import IRError, LoomTypeError, LoomValueError
from loom.ir import expr as E
from loom.ir import expr_ops
from loom.ir.op import Op

c = loom.const


def _vars(dtype="int32"):
    return loom.var("x", dtype), loom.var("y", dtype)


# ---------------------------------------------------------------------------
# operator overloading


@pytest.mark.parametrize("op, node, dtype", [
    (operator.add, E.Add, "int32"),
    (operator.sub, E.Sub, "int32"),
    (operator.mul, E.Mul, "int32"),
    (operator.floordiv, E.FloorDiv, "int32"),
    (operator.mod, E.FloorMod, "int32"),
    (operator.lt, E.LT, "bool"),
    (operator.le, E.LE, "bool"),
    (operator.gt, E.GT, "bool"),
    (operator.ge, E.GE, "bool"),
    (operator.eq, E.EQ, "bool"),
    (operator.ne, E.NE, "bool"),
])
def test_binary_operators_build_nodes(op, node, dtype):
    x, y = _vars()
    e = op(x, y)
    assert type(e) is node and e.a is x and e.b is y
    assert e.dtype == dtype


@pytest.mark.parametrize("op, node", [(operator.add, E.Add), (operator.sub, E.Sub), (operator.mul, E.Mul),
                                      (operator.floordiv, E.FloorDiv), (operator.mod, E.FloorMod)])
def test_reflected_operators_keep_operand_order(op, node):
    x = loom.var("x")
    e = op(7, x)
    assert type(e) is node and isinstance(e.a, E.IntImm) and e.a.value == 7 and e.b is x


def test_float_true_division():
    f, g = _vars("float32")
    e = f / g
    assert type(e) is E.Div and e.dtype == "float32"


def test_unary_operators():
    x = loom.var("x")
    neg = -x
    assert type(neg) is E.Sub and neg.a.value == 0 and neg.b is x
    cond = x > 1
    assert type(~cond) is E.Not and (~cond).a is cond
    assert type(cond & (x < 5)) is E.And and type(cond | (x < 5)) is E.Or


def test_vector_operand_broadcasts_scalar():
    r = E.Ramp(loom.var("i"), c(1), 4)
    e = r + 1
    assert e.dtype == "int32x4" and type(e.b) is E.Broadcast and e.b.lanes == 4


def test_vector_lanes_mismatch_is_an_error():
    with pytest.raises(IRError, match="different lanes"):
        E.Ramp(loom.var("i"), c(1), 4) + E.Ramp(loom.var("j"), c(1), 8)


# ---------------------------------------------------------------------------
# constant folding


@pytest.mark.parametrize("expr, dtype, value", [
    (lambda: c(2) + 3, "int32", 5),
    (lambda: c(127, "int8") + 1, "int8", -128),
    (lambda: c(-128, "int8") - 1, "int8", 127),
    (lambda: c(0, "uint8") - 1, "uint8", 255),
    (lambda: c(200, "uint8") * 2, "uint8", 144),
    (lambda: c(2**31 - 1) + 1, "int32", -(2**31)),
    (lambda: c(2**62, "int64") * 4, "int64", 0),
    (lambda: c(-7) // 2, "int32", -4),
    (lambda: c(-7) % 2, "int32", 1),
    (lambda: loom.truncdiv(-7, 2), "int32", -3),
    (lambda: loom.truncmod(-7, 2), "int32", -1),
    (lambda: expr_ops.minimum(c(4), c(-2)), "int32", -2),
    (lambda: expr_ops.maximum(c(4), c(-2)), "int32", 4),
    (lambda: c(3) < 4, "bool", 1),
    (lambda: c(3) == 4, "bool", 0),
])
def test_integer_folding_wraps_like_hardware(expr, dtype, value):
    e = expr()
    assert isinstance(e, E.IntImm)
    assert (str(e.dtype), e.value) == (dtype, value)


def test_float32_folding_rounds_to_float32():
    e = c(1.0) + c(1e-8)
    assert isinstance(e, E.FloatImm) and e.value == 1.0
    wide = c(1.0, "float64") + c(1e-8, "float64")
    assert wide.value == 1.0 + 1e-8
    assert (c(0.1) * c(3.0)).value == float(np.float32(0.1) * np.float32(3.0))


def test_float16_folding_overflows_to_inf():
    e = c(1000.0, "float16") * c(100.0, "float16")
    assert e.dtype == "float16" and e.value == math.inf


def test_identity_folds_keep_the_operand():
    x = loom.var("x")
    assert x + 0 is x and 0 + x is x and x - 0 is x and x * 1 is x and 1 * x is x
    assert loom.floordiv(x, 1) is x
    zero = x * 0
    assert isinstance(zero, E.IntImm) and zero.value == 0
    assert loom.floormod(x, 1).value == 0


def test_float_identities_are_not_folded():
    f = loom.var("f", "float32")
    assert type(f + 0.0) is E.Add  # -0.0 + 0.0 is +0.0
    assert type(f * 0.0) is E.Mul  # nan * 0 is nan


# ---------------------------------------------------------------------------
# dtype promotion


@pytest.mark.parametrize("lhs, rhs, result", [
    ("int32", "int64", "int64"),
    ("int8", "int16", "int16"),
    ("uint32", "int8", "uint32"),
    ("int32", "uint32", "int32"),  # signed wins at equal width, as in TVM (C would say uint32)
    ("uint64", "int64", "int64"),
    ("uint64", "int32", "uint64"),
    ("int64", "float16", "float16"),
    ("float16", "float32", "float32"),
    ("bfloat16", "float16", "float16"),
    ("bool", "int8", "int8"),
])
def test_promotion(lhs, rhs, result):
    a, b = loom.var("a", lhs), loom.var("b", rhs)
    for e in (a + b, b + a):
        assert e.dtype == result
        assert e.a.dtype == result and e.b.dtype == result


def test_promotion_casts_the_narrower_operand():
    a, b = loom.var("a", "int32"), loom.var("b", "int64")
    e = a + b
    assert type(e.a) is E.Cast and e.a.value is a and e.b is b


def test_python_literals_take_the_expression_dtype():
    x = loom.var("x", "int64")
    assert (x + 1).b.dtype == "int64"
    h = loom.var("h", "float16")
    assert (h * 2.5).dtype == "float16"


def test_fractional_literal_promotes_int_to_float():
    x = loom.var("x")
    e = x * 0.5
    assert e.dtype == "float32" and type(e.a) is E.Cast


def test_bool_operands_of_arithmetic_promote_to_int():
    x = loom.var("x")
    e = (x > 1) + 1
    assert e.dtype == "int32" and type(e.a) is E.Cast


def test_handle_does_not_mix():
    with pytest.raises(IRError, match="cannot combine"):
        loom.var("p", "handle") + loom.var("q", "int64")


# ---------------------------------------------------------------------------
# division and bool


def test_true_division_of_integers_raises_with_hint():
    x = loom.var("x")
    with pytest.raises(LoomTypeError, match=r"'//' \(floordiv\), loom.truncdiv"):
        x / 2
    with pytest.raises(LoomTypeError):
        2 / x


@pytest.mark.parametrize("build", [
    lambda x: x // 0, lambda x: x % 0, lambda x: loom.truncdiv(x, 0), lambda x: loom.truncmod(x, 0),
    lambda x: c(6) // c(0),
])
def test_division_by_constant_zero_raises(build):
    with pytest.raises(IRError, match="by the constant zero"):
        build(loom.var("x"))


@pytest.mark.parametrize("fn", [loom.floordiv, loom.floormod, loom.truncdiv, loom.truncmod])
def test_integer_division_builders_reject_floats(fn):
    with pytest.raises(LoomTypeError, match="integer operands"):
        fn(loom.var("f", "float32"), 2.0)


@pytest.mark.parametrize("build", [
    lambda x: x + 1, lambda x: x < 1, lambda x: (x < 1) & (x > -5), lambda x: ~(x < 1),
    lambda x: loom.select(x < 1, x, 0), lambda x: loom.var("f", "float32"),
])
def test_python_bool_of_an_expression_raises(build):
    with pytest.raises(LoomTypeError, match="loom.all/loom.any"):
        bool(build(loom.var("x")))


def test_eq_and_ne_as_bool_mean_identity():
    x, y = _vars()
    assert bool(x == x) and not bool(x == y)
    assert bool(x != y) and not bool(x != x)
    assert x in [y, x] and y not in [x]


# ---------------------------------------------------------------------------
# builders


def test_const_infers_dtype():
    assert [str(c(v).dtype) for v in (3, 2.5, 1 << 40, True, np.int8(3), np.float64(1))] == \
        ["int32", "float32", "int64", "bool", "int8", "float64"]  # numpy scalars keep their dtype, as in TVM
    assert c(3, "float16").dtype == "float16"
    v = c(2, "int32x4")
    assert type(v) is E.Broadcast and v.dtype == "int32x4"


@pytest.mark.parametrize("value, dtype, error", [
    ("s", None, LoomTypeError), (1.5, "int32", LoomTypeError), (1, "handle", LoomTypeError),
    (300, "int8", IRError), (1 << 70, None, IRError), (1, "int33", LoomTypeError),
])
def test_const_rejects(value, dtype, error):
    with pytest.raises(error):
        c(value, dtype)


def test_var_and_size_var():
    n = loom.size_var("n", "int64")
    assert type(n) is E.SizeVar and isinstance(n, E.Var) and n.dtype == "int64"
    assert loom.var("x").dtype == "int32"
    with pytest.raises(LoomTypeError):
        loom.var("x", "int31")


@pytest.mark.parametrize("value, dtype, expected", [
    (3.7, "int32", 3), (-3.7, "int32", -3), (300, "uint8", 44), (-1, "uint16", 65535), (5, "bool", 1),
    (2**40, "int32", 0),
])
def test_cast_folds_constants(value, dtype, expected):
    e = loom.cast(value, dtype)
    assert isinstance(e, E.IntImm) and e.dtype == dtype and e.value == expected


def test_cast_builds_nodes():
    x = loom.var("x")
    assert loom.cast(x, "int32") is x
    e = loom.cast(x, "float32")
    assert type(e) is E.Cast and e.value is x
    v = loom.cast(x, "float32x4")
    assert type(v) is E.Broadcast and v.dtype == "float32x4"
    assert loom.cast(c(1.5), "float16").dtype == "float16"


def test_select():
    x = loom.var("x")
    e = loom.select(x > 0, x, 0)
    assert type(e) is E.Select and e.dtype == "int32"
    assert loom.select(True, x, 0) is x
    with pytest.raises(LoomTypeError, match="bool"):
        loom.select(x, x, 0)


@pytest.mark.parametrize("dtype, lo, hi", [
    ("int8", -128, 127), ("uint8", 0, 255), ("int64", -(2**63), 2**63 - 1), ("bool", 0, 1),
    ("float32", -math.inf, math.inf), ("float16", -math.inf, math.inf),
])
def test_min_and_max_value(dtype, lo, hi):
    assert (loom.min_value(dtype).value, loom.max_value(dtype).value) == (lo, hi)
    assert loom.min_value(dtype).dtype == dtype


def test_all_and_any():
    x = loom.var("x")
    a, b = x > 0, x < 9
    for empty in (loom.all, loom.any):  # issue 15: no arguments is an error, as TVM's was
        with pytest.raises(ValueError, match=rf"loom.{empty.__name__}\(\) needs at least one condition"):
            empty()
    both = loom.all(a, b)
    assert type(both) is E.And and both.a is a and both.b is b
    assert type(loom.any(a, b)) is E.Or
    assert loom.all(a, True) is a and loom.any(a, True).value == 1
    with pytest.raises(LoomTypeError, match="bool operands"):
        loom.all(x)


FLOAT_UNARY = ["exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos",
               "floor", "ceil", "round", "trunc", "fabs", "erf"]


@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_float_intrinsics(name):
    f = loom.var("f", "float16")
    e = getattr(loom, name)(f)
    assert type(e) is E.Call and e.op is Op.get(f"tir.{name}") and e.dtype == "float16" and e.args == (f,)
    with pytest.raises(LoomTypeError, match=f"loom.{name} needs a float"):
        getattr(loom, name)(loom.var("i"))


def test_intrinsic_numpy_implementations_exist():
    for name in FLOAT_UNARY:
        impl = Op.get(name).info.numpy_impl
        out = impl(np.array([0.5], dtype="float32"))
        assert out.dtype == np.float32 and out.shape == (1,)


def test_power():
    f = loom.var("f")
    e = loom.power(loom.var("f", "float32"), 2)
    assert e.op is Op.get("tir.power") and e.args[1].dtype == "float32"
    with pytest.raises(LoomTypeError, match="float"):
        loom.power(f, 2)


def test_abs():
    assert loom.abs(c(-3)).value == 3 and loom.abs(c(-2.5)).value == 2.5
    u = loom.var("u", "uint8")
    assert loom.abs(u) is u
    e = loom.abs(loom.var("i"))
    assert e.op is Op.get("tir.abs") and e.dtype == "int32"


def test_popcount():
    assert loom.popcount(loom.var("i", "int64")).dtype == "int64"
    with pytest.raises(LoomTypeError, match="integer"):
        loom.popcount(loom.var("f", "float32"))


def test_isnan():
    assert loom.isnan(loom.var("i")).value == 0
    e = loom.isnan(loom.var("f", "float32x4"))
    assert e.op is Op.get("tir.isnan") and e.dtype == "boolx4"


def test_if_then_else():
    x = loom.var("x")
    e = loom.if_then_else(x > 0, x, 1)
    assert e.op is Op.get("tir.if_then_else") and e.dtype == "int32" and len(e.args) == 3
    assert loom.if_then_else(False, x, 1).value == 1
    with pytest.raises(LoomTypeError, match="condition must be bool"):
        loom.if_then_else(x, x, 1)


def test_reinterpret():
    e = loom.reinterpret("float32", loom.var("i", "int32"))
    assert e.op is Op.get("tir.reinterpret") and e.dtype == "float32"
    assert loom.reinterpret("int8x4", loom.var("i")).dtype == "int8x4"
    with pytest.raises(LoomTypeError, match="widths differ"):
        loom.reinterpret("float64", loom.var("i"))


def test_likely_and_call_extern():
    x = loom.var("x")
    assert loom.likely(x < 3).dtype == "bool"
    e = loom.call_extern("float32", "my_fn", x, 1)
    assert e.op is Op.get("tir.call_extern") and e.dtype == "float32"
    assert isinstance(e.args[0], E.StringImm) and e.args[0].value == "my_fn" and e.args[1] is x


def test_unknown_op():
    with pytest.raises(LoomValueError, match="unknown intrinsic op 'nope'; registered: tir.abs"):
        Op.get("nope")


# ---------------------------------------------------------------------------
# constructor validation


@pytest.mark.parametrize("build, message", [
    (lambda x: E.Add("1", x), "Add.a expects PrimExpr or Number or bool, got str"),
    (lambda x: E.Add(x, None), "Add.b expects PrimExpr or Number or bool, got NoneType"),
    (lambda x: E.Var(3), "Var.name expects str"),
    (lambda x: E.IntImm("int32", "7"), "IntImm.value expects int"),
    (lambda x: E.IntImm("int32", 1.0), "IntImm.value expects int"),
    (lambda x: E.FloatImm("float32", "1"), "FloatImm.value expects float"),
    (lambda x: E.Cast("float32", [3]), "Cast.value expects PrimExpr"),
    (lambda x: E.Ramp(x, "1", 4), "Ramp.stride expects PrimExpr"),
    (lambda x: E.Broadcast(x, "4"), "Broadcast.lanes expects int"),
    (lambda x: E.Call("int32", "tir.exp", [x]), "Call.op expects Op or GlobalVar"),
    (lambda x: E.Let(x + 1, c(1), x), "Let.var expects Var"),
])
def test_constructors_reject_wrong_field_types(build, message):
    with pytest.raises(LoomTypeError, match=message):
        build(loom.var("x"))


@pytest.mark.parametrize("dtype, value", [
    ("int8", 128), ("int8", -129), ("uint8", -1), ("uint8", 256), ("bool", 2), ("int32", 2**31),
    ("int64", 2**63), ("uint64", 2**64),
])
def test_intimm_range_check(dtype, value):
    with pytest.raises(IRError, match=f"does not fit in {dtype}"):
        E.IntImm(dtype, value)


@pytest.mark.parametrize("dtype, value", [("int8", 127), ("int8", -128), ("uint64", 2**64 - 1), ("bool", True)])
def test_intimm_accepts_the_edges(dtype, value):
    assert E.IntImm(dtype, value).value == int(value)


@pytest.mark.parametrize("build, message", [
    (lambda x: E.IntImm("float32", 1), "scalar integer or bool"),
    (lambda x: E.IntImm("int32x4", 1), "scalar integer or bool"),
    (lambda x: E.FloatImm("int32", 1.0), "scalar float"),
    (lambda x: E.Add(x, loom.var("y", "int64")), "differ in dtype: int32 and int64"),
    (lambda x: E.And(x, x), "bool operands"),
    (lambda x: E.Not(x), "bool operand"),
    (lambda x: E.Select(x, x, x), "condition must be bool"),
    (lambda x: E.Select(x > 0, x, loom.var("f", "float32")), "branches differ"),
    (lambda x: E.Cast("float32x4", x), "lanes differ"),
    (lambda x: E.Ramp(x, c(1), 1), "at least 2 lanes"),
    (lambda x: E.Ramp(x, c(1, "int64"), 4), "scalars of one dtype"),
    (lambda x: E.Broadcast(E.Broadcast(x, 2), 2), "scalar value"),
    (lambda x: E.Let(x, c(1.0), x), "var is int32 but value is float32"),
    (lambda x: loom.decl_buffer((4,))[loom.var("f", "float32")], "non-integer dtype"),
])
def test_constructors_reject_invalid_combinations(build, message):
    with pytest.raises(IRError, match=message):
        build(loom.var("x"))


def test_derived_dtypes():
    x = loom.var("x", "int64")
    assert E.Ramp(x, c(2, "int64"), 8).dtype == "int64x8"
    assert E.Broadcast(c(1.5), 4).dtype == "float32x4"
    assert E.LT(E.Ramp(x, c(1, "int64"), 4), E.Broadcast(x, 4)).dtype == "boolx4"
    assert E.Let(x, c(1, "int64"), c(2.0)).dtype == "float32"
    A = loom.decl_buffer((16,), "float16")
    assert A.vload([0], "float16x4").dtype == "float16x4"


def test_constants_take_tvm_dtypes() -> None:
    """Issue 15, item 8: numpy scalars keep their dtype, a bool constant is a truth value, uint1 is bool."""
    assert loom.const(np.uint8(1)).dtype == "uint8" and loom.const(np.float64(0.5)).dtype == "float64"
    assert loom.const(np.int64(3)).dtype == "int64" and loom.const(np.bool_(True)).dtype == "bool"
    assert loom.const(2, "bool").value == 1 and loom.const(0.0, "bool").value == 0
    assert loom.DataType.of("uint1") == "bool" and loom.DataType.of("uint1x4") == "boolx4"
    x = loom.var("x", "uint1")
    assert x.dtype == "bool"
