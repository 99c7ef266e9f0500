"""Entry checks of parameter-buffer accesses (loom.transform.entry_checks, affine_region).

End-to-end calls on every backend are in the conformance suite
(``loom.testing.conformance.test_access_bounds``); here: which programs get an
assertion, what it says, and a property test that the ranges it is built from
are exact, so that no assertion refuses a call that stays in bounds.
"""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

import loom
from loom.arith import Analyzer
from loom.ir import AssertStmt, collect, substitute
from loom.ir import expr as E
from loom.transform.affine_region import Region

KINDS = ["interp", "llvm", "c"]


def assertions(mod) -> list[str]:
    func = next(iter(mod.functions.values()))
    return [str(a.message.value) for a in collect(func.body, lambda n: isinstance(n, AssertStmt))]


def lowered(out, args, **schedule):
    s = loom.create_schedule(out.op)
    if "split" in schedule:
        s[out].split(out.op.axis[0], factor=schedule["split"])
    return loom.lower(s, args)


def test_a_shared_extent_needs_no_assertion():
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    C = loom.compute((n,), lambda i: A[i] * 2.0, name="C")
    assert assertions(lowered(C, [A, C])) == []
    assert assertions(lowered(C, [A, C], split=8)) == []  # the tail's guard proves it too


def test_separate_extents_get_one_assertion_naming_the_buffer():
    m, n = loom.var("m"), loom.var("n")
    A = loom.placeholder((m,), name="A")
    C = loom.compute((n,), lambda i: A[i] + A[i] * 2.0, name="C")
    assert assertions(lowered(C, [A, C])) == ["out-of-bounds read of buffer A (shape [m]) for these arguments"]


def test_a_guard_that_keeps_the_read_inside_needs_no_assertion():
    m, n = loom.var("m"), loom.var("n")
    A = loom.placeholder((m,), name="A")
    C = loom.compute((n,), lambda i: loom.if_then_else(i < m, A[i], 0.0), name="C")
    assert assertions(lowered(C, [A, C])) == []
    assert assertions(lowered(C, [A, C], split=4)) == []
    # A select reading memory becomes if_then_else later in the pipeline: it guards the same way.
    C = loom.compute((n,), lambda i: loom.select(i < m, A[i], 0.0), name="C")
    assert assertions(lowered(C, [A, C], split=4)) == []
    for kind in KINDS:
        c = np.full(9, -1.0, "float32")
        loom.build(loom.create_schedule(C.op), [A, C], kind)(np.arange(5, dtype="float32") + 1, c)
        np.testing.assert_array_equal(c, [1, 2, 3, 4, 5, 0, 0, 0, 0])


def test_an_index_read_from_memory_is_not_checked_at_entry():
    """Its range is unknown before the call: the interpreter (or instrument_bound_checkers) checks it."""
    m, n = loom.var("m"), loom.var("n")
    A = loom.placeholder((m,), name="A")
    B = loom.placeholder((n,), "int32", name="B")
    C = loom.compute((n,), lambda i: A[B[i]], name="C")
    assert assertions(lowered(C, [A, B, C])) == []
    f = loom.build(loom.create_schedule(C.op), [A, B, C], "interp")
    with pytest.raises(loom.LoomError, match="out-of-bounds load of A"):
        f(np.ones(4, "float32"), np.array([0, 9], "int32"), np.zeros(2, "float32"))


def test_a_loop_bounded_by_another_loop_is_not_checked():
    """``for j in range(i)``: the region is not a box, so no range is claimed (and a correct call runs)."""
    m, n = loom.var("m"), loom.var("n")
    A = loom.placeholder((m,), name="A")
    k = loom.reduce_axis((0, n), name="k")
    C = loom.compute((n,), lambda i: loom.sum(loom.if_then_else(k <= i, A[k], 0.0), axis=k), name="C")
    ib_free = assertions(lowered(C, [A, C]))
    assert all("buffer C" not in a for a in ib_free)
    for kind in KINDS:
        c = np.zeros(5, "float32")
        loom.build(loom.create_schedule(C.op), [A, C], kind)(np.arange(5, dtype="float32"), c)
        np.testing.assert_allclose(c, np.cumsum(np.arange(5, dtype="float32")))


def test_the_check_runs_before_anything_is_written():
    m, n, off = loom.var("m"), loom.var("n"), loom.var("off")
    A = loom.placeholder((m,), name="A")
    C = loom.compute((n,), lambda i: A[i + off], name="C")
    s = loom.create_schedule(C.op)
    for kind in KINDS:
        f = loom.build(s, [A, C, off], kind)
        c = np.full(4, -1.0, "float32")
        with pytest.raises(loom.LoomError, match="out-of-bounds read of buffer A"):
            f(np.ones(6, "float32"), c, 3)
        assert (c == -1.0).all()
        f(np.arange(6, dtype="float32"), c, 2)
        np.testing.assert_array_equal(c, [2, 3, 4, 5])


# -- the ranges are exact: a property test against enumeration ------------------------------------

P = [loom.var("p0"), loom.var("p1")]
V = [loom.var("v0"), loom.var("v1"), loom.var("v2")]
OPS = {"<": (E.LT, lambda a, b: a < b), "<=": (E.LE, lambda a, b: a <= b), ">": (E.GT, lambda a, b: a > b),
       ">=": (E.GE, lambda a, b: a >= b), "==": (E.EQ, lambda a, b: a == b), "!=": (E.NE, lambda a, b: a != b)}

# An affine form: (coefficients of v0..v2, coefficient of p0, constant).
affine = st.tuples(st.lists(st.integers(-3, 4), min_size=3, max_size=3), st.integers(-1, 1), st.integers(-4, 4))
bounds = st.tuples(st.sampled_from(["const", "p0"]), st.integers(-2, 3), st.sampled_from(["const", "p1"]),
                   st.integers(0, 5))
guard = st.tuples(affine, st.sampled_from(sorted(OPS)), st.booleans())


def _ir(form, nvars):
    coefs, pc, k = form
    e = loom.const(k)
    for c, v in zip(coefs[:nvars], V):
        e = e + c * v
    return e + pc * P[0]


def _py(form, point, p):
    coefs, pc, k = form
    return sum(c * x for c, x in zip(coefs, point)) + pc * p[0] + k


def _value(e, p):
    out = Analyzer().simplify(substitute(e, {P[0]: loom.const(p[0]), P[1]: loom.const(p[1])}))
    assert isinstance(out, E.IntImm), out
    return out.value


@settings(max_examples=300, deadline=None)
@given(nvars=st.integers(1, 3), loops=st.lists(bounds, min_size=3, max_size=3),
       guards=st.lists(guard, max_size=3), index=affine, p=st.tuples(st.integers(-3, 4), st.integers(0, 6)))
def test_ranges_are_exact(nvars, loops, guards, index, p):
    r = Region(frozenset(id(x) for x in P))
    boxes = []
    for v, (lo_kind, lo_c, n_kind, n_c) in zip(V[:nvars], loops):
        lo = P[0] + lo_c if lo_kind == "p0" else loom.const(lo_c)
        n = P[1] if n_kind == "p1" else loom.const(n_c)
        r = r.with_loop(v, lo, n)
        lo_v = p[0] + lo_c if lo_kind == "p0" else lo_c
        boxes.append(range(lo_v, lo_v + (p[1] if n_kind == "p1" else n_c)))
    for form, op, holds in guards:
        r = r.with_guard(OPS[op][0](_ir(form, nvars), P[1]), holds)
    if r.opaque:
        return  # no claim is made
    points = [x for x in itertools.product(*boxes)
              if all(OPS[op][1](_py(form, x + (0,) * (3 - nvars), p), p[1]) == holds for form, op, holds in guards)]
    runs = all(_value(c, p) for c in r.runs())
    contiguous = all(_value(r.contiguous(g), p) for g in r.groups)
    assert runs == (bool(points) and contiguous)
    span = r.index_range(_ir(index, nvars))
    if span is None or not runs:
        return
    values = [_py(index, x + (0,) * (3 - nvars), p) for x in points]
    assert (_value(span[0], p), _value(span[1], p)) == (min(values), max(values))


def test_an_address_is_not_a_read():
    """``address_of(A[n])`` (one past the end, a valid C pointer) does not make A's accesses checked."""
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    i = loom.var("i")
    body = loom.ir.For(i, 0, n, "serial", loom.ir.Evaluate(
        loom.call_extern("int32", "consume", loom.address_of(A[i + 1]))))
    func = loom.ir.PrimFunc([A.data], body, buffer_map={A.data: A})
    from loom.transform.entry_checks import entry_access_checks
    assert not collect(entry_access_checks(func), lambda x: isinstance(x, AssertStmt))
