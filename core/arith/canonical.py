"""Canonical form of integer index expressions: ``sum(coeff * atom) + const``.

Addition, subtraction and multiplication modulo ``2**bits`` form a ring, so
collecting like terms is exact even when the arithmetic wraps around:
``(x + y) - x`` is ``y`` for every ``x`` and ``y``.  Atoms are variables and
everything that is not ring arithmetic (products of non-constants, min, max,
select, loads, and floordiv/floormod whose operands are themselves canonical).
Terms are sorted by coefficient magnitude, then by :func:`order_key`, so
equal sums print the same.

Division is not a ring operation.  ``floordiv(c*Q + R, c) = Q + floordiv(R, c)``
holds for the *mathematical* values, so the split is made only when bounds
prove that neither ``c*Q + R`` nor ``R`` can overflow.  ``floormod`` splits
the same way, and unconditionally when ``c`` divides ``2**bits`` (residues
modulo such ``c`` survive wrap-around); inside it, a remainder ``u % c1`` with
``c | c1`` counts as ``u``.  Truncated division of a sum that may be negative
is split only when ``c`` divides every term (the division is exact).

>>> import loom
>>> from loom.arith import canonical_simplify
>>> x, y = loom.var("x"), loom.var("y")
>>> str(canonical_simplify((x * 8 + y) - (y + 8 * x)))
'0'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir import expr as E
from ..ir.functor import substitute
from ..ir.reduce import Reduce
from ._exprkey import map_operands, order_key, struct_key
from ._intmath import Interval, divides_wrap, exact_interval, fits, is_int_type, signed_wrap, trunc_div, wrap
from .reduce_simplify import simplify_reduce

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["CanonicalSimplifier", "SumForm", "inlinable_let_value", "taken_branch"]


class SumForm:
    """A mutable ``sum(coeff * atom) + const`` with coefficients modulo ``2**bits``.

    Coefficients and the constant are kept as signed representatives; ``wrapped``
    records that one of them was reduced, so the sum equals the mathematical value
    only modulo ``2**bits`` (``x - INT_MIN`` is kept as ``x + INT_MIN``).
    """

    __slots__ = ("dtype", "terms", "const", "wrapped")

    def __init__(self, dtype: Any, const: int = 0) -> None:
        self.dtype = dtype
        self.terms: dict[Any, list[Any]] = {}  # struct key -> [atom, coeff]
        self.wrapped = False
        self.const = self._reduce(const)

    def derived(self, const: int = 0) -> SumForm:
        """An empty sum of this dtype, made from this one (so it keeps ``wrapped``)."""
        out = SumForm(self.dtype, const)
        out.wrapped = out.wrapped or self.wrapped
        return out

    def _reduce(self, v: int) -> int:
        r = signed_wrap(v, self.dtype.bits)
        self.wrapped = self.wrapped or r != v
        return r

    @staticmethod
    def atom(e: E.PrimExpr, coeff: int = 1) -> SumForm:
        s = SumForm(e.dtype)
        s.add_term(e, coeff)
        return s

    @property
    def is_const(self) -> bool:
        return not self.terms

    def add_term(self, atom: E.PrimExpr, coeff: int, key: Any = None) -> None:
        key = struct_key(atom) if key is None else key
        slot = self.terms.get(key)
        if slot is None:
            slot = self.terms[key] = [atom, 0]
        slot[1] = self._reduce(slot[1] + coeff)
        if slot[1] == 0:
            del self.terms[key]

    def add(self, other: SumForm, scale: int = 1) -> SumForm:
        for key, (atom, k) in other.terms.items():
            self.add_term(atom, k * scale, key)
        self.wrapped = self.wrapped or other.wrapped
        self.const = self._reduce(self.const + other.const * scale)
        return self

    def scaled(self, k: int) -> SumForm:
        return SumForm(self.dtype).add(self, k)

    def split(self, c: int) -> tuple[SumForm, SumForm]:
        """``(Q, R)`` with ``self == c*Q + R`` term by term; R keeps what ``c`` does not divide."""
        q, r = self.derived(), self.derived()
        for key, (atom, k) in self.terms.items():
            if k % c == 0:
                q.add_term(atom, k // c, key)
            else:
                r.add_term(atom, k, key)
        q.const, r.const = self.const // c, self.const % c
        return q, r


_DIVMOD_PAIRS = ((E.FloorMod, E.FloorDiv), (E.Mod, E.Div))
_DECIDED = (E.CmpOp, E.And, E.Or, E.Not, E.Select)


def inlinable_let_value(value: E.PrimExpr) -> bool:
    """True when a let bound to ``value`` (a constant, or a variable that is not a
    handle) is better substituted into its body and dropped, as TVM's Simplify does."""
    if isinstance(value, (E.IntImm, E.FloatImm)):
        return True
    return isinstance(value, E.Var) and not value.dtype.is_handle


def taken_branch(e: E.PrimExpr) -> Optional[E.PrimExpr]:
    """The branch of ``if_then_else(c, t, f)`` with a constant scalar ``c`` (only that
    side is evaluated), else None."""
    if (isinstance(e, E.Call) and getattr(e.op, "name", None) == "tir.if_then_else"
            and isinstance(e.args[0], E.IntImm) and e.args[0].dtype.lanes == 1):
        return e.args[1] if e.args[0].value else e.args[2]
    return None


def _quotient(div: type[E.BinaryOp], u: E.PrimExpr, c: E.PrimExpr) -> E.PrimExpr:
    """``div(u, c)`` as the canonical form writes it: ``(v // c0) // c`` is ``v // (c0*c)``
    for positive constants (floored and truncated division alike)."""
    if (type(u) is div and isinstance(u.b, E.IntImm) and isinstance(c, E.IntImm)
            and u.b.value > 0 and c.value > 0 and fits(u.b.value * c.value, u.b.value * c.value, c.dtype)):
        return div(u.a, E.IntImm(c.dtype, u.b.value * c.value))
    return div(u, c)


def _const_divisor(e: E.PrimExpr) -> int:
    """``c`` for ``u // c`` or ``truncdiv(u, c)`` with a constant ``c``, else 0."""
    if isinstance(e, (E.FloorDiv, E.Div)) and isinstance(e.b, E.IntImm):
        return e.b.value
    return 0


class CanonicalSimplifier:
    """Rewrites scalar integer arithmetic into canonical sums (see module docstring)."""

    def __init__(self, analyzer: Analyzer) -> None:
        self.an = analyzer

    def __call__(self, e: E.PrimExpr) -> E.PrimExpr:
        return self.visit(e)

    def visit(self, e: E.PrimExpr) -> E.PrimExpr:
        if is_int_type(e.dtype) and e.dtype.lanes == 1:
            return self.render(self.to_sum(e))
        return self._rebuild(e)

    # -- expression -> sum -------------------------------------------------
    def to_sum(self, e: E.PrimExpr) -> SumForm:
        t = e.dtype
        if isinstance(e, E.IntImm):
            return SumForm(t, e.value)
        if isinstance(e, E.Add):
            return self.to_sum(e.a).add(self.to_sum(e.b))
        if isinstance(e, E.Sub):
            return self.to_sum(e.a).add(self.to_sum(e.b), -1)
        if isinstance(e, E.Mul):
            return self._mul(e)
        if isinstance(e, (E.FloorDiv, E.Div, E.FloorMod, E.Mod)):
            return self._divmod(e)
        if isinstance(e, E.Var):
            bound = self.an._subst.get(e)
            return self.to_sum(bound) if bound is not None else SumForm.atom(e)
        return SumForm.atom(self._rebuild(e))

    def _mul(self, e: E.Mul) -> SumForm:
        a, b = self.to_sum(e.a), self.to_sum(e.b)
        if b.is_const:
            return a.scaled(b.const)
        if a.is_const:
            return b.scaled(a.const)
        (ra, ka), (rb, kb) = self._factor(a), self._factor(b)
        if order_key(rb) < order_key(ra):
            ra, rb = rb, ra
        return SumForm.atom(E.Mul(ra, rb), ka * kb)

    def _factor(self, s: SumForm) -> tuple[E.PrimExpr, int]:
        """``(atom, k)`` for a single term ``k * atom``, else ``(render(s), 1)``."""
        if s.const == 0 and len(s.terms) == 1:
            atom, k = next(iter(s.terms.values()))
            return atom, k
        return self.render(s), 1

    def _divmod(self, e: E.BinaryOp) -> SumForm:
        # Inside a select branch the divisor is simplified without the branch's condition.
        a, b = self.to_sum(e.a), self.an._rewrite._visit_divisor(e.b, self.visit)
        c = b.value if isinstance(b, E.IntImm) else None
        is_div = isinstance(e, (E.FloorDiv, E.Div))
        if c in (1, -1):
            # x // 1 == x and x // -1 == -x (INT_MIN wraps to itself both ways); x % +-1 == 0
            return a.scaled(c) if is_div else SumForm(e.dtype)
        floor = isinstance(e, (E.FloorDiv, E.FloorMod))
        if c is not None and c > 0 and is_div:
            inner = self._rounded_quotient(a, c, E.FloorDiv if floor else E.Div)
            if inner is not None:
                return inner
        if c is not None and c > 0 and (floor or self._nonneg(a)):  # truncation == flooring for a >= 0
            out = self._split_div(a, c) if is_div else self._split_mod(a, c)
            if out is not None:
                return out
            op: type[E.BinaryOp] = E.FloorDiv if is_div else E.FloorMod
        else:
            op = type(e)
            if c is not None and c > 0:
                out = self._trunc_divmod(a, c, is_div)
                if out is not None:
                    return out
            elif c is None and not floor and self._nonneg(a) and self.an.const_int_bound(b).min_value > 0:
                op = E.FloorDiv if is_div else E.FloorMod  # truncation == flooring for a >= 0 < b
        return SumForm.atom(op(self.render(a), b))

    def _rounded_quotient(self, s: SumForm, c: int, div: type[E.BinaryOp]) -> Optional[SumForm]:
        """``(u // c1 * c1) // c`` is ``u // c`` when ``c1`` divides ``c`` (both positive;
        truncated division alike): rounding down to a multiple of ``c1`` first changes nothing."""
        if s.const != 0 or len(s.terms) != 1:
            return None
        atom, k = next(iter(s.terms.values()))
        if type(atom) is not div or not isinstance(atom.b, E.IntImm):
            return None
        c1 = atom.b.value
        if c1 <= 0 or k != c1 or c % c1 != 0 or self._sum_interval(s) is None:
            return None
        return self._divmod(div(atom.a, E.IntImm(s.dtype, c)))

    def _trunc_divmod(self, s: SumForm, c: int, is_div: bool) -> Optional[SumForm]:
        """Truncated ``s / c`` or remainder (``c > 0``) of a sum that may be negative.

        When ``c`` divides every coefficient and the constant the division is
        exact: the quotient is ``s / c`` and the remainder 0.  When bounds put
        every value of ``s`` in one truncation step, the quotient is that
        constant (and the remainder ``s`` itself when the step is 0).
        """
        iv = self._sum_interval(s)
        if s.const % c == 0 and all(k % c == 0 for _, k in s.terms.values()):
            if not is_div:
                # a multiple of c, also after wrapping when c divides 2**bits
                return SumForm(s.dtype) if iv is not None or divides_wrap(c, s.dtype) else None
            return s.split(c)[0] if iv is not None else None
        if iv is None or trunc_div(iv[0], c) != trunc_div(iv[1], c):
            return None
        q = trunc_div(iv[0], c)
        if is_div:
            return SumForm(s.dtype, q)
        return s if q == 0 else None

    def _split_div(self, s: SumForm, c: int) -> Optional[SumForm]:
        q, r = s.split(c)
        r_iv = self._sum_interval(r)
        if self._sum_interval(s) is None or r_iv is None:
            return None
        lo, hi = r_iv
        if lo // c == hi // c:
            return q.add(SumForm(s.dtype, lo // c))
        return q.add(SumForm.atom(E.FloorDiv(self.render(r), E.IntImm(s.dtype, c))))

    def _split_mod(self, s: SumForm, c: int) -> Optional[SumForm]:
        s = self._strip_inner_mods(s, c)
        q, r = s.split(c)
        r_iv = self._sum_interval(r)
        if not divides_wrap(c, s.dtype) and (self._sum_interval(s) is None or r_iv is None):
            return None
        if r_iv is not None and r_iv[0] >= 0 and r_iv[1] < c:
            return r
        return SumForm.atom(E.FloorMod(self.render(r), E.IntImm(s.dtype, c)))

    def _strip_inner_mods(self, s: SumForm, c: int) -> SumForm:
        """``s`` with each term ``k*(u % c1)`` (floored or truncated, ``c`` dividing ``c1``)
        written ``k*u``: the two differ by a multiple of ``c1``, so the residue modulo
        ``c`` is the same, when ``c`` divides ``2**bits`` or nothing wraps.
        ``((x - 466036) % 24528 - 24512) % 16`` is ``(x + 12) % 16``."""
        exact = not divides_wrap(c, s.dtype)  # then every sum involved must fit
        out, changed = s.derived(s.const), False
        for key, (atom, k) in s.terms.items():
            if type(atom) in (E.FloorMod, E.Mod) and isinstance(atom.b, E.IntImm) and atom.b.value % c == 0:
                inner = self.to_sum(atom.a)
                if not exact or self._sum_interval(inner) is not None:
                    out.add(inner, k)
                    changed = True
                    continue
            out.add_term(atom, k, key)
        if not changed or (exact and (self._sum_interval(s) is None or self._sum_interval(out) is None)):
            return s
        return out

    def _sum_interval(self, s: SumForm) -> Optional[Interval]:
        """The exact interval of the sum of the atoms' actual values, or None
        when that may leave the dtype (then the wrapped value is something else)."""
        lo = hi = s.const
        for atom, k in s.terms.values():
            alo, ahi = self.an._interval(atom)
            lo, hi = lo + min(k * alo, k * ahi), hi + max(k * alo, k * ahi)
        # A reduced constant or coefficient: the sum is the value only modulo 2**bits.
        return exact_interval(lo, hi, s.dtype, self.an.assume_no_overflow and not s.wrapped)

    def _nonneg(self, s: SumForm) -> bool:
        iv = self._sum_interval(s)
        return iv is not None and iv[0] >= 0

    # -- sum -> expression -------------------------------------------------
    def _merge_divmod(self, s: SumForm) -> None:
        """``k*(x // y)*y + k*(x % y)`` is ``k*x`` (exact, also when wrapping).

        With a constant ``y == c`` the quotient is the atom ``x // c`` with
        coefficient ``k*c``; otherwise it is the product atom ``(x // y) * y``.
        """
        merged = True
        while merged:  # a merge can make the next one possible: x//6*6 + x//3%2*3 + x%3
            merged = False
            for key, (atom, k) in list(s.terms.items()):
                for mod_op, div_op in _DIVMOD_PAIRS:
                    if type(atom) is not mod_op or key not in s.terms:
                        continue
                    quot = _quotient(div_op, atom.a, atom.b)
                    if isinstance(atom.b, E.IntImm):
                        wanted = [(struct_key(quot), signed_wrap(k * atom.b.value, s.dtype.bits))]
                    else:
                        wanted = [(struct_key(E.Mul(p, q)), k) for p, q in ((quot, atom.b), (atom.b, quot))]
                    for dkey, coeff in wanted:
                        other = s.terms.get(dkey)
                        if other is not None and other[1] == coeff:
                            del s.terms[key], s.terms[dkey]
                            s.add(self.to_sum(atom.a), k)
                            merged = True
                            break

    def expand_divs(self, s: SumForm) -> SumForm:
        """``s`` with each ``k*(u // c)`` (``c > 0`` dividing ``k``) written ``(k/c)*(u - u % c)``.

        A ring identity (``c*(u // c) + u % c == u`` for every ``u``, and the
        same for truncated division), so the result equals ``s`` even with
        wrap-around; it can cancel ``u``'s terms.
        """
        out = s.derived(s.const)
        for key, (atom, k) in s.terms.items():
            c = _const_divisor(atom)
            if c > 0 and k % c == 0:
                rem = E.FloorMod if isinstance(atom, E.FloorDiv) else E.Mod
                out.add(self.to_sum(atom.a), k // c)
                out.add(self._divmod(rem(atom.a, atom.b)), -(k // c))
            else:
                out.add_term(atom, k, key)
        return out

    def _has_div_term(self, s: SumForm) -> bool:
        return any(_const_divisor(a) > 0 and k % _const_divisor(a) == 0 for a, k in s.terms.values())

    def render(self, s: SumForm) -> E.PrimExpr:
        t = s.dtype
        self._merge_divmod(s)
        if self._has_div_term(s):  # x - (x // 3) * 3 is x % 3: keep the form with fewer terms
            expanded = self.expand_divs(s)
            if len(expanded.terms) <= len(s.terms):  # as many terms only when one cancelled
                s = expanded
        # Larger coefficients first (row-major index order: i * 16 + j), then by name.
        items = sorted(s.terms.values(), key=lambda p: (-abs(p[1]), order_key(p[0])))
        pos = [(a, k) for a, k in items if k > 0]
        neg = [(a, -k) for a, k in items if k < 0]
        c = s.const
        out: Optional[E.PrimExpr] = None
        for a, k in pos:
            term = a if k == 1 else E.Mul(a, E.IntImm(t, k))
            out = term if out is None else E.Add(out, term)
        if out is None and neg:
            if c > 0:
                out, c = E.IntImm(t, c), 0  # 5 - x
            else:
                a, k = neg.pop(0)
                out = E.Mul(a, E.IntImm(t, wrap(-k, t)))  # x * -1
        for a, k in neg:
            assert out is not None  # set above when neg is not empty
            if fits(k, k, t):
                out = E.Sub(out, a if k == 1 else E.Mul(a, E.IntImm(t, k)))
            else:  # the magnitude of INT_MIN does not fit: add the coefficient itself
                out = E.Add(out, E.Mul(a, E.IntImm(t, wrap(-k, t))))
        if out is None:
            return E.IntImm(t, wrap(c, t))
        if c > 0:
            return E.Add(out, E.IntImm(t, c))
        if c < 0:
            return E.Sub(out, E.IntImm(t, -c)) if fits(-c, -c, t) else E.Add(out, E.IntImm(t, wrap(c, t)))
        return out

    # -- everything else -----------------------------------------------------
    def _rebuild(self, e: E.PrimExpr) -> E.PrimExpr:
        if isinstance(e, Reduce):
            return simplify_reduce(e, self.an, self.visit)
        if isinstance(e, E.Let):
            value = self.visit(e.value)
            if inlinable_let_value(value):
                return self.visit(substitute(e.body, {e.var: value}))
            with self.an._let_scope(e.var, value):
                body = self.visit(e.body)
            return e.with_(value=value, body=body)
        if isinstance(e, E.Select):
            c = self.visit(e.condition)
            if isinstance(c, E.IntImm):  # only the taken branch matters (both are defined)
                return self.visit(e.true_value if c.value else e.false_value)
            rw = self.an._rewrite  # each branch under its condition, as the rewrite simplifier does
            with rw._local(c):
                t = self.visit(e.true_value)
            with rw._local(rw.negate(c)):
                f = self.visit(e.false_value)
            same = c is e.condition and t is e.true_value and f is e.false_value
            out = e if same else e.with_(condition=c, true_value=t, false_value=f)
        else:
            out = map_operands(e, self.visit)
            taken = taken_branch(out)
            if taken is not None:
                return taken
        if isinstance(out, _DECIDED):  # as in TVM, comparisons and logic also get the rewrite rules
            return self.an._rewrite._post(out)
        return out
