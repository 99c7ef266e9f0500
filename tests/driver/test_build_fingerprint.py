"""The build cache keyed before lowering (loom.driver.build_cache): exact keys, working hits, safe fallbacks."""

from __future__ import annotations

import importlib
import logging
import time

import numpy as np
import pytest

import loom
from loom.backend import stats
from loom.driver import build_cache

build_mod = importlib.import_module("loom.driver.build")  # the module (loom.driver.build is the function)

pytest.importorskip("loom_llvm")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """An empty cache per test, and no source file counts as changed since the process started."""
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LOOM_CACHE", raising=False)
    monkeypatch.setattr(build_cache, "_START", time.time() + 3600)


def program(factor=8, vectorize=True, body=lambda a, i: a[i] * 2.0, unroll=False):
    A = loom.placeholder((64,), name="A")
    B = loom.compute((64,), lambda i: body(A, i), name="B")
    s = loom.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=factor)
    if vectorize:
        s[B].vectorize(xi)
    if unroll:
        s[B].unroll(xo)
    return s, [A, B]


def key(s, args, target="llvm", name="f"):
    return build_cache.fingerprint_of(s, args, target, name=name)


def test_the_same_program_built_twice_has_one_key():
    assert key(*program()) == key(*program()) is not None


@pytest.mark.parametrize("change", [
    dict(factor=16),                                   # a split factor
    dict(vectorize=False),                             # an annotation removed
    dict(unroll=True),                                 # an annotation added
    dict(body=lambda a, i: a[i] * 3.0),                # a constant of the compute body
    dict(body=lambda a, i: a[i] + 2.0),                # an operator of the compute body
])
def test_a_schedule_change_changes_the_key(change):
    assert key(*program(**change)) != key(*program())


def test_target_attrs_name_arguments_and_build_config_change_the_key():
    s, args = program()
    base = key(s, args)
    assert key(s, args, "llvm -opt_level=2") != base
    assert key(s, args, "llvm -fp_contract=false") != base
    assert key(s, args, name="g") != base
    assert key(s, args[::-1]) != base
    with loom.build_config(data_alignment=128):
        assert key(s, args) != base
    with loom.build_config(partition_const_loop=True):
        assert key(s, args) != base
    assert key(s, args) == base


def test_a_hit_skips_lowering_and_gives_a_working_module(monkeypatch):
    s, args = program()
    first = loom.build(s, args, target="llvm", name="f")
    before = stats()

    def no_lowering(*a, **k):
        raise AssertionError("a hit must not lower")

    monkeypatch.setattr(build_mod, "_build", no_lowering)
    again = loom.build(*program(), target="llvm", name="f")  # new objects, same structure
    after = stats()
    assert after["cache_hits"] == before["cache_hits"] + 1 and after["compiles"] == before["compiles"]
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    again(a, b)
    np.testing.assert_array_equal(b, a * 2)
    assert again.entry_name == first.entry_name == "f"
    assert again.get_source("ll-raw") == first.get_source("ll-raw")
    assert again.info.functions.keys() == first.info.functions.keys()


def test_a_changed_schedule_is_built_again():
    loom.build(*program(), target="llvm", name="f")
    s, args = program(body=lambda a, i: a[i] + 5.0)
    compiles = stats()["compiles"]
    f = loom.build(s, args, target="llvm", name="f")
    assert stats()["compiles"] == compiles + 1
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a + 5)


def test_an_unusable_entry_is_replaced(monkeypatch, caplog):
    loom.build(*program(), target="llvm", name="f")
    from loom.backend import stages

    def broken(data, info):
        raise loom.errors.SerializationError("damaged")

    monkeypatch.setattr(stages, "load_cached", broken)
    with caplog.at_level(logging.WARNING, logger="loom.driver.build_cache"):
        f = loom.build(*program(), target="llvm", name="f")
    assert "cannot be used" in caplog.text
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_what_the_key_cannot_describe_takes_the_usual_path(monkeypatch, tmp_path):
    s, args = program()
    with loom.build_config(add_lower_pass=[(1, lambda stmt: stmt)]):
        assert key(s, args) is None
    monkeypatch.setenv("LOOM_DUMP_DIR", str(tmp_path / "dump"))
    assert key(s, args) is None
    monkeypatch.delenv("LOOM_DUMP_DIR")
    monkeypatch.setenv("LOOM_CACHE", "0")
    assert key(s, args) is None
    monkeypatch.delenv("LOOM_CACHE")
    assert key(s, args) is not None


def test_a_lowering_rule_from_outside_the_fingerprinted_packages_turns_the_key_off(monkeypatch):
    from loom.ir import op

    info = op.Op.get("tir.exp").info
    monkeypatch.setitem(info.lowering, "llvm", lambda call: None)  # defined in this test module
    assert key(*program()) is None


def test_a_source_file_changed_since_the_process_started_turns_the_key_off(monkeypatch):
    monkeypatch.setattr(build_cache, "_START", 0.0)  # every file is newer than the process
    assert key(*program()) is None


def test_a_tensorized_loop_takes_the_usual_path():
    from loom.te.relations import IterVarAttr

    s, args = program()
    stage = s[args[1]]
    stage.iter_var_attrs[stage.leaf_iter_vars[-1]] = IterVarAttr("tensorized", tensor_intrin=object())
    assert key(s, args) is None


def test_a_hit_logs_the_warnings_of_the_build_that_made_it(caplog):
    def nested():
        A = loom.placeholder((8, 8), name="A")
        B = loom.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
        s = loom.create_schedule(B.op)
        s[B].parallel(B.op.axis[0])
        s[B].parallel(B.op.axis[1])
        return s, [A, B]

    hits = stats()["cache_hits"]
    with caplog.at_level(logging.WARNING, logger="loom"):
        loom.build(*nested(), target="llvm")
        loom.build(*nested(), target="llvm")
    assert stats()["cache_hits"] == hits + 1
    warned = [r.getMessage() for r in caplog.records if "runs serially" in r.getMessage()]
    assert len(warned) == 2 and warned[0] == warned[1]


def test_an_evicted_artifact_is_compiled_again(tmp_path):
    loom.build(*program(), target="llvm", name="f")
    for entry in (tmp_path / "cache" / "backend-llvm").iterdir():
        if not entry.name.endswith(".lock"):
            entry.unlink()
    compiles = stats()["compiles"]
    f = loom.build(*program(), target="llvm", name="f")
    assert stats()["compiles"] == compiles + 1
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 2)
