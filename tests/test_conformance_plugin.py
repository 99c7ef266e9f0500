"""The conformance suite shipped in the package (loom.testing.conformance) runs, refuses bad usage, and fails
a broken backend.  Each check runs pytest in a child process, as a backend author would."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import loom
from loom.testing.conformance import test_intrinsics

PLUGIN = ["-p", "loom.testing.conformance.plugin"]
SUITE = ["--pyargs", "loom.testing.conformance"]
QUICK = "test_program and pipeline or test_intrinsic and exp-float32 or test_arithmetic_wraps and int8"

# A third-party backend package that computes a + b where the program says a * b: installed in a temp folder
# (module and dist-info with its entry point), so every process of the run, children included, loads it.
_BROKEN = '''
"""A deliberately wrong backend: the interpreter, but every multiplication adds."""
from loom.ir import expr as E
from loom.ir.functor import Mutator
from loom.plugins import hookimpl
from loom.runtime.interp_module import InterpBackend


class _MulToAdd(Mutator):
    def visit_Mul(self, e):
        return E.Add(self.visit(e.a), self.visit(e.b))


class BrokenBackend(InterpBackend):
    kind = "brokenkind"

    def render(self, mod, options):
        funcs = {k: f.with_body(_MulToAdd().visit(f.body)) for k, f in mod.functions.items()}
        return super().render(mod.with_(functions=funcs), options)


@hookimpl
def loom_target_kinds():
    from loom.target import TargetKind
    return [TargetKind("brokenkind", "cpu", {}, default_keys=("cpu",), doc="wrong on purpose")]


@hookimpl
def loom_backend(target_kind):
    return BrokenBackend() if target_kind == "brokenkind" else None
'''


def _pytest(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=cwd)


def _summary(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("plugin", [[], PLUGIN], ids=["entry-point", "dash-p"])
def test_the_suite_passes_for_interp(plugin):
    """The documented command (the plugin comes from loom-compiler's pytest11 entry point), and with -p too."""
    proc = _pytest(*plugin, *SUITE, "--loom-kind=interp", "-k", QUICK)
    assert proc.returncode == 0, _summary(proc)
    passed = [line for line in proc.stdout.splitlines() if line.startswith("PASSED ")]
    assert len(passed) >= 5 and all("[interp-" in line for line in passed), _summary(proc)


def test_python_dash_m_runs_the_suite_with_its_plugin(tmp_path):
    cmd = [sys.executable, "-m", "loom.testing.conformance", "-p", "no:cacheprovider", "--loom-kind=interp,c",
           "-k", "test_program and pipeline-bound or test_random_pipeline", "-rA"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, _summary(proc)
    passed = {line.split("::")[-1] for line in proc.stdout.splitlines() if line.startswith("PASSED ")}
    assert passed == {"test_program[interp-pipeline-bound]", "test_program[c-pipeline-bound]",
                      "test_random_pipeline_schedules[interp]", "test_random_pipeline_schedules[c]"}, _summary(proc)
    assert list(tmp_path.iterdir()) == []  # no .hypothesis, no cache beside the caller


def test_an_unknown_kind_is_a_usage_error_naming_the_installed_kinds():
    proc = _pytest(*PLUGIN, *SUITE, "--loom-kind=interp,no_such_kind")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, _summary(proc)
    assert "no_such_kind" in proc.stderr and "interp" in proc.stderr and "llvm" in proc.stderr, _summary(proc)


_NO_BACKEND = '''
from loom.plugins import hookimpl


@hookimpl
def loom_target_kinds():
    from loom.target import TargetKind
    return [TargetKind("kindonly", "cpu", {}, default_keys=("cpu",), doc="a kind nobody builds")]
'''


def _install(folder: Path, module: str, source: str) -> dict[str, str]:
    """A plugin package in ``folder`` (module and dist-info with its ``loom`` entry point); the environment
    that puts it on the path of every process."""
    (folder / f"{module}.py").write_text(source)
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[loom]\n{module} = {module}\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def test_a_kind_without_a_backend_is_a_usage_error(tmp_path):
    proc = _pytest(*PLUGIN, *SUITE, "--loom-kind=kindonly", env=_install(tmp_path, "loom_kindonly", _NO_BACKEND))
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, _summary(proc)
    assert "kindonly" in proc.stderr and "no backend" in proc.stderr, _summary(proc)


def test_authors_get_the_fixtures_in_their_own_tests(tmp_path):
    (tmp_path / "test_mine.py").write_text(textwrap.dedent("""
        import numpy as np, loom

        def test_add_one(kind_under_test, loom_kind):
            assert kind_under_test.name == loom_kind
            A = loom.placeholder((5,), name="A")
            B = loom.compute((5,), lambda i: A[i] + 1.0, name="B")
            s = loom.create_schedule(B.op)
            if kind_under_test.on_device:
                from loom.testing.conformance.harness import bind_root
                bind_root(s, B)
            f = kind_under_test.build(s, [A, B])
            a = np.arange(5, dtype="float32")
            assert (kind_under_test.run(f, a, np.zeros(5, "float32"))[-1] == a + 1).all()
    """))
    proc = _pytest(*PLUGIN, "--loom-kind=interp,llvm,ext_dev", str(tmp_path / "test_mine.py"), cwd=tmp_path)
    assert proc.returncode == 0, _summary(proc)
    for kind in ("interp", "llvm", "ext_dev"):
        assert f"PASSED test_mine.py::test_add_one[{kind}]" in proc.stdout, _summary(proc)


def test_a_backend_with_wrong_results_fails_the_suite(tmp_path):
    env = _install(tmp_path, "loom_broken", _BROKEN)
    picked = "test_program and (pipeline or matmul_default) or test_bad_arguments or test_export"
    proc = _pytest(*PLUGIN, *SUITE, "--loom-kind=brokenkind", "-k", picked, env=env)
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, _summary(proc)
    failed = {line.split("::")[-1].split(" ")[0] for line in proc.stdout.splitlines() if line.startswith("FAILED ")}
    assert {"test_program[brokenkind-pipeline-cpu]", "test_program[brokenkind-matmul_default-bound]",
            "test_bad_arguments_raise_and_never_write[brokenkind]",
            "test_export_and_load_in_a_fresh_process[brokenkind-matmul_blocked]"} <= failed, _summary(proc)
    assert "Mismatched elements" in proc.stdout, _summary(proc)
    # the same run, with the installed plugin present, passes for a correct kind: the failure is the backend's
    proc = _pytest(*PLUGIN, *SUITE, "--loom-kind=interp", "-k", picked, env=env)
    assert proc.returncode == 0, _summary(proc)


def test_every_elementwise_intrinsic_is_checked():
    """An op with a numpy implementation is in test_intrinsics, or said here why it is not elementwise."""
    not_elementwise = {
        "tir.likely": "a branch hint on a condition, not a value",
        "tir.tvm_storage_sync": "a barrier (test_threads)",
        "tir.tvm_access_ptr": "a pointer into a buffer (tests/te/test_tensorize.py)",
        "tir.type_annotation": "a dtype marker inside tvm_access_ptr, not a value",
    }
    checked = {f"tir.{op}" for op, _ in test_intrinsics._cases()}
    missing = [name for name in loom.ir.op.list_ops()
               if loom.ir.Op.get(name).info.numpy_impl is not None and name not in checked | set(not_elementwise)]
    assert not missing, f"add these intrinsics to loom/testing/conformance/test_intrinsics.py: {missing}"
