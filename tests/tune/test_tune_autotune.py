"""``@loom.autotune``: the best static-parameter config of a ``@loom.jit`` kernel per key, kept on disk."""

import importlib
import logging
import os
import threading

import numpy as np
import pytest

import loom
import loom.language as T
from loom.errors import LoomError, LoomTypeError, LoomValueError
from loom.jit import JITKernel
from loom.testing.conformance.harness import buildable_cpu_kinds
from loom.tune.autotune import AutotuneError, autotune

AT = importlib.import_module("loom.tune.autotune")  # the module (loom.tune may export the function as autotune)

_KINDS = buildable_cpu_kinds()
TARGET = "llvm" if "llvm" in _KINDS else _KINDS[0]
Vec = T.Tensor[("N",), "float32"]
Size = T.dyn["N"]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Each test its own disk cache (the JIT's and autotune's), so that nothing is shared between tests."""
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LOOM_CACHE", "1")
    return tmp_path / "cache"


@pytest.fixture
def measured(monkeypatch):
    """Record each measurement (its arguments) and answer with the next of ``measured.times``, else real time."""
    class Recorder:
        calls = []
        times = []

    real = AT._measure

    def fake(module, args, number, repeat, min_repeat_ms):
        Recorder.calls.append(list(args))
        seconds = real(module, args, 1, 1, 0.0)
        return Recorder.times.pop(0) if Recorder.times else seconds

    monkeypatch.setattr(AT, "_measure", fake)
    return Recorder


def make_scale(**options):
    """A fresh kernel object of the same source each time (as a new process would define it)."""
    @autotune(configs=[{"REPS": 1}, {"REPS": 2}, {"REPS": 3}], key=["A"], **options)
    @loom.jit(target=TARGET)
    def scale(A: Vec, B: Vec, REPS: int = 1):
        for r in T.serial(REPS):
            for i in T.serial(A.shape[0]):
                B[i] = A[i] * 2.0
    return scale


# -- choosing -------------------------------------------------------------------------------------------
def test_a_failing_config_is_skipped_and_the_result_is_right(caplog):
    @autotune(configs=[{"REPS": 1}, {"REPS": "many"}, {"REPS": 40}], key=["A"])
    @loom.jit(target=TARGET)
    def repeat_double(A: Vec, B: Vec, REPS: int = 1):
        for r in T.serial(REPS):   # REPS=40 does the same work 40 times
            for i in T.serial(A.shape[0]):
                B[i] = A[i] * 2.0

    a, b = np.arange(512, dtype="float32"), np.zeros(512, "float32")
    with caplog.at_level(logging.WARNING, logger="loom.tune.autotune"):
        repeat_double(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    assert repeat_double.best_config(a, b) in [{"REPS": 1}, {"REPS": 40}]
    (timings,) = repeat_double.timings.values()
    assert isinstance(timings["REPS=1"], float) and isinstance(timings["REPS=40"], float)
    assert "static parameter REPS is annotated int" in timings["REPS='many'"]
    assert "REPS='many'" in caplog.text and "skipped 1 of 3" in caplog.text


def test_the_fastest_measured_config_is_chosen(measured):
    scale = make_scale()
    measured.times = [3e-3, 1e-3, 2e-3]
    a, b = np.ones(16, "float32"), np.zeros(16, "float32")
    scale(a, b)
    assert scale.best_config(a, b) == {"REPS": 2}
    assert list(scale.timings.values()) == [{"REPS=1": 3e-3, "REPS=2": 1e-3, "REPS=3": 2e-3}]
    assert scale.kernel.cache_info().size == 3   # every config compiled once, the best reused
    np.testing.assert_array_equal(b, 2 * a)


def test_every_config_failing_lists_each_error():
    @autotune(configs=[{"K": "a"}, {"K": "b"}], key=[])
    @loom.jit(target=TARGET)
    def bad(A: Vec, K: int = 1):
        for i in T.serial(A.shape[0]):
            A[i] = A[i] + K

    with pytest.raises(AutotuneError) as err:
        bad(np.zeros(4, "float32"))
    assert isinstance(err.value, LoomError)
    assert "every config failed" in str(err.value)
    assert "K='a': LoomTypeError" in str(err.value) and "K='b': LoomTypeError" in str(err.value)


def test_a_config_that_raises_at_run_time_is_skipped(measured):
    @autotune(configs=[{"BLOCK": 3}, {"BLOCK": 4}], key=["A"])
    @loom.jit(target=TARGET)
    def blocked(A: Vec, B: Vec, BLOCK: int = 4):
        assert A.shape[0] % BLOCK == 0, "N must be a multiple of BLOCK"
        for i in T.serial(A.shape[0] // BLOCK):
            for j in T.unroll(BLOCK):
                B[i * BLOCK + j] = A[i * BLOCK + j] + 1.0

    a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    blocked(a, b)
    assert blocked.best_config(a, b) == {"BLOCK": 4}
    (timings,) = blocked.timings.values()
    assert "multiple of BLOCK" in timings["BLOCK=3"]
    np.testing.assert_array_equal(b, a + 1)


# -- the caller's data --------------------------------------------------------------------------------
@autotune(configs=[{"UNROLL": 1}, {"UNROLL": 2}], key=["X"])
@loom.jit(target=TARGET)
def accumulate(X: Vec, Y: Vec, UNROLL: int = 1):
    for i in T.serial(X.shape[0] // UNROLL):
        for j in T.unroll(UNROLL):
            Y[i * UNROLL + j] = Y[i * UNROLL + j] + X[i * UNROLL + j]


@pytest.mark.parametrize("kind", ["numpy", "loom.nd"])
def test_tuning_runs_on_copies(kind, measured):
    x, y = np.arange(8, dtype="float32"), np.ones(8, "float32")
    if kind == "loom.nd":
        x, y = loom.nd.array(x), loom.nd.array(y)
    accumulate.cache_clear()
    accumulate(x, y)   # benchmarks run many times; only this call adds X to Y
    host = y.numpy() if kind == "loom.nd" else y
    np.testing.assert_array_equal(host, 1 + np.arange(8, dtype="float32"))
    assert len(measured.calls) == 2
    for args in measured.calls:
        assert all(arg is not x and arg is not y for arg in args)


def test_copies_keep_strides():
    base = np.arange(24, dtype="float32").reshape(4, 6)
    view = base[:, 1:5:2]
    copy = AT._copy_numpy(view)
    assert copy.strides == view.strides and not np.shares_memory(copy, base)
    np.testing.assert_array_equal(copy, view)


# -- keys ---------------------------------------------------------------------------------------------
def test_the_key_tells_shapes_and_dtypes_apart(measured):
    scale = make_scale()
    scale(np.ones(8, "float32"), np.zeros(8, "float32"))
    scale(np.ones(8, "float32"), np.zeros(8, "float32"))   # same key: nothing timed
    assert len(measured.calls) == 3
    scale(np.ones(16, "float32"), np.zeros(16, "float32"))
    assert len(measured.calls) == 6
    assert sorted(scale.timings) == [f"A=float32[16], target={TARGET}", f"A=float32[8], target={TARGET}"]


def test_a_scalar_key_is_its_value(measured):
    @autotune(configs=[{"U": 1}, {"U": 2}], key="alpha")
    @loom.jit(target=TARGET)
    def axpy(X: Vec, Y: Vec, alpha: float, U: int = 1):
        for i in T.serial(X.shape[0] // U):
            for j in T.unroll(U):
                Y[i * U + j] = Y[i * U + j] + alpha * X[i * U + j]

    x = np.ones(4, "float32")
    for alpha in (2.0, 2.0, 3.0):
        axpy(x, np.zeros(4, "float32"), alpha)
    assert len(measured.calls) == 4
    assert sorted(axpy.timings) == [f"alpha=2.0, target={TARGET}", f"alpha=3.0, target={TARGET}"]


def test_passing_the_tuned_parameter_bypasses_tuning(measured):
    scale = make_scale()
    a, b = np.ones(4, "float32"), np.zeros(4, "float32")
    scale(a, b, 2)
    scale(a, b, REPS=3)
    assert measured.calls == [] and scale.timings == {}
    assert scale.cache_info().size == 2   # the JIT kernel's counters, through the autotuner
    with pytest.raises(LoomValueError, match="without the tuned parameters"):
        scale.best_config(a, b, REPS=2)


def test_threads_making_the_same_first_call_tune_once(measured):
    scale = make_scale()
    a = np.ones(64, "float32")
    outs = [np.zeros(64, "float32") for _ in range(4)]
    threads = [threading.Thread(target=scale, args=(a, out)) for out in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(measured.calls) == 3
    for out in outs:
        np.testing.assert_array_equal(out, 2 * a)


# -- the disk cache -----------------------------------------------------------------------------------
def test_a_new_kernel_object_reuses_the_disk_entry(measured, private_cache):
    a, b = np.ones(32, "float32"), np.zeros(32, "float32")
    measured.times = [5e-3, 4e-3, 1e-3]
    first = make_scale()
    first(a, b)
    assert len(measured.calls) == 3
    assert len(os.listdir(private_cache / "autotune")) >= 2   # an entry and its record

    second = make_scale()   # another object, same source: as in a new process
    b2 = np.zeros(32, "float32")
    second(a, b2)
    assert len(measured.calls) == 3   # nothing timed
    assert second.best_config(a, b2) == {"REPS": 3}
    assert second.timings == first.timings
    np.testing.assert_array_equal(b2, 2 * a)

    second.cache_clear()   # forgets this process's choice: the disk still has it
    second(a, b2)
    assert len(measured.calls) == 3


def test_another_target_or_kernel_source_is_another_entry(measured):
    a, b = np.ones(8, "float32"), np.zeros(8, "float32")
    make_scale()(a, b)

    @autotune(configs=[{"REPS": 1}, {"REPS": 2}, {"REPS": 3}], key=["A"])
    @loom.jit(target=TARGET)
    def scale(A: Vec, B: Vec, REPS: int = 1):
        for r in T.serial(REPS):
            for i in T.serial(A.shape[0]):
                B[i] = A[i] * 3.0
    scale(a, b)
    assert len(measured.calls) == 6


def test_loom_cache_0_turns_the_disk_off(measured, private_cache, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE", "0")
    a, b = np.ones(8, "float32"), np.zeros(8, "float32")
    make_scale()(a, b)
    make_scale()(a, b)
    assert len(measured.calls) == 6
    assert not (private_cache / "autotune").exists()


def test_disk_cache_false_keeps_one_kernel_off_the_disk(measured, private_cache):
    a, b = np.ones(8, "float32"), np.zeros(8, "float32")
    make_scale(disk_cache=False)(a, b)
    make_scale(disk_cache=False)(a, b)
    assert len(measured.calls) == 6
    assert not (private_cache / "autotune").exists()


def test_an_unusable_disk_entry_is_timed_again(measured, caplog):
    a, b = np.ones(8, "float32"), np.zeros(8, "float32")
    make_scale()(a, b)
    second = make_scale()
    second._labels = ["one", "two", "three"]   # the stored entry no longer matches what this kernel expects
    with caplog.at_level(logging.WARNING, logger="loom.tune.autotune"):
        second(a, b)
    assert len(measured.calls) == 6 and "cannot be used" in caplog.text
    third = make_scale()
    third._labels = second._labels
    third(a, b)   # the entry was replaced by the second kernel's: read, nothing timed
    assert len(measured.calls) == 6


def test_a_shared_cache_folder_is_refused(measured, private_cache, caplog):
    private_cache.mkdir(mode=0o700)
    private_cache.chmod(0o777)   # others could plant entries: not trusted
    a, b = np.ones(8, "float32"), np.zeros(8, "float32")
    with caplog.at_level(logging.WARNING, logger="loom.tune.autotune"):
        make_scale()(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    assert len(measured.calls) == 3 and "without the disk cache" in caplog.text
    assert not (private_cache / "autotune").exists()


# -- plain functions, and mistakes ---------------------------------------------------------------------
def test_a_plain_function_is_wrapped_in_loom_jit():
    @autotune(configs=[{"U": 1}, {"U": 2}], key=["A"])
    def negate(A: Vec, B: Vec, U: int = 1):
        for i in T.serial(A.shape[0] // U):
            for j in T.unroll(U):
                B[i * U + j] = -A[i * U + j]

    a, b = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    with loom.Target(TARGET):
        negate(a, b)
    np.testing.assert_array_equal(b, -a)
    assert isinstance(negate.kernel, JITKernel)


def _kernel(A: Vec, n: Size, BLOCK: int = 4, dt: T.dtype = "float32"):
    for i in T.serial(n):
        A[i] = T.cast(BLOCK, dt)


@pytest.mark.parametrize("configs, key, words", [
    ([{"BLOK": 4}], [], "configs[0] sets 'BLOK', which is not a parameter of _kernel (static parameters: "
                        "BLOCK, dt)"),
    ([{"BLOCK": 4}, {"A": 1}], [], "configs[1] sets 'A', which is a runtime argument"),
    ([{"n": 4}], [], "configs[0] sets 'n', which is a runtime argument"),
    ([], [], "non-empty list"),
    ({"BLOCK": 4}, [], "non-empty list"),
    ([{"BLOCK": 4}, 8], [], "configs[1] is a dict"),
    ([{"BLOCK": 4}, {"BLOCK": 4}], [], "configs[1] repeats configs[0]"),
    ([{"BLOCK": 4}], ["M"], "key names 'M', which is not a parameter"),
    ([{"BLOCK": 4}], ["BLOCK"], "key names 'BLOCK', which the configs set"),
])
def test_bad_configs_and_keys(configs, key, words):
    with pytest.raises(LoomValueError) as err:
        autotune(configs=configs, key=key)(loom.jit(target=TARGET)(_kernel))
    assert words in str(err.value)


def test_bad_options_and_arguments():
    kernel = loom.jit(target=TARGET)(_kernel)
    with pytest.raises(LoomValueError, match="repeat must be an int >= 1"):
        autotune(configs=[{"BLOCK": 4}], key=[], repeat=0)(kernel)
    with pytest.raises(LoomTypeError, match="decorates a @loom.jit kernel"):
        autotune(configs=[{"BLOCK": 4}], key=[])(42)
    tuned = autotune(configs=[{"BLOCK": 4}, {"BLOCK": 8}], key=["A"])(kernel)
    with pytest.raises(LoomTypeError, match="missing the argument 'A'"):
        tuned()
    with pytest.raises(LoomTypeError, match="_kernel\\(\\)"):
        tuned(np.zeros(4, "float32"))   # n is missing
    with pytest.raises(LoomTypeError, match="cannot copy a FakeArray"):
        autotune(configs=[{"BLOCK": 4}], key=[])(loom.jit(target=TARGET)(uncopied))(FakeArray(), 1)


class FakeArray:
    """An array-like object that cannot be copied."""

    shape, dtype = (1,), "float32"

    def __dlpack__(self):
        raise NotImplementedError


def uncopied(A, n: T.dyn, BLOCK: int = 4):
    A[0] = 1.0
