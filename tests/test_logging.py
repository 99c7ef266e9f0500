"""Logging under the ``loom`` logger: DEBUG timings, cache and compiler records, WARNINGs for requests
that are not honoured, and ``LOOM_LOG_LEVEL`` (in child processes: it acts at import)."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom import logconfig

needs = {kind: pytest.mark.skipif(kind not in loom.target.list_kinds(), reason=f"the {kind} backend is not installed")
         for kind in ("llvm", "c")}


def _add_one(n=16):
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] + 1.0, name="B")
    return loom.create_schedule(B.op), A, B


def _messages(caplog, level=logging.WARNING, prefix="loom"):
    return [r.getMessage() for r in caplog.records if r.levelno == level and r.name.startswith(prefix)]


def _child(code: str, tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_LOG")}
    full.update(LOOM_CACHE_DIR=str(tmp_path / "cache"), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=120)


# --------------------------------------------------------------------------- setup


def test_the_loom_logger_has_a_null_handler():
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("loom").handlers)


def test_configure_adds_one_handler_and_removes_it():
    out = io.StringIO()
    logger = logging.getLogger("loom")
    try:
        logconfig.configure("INFO", out)
        handler = logconfig.configure("DEBUG", out)  # replaces the first one
        assert [h for h in logger.handlers if isinstance(h, logging.StreamHandler)] == [handler]
        logging.getLogger("loom.some.module").debug("hello %d", 42)
        assert out.getvalue() == "[DEBUG loom.some.module] hello 42\n"
    finally:
        logconfig.configure(None)
    assert logger.level == logging.NOTSET
    assert not [h for h in logger.handlers if isinstance(h, logging.StreamHandler)]


def test_without_loom_log_level_import_prints_nothing(tmp_path):
    proc = _child("""
        import logging, loom
        logging.getLogger("loom.transform.vectorize").warning("not shown: the application configured nothing")
        print([type(h).__name__ for h in logging.getLogger("loom").handlers])
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['NullHandler']" and proc.stderr == ""


def test_loom_log_level_debug_shows_passes_stages_cache_and_compiler_commands(tmp_path):
    code = """
        import numpy as np, loom
        A = loom.placeholder((8,), name="A")
        B = loom.compute((8,), lambda i: A[i] * 3.0, name="B")
        s = loom.create_schedule(B.op)
        b = np.zeros(8, "float32")
        loom.build(s, [A, B], target="c", name="triple")(np.ones(8, "float32"), b)
        assert (b == 3).all()
    """
    if "c" not in loom.target.list_kinds():
        pytest.skip("the c backend is not installed")
    first = _child(code, tmp_path, LOOM_LOG_LEVEL="debug")
    assert first.returncode == 0, first.stderr
    err = first.stderr
    for expected in ("[DEBUG loom.transform.pass_base] pass StorageFlatten: ",
                     "[DEBUG loom.driver.lower] lower triple: ",
                     "[DEBUG loom.driver.build] build triple for c: lowered and split in ",
                     "[DEBUG loom.backend.stages] c backend: render stage in ",
                     "[DEBUG loom.backend.stages] c backend: compile stage in ",
                     "[DEBUG loom.backend.stages] c backend: compile cache miss, compiled into: ",
                     "[DEBUG loom.backends.c] cc ", "-shared -fPIC",
                     "[DEBUG loom.driver.build] build triple: "):
        assert expected in err, f"{expected!r} missing from:\n{err}"
    second = _child(code, tmp_path, LOOM_LOG_LEVEL="DEBUG")
    assert second.returncode == 0, second.stderr
    assert "c backend: build cache hit: " in second.stderr  # keyed before lowering: no stage runs
    assert "lower triple" not in second.stderr
    assert "compile stage" not in second.stderr and "[DEBUG loom.backends.c]" not in second.stderr
    quiet = _child(code, tmp_path, LOOM_LOG_LEVEL="WARNING")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_a_bad_loom_log_level_warns_and_import_still_works(tmp_path):
    proc = _child("import loom; print(loom.__version__)", tmp_path, LOOM_LOG_LEVEL="loud")
    assert proc.returncode == 0 and proc.stdout.strip() == loom.__version__
    assert "LOOM_LOG_LEVEL='loud': expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in proc.stderr


def test_every_pass_is_logged_with_its_time(caplog):
    caplog.set_level(logging.DEBUG, logger="loom")
    s, A, B = _add_one()
    loom.lower(s, [A, B], name="timed")
    passes = _messages(caplog, logging.DEBUG, "loom.transform.pass_base")
    assert any(m.startswith("pass StorageFlatten: ") and m.endswith(" ms") for m in passes)
    assert any(m.startswith("pass MakeAPI: ") for m in passes)


# --------------------------------------------------------------------------- requests not honoured


def _split_vectorized(n, factor):
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=factor)
    s[B].vectorize(inner)
    return s, A, B


def test_a_vectorize_that_stays_serial_is_a_warning_with_the_reason(caplog):
    s, A, B = _split_vectorized(20, 8)  # 8 does not divide 20: a guard inside the loop
    loom.lower(s, [A, B])
    [message] = _messages(caplog)
    assert message.startswith("vectorize(i.inner) is not honoured, the loop stays serial: the bounds guard")
    assert "partition_const_loop=True" in message


def test_vectorize_of_a_non_constant_extent_is_a_warning(caplog):
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    loom.lower(s, [A, B])
    [message] = _messages(caplog)
    assert message == "vectorize(i) is not honoured, the loop stays serial: its extent n is not a constant"


@pytest.mark.parametrize("n, config", [(32, {}), (loom.var("n"), {}), (20, {"partition_const_loop": True}),
                                       (20, {"disable_vectorize": True})])
def test_vectorize_that_is_honoured_or_turned_off_is_not_a_warning(caplog, n, config):
    # With a symbolic extent LoopPartition splits off a serial tail; the main loop is vector code.
    s, A, B = _split_vectorized(n, 8)
    with loom.build_config(**config):
        loom.lower(s, [A, B])
    assert _messages(caplog) == []


def _nested_parallel():
    A = loom.placeholder((8, 8), name="A")
    B = loom.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    s[B].parallel(B.op.axis[1])
    return s, A, B


@pytest.mark.parametrize("kind", [pytest.param(k, marks=needs[k]) for k in ("llvm", "c")])
def test_a_nested_parallel_loop_is_a_warning_once_per_build(caplog, kind):
    s, A, B = _nested_parallel()
    for build in (1, 2):
        f = loom.build(s, [A, B], target=kind)
        a = np.arange(64, dtype="float32").reshape(8, 8)
        b = np.zeros_like(a)
        f(a, b)
        np.testing.assert_array_equal(b, a + 1)
        messages = _messages(caplog)
        assert len(messages) == build, messages
    assert "the parallel loop j runs serially: it is nested in a parallel loop" in messages[0]


@pytest.mark.parametrize("kind", [pytest.param(k, marks=needs[k]) for k in ("llvm", "c")])
def test_a_single_parallel_loop_is_not_a_warning(caplog, kind):
    s, A, B = _add_one(64)
    s[B].parallel(B.op.axis[0])
    loom.build(s, [A, B], target=kind)
    assert _messages(caplog) == []


@needs["llvm"]
@needs["c"]
def test_a_host_that_a_cpu_target_does_not_use_is_a_warning(caplog):
    s, A, B = _add_one()
    f = loom.build(s, [A, B], target="c", target_host="llvm", name="hosted")
    assert f.info.kind == "c"
    [message] = _messages(caplog)
    assert message == "build hosted: the host llvm is not used: the CPU target c builds and runs all the code"
    caplog.clear()
    loom.build(s, [A, B], target="c", target_host="c")
    loom.build(s, [A, B], target="c")
    assert _messages(caplog) == []


@needs["llvm"]
def test_the_link_command_of_an_export_is_logged(caplog, tmp_path):
    caplog.set_level(logging.DEBUG, logger="loom")
    s, A, B = _add_one()
    loom.build(s, [A, B], target="llvm").export_library(str(tmp_path / "lib.so"))
    [link] = [m for m in _messages(caplog, logging.DEBUG, "loom.runtime.native_library") if m.startswith("link: ")]
    assert "-shared" in link and "(exit status 0)" in link
