"""The shared call-time argument checker: every mistake is a clear error raised before any memory is touched."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import loom
from loom.ir import BufferStore, Evaluate, For
from loom.runtime import ArgumentChecker, ArgumentError, ArgumentTypeError, ArgumentValueError, nd

from runtime_programs import build, offset_copy, prim, scale2d, vadd

HERE = os.path.dirname(os.path.abspath(__file__))


def f32(*shape: int) -> np.ndarray:
    return np.zeros(shape, dtype="float32")


def misaligned(n: int, dtype: str = "float32", shift: int = 16, fill: bool = True) -> np.ndarray:
    """A C-contiguous array whose data pointer is ``shift`` bytes past a 256-byte boundary."""
    npd = np.dtype(dtype)
    raw = np.zeros(n * npd.itemsize + 512, dtype=np.uint8)
    start = (-raw.ctypes.data) % 256 + shift
    arr = raw[start:start + n * npd.itemsize].view(npd)
    if fill:
        arr[:] = np.arange(n)
    assert arr.ctypes.data % 256 == shift
    return arr


class OnDevice:
    """A DLPack producer that says its memory is on ``cuda(0)``."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr

    def __dlpack__(self, **kw):
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return (2, 0)


def doubled() -> loom.ir.PrimFunc:
    """``B[i] = A[i]`` for ``A`` of length 2n and ``B`` of length n: a compound shape entry."""
    n = loom.var("n")
    A = loom.decl_buffer((n * 2,), "float32", name="A")
    B = loom.decl_buffer((n,), "float32", name="B")
    i = loom.var("i")
    return prim(For(i, 0, n, "serial", BufferStore(B, A[i], [i])), B, A, name="doubled")


def pointer_func() -> loom.ir.PrimFunc:
    p = loom.var("p", "handle")
    return prim(Evaluate(0), p, name="takes_pointer")


# (id, func factory, args factory, error type, message pattern)
BAD_CASES = [
    ("count", vadd, lambda: (f32(4), f32(4)), ArgumentTypeError,
     r"vadd takes 3 arguments \(A, B, C\), got 2"),
    ("not-an-array", vadd, lambda: (f32(4), f32(4), [0.0] * 4), ArgumentTypeError,
     r"vadd: argument 2 \(C: float32 buffer C of shape \(n,\)\) takes an array .* got list"),
    ("ndim", vadd, lambda: (f32(2, 2), f32(4), f32(4)), ArgumentValueError,
     r"argument 0 \(A: float32 buffer A of shape \(n,\)\) needs 1 dimensions, got an array of shape \(2, 2\)"),
    ("dtype", vadd, lambda: (f32(4), np.zeros(4), f32(4)), ArgumentTypeError,
     r"argument 1 \(B: .*\) needs dtype float32, got an array of float64"),
    ("constant-shape", offset_copy, lambda: (np.zeros(8, "int32"), np.zeros(7, "int32")), ArgumentValueError,
     r"argument 1 \(B: int32 buffer B of shape \(8,\)\): shape\[0\] must be 8, got shape \(7,\)"),
    ("inconsistent-symbolic", vadd, lambda: (f32(4), f32(5), f32(4)), ArgumentValueError,
     r"argument 1 \(B: .*\): shape\[0\]: n is 5 here, but 4 from .*argument 0 \(A: .*shape\[0\]"),
    ("compound-shape", doubled, lambda: (f32(3), f32(5)), ArgumentValueError,
     r"argument 1 \(A: .*\): shape\[0\] must be n \* 2 = 6, got shape \(5,\)"),
    ("non-contiguous", vadd, lambda: (f32(8)[::2], f32(4), f32(4)), ArgumentValueError,
     r"argument 0 \(A: .*\) is compact .* strides \(2,\) \(elements\); pass numpy.ascontiguousarray"),
    ("negative-strides", scale2d, lambda: (f32(3, 4)[::-1], f32(3, 4), 1.0, 0), ArgumentValueError,
     r"argument 0 \(A: .*\): array strides \(-16, 4\) \(bytes\) must be non-negative"),
    ("strided-view-shape", scale2d, lambda: (f32(4, 6)[:, ::2], f32(4, 4), 1.0, 0), ArgumentValueError,
     r"argument 1 \(B: .*\): shape\[1\]: n is 4 here, but 3 from"),
    ("offset-factor", offset_copy, lambda: (np.arange(16, dtype="int32")[2:10], np.zeros(8, "int32")),
     ArgumentValueError, r"argument 0 \(A: .*\): elem_offset 2 is not a multiple of offset_factor 4"),
    ("device", vadd, lambda: (f32(4), OnDevice(f32(4)), f32(4)), ArgumentValueError,
     r"argument 1 \(B: .*\) must be on cpu\(0\), got a OnDevice on cuda\(0\); copy it to the host first"),
    ("scalar-float-for-int", scale2d, lambda: (f32(2, 2), f32(2, 2), 1.0, 1.5), ArgumentTypeError,
     r"argument 3 \(k: int32\) expects a int32 scalar, got float 1.5"),
    ("scalar-str-for-float", scale2d, lambda: (f32(2, 2), f32(2, 2), "x", 1), ArgumentTypeError,
     r"argument 2 \(alpha: float32\) expects a float32 scalar, got str 'x'"),
    ("scalar-out-of-range", scale2d, lambda: (f32(2, 2), f32(2, 2), 1.0, 1 << 40), ArgumentValueError,
     r"argument 3 \(k: int32\) expects a int32 scalar, got 1099511627776 \(1099511627776 is outside"),
    ("array-for-scalar", scale2d, lambda: (f32(2, 2), f32(2, 2), f32(2), 1), ArgumentTypeError,
     r"argument 2 \(alpha: float32\) expects a float32 scalar, got an array"),
    ("pointer-non-contiguous", pointer_func, lambda: (f32(8)[::2],), ArgumentValueError,
     r"argument 0 \(p: handle\) is a pointer; it takes a C-contiguous array"),
]


@pytest.mark.parametrize("case", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_argument_is_a_clear_error_and_touches_nothing(case):
    _, make_func, make_args, error, pattern = case
    args = make_args()
    before = [np.array(a, copy=True) for a in args if isinstance(a, np.ndarray)]
    mod = build(make_func())
    with pytest.raises(error, match=pattern) as info:
        mod(*args)
    assert isinstance(info.value, ArgumentError) and isinstance(info.value, loom.LoomError)
    assert isinstance(info.value, TypeError if error is ArgumentTypeError else ValueError)
    after = [a for a in args if isinstance(a, np.ndarray)]
    assert all(np.array_equal(x, y) for x, y in zip(before, after)), "a rejected call wrote into an argument"


def test_bad_arguments_leave_the_process_alive():
    """Every bad call above, in a fresh interpreter process: each raises, and the process exits normally."""
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import test_arguments as t\n"
        "n = 0\n"
        "for name, func, args, err, _ in t.BAD_CASES:\n"
        "    m = t.build(func())\n"
        "    try:\n"
        "        m(*args())\n"
        "    except err:\n"
        "        n += 1\n"
        "print('survived', n)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, HERE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["survived", str(len(BAD_CASES))]


def test_binding_of_symbolic_shapes_strides_and_scalars():
    func = scale2d()
    checker = ArgumentChecker(func)
    base = np.arange(30, dtype="float32").reshape(5, 6)
    call = checker.bind((base[:, ::2], f32(5, 3), 2.0, 7))
    by_name = {v.name: x for v, x in call.binding.items()}
    assert by_name == {"m": 5, "n": 3, "s0": 6, "s1": 2, "alpha": 2.0, "k": 7}
    assert call.values[2] == np.float32(2.0) and type(call.values[2]) is np.float32
    assert call.values[3] == 7


def test_strided_view_runs_with_its_strides():
    base = np.arange(30, dtype="float32").reshape(5, 6)
    out = f32(5, 3)
    build(scale2d())(base[:, 1::2], out, 0.5, 1)
    np.testing.assert_allclose(out, base[:, 1::2] * 0.5 + 1)


def test_elem_offset_binds_from_the_view():
    base = np.arange(20, dtype="int32")
    call = ArgumentChecker(offset_copy()).bind((base[8:16], np.zeros(8, "int32")))
    assert {v.name: x for v, x in call.binding.items()} == {"A_elem_offset": 8}
    out = np.zeros(8, "int32")
    build(offset_copy())(base[8:16], out)
    assert out.tolist() == list(range(8, 16))


def test_layout_var_that_no_argument_determines_is_rejected_when_built():
    n = loom.var("n")
    A = loom.decl_buffer((n * 2,), "float32", name="A")
    with pytest.raises(loom.LoomValueError, match=r"n \* 2 in the layout of buffer A uses n, which no argument"):
        ArgumentChecker(prim(Evaluate(0), A, name="f"))


@pytest.mark.parametrize("kind", ["ndarray", "dlpack", "array_interface", "subclass"])
def test_array_kinds_accepted(kind):
    a = np.arange(4, dtype="float32")
    wrap = {
        "ndarray": nd.array,
        "dlpack": lambda x: type("D", (), {"__dlpack__": lambda s, **k: x.__dlpack__(**k),
                                           "__dlpack_device__": lambda s: (1, 0)})(),
        "array_interface": lambda x: type("I", (), {"__array_interface__": x.__array_interface__})(),
        "subclass": lambda x: x.view(type("Sub", (np.ndarray,), {})),
    }[kind]
    c = nd.empty((4,), "float32")
    build(vadd())(wrap(a), a, c)
    np.testing.assert_array_equal(c.numpy(), a * 2)


def test_misaligned_arrays_are_copied_in_and_out():
    """numpy memory that is only 16-byte aligned runs on an aligned copy; results come back."""
    a, b, c = misaligned(9), misaligned(9, shift=32), misaligned(9, shift=48, fill=False)
    call = ArgumentChecker(vadd()).bind((a, b, c))
    assert all(p % 64 == 0 for p in call.pointers)
    assert not any(np.shares_memory(v, x) for v, x in zip(call.values, (a, b, c)))
    call.finish()
    build(vadd())(a, b, c)
    np.testing.assert_array_equal(c, np.arange(9) * 2)


def test_only_written_elements_are_copied_back():
    """A misaligned output keeps the values the call did not write, even when the caller changes them."""
    n = loom.var("n")
    A = loom.decl_buffer((n,), "int32", name="A")
    f = prim(BufferStore(A, loom.const(5), [0]), A, name="first")
    a = misaligned(4, "int32")
    call = ArgumentChecker(f).bind((a,))
    a[3] = 99  # changed by someone else while the call runs on the copy
    call.values[0][0] = 5
    call.finish()
    assert a.tolist() == [5, 1, 2, 99]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16"])
def test_negative_zero_written_over_zero_is_copied_back(dtype: str) -> None:
    """A write is a change of bits, not of value: -0.0 over 0.0 comes back (bfloat16's numpy kind is 'V' too)."""
    import ml_dtypes

    npd = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    A = loom.decl_buffer((4,), dtype, name="A")
    f = prim(BufferStore(A, loom.const(-0.0, dtype), [1]), A, name="negative_zero")
    raw = np.zeros(4 * npd.itemsize + 512, dtype=np.uint8)
    start = (-raw.ctypes.data) % 256 + 16
    a = raw[start:start + 4 * npd.itemsize].view(npd)  # zeros, 16 bytes past a 256-byte boundary: copied
    build(f)(a)
    assert np.signbit(a.astype("float32")).tolist() == [False, True, False, False]


def test_aligned_arrays_are_passed_without_copy():
    a, b, c = nd.array(np.ones(8, "float32")), nd.empty((8,), "float32"), nd.empty((8,), "float32")
    call = ArgumentChecker(vadd()).bind((a, b, c))
    assert all(np.shares_memory(v, np.from_dlpack(x)) for v, x in zip(call.values, (a, b, c)))


def test_explicit_alignment_above_the_default_is_honoured():
    A = loom.decl_buffer((16,), "float32", name="A", data_alignment=256)
    call = ArgumentChecker(prim(Evaluate(0), A, name="f")).bind((misaligned(16, shift=64),))
    assert call.pointers[0] % 256 == 0


def test_read_only_misaligned_output_is_an_error():
    a, b = misaligned(4), misaligned(4)
    c = misaligned(4)
    c.flags.writeable = False
    with pytest.raises(ArgumentValueError, match=r"argument 2 \(C: .*\) is read-only, but vadd writes to it"):
        build(vadd())(a, b, c)


def test_read_only_misaligned_input_is_fine():
    a = misaligned(4)
    a.flags.writeable = False
    c = f32(4)
    build(vadd())(a, a, c)
    assert c.tolist() == [0, 2, 4, 6]


def test_backend_can_cap_the_alignment_it_relies_on():
    """A backend whose code assumes at most 16-byte alignment takes 16-byte aligned numpy memory as is."""
    a, b, c = misaligned(4, shift=16), misaligned(4, shift=48), misaligned(4, shift=80, fill=False)
    call = ArgumentChecker(vadd(), assumed_alignment=16).bind((a, b, c))
    assert all(v is x for v, x in zip(call.values, (a, b, c)))
    odd = misaligned(4, shift=8)
    assert ArgumentChecker(vadd(), assumed_alignment=16).bind((odd, a, c)).pointers[0] % 16 == 0


def test_misaligned_view_with_elem_offset_keeps_its_offset_on_the_copy():
    base = np.frombuffer(memoryview(misaligned(20, "int32", shift=4)), dtype="int32")  # a misaligned root array
    assert base.base is not None and not isinstance(base.base, np.ndarray) and base.ctypes.data % 64 == 4
    view = base[8:16]
    call = ArgumentChecker(offset_copy()).bind((view, np.zeros(8, "int32")))
    assert {v.name: x for v, x in call.binding.items()} == {"A_elem_offset": 8}
    assert call.pointers[0] % 64 == 0 and not np.shares_memory(call.values[0], base)
    out = np.zeros(8, "int32")
    build(offset_copy())(view, out)
    assert out.tolist() == list(range(8, 16))


def test_memory_is_the_flat_view_the_pointer_addresses():
    """``BoundCall.memory``: the base array for a buffer with an elem_offset, the aligned copy when copied."""
    base = np.arange(20, dtype="int32")
    call = ArgumentChecker(offset_copy(), assumed_alignment=1).bind((base[8:16], np.zeros(8, "int32")))
    flat, off = call.memory(0)
    assert off == 8 and flat.ctypes.data == call.pointers[0] and np.shares_memory(flat, base)
    assert flat.shape == (20,) and flat[off:off + 8].tolist() == list(range(8, 16))
    view = np.frombuffer(memoryview(misaligned(20, "int32", shift=4)), dtype="int32")[8:16]
    call = ArgumentChecker(offset_copy()).bind((view, np.zeros(8, "int32")))
    flat, off = call.memory(0)
    assert off == 8 and flat.ctypes.data == call.pointers[0] and flat.ctypes.data % 64 == 0
    assert flat[off:off + 8].tolist() == list(range(8, 16)) and not np.shares_memory(flat, view)
    with pytest.raises(loom.LoomTypeError, match="parameter 2 is a scalar"):
        ArgumentChecker(scale2d()).bind((f32(2, 2), f32(2, 2), 1.0, 1)).memory(2)


def test_memory_of_a_strided_view_spans_its_elements_and_stays_read_only():
    base = np.arange(30, dtype="float32").reshape(5, 6)
    base.flags.writeable = False
    call = ArgumentChecker(scale2d(), assumed_alignment=1).bind((base[:, 1::2], f32(5, 3), 1.0, 0))  # no copy
    flat, off = call.memory(0)
    assert off == 0 and flat.shape == (1 + 4 * 6 + 2 * 2,) and flat[0] == 1 and flat[-1] == 29
    assert not flat.flags.writeable


def test_interp_module_checks_each_call_once(monkeypatch):
    calls = []
    bind = ArgumentChecker.bind
    monkeypatch.setattr(ArgumentChecker, "bind", lambda self, args: calls.append(self) or bind(self, args))
    mod = build(vadd())
    a, c = np.arange(5, dtype="float32"), f32(5)
    mod(a, a, c)
    mod(a, a, c)
    assert len(calls) == 2
    np.testing.assert_array_equal(c, a * 2)


# -- arguments on a device (the fake ext_dev of fake_device.py) -----------------------------------------

from fake_device import DEV, DLPackObject, ext_dev  # noqa: E402,F401  (ext_dev is a fixture)
from loom.runtime import NDArray  # noqa: E402
from loom.runtime.abi import ARG_DEVICES_ATTR  # noqa: E402


def on_device(func: loom.ir.PrimFunc, *devices: int) -> loom.ir.PrimFunc:
    return func.with_attr(ARG_DEVICES_ATTR, list(devices))


def dev32(*shape: int) -> NDArray:
    return nd.array(np.arange(int(np.prod(shape)), dtype="float32").reshape(shape), DEV)


def test_device_arrays_bind_as_descriptors(ext_dev):
    a, b, c = dev32(5), dev32(5), nd.empty((5,), "float32", DEV)
    call = ArgumentChecker(on_device(vadd(), 12, 12, 12)).bind((a, b, c))
    assert call.values == [a, b, c] and call.pointers == [a.data_ptr, b.data_ptr, c.data_ptr]
    assert {v.name: x for v, x in call.binding.items()} == {"n": 5}
    assert call.devices == [DEV] * 3
    with pytest.raises(loom.LoomTypeError, match=r"parameter 0 is on ext_dev\(0\), whose memory is not host memory"):
        call.memory(0)
    assert ext_dev.copies() == {"to_device": 2}, "binding copied device memory"


def test_mixed_devices_and_the_device_type_override(ext_dev):
    func = on_device(scale2d(), 12, 1, 1, 1)
    host_out = nd.empty((2, 3), "float32")
    call = ArgumentChecker(func).bind((dev32(2, 3), host_out, 1.0, 0))
    assert call.values[1] is np.asarray(host_out) and call.devices == [DEV, loom.cpu(0), None, None]
    assert call.memory(1)[0].shape == (6,)
    call = ArgumentChecker(vadd(), device_type=12).bind((dev32(3), dev32(3), dev32(3)))
    assert call.devices == [DEV] * 3


def test_device_dlpack_objects_are_wrapped(ext_dev):
    a = dev32(4)
    call = ArgumentChecker(on_device(vadd(), 12, 12, 12)).bind((DLPackObject(a), a, dev32(4)))
    assert type(call.values[0]) is NDArray and call.values[0].device == DEV
    assert call.pointers[0] == a.data_ptr


def test_device_layouts_bind_from_the_descriptor(ext_dev):
    base = dev32(5, 6)
    view = NDArray(base.handle, (5, 3), "float32", DEV, strides=(6, 2), byte_offset=4, owner=base)
    call = ArgumentChecker(on_device(scale2d(), 12, 12, 1, 1), assumed_alignment=4).bind(
        (view, nd.empty((5, 3), "float32", DEV), 2.0, 7))
    assert {v.name: x for v, x in call.binding.items()} == {"m": 5, "n": 3, "s0": 6, "s1": 2, "alpha": 2.0, "k": 7}
    assert call.pointers[0] == base.handle + 4
    ints = nd.array(np.arange(20, dtype="int32"), DEV)
    shifted = NDArray(ints.handle, (8,), "int32", DEV, byte_offset=32, owner=ints)
    call = ArgumentChecker(on_device(offset_copy(), 12, 12)).bind((shifted, nd.empty((8,), "int32", DEV)))
    assert {v.name: x for v, x in call.binding.items()} == {"A_elem_offset": 8}
    assert call.pointers[0] == ints.handle, "elem_offset addresses from the handle"
    pointer = ArgumentChecker(on_device(pointer_func(), 12)).bind((ints,))
    assert pointer.pointers == [ints.data_ptr]


def _view(base: NDArray, **kw) -> NDArray:
    return NDArray(base.handle, kw.pop("shape", (4,)), kw.pop("dtype", base.dtype), DEV, owner=base, **kw)


# (id, func, devices, args factory, error type, message pattern)
DEVICE_CASES = [
    ("numpy", vadd, (12, 12, 12), lambda: (f32(4), dev32(4), dev32(4)), ArgumentValueError,
     r"vadd: argument 0 \(A: float32 buffer A of shape \(n,\)\) must be on ext_dev, got a numpy array on the "
     r"host; copy it with loom.nd.array\(x, loom.device\('ext_dev'\)\)"),
    ("cpu-ndarray", vadd, (12, 12, 12), lambda: (dev32(4), nd.array(f32(4)), dev32(4)), ArgumentValueError,
     r"argument 1 \(B: .*\) must be on ext_dev, got an array on cpu\(0\); copy it with loom.nd.array"),
    ("other-device", vadd, (12, 12, 12), lambda: (dev32(4), dev32(4), OnDevice(f32(4))), ArgumentValueError,
     r"argument 2 \(C: .*\) must be on ext_dev, got a OnDevice on cuda\(0\)$"),
    ("device-for-cpu", vadd, (1, 1, 1), lambda: (f32(4), dev32(4), f32(4)), ArgumentValueError,
     r"vadd: argument 1 \(B: .*\) must be on cpu\(0\), got an array on ext_dev\(0\); copy it to the host"),
    ("not-an-array", vadd, (12, 12, 12), lambda: (dev32(4), [0.0] * 4, dev32(4)), ArgumentTypeError,
     r"argument 1 \(B: .*\) takes an array on ext_dev \(a loom.nd.NDArray or a DLPack object\), got list"),
    ("dtype", vadd, (12, 12, 12), lambda: (dev32(4), nd.empty((4,), "float64", DEV), dev32(4)), ArgumentTypeError,
     r"argument 1 \(B: .*\) needs dtype float32, got an array of float64"),
    ("ndim", vadd, (12, 12, 12), lambda: (dev32(2, 2), dev32(4), dev32(4)), ArgumentValueError,
     r"argument 0 \(A: .*\) needs 1 dimensions, got an array of shape \(2, 2\)"),
    ("shape", vadd, (12, 12, 12), lambda: (dev32(4), dev32(5), dev32(4)), ArgumentValueError,
     r"argument 1 \(B: .*\): shape\[0\]: n is 5 here, but 4 from"),
    ("constant-shape", offset_copy, (12, 12),
     lambda: (nd.empty((8,), "int32", DEV), nd.empty((7,), "int32", DEV)), ArgumentValueError,
     r"argument 1 \(B: .*\): shape\[0\] must be 8, got shape \(7,\)"),
    ("misaligned", vadd, (12, 12, 12), lambda: (_view(dev32(5), byte_offset=4), dev32(4), dev32(4)),
     ArgumentValueError, r"argument 0 \(A: .*\): its data pointer 0x[0-9a-f]+ on ext_dev\(0\) is not a multiple "
                         r"of 64 bytes, and device memory is not copied"),
    ("non-compact", vadd, (12, 12, 12), lambda: (_view(dev32(8), strides=(2,)), dev32(4), dev32(4)),
     ArgumentValueError, r"argument 0 \(A: .*\) is compact .* strides \(2,\) \(elements\)"),
    ("negative-strides", scale2d, (12, 12, 1, 1),
     lambda: (_view(dev32(12), shape=(3, 4), strides=(-4, 1), byte_offset=32), dev32(3, 4), 1.0, 0),
     ArgumentValueError, r"argument 0 \(A: .*\): array strides \(-4, 1\) \(elements\) must be non-negative"),
    ("strides-conflict", scale2d, (12, 12, 1, 1),
     lambda: (_view(dev32(24), shape=(4, 3), strides=(6, 2)), dev32(4, 4), 1.0, 0), ArgumentValueError,
     r"argument 1 \(B: .*\): shape\[1\]: n is 4 here, but 3 from"),
    ("partial-element-offset", offset_copy, (12, 12),
     lambda: (_view(nd.empty((12,), "int32", DEV), shape=(8,), byte_offset=6), nd.empty((8,), "int32", DEV)),
     ArgumentValueError, r"argument 0 \(A: .*\): byte_offset 6 is not a whole number of 4-byte elements"),
    ("offset-factor", offset_copy, (12, 12),
     lambda: (_view(nd.empty((12,), "int32", DEV), shape=(8,), byte_offset=8), nd.empty((8,), "int32", DEV)),
     ArgumentValueError, r"argument 0 \(A: .*\): elem_offset 2 is not a multiple of offset_factor 4"),
    ("pointer-strided", pointer_func, (12,), lambda: (_view(dev32(8), strides=(2,)),), ArgumentValueError,
     r"argument 0 \(p: handle\) is a pointer; it takes a compact array, got strides \(2,\)"),
]


@pytest.mark.parametrize("case", DEVICE_CASES, ids=[c[0] for c in DEVICE_CASES])
def test_bad_device_argument_is_a_clear_error(ext_dev, case):
    _, make_func, devices, make_args, error, pattern = case
    args = make_args()
    counts = dict(ext_dev.counts)
    with pytest.raises(error, match=pattern) as info:
        ArgumentChecker(on_device(make_func(), *devices)).bind(args)
    assert isinstance(info.value, ArgumentError)
    assert dict(ext_dev.counts) == counts, "a refused call touched device memory"
