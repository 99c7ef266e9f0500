"""Integer division never ends the process: a zero divisor raises what the interpreter raises, INT_MIN / -1 wraps.

Native code that divides by zero traps (SIGFPE on x86), and so does ``INT_MIN / -1``.
A kind must instead raise :class:`loom.testing.DivisionByZero` (a LoomError) for a
zero divisor in the data, as the interpreter does, and wrap ``INT_MIN / -1``, for
``truncdiv``, ``truncmod``, ``floordiv`` and ``floormod`` of every integer width
and signedness, in every form a loop takes: scalar, vectorized and ``parallel``
on CPU kinds, bound to threads on device kinds.  Each check runs in a child
process, which a trap would kill; the child reports one line per case, so a
crash names the case it died in.  A division that a condition guards must not
fail when the divisor is zero.
"""

from __future__ import annotations

import itertools

import json
from typing import Any

import numpy as np
import pytest

import loom
from loom.ir import IRModule

from .harness import KindUnderTest, bind_root, run_child

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
SIGNED = [d for d in DTYPES if d.startswith("int")]
OPS = ["truncdiv", "truncmod", "floordiv", "floormod"]
#: Elements per array: a multiple of the vector width, so vectorized loops are vector code.
N = 16


def forms(kind: KindUnderTest) -> list[str]:
    """The loop forms checked on ``kind``: bound threads on a device, else scalar, vector and parallel loops."""
    return ["bound"] if kind.on_device else ["scalar", "vector", "parallel"]


def _schedule(kind: KindUnderTest, out: Any, form: str) -> Any:
    s = loom.create_schedule(out.op)
    if form == "bound":
        bind_root(s, out, 8)
    elif form == "vector":
        _, inner = s[out].split(out.op.axis[0], factor=4)
        s[out].vectorize(inner)
    elif form == "parallel":
        s[out].parallel(out.op.axis[0])
    return s


def _quotient(op: str, A: Any, B: Any, divisor: Any) -> Any:
    """``i -> op(A[i], B[i])``, or ``op(A[i], divisor)`` when ``B`` is None (compute reads the index names)."""
    fn = getattr(loom, op)
    return (lambda i: fn(A[i], B[i])) if B is not None else (lambda i: fn(A[i], divisor))


def build_divisions(kind: KindUnderTest, dtype: str, form: str, divisors: dict[str, Any]) -> Any:
    """One module with a function ``f"{op}_{key}"`` computing ``C[i] = op(A[i], divisor)`` per op and divisor.

    ``divisors`` maps a key to ``"array"`` (``B[i]``, a second array argument),
    ``"scalar"`` (a scalar argument ``d``) or an int (a constant).
    """
    funcs: dict[str, Any] = {}
    args: list[Any]
    for op in OPS:
        for key, divisor in divisors.items():
            A = loom.placeholder((N,), dtype, name="A")
            if divisor == "array":
                B = loom.placeholder((N,), dtype, name="B")
                C, args = loom.compute((N,), _quotient(op, A, B, None), name="C"), [A, B]
            elif divisor == "scalar":
                d = loom.var("d", dtype)
                C, args = loom.compute((N,), _quotient(op, A, None, d), name="C"), [A, d]
            else:
                C, args = loom.compute((N,), _quotient(op, A, None, loom.const(divisor, dtype)), name="C"), [A]
            funcs.update(loom.lower(_schedule(kind, C, form), [*args, C], name=f"{op}_{key}").functions)
    return kind.build(IRModule(funcs))


def _child_report(proc: Any, what: str) -> dict[str, str]:
    """The child's ``[case, outcome]`` lines; a failure naming the case after the last reported one if it died."""
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    if proc.returncode != 0:
        where = f"after the case {lines[-1][0]!r}" if lines else "before its first case"
        pytest.fail(f"the child checking {what} ended with status {proc.returncode} (a negative status is the "
                    f"signal that killed it) {where}:\n{proc.stderr[-3000:]}")
    return {case: outcome for case, outcome in lines}


# Calls run in this child itself, not in forked grandchildren: a parallel region forked after OpenMP
# started would run on one thread (libgomp's pool does not survive fork()).
_ZERO_CHILD = """
from loom.testing import DivisionByZero
from loom.testing.conformance.test_arith_safety import N, OPS, build_divisions

for dtype in args[0]:
    for form in args[1]:
        f = build_divisions(kind, dtype, form, {"array": "array", "scalar": "scalar"})
        a = np.arange(1, N + 1).astype(dtype)
        b = np.ones(N, dtype)
        b[N - 3] = 0
        for op in OPS:
            for key, divisor in (("array", b), ("scalar", 0)):
                case = f"{op} {dtype} by a zero in the {key} ({form})"
                try:
                    kind.run(f[f"{op}_{key}"], a, divisor, np.zeros(N, dtype))
                    outcome = "no error"
                except DivisionByZero as err:
                    outcome = "ok" if "integer division by zero" in str(err) else f"an unclear message: {err}"
                except Exception as err:  # noqa: BLE001 - the report names it
                    outcome = f"{type(err).__name__}: {err}"
                print(json.dumps([case, outcome]), flush=True)
"""


@pytest.mark.parametrize("dtypes", [DTYPES[:4], DTYPES[4:]], ids=["signed", "unsigned"])
def test_division_by_zero_raises_division_by_zero(kind_under_test: KindUnderTest, dtypes: list[str]) -> None:
    kind = kind_under_test
    report = _child_report(run_child(_ZERO_CHILD, kind, dtypes, forms(kind)), "division by zero")
    expected = len(dtypes) * len(forms(kind)) * len(OPS) * 2
    assert len(report) == expected, f"the child reported {len(report)} of {expected} cases"
    failures = {case: outcome for case, outcome in report.items() if outcome != "ok"}
    assert not failures, "a zero divisor must raise loom.testing.DivisionByZero, as on the interpreter:\n" + \
        "\n".join(f"  {case}: {outcome}" for case, outcome in failures.items())


_INT_MIN_CHILD = """
from loom.testing.conformance.test_arith_safety import N, OPS, build_divisions

for dtype in args[0]:
    lo = int(np.iinfo(dtype).min)
    a = np.array([lo, 7, lo + 1, -8] * (N // 4), dtype)
    b = np.full(N, -1, dtype)
    for form in args[1]:
        f = build_divisions(kind, dtype, form, {"array": "array", "constant": -1})
        for op in OPS:
            bits = np.iinfo(dtype).bits  # x // -1 is -x, wrapped to the width; x % -1 is 0
            exact = [(-int(x) if op.endswith("div") else 0) & ((1 << bits) - 1) for x in a]
            want = np.array(exact, f"uint{bits}").view(dtype).tolist()
            for key in ("array", "constant"):
                inputs = [a, b] if key == "array" else [a]
                try:
                    got = kind.run(f[f"{op}_{key}"], *inputs, np.zeros(N, dtype))[-1].tolist()
                    outcome = "ok" if got == want else f"gave {got}, want {want}"
                except Exception as err:  # noqa: BLE001 - the report names it
                    outcome = f"{type(err).__name__}: {err}"
                print(json.dumps([f"{op} {dtype} by {key} -1 ({form})", outcome]), flush=True)
"""


def test_int_min_divided_by_minus_one_wraps_in_every_loop_form(kind_under_test: KindUnderTest) -> None:
    """test_integers checks scalar loops and bound threads; here vector and parallel loops too."""
    kind = kind_under_test
    if kind.on_device:
        pytest.skip("bound threads are test_integers' test_int_min_divided_by_minus_one_wraps")
    report = _child_report(run_child(_INT_MIN_CHILD, kind, SIGNED, ["vector", "parallel"]), "INT_MIN / -1")
    assert len(report) == len(SIGNED) * 2 * len(OPS) * 2
    failures = {case: outcome for case, outcome in report.items() if outcome != "ok"}
    assert not failures, "INT_MIN / -1 must wrap (and INT_MIN % -1 be 0):\n" + "\n".join(
        f"  {case}: {outcome}" for case, outcome in failures.items())


@pytest.mark.parametrize("dtype", ["int32", "uint8"])
def test_guarded_division_does_not_fail(kind_under_test: KindUnderTest, dtype: str) -> None:
    """``if_then_else(b != 0, a // b, 5)`` divides only where ``b`` is not zero, in every loop form (a vector
    if_then_else computes both branches on every lane, its guarded divisors are 1 where the guard fails);
    so does ``if_then_else(b == 0, 5, a % b)``, guarded by the false branch."""
    kind = kind_under_test
    for form, guarded_false in itertools.product(forms(kind), (False, True)):
        A, B = loom.placeholder((N,), dtype, name="A"), loom.placeholder((N,), dtype, name="B")
        if guarded_false:
            C = loom.compute((N,), lambda i: loom.if_then_else(B[i] == 0, loom.const(5, dtype),
                                                               loom.floordiv(A[i], B[i])), name="C")
        else:
            C = loom.compute((N,), lambda i: loom.if_then_else(B[i] != 0, loom.floordiv(A[i], B[i]),
                                                               loom.const(5, dtype)), name="C")
        f = kind.build(_schedule(kind, C, form), [A, B, C])
        a = np.arange(N).astype(dtype) * 3
        b = (np.arange(N) % 3).astype(dtype)
        got = kind.run(f, a, b, np.zeros(N, dtype))[-1]
        want = np.where(b != 0, a // np.where(b != 0, b, 1), 5).astype(dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"guarded floordiv on {dtype} ({form})")
