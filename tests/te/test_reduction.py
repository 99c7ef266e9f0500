"""reduce_axis, comm_reducer and the sum/max/min reducers: structure and numerics."""

import math

import numpy as np
import pytest

import loom
from loom.errors import LoomTypeError, LoomValueError
from loom.ir import expr as E
from loom.ir.reduce import Reduce
from loom.te.operation import compute, placeholder
from loom.te.reduction import Reducer, comm_reducer, reduce_axis
from loom.te import reduction as R
from te_reference import Reference

RNG = np.random.default_rng(7)


# ---------------------------------------------------------------------------
# reduce_axis


def test_reduce_axis_from_pair_and_range():
    k = reduce_axis((2, 10), name="k")
    assert k.iter_type == "reduce" and k.var.name == "k" and k.thread_tag == ""
    assert int(k.dom.min) == 2 and int(k.dom.extent) == 8
    rng = E.Range.from_min_extent(0, 5)
    assert reduce_axis(rng).dom is rng and reduce_axis(rng).var.name == "rv"


def test_reduce_axis_symbolic():
    n = loom.var("n", "int64")
    k = reduce_axis((0, n), name="k")
    assert str(k.var.dtype) == "int64" and str(k.dom.extent) == "n"


@pytest.mark.parametrize("dom, err, fragment", [
    ((0, 1, 2), LoomTypeError, r"\(begin, end\)"),
    (5, LoomTypeError, r"\(begin, end\)"),
    ((0.0, 4), LoomTypeError, "scalar integers"),
    ((4, 1), LoomValueError, "empty domain"),
    ((0, "x"), LoomTypeError, "integers"),
])
def test_reduce_axis_errors(dom, err, fragment):
    with pytest.raises(err, match=fragment) as info:
        reduce_axis(dom, name="r")
    assert "reduce_axis 'r'" in str(info.value)


# ---------------------------------------------------------------------------
# structure of the prebuilt reducers


@pytest.mark.parametrize("reducer, dtype, identity", [
    (R.sum, "float32", 0.0), (R.sum, "int8", 0),
    (R.max, "float32", -math.inf), (R.max, "int16", -(2**15)), (R.max, "uint8", 0),
    (R.min, "float64", math.inf), (R.min, "int32", 2**31 - 1),
])
def test_prebuilt_reducer_structure(reducer, dtype, identity):
    A = placeholder((4,), dtype, name="A")
    k = reduce_axis((0, 4), name="k")
    r = reducer(A[k], axis=k)
    assert isinstance(r, Reduce) and str(r.dtype) == dtype and r.value_index == 0
    c = r.combiner
    assert len(c.lhs) == 1 and str(c.lhs[0].dtype) == dtype and c.lhs[0].name == "x" and c.rhs[0].name == "y"
    assert c.identity_element[0].value == identity and str(c.identity_element[0].dtype) == dtype
    expected = {"sum": E.Add, "max": E.Max, "min": E.Min}[reducer.name]
    assert isinstance(c.result[0], expected)
    assert c.result[0].a is c.lhs[0] and c.result[0].b is c.rhs[0]
    assert r.axis == (k,) and isinstance(r.condition, E.IntImm) and r.condition.value == 1
    assert str(r.condition.dtype) == "bool" and r.init == ()


def test_where_axis_list_and_init():
    A = placeholder((4, 5), "int32", name="A")
    k, j = reduce_axis((0, 4), name="k"), reduce_axis((0, 5), name="j")
    r = R.sum(A[k, j], axis=[k, j], where=A[k, j] > 0, init=5)
    assert r.axis == (k, j) and str(r.condition) == "A[k, j] > 0"
    assert len(r.init) == 1 and r.init[0].value == 5 and str(r.init[0].dtype) == "int32"
    positional = R.sum(A[k, j], [k, j], k < 2)
    assert str(positional.condition) == "k < 2"
    assert R.sum(A[0, 0], axis=[]).axis == ()


def test_each_call_makes_its_own_combiner():
    A = placeholder((4,), name="A")
    k = reduce_axis((0, 4), name="k")
    assert R.sum(A[k], axis=k).combiner is not R.sum(A[k], axis=k).combiner


# ---------------------------------------------------------------------------
# direct combination (max(a, b))


def test_two_values_combine_directly():
    x, y = loom.var("x", "float32"), loom.var("y", "float32")
    m = R.max(x, y)
    assert isinstance(m, E.Max) and m.a is x and m.b is y
    assert isinstance(R.min(x, y), E.Min)
    assert R.min(3, 5).value == 3 and R.max(3, 5).value == 5 and R.sum(1, 2, 3).value == 6
    assert str(R.max(x, y, 1.0)) == "max(max(x, y), 1.0)"
    k = reduce_axis((0, 4), name="k")
    assert str(R.max(k, 1)) == "max(k, 1)"


@pytest.mark.parametrize("call, fragment", [
    (lambda x: R.max(x), "needs axis="),
    (lambda x: R.max(x, 1.0, where=x > 0.0), "where/init only apply"),
    (lambda x: R.max(placeholder((2,), name="T"), 1.0), "cannot combine a Tensor"),
])
def test_direct_combination_errors(call, fragment):
    with pytest.raises(LoomTypeError, match=fragment):
        call(loom.var("x", "float32"))


# ---------------------------------------------------------------------------
# comm_reducer


def test_custom_reducer_names_vars_after_fcombine_parameters():
    prod = comm_reducer(lambda acc, v: acc * v, lambda t: loom.const(1, t), name="prod")
    assert isinstance(prod, Reducer) and prod.name == "prod" and "prod" in repr(prod)
    A = placeholder((3,), "int32", name="A")
    k = reduce_axis((0, 3), name="k")
    r = prod(A[k], axis=k)
    assert r.combiner.lhs[0].name == "acc" and r.combiner.rhs[0].name == "v"
    assert r.combiner.identity_element[0].value == 1


def test_fidentity_may_return_python_numbers():
    prod = comm_reducer(lambda x, y: x * y, lambda t: 1, name="prod")
    A = placeholder((3,), "float16", name="A")
    k = reduce_axis((0, 3), name="k")
    ident = prod(A[k], axis=k).combiner.identity_element[0]
    assert isinstance(ident, E.FloatImm) and str(ident.dtype) == "float16"


def _argmax():
    return comm_reducer(
        lambda x, y: (loom.select(x[1] >= y[1], x[0], y[0]), loom.select(x[1] >= y[1], x[1], y[1])),
        lambda t0, t1: (loom.const(-1, t0), loom.min_value(t1)), name="argmax")


def test_tuple_reduction_structure():
    A = placeholder((4, 6), name="A")
    k = reduce_axis((0, 6), name="k")
    idx, val = _argmax()((k, A[0, k]), axis=k, where=k > 0)
    assert (idx.value_index, val.value_index) == (0, 1)
    assert idx.combiner is val.combiner and idx.condition is val.condition and idx.axis == val.axis == (k,)
    assert all(a is b for a, b in zip(idx.source, val.source)) and idx.source[0] is k.var
    c = idx.combiner
    assert [v.name for v in c.lhs] == ["x_0", "x_1"] and [v.name for v in c.rhs] == ["y_0", "y_1"]
    assert [str(t.dtype) for t in c.identity_element] == ["int32", "float32"]
    assert str(idx.dtype) == "int32" and str(val.dtype) == "float32"


def test_tuple_reduction_compute_matches_numpy():
    A = placeholder((3, 6), name="A")
    k = reduce_axis((0, 6), name="k")
    index, value = compute((3,), lambda i: _argmax()((k, A[i, k]), axis=k), name="am")
    assert index.op is value.op and index.op.reduce_axis == (k,)
    a = RNG.standard_normal((3, 6)).astype("float32")
    ref = Reference({A: a})
    np.testing.assert_array_equal(ref.run(index), a.argmax(axis=1))
    np.testing.assert_array_equal(ref.run(value), a.max(axis=1))


@pytest.mark.parametrize("make, call, err, fragment", [
    (lambda: comm_reducer(lambda x: x, lambda t: 0), None, LoomTypeError, "exactly two arguments"),
    (lambda: comm_reducer(lambda *xs: xs[0], lambda t: 0), None, LoomTypeError, "exactly two arguments"),
    (lambda: comm_reducer(3, lambda t: 0), None, LoomTypeError, "callables"),
    (lambda: comm_reducer(lambda x, y: x + 0.5, lambda t: 0, name="bad"), "int", LoomTypeError,
     "fcombine result 0 has dtype float32, expected int32"),
    (lambda: comm_reducer(lambda x, y: x + y, lambda t: loom.const(0.0), name="bad"), "int", LoomTypeError,
     "identity 0 has dtype float32"),
    (lambda: comm_reducer(lambda x, y: (x[0],), lambda a, b: (0, 0), name="bad"), "tuple", LoomTypeError,
     "fcombine must return a tuple of 2"),
    (lambda: comm_reducer(lambda x, y: (x[0], x[1]), lambda a, b: 0, name="bad"), "tuple", LoomTypeError,
     "fidentity must return a tuple of 2"),
])
def test_comm_reducer_errors(make, call, err, fragment):
    with pytest.raises(err, match=fragment):
        reducer = make()
        A = placeholder((4,), "int32", name="A")
        k = reduce_axis((0, 4), name="k")
        reducer((A[k], A[k]) if call == "tuple" else A[k], axis=k)


def test_reduce_argument_errors():
    A = placeholder((4, 4), name="A")
    k = reduce_axis((0, 4), name="k")
    data = compute((4,), lambda i: A[i, 0], name="D").op.axis[0]
    with pytest.raises(LoomTypeError, match="where= must be a boolean condition, got dtype float32"):
        R.sum(A[0, k], axis=k, where=A[0, k])
    with pytest.raises(LoomTypeError, match="axis entries must be IterVars from reduce_axis, got Var"):
        R.sum(A[0, k], axis=[k.var])
    with pytest.raises(LoomValueError, match="axis i is a 'data_par' axis"):
        R.sum(A[0, k], axis=data)
    with pytest.raises(LoomValueError, match="lists an axis twice"):
        R.sum(A[k, k], axis=[k, k])
    with pytest.raises(LoomValueError, match="init has 2 value"):
        R.sum(A[0, k], axis=k, init=(1.0, 2.0))
    with pytest.raises(LoomTypeError, match="where given both"):
        R.sum(A[0, k], k, k > 0, where=k > 1)
    with pytest.raises(LoomTypeError, match="init given both"):
        R.sum(A[0, k], k, k > 0, 1.0, init=2.0)
    with pytest.raises(LoomTypeError, match="got 5 arguments"):
        R.sum(A[0, k], k, k > 0, 1.0, 2.0)
    with pytest.raises(LoomValueError, match="tuple of values to reduce is empty"):
        R.sum((), axis=k)


# ---------------------------------------------------------------------------
# numerics through the reference evaluator


def test_sum_with_where_and_init_matches_numpy():
    A = placeholder((4, 7), name="A")
    k = reduce_axis((1, 6), name="k")
    B = compute((4,), lambda i: R.sum(A[i, k], axis=k, where=A[i, k] > 0.0), name="B")
    C = compute((4,), lambda i: R.sum(A[i, k], axis=k, init=10.0), name="C")
    a = RNG.standard_normal((4, 7)).astype("float32")
    ref = Reference({A: a})
    window = a[:, 1:6]
    np.testing.assert_allclose(ref.run(B), np.where(window > 0, window, 0).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(ref.run(C), window.sum(axis=1) + 10, rtol=1e-5)


def test_max_min_over_two_axes_and_matmul():
    A = placeholder((3, 4, 5), "int32", name="A")
    j, k = reduce_axis((0, 4), name="j"), reduce_axis((0, 5), name="k")
    MX = compute((3,), lambda i: R.max(A[i, j, k], axis=[j, k]), name="MX")
    MN = compute((3,), lambda i: R.min(A[i, j, k], axis=[j, k], where=j + k < 3), name="MN")
    X, W = placeholder((3, 5), name="X"), placeholder((5, 2), name="W")
    r = reduce_axis((0, 5), name="r")
    MM = compute((3, 2), lambda i, c: R.sum(X[i, r] * W[r, c], axis=r), name="MM")
    a = RNG.integers(-50, 50, (3, 4, 5)).astype("int32")
    x, w = RNG.standard_normal((3, 5)).astype("float32"), RNG.standard_normal((5, 2)).astype("float32")
    ref = Reference({A: a, X: x, W: w})
    np.testing.assert_array_equal(ref.run(MX), a.max(axis=(1, 2)))
    jj, kk = np.meshgrid(range(4), range(5), indexing="ij")
    np.testing.assert_array_equal(ref.run(MN), np.where(jj + kk < 3, a, 2**31 - 1).min(axis=(1, 2)))
    np.testing.assert_allclose(ref.run(MM), x @ w, rtol=1e-5)


def test_empty_where_gives_the_identity():
    A = placeholder((2, 3), name="A")
    k = reduce_axis((0, 3), name="k")
    B = compute((2,), lambda i: R.max(A[i, k], axis=k, where=k > 5), name="B")
    out = Reference({A: np.ones((2, 3), "float32")}).run(B)
    assert np.all(np.isneginf(out))


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
@pytest.mark.parametrize("split", [False, True])
def test_a_reduction_whose_extent_uses_an_output_axis(target, split):
    """``y[i] = sum(x[0:i+1])`` (a triangular reduction): the reduction loop's bound names the data axis."""
    n = 16
    x = placeholder((n,), name="x")
    y = compute((n,), lambda i: loom.sum(x[R_k := reduce_axis((0, i + 1), name="k")], axis=R_k), name="y")
    s = loom.create_schedule(y.op)
    if split:
        outer, _ = s[y].split(y.op.axis[0], factor=4)
        s[y].parallel(outer)
    f = loom.build(s, [x, y], target=target)
    a, b = np.arange(n, dtype="float32"), np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, np.cumsum(a))
