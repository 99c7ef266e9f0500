"""Aliased and read-only arguments: every kind refuses them with the same error, before anything runs.

Generated code assumes that an array it writes shares no memory with another
argument, and runs loads and stores in its own order (vectorized, in parallel,
on a device), so passing the same array as input and output would give a
different answer on every kind.  The shared argument checker refuses such a
call, naming both parameters; arrays that are only read may alias freely.  A
read-only array where the function writes is refused too.  Each refusal must
hold on the per-call fast path, after a good call has taught it the layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import loom

from .harness import KindUnderTest, bind_root

_N = 37  # not a multiple of the block: guards run
_MIRROR_ALIAS = r"mirror: argument 0 \(A\) and argument 1 \(B\) overlap in memory, and mirror writes argument 1 \(B\)"
_READ_ONLY = r"argument 1 \(B: float32 buffer B of shape \(n,\)\) is read-only, but mirror writes to it"


def _mirror(kind: KindUnderTest) -> Any:
    """``B[i] = A[i] + A[n - 1 - i]``: stores into an aliased A would change what later iterations load."""
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] + A[n - 1 - i], name="B")
    s = loom.create_schedule(B.op)
    if kind.on_device:
        bind_root(s, B)
    else:
        outer, inner = s[B].split(B.op.axis[0], factor=8)
        s[B].parallel(outer)
        s[B].vectorize(inner)
    return kind.build(s, [A, B], name="mirror")


@pytest.fixture
def mirror(kind_under_test: KindUnderTest) -> Any:
    return _mirror(kind_under_test)


def _values() -> tuple[np.ndarray, np.ndarray]:
    a = np.arange(_N, dtype="float32")
    return a, a + a[::-1]


def test_the_same_array_in_and_out_is_refused(kind_under_test: KindUnderTest, mirror: Any) -> None:
    kind = kind_under_test
    a, want = _values()
    x, y = kind.put(a.copy()), kind.put(np.zeros(_N, "float32"))
    for _ in range(2):  # the second time on the fast path, where the kind has one
        with pytest.raises(loom.LoomError, match=_MIRROR_ALIAS):
            mirror(x, x)
        np.testing.assert_array_equal(kind.get(x), a)
        mirror(x, y)
        np.testing.assert_array_equal(kind.get(y), want)


def test_inputs_may_alias(kind_under_test: KindUnderTest) -> None:
    kind = kind_under_test
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] * B[i], name="C")
    s = loom.create_schedule(C.op)
    if kind.on_device:
        bind_root(s, C)
    f = kind.build(s, [A, B, C], name="square")
    a = np.arange(_N, dtype="float32")
    x, c = kind.put(a), kind.put(np.zeros(_N, "float32"))
    f(x, x, c)
    np.testing.assert_array_equal(kind.get(c), a * a)


def test_overlapping_host_views_are_refused(kind_under_test: KindUnderTest, mirror: Any) -> None:
    kind = kind_under_test
    if kind.on_device:
        pytest.skip("device arrays have no views to overlap (the same array twice is checked above)")
    base = np.arange(2 * _N, dtype="float32")
    with pytest.raises(loom.LoomError, match=_MIRROR_ALIAS):
        mirror(base[:_N], base[_N - 1:2 * _N - 1])
    mirror(base[:_N], base[_N:])
    np.testing.assert_array_equal(base[_N:], _values()[1])


def test_read_only_outputs_are_refused(kind_under_test: KindUnderTest, mirror: Any) -> None:
    kind = kind_under_test
    a, want = _values()
    x, y = kind.put(a), kind.put(np.zeros(_N, "float32"))
    mirror(x, y)  # teaches the fast path the layout
    frozen: Any
    if kind.on_device:
        frozen = loom.nd.NDArray(y.handle, y.shape, y.dtype, y.device, owner=y, readonly=True)
    else:
        frozen = np.zeros(_N, "float32")
        frozen.flags.writeable = False
    with pytest.raises(loom.LoomError, match=_READ_ONLY):
        mirror(x, frozen)
    np.testing.assert_array_equal(kind.get(y), want)  # the memory behind the read-only view is untouched
    if not kind.on_device:
        assert not frozen.any()
    out = kind.put(np.zeros(_N, "float32"))
    mirror(frozen, out)  # reading a read-only array is fine
    np.testing.assert_array_equal(kind.get(out), 2 * kind.get(frozen))
