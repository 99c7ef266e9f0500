"""One-line table tests of the simplifier: ``check(expr, "printed result")``.

Variables: ``x`` in [0, 100), ``y`` in [0, 8), ``z`` in [-50, 50); ``a`` and
``b`` are unbounded int32 (so only wrap-around-exact rewrites may touch them);
``n`` is a SizeVar; ``f`` is a float32.
"""

import pytest

import loom
from loom.arith import Analyzer
from loom.ir import Range
from loom.ir import expr as E
from loom.ir.expr_ops import maximum as max_, minimum as min_

fd, fm, td, tm = loom.floordiv, loom.floormod, loom.truncdiv, loom.truncmod
x, y, z, a, b = (loom.var(name) for name in "xyzab")
n = loom.size_var("n")
f = loom.var("f", "float32")
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def i32(v):
    return E.IntImm("int32", v)


def make_analyzer():
    an = Analyzer()
    an.bind(x, Range.from_min_extent(0, 100))
    an.bind(y, Range.from_min_extent(0, 8))
    an.bind(z, Range.from_min_extent(-50, 100))
    return an


def check(expr, expected, how="simplify"):
    """``expected`` is the printed result, or an expression built independently."""
    got = getattr(make_analyzer(), how)(expr)
    want = expected if isinstance(expected, str) else str(expected)
    assert str(got) == want, f"{how}({expr}): expected {want}, got {got}"
    assert got.dtype == expr.dtype


def test_constant_folding_wraps_around():
    check(E.Add(i32(I32_MAX), i32(1)), str(I32_MIN))
    check(E.Mul(i32(65536), i32(65536)), "0")
    check(E.Sub(i32(I32_MIN), i32(1)), str(I32_MAX))
    check(E.FloorDiv(i32(I32_MIN), i32(-1)), str(I32_MIN))
    check(E.Div(i32(I32_MIN), i32(-1)), str(I32_MIN))
    check(E.FloorDiv(i32(-7), i32(2)), "-4")
    check(E.Div(i32(-7), i32(2)), "-3")
    check(E.FloorMod(i32(-7), i32(2)), "1")
    check(E.Mod(i32(-7), i32(2)), "-1")
    check(E.Add(E.IntImm("int64", 2**63 - 1), E.IntImm("int64", 1)), f"int64({-(2**63)})")
    check(E.FloorDiv(a, i32(0)), "a // 0")  # undefined stays undefined, never folds


def test_floats_only_fold_constants():
    check(E.Add(E.FloatImm("float32", 0.1), E.FloatImm("float32", 0.2)), "0.30000001192092896")
    check((f + 1.0) - 1.0, "f + 1.0 - 1.0")
    check(f - f, "f - f")
    check(f * 0.0, "f * 0.0")
    check(E.LT(f, f), "f < f")
    check(loom.select(f < 1.0, f, f), "f")


def test_add_sub_mul():
    check((x + y) - x, "y")
    check(x * 4 + 2 * x - 6 * x, "0")
    check((x * 8 + y) - (y + 8 * x), "0")
    check((a + b) - a, "b")  # ring identities hold even with wrap-around
    check((a + 1) - a, "1")
    check(y + a * 2 - 1 + a, "a * 3 + y - 1")
    check(b + a, "a + b")
    check(0 - a - 3, "a * -1 - 3")
    check(5 - a, "5 - a")
    check((a + 3) * 4, "a * 4 + 12")
    check((a * 4) * (b * 2), "a * b * 8")
    check(a + i32(I32_MIN), f"a + {I32_MIN}")
    check(E.Add(a, i32(-3)), "a - 3", how="rewrite_simplify")
    check(E.Add(E.Add(a, i32(2)), i32(3)), "a + 5", how="rewrite_simplify")
    check(E.Sub(a, a), "0", how="rewrite_simplify")
    check(E.Add(min_(a, b), max_(a, b)), "a + b", how="rewrite_simplify")


def test_floordiv():
    check(fd(x * 8 + y, 8), "x")
    check(fd(x * 8 + 3, 8), "x")
    check(fd(fd(x, 4), 8), "x // 32")
    check(fd(x * 4 + 7, 2), "x * 2 + 3")
    check(fd(x * 6 + y, 3), E.Add(E.Mul(x, i32(2)), E.FloorDiv(y, i32(3))))
    check(fd(y, 8), "0")
    check(fd(z * 4 + 3, 4), "z")
    check(fd(x + 16, 8), "x // 8 + 2")
    check(fd(a * 8 + y, 8), "(a * 8 + y) // 8")  # a * 8 may wrap: no split
    check(fd(a, -1), "a * -1")
    check(fd(a, a), "1")
    check(E.FloorDiv(E.FloorDiv(a, i32(4)), i32(8)), "a // 32", how="rewrite_simplify")
    check(E.FloorDiv(E.Add(E.Mul(x, i32(8)), y), i32(8)), "x", how="rewrite_simplify")


def test_floormod():
    check(fm(x * 8 + y, 8), "y")
    check(fm(a * 8 + y, 8), "y")  # 8 divides 2**32: residues survive wrap-around
    check(fm(a * 6 + 4, 3), "(a * 6 + 4) % 3")  # but 3 does not
    check(fm(x * 6 + 4, 3), "1")
    check(fm(y, 8), "y")
    check(fm(y + 8, 8), "y")
    check(fm(x + 100, 100), "x")
    check(fm(fm(a, 16), 4), "a % 4")
    check(fd(x, 4) * 4 + fm(x, 4), "x")
    check(fd(a, b) * b + fm(a, b), "a")
    check(a - fd(a, b) * b, "a % b")


def test_truncdiv_truncmod():
    check(td(x, 4), "x // 4")
    check(tm(x, 4), "x % 4")
    check(td(z, 4), "truncdiv(z, 4)")
    check(tm(z, 4), "truncmod(z, 4)")
    check(td(y, 8), "0")
    check(tm(y, 8), "y")
    check(td(a, -1), "a * -1")
    check(tm(a, 1), "0")


def test_min_max():
    check(min_(x, x + 3), "x")
    check(max_(x, x - 2), "x")
    check(min_(y, 8), "y")
    check(min_(x, 200), "x")
    check(max_(z, 60), "60")
    check(max_(x, z), "max(x, z)")
    check(min_(a, a + 1), "min(a, a + 1)")  # a + 1 wraps at INT_MAX
    check(min_(a, a), "a")
    check(min_(3, a), "min(a, 3)")
    check(min_(min_(a, 3), 5), "min(a, 3)")
    check(max_(max_(a, 3), 5), "max(a, 5)")
    check(min_(max_(a, b), a), "a")
    check(min_(fd(a, 4), fd(b, 4)), "min(a, b) // 4")
    check(min_(x * 4, y * 4), E.Mul(E.Min(x, y), i32(4)))
    check(min_(x + y, x + z), "x + min(y, z)")


def test_comparisons_use_bounds():
    check(x < 200, "True")
    check(y < 8, "True")
    check(y < 7, "y < 7")
    check(x >= 0, "True")
    check(z < -50, "False")
    check(x + 1 < y + 1, "x < y")
    check(x * 4 < 8, "x < 2")
    check(x + 3 < 10, "x < 7")
    check(fd(x, 4) < 5, "x < 20")
    check(x > y, "y < x")
    check(x - x < 1, "True")
    check(a + 1 < a + 5, "a + 1 < a + 5")  # false when a + 5 wraps
    check(a < a, "False")
    check(n >= 0, "True")


def test_equality_is_exact_modulo_wraparound():
    check(a + 1 == 5, "a == 4")
    check(a * 2 == a * 2 + 1, "False")
    check(a + b == b + a, "True")
    check(x + 1 == 500, "False")
    check(x * 4 == 8, "x == 2")
    check(x * 4 == 7, "False")
    check(a != a + 1, "True")


def test_logic():
    check((x < 10) & (x < 5), "x < 5")
    check((a < 10) & (a < 5), "a < 5")
    check((a < 10) | (a >= 10), "True")
    check((a < 3) & (a > 5), "False")
    check(~(a < b), "b <= a")
    check(~~(a < b), "a < b")
    check((a < b) & ~(a < b), "False")
    check((a == 1) & (a == 2), "False")
    check(loom.all(a < b, a < b), "a < b")


def test_select():
    check(loom.select(x < 50, x, 50), "min(x, 50)")
    check(loom.select(a < b, b, a), "max(a, b)")
    check(loom.select(x < 0, 1, 2), "2")
    check(loom.select(y < 8, x, z), "x")
    check(loom.select(a < 4, a, a), "a")
    check(loom.select(a < 4, fm(a, 4) + a, 0), "select(a < 4, a + a % 4, 0)")
    check(loom.select(a < 4, loom.select(a < 4, b, 1), 2), "select(a < 4, b, 2)")
    check(loom.select(x < 5, min_(x, 5), 0), "select(x < 5, x, 0)")


def test_select_branch_stays_defined():
    """A branch is simplified under its condition, but its divisors are not."""
    check(loom.select(a == 0, fd(1, fd(a, 1)), a), "select(a == 0, 1 // a, a)")


def test_vectors():
    ramp = lambda base, stride: E.Ramp(base, i32(stride), 4)  # noqa: E731
    check(E.Broadcast(a, 4) + E.Broadcast(b, 4), "broadcast(a + b, 4)")
    check(ramp(a, 1) + ramp(b, 2), "ramp(a + b, 3, 4)")
    check(ramp(a, 1) + E.Broadcast(b, 4), "ramp(a + b, 1, 4)")
    check(ramp(a, 0), "broadcast(a, 4)")
    check(ramp(x * 2 + x, 1), "ramp(x * 3, 1, 4)")
    check(E.Broadcast(f, 4) * E.Broadcast(E.FloatImm("float32", 2.0), 4), "broadcast(f * 2.0, 4)")


def test_casts():
    w = loom.var("w", "int64")
    check(loom.cast(loom.cast(y, "int64"), "int32"), "y")
    check(loom.cast(loom.cast(w, "int32"), "int64"), "int64(int32(w))")
    check(E.Cast(loom.DataType.of("int8"), i32(300)), "int8(44)")


def test_let():
    v = loom.var("v")
    check(E.Let(v, y, fd(v, 8)), "0")  # the let value's bounds reach the body
    check(E.Let(v, a, v + 1 - v), "1")


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_canonical_simplify_module_function(dtype):
    p, q = loom.var("p", dtype), loom.var("q", dtype)
    assert str(loom.arith.canonical_simplify((p * 8 + q) - (q + 8 * p))) == ("0" if dtype == "int32" else "int64(0)")
    assert str(loom.arith.canonical_simplify(q + p)) == "p + q"
