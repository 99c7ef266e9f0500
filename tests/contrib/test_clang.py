"""loom.contrib.clang: finding clang and compiling C to LLVM IR (with a stand-in clang where none is installed)."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

import loom
from loom.contrib import clang
from loom.runtime.native_library import LinkError

_IR = '''define i32 @my_add(i32 %a, i32 %b) {
  %c = add i32 %a, %b
  ret i32 %c
}
'''


def _fake_clang(folder, ir=_IR, fail=False):
    """A 'clang' that writes fixed IR to the -o path and records its arguments."""
    path = os.path.join(folder, "clang")
    body = "echo 'bad input' >&2; exit 1" if fail else f"/bin/cat > \"$out\" <<'EOF'\n{ir}EOF"
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\necho "$@" > "{folder}/args"\nwhile [ $# -gt 0 ]; do if [ "$1" = -o ]; then out="$2"; '
                f'fi; shift; done\n{body}\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def test_find_clang_without_one_on_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert clang.find_clang(required=False) == []
    with pytest.raises(loom.LoomValueError, match="no clang executable on PATH"):
        clang.find_clang()


def test_create_llvm_writes_the_source_and_returns_the_ir(monkeypatch, tmp_path):
    fake = _fake_clang(str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert clang.find_clang() == [fake]
    out = str(tmp_path / "k.ll")
    ir = clang.create_llvm("int my_add(int a, int b) { return a + b; }", output=out, options=["-O2"])
    assert ir == _IR and open(out).read() == _IR
    args = open(tmp_path / "args").read().split()
    assert args[:4] == ["-O3", "-O2", "-S", "-emit-llvm"] and args[4].endswith(".cc")


def test_create_llvm_reports_clang_failures(monkeypatch, tmp_path):
    _fake_clang(str(tmp_path), fail=True)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LinkError, match="bad input"):
        clang.create_llvm("this is not C")


@pytest.mark.skipif(not clang.find_clang(required=False), reason="no clang on this machine")
def test_real_clang_output_imports_into_a_kernel():
    ir = clang.create_llvm('extern "C" float my_double(float x) { return 2 * x; }')
    A = loom.placeholder((4,), name="A")
    B = loom.compute((4,), lambda i: loom.call_pure_extern("float32", "my_double", A[i]), name="B")
    s = loom.create_schedule(B.op)
    s[B].pragma(B.op.axis[0], "import_llvm", ir)
    f = loom.build(s, [A, B], "llvm")
    b = np.zeros(4, "float32")
    f(np.arange(4, dtype="float32"), b)
    np.testing.assert_array_equal(b, [0, 2, 4, 6])
