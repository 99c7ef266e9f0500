"""The public interval sets: loom.arith.IntervalSet, intset_interval, intset_vector and Analyzer.int_set.

Concrete sets are checked against brute-force enumeration of the expression over its domain (Python
integers; floordiv/floormod are Python's // and %, truncdiv/truncmod round toward zero); symbolic
ones against the expected ends, compared by canonical simplification of their difference.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loom
from loom.arith import Analyzer, ConstIntBound, IntervalSet, intset_interval, intset_vector
from loom.arith.int_set import union
from loom.errors import LoomError
from loom.ir import Range
from loom.ir.expr import Broadcast, Ramp, Select


def _tdiv(a, b):
    return int(np.fix(a / b))


def _tmod(a, b):
    return a - b * _tdiv(a, b)


# (loom expression of x and y, the same on Python ints, whether interval arithmetic is exact on it)
CASES = {
    "x + y": (lambda x, y: x + y, lambda x, y: x + y, True),
    "x - y": (lambda x, y: x - y, lambda x, y: x - y, True),
    "x * 3 - y": (lambda x, y: x * 3 - y, lambda x, y: x * 3 - y, True),
    "x * -2": (lambda x, y: x * -2, lambda x, y: x * -2, True),
    "x * y": (lambda x, y: x * y, lambda x, y: x * y, True),
    "x // 3": (lambda x, y: loom.floordiv(x, 3), lambda x, y: x // 3, True),
    "x // -3": (lambda x, y: loom.floordiv(x, -3), lambda x, y: x // -3, True),
    "truncdiv(x, 4)": (lambda x, y: loom.truncdiv(x, 4), lambda x, y: _tdiv(x, 4), True),
    "x % 5": (lambda x, y: loom.floormod(x, 5), lambda x, y: x % 5, False),
    "truncmod(x, 5)": (lambda x, y: loom.truncmod(x, 5), lambda x, y: _tmod(x, 5), False),
    "max(x, x + 1)": (lambda x, y: loom.max(x, x + 1), lambda x, y: max(x, x + 1), True),
    "min(x - 1, x + 1)": (lambda x, y: loom.min(x - 1, x + 1), lambda x, y: min(x - 1, x + 1), True),
    "min(x, y)": (lambda x, y: loom.min(x, y), lambda x, y: min(x, y), True),
    "max(x, y) + 2": (lambda x, y: loom.max(x, y) + 2, lambda x, y: max(x, y) + 2, True),
    "select": (lambda x, y: Select(x > 0, x - 1, y + 1), lambda x, y: x - 1 if x > 0 else y + 1, False),
}


def _values(expr, xs, ys):
    return [expr(x, y) for x, y in itertools.product(xs, ys)]


def _ends(s):
    assert isinstance(s.min_value, loom.ir.expr.IntImm) and isinstance(s.max_value, loom.ir.expr.IntImm), s
    return s.min_value.value, s.max_value.value


def _same(an, a, b):
    return an.can_prove_equal(an.canonical_simplify(loom.ir.expr_ops.convert_expr(a) - b), 0)


def _check(an, s, lo, hi):
    assert _same(an, s.min_value, lo) and _same(an, s.max_value, hi), f"{s} != [{lo}, {hi}]"


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("xr, yr", [((0, 10), (1, 11)), ((-7, 4), (-3, -1)), ((3, 3), (-2, 6))])
def test_concrete_sets_match_enumeration(name, xr, yr):
    build, py, exact = CASES[name]
    x, y = loom.var("x"), loom.var("y")
    s = Analyzer().int_set(build(x, y), {x: IntervalSet(*xr), y: IntervalSet(*yr)})
    got = _ends(s)
    vals = _values(py, range(xr[0], xr[1] + 1), range(yr[0], yr[1] + 1))
    assert got[0] <= min(vals) and max(vals) <= got[1], (name, got, min(vals), max(vals))
    if exact:
        assert got == (min(vals), max(vals)), (name, got)


@settings(max_examples=60)
@given(st.sampled_from(sorted(CASES)), st.integers(-20, 20), st.integers(0, 12), st.integers(-20, 20),
       st.integers(0, 12))
def test_every_value_lies_in_the_set(name, xlo, xw, ylo, yw):
    build, py, exact = CASES[name]
    x, y = loom.var("x"), loom.var("y")
    xs, ys = range(xlo, xlo + xw + 1), range(ylo, ylo + yw + 1)
    # Range domains too: [lo, lo + extent)
    dom = {x: Range.from_min_extent(xlo, xw + 1), y: IntervalSet(ylo, ylo + yw)}
    got = _ends(Analyzer().int_set(build(x, y), dom))
    vals = _values(py, xs, ys)
    assert got[0] <= min(vals) and max(vals) <= got[1]
    if exact:
        assert got == (min(vals), max(vals))


def test_floormod_within_one_period_keeps_the_interval():
    x = loom.var("x")
    an = Analyzer()
    for (lo, hi), want in [((3, 5), (3, 5)), ((13, 15), (3, 5)), ((3, 15), (0, 9)), ((-10, 10), (0, 9))]:
        got = _ends(an.int_set(loom.floormod(x, 10), {x: IntervalSet(lo, hi)}))
        vals = [v % 10 for v in range(lo, hi + 1)]
        assert got == want and got[0] <= min(vals) and max(vals) <= got[1]


def test_symbolic_sets_use_the_analyzer_bounds():
    x, y = loom.var("x"), loom.var("y")
    an = Analyzer()
    an.update(y, ConstIntBound(1, 100))
    ten = {x: IntervalSet(0, 10)}
    _check(an, an.int_set(x * y, ten), 0, 10 * y)
    _check(an, an.int_set(loom.floormod(x, y), ten), 0, y - 1)
    _check(an, an.int_set(loom.truncmod(x, y), ten), 0, y - 1)
    _check(an, an.int_set(loom.floordiv(x, y), ten), 0, loom.floordiv(10, y))
    _check(an, an.int_set(loom.truncdiv(x, y), ten), 0, loom.truncdiv(10, y))
    _check(an, an.int_set(x + y, ten), y, y + 10)
    # y's sign unknown: a product with it is unbounded
    assert Analyzer().int_set(x * y, ten).is_everything()


def test_free_variables_stay_a_symbolic_point():
    x, y = loom.var("x"), loom.var("y")
    an = Analyzer()
    for e in (loom.min(x, y), loom.max(x, y)):
        s = an.int_set(e, {})
        assert s.is_point and str(s.min) == str(e)
        _check(an, s, e, e)


def test_select_covers_both_branches():
    x = loom.var("x")
    an = Analyzer()
    _check(an, an.int_set(Select(x > 0, x - 1, x + 1), {x: IntervalSet(0, 10)}), -1, 11)


def test_interval_constructors():
    s = IntervalSet(2, 3)
    assert (s.min_value.value, s.max_value.value) == (2, 3)
    n = loom.var("n")
    t = intset_interval(0, n - 1)
    assert t.min_value.value == 0 and str(t.max_value) == "n - 1"
    assert str(IntervalSet(None, 4).min_value) == "neg_inf"


@pytest.mark.parametrize("base, stride, lanes", [(10, 3, 2), (10, 3, 5), (7, -2, 4), (-5, 1, 8), (0, 0, 3)])
def test_intset_vector_holds_exactly_the_lanes(base, stride, lanes):
    lanes_values = [base + stride * k for k in range(lanes)]
    vec = Ramp(base, stride, lanes) if stride else Broadcast(loom.const(base), lanes)
    assert _ends(intset_vector(vec)) == (min(lanes_values), max(lanes_values))


def test_intset_vector_of_scalars_broadcasts_and_lanewise_arithmetic():
    x, s = loom.var("x"), loom.var("s")
    assert _ends(intset_vector(7)) == (7, 7)
    p = intset_vector(Broadcast(x, 4))
    assert p.is_point and p.min is x
    an = Analyzer()
    _check(an, intset_vector(Ramp(x, 2, 4)), x, x + 6)
    # an unknown stride's sign: both orders stay possible
    r = intset_vector(Ramp(x, s, 3))
    _check(an, r, x + loom.min(s * 2, 0), x + loom.max(s * 2, 0))
    # lanes of (ramp(5, -2, 4) + broadcast(x)) for x in [0, 1]: {5, 3, 1, -1} + x
    got = _ends(an.int_set(Ramp(5, -2, 4) + Broadcast(x, 4), {x: IntervalSet(0, 1)}))
    vals = [5 - 2 * k + v for k in range(4) for v in (0, 1)]
    assert got == (min(vals), max(vals))


def test_domains_given_as_ranges_and_empty_sets():
    x, y = loom.var("x"), loom.var("y")
    an = Analyzer()
    assert _ends(an.int_set(x * 2 + 1, {x: Range.from_min_extent(3, 4)})) == (7, 13)
    assert an.int_set(x + y, {x: IntervalSet.nothing()}).is_nothing()
    assert an.int_set(y + 1, {x: IntervalSet.nothing()}).is_point  # x does not occur
    assert an.int_set(x, {x: IntervalSet(0, None)}).max_value.name == "pos_inf"


def test_bad_input_is_a_clear_error():
    x = loom.var("x")
    an = Analyzer()
    with pytest.raises(LoomError, match="keys must be Vars"):
        an.int_set(x + 1, {x + 1: IntervalSet(0, 1)})
    with pytest.raises(LoomError, match="domain of x must be an IntervalSet or a Range"):
        an.int_set(x + 1, {x: (0, 3)})
    with pytest.raises(LoomError, match="integer expression"):
        an.int_set(loom.const(1.5, "float32"), {})
    with pytest.raises(LoomError, match="intset_vector expects an integer expression"):
        intset_vector(Broadcast(loom.const(1.5, "float32"), 4))


def test_polynomial_ends_are_compared_in_the_integers():
    """Index sets live in ℤ: i + 2 is above i + 1 even though only i + 2 can wrap around."""
    i, j = loom.var("i"), loom.var("j")
    an = Analyzer()
    an.bind(i, Range.from_min_extent(0, loom.var("n")))
    s = union([IntervalSet.point(i + 1), IntervalSet.point(i + 2), IntervalSet.point(i)], an)
    assert (str(s.min), str(s.max)) == ("i", "i + 2")
    m = an.int_set(loom.max(i * j + 1, i * j + 2) + j, {j: IntervalSet(0, 3)})
    _check(an, m, 2, i * 3 + 5)
    # ... only there: the simplifier keeps the IR's wrap-around semantics
    x = loom.var("x")
    assert str(Analyzer().simplify(loom.max(x + 1, x + 2))) == "max(x + 1, x + 2)"
    assert not Analyzer().can_prove(x + 1 <= x + 2)


def test_non_polynomial_ends_are_not_compared_in_the_integers():
    i = loom.var("i")
    top = loom.max(i, 5)  # can be the largest int32, so top + 1 may wrap below it
    s = union([IntervalSet.point(top), IntervalSet.point(top + 1)], Analyzer())
    assert "max(" in str(s.max) and not s.is_point
