"""``@loom.jit``: annotated kernels compiled per cache key, kept in memory and on disk (docs/jit.md).

:mod:`loom.jit.decorator` holds :func:`jit` and :class:`JITKernel`;
:mod:`loom.jit.key` what the cache key holds; :mod:`loom.jit.cache` the
on-disk entries; :mod:`loom.jit.compiler` and :mod:`loom.jit.parser` how a
kernel becomes a PrimFunc and a Module.
"""

from .decorator import CompiledKernel, JITKernel, jit
from .key import CacheInfo, KeyExplanation

__all__ = ["jit", "JITKernel", "CompiledKernel", "CacheInfo", "KeyExplanation"]
