"""The benchmark workloads, shared by every implementation (numpy, Loom, Apache TVM).

This module needs numpy only: ``tvm_kernels.py`` imports it from TVM's own
environment, ``kernels.py`` and ``run.py`` from Loom's.  A :class:`Workload`
fixes the sizes, the inputs, the numpy reference, the work done (flops or
bytes, for the rate column) and the tolerance a result must meet.

Every kernel takes its inputs and then its output, all float32 and C-contiguous,
and writes the output in place.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

__all__ = ["Workload", "WORKLOADS", "get", "check", "im2col_conv2d", "Timing", "timing", "SIZES"]

#: Problem sizes (one place, so the Loom, TVM and numpy versions cannot drift apart).
SIZES = {
    "vadd": {"n": 1 << 24},
    "matmul": {"m": 1024, "n": 1024, "k": 1024, "bn": 32, "kfactor": 4},
    "softmax": {"rows": 4096, "cols": 1024, "lanes": 16},
    "conv2d": {"batch": 1, "cin": 64, "cout": 64, "size": 56, "kernel": 3, "pad": 1, "ftile": 8, "xtile": 8},
    "flatten": {"rows": 4096, "cols": 4095},  # the kernels see symbolic shapes: sizes are bound at the call
}

Arrays = list[np.ndarray]


@dataclasses.dataclass(frozen=True)
class Workload:
    """One benchmark: ``inputs(rng)`` gives the arguments (output last, zeroed);
    ``reference(args)`` is the answer computed in float64; ``numpy_run(args)`` is
    what the numpy column times (numpy's fastest plain form of the computation)."""

    name: str
    title: str
    metric: str  # "GFLOP/s" (compute-bound) or "GB/s" (memory-bound)
    work: float  # flops or bytes per call, matching ``metric``
    inputs: Callable[[np.random.Generator], Arrays]
    reference: Callable[[Arrays], np.ndarray]
    numpy_run: Callable[[Arrays], object]
    rtol: float = 1e-5
    slow: bool = False  # seconds per call: time one call, not the best of many

    def rate(self, seconds: float) -> float:
        """Work per second in ``metric`` units (1e9 flops or bytes per second)."""
        return self.work / seconds / 1e9


def check(result: np.ndarray, expected: np.ndarray, rtol: float) -> float:
    """The largest error relative to the reference's magnitude; raises when above ``rtol``."""
    scale = float(np.abs(expected).max()) or 1.0
    err = float(np.abs(result.astype("float64") - expected).max()) / scale
    if not err <= rtol:  # also catches NaN
        raise AssertionError(f"relative error {err:.3g} exceeds {rtol:g}")
    return err


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


# -- vector add ---------------------------------------------------------------------
def _vadd_inputs(rng: np.random.Generator) -> Arrays:
    n = SIZES["vadd"]["n"]
    return [_f32(rng, n), _f32(rng, n), np.zeros(n, "float32")]


# -- matmul -------------------------------------------------------------------------
def _matmul_inputs(rng: np.random.Generator) -> Arrays:
    s = SIZES["matmul"]
    return [_f32(rng, s["m"], s["k"]), _f32(rng, s["k"], s["n"]), np.zeros((s["m"], s["n"]), "float32")]


def _matmul_reference(args: Arrays) -> np.ndarray:
    return args[0].astype("float64") @ args[1].astype("float64")


# -- softmax ------------------------------------------------------------------------
def _softmax_inputs(rng: np.random.Generator) -> Arrays:
    s = SIZES["softmax"]
    return [_f32(rng, s["rows"], s["cols"]) * 4.0, np.zeros((s["rows"], s["cols"]), "float32")]


def _softmax_numpy(args: Arrays) -> np.ndarray:
    x = args[0]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def _softmax_reference(args: Arrays) -> np.ndarray:
    x = args[0].astype("float64")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# -- flatten ------------------------------------------------------------------------
def _flatten_inputs(rng: np.random.Generator) -> Arrays:
    s = SIZES["flatten"]
    return [_f32(rng, s["rows"], s["cols"]), np.zeros(s["rows"] * s["cols"], "float32")]


def _flatten_numpy(args: Arrays) -> np.ndarray:
    np.copyto(args[1], args[0].reshape(-1))
    return args[1]


# -- conv2d -------------------------------------------------------------------------
def _conv2d_inputs(rng: np.random.Generator) -> Arrays:
    s = SIZES["conv2d"]
    out = s["size"] + 2 * s["pad"] - s["kernel"] + 1
    return [_f32(rng, s["batch"], s["cin"], s["size"], s["size"]),
            _f32(rng, s["cout"], s["cin"], s["kernel"], s["kernel"]),
            np.zeros((s["batch"], s["cout"], out, out), "float32")]


def im2col_conv2d(data: np.ndarray, weight: np.ndarray, pad: int) -> np.ndarray:
    """NCHW convolution (stride 1) the way numpy does it fastest: im2col, then one BLAS matmul."""
    n, c, _, _ = data.shape
    f, _, kh, kw = weight.shape
    padded = np.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))  # n c y x kh kw
    oh, ow = windows.shape[2:4]
    cols = windows.transpose(1, 4, 5, 0, 2, 3).reshape(c * kh * kw, n * oh * ow)
    out = weight.reshape(f, c * kh * kw) @ cols
    return out.reshape(f, n, oh, ow).transpose(1, 0, 2, 3)


def _conv2d_flops() -> float:
    s = SIZES["conv2d"]
    out = s["size"] + 2 * s["pad"] - s["kernel"] + 1
    return 2.0 * s["batch"] * s["cout"] * out * out * s["cin"] * s["kernel"] ** 2


def _matmul_flops() -> float:
    s = SIZES["matmul"]
    return 2.0 * s["m"] * s["n"] * s["k"]


_MATMUL = dict(metric="GFLOP/s", work=_matmul_flops(), inputs=_matmul_inputs, reference=_matmul_reference,
               numpy_run=lambda a: np.matmul(a[0], a[1], out=a[2]), rtol=1e-5)

WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("vadd", "vector add, 2^24 float32", "GB/s", 12.0 * SIZES["vadd"]["n"], _vadd_inputs,
             lambda a: a[0] + a[1], lambda a: np.add(a[0], a[1], out=a[2]), rtol=0.0),
    Workload("matmul_naive", "matmul 1024, naive (default schedule)", **_MATMUL, slow=True),
    Workload("matmul_blocked", "matmul 1024, blocked + packed B", **_MATMUL),
    Workload("softmax", "row softmax 4096x1024", "GB/s",
             8.0 * SIZES["softmax"]["rows"] * SIZES["softmax"]["cols"], _softmax_inputs,
             _softmax_reference, _softmax_numpy, rtol=1e-5),
    Workload("conv2d", "conv2d 64->64, 56x56, 3x3, pad 1", "GFLOP/s", _conv2d_flops(), _conv2d_inputs,
             lambda a: im2col_conv2d(a[0].astype("float64"), a[1].astype("float64"), SIZES["conv2d"]["pad"]),
             lambda a: im2col_conv2d(a[0], a[1], SIZES["conv2d"]["pad"]), rtol=1e-5),
    Workload("flatten", "flatten 4096x4095, symbolic shapes", "GB/s",
             8.0 * SIZES["flatten"]["rows"] * SIZES["flatten"]["cols"], _flatten_inputs,
             lambda a: a[0].reshape(-1), _flatten_numpy, rtol=0.0),
]}


@dataclasses.dataclass(frozen=True)
class Timing:
    """How a kernel is timed: ``rounds`` rounds, each taking the best of ``repeat``
    means of ``number`` calls; the result is the best round.

    The implementations of a workload take turns round by round, so on a shared
    machine each sees the same mix of quiet and busy moments, and the best
    round is the one least disturbed by other work.
    """

    number: int
    repeat: int
    rounds: int


def timing(quick: bool) -> Timing:
    """The timing policy of a full run, or of a ``--quick`` one."""
    return Timing(number=3, repeat=1, rounds=3) if quick else Timing(number=5, repeat=2, rounds=5)


def get(name: str) -> Workload:
    """The workload ``name``; a ValueError listing the known ones otherwise."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None
