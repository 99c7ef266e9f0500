"""``loom.scan`` (issue 15, item 7): bad scans and misused schedules raise LoomErrors naming the culprit."""

from __future__ import annotations

import pytest

import loom
from loom.errors import LoomError, LoomTypeError, LoomValueError
from loom.te.scan import scan
from loom.te.schedule_ops import schedule_to_stmt


def _parts(m=6, n=4):
    X = loom.placeholder((m, n), name="X")
    state = loom.placeholder((m, n), name="state")
    init = loom.compute((1, n), lambda _, i: X[0, i], name="init")
    update = loom.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    return X, state, init, update


def _bad_init_width():
    X, state, _, update = _parts()
    return loom.compute((1, 5), lambda _, i: 0.0, name="init"), update, state


def _bad_update_shape():
    X, state, init, _ = _parts()
    return init, loom.compute((6, 3), lambda t, i: state[t - 1, i], name="update"), state


def _bad_update_time():
    X, state, init, _ = _parts()
    return init, loom.compute((5, 4), lambda t, i: state[t - 1, i], name="update"), state


def _bad_ndim():
    X, state, _, update = _parts()
    return loom.compute((4,), lambda i: 0.0, name="init"), update, state


def _bad_dtype():
    X, state, init, _ = _parts()
    return init, loom.compute((6, 4), lambda t, i: loom.cast(state[t - 1, i], "float64"), name="update"), state


def _no_state_read():
    X, state, init, _ = _parts()
    return init, loom.compute((6, 4), lambda t, i: X[t, i] * 2.0, name="update"), state


def _init_reads_state():
    X, state, _, update = _parts()
    return loom.compute((1, 4), lambda _, i: state[0, i], name="init"), update, state


def _state_not_placeholder():
    X, _, init, update = _parts()
    return init, update, loom.compute((6, 4), lambda t, i: X[t, i], name="state")


def _counts():
    X, state, init, update = _parts()
    return [init, init], [update], [state]


def _not_a_tensor():
    X, state, init, update = _parts()
    return init, update, "state"


def _too_many_init_rows():
    X, state, _, update = _parts()
    return loom.compute((7, 4), lambda r, i: 0.0, name="init"), update, state


@pytest.mark.parametrize("make, error, words", [
    (_bad_init_width, LoomValueError, "init init has shape (1, 5) but its state state has (6, 4)"),
    (_bad_update_shape, LoomValueError, "update update has shape (6, 3) but its state state has (6, 4)"),
    (_bad_update_time, LoomValueError, "must agree on dimension 0"),
    (_bad_ndim, LoomValueError, "init init has 1 dimension(s) but its state state has 2"),
    (_bad_dtype, LoomTypeError, "update update is float64 but its state state is float32"),
    (_no_state_read, LoomValueError, "update update does not read any state placeholder (state)"),
    (_init_reads_state, LoomValueError, "init init reads a state placeholder (state)"),
    (_state_not_placeholder, LoomTypeError, "state_placeholder 0 (state) must be a loom.placeholder"),
    (_counts, LoomValueError, "2 init(s), 1 update(s) and 1 state placeholder(s)"),
    (_not_a_tensor, LoomTypeError, "state_placeholder 0 must be a Tensor, got str"),
    (_too_many_init_rows, LoomValueError, "init init has 7 rows, more than the 6 of the state"),
])
def test_bad_scans_are_refused(make, error, words):
    with pytest.raises(error) as info:
        scan(*make(), name="bad")
    assert "scan 'bad'" in str(info.value) and words in str(info.value)


def _lowered(s):
    return schedule_to_stmt(s)


def test_the_scan_axis_stays_one_serial_loop():
    X, state, init, update = _parts()
    S = scan(init, update, state)
    for primitive in ("split", "parallel", "vectorize"):
        s = loom.create_schedule(S.op)
        if primitive == "split":
            s[S].split(S.op.scan_axis, factor=2)
        else:
            getattr(s[S], primitive)(S.op.scan_axis)
        with pytest.raises(LoomValueError, match="scan scan: its scan axis"):
            _lowered(s)


def test_stages_of_the_update_stay_inside_the_scan():
    X, state, init, _ = _parts()
    half = loom.compute((6, 4), lambda t, i: state[t - 1, i] * 0.5, name="half")
    update = loom.compute((6, 4), lambda t, i: half[t, i] + X[t, i], name="update")
    S = scan(init, update, state)
    after = loom.compute((6, 4), lambda t, i: S[t, i] + 1.0, name="after")
    s = loom.create_schedule(after.op)
    with pytest.raises(LoomValueError, match="half is a step of scan scan .* outside the scan's loop"):
        s[half].compute_at(s[after], after.op.axis[0])
    # A schedule record made elsewhere skips that check: lowering still refuses the placement.
    s[half].group = None
    s[half].compute_at(s[after], after.op.axis[0])
    with pytest.raises(LoomValueError, match="half is a step of scan scan .* outside the scan's loop"):
        _lowered(s)
    s = loom.create_schedule(S.op)
    s[update].compute_inline()
    with pytest.raises(LoomValueError, match="update of scan scan, which stores it"):
        _lowered(s)
    # The same after cache_read rewrote the update to read a copy: the scan still names the old operation
    # (this lowered to a scan loop computing nothing, its rows left unwritten).
    s = loom.create_schedule(S.op)
    s.cache_read(X, "global", [update])
    s[update].compute_inline()
    with pytest.raises(LoomValueError, match="update of scan scan, which stores it"):
        _lowered(s)
    s = loom.create_schedule(S.op)
    s[init].compute_inline()
    with pytest.raises(LoomValueError, match="init of scan scan, which reads it whole"):
        _lowered(s)
    s = loom.create_schedule(S.op)
    s[init].compute_at(s[S], S.op.scan_axis)
    with pytest.raises(LoomValueError, match="an init is computed once"):
        _lowered(s)


def test_the_state_is_read_only_by_the_update_of_its_scan():
    X, state, init, update = _parts()
    S = scan(init, update, state)
    peek = loom.compute((6, 4), lambda t, i: state[t, i] + S[t, i], name="peek")
    with pytest.raises(LoomValueError, match="peek reads state, the state placeholder of scan scan"):
        _lowered(loom.create_schedule(peek.op))
    update2 = loom.compute((6, 4), lambda t, i: state[t - 1, i] * 2.0, name="update2")
    S2 = scan(init, update2, state, name="other")
    with pytest.raises(LoomValueError, match="state placeholder state belongs to scans"):
        _lowered(loom.create_schedule([S.op, S2.op]))


def test_an_update_must_be_a_compute():
    X, state, init, _ = _parts()
    update = loom.extern((6, 4), [state], lambda ins, outs: loom.call_extern("int32", "f", ins[0].data),
                         name="update")
    S = scan(init, update, state)
    with pytest.raises(LoomValueError, match="update update comes from a ExternOp; an update must be a loom.compute"):
        _lowered(loom.create_schedule(S.op))


def test_the_scan_itself_cannot_be_attached_or_inlined():
    X, state, init, update = _parts()
    S = scan(init, update, state)
    after = loom.compute((6, 4), lambda t, i: S[t, i] + 1.0, name="after")
    s = loom.create_schedule(after.op)
    with pytest.raises(LoomError, match="only compute operations"):
        s[S].compute_at(s[after], after.op.axis[0])
    with pytest.raises(LoomError, match="only compute operations"):
        s[S].compute_inline()
