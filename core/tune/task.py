"""Templates and tasks: what is tuned.

A template is a function ``template(cfg, *args) -> (schedule, tensors)`` that
declares knobs on ``cfg`` and applies the entities they take.  Decorated with
:func:`template`, it may also be called with ``cfg=None``: it then uses the
config the innermost :func:`~loom.tune.apply_history_best` context knows for
these arguments (the best logged one), else a :class:`FallbackConfig`.

A :class:`Task` is a template with its arguments and a target: the unit a tuning
run measures and a log keys its lines by.

>>> import loom
>>> from loom import tune
>>> @tune.template
... def scale(cfg, n):
...     A = loom.placeholder((n,), name="A")
...     B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
...     s = loom.create_schedule(B.op)
...     cfg.define_split("split", n, num_outputs=2)
...     cfg["split"].apply(s, B, B.op.axis[0])
...     return s, [A, B]
>>> task = tune.Task(scale, (64,), target="llvm")
>>> task.key, len(task.space)
('scale(64)', 7)
>>> s, args = task.instantiate(task.space.get(3))      # the config splitting off 8 lanes
>>> s, args = scale(None, 64)                           # no log in scope: the fallback config
"""

from __future__ import annotations

import contextvars
import functools
import json
from typing import Any, Callable, Optional, Sequence

from ..errors import LoomValueError
from ..target import Target
from .space import Config, ConfigSpace, FallbackConfig

__all__ = ["template", "Task", "TemplateFunction", "dispatch_config"]

TemplateFunction = Callable[..., tuple[Any, list]]

#: The innermost apply_history_best context: ``lookup(template_name, args, target) -> Config | None``.
_DISPATCH: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar("loom_tune_dispatch", default=())


def template(func: Any = None, *, name: Optional[str] = None) -> Any:
    """Mark ``func(cfg, *args)`` as a tuning template (``@template`` or ``@template(name="gemm_v2")``).

    The name (default: the function's ``__qualname__``) is what logs record, so a
    renamed function keeps its history only when given its old name.
    """
    if isinstance(func, str) and name is None:
        return template(name=func)

    def wrap(f: Callable[..., Any]) -> Any:
        if not callable(f):
            raise LoomValueError(f"loom.tune.template decorates a function, got {f!r}")
        tname = name or f.__qualname__.replace(".<locals>", "")

        @functools.wraps(f)
        def run(cfg: Any, *args: Any, **kwargs: Any) -> Any:
            if cfg is None:
                cfg = dispatch_config(tname, args, kwargs)
            return f(cfg, *args, **kwargs)

        run.template_name = tname  # type: ignore[attr-defined]
        return run

    return wrap(func) if func is not None else wrap


def template_name(func: Any) -> str:
    name = getattr(func, "template_name", None)
    if isinstance(name, str):
        return name
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    if not qual:
        raise LoomValueError(f"a tuning template must be a function, got {func!r}")
    return str(qual).replace(".<locals>", "")


def json_value(value: Any) -> Any:
    """``value`` as JSON data: tuples become lists; anything else not JSON is refused."""
    if isinstance(value, (tuple, list)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    text = getattr(value, "name", None) if type(value).__name__ == "dtype" else None
    if isinstance(text, str):  # a numpy dtype
        return text
    raise LoomValueError(f"a task's arguments must be JSON values (numbers, strings, tuples), got {value!r}: "
                         "they key the tuning log")


def task_key(name: str, args: Sequence[Any], kwargs: Optional[dict] = None) -> str:
    """The text a log keys a task by: ``name(arg, ...)`` with the arguments as JSON."""
    parts = [json.dumps(json_value(a), sort_keys=True) for a in args]
    parts += [f"{k}={json.dumps(json_value(v), sort_keys=True)}" for k, v in sorted((kwargs or {}).items())]
    return f"{name}({', '.join(parts)})"


def dispatch_config(name: str, args: Sequence[Any], kwargs: Optional[dict] = None,
                    target: Optional[Target] = None) -> Any:
    """The config a template called without one uses: the innermost history's best for
    ``name(args)`` on ``target`` (default: the target in scope), else a FallbackConfig."""
    contexts = _DISPATCH.get()
    if contexts:
        key = task_key(name, args, kwargs)
        tgt = target if target is not None else Target.current()
        for lookup in reversed(contexts):
            found = lookup(key, tgt)
            if found is not None:
                return found
    return FallbackConfig()


def push_dispatch(lookup: Callable[[str, Optional[Target]], Any]) -> contextvars.Token:
    return _DISPATCH.set(_DISPATCH.get() + (lookup,))


def pop_dispatch(token: contextvars.Token) -> None:
    _DISPATCH.reset(token)


class Task:
    """A template, its arguments and a target: the unit one tuning run measures.

    ``Task(template, args, target)``; ``task.space`` is the template's config space,
    ``task.key`` the text logs key it by, ``task.instantiate(cfg)`` the
    ``(schedule, tensors)`` of one config (``cfg=None``: the best the history in
    scope knows, else the fallback).  ``reference`` optionally computes the expected
    outputs from the inputs (numpy arrays in, a list of arrays out) to check every
    candidate against; without it candidates are checked against the first valid one.
    """

    def __init__(self, template: TemplateFunction, args: Sequence[Any] = (), target: Any = "llvm",
                 reference: Optional[Callable[..., Any]] = None, name: Optional[str] = None) -> None:
        if not callable(template):
            raise LoomValueError(f"loom.tune.Task: the template must be a function, got {template!r}")
        self.template = template
        self.args = tuple(args)
        self.target = target if isinstance(target, Target) else Target(target)
        self.reference = reference
        self.name = name or template_name(template)
        self.key = task_key(self.name, self.args)
        self._space: Optional[ConfigSpace] = None

    @property
    def target_text(self) -> str:
        return str(self.target)

    @property
    def space(self) -> ConfigSpace:
        """The config space the template declares (collected once, by running it)."""
        if self._space is None:
            space = ConfigSpace()
            with self.target:
                self._call(space)
            if not space.space_map:
                raise LoomValueError(f"the template {self.name} declares no knobs: there is nothing to tune")
            self._space = space
        return self._space

    config_space = space

    @property
    def flop(self) -> float:
        """The work of one run, as the template reports it with ``cfg.add_flop`` (0 when it does not)."""
        return self.space.flop

    def _call(self, cfg: Any) -> tuple[Any, list]:
        func = getattr(self.template, "__wrapped__", self.template)
        out = func(cfg, *self.args)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise LoomValueError(f"the template {self.name} must return (schedule, tensors), got {type(out).__name__}")
        return out[0], list(out[1])

    def instantiate(self, config: Optional[Config] = None) -> tuple[Any, list]:
        """``(schedule, tensors)`` for ``config``; ``None``: the best known in an
        :func:`~loom.tune.apply_history_best` context, else the fallback config."""
        with self.target:
            if config is None:
                config = dispatch_config(self.name, self.args, target=self.target)
            elif not config.is_fallback and getattr(config, "space", None) is not self.space:
                config = self.space.from_json(config.to_json())
            return self._call(config)

    def __reduce__(self) -> Any:
        return (_rebuild_task, (self.template, self.args, str(self.target), self.reference, self.name))

    def __repr__(self) -> str:
        return f"Task({self.key}, target={self.target_text!r})"


def _rebuild_task(template: Any, args: tuple, target: str, reference: Any, name: str) -> Task:
    return Task(template, args, target, reference, name)
