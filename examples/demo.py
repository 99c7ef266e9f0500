"""Loom demo: what is installed, a scheduled program lowered and built, and the core's tools.

Run with ``make demo``.  It shows plugins and target kinds, a blocked matmul schedule
lowered through the classic pipeline and run on ``interp``, ``llvm`` and ``c`` against
numpy, then real kernels (vector add, the classic blocked matmul, row softmax)
compiled for the host CPU, checked against numpy and timed next to it; then a
PrimFunc written directly in the IR, the simplifier, and a JSON round trip; finally
a GPU-style tiled matmul (shared memory, barriers) built for the ``ext_dev`` test
device with a native host, and a second build served by the compile cache.

The kernels and the timing come from ``bench/`` (``bench/kernels.py``,
``bench/harness.py``); ``make bench`` runs the whole suite, Apache TVM included.
"""

from __future__ import annotations

import os
import pathlib
import sys

# OpenBLAS's idle threads busy-wait ~0.1 s after each call; keep them from slowing
# the kernel timed right after numpy's matmul (must be set before numpy loads).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

import loom  # noqa: E402
from loom.ir import BufferStore, For, IfThenElse, PrimFunc  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
import harness  # noqa: E402  (bench/ is not a package)
import kernels  # noqa: E402
import workloads  # noqa: E402

#: The kernels the demo compiles and times (bench/workloads.py has their sizes).
DEMO_KERNELS = ("vadd", "matmul_blocked", "softmax")


def banner(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def show_plugins() -> None:
    banner("Plugins")
    for p in loom.plugins.list_plugins():
        kinds = ", ".join(p.target_kinds) or "-"
        print(f"  {p.name:<10} {p.version or '':<8} {p.status:<8} target kinds: {kinds}")
    banner("Target kinds")
    for name in loom.target.list_kinds():
        kind = loom.target.get_kind(name)
        print(f"  {name:<8} device_type={kind.device_type}  attrs: {', '.join(kind.schema) or '-'}")


def blocked_scale() -> PrimFunc:
    """B[i] = A[i] * 2 + 1 over a symbolic length n, tiled by 8 with a tail guard."""
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    B = loom.decl_buffer((n,), "float32", name="B")
    io, ii = loom.var("io"), loom.var("ii")
    idx = io * 8 + ii
    body = IfThenElse(idx < n, BufferStore(B, A[idx] * 2.0 + 1.0, [idx]))
    loops = For(io, 0, loom.floordiv(n + 7, 8), "parallel", For(ii, 0, 8, "vectorized", body))
    return PrimFunc([A.data, B.data, n], loops, buffer_map={A.data: A, B.data: B},
                    attrs={"global_symbol": "scale"})


def blocked_matmul(m: int, n: int, k: int):
    A = loom.placeholder((m, k), name="A")
    B = loom.placeholder((k, n), name="B")
    r = loom.reduce_axis((0, k), name="k")
    C = loom.compute((m, n), lambda i, j: loom.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = loom.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C]


def compiled_kernels() -> bool:
    """Build, check and time the demo kernels on every native target; True when all are correct."""
    targets = [k for k in ("llvm", "c") if k in loom.target.list_kinds()]
    banner(f"Compiled kernels against numpy ({', '.join(targets) or 'no native backend installed'})")
    policy = workloads.timing(quick=True)
    results = []
    for name in DEMO_KERNELS:
        wl = workloads.get(name)
        candidates = [harness.numpy_candidate(wl, policy),
                      *(harness.loom_candidate(wl, t, kernels.build, policy) for t in targets)]
        results += harness.interleave(candidates, policy)
    impls = ["numpy", *(f"loom {t}" for t in targets)]
    rows = [row[:5] for row in harness.table_rows([workloads.get(n) for n in DEMO_KERNELS], results, impls)]
    print(harness.text_table(rows, harness.HEADER[:5]))
    for failure in harness.failures(results):
        print(f"  FAILED {failure}")
    print(f"  every output checked against a float64 numpy reference; time: best of {policy.rounds} rounds "
          f"of {policy.number} calls; vs numpy > 1 is faster than numpy")
    return not any(r.failed for r in results)


def main() -> None:
    print(f"Loom {loom.__version__}")
    show_plugins()

    banner("A blocked matmul schedule, lowered")
    s, args = blocked_matmul(12, 16, 10)
    print(loom.lower(s, args, name="matmul"))
    f = loom.build(s, args, target="interp", name="matmul")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((12, 10)).astype("float32"), rng.standard_normal((10, 16)).astype("float32")
    c = np.zeros((12, 16), "float32")
    f(a, b, c)
    ok_mm = np.allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    print(f"  built for interp; max |C - A@B| = {np.abs(c - a @ b).max():.2e}  -> {'OK' if ok_mm else 'MISMATCH'}")
    for kind in ("llvm", "c"):  # native backends, where installed
        if kind not in loom.target.list_kinds():
            continue
        native = loom.build(s, args, target=kind, name="matmul")
        c[:] = 0
        native(a, b, c)
        good = np.allclose(c, a @ b, rtol=1e-4, atol=1e-4)
        ok_mm &= good
        print(f"  built for {kind:<6}; max |C - A@B| = {np.abs(c - a @ b).max():.2e}  -> {'OK' if good else 'MISMATCH'}")

    ok_kernels = compiled_kernels()

    banner("A PrimFunc in the IR")
    func = blocked_scale()
    print(func)
    print(f"  well-formed: {loom.verify_well_formed(func)}")

    banner("Simplifier")
    x = loom.var("x")
    ana = loom.arith.Analyzer()
    ana.bind(x, loom.ir.Range.from_min_extent(0, 8))
    for e in [(x * 8 + 5) // 8, (x * 8 + 5) % 8, (x + 3) - x, loom.select(x < 10, x, 0)]:
        print(f"  {str(e):<28} ->  {ana.simplify(e)}   (x in [0, 8))")

    banner("Reference interpreter vs numpy")
    a = np.random.default_rng(0).standard_normal(37).astype("float32")
    b = np.zeros_like(a)
    loom.testing.evaluate(func, a, b, 37)
    ok = np.allclose(b, a * 2 + 1)
    print(f"  scale(n=37): max |error| = {np.abs(b - (a * 2 + 1)).max():.2e}  -> {'OK' if ok else 'MISMATCH'}")

    banner("JSON round trip")
    text = loom.save_json(func)
    back = loom.load_json(text)
    print(f"  {len(text)} bytes, structurally equal after loading: {loom.structural_equal(back, func)}")

    banner("Heterogeneous CompilationConfig (llvm host, cuda device)")
    kinds = loom.target.list_kinds()
    raw = [k for k in ("llvm", "cuda") if k in kinds] or ["interp"]
    cfg = loom.target.CompilationConfig(None, raw)
    print(f"  host target:       {cfg.host_target}")
    for t in cfg.primitive_targets:
        print(f"  primitive target:  {t}   (host is the host target: {t.host is cfg.host_target})")
    ok_device = device_program()
    ok_cuda = cuda_program()
    if not (ok and ok_mm and ok_kernels and ok_device and ok_cuda):
        raise SystemExit(1)


def device_program() -> bool:
    """The shared-memory tiled matmul on ext_dev: kernels run with GPU semantics, launched by a native host."""
    import loom.testing.ext_dev as ext_dev
    from loom.testing.conformance.programs import tiled_matmul

    host = next((k for k in ("llvm", "c") if k in loom.target.list_kinds()), "interp")
    banner(f"A device program: tiled matmul on ext_dev, launched by a {host} host")
    plugin = loom.plugins.register(ext_dev)
    try:
        s, args = tiled_matmul(32, 32, 32)
        f = loom.build(s, args, target="ext_dev", target_host=host)
        before = loom.backend.stats()
        again = loom.build(s, args, target="ext_dev", target_host=host)  # the same program again
        hits = loom.backend.stats()["cache_hits"] - before["cache_hits"]
        dev = loom.device("ext_dev")
        rng = np.random.default_rng(2)
        a, b = rng.standard_normal((2, 32, 32)).astype("float32")
        C = loom.nd.empty((32, 32), "float32", dev)
        f(loom.nd.array(a, dev), loom.nd.array(b, dev), C)
        good = bool(np.allclose(C.numpy(), a @ b, rtol=1e-4, atol=1e-4))
        barriers = f.imported_modules[0].get_source().count("tvm_storage_sync")
        print(f"  host module {type(f).__name__} imports {[type(m).__name__ for m in f.imported_modules]}; "
              f"kernel barriers: {barriers}")
        print(f"  max |C - A@B| = {np.abs(C.numpy() - a @ b).max():.2e}  -> {'OK' if good else 'MISMATCH'}")
        if again.artifact is not None and again.artifact.path is not None:  # interp hosts are not cached
            print(f"  built again: the {host} host code came from the compile cache ({hits} hit, nothing compiled)")
        return good
    finally:
        loom.plugins.unregister(plugin)


def cuda_program() -> bool:
    """A row softmax built for cuda: CUDA C and PTX from nvcc; run on the GPU when there is one."""
    if "cuda" not in loom.target.list_kinds():
        return True
    from loom_cuda import workloads
    from loom_cuda.driver import device_api
    from loom_cuda.nvcc import find_nvcc

    banner("The CUDA backend: a row softmax (cross-thread reductions in one kernel)")
    if find_nvcc() is None:
        print("  nvcc is not installed: CUDA builds need the CUDA toolkit (skipped)")
        return True
    s, args = workloads.row_softmax(256, 1000, threads=128)
    f = loom.build(s, args, target="cuda", target_host="llvm")
    (cu,) = f.imported_modules
    kernel = next(line for line in cu.get_source().splitlines() if "__global__" in line)
    print(f"  target {cu.target} (arch {cu.target.attrs['arch']}): {len(cu.cubin)} bytes of cubin, {cu.get_source('ptx').count(chr(10))} lines of PTX")
    print(f"  {kernel[:110]}...")
    print(f"  warp shuffles: {cu.get_source().count('__shfl_down_sync')}, barriers: "
          f"{cu.get_source().count('__syncthreads')}")
    reason = device_api().unavailable_reason(loom.cuda(0))
    if reason:
        print(f"  not run: {reason}")
        return True
    a = np.random.default_rng(3).standard_normal((256, 1000)).astype("float32")
    out = loom.nd.empty((256, 1000), "float32", loom.cuda(0))
    f(loom.nd.array(a, loom.cuda(0)), out)
    e = np.exp(a - a.max(1, keepdims=True))
    good = bool(np.allclose(out.numpy(), e / e.sum(1, keepdims=True), atol=1e-6))
    print(f"  on {loom.cuda(0)}: {'OK' if good else 'MISMATCH'} against numpy")
    return good


if __name__ == "__main__":
    main()
