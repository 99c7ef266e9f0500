"""loom.language's keywords and dtype constants inside ``@loom.jit`` kernels, in Python, and their errors.

Kernels run on every CPU target and are checked against numpy and against the
same body run as plain Python (emulation: the keywords called from Python do
what they do in a kernel).
"""
# ruff: noqa: F821 - the strings in T.Tensor[...] / T.dyn[...] annotations are sizes and dtypes, not names

import inspect
import os
import pickle

import numpy as np
import pytest

import loom
import loom.language as T
from loom.errors import LoomError, LoomTypeError
from loom.language import alloc_local, exp, grid, serial, thread_binding
from loom.language import max as tmax

from jit_helpers import jitted




# ------------------------------------------------------------------------------------------ loops


def loops(A: T.Tensor[("M", "N"), "float32"], B: T.Tensor[("M", "N"), "float32"], C: T.Tensor[("N",), "float32"],
          D: T.Tensor[("N",), "float32"], E: T.Tensor[("N",), "float32"]):
    for i, j in T.grid(A.shape[0], A.shape[1]):
        B[i, j] = A[i, j] * 2.0
    for j in T.serial(A.shape[1]):
        C[j] = 0.0
    for j in T.serial(1, A.shape[1]):
        C[j] = A[1, j] - A[0, j - 1]
    for j in T.parallel(A.shape[1]):
        D[j] = A[0, j] + 1.0
    for j in T.vectorized(4):
        D[j] = D[j] * 3.0
    for j in T.unroll(2):
        D[j] = D[j] + 10.0
    for t in T.thread_binding(A.shape[1], thread="threadIdx.x"):
        E[t] = A[2, t]
    for t in T.thread_binding(0, 3, thread="blockIdx.x"):
        E[t] = E[t] + 100.0


def loops_expected(a):
    m, n = a.shape
    b = a * 2
    c = np.zeros(n, "float32")
    c[1:] = a[1, 1:] - a[0, :-1]
    d = a[0] + 1
    d[:4] *= 3
    d[:2] += 10
    e = a[2].copy()
    e[:3] += 100
    return b, c, d, e


def loops_outputs(n):
    return [np.zeros((3, n), "float32")] + [np.full(n, -1, "float32") for _ in range(3)]


def test_loop_keywords(target):
    kernel = jitted(loops, target)
    for n in (5, 8):
        a = np.arange(3 * n, dtype="float32").reshape(3, n) ** 1.5
        outs = loops_outputs(n)
        kernel(a, *outs)
        for got, want in zip(outs, loops_expected(a)):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    assert kernel.cache_info().compiles == 1


def test_loop_kernel_emulated_in_python_agrees():
    a = np.arange(18, dtype="float32").reshape(3, 6) - 4.0
    outs = loops_outputs(6)
    loops(a, *outs)  # the undecorated body: keywords called from Python
    for got, want in zip(outs, loops_expected(a)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# ------------------------------------------------------------------------------------------ memory and math


def scratch_math(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"], C: T.Tensor[("N",), "float32"]):
    for i in T.serial(A.shape[0]):
        s = T.alloc_shared((2,), "float32")
        loc = T.alloc_local((1,), "float32")
        f = T.alloc_fragment((1,), "float32")
        s[0] = A[i]
        s[1] = A[i] * 2.0
        loc[0] = s[0] + s[1]
        f[0] = T.exp(A[i])
        B[i] = T.max(loc[0], f[0], 5.0) + T.min(A[i], 1.0, 0.5)
        C[i] = (T.sqrt(T.abs(A[i] - 1.0)) + T.log(A[i] + 1.0) + T.tanh(A[i]) + T.sigmoid(A[i])
                + T.floor(A[i] * 0.5) + T.ceil(A[i] * 0.5) + T.power(A[i], 2.0))


def scratch_expected(a):
    b = np.maximum(np.maximum(3 * a, np.exp(a)), 5) + np.minimum(np.minimum(a, 1), 0.5)
    c = (np.sqrt(np.abs(a - 1)) + np.log(a + 1) + np.tanh(a) + 1 / (1 + np.exp(-a)) + np.floor(a * 0.5)
         + np.ceil(a * 0.5) + a ** 2)
    return b, c


def test_alloc_and_math_keywords(target):
    kernel = jitted(scratch_math, target)
    a = np.linspace(0, 3, 7).astype("float32")
    b, c = np.zeros(7, "float32"), np.zeros(7, "float32")
    kernel(a, b, c)
    want_b, want_c = scratch_expected(a.astype("float64"))
    np.testing.assert_allclose(b, want_b, rtol=1e-5)
    np.testing.assert_allclose(c, want_c, rtol=1e-5)
    source = kernel.get_kernel_source(a, b, c)
    assert "exp" in source  # T.exp became the target's exp


def imported(A: T.Tensor[("M", "N"), "float32"], B: T.Tensor[("M",), "float32"]):
    for i in serial(A.shape[0]):
        acc = alloc_local((1,), "float32")
        acc[0] = -1000.0
        for j in serial(A.shape[1]):
            acc[0] = tmax(acc[0], exp(A[i, j]))
        B[i] = acc[0]
    for i, j in grid(1, 1):
        B[i + j] = B[i] + 0.5
    for t in thread_binding(0, 1, thread="threadIdx.y"):
        B[t + 1] = B[t + 1] + 0.25


def test_keywords_reached_as_imported_names(target):
    kernel = jitted(imported, target)
    a = np.random.default_rng(0).uniform(-2, 2, (3, 5)).astype("float32")
    b = np.zeros(3, "float32")
    kernel(a, b)
    want = np.exp(a.astype("float64")).max(axis=1) + [0.5, 0.25, 0]
    np.testing.assert_allclose(b, want, rtol=1e-5)
    emulated = np.zeros(3, "float32")
    imported(a, emulated)
    np.testing.assert_allclose(emulated, want, rtol=1e-5)


# ------------------------------------------------------------------------------------------ emulation


def test_keywords_called_from_python():
    for loop in (T.serial, T.parallel, T.vectorized, T.unroll, serial):
        assert loop(4) == range(4) and loop(2, 5) == range(2, 5)
    assert T.serial(np.int64(3)) == range(3)
    assert T.thread_binding(4, thread="threadIdx.x") == range(4)
    assert T.thread_binding(0, 4, thread="blockIdx.x") == range(0, 4)
    assert list(T.grid(2, 3)) == [(i, j) for i in range(2) for j in range(3)]
    for alloc in (T.alloc_shared, T.alloc_local, T.alloc_fragment):
        buf = alloc((2, 3), "float16")
        assert buf.shape == (2, 3) and buf.dtype == np.float16 and not buf.any()
    assert T.exp(1.0) == np.exp(1.0) and T.log(np.e) == 1.0 and T.sqrt(9.0) == 3.0
    assert T.max(1, 5, 3) == 5 and T.min(4.0, 2.0, 9.0) == 2.0 and T.abs(-2) == 2
    assert T.sigmoid(0.0) == 0.5 and T.floor(1.5) == 1 and T.ceil(1.5) == 2 and T.power(2.0, 3) == 8
    np.testing.assert_array_equal(T.max(np.array([1, 7]), np.array([4, 2])), [4, 7])
    assert T.likely(True) and not T.likely(False)
    cast = T.cast(1.7, "int32")
    assert type(cast) is np.int32 and cast == 1
    assert type(T.cast(3, T.float16)) is np.float16


def test_keywords_are_named_objects():
    names = ["serial", "parallel", "vectorized", "unroll", "thread_binding", "grid", "alloc_shared", "alloc_local",
             "alloc_fragment", "exp", "log", "sqrt", "tanh", "sigmoid", "floor", "ceil", "power", "abs", "max",
             "min", "likely", "cast"]
    assert sorted(T.KEYWORDS) == sorted(names)
    for name in names:
        kw = getattr(T, name)
        assert isinstance(kw, T.Keyword) and kw is T.KEYWORDS[name] and repr(kw) == f"T.{name}"
        assert pickle.loads(pickle.dumps(kw)) is kw
        assert name in T.__all__
    assert T.serial.loop and T.grid.loop and not T.exp.loop


# ------------------------------------------------------------------------------------------ dtypes


def test_dtype_constants_in_python():
    assert T.float32 == "float32" and T.int8 == "int8" and T.bool == "bool" and T.bfloat16 == "bfloat16"
    assert np.zeros(2, T.float32).dtype == np.float32 and np.dtype(T.uint16) == np.uint16
    assert np.arange(3).astype(T.int64).dtype == np.int64
    for name in T.DTYPE_NAMES:
        const = getattr(T, name)
        assert const == name and isinstance(const, loom.DataType) and name in T.__all__
        assert pickle.loads(pickle.dumps(const)) == const
    got = T.float32(1.1)
    assert type(got) is np.float32 and got == np.float32(1.1)
    assert type(T.int8(-3)) is np.int8 and T.uint8(200) == 200 and T.float64(0.1) == 0.1
    with pytest.raises(LoomTypeError, match="numpy has no bfloat16"):
        T.bfloat16(1.0)
    with pytest.raises(LoomTypeError, match="numpy has no bfloat16"):
        T.cast(1.0, "bfloat16")


def casts(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "int32"], C: T.Tensor[("N",), "float32"],
          D: T.Tensor[("N",), "float64"], dt: T.dtype = "int8"):
    for i in T.serial(A.shape[0]):
        B[i] = T.int32(A[i])
        C[i] = T.float32(T.cast(A[i], dt)) + T.float32(1)
        D[i] = T.float64(i) * T.float64(0.1) + T.cast(T.cast(A[i], "int16"), T.float64)


def cast_outputs(n):
    return np.zeros(n, "int32"), np.zeros(n, "float32"), np.zeros(n, "float64")


def test_dtype_casts_in_kernels(target):
    kernel = jitted(casts, target)
    a = np.array([-2.7, -0.5, 0.5, 1.5, 100.2, -120.9, 3.3333], "float32")
    b, c, d = cast_outputs(a.size)
    kernel(a, b, c, d)
    np.testing.assert_array_equal(b, a.astype("int32"))
    np.testing.assert_array_equal(c, a.astype("int8").astype("float32") + 1)
    np.testing.assert_array_equal(d, np.arange(a.size) * 0.1 + a.astype("int16").astype("float64"))
    kernel(a, b, c, d, dt="uint8")  # a dtype parameter: another build
    pos = np.abs(a)
    kernel(pos, b, c, d, dt=T.uint8)
    np.testing.assert_array_equal(c, pos.astype("uint8").astype("float32") + 1)
    assert kernel.cache_info().compiles == 2
    eb, ec, ed = cast_outputs(a.size)
    casts(pos, eb, ec, ed, dt="uint8")  # emulated: numpy's conversions, the same numbers
    np.testing.assert_array_equal(ec, c)
    np.testing.assert_array_equal(ed, d)


# ------------------------------------------------------------------------------------------ errors


def loop_outside_for(A: T.Tensor[("N",), "float32"]):
    x = T.serial(4)  # error: T.serial outside a for
    A[0] = x


def grid_names(A: T.Tensor[("M", "N"), "float32"]):
    for i, j in T.grid(4):  # error: two names, one extent
        A[i, j] = 1.0


def no_thread(A: T.Tensor[("N",), "float32"]):
    for t in T.thread_binding(4):  # error: no thread=
        A[t] = 1.0


def bad_thread(A: T.Tensor[("N",), "float32"]):
    for t in T.thread_binding(4, thread="warp.x"):  # error: no such thread
        A[t] = 1.0


def thread_from_one(A: T.Tensor[("N",), "float32"]):
    for t in T.thread_binding(1, 4, thread="threadIdx.x"):  # error: begins at 1
        A[t] = 1.0


def unknown_attribute(A: T.Tensor[("N",), "float32"]):
    for i in T.serial(4):
        A[i] = T.nosuch(1.0)  # error: no T.nosuch


def imported_outside_for(A: T.Tensor[("N",), "float32"]):
    A[0] = 1.0 + serial(3)  # error: serial outside a for


def keyword_not_called(A: T.Tensor[("N",), "float32"]):
    A[0] = T.exp  # error: not called


def alloc_with_scope(A: T.Tensor[("N",), "float32"]):
    f = T.alloc_fragment((4,), "float32", "shared")  # error: the scope is fixed
    A[0] = f[0]


@pytest.mark.parametrize("fn, message", [
    (loop_outside_for, "T.serial() makes a loop: use it as `for i in T.serial(...)`"),
    (grid_names, "T.grid(e1, e2, ...) takes one extent per loop variable"),
    (no_thread, "T.thread_binding needs thread=, one of ['threadIdx.x'"),
    (bad_thread, "T.thread_binding(thread=...) is one of ['threadIdx.x'"),
    (thread_from_one, "T.thread_binding(begin, end, ...) must begin at 0"),
    (unknown_attribute, "module T has no attribute 'nosuch'"),
    (imported_outside_for, "serial() makes a loop: use it as `for i in serial(...)`"),
    (keyword_not_called, "keyword T.exp must be called"),
    (alloc_with_scope, "T.alloc_fragment takes (shape, dtype); its scope is local"),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_keyword_errors_point_at_the_users_line(fn, message):
    lines, first = inspect.getsourcelines(fn)
    line = first + next(k for k, text in enumerate(lines) if "# error" in text)
    with pytest.raises(LoomError) as err:
        loom.jit(fn, target="interp", disk_cache=False)(np.zeros((4, 4) if fn is grid_names else 4, "float32"))
    text = str(err.value)
    assert message in text, text
    assert f"{os.path.basename(__file__)}:{line}:" in text, text  # file and line of the bad statement
    assert "# error" in text  # the line itself is quoted
