"""Bad ``@loom.jit`` kernels and bad calls: a clear LoomError naming the kernel and what was wrong.

A call whose arguments contradict the annotations compiles nothing, whether or
not the kernel has compiled before; errors in the body point at the user's line.
"""
# ruff: noqa: F821 - the strings in T.Tensor[...] / T.dyn[...] annotations are sizes and dtypes, not names

import inspect

import numpy as np
import pytest

import loom
import loom.language as T
from loom.testing.conformance.harness import buildable_cpu_kinds


@pytest.fixture(params=buildable_cpu_kinds())
def target(request):
    return request.param


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))


def make_kernel():
    @loom.jit
    def add_one(A: T.Tensor[("N", 4), "float32"], B: T.Tensor[("N", 4), "float32"], n: T.dyn["N"],
                scale: int = 1):
        for i in T.serial(n):
            for j in T.serial(4):
                B[i, j] = A[i, j] * scale + 1.0

    return add_one


GOOD = np.zeros((3, 4), "float32")

BAD_CALLS = {  # name -> (arguments, words the message must hold)
    "wrong rank": ((np.zeros(12, "float32"), GOOD, 3), ["dimension", "A"]),
    "wrong static dim": ((np.zeros((3, 5), "float32"), GOOD, 3), ["4", "5", "A"]),
    "wrong dtype": ((np.zeros((3, 4), "float64"), GOOD, 3), ["float32", "float64", "A"]),
    "not contiguous": ((np.zeros((4, 3), "float32").T, GOOD, 3), ["compact", "strides", "A"]),
    "sizes disagree": ((GOOD, np.zeros((2, 4), "float32"), 3), ["N", "3", "2", "B"]),
    "dyn disagrees": ((GOOD, GOOD, 5), ["N", "5", "3"]),
    "not an array": (([1.0, 2.0], GOOD, 3), ["list", "A"]),
}


@pytest.mark.parametrize("compiled_before", [False, True], ids=["first call", "after a good call"])
@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_arguments_contradicting_the_annotations_compile_nothing(case, compiled_before, target):
    kernel = make_kernel()
    args, words = BAD_CALLS[case]
    with loom.Target(target):
        if compiled_before:
            kernel(GOOD, GOOD.copy(), 3)
        before = kernel.cache_info()
        with pytest.raises(loom.LoomError) as info:
            kernel(*args)
    message = str(info.value)
    assert "add_one" in message, message
    for word in words:
        assert word in message, (word, message)
    after = kernel.cache_info()
    assert (after.compiles, after.size) == (before.compiles, before.size)


def test_wrong_number_of_arguments_and_unknown_keywords():
    kernel = make_kernel()
    for args, kwargs, words in [((GOOD, GOOD), {}, "missing a required argument: 'n'"),
                                ((GOOD, GOOD, 3, 1, 2), {}, "too many positional arguments"),
                                ((GOOD, GOOD, 3), {"bias": 1}, "unexpected keyword argument 'bias'"),
                                ((GOOD, GOOD, 3), {"n": 3}, "multiple values for argument 'n'")]:
        with pytest.raises(loom.LoomError, match="add_one") as info:
            kernel(*args, **kwargs)
        assert words in str(info.value)
    assert kernel.cache_info().compiles == 0


@pytest.mark.parametrize("value, words", [(2.5, "annotated int, got float"), ("2", "annotated int, got str"),
                                          (True, "annotated int, got bool"), (object(), "annotated int")])
def test_a_static_value_of_the_wrong_type(value, words):
    kernel = make_kernel()
    with pytest.raises(loom.LoomError, match="add_one") as info:
        kernel(GOOD, GOOD.copy(), 3, value)
    assert "scale" in str(info.value) and words in str(info.value)


@pytest.mark.parametrize("value", [object(), {"a": 1}, [np.zeros(2)], lambda: 1])
def test_an_unannotated_static_argument_of_an_unsupported_type(value):
    @loom.jit
    def fill(A, x):
        for i in T.serial(A.shape[0]):
            A[i] = x

    with pytest.raises(loom.LoomError, match=r"fill: static parameter x: a static \(compile-time\) argument"):
        fill(np.zeros(3, "float32"), value)
    assert fill.cache_info().compiles == 0


def test_a_dyn_scalar_that_is_not_a_number():
    kernel = make_kernel()
    with pytest.raises(loom.LoomError, match="add_one: parameter n is a runtime scalar") as info:
        kernel(GOOD, GOOD.copy(), GOOD)
    assert "ndarray" in str(info.value) and kernel.cache_info().compiles == 0


def _while_loop(A: T.Tensor[(4,), "float32"]):
    i = 0
    while i < 4:
        A[i] = 0.0


def _output_tensor(A: T.Tensor[(4,), "float32"]):
    B = output_tensor((4,), "float32")  # noqa: F821 - refused before it is looked up
    B[0] = A[0]


def _returns(A: T.Tensor[(4,), "float32"]):
    A[0] = 1.0
    return A


def _unknown_name(A: T.Tensor[(4,), "float32"]):
    for i in T.serial(4):
        A[i] = no_such_name  # noqa: F821


@pytest.mark.parametrize("func, line_text, words", [
    (_while_loop, "while i < 4:", "while loops are not part of hybrid script"),
    (_output_tensor, 'B = output_tensor((4,), "float32")', "output_tensor is not part of loom.jit kernels"),
    (_returns, "return A", "a loom.jit kernel returns nothing"),
    (_unknown_name, "A[i] = no_such_name", "no_such_name"),
])
def test_errors_in_the_body_point_at_the_users_line(func, line_text, words):
    kernel = loom.jit(func)
    lines, first = inspect.getsourcelines(func)
    lineno = first + next(k for k, line in enumerate(lines) if line_text in line)
    with pytest.raises(loom.LoomError) as info:
        kernel(np.zeros(4, "float32"))
    message = str(info.value)
    assert f"{__file__}:{lineno}:" in message, message
    assert words in message and line_text in message
    info = kernel.cache_info()
    assert (info.compiles, info.size) == (0, 0)


def test_on_chip_annotations_are_not_parameters():
    for annot in (T.SharedBuffer[(4,), "float32"], T.LocalBuffer[(4,), "float32"],
                  T.FragmentBuffer[(4,), "float32"]):
        def kernel(A: annot):
            pass

        with pytest.raises(loom.LoomError, match="kernel: parameter A .*on-chip buffers are never kernel "
                                                 "arguments.*T.alloc_shared"):
            loom.jit(kernel)


class Callable:
    def __call__(self, A):
        pass


@pytest.mark.parametrize("thing", [3, np.sum, Callable(), print, "kernel"],
                         ids=["int", "numpy_function", "callable_object", "builtin", "str"])
def test_jit_takes_a_python_function(thing):
    with pytest.raises(loom.LoomError, match="loom.jit decorates a Python function, got"):
        loom.jit(thing)
    with pytest.raises(loom.LoomError, match="loom.jit decorates a Python function"):
        loom.jit(target="llvm")(thing)


def test_signatures_and_annotations_loom_cannot_read():
    def star(A: T.Tensor[(4,), "float32"], *rest):
        pass

    def undefined(A: "NoSuchAnnotation"):  # noqa: F821
        pass

    with pytest.raises(loom.LoomError, match="star: parameter rest: a kernel takes plain parameters"):
        loom.jit(star)
    with pytest.raises(loom.LoomError, match="undefined: cannot evaluate its annotations"):
        loom.jit(undefined)
