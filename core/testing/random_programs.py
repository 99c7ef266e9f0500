"""Random, well-formed, in-bounds integer programs, for pass tests and the backend conformance suite.

``random_func(seed)`` returns ``(func, make_args)``: a PrimFunc over int32
buffers and a factory that returns fresh copies of one fixed set of argument
arrays (inputs, outputs with initial values, and the scalar ``n`` of symbolic
programs).  Every program runs on the reference interpreter without error, so
a pass is checked by :func:`assert_same_result` (before vs after, exact).

The programs mix what the lowering passes care about: serial, unrolled,
parallel and vectorized loops; guarded splits ``if likely(o*F + i < N)``
(constant or symbolic ``N``); lets; local allocations; selects and
``if_then_else`` over loads; branches; and statements that do nothing.
Vectorized loops only write each output element from one lane and read
inputs, so their lanes are independent (what ``vectorize`` asserts).  Parallel
loops carry no such promise: several iterations may update one element, which
the interpreter (serial) allows; ``random_func(seed, parallel=False)`` makes
them serial, for backends that run parallel loops on threads.

>>> func, make_args = random_func(3)
>>> outs = run(func, make_args())
>>> len(outs) == len(func.params)
True
"""

from __future__ import annotations

import random
from typing import Any, Callable

import numpy as np

import loom
from loom.ir import (
    Allocate, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, Var, seq,
)
from loom.ir import expr as E

__all__ = ["random_func", "run", "assert_same_result"]

ArgsFactory = Callable[[], list]


def _int(extent: E.PrimExpr) -> int:
    """A constant extent's value (the buffers here have constant shapes)."""
    assert isinstance(extent, E.IntImm)
    return extent.value


class _Gen:
    def __init__(self, seed: int, symbolic: bool, parallel: bool = True) -> None:
        self.r = random.Random(seed)
        self.symbolic = symbolic
        self.parallel = parallel
        self.n = Var("n", "int32") if symbolic else None
        self.inputs = [loom.decl_buffer(self._shape(), "int32", name=f"X{k}") for k in range(self.r.randint(1, 2))]
        self.outputs = [loom.decl_buffer(self._shape(), "int32", name=f"Y{k}") for k in range(self.r.randint(1, 2))]
        self.names = 0

    def _shape(self) -> tuple[int, ...]:
        return (self.r.randint(6, 12),) if self.r.random() < 0.6 else (self.r.randint(3, 5), self.r.randint(4, 8))

    def var(self, base: str) -> Var:
        self.names += 1
        return Var(f"{base}{self.names}", "int32")

    # -- expressions ----------------------------------------------------------------
    def index(self, scope: list, extent: int) -> E.PrimExpr:
        """An index in ``[0, extent)``: affine in loop vars, wrapped with floormod when it could leave."""
        terms = self.r.sample(scope, min(len(scope), self.r.randint(0, 2)))
        start = self.r.randint(0, 3)
        e: E.PrimExpr = loom.const(start)
        lo = hi = start
        for v, (vlo, vhi) in terms:
            c = self.r.choice([1, 1, 2, -1])
            e = e + v * c if c != 1 else e + v
            lo, hi = lo + min(c * vlo, c * vhi), hi + max(c * vlo, c * vhi)
        return e if 0 <= lo and hi < extent else loom.floormod(e, extent)

    def load(self, scope: list, bufs: list[Buffer] | None = None) -> E.PrimExpr:
        b = self.r.choice(bufs or self.inputs)
        return b[tuple(self.index(scope, _int(d)) for d in b.shape)]

    def cond(self, scope: list, depth: int) -> E.PrimExpr:
        a, b = self.expr(scope, depth), self.expr(scope, depth)
        return self.r.choice([a < b, a <= b, a > b, loom.ir.expr_ops.eq(a, b), a != b])

    def expr(self, scope: list, depth: int = 2) -> E.PrimExpr:
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            pick = r.random()
            if pick < 0.45:
                return self.load(scope)
            if pick < 0.7 and scope:
                return r.choice(scope)[0]
            return loom.const(r.randint(-5, 5))
        a, b = self.expr(scope, depth - 1), self.expr(scope, depth - 1)
        k = r.randint(0, 9)
        if k <= 2:
            return [a + b, a - b, a * b][k]
        if k == 3:
            return loom.ir.expr_ops.minimum(a, b) if r.random() < 0.5 else loom.ir.expr_ops.maximum(a, b)
        if k == 4:
            return loom.select(self.cond(scope, depth - 1), a, b)
        if k == 5:
            return loom.if_then_else(self.cond(scope, depth - 1), a, b)
        if k == 6:
            return loom.floordiv(a, r.randint(1, 4)) if r.random() < 0.5 else loom.floormod(a, r.randint(1, 4))
        if k == 7:
            x = self.var("t")
            return E.Let(x, a, x * 2 + b)
        return a + b

    # -- statements -----------------------------------------------------------------
    def store(self, scope: list, depth: int) -> BufferStore:
        b = self.r.choice(self.outputs)
        idx = tuple(self.index(scope, _int(d)) for d in b.shape)
        value = self.expr(scope, depth)
        if self.r.random() < 0.3:
            value = b[idx] + value  # read-modify-write of the same element
        return BufferStore(b, value, idx)

    def stmt(self, scope: list, depth: int) -> Any:
        r = self.r
        if depth <= 0:
            return self.store(scope, 2)
        k = r.randint(0, 11)
        if k <= 2:
            kind = r.choice(["serial", "serial", "unrolled", "parallel"])  # drawn either way: same stream
            return self.loop(scope, depth, kind if self.parallel or kind != "parallel" else "serial")
        if k == 3:
            return self.vector_loop(scope)
        if k == 4:
            return self.guarded_split(scope, depth)
        if k == 5:
            cond = self.cond(scope, 1)
            if r.random() < 0.5:
                cond = loom.likely(cond)
            other = self.stmt(scope, depth - 1) if r.random() < 0.5 else None
            return IfThenElse(cond, self.stmt(scope, depth - 1), other)
        if k == 6:
            x = self.var("x")
            return LetStmt(x, self.expr(scope, 1), self.stmt(scope + [(x, (-40, 40))], depth - 1))
        if k == 7:
            return self.local_buffer(scope, depth)
        if k == 8:
            return self.no_op(scope)
        if k == 9:
            return seq(self.stmt(scope, depth - 1), self.stmt(scope, depth - 1))
        return self.store(scope, 2)

    def loop(self, scope: list, depth: int, kind: str) -> For:
        v, lo, ext = self.var("i"), self.r.randint(0, 2), self.r.randint(1, 5)
        return For(v, lo, ext, kind, self.stmt(scope + [(v, (lo, lo + ext - 1))], depth - 1))

    def vector_loop(self, scope: list) -> For:
        """Lane-independent stores: each output written once per lane at an injective index."""
        v = self.var("v")
        targets = self.r.sample(self.outputs, self.r.randint(1, len(self.outputs)))
        ext = self.r.randint(2, min(_int(b.shape[-1]) for b in targets))
        inner = scope + [(v, (0, ext - 1))]
        stores = []
        for b in targets:
            last = _int(b.shape[-1])
            c = self.r.randint(0, last - ext)
            idx = tuple(self.index(scope, _int(d)) for d in b.shape[:-1]) + (v + c if c else v,)
            value = self.expr(inner, 2)
            stores.append(BufferStore(b, b[idx] + value if self.r.random() < 0.3 else value, idx))
        return For(v, 0, ext, "vectorized", seq(*stores))

    def guarded_split(self, scope: list, depth: int) -> Any:
        """``for o: for i in range(F): if likely(o*F + i < N): Y[o*F + i] = ...`` over a 1-D output."""
        flat = [b for b in self.outputs if len(b.shape) == 1]
        if not flat:
            return self.store(scope, 2)
        b = self.r.choice(flat)
        size, factor = _int(b.shape[0]), self.r.randint(2, 4)
        o, i = self.var("o"), self.var("ii")
        n: E.PrimExpr
        outer: E.PrimExpr | int
        if self.symbolic:
            assert self.n is not None
            n = self.n
            outer = loom.floordiv(n + (factor - 1), factor)
            hi = size
        else:
            count = self.r.randint(1, size)
            n = loom.const(count)
            outer, hi = (count + factor - 1) // factor, count
        pos = o * factor + i
        inner_scope = scope + [(o, (0, max(0, hi - 1) // factor)), (i, (0, factor - 1))]
        body = BufferStore(b, self.expr(inner_scope, 2), [pos])
        kind = self.r.choice(["serial", "serial", "unrolled"])
        return For(o, 0, outer, "serial", For(i, 0, factor, kind, IfThenElse(loom.likely(pos < n), body)))

    def local_buffer(self, scope: list, depth: int) -> Any:
        size = self.r.randint(2, 6)
        t = loom.decl_buffer((size,), "int32", name=f"T{self.names}", scope="local")
        self.names += 1
        k, j = self.var("k"), self.var("j")
        fill = For(k, 0, size, "serial", BufferStore(t, self.expr(scope + [(k, (0, size - 1))], 1), [k]))
        use_scope = scope + [(j, (0, size - 1))]
        out = self.r.choice(self.outputs)
        idx = tuple(self.index(use_scope, _int(d)) for d in out.shape)
        use = For(j, 0, size, "serial", BufferStore(out, out[idx] + self.load(use_scope, [t]), idx))
        return Allocate(t.data, "int32", [size], True, seq(fill, use), "local")

    def no_op(self, scope: list) -> Any:
        r, b = self.r, self.r.choice(self.outputs)
        k = r.randint(0, 3)
        if k == 0:
            return Evaluate(loom.const(0))
        if k == 1:
            v = self.var("z")
            return For(v, 0, 0, "serial", self.store(scope + [(v, (0, 0))], 1))
        if k == 2:
            idx = tuple(self.index(scope, _int(d)) for d in b.shape)
            return BufferStore(b, b[idx], idx)
        return IfThenElse(self.cond(scope, 1), Evaluate(loom.const(0)))

    def func(self) -> PrimFunc:
        body = seq(*(self.stmt([], self.r.randint(1, 3)) for _ in range(self.r.randint(1, 3))))
        bufs = self.inputs + self.outputs
        params: list[Var] = [b.data for b in bufs] + ([self.n] if self.n is not None else [])
        return PrimFunc(params, body, buffer_map={b.data: b for b in bufs})


def random_func(seed: int, symbolic: bool | None = None, parallel: bool = True) -> tuple[PrimFunc, ArgsFactory]:
    """A random program and a factory of its arguments (fresh copies of fixed values).

    :param seed: makes the program and its arguments reproducible.
    :param symbolic: give guarded splits a symbolic bound ``n`` (a scalar parameter);
        by default every third seed is symbolic.
    :param parallel: keep the parallel loops (else they are serial; the program is otherwise the same).
    """
    sym = (seed % 3 == 2) if symbolic is None else symbolic
    gen = _Gen(seed, sym, parallel)
    func = gen.func()
    rng = np.random.default_rng(seed)
    base: list[Any] = [rng.integers(-8, 9, size=tuple(_int(d) for d in b.shape)).astype("int32")
                       for b in gen.inputs + gen.outputs]
    if sym:
        flat = [_int(b.shape[0]) for b in gen.outputs if len(b.shape) == 1]
        base.append(int(rng.integers(1, min(flat) + 1)) if flat else 1)
    return func, lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in base]


def run(func: Any, args: list) -> list:
    """Evaluate ``func`` on ``args`` (modified in place) and return them."""
    loom.testing.evaluate(func, *args)
    return args


def assert_same_result(before: Any, after: Any, make_args: ArgsFactory) -> None:
    """Both functions compute exactly the same outputs from the same arguments."""
    want, got = run(before, make_args()), run(after, make_args())
    for k, (w, g) in enumerate(zip(want, got)):
        if isinstance(w, np.ndarray):
            np.testing.assert_array_equal(g, w, err_msg=f"argument {k} differs after the pass")
