"""Calls: every intrinsic op, if_then_else/reinterpret/likely, externs and calls between functions."""

import math

import ml_dtypes
import numpy as np
import pytest

import loom
from loom.ir import BufferStore, Evaluate, For, GlobalVar, IRModule, seq
from loom.ir import expr as E
from loom.ir.intrin import call_intrin
from loom.testing import InterpreterError, OutOfBoundsError, evaluate, register_extern, unregister_extern

from interp_helpers import FLOAT_DTYPES, INT_DTYPES, elementwise, np_dtype, prim, run_elementwise, sample

_erf = np.vectorize(math.erf, otypes=[np.float64])
FLOAT_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh,
    "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "fabs": np.fabs, "erf": _erf,
}


def _in_dtype(ref, a):
    """numpy's result rounded to a's dtype (bfloat16 computes through float32, as its op does)."""
    with np.errstate(all="ignore"):
        if a.dtype == ml_dtypes.bfloat16:
            return ref(a.astype(np.float32)).astype(a.dtype)
        return np.asarray(ref(a)).astype(a.dtype)


def _same(actual, expect):
    np.testing.assert_array_equal(actual.astype(np.float64), expect.astype(np.float64))


def run_elementwise_with(fn, arrays, out_dtype, externs):
    """run_elementwise with extern functions."""
    out = np.zeros(len(arrays[0]), np_dtype(out_dtype))
    f = elementwise(fn, [str(loom.DataType.of(a.dtype)) for a in arrays], out_dtype, len(arrays[0]))
    evaluate(f, *arrays, out, externs=externs)
    return out


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
def test_float_intrinsics_match_numpy(name, dtype):
    a = sample(dtype, 16, np.random.default_rng(10), -4.0, 4.0)
    a[:3] = np.array([0.5, 2.5, -2.5]).astype(a.dtype)  # round's ties, log of a negative
    _same(run_elementwise(getattr(loom, name), [a], dtype), _in_dtype(FLOAT_UNARY[name], a))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_power_and_isnan(dtype):
    rng = np.random.default_rng(11)
    a, b = sample(dtype, 16, rng, 0.0, 3.0), sample(dtype, 16, rng, -2.0, 2.0)
    a[0] = np.nan
    _same(run_elementwise(loom.power, [a, b], dtype), _in_dtype(lambda x: np.power(x, b.astype(x.dtype)), a))
    np.testing.assert_array_equal(run_elementwise(loom.isnan, [a], "bool"), np.isnan(a.astype(np.float32)))


@pytest.mark.parametrize("dtype", INT_DTYPES + ["float32"])
def test_abs_wraps_the_minimum_integer(dtype):
    a = sample(dtype, 16, np.random.default_rng(12))
    op = lambda x: call_intrin(x.dtype, "tir.abs", x)  # noqa: E731 - loom.abs folds unsigned away
    np.testing.assert_array_equal(run_elementwise(op, [a], dtype), np.abs(a))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_popcount_counts_bits_of_the_twos_complement(dtype):
    a = sample(dtype, 16, np.random.default_rng(13))
    bits = loom.DataType.of(dtype).bits
    expect = [bin(int(x) & ((1 << bits) - 1)).count("1") for x in a]
    assert run_elementwise(loom.popcount, [a], dtype).tolist() == expect


def test_vector_intrinsic_call():
    A, C = loom.decl_buffer((4,), "float32", name="A"), loom.decl_buffer((4,), "float32", name="C")
    a, c = np.linspace(0, 1, 4, dtype=np.float32), np.zeros(4, np.float32)
    evaluate(prim(C.vstore([0], loom.exp(A.vload([0], "float32x4"))), A, C), a, c)
    np.testing.assert_array_equal(c, np.exp(a))


def _guarded(select_kind):
    """C[i] = A[i] if i < 4 else -1 for i in 0..8, with A of length 4."""
    A, C = loom.decl_buffer((4,), "int32", name="A"), loom.decl_buffer((8,), "int32", name="C")
    i = loom.var("i")
    cond, minus = E.LT(i, loom.const(4)), loom.const(-1)
    value = loom.if_then_else(cond, A[i], minus) if select_kind == "if_then_else" else E.Select(cond, A[i], minus)
    return prim(For(i, 0, 8, "serial", BufferStore(C, value, [i])), A, C)


def test_if_then_else_evaluates_only_the_taken_side():
    """The guarded load never runs out of bounds; Select evaluates both sides and does."""
    a, c = np.arange(4, dtype=np.int32) + 10, np.zeros(8, np.int32)
    evaluate(_guarded("if_then_else"), a, c)
    assert c.tolist() == [10, 11, 12, 13, -1, -1, -1, -1]
    with pytest.raises(OutOfBoundsError, match=r"load of A\[4\]"):
        evaluate(_guarded("select"), a, c)


def test_vector_if_then_else_selects_lanes():
    A, C = loom.decl_buffer((4,), "int32", name="A"), loom.decl_buffer((4,), "int32", name="C")
    v = A.vload([0], "int32x4")
    value = loom.if_then_else(E.GT(v, E.Broadcast(loom.const(1), 4)), v, E.Broadcast(loom.const(0), 4))
    a, c = np.array([3, 1, 0, 5], np.int32), np.zeros(4, np.int32)
    evaluate(prim(C.vstore([0], value), A, C), a, c)
    assert c.tolist() == [3, 0, 0, 5]


@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("int32", "float32"), ("float16", "uint16"),
                                      ("bfloat16", "int16"), ("float64", "uint64"), ("int8x4", "int32")])
def test_reinterpret_views_the_bits(src, dst):
    s, d = loom.DataType.of(src), loom.DataType.of(dst)
    a = sample(str(s.element_of()), 4, np.random.default_rng(14))
    A = loom.decl_buffer((4,), str(s.element_of()), name="A")
    n_out = 4 if s.lanes == 1 else 4 * s.bits // d.bits  # one vector fills the output
    C = loom.decl_buffer((n_out,), str(d.element_of()), name="C")
    c = np.zeros(n_out, d.numpy())
    if s.lanes > 1:
        body = BufferStore(C, loom.reinterpret(dst, A.vload([0], src)), [0])
    else:
        i = loom.var("i")
        body = For(i, 0, 4, "serial", BufferStore(C, loom.reinterpret(dst, A[i]), [i]))
    evaluate(prim(body, A, C), a, c)
    assert c.tobytes() == a.tobytes()


def test_likely_is_the_identity():
    A = loom.decl_buffer((3,), "int32", name="A")
    i = loom.var("i")
    body = For(i, 0, 3, "serial", loom.ir.IfThenElse(loom.likely(E.LT(i, loom.const(2))), BufferStore(A, i + 1, [i])))
    a = np.zeros(3, np.int32)
    evaluate(prim(body, A), a)
    assert a.tolist() == [1, 2, 0]


def test_call_extern_uses_the_externs_dict_with_exact_dtypes():
    seen = []

    def hypot(x, y):
        seen.append((type(x), type(y)))
        return np.hypot(x, y)

    fn = lambda x, y: loom.call_extern("float32", "my_hypot", x, y)  # noqa: E731
    a, b = np.array([3, 5], np.float32), np.array([4, 12], np.float32)
    out = run_elementwise_with(fn, [a, b], "float32", {"my_hypot": hypot})
    assert out.tolist() == [5, 13]
    assert seen == [(np.float32, np.float32)] * 2


def test_extern_called_for_its_effect_gets_pointers():
    """Evaluate(call_extern(...)) may return None; a handle argument arrives as the flat array."""
    A = loom.decl_buffer((2, 3), "int32", name="A")
    n = loom.var("n")
    body = Evaluate(loom.call_extern("int32", "fill", A.data, n))
    a = np.zeros((2, 3), np.int32)
    evaluate(prim(body, A, n), a, 7, externs={"fill": lambda arr, v: arr.fill(v)})
    assert (a == 7).all()


def test_registered_extern_and_pure_extern():
    register_extern("interp_test_twice", lambda x: x * 2)
    try:
        with pytest.raises(loom.LoomValueError, match="already registered"):
            register_extern("interp_test_twice", lambda x: x)
        fn = lambda x: call_intrin("int32", "tir.call_pure_extern", E.StringImm("interp_test_twice"), x)  # noqa: E731
        a = np.array([1, -4], np.int32)
        assert run_elementwise(fn, [a], "int32").tolist() == [2, -8]
        register_extern("interp_test_twice", lambda x: x * 3, override=True)
        assert run_elementwise(fn, [a], "int32").tolist() == [3, -12]
    finally:
        unregister_extern("interp_test_twice")
    with pytest.raises(InterpreterError, match="no implementation of extern function 'interp_test_twice'"):
        run_elementwise(fn, [a], "int32")


def test_extern_returning_none_for_a_used_value_is_an_error():
    fn = lambda x: loom.call_extern("int32", "nothing", x)  # noqa: E731
    with pytest.raises(InterpreterError, match="returned None, but the call has dtype int32"):
        run_elementwise_with(fn, [np.ones(1, np.int32)], "int32", {"nothing": lambda x: None})


def test_call_of_another_function_in_the_module():
    """main calls helper(A, n) through a GlobalVar; the call's value is 0."""
    n = loom.var("n")
    H = loom.decl_buffer((n,), "int32", name="H")
    i = loom.var("i")
    helper = prim(For(i, 0, n, "serial", BufferStore(H, H[i] + i, [i])), H, n)
    m = loom.var("m")
    A = loom.decl_buffer((m,), "int32", name="A")
    R = loom.decl_buffer((1,), "int32", name="R")
    call = E.Call("int32", GlobalVar("helper"), [A.data, m])
    main = prim(seq(Evaluate(call), BufferStore(R, call + 5, [0])), A, R)
    a, r = np.zeros(4, np.int32), np.zeros(1, np.int32)
    evaluate(IRModule({"main": main, "helper": helper}), a, r)
    assert a.tolist() == [0, 2, 4, 6] and r[0] == 5
    with pytest.raises(loom.LoomValueError, match="evaluate the IRModule"):
        evaluate(main, a, r)
    with pytest.raises(loom.LoomValueError, match="does not define"):
        evaluate(IRModule({"main": main}), a, r)


def test_pointer_to_a_buffer_whose_size_no_scalar_gives():
    k = loom.var("k")
    H = loom.decl_buffer((k,), "int32", name="H")
    helper = prim(BufferStore(H, loom.const(1), [0]), H)
    A = loom.decl_buffer((2,), "int32", name="A")
    main = prim(Evaluate(E.Call("int32", GlobalVar("helper"), [A.data])), A)
    with pytest.raises(InterpreterError, match="its layout uses k, which no scalar parameter provides"):
        evaluate(IRModule({"main": main, "helper": helper}), np.zeros(2, np.int32))
