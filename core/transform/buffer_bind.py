"""``buffer_bind_scope``: a declared buffer made a view of a region of a tensor's storage.

Tensorize binds each buffer of a tensor intrinsic to the region of a tensor that
the intrinsic works on::

    AttrStmt(Array([buffer, tensor]), "buffer_bind_scope", tvm_tuple(min0, extent0, min1, extent1, ...), body)

Storage flattening (:mod:`loom.transform.storage_flatten`) calls :func:`bind_buffer_scope`
once the tensor has its buffer ``T``.  The region is the *slice* of ``T`` starting at
the mins (its element offset ``T.elem_offset + sum(min_i * stride_i)``, its shape the
extents, ``T``'s strides).  The declared buffer ``B`` is matched against it as TVM's
ArgBinder matches an argument: each field of ``B`` that is a variable (``elem_offset``,
a stride ``s1``, a symbolic extent) takes the slice's value everywhere in ``body``;
each other field must equal the slice's, which is an error when provably false and
an assertion at run time when not provable either way.  A compact ``B`` (no strides)
needs a slice whose rows are contiguous; ``offset_factor`` ``f > 1`` needs an element
offset that is a multiple of ``f``.  Leading dimensions of the slice beyond ``B``'s
must have extent one.

In ``body`` then ``B.data`` is ``T.data``, and ``B[i, j]`` is ``T[min0 + i, min1 + j]``
(the same element, since the strides agree).
"""

from __future__ import annotations

from typing import Any

from ..arith import Analyzer
from ..errors import IRError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..ir.container import Array
from ..ir.functor import Mutator, substitute
from ._util import is_op_call

__all__ = ["bind_buffer_scope"]


class _Binder:
    """Match a declared buffer's fields against a slice's: variables bound, the rest compared."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.vmap: dict[E.Var, E.PrimExpr] = {}
        self.asserts: list[tuple[E.PrimExpr, str]] = []
        self.an = Analyzer()

    def bind(self, arg: E.PrimExpr, value: E.PrimExpr, field: str) -> None:
        arg = substitute(arg, self.vmap)
        if value.dtype != arg.dtype:
            value = ops.cast(value, arg.dtype)
        if isinstance(arg, E.Var):
            self.vmap[arg] = value
            return
        self.require(ops.eq(arg, value), f"its {field} is {arg}, but the region has {value}")

    def require(self, cond: E.PrimExpr, problem: str) -> None:
        """``cond`` must hold: checked now when provable either way, else at run time."""
        if self.an.can_prove(cond):
            return
        if self.an.can_prove(ops.logical_not(cond)):
            raise LoomValueError(f"{self.what}: {problem}")
        self.asserts.append((cond, f"{self.what}: {problem}"))


class _Rebind(Mutator):
    """``B[i, j]`` as ``T[begin0 + i, begin1 + j]``; B's variables as their bound values."""

    def __init__(self, buf: Buffer, target: Buffer, begins: list[E.PrimExpr], vmap: dict[E.Var, E.PrimExpr]) -> None:
        self.buf, self.target, self.begins, self.vmap = buf, target, begins, vmap
        self.lead = len(begins) - buf.ndim

    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        return self.vmap.get(v, v)

    def indices(self, idx: tuple[E.PrimExpr, ...]) -> list[E.PrimExpr]:
        inner = [b + self.visit(i) if not (isinstance(b, E.IntImm) and b.value == 0) else self.visit(i)
                 for b, i in zip(self.begins[self.lead:], idx)]
        return [*self.begins[:self.lead], *inner]

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        if e.buffer is not self.buf:
            return self.generic_visit(e)
        return E.BufferLoad(self.target, self.indices(e.indices))

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        if s.buffer is not self.buf:
            return self.generic_visit(s)
        return S.BufferStore(self.target, self.visit(s.value), self.indices(s.indices))


def _is_one(an: Analyzer, e: E.PrimExpr) -> bool:
    return an.can_prove_equal(e, 1)


def bind_buffer_scope(flattener: Any, s: S.AttrStmt) -> S.Stmt:
    """Resolve one ``buffer_bind_scope`` inside storage flattening (see the module docstring).

    ``flattener`` is the running flattener: ``flattener.entry(tensor, what)`` gives the
    tensor's storage (``.buffer``, ``.rel(indices)``) and ``flattener.visit`` goes on.
    """
    node = s.node
    if not isinstance(node, Array) or len(node) != 2 or not isinstance(node[0], Buffer) \
            or not is_op_call(s.value, "tir.tvm_tuple"):
        raise IRError(f"buffer_bind_scope expects Array([buffer, tensor]) and tvm_tuple(min, extent, ...), got "
                      f"{node} and {s.value}")
    buf, tensor = node[0], node[1]
    entry = flattener.entry(tensor, f"the binding of buffer {buf.name} to")
    target: Buffer = entry.buffer
    args = list(s.value.args)
    if len(args) != 2 * target.ndim:
        raise IRError(f"buffer_bind_scope of {buf.name}: {len(args) // 2} ranges for the {target.ndim}-d tensor "
                      f"{tensor.name}")
    begins = list(entry.rel(tuple(args[0::2])))
    extents = args[1::2]
    lead = len(extents) - buf.ndim
    what = f"binding buffer {buf.name} to a region of {tensor.name}"
    if lead < 0:
        raise LoomValueError(f"{what}: the buffer has {buf.ndim} dimensions, the tensor {len(extents)}")
    b = _Binder(what)
    b.vmap[buf.data] = target.data
    for j in range(lead):
        b.require(ops.eq(extents[j], ops.const(1, extents[j].dtype)),
                  f"dimension {j} of the region has extent {extents[j]}, which the {buf.ndim}-d buffer lacks")
    for k, n in enumerate(buf.shape):
        b.bind(n, extents[lead + k], f"extent {k}")
    strides = target.effective_strides()
    if buf.strides:
        for k, st in enumerate(buf.strides):
            b.bind(st, strides[lead + k], f"stride {k}")
    else:  # compact: each row of the region must follow the previous one
        expected: E.PrimExpr = ops.const(1, strides[-1].dtype) if strides else ops.const(1, "int32")
        for k in reversed(range(buf.ndim)):
            n = substitute(buf.shape[k], b.vmap)
            if not _is_one(b.an, n):
                b.require(ops.eq(strides[lead + k], ops.cast(expected, strides[lead + k].dtype)),
                          f"it is compact, so stride {k} must be {expected}, but the region has stride "
                          f"{strides[lead + k]} (declare the buffer with strides=[loom.var(...), ...])")
            expected = expected * n
    offset = target.elem_offset
    for begin, stride in zip(begins, strides):
        offset = offset + ops.cast(begin, offset.dtype) * ops.cast(stride, offset.dtype)
    offset = b.an.simplify(offset)
    b.bind(buf.elem_offset, offset, "elem_offset")
    if buf.offset_factor > 1:
        factor = buf.offset_factor
        b.require(ops.eq(ops.floormod(offset, ops.const(factor, offset.dtype)), ops.const(0, offset.dtype)),
                  f"its offset_factor is {factor}, but the region starts at element offset {offset}")
    body = _Rebind(buf, target, begins, b.vmap).visit(s.body)
    body = flattener.visit(body)
    for cond, message in reversed(b.asserts):
        body = S.AssertStmt(cond, message, body)
    return body
