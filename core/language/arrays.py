"""What a JIT kernel needs to know about an array argument before the compiled code checks it.

Any array the runtime accepts may be passed: numpy arrays, ``loom.nd`` arrays,
and objects with ``__dlpack__`` (torch, JAX, CuPy) or ``__array_interface__``.
The cache key of a tensor whose annotation leaves its dtype or sizes open holds
them, read here without converting the array.

>>> import numpy as np
>>> array_facts(np.zeros((2, 3), "int8"), "A")
('int8', (2, 3))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import LoomTypeError
from .dtypes import normalize_dtype

__all__ = ["is_array", "array_facts", "noncompact_strides"]

_DTYPE_NAMES: dict[Any, str] = {}  # dtype object (numpy, torch...) -> its Loom spelling


def is_array(value: Any) -> bool:
    """Whether ``value`` is an array a kernel can take (numpy, loom.nd, DLPack or array-interface objects)."""
    if type(value) is np.ndarray:
        return True
    if isinstance(value, np.generic):  # numpy scalars have shapes and array interfaces, but are scalars
        return False
    return hasattr(value, "shape") and hasattr(value, "dtype") and (
        hasattr(value, "__dlpack__") or hasattr(value, "__array_interface__") or isinstance(value, np.ndarray))


def _dtype_name(dtype: Any) -> str:
    found = _DTYPE_NAMES.get(dtype)
    if found is None:
        found = _DTYPE_NAMES[dtype] = str(normalize_dtype(dtype))
    return found


def array_facts(value: Any, where: str) -> tuple[str, tuple[int, ...]]:
    """``(dtype, shape)`` of an array argument; a LoomTypeError naming ``where`` for anything else."""
    if type(value) is np.ndarray:
        return _dtype_name(value.dtype), value.shape
    if not is_array(value):
        raise LoomTypeError(f"{where} is a tensor; got {type(value).__name__} (pass a numpy array, a loom.nd "
                            f"array or any array with __dlpack__)")
    return _dtype_name(value.dtype), tuple(int(s) for s in value.shape)


def noncompact_strides(value: Any) -> tuple[int, ...] | None:
    """A numpy or loom.nd array's strides in elements when it is not row-major contiguous, else None.

    A DLPack producer gives None: the compiled kernel checks its layout at the call.
    """
    from ..runtime.ndarray import NDArray  # lazy: the runtime imports much of loom

    if isinstance(value, np.ndarray):
        return None if value.flags.c_contiguous else tuple(s // value.itemsize for s in value.strides)
    if isinstance(value, NDArray):
        return None if value.is_compact else tuple(value.strides)
    return None
