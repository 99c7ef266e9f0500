"""``SplitHostDevice``: move GPU regions of a function into device kernels.

For a function whose ``attrs["target"]`` is a device target (not a CPU), every
outermost ``thread_extent`` region becomes a PrimFunc ``<name>_kernel<k>``:

- its parameters are the region's free variables, data pointers first and then
  scalars (sizes included: the kernel indexes buffers with them), followed by
  one *launch parameter* per thread tag (``blockIdx.x``, ``threadIdx.x``...),
  in order of first binding;
- its body is the region itself: the thread AttrStmts stay (a backend reads
  the launch configuration from them, and the interpreter runs them as loops);
  an extent that is not a constant is replaced by its launch parameter;
- its attrs: ``target`` (the device target), ``calling_conv = "device_kernel"``,
  ``global_symbol``, ``thread_extents`` ``{tag: extent}`` and
  ``tir.kernel_launch_params`` (the tags, in parameter order).

The region is replaced in the host function by
``Evaluate(Call(int32, GlobalVar(kernel), [args..., extents...]))``; the host
function's target becomes ``target.host`` (or the default host) and
``attrs["loom.device_target"]`` records the device target, whose memory its
buffers live in (PlanDeviceMemory acts on it).  A function built for a device
that has no thread-bound region becomes such a host function too: its code
runs on the host, and PlanDeviceMemory refuses it if it touches device memory.
Functions without a device target are left alone.

>>> import loom
>>> from loom.ir import AttrStmt, BufferStore, IRModule, IterVar, PrimFunc
>>> from loom.target import TargetKind, override_kinds
>>> A = loom.decl_buffer((32,), "float32", name="A")
>>> tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
>>> with override_kinds(TargetKind("llvm", "cpu", {}), TargetKind("cuda", "cuda", {})):
...     f = PrimFunc([A.data], AttrStmt(tx, "thread_extent", 32, BufferStore(A, A[tx.var] * 2.0, [tx.var])),
...                  buffer_map={A.data: A}, attrs={"target": Target("cuda", host="llvm")})
...     mod = SplitHostDevice()(IRModule({"double": f}))
>>> print(mod["double"].body)
@double_kernel0(A, 32)
>>> [p.name for p in mod["double_kernel0"].params], mod["double_kernel0"].attrs["thread_extents"]
(['A', 'threadIdx.x'], {'threadIdx.x': 32})
"""

from __future__ import annotations

from typing import Any

from ..errors import LoomError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.function import GlobalVar, IRModule, PrimFunc
from ..ir.functor import Mutator
from ..ir.structural import structural_equal
from ..target import CompilationConfig, Target
from ._util import uses_vars
from ._util2 import free_vars, is_thread_attr
from .pass_base import Pass, PassContext, module_pass

__all__ = ["SplitHostDevice", "split_host_device", "DEVICE_TARGET_ATTR"]

_CPU = 1


class _Launch(Mutator):
    """Collects a kernel's thread tags and swaps symbolic extents for launch parameters."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.params: dict[str, E.Var] = {}
        self.extents: dict[str, E.PrimExpr] = {}
        self.inner: list[E.Var] = []  # thread vars bound so far (extents must not use them)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if not is_thread_attr(s, ("thread_extent",)):
            return self.generic_visit(s)
        tag = s.node.thread_tag or s.node.var.name
        if uses_vars(s.value, self.inner):
            raise LoomError(f"kernel {self.kernel}: the extent {s.value} of {tag} depends on another thread index; "
                            "launch extents must be computable on the host")
        if tag not in self.extents:
            self.extents[tag] = s.value
            self.params[tag] = E.Var(tag, s.value.dtype)
        elif not structural_equal(self.extents[tag], s.value):
            raise LoomError(f"kernel {self.kernel}: {tag} is launched with extent {self.extents[tag]} and {s.value}; "
                            "one kernel needs one extent per thread tag")
        self.inner.append(s.node.var)
        body = self.visit(s.body)
        value = s.value if isinstance(s.value, E.IntImm) else self.params[tag]
        return s.with_(value=value, body=body)


class _Splitter(Mutator):
    def __init__(self, name: str, func: PrimFunc, device: Target) -> None:
        self.name, self.func, self.device = name, func, device
        self.kernels: dict[str, PrimFunc] = {}

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if not is_thread_attr(s, ("thread_extent",)):
            return self.generic_visit(s)
        kname = f"{self.name}_kernel{len(self.kernels)}"
        launch = _Launch(kname)
        body = launch.visit(s)
        launch_vars = {id(v) for v in launch.params.values()}
        used = [v for v in free_vars(body) if id(v) not in launch_vars]
        # Parameters of the host function keep their order; other variables follow in order of use.
        rank = {id(p): k for k, p in enumerate(self.func.params)}
        used.sort(key=lambda v: (not v.dtype.is_handle, rank.get(id(v), len(rank))))
        attrs = {
            "target": self.device, "calling_conv": "device_kernel", "global_symbol": kname,
            "thread_extents": dict(launch.extents), "tir.kernel_launch_params": tuple(launch.params),
        }
        if "tir.noalias" in self.func.attrs:
            attrs["tir.noalias"] = self.func.attrs["tir.noalias"]
        args = used
        self.kernels[kname] = PrimFunc([*args, *launch.params.values()], body, attrs=attrs)
        return S.Evaluate(E.Call("int32", GlobalVar(kname), [*args, *launch.extents.values()]))


def _host_of(target: Target) -> Target:
    return target.host if target.host is not None else CompilationConfig(None, [target]).host_target


#: ``PrimFunc.attrs`` key of a host function made from a device function: the device's Target.
DEVICE_TARGET_ATTR = "loom.device_target"


def split_host_device(func: PrimFunc, name: str = "main") -> tuple[PrimFunc, dict[str, PrimFunc]]:
    """The host function and its kernels ``{name: PrimFunc}`` (not a device function: ``func`` unchanged)."""
    target = func.attrs.get("target")
    if not isinstance(target, Target) or target.device_type == _CPU:
        return func, {}
    splitter = _Splitter(str(func.attrs.get("global_symbol", name)), func, target)
    body = splitter.visit(func.body)
    attrs = {**func.attrs, "target": _host_of(target), DEVICE_TARGET_ATTR: target}
    return func.with_(body=body, attrs=attrs), splitter.kernels


def SplitHostDevice() -> Pass:  # noqa: N802 - classic factory name
    """The module pass: :func:`split_host_device` on every PrimFunc, kernels added to the module."""

    def run(mod: IRModule, ctx: PassContext) -> IRModule:
        funcs: dict[str, Any] = {}
        changed = False
        for name, f in mod.functions.items():
            if not isinstance(f, PrimFunc):
                funcs[name] = f
                continue
            host, kernels = split_host_device(f, name)
            changed |= host is not f or bool(kernels)
            funcs[name] = host
            for kname, k in kernels.items():
                if kname in mod.functions or kname in funcs:
                    raise LoomError(f"SplitHostDevice: kernel name {kname!r} is already a function of the module")
                funcs[kname] = k
        return mod.with_(functions=funcs) if changed else mod

    return module_pass(run, name="SplitHostDevice")
