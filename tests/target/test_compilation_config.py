"""CompilationConfig: host choice, primitive targets, canonical virtual devices, invariants."""

import itertools
import types

import pytest

import loom
from loom.errors import TargetError
from loom.target import (
    FALLBACK_DEVICE_TYPE_KEY, CompilationConfig, Target, TargetKind, VirtualDevice, override_kinds,
)

from target_kinds import C, CUDA, EXT_CPU, INTERP, LLVM


def check_invariants(cfg):
    """The invariants every configuration keeps, whatever it was built from."""
    host = cfg.host_target
    assert host.host is None
    assert all(t.host is host for t in cfg.primitive_targets)
    names = [t.kind_name for t in cfg.primitive_targets]
    assert len(set(names)) == len(names)
    hvd = cfg.host_virtual_device
    assert hvd.target is host and hvd.device_type == host.device_type and hvd.virtual_device_id == 0
    assert cfg.canonical_virtual_device(VirtualDevice(host.device_type, 0, Target(host))) is hvd
    dvd = cfg.default_primitive_virtual_device
    assert dvd.target is cfg.find_primitive_target_for_device_or_fail(dvd.device_type)
    assert cfg.canonical_virtual_device(VirtualDevice(dvd.device_type)) is dvd
    if len(cfg.primitive_targets) == 1:
        assert cfg.optional_homogeneous_target is cfg.primitive_targets[0]
    else:
        assert cfg.optional_homogeneous_target is None
    again = CompilationConfig(None, cfg.primitive_targets)
    assert all(a is b for a, b in zip(again.primitive_targets, cfg.primitive_targets))


def test_homogeneous_llvm():
    cfg = CompilationConfig(None, "llvm -mcpu=znver4")
    check_invariants(cfg)
    (prim,) = cfg.primitive_targets
    assert cfg.optional_homogeneous_target is prim
    assert prim is not cfg.host_target and prim.same_config(Target("llvm -mcpu=znver4", host=cfg.host_target))
    assert cfg.host_target.same_config("llvm -mcpu=znver4")
    assert cfg.default_primitive_virtual_device.target is prim
    assert cfg.default_primitive_virtual_device.device_type == 1
    assert cfg.default_primitive_virtual_device is not cfg.host_virtual_device


def test_heterogeneous_llvm_and_cuda():
    cfg = CompilationConfig(None, ["llvm", Target("cuda -arch=sm_90")])
    check_invariants(cfg)
    llvm, gpu = cfg.primitive_targets
    assert (llvm.kind_name, gpu.kind_name) == ("llvm", "cuda")
    assert gpu.attrs["arch"] == "sm_90" and gpu.host is cfg.host_target
    assert cfg.host_target.kind_name == "llvm" and cfg.optional_homogeneous_target is None
    assert cfg.find_primitive_target_for_device_or_fail("cuda") is gpu
    assert cfg.find_primitive_target_for_device_or_fail(1) is llvm
    assert cfg.find_primitive_target_for_kind("cuda") is gpu
    assert cfg.find_primitive_target_for_kind("c") is None
    assert cfg.default_primitive_virtual_device.target is llvm  # the first target's device type


def test_missing_device_is_a_clear_error():
    cfg = CompilationConfig(None, "llvm")
    with pytest.raises(TargetError, match=r"no primitive target for device type cuda \(2\); this configuration has: llvm \(cpu\)"):
        cfg.find_primitive_target_for_device_or_fail(2)
    with pytest.raises(TargetError, match="no primitive target for device type cuda"):
        cfg.canonical_virtual_device(VirtualDevice("cuda", 0))


@pytest.mark.parametrize("raw", [
    "llvm", ["cuda", "llvm -mcpu=x"], [Target("cuda", host="c -openmp")], ["cuda -arch=sm_80"],
    ["llvm", "ext_cpu -scale=2.5", "cuda", "ext_gpu"], {"kind": "c", "flags": "-O3 -g"},
])
def test_construction_is_idempotent(raw):
    cfg = CompilationConfig(None, raw)
    check_invariants(cfg)
    again = CompilationConfig(None, cfg.primitive_targets)
    assert loom.structural_equal(again, cfg)
    assert loom.structural_hash(again) == loom.structural_hash(cfg)
    ctx = {FALLBACK_DEVICE_TYPE_KEY: cfg.primitive_targets[-1].device_type}
    cfg2 = CompilationConfig(ctx, raw)
    assert loom.structural_equal(CompilationConfig(ctx, cfg2.primitive_targets), cfg2)


# -- host choice ------------------------------------------------------------------------


def test_explicit_host_wins_over_cpu_targets():
    cfg = CompilationConfig(None, ["llvm", Target("cuda", host="c")])
    assert cfg.host_target.kind_name == "c"
    assert all(t.host is cfg.host_target for t in cfg.primitive_targets)


def test_hosts_must_agree():
    cfg = CompilationConfig(None, [Target("llvm", host="c"), Target("cuda", host="c")])
    assert cfg.host_target.kind_name == "c"
    with pytest.raises(TargetError, match="the targets name different hosts"):
        CompilationConfig(None, [Target("llvm", host="c"), Target("cuda", host="llvm")])


def test_first_cpu_target_serves_as_host():
    cfg = CompilationConfig(None, ["cuda", "c -openmp", "ext_cpu"])
    assert cfg.host_target.same_config("c -openmp")
    assert cfg.default_primitive_virtual_device.device_type == 2  # cuda came first


@pytest.mark.parametrize("kinds, expected", [
    ((CUDA, C, INTERP, LLVM), "llvm"),
    ((CUDA, C, INTERP), "c"),
    ((CUDA, INTERP), "interp"),
    ((CUDA, EXT_CPU, TargetKind("zcpu", "cpu")), "zcpu"),  # any CPU kind, never an external codegen one
])
def test_default_host_choice(kinds, expected):
    with override_kinds(*kinds):
        cfg = CompilationConfig(None, "cuda")
        assert cfg.host_target.kind_name == expected and cfg.host_target.host is None
        assert [t.kind_name for t in cfg.primitive_targets] == ["cuda"]
        assert cfg.host_virtual_device.device_type == 1
        assert cfg.default_primitive_virtual_device.device_type == 2
        check_invariants(cfg)


def test_no_cpu_kind_installed():
    with override_kinds(CUDA, EXT_CPU), pytest.raises(TargetError) as err:
        CompilationConfig(None, "cuda")
    msg = str(err.value)
    assert "no CPU target kind is installed" in msg and "installed kinds: cuda, ext_cpu" in msg


# -- primitive target rules -------------------------------------------------------------


def test_primitive_targets_are_unique_by_kind():
    with pytest.raises(TargetError, match="two targets of kind 'cuda'"):
        CompilationConfig(None, ["llvm", "cuda -arch=sm_80", "cuda -arch=sm_90"])


def test_most_general_target_first():
    cfg = CompilationConfig(None, ["llvm", "ext_cpu", "cuda", "ext_gpu"])
    check_invariants(cfg)
    assert cfg.find_primitive_target_for_device_or_fail("cpu").kind_name == "llvm"
    assert cfg.find_primitive_target_for_device_or_fail("cuda").kind_name == "cuda"
    assert cfg.find_primitive_target_for_kind("ext_gpu").kind_name == "ext_gpu"


@pytest.mark.parametrize("raw, fragment", [
    (["ext_cpu", "llvm"], "external codegen target Target\\('ext_cpu'\\) is the first cpu target"),
    (["llvm", "cuda", "ext_gpu", "ext_cpu", "c"], "both compile for cpu and neither is external codegen"),
    (["ext_gpu"], "the most general cuda target \\(e.g. 'cuda'\\) must come before it"),
])
def test_most_general_first_violations(raw, fragment):
    with pytest.raises(TargetError, match=fragment):
        CompilationConfig(None, raw)


def test_raw_target_forms_and_errors():
    assert CompilationConfig(None, Target("llvm")).host_target.kind_name == "llvm"
    assert CompilationConfig(None, ({"kind": "cuda"},)).primitive_targets[0].kind_name == "cuda"
    with pytest.raises(TargetError, match="at least one target, got an empty list"):
        CompilationConfig(None, [])
    with pytest.raises(TargetError, match="at least one target, got None"):
        CompilationConfig(None, None)
    with pytest.raises(TargetError, match="unknown target kind 'rocm'"):
        CompilationConfig(None, ["llvm", "rocm"])


# -- fallback device type ---------------------------------------------------------------


@pytest.mark.parametrize("ctx", [
    types.SimpleNamespace(config={FALLBACK_DEVICE_TYPE_KEY: 2}),
    {FALLBACK_DEVICE_TYPE_KEY: "cuda"},
])
def test_fallback_device_type_from_pass_context(ctx):
    cfg = CompilationConfig(ctx, ["llvm", "cuda"])
    assert cfg.default_primitive_virtual_device.target is cfg.primitive_targets[1]
    check_invariants(cfg)


def test_fallback_device_type_errors():
    with pytest.raises(TargetError, match="no primitive target for device type cuda"):
        CompilationConfig({FALLBACK_DEVICE_TYPE_KEY: 2}, "llvm")
    with pytest.raises(TargetError, match="pass_ctx.config must be a mapping"):
        CompilationConfig(types.SimpleNamespace(config=[1]), "llvm")
    assert CompilationConfig(types.SimpleNamespace(), "llvm").default_primitive_virtual_device.device_type == 1


# -- canonical targets and virtual devices ----------------------------------------------


def test_canonical_target():
    cfg = CompilationConfig(None, ["llvm", "cuda"])
    llvm, gpu = cfg.primitive_targets
    assert cfg.canonical_target(Target("llvm")) is cfg.host_target  # no host: the host target
    assert cfg.canonical_target(Target("llvm", host="llvm")) is llvm
    assert cfg.canonical_target("cuda -host=llvm") is gpu
    other = Target("cuda -arch=sm_90")
    assert cfg.canonical_target(other) is other


def test_canonical_virtual_device_fills_target_from_device_type():
    cfg = CompilationConfig(None, ["llvm", "cuda"])
    vd = cfg.canonical_virtual_device(VirtualDevice("cuda", 1, memory_scope="global"))
    assert vd.target is cfg.primitive_targets[1]
    assert (vd.device_type, vd.virtual_device_id, vd.memory_scope) == (2, 1, "global")
    assert cfg.canonical_virtual_device(VirtualDevice.fully_unconstrained()).is_fully_unconstrained
    with pytest.raises(TargetError, match="expects a VirtualDevice"):
        cfg.canonical_virtual_device("cuda")


def _virtual_device_pool():
    targets = [None, lambda: Target("llvm"), lambda: Target("llvm", host="llvm"), lambda: Target("cuda", host="llvm"),
               lambda: Target("cuda"), lambda: Target("cuda -arch=sm_90", host="llvm")]
    pool = []
    for dt, vid, make, scope in itertools.product([None, "cpu", "cuda"], [None, 0, 1], targets, ["", "global"]):
        target = make() if make else None
        if dt is not None and target is not None and target.device_type != loom.target.device_type_of(dt):
            continue
        pool.append(VirtualDevice(dt, vid, target, scope))
    return pool


def test_canonical_virtual_devices_are_pointer_equal_iff_structurally_equal():
    cfg = CompilationConfig(None, ["llvm", "cuda"])
    pool = _virtual_device_pool()
    canon = [cfg.canonical_virtual_device(vd) for vd in pool + _virtual_device_pool()]
    for vd, c in zip(pool, canon):  # constrained fields are kept
        assert (c.device_type, c.virtual_device_id, c.memory_scope) == (vd.device_type, vd.virtual_device_id, vd.memory_scope)
        assert vd.target is None or c.target.same_config(vd.target)
    distinct = {id(c) for c in canon}
    assert len(distinct) < len(pool)  # structurally equal inputs met again came back as the same objects
    for a, b in itertools.combinations(canon, 2):
        assert (a is b) == loom.structural_equal(a, b)
    assert all(cfg.canonical_virtual_device(c) is c for c in canon)


def test_json_round_trip_keeps_the_invariants():
    cfg = CompilationConfig({FALLBACK_DEVICE_TYPE_KEY: "cuda"}, ["llvm -mattr=+avx2", "cuda -arch=sm_90"])
    back = loom.load_json(loom.save_json(cfg))
    assert isinstance(back, CompilationConfig) and loom.structural_equal(back, cfg)
    check_invariants(back)
    assert back.default_primitive_virtual_device.target is back.primitive_targets[1]


def test_field_form_checks_invariants():
    cfg = CompilationConfig(None, ["llvm", "cuda"])
    with pytest.raises(TargetError, match="optional_homogeneous_target must be the primitive target"):
        cfg.with_(optional_homogeneous_target=cfg.primitive_targets[0])
    with pytest.raises(TargetError, match="not both"):
        CompilationConfig(None, "llvm", host_target=cfg.host_target)
    with pytest.raises(TargetError, match="missing"):
        CompilationConfig(host_target=cfg.host_target)
    single = CompilationConfig(None, "llvm")
    assert loom.structural_equal(single.with_(host_virtual_device=single.host_virtual_device), single)


def test_repr_is_readable():
    text = repr(CompilationConfig(None, ["llvm", "cuda -arch=sm_90"]))
    assert "host_target=Target('llvm')" in text
    assert "primitive_targets=[Target('llvm -host=llvm'), Target('cuda -arch=sm_90 -host=llvm')]" in text
    assert "optional_homogeneous_target=None" in text
