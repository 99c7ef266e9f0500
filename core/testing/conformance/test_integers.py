"""Integer semantics: arithmetic wraps at its width, division truncates or floors, INT_MIN / -1 wraps.

The operands are loaded from arrays (nothing can be constant-folded) or, for
division, also constant divisors with data of both signs (LowerIntrin may only
turn floor division into truncating division when the dividend is provably
non-negative).  Results must equal the interpreter's exactly, and the
interpreter's must equal numpy's wrapping arithmetic.  Division by zero is not
checked.  The IR has no shift or bitwise operators, so there are none to check.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Callable

import numpy as np
import pytest

import loom

from .harness import KindUnderTest, bind_root, run_child

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32"]
SIGNED = [d for d in DTYPES if d.startswith("int")]

_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "neg": lambda a, b: -a,
}
_DIV: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    # loom op, numpy reference (Python ints: exact)
    "truncdiv": (loom.truncdiv, lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)),
    "truncmod": (loom.truncmod, lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1))),
    "floordiv": (loom.floordiv, lambda a, b: a // b),
    "floormod": (loom.floormod, lambda a, b: a % b),
}
CONSTANT_DIVISORS = [1, 2, 3, 4, 7, -2, -3, -4]  # -1 with INT_MIN: test_int_min_divided_by_minus_one


def _wrap(values: list[int], dtype: str) -> np.ndarray:
    """Python integers reduced to ``dtype`` two's complement."""
    bits = np.iinfo(dtype).bits
    mask = (1 << bits) - 1
    return np.array([v & mask for v in values], dtype=f"uint{bits}").view(dtype)


def _arith_operands(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    edge = [info.max, info.min, info.max, info.min, info.max // 2 + 1, info.max, 0, 1, info.min + 1, info.max - 1]
    other = [1, info.max, info.max, info.min, 2, info.min, info.min, info.max, info.max // 3, 3]
    rng = np.random.default_rng(3)
    extra_a = rng.integers(info.min, info.max, 13, dtype=dtype, endpoint=True)
    extra_b = rng.integers(info.min, info.max, 13, dtype=dtype, endpoint=True)
    return (np.concatenate([np.array(edge, dtype), extra_a]), np.concatenate([np.array(other, dtype), extra_b]))


def _div_operands(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of small values of both signs and the extremes, divisor nonzero, INT_MIN / -1 left out."""
    info = np.iinfo(dtype)
    small = [v for v in range(-9, 10) if info.min <= v]
    dividends = small + [info.min, info.min + 1, info.max, info.max - 1]
    divisors = [v for v in small + [info.min, info.max, 7] if v != 0 and (abs(v) <= 4 or abs(v) >= 7)]
    pairs = [(a, b) for a, b in itertools.product(dividends, divisors) if not (a == info.min and b == -1)]
    return np.array([a for a, _ in pairs], dtype), np.array([b for _, b in pairs], dtype)


def _elementwise(n: int, f: Callable[..., Any], name: str) -> Any:
    """``out[i] = f(i)``: a closure per output (compute reads the index names off the lambda)."""
    return loom.compute((n,), lambda i: f(i), name=name)


def _schedule(kind: KindUnderTest, outs: list[Any], vectorize: bool) -> Any:
    s = loom.create_schedule([t.op for t in outs])
    for t in outs:
        if kind.on_device:
            bind_root(s, t, 8)
        elif vectorize:
            _, inner = s[t].split(t.op.axis[0], factor=4)  # the lengths here are not multiples of 4
            s[t].vectorize(inner)
    return s


def _run_both(kind: KindUnderTest, build: Callable[[KindUnderTest], tuple[Any, list[Any]]], values: list[Any],
              outs: int, dtype: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The outputs of the program built by ``build`` on the kind and on the interpreter."""
    n = len(values[0])
    results = []
    for k in (kind, KindUnderTest.resolve("interp")):
        s, args = build(k)
        results.append(k.run(k.build(s, args), *values, *[np.zeros(n, dtype) for _ in range(outs)])[len(values):])
    return results[0], results[1]


VECTOR = pytest.mark.parametrize("vectorize", [False, True], ids=["scalar", "vector"])


@VECTOR
@pytest.mark.parametrize("dtype", DTYPES)
def test_arithmetic_wraps(kind_under_test: KindUnderTest, dtype: str, vectorize: bool) -> None:
    if vectorize and kind_under_test.on_device:
        pytest.skip("vectorized loops are a CPU schedule")
    a, b = _arith_operands(dtype)
    n = len(a)

    def build(kind: KindUnderTest) -> tuple[Any, list[Any]]:
        A, B = loom.placeholder((n,), dtype, name="A"), loom.placeholder((n,), dtype, name="B")
        outs = [_elementwise(n, lambda i, f=f: f(A[i], B[i]), name) for name, f in _ARITH.items()]
        return _schedule(kind, outs, vectorize), [A, B, *outs]

    got, want = _run_both(kind_under_test, build, [a, b], len(_ARITH), dtype)
    for name, g, w in zip(_ARITH, got, want):
        exact = _wrap([_ARITH[name](int(x), int(y)) for x, y in zip(a, b)], dtype)
        np.testing.assert_array_equal(w, exact, err_msg=f"the interpreter's {name} does not wrap")
        np.testing.assert_array_equal(g, w, err_msg=f"{name} on {dtype}")


@VECTOR
@pytest.mark.parametrize("divisor", ["loaded", "constant"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_division_and_modulo(kind_under_test: KindUnderTest, dtype: str, divisor: str, vectorize: bool) -> None:
    if vectorize and kind_under_test.on_device:
        pytest.skip("vectorized loops are a CPU schedule")
    a, b = _div_operands(dtype)
    unsigned = dtype.startswith("uint")
    consts = [c for c in CONSTANT_DIVISORS if not unsigned or c > 0]
    names = [f"{op}_{c}" for op in _DIV for c in consts] if divisor == "constant" else list(_DIV)
    if divisor == "constant":
        a, b = a[::3], b[::3]  # every dividend, fewer repeats
    n = len(a)

    def build(kind: KindUnderTest) -> tuple[Any, list[Any]]:
        A, B = loom.placeholder((n,), dtype, name="A"), loom.placeholder((n,), dtype, name="B")
        if divisor == "loaded":
            outs = [_elementwise(n, lambda i, f=f: f(A[i], B[i]), op) for op, (f, _) in _DIV.items()]
        else:
            outs = [_elementwise(n, lambda i, f=f, c=c: f(A[i], loom.const(c, dtype)), f"{op}_{k}")
                    for op, (f, _) in _DIV.items() for k, c in enumerate(consts)]
        return _schedule(kind, outs, vectorize), [A, B, *outs]

    got, want = _run_both(kind_under_test, build, [a, b], len(names), dtype)
    refs = [_DIV[name.split("_")[0]][1] for name in names]
    for k, (name, g, w) in enumerate(zip(names, got, want)):
        divs = [int(x) for x in b] if divisor == "loaded" else [consts[k % len(consts)]] * n
        exact = _wrap([refs[k](int(x), y) for x, y in zip(a, divs)], dtype)
        np.testing.assert_array_equal(w, exact, err_msg=f"the interpreter's {name} on {dtype}")
        np.testing.assert_array_equal(g, w, err_msg=f"{name} on {dtype}")


# INT_MIN / -1 traps on x86's idiv unless the backend wraps it, and a trap kills the process: the child
# builds every case, then runs each in a forked process of its own and reports how it ended.
_INT_MIN_CHILD = """
import os
from loom.testing.conformance.harness import bind_root

report = {}
for dtype in args[0]:
    lo = int(np.iinfo(dtype).min)
    a, b = np.array([lo, lo, 7], dtype), np.array([-1, -1, -1], dtype)
    want = {"truncdiv": [lo, lo, -7], "truncmod": [0, 0, 0], "floordiv": [lo, lo, -7], "floormod": [0, 0, 0]}
    for op, expected in want.items():
        for divisor in ("loaded", "constant"):
            A, B = loom.placeholder((3,), dtype, name="A"), loom.placeholder((3,), dtype, name="B")
            d = B[0] if divisor == "loaded" else loom.const(-1, dtype)
            C = loom.compute((3,), lambda i: getattr(loom, op)(A[i], d if divisor == "constant" else B[i]), name="C")
            s = loom.create_schedule(C.op)
            if kind.on_device:
                bind_root(s, C, 4)
            f = kind.build(s, [A, B, C])
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                try:
                    got = kind.run(f, a, b, np.zeros(3, dtype))[-1].tolist()
                    os.write(w, json.dumps(got).encode())
                finally:
                    os._exit(0)
            os.close(w)
            out = os.read(r, 4096).decode()
            os.close(r)
            _, status = os.waitpid(pid, 0)
            key = f"{op} {dtype} ({divisor} -1)"
            if os.WIFSIGNALED(status):
                report[key] = f"killed by signal {os.WTERMSIG(status)}"
            elif not out:
                report[key] = "raised"
            elif json.loads(out) != expected:
                report[key] = f"gave {json.loads(out)}, want {expected}"
print(json.dumps(report))
"""

def test_int_min_divided_by_minus_one_wraps(kind_under_test: KindUnderTest) -> None:
    """In a child process: x86 traps on this quotient, so a backend that does not guard it kills the process."""
    kind = kind_under_test
    proc = run_child(_INT_MIN_CHILD, kind, SIGNED)
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    failures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not failures, "INT_MIN / -1 must wrap (and INT_MIN % -1 be 0):\n" + "\n".join(
        f"  {k}: {v}" for k, v in failures.items())
