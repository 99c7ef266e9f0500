"""A stage's loop nest and bound checks (classic TVM's ``MakeLoopNest`` / ``MakeBoundCheck``).

A nest is a list of levels, one before the first leaf loop and one after each;
a level is a list of frames, each a function wrapping a body statement (a
loop, a let, an attribute).  :func:`merge_nest` applies them inside out.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Optional

from ..arith import Analyzer
from ..errors import LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.dtype import MAX_LANES
from ..ir.intrin import likely
from ..ir.node import Node, traversal_names
from ..ir.stmt import AttrStmt, For, IfThenElse, LetStmt, Stmt
from ..arith.int_set import IntervalSet, eval_set
from .relations import pass_up_bound_check, pass_up_index
from .schedule import root_iter_vars

__all__ = ["make_loop_nest", "make_bound_check", "merge_nest", "if_nest", "Frame"]

Frame = Callable[[Stmt], Stmt]
_FOR_KIND = {"data_par": "serial", "unrolled": "unrolled", "vectorized": "vectorized", "parallelized": "parallel"}
_VIRTUAL_TAGS = ("vthread", "cthread")


def _is_one(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def _is_zero(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


def _loop_frames(iv: E.IterVar, var: E.Var, dom: E.Range, kind: str, values: dict[E.IterVar, E.PrimExpr]) -> list[Frame]:
    if _is_one(dom.extent):
        values[iv] = dom.min
        return [lambda b: LetStmt(var, dom.min, b)]
    if _is_zero(dom.min):
        values[iv] = var
        return [lambda b: For(var, ops.const(0, var.dtype), dom.extent, kind, b)]
    idx = E.Var(f"{var.name}.idx", var.dtype)
    values[iv] = dom.min + idx
    return [lambda b: For(idx, ops.const(0, var.dtype), dom.extent, kind, b),
            lambda b: LetStmt(var, dom.min + idx, b)]


def _check_lanes(stage: Any, iv: E.IterVar, dom: E.Range) -> None:
    """A vectorized loop becomes one vector of ``extent`` lanes: refuse one wider than any vector."""
    if isinstance(dom.extent, E.IntImm) and dom.extent.value > MAX_LANES:
        raise LoomValueError(f"vectorize on {stage.op.name}: loop {iv.var.name} has {dom.extent.value} iterations, "
                             f"more than the {MAX_LANES} lanes a vector can have; split it "
                             f"(s[{stage.op.name}].split({iv.var.name}, factor=8)) and vectorize the inner loop")


def _prefetch_frames(stage: Any, iv: E.IterVar, attr: Any, kind: str) -> list[Frame]:
    """``prefetch_scope`` attributes inside loop ``iv``; :mod:`loom.transform.inject_prefetch` expands them."""
    if kind == "vectorized":
        raise LoomValueError(f"prefetch on {stage.op.name}: loop {iv.var.name} is vectorized (its lanes run at "
                             "once); prefetch in a loop around it")
    return [partial(AttrStmt, tensor, "prefetch_scope", offset) for tensor, offset in attr.prefetch]


def make_loop_nest(stage: Any, dom_map: dict[E.IterVar, E.Range], begin: int, new_loop_var: bool,
                   skip: set[E.IterVar], values: dict[E.IterVar, E.PrimExpr],
                   attach: Optional[Callable[[E.IterVar, Stmt], Stmt]] = None) -> list[list[Frame]]:
    """Frames for the stage's leaf loops from position ``begin``; fills ``values`` for every axis.

    ``new_loop_var`` makes fresh loop variables (the separate nest of a reduction's
    initialization); ``attach(iv, body)`` places attached stages inside loop ``iv``.
    """
    leaves = stage.leaf_iter_vars
    nest: list[list[Frame]] = [[] for _ in range(len(leaves) + 1)]
    for i in range(begin, len(leaves)):
        iv = leaves[i]
        level = nest[i + 1]
        if iv in skip or iv.iter_type == "opaque":
            values[iv] = iv.var
            continue
        attr = stage.iter_var_attrs.get(iv)
        thread = attr.bind_thread if attr is not None else None
        dom = dom_map[iv]
        if thread is None:
            var = E.Var(f"{iv.var.name}.init", iv.var.dtype) if new_loop_var else iv.var
            for key, value in (attr.pragmas if attr is not None else []):
                level.append(partial(AttrStmt, iv, f"pragma_{key}", value))
            kind = _FOR_KIND.get(attr.iter_type if attr is not None else "data_par", "serial")
            if kind == "vectorized":
                _check_lanes(stage, iv, dom)
            level.extend(_loop_frames(iv, var, dom, kind, values))
            if attr is not None and attr.prefetch and not new_loop_var:
                level.extend(_prefetch_frames(stage, iv, attr, kind))
        else:
            if attr.prefetch:
                raise LoomValueError(f"prefetch on {stage.op.name}: loop {iv.var.name} is bound to "
                                     f"{thread.var.name}; prefetch in a serial loop")
            key = "virtual_thread" if thread.thread_tag in _VIRTUAL_TAGS else "thread_extent"
            level.append(partial(AttrStmt, thread, key, dom.extent))
            # A thread index runs over [0, extent): an axis whose range starts elsewhere (a stage
            # attached inside another's loops) is that start plus the index, as for loops above.
            if _is_one(dom.extent):
                values[iv] = dom.min
            elif _is_zero(dom.min):
                values[iv] = thread.var
            else:
                values[iv] = dom.min + thread.var
        if attach is not None and not new_loop_var:
            level.append(partial(attach, iv))
    pass_up_index(stage, dom_map, values)
    return nest


def make_bound_check(stage: Any, dom_map: dict[E.IterVar, E.Range], values: dict[E.IterVar, E.PrimExpr],
                     skip_domain: bool, skip: set[E.IterVar],
                     declared: dict[E.IterVar, E.Range] | None = None) -> list[E.PrimExpr]:
    """Conditions keeping each axis inside its inferred range and its declared domain.

    ``declared`` overrides the declared domains of some root axes (a reduction axis whose
    range names a data axis, rewritten in the loop variables).

    A condition is left out when interval analysis proves it always holds.
    """
    an = Analyzer()
    sets: dict[E.Var, IntervalSet] = {}
    # Only the variables the checks can reach matter; binding the whole schedule's was most of lowering's time.
    wanted = _reachable_vars(stage, dom_map, values, declared)
    for iv, r in dom_map.items():
        if iv.var in wanted:
            sets[iv.var] = IntervalSet.from_range(r)
            an.bind(iv.var, r, allow_override=True)
    needs: dict[E.IterVar, bool] = {iv: False for iv in stage.leaf_iter_vars}
    pass_up_bound_check(stage, dom_map, needs, an)
    preds: list[E.PrimExpr] = []
    # Every axis a split leaves uneven needs a check, intermediate ones included:
    # splitting the inner part of an uneven split again must not run past it.
    for iv in stage.all_iter_vars:
        if iv in skip or iv.iter_type == "opaque" or iv not in values or not needs.get(iv, False):
            continue
        dom = dom_map[iv]
        value = an.simplify(values[iv] - dom.min)
        vmax = eval_set(value, sets, an).max
        if vmax is None or not an.can_prove(vmax < dom.extent):
            preds.append(value < dom.extent)
    for iv in root_iter_vars(stage.op):
        if iv in skip or iv.iter_type == "opaque" or iv not in values:
            continue
        dom, root = dom_map[iv], (declared or {}).get(iv, iv.dom)
        assert root is not None  # an operation's own axes have domains
        same = an.can_prove_equal(root.min, dom.min) and an.can_prove_equal(root.extent, dom.extent)
        if not skip_domain and not same:
            value = an.simplify(values[iv] - root.min)
            s = eval_set(value, sets, an)
            if s.min is None or not an.can_prove(s.min >= 0):
                preds.append(value >= 0)
            if s.max is None or not an.can_prove(s.max < root.extent):
                preds.append(value < root.extent)
    return preds


def _reachable_vars(stage: Any, dom_map: dict[E.IterVar, E.Range], values: dict[E.IterVar, E.PrimExpr],
                    declared: dict[E.IterVar, E.Range] | None) -> set[E.Var]:
    """The variables in what :func:`make_bound_check` analyzes (the stage's ranges and index values,
    the declared domains), and in the ranges of those variables, transitively."""
    seeds: list[Any] = []
    for iv in (*stage.all_iter_vars, *root_iter_vars(stage.op)):
        seeds += [dom_map.get(iv), values.get(iv), (declared or {}).get(iv), iv.dom]
    range_of = {iv.var: r for iv, r in dom_map.items()}
    found: set[E.Var] = set()
    stack = [x for x in seeds if x is not None]
    while stack:
        n = stack.pop()
        if isinstance(n, E.Var):
            if n not in found:
                found.add(n)
                if n in range_of:
                    stack.append(range_of[n])
        elif isinstance(n, Node):
            for name in traversal_names(type(n)):
                v = getattr(n, name)
                if isinstance(v, tuple):
                    stack.extend(x for x in v if isinstance(x, Node))
                elif isinstance(v, dict):
                    stack.extend(x for kv in v.items() for x in kv if isinstance(x, Node))
                elif isinstance(v, Node):
                    stack.append(v)
    return found


def if_nest(preds: list[E.PrimExpr], body: Stmt) -> Stmt:
    """``body`` inside one ``if likely(p)`` per predicate (the first outermost)."""
    for p in reversed(preds):
        body = IfThenElse(likely(p), body)
    return body


def merge_nest(nest: list[list[Frame]], body: Stmt) -> Stmt:
    """Apply the frames of ``nest`` around ``body``, the last frame innermost."""
    for level in reversed(nest):
        for frame in reversed(level):
            body = frame(body)
    return body
