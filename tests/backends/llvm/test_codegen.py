"""LLVM code generation: compiled functions agree with the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import loom  # noqa: E402
from loom.ir import (AssertStmt, BufferStore, For, IfThenElse, IRModule, LetStmt, PrimFunc,  # noqa: E402
                     Allocate, seq)
from loom.ir import expr as E  # noqa: E402
from loom.testing import evaluate  # noqa: E402
from loom_llvm.codegen import codegen_module  # noqa: E402
from llvm_programs import build  # noqa: E402


def _prim(params, body, buffers, name="f"):
    return PrimFunc(params, body, buffer_map={b.data: b for b in buffers}).with_attr("global_symbol", name)


def check(func, *arrays, rtol=1e-5, atol=1e-6):
    want = [a.copy() for a in arrays]
    evaluate(func, *want)
    rc, err = build(func)(*arrays)
    assert rc == 0, err
    for got, exp in zip(arrays, want):
        if isinstance(got, np.ndarray):
            np.testing.assert_allclose(got.astype("float64"), exp.astype("float64"), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "float32", "float64", "float16"])
def test_elementwise_arithmetic(dtype):
    n = 64
    A, B, C = (loom.decl_buffer((n,), dtype, name=x) for x in "ABC")
    i = loom.var("i")
    a, b = A[i], B[i]
    if dtype.startswith("float"):
        val = loom.max(a * b - a, b) + loom.min(a, b) / (b + loom.const(10.0, dtype))
    else:
        val = a * b + a - b + loom.max(a, b) - loom.min(a, b)  # wraps at the width
    f = _prim([A.data, B.data, C.data], For(i, 0, n, "serial", BufferStore(C, val, [i])), [A, B, C])
    rng = np.random.default_rng(0)
    if dtype.startswith("float"):
        a_, b_ = (rng.uniform(-4, 4, n).astype(dtype) for _ in range(2))
    else:
        info = np.iinfo(dtype)
        a_, b_ = (rng.integers(max(info.min, -2**40), min(info.max, 2**40), n, dtype=dtype) for _ in range(2))
    check(f, a_, b_, np.zeros(n, dtype), rtol=1e-2 if dtype == "float16" else 1e-6)


@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
def test_truncdiv_and_floordiv_with_negatives(dtype):
    n = 64
    A, B, Q, R, FQ, FR = (loom.decl_buffer((n,), dtype, name=x) for x in ("A", "B", "Q", "R", "FQ", "FR"))
    i = loom.var("i")
    a, b = A[i], B[i]
    body = seq(BufferStore(Q, loom.truncdiv(a, b), [i]), BufferStore(R, loom.truncmod(a, b), [i]),
               BufferStore(FQ, loom.floordiv(a, b), [i]), BufferStore(FR, loom.floormod(a, b), [i]))
    f = _prim([x.data for x in (A, B, Q, R, FQ, FR)], For(i, 0, n, "serial", body), [A, B, Q, R, FQ, FR])
    rng = np.random.default_rng(1)
    a_ = rng.integers(-100, 100, n).astype(dtype)
    b_ = rng.choice([-7, -3, -1, 1, 2, 5], n).astype(dtype)
    outs = [np.zeros(n, dtype) for _ in range(4)]
    check(f, a_, b_, *outs)
    np.testing.assert_array_equal(outs[2], a_ // b_)
    np.testing.assert_array_equal(outs[3], a_ % b_)
    np.testing.assert_array_equal(outs[0], np.trunc(a_ / b_).astype(dtype))


def test_statements_lets_ifs_while_allocate_select_casts():
    n = 16
    A = loom.decl_buffer((n,), "float32", name="A")
    Out = loom.decl_buffer((n,), "int32", name="Out")
    i, x, k = loom.var("i"), loom.var("x", "float32"), loom.var("k")
    tmp = loom.var("tmp", "handle")
    T = loom.decl_buffer((n,), "int32", name="T", data=tmp)
    Big = loom.decl_buffer((n * 5000,), "int8", name="Big", data=loom.var("big", "handle"))
    cnt = loom.decl_buffer((1,), "int32", name="cnt", data=loom.var("cnt", "handle"))
    loop_count = seq(
        BufferStore(cnt, loom.const(0), [0]),
        loom.ir.While(cnt[0] < loom.cast(x, "int32") * 2, BufferStore(cnt, cnt[0] + 1, [0])))
    body = LetStmt(x, A[i] + loom.const(1.0, "float32"), seq(
        IfThenElse(x > loom.const(3.0, "float32"),
                   BufferStore(T, loom.cast(x, "int32"), [i]),
                   BufferStore(T, loom.select(x < loom.const(0.0, "float32"), -1, 7), [i])),
        Allocate(cnt.data, "int32", [1], True, seq(
            BufferStore(cnt, loom.const(0), [0]),
            IfThenElse(x > loom.const(0.0, "float32"), loop_count),
            BufferStore(Big, loom.cast(cnt[0], "int8"), [i * 4000]),
            BufferStore(Out, T[i] * 100 + loom.cast(Big[i * 4000], "int32")
                        + loom.cast(E.Let(k, i * 2, k + 1), "int32"), [i])))))
    f = _prim([A.data, Out.data],
              Allocate(Big.data, "int8", [n * 5000], True,
                       Allocate(tmp, "int32", [n], True, For(i, 0, n, "serial", body))), [A, Out])
    a = np.linspace(-3, 8, n).astype("float32")
    check(f, a, np.zeros(n, "int32"))


def test_vector_ramp_broadcast_gather_and_bools():
    n = 32
    A, B = loom.decl_buffer((n,), "float32", name="A"), loom.decl_buffer((n,), "float32", name="B")
    M = loom.decl_buffer((n,), "bool", name="M")
    i = loom.var("i")
    r = E.Ramp(i * 8, loom.const(1), 8)
    rev = E.Ramp(i * 8 + 7, loom.const(-1), 8)  # gather and scatter
    body = seq(BufferStore(B, A[rev] * E.Broadcast(loom.const(2.0, "float32"), 8), [r]),
               BufferStore(M, A[r] > E.Broadcast(loom.const(0.0, "float32"), 8), [rev]))
    f = _prim([A.data, B.data, M.data], For(i, 0, n // 8, "serial", body), [A, B, M])
    a = np.random.default_rng(2).standard_normal(n).astype("float32")
    check(f, a, np.zeros(n, "float32"), np.zeros(n, bool))


def test_intrinsics():
    n = 16
    names = ["exp", "log", "sqrt", "fabs", "floor", "ceil", "round", "trunc", "tanh", "sigmoid", "erf",
             "exp2", "log2", "log10", "sin", "cos", "rsqrt"]
    A = loom.decl_buffer((n,), "float32", name="A")
    outs = [loom.decl_buffer((n,), "float32", name=f"O_{x}") for x in names]
    P = loom.decl_buffer((n,), "float32", name="P")
    I = loom.decl_buffer((n,), "int32", name="I")
    i = loom.var("i")
    a = A[i]
    stores = [BufferStore(o, getattr(loom, x)(a), [i]) for o, x in zip(outs, names)]
    stores.append(BufferStore(P, loom.power(a, loom.const(1.5, "float32"))
                              + loom.if_then_else(loom.isnan(a), loom.const(0.0, "float32"), a)
                              + loom.reinterpret("float32", loom.reinterpret("int32", a)), [i]))
    stores.append(BufferStore(I, loom.popcount(loom.cast(a * 10.0, "int32")) + loom.abs(loom.cast(a, "int32") - 3)
                              + loom.if_then_else(loom.likely(i < 8), 1, 2), [i]))
    bufs = [A, *outs, P, I]
    f = _prim([b.data for b in bufs], For(i, 0, n, "serial", seq(*stores)), bufs)
    a_ = np.linspace(0.1, 3.7, n).astype("float32")
    check(f, a_, *[np.zeros(n, "float32") for _ in outs], np.zeros(n, "float32"), np.zeros(n, "int32"), rtol=2e-5)


def test_call_extern_declares_and_calls_c():
    n = 8
    A = loom.decl_buffer((n,), "float64", name="A")
    i = loom.var("i")
    f = _prim([A.data], For(i, 0, n, "serial",
                            BufferStore(A, loom.call_extern("float64", "fmax", A[i], loom.const(2.0, "float64")), [i])),
              [A])
    a = np.arange(n, dtype="float64")
    rc, _ = build(f)(a)
    assert rc == 0
    np.testing.assert_array_equal(a, np.maximum(np.arange(n), 2.0))


def test_failed_assert_returns_minus_one_with_message():
    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    f = _prim([A.data], AssertStmt(n > 4, E.StringImm("n must exceed 4"),
                                   BufferStore(A, loom.const(1.0, "float32"), [0])), [A])
    run = build(f)
    a = np.zeros(3, "float32")
    assert run(a) == (-1, "n must exceed 4")
    assert a[0] == 0.0
    b = np.zeros(5, "float32")
    assert run(b) == (0, None) and b[0] == 1.0


def test_golden_ir_of_a_tiny_function():
    A = loom.decl_buffer((4,), "float32", name="A")
    f = _prim([A.data], BufferStore(A, A[0] * 2.0, [1]), [A], name="tiny").with_attr("tir.noalias", True)
    text = str(codegen_module(IRModule({"tiny": f}), None))
    for line in ['define i32 @"tiny"(i64* %"args", i8** %"error")',
                 'define internal i32 @"tiny.compute"(i8* noalias align 16 %"A", i8** %"error") alwaysinline',
                 '%"A" = inttoptr i64 %"A.word" to i8*',
                 "load float, float* ", "fmul float ", "ret i32 0"]:
        assert line in text, line


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "floor", "fabs", "sigmoid", "tanh", "power", "popcount"])
def test_vectorized_intrinsics_are_vector_calls(name):
    # llvmlite cannot mangle vector overloads itself (llvm.exp.v8f32): the backend does.
    dtype = "int32" if name == "popcount" else "float32"
    A = loom.placeholder((64,), dtype, name="A")
    fn = getattr(loom, name)
    B = loom.compute((64,), lambda i: fn(A[i], A[i]) if name == "power" else fn(A[i]), name="B")
    s = loom.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], 8)
    s[B].vectorize(inner)
    f = loom.build(s, [A, B], target="llvm")
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1 << 20, 64).astype(dtype) if dtype == "int32" else rng.random(64).astype(dtype) + 0.5
    b = np.zeros(64, dtype)
    f(a, b)
    expect = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "floor": np.floor, "fabs": np.abs,
              "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "power": lambda x: x ** x,
              "popcount": lambda x: np.array([bin(int(v)).count("1") for v in x], dtype)}[name](a)
    np.testing.assert_allclose(b, expect, rtol=2e-6)
    assert "<8 x" in f.get_source("ll-raw")


@pytest.mark.parametrize("lanes", [1, 8])
def test_bfloat16_matches_the_interpreter_bit_for_bit(lanes):
    import ml_dtypes

    bf = ml_dtypes.bfloat16
    A, B = loom.placeholder((64,), "bfloat16", name="A"), loom.placeholder((64,), "bfloat16", name="B")
    C = loom.compute((64,), lambda i: A[i] * B[i] + loom.const(0.1, "bfloat16"), name="C")
    D = loom.compute((64,), lambda i: loom.exp(C[i].astype("float32")).astype("bfloat16") - C[i], name="D")
    s = loom.create_schedule(D.op)
    if lanes > 1:
        for T in (C, D):
            s[T].vectorize(s[T].split(T.op.axis[0], lanes)[1])
    f = loom.build(s, [A, B, D], target="llvm")
    ref = loom.build(loom.create_schedule(D.op), [A, B, D], target="interp")
    rng = np.random.default_rng(lanes)
    a, b = (rng.standard_normal(64).astype(bf) for _ in range(2))
    a[:3] = [np.nan, np.inf, -0.0]
    got, want = np.zeros(64, bf), np.zeros(64, bf)
    f(a, b, got)
    ref(a, b, want)
    np.testing.assert_array_equal(got.view("uint16")[3:], want.view("uint16")[3:])
    assert np.isnan(got[0].astype("float32")) and np.isnan(want[0].astype("float32"))
