"""Tutorial "How to optimize GEMM on CPU": every schedule of the tutorial, on llvm, against numpy.

The one change beyond renames: ``y / bn`` on integer expressions is ``y // bn``
(TVM v0.6 truncated; Loom asks which division is meant, see docs/from-tvm.md).
"""

import numpy
import pytest

import loom

M = K = N = 128
bn = 32
dtype = "float32"
target = "llvm"


def _algorithm(packed):
    k = loom.reduce_axis((0, K), "k")
    A = loom.placeholder((M, K), name="A")
    B = loom.placeholder((K, N), name="B")
    if not packed:
        C = loom.compute((M, N), lambda x, y: loom.sum(A[x, k] * B[k, y], axis=k), name="C")
        return A, B, C, None
    packedB = loom.compute((N / bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = loom.compute((M, N), lambda x, y: loom.sum(A[x, k] * packedB[y // bn, k, y % bn], axis=k), name="C")
    return A, B, C, packedB


def _blocking(s, C, packedB, order, vectorize):
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(*[dict(xo=xo, yo=yo, ko=ko, ki=ki, xi=xi, yi=yi)[a] for a in order])
    if vectorize:
        s[C].vectorize(yi)
    if packedB is not None:
        x, y, z = s[packedB].op.axis
        s[packedB].vectorize(z)
        s[packedB].parallel(x)


def _write_cache(s, C, packedB, parallel):
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    if parallel:
        s[C].parallel(xo)
    x, y, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)


SCHEDULES = {
    "baseline": (False, lambda s, C, P: None),
    "blocking": (False, lambda s, C, P: _blocking(s, C, P, "xo yo ko ki xi yi".split(), False)),
    "vectorization": (False, lambda s, C, P: _blocking(s, C, P, "xo yo ko ki xi yi".split(), True)),
    "loop_permutation": (False, lambda s, C, P: _blocking(s, C, P, "xo yo ko xi ki yi".split(), True)),
    "array_packing": (True, lambda s, C, P: _blocking(s, C, P, "xo yo ko xi ki yi".split(), True)),
    "write_cache": (True, lambda s, C, P: _write_cache(s, C, P, False)),
    "parallel": (True, lambda s, C, P: _write_cache(s, C, P, True)),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_gemm_schedule(name):
    ctx = loom.context(target, 0)
    a = loom.nd.array(numpy.random.rand(M, K).astype(dtype), ctx)
    b = loom.nd.array(numpy.random.rand(K, N).astype(dtype), ctx)
    answer = numpy.dot(a.asnumpy(), b.asnumpy())
    packed, schedule = SCHEDULES[name]
    A, B, C, packedB = _algorithm(packed)
    s = loom.create_schedule(C.op)
    schedule(s, C, packedB)
    func = loom.build(s, [A, B, C], target=target, name="mmult")
    assert func
    c = loom.nd.array(numpy.zeros((M, N), dtype=dtype), ctx)
    func(a, b, c)
    loom.testing.assert_allclose(c.asnumpy(), answer, rtol=1e-5)
    evaluator = func.time_evaluator(func.entry_name, ctx, number=1)
    assert evaluator(a, b, c).mean > 0
    assert "C[" in str(loom.lower(s, [A, B, C], simple_mode=True))
