"""Compile CUDA C with nvcc: a cubin for the target's GPU architecture and its PTX.

The commands are ``nvcc -cubin -arch=sm_XY -O3 -fmad=false ... -o k.cubin k.cu``
and the same with ``-ptx -arch=compute_XY``: the cubin runs on GPUs of that
architecture, the PTX on newer ones (the driver compiles it when a cubin does
not fit).  ``-fmad=false`` rounds every float operation as the IR does (numpy
too) unless the target opts into contraction with ``-fast_math`` (whose
approximate math functions the intrinsic rules choose: no ``-use_fast_math``,
which would also flush denormals and approximate every division).  A failure raises
:class:`NvccError` with the command and nvcc's output.  nvcc is found on the
PATH, else under ``$CUDA_HOME/bin`` or ``/usr/local/cuda/bin``.

>>> cubin, ptx = compile_cuda('extern "C" __global__ void k(float *a) { a[threadIdx.x] += 1.0f; }', "sm_80")
>>> cubin[:4], ".entry k" in ptx
(b'\\x7fELF', True)
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile

from loom.backend import ToolchainError

__all__ = ["NvccError", "find_nvcc", "nvcc_version", "compile_cuda", "nvcc_flags", "KNOWN_ARCHS"]

log = logging.getLogger("loom.backends.cuda")

#: GPU architectures a target may name (``sm_XY``); nvcc refuses the ones it no longer supports.
KNOWN_ARCHS = ("sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86",
               "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_101", "sm_103", "sm_110", "sm_120",
               "sm_121")


class NvccError(ToolchainError):
    """nvcc failed (or is missing); the message holds its command and output.

    ``command`` is the argument list, ``output`` the compiler's messages and
    ``source`` the text that failed (None when the compiler could not run).
    """


def find_nvcc() -> str | None:
    """The nvcc executable: on the PATH, else in ``$CUDA_HOME/bin`` or ``/usr/local/cuda/bin``."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return os.path.join(root, "bin", "nvcc")
    return None


def _require_nvcc() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise NvccError("nvcc was not found (searched the PATH, $CUDA_HOME/bin and /usr/local/cuda/bin): install "
                        "the CUDA toolkit to build for the cuda target")
    return nvcc


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    """The last line of ``nvcc --version`` (``Build cuda_13.0.r13.0/compiler...``), the cache key's part."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise NvccError(f"cannot run {nvcc} --version: {err}") from None
    lines = [x for x in out.splitlines() if x.strip()]
    return " | ".join(lines[-2:]) if lines else "unknown"


def nvcc_flags(fast_math: bool, flags: str = "") -> list[str]:
    """The flags of every build: optimization, the IR's float rounding (unless fast math), then ``flags``."""
    base = ["-O3", "-std=c++17", "-Xptxas=-O3"]
    # Fast math contracts a * b + c into FMAs; the approximate functions come from the intrinsic rules.
    base += ["-fmad=true"] if fast_math else ["-fmad=false"]
    return base + shlex.split(flags)


def _run(command: list[str], source: str, cwd: str) -> None:
    log.debug("nvcc: %s", shlex.join(command))
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=600)
    except (OSError, subprocess.SubprocessError) as err:
        raise NvccError(f"cannot run nvcc ({shlex.join(command)}): {err}", command, "", None) from None
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()
        raise NvccError(f"nvcc failed (exit {done.returncode}): {shlex.join(command)}\n{output}", command, output,
                        source)


def compile_cuda(source: str, arch: str, fast_math: bool = False, flags: str = "") -> tuple[bytes, str]:
    """``(cubin, ptx)`` of ``source`` for ``arch`` (``sm_80``).

    :raises NvccError: nvcc is missing or refuses the source (the message has the command and its output).
    """
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise NvccError(f"not a GPU architecture: {arch!r}; use sm_XY, one of {', '.join(KNOWN_ARCHS)}")
    nvcc = _require_nvcc()
    common = nvcc_flags(fast_math, flags)
    with tempfile.TemporaryDirectory(prefix="loom-cuda-") as tmp:
        src = os.path.join(tmp, "kernels.cu")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        _run([nvcc, "-cubin", f"-arch={arch}", *common, "-o", "kernels.cubin", "kernels.cu"], source, tmp)
        _run([nvcc, "-ptx", f"-arch=compute_{arch[3:]}", *common, "-o", "kernels.ptx", "kernels.cu"], source, tmp)
        with open(os.path.join(tmp, "kernels.cubin"), "rb") as fb:
            cubin = fb.read()
        with open(os.path.join(tmp, "kernels.ptx"), encoding="utf-8") as ft:
            ptx = ft.read()
    return cubin, ptx
