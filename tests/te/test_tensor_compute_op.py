"""TensorComputeOp: a tensor intrinsic called on regions as a compute's body (TVM v0.6's test_tensor_compute1/2)."""

import numpy as np
import pytest

import loom
from loom.errors import LoomError, LoomTypeError, LoomValueError
from loom.ir import BufferStore, Evaluate, For, SeqStmt
from loom.te import TensorComputeOp
from loom.testing.conformance.harness import buildable_cpu_kinds
from tensor_compute_programs import KERNELS_C, gemm_program, gemm_ref, intrin_vadd, run, vadd_program

KINDS = buildable_cpu_kinds()
NATIVE = [k for k in ("llvm", "c") if k in KINDS]

def body_of(s, args):
    return loom.lower(s, args, simple_mode=True)["default_function"].body


# ---------------------------------------------------------------------------
# TVM's two tests, with values


def test_tensor_compute1_lowers_to_one_call_per_row():
    A, B, C = vadd_program(m=1024, extern=True)
    assert isinstance(C.op, TensorComputeOp) and [int(n) for n in C.shape] == [64, 16]
    assert C.op.input_tensors == [A, B] and [iv.var.name for iv in C.op.schedulable_axis] == ["i"]
    # As in TVM, op.axis has an opaque axis per dimension of the intrinsic's block too.
    assert [(iv.var.name, iv.iter_type, int(iv.dom.extent)) for iv in C.op.axis] == [
        ("i", "data_par", int(C.shape[0])), ("ax0", "opaque", 16)]
    stmt = body_of(loom.create_schedule(C.op), [A, B, C])
    assert isinstance(stmt, For) and isinstance(stmt.body, Evaluate)  # TVM: stmt.body.body is an Evaluate
    assert "call_extern('int32', 'vadd'" in str(stmt)


@pytest.mark.parametrize("kind", KINDS)
def test_tensor_compute1_values(kind):
    A, B, C = vadd_program()
    (a, b), c = run(loom.create_schedule(C.op), [A, B, C], kind)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


@pytest.mark.parametrize("kind", NATIVE)
def test_tensor_compute1_through_the_c_kernel(kind):
    A, B, C = vadd_program(extern=True)
    s = loom.create_schedule(C.op)
    s[C].pragma(C.op.axis[0], "import_c", KERNELS_C)
    (a, b), c = run(s, [A, B, C], kind)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_tensor_compute2_resets_then_updates_in_the_reduction_loop():
    A, B, C = gemm_program((2048, 1024, 1024), (16, 32, 32), extern=True)
    stmt = body_of(loom.create_schedule(C.op), [A, B, C])
    inner = stmt.body.body  # TVM: stmt.body.body.body[0] and [1].body are Evaluates
    assert isinstance(inner, SeqStmt) and isinstance(inner[0], Evaluate) and isinstance(inner[1].body, Evaluate)
    assert "gemm_reset" in str(inner[0]) and inner[1].loop_var.name == "k"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("parts", ["all", "no_reset"])
def test_tensor_compute2_values(kind, parts):
    A, B, C = gemm_program(parts=parts)
    (a, b), c = run(loom.create_schedule(C.op), [A, B, C], kind)  # NaN in C: the reset (or body) must clear it
    np.testing.assert_allclose(c, gemm_ref(a, b), rtol=1e-5)


@pytest.mark.parametrize("kind", NATIVE)
def test_tensor_compute2_through_the_c_kernels(kind):
    A, B, C = gemm_program(extern=True)
    s = loom.create_schedule(C.op)
    s[C].pragma(C.op.axis[0], "import_c", KERNELS_C)
    (a, b), c = run(s, [A, B, C], kind, fill=7.0)
    np.testing.assert_allclose(c, gemm_ref(a, b), rtol=1e-5)


# ---------------------------------------------------------------------------
# schedules on the outer axes


@pytest.mark.parametrize("kind", KINDS)
def test_split_and_parallel_outer_axis(kind):
    A, B, C = vadd_program(m=16 * 10)
    s = loom.create_schedule(C.op)
    xo, xi = s[C].split(s[C].op.axis[0], factor=4)  # 10 rows: a remainder, guarded
    s[C].parallel(xo)
    text = str(body_of(s, [A, B, C]))
    assert "parallel(3)" in text and "likely(i.outer * 4 + i.inner < 10)" in text
    (a, b), c = run(s, [A, B, C], kind)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("parts", ["all", "no_reset"])
def test_reorder_and_split_with_the_reduction_outside(kind, parts):
    A, B, C = gemm_program(sizes=(32, 32, 64), parts=parts)
    s = loom.create_schedule(C.op)
    i, j = s[C].op.schedulable_axis
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=2)
    jo, ji = s[C].split(j, factor=2)
    s[C].reorder(i, ko, jo, ki, ji)
    s[C].parallel(i)
    text = str(body_of(s, [A, B, C]))
    assert ("likely(0 < k.outer or 0 < k.inner)" in text) == (parts == "no_reset")
    (a, b), c = run(s, [A, B, C], kind)
    np.testing.assert_allclose(c, gemm_ref(a, b), rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_compute_at_both_ways(kind):
    A, B, C = vadd_program(m=128)
    P = loom.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="P")
    vadd = C.op.intrin
    C = loom.compute(A.shape, lambda i: vadd(P[i, 0:16], B[i, 0:16]), name="C")
    D = loom.compute(C.shape, lambda i, j: C[i, j] + 1.0, name="D")
    s = loom.create_schedule(D.op)
    do, _ = s[D].split(D.op.axis[0], factor=2)
    s[C].compute_at(s[D], do)  # two rows of C per iteration of D's outer loop
    s[P].compute_at(s[C], C.op.axis[0])  # one row of P per call of the intrinsic
    text = str(body_of(s, [A, B, D]))
    assert "P = allocate([1, 16]" in text and "C = allocate([2, 16]" in text
    (a, b), d = run(s, [A, B, D], kind)
    np.testing.assert_allclose(d, a * 2 + b + 1, rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_symbolic_sizes_scalar_params_and_the_outer_shape_only(kind):
    n = loom.var("n")
    alpha = loom.var("alpha", "float32")
    x = loom.placeholder((n,), name="x")
    y = loom.placeholder((n,), name="y")
    z = loom.compute((n,), lambda i: x[i] * alpha + y[i], name="z")

    def intrin_func(ins, outs, params):
        ib = loom.ir_builder.create()
        with ib.for_range(0, n, name="v") as v:  # n is the region's extent, 12
            ib.emit(BufferStore(outs[0], ins[0][v] * params[0] + ins[1][v], [v]))
        return ib.get()

    axpy = loom.decl_tensor_intrin(z.op, intrin_func, name="axpy", scalar_params=[alpha])
    m = loom.var("m")
    A = loom.placeholder((m, 12), name="A")
    B = loom.placeholder((m, 12), name="B")
    C = loom.compute((m,), lambda i: axpy(A[i, 0:12], B[i], 2.5), name="C")  # B[i]: the whole row
    assert [str(d) for d in C.shape] == ["m", "12"]
    s = loom.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=4)
    f = loom.build(s, [A, B, C], target=kind)
    a, b = np.random.rand(7, 12).astype("float32"), np.random.rand(7, 12).astype("float32")
    c = np.zeros_like(a)
    f(a, b, c)
    np.testing.assert_allclose(c, a * 2.5 + b, rtol=1e-6)


def intrin_row_sum(rows):
    """``c[0, j] = a[0, j] + ... + a[rows-1, j]``: an intrinsic whose output ``(1, n)`` leads with one element."""
    m1, n1 = loom.var("m1"), loom.var("n1")
    a = loom.placeholder((m1, n1), name="a")
    c = loom.compute((1, n1), lambda i, j: sum(a[r, j] for r in range(rows)), name="c")

    def intrin_func(ins, outs):
        ib = loom.ir_builder.create()
        with ib.for_range(0, n1, name="v") as v:
            ib.emit(BufferStore(outs[0], sum(ins[0][r, v] for r in range(rows)), [0, v]))
        return ib.get()

    with loom.build_config(offset_factor=1):
        return loom.decl_tensor_intrin(c.op, intrin_func, name="row_sum")


@pytest.mark.parametrize("kind", KINDS)
def test_intrinsic_output_leading_ones_lie_at_outer_axes(kind):
    # TVM's fuzzy rank (test_bound_tensor_compute_op): the intrinsic's 2-d output (1, n1) fills a 2-d shape
    # (10, 20) with one outer index; its first dimension is one element at axis i.
    row_sum = intrin_row_sum(3)
    A = loom.placeholder((12, 20), name="A")
    B = loom.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="B")
    C = loom.compute((10, 20), lambda i: row_sum(B[i:i + 3, 0:20]), name="C")
    assert [str(d) for d in C.shape] == ["10", "20"] and C.op.merged_dims == 1
    s = loom.create_schedule(C.op)
    assert loom.schedule.InferBound(s)[B.op.axis[0]].extent.value == 12
    f = loom.build(s, [A, C], target=kind)
    a = np.random.rand(12, 20).astype("float32")
    c = np.zeros((10, 20), "float32")
    f(a, c)
    np.testing.assert_allclose(c, 2 * (a[:-2] + a[1:-1] + a[2:]), rtol=1e-6)
    # TVM's own case: the region B[i:10] shrinks with i, and its rows' union is [0, 10), not 19 rows.
    C2 = loom.compute((10, 20), lambda i: intrin_row_sum(1)(B[i:10, 0:20]), name="C2")
    assert loom.schedule.InferBound(loom.create_schedule(C2.op))[B.op.axis[0]].extent.value == 10


def test_intrinsic_output_leading_dimension_at_an_outer_axis_must_be_one():
    x = loom.placeholder((2, 16), name="x")
    z = loom.compute((2, 16), lambda i, j: x[i, j] + 1.0, name="z")
    twice = loom.decl_tensor_intrin(z.op, lambda ins, outs: loom.call_extern(
        "int32", "f", outs[0].access_ptr("w"), ins[0].access_ptr("r")), name="plus1")
    A = loom.placeholder((8, 16), name="A")
    with pytest.raises(LoomValueError, match=r"output dimension 0 has extent 2 in the intrinsic but 1 in an outer "
                                             r"axis \(one element\)"):
        loom.compute((4, 16), lambda i: twice(A[i:i + 2, 0:16]), name="C")


@pytest.mark.parametrize("kind", KINDS)
def test_scalars_interleave_with_regions_and_an_element_is_a_region_of_one(kind):
    # TVM's test_tensor_intrin_scalar_params: intrin(i*i, A[i, j], i+j), scalars and regions interleaved.
    n = loom.var("n")
    x = loom.placeholder((n,), name="x")
    v, w = loom.var("v"), loom.var("w")
    z = loom.compute((n,), lambda i: x[i] * v + w, name="z")

    def intrin_func(ins, outs, sp):
        ib = loom.ir_builder.create()
        with ib.for_range(0, n, name="e") as e:
            ib.emit(BufferStore(outs[0], ins[0][e] * loom.cast(sp[0], "float32") + loom.cast(sp[1], "float32"), [e]))
        return ib.get()

    intrin = loom.decl_tensor_intrin(z.op, intrin_func, scalar_params=[v, w])
    A = loom.placeholder((10, 10), name="A")
    C = loom.compute((10, 10), lambda i, j: intrin(i * i, A[i, j], i + j), name="C")
    # The intrinsic's output dimension (one element here) is appended, where TVM 0.6 dropped it.
    assert [str(d) for d in C.shape] == ["10", "10", "1"]
    f = loom.build(loom.create_schedule(C.op), [A, C], target=kind)
    a = np.random.rand(10, 10).astype("float32")
    c = np.zeros((10, 10, 1), "float32")
    f(a, c)
    i, j = np.meshgrid(np.arange(10), np.arange(10), indexing="ij")
    np.testing.assert_allclose(c[..., 0], a * (i * i) + (i + j), rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_one_intrinsic_in_two_stages_keeps_the_ir_well_formed(kind, monkeypatch):
    monkeypatch.setenv("LOOM_VERIFY", "1")  # each use of the intrinsic's loop gets its own variable (SSA)
    A, B, C = vadd_program(m=64)
    D = loom.compute(A.shape, lambda i: C.op.intrin(C[i, 0:16], B[i]), name="D")  # B[i]: the whole row
    s = loom.create_schedule(D.op)
    s[C].compute_at(s[D], D.op.axis[0])
    (a, b), d = run(s, [A, B, D], kind)
    np.testing.assert_allclose(d, a + 2 * b, rtol=1e-6)


# ---------------------------------------------------------------------------
# the operation itself


def test_json_round_trip_and_structural_equality():
    A, B, C = vadd_program()
    back = loom.load_json(loom.save_json(C.op))
    assert isinstance(back, TensorComputeOp) and isinstance(back.intrin, loom.te.TensorIntrin)
    assert loom.structural_equal(back, C.op, map_free_vars=True)
    assert loom.structural_hash(back) == loom.structural_hash(C.op)
    assert loom.structural_equal(vadd_program()[2].op, C.op, map_free_vars=True)  # built twice: equal
    vadd = C.op.intrin
    shifted = loom.compute(C.shape, lambda i: vadd(A[i, 0:16], B[15 - i, 0:16]), name="C")
    assert not loom.structural_equal(shifted.op, C.op, map_free_vars=True)
    T = back.output(0)
    Ab, Bb = back.input_tensors
    (a, b), c = run(loom.create_schedule(T.op), [Ab, Bb, T], "interp" if "interp" in KINDS else KINDS[0])
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    assert str(C.op) == "tensor_compute C[i] = vadd(A[i, 0:16], B[i, 0:16])  # over i: range(0, 16)"


def test_schedule_json_round_trip_keeps_the_loops():
    A, B, C = gemm_program()
    s = loom.create_schedule(C.op)
    i, j, *_block = C.op.axis  # then the opaque axes of the intrinsic's block
    s[C].reorder(i, C.op.reduce_axis[0], j)
    s2 = loom.load_json(loom.save_json(s))
    op = s2.outputs[0]
    assert isinstance(op, TensorComputeOp)
    loom.assert_structural_equal(body_of(s2, [*op.input_tensors, op.output(0)]), body_of(s, [A, B, C]),
                                 map_free_vars=True)


# ---------------------------------------------------------------------------
# misuse


def _bad_calls():
    vadd = intrin_vadd(16)
    A = loom.placeholder((8, 32), name="A")
    B = loom.placeholder((8, 32), name="B")
    Ad = loom.placeholder((8, 32), "float64", name="Ad")
    k = loom.reduce_axis((0, 2), name="k")
    return {
        "extent": (lambda i: vadd(A[i, 0:8], B[i, 0:16]),
                   r"dimension 0 of input vx \(argument 0, A\) has extent 16 in the intrinsic but 8 in the region"),
        "leading": (lambda i: vadd(A[i:i + 2, 0:16], B[i, 0:16]),
                    r"argument 0 covers 2 elements of dimension 0 of A; the intrinsic's input vx is 1-d"),
        "too_few": (lambda i: vadd(A[i, 0:16]), r"expected 2 tensor region\(s\) .* got 1 region\(s\)"),
        "too_many": (lambda i: vadd(A[i, 0:16], B[i, 0:16], 3.0), r"and 0 scalar\(s\) .* 1 other argument"),
        "element": (lambda i: vadd(A[i, 0], B[i, 0:16]),  # an element is a region of one, as in TVM
                    r"dimension 0 of input vx \(argument 0, A\) has extent 16 in the intrinsic but 1 in the region"),
        "dtype": (lambda i: vadd(Ad[i, 0:16], B[i, 0:16]), r"argument 0 \(Ad\) is float64, the intrinsic's input vx"),
        "keyword": (lambda i: vadd(A[i, 0:16], B[i, 0:16], axis=k), r"unknown keyword argument\(s\) \['axis'\]"),
        "reduce_missing": (lambda i: vadd(A[k, 0:16], B[i, 0:16]), r"uses the reduction axis k, which reduce_axis"),
        "reduce_parts": (lambda i: vadd(A[k, 0:16], B[i, 0:16], reduce_axis=k), r"needs a reduce_update"),
        "not_reduce": (lambda i: vadd(A[i, 0:16], B[i, 0:16], reduce_axis=i), r"reduce_axis must hold reduction axes"),
        "step": (lambda i: vadd(A[i, 0:32:2], B[i, 0:16]), r"region of A, dimension 1: the slice has step 2"),
        "outside": (lambda i: vadd(A[i, 16:48], B[i, 0:16]), r"the slice 16:48 is empty or outside .*\[0, 32\)"),
        "in_expression": (lambda i, j: vadd(A[i, 0:16], B[i, 0:16]) + 1.0, r"whole body of a compute"),
        "region_as_value": (lambda i, j: A[i, 0:16] * 2.0, r"A\[i, 0:16\] is a region of A, not an element"),
    }


@pytest.mark.parametrize("case", sorted(_bad_calls()))
def test_misused_calls_are_errors_naming_what_is_wrong(case):
    fcompute, message = _bad_calls()[case]
    kind = LoomTypeError if case in ("dtype", "keyword", "not_reduce") else LoomValueError
    with pytest.raises(kind, match=message):
        loom.compute((8, 16), fcompute, name="C")


def test_shape_errors():
    vadd = intrin_vadd(16)
    A = loom.placeholder((8, 16), name="A")
    with pytest.raises(LoomValueError, match=r"output dimension 0 has extent 16 in the intrinsic but 8 in the shape"):
        loom.compute((8, 8), lambda i: vadd(A[i, 0:16], A[i, 0:16]), name="C")
    with pytest.raises(LoomValueError, match=r"shape has 3 dimensions: fcompute takes 1 index\(es\) and the "
                                             r"intrinsic vadd computes 1-d outputs \[16\], so give 2"):
        loom.compute((8, 16, 2), lambda i: vadd(A[i, 0:16], A[i, 0:16]), name="C")
    with pytest.raises(LoomValueError, match=r"fcompute takes 1 index argument\(s\) \['i'\] but the shape has 2"):
        loom.compute((8, 16), lambda i: A[i, 0] * 2.0, name="C")  # no intrinsic: the plain arity error
    T = loom.placeholder((8, 32), name="T")
    C = loom.compute((8, 16), lambda i: vadd(T[i, 16:32], T[i, 0:16]), name="C")
    loom.lower(loom.create_schedule(C.op), [T, C])  # rows start at multiples of 16: fine
    C = loom.compute((8, 16), lambda i: vadd(T[i, 1:17], T[i, 0:16]), name="C")
    with pytest.raises(LoomValueError, match=r"offset_factor is 16, but the region starts at element offset"):
        loom.lower(loom.create_schedule(C.op), [T, C])


def test_schedule_errors():
    A, B, C = vadd_program()
    P = loom.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="P")
    C = loom.compute(A.shape, lambda i: C.op.intrin(P[i, 0:16], B[i, 0:16]), name="C")
    s = loom.create_schedule(C.op)
    s[P].compute_inline()
    with pytest.raises(LoomError, match="P is inlined but a tensor compute operation C reads it"):
        loom.lower(s, [A, B, C])
    with pytest.raises(LoomValueError, match="only compute stages can be tensorized, this is a TensorComputeOp"):
        s[C].tensorize(C.op.axis[0], C.op.intrin)
    D = loom.compute(C.shape, lambda i, j: C[i, j] + 1.0, name="D")
    s = loom.create_schedule(D.op)
    with pytest.raises(LoomValueError, match="only compute operations can be inlined"):
        s[C].compute_inline()
    A, B, C = gemm_program()
    s = loom.create_schedule(C.op)
    s[C].bind(C.op.reduce_axis[0], loom.thread_axis("threadIdx.x"))
    with pytest.raises(LoomValueError, match="loop k of the reduction is bound to threadIdx.x"):
        loom.lower(s, [A, B, C])
