"""Compiling thread-bound code with GPU semantics: launch regions, bound attrs, barriers, shared memory.

The outermost ``thread_extent`` attr of a ``blockIdx.*``/``threadIdx.*`` IterVar
starts a *launch region* (see ``_launch`` for how one runs).  Inside it such an
attr does not loop: it binds its variable to the thread's (or block's)
coordinate and runs its body only when the coordinate is below its own extent,
exactly as a CUDA kernel guards a thread index.  Other thread tags
(``vthread``...) keep the interpreter's sequential loops.  Warp shuffles
(``tvm_warp_shuffle_down``, ``tvm_warp_shuffle``) wait like barriers for the
lanes their mask names (``_warp``).
"""

from __future__ import annotations

import textwrap
from typing import Any

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import Visitor
from ._codegen import Code, function, lambda_
from ._errors import InterpreterError
from ._launch import Region

__all__ = ["is_launch_attr", "compile_region", "compile_bound_attr", "compile_barrier", "compile_shuffle",
           "shared_allocate", "is_shared_scope"]

_LAUNCH_PREFIXES = ("blockIdx.", "threadIdx.")


def is_launch_attr(node: S.AttrStmt) -> bool:
    """A ``thread_extent`` attr of a block or thread index."""
    iv = node.node
    return node.attr_key == "thread_extent" and isinstance(iv, E.IterVar) \
        and iv.thread_tag.startswith(_LAUNCH_PREFIXES)


def is_shared_scope(scope: str) -> bool:
    """Memory one block shares (``shared``, ``shared.dyn``)."""
    return scope == "shared" or scope.startswith("shared.")


class _LaunchAttrs(Visitor):
    """Every launch attr of a subtree, in first-seen (pre-)order, grouped by tag."""

    def __init__(self) -> None:
        self.by_tag: dict[str, list[S.AttrStmt]] = {}

    def visit_AttrStmt(self, node: S.AttrStmt) -> None:  # noqa: N802 - visitor naming
        if is_launch_attr(node):
            self.by_tag.setdefault(node.node.thread_tag, []).append(node)
        self.generic_visit(node)


def _free_vars(e: E.PrimExpr) -> list[E.Var]:
    found: list[E.Var] = []

    class Vars(Visitor):
        def visit_Var(self, v: E.Var) -> None:  # noqa: N802
            found.append(v)

    Vars().visit(e)
    return found


def compile_region(comp: Any, node: S.AttrStmt) -> Code:
    """The launch region starting at ``node`` (a launch attr outside any region)."""
    walker = _LaunchAttrs()
    walker.visit(node)
    tags = list(walker.by_tag)
    region = Region(comp.fname, [t for t in tags if t.startswith("blockIdx.")],
                    [t for t in tags if t.startswith("threadIdx.")])
    for tag in region.block_tags + region.thread_tags:
        fns = []
        for attr in walker.by_tag[tag]:
            for v in _free_vars(attr.value):
                if not comp.in_scope(v):
                    raise InterpreterError(
                        f"{comp.fname}: the extent {attr.value} of {tag} uses {v.name}, which is not bound where the "
                        "launch begins; a launch extent may only use values known before any thread runs")
            fns.append(comp.expr(attr.value).fn)
        region.extents.append(fns)
    hidden = [E.Var(f"{tag}@coord", "int32") for tag in tags] + [E.Var("@thread", "int32")]
    for tag, v in zip(tags, hidden):
        region.coord_slots[tag] = comp.bind(v)
    region.thr_slot = comp.bind(hidden[-1])
    comp.region = region
    try:
        body = comp.stmt(node).fn
    finally:
        comp.region = None
        for v in hidden:
            comp.unbind(v)
    return Code(lambda f: region.run(body, f))


def compile_bound_attr(comp: Any, node: S.AttrStmt) -> Code:
    """A launch attr inside a region: bind the coordinate, guard the body by the attr's own extent."""
    iv = node.node
    extent = comp.expr(node.value)
    shadows = comp.in_scope(iv.var)
    slot = comp.bind(iv.var)
    try:
        body = comp.stmt(node.body)
    finally:
        comp.unbind(iv.var)
    coord = comp.region.coord_slots[iv.thread_tag]
    template = """
        c = f[COORD]
        if c < {0}:
            f[SLOT] = c
            {1}
        """
    if shadows:  # the Var is bound around this attr too: give its value back afterwards
        template = "old = f[SLOT]\n" + textwrap.dedent(template).strip("\n") + "\nf[SLOT] = old"
    return function(template, [extent, body], COORD=coord, SLOT=slot)


def compile_barrier(comp: Any, node: E.Call) -> Code | None:
    """``tvm_storage_sync(scope)`` in a region: wait for the block (or grid); None outside regions."""
    region = comp.region
    if region is None:
        return None
    scope = node.args[0].value if node.args and isinstance(node.args[0], E.StringImm) else "shared"
    index = region.add_barrier(scope)
    thr = region.thr_slot
    return Code(lambda f: f[thr].sync(index))


def compile_shuffle(comp: Any, node: E.Call, down: bool) -> Code:
    """``tvm_warp_shuffle_down``/``tvm_warp_shuffle`` in a region: a collective of the warp (see ``_warp``)."""
    name = node.op.name
    region = comp.region
    if region is None:
        raise InterpreterError(f"{comp.fname}: {name} outside a launch region: a warp shuffle needs threads")
    if len(node.args) != 5:
        raise InterpreterError(f"{comp.fname}: {name} takes (mask, value, lane, width, warp_size), got {node}")
    mask, value, *ints = node.args
    if node.dtype != value.dtype or value.dtype.lanes != 1 or value.dtype.is_handle:
        raise InterpreterError(f"{comp.fname}: {name} shuffles one scalar of its own dtype {node.dtype}, got a "
                               f"{value.dtype} value in {node}")
    if not all(a.dtype.is_integer and a.dtype.lanes == 1 for a in (mask, *ints)):
        raise InterpreterError(f"{comp.fname}: {name} needs integer mask, lane, width and warp size, in {node}")
    index = region.add_shuffle(name)
    return lambda_("f[THR].shuffle(INDEX, DOWN, {0}, {1}, {2}, {3}, {4})", [comp.expr(a) for a in node.args],
                   THR=region.thr_slot, INDEX=index, DOWN=down)


def shared_allocate(comp: Any, var: E.Var) -> int:
    """Register ``var`` as a shared allocation of the current region; its per-block memory key."""
    region = comp.region
    region.shared_vars.add(id(var))
    region.nshared += 1
    return region.nshared - 1
