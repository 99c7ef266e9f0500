"""More classic (TVM 0.6) spellings: tag_scope, IterVar kinds, build of a list, InferBound's Map, Block-style reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

import loom
from loom.ir import Evaluate, IterVar, SeqStmt


def test_tag_scope_as_block_and_decorator_and_no_nesting():
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    with loom.tag_scope(tag="gemm"):
        C = loom.compute((n,), lambda i: A[i] * 2.0, attrs={"hello": 1, "arr": [10, 12]})
        E = loom.extern((n,), [A], lambda ins, outs: loom.call_extern("int32", "f", ins[0].data), name="E")
        own = loom.compute((n,), lambda i: A[i], tag="mine")
    assert (C.op.tag, E.op.tag, own.op.tag) == ("gemm", "gemm", "mine")
    assert loom.compute((n,), lambda i: A[i]).op.tag == ""  # the scope closed
    CC = loom.load_json(loom.save_json(C))
    assert CC.op.tag == "gemm" and CC.op.attrs["arr"][0] == 10 and json.dumps(dict(CC.op.attrs))

    @loom.tag_scope(tag="conv")
    def conv(x):
        return loom.compute(x.shape, lambda i: x[i] + 1.0)

    assert conv(A).op.tag == "conv"
    with pytest.raises(ValueError, match="do not nest"):
        with loom.tag_scope(tag="outer"):
            conv(A)
    assert loom.compute((n,), lambda i: A[i]).op.tag == ""  # the failed scope left nothing behind


def test_iter_var_kinds_and_attrs_as_tvm_named_them():
    A = loom.placeholder((20, 20), name="A")
    T = loom.compute((20, 20), lambda i, j: A[i, j])
    s = loom.create_schedule(T.op)
    xo, yo, xi, yi = s[T].tile(T.op.axis[0], T.op.axis[1], x_factor=10, y_factor=5)
    s[T].vectorize(yi)
    s[T].unroll(xi)
    s[T].pragma(xo, "pragma1")
    assert s[T].iter_var_attrs[xi].iter_type == IterVar.Unrolled == "unrolled"
    assert s[T].iter_var_attrs[yi].iter_type == IterVar.Vectorized
    assert [k.value for k in s[T].iter_var_attrs[xo].pragma_keys] == ["pragma1"]
    assert len(s[T].iter_var_attrs[xo].pragma_values) == 1
    assert loom.schedule.IterVar is IterVar and loom.schedule.Buffer is loom.ir.Buffer


def test_tensorize_records_the_intrinsic_on_the_axis():
    x = loom.placeholder((16,), name="x")
    z = loom.compute((16,), lambda i: x[i] * 2.0, name="z")
    intrin = loom.decl_tensor_intrin(z.op, lambda ins, outs: loom.call_packed("f", ins[0].data, outs[0].data))
    A = loom.placeholder((64,), name="A")
    C = loom.compute((64,), lambda i: A[i] * 2.0, name="C")
    s = loom.create_schedule(C.op)
    _, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].tensorize(xi, intrin)
    assert s[C].iter_var_attrs[xi].tensor_intrin is intrin
    assert s[C].iter_var_attrs[xi].iter_type == IterVar.Tensorized


def test_infer_bound_returns_a_map():
    A = loom.placeholder((8,), name="A")
    B = loom.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    bounds = loom.schedule.InferBound(s)
    assert isinstance(bounds, loom.ir.Map)
    assert int(bounds[xi].extent) == 4 and int(bounds[xo].extent) == 2


def test_build_of_a_list_of_lowered_functions():
    A = loom.placeholder((64,), name="A")
    B = loom.placeholder((64,), name="B")
    C = loom.compute(A.shape, lambda *i: A(*i) + B(*i), name="C")
    s = loom.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(xo)
    f1 = loom.lower(s, [A, B, C], name="fadd1")
    f2 = loom.lower(s, [A, B, C], name="fadd2")
    m = loom.build([f1, f2["fadd2"]], "llvm")
    a, b = np.random.rand(64).astype("float32"), np.random.rand(64).astype("float32")
    for fname in ("fadd1", "fadd2"):
        c = np.zeros(64, "float32")
        m[fname](a, b, c)
        np.testing.assert_allclose(c, a + b)
    with pytest.raises(loom.LoomValueError, match="two of the listed functions are named 'fadd1'"):
        loom.build([f1, f1], "llvm")
    with pytest.raises(loom.LoomTypeError, match="item 1 is a Schedule"):
        loom.build([f1, s], "llvm")


def test_simple_mode_body_and_block_style_reads():
    A = loom.placeholder((4,), name="A")
    B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = loom.compute((4,), lambda i: B[i] * 2.0, name="C")
    mod = loom.lower(loom.create_schedule(C.op), [A, C], simple_mode=True)
    assert mod.body is mod["default_function"].body
    seq = SeqStmt([Evaluate(1), Evaluate(2), Evaluate(3)])
    assert seq.first.value.value == 1 and isinstance(seq.rest, SeqStmt) and seq.rest.rest.value.value == 3
    two = loom.ir.IRModule({"f": mod["default_function"], "g": mod["default_function"]})
    with pytest.raises(loom.LoomValueError, match="use mod\\[name\\].body"):
        two.body


def test_reductions_over_fresh_axes_are_structurally_equal():
    # TVM's test_equal_compute: a Reduce defines its axes, as a For its loop variable.
    A = loom.placeholder((10,), name="A")
    k1, k2, k3 = loom.reduce_axis((0, 10), "k"), loom.reduce_axis((0, 10), "k"), loom.reduce_axis((0, 9), "k")
    a, b = loom.sum(A[k1], axis=k1), loom.sum(A[k2], axis=k2)
    assert loom.structural_equal(a, b) and loom.structural_hash(a) == loom.structural_hash(b)
    assert not loom.structural_equal(a, loom.sum(A[k3], axis=k3))
    assert not loom.structural_equal(a, loom.sum(A[9 - k2], axis=k2))
