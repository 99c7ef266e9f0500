"""Expressions of hybrid scripts: names, constants, arithmetic, comparisons, loads, attributes.

Values the parser passes around are IR expressions, Python numbers (kept as
Python values so constant arithmetic folds exactly as it does in emulation),
strings (dtypes), tuples (shapes), :class:`~loom.ir.container.Array`
containers and tensors.  Python's own operator semantics hold: ``//`` and
``%`` are floor division and modulo, ``/`` needs float operands, ``and`` /
``or`` short-circuit on constants.
"""

from __future__ import annotations

import ast
import operator
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import intrin
from ..ir.container import Array
from ..ir.dtype import DataType
from ..ir.producer import ProducerLoad
from ..te.tensor import Tensor

if TYPE_CHECKING:
    from .errors import HybridSyntaxError, Source
    from .scope import Scopes

__all__ = ["ExprMixin", "is_number", "describe"]

_ARITH = {
    ast.Add: ("+", operator.add, operator.add), ast.Sub: ("-", operator.sub, operator.sub),
    ast.Mult: ("*", operator.mul, operator.mul), ast.Div: ("/", operator.truediv, ops.true_div),
    ast.FloorDiv: ("//", operator.floordiv, ops.floordiv), ast.Mod: ("%", operator.mod, ops.floormod),
}
_UNSUPPORTED_OPS = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
                    ast.MatMult: "@"}
_COMPARE = {
    ast.Eq: (operator.eq, ops.eq), ast.NotEq: (operator.ne, ops.ne), ast.Lt: (operator.lt, ops.lt),
    ast.LtE: (operator.le, ops.le), ast.Gt: (operator.gt, ops.gt), ast.GtE: (operator.ge, ops.ge),
}
_MAX_EXPANDED_POWER = 8  # x ** k for a small constant k is k - 1 multiplications (exact, any dtype)


def is_number(v: Any) -> bool:
    """A Python constant usable in arithmetic (bool, int or float)."""
    return isinstance(v, (bool, int, float))


def describe(v: Any) -> str:
    """How a value is named in error messages."""
    if isinstance(v, Tensor):
        return f"the tensor {v.name}"
    if isinstance(v, tuple):
        return "a shape tuple"
    if isinstance(v, Array):
        return "a container"
    if isinstance(v, str):
        return f"the string {v!r}"
    if v is None:
        return "None"
    if hasattr(v, "__loom_hybrid__"):
        return f"the hybrid function {getattr(v, '__name__', '?')}"
    if hasattr(v, "description"):  # the parser's own values (a new tensor, a call's results)
        return v.description
    t = type(v)
    return f"a {'' if t.__module__ == 'builtins' else t.__module__ + '.'}{t.__name__}"


def python_value(v: Any) -> Any:
    """numpy scalars as Python numbers; everything else unchanged."""
    return v.item() if isinstance(v, np.generic) else v


class ExprMixin:
    """The expression half of :class:`~loom.hybrid.parser.HybridParser`."""

    if TYPE_CHECKING:  # provided by HybridParser
        src: Source
        scopes: Scopes

        def visit(self, node: ast.AST) -> Any: ...
        def error(self, node: Optional[ast.AST], reason: str) -> HybridSyntaxError: ...
        def free_name(self, node: ast.Name) -> Any: ...

    # -- helpers -------------------------------------------------------------------
    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.src.text, node) or type(node).__name__

    def scalar(self, v: Any, node: ast.AST) -> Any:
        """``v`` as an arithmetic operand: an expression or a Python number."""
        if isinstance(v, E.PrimExpr) or is_number(v):
            return v
        hint = f"; index it ({v.name}[i])" if isinstance(v, Tensor) else ""
        raise self.error(node, f"{self.segment(node)} is {describe(v)}, not a number{hint}")

    def expr(self, v: Any, node: ast.AST) -> E.PrimExpr:
        """``v`` as an IR expression (Python numbers become constants)."""
        return ops.convert_expr(self.scalar(v, node))

    def condition(self, v: Any, node: ast.AST) -> Any:
        """``v`` as a condition: a Python bool when constant, else a bool expression (``x != 0`` for numbers)."""
        if is_number(v) or isinstance(v, str):
            return bool(v)
        v = self.scalar(v, node)
        c = v if v.dtype.is_bool else ops.ne(v, ops.const(0, v.dtype))
        return bool(c.value) if isinstance(c, E.IntImm) else c

    @staticmethod
    def typed(v: Any, dtype: Any) -> E.PrimExpr:
        """``v`` converted to ``dtype`` as numpy's assignment converts it (a number exactly, floats truncated)."""
        if is_number(v):
            t = DataType.of(dtype)
            v = float(v) if t.is_float else bool(v) if t.is_bool else int(v)
            return ops.const(v, t)
        return ops.cast(v, dtype)

    def const_int(self, v: Any) -> Any:
        """An int for an integer constant (Python or IntImm), else None."""
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return v
        if isinstance(v, E.IntImm) and v.dtype.is_integer:
            return v.value
        return None

    def index(self, node: ast.AST) -> E.PrimExpr:
        """One index of a tensor access."""
        v = self.visit(node)
        if isinstance(v, bool) or not (isinstance(v, int) or isinstance(v, E.PrimExpr) and v.dtype.is_integer):
            raise self.error(node, f"a tensor index must be an integer, got {describe(v)}"
                             + (f" of dtype {v.dtype}" if isinstance(v, E.PrimExpr) else ""))
        if isinstance(v, int) and v < 0:
            raise self.error(node, f"negative index {v}: hybrid script indexes from the start of each dimension")
        return ops.convert_expr(v)

    def indices(self, node: ast.AST, tensor: Tensor) -> list[E.PrimExpr]:
        """The indices of ``tensor[...]`` (the subscript ``node``), one per dimension."""
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        for item in items:
            if isinstance(item, ast.Slice):
                raise self.error(item, "slices are not supported; index every dimension with a single index")
        if len(items) != tensor.ndim:
            raise self.error(node, f"tensor {tensor.name} has {tensor.ndim} dimension(s) but is indexed with "
                                   f"{len(items)} index(es); write {tensor.name}[i, j] for every dimension")
        return [self.index(item) for item in items]

    # -- leaves ----------------------------------------------------------------------
    def visit_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bool, int, float, str)):
            return node.value
        raise self.error(node, f"unsupported constant {node.value!r}: hybrid script has numbers, True, False "
                               f"and strings")

    def visit_Name(self, node: ast.Name) -> Any:
        sym = self.scopes.lookup(node.id)
        if sym is not None:
            if sym.kind == "var":
                return ProducerLoad(sym.value, [ops.const(0)])
            return sym.value
        return self.free_name(node)

    def visit_Tuple(self, node: ast.Tuple | ast.List) -> tuple:
        return tuple(self.visit(e) for e in node.elts)

    visit_List = visit_Tuple

    # -- attributes and subscripts ---------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.visit(node.value)
        if isinstance(base, Tensor) and node.attr == "shape":
            return tuple(s.value if isinstance(s, E.IntImm) else s for s in base.shape)
        if isinstance(base, Tensor) and node.attr == "dtype":
            return str(base.dtype)
        raise self.error(node, f"unsupported attribute .{node.attr} of {describe(base)}: only the shape and "
                               f"dtype of tensors are supported")

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.visit(node.value)
        if isinstance(base, Tensor):
            return ProducerLoad(base, self.indices(node.slice, base))
        if isinstance(base, (tuple, Array)):
            # c[i, j] is c[i][j]: a nested container (a list of lists) takes one index per level.
            keys = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            item: Any = base
            for depth, key in enumerate(keys):
                what = self.segment(node.value) + "".join(f"[{self.segment(k)}]" for k in keys[:depth])
                if not isinstance(item, (tuple, Array)):
                    shown = f"the constant {item.value!r}" if isinstance(item, (E.IntImm, E.FloatImm, E.StringImm)) \
                        else f"the constant {item!r}" if is_number(item) else describe(item)
                    raise self.error(key, f"{what} is {shown}, not a container, and cannot take another "
                                          f"index here" + (f"; index it apart ({what}[...])"
                                                           if isinstance(item, Tensor) else ""))
                item = self.container_item(item, key, what)
            if isinstance(item, (E.IntImm, E.FloatImm, E.StringImm)):  # constants stay weakly typed
                return bool(item.value) if item.dtype.is_bool else item.value
            return item
        raise self.error(node.value, f"{self.segment(node.value)} is {describe(base)} and cannot be indexed")

    def container_item(self, base: tuple | Array, key: ast.AST, what: str) -> Any:
        """``base[key]`` for a shape tuple or container ``base`` named ``what``: the key must be a constant."""
        k = self.const_int(self.visit(key))
        if k is None:
            if isinstance(base, tuple):
                raise self.error(key, f"{what} can only be indexed by a constant; {self.segment(key)} is not one")
            raise self.error(key, f"container {what} can only be indexed by a constant; {self.segment(key)} is not "
                                  f"one (iterate with const_range to index a container in a loop)")
        if not 0 <= k < len(base):
            raise self.error(key, f"index {k} is out of range for {what}, which has {len(base)} element(s)")
        return base[k]

    # -- operators ---------------------------------------------------------------------------
    def arith(self, op: ast.operator, left: Any, right: Any, node: ast.AST) -> Any:
        """``left <op> right`` with Python's meaning of the operator."""
        kind = type(op)
        if kind in _UNSUPPORTED_OPS:
            raise self.error(node, f"operator {_UNSUPPORTED_OPS[kind]} is not supported in hybrid script"
                                   f" (for conditions use and / or)")
        if kind is ast.Pow:
            return self.power(left, right, node)
        _, py, ir = _ARITH[kind]
        if is_number(left) and is_number(right):
            try:
                return py(left, right)
            except ZeroDivisionError:
                raise self.error(node, "division by zero") from None
        return ir(left, right)

    def power(self, x: Any, y: Any, node: ast.AST) -> Any:
        if is_number(x) and is_number(y):
            return x ** y
        k = self.const_int(y)
        if k is not None and 0 <= k <= _MAX_EXPANDED_POWER:
            x = ops.convert_expr(x)
            out = ops.const(1, x.dtype) if k == 0 else x
            for _ in range(k - 1):
                out = out * x
            return out
        x = ops.convert_expr(x)
        return intrin.power(x if x.dtype.is_float else ops.cast(x, "float32"), y)

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        left = self.scalar(self.visit(node.left), node.left)
        right = self.scalar(self.visit(node.right), node.right)
        return self.arith(node.op, left, right, node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            c = self.condition(v, node.operand)
            return (not c) if isinstance(c, bool) else ops.logical_not(c)
        if isinstance(node.op, ast.Invert):
            raise self.error(node, "operator ~ is not supported in hybrid script (for conditions use not)")
        v = self.scalar(v, node.operand)
        return -v if isinstance(node.op, ast.USub) else v

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        terms = []
        for value in node.values:
            c = self.condition(self.visit(value), value)
            if isinstance(c, bool):
                if c != is_and:  # False in an `and`, True in an `or`: decided, the rest never runs
                    return c
                continue
            terms.append(c)
        if not terms:
            return is_and
        out = terms[0]
        for t in terms[1:]:
            out = ops.logical_and(out, t) if is_and else ops.logical_or(out, t)
        return out

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = self.visit(node.left)
        result: Any = True
        for op, comp in zip(node.ops, node.comparators):
            if type(op) not in _COMPARE:
                raise self.error(node, f"comparison {type(op).__name__} is not supported (use ==, !=, <, <=, >, >=)")
            right = self.visit(comp)
            py, ir = _COMPARE[type(op)]
            if isinstance(left, str) and isinstance(right, str) or is_number(left) and is_number(right):
                c: Any = py(left, right)
            else:
                c = ir(self.scalar(left, node.left), self.scalar(right, comp))
            if isinstance(c, E.IntImm) and c.dtype.is_bool:
                c = bool(c.value)
            if c is False:
                return False  # a chain a < b < c stops at its first false link
            result = c if result is True else result if c is True else ops.logical_and(result, c)
            left = right
        return result

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        c = self.condition(self.visit(node.test), node.test)
        if isinstance(c, bool):
            return self.visit(node.body if c else node.orelse)
        t = self.scalar(self.visit(node.body), node.body)
        f = self.scalar(self.visit(node.orelse), node.orelse)
        return ops.select(c, t, f)
