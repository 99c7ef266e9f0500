"""``loom.build(..., target="c")``: CModule built end to end, called through the native ABI."""

from __future__ import annotations

import numpy as np
import pytest

import loom

from programs import blocked_matmul
from loom.errors import LoomError, LoomValueError
from loom.ir import stmt as S
from loom.ir.function import IRModule, PrimFunc
from loom.testing import AssertionFailed
from loom_c.runtime import CModule

FAST = "c -flags=-O1"


def _rand(shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _saxpy_schedule(n=None):
    n = loom.var("n") if n is None else n
    A = loom.placeholder((n,), name="A")
    B = loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] * 3.0 + B[i], name="C")
    return loom.create_schedule(C.op), [A, B, C]


@pytest.mark.parametrize("openmp", [True, False])
def test_blocked_matmul_matches_numpy(openmp: bool) -> None:
    m, n, k = 13, 17, 19
    s, (A, B, C) = blocked_matmul(m, n, k)
    f = loom.build(s, [A, B, C], target=f"{FAST} -openmp={int(openmp)}")
    assert isinstance(f, CModule) and f.target.attrs["openmp"] is openmp
    assert ("#pragma omp parallel for" in f.get_source()) is openmp
    a, b = _rand((m, k)), _rand((k, n), 1)
    c = np.zeros((m, n), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_float_ops_round_like_numpy_at_o3() -> None:
    """-ffp-contract=off: ``a * 3 + b`` is two roundings, as in numpy, even at -O3 -march=native."""
    s, args = _saxpy_schedule()
    xo, xi = s[args[2]].split(args[2].op.axis[0], factor=8)
    s[args[2]].vectorize(xi)
    f = loom.build(s, args, target="c")
    a, b = _rand((1001,)), _rand((1001,), 1)
    c = np.zeros_like(a)
    f(a, b, c)
    np.testing.assert_array_equal(c, a * np.float32(3) + b)


@pytest.mark.parametrize("lanes", [3, 5, 6, 7])
def test_vectors_of_any_lane_count(lanes: int) -> None:
    """Vectors whose byte size is not a power of two (padded GCC vectors), incl. integer division."""
    A = loom.placeholder((4, lanes), "int32", name="A")
    # Truncated division renders as native vector '/', which must never divide padding lanes.
    B = loom.compute((4, lanes), lambda i, j: loom.truncdiv(A[i, j], 3) + A[i, j] % 5 * 2 - A[i, j] // 4,
                     name="B")
    s = loom.create_schedule(B.op)
    s[B].vectorize(B.op.axis[1])
    f = loom.build(s, [A, B], target=FAST)
    assert f"int32x{lanes}" in f.get_source()
    a = np.random.default_rng(lanes).integers(-100, 100, (4, lanes)).astype("int32")
    b = np.full((4, lanes), 7777, "int32")
    f(a, b)
    np.testing.assert_array_equal(b, np.fix(a / 3).astype("int32") + np.mod(a, 5) * 2 - a // 4)


def test_failing_assert_raises_with_its_message() -> None:
    n = loom.var("n")
    A = loom.decl_buffer((4,), "int32", name="A")
    body = S.AssertStmt(n > 0, "n must be positive", S.BufferStore(A, n, [0]))
    f = loom.build(PrimFunc([A.data, n], body, buffer_map={A.data: A}), target=FAST, name="guarded")
    a = np.zeros(4, "int32")
    f(a, 5)
    assert a[0] == 5
    with pytest.raises(AssertionFailed, match="n must be positive") as info:
        f(a, -1)
    assert isinstance(info.value, LoomError) and info.value.function == "guarded"
    assert a[0] == 5


def test_bad_arguments_raise_before_the_call() -> None:
    s, args = _saxpy_schedule(n=16)
    f = loom.build(s, args, target=FAST)
    a, b, c = _rand((16,)), _rand((16,), 1), np.zeros(16, "float32")
    keep = [x.copy() for x in (a, b, c)]
    bad_calls = [
        (a, b),                                   # too few arguments
        (a, b, np.zeros(15, "float32")),          # wrong shape
        (a, b, np.zeros(16, "float64")),          # wrong dtype
        (a, b, np.zeros((16, 1), "float32")),     # wrong ndim
        (a, b, np.zeros(32, "float32")[::2]),     # not compact
        (a, b, "not an array"),
    ]
    for call in bad_calls:
        with pytest.raises(LoomError):
            f(*call)
    for x, k in zip((a, b, c), keep):
        np.testing.assert_array_equal(x, k)


def test_symbolic_shape_views_and_misaligned_arrays() -> None:
    s, args = _saxpy_schedule()
    f = loom.build(s, args, target=FAST)
    for length in (0, 1, 7, 64):
        a, b = _rand((length,)), _rand((length,), 1)
        c = np.zeros_like(a)
        f(a, b, c)
        np.testing.assert_allclose(c, a * 3 + b, rtol=1e-6)
    # A view one element into its base is not 64-byte aligned: the call runs on an aligned
    # copy and writes the result back into the caller's view, leaving the rest untouched.
    base = np.zeros(10, "float32")
    a, b = _rand((9,)), _rand((9,), 1)
    f(a, b, base[1:])
    assert base[0] == 0
    np.testing.assert_allclose(base[1:], a * 3 + b, rtol=1e-6)


def test_get_source() -> None:
    s, args = _saxpy_schedule()
    f = loom.build(s, args, target=FAST, name="saxpy")
    text = f.get_source()
    assert text == f.get_source("c")
    assert text.startswith("/* Generated by loom-c")
    assert "int32_t saxpy(const uint64_t *args, const char **error) {" in text
    with pytest.raises(LoomValueError, match="source formats"):
        f.get_source("llvm")
    assert f.entry_name == "saxpy" and "saxpy" in f


def test_many_calls_reuse_one_runner() -> None:
    n = loom.var("n")
    A = loom.placeholder((n,), "int64", name="A")
    B = loom.compute((n,), lambda i: A[i] + 1, name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target=FAST)
    x, y = np.zeros(5, "int64"), np.zeros(5, "int64")
    for _ in range(1000):  # in and out alternate: one array as both would be refused as overlapping
        f(x, y)
        f(y, x)
    np.testing.assert_array_equal(x, np.full(5, 2000))
    assert f["default_function"] is f.get_function("default_function")


def test_scalar_parameters_of_each_kind() -> None:
    n = loom.var("n")
    alpha = loom.var("alpha", "float64")
    k = loom.var("k", "int64")
    A = loom.decl_buffer((n,), "float64", name="A")
    i = loom.var("i")
    body = S.For(i, 0, n, "serial", S.BufferStore(A, A[i] * alpha + loom.cast(k, "float64"), [i]))
    f = loom.build(PrimFunc([A.data, alpha, k], body, buffer_map={A.data: A}), target=FAST)
    a = np.arange(6, dtype="float64")
    f(a, -0.5, -(1 << 40))
    np.testing.assert_array_equal(a, np.arange(6) * -0.5 - float(1 << 40))


def test_the_backend_builds_a_cmodule_only_for_c() -> None:
    from loom.backend import build_module
    from loom_c import plugin
    from loom_c.runtime import CBackend

    assert plugin.loom_backend(target_kind="llvm") is None and isinstance(plugin.loom_backend(target_kind="c"), CBackend)
    A = loom.decl_buffer((1,), "int32", name="A")
    f = PrimFunc([A.data], S.BufferStore(A, 1, [0]), buffer_map={A.data: A}, attrs={"global_symbol": "f"})
    m = build_module(IRModule({"f": f}), loom.target.Target("c -flags=-O1"))
    assert isinstance(m, CModule) and m.info.kind == "c" and m.get_source() == m.info.sources["c"]
    a = np.zeros(1, "int32")
    m(a)
    assert a[0] == 1


def test_a_failing_assert_in_a_parallel_loop_keeps_the_loop_parallel() -> None:
    # The failing iteration records the message and skips its rest; the function fails after the loop.
    n = 64
    A = loom.decl_buffer((n,), "int32", name="A")
    B = loom.decl_buffer((n,), "int32", name="B")
    i = loom.var("i")
    body = S.AssertStmt(A[i] >= 0, "negative element", S.BufferStore(B, A[i] * 2, [i]))
    loop = S.For(i, 0, n, S.ForKind.PARALLEL, body)
    f = loom.build(PrimFunc([A.data, B.data], loop, buffer_map={A.data: A, B.data: B}),
                   target="c -flags=-O1", name="doubled")
    assert "#pragma omp parallel for" in f.get_source()
    a, b = np.arange(n, dtype="int32"), np.zeros(n, "int32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 2)
    a[10] = -1
    b[:] = 0
    with pytest.raises(AssertionFailed, match="negative element"):
        f(a, b)
    assert b[10] == 0 and (b[np.arange(n) != 10] == a[np.arange(n) != 10] * 2).all()  # the others ran
