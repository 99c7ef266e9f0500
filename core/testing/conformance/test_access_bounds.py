"""Arguments that would put an access out of its buffer raise a LoomError before anything runs.

Shapes with separate variables (``C[i] = A[i]``, ``A`` of shape ``(m,)`` and
``C`` of shape ``(n,)``) and indices with scalar arguments (``A[i + off]``) are
safe only for some calls.  Each program here is called with arguments that keep
every access in bounds, where the result must match numpy (no check may refuse a
correct call, padding and split tails included), and with arguments that would
read or write past a buffer, where the call must raise :class:`loom.LoomError`
naming the buffer and leave the output as it was.  The interpreter is the
oracle; before, native code read past ``A``.  The calls run in a child process,
which a crash would kill.
"""

from __future__ import annotations

import json

import pytest

from .harness import KindUnderTest, run_child

_CHILD = """
from loom.testing.conformance.harness import bind_root

def schedule(C, split=None, vector=False):
    s = loom.create_schedule(C.op)
    if kind.on_device:
        bind_root(s, C, split or 4)
    elif split:
        outer, inner = s[C].split(C.op.axis[0], factor=split)
        if vector:
            s[C].vectorize(inner)
    return s

m, n, off = loom.var("m"), loom.var("n"), loom.var("off")
A = loom.placeholder((m,), name="A")
programs = {}

C = loom.compute((n,), lambda i: A[i] + 1.0, name="C")
programs["copy"] = (kind.build(schedule(C), [A, C]), lambda a, c: a[:len(c)] + 1)

C = loom.compute((n,), lambda i: A[i] + 1.0, name="C")
programs["split tail, vectorized"] = (kind.build(schedule(C, 8, True), [A, C]), lambda a, c: a[:len(c)] + 1)

C = loom.compute((n,), lambda i: A[i + off] * 2.0, name="C")
programs["offset"] = (kind.build(schedule(C), [A, C, off]), None)

pad = 3
C = loom.compute((n,), lambda i: loom.if_then_else(loom.all(i >= pad, i < m + pad), A[i - pad], 0.0), name="C")
def padded(a, c):
    out = np.zeros(len(c), "float32")
    k = min(len(a), max(len(c) - pad, 0))
    out[pad:pad + k] = a[:k]
    return out
programs["padding"] = (kind.build(schedule(C, 8), [A, C]), padded)

B = loom.placeholder((n,), name="B")
def writer(ins, outs):
    ib = loom.ir_builder.create()
    a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
    if kind.on_device:
        tx = loom.thread_axis("threadIdx.x")
        ib.scope_attr(tx, "thread_extent", n)
        c[tx + off] = a[tx]
    else:
        with ib.for_range(0, n, name="i") as i:
            c[i + off] = a[i]
    return ib.get()
W = loom.extern((m,), [B], writer, name="W", dtype="float32")
programs["write"] = (kind.build(loom.create_schedule(W.op), [B, W, off]), None)

def call(name, arrays, scalars=()):
    f, _ = programs[name]
    placed = [kind.put(x) for x in arrays]
    try:
        f(*placed, *scalars)
        return "ok", [kind.get(x).tolist() for x in placed]
    except loom.LoomError as err:
        if kind.get(placed[-1]).tolist() != arrays[-1].tolist():
            return "crash", f"the output was written before the error: {err}"
        return "error", str(err)
    except Exception as err:  # noqa: BLE001 - the report names it
        return "crash", f"{type(err).__name__}: {err}"

for name, sizes, scalars in args[0]:
    arrays = [np.arange(k, dtype="float32") + 1 for k in sizes[:-1]] + [np.full(sizes[-1], -7.0, "float32")]
    print(json.dumps([name, sizes, scalars, *call(name, arrays, scalars)]), flush=True)
"""

# (program, array sizes, scalar arguments, expected outcome)
CASES = [
    ("copy", [16, 16], [], "ok"),
    ("copy", [40, 16], [], "ok"),
    ("copy", [16, 40], [], "read A"),
    ("copy", [0, 0], [], "ok"),
    ("copy", [0, 3], [], "read A"),
    ("split tail, vectorized", [21, 21], [], "ok"),
    ("split tail, vectorized", [21, 19], [], "ok"),
    ("split tail, vectorized", [19, 21], [], "read A"),
    ("offset", [16, 8], [8], "ok"),
    ("offset", [16, 8], [9], "read A"),
    ("offset", [16, 8], [-1], "read A"),
    ("offset", [16, 8], [2**31 - 4], "read A"),  # off + i wraps in int32
    ("offset", [16, 0], [100], "ok"),  # nothing is read
    ("padding", [10, 13], [], "ok"),  # the guard keeps i - 3 inside A
    ("padding", [10, 40], [], "ok"),
    ("padding", [10, 2], [], "ok"),
    ("write", [8, 16], [8], "ok"),
    ("write", [8, 16], [9], "write W"),
    ("write", [8, 16], [-2], "write W"),
]


def _expected(name: str, sizes: list[int], scalars: list[int]) -> list[float]:
    import numpy as np

    a = np.arange(sizes[0], dtype="float32") + 1
    out = np.full(sizes[-1], -7.0, "float32")
    if name in ("copy", "split tail, vectorized"):
        out = a[:sizes[-1]] + 1
    elif name == "offset":
        out = a[scalars[0]:scalars[0] + sizes[-1]] * 2
    elif name == "padding":
        k = min(sizes[0], max(sizes[-1] - 3, 0))
        out = np.zeros(sizes[-1], "float32")
        out[3:3 + k] = a[:k]
    elif name == "write":
        out[scalars[0]:scalars[0] + sizes[0]] = a
    return out.tolist()


def test_out_of_bounds_arguments_raise(kind_under_test: KindUnderTest) -> None:
    proc = run_child(_CHILD, kind_under_test, [[name, sizes, scalars] for name, sizes, scalars, _ in CASES])
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    if proc.returncode != 0:
        where = f"after the case {lines[-1][:3]!r}" if lines else "before its first case"
        pytest.fail(f"the child ended with status {proc.returncode} {where}:\n{proc.stderr[-3000:]}")
    assert len(lines) == len(CASES), proc.stderr[-3000:]
    wrong = []
    for (name, sizes, scalars, want), (_, _, _, outcome, detail) in zip(CASES, lines):
        case = f"{name} with sizes {sizes} and scalars {scalars}"
        if want == "ok":
            if outcome != "ok":
                wrong.append(f"{case}: a correct call failed: {detail}")
            elif detail[-1] != _expected(name, sizes, scalars):
                wrong.append(f"{case}: wrong result {detail[-1]}")
        else:
            verb, buf = want.split()
            if outcome != "error" or f"out-of-bounds {verb} of buffer {buf} " not in detail:
                wrong.append(f"{case}: expected a LoomError naming the {verb} of {buf}, got {outcome}: {detail}")
    assert not wrong, "\n".join(wrong)
