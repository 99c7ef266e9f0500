"""LoopPartition never changes what a program computes: random guarded nests, schedules and thread scopes.

The random nests mix what the pass must get right: symbolic and constant
extents, loops that do not start at 0, guards with negative coefficients,
``==`` and ``!=``, conjunctions, guards between loops, in a ``Select``, with
an ``else``, and ``blockIdx`` / ``threadIdx`` scopes (the interpreter runs them
with GPU semantics).  Every iteration adds to its own output element, so an
iteration run twice or skipped shows.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loom
from loom.arith import Analyzer
from loom.ir import AttrStmt, BufferStore, For, IfThenElse, PrimFunc, Select, collect, seq, substitute
from loom.testing import evaluate
from loom.testing.conformance.programs import rand, shared_reversal, tiled_matmul
from loom.transform import PassContext
from loom.transform.loop_partition import LoopPartition
from loom.transform.loop_partition_deduce import Site, decide

from partition_checks import on_targets

_OPS = ["<", "<=", ">", ">=", "==", "!="]


class _Nest:
    """A random nest over ``n`` (whose value is fixed), writing ``O[flat index] += ...``."""

    def __init__(self, seed: int) -> None:
        self.r = r = random.Random(seed)
        self.n, self.nval = loom.var("n"), r.randint(0, 12)
        self.threads = r.random() < 0.3
        # (var, min, extent, its value); thread axes first, outermost.
        self.axes: list[tuple[Any, Any, Any, int]] = []
        if self.threads:
            self.bx, self.tx = loom.thread_axis("blockIdx.x"), loom.thread_axis("threadIdx.x")
            self.axes += [(self.bx.var, 0, self.n + 1, self.nval + 1), (self.tx.var, 0, 2, 2)]
        for d in range(r.randint(1, 3)):
            self.axes.append((loom.var(f"v{d}"), *self._range()))
        size = 1
        for _, _, _, ext in self.axes:
            size *= max(ext, 1)
        self.O = loom.decl_buffer((size,), "int32", name="O")

    def _range(self) -> tuple[int, Any, int]:
        r, n, nv = self.r, self.n, self.nval
        mn = r.choice([0, 0, 0, r.randint(1, 3)])
        k = r.randint(2, 5)
        ext, val = r.choice([(r.randint(1, 7), None), (n, nv), (n + 2, nv + 2), (loom.floordiv(n + k - 1, k), -(-nv // k))])
        return mn, ext, ext if val is None else val

    def term(self, scope: list) -> Any:
        r = self.r
        e = loom.const(r.randint(-6, 6))
        for var, *_ in r.sample(scope, r.randint(min(1, len(scope)), len(scope))):
            e = e + var * r.choice([-3, -2, -1, 1, 1, 1, 2, 4])
        return e

    def compare(self, scope: list) -> Any:
        r = self.r
        lhs, rhs = self.term(scope), r.choice([loom.const(r.randint(0, 12)), self.n, self.n - r.randint(0, 3), self.n * 2])
        return {"<": lhs < rhs, "<=": lhs <= rhs, ">": lhs > rhs, ">=": lhs >= rhs,
                "==": lhs == rhs, "!=": lhs != rhs}[r.choice(_OPS)]

    def cond(self, scope: list) -> Any:
        c = self.compare(scope)
        return loom.likely(loom.all(c, self.compare(scope)) if self.r.random() < 0.25 else c)

    def add(self, value: Any) -> Any:
        idx, stride = loom.const(0), 1
        for var, mn, _, ext in reversed(self.axes):
            idx, stride = idx + (var - mn) * stride, stride * max(ext, 1)
        return BufferStore(self.O, self.O[idx] + value, [idx])

    def stmt(self) -> Any:
        r, k, scope = self.r, self.r.randint(1, 9), self.axes
        shape = r.random()
        if shape < 0.4:
            return IfThenElse(self.cond(scope), self.add(k), self.add(-k) if r.random() < 0.5 else None)
        if shape < 0.6:
            return self.add(Select(self.cond(scope), loom.const(k), loom.const(-2 * k)))
        if shape < 0.8:
            return IfThenElse(self.cond(scope), IfThenElse(self.cond(scope), self.add(k)))
        return self.add(k)

    def func(self) -> PrimFunc:
        body = seq(*(self.stmt() for _ in range(self.r.randint(1, 3))))
        first = 2 if self.threads else 0
        for d in reversed(range(first, len(self.axes))):
            var, mn, ext, _ = self.axes[d]
            body = For(var, mn, ext, self.r.choice(["serial", "serial", "unrolled", "parallel"]), body)
            if self.r.random() < 0.3:  # a guard between loops, over the axes outside
                body = IfThenElse(self.cond(self.axes[:d]), body)
        if self.threads:
            body = AttrStmt(self.bx, "thread_extent", self.n + 1, AttrStmt(self.tx, "thread_extent", 2, body))
        return PrimFunc([self.O.data, self.n], body, buffer_map={self.O.data: self.O})


def _partition(f: PrimFunc, const: bool) -> PrimFunc:
    with PassContext(config={"tir.partition_const_loop": const}):
        g = LoopPartition()(f)
    loom.verify_well_formed(g)
    return g


def _run(f: PrimFunc, nest: _Nest) -> np.ndarray:
    out = np.zeros(nest.O.shape[0].value, "int32")
    evaluate(f, out, nest.nval)
    return out


def _likely_count(f: PrimFunc) -> int:
    return len(collect(f.body, lambda x: getattr(getattr(x, "op", None), "name", None) == "tir.likely"))


@settings(max_examples=60)
@given(seed=st.integers(0, 2**31), const=st.booleans())
def test_random_guarded_nests_keep_their_values(seed, const):
    nest = _Nest(seed)
    f = nest.func()
    np.testing.assert_array_equal(_run(_partition(f, const), nest), _run(f, nest))


def test_random_guarded_nests_do_lose_guards():
    """The property above is not vacuous: most of the random nests do get partitioned."""
    changed = sum(_likely_count(_partition(f, True)) != _likely_count(f)
                  for f in (_Nest(seed).func() for seed in range(40)))
    assert changed >= 20, changed


def _guard(seed: int) -> tuple[Any, Any, list, Any, int, Callable[..., bool]]:
    """A random affine guard over v, up to two relaxed loops and n: ``(v, n, loops, cond, n's value, python cond)``."""
    r = random.Random(seed)
    v, n, nval = loom.var("v"), loom.var("n"), r.randint(-3, 12)
    loops = [(loom.var(f"u{d}"), r.randint(-2, 2), r.randint(1, 4)) for d in range(r.randint(0, 2))]
    parts, checks = [], []
    for _ in range(r.choice([1, 1, 2])):
        cv, cn, c0 = r.choice([-3, -2, -1, 1, 1, 2, 3]), r.choice([0, 1, 1, -1, 2]), r.randint(-6, 6)
        cu = [r.choice([0, -2, -1, 1, 3]) for _ in loops]
        op = r.choice(_OPS)
        lhs = v * cv + n * cn + c0
        for (u, _, _), c in zip(loops, cu):
            lhs = lhs + u * c
        parts.append({"<": lhs < 0, "<=": lhs <= 0, ">": lhs > 0, ">=": lhs >= 0, "==": lhs == 0, "!=": lhs != 0}[op])
        pyop = {"<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__, "==": int.__eq__, "!=": int.__ne__}[op]
        checks.append(lambda vv, us, cv=cv, cn=cn, c0=c0, cu=cu, pyop=pyop:
                      pyop(vv * cv + nval * cn + c0 + sum(a * b for a, b in zip(us, cu)), 0))
    cond = parts[0] if len(parts) == 1 else loom.all(*parts)
    return v, n, loops, cond, nval, lambda vv, us: all(c(vv, us) for c in checks)


def _decide(seed: int) -> tuple[Any, Any, Callable[[int], list[bool]]]:
    """The deduced ``(T, F)`` of a random guard, as ``range``s (None: unknown), and its values at v."""
    v, n, loops, cond, nval, holds = _guard(seed)
    an = Analyzer()
    site = Site(loom.likely(cond), tuple((u, loom.const(mn), loom.const(ext)) for u, mn, ext in loops), ())
    found = decide(an, site, v)

    def concrete(iv: Any) -> Any:
        if iv is None:
            return None
        lo, hi = (None if e is None else an.simplify(substitute(e, {n: loom.const(nval)})).value for e in iv)
        return range(-100 if lo is None else lo, 100 if hi is None else hi)

    def values(vv: int) -> list[bool]:
        return [holds(vv, us) for us in itertools.product(*(range(mn, mn + ext) for _, mn, ext in loops))]

    return concrete(found[0]), concrete(found[1]), values


@settings(max_examples=300)
@given(seed=st.integers(0, 2**31))
def test_deduced_intervals_are_right(seed):
    """Where the deduction says a guard holds (fails), it holds (fails) for every relaxed value: checked by brute force."""
    true_on, false_on, values = _decide(seed)
    for vv in range(-40, 41):
        if true_on is not None and vv in true_on:
            assert all(values(vv)), vv
        if false_on is not None and vv in false_on:
            assert not any(values(vv)), vv


def test_deduction_decides_most_affine_guards():
    decided = sum(any(x is not None for x in _decide(seed)[:2]) for seed in range(100))
    assert decided >= 70, decided


def _schedule(seed: int) -> tuple[Any, list, np.ndarray, Any]:
    """A random 1-D schedule: one or two splits, maybe bound to threads, maybe a compute_at producer."""
    r = random.Random(seed)
    n = r.randint(1, 40)
    A = loom.placeholder((n,), name="A")
    P = loom.compute((n,), lambda i: A[i] * 2.0, name="P")
    C = loom.compute((n,), lambda i: P[i] + 1.0, name="C")
    s = loom.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=r.randint(2, 9))
    if r.random() < 0.5:
        inner, innermost = s[C].split(inner, factor=r.randint(2, 4))
    if r.random() < 0.5:
        s[C].bind(outer, loom.thread_axis("blockIdx.x"))
        s[C].bind(inner, loom.thread_axis("threadIdx.x"))
    elif r.random() < 0.6:
        s[P].split(P.op.axis[0], factor=r.randint(2, 7))
        s[P].compute_at(s[C], outer)
    a = RNG.random(n, "float32")
    return s, [A, C], a, a * 2.0 + 1.0


RNG = np.random.default_rng(7)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("const", [False, True])
def test_random_schedules_on_every_target(seed, const):
    s, args, a, want = _schedule(seed)
    on_targets(s, args, [a, np.zeros_like(a)], const, lambda r: np.testing.assert_allclose(r[1], want, rtol=1e-6))


@pytest.mark.parametrize("const", [False, True])
@pytest.mark.parametrize("program", ["reversal", "matmul"])
def test_blocks_with_barriers_keep_their_values(program, const):
    """Shared memory and barriers (GPU semantics, interp): a branch on blockIdx never splits a block's threads."""
    if program == "reversal":
        s, args = shared_reversal(45, 16)
        a = rand((45,))
        arrays, check = [a, np.zeros_like(a)], lambda r: np.testing.assert_array_equal(r[1], a[::-1] * 2)
    else:
        s, args = tiled_matmul(20, 13, 18)
        a, b = rand((20, 18)), rand((18, 13), 1)
        arrays = [a, b, np.zeros((20, 13), "float32")]
        check = lambda r: np.testing.assert_allclose(r[2], a @ b, rtol=1e-4, atol=1e-4)  # noqa: E731
    with loom.build_config(partition_const_loop=const):
        (f,) = loom.lower(s, args).functions.values()
        run = loom.build(s, args, target="interp")
    blocks = [x for x in collect(f.body, lambda y: isinstance(y, IfThenElse))
              if "blockIdx" in str(x.condition) and "likely" not in str(x.condition)]
    assert bool(blocks) == const  # constant grids are partitioned only under partition_const_loop
    run(*arrays)
    check(arrays)
