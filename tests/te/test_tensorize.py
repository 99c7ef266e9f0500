"""Stage.tensorize with loom.decl_tensor_intrin: C micro-kernels, Loom IR intrinsics, and the errors."""

import numpy as np
import pytest

import loom
from loom.errors import LoomError, LoomTypeError, LoomValueError
from loom.ir.stmt import BufferStore, For, seq
from loom.te.tensor_intrin import TensorIntrin, decl_tensor_intrin
from loom.testing import AssertionFailed, register_extern, unregister_extern
from loom.testing.conformance.harness import buildable_cpu_kinds

KINDS = buildable_cpu_kinds()
NATIVE = [k for k in ("llvm", "c") if k in KINDS]

GEMV_C = """
int gemv_update(float *cc, float *aa, float *bb, int m, int l, int stride) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < l; ++j)
      cc[i] += aa[j] * bb[i * stride + j];
  return 0;
}
int gemv_reset(float *cc, int m) {
  for (int i = 0; i < m; ++i)
    cc[i] = 0.0f;
  return 0;
}
"""


def gemv_pattern(m, l, op="mul"):
    a = loom.placeholder((l,), name="a")
    b = loom.placeholder((m, l), name="b")
    k = loom.reduce_axis((0, l), name="k")
    f = (lambda i: loom.sum(a[k] * b[i, k], axis=k)) if op == "mul" else (lambda i: loom.sum(a[k] + b[i, k], axis=k))
    return a, b, loom.compute((m,), f, name="c")


def intrin_gemv(m, l, parts="body", strided=True):
    """The tutorial's GEMV intrinsic: extern C calls on access_ptr pointers."""
    a, b, c = gemv_pattern(m, l)
    binds = {}
    if strided:
        binds = {a: loom.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1]),
                 b: loom.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[loom.var("s1"), 1]),
                 c: loom.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])}

    def fcompute(ins, outs):
        aa, bb = ins
        cc = outs[0]
        stride = bb.strides[0] if strided else l
        update = loom.call_extern("int32", "gemv_update", cc.access_ptr("w"), aa.access_ptr("r"),
                                  bb.access_ptr("r"), m, l, stride)
        reset = loom.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m)
        if parts == "body":
            return update
        body = seq(loom.ir.Evaluate(reset), loom.ir.Evaluate(update))
        return body, (reset if parts == "reset" else None), update

    return decl_tensor_intrin(c.op, fcompute, name="gemv", binds=binds)


def intrin_gemv_ir(m, l):
    """The same GEMV with its three parts written in Loom IR: every target runs it, the interpreter too."""
    a, b, c = gemv_pattern(m, l)
    bb_buf = loom.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[loom.var("s1"), 1])

    def fcompute(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def reset():
            i = loom.var("i")
            return For(i, 0, m, "serial", BufferStore(cc, loom.const(0.0), [i]))

        def update():
            i, j = loom.var("i"), loom.var("j")
            return For(i, 0, m, "serial", For(j, 0, l, "serial", BufferStore(cc, cc[i] + aa[j] * bb[i, j], [i])))

        return seq(reset(), update()), reset(), update()

    return decl_tensor_intrin(c.op, fcompute, name="gemv_ir", binds={b: bb_buf})


def matmul(n, m, l):
    A = loom.placeholder((n, l), name="A")
    B = loom.placeholder((m, l), name="B")
    k = loom.reduce_axis((0, l), name="k")
    C = loom.compute((n, m), lambda i, j: loom.sum(A[i, k] * B[j, k], axis=k), name="C")
    return A, B, C


def run(s, args, kind, shapes, fill=0.0, seed=0):
    f = loom.build(s, args, target=kind, name="gemv")
    rng = np.random.default_rng(seed)
    ins = [rng.uniform(size=shape).astype("float32") for shape in shapes[:-1]]
    out = np.full(shapes[-1], fill, "float32")
    f(*ins, out)
    return ins, out


@pytest.mark.parametrize("kind", NATIVE)
def test_gemv_body_through_a_c_kernel(kind):
    N, M, L = 12, 32, 24
    A, B, C = matmul(N, M, L)
    s = loom.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    s[C].reorder(x, yo, yi, z)
    s[C].tensorize(yi, intrin_gemv(16, L))
    s[C].pragma(x, "import_c", GEMV_C)
    text = str(loom.lower(s, [A, B, C], simple_mode=True))
    assert "call_extern('int32', 'gemv_update'" in text and "j.inner" not in text and "for k" not in text
    (a, b), c = run(s, [A, B, C], kind, [(N, L), (M, L), (N, M)])  # the body does not reset: C starts at 0
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)


@pytest.mark.parametrize("kind", NATIVE)
@pytest.mark.parametrize("parts", ["reset", "no_reset"])
def test_a_split_reduction_uses_reset_and_update(kind, parts):
    N, M, L = 6, 32, 48
    A, B, C = matmul(N, M, L)
    s = loom.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    zo, zi = s[C].split(z, factor=16)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv(16, 16, parts))
    s[C].pragma(yo, "import_c", GEMV_C)
    text = str(loom.lower(s, [A, B, C], simple_mode=True))
    assert text.count("call_extern('int32', 'gemv_reset'") == 1
    assert ("likely(0 < k.outer)" in text) == (parts == "no_reset")
    (a, b), c = run(s, [A, B, C], kind, [(N, L), (M, L), (N, M)], fill=7.0)  # the reset clears the 7s
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("order", ["x yo zo", "zo x yo", "x zo yo"])
@pytest.mark.parametrize("parts", ["all", "no_reset"])
def test_an_intrinsic_in_loom_ir_runs_everywhere(kind, order, parts):
    N, M, L = 4, 16, 24
    A, B, C = matmul(N, M, L)
    s = loom.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=8)
    zo, zi = s[C].split(z, factor=8)
    loops = {"x": x, "yo": yo, "zo": zo}
    s[C].reorder(*(loops[n] for n in order.split()), yi, zi)
    intrin = intrin_gemv_ir(8, 8)
    if parts == "no_reset":  # body on the first iteration of the reduction's outer loops, update after
        intrin = TensorIntrin(intrin.name, intrin.op, intrin.inputs, intrin.buffers, (), intrin.body, None,
                              intrin.reduce_update)
    s[C].tensorize(yi, intrin)
    (a, b), c = run(s, [A, B, C], kind, [(N, L), (M, L), (N, M)], fill=np.nan)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)


@pytest.fixture
def gemv_in_python():
    def update(cc, aa, bb, m, l, stride):
        for i in range(int(m)):
            cc[i] += np.dot(aa[:l], bb[i * int(stride):i * int(stride) + int(l)])
        return 0

    register_extern("gemv_update", update)
    yield
    unregister_extern("gemv_update")


@pytest.mark.skipif("interp" not in KINDS, reason="needs the interpreter")
def test_access_ptr_on_the_interpreter_passes_views_to_an_extern(gemv_in_python):
    N, M, L = 3, 16, 8
    A, B, C = matmul(N, M, L)
    s = loom.create_schedule(C.op)
    yo, yi = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(yi, intrin_gemv(8, L))
    (a, b), c = run(s, [A, B, C], "interp", [(N, L), (M, L), (N, M)])
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)


def intrin_vadd(n):
    x = loom.placeholder((n,), name="x")
    y = loom.placeholder((n,), name="y")
    z = loom.compute((n,), lambda i: x[i] + y[i], name="z")

    def fcompute(ins, outs):
        i = loom.var("i")
        return For(i, 0, n, "serial", BufferStore(outs[0], ins[0][i] + ins[1][i], [i]))

    return decl_tensor_intrin(z.op, fcompute, name="vadd")


@pytest.mark.parametrize("kind", KINDS)
def test_a_stage_computed_at_a_consumer_binds_its_partial_storage(kind):
    A = loom.placeholder((8, 32), name="A")
    B = loom.placeholder((8, 32), name="B")
    C = loom.compute((8, 32), lambda i, j: A[i, j] + B[i, j], name="C")
    E = loom.compute((8, 32), lambda i, j: C[i, j] * 2.0, name="E")
    s = loom.create_schedule(E.op)
    xo, xi = s[E].split(E.op.axis[0], factor=2)
    s[C].compute_at(s[E], xo)  # C holds rows [2 xo, 2 xo + 2): the intrinsic's row starts at (i - 2 xo) * 32
    s[C].tensorize(C.op.axis[1], intrin_vadd(32))
    (a, b), e = run(s, [A, B, E], kind, [(8, 32), (8, 32), (8, 32)])
    np.testing.assert_allclose(e, (a + b) * 2, rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_scalar_params_take_the_stage_values(kind):
    alpha = loom.var("alpha", "float32")
    x = loom.placeholder((8,), name="x")
    z = loom.compute((8,), lambda i: x[i] * alpha, name="z")

    def fcompute(ins, outs, params):
        i = loom.var("i")
        return For(i, 0, 8, "serial", BufferStore(outs[0], ins[0][i] * params[0], [i]))

    scale = decl_tensor_intrin(z.op, fcompute, name="scale", scalar_params=[alpha])
    A = loom.placeholder((4, 8), name="A")
    B = loom.compute((4, 8), lambda i, j: A[i, j] * 3.0, name="B")
    s = loom.create_schedule(B.op)
    s[B].tensorize(B.op.axis[1], scale)
    (a,), b = run(s, [A, B], kind, [(4, 8), (4, 8)])
    np.testing.assert_allclose(b, a * 3.0, rtol=1e-6)
    C = loom.compute((4, 8), lambda i, j: A[i, j] * A[i, j], name="C")
    s = loom.create_schedule(C.op)
    s[C].tensorize(C.op.axis[1], scale)
    with pytest.raises(LoomValueError, match="alpha matches .* which varies inside the tensorized loops"):
        loom.lower(s, [A, C])


@pytest.mark.parametrize("kind", NATIVE)
def test_export_library_carries_the_imported_c(kind, tmp_path):
    N, M, L = 4, 16, 8
    A, B, C = matmul(N, M, L)
    s = loom.create_schedule(C.op)
    yo, yi = s[C].split(C.op.axis[1], factor=16)
    s[C].tensorize(yi, intrin_gemv(16, L))
    s[C].pragma(C.op.axis[0], "import_c", GEMV_C)
    f = loom.build(s, [A, B, C], target=kind, name="gemv")
    path = str(tmp_path / "gemv.so")
    f.export_library(path)
    g = loom.runtime.load_module(path)
    a, b = np.random.rand(N, L).astype("float32"), np.random.rand(M, L).astype("float32")
    c = np.zeros((N, M), "float32")
    g(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)


VSCALE_LL = """
define i32 @vscale(ptr %out, ptr %in, i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %pi = getelementptr float, ptr %in, i32 %i
  %x = load float, ptr %pi
  %y = fmul float %x, 2.0
  %po = getelementptr float, ptr %out, i32 %i
  store float %y, ptr %po
  %next = add i32 %i, 1
  %done = icmp eq i32 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret i32 0
}
"""


def _vscale_schedule():
    x = loom.placeholder((8,), name="x")
    z = loom.compute((8,), lambda i: x[i] * 2.0, name="z")
    intrin = decl_tensor_intrin(z.op, lambda ins, outs: loom.call_extern(
        "int32", "vscale", outs[0].access_ptr("w"), ins[0].access_ptr("r"), 8), name="vscale")
    A = loom.placeholder((3, 8), name="A")
    B = loom.compute((3, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    s[B].tensorize(B.op.axis[1], intrin)
    s[B].pragma(B.op.axis[0], "import_llvm", VSCALE_LL)
    return s, A, B


@pytest.mark.skipif("llvm" not in KINDS, reason="needs the llvm target")
def test_import_llvm_links_llvm_ir_into_the_module():
    s, A, B = _vscale_schedule()
    (a,), b = run(s, [A, B], "llvm", [(3, 8), (3, 8)])
    np.testing.assert_allclose(b, a * 2.0)


@pytest.mark.skipif("c" not in KINDS, reason="needs the c target")
def test_import_llvm_is_refused_by_the_c_target():
    s, A, B = _vscale_schedule()
    with pytest.raises(LoomValueError, match="import_llvm .* c target cannot compile"):
        loom.build(s, [A, B], target="c")


@pytest.mark.parametrize("kind", NATIVE)
def test_imported_c_that_does_not_compile_is_an_error(kind):
    s, A, B = _vscale_schedule()
    s = loom.create_schedule(B.op)
    s[B].pragma(B.op.axis[0], "import_c", "int broken(void) { return }")
    with pytest.raises(LoomError, match="(?s)error"):
        loom.build(s, [A, B], target=kind)


# ---------------------------------------------------------------------------
# errors: the schedule does not compute the intrinsic


def _gemv_schedule(M=32, factor=16, split_k=False):
    A, B, C = matmul(4, M, 32)
    s = loom.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    if split_k:
        zo, zi = s[C].split(z, factor=16)
        s[C].reorder(x, yo, zo, yi, zi)
    return s, (A, B, C), yi


def _intrin_with(pattern, fcompute=None, **kwargs):
    return decl_tensor_intrin(pattern.op, fcompute or (lambda ins, outs: loom.call_extern("int32", "f")), **kwargs)


@pytest.mark.parametrize("case, fragment", [
    ("add", r"does not match the intrinsic's: .*stage computes .*\*.*intrinsic .*\+"),
    ("extent", r"data axis i has extent 8 in the intrinsic but 16"),
    ("reduce_extent", r"reduction axis k has extent 16 in the intrinsic but 32"),
    ("inputs", r"stage reads 2 tensors \['A', 'B'\], the intrinsic 1"),
    ("dtype", r"input A is float32, the intrinsic.s a float64"),
    ("no_update", r"split the reduction, so the intrinsic needs a reduce_update"),
    ("uneven", r"condition .* depends on a loop that tensorize replaces"),
    ("compact", r"binding buffer b to a region of B: it is compact, so stride 0 must be 16"),
])
def test_mismatches_are_errors_naming_what_differs(case, fragment):
    s, args, yi = _gemv_schedule(M=40 if case == "uneven" else 32, split_k=case in ("no_update", "compact"))
    if case == "add":
        intrin = _intrin_with(gemv_pattern(16, 32, op="add")[2])
    elif case == "extent":
        intrin = _intrin_with(gemv_pattern(8, 32)[2])
    elif case == "reduce_extent":
        intrin = _intrin_with(gemv_pattern(16, 16)[2])
    elif case == "inputs":
        a = loom.placeholder((32,), name="a")
        k = loom.reduce_axis((0, 32), name="k")
        intrin = _intrin_with(loom.compute((16,), lambda i: loom.sum(a[k] * a[k], axis=k), name="c"))
    elif case == "dtype":
        a = loom.placeholder((32,), "float64", name="a")
        b = loom.placeholder((16, 32), "float64", name="b")
        k = loom.reduce_axis((0, 32), name="k")
        intrin = _intrin_with(loom.compute((16,), lambda i: loom.sum(a[k] * b[i, k], axis=k), name="c"))
    elif case == "no_update":
        intrin = intrin_gemv(16, 16, parts="body")
    elif case == "compact":  # default buffers are compact: a 16x16 block of a 32-wide B is not
        intrin = intrin_gemv(16, 16, parts="reset", strided=False)
    else:
        intrin = intrin_gemv(16, 32)
    s[args[2]].tensorize(yi, intrin)
    with pytest.raises(LoomValueError, match=fragment):
        loom.lower(s, list(args))


def test_schedule_errors():
    s, (A, B, C), yi = _gemv_schedule()
    intrin = intrin_gemv(16, 32)
    with pytest.raises(LoomTypeError, match="expected a TensorIntrin"):
        s[C].tensorize(yi, "gemv")
    with pytest.raises(LoomValueError, match="already split or fused"):
        s[C].tensorize(C.op.axis[1], intrin)
    with pytest.raises(LoomValueError, match="only compute stages"):
        s[A].tensorize(yi, intrin)
    s[C].tensorize(yi, intrin)
    with pytest.raises(LoomValueError, match="already tensorized at j.inner"):
        s[C].tensorize(C.op.axis[0], intrin)
    yii, _ = s[C].split(yi, factor=4)
    with pytest.raises(LoomValueError, match="j.inner was split or fused after tensorize"):
        loom.lower(s, [A, B, C])


def test_a_stage_attached_inside_the_tensorized_loops_is_refused():
    A = loom.placeholder((8, 32), name="A")
    B = loom.placeholder((8, 32), name="B")
    P = loom.compute((8, 32), lambda i, j: A[i, j] * 1.0, name="P")
    C = loom.compute((8, 32), lambda i, j: P[i, j] + B[i, j], name="C")
    s = loom.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[P].compute_at(s[C], ji)
    s[C].tensorize(jo, intrin_vadd(32))
    with pytest.raises(LoomValueError, match="P is computed at loop j.inner, which tensorize replaces"):
        loom.lower(s, [A, B, C])


def test_decl_tensor_intrin_parts_and_errors():
    a, b, c = gemv_pattern(4, 8)
    intrin = intrin_gemv(4, 8, parts="reset")
    assert isinstance(intrin, TensorIntrin) and [t.name for t in intrin.inputs] == ["a", "b"]
    assert [x.name for x in intrin.buffers] == ["A", "B", "C"]
    assert intrin.body is not None and intrin.reduce_init is not None and intrin.reduce_update is not None
    default = decl_tensor_intrin(c.op, lambda ins, outs: loom.call_extern("int32", "f", ins[0].data))
    assert [x.name for x in default.buffers] == ["a", "b", "c"]
    assert default.buffers[0].elem_offset.name == "a_elem_offset"  # symbolic: any part of a tensor
    with pytest.raises(LoomTypeError, match="must be a compute operation"):
        decl_tensor_intrin(a.op, lambda ins, outs: None)
    with pytest.raises(LoomTypeError, match="must return a Stmt or an expression"):
        decl_tensor_intrin(c.op, lambda ins, outs: "call")
    with pytest.raises(LoomValueError, match="neither a body nor a reduce_update"):
        decl_tensor_intrin(c.op, lambda ins, outs: (None, None, None))
    with pytest.raises(LoomValueError, match="binds names .*which the pattern neither reads nor writes"):
        decl_tensor_intrin(c.op, lambda ins, outs: loom.call_extern("int32", "f"),
                           binds={loom.placeholder((8,), name="q"): loom.decl_buffer((8,), name="Q")})
    with pytest.raises(LoomValueError, match="is a 2-d float32 buffer, but a is a 1-d float32 tensor"):
        decl_tensor_intrin(c.op, lambda ins, outs: loom.call_extern("int32", "f"),
                           binds={a: loom.decl_buffer((8, 1), name="Q")})
    d = loom.compute((4,), lambda i: c[i] * 2.0, name="d")
    with pytest.raises(LoomValueError, match="reads c, which is computed"):
        decl_tensor_intrin(d.op, lambda ins, outs: loom.call_extern("int32", "f"))


# ---------------------------------------------------------------------------
# Buffer.access_ptr


def test_access_ptr_masks_extent_and_offset():
    from loom.ir.buffer import Buffer

    n = loom.var("n")
    B = loom.decl_buffer((n, 8), "float32", name="B", offset_factor=1)
    p = B.access_ptr("rw", offset=3)
    assert p.op.name == "tir.tvm_access_ptr" and str(p.dtype) == "handle"
    ann, data, start, extent, mask = p.args
    assert str(ann.dtype) == "float32" and data is B.data and mask.value == 3
    assert str(start) == "B_elem_offset + 3" and str(extent) == "n * 8 - 3"
    assert B.access_ptr("r").args[4].value == Buffer.READ == 1 and B.access_ptr("w").args[4].value == Buffer.WRITE == 2
    assert B.access_ptr(Buffer.READ | Buffer.WRITE).args[4].value == 3
    S = loom.decl_buffer((4, 8), "float32", name="S", strides=[loom.var("s"), 1])
    assert str(S.access_ptr("r").args[3]) == "s * 4"
    v = loom.decl_buffer((16,), "float32", name="V").access_ptr("r", content_lanes=4, offset=8)
    assert str(v.args[0].dtype) == "float32x4" and v.args[2].value == 2 and v.args[3].value == 2
    assert loom.decl_buffer((), "int8", name="Z").access_ptr("r").args[3].value == 1
    for bad in ("x", "", 0, 4, True):
        with pytest.raises(LoomValueError, match="access mask"):
            B.access_ptr(bad)
    with pytest.raises(LoomTypeError, match="ptr_type must be a handle"):
        B.access_ptr("r", ptr_type="float32")
    with pytest.raises(LoomValueError, match="content_lanes must be a positive int"):
        B.access_ptr("r", content_lanes=0)


@pytest.mark.parametrize("kind", KINDS)
def test_offset_factor_from_build_config_is_checked_at_run_time(kind):
    x = loom.placeholder((20,), name="x")
    z = loom.compute((20,), lambda i: x[i] * 2.0, name="z")

    def fcompute(ins, outs):
        i = loom.var("i")
        return For(i, 0, 20, "serial", BufferStore(outs[0], ins[0][i] * 2.0, [i]))

    with loom.build_config(offset_factor=16):
        intrin = decl_tensor_intrin(z.op, fcompute, name="double20")
    assert [b.offset_factor for b in intrin.buffers] == [16, 16]
    A = loom.placeholder((3, 20), name="A")
    B = loom.compute((3, 20), lambda i, j: A[i, j] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    s[B].tensorize(B.op.axis[1], intrin)
    f = loom.build(s, [A, B], target=kind)
    b = np.zeros((3, 20), "float32")
    with pytest.raises(AssertionFailed, match="offset_factor is 16, but the region starts at element offset"):
        f(np.ones((3, 20), "float32"), b)  # row 1 starts at element 20
