"""The template table and C preamble of the C-style renderer (:mod:`loom.codegen.cstyle`).

``BASE_CODE_FOR_OP`` maps an IR node class, or an intrinsic op name, to a
template ``(renderer, node) -> C text``.  Templates build on the renderer's
helpers (``expr``, ``elementwise``, ``wrap``, ``math_name``, ...), so a dialect
replaces single entries without touching the rest.

>>> import loom
>>> from loom.codegen import CStyleRenderer
>>> r = CStyleRenderer()
>>> BASE_CODE_FOR_OP[loom.ir.IntImm](r, loom.const(-5))
'(-5)'
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

from ..errors import LoomError
from ..ir import expr as E
from ..ir.dtype import DataType
from ..runtime.symbols import is_reserved_name

if TYPE_CHECKING:
    from .cstyle import CStyleRenderer

__all__ = ["BASE_CODE_FOR_OP", "PREAMBLE", "CodegenError", "Template", "sanitize", "is_simple", "LIBM_FUNCTIONS",
           "LIBC_FUNCTIONS"]

Template = Callable[["CStyleRenderer", Any], str]


class CodegenError(LoomError):
    """The IR holds something the renderer cannot express in its dialect."""


_C_WORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while "
    "bool args error main free malloc memcpy".split())


def sanitize(name: str) -> str:
    """A C identifier for ``name``: never empty, never starting with ``_``, never a keyword nor a
    name the C library, its headers or the runtime use (:func:`loom.runtime.symbols.is_reserved_name`).

    >>> [sanitize(n) for n in ("i.outer", "int", "linux", "NAN", "A")]
    ['i_outer', 'v_int', 'v_linux', 'v_NAN', 'A']
    """
    out = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    if out[0].isdigit() or out[0] == "_" or out in _C_WORDS or is_reserved_name(out):
        out = "v_" + out.lstrip("_")
    return out


def is_simple(text: str) -> bool:
    """An identifier or a literal: cheap and safe to repeat."""
    return re.fullmatch(r"\(?-?[\w.]+\)?", text) is not None


# ---------------------------------------------------------------------------
# templates: one per node class / op; ``r`` is the renderer, ``n`` the node


def _arith(sym: str) -> Template:
    return lambda r, n: r.arith(n, sym)


def _cmp(sym: str) -> Template:
    return lambda r, n: r.elementwise(n.dtype, [n.a, n.b], lambda a, b: f"({a} {sym} {b})")


def _minmax(sym: str) -> Template:
    def render(r: CStyleRenderer, n: Any) -> str:
        if n.dtype.lanes == 1 or n.dtype.is_bool:
            return r.elementwise(n.dtype, [n.a, n.b], lambda a, b: f"({a} {sym} {b} ? {a} : {b})", dup=True)
        # GNU C has no vector ?: in C, but a vector comparison is a lane mask (-1/0) of the same width:
        # blend through it, which compiles to vmaxps/vminps or a blend instead of a per-lane loop.
        t, x, y, m = r.type_name(n.dtype), r.tmp(), r.tmp(), r.tmp()
        return (f"({{ {t} {x} = {r.expr(n.a)}; {t} {y} = {r.expr(n.b)}; __typeof__({x} {sym} {y}) {m} = {x} {sym} {y}; "
                f"({t})(((__typeof__({m})){x} & {m}) | ((__typeof__({m})){y} & ~{m})); }})")

    return render


def _floor_op(kind: str) -> Template:
    def render(r: CStyleRenderer, n: Any) -> str:
        t = n.dtype.element_of()
        if t.is_float:
            fl = r.math_name("floor", t)
            if kind == "div":
                return r.elementwise(n.dtype, [n.a, n.b], lambda a, b: f"{fl}({a} / {b})")
            body = lambda a, b: f"({a} - {fl}({a} / {b}) * {b})"  # noqa: E731
            return r.elementwise(n.dtype, [n.a, n.b], body, dup=True)
        if t.is_uint or t.is_bool:  # truncating and floor division agree
            sym = "/" if kind == "div" else "%"
            lane = lambda a, b: r.wrap(t, f"{a} {sym} {b}")  # noqa: E731
        else:
            ct = r.type_name(t)
            lane = lambda a, b: f"(({ct})loom_floor{kind}({a}, {b}))"  # noqa: E731
        # A zero divisor is checked first where the dialect can fail (C traps on it).
        return r.int_division(n, lane, lambda: r.elementwise(n.dtype, [n.a, n.b], lane))
    return render


def _unary(template: Callable[[CStyleRenderer, DataType, str], str]) -> Template:
    return lambda r, n: r.elementwise(n.dtype, [n.args[0]], lambda a: template(r, n.dtype.element_of(), a), dup=True)


def _bitwise(name: str) -> Template:
    """Shifts modulo the width (left shifts of unsigned bits: no signed overflow) and bit operations."""

    def render(r: CStyleRenderer, n: E.Call) -> str:
        t = n.dtype.element_of()
        ct, ut = r.type_name(t), f"uint{t.bits}_t"
        table: dict[str, Callable[..., str]] = {
            "tir.shift_left": lambda a, b: f"(({ct})(({ut})({a}) << (({b}) & {t.bits - 1})))",
            "tir.shift_right": lambda a, b: f"(({ct})(({a}) >> (({b}) & {t.bits - 1})))",
            "tir.bitwise_and": lambda a, b: f"(({ct})(({a}) & ({b})))",
            "tir.bitwise_or": lambda a, b: f"(({ct})(({a}) | ({b})))",
            "tir.bitwise_xor": lambda a, b: f"(({ct})(({a}) ^ ({b})))",
            "tir.bitwise_not": lambda a: f"(({ct})~({a}))",
        }
        return r.elementwise(n.dtype, list(n.args), table[name])

    return render


def _popcount(r: CStyleRenderer, t: DataType, a: str) -> str:
    fn = "__builtin_popcountll" if t.bits == 64 else "__builtin_popcount"
    return f"(({r.type_name(t)}){fn}((uint{t.bits}_t){a}))"


def _abs(r: CStyleRenderer, t: DataType, a: str) -> str:
    if t.is_float:
        return f"{r.math_name('fabs', t)}({a})"
    return a if t.is_uint or t.is_bool else r.wrap(t, f"{a} < 0 ? -{a} : {a}")


def _if_then_else(r: CStyleRenderer, n: E.Call) -> str:
    if n.dtype.lanes == 1:  # only the taken side runs
        c, t, f = (r.expr(a) for a in n.args)
        return f"({c} ? {t} : {f})"
    if n.args[0].dtype.lanes == 1:  # one choice for every lane: still only the taken side runs
        out = r.tmp()
        c, t, f = (r.expr(a) for a in n.args)
        return f"({{ {r.type_name(n.dtype)} {out}; if ({c}) {out} = {t}; else {out} = {f}; {out}; }})"
    return r.elementwise(n.dtype, list(n.args), lambda c, t, f: f"({c} ? {t} : {f})")


def _reinterpret(r: CStyleRenderer, n: E.Call) -> str:
    src, dst = r.tmp(), r.tmp()
    return (f"({{ {r.type_name(n.args[0].dtype)} {src} = {r.expr(n.args[0])}; {r.type_name(n.dtype)} {dst}; "
            f"memcpy(&{dst}, &{src}, sizeof {dst}); {dst}; }})")


def _extern(r: CStyleRenderer, n: E.Call) -> str:
    name, *args = n.args
    if not isinstance(name, E.StringImm):
        raise CodegenError(f"call_extern needs a function name (StringImm) first, got {type(name).__name__}")
    clash = next((f for f, symbol in r.functions.items() if symbol == name.value), None)
    if clash is not None:
        raise CodegenError(f"the external C function {name.value!r} has the symbol of the module's function "
                           f"{clash!r}: rename one of them")
    if name.value not in r.header_functions:
        types = ", ".join(r.type_name(a.dtype.element_of()) for a in args) or "void"
        r.externs.setdefault(name.value, f"extern {r.type_name(n.dtype.element_of())} {name.value}({types});")
    # C functions take scalars: vector operands are passed lane by lane.
    return r.elementwise(n.dtype, args, lambda *a: f"{name.value}({', '.join(a)})")


def _access_ptr(r: CStyleRenderer, n: E.Call) -> str:
    # tvm_access_ptr(type_annotation(t), data, offset, extent, mask): the address of element ``offset`` (of t).
    annotation, data, offset = n.args[0], n.args[1], n.args[2]
    return f"((void *)(({r.type_name(annotation.dtype)} *)({r.expr(data)}) + ({r.expr(offset)})))"


def _shuffle(r: CStyleRenderer, n: E.Shuffle) -> str:
    """Lane by lane: each vector bound to a temporary, each picked lane read from its vector (a scalar is one lane)."""
    decls, lanes = [], []
    for v in n.vectors:
        name = r.tmp()
        decls.append(f"{r.type_name(v.dtype)} {name} = {r.expr(v)};")
        lanes += [f"{name}[{k}]" for k in range(v.dtype.lanes)] if v.dtype.lanes > 1 else [name]
    picked = [lanes[i] for i in n.index_values]
    if n.dtype.lanes == 1:
        return f"({{ {' '.join(decls)} {picked[0]}; }})"
    out = r.tmp()
    sets = " ".join(f"{out}[{k}] = {x};" for k, x in enumerate(picked))
    return f"({{ {' '.join(decls)} {r.type_name(n.dtype)} {out}; {sets} {out}; }})"


_SYMBOLS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.Mod: "%"}

BASE_CODE_FOR_OP: dict[Any, Template] = {
    **{cls: _arith(sym) for cls, sym in _SYMBOLS.items()},
    **{cls: _cmp(sym) for cls, sym in {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=",
                                       E.And: "&&", E.Or: "||"}.items()},
    E.Min: _minmax("<"), E.Max: _minmax(">"),
    E.FloorDiv: _floor_op("div"), E.FloorMod: _floor_op("mod"),
    E.Not: lambda r, n: r.elementwise(n.dtype, [n.a], lambda a: f"(!{a})"),
    E.Select: lambda r, n: r.elementwise(n.dtype, [n.condition, n.true_value, n.false_value],
                                         lambda c, t, f: f"({c} ? {t} : {f})"),
    E.Cast: lambda r, n: r.elementwise(n.dtype, [n.value], lambda a: f"(({r.type_name(n.dtype.element_of())}){a})"),
    E.Var: lambda r, n: r.name(n),
    E.SizeVar: lambda r, n: r.name(n),
    E.IntImm: lambda r, n: r.int_literal(n.value, n.dtype),
    E.FloatImm: lambda r, n: r.float_literal(n.value, n.dtype),
    E.StringImm: lambda r, n: r.string_literal(n.value),
    E.BufferLoad: lambda r, n: r.load(n),
    E.Broadcast: lambda r, n: r.elementwise(
        n.dtype.element_of(), [n.value], lambda a: f"({r.type_name(n.dtype)}){{{', '.join([a] * n.lanes)}}}", dup=True),
    E.Shuffle: _shuffle,
    E.Ramp: lambda r, n: r.elementwise(n.dtype, [n.base, n.stride], lambda b, s: r.wrap(n.dtype, f"{b} + _l * {s}")),
    E.Let: lambda r, n: (f"({{ const {r.type_name(n.var.dtype)} {r.name(n.var)} = {r.expr(n.value)}; "
                         f"{r.expr(n.body)}; }})"),
    # A Call keyed by its class is a call of another function (intrinsic calls are keyed by op name).
    E.Call: lambda r, n: r.call_global(n),
    "tir.abs": _unary(_abs),
    "tir.popcount": _unary(_popcount),
    "tir.isnan": lambda r, n: r.elementwise(n.dtype, [n.args[0]], lambda a: f"(({a}) != ({a}))", dup=True),
    "tir.likely": lambda r, n: f"__builtin_expect(!!({r.expr(n.args[0])}), 1)",
    "tir.if_then_else": _if_then_else,
    "tir.reinterpret": _reinterpret,
    "tir.call_extern": _extern,
    "tir.call_pure_extern": _extern,
    "tir.tvm_access_ptr": _access_ptr,
    "tir.tvm_storage_sync": lambda r, n: r.barrier or "0",
    **{name: _bitwise(name) for name in ("tir.shift_left", "tir.shift_right", "tir.bitwise_and", "tir.bitwise_or",
                                         "tir.bitwise_xor", "tir.bitwise_not")},
}

#: The C library's math functions, which ``math.h`` (in :data:`PREAMBLE`) declares.
LIBM_FUNCTIONS = frozenset(
    f + suffix for f in ("exp", "exp2", "log", "log2", "log10", "sqrt", "tanh", "sin", "cos", "floor", "ceil",
                         "trunc", "fabs", "erf", "nearbyint", "pow", "fmod", "round")
    for suffix in ("", "f"))

#: The C library functions ``string.h`` and ``stdlib.h`` (in :data:`PREAMBLE`) declare: a ``call_extern``
#: of one must not declare it again (``memcpy(void *, void *, int64_t)`` conflicts with ``string.h``'s).
LIBC_FUNCTIONS = frozenset(
    "memcpy memmove memset memcmp memchr strlen strcmp strncmp strcpy strncpy malloc calloc realloc free "
    "abs labs llabs abort exit getenv".split())


#: Headers and helpers of the C dialect: word-to-double, floor division, aligned allocation.
PREAMBLE = r"""#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline double loom_f64_of_bits(uint64_t w) { double d; memcpy(&d, &w, sizeof d); return d; }
static inline int64_t loom_floordiv(int64_t a, int64_t b) {
  if (b == -1) return (int64_t)(0u - (uint64_t)a);  /* INT64_MIN / -1 wraps (and would trap) */
  int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t loom_floormod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline void *loom_alloc(size_t bytes) {
  if (bytes > SIZE_MAX / 2) return NULL;  /* no allocator has it; the rounding below would wrap */
  return aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0) * 64);
}
"""
