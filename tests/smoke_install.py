"""Install smoke test: a non-editable install into a fresh virtualenv works (``make smoke``).

Run with the base interpreter (``python3 tests/smoke_install.py``), not the
project's ``.venv``.  It

1. copies the repository's top-level files and the package folders (``core``,
   ``plugins``, ``backends``) into a temporary folder, so the build writes
   nothing into the checkout and no stale ``build/`` folder leaks into a wheel;
2. creates a fresh virtualenv there and runs
   ``pip install . backends/llvm backends/c_source`` (regular wheels, built in
   isolated environments: the fresh venv's own setuptools may be too old), then
   ``pip check``;
3. runs this file again with the new interpreter in isolated mode (``-I``: no
   ``PYTHONPATH``, no script folder on ``sys.path``) from a folder outside the
   source tree, which checks that ``loom`` comes from site-packages, that every
   file of the source packages was installed (package data included), that
   ``loom plugins`` lists both backends with the core distribution pinned, and
   that a kernel built with ``llvm`` and with ``c`` agrees with numpy.

Exit status 0 means all of that passed; the last line says so with the time taken.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Folders copied for the build; every other top-level folder is not part of a distribution.
PACKAGE_DIRS = ("core", "plugins", "backends")
#: What is installed: the core and the two CPU backends (loom-cuda needs no GPU to install, but
#: it adds nothing this test can run).
INSTALL = (".", "backends/llvm", "backends/c_source")
#: Where each installed package's files come from, relative to the repository root.
SOURCES = {"loom": "core", "loom/plugins": "plugins", "loom_llvm": "backends/llvm/loom_llvm",
           "loom_c": "backends/c_source/loom_c"}
# Compiled extensions an editable install built in place are junk too: the wheel must build its own.
_JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.egg-info", "build", "dist", ".*")
#: Source files compiled into extension modules (setup.py) rather than installed.
_COMPILED_SOURCES = (".c",)


def _step(message: str) -> None:
    print(f"smoke: {message}", flush=True)


def _run(command: list[str], **kwargs: object) -> None:
    done = subprocess.run(command, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        sys.exit(f"smoke: FAILED (exit status {done.returncode}): {' '.join(command)}")


def _copy_sources(dest: Path) -> None:
    for entry in ROOT.iterdir():
        if entry.is_file() and not entry.name.startswith("."):
            shutil.copy2(entry, dest / entry.name)
    for name in PACKAGE_DIRS:
        shutil.copytree(ROOT / name, dest / name, ignore=_JUNK)


def _clean_env(**extra: str) -> dict[str, str]:
    # Nothing from the caller's environment may point Python at the checkout or another venv.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "LOOM_")) and k not in ("VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    env.update(extra)
    return env


def install_and_check(work: Path) -> None:
    """Copy, install into ``work/venv`` and run the checks there."""
    start = time.perf_counter()
    src = work / "src"
    src.mkdir()
    _copy_sources(src)
    _step(f"creating a fresh virtualenv in {work / 'venv'}")
    _run([sys.executable, "-m", "venv", str(work / "venv")])
    python = str(work / "venv" / "bin" / "python")
    _step(f"pip install {' '.join(INSTALL)} (non-editable)")
    env = _clean_env()
    _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          *(str(src / p) for p in INSTALL)], env=env, cwd=src)
    _run([python, "-m", "pip", "check", "--disable-pip-version-check"], env=env, cwd=work)
    outside = work / "elsewhere"
    outside.mkdir()
    _step("checking the installed packages from outside the source tree")
    # Compared with the copy: others may be editing the checkout meanwhile.
    _run([python, "-I", str(Path(__file__).resolve()), "--check", str(src)],
         env=_clean_env(LOOM_CACHE_DIR=str(work / "cache")), cwd=outside)
    _step(f"passed in {time.perf_counter() - start:.1f} s")


# --------------------------------------------------------------------------- run inside the fresh venv


def _files(folder: Path, skip: tuple[str, ...] = ()) -> set[str]:
    out = set()
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix not in (".pyc", *_COMPILED_SOURCES) \
                and not any(rel.parts[0] == s for s in skip):
            out.add(rel.as_posix())
    return out


def check(source_root: Path) -> None:
    """The checks that run in the fresh venv (``--check``)."""
    import importlib.metadata as metadata
    import sysconfig

    import numpy as np

    import loom

    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    problems: list[str] = []

    def expect(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    installed = Path(loom.__file__).resolve().parent
    expect(installed.parent == site, f"loom imported from {installed}, not from {site}")
    for module in ("loom_llvm", "loom_c"):
        where = Path(__import__(module).__file__).resolve().parent
        expect(where.parent == site, f"{module} imported from {where}, not from {site}")

    # Every file of the source packages (package data included) was installed.
    for package, source in SOURCES.items():
        skip = ("plugins",) if package == "loom" else ()  # loom/plugins comes from plugins/
        missing = _files(source_root / source) - _files(site / package, skip)
        expect(not missing, f"files of {source}/ missing from the installed {package}/: {sorted(missing)}")

    # The optional native call path and build-cache tree walk were compiled (this machine has a C compiler) and reads numpy arrays right.
    from loom.runtime.fast_path import native_extension

    expect(native_extension() is not None, "loom.runtime._fastcall was not built or failed its probe")
    expect(importlib.util.find_spec("loom.driver._tree_state") is not None, "loom.driver._tree_state was not built")

    version = metadata.version("loom-compiler")
    expect(version == loom.__version__, f"loom-compiler {version} installed, loom.__version__ is {loom.__version__}")
    for dist in ("loom-llvm", "loom-c"):
        requires = metadata.requires(dist) or []
        expect(f"loom-compiler=={metadata.version(dist)}" in requires,
               f"{dist} {metadata.version(dist)} requires {requires}, not loom-compiler pinned to its release")

    # `loom plugins` (the console script of the install) lists both backends.
    script = Path(sys.executable).parent / "loom"
    done = subprocess.run([str(script), "plugins", "--json"], capture_output=True, text=True)
    expect(done.returncode == 0, f"`loom plugins --json` exited {done.returncode}: {done.stderr}")
    rows = {p["name"]: p for p in json.loads(done.stdout)["plugins"]} if done.returncode == 0 else {}
    for name, dist in (("builtin", "loom-compiler"), ("llvm", "loom-llvm"), ("c", "loom-c")):
        row = rows.get(name, {})
        expect(row.get("dist") == dist and row.get("status") in ("builtin", "loaded")
               and row.get("version") == loom.__version__, f"`loom plugins` row for {name}: {row or 'missing'}")

    # A kernel with a vectorized inner loop and a parallel outer loop, on both backends.
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = loom.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(inner)
    s[B].parallel(outer)
    a = np.random.default_rng(0).standard_normal(1000).astype("float32")
    for target in ("llvm", "c"):
        b = np.zeros_like(a)
        loom.build(s, [A, B], target=target)(a, b)
        expect(np.allclose(b, a * 2 + 1), f"the {target} kernel's result differs from numpy")

    if problems:
        sys.exit("smoke: FAILED\n  " + "\n  ".join(problems))
    print(f"smoke: loom {loom.__version__} from {installed}: plugins, package files and llvm/c kernels OK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="SOURCE_ROOT", help=argparse.SUPPRESS)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = parser.parse_args()
    if args.check:
        check(Path(args.check))
        return
    work = Path(tempfile.mkdtemp(prefix="loom-smoke-"))
    try:
        install_and_check(work)
    finally:
        if args.keep:
            _step(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
