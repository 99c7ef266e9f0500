"""The typed user program runs and computes what it says (``make typecheck`` checks its types)."""

import numpy as np
import pytest

import user_program  # beside this file


@pytest.mark.parametrize("target", ["interp", "llvm"])
def test_user_program_runs(target):
    b, c = user_program.scale_and_sum(target)
    a = np.random.default_rng(0).standard_normal((5, 19)).astype("float32")
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5)


def test_user_program_expressions():
    assert user_program.expressions().startswith("max(max(select(")
