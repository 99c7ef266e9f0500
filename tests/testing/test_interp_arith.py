"""Arithmetic, comparison, logic and cast semantics of every dtype, against numpy and Python."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loom
from loom.ir import BufferStore, For
from loom.ir import expr as E
from loom.testing import DivisionByZero, InterpreterError, evaluate

from interp_helpers import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, np_dtype, prim, run_elementwise, sample


def _wrap(v, dtype):
    t = loom.DataType.of(dtype)
    v &= (1 << t.bits) - 1
    return v - (1 << t.bits) if t.is_int and v >= 1 << (t.bits - 1) else v


def _tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _tmod(a, b):
    return a - _tdiv(a, b) * b


PY_REF = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.Div: _tdiv, E.Mod: _tmod, E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b,
    E.Min: min, E.Max: max,
}
NP_FLOAT_REF = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.divide, E.Mod: np.fmod,
    E.FloorDiv: lambda a, b: np.floor(a / b), E.FloorMod: lambda a, b: a - np.floor(a / b) * b,
    E.Min: lambda a, b: np.where(a < b, a, b), E.Max: lambda a, b: np.where(a > b, a, b),
}
CMP = {E.EQ: np.equal, E.NE: np.not_equal, E.LT: np.less, E.LE: np.less_equal, E.GT: np.greater, E.GE: np.greater_equal}


def _same(actual, expect):
    np.testing.assert_array_equal(np.asarray(actual, dtype=np.float64), np.asarray(expect, dtype=np.float64))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", [E.Add, E.Sub, E.Mul, E.Min, E.Max])
def test_integer_arithmetic_wraps_like_numpy(dtype, op):
    """Full-range operands: the result wraps at the dtype's width exactly as numpy arrays do."""
    rng = np.random.default_rng(3)
    a, b = sample(dtype, 64, rng), sample(dtype, 64, rng)
    out = run_elementwise(op, [a, b], dtype)
    ref = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Min: np.minimum, E.Max: np.maximum}[op]
    np.testing.assert_array_equal(out, ref(a, b))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", [E.Div, E.Mod, E.FloorDiv, E.FloorMod])
def test_integer_division_matches_python_semantics(dtype, op):
    """Div/Mod truncate toward zero, FloorDiv/FloorMod floor; both wrap (INT_MIN / -1)."""
    rng = np.random.default_rng(4)
    a, b = sample(dtype, 64, rng), sample(dtype, 64, rng)
    b[b == 0] = 1
    if np.iinfo(a.dtype).min < 0:
        a[:3], b[:3] = np.iinfo(a.dtype).min, (-1, 7, -7)
    out = run_elementwise(op, [a, b], dtype)
    expect = [_wrap(PY_REF[op](int(x), int(y)), dtype) for x, y in zip(a, b)]
    assert [int(v) for v in out] == expect


@pytest.mark.parametrize("divisor", [2, 3, -3, 1, -1, 8])
def test_truncdiv_versus_floordiv_with_negative_operands(divisor):
    """Constant divisors (the fast paths) agree with the C and Python definitions."""
    a = np.array([-7, -6, -1, 0, 1, 6, 7, -2**31], np.int32)
    c = loom.const(divisor)
    for op, ref in ((E.Div, _tdiv), (E.Mod, _tmod), (E.FloorDiv, lambda x, y: x // y), (E.FloorMod, lambda x, y: x % y)):
        out = run_elementwise(lambda x: op(x, c), [a], "int32")
        assert [int(v) for v in out] == [_wrap(ref(int(x), divisor), "int32") for x in a], op.__name__


def test_small_wraparound_cases():
    """The classic int8/uint8 overflows."""
    i8 = np.array([127, -128, 100], np.int8)
    out = run_elementwise(lambda x: E.Add(x, loom.const(1, "int8")), [i8], "int8")
    assert out.tolist() == [-128, -127, 101]
    u8 = np.array([0, 200, 255], np.uint8)
    assert run_elementwise(lambda x: E.Sub(x, loom.const(1, "uint8")), [u8], "uint8").tolist() == [255, 199, 254]
    assert run_elementwise(lambda x: E.Mul(x, loom.const(2, "uint8")), [u8], "uint8").tolist() == [0, 144, 254]
    i32 = np.array([2**31 - 1], np.int32)
    assert run_elementwise(lambda x: E.Mul(x, x), [i32], "int32").tolist() == [1]


@pytest.mark.parametrize("op", [E.Div, E.Mod, E.FloorDiv, E.FloorMod])
def test_integer_division_by_zero_raises(op):
    """A zero divisor is an error for scalars and for vector lanes."""
    a, b = np.array([5, 6], np.int32), np.array([1, 0], np.int32)
    with pytest.raises(DivisionByZero, match="division by zero"):
        run_elementwise(op, [a, b], "int32")
    A, B, C = (loom.decl_buffer((2,), "int32", name=x) for x in "ABC")
    f = prim(C.vstore([0], op(A.vload([0], "int32x2"), B.vload([0], "int32x2"))), A, B, C)
    with pytest.raises(DivisionByZero):
        evaluate(f, a, b, np.zeros(2, np.int32))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", list(NP_FLOAT_REF))
def test_float_arithmetic_rounds_in_its_dtype(dtype, op):
    """Scalar float ops give numpy's result in the exact dtype (IEEE, division by zero included)."""
    rng = np.random.default_rng(5)
    a, b = sample(dtype, 32, rng), sample(dtype, 32, rng)
    b[:2] = 0
    with np.errstate(all="ignore"):
        expect = NP_FLOAT_REF[op](a, b).astype(a.dtype)
    _same(run_elementwise(op, [a, b], dtype), expect)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", list(CMP))
def test_comparisons_give_bool(dtype, op):
    """Comparisons of every dtype (NaN included) store numpy's bools."""
    rng = np.random.default_rng(6)
    a, b = sample(dtype, 32, rng), sample(dtype, 32, rng)
    b[:4] = a[:4]
    if loom.DataType.of(dtype).is_float:
        a[5] = np.nan
    with np.errstate(invalid="ignore"):
        expect = CMP[op](a, b)
    np.testing.assert_array_equal(run_elementwise(op, [a, b], "bool"), expect)


def test_logical_operators():
    """And, Or and Not on bools."""
    a = np.array([0, 0, 1, 1], bool)
    b = np.array([0, 1, 0, 1], bool)
    np.testing.assert_array_equal(run_elementwise(E.And, [a, b], "bool"), a & b)
    np.testing.assert_array_equal(run_elementwise(E.Or, [a, b], "bool"), a | b)
    np.testing.assert_array_equal(run_elementwise(E.Not, [a], "bool"), ~a)


def test_bool_arithmetic_converts_like_c():
    """bool + bool is true when either is; bool - bool is their difference's truth."""
    a = np.array([0, 0, 1, 1], bool)
    b = np.array([0, 1, 0, 1], bool)
    assert run_elementwise(E.Add, [a, b], "bool").tolist() == [False, True, True, True]
    assert run_elementwise(E.Sub, [a, b], "bool").tolist() == [False, True, True, False]


def _cast_inputs(src, dst, rng):
    s, d = loom.DataType.of(src), loom.DataType.of(dst)
    if s.is_float and d.is_integer:  # only the defined range: C leaves the rest undefined
        lo = 0.0 if d.is_uint else -100.0
        return sample(src, 16, rng, lo, 100.0)
    return sample(src, 16, rng, -70000.0, 70000.0)


@pytest.mark.parametrize("src", ALL_DTYPES)
@pytest.mark.parametrize("dst", ALL_DTYPES)
def test_cast_matches_numpy_astype(src, dst):
    """Scalar and 4-lane casts between every pair of dtypes agree with numpy's astype."""
    rng = np.random.default_rng(7)
    a = _cast_inputs(src, dst, rng)
    with np.errstate(all="ignore"):
        expect = a.astype(np_dtype(dst))
    _same(run_elementwise(lambda x: E.Cast(dst, x), [a], dst), expect)
    A = loom.decl_buffer((16,), src, name="A")
    C = loom.decl_buffer((16,), dst, name="C")
    i = loom.var("i")
    vec = For(i, 0, 4, "serial", C.vstore([i * 4], E.Cast(f"{dst}x4", A.vload([i * 4], f"{src}x4"))))
    out = np.zeros(16, np_dtype(dst))
    evaluate(prim(vec, A, C), a, out)
    _same(out, expect)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_cast_of_non_finite_float_to_int_raises(value):
    """Converting NaN or infinity to an integer is undefined, so it is an error."""
    with pytest.raises(InterpreterError, match="not a finite number"):
        run_elementwise(lambda x: E.Cast("int32", x), [np.array([value], np.float32)], "int32")


def test_ramp_and_broadcast_vectors():
    """Strided Ramp gathers, Broadcast operands and a vector store."""
    A = loom.decl_buffer((16,), "int16", name="A")
    C = loom.decl_buffer((8,), "int16", name="C")
    ramp = E.Ramp(loom.const(1), loom.const(2), 8)  # 1, 3, ..., 15
    three = E.Broadcast(loom.const(3, "int16"), 8)
    body = BufferStore(C, E.Mul(E.BufferLoad(A, [ramp]), three), [E.Ramp(loom.const(0), loom.const(1), 8)])
    a = np.arange(16, dtype=np.int16) * 5000
    c = np.zeros(8, np.int16)
    evaluate(prim(body, A, C), a, c)
    np.testing.assert_array_equal(c, a[1::2] * np.int16(3))


def test_vector_arithmetic_select_and_compare():
    """Lane-wise Div, Min, comparison and a vector Select."""
    A, B, C = (loom.decl_buffer((4,), "int32", name=x) for x in "ABC")
    va, vb = A.vload([0], "int32x4"), B.vload([0], "int32x4")
    value = E.Select(E.LT(va, vb), E.Div(va, vb), E.Min(va, vb) + E.FloorMod(va, vb))
    a = np.array([-7, 9, 5, -8], np.int32)
    b = np.array([2, 4, -3, -3], np.int32)
    c = np.zeros(4, np.int32)
    evaluate(prim(C.vstore([0], value), A, B, C), a, b, c)
    expect = [_tdiv(x, y) if x < y else min(x, y) + x % y for x, y in zip(a.tolist(), b.tolist())]
    assert c.tolist() == expect


def test_vector_float_lanes_keep_their_dtype():
    """float16 vectors compute and round in float16."""
    A, C = loom.decl_buffer((8,), "float16", name="A"), loom.decl_buffer((8,), "float16", name="C")
    v = A.vload([0], "float16x8")
    a = np.linspace(-2, 2, 8).astype(np.float16)
    c = np.zeros(8, np.float16)
    evaluate(prim(C.vstore([0], E.Max(v * v, E.Broadcast(loom.const(0.5, "float16"), 8)) / v), A, C), a, c)
    np.testing.assert_array_equal(c, np.where(a * a > np.float16(0.5), a * a, np.float16(0.5)) / a)


_OPS = st.sampled_from([E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max])


@settings(max_examples=250, deadline=None)
@given(st.sampled_from(INT_DTYPES).flatmap(lambda t: st.tuples(
    st.just(t), _OPS, *(st.integers(int(np.iinfo(t).min), int(np.iinfo(t).max)) for _ in range(2)), st.booleans())))
def test_integer_scalar_ops_agree_with_python(case):
    """Scalar parameters (Python ints), with a variable or constant right operand, wrap like Python + masking."""
    dtype, op, x, y, const_rhs = case
    if op in (E.Div, E.Mod, E.FloorDiv, E.FloorMod) and y == 0:
        y = 1
    a, b = loom.var("a", dtype), loom.var("b", dtype)
    C = loom.decl_buffer((1,), dtype, name="C")
    rhs = loom.const(y, dtype) if const_rhs else b
    c = np.zeros(1, np_dtype(dtype))
    evaluate(prim(BufferStore(C, op(a, rhs), [0]), a, b, C), x, y, c)
    assert int(c[0]) == _wrap(PY_REF[op](x, y), dtype)
