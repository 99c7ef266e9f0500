"""Config spaces, knobs and configs (loom.tune.space, loom.tune.knobs): AutoTVM's meanings."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import loom
from loom.tune import (AnnotateEntity, ConfigError, ConfigSpace, FallbackConfig, OtherOptionEntity, ReorderEntity,
                       SplitEntity)
from loom.tune.knobs import SplitKnob


def test_split_factors_policy_lists_every_divisor_split():
    knob = SplitKnob.make(12, num_outputs=3)
    sizes = [e.size for e in knob.entities]
    assert all(s[0] == -1 and 12 % math.prod(s[1:]) == 0 for s in sizes)
    assert [-1, 2, 3] in sizes and [-1, 3, 2] in sizes and [-1, 12, 1] in sizes
    assert len(sizes) == len(set(map(tuple, sizes))) == 18  # ordered pairs (a, b) with a * b dividing 12


def test_split_policies_and_limits():
    assert [e.size for e in SplitKnob.make(10, policy="power2").entities] == [[-1, 1], [-1, 2], [-1, 4], [-1, 8]]
    verbose = {tuple(e.size) for e in SplitKnob.make(12, policy="verbose").entities}
    assert (-1, 3) in verbose and (-1, 8) in verbose
    assert max(e.size[1] for e in SplitKnob.make(64, max_factor=8).entities) == 8
    with pytest.raises(loom.LoomError, match="unknown policy"):
        SplitKnob.make(8, policy="fibonacci")
    with pytest.raises(loom.LoomError, match="num_outputs"):
        SplitKnob.make(8, num_outputs=1)
    with pytest.raises(loom.LoomError, match="no candidates"):
        SplitKnob.make(8, filter=lambda e: False)


def test_define_split_takes_an_itervar_or_a_length():
    A = loom.placeholder((24, 10), name="A")
    B = loom.compute((24, 10), lambda i, j: A[i, j] + 1.0, name="B")
    space = ConfigSpace()
    space.define_split("y", B.op.axis[0], num_outputs=2)
    space.define_split("x", 10)
    assert len(space.space_map["y"]) == 8 and len(space.space_map["x"]) == 4
    s = loom.create_schedule(B.op)
    yo, yi = s[B].split(B.op.axis[0], factor=4)
    with pytest.raises(loom.LoomError, match="constant length"):
        space.define_split("z", yi)
    with pytest.raises(loom.LoomError, match="defined twice"):
        space.define_split("y", 24)


def test_entities_apply_to_a_schedule_and_compute_the_same():
    n = 48
    A = loom.placeholder((n, n), name="A")
    B = loom.compute((n, n), lambda i, j: A[i, j] * 3.0 + 1.0, name="B")
    s = loom.create_schedule(B.op)
    y, x = B.op.axis
    yo, ym, yi = SplitEntity([-1, 4, 2]).apply(s, B, y)
    xo, xi = SplitEntity([-1, 8]).apply(s, B, x)
    order = ReorderEntity([0, 3, 1, 2, 4]).apply(s, B, [yo, ym, yi, xo, xi])
    assert order == [yo, xo, ym, yi, xi]
    AnnotateEntity(["none", "unroll", "vec"]).apply(s, B, [ym, yi, xi])
    f = loom.build(s, [A, B], target="llvm")
    a = np.random.default_rng(0).standard_normal((n, n)).astype("float32")
    b = np.empty_like(a)
    f(a, b)
    np.testing.assert_allclose(b, a * 3 + 1, rtol=1e-5, atol=1e-6)
    text = str(loom.lower(s, [A, B]))
    assert "ramp(" in text and "* 2 + 1," in text  # the 8-lane vector; yi unrolled (its second copy)


def test_annotate_guards_skip_long_unrolls_and_odd_vectors():
    A = loom.placeholder((64,), name="A")
    B = loom.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=8)
    AnnotateEntity(["unroll", "vec"]).apply(s, B, [o, i], axis_lens=[8, 8], max_unroll=4, vec_size=[4, 16])
    text = str(loom.lower(s, [A, B]))
    assert "ramp(" not in text and "for " in text


def test_reorder_and_annotate_policies():
    space = ConfigSpace()
    space.define_reorder("all", [0, 1, 2], policy="all")
    space.define_reorder("mid", [0, 1, 2, 3], policy="interval_all", interval=(1, 3))
    space.define_reorder("cand", [0, 1, 2], policy="candidate", candidate=[[2, 1, 0], [0, 1, 2]])
    space.define_annotate("u", [0, 1], policy="try_unroll")
    space.define_annotate("uv", [0, 1], policy="try_unroll_vec")
    space.define_annotate("v", [0, 1], policy="try_vec")
    assert [len(space.space_map[k]) for k in ("all", "mid", "cand", "u", "uv", "v")] == [6, 2, 4 // 2, 4, 6, 2]
    assert [e.perm for e in space.space_map["mid"].entities] == [[0, 1, 2, 3], [0, 2, 1, 3]]
    with pytest.raises(loom.LoomError, match="not a permutation"):
        space.define_reorder("bad", [0, 1], policy="candidate", candidate=[[0, 0]])
    with pytest.raises(loom.LoomError, match="unknown annotation"):
        AnnotateEntity(["parallel"])


def test_define_knob_values_must_be_json():
    space = ConfigSpace()
    space.define_knob("unroll", [0, 16, 64])
    with pytest.raises(loom.LoomError, match="not a JSON value"):
        space.define_knob("obj", [object()])
    with pytest.raises(loom.LoomError, match="non-empty str"):
        space.define_knob("", [1])


def _space() -> ConfigSpace:
    space = ConfigSpace()
    space.define_split("tile", 32, num_outputs=3)
    space.define_knob("unroll", [False, True])
    space.define_reorder("order", [0, 1, 2])
    space.define_annotate("ann", [0, 1], policy="try_unroll_vec")
    return space


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_index_is_mixed_radix_and_json_round_trips(data):
    space = _space()
    index = data.draw(st.integers(0, len(space) - 1))
    picks = space.indices(index)
    assert space.index_of(picks) == index
    assert picks[0] == index % len(space.space_map["tile"])  # the first knob varies fastest (AutoTVM)
    cfg = space.get(index)
    back = space.from_json(cfg.to_json())
    assert back.index == index and back.to_json() == cfg.to_json()
    assert back == cfg and hash(back) == hash(cfg) and cfg in space and cfg.to_json() in space
    assert len(space.features(index)) == len(space.features(0))


def test_from_json_refuses_configs_of_another_space():
    space = _space()
    cfg = space.get(7).to_json()
    with pytest.raises(ConfigError, match="knobs"):
        space.from_json({"index": 7, "knobs": {"tile": [-1, 1, 1]}})
    bad = dict(cfg, knobs=dict(cfg["knobs"], unroll="yes"))
    with pytest.raises(ConfigError, match="not in the space"):
        space.from_json(bad)
    with pytest.raises(ConfigError, match="outside the space"):
        space.get(len(space))
    assert bad not in space and 42 not in space


def test_a_config_rejects_a_template_that_declares_another_space():
    space = _space()
    cfg = space.get(3)
    cfg.define_split("tile", 32, num_outputs=3)
    with pytest.raises(ConfigError, match="differently"):
        cfg.define_knob("unroll", [True, False])
    assert cfg["unroll"] == OtherOptionEntity(False)
    with pytest.raises(loom.LoomError, match="no knob named"):
        cfg["missing"]


def test_fallback_config_takes_defaults_and_assignments():
    cfg = FallbackConfig()
    assert cfg.is_fallback
    cfg.define_split("tile", 64)
    cfg.define_knob("unroll", [False, True])
    assert cfg["tile"].size == [-1, 1]
    cfg["tile"] = SplitEntity([-1, 16])
    assert cfg["tile"].size == [-1, 16] and cfg.to_json()["knobs"] == {"tile": [-1, 16], "unroll": False}
    with pytest.raises(loom.LoomError, match="assign a SplitEntity"):
        cfg["tile"] = 16


def test_neighbour_changes_exactly_one_knob():
    space = _space()
    rng = np.random.default_rng(1)
    for index in range(0, len(space), 97):
        other = space.neighbour(index, rng)
        assert sum(a != b for a, b in zip(space.indices(index), space.indices(other))) == 1
