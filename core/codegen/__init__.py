"""Source code generation shared by the backends (``loom.codegen``).

:class:`~loom.codegen.cstyle.CStyleRenderer` is the table-driven C-style
renderer of plain C functions; the C backend (loom-c) subclasses it with the
CPU's native calling convention, a CUDA renderer with kernels.

The names below load their module on first use: the llvm backend needs only
:mod:`loom.codegen.parallel_work`, and the C renderer costs a millisecond or two to import.

>>> from loom.codegen import CStyleRenderer
>>> CStyleRenderer.__name__
'CStyleRenderer'
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["CStyleRenderer", "CodegenError", "Release", "BASE_CODE_FOR_OP", "LIBM_FUNCTIONS", "PREAMBLE",
           "sanitize"]

_HOME = {"CStyleRenderer": "cstyle", "Release": "cstyle_stmt", "BASE_CODE_FOR_OP": "cstyle_ops",
         "LIBM_FUNCTIONS": "cstyle_ops", "PREAMBLE": "cstyle_ops", "CodegenError": "cstyle_ops",
         "sanitize": "cstyle_ops"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
