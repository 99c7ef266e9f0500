"""Shared-library export format: metadata, linking, loading in a fresh process, thread knob."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom.errors import LoomError, LoomValueError, SerializationError
from loom.ir import BufferStore, For, IRModule, PrimFunc
from loom.runtime import InterpModule
from loom.runtime.native_library import (METADATA_SYMBOL, LibraryModule, LinkError, configured_num_threads,
                                         is_shared_library, library_metadata, link_shared_library,
                                         read_library_metadata)

# A hand-written function in the native ABI: int32 scale(const uint64_t *args, const char **error)
# multiplies A (n floats) by 3 in place; args = [A, n].
_C = textwrap.dedent("""
    #include <stdint.h>
    int32_t loom_num_threads = 0;
    int32_t scale(const uint64_t *args, const char **error) {
        float *a = (float *)(uintptr_t)args[0];
        int64_t n = (int64_t)args[1];
        if (n > 1000) { *error = "n is too large"; return -1; }
        for (int64_t i = 0; i < n; ++i) a[i] *= 3.0f;
        return 0;
    }
""")


def _signature() -> IRModule:
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    i = loom.var("i")
    body = For(i, 0, n, "serial", BufferStore(A, A[i] * 3.0, [i]))
    f = PrimFunc([A.data], body, buffer_map={A.data: A}, attrs={"global_symbol": "scale"})
    return IRModule({"scale": f})


@pytest.fixture()
def library(tmp_path):
    src = tmp_path / "scale.c"
    src.write_text(_C)
    module = InterpModule(_signature())
    path = tmp_path / "scale.so"
    link_shared_library(path, [str(src)], library_metadata(module, {"c": _C}, {"scale": "scale"}),
                        flags=["-O2"])
    return path


def test_link_and_load(library):
    assert is_shared_library(library)
    meta = read_library_metadata(library)
    assert meta["format"] == "interp" and meta["symbols"] == {"scale": "scale"}
    m = LibraryModule(library)
    a = np.arange(5, dtype="float32")
    m(a)
    np.testing.assert_array_equal(a, np.arange(5, dtype="float32") * 3)
    assert "a[i] *= 3.0f" in m.get_source("c") and m.get_source() == m.get_source("c")
    with pytest.raises(LoomValueError, match="embeds sources"):
        m.get_source("ll")


def test_library_is_a_plain_shared_object(library):
    lib = ctypes.CDLL(str(library))
    raw = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, METADATA_SYMBOL)))
    assert json.loads(raw)["entry"] == "scale"


def test_checks_and_asserts_still_apply(library):
    m = LibraryModule(library)
    with pytest.raises(LoomError, match="float32"):
        m(np.zeros(3, "int32"))
    with pytest.raises(LoomError, match="too large"):
        m(np.zeros(2000, "float32"))


def test_reexport_copies(library, tmp_path):
    copy = tmp_path / "copy.so"
    LibraryModule(library).export_library(copy)
    a = np.ones(2, "float32")
    LibraryModule(copy)(a)
    assert a.tolist() == [3.0, 3.0]


def test_load_in_fresh_process(library):
    script = textwrap.dedent(f"""
        import numpy as np
        from loom.runtime.native_library import LibraryModule
        a = np.ones(4, "float32"); LibraryModule({str(library)!r})(a); print(a.sum())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "12.0"


def test_foreign_and_broken_files(tmp_path):
    plain = tmp_path / "plain.so"
    src = tmp_path / "plain.c"
    src.write_text("int f(void) { return 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(plain), str(src)], check=True)
    with pytest.raises(SerializationError, match="not a Loom module"):
        LibraryModule(plain)
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF" + b"\0" * 60)
    with pytest.raises(SerializationError, match="cannot load"):
        loom.runtime.load_module(bad)


def test_link_error_names_the_command(tmp_path):
    src = tmp_path / "broken.c"
    src.write_text("this is not C\n")
    with pytest.raises(LinkError, match="command: .*broken.c"):
        link_shared_library(tmp_path / "x.so", [str(src)], b"{}")
    assert not (tmp_path / "x.so").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".loom-lib-")]


def test_num_threads_env(monkeypatch):
    monkeypatch.delenv("LOOM_NUM_THREADS", raising=False)
    assert configured_num_threads() == 0
    monkeypatch.setenv("LOOM_NUM_THREADS", "3")
    assert configured_num_threads() == 3
    for bad in ("-1", "two"):
        monkeypatch.setenv("LOOM_NUM_THREADS", bad)
        with pytest.raises(LoomValueError, match="LOOM_NUM_THREADS"):
            configured_num_threads()


def test_threads_symbol_set_on_load(library, monkeypatch):
    monkeypatch.setenv("LOOM_NUM_THREADS", "7")
    m = LibraryModule(library)
    assert ctypes.c_int32.in_dll(m._lib, "loom_num_threads").value == 7
