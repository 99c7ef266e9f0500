"""``Simplify`` / ``CanonicalSimplify``: arithmetic simplification of every expression.

Both run :func:`loom.arith.simplify`, which knows loop ranges, let values and
branch conditions, folds conditions that become constant (``likely(True)``
included) and drops the branch that cannot run.  The pass also replaces a
serial or unrolled loop of extent 1 (without annotations) by its body, with
the loop variable replaced by the loop's min.  Classic TVM had two passes (canonical form, then rewriting);
Loom's simplifier does both, so the two names are one pass with two names
(the phase-1 and phase-3 positions of the classic pipeline).

>>> import loom
>>> from loom.ir import For, BufferStore, IfThenElse, PrimFunc
>>> A = loom.decl_buffer((8,), "int32", name="A")
>>> i = loom.var("i")
>>> f = PrimFunc([A.data], For(i, 0, 8, "serial", IfThenElse(i < 8, BufferStore(A, i * 2 - i, [i]))),
...              buffer_map={A.data: A})
>>> print(Simplify()(f).body)
for i in range(8):
    A[i] = i
"""

from __future__ import annotations

from ..arith import StmtSimplifier
from ..ir.stmt import Stmt
from ._util import body_pass
from .pass_base import Pass, PassContext

__all__ = ["Simplify", "CanonicalSimplify", "simplify_stmt"]


def simplify_stmt(stmt: Stmt) -> Stmt:
    """Simplify every expression of ``stmt`` under the facts of its context; inline unit loops."""
    return StmtSimplifier(inline_unit_loops=True).visit(stmt)


def _run(body: Stmt, ctx: PassContext) -> Stmt:
    return simplify_stmt(body)


def Simplify() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """The simplification pass (see the module docstring)."""
    return body_pass("Simplify", _run)


def CanonicalSimplify() -> Pass:  # noqa: N802
    """The phase-1 simplification of the classic pipeline; the same rewriting as :func:`Simplify`."""
    return body_pass("CanonicalSimplify", _run)

