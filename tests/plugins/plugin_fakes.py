"""Fake entry points and plugin modules for the in-process plugin-manager tests."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from loom.plugins import hookimpl


class FakeDist:
    """The slice of ``importlib.metadata.Distribution`` the loader reads."""

    def __init__(self, name: str, version: str) -> None:
        self.metadata = {"Name": name}
        self.version = version


class FakeEntryPoint:
    """An entry point whose ``load()`` returns ``obj`` or raises what ``obj`` raises."""

    def __init__(self, name: str, obj: Any, dist: FakeDist | None = None,
                 group: str = "loom") -> None:
        self.name, self.group, self.dist, self._obj = name, group, dist, obj
        self.value = getattr(obj, "__name__", name)

    def load(self) -> Any:
        if isinstance(self._obj, BaseException):
            raise self._obj
        return self._obj


def kind_plugin(module_name: str, *kind_names: str, device: str = "cpu") -> types.ModuleType:
    """A plugin module contributing one target kind per name."""

    def loom_target_kinds() -> list[Any]:
        from loom.target import AttrSpec, TargetKind

        return [TargetKind(n, device, {"lanes": AttrSpec(int, 4)}, default_keys=(n,))
                for n in kind_names]

    return module_with(module_name, loom_target_kinds=hookimpl(loom_target_kinds))


def module_with(module_name: str, **functions: Callable[..., Any]) -> types.ModuleType:
    mod = types.ModuleType(module_name)
    for name, fn in functions.items():
        setattr(mod, name, fn)
    return mod


def entry_points_returning(*eps: FakeEntryPoint) -> Callable[..., list[FakeEntryPoint]]:
    """A stand-in for ``importlib.metadata.entry_points`` that records its calls."""

    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        entry_points.calls.append(group)  # type: ignore[attr-defined]
        return [ep for ep in eps if ep.group == group]

    entry_points.calls = []  # type: ignore[attr-defined]
    return entry_points
