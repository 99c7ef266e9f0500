"""GNU C vector forms of nodes the shared C-style renderer writes lane by lane.

The base templates (:mod:`loom.codegen.cstyle_ops`) render shifts, bit
operations, ``Select`` and casts of vectors as a loop over the lanes, which the
C compiler vectorizes again only sometimes.  On whole GCC vectors (a power of
two of 32- or 64-bit lanes) the C dialect writes them as vector operations:

* shifts and bit operations with GCC's vector operators (the shift count is
  masked to the width, as the IR says; ``<<`` of signed lanes is defined in GNU C);
* ``Select`` of a comparison of lanes as wide as the values: the comparison is a
  lane mask (-1 or 0), and the result is blended through it;
* casts between int and float lanes of one width with ``__builtin_convertvector``.

Everything else keeps the base template.  These are what the vectorized math of
:mod:`loom.ir.fast_math` is made of, so ``c -fast_math`` stays vector code.

>>> import loom
>>> from loom.ir import BufferStore, PrimFunc, Ramp
>>> from loom_c.codegen import generate
>>> A = loom.decl_buffer((8,), "int32", name="A")
>>> f = PrimFunc([A.data], BufferStore(A, A[Ramp(0, 1, 8)] >> 3, [Ramp(0, 1, 8)]), buffer_map={A.data: A})
>>> "_t1; }) >> ((int32x8){3, 3, 3, 3, 3, 3, 3, 3} & 31))" in generate(f).text
True
"""

from __future__ import annotations

from typing import Any

from loom.codegen.cstyle_ops import BASE_CODE_FOR_OP, Template
from loom.ir import expr as E
from loom.ir.dtype import DataType

__all__ = ["VECTOR_CODE_FOR_OP"]

_BIT_SYMBOLS = {"tir.shift_left": "<<", "tir.shift_right": ">>", "tir.bitwise_and": "&", "tir.bitwise_or": "|",
                "tir.bitwise_xor": "^"}
_CMP_SYMBOLS: dict[type, str] = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}


def _whole(t: DataType) -> bool:
    """A whole GCC vector of 32- or 64-bit lanes (no padding lanes)."""
    return t.lanes > 1 and t.lanes & (t.lanes - 1) == 0 and t.bits in (32, 64) and not t.is_bool


def _bitwise(name: str) -> Template:
    base = BASE_CODE_FOR_OP[name]

    def render(r: Any, n: E.Call) -> str:
        t = n.dtype
        if not (_whole(t) and t.is_integer and all(a.dtype == t for a in n.args)):
            return base(r, n)
        if name == "tir.bitwise_not":
            return f"(~{r.expr(n.args[0])})"
        a, b = (r.expr(x) for x in n.args)
        if name in ("tir.shift_left", "tir.shift_right"):
            b = f"({b} & {t.bits - 1})"
        return f"({a} {_BIT_SYMBOLS[name]} {b})"

    return render


def _select(r: Any, n: E.Select) -> str:
    c, t = n.condition, n.dtype
    sym = _CMP_SYMBOLS.get(type(c))
    if sym is None or not isinstance(c, E.CmpOp) or not (_whole(t) and _whole(c.a.dtype) and c.a.dtype.bits == t.bits):
        return BASE_CODE_FOR_OP[E.Select](r, n)
    ct, a, b, x, y, m = r.type_name(t), r.tmp(), r.tmp(), r.tmp(), r.tmp(), r.tmp()
    at = r.type_name(c.a.dtype)
    # GNU C has no vector ?: in C; a comparison is a lane mask (-1/0) as wide as the values: blend through it.
    return (f"({{ {at} {a} = {r.expr(c.a)}; {at} {b} = {r.expr(c.b)}; {ct} {x} = {r.expr(n.true_value)}; "
            f"{ct} {y} = {r.expr(n.false_value)}; __typeof__({a} {sym} {b}) {m} = {a} {sym} {b}; "
            f"({ct})(((__typeof__({m})){x} & {m}) | ((__typeof__({m})){y} & ~{m})); }})")


def _cast(r: Any, n: E.Cast) -> str:
    src, dst = n.value.dtype, n.dtype
    if _whole(src) and _whole(dst) and src.bits == dst.bits and src != dst:
        return f"__builtin_convertvector({r.expr(n.value)}, {r.type_name(dst)})"
    return BASE_CODE_FOR_OP[E.Cast](r, n)


VECTOR_CODE_FOR_OP: dict[Any, Template] = {
    **{name: _bitwise(name) for name in (*_BIT_SYMBOLS, "tir.bitwise_not")},
    E.Select: _select,
    E.Cast: _cast,
}
