"""The C-style renderer shared by the C and CUDA backends.

:class:`CStyleRenderer` turns lowered PrimFuncs into C text.  What differs
between dialects lives in tables and class attributes: ``code_for_op`` maps an
IR node class or an intrinsic op name to a template function, ``type_map`` maps
scalar dtypes to C types, and ``kernel_prefix``, ``restrict_keyword``,
``barrier``, ``thread_idx`` and ``vector_typedef`` are the dialect knobs.

Every function gets the native ABI of :mod:`loom.runtime.abi`::

    int32_t name(const uint64_t *args, const char **error)

Vector values use GCC vector extensions; operations C cannot express on whole
vectors are rendered lane by lane in a statement expression (re-vectorized by cc).

>>> import loom
>>> from loom.ir import BufferStore, PrimFunc
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> f = PrimFunc([A.data], BufferStore(A, A[0] + 1.0, [1]), buffer_map={A.data: A})
>>> print(CStyleRenderer().render_function("f", f)[-3])
  A[1] = (A[0] + 1.0f);
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, ClassVar

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.dtype import DataType
from ..ir.function import IRModule, PrimFunc
from ..ir.op import Op
from ..runtime.abi import NATIVE_ALIGNMENT, abi_vars
from .cstyle_ops import BASE_CODE_FOR_OP, PREAMBLE, CodegenError, Template, sanitize

__all__ = ["CStyleRenderer", "CodegenError", "sanitize"]


class CStyleRenderer:
    """Renders lowered PrimFuncs as C-like source (one ABI function per PrimFunc).

    :param openmp: parallel loops get ``#pragma omp parallel for`` (:attr:`parallel_pragma`).

    Subclasses change the tables and knobs below, or override
    :meth:`render_function` and :meth:`render_thread_extent`.
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
    #: Functions are ``{kernel_prefix}int32_t name(const uint64_t *args, const char **error)``.
    kernel_prefix: ClassVar[str] = ""
    restrict_keyword: ClassVar[str] = "restrict"
    barrier: ClassVar[str] = ""
    param_alignment: ClassVar[int] = NATIVE_ALIGNMENT  # the most argument pointers are assumed aligned to
    #: Thread tag -> C expression; tags not listed run as serial loops.
    thread_idx: ClassVar[dict[str, str]] = {}
    #: Constant allocations up to this many bytes live on the stack.
    stack_limit: ClassVar[int] = 16384
    preamble: ClassVar[str] = PREAMBLE
    #: With ``openmp``: the pragma of an outermost parallel loop, and what the file needs for it.
    parallel_pragma: ClassVar[str] = "#pragma omp parallel for schedule(static)"
    parallel_preamble: ClassVar[str] = ""
    indent_unit: ClassVar[str] = "  "

    def __init__(self, openmp: bool = False) -> None:
        self.openmp = openmp
        self.typedefs: dict[str, str] = {}
        self.externs: dict[str, str] = {}

    # -- module -------------------------------------------------------------

    def render(self, mod: IRModule | PrimFunc, name: str = "default_function") -> str:
        """The whole translation unit: preamble, typedefs, prototypes, functions."""
        funcs = {name: mod} if isinstance(mod, PrimFunc) else dict(mod.functions)
        self.typedefs, self.externs = {}, {}
        body: list[str] = []
        symbols: dict[str, str] = {}
        for fname, func in funcs.items():
            if not isinstance(func, PrimFunc):
                raise CodegenError(f"the C renderer renders PrimFuncs; {fname!r} is a {type(func).__name__}")
            clash = symbols.setdefault(self.symbol(fname), fname)
            if clash != fname:
                raise CodegenError(f"functions {clash!r} and {fname!r} both become the C symbol {self.symbol(fname)!r}")
            body += [*self.render_function(fname, func), ""]
        head = [self.preamble.rstrip("\n"), self.parallel_preamble.rstrip("\n") if self.openmp else "",
                *sorted(self.typedefs.values()), *sorted(self.externs.values())]
        return "\n".join([line for line in head if line] + [""] + body)

    def symbol(self, name: str) -> str:
        """The C symbol of the PrimFunc called ``name``."""
        return sanitize(name)

    # -- functions ----------------------------------------------------------

    def render_function(self, name: str, func: PrimFunc) -> list[str]:
        """One PrimFunc as an ABI function: argument unpacking, then the body."""
        self._names: dict[int, str] = {}
        self._used: set[str] = set()
        self._declared: set[int] = set()
        self._elem: dict[int, DataType | None] = {}
        self._heap: list[str] = []
        self._parallel = 0
        self._tmp = 0
        self._lines: list[str] = []
        self._depth = 1
        restrict = f" {self.restrict_keyword} " if func.attrs.get("tir.noalias") and self.restrict_keyword else ""
        buffers = {id(p): b for p, b in func.buffer_map.items()}
        for k, v in enumerate(abi_vars(func)):
            buf = buffers.get(id(v))
            if buf is not None:
                self._names[id(v)] = c = self.name(buf.data)
                self._elem[id(buf.data)] = buf.dtype
                ct = self.type_name(buf.dtype)
                ptr = f"(void *)(uintptr_t)args[{k}]"
                if (align := min(buf.data_alignment, self.param_alignment)) > 1:
                    ptr = f"__builtin_assume_aligned({ptr}, {align})"
                self.emit(f"{ct} *{restrict}{c} = ({ct} *){ptr};")
            elif v.dtype.is_handle:
                self.emit(f"void *{self.name(v)} = (void *)(uintptr_t)args[{k}];")
            elif v.dtype.is_float:
                self.emit(f"const {self.type_name(v.dtype)} {self.name(v)} = "
                          f"({self.type_name(v.dtype)})loom_f64_of_bits(args[{k}]);")
            else:
                self.emit(f"const {self.type_name(v.dtype)} {self.name(v)} = ({self.type_name(v.dtype)})args[{k}];")
        self.emit("(void)error;")
        self.stmt(func.body)
        self.emit("return 0;")
        sig = f"{self.kernel_prefix}int32_t {self.symbol(name)}(const uint64_t *args, const char **error)"
        return [sig + " {", *self._lines, "}"]

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

    def bind(self, base: str, ctype: str, text: str) -> str:
        """Emit ``const ctype name = text;`` under a fresh name; return the name."""
        name, k = base, 0
        while name in self._used:
            k += 1
            name = f"{base}_{k}"
        self._used.add(name)
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
        body = "".join(("\\" + c if c in '"\\?' else c) if 32 <= ord(c) < 127 else f"\\{ord(c):03o}" for c in text)
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
        if rule is None:
            what = f"intrinsic {key}" if isinstance(key, str) else f"{type(e).__name__} nodes"
            raise CodegenError(f"{type(self).__name__} cannot render {what} ({e})")
        return rule(self, e)

    def arith(self, n: E.BinaryOp, sym: str) -> str:
        t = n.dtype
        if t.is_float and sym == "%":
            return self.elementwise(t, [n.a, n.b], lambda a, b: f"{self.math_name('fmod', t)}({a}, {b})")
        if t.lanes > 1 and not t.is_bool and (t.is_float or t.bits >= 32) and _pow2_lanes(t.lanes) == t.lanes:
            return f"({self.expr(n.a)} {sym} {self.expr(n.b)})"  # native vector arithmetic
        return self.elementwise(t, [n.a, n.b], lambda a, b: self.wrap(t, f"{a} {sym} {b}"))

    def elementwise(self, t: DataType, operands: list[Any], fn: Callable[..., str], dup: bool = False) -> str:
        """``fn`` on scalar texts; vectors are rendered lane by lane.

        ``dup`` says ``fn`` repeats its operands, so non-trivial scalar operands
        are bound to temporaries first (each is evaluated once).
        """
        if t.lanes == 1:
            texts = [self.expr(o) for o in operands]
            if not dup or all(_simple(x) for x in texts):
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

    def _flat(self, buf: Any, indices: list[str]) -> str:
        terms = [] if isinstance(buf.elem_offset, E.IntImm) and buf.elem_offset.value == 0 \
            else [self.expr(buf.elem_offset)]
        for idx, stride in zip(indices, buf.effective_strides()):
            one = isinstance(stride, E.IntImm) and stride.value == 1
            terms.append(idx if one else f"{idx} * {self.expr(stride)}")
        return " + ".join(terms) or "0"

    def _contiguous(self, buf: Any, indices: tuple[Any, ...]) -> str | None:
        """The scalar flat start of a unit-stride vector access, else None."""
        ramps = [k for k, i in enumerate(indices) if i.dtype.lanes > 1]
        if len(ramps) != 1 or not isinstance(indices[ramps[0]], E.Ramp) or buf.dtype.lanes != 1:
            return None
        ramp, stride = indices[ramps[0]], buf.effective_strides()[ramps[0]]
        if not all(isinstance(x, E.IntImm) and x.value == 1 for x in (ramp.stride, stride)):
            return None
        return self._flat(buf, [self.expr(ramp.base if k == ramps[0] else i) for k, i in enumerate(indices)])

    def load(self, n: E.BufferLoad) -> str:
        ptr = self.pointer(n.buffer)
        if n.dtype.lanes == 1 or n.dtype == n.buffer.dtype:
            return f"{ptr}[{self._flat(n.buffer, [self.expr(i) for i in n.indices])}]"
        start = self._contiguous(n.buffer, n.indices)
        if start is not None:
            v = self.tmp()
            size = self._vector_bytes(n.dtype, v)
            return f"({{ {self.type_name(n.dtype)} {v}; memcpy(&{v}, &{ptr}[{start}], {size}); {v}; }})"
        decls, refs = self._bind(list(n.indices), [self.expr(i) for i in n.indices], vector=True)
        out = self.tmp()
        return (f"({{ {' '.join(decls)} {self.type_name(n.dtype)} {out}; for (int _l = 0; _l < {n.dtype.lanes}; "
                f"++_l) {out}[_l] = {ptr}[{self._flat(n.buffer, refs)}]; {out}; }})")

    # -- statements ---------------------------------------------------------

    def stmt(self, s: S.Stmt) -> None:
        """Emit the C lines of ``s``."""
        method = getattr(self, f"stmt_{type(s).__name__}", None)
        if method is None:
            raise CodegenError(f"{type(self).__name__} cannot render {type(s).__name__} statements")
        method(s)

    def stmt_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def stmt_Evaluate(self, s: S.Evaluate) -> None:
        if not isinstance(s.value, (E.IntImm, E.FloatImm)):
            text = self.expr(s.value)
            if text and text != "0":
                self.emit(f"{text};" if isinstance(s.value, E.Call) else f"(void)({text});")

    def scoped(self, var: E.Var, render: Callable[[], None]) -> None:
        """Run ``render``, which declares ``var``, in a C block of its own when ``var``
        was declared before (bodies copied by unrolling or partitioning)."""
        again = id(var) in self._declared
        self._declared.add(id(var))
        if again:
            self.emit("{")
            self._depth += 1
        render()
        if again:
            self._depth -= 1
            self.emit("}")

    def stmt_LetStmt(self, s: S.LetStmt) -> None:
        self.scoped(s.var, lambda: self._let(s))

    def _let(self, s: S.LetStmt) -> None:
        if s.var.dtype.is_handle:
            self._elem.setdefault(id(s.var), None)
        const = "" if s.var.dtype.is_handle else "const "
        self.emit(f"{const}{self.type_name(s.var.dtype)} {self.name(s.var)} = {self.expr(s.value)};")
        self.stmt(s.body)

    def stmt_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar) \
                and id(s.node.var) not in self._declared:
            self.render_thread_extent(s)
        else:
            self.stmt(s.body)

    def render_thread_extent(self, s: S.AttrStmt) -> None:
        """A thread binding: the dialect's index expression, or a serial loop over the extent."""
        iv = s.node
        self._declared.add(id(iv.var))
        index = self.thread_idx.get(iv.thread_tag)
        ct, v = self.type_name(iv.var.dtype), self.name(iv.var)
        if index is not None:
            self.emit(f"const {ct} {v} = ({ct})({index});")
            self.stmt(s.body)
        else:
            self.block(f"for ({ct} {v} = 0; {v} < {self.expr(s.value)}; ++{v})", s.body)

    def stmt_AssertStmt(self, s: S.AssertStmt) -> None:
        message = s.message.value if isinstance(s.message, E.StringImm) else str(s.message)
        frees = " ".join(f"free({h});" for h in reversed(self._heap))
        self.emit(f"if (!({self.expr(s.condition)})) {{ {frees + ' ' if frees else ''}"
                  f"*error = {self.string_literal(message)}; return -1; }}")
        self.stmt(s.body)

    def stmt_IfThenElse(self, s: S.IfThenElse) -> None:
        if s.else_case is None:
            self.block(f"if ({self.expr(s.condition)})", s.then_case)
        else:
            self.block(f"if ({self.expr(s.condition)})", s.then_case, tail="} else {")
            self._depth += 1
            self.stmt(s.else_case)
            self._depth -= 1
            self.emit("}")

    def stmt_While(self, s: S.While) -> None:
        self.block(f"while ({self.expr(s.condition)})", s.body)

    def stmt_For(self, s: S.For) -> None:
        v, ct = self.name(s.loop_var), self.type_name(s.loop_var.dtype)
        self._declared.add(id(s.loop_var))
        lo, extent = self.expr(s.min), self.expr(s.extent)
        if not _simple(lo):  # bounds are evaluated once, before the loop
            lo = self.bind(f"{v}_begin", ct, lo)
        hi = extent if lo == "0" else f"{lo} + {extent}"
        if not _simple(extent):
            hi = self.bind(f"{v}_end", ct, hi)
        parallel = s.kind == S.ForKind.PARALLEL and self.openmp and self._parallel == 0
        if parallel and _exits(s.body, self.stack_limit):
            self.emit("/* serial: the body may return an error, which OpenMP loops cannot */")
            parallel = False
        if parallel:
            self.emit(self.parallel_pragma)
        elif s.kind == S.ForKind.UNROLLED:
            self.emit(f"#pragma GCC unroll {min(s.extent.value, 65534)}" if isinstance(s.extent, E.IntImm)
                      else "#pragma GCC unroll 8")
        self._parallel += parallel
        self.block(f"for ({ct} {v} = {lo}; {v} < {hi}; ++{v})", s.body)
        self._parallel -= parallel

    def stmt_BufferStore(self, s: S.BufferStore) -> None:
        buf, t = s.buffer, s.value.dtype
        ptr = self.pointer(buf)
        if t.lanes == 1 or t == buf.dtype:
            self.emit(f"{ptr}[{self._flat(buf, [self.expr(i) for i in s.indices])}] = {self.expr(s.value)};")
            return
        value, v = self.expr(s.value), self.tmp()
        start = self._contiguous(buf, s.indices)
        if start is not None:
            size = self._vector_bytes(t, v)
            self.emit(f"{{ {self.type_name(t)} {v} = {value}; memcpy(&{ptr}[{start}], &{v}, {size}); }}")
            return
        decls, refs = self._bind(list(s.indices), [self.expr(i) for i in s.indices], vector=True)
        self.emit(f"{{ {self.type_name(t)} {v} = {value}; {' '.join(decls)} for (int _l = 0; _l < {t.lanes}; ++_l) "
                  f"{ptr}[{self._flat(buf, refs)}] = {v}[_l]; }}")

    def stmt_Allocate(self, s: S.Allocate) -> None:
        self.scoped(s.buffer_var, lambda: self._allocate(s))

    def _allocate(self, s: S.Allocate) -> None:
        ct, v = self.type_name(s.dtype), self.name(s.buffer_var)
        self._elem[id(s.buffer_var)] = s.dtype
        if _small(s, self.stack_limit):
            align = s.annotations.get("alignment", 64)
            self.emit(f"{ct} {v}[{_count(s)}] __attribute__((aligned({align})));")
            self.stmt(s.body)
            return
        size = " * ".join([f"(size_t)({self.expr(x)})" for x in s.extents] + [f"sizeof({ct})"])
        frees = " ".join(f"free({h});" for h in reversed(self._heap))
        self.emit(f"{ct} *{v} = ({ct} *)loom_alloc({size});")
        self.emit(f"if (!{v}) {{ {frees + ' ' if frees else ''}*error = \"out of memory in allocation of "
                  f"{sanitize(s.buffer_var.name)}\"; return -1; }}")
        self._heap.append(v)
        self.stmt(s.body)
        self._heap.pop()
        self.emit(f"free({v});")


def _simple(text: str) -> bool:
    """An identifier or a literal: cheap and safe to repeat."""
    return re.fullmatch(r"\(?-?[\w.]+\)?", text) is not None


def _exits(body: S.Stmt, stack_limit: int) -> bool:
    """Whether ``body`` holds a statement that may return from the function."""
    from ..ir.functor import post_order_visit

    found = []

    def visit(n: Any) -> None:
        if isinstance(n, S.AssertStmt) or isinstance(n, S.Allocate) and not _small(n, stack_limit):
            found.append(n)

    post_order_visit(body, visit)
    return bool(found)


def _count(s: S.Allocate) -> int | None:
    """The element count of a constant-size allocation, else None."""
    count = 1
    for x in s.extents:
        if not isinstance(x, E.IntImm):
            return None
        count *= x.value
    return count


def _small(s: S.Allocate, stack_limit: int) -> bool:
    count = _count(s)
    return count is not None and 0 < count * s.dtype.bytes <= stack_limit


def _pow2_lanes(lanes: int) -> int:
    """The lane count of the GCC vector holding ``lanes`` lanes: the next power of two."""
    return 1 << (lanes - 1).bit_length()
