"""Software emulation: the hybrid keywords as plain Python over numpy.

A hybrid function called with numpy arrays runs as ordinary Python.  For the
duration of the call its module's globals gain the keywords below
(``output_tensor``, ``allocate``, ``unroll``, ``exp``...); afterwards every
name is put back as it was, so nothing leaks into the module and a global of
the same name (a logger called ``log``) is restored.

>>> import numpy as np
>>> g = {"log": "my logger"}
>>> with keywords_injected(g):
...     g["log"](np.float32(1.0)), g["output_tensor"]((2,), "int32").dtype.name
(np.float32(0.0), 'int32')
>>> g
{'log': 'my logger'}
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import numpy as np

from ..errors import LoomValueError

__all__ = ["HYBRID_GLOBALS", "keywords_injected", "SCOPES"]

#: Memory scopes ``allocate`` accepts.
SCOPES = ("global", "shared", "local")
_MISSING = object()
_LOCK = threading.RLock()  # module globals are shared by threads; nested calls re-enter


def _np_dtype(dtype: Any) -> np.dtype:
    return np.dtype(str(dtype))


def output_tensor(shape: Any, dtype: Any = "float32") -> np.ndarray:
    """A zero-filled output array (emulation of ``output_tensor``)."""
    return np.zeros(shape, _np_dtype(dtype))


def allocate(shape: Any, dtype: Any = "float32", scope: str = "global") -> np.ndarray:
    """A zero-filled scratch array (emulation of ``allocate``)."""
    if scope not in SCOPES:
        raise LoomValueError(f"allocate: scope must be one of {list(SCOPES)}, got {scope!r}")
    return np.zeros(shape, _np_dtype(dtype))


def bind(tag: str, extent: Any) -> range:
    """The iterations of a thread-bound loop, run one after another (emulation of ``bind``)."""
    return range(int(extent))


def sigmoid(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def popcount(x: Any) -> Any:
    """Set bits of an integer in its two's complement width (32 bits for Python ints)."""
    if isinstance(x, np.integer):
        return type(x)(bin(int(x) & ((1 << (8 * x.dtype.itemsize)) - 1)).count("1"))
    return bin(int(x) & 0xFFFFFFFF).count("1")


def likely(cond: Any) -> Any:
    """The condition itself (emulation of ``likely``, a hint for the compiler)."""
    return cond


def _casts() -> dict[str, Any]:
    names = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64")
    return {n: getattr(np, n) for n in names}


#: Every name injected for emulation.  ``range``, ``min``, ``max``, ``abs`` and ``len``
#: are Python's own builtins and need no injection.
HYBRID_GLOBALS: dict[str, Any] = {
    "output_tensor": output_tensor, "allocate": allocate,
    "serial": range, "unroll": range, "parallel": range, "vectorize": range, "const_range": range, "bind": bind,
    "log": np.log, "exp": np.exp, "sigmoid": sigmoid, "tanh": np.tanh, "power": np.power, "popcount": popcount,
    "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "likely": likely,
    **_casts(),
}


@contextlib.contextmanager
def keywords_injected(namespace: dict[str, Any]) -> Iterator[None]:
    """``namespace`` (a function's globals) with the keywords set, restored exactly on exit."""
    with _LOCK:
        saved = {name: namespace.get(name, _MISSING) for name in HYBRID_GLOBALS}
        namespace.update(HYBRID_GLOBALS)
        try:
            yield
        finally:
            for name, old in saved.items():
                if old is _MISSING:
                    namespace.pop(name, None)
                else:
                    namespace[name] = old
