"""The knobs of a tuning space and the entities a config picks for them (AutoTVM's meanings).

A knob is one named dimension of a :class:`~loom.tune.ConfigSpace`: the list of
entities it may take.  An entity is what a template reads back from its config
(``cfg["tile_y"]``) and applies to its schedule:

- :class:`SplitEntity`: the sizes of the parts of one axis split into several,
  outermost first, the outermost written ``-1`` ("what is left");
  ``apply(s, op, axis)`` splits and returns the new axes, outermost first.
- :class:`ReorderEntity`: a permutation; ``apply(s, op, axes)`` reorders.
- :class:`AnnotateEntity`: ``"none"``, ``"unroll"`` or ``"vec"`` for each of
  some axes; ``apply(s, op, axes)`` annotates.
- :class:`OtherOptionEntity`: one value of a ``define_knob`` list, as ``.val``.

>>> knob = SplitKnob.make(16, num_outputs=2, policy="factors")
>>> [e.size for e in knob.entities]
[[-1, 1], [-1, 2], [-1, 4], [-1, 8], [-1, 16]]
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Iterable, Optional, Sequence

from ..errors import LoomValueError

__all__ = ["SplitEntity", "ReorderEntity", "AnnotateEntity", "OtherOptionEntity", "Knob", "SplitKnob",
           "ReorderKnob", "AnnotateKnob", "OtherKnob", "axis_length"]

_ANNOTATIONS = ("none", "unroll", "vec")


def axis_length(axis: Any, where: str) -> int:
    """The static length of ``axis``: an int, or an IterVar whose domain is a constant."""
    if isinstance(axis, bool):
        raise LoomValueError(f"{where}: an axis length must be an int, got {axis!r}")
    if isinstance(axis, int):
        if axis < 1:
            raise LoomValueError(f"{where}: an axis length must be at least 1, got {axis}")
        return axis
    dom = getattr(axis, "dom", None)
    extent = getattr(dom, "extent", None)
    value = getattr(extent, "value", None)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise LoomValueError(f"{where}: needs an axis of constant length (an int, or an IterVar with a constant "
                         f"domain; pass the length of a split's result as an int), got {axis!r}")


class SplitEntity:
    """How one axis is split: ``size`` lists the parts, outermost first, the outermost ``-1``."""

    __slots__ = ("size",)

    def __init__(self, size: Sequence[int]) -> None:
        self.size = [int(x) for x in size]

    def apply(self, sch: Any, op: Any, axis: Any) -> list[Any]:
        """Split ``axis`` of ``sch[op]`` into ``len(size)`` parts; the new axes, outermost first."""
        stage = sch[op]
        inner_axes = []
        for factor in reversed(self.size[1:]):
            axis, inner = stage.split(axis, factor=int(factor))
            inner_axes.append(inner)
        return [axis] + inner_axes[::-1]

    def value(self) -> list[int]:
        return list(self.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SplitEntity) and self.size == other.size

    def __hash__(self) -> int:
        return hash(("sp", tuple(self.size)))

    def __repr__(self) -> str:
        return f"SplitEntity({self.size})"


class ReorderEntity:
    """A permutation of some axes: ``perm[i]`` is the index of the axis placed i-th."""

    __slots__ = ("perm",)

    def __init__(self, perm: Sequence[int]) -> None:
        self.perm = [int(x) for x in perm]

    def apply(self, sch: Any, op: Any, axes: Sequence[Any]) -> list[Any]:
        """Reorder ``axes`` of ``sch[op]``; the axes in their new order."""
        if len(axes) != len(self.perm):
            raise LoomValueError(f"ReorderEntity.apply: the knob orders {len(self.perm)} axes, got {len(axes)}")
        ordered = [axes[i] for i in self.perm]
        sch[op].reorder(*ordered)
        return ordered

    def value(self) -> list[int]:
        return list(self.perm)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReorderEntity) and self.perm == other.perm

    def __hash__(self) -> int:
        return hash(("re", tuple(self.perm)))

    def __repr__(self) -> str:
        return f"ReorderEntity({self.perm})"


class AnnotateEntity:
    """An annotation per axis: ``"none"``, ``"unroll"`` or ``"vec"``."""

    __slots__ = ("anns",)

    def __init__(self, anns: Sequence[str]) -> None:
        for a in anns:
            if a not in _ANNOTATIONS:
                raise LoomValueError(f"AnnotateEntity: unknown annotation {a!r} (one of {', '.join(_ANNOTATIONS)})")
        self.anns = list(anns)

    def apply(self, sch: Any, op: Any, axes: Sequence[Any], axis_lens: Optional[Sequence[int]] = None,
              max_unroll: Optional[int] = None, vec_size: Optional[Iterable[int]] = None) -> list[Any]:
        """Annotate ``axes`` of ``sch[op]``.  With ``axis_lens``, an axis longer than
        ``max_unroll`` is not unrolled and one whose length is not in ``vec_size`` is not
        vectorized (AutoTVM's guards)."""
        if len(axes) != len(self.anns):
            raise LoomValueError(f"AnnotateEntity.apply: the knob annotates {len(self.anns)} axes, got {len(axes)}")
        sizes = set(vec_size) if vec_size is not None else None
        for k, (axis, ann) in enumerate(zip(axes, self.anns)):
            length = axis_lens[k] if axis_lens is not None else None
            if ann == "unroll" and not (max_unroll is not None and length is not None and length > max_unroll):
                sch[op].unroll(axis)
            elif ann == "vec" and not (sizes is not None and length is not None and length not in sizes):
                sch[op].vectorize(axis)
        return list(axes)

    def value(self) -> list[str]:
        return list(self.anns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnnotateEntity) and self.anns == other.anns

    def __hash__(self) -> int:
        return hash(("an", tuple(self.anns)))

    def __repr__(self) -> str:
        return f"AnnotateEntity({self.anns})"


class OtherOptionEntity:
    """One value of a :meth:`ConfigSpace.define_knob` list, read as ``.val``."""

    __slots__ = ("val",)

    def __init__(self, val: Any) -> None:
        self.val = val

    def value(self) -> Any:
        return self.val

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OtherOptionEntity) and type(self.val) is type(other.val) and self.val == other.val

    def __hash__(self) -> int:
        return hash(("ot", repr(self.val)))

    def __repr__(self) -> str:
        return f"OtherOptionEntity({self.val!r})"


class Knob:
    """One dimension of a space: its kind (``"split"``...), its entities, and how each
    becomes numbers for a cost model (:meth:`features`)."""

    kind = ""

    def __init__(self, entities: list[Any]) -> None:
        if not entities:
            raise LoomValueError(f"a {self.kind} knob with no candidates (every one was filtered out)")
        self.entities = entities

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, i: int) -> Any:
        return self.entities[i]

    def index_of(self, value: Any) -> int:
        """The index of the entity whose :meth:`value` (as logged) is ``value``; ValueError if none."""
        for i, e in enumerate(self.entities):
            if _same_value(e.value(), value):
                return i
        raise ValueError(f"{value!r} is not a candidate")

    def features(self, i: int) -> list[float]:
        return [float(i)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} candidates)"


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b or (isinstance(a, float) and isinstance(b, int) and a == b)


def _factors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _split_sizes(length: int, parts: int, policy: str, max_factor: Optional[int]) -> list[list[int]]:
    """The inner sizes (all but the outermost) of every way to split ``length`` into ``parts``."""
    cap = max_factor if max_factor is not None else length
    if policy == "factors":
        def rec(rest: int, k: int) -> list[list[int]]:
            if k == 0:
                return [[]]
            return [tail + [d] for d in _factors(rest) if d <= cap for tail in rec(rest // d, k - 1)]
        return [s[::-1] for s in rec(length, parts - 1)]
    powers = [1 << p for p in range(0, max(1, length).bit_length()) if (1 << p) <= min(cap, length)]
    if policy == "power2":
        combos = [list(c) for c in itertools.product(powers, repeat=parts - 1)
                  if math.prod(c) <= length]
        return [c[::-1] for c in combos]
    if policy == "verbose":
        seen: dict[tuple, None] = {}
        for s in _split_sizes(length, parts, "factors", max_factor) + _split_sizes(length, parts, "power2", max_factor):
            seen.setdefault(tuple(s))
        return [list(s) for s in seen]
    raise LoomValueError(f"define_split: unknown policy {policy!r} (factors, power2 or verbose)")


class SplitKnob(Knob):
    kind = "split"

    def __init__(self, entities: list[SplitEntity], length: int) -> None:
        super().__init__(entities)
        self.length = length

    @classmethod
    def make(cls, length: int, num_outputs: int = 2, policy: str = "factors", max_factor: Optional[int] = None,
             filter: Optional[Callable[[SplitEntity], bool]] = None) -> "SplitKnob":
        if not isinstance(num_outputs, int) or num_outputs < 2:
            raise LoomValueError(f"define_split: num_outputs must be an int of at least 2, got {num_outputs!r}")
        sizes = sorted(_split_sizes(length, num_outputs, policy, max_factor))
        entities = [SplitEntity([-1] + s) for s in sizes]
        if filter is not None:
            entities = [e for e in entities if filter(e)]
        return cls(entities, length)

    def features(self, i: int) -> list[float]:
        inner = self.entities[i].size[1:]
        outer = -(-self.length // max(1, math.prod(inner)))
        return [math.log2(outer)] + [math.log2(x) for x in inner]


class ReorderKnob(Knob):
    kind = "reorder"

    @classmethod
    def make(cls, n: int, policy: str = "all", **kwargs: Any) -> "ReorderKnob":
        ident = list(range(n))
        if policy == "identity":
            perms = [ident]
        elif policy == "all":
            perms = [list(p) for p in itertools.permutations(ident)]
        elif policy == "interval_all":
            lo, hi = kwargs.get("interval", (0, n))
            perms = [ident[:lo] + list(p) + ident[hi:] for p in itertools.permutations(ident[lo:hi])]
        elif policy == "candidate":
            perms = [list(p) for p in kwargs.get("candidate", [])]
            for p in perms:
                if sorted(p) != ident:
                    raise LoomValueError(f"define_reorder: candidate {p} is not a permutation of {n} axes")
        else:
            raise LoomValueError(f"define_reorder: unknown policy {policy!r} (identity, all, interval_all or candidate)")
        return cls([ReorderEntity(p) for p in perms])

    def features(self, i: int) -> list[float]:
        return [float(x) for x in self.entities[i].perm]


class AnnotateKnob(Knob):
    kind = "annotate"

    @classmethod
    def make(cls, n: int, policy: str = "try_unroll", **kwargs: Any) -> "AnnotateKnob":
        if policy == "try_unroll":
            combos = itertools.product(("none", "unroll"), repeat=n)
            anns = [list(c) for c in combos]
        elif policy == "try_vec":
            anns = [["none"] * n] + ([["none"] * (n - 1) + ["vec"]] if n else [])
        elif policy == "try_unroll_vec":
            anns = [list(c) + [last] for c in itertools.product(("none", "unroll"), repeat=max(0, n - 1))
                    for last in ("none", "unroll", "vec")] if n else [[]]
        elif policy == "candidate":
            anns = [list(c) for c in kwargs.get("candidate", [])]
        else:
            raise LoomValueError(f"define_annotate: unknown policy {policy!r} "
                                 "(try_unroll, try_vec, try_unroll_vec or candidate)")
        return cls([AnnotateEntity(a) for a in anns])

    def features(self, i: int) -> list[float]:
        return [float(_ANNOTATIONS.index(a)) for a in self.entities[i].anns]


class OtherKnob(Knob):
    kind = "knob"

    def features(self, i: int) -> list[float]:
        val = self.entities[i].val
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            return [float(i), float(val)]
        return [float(i), float(i)]
