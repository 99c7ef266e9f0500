"""How much work a parallel loop has, so that small loops run on one thread.

Waking a second thread costs microseconds on a quiet machine; on a machine whose
other cores are busy it costs a scheduler time slice, and a region that would
take a few microseconds on one thread takes tens of them on two.  So a parallel
loop gets one thread per :data:`PARALLEL_GRAIN` elements of work (at least one,
at most the thread knob's count), the rule PyTorch's ``parallel_for`` uses
with its grain size.  Work is counted in elements stored: one per scalar store,
``lanes`` per vector store, times the extent of every loop around the store.
A loop whose body has a loop of unknown extent, a ``While`` or a call that may
do unknown work (an extern or packed function, another module's function)
is treated as large: it keeps every thread.

The backends compute ``threads = min(knob, max(1, extent // m))`` when the region
starts (the extent may be symbolic), ``m`` being :func:`min_iterations_per_thread`.

>>> import loom
>>> from loom.ir import BufferStore, For
>>> A = loom.decl_buffer((64, 8), "float32", name="A")
>>> i, j = loom.var("i"), loom.var("j")
>>> row = For(j, 0, 8, "serial", BufferStore(A, loom.const(0.0), [i, j]))
>>> work_per_iteration(row), min_iterations_per_thread(row)
(8, 4096)
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import Visitor
from ..ir.op import Op

__all__ = ["PARALLEL_GRAIN", "work_per_iteration", "min_iterations_per_thread"]

#: Elements of work per thread below which a parallel loop does not take another thread.
PARALLEL_GRAIN = 32768

#: Calls that may run any amount of code: extern functions (a BLAS call, say) and packed functions.
_OPAQUE_CALLS = frozenset({"tir.call_extern", "tir.call_packed"})


class _OpaqueCalls(Visitor):
    found = False

    def visit_Call(self, c: E.Call) -> None:
        if not isinstance(c.op, Op) or c.op.name in _OPAQUE_CALLS:  # a GlobalVar: another function's work
            self.found = True
        else:
            self.generic_visit(c)


def _opaque(e: E.PrimExpr) -> bool:
    finder = _OpaqueCalls()
    finder.visit(e)
    return finder.found


def work_per_iteration(body: S.Stmt) -> int | None:
    """Elements ``body`` stores each time it runs, or None when that is unknown (see module docstring)."""
    if isinstance(body, S.BufferStore):
        return None if _opaque(body.value) else max(1, body.value.dtype.lanes)
    if isinstance(body, S.For):
        inner = work_per_iteration(body.body)
        if inner is None or not isinstance(body.extent, E.IntImm):
            return None
        return max(0, body.extent.value) * inner
    if isinstance(body, S.SeqStmt):
        total = 0
        for s in body.seq:
            w = work_per_iteration(s)
            if w is None:
                return None
            total += w
        return total
    if isinstance(body, S.IfThenElse):
        then = work_per_iteration(body.then_case)
        other = work_per_iteration(body.else_case) if body.else_case is not None else 0
        return None if then is None or other is None else then + other
    if isinstance(body, S.Evaluate):
        return None if _opaque(body.value) else 0
    if isinstance(body, S.While):
        return None
    if isinstance(body, (S.LetStmt, S.AttrStmt, S.AssertStmt, S.Allocate)):
        return work_per_iteration(body.body)
    return None


def min_iterations_per_thread(body: S.Stmt) -> int:
    """How many iterations of a parallel loop over ``body`` make one thread's share (1: unknown work)."""
    per_iteration = work_per_iteration(body)
    return 1 if per_iteration is None else -(-PARALLEL_GRAIN // max(1, per_iteration))
