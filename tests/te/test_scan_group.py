"""A scan's update is a stage group from the start (TVM's scan group), and groups constrain compute_at."""

import numpy as np
import pytest

import loom
from loom.errors import LoomValueError


def _three_step_scan():
    m, n = 6, 5
    x = loom.compute((m, n), lambda i, j: loom.const(1, "float32") + i, name="x")
    state = loom.placeholder((m, n), name="state")
    init = loom.compute((1, n), lambda _, i: x[0, i], name="init")
    u1 = loom.compute((m, n), lambda t, i: state[t - 1, i] + x[t, i], name="u1")
    u2 = loom.compute((m, n), lambda t, i: u1[t, i] + 1.0, name="u2")
    u3 = loom.compute((m, n), lambda t, i: u2[t, i] + 1.0, name="u3")
    res = loom.scan(init, u3, state, inputs=x, name="res")
    return x, init, u1, u2, u3, res


def _expected():
    x = 1.0 + np.arange(6, dtype="float32")[:, None] * np.ones((1, 5), "float32")
    out = np.empty_like(x)
    out[0] = x[0]
    for t in range(1, 6):
        out[t] = out[t - 1] + x[t] + 2.0
    return out


def _check(s, res, kind="llvm"):
    out = np.zeros((6, 5), "float32")
    loom.build(s, [res], kind)(out)
    np.testing.assert_allclose(out, _expected())


def test_the_update_stages_share_one_group_placed_in_the_scan():
    x, init, u1, u2, u3, res = _three_step_scan()
    s = loom.create_schedule(res.op)
    g = s[u1].group
    assert g is not None and s[u2].group is g and s[u3].group is g
    assert s[x].group is None and s[init].group is None and s[res].group is None
    assert g.attach_type == "scan_update" and g.attach_stage is s[res] and g.num_child_stages == 3
    assert g in s.groups


def test_nested_group_inside_the_scan_group_and_the_tvm_test_scan_group_sequence():
    x, init, u1, u2, u3, res = _three_step_scan()
    s = loom.create_schedule(res.op)
    s[u1].compute_at(s[u2], u2.op.axis[1])  # inside the group: fine
    g2 = s.create_group(outputs=u2, inputs=[res.op.state_placeholder[0], x])
    assert g2.group is s[u3].group and s[u2].group is g2 and s[u1].group is g2
    g2.compute_at(s[u3], u3.op.axis[1])
    assert g2.attach_stage is s[u3] and s[u2].attach_stage is s[u3]
    with pytest.raises(LoomValueError, match="u2 is a step of scan res .* outside the scan's loop"):
        s[u2].compute_at(s[init], init.op.axis[0])
    _check(s, res)


def test_the_scan_group_itself_cannot_move_and_its_stages_may_sit_at_the_scan_axis():
    x, init, u1, u2, u3, res = _three_step_scan()
    s = loom.create_schedule(res.op)
    g = s[u1].group
    with pytest.raises(LoomValueError, match="update of scan res"):
        g.compute_at(s[x], x.op.axis[0])
    with pytest.raises(LoomValueError, match="update of scan res"):
        g.compute_root()
    s[u2].compute_at(s[res], res.op.scan_axis)  # where the step runs anyway
    s[u2].compute_root()  # back to following the group: still inside the loop
    assert s[u2].attach_type == "root"
    for kind in ("interp", "llvm"):
        _check(s, res, kind)


def test_a_member_of_a_plain_group_stays_inside_it():
    A = loom.placeholder((8,), name="A")
    x = loom.compute((8,), lambda i: A[i] + 1.0, name="x")
    x1 = loom.compute((8,), lambda i: x[i] * 2.0, name="x1")
    x2 = loom.compute((8,), lambda i: x1[i] - 1.0, name="x2")
    x3 = loom.compute((8,), lambda i: x2[i] + x[i], name="x3")
    s = loom.create_schedule(x3.op)
    g = s.create_group(outputs=x1, inputs=A)
    with pytest.raises(LoomValueError, match=r"x belongs to group\(.*\); it can only be computed inside"):
        s[x].compute_at(s[x2], x2.op.axis[0])
    s[x].compute_at(s[x1], x1.op.axis[0])
    inner = s.create_group(outputs=x1, inputs=x)  # nested: its compute_at stays inside g too
    with pytest.raises(LoomValueError, match="belongs to group"):
        inner.compute_at(s[x3], x3.op.axis[0])
    assert inner.group is g


def test_cache_stages_join_the_group_of_what_they_copy():
    x, init, u1, u2, u3, res = _three_step_scan()
    s = loom.create_schedule(res.op)
    u2c = s.cache_write(u2, "local")
    u1c = s.cache_read(u1, "local", [u2c])
    assert s[u2c].group is s[u2].group and s[u1c].group is s[u1].group
    _check(s, res)


def test_copies_and_saved_schedules_keep_their_own_groups():
    x, init, u1, u2, u3, res = _three_step_scan()
    s = loom.create_schedule(res.op)
    c = s.normalize()
    assert c[u1].group is not s[u1].group and c[u1].group.schedule is c
    assert c[u1].group.attach_stage is c[res] and c[u1].group is c[u3].group
    s2 = loom.load_json(loom.save_json(s))
    [g] = s2.groups
    assert g.attach_type == "scan_update" and g.num_child_stages == 3
    _check(s2, s2.outputs[0].output(0))
