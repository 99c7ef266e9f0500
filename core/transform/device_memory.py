"""Where memory lives in a build: device buffers in host code, and barriers on CPU targets.

``PlanDeviceMemory`` runs after SplitHostDevice, on each host function made
from a device function (``attrs["loom.device_target"]``):

- its buffer arguments live on the device: ``attrs["loom.arg_devices"]`` says so
  for every pointer parameter, and the runtime's argument checker accepts only
  arrays on that device;
- every ``Allocate`` left in host code (the intermediate tensors kernels pass to
  each other) holds device memory: it is annotated with the device type and id
  (see :mod:`loom.runtime.abi`), and host backends get it from the device API;
- host code must not read or write those buffers (they are not host memory):
  a load or store is an error naming the function, the buffer and the fix
  (bind the stage's loops to threads so it runs on the device).

``RefuseThreadBarriers`` runs on CPU targets whose backend runs bound threads
one after another (llvm, c): if the thread-bound code would need a barrier
(ThreadSync would insert one), running it serially gives wrong results, so the
build stops with an error naming the shared buffers.

>>> import loom
>>> from loom.ir import BufferStore, PrimFunc
>>> from loom.target import TargetKind, Target, override_kinds
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> with override_kinds(TargetKind("llvm", "cpu", {}), TargetKind("toy", "ext_dev", {})):
...     f = PrimFunc([A.data], BufferStore(A, loom.const(1.0), [0]), buffer_map={A.data: A},
...                  attrs={"target": Target("llvm"), "loom.device_target": Target("toy"), "global_symbol": "f"})
...     PlanDeviceMemory()(f)
Traceback (most recent call last):
  ...
loom.errors.LoomError: f: host code stores to A (A[0] = 1.0), but A lives on ext_dev: only kernels may access device memory; bind the loops of the stage computing it to blockIdx/threadIdx so it runs on the device (in pass PlanDeviceMemory)
"""

from __future__ import annotations

from typing import Any

from ..errors import LoomError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import Mutator, Visitor, post_order_visit
from ..runtime.abi import ARG_DEVICES_ATTR, DEVICE_ID_ANNOTATION, DEVICE_TYPE_ANNOTATION
from ..target.devices import device_type_name
from ._util import is_op_call
from ._util2 import is_thread_attr
from .pass_base import Pass, PassContext, prim_func_pass
from .split_host_device import DEVICE_TARGET_ATTR
from .thread_sync import thread_sync

__all__ = ["PlanDeviceMemory", "RefuseThreadBarriers"]


class _DeviceAllocations(Mutator):
    def __init__(self, device_type: int) -> None:
        self.device_type = device_type
        self.vars: set[int] = set()

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        self.vars.add(id(s.buffer_var))
        out = self.generic_visit(s)
        notes = {**s.annotations, DEVICE_TYPE_ANNOTATION: self.device_type, DEVICE_ID_ANNOTATION: 0}
        return out.with_(annotations=notes)


class _HostAccess(Visitor):
    """Finds the first load or store of device memory in host code."""

    def __init__(self, device_vars: set[int]) -> None:
        self.device_vars = device_vars
        self.found: tuple[str, Any] | None = None

    def visit_BufferLoad(self, e: E.BufferLoad) -> None:
        if self.found is None and id(e.buffer.data) in self.device_vars:
            self.found = ("reads", e)
        self.generic_visit(e)

    def visit_BufferStore(self, s: S.BufferStore) -> None:
        if self.found is None and id(s.buffer.data) in self.device_vars:
            self.found = ("stores to", s)
        self.generic_visit(s)


def _describe(node: Any) -> str:
    text = str(node).strip().splitlines()[0]
    return text if len(text) <= 80 else text[:77] + "..."


def PlanDeviceMemory() -> Pass:  # noqa: N802 - classic factory name
    """The pass (see the module docstring)."""

    def run(func: Any, mod: Any, ctx: PassContext) -> Any:
        device = func.attrs.get(DEVICE_TARGET_ATTR)
        if device is None:
            return func
        dt = device.device_type
        allocs = _DeviceAllocations(dt)
        body = allocs.visit(func.body)
        device_vars = allocs.vars | {id(p) for p in func.params if p.dtype.is_handle}
        device_vars |= {id(b.data) for b in func.buffer_map.values()}
        access = _HostAccess(device_vars)
        access.visit(body)
        if access.found is not None:
            verb, node = access.found
            buf = node.buffer
            name = func.attrs.get("global_symbol", "the function")
            raise LoomError(f"{name}: host code {verb} {buf.name} ({_describe(node)}), but {buf.name} lives on "
                            f"{device_type_name(dt)}: only kernels may access device memory; bind the loops of the "
                            f"stage computing it to blockIdx/threadIdx so it runs on the device")
        devices = tuple(dt if p.dtype.is_handle else 1 for p in func.params)
        return func.with_(body=body, attrs={**func.attrs, ARG_DEVICES_ATTR: devices})

    return prim_func_pass(run, name="PlanDeviceMemory")


def _barriers(stmt: S.Stmt) -> int:
    count = [0]
    post_order_visit(stmt, lambda n: count.__setitem__(0, count[0] + is_op_call(n, "tir.tvm_storage_sync")))
    return count[0]


def _shared_buffers(stmt: S.Stmt) -> list[str]:
    names: dict[str, None] = {}

    def visit(n: Any) -> None:
        if isinstance(n, S.Allocate) and n.scope in ("shared", "warp"):
            names.setdefault(n.buffer_var.name)

    post_order_visit(stmt, visit)
    return list(names)


def RefuseThreadBarriers() -> Pass:  # noqa: N802 - classic factory name
    """The pass (see the module docstring): an error when serial threads would need a barrier."""

    def run(func: Any, mod: Any, ctx: PassContext) -> Any:
        scopes = ["shared"] + (["global"] if ctx.get_config("tir.detect_global_barrier") else [])
        regions: list[S.Stmt] = []
        post_order_visit(func.body, lambda n: regions.append(n) if is_thread_attr(n, ("thread_extent",)) else None)
        if not regions:
            return func
        before = _barriers(func.body)
        after = before
        for scope in scopes:
            after += _barriers(thread_sync(func.body, scope)) - before
        if after == 0:
            return func
        target = func.attrs.get("target")
        kind = target.kind.name if target is not None else "this"
        name = func.attrs.get("global_symbol", "the function")
        shared = _shared_buffers(func.body)
        what = f" on {', '.join(shared)}" if shared else ""
        raise LoomError(f"{name}: its threads communicate through memory{what} and need barriers, but the {kind} "
                        f"target runs bound threads (blockIdx/threadIdx) one after another, which cannot honour a "
                        f"barrier; build it for a device target (cuda, ext_dev) or for interp, or schedule it "
                        f"without thread bindings")

    return prim_func_pass(run, name="RefuseThreadBarriers")
