"""The GPU programs of issue 12 on every path this machine has: interp and ext_dev (GPU semantics on the
reference interpreter) against numpy, nvcc for sm_80 and sm_90, the host module launching kernels through a
stand-in driver, and, where a GPU is present, the GPU itself against numpy."""

import numpy as np
import pytest

import loom
import loom.testing.ext_dev as ext_dev
from loom_cuda import workloads as W
from loom_cuda.driver import available
from loom_cuda.nvcc import find_nvcc

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
needs_gpu = pytest.mark.skipif(not available(), reason="no CUDA driver or GPU on this machine")


def _softmax(a):
    e = np.exp(a - a.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _programs():
    """``{name: (schedule and args, inputs, reference, tolerance)}``: small shapes, none a multiple of the
    blocks (so the guards run)."""
    rng = np.random.default_rng(12)
    a, b = rng.random((2, 1000), dtype="float32")
    a4, b4 = rng.random((2, 1024), dtype="float32")
    ma, mb = rng.random((24, 20), dtype="float32"), rng.random((20, 28), dtype="float32")
    r = rng.standard_normal((5, 100)).astype("float32")
    h, hb = (rng.random((2, 300), dtype="float32") * 2 - 1).astype("float16")
    return {
        "vector_add": (lambda: W.vector_add(1000, 128), [a, b, np.zeros(1000, "float32")], a + b, 0),
        "vector_add_x4": (lambda: W.vector_add(1024, 64, lanes=4), [a4, b4, np.zeros(1024, "float32")], a4 + b4, 0),
        "tiled_matmul": (lambda: W.tiled_matmul(24, 28, 20, tile=4, per_thread=2, k_tile=4),
                         [ma, mb, np.zeros((24, 28), "float32")], ma @ mb, 1e-5),
        "row_sum": (lambda: W.row_sum(5, 100, 32), [r, np.zeros(5, "float32")], r.sum(1), 1e-5),
        "row_softmax": (lambda: W.row_softmax(5, 100, 32), [r, np.zeros((5, 100), "float32")], _softmax(r), 1e-6),
        "float16": (lambda: W.half_elementwise(300, 64), [h, hb, np.zeros(300, "float16")],
                    h.astype("f4") * hb.astype("f4") + np.exp(h.astype("f4")), 5e-3),
    }


PROGRAMS = _programs()


def _check(name, out):
    _, _, ref, tol = PROGRAMS[name]
    np.testing.assert_allclose(out.astype("float64"), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_schedule_on_the_interpreter_with_gpu_semantics(name):
    make, inputs, _, _ = PROGRAMS[name]
    s, args = make()
    arrays = [x.copy() for x in inputs]
    loom.build(s, args, target="interp")(*arrays)
    _check(name, arrays[-1])


@pytest.mark.parametrize("warp", ["", " -thread_warp_size=32"], ids=["tree", "warp32"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_schedule_split_for_a_device_on_ext_dev(name, warp, registered):
    """The split a cuda build makes (host launching kernels on device memory), run on the interpreter; with a
    warp size, cross-thread reductions use warp shuffles, as on cuda."""
    registered(ext_dev)
    make, inputs, _, _ = PROGRAMS[name]
    s, args = make()
    f = loom.build(s, args, target="ext_dev" + warp, target_host="llvm")
    dev = loom.device("ext_dev")
    arrays = [loom.nd.array(x, dev) for x in inputs]
    f(*arrays)
    _check(name, arrays[-1].numpy())


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_nvcc_accepts_each_kernel(name, arch):
    make, _, _, _ = PROGRAMS[name]
    s, args = make()
    f = loom.build(s, args, target=f"cuda -arch={arch}", target_host="llvm")
    (cu,) = f.imported_modules
    assert type(cu).__name__ == "CUDAModule" and cu.cubin[:4] == b"\x7fELF"
    ptx = cu.get_source("ptx")
    assert f".target {arch}" in ptx and all(f".entry {k}(" in ptx for k in f.imports)


@needs_nvcc
def test_what_the_cuda_source_holds():
    def source(make, target="cuda -arch=sm_80"):
        s, args = make()
        return loom.build(s, args, target=target, target_host="llvm").imported_modules[0].get_source()

    va = source(lambda: W.vector_add(1024, 64, lanes=4))
    assert '__global__ void __launch_bounds__(64) default_function_kernel0(' in va
    assert "(*(const float32x4 *)(&A[" in va and "*(float32x4 *)(&C[" in va  # one 16-byte access each
    mm = source(lambda: W.tiled_matmul(64, tile=8, per_thread=2, k_tile=8))
    assert mm.count("__syncthreads();") >= 2 and "__shared__ float A_shared[" in mm
    assert "__launch_bounds__(64)" in mm and "float C_local[4];" in mm
    half = source(lambda: W.half_elementwise(300, 64))
    assert "half *__restrict__ A" in half and "expf(((float)A[" in half
    bf = source(lambda: W.half_elementwise(300, 64, dtype="bfloat16"))
    assert "nv_bfloat16 *__restrict__ A" in bf
    rows = source(lambda: W.row_sum(4, 100, 64))
    assert "__shfl_down_sync(" in rows and "__shared__" in rows  # a warp step, a step between the two warps
    fast = source(lambda: W.row_softmax(4, 64, 32), "cuda -arch=sm_80 -fast_math")
    assert "__expf(" in fast and "expf(" in source(lambda: W.row_softmax(4, 64, 32))


def test_the_target():
    t = loom.target.Target("cuda -arch=sm_80 -fast_math")
    assert t.attrs["arch"] == "sm_80" and t.attrs["fast_math"] is True and t.attrs["thread_warp_size"] == 32
    assert t.device_type == 2 and "gpu" in t.keys
    if not available():
        assert loom.target.Target("cuda").attrs["arch"] == "sm_90"  # no GPU to ask
    with pytest.raises(loom.LoomError, match=r"unknown GPU architecture arch='sm_99'; valid: .*sm_80.*sm_90"):
        loom.target.Target("cuda -arch=sm_99")


@needs_nvcc
def test_nvcc_errors_carry_the_command_and_its_output():
    from loom_cuda.nvcc import NvccError

    s, args = W.vector_add(64, 32)
    with pytest.raises(NvccError) as err:
        loom.build(s, args, target="cuda -arch=sm_80 -nvcc_flags=--no-such-flag", target_host="llvm")
    assert "--no-such-flag" in str(err.value) and "nvcc" in err.value.command[0]
    assert err.value.output and "kernels.cu" in " ".join(err.value.command)


@pytest.mark.skipif(available(), reason="a GPU is present")
@needs_nvcc
def test_without_a_gpu_a_call_says_so():
    s, args = W.vector_add(64, 32)
    f = loom.build(s, args, target="cuda", target_host="llvm")
    a = np.ones(64, "float32")
    with pytest.raises(loom.LoomError, match=r"must be on cuda.*no CUDA driver or GPU was found"):
        f(a, a, a)
    with pytest.raises(loom.LoomError, match="no CUDA driver or GPU was found"):
        loom.nd.array(a, loom.cuda(0))


@needs_nvcc
def test_export_and_load_keep_the_kernels(tmp_path):
    s, args = W.row_sum(4, 64, 32)
    f = loom.build(s, args, target="cuda -arch=sm_80", target_host="llvm")
    path = tmp_path / "row_sum.so"
    f.export_library(path)
    g = loom.runtime.load_module(path)
    (cu,) = g.imported_modules
    assert cu.cubin == f.imported_modules[0].cubin and cu.get_source() == f.imported_modules[0].get_source()
    alone = tmp_path / "kernels.cuda"
    f.imported_modules[0].export_library(alone)
    assert loom.runtime.load_module(alone).get_source("ptx") == cu.get_source("ptx")


# -- with a GPU ----------------------------------------------------------------------------------


@needs_gpu
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_program_on_the_gpu(name):
    make, inputs, _, _ = PROGRAMS[name]
    s, args = make()
    f = loom.build(s, args, target="cuda", target_host="llvm")
    arrays = [loom.nd.array(x, loom.cuda(0)) for x in inputs]
    f(*arrays)
    _check(name, arrays[-1].numpy())
