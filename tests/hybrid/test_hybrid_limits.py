"""const_range copies are capped while parsing; a long sum parses (issue 11, items 13 and 14)."""
# ruff: noqa: F821 - hybrid keywords (output_tensor, const_range) are injected, not imported

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom.hybrid import HybridSyntaxError, loops, script


@script
def nested_copies(a):
    b = output_tensor((1,), "float32")
    for i in const_range(3):
        for j in const_range(3):
            b[0] += a[i * 3 + j]
    return b


@script
def sibling_copies(a):
    b = output_tensor((1,), "float32")
    for i in const_range(5):
        b[0] += a[i]
    for j in const_range(5):
        b[0] += a[j]
    return b


def test_const_range_of_a_hundred_million_is_refused_at_once(tmp_path):
    """Each copy of the body is parsed anew: 10**8 copies never finished parsing."""
    mod = tmp_path / "huge_const_range.py"
    mod.write_text(textwrap.dedent("""
        import loom, loom.hybrid

        @loom.hybrid.script
        def huge(a):
            b = output_tensor((1,), "float32")
            for i in const_range(10**8):
                b[0] += a[0]
            return b

        try:
            huge(loom.placeholder((1,), name="a"))
        except loom.hybrid.HybridSyntaxError as err:
            print(str(err).splitlines()[0])
    """))
    out = subprocess.run([sys.executable, str(mod)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "const_range of i copies its body 100000000 times" in out.stdout
    assert "more than the limit of 8192 (loom.hybrid.loops.MAX_CONST_RANGE_COPIES)" in out.stdout


def test_nested_const_ranges_multiply(monkeypatch):
    A = loom.placeholder((9,), name="a")
    monkeypatch.setattr(loops, "MAX_CONST_RANGE_COPIES", 12)  # 3 outer + 3 * 3 inner copies
    C = nested_copies(A)
    b = np.zeros(1, "float32")
    loom.build(loom.create_schedule(C.op), [A, C], target="interp")(np.arange(9, dtype="float32"), b)
    assert b[0] == 36
    monkeypatch.setattr(loops, "MAX_CONST_RANGE_COPIES", 11)
    with pytest.raises(HybridSyntaxError, match=r"const_range of j copies its body 3 times, which makes 12 "
                                                r"const_range copies in the function so far, more than the limit "
                                                r"of 11"):
        nested_copies(A)


def test_sibling_const_ranges_add_up(monkeypatch):
    A = loom.placeholder((5,), name="a")
    monkeypatch.setattr(loops, "MAX_CONST_RANGE_COPIES", 10)
    sibling_copies(A)
    monkeypatch.setattr(loops, "MAX_CONST_RANGE_COPIES", 9)
    with pytest.raises(HybridSyntaxError, match="const_range of j copies its body 5 times, which makes 10 "
                                                "const_range copies"):
        sibling_copies(A)


@script
def growing_copies(a):
    b = output_tensor((1,), "float32")
    for i in const_range(3):
        for j in const_range(i * 5000):  # 0 copies the first time it is met, 10000 the last
            b[0] += a[0]
    return b


def test_inner_const_ranges_whose_bounds_grow_are_counted_each_time():
    with pytest.raises(HybridSyntaxError, match="const_range of j copies its body 10000 times, which makes 15003"):
        growing_copies(loom.placeholder((1,), name="a"))


def test_a_sum_of_300_terms_parses_and_runs(tmp_path):
    """A left-nested BinOp chain 300 deep: past Python's default recursion limit for the parser's walk."""
    terms = " + ".join(f"a[{k}]" for k in range(300))
    mod = tmp_path / "long_sum_kernel.py"
    mod.write_text(f"def long_sum(a):\n    b = output_tensor((1,), 'float32')\n    b[0] = {terms}\n    return b\n")
    namespace: dict = {}
    exec(compile(mod.read_text(), str(mod), "exec"), namespace)
    fn = script(namespace["long_sum"])
    A = loom.placeholder((300,), name="a")
    C = fn(A)
    a = np.random.default_rng(0).random(300).astype("float32")
    b = np.zeros(1, "float32")
    loom.build(loom.create_schedule(C.op), [A, C], target="interp")(a, b)
    np.testing.assert_allclose(b[0], a.sum(dtype="float64"), rtol=1e-4)
    assert sys.getrecursionlimit() < loom.ir.recursion.RECURSION_LIMIT  # put back after parsing
