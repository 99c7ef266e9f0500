"""Tutorial "Get Started with Tensor Expression": vector add, built, saved, linked, loaded, exported."""

import numpy as np

import loom
from loom.contrib import cc, util


def test_vector_add_on_the_cpu_round_trips_through_an_object_and_a_library():
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.placeholder((n,), name="B")
    C = loom.compute(A.shape, lambda i: A[i] + B[i], name="C")
    assert isinstance(C, loom.te.Tensor)
    s = loom.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    fadd = loom.build(s, [A, B, C], "llvm", target_host="llvm", name="myadd")

    ctx = loom.context("llvm", 0)
    size = 1024
    a = loom.nd.array(np.random.uniform(size=size).astype(A.dtype), ctx)
    b = loom.nd.array(np.random.uniform(size=size).astype(B.dtype), ctx)
    c = loom.nd.array(np.zeros(size, dtype=C.dtype), ctx)
    fadd(a, b, c)
    loom.testing.assert_allclose(c.asnumpy(), a.asnumpy() + b.asnumpy())
    assert "myadd" in fadd.get_source()

    temp = util.tempdir()
    fadd.save(temp.relpath("myadd.o"))
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    assert temp.listdir() == ["myadd.o", "myadd.so"]
    fadd1 = loom.runtime.load_module(temp.relpath("myadd.so"))
    c = loom.nd.array(np.zeros(size, dtype=C.dtype), ctx)
    fadd1(a, b, c)
    loom.testing.assert_allclose(c.asnumpy(), a.asnumpy() + b.asnumpy())

    fadd.export_library(temp.relpath("myadd_pack.so"))
    fadd2 = loom.runtime.load_module(temp.relpath("myadd_pack.so"))
    c = loom.nd.array(np.zeros(size, dtype=C.dtype), ctx)
    fadd2(a, b, c)
    loom.testing.assert_allclose(c.asnumpy(), a.asnumpy() + b.asnumpy())
