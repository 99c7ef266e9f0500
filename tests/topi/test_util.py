"""topi.util and topi.tag."""

from __future__ import annotations

import pytest

import loom
from loom import topi
from loom.topi import tag
from loom.topi.util import get_const_int, get_const_tuple, traverse_graph


def test_const_shapes_as_python_ints():
    n = loom.var("n")
    assert get_const_int(7) == 7
    assert get_const_int(loom.const(3) * 4 + 1) == 13
    assert get_const_tuple([2, loom.const(5, "int64"), (n - n) + 4]) == (2, 5, 4)
    assert type(get_const_tuple([loom.const(5, "int64")])[0]) is int
    with pytest.raises(loom.LoomValueError, match="n \\+ 1 is not a constant"):
        get_const_int(n + 1)
    with pytest.raises(loom.LoomTypeError, match="integer expression"):
        get_const_int(loom.const(1.5))
    with pytest.raises(loom.LoomTypeError, match="got str"):
        get_const_int("3")


def test_tags_of_tensor_arithmetic_and_the_prefix_rule():
    A = loom.placeholder((), name="A")
    B = loom.placeholder((10, 5), name="B")
    n = loom.var("n")
    assert (1 + B).op.tag == tag.ELEMWISE and (B + n).op.tag == tag.ELEMWISE
    assert (A + B).op.tag == tag.BROADCAST and (B + B).op.tag == tag.BROADCAST
    assert topi.add(B, B).op.tag == tag.BROADCAST
    assert tag.is_broadcast("broadcast_add") and not tag.is_broadcast(tag.INJECTIVE)
    assert tag.is_injective(tag.INJECTIVE) and tag.is_injective(tag.ELEMWISE) and not tag.is_injective(tag.CONV2D_NCHW)


def test_traverse_graph_visits_each_operation_once():
    A = loom.placeholder((4,), name="A")
    B = A + 1.0
    C = B * B
    D = C - B
    seen = []
    traverse_graph([D], lambda op: seen.append(op.name))
    assert sorted(seen) == sorted([D.op.name, C.op.name, B.op.name]) and seen[0] == D.op.name
