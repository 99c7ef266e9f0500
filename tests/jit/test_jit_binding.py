"""How a call's arguments reach the parameters: positional, keywords in any order, defaults.

A call with keyword arguments is bound by a plan remembered per (positional count,
keyword names); the plan must give exactly what ``inspect.Signature.bind`` gives,
and a bad call must still be refused, naming the kernel.
"""
# ruff: noqa: F821 - the strings in T.Tensor[...] / T.dyn[...] annotations are sizes, not names

import numpy as np
import pytest

import loom
import loom.language as T


def _kernel():
    @loom.jit(target="interp", disk_cache=False)
    def affine(A: T.Tensor[("N",), "float32"], n: T.dyn["N"], alpha: float = 2.0, beta: int = 1):
        for i in range(n):
            A[i] = A[i] * alpha + beta

    return affine


CALLS = [
    ((3,), {}, 3.0),
    ((), {"n": 3}, 3.0),
    ((3, 1.0), {}, 2.0),
    ((), {"beta": 0, "n": 3}, 2.0),
    ((), {"n": 3, "beta": 0}, 2.0),
    ((3,), {"alpha": 0.5, "beta": 5}, 5.5),
    ((3,), {"beta": 5, "alpha": 0.5}, 5.5),
]


@pytest.mark.parametrize("args, kwargs, want", CALLS)
def test_keywords_in_any_order_and_defaults_bind_like_python(args, kwargs, want):
    k = _kernel()
    for _ in range(2):  # the second call uses the remembered plan
        a = np.ones(3, "float32")
        k(a, *args, **kwargs)
        np.testing.assert_array_equal(a, np.full(3, want, "float32"))
    assert k.cache_info().hits == 1


def test_the_same_values_by_position_or_keyword_share_one_entry():
    k = _kernel()
    a = np.ones(3, "float32")
    k(a, 3, 2.0, 1)
    k(a, 3)
    k(A=a, n=3, beta=1)
    k(a, beta=1, alpha=2.0, n=3)
    assert (k.cache_info().compiles, k.cache_info().size) == (1, 1)


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {}, "missing a required argument: 'n'"),
    ((3,), {"nope": 1}, "unexpected keyword argument 'nope'"),
    ((3, 2.0, 1, 5), {}, "too many positional arguments"),
    ((3,), {"n": 3}, "multiple values for argument 'n'"),
])
def test_bad_calls_are_refused_every_time(args, kwargs, message):
    k = _kernel()
    for _ in range(2):  # a refused call leaves no plan behind
        with pytest.raises(loom.LoomTypeError, match=message) as err:
            k(np.ones(3, "float32"), *args, **kwargs)
        assert "affine" in str(err.value)
    assert k.cache_info().compiles == 0
