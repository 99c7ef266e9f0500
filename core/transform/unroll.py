"""``UnrollLoop``: unroll loops explicitly or mark them for the code generator.

A loop is unrolled when

- its kind is ``unrolled`` (``s[T].unroll(axis)``), or
- it is a serial loop with a constant extent, every loop under it is unrolled
  too, the nest it heads is at most ``tir.auto_unroll_max_depth`` deep, and
  either its total step count (extent times the steps of its body, a store or
  an evaluation counting one step) is at most ``tir.auto_unroll_max_step`` or
  its extent is at most ``tir.auto_unroll_max_extent``, or
- ``tir.auto_unroll_max_extent`` is 1 and the loop runs at most once (as in
  TVM: the loop goes away whatever its body, since nothing is copied).

Either way a loop is unrolled only up to :data:`MAX_UNROLL_STEPS` steps: the
automatic choice never goes past it, and a loop of kind ``unrolled`` with a
constant extent past it is an error naming the loop and the limit (a million
copies of a body would take the build hours, not make it faster).

With ``tir.unroll_explicit`` (the default) an unrolled loop becomes ``extent``
copies of its body, the loop variable replaced by each value in turn (bound
variables inside are renamed per copy).  Without it, automatically chosen
loops only become kind ``unrolled``: a hint that codegen may turn into
``#pragma unroll``.  A loop of kind ``unrolled`` with a non-constant extent
stays a loop (the hint is all that can be done).

>>> import loom
>>> from loom.ir import For, BufferStore, PrimFunc
>>> A = loom.decl_buffer((2,), "int32", name="A")
>>> i = loom.var("i")
>>> f = PrimFunc([A.data], For(i, 0, 2, "unrolled", BufferStore(A, i, [i])), buffer_map={A.data: A})
>>> print(UnrollLoop()(f).body)
A[0] = 0
A[1] = 1
"""

from __future__ import annotations

from typing import Any

import attrs

from ..errors import LoomValueError
from ..ir import stmt as S
from ..ir.expr_ops import const
from ._util import body_pass, const_int, renew_defs
from .pass_base import Pass, PassContext

__all__ = ["UnrollLoop", "unroll_loop", "unroll_body", "UnrollOptions", "MAX_UNROLL_STEPS"]

#: The most steps (statements, counting through inner unrolled loops) one unrolled loop may
#: expand into.  About 1 s of lowering and 10 s of native code generation at the limit; raise
#: it (``loom.transform.unroll.MAX_UNROLL_STEPS = n``) only for a reason.
MAX_UNROLL_STEPS = 8192


@attrs.frozen
class UnrollOptions:
    """The unrolling thresholds (the ``tir.auto_unroll_*`` / ``tir.unroll_explicit`` options)."""

    max_step: int = 0
    max_depth: int = 8
    max_extent: int = 0
    explicit: bool = True

    @staticmethod
    def from_context(ctx: PassContext) -> UnrollOptions:
        return UnrollOptions(ctx.get_config("tir.auto_unroll_max_step"), ctx.get_config("tir.auto_unroll_max_depth"),
                             ctx.get_config("tir.auto_unroll_max_extent"), ctx.get_config("tir.unroll_explicit"))


@attrs.frozen
class _Nest:
    """What the unroller knows about a statement it has processed."""

    steps: int = 0  # iterations of its leaf statements, counting through unrolled loops
    depth: int = 0  # deepest chain of unrolled loops inside
    blocked: bool = False  # a loop that stays a loop (or a while) is inside: nothing above unrolls

    def then(self, other: _Nest) -> _Nest:
        return _Nest(self.steps + other.steps, max(self.depth, other.depth), self.blocked or other.blocked)


_LEAF = _Nest(1, 0, False)


def unroll_body(loop: S.For) -> S.Stmt:
    """The ``extent`` copies of ``loop``'s body, its variable set to each value (constant extent)."""
    n = const_int(loop.extent)
    if n is None:
        raise LoomValueError(f"cannot unroll loop {loop.loop_var.name} of non-constant extent {loop.extent}")
    _check_steps(loop, n, 1)
    t = loop.loop_var.dtype
    return S.seq(*(renew_defs(loop.body, {loop.loop_var: loop.min + const(k, t)}) for k in range(n)))


def _check_steps(loop: S.For, n: int, body_steps: int) -> None:
    """Refuse to unroll ``loop`` (``n`` iterations of ``body_steps``) into more than MAX_UNROLL_STEPS steps."""
    steps = n * max(body_steps, 1)
    if steps > MAX_UNROLL_STEPS:
        size = f"{n} iterations of {body_steps} steps make {steps} steps" if body_steps > 1 else f"{n} iterations"
        raise LoomValueError(f"unroll of loop {loop.loop_var.name}: {size}, more than the limit of {MAX_UNROLL_STEPS} "
                             f"steps (loom.transform.unroll.MAX_UNROLL_STEPS); "
                             f"split the loop and unroll only the inner part")


class _Unroller:
    def __init__(self, opts: UnrollOptions) -> None:
        self.opts = opts

    def visit(self, s: S.Stmt | None) -> tuple[Any, _Nest]:
        if s is None:
            return None, _Nest()
        fn = getattr(self, f"visit_{type(s).__name__}", None)
        if fn is not None:
            return fn(s)
        return self.generic(s)

    def generic(self, s: S.Stmt) -> tuple[S.Stmt, _Nest]:
        """Statements with (at most) one ``body`` / branches: pass the nest info through."""
        info = _Nest()
        changes: dict[str, Any] = {}
        for name in ("body", "then_case", "else_case"):
            old = getattr(s, name, None)
            if isinstance(old, S.Stmt):
                new, sub = self.visit(old)
                info = info.then(sub)
                if new is not old:
                    changes[name] = new
        return (s.with_(**changes) if changes else s), info

    def visit_BufferStore(self, s: S.BufferStore) -> tuple[S.Stmt, _Nest]:
        return s, _LEAF

    def visit_Evaluate(self, s: S.Evaluate) -> tuple[S.Stmt, _Nest]:
        return s, _LEAF

    def visit_While(self, s: S.While) -> tuple[S.Stmt, _Nest]:
        new, info = self.generic(s)
        return new, attrs.evolve(info, blocked=True)

    def visit_SeqStmt(self, s: S.SeqStmt) -> tuple[S.Stmt, _Nest]:
        info, out = _Nest(), []
        for x in s.seq:
            new, sub = self.visit(x)
            out.append(new)
            info = info.then(sub)
        if all(a is b for a, b in zip(out, s.seq)):
            return s, info
        return S.seq(*out), info

    def visit_For(self, s: S.For) -> tuple[S.Stmt, _Nest]:
        body, inner = self.visit(s.body)
        if body is not s.body:
            s = s.with_(body=body)
        o, n = self.opts, const_int(s.extent)
        steps = None if n is None else n * max(inner.steps, 1)
        auto = (s.kind is S.ForKind.SERIAL and steps is not None and not inner.blocked
                and inner.depth + 1 <= o.max_depth and steps <= MAX_UNROLL_STEPS
                and (steps <= o.max_step or n is not None and n <= o.max_extent))
        if s.kind is S.ForKind.UNROLLED and n is not None:
            _check_steps(s, n, inner.steps)
            auto = True
        if n is not None and 0 <= n <= 1 and o.max_extent == 1 and s.kind is not S.ForKind.THREAD_BINDING:
            # TVM's rule: with auto_unroll_max_extent 1, a loop of at most one iteration goes
            # away whatever its body (nothing is copied, so nothing can grow).
            return unroll_body(s), (_Nest(n * inner.steps, inner.depth + 1, inner.blocked) if auto
                                    else _Nest(inner.steps, inner.depth, True))
        if not auto:
            return s, _Nest(inner.steps, inner.depth, True)
        assert n is not None  # a constant extent: both ways to auto need one
        info = _Nest(n * inner.steps, inner.depth + 1, inner.blocked)
        if s.kind is S.ForKind.UNROLLED and not o.explicit:
            return s, info
        if o.explicit:
            return unroll_body(s), info
        return s.with_(kind=S.ForKind.UNROLLED), info


def unroll_loop(stmt: S.Stmt, options: UnrollOptions | None = None) -> S.Stmt:
    """``stmt`` with its loops unrolled as ``options`` say (default: only loops of kind unrolled)."""
    return _Unroller(options or UnrollOptions()).visit(stmt)[0]


def UnrollLoop() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """The unrolling pass; its options are read from the current PassContext when it runs."""
    return body_pass("UnrollLoop", lambda body, ctx: unroll_loop(body, UnrollOptions.from_context(ctx)))
