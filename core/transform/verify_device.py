"""``VerifyDeviceLimits``: refuse kernels that a device cannot launch.

A device grants each block of threads at most ``max_threads`` threads and
``max_shared_bytes`` bytes of shared memory.  A launch region (the code under
the outermost ``thread_extent``) that asks for more with constant extents or
allocations is an error at build time, naming the function and both numbers;
symbolic extents cannot be checked here and are left to the device.  Device
plugins contribute this pass through ``loom_lower_passes`` with their target's
limits (classic TVM's ``VerifyGPUCode`` in spirit).

>>> import loom
>>> from loom.ir import AttrStmt, BufferStore, IterVar, PrimFunc
>>> A = loom.decl_buffer((2048,), "float32", name="A")
>>> tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
>>> f = PrimFunc([A.data], AttrStmt(tx, "thread_extent", 2048, BufferStore(A, loom.const(0.0), [tx.var])),
...              buffer_map={A.data: A}, attrs={"global_symbol": "big"})
>>> VerifyDeviceLimits(1024, 49152)(f)
Traceback (most recent call last):
  ...
loom.errors.LoomError: big: a block of 2048 threads (threadIdx.x=2048) exceeds the device's 1024 threads per block (in pass VerifyDeviceLimits)
"""

from __future__ import annotations

from typing import Any

from ..errors import LoomError, LoomValueError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import post_order_visit
from ._util2 import is_thread_attr
from .pass_base import Pass, PassContext, prim_func_pass

__all__ = ["VerifyDeviceLimits"]


def _check_region(name: str, region: S.AttrStmt, max_threads: int, max_shared: int) -> None:
    extents: dict[str, int] = {}
    shared = 0

    def visit(n: Any) -> None:
        nonlocal shared
        if is_thread_attr(n, ("thread_extent",)):
            tag = n.node.thread_tag or ""
            if tag.startswith("threadIdx.") and isinstance(n.value, E.IntImm):
                extents[tag] = max(extents.get(tag, 0), n.value.value)
        elif isinstance(n, S.Allocate) and n.scope == "shared":
            count = 1
            for e in n.extents:
                if not isinstance(e, E.IntImm):
                    return
                count *= e.value
            shared += count * n.dtype.bytes * n.dtype.lanes

    post_order_visit(region, visit)
    threads = 1
    for n in extents.values():
        threads *= n
    if threads > max_threads:
        shape = ", ".join(f"{t}={n}" for t, n in sorted(extents.items()))
        raise LoomError(f"{name}: a block of {threads} threads ({shape}) exceeds the device's {max_threads} threads "
                        "per block")
    if shared > max_shared:
        raise LoomError(f"{name}: its blocks allocate {shared} bytes of shared memory, more than the device's "
                        f"{max_shared} bytes per block")


def VerifyDeviceLimits(max_threads: int, max_shared_bytes: int) -> Pass:  # noqa: N802 - classic factory name
    """The pass for a device with these per-block limits."""
    if max_threads < 1 or max_shared_bytes < 0:
        raise LoomValueError(f"VerifyDeviceLimits needs max_threads >= 1 and max_shared_bytes >= 0, got "
                             f"{max_threads} and {max_shared_bytes}")

    def run(func: Any, mod: Any, ctx: PassContext) -> Any:
        name = str(func.attrs.get("global_symbol", "the function"))
        outermost: list[S.AttrStmt] = []

        def collect(s: S.Stmt, inside: bool) -> None:
            if is_thread_attr(s, ("thread_extent",)) and not inside:
                outermost.append(s)
                return
            for child in _children(s):
                collect(child, inside)

        collect(func.body, False)
        for region in outermost:
            _check_region(name, region, max_threads, max_shared_bytes)
        return func

    return prim_func_pass(run, name="VerifyDeviceLimits")


def _children(s: S.Stmt) -> list[S.Stmt]:
    if isinstance(s, S.SeqStmt):
        return list(s.seq)
    if isinstance(s, S.IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    body = getattr(s, "body", None)
    return [body] if isinstance(body, S.Stmt) else []
