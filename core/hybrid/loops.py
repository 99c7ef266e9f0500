"""Loops of hybrid scripts: ``range``/``serial``, ``unroll``, ``parallel``, ``vectorize``, ``const_range``, ``bind``.

A loop keyword becomes a ``For`` of that kind over a fresh loop variable
(``range(a, b)`` starts at ``a``); ``bind(tag, n)`` becomes a
``thread_extent`` region of a thread axis; ``const_range`` repeats its body
while parsing, the loop variable a constant in each copy, which is what lets
the body index containers.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Optional

from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import collect
from ..ir.producer import ProducerLoad
from ..ir.stmt import AttrStmt, For, LetStmt, Stmt, seq
from .calls import LOOP_KINDS
from .expr import describe
from .scope import Symbol

if TYPE_CHECKING:
    from .errors import HybridSyntaxError
    from .scope import Scopes

__all__ = ["LoopMixin", "THREAD_TAGS", "MAX_CONST_RANGE_COPIES"]

#: The most copies of loop bodies the ``const_range`` loops of one hybrid function may make while
#: parsing (nested loops multiply).  Each copy is parsed anew, so ``const_range(10**8)`` would
#: never finish; past this, iterate with ``range`` (or ``unroll``, see loom.transform.unroll).
MAX_CONST_RANGE_COPIES = 8192

THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z", "blockIdx.x", "blockIdx.y", "blockIdx.z", "vthread")


class LoopMixin:
    """The loop half of :class:`~loom.hybrid.parser.HybridParser`."""

    if TYPE_CHECKING:  # provided by HybridParser and ExprMixin
        scopes: Scopes

        def visit(self, node: ast.AST) -> Any: ...
        def error(self, node: Optional[ast.AST], reason: str) -> HybridSyntaxError: ...
        def segment(self, node: ast.AST) -> str: ...
        def expr(self, v: Any, node: ast.AST) -> E.PrimExpr: ...
        def const_int(self, v: Any) -> Any: ...
        def block(self, stmts: list[ast.stmt], symbols: Optional[dict[str, Symbol]] = None,
                  top: bool = False) -> Stmt: ...
        def resolve_keyword(self, func: ast.AST) -> Any: ...

    const_copies = 0  # body copies the const_range loops parsed so far make, in all

    def loop_keyword(self, it: ast.AST) -> tuple[str, Any]:
        """``(hybrid loop keyword, loom.language keyword or None)`` of a loop's iterator, or an error."""
        if isinstance(it, ast.Call):
            kw = self.resolve_keyword(it.func)
            if kw is not None and getattr(kw, "loop", False):
                return kw.hybrid, kw
            if isinstance(it.func, ast.Name) and it.func.id in LOOP_KINDS and self.scopes.lookup(it.func.id) is None:
                return it.func.id, None
        raise self.error(it, f"a hybrid loop iterates over one of {sorted(LOOP_KINDS)} (or loom.language's "
                             f"T.serial, T.parallel, T.vectorized, T.unroll, T.thread_binding, T.grid), got "
                             f"{self.segment(it)}")

    def visit_For(self, node: ast.For) -> Any:
        it = node.iter
        if node.orelse:
            raise self.error(node, "for ... else is not supported")
        keyword, kw = self.loop_keyword(it)
        assert isinstance(it, ast.Call)
        spelled = self.segment(it.func)
        if keyword == "grid":
            return self.grid_loop(node, it)
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "a loop variable must be a single name")
        name, kind = node.target.id, LOOP_KINDS[keyword]
        if self.scopes.lookup(name) is not None:
            raise self.error(node.target, f"the loop variable {name} shadows a name already declared here; "
                                          f"pick another name")
        if it.keywords and (kw is None or kw.adapt is None):
            raise self.error(it, f"{spelled}() takes positional arguments only")
        args = [self.visit(a) for a in it.args]
        if kw is not None and kw.adapt is not None:
            args, _ = kw.adapt(self, it, args, {k.arg: self.visit(k.value) for k in it.keywords})
        if kind == "bind":
            if len(args) != 2:
                raise self.error(it, "bind takes a thread tag and an extent: bind('threadIdx.x', n)")
            iv, ext = self.thread_loop(args[0], args[1], it)
            body = self.block(node.body, {name: Symbol("loop", iv.var, node.target)})
            return AttrStmt(iv, "thread_extent", ext, body)
        if not 1 <= len(args) <= 2:
            raise self.error(it, f"{spelled}() takes (extent) or (begin, end); a step is not supported")
        lo, hi = (0, args[0]) if len(args) == 1 else args
        if kind == "const":
            return self.const_loop(name, lo, hi, node)
        begin, extent, lets = self.loop_extent(lo, hi, it)
        var = E.Var(name, begin.dtype if begin.dtype.bits >= extent.dtype.bits else extent.dtype)
        begin, extent = ops.cast(begin, var.dtype), ops.cast(extent, var.dtype)
        body = self.block(node.body, {name: Symbol("loop", var, node.target)})
        if isinstance(extent, E.IntImm) and extent.value <= 0:
            return None  # an empty range: Python runs the body no time
        out: Stmt = For(var, begin, extent, kind, body)
        for v, value in reversed(lets):
            out = LetStmt(v, value, out)
        return out

    def grid_loop(self, node: ast.For, it: ast.Call) -> Any:
        """``for i, j in T.grid(m, n)``: serial loops nested in order, one per name."""
        names = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if not all(isinstance(n, ast.Name) for n in names) or len(names) != len(it.args) or it.keywords:
            raise self.error(node, "T.grid(e1, e2, ...) takes one extent per loop variable: "
                                   "for i, j in T.grid(m, n)")
        loops: list[tuple[E.Var, E.PrimExpr, E.PrimExpr, list]] = []
        symbols: dict[str, Symbol] = {}
        for n, a in zip(names, it.args):
            assert isinstance(n, ast.Name)
            if self.scopes.lookup(n.id) is not None or n.id in symbols:
                raise self.error(n, f"the loop variable {n.id} shadows a name already declared here; pick another")
            begin, extent, lets = self.loop_extent(0, self.visit(a), a)
            var = E.Var(n.id, extent.dtype)
            loops.append((var, ops.cast(begin, var.dtype), extent, lets))
            symbols[n.id] = Symbol("loop", var, n)
        out: Stmt = self.block(node.body, symbols)
        for var, begin, extent, lets in reversed(loops):
            if isinstance(extent, E.IntImm) and extent.value <= 0:
                return None
            out = For(var, begin, extent, "serial", out)
            for v, value in reversed(lets):
                out = LetStmt(v, value, out)
        return out

    def const_loop(self, name: str, lo: Any, hi: Any, node: ast.For) -> Stmt:
        """``const_range``: the body once per value, the loop variable a constant in each copy."""
        bounds = [self.const_int(v) for v in (lo, hi)]
        if None in bounds:
            raise self.error(node.iter, "const_range needs constant bounds (numbers, or shapes of constant size)")
        count = max(0, bounds[1] - bounds[0])
        # Counted every time this loop is parsed (once per copy of enclosing const_range bodies, whose
        # bounds may differ), before its copies are: the copies ever parsed stay within the limit.
        self.const_copies += count
        if self.const_copies > MAX_CONST_RANGE_COPIES:
            raise self.error(node.iter, f"const_range of {name} copies its body {count} times, which makes "
                                        f"{self.const_copies} const_range copies in the function so far, more than "
                                        f"the limit of {MAX_CONST_RANGE_COPIES} "
                                        f"(loom.hybrid.loops.MAX_CONST_RANGE_COPIES); iterate with range() "
                                        f"(a loop) instead")
        return seq(*[self.block(node.body, {name: Symbol("loop", k, node.target)}) for k in range(*bounds)])

    def loop_extent(self, lo: Any, hi: Any, node: ast.AST) -> tuple[E.PrimExpr, E.PrimExpr, list[tuple[E.Var, Any]]]:
        """``(min, extent, lets)`` of ``range(lo, hi)``: bounds that read memory are let-bound before the loop,
        so they are read once, as Python evaluates ``range(...)`` once."""
        lo, hi = self.expr(lo, node), self.expr(hi, node)
        for b in (lo, hi):
            if not b.dtype.is_integer:
                raise self.error(node, f"loop bounds must be integers, got {b.dtype}")
        lets: list[tuple[E.Var, Any]] = []

        def once(b: E.PrimExpr, hint: str) -> E.PrimExpr:
            if not collect(b, lambda n: isinstance(n, ProducerLoad)):
                return b
            v = E.Var(f"loop_{hint}", b.dtype)
            lets.append((v, b))
            return v

        begin = once(lo, "begin")
        return begin, once(ops.sub(hi, begin), "extent"), lets

    def thread_loop(self, tag: Any, extent: Any, node: ast.Call) -> tuple[E.IterVar, E.PrimExpr]:
        if not isinstance(tag, str) or tag not in THREAD_TAGS:
            raise self.error(node, f"bind needs a thread tag, one of {list(THREAD_TAGS)}; got {describe(tag)}")
        ext = self.expr(extent, node)
        if not ext.dtype.is_integer:
            raise self.error(node, f"the extent of bind must be an integer, got {ext.dtype}")
        return E.IterVar(E.Range(ops.const(0, ext.dtype), ext), E.Var(tag, ext.dtype), "thread_index", tag), ext
