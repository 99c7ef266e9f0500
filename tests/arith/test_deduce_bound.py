"""loom.arith.deduce_bound (classic TVM's arith.DeduceBound), checked by brute force.

For concrete values of the hinted variables, every value of the target inside
the deduced interval must satisfy the condition for every value of the relaxed
variables (soundness), and the deduced end must be the true one, or one beyond it where a ``>=`` bound
divides and cannot show the division exact (tightness).  The brute force reads expressions as mathematical
integers, as the deduction does.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

import loom
from loom.arith import IntervalSet, deduce_bound
from loom.errors import LoomTypeError
from loom.ir import BufferLoad, BufferStore, For, IfThenElse, PrimFunc, Range, seq
from loom.ir import expr as E

a, b, c, d, n = (loom.var(x) for x in "abcdn")
r, s = loom.var("r"), loom.var("s")
tdiv = loom.truncdiv
WINDOW = range(-60, 61)


def _tdiv(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


_OPS = {E.Add: "({} + {})", E.Sub: "({} - {})", E.Mul: "({} * {})", E.Div: "_tdiv({}, {})",
        E.FloorDiv: "({} // {})", E.Min: "min({}, {})", E.Max: "max({}, {})", E.LT: "({} < {})",
        E.LE: "({} <= {})", E.GT: "({} > {})", E.GE: "({} >= {})", E.EQ: "({} == {})", E.NE: "({} != {})"}


def _source(e) -> str:
    if isinstance(e, E.Var):
        return f"env[{e.name!r}]"
    if isinstance(e, E.IntImm):
        return str(e.value)
    return _OPS[type(e)].format(_source(e.a), _source(e.b))


def compile_int(e):
    """``e`` as a Python function of ``{name: int}`` (mathematical integers)."""
    return eval(f"lambda env: {_source(e)}", {"_tdiv": _tdiv, "min": min, "max": max})


def brute_force(var, cond, found, fixed, relaxed, muls=0):
    """Check ``found`` for ``cond`` at every point of ``fixed`` (name -> values) against the true interval.

    ``muls``: how many multiplications wrap the target (each may cost TVM's rounding one unit).
    """
    holds, names = compile_int(cond), list(relaxed)
    lo_f = None if found.min is None else compile_int(found.min)
    hi_f = None if found.max is None else compile_int(found.max)
    for point in itertools.product(*fixed.values()):
        env = dict(zip(fixed, point))

        def always(x: int) -> bool:
            return all(holds({**env, var.name: x, **dict(zip(names, rv))})
                       for rv in itertools.product(*relaxed.values()))

        good = [x for x in WINDOW if always(x)]
        lo = None if lo_f is None else lo_f(env)
        hi = None if hi_f is None else hi_f(env)
        inside = [x for x in WINDOW if (lo is None or x >= lo) and (hi is None or x <= hi)]
        assert set(inside) <= set(good), (env, lo, hi)  # sound
        if not good:
            continue
        assert inside, (env, lo, hi, good)  # an equality or a half-line, never nothing at all
        if lo is not None and good[0] > WINDOW[0]:
            assert lo - good[0] <= muls, (env, lo, good[0])  # tight up to rounding
        if hi is not None and good[-1] < WINDOW[-1]:
            assert good[-1] - hi <= muls, (env, hi, good[-1])


HINTS = {b: IntervalSet(2, 3), c: IntervalSet(10, 15), d: IntervalSet(-3, -1)}
FIXED = {"b": [2, 3], "c": [10, 12, 15], "d": [-3, -2, -1]}


@pytest.mark.parametrize("make, end, want", [
    (lambda: (-b) * a + c - d >= 0, "max", "(d - c) // (b * -1)"),
    (lambda: 0 <= (-b) * a + c - d, "max", "(d - c) // (b * -1)"),
    (lambda: d * a + c - d >= 0, "max", "(d - c) // d"),
    (lambda: a * 4 + b < c, "max", "(c - b - 1) // 4"),
    (lambda: c > a * 4 + b, "max", "(c - b - 1) // 4"),
    (lambda: (a - c) == (b + d), "point", "b + c + d"),
    (lambda: 10 == a, "point", "10"),
    (lambda: 5 * a == -10, "point", "-2"),
    (lambda: 3 * a - 1 == n * 3 + 2, "point", "n + 1"),     # an exact quotient of a symbolic multiple
])
def test_classic_cases(make, end, want):
    cond = make()
    found = deduce_bound(a, cond, HINTS, {})
    got = found.min if end != "max" else found.max
    assert str(got) == want
    if end == "point":
        assert found.is_point or str(found.min) == str(found.max)
    else:
        assert found.min is None and str(found.min_value) == "neg_inf"
    brute_force(a, cond, found, {**FIXED, "n": [-4, 0, 7]}, {}, muls=0)  # floor division: exact


def test_relaxed_variables():
    """``-b + a*c - d >= 0`` for every b and d of their intervals: a >= ceil((3 - 1) / c)."""
    cond = (-b) + a * c - d >= 0
    for lhs_first in (True, False):
        found = deduce_bound(a, cond if lhs_first else 0 <= (-b) + a * c - d, HINTS, {b: HINTS[b], d: HINTS[d]})
        assert str(found.min) == "2 // c + 1" and found.max is None
        brute_force(a, cond, found, {"c": [10, 13, 15]}, {"b": [2, 3], "d": [-3, -2, -1]}, muls=1)
    # The relax map also takes Ranges.
    found = deduce_bound(a, a * 4 + r < n, {}, {r: Range.from_min_extent(0, 4)})
    assert str(found.max) == "(n - 4) // 4"
    brute_force(a, a * 4 + r < n, found, {"n": range(-9, 30)}, {"r": range(4)}, muls=1)


@pytest.mark.parametrize("coef", [4, -4])
@pytest.mark.parametrize("lo, hi", [(0, 4), (1, 5), (2, 6)])
def test_each_comparison_both_ways(coef, lo, hi):
    """TVM's test_deduce_basic / _complex: ``<, <=, >, >=`` with the target on either side, exact by brute force."""
    for side in (b + a * coef + 3, (b * 3 + a * coef) * 4):
        for cond in (side < 17, side > 17, side <= 17, side >= 17, 17 > side, 17 < side, 17 >= side, 17 <= side):
            found = deduce_bound(a, cond, {b: IntervalSet(lo, hi)}, {b: IntervalSet(lo, hi)})
            assert not found.is_nothing() and (found.min is None) != (found.max is None), cond
            brute_force(a, cond, found, {}, {"b": range(lo, hi + 1)}, muls=1)


def _uses(e, names) -> bool:
    return bool(loom.ir.collect(e, lambda x: isinstance(x, E.Var) and x.name in names))


def _random_case(seed: int):
    """A comparison with ``a`` once under + - * (factors of known sign), relaxed r, s and hinted b, d.

    Each relaxed variable occurs at most once, and is never multiplied by a symbolic factor:
    interval arithmetic is then exact, and the bound can be checked for tightness.
    """
    rng = random.Random(seed)
    terms = [loom.const(rng.randint(-9, 9)), n, n * 2 - 1, b, d * 3]
    relaxed_terms = [r, r * -2, s * 3, s]
    consts = [loom.const(k) for k in (-3, -2, 2, 3, 5)]
    side, muls, used = a, 0, set()

    def pick():
        t = rng.choice(terms + [t for t in relaxed_terms if not _uses(t, used)])
        used.update(x for x in ("r", "s") if _uses(t, {x}))
        return t

    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["+", "-l", "-r", "*", "*"] if muls < 2 else ["+", "-l", "-r"])
        if kind == "*":
            f = rng.choice(consts + ([] if used else [b, d, b + 1, 0 - d]))
            side, muls = (side * f if rng.random() < 0.5 else f * side), muls + 1
        else:
            t = pick()
            side = side + t if kind == "+" else side - t if kind == "-l" else t - side
    other = pick()
    op = rng.choice(["<", "<=", ">", ">=", "=="])
    lhs, rhs = (side, other) if rng.random() < 0.5 else (other, side)
    cond = {"<": lhs < rhs, "<=": lhs <= rhs, ">": lhs > rhs, ">=": lhs >= rhs, "==": lhs == rhs}[op]
    return cond, muls


@pytest.mark.parametrize("seed", range(60))
def test_random_conditions(seed):
    cond, muls = _random_case(seed)
    relax = {r: IntervalSet(0, 3), s: IntervalSet(-1, 1)}
    found = deduce_bound(a, cond, {b: HINTS[b], d: HINTS[d]}, relax)
    equality = isinstance(cond, E.EQ)
    uses_relaxed = _uses(cond, {"r", "s"})
    if found.is_nothing():  # only an equality may fail here: over relaxed values, or with no exact quotient
        assert equality, cond
        return
    assert not (equality and uses_relaxed)
    brute_force(a, cond, found, {"b": [2, 3], "d": [-3, -1], "n": [-5, 0, 6]}, {"r": range(4), "s": range(-1, 2)}, muls)


@pytest.mark.parametrize("make, hints, relax", [
    (lambda: a + b, {b: HINTS[b]}, {}),                                     # not a comparison
    (lambda: (a + b > 3).astype("int32") > c, {b: HINTS[b], c: HINTS[c]}, {}),
    (lambda: a * 2 - a > b, {b: HINTS[b]}, {}),                             # the target twice
    (lambda: b + 1 > c, {}, {}),                                            # the target absent
    (lambda: loom.max(5, a * 4) < 0, HINTS, {}),                            # under a max
    (lambda: 0 < loom.max(5, a * 4), HINTS, {}),
    (lambda: a * n < 7, {}, {}),                                            # a factor of unknown sign
    (lambda: a * (b - 2) < 7, {b: HINTS[b]}, {}),                           # a factor that may be 0
    (lambda: a != 3, {}, {}),
    (lambda: a == b, {b: HINTS[b]}, {b: HINTS[b]}),                         # == over a relaxed variable
    (lambda: 4 * a == b, {b: HINTS[b]}, {}),                                # no provably exact quotient
    (lambda: b * a == b, {b: HINTS[b]}, {}),                                # nor with a symbolic factor (as TVM)
    (lambda: 2 * a == 7, {}, {}),
    (lambda: a + r < 5, {}, {r: IntervalSet(0, None)}),                     # relaxed, unbounded above
    (lambda: loom.cast(a, "float32") < 2.5, {}, {}),
])
def test_nothing_deduced(make, hints, relax):
    found = deduce_bound(a, make(), hints, relax)
    assert found.is_nothing()
    assert str(found.min_value) == "pos_inf" and str(found.max_value) == "neg_inf"


def test_unbounded_below_relaxed_still_bounds_above():
    """``a + r < 5`` over r in [0, inf) has no bound, but over r in (-inf, 0] it does: only the needed end matters."""
    found = deduce_bound(a, a + r < 5, {}, {r: IntervalSet(None, 0)})
    assert found.max.value == 4 and found.min is None


def test_equality_with_a_point_relaxed_variable():
    found = deduce_bound(a, a - r == n, {}, {r: IntervalSet(3, 3)})
    assert str(found.min) == "n + 3" and found.is_point


def test_bad_arguments():
    with pytest.raises(LoomTypeError, match="var must be a Var"):
        deduce_bound(a + 1, a < 3, {}, {})
    with pytest.raises(LoomTypeError, match=r"deduce_bound: hint_map: the domain of b must be an IntervalSet or a Range"):
        deduce_bound(a, a * b < 3, {b: (2, 3)}, {})
    with pytest.raises(LoomTypeError, match="deduce_bound: relax_map: the domain map's keys must be Vars"):
        deduce_bound(a, a < 3, {}, {"b": IntervalSet(2, 3)})
    assert deduce_bound(a, a < 3).max.value == 2  # the maps default to empty


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_split_loop_at_the_deduced_bound(target):
    """Run ``O[i*4+j] = A[i*4+j] + 1`` with no guard for i up to the deduced bound of ``i*4 + j < n``, guarded after.

    An unsound bound writes past the end of the buffers on the unguarded part; the interpreter
    checks every access.
    """
    i, j, m = loom.var("i"), loom.var("j"), loom.var("m")
    A, O = loom.decl_buffer((m,), "int32", name="A"), loom.decl_buffer((m,), "int32", name="O")
    found = deduce_bound(i, i * 4 + j < m, {}, {j: Range.from_min_extent(0, 4)})
    rows = loom.floordiv(m + 3, 4)
    split = loom.max(0, loom.min(rows, found.max + 1))

    def body(guarded):
        store = BufferStore(O, BufferLoad(A, [i * 4 + j]) + 1, [i * 4 + j])
        return For(j, 0, 4, "serial", IfThenElse(i * 4 + j < m, store) if guarded else store)

    prog = seq(For(i, 0, split, "serial", body(False)), For(i, split, rows - split, "serial", body(True)))
    f = loom.build(PrimFunc([A.data, O.data, m], prog, buffer_map={A.data: A, O.data: O}), target=target)
    for mv in (0, 1, 3, 4, 5, 13, 16, 30):
        x = np.arange(mv, dtype="int32") * 7 - 5
        out = np.zeros(mv, "int32")
        f(x, out, mv)
        np.testing.assert_array_equal(out, x + 1)
