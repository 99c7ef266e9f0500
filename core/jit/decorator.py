"""``@loom.jit``: a kernel compiled on its first call for each cache key, then reused.

>>> import numpy as np
>>> import loom
>>> import loom.language as T
>>> @loom.jit(target="interp")
... def axpy(X: T.Tensor[("N",), "float32"], Y: T.Tensor[("N",), "float32"], a: float):
...     for i in T.serial(X.shape[0]):
...         Y[i] = Y[i] + a * X[i]
>>> y = np.ones(4, "float32")
>>> axpy(np.arange(4, dtype="float32"), y, 2.0); y
array([1., 3., 5., 7.], dtype=float32)
>>> axpy(np.arange(8, dtype="float32"), np.ones(8, "float32"), 2.0)   # N is dynamic: no recompile
>>> info = axpy.cache_info(); (info.misses, info.hits)
(1, 1)
"""

from __future__ import annotations

import dataclasses
import inspect
import operator
import threading
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from ..errors import LoomTypeError
from ..hybrid.errors import HybridSyntaxError, Source
from ..language import FuncAnnot
from ..target import Target
from ..target.devices import device_type_name
from . import key as K
from .cache import JIT_FORMAT, backend_identity, fetch_module

__all__ = ["jit", "JITKernel", "CompiledKernel"]


_TARGET_TEXTS: dict[int, tuple[Target, str]] = {}
_DEFAULT_TARGET: list[str] = []


def _default_target_text() -> str:
    """The default host target's text (llvm, c or interp, whichever is installed first), found once."""
    if not _DEFAULT_TARGET:
        from ..target.compilation_config import _default_host

        _DEFAULT_TARGET.append(str(_default_host()))
    return _DEFAULT_TARGET[0]


def _closure_values(func: Any) -> dict[str, Any]:
    """The enclosing function's variables ``func`` reads, by name (cells not yet assigned are left out)."""
    out = {}
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            continue
    return out


class CompiledKernel:
    """One compiled specialization: the module, and which arguments of a call it takes."""

    __slots__ = ("module", "function", "call", "arg_names", "from_disk", "seconds")

    def __init__(self, module: Any, arg_index: Sequence[int], arg_names: Sequence[str], from_disk: bool,
                 seconds: float) -> None:
        self.module, self.arg_names, self.from_disk, self.seconds = module, tuple(arg_names), from_disk, seconds
        fn = self.function = module.get_function(module.entry_name, query_imports=True)
        if len(arg_index) >= 2:
            pick = operator.itemgetter(*arg_index)
            self.call: Callable[[Sequence[Any]], Any] = lambda values: fn(*pick(values))
        elif len(arg_index) == 1:
            (only,) = arg_index
            self.call = lambda values: fn(values[only])
        else:
            self.call = lambda values: fn()


class JITKernel:
    """A function decorated with :func:`jit`.  Call it like the function; see :func:`jit`."""

    def __init__(self, func: Callable[..., Any], target: Any = None, pass_configs: Optional[Mapping[str, Any]] = None,
                 disk_cache: bool = True, name: Optional[str] = None) -> None:
        if not inspect.isfunction(func):
            raise LoomTypeError(f"loom.jit decorates a Python function, got {type(func).__name__}")
        self.func = func
        self.__name__ = self.kernel_name = name or func.__name__
        self.__qualname__, self.__doc__, self.__module__ = func.__qualname__, func.__doc__, func.__module__
        self.__wrapped__ = func
        self.target = Target(target) if target is not None and not isinstance(target, Target) else target
        self.pass_configs = dict(pass_configs or {})
        self.disk_cache = disk_cache
        try:
            # String annotations (``from __future__ import annotations``) may name the enclosing function's locals.
            annotations = inspect.get_annotations(func, locals=_closure_values(func), eval_str=True)
        except Exception as err:  # noqa: BLE001 - a string annotation that does not evaluate
            raise LoomTypeError(f"loom.jit kernel {self.kernel_name}: cannot evaluate its annotations ({err})") \
                from None
        try:
            self.annot = FuncAnnot.from_sig_annots(inspect.signature(func), annotations)
        except LoomTypeError as err:
            raise LoomTypeError(f"loom.jit kernel {self.kernel_name}: {err}") from None
        self._names = self.annot.arg_names
        self._parsers = self.annot.parsers
        self._defaults = self.annot.defaults
        empty = [k for k, d in enumerate(self._defaults) if d is inspect.Parameter.empty]
        self._first_default = empty[-1] + 1 if empty else 0  # positional calls of at least this many fill defaults
        self._plans: dict[tuple, tuple] = {}
        self._captures = K.Captures(func)
        self._source: Optional[Source] = None
        self._fdef: Any = None
        self._cache: dict[tuple, CompiledKernel] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()
        self._hits = self._misses = self._compiles = self._disk_loads = 0

    def __repr__(self) -> str:
        return f"<loom.jit kernel {self.__qualname__}>"

    # -- the key ------------------------------------------------------------------------------------
    def _values(self, args: tuple, kwargs: dict) -> tuple:
        """The arguments in parameter order with defaults filled in (defaults are part of the key)."""
        if not kwargs:
            if len(args) == len(self._names):
                return args
            if self._first_default <= len(args) < len(self._names):
                return args + self._defaults[len(args):]
            return self.annot.bind(args, kwargs, self.kernel_name)  # raises the TypeError of a bad call
        plan = self._plans.get((len(args), tuple(kwargs)))
        if plan is None:
            plan = self._plan(len(args), tuple(kwargs))
        return tuple([args[x] if src == 0 else kwargs[x] if src == 1 else x for src, x in plan])

    def _plan(self, nargs: int, names: tuple) -> tuple:
        """Where each parameter's value comes from in calls with ``nargs`` positional arguments and keywords
        ``names`` (checked once by ``inspect``; binding every call through it would cost microseconds)."""
        self.annot.bind(tuple(range(nargs)), dict.fromkeys(names), self.kernel_name)  # a bad call raises here
        plan = []
        for k, (pname, default) in enumerate(zip(self._names, self._defaults)):
            plan.append((1, pname) if pname in names else (0, k) if k < nargs else (2, default))
        self._plans[(nargs, names)] = found = tuple(plan)
        return found

    def _target_text(self) -> str:
        """The text of the target this call compiles for (printing a Target is slow: remembered per object)."""
        t = self.target if self.target is not None else Target.current()
        if t is None:
            return _default_target_text()
        found = _TARGET_TEXTS.get(id(t))
        if found is None or found[0] is not t:
            found = _TARGET_TEXTS[id(t)] = (t, str(t))
            if len(_TARGET_TEXTS) > 64:
                _TARGET_TEXTS.pop(next(iter(_TARGET_TEXTS)))
        return found[1]

    def _key(self, values: tuple) -> tuple:
        try:
            args = tuple([parse(v) for parse, v in zip(self._parsers, values)])
        except LoomTypeError as err:
            raise LoomTypeError(f"loom.jit kernel {self.kernel_name}: {err}") from None
        return (args, self._captures.key(), self._target_text(), K.context_key())

    # -- calls ----------------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        values = self._values(args, kwargs)
        key = self._key(values)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._miss(key, values)
        else:
            self._hits += 1
        return entry.call(values)

    def _miss(self, key: tuple, values: tuple) -> CompiledKernel:
        with self._lock:
            self._misses += 1
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # threads making the same first call compile once; the others wait for it
            entry = self._cache.get(key)
            if entry is None:
                entry = self._compile(key, values)
                self._cache[key] = entry
        return entry

    def _compile(self, key: tuple, values: tuple) -> CompiledKernel:
        from .compiler import build_kernel, kernel_prim_func

        self.annot.check_values(values, f"loom.jit kernel {self.kernel_name}")
        target = Target(key[2])
        start = time.perf_counter()
        compiled: list[bool] = []

        def build() -> Any:
            compiled.append(True)
            func = kernel_prim_func(self.func, self.source, self.fdef, self.annot, values, self.kernel_name)
            return build_kernel(func, target, self.kernel_name, self.pass_configs)

        parts = self._disk_key(key, target) if self.disk_cache else None
        module, from_disk = fetch_module(parts, build, {"kernel": f"{self.__module__}.{self.__qualname__}",
                                                        "key": self._explain(values, key, True).components})
        with self._lock:
            self._compiles += bool(compiled)
            self._disk_loads += from_disk
        names = self.annot.kernel_arg_names(values)
        index = [self._names.index(n) for n in names]
        return CompiledKernel(module, index, names, from_disk, time.perf_counter() - start)

    def _disk_key(self, key: tuple, target: Target) -> Optional[list[str]]:
        import loom

        if not K.disk_safe(key[3]) or not K.disk_safe(K.plain_config(self.pass_configs)):
            return None  # user passes are known by identity only: memory cache only
        return ["loom-jit", str(JIT_FORMAT), loom.__version__, backend_identity(target),
                f"{self.__module__}.{self.__qualname__}", "".join(self.source.lines), repr(self.annot),
                repr(sorted((k, repr(v)) for k, v in self.pass_configs.items())),
                repr(key[0]), repr([K.disk_capture(p) for p in key[1]]), key[2], repr(key[3])]

    # -- source ---------------------------------------------------------------------------------------
    @property
    def source(self) -> Source:
        if self._source is None:
            try:
                found = Source.of(self.func)
            except HybridSyntaxError as err:
                raise HybridSyntaxError(str(err).replace("hybrid function", "loom.jit kernel", 1)
                                        .replace("hybrid functions", "kernels", 1)) from None
            self._source = dataclasses.replace(found, function=f"loom.jit kernel {self.kernel_name}")
        return self._source

    @property
    def fdef(self) -> Any:
        if self._fdef is None:
            self._fdef = self.source.parse()
        return self._fdef

    # -- ahead of time and introspection --------------------------------------------------------------------
    def _entry(self, args: tuple, kwargs: dict) -> CompiledKernel:
        values = self._values(args, kwargs)
        key = self._key(values)
        entry = self._cache.get(key)
        if entry is None:
            return self._miss(key, values)
        self._hits += 1  # counted as a call's lookup is: misses are counted either way
        return entry

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """Compile for these arguments now (or find the cached build); the runtime Module.

        The Module takes the kernel arguments only (tensors and ``T.dyn`` scalars, in order).
        """
        return self._entry(args, kwargs).module

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        """The generated code for these arguments (a device kernel's source when the module has one)."""
        module = self._entry(args, kwargs).module
        for sub in module.imported_modules:
            try:
                return str(sub.get_source())
            except LoomTypeError:
                continue
        return str(module.get_source())

    def get_prim_func(self, *args: Any, **kwargs: Any) -> Any:
        """The kernel's PrimFunc for these arguments, before lowering (nothing is cached)."""
        from .compiler import kernel_prim_func

        values = self._values(args, kwargs)
        self.annot.check_values(values, f"loom.jit kernel {self.kernel_name}")
        return kernel_prim_func(self.func, self.source, self.fdef, self.annot, values, self.kernel_name)

    def explain_key(self, *args: Any, **kwargs: Any) -> K.KeyExplanation:
        """The cache key of a call with these arguments in words, and what differs from the nearest cached one."""
        values = self._values(args, kwargs)
        return self._explain(values, self._key(values), False)

    def _explain(self, values: tuple, key: tuple, for_disk: bool) -> K.KeyExplanation:
        comps = {
            "args": {n: self.annot.describe(n, v, p) for n, v, p in zip(self._names, values, key[0])},
            "captured": self._captures.described(key[1]),
            "target": {"target": f"{key[2]} (device: {device_type_name(Target(key[2]).device_type)})"},
            "config": K.describe_config(key[3]),
        }
        fixed = {"source": f"{self.source.filename}:{self.source.first_line}",
                 "pass_configs": repr(self.pass_configs) if self.pass_configs else "(none)"}
        if for_disk:
            return K.KeyExplanation(self.kernel_name, comps, False, None, fixed)
        cached = list(self._cache)
        hit = key in self._cache
        diffs = None
        if cached and not hit:
            nearest = min(cached, key=lambda other: K.distance(key, other))
            labels = {"args": self._names, "captured": self._captures.names}

            def words(comp: str, k: int, part: Any) -> str:
                if comp == "args":
                    name = self._names[k]
                    return self.annot.describe(name, None, part) if self.annot.annots[name] is not None \
                        else K.describe_inferred(name, part)
                if comp == "captured":
                    return K._show_capture(part)
                return repr(part)

            diffs = K.differences(labels, key, nearest, words)
        return K.KeyExplanation(self.kernel_name, comps, hit, diffs, fixed)

    def cache_info(self) -> K.CacheInfo:
        """``CacheInfo(hits, misses, compiles, disk_loads, size)`` of this kernel in this process."""
        return K.CacheInfo(self._hits, self._misses, self._compiles, self._disk_loads, len(self._cache))

    def cache_clear(self) -> None:
        """Forget the compiled kernels of this process (the disk cache keeps its entries)."""
        with self._lock:
            self._cache.clear()
            self._locks.clear()
            self._hits = self._misses = self._compiles = self._disk_loads = 0


def jit(func: Optional[Callable[..., Any]] = None, *, target: Any = None,
        pass_configs: Optional[Mapping[str, Any]] = None, disk_cache: bool = True,
        name: Optional[str] = None) -> Any:
    """Compile an annotated kernel on first call, per cache key (docs/jit.md).

    The body is written in the hybrid-script language (``loom.language`` spells
    its keywords ``T.serial``, ``T.alloc_shared``...); parameters are read through
    their annotations (:mod:`loom.language.annot`).  Outputs are tensor parameters
    the kernel writes into; the caller allocates them.

    :param target: the target to compile for (default: ``loom.Target.current()`` at
        each call, else the default host target).
    :param pass_configs: ``build_config`` options for this kernel's builds.
    :param disk_cache: keep compiled kernels in the on-disk cache (``LOOM_CACHE=0``
        turns every disk cache off).
    :param name: the kernel's name in the generated code (default: the function's).
    """
    def wrap(f: Callable[..., Any]) -> JITKernel:
        return JITKernel(f, target=target, pass_configs=pass_configs, disk_cache=disk_cache, name=name)

    return wrap(func) if func is not None else wrap
