"""placeholder / compute / thread_axis / extern: the structure of the operations they build."""


import numpy as np
import pytest

import loom
from loom.errors import LoomError, LoomTypeError, LoomValueError
from loom.ir import expr as E
from loom.ir.producer import ProducerLoad
from loom.ir.stmt import BufferStore, Evaluate
from loom.te import reduction, tensor_ops  # noqa: F401 - tensor_ops attaches Tensor arithmetic (docs use it)
from loom.te.operation import compute, extern, placeholder, thread_axis
from loom.te.reduction import reduce_axis
from loom.te.tensor import ComputeOp, ExternOp, PlaceholderOp, Tensor
from te_reference import Reference


# ---------------------------------------------------------------------------
# placeholder


def test_placeholder_fields():
    n = loom.var("n")
    A = placeholder((n, 3), "int16", name="A")
    assert isinstance(A, Tensor) and isinstance(A.op, PlaceholderOp)
    assert A.shape[0] is n and isinstance(A.shape[1], E.IntImm) and A.shape[1].value == 3
    assert str(A.dtype) == "int16" and A.name == "A" and A.ndim == 2 and A.value_index == 0
    assert A.op.output(0) is A


def test_placeholder_defaults_and_scalar_shape():
    A = placeholder(5)
    assert [int(s) for s in A.shape] == [5]
    assert str(A.dtype) == "float32" and A.name == "placeholder"
    assert placeholder(()).ndim == 0


def test_placeholder_accepts_numpy_ints():
    assert [int(s) for s in placeholder((np.int64(3), np.int32(2))).shape] == [3, 2]


def test_placeholder_int64_shape_widens_python_ints():
    n = loom.var("n", "int64")
    A = placeholder((n, 4))
    assert [str(s.dtype) for s in A.shape] == ["int64", "int64"]


@pytest.mark.parametrize("shape, err, fragment", [
    ((2.5, 3), LoomTypeError, "shape entry 0"),
    ((True, 3), LoomTypeError, "shape entry 0"),
    ((3, -1), LoomValueError, "negative"),
    ("abc", LoomTypeError, "shape must be"),
    ((loom.var("x", "float32"),), LoomTypeError, "scalar integer"),
])
def test_placeholder_bad_shape(shape, err, fragment):
    with pytest.raises(err, match=fragment) as info:
        placeholder(shape, name="P")
    assert "'P'" in str(info.value)


def test_placeholder_bad_dtype_names_the_tensor():
    with pytest.raises(LoomTypeError, match="placeholder 'X'.*floaty"):
        placeholder((2,), "floaty", name="X")


# ---------------------------------------------------------------------------
# compute


def test_compute_axes_named_after_parameters():
    A = placeholder((4, 5), name="A")
    B = compute(A.shape, lambda row, col: A[row, col] + 1.0, name="B", tag="ewise", attrs={"k": 1})
    op = B.op
    assert isinstance(op, ComputeOp) and op.name == "B" and op.tag == "ewise" and op.attrs == {"k": 1}
    assert [iv.var.name for iv in op.axis] == ["row", "col"]
    for iv, ext in zip(op.axis, (4, 5)):
        assert iv.iter_type == "data_par" and int(iv.dom.min) == 0 and int(iv.dom.extent) == ext
    assert op.reduce_axis == ()
    assert [int(s) for s in B.shape] == [4, 5] and str(B.dtype) == "float32"
    assert op.axis[0] is B.op.axis[0] and op.num_outputs == 1 and op.output(0) is B
    body = op.body[0]
    assert isinstance(body, E.Add) and isinstance(body.a, ProducerLoad)
    assert body.a.producer is A and body.a.indices[0] is op.axis[0].var


def test_compute_symbolic_extent_and_index_dtype():
    n = loom.var("n", "int64")
    A = placeholder((n,), name="A")
    B = compute((n,), lambda i: A[i] * 2.0, name="B")
    iv = B.op.axis[0]
    assert iv.dom.extent is n and str(iv.var.dtype) == "int64" and str(iv.dom.min.dtype) == "int64"


def test_compute_varargs_names():
    A = placeholder((2, 3, 4), name="A")
    assert [iv.var.name for iv in compute(A.shape, lambda *i: A[i]).op.axis] == ["i0", "i1", "i2"]
    assert [iv.var.name for iv in compute(A.shape, lambda b, *i: A[(b, *i)]).op.axis] == ["b", "i1", "i2"]


def test_compute_constant_body_and_zero_dims():
    C = compute((3,), lambda i: 7)
    assert str(C.dtype) == "int32" and isinstance(C.op.body[0], E.IntImm)
    D = compute((), lambda: loom.const(1.5))
    assert D.ndim == 0 and str(D.dtype) == "float32"


def test_compute_multi_output_shares_axes():
    A = placeholder((3, 4), name="A")
    outs = compute((3, 4), lambda i, j: (A[i, j] + 1.0, loom.cast(A[i, j], "int32")), name="M")
    assert isinstance(outs, list) and len(outs) == 2
    X, Y = outs
    assert X.op is Y.op and X.op.num_outputs == 2
    assert (X.value_index, Y.value_index) == (0, 1)
    assert X.op.output(1) is Y and str(X.dtype) == "float32" and str(Y.dtype) == "int32"
    assert X.name == "M.v0" and Y.shape == X.shape
    with pytest.raises(LoomValueError, match="output"):
        X.op.output(2)


def test_compute_numerics_match_numpy():
    A, B = placeholder((3, 4), name="A"), placeholder((4,), name="B")
    C = compute((3, 4), lambda i, j: loom.select(A[i, j] > B[j], A[i, j] - B[j], B[j] * 2.0), name="C")
    D, E2 = compute((3,), lambda i: (C[i, 0] + C[i, 3], loom.exp(C[i, 1])), name="D")
    a = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    b = np.random.default_rng(1).standard_normal(4).astype("float32")
    ref = Reference({A: a, B: b})
    c = np.where(a > b, a - b, b * 2)
    np.testing.assert_allclose(ref.run(C), c, rtol=1e-6)
    np.testing.assert_allclose(ref.run(D), c[:, 0] + c[:, 3], rtol=1e-6)
    np.testing.assert_allclose(ref.run(E2), np.exp(c[:, 1]), rtol=1e-6)


def test_compute_arity_mismatch():
    with pytest.raises(LoomValueError, match=r"compute 'C'.*2 index argument.*3 dimension"):
        compute((2, 3, 4), lambda i, j: i + j, name="C")
    with pytest.raises(LoomValueError, match="compute 'C'"):
        compute((2,), lambda i, j, *rest: i, name="C")


@pytest.mark.parametrize("fcompute, err, fragment", [
    (lambda i: (), LoomValueError, "empty tuple"),
    (lambda i: "text", LoomTypeError, "output 0 of fcompute is not an expression"),
    (lambda i: (i, None), LoomTypeError, "output 1"),
])
def test_compute_bad_bodies(fcompute, err, fragment):
    with pytest.raises(err, match=fragment):
        compute((2,), fcompute, name="C")


def test_compute_returning_a_tensor_says_to_index_it():
    A = placeholder((2,), name="A")
    with pytest.raises(LoomTypeError, match=r"tensor A itself.*A\[i\]"):
        compute((2,), lambda i: A)


def test_compute_rejects_non_callable_and_bad_index_count():
    with pytest.raises(LoomTypeError, match="callable"):
        compute((2,), 3.0, name="C")
    A = placeholder((2, 2), name="A")
    with pytest.raises(LoomValueError, match="indexes 1 of the 2 dimensions of tensor A"):
        compute((2,), lambda i: A[i])


def test_compute_reduce_axis_collected():
    A = placeholder((4, 6), name="A")
    k = reduce_axis((0, 6), name="k")
    B = compute((4,), lambda i: reduction.sum(A[i, k], axis=k), name="B")
    assert B.op.reduce_axis == (k,) and k.iter_type == "reduce"
    assert B.op.body[0].axis == (k,)


def test_reduction_nested_in_arithmetic_is_an_error():
    A = placeholder((4, 6), name="A")
    k = reduce_axis((0, 6), name="k")
    with pytest.raises(LoomValueError, match="compute 'B': output 0 uses a reduction inside"):
        compute((4,), lambda i: reduction.sum(A[i, k], axis=k) * 2.0, name="B")
    j = reduce_axis((0, 6), name="j")
    with pytest.raises(LoomValueError, match="inside"):
        compute((4,), lambda i: reduction.sum(reduction.max(A[i, j], axis=j) + A[i, k], axis=k), name="B")


def test_reduction_result_reused_downstream_is_fine():
    A = placeholder((4, 6), name="A")
    k = reduce_axis((0, 6), name="k")
    B = compute((4,), lambda i: reduction.sum(A[i, k], axis=k), name="B")
    C = compute((4,), lambda i: B[i] * 2.0, name="C")  # B's body holds a Reduce; C's does not
    assert C.op.reduce_axis == ()


def test_multi_output_reductions_must_be_one_tuple_reduction():
    A = placeholder((4, 6), name="A")
    k = reduce_axis((0, 6), name="k")
    with pytest.raises(LoomValueError, match="every output is a reduction or none"):
        compute((4,), lambda i: (reduction.sum(A[i, k], axis=k), A[i, 0]), name="B")
    with pytest.raises(LoomValueError, match="output 1 is a different reduction"):
        compute((4,), lambda i: (reduction.sum(A[i, k], axis=k), reduction.sum(A[i, k], axis=k)), name="B")
    pair = reduction.comm_reducer(lambda x, y: (x[0] + y[0], x[1] * y[1]), lambda a, b: (0.0, 1.0), name="pair")
    with pytest.raises(LoomValueError, match="element 1 of the tuple reduction"):
        compute((4,), lambda i: tuple(reversed(pair((A[i, k], A[i, k]), axis=k))), name="B")
    with pytest.raises(LoomValueError, match="2 elements but the compute has 1"):
        compute((4,), lambda i: pair((A[i, k], A[i, k]), axis=k)[0], name="B")


# ---------------------------------------------------------------------------
# IterVars in expressions


def test_iter_vars_act_as_their_variable():
    A = placeholder((8,), name="A")
    k = reduce_axis((0, 8), name="k")
    load = A[k]
    assert load.indices[0] is k.var
    assert str(k * 2 + 1) == "k * 2 + 1" and str(1 - k) == "1 - k" and str(k > 2) == "k > 2"
    assert str(-k) == "0 - k" and str(k // 2) == "k // 2" and str(k % 3) == "k % 3"
    assert str(k.astype("float32")) == "float32(k)"
    other = reduce_axis((0, 8), name="k")
    assert (k == k) is True and (k == other) is False and len({k, other}) == 2


# ---------------------------------------------------------------------------
# thread_axis


def test_thread_axis_forms():
    tx = thread_axis("threadIdx.x")
    assert tx.iter_type == "thread_index" and tx.thread_tag == "threadIdx.x"
    assert tx.var.name == "threadIdx.x" and tx.dom is None and str(tx.var.dtype) == "int32"
    bx = thread_axis((0, 32), "blockIdx.x", name="bx")
    assert bx.var.name == "bx" and int(bx.dom.extent) == 32 and bx.thread_tag == "blockIdx.x"
    ty = thread_axis(tag="threadIdx.y")
    assert ty.thread_tag == "threadIdx.y"
    for tag in ("vthread", "cthread"):
        v = thread_axis(tag)
        assert v.iter_type == "virtual_thread" and v.thread_tag == tag
    assert thread_axis("threadIdx.x") is not tx


def test_thread_axis_errors():
    with pytest.raises(LoomValueError, match="needs a tag"):
        thread_axis()
    with pytest.raises(LoomValueError, match="needs a tag"):
        thread_axis((0, 4))
    with pytest.raises(LoomValueError, match="given twice"):
        thread_axis("threadIdx.x", "threadIdx.y")
    with pytest.raises(LoomTypeError, match=r"thread_axis 'threadIdx.x'.*\(begin, end\)"):
        thread_axis((0, 4, 8), "threadIdx.x")


# ---------------------------------------------------------------------------
# extern


def test_extern_default_buffers_and_expression_body():
    n = loom.var("n")
    A = placeholder((n,), name="A")
    seen = {}

    def body(ins, outs):
        seen["ins"], seen["outs"] = ins, outs
        return loom.call_extern("int32", "my_copy", ins[0].data, outs[0].data, n)

    B = extern((n,), [A], body, name="B", tag="ext", attrs={"x": 2})
    op = B.op
    assert isinstance(op, ExternOp) and op.name == "B" and op.tag == "ext" and op.attrs == {"x": 2}
    assert op.inputs == (A,) and op.input_tensors == [A]
    assert isinstance(op.body, Evaluate)
    (ib,), (ob,) = op.input_placeholders, op.output_placeholders
    assert list(seen["ins"]) == [ib] and list(seen["outs"]) == [ob]
    assert ib.name == "A" and ib.shape[0] is n and str(ib.dtype) == "float32"
    assert ob.name == "B" and ob.shape[0] is n
    assert B.shape[0] is n and str(B.dtype) == "float32" and op.output(0) is B


def test_extern_several_outputs_with_stmt_body():
    A = placeholder((4,), "int32", name="A")

    def body(ins, outs):
        i = loom.var("i")
        from loom.ir.stmt import For
        return For(i, 0, 4, "serial", loom.ir.stmt.seq(
            BufferStore(outs[0], ins[0][i] * 2, [i]), BufferStore(outs[1], loom.cast(ins[0][i], "float32"), [0, i])))

    X, Y = extern([(4,), (1, 4)], [A], body, name="E", dtype=["int32", "float32"])
    assert X.op is Y.op and X.op.num_outputs == 2
    assert [int(s) for s in Y.shape] == [1, 4] and str(Y.dtype) == "float32" and str(X.dtype) == "int32"
    assert [b.name for b in X.op.output_placeholders] == ["E_v0", "E_v1"]
    Z = extern((4,), [Y], lambda ins, outs: loom.call_extern("int32", "f", ins[0].data), name="Z")
    assert [b.name for b in Z.op.input_placeholders] == ["E_v1"]


def test_extern_given_buffers():
    A = placeholder((4, 4), name="A")
    Ab = loom.decl_buffer((4, 4), "float32", name="Ab", strides=(8, 1))
    Ob = loom.decl_buffer((16,), "float32", name="Ob")
    B = extern((16,), [A], lambda ins, outs: loom.call_extern("int32", "f", ins[0].data), name="B",
               in_buffers=Ab, out_buffers=[Ob])
    assert B.op.input_placeholders == (Ab,) and B.op.output_placeholders == (Ob,)
    assert [int(s) for s in B.shape] == [16]


def _nop(ins, outs):
    return loom.call_extern("int32", "nop")


@pytest.mark.parametrize("kwargs, err, fragment", [
    (dict(shape=(4,), inputs=[], fcompute=_nop), LoomValueError, "cannot infer the output dtype from no inputs"),
    (dict(shape=(4,), inputs=["A"], fcompute=_nop, dtype="float32"), LoomTypeError, "input 0 must be a Tensor"),
    (dict(shape=[(4,), (4,)], inputs=[], fcompute=_nop, dtype=["int32"]), LoomValueError, "1 dtypes given for 2"),
    (dict(shape=(4,), inputs=[], fcompute=lambda i, o: 3.0 if False else "x", dtype="int8"), LoomTypeError,
     "must return a Stmt or an expression, got str"),
    (dict(shape=(4,), inputs=[], fcompute=_nop, dtype="int8", out_buffers=[]), LoomValueError,
     "0 output buffer"),
    (dict(shape=(4,), inputs=[], fcompute=_nop, dtype="int8", out_buffers=["b"]), LoomTypeError,
     "output buffer 0 must be a Buffer"),
    (dict(shape=(4.5,), inputs=[], fcompute=_nop, dtype="int8"), LoomTypeError, "shape entry 0"),
])
def test_extern_errors(kwargs, err, fragment):
    with pytest.raises(err, match=fragment) as info:
        extern(name="X", **kwargs)
    assert "extern 'X'" in str(info.value)


def test_extern_dtype_inference_and_buffer_mismatch():
    A, B = placeholder((4,), "int8", name="A"), placeholder((4,), "float32", name="B")
    with pytest.raises(LoomValueError, match=r"inputs of dtypes \['float32', 'int8'\]"):
        extern((4,), [A, B], _nop, name="X")
    assert str(extern((4,), [A, A], _nop).dtype) == "int8"
    wrong = loom.decl_buffer((4,), "float32", name="w")
    with pytest.raises(LoomValueError, match="input buffer 0 .*tensor A is 1-d int8"):
        extern((4,), [A], _nop, name="X", in_buffers=[wrong])
    with pytest.raises(LoomValueError, match="1 input buffer.* for 2 input"):
        extern((4,), [A, A], _nop, name="X", in_buffers=[wrong])


def test_every_error_is_a_loom_error():
    for bad in (lambda: placeholder(None), lambda: compute((2,), lambda i, j: i), lambda: thread_axis()):
        with pytest.raises(LoomError):
            bad()


# ---------------------------------------------------------------------------
# the user guide
