"""llvm target attributes are checked against LLVM, and code the host cannot run is export-only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import numpy as np
import pytest

import loom
from loom.errors import TargetError
from loom.runtime.native_library import LinkError
from loom_llvm import target_check
from loom_llvm.plugin import host_cpu

X86 = target_check.arch_of(llvm.get_process_triple()) == "x86_64"


def _doubler(target: str) -> loom.runtime.Module:
    A = loom.placeholder((64,), "float32", name="A")
    B = loom.compute((64,), lambda i: A[i] * 2.0, name="B")
    return loom.build(loom.create_schedule(B.op), [A, B], target=target, name="double")


def _run(f: loom.runtime.Module) -> np.ndarray:
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, "float32")
    f(a, b)
    return b


@pytest.mark.parametrize("text, message", [
    ("llvm -opt_level=-5", "opt_level must be 0, 1, 2 or 3, got -5"),
    ("llvm -opt_level=9", "opt_level must be 0, 1, 2 or 3, got 9"),
    ("llvm -num_cores=-1", "num_cores must be >= 0"),
    ("llvm -mtriple=garbage", "mtriple='garbage': LLVM has no backend"),
    ("llvm -mattr=avx2", r"mattr entries are \+feature or -feature"),
    ("llvm -mattr=+notafeature", "'notafeature' is not a feature LLVM knows"),
    ("llvm -mcpu=nonexistentcpu", "mcpu='nonexistentcpu' is not a CPU LLVM knows"),
])
def test_bad_attribute_values_are_target_errors(text, message):
    with pytest.raises(TargetError, match=message):
        loom.target.Target(text)


@pytest.mark.skipif(not X86, reason="x86 CPU names")
def test_unknown_cpu_lists_close_matches():
    with pytest.raises(TargetError, match="close matches: skylake-avx512"):
        loom.target.Target("llvm -mcpu=skylake-avx51")


def test_unknown_cpu_of_another_architecture_is_checked_against_that_architecture():
    with pytest.raises(TargetError, match="for aarch64; close matches: cortex-a7"):
        loom.target.Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a7x")
    assert loom.target.Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76").attrs["mcpu"] == "cortex-a76"


def test_unknown_cpu_never_reaches_llvm():
    # LLVM itself ends the process ("64-bit code requested on a subtarget...") for this one.
    code = textwrap.dedent("""
        import loom
        A = loom.placeholder((4,), name="A")
        B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
        try:
            loom.build(loom.create_schedule(B.op), [A, B], target="llvm -mcpu=nonexistentcpu")
        except loom.LoomError as err:
            print("refused:", type(err).__name__)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "refused: TargetError" in proc.stdout


def test_the_host_target_asks_llvm_nothing(monkeypatch):
    def fail(triple):
        raise AssertionError("the host's own target must not need LLVM's CPU tables")

    monkeypatch.setattr(target_check, "llvm_names", fail)
    triple, cpu, _ = host_cpu()
    assert loom.target.Target("llvm").attrs["mcpu"] == cpu
    assert loom.target.Target(f"llvm -mcpu={cpu} -mtriple={triple}").attrs["mcpu"] == cpu


def test_the_host_cpu_by_name_runs():
    f = _doubler(f"llvm -mcpu={host_cpu()[1]}")
    assert f.cannot_run is None
    np.testing.assert_array_equal(_run(f), np.arange(64, dtype="float32") * 2)


def test_cross_architecture_build_is_export_only(tmp_path, monkeypatch):
    f = _doubler("llvm -mtriple=aarch64-linux-gnu")
    assert "aarch64" in f.cannot_run
    with pytest.raises(loom.LoomError, match="cannot call 'double' here: it is aarch64 code.*export-only"):
        _run(f)
    asm = f.get_source("asm")
    assert "fmul" in asm or "fadd" in asm  # AArch64 mnemonics, not x86's mulps/addps
    f.save(tmp_path / "double.o")
    data = (tmp_path / "double.o").read_bytes()
    assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == 183  # EM_AARCH64
    f.save(tmp_path / "double.ll")
    assert "aarch64" in (tmp_path / "double.ll").read_text()
    monkeypatch.setenv("PATH", str(tmp_path))  # no cross compiler
    with pytest.raises(LinkError, match="needs a C compiler for that machine.*save"):
        f.export_library(tmp_path / "double.so")


def test_save_refuses_unknown_formats(tmp_path):
    with pytest.raises(loom.LoomValueError, match="'o', 'll' or 's'"):
        _doubler("llvm").save(tmp_path / "x.bin")


def _missing_feature() -> str | None:
    table = llvm.get_host_cpu_features()
    for name in ("sse4a", "xop", "fma4", "avx512fp16", "avx10.2-512", "amx-tile"):
        if table.get(name) is False:
            return name
    return None


def test_a_feature_the_host_lacks_is_export_only(tmp_path):
    feature = _missing_feature()
    if feature is None:
        pytest.skip("this host has every candidate feature")
    f = _doubler(f"llvm -mattr=+{feature}")
    with pytest.raises(loom.LoomError, match=f"lacks: {feature}"):
        _run(f)
    f.export_library(tmp_path / "double.so")  # same architecture: the host's cc links it
    assert (tmp_path / "double.so").stat().st_size > 0


@pytest.mark.skipif(not X86, reason="x86 CPU names")
def test_a_cpu_whose_features_the_host_lacks_is_export_only():
    host = host_cpu()
    for cpu in ("znver3", "znver2", "sapphirerapids", "icelake-server", "skylake-avx512"):
        reason = target_check.cannot_run_reason("", cpu, (), host)
        if reason is not None:
            break
    else:
        pytest.skip("this host runs code for every candidate CPU")
    f = _doubler(f"llvm -mcpu={cpu}")
    assert f.cannot_run == reason and "implies CPU features" in reason
    with pytest.raises(loom.LoomError, match="export-only"):
        _run(f)


@pytest.mark.skipif(not X86, reason="x86 CPU names")
def test_a_baseline_cpu_runs():
    f = _doubler("llvm -mcpu=x86-64")
    assert f.cannot_run is None
    np.testing.assert_array_equal(_run(f), np.arange(64, dtype="float32") * 2)


def test_a_cpu_the_system_compiler_does_not_know_is_not_run(monkeypatch):
    monkeypatch.setattr(target_check, "cpu_features", lambda cpu: None)
    reason = target_check.cannot_run_reason("", "some-cpu", (), ("x86_64-pc-linux-gnu", "host-cpu", ()))
    assert "cannot tell which features -mcpu=some-cpu implies" in reason


def test_the_cpu_tables_come_from_llvm():
    cpus, features = target_check.llvm_names(llvm.get_process_triple())
    assert host_cpu()[1] in cpus
    assert {f[1:] for f in host_cpu()[2]} <= features | {""}


def test_export_only_module_is_cached_and_rebuilt_identically(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))
    first = _doubler("llvm -mtriple=aarch64-linux-gnu")
    again = _doubler("llvm -mtriple=aarch64-linux-gnu")
    assert again.cannot_run == first.cannot_run
    assert again.get_source("ll") == first.get_source("ll")
    assert os.listdir(tmp_path / "cache")


def test_a_complete_target_string_is_checked_before_llvm_compiles():
    triple = llvm.get_process_triple()
    target = loom.target.Target(f"llvm -mtriple={triple} -mcpu=nonexistentcpu -mattr=+avx2")  # skips LLVM here
    with pytest.raises(TargetError, match="mcpu='nonexistentcpu' is not a CPU LLVM knows"):
        _doubler(target)


def test_a_cross_compiler_is_found_by_the_usual_names(tmp_path, monkeypatch):
    f = _doubler("llvm -mtriple=aarch64-unknown-linux-gnu")
    compiler = tmp_path / "aarch64-linux-gnu-gcc"  # Debian's name: the triple without its vendor
    compiler.write_text("#!/bin/sh\nexit 1\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert f._linker() == "aarch64-linux-gnu-gcc"
    compiler.rename(tmp_path / "aarch64-unknown-linux-gnu-gcc")
    assert f._linker() == "aarch64-unknown-linux-gnu-gcc"
