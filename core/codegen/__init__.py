"""Source code generation shared by the backends (``loom.codegen``).

:class:`~loom.codegen.cstyle.CStyleRenderer` is the table-driven C-style
renderer of plain C functions; the C backend (loom-c) subclasses it with the
CPU's native calling convention, a CUDA renderer with kernels.
"""

from .cstyle import CStyleRenderer
from .cstyle_ops import BASE_CODE_FOR_OP, LIBM_FUNCTIONS, PREAMBLE, CodegenError, sanitize
from .cstyle_stmt import Release

__all__ = ["CStyleRenderer", "CodegenError", "Release", "BASE_CODE_FOR_OP", "LIBM_FUNCTIONS", "PREAMBLE",
           "sanitize"]
