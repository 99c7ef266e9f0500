"""The core's side of backend stages: finding a backend, caching compile output, dumps, and errors.

A fake cacheable backend (kind ``stagetoy``) counts its compiles; its artifact is
the rendered text, and loading gives an interp module of the IR, so results are real.
"""

from __future__ import annotations

import contextlib
import json
import os
import types

import attrs
import numpy as np
import pytest

import loom
from loom.backend import (Artifact, Backend, BackendError, BackendOptions, ModuleInfo, build_module, get_backend,
                          stats)
from loom.ir import BufferStore, IRModule, PrimFunc
from loom.plugins import hookimpl
from loom.runtime.interp_module import InterpModule
from loom.target import AttrSpec, Target, TargetKind


@attrs.frozen
class ToyOptions(BackendOptions):
    level: int = 0


class ToyBackend(Backend):
    kind = "stagetoy"
    version = "1"
    artifact_suffix = ".toy"

    def __init__(self) -> None:
        self.compiles = 0
        self.loaded: list[Artifact] = []
        self.identity = "toy-cc 1.0"

    def options(self, target):
        return ToyOptions(int(target.attrs["level"]))

    def compiler_identity(self, options):
        return self.identity

    def render(self, mod, options):
        return {"json": loom.save_json(mod)}

    def compile(self, sources, options):
        self.compiles += 1
        return sources["json"].encode()

    def load(self, data, info):
        self.loaded.append(data)
        return InterpModule(loom.load_json(bytes(data).decode()), Target("interp"), info.entry)


@pytest.fixture
def toy(monkeypatch, tmp_path):
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    backend = ToyBackend()
    plugin = types.ModuleType("stagetoy_plugin")
    plugin.loom_target_kinds = hookimpl(lambda: [TargetKind("stagetoy", "cpu", {"level": AttrSpec(int, 0)})])
    plugin.loom_backend = hookimpl(lambda target_kind: backend if target_kind == "stagetoy" else None)
    name = loom.plugins.register(plugin)
    try:
        yield backend
    finally:
        loom.plugins.unregister(name)


def _inc(name: str = "inc", delta: float = 1.0) -> IRModule:
    A = loom.decl_buffer((4,), "float32", name="A")
    i = loom.var("i")
    f = PrimFunc([A.data], loom.ir.For(i, 0, 4, "serial", BufferStore(A, A[i] + delta, [i])),
                 buffer_map={A.data: A}, attrs={"global_symbol": name, "loom.api": True})
    return IRModule({name: f})


def _run(m) -> list[float]:
    a = np.zeros(4, "float32")
    m(a)
    return a.tolist()


def test_get_backend_names_the_plugin(toy):
    backend, plugin = get_backend("stagetoy")
    assert backend is toy and plugin == "stagetoy_plugin"
    with pytest.raises(loom.errors.PluginError, match="no backend can build target kind 'nonesuch'"):
        get_backend("nonesuch")


def test_a_miss_compiles_and_a_hit_only_loads(toy):
    before = stats()
    m = build_module(_inc(), Target("stagetoy"))
    assert toy.compiles == 1 and _run(m) == [1.0] * 4
    assert m.info.kind == "stagetoy" and m.info.entry == "inc" and list(m.info.sources) == ["json"]
    again = build_module(_inc(), Target("stagetoy"))
    assert toy.compiles == 1 and _run(again) == [1.0] * 4
    path = toy.loaded[-1].path
    assert path is not None and path.endswith(".toy") and os.path.basename(os.path.dirname(path)) == "backend-stagetoy"
    after = stats()
    assert after["compiles"] - before["compiles"] == 1 and after["cache_hits"] - before["cache_hits"] == 1
    assert after["cache_misses"] - before["cache_misses"] == 1 and after["builds"] - before["builds"] == 2


def test_the_key_covers_source_options_version_and_compiler(toy, monkeypatch):
    build_module(_inc(), Target("stagetoy"))
    build_module(_inc(delta=2.0), Target("stagetoy"))  # another source
    assert toy.compiles == 2
    build_module(_inc(), Target("stagetoy -level=3"))  # other options
    assert toy.compiles == 3
    toy.identity = "toy-cc 2.0"  # an upgraded compiler
    build_module(_inc(), Target("stagetoy"))
    assert toy.compiles == 4
    monkeypatch.setattr(ToyBackend, "version", "2")  # a new backend release
    build_module(_inc(), Target("stagetoy"))
    assert toy.compiles == 5
    build_module(_inc(), Target("stagetoy"))
    assert toy.compiles == 5


def test_options_digest_is_stable_and_sensitive():
    assert ToyOptions(1).digest() == ToyOptions(1).digest() != ToyOptions(2).digest()
    assert ToyOptions(1).to_json() == {"options": f"{__name__}.ToyOptions", "level": 1}

    @attrs.frozen
    class Bad(BackendOptions):
        thing: object = None

    with pytest.raises(loom.LoomTypeError, match="option values must be"):
        Bad(object()).digest()


@pytest.mark.parametrize("damage", [b"", b"truncated", None])
def test_a_damaged_entry_is_a_miss_and_is_repaired(toy, damage):
    build_module(_inc(), Target("stagetoy"))
    path = toy.loaded[-1].path
    data = open(path, "rb").read()
    if damage is None:  # same length, one byte flipped
        flipped = bytearray(data)
        flipped[len(flipped) // 2] ^= 0xFF
        damage = bytes(flipped)
    with open(path + ".bad", "wb") as fh:
        fh.write(damage)
    os.replace(path + ".bad", path)
    m = build_module(_inc(), Target("stagetoy"))
    assert toy.compiles == 2 and _run(m) == [1.0] * 4 and open(path, "rb").read() == data


def test_cache_off_compiles_every_time(toy, monkeypatch, tmp_path):
    monkeypatch.setenv("LOOM_CACHE", "0")
    build_module(_inc(), Target("stagetoy"))
    build_module(_inc(), Target("stagetoy"))
    assert toy.compiles == 2 and toy.loaded[-1].path is None and not (tmp_path / "cache").exists()


def test_an_unusable_cache_folder_compiles_anyway(toy, monkeypatch, tmp_path, caplog):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("the cache root must be a folder")
    monkeypatch.setenv("LOOM_CACHE_DIR", str(not_a_folder))
    m = build_module(_inc(), Target("stagetoy"))
    assert _run(m) == [1.0] * 4 and toy.compiles == 1
    assert "compiling without the cache" in caplog.text


def test_uncacheable_backends_skip_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))
    m = build_module(_inc(), Target("interp"))
    assert _run(m) == [1.0] * 4 and m.artifact.path is None and not (tmp_path / "cache").exists()


def test_imports_lists_functions_the_module_calls_but_does_not_define(toy):
    A = loom.decl_buffer((4,), "float32", name="A")
    call = loom.ir.Evaluate(loom.ir.Call("int32", loom.ir.GlobalVar("elsewhere"), [A.data]))
    host = PrimFunc([A.data], call, buffer_map={A.data: A}, attrs={"global_symbol": "host", "loom.api": True})
    m = build_module(IRModule({"host": host}), Target("stagetoy"))
    assert m.imports == ("elsewhere",) and m.info.imports == ("elsewhere",)


# --------------------------------------------------------------------------- broken backends


@contextlib.contextmanager
def _serving(plugin_name: str, backend: Backend):
    """A plugin named ``plugin_name`` whose loom_backend answers ``backend`` for kind stagetoy."""
    plugin = types.ModuleType(plugin_name)
    plugin.loom_backend = hookimpl(lambda target_kind: backend if target_kind == "stagetoy" else None)
    name = loom.plugins.register(plugin)
    try:
        yield
    finally:
        loom.plugins.unregister(name)


class _Broken(ToyBackend):
    def __init__(self, stage: str, how: str) -> None:
        super().__init__()
        self.stage, self.how = stage, how

    def _maybe(self, stage: str, good):
        if stage != self.stage:
            return good()
        if self.how == "raise":
            raise RuntimeError(f"boom in {stage}")
        if self.how == "loom":
            raise loom.LoomValueError(f"a clear {stage} error")
        return 42

    def options(self, target):
        return self._maybe("options", lambda: super(_Broken, self).options(target))

    def render(self, mod, options):
        return self._maybe("render", lambda: super(_Broken, self).render(mod, options))

    def compile(self, sources, options):
        return self._maybe("compile", lambda: super(_Broken, self).compile(sources, options))

    def load(self, data, info):
        return self._maybe("load", lambda: super(_Broken, self).load(data, info))


@pytest.mark.parametrize("stage", ["options", "render", "compile", "load"])
@pytest.mark.parametrize("how", ["raise", "wrong"])
def test_a_broken_stage_is_named(toy, monkeypatch, stage, how):
    monkeypatch.setenv("LOOM_CACHE", "0")
    with _serving("broken_stage_plugin", _Broken(stage, how)), \
            pytest.raises(BackendError, match=rf"the {stage} stage of the 'stagetoy' backend \(plugin "
                                              rf"'broken_stage_plugin'\) (raised RuntimeError: boom|returned a int)"
                          ) as info:
        build_module(_inc(), Target("stagetoy"))
    assert (info.value.plugin, info.value.kind, info.value.stage) == ("broken_stage_plugin", "stagetoy", stage)
    assert isinstance(info.value, loom.LoomError)


def test_a_loom_error_from_a_stage_keeps_its_type_and_gets_a_note(toy, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE", "0")
    with _serving("loom_error_plugin", _Broken("compile", "loom")), \
            pytest.raises(loom.LoomValueError, match="a clear compile error") as info:
        build_module(_inc(), Target("stagetoy"))
    assert "compile stage of the 'stagetoy' backend, plugin 'loom_error_plugin'" in info.value.__notes__[0]


def test_a_backend_hook_returning_junk_or_raising_is_named():
    for answer, match in [(lambda target_kind: 42, "returned a int from loom_backend"),
                          (lambda target_kind: 1 / 0, "raised in loom_backend.*ZeroDivisionError")]:
        plugin = types.ModuleType("junk_backend")
        plugin.loom_target_kinds = hookimpl(lambda: [TargetKind("junkkind", "cpu", {})])
        plugin.loom_backend = hookimpl(answer)
        name = loom.plugins.register(plugin)
        try:
            with pytest.raises(BackendError, match=f"plugin 'junk_backend' {match}"):
                get_backend("junkkind")
        finally:
            loom.plugins.unregister(name)


def test_through_loom_build_a_broken_stage_is_named_too(toy, monkeypatch):
    """The issue's example: a backend whose stage returns 42 made build() return 42."""
    monkeypatch.setenv("LOOM_CACHE", "0")
    A = loom.placeholder((4,), name="A")
    B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
    with _serving("returns_42", _Broken("load", "wrong")), \
            pytest.raises(BackendError, match="load stage .* returned a int; expected a loom.runtime.Module"):
        loom.build(loom.create_schedule(B.op), [A, B], target="stagetoy")


def test_module_info_round_trips_through_json():
    m = build_module(_inc(), Target("interp"))
    back = ModuleInfo.from_json(m.info.to_json())
    assert (back.kind, back.target, back.entry, back.imports) == ("interp", "interp", "inc", ())
    assert loom.structural_equal(IRModule(dict(back.functions)), IRModule(dict(m.info.functions)))
    for bad in ["not json", json.dumps({"kind": 1}), json.dumps([])]:
        with pytest.raises(loom.errors.SerializationError):
            ModuleInfo.from_json(bad)
