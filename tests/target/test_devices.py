"""Devices and virtual devices."""

import pytest

import loom
from loom.errors import TargetError
from loom.target import (
    Device, DeviceType, Target, VirtualDevice, cpu, cuda, device, device_type_name, kDLCPU, kDLCUDA,
)


def test_dlpack_device_type_numbers():
    assert (kDLCPU, kDLCUDA) == (1, 2)
    assert DeviceType.CUDA_HOST == 3 and DeviceType.ROCM == 10 and DeviceType.HEXAGON == 16
    assert device_type_name(2) == "cuda" and device_type_name(77) == "77"


def test_device_constructors_and_repr():
    assert repr(cpu()) == "cpu(0)" and str(cuda(1)) == "cuda(1)"
    assert loom.device("cuda", 0) == cuda(0) == Device(2, 0) == device(kDLCUDA)
    assert device("cpu") == cpu(0) and device("gpu", 3) == cuda(3) and device(2, 0) == cuda(0)
    assert device("cuda -arch=sm_90") == cuda(0)
    assert device("llvm") == cpu(0)  # an installed target kind names its device type
    assert cuda(1).__dlpack_device__() == (2, 1) and cuda(1).name == "cuda"
    assert len({cpu(0), Device("cpu", 0), cuda(0)}) == 2  # plain values: hashable, equal by value


@pytest.mark.parametrize("args, fragment", [
    (("tpu",), "unknown device 'tpu'; expected a device name"),
    ((99,), "unknown DLPack device type 99"),
    ((True,), "got bool"),
    ((1.5,), "got float"),
    (("cpu", -1), "non-negative int"),
    (("cpu", 1.0), "non-negative int"),
])
def test_device_errors(args, fragment):
    with pytest.raises(TargetError, match=fragment):
        device(*args)


def test_unknown_device_lists_kinds():
    with pytest.raises(TargetError, match=r"or an installed target kind \(c, cuda, ext_cpu"):
        device("tpu")


def test_fully_unconstrained_and_fully_constrained():
    free = VirtualDevice.fully_unconstrained()
    assert free is VirtualDevice.fully_unconstrained()
    assert free.is_fully_unconstrained and not free.is_fully_constrained
    assert loom.structural_equal(free, VirtualDevice())
    full = VirtualDevice("cuda", 0, Target("cuda"), "global")
    assert full.is_fully_constrained and not full.is_fully_unconstrained
    assert not VirtualDevice("cuda", 0, Target("cuda")).is_fully_constrained  # no memory scope
    assert not VirtualDevice.for_memory_scope("shared").is_fully_unconstrained


def test_device_type_comes_from_the_target():
    vd = VirtualDevice(target=Target("cuda -arch=sm_90"))
    assert vd.device_type == 2 and vd.virtual_device_id is None
    assert VirtualDevice.for_target(Target("llvm")).device_type == 1
    assert VirtualDevice("gpu").device_type == 2 and VirtualDevice(cuda(0)).device_type == 2


def test_conflicting_device_type_and_target():
    with pytest.raises(TargetError, match="device_type cpu conflicts with target Target\\('cuda'\\)"):
        VirtualDevice("cpu", target=Target("cuda"))
    with pytest.raises(TargetError, match="virtual device id"):
        VirtualDevice("cpu", -2)
    with pytest.raises(TargetError, match="unknown device 'tpu'"):
        VirtualDevice("tpu")


def test_join():
    gpu = Target("cuda")
    a = VirtualDevice("cuda", None, None, "global")
    b = VirtualDevice(None, 1, gpu)
    joined = a.join(b)
    assert (joined.device_type, joined.virtual_device_id, joined.target, joined.memory_scope) == (2, 1, gpu, "global")
    assert VirtualDevice("cpu").join(VirtualDevice("cuda")) is None
    assert VirtualDevice(target=gpu).join(VirtualDevice(target=Target("cuda -arch=sm_80"))) is None
    assert VirtualDevice("cpu").join(VirtualDevice(target=gpu)) is None
    assert VirtualDevice(target=gpu).join(VirtualDevice(target=Target("cuda"))).target is gpu


def test_default():
    host = Target("llvm")
    filled = VirtualDevice(None, None, None, "").default(VirtualDevice("cpu", 0, host, "global"))
    assert loom.structural_equal(filled, VirtualDevice("cpu", 0, host, "global"))
    kept = VirtualDevice("cuda").default(VirtualDevice("cpu", 0, host))
    assert kept.device_type == 2 and kept.target is None and kept.virtual_device_id == 0


def test_repr():
    assert repr(VirtualDevice()) == "VirtualDevice()"
    assert repr(VirtualDevice("cuda", 0, memory_scope="global")) == \
        "VirtualDevice(device_type=cuda, virtual_device_id=0, memory_scope='global')"
    assert repr(VirtualDevice(target=Target("llvm"))) == "VirtualDevice(device_type=cpu, target=Target('llvm'))"


def test_virtual_device_json_round_trip():
    vd = VirtualDevice("cuda", 1, Target("cuda", host="llvm"), "shared")
    back = loom.load_json(loom.save_json(vd))
    assert loom.structural_equal(back, vd) and back.target.host.kind_name == "llvm"
    assert not loom.structural_equal(vd, vd.with_(memory_scope="global"))
