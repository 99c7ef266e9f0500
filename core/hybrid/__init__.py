"""Hybrid script: loop programs in Python syntax, emulated on numpy or compiled (``loom.hybrid``).

``@loom.hybrid.script`` marks a function written in the hybrid language
(docs/hybrid.md).  Called with numpy arrays it runs as Python; called with
``loom.placeholder`` tensors it becomes a :class:`HybridOp` whose outputs
schedule and build like any tensor's.  ``loom.hybrid.build(sch, inputs,
outputs)`` prints a schedule back as hybrid script, a :class:`HybridModule`.
"""

from ..te.operation import HybridOp
from .api import HybridFunction, parse, script
from .calls import KEYWORDS
from .dump import dump_source
from .errors import HybridArgumentError, HybridSyntaxError
from .module import HybridModule, build
from .runtime import HYBRID_GLOBALS

__all__ = ["script", "parse", "build", "HybridModule", "dump_source", "HybridFunction", "HybridOp",
           "HybridSyntaxError", "HybridArgumentError", "KEYWORDS", "HYBRID_GLOBALS"]
