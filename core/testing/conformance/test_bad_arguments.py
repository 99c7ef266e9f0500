"""Bad arguments, in a child process: each raises a LoomError, nothing crashes and nothing is written.

The child first makes a good call, so the per-call fast path has learned the
layout; every bad call after it must still be rejected by the full check and
leave every array as it was.  A device kind gets device arrays, and must refuse
a host (numpy or CPU) array where a device array goes.
"""

from __future__ import annotations

from .harness import KindUnderTest, run_child

_CHILD = """
from loom.testing.conformance.harness import bind_root

n = loom.var("n")
A = loom.placeholder((n, 4), name="A")
B = loom.placeholder((n, 4), name="B")
alpha = loom.var("alpha", "float32")
C = loom.compute((n, 4), lambda i, j: A[i, j] * alpha + B[i, j], name="C")
s = loom.create_schedule(C.op)
if kind.on_device:
    bind_root(s, C, 8)
else:
    s[C].vectorize(C.op.axis[1])
    s[C].parallel(C.op.axis[0])
f = kind.build(s, [A, B, alpha, C], name="axpy")

a, b, c = (kind.put(np.full((8, 4), v, "float32")) for v in (1.0, 2.0, 0.0))
f(a, b, 3.0, c)
assert (kind.get(c) == 5.0).all(), kind.get(c)
c = kind.put(np.full((8, 4), -1.0, "float32"))
canaries = [kind.get(x).copy() for x in (a, b, c)]

def array(shape, dtype="float32"):
    return kind.put(np.zeros(shape, dtype))

bad = [
    (a, b, 3.0),                                    # too few
    (a, b, 3.0, c, c),                              # too many
    (kind.put(np.ones((8, 4))), b, 3.0, c),         # dtype (float64), same shape
    (a, b, 3.0, array((7, 4))),                     # n bound inconsistently
    (a, b, 3.0, array((4, 8))),                     # constant dimension
    (a, b, 3.0, array((32,))),                      # ndim
    (a, b, "3", c),                                 # scalar of the wrong kind
    (a, b, None, c),
    (a, b, 3.0, None),                              # not an array
    (kind.get(a).tolist(), b, 3.0, c),              # a list is not an array
    (a, b, 3.0, np.float32(1.0)),                   # a scalar where an array goes
    (a, b, 3.0, array((0, 4))),                     # n = 0 here, 8 elsewhere
]
if kind.on_device:
    bad += [
        (np.ones((8, 4), "float32"), b, 3.0, c),            # a numpy array for a device parameter
        (a, b, 3.0, np.zeros((8, 4), "float32")),           # ... for the output, too
        (a, loom.nd.array(np.ones((8, 4), "float32")), 3.0, c),  # a CPU NDArray
    ]
else:
    bad.append((a, b, 3.0, np.zeros((8, 8), "float32")[:, ::2]))  # strided where compact is needed
raised = 0
for call in bad:
    try:
        f(*call)
    except loom.LoomError:
        raised += 1
    for x, y in zip((a, b, c), canaries):
        assert np.array_equal(kind.get(x), y), ("an array changed", call)
if not kind.on_device:  # a misaligned host view is valid: copied in and out, and only it changes
    base = np.zeros(8 * 4 + 1, "float32")
    view = base[1:].reshape(8, 4)
    f(a, b, 3.0, view)
    assert (view == 5.0).all() and base[0] == 0.0
print("survived", raised, len(bad))
"""


def test_bad_arguments_raise_and_never_write(kind_under_test: KindUnderTest) -> None:
    proc = run_child(_CHILD, kind_under_test)
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    words = proc.stdout.split()
    assert words[:1] == ["survived"] and words[1] == words[2], proc.stdout
