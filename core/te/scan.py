"""``loom.scan``: a recurrence over the first (time) axis of one or more state tensors.

``scan(init, update, state_placeholder)`` computes tensors ``S`` shaped like the
state placeholders: rows ``[0, init.shape[0])`` come from ``init``, and each
later row ``t`` is ``update``'s row ``t``, where ``update`` reads earlier rows of
the state through ``state_placeholder`` (``state[t - 1, i]``).  Classic TVM's
``tvm.scan``:

>>> import loom
>>> m, n = loom.var("m"), loom.var("n")
>>> X = loom.placeholder((m, n), name="X")
>>> state = loom.placeholder((m, n), name="state")
>>> init = loom.compute((1, n), lambda _, i: X[0, i], name="init")
>>> update = loom.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
>>> S = scan(init, update, state, inputs=[X], name="cumsum")
>>> S.name, [str(d) for d in S.shape], S.op.scan_axis.var.name, str(S.op.scan_axis.dom.min)
('cumsum', ['m', 'n'], 'cumsum.idx', '1')

Lowering (``scan_lower``) makes one serial loop over the scan axis: the stages
of the update (every operation on a path from a state placeholder, or from one
of ``inputs``, to an update) run inside it, one row per step, and write the
scan's outputs directly; reads of a state placeholder read the outputs.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar, overload

from ..arith import Analyzer
from ..errors import IRError, LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.dtype import DataType
from ..ir.node import DictOf, TupleOf, child, children, mapping, register_object
from ..ir.node import value as val
from ..ir.printer import register_node_printer
from .tensor import Operation, PlaceholderOp, Tensor, unique_tensors

__all__ = ["ScanOp", "scan", "update_body", "dataflow_between"]


@register_object("te.ScanOp")
class ScanOp(Operation):
    """A scan: output ``k`` is ``init[k]`` on its first rows and ``update[k]`` on the rest.

    ``scan_axis`` (``<name>.idx``, an ``ordered`` IterVar) runs over the rows the
    update computes, ``[init.shape[0], state.shape[0])``.  ``inputs`` only helps
    to delimit the update's stages (see :func:`update_body`).
    """

    name: str = val(str)
    scan_axis: E.IterVar = child(E.IterVar)
    init: TupleOf[Tensor] = children(Tensor)
    update: TupleOf[Tensor] = children(Tensor)
    state_placeholder: TupleOf[Tensor] = children(Tensor)
    inputs: TupleOf[Tensor] = children(Tensor)
    tag: str = val(str, default="")
    attrs: DictOf[str, Any] = mapping()

    def __attrs_post_init__(self) -> None:
        n = len(self.state_placeholder)
        if not n or len(self.init) != n or len(self.update) != n:
            raise IRError(f"scan {self.name}: needs as many inits ({len(self.init)}) and updates "
                          f"({len(self.update)}) as state placeholders ({n}), at least one")
        if self.scan_axis.dom is None:
            raise IRError(f"scan {self.name}: the scan axis has no domain")

    @property
    def num_outputs(self) -> int:
        return len(self.update)

    def output_shape(self, index: int) -> tuple[E.PrimExpr, ...]:
        return self.state_placeholder[index].shape

    def output_dtype(self, index: int) -> DataType:
        return self.update[index].dtype

    @property
    def input_tensors(self) -> list[Tensor]:
        return unique_tensors(self.init + self.update)


N = TypeVar("N")


def _reaching(roots: Sequence[N], sources: set[int], inputs_of: Callable[[N], list[N]]) -> dict[int, bool]:
    """For each node reachable from ``roots`` (stopping at ``sources``): does it read a source?"""
    reach: dict[int, bool] = {}
    stack: list[tuple[N, bool]] = [(x, False) for x in roots]
    while stack:
        x, done = stack.pop()
        if id(x) in sources:
            reach[id(x)] = True
        elif done:
            reach[id(x)] = any(reach.get(id(i), False) for i in inputs_of(x))
        elif id(x) not in reach:
            reach[id(x)] = False  # in progress (a DAG: only an ancestor can see this)
            stack.append((x, True))
            stack.extend((i, False) for i in inputs_of(x) if id(i) not in reach)
    return reach


def dataflow_between(roots: Sequence[N], sources: Sequence[N], inputs_of: Callable[[N], list[N]]) -> list[N]:
    """The nodes on a path from one of ``sources`` to one of ``roots`` (roots included, sources not).

    Nodes are operations or stages; ``inputs_of`` gives the nodes one reads.
    """
    source_ids = {id(x) for x in sources}
    reach = _reaching(roots, source_ids, inputs_of)
    seen: dict[int, N] = {}
    stack = list(roots)
    while stack:
        x = stack.pop()
        if id(x) in seen or id(x) in source_ids or not reach.get(id(x), False):
            continue
        seen[id(x)] = x
        stack.extend(inputs_of(x))
    return list(seen.values())


def _input_ops(op: Operation) -> list[Operation]:
    return [t.op for t in op.input_tensors]


def update_body(op: ScanOp) -> list[Operation]:
    """The operations a step of the scan computes: those on a path from a state placeholder (or one
    of ``op.inputs``) to an update, the updates included, in no particular order.

    >>> import loom
    >>> X = loom.placeholder((5, 3), name="X")
    >>> state = loom.placeholder((5, 3), name="state")
    >>> init = loom.compute((1, 3), lambda _, i: X[0, i], name="init")
    >>> half = loom.compute((5, 3), lambda t, i: state[t - 1, i] * 0.5, name="half")
    >>> Xc = loom.compute((5, 3), lambda t, i: X[t, i] + 1.0, name="Xc")
    >>> update = loom.compute((5, 3), lambda t, i: half[t, i] + Xc[t, i], name="update")
    >>> sorted(o.name for o in update_body(scan(init, update, state).op))
    ['half', 'update']
    """
    sources = [t.op for t in op.state_placeholder + op.inputs]
    return dataflow_between([t.op for t in op.update], sources, _input_ops)


def _as_tensors(x: Any, what: str, role: str) -> list[Tensor]:
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    for k, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise LoomTypeError(f"{what}: {role} {k} must be a Tensor, got {type(t).__name__}")
    return items


def _check_state(k: int, init: Tensor, update: Tensor, state: Tensor, an: Analyzer, what: str) -> None:
    """Shapes and dtypes of one state: the three agree except on the first (time) dimension of init."""
    if not isinstance(state.op, PlaceholderOp):
        raise LoomTypeError(f"{what}: state_placeholder {k} ({state.name}) must be a loom.placeholder, got the "
                            f"output of a {type(state.op).__name__}")
    if state.ndim == 0:
        raise LoomValueError(f"{what}: state {state.name} has no dimension; the first one is the scan (time) axis")
    for t, role in ((init, "init"), (update, "update")):
        if t.dtype != state.dtype:
            raise LoomTypeError(f"{what}: {role} {t.name} is {t.dtype} but its state {state.name} is {state.dtype}")
        if t.ndim != state.ndim:
            raise LoomValueError(f"{what}: {role} {t.name} has {t.ndim} dimension(s) but its state {state.name} "
                                 f"has {state.ndim}")
    shape = lambda t: "(" + ", ".join(map(str, t.shape)) + ")"  # noqa: E731
    for d in range(state.ndim):
        for t, role in ((init, "init"), (update, "update")):
            if (d > 0 or t is update) and not an.can_prove_equal(t.shape[d], state.shape[d]):
                raise LoomValueError(f"{what}: {role} {t.name} has shape {shape(t)} but its state {state.name} has "
                                     f"{shape(state)}; they must agree on dimension {d}")


# One state gives one Tensor; lists give a list of tensors (a single Tensor for lists of one, as in TVM),
# whose length a type checker cannot know, hence Any.
@overload
def scan(init: Tensor, update: Tensor, state_placeholder: Tensor, inputs: Sequence[Tensor] | None = ...,
         name: str = ..., tag: str = ..., attrs: dict[str, Any] | None = ...) -> Tensor[ScanOp]: ...
@overload
def scan(init: Sequence[Tensor], update: Sequence[Tensor], state_placeholder: Sequence[Tensor],
         inputs: Sequence[Tensor] | None = ..., name: str = ..., tag: str = ...,
         attrs: dict[str, Any] | None = ...) -> Any: ...
def scan(init: Tensor | Sequence[Tensor], update: Tensor | Sequence[Tensor],
         state_placeholder: Tensor | Sequence[Tensor], inputs: Sequence[Tensor] | None = None,
         name: str = "scan", tag: str = "", attrs: dict[str, Any] | None = None) -> Any:
    """The scan computing ``state_placeholder`` over its first axis (one Tensor, or a list for several states).

    ``init`` (or a list, one per state) gives rows ``[0, init.shape[0])`` of each state;
    ``update`` gives every later row ``t``, reading earlier rows through the state
    placeholders.  All of one state's tensors share its dtype and its shape, except
    ``init``'s first dimension.  ``inputs`` (optional) lists the tensors the update
    reads besides the states, as in TVM.

    >>> import loom
    >>> X = loom.placeholder((6, 2), "int32", name="X")
    >>> s1, s2 = loom.placeholder((6, 2), "int32", name="s1"), loom.placeholder((6, 2), "int32", name="s2")
    >>> i1 = loom.compute((1, 2), lambda _, i: X[0, i], name="i1")
    >>> i2 = loom.compute((1, 2), lambda _, i: loom.const(0), name="i2")
    >>> u1 = loom.compute((6, 2), lambda t, i: s1[t - 1, i] + X[t, i], name="u1")
    >>> u2 = loom.compute((6, 2), lambda t, i: s2[t - 1, i] + s1[t - 1, 0], name="u2")
    >>> A, B = scan([i1, i2], [u1, u2], [s1, s2], name="two")
    >>> A.name, B.name, A.op.num_outputs
    ('two.v0', 'two.v1', 2)
    """
    what = f"scan {name!r}"
    inits = _as_tensors(init, what, "init")
    updates = _as_tensors(update, what, "update")
    states = _as_tensors(state_placeholder, what, "state_placeholder")
    extra = _as_tensors(inputs, what, "input") if inputs is not None else []
    if not states:
        raise LoomValueError(f"{what}: no state placeholder given")
    if not len(inits) == len(updates) == len(states):
        raise LoomValueError(f"{what}: {len(inits)} init(s), {len(updates)} update(s) and {len(states)} state "
                             f"placeholder(s) given; give one of each per state")
    if len({id(s) for s in states}) != len(states):
        raise LoomValueError(f"{what}: a state placeholder is given twice")
    an = Analyzer()
    for k, (i, u, s) in enumerate(zip(inits, updates, states)):
        _check_state(k, i, u, s, an, what)
    begin, end = inits[0].shape[0], states[0].shape[0]
    for i, s in zip(inits[1:], states[1:]):
        if not an.can_prove_equal(i.shape[0], begin) or not an.can_prove_equal(s.shape[0], end):
            raise LoomValueError(f"{what}: every state must have the time extent of the first ({end}) and every init "
                                 f"the same number of rows ({begin}); {s.name} has {s.shape[0]}, {i.name} {i.shape[0]}")
    if begin.dtype != end.dtype:  # one index type for the axis: the wider one
        begin, end = ops._match(begin, end)
    extent = an.simplify(end - begin)
    if isinstance(extent, E.IntImm) and extent.value < 0:
        raise LoomValueError(f"{what}: init {inits[0].name} has {begin} rows, more than the {end} of the state")
    _check_dependences(inits, updates, states, what)
    axis = E.IterVar(E.Range(begin, extent), E.Var(f"{name}.idx", begin.dtype), "ordered")
    op = ScanOp(name, axis, inits, updates, states, extra, tag, dict(attrs or {}))
    outputs = [op.output(k) for k in range(op.num_outputs)]
    return outputs[0] if len(outputs) == 1 else outputs


def _check_dependences(inits: list[Tensor], updates: list[Tensor], states: list[Tensor], what: str) -> None:
    """Every update reads some state (or it is no recurrence); no init does (the state does not exist yet)."""
    state_ops = {id(s.op) for s in states}
    names = ", ".join(s.name for s in states)
    for u in updates:
        if id(u.op) in state_ops or not _reaching([u.op], state_ops, _input_ops).get(id(u.op), False):
            raise LoomValueError(f"{what}: update {u.name} does not read any state placeholder ({names}); the update "
                                 f"computes step t from earlier steps, e.g. state[t - 1, i]")
    for i in inits:
        if id(i.op) in state_ops or _reaching([i.op], state_ops, _input_ops).get(id(i.op), False):
            raise LoomValueError(f"{what}: init {i.name} reads a state placeholder ({names}); the init is what the "
                                 f"state starts from, so it cannot read the state")


def _scan_text(p: Any, op: ScanOp) -> str:
    outs = ", ".join(p.name(op.output(k), op.output(k).name) for k in range(op.num_outputs))
    parts = [", ".join(p.name(t, t.name) for t in ts) for ts in (op.init, op.update, op.state_placeholder)]
    dom = op.scan_axis.dom
    assert dom is not None  # checked at construction
    return (f"scan {outs} = scan(init=[{parts[0]}], update=[{parts[1]}], state=[{parts[2]}])  "
            f"# over {p.expr(op.scan_axis.var)}: {p.node(dom)}")


register_node_printer(ScanOp, _scan_text)
