"""Read-only arrays where a function writes: refused before anything runs, on every backend and on the fast path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom.runtime import NDArray, nd
from loom.runtime.arguments import ArgumentChecker, ArgumentValueError
from loom.runtime.dlpack import FLAG_READ_ONLY, DLManagedTensorVersioned, from_capsule, to_capsule

import fake_device
from fake_device import DEV, DLPackObject
from aliasing_programs import on_device_twice, twice_program

ext_dev = fake_device.ext_dev  # the fixture, for the device tests below

KINDS = ["interp", "llvm", "c"]
READ_ONLY = r"argument 1 \(B: float32 buffer B of shape \(n,\)\) is read-only, but twice writes to it"


def frozen(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


class OnlyDLPack:
    """A producer that exposes nothing but DLPack (as a JAX or torch array would)."""

    def __init__(self, arr: np.ndarray) -> None:
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


def read_only_outputs(tmp_path) -> dict[str, object]:
    """Every kind of read-only memory a caller may hand over, each of 8 float32 zeros."""
    path = tmp_path / "zeros.f32"
    np.zeros(8, "float32").tofile(path)
    return {
        "writeable-false": frozen(np.zeros(8, "float32")),
        "frombuffer-bytes": np.frombuffer(bytes(32), dtype="float32"),
        "memmap-r": np.memmap(path, dtype="float32", mode="r"),
        "dlpack-producer": OnlyDLPack(frozen(np.zeros(8, "float32"))),
        "nd-view": nd.from_dlpack(frozen(np.zeros(8, "float32"))),
        "nd-versioned-capsule": from_capsule(frozen(np.zeros(8, "float32")).__dlpack__(max_version=(1, 0))),
    }


@pytest.fixture(scope="module")
def built() -> dict[str, object]:
    return {kind: twice_program(kind) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_read_only_outputs_are_refused_before_running(built, kind, tmp_path):
    f = built[kind]
    a = np.arange(8, dtype="float32")
    for name, out in read_only_outputs(tmp_path).items():
        with pytest.raises(ArgumentValueError, match=READ_ONLY):
            f(a, out)
        assert not np.asarray(out if not isinstance(out, OnlyDLPack) else out._arr).any(), name


@pytest.mark.parametrize("kind", KINDS)
def test_read_only_inputs_are_fine(built, kind, tmp_path):
    f = built[kind]
    a = np.frombuffer(np.arange(8, dtype="float32").tobytes(), dtype="float32")
    for source in (a, OnlyDLPack(a), nd.from_dlpack(a)):
        b = np.zeros(8, "float32")
        f(source, b)
        np.testing.assert_array_equal(b, np.arange(8, dtype="float32") * 2)


@pytest.mark.parametrize("kind", ["llvm", "c"])
def test_the_fast_path_checks_writability_too(built, kind):
    f = built[kind]
    a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    f(a, b)  # learns the layout
    for out in (frozen(np.zeros(8, "float32")), nd.from_dlpack(frozen(np.zeros(8, "float32")))):
        with pytest.raises(ArgumentValueError, match=READ_ONLY):
            f(a, out)
        assert not np.asarray(out).any()
    f(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_strided_read_only_views_are_refused_off_the_quick_pointer_path():
    """A non-contiguous output misses ctypes' writable-buffer shortcut; its flags are read instead."""
    f = twice_program("llvm", strided=True)
    a = np.arange(8, dtype="float32")
    b = np.zeros(16, "float32")
    f(a, b[::2])
    with pytest.raises(ArgumentValueError, match="is read-only"):
        f(a, frozen(np.zeros(16, "float32"))[::2])


_MEMMAP_CHILD = """
import sys
import numpy as np
import loom
from loom.runtime.arguments import ArgumentValueError
sys.path.insert(0, {here!r})
from aliasing_programs import twice_program

f = twice_program({kind!r})
mm = np.memmap({path!r}, dtype="float32", mode="r")
a = np.arange(8, dtype="float32")
f(a, np.zeros(8, "float32"))  # the fast path has learned this layout
for attempt in range(2):
    try:
        f(a, mm)
    except ArgumentValueError as err:
        print("refused:", err)
    else:
        print("wrote a read-only mapping")
"""


@pytest.mark.parametrize("kind", ["llvm", "c"])
def test_read_only_memmap_output_is_refused_not_a_crash(kind, tmp_path):
    """A write through a read-only mapping is a SIGSEGV: the child must instead raise and exit normally."""
    path = tmp_path / "data.f32"
    np.zeros(8, "float32").tofile(path)
    script = _MEMMAP_CHILD.format(here=os.path.dirname(os.path.abspath(__file__)), kind=kind, path=str(path))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"child ended with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.count("refused:") == 2 and "is read-only, but twice writes to it" in proc.stdout


# -- loom.nd and DLPack ---------------------------------------------------------------------------------------


def test_read_only_nd_arrays_say_so_and_refuse_writes():
    ro = nd.from_dlpack(frozen(np.arange(3, dtype="float32")))
    assert ro.readonly and not nd.array([1.0]).readonly
    with pytest.raises(loom.LoomValueError, match="read-only"):
        ro.copyfrom(np.zeros(3, "float32"))
    assert ro.numpy().tolist() == [0.0, 1.0, 2.0]
    assert not nd.array(ro).readonly  # a copy is writable


def test_read_only_flag_crosses_versioned_capsules_and_legacy_ones_refuse(ext_dev):
    host = nd.from_dlpack(frozen(np.arange(3, dtype="float32")))
    with pytest.raises(BufferError, match="read-only"):
        to_capsule(host)
    cap = to_capsule(host, versioned=True)
    assert DLManagedTensorVersioned.from_address(
        _capsule_pointer(cap, b"dltensor_versioned")).flags & FLAG_READ_ONLY
    back = from_capsule(cap)
    assert back.readonly and back.numpy().tolist() == [0.0, 1.0, 2.0]
    # On a device: an NDArray described as read-only exports the flag, and imports keep it.
    d = nd.array(np.arange(3, dtype="float32"), DEV)
    ro = NDArray(d.handle, d.shape, d.dtype, DEV, owner=d, readonly=True)
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__()
    wrapped = nd.from_dlpack(DLPackObject(ro))
    assert wrapped.device == DEV and wrapped.readonly and wrapped.data_ptr == d.data_ptr
    assert not nd.from_dlpack(DLPackObject(d)).readonly
    with pytest.raises(loom.LoomValueError, match="read-only"):
        wrapped.copyfrom(np.zeros(3, "float32"))


def _capsule_pointer(capsule, name: bytes) -> int:
    import ctypes

    get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer",
                                                                                  ctypes.pythonapi))
    return get(capsule, name)


def test_read_only_device_outputs_are_refused(ext_dev):
    func = on_device_twice()
    checker = ArgumentChecker(func)
    a, b = nd.array(np.arange(4, dtype="float32"), DEV), nd.empty((4,), "float32", DEV)
    checker.bind((a, b))
    ro = nd.from_dlpack(DLPackObject(NDArray(b.handle, b.shape, b.dtype, DEV, owner=b, readonly=True)))
    with pytest.raises(ArgumentValueError, match=READ_ONLY):
        checker.bind((a, ro))
    checker.bind((ro, nd.empty((4,), "float32", DEV)))  # reading it is fine
