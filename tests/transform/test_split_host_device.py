"""SplitHostDevice: kernels out of thread regions, host call, attrs, and running the pair."""

import numpy as np
import pytest

import loom
from loom.errors import LoomError
from loom.ir import AttrStmt, BufferStore, Call, Evaluate, GlobalVar, IfThenElse, IRModule, IterVar, PrimFunc, seq
from loom.target import AttrSpec, Target, TargetKind, override_kinds
from loom.testing import evaluate
from loom.transform.split_host_device import SplitHostDevice, split_host_device

KINDS = (TargetKind("llvm", "cpu", {"mcpu": AttrSpec(str)}, default_keys=("cpu",)),
         TargetKind("cuda", "cuda", {"arch": AttrSpec(str)}, default_keys=("cuda", "gpu")))


@pytest.fixture(autouse=True)
def test_kinds():
    """Device splitting must not depend on which backends are installed."""
    with override_kinds(*KINDS):
        yield


n = loom.size_var("n")
A = loom.decl_buffer((n,), "float32", name="A")
B = loom.decl_buffer((n,), "float32", name="B")


def thread(tag):
    return IterVar(None, loom.var(tag.split(".")[0][0] + tag[-1]), "thread_index", tag)


def scale_kernel(scale, bx=None, tx=None):
    bx, tx = bx or thread("blockIdx.x"), tx or thread("threadIdx.x")
    idx = bx.var * 4 + tx.var
    return AttrStmt(bx, "thread_extent", (n + 3) // 4, AttrStmt(tx, "thread_extent", 4,
                    IfThenElse(idx < n, BufferStore(B, A[idx] * scale, [idx]))))


def device_func(body, target="cuda -host=llvm", extra=()):
    return PrimFunc([A.data, B.data, *extra], body, buffer_map={A.data: A, B.data: B},
                    attrs={"global_symbol": "scale", "target": Target(target)})


def test_split_structure():
    f = device_func(scale_kernel(2.0))
    mod = SplitHostDevice()(IRModule({"scale": f}))
    assert sorted(mod.functions) == ["scale", "scale_kernel0"]
    host, kernel = mod["scale"], mod["scale_kernel0"]
    assert host.attrs["target"].kind.name == "llvm"
    assert kernel.attrs["target"].kind.name == "cuda"
    assert kernel.attrs["calling_conv"] == "device_kernel" and kernel.attrs["global_symbol"] == "scale_kernel0"
    assert list(kernel.attrs["tir.kernel_launch_params"]) == ["blockIdx.x", "threadIdx.x"]
    assert int(kernel.attrs["thread_extents"]["threadIdx.x"]) == 4
    assert [p.name for p in kernel.params] == ["A", "B", "n", "blockIdx.x", "threadIdx.x"]
    call = host.body.value
    assert isinstance(host.body, Evaluate) and isinstance(call, Call) and isinstance(call.op, GlobalVar)
    assert call.op.name_hint == "scale_kernel0"
    assert call.args[:3] == (A.data, B.data, n) and int(call.args[4]) == 4
    # the symbolic block extent is the launch parameter inside the kernel; the constant stays
    assert kernel.body.value is kernel.params[3] and int(kernel.body.body.value) == 4
    loom.verify_well_formed(mod)


@pytest.mark.parametrize("size", [1, 4, 10])
def test_host_runs_the_kernel(size):
    f = device_func(scale_kernel(3.0))
    mod = SplitHostDevice()(IRModule({"scale": f}))
    a = np.arange(size, dtype="float32")
    want, got = np.zeros(size, "float32"), np.zeros(size, "float32")
    evaluate(f, a, want)
    evaluate(mod, a, got, entry="scale")
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, a * 3)


def test_scalar_params_and_two_kernels():
    s = loom.var("s", "float32")
    f = device_func(seq(scale_kernel(s), scale_kernel(2.0)), extra=(s,))
    host, kernels = split_host_device(f, "scale")
    assert sorted(kernels) == ["scale_kernel0", "scale_kernel1"]
    assert [p.name for p in kernels["scale_kernel0"].params][:4] == ["A", "B", "s", "n"]  # host params first
    mod = IRModule({"scale": host, **kernels})
    a = np.arange(6, dtype="float32")
    b = np.zeros(6, "float32")
    evaluate(mod, a, b, 5.0, entry="scale")
    np.testing.assert_array_equal(b, a * 2)


def test_cpu_or_untargeted_functions_are_left_alone():
    cpu = device_func(scale_kernel(2.0), target="llvm")
    assert split_host_device(cpu) == (cpu, {})
    bare = cpu.with_(attrs={})
    mod = IRModule({"f": bare})
    assert SplitHostDevice()(mod) is mod


def test_default_host_when_the_target_has_none():
    host, _ = split_host_device(device_func(scale_kernel(2.0), target="cuda"))
    assert host.attrs["target"].kind.device_type == 1


def test_conflicting_extents_for_one_tag_are_an_error():
    bx = thread("blockIdx.x")
    tx1, tx2 = thread("threadIdx.x"), thread("threadIdx.x")
    body = AttrStmt(bx, "thread_extent", 2, seq(
        AttrStmt(tx1, "thread_extent", 4, BufferStore(B, A[tx1.var], [tx1.var])),
        AttrStmt(tx2, "thread_extent", 8, BufferStore(B, A[tx2.var], [tx2.var]))))
    with pytest.raises(LoomError, match="threadIdx.x"):
        split_host_device(device_func(body))


def test_device_pipeline_end_to_end():
    """vthreads and a shared stage in a kernel: inject, rewrite storage, split, sync, run."""
    from loom.ir import Allocate, For
    from loom.transform import Sequential
    from loom.transform.inject_virtual_thread import InjectVirtualThread
    from loom.transform.storage_rewrite import StorageRewrite
    from loom.transform.thread_sync import ThreadSync

    C = loom.decl_buffer((32,), "float32", name="C")
    D = loom.decl_buffer((32,), "float32", name="D")
    L = loom.decl_buffer((2,), "float32", name="L", scope="local")
    bx, tx = thread("blockIdx.x"), thread("threadIdx.x")
    vt = IterVar(None, loom.var("vt"), "thread_index", "vthread")
    j = loom.var("j")
    base = bx.var * 16 + vt.var * 8 + tx.var * 2
    stage = Allocate(L.data, "float32", [2], True, seq(
        For(j, 0, 2, "serial", BufferStore(L, C[base + j] * 2.0, [j])),
        BufferStore(D, L[0] + L[1], [base]), BufferStore(D, L[1] - L[0], [base + 1])), "local")
    body = AttrStmt(bx, "thread_extent", 2, AttrStmt(tx, "thread_extent", 4, AttrStmt(vt, "virtual_thread", 2, stage)))
    f = PrimFunc([C.data, D.data], body, buffer_map={C.data: C, D.data: D},
                 attrs={"global_symbol": "k", "target": Target("cuda -host=llvm")})
    mod = Sequential([InjectVirtualThread(), StorageRewrite(), SplitHostDevice(), ThreadSync("shared")])(
        IRModule({"k": f}))
    loom.verify_well_formed(mod)
    assert sorted(mod.functions) == ["k", "k_kernel0"]
    local = [a for a in loom.ir.collect(mod["k_kernel0"].body, lambda x: isinstance(x, Allocate))]
    assert len(local) == 1 and [int(e) for e in local[0].extents] == [2, 2]  # one copy per virtual thread
    c = np.arange(32, dtype="float32")
    want, got = np.zeros(32, "float32"), np.zeros(32, "float32")
    evaluate(f, c, want)
    evaluate(mod, c, got, entry="k")
    np.testing.assert_array_equal(got, want)
