"""The programs of the TensorComputeOp tests: TVM's vadd and GEMM intrinsics (as loops or C kernels)."""

import numpy as np

import loom
from loom.ir import BufferStore, Evaluate, SeqStmt

KERNELS_C = """
int vadd(float *z, const float *x, const float *y, int n) {
  for (int i = 0; i < n; ++i) z[i] = x[i] + y[i];
  return 0;
}
int gemm_reset(float *z, int m, int n) {
  for (int i = 0; i < m * n; ++i) z[i] = 0.0f;
  return 0;
}
int gemm_update(float *z, const float *x, const float *y, int m, int n, int l) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < l; ++k) z[i * n + j] += x[i * l + k] * y[j * l + k];
  return 0;
}
"""


def intrin_vadd(n, extern=False):
    """TVM's vadd intrinsic: an ir_builder loop (runs everywhere) or a call of the C kernel."""
    x = loom.placeholder((n,), name="vx")
    y = loom.placeholder((n,), name="vy")
    z = loom.compute(x.shape, lambda i: x[i] + y[i], name="z")

    def intrin_func(ins, outs):
        ib = loom.ir_builder.create()
        xx, yy = ins
        zz = outs[0]
        if extern:
            ib.emit(loom.call_extern("int32", "vadd", zz.access_ptr("w"), xx.access_ptr("r"), yy.access_ptr("r"), n))
        else:
            with ib.for_range(0, n, name="v") as v:
                ib.emit(BufferStore(zz, xx[v] + yy[v], [v]))
        return ib.get()

    with loom.build_config(offset_factor=n):
        return loom.decl_tensor_intrin(z.op, intrin_func, name="vadd")


def intrin_gemm(m, n, l, parts="all", extern=False):
    """TVM's GEMM micro-kernel ``z[i, j] = sum_k x[i, k] * y[j, k]`` with body, reset and update."""
    k = loom.reduce_axis((0, l), name="k")
    x = loom.placeholder((m, l), name="x")
    y = loom.placeholder((n, l), name="y")
    z = loom.compute((m, n), lambda i, j: loom.sum(x[i][k] * y[j][k], axis=k), name="z")

    def loops(zz, xx, yy, reset, update):
        ib = loom.ir_builder.create()
        with ib.for_range(0, m, name="a") as a:
            with ib.for_range(0, n, name="b") as b:
                if reset:
                    ib.emit(BufferStore(zz, loom.const(0.0), [a, b]))
                if update:
                    with ib.for_range(0, l, name="c") as c:
                        ib.emit(BufferStore(zz, zz[a, b] + xx[a, c] * yy[b, c], [a, b]))
        return ib.get()

    def intrin_func(ins, outs):
        xx, yy = ins
        zz = outs[0]
        if extern:
            zp = zz.access_ptr("w")
            reset = loom.call_extern("int32", "gemm_reset", zp, m, n)
            update = loom.call_extern("int32", "gemm_update", zp, xx.access_ptr("r"), yy.access_ptr("r"), m, n, l)
            body = SeqStmt([Evaluate(reset), Evaluate(update)])
        else:
            body, reset, update = (loops(zz, xx, yy, True, True), loops(zz, xx, yy, True, False),
                                   loops(zz, xx, yy, False, True))
        return body, (reset if parts == "all" else None), update

    with loom.build_config(offset_factor=n):
        return loom.decl_tensor_intrin(z.op, intrin_func, name="vgemm")


def vadd_program(m=256, factor=16, extern=False):
    vadd = intrin_vadd(factor, extern)
    A = loom.placeholder((m // factor, factor), name="A")
    B = loom.placeholder((m // factor, factor), name="B")
    C = loom.compute((m // factor, factor), lambda i: vadd(A[i, 0:factor], B[i, 0:factor]), name="C")
    return A, B, C


def gemm_program(sizes=(64, 32, 48), factors=(16, 8, 8), parts="all", extern=False):
    (M, N, L), (factor, factor1, factor2) = sizes, factors
    vgemm = intrin_gemm(factor1, factor2, factor, parts, extern)
    A = loom.placeholder((M // factor1, L // factor, factor1, factor), name="A")
    B = loom.placeholder((N // factor2, L // factor, factor2, factor), name="B")
    k = loom.reduce_axis((0, L // factor), name="k")
    C = loom.compute((M // factor1, N // factor2, factor1, factor2),
                     lambda i, j: vgemm(A[i, k, 0:factor1, 0:factor], B[j, k, 0:factor2, 0:factor], reduce_axis=k),
                     name="C")
    return A, B, C


def run(s, args, kind, fill=np.nan, seed=0):
    f = loom.build(s, args, target=kind)
    rng = np.random.default_rng(seed)
    ins = [rng.uniform(size=[int(n) for n in t.shape]).astype("float32") for t in args[:-1]]
    out = np.full([int(n) for n in args[-1].shape], fill, "float32")
    f(*ins, out)
    return ins, out


def gemm_ref(a, b):
    return np.einsum("ikac,jkbc->ijab", a, b)
