"""Bitwise operators on integer expressions (issue 15, item 13): building, folding, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loom
from loom.ir import expr as E

TYPES = ["int8", "int32", "int64", "uint8", "uint32"]


def _wrap(v: int, dtype: str) -> int:
    info = np.iinfo(dtype)
    width = info.bits
    v &= (1 << width) - 1
    return v - (1 << width) if info.min < 0 and v > info.max else v


@settings(max_examples=300, deadline=None, database=None)
@given(st.sampled_from(TYPES), st.data())
def test_constants_fold_as_python_integers_modulo_the_width(dtype: str, data: st.DataObject) -> None:
    info = np.iinfo(dtype)
    a = data.draw(st.integers(int(info.min), int(info.max)))
    b = data.draw(st.integers(int(info.min), int(info.max)))
    x, y = loom.const(a, dtype), loom.const(b, dtype)
    k = b % info.bits
    want = {"<<": a << k, ">>": a >> k, "&": a & b, "|": a | b, "^": a ^ b}
    got = {"<<": x << y, ">>": x >> y, "&": x & y, "|": x | y, "^": x ^ y}
    for op, value in want.items():
        assert isinstance(got[op], E.IntImm) and got[op].dtype == dtype, op
        assert got[op].value == _wrap(value, dtype), (op, a, b)
    assert (~x).value == _wrap(~a, dtype)


def test_operators_build_intrinsic_calls_on_integers_and_stay_logical_on_bools() -> None:
    x, y = loom.var("x"), loom.var("y", "int64")
    assert str(x << 2) == "shift_left(x, 2)" and str(3 >> x) == "shift_right(3, x)"
    assert (x & y).dtype == "int64"  # operands are matched as for arithmetic
    assert isinstance((x > 1) & (x < 5), E.And) and isinstance(~(x > 1), E.Not)
    assert isinstance((x > 1) | True, E.IntImm)
    assert str(x ^ 1) == "bitwise_xor(x, 1)"
    assert loom.load_json(loom.save_json(x << 3)).op.name == "tir.shift_left"


def test_floats_are_refused_with_the_operator_named() -> None:
    f = loom.var("f", "float32")
    with pytest.raises(loom.LoomTypeError, match="shift_left needs integer operands, got float32"):
        f << 1
    with pytest.raises(loom.LoomTypeError, match="bitwise_not needs integer operands"):
        loom.bitwise_not(f)
