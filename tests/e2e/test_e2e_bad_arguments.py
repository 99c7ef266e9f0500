"""Bad arguments on every backend, in a child process: each raises a LoomError, nothing crashes or writes.

The child first makes a good call, so the per-call fast path has learned the layout; every
bad call after it must still be rejected by the full check, and must leave every array as it was.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import loom

    kind = sys.argv[1]
    n = loom.var("n")
    A = loom.placeholder((n, 4), name="A")
    B = loom.placeholder((n, 4), name="B")
    alpha = loom.var("alpha", "float32")
    C = loom.compute((n, 4), lambda i, j: A[i, j] * alpha + B[i, j], name="C")
    s = loom.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    s[C].parallel(C.op.axis[0])
    f = loom.build(s, [A, B, alpha, C], target=kind, name="axpy")

    a, b, c = (np.full((8, 4), v, "float32") for v in (1.0, 2.0, 0.0))
    f(a, b, 3.0, c)
    assert (c == 5.0).all(), c
    c[...] = -1.0
    canaries = [a.copy(), b.copy(), c.copy()]
    ro = c.copy(); ro.flags.writeable = False
    bad = [
        (a, b, 3.0),                                   # too few
        (a, b, 3.0, c, c),                             # too many
        (a.astype("float64"), b, 3.0, c),              # dtype, same shape
        (a, b, 3.0, c[:7]),                            # n bound inconsistently
        (a, b, 3.0, c.reshape(4, 8)),                  # constant dimension
        (a, b, 3.0, c.reshape(-1)),                    # ndim
        (a, b, 3.0, np.zeros((8, 8), "float32")[:, ::2]),  # strided where compact is needed
        (a, b, "3", c),                                # scalar of the wrong kind
        (a, b, None, c),
        (a, b, 3.0, None),                             # not an array
        (a.tolist(), b, 3.0, c),                       # a list is not an array
        (a, b, 3.0, np.float32(1.0)),                  # a scalar where an array goes
        (a, b, 3.0, np.zeros((0, 4), "float32")),      # n = 0 here, 8 elsewhere
    ]
    raised = 0
    for args in bad:
        try:
            f(*args)
        except loom.LoomError:
            raised += 1
        for x, y in zip((a, b, c), canaries):
            assert np.array_equal(x, y), ("an array changed", args)
    # A misaligned view is valid: it is copied in and out, and only it changes.
    base = np.zeros(8 * 4 + 1, "float32")
    view = base[1:].reshape(8, 4)
    f(a, b, 3.0, view)
    assert (view == 5.0).all() and base[0] == 0.0
    print("survived", raised, len(bad))
""")


def test_bad_arguments_raise_and_never_write(target):
    proc = subprocess.run([sys.executable, "-c", _CHILD, target], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    words = proc.stdout.split()
    assert words[0] == "survived" and words[1] == words[2], proc.stdout
