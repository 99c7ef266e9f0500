"""One program across two devices: stages placed with ``on_device``, copies planned by ``loom.build``.

For a CPU kind the kind is the host and runs the middle stage, and the test
device ``ext_dev`` runs the others; for a device kind the device runs the
outer stages and its host the middle one.  The arguments live on the host, so
the plan copies the input to the device, the first stage's result to the CPU,
the reduction back, and the output home: four copies, which ``ext_dev``'s device
API counts exactly.  The built module also runs the same in a fresh process
after ``export_library``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import loom
import loom.testing.ext_dev as ext_dev

from .harness import KindUnderTest, bind_root, run_child

N, M = 48, 40


@pytest.fixture
def devices(kind_under_test: KindUnderTest) -> Iterator[tuple[str, str]]:
    """``(device kind, CPU kind)`` of the program, with ext_dev registered for CPU kinds."""
    kind = kind_under_test
    registered = None
    if not kind.on_device and ext_dev.KIND not in loom.target.list_kinds():
        registered = loom.plugins.register(ext_dev)
    try:
        yield (kind.name, kind.host or "llvm") if kind.on_device else (ext_dev.KIND, kind.name)
    finally:
        if registered is not None:
            loom.plugins.unregister(registered)


def _program(device: str, cpu: str) -> tuple[Any, list[Any]]:
    A = loom.placeholder((N, M), "float32", name="A")
    B = loom.compute((N, M), lambda i, j: A[i, j] * 2.0 - 1.0, name="B")
    k = loom.reduce_axis((0, M), name="k")
    C = loom.compute((N,), lambda i: loom.sum(B[i, k], axis=k), name="C")
    D = loom.compute((N,), lambda i: C[i] * C[i] + 3.0, name="D")
    s = loom.create_schedule(D.op)
    for t in (B, D):
        bind_root(s, t)
        s[t].on_device(device)
    s[C].on_device(cpu)
    return s, [A, D]


def _want(a: np.ndarray) -> np.ndarray:
    c = (a * 2.0 - 1.0).sum(axis=1)
    return c * c + 3.0


def test_stages_on_two_devices_match_numpy(devices: tuple[str, str]) -> None:
    device, cpu = devices
    s, args = _program(device, cpu)
    f = loom.build(s, args, target=[cpu, device])
    a = np.random.default_rng(0).random((N, M), dtype=np.float32)
    d = np.zeros(N, "float32")
    api = ext_dev.device_api()
    api.reset_counters()
    f(a, d)
    np.testing.assert_allclose(d, _want(a), rtol=1e-4)
    if device == ext_dev.KIND:
        # A to the device, B to the CPU, C back, D home; each device buffer allocated and freed once.
        assert api.counters["to_device"] == 2 and api.counters["to_host"] == 2
        assert api.counters["bytes_to_device"] == a.nbytes + N * 4
        assert api.counters["alloc"] == api.counters["free"] == 4
        assert api.counters["within"] == 0


def test_heterogeneous_module_exports_to_one_file(devices: tuple[str, str], kind_under_test: KindUnderTest,
                                                  tmp_path: Path) -> None:
    device, cpu = devices
    s, args = _program(device, cpu)
    f = loom.build(s, args, target=[cpu, device])
    path = tmp_path / "program.so"
    f.export_library(path)
    assert [x.name for x in tmp_path.iterdir()] == [path.name]
    child = """
    import loom.testing.ext_dev as ext_dev
    if ext_dev.KIND not in loom.target.list_kinds():
        loom.plugins.register(ext_dev)
    f = loom.runtime.load_module(args[0])
    a = np.random.default_rng(0).random((args[1], args[2]), dtype=np.float32)
    d = np.zeros(args[1], "float32")
    f(a, d)
    c = (a * 2.0 - 1.0).sum(axis=1)
    np.testing.assert_allclose(d, c * c + 3.0, rtol=1e-4)
    print("ok")
    """
    proc = run_child(child, kind_under_test, str(path), N, M)
    assert proc.returncode == 0 and proc.stdout.split() == ["ok"], proc.stderr
