"""Lowering a scheduled :class:`~loom.te.operation.HybridOp`: the stage's loops replace the body's.

A hybrid operation's body is ordinary IR whose ``For`` loops are the
operation's ``axis``.  Schedule primitives transform those IterVars as they
transform a compute's axes; lowering then rebuilds the body's loops from the
stage's leaf loops.

The unit of rebuilding is a *perfect nest*: a ``For`` whose body is directly
the next ``For`` of the nest (one whose bounds do not use the outer loops of
the nest).  Each nest is replaced by the leaf loops derived from its axes, in
the stage's leaf order, made by the same :func:`make_loop_nest` /
:func:`make_bound_check` as a compute stage (so kinds, thread bindings,
pragmas, guards of uneven splits and compute_at attachments all work), and the
nest's axes are substituted by their values in terms of the new loops.  A loop
the schedule leaves alone keeps the kind its script gave it (``parallel(n)``).
TVM's HybridOp does the same job one relation at a time (``ApplyLoopShapes``,
``ApplyLoopAnnotations``, ``ApplyLoopOrder``).

Relations cannot cross nests: fusing loops of two nests, or reordering a loop
across a loop of another nest, is an error that names the loops.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import LoomError, LoomValueError
from ..ir import expr as E
from ..ir.functor import Mutator, Visitor, collect, substitute
from ..ir.producer import ProducerLoad, ProducerStore
from ..ir.stmt import For, Stmt
from .loop_nest import if_nest, make_bound_check, make_loop_nest, merge_nest
from .operation import HybridOp
from .relations import Fuse, IterVarAttr, Rebase, Split

__all__ = ["lower_hybrid_stage"]

#: The schedule's name of each loop kind a script can give (see IterVarAttr.iter_type).
_SCRIPT_KINDS = {"unrolled": "unrolled", "vectorized": "vectorized", "parallel": "parallelized"}


def _uses_any(loop: For, outer: list[For]) -> bool:
    ids = {id(f.loop_var) for f in outer}
    return bool(collect(loop.min, lambda n: id(n) in ids) + collect(loop.extent, lambda n: id(n) in ids))


class _Nests(Visitor):
    """The perfect nests of a body, outermost first: lists of For loops."""

    def __init__(self, roots: dict[E.Var, E.IterVar]) -> None:
        self.roots = roots
        self.nests: list[list[For]] = []

    def visit_For(self, loop: For) -> None:
        if loop.loop_var not in self.roots:
            raise LoomError(f"loop {loop.loop_var.name} of a hybrid body is not one of the operation's axes")
        chain = [loop]
        while isinstance(chain[-1].body, For):
            inner = chain[-1].body
            if _uses_any(inner, chain):
                break  # a triangular loop: its own nest, so no schedule can move it above its bound
            chain.append(inner)
        self.nests.append(chain)
        self.visit(chain[-1].body)


def _owners(stage: Any, nests: list[list[For]], roots: dict[E.Var, E.IterVar]) -> dict[E.IterVar, int]:
    """The nest each of the stage's loop variables belongs to; a fuse across nests is an error."""
    owner: dict[E.IterVar, int] = {}
    for k, chain in enumerate(nests):
        for loop in chain:
            owner[roots[loop.loop_var]] = k
    name = stage.op.name
    for rel in stage.relations:
        if isinstance(rel, Split):
            owner[rel.outer] = owner[rel.inner] = owner[rel.parent]
        elif isinstance(rel, Fuse):
            if owner[rel.outer] != owner[rel.inner]:
                raise LoomValueError(
                    f"fuse on hybrid {name}: {rel.outer.var.name} and {rel.inner.var.name} are not perfectly "
                    f"nested (other statements, or a bound that uses the outer loop, lie between them); only "
                    f"loops of one perfect nest can be fused")
            owner[rel.fused] = owner[rel.outer]
        elif isinstance(rel, Rebase):
            owner[rel.rebased] = owner[rel.parent]
        else:  # a singleton loop (fuse of no axes) goes around the first nest
            if not nests:
                raise LoomValueError(f"fuse() on hybrid {name}: the body has no loop to put the new loop around")
            owner[rel.iter] = 0
    last: E.IterVar | None = None
    for iv in stage.leaf_iter_vars:
        if last is not None and owner[iv] < owner[last]:
            raise LoomValueError(
                f"reorder on hybrid {name}: loop {iv.var.name} was moved across {last.var.name}, a loop of "
                f"another nest of the body; reorder only loops of one perfect nest")
        last = iv
    return owner


class _NestView:
    """The part of a stage one nest owns, in the shape ``make_loop_nest`` reads."""

    def __init__(self, stage: Any, leaves: list[E.IterVar], attrs: dict[E.IterVar, IterVarAttr]) -> None:
        self.op = stage.op
        self.leaf_iter_vars = leaves
        self.all_iter_vars = stage.all_iter_vars
        self.relations = stage.relations
        self.iter_var_attrs = attrs


def _loop_attrs(stage: Any, roots: dict[E.Var, E.IterVar], kinds: dict[E.IterVar, str]) -> dict[E.IterVar, IterVarAttr]:
    """The stage's loop attributes plus the script's kind on each loop no primitive reshaped."""
    out = dict(stage.iter_var_attrs)
    for rel in stage.relations:
        if isinstance(rel, Rebase) and rel.rebased not in out and kinds.get(rel.parent) in _SCRIPT_KINDS:
            out[rel.rebased] = IterVarAttr(_SCRIPT_KINDS[kinds[rel.parent]])
    return out


class _Rebuild(Mutator):
    def __init__(self, stage: Any, dom_map: dict[E.IterVar, E.Range], attach: Callable[[E.IterVar, Stmt], Stmt],
                 roots: dict[E.Var, E.IterVar], nests: list[list[For]]) -> None:
        self.stage, self.dom_map, self.attach, self.roots = stage, dom_map, attach, roots
        self.index = {id(chain[0]): k for k, chain in enumerate(nests)}
        self.nests = nests
        kinds = {roots[f.loop_var]: f.kind.value for chain in nests for f in chain}
        self.owner = _owners(stage, nests, roots)
        self.attrs = _loop_attrs(stage, roots, kinds)

    def visit_For(self, loop: For) -> Stmt:
        k = self.index[id(loop)]
        chain = self.nests[k]
        inner = self.visit(chain[-1].body)
        leaves = [iv for iv in self.stage.leaf_iter_vars if self.owner[iv] == k]
        view = _NestView(self.stage, leaves, self.attrs)
        values: dict[E.IterVar, E.PrimExpr] = {}
        nest = make_loop_nest(view, self.dom_map, 0, False, set(), values, self.attach)
        axes = [self.roots[f.loop_var] for f in chain]
        for iv in axes:  # a loop bound to a thread directly keeps its own start
            attr = self.attrs.get(iv)
            start = self.dom_map[iv].min
            if attr is not None and attr.bind_thread is not None and not _is_zero(start):
                values[iv] = attr.bind_thread.var + start
        preds = make_bound_check(view, self.dom_map, values, False, set())
        body = merge_nest(nest, if_nest(preds, inner))
        return substitute(body, {iv.var: values[iv] for iv in axes if values[iv] is not iv.var})


def _is_zero(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


class _Redirect(Mutator):
    """Point loads and stores of the body's output placeholders at the operation's outputs."""

    def __init__(self, vmap: dict[Any, Any]) -> None:
        self.vmap = vmap

    def visit_ProducerLoad(self, node: ProducerLoad) -> Any:
        indices = [self.visit(i) for i in node.indices]
        return ProducerLoad(self.vmap.get(node.producer, node.producer), indices)

    def visit_ProducerStore(self, node: ProducerStore) -> Any:
        indices = [self.visit(i) for i in node.indices]
        return ProducerStore(self.vmap.get(node.producer, node.producer), self.visit(node.value), indices)


def lower_hybrid_stage(stage: Any, dom_map: dict[E.IterVar, E.Range],
                       attach: Callable[[E.IterVar, Stmt], Stmt]) -> Stmt:
    """The statement computing a hybrid ``stage`` of a normalized, bound-inferred schedule.

    ``attach(iv, body)`` places the stages computed at loop ``iv`` (see schedule_ops).
    """
    op: HybridOp = stage.op
    roots = {iv.var: iv for iv in op.axis}
    finder = _Nests(roots)
    finder.visit(op.body)
    found = {f.loop_var for chain in finder.nests for f in chain}
    missing = [iv.var.name for iv in op.axis if iv.var not in found]
    if missing:
        raise LoomError(f"hybrid {op.name}: axes {missing} are not loops of its body")
    body = _Rebuild(stage, dom_map, attach, roots, finder.nests).visit(op.body)
    outputs = {t: stage.origin_op.output(k) for k, t in enumerate(op.outputs)}
    return _Redirect(outputs).visit(body)
