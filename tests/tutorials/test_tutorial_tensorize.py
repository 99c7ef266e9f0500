"""Tutorial "Use Tensorize to Leverage Hardware Intrinsics": a GEMV micro-kernel in C, then with reduce-update.

One change besides renames: the tutorial turns its C kernel into LLVM IR with clang
(``tvm.contrib.clang.create_llvm``) and imports it with ``pragma(x, "import_llvm", ll)``.
Loom imports the C source itself, ``pragma(x, "import_c", c_code)``, compiled by the
system C compiler on the llvm target and part of the library on the c target
(``import_llvm`` with LLVM IR text works too, on llvm; see docs/schedules.md).
"""

import numpy as np
import pytest

import loom
from loom.te.tensor_intrin import decl_tensor_intrin
from loom.testing.conformance.harness import buildable_cpu_kinds

KINDS = [k for k in buildable_cpu_kinds() if k in ("llvm", "c")]

N, M, L = 64, 32, 64
factor = 16


def matmul():
    A = loom.placeholder((N, L), name="A")
    B = loom.placeholder((M, L), name="B")
    k = loom.reduce_axis((0, L), name="k")
    C = loom.compute((N, M), lambda i, j: loom.sum(A[i, k] * B[j, k], axis=k), name="C")
    return A, B, C


def intrin_gemv(m, l, with_reset):
    a = loom.placeholder((l,), name="a")
    b = loom.placeholder((m, l), name="b")
    k = loom.reduce_axis((0, l), name="k")
    c = loom.compute((m,), lambda i: loom.sum(a[k] * b[i, k], axis=k), name="c")
    Ab = loom.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
    Bb = loom.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[loom.var("s1"), 1])
    Cb = loom.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def _body():
            return loom.call_extern("int32", "gemv_update", cc.access_ptr("w"), aa.access_ptr("r"),
                                    bb.access_ptr("r"), m, l, bb.strides[0])

        def _reduce_reset():
            return loom.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m)

        if not with_reset:
            return _body()
        return _body(), _reduce_reset(), _body()

    return decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})


GEMV_UPDATE = """
int gemv_update(float *cc, float *aa, float *bb, int m, int l, int stride) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < l; ++j) {
      cc[i] += aa[j] * bb[i * stride + j];
    }
  }
  return 0;
}
"""
GEMV_RESET = """
int gemv_reset(float *cc, int m) {
  for (int i = 0; i < m; ++i) {
    cc[i] = 0.0;
  }
  return 0;
}
"""


def check(s, A, B, C, kind):
    func = loom.build(s, [A, B, C], target=kind, name="gemv")
    a = np.random.uniform(size=(N, L)).astype(A.dtype)
    b = np.random.uniform(size=(M, L)).astype(B.dtype)
    c = loom.nd.array(np.zeros((N, M), dtype=C.dtype))
    func(loom.nd.array(a), loom.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), np.dot(a, b.T), rtol=1e-3)


@pytest.mark.parametrize("kind", KINDS)
def test_tensorize_a_gemv_micro_kernel(kind):
    A, B, C = matmul()
    s = loom.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    s[C].reorder(x, yo, yi, z)
    gemv = intrin_gemv(factor, L, with_reset=False)
    s[C].tensorize(yi, gemv)
    s[C].pragma(x, "import_c", GEMV_UPDATE)
    text = str(loom.lower(s, [A, B, C], simple_mode=True))
    assert "gemv_update" in text and "for k" not in text  # the two inner loops are one call
    check(s, A, B, C, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_reduce_update_for_tensorize(kind):
    A, B, C = matmul()
    s = loom.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    zo, zi = s[C].split(z, factor=factor)
    s[C].reorder(x, yo, zo, yi, zi)
    gemv = intrin_gemv(factor, factor, with_reset=True)
    s[C].tensorize(yi, gemv)
    s[C].pragma(yo, "import_c", GEMV_UPDATE + GEMV_RESET)
    check(s, A, B, C, kind)
