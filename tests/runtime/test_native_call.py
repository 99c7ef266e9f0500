"""The native half of the per-call fast path (loom.runtime._fastcall) on compiled llvm and c modules.

After one checked call teaches it a layout, a call with numpy arrays of that
layout runs through C; every check the Python path makes must still hold there,
and anything it was not taught must reach the Python path and its errors.
"""

from __future__ import annotations

import gc
import shutil
import threading
import weakref

import numpy as np
import pytest

import loom
from loom.ir.intrin import call_packed
from loom.runtime import fast_path, nd
from loom.runtime.arguments import ArgumentValueError
from loom.runtime.packed import PackedFuncError

TARGETS = ["llvm", "c"]


def test_the_extension_is_built_where_a_compiler_is():
    # setup.py marks it optional so installs without a compiler succeed; here one exists, so a missing
    # extension means the build broke, which calls would otherwise hide by taking the Python path.
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the extension is optional")
    assert fast_path.native_extension() is not None


needs_native = pytest.mark.skipif(fast_path.native_extension() is None, reason="loom.runtime._fastcall not built")


def _axpy(target: str):
    """``C = alpha * A + B`` over a symbolic length, alpha a float32 scalar."""
    n = loom.var("n")
    alpha = loom.var("alpha", "float32")
    A = loom.placeholder((n,), name="A")
    B = loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: alpha * A[i] + B[i], name="C")
    s = loom.create_schedule(C.op)
    return loom.build(s, [A, B, alpha, C], target=target)


def _arrays(n: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32"), \
        np.zeros(n, "float32")


def _learned(m) -> int:
    return m[m.entry_name]._call.learned


@pytest.fixture(params=TARGETS)
def axpy(request):
    return _axpy(request.param)


@needs_native
def test_a_checked_call_teaches_the_layout_and_later_calls_compute_right(axpy):
    a, b, c = _arrays()
    assert _learned(axpy) == 0
    axpy(a, b, 2.0, c)
    assert _learned(axpy) == 1
    for seed in range(1, 4):  # new arrays (new pointers) of the same layout
        a, b, c = _arrays(seed=seed)
        axpy(a, b, 2.0, c)
        np.testing.assert_allclose(c, 2 * a + b, rtol=1e-5, atol=1e-6)
    assert _learned(axpy) == 1


@needs_native
def test_every_check_still_holds_after_learning(axpy):
    a, b, c = _arrays()
    axpy(a, b, 2.0, c)
    readonly = np.zeros(64, "float32")
    readonly.flags.writeable = False
    with pytest.raises(ArgumentValueError, match="read-only"):
        axpy(a, b, 2.0, readonly)
    with pytest.raises(ArgumentValueError, match="overlap"):
        axpy(a, b, 2.0, a)
    with pytest.raises(loom.LoomError, match="float64"):
        axpy(a.astype("float64"), b, 2.0, c)
    with pytest.raises(loom.LoomError, match="shape"):
        axpy(a, b[:32], 2.0, c)
    with pytest.raises(loom.LoomError):
        axpy(a, b, 2.0)  # too few arguments
    with pytest.raises(loom.LoomError):
        axpy(a, b, "2", c)
    with pytest.raises(TypeError):
        axpy(a, b, 2.0, c=c)  # keyword arguments reach the Python path, which takes none
    assert not readonly.any() and _learned(axpy) == 1


@needs_native
def test_layouts_the_native_path_does_not_know_are_checked_and_learned(axpy):
    a, b, c = _arrays(128)
    axpy(a, b, 1.0, c)
    with pytest.raises(ArgumentValueError, match="compact"):
        axpy(a[::2], b[::2], 1.0, c[:64])  # strided inputs: a layout the buffers do not allow
    for n in (64, 32):  # a shorter length binds another n
        axpy(a[:n], b[:n], 1.0, c[:n])
        np.testing.assert_allclose(c[:n], a[:n] + b[:n], rtol=1e-5, atol=1e-6)
    assert _learned(axpy) == 3


@needs_native
def test_misaligned_arrays_are_copied_by_the_python_path(axpy):
    a, b, c = _arrays(65)
    axpy(a[:64], b[:64], 1.0, c[:64])
    got = c[1:]  # 4 bytes past the alignment the generated code assumes
    axpy(a[1:], b[1:], 3.0, got)
    np.testing.assert_allclose(got, 3 * a[1:] + b[1:], rtol=1e-5, atol=1e-6)


@needs_native
@pytest.mark.parametrize("alpha", [2.0, -0.0, 0.0, float("inf"), 2])
def test_scalars_are_part_of_the_layout(axpy, alpha):
    a, b, c = _arrays()
    axpy(a, b, 5.0, c)
    axpy(a, b, alpha, c)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(c, np.float32(alpha) * a + b, rtol=1e-5, atol=1e-6)
    axpy(a, b, alpha, c)  # learned now: taken natively with the same result
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(c, np.float32(alpha) * a + b, rtol=1e-5, atol=1e-6)


@needs_native
def test_negative_zero_is_not_zero():
    n = loom.var("n")
    x = loom.var("x", "float32")
    B = loom.compute((n,), lambda i: x, name="B")  # copysign tells -0.0 from 0.0 through the stored bits
    m = loom.build(loom.create_schedule(B.op), [x, B], target="llvm")
    out = np.ones(4, "float32")
    m(0.0, out)
    m(-0.0, out)
    assert np.signbit(out).all()
    m(0.0, out)
    assert not np.signbit(out).any()


@needs_native
def test_cpu_loom_nd_arrays_take_it_too(axpy):
    a, b, c = _arrays()
    x, y, z = nd.array(a), nd.array(b), nd.array(c)
    axpy(x, y, 2.0, z)
    assert _learned(axpy) == 1
    x, y = nd.array(b), nd.array(a)
    axpy(x, y, 2.0, z)
    np.testing.assert_allclose(z.numpy(), 2 * b + a, rtol=1e-5, atol=1e-6)
    axpy(b, a, 2.0, c)  # numpy arrays of the same layout are another key
    assert _learned(axpy) == 2
    frozen = nd.array(c)
    frozen._data.flags.writeable = False
    with pytest.raises(ArgumentValueError, match="read-only"):
        axpy(x, y, 2.0, frozen)


@needs_native
def test_more_layouts_than_the_memo_holds_stay_right(axpy):
    for n in range(1, 40):
        a, b, c = _arrays(n, seed=n)
        axpy(a, b, 1.5, c)
        axpy(a, b, 1.5, c)
        np.testing.assert_allclose(c, 1.5 * a + b, rtol=1e-5, atol=1e-6)
    assert 0 < _learned(axpy) <= 16


@needs_native
@pytest.mark.parametrize("target", TARGETS)
def test_a_native_failure_raises_the_python_error(reg, target):
    calls = []

    def flaky(x, y):
        calls.append(1)
        if len(calls) == 2:
            raise KeyError("second call")
        y.copyfrom(x)

    reg("test.native.flaky", flaky)
    A = loom.placeholder((16,), name="A")
    B = loom.extern(A.shape, [A], lambda ins, outs: call_packed("test.native.flaky", ins[0], outs[0]), name="B")
    m = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    a, b = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    m(a, b)
    assert _learned(m) == 1
    with pytest.raises(PackedFuncError, match="test.native.flaky") as info:
        m(a, b)  # the learned layout: the native path runs it and meets the failure
    assert isinstance(info.value.__cause__, KeyError)
    m(a, b)
    assert b.tolist() == a.tolist()


@needs_native
def test_threads_call_one_module_at_once():
    m = _axpy("llvm")
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for k in range(200):
                a, b, c = _arrays(256, seed=seed * 1000 + k)
                m(a, b, 0.5, c)
                np.testing.assert_allclose(c, 0.5 * a + b, rtol=1e-5, atol=1e-6)
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_without_the_extension_calls_take_the_python_path(monkeypatch):
    monkeypatch.setattr(fast_path, "_NATIVE", None)
    m = _axpy("llvm")
    f = m[m.entry_name]
    assert f._call == f._checked_call
    a, b, c = _arrays()
    m(a, b, 2.0, c)
    m(a, b, 2.0, c)
    np.testing.assert_allclose(c, 2 * a + b, rtol=1e-5, atol=1e-6)


@needs_native
def test_a_module_is_freed_once_nothing_refers_to_it():
    m = _axpy("llvm")
    m(*_arrays()[:2], 1.0, np.zeros(64, "float32"))
    gone = weakref.ref(m)
    del m
    gc.collect()
    assert gone() is None


@needs_native
def test_probe_reads_arrays_as_numpy_does():
    ext = fast_path.native_extension()
    arr = np.zeros((6, 4), "int64")[1::2, ::-1]
    data, nd_, shape, strides, descr, writeable = ext.probe(arr)
    assert (data, nd_, shape, strides, writeable) == (arr.ctypes.data, 2, (3, 4), (64, -8), True)
    assert descr is arr.dtype
    with pytest.raises(TypeError):
        ext.probe([1, 2])
