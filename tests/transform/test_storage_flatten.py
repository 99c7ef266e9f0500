"""StorageFlatten: tensors become bound or allocated buffers."""

import random

import numpy as np
import pytest

import loom
from loom.errors import IRError
from loom.ir import (
    Allocate, Array, AttrStmt, BufferLoad, BufferStore, For, IterVar, Map, PrimFunc, ProducerRealize,
    ProducerLoad, ProducerStore, Range, Stmt, collect, seq,
)
from loom.ir.intrin import call_intrin
from loom.te.tensor import ComputeOp, PlaceholderOp
from loom.testing import AssertionFailed, evaluate
from loom.transform import PassContext
from loom.transform.storage_flatten import StorageFlatten, storage_flatten

N = 8


def tensor(name, shape=(N,), inputs=None):
    if inputs is None:
        return PlaceholderOp(name, shape, "int32").output(0)
    axes = tuple(IterVar(Range.from_min_extent(0, s), loom.var(f"{name}_ax{k}")) for k, s in enumerate(shape))
    return ComputeOp(name, axes, (), (loom.const(0),)).output(0)


def bound_func(body, binds):
    """A PrimFunc over the buffers of ``binds`` (in order), carrying them as tensor_binds."""
    bufs = list(binds.values())
    return PrimFunc([b.data for b in bufs], body, buffer_map={b.data: b for b in bufs},
                    attrs={"tensor_binds": Map(binds)})


def realize(t, lo, ext, body, scope=""):
    return ProducerRealize(t, (Range.from_min_extent(lo, ext),), loom.const(True), body, scope)


def loop(lo, hi, fn):
    i = loom.var("i")
    return For(i, lo, hi - lo, "serial", fn(i))


def pipeline(seed):
    """X -> S1 -> ... -> Sk -> Y, each stage realized over a shrinking suffix [m_k, N)."""
    r = random.Random(seed)
    X, Y = tensor("X"), tensor("Y")
    stages, mins = [tensor(f"S{k}", inputs=True) for k in range(r.randint(1, 3))], []
    m = 0
    for _ in stages:
        m = r.randint(m, N - 1)
        mins.append(m)
    prev = X
    computes = []
    for t, m in zip(stages, mins):
        c, p = r.randint(-3, 3), prev
        computes.append(loop(m, N, lambda i, t=t, p=p, c=c: ProducerStore(t, p[i] * c + X[i], [i])))
        prev = t
    body = seq(*computes, loop(mins[-1], N, lambda i: ProducerStore(Y, prev[i] + 1, [i])))
    for t, m in reversed(list(zip(stages, mins))):
        body = realize(t, m, N - m, body, r.choice(["", "local", "global"]))
    Xb, Yb = loom.decl_buffer((N,), "int32", name="X"), loom.decl_buffer((N,), "int32", name="Y")
    return bound_func(body, {X: Xb, Y: Yb}), stages, mins


def reference(seed, x, y):
    r = random.Random(seed)
    stages = r.randint(1, 3)
    mins, m = [], 0
    for _ in range(stages):
        m = r.randint(m, N - 1)
        mins.append(m)
    prev = x.copy()
    for _ in range(stages):
        prev = prev * r.randint(-3, 3) + x  # the same draws, in the same order, as pipeline()
    y[mins[-1]:] = prev[mins[-1]:] + 1
    return y


@pytest.mark.parametrize("seed", range(30))
def test_random_pipelines_compute_the_same_values(seed):
    f, _, _ = pipeline(seed)
    g = StorageFlatten()(f)
    loom.verify_well_formed(g)
    assert "tensor_binds" not in g.attrs
    x = np.random.default_rng(seed).integers(-5, 6, N).astype("int32")
    y = np.zeros(N, "int32")
    evaluate(g, x, y)
    np.testing.assert_array_equal(y, reference(seed, x, np.zeros(N, "int32")))


def test_realize_becomes_allocate_with_shifted_indices():
    """``realize S[2:8]`` allocates 6 elements and ``S[i]`` becomes ``S[i - 2]``."""
    X, Y, S = tensor("X"), tensor("Y"), tensor("S", inputs=True)
    Xb, Yb = loom.decl_buffer((N,), "int32", name="X"), loom.decl_buffer((N,), "int32", name="Y")
    i, j = loom.var("i"), loom.var("j")
    body = realize(S, 2, 6, seq(For(i, 2, 6, "serial", ProducerStore(S, X[i] + 1, [i])),
                                For(j, 2, 6, "serial", ProducerStore(Y, S[j] * 2, [j]))))
    got = storage_flatten(bound_func(body, {X: Xb, Y: Yb})).body
    Sb = got.body.seq[0].body.buffer
    want = Allocate(Sb.data, "int32", [6], True, seq(
        For(i, 2, 6, "serial", BufferStore(Sb, Xb[i] + 1, [i - 2])),
        For(j, 2, 6, "serial", BufferStore(Yb, BufferLoad(Sb, [j - 2]) * 2, [j]))), "global")
    loom.assert_structural_equal(got, want)
    assert [int(x) for x in Sb.shape] == [6] and Sb.name == "S"
    assert got.body.seq[1].body.value.a.buffer is Sb  # one buffer object for every access


def test_storage_scope_reaches_allocate_and_buffer():
    """The realize's scope becomes the allocation's and the buffer's scope."""
    X, S = tensor("X"), tensor("S", inputs=True)
    Xb = loom.decl_buffer((N,), "int32", name="X")
    body = realize(S, 0, N, loop(0, N, lambda i: ProducerStore(S, X[i], [i])), scope="shared")
    got = storage_flatten(bound_func(body, {X: Xb})).body
    assert got.scope == "shared" and got.body.body.buffer.scope == "shared"


def test_storage_align_pads_strides_and_allocation():
    """storage_align(dim 0, 16, 3) on a 4x8 region: row stride 19, 4 * 19 elements."""
    X, S = tensor("X", (4, N)), tensor("S", (4, N), inputs=True)
    Xb = loom.decl_buffer((4, N), "int32", name="X")
    i, j = loom.var("i"), loom.var("j")
    store = For(i, 0, 4, "serial", For(j, 0, N, "serial", ProducerStore(S, X[i, j], [i, j])))
    align = AttrStmt(S, "storage_align", call_intrin("int32", "tir.tvm_tuple", 0, 16, 3), store)
    body = ProducerRealize(S, (Range.from_min_extent(0, 4), Range.from_min_extent(0, N)), loom.const(True), align)
    got = storage_flatten(bound_func(body, {X: Xb})).body
    Sb = got.body.body.body.buffer
    assert [int(loom.arith.simplify(s)) for s in Sb.strides] == [19, 1]
    assert int(loom.arith.simplify(got.extents[0])) == 76 and isinstance(got.body, For)


def test_double_buffer_scope_moves_to_the_data_var():
    """The double_buffer_scope attribute names the allocated buffer's data var."""
    X, S = tensor("X"), tensor("S", inputs=True)
    Xb = loom.decl_buffer((N,), "int32", name="X")
    inner = AttrStmt(S, "double_buffer_scope", 1, loop(0, N, lambda i: ProducerStore(S, X[i], [i])))
    got = storage_flatten(bound_func(realize(S, 0, N, inner), {X: Xb})).body
    attr = got.body
    assert attr.attr_key == "double_buffer_scope" and attr.node is got.buffer_var


def test_extern_placeholder_buffers_use_tensor_storage():
    """An extern body's placeholder buffer reads and writes the bound tensor's buffer."""
    X, Y = tensor("X"), tensor("Y")
    Xb, Yb = loom.decl_buffer((N,), "int32", name="X"), loom.decl_buffer((N,), "int32", name="Y")
    px, py = loom.decl_buffer((N,), "int32", name="px"), loom.decl_buffer((N,), "int32", name="py")
    ext_body = loop(0, N, lambda i: BufferStore(py, px[i] * 5, [i]))
    body = AttrStmt(Array([px, X]), "extern_buffer_bind", 1, AttrStmt(Array([py, Y]), "extern_buffer_bind", 1, ext_body))
    g = storage_flatten(bound_func(body, {X: Xb, Y: Yb}))
    loom.verify_well_formed(g)
    x, y = np.arange(N, dtype="int32"), np.zeros(N, "int32")
    evaluate(g, x, y)
    np.testing.assert_array_equal(y, np.arange(N) * 5)


def test_instrument_bound_checkers_names_the_buffer():
    """An out-of-bounds store fails its assertion, which names the buffer."""
    X, Y = tensor("X"), tensor("Y")
    Xb, Yb = loom.decl_buffer((N,), "int32", name="X"), loom.decl_buffer((N,), "int32", name="Y")
    body = loop(0, N, lambda i: ProducerStore(Y, X[i], [i + 1]))  # writes Y[8]
    f = bound_func(body, {X: Xb, Y: Yb})
    plain = StorageFlatten()(f)
    assert not loom.ir.collect(plain.body, lambda n: isinstance(n, loom.ir.AssertStmt))
    with PassContext(config={"tir.instrument_bound_checkers": True}):
        checked = StorageFlatten()(f)
    with pytest.raises(AssertionFailed, match="buffer Y"):
        evaluate(checked, np.zeros(N, "int32"), np.zeros(N, "int32"))


def test_bound_checks_respect_if_then_else_guards():
    """A padded read ``if_then_else(i > 0, X[i - 1], 0)`` passes its check at i = 0."""
    X, Y = tensor("X"), tensor("Y")
    Xb, Yb = loom.decl_buffer((N,), "int32", name="X"), loom.decl_buffer((N,), "int32", name="Y")
    body = loop(0, N, lambda i: ProducerStore(Y, loom.if_then_else(i > 0, X[i - 1], 0), [i]))
    with PassContext(config={"tir.instrument_bound_checkers": True}):
        g = StorageFlatten()(bound_func(body, {X: Xb, Y: Yb}))
    y = np.zeros(N, "int32")
    evaluate(g, np.arange(N, dtype="int32") + 1, y)
    np.testing.assert_array_equal(y, np.arange(N))


def test_unrealized_unbound_tensor_is_an_error():
    """Reading a tensor with no storage names it."""
    X, S = tensor("X"), tensor("S", inputs=True)
    Xb = loom.decl_buffer((N,), "int32", name="X")
    with pytest.raises(IRError, match="tensor S"):
        storage_flatten(bound_func(loop(0, N, lambda i: ProducerStore(X, S[i], [i])), {X: Xb}))


# -- TVM 0.6's statement form: ir_pass.StorageFlatten(stmt, extern_buffer, cache_line_size) ---------

def _scheduled_stmt():
    m = loom.size_var("m")
    A = loom.placeholder((m, 16), name="A")
    A1 = loom.compute((m, 16), lambda i, j: A[i, j] * 2.0, name="A1")
    A2 = loom.compute((m, 16), lambda i, j: A1[i, j] + 3.0, name="A2")
    s = loom.create_schedule(A2.op)
    xo, _ = s[A2].split(A2.op.axis[0], 8)
    s[A1].compute_at(s[A2], xo)
    s[A1].storage_align(A1.op.axis[0], 4, 1)
    stmt = loom.schedule.ScheduleOps(s, loom.schedule.InferBound(s))
    return stmt, A, A2


def test_a_statement_flattens_as_the_function_with_its_binds_does():
    stmt, A, A2 = _scheduled_stmt()
    Ab = loom.decl_buffer(A.shape, A.dtype, name="A")
    A2b = loom.decl_buffer(A2.shape, A2.dtype, name="A2")
    got = storage_flatten(stmt, {A: Ab, A2: A2b}, 64)
    want = storage_flatten(bound_func(stmt, {A: Ab, A2: A2b})).body
    assert isinstance(got, Stmt) and loom.structural_equal(got, want)
    allocs = collect(got, lambda n: isinstance(n, Allocate))
    assert [a.buffer_var.name for a in allocs] == ["A1"]
    assert not collect(got, lambda n: isinstance(n, (ProducerLoad, ProducerStore, ProducerRealize)))


@pytest.mark.parametrize("size", [0, -64, 64.0, True, "64"])
def test_a_bad_cache_line_size_is_refused(size):
    stmt, A, A2 = _scheduled_stmt()
    with pytest.raises(loom.LoomValueError, match="cache_line_size must be a positive int"):
        storage_flatten(stmt, {}, size)


def test_storage_flatten_refuses_what_is_neither_function_nor_statement():
    with pytest.raises(loom.LoomTypeError, match="PrimFunc or a Stmt, got int"):
        storage_flatten(3)
