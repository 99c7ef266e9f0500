"""Broadcasting reads of ``auto_broadcast`` buffers (``decl_buffer(..., buffer_type="auto_broadcast")``).

Each access of such a buffer indexes a dimension of extent 1 at 0, so a
program written for full-size operands reads a broadcast operand correctly: an
index ``j`` into a dimension whose extent is the shape variable ``n1`` becomes
``select(n1 == 1, 0, j)``.  A dimension whose extent is a constant other than 1
keeps its index.  :func:`~loom.transform.storage_flatten.storage_flatten` applies
it, so every backend sees plain indices.
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.functor import Mutator

__all__ = ["broadcast_accesses"]


def _index(buf: Any, indices: Any) -> list[E.PrimExpr]:
    out = []
    for idx, extent in zip(indices, buf.shape):
        zero = ops.const(0, idx.dtype)
        if isinstance(extent, E.IntImm):
            out.append(zero if extent.value == 1 else idx)
        else:
            out.append(ops.select(extent == 1, zero, idx))
    return out


class _Broadcast(Mutator):
    def visit_BufferLoad(self, node: E.BufferLoad) -> Any:
        node = self.generic_visit(node)
        if node.buffer.buffer_type != "auto_broadcast":
            return node
        return E.BufferLoad(node.buffer, _index(node.buffer, node.indices))

    def visit_BufferStore(self, node: S.BufferStore) -> Any:
        node = self.generic_visit(node)
        if node.buffer.buffer_type != "auto_broadcast":
            return node
        return S.BufferStore(node.buffer, node.value, _index(node.buffer, node.indices))


def broadcast_accesses(stmt: S.Stmt) -> S.Stmt:
    """``stmt`` with each access of an auto_broadcast buffer reading index 0 of its extent-1 dimensions."""
    return _Broadcast().visit(stmt)
