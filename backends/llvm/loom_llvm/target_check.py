"""What LLVM accepts in an ``llvm`` target, and whether this host can run what it compiles.

Two checks, both cheap for the usual target (the host's own triple and CPU):

* :func:`validate_attrs` runs when a ``Target`` is created: ``opt_level`` is
  0-3, ``mtriple`` names an architecture this LLVM has a backend for,
  ``mcpu`` and every ``mattr`` feature are names LLVM knows for that
  architecture.  An unknown name is a :class:`~loom.errors.TargetError`
  listing the close matches; LLVM itself would only print a warning and
  carry on (or, for some CPU names, end the process).
* :func:`cannot_run_reason` says why code compiled for a target must not run
  here: another architecture, a ``+feature`` the host lacks, or a named CPU
  whose features are not all the host's.  Such modules still build, print
  their assembly and export; calling them raises instead of dying of SIGILL.

LLVM prints its CPU and feature tables only on its way to ``exit()``
(``-mcpu=help``), so the tables are read once per architecture from a child
process.  What a named CPU implies is asked from the system C compiler
(``cc -march=CPU -Q --help=target``), which uses the same names on x86.
"""

from __future__ import annotations

import difflib
import functools
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from loom.errors import TargetError

__all__ = ["check_values", "validate_attrs", "cannot_run_reason", "llvm_names", "cpu_features", "arch_of",
           "host_feature_table"]

_HELP_SCRIPT = """
import llvmlite.binding as llvm, sys
llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
tm = llvm.Target.from_triple(sys.argv[1]).create_target_machine(cpu="help", features="")
tm.emit_assembly(llvm.parse_assembly("define void @f() { ret void }"))
"""

_ARCH_ALIASES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64"}


def arch_of(triple: str) -> str:
    """The architecture part of a target triple, normalised (``amd64-...`` -> ``x86_64``)."""
    arch = triple.split("-", 1)[0].lower()
    return _ARCH_ALIASES.get(arch, arch)


@functools.cache
def llvm_names(triple: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(cpu names, feature names)`` LLVM knows for ``triple``'s architecture (asked once per triple)."""
    try:
        proc = subprocess.run([sys.executable, "-c", _HELP_SCRIPT, triple], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        raise TargetError(f"cannot ask LLVM which CPUs {triple!r} has: {err}") from None
    text = proc.stdout + proc.stderr
    cpus_at, feats_at = text.find("Available CPUs"), text.find("Available features")
    if cpus_at < 0 or feats_at < 0:
        raise TargetError(f"cannot ask LLVM which CPUs {triple!r} has: {text.strip()[-300:]!r}")
    entry = re.compile(r"^  (\S+)\s+- ", re.M)
    return (frozenset(entry.findall(text[cpus_at:feats_at])), frozenset(entry.findall(text[feats_at:])))


def _close(name: str, known: frozenset[str]) -> str:
    near = difflib.get_close_matches(name, sorted(known), n=5, cutoff=0.6)
    return f"; close matches: {', '.join(near)}" if near else ""


def _check_triple(triple: str) -> None:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    try:
        llvm.Target.from_triple(triple)
    except RuntimeError as err:
        raise TargetError(f"mtriple={triple!r}: LLVM has no backend for it ({err})") from None


def check_values(given: Mapping[str, Any]) -> None:
    """Raise TargetError for attribute values that are wrong whatever LLVM knows (no LLVM needed)."""
    opt = given.get("opt_level")
    if opt is not None and not 0 <= opt <= 3:
        raise TargetError(f"opt_level must be 0, 1, 2 or 3, got {opt}")
    cores = given.get("num_cores")
    if cores is not None and cores < 0:
        raise TargetError(f"num_cores must be >= 0 (0: every usable core), got {cores}")
    bad_sign = [f for f in given.get("mattr") or () if f[0] not in "+-"]
    if bad_sign:
        raise TargetError(f"mattr entries are +feature or -feature, got {', '.join(map(repr, bad_sign))}")


def validate_attrs(given: Mapping[str, Any], host: tuple[str, str, tuple[str, ...]]) -> None:
    """Raise TargetError when an explicit ``llvm`` attribute is something LLVM does not know.

    ``host`` is ``(triple, cpu, enabled features)`` of this machine: the host's
    own values need no check, and asking LLVM about others costs a child process.
    """
    check_values(given)
    host_triple, host_cpu, host_features = host
    triple = str(given.get("mtriple") or host_triple)
    if triple != host_triple:
        _check_triple(triple)
    cpu = given.get("mcpu")
    mattr = tuple(given.get("mattr") or ())
    odd_cpu = cpu is not None and not (cpu == host_cpu and triple == host_triple)
    odd_features = [f for f in mattr if f not in host_features and "+" + f[1:] not in host_features]
    if not odd_cpu and not odd_features:
        return
    cpus, features = llvm_names(triple)
    if odd_cpu and cpu not in cpus:
        raise TargetError(f"mcpu={cpu!r} is not a CPU LLVM knows for {arch_of(triple)}{_close(str(cpu), cpus)}")
    for f in odd_features:
        if f[1:] not in features:
            raise TargetError(f"mattr: {f[1:]!r} is not a feature LLVM knows for {arch_of(triple)}"
                              f"{_close(f[1:], features)}")


# ---------------------------------------------------------------------------------------- running here

#: Feature families LLVM's code generator uses for ordinary arithmetic and memory code.  What a named
#: CPU also has (AMX, SGX, VP2INTERSECT, ...) is only reachable through intrinsics Loom never emits.
_CODEGEN_FEATURE = re.compile(r"^(sse|ssse3|avx|fma|f16c|bmi|lzcnt|popcnt|movbe|xop|tbm|adx|aes|vaes|pclmul|"
                              r"vpclmulqdq|gfni|sha|cx16|sahf|evex512|prfchw)")
_NEVER_GENERATED = {"avx512vp2intersect", "avx512er", "avx512pf", "avx5124fmaps", "avx5124vnniw"}


@functools.cache
def cpu_features(cpu: str) -> frozenset[str] | None:
    """The instruction-set features the system C compiler says ``-march=cpu`` enables; None if it cannot tell."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    try:
        proc = subprocess.run([cc, f"-march={cpu}", "-Q", "--help=target"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return frozenset(re.findall(r"^\s+-m([a-z0-9.\-]+)\s+\[enabled\]", proc.stdout, re.M))


@functools.cache
def host_feature_table() -> dict[str, bool]:
    """LLVM's table of this host's CPU features, asked once per process (a query costs about 0.3 ms).

    Every user of the host's features reads this one table: target defaults,
    the target machines that compile and print assembly, and :func:`cannot_run_reason`.
    Empty where LLVM cannot query the features on this host.
    """
    import llvmlite.binding as llvm

    try:
        return dict(llvm.get_host_cpu_features())
    except RuntimeError:
        return {}


def cannot_run_reason(triple: str, cpu: str, mattr: Sequence[str],
                      host: tuple[str, str, tuple[str, ...]]) -> str | None:
    """Why code for ``triple``/``cpu``/``mattr`` must not run on ``host``; None when it may.

    >>> from loom_llvm.plugin import host_cpu
    >>> cannot_run_reason("", "", (), host_cpu()) is None
    True
    >>> cannot_run_reason("aarch64-linux-gnu", "", (), ("x86_64-pc-linux-gnu", "znver4", ()))
    'it is aarch64 code and this host is x86_64'
    """
    host_triple, host_cpu, _ = host
    if triple and arch_of(triple) != arch_of(host_triple):
        return f"it is {arch_of(triple)} code and this host is {arch_of(host_triple)}"
    table = host_feature_table()
    missing = sorted({f[1:] for f in mattr if f.startswith("+") and table.get(f[1:]) is False})
    if missing:
        return f"it uses CPU features this host ({host_cpu}) lacks: {', '.join(missing)}"
    if not cpu or cpu in (host_cpu, "generic"):
        return None
    implied = cpu_features(cpu)
    if implied is None:
        return (f"this host is {host_cpu} and Loom cannot tell which features -mcpu={cpu} implies "
                f"(the system C compiler does not know that CPU)")
    disabled = {f[1:] for f in mattr if f.startswith("-")}
    missing = sorted(f for f in implied - disabled
                     if _CODEGEN_FEATURE.match(f) and f not in _NEVER_GENERATED and table.get(f) is False)
    if missing:
        return f"-mcpu={cpu} implies CPU features this host ({host_cpu}) lacks: {', '.join(missing)}"
    return None
