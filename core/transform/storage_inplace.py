"""Whether a buffer may be produced in the memory of the buffer it consumes (elementwise, in place).

:mod:`loom.transform.storage_rewrite` lets ``dst`` take over ``src``'s memory
when ``src`` dies in the very unit that first writes ``dst``, if writing
``dst`` there can never clobber a value of ``src`` still to be read.  That holds
when, inside the unit:

- ``dst`` is never read, and ``src`` never written;
- ``src`` is read only inside the values of the stores to ``dst``, each time
  at the store's own indices, through a buffer of the same layout and dtype;
- no element of ``dst`` is written twice: each store's indices are
  *injective* over the loops around it inside the unit (every loop variable
  drives exactly one index, and each index is an affine form whose terms
  cannot collide: mixed radix, each coefficient exceeds what the smaller ones
  can reach), and two stores write ranges that part in some dimension (a
  split's vector main loop and its scalar tail).

Then each element of ``src`` is read only just before the same element of
``dst`` is written, and never after, which is what the chain ``B[i] = A[i] + 1``
of un-inlined elementwise stages does.

>>> import loom
>>> from loom.ir import BufferStore, For
>>> X = loom.decl_buffer((8, 4), "float32", name="X"); Y = loom.decl_buffer((8, 4), "float32", name="Y")
>>> i, j = loom.var("i"), loom.var("j")
>>> nest = lambda idx: For(i, 0, 8, "serial", For(j, 0, 4, "serial", BufferStore(Y, X[idx] * 2.0, [i, j])))
>>> writes_in_place(nest((i, j)), X.data, Y.data)
True
>>> writes_in_place(nest((i, 3 - j)), X.data, Y.data)  # reads X[i, 3 - j] after writing Y[i, 3 - j]
False
"""

from __future__ import annotations

from typing import Any

from ..arith import Analyzer
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.expr_ops import const
from ..ir.functor import collect
from ..ir.structural import structural_equal
from ._util2 import free_vars, is_thread_attr
from .affine_region import Affine, Region

__all__ = ["writes_in_place"]


def writes_in_place(unit: S.Stmt, src: E.Var, dst: E.Var) -> bool:
    """Whether, inside ``unit``, the buffer on ``dst`` may live in the memory of the one on ``src``
    (see the module docstring)."""
    stores: list[tuple[S.BufferStore, Region]] = []
    _find_stores(unit, dst, Region(frozenset(id(v) for v in free_vars(unit))), stores)
    if not stores:
        return False
    loads = lambda node, var: collect(  # noqa: E731
        node, lambda n: isinstance(n, E.BufferLoad) and n.buffer.data is var)
    if loads(unit, dst) or collect(unit, lambda n: isinstance(n, S.BufferStore) and n.buffer.data is src):
        return False
    if sum(len(loads(st.value, src)) for st, _ in stores) != len(loads(unit, src)):
        return False  # src is read somewhere else too (another statement, or a store's indices)
    analyzer = Analyzer()
    regions = [region.with_lanes(st.value.dtype.lanes) for st, region in stores]
    if not all(_reads_own_element(st, src) and _injective(st, r, analyzer) for (st, _), r in zip(stores, regions)):
        return False
    return all(_disjoint(stores[a][0], regions[a], stores[b][0], regions[b], analyzer)
               for a in range(len(stores)) for b in range(a + 1, len(stores)))


def _reads_own_element(store: S.BufferStore, src: E.Var) -> bool:
    """Whether the store's value reads ``src`` only at the element it writes."""
    in_value = collect(store.value, lambda n: isinstance(n, E.BufferLoad) and n.buffer.data is src)
    if not all(_same_layout(ld.buffer, store.buffer) and structural_equal(tuple(ld.indices), tuple(store.indices))
               for ld in in_value):
        return False
    index_vars = {id(v) for ix in store.indices for v in collect(ix, lambda n: isinstance(n, E.Var))}
    return not any(id(let.var) in index_vars for let in collect(store.value, lambda n: isinstance(n, E.Let)))


def _disjoint(a: S.BufferStore, ra: Region, b: S.BufferStore, rb: Region, analyzer: Analyzer) -> bool:
    """Whether two stores never write the same element: their ranges part in some dimension
    (a split's main loop and its tail, say)."""
    if not _same_layout(a.buffer, b.buffer):
        return False
    for ia, ib in zip(a.indices, b.indices):
        sa, sb = ra.index_range(ia), rb.index_range(ib)
        if sa is not None and sb is not None and (
                analyzer.can_prove(sa[1] < sb[0]) or analyzer.can_prove(sb[1] < sa[0])):
            return True
    return False


def _find_stores(s: Any, dst: E.Var, region: Region, out: list[tuple[S.BufferStore, Region]]) -> None:
    """The stores to ``dst`` inside ``s``, each with the loops around it (as a region)."""
    if isinstance(s, S.BufferStore):
        if s.buffer.data is dst:
            out.append((s, region))
    elif isinstance(s, S.SeqStmt):
        for x in s.seq:
            _find_stores(x, dst, region, out)
    elif isinstance(s, S.For):
        _find_stores(s.body, dst, region.with_loop(s.loop_var, s.min, s.extent), out)
    elif is_thread_attr(s):
        _find_stores(s.body, dst, region.with_loop(s.node.var, const(0, s.value.dtype), s.value), out)
    elif isinstance(s, S.LetStmt):
        _find_stores(s.body, dst, region.with_let(s.var, s.value), out)
    elif isinstance(s, S.IfThenElse):
        _find_stores(s.then_case, dst, region, out)
        if s.else_case is not None:
            _find_stores(s.else_case, dst, region, out)
    elif isinstance(s, (S.AttrStmt, S.AssertStmt, S.Allocate)):
        _find_stores(s.body, dst, region, out)
    elif isinstance(s, S.While):
        _find_stores(s.body, dst, region.copy(opaque=True), out)
    # Evaluate: no store (an extern call writing dst makes dst escape, and escaping buffers never share)


def _same_layout(a: Any, b: Any) -> bool:
    return (a.dtype == b.dtype and structural_equal(tuple(a.shape), tuple(b.shape))
            and structural_equal(tuple(a.effective_strides()), tuple(b.effective_strides()))
            and structural_equal(a.elem_offset, b.elem_offset))


def _injective(store: S.BufferStore, region: Region, analyzer: Analyzer) -> bool:
    """Whether no two points of ``region`` store to the same element (see the module docstring)."""
    if region.opaque:
        return False
    forms = [f for f in (region.affine(ix) for ix in store.indices) if f is not None]
    if len(forms) != len(store.indices):
        return False
    owner: set[int] = set()
    for f in forms:
        if owner & set(f.terms) or not _form_injective(f, region, analyzer):
            return False
        owner |= set(f.terms)
    # A loop whose variable drives no index writes the same elements on each of its iterations.
    return all(k in owner or analyzer.can_prove(hi == lo) for k, (_, lo, hi) in region.box.items())


def _form_injective(form: Affine, region: Region, analyzer: Analyzer) -> bool:
    if not form.terms:
        return True
    if len(form.terms) == 1:
        (_, coef), = form.terms.values()
        return analyzer.can_prove(coef != 0)
    coefs = form.int_coefs()
    if coefs is None or 0 in coefs.values():
        return False
    largest = max(coefs, key=lambda key: abs(coefs[key]))
    reach = 0  # the largest sum the smaller terms can add
    for k, c in sorted(coefs.items(), key=lambda kc: abs(kc[1])):
        if abs(c) <= reach:
            return False
        _, lo, hi = region.box[k]
        span = analyzer.simplify(hi - lo)
        if not isinstance(span, E.IntImm):
            return k == largest  # only the largest term's range does not matter
        reach += abs(c) * span.value
    return True
