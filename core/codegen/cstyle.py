"""The C-style renderer shared by the C and CUDA backends.

:class:`CStyleRenderer` turns lowered PrimFuncs into C text.  What differs
between dialects lives in tables, class attributes and overridable methods:
``code_for_op`` maps an IR node class or an intrinsic op name to a template
function, ``type_map`` maps scalar dtypes to C types, ``kernel_prefix``,
``restrict_keyword``, ``barrier``, ``thread_idx`` and ``vector_typedef`` are
the dialect knobs, and ``intrinsic_rules`` lower the intrinsic calls that
LowerIntrin left (as the target's ``loom_intrinsic_rules`` would).

A function is rendered as its *signature* (:meth:`~CStyleRenderer.function_signature`;
by default a plain C function of typed parameters, ``void f(float * restrict A, int32_t n)``),
a *prologue* and an *epilogue* around the body (empty by default), and the
statement hooks of :mod:`loom.codegen.cstyle_stmt` (failed asserts, allocations
off the stack).  A call of another function (a ``GlobalVar``) goes through
:meth:`~CStyleRenderer.call_global`.  A calling convention, such as the CPU's
native ABI of the C backend, is a dialect's choice made in those methods.

Vector values use GCC vector extensions; operations C cannot express on whole
vectors are rendered lane by lane in a statement expression (re-vectorized by cc).

Integer division and remainder by a divisor that is not a non-zero constant
check it first where the dialect says how to fail (:meth:`~CStyleRenderer.division_by_zero`):
C leaves a zero divisor undefined and x86 traps on it.  Buffer offsets are
computed in 64 bits whenever 32 could overflow (:meth:`~CStyleRenderer.flat_index`).

>>> import loom
>>> from loom.ir import BufferStore, PrimFunc
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> f = PrimFunc([A.data], BufferStore(A, A[0] + 1.0, [1]), buffer_map={A.data: A})
>>> for line in CStyleRenderer().render_function("f", f): print(line)
void f(float *A) {
  A[1] = (A[0] + 1.0f);
}
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Mapping, Sequence

import attrs

from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.dtype import DataType
from ..ir.function import IRModule, PrimFunc
from ..ir.op import Op
from ..runtime.abi import abi_vars, division_by_zero_message
from .cstyle_ops import (BASE_CODE_FOR_OP, LIBC_FUNCTIONS, LIBM_FUNCTIONS, PREAMBLE, CodegenError, Template,
                         is_simple, sanitize)
from .cstyle_stmt import Release, StatementRenderer
from .flat_offset import OffsetTerm, offset_terms

__all__ = ["CStyleRenderer", "CodegenError", "Release", "sanitize"]

#: ``rule(call) -> PrimExpr | None``: an intrinsic lowering rule (see :mod:`loom.ir.op`).
Rule = Callable[[E.Call], Any]


class CStyleRenderer(StatementRenderer):
    """Renders lowered PrimFuncs as C-like source (one C function per PrimFunc).

    :param openmp: parallel loops get ``#pragma omp parallel for`` (:attr:`parallel_pragma`).
    :param rules: lowering rules of intrinsic ops, applied to calls that no
        ``code_for_op`` template renders (what LowerIntrin did not lower).

    Subclasses change the tables and knobs below, or override the function
    hooks (:meth:`function_signature`, :meth:`function_prologue`,
    :meth:`function_epilogue`, :meth:`call_global`) and the statement hooks
    (:meth:`assert_failure`, :meth:`allocate_heap`, :meth:`allocate_device`,
    :meth:`render_thread_extent`).
    """

    code_for_op: ClassVar[dict[Any, Template]] = BASE_CODE_FOR_OP
    type_map: ClassVar[dict[str, str]] = {
        "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
        "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
        "float32": "float", "float64": "double", "handle": "void *",
    }
    #: Element types of vectors whose scalar type cannot be a vector element.
    vector_element: ClassVar[dict[str, str]] = {"bool": "int8_t"}
    vector_typedef: ClassVar[str] = "typedef {elem} {name} __attribute__((vector_size({size})));"
    #: Written before the return type of every function's signature (``__global__ ``).
    kernel_prefix: ClassVar[str] = ""
    restrict_keyword: ClassVar[str] = "restrict"
    barrier: ClassVar[str] = ""
    #: Thread tag -> C expression; tags not listed run as serial loops.
    thread_idx: ClassVar[dict[str, str]] = {}
    #: Constant allocations up to this many bytes live on the stack.
    stack_limit: ClassVar[int] = 16384
    preamble: ClassVar[str] = PREAMBLE
    #: With ``openmp``: the pragma of an outermost parallel loop, and what the file needs for it.
    parallel_pragma: ClassVar[str] = "#pragma omp parallel for schedule(static)"
    parallel_preamble: ClassVar[str] = ""
    indent_unit: ClassVar[str] = "  "
    #: Functions the preamble's headers declare (``extern`` calls of them need no declaration).
    header_functions: ClassVar[frozenset[str]] = LIBM_FUNCTIONS | LIBC_FUNCTIONS

    def __init__(self, openmp: bool = False, rules: Mapping[str, Rule] | None = None) -> None:
        self.openmp = openmp
        self.intrinsic_rules: dict[str, Rule] = dict(rules or {})
        self.typedefs: dict[str, str] = {}
        self.externs: dict[str, str] = {}
        #: Further file-level declarations the functions need, in first-use order (slots, prototypes).
        self.declarations: dict[str, str] = {}
        #: The C symbol of each function of the module being rendered, by its name there.
        self.functions: dict[str, str] = {}

    # -- module -------------------------------------------------------------

    def render(self, mod: IRModule | PrimFunc, name: str = "default_function") -> str:
        """The whole translation unit: preamble, typedefs, declarations, functions."""
        funcs: dict[str, PrimFunc] = {}
        for fname, func in ({name: mod} if isinstance(mod, PrimFunc) else dict(mod.functions)).items():
            if not isinstance(func, PrimFunc):
                raise CodegenError(f"the C renderer renders PrimFuncs; {fname!r} is a {type(func).__name__}")
            funcs[fname] = func
        self.typedefs, self.externs, self.declarations = {}, {}, {}
        self.functions = {}
        for fname in funcs:
            clash = next((n for n, sym in self.functions.items() if sym == self.symbol(fname)), None)
            if clash is not None:
                raise CodegenError(f"functions {clash!r} and {fname!r} both become the C symbol {self.symbol(fname)!r}")
            self.functions[fname] = self.symbol(fname)
        body: list[str] = []
        for fname, func in funcs.items():
            body += [*self.render_function(fname, func), ""]
        head = [self.preamble.rstrip("\n"), self.parallel_preamble.rstrip("\n") if self.openmp else "",
                *sorted(self.typedefs.values()), *sorted(self.externs.values()), *self.declarations.values()]
        return "\n".join([line for line in head if line] + [""] + body)

    def symbol(self, name: str) -> str:
        """The C symbol of the PrimFunc called ``name``."""
        return sanitize(name)

    # -- functions ----------------------------------------------------------

    def render_function(self, name: str, func: PrimFunc) -> list[str]:
        """One PrimFunc: its signature, then the prologue, the body and the epilogue in braces."""
        self._names: dict[int, str] = {}
        self._used: set[str] = set(self.functions.values())  # no local may hide a function it calls
        self._declared: set[int] = set()
        self._bound: set[int] = set()  # thread variables bound around the current statement
        self._elem: dict[int, DataType | None] = {}
        self._releases: list[Release] = []
        self._parallel = 0
        self._region = None
        self._regions = 0
        self._tmp = 0
        self._lines: list[str] = []
        self._depth = 1
        signature = self.function_signature(name, func)
        self.function_prologue(name, func)
        self.stmt(func.body)
        self.function_epilogue(name, func)
        return [signature + " {", *self._lines, "}"]

    def function_signature(self, name: str, func: PrimFunc) -> str:
        """The C declarator of ``func``: by default ``void name(<one typed parameter per ABI slot>)``.

        Buffer parameters are pointers to their element type (``restrict`` when
        ``attrs["tir.noalias"]``); the slots are :func:`loom.runtime.abi.abi_vars`
        (the parameters, then the symbolic shape variables that are not).
        """
        return f"{self.kernel_prefix}void {self.symbol(name)}({', '.join(self.typed_parameters(func)) or 'void'})"

    def typed_parameters(self, func: PrimFunc) -> list[str]:
        """``float * restrict A``, ``int32_t n``...: each ABI slot of ``func`` as a C parameter."""
        restrict = f" {self.restrict_keyword} " if func.attrs.get("tir.noalias") and self.restrict_keyword else ""
        buffers = {id(p): b for p, b in func.buffer_map.items()}
        out = []
        for v in abi_vars(func):
            buf = buffers.get(id(v))
            if buf is not None:
                self._names[id(v)] = c = self.name(buf.data)
                self._elem[id(buf.data)] = buf.dtype
                out.append(f"{self.type_name(buf.dtype)} *{restrict or ''}{c}")
            elif v.dtype.is_handle:
                out.append(f"void *{self.name(v)}")
            else:
                out.append(f"{self.type_name(v.dtype)} {self.name(v)}")
        return out

    def function_prologue(self, name: str, func: PrimFunc) -> None:
        """Emit what comes before the body (default: nothing)."""

    def function_epilogue(self, name: str, func: PrimFunc) -> None:
        """Emit what comes after the body (default: nothing)."""

    def call_global(self, call: E.Call) -> str:
        """A call of another function (``Call`` of a GlobalVar): by default a plain C call of its symbol."""
        name = call.op.name_hint
        symbol = self.functions.get(name, sanitize(name))
        return f"{symbol}({', '.join(self.expr(a) for a in call.args)})"

    # -- naming and emission ------------------------------------------------

    def name(self, var: E.Var) -> str:
        """The C identifier of ``var``: its sanitised name, made unique in the function."""
        found = self._names.get(id(var))
        if found is None:
            base = found = sanitize(var.name)
            k = 0
            while found in self._used:
                k += 1
                found = f"{base}_{k}"
            self._used.add(found)
            self._names[id(var)] = found
        return found

    def fresh(self, base: str) -> str:
        """A C identifier from ``base`` that nothing else in the function uses."""
        name, k = base, 0
        while name in self._used:
            k += 1
            name = f"{base}_{k}"
        self._used.add(name)
        return name

    def bind(self, base: str, ctype: str, text: str) -> str:
        """Emit ``const ctype name = text;`` under a fresh name; return the name."""
        name = self.fresh(base)
        self.emit(f"const {ctype} {name} = {text};")
        return name

    def tmp(self) -> str:
        self._tmp += 1
        return f"_t{self._tmp}"

    def emit(self, line: str) -> None:
        self._lines.append(self.indent_unit * self._depth + line)

    def block(self, head: str, body: S.Stmt | None, tail: str = "}") -> None:
        self.emit(head + " {")
        self._depth += 1
        if body is not None:
            self.stmt(body)
        self._depth -= 1
        self.emit(tail)

    # -- types and literals -------------------------------------------------

    def type_name(self, t: DataType) -> str:
        """The C type of ``t``; vectors get a typedef (recorded for the preamble)."""
        elem = str(t.element_of())
        if elem not in self.type_map:
            raise CodegenError(f"{type(self).__name__} has no C type for {elem}; supported: {sorted(self.type_map)}")
        if t.lanes == 1:
            return self.type_map[elem]
        name = f"{elem}x{t.lanes}"
        ce = self.vector_element.get(elem, self.type_map[elem])
        # GCC vectors need a power-of-two size: other lane counts get padding lanes that
        # lane loops and memcpy never touch and native arithmetic never uses (see arith).
        size = _pow2_lanes(t.lanes) * max(t.bits, 8) // 8
        self.typedefs.setdefault(name, self.vector_typedef.format(elem=ce, name=name, size=size))
        return name

    def _vector_bytes(self, t: DataType, var: str) -> str:
        """The bytes of the ``t.lanes`` lanes of vector ``var`` (less than ``sizeof`` when padded)."""
        if _pow2_lanes(t.lanes) == t.lanes:
            return f"sizeof {var}"
        return f"{t.lanes} * sizeof {var}[0]"

    def int_literal(self, value: int, t: DataType) -> str:
        if t.is_bool:
            return "1" if value else "0"
        if t.bits == 64:
            if t.is_uint:
                return f"UINT64_C({value})"
            return f"(INT64_C({value + 1}) - 1)" if value == -(1 << 63) else f"INT64_C({value})"
        if t.is_uint and t.bits == 32:
            return f"{value}u"
        if value == -(1 << 31):
            return "(-2147483647 - 1)"
        return str(value) if value >= 0 else f"({value})"

    def float_literal(self, value: float, t: DataType) -> str:
        if math.isnan(value):
            text = "NAN"
        elif math.isinf(value):
            text = "INFINITY" if value > 0 else "(-INFINITY)"
        else:
            text = repr(float(value))
            text = text if t.bits == 64 else text + "f"
        return f"({text})" if text[0] == "-" else text

    def string_literal(self, text: str) -> str:
        """``text`` as a C string literal of its UTF-8 bytes (what the runtime decodes messages as)."""
        chars = (chr(x) for x in text.encode("utf-8"))
        body = "".join(("\\" + c if c in '"\\?' else c) if 32 <= ord(c) < 127 else f"\\{ord(c):03o}" for c in chars)
        return f'"{body}"'

    def math_name(self, fn: str, t: DataType) -> str:
        """``expf`` for float32, ``exp`` for float64."""
        return fn + "f" if t.bits == 32 else fn

    def wrap(self, t: DataType, text: str) -> str:
        """Integer arithmetic brought back to ``t`` (C promotes narrow types to int)."""
        if t.is_integer and t.bits < 32:
            return f"(({self.type_name(t.element_of())})({text}))"
        return f"({text})"

    # -- expressions --------------------------------------------------------

    def expr(self, e: Any) -> str:
        """The C text of ``e``."""
        key = e.op.name if isinstance(e, E.Call) and isinstance(e.op, Op) else type(e)
        rule = self.code_for_op.get(key)
        if rule is not None:
            return rule(self, e)
        lower = self.intrinsic_rules.get(key) if isinstance(key, str) else None
        lowered = lower(e) if lower is not None else None
        if lowered is not None:  # a call LowerIntrin did not lower: the same rule, here
            return self.expr(lowered)
        what = f"intrinsic {key}" if isinstance(key, str) else f"{type(e).__name__} nodes"
        raise CodegenError(f"{type(self).__name__} cannot render {what} ({e})")

    def arith(self, n: E.BinaryOp, sym: str) -> str:
        t = n.dtype
        if t.is_float and sym == "%":
            return self.elementwise(t, [n.a, n.b], lambda a, b: f"{self.math_name('fmod', t)}({a}, {b})")
        if sym in "/%" and t.is_int and t.bits >= 32:
            lane = lambda a, b: self._signed_division(t, sym, a, b)  # noqa: E731
            return self.int_division(n, lane, lambda: self.elementwise(t, [n.a, n.b], lane, dup=True))
        if sym in "/%" and (t.is_integer or t.is_bool):  # C traps on a zero divisor of any of them
            return self.int_division(n, lambda a, b: self.wrap(t, f"{a} {sym} {b}"), lambda: self._plain_arith(n, sym))
        return self._plain_arith(n, sym)

    def _plain_arith(self, n: E.BinaryOp, sym: str) -> str:
        t = n.dtype
        if t.lanes > 1 and not t.is_bool and (t.is_float or t.bits >= 32) and _pow2_lanes(t.lanes) == t.lanes:
            return f"({self.expr(n.a)} {sym} {self.expr(n.b)})"  # native vector arithmetic
        return self.elementwise(t, [n.a, n.b], lambda a, b: self.wrap(t, f"{a} {sym} {b}"))

    def division_by_zero(self, message: str) -> str | None:
        """The C statements that fail the function when an integer divisor is zero, or None: no check.

        The base renders no check (a dialect without a way to fail keeps C's
        behaviour); the CPU dialect fails with ``message`` (:meth:`fail`).
        """
        return None

    def int_division(self, n: E.BinaryOp, lane: Callable[[str, str], str], unchecked: Callable[[], str]) -> str:
        """Integer division or remainder ``n``: ``unchecked()`` when its divisor is a non-zero constant (or
        the dialect does not check), else lane by lane ``lane(a, b)`` after a zero test of ``b``."""
        failure = None if ops.is_nonzero_constant(n.b) else self.division_by_zero(division_by_zero_message(str(n)))
        if failure is None:
            return unchecked()

        def checked(a: str, b: str) -> str:
            return f"({{ if (__builtin_expect({b} == 0, 0)) {{ {failure} }} {lane(a, b)}; }})"

        return self.elementwise(n.dtype, [n.a, n.b], checked, dup=True)

    def _signed_division(self, t: DataType, sym: str, a: str, b: str) -> str:
        """C's ``/`` or ``%`` of ``int32``/``int64`` lanes, with ``INT_MIN / -1`` wrapping as in the IR.

        C leaves that quotient undefined and x86 traps on it; narrower types are
        computed in ``int`` and wrap when cast back, so they need no guard.
        """
        if sym == "%":
            return f"({b} == -1 ? 0 : {a} % {b})"
        unsigned = f"uint{t.bits}_t"
        return f"({b} == -1 ? ({self.type_name(t.element_of())})(0u - ({unsigned}){a}) : {a} / {b})"

    def elementwise(self, t: DataType, operands: list[Any], fn: Callable[..., str], dup: bool = False) -> str:
        """``fn`` on scalar texts; vectors are rendered lane by lane.

        ``dup`` says ``fn`` repeats its operands, so non-trivial scalar operands
        are bound to temporaries first (each is evaluated once).
        """
        if t.lanes == 1:
            texts = [self.expr(o) for o in operands]
            if not dup or all(is_simple(x) for x in texts):
                return fn(*texts)
            decls, refs = self._bind(operands, texts, vector=False)
            return f"({{ {' '.join(decls)} {fn(*refs)}; }})"
        decls, refs = self._bind(operands, [self.expr(o) for o in operands], vector=True)
        out = self.tmp()
        return (f"({{ {' '.join(decls)} {self.type_name(t)} {out}; "
                f"for (int _l = 0; _l < {t.lanes}; ++_l) {out}[_l] = {fn(*refs)}; {out}; }})")

    def _bind(self, operands: list[Any], texts: list[str], vector: bool) -> tuple[list[str], list[str]]:
        decls, refs = [], []
        for o, text in zip(operands, texts):
            name = self.tmp()
            decls.append(f"{self.type_name(o.dtype)} {name} = {text};")
            refs.append(f"{name}[_l]" if vector and o.dtype.lanes > 1 else name)
        return decls, refs

    def pointer(self, buf: Any) -> str:
        """``buf``'s data as a pointer to its element type (cast when declared otherwise)."""
        data = self.name(buf.data)
        if self._elem.get(id(buf.data)) == buf.dtype:
            return data
        return f"(({self.type_name(buf.dtype)} *){data})"

    def _flat(self, buf: Any, indices: list[str], dtypes: list[DataType] | None = None,
              strides: Sequence[E.PrimExpr] | None = None) -> str:
        """The element offset of ``indices`` (C texts, of ``dtypes``: default int32) into ``buf``.

        ``strides`` default to the buffer's (one index per dimension); :meth:`flat_index`
        passes the strides of its merged terms. Computed in ``int64_t`` when an offset
        into the buffer may not fit an ``int32_t`` (:func:`_needs_wide_offsets`): the
        product of a 32-bit index and a stride would wrap, and address memory outside
        the buffer.
        """
        if dtypes is None:
            dtypes = [DataType("int", 32)] * len(indices)
        offset = buf.elem_offset
        parts: list[tuple[str, DataType, str | None]] = []  # (index, its dtype, stride unless 1)
        if not (isinstance(offset, E.IntImm) and offset.value == 0):
            parts.append((self.expr(offset), offset.dtype, None))
        for idx, t, stride in zip(indices, dtypes, buf.effective_strides() if strides is None else strides):
            one = isinstance(stride, E.IntImm) and stride.value == 1
            parts.append((idx, t, None if one else self.expr(stride)))
        # One index times 1 is the index itself: no arithmetic, nothing to overflow.
        wide = (len(parts) > 1 or any(stride is not None for _, _, stride in parts)) and _needs_wide_offsets(buf)
        terms = []
        for text, t, stride in parts:
            if wide and not (t.bits == 64 and t.lanes == 1):
                text = f"(int64_t)({text})"
            terms.append(text if stride is None else f"{text} * {stride}")
        return " + ".join(terms) or "0"

    def _term_index(self, term: OffsetTerm) -> str:
        """The C text of ``term``'s index, after the zero test of a merged division (when the dialect checks)."""
        text = self.expr(term.index)
        if term.zero_test is None:
            return text
        divisor, division = term.zero_test
        failure = self.division_by_zero(division_by_zero_message(str(division)))
        if failure is None:
            return text
        return f"({{ if (__builtin_expect({self.expr(divisor)} == 0, 0)) {{ {failure} }} {text}; }})"

    def _offset_of_terms(self, buf: Any, terms: Sequence[OffsetTerm]) -> str:
        return self._flat(buf, [self._term_index(t) for t in terms], [t.index.dtype for t in terms],
                          [t.stride for t in terms])

    def flat_index(self, buf: Any, indices: Any) -> str:
        """The C element offset of the IR ``indices`` into ``buf`` (:func:`~loom.codegen.flat_offset.offset_terms`,
        then :meth:`_flat`)."""
        return self._offset_of_terms(buf, offset_terms(buf, indices))

    def _contiguous(self, buf: Any, terms: Sequence[OffsetTerm]) -> str | None:
        """The scalar flat start of a unit-stride vector access (its offset ``terms``), else None."""
        ramps = [k for k, t in enumerate(terms) if t.index.dtype.lanes > 1]
        if len(ramps) != 1 or buf.dtype.lanes != 1:
            return None
        k = ramps[0]
        ramp, stride = terms[k].index, terms[k].stride
        if not isinstance(ramp, E.Ramp) or not all(isinstance(x, E.IntImm) and x.value == 1
                                                  for x in (ramp.stride, stride)):
            return None
        return self._offset_of_terms(buf, [*terms[:k], attrs.evolve(terms[k], index=ramp.base), *terms[k + 1:]])

    def lane_offsets(self, buf: Any, terms: Sequence[OffsetTerm]) -> tuple[list[str], str]:
        """Declarations binding the lanes of a gather or scatter's offset ``terms``, and lane ``_l``'s offset."""
        decls, refs = self._bind([t.index for t in terms], [self._term_index(t) for t in terms], vector=True)
        return decls, self._flat(buf, refs, [t.index.dtype for t in terms], [t.stride for t in terms])

    def load(self, n: E.BufferLoad) -> str:
        ptr = self.pointer(n.buffer)
        if n.dtype.lanes == 1 or n.dtype == n.buffer.dtype:
            return f"{ptr}[{self.flat_index(n.buffer, n.indices)}]"
        terms = offset_terms(n.buffer, n.indices)
        start = self._contiguous(n.buffer, terms)
        if start is not None:
            v = self.tmp()
            size = self._vector_bytes(n.dtype, v)
            return f"({{ {self.type_name(n.dtype)} {v}; memcpy(&{v}, &{ptr}[{start}], {size}); {v}; }})"
        decls, offset = self.lane_offsets(n.buffer, terms)
        out = self.tmp()
        return (f"({{ {' '.join(decls)} {self.type_name(n.dtype)} {out}; for (int _l = 0; _l < {n.dtype.lanes}; "
                f"++_l) {out}[_l] = {ptr}[{offset}]; {out}; }})")


_INT32_LIMIT = 1 << 31


def _needs_wide_offsets(buf: Any) -> bool:
    """Whether an offset into ``buf`` may exceed ``int32_t``: unless its shape, strides and offset are
    constants whose largest offset fits, an offset is computed in 64 bits (as the llvm backend always does)."""
    extent = buf.elem_offset.value if isinstance(buf.elem_offset, E.IntImm) else None
    if extent is None:
        return True
    for n, stride in zip(buf.shape, buf.effective_strides()):
        if not (isinstance(n, E.IntImm) and isinstance(stride, E.IntImm)):
            return True
        extent += max(n.value - 1, 0) * abs(stride.value)
    return extent * max(1, buf.dtype.lanes) >= _INT32_LIMIT


def _pow2_lanes(lanes: int) -> int:
    """The lane count of the GCC vector holding ``lanes`` lanes: the next power of two."""
    return 1 << (lanes - 1).bit_length()
