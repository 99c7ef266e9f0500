"""Kernels for the JIT cache tests, defined in a file so that other processes import the very same ones.

The on-disk key names the kernel by module and qualified name, so a child process
must import this module as ``jit_cache_kernels`` (not run it as ``__main__``):
:func:`child_command` starts one that way.  The child calls :func:`scale` once per
target it is given and prints, as one JSON line, each kernel's ``cache_info()``,
its output, and ``loom.backend.stats()`` of the whole process.  With ``--wait``
it first prints ``ready`` and waits for a line on stdin, so that a test can
start several children and release them together.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np

import loom
import loom.language as T

N = 7


def scale_fn(A: T.Tensor[("N",), T.float32], B: T.Tensor[("N",), T.float32], n: T.dyn["N"], k: float = 2.0):
    for i in T.serial(n):
        B[i] = A[i] * k + 1.0


def make(target: str, **options: Any) -> Any:
    """A new ``@loom.jit`` kernel over :func:`scale_fn` (its own memory cache; the disk entry is shared)."""
    return loom.jit(target=target, **options)(scale_fn)


def inputs(n: int = N) -> np.ndarray:
    return np.arange(n, dtype="float32") - 2.0


def expected(k: float = 2.0, n: int = N) -> np.ndarray:
    return inputs(n) * np.float32(k) + np.float32(1.0)


def run(kernel: Any, k: float = 2.0, n: int = N) -> np.ndarray:
    """Call ``kernel`` on fresh arrays; its output."""
    out = np.zeros(n, "float32")
    kernel(inputs(n), out, n, k)
    return out


def child_command(*targets: str, wait: bool = False) -> list[str]:
    """The command line of a child process calling the kernel for ``targets`` (see the module docstring)."""
    args = [*targets, "--wait"] if wait else list(targets)
    return [sys.executable, "-c", f"import jit_cache_kernels as K; K.main({args!r})"]


def child_env(cache_dir: str) -> dict[str, str]:
    """The environment of a child: this module importable, the disk cache in ``cache_dir``."""
    env = dict(os.environ, LOOM_CACHE_DIR=str(cache_dir), PYTHONDONTWRITEBYTECODE="1")
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop("LOOM_CACHE", None)
    return env


def main(argv: list[str]) -> None:
    if "--wait" in argv:
        print("ready", flush=True)
        sys.stdin.readline()
    report: dict[str, Any] = {"targets": {}}
    for target in (a for a in argv if a != "--wait"):
        kernel = make(target)
        out = run(kernel)
        report["targets"][target] = {"info": kernel.cache_info()._asdict(), "out": out.tolist()}
    report["stats"] = loom.backend.stats()
    print(json.dumps(report), flush=True)
