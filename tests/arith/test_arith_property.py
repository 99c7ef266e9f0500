"""Property tests: every simplification keeps the value, under the IR's semantics.

The oracle is a small reference evaluator written here from the IR's rules:
Python ints wrapped to the dtype after every operation, ``//``/``%`` for
FloorDiv/FloorMod, truncation toward zero for Div/Mod, every operand
evaluated (select too).  Examples where the *original* divides by zero are
skipped; the simplified form must be defined wherever the original is.
"""

from hypothesis import given, settings, strategies as st

import loom
from loom.arith import Analyzer, ConstIntBound
from loom.ir import Range
from loom.ir import expr as E


class Undefined(Exception):
    """The expression divides by zero."""


def wrap(v, t):
    if t.is_bool:
        return int(v != 0)
    v &= (1 << t.bits) - 1
    if t.is_int and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _div(fn):
    def run(a, b):
        if b == 0:
            raise Undefined
        return fn(a, b)
    return run


ARITH = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: _div(lambda a, b: a // b), E.FloorMod: _div(lambda a, b: a % b),
    E.Div: _div(tdiv), E.Mod: _div(lambda a, b: a - tdiv(a, b) * b),
    E.Min: min, E.Max: max,
    E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b, E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b,
    E.And: lambda a, b: a and b, E.Or: lambda a, b: a or b,
}


def evaluate(e, env):
    """The value of ``e`` with variables from ``env`` (raises Undefined on x // 0)."""
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env[e]
    if type(e) in ARITH:
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        return wrap(ARITH[type(e)](a, b), e.dtype)
    if isinstance(e, E.Not):
        return 1 - evaluate(e.a, env)
    if isinstance(e, E.Select):
        c, t, f = (evaluate(x, env) for x in (e.condition, e.true_value, e.false_value))
        return t if c else f
    if isinstance(e, E.Cast):
        return wrap(evaluate(e.value, env), e.dtype)
    raise AssertionError(f"the reference evaluator has no rule for {type(e).__name__}")


# ---------------------------------------------------------------------------
# Random expressions over three variables with bounded ranges.

BINARY = [E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max]
CMP = [E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE]


def consts(dtype):
    lo, hi = -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1
    special = [0, 1, -1, 2, 3, 4, 7, 8, 16, -3, -8, 64, lo, hi, lo + 1, hi - 1]
    return st.one_of(st.sampled_from(special), st.integers(-100, 100), st.integers(lo, hi))


@st.composite
def ranges(draw, dtype):
    lo, hi = -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1
    kind = draw(st.sampled_from(["small", "nonneg", "big", "full", "edge"]))
    if kind == "small":
        a = draw(st.integers(-20, 20))
        return a, a + draw(st.integers(0, 20))
    if kind == "nonneg":
        return 0, draw(st.sampled_from([1, 3, 4, 8, 15, 16, 100, 1024]))
    if kind == "big":
        a = draw(st.integers(lo, hi))
        b = draw(st.integers(lo, hi))
        return min(a, b), max(a, b)
    if kind == "edge":
        return draw(st.sampled_from([(hi - 10, hi), (lo, lo + 10), (lo, 0), (0, hi)]))
    return lo, hi


@st.composite
def int_exprs(draw, dtype, variables, depth):
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        if draw(st.booleans()):
            return draw(st.sampled_from(variables))
        return E.IntImm(dtype, draw(consts(dtype)))
    kind = draw(st.integers(0, 9))
    a = draw(int_exprs(dtype, variables, depth - 1))
    b = draw(int_exprs(dtype, variables, depth - 1))
    if kind == 9:
        return E.Select(draw(bool_exprs(dtype, variables, depth - 1)), a, b)
    return BINARY[kind](a, b)


@st.composite
def bool_exprs(draw, dtype, variables, depth):
    kind = draw(st.integers(0, 3))
    if kind == 0 and depth > 0:
        op = draw(st.sampled_from([E.And, E.Or]))
        return op(draw(bool_exprs(dtype, variables, depth - 1)), draw(bool_exprs(dtype, variables, depth - 1)))
    if kind == 1 and depth > 0:
        return E.Not(draw(bool_exprs(dtype, variables, depth - 1)))
    op = draw(st.sampled_from(CMP))
    sub = max(depth - 1, 0)
    return op(draw(int_exprs(dtype, variables, sub)), draw(int_exprs(dtype, variables, sub)))


class Case:
    """One example: an expression, variable ranges, and assignments to try."""

    def __init__(self, e, bounds, envs):
        self.e, self.bounds, self.envs = e, bounds, envs

    def __iter__(self):
        return iter((self.e, self.bounds, self.envs))

    def __repr__(self):
        ranges = ", ".join(f"{v.name} in [{lo}, {hi}]" for v, (lo, hi) in self.bounds.items())
        return f"Case({self.e}  with {ranges}; {self.e.dtype})"


@st.composite
def cases(draw):
    dtype = loom.DataType.of(draw(st.sampled_from(["int32", "int64"])))
    variables = [loom.var(n, dtype) for n in "xyz"]
    bounds = {v: draw(ranges(dtype)) for v in variables}
    if draw(st.integers(0, 3)) == 0:
        e = draw(bool_exprs(dtype, variables, 3))
    else:
        e = draw(int_exprs(dtype, variables, 4))
    rng = draw(st.randoms(use_true_random=False))
    envs = [{v: lo for v, (lo, hi) in bounds.items()}, {v: hi for v, (lo, hi) in bounds.items()}]
    envs += [{v: rng.randint(lo, hi) for v, (lo, hi) in bounds.items()} for _ in range(14)]
    return Case(e, bounds, envs)


def make_analyzer(bounds, **options):
    an = Analyzer(**options)
    for v, (lo, hi) in bounds.items():
        if hi - lo + 1 < 1 << (v.dtype.bits - 1):
            an.bind(v, Range.from_min_extent(loom.const(lo, v.dtype), loom.const(hi - lo + 1, v.dtype)))
        else:
            an.update(v, ConstIntBound(lo, hi))
    return an


def defined(e, env):
    try:
        return evaluate(e, env)
    except Undefined:
        return None


def assert_same_value(original, simplified, envs, what):
    assert simplified.dtype == original.dtype, f"{what} changed the dtype: {original} -> {simplified}"
    for env in envs:
        want = defined(original, env)
        if want is None:
            continue
        got = evaluate(simplified, env)
        assert got == want, (
            f"{what} changed the value\n  original:   {original}\n  simplified: {simplified}\n"
            f"  at {dict((v.name, x) for v, x in env.items())}: {want} != {got}")


# Modest by default; LOOM_HYPOTHESIS_PROFILE=thorough raises every count.
EXAMPLES = max(200, settings.default.max_examples)
SETTINGS = settings(max_examples=EXAMPLES, deadline=None)


@SETTINGS
@given(cases())
def test_simplify_keeps_value(case):
    e, bounds, envs = case
    assert_same_value(e, make_analyzer(bounds).simplify(e), envs, "simplify")


@SETTINGS
@given(cases())
def test_rewrite_and_canonical_keep_value(case):
    e, bounds, envs = case
    an = make_analyzer(bounds)
    assert_same_value(e, an.rewrite_simplify(e), envs, "rewrite_simplify")
    assert_same_value(e, an.canonical_simplify(e), envs, "canonical_simplify")


@SETTINGS
@given(cases())
def test_simplify_is_idempotent(case):
    e, bounds, _ = case
    an = make_analyzer(bounds)
    once = an.simplify(e)
    assert str(an.simplify(once)) == str(once), f"not a fixpoint: {e} -> {once}"


@SETTINGS
@given(cases())
def test_bounds_and_residues_hold(case):
    e, bounds, envs = case
    an = make_analyzer(bounds)
    subexprs = loom.ir.collect(e, lambda n: isinstance(n, E.PrimExpr))
    for sub in subexprs:
        b, m = an.const_int_bound(sub), an.modular_set(sub)
        for env in envs:
            v = defined(sub, env)
            if v is None:
                continue
            assert b.min_value <= v <= b.max_value, f"{sub} = {v} outside {b}"
            if m.coeff == 0:
                assert v == m.base, f"{sub} = {v}, but modular_set says exactly {m.base}"
            else:
                assert v % m.coeff == m.base, f"{sub} = {v} not in {m}"


# ---------------------------------------------------------------------------
# Vectors: Ramp/Broadcast leaves, checked lane by lane.

VECTOR_OPS = [E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max]


def evaluate_lanes(e, env):
    """The lanes of a vector expression (a list), by the same rules as ``evaluate``."""
    lanes = e.dtype.lanes
    if isinstance(e, E.Broadcast):
        return [evaluate(e.value, env)] * lanes
    if isinstance(e, E.Ramp):
        base, stride = evaluate(e.base, env), evaluate(e.stride, env)
        return [wrap(base + k * stride, e.dtype) for k in range(lanes)]
    if type(e) in ARITH:
        pairs = zip(evaluate_lanes(e.a, env), evaluate_lanes(e.b, env))
        return [wrap(ARITH[type(e)](p, q), e.dtype) for p, q in pairs]
    if isinstance(e, E.Select):
        parts = (evaluate_lanes(x, env) for x in (e.condition, e.true_value, e.false_value))
        return [t if c else f for c, t, f in zip(*parts)]
    raise AssertionError(f"no lane rule for {type(e).__name__}")


@st.composite
def vector_exprs(draw, variables, depth):
    dtype = variables[0].dtype
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        scalar = draw(st.sampled_from(variables)) if draw(st.booleans()) else E.IntImm(dtype, draw(consts(dtype)))
        if draw(st.booleans()):
            return E.Broadcast(scalar, 4)
        return E.Ramp(scalar, E.IntImm(dtype, draw(st.sampled_from([0, 1, 2, -1, 4]))), 4)
    a, b = draw(vector_exprs(variables, depth - 1)), draw(vector_exprs(variables, depth - 1))
    if draw(st.integers(0, 5)) == 0:
        return E.Select(draw(st.sampled_from(CMP))(a, b), a, b)
    return draw(st.sampled_from(VECTOR_OPS))(a, b)


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(st.data())
def test_vector_expressions_keep_every_lane(data):
    variables = [loom.var(name) for name in "xy"]
    bounds = {v: data.draw(ranges(variables[0].dtype)) for v in variables}
    e = data.draw(vector_exprs(variables, 3))
    s = make_analyzer(bounds).simplify(e)
    assert s.dtype == e.dtype
    rng = data.draw(st.randoms(use_true_random=False))
    for _ in range(8):
        env = {v: rng.randint(lo, hi) for v, (lo, hi) in bounds.items()}
        try:
            want = evaluate_lanes(e, env)
        except Undefined:
            continue
        assert evaluate_lanes(s, env) == want, f"{e} -> {s} at {env}"


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(cases(), st.data())
def test_simplify_under_a_constraint_keeps_value_where_it_holds(case, data):
    _check_under_a_constraint(case, data, depth=2)


def _check_under_a_constraint(case, data, depth):
    e, bounds, envs = case
    variables = list(bounds)
    cond = data.draw(bool_exprs(variables[0].dtype, variables, depth))
    an = make_analyzer(bounds)
    with an.constraint_scope(cond):
        s = an.simplify(e)
    assert_same_value(e, s, [env for env in envs if defined(cond, env)], "simplify under a constraint")


# ---------------------------------------------------------------------------
# Expressions shaped like the left-hand sides of the index rules (min/max with
# arithmetic, quotients and remainders, canonical comparisons), with random
# operands, constants and ranges: the random trees above rarely hit them.

FD, FM, TD, TM, MN, MX = E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max


def _shapes(u, v, w, c1, c2, c3, k):
    """Candidate expressions from operands ``u v w`` and constants (IntImm) ``c1 c2 c3 k``."""
    t = u.dtype
    ck = E.IntImm(t, c2.value * k.value) if abs(c2.value * k.value) < 1 << (t.bits - 1) else c2
    return [
        E.Add(MN(E.Add(u, c1), v), c2), E.Add(MX(v, E.Add(u, c1)), E.IntImm(t, -c1.value if c1.value > -(1 << (t.bits - 1)) else 0)),
        E.Add(MN(u, E.Sub(v, w)), w), E.Add(w, MX(E.Sub(v, w), u)), E.Sub(MN(u, v), u), E.Sub(v, MX(u, v)),
        E.Sub(u, MN(E.Add(u, v), w)), E.Sub(MX(w, E.Add(v, u)), u), MN(E.Sub(c1, u), c2), MX(E.Mul(u, c2), ck),
        MN(E.Mul(FD(E.Add(u, c1), c2), c2), u), MX(u, E.Mul(FD(u, c2), c2)), MN(MX(u, v), MX(w, u)),
        MX(MX(MX(u, v), w), v), MN(TD(u, c2), TD(v, c2)), MX(FD(u, c2), FD(v, c2)), E.Mul(MN(u, v), MX(v, u)),
        FD(E.Add(FD(u, c1), c2), c3), FD(MN(E.Mul(u, ck), v), c2), FD(E.Add(E.Mul(u, v), w), v), FD(E.Add(u, v), u),
        FM(E.Add(w, E.Mul(v, u)), v), FM(E.Mul(u, c1), c2), TM(u, c1), TD(E.Add(u, E.Mul(v, w)), w),
        E.Sub(FD(E.Add(u, c1), c2), FD(E.Add(u, c3), c2)), E.Sub(u, E.Mul(FD(E.Add(u, c1), c2), c2)),
        E.Sub(E.Mul(FD(E.Add(u, v), c2), ck), E.Mul(u, k)), E.Select(E.LT(u, v), u, w) - u,
        E.LT(E.Mul(FD(u, c2), c2), E.Add(u, v)), E.LE(E.Add(u, w), E.Mul(FD(E.Add(u, c1), c2), c2)),
        E.LT(TD(u, c2), c1), E.LE(c1, TD(u, c2)), E.LT(MN(u, c1), c2), E.LT(E.Add(u, c1), MX(c2, u)),
        E.LT(c1, E.Sub(c2, u)), E.LE(E.Sub(c1, u), c2), E.EQ(E.Mul(u, v), E.IntImm(t, 0)),
        E.LE(E.Sub(E.Mul(u, c2), E.Mul(v, ck)), c1), E.LT(u, E.Add(w, u)), E.NE(E.Mul(u, v), E.IntImm(t, 0)),
        # rules that hold under wrap-around (rules_wrap): ring identities, quotient differences, nesting
        E.Add(E.Sub(u, v), E.Sub(w, u)), E.Sub(E.Add(v, u), E.Add(w, u)), E.Add(E.Mul(u, v), E.Mul(w, u)),
        E.Sub(MN(E.Add(u, c1), E.Add(v, c2)), MN(E.Add(v, c3), u)), E.Sub(u, E.Mul(TD(E.Sub(u, v), c2), c2)),
        E.Sub(E.Mul(u, k), E.Mul(FD(E.Add(u, w), c2), ck)), FD(E.Add(E.Add(E.Mul(u, ck), v), w), c2),
        FM(E.Sub(u, c1), c2), FD(E.Sub(FD(u, c1), c2), c3), TD(TD(u, c1), c2), TD(E.Mul(u, ck), c2),
        TM(TM(u, ck), c2), TM(E.Mul(u, ck), c2), FM(E.Sub(FM(u, ck), c1), c2), E.And(E.LT(u, v), E.LE(u, v)),
        E.Add(E.Add(E.Mul(FD(u, ck), ck), E.Mul(FM(FD(u, c2), k), c2)), FM(u, c2)), TD(E.Mul(TD(u, c2), c2), ck),
    ]


@st.composite
def shaped_cases(draw):
    dtype = loom.DataType.of(draw(st.sampled_from(["int32", "int64"])))
    variables = [loom.var(n, dtype) for n in "xyz"]
    bounds = {v: draw(ranges(dtype)) for v in variables}
    u, v, w = (draw(int_exprs(dtype, variables, 1)) for _ in range(3))
    small = st.one_of(st.integers(-9, 9), consts(dtype))
    c1, c2, c3 = (E.IntImm(dtype, draw(small)) for _ in range(3))
    e = draw(st.sampled_from(_shapes(u, v, w, c1, c2, c3, E.IntImm(dtype, draw(st.integers(-3, 3))))))
    rng = draw(st.randoms(use_true_random=False))
    envs = [{v: lo for v, (lo, hi) in bounds.items()}, {v: hi for v, (lo, hi) in bounds.items()}]
    envs += [{v: rng.randint(lo, hi) for v, (lo, hi) in bounds.items()} for _ in range(14)]
    return Case(e, bounds, envs)


@SETTINGS
@given(shaped_cases())
def test_index_rules_keep_value(case):
    e, bounds, envs = case
    an = make_analyzer(bounds)
    assert_same_value(e, an.simplify(e), envs, "simplify")
    assert_same_value(e, an.rewrite_simplify(e), envs, "rewrite_simplify")
    assert_same_value(e, an.canonical_simplify(e), envs, "canonical_simplify")


@SETTINGS
@given(shaped_cases(), st.data())
def test_index_rules_under_facts_keep_value_where_they_hold(case, data):
    _check_under_a_constraint(case, data, depth=1)


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(cases(), st.data())
def test_bounds_and_residues_under_modular_facts_hold(case, data):
    """Facts ``v % m == r`` (floored or truncated) narrow residues; every claim must hold where they do."""
    e, bounds, envs = case
    variables = list(bounds)
    t = variables[0].dtype
    facts = []
    for v in data.draw(st.lists(st.sampled_from(variables), max_size=3)):
        m = data.draw(st.sampled_from([2, 3, 4, 5, 7, 8, -4]))
        op = data.draw(st.sampled_from([E.FloorMod, E.Mod]))
        facts.append(E.EQ(op(v, E.IntImm(t, m)), E.IntImm(t, data.draw(st.integers(-6, 6)))))
    an = make_analyzer(bounds)
    holds = [env for env in envs if all(defined(f, env) for f in facts)]
    with an.constraint_scope(loom.all(*facts) if facts else loom.const(True)):
        for sub in loom.ir.collect(e, lambda n: isinstance(n, E.PrimExpr)):
            b, m = an.const_int_bound(sub), an.modular_set(sub)
            for env in holds:
                val = defined(sub, env)
                if val is None:
                    continue
                assert b.min_value <= val <= b.max_value, f"{sub} = {val} outside {b} under {facts}"
                assert (val == m.base) if m.coeff == 0 else (val % m.coeff == m.base), f"{sub} = {val} not in {m}"
        assert_same_value(e, an.simplify(e), holds, "simplify under modular facts")


@settings(max_examples=EXAMPLES, deadline=None)
@given(dtype=st.sampled_from(["int8", "uint8", "int16"]), data=st.data())
def test_an_offset_fact_keeps_every_value_that_satisfies_it(dtype, data):
    """``x + c`` compared with a constant, read with wrap-around, bounds ``x`` without losing a solution."""
    x = E.Var("x", dtype)
    t = x.dtype
    lo, hi = (0, 255) if dtype == "uint8" else (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1)
    c = data.draw(st.integers(lo + 1, hi), "c")  # -c must be a constant of the dtype too
    k = data.draw(st.integers(lo, hi), "k")
    op = data.draw(st.sampled_from(["<", "<=", ">", ">=", "=="]), "op")
    side = (x + loom.const(c, dtype)) if c >= 0 or dtype == "uint8" else (x - loom.const(-c, dtype))
    cond = {"<": side < k, "<=": side <= k, ">": side > k, ">=": side >= k, "==": side == k}[op]
    if isinstance(cond, E.IntImm):
        return
    an = Analyzer()
    with an.constraint_scope(cond):
        bound = an.const_int_bound(x)
    edges = {wrap(k - c + d, t) for d in (-1, 0, 1)} | {lo, hi}  # where the condition flips
    for v in sorted(set(range(lo, hi + 1, 1 if t.bits == 8 else 97)) | edges):
        w = wrap(v + c, t)
        holds = {"<": w < k, "<=": w <= k, ">": w > k, ">=": w >= k, "==": w == k}[op]
        if holds:
            assert bound.min_value <= v <= bound.max_value, (str(cond), v, bound)


@settings(max_examples=EXAMPLES, deadline=None)
@given(dtype=st.sampled_from(["int8", "uint8", "int32"]), data=st.data())
def test_shift_and_and_bounds_hold(dtype, data):
    """``x >> s`` over a range of shifts and ``x & y`` with either side non-negative: every value in the bound."""
    x, y = E.Var("x", dtype), E.Var("y", dtype)
    t = x.dtype
    lo, hi = (0, (1 << t.bits) - 1) if dtype == "uint8" else (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1)
    ranges = {}
    for v, name in ((x, "x"), (y, "y")):
        a, b = sorted(data.draw(st.lists(st.integers(lo, hi), min_size=2, max_size=2), name))
        ranges[v] = (a, b)
    s_lo, s_hi = sorted(data.draw(st.lists(st.integers(0, t.bits - 1), min_size=2, max_size=2), "shift"))
    s = E.Var("s", dtype)
    an = Analyzer()
    for v, (a, b) in [*ranges.items(), (s, (s_lo, s_hi))]:
        an.update(v, ConstIntBound(a, b))
    shifted, masked = an.const_int_bound(x >> s), an.const_int_bound(x & y)
    for _ in range(30):
        xv, yv = (data.draw(st.integers(*ranges[v])) for v in (x, y))
        sv = data.draw(st.integers(s_lo, s_hi))
        assert shifted.min_value <= xv >> sv <= shifted.max_value, (ranges, (s_lo, s_hi), xv, sv, shifted)
        assert masked.min_value <= wrap(xv & yv, t) <= masked.max_value, (ranges, xv, yv, masked)
