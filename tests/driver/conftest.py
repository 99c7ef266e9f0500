"""Stand-ins for the driver tests: a recording pipeline and a fake backend plugin."""

from __future__ import annotations

import types

import pytest

import loom
from loom.driver import pipeline
from loom.ir import BufferStore, IRModule, PrimFunc
from loom.plugins import hookimpl
from loom.transform import PassInfo, PrimFuncPass


def recording_pass(name, log):
    """A pass that appends its name to ``log`` and changes nothing."""

    def run(func, mod, ctx):
        log.append(name)
        return func

    return PrimFuncPass(run, PassInfo(name))


@pytest.fixture
def fake_pipeline(monkeypatch):
    """Replace every built-in pass by a recorder; return the log of pass names."""
    log: list[str] = []

    def entries(*names):
        return [(n, lambda n=n: recording_pass(n, log)) for n in names]

    monkeypatch.setattr(pipeline, "PHASES", (
        entries(),
        entries("StorageFlatten", "CanonicalSimplify"),
        entries("LoopPartition", "VectorizeLoop", "InjectVirtualThread", "InjectDoubleBuffer",
                "StorageRewrite", "UnrollLoop"),
        entries("Simplify3", "RemoveNoOp", "RewriteUnsafeSelect"),
    ))
    monkeypatch.setattr(pipeline, "API", entries("MakeAPI"))
    monkeypatch.setattr(pipeline, "DEVICE_BUILD", entries("SplitHostDevice", "ThreadSync", "LowerIntrin"))
    monkeypatch.setattr(pipeline, "HOST_BUILD", entries("LowerIntrin"))
    return log


@pytest.fixture
def add_one():
    """A factory of ``A[0] = A[0] + 1`` PrimFuncs with one buffer parameter."""

    def make(name="add_one"):
        A = loom.decl_buffer((4,), "float32", name="A")
        body = BufferStore(A, A[0] + 1.0, [0])
        return PrimFunc([A.data], body, buffer_map={A.data: A}, attrs={"global_symbol": name})

    return make


class FakeModule:
    """What the fake backend returns: the module and target it was given."""

    def __init__(self, mod: IRModule, target):
        self.mod, self.target = mod, target
        self.imported_modules: list = []

    def import_module(self, other):
        self.imported_modules.append(other)


@pytest.fixture
def fake_backend():
    """A plugin with kinds ``fakecpu`` (cpu), ``fakegpu`` (cuda) and ``nocodegen`` (cpu, no codegen)."""
    calls: list[FakeModule] = []
    plugin = types.ModuleType("fake_backend")

    def kinds():
        from loom.target import TargetKind

        return [TargetKind("fakecpu", "cpu", {}), TargetKind("fakegpu", "cuda", {}),
                TargetKind("nocodegen", "cpu", {})]

    def codegen(mod, target):
        if target.kind_name not in ("fakecpu", "fakegpu"):
            return None
        out = FakeModule(mod, target)
        calls.append(out)
        return out

    plugin.loom_target_kinds = hookimpl(kinds)
    plugin.loom_codegen = hookimpl(codegen)
    loom.plugins.register(plugin)
    try:
        yield calls
    finally:
        loom.plugins.unregister(plugin)
