"""Vectorizable math: ``exp``, ``log``, ``tanh``, ``sigmoid`` and ``erf`` as plain IR.

``loom.fast_exp(x)`` (and ``fast_log``, ``fast_tanh``, ``fast_sigmoid``,
``fast_erf``) returns an expression made of ordinary nodes -- multiplies and
adds, ``Select``, ``Min``/``Max``, ``loom.reinterpret`` and integer shifts --
that computes the function by range reduction and a polynomial.  Because it is
plain IR, a vectorized loop stays vectorized on every CPU backend (no call of
the C library per lane), and the interpreter evaluates the same expression.
The ``llvm`` and ``c`` targets use these expansions for ``loom.exp``,
``loom.log``... when given ``-fast_math`` (``loom.build(..., target="llvm
-fast_math")``).

float32 and float64 have their own constants and polynomials (fitted by
``tools/fast_math_fit.py``); float16 and bfloat16 compute in float32 and round
once at the end.  Every special value is handled: NaN gives NaN, the
infinities give the limits, results overflow to inf and underflow through the
subnormals to zero where the functions do, and subnormal inputs are handled.
The error bounds, checked over the whole range by tests/backends/test_fast_math_backends.py
(docs/te.md has the measured maxima):

==========  ===========  ===========
function    float32      float64
==========  ===========  ===========
exp         1.5 ulp      1.5 ulp
log         1.5 ulp      2 ulp
tanh        2 ulp        2 ulp
sigmoid     2.5 ulp      3 ulp
erf         1.5 ulp      1.5 ulp
==========  ===========  ===========

Compiled with FMA contraction (the llvm default) results can differ from the
interpreter's in the last bit, within the same bounds; without it they are the
interpreter's bit for bit.

>>> import loom
>>> x = loom.var("x", "float32")
>>> e = loom.fast_exp(x)
>>> str(e.dtype), "exp" in str(e)
('float32', False)
>>> import numpy as np
>>> from loom.ir import BufferStore, PrimFunc
>>> A = loom.decl_buffer((3,), "float32", name="A")
>>> f = PrimFunc([A.data], BufferStore(A, loom.fast_exp(A[0]), [1]), buffer_map={A.data: A})
>>> a = np.array([1.0, 0.0, 0.0], "float32"); loom.testing.evaluate(f, a); float(a[1])
2.7182817459106445
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..errors import LoomTypeError
from . import expr as E
from .dtype import DataType
from .expr_ops import convert_expr
from .op import Op

__all__ = ["fast_exp", "fast_log", "fast_tanh", "fast_sigmoid", "fast_erf", "EXPANSIONS"]

_INF = float("inf")


@dataclasses.dataclass(frozen=True)
class _Consts:
    """The constants of one precision: exponent layout, reduction constants and polynomial coefficients."""

    bits: int
    exp_lo: float
    exp_hi: float
    magic: float
    magic_bits: int
    log2e: float
    ln2_hi: float
    ln2_lo: float
    exp: tuple[float, ...]
    sqrt_half_bits: int
    tiny: float
    denormal_scale: float
    denormal_log2: float
    log: tuple[float, ...]
    tanh: tuple[float, ...]
    erf: tuple[float, ...]
    erfc: tuple[float, ...]
    erf_max: float

    @property
    def mant(self) -> int:
        """Stored mantissa bits."""
        return 23 if self.bits == 32 else 52

    @property
    def bias(self) -> int:
        return 127 if self.bits == 32 else 1023


_F32 = _Consts(
    bits=32,
    exp_lo=-104.0, exp_hi=89.0,  # beyond: 0 and inf (exp(-104) < 2^-150, exp(89) > 2^128)
    magic=12582912.0, magic_bits=0x4B400000,  # 1.5 * 2^23: adding it rounds to an integer, kept in the low bits
    log2e=1.4426950408889634,
    ln2_hi=0.693145751953125, ln2_lo=1.428606765330187e-06,  # ln2_hi has 16 bits: n * ln2_hi is exact
    # exp(r) = 1 + r + sum c_k r^k, k = 2..6, |r| <= ln2/2
    exp=(0.4999999403953552, 0.1666652113199234, 0.04166825860738754, 0.00836866907775402, 0.0013821307802572846),
    sqrt_half_bits=0x3F3504F3, tiny=1.1754943508222875e-38, denormal_scale=33554432.0, denormal_log2=25.0,
    # log1p(f) = f + sum c_k f^k, k = 2..9, f in [sqrt(1/2) - 1, sqrt(2) - 1)
    log=(-0.49999991059303284, 0.33333948254585266, -0.25001785159111023, 0.1996215581893921,
         -0.16570048034191132, 0.1491681933403015, -0.14309664070606232, 0.08740008622407913),
    # tanh(x) = x + sum c_k x^(2k+1), k = 1..4, |x| < 0.55
    tanh=(-0.3333294689655304, 0.1332072913646698, -0.05267200991511345, 0.016437876969575882),
    # erf(x) = x + sum c_k x^(2k+1), k = 0..6, |x| < 1
    erf=(0.12837916612625122, -0.3761262595653534, 0.11283578723669052, -0.026853347197175026,
         0.005187162198126316, -0.0007997853099368513, 7.806903158780187e-05),
    # -log(erfc(x)) = sum c_k (x - 1)^k, k = 0..7, 1 <= x <= 4 (erf(x) rounds to 1 beyond 4)
    erfc=(1.8496055603027344, 2.6389620304107666, 0.8431955575942993, 0.04106944054365158, -0.008822174742817879,
          0.0005499272374436259, 0.000528004253283143, -0.000148717692354694),
    erf_max=4.0,
)

_F64 = _Consts(
    bits=64,
    exp_lo=-746.0, exp_hi=710.0,
    magic=6755399441055744.0, magic_bits=0x4338000000000000,  # 1.5 * 2^52
    log2e=1.4426950408889634,
    ln2_hi=0.6931471805598903, ln2_lo=5.497923018708371e-14,  # ln2_hi has 42 bits
    exp=(0.5000000000000011, 0.16666666666666463, 0.04166666666652873, 0.00833333333347166, 0.0013888888943719916,
         0.00019841269543377626, 2.4801493154189304e-05, 2.7557560990516517e-06, 2.763019909961577e-07,
         2.5006408752779187e-08),
    sqrt_half_bits=0x3FE6A09E667F3BCD, tiny=2.2250738585072014e-308, denormal_scale=18014398509481984.0,
    denormal_log2=54.0,
    log=(-0.4999999999999997, 0.33333333333328097, -0.2500000000001284, 0.20000000001741494, -0.16666666666202512,
         0.142857140871447, -0.1249999983382289, 0.11111122022506384, -0.10000018050299615, 0.09090583062168822,
         -0.08332554674191711, 0.07697716684481062, -0.07160232904468754, 0.06621524470916135,
         -0.06041255538456291, 0.05974119864091508, -0.06787034458984055, 0.06323439442999032,
         -0.0282856653108651),
    tanh=(-0.33333333333332316, 0.13333333333168965, -0.053968253876187006, 0.021869485977108746,
          -0.00886319453255889, 0.003591719911799762, -0.0014532177556565596, 0.0005791398294222617,
          -0.00021030678597489837, 5.102438365422993e-05),
    erf=(0.12837916709551256, -0.3761263890318337, 0.11283791670939065, -0.026866170642403254, 0.005223977600974376,
         -0.0008548325707538611, 0.00012055287538430098, -1.4924605658753703e-05, 1.6445912237729147e-06,
         -1.6197602699721094e-07, 1.3675632771033473e-08, -7.717269945214016e-10),
    erfc=(1.8496055099332485, 2.638967514234719, 0.8431072563624931, 0.04156109796088931, -0.01003382449379187,
          0.001977896893054544, -0.00023729891429750404, -2.634447412242676e-05, 2.729190826550014e-05,
          -9.800287864579385e-06, 2.2621452405734376e-06, -3.010341801910225e-07, -6.182945466711137e-09,
          1.3330130012579474e-08, -3.0982431436755673e-09, 3.5082583248014054e-10, -1.67879310115087e-11),
    erf_max=6.0,
)


class _Builder:
    """Builds one expansion: constants of the right lanes, named intermediate values (Lets), bit views."""

    def __init__(self, t: DataType) -> None:
        self.t = t
        self.it = DataType("int", t.bits, t.lanes)
        self.k = _F32 if t.bits == 32 else _F64
        self._lets: list[tuple[E.Var, E.PrimExpr]] = []

    def f(self, value: float) -> E.PrimExpr:
        imm = E.FloatImm(self.t.element_of(), value)
        return imm if self.t.lanes == 1 else E.Broadcast(imm, self.t.lanes)

    def i(self, value: int) -> E.PrimExpr:
        imm = E.IntImm(self.it.element_of(), value)
        return imm if self.t.lanes == 1 else E.Broadcast(imm, self.t.lanes)

    def bind(self, name: str, value: E.PrimExpr) -> E.PrimExpr:
        """A variable holding ``value`` (evaluated once however often it is used)."""
        if isinstance(value, (E.Var, E.FloatImm, E.IntImm, E.Broadcast)):
            return value
        var = E.Var(name, value.dtype)
        self._lets.append((var, value))
        return var

    def wrap(self, body: E.PrimExpr) -> E.PrimExpr:
        for var, value in reversed(self._lets):
            body = E.Let(var, value, body)
        self._lets.clear()
        return body

    def bits(self, x: E.PrimExpr) -> E.PrimExpr:
        return E.Call(self.it, Op.get("tir.reinterpret"), [x])

    def float_of(self, x: E.PrimExpr) -> E.PrimExpr:
        return E.Call(self.t, Op.get("tir.reinterpret"), [x])

    def _int_op(self, name: str, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        return E.Call(self.it, Op.get(name), [a, b])

    def shl(self, a: E.PrimExpr, n: int) -> E.PrimExpr:
        return self._int_op("tir.shift_left", a, self.i(n))

    def shr(self, a: E.PrimExpr, n: int) -> E.PrimExpr:
        return self._int_op("tir.shift_right", a, self.i(n))  # arithmetic: the int type is signed

    def band(self, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        return self._int_op("tir.bitwise_and", a, b)

    def bor(self, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        return self._int_op("tir.bitwise_or", a, b)

    def horner(self, x: E.PrimExpr, coefs: tuple[float, ...]) -> E.PrimExpr:
        """``sum coefs[k] * x^k`` in Horner's form (each step one FMA where the backend contracts)."""
        p = self.f(coefs[-1])
        for c in reversed(coefs[:-1]):
            p = E.Add(E.Mul(p, x), self.f(c))
        return p

    def sign_mask(self) -> E.PrimExpr:
        return self.i(-(1 << (self.t.bits - 1)))

    def fabs(self, x: E.PrimExpr) -> E.PrimExpr:
        return self.float_of(self.band(self.bits(x), self.i((1 << (self.t.bits - 1)) - 1)))

    def copysign(self, y: E.PrimExpr, x: E.PrimExpr) -> E.PrimExpr:
        """``y`` (not negative) with the sign of ``x``."""
        return self.float_of(self.bor(self.bits(y), self.band(self.bits(x), self.sign_mask())))


def _exp(b: _Builder, x: E.PrimExpr) -> E.PrimExpr:
    """exp(x) = 2^n * exp(r), x = n ln2 + r, |r| <= ln2 / 2.

    x is clamped first (NaN passes: Loom's ``Min(c, x)`` is ``c < x ? c : x``), so
    the scale factors never leave the exponent range; 2^n is applied as two
    factors 2^h * 2^(n - h), h = n >> 1, so results that overflow become inf and
    subnormal results are rounded once, by the last multiply.
    """
    k = b.k
    xc = b.bind("x", E.Max(b.f(k.exp_lo), E.Min(b.f(k.exp_hi), x)))
    # Adding 1.5 * 2^mant rounds x / ln2 to the integer n, which then sits in the low bits of t.
    t = b.bind("t", E.Add(E.Mul(xc, b.f(k.log2e)), b.f(k.magic)))
    n_float = b.bind("nf", E.Sub(t, b.f(k.magic)))
    r = b.bind("r", E.Sub(E.Sub(xc, E.Mul(n_float, b.f(k.ln2_hi))), E.Mul(n_float, b.f(k.ln2_lo))))
    p = b.horner(r, (1.0, 1.0, *k.exp))
    n = b.bind("n", E.Sub(b.bits(t), b.i(k.magic_bits)))
    h = b.bind("h", b.shr(n, 1))
    s1 = b.float_of(b.shl(E.Add(h, b.i(k.bias)), k.mant))
    s2 = b.float_of(b.shl(E.Add(E.Sub(n, h), b.i(k.bias)), k.mant))
    return E.Mul(E.Mul(p, s1), s2)


def _log(b: _Builder, x: E.PrimExpr) -> E.PrimExpr:
    """log(x) = e ln2 + log1p(m - 1), x = 2^e m, m in [sqrt(1/2), sqrt(2)); subnormals are scaled up first."""
    k = b.k
    x = b.bind("x", x)
    # The comparison is written out at each use, not bound: a Select of a comparison is a vector blend in C.
    xs = E.Select(E.LT(x, b.f(k.tiny)), E.Mul(x, b.f(k.denormal_scale)), x)
    ix = b.bind("ix", b.bits(xs))
    # e = floor(log2(x / sqrt(1/2))): the exponent field of x's bits less sqrt(1/2)'s.
    e = b.bind("e", b.shr(E.Sub(ix, b.i(k.sqrt_half_bits)), k.mant))
    f = b.bind("f", E.Sub(b.float_of(E.Sub(ix, b.shl(e, k.mant))), b.f(1.0)))  # exact (Sterbenz)
    ef = b.bind("ef", E.Sub(E.Cast(b.t, e), E.Select(E.LT(x, b.f(k.tiny)), b.f(k.denormal_log2), b.f(0.0))))
    log1p = E.Add(E.Mul(E.Mul(f, f), b.horner(f, k.log)), f)
    out: E.PrimExpr = E.Add(E.Mul(ef, b.f(k.ln2_hi)), E.Add(log1p, E.Mul(ef, b.f(k.ln2_lo))))
    out = E.Select(E.EQ(x, b.f(_INF)), x, out)
    out = E.Select(E.EQ(x, b.f(0.0)), b.f(-_INF), out)
    return E.Select(E.GE(x, b.f(0.0)), out, b.f(float("nan")))  # negative and NaN inputs


def _tanh(b: _Builder, x: E.PrimExpr) -> E.PrimExpr:
    """On |x|: |x| + |x|^3 P(x^2) below 0.55, 1 - 2 / (exp(2|x|) + 1) above; then x's sign (-0 stays -0)."""
    x = b.bind("x", x)
    a = b.bind("a", b.fabs(x))
    a2 = b.bind("a2", E.Mul(a, a))
    near = E.Add(E.Mul(E.Mul(a, a2), b.horner(a2, b.k.tanh)), a)
    e = b.bind("e", _exp(b, E.Add(a, a)))
    far = E.Sub(b.f(1.0), E.Div(b.f(2.0), E.Add(e, b.f(1.0))))
    return b.copysign(E.Select(E.LT(a, b.f(0.55)), near, far), x)


def _sigmoid(b: _Builder, x: E.PrimExpr) -> E.PrimExpr:
    """e / (1 + e) with e = exp(-|x|): exp(x) / (1 + exp(x)) for x < 0 (no overflow), 1 / (1 + exp(-x)) else."""
    x = b.bind("x", x)
    e = b.bind("e", _exp(b, E.Sub(b.f(-0.0), b.fabs(x))))
    return E.Div(E.Select(E.LT(x, b.f(0.0)), e, b.f(1.0)), E.Add(e, b.f(1.0)))


def _erf(b: _Builder, x: E.PrimExpr) -> E.PrimExpr:
    """On |x|: |x| + |x| P(x^2) below 1, 1 - exp(-y(|x|)) above, y = -log(erfc) a polynomial in |x| - 1;
    then x's sign."""
    k = b.k
    x = b.bind("x", x)
    a = b.bind("a", E.Min(b.f(k.erf_max), b.fabs(x)))  # erf is +-1 beyond erf_max; NaN passes
    near = E.Add(E.Mul(a, b.horner(E.Mul(a, a), k.erf)), a)
    y = b.horner(E.Sub(a, b.f(1.0)), k.erfc)
    far = E.Sub(b.f(1.0), _exp(b, E.Sub(b.f(-0.0), y)))
    return b.copysign(E.Select(E.LT(a, b.f(1.0)), near, far), x)


def _expand(name: str, build: Callable[[_Builder, E.PrimExpr], E.PrimExpr], x: Any) -> E.PrimExpr:
    x = convert_expr(x)
    t = x.dtype
    if not t.is_float:
        raise LoomTypeError(f"loom.{name} needs a float argument, got {t}; cast it first")
    if t.bits in (32, 64) and t.code == "float":
        b = _Builder(t)
        return b.wrap(build(b, x))
    if t.bits == 16:  # float16 and bfloat16: in float32, rounded once
        wide = DataType("float", 32, t.lanes)
        b = _Builder(wide)
        return E.Cast(t, b.wrap(build(b, E.Cast(wide, x))))
    raise LoomTypeError(f"loom.{name} supports float16, bfloat16, float32 and float64, got {t}")


def fast_exp(x: Any) -> E.PrimExpr:
    """``exp(x)`` as vectorizable IR (range reduction and a polynomial; 1.5 ulp, see the module doc).

    >>> import loom
    >>> str(loom.fast_exp(loom.var("x", "float64")).dtype)
    'float64'
    """
    return _expand("fast_exp", _exp, x)


def fast_log(x: Any) -> E.PrimExpr:
    """``log(x)`` as vectorizable IR (1.5 ulp, float64 2; negative inputs give NaN, zero -inf).

    >>> import loom
    >>> str(loom.fast_log(loom.var("x", "float32")).dtype)
    'float32'
    """
    return _expand("fast_log", _log, x)


def fast_tanh(x: Any) -> E.PrimExpr:
    """``tanh(x)`` as vectorizable IR (2 ulp).

    >>> import loom
    >>> str(loom.fast_tanh(loom.var("x", "float16")).dtype)
    'float16'
    """
    return _expand("fast_tanh", _tanh, x)


def fast_sigmoid(x: Any) -> E.PrimExpr:
    """``1 / (1 + exp(-x))`` as vectorizable IR (2.5 ulp, float64 3; subnormal results included).

    >>> import loom
    >>> str(loom.fast_sigmoid(loom.var("x", "float32x8")).dtype)
    'float32x8'
    """
    return _expand("fast_sigmoid", _sigmoid, x)


def fast_erf(x: Any) -> E.PrimExpr:
    """``erf(x)`` as vectorizable IR (1.5 ulp).

    >>> import loom
    >>> str(loom.fast_erf(loom.var("x", "float64")).dtype)
    'float64'
    """
    return _expand("fast_erf", _erf, x)


#: The op each fast function replaces under a target's ``-fast_math`` (see the llvm and c intrinsic rules).
EXPANSIONS: dict[str, Callable[[Any], E.PrimExpr]] = {
    "tir.exp": fast_exp, "tir.log": fast_log, "tir.tanh": fast_tanh, "tir.sigmoid": fast_sigmoid, "tir.erf": fast_erf,
}
