"""Software emulation: hybrid functions run as Python on numpy, keywords injected only for the call."""
# ruff: noqa: F821, F841 - hybrid keywords (output_tensor, range kinds, math) are injected, not imported

import numpy
import numpy as np
import pytest

from loom.hybrid import HYBRID_GLOBALS, KEYWORDS, script

import hybrid_kernels as K

exp = "a module global that shares a keyword's name"


@script
def softplus(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        b[i] = log(1.0 + exp(a[i]))
    return b


@script
def fails_midway(a):
    b = output_tensor(a.shape, a.dtype)
    for i in range(a.shape[0]):
        assert a[i] > 0.0, "non-positive input"
        b[i] = sqrt(a[i])
    return b


def _leftovers(namespace):
    return sorted(n for n in HYBRID_GLOBALS if n in namespace and namespace[n] is HYBRID_GLOBALS[n])


def test_keywords_exist_during_the_call_and_are_gone_after():
    a = np.array([0.5, -1.0, 2.0], "float32")
    np.testing.assert_allclose(softplus(a), np.log1p(np.exp(a)), rtol=1e-6)
    assert _leftovers(globals()) == []
    assert exp == "a module global that shares a keyword's name"  # restored, not deleted


def test_globals_are_restored_when_the_function_raises():
    with pytest.raises(AssertionError, match="non-positive input"):
        fails_midway(np.array([1.0, -1.0], "float32"))
    assert _leftovers(globals()) == []
    assert "output_tensor" not in globals() and exp.startswith("a module global")


def test_every_kernel_module_is_clean_after_emulating_all_cases():
    for kernel, make_np, _ in K.CASES.values():
        kernel(*make_np())
    assert _leftovers(vars(K)) == []


def test_seed_outer_product_runs_as_written():
    """The reference's example: the output parameter is left out, float64 inputs, a float32 output."""
    a = numpy.random.randn(100)
    b = numpy.random.randn(99)
    c = K.outer_product(a, b)
    assert c.shape == (100, 99) and c.dtype == np.float32
    np.testing.assert_allclose(c, np.outer(a, b).astype("float32"), rtol=1e-6)


def test_calls_of_hybrid_functions_emulate_too():
    a, b = K._f32(5), K._f32(5)
    np.testing.assert_allclose(K.sum_of_squares(a, b), a * a + b * b, rtol=1e-6)


def test_scalars_and_lists_are_emulation_arguments():
    a = K._f32(3, 4)
    np.testing.assert_allclose(K.add_offsets(a, [1.0, 2.0, 3.0]), a + np.array([[1.0], [2.0], [3.0]]), rtol=1e-6)
    x = np.array([1.5, -2.5, 3.0, 0.25], "float32")
    np.testing.assert_allclose(K.scaled(x, 4, 2.0), x * 2.0 + [0, 0, 1, 1] + np.trunc(x))


def test_the_keyword_set():
    assert {"output_tensor", "allocate", "range", "serial", "unroll", "parallel", "vectorize", "const_range",
            "bind", "log", "exp", "sigmoid", "tanh", "power", "popcount", "sqrt", "abs", "floor", "ceil", "min",
            "max"} <= KEYWORDS
    assert set(HYBRID_GLOBALS) <= KEYWORDS  # range/min/max/abs/len are Python's own builtins


def test_popcount_emulation_uses_the_dtype_width():
    assert HYBRID_GLOBALS["popcount"](np.int8(-1)) == 8
    assert HYBRID_GLOBALS["popcount"](-1) == 32
