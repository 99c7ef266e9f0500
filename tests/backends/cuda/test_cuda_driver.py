"""loom_cuda.driver, the pycuda runtime layer: without pycuda, and against a fake pycuda.

This machine has no GPU and no pycuda.  The first tests check that every way of
lacking them is one clear error; the rest run the whole layer (memory,
contexts, kernel loading and launching, events) against :mod:`fake_pycuda`,
which stands in for the GPU: its device memory is host bytearrays, its kernels
are recorded rather than run, and it fails the way the CUDA driver does.
"""

from __future__ import annotations

import doctest
import struct
import sys
import threading

import numpy as np
import pytest

import loom
from loom.errors import LoomError, LoomValueError
from loom.target.devices import Device
from loom_cuda import context, driver as D
from loom_cuda.driver import CUDADriverError, CUDAUnavailable, KernelImage

from fake_pycuda import FakeCUDA, fake_cubin, fake_ptx

GPU0 = Device(2, 0)


@pytest.fixture
def no_pycuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)  # `import pycuda` fails even where it is installed
    monkeypatch.delitem(sys.modules, "pycuda.driver", raising=False)
    D.reset()
    yield
    D.reset()


@pytest.fixture
def fake(monkeypatch):
    f = FakeCUDA().install(monkeypatch)
    D.reset()
    yield f
    D.reset()


@pytest.fixture
def two_gpus(monkeypatch):
    f = FakeCUDA(capabilities=((8, 0), (9, 0))).install(monkeypatch)
    D.reset()
    yield f
    D.reset()


def test_docstring_examples():
    for mod in (D, context):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, mod.__name__


# --------------------------------------------------------------------------- no pycuda, no driver, no device


def test_without_pycuda_everything_is_one_clear_error(no_pycuda):
    with pytest.raises(CUDAUnavailable, match=r"^no CUDA driver or GPU was found: pycuda is not installed.*"
                                              r"install loom-cuda\[gpu\]"):
        D.driver()
    assert isinstance(CUDAUnavailable("x"), LoomError)
    assert D.available() is False
    assert D.compute_capability() is None
    api = D.device_api()
    assert api.exists(GPU0) is False
    with pytest.raises(CUDAUnavailable, match=r"install loom-cuda\[gpu\]"):
        api.allocate(GPU0, 16, 64)
    with pytest.raises(CUDAUnavailable):
        api.timer(GPU0)
    with pytest.raises(CUDAUnavailable):
        KernelImage(fake_cubin("sm_90", "k"), "").launch("k", (1, 1, 1), (1, 1, 1), [])


def test_the_failure_is_remembered_until_reset(no_pycuda, monkeypatch):
    with pytest.raises(CUDAUnavailable):
        D.driver()
    fake = FakeCUDA().install(monkeypatch)
    with pytest.raises(CUDAUnavailable, match="pycuda is not installed"):
        D.driver()  # cached: pycuda is not imported again
    assert fake.calls.get("init") is None
    D.reset()
    assert D.driver() is fake.driver


def test_a_driver_that_fails_to_start(monkeypatch):
    fake = FakeCUDA(init_error="no CUDA-capable device is detected").install(monkeypatch)
    D.reset()
    try:
        for _ in range(3):
            with pytest.raises(CUDAUnavailable, match=r"pycuda.driver.init\(\) failed: .*no CUDA-capable device"):
                D.driver()
        assert fake.calls["init"] == 1
        assert not D.available() and not D.device_api().exists(GPU0) and D.compute_capability() is None
    finally:
        D.reset()


def test_driver_starts_once_across_threads(fake):
    got = []
    threads = [threading.Thread(target=lambda: got.append(D.driver())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [fake.driver] * 8 and fake.calls["init"] == 1
    assert D.available()


def test_device_ordinals(two_gpus):
    api = D.device_api()
    assert [api.exists(Device(2, i)) for i in range(3)] == [True, True, False]
    assert api.exists(Device(1, 0)) is False  # not a cuda device
    assert D.compute_capability() == (8, 0) and D.compute_capability(1) == (9, 0)
    assert D.compute_capability(2) is None
    with pytest.raises(CUDAUnavailable, match=r"no CUDA device with ordinal 2 \(this machine has 2\)"):
        api.allocate(Device(2, 2), 16, 64)
    with pytest.raises(LoomValueError, match="serves cuda devices"):
        api.allocate(Device(1, 0), 16, 64)


# --------------------------------------------------------------------------- memory


def test_memory_round_trip(fake):
    api = D.device_api()
    x = np.arange(40, dtype="float32")
    a = api.allocate(GPU0, x.nbytes, 64)
    b = api.allocate(GPU0, x.nbytes, 256)
    assert a % 256 == 0 and b % 256 == 0 and a != b
    api.copy_from_host(a, GPU0, x)
    api.copy_within(b + 40, a, 80, GPU0)  # elements 0..19 to 10..29
    api.copy_from_host(b, GPU0, x[:10] * -1)
    out = np.zeros(30, "float32")
    api.copy_to_host(out, b, GPU0)
    np.testing.assert_array_equal(out, np.concatenate([-x[:10], x[:20]]))
    assert fake.read(a, 8) == x[:2].tobytes()
    api.copy_from_host(a, GPU0, x[::2])  # strided sources are made contiguous
    api.copy_to_host(out[:20], a, GPU0)
    np.testing.assert_array_equal(out[:20], x[::2])
    api.synchronize(GPU0)
    assert fake.calls["synchronize"] == 1
    assert api.host_view(a, GPU0) is None
    for addr in (a, b):
        api.free(GPU0, addr)
    assert fake.memory == {} and api.live_allocations == 0


def test_zero_bytes_and_frees(fake):
    api = D.device_api()
    z = api.allocate(GPU0, 0, 64)
    assert len(fake.memory) == 1 and api.live_allocations == 1
    api.copy_from_host(z, GPU0, np.zeros(0, "int8"))
    api.copy_to_host(np.zeros(0, "int8"), z, GPU0)
    api.copy_within(z, z, 0, GPU0)
    api.free(GPU0, z)
    assert fake.memory == {}
    with pytest.raises(LoomValueError, match="not an allocation of cuda"):
        api.free(GPU0, z)
    with pytest.raises(LoomValueError, match="-1 bytes"):
        api.allocate(GPU0, -1, 64)


@pytest.mark.parametrize("alignment", [512, 4096, 3, 96])
def test_alignment_refused(fake, alignment):
    with pytest.raises(LoomValueError, match=f"align an allocation to {alignment} bytes.*256"):
        D.device_api().allocate(GPU0, 64, alignment)
    assert fake.memory == {}


def test_copies_outside_an_allocation_are_driver_errors(fake):
    api = D.device_api()
    a = api.allocate(GPU0, 16, 64)
    with pytest.raises(CUDADriverError, match=r"cuda\(0\): copying 20 bytes from the host .*cuMemcpyHtoD failed: "
                                              r"invalid argument"):
        api.copy_from_host(a, GPU0, np.zeros(5, "int32"))
    with pytest.raises(CUDADriverError, match=r"cuda\(0\): copying 8 bytes from 0x.* to the host"):
        api.copy_to_host(np.zeros(2, "int32"), a + 12, GPU0)
    with pytest.raises(CUDADriverError, match="cuMemcpyDtoD"):
        api.copy_within(a, a + 8, 16, GPU0)
    with pytest.raises(LoomValueError, match="C-contiguous"):
        api.copy_to_host(np.zeros((4, 4), "int8")[:, 0], a, GPU0)
    api.free(GPU0, a)


def test_out_of_memory(fake):
    api = D.device_api()
    a = api.allocate(GPU0, fake.memory_bytes - 100, 64)
    with pytest.raises(CUDADriverError, match=r"cuda\(0\): allocating 200 bytes failed: .*out of memory"):
        api.allocate(GPU0, 200, 64)
    api.free(GPU0, a)
    api.free(GPU0, api.allocate(GPU0, 200, 64))


def test_loom_arrays_live_on_the_fake_gpu(fake):
    x = np.arange(12, dtype="int32").reshape(3, 4)
    arr = loom.nd.array(x, loom.device("cuda"))
    assert arr.device == GPU0 and len(fake.memory) == 1
    np.testing.assert_array_equal(arr.numpy(), x)
    del arr
    assert fake.memory == {}


# --------------------------------------------------------------------------- contexts and threads


def test_contexts_are_pushed_and_popped_per_thread(fake):
    api = D.device_api()
    addr = api.allocate(GPU0, 64, 64)
    assert fake.stack() == [] and fake.calls["retain_primary_context"] == 1
    errors = []
    together = threading.Barrier(4)  # all alive at once, so that their thread ids differ

    def worker(i):
        try:
            together.wait(timeout=30)
            api.copy_from_host(addr + 16 * i, GPU0, np.full(4, i, "int32"))
            KernelImage(fake_cubin("sm_90", "k"), "").launch("k", (1, 1, 1), (32, 1, 1), [("ptr", addr)])
            assert fake.stack() == []  # popped: the thread holds no context after the call
        except Exception as e:  # reported below: an assert in a thread does not fail the test
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    out = np.zeros(16, "int32")
    api.copy_to_host(out, addr, GPU0)
    np.testing.assert_array_equal(out, np.repeat(np.arange(4), 4))
    assert len({launch.thread for launch in fake.launches}) == 4
    assert fake.calls["retain_primary_context"] == 1  # retained once per process, pushed per call
    api.free(GPU0, addr)


def test_nested_activation_pushes_once(fake):
    api = D.device_api()
    with D.activate(0) as ctx:
        assert fake.stack() == [ctx]
        pushes = len(fake.pushes)
        addr = api.allocate(GPU0, 16, 16)
        api.copy_from_host(addr, GPU0, np.ones(4, "int32"))
        api.free(GPU0, addr)
        assert len(fake.pushes) == pushes and fake.stack() == [ctx]
    assert fake.stack() == []


def test_each_device_gets_its_own_context(two_gpus):
    api = D.device_api()
    a0, a1 = api.allocate(Device(2, 0), 16, 64), api.allocate(Device(2, 1), 16, 64)
    assert two_gpus.memory[a0][0] == 0 and two_gpus.memory[a1][0] == 1
    with D.activate(0):
        api.free(Device(2, 1), a1)  # device 1's context goes on top for the call, then device 0's is back
        assert [c.device for c in two_gpus.stack()] == [0]
    api.free(Device(2, 0), a0)


# --------------------------------------------------------------------------- kernels


def test_launch_packs_params_in_order(fake):
    image = KernelImage(fake_cubin("sm_90", "k"), fake_ptx("sm_90", "k"))
    params = [("ptr", 0x7F0000001000), ("i8", -3), ("i16", -300), ("i32", -70000), ("i64", -(1 << 40)),
              ("u8", 250), ("u16", 65000), ("u32", 4_000_000_000), ("u64", (1 << 64) - 1), ("f16", 1.5),
              ("f32", 0.25), ("f64", -2.5), ("bool", True), ("i32", np.int64(7)), ("f32", np.float32(3))]
    image.launch("k", (4, 2, 1), (128, 1, 1), params, shared_bytes=1024)
    [launch] = fake.launches
    assert image.loaded_from == {0: "cubin"}
    assert (launch.symbol, launch.grid, launch.block, launch.shared_size, launch.stream) == \
        ("k", (4, 2, 1), (128, 1, 1), 1024, None)
    assert launch.format == "QbhiqBHIQHfdBif"
    assert launch.packed == struct.pack("@QbhiqBHIQHfdBif", *launch.values())
    assert launch.values() == (0x7F0000001000, -3, -300, -70000, -(1 << 40), 250, 65000, 4_000_000_000,
                               (1 << 64) - 1, int(np.float16(1.5).view(np.uint16)), 0.25, -2.5, 1, 7, 3.0)


def test_launchers_are_cached_per_symbol_and_format(fake):
    image = KernelImage(fake_cubin("sm_90", "k", "m"), "")
    assert image.function("k") is image.function("k")
    for _ in range(3):
        image.launch("k", (1, 1, 1), (1, 1, 1), [("i32", 1)])
    assert fake.calls["prepare"] == 1 and fake.calls["module_from_buffer"] == 1
    image.launch("k", (1, 1, 1), (1, 1, 1), [("i64", 1)])
    image.launch("m", (1, 1, 1), (1, 1, 1), [("i32", 1)])
    assert fake.calls["prepare"] == 3 and fake.calls["module_from_buffer"] == 1
    assert [(launch.symbol, launch.format) for launch in fake.launches] == [("k", "i")] * 3 + [("k", "q"), ("m", "i")]


def test_a_stream_launches_asynchronously(fake):
    with D.activate(0):
        stream = fake.driver.Stream()
    KernelImage(fake_cubin("sm_90", "k"), "").launch("k", (2, 1, 1), (2, 1, 1), [], stream=stream)
    assert fake.launches[0].stream is stream


@pytest.mark.parametrize("grid, block", [((0, 1, 1), (32, 1, 1)), ((4, 1, 1), (32, 0, 1)), ((1, 1, 0), (1, 1, 1))])
def test_zero_dim_launches_are_skipped(fake, grid, block):
    KernelImage(fake_cubin("sm_90", "k"), "").launch("k", grid, block, [("i32", 1)])
    assert fake.launches == []


@pytest.mark.parametrize("grid, block, match", [
    ((1, 1, 1), (1025, 1, 1), r"block \(1025, 1, 1\) has 1025 threads"),
    ((1, 1, 1), (32, 32, 2), r"block \(32, 32, 2\) has 2048 threads"),
    ((1, 1, 1), (1, 1, 65), r"block \(1, 1, 65\)"),
    ((1, 65536, 1), (1, 1, 1), r"grid \(1, 65536, 1\) is too large"),
    ((1, 1, 65536), (1, 1, 1), r"grid \(1, 1, 65536\)"),
    ((1 << 31, 1, 1), (1, 1, 1), r"grid \(2147483648, 1, 1\)"),
    ((-1, 1, 1), (1, 1, 1), r"the grid must be three non-negative integers, got \(-1, 1, 1\)"),
    ((1, 1), (1, 1, 1), r"the grid must be three"),
    ((1, 1, 1), (1.5, 1, 1), r"the block must be three"),
])
def test_launch_limits(fake, grid, block, match):
    image = KernelImage(fake_cubin("sm_90", "kern"), "")
    with pytest.raises(LoomValueError, match=r"kernel 'kern': " + match):
        image.launch("kern", grid, block, [])
    assert fake.launches == []


def test_launch_limits_themselves_are_allowed(fake):
    image = KernelImage(fake_cubin("sm_90", "k"), "")
    image.launch("k", ((1 << 31) - 1, 65535, 65535), (1024, 1, 1), [])
    image.launch("k", (1, 1, 1), (16, 1, 64), [])
    assert [launch.grid for launch in fake.launches] == [((1 << 31) - 1, 65535, 65535), (1, 1, 1)]


@pytest.mark.parametrize("params, match", [
    ([("i32", 1), ("int", 2)], r"parameter 1 has kind 'int'"),
    ([("i8", 128)], r"parameter 0 \(i8\) = 128 is out of range \[-128, 127\]"),
    ([("u32", -1)], r"parameter 0 \(u32\) = -1 is out of range"),
    ([("ptr", 1 << 64)], r"parameter 0 \(ptr\) = 18446744073709551616 is out of range"),
    ([("i32", 2.5)], r"parameter 0 \(i32\) cannot be 2.5"),
    ([("f32", "x")], r"parameter 0 \(f32\) cannot be 'x'"),
])
def test_bad_params(fake, params, match):
    with pytest.raises(LoomValueError, match=r"kernel 'k': " + match):
        KernelImage(fake_cubin("sm_90", "k"), "").launch("k", (1, 1, 1), (1, 1, 1), params)
    assert fake.launches == []


def test_driver_errors_at_launch_name_the_kernel(fake):
    image = KernelImage(fake_cubin("sm_90", "k"), "")
    with pytest.raises(CUDADriverError, match=r"launching kernel 'k' with grid \(2, 1, 1\) and block \(64, 1, 1\) "
                                              r"\(65536 bytes of dynamic shared memory\) failed: .*invalid argument"):
        image.launch("k", (2, 1, 1), (64, 1, 1), [], shared_bytes=65536)
    fake.injected["launch"] = fake.driver.LaunchError("cuLaunchKernel failed: too many resources requested")
    with pytest.raises(CUDADriverError, match="too many resources requested"):
        image.launch("k", (2, 1, 1), (64, 1, 1), [])
    with pytest.raises(CUDADriverError, match=r"finding kernel 'nope' in its module failed: .*named symbol not found"):
        image.launch("nope", (1, 1, 1), (1, 1, 1), [])
    with pytest.raises(LoomValueError, match="dynamic shared memory"):
        image.launch("k", (1, 1, 1), (1, 1, 1), [], shared_bytes=-1)
    assert fake.stack() == []


def test_a_cubin_for_another_gpu_falls_back_to_ptx(two_gpus):
    image = KernelImage(fake_cubin("sm_90", "k"), fake_ptx("sm_80", "k"))
    image.launch("k", (1, 1, 1), (1, 1, 1), [("ptr", 0)], device_id=1)  # a Hopper: the cubin
    image.launch("k", (1, 1, 1), (1, 1, 1), [("ptr", 0)], device_id=0)  # an Ampere: the PTX
    assert image.loaded_from == {1: "cubin", 0: "ptx"}
    assert [launch.device for launch in two_gpus.launches] == [1, 0]
    assert two_gpus.calls["module_from_buffer"] == 3


def test_ptx_alone_is_jit_compiled(fake):
    image = KernelImage(b"", fake_ptx("sm_80", "k"))
    image.launch("k", (1, 1, 1), (1, 1, 1), [("ptr", 0)])
    assert image.loaded_from == {0: "ptx"} and len(fake.launches) == 1


def test_loading_failures(two_gpus):
    both_fail = KernelImage(fake_cubin("sm_90", "k"), fake_ptx("sm_90", "k"))
    with pytest.raises(CUDADriverError, match=r"(?s)cuda\(0\): the cubin does not fit this GPU \(.*no kernel image.*\) "
                                              r"and JIT-compiling the kernels' PTX failed: .*\nptxas fatal.*\.target"):
        both_fail.launch("k", (1, 1, 1), (1, 1, 1), [])
    no_ptx = KernelImage(fake_cubin("sm_90", "k"), "")
    with pytest.raises(CUDADriverError, match="loading the kernels' cubin failed: .*no kernel image"):
        no_ptx.launch("k", (1, 1, 1), (1, 1, 1), [])
    # A failure that is not about the architecture is reported, not papered over with the PTX.
    two_gpus.injected["module_from_buffer"] = two_gpus.driver.LogicError("cuModuleLoadDataEx failed: out of memory")
    other = KernelImage(fake_cubin("sm_90", "k"), fake_ptx("sm_90", "k"))
    with pytest.raises(CUDADriverError, match=r"cuda\(1\): loading the kernels' cubin failed: .*out of memory"):
        other.launch("k", (1, 1, 1), (1, 1, 1), [], device_id=1)
    with pytest.raises(LoomValueError, match="needs a cubin or PTX"):
        KernelImage(b"", "")
    assert two_gpus.stack() == []


# --------------------------------------------------------------------------- timing


def test_timer_measures_device_time_with_events(fake):
    timer = D.device_api().timer(GPU0)
    image = KernelImage(fake_cubin("sm_90", "k"), "")
    timer.start()
    image.launch("k", (1, 1, 1), (1, 1, 1), [])
    image.launch("k", (1, 1, 1), (1, 1, 1), [])
    assert timer.stop() == pytest.approx(2 * fake.launch_ms / 1e3)
    assert fake.calls["event_synchronize"] == 1
    timer.start()
    assert timer.stop() == 0.0
    with pytest.raises(LoomValueError, match=r"stop\(\) was called before start\(\)"):
        timer.stop()
    assert fake.stack() == []
