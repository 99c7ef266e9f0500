"""Host assembly of the llvm target: vectorized loops use the CPU's vector instructions."""

from __future__ import annotations

import platform
import re

import pytest

pytest.importorskip("llvmlite")

import loom  # noqa: E402
from programs import blocked_matmul  # noqa: E402

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="the patterns below are x86-64 mnemonics")

# A packed single-precision add/multiply/FMA (SSE or AVX forms) on a vector register.
_PACKED = re.compile(r"^\s*v?(add|mul|fmadd\d*|fmsub\d*)ps\s.*%[xyz]mm\d+", re.MULTILINE)


def _function_asm(asm: str, symbol: str) -> str:
    """The instructions of ``symbol`` in ``asm`` (from its label to its ``.Lfunc_end``)."""
    start = asm.index(f"\n{symbol}:")
    return asm[start:asm.index(".Lfunc_end", start)]


def test_vectorized_loop_uses_packed_vector_instructions():
    n = loom.var("n")
    A, B = loom.placeholder((n,), name="A"), loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] * B[i] + A[i], name="C")
    s = loom.create_schedule(C.op)
    _, inner = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(inner)
    asm = loom.build(s, [A, B, C], target="llvm", name="axpy").get_source("asm")
    assert _PACKED.search(_function_asm(asm, "axpy")), "no packed float arithmetic in the vectorized loop"


def test_parallel_body_keeps_its_vector_code_and_alias_facts():
    """The outlined body of the blocked matmul computes on vectors, and its buffers keep
    their noalias facts (as alias scopes) after passing through the closure."""
    s, args = blocked_matmul(64, 64, 64)
    f = loom.build(s, args, target="llvm", name="mm")
    worker = _function_asm(f.get_source("asm"), "mm.parallel")
    assert len(_PACKED.findall(worker)) >= 8
    ll = f.get_source("ll")
    body = ll[ll.index("define internal void @mm.parallel("):]
    body = body[:body.index("\n}")]
    assert re.search(r"fmul .*<8 x float>", body) and "!noalias" in body and "!alias.scope" in body


def test_serial_loop_is_vectorized_by_llvm_inside_a_parallel_region():
    """No ``vectorize`` in the schedule: LLVM's loop vectorizer still sees a plain inner loop."""
    A = loom.placeholder((8, 1024), name="A")
    B = loom.compute((8, 1024), lambda i, j: A[i, j] * 3.0 + 1.0, name="B")
    s = loom.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    f = loom.build(s, [A, B], target="llvm", name="affine")
    assert _PACKED.search(_function_asm(f.get_source("asm"), "affine.parallel"))
