"""loom.fast_exp / fast_log / fast_tanh / fast_sigmoid / fast_erf (issue 17): the expansions as IR, in the
interpreter, and the interpreter against compiled code bit for bit.

The whole-range accuracy of the compiled kernels is tests/backends/test_fast_math_backends.py.
"""

import ml_dtypes
import numpy as np
import pytest

import loom
from loom.ir import expr as E
from loom.ir.functor import collect
from fast_math_reference import float32_sweep, float64_sweep, reference, ulp_error

NAMES = ["exp", "log", "tanh", "sigmoid", "erf"]
#: Ops an expansion must not contain: it is plain arithmetic, bit operations and selects.
MATH_OPS = {"tir.exp", "tir.log", "tir.tanh", "tir.sigmoid", "tir.erf", "tir.fabs", "tir.floor",
            "tir.call_pure_extern", "tir.call_extern", "tir.call_llvm_pure_intrin"}


def fast(name: str):
    return getattr(loom, f"fast_{name}")


def kernel(name: str, dtype: str, target: str, lanes: int = 8):
    n = loom.var("n")
    A = loom.placeholder((n,), dtype=dtype, name="A")
    B = loom.compute((n,), lambda i: fast(name)(A[i]), name="B")
    s = loom.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=lanes)
    s[B].vectorize(inner)
    return loom.build(s, [A, B], target=target)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "float32x8", "float64x4"])
@pytest.mark.parametrize("name", NAMES)
def test_expansions_are_plain_ir_of_the_argument_dtype(name: str, dtype: str) -> None:
    e = fast(name)(loom.var("x", dtype))
    assert e.dtype == dtype
    ops = {c.op.name for c in collect(e, lambda n: isinstance(n, E.Call))}
    assert ops and not ops & MATH_OPS, ops


@pytest.mark.parametrize("name", NAMES)
def test_the_argument_is_evaluated_once(name: str) -> None:
    A = loom.decl_buffer((4,), "float32", name="A")
    e = fast(name)(A[1] * 2.0)
    assert len(collect(e, lambda n: isinstance(n, E.BufferLoad))) == 1


@pytest.mark.parametrize("name", NAMES)
def test_integer_arguments_are_refused(name: str) -> None:
    with pytest.raises(loom.LoomTypeError, match=f"loom.fast_{name} needs a float argument, got int32"):
        fast(name)(loom.var("i"))
    with pytest.raises(loom.LoomTypeError, match="got int32"):
        fast(name)(3)


def test_python_floats_and_constants_expand_too() -> None:
    A = loom.decl_buffer((1,), "float32", name="A")
    f = loom.ir.PrimFunc([A.data], loom.ir.BufferStore(A, loom.fast_exp(loom.const(0.5, "float32")) + A[0], [0]),
                         buffer_map={A.data: A})
    a = np.zeros(1, "float32")
    loom.testing.evaluate(f, a)
    assert abs(float(a[0]) - np.exp(0.5)) < 2e-7


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_the_interpreter_computes_what_compiled_code_does(name: str, dtype: str) -> None:
    """Without FMA contraction LLVM keeps every rounding of the IR: the same bits (NaN payloads aside)."""
    x = float32_sweep(1 << 21) if dtype == "float32" else float64_sweep(1500)
    x = x[: len(x) // 8 * 8]
    want, got = np.zeros_like(x), np.zeros_like(x)
    kernel(name, dtype, "interp")(x, want)
    kernel(name, dtype, "llvm -fp_contract=0")(x, got)
    nan = np.isnan(want)
    np.testing.assert_array_equal(nan, np.isnan(got))
    bits = f"u{x.itemsize}"
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))
    assert ulp_error(want, reference(name, x)).max() <= 2.5


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", NAMES)
def test_16_bit_floats_compute_in_float32_and_round_once(name: str, dtype: str) -> None:
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = np.linspace(-12, 12, 256).astype(np_dtype)
    x[:3] = np.array([np.inf, -np.inf, np.nan]).astype(np_dtype)
    got, wide = np.zeros_like(x), np.zeros(x.shape, "float32")
    kernel(name, dtype, "interp")(x, got)
    kernel(name, "float32", "interp")(x.astype("float32"), wide)
    with np.errstate(over="ignore"):
        want = wide.astype(np_dtype)
    nan = np.isnan(want.astype("float32"))
    np.testing.assert_array_equal(np.isnan(got.astype("float32")), nan)
    np.testing.assert_array_equal(got[~nan].view("u2"), want[~nan].view("u2"))
