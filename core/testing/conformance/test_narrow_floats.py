"""float16 and bfloat16 agree with the interpreter bit for bit (NaNs: NaN of the same sign).

numpy, and so the interpreter, computes each 16-bit float operation in float32
and rounds the result to the narrow type; every backend must do the same,
whether it has the type natively (llvm's ``half``, CUDA's ``half``) or keeps
the bits in an integer (C).  The programs cover arithmetic with rounding at
every step, comparisons and selects, conversions from float64 and integers
(one rounding), to integers and float64, a scalar parameter of the narrow type,
a reduction whose accumulator is narrow, and math functions (within one unit in
the last place: libm's float32 results may differ from numpy's in the last bit,
which the rounding to 16 bits almost always, but not always, hides).  CPU kinds
also run them vectorized, with a tail.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import loom

from .harness import KindUnderTest, bind_root

N = 203  # not a multiple of the vector width: the tail runs too
DTYPES = ["float16", "bfloat16"]


def _np(dtype: str) -> Any:
    if dtype == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def _values(dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 65504.0, -65504.0, 6e-8, -6e-5, np.inf, -np.inf, np.nan, 1e4,
                        3.3e38, 1e-30])
    with np.errstate(over="ignore"):
        return np.concatenate([special, rng.standard_normal(N - len(special)) * 30]).astype(_np(dtype))


def _schedule(kind: KindUnderTest, outs: list[Any], vectorize: bool) -> Any:
    s = loom.create_schedule([t.op for t in outs])
    for stage in list(s.stages):
        if not isinstance(stage.op, loom.te.ComputeOp):
            continue
        t = stage.op.output(0)
        if kind.on_device:  # every stage runs on the device
            bind_root(s, t)
        elif vectorize:
            stage.vectorize(stage.split(t.op.axis[-1], factor=8)[1])
    return s


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    g, w = got.astype(np.float64), want.astype(np.float64)
    bits = np.frombuffer(got.tobytes(), "u2") == np.frombuffer(want.tobytes(), "u2")
    return bits | (np.isnan(g) & np.isnan(w) & (np.signbit(g) == np.signbit(w)))


def _run(kind: KindUnderTest, args: list[Any], outs: list[Any], values: list[Any], vectorize: bool) -> list[Any]:
    results = []
    for k in ("interp", kind):
        s = _schedule(KindUnderTest.resolve("interp") if k == "interp" else kind, outs, vectorize and k != "interp")
        f = loom.build(s, args, "interp") if k == "interp" else kind.build(s, args)
        placed = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
        runner = KindUnderTest.resolve("interp") if k == "interp" else kind
        results.append(runner.run(f, *placed)[-len(outs):])
    return results


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])
def test_arithmetic_rounds_at_every_step(kind_under_test: KindUnderTest, dtype: str, vectorize: bool) -> None:
    if vectorize and kind_under_test.on_device:
        pytest.skip("vectorized loops are a CPU schedule")
    A, B = loom.placeholder((N,), dtype, name="A"), loom.placeholder((N,), dtype, name="B")
    X, K = loom.placeholder((N,), "float64", name="X"), loom.placeholder((N,), "int32", name="K")
    alpha = loom.var("alpha", dtype)
    C = loom.compute((N,), lambda i: A[i] * B[i] + A[i] / B[i] - alpha * loom.const(0.1, dtype), name="C")
    D = loom.compute((N,), lambda i: loom.select(A[i] < B[i], loom.max(C[i], A[i]), loom.min(C[i], B[i]))
                     + X[i].astype(dtype) + K[i].astype(dtype), name="D")
    # A cast of a non-finite value to an integer is undefined (the interpreter raises): only finite ones.
    E = loom.compute((N,), lambda i: loom.if_then_else(loom.abs(D[i]) < loom.const(3e4, dtype), D[i],
                                                       loom.const(-1, dtype)).astype("int32")
                     + (C[i] >= A[i]).astype("int32"), name="E")
    F = loom.compute((N,), lambda i: D[i].astype("float64") * 2.0, name="F")
    rng = np.random.default_rng(3)
    x = np.concatenate([[2.0 ** -25, 65519.99, 65520.0, 1e300, np.nan], rng.standard_normal(N - 5) * 1e3])
    k = rng.integers(-70000, 70000, N).astype("int32")
    values = [_values(dtype, 1), _values(dtype, 2), x, k, 1.7, np.zeros(N, _np(dtype)), np.zeros(N, "int32"),
              np.zeros(N, "float64")]
    with np.errstate(all="ignore"):
        want, got = _run(kind_under_test, [A, B, X, K, alpha, D, E, F], [D, E, F], values, vectorize)
    assert _same_bits(got[0], want[0]).all(), np.nonzero(~_same_bits(got[0], want[0]))
    assert np.array_equal(got[1], want[1])
    assert np.array_equal(got[2], want[2], equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_narrow_accumulator_rounds_every_step(kind_under_test: KindUnderTest, dtype: str) -> None:
    m, n = 13, 61
    A, w = loom.placeholder((m, n), dtype, name="A"), loom.placeholder((n,), dtype, name="w")
    r = loom.reduce_axis((0, n), name="r")
    S = loom.compute((m,), lambda i: loom.sum(A[i, r] * w[r], axis=r), name="S")
    rng = np.random.default_rng(5)
    a, ww = (rng.standard_normal(shape).astype(_np(dtype)) for shape in ((m, n), (n,)))
    want, got = _run(kind_under_test, [A, w, S], [S], [a, ww, np.zeros(m, _np(dtype))], vectorize=False)
    assert _same_bits(got[0], want[0]).all()
    exact = (a.astype(np.float64) @ ww.astype(np.float64))
    assert not np.array_equal(want[0].astype(np.float64), exact)  # it did round: a float32 sum would not


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["exp", "sqrt", "tanh", "log", "floor"])
def test_math_functions_are_within_one_ulp(kind_under_test: KindUnderTest, dtype: str, op: str) -> None:
    A = loom.placeholder((N,), dtype, name="A")
    fn = getattr(loom, op)
    B = loom.compute((N,), lambda i: fn(A[i]), name="B")
    a = np.abs(_values(dtype, 4)) if op in ("sqrt", "log") else _values(dtype, 4)
    with np.errstate(all="ignore"):
        want, got = _run(kind_under_test, [A, B], [B], [a, np.zeros(N, _np(dtype))], vectorize=False)
    g, w = got[0].astype(np.float64), want[0].astype(np.float64)
    same = _same_bits(got[0], want[0])
    steps = np.abs(np.frombuffer(got[0].tobytes(), "i2").astype(np.int64)
                   - np.frombuffer(want[0].tobytes(), "i2").astype(np.int64))
    ok = same | (np.isfinite(g) & np.isfinite(w) & (np.sign(g) == np.sign(w)) & (steps <= 1))
    assert ok.all(), (a[~ok], g[~ok], w[~ok])
