"""Stand-ins for the driver tests: a recording pipeline and a fake backend plugin."""

from __future__ import annotations

import types

import pytest

import loom
import loom.backend
from loom.driver import pipeline
from loom.ir import BufferStore, PrimFunc
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


class FakeModule(loom.runtime.Module):
    """What the fake backend loads: the functions' signatures and the target they were built for."""

    format = "fake"

    def __init__(self, mod, info):
        super().__init__(dict(info.functions), info.entry or None)
        self.mod, self.target = mod, loom.target.Target(info.target)
        self.links: dict = {}

    def link_import(self, name, provider):
        self.links[name] = provider


class FakeBackend(loom.backend.Backend):
    """Stages that record what they built; the source and the artifact are the IRModule's JSON."""

    cacheable = False

    def __init__(self, kind, calls):
        self.kind, self.calls = kind, calls

    def render(self, mod, options):
        return {"json": loom.save_json(mod)}

    def compile(self, sources, options):
        return sources["json"].encode()

    def load(self, data, info):
        out = FakeModule(loom.load_json(data.decode()), info)
        self.calls.append(out)
        return out


@pytest.fixture
def fake_backend():
    """A plugin with kinds ``fakecpu`` (cpu), ``fakegpu`` (cuda) and ``nocodegen`` (cpu, no backend)."""
    calls: list[FakeModule] = []
    plugin = types.ModuleType("fake_backend")

    def kinds():
        from loom.target import TargetKind

        return [TargetKind("fakecpu", "cpu", {}), TargetKind("fakegpu", "cuda", {}),
                TargetKind("nocodegen", "cpu", {})]

    def backend(target_kind):
        return FakeBackend(target_kind, calls) if target_kind in ("fakecpu", "fakegpu") else None

    plugin.loom_target_kinds = hookimpl(kinds)
    plugin.loom_backend = hookimpl(backend)
    loom.plugins.register(plugin)
    try:
        yield calls
    finally:
        loom.plugins.unregister(plugin)
