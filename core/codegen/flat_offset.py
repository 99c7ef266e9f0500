"""The terms of a buffer access's flat element offset, with split indices merged.

A backend reads ``A[i0, ..., ik]`` at ``elem_offset + sum(index * stride)``. A
flattening such as ``A[i // m, i % m]`` on an ``(n, m)`` buffer reads offset
``(i // m) * m + i % m``, which is ``i`` whenever ``m != 0``: :func:`offset_terms`
gives that access the one term ``i * 1``, so the generated code neither divides nor
takes a remainder, and a vector of consecutive ``i`` is one contiguous load instead
of a gather. TVM 0.6's buffer flattening merged such offsets through its simplifier.

The division still owes its zero test: a merged term keeps the division it
replaced (:attr:`OffsetTerm.zero_test`), and the backend fails the function with
:func:`loom.runtime.abi.division_by_zero_message` when its divisor is zero, as the
unmerged code would have. Dividing by a negative extent never happens (an array's
dimension, or an allocation's, is never negative), so ``m != 0`` is ``m >= 1``,
where the identity holds in any integer width.

>>> import loom
>>> n, m = loom.var("n"), loom.var("m")
>>> A = loom.decl_buffer((n, m), name="A")
>>> i = loom.var("i")
>>> [str(t.index) for t in offset_terms(A, [i // m, i % m])]
['i']
>>> [str(t.index) for t in offset_terms(A, [i // 4, i % 4])]   # 4 is not A's extent m
['i // 4', 'i % 4']
"""

from __future__ import annotations

from typing import Optional, Sequence

import attrs

from ..arith import Analyzer
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.buffer import Buffer
from ..ir.structural import structural_equal

__all__ = ["OffsetTerm", "offset_terms"]

# The (quotient, remainder) pairs whose ``q * m + r`` is the dividend for every ``m != 0``.
_SPLITS = ((E.FloorDiv, E.FloorMod), (E.Div, E.Mod))


@attrs.frozen
class OffsetTerm:
    """``index * stride``, one term of a flat offset.

    ``division`` is the integer division a merge removed when its divisor is not a
    non-zero constant: the backend tests that divisor for zero before it uses the term.
    """

    index: E.PrimExpr
    stride: E.PrimExpr
    division: Optional[E.BinaryOp] = None

    @property
    def zero_test(self) -> Optional[tuple[E.PrimExpr, E.BinaryOp]]:
        """``(divisor, division)``: the scalar divisor to test for zero and the division that owed
        the test (for the error message), or None."""
        if self.division is None:
            return None
        b = self.division.b
        return (b.value if isinstance(b, E.Broadcast) else b), self.division


def offset_terms(buf: Buffer, indices: Sequence[E.PrimExpr]) -> list[OffsetTerm]:
    """The terms of ``buf``'s flat offset at ``indices`` (``elem_offset`` not included)."""
    strides = buf.effective_strides()
    terms = [OffsetTerm(i, s) for i, s in zip(indices, strides)]
    out: list[OffsetTerm] = []
    k = 0
    while k < len(terms):
        merged = _merge(buf, k, terms[k], terms[k + 1]) if k + 1 < len(terms) else None
        if merged is None:
            out.append(terms[k])
            k += 1
        else:
            out.append(merged)
            k += 2
    return out


def _merge(buf: Buffer, k: int, hi: OffsetTerm, lo: OffsetTerm) -> Optional[OffsetTerm]:
    """``x * lo.stride`` for ``hi, lo == x // m, x % m`` when ``hi.stride == m * lo.stride``, else None."""
    q, r = hi.index, lo.index
    if not any(type(q) is div and type(r) is mod for div, mod in _SPLITS):
        return None
    assert isinstance(q, E.BinaryOp) and isinstance(r, E.BinaryOp)
    if not (structural_equal(q.a, r.a) and structural_equal(q.b, r.b)):
        return None
    m = q.b.value if isinstance(q.b, E.Broadcast) else q.b
    if m.dtype.lanes != 1:
        return None
    # A positive constant, or the extent of the remainder's dimension (never negative when the
    # access runs): either way ``m != 0`` gives ``m >= 1``.
    if isinstance(m, E.IntImm):
        if m.value <= 0:
            return None
    elif not (k + 1 < len(buf.shape) and structural_equal(m, buf.shape[k + 1])):
        return None
    if not _is_product(hi.stride, m, lo.stride):
        return None
    return OffsetTerm(q.a, lo.stride, None if ops.is_nonzero_constant(m) else q)


def _is_product(stride: E.PrimExpr, m: E.PrimExpr, inner: E.PrimExpr) -> bool:
    """Whether ``stride`` is ``m * inner`` (as a compact buffer's strides are)."""
    return Analyzer().can_prove_equal(stride, ops.mul(ops.cast(m, stride.dtype), inner))
