"""How a stage's loop variables derive from its operation's axes.

Each schedule primitive that changes the loop structure records a relation:

- :class:`Split`: ``parent = outer * factor + inner + parent.min``
  (``factor`` is the inner extent; ``nparts`` fixes the outer extent instead);
- :class:`Fuse`: ``outer = fused // inner.extent``, ``inner = fused % inner.extent``;
- :class:`Rebase`: ``parent = rebased + parent.min`` (loops start at zero);
- :class:`Singleton`: a loop of extent one that derives from nothing.

The message-passing functions walk a stage's relations: down (domains of
derived variables from their parents), up (the value of each original axis
from the leaves' values), and up for bound checks (which axes a
non-divisible split can overshoot).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ..errors import LoomError
from ..ir import expr as E
from ..ir import expr_ops as ops

__all__ = [
    "Split", "Fuse", "Rebase", "Singleton", "Relation", "IterVarAttr",
    "pass_down_domain", "pass_up_index", "pass_up_bound_check", "pass_down_bitmask",
]


@dataclass(frozen=True, eq=False)
class Split:
    """``parent`` split into ``outer`` and ``inner`` by ``factor`` or into ``nparts``."""

    parent: E.IterVar
    outer: E.IterVar
    inner: E.IterVar
    factor: Optional[E.PrimExpr] = None
    nparts: Optional[E.PrimExpr] = None


@dataclass(frozen=True, eq=False)
class Fuse:
    """``outer`` and ``inner`` (adjacent loops) fused into ``fused``."""

    outer: E.IterVar
    inner: E.IterVar
    fused: E.IterVar


@dataclass(frozen=True, eq=False)
class Rebase:
    """``parent`` shifted to start at zero as ``rebased``."""

    parent: E.IterVar
    rebased: E.IterVar


@dataclass(frozen=True, eq=False)
class Singleton:
    """A new loop of extent one (what fusing no axes makes)."""

    iter: E.IterVar


Relation = Union[Split, Fuse, Rebase, Singleton]


@dataclass(eq=False)
class IterVarAttr:
    """What a schedule says about one loop: its kind, thread binding and pragmas.

    ``iter_type`` is ``"data_par"`` (a plain serial loop), ``"unrolled"``,
    ``"vectorized"`` or ``"parallelized"``.
    """

    iter_type: str = "data_par"
    bind_thread: Optional[E.IterVar] = None
    pragmas: list[tuple[str, E.PrimExpr]] = field(default_factory=list)
    #: The tensor intrinsic a ``tensorize`` put here (``iter_type`` is then ``"tensorized"``).
    tensor_intrin: Any = None
    #: ``(tensor, offset)`` of each ``prefetch``: what to fetch ``offset`` iterations ahead.
    prefetch: list[tuple[Any, E.PrimExpr]] = field(default_factory=list)

    def copy(self) -> IterVarAttr:
        return IterVarAttr(self.iter_type, self.bind_thread, list(self.pragmas), self.tensor_intrin,
                           list(self.prefetch))

    @property
    def prefetch_data(self) -> Any:
        """The tensors prefetched in this loop (TVM's spelling)."""
        from ..ir.container import Array

        return Array([t for t, _ in self.prefetch])

    @property
    def prefetch_offset(self) -> Any:
        """How many iterations ahead each of :attr:`prefetch_data` is fetched."""
        from ..ir.container import Array

        return Array([o for _, o in self.prefetch])

    @property
    def pragma_keys(self) -> Any:
        """The pragma names, an Array of StringImm (TVM's spelling)."""
        from ..ir.container import convert

        return convert([k for k, _ in self.pragmas])

    @property
    def pragma_values(self) -> Any:
        """The pragma values, in the order of :attr:`pragma_keys`."""
        from ..ir.container import Array

        return Array([v for _, v in self.pragmas])


#: TVM's names of the loop kinds, as Loom spells them: ``IterVar.Unrolled == "unrolled"``.
TVM_ITER_TYPES = {"DataPar": "data_par", "ThreadIndex": "thread_index", "CommReduce": "reduce", "Ordered": "ordered",
                  "Opaque": "opaque", "Unrolled": "unrolled", "Vectorized": "vectorized",
                  "Parallelized": "parallelized", "Tensorized": "tensorized"}
for _name, _kind in TVM_ITER_TYPES.items():
    setattr(E.IterVar, _name, _kind)


def _ceil_div(a: E.PrimExpr, b: E.PrimExpr, analyzer: Any) -> E.PrimExpr:
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):  # exact: a + (b - 1) could wrap
        return ops.const(-(-a.value // b.value), a.dtype)
    if analyzer.can_prove(ops.floormod(a, b) == 0):
        return analyzer.simplify(ops.floordiv(a, b))
    return analyzer.simplify(ops.floordiv(a + (b - 1), b))


def _update(state: dict[E.IterVar, E.Range], iv: E.IterVar, r: E.Range, analyzer: Any) -> None:
    """Record ``iv``'s range; a thread bound by several loops must get one extent."""
    old = state.get(iv)
    if old is None:
        state[iv] = r
        analyzer.bind(iv.var, r, allow_override=True)
        return
    if not (analyzer.can_prove_equal(old.min, 0) and analyzer.can_prove_equal(old.extent, r.extent)):
        raise LoomError(f"{iv.var.name} gets two different extents, {old.extent} and {r.extent}: every loop bound "
                        f"to one thread axis must have the same extent")


def pass_down_domain(stage: Any, state: dict[E.IterVar, E.Range], analyzer: Any) -> None:
    """Domains of the derived loop variables from the domains of their parents."""
    zero = lambda iv: ops.const(0, iv.var.dtype)  # noqa: E731
    for rel in stage.relations:
        if isinstance(rel, Split):
            if rel.parent not in state:
                continue
            ext = state[rel.parent].extent
            if rel.factor is not None:
                inner, outer = rel.factor, _ceil_div(ext, rel.factor, analyzer)
            else:
                assert rel.nparts is not None  # a Split has a factor or a part count
                outer, inner = rel.nparts, _ceil_div(ext, rel.nparts, analyzer)
            _update(state, rel.inner, E.Range(zero(rel.inner), inner), analyzer)
            _update(state, rel.outer, E.Range(zero(rel.outer), outer), analyzer)
        elif isinstance(rel, Fuse):
            if rel.outer not in state or rel.inner not in state:
                continue
            t = rel.fused.var.dtype  # wide enough for the product (see schedule_loops.fuse)
            ext = analyzer.simplify(ops.cast(state[rel.outer].extent, t) * ops.cast(state[rel.inner].extent, t))
            _update(state, rel.fused, E.Range(zero(rel.fused), ext), analyzer)
        elif isinstance(rel, Rebase):
            if rel.parent in state:
                _update(state, rel.rebased, E.Range(zero(rel.rebased), state[rel.parent].extent), analyzer)
        else:
            _update(state, rel.iter, E.Range(zero(rel.iter), ops.const(1, rel.iter.var.dtype)), analyzer)
    for iv, attr in stage.iter_var_attrs.items():
        if attr.bind_thread is not None and iv in state:
            thread = attr.bind_thread
            r = state[iv]
            if thread.dom is not None and not analyzer.can_prove_equal(thread.dom.extent, r.extent):
                raise LoomError(f"loop {iv.var.name} of {stage.op.name} has extent {r.extent} but is bound to "
                                f"{thread.var.name}, declared with extent {thread.dom.extent}")
            _update(state, thread, r, analyzer)


def _add_min(value: E.PrimExpr, mn: E.PrimExpr) -> E.PrimExpr:
    return value if isinstance(mn, E.IntImm) and mn.value == 0 else value + mn


def _narrow(value: E.PrimExpr, iv: E.IterVar) -> E.PrimExpr:
    """``value`` in ``iv``'s type: a part of an int64 fused loop fits its own, narrower variable."""
    return value if value.dtype == iv.var.dtype else ops.cast(value, iv.var.dtype)


def pass_up_index(stage: Any, dom_map: dict[E.IterVar, E.Range], values: dict[E.IterVar, E.PrimExpr]) -> None:
    """The value of every parent variable from its children's ``values`` (leaves first)."""
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            if rel.outer in values and rel.inner in values:
                factor = dom_map[rel.inner].extent
                v = values[rel.outer] * factor + values[rel.inner]
                values[rel.parent] = _add_min(v, dom_map[rel.parent].min)
        elif isinstance(rel, Fuse):
            if rel.fused in values:
                factor = dom_map[rel.inner].extent
                fused = values[rel.fused]
                values[rel.outer] = _add_min(_narrow(ops.floordiv(fused, factor), rel.outer), dom_map[rel.outer].min)
                values[rel.inner] = _add_min(_narrow(ops.floormod(fused, factor), rel.inner), dom_map[rel.inner].min)
        elif isinstance(rel, Rebase):
            if rel.rebased in values:
                values[rel.parent] = _add_min(values[rel.rebased], dom_map[rel.parent].min)


def pass_up_bound_check(stage: Any, dom_map: dict[E.IterVar, E.Range], state: dict[E.IterVar, bool],
                        analyzer: Any) -> None:
    """Mark the variables a non-divisible split can push past their extent."""
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            need = state.get(rel.outer, False) or state.get(rel.inner, False)
            if not need:
                covered = dom_map[rel.outer].extent * dom_map[rel.inner].extent
                need = not analyzer.can_prove_equal(covered, dom_map[rel.parent].extent)
            state[rel.parent] = need
        elif isinstance(rel, Fuse):
            state[rel.outer] = state[rel.inner] = state.get(rel.fused, False)
        elif isinstance(rel, Rebase):
            state[rel.parent] = state.get(rel.rebased, False)


def pass_down_bitmask(stage: Any, state: dict[E.IterVar, int]) -> None:
    """OR the bit flags of each variable into the variables derived from it."""
    for rel in stage.relations:
        if isinstance(rel, Split):
            flag = state.get(rel.parent, 0)
            state[rel.outer] = state.get(rel.outer, 0) | flag
            state[rel.inner] = state.get(rel.inner, 0) | flag
        elif isinstance(rel, Fuse):
            state[rel.fused] = state.get(rel.fused, 0) | state.get(rel.outer, 0) | state.get(rel.inner, 0)
        elif isinstance(rel, Rebase):
            state[rel.rebased] = state.get(rel.rebased, 0) | state.get(rel.parent, 0)
        else:
            state.setdefault(rel.iter, 0)
