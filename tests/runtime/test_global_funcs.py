"""Global functions (register_func / get_global_func), EnvFunc, the call_packed builder, the native entry."""

import ctypes
import struct

import numpy as np
import pytest

import loom
from loom.ir import EnvFunc
from loom.ir.intrin import call_packed, packed_array
from loom.runtime import nd
from loom.runtime.linking import take_pending_error
from loom.runtime.packed import (
    PACKED_CALL_SIGNATURE, PACKED_CALL_SYMBOL, PackedFuncError, TypeCode, invoke_packed, packed_layout, packed_service,
)
from loom.runtime.registry import (
    GlobalFuncError, get_global_func, list_global_func_names, register_func, remove_global_func,
)


@pytest.fixture
def names():
    """Global function names made by a test, removed after it."""
    made = []
    yield made
    for name in made:
        if name in list_global_func_names():
            remove_global_func(name)


def test_register_and_get(names):
    names += ["test.reg.add", "my_named"]

    @register_func("test.reg.add")
    def add(a, b):
        return a + b

    assert add(1, 2) == 3  # the decorator returns the function itself
    got = get_global_func("test.reg.add")  # a PackedFunc around the registered function
    assert isinstance(got, loom.runtime.PackedFunc) and got.func is add and got(2, 5) == 7

    @register_func
    def my_named():
        return "here"

    assert get_global_func("my_named")() == "here"
    assert {"test.reg.add", "my_named"} <= set(list_global_func_names())
    assert list_global_func_names() == sorted(list_global_func_names())


def test_override_rules(names):
    names.append("test.reg.twice")
    register_func("test.reg.twice", lambda: 1)
    with pytest.raises(GlobalFuncError, match="already registered; pass override=True") as info:
        register_func("test.reg.twice", lambda: 2)
    assert isinstance(info.value, loom.LoomError) and isinstance(info.value, ValueError)
    assert get_global_func("test.reg.twice")() == 1
    register_func("test.reg.twice", lambda: 2, override=True)
    assert get_global_func("test.reg.twice")() == 2


def test_missing_and_bad_input(names):
    assert get_global_func("test.reg.nothing", allow_missing=True) is None
    with pytest.raises(GlobalFuncError, match="no global function 'test.reg.nothing' is registered"):
        get_global_func("test.reg.nothing")
    with pytest.raises(GlobalFuncError, match="not registered"):
        remove_global_func("test.reg.nothing")
    with pytest.raises(loom.LoomTypeError, match="needs a callable, got int"):
        register_func("test.reg.int", 3)
    with pytest.raises(loom.LoomTypeError, match="must be a str, got int"):
        get_global_func(3)
    with pytest.raises(loom.LoomValueError, match="must not be empty"):
        register_func("", lambda: 0)
    names.append("other.scope.thing")
    register_func("other.scope.thing", lambda: 0)
    with pytest.raises(GlobalFuncError, match="same last part: other.scope.thing"):
        get_global_func("mine.thing")


def test_remove(names):
    register_func("test.reg.gone", lambda: 0)
    remove_global_func("test.reg.gone")
    assert "test.reg.gone" not in list_global_func_names()
    assert get_global_func("test.reg.gone", allow_missing=True) is None


def test_invoke_packed_errors_chain(names):
    names.append("test.reg.raise")

    def bad(x):
        raise ZeroDivisionError(f"no {x}")

    register_func("test.reg.raise", bad)
    with pytest.raises(PackedFuncError, match=r"call_packed\('test.reg.raise'\): the function raised "
                                              "ZeroDivisionError: no 3") as info:
        invoke_packed("test.reg.raise", [3])
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    with pytest.raises(PackedFuncError, match="no global function 'test.reg.none'"):
        invoke_packed("test.reg.none", [])


# --------------------------------------------------------------------------- EnvFunc


def test_env_func_calls_the_registered_function(names):
    names.append("test.env.f")
    register_func("test.env.f", lambda x: x * 3)
    f = EnvFunc.get("test.env.f")
    assert f.name == "test.env.f" and f(5) == 15 and f.func(1) == 3
    register_func("test.env.f", lambda x: x - 1, override=True)
    assert f(5) == 4  # looked up at call time


def test_env_func_serializes_and_compares_by_name(names):
    names.append("test.env.g")
    register_func("test.env.g", lambda: "g")
    f = EnvFunc.get("test.env.g")
    back = loom.load_json(loom.save_json(f))
    assert isinstance(back, EnvFunc) and back is not f and back() == "g"
    assert loom.structural_equal(back, f) and loom.structural_hash(back) == loom.structural_hash(f)
    assert not loom.structural_equal(f, EnvFunc("test.env.other"))
    inside = loom.convert([f, loom.const(1)])  # inside other nodes too
    assert loom.structural_equal(loom.load_json(loom.save_json(inside)), inside)
    assert "test.env.g" in str(f)


def test_env_func_missing(names):
    with pytest.raises(GlobalFuncError, match="no global function 'test.env.none'"):
        EnvFunc.get("test.env.none")
    dangling = EnvFunc("test.env.none")  # loaded from a file of another process, say
    with pytest.raises(GlobalFuncError, match="test.env.none"):
        dangling()
    with pytest.raises(loom.LoomTypeError):
        EnvFunc(3)


# --------------------------------------------------------------------------- the call_packed builder


def test_call_packed_builds_a_call():
    A = loom.decl_buffer((2, 3), "float32", name="A")
    x = loom.var("x")
    call = call_packed("f.name", A, x + 1, 2.5, True, "text")
    assert call.dtype == "int32" and call.op.name == "tir.call_packed" and not call.op.info.pure
    assert str(call) == ("call_packed('f.name', packed_array(A, 'float32', 2, 0, 2, 3, 3, 1, dtype='handle'), "
                         "x + 1, 2.5, True, 'text', dtype='int32')")
    name, layout = packed_layout(call)
    assert name == "f.name"
    assert [c for c, _ in layout] == [TypeCode.ARRAY, TypeCode.INT, TypeCode.FLOAT, TypeCode.BOOL, TypeCode.STR]
    assert [len(w) for _, w in layout] == [8, 1, 1, 1, 1]
    back = loom.load_json(loom.save_json(call))
    assert loom.structural_equal(back, call, map_free_vars=True)


def test_packed_array_keeps_strides_and_offset():
    n = loom.var("n")
    B = loom.decl_buffer((n, 4), "int8", name="B", strides=[loom.var("s"), 1], elem_offset=3)
    assert str(packed_array(B)) == "packed_array(B, 'int8', 2, 3, n, 4, s, 1, dtype='handle')"
    C = loom.decl_buffer((n, 4, 2), "int8", name="C")
    assert str(packed_array(C)) == "packed_array(C, 'int8', 3, 0, n, 4, 2, 8, 2, 1, dtype='handle')"
    assert str(packed_array(loom.decl_buffer((), "int8", name="D"))) == \
        "packed_array(D, 'int8', 0, 0, dtype='handle')"


def test_call_packed_bad_arguments():
    with pytest.raises(loom.LoomTypeError, match="needs the function name"):
        call_packed()
    with pytest.raises(loom.LoomTypeError, match="needs the function name"):
        call_packed(3, 4)
    with pytest.raises(loom.LoomValueError, match="must not be empty"):
        call_packed("")
    with pytest.raises(loom.LoomTypeError, match="argument 1 is a vector"):
        call_packed("f", loom.ir.Broadcast(loom.const(1.0), 4))
    with pytest.raises(loom.LoomTypeError, match="argument 2 must be a Buffer, a str or a scalar"):
        call_packed("f", 1, object())
    with pytest.raises(loom.LoomTypeError, match="needs a Buffer"):
        packed_array(loom.var("p", "handle"))


def test_asnumpy_is_numpy():
    a = nd.array(np.arange(3, dtype="int16"))
    assert np.array_equal(a.asnumpy(), a.numpy()) and a.asnumpy().dtype == np.int16


# --------------------------------------------------------------------------- the native entry point


def _native_call(name, words, codes):
    """Call the runtime's packed-call entry as native code does: status, message, parked exception."""
    entry = PACKED_CALL_SIGNATURE(packed_service()[PACKED_CALL_SYMBOL])
    w = (ctypes.c_uint64 * max(1, len(words)))(*words)
    c = (ctypes.c_int32 * max(1, len(codes)))(*codes)
    err = ctypes.c_char_p()
    status = entry(ctypes.c_char_p(name.encode()), w, c, len(codes), ctypes.byref(err))
    return status, err.value, take_pending_error(ctypes.cast(err, ctypes.c_void_p).value)


def test_native_entry_decodes_every_kind(names):
    got = []
    names.append("test.native.all")
    register_func("test.native.all", lambda *xs: got.append(xs))
    data = np.arange(6, dtype="int16")
    dtype, text = ctypes.c_char_p(b"int16"), ctypes.c_char_p("héllo".encode())
    address = ctypes.cast(dtype, ctypes.c_void_p).value
    array = [data.ctypes.data, address, 2, 1, 2, 2, 1, 3]  # (2, 2) at offset 1, strides (1, 3)
    words = [(-5) & (2 ** 64 - 1), 2 ** 64 - 1, struct.unpack("<Q", struct.pack("<d", -0.5))[0], 1234, 1,
             *array, ctypes.cast(text, ctypes.c_void_p).value]
    codes = [TypeCode.INT, TypeCode.UINT, TypeCode.FLOAT, TypeCode.HANDLE, TypeCode.BOOL, TypeCode.ARRAY, TypeCode.STR]
    status, message, pending = _native_call("test.native.all", words, codes)
    assert (status, message, pending) == (0, None, None)
    (i, u, f, h, b, arr, s), = got
    assert (i, u, f, h, b, s) == (-5, 2 ** 64 - 1, -0.5, 1234, True, "héllo")
    assert arr.shape == (2, 2) and arr.dtype == "int16" and arr.numpy().tolist() == [[1, 4], [2, 5]]


def test_native_entry_reports_instead_of_raising(names):
    names.append("test.native.fail")
    register_func("test.native.fail", lambda: [][1])
    status, message, pending = _native_call("test.native.fail", [], [])
    assert status == -1 and b"raised IndexError" in message
    assert isinstance(pending, PackedFuncError) and isinstance(pending.__cause__, IndexError)
    status, message, pending = _native_call("test.native.fail", [0], [99])
    assert status == -1 and b"unknown type code 99" in message and isinstance(pending, PackedFuncError)
    status, message, pending = _native_call("test.native.absent", [], [])
    assert status == -1 and b"no global function 'test.native.absent'" in message
