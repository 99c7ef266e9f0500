"""build(): target resolution, annotation, host/device split, the backend's stages through the plugin hook.

Backends are stand-ins (the ``fake_backend`` fixture registers kinds fakecpu/fakegpu
and a recording ``loom_backend``); the built-in passes are recorders.
"""

import importlib

import pytest

import loom
from loom.driver import build, pipeline
from loom.errors import LoomTypeError, LoomValueError, PluginError, TargetError
from loom.target import Target
from loom.transform import module_pass


def test_build_lowers_annotates_and_calls_the_backend(fake_pipeline, fake_backend, add_one):
    rt = build(add_one(), target="fakecpu")
    assert fake_backend == [rt]
    assert rt.target.kind_name == "fakecpu"
    func = rt.mod["add_one"]
    assert func.attrs["target"].kind_name == "fakecpu"
    assert fake_pipeline[:-1] == ["StorageFlatten", "CanonicalSimplify", "LoopPartition", "VectorizeLoop",
                                  "InjectVirtualThread", "InjectDoubleBuffer", "StorageRewrite", "UnrollLoop",
                                  "Simplify3", "RemoveNoOp", "RewriteUnsafeSelect", "MakeAPI"]
    assert fake_pipeline[-1] == "LowerIntrin"  # a CPU target: no split, no barriers


def test_already_lowered_functions_are_not_lowered_again(fake_pipeline, fake_backend, add_one):
    f = add_one().with_attr("loom.api", True)
    build(f, target="fakecpu")
    assert fake_pipeline == ["LowerIntrin"]


def test_target_defaults_to_the_current_one(fake_pipeline, fake_backend, add_one):
    with Target("fakecpu"):
        rt = build(add_one())
    assert rt.target.kind_name == "fakecpu"


def test_plugin_passes_see_the_build_target(fake_pipeline, fake_backend, add_one):
    import types

    from loom.plugins import hookimpl

    seen = []
    plugin = types.ModuleType("target_spy")
    plugin.loom_lower_passes = hookimpl(lambda target, phase: seen.append((target.kind_name, phase)))
    loom.plugins.register(plugin)
    try:
        build(add_one(), target="fakecpu")
    finally:
        loom.plugins.unregister(plugin)
    assert seen == [("fakecpu", p) for p in range(4)]


def test_unknown_target_kind_lists_the_installed_ones(fake_backend, add_one):
    with pytest.raises(TargetError, match="unknown target kind 'nonesuch'.*fakecpu"):
        build(add_one(), target="nonesuch")


def test_a_kind_without_a_backend_is_a_clear_error(fake_pipeline, fake_backend, add_one):
    with pytest.raises(PluginError, match="no backend can build target kind 'nocodegen': plugin 'fake_backend' "
                                          "contributes the kind but no backend"):
        build(add_one(), target="nocodegen")


@pytest.fixture
def fake_split(monkeypatch):
    """SplitHostDevice stand-in: each function f becomes a host f plus a device f_kernel0."""

    @module_pass(name="SplitHostDevice")
    def split(mod, ctx):
        out = {}
        for name, f in mod.functions.items():
            device = f.attrs["target"]
            out[name] = f.with_attr("target", device.host)
            out[f"{name}_kernel0"] = f.with_attr("target", device).with_attr("calling_conv", "device_kernel")
        return mod.with_(functions=out)

    rest = pipeline.DEVICE_BUILD[1:]  # the fake_pipeline recorders when that fixture comes first
    monkeypatch.setattr(pipeline, "DEVICE_BUILD", [("SplitHostDevice", lambda: split), *rest])


def test_device_target_is_split_and_the_host_imports_the_kernels(fake_pipeline, fake_split, fake_backend, add_one):
    host = build(add_one(), target="fakegpu", target_host="fakecpu")
    assert host.target.kind_name == "fakecpu"
    assert list(host.mod.functions) == ["add_one"]
    [dev] = host.imported_modules
    assert dev.target.kind_name == "fakegpu" and dev.target.host.kind_name == "fakecpu"
    assert list(dev.mod.functions) == ["add_one_kernel0"]
    # After the split: barriers, then intrinsic lowering (the recorder runs once per function).
    assert fake_pipeline[-4:] == ["ThreadSync", "ThreadSync", "LowerIntrin", "LowerIntrin"]


def test_heterogeneous_dict_input(fake_pipeline, fake_split, fake_backend, add_one):
    host = build({"fakecpu": add_one("cpu_part"), "fakegpu": add_one("gpu_part")})
    assert host.target.kind_name == "fakecpu"
    assert sorted(host.mod.functions) == ["cpu_part", "gpu_part"]
    [dev] = host.imported_modules
    assert list(dev.mod.functions) == ["gpu_part_kernel0"]
    for f in host.mod.functions.values():
        assert f.attrs["target"].kind_name == "fakecpu"


def test_dict_and_target_together_is_an_error(fake_backend, add_one):
    with pytest.raises(LoomTypeError, match="not both"):
        build({"fakecpu": add_one()}, target="fakecpu")


def test_clashing_function_names_are_an_error(fake_pipeline, fake_split, fake_backend, add_one):
    """The device input's host half would replace the CPU input's function of the same name."""
    with pytest.raises(LoomValueError, match=r"\['same'\] of the input for fakegpu are already defined by the "
                                             r"input for fakecpu"):
        build({"fakecpu": add_one("same"), "fakegpu": add_one("same")})


def test_dump_pass_ir_numbers_every_pass_and_stage_of_a_build(fake_pipeline, fake_backend, add_one, tmp_path):
    with loom.driver.build_config(dump_pass_ir=True, dump_pass_ir_dir=str(tmp_path)):
        build(add_one(), target="fakecpu")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 17 and names[0] == "00_StorageFlatten.txt" and names[12] == "12_LowerIntrin.txt"
    # Then every backend stage's output: options, rendered source, compiled artifact, loaded module's metadata.
    assert names[13:] == ["13_fakecpu.options.json", "14_fakecpu.render.json", "15_fakecpu.compile.bin",
                          "16_fakecpu.load.json"]
    assert (tmp_path / names[14]).read_text() == (tmp_path / names[15]).read_text()  # this fake compiles to its text
    assert "add_one" in (tmp_path / names[16]).read_text()


def test_loom_dump_dir_writes_passes_and_stages(fake_pipeline, fake_backend, add_one, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_DUMP_DIR", str(tmp_path / "dump"))
    build(add_one(), target="fakecpu")
    names = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert names[0] == "00_StorageFlatten.txt" and names[-1] == "16_fakecpu.load.json"


def test_without_any_target_the_default_host_is_used(fake_pipeline, fake_backend, add_one, monkeypatch):
    build_module = importlib.import_module("loom.driver.build")  # the attribute loom.driver.build is the function
    monkeypatch.setattr(build_module, "_default_host", lambda: Target("fakecpu"))
    assert build(add_one()).target.kind_name == "fakecpu"


def test_a_schedule_needs_args(fake_backend):
    from loom.te.operation import compute, placeholder
    from loom.te.schedule import create_schedule

    A = placeholder((4,), "float32", name="A")
    B = compute((4,), lambda i: A[i], name="B")
    with pytest.raises(loom.LoomValueError, match="needs args"):
        build(create_schedule(B.op), target="fakecpu")


def test_plugin_passes_run_before_or_after_the_built_in_passes(fake_pipeline, fake_backend, add_one):
    import types

    from loom.plugins import hookimpl
    from loom.transform import PassInfo, PrimFuncPass

    def recording_pass(name, log):
        return PrimFuncPass(lambda func, mod, ctx: log.append(name) or func, PassInfo(name))

    def passes(target, phase):
        if phase == 1:
            return {"before": [recording_pass("PluginBefore1", fake_pipeline)],
                    "after": [recording_pass("PluginAfter1", fake_pipeline)]}
        if phase == 3:
            return [recording_pass("PluginAfter3", fake_pipeline)]  # a plain list runs after
        return None

    plugin = types.ModuleType("placed_passes")
    plugin.loom_lower_passes = hookimpl(passes)
    loom.plugins.register(plugin)
    try:
        with loom.driver.build_config(add_lower_pass=[(1, recording_pass("User1", fake_pipeline))]):
            build(add_one(), target="fakecpu")
    finally:
        loom.plugins.unregister(plugin)
    assert fake_pipeline[:5] == ["PluginBefore1", "StorageFlatten", "CanonicalSimplify", "PluginAfter1", "User1"]
    assert fake_pipeline[-4:] == ["RewriteUnsafeSelect", "PluginAfter3", "MakeAPI", "LowerIntrin"]


@pytest.mark.parametrize("answer,match", [
    ({"during": []}, r"returned places \['during'\]; expected 'before' and/or 'after'"),
    (42, "returned a int; expected a list of passes, a dict"),
    ({"before": 3}, "'before' must be a list of passes, got int"),
])
def test_malformed_plugin_passes_name_the_plugin(fake_pipeline, fake_backend, add_one, answer, match):
    import types

    from loom.plugins import hookimpl

    plugin = types.ModuleType("bad_passes")
    plugin.loom_lower_passes = hookimpl(lambda target, phase: answer)
    loom.plugins.register(plugin)
    try:
        with pytest.raises(PluginError, match=f"plugin 'bad_passes': loom_lower_passes\\(phase=0\\):? {match}"):
            build(add_one(), target="fakecpu")
    finally:
        loom.plugins.unregister(plugin)
