"""loom.tune.tune end to end on the local executor: failures, checks, logs, resuming, the history."""

import json
import warnings

import numpy as np
import pytest

import loom
from loom import tune
from loom.tune.strategy import ModelStrategy, make_strategy

from tune_helpers import MODES, faulty, scaled


def _kinds(records):
    return {r["config"]["knobs"]["mode"]: r["error_kind"] for r in records}


def test_every_kind_of_failure_is_recorded_and_the_search_goes_on(tmp_path):
    log = tmp_path / "faulty.jsonl"
    task = tune.Task(faulty, (64,), "llvm")
    result = tune.tune(task, trials=len(MODES), strategy="grid", log=str(log), n_parallel=1, timeout=4)
    assert _kinds(result.records) == {"ok": None, "ok2": None, "raise": "build", "wrong": "wrong",
                                      "crash": "crash", "hang": "timeout"}
    assert result.failures == 4 and result.trials == 6
    by_mode = {r["config"]["knobs"]["mode"]: r for r in result.records}
    assert "does not build" in by_mode["raise"]["error"]
    assert "SIGSEGV" in by_mode["crash"]["error"]
    assert "timed out after 4 s" in by_mode["hang"]["error"]
    assert "first valid candidate" in by_mode["wrong"]["error"]
    assert all(r["cost"] is None and r["timings"] == [] for m, r in by_mode.items() if m not in ("ok", "ok2"))
    assert result.best["config"]["knobs"]["mode"] in ("ok", "ok2")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["config"]["index"] for r in lines) == list(range(6))
    assert all(r["task"] == "faulty(64)" and r["target"] == "llvm" and r["v"] == 1 for r in lines)


def test_a_reference_checks_every_candidate(tmp_path):
    task = tune.Task(faulty, (32,), "llvm", reference=lambda a: [2 * a])
    result = tune.tune(task, trials=4, strategy="grid", n_parallel=2)
    kinds = _kinds(result.records)
    assert kinds["wrong"] == "wrong" and kinds["ok"] is None and kinds["ok2"] is None
    wrong = next(r for r in result.records if r["config"]["knobs"]["mode"] == "wrong")
    assert "Not equal to tolerance" in wrong["error"]


def test_resuming_skips_what_the_log_holds(tmp_path):
    log = str(tmp_path / "scaled.jsonl")
    task = tune.Task(scaled, (64,), "llvm")
    first = tune.tune(task, trials=3, strategy="random", log=log, seed=1)
    second = tune.tune(task, trials=5, strategy="random", log=log, seed=1)
    third = tune.tune(task, trials=5, strategy="random", log=log, seed=1)
    assert (first.trials, second.trials, third.trials) == (3, 2, 0)
    seen = [r["config"]["index"] for r in tune.read_records(log)]
    assert len(seen) == len(set(seen)) == 5
    assert third.best is not None and third.best_cost == min(r["cost"] for r in tune.read_records(log))
    assert third.best_gflops == pytest.approx(64 / third.best_cost / 1e9)


def test_a_template_defined_in_a_function_travels_by_value():
    @tune.template
    def negate(cfg, n):
        A = loom.placeholder((n,), name="A")
        B = loom.compute((n,), lambda i: -A[i], name="B")
        s = loom.create_schedule(B.op)
        cfg.define_knob("unroll", [False, True])
        if cfg["unroll"].val:
            s[B].unroll(B.op.axis[0])
        return s, [A, B]

    result = tune.tune(tune.Task(negate, (8,), "c", reference=lambda a: [-a]), trials=2, strategy="grid")
    assert result.failures == 0 and result.trials == 2


def test_early_stopping_stops_a_search_that_finds_nothing(tmp_path):
    task = tune.Task(faulty, (16,), "llvm")
    only_raise = make_strategy("grid", task.space)
    only_raise.taken.update(i for i, m in enumerate(MODES) if m != "raise")  # leave the failing config alone
    result = tune.tune(task, trials=6, strategy=only_raise, early_stopping=1, n_parallel=1)
    assert result.trials == 1 and result.failures == 1 and result.best is None and result.best_config is None


def test_progress_bar_only_when_asked_or_on_a_terminal(capsys):
    task = tune.Task(scaled, (16,), "llvm")
    tune.tune(task, trials=1, strategy="grid")
    assert capsys.readouterr().err == ""
    tune.tune(task, trials=2, strategy="grid", progress=True)
    err = capsys.readouterr().err
    assert "scaled(16)" in err and "failed=0" in err and "best=" in err and "GFLOP/s" in err


def _record(task, index, cost, target="llvm", error=None):
    return {"v": 1, "task": task.key, "template": task.name, "args": list(task.args), "target": target,
            "config": task.space.get(index).to_json(), "timings": [] if cost is None else [cost],
            "cost": cost, "error": error, "error_kind": None if error is None else "run"}


def test_apply_history_best_builds_the_best_logged_config(tmp_path):
    task = tune.Task(scaled, (64,), "llvm")
    best = next(i for i in range(len(task.space)) if task.space.get(i).to_json()["knobs"] == {"split": [-1, 8], "vec": True})
    records = [_record(task, 0, 3e-6), _record(task, best, 1e-6), _record(task, 1, None, error="boom"),
               _record(task, 2, 1e-9, target="c")]
    log = tmp_path / "h.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    with tune.apply_history_best(str(log)):
        with loom.Target("llvm"):
            s, args = scaled(None, 64)
            assert "ramp(" in str(loom.lower(s, args))  # the vectorized 8-lane config
            s2, args2 = task.instantiate()
            assert "ramp(" in str(loom.lower(s2, args2))
        with loom.Target("c"):
            assert task.instantiate(None) is not None
        s3, args3 = scaled(None, 32)  # no record for this size: the fallback (no vectors)
        assert "ramp(" not in str(loom.lower(s3, args3))
    f = loom.build(s, args, target="llvm")
    a = np.arange(64, dtype="float32")
    b = np.empty_like(a)
    f(a, b)
    np.testing.assert_array_equal(b, 3 * a)
    h = tune.History(str(log))
    assert h.best(task.key, "llvm")["cost"] == 1e-6 and h.best(task.key)["target"] == "c"
    assert h.best_config(task.key, task.space, "llvm").index == best
    with pytest.raises(loom.LoomError, match="no tuning log"):
        tune.History(str(tmp_path / "missing.jsonl"))


def test_a_changed_template_refuses_its_old_log_lines(tmp_path):
    task = tune.Task(scaled, (64,), "llvm")
    rec = _record(task, 0, 1e-6)
    rec["config"]["knobs"]["vec"] = "sometimes"
    with tune.apply_history_best([rec]):
        with pytest.raises(tune.ConfigError, match="template changed"):
            scaled(None, 64)


def test_model_strategy_learns_which_configs_are_fast():
    space = tune.ConfigSpace()
    space.define_knob("x", list(range(100)))
    space.define_knob("y", [0, 1])
    s = ModelStrategy(space, seed=0, epsilon=0.0)
    for i in s.propose(20):
        s.observe(i, 1e-3 * (1 + space.get(i)["x"].val))  # cost grows with x
    picks = s.propose(8)
    assert len(set(picks)) == 8 and not set(picks) & set(s.results)
    assert np.mean([space.get(i)["x"].val for i in picks]) < 25


def test_model_strategy_without_a_model_library_is_random(monkeypatch):
    import loom.tune.model as model

    monkeypatch.setattr(model, "available_model", lambda: None)
    space = tune.ConfigSpace()
    space.define_knob("x", list(range(10)))
    with pytest.warns(RuntimeWarning, match="scikit-learn or xgboost"):
        s = ModelStrategy(space)
    assert sorted(s.propose(20)) == list(range(10)) and s.exhausted


def test_bad_arguments_are_loom_errors():
    with pytest.raises(loom.LoomError, match="expected a loom.tune.Task"):
        tune.tune(scaled, trials=1)
    task = tune.Task(scaled, (8,), "llvm")
    with pytest.raises(loom.LoomError, match="trials"):
        tune.tune(task, trials=-1)
    with pytest.raises(loom.LoomError, match="unknown tuning strategy"):
        tune.tune(task, trials=1, strategy="genetic")
    with pytest.raises(loom.LoomError, match="executor"):
        tune.tune(task, trials=1, executor=42)
    with pytest.raises(loom.LoomError, match="JSON values"):
        tune.Task(scaled, (object(),), "llvm")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(tune.Task(scaled, (8,), "llvm").space) == 8
