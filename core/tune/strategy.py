"""Search strategies: which configs to measure next.

A strategy proposes config indices not measured yet and learns from each
result (:meth:`Strategy.observe`, cost in seconds or None for a failure):

- ``"grid"``: every config in index order.
- ``"random"``: configs drawn uniformly without repetition.
- ``"model"``: simulated annealing over a cost model fitted to the results so far
  (:mod:`loom.tune.model`; scikit-learn or xgboost, the ``loom-compiler[tune]``
  extra); random until enough results are in, and entirely random (with a warning)
  when neither library is installed.

>>> from loom.tune import ConfigSpace
>>> space = ConfigSpace(); space.define_knob("a", [1, 2, 3]); space.define_knob("b", [0, 1])
>>> s = make_strategy("grid", space)
>>> s.propose(4)
[0, 1, 2, 3]
>>> s.propose(4)
[4, 5]
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Optional, Union

import numpy as np

from ..errors import LoomValueError
from .space import ConfigSpace

__all__ = ["Strategy", "GridStrategy", "RandomStrategy", "ModelStrategy", "make_strategy", "STRATEGIES"]


class Strategy:
    """What every strategy keeps: the configs measured or handed out, and the results."""

    name = ""

    def __init__(self, space: ConfigSpace, seed: int = 0) -> None:
        self.space = space
        self.size = len(space)
        self.rng = np.random.default_rng(seed)
        self.taken: set[int] = set()  # measured, or proposed and in flight
        self.results: dict[int, Optional[float]] = {}

    @property
    def exhausted(self) -> bool:
        return len(self.taken) >= self.size

    def observe(self, index: int, cost: Optional[float]) -> None:
        """Record the result of config ``index``: seconds per run, or None when it failed."""
        self.taken.add(index)
        self.results[index] = cost

    def propose(self, n: int) -> list[int]:  # pragma: no cover - every strategy defines it
        raise NotImplementedError

    def _take(self, index: int, out: list[int]) -> None:
        self.taken.add(index)
        out.append(index)


class GridStrategy(Strategy):
    name = "grid"

    def __init__(self, space: ConfigSpace, seed: int = 0) -> None:
        super().__init__(space, seed)
        self._next = 0

    def propose(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n and self._next < self.size:
            if self._next not in self.taken:
                self._take(self._next, out)
            self._next += 1
        return out


class RandomStrategy(Strategy):
    name = "random"

    def propose(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n and not self.exhausted:
            self._take(self._draw(), out)
        return out

    def _draw(self) -> int:
        """An index not taken: rejection sampling while the space is mostly free, else a scan."""
        if len(self.taken) < self.size // 2:
            while True:
                i = int(self.rng.integers(self.size))
                if i not in self.taken:
                    return i
        free = [i for i in range(self.size) if i not in self.taken] if self.size <= 1 << 22 else None
        if free:
            return free[int(self.rng.integers(len(free)))]
        while True:  # a huge space more than half taken: still rejection sampling
            i = int(self.rng.integers(self.size))
            if i not in self.taken:
                return i


class ModelStrategy(RandomStrategy):
    """Simulated annealing over a learned cost model (AutoTVM's model-based tuner, simplified).

    After ``min_train`` successful results, each batch refits the model, walks
    ``chains`` annealing chains of ``steps`` moves (one knob changed per move) over
    the predicted speed, and proposes the best unmeasured configs the walks met; a
    fraction ``epsilon`` of each batch stays random, to keep exploring.
    """

    name = "model"

    def __init__(self, space: ConfigSpace, seed: int = 0, min_train: int = 16, chains: int = 64,
                 steps: int = 60, epsilon: float = 0.1, model: Any = None) -> None:
        super().__init__(space, seed)
        from .model import CostModel, available_model

        self.min_train, self.chains, self.steps, self.epsilon = min_train, chains, steps, epsilon
        factory = model if model is not None else available_model()
        if factory is None:
            warnings.warn("loom.tune: the model strategy needs scikit-learn or xgboost (pip install "
                          "'loom-compiler[tune]'); searching at random instead", RuntimeWarning, stacklevel=3)
        self.model: Optional[CostModel] = CostModel(space, factory, seed) if factory is not None else None
        self._trained_on = 0

    def propose(self, n: int) -> list[int]:
        good = sum(1 for c in self.results.values() if c is not None)
        if self.model is None or good < self.min_train or self.exhausted:
            return super().propose(n)
        if len(self.results) != self._trained_on:
            self.model.fit(self.results)
            self._trained_on = len(self.results)
        n_model = n - int(round(n * self.epsilon)) if n > 1 else n
        out: list[int] = []
        for i in self._anneal(n_model):
            self._take(i, out)
        out += super().propose(n - len(out))
        return out

    def _anneal(self, n: int) -> list[int]:
        assert self.model is not None
        ranked = [i for i, _ in sorted(((i, c) for i, c in self.results.items() if c is not None), key=lambda ic: ic[1])]
        starts = ranked[: self.chains // 2]
        while len(starts) < self.chains:
            starts.append(int(self.rng.integers(self.size)))
        points = np.array(starts, dtype=np.int64)
        scores = self.model.predict(points)
        best: dict[int, float] = {}

        def keep(idx: np.ndarray, sc: np.ndarray) -> None:
            for i, s in zip(idx.tolist(), sc.tolist()):
                if i not in self.taken:
                    best[i] = max(best.get(i, -math.inf), s)

        keep(points, scores)
        for step in range(self.steps):
            temp = 1.0 - step / self.steps
            moved = np.array([self.space.neighbour(int(i), self.rng) for i in points], dtype=np.int64)
            new = self.model.predict(moved)
            gain = new - scores
            accept = (gain > 0) | (self.rng.random(len(points)) < np.exp(np.minimum(gain, 0) / max(temp, 1e-3)))
            points = np.where(accept, moved, points)
            scores = np.where(accept, new, scores)
            keep(moved, new)
        return [i for i, _ in sorted(best.items(), key=lambda kv: -kv[1])[:n]]


STRATEGIES: dict[str, type[Strategy]] = {"grid": GridStrategy, "random": RandomStrategy, "model": ModelStrategy}


def make_strategy(strategy: Union[str, Strategy, type], space: ConfigSpace, seed: int = 0) -> Strategy:
    """A strategy by name (``grid``, ``random``, ``model``), a Strategy class, or an instance."""
    if isinstance(strategy, Strategy):
        return strategy
    if isinstance(strategy, type) and issubclass(strategy, Strategy):
        return strategy(space, seed)
    if isinstance(strategy, str) and strategy in STRATEGIES:
        return STRATEGIES[strategy](space, seed)
    raise LoomValueError(f"unknown tuning strategy {strategy!r}: one of {', '.join(STRATEGIES)}, or a Strategy")
