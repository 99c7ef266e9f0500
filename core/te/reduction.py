"""Reductions in tensor expressions: ``reduce_axis``, ``comm_reducer`` and the ``sum``/``max``/``min`` reducers.

A reducer called with an axis builds a :class:`~loom.ir.reduce.Reduce`, which must be
the whole body of a ``compute``:

>>> from loom.te.operation import placeholder, compute
>>> from loom.te.reduction import reduce_axis, sum
>>> A = placeholder((4, 8), name="A")
>>> k = reduce_axis((0, 8), name="k")
>>> B = compute((4,), lambda i: sum(A[i, k], axis=k), name="B")
>>> [iv.var.name for iv in B.op.reduce_axis], B.op.reduce_axis[0].iter_type
(['k'], 'reduce')

Called with plain values instead of an axis, a reducer combines them directly, so
``max(a, b)`` is the elementwise maximum, as classic TVM's ``tvm.max(a, b)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Callable, overload

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.dtype import DataType
from ..ir.reduce import CommReducer, Reduce
from .operation import _as_range

__all__ = ["reduce_axis", "comm_reducer", "Reducer", "sum", "max", "min"]


def reduce_axis(dom: Any, name: str = "rv", thread_tag: str = "") -> E.IterVar:
    """A reduction axis over ``dom``: a ``(begin, end)`` pair or a Range.

    >>> k = reduce_axis((2, 10), name="k")
    >>> k.var.name, int(k.dom.min), int(k.dom.extent), k.iter_type
    ('k', 2, 8, 'reduce')
    """
    rng = _as_range(dom, f"reduce_axis {name!r}")
    return E.IterVar(rng, E.Var(name, rng.extent.dtype), "reduce", thread_tag)


def _param_names(fcombine: Callable[..., Any], what: str) -> tuple[str, str]:
    try:
        params = list(inspect.signature(fcombine).parameters.values())
    except (TypeError, ValueError):  # builtins: no names to borrow
        return "x", "y"
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != 2 or any(p.kind == p.VAR_POSITIONAL for p in params):
        raise LoomTypeError(f"{what}: fcombine must take exactly two arguments (lhs, rhs), "
                            f"it takes {[p.name for p in params]}")
    return positional[0].name, positional[1].name


def _typed(value: Any, dtype: DataType, what: str) -> E.PrimExpr:
    """``value`` as an expression of ``dtype``: numbers take it, expressions must already have it."""
    if isinstance(value, (bool, int, float)):
        return ops.const(value, dtype)
    e = ops.convert_expr(value)
    if e.dtype != dtype:
        raise LoomTypeError(f"{what} has dtype {e.dtype}, expected {dtype}")
    return e


class Reducer:
    """A commutative reducer made by :func:`comm_reducer`.

    ``r(expr, axis, where=None, init=None)`` reduces ``expr`` over ``axis`` (an IterVar or a
    list); a tuple ``expr`` makes a tuple reduction and returns one Reduce per element.
    ``r(a, b, ...)`` with no axis combines the values directly.
    """

    def __init__(self, fcombine: Callable[..., Any], fidentity: Callable[..., Any], name: str) -> None:
        self.fcombine, self.fidentity, self.name = fcombine, fidentity, name
        self._lhs_name, self._rhs_name = _param_names(fcombine, f"comm_reducer {name!r}")

    def __repr__(self) -> str:
        return f"<comm_reducer {self.name}>"

    # A reduction over an axis (one Reduce per element for a tuple), or the values combined.
    @overload
    def __call__(self, expr: tuple[Any, ...] | list[Any], axis: E.IterVar | Sequence[E.IterVar], *rest: Any,
                 where: Any = ..., init: Any = ...) -> tuple[Reduce, ...]: ...
    @overload
    def __call__(self, expr: E.ExprLike, axis: E.IterVar | Sequence[E.IterVar], *rest: Any,
                 where: Any = ..., init: Any = ...) -> Reduce: ...
    @overload
    def __call__(self, expr: E.ExprLike, axis: E.ExprLike, *rest: E.ExprLike) -> E.PrimExpr: ...
    def __call__(self, expr: Any, axis: Any = None, *rest: Any, where: Any = None,
                 init: Any = None) -> Reduce | tuple[Reduce, ...] | E.PrimExpr:
        if isinstance(axis, E.IterVar) or isinstance(axis, (list, tuple)):
            if len(rest) > 2:
                raise LoomTypeError(f"{self.name}: takes (expr, axis, where, init), got {2 + len(rest)} arguments")
            if len(rest) >= 1:
                if where is not None:
                    raise LoomTypeError(f"{self.name}: where given both by position and by keyword")
                where = rest[0]
            if len(rest) == 2:
                if init is not None:
                    raise LoomTypeError(f"{self.name}: init given both by position and by keyword")
                init = rest[1]
            return self.reduce(expr, axis, where, init)
        if axis is None:
            raise LoomTypeError(f"{self.name}: needs axis= (an IterVar from reduce_axis, or a list of them), "
                                f"or two or more values to combine")
        if where is not None or init is not None:
            raise LoomTypeError(f"{self.name}: where/init only apply to a reduction over an axis; "
                                f"got a value ({axis!r}) where the axis goes")
        return self.combine(expr, axis, *rest)

    def combine(self, *values: Any) -> E.PrimExpr:
        """Fold the values with ``fcombine``: ``max.combine(a, b, c)`` is ``max(max(a, b), c)``."""
        for v in values:
            if not isinstance(v, E.PrimExpr) and not isinstance(v, (bool, int, float)) and not hasattr(v, "as_expr"):
                raise LoomTypeError(f"{self.name}: cannot combine a {type(v).__name__}; it combines expressions "
                                    f"(for tensors use loom.te.tensor_ops.maximum/minimum or arithmetic)")
        out = values[0]
        for v in values[1:]:
            out = self.fcombine(out, v)
        return ops.convert_expr(out)

    def reduce(self, expr: Any, axis: Any, where: Any = None, init: Any = None) -> Reduce | tuple[Reduce, ...]:
        """The reduction of ``expr`` over ``axis`` (see the class docstring)."""
        what = f"{self.name} reduction"
        is_tuple = isinstance(expr, (list, tuple))
        sources = [ops.convert_expr(e) for e in (expr if is_tuple else [expr])]
        if not sources:
            raise LoomValueError(f"{what}: the tuple of values to reduce is empty")
        dtypes = [s.dtype for s in sources]
        if is_tuple:
            lhs = [E.Var(f"{self._lhs_name}_{k}", t) for k, t in enumerate(dtypes)]
            rhs = [E.Var(f"{self._rhs_name}_{k}", t) for k, t in enumerate(dtypes)]
            result = self.fcombine(tuple(lhs), tuple(rhs))
            identity = self.fidentity(*(str(t) for t in dtypes))
            result = self._elements(result, "fcombine", len(sources))
            identity = self._elements(identity, "fidentity", len(sources))
        else:
            lhs, rhs = [E.Var(self._lhs_name, dtypes[0])], [E.Var(self._rhs_name, dtypes[0])]
            result, identity = [self.fcombine(lhs[0], rhs[0])], [self.fidentity(str(dtypes[0]))]
        result = [_typed(r, t, f"{what}: fcombine result {k}") for k, (r, t) in enumerate(zip(result, dtypes))]
        identity = [_typed(v, t, f"{what}: identity {k}") for k, (v, t) in enumerate(zip(identity, dtypes))]
        combiner = CommReducer(lhs, rhs, result, identity)
        axes = _axes(axis, what)
        cond = _condition(where, what)
        inits = self._init(init, dtypes, what)
        outs = tuple(Reduce(combiner, sources, axes, cond, k, inits) for k in range(len(sources)))
        return outs if is_tuple else outs[0]

    def _elements(self, value: Any, fn: str, n: int) -> list[Any]:
        if not isinstance(value, (list, tuple)) or len(value) != n:
            raise LoomTypeError(f"{self.name} reduction: {fn} must return a tuple of {n} values for a "
                                f"{n}-element reduction, got {value!r}")
        return list(value)

    def _init(self, init: Any, dtypes: list[DataType], what: str) -> list[E.PrimExpr]:
        if init is None:
            return []
        values = list(init) if isinstance(init, (list, tuple)) else [init]
        if len(values) != len(dtypes):
            raise LoomValueError(f"{what}: init has {len(values)} value(s) for {len(dtypes)} reduced value(s)")
        return [_typed(v, t, f"{what}: init {k}") for k, (v, t) in enumerate(zip(values, dtypes))]


def _axes(axis: Any, what: str) -> list[E.IterVar]:
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    for iv in axes:
        if not isinstance(iv, E.IterVar):
            raise LoomTypeError(f"{what}: axis entries must be IterVars from reduce_axis, got {type(iv).__name__}")
        if iv.iter_type != "reduce" or iv.dom is None:
            raise LoomValueError(f"{what}: axis {iv.var.name} is a {iv.iter_type!r} axis; reduce over axes "
                                 f"made by reduce_axis")
    if len({id(iv) for iv in axes}) != len(axes):
        raise LoomValueError(f"{what}: axis {[iv.var.name for iv in axes]} lists an axis twice")
    return axes


def _condition(where: Any, what: str) -> E.PrimExpr:
    if where is None:
        return ops.const(True)
    cond = ops.convert_expr(where)
    if not cond.dtype.is_bool or cond.dtype.lanes != 1:
        raise LoomTypeError(f"{what}: where= must be a boolean condition, got dtype {cond.dtype}")
    return cond


def comm_reducer(fcombine: Callable[[Any, Any], Any], fidentity: Callable[..., Any], name: str = "reduce") -> Reducer:
    """A reducer from a commutative, associative ``fcombine(x, y)`` and ``fidentity(dtype)``.

    For a tuple reduction, ``fcombine`` takes and returns tuples and ``fidentity(*dtypes)``
    returns a tuple; the result is one Reduce per element (``value_index`` 0, 1...).

    >>> import loom
    >>> from loom.te.operation import placeholder, compute
    >>> argmax = comm_reducer(
    ...     lambda x, y: (loom.select(x[1] >= y[1], x[0], y[0]), loom.select(x[1] >= y[1], x[1], y[1])),
    ...     lambda t0, t1: (loom.const(-1, t0), loom.min_value(t1)), name="argmax")
    >>> A = placeholder((4, 8), name="A")
    >>> k = reduce_axis((0, 8), name="k")
    >>> idx, val = compute((4,), lambda i: argmax((k, A[i, k]), axis=k), name="T")
    >>> str(idx.dtype), str(val.dtype), idx.op.body[1].value_index
    ('int32', 'float32', 1)
    """
    if not callable(fcombine) or not callable(fidentity):
        raise LoomTypeError(f"comm_reducer {name!r}: fcombine and fidentity must be callables")
    return Reducer(fcombine, fidentity, name)


sum = comm_reducer(lambda x, y: x + y, lambda t: ops.const(0, t), name="sum")  # noqa: A001 - TVM's name
max = comm_reducer(lambda x, y: ops.maximum(x, y), ops.min_value, name="max")  # noqa: A001
min = comm_reducer(lambda x, y: ops.minimum(x, y), ops.max_value, name="min")  # noqa: A001
sum.__doc__ = "Sum over an axis (identity 0); ``sum(a, b)`` is ``a + b``."
max.__doc__ = "Maximum over an axis (identity: the dtype's minimum); ``max(a, b)`` is elementwise."
min.__doc__ = "Minimum over an axis (identity: the dtype's maximum); ``min(a, b)`` is elementwise."
