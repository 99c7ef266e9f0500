"""The runtime Module API: functions, entry, source, timing, export and load."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import loom
from loom.runtime import (
    ArgumentTypeError, InterpModule, Module, PackedFunc, ProfileResult, load_module, nd, read_export,
)

from loom.runtime.module import _export_digest

from runtime_programs import build, host_and_kernel, interp_module, scale2d, vadd


def test_functions_entry_and_call():
    m = build(vadd(), scale2d())
    assert m.entry_name == "vadd" and m.function_names == ["vadd", "scale2d"]
    assert "scale2d" in m and "nope" not in m
    f = m["scale2d"]
    assert isinstance(f, PackedFunc) and f is m.get_function("scale2d") and f.name == "scale2d"
    a, c = np.arange(3, dtype="float32"), np.zeros(3, "float32")
    assert m(a, a, c) is None
    assert c.tolist() == [0, 2, 4]
    out = np.zeros((1, 3), "float32")
    f(a.reshape(1, 3), out, 3.0, 1)
    assert out.tolist() == [[1, 4, 7]]
    assert m.imported_modules == [] and m.type_key == "interp"
    assert repr(m) == "<loom.runtime.Module interp: vadd, scale2d>"


def test_entry_prefers_main_then_host_functions():
    assert build(*reversed(host_and_kernel())).entry_name == "twice"
    assert build(vadd(name="helper"), vadd(name="main")).entry_name == "main"
    assert InterpModule(interp_module(vadd(), scale2d()), entry_name="scale2d").entry_name == "scale2d"
    with pytest.raises(loom.LoomValueError, match=r"entry 'x' is not a function of the module \(it has \['vadd'\]\)"):
        InterpModule(interp_module(vadd()), entry_name="x")


def test_unknown_function_is_an_error_listing_the_names():
    m = build(vadd())
    with pytest.raises(loom.LoomValueError, match=r"interp module has no function 'vsub'; it has \['vadd'\]"):
        m["vsub"]


def test_imported_modules_are_searched_on_request():
    inner = build(scale2d())
    outer = InterpModule(interp_module(vadd()))
    outer.import_module(inner)
    with pytest.raises(loom.LoomTypeError, match="takes a runtime Module"):
        outer.import_module("x")
    assert outer.get_function("scale2d", query_imports=True).module is inner
    assert outer["scale2d"] is inner["scale2d"]
    with pytest.raises(loom.LoomValueError, match=r"no function 'scale2d'; it has \['vadd'\]"):
        outer.get_function("scale2d")


def test_get_source():
    m = build(vadd())
    text = m.get_source()
    assert text == str(m.ir_module) and "def vadd(" in text and m.get_source("tir") == text
    assert loom.structural_equal(loom.load_json(m.get_source("json")), m.ir_module, map_free_vars=True)
    with pytest.raises(loom.LoomValueError, match="source formats are"):
        m.get_source("ptx")


def test_time_evaluator_returns_positive_times():
    m = build(vadd())
    a = nd.array(np.ones(16, "float32"))
    c = nd.empty((16,), "float32")
    res = m.time_evaluator("vadd", loom.cpu(0), number=3, repeat=4)(a, a, c)
    assert isinstance(res, ProfileResult) and len(res.results) == 4
    assert all(t > 0 for t in res.results) and res.min <= res.mean <= res.max and res.std >= 0
    assert "mean" in str(res) and np.testing.assert_array_equal(c.numpy(), np.full(16, 2.0)) is None
    slow = m.time_evaluator(m.entry_name, "cpu", number=1, repeat=1, min_repeat_ms=5)(a, a, c)
    assert slow.results[0] > 0


def test_time_evaluator_checks_its_arguments():
    m = build(vadd())
    with pytest.raises(loom.LoomValueError, match=r"runs on cpu\(0\), not cuda\(0\)"):
        m.time_evaluator("vadd", loom.cuda(0))
    with pytest.raises(loom.LoomValueError, match="number >= 1 and repeat >= 1"):
        m.time_evaluator("vadd", loom.cpu(0), number=0)
    with pytest.raises(ArgumentTypeError, match="vadd takes 3 arguments"):
        m.time_evaluator("vadd", loom.cpu(0))(np.zeros(1, "float32"))


_LOAD_AND_RUN = """
import sys, numpy as np, loom.runtime
m = loom.runtime.load_module(sys.argv[1])
a, c = np.load(sys.argv[2]), np.zeros((3, 4), "float32")
m["scale2d"](a, c, 1.5, 2)
b = np.zeros(5, "float32")
m(np.arange(5, dtype="float32"), b)
np.save(sys.argv[3], c); np.save(sys.argv[4], b)
print(m.entry_name, type(m).__name__, m.get_source() == open(sys.argv[5]).read())
"""


def test_export_and_load_in_a_fresh_process(tmp_path):
    host, kernel = host_and_kernel()
    m = build(host, kernel, scale2d())
    path = tmp_path / "lib.loom"
    m.export_library(path)
    header, payload = read_export(path)
    assert header == {"loom_module": 2, "format": "interp", "entry": "twice", "target": "interp", "imports": [],
                      "embedded": ""}
    assert payload.startswith(b"{")
    a = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    c, b = np.zeros((3, 4), "float32"), np.zeros(5, "float32")
    m["scale2d"](a, c, 1.5, 2)
    m(np.arange(5, dtype="float32"), b)
    np.save(tmp_path / "a.npy", a)
    (tmp_path / "src.txt").write_text(m.get_source())
    proc = subprocess.run([sys.executable, "-c", _LOAD_AND_RUN, str(path), str(tmp_path / "a.npy"),
                           str(tmp_path / "c.npy"), str(tmp_path / "b.npy"), str(tmp_path / "src.txt")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["twice", "InterpModule", "True"]
    assert np.load(tmp_path / "c.npy").tobytes() == c.tobytes()
    assert np.load(tmp_path / "b.npy").tobytes() == b.tobytes()


def _write_export(path, header: dict, payload: bytes) -> None:
    """A module file as export_library writes it, digest included."""
    header = {**header, "sha256": _export_digest(header, payload)}
    path.write_bytes(json.dumps(header, sort_keys=True).encode() + b"\n" + payload)


def test_load_module_errors(tmp_path):
    bad = tmp_path / "bad.loom"
    bad.write_bytes(b"\x7fELF not a loom file")
    with pytest.raises(loom.SerializationError, match="cannot load shared library"):
        load_module(bad)
    bad.write_bytes(b"PK\x03\x04 not a loom file")
    with pytest.raises(loom.SerializationError, match="is not a Loom module file"):
        load_module(bad)
    bad.write_text(json.dumps({"loom_module": 99, "format": "interp", "entry": "f"}) + "\n{}")
    with pytest.raises(loom.SerializationError, match="version 99; this Loom reads version 2"):
        load_module(bad)
    _write_export(bad, {"loom_module": 2, "format": "fpga-bits", "entry": "f"}, b"")
    with pytest.raises(loom.PluginError, match="no installed plugin loads modules of format 'fpga-bits'"):
        load_module(bad)
    _write_export(bad, {"loom_module": 2, "format": "interp", "entry": "f"}, b'{"loom_json": 1')
    with pytest.raises(loom.SerializationError):
        load_module(bad)
    with pytest.raises(loom.LoomValueError, match="cannot read module file"):
        load_module(tmp_path / "missing.loom")


class NumpyAdd(Module):
    """A minimal backend: its runner gets checked values and the symbolic binding."""

    format = ""

    def __init__(self, func):
        super().__init__({"vadd": func})
        self.seen = []

    def _make_runner(self, name, func):
        def run(call):
            self.seen.append(sorted((v.name, x) for v, x in call.binding.items()))
            a, b, c = call.values
            np.add(a, b, out=c)

        return run


def test_subclass_api():
    m = NumpyAdd(vadd())
    a = np.arange(4, dtype="float32")
    c = np.zeros(4, "float32")
    m(a, a, c)
    assert c.tolist() == [0, 2, 4, 6] and m.seen == [[("n", 4)]] and m.type_key == "NumpyAdd"
    with pytest.raises(ArgumentTypeError, match="needs dtype float32"):
        m(a, a.astype("int32"), c)
    with pytest.raises(loom.LoomTypeError, match="declares no export format"):
        m.export_library("/nonexistent/x.loom")
    with pytest.raises(loom.LoomTypeError, match="has no source"):
        m.get_source()
