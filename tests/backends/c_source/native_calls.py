"""Shared by the llvm and c tests of host code calling the runtime (see loom.runtime.abi).

Hand-written lowered host functions call ``GlobalVar("k")`` and allocate device
memory; the tests build them for one native kind, write the runtime's slots
themselves with ctypes callbacks that record what they receive, and call.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import numpy as np
import pytest

import loom
from loom.backend import build_module
from loom.ir import Allocate, For, IRModule, PrimFunc
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.function import GlobalVar
from loom.runtime import abi
from loom.target import Target

DEVICE_TYPE, DEVICE_ID = 12, 1
#: What the module-under-test passes to ``k`` besides the buffer: (dtype, value, expected word).
SCALARS = [
    ("int32", None, None),  # n, the function's own parameter
    ("float32", 2.5, struct.unpack("<Q", struct.pack("<d", 2.5))[0]),
    ("int8", -3, 2**64 - 3),
    ("uint32", 4000000000, 4000000000),
    ("bool", True, 1),
    ("int64", -(2**40), 2**64 - 2**40),
    ("float64", -0.125, struct.unpack("<Q", struct.pack("<d", -0.125))[0]),
]


def build(mod: IRModule, kind: str) -> Any:
    """The runtime module of ``mod`` for ``kind``."""
    return build_module(mod, Target(kind))


def slot_address(m: Any, symbol: str) -> int:
    """The address of global ``symbol`` of a built llvm or c module."""
    if hasattr(m, "jit"):
        return m.jit.global_address(symbol)
    return ctypes.addressof(ctypes.c_void_p.in_dll(m._library.cdll, symbol))


def set_slot(m: Any, symbol: str, fn: Any) -> None:
    """Point slot ``symbol`` at ctypes function ``fn`` (None: NULL)."""
    value = ctypes.cast(fn, ctypes.c_void_p).value if fn is not None else None
    ctypes.c_void_p.from_address(slot_address(m, symbol)).value = value


def source(m: Any) -> str:
    return m.get_source("ll-raw") if hasattr(m, "jit") else m.get_source()


class Callee:
    """A native-ABI function run by Python: records each call's words; fails when ``fail`` is set."""

    def __init__(self, nwords: int) -> None:
        self.nwords = nwords
        self.calls: list[list[int]] = []
        self.fail: bytes | None = None
        self._message = ctypes.c_char_p()
        self.fn = abi.NATIVE_SIGNATURE(self._run)

    def _run(self, args: Any, error: Any) -> int:
        self.calls.append([args[k] for k in range(self.nwords)])
        if self.fail is not None:
            self._message = ctypes.c_char_p(self.fail)  # static while this object lives
            error[0] = self._message
            return -1
        return 0


class DeviceMemory:
    """The runtime's device allocator and deallocator as ctypes callbacks, counting their calls."""

    def __init__(self) -> None:
        self.allocs: list[tuple[int, int, int, int]] = []
        self.frees: list[tuple[int, int, int]] = []
        self.live: dict[int, Any] = {}
        self.refuse: bytes | None = None
        self.free_fails = False
        self._messages: list[Any] = []
        self.alloc_fn = abi.DEVICE_ALLOC_SIGNATURE(self._alloc)
        self.free_fn = abi.DEVICE_FREE_SIGNATURE(self._free)

    def _alloc(self, device_type: int, device_id: int, nbytes: int, alignment: int, error: Any) -> int | None:
        self.allocs.append((device_type, device_id, nbytes, alignment))
        if self.refuse is not None:
            self._messages.append(ctypes.c_char_p(self.refuse))
            error[0] = self._messages[-1]
            return None
        block = ctypes.create_string_buffer(nbytes + alignment)
        address = (ctypes.addressof(block) + alignment - 1) // alignment * alignment
        self.live[address] = block
        return address

    def _free(self, device_type: int, device_id: int, ptr: int, error: Any) -> int:
        self.frees.append((device_type, device_id, ptr))
        self.live.pop(ptr, None)
        if self.free_fails:
            self._messages.append(ctypes.c_char_p(b"free failed"))
            error[0] = self._messages[-1]
            return -1
        return 0

    def install(self, m: Any) -> None:
        set_slot(m, abi.DEVICE_ALLOC_SYMBOL, self.alloc_fn)
        set_slot(m, abi.DEVICE_FREE_SYMBOL, self.free_fn)


def host_module(device: bool = True, calls: int = 1, parallel: bool = False) -> IRModule:
    """``host(A)`` (n: A's length): [allocate device memory D of 2n floats;] call ``k(A, n, <SCALARS>, [D])`` ``calls`` times
    (inside a parallel loop over ``calls`` when ``parallel``); then store 1 into A[0]."""
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    D = loom.var("D", "handle")
    args: list[Any] = [A.data, n, *(loom.const(v, t) for t, v, _ in SCALARS[1:])]
    if device:
        args.append(D)
    call = S.Evaluate(E.Call("int32", GlobalVar("k"), args))
    if parallel:
        i = loom.var("i")
        body: S.Stmt = For(i, 0, calls, "parallel", call)
    else:
        body = S.seq(*[call] * calls)
    body = S.seq(body, S.BufferStore(A, loom.const(1.0, "float32"), [0]))
    if device:
        body = Allocate(D, "float32", [n * 2], loom.const(True, "bool"), body,
                        annotations={abi.DEVICE_TYPE_ANNOTATION: DEVICE_TYPE, abi.DEVICE_ID_ANNOTATION: DEVICE_ID})
    f = PrimFunc([A.data], body, buffer_map={A.data: A}).with_attr("global_symbol", "host")
    return IRModule({"host": f})


def expected_words(a: np.ndarray) -> list[int]:
    return [a.ctypes.data, len(a), *(w for _, _, w in SCALARS[1:])]


def callee_module() -> PrimFunc:
    """``k(A, n, ...)`` defined in Loom: A[1] = n * x (the float argument); fails when n > 100."""
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    params = [loom.var(f"s{k}", t) for k, (t, _, _) in enumerate(SCALARS[1:])]
    body = S.AssertStmt(n <= 100, E.StringImm("k: n is too large"),
                        S.BufferStore(A, loom.cast(n, "float32") * params[0], [1]))
    return PrimFunc([A.data, n, *params], body, buffer_map={A.data: A}).with_attr("global_symbol", "k")


# --------------------------------------------------------------------------- tests, imported by each kind's file
# (``kind`` is a fixture of the importing module: "llvm" or "c")


def _run(m: Any, n: int = 8) -> np.ndarray:
    a = np.zeros(n, "float32")
    m(a)
    return a


def test_call_packs_one_word_per_argument(kind: str) -> None:
    m = build(host_module(device=False), kind)
    k = Callee(len(SCALARS) + 1)
    set_slot(m, abi.import_symbol("k"), k.fn)
    a = np.zeros(8, "float32")
    m(a)
    assert k.calls == [expected_words(a)] and a[0] == 1.0


def test_unlinked_function_is_an_error_not_a_crash(kind: str) -> None:
    m = build(host_module(device=False), kind)
    set_slot(m, abi.import_symbol("k"), None)
    a = np.zeros(8, "float32")
    with pytest.raises(loom.LoomError, match="function k is not linked: the module that defines it was not imported"):
        m(a)
    assert a[0] == 0.0  # the caller returned at once


def test_failing_callee_stops_the_caller_with_its_message(kind: str) -> None:
    m = build(host_module(device=False, calls=2), kind)
    k = Callee(len(SCALARS) + 1)
    k.fail = b"the kernel failed"
    set_slot(m, abi.import_symbol("k"), k.fn)
    a = np.zeros(8, "float32")
    with pytest.raises(loom.LoomError, match="the kernel failed"):
        m(a)
    assert len(k.calls) == 1 and a[0] == 0.0


def test_slots_only_for_called_functions_declared_once(kind: str) -> None:
    text = source(build(host_module(device=False, calls=3), kind))
    assert abi.import_symbol("k") in text
    definitions = [line for line in text.splitlines()
                   if abi.import_symbol("k") in line and ("= 0;" in line or "= global" in line)]
    assert len(definitions) == 1
    assert abi.DEVICE_ALLOC_SYMBOL not in text  # no device allocation: no allocator slot
    plain = source(build(IRModule({"f": callee_module()}), kind))
    assert "loom_import_" not in plain and abi.DEVICE_FREE_SYMBOL not in plain


def test_device_allocation_comes_from_the_runtime_and_goes_back(kind: str) -> None:
    m = build(host_module(), kind)
    mem, k = DeviceMemory(), Callee(len(SCALARS) + 2)
    mem.install(m)
    set_slot(m, abi.import_symbol("k"), k.fn)
    a = _run(m)
    assert mem.allocs == [(DEVICE_TYPE, DEVICE_ID, 8 * 2 * 4, 64)]
    device_ptr = k.calls[0][-1]
    assert device_ptr % 64 == 0 and mem.frees == [(DEVICE_TYPE, DEVICE_ID, device_ptr)] and not mem.live
    assert k.calls[0][:-1] == expected_words(a)


def test_device_memory_is_freed_on_every_error_return(kind: str) -> None:
    m = build(host_module(), kind)
    mem, k = DeviceMemory(), Callee(len(SCALARS) + 2)
    mem.install(m)
    k.fail = b"kernel out of bounds"
    set_slot(m, abi.import_symbol("k"), k.fn)
    with pytest.raises(loom.LoomError, match="kernel out of bounds"):  # the callee's message, not the free's
        _run(m)
    assert len(mem.allocs) == len(mem.frees) == 1 and not mem.live
    set_slot(m, abi.import_symbol("k"), None)
    with pytest.raises(loom.LoomError, match="function k is not linked"):
        _run(m)
    assert len(mem.allocs) == len(mem.frees) == 2 and not mem.live


def test_device_allocator_failures(kind: str) -> None:
    m = build(host_module(), kind)
    mem, k = DeviceMemory(), Callee(len(SCALARS) + 2)
    set_slot(m, abi.import_symbol("k"), k.fn)
    for symbol in (abi.DEVICE_ALLOC_SYMBOL, abi.DEVICE_FREE_SYMBOL):
        mem.install(m)
        set_slot(m, symbol, None)
        with pytest.raises(loom.LoomError, match="no device allocator is linked"):
            _run(m)
    assert mem.allocs == [] and k.calls == []
    mem.install(m)
    mem.refuse = b"device out of memory"
    with pytest.raises(loom.LoomError, match="device out of memory"):
        _run(m)
    assert len(mem.allocs) == 1 and mem.frees == [] and k.calls == []
    mem.refuse, mem.free_fails = None, True
    with pytest.raises(loom.LoomError, match="free failed"):  # a failed free at the end of the scope is reported
        _run(m)
    assert len(mem.frees) == 1 and len(k.calls) == 1


def test_call_of_a_function_of_the_same_module(kind: str) -> None:
    mod = IRModule({"host": host_module(device=False)["host"], "k": callee_module()})
    m = build(mod, kind)
    assert abi.import_symbol("k") not in source(m)
    a = _run(m)
    assert a[1] == 8 * 2.5 and a[0] == 1.0
    with pytest.raises(loom.LoomError, match="k: n is too large"):
        _run(m, 101)


def test_calls_in_a_parallel_loop(kind: str) -> None:
    m = build(host_module(device=False, calls=6, parallel=True), kind)
    k = Callee(len(SCALARS) + 1)
    set_slot(m, abi.import_symbol("k"), k.fn)
    a = _run(m)
    assert len(k.calls) == 6 and a[0] == 1.0
    k.fail = b"lane failed"
    with pytest.raises(loom.LoomError, match="lane failed"):
        _run(m)
