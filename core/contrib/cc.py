"""Linking objects into shared libraries (classic TVM's ``tvm.contrib.cc``).

A module's ``save("x.o")`` writes an object that carries the module's
metadata; :func:`create_shared` links objects into a library that
:func:`loom.runtime.load_module` loads:

>>> import os, tempfile, numpy as np, loom
>>> from loom.contrib import cc
>>> A = loom.placeholder((4,), name="A")
>>> B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
>>> f = loom.build(loom.create_schedule(B.op), [A, B], "llvm", name="add_one")
>>> folder = tempfile.mkdtemp()
>>> f.save(os.path.join(folder, "add_one.o"))
>>> cc.create_shared(os.path.join(folder, "add_one.so"), [os.path.join(folder, "add_one.o")])
>>> g = loom.runtime.load_module(os.path.join(folder, "add_one.so"))
>>> b = np.zeros(4, "float32"); g(np.arange(4, dtype="float32"), b); b
array([1., 2., 3., 4.], dtype=float32)
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Sequence

from ..errors import LoomTypeError
from ..runtime.extern_libraries import link_arguments
from ..runtime.native_library import link_shared_library

__all__ = ["create_shared"]

# The symbols an object that uses OpenMP parallel regions refers to.
_OPENMP_MARKERS = (b"GOMP_", b"omp_get_")
_NAME = re.compile(rb"(?<=\0)[A-Za-z_][A-Za-z0-9_]{1,200}(?=\0)")


def _object_bytes(paths: Sequence[str]) -> list[bytes]:
    out = []
    for p in paths:
        if p.endswith(".o") and os.path.isfile(p):
            with open(p, "rb") as fh:
                out.append(fh.read())
    return out


def _uses_openmp(objects: Sequence[bytes]) -> bool:
    return any(m in data for data in objects for m in _OPENMP_MARKERS)


def _library_arguments(objects: Sequence[bytes]) -> list[str]:
    """Link arguments for the registered libraries (BLAS...) whose symbols the objects name.

    The names in an object's string table are NUL-separated; any registered
    library defining one of them becomes a dependency of the shared library.
    """
    names = {tok.decode("ascii", "replace") for data in objects for tok in _NAME.findall(data)}
    return link_arguments(names)


def create_shared(output: str | os.PathLike[str], objects: str | Sequence[str], options: Sequence[str] | None = None,
                  cc: str = "cc") -> None:
    """Link ``objects`` (object files, C sources) into the shared library ``output``.

    ``options`` are extra compiler flags; ``cc`` the compiler command.  A failed
    link raises :class:`~loom.runtime.native_library.LinkError` with the
    compiler's messages.
    """
    paths = [objects] if isinstance(objects, (str, os.PathLike)) else list(objects)
    if not paths or not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise LoomTypeError(f"create_shared expects object file paths, got {objects!r}")
    paths = [os.fspath(p) for p in paths]
    flags = list(options or [])
    if isinstance(options, str):
        flags = shlex.split(options)
    contents = _object_bytes(paths)
    link_shared_library(output, [*paths, *_library_arguments(contents)], None, compiler=cc, flags=flags,
                        openmp=_uses_openmp(contents))
