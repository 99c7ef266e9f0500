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
     r"argument 1 \(B: .*\) must be on the CPU, got a OnDevice on device \(2, 0\)"),
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
    with pytest.raises(ArgumentValueError, match=r"argument 2 \(C: .*\): the call wrote into a read-only array"):
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
