"""Device memory in the interpreter: device pointers in host code, device allocations, imports, run_words."""

import types

import numpy as np
import pytest

import loom
from loom.ir import Allocate, BufferStore, Evaluate, GlobalVar, IRModule, PrimFunc, seq
from loom.ir import expr as E
from loom.plugins import hookimpl, register, unregister
from loom.runtime.abi import ARG_DEVICES_ATTR, DEVICE_ID_ANNOTATION, DEVICE_TYPE_ANNOTATION, word_of
from loom.runtime.device_api import DeviceAPI, DevicePointer, HostMemoryTable
from loom.target.devices import Device
from loom.testing import InterpreterError, Interpreter, evaluate

from interp_helpers import axis, launch, prim

DT = 12
DEV = Device(DT, 0)


class FakeDeviceAPI(DeviceAPI):
    """Device memory on the host that counts allocations."""

    device_type = DT

    def __init__(self) -> None:
        self.table = HostMemoryTable()
        self.allocated: list[tuple[int, int]] = []
        self.freed: list[int] = []

    def allocate(self, device, nbytes, alignment):
        address = self.table.allocate(nbytes, alignment)
        self.allocated.append((nbytes, alignment))
        return address

    def free(self, device, address):
        self.table.free(address)
        self.freed.append(address)

    def host_view(self, address, device):
        return self.table.view(address)

    def upload(self, arr):
        address = self.table.allocate(arr.nbytes, 64)
        self.table.view(address)[:] = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
        return address

    def download(self, address, dtype, n):
        return self.table.view(address)[: n * np.dtype(dtype).itemsize].view(dtype).copy()


@pytest.fixture
def api():
    fake = FakeDeviceAPI()
    plugin = types.SimpleNamespace(loom_device_api=hookimpl(lambda device_type: fake if device_type == DT else None))
    name = register(plugin, name="fake_device_for_interp_tests")
    try:
        yield fake
    finally:
        unregister(name)


def scale_kernel():
    """``kern(p, q, n, s)``: ``q[i] = p[i] * s`` for ``n`` threads; pointer parameters, a device kernel."""
    p, q = loom.var("p", "handle"), loom.var("q", "handle")
    n, sc = loom.var("n"), loom.var("s", "float32")
    P = loom.decl_buffer((n,), "float32", name="P", data=p)
    Q = loom.decl_buffer((n,), "float32", name="Q", data=q)
    tx = axis("threadIdx.x")
    body = launch(tx, n, BufferStore(Q, P[tx.var] * sc, [tx.var]))
    return PrimFunc([p, q, n, sc], body, attrs={"global_symbol": "kern", "calling_conv": "device_kernel"})


# -- run_words --------------------------------------------------------------------------------------


def test_run_words_on_device_memory(api):
    a = np.arange(6, dtype="float32")
    pa, pq = api.upload(a), api.upload(np.zeros(6, "float32"))
    Interpreter(scale_kernel()).run_words([pa, pq, 6, word_of(loom.DataType.of("float32"), 1.5)], DEV)
    assert api.download(pq, "float32", 6).tolist() == (a * 1.5).tolist()


def test_run_words_with_an_address_outside_device_memory(api):
    pa = api.upload(np.zeros(4, "float32"))
    with pytest.raises(InterpreterError, match=r"kern: argument 1 \(q\) is the address 0xdead, which is not memory "
                                               r"of ext_dev\(0\)"):
        Interpreter(scale_kernel()).run_words([pa, 0xDEAD, 4, 0], DEV)


def test_run_words_checks_the_word_count_and_refuses_buffer_parameters(api):
    with pytest.raises(InterpreterError, match="kern takes 4 words"):
        Interpreter(scale_kernel()).run_words([1, 2], DEV)
    B = loom.decl_buffer((4,), "float32", name="B")
    with pytest.raises(InterpreterError, match=r"has buffer parameters \(B\); run_words runs kernels"):
        Interpreter(prim(BufferStore(B, loom.const(1.0), [0]), B, name="buf")).run_words([0], DEV)


def test_run_words_out_of_bounds_is_caught(api):
    pa, pq = api.upload(np.zeros(4, "float32")), api.upload(np.zeros(4, "float32"))
    with pytest.raises(loom.testing.OutOfBoundsError):
        Interpreter(scale_kernel()).run_words([pa, pq, 5, 0], DEV)


# -- imports ----------------------------------------------------------------------------------------


def _host_calling(name, *args):
    return Evaluate(E.Call("int32", GlobalVar(name), list(args)))


def test_calls_to_imports_receive_one_word_per_argument():
    A = loom.decl_buffer((4,), "float32", name="A")
    n, x = loom.var("n"), loom.var("x", "float32")
    host = prim(_host_calling("kern", A.data, n, x, loom.const(-1, "int64")), A, n, x, name="host")
    seen = []

    def resolve(name):
        return (lambda words: seen.append((name, words))) if name == "kern" else None

    a = np.zeros(4, "float32")
    evaluate(host, a, 7, 0.5, imports=resolve)
    assert seen == [("kern", [a.ctypes.data, 7, word_of(x.dtype, 0.5), (1 << 64) - 1])]


def test_a_callee_neither_the_module_nor_its_imports_define():
    host = prim(_host_calling("missing"), name="host")
    with pytest.raises(InterpreterError, match="host calls 'missing', which neither the module nor its imports define"):
        evaluate(IRModule({"host": host}), imports=lambda name: None)
    with pytest.raises(loom.LoomValueError, match="does not define"):
        evaluate(IRModule({"host": host}))


def test_functions_of_the_module_win_over_imports():
    A = loom.decl_buffer((1,), "int32", name="A")
    helper = prim(BufferStore(A, loom.const(5), [0]), A, name="helper")
    main = prim(_host_calling("helper", A.data), A, name="main")
    a = np.zeros(1, "int32")
    evaluate(IRModule({"main": main, "helper": helper}), a, imports=lambda name: pytest.fail("imports asked"))
    assert a[0] == 5


# -- device pointers in host code --------------------------------------------------------------------


def _device_call(values, pointers):
    """What the argument checker hands the interpreter for a call (only the fields it reads)."""
    return types.SimpleNamespace(values=values, pointers=pointers, binding={},
                                 memory=lambda k: (np.ascontiguousarray(values[k]).reshape(-1), 0))


def test_host_code_passes_device_pointers_to_kernels(api):
    A = loom.decl_buffer((4,), "float32", name="A")
    host = prim(_host_calling("kern", A.data), A, name="host").with_attr(ARG_DEVICES_ATTR, [DT])
    seen = []
    f = Interpreter(host, imports=lambda name: seen.append)
    f.run_checked(_device_call([types.SimpleNamespace(device=DEV)], [0x1000]))
    assert seen == [[0x1000]]


@pytest.mark.parametrize("store", [False, True])
def test_host_code_cannot_touch_device_memory(api, store):
    A = loom.decl_buffer((4,), "float32", name="A")
    B = loom.decl_buffer((4,), "float32", name="B")
    body = BufferStore(A, loom.const(1.0), [0]) if store else BufferStore(B, A[0], [0])
    host = prim(body, A, B, name="host").with_attr(ARG_DEVICES_ATTR, [DT, 1])
    b = np.zeros(4, "float32")
    verb = "stores" if store else "reads"
    with pytest.raises(InterpreterError, match=rf"host: host code {verb} buffer A, whose memory is on ext_dev\(0\); "
                                               "only kernels may access device memory"):
        Interpreter(host).run_checked(_device_call([types.SimpleNamespace(device=DEV), b], [0x1000, b.ctypes.data]))


def _device_alloc(buf, body, device_id=0):
    return Allocate(buf.data, buf.dtype, list(buf.shape), True, body, "global",
                    {DEVICE_TYPE_ANNOTATION: DT, DEVICE_ID_ANNOTATION: device_id})


def test_annotated_allocate_uses_the_device_api(api):
    """The host allocates device memory, a kernel (an import) fills it, another reads it back."""
    D = loom.decl_buffer((3, 2), "float32", name="D")
    O = loom.decl_buffer((6,), "float32", name="O")
    host = prim(_device_alloc(D, seq(_host_calling("fill", D.data), _host_calling("read", D.data, O.data))),
                O, name="host")
    out = np.zeros(6, "float32")

    def fill(words):
        api.host_view(words[0], DEV)[:24].view("float32")[:] = np.arange(6) + 1

    def read(words):
        assert isinstance(words[1], int) and words[1] == out.ctypes.data
        out[:] = api.download(words[0], "float32", 6)

    evaluate(host, out, imports={"fill": fill, "read": read}.get)
    assert out.tolist() == [1, 2, 3, 4, 5, 6]
    assert api.allocated == [(24, 64)] and len(api.freed) == 1 and len(api.table) == 0


def test_device_allocation_is_freed_when_the_body_raises(api):
    D = loom.decl_buffer((4,), "int32", name="D")
    host = prim(_device_alloc(D, _host_calling("boom", D.data)), name="host")

    def boom(words):
        raise ValueError("kernel failed")

    with pytest.raises(ValueError, match="kernel failed"):
        evaluate(host, imports=lambda name: boom)
    assert len(api.allocated) == 1 and len(api.freed) == 1 and len(api.table) == 0


def test_device_allocation_cannot_be_read_by_host_code(api):
    D = loom.decl_buffer((4,), "int32", name="D")
    R = loom.decl_buffer((1,), "int32", name="R")
    host = prim(_device_alloc(D, BufferStore(R, D[0], [0])), R, name="host")
    with pytest.raises(InterpreterError, match=r"host code reads buffer D, whose memory is on ext_dev\(0\)"):
        evaluate(host, np.zeros(1, "int32"))
    assert len(api.freed) == 1


def test_device_pointer_value():
    assert int(DevicePointer(16, DEV)) == 16
