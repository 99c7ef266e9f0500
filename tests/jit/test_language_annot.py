"""loom.language's annotation classes (seed 001): each name exists and does what it says.

Unit checks of ``Annot``, ``ArgVarTable``, ``Value``, ``static_key``, the tensor
annotations, ``DynAnnot``, ``DTypeAnnot``, ``TIRAnnot`` and ``T.Buffer``, and
``@loom.jit`` kernels that use them, run on every CPU target against numpy.
"""
# ruff: noqa: F821 - the strings in T.Tensor[...] / T.dyn[...] annotations are sizes and dtypes, not names

import numpy as np
import pytest

import loom
import loom.language as T
from loom.errors import LoomError, LoomTypeError, LoomValueError
from loom.ir import expr as E
from loom.ir.buffer import Buffer as IRBuffer
from loom.ir.dtype import DataType
from loom.language.annot import static_key

from jit_helpers import jitted




def dims(buf):
    """A Buffer's shape as ints and names."""
    return [s.value if isinstance(s, E.IntImm) else s.name for s in buf.shape]


# ------------------------------------------------------------------------------------------ Annot


def test_annot_is_abstract_with_the_three_duties():
    with pytest.raises(TypeError):
        T.Annot()
    assert set(T.Annot.__abstractmethods__) == {"with_name", "get_key_parser", "create_prim_func_arg"}

    class Const(T.Annot):
        def with_name(self, name):
            return self

        def get_key_parser(self):
            return lambda v: ("const", v)

        def create_prim_func_arg(self, name, value, vt):
            return value

    c = Const()
    assert c.is_kernel_arg() is False and c.promote() is None  # the defaults
    assert c.get_key_parser()(3) == ("const", 3)
    for cls in (T.Value, T.BufferAnnot, T.TensorAnnot, T.StridedTensorAnnot, T.FragmentBufferAnnot,
                T.SharedBufferAnnot, T.LocalBufferAnnot, T.DynAnnot, T.DTypeAnnot, T.TIRAnnot):
        assert issubclass(cls, T.Annot), cls


# ------------------------------------------------------------------------------------------ ArgVarTable


def test_arg_var_table_shares_one_var_per_name():
    vt = T.ArgVarTable()
    assert vt.var_tab == {} and vt.tmp_name_idx == 0
    n = vt.get_or_create_var("N", "int32")
    assert isinstance(n, E.Var) and n.name == "N" and n.dtype == "int32"
    assert vt.get_or_create_var("N", T.int32) is n and vt.get_or_create_var("N", np.int32) is n
    m = vt.get_or_create_var("M", "int64")
    assert m is not n and vt.var_tab == {"N": n, "M": m}
    with pytest.raises(LoomTypeError, match=r"N is used as a int32 and as a int64"):
        vt.get_or_create_var("N", "int64")
    with pytest.raises(LoomTypeError, match="the dtype of K"):
        vt.get_or_create_var("K", "int33")


def test_arg_var_table_makes_fresh_temporary_names():
    vt = T.ArgVarTable()
    assert [vt.create_tmp_name() for _ in range(3)] == ["tmp_0", "tmp_1", "tmp_2"]
    assert vt.tmp_name_idx == 3
    assert T.ArgVarTable().create_tmp_name() == "tmp_0"  # per table


# ------------------------------------------------------------------------------------------ Value, static_key


def test_value_from_python_numbers_is_static():
    assert T.Value.kind == "dynamic"  # the class default
    v = T.Value.from_value(3)
    assert (v.kind, v.value, v.is_kernel_arg()) == ("static", 3, False)
    assert v.parse_key(3) == ("int", 3) and v.get_key_parser()(3.0) == ("float", 3.0)
    vt = T.ArgVarTable()
    assert v.create_prim_func_arg("k", None, vt) == 3 and v.create_prim_func_arg("k", 5, vt) == 5
    assert vt.var_tab == {}  # a static value is no Var
    f = T.Value.from_value(np.float32(1.5), prefer_name="k")
    assert f.name == "k" and type(f.value) is float and f.value == 1.5
    assert f.with_name("other").name == "k"  # a name it has wins
    assert T.Value.from_value(2).with_name("k").name == "k"
    assert T.Value.from_value((1, [2, 3])).value == (1, (2, 3))


def test_value_from_a_var_is_dynamic():
    x = E.Var("x", "int64")
    v = T.Value.from_value(x)
    assert (v.kind, v.name, v.dtype, v.is_kernel_arg()) == ("dynamic", "x", "int64", True)
    assert v.parse_key(7) is None  # a runtime value is not in the key
    vt = T.ArgVarTable()
    arg = v.create_prim_func_arg("x", None, vt)
    assert isinstance(arg, E.Var) and (arg.name, arg.dtype) == ("x", "int64") and vt.var_tab["x"] is arg
    assert v.create_prim_func_arg("x", None, vt) is arg  # shared by name
    assert v.create_prim_func_arg("x", None, vt, create_arg=False) is x  # the Var it was made from
    assert T.Value.from_value(x, prefer_name="n").name == "n"


def test_value_refuses_what_cannot_be_compiled_in():
    for bad in ({"a": 1}, object(), {1, 2}, (1, {})):
        with pytest.raises(LoomTypeError, match="static"):
            T.Value.from_value(bad, "cfg")
    with pytest.raises(LoomValueError, match="'static' or 'dynamic'"):
        T.Value("constant")


def test_static_key_tells_equal_python_values_apart():
    values = [1, 1.0, True, "1", (1,), None, T.float32, "float32"]
    keys = [static_key(v) for v in values]
    assert len(set(keys)) == len(values), keys  # 1 == 1.0 == True in Python, not in the key
    assert static_key(np.int64(1)) == static_key(1) and static_key(np.float32(0.5)) == static_key(0.5)
    assert static_key([1, 2]) == static_key((1, 2)) != static_key((1, 2.0))
    assert static_key(((1,), "a")) == ("tuple", (("tuple", (("int", 1),)), ("str", "a")))
    hash(static_key((1, (2.0, None))))


@pytest.mark.parametrize("bad", [{"a": 1}, object(), [1, {}], np.zeros(2)], ids=["dict", "object", "nested", "array"])
def test_static_key_refuses_unsupported_values_naming_where(bad):
    with pytest.raises(LoomTypeError, match=r"static parameter cfg: a static \(compile-time\) argument") as err:
        static_key(bad, "static parameter cfg")
    assert "T.Tensor" in str(err.value)  # says how to pass a runtime value instead


# ------------------------------------------------------------------------------------------ tensors


def test_buffer_annot_subscript_spellings():
    M = 4
    full = T.Tensor[(M, "N"), "float32"]
    assert (full.shape, full.dtype, full.strides, full.scope) == ((4, "N"), "float32", None, "global")
    assert isinstance(full.dtype, DataType) and full.is_kernel_arg()
    no_dtype = T.Tensor[(M, "N")]
    assert (no_dtype.shape, no_dtype.dtype) == ((4, "N"), None)
    flat = T.Tensor[M, "N", "float32"]
    assert (flat.shape, flat.dtype) == ((4, "N"), "float32")
    only_dtype = T.Tensor["float32"]
    assert (only_dtype.shape, only_dtype.dtype) == (None, "float32")
    assert T.Tensor[(M, "N"), T.float16].dtype == "float16" and T.Tensor[np.int8].dtype == "int8"
    assert T.Tensor[8].shape == (8,) and T.Tensor[[2, 3]].shape == (2, 3)
    assert (T.Tensor.shape, T.Tensor.dtype) == (None, None)  # bare: both from the argument
    assert repr(full) == "T.Tensor[(4, N), 'float32']"


def test_buffer_annot_call_spelling():
    t = T.Tensor((4, 8), "int8")
    assert isinstance(t, T.TensorAnnot) and (t.shape, t.dtype) == ((4, 8), "int8")
    assert T.Tensor((4, 8)).dtype == "float32"  # TVMScript's default
    assert T.Tensor(16, T.float64).shape == (16,)
    with pytest.raises(LoomTypeError, match="T.Tensor: a shape is a tuple of sizes"):
        T.Tensor(2.5, "float32")


def test_match_shape_binds_names_and_checks_sizes():
    vt = T.ArgVarTable()
    assert T.BufferAnnot.match_shape((4, "N"), (4, 7), vt) == {"N": 7} and vt.bound == {"N": 7}
    assert T.BufferAnnot.match_shape(("N", 2), (7, 2), vt) == {"N": 7}  # agrees with the earlier argument
    with pytest.raises(LoomValueError, match=r"dimension 1 is N, which is 7 elsewhere in this call, but here it "
                                             r"is 8"):
        T.BufferAnnot.match_shape((4, "N"), (4, 8), vt)
    with pytest.raises(LoomValueError, match=r"dimension 0 must be 4, got 5 \(shape \(5, 7\)\)"):
        T.BufferAnnot.match_shape((4, "N"), (5, 7), T.ArgVarTable())
    with pytest.raises(LoomValueError, match=r"expected 2 dimension\(s\) \(4, N\), got 3"):
        T.BufferAnnot.match_shape((4, "N"), (4, 7, 1), T.ArgVarTable())
    vt = T.ArgVarTable()
    vt.static["BLOCK"] = 16  # a static parameter's value fixes the size of that name
    assert T.BufferAnnot.match_shape(("BLOCK",), (16,), vt) == {"BLOCK": 16}
    with pytest.raises(LoomValueError, match="dimension 0 is BLOCK, which is 16"):
        T.BufferAnnot.match_shape(("BLOCK",), (8,), vt)


def test_buffer_annot_key_holds_only_what_is_left_open():
    a = np.zeros((4, 3), "int8")
    assert T.Tensor[(4, "N"), "float32"].with_name("A").parse_key(a) is None
    assert T.Tensor[(4, "N")].with_name("A").parse_key(a) == "int8"
    assert T.Tensor["int8"].with_name("A").parse_key(a) == (4, 3)
    assert T.Tensor.with_name("A").get_key_parser()(a) == ("int8", (4, 3))
    with pytest.raises(LoomTypeError, match="tensor parameter A is a tensor; got list"):
        T.Tensor.with_name("A").parse_key([1, 2])


def test_buffer_annot_prim_func_arg_shares_vars_and_takes_static_values():
    vt = T.ArgVarTable()
    vt.static["M"] = 16
    a = T.Tensor[("M", "N"), "float32"].create_prim_func_arg("A", None, vt)
    b = T.Tensor[("N",), "float16"].create_prim_func_arg("B", None, vt)
    assert isinstance(a, IRBuffer) and a.name == "A" and a.dtype == "float32" and b.dtype == "float16"
    assert dims(a) == [16, "N"] and b.shape[0] is a.shape[1] is vt.var_tab["N"]
    c = T.Tensor.create_prim_func_arg("C", np.zeros((2, 5), "int8"), vt)  # bare: from the argument
    assert dims(c) == [2, 5] and c.dtype == "int8"
    with pytest.raises(LoomValueError, match="tensor parameter D has no annotated shape"):
        T.Tensor.create_prim_func_arg("D", None, vt)
    with pytest.raises(LoomTypeError, match="tensor parameter E, dimension 1: a size is an int"):
        T.Tensor[(4, 2.5), "float32"].create_prim_func_arg("E", None, vt)
    vt.static["BAD"] = "x"
    with pytest.raises(LoomTypeError, match="names the static parameter BAD, whose value 'x' is not an int"):
        T.Tensor[("BAD",), "float32"].create_prim_func_arg("F", None, vt)
    with pytest.raises(LoomValueError, match="dtype 'flaot32' is neither a dtype nor a T.dtype parameter"):
        T.Tensor[(4,), "flaot32"].create_prim_func_arg("G", None, vt)


def test_tensor_annot_promotes_when_fully_static():
    p = T.Tensor[(4, 8), "float32"].with_name("A").promote()
    assert isinstance(p, T.TIRAnnot) and p.data.name == "A" and dims(p.data) == [4, 8] and p.dtype == "float32"
    assert T.Tensor[(4, "N"), "float32"].with_name("A").promote() is None  # a runtime size
    assert T.Tensor[(4, 8)].with_name("A").promote() is None  # the dtype comes from the argument
    assert T.StridedTensor[(4, 8), (8, 1), "float32"].with_name("A").promote() is None


def test_strided_tensor_annot_spellings_and_strides():
    s = T.StridedTensor[(4, "N"), ("s0", 1), "float32"]
    assert (s.shape, s.strides, s.dtype) == ((4, "N"), ("s0", 1), "float32")
    assert T.StridedTensor[(4, 8), (8, 1)].dtype is None
    assert T.StridedTensor((4, 8), (1, 4), "int8").strides == (1, 4)
    with pytest.raises(LoomTypeError, match=r"T.StridedTensor takes \[\(shape...\), \(strides...\), dtype\]"):
        T.StridedTensor[(4, 8), "float32"]
    with pytest.raises(LoomValueError, match="1 strides for 2 dimensions"):
        T.StridedTensor[(4, 8), (1,), "float32"]
    vt = T.ArgVarTable()
    buf = s.create_prim_func_arg("A", None, vt)
    assert isinstance(buf.strides[0], E.Var) and buf.strides[0] is vt.var_tab["s0"]
    assert isinstance(buf.strides[1], E.IntImm) and buf.strides[1].value == 1
    bare = T.StridedTensor.with_name("B").create_prim_func_arg("B", np.zeros((2, 3), "float32"), vt)
    assert [v.name for v in bare.strides] == ["B_stride_0", "B_stride_1"]  # any strides: one Var each


def strided_add_one(A: T.StridedTensor[("M", "N"), ("sa", "sb"), "float32"], B: T.Tensor[("M", "N"), "float32"]):
    for i, j in T.grid(A.shape[0], A.shape[1]):
        B[i, j] = A[i, j] + 1.0


def test_strided_tensor_kernel_reads_numpy_views(target):
    kernel = jitted(strided_add_one, target)
    base = np.arange(48, dtype="float32").reshape(6, 8)
    for view in (base[::2, 1::3], base.T, base[1:4, 2:7], base):
        out = np.zeros(view.shape, "float32")
        kernel(view, out)
        np.testing.assert_array_equal(out, view + 1)
    assert kernel.cache_info().compiles == 1  # strides are runtime values: one build for every view


@pytest.mark.parametrize("annot, scope", [(T.FragmentBuffer, "local.fragment"), (T.SharedBuffer, "shared"),
                                          (T.LocalBuffer, "local")])
def test_on_chip_buffers_are_never_kernel_arguments(annot, scope):
    assert annot.scope == scope and annot[(4,), "float32"].scope == scope
    assert not annot.is_kernel_arg() and not annot[(4,), "float32"].is_kernel_arg()
    assert isinstance(annot, T.BufferAnnot)

    def helper(A: annot[(4,), "float32"]):
        A[0] = 1.0

    with pytest.raises(LoomTypeError, match=r"loom.jit kernel helper: parameter A is annotated .*Buffer: on-chip "
                                            r"buffers are never kernel arguments") as err:
        loom.jit(helper)
    assert "T.alloc_shared" in str(err.value)


# ------------------------------------------------------------------------------------------ T.dyn


def test_dyn_spellings():
    d = T.dyn[T.int32]
    assert isinstance(d, T.DynAnnot) and isinstance(d, T.Value) and (d.kind, d.name, d.dtype) == ("dynamic", None,
                                                                                                     "int32")
    assert (T.dyn["N"].name, T.dyn["N"].dtype) == ("N", "int32")
    assert (T.dyn[T.int64, "N"].name, T.dyn[T.int64, "N"].dtype) == ("N", "int64")
    assert (T.dyn["int64", "N"].dtype, T.dyn["float32"].dtype, T.dyn["float32"].name) == ("int64", "float32", None)
    called = T.dyn(T.int64, "M")
    assert isinstance(called, T.DynAnnot) and (called.name, called.dtype) == ("M", "int64")
    assert T.dyn().dtype == "int32" and T.dyn[T.int64].with_name("n").name == "n"
    assert repr(T.dyn[T.int64, "N"]) == "T.dyn[int64, 'N']" and repr(T.dyn[T.int32]) == "T.dyn[int32]"
    with pytest.raises(LoomTypeError, match=r"T.dyn takes \[dtype\], \['name'\] or \[dtype, 'name'\]"):
        T.dyn[T.int32, "N", 3]
    with pytest.raises(LoomTypeError, match="takes a name string second, got 5"):
        T.dyn[T.int32, 5]


def test_dyn_is_a_runtime_var_shared_with_shapes():
    n = T.dyn[T.int64, "N"].with_name("n")
    assert n.is_kernel_arg() and n.parse_key(5) is None
    vt = T.ArgVarTable()
    var = n.create_prim_func_arg("n", None, vt)
    buf = T.Tensor[(T.dyn[T.int64, "N"], 4), "float32"].create_prim_func_arg("A", None, vt)
    assert buf.shape[0] is var and var.dtype == "int64"
    # A bare name takes the dtype its T.dyn declared; another dtype for that name is refused.
    assert T.Tensor[("N",), "float32"].create_prim_func_arg("B", None, vt).shape[0] is var
    with pytest.raises(LoomTypeError, match=r"N is used as a int64 and as a int32"):
        T.Tensor[(T.dyn[T.int32, "N"],), "float32"].create_prim_func_arg("C", None, vt)
    with pytest.raises(LoomValueError, match=r"a T.dyn in a shape needs a name"):
        T.Tensor[(T.dyn[T.int32],), "float32"].create_prim_func_arg("D", None, T.ArgVarTable())


def offset_copy(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"], n: T.dyn["N"],
                start: T.dyn[T.int64]):
    for i in T.serial(start, n):
        B[i] = A[i] - 1.0


def test_dyn_kernel_arguments(target):
    kernel = jitted(offset_copy, target)
    for size, start in ((6, 2), (9, 0)):
        a, b = np.arange(size, dtype="float32"), np.full(size, 7, "float32")
        kernel(a, b, size, start)
        np.testing.assert_array_equal(b, np.where(np.arange(size) >= start, a - 1, 7))
    assert kernel.cache_info().compiles == 1  # sizes and the start are runtime values
    with pytest.raises(LoomError, match=r"parameter n is N=5, but the arrays give N=6|N is 5 here, but 6"):
        kernel(np.zeros(6, "float32"), np.zeros(6, "float32"), 5, 0)


# ------------------------------------------------------------------------------------------ T.dtype


class _FakeTorchDtype:
    """Simulates ``torch.float64``: torch dtypes print as ``torch.<name>`` and live in a torch module."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


_FakeTorchDtype.__module__ = "torch"
_FakeTorchDtype.__name__ = _FakeTorchDtype.__qualname__ = "dtype"


@pytest.mark.parametrize("spelling, want", [
    ("float32", "float32"), (np.dtype("int8"), "int8"), (np.float64, "float64"), (DataType("int16"), "int16"),
    (T.uint8, "uint8"), (float, "float32"), (int, "int32"), (bool, "bool"),
    (_FakeTorchDtype("float16"), "float16"), (_FakeTorchDtype("bfloat16"), "bfloat16"),
], ids=lambda v: repr(v) if isinstance(v, str) else None)
def test_dtype_annot_accepts_every_dtype_spelling(spelling, want):
    got = T.dtype(spelling)
    assert isinstance(got, DataType) and got == want
    annot = T.dtype.with_name("dt")
    assert isinstance(annot, T.DTypeAnnot) and annot.name == "dt" and not annot.is_kernel_arg()
    assert annot.get_key_parser()(spelling) == want  # every spelling of a dtype: one key
    assert annot.create_prim_func_arg("dt", spelling, T.ArgVarTable()) == want


@pytest.mark.parametrize("bad", ["flaot32", object(), _FakeTorchDtype("complex128")], ids=["typo", "object", "torch"])
def test_dtype_annot_refuses_non_dtypes_naming_the_parameter(bad):
    with pytest.raises(LoomTypeError, match="dtype parameter dt: .* is not a dtype"):
        T.dtype.with_name("dt").get_key_parser()(bad)


def fill(A: T.Tensor[("N",), "dt"], dt: T.dtype, value: float):
    for i in T.serial(A.shape[0]):
        A[i] = T.cast(value, dt)


def test_dtype_parameter_kernel(target):
    kernel = jitted(fill, target)
    for spelling in ("float32", np.float32, T.float32, np.dtype("float32")):
        a = np.zeros(3, "float32")
        kernel(a, spelling, 2.5)
        np.testing.assert_array_equal(a, np.full(3, 2.5, "float32"))
    assert (kernel.cache_info().misses, kernel.cache_info().hits) == (1, 3)  # one key for the four spellings
    for spelling, arr_dtype in ((_FakeTorchDtype("float64"), "float64"), ("int8", "int8")):
        a = np.zeros(3, arr_dtype)
        kernel(a, spelling, 2.5)
        np.testing.assert_array_equal(a, np.full(3, 2.5).astype(arr_dtype))
    assert kernel.cache_info().compiles == 3
    with pytest.raises(LoomError, match="float32"):
        kernel(np.zeros(3, "float32"), "int8", 1.0)  # the array does not have the dtype it names


# ------------------------------------------------------------------------------------------ TIRAnnot, T.Buffer


def test_buffer_makes_a_tir_annot():
    b = T.Buffer((128,), T.float32)
    assert isinstance(b, T.TIRAnnot) and isinstance(b.data, IRBuffer) and b.is_kernel_arg()
    assert dims(b.data) == [128] and b.dtype == "float32" and b.strides == () and b.scope() == "global"
    assert [s.value for s in b.shape] == [128] and b.get_key_parser()(np.zeros(128, "float32")) is None
    assert b.create_prim_func_arg("A", None, T.ArgVarTable()) is b.data
    named = b.with_name("A")
    assert named.name == "A" and named.data.name == "A"  # an unnamed T.Buffer takes its parameter's name
    assert named.data is not b.with_name("B").data  # one buffer per parameter
    assert T.Buffer((4,), "int8", name="X").with_name("A").data.name == "X"  # a name given is kept
    assert T.Buffer((2, 3), strides=(1, 2)).strides[1].value == 2
    assert isinstance(T.Buffer[(4, "N"), "float32"], T.TensorAnnot)  # the subscript spelling is T.Tensor's
    with pytest.raises(LoomTypeError, match="T.Buffer: 'float33' is not a dtype"):
        T.Buffer((4,), "float33")


def test_tir_annot_holds_a_loom_buffer_or_var():
    x = E.Var("x", "int64")
    t = T.TIRAnnot(x).with_name("x")
    assert t.is_kernel_arg() and t.create_prim_func_arg("x", None, T.ArgVarTable()) is x
    assert t.get_key_parser()(3) is None and t.dtype == "int64" and t.shape == ()
    buf = loom.decl_buffer((3,), "int8", name="Q")
    assert T.TIRAnnot(buf).with_name("A").data is buf  # a user's Buffer is exactly that buffer
    with pytest.raises(LoomTypeError, match="TIRAnnot holds a loom Buffer or Var, got int"):
        T.TIRAnnot(3)


_n = E.Var("n", "int32")
_ab = T.Buffer((4,), T.float32)


def fixed_add(A: _ab, B: _ab, C: T.Buffer((4,), "float32"), n: _n):
    for i in T.serial(n):
        C[i] = A[i] + B[i]


def test_tir_annot_kernel(target):
    kernel = jitted(fixed_add, target)
    a, b, c = np.arange(4, dtype="float32"), np.full(4, 10, "float32"), np.zeros(4, "float32")
    kernel(a, b, c, 3)
    np.testing.assert_array_equal(c, [10, 11, 12, 0])
    func = kernel.get_prim_func(a, b, c, 3)
    assert func.params[-1] is _n  # the Var annotation is the argument itself
    with pytest.raises(LoomValueError, match=r"argument 0 \(A: .*shape\[0\] must be 4, got shape \(5,\)"):
        kernel(np.zeros(5, "float32"), b, c, 3)
