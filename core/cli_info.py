"""``loom info``: everything about this installation a bug report needs, in one place.

::

    $ loom info          # text
    $ loom info --json   # the same data machine-readably

It lists the versions of Loom, Python, numpy, llvmlite and LLVM, every plugin; the CPU
and its features (from LLVM when llvmlite is installed); the C and CUDA compilers on
``PATH`` and the GPUs ``nvidia-smi`` sees; the compile cache's folder and size; and
every ``LOOM_*`` variable in effect (:mod:`loom.envvars`), with malformed values and
unknown names (typos, with the closest known name) flagged.  Nothing here raises:
a missing tool is reported as missing, and the command exits 0.  External tools are
asked with a short timeout, so it stays fast.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import warnings
from typing import Any, TextIO

__all__ = ["add_parser", "run", "info_data", "print_info"]

#: Compilers looked up on PATH: the C compilers the c backend may use, and CUDA's.
COMPILERS = ("cc", "gcc", "clang", "nvcc")
#: Seconds any external tool may take before it is reported as not answering.
TOOL_TIMEOUT = 3.0


def add_parser(sub: Any) -> None:
    """Add ``info`` to the ``loom`` command's subparsers ``sub``."""
    text = "show versions, plugins, CPU, compilers, GPUs, the compile cache and LOOM_* settings"
    cmd = sub.add_parser("info", help=text, description=text)
    cmd.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``loom info`` for parsed ``args``; the exit status (always 0)."""
    out = out or sys.stdout
    data = info_data()
    try:
        if args.json:
            json.dump(data, out, indent=2)
            out.write("\n")
        else:
            print_info(data, out)
        out.flush()
    except BrokenPipeError:
        # The reader left (``loom info | head``); silence the flush at exit too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


# --------------------------------------------------------------------------- data


def _tool(command: list[str]) -> tuple[str | None, str | None]:
    """``(stdout, None)`` of a tool that ran and succeeded, else ``(None, why not)``."""
    if shutil.which(command[0]) is None:
        return None, "not found on PATH"
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"`{' '.join(command)}` did not answer within {TOOL_TIMEOUT:g} s"
    except OSError as err:
        return None, f"cannot run `{' '.join(command)}`: {err}"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()
        return None, f"`{' '.join(command)}` exited {done.returncode}" + (f": {tail[-1]}" if tail else "")
    return done.stdout, None


def _version_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # nvcc prints a banner first; its version is on the "release" line.
    return next((ln for ln in lines if ", release " in ln), lines[0] if lines else "")


def _compilers() -> list[dict[str, Any]]:
    rows = []
    for name in COMPILERS:
        text, problem = _tool([name, "--version"])
        rows.append({"name": name, "path": shutil.which(name), "version": _version_line(text) if text else None,
                     "problem": problem})
    return rows


def _gpus() -> dict[str, Any]:
    text, problem = _tool(["nvidia-smi", "-L"])
    names = [ln.strip() for ln in (text or "").splitlines() if ln.strip().startswith("GPU ")]
    return {"devices": names, "source": "nvidia-smi -L", "problem": problem}


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _llvm_and_cpu() -> tuple[dict[str, Any], dict[str, Any]]:
    """LLVM's version and the host CPU as LLVM sees it (name and enabled features)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cpu: dict[str, Any] = {"name": platform.processor() or platform.machine(), "machine": platform.machine(),
                           "features": [], "usable_cores": cores, "cores": os.cpu_count(), "source": "platform"}
    llvm: dict[str, Any] = {"llvmlite": _dist_version("llvmlite"), "llvm": None}
    if llvm["llvmlite"] is None:
        return llvm, cpu
    try:
        import llvmlite.binding as binding

        llvm["llvm"] = ".".join(map(str, binding.llvm_version_info))
        cpu["name"], cpu["source"] = binding.get_host_cpu_name(), "llvmlite"
        cpu["features"] = sorted(f for f, on in binding.get_host_cpu_features().items() if on)
    except Exception as err:  # noqa: BLE001 - report a broken llvmlite, keep going
        llvm["problem"] = f"{type(err).__name__}: {err}"
    return llvm, cpu


def _plugins() -> tuple[list[dict[str, Any]], list[str]]:
    from . import plugins

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a broken plugin is listed with its error below
            return [{k: p.to_dict()[k] for k in ("name", "version", "dist", "status", "error")}
                    for p in plugins.list_plugins()], []
    except Exception as err:  # noqa: BLE001 - info must not fail
        return [], [f"listing plugins failed: {type(err).__name__}: {err}"]


def _cache() -> dict[str, Any]:
    from .runtime import disk_cache

    out: dict[str, Any] = {"folder": None, "enabled": None, "entries": 0, "bytes": 0, "max_bytes": None,
                           "namespaces": {}, "problems": []}

    def ask(key: str, fn: Any) -> Any:
        try:
            out[key] = fn()
        except Exception as err:  # noqa: BLE001 - e.g. a malformed LOOM_CACHE_MAX_SIZE
            out["problems"].append(str(err))
        return out[key]

    ask("enabled", disk_cache.cache_enabled)
    ask("max_bytes", disk_cache.cache_max_size)
    folder = ask("folder", disk_cache.cache_root)
    if folder is None:
        return out
    problem = disk_cache.folder_problem(folder)
    if problem is not None:
        out["problems"].append(problem)
    usage = disk_cache.cache_usage(folder)
    out["namespaces"] = {ns: {"entries": n, "bytes": size} for ns, (n, size) in sorted(usage.items())}
    out["entries"] = sum(n for n, _ in usage.values())
    out["bytes"] = sum(size for _, size in usage.values())
    return out


def _environment() -> list[dict[str, Any]]:
    """Every ``LOOM_*`` variable set: known ones with their meaning (and a malformed value's error),
    unknown ones with the closest known name."""
    from . import envvars

    rows = []
    for name, value in envvars.in_effect().items():
        var = envvars.VARIABLES.get(name)
        row: dict[str, Any] = {"name": name, "value": value, "known": var is not None, "problem": None}
        if var is None:
            close = difflib.get_close_matches(name, list(envvars.VARIABLES), n=1, cutoff=0.6)
            row["problem"] = "unknown variable" + (f": did you mean {close[0]}?" if close else
                                                   "; Loom does not read it")
        else:
            row["doc"] = var.doc
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    var.get()
                except Exception as err:  # noqa: BLE001 - a malformed value: what using it would raise
                    row["problem"] = str(err)
            if caught and row["problem"] is None:
                row["problem"] = str(caught[0].message)
        rows.append(row)
    return rows


def info_data() -> dict[str, Any]:
    """Everything ``loom info`` shows, as JSON-ready data."""
    from . import __version__

    llvm, cpu = _llvm_and_cpu()
    plugin_rows, problems = _plugins()
    return {
        "loom": {"version": __version__, "distribution": _core_distribution(),
                 "path": os.path.dirname(os.path.abspath(__file__))},
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "platform": platform.platform(),
        "packages": {"numpy": _dist_version("numpy"), **llvm},
        "plugins": plugin_rows,
        "cpu": cpu,
        "compilers": _compilers(),
        "gpus": _gpus(),
        "cache": _cache(),
        "environment": _environment(),
        "problems": problems,
    }


def _core_distribution() -> dict[str, Any]:
    from .plugins.manager import CORE_DISTRIBUTION

    return {"name": CORE_DISTRIBUTION, "version": _dist_version(CORE_DISTRIBUTION)}


# --------------------------------------------------------------------------- text


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"


def print_info(data: dict[str, Any], out: TextIO) -> None:
    """Write ``data`` (from :func:`info_data`) as text."""
    loom, py, pk = data["loom"], data["python"], data["packages"]
    dist = loom["distribution"]
    installed = f"{dist['name']} {dist['version']}" if dist["version"] else f"{dist['name']} not installed"
    out.write(f"Loom {loom['version']} ({installed}) at {loom['path']}\n")
    out.write(f"Python {py['version']} ({py['implementation']}) {py['executable']}\n")
    out.write(f"Platform {data['platform']}\n")
    llvm = f"llvmlite {pk['llvmlite']} (LLVM {pk['llvm'] or '?'})" if pk["llvmlite"] else "llvmlite not installed"
    out.write(f"numpy {pk['numpy'] or 'not installed'}, {llvm}\n")
    if pk.get("problem"):
        out.write(f"  llvmlite problem: {pk['problem']}\n")

    out.write("\nPlugins:\n")
    for p in data["plugins"]:
        line = f"  {p['name']:<12} {p['version'] or '-':<10} {p['dist'] or '-':<16} {p['status']}"
        out.write(line.rstrip() + (f": {p['error']}" if p["error"] else "") + "\n")

    cpu = data["cpu"]
    out.write(f"\nCPU: {cpu['name']} ({cpu['machine']}), {cpu['usable_cores']} usable of {cpu['cores']} cores\n")
    if cpu["features"]:
        out.write(f"  features: {' '.join(cpu['features'])}\n")

    out.write("\nCompilers:\n")
    for c in data["compilers"]:
        out.write(f"  {c['name']:<6} " + (f"{c['version']} ({c['path']})" if c["version"] else c["problem"]) + "\n")
    gpus = data["gpus"]
    if gpus["devices"]:
        out.write("\nGPUs:\n" + "".join(f"  {name}\n" for name in gpus["devices"]))
    else:
        out.write("\nGPUs: none" + (f" (nvidia-smi: {gpus['problem']})" if gpus["problem"] else "") + "\n")

    cache = data["cache"]
    state = "on" if cache["enabled"] else "off by LOOM_CACHE" if cache["enabled"] is False else "?"
    limit = f", limit {_size(cache['max_bytes'])}" if cache["max_bytes"] is not None else ""
    out.write(f"\nCompile cache: {cache['folder']} ({state}): {cache['entries']} entries, "
              f"{_size(cache['bytes'])}{limit}\n")
    for problem in cache["problems"]:
        out.write(f"  problem: {problem}\n")

    out.write("\nLOOM_* variables in effect:" + ("" if data["environment"] else " none") + "\n")
    for row in data["environment"]:
        out.write(f"  {row['name']}={row['value']}" + (f"  <- {row['problem']}" if row["problem"] else "") + "\n")
    if data["problems"]:
        out.write("\nProblems:\n" + "".join(f"  {p}\n" for p in data["problems"]))
