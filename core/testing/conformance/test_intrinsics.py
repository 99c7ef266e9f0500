"""Every elementwise intrinsic agrees with the interpreter (numpy's implementation of each op).

Each op runs on values that include zeros of both signs, halfway cases of
rounding, negatives, large and tiny magnitudes, subnormals, infinities and NaN,
for float32 and float64 (and the integer types where the op applies: abs,
popcount, the shifts and bitwise operators), in a plain loop and, on CPU kinds, in a vectorized one (with a tail).

Tolerance: a float result is within 4 units in the last place (ULP) of the
interpreter's (libm and vector math libraries differ from numpy by 1 or 2);
NaN must be NaN, infinities and zeros must be the same, integers are exact.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import loom

from .harness import KindUnderTest, bind_root

MAX_ULP = 4

_SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5, 3.7, -7.25, 1e-3, -1e-3, 0.1, 20.0, -20.0, 88.5,
            -104.0, 100.0, -100.0, 1e4, 3.0e6, 1e30, -1e30, 1e-30, 1e-40, np.inf, -np.inf, np.nan]
# power's operands, pairwise: integer and fractional exponents of negative bases, 0 ** negative, overflow, NaN, inf.
_BASES = [2.0, -2.0, 0.0, 0.0, -1.0, 1.0, 0.5, -8.0, 10.0, 2.0, 1e10, np.nan, np.inf, -np.inf, 4.0, 3.0, -0.0]
_EXPONENTS = [3.0, 3.0, 0.0, -1.0, 0.5, np.nan, -2.0, 1 / 3, 38.0, 0.5, 10.0, 0.0, -1.0, 3.0, 0.5, -2.5, -3.0]

UNARY_FLOAT = ["exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos", "floor",
               "ceil", "round", "trunc", "fabs", "erf"]
FLOATS = ["float32", "float64"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint32"]


def _int_values(dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    edge = [0, 1, -1, 2, -2, 5, info.min, info.max, info.min + 1, info.max - 1, 0x55, -0x56]
    edge = [v for v in edge if info.min <= v <= info.max]
    return np.concatenate([np.array(edge, dtype), rng.integers(info.min, info.max, 21, dtype=dtype, endpoint=True)])


BITWISE = ["shift_left", "shift_right", "bitwise_and", "bitwise_or", "bitwise_xor"]


def _cases() -> list[tuple[str, str]]:
    cases = [(op, dt) for op in UNARY_FLOAT + ["abs", "isnan", "power", "if_then_else"] for dt in FLOATS]
    return cases + [(op, dt) for op in ("abs", "popcount", "bitwise_not", *BITWISE) for dt in INTS]


def _shift_amounts(dtype: str, n: int) -> np.ndarray:
    """Shift amounts from 0 past twice the width (and negative ones for signed types): taken modulo the width."""
    width = np.dtype(dtype).itemsize * 8
    lo = -width if np.dtype(dtype).kind == "i" else 0
    return np.resize(np.arange(lo, 2 * width + 1), n).astype(dtype)


def _python_bitwise(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The documented semantics in plain Python integers (an oracle for the oracle)."""
    width = x.dtype.itemsize * 8
    out = []
    for a, b in zip(x.tolist(), y.tolist()):
        k = b % width
        v = {"shift_left": a << k, "shift_right": a >> k, "bitwise_and": a & b, "bitwise_or": a | b,
             "bitwise_xor": a ^ b}[op]
        out.append(v & ((1 << width) - 1))
    return np.array(out, dtype=f"uint{width}").view(x.dtype)


def _program(op: str, dtype: str, n: int) -> tuple[list[Any], Any]:
    """Placeholders and the output of ``op`` over them (isnan's result is int8: 1 where NaN)."""
    X = loom.placeholder((n,), dtype, name="X")
    if op == "power":
        Y = loom.placeholder((n,), dtype, name="Y")
        return [X, Y], loom.compute((n,), lambda i: loom.power(X[i], Y[i]), name="out")
    if op == "isnan":
        return [X], loom.compute((n,), lambda i: loom.cast(loom.isnan(X[i]), "int8"), name="out")
    if op in BITWISE:
        Y = loom.placeholder((n,), dtype, name="Y")
        binary: Callable[[Any, Any], Any] = getattr(loom, op)
        return [X, Y], loom.compute((n,), lambda i: binary(X[i], Y[i]), name="out")
    if op == "if_then_else":  # the untaken side reads past the end: it must not be evaluated
        return [X], loom.compute(
            (n,), lambda i: loom.if_then_else(i < n - 1, X[i + 1] - X[i], X[i + 1 - n] * 2.0), name="out")
    fn: Callable[[Any], Any] = getattr(loom, op)
    return [X], loom.compute((n,), lambda i: fn(X[i]), name="out")


def _inputs(op: str, dtype: str) -> list[np.ndarray]:
    if op == "power":
        return [np.array(_BASES, dtype), np.array(_EXPONENTS, dtype)]
    if op in BITWISE:
        x = _int_values(dtype)
        return [x, _shift_amounts(dtype, len(x)) if op.startswith("shift") else x[::-1].copy()]
    if dtype in INTS:
        return [_int_values(dtype)]
    return [np.array(_SPECIAL, dtype)]


def _build(kind: KindUnderTest, op: str, dtype: str, vectorize: bool, n: int) -> Any:
    inputs, out = _program(op, dtype, n)
    s = loom.create_schedule(out.op)
    if kind.on_device:
        bind_root(s, out, 8)
    elif vectorize:
        _, inner = s[out].split(out.op.axis[0], factor=8)  # n is not a multiple of 8: a scalar tail too
        s[out].vectorize(inner)
    return kind.build(s, [*inputs, out])


def assert_close_ulp(got: np.ndarray, want: np.ndarray, max_ulp: int = MAX_ULP) -> None:
    """Integers exactly; floats within ``max_ulp`` ULP of ``want``, NaN for NaN, the same infinities."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg="NaN where the interpreter has none, or missing")
    g, w = got[~nan], want[~nan]
    exact = ~np.isfinite(w) | (w == 0)
    np.testing.assert_array_equal(g[exact], w[exact], err_msg="infinities and zeros must be the same")
    with np.errstate(invalid="ignore", over="ignore"):
        ulps = np.abs(g.astype(np.float64) - w.astype(np.float64)) / np.spacing(np.abs(w)).astype(np.float64)
    bad = ~exact & ~(ulps <= max_ulp)
    assert not bad.any(), f"more than {max_ulp} ULP apart: got {g[bad]}, want {w[bad]} ({ulps[bad]} ULP)"


@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("op, dtype", _cases())
def test_intrinsic(kind_under_test: KindUnderTest, op: str, dtype: str, vectorize: bool) -> None:
    kind = kind_under_test
    if vectorize and kind.on_device:
        pytest.skip("vectorized loops are a CPU schedule; a device kind binds the loop to threads")
    values = _inputs(op, dtype)
    n = len(values[0])
    out_dtype = "int8" if op == "isnan" else dtype
    interp = KindUnderTest.resolve("interp")
    with np.errstate(all="ignore"):
        want = interp.run(_build(interp, op, dtype, False, n), *values, np.zeros(n, out_dtype))[-1]
        got = kind.run(_build(kind, op, dtype, vectorize, n), *values, np.zeros(n, out_dtype))[-1]
    if op == "isnan":
        np.testing.assert_array_equal(want, np.isnan(values[0]).astype("int8"))  # the oracle itself
    if op in BITWISE:
        np.testing.assert_array_equal(want, _python_bitwise(op, *values))
    assert_close_ulp(got, want)
