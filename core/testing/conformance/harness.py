"""The kind under test: how to build for it, where its arrays live, and how to bind loops for it.

A :class:`KindUnderTest` hides the difference between CPU kinds (``llvm``,
``c``, ``interp``: numpy arrays in, results in place) and device kinds
(``ext_dev``, ``cuda``: a split build with a host target, device arrays in,
results copied back with ``.numpy()``), so one test body serves both.

>>> import numpy as np
>>> kind = KindUnderTest.resolve("interp")
>>> kind.on_device, kind.gpu_threads
(False, True)
>>> out = kind.put(np.zeros(3, "float32"))
>>> kind.get(out).tolist()
[0.0, 0.0, 0.0]
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from hypothesis import HealthCheck, settings

import loom
from loom import envvars

__all__ = ["KindUnderTest", "CPU_DEVICE_TYPE", "BLOCK", "bind_root", "is_reduce", "hypothesis_settings",
           "buildable_kinds", "buildable_cpu_kinds", "default_host", "run_child"]

#: DLPack's kDLCPU: kinds of any other device type build split programs.
CPU_DEVICE_TYPE = 1
#: Threads per block of the bound schedules; the suite's shapes are rarely multiples, so guards run.
BLOCK = 16


def buildable_kinds() -> list[str]:
    """Installed target kinds whose plugin implements ``loom_backend``, sorted (stable for pytest-xdist)."""
    kinds: set[str] = set()
    for info in loom.plugins.list_plugins():
        if info.status != "failed" and "loom_backend" in info.hooks:
            kinds.update(info.target_kinds)
    return sorted(kinds)


def buildable_cpu_kinds() -> list[str]:
    """The :func:`buildable_kinds` that compile for the CPU (they take numpy arrays), sorted."""
    return [k for k in buildable_kinds() if int(loom.target.get_kind(k).device_type) == CPU_DEVICE_TYPE]


def default_host(kind: str) -> str:
    """The host kind of ``kind``'s split builds when none is given: :class:`loom.target.CompilationConfig`'s
    choice (llvm, c or interp, whichever is installed first)."""
    return loom.target.CompilationConfig(None, [kind]).host_target.kind.name


@dataclass(frozen=True)
class KindUnderTest:
    """One target kind as the suite drives it.

    :param name: the target kind.
    :param host: the host kind of split builds (device kinds only, else None).
    :param device_type: the kind's DLPack device type.
    :param thread_semantics: its backend's ``thread_semantics`` (``"gpu"`` or ``"serial"``).
    """

    name: str
    host: str | None
    device_type: int
    thread_semantics: str

    @classmethod
    def resolve(cls, name: str, host: str | None = None) -> KindUnderTest:
        """Look ``name`` up among the installed kinds and backends (a LoomError when it is not there)."""
        device_type = int(loom.target.get_kind(name).device_type)
        backend, _ = loom.backend.get_backend(name)
        on_device = device_type != CPU_DEVICE_TYPE
        return cls(name, (host or default_host(name)) if on_device else None, device_type, backend.thread_semantics)

    @property
    def on_device(self) -> bool:
        """True for a kind with memory of its own: split builds, device arrays, every loop bound."""
        return self.device_type != CPU_DEVICE_TYPE

    @property
    def gpu_threads(self) -> bool:
        """True when bound threads run as blocks of threads with barriers (interp, ext_dev, cuda)."""
        return self.thread_semantics == "gpu"

    @property
    def device(self) -> Any:
        """Where the kind's arrays live."""
        return loom.device(self.name) if self.on_device else loom.cpu(0)

    def __str__(self) -> str:
        return self.name if self.host is None else f"{self.name} (host {self.host})"

    # -- building ---------------------------------------------------------------------
    def build(self, inputs: Any, args: Sequence[Any] | None = None, **kwargs: Any) -> Any:
        """``loom.build`` for this kind (with its host when it is a device kind)."""
        return loom.build(inputs, args, target=self.name, target_host=self.host, **kwargs)

    # -- arrays -----------------------------------------------------------------------
    def put(self, value: Any) -> Any:
        """A numpy array as the kind takes it (a device array for device kinds); scalars pass through."""
        if isinstance(value, np.ndarray) and self.on_device:
            return loom.nd.array(value, self.device)
        return value

    def get(self, value: Any) -> Any:
        """The host copy of what :meth:`put` made."""
        return value.numpy() if isinstance(value, loom.nd.NDArray) else value

    def run(self, func: Any, *values: Any) -> list[Any]:
        """Call ``func`` on copies of ``values`` placed for the kind; return every argument read back."""
        placed = [self.put(v.copy() if isinstance(v, np.ndarray) else v) for v in values]
        func(*placed)
        return [self.get(v) for v in placed]


def is_reduce(iv: Any) -> bool:
    """True for a reduction loop (kept serial inside a thread by :func:`bind_root`)."""
    return iv.iter_type == "reduce"


def bind_root(s: Any, tensor: Any, block: int = BLOCK) -> tuple[Any, Any]:
    """Bind a root stage for a device: fuse its data-parallel leaves, split by ``block``, bind.

    The reduction leaves move inside, as serial loops of each thread.  Returns
    the ``(blockIdx.x, threadIdx.x)`` loops, where producers may be attached.
    """
    stage = s[tensor]
    leaves = list(stage.leaf_iter_vars)
    spatial = [iv for iv in leaves if not is_reduce(iv)]
    reduce = [iv for iv in leaves if is_reduce(iv)]
    if reduce and leaves != spatial + reduce:
        stage.reorder(*spatial, *reduce)
    fused = stage.fuse(*spatial)  # no spatial axis: fuse() makes a singleton loop to bind
    bx, tx = stage.split(fused, factor=block)
    stage.bind(bx, loom.thread_axis("blockIdx.x"))
    stage.bind(tx, loom.thread_axis("threadIdx.x"))
    return bx, tx


def hypothesis_settings(default_examples: int) -> Any:
    """Settings of the suite's property tests: no example database (the package may be read-only),
    no deadline, ``LOOM_E2E_EXAMPLES`` examples when set."""
    examples = envvars.E2E_EXAMPLES.get() or default_examples
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _runtime_plugins() -> list[str]:
    """Modules registered with ``loom.plugins.register`` in this process (ext_dev...): a child needs them too."""
    return sorted({p.module for p in loom.plugins.list_plugins()
                   if p.dist is None and p.status == "loaded" and p.module})


_CHILD_PRELUDE = """
import importlib, json, sys
import numpy as np
import loom
from loom.testing.conformance.harness import KindUnderTest
_cfg = json.loads(sys.argv[1])
_have = {p.module for p in loom.plugins.list_plugins()}
for _m in _cfg["plugins"]:
    if _m not in _have:
        loom.plugins.register(importlib.import_module(_m))
kind = KindUnderTest(**_cfg["kind"])
args = _cfg["args"]
"""


def run_child(script: str, kind: KindUnderTest, *args: Any, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh Python process that has the same runtime-registered plugins.

    The script sees ``kind`` (a :class:`KindUnderTest`), ``args`` (``args`` as JSON
    values), ``np`` and ``loom``; it fails by raising or by a nonzero exit.
    """
    config = {"kind": dataclasses.asdict(kind), "plugins": _runtime_plugins(), "args": list(args)}
    code = _CHILD_PRELUDE + textwrap.dedent(script)
    # This process's import path, so that a plugin module registered from a test folder imports there too.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run([sys.executable, "-c", code, json.dumps(config)], capture_output=True, text=True,
                          timeout=timeout, env=env)
