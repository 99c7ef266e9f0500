"""Split indices merged in the flat offset (loom.codegen.flat_offset), on llvm and c against the interpreter.

``A[i // m, i % m]`` on an ``(n, m)`` buffer reads offset ``i``: the generated code
neither divides nor gathers, a zero ``m`` still raises ``DivisionByZero`` when the
access runs, and every access the merge leaves alone keeps its value.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loom
from loom.arith import Analyzer
from loom.codegen.flat_offset import offset_terms
from loom.ir import BufferStore, For, PrimFunc

NATIVE = [k for k in ("llvm", "c") if k in loom.target.list_kinds()]
ALL = ["interp", *NATIVE]


def _flatten(vector: bool = False, parallel: bool = False, split=lambda i, m: (i // m, i % m), extent=None):
    n, m = loom.var("n"), loom.var("m")
    A = loom.placeholder((n, m), name="A")
    length = n * m if extent is None else extent
    B = loom.compute((length,), lambda i: A[split(i, m)] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    if vector or parallel:
        outer, inner = s[B].split(B.op.axis[0], factor=8)
        if vector:
            s[B].vectorize(inner)
        if parallel:
            s[B].parallel(outer)
    return s, [A, B]


def _source(mod, target: str) -> str:
    return mod.get_source("ll") if target == "llvm" else mod.get_source()


# -- offset_terms ------------------------------------------------------------------------------------------


def test_a_floor_or_trunc_split_on_the_extent_becomes_one_term_that_keeps_its_division() -> None:
    n, m, i = loom.var("n"), loom.var("m"), loom.var("i")
    A = loom.decl_buffer((n, m), name="A")
    for q, r in ((i // m, i % m), (loom.truncdiv(i, m), loom.truncmod(i, m))):
        (term,) = offset_terms(A, [q, r])
        assert term.index.same_as(i) and term.division is q and term.zero_test[0].same_as(m)
        assert isinstance(term.stride, loom.ir.expr.IntImm) and term.stride.value == 1
    # Inside more dimensions, and with a positive constant extent (no zero test owed).
    k = loom.var("k")
    B = loom.decl_buffer((k, n, m), name="B")
    terms = offset_terms(B, [k - 1, i // m, i % m])
    assert [str(t.index) for t in terms] == ["k - 1", "i"] and terms[1].division is not None
    C = loom.decl_buffer((n, 8), name="C")
    (term,) = offset_terms(C, [i // 8, i % 8])
    assert term.index.same_as(i) and term.division is None


def test_what_is_not_a_split_of_the_same_value_by_the_extent_stays() -> None:
    n, m, i, j, p = loom.var("n"), loom.var("m"), loom.var("i"), loom.var("j"), loom.var("p")
    A = loom.decl_buffer((n, m), name="A")
    cases = [
        [i // p, i % p],              # not A's extent (p could be negative)
        [i // m, j % m],              # two dividends
        [i % m, i // m],              # the remainder first
        [i // m, loom.truncmod(i, m)],  # floor quotient, truncated remainder
        [i // 4, i % 4],              # a constant that is not the stride
    ]
    for indices in cases:
        assert len(offset_terms(A, indices)) == 2, indices
    N = loom.decl_buffer((n, -3), name="N")  # a negative constant is no divisor to merge by
    assert len(offset_terms(N, [i // -3, i % -3])) == 2
    strided = loom.decl_buffer((n, m), name="S", strides=[m + 1, 1])  # padded rows: stride is not m * 1
    assert len(offset_terms(strided, [i // m, i % m])) == 2
    padded = loom.decl_buffer((n, m), name="P", strides=[m * 2, 2])  # every other element: stride is m * 2
    (term,) = offset_terms(padded, [i // m, i % m])
    assert str(term.stride) == "2"


@settings(max_examples=300, deadline=None)
@given(x=st.integers(-(2**31), 2**31 - 1), m=st.integers(1, 5000), inner=st.integers(1, 64),
       trunc=st.booleans())
def test_a_merged_offset_equals_the_offset_it_replaces(x: int, m: int, inner: int, trunc: bool) -> None:
    """For every dividend and every positive divisor (the extent when the access runs), in int64 offsets."""
    xv, mv = loom.var("x"), loom.var("m")
    buf = loom.decl_buffer((loom.var("n"), mv), name="A", strides=[mv * inner, inner])
    q, r = (loom.truncdiv(xv, mv), loom.truncmod(xv, mv)) if trunc else (xv // mv, xv % mv)
    terms = offset_terms(buf, [q, r])
    assert len(terms) == 1
    values = {xv: loom.const(x, "int32"), mv: loom.const(m, "int32")}

    def offset(pairs) -> int:
        total = 0
        for index, stride in pairs:
            folded = Analyzer().simplify(loom.ir.substitute(index, values))
            total += folded.value * Analyzer().simplify(loom.ir.substitute(stride, values)).value
        return total

    assert offset([(t.index, t.stride) for t in terms]) == offset(zip([q, r], buf.effective_strides()))


# -- the generated code ------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", NATIVE)
@pytest.mark.parametrize("vector", [False, True])
def test_a_symbolic_flatten_neither_divides_nor_gathers(target: str, vector: bool) -> None:
    s, args = _flatten(vector=vector)
    mod = loom.build(s, args, target=target)
    a = np.random.default_rng(0).random((37, 13), dtype="float32")
    b = np.zeros(a.size, "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a.ravel() + 1.0)
    text = _source(mod, target)
    if target == "llvm":
        assert not re.search(r"\b[su](div|rem)\b", text)
        if vector:
            assert re.search(r"load <8 x float>", text)
    else:
        access = [line for line in text.splitlines() if "A[" in line]
        assert access and not any("loom_floor" in line for line in access), access
        if vector:
            assert any("memcpy(&_t" in line for line in access), access


# A zero extent with the access running: without its zero test, the merged code would read and write
# out of bounds, so these run in a child process (a crash is a failure, not the end of the run).
_ZERO_EXTENT = """
import sys
import numpy as np
import loom
from loom.ir import BufferStore, For, PrimFunc
from loom.testing import DivisionByZero
sys.path.insert(0, sys.argv[1])
from test_split_index_merge import _flatten

def outcome(call):
    try:
        call()
    except DivisionByZero as err:
        return "DivisionByZero: " + str(err)
    return "no error"

for target in sys.argv[2].split(","):
    for form in ("scalar", "vector", "parallel"):
        # B's length k is not n * m: the loop runs although A has no element, and i // 0 raises.
        s, args = _flatten(vector=form == "vector", parallel=form == "parallel", extent=loom.var("k"))
        mod = loom.build(s, args, target=target)
        print(target, form, outcome(lambda: mod(np.zeros((5, 0), "float32"), np.zeros(16, "float32"))))
        # When it does not run, nothing is divided.
        print(target, form, "empty", outcome(lambda: mod(np.zeros((5, 0), "float32"), np.zeros(0, "float32"))))
    n, m, k, i = loom.var("n"), loom.var("m"), loom.var("k"), loom.var("i")
    A = loom.decl_buffer((k,), "float32", name="A")
    B = loom.decl_buffer((n, m), "float32", name="B")
    body = For(i, 0, k, "serial", BufferStore(B, A[i] * 2.0, [i // m, i % m]))
    mod = loom.build(PrimFunc([A.data, B.data], body, buffer_map={A.data: A, B.data: B}), target=target)
    print(target, "store", outcome(lambda: mod(np.arange(12, dtype="float32"), np.zeros((3, 0), "float32"))))
"""


def test_a_zero_extent_still_raises_when_the_access_runs() -> None:
    done = subprocess.run([sys.executable, "-c", _ZERO_EXTENT, str(pathlib.Path(__file__).parent), ",".join(ALL)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"child exited with {done.returncode}\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert len(lines) == 7 * len(ALL), lines
    for line in lines:
        if " empty " in line:
            assert line.endswith("no error"), line
        else:
            assert re.search(r"DivisionByZero: .*integer division by zero in .*// .*m", line), line


@pytest.mark.parametrize("target", ALL)
def test_truncated_splits_and_unmerged_splits_keep_their_values(target: str) -> None:
    rng = np.random.default_rng(1)
    a = rng.random((6, 4), dtype="float32")
    # truncdiv/truncmod of non-negative i: the same reshape.
    s, args = _flatten(split=lambda i, m: (loom.truncdiv(i, m), loom.truncmod(i, m)))
    b = np.zeros(a.size, "float32")
    loom.build(s, args, target=target)(a, b)
    np.testing.assert_array_equal(b, a.ravel() + 1.0)
    # Split by 4 whatever m is: merged only in the code's values, never in its meaning.
    s, args = _flatten(split=lambda i, m: (i // 4, i % 4), extent=loom.var("k"))
    mod = loom.build(s, args, target=target)
    for shape in ((6, 4), (6, 5)):
        a = rng.random(shape, dtype="float32")
        b = np.zeros(20, "float32")
        mod(a, b)
        want = np.array([a[i // 4, i % 4] for i in range(20)], "float32") + 1.0
        np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("target", ALL)
def test_a_store_through_split_indices(target: str) -> None:
    n, m, k = loom.var("n"), loom.var("m"), loom.var("k")
    A = loom.decl_buffer((k,), "float32", name="A")
    B = loom.decl_buffer((n, m), "float32", name="B")
    i = loom.var("i")
    body = For(i, 0, k, "serial", BufferStore(B, A[i] * 2.0, [i // m, i % m]))
    mod = loom.build(PrimFunc([A.data, B.data], body, buffer_map={A.data: A, B.data: B}), target=target,
                     name="unflatten")
    a = np.arange(12, dtype="float32")
    b = np.zeros((3, 4), "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, (a * 2.0).reshape(3, 4))
    if target != "interp":
        text = _source(mod, target)
        assert not re.search(r"\b[su](div|rem)\b", text) if target == "llvm" else "loom_floor" not in text.split(
            "unflatten(", 1)[1]
