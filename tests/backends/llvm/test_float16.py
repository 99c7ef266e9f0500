"""float16 on llvm: conversions round as numpy does, with and without the CPU's conversion instructions.

Where the CPU has no instruction (x86 before F16C, ``-mcpu=x86-64``; and double
-> half everywhere) LLVM calls ``__extendhfsf2``, ``__truncsfhf2`` and
``__truncdfhf2``.  The JIT has no compiler runtime, and a call of a missing
symbol jumps to address 0, so each module defines them (loom_llvm.float16).
The checks run in a child process: a regression is a crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from loom_llvm import target_check
from loom_llvm.float16 import LIBCALLS, define_conversions, uses_half

X86 = target_check.arch_of(llvm.get_process_triple()) == "x86_64"
TARGETS = ["llvm"] + (["llvm -mcpu=x86-64"] if X86 else [])

#: Checks every float16, the float32 and float64 neighbours of every rounding boundary, random
#: float32 bit patterns and the specials against numpy, bit for bit (NaNs: NaN of the same sign).
_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import loom

    target = sys.argv[1]
    rng = np.random.default_rng(0)

    def convert(src, dst, values, lanes):
        n = len(values)
        A = loom.placeholder((n,), src, name="A")
        B = loom.compute((n,), lambda i: A[i].astype(dst), name="B")
        s = loom.create_schedule(B.op)
        if lanes > 1:
            s[B].vectorize(s[B].split(B.op.axis[0], factor=lanes)[1])
        out = np.zeros(n, dst)
        loom.build(s, [A, B], target)(values, out)
        return out

    def mismatches(got, want):
        gb, wb = (np.frombuffer(x.tobytes(), "u%d" % x.itemsize) for x in (got, want))
        both_nan = np.isnan(got) & np.isnan(want) & (np.signbit(got) == np.signbit(want))
        return int(((gb != wb) & ~both_nan).sum())

    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = np.unique(halves[np.isfinite(halves)].astype(np.float64))
    middles = (finite[:-1] + finite[1:]) / 2  # ties: to even
    above, below = np.nextafter(middles, np.inf), np.nextafter(middles, -np.inf)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 65504.0, 65519.99, 65520.0, 1e300,
                         -1e300, 5e-324, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -14])
    doubles = np.concatenate([middles, above, below, specials, rng.standard_normal(4096) * 100])
    with np.errstate(over="ignore"):
        floats = np.concatenate([doubles.astype(np.float32), np.nextafter(middles.astype(np.float32), np.float32(np.inf)),
                                 rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    result = {}
    for lanes in (1, 8):
        result[f"half->float32 x{lanes}"] = mismatches(convert("float16", "float32", halves, lanes), halves.astype(np.float32))
        result[f"half->float64 x{lanes}"] = mismatches(convert("float16", "float64", halves, lanes), halves.astype(np.float64))
        result[f"float32->half x{lanes}"] = mismatches(convert("float32", "float16", floats, lanes), floats.astype(np.float16))
        result[f"float64->half x{lanes}"] = mismatches(convert("float64", "float16", doubles, lanes), doubles.astype(np.float16))
    print(json.dumps(result))
""")


@pytest.mark.parametrize("target", TARGETS)
def test_conversions_round_as_numpy(target: str) -> None:
    proc = subprocess.run([sys.executable, "-c", _CHILD, target], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result and all(v == 0 for v in result.values()), result


_ARITHMETIC = textwrap.dedent("""
    import sys
    import numpy as np
    import loom

    target, lanes = sys.argv[1], int(sys.argv[2])
    n = 1000
    A, B = loom.placeholder((n,), "float16", name="A"), loom.placeholder((n,), "float16", name="B")
    X = loom.placeholder((n,), "float64", name="X")
    C = loom.compute((n,), lambda i: A[i] * B[i] + A[i] / B[i] - loom.const(0.1, "float16"), name="C")
    D = loom.compute((n,), lambda i: loom.max(C[i], A[i]) + X[i].astype("float16") + (A[i] < B[i]).astype("float16"),
                     name="D")
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal(n) * 8).astype(np.float16), (rng.standard_normal(n) * 3).astype(np.float16)
    x = rng.standard_normal(n) * 50
    outs = []
    for kind in ("interp", target):
        s = loom.create_schedule(D.op)
        if lanes > 1 and kind != "interp":
            for t in (C, D):
                s[t].vectorize(s[t].split(t.op.axis[0], factor=lanes)[1])
        out = np.zeros(n, np.float16)
        loom.build(s, [A, B, X, D], kind)(a, b, x, out)
        outs.append(out.view(np.uint16))
    assert (outs[0] == outs[1]).all(), np.nonzero(outs[0] != outs[1])
""")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lanes", [1, 8])
def test_arithmetic_matches_the_interpreter_bit_for_bit(target: str, lanes: int) -> None:
    proc = subprocess.run([sys.executable, "-c", _ARITHMETIC, target, str(lanes)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"


_EXPORTED = textwrap.dedent("""
    import os, sys, tempfile
    import numpy as np
    import loom

    A = loom.placeholder((8,), "float64", name="A")
    B = loom.compute((8,), lambda i: A[i].astype("float16") * loom.const(3, "float16"), name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], sys.argv[1])
    path = os.path.join(tempfile.mkdtemp(), "half.so")
    f.export_library(path)
    a, b = np.linspace(-2, 2, 8), np.zeros(8, np.float16)
    loom.runtime.load_module(path)(a, b)
    assert (b == a.astype(np.float16) * np.float16(3)).all(), b
    print(path)
""")


@pytest.mark.parametrize("target", TARGETS)
def test_an_exported_library_carries_its_conversions_without_exporting_them(target: str) -> None:
    proc = subprocess.run([sys.executable, "-c", _EXPORTED, target], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    path = proc.stdout.strip().splitlines()[-1]
    nm = subprocess.run(["nm", "-D", path], capture_output=True, text=True)
    if nm.returncode == 0:  # binutils present
        assert not any(name in nm.stdout for name in LIBCALLS), nm.stdout


def test_modules_define_the_conversions_only_where_half_is_used() -> None:
    m = ir.Module()
    define_conversions(m)
    define_conversions(m)  # once
    text = str(m)
    assert sorted(f.name for f in m.functions if not f.is_declaration) == sorted(LIBCALLS)
    assert text.count("define weak_odr hidden") == 3
    assert uses_half(text) and not uses_half("define i32 @f(float %x)")
    assert uses_half("%v = fadd <8 x half> %a, %b")


def test_all_float16_values_widen_exactly_in_the_jit() -> None:
    """__extendhfsf2 called directly (the JIT runs it in this process: a wrong result, not a crash)."""
    import ctypes

    from loom_llvm.jit import compile_module

    m = ir.Module()
    define_conversions(m)
    wrapper = ir.Function(m, ir.FunctionType(ir.FloatType(), [ir.IntType(16)]), name="widen")
    b = ir.IRBuilder(wrapper.append_basic_block())
    b.ret(b.call(m.globals["__extendhfsf2"], [b.bitcast(wrapper.args[0], ir.HalfType())]))
    jit = compile_module(m)
    widen = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_uint16)(jit.address("widen"))
    halves = np.arange(1 << 16, dtype=np.uint16)
    got = np.array([widen(int(h)) for h in halves[::7]], dtype=np.float32)
    want = halves[::7].view(np.float16).astype(np.float32)
    assert np.array_equal(got, want, equal_nan=True)
