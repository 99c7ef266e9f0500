"""The per-call fast path: a layout checked once skips the checker, and nothing else does."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.errors import LoomError
from loom.ir import BufferStore, Evaluate, For, IRModule, PrimFunc
from loom.runtime import NDArray
from loom.runtime.abi import ARG_DEVICES_ATTR, pack_values, abi_vars
from loom.runtime.arguments import ArgumentValueError
from loom.runtime.module import Module
from loom.runtime.ndarray import aligned_empty

from fake_device import DEV, ext_dev  # noqa: F401  (ext_dev is a fixture)


class _Recorder:
    """A native-style runner in Python: records the words each call would pass."""

    def __init__(self, func: PrimFunc) -> None:
        self.slots = abi_vars(func)
        self.calls: list[tuple[str, list[int]]] = []

    def pack(self, call):
        return pack_values(self.slots, call)

    def __call__(self, call):
        self.calls.append(("checked", self.pack(call)))

    def invoke(self, words):
        self.calls.append(("fast", list(words)))


class _Module(Module):
    format = "test-fast"
    assumed_alignment = 16

    def _make_runner(self, name, func):
        self.runner = _Recorder(func)
        return self.runner


def _module(offset: bool = False, scalar: bool = False, devices: tuple[int, ...] | None = None) -> _Module:
    n = loom.var("n")
    A, B = (loom.decl_buffer((n,), "float32", name=x, elem_offset=loom.var("off") if offset and x == "A" else None)
            for x in "AB")
    params = [A.data, B.data]
    if scalar:
        params.append(loom.var("alpha", "float32"))
    i = loom.var("i")
    body = For(i, 0, n, "serial", BufferStore(B, A[i], [i]))
    f = PrimFunc(params, body, buffer_map={A.data: A, B.data: B}, attrs={"global_symbol": "f"})
    if devices is not None:
        f = f.with_attr(ARG_DEVICES_ATTR, list(devices))
    m = _Module({"f": f})
    m["f"]
    return m


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def _aligned(n: int) -> np.ndarray:
    return aligned_empty((n,), "float32", 64)


def test_second_call_takes_the_fast_path_with_new_pointers():
    m = _module()
    a, b = _aligned(8), _aligned(8)
    m(a, b)
    c, d = _aligned(8), _aligned(8)
    m(c, d)
    (k1, w1), (k2, w2) = m.runner.calls
    assert (k1, k2) == ("checked", "fast")
    assert w1 == [_ptr(a), _ptr(b), 8] and w2 == [_ptr(c), _ptr(d), 8]


def test_loom_nd_arrays_take_it_too():
    m = _module()
    a, b = loom.nd.array(np.ones(4, "float32")), loom.nd.empty((4,), "float32")
    m(a, b)
    m(a, b)
    assert [k for k, _ in m.runner.calls] == ["checked", "fast"]
    assert m.runner.calls[1][1] == [a._ptr, b._ptr, 4]


def test_a_new_layout_is_checked_again():
    m = _module()
    m(_aligned(8), _aligned(8))
    m(_aligned(5), _aligned(5))
    assert [k for k, _ in m.runner.calls] == ["checked", "checked"]
    assert m.runner.calls[1][1][2] == 5


def test_bad_arguments_after_learning_still_raise():
    m = _module()
    m(_aligned(8), _aligned(8))
    with pytest.raises(LoomError, match="float32"):
        m(np.zeros(8, "float64"), _aligned(8))
    with pytest.raises(LoomError, match="n is 7 here"):
        m(_aligned(8), _aligned(7))
    with pytest.raises(LoomError, match="takes 2 arguments"):
        m(_aligned(8))
    with pytest.raises(LoomError, match="compact"):
        m(_aligned(16)[::2], _aligned(8))
    assert len(m.runner.calls) == 1


def test_misaligned_pointer_falls_back_to_an_aligned_copy():
    m = _module()
    m(_aligned(8), _aligned(8))
    raw = _aligned(9)
    shifted = raw[1:]  # 4 bytes past a 64-byte boundary: misaligned for 16
    assert _ptr(shifted) % 16
    m(shifted, _aligned(8))
    kind, words = m.runner.calls[-1]
    assert kind == "checked" and words[0] % 16 == 0 and words[0] != _ptr(shifted)
    m(shifted, _aligned(8))  # never learned: still checked (and copied)
    assert m.runner.calls[-1][0] == "checked"


def test_scalars_are_part_of_the_key():
    m = _module(scalar=True)
    a, b = _aligned(4), _aligned(4)
    for alpha in (0.0, -0.0, 0.0, 2.5, 2.5, 3):
        m(a, b, alpha)
    kinds = [k for k, _ in m.runner.calls]
    assert kinds == ["checked", "checked", "fast", "checked", "fast", "checked"]
    words = [w[2] for _, w in m.runner.calls]
    assert words[0] != words[1] and words[0] == words[2]  # -0.0 has its own bits
    with pytest.raises(LoomError):
        m(a, b, "x")


def test_views_with_elem_offset_never_take_it():
    m = _module(offset=True)
    assert m["f"]._fast is None


def test_interp_modules_have_no_fast_path():
    A = loom.decl_buffer((1,), "int32", name="A")
    f = PrimFunc([A.data], Evaluate(0), buffer_map={A.data: A})
    assert loom.runtime.InterpModule(IRModule({"f": f}))["f"]._fast is None


def test_device_arrays_take_it_with_their_data_addresses(ext_dev):
    m = _module(devices=(12, 12))
    a, b = loom.nd.array(np.ones(6, "float32"), DEV), loom.nd.empty((6,), "float32", DEV)
    m(a, b)
    m(a, b)
    c, d = loom.nd.empty((6,), "float32", DEV), loom.nd.empty((6,), "float32", DEV)
    m(c, d)
    assert [k for k, _ in m.runner.calls] == ["checked", "fast", "fast"]
    assert m.runner.calls[1][1] == [a.data_ptr, b.data_ptr, 6] and m.runner.calls[2][1] == [c.data_ptr, d.data_ptr, 6]
    assert ext_dev.copies() == {"to_device": 1}, "calls copied device memory"


def test_host_arrays_for_device_parameters_never_take_it(ext_dev):
    m = _module(devices=(12, 12))
    a, b = loom.nd.empty((8,), "float32", DEV), loom.nd.empty((8,), "float32", DEV)
    m(a, b)
    for args in [(_aligned(8), _aligned(8)), (loom.nd.empty((8,), "float32"), b), (a, _aligned(8))]:
        for _ in range(2):
            with pytest.raises(ArgumentValueError, match="must be on ext_dev, got"):
                m(*args)
    base = loom.nd.empty((9,), "float32", DEV)
    misaligned = NDArray(base.handle, (8,), "float32", DEV, byte_offset=4, owner=base)
    with pytest.raises(ArgumentValueError, match="is not a multiple of 16 bytes"):
        m(misaligned, b)
    assert [k for k, _ in m.runner.calls] == ["checked"]


def test_device_arrays_for_host_parameters_never_take_it(ext_dev):
    m = _module()
    m(loom.nd.empty((4,), "float32"), loom.nd.empty((4,), "float32"))
    with pytest.raises(ArgumentValueError, match=r"must be on cpu\(0\), got an array on ext_dev\(0\)"):
        m(loom.nd.empty((4,), "float32", DEV), loom.nd.empty((4,), "float32"))
    assert [k for k, _ in m.runner.calls] == ["checked"]
