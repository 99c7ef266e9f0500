"""Packing the buffers of a special memory into one allocation, for :mod:`~loom.transform.storage_rewrite`.

After the planner has decided which buffers share memory, the storages of
each special scope (``"local.L0A"``: see :mod:`loom.target.memory_info`) in
one attach scope are laid out one after another in a single allocation: the
first storage's, grown to hold them all.  Each starts at an offset aligned to
the memory's ``unit_bits`` and ``max_simd_bits`` (when a backend registered a
:class:`~loom.target.memory_info.MemoryInfo`) and to its own elements, and the
total must fit ``max_num_bits``.  A buffer then reads and writes the packed
allocation at its offset (its ``elem_offset`` grows by it), so nothing but the
addresses changes.

A storage whose data pointer escapes (passed to a call, bound by a let) can
only stand at offset 0; a second such storage keeps an allocation of its own,
though it still counts against the capacity.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, Sequence, Union

import attrs

from ..errors import LoomValueError
from ..ir import expr as E
from ..target.memory_info import memory_info, special_memory

__all__ = ["PackPlan", "pack_special_memory"]


class _StorageLike(Protocol):
    var: E.Var
    members: list[Any]  # Candidates: .alloc (an Allocate), .escapes
    size: Union[int, E.PrimExpr]

    @property
    def dtype(self) -> Any: ...


@attrs.define
class PackPlan:
    """Where each packed storage went.

    ``totals[id(head)]``: the head storage's new size in elements of its dtype;
    ``moved[id(storage)]``: ``(head, offset in bits)`` of a storage packed into a head.
    """

    totals: dict[int, int] = attrs.field(factory=dict)
    moved: dict[int, tuple[Any, int]] = attrs.field(factory=dict)


def _bits(t: Any) -> int:
    return int(t.bits * t.lanes)


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def pack_special_memory(storages: Sequence[_StorageLike]) -> PackPlan:
    """Lay out the storages of each special scope in one allocation (see the module docstring).

    :raises LoomValueError: when a special buffer's size is not a constant, or the
        buffers need more bits than the scope's ``MemoryInfo.max_num_bits``.
    """
    plan = PackPlan()
    groups: dict[str, list[_StorageLike]] = {}
    for st in storages:
        scope = st.members[0].alloc.scope
        if special_memory(scope):
            groups.setdefault(scope, []).append(st)
    for scope, group in groups.items():
        _pack(scope, group, plan)
    return plan


def _pack(scope: str, group: list[_StorageLike], plan: PackPlan) -> None:
    info = memory_info(scope)
    for c in (c for st in group for c in st.members):
        if not isinstance(c.size, int):
            extents = ", ".join(str(e) for e in c.alloc.extents)
            raise LoomValueError(f"the buffer {c.alloc.buffer_var.name} in the special memory {scope!r} has the "
                                 f"extents ({extents}): a special memory holds only buffers of constant size")
    bits = {id(st): int(st.size) * _bits(st.dtype) for st in group if isinstance(st.size, int)}
    step = math.lcm(info.unit_bits, info.max_simd_bits) if info is not None else 8
    # An escaping pointer cannot move: the first such storage heads the packing, any other stays apart.
    escaping = [st for st in group if any(c.escapes for c in st.members)]
    head = escaping[0] if escaping else group[0]
    apart = escaping[1:]
    packed = [head] + [st for st in group if st is not head and st not in apart]
    total = 0
    for st in packed:
        elem = math.lcm(step, *(_bits(c.alloc.dtype) for c in st.members))
        start = _align(total, elem)
        if st is not head:
            plan.moved[id(st)] = (head, start)
        total = start + bits[id(st)]
    total = _align(total, step)
    if len(packed) > 1:
        plan.totals[id(head)] = -(-total // _bits(head.dtype))
    used = total + sum(bits[id(st)] for st in apart)
    if info is not None and used > info.max_num_bits:
        names = ", ".join(c.alloc.buffer_var.name for st in group for c in st.members)
        raise LoomValueError(
            f"the buffers of the special memory {scope!r} ({names}) need {used} bits, more than its "
            f"MemoryInfo.max_num_bits of {info.max_num_bits} (TVM's 'Allocation exceed bound of memory')")
