"""The ext_dev test device: its memory, its backend, and split builds with every host.

The acceptance program of the backend seam: a tiled matmul whose A and B tiles are
loaded cooperatively into shared memory by bound threads, with barriers, built for
``ext_dev`` with each host (interp, llvm, c) and for ``interp`` alone.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
import loom.testing.ext_dev as ext_dev
from loom.runtime.arguments import ArgumentValueError
from loom.testing import RaceError
from loom.testing.conformance.programs import tiled_matmul

HOSTS = ["interp", "llvm", "c"]


@pytest.fixture(autouse=True)
def registered():
    name = loom.plugins.register(ext_dev)
    ext_dev.device_api().reset_counters()
    try:
        yield
    finally:
        loom.plugins.unregister(name)


def _inputs(m: int, n: int, k: int):
    rng = np.random.default_rng(0)
    return rng.standard_normal((m, k)).astype("float32"), rng.standard_normal((k, n)).astype("float32")


DEV = loom.device("ext_dev")


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("shape", [(32, 32, 32), (20, 13, 18)], ids=["even", "guarded"])
def test_tiled_matmul_on_ext_dev_with_each_host(host, shape):
    m, n, k = shape
    s, args = tiled_matmul(m, n, k)
    f = loom.build(s, args, target="ext_dev", target_host=host)
    assert f.target.kind_name == host and [type(d).__name__ for d in f.imported_modules] == ["ExtDevModule"]
    a, b = _inputs(m, n, k)
    A, B, C = loom.nd.array(a, DEV), loom.nd.array(b, DEV), loom.nd.empty((m, n), "float32", DEV)
    api = ext_dev.device_api()
    api.reset_counters()
    f(A, B, C)
    assert dict(api.counters) == {}  # the call copies nothing: every array stays on the device
    np.testing.assert_allclose(C.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_tiled_matmul_on_interp_alone():
    s, args = tiled_matmul(20, 13, 18)
    f = loom.build(s, args, target="interp")
    a, b = _inputs(20, 13, 18)
    c = np.zeros((20, 13), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _without_barriers(mod: loom.ir.IRModule) -> loom.ir.IRModule:
    from loom.ir.functor import Mutator

    class Strip(Mutator):
        def visit_Evaluate(self, st):
            call = st.value
            if isinstance(call, loom.ir.Call) and getattr(call.op, "name", "") == "tir.tvm_storage_sync":
                return loom.ir.Evaluate(loom.const(0))
            return st

    return mod.with_(functions={n: f.with_body(Strip().visit(f.body)) for n, f in mod.functions.items()})


@pytest.mark.parametrize("target", ["interp", "ext_dev"])
def test_the_same_program_without_barriers_is_a_race(target):
    s, args = tiled_matmul(16, 16, 16)
    f = loom.build(s, args, target=target, target_host="interp" if target == "ext_dev" else None)
    kernels = f.imported_modules[0] if target == "ext_dev" else f
    assert "tvm_storage_sync" in kernels.get_source()
    racy = type(kernels)(_without_barriers(kernels.ir_module), kernels.target, kernels.entry_name)
    a, b = _inputs(16, 16, 16)
    if target == "interp":
        with pytest.raises(RaceError, match=r"A\.shared|B\.shared"):
            racy(a, b, np.zeros((16, 16), "float32"))
    else:
        f.imported_modules[0] = racy
        loom.runtime.linking.link(f)
        with pytest.raises(RaceError, match=r"A\.shared|B\.shared"):
            f(loom.nd.array(a, DEV), loom.nd.array(b, DEV), loom.nd.empty((16, 16), "float32", DEV))


@pytest.mark.parametrize("host", ["llvm", "c"])
def test_native_hosts_raise_the_kernels_own_error(host):
    """An error in a kernel run by Python under native host code arrives as itself, not as a message."""
    s, args = tiled_matmul(16, 16, 16)
    f = loom.build(s, args, target="ext_dev", target_host=host)
    kernels = f.imported_modules[0]
    f.imported_modules[0] = type(kernels)(_without_barriers(kernels.ir_module), kernels.target, kernels.entry_name)
    loom.runtime.linking.link(f)
    a, b = _inputs(16, 16, 16)
    with pytest.raises(RaceError, match=r"A\.shared|B\.shared"):
        f(loom.nd.array(a, DEV), loom.nd.array(b, DEV), loom.nd.empty((16, 16), "float32", DEV))


@pytest.mark.parametrize("host", HOSTS)
def test_host_arguments_must_be_on_the_device(host):
    s, args = tiled_matmul(16, 16, 16)
    f = loom.build(s, args, target="ext_dev", target_host=host)
    a, b = _inputs(16, 16, 16)
    with pytest.raises(ArgumentValueError, match="argument 0 .* must be on ext_dev"):
        f(a, loom.nd.array(b, DEV), loom.nd.empty((16, 16), "float32", DEV))


@pytest.mark.parametrize("host", HOSTS)
def test_intermediate_tensors_live_on_the_device(host):
    """Two kernels pass B through device memory the host allocates from the ext_dev API and frees."""
    A = loom.placeholder((64,), name="A")
    B = loom.compute((64,), lambda i: A[i] * 2.0, name="B")
    C = loom.compute((64,), lambda i: B[i] + 1.0, name="C")
    s = loom.create_schedule(C.op)
    for T in (B, C):
        bx, tx = s[T].split(T.op.axis[0], factor=16)
        s[T].bind(bx, loom.thread_axis("blockIdx.x"))
        s[T].bind(tx, loom.thread_axis("threadIdx.x"))
    f = loom.build(s, [A, C], target="ext_dev", target_host=host)
    a = np.arange(64, dtype="float32")
    A_, C_ = loom.nd.array(a, DEV), loom.nd.empty((64,), "float32", DEV)
    api = ext_dev.device_api()
    api.reset_counters()
    live = len(api.table)
    f(A_, C_)
    assert api.counters["alloc"] == 1 and api.counters["free"] == 1 and len(api.table) == live
    np.testing.assert_array_equal(C_.numpy(), a * 2 + 1)


def test_unbound_stages_cannot_run_on_the_host():
    A = loom.placeholder((8,), name="A")
    B = loom.compute((8,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(loom.LoomError, match="host code stores to B .* lives on ext_dev.*bind the loops"):
        loom.build(loom.create_schedule(B.op), [A, B], target="ext_dev", target_host="llvm")


def test_device_limits_come_from_the_target():
    A = loom.placeholder((64,), name="A")
    B = loom.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, loom.thread_axis("blockIdx.x"))
    s[B].bind(tx, loom.thread_axis("threadIdx.x"))
    loom.build(s, [A, B], target="ext_dev", target_host="interp")
    with pytest.raises(loom.LoomError, match="block of 64 threads .* exceeds the device's 32 threads per block"):
        loom.build(s, [A, B], target="ext_dev -max_num_threads=32", target_host="interp")


def test_the_device_api_counts_and_guards_its_memory():
    api = ext_dev.device_api()
    x = loom.nd.array(np.arange(6, dtype="int32"), DEV)
    assert api.counters["alloc"] == 1 and api.counters["to_device"] == 1 and api.counters["bytes_to_device"] == 24
    assert x.numpy().tolist() == [0, 1, 2, 3, 4, 5] and api.counters["to_host"] == 1
    with pytest.raises(loom.LoomTypeError):
        np.asarray(x)  # device memory is never read as host memory by accident
    with pytest.raises(loom.LoomValueError, match="outside every ext_dev allocation"):
        api.copy_to_host(np.zeros(4, "int64"), x.data_ptr, DEV)
    with pytest.raises(loom.LoomValueError, match="ext_dev has one device"):
        api.allocate(loom.device("ext_dev", 1), 8, 8)


def test_ext_dev_memory_never_aliases_numpy():
    a = np.arange(4, dtype="float32")
    x = loom.nd.array(a, DEV)
    a[0] = 99.0
    assert x.numpy()[0] == 0.0 and x.data_ptr != a.ctypes.data


_FRESH = textwrap.dedent("""
    import sys, numpy as np, loom, loom.testing.ext_dev as ext_dev
    loom.plugins.register(ext_dev)
    f = loom.runtime.load_module(sys.argv[1])
    dev = loom.device("ext_dev")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype("float32"); b = rng.standard_normal((16, 16)).astype("float32")
    C = loom.nd.empty((16, 16), "float32", dev)
    f(loom.nd.array(a, dev), loom.nd.array(b, dev), C)
    print(type(f).__name__, [type(m).__name__ for m in f.imported_modules], np.allclose(C.numpy(), a @ b, atol=1e-4))
""")


@pytest.mark.parametrize("host", HOSTS)
def test_a_split_build_exports_to_one_file_and_loads_in_a_fresh_process(host, tmp_path):
    s, args = tiled_matmul(16, 16, 16)
    f = loom.build(s, args, target="ext_dev", target_host=host)
    path = tmp_path / ("kernel.so" if host != "interp" else "kernel.loom")
    f.export_library(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # one file
    out = subprocess.run([sys.executable, "-c", _FRESH, str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    kind = {"interp": "InterpModule", "llvm": "LibraryModule", "c": "LibraryModule"}[host]
    assert out.stdout.split() == [kind, "['ExtDevModule']", "True"]
