"""Loading exported modules safely: fresh code after a re-export, and files that are not what they claim.

Cases that used to crash or hang the process (SIGBUS on a truncated library, a
FIFO that blocks, ``/dev/zero`` that never ends, metadata pointing a function at
data) run in a child process, which must end normally with a clean LoomError.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom.errors import SerializationError
from loom.runtime import InterpModule, load_module, read_export
from loom.runtime.native_library import library_metadata, link_shared_library, read_library_metadata

_TIMEOUT = 120


def _kernel(factor: float, target: str, n: int = 64):
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * factor, name="B")
    return loom.build(loom.create_schedule(B.op), [A, B], target=target, name="scale")


def _run(f, n: int = 64) -> list[float]:
    b = np.zeros(n, "float32")
    f(np.ones(n, "float32"), b)
    return sorted(set(b.tolist()))


def _limit_memory() -> None:  # a regression that reads without end fails fast instead of eating the machine
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


def _child(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter; it must end by itself, in time."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                          timeout=_TIMEOUT, preexec_fn=_limit_memory)
    assert done.returncode == 0, f"child ended with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


_EXPECT_ERROR = """
    import sys, loom
    try:
        loom.runtime.load_module(sys.argv[1])
    except loom.LoomError as err:
        print(type(err).__name__, err)
    else:
        print("LOADED")
"""


@pytest.mark.parametrize("target", ["llvm", "c -flags=-O1"])
def test_reexport_to_the_same_path_loads_the_new_kernel(tmp_path, target):
    path = tmp_path / "kernel.so"
    _kernel(2.0, target).export_library(path)
    first = load_module(path)
    _kernel(3.0, target).export_library(path)
    second = load_module(path)
    assert _run(first) == [2.0] and _run(second) == [3.0]
    assert _run(load_module(path)) == [3.0] and _run(first) == [2.0]  # the first load keeps its own code


def test_reexported_interp_module_loads_the_new_kernel(tmp_path):
    path = tmp_path / "kernel.loom"
    _kernel(2.0, "interp", 4).export_library(path)
    assert _run(load_module(path), 4) == [2.0]
    _kernel(5.0, "interp", 4).export_library(path)
    assert _run(load_module(path), 4) == [5.0]


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "folder", "dev_null"])
def test_load_module_refuses_what_is_not_a_regular_file(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "module.so"
        os.mkfifo(path)
    elif kind == "folder":
        path = tmp_path / "module.so"
        path.mkdir()
    else:
        path = "/dev/zero" if kind == "dev_zero" else os.devnull
    out = _child(_EXPECT_ERROR, str(path)).stdout
    words = {"fifo": "a FIFO", "dev_zero": "a character device", "folder": "a folder", "dev_null": "a character device"}
    assert out.startswith("LoomValueError cannot read module file") and f"is {words[kind]}, not a regular file" in out


@pytest.mark.parametrize("cut", ["half", "seal", "one_byte"])
def test_a_truncated_library_is_an_error_not_a_crash(tmp_path, cut):
    path = tmp_path / "kernel.so"
    _kernel(2.0, "c -flags=-O1").export_library(path)
    data = path.read_bytes()
    keep = {"half": len(data) // 2, "seal": len(data) - 56, "one_byte": len(data) - 1}[cut]
    path.write_bytes(data[:keep])
    out = _child(_EXPECT_ERROR, str(path)).stdout
    assert out.startswith("SerializationError") and ("integrity record" in out or "cannot load" in out), out


def test_a_library_with_tampered_metadata_is_refused(tmp_path):
    # The exported signature says 64 floats; shrinking it to 16 would let 16-element arrays
    # through to code that writes 64.
    path = tmp_path / "kernel.so"
    _kernel(2.0, "c -flags=-O1").export_library(path)
    data = path.read_bytes()
    assert data.count(b'\\"value\\":64}') == 2
    path.write_bytes(data.replace(b'\\"value\\":64}', b'\\"value\\":16}'))
    out = _child(_EXPECT_ERROR, str(path)).stdout
    assert out.startswith("SerializationError") and "was modified after export" in out
    with pytest.raises(SerializationError, match="modified after export"):
        read_library_metadata(path)


def test_an_extended_library_is_refused(tmp_path):
    path = tmp_path / "kernel.so"
    _kernel(2.0, "llvm").export_library(path)
    with open(path, "ab") as fh:
        fh.write(b"\0" * 100)
    with pytest.raises(SerializationError, match="integrity record"):
        load_module(path)


# A library whose metadata names a data symbol as the function (or a libc function it does
# not define), or declares the thread knob as code: calling it, or writing the knob, would crash.
_C = """
#include <stdint.h>
int32_t loom_num_threads = 0;
int32_t loom_rt_device_alloc(void) { return 0; }
int32_t scale(const uint64_t *args, const char **error) {
    float *a = (float *)(uintptr_t)args[0];
    for (int i = 0; i < 4; ++i) a[i] *= 3.0f;
    return 0;
}
"""

_CALL = """
    import sys, numpy as np
    from loom.runtime.native_library import LibraryModule
    try:
        m = LibraryModule(sys.argv[1])
        a = np.ones(4, "float32"); m(a)
    except Exception as err:
        print(type(err).__name__, err)
    else:
        print("RAN", a.tolist())
"""


def _signature():
    A = loom.decl_buffer((4,), "float32", name="A")
    i = loom.var("i")
    body = loom.ir.For(i, 0, 4, "serial", loom.ir.BufferStore(A, A[i] * 3.0, [i]))
    return loom.ir.IRModule({"scale": loom.ir.PrimFunc([A.data], body, buffer_map={A.data: A},
                                                       attrs={"global_symbol": "scale"})})


@pytest.mark.parametrize("symbol, source, message", [
    ("scale", _C.replace("int32_t loom_rt_device_alloc(void) { return 0; }", ""), None),
    ("loom_num_threads", _C, "symbol 'loom_num_threads' for function 'scale', but in the library it is a variable"),
    ("puts", _C, "symbol 'puts' for function 'scale', but in the library it is not defined"),
    ("scale", _C.replace("int32_t loom_num_threads = 0;", "int32_t loom_num_threads(void) { return 0; }"),
     "'loom_num_threads' must be a variable of at least 4 bytes, but in the library it is a function"),
    ("scale", _C, "'loom_rt_device_alloc' must be a variable of at least 8 bytes, but in the library it is a function"),
])
def test_metadata_must_match_the_symbols_the_library_defines(tmp_path, symbol, source, message):
    src = tmp_path / "lib.c"
    src.write_text(source)
    path = tmp_path / "lib.so"
    link_shared_library(path, [str(src)], library_metadata(InterpModule(_signature()), {"c": source},
                                                           {"scale": symbol}), flags=["-O1"])
    out = _child(_CALL, str(path)).stdout.strip()
    if message is None:
        assert out == "RAN [3.0, 3.0, 3.0, 3.0]"
    else:
        assert out.startswith("SerializationError") and message in out, out


def test_a_module_file_modified_after_export_is_refused(tmp_path):
    path = tmp_path / "kernel.loom"
    _kernel(2.0, "interp", 4).export_library(path)
    data = path.read_bytes()
    header, payload = read_export(path)
    assert "sha256" not in header and payload
    for broken in (data[:-10], data + b" ", data.replace(b'"value":4}', b'"value":2}')):
        assert broken != data
        path.write_bytes(broken)
        with pytest.raises(SerializationError, match="modified or truncated after export"):
            load_module(path)
    line, _, rest = data.partition(b"\n")
    path.write_bytes(line.replace(b'"sha256"', b'"digest"') + b"\n" + rest)
    with pytest.raises(SerializationError, match="no integrity record"):
        load_module(path)


def test_the_elf_reader_rejects_damaged_bytes_cleanly(tmp_path):
    from loom.runtime.elf_symbols import ElfError, dynamic_symbols

    path = tmp_path / "kernel.so"
    _kernel(2.0, "c -flags=-O1").export_library(path)
    data = path.read_bytes()
    symbols = dynamic_symbols(data)
    assert symbols["scale"].kind == "function" and symbols["loom_module_metadata"].kind == "object"
    rng = np.random.default_rng(0)
    damaged = [data[:n] for n in (0, 4, 16, 63, 64, 200, len(data) // 3, len(data) // 2)]
    for _ in range(300):  # random bytes of the header, the section table and the symbol table
        copy = bytearray(data)
        for at in rng.integers(0, len(data), 8):
            copy[at if rng.random() < 0.5 else at % 64] = int(rng.integers(0, 256))
        damaged.append(bytes(copy))
    for bad in damaged:
        try:
            dynamic_symbols(bad)
        except ElfError:
            pass
