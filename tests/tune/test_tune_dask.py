"""loom.tune on distributed engines: a two-worker Dask LocalCluster, and Ray when installed."""

import json

import pytest

from loom import tune

from tune_helpers import scaled

distributed = pytest.importorskip("distributed")


def _form(path):
    """Each line's keys and the JSON types of its values: what 'equal in form' compares."""
    out = []
    for line in open(path):
        rec = json.loads(line)
        out.append({k: type(v).__name__ for k, v in rec.items() if k not in ("error", "error_kind")})
    return out


def test_a_dask_local_cluster_tunes_and_logs_like_a_local_run(tmp_path):
    task = tune.Task(scaled, (256,), "llvm")
    local_log, dask_log = str(tmp_path / "local.jsonl"), str(tmp_path / "dask.jsonl")
    local = tune.tune(task, trials=6, strategy="grid", log=local_log)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=True) as cluster, distributed.Client(cluster) as client:
        remote = tune.tune(task, trials=6, strategy="grid", log=dask_log, executor=client)
        workers = client.run(lambda: __import__("os").getpid())
    assert remote.trials == local.trials == 6 and remote.failures == local.failures == 0
    assert _form(dask_log) == _form(local_log)
    assert sorted(r["config"]["index"] for r in tune.read_records(dask_log)) == list(range(6))
    assert len(workers) == 2
    with tune.apply_history_best(dask_log):
        s, args = scaled(None, 256)
    assert remote.best_config is not None


def test_ray_tunes_when_installed(tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    try:
        result = tune.tune(tune.Task(scaled, (64,), "llvm"), trials=3, strategy="grid", executor="ray",
                           log=str(tmp_path / "ray.jsonl"))
    finally:
        ray.shutdown()
    assert result.trials == 3 and result.failures == 0
