"""``assume_no_overflow``: TVM's assumption that signed index arithmetic never overflows.

Off by default (Loom's integers wrap around); on, through ``Analyzer(assume_no_overflow=True)``
or the PassContext option ``"arith.assume_no_overflow"``, the rewrites TVM makes for free
variables fire. The property: wherever the original expression, evaluated in the integers,
stays well inside its dtype at every step, the simplified one computes the same value.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import loom
from loom.arith import Analyzer
from loom.errors import LoomTypeError
from loom.ir import expr as E

from test_arith_property import ARITH, Undefined, bool_exprs, evaluate, int_exprs, make_analyzer, ranges

x, y = loom.var("x"), loom.var("y")
m = loom.size_var("m")
ASSUME = {"arith.assume_no_overflow": True}


@pytest.mark.parametrize("expr, wrapping, assumed", [
    (loom.min(x + 1, x + 10), "min(x + 1, x + 10)", "x + 1"),
    (loom.max(x + 1, x + 10), "max(x + 1, x + 10)", "x + 10"),
    (m * 8 // 8, "m * 8 // 8", "m"),
    (x - 2 < 3, "x - 2 < 3", "x < 5"),
    (x * 3 + 10 == 0, "x * 3 == -10", "False"),  # -10 is not a multiple of 3, but may be x * 3 after wrapping
    ((x // 2 + 1) // 3, "(x // 2 + 1) // 3", "(x + 2) // 6"),
    (loom.min(x, y) - x, "min(x, y) - x", "min(y - x, 0)"),
])
def test_tvm_rewrites_fire_only_under_the_assumption(expr, wrapping, assumed):
    assert str(Analyzer().simplify(expr)) == wrapping
    assert str(Analyzer(assume_no_overflow=True).simplify(expr)) == assumed


def test_bounds_and_residues_are_cut_to_the_dtype_instead_of_dismissed():
    plain, assumed = Analyzer(), Analyzer(assume_no_overflow=True)
    assert tuple(plain.const_int_bound(m + 1)) == (-(2**31), 2**31 - 1)  # m = INT_MAX wraps
    assert tuple(assumed.const_int_bound(m + 1)) == (1, 2**31 - 1)
    assert (plain.modular_set(x * 3).coeff, assumed.modular_set(x * 3).coeff) == (1, 3)
    assert tuple(assumed.const_int_bound(x * 2)) == (-(2**31), 2**31 - 1)


def test_a_canonical_sum_whose_constant_wrapped_is_not_cut_to_the_dtype():
    # x - INT_MIN is kept as x + INT_MIN: equal modulo 2**32 only, so its bound proves nothing.
    an = Analyzer(assume_no_overflow=True)
    int_min = E.IntImm("int32", -(2**31))
    assert str(an.simplify(E.LT(x, int_min))) == "False"
    assert str(an.simplify(E.GT(int_min, x))) == "False"
    assert tuple(an.const_int_bound(x - int_min)) == (0, 2**31 - 1)


def test_unsigned_arithmetic_and_conversions_still_wrap():
    an = Analyzer(assume_no_overflow=True)
    u = loom.var("u", "uint32")
    assert str(an.simplify(loom.min(u + 1, u + 10))) == "min(u + uint32(1), u + uint32(10))"
    assert tuple(an.const_int_bound((m + 200).astype("int8"))) == (-128, 127)
    assert an.modular_set((x * 3).astype("uint32")).coeff == 1  # -3 is 2**32 - 3, not a multiple of 3


def test_the_pass_context_option_is_the_default():
    assert Analyzer().assume_no_overflow is False
    with loom.transform.PassContext(config=ASSUME):
        assert Analyzer().assume_no_overflow is True
        assert Analyzer(assume_no_overflow=False).assume_no_overflow is False  # an explicit choice wins
        with loom.build_config(auto_unroll_max_step=4):  # build_config keeps the enclosing options
            assert Analyzer().assume_no_overflow is True
    assert Analyzer().assume_no_overflow is False
    assert loom.transform.list_config_options()["arith.assume_no_overflow"].default is False


def test_a_non_bool_choice_is_refused():
    with pytest.raises(LoomTypeError, match="assume_no_overflow"):
        Analyzer(assume_no_overflow=1)
    with pytest.raises(LoomTypeError, match="arith.assume_no_overflow"):
        loom.transform.PassContext(config={"arith.assume_no_overflow": "yes"})


def _split_by_8():
    n, l = loom.size_var("n"), loom.size_var("l")
    A = loom.placeholder((8 * n, l), name="A")
    B = loom.compute((8 * n, l), lambda i, j: A[i, j] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    xo, _ = s[B].split(B.op.axis[0], 8)
    return s, xo, A, B, n


def test_bound_inference_and_lowering_use_the_option():
    s, xo, A, B, n = _split_by_8()
    assert str(loom.schedule.InferBound(s)[xo].extent) == "n * 8 // 8"
    with loom.transform.PassContext(config=ASSUME):
        assert str(loom.schedule.InferBound(s)[xo].extent) == "n"
        text = str(loom.lower(s, [A, B, n]))
    assert "for i.outer in range(n):" in text


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_a_kernel_lowered_under_the_assumption_computes_the_same(target):
    s, _, A, B, n = _split_by_8()
    with loom.transform.PassContext(config=ASSUME):
        f = loom.build(s, [A, B, n], target)
    a = np.arange(24 * 5, dtype="float32").reshape(24, 5)
    b = np.zeros_like(a)
    f(a, b, 3)
    np.testing.assert_array_equal(b, a * 2)
    with pytest.raises(loom.LoomError):  # the shape check still guards the buffers: 8 * 4 != 24
        f(a, b, 4)


# ---------------------------------------------------------------------------
# Property: where the original stays well inside its dtype, the simplified form computes
# (wrapping, as the machine does) the same value.


class Overflow(Exception):
    """The original expression comes near its dtype's limits at some step."""


def _inside(v, t):
    if t.is_int and not -(1 << (t.bits - 2)) <= v < 1 << (t.bits - 2):
        raise Overflow
    return v


def exact(e, env):
    """``e`` evaluated in the integers; Overflow when a variable or a signed step leaves half its
    dtype's range.

    Half: the assumption covers the forms the simplifier derives too (TVM's contract), and
    those may reach further than the original (``INT_MIN - x`` becomes ``x * -1 + INT_MIN``,
    which overflows at ``x = INT_MIN``). Index arithmetic lives far from the limits.
    """
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return _inside(env[e], e.dtype)
    if type(e) in ARITH:
        return _inside(int(ARITH[type(e)](exact(e.a, env), exact(e.b, env))), e.dtype)
    if isinstance(e, E.Not):
        return 1 - exact(e.a, env)
    if isinstance(e, E.Select):
        c, t, f = (exact(v, env) for v in (e.condition, e.true_value, e.false_value))
        return t if c else f
    raise AssertionError(f"no rule for {type(e).__name__}")


@st.composite
def cases(draw):
    dtype = loom.DataType.of(draw(st.sampled_from(["int32", "int64"])))
    variables = [loom.var(n, dtype) for n in "xyz"]
    bounds = {v: draw(ranges(dtype)) for v in variables}
    e = draw(bool_exprs(dtype, variables, 3) if draw(st.integers(0, 3)) == 0 else int_exprs(dtype, variables, 4))
    rng = draw(st.randoms(use_true_random=False))
    envs = [{v: r[k] for v, r in bounds.items()} for k in (0, 1)]
    envs += [{v: rng.randint(*r) for v, r in bounds.items()} for _ in range(14)]
    return e, bounds, envs


@settings(max_examples=max(200, settings.default.max_examples), deadline=None)
@given(cases(), st.sampled_from(["simplify", "rewrite_simplify", "canonical_simplify"]))
def test_simplification_keeps_the_value_where_nothing_overflows(case, how):
    e, bounds, envs = case
    out = getattr(make_analyzer(bounds, assume_no_overflow=True), how)(e)
    assert out.dtype == e.dtype
    for env in envs:
        try:
            want = exact(e, env)
        except (Overflow, Undefined):
            continue
        got = evaluate(out, env)  # as the machine computes it: wrapping, which the rewrite may rely on
        assert got == want, f"{how}: {e} -> {out} at {({v.name: k for v, k in env.items()})}: {want} != {got}"
