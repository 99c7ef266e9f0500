"""Rewrites that hold under wrap-around, found by running TVM v0.6's simplifier checks.

Each rule has an example (``check``) and a hypothesis property: expressions of
the rule's shape, over int8 and int32 variables whose ranges reach the dtype's
extremes, keep their value through ``rewrite_simplify``, ``canonical_simplify``
and ``simplify``.  The reference evaluator here wraps every result to the dtype
and evaluates every operand (a select both sides); examples where the original
divides by zero are skipped.

Variables of the examples: ``x`` in [0, 100), ``y`` in [0, 8), ``z`` in [-50, 50);
``a``, ``b``, ``c`` are unbounded int32.
"""

import itertools
import random

import pytest
from hypothesis import given, settings, strategies as st

import loom
from loom.arith import Analyzer, ConstIntBound, simplify
from loom.ir import BufferStore, For, IterVar, LetStmt, Range
from loom.ir import expr as E
from loom.ir.dtype import DataType

from test_arith_rules import a, b, i32, make_analyzer, x, y, z  # x, y, z bound as there; a, b free

c = loom.var("c")
FD, FM, TD, TM, MN, MX = E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max


def check(expr, expected, how="rewrite_simplify"):
    got = getattr(make_analyzer(), how)(expr)
    assert str(got) == expected, f"{how}({expr}): expected {expected}, got {got}"
    assert got.dtype == expr.dtype


# ---------------------------------------------------------------------------
# Examples, one per rule (most are TVM v0.6 checks that Loom missed).


def test_ring_rules_cancel_terms():
    check(E.Add(E.Sub(a, b), E.Sub(b, c)), "a - c")
    check(E.Add(E.Sub(a, b), E.Sub(c, a)), "c - b")
    check(E.Sub(E.Add(a, b), E.Add(a, c)), "b - c")
    check(E.Sub(E.Add(a, b), E.Add(c, a)), "b - c")
    check(E.Sub(E.Add(b, a), E.Add(a, c)), "b - c")
    check(E.Sub(E.Add(b, a), E.Add(c, a)), "b - c")


def test_common_factor_is_pulled_out():
    check(E.Add(E.Mul(a, b), E.Mul(a, i32(10))), "a * (b + 10)")
    check(E.Add(E.Mul(b, a), E.Mul(a, c)), "a * (b + c)")
    check(E.Add(E.Mul(a, b), E.Mul(c, a)), "a * (b + c)")
    check(E.Add(E.Mul(b, a), E.Mul(c, a)), "a * (b + c)")
    check(E.Sub(E.Mul(a, b), E.Mul(a, c)), "a * (b - c)")
    check(E.Sub(E.Mul(b, a), E.Mul(c, a)), "a * (b - c)")
    check(E.Add(E.Mul(a, i32(3)), E.Mul(b, i32(3))), "a * 3 + b * 3")  # a constant factor stays distributed
    check(E.Add(E.Mul(a, i32(3)), E.Mul(b, i32(3))), "a * 3 + b * 3", how="simplify")


def test_difference_times_a_negative_constant_is_flipped():
    check(E.Mul(E.Sub(a, b), i32(-2)), "(b - a) * 2")
    check(E.Mul(E.Sub(a, b), i32(-(2**31))), "(a - b) * -2147483648")  # 2**31 is not an int32


def test_difference_of_shifted_minmax():
    check(E.Sub(MN(E.Add(x, i32(10)), E.Add(z, i32(1))), MN(x, E.Sub(z, i32(9)))), "10")
    check(E.Sub(MX(E.Add(x, i32(2)), E.Add(z, i32(2))), MX(z, x)), "2")  # the pairs may be swapped
    check(E.Sub(MN(E.Add(x, i32(10)), E.Add(z, i32(1))), MN(E.Sub(z, i32(9)), x)), "10")
    # unbounded: a + 10 may wrap, so the shift is not exact
    check(E.Sub(MN(E.Add(a, i32(10)), E.Add(b, i32(1))), MN(a, E.Sub(b, i32(9)))),
          "min(a + 10, b + 1) - min(a, b - 9)")


def test_quotient_times_divisor_differences():
    check(E.Sub(E.Mul(TD(a, i32(3)), i32(3)), a), "0 - truncmod(a, 3)")
    check(E.Sub(E.Mul(FD(a, i32(3)), i32(3)), a), "0 - a % 3")
    check(E.Sub(a, E.Mul(FD(E.Sub(a, i32(6)), i32(5)), i32(5))), "(a - 6) % 5 + 6")
    check(E.Sub(E.Mul(TD(E.Sub(a, i32(6)), i32(5)), i32(5)), a), "-6 - truncmod(a - 6, 5)")
    check(E.Sub(a, E.Mul(TD(E.Add(a, b), i32(5)), i32(5))), "truncmod(a + b, 5) - b")
    check(E.Sub(E.Mul(FD(E.Add(a, b), i32(5)), i32(5)), a), "b - (a + b) % 5")
    check(E.Sub(a, E.Mul(FD(E.Sub(a, b), i32(5)), i32(5))), "(a - b) % 5 + b")
    check(E.Sub(E.Mul(FD(E.Sub(a, b), i32(5)), i32(5)), a), "0 - (a - b) % 5 - b")
    check(E.Sub(E.Mul(a, i32(3)), E.Mul(FD(a, i32(2)), i32(6))), "a % 2 * 3")
    check(E.Sub(E.Mul(TD(a, i32(3)), i32(6)), E.Mul(a, i32(2))), "truncmod(a, 3) * -2")
    check(E.Sub(E.Mul(a, i32(5)), E.Mul(FD(E.Add(a, b), i32(2)), i32(10))), "((a + b) % 2 - b) * 5")
    check(E.Sub(E.Mul(a, i32(5)), E.Mul(TD(E.Sub(a, b), i32(2)), i32(10))), "(truncmod(a - b, 2) + b) * 5")
    check(E.Sub(E.Mul(FD(E.Add(a, b), i32(3)), i32(6)), E.Mul(a, i32(2))), "(b - (a + b) % 3) * 2")
    check(E.Sub(E.Mul(TD(E.Sub(a, b), i32(3)), i32(6)), E.Mul(a, i32(2))), "(0 - truncmod(a - b, 3) - b) * 2")
    check(E.Sub(E.Mul(a, i32(3)), E.Mul(FD(a, i32(2)), i32(5))), "a * 3 - a // 2 * 5")  # 5 != 2 * 3


def test_floordiv_and_floormod_rules():
    check(FD(E.Add(E.Add(E.Mul(x, i32(6)), y), z), i32(2)), "x * 3 + (y + z) // 2")
    check(FD(E.Add(E.Add(y, E.Mul(x, i32(6))), z), i32(2)), "x * 3 + (y + z) // 2")
    check(FD(E.Sub(z, i32(10)), i32(2)), "z // 2 - 5")
    check(FD(E.Sub(E.FloorDiv(z, i32(4)), i32(1)), i32(2)), "(z - 4) // 8")
    check(FM(E.Sub(a, i32(10)), i32(2)), "a % 2")  # 2 divides 2**32: residues survive wrap-around
    check(FM(E.Sub(z, i32(9)), i32(3)), "z % 3")
    check(FM(E.Sub(a, i32(9)), i32(3)), "(a - 9) % 3")  # a - 9 may wrap, and 3 does not divide 2**32
    check(FD(E.Sub(a, i32(10)), i32(2)), "(a - 10) // 2")


def test_truncated_division_rules():
    check(TD(TD(a, i32(2)), i32(3)), "truncdiv(a, 6)")
    check(TD(E.Mul(z, i32(6)), i32(2)), "z * 3")
    check(TD(E.Mul(z, i32(2)), i32(6)), "truncdiv(z, 3)")
    check(TD(E.Mul(a, i32(2)), i32(6)), "truncdiv(a * 2, 6)")  # a * 2 may wrap
    check(TM(TM(a, i32(8)), i32(4)), "truncmod(a, 4)")
    check(TM(E.Mul(a, i32(-10)), i32(2)), "0")  # even also after wrapping, whatever its sign
    check(TM(E.Mul(a, i32(-10)), i32(-2)), "0")
    check(TM(E.Sub(E.Mul(z, i32(4)), i32(4)), i32(4)), "0")
    check(TM(E.Sub(E.Mul(y, i32(-4)), i32(1)), i32(4)), "-1")  # -4y - 1 <= -1 is 3 modulo 4
    check(TM(E.Add(E.Mul(z, i32(4)), i32(1)), i32(4)), "truncmod(z * 4 + 1, 4)")  # 1 or -3


def test_lt_and_le_of_the_same_operands():
    check(E.And(E.LT(a, b), E.LE(a, b)), "a < b")
    check(E.And(E.LE(a, b), E.LT(a, b)), "a < b")
    check(E.Or(E.LT(a, b), E.LE(a, b)), "a <= b")
    check(E.Or(E.LE(a, b), E.LT(a, b)), "a <= b")
    f, g = loom.var("f", "float32"), loom.var("g", "float32")
    check(E.And(E.LT(f, g), E.LE(f, g)), "f < g")  # NaN: both sides false


def test_canonical_nested_remainders():
    e = FM(E.Sub(FM(E.Sub(E.Add(E.Mul(a, i32(4)), b), i32(466036)), i32(24528)), i32(24512)), i32(16))
    check(e, "(a * 4 + b + 12) % 16", how="canonical_simplify")
    check(FM(E.Add(TM(a, i32(8)), i32(5)), i32(4)), "(a + 1) % 4", how="canonical_simplify")
    # 3 does not divide 2**32: only a sum that cannot wrap loses its inner remainder
    check(FM(E.Add(FM(a, i32(9)), b), i32(3)), "(b + a % 9) % 3", how="canonical_simplify")
    check(FM(E.Add(FM(x, i32(9)), z), i32(3)), "(x + z) % 3", how="canonical_simplify")


def test_canonical_merges_nested_quotients():
    floor = E.Add(E.Add(E.Mul(FD(a, i32(6)), i32(6)), E.Mul(FM(FD(a, i32(3)), i32(2)), i32(3))), FM(a, i32(3)))
    trunc = E.Add(E.Add(E.Mul(TD(a, i32(6)), i32(6)), E.Mul(TM(TD(a, i32(3)), i32(2)), i32(3))), TM(a, i32(3)))
    check(floor, "a", how="canonical_simplify")
    check(trunc, "a", how="canonical_simplify")
    check(FD(E.Mul(FD(FM(a, i32(16)), i32(2)), i32(2)), i32(4)), "a % 16 // 4", how="canonical_simplify")
    check(TD(E.Mul(TD(TM(a, i32(16)), i32(2)), i32(2)), i32(6)), "truncdiv(truncmod(a, 16), 6)",
          how="canonical_simplify")


def test_canonical_truncated_division_of_signed_sums():
    check(TD(E.Add(i32(16), E.Mul(i32(48), z)), i32(16)), "z * 3 + 1", how="canonical_simplify")
    check(TM(E.Add(E.Mul(a, i32(2)), E.Mul(b, i32(4))), i32(2)), "0", how="canonical_simplify")
    check(TM(E.Add(E.Mul(a, i32(3)), E.Mul(b, i32(6))), i32(3)), "truncmod(b * 6 + a * 3, 3)",
          how="canonical_simplify")  # may wrap, and 3 does not divide 2**32
    check(TD(TM(a, i32(2)), i32(8)), "0", how="canonical_simplify")
    check(TD(E.Add(z, i32(3)), i32(100)), "0", how="canonical_simplify")
    check(TM(TM(a, i32(2)), i32(7)), "truncmod(a, 2)", how="canonical_simplify")
    check(TD(E.Add(i32(17), E.Mul(i32(48), z)), i32(16)), "truncdiv(z * 48 + 17, 16)", how="canonical_simplify")


def test_canonical_select_branches_know_their_condition():
    e = E.Select(E.GE(z, i32(-1)), TM(E.Add(z, i32(100)), i32(3)), TM(E.Add(z, i32(100)), i32(3)))
    check(e, "(z + 1) % 3", how="canonical_simplify")
    e = E.Select(E.GE(a, i32(10)), loom.if_then_else(E.GT(TD(a, i32(3)), i32(2)), a, i32(0)), i32(0))
    check(e, "select(10 <= a, a, 0)", how="canonical_simplify")
    # a divisor is simplified without the branch's condition: 1 // a stays defined where it was
    check(E.Select(E.EQ(a, i32(0)), FD(i32(1), a), a), "select(a == 0, 1 // a, a)", how="canonical_simplify")
    check(E.Select(E.EQ(a, i32(0)), FD(i32(1), a), a), "select(a == 0, 1 // a, a)", how="simplify")


def test_let_of_a_constant_or_variable_is_substituted():
    check(E.Add(E.Let(c, i32(1), E.Add(c, i32(1))), E.Let(c, i32(1), E.Add(c, i32(1)))), "4")
    check(E.Let(c, a, E.Mul(c, b)), "a * b")
    check(E.Let(c, a, E.Mul(c, b)), "a * b", how="canonical_simplify")
    check(E.Let(c, E.Add(a, b), E.Mul(c, c)), "let c = a + b in c * c")


def test_vector_rules():
    r = E.Ramp(E.Add(E.Mul(x, i32(8)), i32(1)), i32(1), 4)
    check(FD(r, E.Broadcast(i32(8), 4)), "broadcast(x, 4)")
    check(FM(r, E.Broadcast(i32(8), 4)), "ramp(1, 1, 4)")
    check(FM(E.Ramp(E.Add(E.Mul(x, i32(8)), i32(1)), i32(15), 4), E.Broadcast(i32(8), 4)),
          "ramp(1, 15, 4) % broadcast(8, 4)")
    check(FD(E.Ramp(x, i32(4), 4), E.Broadcast(i32(2), 4)), "ramp(x // 2, 2, 4)")
    check(FM(E.Ramp(a, i32(4), 4), E.Broadcast(i32(2), 4)), "broadcast(a % 2, 4)")  # residues survive wrapping
    check(FD(E.Ramp(a, i32(4), 4), E.Broadcast(i32(2), 4)), "ramp(a, 4, 4) // broadcast(2, 4)")  # a lane may wrap
    check(FD(E.Ramp(E.Add(E.Mul(x, i32(8)), i32(15)), i32(1), 4), E.Broadcast(i32(8), 4)),
          "ramp(x * 8 + 15, 1, 4) // broadcast(8, 4)")  # the lanes straddle a multiple of 8
    vx = loom.var("vx", "int32x2")
    check(MN(MN(vx, E.Broadcast(a, 2)), E.Broadcast(b, 2)), "min(vx, broadcast(min(a, b), 2))")
    check(MX(MX(vx, E.Broadcast(a, 2)), E.Broadcast(b, 2)), "max(vx, broadcast(max(a, b), 2))")
    check(E.EQ(E.Broadcast(a, 2), E.Broadcast(b, 2)), "broadcast(a == b, 2)")
    check(E.GT(E.Broadcast(a, 2), E.Broadcast(b, 2)), "broadcast(b < a, 2)")
    vc = loom.var("vc", "bool")
    check(E.And(E.LE(E.Broadcast(a, 2), E.Broadcast(b, 2)), E.Broadcast(vc, 2)), "broadcast(a <= b and vc, 2)")


def test_stmt_simplify_substitutes_constant_lets():
    A = loom.decl_buffer((64,), "int32", name="A")
    i, n, m = loom.var("i"), loom.var("n"), loom.var("m")
    loop = lambda ext, v: For(i, 0, ext, "serial", BufferStore(A, i + v, [i]))  # noqa: E731
    assert str(simplify(LetStmt(n, loom.const(10), loop(n, n)))) == "for i in range(10):\n    A[i] = i + 10"
    assert str(simplify(LetStmt(m, n, loop(m, m)))) == "for i in range(n):\n    A[i] = i + n"
    kept = str(simplify(LetStmt(m, n * 2, loop(m, m))))
    assert kept.startswith("m: int32 = n * 2"), kept
    # a buffer's shape names the variable: the buffer keeps its identity, so the let stays
    B = loom.decl_buffer((n,), "int32", name="B")
    s = simplify(LetStmt(n, loom.const(10), For(i, 0, n, "serial", BufferStore(B, i, [i]))))
    assert isinstance(s, LetStmt) and s.body.body.buffer is B
    tx = loom.var("tx")
    iv = IterVar(Range.from_min_extent(0, n), tx, "thread_index", "threadIdx.x")
    s = simplify(LetStmt(n, loom.const(4), loom.ir.AttrStmt(iv, "thread_extent", n, BufferStore(A, tx, [tx]))))
    assert isinstance(s, LetStmt)


# ---------------------------------------------------------------------------
# Properties: random operands, constants and ranges; int8 and int32.


class Undefined(Exception):
    """The expression divides by zero."""


def wrap(v, t):
    if t.is_bool:
        return int(bool(v))
    v &= (1 << t.bits) - 1
    return v - (1 << t.bits) if v >= 1 << (t.bits - 1) else v


def _tdiv(p, q):
    r = abs(p) // abs(q)
    return r if (p >= 0) == (q >= 0) else -r


def _div(fn):
    def run(p, q):
        if q == 0:
            raise Undefined
        return fn(p, q)
    return run


OPS = {
    E.Add: lambda p, q: p + q, E.Sub: lambda p, q: p - q, E.Mul: lambda p, q: p * q,
    FD: _div(lambda p, q: p // q), FM: _div(lambda p, q: p % q), TD: _div(_tdiv),
    TM: _div(lambda p, q: p - _tdiv(p, q) * q), MN: min, MX: max,
    E.EQ: lambda p, q: p == q, E.NE: lambda p, q: p != q, E.LT: lambda p, q: p < q,
    E.LE: lambda p, q: p <= q, E.GT: lambda p, q: p > q, E.GE: lambda p, q: p >= q,
    E.And: lambda p, q: p and q, E.Or: lambda p, q: p or q,
}


def lanes(e, env):
    """The lanes of ``e`` (a list) under ``env``; raises Undefined on a division by zero."""
    n = e.dtype.lanes
    if isinstance(e, E.IntImm):
        return [e.value] * n
    if isinstance(e, E.Var):
        return [env[e]] * n
    if isinstance(e, E.Broadcast):
        return lanes(e.value, env) * e.lanes
    if isinstance(e, E.Ramp):
        base, stride = lanes(e.base, env)[0], lanes(e.stride, env)[0]
        return [wrap(base + k * stride, e.dtype) for k in range(e.lanes)]
    if type(e) in OPS:
        return [wrap(OPS[type(e)](p, q), e.dtype) for p, q in zip(lanes(e.a, env), lanes(e.b, env))]
    if isinstance(e, E.Not):
        return [1 - v for v in lanes(e.a, env)]
    if isinstance(e, E.Select):
        cs, ts, fs = (lanes(v, env) for v in (e.condition, e.true_value, e.false_value))
        return [t if k else f for k, t, f in zip(cs, ts, fs)]
    if isinstance(e, E.Let):
        return lanes(e.body, {**env, e.var: lanes(e.value, env)[0]})
    if isinstance(e, E.Call) and e.op.name == "tir.if_then_else":  # only the taken side runs
        return lanes(e.args[1] if lanes(e.args[0], env)[0] else e.args[2], env)
    raise AssertionError(f"no rule for {type(e).__name__}")


def defined(e, env):
    try:
        return lanes(e, env)
    except Undefined:
        return None


def dtype_range(t):
    return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1


@st.composite
def ranges(draw, t):
    lo, hi = dtype_range(t)
    kind = draw(st.sampled_from(["small", "nonneg", "nonpos", "full", "edge", "big"]))
    if kind == "small":
        p = draw(st.integers(-20, 20))
        return p, p + draw(st.integers(0, 20))
    if kind == "nonneg":
        return 0, draw(st.sampled_from([1, 7, 15, 100]))
    if kind == "nonpos":
        return -draw(st.sampled_from([1, 7, 15, 100])), 0
    if kind == "edge":
        return draw(st.sampled_from([(hi - 10, hi), (lo, lo + 10), (lo, 0), (0, hi)]))
    if kind == "big":
        p, q = sorted((draw(st.integers(lo, hi)), draw(st.integers(lo, hi))))
        return p, q
    return lo, hi


def consts(t):
    lo, hi = dtype_range(t)
    special = [0, 1, -1, 2, 3, 4, 6, 8, 16, -2, -3, -4, -8, lo, hi, lo + 1, hi - 1]
    return st.one_of(st.sampled_from(special), st.integers(-20, 20), st.integers(lo, hi))


def analyzer_for(bounds):
    an = Analyzer()
    for v, (lo, hi) in bounds.items():
        an.update(v, ConstIntBound(lo, hi))
    return an


class Draw:
    """The operands of one example: variables ``u v w``, constants ``c1 c2 c3`` (ints),
    a small multiplier ``k`` and a small positive divisor ``d``; ``C(v)`` is a constant."""

    def __init__(self, t, u, v, w, c1, c2, c3, k, d):
        self.t, self.u, self.v, self.w = t, u, v, w
        self.c1, self.c2, self.c3, self.k, self.d = c1, c2, c3, k, d

    def C(self, value):
        return E.IntImm(self.t, wrap(value, self.t))


def _divmod_sub_shapes(div, mod, tag):
    """The left-hand sides of the quotient-times-divisor differences (rules_divmod.DIVMOD_SUB)."""
    def q(s, e, scale=1):
        return E.Mul(div(e, s.C(s.d)), s.C(s.d * scale))
    return {
        f"{tag}_q*c-u": lambda s: E.Sub(q(s, s.u), s.u),
        f"{tag}_u-q(u+v)*c": lambda s: E.Sub(s.u, q(s, E.Add(s.u, s.v))),
        f"{tag}_q(u+v)*c-u": lambda s: E.Sub(q(s, E.Add(s.u, s.v)), s.u),
        f"{tag}_u-q(u-v)*c": lambda s: E.Sub(s.u, q(s, E.Sub(s.u, s.v))),
        f"{tag}_q(u-v)*c-u": lambda s: E.Sub(q(s, E.Sub(s.u, s.v)), s.u),
        f"{tag}_u*k-q*c": lambda s: E.Sub(E.Mul(s.u, s.C(s.k)), q(s, s.u, s.k)),
        f"{tag}_q*c-u*k": lambda s: E.Sub(q(s, s.u, s.k), E.Mul(s.u, s.C(s.k))),
        f"{tag}_u*k-q(u+v)*c": lambda s: E.Sub(E.Mul(s.u, s.C(s.k)), q(s, E.Add(s.u, s.v), s.k)),
        f"{tag}_u*k-q(u-v)*c": lambda s: E.Sub(E.Mul(s.u, s.C(s.k)), q(s, E.Sub(s.u, s.v), s.k)),
        f"{tag}_q(u+v)*c-u*k": lambda s: E.Sub(q(s, E.Add(s.u, s.v), s.k), E.Mul(s.u, s.C(s.k))),
        f"{tag}_q(u-v)*c-u*k": lambda s: E.Sub(q(s, E.Sub(s.u, s.v), s.k), E.Mul(s.u, s.C(s.k))),
        # a random divisor (its sign matters), and a random scale (mostly not d * k)
        f"{tag}_u-q*c1": lambda s: E.Sub(s.u, E.Mul(div(s.u, s.C(s.c1)), s.C(s.c1))),
        f"{tag}_u*k-q*c1": lambda s: E.Sub(E.Mul(s.u, s.C(s.k)), E.Mul(div(s.u, s.C(s.d)), s.C(s.c1))),
    }


def _shift(s):
    """``min/max(u + c1, v + c2) - min/max(u, v + c2 - c1)`` (the last operand pair maybe swapped)."""
    return E.Add(s.v, s.C(s.c2 - s.c1))


SHAPES = {
    "(u-v)+(v-w)": lambda s: E.Add(E.Sub(s.u, s.v), E.Sub(s.v, s.w)),
    "(u-v)+(w-u)": lambda s: E.Add(E.Sub(s.u, s.v), E.Sub(s.w, s.u)),
    "(u+v)-(u+w)": lambda s: E.Sub(E.Add(s.u, s.v), E.Add(s.u, s.w)),
    "(u+v)-(w+u)": lambda s: E.Sub(E.Add(s.u, s.v), E.Add(s.w, s.u)),
    "(v+u)-(u+w)": lambda s: E.Sub(E.Add(s.v, s.u), E.Add(s.u, s.w)),
    "(v+u)-(w+u)": lambda s: E.Sub(E.Add(s.v, s.u), E.Add(s.w, s.u)),
    "u*v+u*w": lambda s: E.Add(E.Mul(s.u, s.v), E.Mul(s.u, s.w)),
    "v*u+u*c": lambda s: E.Add(E.Mul(s.v, s.u), E.Mul(s.u, s.C(s.c1))),
    "u*v+w*u": lambda s: E.Add(E.Mul(s.u, s.v), E.Mul(s.w, s.u)),
    "v*(u+c)+w*(u+c)": lambda s: E.Add(E.Mul(s.v, E.Add(s.u, s.C(s.c1))), E.Mul(s.w, E.Add(s.u, s.C(s.c1)))),
    "u*v-u*w": lambda s: E.Sub(E.Mul(s.u, s.v), E.Mul(s.u, s.w)),
    "v*u-u*c": lambda s: E.Sub(E.Mul(s.v, s.u), E.Mul(s.u, s.C(s.c1))),
    "u*v-w*u": lambda s: E.Sub(E.Mul(s.u, s.v), E.Mul(s.w, s.u)),
    "v*u-w*u": lambda s: E.Sub(E.Mul(s.v, s.u), E.Mul(s.w, s.u)),
    "(u-v)*c": lambda s: E.Mul(E.Sub(s.u, s.v), s.C(s.c1)),
    "(v+u*w)//w": lambda s: FD(E.Add(s.v, E.Mul(s.u, s.w)), s.w),
    "min-shift": lambda s: E.Sub(MN(E.Add(s.u, s.C(s.c1)), E.Add(s.v, s.C(s.c2))), MN(s.u, _shift(s))),
    "max-shift-swapped": lambda s: E.Sub(MX(E.Add(s.u, s.C(s.c1)), E.Add(s.v, s.C(s.c2))), MX(_shift(s), s.u)),
    "min-shift-by-w": lambda s: E.Sub(MN(E.Add(s.u, s.w), E.Add(s.w, s.v)), MN(s.u, s.v)),
    **_divmod_sub_shapes(FD, FM, "floor"),
    **_divmod_sub_shapes(TD, TM, "trunc"),
    "(u*c+v+w)//d": lambda s: FD(E.Add(E.Add(E.Mul(s.u, s.C(s.d * s.k)), s.v), s.w), s.C(s.d)),
    "(v+u*c+w)//d": lambda s: FD(E.Add(E.Add(s.v, E.Mul(s.u, s.C(s.d * s.k))), s.w), s.C(s.d)),
    "(u-c)//d": lambda s: FD(E.Sub(s.u, s.C(s.d * s.k)), s.C(s.d)),
    "(u-c1)//c2": lambda s: FD(E.Sub(s.u, s.C(s.c1)), s.C(s.c2)),
    "(u//d-c)//c": lambda s: FD(E.Sub(FD(s.u, s.C(s.d)), s.C(s.c1)), s.C(s.c2)),
    "(u-c)%d": lambda s: FM(E.Sub(s.u, s.C(s.d * s.k)), s.C(s.d)),
    "(u-c1)%c2": lambda s: FM(E.Sub(s.u, s.C(s.c1)), s.C(s.c2)),
    "tdiv(tdiv(u,c1),c2)": lambda s: TD(TD(s.u, s.C(s.c1)), s.C(s.c2)),
    "tdiv(u*c,d)": lambda s: TD(E.Mul(s.u, s.C(s.d * s.k)), s.C(s.d)),
    "tdiv(u*d,c)": lambda s: TD(E.Mul(s.u, s.C(s.d)), s.C(s.d * s.k)),
    "tdiv(u*c1,c2)": lambda s: TD(E.Mul(s.u, s.C(s.c1)), s.C(s.c2)),
    "tmod(tmod(u,c),d)": lambda s: TM(TM(s.u, s.C(s.d * s.k)), s.C(s.d)),
    "tmod(tmod(u,c1),c2)": lambda s: TM(TM(s.u, s.C(s.c1)), s.C(s.c2)),
    "tmod(u*c+r,d)": lambda s: TM(E.Add(E.Mul(s.u, s.C(s.d * s.k)), s.C(s.c1)), s.C(s.d)),
    "lt&le": lambda s: E.And(E.LT(s.u, s.v), E.LE(s.u, s.v)),
    "le&lt": lambda s: E.And(E.LE(s.u, s.v), E.LT(s.u, s.v)),
    "lt|le": lambda s: E.Or(E.LT(s.u, s.v), E.LE(s.u, s.v)),
    "le|lt": lambda s: E.Or(E.LE(s.u, s.v), E.LT(s.u, s.v)),
    "(u%c-c1)%d": lambda s: FM(E.Sub(FM(E.Add(s.u, s.v), s.C(s.d * s.k)), s.C(s.c1)), s.C(s.d)),
    "(tmod(u,c)+v)%d": lambda s: FM(E.Add(TM(s.u, s.C(s.d * s.k)), s.v), s.C(s.d)),
    "(u%c1+v)%c2": lambda s: FM(E.Add(FM(s.u, s.C(s.c1)), s.v), s.C(s.c2)),
    "floor-digits": lambda s: E.Add(E.Add(E.Mul(FD(s.u, s.C(s.d * s.k)), s.C(s.d * s.k)),
                                          E.Mul(FM(FD(s.u, s.C(s.d)), s.C(s.k)), s.C(s.d))), FM(s.u, s.C(s.d))),
    "trunc-digits": lambda s: E.Add(E.Add(E.Mul(TD(s.u, s.C(s.d * s.k)), s.C(s.d * s.k)),
                                          E.Mul(TM(TD(s.u, s.C(s.d)), s.C(s.k)), s.C(s.d))), TM(s.u, s.C(s.d))),
    "(u//d*d)//c": lambda s: FD(E.Mul(FD(s.u, s.C(s.d)), s.C(s.d)), s.C(s.d * s.k)),
    "(u//d*d)//c1": lambda s: FD(E.Mul(FD(s.u, s.C(s.d)), s.C(s.d)), s.C(s.c1)),
    "tdiv(tdiv(u,d)*d,c1)": lambda s: TD(E.Mul(TD(s.u, s.C(s.d)), s.C(s.d)), s.C(s.c1)),
    "tdiv(tdiv(u,d)*d,c)": lambda s: TD(E.Mul(TD(s.u, s.C(s.d)), s.C(s.d)), s.C(s.d * s.k)),
    "tdiv(u*c+v*c+c,d)": lambda s: TD(E.Add(E.Add(E.Mul(s.u, s.C(s.d * s.k)), E.Mul(s.v, s.C(s.d))),
                                            s.C(s.d * s.c1)), s.C(s.d)),
    "tmod(u*c+v*c,d)": lambda s: TM(E.Add(E.Mul(s.u, s.C(s.d * s.k)), E.Mul(s.v, s.C(s.d))), s.C(s.d)),
    "tdiv(tmod(u,c1)+c2,c3)": lambda s: TD(E.Add(TM(s.u, s.C(s.c1)), s.C(s.c2)), s.C(s.c3)),
    "tmod(u+c1,c2)": lambda s: TM(E.Add(s.u, s.C(s.c1)), s.C(s.c2)),
    "select-scoped": lambda s: E.Select(E.GE(s.u, s.C(s.c1)), TM(E.Add(s.u, s.C(s.c2)), s.C(s.d)),
                                        TD(s.v, s.u)),
    "select-divisor": lambda s: E.Select(E.EQ(s.u, s.C(s.c1)), FD(s.v, E.Sub(s.u, s.C(s.c1))), s.w),
    "if_then_else": lambda s: loom.if_then_else(E.LT(s.u, s.C(s.c1)), FD(s.v, s.u), s.w),
    "let-const": lambda s: E.Let(LET_VAR[s.t.bits], s.C(s.c1), E.Mul(E.Add(LET_VAR[s.t.bits], s.u), s.v)),
    "let-var": lambda s: E.Let(LET_VAR[s.t.bits], s.w, E.Sub(E.Add(LET_VAR[s.t.bits], s.u), s.v)),
    "ramp//d": lambda s: FD(E.Ramp(E.Add(E.Mul(s.u, s.C(s.d)), s.C(s.c1)), s.C(s.k), 4), E.Broadcast(s.C(s.d), 4)),
    "ramp%d": lambda s: FM(E.Ramp(E.Add(E.Mul(s.u, s.C(s.d)), s.C(s.c1)), s.C(s.k), 4), E.Broadcast(s.C(s.d), 4)),
    "ramp(u,d*k)//d": lambda s: FD(E.Ramp(s.u, s.C(s.d * s.k), 4), E.Broadcast(s.C(s.d), 4)),
    "ramp(u,d*k)%d": lambda s: FM(E.Ramp(s.u, s.C(s.d * s.k), 4), E.Broadcast(s.C(s.d), 4)),
    "ramp(u,c1)%c2": lambda s: FM(E.Ramp(s.u, s.C(s.c1), 4), E.Broadcast(s.C(s.c2), 4)),
    "min-chain": lambda s: MN(MN(E.Ramp(s.u, s.C(s.k), 4), E.Broadcast(s.v, 4)), E.Broadcast(s.w, 4)),
    "max-chain": lambda s: MX(MX(E.Ramp(s.u, s.C(s.k), 4), E.Broadcast(s.v, 4)), E.Broadcast(s.w, 4)),
    "bcast<": lambda s: E.LT(E.Broadcast(s.u, 4), E.Broadcast(s.v, 4)),
    "bcast>=&": lambda s: E.And(E.GE(E.Broadcast(s.u, 4), E.Broadcast(s.v, 4)),
                                E.Broadcast(E.NE(s.w, s.C(s.c1)), 4)),
}
LET_VAR = {8: loom.var("t8", "int8"), 32: loom.var("t32", "int32")}


def _envs(bounds, rng, count=14):
    corners = [{var: r[i] for var, r in bounds.items()} for i in (0, 1)]
    return corners + [{var: rng.randint(*r) for var, r in bounds.items()} for _ in range(count)]


@st.composite
def draws(draw):
    t = DataType.of(draw(st.sampled_from(["int8", "int32"])))
    u, v, w = (loom.var(name, t) for name in "uvw")
    bounds = {var: draw(ranges(t)) for var in (u, v, w)}
    c1, c2, c3 = (draw(consts(t)) for _ in range(3))
    k = draw(st.sampled_from([-3, -2, -1, 1, 2, 3, 5]))
    d = draw(st.sampled_from([1, 2, 3, 4, 5, 8, 16]))
    rng = draw(st.randoms(use_true_random=False))
    return Draw(t, u, v, w, c1, c2, c3, k, d), bounds, _envs(bounds, rng)


def assert_keeps_value(shape, s, bounds, envs):
    e = SHAPES[shape](s)
    for how in ("rewrite_simplify", "canonical_simplify", "simplify"):
        out = getattr(analyzer_for(bounds), how)(e)
        assert out.dtype == e.dtype, f"{how} changed the dtype: {e} -> {out}"
        for env in envs:
            want = defined(e, env)
            if want is not None:
                got = lanes(out, env)
                assert got == want, (f"{how} changed the value of {e} ({s.t})\n  -> {out}\n"
                                     f"  at {dict((v.name, x) for v, x in env.items())}: {want} != {got}")


@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=max(150, settings.default.max_examples // 2), deadline=None)
@given(case=draws())
def test_rule_keeps_value_with_wraparound(shape, case):
    assert_keeps_value(shape, *case)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_rule_keeps_value_at_the_int8_extremes(shape):
    """Deterministic corners that random draws rarely combine: int8 ranges that end at the
    dtype's limits, divisors that do not divide 2**8, constants at the limits."""
    t = DataType.of("int8")
    u, v, w = (loom.var(name, t) for name in "uvw")
    rng = random.Random(shape)
    small, low, high, full = (-3, 5), (-128, -118), (117, 127), (-128, 127)
    for urange, vrange, wrange in ((low, small, full), (high, small, full), (full, small, full),
                                   ((-20, -17), high, high), (small, low, low)):
        bounds = {u: urange, v: vrange, w: wrange}
        envs = _envs(bounds, rng, 6) + [{u: p, v: vrange[1], w: wrange[0]} for p in range(*urange)]
        for d, k, (c1, c2, c3) in itertools.product((3, 8), (-1, 2), ((-128, 3, -1), (127, -4, 7))):
            assert_keeps_value(shape, Draw(t, u, v, w, c1, c2, c3, k, d), bounds, envs)
