"""The ``Shuffle`` expression: lanes picked from a concatenation of vectors (TVM's ``tir.Shuffle``).

It lives apart from :mod:`loom.ir.expr` (which re-exports it) to keep files small.

>>> from loom.ir.expr import Ramp
>>> s = Shuffle([Ramp(0, 1, 4)], [3, 2, 1, 0])
>>> str(s.dtype), str(s)
('int32x4', 'shuffle([ramp(0, 1, 4)], [3, 2, 1, 0])')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import attrs
import numpy as np

from ..errors import IRError
from .dtype import DataType
from .expr import ExprTuple, IntImm, PrimExpr
from .expr_ops import _python_const, convert_expr
from .literals import expr_or_number_types
from .node import children, register_object

__all__ = ["Shuffle"]


def _index(v: Any) -> Any:
    """A Python (or numpy) integer index as an int32 constant; anything else is left to validation."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return IntImm("int32", int(v)) if -(1 << 31) <= int(v) < (1 << 31) else IntImm("int64", int(v))
    return v


@register_object("tir.Shuffle")
class Shuffle(PrimExpr):
    """Lanes of the concatenated ``vectors`` (scalars count as one lane), in the order of ``indices``.

    ``indices`` are integer constants below the total number of lanes; the
    result has one lane per index (a scalar for one index) of the vectors'
    common element type.  Numbers among ``vectors`` take that element type.

    >>> from loom.ir.expr import Ramp, Var
    >>> a, b = Var("a", "float32x4"), Var("b", "float32x4")
    >>> str(Shuffle([a, b], [0, 4, 1, 5]).dtype), str(Shuffle.extract_element(a, 2).dtype)
    ('float32x4', 'float32')
    >>> print(Shuffle.concat([a, b]))
    shuffle([a, b], [0, 1, 2, 3, 4, 5, 6, 7])
    """

    vectors: ExprTuple = children(expr_or_number_types)
    indices: ExprTuple = children(PrimExpr, element_converter=_index)
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if not self.vectors:
            raise IRError("Shuffle needs at least one vector")
        if not self.indices:
            raise IRError("Shuffle needs at least one index")
        if not all(isinstance(v, PrimExpr) for v in self.vectors):
            self._type_numbers()
        elem = self.vectors[0].dtype.element_of()
        for k, v in enumerate(self.vectors):
            if v.dtype.element_of() != elem:
                raise IRError(f"Shuffle vectors differ in element type: vectors[0] is {self.vectors[0].dtype} "
                              f"but vectors[{k}] is {v.dtype}")
        total = sum(v.dtype.lanes for v in self.vectors)
        for k, i in enumerate(self.indices):
            if not (isinstance(i, IntImm) and i.dtype.is_integer):
                raise IRError(f"Shuffle indices must be integer constants, but indices[{k}] is {i} ({i.dtype})")
            if not 0 <= i.value < total:
                raise IRError(f"Shuffle index {i.value} (indices[{k}]) is out of range: the vectors have "
                              f"{total} lanes in all")
        object.__setattr__(self, "dtype", elem.with_lanes(len(self.indices)))

    def _type_numbers(self) -> None:
        """Replace Python numbers among the vectors by constants of the first expression's element type."""
        like = next((v.dtype.element_of() for v in self.vectors if isinstance(v, PrimExpr)), None)
        out = [v if isinstance(v, PrimExpr) else convert_expr(v) if like is None else _python_const(v, like)
               for v in self.vectors]
        object.__setattr__(self, "vectors", tuple(out))

    @property
    def index_values(self) -> tuple[int, ...]:
        """The indices as Python ints."""
        return tuple(cast(IntImm, i).value for i in self.indices)

    @classmethod
    def concat(cls, vectors: Sequence[PrimExpr]) -> PrimExpr:
        """All lanes of ``vectors`` in order (a single vector is returned as it is, as in TVM)."""
        vectors = list(vectors)
        if len(vectors) == 1:
            return vectors[0]
        return cls(vectors, list(range(sum(v.dtype.lanes for v in vectors))))

    @classmethod
    def extract_element(cls, vector: PrimExpr, index: int) -> Shuffle:
        """Lane ``index`` of ``vector``, a scalar."""
        return cls([vector], [index])

