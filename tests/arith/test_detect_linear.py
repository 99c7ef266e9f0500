"""loom.arith.detect_linear_equation / detect_clip_bound (classic TVM's DetectLinearEquation / DetectClipBound).

Every answer is checked by value: the linear form rebuilt from the returned
coefficients equals the expression at many points, and a clip box holds
exactly the points of a window where the condition is true.
"""

from __future__ import annotations

import itertools
import random

import pytest

import loom
from loom.arith import Analyzer, detect_clip_bound, detect_linear_equation
from loom.arith.detect_linear import linear_form
from loom.errors import LoomTypeError
from loom.ir import expr as E
from loom.ir.functor import substitute

a, b, c = loom.var("a"), loom.var("b"), loom.var("c")
v = [loom.var(f"v{i}") for i in range(4)]
fld, flm = loom.floordiv, loom.floormod


def value(e, env):
    """The integer ``e`` folds to with the variables set as in ``env``."""
    out = Analyzer().rewrite_simplify(substitute(e, {x: loom.const(k, x.dtype) for x, k in env.items()}))
    assert isinstance(out, E.IntImm), f"{e} did not fold at {env}: {out}"
    return out.value


def assert_linear(expr, variables, found, others=(b, c)):
    """``found`` (coefficients then base) rebuilds ``expr`` at many points, and no coefficient uses ``variables``."""
    assert len(found) == len(variables) + 1
    for coef in found:
        assert not loom.ir.collect(coef, lambda n: any(n is x for x in variables)), coef
    names = list(variables) + list(others)
    r = random.Random(len(names))
    for _ in range(40):
        env = {x: r.randint(-30, 30) for x in names}
        rebuilt = sum(value(k, env) * env[x] for k, x in zip(found, variables)) + value(found[-1], env)
        assert rebuilt == value(expr, env), env


@pytest.mark.parametrize("make, variables, coefs", [
    (lambda: a * 4 + b * 6 + 7, [a], [4]),
    (lambda: a * 4 + (a + 1) + b * 6 + 7, [a], [5]),
    (lambda: a * 2 - a * 3 - (1 - a) * 5, [a], [4]),
    (lambda: b * 7, [a], [0]),
    (lambda: (v[0] - v[1]), [v[2]], [0]),
    (lambda: ((v[0] * b + v[1]) * 8 + v[2] + 1) * 2, v, [None, 16, 2, 0]),
    (lambda: -(a * 3) + fld(b, 3) * flm(c, 5), [a], [-3]),  # non-linear terms of the other variables stay in the base
])
def test_coefficients_and_base(make, variables, coefs):
    expr = make()
    found = detect_linear_equation(expr, variables)
    for want, got in zip(coefs, found):
        if want is not None:
            assert isinstance(got, E.IntImm) and got.value == want, (want, got)
    assert_linear(expr, variables, found, others=[x for x in (b, c, *v) if not any(x is y for y in variables)])


def test_symbolic_coefficients():
    found = detect_linear_equation(a * b + 7, [a])
    assert found[0] is b and found[1].value == 7
    found = detect_linear_equation(v[0] * (b + 4) + v[0] + v[1] * 8, v)
    assert str(found[0]) == "b + 5" and [x.value for x in found[1:]] == [8, 0, 0, 0]
    assert_linear(v[0] * (b + 4) + v[0] + v[1] * 8, v, found, others=[b])


def test_no_variables_gives_the_simplified_expression():
    (only,) = detect_linear_equation(b * 7 + b, [])
    assert str(only) == "b * 8"
    (only,) = detect_linear_equation(v[0] - v[1], [])
    assert_linear(v[0] - v[1], [], [only], others=v[:2])


@pytest.mark.parametrize("make, variables", [
    (lambda: a * 4 * (a + 1) + b * 6 + 7, [a]),
    (lambda: a * a, [a]),
    (lambda: v[0] * (b + 4) + v[0] + v[1] * 8 * v[2], v),     # a product of two of the variables
    (lambda: v[0] * (b + 4) + v[0] + v[1] * 8 * v[1] + v[3], v),
    (lambda: fld(a, 2) + b, [a]),
    (lambda: loom.min(a, b) + 1, [a]),
    (lambda: loom.cast(loom.cast(a, "int64") + 1, "int32"), [a]),
    (lambda: b * a + c, [a, b]),                              # b's coefficient... and a's is b: not linear in both
])
def test_not_linear(make, variables):
    assert detect_linear_equation(make(), variables) == []


@pytest.mark.parametrize("seed", range(30))
def test_random_linear_forms(seed):
    """Random sums of terms ``k * v_i``, products with free terms and non-linear free terms, nested and scaled."""
    r = random.Random(seed)
    free = [b, c, fld(b, 3), loom.max(b, c), b * c]
    terms = []
    for _ in range(r.randint(1, 4)):
        x = r.choice(v[:3])
        terms.append(r.choice([x * r.randint(-4, 4), x * r.choice(free), r.choice(free) * (x - r.randint(0, 3))]))
        terms.append(r.choice(free + [loom.const(r.randint(-9, 9))]))
    expr = terms[0]
    for t in terms[1:]:
        expr = expr + t if r.random() < 0.6 else (expr - t) * r.choice([1, -2])
    found = detect_linear_equation(expr, v[:3])
    assert found, expr
    assert_linear(expr, v[:3], found)


def test_linear_form_keeps_free_subtrees_as_written():
    inner = fld(b, 3) * c
    coefs, base = linear_form(inner + a * 2 + 5, [a])
    assert coefs[0].value == 2 and base.a is inner


def test_bad_arguments():
    with pytest.raises(LoomTypeError, match=r"vars\[1\] must be a Var"):
        detect_linear_equation(a + b, [a, 3])
    with pytest.raises(LoomTypeError, match="expr must be an expression"):
        detect_linear_equation("a + b", [a])
    with pytest.raises(LoomTypeError, match=r"detect_clip_bound: vars\[0\]"):
        detect_clip_bound(a < 3, [a + 1])


def clip_box(cond, variables, env, window):
    """The points of ``window`` (per variable) where ``cond`` holds, as a set of tuples."""
    return {pt for pt in itertools.product(*window)
            if value(cond, {**env, **dict(zip(variables, pt))})}


def assert_box(cond, variables, found, envs, window=range(-25, 26)):
    """Within the window, ``found``'s box holds exactly the points where ``cond`` is true."""
    assert len(found) == 2 * len(variables)
    for env in envs:
        ends = [None if e is None else value(e, env) for e in found]
        box = [[x for x in window if (lo is None or x >= lo) and (hi is None or x <= hi)]
               for lo, hi in zip(ends[::2], ends[1::2])]
        assert set(itertools.product(*box)) == clip_box(cond, variables, env, [window] * len(variables)), env


def test_clip_bound_classic():
    cond = loom.all(a * 1 < b * 6, a - 1 > 0)
    found = detect_clip_bound(cond, [a])
    assert found[0].value == 2 and str(found[1]) == "b * 6 - 1"
    assert_box(cond, [a], found, [{b: k} for k in (-1, 0, 2, 3)])
    cond = loom.all(a + 10 * c <= 20, b - 1 > 0)
    found = detect_clip_bound(cond, [a, b])
    assert found[1] is not None and found[2].value == 2 and found[0] is None and found[3] is None
    assert_box(cond, [a, b], found, [{c: k} for k in (0, 1, 3)], window=range(-12, 13))


@pytest.mark.parametrize("make", [
    lambda: loom.all(a * 3 >= b - 7, a * -2 > -17),        # constant coefficients other than +-1: exact bounds
    lambda: loom.all(a <= 9, a <= b, 1 < a, -a * 4 <= 13, b >= 0 - a * 5),
    lambda: loom.all(20 - a * 4 >= 3, 2 - a < 1),
])
def test_clip_bound_coefficients(make):
    cond = make()
    found = detect_clip_bound(cond, [a])
    assert found
    assert_box(cond, [a], found, [{b: k} for k in (-9, -1, 0, 4, 10)])


@pytest.mark.parametrize("make, variables", [
    (lambda: loom.all(a * 1 < b * 6, a - 1 > 0), [a, b]),   # a conjunct of two of the variables
    (lambda: loom.all(a < 4, c > 0), [a, b]),                # a conjunct of none of them
    (lambda: a == 3, [a]),
    (lambda: a != 3, [a]),
    (lambda: loom.any(a < 3, a > 5), [a]),
    (lambda: a * b < 3, [a]),                                # a symbolic coefficient
    (lambda: a * a < 3, [a]),
    (lambda: fld(a, 2) < 3, [a]),
    (lambda: a * 2 - a * 2 < 3, [a]),                       # a zero coefficient
    (lambda: loom.cast(a, "float32") < 3.0, [a]),
])
def test_clip_bound_refuses(make, variables):
    assert detect_clip_bound(make(), variables) == []
