"""The benchmark kernels in Apache TVM 0.27, with the schedules of ``kernels.py``.

Run with the Python of the TVM environment (``make bench-env`` creates it):

    bench/.venv-tvm/bin/python bench/tvm_kernels.py [--only NAME ...] [--quick]

It prints a ``{"tvm": version, "target", "threads"}`` line, then one JSON object
per kernel: ``{"name", "seconds", "error"}`` or ``{"name", "failed"}``.
``run.py`` starts it as a subprocess with ``--serve`` (see :func:`serve`),
because TVM and Loom live in different environments.

TVM 0.27 has no ``te.create_schedule`` any more: a tensor expression becomes a
PrimFunc (``te.create_prim_func``) scheduled with ``tvm.s_tir.Schedule``.  Each
classic primitive has a counterpart (``cache_write`` + ``compute_at``, ``split``,
``reorder``, ``unroll``, ``vectorize``, ``parallel``); the one addition is
``decompose_reduction``, which the classic lowering did implicitly: it moves a
reduction's initialisation out of the reduction loop, and must come last
because ``parallel``/``vectorize`` refuse loops over a block without its init.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable

import numpy as np
import tvm
from tvm import s_tir, te

from workloads import SIZES, Timing, check, get, timing


def _matmul(packed: bool):
    p = SIZES["matmul"]
    m, n, k, bn = p["m"], p["n"], p["k"], p["bn"]
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    if not packed:
        return [A, B, te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")]
    packed_b = te.compute((n // bn, k, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * packed_b[j // bn, r, te.indexmod(j, bn)], axis=r),
                   name="C")
    return [A, B, C]


def schedule_vadd() -> s_tir.Schedule:
    n = SIZES["vadd"]["n"]
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    sch = s_tir.Schedule(te.create_prim_func([A, B, C]))
    (i,) = sch.get_loops(sch.get_sblock("C"))
    outer, inner = sch.split(i, [None, 64])
    sch.parallel(outer)
    sch.vectorize(inner)
    return sch


def schedule_matmul_naive() -> s_tir.Schedule:
    return s_tir.Schedule(te.create_prim_func(_matmul(packed=False)))


def schedule_matmul_blocked() -> s_tir.Schedule:
    p = SIZES["matmul"]
    bn, kfactor = p["bn"], p["kfactor"]
    sch = s_tir.Schedule(te.create_prim_func(_matmul(packed=True)))
    acc = sch.get_sblock("C")
    out = sch.cache_write(acc, 0, "global")  # `acc` now writes C_global; `out` copies it to C
    x, y = sch.get_loops(out)
    xo, xi = sch.split(x, [None, bn])
    yo, yi = sch.split(y, [None, bn])
    sch.reorder(xo, yo, xi, yi)
    sch.compute_at(acc, yo)
    xc, yc, kc = sch.get_loops(acc)[-3:]
    ko, ki = sch.split(kc, [None, kfactor])
    sch.reorder(ko, xc, ki, yc)
    sch.unroll(ki)
    sch.vectorize(yc)
    sch.parallel(xo)
    px, _, pz = sch.get_loops(sch.get_sblock("packedB"))
    sch.vectorize(pz)
    sch.parallel(px)
    sch.decompose_reduction(acc, ko)
    return sch


def schedule_softmax() -> s_tir.Schedule:
    p = SIZES["softmax"]
    rows, cols, lanes = p["rows"], p["cols"], p["lanes"]
    X = te.placeholder((rows, cols), name="X")
    ko = te.reduce_axis((0, cols // lanes), name="ko")
    part_max = te.compute((rows, lanes), lambda i, l: te.max(X[i, ko * lanes + l], axis=ko), name="part_max")
    kl = te.reduce_axis((0, lanes), name="kl")
    row_max = te.compute((rows,), lambda i: te.max(part_max[i, kl], axis=kl), name="row_max")
    E = te.compute((rows, cols), lambda i, j: te.exp(X[i, j] - row_max[i]), name="E")
    so = te.reduce_axis((0, cols // lanes), name="so")
    part_sum = te.compute((rows, lanes), lambda i, l: te.sum(E[i, so * lanes + l], axis=so), name="part_sum")
    sl = te.reduce_axis((0, lanes), name="sl")
    row_sum = te.compute((rows,), lambda i: te.sum(part_sum[i, sl], axis=sl), name="row_sum")
    Y = te.compute((rows, cols), lambda i, j: E[i, j] / row_sum[i], name="Y")

    sch = s_tir.Schedule(te.create_prim_func([X, Y]))
    i, j = sch.get_loops(sch.get_sblock("Y"))
    _, ji = sch.split(j, [None, lanes])
    sch.vectorize(ji)
    for name in ("row_sum", "part_sum", "E", "row_max", "part_max"):  # consumers first
        sch.compute_at(sch.get_sblock(name), i)
    for name in ("part_max", "part_sum"):
        blk = sch.get_sblock(name)
        lane, red = sch.get_loops(blk)[-2:]
        sch.reorder(red, lane)
        sch.vectorize(lane)
    _, eji = sch.split(sch.get_loops(sch.get_sblock("E"))[-1], [None, lanes])
    sch.vectorize(eji)
    sch.parallel(i)
    for name in ("part_max", "part_sum"):
        blk = sch.get_sblock(name)
        sch.decompose_reduction(blk, sch.get_loops(blk)[-2])
    return sch


def schedule_conv2d() -> s_tir.Schedule:
    p = SIZES["conv2d"]
    n, c, f, size, kk, pad = p["batch"], p["cin"], p["cout"], p["size"], p["kernel"], p["pad"]
    out = size + 2 * pad - kk + 1
    data = te.placeholder((n, c, size, size), name="data")
    weight = te.placeholder((f, c, kk, kk), name="weight")
    padded = te.compute(
        (n, c, size + 2 * pad, size + 2 * pad),
        lambda b, ch, y, x: tvm.tirx.if_then_else(
            tvm.tirx.all(y >= pad, y < size + pad, x >= pad, x < size + pad),
            data[b, ch, y - pad, x - pad], tvm.tirx.const(0.0, "float32")), name="padded")
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, kk), name="ry")
    rx = te.reduce_axis((0, kk), name="rx")
    conv = te.compute(
        (n, f, out, out),
        lambda b, ff, y, x: te.sum(padded[b, rc, y + ry, x + rx] * weight[ff, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv")

    sch = s_tir.Schedule(te.create_prim_func([data, weight, conv]))
    pb, pc, py, px = sch.get_loops(sch.get_sblock("padded"))
    sch.reorder(pb, py, pc, px)
    sch.parallel(sch.fuse(pb, py))
    acc = sch.get_sblock("conv")
    store = sch.cache_write(acc, 0, "global")
    b, ff, y, x = sch.get_loops(store)
    fo, fi = sch.split(ff, [None, p["ftile"]])
    xo, xi = sch.split(x, [None, p["xtile"]])
    sch.reorder(b, y, fo, xo, fi, xi)
    outer = sch.fuse(b, y)
    sch.compute_at(acc, xo)
    loops = sch.get_loops(acc)  # outer, xo, then the block's own: fi, xi, rc, ry, rx (unit loops dropped)
    af, ax, arc, ary, arx = loops[-5:]
    sch.reorder(arc, ary, arx, af, ax)
    sch.unroll(af)
    sch.vectorize(ax)
    sch.parallel(outer)
    sch.decompose_reduction(acc, arc)
    return sch


def schedule_flatten() -> s_tir.Schedule:
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n * m,), lambda i: A[i // m, i % m], name="B")
    sch = s_tir.Schedule(te.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    outer, inner = sch.split(i, [None, 64])
    sch.parallel(outer)
    sch.vectorize(inner)
    return sch


SCHEDULES = {
    "vadd": schedule_vadd,
    "matmul_naive": schedule_matmul_naive,
    "matmul_blocked": schedule_matmul_blocked,
    "softmax": schedule_softmax,
    "conv2d": schedule_conv2d,
    "flatten": schedule_flatten,
}


def host_target() -> tvm.target.Target:
    """LLVM for this CPU: ``mcpu`` from LLVM's host detection, as Loom's llvm target uses."""
    cpu = tvm.get_global_func("target.llvm_get_system_cpu", allow_missing=True)
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu()} if cpu else {"kind": "llvm"})


def prepare(name: str, target: tvm.target.Target, timing: Timing) -> tuple[dict, Callable[[], float]]:
    """Build the kernel ``name``, run it once and check it against numpy.

    Returns ``{"name", "first", "error"}`` (``first``: the checked call's seconds)
    and a timer: one measurement, the best of ``timing.repeat`` means of
    ``timing.number`` calls by TVM's ``time_evaluator``.
    """
    wl = get(name)
    rt = tvm.compile(SCHEDULES[name]().mod, target=target).jit()
    dev = tvm.cpu()
    host = wl.inputs(np.random.default_rng(0))
    args = [tvm.runtime.tensor(a, dev) for a in host]
    start = time.perf_counter()
    rt["main"](*args)
    first = time.perf_counter() - start
    error = check(args[-1].numpy(), wl.reference(host), wl.rtol)
    evaluate = rt.time_evaluator("main", dev, number=timing.number, repeat=timing.repeat)
    return {"name": name, "first": first, "error": error}, lambda: min(evaluate(*args).results)


def _failure(name: str, err: Exception) -> dict:
    lines = str(err).strip().splitlines()
    return {"name": name, "failed": f"{type(err).__name__}: {lines[-1] if lines else ''}"[:160]}


def serve(target: tvm.target.Target, timing: Timing) -> None:
    """Answer requests, one JSON object per line on stdin, with one JSON line each on stdout.

    ``{"prepare": NAME}`` builds and checks a kernel (:func:`prepare`'s dict, or
    ``{"name", "failed"}``); ``{"time": NAME}`` measures a prepared one
    (``{"name", "seconds"}``).  ``run.py`` drives this, so that TVM's kernels
    take turns with Loom's and numpy's.
    """
    timers: dict[str, Callable[[], float]] = {}
    for line in sys.stdin:
        request = json.loads(line)
        if "prepare" in request:
            name = request["prepare"]
            try:
                reply, timers[name] = prepare(name, target, timing)
            except Exception as err:  # reported, not fatal: the other kernels still run
                reply = _failure(name, err)
        else:
            name = request["time"]
            reply = {"name": name, "seconds": timers[name]()}
        print(json.dumps(reply), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=list(SCHEDULES), help="run only these kernels")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--show", metavar="NAME", help="print the scheduled TIR of one kernel and exit")
    parser.add_argument("--serve", action="store_true", help="answer run.py's requests on stdin (see serve())")
    opts = parser.parse_args(argv)
    if opts.show:
        print(SCHEDULES[opts.show]().mod.script())
        return
    target, policy = host_target(), timing(opts.quick)
    print(json.dumps({"tvm": tvm.__version__, "target": str(target),
                      "threads": os.environ.get("TVM_NUM_THREADS", "default")}), flush=True)
    if opts.serve:
        serve(target, policy)
        return
    for name in opts.only or list(SCHEDULES):
        try:
            info, timer = prepare(name, target, policy)
        except Exception as err:  # report and go on: one broken kernel must not hide the others
            print(json.dumps(_failure(name, err)), flush=True)
            continue
        seconds = info["first"] if get(name).slow else min(timer() for _ in range(policy.rounds))
        print(json.dumps({"name": name, "seconds": seconds, "error": info["error"]}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
