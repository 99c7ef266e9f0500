"""Integer arithmetic with the IR's semantics, and interval helpers.

The IR's integers wrap around at their dtype's width (two's complement for
signed types).  ``FloorDiv``/``FloorMod`` are Python's ``//`` and ``%``;
``Div``/``Mod`` on integers truncate toward zero.  Intervals here are pairs of
exact Python ints; the analyses decide whether an interval "fits" a dtype,
which is how they prove that a computation cannot overflow.

An analyzer made with ``assume_no_overflow`` takes C's view of *signed*
arithmetic instead (TVM's view of index arithmetic): it never overflows, so an
exact interval that leaves the dtype is cut to the dtype rather than dismissed
(:func:`exact_interval`).  Unsigned arithmetic and conversions still wrap.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir import expr as E
from ..ir.dtype import DataType

__all__ = [
    "int_range", "wrap", "signed_wrap", "fits", "trunc_div", "trunc_mod", "fold_int",
    "is_int_type", "Interval", "iv_add", "iv_sub", "iv_mul", "iv_div", "divides_wrap", "exact_interval",
]

Interval = tuple[int, int]


def is_int_type(t: DataType) -> bool:
    """True for signed or unsigned integers of any lane count (not bool)."""
    return t.code in ("int", "uint")


def int_range(t: DataType) -> Interval:
    """The values a (scalar or per-lane) integer or bool dtype can hold."""
    if t.is_bool:
        return 0, 1
    if t.is_uint:
        return 0, (1 << t.bits) - 1
    return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1


def wrap(v: int, t: DataType) -> int:
    """``v`` reduced to ``t`` as the hardware does (modulo 2**bits)."""
    if t.is_bool:
        return int(v != 0)
    v &= (1 << t.bits) - 1
    if t.is_int and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def signed_wrap(v: int, bits: int) -> int:
    """The representative of ``v`` modulo 2**bits in the signed range."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def fits(lo: int, hi: int, t: DataType) -> bool:
    """True when every value in ``[lo, hi]`` is representable in ``t``."""
    tlo, thi = int_range(t)
    return tlo <= lo and hi <= thi


def exact_interval(lo: int, hi: int, t: DataType, assume_no_overflow: bool) -> Optional[Interval]:
    """The values an arithmetic result with exact interval ``[lo, hi]`` takes in ``t``.

    ``[lo, hi]`` when it fits; None when it may wrap (the wrapped value could be
    anything).  With ``assume_no_overflow`` a signed result never wraps, so it is
    the part of ``[lo, hi]`` inside ``t`` (None when there is none: the result
    cannot be computed without overflowing).
    """
    tlo, thi = int_range(t)
    if tlo <= lo and hi <= thi:
        return lo, hi
    if assume_no_overflow and t.code == "int":
        lo, hi = max(lo, tlo), min(hi, thi)
        return (lo, hi) if lo <= hi else None
    return None


def divides_wrap(c: int, t: DataType) -> bool:
    """True when ``c`` divides 2**bits, so residues modulo ``c`` survive wrap-around."""
    return 0 < c <= (1 << t.bits) and c & (c - 1) == 0


def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def trunc_mod(a: int, b: int) -> int:
    return a - trunc_div(a, b) * b


_FOLD: dict[type, Callable[[int, int], int]] = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b,
    E.FloorMod: lambda a, b: a % b,
    E.Div: trunc_div,
    E.Mod: trunc_mod,
    E.Min: min,
    E.Max: max,
}


def fold_int(op: type, a: int, b: int, t: DataType) -> Optional[int]:
    """Evaluate ``a op b`` in dtype ``t``; None for a division by zero (undefined)."""
    fn = _FOLD[op]
    if b == 0 and op in (E.FloorDiv, E.FloorMod, E.Div, E.Mod):
        return None
    return wrap(fn(a, b), t)


# ---------------------------------------------------------------------------
# Exact interval arithmetic (no wrap-around: callers check ``fits``).


def iv_add(a: Interval, b: Interval) -> Interval:
    return a[0] + b[0], a[1] + b[1]


def iv_sub(a: Interval, b: Interval) -> Interval:
    return a[0] - b[1], a[1] - b[0]


def iv_mul(a: Interval, b: Interval) -> Interval:
    corners = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(corners), max(corners)


def iv_div(a: Interval, b: Interval, fn) -> Optional[Interval]:
    """``fn(a, b)`` over the intervals, for a division ``fn`` monotone in each
    argument on each sign of ``b`` (floor and truncated division).  Division by
    zero is undefined, so zero is left out of ``b``; None when ``b`` is ``{0}``.
    """
    parts = []
    if b[0] <= -1:
        parts.append((b[0], min(b[1], -1)))
    if b[1] >= 1:
        parts.append((max(b[0], 1), b[1]))
    if not parts:
        return None
    vals = [fn(x, y) for lo, hi in parts for x in a for y in (lo, hi)]
    return min(vals), max(vals)
