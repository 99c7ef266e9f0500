"""The shipped tuning templates (loom.tune.templates): every sampled config of each space builds and computes
the right answer, the spaces hold the configs measured to be fast, the fallbacks pick them, and the GPU
template's configs build for cuda and run with GPU semantics on the interpreter."""

import numpy as np
import pytest

import loom
from loom.tune import ConfigError, ConfigSpace, FallbackConfig, Task
from loom.tune.templates import TEMPLATES, conv2d_nchw, conv2d_reference, matmul, matmul_cuda, matmul_reference
from loom.tune.templates.conv2d import conv2d_output_size


def _sample(space, n, seed=0):
    """The first and last configs of ``space`` and ``n`` others drawn at random (fixed seed)."""
    picks = {0, len(space) - 1}
    picks.update(int(i) for i in np.random.default_rng(seed).choice(len(space), min(n, len(space)), replace=False))
    return [space.get(i) for i in sorted(picks)]


def _knobs(template, *args):
    cfg = FallbackConfig()
    template(cfg, *args)
    return cfg.to_json()["knobs"]


def _find(space, **knobs):
    """The config of ``space`` whose knobs take the given values (None when there is none)."""
    for cfg in space:
        values = cfg.to_json()["knobs"]
        if all(values[k] == v for k, v in knobs.items()):
            return cfg
    return None


# ---- matmul (CPU) ----

@pytest.mark.parametrize("shape", [(48, 48, 48), (24, 40, 17), (7, 3, 5)], ids=lambda s: "x".join(map(str, s)))
def test_matmul_configs_compute_the_product(shape):
    M, N, K = shape
    task = Task(matmul, shape, target="llvm", reference=matmul_reference)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((M, K)).astype("float32"), rng.standard_normal((K, N)).astype("float32")
    (want,) = task.reference(a, b)
    np.testing.assert_allclose(want, a @ b, rtol=1e-5, atol=1e-5)
    for cfg in [None] + _sample(task.space, 6):  # None: the fallback
        s, args = task.instantiate(cfg)
        assert [tuple(int(d) for d in t.shape) for t in args] == [(M, K), (K, N), (M, N)]
        c = np.full((M, N), np.nan, "float32")
        loom.build(s, args, target="llvm")(a, b, c)
        np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def test_matmul_space_holds_the_fast_configs_and_the_fallback_picks_one():
    space = Task(matmul, (1024, 1024, 1024)).space
    assert 100 <= len(space) <= 2000
    assert set(space.space_map) == {"tile_x", "tile_y", "tile_k", "reorder_outer", "ann_rows"}
    assert [space.space_map[k].kind for k in ("tile_x", "tile_y", "reorder_outer")] == ["split", "split", "reorder"]
    column_panels_outer = [1, 0]
    for mr, bn in [(8, 32), (4, 64)]:  # both matched OpenBLAS at one thread (see the module docstring)
        assert _find(space, tile_x=[-1, mr], tile_y=[-1, bn], tile_k=[-1, 1], reorder_outer=column_panels_outer,
                     ann_rows=["unroll"]) is not None
    assert _knobs(matmul, 1024, 1024, 1024) == {"tile_x": [-1, 8], "tile_y": [-1, 32], "tile_k": [-1, 1],
                                                "reorder_outer": [1, 0], "ann_rows": ["unroll"]}
    # Every packing width divides N, none narrower than a vector where N allows it.
    assert [e.size[-1] for e in space.space_map["tile_y"].entities] == [8, 16, 32, 64, 128]
    assert Task(matmul, (1024, 1024, 1024)).flop == 2 * 1024 ** 3


def test_matmul_fallback_takes_the_nearest_tile_when_8x32_does_not_divide():
    knobs = _knobs(matmul, 24, 40, 17)  # 40 = 8 * 5: widths 8, 10, 20, 40; K prime: no k unrolling
    assert knobs["tile_x"] == [-1, 8] and knobs["tile_y"] == [-1, 20] and knobs["tile_k"] == [-1, 1]
    space = Task(matmul, (24, 40, 17)).space
    assert space.from_json({"index": -1, "knobs": knobs}) is not None  # the fallback is a point of the space


def test_matmul_builds_for_the_c_target():
    task = Task(matmul, (24, 40, 17), target="c")
    s, args = task.instantiate()
    a, b = np.ones((24, 17), "float32"), np.ones((17, 40), "float32")
    c = np.zeros((24, 40), "float32")
    loom.build(s, args, target="c")(a, b, c)
    assert (c == 17).all()


@pytest.mark.parametrize("bad, err", [((48.0, 48, 48), loom.LoomTypeError), ((48, 0, 48), loom.LoomValueError),
                                      ((True, 48, 48), loom.LoomTypeError)])
def test_matmul_refuses_bad_sizes(bad, err):
    with pytest.raises(err, match=r"matmul: [MNK] must be"):
        matmul(ConfigSpace(), *bad)


# ---- conv2d_nchw (CPU) ----

CONVS = {
    "4x10x10_3x3": (1, 4, 10, 10, 8, 3, 3),
    "stride2_batch2": (2, 3, 9, 7, 6, 3, 3, 2, 1),
    "1x1_nopad": (1, 2, 5, 6, 3, 1, 1, 1, 0),
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv2d_configs_compute_the_convolution(name):
    args = CONVS[name]
    n, ci, h, w, co, kh, kw = args[:7]
    stride, pad = args[7:] if len(args) > 7 else (1, 1)
    task = Task(conv2d_nchw, args, target="llvm")
    rng = np.random.default_rng(2)
    data = rng.standard_normal((n, ci, h, w)).astype("float32")
    weight = rng.standard_normal((co, ci, kh, kw)).astype("float32")
    (want,) = conv2d_reference(data, weight, stride, pad)
    oh, ow = conv2d_output_size(h, kh, stride, pad), conv2d_output_size(w, kw, stride, pad)
    assert want.shape == (n, co, oh, ow)
    for cfg in [None] + _sample(task.space, 4):
        s, tensors = task.instantiate(cfg)
        out = np.full(want.shape, np.nan, "float32")
        loom.build(s, tensors, target="llvm")(data, weight, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(cfg))


def test_conv2d_reference_matches_a_direct_sum():
    rng = np.random.default_rng(3)
    d, w = rng.standard_normal((1, 2, 6, 5)), rng.standard_normal((3, 2, 3, 3))
    padded = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 3, 3, 3))
    for f in range(3):
        for y in range(3):
            for x in range(3):
                want[0, f, y, x] = (padded[0, :, 2 * y:2 * y + 3, 2 * x:2 * x + 3] * w[f]).sum()
    np.testing.assert_allclose(conv2d_reference(d, w, stride=2, pad=1)[0], want, rtol=1e-12)


def test_conv2d_space_holds_the_hand_schedule_and_the_measured_best():
    task = Task(conv2d_nchw, (1, 64, 56, 56, 64, 3, 3))
    space = task.space
    assert 100 <= len(space) <= 2000
    hand = {"tile_f": [-1, 8], "tile_y": [-1, 1], "tile_x": [-1, 8], "reorder_rc": [0, 1, 2],
            "ann_acc": ["unroll", "none"]}  # bench/kernels.py schedule_conv2d
    assert _find(space, **hand) is not None
    assert _knobs(conv2d_nchw, 1, 64, 56, 56, 64, 3, 3) == hand
    for f, y, x in [(16, 1, 14), (8, 2, 14)]:  # about 1.4x numpy's im2col + BLAS at one thread
        assert _find(space, tile_f=[-1, f], tile_y=[-1, y], tile_x=[-1, x]) is not None
    assert task.flop == 2 * 64 * 56 * 56 * 64 * 9


def test_conv2d_refuses_bad_arguments():
    with pytest.raises(loom.LoomValueError, match="pad must be an int of at least 0"):
        conv2d_nchw(ConfigSpace(), 1, 4, 10, 10, 8, 3, 3, 1, -1)
    with pytest.raises(loom.LoomValueError, match="does not fit"):
        conv2d_nchw(ConfigSpace(), 1, 4, 2, 2, 8, 5, 5, 1, 0)
    with pytest.raises(loom.LoomTypeError, match="CO must be an int"):
        conv2d_nchw(ConfigSpace(), 1, 4, 10, 10, "8", 3, 3)


# ---- configs and the registry ----

@pytest.mark.parametrize("template, args", [(matmul, (48, 48, 48)), (conv2d_nchw, (1, 4, 10, 10, 8, 3, 3)),
                                            (matmul_cuda, (64, 48, 40))], ids=["matmul", "conv2d", "cuda"])
def test_configs_round_trip_through_json(template, args):
    space = Task(template, args).space
    for cfg in _sample(space, 5, seed=4):
        back = space.from_json(cfg.to_json())
        assert back.index == cfg.index and back.to_json() == cfg.to_json()
    stale = dict(space.get(0).to_json()["knobs"], tile_x=[-1, 1000])
    with pytest.raises(ConfigError):
        space.from_json({"index": 0, "knobs": stale})


def test_the_registry():
    assert TEMPLATES == {"loom.matmul": matmul, "loom.conv2d_nchw": conv2d_nchw, "loom.matmul_cuda": matmul_cuda}
    assert Task(matmul, (8, 8, 8)).key == "loom.matmul(8, 8, 8)"


# ---- matmul_cuda ----

def _threads_and_shared(cfg, dtype_bytes=4):
    (_, ty, py), (_, tx, px), kt = cfg["tile_y"].size, cfg["tile_x"].size, cfg["tile_k"].size[-1]
    return ty * tx, (ty * py + tx * px) * kt * dtype_bytes


def test_every_cuda_config_fits_the_launch_limits():
    space = Task(matmul_cuda, (1024, 1024, 1024)).space
    assert 100 <= len(space) <= 2500
    limits = loom.target.Target("cuda -arch=sm_80").attrs
    # The knobs are bounded one by one, so their extremes bound every config.
    worst_threads = max(e.size[1] for e in space.space_map["tile_y"].entities) * \
        max(e.size[1] for e in space.space_map["tile_x"].entities)
    assert worst_threads <= limits["max_num_threads"]
    for cfg in _sample(space, 50, seed=5):
        threads, shared = _threads_and_shared(cfg, dtype_bytes=8)
        assert 64 <= threads <= limits["max_num_threads"] and shared <= limits["max_shared_memory_per_block"]
    fallback = _knobs(matmul_cuda, 1024, 1024, 1024)
    assert fallback == {"tile_y": [-1, 16, 4], "tile_x": [-1, 16, 4], "tile_k": [-1, 8], "shared": True,
                        "unroll": "k"}


def test_cuda_configs_run_with_gpu_semantics_on_the_interpreter():
    M, N, K = 16, 24, 8
    task = Task(matmul_cuda, (M, N, K), target="interp")
    rng = np.random.default_rng(6)
    a, b = rng.random((M, K), dtype="float32"), rng.random((K, N), dtype="float32")
    for cfg in [None] + _sample(task.space, 8, seed=7):
        s, args = task.instantiate(cfg)
        c = np.full((M, N), np.nan, "float32")
        loom.build(s, args, target="interp")(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, err_msg=str(cfg))


def test_cuda_fallback_on_the_host_device_split(registered):
    """ext_dev runs the kernels a cuda build splits off, on device memory, on the interpreter."""
    ext_dev = pytest.importorskip("loom.testing.ext_dev")
    registered(ext_dev)
    s, args = Task(matmul_cuda, (32, 16, 8), target="ext_dev").instantiate()
    f = loom.build(s, args, target="ext_dev", target_host="llvm")
    rng = np.random.default_rng(8)
    a, b = rng.random((32, 8), dtype="float32"), rng.random((8, 16), dtype="float32")
    dev = loom.device("ext_dev")
    arrays = [loom.nd.array(x, dev) for x in (a, b, np.zeros((32, 16), "float32"))]
    f(*arrays)
    np.testing.assert_allclose(arrays[-1].numpy(), a @ b, rtol=1e-5)


def test_every_config_of_a_small_cuda_space_builds_with_nvcc():
    pytest.importorskip("loom_cuda")
    from loom_cuda.nvcc import find_nvcc

    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    target = "cuda -arch=sm_80"
    task = Task(matmul_cuda, (8, 8, 4), target=target)
    assert len(task.space) == 6  # one tiling; shared on or off; three unrollings
    for cfg in list(task.space) + [None]:
        s, args = task.instantiate(cfg)
        f = loom.build(s, args, target=target, target_host="llvm")
        (cu,) = f.imported_modules
        assert cu.cubin[:4] == b"\x7fELF"
        assert ("__shared__ float A_shared[" in cu.get_source()) == (cfg is None or cfg["shared"].val)
