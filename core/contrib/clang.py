"""C and C++ to LLVM IR with clang (classic TVM's ``tvm.contrib.clang``).

The IR text goes into a kernel with ``pragma(x, "import_llvm", ll)`` on the
llvm target.  Loom does not ship clang: :func:`find_clang` looks for one on
``PATH`` (``clang``, then versioned names, newest first), and the IR must be
readable by the LLVM that llvmlite bundles, so a clang of that version or
older is preferred.  Without clang, ``pragma(x, "import_c", source)`` takes
the C source directly (it is compiled by the C compiler the backends use).

>>> from loom.contrib import clang
>>> isinstance(clang.find_clang(required=False), list)
True
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Sequence

from ..errors import LoomValueError
from ..runtime.native_library import run_compiler

__all__ = ["find_clang", "create_llvm"]

_VERSIONS = range(30, 9, -1)


def _llvm_major() -> int | None:
    try:
        import llvmlite.binding as llvm

        return int(llvm.llvm_version_info[0])
    except Exception:  # llvmlite is the llvm backend's dependency, not the core's
        return None


def find_clang(required: bool = True) -> list[str]:
    """The clang executables on ``PATH``: llvmlite's LLVM version first, then ``clang``, then newest first.

    :param required: raise when none is found (else return an empty list).
    :raises LoomValueError: when ``required`` and no clang is on ``PATH``.
    """
    major = _llvm_major()
    names = ([f"clang-{major}"] if major else []) + ["clang"] + [f"clang-{v}" for v in _VERSIONS if v != major]
    found: list[str] = []
    for name in names:
        path = shutil.which(name)
        if path and path not in found:
            found.append(path)
    if required and not found:
        raise LoomValueError("no clang executable on PATH (looked for clang and clang-N); install one, or pass "
                             "C source to pragma(x, 'import_c', source) instead of LLVM IR")
    return found


def create_llvm(inputs: str | Sequence[str], output: str | None = None, options: Sequence[str] | None = None,
                cc: str | None = None) -> str:
    """Compile C/C++ ``inputs`` (source texts, or paths of existing files) to LLVM IR; return the IR text.

    :param output: where to write the ``.ll`` file (default: a temporary file).
    :param options: extra clang options (``-O3`` is always passed first, so yours can override it).
    :param cc: the clang to use (default: the first of :func:`find_clang`).
    :raises LoomValueError: when no clang is found.
    :raises loom.runtime.native_library.LinkError: when clang fails (with its messages).
    """
    sources = [inputs] if isinstance(inputs, str) else list(inputs)
    clang = cc or find_clang(required=True)[0]
    with tempfile.TemporaryDirectory(prefix="loom-clang-") as tmp:
        files = []
        for k, src in enumerate(sources):
            if os.path.isfile(src):
                files.append(src)
                continue
            path = os.path.join(tmp, f"input{k}.cc")
            with open(path, "w", encoding="utf-8") as f:
                f.write(src)
            files.append(path)
        target = output or os.path.join(tmp, "output.ll")
        if len(files) > 1:  # clang writes one .ll per input: compile each, then link them
            return _create_linked(clang, files, target, options, tmp)
        run_compiler([clang, "-O3", *(options or ()), "-S", "-emit-llvm", files[0], "-o", target],
                     "clang", step="compile")
        with open(target, encoding="utf-8") as f:
            return f.read()


def _create_linked(clang: str, files: list[str], target: str, options: Sequence[str] | None, tmp: str) -> str:
    """Several inputs: each to its own ``.ll``, then linked into one module by llvmlite."""
    texts = []
    for k, path in enumerate(files):
        one = os.path.join(tmp, f"part{k}.ll")
        run_compiler([clang, "-O3", *(options or ()), "-S", "-emit-llvm", path, "-o", one],
                     f"clang on {os.path.basename(path)}", step="compile")
        with open(one, encoding="utf-8") as f:
            texts.append(f.read())
    import llvmlite.binding as llvm

    merged = llvm.parse_assembly(texts[0])
    for text in texts[1:]:
        merged.link_in(llvm.parse_assembly(text))
    ir = str(merged)
    with open(target, "w", encoding="utf-8") as f:
        f.write(ir)
    return ir
