"""TVM v0.6's hybrid script tests (tests/python/unittest/test_hybrid_script.py), ported to Loom's names.

Each kernel is emulated on numpy, compiled for every target and compared; then its schedule
is dumped with ``loom.hybrid.build`` and the module goes through the same check (its source
parses back, compiles, and runs as Python).  TVM's GPU-only cases run on the CPU targets,
whose thread-bound loops run one thread after another.
"""
# ruff: noqa: F821, F841 - hybrid keywords (output_tensor, range kinds, math) are injected, not imported

import numpy as np

import loom
from loom.hybrid import HYBRID_GLOBALS, HybridModule, script
from loom.ir import For, ProducerStore

from hybrid_classic import round_trip, run_and_check


@script
def outer_product(n, m, a, b):
    """A plain outer product.

    The docstring is skipped by the parser.
    """
    c = output_tensor((n, m), a.dtype)
    for i in range(n):
        for j in range(m):
            assert i < n and j < m, "index out of range!"
            c[i, j] = a[i] * b[j]
    return c


def test_outer_product(target, tmp_path):
    n, m = loom.var("n"), loom.var("m")
    a, b = loom.placeholder((n,), name="a"), loom.placeholder((m,), name="b")
    c = outer_product(n, m, a, b)
    loop = c.op.body
    assert isinstance(loop, For) and loop.loop_var.name == "i" and loop.extent is n
    assert loop.body.loop_var.name == "j" and loop.body.extent is m
    store = loop.body.body.body  # inside the assertion
    assert isinstance(store, ProducerStore) and store.producer.name == "c"
    assert [ix.name for ix in store.indices] == ["i", "j"]

    sizes = {n: 99, m: 101}
    checked = run_and_check(outer_product, [n, m, a, b], target, sizes)
    path = checked.module.save(str(tmp_path / checked.module.name))
    assert path == str(tmp_path / "hybrid_func.py")
    loaded = HybridModule()
    loaded.load(path)
    assert loaded.get_source() == checked.module.get_source() and loaded.name == "hybrid_func"
    again = run_and_check(loaded, checked.ins, target, sizes)
    np.testing.assert_allclose(again.expected[0], checked.expected[0])
    for key in HYBRID_GLOBALS:
        assert key not in globals() and key not in outer_product.__globals__


def test_fanout(target):
    @script
    def fanout(n, a):
        three = 3.0
        b = output_tensor((a.shape[0] - 3,), a.dtype)
        for i in range(a.shape[0] - 3):
            sigma = 0.0
            for j in range(3):
                sigma += a[i + j]
            sigma = sigma / three
            b[i] = sigma
        return b

    n = loom.var("n")
    a = loom.placeholder((n,), "float32", name="a")
    b = fanout(n, a)
    assert b.op.body.loop_var.name == "i"
    round_trip(fanout, [n, a], target, {n: 10})


def test_looptype(target):
    @script
    def looptype(a, b, c):
        d = output_tensor((16,), "int32")
        e = output_tensor((16,), "int32")
        f = output_tensor((16,), "int32")
        for i in parallel(16):
            d[i] = a[i]
        for j in vectorize(16):
            e[j] = b[j]
        for k in unroll(16):
            f[k] = c[k]
        return d, e, f

    a, b, c = (loom.placeholder((16,), "int32", name=x) for x in "abc")
    outs = looptype(a, b, c)
    assert isinstance(outs, list) and len(outs) == 3  # several outputs: a list, as in TVM
    assert [f.kind.value for f in outs[0].op.body.seq] == ["parallel", "vectorized", "unrolled"]
    first, _ = round_trip(looptype, [a, b, c], target)
    assert "for i in parallel(16):" in first.module.get_source()
    emulated = looptype(np.arange(16, dtype="int32"), np.ones(16, "int32"), np.zeros(16, "int32"))
    assert isinstance(emulated, tuple) and len(emulated) == 3  # numpy in: the arrays, as Python returns them


def test_if(target):
    @script
    def if_then_else(a):
        b = output_tensor((10,), "int32")
        c = output_tensor((10,), "int32")
        for i in range(10):
            if i % 2 == 0:
                c[i] = a[i]
            else:
                c[i] = b[i]
        for i in unroll(10):
            b[i] = -1 if i % 2 == 0 else 1
        return b, c

    @script
    def if_triple_condition(a):
        b = output_tensor((10,), "int32")
        for i in range(10):
            if 0 <= i < 5:
                b[i] = a[i]
            else:
                b[i] = a[i] + 1
        return b

    @script
    def if_and(a):
        b = output_tensor((10,), "int32")
        for i in range(10):
            if i >= 0 and i < 5:
                b[i] = a[i]
            else:
                b[i] = a[i] + 1
        return b

    a = loom.placeholder((10,), "int32", name="a")
    for kernel in (if_then_else, if_triple_condition, if_and):
        round_trip(kernel, [a], target)


def test_bind(target):
    @script
    def vec_add(a, b):
        c = output_tensor((100,), "float32")
        for tx in bind("threadIdx.x", 100):
            c[tx] = a[tx] + b[tx]
        return c

    @script
    def raw(a, b):
        c = output_tensor((100,), "float32")
        for i in range(100):
            c[i] = a[i] + b[i]
        return c

    @script
    def row_total(a):
        c = output_tensor((a.shape[0],), a.dtype)
        total = allocate((1,), a.dtype, "local")
        len_i = a.shape[0]
        len_j = a.shape[1]
        for i in bind("threadIdx.x", len_i):
            total[0] = 0.0
            for k in const_range(len_j):
                total[0] += a[i, k]
            c[i] = total[0]
        return c

    a, b = loom.placeholder((100,), name="a"), loom.placeholder((100,), name="b")
    first, _ = round_trip(vec_add, [a, b], target)
    assert "for threadIdx_x in bind('threadIdx.x', 100):" in first.module.get_source()
    c = raw(a, b)
    sch = loom.create_schedule(c.op)
    sch[c].bind(c.op.axis[0], loom.thread_axis("threadIdx.x"))
    first, _ = round_trip(raw, [a, b], target, sch=sch, outs=[c])
    assert "bind('threadIdx.x', 100)" in first.module.get_source()
    round_trip(row_total, [loom.placeholder((8, 4), name="a")], target)


def test_math_intrin(target):
    @script
    def intrin_real(a):
        b = output_tensor((8,), "float32")
        b[0] = sqrt(a[0])
        b[1] = log(a[1])
        b[2] = exp(a[2])
        b[3] = sigmoid(a[3])
        b[4] = power(a[4], a[5])
        b[5] = tanh(a[5])
        b[6] = min(a[4], a[5])
        b[7] = max(a[5], a[6])
        return b

    @script
    def intrin_int(a):
        b = output_tensor((1,), "int32")
        b[0] = popcount(a[0])
        return b

    a8 = loom.placeholder((8,), "float32", name="a")
    b8 = intrin_real(a8)
    f = loom.build(loom.create_schedule(b8.op), [a8, b8], target=target)
    a = np.arange(2, 10).astype("float32")
    got = np.zeros(8, "float32")
    f(a, got)
    np.testing.assert_allclose(got, intrin_real(a), rtol=1e-5)
    mod = loom.hybrid.build(loom.create_schedule(b8.op), [a8], [b8])
    np.testing.assert_allclose(mod(a), intrin_real(a), rtol=1e-6)  # the dumped source, run as Python

    a1 = loom.placeholder((1,), "int32", name="a")
    b1 = intrin_int(a1)
    f = loom.build(loom.create_schedule(b1.op), [a1, b1], target=target)
    a = np.array([1234567890], "int32")
    got = np.zeros(1, "int32")
    f(a, got)
    assert got[0] == intrin_int(a)[0] == bin(1234567890).count("1")
    round_trip(intrin_int, [a1], target)


def test_non_zero(target):
    @script
    def blur(a):
        b = output_tensor((30, 30), "float32")
        for i in range(2, 32):
            for j in range(2, 32):
                s = 0.0
                for di in range(3):
                    for dj in range(3):
                        s += a[i - di, j - dj]
                b[i - 2, j - 2] = s / 9.0
        return b

    @script
    def triangle(a, b):
        c = output_tensor((10, 10), dtype="float32")
        for i in range(10):
            for j in range(i, 10):
                c[i, j] = a[i] * b[j]
        return c

    round_trip(blur, [loom.placeholder((32, 32), "float32", name="a")], target)
    round_trip(triangle, [loom.placeholder((10,), name="a"), loom.placeholder((10,), name="b")], target)


def test_allocate(target):
    @script
    def blur2d(a):
        b = output_tensor((30, 30), "float32")
        for i in range(30):
            ha = allocate((3, 30), "float32")
            for j in range(3):
                for k in range(30):
                    ha[j, k] = a[i + j, k] + a[i + j, k + 1] + a[i + j, k + 2]
            for j in range(30):
                b[i, j] = (ha[0, j] + ha[1, j] + ha[2, j]) / 9.0
        return b

    @script
    def share_vec_add(a, b):
        c = output_tensor((64,), "float32")
        shared = allocate((64,), "float32", "shared")
        for i in bind("threadIdx.x", 64):
            shared[i] = a[i]
        local = allocate((64,), "float32", "local")
        for i in bind("threadIdx.x", 64):
            local[i] = b[i]
        for i in bind("threadIdx.x", 64):
            c[i] = shared[i] + local[i]
        return c

    first, _ = round_trip(blur2d, [loom.placeholder((32, 32), "float32", name="a")], target)
    assert "ha = allocate((3, 30), 'float32', 'global')" in first.module.get_source()
    a, b = loom.placeholder((64,), name="a"), loom.placeholder((64,), name="b")
    first, _ = round_trip(share_vec_add, [a, b], target)
    assert "allocate((64,), 'float32', 'shared')" in first.module.get_source()


def _run(f, arrays, out_shape, dtype="float32"):
    out = np.zeros(out_shape, dtype)
    f(*arrays, out)
    return out


def test_upstream(target):
    @script
    def upstream(a):
        b = output_tensor((20,), "float32")
        for i in range(20):
            b[i] = a[i] * i
        return b

    a, b = loom.placeholder((20,), name="a"), loom.placeholder((20,), name="b")
    c = loom.compute((20,), lambda x: a[x] + b[x], name="c")
    d = upstream(c)
    sch = loom.create_schedule([c.op, d.op])
    f = loom.build(sch, [a, b, d], target=target)
    x, y = np.random.rand(20).astype("float32"), np.random.rand(20).astype("float32")
    np.testing.assert_allclose(_run(f, [x, y], 20), upstream(x + y), rtol=1e-5)
    mod = loom.hybrid.build(sch, [a, b], [d])  # c is computed inside: an allocation of the module
    assert "c = allocate((20,), 'float32', 'global')" in mod.get_source()
    np.testing.assert_allclose(mod(x, y), upstream(x + y), rtol=1e-5)


def test_downstream(target):
    @script
    def downstream(a):
        b = output_tensor((20,), "float32")
        for i in range(20):
            b[i] = a[i] * i
        return b

    a = loom.placeholder((20,), name="a")
    b = downstream(a)
    c = loom.compute((20,), lambda x: b[x] + 1.0, name="c")
    sch = loom.create_schedule(c.op)
    f = loom.build(sch, [a, c], target=target)
    x = np.random.rand(20).astype("float32")
    np.testing.assert_allclose(_run(f, [x], 20), downstream(x) + 1.0, rtol=1e-5)
    round_trip(loom.hybrid.build(sch, [a], [c], "downstream_plus_one"), [a], target)


def test_const_param(target):
    @script
    def add_something(a, b):
        c = output_tensor((11,), "int32")
        for i in range(11):
            c[i] = a[i] + b
        return c

    a = loom.placeholder((11,), "int32", name="a")
    c = add_something(a, loom.const(11, "int32"))
    f = loom.build(loom.create_schedule(c.op), [a, c], target=target)
    x = np.random.randint(0, 100, size=11).astype("int32")
    np.testing.assert_array_equal(_run(f, [x], 11, "int32"), x + 11)
    mod = loom.hybrid.build(loom.create_schedule(c.op), [a], [c])
    np.testing.assert_array_equal(mod(x), x + 11)


def test_value_index(target):
    @script
    def kernel_a(a):
        b = output_tensor((16,), "int32")
        c = output_tensor((4, 4), "int32")
        for i in range(16):
            b[i] = a[i] + 2
            c[i // 4, i % 4] = a[i] + 1
        return b, c

    @script
    def kernel_b(b, a):
        c = output_tensor((4, 4), "int32")
        for i in range(4):
            for j in range(4):
                c[i, j] = a[i * 4 + j] * b[i, j]
        return c

    a = loom.placeholder((16,), "int32", name="a")
    b, c = kernel_a(a)
    d = kernel_b(c, b)
    sch = loom.create_schedule(d.op)
    f = loom.build(sch, [a, d], target=target)
    x = np.random.randint(0, 50, size=16).astype("int32")
    want = kernel_b(*reversed(kernel_a(x)))
    np.testing.assert_array_equal(_run(f, [x], (4, 4), "int32"), want)
    round_trip(loom.hybrid.build(sch, [a], [d]), [a], target)


def test_func_call(target):
    @script
    def foo(a, b):
        for i in range(len(a)):
            a[i] = i + 1.0  # inputs written in place, as TVM allows
        for i in range(len(a)):
            b[i] = i + 1.0
        c = outer_product(10, 10, a, b)
        d = output_tensor(c.shape, c.dtype)
        for i in range(10):
            for j in range(10):
                d[i, j] = c[i, j] + i * j
        return d

    a, b = loom.placeholder((10,), name="a"), loom.placeholder((10,), name="b")
    first, _ = round_trip(foo, [a, b], target)
    assert "a[i] = " in first.module.get_source()


def test_bool(target):
    @script
    def foo(a):
        b = output_tensor(a.shape, a.dtype)
        b[0] = 1.2
        for i in range(1, a.shape[0] - 1):
            if a[i] * a[i - 1] < a[i] or a[i] * a[i - 1] < a[i - 1] or i * a[i] == a[i]:
                b[i] = a[i]
            else:
                b[i] = 0.0
        return b

    round_trip(foo, [loom.placeholder((10,), name="a")], target)


def test_const_range(target):
    @script
    def foo(a, b):
        c = output_tensor(a.shape, a.dtype)
        d = output_tensor(a.shape, "int32")
        for i in const_range(2):
            for j in const_range(5):
                c[i, j] = float32(int32(a[i, j]) + b[i, j])
        for i in const_range(len(b)):
            for j in const_range(len(b[0])):
                d[i, j] = int32(a[i, j] + b[i, j])
        return c, d

    @script
    def goo(a, b):
        c = output_tensor(a.shape, a.dtype)
        len_b = len(b)
        for i in const_range(len_b * 2):
            if i < len_b:
                c[i] = a[i] + b[i]
            else:
                c[i - len_b] = a[i - len_b] + b[i - len_b]
        return c

    @script
    def hoo(a, b):
        c = output_tensor(a.shape, a.dtype)
        for i in range(a.shape[0]):
            for j in const_range(len(b)):
                d = a[i] * b[j]
                d += a[i] + b[j]
                c[i] = d
        return c

    a = loom.placeholder((2, 5), "float32", name="a")
    round_trip(foo, [a, [[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]]], target)
    a = loom.placeholder((5,), "int32", name="a")
    round_trip(goo, [a, [1, 2, 3, 4, 5]], target)
    round_trip(hoo, [a, [1, 2, 3, 4, 5]], target)
