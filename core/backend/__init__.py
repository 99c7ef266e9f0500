"""``loom.backend``: the stages a backend implements and the core drives.

A plugin contributes a backend for a target kind through the
``loom_backend(target_kind)`` hook, returning a :class:`Backend`; ``loom.build``
then runs ``options -> render -> compile -> load`` on it (see
:mod:`loom.backend.stages`), caching what ``compile`` returns on disk.
``docs/backend-authors.md`` walks through writing one.

>>> from loom.backend import get_backend
>>> backend, plugin = get_backend("interp")
>>> backend.kind, plugin, backend.thread_semantics
('interp', 'builtin', 'gpu')
"""

from .base import (THREAD_SEMANTICS, Artifact, Backend, BackendOptions, ModuleInfo, ToolchainError, pack_sections,
                   signature_of, unpack_sections)
from .stages import BackendError, build_module, called_functions, get_backend, load_artifact, reset_backend_cache, stats

__all__ = [
    "Backend", "BackendOptions", "ModuleInfo", "Artifact", "THREAD_SEMANTICS", "signature_of",
    "BackendError", "build_module", "load_artifact", "get_backend", "reset_backend_cache", "stats",
    "called_functions", "pack_sections", "unpack_sections", "ToolchainError",
]
