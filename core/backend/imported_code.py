"""Code a schedule links into its module: ``pragma(axis, "import_c" | "import_llvm", text)``.

A tensorized schedule usually calls a hand-written micro-kernel.  Its source
travels with the schedule as a pragma on any loop of the program::

    s[C].pragma(x, "import_c", c_source)      # C: the llvm and c targets
    s[C].pragma(x, "import_llvm", ll_text)    # LLVM IR (textual): the llvm target

Lowering keeps the pragma (``AttrStmt(loop, "pragma_import_c", "<source>")``); a
backend's ``render`` stage collects the texts with :func:`imported_sources` and
lists them among its sources (``import_c_0.c``, ``import_llvm_0.ll``...), so the
compile cache's key covers them and ``LOOM_DUMP_DIR`` shows them.  Then:

* ``c``: each C source is a translation unit of the module's shared library;
* ``llvm``: LLVM IR is linked into the module before optimization (calls into it
  may be inlined); C source is compiled by the system C compiler into a shared
  library that the module's JIT resolves its calls against, privately (two
  modules may define the same function differently);
* ``export_library`` links the same sources into the exported library.

The same text imported twice is imported once.

>>> import loom
>>> A = loom.placeholder((4,), name="A")
>>> B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
>>> s = loom.create_schedule(B.op)
>>> s[B].pragma(B.op.axis[0], "import_c", "int answer(void) { return 42; }")
>>> mod = loom.lower(s, [A, B])
>>> sorted(imported_sources(mod))
['import_c_0.c']
"""

from __future__ import annotations

import os
import shlex
import tempfile
from typing import Any, Mapping, Sequence

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.function import IRModule, PrimFunc
from ..ir.node import traversal_names
from ..runtime.native_library import run_compiler

__all__ = ["IMPORT_KINDS", "imported_code", "imported_sources", "sources_of", "compile_c_library"]

#: Pragma key (after ``pragma_``) -> (source kind, file suffix).
IMPORT_KINDS = {"import_c": ("c", "c"), "import_llvm": ("llvm", "ll")}


def imported_code(mod: IRModule | PrimFunc) -> dict[str, list[str]]:
    """``{"c": [...], "llvm": [...]}``: the imported texts of every function, in first-use order.

    :raises LoomTypeError: for an import pragma whose value is not a string.
    """
    found: dict[str, dict[str, None]] = {kind: {} for kind, _ in IMPORT_KINDS.values()}

    def visit(n: Any) -> None:
        if not isinstance(n, S.AttrStmt) or not n.attr_key.startswith("pragma_import_"):
            return
        kind = IMPORT_KINDS.get(n.attr_key[len("pragma_"):])
        if kind is None:
            return
        if not isinstance(n.value, E.StringImm):
            raise LoomTypeError(f"pragma {n.attr_key[len('pragma_'):]} needs the source text as a string, "
                                f"got {n.value}")
        found[kind[0]].setdefault(n.value.value)

    funcs = [mod] if isinstance(mod, PrimFunc) else [f for f in mod.functions.values() if isinstance(f, PrimFunc)]
    for f in funcs:
        for n in _statements_post_order(f.body):
            visit(n)
    return {kind: list(texts) for kind, texts in found.items()}


def _statements_post_order(body: S.Stmt) -> list[S.Stmt]:
    """The statements of ``body``, children first (as ``post_order_visit`` meets them).

    Expressions hold no statements, so they are not walked: the renderers ask for every build.
    """
    out: list[S.Stmt] = []
    stack: list[tuple[Any, bool]] = [(body, False)]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            out.append(n)
            continue
        stack.append((n, True))
        kids: list[Any] = []
        for name in traversal_names(type(n)):
            v = getattr(n, name)
            if isinstance(v, S.Stmt):
                kids.append(v)
            elif isinstance(v, tuple):
                kids.extend(x for x in v if isinstance(x, S.Stmt))
        stack.extend((k, False) for k in reversed(kids))
    return out


def imported_sources(mod: IRModule | PrimFunc) -> dict[str, str]:
    """The imported texts as render-stage sources: ``{"import_c_0.c": text, "import_llvm_0.ll": text, ...}``."""
    out: dict[str, str] = {}
    code = imported_code(mod)
    for key, (kind, suffix) in IMPORT_KINDS.items():
        for k, text in enumerate(code[kind]):
            out[f"{key}_{k}.{suffix}"] = text
    return out


def sources_of(sources: Mapping[str, str], kind: str) -> list[str]:
    """The imported texts of ``kind`` (``"c"`` or ``"llvm"``) among a module's sources, in order."""
    key, suffix = next((k, sfx) for k, (knd, sfx) in IMPORT_KINDS.items() if knd == kind)
    found = {}
    for name, text in sources.items():
        stem, dot, ext = name.rpartition(".")
        if ext == suffix and stem.startswith(f"{key}_") and stem[len(key) + 1:].isdigit():
            found[int(stem[len(key) + 1:])] = text
    return [found[k] for k in sorted(found)]


def compile_c_library(sources: Sequence[str], compiler: str = "cc", flags: Sequence[str] = ("-O2",)) -> bytes:
    """The shared library (its bytes) of the C ``sources``, built by the system C compiler.

    :raises LinkError: (a LoomError) with the command and the compiler's messages when it fails.
    """
    with tempfile.TemporaryDirectory(prefix="loom_import_") as work:
        files = []
        for k, text in enumerate(sources):
            files.append(os.path.join(work, f"import_c_{k}.c"))
            with open(files[-1], "w", encoding="utf-8") as fh:
                fh.write(text)
        out = os.path.join(work, "imported.so")
        command = [*shlex.split(compiler), *flags, "-shared", "-fPIC", "-o", out, *files, "-lm"]
        run_compiler(command, "compiling the C code imported with pragma import_c")
        with open(out, "rb") as fh:
            return fh.read()
