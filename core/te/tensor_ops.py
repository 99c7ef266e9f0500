"""Elementwise arithmetic on tensors with numpy broadcasting (``A + B``, ``A * 2.0``, ``-A``).

Each operator builds a new ``compute`` named after TVM's topi operators (``T_add``,
``T_multiply``...).  Importing this module attaches the operators to :class:`Tensor`.

>>> from loom.te.operation import placeholder
>>> A = placeholder((4, 1), name="A")
>>> B = placeholder((3,), name="B")
>>> C = A + B
>>> [int(s) for s in C.shape], C.op.name, C.op.tag
([4, 3], 'T_add', 'broadcast')
>>> str(C.op.body[0])
'A[i0, 0] + B[i1]'
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.structural import structural_equal
from .operation import compute
from .tensor import Tensor

__all__ = ["broadcast_shape", "add", "subtract", "multiply", "divide", "floor_divide", "floor_mod",
           "negative", "maximum", "minimum"]


def _is_one(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def _same_extent(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return a.value == b.value
    return structural_equal(a, b)


def broadcast_shape(a: tuple[E.PrimExpr, ...], b: tuple[E.PrimExpr, ...],
                    what: str = "broadcast") -> tuple[E.PrimExpr, ...]:
    """The numpy broadcast of two shapes: trailing dimensions align; equal or 1 broadcasts.

    Symbolic dimensions broadcast only when they are the same expression (or one side
    is 1); different symbols could disagree at run time, so they are an error.

    >>> import loom
    >>> n = loom.var("n")
    >>> [str(x) for x in broadcast_shape((loom.const(1), n), (loom.const(5), loom.const(1)))]
    ['5', 'n']
    """
    out: list[E.PrimExpr] = []
    for k in range(1, max(len(a), len(b)) + 1):
        x = a[-k] if k <= len(a) else None
        y = b[-k] if k <= len(b) else None
        if x is None or y is None:
            z = x if y is None else y
            assert z is not None  # k is within the longer shape
            out.append(z)
        elif _same_extent(x, y) or _is_one(y):
            out.append(x)
        elif _is_one(x):
            out.append(y)
        else:
            shown = f"({', '.join(map(str, a))}) and ({', '.join(map(str, b))})"
            raise LoomValueError(f"{what}: shapes {shown} do not broadcast: dimension -{k} is {x} vs {y}")
    return tuple(reversed(out))


def _loader(t: Tensor, out_shape: tuple[E.PrimExpr, ...]) -> Callable[[tuple[E.Var, ...]], E.PrimExpr]:
    """Read ``t`` at an output index: leading output axes drop, size-1 dimensions read index 0."""
    skip = len(out_shape) - t.ndim
    fixed = [_is_one(d) and not _is_one(out_shape[skip + k]) for k, d in enumerate(t.shape)]

    def load(index: tuple[E.Var, ...]) -> E.PrimExpr:
        return t[tuple(ops.const(0, d.dtype) if f else index[skip + k] for k, (d, f) in enumerate(zip(t.shape, fixed)))]

    return load


def _operand(x: Any, what: str) -> Any:
    if isinstance(x, Tensor) or isinstance(x, (bool, int, float, E.PrimExpr)) or hasattr(x, "as_expr"):
        return x
    raise LoomTypeError(f"{what}: operands must be tensors, expressions or numbers, got {type(x).__name__}")


def _binary(name: str, fn: Callable[[Any, Any], E.PrimExpr]) -> Callable[[Any, Any], Any]:
    def op(a: Any, b: Any) -> Any:
        a, b = _operand(a, name), _operand(b, name)
        ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
        if not (ta or tb):
            return fn(a, b)  # two scalars: an expression, as topi's ops do
        shape = broadcast_shape(a.shape if ta else (), b.shape if tb else (), name)
        la = _loader(a, shape) if ta else (lambda _: a)
        lb = _loader(b, shape) if tb else (lambda _: b)
        return compute(shape, lambda *idx: fn(la(idx), lb(idx)), name=name,
                       tag="broadcast" if ta and tb else "elemwise")

    op.__name__ = name[2:]
    op.__doc__ = f"Elementwise {name[2:].replace('_', ' ')} with numpy broadcasting (a compute named {name!r})."
    return op


add = _binary("T_add", ops.add)
subtract = _binary("T_subtract", ops.sub)
multiply = _binary("T_multiply", ops.mul)
divide = _binary("T_divide", ops.true_div)
floor_divide = _binary("T_floor_divide", ops.floordiv)
floor_mod = _binary("T_floor_mod", ops.floormod)
maximum = _binary("T_maximum", ops.maximum)
minimum = _binary("T_minimum", ops.minimum)


def negative(a: Tensor) -> Tensor:
    """``-a`` elementwise (a compute named ``T_negative``)."""
    if not isinstance(a, Tensor):
        raise LoomTypeError(f"T_negative: expected a Tensor, got {type(a).__name__}")
    return compute(a.shape, lambda *idx: -a[idx], name="T_negative", tag="elemwise")


def _swap(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda self, other: fn(other, self)


def _attach() -> None:
    for dunder, fn in (("add", add), ("sub", subtract), ("mul", multiply), ("truediv", divide),
                       ("floordiv", floor_divide), ("mod", floor_mod)):
        setattr(Tensor, f"__{dunder}__", fn)
        setattr(Tensor, f"__r{dunder}__", _swap(fn))
    setattr(Tensor, "__neg__", negative)
    # ``n * A`` with ``n`` an expression: let the expression side defer to the tensor's
    # reflected operator instead of failing to make a constant of a tensor.
    for dunder in ("add", "sub", "mul", "truediv", "floordiv", "mod"):
        for name in (f"__{dunder}__", f"__r{dunder}__"):
            setattr(E.PrimExpr, name, _defer_to_tensor(getattr(E.PrimExpr, name)))


def _defer_to_tensor(method: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def wrapped(self: Any, other: Any) -> Any:
        return NotImplemented if isinstance(other, Tensor) else method(self, other)

    return wrapped


_attach()
