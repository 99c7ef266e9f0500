"""``loom.build``: lower, split host from device code, and hand each part to its backend.

For every target: lower the input (unless it is already lowered, i.e. its
functions carry ``attrs["loom.api"]``), mark each function with
``attrs["target"]`` unless it has one, and run each function through the build
pipeline of its own target (:mod:`loom.driver.pipeline`):
for a device target split the kernels out (SplitHostDevice), put the host
code's buffers on the device (PlanDeviceMemory), lower cross-thread reductions
(LowerThreadAllreduce) and insert barriers (ThreadSync); for a CPU target do the
same when its backend runs blocks of threads (interp), or lower cross-thread
reductions to accumulations and refuse code that needs barriers when it runs
threads one after another (llvm, c); then lower the intrinsics (LowerIntrin) of every function for
its own target.  Finally each target's functions go through its backend's
stages (:func:`loom.backend.build_module`): the host module imports the others
(``imported_modules``) and :func:`loom.runtime.linking.link` connects its calls to them.

A schedule whose stages are placed on different devices is planned first
(:mod:`loom.driver.device_plan`): it lowers to a host function plus a function
per stage, each with its stage's target (SplitDevices), and the copies between
devices in the host function.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..backend import build_module, get_backend
from ..errors import LoomTypeError, LoomValueError
from ..ir.buffer import Buffer
from ..ir.function import IRModule, PrimFunc
from ..ir.recursion import deep_recursion
from ..runtime.linking import link
from ..target import CompilationConfig, Target
from ..target.compilation_config import _default_host
from ..target.target import target_key
from ..transform.pass_base import PassContext
from ..te.schedule import Schedule
from ..transform.split_devices import REGION_ATTR
from . import build_cache, pipeline
from .device_plan import DevicePlan, is_heterogeneous, plan_devices, resolve_config
from .lower import driver_context, lower_with_target, run_passes

if TYPE_CHECKING:
    from ..runtime.module import Module

__all__ = ["build", "is_lowered"]

_log = logging.getLogger(__name__)


def is_lowered(mod: IRModule) -> bool:
    """True when every PrimFunc of ``mod`` went through MakeAPI already (or was split out of one that did)."""
    funcs = [f for f in mod.functions.values() if isinstance(f, PrimFunc)]
    return bool(funcs) and all(f.attrs.get("loom.api") or REGION_ATTR in f.attrs for f in funcs)


def _lowered(inputs: Any, args: Sequence[Any] | None, name: str, binds: Mapping[Any, Buffer] | None,
             target: Target, plan: DevicePlan | None) -> IRModule:
    if isinstance(inputs, PrimFunc):
        inputs = IRModule({str(inputs.attrs.get("global_symbol", name)): inputs})
    if isinstance(inputs, IRModule) and is_lowered(inputs):
        return inputs
    return lower_with_target(inputs, args, name, binds, False, target, plan)


def _annotate(mod: IRModule, target: Target) -> IRModule:
    """Give ``target`` to every function that has none (a heterogeneous build's stages have their own)."""
    funcs = {k: f.with_attr("target", target) if isinstance(f, PrimFunc) and "target" not in f.attrs else f
             for k, f in mod.functions.items()}
    return mod.with_(functions=funcs)


def _target_pipelines(mod: IRModule, default: Target, host_target: Target) -> IRModule:
    """Each function through the build pipeline of its own target (a device's, or a CPU's)."""
    funcs: dict[str, Any] = {}
    for t, group in _by_target(mod, default).values():
        funcs.update(run_passes(mod.with_(functions=group), _pipeline(t, host_target)).functions)
    return mod.with_(functions=funcs)


def _by_target(mod: IRModule, default: Target) -> dict[Any, tuple[Target, dict[str, Any]]]:
    """The functions of ``mod`` grouped by their ``attrs["target"]`` (by value)."""
    groups: dict[Any, tuple[Target, dict[str, Any]]] = {}
    for k, f in mod.functions.items():
        t = f.attrs.get("target", default) if isinstance(f, PrimFunc) else default
        key = target_key(t.without_host())
        groups.setdefault(key, (t, {}))[1][k] = f
    return groups


def _resolve_targets(inputs: Any, target: Any, target_host: Any) -> tuple[CompilationConfig, list[tuple[Target, Any]]]:
    if not isinstance(inputs, Mapping) and isinstance(target, (CompilationConfig, list, tuple, Mapping)):
        # One target given in a collection (heterogeneous collections are planned, see build()).
        cfg = resolve_config(inputs, target, target_host)
        return cfg, [(cfg.primitive_targets[0], inputs)]
    if isinstance(inputs, Mapping):
        if target is not None:
            raise LoomTypeError("build(): give the targets either as the keys of the inputs dict or as target=, "
                                "not both")
        if not inputs:
            raise LoomTypeError("build(): the inputs dict is empty; map each target to a module")
        items = list(inputs.items())
    else:
        if target is None:
            target = Target.current() or _default_host()
        items = [(target, inputs)]
    raw = [Target(t) if not isinstance(t, Target) else t for t, _ in items]
    if target_host is not None:
        raw = [t.with_host(target_host) for t in raw]
    cfg = CompilationConfig(PassContext.current(), raw)
    # The primitive targets keep the order of ``raw``, each with the one host object.
    return cfg, [(t, m) for t, (_, m) in zip(cfg.primitive_targets, items)]


def build(inputs: Any, args: Sequence[Any] | None = None, target: Any = None, target_host: Any = None,
          name: str = "default_function", binds: Mapping[Any, Buffer] | None = None) -> Module:
    """Build a runtime Module from a schedule, a PrimFunc, an IRModule or ``{target: input}``.

    :param inputs: a Schedule (needs ``args``), a PrimFunc or IRModule (lowered
        unless MakeAPI already ran), a list of those (built into one module, as
        TVM 0.6's ``build([f1, f2])``), or a dict mapping targets to such inputs for
        a heterogeneous build.
    :param args: the arguments when ``inputs`` is a Schedule (see :func:`loom.lower`).
    :param target: a target string or Target; None means ``Target.current()``, else
        the default host target (llvm, c or interp, whichever is installed first).
        For a schedule whose stages run on different devices (``s[T].on_device``),
        a list of targets, a dict ``{kind: target}`` or a
        :class:`~loom.target.CompilationConfig`; the devices are planned as
        docs/heterogeneous.md describes (:mod:`loom.driver.device_plan`).
    :param target_host: the host of a device target (default: chosen by
        :class:`~loom.target.CompilationConfig`).
    :param name: the function's name.
    :param binds: ``{Tensor: Buffer}`` layouts, as for :func:`loom.lower`.
    :return: the host's runtime Module; device modules are in its ``imported_modules``,
        linked to the host's calls.

    An unknown target kind is a :class:`~loom.errors.TargetError` listing the installed
    kinds; a kind no plugin can generate code for is a :class:`~loom.errors.PluginError`.

    >>> import numpy as np
    >>> from loom.te.operation import compute, placeholder
    >>> from loom.te.schedule import create_schedule
    >>> A = placeholder((4,), "float32", name="A")
    >>> B = compute((4,), lambda i: A[i] + 1.0, name="B")
    >>> f = build(create_schedule(B.op), [A, B], target="interp")
    >>> b = np.zeros(4, "float32"); f(np.arange(4, dtype="float32"), b); b
    array([1., 2., 3., 4.], dtype=float32)
    """
    if isinstance(inputs, (list, tuple)):
        inputs = _merged(inputs)
    plan = None
    if isinstance(inputs, Schedule) and is_heterogeneous(inputs, target):
        plan = plan_devices(inputs, resolve_config(inputs, target, target_host))
        cfg, work = plan.config, [(plan.config.host_target, inputs)]
    else:
        cfg, work = _resolve_targets(inputs, target, target_host)
    start = time.perf_counter()
    with driver_context(), deep_recursion("build"):
        # One schedule for one target: a cache hit keyed before lowering skips every stage (build_cache).
        key = None if plan is not None or len(work) != 1 else \
            build_cache.fingerprint(inputs, args, name, binds, work[0][0].without_host(), cfg.host_target)
        built = build_cache.lookup(key) if key is not None else None
        if built is not None:
            _log.debug("build %s: %.3f ms, from the build cache", name, (time.perf_counter() - start) * 1e3)
            return built
        if key is None:
            built = _build(cfg, work, args, name, binds, plan)
        else:
            with build_cache.recording() as notes:
                built = _build(cfg, work, args, name, binds, plan)
            build_cache.store(key, built, notes)
    _log.debug("build %s: %.3f ms in all", name, (time.perf_counter() - start) * 1e3)
    return built


def _pipeline(tgt: Target, host_target: Target) -> list[Any]:
    if tgt.device_type != host_target.device_type:
        return pipeline.instantiate(pipeline.DEVICE_BUILD)
    backend, _ = get_backend(tgt.kind.name)
    return pipeline.instantiate(pipeline.host_build(backend.thread_semantics))


def _merged(items: Sequence[Any]) -> IRModule:
    """TVM 0.6's ``build([f1, f2])``: lowered functions (PrimFuncs or IRModules) built into one module."""
    functions: dict[str, Any] = {}
    for k, item in enumerate(items):
        if isinstance(item, PrimFunc):
            item = IRModule.from_expr(item)
        if not isinstance(item, IRModule):
            raise LoomTypeError(f"build(): a list holds lowered functions (PrimFunc or IRModule, from loom.lower); "
                                f"item {k} is a {type(item).__name__}")
        for fname, func in item.functions.items():
            if fname in functions:
                raise LoomValueError(f"build(): two of the listed functions are named {fname!r}; give loom.lower "
                                     "a name=... for each")
            functions[fname] = func
    return IRModule(functions)


def _build(cfg: CompilationConfig, work: list[tuple[Target, Any]], args: Sequence[Any] | None, name: str,
           binds: Mapping[Any, Buffer] | None, plan: DevicePlan | None = None) -> Module:
    host_target = cfg.host_target
    parts: dict[Any, tuple[Target, dict[str, Any]]] = {}
    names: dict[str, Target] = {}  # function names are global across the whole build
    for tgt, item in work:
        start = time.perf_counter()
        with tgt:
            mod = _annotate(_lowered(item, args, name, binds, tgt, plan), tgt)
            mod = _target_pipelines(mod, tgt, host_target)
        _log.debug("build %s for %s: lowered and split in %.3f ms", name, tgt.without_host(),
                   (time.perf_counter() - start) * 1e3)
        clash = sorted(set(names) & set(mod.functions))
        if clash:
            raise LoomValueError(f"build(): function(s) {clash} of the input for {tgt.without_host()} are already "
                                 f"defined by the input for {names[clash[0]].without_host()}; rename one of them")
        names.update(dict.fromkeys(mod.functions, tgt))
        for key, (t, funcs) in _by_target(mod, tgt).items():
            parts.setdefault(key, (t, {}))[1].update(funcs)
    host_key = target_key(host_target.without_host())
    built = {key: build_module(IRModule(funcs), t, name if name in funcs else None) for key, (t, funcs) in parts.items()}
    host = built.pop(host_key, None)
    if host is None:
        if len(built) == 1:
            # Only a CPU target with an explicit host of another kind gets here: it runs its code itself.
            [(only, _)] = parts.values()
            _log.warning("build %s: the host %s is not used: the CPU target %s builds and runs all the code",
                         name, host_target, only.without_host())
            return link(next(iter(built.values())))
        host = build_module(IRModule({}), host_target)
    for dev in built.values():
        host.import_module(dev)
    return link(host)
