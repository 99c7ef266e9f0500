"""Dtypes of ``loom.language``: ``T.float32`` and friends, and one reader for every spelling of a dtype.

A constant such as ``T.float32`` *is* a :class:`~loom.ir.DataType` (it equals
``"float32"`` and numpy takes it), and calling it makes a value of that type, as
in TVMScript: ``T.float32(0)`` inside a kernel is a float32 constant, ``T.int32(x)``
a cast.  :func:`normalize_dtype` reads what users pass for a dtype: a string, a
numpy dtype or scalar type, a Loom DataType, a torch dtype, or Python's
``int``/``float``/``bool``.

>>> import numpy as np
>>> normalize_dtype("float32"), normalize_dtype(np.int8), normalize_dtype(float)
(DataType('float32'), DataType('int8'), DataType('float32'))
>>> float32 = dtype_constant("float32")
>>> float32 == "float32", float32(1.5)
(True, np.float32(1.5))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import LoomTypeError
from ..ir.dtype import DataType

__all__ = ["dtype_constant", "normalize_dtype", "DTYPE_NAMES"]

#: The dtype constants ``loom.language`` exports, by name.
DTYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "bfloat16", "float32", "float64")

# Python's own types as dtypes, as TileLang and TVM read them.
_PYTHON_TYPES = {bool: "bool", int: "int32", float: "float32"}


class dtype_constant(DataType):
    """A dtype of ``loom.language`` that can also be called to make a value of its type.

    Inside a kernel the parser turns ``T.float32(x)`` into a cast (a constant for a
    number); called from Python it converts with numpy, so emulated scripts agree.
    """

    def __new__(cls, text: str) -> dtype_constant:
        parsed = DataType.of(text)
        self = str.__new__(cls, str(parsed))
        for part in ("code", "bits", "lanes"):
            object.__setattr__(self, part, getattr(parsed, part))
        return self

    def __call__(self, value: Any) -> Any:
        if self == "bfloat16":
            raise LoomTypeError("numpy has no bfloat16: T.bfloat16(x) works inside kernels only")
        return np.dtype(str(self)).type(value)

    def __reduce__(self) -> Any:
        return (dtype_constant, (str(self),))


def normalize_dtype(value: Any, where: str = "dtype") -> DataType:
    """``value`` as a DataType: a str, numpy dtype or type, DataType, torch dtype, or Python int/float/bool.

    :raises LoomTypeError: naming ``where`` when ``value`` is not a dtype.
    """
    if isinstance(value, DataType):
        return value
    if isinstance(value, type) and value in _PYTHON_TYPES:
        return DataType.of(_PYTHON_TYPES[value])
    if isinstance(value, str):
        try:
            return DataType.of(value)
        except Exception:  # noqa: BLE001 - reported below with the spelling
            raise LoomTypeError(f"{where}: {value!r} is not a dtype (write e.g. 'float32' or T.float32)") from None
    module = type(value).__module__ or ""
    if module.startswith("torch"):  # torch.float32 prints as "torch.float32"
        text = str(value).rpartition(".")[2]
        return normalize_dtype(text, where)
    try:
        return DataType.of(np.dtype(value))
    except Exception:  # noqa: BLE001 - anything numpy refuses
        raise LoomTypeError(f"{where}: {value!r} ({type(value).__name__}) is not a dtype; pass a string such as "
                            f"'float32', a numpy, Loom or torch dtype, or T.float32") from None
