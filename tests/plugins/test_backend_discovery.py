"""The three backend distributions are found through their entry points when installed."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

import loom.plugins as plugins
import loom.target

BACKENDS = [
    # distribution, entry point (= plugin name), module, kind, device type, default keys
    ("loom-llvm", "llvm", "loom_llvm.plugin", "llvm", 1, ("cpu",)),
    ("loom-c", "c", "loom_c.plugin", "c", 1, ("cpu",)),
    ("loom-cuda", "cuda", "loom_cuda.plugin", "cuda", 2, ("cuda", "gpu")),
]


def _require(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"distribution {dist} is not installed")


@pytest.mark.parametrize("dist, name, module, kind, device_type, keys", BACKENDS,
                         ids=[b[0] for b in BACKENDS])
def test_backend_is_discovered(dist, name, module, kind, device_type, keys):
    version = _require(dist)
    info = next(p for p in plugins.list_plugins() if p.name == name)
    assert (info.dist, info.version, info.module, info.status) == (dist, version, module, "loaded")
    assert info.target_kinds == (kind,)
    # A backend contributes its target kind, and once registered its stages, intrinsic rules,
    # lowering passes, loader and (a device backend) the memory of its device.
    assert "loom_target_kinds" in info.hooks
    assert set(info.hooks) <= {"loom_target_kinds", "loom_backend", "loom_intrinsic_rules", "loom_lower_passes",
                               "loom_load_module", "loom_device_api"}
    found, owner = plugins.collect_target_kinds()[kind]
    assert owner == name and found.device_type == device_type and found.default_keys == keys


def test_c_kind_schema():
    _require("loom-c")
    t = loom.target.Target("c")
    assert t.attrs == {"compiler": "cc", "flags": "-O3 -march=native", "openmp": True, "fast_math": False}
    assert loom.target.Target("c -compiler=clang -openmp=0").attrs["openmp"] is False


def test_cuda_kind_schema():
    _require("loom-cuda")
    from loom_cuda.plugin import detected_arch

    t = loom.target.Target("cuda")
    assert t.attrs == {"arch": detected_arch() or "sm_90", "max_num_threads": 1024, "thread_warp_size": 32,
                       "max_shared_memory_per_block": 49152, "fast_math": False}
    assert t.keys == ("cuda", "gpu")
    assert loom.target.Target("cuda -arch=sm_80").attrs["arch"] == "sm_80"


def test_llvm_kind_fills_host_defaults():
    _require("loom-llvm")
    from loom_llvm.plugin import host_cpu

    triple, cpu, features = host_cpu()
    attrs = loom.target.Target("llvm").attrs
    assert (attrs["mtriple"], attrs["mcpu"], attrs["mattr"]) == (triple, cpu, features)
    assert attrs["opt_level"] == 3 and attrs["num_cores"] >= 1
    # Another CPU: its name implies the features, so the host's are not added.
    other_cpu = "x86-64" if cpu != "x86-64" else "x86-64-v2"
    other = loom.target.Target(f"llvm -mcpu={other_cpu} -opt_level=1").attrs
    assert other["mcpu"] == other_cpu and "mattr" not in other and other["opt_level"] == 1
    # Another triple: nothing about this host applies.
    cross = loom.target.Target("llvm -mtriple=riscv64-unknown-linux-gnu").attrs
    assert "mcpu" not in cross and "mattr" not in cross


def test_llvmlite_is_imported_only_when_an_llvm_target_is_made():
    _require("loom-llvm")
    script = (
        "import sys, loom.plugins, loom.target\n"
        "assert 'llvm' in loom.target.list_kinds() and loom.plugins.broken_plugins() == []\n"
        "assert 'llvmlite' not in sys.modules, 'plugin load imported llvmlite'\n"
        "loom.target.Target('llvm')\n"
        "assert 'llvmlite.binding' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_every_hook_has_a_shipped_implementation():
    """DESIGN §5: a hook exists only if the packages Loom ships implement it (ext_dev is not even needed)."""
    from loom.plugins import hookspecs

    specs = sorted(n for n in dir(hookspecs) if n.startswith("loom_"))
    implemented = {h for info in plugins.list_plugins() if info.status != "failed" for h in info.hooks}
    assert specs == sorted(set(specs) & implemented), f"hooks nobody implements: {sorted(set(specs) - implemented)}"
