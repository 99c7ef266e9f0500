"""Integer arithmetic analysis and simplification of index expressions.

The pieces, in the spirit of TVM's ``arith::Analyzer`` and Halide's simplifier:

- :class:`ConstIntBound` analysis: the ``[min, max]`` of an expression;
- :class:`ModularSet` analysis: ``coeff * k + base`` (divisibility);
- a canonical simplifier: integer arithmetic as a sorted sum of terms;
- a rewrite simplifier: constant folding and rule tables (``rules_*.py``);
- :func:`simplify` for expressions, statements, functions and modules.

Every rewrite keeps the IR's semantics exactly: integers wrap around at their
dtype's width, so rules that need mathematical values first prove from bounds
that nothing overflows.

>>> import loom
>>> from loom.arith import Analyzer
>>> from loom.ir import Range
>>> i, j = loom.var("i"), loom.var("j")
>>> an = Analyzer()
>>> an.bind(i, Range.from_min_extent(0, 1024))
>>> an.bind(j, Range.from_min_extent(0, 4))
>>> str(an.simplify(loom.floordiv(i * 4 + j, 4))), str(an.simplify(loom.floormod(i * 4 + j, 4)))
('i', 'j')
"""

from __future__ import annotations

from typing import Any

from ..ir.expr import PrimExpr
from .analyzer import Analyzer
from .bound import ConstIntBound
from .deduce_bound import deduce_bound
from .detect_linear import detect_clip_bound, detect_linear_equation
from .int_set import IntervalSet, intset_interval, intset_vector
from .modular import ModularSet
from .stmt_simplify import StmtSimplifier, simplify

__all__ = ["Analyzer", "ConstIntBound", "ModularSet", "StmtSimplifier", "simplify", "canonical_simplify"]
__all__ += ["IntervalSet", "intset_interval", "intset_vector"]
__all__ += ["deduce_bound", "detect_linear_equation", "detect_clip_bound"]


def canonical_simplify(expr: Any, analyzer: Analyzer | None = None) -> PrimExpr:
    """The canonical sum-of-terms form of ``expr`` (see :meth:`Analyzer.canonical_simplify`).

    >>> import loom
    >>> x, y = loom.var("x"), loom.var("y")
    >>> str(canonical_simplify(y + x * 2 - 1 + x))
    'x * 3 + y - 1'
    """
    return (analyzer if analyzer is not None else Analyzer()).canonical_simplify(expr)
