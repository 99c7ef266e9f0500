"""Special memory: tagged storage scopes and the :class:`MemoryInfo` a backend registers for them.

An accelerator often has small on-chip memories of its own (an input buffer, a
weight buffer, an accumulator).  A schedule names one with a *tagged* storage
scope: a base scope followed by a tag, ``"local.L0A"``, ``"global:wgt"``,
``"local_acc"``.  The base (``global``, ``shared``, ``warp``, ``local``) is the
scope's rank for bound inference; the tag says the memory is special.  Loom's
own scopes with a dot (``shared.dyn``, ``local.fragment``) are not special.

``StorageRewrite`` packs every buffer of one special scope (in one attach
scope) into a single allocation, each at an offset, and buffers whose lives do
not overlap share their bytes.  When a backend describes the memory, by
registering a global function ``loom.info.mem.<scope>`` that returns a
:class:`MemoryInfo`, the packing aligns each buffer to ``unit_bits`` and
``max_simd_bits`` and the build stops with an error when the buffers need more
than ``max_num_bits``.  ``head_address`` is kept for the backend's code
generator (where the memory starts in its address space).

>>> import loom
>>> @loom.register_func("loom.info.mem.local.doc_acc", override=True)
... def _acc_info():
...     return MemoryInfo(unit_bits=32, max_simd_bits=128, max_num_bits=4096)
>>> info = memory_info("local.doc_acc")
>>> info.max_num_bits, special_memory("local.doc_acc"), special_memory("shared.dyn")
(4096, True, False)
>>> loom.runtime.registry.remove_global_func("loom.info.mem.local.doc_acc")
"""

from __future__ import annotations

from typing import Optional

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.node import Node, child, register_object, value

__all__ = ["MemoryInfo", "memory_info", "special_memory", "base_scope", "BASE_SCOPES", "INFO_PREFIX"]

#: The base storage scopes, in rank order (TVM's StorageRank).
BASE_SCOPES = ("global", "shared", "warp", "local")

#: Scopes with a tag that are ordinary memory of their base (CUDA's dynamic shared memory,
#: the JIT language's fragments, held in registers).
_ORDINARY = frozenset({"shared.dyn", "local.fragment"})

#: The prefix of the global function that describes a special scope: ``loom.info.mem.<scope>``.
INFO_PREFIX = "loom.info.mem."
#: The same function under TVM's name, which ported code registers.
_TVM_INFO_PREFIX = "tvm.info.mem."


@register_object("target.MemoryInfo")
class MemoryInfo(Node):
    """What a backend says about one special memory (TVM's ``MemoryInfo``).

    ``unit_bits``: the bits of one addressable unit; ``max_simd_bits``: the widest
    access, to which each buffer in the memory is aligned; ``max_num_bits``: the
    capacity; ``head_address``: where the memory starts, for the backend's own use.

    >>> MemoryInfo(unit_bits=16, max_simd_bits=32, max_num_bits=1024).unit_bits
    16
    """

    unit_bits: int = value(int)
    max_simd_bits: int = value(int)
    max_num_bits: int = value(int)
    head_address: Optional[E.PrimExpr] = child(E.PrimExpr, optional=True, default=None)

    def __attrs_post_init__(self) -> None:
        for name in ("unit_bits", "max_simd_bits", "max_num_bits"):
            if getattr(self, name) <= 0:
                raise LoomValueError(f"MemoryInfo.{name} must be a positive number of bits, got {getattr(self, name)}")


def base_scope(scope: str) -> Optional[str]:
    """The base scope ``scope`` starts with (``"local"`` for ``"local.L0A"``), or None."""
    for base in BASE_SCOPES:
        if scope.startswith(base):
            return base
    return None


def special_memory(scope: str) -> bool:
    """Whether ``scope`` is a tagged scope naming special memory (``"local.L0A"``, ``"global:w"``)."""
    base = base_scope(scope)
    return base is not None and scope != base and scope not in _ORDINARY


def memory_info(scope: str) -> Optional[MemoryInfo]:
    """The :class:`MemoryInfo` registered for ``scope`` (``loom.info.mem.<scope>``, or TVM's
    ``tvm.info.mem.<scope>``), or None when no backend describes it."""
    from ..runtime.registry import get_global_func  # the runtime imports the IR: import on use

    for prefix in (INFO_PREFIX, _TVM_INFO_PREFIX):
        f = get_global_func(prefix + scope, allow_missing=True)
        if f is not None:
            info = f()
            if not isinstance(info, MemoryInfo):
                raise LoomTypeError(f"{prefix}{scope} must return a MemoryInfo, got {type(info).__name__}")
            return info
    return None
