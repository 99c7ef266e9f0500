"""LegalizeNarrowFloats: 16-bit float arithmetic in float32, with the same bits as before on the interpreter."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import loom
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.function import PrimFunc
from loom.ir.functor import collect
from loom.transform import LegalizeNarrowFloats, legalize_narrow_floats

NARROW = ("float16", "bfloat16")


def _computations_on_narrow(node: object) -> list[object]:
    """Operations (not moves or conversions) that still take or give a 16-bit float."""
    moves = (E.BufferLoad, E.Cast, E.Var, E.FloatImm, E.Select, E.Let, E.Broadcast, E.Shuffle)

    def bad(n: object) -> bool:
        if not isinstance(n, E.PrimExpr) or isinstance(n, moves):
            return False
        if isinstance(n, E.Call) and getattr(n.op, "name", "") in ("tir.if_then_else", "tir.reinterpret"):
            return False
        kids = [getattr(n, f) for f in ("a", "b") if hasattr(n, f)] + list(getattr(n, "args", ()))
        return any(str(x.dtype.element_of()) in NARROW for x in [n, *kids] if isinstance(x, E.PrimExpr))

    return collect(node, bad)


@pytest.mark.parametrize("dtype", NARROW)
def test_every_operation_is_computed_in_float32(dtype: str) -> None:
    a, b = loom.var("a", dtype), loom.var("b", dtype)
    i, d = loom.var("i"), loom.var("d", "float64")
    exprs = [a * b + a / b - a, loom.max(a, b), loom.min(a, b), a < b, a == b, loom.exp(a), loom.sqrt(a) + b,
             loom.isnan(a), i.astype(dtype), d.astype(dtype), a.astype("int32"),
             a.astype("float64"), a.astype("float16" if dtype == "bfloat16" else "bfloat16"), loom.abs(a)]
    for e in exprs:
        out = legalize_narrow_floats(e)
        assert out.dtype == e.dtype, (e, out)
        assert not _computations_on_narrow(out), (e, out)


def test_conversions_round_once_or_as_ml_dtypes() -> None:
    i, d = loom.var("i"), loom.var("d", "float64")
    assert str(legalize_narrow_floats(i.astype("float16"))) == "float16(float64(i))"  # exact, then one rounding
    assert str(legalize_narrow_floats(d.astype("float16"))) == "float16(d)"
    assert str(legalize_narrow_floats(d.astype("bfloat16"))) == "bfloat16(float32(d))"


def test_moves_keep_their_narrow_values_and_the_result_is_stable() -> None:
    a, b, c = loom.var("a", "float16"), loom.var("b", "float16"), loom.var("c", "bool")
    for e in (loom.select(c, a, b), loom.if_then_else(c, a, b), E.Broadcast(a, 4), a):
        assert legalize_narrow_floats(e) is e
    once = legalize_narrow_floats(a * b)
    assert legalize_narrow_floats(once) is once
    f, x = loom.var("f"), loom.var("x", "float32")
    for e in (f * 2, x * x + 1.0, x.astype("float64")):  # nothing narrow: the same node back
        assert legalize_narrow_floats(e) is e


@pytest.mark.parametrize("dtype", NARROW)
def test_the_interpreter_gives_the_same_bits_before_and_after(dtype: str) -> None:
    """The pass changes how the IR says it, not what it computes (the interpreter rounds per operation)."""
    n = 64
    A = loom.decl_buffer((n,), dtype, name="A")
    B = loom.decl_buffer((n,), dtype, name="B")
    X = loom.decl_buffer((n,), "float64", name="X")
    C = loom.decl_buffer((n,), dtype, name="C")
    D = loom.decl_buffer((n,), "int32", name="D")
    k = loom.var("k")
    value = (loom.select(A[k] < B[k], A[k] * B[k], A[k] / B[k]) + X[k].astype(dtype) + loom.exp(A[k])
             - k.astype(dtype))
    body = S.For(k, 0, n, "serial", S.SeqStmt([
        S.BufferStore(C, value, [k]),
        S.BufferStore(D, (loom.max(A[k], B[k]) > C[k]).astype("int32"), [k])]))
    f = PrimFunc([A.data, B.data, X.data, C.data, D.data], body,
                 buffer_map={A.data: A, B.data: B, X.data: X, C.data: C, D.data: D})
    g = LegalizeNarrowFloats()(f)
    assert not _computations_on_narrow(g.body) and _computations_on_narrow(f.body)
    npd = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(n) * 4).astype(npd), (rng.standard_normal(n) * 4).astype(npd)
    x = rng.standard_normal(n) * 1e3
    outs = []
    for func in (f, g):
        c, d = np.zeros(n, npd), np.zeros(n, "int32")
        with np.errstate(all="ignore"):
            loom.build(func, target="interp")(a, b, x, c, d)
        outs.append((c.view(np.uint16), d))
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])
