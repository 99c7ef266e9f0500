"""The JIT cache key: everything about a call that changes the generated code.

A key has four components, each a tuple:

* ``args``: one entry per parameter, from its annotation's key parser (static
  values, dtypes, and what a tensor annotation leaves open: dtype, rank, static
  sizes).  Runtime sizes and ``T.dyn`` values are not in it;
* ``captured``: the values the kernel reads from its module and closure (numbers,
  strings, tuples, dtypes, and the hybrid functions it calls, with *their*
  captured values), read at every call, so rebinding a global recompiles;
* ``target``: the target the call compiles for (its device type with it);
* ``config``: the current ``build_config`` options.

The kernel's source, its annotations, its own build options and the Loom and
backend versions are fixed per kernel object: the in-memory cache needs no key
for them, and the on-disk key (:func:`disk_key_parts`) adds them.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional

from ..errors import LoomTypeError
from ..language.annot import DTypeAnnot, TensorAnnot, Value, static_key
from ..transform.pass_base import PassContext

__all__ = ["Captures", "context_key", "KeyExplanation", "COMPONENTS", "describe_config", "describe_inferred"]

#: The key's components, in order.
COMPONENTS = ("args", "captured", "target", "config")

_MAX_DEPTH = 16  # hybrid functions calling hybrid functions


def _cell_getter(cell: Any) -> Callable[[], Any]:
    return lambda: cell.cell_contents


def _global_getter(namespace: dict[str, Any], name: str) -> Callable[[], Any]:
    missing = object()

    def get() -> Any:
        value = namespace.get(name, missing)
        return _Missing if value is missing else value

    return get


class _Missing:
    """A global the kernel names that does not exist (yet)."""


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


class Captures:
    """The values a function reads from its module globals and closure cells, as a key part."""

    def __init__(self, func: Any, depth: int = 0) -> None:
        code = func.__code__
        getters: list[tuple[str, Callable[[], Any]]] = []
        for name, cell in zip(code.co_freevars, func.__closure__ or ()):
            getters.append((name, _cell_getter(cell)))
        namespace = func.__globals__
        for name in sorted(_code_names(code)):
            if name in namespace and name not in code.co_freevars:
                getters.append((name, _global_getter(namespace, name)))
        self.names = tuple(n for n, _ in getters)
        self._getters = tuple(g for _, g in getters)
        self._depth = depth
        self._nested: dict[int, Captures] = {}

    def key(self) -> tuple:
        """The captured values now, one entry per name (see :func:`capture_part`)."""
        return tuple(self._part(g()) for g in self._getters)

    def _part(self, value: Any) -> Any:
        if type(value) is types.ModuleType:  # the common capture (T, np): first
            return ("module", value.__name__)
        if hasattr(value, "__loom_hybrid__") and hasattr(value, "func"):
            if self._depth >= _MAX_DEPTH:
                return ("hybrid", value)
            nested = self._nested.get(id(value))
            if nested is None:
                nested = self._nested[id(value)] = Captures(value.func, self._depth + 1)
            return ("hybrid", value, nested.key())
        if isinstance(value, types.ModuleType):
            return ("module", value.__name__)
        if value is _Missing:
            return ("missing",)
        try:
            return static_key(value)
        except LoomTypeError:
            # Not something a kernel body can read (a function, a class, an object): it cannot change the code.
            return ("object", type(value).__qualname__)

    def described(self, part: tuple) -> dict[str, str]:
        """The captured part of a key in words, by name."""
        return {n: _show_capture(p) for n, p in zip(self.names, part)}


def _show_capture(part: Any) -> str:
    kind = part[0]
    if kind == "hybrid":
        return f"hybrid function {part[1].func.__qualname__}"
    if kind == "module":
        return f"module {part[1]}"
    if kind == "missing":
        return "not defined"
    if kind == "object":
        return f"a {part[1]} (not part of the code)"
    return repr(part[1]) if kind != "tuple" else repr(tuple(p[1] for p in part[1]))


def disk_capture(part: Any) -> str:
    """A captured key part as stable text for the on-disk key (hybrid functions by their source)."""
    from ..hybrid.errors import Source

    if isinstance(part, tuple) and part and part[0] == "hybrid":
        func = part[1].func
        try:
            text = "".join(Source.of(func).lines)
        except Exception:  # noqa: BLE001 - no source: the name only (the memory cache still tells them apart)
            text = func.__qualname__
        nested = part[2] if len(part) > 2 else ()
        return f"hybrid({func.__module__}.{func.__qualname__}, {text!r}, {[disk_capture(p) for p in nested]})"
    return repr(part)


def plain_config(value: Any) -> Any:
    """Build options as nested tuples of plain values; anything else (a user pass) as ``("object", it)``."""
    if isinstance(value, (list, tuple)):
        return tuple(plain_config(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), plain_config(v)) for k, v in value.items()))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return ("object", value)  # a user pass: by identity (the disk cache is skipped, see disk_safe)


def context_key() -> tuple:
    """The current build options as a key part (empty for the default context)."""
    ctx = PassContext.current()
    if not ctx.config and ctx.opt_level == 2 and not ctx.required_pass and not ctx.disabled_pass:
        return ()
    return (ctx.opt_level, tuple(sorted(ctx.required_pass)), tuple(sorted(ctx.disabled_pass)),
            tuple(sorted((k, plain_config(v)) for k, v in ctx.config.items())))


def describe_config(part: tuple) -> dict[str, str]:
    """The config part of a key in words: each build option that differs from the defaults, by name."""
    if not part:
        return {}
    opt_level, required, disabled, config = part
    out = {"opt_level": repr(opt_level)} if opt_level != 2 else {}
    if required:
        out["required_pass"] = repr(list(required))
    if disabled:
        out["disabled_pass"] = repr(list(disabled))
    out.update((name, repr(value)) for name, value in config)
    return out


def describe_inferred(name: str, part: Any) -> str:
    """The key part of an unannotated parameter in words (what its argument was read as)."""
    kind = part[0]
    if kind == "tensor":
        shown = TensorAnnot(name=name).describe_key((part[1], part[2]))
    elif kind == "dtype":
        shown = DTypeAnnot(name).describe_key(part[1])
    elif kind == "var":
        shown = f"runtime {part[1]} scalar (not in the key)"
    else:
        shown = Value("static", name).describe_key(part[1])
    return f"{shown} (inferred: no annotation)"


def disk_safe(part: Any) -> bool:
    """Whether a key part can be written as stable text (no user passes or objects known by identity)."""
    if isinstance(part, tuple):
        if len(part) == 2 and part[0] == "object" and not isinstance(part[1], str):
            return False
        return all(disk_safe(p) for p in part)
    return True


class KeyExplanation:
    """What :meth:`~loom.jit.JITKernel.explain_key` returns: the key in words; it prints as them.

    :attr:`components` maps each component's entries to words; :attr:`hit` says
    whether the key is cached; :attr:`differences` lists, after a miss, what
    differs from the nearest cached entry.
    """

    def __init__(self, kernel: str, components: dict[str, dict[str, str]], hit: bool,
                 differences: Optional[list[str]], fixed: dict[str, str]) -> None:
        self.kernel, self.components, self.hit, self.differences, self.fixed = (
            kernel, components, hit, differences, fixed)

    def __str__(self) -> str:
        lines = [f"cache key of loom.jit kernel {self.kernel}:"]
        titles = {"args": "arguments", "captured": "values read from its scope", "target": "target",
                  "config": "build options"}
        for comp in COMPONENTS:
            entries = self.components.get(comp, {})
            lines.append(f"  {titles[comp]}:" + ("" if entries else " none"))
            lines += [f"    {name}: {words}" for name, words in entries.items()]
        lines.append("  fixed for this kernel: " + "; ".join(f"{k} {v}" for k, v in self.fixed.items()))
        if self.hit:
            lines.append("status: cached (a call with these arguments compiles nothing)")
        elif self.differences is None:
            lines.append("status: not cached; nothing is cached for this kernel yet")
        else:
            lines.append("status: not cached; the nearest cached entry differs in:")
            lines += [f"    {d}" for d in self.differences]
        return "\n".join(lines)

    __repr__ = __str__


def differences(names: Mapping[str, Iterable[str]], key: tuple, other: tuple,
                words: Callable[[str, int, Any], str]) -> list[str]:
    """The entries in which ``key`` and ``other`` differ, in words (``words(component, index, part)``)."""
    out: list[str] = []
    for c, (mine, theirs) in enumerate(zip(key, other)):
        comp = COMPONENTS[c]
        labels = list(names.get(comp, ()))
        if mine == theirs:
            continue
        if comp == "target":
            out.append(f"target: {words(comp, 0, mine)} here, {words(comp, 0, theirs)} cached")
            continue
        if comp == "config":  # one line per build option that differs
            here, there = describe_config(mine), describe_config(theirs)
            out += [f"config {option}: {here.get(option, 'default')} here, {there.get(option, 'default')} cached"
                    for option in dict.fromkeys([*here, *there]) if here.get(option) != there.get(option)]
            continue
        for k, (a, b) in enumerate(zip(mine, theirs)):
            if a != b:
                label = labels[k] if k < len(labels) else str(k)
                out.append(f"{comp} {label}: {words(comp, k, a)} here, {words(comp, k, b)} cached")
    return out


def distance(key: tuple, other: tuple) -> int:
    """How many entries of two keys differ (the nearest cached entry has the fewest)."""
    args, captured, target, config = key
    here, there = describe_config(config), describe_config(other[3])
    return (sum(a != b for a, b in zip(args, other[0])) + sum(a != b for a, b in zip(captured, other[1]))
            + (target != other[2]) + sum(here.get(o) != there.get(o) for o in {*here, *there}))


class CacheInfo(NamedTuple):
    """Counters of a kernel's caches (as ``functools.lru_cache``'s ``cache_info``)."""

    hits: int
    misses: int
    compiles: int
    disk_loads: int
    size: int
