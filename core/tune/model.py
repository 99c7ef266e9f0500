"""The cost model of the ``"model"`` strategy: predicted speed of a config from its knobs.

Features are the knobs' entities as numbers (:meth:`ConfigSpace.features`:
log2 of split sizes, permutations, annotation codes, knob values); the target is
``-log(seconds)``, failed configs scoring below every success.  The regressor is
gradient-boosted trees: xgboost's when installed, else scikit-learn's; neither
is a dependency of Loom (the ``loom-compiler[tune]`` extra installs scikit-learn).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np

__all__ = ["CostModel", "available_model", "sklearn_model", "xgboost_model"]

ModelFactory = Callable[[int], Any]


def xgboost_model(seed: int) -> Any:
    import xgboost

    return xgboost.XGBRegressor(n_estimators=150, max_depth=4, learning_rate=0.1, subsample=0.9,
                                random_state=seed, verbosity=0)


def sklearn_model(seed: int) -> Any:
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(n_estimators=150, max_depth=3, learning_rate=0.1, subsample=0.9,
                                     random_state=seed)


def available_model() -> Optional[ModelFactory]:
    """xgboost's regressor when installed, else scikit-learn's, else None."""
    for module, factory in (("xgboost", xgboost_model), ("sklearn", sklearn_model)):
        try:
            __import__(module)
        except ImportError:
            continue
        return factory
    return None


class CostModel:
    """Fits ``-log(cost)`` of measured configs; :meth:`predict` scores configs (higher: faster)."""

    def __init__(self, space: Any, factory: ModelFactory, seed: int = 0) -> None:
        self.space, self.factory, self.seed = space, factory, seed
        self.estimator: Any = None
        self._features: dict[int, list[float]] = {}

    def _x(self, indices: Any) -> np.ndarray:
        rows = []
        for i in indices:
            i = int(i)
            row = self._features.get(i)
            if row is None:
                row = self._features[i] = self.space.features(i)
            rows.append(row)
        return np.asarray(rows, dtype="float64")

    def fit(self, results: dict[int, Optional[float]]) -> None:
        good = {i: -math.log(c) for i, c in results.items() if c is not None and c > 0}
        if not good:
            return
        floor = min(good.values()) - 1.0
        indices = list(results)
        y = np.array([good.get(i, floor) for i in indices])
        self.estimator = self.factory(self.seed)
        self.estimator.fit(self._x(indices), y)

    def predict(self, indices: Any) -> np.ndarray:
        if self.estimator is None:
            return np.zeros(len(indices))
        return np.asarray(self.estimator.predict(self._x(indices)), dtype="float64")
