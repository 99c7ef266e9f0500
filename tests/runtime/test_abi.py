"""The native calling convention: slot order and 64-bit words."""

import struct

import numpy as np

import loom
from loom.ir import PrimFunc, no_op
from loom.runtime.abi import abi_vars, pack_values
from loom.runtime.arguments import ArgumentChecker


def _func():
    n, m = loom.var("n"), loom.var("m", "int64")
    s0 = loom.var("s0")
    A = loom.decl_buffer((n, 4), "float32", name="A")
    B = loom.decl_buffer((m, n), "int8", name="B", strides=[s0, 1])
    scale = loom.var("scale", "float32")
    return PrimFunc([A.data, B.data, scale], no_op(), buffer_map={A.data: A, B.data: B})


def test_params_first_then_symbols_in_first_appearance_order():
    assert [v.name for v in abi_vars(_func())] == ["A", "B", "scale", "n", "m", "s0"]


def test_words_hold_pointers_values_and_float_bits():
    f = _func()
    a = loom.nd.array(np.zeros((3, 4), "float32"))
    base = np.zeros((5, 8), "int8")
    b = base[:, :3]  # strided view: s0 = 8
    call = ArgumentChecker(f).bind([a, b, -1.5])
    words = pack_values(abi_vars(f), call)
    assert words[0] == call.pointers[0] and words[1] == call.pointers[1]
    assert words[2] == struct.unpack("<Q", struct.pack("<d", -1.5))[0]
    assert words[3:] == [3, 5, 8]


def test_negative_integers_are_sign_extended():
    k = loom.var("k")
    f = PrimFunc([k], no_op())
    call = ArgumentChecker(f).bind([-2])
    assert pack_values(abi_vars(f), call) == [2**64 - 2]
