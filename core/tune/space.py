"""Config spaces and configs: what a tuning template declares, and what one trial picks.

A template receives a ``cfg``.  It declares knobs with ``cfg.define_split``,
``define_knob``, ``define_reorder`` and ``define_annotate`` (AutoTVM's meanings),
then reads back the entity each knob takes, ``cfg["name"]``, and applies it to its
schedule.  The same template code serves three kinds of ``cfg``:

- :class:`ConfigSpace`: collects the knobs (``Task.space``); ``cfg[name]`` then
  reads the knob's default so the template runs through.
- :class:`Config`: one point of the space, chosen by index; the ``define_*``
  calls only check that the template declares the same space.
- :class:`FallbackConfig`: no tuned config is known; each knob takes its default
  unless the template sets one (``if cfg.is_fallback: cfg["tile"] = SplitEntity([-1, 8])``).

>>> import loom
>>> from loom.tune import ConfigSpace
>>> space = ConfigSpace()
>>> space.define_split("tile", 64, num_outputs=2, filter=lambda e: e.size[-1] >= 8)
>>> space.define_knob("unroll", [False, True])
>>> len(space)
8
>>> cfg = space.get(5)
>>> cfg["tile"].size, cfg["unroll"].val
([-1, 16], True)
>>> cfg.to_json()
{'index': 5, 'knobs': {'tile': [-1, 16], 'unroll': True}}
>>> cfg in space, space.from_json(cfg.to_json()) == cfg
(True, True)
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from ..errors import LoomValueError
from .knobs import (AnnotateEntity, AnnotateKnob, Knob, OtherKnob, OtherOptionEntity, ReorderEntity, ReorderKnob,
                    SplitEntity, SplitKnob, axis_length)

__all__ = ["ConfigSpace", "Config", "FallbackConfig", "ConfigError"]


class ConfigError(LoomValueError):
    """A config that does not belong to its space (another template version, a stale log line)."""


class _Declarations:
    """The ``define_*`` calls: each builds a knob and hands it to :meth:`_declare`."""

    def _declare(self, name: str, knob: Knob) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def define_split(self, name: str, axis: Any, policy: str = "factors", num_outputs: int = 2,
                     max_factor: Optional[int] = None, filter: Optional[Callable[[SplitEntity], bool]] = None) -> None:
        """A knob splitting ``axis`` (an IterVar of constant length, or a length) into
        ``num_outputs`` parts.  ``policy``: ``"factors"`` (parts that divide the length),
        ``"power2"`` (powers of two) or ``"verbose"`` (both); ``max_factor`` caps the inner
        parts; ``filter(entity)`` keeps only the entities it accepts."""
        length = axis_length(axis, f"define_split({name!r})")
        self._declare(name, SplitKnob.make(length, num_outputs, policy, max_factor, filter))

    def define_reorder(self, name: str, axes: Sequence[Any], policy: str = "all", **kwargs: Any) -> None:
        """A knob ordering ``axes``: ``policy`` ``"all"`` (every permutation), ``"identity"``,
        ``"interval_all"`` (``interval=(lo, hi)`` permuted, the rest fixed) or
        ``"candidate"`` (``candidate=[[index, ...], ...]``, orders of the axes' indices)."""
        self._declare(name, ReorderKnob.make(len(axes), policy, **kwargs))

    def define_annotate(self, name: str, axes: Sequence[Any], policy: str = "try_unroll", **kwargs: Any) -> None:
        """A knob annotating ``axes``: ``"try_unroll"`` (each unrolled or not), ``"try_vec"``
        (the last vectorized or not), ``"try_unroll_vec"`` (both) or ``"candidate"``
        (``candidate=[["none", "unroll", "vec"...], ...]``)."""
        self._declare(name, AnnotateKnob.make(len(axes), policy, **kwargs))

    def define_knob(self, name: str, candidates: Sequence[Any]) -> None:
        """A knob taking one of ``candidates`` (JSON values: numbers, strings, booleans, lists);
        the template reads ``cfg[name].val``."""
        values = list(candidates)
        for v in values:
            try:
                json.dumps(v)
            except (TypeError, ValueError):
                raise LoomValueError(f"define_knob({name!r}): candidate {v!r} is not a JSON value "
                                     "(numbers, strings, booleans, lists); it could not be logged") from None
        self._declare(name, OtherKnob([OtherOptionEntity(v) for v in values]))


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise LoomValueError(f"a knob's name must be a non-empty str, got {name!r}")
    return name


class ConfigSpace(_Declarations):
    """The knobs a template declares, in order; a config is one entity per knob, numbered
    by :meth:`get` in mixed radix (the first knob varies fastest, as in AutoTVM)."""

    is_fallback = False

    def __init__(self) -> None:
        self.space_map: dict[str, Knob] = {}
        self.flop = 0.0

    def _declare(self, name: str, knob: Knob) -> None:
        if _check_name(name) in self.space_map:
            raise LoomValueError(f"the knob {name!r} is defined twice")
        self.space_map[name] = knob

    def add_flop(self, flop: float) -> None:
        """Record the work of one run (floating-point operations), for GFLOP/s in reports."""
        self.flop += float(flop)

    def __len__(self) -> int:
        return math.prod(len(k) for k in self.space_map.values())

    def __getitem__(self, name: str) -> Any:
        """While collecting: the knob's default (its first entity), so the template runs through."""
        try:
            return self.space_map[name].entities[0]
        except KeyError:
            raise LoomValueError(f"no knob named {name!r} was defined (defined: {', '.join(self.space_map) or 'none'})") \
                from None

    def __iter__(self) -> Iterator[Config]:
        return (self.get(i) for i in range(len(self)))

    def __contains__(self, config: object) -> bool:
        """Whether ``config`` (a Config, or its ``to_json()`` dict) is a point of this space."""
        data = config.to_json() if isinstance(config, Config) else config
        if not isinstance(data, Mapping):
            return False
        try:
            self.from_json(data)
        except ConfigError:
            return False
        return True

    def indices(self, index: int) -> list[int]:
        """The entity index of each knob in config ``index``."""
        if not 0 <= index < len(self):
            raise ConfigError(f"config index {index} is outside the space (0 to {len(self) - 1})")
        out = []
        for knob in self.space_map.values():
            out.append(index % len(knob))
            index //= len(knob)
        return out

    def index_of(self, picks: Sequence[int]) -> int:
        """The config index whose knobs take entities ``picks`` (the inverse of :meth:`indices`)."""
        index, radix = 0, 1
        for pick, knob in zip(picks, self.space_map.values()):
            index += pick * radix
            radix *= len(knob)
        return index

    def get(self, index: int) -> Config:
        """Config number ``index``."""
        picks = self.indices(index)
        entities = {name: knob.entities[p] for (name, knob), p in zip(self.space_map.items(), picks)}
        return Config(self, index, entities)

    def from_json(self, data: Mapping[str, Any]) -> Config:
        """The config logged as ``data`` (``{"index": i, "knobs": {...}}``); ConfigError when
        its knobs are not this space's (the template changed since it was logged)."""
        knobs = data.get("knobs")
        if not isinstance(knobs, Mapping) or set(knobs) != set(self.space_map):
            raise ConfigError(f"the logged config's knobs {sorted(knobs or ())} are not the space's "
                              f"{sorted(self.space_map)}")
        try:
            picks = [knob.index_of(knobs[name]) for name, knob in self.space_map.items()]
        except ValueError as err:
            raise ConfigError(f"the logged config {dict(knobs)} is not in the space: {err}") from None
        return self.get(self.index_of(picks))

    def features(self, index: int) -> list[float]:
        """Numbers describing config ``index`` for a cost model: per knob, its entity's features."""
        out: list[float] = []
        for knob, pick in zip(self.space_map.values(), self.indices(index)):
            out.extend(knob.features(pick))
        return out

    def neighbour(self, index: int, rng: Any) -> int:
        """A config differing from ``index`` in one knob (chosen at random)."""
        picks = self.indices(index)
        knobs = [k for k, knob in enumerate(self.space_map.values()) if len(knob) > 1]
        if not knobs:
            return index
        k = knobs[int(rng.integers(len(knobs)))]
        size = len(list(self.space_map.values())[k])
        picks[k] = (picks[k] + 1 + int(rng.integers(size - 1))) % size
        return self.index_of(picks)

    def __repr__(self) -> str:
        lines = [f"ConfigSpace ({len(self)} configs)"]
        lines += [f"  {name}: {knob.kind}, {len(knob)} candidates" for name, knob in self.space_map.items()]
        return "\n".join(lines)


class Config(_Declarations):
    """One point of a space: ``cfg[name]`` is the entity knob ``name`` takes."""

    is_fallback = False

    def __init__(self, space: ConfigSpace, index: int, entities: dict[str, Any]) -> None:
        self.space, self.index, self._entities = space, index, entities
        self._seen: list[str] = []
        self.flop = 0.0

    def _declare(self, name: str, knob: Knob) -> None:
        # The template declares its knobs again on every instantiation: they must be the space's.
        expected = self.space.space_map.get(name)
        if expected is None or type(expected) is not type(knob) or expected.entities != knob.entities:
            raise ConfigError(f"the template declared knob {name!r} differently from the space this config "
                              "belongs to (a template's space must not depend on its config)")
        self._seen.append(name)

    def add_flop(self, flop: float) -> None:
        self.flop += float(flop)

    def __getitem__(self, name: str) -> Any:
        try:
            return self._entities[name]
        except KeyError:
            raise LoomValueError(f"no knob named {name!r} in this config (knobs: {', '.join(self._entities)})") \
                from None

    def to_json(self) -> dict[str, Any]:
        """``{"index": i, "knobs": {name: value}}``: what a log line records."""
        return {"index": self.index, "knobs": {name: e.value() for name, e in self._entities.items()}}

    def __eq__(self, other: object) -> bool:
        """Configs are equal when their knobs take the same values."""
        return isinstance(other, Config) and self.to_json()["knobs"] == other.to_json()["knobs"]

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_json()["knobs"], sort_keys=True))

    def __repr__(self) -> str:
        return f"Config(index={self.index}, {self.to_json()['knobs']})"


class FallbackConfig(_Declarations):
    """The config used when no tuned one is known: each knob takes its default (its first
    entity) unless the template assigns one, ``cfg["name"] = SplitEntity([-1, 8])``."""

    is_fallback = True
    index = -1

    def __init__(self) -> None:
        self.space = ConfigSpace()
        self._chosen: dict[str, Any] = {}
        self.flop = 0.0

    def _declare(self, name: str, knob: Knob) -> None:
        self.space._declare(name, knob)

    def add_flop(self, flop: float) -> None:
        self.flop += float(flop)

    def __getitem__(self, name: str) -> Any:
        if name in self._chosen:
            return self._chosen[name]
        return self.space[name]

    def __setitem__(self, name: str, entity: Any) -> None:
        if not isinstance(entity, (SplitEntity, ReorderEntity, AnnotateEntity, OtherOptionEntity)):
            raise LoomValueError(f"cfg[{name!r}] = {entity!r}: assign a SplitEntity, ReorderEntity, "
                                 "AnnotateEntity or OtherOptionEntity")
        self._chosen[name] = entity

    def to_json(self) -> dict[str, Any]:
        return {"index": -1, "knobs": {name: self[name].value() for name in self.space.space_map}}

    def __repr__(self) -> str:
        return f"FallbackConfig({self.to_json()['knobs']})"
