"""Issue 15: packed functions as first-class objects (TVM's ``tvm.Function``), on every CPU backend."""

import numpy as np
import pytest

import loom
from loom.ir import EnvFunc
from loom.ir.container import Array, Map
from loom.ir.intrin import call_packed
from loom.runtime import PackedFunc, nd
from loom.runtime.packed import PackedFuncError
from loom.runtime.registry import register_func, remove_global_func

TARGETS = ["interp", "llvm", "c"]


# --------------------------------------------------------------------------- TVM v0.6's test_runtime_packed_func


def test_get_global_func_returns_a_packed_func(reg):
    targs = (10, 10.0, "hello")
    seen = []

    def my_packed_func(*args):
        seen.append(args)
        return 10

    assert reg("test.pfo.get", my_packed_func) is my_packed_func  # register_func gives back the function
    f = loom.get_global_func("test.pfo.get")
    assert isinstance(f, PackedFunc) and f.name == "test.pfo.get" and f.func is my_packed_func
    assert f(*targs) == 10 and seen == [targs]
    assert [type(x) for x in seen[0]] == [int, float, str]  # Python scalars arrive as themselves
    assert loom.get_global_func("test.pfo.get") is f  # one object per registration


def test_a_packed_func_argument_arrives_as_one(reg):
    x = loom.convert(10)
    calls = []

    def test(y):
        calls.append(y)
        return y

    f2 = loom.convert(test)

    def my_callback_with_node(y, f):
        assert y is x and isinstance(f, PackedFunc)
        return f(y)

    reg("test.pfo.callback", my_callback_with_node)
    y = loom.get_global_func("test.pfo.callback")(x, f2)
    assert y is x and y.value == 10 and calls == [x]


def test_a_plain_python_function_argument_arrives_as_a_packed_func():
    got = loom.convert(lambda g: (isinstance(g, PackedFunc), g(3)))(lambda v: v * 7)
    assert isinstance(got, Array) and got[0].value == 1 and got[1].value == 21  # a returned tuple: an Array


def test_a_function_returning_a_function():
    def addy(y):
        def add(x):
            return loom.convert(x + y)
        return add

    myf = loom.convert(addy)
    f = myf(10)
    assert isinstance(myf, PackedFunc) and isinstance(f, PackedFunc) and f.name == "add"
    assert type(f(11)) is loom.ir.IntImm and f(11).value == 21


def test_convert_of_a_callable():
    def myfunc(*args):
        return len(args)

    f = loom.convert(myfunc)
    assert isinstance(f, PackedFunc) and f.func is myfunc and f(10, 10.0, "hello", 10) == 4
    assert loom.convert(f) is f and loom.ir.convert(f) is f
    assert repr(f) == "<loom.runtime.PackedFunc myfunc>"


def test_byte_array_arrives_as_itself():
    a = bytearray("hello", encoding="ascii")
    got = loom.convert(lambda ss: ss)(a)
    assert got is a


def test_empty_array():
    def myfunc(ss):
        assert isinstance(ss, Array)
        return tuple(ss) == ()

    x = loom.convert(())
    assert isinstance(x, Array) and loom.convert(myfunc)(x) is True


# --------------------------------------------------------------------------- the conversions


def test_containers_and_numpy_scalars_are_converted():
    seen = []
    f = PackedFunc(lambda *args: seen.extend(args), "collect")
    arr = np.arange(3)
    f([1, 2.5], (), {"k": 3}, np.int16(7), np.float64(0.25), np.bool_(True), arr, None)
    lst, empty, mp, i, fl, b, same, none = seen
    assert isinstance(lst, Array) and [type(v).__name__ for v in lst] == ["IntImm", "FloatImm"]
    assert isinstance(empty, Array) and len(empty) == 0
    assert isinstance(mp, Map) and mp["k"].value == 3
    assert (type(i), i, type(fl), fl, type(b), b) == (int, 7, float, 0.25, bool, True)
    assert same is arr and none is None


def test_ndarrays_and_nodes_pass_unchanged():
    a = nd.array(np.ones(4, "float32"))
    n = loom.var("n")
    f = PackedFunc(lambda *args: args[0] is a and args[1] is n, "same")
    assert f(a, n) is True


def test_results_are_converted():
    assert isinstance(loom.convert(lambda: [1, 2])(), Array)
    assert type(loom.convert(lambda: np.float32(1.5))()) is float
    inner = loom.convert(lambda: abs)()
    assert isinstance(inner, PackedFunc) and inner(-4) == 4


def test_unconvertible_container_names_the_function_and_argument():
    f = PackedFunc(lambda x: x, "takes.one")
    with pytest.raises(loom.LoomTypeError, match=r"packed function 'takes.one': argument 0 \(list\) cannot cross a "
                                                 r"packed call: cannot convert a object"):
        f([object()])
    g = loom.convert(lambda: {"k": object()})
    with pytest.raises(loom.LoomTypeError, match=r"'<lambda>': the result \(dict\) cannot cross"):
        g()


def test_exceptions_reach_the_caller_unchanged():
    def bad(x):
        raise ZeroDivisionError(f"no {x}")

    with pytest.raises(ZeroDivisionError, match="no 3"):
        loom.convert(bad)(3)


def test_packed_func_needs_a_callable():
    with pytest.raises(loom.LoomTypeError, match="PackedFunc needs a callable, got int"):
        PackedFunc(3)
    with pytest.raises(TypeError, match="cannot convert a object to a Loom node"):
        loom.convert(object())  # not callable: still an error


def test_a_packed_func_has_no_json_form():
    with pytest.raises(loom.LoomTypeError, match="save_json: a function is not a node and has no JSON form"):
        loom.save_json(lambda: 0)


def test_wrapping_a_packed_func_does_not_nest():
    f = loom.convert(abs)
    g = PackedFunc(f, "renamed")
    assert g.func is abs and g.name == "renamed" and g(-2) == 2


# --------------------------------------------------------------------------- with the registry and kernels


def test_register_a_packed_func_keeps_it(reg):
    f = loom.convert(lambda x: x + 1)
    reg("test.pfo.packed", f)
    assert loom.get_global_func("test.pfo.packed") is f
    assert EnvFunc.get("test.pfo.packed")(1) == 2

    def test_pfo_named(x):
        return -x

    named = loom.convert(test_pfo_named)
    try:
        assert register_func(named) is named  # the decorator form takes the PackedFunc's name
        assert loom.get_global_func("test_pfo_named") is named and named(3) == -3
    finally:
        remove_global_func("test_pfo_named")


def test_a_module_function_registers_and_runs(reg):
    A = loom.placeholder((8,), name="A")
    B = loom.compute(A.shape, lambda i: A[i] * 2.0, name="B")
    m = loom.build(loom.create_schedule(B.op), [A, B], target="llvm", name="double")
    reg("test.pfo.module", m["double"])
    f = loom.get_global_func("test.pfo.module")
    assert f is m["double"] and isinstance(f, PackedFunc)
    a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("how", ["function", "packed"])
def test_kernels_call_the_raw_function(reg, target, how):
    """A kernel's call_packed gets NDArrays and its result is dropped, even one no node could hold."""
    seen = []

    def addone(x, y):
        seen.append((type(x), type(y)))
        nd.array(x.asnumpy() + 1).copyto(y)
        return [object()]  # converting this would fail: the kernel path must not try

    reg("test.pfo.kernel", addone if how == "function" else loom.convert(addone))
    A = loom.placeholder((6,), name="A")
    B = loom.extern(A.shape, [A], lambda ins, outs: call_packed("test.pfo.kernel", ins[0], outs[0]), name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    a = np.random.default_rng(3).uniform(size=6).astype("float32")
    b = np.zeros(6, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)
    assert seen == [(nd.NDArray, nd.NDArray)]


@pytest.mark.parametrize("target", TARGETS)
def test_kernel_errors_still_chain(reg, target):
    reg("test.pfo.raise", loom.convert(lambda x, y: 1 / 0))
    A = loom.placeholder((2,), name="A")
    B = loom.extern(A.shape, [A], lambda ins, outs: call_packed("test.pfo.raise", ins[0], outs[0]), name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target=target)
    with pytest.raises(PackedFuncError, match="the function raised ZeroDivisionError") as info:
        f(np.zeros(2, "float32"), np.zeros(2, "float32"))
    assert isinstance(info.value.__cause__, ZeroDivisionError)
