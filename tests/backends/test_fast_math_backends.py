"""Vectorized math on the CPU backends (issue 17): whole-range ulp bounds of the compiled fast functions,
and ``-fast_math`` selecting them on llvm and c.

The float32 functions are measured on every 2048th float32 bit pattern (two million
points: every binade of both signs, subnormals included) plus the special values;
the float64 ones on random bit patterns and on values spread over the range where
the functions change.  The bounds asserted are the ones docs/te.md documents.
"""

import functools

import numpy as np
import pytest

import loom
from loom.ir import expr as E
from loom.ir.functor import collect
from fast_math_reference import float32_sweep, float64_sweep, reference, special_values, ulp_error

NAMES = ["exp", "log", "tanh", "sigmoid", "erf"]
#: The documented bounds (ulp) per function and precision.
BOUNDS = {
    "float32": {"exp": 1.5, "log": 1.5, "tanh": 2.0, "sigmoid": 2.5, "erf": 1.5},
    "float64": {"exp": 1.5, "log": 2.0, "tanh": 2.0, "sigmoid": 3.0, "erf": 1.5},
}


@functools.cache
def sweep(dtype: str) -> np.ndarray:
    if dtype == "float32":
        x = float32_sweep(1 << 11)
    else:
        rng = np.random.default_rng(11)
        spread = np.exp2(rng.uniform(-40, 11, 60000)) * rng.choice([-1.0, 1.0], 60000)
        x = np.concatenate([float64_sweep(60000), spread, rng.uniform(-750, 750, 20000)])
    return x[: len(x) // 16 * 16]


@functools.cache
def wanted(name: str, dtype: str) -> np.ndarray:
    return reference(name, sweep(dtype))


def vector_kernel(compute, dtype: str, target: str, lanes: int = 16):
    n = loom.var("n")
    A = loom.placeholder((n,), dtype=dtype, name="A")
    B = loom.compute((n,), lambda i: compute(A[i]), name="B")
    s = loom.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=lanes)
    s[B].vectorize(inner)
    return loom.build(s, [A, B], target=target)


@pytest.mark.parametrize("target", ["llvm", "c"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_whole_range_error_is_within_the_documented_bound(name: str, dtype: str, target: str) -> None:
    """Through ``-fast_math``: ``loom.exp`` & co. become the expansions, compiled as vector code."""
    x = sweep(dtype)
    got = np.zeros_like(x)
    kernel = vector_kernel(getattr(loom, name), dtype, f"{target} -fast_math")
    kernel(x, got)
    err = ulp_error(got, wanted(name, dtype))
    worst = int(np.argmax(err))
    assert err[worst] <= BOUNDS[dtype][name], f"{err[worst]:.3f} ulp at x={x[worst]!r}: {got[worst]!r}"
    # Where the function is exactly inf, 0, +-1 or NaN (at the infinities, zeros and NaN), so is the result.
    specials = special_values(np.dtype(dtype).type)
    specials = specials[np.isinf(specials) | np.isnan(specials) | (specials == 0)]
    out = np.zeros_like(specials)
    kernel(specials, out)
    want = reference(name, specials).astype(dtype)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(out), nan)
    np.testing.assert_array_equal(out[~nan], want[~nan])
    np.testing.assert_array_equal(np.signbit(out[~nan]), np.signbit(want[~nan]))


def test_special_values_are_exact() -> None:
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -1.0, 89.0, -104.0, 1e-45, 20.0, -20.0] + [0.0] * 5,
                 "float32")
    cases = {
        "exp": [np.inf, 0.0, np.nan, 1.0, 1.0, np.exp(np.float32(-1)), np.inf, 0.0, 1.0, np.exp(np.float32(20))],
        "log": [np.inf, np.nan, np.nan, -np.inf, -np.inf, np.nan],
        "tanh": [1.0, -1.0, np.nan, 0.0, -0.0, None, 1.0, -1.0, 1e-45, 1.0, -1.0],
        "sigmoid": [1.0, 0.0, np.nan, 0.5, 0.5, None, 1.0, None, 0.5, None, None],
        "erf": [1.0, -1.0, np.nan, 0.0, -0.0, None, 1.0, -1.0, None, 1.0, -1.0],
    }
    for name, values in cases.items():
        got = np.zeros_like(x)
        vector_kernel(getattr(loom, name), "float32", "llvm -fast_math")(x, got)
        for k, want in enumerate(values):
            if want is None:
                continue
            if np.isnan(want):
                assert np.isnan(got[k]), (name, x[k], got[k])
            elif name != "exp" or k != 5 and k != 9:
                assert got[k] == want and np.signbit(got[k]) == np.signbit(want), (name, x[k], got[k], want)
            else:
                assert abs(got[k] / np.float32(want) - 1) < 2e-7, (name, x[k], got[k], want)
    assert 0 < reference("sigmoid", np.array([-100.0], "float32"))[0] < 1e-38  # the subnormal tail is there


def _calls(mod) -> set[str]:
    found = set()
    for f in mod.functions.values():
        found |= {c.op.name for c in collect(f.body, lambda n: isinstance(n, E.Call)) if hasattr(c.op, "name")}
    return found


@pytest.mark.parametrize("kind", ["llvm", "c"])
def test_fast_math_target_selects_the_expansions(kind: str) -> None:
    target = loom.target.Target(f"{kind} -fast_math")
    assert target.attrs["fast_math"] is True and loom.target.Target(kind).attrs["fast_math"] is False
    n = 64
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: loom.exp(A[i]) + loom.log(A[i]) + loom.tanh(A[i]) + loom.sigmoid(A[i])
                     + loom.erf(A[i]), name="B")
    s = loom.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(inner)
    plain, fast = loom.build(s, [A, B], target=kind), loom.build(s, [A, B], target=target)
    if kind == "llvm":
        text, slow = fast.get_source("ll"), plain.get_source("ll")
        assert "@llvm.exp.v16f32" in slow and "@tanhf" in slow and "@erff" in slow
        assert not any(f in text for f in ("@llvm.exp.", "@llvm.log.", "@tanhf", "@erff", "@expf"))
        assert "fmul contract <16 x float>" in text and "shl <16 x i32>" in text  # vector code all through
    else:
        text, slow = fast.get_source("c"), plain.get_source("c")
        assert "expf(" in slow and "tanhf(" in slow
        assert not any(f"{f}(" in text for f in ("expf", "logf", "tanhf", "erff"))
        assert "for (int _l" not in text and "__builtin_convertvector" in text  # no lane-by-lane loops
    a = np.random.default_rng(2).uniform(0.1, 4, n).astype("float32")
    want, got = np.zeros_like(a), np.zeros_like(a)
    plain(a, want)
    fast(a, got)
    np.testing.assert_allclose(got, want, rtol=3e-6)


def test_without_fast_math_the_lowering_is_unchanged() -> None:
    from loom.ir.op import Op, lowering_rule

    x = loom.var("x", "float32x8")
    for kind in ("llvm", "c"):
        exact = lowering_rule(Op.get("tir.exp"), loom.target.Target(kind))(loom.exp(x))
        assert "exp" in str(exact) and "reinterpret" not in str(exact)
        fast = lowering_rule(Op.get("tir.exp"), loom.target.Target(f"{kind} -fast_math"))(loom.exp(x))
        assert "exp" not in str(fast) and fast.dtype == "float32x8"


def test_float16_under_fast_math_computes_in_float32() -> None:
    x = np.linspace(-8, 8, 64).astype("float16")
    got, wide = np.zeros_like(x), np.zeros(64, "float32")
    vector_kernel(loom.exp, "float16", "llvm -fast_math", lanes=8)(x, got)
    vector_kernel(loom.exp, "float32", "llvm -fast_math", lanes=8)(x.astype("float32"), wide)
    np.testing.assert_array_equal(got, wide.astype("float16"))
