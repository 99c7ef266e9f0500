"""Source code generation shared by the backends (``loom.codegen``).

:class:`~loom.codegen.cstyle.CStyleRenderer` is the table-driven C-style
renderer: the C backend (loom-c) uses it as is, a CUDA renderer subclasses it.
"""

from .cstyle import CStyleRenderer
from .cstyle_ops import BASE_CODE_FOR_OP, PREAMBLE, CodegenError, sanitize

__all__ = ["CStyleRenderer", "CodegenError", "BASE_CODE_FOR_OP", "PREAMBLE", "sanitize"]
