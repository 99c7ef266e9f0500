"""Fit the polynomials of ``loom.ir.fast_math`` (``python tools/fast_math_fit.py [NAME...]``).

Each fit is a near-minimax polynomial: Lawson's algorithm (iteratively
reweighted least squares, the least squares solved by Householder QR in x86's
80-bit ``np.longdouble``) on a few thousand Chebyshev-spaced points, against the
references of ``tests/ir/fast_math_reference.py``.  The coefficients are then
rounded to the function's precision and the rounded polynomial's largest
weighted error is printed with them, as the Python literals that
``core/ir/fast_math.py`` holds.

>>> c, err = fit(lambda t: np.exp(t), [0, 1, 2, 3], -0.1, 0.1, weight=lambda t: 1 / np.exp(t))
>>> len(c), err < 1e-6
(4, True)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ir"))
from fast_math_reference import erf_longdouble, erfc_longdouble  # noqa: E402

LD = np.longdouble
Fn = Callable[[np.ndarray], np.ndarray]


def _lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min |a c - b| by Householder QR, in longdouble (numpy's linalg has no longdouble)."""
    a, b = a.copy(), b.copy()
    m, n = a.shape
    for k in range(n):
        x = a[k:, k]
        alpha = -np.copysign(np.sqrt(np.sum(x * x)), x[0])
        v = x.copy()
        v[0] -= alpha
        v /= np.sqrt(np.sum(v * v))
        a[k:, k:] -= 2 * np.outer(v, v @ a[k:, k:])
        b[k:] -= 2 * v * (v @ b[k:])
    c = np.zeros(n, dtype=LD)
    for k in range(n - 1, -1, -1):
        c[k] = (b[k] - a[k, k + 1:n] @ c[k + 1:]) / a[k, k]
    return c


def fit(f: Fn, powers: list[int], lo: float, hi: float, weight: Fn | None = None, fixed: Fn | None = None,
        points: int = 2000, iterations: int = 120) -> tuple[np.ndarray, float]:
    """Coefficients c of ``fixed(t) + sum c_k t^powers[k]`` near ``f`` on [lo, hi], minimising the largest
    ``|weight(t) * error(t)|``; and that error."""
    t = (LD(lo) + LD(hi)) / 2 + (LD(hi) - LD(lo)) / 2 * np.cos(np.pi * (np.arange(points, dtype=LD) + 0.5) / points)
    w = np.ones_like(t) if weight is None else weight(t)
    target = f(t) - (0 if fixed is None else fixed(t))
    basis = np.stack([t ** p for p in powers], axis=1) * w[:, None]
    rhs = target * w
    u = np.full(points, LD(1) / points)
    best, best_err = None, np.inf
    for _ in range(iterations):
        s = np.sqrt(u)
        c = _lstsq(basis * s[:, None], rhs * s)
        e = np.abs(basis @ c - rhs)
        if e.max() < best_err:
            best, best_err = c, float(e.max())
        u = u * e
        u /= u.sum()
    return best, best_err


def measure(f: Fn, powers: list[int], coefs: list[float], lo: float, hi: float, weight: Fn | None = None,
            fixed: Fn | None = None, points: int = 20001) -> float:
    """The largest weighted error of the polynomial with ``coefs`` (already rounded), evaluated exactly."""
    t = np.linspace(LD(lo), LD(hi), points)
    p = sum(LD(c) * t ** k for c, k in zip(coefs, powers)) + (0 if fixed is None else fixed(t))
    w = np.ones_like(t) if weight is None else weight(t)
    return float(np.max(np.abs((p - f(t)) * w)))


def _rel(f: Fn) -> Fn:
    return lambda t: 1 / np.abs(np.where(t == 0, LD(1e-30), f(t)))


def _log1p(t: np.ndarray) -> np.ndarray:
    return np.log1p(t)


def _tanh_rel(t: np.ndarray) -> np.ndarray:
    return 1 / np.where(t == 0, LD(1e-30), np.tanh(t))


def _erf_rel(t: np.ndarray) -> np.ndarray:
    return 1 / np.where(t == 0, LD(1e-30), erf_longdouble(t))


#: name -> (target, powers, interval, weight, fixed part) per precision.
SQRT_HALF = float(np.sqrt(LD(0.5)))
FITS: dict[str, dict] = {
    # exp(r) = 1 + r + sum c_k r^k on |r| <= ln2/2 (a little more: n is rounded from a rounded product).
    "exp32": dict(f=np.exp, powers=list(range(2, 7)), lo=-0.3466, hi=0.3466, weight=lambda t: 1 / np.exp(t),
                  fixed=lambda t: 1 + t, dtype=np.float32),
    "exp64": dict(f=np.exp, powers=list(range(2, 12)), lo=-0.3466, hi=0.3466, weight=lambda t: 1 / np.exp(t),
                  fixed=lambda t: 1 + t, dtype=np.float64),
    # log1p(f) = f + sum c_k f^k on f = m - 1, m in [sqrt(1/2), sqrt(2)).
    "log32": dict(f=_log1p, powers=list(range(2, 10)), lo=SQRT_HALF - 1, hi=2 * SQRT_HALF - 1,
                  weight=_rel(_log1p), fixed=lambda t: t, dtype=np.float32),
    "log64": dict(f=_log1p, powers=list(range(2, 21)), lo=SQRT_HALF - 1, hi=2 * SQRT_HALF - 1,
                  weight=_rel(_log1p), fixed=lambda t: t, dtype=np.float64),
    # tanh(x) = x + sum c_k x^(2k+1) on |x| < 0.55 (odd).
    "tanh32": dict(f=np.tanh, powers=[3, 5, 7, 9], lo=0.0, hi=0.55, weight=_tanh_rel, fixed=lambda t: t,
                   dtype=np.float32),
    "tanh64": dict(f=np.tanh, powers=list(range(3, 22, 2)), lo=0.0, hi=0.55, weight=_tanh_rel, fixed=lambda t: t,
                   dtype=np.float64),
    # erf(x) = x + sum c_k x^(2k+1) on |x| < 1 (x exact: c_0 = 2/sqrt(pi) - 1 rounds less than 2/sqrt(pi)).
    "erf32": dict(f=erf_longdouble, powers=list(range(1, 14, 2)), lo=0.0, hi=1.0, weight=_erf_rel,
                  fixed=lambda t: t, dtype=np.float32),
    "erf64": dict(f=erf_longdouble, powers=list(range(1, 24, 2)), lo=0.0, hi=1.0, weight=_erf_rel,
                  fixed=lambda t: t, dtype=np.float64),
    # erf(x) = 1 - exp(-y(x)), y = -log(erfc(x)) = sum c_k (x - 1)^k on [1, 4] (float32) / [1, 6] (float64),
    # weighted by erfc(x): what an error in y costs erf.
    "erfc32": dict(f=lambda t: -np.log(erfc_longdouble(t + 1)), powers=list(range(0, 8)), lo=0.0, hi=3.0,
                   weight=lambda t: erfc_longdouble(t + 1), dtype=np.float32),
    "erfc64": dict(f=lambda t: -np.log(erfc_longdouble(t + 1)), powers=list(range(0, 17)), lo=0.0, hi=5.0,
                   weight=lambda t: erfc_longdouble(t + 1), dtype=np.float64),
}


def fit_rounded(spec: dict, dtype: type) -> tuple[list[float], float]:
    """Fit, round the lowest coefficient, refit the others with it fixed, and so on (rounding the low
    coefficients first matters most: they scale the largest terms)."""
    powers, base = spec["powers"], spec.get("fixed")
    rounded: list[float] = []
    err = np.inf
    for k in range(len(powers)):
        done = list(zip(rounded, powers[:k]))

        def fixed(t: np.ndarray, done: list = done) -> np.ndarray:
            return (0 if base is None else base(t)) + sum(LD(c) * t ** p for c, p in done)

        c, err = fit(**{**spec, "powers": powers[k:], "fixed": fixed})
        rounded.append(float(dtype(c[0])))
    return rounded, err


def run(name: str) -> None:
    spec = dict(FITS[name])
    dtype = spec.pop("dtype")
    rounded, err = fit_rounded(spec, dtype)
    keep = {k: spec[k] for k in ("lo", "hi", "weight", "fixed") if k in spec}
    after = measure(spec["f"], spec["powers"], rounded, **keep)
    print(f"{name}: powers {spec['powers']}, fit error {err:.3g}, rounded {after:.3g} "
          f"({after / np.finfo(dtype).eps:.3f} eps)")
    print("    (" + ", ".join(repr(v) for v in rounded) + ")")


if __name__ == "__main__":
    for name in sys.argv[1:] or list(FITS):
        run(name)
