"""Loop-structure primitives of a stage: split, fuse, reorder, tile, annotations, bind, pragma, prefetch.

Each primitive checks its arguments against the stage's current leaf loops and
records an IterVar relation (see :mod:`loom.te.relations`) so that bound
inference and lowering can recover every original axis from the leaves.
"""

from __future__ import annotations

from typing import Any

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.dtype import DataType
from .relations import Fuse, IterVarAttr, Rebase, Singleton, Split

__all__ = ["split", "fuse", "reorder", "tile", "annotate", "bind", "pragma", "prefetch", "check_leaf"]

# Fusing keeps the "strongest" kind of its two loops, as TVM's IterVarType order does.
_TYPE_RANK = {"data_par": 0, "thread_index": 1, "reduce": 2, "ordered": 3, "opaque": 4}
_ANNOTATIONS = ("unrolled", "vectorized", "parallelized")
_INT64 = DataType.of("int64")


def check_leaf(stage: Any, iv: Any, what: str) -> int:
    """Position of ``iv`` among the stage's leaf loops, or a clear error."""
    if not isinstance(iv, E.IterVar):
        raise LoomTypeError(f"{what} on {stage.op.name}: expected an IterVar (an axis), got {type(iv).__name__}")
    for k, leaf in enumerate(stage.leaf_iter_vars):
        if leaf is iv:
            return k
    leaves = [x.var.name for x in stage.leaf_iter_vars]
    if any(x is iv for x in stage.all_iter_vars):
        raise LoomValueError(f"{what} on {stage.op.name}: axis {iv.var.name} was already split or fused; "
                             f"use one of the current loops {leaves}")
    raise LoomValueError(f"{what} on {stage.op.name}: axis {iv.var.name} is not a loop of this stage "
                         f"(its loops are {leaves})")


def _factor(value: Any, like: E.IterVar, name: str, what: str) -> E.PrimExpr:
    if isinstance(value, bool) or not isinstance(value, (int, E.PrimExpr)):
        raise LoomTypeError(f"{what}: {name} must be an int or an integer expression, got {value!r}")
    if isinstance(value, int) and value > 0 and not _fits(value, like.var.dtype):
        raise LoomValueError(f"{what}: {name}={value} is more than a loop of type {like.var.dtype} can count "
                             f"(at most {_max_of(like.var.dtype)})")
    e = ops.convert_expr(value, like.var.dtype) if isinstance(value, int) else value
    if not e.dtype.is_integer:
        raise LoomTypeError(f"{what}: {name} must be an integer, got dtype {e.dtype}")
    if isinstance(e, E.IntImm) and e.value <= 0:
        raise LoomValueError(f"{what}: {name} must be positive, got {e.value}")
    return ops.cast(e, like.var.dtype)


def _derived(parent: E.IterVar, suffix: str, iter_type: str | None = None) -> E.IterVar:
    return E.IterVar(None, E.Var(f"{parent.var.name}.{suffix}", parent.var.dtype), iter_type or parent.iter_type)


def split(stage: Any, parent: E.IterVar, factor: Any = None, nparts: Any = None) -> tuple[E.IterVar, E.IterVar]:
    """Split ``parent``; see :meth:`loom.te.schedule.Stage.split`."""
    pos = check_leaf(stage, parent, "split")
    what = f"split of {parent.var.name} on {stage.op.name}"
    if (factor is None) == (nparts is None):
        raise LoomValueError(f"{what}: give exactly one of factor= and nparts= "
                             f"(got factor={factor!r}, nparts={nparts!r})")
    f = _factor(factor, parent, "factor", what) if factor is not None else None
    n = _factor(nparts, parent, "nparts", what) if nparts is not None else None
    outer, inner = _derived(parent, "outer"), _derived(parent, "inner")
    stage.relations.append(Split(parent, outer, inner, f, n))
    stage.all_iter_vars += [outer, inner]
    stage.leaf_iter_vars[pos:pos + 1] = [outer, inner]
    return outer, inner


def fuse(stage: Any, *axes: E.IterVar) -> E.IterVar:
    """Fuse consecutive leaf loops; see :meth:`loom.te.schedule.Stage.fuse`."""
    if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
        axes = tuple(axes[0])
    if not axes:
        single = E.IterVar(None, E.Var("singleton"), "data_par")
        stage.relations.append(Singleton(single))
        stage.all_iter_vars.append(single)
        stage.leaf_iter_vars.insert(0, single)
        return single
    fused = axes[0]
    check_leaf(stage, fused, "fuse")
    for inner in axes[1:]:
        fused = _fuse_two(stage, fused, inner)
    return fused


def _fuse_two(stage: Any, outer: E.IterVar, inner: E.IterVar) -> E.IterVar:
    po, pi = check_leaf(stage, outer, "fuse"), check_leaf(stage, inner, "fuse")
    if pi != po + 1:
        order = [x.var.name for x in stage.leaf_iter_vars]
        raise LoomValueError(f"fuse on {stage.op.name}: {outer.var.name} and {inner.var.name} are not adjacent "
                             f"loops, outer first (the loop order is {order}); reorder them first")
    kinds = sorted((outer.iter_type, inner.iter_type), key=lambda t: _TYPE_RANK.get(t, 0))
    dtype = _fused_dtype(stage, outer, inner)
    fused = E.IterVar(None, E.Var(f"{outer.var.name}.{inner.var.name}.fused", dtype), kinds[-1])
    stage.relations.append(Fuse(outer, inner, fused))
    stage.all_iter_vars.append(fused)
    stage.leaf_iter_vars[po:pi + 1] = [fused]
    return fused


def _max_of(dtype: Any) -> int:
    return (1 << (dtype.bits - 1)) - 1 if dtype.code == "int" else (1 << dtype.bits) - 1


def _fits(value: int, dtype: Any) -> bool:
    return 0 <= value <= _max_of(dtype)


def _extent_bound(stage: Any, iv: E.IterVar) -> int | None:
    """An upper bound of loop ``iv``'s extent from the stage's domains, or None when it is symbolic.

    Bound inference can only shrink a loop (a stage computed inside another
    covers part of its domain), so the full domains give a bound that holds
    whatever the stage's placement.
    """
    if iv.dom is not None:
        return iv.dom.extent.value if isinstance(iv.dom.extent, E.IntImm) else None
    for rel in stage.relations:
        if isinstance(rel, Split) and iv in (rel.outer, rel.inner):
            fixed, fixed_iv = (rel.factor, rel.inner) if rel.factor is not None else (rel.nparts, rel.outer)
            if not isinstance(fixed, E.IntImm):
                return None
            if iv is fixed_iv:
                return fixed.value
            parent = _extent_bound(stage, rel.parent)
            return None if parent is None else -(-parent // fixed.value)
        if isinstance(rel, Fuse) and iv is rel.fused:
            a, b = _extent_bound(stage, rel.outer), _extent_bound(stage, rel.inner)
            return None if a is None or b is None else a * b
        if isinstance(rel, Rebase) and iv is rel.rebased:
            return _extent_bound(stage, rel.parent)
        if isinstance(rel, Singleton) and iv is rel.iter:
            return 1
    return None


def _fused_dtype(stage: Any, outer: E.IterVar, inner: E.IterVar) -> Any:
    """The wider of the two loop variables' types, int64 when the fused count does not fit int32.

    A constant fused extent is exact: past int32 the loop counts in int64 (an
    int32 count would wrap and run no iteration at all).  Symbolic extents keep
    their own type, as the shapes they come from do.
    """
    a, b = outer.var.dtype, inner.var.dtype
    dtype = a if a.bits >= b.bits else b
    na, nb = _extent_bound(stage, outer), _extent_bound(stage, inner)
    if na is None or nb is None or _fits(na * nb, dtype):
        return dtype
    if dtype.bits < 64 and _fits(na * nb, _INT64):
        return _INT64
    raise LoomValueError(f"fuse on {stage.op.name}: fusing {outer.var.name} ({na} iterations) and "
                         f"{inner.var.name} ({nb} iterations) makes {na * nb} iterations, more than an "
                         f"int64 loop can count")


def reorder(stage: Any, *axes: E.IterVar) -> None:
    """Reorder leaf loops; see :meth:`loom.te.schedule.Stage.reorder`."""
    if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
        axes = tuple(axes[0])
    positions = [check_leaf(stage, iv, "reorder") for iv in axes]
    if len(set(positions)) != len(positions):
        raise LoomValueError(f"reorder on {stage.op.name}: an axis is given twice in "
                             f"{[iv.var.name for iv in axes]}")
    for pos, iv in zip(sorted(positions), axes):
        stage.leaf_iter_vars[pos] = iv


def tile(stage: Any, x_parent: E.IterVar, y_parent: E.IterVar, x_factor: Any, y_factor: Any) -> tuple[E.IterVar, ...]:
    """Split two loops and reorder; see :meth:`loom.te.schedule.Stage.tile`."""
    xo, xi = split(stage, x_parent, factor=x_factor)
    yo, yi = split(stage, y_parent, factor=y_factor)
    reorder(stage, xo, yo, xi, yi)
    return xo, yo, xi, yi


def _attr(stage: Any, iv: E.IterVar) -> IterVarAttr:
    attr = stage.iter_var_attrs.get(iv)
    if attr is None:
        attr = stage.iter_var_attrs[iv] = IterVarAttr()
    return attr


def annotate(stage: Any, iv: E.IterVar, kind: str) -> None:
    """Mark a leaf loop ``unrolled``, ``vectorized`` or ``parallelized``."""
    verb = {"unrolled": "unroll", "vectorized": "vectorize", "parallelized": "parallel"}[kind]
    check_leaf(stage, iv, verb)
    if kind != "unrolled" and iv.iter_type == "reduce":
        raise LoomValueError(f"{verb} on {stage.op.name}: {iv.var.name} is a reduction loop; only data-parallel "
                             f"loops can be {kind}")
    attr = _attr(stage, iv)
    if attr.bind_thread is not None:
        raise LoomValueError(f"{verb} on {stage.op.name}: {iv.var.name} is bound to {attr.bind_thread.var.name}")
    attr.iter_type = kind


def bind(stage: Any, iv: E.IterVar, thread: E.IterVar) -> None:
    """Bind a leaf loop to a thread axis; see :meth:`loom.te.schedule.Stage.bind`."""
    check_leaf(stage, iv, "bind")
    if not isinstance(thread, E.IterVar) or not thread.thread_tag:
        raise LoomTypeError(f"bind on {stage.op.name}: expected a thread axis (loom.thread_axis(\"threadIdx.x\")), "
                            f"got {thread!r}")
    if iv.iter_type == "reduce" and not thread.thread_tag.startswith("threadIdx."):
        # the threads of a block can combine their values (a cross-thread reduction); blocks cannot
        raise LoomValueError(f"bind on {stage.op.name}: {iv.var.name} is a reduction loop; it can be bound to "
                             f"threadIdx.* (a cross-thread reduction), not to {thread.thread_tag}")
    attr = _attr(stage, iv)
    if attr.bind_thread is not None:
        raise LoomValueError(f"bind on {stage.op.name}: {iv.var.name} is already bound to {attr.bind_thread.var.name}")
    if attr.iter_type in _ANNOTATIONS:
        raise LoomValueError(f"bind on {stage.op.name}: {iv.var.name} is already {attr.iter_type}")
    for other, a in stage.iter_var_attrs.items():
        if a.bind_thread is thread and other is not iv:
            raise LoomValueError(f"bind on {stage.op.name}: {thread.var.name} is already bound to loop "
                                 f"{other.var.name} of this stage")
    attr.bind_thread = thread


def pragma(stage: Any, iv: E.IterVar, key: str, value: Any = None) -> None:
    """Attach ``pragma_<key>`` to a leaf loop; see :meth:`loom.te.schedule.Stage.pragma`.

    As in TVM, the keys ``"unroll"`` and ``"vectorize"`` are the loop annotations
    themselves (``stage.unroll(iv)``, ``stage.vectorize(iv)``), not pragmas.
    """
    check_leaf(stage, iv, "pragma")
    if not isinstance(key, str) or not key:
        raise LoomTypeError(f"pragma on {stage.op.name}: the pragma key must be a non-empty string, got {key!r}")
    if key in ("unroll", "vectorize"):
        if value is not None:
            raise LoomValueError(f"pragma {key!r} on {stage.op.name}: it takes no value (it is stage.{key}(axis))")
        getattr(stage, key)(iv)
        return
    if value is None:
        v: E.PrimExpr = ops.const(1, "int32")
    elif isinstance(value, str):
        v = E.StringImm(value)
    else:
        v = ops.convert_expr(value)
    _attr(stage, iv).pragmas.append((key, v))


def prefetch(stage: Any, tensor: Any, iv: E.IterVar, offset: Any) -> None:
    """Prefetch what ``tensor`` reads ``offset`` iterations of ``iv`` ahead; see :meth:`loom.te.schedule.Stage.prefetch`."""
    from .tensor import Tensor

    check_leaf(stage, iv, "prefetch")
    if not isinstance(tensor, Tensor):
        raise LoomTypeError(f"prefetch on {stage.op.name}: expected the tensor to prefetch, got {type(tensor).__name__}")
    if not any(t is tensor for t in stage.op.input_tensors):
        reads = [t.name for t in stage.op.input_tensors]
        raise LoomValueError(f"prefetch on {stage.op.name}: the stage does not read {tensor.name} (it reads {reads})")
    if isinstance(offset, bool) or not isinstance(offset, (int, E.PrimExpr)):
        raise LoomTypeError(f"prefetch on {stage.op.name}: the offset must be an int or an integer expression, "
                            f"got {offset!r}")
    off = ops.convert_expr(offset, iv.var.dtype) if isinstance(offset, int) else offset
    if not off.dtype.is_integer or off.dtype.lanes != 1:
        raise LoomTypeError(f"prefetch on {stage.op.name}: the offset must be an integer, got dtype {off.dtype}")
    _attr(stage, iv).prefetch.append((tensor, ops.cast(off, iv.var.dtype)))
