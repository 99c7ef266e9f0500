"""Vectors in LLVM IR: building them lane by lane, broadcasting, and ``Shuffle`` expressions.

:class:`VectorEmitter` is a base of :class:`.codegen_expr.ExprEmitter` (split off to keep
files small).  A ``Shuffle`` of one vector, or of two vectors of one type, is one
``shufflevector``; other shuffles (scalars among the vectors, vectors of different
widths, more than two vectors) extract the picked lanes and insert them into the
result, which LLVM's optimizer combines into shuffles.  A single index is one
``extractelement``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from llvmlite import ir

from loom.ir import expr as E

__all__ = ["VectorEmitter"]

I32 = ir.IntType(32)


class VectorEmitter:
    """Vector helpers of the expression emitter, and its ``Shuffle`` rule."""

    builder: ir.IRBuilder

    if TYPE_CHECKING:
        def expr(self, e: E.PrimExpr) -> ir.Value: ...

    def broadcast(self, v: ir.Value, lanes: int) -> ir.Value:
        """The scalar ``v`` in each of ``lanes`` lanes."""
        undef = ir.Constant(ir.VectorType(v.type, lanes), ir.Undefined)
        return self.shuffle(self.builder.insert_element(undef, v, ir.Constant(I32, 0)), None, [0] * lanes)

    def shuffle(self, a: ir.Value, b: ir.Value | None, picks: Sequence[int]) -> ir.Value:
        """A ``shufflevector``: lanes ``picks`` of ``a`` and ``b`` concatenated (``b`` of ``a``'s type;
        None for undefined lanes)."""
        other = ir.Constant(a.type, ir.Undefined) if b is None else b
        return self.builder.shuffle_vector(a, other, ir.Constant(ir.VectorType(I32, len(picks)), list(picks)))

    def per_lane(self, x: ir.Value, fn: Callable[[ir.Value], ir.Value]) -> ir.Value:
        """``fn`` on each lane of a vector (or on a scalar); the lanes of the results make the vector."""
        if not isinstance(x.type, ir.VectorType):
            return fn(x)
        return self.lanes(x.type.count, [x], fn)

    def lanes(self, count: int, operands: Sequence[ir.Value], fn: Callable[..., ir.Value]) -> ir.Value:
        """The vector of ``fn`` on lane k of each operand, k < ``count`` (a scalar operand is every lane's)."""
        return self.vector_of([fn(*(self.lane(v, k) for v in operands)) for k in range(count)])

    def lane(self, v: ir.Value, k: int) -> ir.Value:
        """Lane ``k`` of the vector ``v`` (a scalar is every lane)."""
        return self.builder.extract_element(v, ir.Constant(I32, k)) if isinstance(v.type, ir.VectorType) else v

    def vector_of(self, values: Sequence[ir.Value]) -> ir.Value:
        """The vector of ``values`` (scalars of one type), inserted lane by lane."""
        out: ir.Value = ir.Constant(ir.VectorType(values[0].type, len(values)), ir.Undefined)
        for k, v in enumerate(values):
            out = self.builder.insert_element(out, v, ir.Constant(I32, k))
        return out

    def _e_Shuffle(self, e: E.Shuffle) -> ir.Value:
        """The lanes ``e.indices`` of ``e.vectors`` concatenated (see the module docstring)."""
        parts, picks = [self.expr(v) for v in e.vectors], list(e.index_values)
        first = parts[0].type
        if len(picks) > 1 and len(parts) <= 2 and isinstance(first, ir.VectorType) and parts[-1].type == first:
            return self.shuffle(parts[0], parts[1] if len(parts) == 2 else None, picks)
        flat = [(p, k) for p, v in zip(parts, e.vectors) for k in range(v.dtype.lanes)]
        picked = [self.lane(*flat[i]) for i in picks]
        return picked[0] if len(picked) == 1 else self.vector_of(picked)
