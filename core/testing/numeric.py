"""Numeric comparisons that take Loom arrays as well as numpy ones (TVM's ``tvm.testing.assert_allclose``).

>>> import numpy as np, loom
>>> loom.testing.assert_allclose(loom.nd.array(np.ones(3, "float32")), np.ones(3))
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["assert_allclose"]


def _host(x: Any) -> Any:
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else x


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 0.0) -> None:
    """``numpy.testing.assert_allclose`` after copying Loom arrays to the host; shapes must match."""
    a, d = np.asarray(_host(actual)), np.asarray(_host(desired))
    assert a.shape == d.shape, f"shapes differ: {a.shape} and {d.shape}"
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, verbose=True)
