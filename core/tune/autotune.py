"""``@loom.autotune``: the fastest of a few static-parameter configs of a ``@loom.jit`` kernel, per key.

Triton's and TileLang's autotuner for Loom's JIT.  Each config is a dict of
static-parameter values; ``key`` names the arguments whose values decide which
config is fastest (an array by its dtype and shape, a scalar by its value).  The
first call for a key compiles every config through the JIT, times each on
copies of the array arguments (the caller's arrays are only written by the real
call), remembers the fastest and runs it; later calls with the same key run it
at once.  The choice is also kept on disk (namespace ``autotune`` of Loom's
cache, see :mod:`loom.runtime.disk_cache`), so another process skips the timing.

>>> import numpy as np
>>> import loom
>>> import loom.language as T
>>> from loom.tune.autotune import autotune
>>> @autotune(configs=[{"UNROLL": 1}, {"UNROLL": 4}], key=["A"])
... @loom.jit(target="llvm")
... def double(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"], UNROLL: int = 1):
...     for i in T.serial(A.shape[0] // UNROLL):
...         for j in T.unroll(UNROLL):
...             B[i * UNROLL + j] = A[i * UNROLL + j] * 2.0
>>> a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
>>> double(a, b)                        # times both configs, then runs the faster on a and b
>>> b
array([ 0.,  2.,  4.,  6.,  8., 10., 12., 14.], dtype=float32)
>>> double.best_config(a, b) in double.configs
True
>>> sorted(double.timings["A=float32[8], target=llvm"])
['UNROLL=1', 'UNROLL=4']
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import threading
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from ..errors import LoomError, LoomTypeError, LoomValueError
from ..jit import key as K
from ..jit.cache import backend_identity
from ..jit.decorator import JITKernel, jit
from ..language.annot import DTypeAnnot, Value, _is_dtype_like, static_key
from ..language.arrays import array_facts, is_array
from ..language.dtypes import normalize_dtype
from ..runtime.disk_cache import CacheError, DiskCache
from ..runtime.ndarray import NDArray
from ..target import Target

__all__ = ["autotune", "Autotuner", "AutotuneError", "FORMAT", "NAMESPACE"]

log = logging.getLogger(__name__)

#: Version of the on-disk entry; part of every key.
FORMAT = 1
#: The DiskCache namespace of tuned choices.
NAMESPACE = "autotune"

#: What ``timings`` holds per config: seconds per call, or the error that skipped it.
Timing = Union[float, str]

_warned: set[str] = set()
_EMPTY = inspect.Parameter.empty


class AutotuneError(LoomError):
    """Every config of an autotuned kernel failed for a call's key (the message lists each one's error)."""


def _measure(module: Any, args: Sequence[Any], number: int, repeat: int, min_repeat_ms: float) -> float:
    """Seconds per call of ``module`` on ``args``: the best of ``repeat`` means of ``number`` calls.

    Timed by the module's ``time_evaluator`` (after a warm-up call), on the device
    of its kernels: a GPU's own clock there, so asynchronous launches are counted.
    """
    devices = [module.device, *(m.device for m in module.imported_modules)]
    dev = next((d for d in devices if d.device_type != devices[0].device_type), devices[0])
    evaluate = module.time_evaluator(module.entry_name, dev, number=number, repeat=repeat,
                                     min_repeat_ms=min_repeat_ms)
    return float(evaluate(*args).min)


def _copy_numpy(value: np.ndarray) -> np.ndarray:
    """A copy with the same strides (a kernel annotated with fixed strides must accept it)."""
    if value.flags.c_contiguous or value.size == 0 or any(s <= 0 for s in value.strides):
        return value.copy()
    span = sum((n - 1) * s for n, s in zip(value.shape, value.strides)) + value.itemsize
    out: np.ndarray = np.ndarray(value.shape, value.dtype, buffer=np.empty(span, np.uint8), strides=value.strides)
    out[...] = value
    return out


def _copy_array(value: Any, name: str) -> Any:
    """A copy of an array argument on its device, for the benchmark runs to write into."""
    if isinstance(value, np.ndarray):
        return _copy_numpy(value)
    if isinstance(value, NDArray):
        return value.copyto(value.device)
    for method in ("clone", "copy"):  # torch, then CuPy / JAX / array-API objects
        make = getattr(value, method, None)
        if callable(make):
            return make()
    raise LoomTypeError(f"argument {name}: cannot copy a {type(value).__name__} to benchmark configs on it "
                        f"(pass a numpy array, a loom.nd array, or an array with .clone() or .copy())")


def _key_part(name: str, value: Any) -> tuple:
    """A key argument as a hashable part: an array by dtype and shape, a dtype by name, a scalar by value."""
    if is_array(value):
        dtype, shape = array_facts(value, f"key argument {name}")
        return ("array", dtype, tuple(shape))
    if not isinstance(value, str) and _is_dtype_like(value):
        return ("dtype", str(normalize_dtype(value, f"key argument {name}")))
    try:
        return static_key(value, f"key argument {name}")
    except LoomTypeError:
        raise LoomTypeError(f"key argument {name}: an autotune key is read from arrays (dtype and shape) and "
                            f"scalars (value), got {type(value).__name__}") from None


def _key_words(name: str, value: Any, part: tuple) -> str:
    """A key argument in words: ``A=float32[64, 64]``, ``dt=float16``, ``alpha=2.0``."""
    if part[0] == "array":
        return f"{name}={part[1]}[{', '.join(map(str, part[2]))}]"
    if part[0] == "dtype":
        return f"{name}={part[1]}"
    return f"{name}={value.item() if isinstance(value, np.generic) else value!r}"


def _label(config: Mapping[str, Any]) -> str:
    """A config in words: ``"BLOCK=32, UNROLL=2"`` (how ``timings`` names it)."""
    return ", ".join(f"{k}={v!r}" for k, v in config.items()) or "(defaults)"


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two configs set the same values (1, 1.0 and True differ, as in the JIT's key)."""
    return sorted((n, repr(v)) for n, v in a.items()) == sorted((n, repr(v)) for n, v in b.items())


def _is_static(kernel: JITKernel, name: str) -> bool:
    """Whether parameter ``name`` is compiled in (annotated static or a dtype), or unannotated (inferred)."""
    annot = kernel.annot.annots[name]
    return annot is None or isinstance(annot, DTypeAnnot) or (isinstance(annot, Value) and not annot.is_kernel_arg())


class Autotuner:
    """A ``@loom.jit`` kernel that picks its static parameters by timing ``configs``; see :func:`autotune`.

    :attr:`kernel` is the JIT kernel; attributes it has and this object lacks
    (``compile``, ``cache_info``, ``explain_key``...) are the JIT kernel's.
    """

    def __init__(self, kernel: Any, configs: Sequence[Mapping[str, Any]], key: Union[str, Iterable[str]],
                 number: int = 3, repeat: int = 3, min_repeat_ms: float = 1.0, disk_cache: bool = True) -> None:
        if inspect.isfunction(kernel):
            kernel = jit(kernel)
        if not isinstance(kernel, JITKernel):
            raise LoomTypeError(f"loom.autotune decorates a @loom.jit kernel (or a plain function), got "
                                f"{type(kernel).__name__}")
        self.kernel = kernel
        self.__name__, self.__qualname__ = kernel.__name__, kernel.__qualname__
        self.__doc__, self.__module__, self.__wrapped__ = kernel.__doc__, kernel.__module__, kernel.func
        where = f"loom.autotune of {kernel.kernel_name}"
        for what, count in (("number", number), ("repeat", repeat)):
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise LoomValueError(f"{where}: {what} must be an int >= 1, got {count!r}")
        if not isinstance(min_repeat_ms, (int, float)) or not min_repeat_ms >= 0:
            raise LoomValueError(f"{where}: min_repeat_ms must be a number >= 0, got {min_repeat_ms!r}")
        self.number, self.repeat, self.min_repeat_ms, self.disk_cache = number, repeat, float(min_repeat_ms), disk_cache
        params = kernel.annot.arg_names
        self.configs = self._check_configs(configs, kernel, where)
        self._labels = [_label(c) for c in self.configs]
        names = [key] if isinstance(key, str) else list(key)
        self._tuned = frozenset(n for c in self.configs for n in c)
        for n in names:
            if not isinstance(n, str) or n not in params:
                raise LoomValueError(f"{where}: key names {n!r}, which is not a parameter of {kernel.kernel_name} "
                                     f"(parameters: {', '.join(params)})")
            if n in self._tuned:
                raise LoomValueError(f"{where}: key names {n!r}, which the configs set; the key names the "
                                     f"arguments the best config depends on")
        self.key = tuple(names)
        defaults = kernel.annot.defaults
        self._key_at = tuple((params.index(n), n, defaults[params.index(n)]) for n in self.key)
        self._first_tuned = min(params.index(n) for n in self._tuned) if self._tuned else len(params)
        self._best: dict[tuple, int] = {}
        self._timings: dict[tuple, tuple[str, dict[str, Timing]]] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _check_configs(configs: Any, kernel: JITKernel, where: str) -> list[dict[str, Any]]:
        if isinstance(configs, Mapping) or not isinstance(configs, (list, tuple)) or not configs:
            raise LoomValueError(f"{where}: configs is a non-empty list of dicts of static parameter values, "
                                 f"got {configs!r}")
        params = kernel.annot.arg_names
        static = [n for n in params if _is_static(kernel, n)]
        out: list[dict[str, Any]] = []
        for k, config in enumerate(configs):
            if not isinstance(config, Mapping):
                raise LoomValueError(f"{where}: configs[{k}] is a dict of static parameter values, got {config!r}")
            for name, value in config.items():
                if name not in params:
                    raise LoomValueError(f"{where}: configs[{k}] sets {name!r}, which is not a parameter of "
                                         f"{kernel.kernel_name} (static parameters: {', '.join(static) or 'none'})")
                if name not in static or is_array(value):
                    raise LoomValueError(f"{where}: configs[{k}] sets {name!r}, which is a runtime argument of "
                                         f"{kernel.kernel_name}; configs set static parameters "
                                         f"({', '.join(static) or 'none'})")
            same = [j for j, c in enumerate(out) if _same(c, config)]
            if same:
                raise LoomValueError(f"{where}: configs[{k}] repeats configs[{same[0]}]")
            out.append(dict(config))
        return out

    def __repr__(self) -> str:
        return f"<loom.autotune kernel {self.__qualname__}: {len(self.configs)} configs, key {list(self.key)}>"

    def __getattr__(self, name: str) -> Any:
        if name == "kernel":  # not set yet (a failed __init__): no recursion
            raise AttributeError(name)
        return getattr(self.kernel, name)

    # -- calls ------------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) > self._first_tuned or (kwargs and not self._tuned.isdisjoint(kwargs)):
            return self.kernel(*args, **kwargs)  # tuned parameters given: the caller chose
        return self.kernel(*args, **kwargs, **self.configs[self._choice(args, kwargs)])

    def best_config(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The fastest config for a call with these arguments (timed now if its key is new).

        Pass the arguments of a call without the tuned parameters.
        """
        if len(args) > self._first_tuned or (kwargs and not self._tuned.isdisjoint(kwargs)):
            raise LoomValueError(f"{self.kernel.kernel_name}.best_config: pass a call's arguments without the "
                                 f"tuned parameters ({', '.join(sorted(self._tuned))})")
        return dict(self.configs[self._choice(args, kwargs)])

    @property
    def timings(self) -> dict[str, dict[str, Timing]]:
        """Per key (in words), each config's seconds per call, or the error that skipped it."""
        with self._lock:
            return {words: dict(t) for words, t in self._timings.values()}

    def cache_clear(self) -> None:
        """Forget this process's tuned choices and the JIT kernel's builds (the disk keeps its entries)."""
        with self._lock:
            self._best.clear()
            self._timings.clear()
            self._locks.clear()
        self.kernel.cache_clear()

    def _choice(self, args: tuple, kwargs: dict) -> int:
        """The index of the best config for the call's key: remembered, on disk, or timed now."""
        nargs = len(args)
        values = [args[pos] if pos < nargs else kwargs.get(name, default) for pos, name, default in self._key_at]
        parts = []
        for name, value in zip(self.key, values):
            if type(value) is np.ndarray:  # the common case, first
                parts.append(("array", *array_facts(value, name)))
            elif value is _EMPTY:
                raise LoomTypeError(f"{self.kernel.kernel_name}(): missing the argument {name!r} (it is in the "
                                    f"autotune key)")
            else:
                parts.append(_key_part(name, value))
        key = (tuple(parts), self.kernel._target_text(), K.context_key())
        found = self._best.get(key)
        if found is not None:
            return found
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # threads making the same first call tune once; the others wait for it
            found = self._best.get(key)
            if found is None:
                words = ", ".join([*map(_key_words, self.key, values, parts), f"target={key[1]}"])
                if key[2]:
                    words += ", build_config=" + repr(K.describe_config(key[2]))
                found = self._best[key] = self._resolve(key, words, args, kwargs)
        return found

    # -- tuning ------------------------------------------------------------------------------------
    def _resolve(self, key: tuple, words: str, args: tuple, kwargs: dict) -> int:
        """The best config of a new key: the disk's entry, else timed now (and stored)."""
        try:
            self.kernel.annot.sig.bind(*args, **kwargs, **dict.fromkeys(self._tuned))
        except TypeError as err:
            raise LoomTypeError(f"{self.kernel.kernel_name}(): {err}") from None
        parts = self._disk_parts(key) if self.disk_cache else None
        cache = DiskCache.default(NAMESPACE) if parts is not None else None
        if cache is None:
            return self._tune(key, words, args, kwargs)
        tuned: list[int] = []

        def write(path: str) -> None:
            tuned.append(self._tune(key, words, args, kwargs))
            with open(path, "w", encoding="utf-8") as fh:
                json.dump({"loom_autotune": FORMAT, "kernel": f"{self.__module__}.{self.__qualname__}",
                           "key": words, "configs": self._labels, "best": tuned[-1],
                           "timings": self._timings[key][1]}, fh, sort_keys=True)

        for _ in range(2):
            try:
                data, path = cache.fetch(parts, write)  # type: ignore[arg-type]  # checked above
            except CacheError as err:
                _warn_once(f"{err}; autotuning without the disk cache")
                return tuned[-1] if tuned else self._tune(key, words, args, kwargs)
            if tuned:
                return tuned[-1]
            try:
                return self._load(data, key, words)
            except LoomValueError as err:
                log.warning("autotune cache entry %s cannot be used (%s): timing the configs again", path, err)
                try:
                    cache.discard(parts)  # type: ignore[arg-type]
                except CacheError as discard_err:
                    _warn_once(f"{discard_err}; autotuning without the disk cache")
                    break
        return self._tune(key, words, args, kwargs)

    def _load(self, data: bytes, key: tuple, words: str) -> int:
        """The best config's index from a disk entry (its timings become this key's :attr:`timings`)."""
        try:
            entry = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise LoomValueError("not JSON") from None
        best = entry.get("best") if isinstance(entry, dict) else None
        if not isinstance(best, int) or not 0 <= best < len(self.configs) or entry.get("loom_autotune") != FORMAT \
                or entry.get("configs") != self._labels or not isinstance(entry.get("timings"), dict):
            raise LoomValueError(f"not an autotune entry of format {FORMAT} for these configs")
        with self._lock:
            self._timings[key] = (words, {str(k): v for k, v in entry["timings"].items()})
        log.debug("autotune %s (%s): %s, from the disk cache", self.kernel.kernel_name, words, self._labels[best])
        return best

    def _tune(self, key: tuple, words: str, args: tuple, kwargs: dict) -> int:
        """Compile and time every config on copies of the array arguments; the fastest one's index."""
        timings: dict[str, Timing] = {}
        best, best_seconds = -1, math.inf
        for k, config in enumerate(self.configs):
            copies = [_copy_array(v, n) if is_array(v) else v for n, v in zip(self.kernel.annot.arg_names, args)]
            kw = {n: _copy_array(v, n) if is_array(v) else v for n, v in kwargs.items()}
            try:
                module = self.kernel.compile(*copies, **kw, **config)
                kernel_args = self.kernel.annot.convert_to_kernel_args(*copies, **kw, **config)
                seconds = _measure(module, kernel_args, self.number, self.repeat, self.min_repeat_ms)
            except Exception as err:  # noqa: BLE001 - a config that fails to compile or to run is skipped
                timings[self._labels[k]] = f"{type(err).__name__}: {err}"
                continue
            timings[self._labels[k]] = seconds
            if seconds < best_seconds:
                best, best_seconds = k, seconds
        with self._lock:
            self._timings[key] = (words, timings)
        failed = {label: t for label, t in timings.items() if isinstance(t, str)}
        name = self.kernel.kernel_name
        if best < 0:
            lines = "".join(f"\n  {label}: {why}" for label, why in failed.items())
            raise AutotuneError(f"loom.autotune of {name} ({words}): every config failed:{lines}")
        if failed:
            log.warning("autotune %s (%s): skipped %d of %d configs that failed: %s", name, words, len(failed),
                        len(self.configs), "; ".join(f"{label}: {why}" for label, why in failed.items()))
        log.info("autotune %s (%s): %s is the fastest, %.3g ms per call", name, words, self._labels[best],
                 best_seconds * 1e3)
        return best

    def _disk_parts(self, key: tuple) -> Optional[list[str]]:
        """The disk entry's key material, or None when part of it has no stable text (user passes)."""
        import loom

        kernel = self.kernel
        captured = kernel._captures.key()
        if not K.disk_safe(key[2]) or not K.disk_safe(K.plain_config(kernel.pass_configs)) \
                or not K.disk_safe(captured):
            return None
        configs = [sorted((n, repr(v)) for n, v in c.items()) for c in self.configs]
        return ["loom-autotune", str(FORMAT), loom.__version__, backend_identity(Target(key[1])),
                f"{kernel.__module__}.{kernel.__qualname__}", "".join(kernel.source.lines), repr(kernel.annot),
                repr(sorted((k, repr(v)) for k, v in kernel.pass_configs.items())),
                repr([K.disk_capture(p) for p in captured]), key[1], repr(key[2]), repr(configs),
                repr(list(self.key)), repr(key[0])]


def _warn_once(message: str) -> None:
    (log.debug if message in _warned else log.warning)("%s", message)
    _warned.add(message)


def autotune(configs: Sequence[Mapping[str, Any]], key: Union[str, Iterable[str]], *, number: int = 3,
             repeat: int = 3, min_repeat_ms: float = 1.0, disk_cache: bool = True) -> Callable[[Any], Autotuner]:
    """Pick a ``@loom.jit`` kernel's static parameters by timing ``configs``, per ``key`` (docs/tuning.md).

    :param configs: dicts of static-parameter values (``[{"BLOCK": 32}, {"BLOCK": 64}]``).
    :param key: the parameters whose arguments decide the best config: an array's
        dtype and shape, a scalar's value.  The target and the ``build_config`` in
        effect are part of the key too.
    :param number: calls per measurement.
    :param repeat: measurements per config; the fastest counts.
    :param min_repeat_ms: a measurement lasts at least this long (more calls are made).
    :param disk_cache: keep each key's choice on disk (``LOOM_CACHE=0`` turns it off).

    A call that passes a tuned parameter runs the kernel as called, untuned.
    Configs and key are checked against the kernel's signature when applied:

    >>> import loom
    >>> import loom.language as T
    >>> @loom.jit(target="llvm")
    ... def fill(A: T.Tensor[("N",), "float32"], V: float = 1.0):
    ...     for i in T.serial(A.shape[0]):
    ...         A[i] = V
    >>> autotune(configs=[{"V": 1.0}, {"V": 2.0}], key=["A"])(fill)
    <loom.autotune kernel fill: 2 configs, key ['A']>
    >>> autotune(configs=[{"W": 1.0}], key=["A"])(fill)
    Traceback (most recent call last):
      ...
    loom.errors.LoomValueError: loom.autotune of fill: configs[0] sets 'W', which is not a parameter of fill (static parameters: V)
    """
    def wrap(kernel: Any) -> Autotuner:
        return Autotuner(kernel, configs, key, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                         disk_cache=disk_cache)

    return wrap
