"""The keywords of hybrid script, as tables: loop iterators and callable intrinsics.

Loop keywords (``range``, ``serial``, ``unroll``, ``parallel``, ``vectorize``,
``const_range``, ``bind``) only appear as a ``for`` loop's iterator; the
parser reads them from :data:`LOOP_KINDS`.  Every other keyword is a handler
``(parser, node, args, kwargs) -> value`` in :data:`CALLS`: math on Python
numbers computes the number (as emulation would), on expressions it builds IR.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Callable

from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import intrin
from ..ir.container import Array
from ..ir.dtype import DataType
from ..te.tensor import Tensor
from .expr import describe, is_number
from .runtime import SCOPES

__all__ = ["LOOP_KINDS", "CALLS", "LANGUAGE_CALLS", "NewTensor", "KEYWORDS", "cast_handler"]

#: Loop keyword -> For kind ("const" unrolls while parsing, "bind" binds a thread).
LOOP_KINDS = {"range": "serial", "serial": "serial", "unroll": "unrolled", "parallel": "parallel",
              "vectorize": "vectorized", "const_range": "const", "bind": "bind"}


class NewTensor:
    """What ``output_tensor`` / ``allocate`` return: a tensor to declare under the assigned name."""

    def __init__(self, role: str, shape: tuple, dtype: DataType, scope: str) -> None:
        self.role, self.shape, self.dtype, self.scope = role, shape, dtype, scope

    @property
    def description(self) -> str:
        return f"a new tensor (from {'output_tensor' if self.role == 'output' else 'allocate'}); assign it to a name"


Handler = Callable[[Any, ast.Call, list, dict], Any]


def _callee(node: ast.Call) -> str:
    """The name a handled call is made by (``exp``, or ``T.exp`` for a loom.language keyword)."""
    return node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)


def _arity(p: Any, node: ast.Call, args: list, kwargs: dict, names: tuple[str, ...], required: int) -> list:
    """Positional and keyword arguments matched to ``names``; errors name the keyword's signature."""
    name = _callee(node)
    sig = f"{name}({', '.join(names)})"
    if len(args) > len(names):
        raise p.error(node, f"{sig} takes at most {len(names)} argument(s), got {len(args)}")
    out = list(args) + [None] * (len(names) - len(args))
    for key, value in kwargs.items():
        if key not in names:
            raise p.error(node, f"{sig} has no parameter {key!r}")
        k = names.index(key)
        if k < len(args):
            raise p.error(node, f"{sig} got two values for {key!r}")
        out[k] = value
    if any(v is None for v in out[:required]):
        raise p.error(node, f"{sig} needs at least {required} argument(s)")
    return out


def _dtype(p: Any, node: ast.AST, value: Any) -> DataType:
    try:
        return DataType.of(value)
    except Exception:
        raise p.error(node, f"{describe(value)} is not a dtype (write e.g. 'float32' or a.dtype)") from None


def _shape(p: Any, node: ast.AST, value: Any) -> tuple:
    if isinstance(value, Array):
        value = tuple(value)
    if isinstance(value, (int, E.PrimExpr)) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, tuple) or not value:
        raise p.error(node, f"a shape must be a non-empty tuple of sizes, got {describe(value)}")
    for s in value:
        if isinstance(s, bool) or not (isinstance(s, int) or isinstance(s, E.PrimExpr) and s.dtype.is_integer):
            raise p.error(node, f"a shape must hold integer sizes, got {describe(s)}")
        if isinstance(s, int) and s <= 0:
            raise p.error(node, f"a shape must hold positive sizes, got {s}")
    return value


def _output_tensor(p: Any, node: ast.Call, args: list, kwargs: dict) -> NewTensor:
    shape, dtype = _arity(p, node, args, kwargs, ("shape", "dtype"), 1)
    return NewTensor("output", _shape(p, node, shape), _dtype(p, node, dtype or "float32"), "global")


def _allocate(p: Any, node: ast.Call, args: list, kwargs: dict) -> NewTensor:
    shape, dtype, scope = _arity(p, node, args, kwargs, ("shape", "dtype", "scope"), 1)
    scope = "global" if scope is None else scope
    if scope not in SCOPES:
        raise p.error(node, f"allocate: scope must be one of {list(SCOPES)}, got {describe(scope)}")
    return NewTensor("allocate", _shape(p, node, shape), _dtype(p, node, dtype or "float32"), scope)


def _float_math(name: str, py: Callable[[float], float], ir: Callable[[Any], E.PrimExpr]) -> Handler:
    def handler(p: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
        (x,) = _arity(p, node, args, kwargs, ("x",), 1)
        x = p.scalar(x, node.args[0])
        if is_number(x):
            try:
                return float(py(x))
            except (ValueError, OverflowError) as err:
                raise p.error(node, f"{name}({x!r}): {err}") from None
        if name in ("floor", "ceil") and not x.dtype.is_float:
            return x  # already whole
        return ir(x if x.dtype.is_float else ops.cast(x, "float32"))

    return handler


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _power(p: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
    x, y = _arity(p, node, args, kwargs, ("x", "y"), 2)
    return p.power(p.scalar(x, node), p.scalar(y, node), node)


def _popcount(p: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
    (x,) = _arity(p, node, args, kwargs, ("x",), 1)
    x = p.scalar(x, node)
    if isinstance(x, int):
        return bin(x & 0xFFFFFFFF).count("1")
    return intrin.popcount(x)


def _abs(p: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
    (x,) = _arity(p, node, args, kwargs, ("x",), 1)
    x = p.scalar(x, node)
    return abs(x) if is_number(x) else intrin.abs(x)


def _extremum(py: Callable[..., Any], ir: Callable[[Any, Any], E.PrimExpr]) -> Handler:
    def handler(p: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
        if kwargs or len(args) < 2:
            raise p.error(node, f"{_callee(node)}() takes two or more numbers")
        values = [p.scalar(a, node) for a in args]
        out = values[0]
        for v in values[1:]:
            out = py(out, v) if is_number(out) and is_number(v) else ir(out, v)
        return out

    return handler


def _len(p: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
    (x,) = _arity(p, node, args, kwargs, ("x",), 1)
    if isinstance(x, Tensor):
        n = x.shape[0]
        return n.value if isinstance(n, E.IntImm) else n
    if isinstance(x, (tuple, Array)):
        return len(x)
    raise p.error(node, f"len() of {describe(x)}: len takes a tensor, a shape or a container")


def _cast(dtype: str) -> Handler:
    """The handler of a cast to ``dtype`` (``float32(x)``; ``T.float32(x)`` in loom.language)."""
    t = DataType.of(dtype)

    def handler(p: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
        (x,) = _arity(p, node, args, kwargs, ("x",), 1)
        x = p.scalar(x, node)
        if is_number(x) and t.is_float:
            return ops.const(float(x), t)  # exact: float64(0.1) is not a float32 constant widened
        if is_number(x):
            x = int(x)  # numpy's conversion truncates toward zero
        return ops.cast(ops.convert_expr(x), t)

    return handler


def _likely(p: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
    """``likely(cond)``: the condition, marked as usually true (the guard of an uneven split)."""
    (x,) = _arity(p, node, args, kwargs, ("cond",), 1)
    c = p.condition(x, node.args[0] if node.args else node)
    return c if isinstance(c, bool) else intrin.likely(c)


def _cast_to(p: Any, node: ast.Call, args: list, kwargs: dict) -> Any:
    """``T.cast(x, dtype)`` (loom.language): a cast to a dtype that may be a kernel's dtype parameter."""
    x, dtype = _arity(p, node, args, kwargs, ("x", "dtype"), 2)
    return _cast(str(_dtype(p, node, dtype)))(p, node, [x], {})


CALLS: dict[str, Handler] = {
    "output_tensor": _output_tensor, "allocate": _allocate,
    "log": _float_math("log", math.log, intrin.log), "exp": _float_math("exp", math.exp, intrin.exp),
    "sigmoid": _float_math("sigmoid", _sigmoid, intrin.sigmoid), "tanh": _float_math("tanh", math.tanh, intrin.tanh),
    "sqrt": _float_math("sqrt", math.sqrt, intrin.sqrt), "floor": _float_math("floor", math.floor, intrin.floor),
    "ceil": _float_math("ceil", math.ceil, intrin.ceil),
    "power": _power, "popcount": _popcount, "abs": _abs,
    "min": _extremum(min, ops.minimum), "max": _extremum(max, ops.maximum), "len": _len, "likely": _likely,
    **{n: _cast(n) for n in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                             "float16", "float32", "float64")},
}

def cast_handler(dtype: str) -> Handler:
    """The handler of a call of a dtype constant (``T.float32(x)``)."""
    return _cast(dtype)


#: Handlers reached only through loom.language keyword objects (no bare hybrid name).
LANGUAGE_CALLS: dict[str, Handler] = {"cast": _cast_to}

#: Every keyword name of the language.
KEYWORDS = frozenset(LOOP_KINDS) | frozenset(CALLS)
