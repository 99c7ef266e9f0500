"""PlanDeviceMemory, RefuseThreadBarriers and VerifyDeviceLimits; errors raised in passes name the pass."""

from __future__ import annotations

import pytest

import loom
from loom.ir import Allocate, AttrStmt, BufferStore, Call, Evaluate, IterVar, PrimFunc, seq
from loom.runtime.abi import ARG_DEVICES_ATTR, DEVICE_ID_ANNOTATION, DEVICE_TYPE_ANNOTATION
from loom.target import Target, TargetKind, override_kinds
from loom.transform.device_memory import PlanDeviceMemory, RefuseThreadBarriers
from loom.transform.pass_base import PassContext, prim_func_pass
from loom.transform.split_host_device import SplitHostDevice
from loom.transform.verify_device import VerifyDeviceLimits

KINDS = (TargetKind("llvm", "cpu", {}), TargetKind("toydev", "ext_dev", {}))


def _thread(tag: str) -> IterVar:
    return IterVar(None, loom.var(tag.replace(".", "_")), "thread_index", tag)


def _two_kernels():
    """B = A * 2 then C = B + 1, each on bound threads, B an intermediate allocated by the host."""
    A, C = (loom.decl_buffer((8,), "float32", name=n) for n in "AC")
    B = loom.decl_buffer((8,), "float32", name="B")
    t1, t2 = _thread("threadIdx.x"), _thread("threadIdx.x")
    body = Allocate(B.data, "float32", [8], True, seq(
        AttrStmt(t1, "thread_extent", 8, BufferStore(B, A[t1.var] * 2.0, [t1.var])),
        AttrStmt(t2, "thread_extent", 8, BufferStore(C, B[t2.var] + 1.0, [t2.var]))))
    return PrimFunc([A.data, C.data], body, buffer_map={A.data: A, C.data: C},
                    attrs={"global_symbol": "two", "target": Target("toydev", host="llvm")})


def test_host_buffers_and_intermediates_live_on_the_device():
    with override_kinds(*KINDS):
        mod = SplitHostDevice()(loom.ir.IRModule({"two": _two_kernels()}))
        mod = PlanDeviceMemory()(mod)
    host = mod["two"]
    assert tuple(host.attrs[ARG_DEVICES_ATTR]) == (12, 12) and host.attrs["target"].kind_name == "llvm"
    alloc = host.body
    assert isinstance(alloc, Allocate) and alloc.annotations[DEVICE_TYPE_ANNOTATION] == 12
    assert alloc.annotations[DEVICE_ID_ANNOTATION] == 0
    assert sorted(mod.functions) == ["two", "two_kernel0", "two_kernel1"]
    for k in ("two_kernel0", "two_kernel1"):  # kernels are left alone
        assert ARG_DEVICES_ATTR not in mod[k].attrs


def test_host_code_touching_device_memory_is_refused():
    A = loom.decl_buffer((8,), "float32", name="A")
    i = loom.var("i")
    with override_kinds(*KINDS):
        f = PrimFunc([A.data], loom.ir.For(i, 0, 8, "serial", BufferStore(A, A[i] + 1.0, [i])),
                     buffer_map={A.data: A}, attrs={"global_symbol": "plain", "target": Target("toydev", host="llvm")})
        mod = SplitHostDevice()(loom.ir.IRModule({"plain": f}))
        assert list(mod.functions) == ["plain"] and mod["plain"].attrs["target"].kind_name == "llvm"
        with pytest.raises(loom.LoomError, match=r"plain: host code stores to A \(A\[i\] = A\[i\] \+ 1.0\), but A "
                                                 r"lives on ext_dev.*bind the loops.*\(in pass PlanDeviceMemory\)"):
            PlanDeviceMemory()(mod)


def test_functions_of_cpu_targets_are_left_alone():
    with override_kinds(*KINDS):
        f = _two_kernels().with_attr("target", Target("llvm"))
    assert PlanDeviceMemory()(f) is f


def _shared_exchange(barrier: bool = False) -> PrimFunc:
    """Each thread writes S[tx] then reads S[7 - tx]: needs a barrier between."""
    A = loom.decl_buffer((8,), "float32", name="A")
    S = loom.decl_buffer((8,), "float32", name="S", scope="shared")
    tx = _thread("threadIdx.x")
    parts = [BufferStore(S, A[tx.var], [tx.var])]
    if barrier:
        parts.append(Evaluate(Call("int32", loom.ir.Op.get("tir.tvm_storage_sync"), [loom.ir.StringImm("shared")])))
    parts.append(BufferStore(A, S[7 - tx.var], [tx.var]))
    body = AttrStmt(tx, "thread_extent", 8, Allocate(S.data, "float32", [8], True, seq(*parts), "shared"))
    return PrimFunc([A.data], body, buffer_map={A.data: A}, attrs={"global_symbol": "exchange",
                                                                    "target": Target("llvm")})


@pytest.mark.parametrize("explicit_barrier", [False, True])
def test_serial_threads_that_need_a_barrier_are_refused(explicit_barrier):
    with override_kinds(*KINDS), pytest.raises(loom.LoomError, match=r"exchange: its threads communicate through "
                                                                      r"memory on S and need barriers, but the llvm "
                                                                      r"target runs bound threads .* one after "
                                                                      r"another.*\(in pass RefuseThreadBarriers\)"):
        RefuseThreadBarriers()(_shared_exchange(explicit_barrier))


def test_serial_threads_without_communication_are_fine():
    A = loom.decl_buffer((8,), "float32", name="A")
    tx = _thread("threadIdx.x")
    f = PrimFunc([A.data], AttrStmt(tx, "thread_extent", 8, BufferStore(A, A[tx.var] * 2.0, [tx.var])),
                 buffer_map={A.data: A}, attrs={"global_symbol": "own"})
    assert RefuseThreadBarriers()(f) is f


def test_device_limits():
    f = _shared_exchange()
    assert VerifyDeviceLimits(8, 32)(f) is f
    with pytest.raises(loom.LoomError, match=r"exchange: a block of 8 threads \(threadIdx.x=8\) exceeds the device's "
                                             r"4 threads per block"):
        VerifyDeviceLimits(4, 1 << 16)(f)
    with pytest.raises(loom.LoomError, match="allocate 32 bytes of shared memory, more than the device's 16 bytes"):
        VerifyDeviceLimits(8, 16)(f)
    with pytest.raises(loom.LoomValueError):
        VerifyDeviceLimits(0, 16)


def test_a_loom_error_in_a_pass_names_the_innermost_pass_once():
    @prim_func_pass(name="Grumpy")
    def grumpy(func, mod, ctx):
        raise loom.LoomValueError("something is off")

    seq_pass = loom.transform.Sequential([grumpy], name="outer")
    with pytest.raises(loom.LoomValueError, match=r"^something is off \(in pass Grumpy\)$") as info:
        seq_pass(_shared_exchange())
    assert info.value.pass_name == "Grumpy"


def test_another_exception_in_a_pass_becomes_a_loom_error_naming_it():
    @prim_func_pass(name="Buggy")
    def buggy(func, mod, ctx):
        return {}["missing"]

    with pytest.raises(loom.LoomError, match=r"pass Buggy failed: KeyError: 'missing'") as info:
        with PassContext():
            buggy(_shared_exchange())
    assert isinstance(info.value.__cause__, KeyError)
