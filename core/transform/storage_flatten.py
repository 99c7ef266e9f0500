"""``StorageFlatten``: from tensors to buffers.

The schedule's IR reads and writes tensors (``ProducerLoad`` /
``ProducerStore``) inside ``ProducerRealize`` regions.  This pass gives every
tensor one :class:`~loom.ir.Buffer`:

- a tensor in the function's ``tensor_binds`` attribute (arguments, user
  binds) uses its bound buffer; its realize disappears and indices stay
  absolute;
- every other realized tensor gets a new buffer over the realized region (the
  bounds' extents), allocated by an ``Allocate`` in the realize's storage scope
  (``""`` means ``"global"``), with indices shifted by the bounds' mins.

Attributes of the schedule are resolved here: ``storage_align`` (``tvm_tuple(
dim, factor, offset)``) pads the allocated buffer's stride of ``dim`` to
``stride % factor == offset``; ``double_buffer_scope`` moves from the tensor
to the buffer's data var; ``extern_buffer_bind`` (``Array([placeholder,
tensor])``) makes an extern's placeholder buffer read and write the tensor's
storage; ``buffer_bind_scope`` (tensorize) makes a declared buffer a view of
a region of a tensor (:mod:`loom.transform.buffer_bind`); ``realize_scope``
sets the scope of the realize it wraps.  Under
``tir.instrument_bound_checkers`` every statement that accesses a buffer is
preceded by an assertion that its indices are inside the buffer's shape.

Each tensor's buffer is one object everywhere it is used.  The pass removes
the ``tensor_binds`` attribute.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import attrs

from ..errors import IRError, LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.buffer import Buffer, decl_buffer
from ..ir.container import Array
from ..ir.function import PrimFunc
from ..ir.functor import Mutator, collect
from ..ir.node import fields_of
from ..ir.producer import ProducerLoad, ProducerRealize, ProducerStore
from ._util import const_int, is_op_call
from .auto_broadcast import broadcast_accesses
from .pass_base import Pass, PassContext, prim_func_pass

__all__ = ["StorageFlatten", "storage_flatten"]


@attrs.frozen(eq=False)
class _Entry:
    """Where a tensor lives: its buffer and the realized region's mins (None: absolute indices)."""

    buffer: Buffer
    mins: Optional[tuple[E.PrimExpr, ...]] = None

    def rel(self, indices: tuple[E.PrimExpr, ...]) -> tuple[E.PrimExpr, ...]:
        if self.mins is None:
            return tuple(indices)
        return tuple(i if const_int(m) == 0 else ops.sub(i, m) for i, m in zip(indices, self.mins))


def _align_info(body: S.Stmt) -> dict[Any, list[tuple[int, int, int]]]:
    """``{tensor: [(dim, factor, offset)]}`` from the ``storage_align`` attributes."""
    out: dict[Any, list[tuple[int, int, int]]] = {}
    for a in collect(body, lambda n: isinstance(n, S.AttrStmt) and n.attr_key == "storage_align"):
        v = a.value
        if not is_op_call(v, "tir.tvm_tuple") or len(v.args) != 3 or any(const_int(x) is None for x in v.args):
            raise IRError(f"storage_align of {getattr(a.node, 'name', a.node)} expects tvm_tuple(dim, factor, offset) "
                          f"of constants, got {v}")
        dim, factor, offset = (const_int(x) for x in v.args)
        assert dim is not None and factor is not None and offset is not None  # checked above
        out.setdefault(a.node, []).append((dim, factor, offset))
    return out


def _padded_strides(shape: tuple[E.PrimExpr, ...], aligns: list[tuple[int, int, int]]) -> list[E.PrimExpr]:
    """Row-major strides, each stride of an aligned dim rounded up to ``factor * k + offset``."""
    by_dim = {d: (f, o) for d, f, o in aligns}
    strides: list[E.PrimExpr] = []
    stride: E.PrimExpr = ops.const(1, shape[-1].dtype)
    for dim in reversed(range(len(shape))):
        factor, offset = by_dim.get(dim, (0, 0))
        if factor > 0:
            f = ops.const(factor, stride.dtype)
            stride = stride + ops.floormod(f + ops.const(offset % factor, stride.dtype) - ops.floormod(stride, f), f)
        strides.append(stride)
        stride = stride * shape[dim]
    return list(reversed(strides))


class _Flattener(Mutator):
    def __init__(self, binds: dict[Any, Buffer], aligns: dict[Any, list]) -> None:
        self.env: dict[Any, _Entry] = {t: _Entry(b) for t, b in binds.items()}
        self.aligns = aligns
        self.placeholders: dict[Buffer, _Entry] = {}  # extern placeholder -> the tensor's storage
        self.scope_override: dict[Any, str] = {}

    def visit_Buffer(self, b: Buffer) -> Buffer:
        return b

    def entry(self, tensor: Any, what: str) -> _Entry:
        found = self.env.get(tensor)
        if found is None:
            raise IRError(f"{what} tensor {tensor.name}, which is neither realized here nor bound to a buffer "
                          f"(tensor_binds has {sorted(t.name for t in self.env)})")
        return found

    # -- tensors -------------------------------------------------------------------
    def visit_ProducerLoad(self, e: ProducerLoad) -> E.PrimExpr:
        entry = self.entry(e.producer, "load of")
        return E.BufferLoad(entry.buffer, entry.rel(tuple(self.visit(i) for i in e.indices)))

    def visit_ProducerStore(self, s: ProducerStore) -> S.Stmt:
        entry = self.entry(s.producer, "store to")
        idx = entry.rel(tuple(self.visit(i) for i in s.indices))
        return S.BufferStore(entry.buffer, self.visit(s.value), idx)

    def visit_ProducerRealize(self, s: ProducerRealize) -> S.Stmt:
        t = s.producer
        if t in self.env and self.env[t].mins is None:
            return self.visit(s.body)  # a bound tensor: its storage exists already
        if t in self.env:
            raise IRError(f"tensor {t.name} is realized twice")
        scope = self.scope_override.get(t) or s.storage_scope or "global"
        shape = tuple(r.extent for r in s.bounds)
        aligns = self.aligns.get(t, [])
        strides = _padded_strides(shape, aligns) if aligns and shape else None
        buf = decl_buffer(shape, t.dtype, t.name, strides=strides, scope=scope)
        self.env[t] = _Entry(buf, tuple(r.min for r in s.bounds))
        try:
            body = self.visit(s.body)
        finally:
            del self.env[t]
        extents = (strides[0] * shape[0],) if strides else shape
        return S.Allocate(buf.data, t.dtype, extents, self.visit(s.condition), body, scope)

    # -- attributes ------------------------------------------------------------------
    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        key = s.attr_key
        if key == "storage_align":
            return self.visit(s.body)  # applied when the buffer is declared
        if key == "realize_scope":
            self.scope_override[s.node] = str(getattr(s.value, "value", ""))
            return self.visit(s.body)
        if key == "double_buffer_scope" and not isinstance(s.node, E.Var):
            body = self.visit(s.body)  # inside the realize's body the tensor has its buffer
            return S.AttrStmt(self.entry(s.node, "double_buffer_scope of").buffer.data, key, s.value, body)
        if key == "extern_buffer_bind":
            return self._extern_bind(s)
        if key == "buffer_bind_scope":  # tensorize: an intrinsic's buffer views a region of a tensor
            from .buffer_bind import bind_buffer_scope

            return bind_buffer_scope(self, s)
        return self.generic_visit(s)

    def _extern_bind(self, s: S.AttrStmt) -> S.Stmt:
        node = s.node
        if not isinstance(node, Array) or len(node) != 2 or not isinstance(node[0], Buffer):
            raise IRError(f"extern_buffer_bind expects Array([buffer, tensor]), got {node}")
        placeholder, tensor = node[0], node[1]
        entry = self.entry(tensor, "extern binding of")
        if placeholder.ndim != entry.buffer.ndim:
            raise IRError(f"extern buffer {placeholder.name} has {placeholder.ndim} dimensions but tensor "
                          f"{tensor.name} has {entry.buffer.ndim}")
        self.placeholders[placeholder] = entry
        try:
            return self.visit(s.body)
        finally:
            del self.placeholders[placeholder]

    # -- extern bodies: placeholder buffers read the tensor's storage ----------------
    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        idx = tuple(self.visit(i) for i in e.indices)
        entry = self.placeholders.get(e.buffer)
        if entry is not None:
            return E.BufferLoad(entry.buffer, entry.rel(idx))
        return e if all(a is b for a, b in zip(idx, e.indices)) else E.BufferLoad(e.buffer, idx)

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        idx = tuple(self.visit(i) for i in s.indices)
        value = self.visit(s.value)
        entry = self.placeholders.get(s.buffer)
        if entry is not None:
            return S.BufferStore(entry.buffer, value, entry.rel(idx))
        return S.BufferStore(s.buffer, value, idx)

    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        for placeholder, entry in self.placeholders.items():
            if v is placeholder.data:
                return entry.buffer.data  # a pointer passed to an extern call
        return v



# -- tir.instrument_bound_checkers: one assertion per accessed buffer before each statement.
# A load on one side of ``if_then_else(c, ...)`` is checked only where ``c`` selects it, so
# padding guards do not fail spuriously.

def _accesses(e: Any, guard: Optional[E.PrimExpr], out: list) -> None:
    """``(buffer, indices, guard)`` of every access in ``e`` (guard: the condition it runs under)."""
    if isinstance(e, tuple):
        for x in e:
            _accesses(x, guard, out)
        return
    if not isinstance(e, E.PrimExpr):
        return
    if isinstance(e, E.BufferLoad):
        out.append((e.buffer, e.indices, guard))
    if is_op_call(e, "tir.if_then_else"):
        c, t, f = e.args
        _accesses(c, guard, out)
        _accesses(t, c if guard is None else ops.logical_and(guard, c), out)
        nc = ops.logical_not(c)
        _accesses(f, nc if guard is None else ops.logical_and(guard, nc), out)
        return
    for fld in fields_of(type(e)):
        _accesses(getattr(e, fld.name), guard, out)


def _in_bounds(buf: Any, indices: tuple[E.PrimExpr, ...]) -> E.PrimExpr:
    conds = []
    for i, n in zip(indices, buf.shape):
        zero = ops.const(0, i.dtype)
        conds += [ops.le(zero, i), ops.lt(i, ops.cast(n, i.dtype))]
    return ops.all(*conds) if conds else E.IntImm("bool", 1)


class _Checker(Mutator):
    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def visit_Buffer(self, b: Any) -> Any:
        return b

    def generic_visit(self, node: Any) -> Any:
        out = Mutator.generic_visit(self, node)
        if not isinstance(node, S.Stmt):
            return out
        found: list = []
        for fld in fields_of(type(node)):
            v = getattr(node, fld.name)
            if not isinstance(v, S.Stmt):
                _accesses(v, None, found)
        if isinstance(node, S.BufferStore):
            found.append((node.buffer, node.indices, None))
        by_buffer: dict[int, tuple[Any, list]] = {}
        for buf, idx, guard in found:
            if not buf.shape:
                continue
            ok = _in_bounds(buf, idx)
            cond = ok if guard is None else ops.logical_or(ops.logical_not(guard), ok)
            by_buffer.setdefault(id(buf), (buf, []))[1].append(cond)
        for buf, conds in reversed(list(by_buffer.values())):
            shape = ", ".join(str(x) for x in buf.shape)
            out = S.AssertStmt(ops.all(*conds), f"out-of-bounds access to buffer {buf.name} (shape [{shape}])", out)
        return out


def instrument_bound_checks(stmt: S.Stmt) -> S.Stmt:
    """``stmt`` with an assertion of in-bounds indices before each buffer access."""
    return _Checker().visit(stmt)


def storage_flatten(node: PrimFunc | S.Stmt, binds: Optional[Mapping[Any, Buffer]] = None,
                    cache_line_size: int = 64, instrument_bound_checkers: bool = False) -> Any:
    """``node`` with tensors replaced by buffers (see the module docstring).

    ``node`` is a PrimFunc, whose ``tensor_binds`` attribute (and ``binds``, if given) bind
    tensors to buffers, or the statement of :func:`loom.schedule.ScheduleOps`, flattened with
    ``binds`` and returned as a statement: TVM 0.6's ``ir_pass.StorageFlatten(stmt,
    extern_buffer, cache_line_size)``.  ``cache_line_size`` is checked and otherwise unused
    (Loom expands prefetches before flattening, element by element).

    >>> import loom
    >>> A = loom.placeholder((4,), name="A")
    >>> B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
    >>> s = loom.create_schedule(B.op)
    >>> stmt = loom.schedule.ScheduleOps(s, loom.schedule.InferBound(s))
    >>> Ab, Bb = loom.decl_buffer((4,), name="A"), loom.decl_buffer((4,), name="B")
    >>> print(storage_flatten(stmt, {A: Ab, B: Bb}, 64))
    for i in range(4):
        B[i] = A[i] + 1.0
    """
    if not isinstance(cache_line_size, int) or isinstance(cache_line_size, bool) or cache_line_size <= 0:
        raise LoomValueError(f"storage_flatten: cache_line_size must be a positive int, got {cache_line_size!r}")
    if isinstance(node, S.Stmt):
        func = PrimFunc([], node, attrs={"tensor_binds": dict(binds or {})})
        return storage_flatten(func, None, cache_line_size, instrument_bound_checkers).body
    if not isinstance(node, PrimFunc):
        raise LoomTypeError(f"storage_flatten takes a PrimFunc or a Stmt, got {type(node).__name__}")
    found = node.attrs.get("tensor_binds")
    bound = {**(dict(found.items()) if found is not None else {}), **dict(binds or {})}
    for t, b in bound.items():
        if not isinstance(b, Buffer):
            raise IRError(f"tensor_binds maps {getattr(t, 'name', t)} to a {type(b).__name__}, not a Buffer")
    body = _Flattener(bound, _align_info(node.body)).visit(node.body)
    if any(b.buffer_type == "auto_broadcast" for b in bound.values()):
        body = broadcast_accesses(body)
    if instrument_bound_checkers:
        body = instrument_bound_checks(body)
    attrs_ = {k: v for k, v in node.attrs.items() if k != "tensor_binds"}
    return node.with_(body=body, attrs=attrs_)


def _run(func: PrimFunc, mod: Any, ctx: PassContext) -> PrimFunc:
    return storage_flatten(func, instrument_bound_checkers=ctx.get_config("tir.instrument_bound_checkers"))


def StorageFlatten() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """The storage-flattening pass; reads ``tir.instrument_bound_checkers`` when it runs."""
    return prim_func_pass(_run, name="StorageFlatten")
