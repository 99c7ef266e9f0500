"""The readable, Python-like text of IR nodes (``str(node)``, ``node.script()``).

The same text is what ``dump_pass_ir`` writes.  It is deterministic (no ids,
dicts with string keys are sorted) and unambiguous:

* variables that share a name get suffixes in order of appearance (``i``,
  ``i_1``); a buffer and its data pointer of the same name share one name;
* an expression reads back as Python with the same tree shape: operators are
  parenthesised by Python's precedence, comparisons never chain, and
  ``and``/``or``/``+``/``*`` associate to the left as in Python;
* constants show their dtype unless it is the default (``int64(5)``,
  ``float16(0.5)``); integer ``Div``/``Mod`` are C-style and print as
  ``truncdiv``/``truncmod``, while ``//`` and ``%`` are the floor forms.

Printing never raises: a failure yields a ``<... (unprintable: ...)>`` marker,
so a bad node cannot hide the error being reported about it.

>>> import loom
>>> i = loom.var("i")
>>> A = loom.decl_buffer((8,), "float32", name="A")
>>> from loom.ir import For, BufferStore
>>> print(For(i, 0, 8, "parallel", BufferStore(A, A[i] * 2.0, [i])))
for i in parallel(8):
    A[i] = A[i] * 2.0
"""

from __future__ import annotations

import keyword
import math
from typing import Any, Callable

from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .dtype import DataType
from .node import Node, fields_of
from .recursion import deep_recursion

__all__ = ["to_text", "register_expr_printer", "register_stmt_printer", "register_node_printer", "ATOM", "INDENT"]

# Python's precedence levels, loosest first.
_LET, _OR, _AND, _NOT, _CMP, _ADD, _MUL, _UNARY, _ATOM = 0, 1, 2, 3, 4, 5, 6, 7, 9
_INDENT = "    "

#: Infix operators: class -> (symbol, precedence).  Comparisons do not associate.
_INFIX: dict[type, tuple[str, int]] = {
    E.Add: ("+", _ADD), E.Sub: ("-", _ADD), E.Mul: ("*", _MUL), E.FloorDiv: ("//", _MUL),
    E.FloorMod: ("%", _MUL), E.And: ("and", _AND), E.Or: ("or", _OR),
    E.EQ: ("==", _CMP), E.NE: ("!=", _CMP), E.LT: ("<", _CMP), E.LE: ("<=", _CMP),
    E.GT: (">", _CMP), E.GE: (">=", _CMP),
}
#: Binary nodes printed as calls.
_CALL_FORM = {E.Min: "min", E.Max: "max", E.Mod: "truncmod"}
#: Ops whose builder takes the result dtype first (``reinterpret('float32', x)``).
_DTYPE_FIRST = {"tir.reinterpret", "tir.call_extern", "tir.call_pure_extern", "tir.call_llvm_pure_intrin",
                "tir.call_llvm_intrin"}
_FOR_HEAD = {"serial": "range", "unrolled": "unroll", "parallel": "parallel", "vectorized": "vectorize"}


def _dispatch(table: dict[type, Any], cls: type) -> Any:
    """The entry of ``cls`` or of its nearest base in ``table`` (None if none), cached."""
    try:
        return table[cls]
    except KeyError:
        found = next((table[k] for k in cls.__mro__ if table.get(k) is not None), None)
        table[cls] = found
        return found


class _Printer:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()
        self.keep: list[Any] = []  # named objects stay alive so their ids stay unique
        self.data_owner: dict[int, Any] = {}  # data var id -> the buffer sharing its name

    # -- names -------------------------------------------------------------
    def name(self, obj: Any, hint: str) -> str:
        found = self.names.get(id(obj))
        if found is None:
            hint = hint or "v"
            found, k = hint, 0
            while found in self.taken or keyword.iskeyword(found):
                k += 1
                found = f"{hint}_{k}"
            self.names[id(obj)] = found
            self.taken.add(found)
            self.keep.append(obj)
        return found

    def buffer_name(self, b: Any) -> str:
        """A buffer named like its data var shares the var's name (``B = allocate(...)``; ``B[i]``)."""
        found = self.names.get(id(b))
        if found is not None:
            return found
        data = b.data
        if b.name == data.name and id(data) not in self.data_owner:
            self.data_owner[id(data)] = b
            found = self.name(data, data.name)
            self.names[id(b)] = found
            self.keep.append(b)
            return found
        return self.name(b, b.name)

    # -- expressions -------------------------------------------------------
    def expr(self, e: Any, prec: int = 0) -> str:
        text, p = self.expr_prec(e)
        return f"({text})" if p < prec else text

    def expr_prec(self, e: Any) -> tuple[str, int]:
        cls = type(e)
        infix = _dispatch(_INFIX, cls)
        if infix is not None:
            op, p = infix
            # Left-associative: the right operand binds tighter.  Comparisons chain
            # in Python, so both sides of one must bind tighter than a comparison.
            left = p + 1 if p == _CMP else p
            return f"{self.expr(e.a, left)} {op} {self.expr(e.b, p + 1)}", p
        rule = _dispatch(_EXPR_RULES, cls)
        if rule is not None:
            return rule(self, e)
        return self.generic(e), _ATOM

    def const(self, e: Any, explicit: bool = False) -> tuple[str, int]:
        t, v = e.dtype, e.value
        if t.is_bool:
            return ("True" if v else "False"), _ATOM
        if isinstance(e, E.FloatImm):
            if not math.isfinite(v):
                return f"{t}({repr(v)!r})", _ATOM
            default = str(t) == "float32"
        else:
            default = str(t) == "int32"
        if explicit or not default:
            return f"{t}({v!r})", _ATOM
        return repr(v), (_UNARY if str(v).startswith("-") else _ATOM)

    def cast_operand(self, v: Any) -> str:
        # A constant shows its own dtype, so int64(int32(5)) differs from the constant int64(5).
        return self.const(v, explicit=True)[0] if isinstance(v, (E.IntImm, E.FloatImm)) else self.expr(v)

    def call(self, e: E.Call) -> tuple[str, int]:
        from .function import GlobalVar

        args = [self.expr(a) for a in e.args]
        op = e.op
        if isinstance(op, GlobalVar):
            callee, natural = f"@{op.name_hint}", "int32"
        else:
            name = op.name
            callee = name[4:] if name.startswith("tir.") else name
            if name in _DTYPE_FIRST:
                return f"{callee}({', '.join([repr(str(e.dtype)), *args])})", _ATOM
            natural = _natural_call_dtype(e)
        if natural is None or e.dtype != natural:
            args.append(f"dtype={str(e.dtype)!r}")
        return f"{callee}({', '.join(args)})", _ATOM

    # -- statements --------------------------------------------------------
    def stmt(self, s: Any, depth: int, out: list[str]) -> None:
        rule = _dispatch(_STMT_RULES, type(s))
        if rule is None:
            out.append(_INDENT * depth + self.generic(s))
        else:
            rule(self, s, depth, out)

    def block(self, s: Any, depth: int, out: list[str]) -> None:
        """An indented body; an empty one prints ``pass``."""
        n = len(out)
        self.stmt(s, depth, out)
        if len(out) == n:
            out.append(_INDENT * depth + "pass")

    def stmt_for(self, s: S.For, depth: int, out: list[str]) -> None:
        rng = self.expr(s.extent) if _is_zero(s.min) else f"{self.expr(s.min)}, {self.end(s.min, s.extent)}"
        if s.kind is S.ForKind.THREAD_BINDING:
            head = f"thread_binding({rng}, {s.thread_tag!r})"
        else:
            head = f"{_FOR_HEAD.get(s.kind.value, s.kind.value)}({rng})"
        notes = []
        if s.thread_tag and s.kind is not S.ForKind.THREAD_BINDING:
            notes.append(f"thread_tag={s.thread_tag!r}")
        if s.annotations:
            notes.append(f"annotations={self.value(s.annotations)}")
        note = f"  # {', '.join(notes)}" if notes else ""
        out.append(f"{_INDENT * depth}for {self.expr(s.loop_var)} in {head}:{note}")
        self.block(s.body, depth + 1, out)

    def end(self, lo: Any, extent: Any) -> str:
        """The text of ``lo + extent`` (folded when both are integer constants)."""
        if _is_zero(lo):
            return self.expr(extent)
        if isinstance(lo, E.IntImm) and isinstance(extent, E.IntImm) and lo.dtype == extent.dtype:
            try:
                return self.const(E.IntImm(lo.dtype, lo.value + extent.value))[0]
            except Exception:  # the sum overflows the dtype: print it unfolded
                pass
        return f"{self.expr(lo, _ADD)} + {self.expr(extent, _ADD + 1)}"

    def stmt_if(self, s: S.IfThenElse, depth: int, out: list[str], word: str = "if") -> None:
        pad = _INDENT * depth
        out.append(f"{pad}{word} {self.expr(s.condition)}:")
        self.block(s.then_case, depth + 1, out)
        other = s.else_case
        if isinstance(other, S.IfThenElse):
            self.stmt_if(other, depth, out, "elif")
        elif other is not None:
            out.append(f"{pad}else:")
            self.block(other, depth + 1, out)

    def stmt_allocate(self, s: S.Allocate, depth: int, out: list[str]) -> None:
        ext = ", ".join(self.expr(x) for x in s.extents)
        extra = "" if _is_true(s.condition) else f", condition={self.expr(s.condition)}"
        if s.annotations:
            extra += f", annotations={self.value(s.annotations)}"
        out.append(f"{_INDENT * depth}{self.expr(s.buffer_var)} = allocate([{ext}], "
                   f"{str(s.dtype)!r}, {s.scope!r}{extra})")
        self.stmt(s.body, depth, out)

    def stmt_attr(self, s: S.AttrStmt, depth: int, out: list[str]) -> None:
        target = "None" if s.node is None else self.ref(s.node)
        out.append(f"{_INDENT * depth}with attr({target}, {s.attr_key!r}, {self.expr(s.value)}):")
        self.block(s.body, depth + 1, out)

    def ref(self, n: Any) -> str:
        """A reference to the node an AttrStmt annotates."""
        if isinstance(n, E.PrimExpr):
            return self.expr(n)
        if isinstance(n, Buffer):
            return self.buffer_name(n)
        return self.node(n)

    # -- functions, modules and other nodes --------------------------------
    def func(self, f: Any, name: str, out: list[str]) -> None:
        for p in f.params:  # buffers own the plain names: the body reads them
            b = f.buffer_map.get(p)
            if b is None:
                continue
            if b.data is p:
                self.name(b, b.name)
                self.data_owner[id(p)] = b
            else:
                self.buffer_name(b)
            self.name(p, f"{p.name}_handle" if p.name == b.name else p.name)
        params = ", ".join(f"{self.expr(p)}: {p.dtype}" for p in f.params)
        shown = dict(f.attrs)
        plan = shown.pop("loom.device_plan", None)  # a heterogeneous build's plan reads best as lines
        if plan is not None:
            out.append("# device plan (functions and copies, in order):")
            out.extend(f"#   {line}" for line in plan)
        attrs = f"(attrs={self.value(shown)})" if shown else ""
        ret = "" if f.ret_type == "int32" else f" -> {f.ret_type}"
        out.append(f"@prim_func{attrs}")
        out.append(f"def {name}({params}){ret}:")
        for p in f.params:
            b = f.buffer_map.get(p)
            if b is not None:
                out.append(f"{_INDENT}{self.buffer_name(b)} = match_buffer({self.expr(p)}, {self.buffer_sig(b, p)})")
        self.block(f.body, 1, out)

    def buffer_sig(self, b: Any, handle: Any = None) -> str:
        parts = [f"[{', '.join(self.expr(x) for x in b.shape)}]", repr(str(b.dtype))]
        if b.data is not handle and self.name(b.data, b.data.name) != self.buffer_name(b):
            parts.append(f"data={self.expr(b.data)}")
        if b.strides:
            parts.append(f"strides=[{', '.join(self.expr(x) for x in b.strides)}]")
        if not _is_zero(b.elem_offset):
            parts.append(f"elem_offset={self.expr(b.elem_offset)}")
        if b.scope:
            parts.append(f"scope={b.scope!r}")
        if b.data_alignment != 64:
            parts.append(f"data_alignment={b.data_alignment}")
        if b.offset_factor != 1:
            parts.append(f"offset_factor={b.offset_factor}")
        return ", ".join(parts)

    def node(self, n: Any) -> str:
        if isinstance(n, S.Stmt):
            out: list[str] = []
            self.block(n, 0, out)
            return "\n".join(out)
        if isinstance(n, E.PrimExpr):
            return self.expr(n)
        rule = _dispatch(_NODE_RULES, type(n))
        if rule is not None:
            return rule(self, n)
        if isinstance(n, Node) and type(n).__str__ is not Node.__str__:
            return str(n)  # a node type with text of its own (a Target)
        return self.generic(n)

    def module(self, m: Any) -> str:
        from .function import PrimFunc

        out = [f"# IRModule(attrs={self.value(m.attrs)})" if m.attrs else "# IRModule"]
        for name in sorted(m.functions):
            f = m.functions[name]
            out.append("")
            sub = _Printer()  # each function has its own namespace
            if isinstance(f, PrimFunc):
                sub.func(f, name, out)
            else:
                out.append(f"{name} = {sub.node(f)}")
        return "\n".join(out)

    def generic(self, n: Any) -> str:
        try:
            fields = fields_of(type(n))
        except Exception:
            return f"<{type(n).__name__}>"
        parts = [f"{f.name}={self.value(getattr(n, f.name))}" for f in fields]
        return f"{type(n).__name__}({', '.join(parts)})"

    def value(self, v: Any) -> str:
        if isinstance(v, Node):
            return self.node(v)
        if isinstance(v, (tuple, list)):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, dict):
            items = list(v.items())
            if all(isinstance(k, str) for k, _ in items):
                items.sort(key=lambda kv: kv[0])
            return "{" + ", ".join(f"{self.value(k)}: {self.value(x)}" for k, x in items) + "}"
        if isinstance(v, str):  # StrEnum members included
            return repr(str(v))
        if isinstance(v, DataType):
            return repr(str(v))
        return repr(v)


def _natural_call_dtype(e: E.Call) -> Any:
    """The dtype a builder gives this call, so that only a surprising one is printed."""
    if not e.args:
        return None
    last = e.args[-1].dtype
    return DataType("bool", 1, last.lanes) if e.op.name == "tir.isnan" else last


def _is_zero(e: Any) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


def _is_true(e: Any) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def _args(p: _Printer, *xs: Any) -> str:
    return ", ".join(p.expr(x) if isinstance(x, Node) else repr(x) for x in xs)


_EXPR_RULES: dict[type, Callable[[_Printer, Any], tuple[str, int]]] = {
    E.Var: lambda p, e: (p.name(e, e.name), _ATOM),
    E.IntImm: lambda p, e: p.const(e),
    E.FloatImm: lambda p, e: p.const(e),
    E.StringImm: lambda p, e: (repr(e.value), _ATOM),
    E.Cast: lambda p, e: (f"{e.dtype}({p.cast_operand(e.value)})", _ATOM),
    E.Div: lambda p, e: ((f"{p.expr(e.a, _MUL)} / {p.expr(e.b, _MUL + 1)}", _MUL) if e.dtype.is_float
                         else (f"truncdiv({_args(p, e.a, e.b)})", _ATOM)),
    **{cls: (lambda fn: lambda p, e: (f"{fn}({_args(p, e.a, e.b)})", _ATOM))(fn) for cls, fn in _CALL_FORM.items()},
    E.Not: lambda p, e: (f"not {p.expr(e.a, _ADD)}", _NOT),
    E.Select: lambda p, e: (f"select({_args(p, e.condition, e.true_value, e.false_value)})", _ATOM),
    E.BufferLoad: lambda p, e: (f"{p.buffer_name(e.buffer)}[{', '.join(p.expr(i) for i in e.indices) or '()'}]", _ATOM),
    E.Ramp: lambda p, e: (f"ramp({_args(p, e.base, e.stride, e.lanes)})", _ATOM),
    E.Broadcast: lambda p, e: (f"broadcast({_args(p, e.value, e.lanes)})", _ATOM),
    E.Shuffle: lambda p, e: (f"shuffle([{_args(p, *e.vectors)}], [{_args(p, *e.indices)}])", _ATOM),
    E.Let: lambda p, e: (f"let {p.expr(e.var)} = {p.expr(e.value, _OR)} in {p.expr(e.body)}", _LET),
    E.Call: lambda p, e: p.call(e),
}


def _line(fmt: Callable[[_Printer, Any], str], body: str | None = None, indent: bool = False):
    """A statement printed as one line, optionally followed by its body."""

    def rule(p: _Printer, s: Any, depth: int, out: list[str]) -> None:
        out.append(_INDENT * depth + fmt(p, s))
        if body is not None:
            (p.block if indent else p.stmt)(getattr(s, body), depth + indent, out)

    return rule


def _seq(p: _Printer, s: S.SeqStmt, depth: int, out: list[str]) -> None:
    for x in s.seq:
        p.stmt(x, depth, out)


def _evaluate(p: _Printer, s: S.Evaluate, depth: int, out: list[str]) -> None:
    v = s.value
    text = "pass" if isinstance(v, E.IntImm) and v.value == 0 and str(v.dtype) == "int32" else p.expr(v)
    out.append(_INDENT * depth + text)


_STMT_RULES: dict[type, Callable[[_Printer, Any, int, list[str]], None]] = {
    S.SeqStmt: _seq,
    S.Evaluate: _evaluate,
    S.For: _Printer.stmt_for,
    S.IfThenElse: _Printer.stmt_if,
    S.Allocate: _Printer.stmt_allocate,
    S.AttrStmt: _Printer.stmt_attr,
    S.BufferStore: _line(lambda p, s: f"{p.buffer_name(s.buffer)}[{', '.join(p.expr(i) for i in s.indices) or '()'}]"
                                      f" = {p.expr(s.value)}"),
    S.LetStmt: _line(lambda p, s: f"{p.expr(s.var)}: {s.var.dtype} = {p.expr(s.value)}", "body"),
    S.AssertStmt: _line(lambda p, s: f"assert {p.expr(s.condition)}, {p.expr(s.message)}", "body"),
    S.While: _line(lambda p, s: f"while {p.expr(s.condition)}:", "body", indent=True),
}


def _node_rules() -> dict[type, Callable[[_Printer, Any], str]]:
    from .container import Array, Map
    from .function import GlobalVar, IRModule, PrimFunc
    from .op import Op

    def prim_func(p: _Printer, f: Any) -> str:
        out: list[str] = []
        p.func(f, str(f.attrs.get("global_symbol", "main")), out)
        return "\n".join(out)

    def iter_var(p: _Printer, n: Any) -> str:
        dom = p.node(n.dom) if n.dom is not None else "None"
        tag = f", {n.thread_tag!r}" if n.thread_tag else ""
        return f"iter_var({p.expr(n.var)}, {dom}, {n.iter_type!r}{tag})"

    return {
        PrimFunc: prim_func,
        IRModule: _Printer.module,
        Buffer: lambda p, b: f"Buffer({p.buffer_name(b)}, {p.buffer_sig(b)})",
        E.Range: lambda p, r: f"range({p.expr(r.min)}, {p.end(r.min, r.extent)})",
        E.IterVar: iter_var,
        Array: lambda p, a: p.value(a.items),
        Map: lambda p, m: p.value(m.data),
        GlobalVar: lambda p, g: f"@{g.name_hint}",
        Op: lambda p, o: f"Op({o.name!r})",
    }


_NODE_RULES: dict[type, Callable[[_Printer, Any], str]] = {}


def _register(table: dict[type, Any], cls: type, rule: Any) -> None:
    table[cls] = rule
    for k in [k for k, v in table.items() if v is None]:  # forget cached misses
        del table[k]


def register_expr_printer(cls: type, rule: Callable[[Any, Any], tuple[str, int]]) -> None:
    """Print expressions of ``cls`` with ``rule(printer, e) -> (text, precedence)``.

    Node families defined outside ``loom.ir`` (tensor expressions) register here.
    Use ``ATOM`` as the precedence of text that needs no parentheses.
    """
    _register(_EXPR_RULES, cls, rule)


def register_stmt_printer(cls: type, rule: Callable[[Any, Any, int, list[str]], None]) -> None:
    """Print statements of ``cls`` with ``rule(printer, s, depth, out_lines)``."""
    _register(_STMT_RULES, cls, rule)


def register_node_printer(cls: type, rule: Callable[[Any, Any], str]) -> None:
    """Print other nodes of ``cls`` with ``rule(printer, n) -> text``."""
    if not _NODE_RULES:
        _NODE_RULES.update(_node_rules())
    _register(_NODE_RULES, cls, rule)


ATOM = _ATOM
INDENT = _INDENT


def to_text(node: Any) -> str:
    """The readable text of ``node`` (any node, or a plain value holding nodes).

    >>> import loom
    >>> a, b = loom.var("a"), loom.var("a")
    >>> to_text((a - b) * loom.const(5, "int64").astype("int32"))
    '(a - a_1) * 5'
    """
    if not _NODE_RULES:
        _NODE_RULES.update(_node_rules())
    try:
        with deep_recursion("printing"):  # deep sums print recursively
            return _Printer().value(node)
    except Exception as err:  # a printer must never hide the real error
        return _unprintable(node, err)


def _unprintable(node: Any, err: BaseException) -> str:
    try:
        reason = f"{type(err).__name__}: {err}"
    except Exception:
        reason = type(err).__name__
    return f"<{type(node).__name__} (unprintable: {reason[:200]})>"
