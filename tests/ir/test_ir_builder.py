"""loom.ir_builder: the imperative statement builder, alone and inside extern operations.

The first tests port TVM v0.6's tests/python/unittest/test_ir_builder.py (structure,
the CPU vector add, the GPU vector add); the extern bodies run end to end on interp,
llvm and c and are compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import loom
import loom.testing.ext_dev as ext_dev
from loom import ir_builder
from loom.ir import expr as E
from loom.ir import stmt as S

TARGETS = ["interp", "llvm", "c"]
RNG = np.random.default_rng(7)


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


# -- structure (test_for, test_if) -------------------------------------------------------

def test_for_nests_allocate_loops_and_a_sequence():
    ib = ir_builder.create()
    n = loom.var("n")
    A = ib.allocate("float32", n, name="A", scope="global")
    with ib.for_range(0, n, name="i") as i:
        A[i] = A[i] + 1.0
        with ib.for_range(0, 10, name="j") as j:
            A[j] = A[j] + 2.0
    body = ib.get()
    # TVM wraps the Allocate in a storage_scope AttrStmt; Loom's Allocate carries its scope.
    assert isinstance(body, S.Allocate) and body.scope == "global" and body.buffer_var is A.asnode()
    loop = body.body
    assert isinstance(loop, S.For) and loop.loop_var.name == "i" and loop.extent is n
    assert isinstance(loop.body, S.SeqStmt) and isinstance(loop.body[1], S.For)
    assert loop.body[1].loop_var.name == "j" and loop.body[1].extent.value == 10


def test_if_then_else_stores_with_flat_indices():
    ib = ir_builder.create()
    n = loom.var("n")
    A = ib.pointer("float32", name="A")
    with ib.for_range(0, n, name="i") as i:
        with ib.if_scope((i % 2) == 0):
            A[i] = A[i] + 1.0
        with ib.else_scope():
            A[0] = A[i] + 2.0
    body = ib.get()
    assert isinstance(body, S.For)
    branch = body.body
    assert isinstance(branch, S.IfThenElse) and isinstance(branch.condition, E.EQ)
    assert isinstance(branch.then_case, S.BufferStore) and branch.then_case.indices[0] is body.loop_var
    assert branch.else_case.indices[0].value == 0


def test_loop_names_count_up_as_in_tvm():
    ib = ir_builder.create()
    names = []
    for _ in range(5):
        with ib.for_range(0, 2) as v:
            names.append(v.name)
    assert names == ["i", "j", "k", "i_0", "i_1"]


def test_for_range_extent_kind_and_dtype():
    ib = ir_builder.create()
    n = loom.var("n")
    kinds = {}
    for for_type in ("serial", "parallel", "vectorize", "unroll"):
        with ib.for_range(2, n + 2, name=for_type, dtype="int64", for_type=for_type) as v:
            assert str(v.dtype) == "int64"
            ib.emit(loom.call_extern("int32", "f", v))
    for loop in ib.get():
        kinds[loop.loop_var.name] = loop.kind.value
        assert str(loop.extent.dtype) == "int64" and str(loop.loop_var.dtype) == "int64"
        assert loop.min.value == 2
    assert kinds == {"serial": "serial", "parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


def test_scope_attr_new_scope_emit_and_likely():
    ib = ir_builder.create()
    x = ib.pointer("int32", name="x")
    with ib.new_scope():
        ib.scope_attr(x, "pragma_test", "yes")
        x[0] = 1
    ib.emit(loom.call_extern("int32", "g", x))  # a BufferVar passes its handle
    cond = ib.likely(x[1] > 0)
    ib.emit(S.IfThenElse(cond, S.Evaluate(0)))
    body = ib.get()
    attr, call, branch = body
    assert isinstance(attr, S.AttrStmt) and attr.node is x.asnode() and attr.value.value == "yes"
    assert call.value.args[1] is x.asnode()
    assert branch.condition.op.name == "tir.likely"


def test_allocate_at_the_end_of_a_scope_gets_an_empty_body():
    ib = ir_builder.create()
    ib.allocate("float32", (2, 3), name="t")
    body = ib.get()
    assert isinstance(body, S.Allocate) and [int(e) for e in body.extents] == [2, 3]
    assert isinstance(body.body, S.Evaluate)


def test_vector_content_types_index_lanes():
    ib = ir_builder.create()
    v = ib.allocate("float32x4", 8, name="v")
    v[1] = v[0] + v[2]
    body = ib.get()
    assert str(body.dtype) == "float32" and int(body.extents[0]) == 32
    store = body.body
    assert isinstance(store.indices[0], E.Ramp) and str(store.value.dtype) == "float32x4"
    assert str(store.indices[0].base) == "4"


@pytest.mark.parametrize("make, err, fragment", [
    (lambda ib: ib.else_scope(), loom.LoomValueError, "else_scope must directly follow an if_scope"),
    (lambda ib: ib.for_range(0, 4, for_type="gpu"), loom.LoomValueError, "unknown for_type 'gpu'"),
    (lambda ib: ib.for_range(0, 4.5), loom.LoomTypeError, "end must be an integer"),
    (lambda ib: ib.for_range(0, 4, dtype="float32"), loom.LoomTypeError, "scalar integer"),
    (lambda ib: ib.if_scope(loom.var("n") + 1), loom.LoomTypeError, "must be a scalar bool"),
    (lambda ib: ib.allocate("float32", 0), loom.LoomValueError, "must be positive"),
    (lambda ib: ib.allocate("float32", 2.5), loom.LoomTypeError, "must be integers"),
    (lambda ib: ib.allocate("nonsense", 4), loom.LoomTypeError, "is not a dtype"),
    (lambda ib: ib.emit("x = 1"), loom.LoomTypeError, "emit() takes a Stmt"),
    (lambda ib: ib.buffer_ptr(loom.placeholder((4,))), loom.LoomTypeError, "buffer_ptr takes a Buffer"),
    (lambda ib: ib.scope_attr(3, "k", 1), loom.LoomTypeError, "must be an IR node or a string"),
])
def test_misuse_is_a_clear_error(make, err, fragment):
    with pytest.raises(err, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        make(ir_builder.create())


def test_stores_check_dtype_and_index():
    ib = ir_builder.create()
    x = ib.pointer("float32", name="x")
    with pytest.raises(loom.LoomTypeError, match="the value is int32 but the content type is float32"):
        x[0] = loom.var("n")
    with pytest.raises(loom.LoomTypeError, match="one flat index"):
        x[0, 1] = 1.0
    with pytest.raises(loom.LoomTypeError, match="scalar integer"):
        x[loom.const(1.0)] = 1.0


def test_get_inside_a_scope_and_else_after_else_are_errors():
    ib = ir_builder.create()
    with ib.for_range(0, 2):
        with pytest.raises(loom.LoomValueError, match="inside 1 open scope"):
            ib.get()
    with ib.if_scope(loom.var("c", "bool")):
        pass
    with ib.else_scope():
        pass
    with pytest.raises(loom.LoomValueError, match="else_scope must directly follow"):
        ib.else_scope()


def test_an_error_inside_a_scope_propagates_unchanged():
    ib = ir_builder.create()
    with pytest.raises(ZeroDivisionError):
        with ib.for_range(0, 2):
            1 / 0  # noqa: B018


# -- end to end in extern bodies ---------------------------------------------------------

def _vector_add(A, B, C):
    ib = ir_builder.create()
    a, b, c = ib.buffer_ptr(A), ib.buffer_ptr(B), ib.buffer_ptr(C)
    with ib.for_range(0, A.shape[0], name="i") as i:
        c[i] = a[i] + b[i]
    return ib.get()


@pytest.mark.parametrize("target", TARGETS)
def test_cpu_vector_add(target):
    n = 1024
    A, B = loom.placeholder((n,), name="A"), loom.placeholder((n,), name="B")
    C = loom.extern(A.shape, [A, B], lambda ins, outs: _vector_add(ins[0], ins[1], outs[0]),
                    name="vector_add", dtype="float32")
    f = loom.build(loom.create_schedule(C.op), [A, B, C], target=target)
    a, b, c = rand(n), rand(n), np.zeros(n, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a + b)


def _rows_reversed_even(X, Y, ncols):
    """Y[i, j] = 2 * X[i, ncols - 1 - j] for even j, else -1; through a local row buffer."""
    ib = ir_builder.create()
    x, y = ib.buffer_ptr(X), ib.buffer_ptr(Y)
    t = ib.allocate("float32", (ncols,), name="t", scope="local")
    with ib.for_range(0, X.shape[0]) as i:
        with ib.for_range(0, ncols) as j:
            t[j] = x[i * ncols + j] * 2.0
        with ib.for_range(0, ncols) as j:
            with ib.if_scope(j % 2 == 0):
                y[i * ncols + j] = t[ncols - 1 - j]
            with ib.else_scope():
                y[i * ncols + j] = loom.const(-1.0)
    return ib.get()


@pytest.mark.parametrize("target", TARGETS)
def test_two_dimensional_buffers_allocate_and_branches_between_computes(target):
    M, N = 5, 7
    X = loom.placeholder((M, N), name="X")
    X2 = loom.compute((M, N), lambda i, j: X[i, j] + 3.0, name="X2")
    Y = loom.extern((M, N), [X2], lambda ins, outs: _rows_reversed_even(ins[0], outs[0], N), name="Y")
    Z = loom.compute((M, N), lambda i, j: Y[i, j] + 1.0, name="Z")
    f = loom.build(loom.create_schedule(Z.op), [X, Z], target=target)
    x, z = rand(M, N), np.zeros((M, N), "float32")
    f(x, z)
    want = np.where(np.arange(N) % 2 == 0, ((x + 3) * 2)[:, ::-1], -1.0) + 1
    np.testing.assert_allclose(z, want, rtol=1e-6)


def _loops_of_each_kind(A, B):
    ib = ir_builder.create()
    a, b = ib.buffer_ptr(A), ib.buffer_ptr(B)
    with ib.for_range(0, 4, for_type="parallel") as i:
        with ib.for_range(0, 2, for_type="unroll") as j:
            with ib.for_range(0, 8, for_type="vectorize") as k:
                b[i * 16 + j * 8 + k] = a[i * 16 + j * 8 + k] * 3.0 + 1.0
    return ib.get()


@pytest.mark.parametrize("target", TARGETS)
def test_parallel_unrolled_and_vectorized_loops(target):
    A = loom.placeholder((4, 16), name="A")
    B = loom.extern((4, 16), [A], lambda ins, outs: _loops_of_each_kind(ins[0], outs[0]), name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    a, b = rand(4, 16), np.zeros((4, 16), "float32")
    f(a, b)
    np.testing.assert_allclose(b, a * 3 + 1, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_symbolic_length_with_a_sum_into_a_scalar_allocation(target):
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")

    def prefix_sum(ins, outs):
        ib = ir_builder.create()
        a, out = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        acc = ib.allocate("float32", 1, name="acc", scope="local")
        acc[0] = loom.const(0.0)
        with ib.for_range(0, ins[0].shape[0]) as i:
            acc[0] = acc[0] + a[i]
            out[i] = acc[0]
        return ib.get()

    B = loom.extern(A.shape, [A], prefix_sum, name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    a = rand(33)
    b = np.zeros(33, "float32")
    f(a, b)
    np.testing.assert_allclose(b, np.cumsum(a, dtype="float32"), rtol=1e-5)


def test_a_pointer_is_a_function_parameter():
    ib = ir_builder.create()
    x = ib.pointer("int32", name="x")
    n = loom.var("n")
    with ib.for_range(1, n) as i:
        x[i] = x[i - 1] + i
    func = loom.ir.PrimFunc([x.asnode(), n], ib.get())
    a = np.zeros(6, "int32")
    loom.testing.evaluate(func, a, 6)
    assert a.tolist() == [0, 1, 3, 6, 10, 15]


# -- the GPU test, on the ext_dev device with each host ----------------------------------

def _gpu_vector_add(A, B, C):
    n = A.shape[0]
    max_threads = 32
    ib = ir_builder.create()
    bx, tx = loom.thread_axis("blockIdx.x"), loom.thread_axis("threadIdx.x")
    ib.scope_attr(bx, "thread_extent", (n + max_threads - 1) // max_threads)
    ib.scope_attr(tx, "thread_extent", max_threads)
    idx = bx.var * max_threads + tx.var
    a, b, c = ib.buffer_ptr(A), ib.buffer_ptr(B), ib.buffer_ptr(C)
    with ib.if_scope(ib.likely(idx < n)):
        c[idx] = a[idx] + b[idx]
    return ib.get()


@pytest.mark.parametrize("host", TARGETS)
def test_gpu_vector_add_on_ext_dev(host, registered):
    registered(ext_dev)
    n = loom.var("n")
    A, B = loom.placeholder((n,), name="A"), loom.placeholder((n,), name="B")
    C = loom.extern(A.shape, [A, B], lambda ins, outs: _gpu_vector_add(ins[0], ins[1], outs[0]),
                    name="vector_add", dtype="float32")
    f = loom.build(loom.create_schedule(C.op), [A, B, C], target="ext_dev", target_host=host)
    dev = loom.device("ext_dev")
    a, b = rand(100), rand(100)
    Ad, Bd, Cd = loom.nd.array(a, dev), loom.nd.array(b, dev), loom.nd.empty((100,), "float32", dev)
    f(Ad, Bd, Cd)
    np.testing.assert_allclose(Cd.numpy(), a + b)
