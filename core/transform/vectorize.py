"""``VectorizeLoop``: turn loops of kind ``vectorized`` into vector code.

The loop variable becomes ``Ramp(min, 1, lanes)`` (``lanes`` = the constant
extent), scalar operands meeting vector ones are broadcast, loads and stores
with vector indices access ``lanes`` elements, and ``let`` values that become
vectors get vector variables.  Ramps are kept affine (``Ramp * c`` and
``Ramp + x`` stay Ramps) so backends see contiguous or strided accesses.

A body that cannot be expressed lane-wise -- a branch or assertion whose
condition depends on the loop variable, a nested loop or allocation, an impure
call, a store that is the same for every lane, code that is already vector, an
``if_then_else`` on the lane guarding a load that may be out of bounds on the lanes
it does not select -- falls back to a serial loop, which is always correct.  A loop with a
non-constant extent, or an extent below 2, also stays serial.  A loop that
stays serial although it had lanes to use is reported (once, with the reason)
as a WARNING of the ``loom.transform.vectorize`` logger.

``SkipVectorize`` (what ``VectorizeLoop`` does under ``tir.disable_vectorize``)
makes every vectorized loop serial.

>>> import loom
>>> from loom.ir import For, BufferStore, PrimFunc
>>> A = loom.decl_buffer((4,), "int32", name="A")
>>> i = loom.var("i")
>>> f = PrimFunc([A.data], For(i, 0, 4, "vectorized", BufferStore(A, A[i] + 1, [i])), buffer_map={A.data: A})
>>> print(VectorizeLoop()(f).body)
A[ramp(0, 1, 4)] = A[ramp(0, 1, 4)] + broadcast(1, 4)
"""

from __future__ import annotations

import logging
from typing import Any

from ..arith.analyzer import Analyzer
from ..errors import LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.buffer import UNKNOWN_EXTENT
from ..ir.dtype import MAX_LANES
from ..ir.functor import Mutator, collect
from ..ir.structural import structural_equal
from ..ir.op import Op
from ._util import body_pass, const_int, is_op_call, uses_vars
from .pass_base import Pass, PassContext

__all__ = ["VectorizeLoop", "SkipVectorize", "vectorize_loop", "skip_vectorize"]

_log = logging.getLogger(__name__)


class _Scalarize(Exception):
    """The loop body cannot be vectorized; the loop stays serial."""


def _bcast(x: E.PrimExpr, lanes: int) -> E.PrimExpr:
    """``x`` on ``lanes`` lanes: a scalar or a broadcast is repeated; another vector cannot be."""
    if x.dtype.lanes == lanes:
        return x
    if isinstance(x, E.Broadcast):
        return E.Broadcast(x.value, lanes)
    if x.dtype.lanes != 1:
        raise _Scalarize(f"a {x.dtype.lanes}-lane value meets {lanes}-lane ones")
    return E.Broadcast(x, lanes)


def _scalar_part(x: E.PrimExpr) -> E.PrimExpr | None:
    """The scalar a Broadcast (or scalar) stands for, else None."""
    if isinstance(x, E.Broadcast):
        return x.value
    return x if x.dtype.lanes == 1 else None


def _binary(cls: type, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """``cls(a, b)`` with scalars broadcast, keeping Ramps affine where possible."""
    lanes = max(a.dtype.lanes, b.dtype.lanes)
    if lanes == 1:
        return cls(a, b)
    sa, sb = _scalar_part(a), _scalar_part(b)
    if sa is not None and sb is not None:
        return E.Broadcast(cls(sa, sb), lanes)
    if cls in (E.Add, E.Sub):
        build = ops.add if cls is E.Add else ops.sub
        if isinstance(a, E.Ramp) and isinstance(b, E.Ramp):
            return E.Ramp(build(a.base, b.base), build(a.stride, b.stride), lanes)
        if isinstance(a, E.Ramp) and sb is not None:
            return E.Ramp(build(a.base, sb), a.stride, lanes)
        if isinstance(b, E.Ramp) and sa is not None:
            stride = b.stride if cls is E.Add else ops.sub(ops.const(0, b.stride.dtype), b.stride)
            return E.Ramp(build(sa, b.base), stride, lanes)
    if cls is E.Mul:
        if isinstance(a, E.Ramp) and sb is not None:
            return E.Ramp(ops.mul(a.base, sb), ops.mul(a.stride, sb), lanes)
        if isinstance(b, E.Ramp) and sa is not None:
            return E.Ramp(ops.mul(sa, b.base), ops.mul(sa, b.stride), lanes)
    return cls(_bcast(a, lanes), _bcast(b, lanes))


def _elementwise(e: E.Call) -> bool:
    op = e.op
    if isinstance(op, Op) and op.name == "tir.reinterpret":  # lane-wise when each lane keeps its width
        return e.dtype.bits == e.args[0].dtype.bits
    return isinstance(op, Op) and op.info.pure and op.info.numpy_impl is not None


_DIVISIONS = (E.Div, E.Mod, E.FloorDiv, E.FloorMod)


class _GuardDivisors(Mutator):
    """Divide by ``select(guard, b, 1)`` instead of ``b`` in a branch of ``if_then_else``.

    Vectorized, ``if_then_else`` computes both branches on every lane and picks
    per lane; a branch that divides only where its guard holds
    (``if_then_else(b != 0, a // b, 0)``) would then divide by zero on the
    other lanes, and fail where the scalar loop does not.  Lanes whose guard
    fails divide by 1 instead, and their result is dropped anyway.
    """

    def __init__(self, guard: E.PrimExpr) -> None:
        super().__init__()
        self.guard = guard

    def visit_BinaryOp(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        if isinstance(e, _DIVISIONS) and e.dtype.is_integer and not ops.is_nonzero_constant(b):
            b = E.Select(self.guard, b, ops.const(1, b.dtype))
        return e if a is e.a and b is e.b else type(e)(a, b)


class _Vectorizer(Mutator):
    """Rewrites the body of one loop lane-wise; raises :class:`_Scalarize` when it cannot."""

    def __init__(self, loop: S.For, lanes: int, ramp: E.Ramp, dom: dict[E.Var, E.Range]) -> None:
        self.lanes = lanes
        self.dom = dom  # the ranges of this loop's variable and of the loops around it
        self.vmap: dict[E.Var, E.PrimExpr] = {loop.loop_var: ramp}
        self.loop: S.For | None = loop  # for a branch that has to stay serial (see _branch)

    def varies(self, node: Any) -> bool:
        return uses_vars(node, self.vmap.keys())

    # -- expressions ------------------------------------------------------------
    def visit_Buffer(self, b: Any) -> Any:
        return b

    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        return self.vmap.get(v, v)

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        if e.dtype.lanes != 1 or self.varies(e):
            raise _Scalarize(f"cannot vectorize {type(e).__name__}")
        return e

    def visit_BinaryOp(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        if a is e.a and b is e.b:
            return e
        return _binary(type(e), a, b)

    def visit_Ramp(self, e: E.Ramp) -> E.PrimExpr:
        """A ramp of vector elements (``A[j]`` of a ``float32x4`` pointer is ``A[ramp(j * 4, 1, 4)]``): over a
        loop whose consecutive ramps touch, the lanes widen into one ramp (``ramp(0, 1, 16)``), as in TVM."""
        if not self.varies(e):
            return e
        base = self.visit(e.base)
        if self.varies(e.stride) or not isinstance(base, E.Ramp):
            raise _Scalarize("a ramp whose stride varies")
        step, inner, lanes = const_int(base.stride), const_int(e.stride), e.lanes * base.lanes
        if step is None or inner is None or step != inner * e.lanes or lanes > MAX_LANES:
            raise _Scalarize("the vector elements of consecutive iterations do not touch")
        return E.Ramp(base.base, e.stride, lanes)

    def visit_Broadcast(self, e: E.Broadcast) -> E.PrimExpr:
        if self.varies(e):
            raise _Scalarize("a broadcast of the vectorized variable")
        return e

    def visit_Not(self, e: E.Not) -> E.PrimExpr:
        a = self.visit(e.a)
        return e if a is e.a else E.Not(a)

    def visit_Cast(self, e: E.Cast) -> E.PrimExpr:
        v = self.visit(e.value)
        return e if v is e.value else E.Cast(e.dtype.with_lanes(v.dtype.lanes), v)

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        c, t, f = self.visit(e.condition), self.visit(e.true_value), self.visit(e.false_value)
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        lanes = max(c.dtype.lanes, t.dtype.lanes, f.dtype.lanes)
        return E.Select(c, _bcast(t, lanes), _bcast(f, lanes))

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        if e.buffer.dtype.lanes != 1:
            raise _Scalarize("load of a vector-typed buffer")
        idx = tuple(self.visit(i) for i in e.indices)
        return e if all(a is b for a, b in zip(idx, e.indices)) else E.BufferLoad(e.buffer, idx)

    def visit_Let(self, e: E.Let) -> E.PrimExpr:
        value = self.visit(e.value)
        var = e.var
        if value.dtype.lanes != 1:
            var = self.vmap[e.var] = E.Var(e.var.name, value.dtype)
        body = self.visit(e.body)
        if value is e.value and body is e.body:
            return e
        return E.Let(var, value, body)

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        if is_op_call(e, "tir.if_then_else") and self.varies(e):
            cond, then, other = e.args
            if self.varies(cond):
                self._check_guarded_loads(then, other)
            e = E.Call(e.dtype, e.op, [cond, _GuardDivisors(cond).visit(then), _GuardDivisors(E.Not(cond)).visit(other)])
            if not self.varies(cond):
                # The same choice on every lane: the condition stays scalar, so only the taken
                # side is evaluated (a padding read such as A[i - 1] stays behind its guard).
                then, other = self.visit(e.args[1]), self.visit(e.args[2])
                lanes = max(then.dtype.lanes, other.dtype.lanes)
                return E.Call(e.dtype.with_lanes(lanes), e.op, [cond, _bcast(then, lanes), _bcast(other, lanes)])
        if not _elementwise(e):
            if self.varies(e) or (isinstance(e.op, Op) and not e.op.info.pure) or not isinstance(e.op, Op):
                raise _Scalarize(f"call of {getattr(e.op, 'name', e.op)} is not lane-wise")
            return e
        args = [self.visit(a) for a in e.args]
        if all(a is b for a, b in zip(args, e.args)):
            return e
        lanes = max(a.dtype.lanes for a in args)
        return E.Call(e.dtype.with_lanes(lanes), e.op, [_bcast(a, lanes) for a in args])

    def _check_guarded_loads(self, *branches: E.PrimExpr) -> None:
        """Refuse lane-wise ``if_then_else`` over a load that its guard may be keeping in bounds.

        Vectorized, both branches are read on every lane: a padding read such as
        ``if_then_else(i >= 1, A[i - 1], 0)`` would read ``A[-1]`` (TVM keeps such a
        loop serial).  A load is kept when its indices are in bounds over the loop
        domain whatever the guard says (of a buffer whose size is known: not an
        ``ir_builder.pointer``), or when both branches make it.
        """
        per_branch = [collect(b, lambda n: isinstance(n, E.BufferLoad)) for b in branches]
        for load in (ld for found in per_branch for ld in found):
            # A load that both branches make is read on every lane already.
            either = all(any(structural_equal(load, x) for x in found) for found in per_branch)
            if not either and not self._in_bounds(load):
                raise _Scalarize(f"if_then_else guards a load of {load.buffer.name} that may be out of bounds "
                                 "on the lanes it does not select")

    def _in_bounds(self, load: E.BufferLoad) -> bool:
        shape = load.buffer.shape
        if not shape or len(shape) != len(load.indices):
            return False
        an = Analyzer()
        for idx, n in zip(load.indices, shape):
            if idx.dtype.lanes != 1 or isinstance(n, E.IntImm) and n.value >= UNKNOWN_EXTENT:
                return False
            span = an.int_set(idx, self.dom)
            if span.min is None or span.max is None:
                return False
            zero = ops.const(0, span.min.dtype)
            if not (an.can_prove(ops.ge(span.min, zero)) and an.can_prove(ops.lt(span.max, n))):
                return False
        return True

    # -- statements ---------------------------------------------------------------
    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        if s.buffer.dtype.lanes != 1:
            raise _Scalarize("store to a vector-typed buffer")
        idx = tuple(self.visit(i) for i in s.indices)
        value = self.visit(s.value)
        lanes = max(i.dtype.lanes for i in idx) if idx else 1
        if lanes == 1:
            # Every lane would store to the same place: only the serial order is right.
            raise _Scalarize(f"store to {s.buffer.name} is the same for every lane")
        return S.BufferStore(s.buffer, _bcast(value, lanes), idx)

    def _invariant(self, *exprs: E.PrimExpr) -> None:
        if any(self.varies(x) for x in exprs):
            raise _Scalarize("control flow depends on the vectorized variable")

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        if is_op_call(s.condition, "tir.likely") and self.varies(s.condition):
            raise _Scalarize("the bounds guard of a split whose factor does not divide the extent depends on "
                             "the vectorized variable (build_config(partition_const_loop=True) moves it out)")
        self._invariant(s.condition)
        then_case, then_err = self._branch(s.then_case)
        else_case, else_err = self._branch(s.else_case) if s.else_case is not None else (None, None)
        if then_err is not None and s.else_case is None:
            raise then_err  # nothing would be vector code: the whole loop stays serial, reported
        return s.with_(then_case=then_case, else_case=else_case)

    def _branch(self, body: S.Stmt) -> tuple[S.Stmt, _Scalarize | None]:
        """A branch of an invariant ``if``, vectorized, or (as TVM) a serial loop of its own.

        The serial fallback needs the loop variable to be the only one vectorized so far
        (a vectorized let would leave the branch naming a variable no longer bound).
        """
        try:
            return self.visit(body), None
        except _Scalarize as err:
            if self.loop is None or len(self.vmap) != 1:
                raise
            loop = self.loop
            self.loop = None  # one serial copy at most: two would bind the loop variable twice
            return S.For(loop.loop_var, loop.min, loop.extent, S.ForKind.SERIAL, body), err

    def visit_AssertStmt(self, s: S.AssertStmt) -> S.Stmt:
        self._invariant(s.condition, s.message)
        return s.with_(body=self.visit(s.body))

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        self._invariant(s.value)
        return s.with_(body=self.visit(s.body))

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        value = self.visit(s.value)
        var = s.var
        if value.dtype.lanes != 1:
            var = self.vmap[s.var] = E.Var(s.var.name, value.dtype)
        return S.LetStmt(var, value, self.visit(s.body))

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        value = self.visit(s.value)
        return s if value is s.value else S.Evaluate(value)

    def visit_For(self, s: S.For) -> S.Stmt:
        raise _Scalarize("a nested loop")

    def visit_While(self, s: S.While) -> S.Stmt:
        raise _Scalarize("a while loop")

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        raise _Scalarize("an allocation needs one copy per lane")


def _vectorize_one(loop: S.For, dom: dict[E.Var, E.Range]) -> tuple[S.Stmt, str | None]:
    """The loop as vector code, or as a serial loop with the reason it could not be vectorized."""
    lanes = const_int(loop.extent)
    if lanes is None or lanes < 2:
        why = None if lanes is not None else f"its extent {loop.extent} is not a constant"
        return loop.with_(kind=S.ForKind.SERIAL), why
    if lanes > MAX_LANES:
        raise LoomValueError(f"vectorize: loop {loop.loop_var.name} has {lanes} iterations, more than the "
                             f"{MAX_LANES} lanes a vector can have; split it and vectorize the inner loop")
    ramp = E.Ramp(loop.min, ops.const(1, loop.loop_var.dtype), lanes)
    try:
        return _Vectorizer(loop, lanes, ramp, dom).visit(loop.body), None
    except _Scalarize as err:
        return loop.with_(kind=S.ForKind.SERIAL), str(err)


class _LoopVectorizer(Mutator):
    def __init__(self, skip: bool) -> None:
        self.skip = skip
        # By loop variable name: vectorized somewhere, or why a copy stayed serial.  LoopPartition leaves
        # copies of a loop (main part and tail, with fresh variables of the same name); only a loop none
        # of whose copies vectorized is reported.
        self.vectorized: set[str] = set()
        self.serial: dict[str, str] = {}
        self.dom: dict[E.Var, E.Range] = {}  # the loops around the current one, and itself

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def visit_Buffer(self, b: Any) -> Any:
        return b

    def visit_For(self, s: S.For) -> S.Stmt:
        self.dom[s.loop_var] = E.Range(s.min, s.extent)
        try:
            return self._loop(s)
        finally:
            del self.dom[s.loop_var]

    def _loop(self, s: S.For) -> S.Stmt:
        body = self.visit(s.body)  # inner loops first
        if body is not s.body:
            s = s.with_(body=body)
        if s.kind is not S.ForKind.VECTORIZED:
            return s
        if self.skip:
            return s.with_(kind=S.ForKind.SERIAL)
        out, why = _vectorize_one(s, self.dom)
        name = s.loop_var.name
        if not (isinstance(out, S.For) and out.kind is S.ForKind.SERIAL):
            self.vectorized.add(name)
        elif why is not None:
            self.serial.setdefault(name, why)
        return out


def vectorize_loop(stmt: S.Stmt) -> S.Stmt:
    """``stmt`` with its vectorized loops turned into vector code (or serial loops).

    A loop that stays serial although it could have more than one lane is
    reported with a WARNING on the ``loom.transform.vectorize`` logger, with the reason.
    """
    vectorizer = _LoopVectorizer(skip=False)
    out = vectorizer.visit(stmt)
    for name, why in vectorizer.serial.items():
        if name not in vectorizer.vectorized:
            _log.warning("vectorize(%s) is not honoured, the loop stays serial: %s", name, why)
    return out


def skip_vectorize(stmt: S.Stmt) -> S.Stmt:
    """``stmt`` with every vectorized loop made serial."""
    return _LoopVectorizer(skip=True).visit(stmt)


def _run(body: S.Stmt, ctx: PassContext) -> S.Stmt:
    return skip_vectorize(body) if ctx.get_config("tir.disable_vectorize") else vectorize_loop(body)


def VectorizeLoop() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """The vectorization pass; under ``tir.disable_vectorize`` it makes vectorized loops serial."""
    return body_pass("VectorizeLoop", _run)


def SkipVectorize() -> Pass:  # noqa: N802
    """Make every vectorized loop serial (what ``tir.disable_vectorize`` asks for)."""
    return body_pass("SkipVectorize", lambda body, ctx: skip_vectorize(body))
