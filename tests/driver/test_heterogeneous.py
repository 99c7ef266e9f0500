"""Heterogeneous builds: stages placed with on_device, planned through CompilationConfig (seed 004).

Every program runs on the test device ``ext_dev`` and the CPU; results are
compared with numpy and the ext_dev device API's counters say which copies ran.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom
import loom.testing.ext_dev as ext_dev
from loom.driver.device_plan import PlacementError, plan_devices, resolve_config
from loom.target import CompilationConfig, VirtualDevice
from loom.testing.conformance.harness import bind_root

N = 64


@pytest.fixture(autouse=True)
def ext() -> object:
    name = loom.plugins.register(ext_dev)
    ext_dev.device_api().reset_counters()
    yield ext_dev.device_api()
    loom.plugins.unregister(name)


def chain(place_b: object = "ext_dev", n: object = N) -> tuple[object, ...]:
    """A -> B = A + 1 (bound, on ``place_b``) -> C = 3 B -> D = C - B."""
    A = loom.placeholder((n,), "float32", name="A")
    B = loom.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = loom.compute((n,), lambda i: B[i] * 3.0, name="C")
    D = loom.compute((n,), lambda i: C[i] - B[i], name="D")
    s = loom.create_schedule(D.op)
    bind_root(s, B)
    if place_b is not None:
        s[B].on_device(place_b)
    return s, A, B, C, D


def counts(api: object) -> dict[str, int]:
    return {k: v for k, v in api.counters.items() if not k.startswith("bytes")}


def test_a_tensor_read_by_two_cpu_stages_is_copied_once(ext: object) -> None:
    s, A, B, C, D = chain()
    f = loom.build(s, [A, D], target=["llvm", "ext_dev"])
    a, d = np.arange(N, dtype="float32"), np.zeros(N, "float32")
    f(a, d)
    np.testing.assert_allclose(d, 2 * (a + 1))
    assert counts(ext) == {"alloc": 2, "free": 2, "to_device": 1, "to_host": 1}


def test_inputs_placed_on_the_device_are_passed_as_device_arrays(ext: object) -> None:
    s, A, B, C, D = chain()
    s[A].on_device(loom.device("ext_dev"))
    f = loom.build(s, [A, D], target=["llvm", "ext_dev"])
    a, d = np.arange(N, dtype="float32"), np.zeros(N, "float32")
    with pytest.raises(loom.LoomError, match=r"argument 0 \(A.*must be on ext_dev"):
        f(a, d)
    on_dev = loom.nd.array(a, loom.device("ext_dev"))
    ext.reset_counters()
    f(on_dev, d)
    np.testing.assert_allclose(d, 2 * (a + 1))
    assert counts(ext) == {"alloc": 1, "free": 1, "to_host": 1}  # A stays where it is; only B comes home


@pytest.mark.parametrize("host", ["llvm", "c", "interp"])
def test_every_host_backend_runs_the_plan(host: str, ext: object) -> None:
    s, A, B, C, D = chain()
    f = loom.build(s, [A, D], target=[host, "ext_dev"])
    assert f.type_key == host and [m.type_key for m in f.imported_modules] == ["ext_dev"]
    a, d = np.arange(N, dtype="float32"), np.zeros(N, "float32")
    f(a, d)
    np.testing.assert_allclose(d, 2 * (a + 1))


def test_symbolic_shapes_copy_the_bound_size(ext: object) -> None:
    n = loom.var("n")
    s, A, B, C, D = chain(n=n)
    f = loom.build(s, [A, D], target=["llvm", "ext_dev"])
    for size in (5, 100):
        a, d = np.arange(size, dtype="float32"), np.zeros(size, "float32")
        ext.reset_counters()
        f(a, d)
        np.testing.assert_allclose(d, 2 * (a + 1))
        assert ext.counters["bytes_to_device"] == ext.counters["bytes_to_host"] == 4 * size


def test_unplaced_stages_go_to_the_default_primitive_device(ext: object) -> None:
    s, A, B, C, D = chain(place_b=None)
    f = loom.build(s, [A, D], target=["llvm", "ext_dev"])  # default: the first target's device, the CPU
    a, d = np.arange(N, dtype="float32"), np.zeros(N, "float32")
    f(a, d)
    np.testing.assert_allclose(d, 2 * (a + 1))
    assert counts(ext) == {}
    # The pass context's fallback device type moves every unplaced stage to ext_dev.
    s, A, B, C, D = chain(place_b=None)
    for t in (C, D):
        bind_root(s, t)
    cfg = CompilationConfig({"loom.fallback_device_type": "ext_dev"}, ["llvm", "ext_dev"])
    plan = plan_devices(s, cfg)
    assert all(plan.stage(t.op) is cfg.default_primitive_virtual_device for t in (B, C, D))
    assert plan.stage(A.op) is cfg.host_virtual_device
    f = loom.build(s, [A, D], target=cfg)
    ext.reset_counters()
    f(a, d)
    np.testing.assert_allclose(d, 2 * (a + 1))
    assert counts(ext) == {"alloc": 4, "free": 4, "to_device": 1, "to_host": 1}  # A and D copied, B and C made


def test_targets_and_devices_come_back_canonical(ext: object) -> None:
    cfg = CompilationConfig(None, ["llvm", "ext_dev"])
    s, A, B, C, D = chain(place_b=cfg.primitive_targets[1])
    s[C].on_device(VirtualDevice("cpu", 0))
    plan = plan_devices(s, cfg)
    assert plan.stage(B.op) is cfg.canonical_virtual_device(VirtualDevice(target=cfg.primitive_targets[1]))
    assert plan.stage(C.op) is cfg.canonical_virtual_device(VirtualDevice("cpu", 0))
    assert plan.stage(B.op).target is cfg.primitive_targets[1]
    assert plan.stage(C.op).target is cfg.primitive_targets[0] or plan.stage(C.op).target is cfg.host_target
    from loom.driver.lower import lower_with_target

    mod = lower_with_target(s, [A, D], "f", None, False, cfg.host_target, plan)
    assert mod["f_B"].attrs["target"] is cfg.primitive_targets[1]
    assert mod["f_B"].attrs["loom.virtual_device"] is plan.stage(B.op)


@pytest.mark.parametrize("targets", [["llvm", "ext_dev"], {"cpu": "llvm", "ext_dev": "ext_dev"},
                                     {"llvm": "llvm", "ext_dev": "ext_dev"}])
def test_target_lists_and_dicts(targets: object, ext: object) -> None:
    s, A, B, C, D = chain()
    f = loom.build(s, [A, D], target=targets)
    a, d = np.arange(N, dtype="float32"), np.zeros(N, "float32")
    f(a, d)
    np.testing.assert_allclose(d, 2 * (a + 1))


def test_lower_prints_the_plan() -> None:
    s, A, B, C, D = chain()
    text = str(loom.lower(s, [A, D], name="f"))
    plan = [line.strip("# ") for line in text.splitlines() if line.startswith("#   ")]
    assert plan == ["copy A: cpu(0) -> ext_dev(0)", "f_B: ext_dev(0) [ext_dev]", "copy B: ext_dev(0) -> cpu(0)",
                    "f_C: cpu(0) [llvm]", "f_D: cpu(0) [llvm]"]
    assert "def f_B(B: handle, A: handle)" in text and "@loom.device_copy(" in text


def test_the_lowered_module_builds_as_it_is() -> None:
    s, A, B, C, D = chain()
    f = loom.build(loom.lower(s, [A, D], name="f"))
    assert (f.type_key, f.entry_name, [m.type_key for m in f.imported_modules]) == ("llvm", "f", ["ext_dev"])
    a, d = np.arange(N, dtype="float32"), np.zeros(N, "float32")
    f(a, d)
    np.testing.assert_allclose(d, 2 * (a + 1))


# -- impossible placements -------------------------------------------------------------------------


def test_a_stage_attached_into_a_stage_on_another_device() -> None:
    s, A, B, C, D = chain(place_b=None)
    s = loom.create_schedule(D.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].on_device("ext_dev")
    with pytest.raises(PlacementError, match=r"stage B is placed on ext_dev\(0\) \[ext_dev\] but computed inside "
                                             r"stage C, which runs on cpu\(0\) \[llvm\]"):
        loom.build(s, [A, D], target=["llvm", "ext_dev"])


def test_a_stage_inlined_into_a_stage_on_another_device() -> None:
    s, A, B, C, D = chain(place_b=None)
    s = loom.create_schedule(D.op)
    s[C].compute_inline()
    s[C].on_device("ext_dev")
    with pytest.raises(PlacementError, match=r"stage C is placed on ext_dev\(0\) \[ext_dev\] but inlined into "
                                             r"stage D, which runs on cpu\(0\) \[llvm\]"):
        loom.build(s, [A, D], target=["llvm", "ext_dev"])


def test_a_device_without_a_target_in_the_config() -> None:
    s, A, B, C, D = chain()
    with pytest.raises(PlacementError, match=r"stage B is placed on ext_dev, which is not a target of this build "
                                             r"\(targets: llvm\)"):
        loom.build(s, [A, D], target="llvm")
    s, A, B, C, D = chain(place_b=loom.cuda(0))
    with pytest.raises(PlacementError, match=r"stage B is placed on cuda\(0\).*no primitive target for device "
                                             r"type cuda"):
        loom.build(s, [A, D], target=["llvm", "ext_dev"])


def test_a_placeholder_on_two_devices() -> None:
    s, A, B, C, D = chain()
    s[A].on_device("ext_dev")
    s[A].on_device("llvm")
    with pytest.raises(PlacementError, match=r"placeholder A is placed on ext_dev\(0\) \[ext_dev\] and on "
                                             r"cpu\(0\) \[llvm\]"):
        loom.build(s, [A, D], target=["llvm", "ext_dev"])


def test_bad_placements_and_targets() -> None:
    s, A, B, C, D = chain(place_b=None)
    with pytest.raises(loom.LoomError, match="on_device on B: expected a VirtualDevice"):
        s[B].on_device(3)
    with pytest.raises(loom.LoomError, match="key each target by its kind"):
        resolve_config(s, {"gpu": "llvm"}, None)


def test_a_device_stage_whose_loops_are_not_bound_is_refused() -> None:
    A = loom.placeholder((N,), "float32", name="A")
    B = loom.compute((N,), lambda i: A[i] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    s[B].on_device("ext_dev")
    with pytest.raises(loom.LoomError, match="host code stores to B.*bind the loops"):
        loom.build(s, [A, B], target=["llvm", "ext_dev"])


def test_a_hybrid_stage_that_writes_part_of_its_output_keeps_the_rest(ext: object) -> None:
    @loom.hybrid.script
    def first_half(a):  # type: ignore[no-untyped-def]
        out = output_tensor((N,), "float32")  # type: ignore[name-defined]  # noqa: F821
        for t in bind("threadIdx.x", N // 2):  # type: ignore[name-defined]  # noqa: F821
            out[t] = a[t] * 2.0
        return out

    A = loom.placeholder((N,), "float32", name="A")
    H = first_half(A)
    s = loom.create_schedule(H.op)
    s[H].on_device("ext_dev")
    f = loom.build(s, [A, H], target=["llvm", "ext_dev"])
    a, h = np.arange(N, dtype="float32"), np.full(N, -7.0, "float32")
    f(a, h)
    np.testing.assert_array_equal(h, np.concatenate([a[:N // 2] * 2, np.full(N // 2, -7.0, "float32")]))
    # Unlike a compute stage, a hybrid one may leave elements alone: its output's value goes to the device first.
    assert counts(ext) == {"alloc": 2, "free": 2, "to_device": 2, "to_host": 1}


def test_a_targets_plugin_passes_check_only_its_own_stages(ext: object) -> None:
    """ext_dev's VerifyDeviceLimits (1024 threads per block) sees the ext_dev stage, not the CPU one."""
    A = loom.placeholder((2048,), "float32", name="A")
    B = loom.compute((2048,), lambda i: A[i] + 1.0, name="B")
    C = loom.compute((2048,), lambda i: B[i] * 2.0, name="C")
    s = loom.create_schedule(C.op)
    s[C].bind(C.op.axis[0], loom.thread_axis("threadIdx.x"))  # 2048 threads: fine on the CPU, which runs them serially
    bind_root(s, B)
    s[B].on_device("ext_dev")
    f = loom.build(s, [A, C], target=["llvm", "ext_dev"])
    a, c = np.arange(2048, dtype="float32"), np.zeros(2048, "float32")
    f(a, c)
    np.testing.assert_allclose(c, 2 * (a + 1))
    s = loom.create_schedule(C.op)
    s[C].bind(C.op.axis[0], loom.thread_axis("threadIdx.x"))
    s[C].on_device("ext_dev")
    with pytest.raises(loom.LoomError, match="a block of 2048 threads .* exceeds the device's 1024"):
        loom.build(s, [A, C], target=["llvm", "ext_dev"])


def _twice_plus(p: object, o: object) -> object:
    return lambda i: p[i] * 2.0 + o[i]


def test_elementwise_chain_across_devices_keeps_a_buffer_per_home(ext: object) -> None:
    """T1 = f(T0) on ext_dev is elementwise, and T0 dies there: still T1 gets memory of its own,
    since T0 lives on the CPU (StorageRewrite shares memory only between buffers of one home)."""
    A = loom.placeholder((N,), "float32", name="A")
    T0 = loom.compute((N,), lambda i: A[i] * 3.0, name="T0")
    T1 = loom.compute((N,), lambda i: T0[i] * 2.0 + 1.0, name="T1")
    T2 = loom.compute((N,), lambda i: T1[i] - A[i], name="T2")
    s = loom.create_schedule(T2.op)
    bind_root(s, T1)
    s[T1].on_device("ext_dev")
    f = loom.build(s, [A, T2], target=["llvm", "ext_dev"])
    a, out = np.arange(N, dtype="float32"), np.zeros(N, "float32")
    f(a, out)
    np.testing.assert_allclose(out, a * 6.0 + 1.0 - a)


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10)), min_size=1, max_size=5))
def test_random_placements_copy_exactly_what_a_reader_lacks(ext: object, stages: list[tuple[bool, int]]) -> None:
    """Stage k computes T[k] = 2 T[k-1] + T[j] (j < k) on ext_dev or the CPU; the copies are those a tensor-level
    simulation needs: a stage reading a value its device lacks, and the output when it ends away from home."""
    A = loom.placeholder((N,), "float32", name="A")
    tensors, values = [A], [np.arange(N, dtype="float32")]
    for k, (_, pick) in enumerate(stages):
        prev, other = tensors[-1], tensors[pick % len(tensors)]
        tensors.append(loom.compute((N,), _twice_plus(prev, other), name=f"T{k}"))
        values.append(values[-1] * 2 + values[pick % len(values)])
    s = loom.create_schedule(tensors[-1].op)
    valid: dict[int, set[str]] = {0: {"cpu"}}
    want = {"to_device": 0, "to_host": 0}
    for k, (on_dev, pick) in enumerate(stages, start=1):
        where = "ext_dev" if on_dev else "cpu"
        if on_dev:
            bind_root(s, tensors[k])
            s[tensors[k]].on_device("ext_dev")
        for j in {k - 1, pick % k}:
            if where not in valid[j]:
                valid[j].add(where)
                want["to_device" if on_dev else "to_host"] += 1
        valid[k] = {where}
    if "cpu" not in valid[len(stages)]:
        want["to_host"] += 1
    f = loom.build(s, [A, tensors[-1]], target=["llvm", "ext_dev"])
    out = np.zeros(N, "float32")
    ext.reset_counters()
    f(values[0], out)
    np.testing.assert_allclose(out, values[-1], rtol=1e-5)
    assert {k: ext.counters[k] for k in want} == want
    assert ext.counters["alloc"] == ext.counters["free"]


@pytest.mark.parametrize("host", ["llvm", "c", "interp"])
def test_a_failing_stage_frees_every_device_buffer(host: str, ext: object) -> None:
    A = loom.placeholder((N,), "int32", name="A")
    B = loom.compute((N,), lambda i: A[i] + 1, name="B")
    C = loom.compute((N,), lambda i: 100 // (B[i] - 5), name="C")  # B[i] == 5 divides by zero
    s = loom.create_schedule(C.op)
    bind_root(s, B)
    s[B].on_device("ext_dev")
    f = loom.build(s, [A, C], target=[host, "ext_dev"])
    with pytest.raises(loom.testing.DivisionByZero):
        f(np.arange(N, dtype="int32"), np.zeros(N, "int32"))
    assert ext.counters["alloc"] == ext.counters["free"] == 2
