"""GPU benchmarks of the cuda backend (issue 12; not a test): kernels against the GPU's own best, and builds.

    python bench/bench_cuda.py [--quick] [--sizes vadd=2^26,sgemm=4096,softmax=8192x8192,launch=256]
                               [--markdown PATH] [--section cuda]

The schedules are those of :mod:`loom_cuda.workloads` (the ones docs/cuda.md
explains), built for ``target="cuda"`` with an llvm host module:

* **vector add**, 2^26 float32, 4 lanes per thread (16-byte accesses), against
  the device-to-device copy bandwidth: ``cuMemcpyDtoD`` (a ``loom.nd`` copy on
  the GPU) of as many bytes as the add moves (it reads 8 and writes 4 bytes per
  element; the copy of 6 bytes per element reads and writes as much). Target:
  >= 90 % of the copy's bandwidth;
* **SGEMM**, 4096 cubed, shared-memory tiles (``tiled_matmul(4096)``), built with
  ``-fast_math`` (here: FMA contraction, as cuBLAS uses), against cuBLAS fp32
  through torch with TF32 off. Target: >= 0.5x cuBLAS;
* **row softmax**, 8192 x 8192, a block per row (``row_softmax``), against
  ``torch.softmax``, with exact ``expf`` and with ``-fast_math``. Target: >= 0.8x torch;
* **launch cost**: the mean wall time of one call of the host module of a tiny
  vector add (256 float32) from Python, arrays already on the GPU (the call
  checks them, computes the launch and queues the kernel; it does not wait for
  it). Target: <= 10 us.

Every output is checked against numpy (the baselines too) before it is timed;
a wrong result is reported, never timed. Kernels are timed on the GPU's clock:
Loom's with ``f.time_evaluator(f.entry_name, loom.cuda(0))`` (CUDA events; the
argument checks run too, as a user's call pays them), torch's with
``torch.cuda.Event``, the copy with the CUDA device API's event timer; each
keeps the median of its repeats.

What needs no GPU is measured everywhere: each workload's build in a cold cache
(``loom.build``: lowering, CUDA C, nvcc's cubin and PTX), nvcc alone on the same
source, and the sizes of the CUDA C and the cubin. Without a GPU (pycuda
missing, no driver, no device) or without torch the script says which figures
are not measured and why, and exits 0. ``--markdown PATH`` writes the report
between ``<!-- bench:SECTION:begin -->`` and ``<!-- bench:SECTION:end -->`` of
PATH (``docs/benchmarks.md``), as ``run.py`` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

import loom
from loom_cuda import driver as cuda_driver
from loom_cuda import workloads as gpu
from loom_cuda.nvcc import compile_cuda, find_nvcc, nvcc_version

DEFAULT_SIZES: dict[str, tuple[int, ...]] = {"vadd": (1 << 26,), "sgemm": (4096,), "softmax": (8192, 8192),
                                             "launch": (256,)}
QUICK_SIZES: dict[str, tuple[int, ...]] = {"vadd": (1 << 22,), "sgemm": (1024,), "softmax": (1024, 1024),
                                           "launch": (256,)}
#: The acceptance figures of issue 12: how the figure is shown, what it is compared with, and the bound.
TARGETS = {"vadd": ("{:.0%}", " of the copy's bandwidth", ">=", 0.90),
           "sgemm": ("{:.2f}x", " cuBLAS fp32", ">=", 0.5),
           "softmax": ("{:.2f}x", " torch.softmax", ">=", 0.8),
           "launch": ("{:.1f} us", " per call", "<=", 10.0)}


@dataclasses.dataclass
class Case:
    """One built workload: its host module, the build figures, and the GPU figures once measured."""

    key: str
    title: str
    size: str
    target: str
    f: Any = None
    build_s: float = 0.0
    nvcc_s: float = 0.0
    source_bytes: int = 0
    source_lines: int = 0
    cubin_bytes: int = 0
    loom: str = "not measured"  # the Loom figure, formatted
    reference: str = "not measured"  # the baseline's figure, formatted
    ratio: float | None = None  # the figure compared with the target
    note: str = ""


# -- sizes ---------------------------------------------------------------------------------------------------


def _int(text: str) -> int:
    base, _, power = text.partition("^")
    return int(base) ** int(power) if power else int(text)


def parse_sizes(text: str, sizes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """``sizes`` with the entries of ``vadd=2^26,sgemm=4096,softmax=8192x8192,launch=256`` replaced."""
    out = dict(sizes)
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, _, value = item.partition("=")
        if key not in out or not value:
            raise SystemExit(f"bench_cuda: --sizes takes NAME=SIZE items with NAME in {', '.join(out)}; got {item!r}")
        try:
            dims = tuple(_int(v) for v in value.lower().split("x"))
        except ValueError:
            raise SystemExit(f"bench_cuda: --sizes {item!r}: sizes are integers such as 4096 or 2^26") from None
        if len(dims) != len(out[key]) or min(dims) < 1:
            raise SystemExit(f"bench_cuda: --sizes {key} takes {len(out[key])} positive size(s), got {value!r}")
        out[key] = dims
    return out


def _count(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 1024 and n & (n - 1) == 0 else str(n)


# -- builds (no GPU needed) ----------------------------------------------------------------------------------


def plan(sizes: dict[str, tuple[int, ...]]) -> list[tuple[Case, Callable[[], tuple[Any, list[Any]]]]]:
    """The workloads, each with the function making its schedule."""
    (n,), (m,), (rows, cols), (tiny,) = sizes["vadd"], sizes["sgemm"], sizes["softmax"], sizes["launch"]
    return [
        (Case("vadd", "vector add, 4 lanes per thread", f"{_count(n)} float32", "cuda"),
         lambda: gpu.vector_add(n, threads=256, lanes=4)),
        (Case("sgemm", "SGEMM, shared-memory tiles", f"{m} x {m} x {m}", "cuda -fast_math"),
         lambda: gpu.tiled_matmul(m)),
        (Case("softmax", "row softmax", f"{rows} x {cols}", "cuda"), lambda: gpu.row_softmax(rows, cols)),
        (Case("softmax_fast", "row softmax, fast math", f"{rows} x {cols}", "cuda -fast_math"),
         lambda: gpu.row_softmax(rows, cols)),
        (Case("launch", "launch cost: tiny vector add", f"{tiny} float32", "cuda"),
         lambda: gpu.vector_add(tiny, threads=256)),
    ]


def build(case: Case, schedule: Callable[[], tuple[Any, list[Any]]]) -> Case:
    """Build ``case`` (the cache is cold: see main), then time nvcc alone on its CUDA C."""
    s, args = schedule()
    start = time.perf_counter()
    case.f = loom.build(s, args, target=case.target, target_host="llvm", name=case.key)
    case.build_s = time.perf_counter() - start
    kernels = case.f.imported_modules[0]
    source = kernels.get_source()
    case.source_bytes, case.source_lines = len(source.encode()), source.count("\n")
    case.cubin_bytes = len(kernels.cubin)
    target = loom.target.Target(case.target)
    start = time.perf_counter()
    compile_cuda(source, str(target.attrs["arch"]), bool(target.attrs["fast_math"]))
    case.nvcc_s = time.perf_counter() - start
    return case


# -- measuring on the GPU ------------------------------------------------------------------------------------


def _wrong(what: str, got: np.ndarray, want: np.ndarray, tol: float) -> str | None:
    """Why ``got`` is not ``want`` (largest error relative to ``want``'s magnitude over ``tol``), else None."""
    err = float(np.max(np.abs(got.astype("float64") - want))) / max(float(np.max(np.abs(want))), 1e-30)
    return None if err <= tol else f"{what}: wrong result (relative error {err:.2e} > {tol:.0e}); not timed"


def _median_events(torch: Any, call: Callable[[], Any], number: int, repeat: int) -> float:
    """Seconds per call of ``call`` on torch's CUDA events: the median of ``repeat`` means of ``number`` calls."""
    call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            call()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / number)
    return statistics.median(samples)


def _loom_seconds(f: Any, args: list[Any], number: int, repeat: int) -> float:
    return float(f.time_evaluator(f.entry_name, loom.cuda(0), number=number, repeat=repeat)(*args).median)


class GPU:
    """Measures the cases on ``cuda(0)``; torch is None when it is missing (its baselines are then not measured)."""

    def __init__(self, torch: Any, quick: bool) -> None:
        self.torch, self.dev = torch, loom.cuda(0)
        self.number, self.repeat = (3, 3) if quick else (10, 7)
        self.rng = np.random.default_rng(0)

    def put(self, x: np.ndarray) -> Any:
        return loom.nd.array(x, self.dev)

    def vadd(self, case: Case, n: int) -> None:
        a, b = self.rng.random(n, dtype=np.float32), self.rng.random(n, dtype=np.float32)
        args = [self.put(a), self.put(b), loom.nd.empty((n,), "float32", self.dev)]
        case.f(*args)
        if not np.array_equal(args[2].numpy(), a + b):
            case.note = "vector add: wrong result; not timed"
            return
        t = _loom_seconds(case.f, args, self.number, self.repeat)
        case.loom = f"{t * 1e3:.3f} ms, {12 * n / t / 1e9:.0f} GB/s"
        # The copy moves what the add moves: 6 bytes per element read and written.
        src, dst = self.put(self.rng.integers(0, 255, 6 * n, dtype=np.uint8)), loom.nd.empty((6 * n,), "uint8", self.dev)
        dst.copyfrom(src)
        if not np.array_equal(dst.numpy(), src.numpy()):
            case.note = "device-to-device copy: wrong result; not timed"
            return
        api = cuda_driver.device_api()
        samples = []
        for _ in range(self.repeat):
            timer = api.timer(self.dev)
            timer.start()
            for _ in range(self.number):
                dst.copyfrom(src)
            samples.append(timer.stop() / self.number)
        c = statistics.median(samples)
        case.reference = f"DtoD copy: {c * 1e3:.3f} ms, {12 * n / c / 1e9:.0f} GB/s"
        case.ratio = c / t

    def sgemm(self, case: Case, n: int) -> None:
        a, b = self.rng.standard_normal((n, n), np.float32), self.rng.standard_normal((n, n), np.float32)
        want = a.astype("float64") @ b.astype("float64")
        args = [self.put(a), self.put(b), loom.nd.empty((n, n), "float32", self.dev)]
        case.f(*args)
        case.note = _wrong("SGEMM", args[2].numpy(), want, 1e-4) or ""
        if case.note:
            return
        t = _loom_seconds(case.f, args, self.number, self.repeat)
        case.loom = f"{t * 1e3:.2f} ms, {2 * n ** 3 / t / 1e12:.2f} TFLOP/s"
        if self.torch is None:
            return
        torch = self.torch
        torch.backends.cuda.matmul.allow_tf32 = False
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        tc = torch.empty((n, n), dtype=torch.float32, device="cuda")
        torch.matmul(ta, tb, out=tc)
        case.note = _wrong("cuBLAS", tc.cpu().numpy(), want, 1e-4) or ""
        if case.note:
            return
        r = _median_events(torch, lambda: torch.matmul(ta, tb, out=tc), self.number, self.repeat)
        case.reference = f"cuBLAS: {r * 1e3:.2f} ms, {2 * n ** 3 / r / 1e12:.2f} TFLOP/s"
        case.ratio = r / t

    def softmax(self, case: Case, rows: int, cols: int) -> None:
        x = self.rng.standard_normal((rows, cols), np.float32) * 4
        e = np.exp(x.astype("float64") - x.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
        args = [self.put(x), loom.nd.empty((rows, cols), "float32", self.dev)]
        case.f(*args)
        case.note = _wrong(case.title, args[1].numpy(), want, 1e-5) or ""
        if case.note:
            return
        t = _loom_seconds(case.f, args, self.number, self.repeat)
        case.loom = f"{t * 1e3:.3f} ms, {8 * rows * cols / t / 1e9:.0f} GB/s"
        if self.torch is None:
            return
        torch = self.torch
        tx = torch.from_numpy(x).cuda()
        case.note = _wrong("torch.softmax", torch.softmax(tx, dim=1).cpu().numpy(), want, 1e-5) or ""
        if case.note:
            return
        r = _median_events(torch, lambda: torch.softmax(tx, dim=1), self.number, self.repeat)
        case.reference = f"torch.softmax: {r * 1e3:.3f} ms, {8 * rows * cols / r / 1e9:.0f} GB/s"
        case.ratio = r / t

    def launch(self, case: Case, n: int) -> None:
        a, b = self.rng.random(n, dtype=np.float32), self.rng.random(n, dtype=np.float32)
        args = [self.put(a), self.put(b), loom.nd.empty((n,), "float32", self.dev)]
        case.f(*args)
        if not np.array_equal(args[2].numpy(), a + b):
            case.note = "tiny vector add: wrong result; not timed"
            return
        number = 2000 if self.number < 10 else 20000
        us = self._wall_us(lambda: case.f(*args), number)
        case.loom = f"{us:.2f} us per call"
        case.ratio = us
        if self.torch is not None:
            ta, tb = self.torch.from_numpy(a).cuda(), self.torch.from_numpy(b).cuda()
            tc = self.torch.empty_like(ta)
            ref = self._wall_us(lambda: self.torch.add(ta, tb, out=tc), number)
            case.reference = f"torch.add(a, b, out=c): {ref:.2f} us per call"

    def _wall_us(self, call: Callable[[], Any], number: int) -> float:
        """Host microseconds per call: the median of ``repeat`` means of ``number`` calls (the GPU waited for after)."""
        api = cuda_driver.device_api()
        call()
        api.synchronize(self.dev)
        samples = []
        for _ in range(self.repeat):
            start = time.perf_counter()
            for _ in range(number):
                call()
            samples.append((time.perf_counter() - start) / number * 1e6)
            api.synchronize(self.dev)
        return statistics.median(samples)


def measure(cases: list[Case], sizes: dict[str, tuple[int, ...]], torch: Any, quick: bool) -> None:
    """Fill in each case's GPU figures."""
    g = GPU(torch, quick)
    for case in cases:
        print(f"Measuring {case.title} ({case.size}) ...", flush=True)
        key = "softmax" if case.key.startswith("softmax") else case.key
        try:
            getattr(g, key)(case, *sizes[key])
        except loom.LoomError as err:  # out of memory, a failed launch: reported, and the others still run
            case.note = f"failed: {err}"


# -- what is available ---------------------------------------------------------------------------------------


def find_torch() -> tuple[Any, str]:
    """torch when it is installed and sees a GPU, else None; and its description or why it is not used."""
    try:
        import torch
    except ImportError:
        return None, "not installed: cuBLAS, torch.softmax and torch's launch figures are not measured"
    if not torch.cuda.is_available():
        return None, f"{torch.__version__}, but it sees no GPU: its figures are not measured"
    return torch, f"{torch.__version__} (CUDA {torch.version.cuda})"


def gpu_info() -> tuple[str, str | None]:
    """A description of ``cuda(0)``, or None and why kernels cannot run."""
    reason = cuda_driver.device_api().unavailable_reason(loom.cuda(0))
    if reason is not None:
        return "none", reason
    drv = cuda_driver.driver()
    major, minor = cuda_driver.compute_capability(0) or (0, 0)
    try:
        dev = drv.Device(0)
        name = f"{dev.name()}, {dev.total_memory() / 2 ** 30:.0f} GiB, driver {drv.get_driver_version()}"
    except Exception as err:  # pycuda too old or a stand-in: the name is decoration
        name = f"name unknown ({err})"
    return f"{name}, compute capability {major}.{minor}", None


# -- the report ----------------------------------------------------------------------------------------------


def _verdict(case: Case) -> str:
    fmt, what, sense, goal = TARGETS["softmax" if case.key.startswith("softmax") else case.key]
    bound = f"target {sense} {fmt.format(goal)}"
    if case.ratio is None:
        return f"not measured ({bound}{what})"
    met = case.ratio >= goal if sense == ">=" else case.ratio <= goal
    return f"{fmt.format(case.ratio)}{what} ({bound}: {'met' if met else 'NOT met'})"


def report(cases: list[Case], info: dict[str, str], missing: list[str], quick: bool) -> str:
    lines = ["Machine:", "", *(f"- {k}: {v}" for k, v in info.items()), ""]
    if missing:
        which = "The GPU figures are" if "GPU" in missing[0] else "Some baselines are"
        lines += [f"**{which} NOT MEASURED on this machine**: " + "; ".join(missing) + ". They come "
                  "from running `python bench/bench_cuda.py --markdown docs/benchmarks.md` on a "
                  "machine with an NVIDIA GPU, pycuda (`loom-cuda[gpu]`) and torch.", ""]
    lines += [f"Kernels ({'3 repeats of 3 calls' if quick else '7 repeats of 10 calls'}, median; "
              "time on the GPU's clock):", "",
              "| workload | size | target | Loom | baseline | result |", "|---|---|---|---|---|---|"]
    for c in cases:
        lines.append(f"| {c.title} | {c.size} | `{c.target}` | {c.loom} | {c.reference} | "
                     f"{c.note or _verdict(c)} |")
    lines += ["", "Builds, measured without a GPU (cold cache: `loom.build` lowers, writes the CUDA C and runs "
              "nvcc twice, for the cubin and the PTX; nvcc alone is both runs on the same source):", "",
              "| workload | target | loom.build (s) | nvcc alone (s) | CUDA C (bytes / lines) | cubin (bytes) |",
              "|---|---|---:|---:|---:|---:|"]
    for c in cases:
        lines.append(f"| {c.title} | `{c.target}` | {c.build_s:.2f} | {c.nvcc_s:.2f} | "
                     f"{c.source_bytes} / {c.source_lines} | {c.cubin_bytes} |")
    return "\n".join(lines) + "\n"


def _command(opts: argparse.Namespace) -> str:
    return " ".join(["python bench/bench_cuda.py", *(["--quick"] if opts.quick else []),
                     *([f"--sizes {opts.sizes}"] if opts.sizes else [])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (vadd 2^22, sgemm 1024, softmax "
                        "1024x1024) and fewer repetitions")
    parser.add_argument("--sizes", default="", metavar="NAME=SIZE,...",
                        help="override sizes: vadd=2^26,sgemm=4096,softmax=8192x8192,launch=256 (any of them)")
    parser.add_argument("--markdown", type=pathlib.Path, metavar="PATH", help="also write the report here")
    parser.add_argument("--section", default="cuda", help="the marked section of PATH to replace")
    opts = parser.parse_args(argv)
    sizes = parse_sizes(opts.sizes, QUICK_SIZES if opts.quick else DEFAULT_SIZES)
    nvcc = find_nvcc()
    if nvcc is None:
        print("bench_cuda: nvcc was not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): nothing can be built, "
              "nothing measured")
        return 0

    import harness

    info = harness.machine_info()
    info["GPU"], why_not = gpu_info()
    info["nvcc"] = nvcc_version(nvcc)
    info["arch"] = f"{loom.target.Target('cuda').attrs['arch']} (the cuda target's default here)"
    torch, info["torch"] = find_torch()
    runnable = why_not is None
    missing = [] if runnable else [f"no GPU to run on ({why_not})"]
    if runnable and torch is None:
        missing.append(f"torch is {info['torch']}")

    own_cache = tempfile.mkdtemp(prefix="loom-bench-cuda-")
    os.environ["LOOM_CACHE_DIR"] = own_cache
    try:
        cases = []
        for case, schedule in plan(sizes):
            print(f"Building {case.title} ({case.size}, {case.target}) ...", flush=True)
            cases.append(build(case, schedule))
        if runnable:
            measure(cases, sizes, torch, opts.quick)
        else:
            print(f"\nNOT MEASURED: {missing[0]}; only the builds are measured.", flush=True)
    finally:
        shutil.rmtree(own_cache, ignore_errors=True)
    text = report(cases, info, missing, opts.quick)
    print("\n" + text)
    if opts.markdown:
        from run import write_markdown

        write_markdown(opts.markdown, text, opts.section, _command(opts))
        print(f"wrote {opts.markdown}")
    return 1 if any(c.note for c in cases) else 0


if __name__ == "__main__":
    sys.exit(main())
