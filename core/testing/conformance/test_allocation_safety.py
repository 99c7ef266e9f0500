"""An allocation whose size the data decides fails as the interpreter does, never reads or writes out of bounds.

A stage whose extent is a scalar argument is allocated by the generated code
when the function runs.  A negative extent (``n + 1`` with ``n = -5``, or with
``n = 2**31 - 1``, where ``n + 1`` wraps to ``-2**31``) must raise a
:class:`loom.LoomError` naming the buffer, as the interpreter does; so must two
negative extents whose product is positive, and a size that overflows 64 bits.
Before, native code allocated a few bytes (or a null pointer) and the function
read outside them.  Each check runs in a child process, which a crash would kill.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import loom

from .harness import KindUnderTest, bind_root, run_child

N = 8


def build_symbolic_stage(kind: KindUnderTest, rank: int, shift: int) -> Any:
    """``C[r, i] = B[i % e, ..., i % e] + 1`` with ``B`` of extent ``e = n + shift`` in each of ``rank`` dims:
    at the root on a device, allocated per row of a ``parallel`` loop on the CPU (a failure inside a thread)."""
    n = loom.var("n")
    e = n + shift
    A = loom.placeholder((2, N), name="A")
    B = loom.compute((2,) + (e,) * rank, lambda r, *ix: A[r, 0] * 2.0, name="B")
    C = loom.compute((2, N), lambda r, i: B[(r,) + (loom.floormod(i, e),) * rank] + 1.0, name="C")
    s = loom.create_schedule(C.op)
    if kind.on_device:
        bind_root(s, C, 4)
        bind_root(s, B, 4)
    else:
        s[C].parallel(C.op.axis[0])
        s[B].compute_at(s[C], C.op.axis[0])
    return kind.build(s, [A, C, n])


# Calls run in this child itself (see test_arith_safety: OpenMP's pool does not survive fork()).
_CHILD = """
from loom.testing.conformance.test_allocation_safety import N, build_symbolic_stage

for rank, shift, n in args[0]:
    case = f"B of rank {rank} and extent n + {shift} at n = {n}"
    f = build_symbolic_stage(kind, rank, shift)
    try:
        kind.run(f, np.ones((2, N), "float32"), np.zeros((2, N), "float32"), n)
        outcome = "no error"
    except loom.LoomError as err:
        outcome = "ok" if " B " in f" {err} ".replace(",", " ") else f"a message not naming B: {err}"
    except Exception as err:  # noqa: BLE001 - the report names it
        outcome = f"{type(err).__name__}: {err}"
    print(json.dumps([case, outcome]), flush=True)
"""

CASES = [
    (1, 1, -5),  # n + 1 = -4
    (1, 1, 2**31 - 1),  # n + 1 wraps to -2**31
    (2, 0, -4),  # (-4) * (-4) elements: positive, yet both extents are negative
    (3, 0, 2**21 * 3),  # (3 * 2**21)**3 * 4 bytes overflows 64 bits
]


def test_bad_allocation_size_raises(kind_under_test: KindUnderTest) -> None:
    kind = kind_under_test
    proc = run_child(_CHILD, kind, CASES)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    if proc.returncode != 0:
        where = f"after the case {lines[-1][0]!r}" if lines else "before its first case"
        pytest.fail(f"the child ended with status {proc.returncode} (a negative status is the signal that "
                    f"killed it) {where}:\n{proc.stderr[-3000:]}")
    assert len(lines) == len(CASES), proc.stderr[-3000:]
    failures = {case: outcome for case, outcome in lines if outcome != "ok"}
    assert not failures, "a negative or overflowing allocation size must raise a LoomError naming the buffer:\n" + \
        "\n".join(f"  {case}: {outcome}" for case, outcome in failures.items())


def test_symbolic_stage_of_a_valid_size_computes(kind_under_test: KindUnderTest) -> None:
    """The checks do not reject a good size: ``n + 1 = 4`` in one dimension, ``3 x 3`` in two."""
    import numpy as np

    kind = kind_under_test
    for rank, shift, n in [(1, 1, 3), (2, 0, 3)]:
        f = build_symbolic_stage(kind, rank, shift)
        got = kind.run(f, np.full((2, N), 1.5, "float32"), np.zeros((2, N), "float32"), n)[-2]
        np.testing.assert_allclose(got, np.full((2, N), 4.0, "float32"), err_msg=f"rank {rank}, n = {n}")
