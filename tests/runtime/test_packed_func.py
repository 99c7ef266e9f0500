"""Kernels calling Python through call_packed, on every CPU backend (the interpreter is the oracle)."""

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import loom
from loom.ir import Evaluate, For, PrimFunc
from loom.ir.intrin import call_packed
from loom.runtime import nd
from loom.runtime.packed import PackedFuncError

TARGETS = ["interp", "llvm", "c"]


def addone_program(n=16, name="test.packed.addone"):
    A = loom.placeholder((n,), name="A")
    B = loom.extern(A.shape, [A], lambda ins, outs: call_packed(name, ins[0], outs[0]), name="C")
    return loom.create_schedule(B.op), A, B


@pytest.mark.parametrize("target", TARGETS)
def test_extern_op_tutorial_addone(reg, target):
    seen = []

    def addone(x, y):  # the tutorial's callback, with loom for tvm
        seen.append((type(x), type(y), x.shape, x.dtype))
        nd.array(x.asnumpy() + 1).copyto(y)

    reg("test.packed.addone", addone)
    s, A, B = addone_program()
    f = loom.build(s, [A, B], target=target)
    a = nd.array(np.random.uniform(size=16).astype("float32"))
    b = nd.array(np.zeros(16, "float32"))
    f(a, b)
    np.testing.assert_allclose(b.asnumpy(), a.asnumpy() + 1, rtol=1e-6)
    assert seen == [(nd.NDArray, nd.NDArray, (16,), "float32")]


@pytest.mark.parametrize("target", TARGETS)
def test_arrays_are_views_of_the_buffers(reg, target):
    def fill(x, y):
        y.numpy()  # a copy: writing it changes nothing
        np.asarray(y)[...] = np.asarray(x)[::-1] * 10  # the view: writes the output in place

    reg("test.packed.view", fill)
    n = loom.var("n")
    A = loom.placeholder((n, 3), "int32", name="A")
    B = loom.extern(A.shape, [A], lambda ins, outs: call_packed("test.packed.view", ins[0], outs[0]), name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    a = np.arange(15, dtype="int32").reshape(5, 3)
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_array_equal(b, a[::-1] * 10)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_through_a_packed_call_then_bias(reg, target):
    """The extern-op tutorial's first part, with a Python matmul in place of BLAS."""

    def matmul(a, b, c, transa, transb):
        x, y = a.numpy(), b.numpy()
        c.copyfrom((x.T if transa else x) @ (y.T if transb else y))

    reg("test.packed.matmul", matmul)
    n, l, m = 8, 5, 6
    bias = loom.var("bias", dtype="float32")
    A = loom.placeholder((n, l), name="A")
    B = loom.placeholder((l, m), name="B")
    C = loom.extern((n, m), [A, B], lambda ins, outs: call_packed("test.packed.matmul", ins[0], ins[1], outs[0],
                                                                  False, False), name="C")
    D = loom.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    f = loom.build(loom.create_schedule(D.op), [A, B, D, bias], target=target)
    a, b = (np.random.uniform(size=s).astype("float32") for s in ((n, l), (l, m)))
    d = np.zeros((n, m), "float32")
    f(a, b, d, 10.0)
    np.testing.assert_allclose(d, a @ b + 10, rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_packed_stage_between_scheduled_stages(reg, target):
    reg("test.packed.neg", lambda x, y: y.copyfrom(-x.numpy()))
    A = loom.placeholder((10, 4), name="A")
    B = loom.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="B")
    C = loom.extern(B.shape, [B], lambda ins, outs: call_packed("test.packed.neg", ins[0], outs[0]), name="C")
    D = loom.compute(C.shape, lambda i, j: C[i, j] + 1.0, name="D")
    s = loom.create_schedule(D.op)
    xo, _ = s[D].split(D.op.axis[0], factor=4)
    s[D].parallel(xo)
    f = loom.build(s, [A, D], target=target)
    a = np.random.uniform(size=(10, 4)).astype("float32")
    d = np.zeros_like(a)
    f(a, d)
    np.testing.assert_allclose(d, -2 * a + 1, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_scalar_arguments_arrive_as_python_values(reg, target):
    got = []
    reg("test.packed.scalars", lambda *xs: got.append(xs))
    x = loom.var("x")
    k = loom.var("k", "int64")
    u = loom.var("u", "uint32")
    h = loom.var("h", "float64")
    f32 = loom.var("f", "float32")
    body = Evaluate(call_packed("test.packed.scalars", x, x * 2 - 7, k, u, h, f32, True, x > 0, "tag", -3, 0.25))
    m = loom.build(PrimFunc([x, k, u, h, f32], body), target=target, name="scalars")
    m(5, -(2 ** 40), 2 ** 32 - 1, -1.0 / 3, 1.5)
    assert got == [(5, 3, -(2 ** 40), 2 ** 32 - 1, -1.0 / 3, 1.5, True, True, "tag", -3, 0.25)]
    assert [type(v) for v in got[0]] == [int, int, int, int, float, float, bool, bool, str, int, float]


@pytest.mark.parametrize("target", TARGETS)
def test_strided_and_offset_buffers(reg, target):
    got = {}

    def grab(x, y):
        got["x"] = (x.shape, x.strides, x.numpy())
        y.copyfrom(x.numpy() * 2)

    reg("test.packed.grab", grab)
    s0 = loom.var("s0")
    X = loom.decl_buffer((4, 3), "float32", name="X", strides=[s0, 1])
    Y = loom.decl_buffer((4, 3), "float32", name="Y", strides=[1, 4])
    f = PrimFunc([X.data, Y.data], Evaluate(call_packed("test.packed.grab", X, Y)), buffer_map={X.data: X, Y.data: Y})
    m = loom.build(f, target=target, name="grab")
    big = np.arange(20, dtype="float32").reshape(4, 5)
    y = np.zeros((3, 4), "float32").T
    m(big[:, :3], y)
    assert got["x"][:2] == ((4, 3), (5, 1))
    np.testing.assert_array_equal(got["x"][2], big[:, :3])
    np.testing.assert_array_equal(y, big[:, :3] * 2)

    # A buffer at an element offset inside the argument's memory, written through.
    reg("test.packed.tail", lambda t: t.copyfrom(t.numpy() + 100))
    A = loom.decl_buffer((6,), "int32", name="A")
    T = loom.decl_buffer((2, 2), "int32", name="T", data=A.data, elem_offset=1, strides=[3, 1])
    m = loom.build(PrimFunc([A.data], Evaluate(call_packed("test.packed.tail", T)), buffer_map={A.data: A}),
                   target=target, name="tail")
    a = np.arange(6, dtype="int32")
    m(a)
    assert a.tolist() == [0, 101, 102, 3, 104, 105]


def test_interpreter_checks_the_array_bounds(reg):
    reg("test.packed.tail", lambda t: None)
    A = loom.decl_buffer((6,), "int32", name="A")
    T = loom.decl_buffer((3, 3), "int32", name="T", data=A.data, elem_offset=1, strides=[3, 1])
    m = loom.build(PrimFunc([A.data], Evaluate(call_packed("test.packed.tail", T)), buffer_map={A.data: A}),
                   target="interp", name="tail")
    with pytest.raises(loom.testing.OutOfBoundsError, match=r"reaching elements 1\.\.9 of its memory A, which has 6"):
        m(np.arange(6, dtype="int32"))


@pytest.mark.parametrize("target", TARGETS)
def test_handles_arrive_as_addresses(reg, target):
    got = []
    reg("test.packed.ptr", lambda p: got.append(p))
    A = loom.decl_buffer((4,), "float32", name="A")
    m = loom.build(PrimFunc([A.data], Evaluate(call_packed("test.packed.ptr", A.data)), buffer_map={A.data: A}),
                   target=target, name="ptr")
    a = np.zeros(4, "float32")
    m(a)
    assert len(got) == 1 and isinstance(got[0], int) and got[0] != 0
    if target != "interp":  # the interpreter runs on memory of its own
        assert got[0] == a.ctypes.data


@pytest.mark.parametrize("target", TARGETS)
def test_errors_reach_the_caller(reg, target):
    def boom(x, y):
        raise KeyError("bad row")

    reg("test.packed.boom", boom)
    s, A, B = addone_program(name="test.packed.boom")
    f = loom.build(s, [A, B], target=target)
    a, b = np.ones(16, "float32"), np.zeros(16, "float32")
    message = r"call_packed\('test.packed.boom'\): the function raised KeyError"
    with pytest.raises(PackedFuncError, match=message) as info:
        f(a, b)
    assert isinstance(info.value, loom.LoomError) and isinstance(info.value.__cause__, KeyError)
    # The module stays usable, and a function replaced after the build is the one that runs.
    reg("test.packed.boom", lambda x, y: y.copyfrom(x))
    f(a, b)
    assert b.tolist() == a.tolist()


@pytest.mark.parametrize("target", TARGETS)
def test_missing_function_at_call_time(target):
    s, A, B = addone_program(name="test.packed.never.registered")
    f = loom.build(s, [A, B], target=target)  # building needs no function
    with pytest.raises(PackedFuncError, match="no global function 'test.packed.never.registered' is registered"):
        f(np.ones(16, "float32"), np.zeros(16, "float32"))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fail", [False, True])
def test_calls_from_parallel_loops(reg, target, fail):
    rows, lock = [], threading.Lock()

    def row(i, a, failing):
        with lock:
            rows.append(i)
        if failing and i == 2:
            raise RuntimeError("row 2 failed")
        np.asarray(a)[i] = i * 10.0

    reg("test.packed.row", row)
    A = loom.decl_buffer((4, 3), "float32", name="A")
    i = loom.var("i")
    body = For(i, 0, 4, "parallel", Evaluate(call_packed("test.packed.row", i, A, fail)))
    m = loom.build(PrimFunc([A.data], body, buffer_map={A.data: A}), target=target, name="rows")
    a = np.zeros((4, 3), "float32")
    if fail:  # an OpenMP worker's exception is found by its message
        with pytest.raises(PackedFuncError, match="row 2 failed") as info:
            m(a)
        assert isinstance(info.value.__cause__, RuntimeError)
        return
    m(a)
    assert sorted(rows) == [0, 1, 2, 3]
    np.testing.assert_array_equal(a, np.repeat(np.arange(4, dtype="float32")[:, None] * 10, 3, axis=1))


def test_generated_code_calls_the_runtime_slot():
    s, A, B = addone_program()
    c_src = loom.build(s, [A, B], target="c").get_source()
    assert "loom_call_packed_t loom_rt_call_packed = 0;" in c_src
    assert 'loom_rt_call_packed("test.packed.addone"' in c_src
    ll = loom.build(s, [A, B], target="llvm").get_source("ll-raw")
    assert "@\"loom_rt_call_packed\" = global" in ll and "@\"packed.codes\"" in ll


_CHILD = textwrap.dedent("""
    import sys, numpy as np, loom
    from loom.runtime.registry import register_func
    if sys.argv[2] == "registered":
        register_func("test.packed.exported", lambda x, y: y.copyfrom(x.numpy() * 3))
    m = loom.runtime.load_module(sys.argv[1])
    a = np.arange(12, dtype="float32").reshape(4, 3); b = np.zeros_like(a)
    try:
        m(a, b)
        print("ok", np.array_equal(b, a * 3))
    except loom.LoomError as err:
        print(type(err).__name__, err)
""")


@pytest.mark.parametrize("target", TARGETS)
def test_exported_library_calls_what_the_loading_process_registered(target, tmp_path):
    n = loom.var("n")
    A = loom.placeholder((n, 3), name="A")
    B = loom.extern(A.shape, [A], lambda ins, outs: call_packed("test.packed.exported", ins[0], outs[0]), name="B")
    path = str(tmp_path / ("m.so" if target != "interp" else "m.loom"))
    loom.build(loom.create_schedule(B.op), [A, B], target=target).export_library(path)
    out = {}
    for mode in ("registered", "missing"):
        done = subprocess.run([sys.executable, "-c", _CHILD, path, mode], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        out[mode] = done.stdout.strip()
    assert out["registered"] == "ok True"
    assert out["missing"].startswith("PackedFuncError call_packed('test.packed.exported'): no global function")
