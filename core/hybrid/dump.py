"""Hybrid script text of a scheduled statement: the source ``loom.hybrid.build`` writes.

:func:`dump_source` prints the statement a schedule lowers to (before storage
flattening: loops, ifs, lets, asserts and stores to tensors) as one hybrid
function.  Its parameters are the input tensors and variables; each output is
declared with ``output_tensor`` and returned; every other tensor the statement
realizes becomes an ``allocate`` at the place of its realization, indexed from
zero (a producer computed at a loop keeps one row, say).  Loops keep their kind
(``range``, ``unroll``, ``parallel``, ``vectorize``), a thread binding is a
``bind`` loop, and the guard of an uneven split is ``if likely(...)``.
Annotations without a hybrid spelling (pragmas, storage alignment, double
buffering) are left out: they change how the code runs, never its result.

The text parses back with :func:`loom.hybrid.script` to the same computation,
and runs as Python on numpy arrays.  Names are the IR's, made into identifiers
(``i.outer`` is ``i_outer``) and unique.  Constants keep their dtype: a literal
whose dtype its context would not give it is written as a cast (``int64(3)``,
``float32(0.5)`` as a call argument).
"""

from __future__ import annotations

import builtins
import keyword
import math
import re
from typing import Any, Callable, Optional, Sequence

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.producer import ProducerLoad, ProducerRealize, ProducerStore
from ..ir.recursion import deep_recursion
from ..ir.stmt import AssertStmt, AttrStmt, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt
from ..te.operation import HybridOp
from ..te.tensor import Tensor
from .calls import KEYWORDS
from .runtime import SCOPES

__all__ = ["dump_source"]

_INDENT = "    "
# Python's precedence levels, loosest first (a conditional expression binds loosest of all).
_IF, _OR, _AND, _NOT, _CMP, _ADD, _MUL, _UNARY, _ATOM = 0, 1, 2, 3, 4, 5, 6, 7, 9
_INFIX: dict[type, tuple[str, int]] = {
    E.Add: ("+", _ADD), E.Sub: ("-", _ADD), E.Mul: ("*", _MUL), E.FloorDiv: ("//", _MUL),
    E.FloorMod: ("%", _MUL), E.And: ("and", _AND), E.Or: ("or", _OR),
    E.EQ: ("==", _CMP), E.NE: ("!=", _CMP), E.LT: ("<", _CMP), E.LE: ("<=", _CMP),
    E.GT: (">", _CMP), E.GE: (">=", _CMP),
}
#: Intrinsics with a hybrid keyword of the same meaning.
_CALLS = {"tir.exp": "exp", "tir.log": "log", "tir.sqrt": "sqrt", "tir.tanh": "tanh", "tir.sigmoid": "sigmoid",
          "tir.floor": "floor", "tir.ceil": "ceil", "tir.power": "power", "tir.popcount": "popcount",
          "tir.abs": "abs", "tir.fabs": "abs", "tir.likely": "likely"}
_LOOPS = {"serial": "range", "unrolled": "unroll", "parallel": "parallel", "vectorized": "vectorize"}
#: The casts of the language, which are also the dtypes a constant can be written in.
_CASTS = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                    "float16", "float32", "float64"})
_RESERVED = set(KEYWORDS) | set(keyword.kwlist) | {n for n in dir(builtins) if not n.startswith("_")}

Text = tuple[str, int]  # an expression's text and its precedence


def _identifier(hint: str) -> str:
    name = re.sub(r"\W", "_", hint) or "v"
    return f"v_{name}" if name[0].isdigit() else name


def _is_const(e: Any) -> bool:
    return isinstance(e, (E.IntImm, E.FloatImm))


def _key(t: Tensor) -> tuple[int, int]:
    return id(t.op), t.value_index


def _tensor_hint(t: Tensor) -> str:
    """A tensor's name: a hybrid operation's output keeps the name its script gave it."""
    if isinstance(t.op, HybridOp):
        return t.op.outputs[t.value_index].name
    return t.name if t.op.num_outputs == 1 else f"{t.op.name}_v{t.value_index}"


class _Dumper:
    def __init__(self, name: str) -> None:
        self.taken = set(_RESERVED) | {name}
        self.vars: dict[int, str] = {}
        self.tensors: dict[tuple[int, int], str] = {}
        self.offsets: dict[tuple[int, int], list[E.PrimExpr]] = {}
        self.keep: list[Any] = []  # named objects stay alive, so their ids stay theirs
        self.lines: list[str] = []

    # -- names ----------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        base = _identifier(hint)
        found, k = base, 0
        while found in self.taken:
            k += 1
            found = f"{base}_{k}"
        self.taken.add(found)
        return found

    def bind_var(self, v: E.Var, body: Callable[[str], None]) -> None:
        """Name ``v`` for the duration of ``body`` (a loop or let binds it there only)."""
        old = self.vars.get(id(v))
        self.vars[id(v)] = name = self.fresh(v.name)
        self.keep.append(v)
        try:
            body(name)
        finally:
            if old is None:
                self.vars.pop(id(v))
            else:
                self.vars[id(v)] = old

    def var(self, v: E.Var) -> str:
        found = self.vars.get(id(v))
        if found is None:
            raise LoomValueError(f"hybrid.build: the scheduled statement uses the variable {v.name}, which is "
                                 f"neither a loop variable nor one of the inputs; pass it in inputs (a size "
                                 f"variable of a tensor's shape, say)")
        return found

    def tensor(self, t: Tensor, what: str) -> str:
        found = self.tensors.get(_key(t))
        if found is None:
            raise LoomValueError(f"hybrid.build: the scheduled statement {what} tensor {t.name}, which is neither "
                                 f"an input, an output nor computed inside; add it to the inputs or the outputs")
        return found

    # -- expressions ------------------------------------------------------------------------------
    def text(self, e: E.PrimExpr, weak: bool = False) -> str:
        return self.expr(e, weak)[0]

    def operand(self, e: E.PrimExpr, level: int, weak: bool = False) -> str:
        """``e`` as an operand that must bind at least as tightly as ``level``."""
        s, p = self.expr(e, weak)
        return s if p >= level else f"({s})"

    def expr(self, e: E.PrimExpr, weak: bool = False) -> Text:
        """``weak``: a bare literal gets the right dtype here (an operand beside a non-constant, a stored value)."""
        if e.dtype.lanes != 1:
            raise LoomValueError(f"hybrid.build: the vector expression {e} has no hybrid spelling; hybrid "
                                 f"script is scalar (vectorize loops instead)")
        if isinstance(e, (E.IntImm, E.FloatImm)):
            return self.const(e, weak)
        if isinstance(e, E.StringImm):
            return repr(e.value), _ATOM
        if isinstance(e, E.Var):
            return self.var(e), _ATOM
        if isinstance(e, ProducerLoad):
            return f"{self.tensor(e.producer, 'reads')}[{self.indices(e.producer, e.indices)}]", _ATOM
        infix = _INFIX.get(type(e))
        if infix is not None or isinstance(e, E.Div) and e.dtype.is_float:
            symbol, level = infix if infix is not None else ("/", _MUL)
            a, b = e.a, e.b  # type: ignore[attr-defined]
            # Left-associative: the right operand of the same level needs parentheses; comparisons never chain.
            left = self.operand(a, level + (level == _CMP), not _is_const(b))
            right = self.operand(b, level + 1, not _is_const(a))
            return f"{left} {symbol} {right}", level
        if isinstance(e, (E.Min, E.Max)):
            return self.call("min" if isinstance(e, E.Min) else "max", [e.a, e.b], weak_pairs=True), _ATOM
        if isinstance(e, E.Not):
            return f"not {self.operand(e.a, _NOT)}", _NOT
        if isinstance(e, E.Select):
            return self.conditional(e.condition, e.true_value, e.false_value)
        if isinstance(e, E.Cast):
            return self.cast(e)
        if isinstance(e, E.Call):
            return self.intrinsic(e)
        what = type(e).__name__
        if isinstance(e, (E.Div, E.Mod)):
            what = "integer truncating division (Div/Mod)" if e.dtype.is_integer else "a floating-point remainder"
        raise LoomValueError(f"hybrid.build: {what} has no hybrid spelling (in {e})")

    def const(self, e: E.IntImm | E.FloatImm, weak: bool) -> Text:
        t = e.dtype
        if t.is_bool:
            return ("True" if e.value else "False"), _ATOM
        if isinstance(e, E.FloatImm) and not math.isfinite(e.value):
            raise LoomValueError(f"hybrid.build: the constant {e.value} has no hybrid spelling")
        if str(t) not in _CASTS:
            raise LoomValueError(f"hybrid.build: {t} constants have no hybrid spelling (casts: {sorted(_CASTS)})")
        literal = repr(float(e.value)) if isinstance(e, E.FloatImm) else str(int(e.value))
        if str(t) == "int32" or weak:  # a bare int is int32; beside an expression a literal takes its dtype
            return literal, (_UNARY if literal.startswith("-") else _ATOM)
        return f"{t}({literal})", _ATOM

    def call(self, name: str, args: Sequence[E.PrimExpr], weak_pairs: bool = False) -> str:
        """``name(args)``; with ``weak_pairs`` a literal beside a non-constant argument is bare (min, max)."""
        texts = [self.text(a, weak_pairs and not all(_is_const(b) for b in args)) for a in args]
        return f"{name}({', '.join(texts)})"

    def conditional(self, c: E.PrimExpr, t: E.PrimExpr, f: E.PrimExpr) -> Text:
        then = self.operand(t, _OR, not _is_const(f))
        other = self.operand(f, _OR, not _is_const(t))
        return f"{then} if {self.operand(c, _OR)} else {other}", _IF

    def cast(self, e: E.Cast) -> Text:
        t, v = e.dtype, e.value
        if t == v.dtype:
            return self.expr(v)
        if t.is_bool:  # a number is true when it is not zero
            return f"{self.operand(v, _CMP + 1)} != {'0.0' if v.dtype.is_float else '0'}", _CMP
        if str(t) not in _CASTS:
            raise LoomValueError(f"hybrid.build: a cast to {t} has no hybrid spelling (casts: {sorted(_CASTS)})")
        return f"{t}({self.text(v)})", _ATOM

    def intrinsic(self, e: E.Call) -> Text:
        name = getattr(e.op, "name", str(e.op))
        if name == "tir.if_then_else":
            return self.conditional(*e.args)
        keyword_name = _CALLS.get(name)
        if keyword_name is None:
            raise LoomValueError(f"hybrid.build: the call {name} has no hybrid spelling (hybrid keywords: "
                                 f"{sorted(set(_CALLS.values()))})")
        return self.call(keyword_name, e.args), _ATOM

    def indices(self, t: Tensor, idx: Sequence[E.PrimExpr]) -> str:
        """The indices of an access; a tensor realized from a nonzero corner is indexed from that corner."""
        if not idx:
            raise LoomValueError(f"hybrid.build: tensor {t.name} has no dimensions; hybrid tensors have at least one")
        mins = self.offsets.get(_key(t))
        if mins is not None:
            from ..arith import Analyzer

            an = Analyzer()
            idx = [i if _is_zero(m) else an.simplify(ops.sub(i, m)) for i, m in zip(idx, mins)]
        return ", ".join(self.text(i) for i in idx)

    # -- statements -----------------------------------------------------------------------------
    def emit(self, depth: int, line: str) -> None:
        self.lines.append(_INDENT * depth + line)

    def block(self, s: Optional[Stmt], depth: int) -> None:
        """The statements of ``s`` at ``depth``; an empty block is ``pass``."""
        before = len(self.lines)
        if s is not None:
            self.stmt(s, depth)
        if len(self.lines) == before:
            self.emit(depth, "pass")

    def stmt(self, s: Stmt, depth: int) -> None:
        if isinstance(s, SeqStmt):
            for item in s.seq:
                self.stmt(item, depth)
        elif isinstance(s, ProducerStore):
            target = f"{self.tensor(s.producer, 'writes')}[{self.indices(s.producer, s.indices)}]"
            self.emit(depth, f"{target} = {self.text(s.value, weak=True)}")
        elif isinstance(s, For):
            self.loop(s, depth)
        elif isinstance(s, IfThenElse):
            self.emit(depth, f"if {self.text(s.condition)}:")
            self.block(s.then_case, depth + 1)
            if s.else_case is not None and not _is_no_op(s.else_case):
                self.emit(depth, "else:")
                self.block(s.else_case, depth + 1)
        elif isinstance(s, LetStmt):
            self.let(s, depth)
        elif isinstance(s, AttrStmt):
            self.attr(s, depth)
        elif isinstance(s, AssertStmt):
            self.emit(depth, f"assert {self.text(s.condition)}, {self.text(s.message)}")
            self.stmt(s.body, depth)
        elif isinstance(s, ProducerRealize):
            self.realize(s, depth)
        elif isinstance(s, Evaluate) and _is_const(s.value):
            pass  # a no-op
        else:
            raise LoomValueError(f"hybrid.build: {type(s).__name__} has no hybrid spelling; build dumps the "
                                 f"statement of a schedule (loops, ifs, lets, asserts, tensor stores)")

    def let(self, s: LetStmt, depth: int) -> None:
        value = self.text(s.value)

        def body(name: str) -> None:
            self.emit(depth, f"{name} = {value}")
            self.stmt(s.body, depth)

        self.bind_var(s.var, body)

    def loop(self, s: For, depth: int) -> None:
        extent = self.text(s.extent)
        if s.kind.value == "thread_binding":
            if not _is_zero(s.min):
                raise LoomValueError(f"hybrid.build: thread loop {s.loop_var.name} starts at {s.min}, not 0")
            head = f"bind({s.thread_tag!r}, {extent})"
        else:
            if _is_zero(s.min):
                bounds = extent
            else:
                from ..arith import Analyzer

                bounds = f"{self.text(s.min)}, {self.text(Analyzer().simplify(ops.add(s.min, s.extent)))}"
            head = f"{_LOOPS[s.kind.value]}({bounds})"

        def body(name: str) -> None:
            self.emit(depth, f"for {name} in {head}:")
            self.block(s.body, depth + 1)

        self.bind_var(s.loop_var, body)

    def attr(self, s: AttrStmt, depth: int) -> None:
        if s.attr_key != "thread_extent":
            if s.attr_key == "virtual_thread":
                raise LoomValueError("hybrid.build: virtual threads (bind to 'vthread' in a schedule) have no "
                                     "hybrid spelling")
            self.stmt(s.body, depth)  # an annotation: how the code runs, not what it computes
            return
        iv = s.node
        tag = iv.thread_tag or iv.var.name
        extent = self.text(s.value)

        def body(name: str) -> None:
            self.emit(depth, f"for {name} in bind({tag!r}, {extent}):")
            self.block(s.body, depth + 1)

        self.bind_var(iv.var, body)

    def realize(self, s: ProducerRealize, depth: int) -> None:
        key = _key(s.producer)
        if key in self.tensors:  # an input or an output: the caller's tensor
            self.stmt(s.body, depth)
            return
        scope = s.storage_scope or "global"
        if scope not in SCOPES:
            raise LoomValueError(f"hybrid.build: tensor {s.producer.name} is stored in scope {scope!r}; hybrid "
                                 f"allocate takes {list(SCOPES)}")
        name = self.fresh(_tensor_hint(s.producer))
        shape = _shape_text([self.text(r.extent) for r in s.bounds])
        self.emit(depth, f"{name} = allocate({shape}, {str(s.producer.dtype)!r}, {scope!r})")
        self.tensors[key] = name
        self.offsets[key] = [r.min for r in s.bounds]
        self.keep.append(s.producer)
        try:
            self.stmt(s.body, depth)
        finally:
            del self.tensors[key], self.offsets[key]


def _is_zero(e: Any) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


def _is_no_op(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and _is_const(s.value)


def _shape_text(sizes: list[str]) -> str:
    return f"({sizes[0]},)" if len(sizes) == 1 else f"({', '.join(sizes)})"


def dump_source(stmt: Stmt, inputs: Sequence[Any], outputs: Sequence[Tensor], name: str = "hybrid_func") -> str:
    """The hybrid function ``name(inputs)`` that runs ``stmt`` and returns ``outputs`` (see the module doc).

    ``stmt`` is a statement over tensors, as :func:`loom.te.schedule_ops.schedule_to_stmt`
    makes of a schedule; ``inputs`` are tensors and variables, ``outputs`` tensors.

    >>> import loom
    >>> from loom.te.schedule_ops import schedule_to_stmt
    >>> A = loom.placeholder((10,), name="A")
    >>> B = loom.compute((10,), lambda i: A[i] * 2.0, name="B")
    >>> s = loom.create_schedule(B.op)
    >>> xo, xi = s[B].split(B.op.axis[0], factor=4)
    >>> print(dump_source(schedule_to_stmt(s), [A], [B], "double"))
    def double(A):
        B = output_tensor((10,), 'float32')
        for i_outer in range(3):
            for i_inner in range(4):
                if likely(i_outer * 4 + i_inner < 10):
                    B[i_outer * 4 + i_inner] = A[i_outer * 4 + i_inner] * 2.0
        return B
    """
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name in KEYWORDS:
        raise LoomValueError(f"hybrid.build: the function name must be a Python identifier that is not a keyword, "
                             f"got {name!r}")
    if not isinstance(stmt, Stmt):
        raise LoomTypeError(f"dump_source takes a statement, got {type(stmt).__name__}")
    d = _Dumper(name)
    params: list[str] = []
    for k, a in enumerate(inputs):
        if isinstance(a, Tensor):
            if _key(a) in d.tensors:
                raise LoomValueError(f"hybrid.build: input {k} (tensor {a.name}) is given twice")
            d.tensors[_key(a)] = found = d.fresh(_tensor_hint(a))
        elif isinstance(a, E.Var):
            if id(a) in d.vars:
                raise LoomValueError(f"hybrid.build: input {k} (variable {a.name}) is given twice")
            d.vars[id(a)] = found = d.fresh(a.name)
        else:
            raise LoomTypeError(f"hybrid.build: input {k} must be a Tensor or a Var, got {type(a).__name__}")
        d.keep.append(a)
        params.append(found)
    if not outputs:
        raise LoomValueError("hybrid.build needs at least one output tensor")
    returns: list[str] = []
    for k, t in enumerate(outputs):
        if not isinstance(t, Tensor):
            raise LoomTypeError(f"hybrid.build: output {k} must be a Tensor, got {type(t).__name__}")
        if _key(t) in d.tensors:
            raise LoomValueError(f"hybrid.build: output {k} (tensor {t.name}) is also an input or another output")
        d.tensors[_key(t)] = found = d.fresh(_tensor_hint(t))
        d.keep.append(t)
        returns.append(found)
    d.emit(0, f"def {name}({', '.join(params)}):")
    for t, out in zip(outputs, returns):
        d.emit(1, f"{out} = output_tensor({_shape_text([d.text(x) for x in t.shape])}, {str(t.dtype)!r})")
    with deep_recursion(f"hybrid.build {name}"):
        d.stmt(stmt, 1)
    d.emit(1, f"return {', '.join(returns)}")
    return "\n".join(d.lines) + "\n"
