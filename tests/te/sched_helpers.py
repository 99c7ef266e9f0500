"""Test-only helpers: run a schedule's IR on the reference interpreter.

``schedule_to_stmt`` speaks of tensors (ProducerRealize/Store/Load).  For tests,
:func:`to_prim_func` flattens that to buffers itself, independently of the
storage-flatten pass: each argument tensor gets a compact buffer; every other
realize becomes an Allocate of its region with indices offset by the region's
mins; an extern body's placeholder buffers are swapped for their tensors'.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import loom
from loom.ir import expr as E
from loom.ir.buffer import decl_buffer
from loom.ir.container import Array
from loom.ir.function import PrimFunc
from loom.ir.producer import ProducerLoad, ProducerRealize, ProducerStore
from loom.ir.stmt import Allocate, AttrStmt, BufferStore, For
from loom.ir.functor import Mutator
from loom.te._te_functor import te_collect
from loom.te.schedule_ops import schedule_to_stmt
from loom.te.tensor import Tensor
from loom.testing import evaluate

_TRUE = E.IntImm("bool", 1)


class _Flatten(Mutator):
    def __init__(self, bound: dict[Tensor, Any]) -> None:
        self.storage: dict[Tensor, tuple[Any, tuple[E.PrimExpr, ...]]] = {
            t: (b, tuple(loom.const(0, s.dtype) for s in t.shape)) for t, b in bound.items()}
        self.alias: dict[Any, Any] = {}
        self.realized: list[Tensor] = []

    def _index(self, t: Tensor, indices: tuple[E.PrimExpr, ...]) -> tuple[Any, list[E.PrimExpr]]:
        buf, mins = self.storage[t]
        return buf, [self.visit(i) - m for i, m in zip(indices, mins)]

    def visit_ProducerRealize(self, node: ProducerRealize) -> Any:
        t = node.producer
        if t in self.storage and t not in self.realized:
            return self.visit(node.body)
        assert t not in self.storage, f"{t.name} realized twice"
        extents = [self.visit(r.extent) for r in node.bounds]
        buf = decl_buffer(extents, t.dtype, t.name)
        self.storage[t] = (buf, tuple(self.visit(r.min) for r in node.bounds))
        self.realized.append(t)
        body = self.visit(node.body)
        del self.storage[t]
        self.realized.remove(t)
        return Allocate(buf.data, t.dtype, extents, _TRUE, body, node.storage_scope or "global")

    def visit_ProducerStore(self, node: ProducerStore) -> Any:
        buf, idx = self._index(node.producer, node.indices)
        return BufferStore(buf, self.visit(node.value), idx)

    def visit_ProducerLoad(self, node: ProducerLoad) -> Any:
        buf, idx = self._index(node.producer, node.indices)
        return E.BufferLoad(buf, idx)

    def visit_AttrStmt(self, node: AttrStmt) -> Any:
        if node.attr_key == "extern_buffer_bind":
            placeholder, tensor = node.node.items
            self.alias[placeholder] = self.storage[tensor][0]
            return self.visit(node.body)
        return super().generic_visit(node)

    def visit_BufferLoad(self, node: E.BufferLoad) -> Any:
        buf = self.alias.get(node.buffer, node.buffer)
        return E.BufferLoad(buf, [self.visit(i) for i in node.indices])

    def visit_BufferStore(self, node: BufferStore) -> Any:
        buf = self.alias.get(node.buffer, node.buffer)
        return BufferStore(buf, self.visit(node.value), [self.visit(i) for i in node.indices])


def to_prim_func(stmt: Any, args: list[Any]) -> PrimFunc:
    """A PrimFunc running ``stmt`` with ``args`` (tensors, then any scalar Vars) as parameters."""
    bound = {t: decl_buffer(t.shape, t.dtype, t.name) for t in args if isinstance(t, Tensor)}
    body = _Flatten(bound).visit(stmt)
    params = [bound[a].data if isinstance(a, Tensor) else a for a in args]
    return PrimFunc(params, body, buffer_map={b.data: b for b in bound.values()})


def flatten_with_pass(stmt: Any, args: list[Any]) -> PrimFunc:
    """The same function flattened by the real StorageFlatten pass (lower()'s contract: tensor_binds)."""
    from loom.ir.container import Map
    from loom.transform.storage_flatten import storage_flatten

    bound = {t: decl_buffer(t.shape, t.dtype, t.name) for t in args if isinstance(t, Tensor)}
    params = [bound[a].data if isinstance(a, Tensor) else a for a in args]
    func = PrimFunc(params, stmt, buffer_map={b.data: b for b in bound.values()},
                    attrs={"global_symbol": "f", "tensor_binds": Map(bound)})
    return storage_flatten(func)


#: How :func:`run` turns the schedule's statement into a function: "helper" (this module) or "pass".
FLATTEN = {"mode": "helper"}


def run(sch: Any, args: list[Any], *arrays: np.ndarray) -> Any:
    """Lower ``sch``, run it on ``arrays`` (modified in place) and return the schedule's statement."""
    stmt = schedule_to_stmt(sch)
    func = flatten_with_pass(stmt, args) if FLATTEN["mode"] == "pass" else to_prim_func(stmt, args)
    evaluate(func, *arrays)
    return stmt


def rand(shape: tuple[int, ...], dtype: str = "float32", seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(dtype)


def loops(stmt: Any) -> list[For]:
    """Every For loop of ``stmt``, outermost first."""
    return te_collect(stmt, lambda n: isinstance(n, For))


def loop_names(stmt: Any) -> list[str]:
    return [f.loop_var.name for f in loops(stmt)]


def attrs_of(stmt: Any, key: str) -> list[AttrStmt]:
    return te_collect(stmt, lambda n: isinstance(n, AttrStmt) and n.attr_key == key)


def realizes(stmt: Any) -> dict[str, ProducerRealize]:
    return {r.producer.name: r for r in te_collect(stmt, lambda n: isinstance(n, ProducerRealize))}


__all__ = ["to_prim_func", "flatten_with_pass", "FLATTEN", "run", "rand", "loops", "loop_names", "attrs_of", "realizes", "Array"]
