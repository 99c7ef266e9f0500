"""``StorageRewrite``: hoist allocations and let dead ones' memory be reused.

The work happens per *attach scope*: the function body, the body of a thread
(``thread_extent``/``virtual_thread``) region, and the body of a parallel,
vectorized or thread-bound loop (each iteration or thread needs memory of its
own, so nothing crosses those boundaries).  Inside one scope:

1. every ``Allocate`` with a true condition and a constant size is a
   candidate; so is one whose size is an expression of variables free at the
   scope's top, where it runs exactly once (not inside a loop or a branch);
2. :mod:`~loom.transform.storage_liveness` finds the units (loops, branches,
   stores...) of each candidate's first and last use, counted at the level of
   the candidate's own ``Allocate``: a buffer allocated inside a loop body is
   dead between its uses in two sibling inner loops.  A candidate whose pointer
   escapes (used other than by loads, stores and annotations, e.g. passed to a
   call or bound by a let) never shares;
3. candidates are visited by first use; one takes the memory of an earlier
   candidate of the same dtype and storage scope whose life ended before it
   begins (the best fitting one), or whose life ends in the very unit that
   first writes it when :mod:`~loom.transform.storage_inplace` proves the write
   elementwise (``B[i] = A[i] + 1`` produces ``B`` in ``A``'s memory).  The
   memory grows to the largest occupant (``max`` of symbolic sizes) and keeps
   the occupants' extents when they all agree;
4. candidates are removed where they stood and allocated at the top of the
   scope, which also hoists them out of serial loops.

Reused memory starts with its previous occupant's values instead of garbage; a
correct program never reads memory it has not written, so results do not change.

>>> import loom
>>> from loom.ir import Allocate, BufferStore, PrimFunc, seq
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> T1 = loom.decl_buffer((4,), "float32", name="T1"); T2 = loom.decl_buffer((4,), "float32", name="T2")
>>> body = seq(Allocate(T1.data, "float32", [4], True, seq(BufferStore(T1, A[0], [0]), BufferStore(A, T1[0], [1]))),
...            Allocate(T2.data, "float32", [4], True, seq(BufferStore(T2, A[1], [0]), BufferStore(A, T2[0], [2]))))
>>> out = StorageRewrite()(PrimFunc([A.data], body, buffer_map={A.data: A})).body
>>> print(out)  # buffer T2 now lives in T1's memory
T1 = allocate([4], 'float32', 'global')
T1[0] = A[0]
A[1] = T1[0]
T2[0] = A[1]
A[2] = T2[0]
>>> out.body[2].buffer.data is out.buffer_var
True
"""

from __future__ import annotations

from typing import Any, Union

import attrs

from ..arith import Analyzer
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..ir.expr_ops import const, maximum
from ..ir.functor import Mutator
from ..ir.structural import structural_equal
from ._util import body_pass
from .pass_base import Pass
from .storage_inplace import writes_in_place
from .storage_liveness import Candidate, Liveness, opens_scope
from .storage_pack import pack_special_memory

__all__ = ["StorageRewrite", "storage_rewrite"]


@attrs.define
class _Storage:
    var: E.Var
    members: list[Candidate]  # in order of use, their lives disjoint
    size: Union[int, E.PrimExpr]

    @property
    def dtype(self) -> Any:
        return self.members[0].alloc.dtype

    def takes(self, c: Candidate) -> str | None:
        """How ``c`` may join: ``"in place"``, ``"after"`` (the last member is dead) or None."""
        m, last = self.members[0].alloc, self.members[-1]
        if (m.scope != c.alloc.scope or not last.used or any(x.escapes for x in self.members)
                or last.home != c.home or _in_units(c, self.dtype) is None):
            return None
        if last.dead_before(c.first):  # type: ignore[arg-type]
            return "after"
        if last.last is c.first and c.first.stmt is not None and writes_in_place(  # type: ignore[union-attr]
                c.first.stmt, last.alloc.buffer_var, c.alloc.buffer_var):  # type: ignore[union-attr]
            return "in place"
        return None

    def add(self, c: Candidate) -> None:
        self.members.append(c)
        size = _in_units(c, self.dtype)
        assert size is not None
        if isinstance(self.size, int) and isinstance(size, int):
            self.size = max(self.size, size)
        elif not structural_equal(self.size, size):
            self.size = _max_size(self.size, size)


def _in_units(c: Candidate, dtype: Any) -> Union[int, E.PrimExpr, None]:
    """``c``'s size in elements of ``dtype``, or None where it cannot live in memory of that dtype.

    Another dtype shares by bytes, for constant sizes of whole-byte elements, and not in
    ``local`` memory (registers on a GPU, which a reinterpreting pointer would spill)."""
    t = c.alloc.dtype
    if t == dtype:
        return c.size
    scope = c.alloc.scope
    if (not isinstance(c.size, int) or scope in ("local", "warp")
            or any(x.bits % 8 or x.is_bool or x.is_handle for x in (t, dtype))):
        return None
    unit = dtype.bits * dtype.lanes // 8
    return -(-c.size * (t.bits * t.lanes // 8) // unit)


def _max_size(a: Union[int, E.PrimExpr], b: Union[int, E.PrimExpr]) -> E.PrimExpr:
    dtype = (b if isinstance(a, int) else a).dtype  # type: ignore[union-attr]
    wrap = lambda x: const(x, dtype) if isinstance(x, int) else x  # noqa: E731
    return Analyzer().simplify(maximum(wrap(a), wrap(b)))


def _order(c: Candidate) -> tuple[int, int]:
    return (c.first.begin, c.last.end) if c.first is not None and c.last is not None else (-1, -1)


def _plan(cands: list[Candidate]) -> list[_Storage]:
    storages: list[_Storage] = []
    for c in sorted(cands, key=_order):
        best = None
        if not c.escapes and c.used:
            ways = [(st, st.takes(c)) for st in storages]
            in_place = [st for st, how in ways if how == "in place"]
            after = [st for st, how in ways if how == "after"]
            best = in_place[0] if in_place else min(after, key=lambda st: _fit(st, c), default=None)
        if best is None:
            storages.append(_Storage(c.alloc.buffer_var, [c], c.size))
        else:
            best.add(c)
    return storages


def _fit(st: _Storage, c: Candidate) -> tuple[int, int, Any]:
    """Prefer storage already big enough (the smallest such), else the biggest; of symbolic sizes, an equal one.
    Storage of the candidate's own dtype first."""
    size = _in_units(c, st.dtype)
    other = int(st.dtype != c.alloc.dtype)
    if isinstance(st.size, int) and isinstance(size, int):
        return (0, other, st.size) if st.size >= size else (1, other, -st.size)
    return (0, other, 0) if structural_equal(st.size, size) else (2, other, 0)


def _extents(st: _Storage) -> tuple[E.PrimExpr, ...]:
    first = st.members[0].alloc
    if all(c.alloc.dtype == first.dtype and len(c.alloc.extents) == len(first.extents) and all(
            structural_equal(a, b) for a, b in zip(c.alloc.extents, first.extents)) for c in st.members):
        return tuple(first.extents)
    if isinstance(st.size, int):
        return (const(st.size, "int32" if st.size < 2**31 else "int64"),)
    return (st.size,)


class _Remove(Mutator):
    """Drops the planned Allocates (their bodies stay) and renames merged data vars."""

    def __init__(self, removed: set[int], vmap: dict[E.Var, E.Var], offsets: dict[E.Var, int]) -> None:
        self.removed, self.vmap, self.offsets = removed, vmap, offsets
        self.moved_buffers: dict[int, Buffer] = {}

    def visit_Var(self, v: E.Var) -> E.Var:
        return self.vmap.get(v, v)

    def visit_Buffer(self, b: Buffer) -> Buffer:
        """A buffer packed at an offset into a special memory reads and writes from there on."""
        bits = self.offsets.get(b.data)
        if bits is None:
            return self.generic_visit(b)
        if id(b) not in self.moved_buffers:
            out = self.generic_visit(b)
            shift = const(bits // (b.dtype.bits * b.dtype.lanes), out.elem_offset.dtype)
            self.moved_buffers[id(b)] = out.with_(elem_offset=Analyzer().simplify(out.elem_offset + shift))
        return self.moved_buffers[id(b)]

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        parts = [self.visit(x) for x in s.seq]
        return s if all(a is b for a, b in zip(parts, s.seq)) else S.seq(*parts)  # flattens freed bodies

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        if id(s) in self.removed:
            return self.visit(s.body)
        return self.generic_visit(s)


def _rewrite_scope(body: S.Stmt) -> S.Stmt:
    cands = Liveness.of(body)
    if not cands:
        return body
    storages = _plan(cands)
    packing = pack_special_memory(storages)
    vmap: dict[E.Var, E.Var] = {}
    offsets: dict[E.Var, int] = {}  # bits into the packed allocation
    for st in storages:
        head, bits = packing.moved.get(id(st), (st, 0))
        for c in st.members:
            if c.alloc.buffer_var is not head.var:
                vmap[c.alloc.buffer_var] = head.var
            if bits:
                offsets[c.alloc.buffer_var] = bits
    out = _Remove({id(c.alloc) for c in cands}, vmap, offsets).visit(body)
    for st in reversed(storages):
        if id(st) in packing.moved:
            continue
        first = st.members[0].alloc
        total = packing.totals.get(id(st))
        extents = _extents(st) if total is None else (const(total, "int32" if total < 2**31 else "int64"),)
        out = S.Allocate(st.var, first.dtype, extents, first.condition, out, first.scope, first.annotations)
    return out


class _Scopes(Mutator):
    """Plans nested scopes first, then hands each scope body to :func:`_rewrite_scope`."""

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        out = self.generic_visit(s)
        return out.with_(body=_rewrite_scope(out.body)) if opens_scope(out) else out

    def visit_For(self, s: S.For) -> S.Stmt:
        out = self.generic_visit(s)
        return out.with_(body=_rewrite_scope(out.body)) if opens_scope(out) else out


def storage_rewrite(stmt: S.Stmt) -> S.Stmt:
    """Hoist and share the allocations of ``stmt`` (see the module docstring)."""
    return _rewrite_scope(_Scopes().visit(stmt))


def StorageRewrite() -> Pass:  # noqa: N802 - classic factory name
    """The pass: :func:`storage_rewrite` on every PrimFunc's body."""
    return body_pass("StorageRewrite", lambda body, ctx: storage_rewrite(body))
