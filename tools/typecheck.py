"""Type-check the Loom packages and the typed user program with mypy (``make typecheck``).

The import name ``loom`` is the folder ``core/`` (plus ``plugins/`` as ``loom.plugins``) through
setuptools' package-dir mapping, and the editable install in ``.venv`` reaches it through an import
hook that mypy cannot follow.  So this script stages the import layout in ``build/typecheck/`` (an
ignored folder) out of symlinks::

    build/typecheck/loom/<entry>  -> core/<entry>        (every entry of core/)
    build/typecheck/loom/plugins  -> plugins/
    build/typecheck/loom_llvm     -> backends/llvm/loom_llvm
    build/typecheck/loom_c        -> backends/c_source/loom_c
    build/typecheck/loom_cuda     -> backends/cuda/loom_cuda

and runs mypy on those packages and on ``tests/typing/`` with the ``[tool.mypy]`` configuration
of pyproject.toml (whose ``mypy_path`` names the staging folder).  Paths in mypy's messages are
mapped back to the source files.  Extra arguments are passed on to mypy.  Exit status: mypy's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / "build" / "typecheck"
#: Staged name -> source folder, relative to the repository root.
BACKENDS = {"loom_llvm": "backends/llvm/loom_llvm", "loom_c": "backends/c_source/loom_c",
            "loom_cuda": "backends/cuda/loom_cuda"}
#: Typed user code that must check against the packages' annotations.
USER_CODE = ["tests/typing"]


def stage() -> dict[str, str]:
    """(Re)build the staging folder; return staged path prefix -> source path prefix."""
    STAGE.mkdir(parents=True, exist_ok=True)
    loom = STAGE / "loom"
    if loom.is_symlink() or loom.is_file():
        loom.unlink()
    shutil.rmtree(loom, ignore_errors=True)  # only symlinks inside: rmtree does not follow them
    loom.mkdir()
    links = {loom / "plugins": ROOT / "plugins"}
    for entry in (ROOT / "core").iterdir():
        if entry.name != "__pycache__" and entry.name != "plugins":
            links[loom / entry.name] = entry
    for name, source in BACKENDS.items():
        links[STAGE / name] = ROOT / source
    for link, target in links.items():
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=target.is_dir())
    rel = os.path.relpath
    mapping = {rel(link, ROOT): rel(target, ROOT) for link, target in links.items()}
    return dict(sorted(mapping.items(), key=lambda kv: -len(kv[0])))


def main(argv: list[str]) -> int:
    mapping = stage()
    packages = [os.path.relpath(STAGE / name, ROOT) for name in ("loom", *BACKENDS)]
    command = [sys.executable, "-m", "mypy", *packages, *USER_CODE, *argv]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    for line in (done.stdout + done.stderr).splitlines():
        for staged, source in mapping.items():
            if line.startswith(staged + os.sep) or line.startswith(staged + ":"):
                line = source + line[len(staged):]
                break
        print(line)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
