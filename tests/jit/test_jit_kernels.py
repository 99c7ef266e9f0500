"""End-to-end ``@loom.jit`` kernels (seed 001) on every buildable CPU kind (interp, llvm, c).

Each kernel's results are checked against numpy and against the same function
compiled for the reference interpreter; ``cache_info()`` says what was compiled.
Every test gets a private on-disk cache, so a first call really compiles.
"""
# ruff: noqa: F821 - the strings in T.Tensor[...] / T.dyn[...] annotations are sizes and dtypes, not names

import sys

import numpy as np
import pytest

import loom
import loom.hybrid
import loom.language as T
from loom.testing.conformance.harness import buildable_cpu_kinds

OFFSET = 2.0  # a module global read by a kernel: rebinding it recompiles


@pytest.fixture(params=buildable_cpu_kinds())
def target(request):
    return request.param


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))


def _copy(value):
    return value.copy() if isinstance(value, np.ndarray) else value


def run(kernel, target, *args, **kwargs):
    """Call ``kernel`` for ``target`` on copies of the arrays, and the same function on the interpreter (a
    kernel of its own, so ``kernel``'s counters only count ``target``); both must agree.  The arrays after
    ``target``'s call, positional ones first."""
    oracle = loom.jit(kernel.__wrapped__, target="interp")
    results = []
    for call, where in ((kernel, target), (oracle, "interp")):
        a, kw = [_copy(v) for v in args], {k: _copy(v) for k, v in kwargs.items()}
        with loom.Target(where):
            assert call(*a, **kw) is None
        results.append([v for v in a + list(kw.values()) if isinstance(v, np.ndarray)])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    return results[0]


def counts(kernel):
    info = kernel.cache_info()
    return info.hits, info.misses, info.compiles


# -- kernels ------------------------------------------------------------------------------------------


@loom.jit
def axpb(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"], n: T.dyn["N"], k: float = 2.0):
    for i in T.serial(n):
        B[i] = A[i] * k + 1.0


@loom.jit
def row_sums(A: T.Tensor[("M", "BLOCK"), "float32"], S: T.Tensor[("M",), "float32"], BLOCK: int):
    for i in T.serial(A.shape[0]):
        acc = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0)
        for j in T.unroll(BLOCK):
            acc[0] += A[i, j]
        S[i] = acc[0]


@loom.jit
def matmul(A: T.Tensor[("M", "K"), "float32"], B: T.Tensor[("K", "N"), "float32"],
           C: T.Tensor[("M", "N"), "float32"]):
    for i, j in T.grid(A.shape[0], B.shape[1]):
        acc = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0)
        for k in T.serial(A.shape[1]):
            acc[0] += A[i, k] * B[k, j]
        C[i, j] = acc[0]


@loom.jit
def sum_and_product(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"],
                    S: T.Tensor[("N",), "float32"], P: T.Tensor[("N",), "float32"]):
    for i in T.parallel(A.shape[0]):
        S[i] = A[i] + B[i]
        P[i] = A[i] * B[i]


@loom.jit
def scale_in_place(X: T.Tensor[("M", "N"), "float64"], k: float):
    for i, j in T.grid(X.shape[0], X.shape[1]):
        X[i, j] = X[i, j] * k - 1.0


@loom.jit
def shift64(A: T.Tensor[("N",), "int32"], B: T.Tensor[("N",), "int32"], n: T.dyn[T.int64, "N"]):
    for i in T.serial(n):
        B[i] = A[n - 1 - i] + 1


@loom.hybrid.script
def square(a):
    b = output_tensor(a.shape, a.dtype)  # noqa: F821 - a hybrid keyword
    for i in range(a.shape[0]):
        b[i] = a[i] * a[i]
    return b


@loom.jit
def sum_of_squares(A: T.Tensor[(6,), "float32"], B: T.Tensor[(6,), "float32"], C: T.Tensor[(6,), "float32"]):
    sa = square(A)
    sb = square(B)
    for i in T.serial(6):
        C[i] = sa[i] + sb[i]


@loom.jit
def convert(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "dt"], dt: T.dtype):
    for i in T.serial(A.shape[0]):
        B[i] = T.cast(A[i] * 2.0, dt)


@loom.jit
def add_scalar(A, B, k):
    for i in T.serial(A.shape[0]):
        B[i] = A[i] + k


@loom.jit
def double_strided(A: T.StridedTensor[("M", "N"), ("s0", "s1"), "float32"], B: T.Tensor[("M", "N"), "float32"]):
    for i, j in T.grid(A.shape[0], A.shape[1]):
        B[i, j] = A[i, j] * 2.0


def make_closure_kernel():
    """A kernel reading a closure variable and a global, and a function that rebinds the closure variable."""
    factor = 3.0

    @loom.jit
    def affine(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"]):
        for i in T.serial(A.shape[0]):
            B[i] = A[i] * factor + OFFSET

    def set_factor(value):
        nonlocal factor
        factor = value

    return affine, set_factor


# -- tests --------------------------------------------------------------------------------------------


def test_elementwise_with_runtime_size_and_default_argument(target):
    axpb.cache_clear()
    for n in (5, 9):  # the size is a runtime value: one compile serves both
        a = np.linspace(-1, 1, n, dtype="float32")
        _, b, = run(axpb, target, a, np.zeros(n, "float32"), n)
        np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    assert counts(axpb) == (1, 1, 1)
    a = np.arange(4, dtype="float32")
    _, b = run(axpb, target, a, np.zeros(4, "float32"), 4, 2.0)  # the default given explicitly: the same entry
    assert counts(axpb) == (2, 1, 1)
    _, b = run(axpb, target, a, np.zeros(4, "float32"), 4, k=2.0)
    assert counts(axpb) == (3, 1, 1)
    _, b = run(axpb, target, a, np.zeros(4, "float32"), 4, k=-0.5)  # another static value: a new entry
    np.testing.assert_allclose(b, a * -0.5 + 1)
    assert counts(axpb) == (3, 2, 2) and axpb.cache_info().size == 2


def test_reduction_with_a_static_block_in_shapes_and_loops(target):
    row_sums.cache_clear()
    rng = np.random.default_rng(0)
    for block in (4, 8):
        a = rng.standard_normal((5, block)).astype("float32")
        _, s = run(row_sums, target, a, np.zeros(5, "float32"), block)
        np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5, atol=1e-6)
    a = rng.standard_normal((3, 8)).astype("float32")  # another M, the same BLOCK: a hit
    _, s = run(row_sums, target, a, np.zeros(3, "float32"), 8)
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5, atol=1e-6)
    assert counts(row_sums) == (1, 2, 2)
    func = row_sums.get_prim_func(a, np.zeros(3, "float32"), 8)  # BLOCK is compiled into A's shape
    (buf,) = [b for b in func.buffer_map.values() if b.name == "A"]
    assert str(buf.shape[1]) == "8" and str(buf.shape[0]) == "M"


def test_matmul_with_grid_and_a_local_accumulator(target):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((7, 5)).astype("float32"), rng.standard_normal((5, 3)).astype("float32")
    *_, c = run(matmul, target, a, b, np.zeros((7, 3), "float32"))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_two_outputs_and_an_in_place_update(target):
    a, b = np.arange(6, dtype="float32"), np.linspace(1, 2, 6, dtype="float32")
    *_, s, p = run(sum_and_product, target, a, b, np.zeros(6, "float32"), np.zeros(6, "float32"))
    np.testing.assert_allclose(s, a + b)
    np.testing.assert_allclose(p, a * b)
    x = np.arange(12, dtype="float64").reshape(3, 4)
    (got,) = run(scale_in_place, target, x, 0.5)
    np.testing.assert_allclose(got, x * 0.5 - 1)


def test_dyn_int64_scalar_shares_its_name_with_shapes(target):
    a = np.arange(7, dtype="int32") * 3
    _, b, = run(shift64, target, a, np.zeros(7, "int32"), 7)
    np.testing.assert_array_equal(b, a[::-1] + 1)
    func = shift64.get_prim_func(a, np.zeros(7, "int32"), 7)
    n = [p for p in func.params if p.name == "N"]
    assert len(n) == 1 and str(n[0].dtype) == "int64"  # one Var for the shapes and the scalar
    assert all(str(buf.shape[0]) == "N" and buf.shape[0].dtype == "int64" for buf in func.buffer_map.values())


def test_a_kernel_calls_a_hybrid_script_helper(target):
    a, b = np.arange(6, dtype="float32"), np.linspace(-1, 1, 6, dtype="float32")
    *_, c = run(sum_of_squares, target, a, b, np.zeros(6, "float32"))
    np.testing.assert_allclose(c, a * a + b * b, rtol=1e-6)


def test_globals_and_closure_values_are_part_of_the_key(target, monkeypatch):
    affine, set_factor = make_closure_kernel()
    a = np.arange(5, dtype="float32")
    _, b = run(affine, target, a, np.zeros(5, "float32"))
    np.testing.assert_allclose(b, a * 3 + 2)
    monkeypatch.setattr(sys.modules[__name__], "OFFSET", 5.0)  # rebinding the global recompiles
    _, b = run(affine, target, a, np.zeros(5, "float32"))
    np.testing.assert_allclose(b, a * 3 + 5)
    assert counts(affine) == (0, 2, 2)
    set_factor(-1.0)  # so does rebinding the closure variable
    _, b = run(affine, target, a, np.zeros(5, "float32"))
    np.testing.assert_allclose(b, a * -1 + 5)
    assert counts(affine) == (0, 3, 3)
    set_factor(3.0)
    monkeypatch.setattr(sys.modules[__name__], "OFFSET", 2.0)  # the first values again: the first entry
    _, b = run(affine, target, a, np.zeros(5, "float32"))
    np.testing.assert_allclose(b, a * 3 + 2)
    assert counts(affine) == (1, 3, 3)


def test_dtype_parameter_spellings_share_one_entry(target):
    convert.cache_clear()
    a = np.array([0.2, 1.4, -2.6, 3.5], "float32")
    for spelling in ("int32", np.int32, np.dtype("int32"), T.int32):
        _, b = run(convert, target, a, np.zeros(4, "int32"), spelling)
        np.testing.assert_array_equal(b, (a * 2).astype("int32"))
    assert counts(convert) == (3, 1, 1)
    _, b = run(convert, target, a, np.zeros(4, "float64"), "float64")  # another dtype: a new entry
    np.testing.assert_allclose(b, (a * 2).astype("float64"))
    assert counts(convert) == (3, 2, 2)


def test_unannotated_parameters_key_their_dtype_and_shape(target):
    add_scalar.cache_clear()
    a = np.arange(4, dtype="float32")
    _, b = run(add_scalar, target, a, np.zeros(4, "float32"), 1.5)
    np.testing.assert_allclose(b, a + 1.5)
    _, b = run(add_scalar, target, a + 1, np.zeros(4, "float32"), 1.5)  # same dtype, shape and k: a hit
    assert counts(add_scalar) == (1, 1, 1)
    a6 = np.arange(6, dtype="float32")  # a new static shape compiles anew
    _, b = run(add_scalar, target, a6, np.zeros(6, "float32"), 1.5)
    np.testing.assert_allclose(b, a6 + 1.5)
    i4 = np.arange(4, dtype="int64")  # so does a new dtype, and a new static value
    _, b = run(add_scalar, target, i4, np.zeros(4, "int64"), 3)
    np.testing.assert_array_equal(b, i4 + 3)
    _, b = run(add_scalar, target, a, np.zeros(4, "float32"), 2.5)
    np.testing.assert_allclose(b, a + 2.5)
    assert counts(add_scalar) == (1, 4, 4)


def test_strided_tensor_takes_numpy_views(target):
    double_strided.cache_clear()
    base = np.arange(48, dtype="float32").reshape(6, 8)
    for view in (base[::2, 1::3], base.T, base[1:4, 2:7], base):
        _, b = run(double_strided, target, view, np.zeros(view.shape, "float32"))
        np.testing.assert_allclose(b, view * 2)
    assert counts(double_strided) == (3, 1, 1)  # strides and sizes are runtime values


class DLPackOnly:
    """An array known only through DLPack (as a torch or JAX tensor would be)."""

    def __init__(self, array):
        self._array, self.shape, self.dtype = array, array.shape, array.dtype

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_arguments_numpy_loom_nd_dlpack_and_keywords(target):
    axpb.cache_clear()
    a = np.arange(5, dtype="float32")
    outs = [np.zeros(5, "float32") for _ in range(4)]
    nd_out = loom.nd.array(np.zeros(5, "float32"))
    with loom.Target(target):
        axpb(loom.nd.array(a), outs[0], 5)
        axpb(DLPackOnly(a), DLPackOnly(outs[1]), 5)
        axpb(a, nd_out, 5, 2.0)
        axpb(B=outs[2], A=a, n=5)
        axpb(a, outs[3], n=5, k=2.0)
    for out in outs[:-1] + [nd_out.numpy()]:
        np.testing.assert_allclose(out, a * 2 + 1)
    np.testing.assert_allclose(outs[3], a * 2 + 1)
    assert counts(axpb) == (4, 1, 1)  # however they are passed, the same key


def test_compile_source_prim_func_and_counters(target):
    axpb.cache_clear()
    a = np.arange(6, dtype="float32")
    with loom.Target(target):
        module = axpb.compile(a, np.zeros(6, "float32"), 6, k=3.0)
        assert isinstance(module, loom.runtime.Module)
        assert counts(axpb) == (0, 1, 1)
        b = np.zeros(6, "float32")
        module(a, b, 6)  # the kernel arguments only: the static k is compiled in
        np.testing.assert_allclose(b, a * 3 + 1)
        assert axpb.compile(a, b, 6, 3.0) is module and counts(axpb) == (1, 1, 1)
        source = axpb.get_kernel_source(a, b, 6, k=3.0)
        assert isinstance(source, str) and "axpb" in source
        if target == "c":
            assert "#include" in source and "axpb(" in source
        func = axpb.get_prim_func(a, b, 6)
        assert isinstance(func, loom.ir.PrimFunc) and [p.name for p in func.params][-1] == "N"
        assert counts(axpb) == (2, 1, 1) and axpb.cache_info().size == 1  # get_prim_func caches nothing
        axpb(a, b, 6)  # k=2.0: a second entry
        info = axpb.cache_info()
        assert (info.hits, info.misses, info.compiles, info.disk_loads, info.size) == (2, 2, 2, 0, 2)
        axpb.cache_clear()
        assert tuple(axpb.cache_info()) == (0, 0, 0, 0, 0)
        axpb(a, b, 6, 3.0)  # in the disk cache: loaded, not compiled
        assert tuple(axpb.cache_info()) == (0, 1, 0, 1, 1)
    np.testing.assert_allclose(b, a * 3 + 1)
