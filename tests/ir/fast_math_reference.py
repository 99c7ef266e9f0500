"""High-precision references and ulp measurement for the fast math functions (tests/ir/test_fast_math*.py).

The float32 functions are measured against float64 numpy (``math.erf`` for erf);
the float64 ones against x86's 80-bit ``np.longdouble`` (libm's ``expl``,
``log1pl``, ``tanhl``) and an erf written here in longdouble: the all-positive
series ``erf(x) = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (1*3*...*(2n+1))``
below 2.5 and the continued fraction of erfc above.  ``tools/fast_math_fit.py``
fits its polynomials against the same references.
"""

from __future__ import annotations

import math

import numpy as np

LD = np.longdouble
_SQRT_PI = LD("1.772453850905516027298167483341145183")


def erf_longdouble(x: np.ndarray) -> np.ndarray:
    """erf of each element of ``x``, in longdouble (about 1e-18 relative)."""
    x = np.asarray(x, dtype=LD)
    a = np.abs(x)
    out = np.empty_like(a)
    small = a < 2.5
    out[small] = _erf_series(a[small])
    out[~small] = LD(1) - erfc_longdouble(a[~small])
    out = np.where(np.isnan(x), x, out)
    return np.copysign(out, x)


def erfc_longdouble(a: np.ndarray) -> np.ndarray:
    """erfc of non-negative ``a``: the series below 2.5, the continued fraction above (longdouble)."""
    a = np.asarray(a, dtype=LD)
    out = np.empty_like(a)
    small = a < 2.5
    out[small] = LD(1) - _erf_series(a[small])
    big = a[~small]
    with np.errstate(all="ignore"):
        # erfc(x) = exp(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))), evaluated backward.
        tail = np.zeros_like(big)
        for k in range(200, 0, -1):
            tail = (LD(k) / 2) / (big + tail)
        out[~small] = np.exp(-big * big) / _SQRT_PI / (big + tail)
    return out


def _erf_series(a: np.ndarray) -> np.ndarray:
    term = a.copy()
    total = a.copy()
    two_x2 = 2 * a * a
    for n in range(1, 90):
        term = term * two_x2 / (2 * n + 1)
        total += term
    return 2 / _SQRT_PI * np.exp(-a * a) * total


def reference(name: str, x: np.ndarray) -> np.ndarray:
    """The exact-enough value of function ``name`` at ``x``: float64 for float32 ``x``, longdouble for float64."""
    wide = np.float64 if x.dtype == np.float32 else LD
    with np.errstate(all="ignore"):
        w = x.astype(wide)
        if name == "exp":
            return np.exp(w)
        if name == "log":
            return np.log(w)
        if name == "tanh":
            return np.tanh(w)
        if name == "sigmoid":
            # exp(x) / (1 + exp(x)) for x < 0 keeps the tiny results (no overflow of exp(-x)).
            e = np.exp(-np.abs(w))
            return np.where(w < 0, e, 1) / (1 + e)
        if name == "erf":
            if wide is np.float64:
                return np.frompyfunc(math.erf, 1, 1)(w).astype(np.float64)
            return erf_longdouble(w)
    raise ValueError(name)


def ulp_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the last place of ``got``'s dtype at ``want``.

    Subnormal results count in the fixed subnormal ulp; an infinity counts as
    2^(emax+1) (one ulp above the largest finite number: an overflow to inf where
    the result is just below the largest finite value is one ulp off).  NaN
    against NaN is 0, NaN against a number infinite.
    """
    info = np.finfo(got.dtype)
    wide = want.dtype
    big = np.ldexp(wide.type(1), info.maxexp)  # 2^128 or 2^1024
    g = np.clip(got.astype(wide), -big, big)
    w = np.clip(want, -big, big)
    with np.errstate(all="ignore"):
        _, exponent = np.frexp(np.abs(w))
        exponent = np.maximum(exponent - 1, info.minexp)  # the exponent of [1, 2) scaling, floored at subnormals
        ulp = np.ldexp(wide.type(1), exponent - info.nmant)
        err = np.abs(g - w) / ulp
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    err = np.where(nan_g & nan_w, 0, err)
    return np.where(nan_g ^ nan_w, np.inf, err).astype(np.float64)


def float32_sweep(stride: int) -> np.ndarray:
    """Every ``stride``-th float32 bit pattern (both signs), plus the special values below."""
    bits = np.arange(0, 1 << 32, stride, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits.view(np.float32), special_values(np.float32)])


def float64_sweep(count: int, seed: int = 17) -> np.ndarray:
    """``count`` float64 values spread over every exponent (random bit patterns), plus the special values."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 64, size=count, dtype=np.uint64, endpoint=False)
    return np.concatenate([bits.view(np.float64), special_values(np.float64)])


def special_values(dtype: type) -> np.ndarray:
    """Zeros, infinities, NaN, the smallest subnormals, the largest finite values and every threshold."""
    info = np.finfo(dtype)
    tiny = info.smallest_subnormal
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, 2 * tiny, info.tiny, -info.tiny, info.max, -info.max,
              1.0, -1.0, 0.5, np.log(2), 1e-30, -1e-30]
    # exp: overflow and underflow thresholds; log: around 1; tanh/erf: where they reach +-1; sigmoid's subnormal tail.
    if dtype == np.float32:
        values += [88.72283, 88.72284, 88.7228, 89.0, -87.33654, -103.27893, -103.97208, -103.9721, -104.0,
                   9.010913, 3.9192059, 3.92, 4.0, 0.55, 0.625, 1.0000001, 0.99999994]
    else:
        values += [709.782712893384, 709.7827128933841, 710.0, -708.3964185322641, -745.1332191019411,
                   -745.1332191019412, -746.0, 19.06154746539849, 5.921590232, 5.93, 6.0, 0.55, 0.625,
                   1.0000000000000002, 0.9999999999999999]
    base = np.array(values, dtype=dtype)
    with np.errstate(all="ignore"):
        near = np.concatenate([base, np.nextafter(base, dtype(np.inf)), np.nextafter(base, dtype(-np.inf))])
    return np.concatenate([near, -near])
