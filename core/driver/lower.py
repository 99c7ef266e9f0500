"""``loom.lower``: a schedule (or a PrimFunc / IRModule) through the classic phases.

The order, with the slots where user and plugin passes run (see ``pipeline.py``)::

    schedule_to_stmt -> PrimFunc (params, buffer_map, tensor_binds)
    phase 0:                                              + plugin/user phase-0 passes
    phase 1: InjectPrefetch, StorageFlatten, CanonicalSimplify + plugin/user phase-1 passes
    phase 2: LoopPartition, VectorizeLoop, InjectVirtualThread, InjectDoubleBuffer,
             StorageRewrite, UnrollLoop                   + plugin/user phase-2 passes
    phase 3: Simplify, RemoveNoOp, RewriteUnsafeSelect    + plugin/user phase-3 passes
    MakeAPI

Plugin passes come from the ``loom_lower_passes(target, phase)`` hook and are asked
for only when a target is known: inside ``loom.build`` or under ``with Target(...)``.
A plugin places them after the phase's built-in passes (a list), or before and/or
after them (``{"before": [...], "after": [...]}``); user passes run last.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from ..errors import LoomError, LoomTypeError, LoomValueError, PluginError
from ..ir.buffer import Buffer, decl_buffer
from ..ir.container import Map
from ..ir.expr import Var
from ..ir.function import IRModule, PrimFunc
from ..ir.recursion import deep_recursion
from ..ir.stmt import Stmt
from ..target import Target
from ..transform.instrument import DumpIR, env_instruments, extend_context
from ..transform.pass_base import Pass, PassContext, PassInfo, PrimFuncPass
from ..ir.functor import Mutator
from ..target.target import target_key
from ..transform.split_devices import DEVICE_SCOPE, PARAM_DEVICES_ATTR
from . import pipeline
from .build_config import MAX_PHASE, check_lower_passes
from .device_plan import DevicePlan, is_heterogeneous, plan_devices, resolve_config

if TYPE_CHECKING:
    from ..te.tensor import Tensor

__all__ = [
    "lower", "lower_with_target", "get_binds", "form_prim_func", "as_pass", "phase_passes", "run_passes",
    "driver_context",
]

_log = logging.getLogger(__name__)


def as_pass(fn: Any, where: str = "add_lower_pass") -> Pass:
    """``fn`` as a Pass: a Pass stays itself; a ``Stmt -> Stmt`` callable is applied to every body."""
    if isinstance(fn, Pass):
        return fn
    if not callable(fn):
        raise LoomTypeError(f"{where}: expected a Pass or a Stmt -> Stmt callable, got {type(fn).__name__}")
    name = getattr(fn, "__name__", type(fn).__name__)

    def apply(func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        body = fn(func.body)
        if not isinstance(body, Stmt):
            raise LoomTypeError(f"{where}: the Stmt -> Stmt pass {name} returned a {type(body).__name__}, not a Stmt")
        return func if body is func.body else func.with_body(body)

    return PrimFuncPass(apply, PassInfo(name))


def _tensor_type() -> type[Tensor]:
    from ..te.tensor import Tensor

    return Tensor


def get_binds(args: Sequence[Any], binds: Mapping[Any, Buffer] | None = None,
              ctx: PassContext | None = None) -> tuple[dict[Any, Buffer], list[Buffer | Var]]:
    """Bind every Tensor argument to a Buffer.

    Returns ``(binds, arg_list)``: ``binds`` maps each bound Tensor (the user's
    ``binds`` plus the arguments) to its Buffer; ``arg_list`` holds, per argument,
    its Buffer or the Var itself.  A Tensor without a user bind gets a fresh
    compact buffer with the context's ``data_alignment`` and ``offset_factor``.
    """
    ctx = ctx or PassContext.current()
    tensor_t = _tensor_type()
    out: dict[Any, Buffer] = {}
    for t, b in (binds or {}).items():
        if not isinstance(t, tensor_t) or not isinstance(b, Buffer):
            raise LoomTypeError(f"binds maps Tensors to Buffers, got {type(t).__name__} -> {type(b).__name__}")
        out[t] = b
    arg_list: list[Buffer | Var] = []
    seen: set[int] = set()
    for k, a in enumerate(args):
        if id(a) in seen:
            raise LoomValueError(f"argument {k} ({_describe(a)}) is given twice in the argument list")
        seen.add(id(a))
        if isinstance(a, tensor_t):
            buf = out.get(a)
            if buf is None:
                buf = out[a] = decl_buffer(a.shape, a.dtype, a.name,
                                           data_alignment=ctx.get_config("tir.data_alignment"),
                                           offset_factor=ctx.get_config("tir.offset_factor"))
            arg_list.append(buf)
        elif isinstance(a, (Buffer, Var)):
            arg_list.append(a)
        else:
            raise LoomTypeError(f"argument {k} must be a Tensor, Buffer or Var, got {type(a).__name__}")
    return out, arg_list


def _describe(a: Any) -> str:
    return f"{type(a).__name__} {getattr(a, 'name', '')}".strip()


def form_prim_func(body: Stmt, args: Sequence[Any], name: str, binds: Mapping[Any, Buffer] | None = None,
                   ctx: PassContext | None = None, plan: DevicePlan | None = None) -> PrimFunc:
    """The PrimFunc of a scheduled body: parameters, buffer_map and the ``tensor_binds`` attribute.

    With a device ``plan`` (a heterogeneous schedule) ``attrs[PARAM_DEVICES_ATTR]`` says
    where each argument lives.
    """
    ctx = ctx or PassContext.current()
    tensor_binds, arg_list = get_binds(args, binds, ctx)
    params: list[Var] = []
    buffer_map: dict[Var, Buffer] = {}
    for a in arg_list:
        if isinstance(a, Buffer):
            if a.data in buffer_map:
                raise LoomValueError(f"buffer {a.name} is bound to two arguments of {name}")
            params.append(a.data)
            buffer_map[a.data] = a
        else:
            params.append(a)
    attrs = {"global_symbol": name, "tir.noalias": bool(ctx.get_config("tir.restricted_func")),
             "tensor_binds": Map(tensor_binds)}
    if plan is not None:
        attrs[PARAM_DEVICES_ATTR] = tuple(plan.argument(a) if not isinstance(a, Var) else None for a in args)
    return PrimFunc(params, body, buffer_map=buffer_map, attrs=attrs)


_PLACES = ("before", "after")


def _plugin_passes(target: Target | None, phase: int) -> dict[str, list[Pass]]:
    """Plugin passes of ``phase``, by place: ``{"before": [...], "after": [...]}`` the built-in passes."""
    out: dict[str, list[Pass]] = {place: [] for place in _PLACES}
    if target is None:
        return out
    from ..plugins import get_plugin_manager

    hook = get_plugin_manager().hook.loom_lower_passes
    for impl in reversed(hook.get_hookimpls()):  # registration order
        try:
            contributed = impl.function(target=target, phase=phase)
        except LoomError:
            raise
        except Exception as err:  # noqa: BLE001 - a plugin's bug, named
            raise PluginError(f"plugin {impl.plugin_name!r}: loom_lower_passes(phase={phase}) raised "
                              f"{type(err).__name__}: {err}") from err
        if contributed is None:
            continue
        where = f"plugin {impl.plugin_name!r}: loom_lower_passes(phase={phase})"
        if isinstance(contributed, dict):
            unknown = sorted(set(contributed) - set(_PLACES))
            if unknown:
                raise PluginError(f"{where} returned places {unknown}; expected 'before' and/or 'after'")
            placed = contributed
        elif isinstance(contributed, (list, tuple)):
            placed = {"after": contributed}
        else:
            raise PluginError(f"{where} returned a {type(contributed).__name__}; expected a list of passes, "
                              "a dict {'before': [...], 'after': [...]}, or None")
        for place, passes in placed.items():
            if not isinstance(passes, (list, tuple)):
                raise PluginError(f"{where}: {place!r} must be a list of passes, got {type(passes).__name__}")
            out[place] += [_PluginPass(as_pass(p, where), impl.plugin_name, phase) for p in passes]
    return out


class _PluginPass(Pass):
    """A pass a plugin contributed: an error that is not a LoomError becomes a PluginError naming the plugin."""

    def __init__(self, inner: Pass, plugin: str, phase: int) -> None:
        self.inner, self.plugin, self.phase = inner, plugin, phase
        self.info = inner.info  # same name: disabled_pass / required_pass still apply

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        try:
            return self.inner.transform(mod, ctx)
        except LoomError:
            raise
        except Exception as err:  # noqa: BLE001 - a plugin's bug, named
            wrapped = PluginError(f"pass {self.info.name} of plugin {self.plugin!r} (loom_lower_passes, phase "
                                  f"{self.phase}) failed: {type(err).__name__}: {err}")
            wrapped.pass_name = self.info.name  # type: ignore[attr-defined]  # named already
            raise wrapped from err


class _InRegions(Pass):
    """A plugin pass for ``target`` applied to the device regions of that target only (heterogeneous lowering)."""

    def __init__(self, inner: Pass, target: Target) -> None:
        self.inner, self.target, self.info = inner, target, inner.info
        self.key = target_key(target.without_host())

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        funcs = {name: _RegionRewriter(self, name, f, ctx).visit_func() if isinstance(f, PrimFunc) else f
                 for name, f in mod.functions.items()}
        return mod.with_(functions=funcs)


class _RegionRewriter(Mutator):
    def __init__(self, owner: _InRegions, name: str, func: PrimFunc, ctx: PassContext) -> None:
        self.owner, self.name, self.func, self.ctx = owner, name, func, ctx

    def visit_func(self) -> PrimFunc:
        body = self.visit(self.func.body)
        return self.func if body is self.func.body else self.func.with_body(body)

    def visit_AttrStmt(self, s: Any) -> Any:
        if s.attr_key != DEVICE_SCOPE or s.node.target is None or \
                target_key(s.node.target.without_host()) != self.owner.key:
            return self.generic_visit(s)
        region = self.func.with_(body=s.body, attrs={**self.func.attrs, "target": s.node.target})
        out = self.owner.inner.transform(IRModule({self.name: region}), self.ctx)[self.name]
        if not isinstance(out, PrimFunc):
            raise PluginError(f"pass {self.owner.info.name} replaced function {self.name} with a {type(out).__name__}")
        return s.with_(body=out.body)


def _user_passes(ctx: PassContext) -> list[list[Pass]]:
    by_phase: list[list[Pass]] = [[] for _ in range(MAX_PHASE + 1)]
    for phase, fn in check_lower_passes(ctx.get_config("tir.add_lower_pass")):
        by_phase[phase].append(as_pass(fn))
    return by_phase


def phase_passes(target: Target | None = None, simple_mode: bool = False,
                 ctx: PassContext | None = None, plan: DevicePlan | None = None) -> list[Pass]:
    """Every pass ``lower`` runs after forming the PrimFunc, in order.

    With a device ``plan`` each target's plugin passes run on its stages only,
    and SplitDevices makes a function of each stage at the end.
    """
    ctx = ctx or PassContext.current()
    skip = pipeline.SIMPLE_MODE_SKIPS if simple_mode else frozenset()
    user = _user_passes(ctx)
    passes: list[Pass] = []
    for phase, builtin in enumerate(pipeline.PHASES):
        plugin = _plugin_passes(target, phase) if plan is None else _region_passes(plan, phase)
        passes += plugin["before"]
        passes += pipeline.instantiate(builtin, skip)
        passes += plugin["after"]
        passes += user[phase]
    passes += pipeline.instantiate(pipeline.API, skip)
    if plan is not None:
        passes += pipeline.instantiate(pipeline.DEVICE_SPLIT)
    return passes


def _region_passes(plan: DevicePlan, phase: int) -> dict[str, list[Pass]]:
    out: dict[str, list[Pass]] = {place: [] for place in _PLACES}
    targets = {target_key(vd.target.without_host()): vd.target for vd in plan.devices.values() if vd.target is not None}
    for t in targets.values():
        for place, passes in _plugin_passes(t, phase).items():
            out[place] += [_InRegions(p, t) for p in passes]
    return out


@contextlib.contextmanager
def driver_context(ctx: PassContext | None = None) -> Iterator[PassContext]:
    """The current context plus the driver's instruments (env knobs, dump_pass_ir), entered once.

    Nested uses (``lower`` inside ``build``) share the outer one, so dump_pass_ir
    numbers every pass of a build in one sequence.
    """
    ctx = ctx or PassContext.current()
    if getattr(ctx, "_loom_driver", False):
        yield ctx
        return
    extra = env_instruments()
    if ctx.get_config("tir.dump_pass_ir"):
        extra.append(DumpIR(ctx.get_config("tir.dump_pass_ir_dir")))
    if not extra:
        yield ctx
        return
    with extend_context(extra, ctx) as inner:
        inner._loom_driver = True  # type: ignore[attr-defined]
        yield inner


def run_passes(mod: IRModule, passes: Sequence[Pass]) -> IRModule:
    """Run ``passes`` in order under the current context and the driver's instruments."""
    with driver_context():
        for p in passes:
            mod = p(mod)
    return mod


def _as_module(func: IRModule | PrimFunc, name: str) -> IRModule:
    if isinstance(func, IRModule):
        return func
    symbol = func.attrs.get("global_symbol")
    if symbol is None:
        func = func.with_attr("global_symbol", name)
    return IRModule({str(symbol or name): func})


def _schedule_to_stmt(sch: Any, plan: DevicePlan | None) -> Stmt:
    try:
        from ..te.schedule_ops import schedule_to_stmt
    except ModuleNotFoundError as err:
        raise LoomError(f"lowering a schedule needs loom.te.schedule_ops, which is not installed ({err})") from None
    return schedule_to_stmt(sch, None if plan is None else plan.devices)


def lower_with_target(sch: Any, args: Sequence[Any] | None, name: str, binds: Mapping[Any, Buffer] | None,
                      simple_mode: bool, target: Target | None, plan: DevicePlan | None = None) -> IRModule:
    """:func:`lower` with the target whose plugins contribute passes given explicitly.

    A device ``plan`` (:func:`loom.driver.device_plan.plan_devices`) lowers a
    heterogeneous schedule: a host function plus one function per stage.
    """
    if not isinstance(name, str) or not name:
        raise LoomValueError(f"the function name must be a non-empty str, got {name!r}")
    ctx = PassContext.current()
    from ..te.schedule import Schedule

    if isinstance(sch, (IRModule, PrimFunc)):
        mod = _as_module(sch, name)
    else:
        if not isinstance(sch, Schedule):
            raise LoomTypeError(f"lower expects a Schedule (loom.create_schedule), a PrimFunc or an IRModule, "
                                f"got {type(sch).__name__}")
        if args is None:
            raise LoomValueError("lowering a schedule needs args: the Tensors, Buffers and Vars "
                                 "the function takes, in order")
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            raise LoomTypeError(f"args must be a list of Tensor, Buffer or Var, got {type(args).__name__}")
        start = time.perf_counter()
        func = form_prim_func(_schedule_to_stmt(sch, plan), args, name, binds, ctx, plan)
        mod = IRModule({name: func})
        _log.debug("lower %s: schedule to PrimFunc in %.3f ms", name, (time.perf_counter() - start) * 1e3)
    start = time.perf_counter()
    passes = phase_passes(target, simple_mode, ctx, plan if isinstance(sch, Schedule) else None)
    mod = run_passes(mod, passes)
    _log.debug("lower %s: %d passes in %.3f ms", name, len(passes), (time.perf_counter() - start) * 1e3)
    return mod


def lower(sch: Any, args: Sequence[Any] | None = None, name: str = "default_function",
          binds: Mapping[Any, Buffer] | None = None, simple_mode: bool = False) -> IRModule:
    """Lower a schedule into an :class:`~loom.ir.IRModule` holding one PrimFunc ``name``.

    :param sch: a Schedule, or a PrimFunc / IRModule (then the pipeline runs from
        phase 0's user passes and StorageFlatten on; ``args`` and ``binds`` are not used).
    :param args: the function's arguments in order: Tensors, Buffers or Vars.
    :param name: the function's name and ``global_symbol``.
    :param binds: ``{Tensor: Buffer}`` layouts; other Tensor arguments get fresh compact
        buffers (``data_alignment`` and ``offset_factor`` from ``build_config``).
    :param simple_mode: skip LoopPartition, UnrollLoop and MakeAPI (seed 003), giving
        compact, readable IR.  The result is an IRModule in every mode; ``str(mod)``
        (or ``str(mod[name].body)``) shows the readable body.

    User passes come from ``build_config(add_lower_pass=[(phase, pass)])``.

    >>> import loom
    >>> from loom.driver import build_config
    >>> from loom.te.operation import compute, placeholder
    >>> from loom.te.schedule import create_schedule
    >>> A = placeholder((8,), "float32", name="A")
    >>> B = compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> s = create_schedule(B.op)
    >>> xo, xi = s[B].split(B.op.axis[0], factor=4)
    >>> with build_config(auto_unroll_max_step=4):
    ...     mod = lower(s, [A, B], name="double")
    >>> print(mod["double"].body)
    for i.outer in range(2):
        B[i.outer * 4] = A[i.outer * 4] * 2.0
        B[i.outer * 4 + 1] = A[i.outer * 4 + 1] * 2.0
        B[i.outer * 4 + 2] = A[i.outer * 4 + 2] * 2.0
        B[i.outer * 4 + 3] = A[i.outer * 4 + 3] * 2.0
    """
    with deep_recursion("lower"):
        target, plan = Target.current(), None
        if is_heterogeneous(sch, None):
            plan = plan_devices(sch, resolve_config(sch, None, None))
            target = plan.config.host_target
        return lower_with_target(sch, args, name, binds, simple_mode, target, plan)
