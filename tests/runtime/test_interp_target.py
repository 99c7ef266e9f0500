"""The ``interp`` target's build path: the built-in plugin's backend and loader hooks."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.ir import BufferStore, For
from loom.plugins import builtin, get_plugin_manager
from loom.backend import build_module
from loom.runtime import InterpModule, nd
from loom.runtime.interp_module import InterpBackend
from loom.target import Target
from loom.testing import AssertionFailed, OutOfBoundsError

from runtime_programs import build, guarded, host_and_kernel, interp_module, prim, vadd


def test_backend_hook_builds_an_interp_module():
    mod = interp_module(vadd())
    backend = get_plugin_manager().hook.loom_backend(target_kind="interp")
    assert isinstance(backend, InterpBackend) and backend.thread_semantics == "gpu" and not backend.cacheable
    m = build_module(mod, Target("interp"))
    assert isinstance(m, InterpModule) and loom.structural_equal(m.ir_module, mod) and str(m.target) == "interp"
    assert m.info.kind == "interp" and m.info.entry == "vadd" and m.get_source("json") == m.info.sources["json"]


def test_builtin_hooks_decline_other_kinds_and_formats():
    assert builtin.loom_backend(target_kind="llvm") is None
    assert builtin.loom_device_api(device_type=2) is None
    assert builtin.loom_load_module(path="x.so", fmt="so") is None


def test_host_launches_device_kernel():
    """A SplitHostDevice-style module: the host calls a thread-bound kernel through a GlobalVar."""
    m = build(*host_and_kernel())
    a = nd.array(np.linspace(0, 1, 7, dtype="float32"))
    b = nd.empty((7,), "float32")
    m(a, b)
    np.testing.assert_array_equal(b.numpy(), a.numpy() * 2)
    out = np.zeros(3, "float32")
    m["twice_kernel0"](np.ones(3, "float32"), out, 3)  # a kernel's pointer parameters take contiguous arrays
    assert out.tolist() == [2, 2, 2]


def test_assert_stmt_fails_at_call_time():
    m = build(guarded(limit=10))
    a = np.zeros(1, "int32")
    m(a, 3)
    assert a[0] == 3
    with pytest.raises(AssertionFailed, match="guarded: assertion failed: x must be below 10") as info:
        m(a, 11)
    assert isinstance(info.value, loom.LoomError) and a[0] == 3


def test_program_errors_are_loom_errors():
    """An access past a buffer is caught by the interpreter, not run on memory."""
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    i = loom.var("i")
    f = prim(For(i, 0, n + 1, "serial", BufferStore(A, loom.const(1.0), [i])), A, name="overrun")
    with pytest.raises(OutOfBoundsError):
        build(f)(np.zeros(4, "float32"))


def test_malformed_ir_fails_when_built():
    A = loom.decl_buffer((4,), "float32", name="A")
    free = loom.var("free")
    f = prim(BufferStore(A, loom.const(1.0), [free]), A, name="bad")
    with pytest.raises(loom.LoomValueError, match="variable free .* is used where nothing binds it"):
        build(f)


def test_empty_host_module_calls_through_its_imports():
    """A host module with no function of its own (heterogeneous builds) forwards to what it imports."""
    host = InterpModule(loom.ir.IRModule({}))
    with pytest.raises(loom.LoomValueError, match="holds no function and imports none"):
        host()
    host.imported_modules.append(build(vadd()))
    a, c = np.ones(2, "float32"), np.zeros(2, "float32")
    host(a, a, c)
    assert host.entry_name == "vadd" and c.tolist() == [2, 2] and host["vadd"].name == "vadd"
    with pytest.raises(loom.LoomTypeError, match="takes an IRModule"):
        InterpModule(vadd())


def test_loader_hook_round_trip(tmp_path):
    m = build(vadd())
    path = str(tmp_path / "m.loom")
    m.export_library(path)
    loaded = get_plugin_manager().hook.loom_load_module(path=path, fmt="interp")
    assert isinstance(loaded, InterpModule) and loaded.entry_name == "vadd" and str(loaded.target) == "interp"
    a, c = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    loaded(a, a, c)
    assert c.tolist() == [0, 2, 4, 6]
