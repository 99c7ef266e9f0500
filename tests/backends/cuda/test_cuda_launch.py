"""Host modules launching CUDA kernels, end to end up to the driver: the arguments' checks, the grid and block
computed from symbolic shapes, the parameters packed for each kernel, timing with events.

No GPU here: :mod:`fake_pycuda` stands in for the driver (device memory in host bytearrays; kernels are
recorded, not run), so what these tests see is exactly what Loom hands the driver.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import loom
from loom_cuda import driver as D
from loom_cuda import workloads as W
from loom_cuda.nvcc import find_nvcc

from fake_pycuda import FakeCUDA

pytestmark = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


@pytest.fixture
def gpu(monkeypatch):
    fake = FakeCUDA(memory_bytes=1 << 24).install(monkeypatch)
    D.reset()
    yield fake
    gc.collect()  # the test's GPU arrays go back to the fake before it is forgotten
    D.reset()


def _on_gpu(*arrays):
    return [loom.nd.array(a, loom.cuda(0)) for a in arrays]


@pytest.mark.parametrize("host", ["llvm", "c", "interp"])
def test_a_vector_add_launches_one_grid_over_the_symbolic_size(gpu, host):
    n = loom.var("n")
    s, args = W.vector_add(n, threads=128)
    f = loom.build(s, args, target="cuda -arch=sm_80", target_host=host)
    a, b, c = _on_gpu(np.ones(1000, "float32"), np.ones(1000, "float32"), np.zeros(1000, "float32"))
    f(a, b, c)
    (launch,) = gpu.launches
    assert launch.symbol == "default_function_kernel0"
    assert launch.grid == (8, 1, 1) and launch.block == (128, 1, 1)  # ceil(1000 / 128) blocks
    assert launch.values() == (a.data_ptr, b.data_ptr, c.data_ptr, 1000)
    f(*_on_gpu(*(np.ones(129, "float32") for _ in range(3))))
    assert gpu.launches[-1].grid == (2, 1, 1)


def test_a_tiled_matmul_launches_a_2d_grid_of_2d_blocks(gpu):
    s, args = W.tiled_matmul(96, 64, 32, tile=8, per_thread=2, k_tile=8)
    f = loom.build(s, args, target="cuda -arch=sm_80", target_host="llvm")
    f(*_on_gpu(np.ones((96, 32), "float32"), np.ones((32, 64), "float32"), np.zeros((96, 64), "float32")))
    (launch,) = gpu.launches
    assert launch.grid == (4, 6, 1) and launch.block == (8, 8, 1)  # blockIdx.x over columns, y over rows


def test_every_stage_is_a_kernel_launched_in_order(gpu):
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = loom.compute((n,), lambda i: B[i] + 1.0, name="C")
    s = loom.create_schedule(C.op)
    for t, threads in ((B, 64), (C, 32)):
        bx, tx = s[t].split(t.op.axis[0], factor=threads)
        s[t].bind(bx, loom.thread_axis("blockIdx.x"))
        s[t].bind(tx, loom.thread_axis("threadIdx.x"))
    f = loom.build(s, [A, C], target="cuda -arch=sm_80", target_host="llvm")
    arrays = _on_gpu(np.ones(100, "float32"), np.zeros(100, "float32"))
    before = len(gpu.memory)
    f(*arrays)
    assert [(x.symbol, x.grid, x.block) for x in gpu.launches] == [
        ("default_function_kernel0", (2, 1, 1), (64, 1, 1)), ("default_function_kernel1", (4, 1, 1), (32, 1, 1))]
    # B lived in GPU memory the host allocated for the call and gave back.
    written, read = set(gpu.launches[0].values()), set(gpu.launches[1].values())
    assert len(written & read - {100}) == 1 and len(gpu.memory) == before


def test_arguments_are_checked_before_any_launch(gpu):
    s, args = W.vector_add(64, 32)
    f = loom.build(s, args, target="cuda -arch=sm_80", target_host="llvm")
    a = np.ones(64, "float32")
    with pytest.raises(loom.LoomError, match=r"argument 0 .* must be on cuda, got a numpy array"):
        f(a, *_on_gpu(a, a))
    with pytest.raises(loom.LoomError, match=r"shape"):
        f(*_on_gpu(np.ones(32, "float32"), a, a))
    assert gpu.launches == []


def test_time_evaluator_times_the_kernels_with_events(gpu):
    s, args = W.vector_add(64, 32)
    f = loom.build(s, args, target="cuda -arch=sm_80", target_host="llvm")
    timer = f.time_evaluator(f.entry_name, loom.cuda(0), number=4, repeat=2)
    result = timer(*_on_gpu(*(np.ones(64, "float32") for _ in range(3))))
    # Each launch takes the fake's 1.5 ms of device time: the events measure that, not the host's clock.
    assert result.results == pytest.approx((gpu.launch_ms / 1e3,) * 2)
    assert len(gpu.launches) == 1 + 2 * 4


def test_a_kernel_the_cubin_cannot_run_is_loaded_from_its_ptx(gpu):
    s, args = W.vector_add(64, 32)
    f = loom.build(s, args, target="cuda -arch=sm_80", target_host="llvm")
    f(*_on_gpu(*(np.ones(64, "float32") for _ in range(3))))
    assert gpu.calls["module_from_buffer"] == 2  # nvcc's cubin is not the fake's, its PTX is read


def test_kernels_run_on_the_gpu_holding_their_arrays(monkeypatch):
    fake = FakeCUDA(capabilities=((9, 0), (9, 0)), memory_bytes=1 << 24).install(monkeypatch)
    D.reset()
    try:
        s, args = W.vector_add(256, 64)
        f = loom.build(s, args, target="cuda -arch=sm_80", target_host="llvm")
        ones = np.ones(256, "float32")
        f(*(loom.nd.array(ones, loom.cuda(1)) for _ in range(3)))
        assert fake.launches[-1].device == 1
        with pytest.raises(loom.LoomError, match=r"different GPUs \(cuda\(0\), cuda\(1\)\)"):
            f(loom.nd.array(ones, loom.cuda(0)), *(loom.nd.array(ones, loom.cuda(1)) for _ in range(2)))
        gc.collect()
    finally:
        D.reset()
