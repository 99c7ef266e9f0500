"""Data layouts such as ``NCHW16c``, and the index maps between two of them.

A layout names a tensor's dimensions in order.  An upper-case letter is a
*primal* axis (``C``: channels); a lower-case letter after a factor is a
*subordinate* axis splitting its primal one (``16c``: the channel within a block
of 16).  ``NCHW16c`` is an ``NCHW`` tensor whose channels are cut into blocks of
16, the block index in the ``C`` dimension and the channel within the block
innermost.  :func:`bijective_layout` maps indices and shapes between two layouts
of the same primal axes, as expressions, so a layout transform is one compute:

>>> import loom
>>> nchw16c = loom.bijective_layout("NCHW", "NCHW16c")
>>> [int(x) for x in nchw16c.forward_index([0, 18, 6, 6])]
[0, 1, 6, 6, 2]
>>> A = loom.placeholder((1, 32, 7, 7), name="A")
>>> shape = nchw16c.forward_shape(A.shape)
>>> [int(x) for x in shape]
[1, 2, 7, 7, 16]
>>> B = loom.compute(shape, lambda *i: A[tuple(nchw16c.backward_index(i))], name="B")
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Optional, Sequence

from ..arith import Analyzer
from ..errors import LoomValueError
from ..ir import expr as E
from ..ir.container import convert
from ..ir.expr_ops import const, floordiv, floormod

__all__ = ["Layout", "BijectiveLayout", "layout", "bijective_layout"]

_AXIS = re.compile(r"(\d*)([A-Za-z])")


class Layout:
    """A layout string parsed into axes (see the module docstring).

    >>> lay = Layout("NCHW16c")
    >>> len(lay), lay[4], lay.index_of("C"), lay.factor_of("C"), "O" in lay
    (5, 'c', 1, 16, False)
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise LoomValueError(f"a layout is a string such as 'NCHW16c', not {type(name).__name__}")
        self.name = name
        self.axes: list[str] = []
        self.factors: dict[str, int] = {}  # subordinate axis (lower case) -> its factor
        pos = 0
        for m in _AXIS.finditer(name):
            if m.start() != pos:
                break
            pos = m.end()
            digits, axis = m.groups()
            if axis in self.axes:
                raise LoomValueError(f"layout {name!r}: axis {axis!r} appears twice")
            if axis.islower():
                if not digits or int(digits) <= 0:
                    raise LoomValueError(f"layout {name!r}: subordinate axis {axis!r} needs a positive factor "
                                         f"before it, as in '16{axis}'")
                self.factors[axis] = int(digits)
            elif digits:
                raise LoomValueError(f"layout {name!r}: primal axis {axis!r} takes no factor (write '{digits}"
                                     f"{axis.lower()}' for a block of {axis})")
            self.axes.append(axis)
        if pos != len(name):
            raise LoomValueError(f"layout {name!r}: cannot read {name[pos:]!r} (axes are letters, "
                                 f"subordinate ones lower case after their factor)")
        for sub in self.factors:
            if sub.upper() not in self.axes:
                raise LoomValueError(f"layout {name!r}: subordinate axis {sub!r} has no primal axis {sub.upper()!r}")

    def __len__(self) -> int:
        return len(self.axes)

    def __iter__(self) -> Iterator[str]:
        return iter(self.axes)

    def __getitem__(self, i: int) -> str:
        return self.axes[i]

    def __contains__(self, axis: object) -> bool:
        return axis in self.axes

    def __repr__(self) -> str:
        return f"Layout({self.name!r})"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def index_of(self, axis: str) -> int:
        """The position of ``axis``, or -1."""
        return self.axes.index(axis) if axis in self.axes else -1

    def factor_of(self, axis: str) -> int:
        """The factor of the subordinate axis of ``axis`` (either case), or -1 when it is not split."""
        return self.factors.get(axis.lower(), -1)

    @property
    def primal_axes(self) -> list[str]:
        return [a for a in self.axes if a.isupper()]


def layout(name: str | Layout) -> Layout:
    """The :class:`Layout` of ``name`` (TVM's ``tvm.layout``)."""
    return name if isinstance(name, Layout) else Layout(name)


class BijectiveLayout:
    """Index and shape maps between two layouts of the same primal axes (TVM's ``BijectiveLayout``).

    Indices and shapes are sequences of ints or integer expressions; the results are
    simplified expressions.  A shape's primal extent must be a multiple of the factor
    it is split by.
    """

    def __init__(self, src: Layout, dst: Layout) -> None:
        self.src_layout, self.dst_layout = src, dst

    def __repr__(self) -> str:
        return f"BijectiveLayout({self.src_layout.name!r}, {self.dst_layout.name!r})"

    def forward_index(self, index: Sequence[Any]) -> list[E.PrimExpr]:
        return _convert(self.src_layout, self.dst_layout, index, shape=False)

    def backward_index(self, index: Sequence[Any]) -> list[E.PrimExpr]:
        return _convert(self.dst_layout, self.src_layout, index, shape=False)

    def forward_shape(self, shape: Sequence[Any]) -> list[E.PrimExpr]:
        return _convert(self.src_layout, self.dst_layout, shape, shape=True)

    def backward_shape(self, shape: Sequence[Any]) -> list[E.PrimExpr]:
        return _convert(self.dst_layout, self.src_layout, shape, shape=True)


def bijective_layout(src: str | Layout, dst: str | Layout) -> Optional[BijectiveLayout]:
    """The maps from layout ``src`` to ``dst``, or None when they do not have the same primal axes."""
    s, d = layout(src), layout(dst)
    if sorted(s.primal_axes) != sorted(d.primal_axes):
        return None
    return BijectiveLayout(s, d)


def _convert(src: Layout, dst: Layout, values: Sequence[Any], shape: bool) -> list[E.PrimExpr]:
    if len(values) != len(src):
        raise LoomValueError(f"layout {src.name!r} has {len(src)} axes, got {len(values)} "
                             f"{'extents' if shape else 'indices'}")
    vals = {axis: convert(v) for axis, v in zip(src.axes, values)}
    an = Analyzer()
    whole: dict[str, E.PrimExpr] = {}  # each primal axis's full index (or extent)
    for axis in src.primal_axes:
        sub = axis.lower()
        v = vals[axis]
        if sub in src.factors:
            f = const(src.factors[sub], v.dtype)
            v = v * f if shape else v * f + vals[sub]
        whole[axis] = v
    out: list[E.PrimExpr] = []
    for axis in dst.axes:
        if axis.isupper():
            v = whole[axis]
            if axis.lower() in dst.factors:
                f = const(dst.factors[axis.lower()], v.dtype)
                rest = an.simplify(floormod(v, f))
                if shape and isinstance(rest, E.IntImm) and rest.value != 0:  # a symbolic extent is taken as a multiple
                    raise LoomValueError(f"layout {dst.name!r}: extent {v} of axis {axis} is not a multiple "
                                         f"of {dst.factors[axis.lower()]}")
                v = floordiv(v, f)
            out.append(an.simplify(v))
        else:
            v = whole[axis.upper()]
            f = const(dst.factors[axis], v.dtype)
            out.append(f if shape else an.simplify(floormod(v, f)))
    return out
