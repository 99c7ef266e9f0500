"""Expressions rendered to C agree with the interpreter, scalar and vector, across dtypes."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import loom
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.dtype import DataType
from loom.ir.function import PrimFunc

from c_helpers import check_against_interp, run_c

N = 16


def elementwise(dtype_in: str, dtype_out: str, fn: Callable[..., Any], nargs: int = 2, lanes: int = 1) -> PrimFunc:
    """out[i] = fn(in0[i], in1[i], ...), with ``lanes``-wide vector accesses when lanes > 1."""
    ins = [loom.decl_buffer((N,), dtype_in, name=f"X{k}") for k in range(nargs)]
    out = loom.decl_buffer((N,), dtype_out, name="Y")
    i = loom.var("i")
    if lanes == 1:
        body = S.BufferStore(out, fn(*[x[i] for x in ins]), [i])
        loop = S.For(i, 0, N, "serial", body)
    else:
        idx = E.Ramp(i * lanes, loom.const(1), lanes)
        body = S.BufferStore(out, fn(*[E.BufferLoad(x, [idx]) for x in ins]), [idx])
        loop = S.For(i, 0, N // lanes, "serial", body)
    params = [x.data for x in (*ins, out)]
    return PrimFunc(params, loop, buffer_map={x.data: x for x in (*ins, out)})


def data(dtype: str, seed: int, low: int = -100, high: int = 100) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.dtype(dtype)
    if t.kind == "f":
        return (rng.standard_normal(N) * 3).astype(t)
    if t.kind == "u":
        return rng.integers(0, np.iinfo(t).max, N, endpoint=True, dtype=t)
    if t == np.bool_:
        return rng.integers(0, 2, N).astype(bool)
    info = np.iinfo(t)
    return rng.integers(max(low, info.min), min(high, info.max), N, endpoint=True).astype(t)


def run_elementwise(fn: Callable[..., Any], dtype: str, out: str | None = None, nargs: int = 2, lanes: int = 1,
                    nonzero: bool = False, **tol: float) -> None:
    f = elementwise(dtype, out or dtype, fn, nargs, lanes)
    arrays = [data(dtype, k) for k in range(nargs)]
    if nonzero:
        arrays[-1][arrays[-1] == 0] = 3
    check_against_interp(f, *arrays, np.zeros(N, out or dtype), **tol)


ARITH = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "min": lambda a, b: E.Min(a, b), "max": lambda a, b: E.Max(a, b),
}
INT_TYPES = ["int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"]


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("dtype", INT_TYPES + ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(ARITH))
def test_arithmetic_wraps_like_the_ir(op: str, dtype: str, lanes: int) -> None:
    """Integer +, -, * wrap at the dtype's width; min/max pick like the IR."""
    f = elementwise(dtype, dtype, ARITH[op], 2, lanes)
    big = np.iinfo(dtype) if dtype[0] in "iu" else None
    a, b = data(dtype, 1), data(dtype, 2)
    if big is not None:  # push into overflow territory
        a[:4] = big.max
        b[:4] = big.max if big.min == 0 else big.min
    check_against_interp(f, a, b, np.zeros(N, dtype), **({"rtol": 1e-6} if dtype[0] == "f" else {}))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32"])
@pytest.mark.parametrize("lanes", [1, 4])
def test_truncating_and_floor_division(dtype: str, lanes: int) -> None:
    """Div/Mod truncate like C; FloorDiv/FloorMod round towards minus infinity."""
    for fn in (lambda a, b: E.Div(a, b), lambda a, b: E.Mod(a, b),
               lambda a, b: E.FloorDiv(a, b), lambda a, b: E.FloorMod(a, b)):
        f = elementwise(dtype, dtype, fn, 2, lanes)
        a, b = data(dtype, 3), data(dtype, 4, -9, 9)
        b[b == 0] = 7
        if dtype[0] == "i":
            a[:4], b[:4] = [-7, 7, -7, 7], [2, -2, -2, 2]
        check_against_interp(f, a, b, np.zeros(N, dtype))


def test_floor_division_of_negatives_by_hand() -> None:
    """-7 // 2 is -4 and -7 % 2 is 1, where C's / and % give -3 and -1."""
    f = elementwise("int32", "int32", lambda a, b: E.FloorDiv(a, b) * 100 + E.FloorMod(a, b))
    g = elementwise("int32", "int32", lambda a, b: E.Div(a, b) * 100 + E.Mod(a, b))
    a = np.full(N, -7, "int32")
    b = np.full(N, 2, "int32")
    y = np.zeros(N, "int32")
    assert run_c(f, a, b, y) == (0, None) and y[0] == -400 + 1
    assert run_c(g, a, b, y) == (0, None) and y[0] == -300 - 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lanes", [1, 4])
def test_float_division_and_modulo(dtype: str, lanes: int) -> None:
    for fn in (lambda a, b: E.Div(a, b), lambda a, b: E.Mod(a, b),
               lambda a, b: E.FloorDiv(a, b), lambda a, b: E.FloorMod(a, b)):
        run_elementwise(fn, dtype, lanes=lanes, nonzero=True, rtol=1e-5, atol=1e-6)


CMP = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
       "ge": lambda a, b: a >= b, "eq": lambda a, b: E.EQ(a, b), "ne": lambda a, b: E.NE(a, b)}


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("op", sorted(CMP))
def test_comparisons_select_and_logic(op: str, lanes: int) -> None:
    """Comparisons feed Select, And, Or and Not, lane by lane for vectors."""
    def fn(a: Any, b: Any) -> Any:
        c = CMP[op](a, b)
        both = E.And(c, E.Not(E.EQ(a, b)))
        return E.Select(E.Or(both, E.LT(a, b * 0)), a - b, b * 2)
    a, b = data("int32", 5, -3, 3), data("int32", 6, -3, 3)
    check_against_interp(elementwise("int32", "int32", fn, 2, lanes), a, b, np.zeros(N, "int32"))


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float64"), ("int32", "int8"),
                                     ("int8", "uint16"), ("float64", "float32"), ("int64", "bool"),
                                     ("uint8", "int64")])
def test_casts(src: str, dst: str, lanes: int) -> None:
    run_elementwise(lambda a: E.Cast(DataType.of(dst).with_lanes(lanes), a), src, dst, nargs=1, lanes=lanes)


MATH = ["exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos", "floor",
        "ceil", "round", "trunc", "fabs", "erf"]


@pytest.mark.parametrize("dtype,lanes", [("float32", 1), ("float64", 1), ("float32", 8)])
def test_math_intrinsics(dtype: str, lanes: int) -> None:
    """Every float intrinsic maps to its math.h function of the right precision."""
    for name in MATH:
        fn = getattr(loom, name)
        positive = name in ("log", "log2", "log10", "sqrt", "rsqrt")
        run_elementwise((lambda a: fn(loom.abs(a) + 0.5)) if positive else fn, dtype, nargs=1, lanes=lanes,
                        rtol=1e-5, atol=1e-6)
    run_elementwise(lambda a, b: loom.power(loom.abs(a) + 0.5, b), dtype, lanes=lanes, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32", "int64"])
def test_integer_intrinsics(dtype: str) -> None:
    """popcount counts the bits of the dtype's width; abs wraps like the IR."""
    run_elementwise(loom.popcount, dtype, nargs=1)
    run_elementwise(loom.abs, dtype, nargs=1)
    run_elementwise(loom.popcount, dtype, nargs=1, lanes=4)


def test_isnan_reinterpret_and_likely() -> None:
    f = elementwise("float32", "int32", lambda a: loom.reinterpret("int32", a) + E.Cast("int32", loom.isnan(a)), 1)
    a = data("float32", 7)
    a[3] = np.nan
    check_against_interp(f, a, np.zeros(N, "int32"))
    g = elementwise("int32", "int32", lambda a: E.Select(loom.likely(a > 0), a, -a), 1)
    check_against_interp(g, data("int32", 8), np.zeros(N, "int32"))
    h = elementwise("int32", "float32", lambda a: loom.reinterpret("float32x4", a * 0 + 1065353216), 1, lanes=4)
    y = check_against_interp(h, data("int32", 9), np.zeros(N, "float32"))[-1]
    assert (y == 1.0).all()


def test_if_then_else_runs_only_the_taken_side() -> None:
    """A guarded out-of-bounds index is never read."""
    A = loom.decl_buffer((N,), "float32", name="A")
    Y = loom.decl_buffer((N,), "float32", name="Y")
    i = loom.var("i")
    guarded = loom.if_then_else(i < N - 1, A[i + 1], loom.const(-1.0, "float32") + A[i * 0])
    f = PrimFunc([A.data, Y.data], S.For(i, 0, N, "serial", S.BufferStore(Y, guarded, [i])),
                 buffer_map={A.data: A, Y.data: Y})
    y = check_against_interp(f, data("float32", 1), np.zeros(N, "float32"))[-1]
    assert y[-1] != 0


def test_vector_if_then_else_with_a_scalar_condition_reads_only_the_taken_side() -> None:
    """A padding row read by a vector: ``if (i >= 1)`` guards the load of row ``i - 1`` (never row -1)."""
    A = loom.decl_buffer((N,), "float32", name="A")
    Y = loom.decl_buffer((N + 4,), "float32", name="Y")
    i = loom.var("i")
    rows = (N + 4) // 4
    guarded = loom.if_then_else(i >= 1, A[E.Ramp((i - 1) * 4, 1, 4)], E.Broadcast(loom.const(-1.0, "float32"), 4))
    f = PrimFunc([A.data, Y.data], S.For(i, 0, rows, "serial", S.BufferStore(Y, guarded, [E.Ramp(i * 4, 1, 4)])),
                 buffer_map={A.data: A, Y.data: Y})
    y = check_against_interp(f, data("float32", 3), np.zeros(N + 4, "float32"))[-1]
    assert (y[:4] == -1).all()
    source = loom.build(f, target="c").get_source()
    assert "if ((1 <= i))" in source or "if ((i >= 1))" in source


def test_let_expression_and_scalar_params() -> None:
    """Scalar parameters arrive through the ABI words; Let binds once."""
    A = loom.decl_buffer((N,), "float64", name="A")
    Y = loom.decl_buffer((N,), "int64", name="Y")
    alpha, shift = loom.var("alpha", "float64"), loom.var("shift", "int64")
    i, x = loom.var("i"), loom.var("x", "float64")
    value = E.Let(x, A[i] * alpha, E.Cast("int64", x * x) + shift)
    f = PrimFunc([A.data, alpha, shift, Y.data], S.For(i, 0, N, "serial", S.BufferStore(Y, value, [i])),
                 buffer_map={A.data: A, Y.data: Y})
    check_against_interp(f, data("float64", 2), 2.5, -(1 << 40), np.zeros(N, "int64"))


def test_call_extern_is_a_plain_call() -> None:
    A = loom.decl_buffer((N,), "float64", name="A")
    i = loom.var("i")
    call = loom.call_extern("float64", "hypot", A[i], loom.const(4.0, "float64"))
    f = PrimFunc([A.data], S.For(i, 0, N, "serial", S.BufferStore(A, call, [i])), buffer_map={A.data: A})
    a = data("float64", 3)
    want = np.hypot(a, 4.0)
    assert run_c(f, a) == (0, None)
    np.testing.assert_allclose(a, want)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "uint16"])
def test_vector_min_max_blend_through_a_lane_mask(dtype):
    from loom.ir import expr as E

    A, B = loom.placeholder((64,), dtype, name="A"), loom.placeholder((64,), dtype, name="B")
    C = loom.compute((64,), lambda i: E.Max(A[i], B[i]), name="C")
    D = loom.compute((64,), lambda i: E.Min(A[i], B[i]), name="D")
    s = loom.create_schedule([C.op, D.op])
    for T in (C, D):
        s[T].vectorize(s[T].split(T.op.axis[0], 8)[1])
    f = loom.build(s, [A, B, C, D], target="c")
    src = f.get_source()
    assert "__typeof__" in src and "_l <" not in src  # one vector blend, not a per-lane loop
    rng = np.random.default_rng(0)
    a, b = ((rng.standard_normal(64) * 50).astype(dtype) for _ in range(2))
    c, d = np.zeros(64, dtype), np.zeros(64, dtype)
    f(a, b, c, d)
    np.testing.assert_array_equal(c, np.maximum(a, b))
    np.testing.assert_array_equal(d, np.minimum(a, b))
