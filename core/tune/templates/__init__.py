"""Tuning templates shipped with Loom (``loom.tune.templates``).

- :func:`matmul` (CPU GEMM, ``target="llvm"`` or ``"c"``),
- :func:`conv2d_nchw` (CPU direct convolution),
- :func:`matmul_cuda` (GPU GEMM, ``target="cuda"``).

``TEMPLATES`` maps each template's logged name to the template.

>>> from loom.tune.templates import TEMPLATES, matmul
>>> TEMPLATES["loom.matmul"] is matmul
True
"""

from __future__ import annotations

from typing import Any

from .conv2d import conv2d_nchw, conv2d_reference
from .cuda import matmul_cuda
from .matmul import matmul, matmul_reference

__all__ = ["matmul", "matmul_reference", "conv2d_nchw", "conv2d_reference", "matmul_cuda", "TEMPLATES"]

TEMPLATES: dict[str, Any] = {t.template_name: t for t in (matmul, conv2d_nchw, matmul_cuda)}
