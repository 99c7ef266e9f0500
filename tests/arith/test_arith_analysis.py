"""ConstIntBound and ModularSet analyses, and the Analyzer's API."""

import pytest

import loom
from loom.arith import Analyzer, ConstIntBound, ModularSet
from loom.ir import Range
from loom.ir import expr as E
from loom.ir.expr_ops import maximum as max_, minimum as min_

fd, fm, td, tm = loom.floordiv, loom.floormod, loom.truncdiv, loom.truncmod
x, y, z, a, b = (loom.var(name) for name in "xyzab")
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


@pytest.fixture
def an():
    an = Analyzer()
    an.bind(x, Range.from_min_extent(0, 100))
    an.bind(y, Range.from_min_extent(0, 8))
    an.bind(z, Range.from_min_extent(-50, 100))
    return an


def bound(an, e):
    r = an.const_int_bound(e)
    return r.min_value, r.max_value


def test_const_int_bound_arithmetic(an):
    assert bound(an, x * 4 + 3) == (3, 399)
    assert bound(an, x - y) == (-7, 99)
    assert bound(an, z * z) == (-50 * 49, 2500)
    assert bound(an, min_(x, z)) == (-50, 49)
    assert bound(an, max_(y, 5)) == (5, 7)
    assert bound(an, loom.select(x < 3, y, z)) == (-50, 49)
    assert bound(an, loom.size_var("n")) == (0, I32_MAX)
    assert bound(an, x < 3) == (0, 1)


def test_const_int_bound_is_the_full_range_when_overflow_is_possible(an):
    assert bound(an, a) == (I32_MIN, I32_MAX)
    assert bound(an, a + 1) == (I32_MIN, I32_MAX)
    assert bound(an, x * 30000000) == (I32_MIN, I32_MAX)  # 99 * 3e7 does not fit int32
    assert bound(an, x * 20000000) == (0, 99 * 20000000)
    assert bound(an, fd(a, -1)) == (I32_MIN, I32_MAX)  # INT_MIN // -1 wraps


def test_const_int_bound_division(an):
    assert bound(an, fd(x, 4)) == (0, 24)
    assert bound(an, fd(z, 4)) == (-13, 12)
    assert bound(an, td(z, 4)) == (-12, 12)
    assert bound(an, fm(a, 8)) == (0, 7)
    assert bound(an, fm(a, -8)) == (-7, 0)
    assert bound(an, fm(y, 16)) == (0, 7)
    assert bound(an, tm(z, 8)) == (-7, 7)
    assert bound(an, tm(y, 100)) == (0, 7)
    assert bound(an, fd(x, z)) == (-99, 99)  # z == 0 is undefined, so left out


def test_const_int_bound_casts_lets_vectors(an):
    w = loom.var("w", "int64")
    assert bound(an, loom.cast(y, "int64")) == (0, 7)
    assert bound(an, loom.cast(w, "int32")) == (I32_MIN, I32_MAX)
    assert bound(an, loom.cast(y, "int8")) == (0, 7)
    assert bound(an, loom.cast(z * 10, "int8")) == (-128, 127)
    v = loom.var("v")
    assert bound(an, E.Let(v, y * 2, v + 1)) == (1, 15)
    assert bound(an, E.Ramp(y, loom.const(2), 4)) == (0, 13)
    assert bound(an, E.Broadcast(z, 4)) == (-50, 49)


def test_const_int_bound_of_floats_is_unbounded(an):
    f = loom.var("f", "float32")
    r = an.const_int_bound(f + 1.0)
    assert (r.min_value, r.max_value) == (ConstIntBound.NEG_INF, ConstIntBound.POS_INF)


def test_update_sets_a_bound(an):
    an.update(a, ConstIntBound(-4, 4))
    assert bound(an, a * 2) == (-8, 8)
    with pytest.raises(loom.LoomValueError, match="already known"):
        an.update(a, ConstIntBound(0, 1))
    an.update(a, ConstIntBound(0, 1), allow_override=True)
    assert bound(an, a) == (0, 1)


def test_modular_set(an):
    assert an.modular_set(x * 8 + 4) == ModularSet(8, 4)
    assert an.modular_set(x * 6 + 4) == ModularSet(6, 4)
    assert an.modular_set(loom.const(5)) == ModularSet(0, 5)
    assert an.modular_set(fd(x * 8 + 4, 4)) == ModularSet(2, 1)
    assert an.modular_set(fm(x * 8 + 4, 4)) == ModularSet(0, 0)
    assert an.modular_set(min_(x * 4, x * 4 + 8)) == ModularSet(4, 0)
    assert an.modular_set(x * 4 - 1) == ModularSet(4, 3)
    assert an.modular_set(y) == ModularSet(1, 0)


def test_modular_set_with_wraparound(an):
    assert an.modular_set(a * 8 + 4) == ModularSet(8, 4)  # 8 divides 2**32
    assert an.modular_set(a * 6 + 4) == ModularSet(2, 0)  # only gcd(6, 2**32) survives
    assert an.modular_set(E.Add(loom.const(I32_MAX), loom.const(1))) == ModularSet(0, I32_MIN)


def test_bind_expression_substitutes(an):
    an.bind(b, y + 1)
    assert str(an.simplify(b - y)) == "1"
    assert bound(an, b) == (1, 8)
    with pytest.raises(loom.LoomValueError, match="already bound"):
        an.bind(b, y + 2)
    an.bind(b, y + 2, allow_override=True)
    assert str(an.simplify(b - y)) == "2"


def test_bind_range_rebinding(an):
    an.bind(x, Range.from_min_extent(0, 100))  # the same range again is fine
    with pytest.raises(loom.LoomValueError, match="allow_override"):
        an.bind(x, Range.from_min_extent(0, 10))
    an.bind(x, Range.from_min_extent(0, 10), allow_override=True)
    assert bound(an, x) == (0, 9)
    with pytest.raises(loom.LoomTypeError, match="expected a Var"):
        an.bind(x + 1, 3)


def test_symbolic_range_facts():
    an, i, n = Analyzer(), loom.var("i"), loom.var("n")
    an.bind(i, Range.from_min_extent(0, n))
    assert an.can_prove(i < n)
    assert an.can_prove(n > i)
    assert an.can_prove(i >= 0)
    assert not an.can_prove(i < n - 1)


def test_constraint_scope_adds_and_removes_facts():
    an, i, n = Analyzer(), loom.var("i"), loom.var("n")
    an.bind(n, Range.from_min_extent(0, 11))
    with an.constraint_scope(loom.all(i >= 0, i < n)):
        assert an.can_prove(i < n)
        assert bound(an, i) == (0, 9)
        with an.constraint_scope(i > 4):
            assert bound(an, i) == (5, 9)
            assert str(an.simplify(fd(i, 10))) == "0"
        assert bound(an, i) == (0, 9)
    assert not an.can_prove(i < n)
    assert bound(an, i) == (I32_MIN, I32_MAX)


def test_constraint_scope_learns_from_sums_and_residues():
    an, i, j, n = Analyzer(), loom.var("i"), loom.var("j"), loom.var("n")
    an.bind(j, Range.from_min_extent(0, 4))
    with an.constraint_scope(i * 4 + j < 16):
        assert bound(an, i)[1] == I32_MAX  # i * 4 may wrap around: nothing to learn
    with an.constraint_scope(loom.all(i >= 0, i < 1000)):
        with an.constraint_scope(i * 4 + j < 16):
            assert bound(an, i) == (0, 3)
    with an.constraint_scope(fm(n, 4) == 0):
        assert an.can_prove(fm(n * 3, 4) == 0)
        assert an.can_prove_equal(fd(n, 4) * 4, n)
    with an.constraint_scope(i + 1 == 5):
        assert bound(an, i) == (4, 4)


def test_constraint_scope_rejects_non_bool():
    with pytest.raises(loom.LoomTypeError, match="bool"):
        with Analyzer().constraint_scope(x + 1):
            pass


def test_can_prove_is_true_only_when_proven(an):
    assert an.can_prove(x < 100)
    assert not an.can_prove(x < 99)
    assert not an.can_prove(a < a + 1)  # false at INT_MAX
    assert an.can_prove(a * 2 != a * 2 + 1)
    assert not an.can_prove(loom.var("f", "float32") < 1.0)
    with pytest.raises(loom.LoomTypeError, match="bool"):
        an.can_prove(x + 1)


def test_can_prove_equal(an):
    assert an.can_prove_equal(a * 2, a + a)
    assert an.can_prove_equal(fd(x, 4) * 4 + fm(x, 4), x)
    assert an.can_prove_equal(fd(y, 8), 0)
    assert not an.can_prove_equal(a, b)
    assert not an.can_prove_equal(fd(a, 4) * 4, a)


def test_too_deep_expressions_come_back_unchanged(an):
    deep = a
    for k in range(3000):
        deep = E.Add(deep, E.Mul(b, E.IntImm("int32", k + 1)))
    assert an.simplify(deep) is deep
    assert an.const_int_bound(deep) == ConstIntBound(I32_MIN, I32_MAX)
    assert an.modular_set(deep) == ModularSet(1, 0)
