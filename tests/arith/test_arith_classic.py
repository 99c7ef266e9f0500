"""TVM v0.6's arithmetic unit tests, ported: the rewrite and canonical simplifiers,
modular sets under constraints, and reductions.

TVM's rules assume that index arithmetic never overflows; Loom's keep the IR's
wrap-around semantics and prove "no overflow" from bounds instead.  So the
variables here have bounds (``[-1000, 1000]`` unless a case says otherwise), as
loop variables do; ``test_unbounded_variables_stay_exact`` shows the cases TVM
rewrites for unbounded variables and why Loom does not.  Results are Loom's
spellings; every case is also checked by value at many points.
"""

import itertools

import pytest

import loom
from loom.arith import Analyzer, ConstIntBound, ModularSet
from loom.ir import expr as E
from loom.ir.functor import substitute

fld, flm, tdiv, tmod = loom.floordiv, loom.floormod, loom.truncdiv, loom.truncmod
mn, mx = loom.min, loom.max
x, y, z = loom.var("x"), loom.var("y"), loom.var("z")


def bounded(lo=-1000, hi=1000, **ranges):
    an = Analyzer()
    for v in (x, y, z):
        an.update(v, ConstIntBound(*ranges.get(v.name, (lo, hi))))
    return an


def value(e, env):
    """The constant ``e`` folds to with the variables replaced (constant folding only)."""
    out = Analyzer().rewrite_simplify(substitute(e, {v: loom.const(k, v.dtype) for v, k in env.items()}))
    assert isinstance(out, E.IntImm), f"{e} did not fold at {env}: {out}"
    return out.value


def divides_by_zero(e, env):
    divisions = loom.ir.collect(e, lambda n: isinstance(n, (E.FloorDiv, E.FloorMod, E.Div, E.Mod)))
    return any(value(d.b, env) == 0 for d in divisions)


def same_value(a, b, ranges):
    points = [(lo, hi, (lo + hi) // 2, lo + 1, hi - 1, 0, 1, -1, 7) for lo, hi in ranges.values()]
    for combo in itertools.product(*points):
        env = dict(zip(ranges, combo))
        inside = all(lo <= k <= hi for k, (lo, hi) in zip(combo, ranges.values()))
        if inside and not divides_by_zero(a, env):  # where the original is undefined, anything goes
            assert value(b, env) == value(a, env), f"{a} -> {b} differs at {env}"


def check(expr, want, how="rewrite_simplify", **ranges):
    limits = {v: ranges.get(v.name, (-1000, 1000)) for v in (x, y, z)}
    an = bounded(**ranges)
    got = getattr(an, how)(expr)
    assert str(got) == want, f"{how}({expr}): expected {want}, got {got}"
    same_value(expr, got, limits)


@pytest.mark.parametrize("expr, want", [
    (mn(x + 1, x + 10), "x + 1"), (mn(x + 111, x + 10), "x + 10"), (mx(x + 1, x + 10), "x + 10"),
    (mn(1 - x, 2 - x), "1 - x"), (mx(3 - x, 2 - x), "3 - x"),
    (mn(mx(x, y), mn(x, y)), "min(x, y)"), (mx(mn(x, y), mx(y, x)), "max(x, y)"),
    (mn(mn(mn(x, y), z), y), "min(min(x, y), z)"),
    (mx(mx(mx(mx(x, y), z), x * 2), y), "max(max(max(x, y), z), x * 2)"),
    (mn(mx(x, y), mx(x, z)), "max(min(y, z), x)"), (mx(mn(y, x), mn(z, x)), "min(max(y, z), x)"),
    (mn(x * 3, 9), "min(x, 3) * 3"), (mx(x * -3, 9), "min(x, -3) * -3"),
    (mn(3 - x, 2), "3 - max(x, 1)"), (mx(3 - x, 1), "3 - min(x, 2)"),
    (mn(fld(x + 3, 4) * 4, x), "x"), (mx(fld(x + 3, 4) * 4, x), "(x + 3) // 4 * 4"),
    (mn(x, fld(x, 4) * 4), "x // 4 * 4"), (mx(fld(x, 4) * 4, x), "x"),
    (mn(fld(x, 10), fld(y, 10)), "min(x, y) // 10"), (mn(fld(x, -10), fld(y, -10)), "max(x, y) // -10"),
    (mx(tdiv(x, 10), tdiv(y, 10)), "truncdiv(max(x, y), 10)"),
    (mn(tdiv(x, -10), tdiv(y, -10)), "truncdiv(max(x, y), -10)"),
    (mn(flm(x, 2), flm(y, 2) + 10), "x % 2"), (mx(tmod(x, 2), tmod(y, 2) + 10), "truncmod(y, 2) + 10"),
    (mn(x + y, x + z), "min(y, z) + x"), (mx(x - y, x - z), "x - min(y, z)"),
])
def test_min_max(expr, want):
    check(expr, want)


@pytest.mark.parametrize("expr, want", [
    (mn(x, y - z) + z, "min(x + z, y)"), (mx(x - 11, y) + 11, "max(x, y + 11)"),
    (mx(0, 1 - x * 4) + x * 4, "max(x * 4, 1)"), (mn(x + 2, y + 3) + (-2), "min(x, y + 1)"),
    (fld(x, 8) * 8 + flm(x, 8), "x"), (tdiv(x, 8) * 8 + tmod(x, 8), "x"),
    (mn(x, y) - x, "min(y - x, 0)"), (y - mx(x, y), "min(y - x, 0)"),
    (mn(x + y, z) - x, "min(y, z - x)"), (mx(z, y + x) - x, "max(z - x, y)"),
    (x - mn(x + y, z), "max(0 - y, x - z)"), (mn(x, y) - mn(y, x), "0"),
    (mn(x, y) - mn(x + 10, y + 10), "-10"), (x - fld(x, 3) * 3, "x % 3"),
    (fld(x + 5, 3) - fld(x, 3), "(x % 3 + 5) // 3"), (fld(x + 5, 3) - fld(x + 2, 3), "1"),
    (mn(x, y) * mx(x, y), "x * y"), (loom.select(x < 0, y, z) - y, "select(x < 0, 0, z - y)"),
])
def test_add_sub_mul(expr, want):
    check(expr, want)


@pytest.mark.parametrize("expr, want", [
    (y - fld(y - 6, 5) * 5, "(y + 4) % 5 + 6"), (fld(y - 6, 5) * 5 - y, "(y + 4) % 5 * -1 - 6"),
    (y - fld(y + z, 5) * 5, "(y + z) % 5 - z"), (y * 3 - fld(y, 2) * 6, "y % 2 * 3"),
    (fld(y + z, 3) * 6 - y * 2, "z * 2 - (y + z) % 3 * 2"), (fld(x * 6 + y + z, 2), "x * 3 + (y + z) // 2"),
    ((x - y) * -2, "y * 2 - x * 2"),
])
def test_canonical_quotients_become_remainders(expr, want):
    check(expr, want, how="simplify")


@pytest.mark.parametrize("expr, want", [
    (fld(fld(x, 2) + 1, 3), "(x + 2) // 6"), (fld(x * 2, 4), "x // 2"), (fld(x * 4, 2), "x * 2"),
    (fld(x * 4 + y, 2), "x * 2 + y // 2"), (fld(mn(x * 6, y), 2), "min(x * 3, y // 2)"),
    (fld(mx(y, x * 6), 2), "max(y // 2, x * 3)"), (fld(x * 6 - y + (y + 3), 2), "x * 3 + 1"),
    (fld(x + 4, 2), "x // 2 + 2"), (fld(x * 8, 8), "x"), (flm(x * 10, 2), "0"), (flm(x * 10 + y, 2), "y % 2"),
    (flm(x * 10 + 1 + y * 2 + 2, 2), "1"), (flm(x * -10 + y, 2), "y % 2"), (flm(x + y * -10, 2), "x % 2"),
    (flm(x * 9600, 6400), "x * 3200 % 6400"),
])
def test_div_mod(expr, want):
    check(expr, want)


@pytest.mark.parametrize("expr, want", [
    (fld(x + y, x), "y // x + 1"), (fld(x + y + z, x), "(y + z) // x + 1"), (fld(y + (z + x), x), "(y + z) // x + 1"),
    (fld(x * y, y), "x"), (fld(x * z + y, z), "x + y // z"), (fld(y + z * x, z), "y // z + x"),
    (tdiv(x + y, x), "y // x + 1"), (tdiv(x * z + y, z), "x + y // z"), (flm(x * z + y, z), "y % z"),
    (tmod(x * 10, -2), "0"), (tmod(x * 10 + y, -2), "y % 2"), (tdiv(tdiv(x, 2) + 1, 3), "(x + 2) // 6"),
])
def test_division_by_a_variable_factor(expr, want):
    check(expr, want, x=(0, 1000), y=(0, 1000), z=(0, 1000))


@pytest.mark.parametrize("expr, want", [
    (x - 2 < 3, "x < 5"), (x < z + x, "0 < z"), (100 < x + 1, "99 < x"), (1 < 100 - x, "x < 99"),
    (x * 3 < y * 3, "x < y"), (x * -3 < y * -3, "y < x"), (x * 4 >= 2, "1 <= x"), (x * 2 >= 3, "2 <= x"),
    (x * -2 <= 1, "0 <= x"), (x * -2 >= 3, "x <= -2"), (fld(x, 2) < 3, "x < 6"), (-3 < fld(x, 2), "-5 < x"),
    (fld(x, 2) <= -1, "x <= -1"), (tdiv(x, 2) < 3, "x < 6"), (3 < tdiv(x, 2), "8 <= x"),
    (tdiv(x, 3) >= 0, "-2 <= x"), (tdiv(x, 2) <= -1, "x < -1"), (fld(x, 4) * 4 < x, "0 < x % 4"),
    (fld(x, 4) * 4 >= x, "x % 4 <= 0"), (fld(x, 4) * 4 < x + y, "0 < y + x % 4"), (fld(x, 4) * 4 < x - y, "y < x % 4"),
    (fld(x + 2, 4) * 4 >= x, "(x + 2) % 4 <= 2"), (fld(x + 2, 4) * 4 >= x + y, "y + (x + 2) % 4 <= 2"),
    (tdiv(x, 4) * 4 < x, "0 < truncmod(x, 4)"), (mn(x, 11) < 10, "x < 10"), (mn(x, 8) < 10, "True"),
    (mx(8, x) > 10, "10 < x"), (x + 1 < mx(8, x), "x < 7"), ((0 - x * 3) <= 0, "0 <= x"),
    (2 * x - 4 * y <= 0, "x <= y * 2"), ((x * y) == 0, "x == 0 or y == 0"), (x * y != 0, "x != 0 and y != 0"),
    (flm(x, 2) + 10 <= 1, "False"), (x * 3 + 10 == 0, "False"),
])
def test_comparisons(expr, want):
    check(expr, want)


@pytest.mark.parametrize("expr, want", [
    (E.And(x == y, x != y), "False"), (E.Or(x != y, x == y), "True"), (E.And(x < 1, 0 < x), "False"),
    (E.And(x <= 1, 2 <= x), "False"), (E.Or(x < 1, 0 < x), "True"), (E.Or(x <= 1, 2 <= x), "True"),
    (E.Or(x != 1, x == 2), "x != 1"), (E.And(x == 1, x != 2), "x == 1"), (loom.select(x * 3 + 1 != 0, y, z), "y"),
])
def test_logic_and_select(expr, want):
    check(expr, want)


def test_canonical_simplify_rewrites_comparisons_too():
    """As TVM's canonical_simplify does: ``x - 2 < 3`` is ``x < 5`` once bounds rule out wrap-around."""
    check(x - 2 < 3, "x < 5", how="canonical_simplify")
    check(loom.select(x < 2000, y, z), "y", how="canonical_simplify")


def test_canonical_truncation_by_a_positive_symbolic_divisor_floors():
    """``truncdiv(10, y)`` with ``y >= 1`` is ``10 // y`` (both round alike), so the difference cancels;
    with ``y`` of either sign, or a numerator of either sign, the truncation stays."""
    an, y, v = Analyzer(), loom.var("y"), loom.var("v")
    an.update(y, loom.arith.ConstIntBound(1, 100), override=True)
    assert str(an.canonical_simplify(fld(10, y) - loom.truncdiv(10, y))) == "0"
    assert str(an.canonical_simplify(loom.truncmod(10, y))) == "10 % y"
    assert str(an.canonical_simplify(loom.truncdiv(v, y))) == "truncdiv(v, y)"
    assert str(Analyzer().canonical_simplify(loom.truncdiv(10, v))) == "truncdiv(10, v)"
    for yv in (1, 3, 7, 100):
        assert value(loom.truncmod(10, y), {y: yv}) == value(an.canonical_simplify(loom.truncmod(10, y)), {y: yv})


def test_unbounded_variables_stay_exact():
    """TVM assumes no overflow and rewrites these for any ``x``; at the edges of int32 they differ.

    ``min(x + 1, x + 10)`` at ``x = 2**31 - 5``: ``x + 10`` wraps to a negative number, so the
    minimum is ``x + 10``, not ``x + 1``.  Loom leaves them alone until bounds prove no wrap.
    """
    a = loom.var("a")
    big = 2**31 - 5
    for e in (mn(a + 1, a + 10), fld(a * 8, 8), a - 2 < 3):
        assert str(Analyzer().rewrite_simplify(e)) == str(e)
        assert str(Analyzer().canonical_simplify(e)) == str(e)
    assert value(mn(a + 1, a + 10), {a: big}) != value(a + 1, {a: big})
    assert value(fld(a * 8, 8), {a: big}) != big
    assert value(a - 2 < 3, {a: -(2**31)}) != value(a < 5, {a: -(2**31)})
    an = Analyzer()
    with an.constraint_scope(loom.all(a >= 0, a < 4096)):  # what a loop bound gives
        assert [str(an.simplify(e)) for e in (mn(a + 1, a + 10), fld(a * 8, 8), a - 2 < 3)] == ["a + 1", "a", "a < 5"]


def test_min_of_rounded_up_and_max_needs_x_positive():
    """TVM rewrites ``min((x + 3) // 4 * 4, max(x, 4))`` to ``max(x, 4)``; at ``x == 0`` it is 0, not 4."""
    e = mn(fld(x + 3, 4) * 4, mx(x, 4))
    assert value(e, {x: 0}) == 0
    assert str(bounded(0, 1000).simplify(e)) == str(e)


# ---------------------------------------------------------------------------
# Modular sets (test_arith_modular_set.py), constraint facts included.


def test_modular_set_uses_constraint_facts():
    a, b = loom.var("a"), loom.var("b")
    an = Analyzer()
    with an.constraint_scope(flm(b, 4) == 2):
        assert an.modular_set(b + 1) == ModularSet(4, 3)
        with an.constraint_scope(flm(a, 2) == 1):
            assert an.modular_set(b + a * 2) == ModularSet(4, 0)
        assert an.modular_set(b + a * 2) == ModularSet(2, 0)
    assert an.modular_set(b + 1) == ModularSet(1, 0)
    with an.constraint_scope(tmod(a, 4) == -3):  # a truncated remainder: a is 1 modulo 4
        assert an.modular_set(a) == ModularSet(4, 1)
        assert str(an.simplify(flm(a, 4))) == "1"
    with an.constraint_scope(a == 12):
        assert an.modular_set(a * 2 + 1) == ModularSet(0, 25)


def test_modular_set_intersects_facts():
    a = loom.var("a")
    an = Analyzer()
    with an.constraint_scope(flm(a, 4) == 1):
        with an.constraint_scope(flm(a, 3) == 1):
            assert an.modular_set(a) == ModularSet(12, 1)
    with an.constraint_scope(flm(a, 3) == 2), an.constraint_scope(flm(a, 5) == 3), an.constraint_scope(flm(a, 7) == 2):
        assert an.modular_set(a) == ModularSet(105, 23)
        assert str(an.simplify(flm(a * 2 + 1, 105))) == "(a * 2 + 1) % 105"  # a * 2 may wrap
        an.update(a, ConstIntBound(0, 10**6))
        assert str(an.simplify(flm(a * 2 + 1, 105))) == "47"
    assert ModularSet(4, 1).intersect(ModularSet(6, 2)) is None  # odd and even: no value
    assert ModularSet(0, 5).intersect(ModularSet(4, 1)) == ModularSet(0, 5)


def test_modular_set_mix_index_and_shifts():
    a, b = loom.var("a"), loom.var("b")
    an = Analyzer()
    an.update(a, ConstIntBound(-1000, 1000))
    an.update(b, ConstIntBound(-1000, 1000))
    assert an.modular_set(a * 4 + b * 6 + 7) == ModularSet(2, 1)
    assert an.modular_set((a * 4 + 1) * (b * 8 + 3)) == ModularSet(4, 3)
    assert an.modular_set((a * 12 + 1) - (b * 3 * 7 + 2)) == ModularSet(3, 2)
    assert an.modular_set(mn(a * 3, b * 9)) == ModularSet(3, 0)
    assert an.modular_set(fld(a * 4 + 2, 2)) == ModularSet(2, 1)
    assert an.modular_set((a * 4 + 2) >> 1) == ModularSet(2, 1)  # an arithmetic shift floors
    assert an.modular_set((a * 4 + 2) << 2) == ModularSet(16, 8)
    assert an.const_int_bound((a * 4 + 2) >> 1) == ConstIntBound(-1999, 2001)
    assert an.const_int_bound(b & 7) == ConstIntBound(0, 7)


# ---------------------------------------------------------------------------
# Reductions (test_arith_canonical_simplify.py: test_reduce_simplify, test_reduce_combiner_simplify).

k = loom.reduce_axis((0, 10), "k")
j = loom.reduce_axis((-5, 3), "j")
A = loom.placeholder((10,), name="A", dtype="int32")


def test_reduce_conditions_use_the_axis_ranges():
    an = Analyzer()
    e = an.canonical_simplify(loom.sum(loom.select(k + j < 12, k + j, 0), axis=[k, j]))
    assert loom.structural_equal(e, loom.sum(j + k, axis=[k, j]))
    assert str(an.canonical_simplify(loom.sum(fld(k, 10), axis=k))) == str(loom.sum(loom.const(0), axis=k))
    assert str(an.simplify(loom.sum(A[k], axis=k, where=k > 12))) == "0"  # never true: the identity
    assert str(an.simplify(loom.sum(A[k], axis=k, where=k < 12))) == str(loom.sum(A[k], axis=k))
    assert str(an.canonical_simplify(loom.sum(A[3], axis=[]))) == "A[3]"  # one point: 0 + A[3]


def test_reduce_drops_unused_tuple_elements():
    dummy = loom.var("dummy")
    an = Analyzer()
    sum_or_prod = loom.comm_reducer(lambda p, q: loom.select(dummy < 0, p + q, p * q),
                                    lambda t: loom.select(dummy < 0, loom.const(0, t), loom.const(1, t)))
    an.update(dummy, ConstIntBound(-10, -4))
    assert loom.structural_equal(an.canonical_simplify(sum_or_prod(A[k], axis=k)), loom.sum(A[k], axis=k))
    sum_and_prod = loom.comm_reducer(lambda p, q: (p[0] + q[0], p[1] * q[1]),
                                     lambda t0, t1: (loom.const(0, t0), loom.const(1, t1)))
    first, second = sum_and_prod((A[k], A[9 - k]), axis=k)
    prod = loom.comm_reducer(lambda p, q: p * q, lambda t: loom.const(1, t))
    assert loom.structural_equal(an.canonical_simplify(first), loom.sum(A[k], axis=k))
    assert loom.structural_equal(an.canonical_simplify(second), prod(A[9 - k], axis=k))
    # argmax-like: element 0 needs element 1, so both stay.
    chained = loom.comm_reducer(lambda p, q: (p[0] + q[0] + p[1], p[1] + q[1]),
                                lambda t0, t1: (loom.const(0, t0), loom.const(0, t1)))
    kept = an.canonical_simplify(chained((A[k], A[9 - k]), axis=k)[0])
    assert len(kept.source) == 2


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_simplified_reduction_computes_the_same(target):
    """The simplified reduction, built and run, matches numpy."""
    import numpy as np
    n = 10
    B = loom.placeholder((n,), name="B", dtype="int32")
    r = loom.reduce_axis((0, n), "r")
    C = loom.compute((n,), lambda i: loom.sum(loom.select(r + i < 2 * n, B[r] * (r + i), 0), axis=r), name="C")
    s = loom.create_schedule(C.op)
    f = loom.build(s, [B, C], target=target)
    b = np.arange(n, dtype="int32") - 3
    c = loom.nd.empty((n,), "int32")
    f(loom.nd.array(b), c)
    want = np.array([sum(int(b[q]) * (q + i) for q in range(n)) for i in range(n)], dtype="int32")
    np.testing.assert_array_equal(c.numpy(), want)


def test_bound_infinities_are_the_ends_of_the_dtype_and_update_takes_tvms_keyword():
    """TVM's idioms: ``bd.max_value == bd.POS_INF`` asks "unbounded above?", ``update(..., override=True)``."""
    x, y = loom.var("x"), loom.var("y")
    an = Analyzer()
    an.update(x, ConstIntBound(-3, 4))
    with pytest.raises(loom.LoomValueError, match="override=True"):
        an.update(x, ConstIntBound(0, 4))
    an.update(x, ConstIntBound(ConstIntBound.NEG_INF, 4), override=True)  # the class's sentinel: clamped
    an.update(y, ConstIntBound(-8, 2))
    bd = an.const_int_bound(x * y)  # may wrap: anything
    assert (bd.min_value, bd.max_value) == (bd.NEG_INF, bd.POS_INF) == (-(2**31), 2**31 - 1)
    bd = an.const_int_bound(loom.min(x, y))
    assert bd.min_value == bd.NEG_INF and bd.max_value == 2
    assert an.const_int_bound(loom.var("w", "int64")).POS_INF == 2**63 - 1
    assert an.const_int_bound(loom.size_var("n")) == ConstIntBound(0, 2**31 - 1)
    # A bound made by hand, or of a float, has the sentinels far outside every dtype; dtypes are not compared.
    assert ConstIntBound(0, 1).POS_INF == ConstIntBound.POS_INF > 2**64
    assert an.const_int_bound(loom.var("f", "float32")).max_value == ConstIntBound.POS_INF
    assert an.const_int_bound(x & 7) == ConstIntBound(0, 7)
    an.update(y, ConstIntBound(2, 10), override=True)
    an.update(x, ConstIntBound(-9, 11), allow_override=True)
    assert an.const_int_bound(x >> y) == ConstIntBound(-3, 2)  # a range of shifts
    assert an.const_int_bound(x & y) == ConstIntBound(0, 10)  # y is never negative
