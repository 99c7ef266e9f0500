"""Data types with vector lanes: ``"float32"``, ``"int8x16"``, ``"bool"``, ``"handle"``.

>>> t = DataType.of("float32x8")
>>> (t.code, t.bits, t.lanes, str(t.element_of()))
('float', 32, 8, 'float32')
"""

from __future__ import annotations

import functools
import re
from typing import Any, Union

import numpy as np

from ..errors import LoomTypeError

__all__ = ["DataType", "DTypeLike", "dtype_of", "MAX_LANES"]

#: The most lanes a vector dtype can have (so the widest loop ``vectorize`` can turn into vectors).
MAX_LANES = 65536

#: What :meth:`DataType.of` accepts: a DataType, its text (``"float32x4"``) or a numpy dtype.
DTypeLike = Union["DataType", str, "np.dtype[Any]", "type[Any]"]

_CODES = ("int", "uint", "float", "bfloat", "bool", "handle")
_PATTERN = re.compile(r"^(int|uint|float|bfloat|bool|handle)(\d*)(?:x(\d+))?$")
_VALID_BITS = {
    "int": (8, 16, 32, 64),
    "uint": (8, 16, 32, 64),
    "float": (16, 32, 64),
    "bfloat": (16,),
    "bool": (1,),
    "handle": (64,),
}
_DEFAULT_BITS = {"int": 32, "uint": 32, "float": 32, "bfloat": 16, "bool": 1, "handle": 64}


class DataType(str):
    """A scalar or vector element type: a type code, a bit width and lanes.

    A DataType *is* its canonical text, as TVM's dtypes were strings: it equals
    ``"float32"``, formats and hashes as that text, and numpy takes it
    (``np.zeros(4, A.dtype)``).  ``code``, ``bits`` and ``lanes`` are its parts.

    >>> t = DataType("float32")
    >>> t == "float32", isinstance(t, str), np.dtype(t), DataType("float", 32, 4)
    (True, True, dtype('float32'), DataType('float32x4'))
    """

    code: str
    bits: int
    lanes: int

    def __new__(cls, code: str, bits: int | None = None, lanes: int = 1) -> DataType:
        if bits is None:  # DataType("float32x4"): the text
            return _parse(code)
        self = super().__new__(cls, _text(code, bits, lanes))
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "lanes", lanes)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"DataType is immutable (cannot set {name})")

    def __reduce__(self) -> Any:
        return (_parse, (str(self),))

    @staticmethod
    def of(value: DTypeLike) -> DataType:
        """Parse ``value`` (a DataType, a string, or a numpy dtype) into a DataType."""
        if isinstance(value, DataType):
            return value
        if isinstance(value, str):
            return _parse(value)
        if value is None:
            raise LoomTypeError("a dtype is required, got None")
        try:
            npd = np.dtype(value)
        except TypeError:
            raise LoomTypeError(f"cannot interpret {value!r} as a dtype") from None
        return _parse(_from_numpy(npd))

    # -- predicates -----------------------------------------------------
    @property
    def is_int(self) -> bool:
        return self.code == "int"

    @property
    def is_uint(self) -> bool:
        return self.code == "uint"

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.code in ("int", "uint")

    @property
    def is_float(self) -> bool:
        """Any floating type, bfloat16 included."""
        return self.code in ("float", "bfloat")

    @property
    def is_bool(self) -> bool:
        return self.code == "bool"

    @property
    def is_handle(self) -> bool:
        return self.code == "handle"

    @property
    def is_scalar(self) -> bool:
        return self.lanes == 1

    @property
    def is_vector(self) -> bool:
        return self.lanes > 1

    @property
    def bytes(self) -> int:
        """Storage size of one element in bytes (bool is stored as one byte)."""
        return max(1, self.bits // 8) * self.lanes

    def with_lanes(self, lanes: int) -> DataType:
        return self if lanes == self.lanes else _parse(_text(self.code, self.bits, lanes))

    def element_of(self) -> DataType:
        return self.with_lanes(1)

    def with_bits(self, bits: int) -> DataType:
        return _parse(_text(self.code, bits, self.lanes))

    def numpy(self) -> np.dtype:
        """The numpy dtype of one element (bfloat16 through ml_dtypes)."""
        return _to_numpy(self.element_of())

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"DataType({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DataType):
            return str.__eq__(self, other)
        if isinstance(other, str):  # "float" is float32, "int" int32: compare parsed
            if str.__eq__(self, other):
                return True
            try:
                return str.__eq__(self, _parse(other))
            except LoomTypeError:
                return False
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return str.__hash__(self)


def _text(code: str, bits: int, lanes: int) -> str:
    base = code if code in ("bool", "handle") else f"{code}{bits}"
    return base if lanes == 1 else f"{base}x{lanes}"


#: Other spellings of dtypes: TVM wrote bool as ``uint1``.
_ALIASES = {"uint1": "bool"}


@functools.lru_cache(maxsize=512)
def _parse(text: str) -> DataType:
    text = text.strip()
    base, sep, lanes_text = text.partition("x")
    text = _ALIASES[base] + sep + lanes_text if base in _ALIASES else text
    m = _PATTERN.match(text)
    if not m:
        raise LoomTypeError(f"unknown dtype {text!r}; expected e.g. float32, int8x16, bool, handle")
    code, bits_s, lanes_s = m.groups()
    bits = int(bits_s) if bits_s else _DEFAULT_BITS[code]
    if bits not in _VALID_BITS[code]:
        raise LoomTypeError(f"unknown dtype {text!r}: {code} supports bits {_VALID_BITS[code]}")
    lanes = int(lanes_s) if lanes_s else 1
    if lanes < 1 or lanes > MAX_LANES:
        raise LoomTypeError(f"dtype {text!r} has an invalid lane count (1 to {MAX_LANES})")
    return DataType(code, bits, lanes)


def _to_numpy(t: DataType) -> np.dtype:
    if t.code == "bool":
        return np.dtype(np.bool_)
    if t.code == "handle":
        return np.dtype(np.uint64)
    if t.code == "bfloat":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(f"{t.code}{t.bits}")


def _from_numpy(d: np.dtype) -> str:
    if d == np.bool_:
        return "bool"
    if d.name == "bfloat16":
        return "bfloat16"
    if d.kind in "iuf":
        return d.name
    raise LoomTypeError(f"numpy dtype {d} has no Loom equivalent")


def dtype_of(value: Any) -> DataType:
    """Shorthand for :meth:`DataType.of`."""
    return DataType.of(value)
