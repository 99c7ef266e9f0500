"""``JITKernel.explain_key``: the cache key in words, and after a miss exactly what differs.

The key holds static values, dtypes, the shape of unannotated arrays, the values
a kernel reads from its scope, the target and the build options; runtime sizes
and ``T.dyn`` values never change it.
"""
# ruff: noqa: F821 - the strings in T.Tensor[...] / T.dyn[...] annotations are sizes and dtypes, not names

import sys

import numpy as np
import pytest

import loom
import loom.language as T

BIAS = 1.0  # read by the kernel: part of the key


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))


def make_kernel():
    @loom.jit(target="interp")
    def blend(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "dt"], W, n: T.dyn["N"], dt: T.dtype,
              BLOCK: int = 4):
        for i in T.serial(n):
            B[i] = T.cast(A[i] * BLOCK + W[i % W.shape[0]] + BIAS, dt)

    return blend


def args(n=6, dt="float32", w=(3,), w_dtype="float32", block=None):
    out = [np.arange(n, dtype="float32"), np.zeros(n, dt), np.ones(w, w_dtype), n, dt]
    return out + ([block] if block is not None else [])


def test_the_text_names_every_part_of_the_key():
    kernel = make_kernel()
    text = str(kernel.explain_key(*args()))
    lines = text.splitlines()
    assert lines[0] == "cache key of loom.jit kernel blend:"
    part = {name: next(line for line in lines if line.startswith(f"    {name}:")) for name in
            ("A", "B", "W", "n", "dt", "BLOCK", "BIAS", "T", "target")}
    assert "float32 tensor of shape (N,)" in part["A"] and "annotated dims" in part["A"]
    assert "tensor of shape (N,)" in part["B"]
    assert "float32 tensor of shape (3,) (static dims)" in part["W"] and "inferred: no annotation" in part["W"]
    assert "runtime int32 scalar (not in the key)" in part["n"]
    assert "dtype float32" in part["dt"]
    assert "static value 4" in part["BLOCK"]  # the default is part of the key
    assert "1.0" in part["BIAS"] and "module loom.language" in part["T"]
    assert "interp" in part["target"] and "device: cpu" in part["target"]
    assert "  build options: none" in lines
    assert "source " + __file__ in text and "pass_configs (none)" in text
    assert lines[-1] == "status: not cached; nothing is cached for this kernel yet"


def test_hit_after_the_call_and_runtime_sizes_do_not_change_the_key():
    kernel = make_kernel()
    explained = kernel.explain_key(*args())
    assert explained.hit is False and explained.differences is None
    kernel(*args())
    assert kernel.explain_key(*args()).hit is True
    for n in (1, 17):  # another N, given as T.dyn and as the sizes of A and B
        explained = kernel.explain_key(*args(n=n))
        assert explained.hit and explained.differences is None
        assert str(explained).endswith("status: cached (a call with these arguments compiles nothing)")
    assert kernel(*args(n=17)) is None  # a kernel writes into its arguments
    assert kernel.cache_info().compiles == 1


@pytest.mark.parametrize("change, expected", [
    ({"block": 8}, ["args BLOCK: static value 8 here, static value 4 cached"]),
    ({"dt": "float64"}, ["args dt: dtype float64 here, dtype float32 cached"]),
    ({"w": (5,)}, ["args W: float32 tensor of shape (5,) (static dims), compact (row-major) (inferred: no "
                   "annotation) here, float32 tensor of shape (3,) (static dims), compact (row-major) (inferred: "
                   "no annotation) cached"]),
    ({"w_dtype": "float64"}, ["args W: float64 tensor of shape (3,)"]),
])
def test_a_miss_names_the_argument_that_differs(change, expected):
    kernel = make_kernel()
    kernel(*args())
    explained = kernel.explain_key(*args(**change))
    assert explained.hit is False
    assert len(explained.differences) == 1 and explained.differences[0].startswith(expected[0])
    assert f"status: not cached; the nearest cached entry differs in:\n    {explained.differences[0]}" \
        in str(explained)
    kernel(*args(**change))
    assert kernel.explain_key(*args(**change)).hit and kernel.cache_info().compiles == 2


def test_the_nearest_cached_entry_is_compared():
    kernel = make_kernel()
    kernel(*args())
    kernel(*args(block=8, dt="float64"))
    # One static value away from the second entry, two from the first.
    assert kernel.explain_key(*args(block=16, dt="float64")).differences == [
        "args BLOCK: static value 16 here, static value 8 cached"]


def test_a_miss_names_a_changed_global(monkeypatch):
    kernel = make_kernel()
    kernel(*args())
    monkeypatch.setattr(sys.modules[__name__], "BIAS", 2.5)
    explained = kernel.explain_key(*args())
    assert not explained.hit and explained.differences == ["captured BIAS: 2.5 here, 1.0 cached"]
    kernel(*args())
    monkeypatch.setattr(sys.modules[__name__], "BIAS", 1.0)
    assert kernel.explain_key(*args()).hit


def test_a_miss_names_the_target():
    @loom.jit
    def negate(A: T.Tensor[("N",), "float32"]):
        for i in T.serial(A.shape[0]):
            A[i] = -A[i]

    a = np.ones(3, "float32")
    with loom.Target("interp"):
        negate(a)
        assert negate.explain_key(a).hit
    with loom.Target("c"):
        explained = negate.explain_key(a)
    assert not explained.hit and explained.differences == ["target: 'c' here, 'interp' cached"]
    assert explained.components["target"] == {"target": "c (device: cpu)"}


def test_a_miss_names_the_build_option():
    kernel = make_kernel()
    kernel(*args())
    with loom.build_config(disable_vectorize=True):
        explained = kernel.explain_key(*args())
        assert explained.components["config"] == {"tir.disable_vectorize": "True"}
        assert "  build options:\n    tir.disable_vectorize: True" in str(explained)
        kernel(*args())
        assert kernel.explain_key(*args()).hit
    assert not explained.hit and explained.differences == [
        "config tir.disable_vectorize: True here, default cached"]
    with loom.build_config(disable_vectorize=True, unroll_explicit=False):
        assert kernel.explain_key(*args()).differences == ["config tir.unroll_explicit: False here, default cached"]
    assert kernel.explain_key(*args()).hit  # outside the context: the first entry again
    assert kernel.cache_info().compiles == 2


def test_explain_key_compiles_nothing_and_checks_its_arguments():
    kernel = make_kernel()
    kernel.explain_key(*args())
    assert tuple(kernel.cache_info()) == (0, 0, 0, 0, 0)
    with pytest.raises(loom.LoomError, match="blend: dtype parameter dt"):
        kernel.explain_key(*args()[:4], "no-such-dtype")
    with pytest.raises(loom.LoomError, match="missing a required argument"):
        kernel.explain_key(*args()[:3])
