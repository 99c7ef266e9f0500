"""loom.language.FuncAnnot (seed 001): a kernel's signature read through its annotations.

The methods seed 001 names, called directly on signatures, and the same rules
seen through ``@loom.jit`` kernels on every CPU target (keys with defaults,
inferred parameters, bad calls).
"""
# ruff: noqa: F821 - the strings in T.Tensor[...] / T.dyn[...] annotations are sizes and dtypes, not names

import inspect

import numpy as np
import pytest

import loom
import loom.language as T
from loom.errors import LoomError, LoomTypeError
from loom.ir import expr as E
from loom.ir.buffer import Buffer as IRBuffer
from loom.testing.conformance.harness import buildable_cpu_kinds


@pytest.fixture(params=buildable_cpu_kinds())
def target(request):
    return request.param


def func_annot(fn):
    return T.FuncAnnot.from_sig_annots(inspect.signature(fn), inspect.get_annotations(fn, eval_str=True))


def sig(A: T.Tensor[("N",), "float32"], B: T.Tensor[(4, 8), "float32"], n: T.dyn["N"], dt: T.dtype,
        block: int = 32, scale: float = 2.0, flag=True, X=None):
    """A signature with every kind of parameter (the body is never run)."""


A, B = np.zeros(5, "float32"), np.zeros((4, 8), "float32")


def test_from_sig_annots_reads_each_parameter():
    fa = func_annot(sig)
    assert fa.sig == inspect.signature(sig)
    assert fa.arg_names == ["A", "B", "n", "dt", "block", "scale", "flag", "X"]
    assert list(fa.arg_parser) == fa.arg_names and all(callable(p) for p in fa.arg_parser.values())
    kinds = {n: type(a).__name__ if a is not None else None for n, a in fa.annots.items()}
    assert kinds == {"A": "TensorAnnot", "B": "TIRAnnot", "n": "DynAnnot", "dt": "DTypeAnnot", "block": "Value",
                     "scale": "Value", "flag": None, "X": None}  # B is fully static: promoted; flag, X inferred
    assert fa.annots["A"].name == "A" and fa.annots["n"].name == "N" and fa.annots["B"].data.name == "B"
    assert fa.ker_arg_names == ["A", "B", "n"]
    assert "block: Value(static, block: int)" in repr(fa)


def test_static_and_runtime_parameters():
    fa = func_annot(sig)
    assert not fa.is_all_static()
    assert sorted(fa.get_all_static_args()) == ["block", "dt", "scale"]
    assert all(not a.is_kernel_arg() for a in fa.get_all_static_args().values())
    assert fa.get_compile_time_unknown_args() == ["A", "B", "n"]

    def only_static(block: int = 3, dt: T.dtype = "float32", name: str = "k"):
        pass

    fs = func_annot(only_static)
    assert fs.is_all_static() and fs.get_compile_time_unknown_args() == []
    assert fs.parse_key() == (("int", 3), "float32", ("str", "k"))

    def inferred(x):
        pass

    assert not func_annot(inferred).is_all_static()  # only the call says what x is


def test_parse_key_includes_defaults_and_inferred_kinds():
    fa = func_annot(sig)
    key = fa.parse_key(A, B, 5, "float16")
    assert key == (None, None, None, "float16", ("int", 32), ("float", 2.0), ("static", ("bool", True)),
                   ("static", ("NoneType", None)))
    assert fa.parse_key(A, B, 5, np.float16, 32, 2.0, True, None) == key  # defaults are in the key
    assert fa.parse_key(A, B, 7, T.float16) == key  # runtime values are not
    assert fa.parse_key(A, B, 5, "float16", block=64)[4] == ("int", 64)
    assert fa.parse_key(A, B, 5, "float16", scale=3)[5] == ("float", 3.0)  # an int for a float: the same key
    assert fa.parse_key(A, B, 5, "float16", flag=1)[6] == ("static", ("int", 1))  # 1 is not True
    assert fa.parse_key(A, B, 5, "float16", X=np.zeros((2, 3), "int8"))[7] == ("tensor", "int8", (2, 3))

    class FakeTorchDtype:
        def __str__(self):
            return "torch.float64"

    FakeTorchDtype.__module__, FakeTorchDtype.__name__ = "torch", "dtype"
    assert fa.parse_key(A, B, 5, "float16", X=FakeTorchDtype())[7] == ("dtype", "float64")


@pytest.mark.parametrize("kws, message", [
    ({"block": 1.5}, "static parameter block is annotated int, got float 1.5"),
    ({"block": True}, "static parameter block is annotated int, got bool True"),
    ({"scale": "x"}, "static parameter scale is annotated float, got str 'x'"),
    ({"X": {}}, "static parameter X: a static (compile-time) argument is a number"),
    ({"dt": "flaot16"}, "dtype parameter dt: 'flaot16' is not a dtype"),
    ({"nope": 1}, "kernel(): got an unexpected keyword argument 'nope'"),
])
def test_parse_key_names_the_bad_argument(kws, message):
    fa = func_annot(sig)
    call = {"dt": "float16", **kws}
    with pytest.raises(LoomTypeError) as err:
        fa.parse_key(A, B, 5, **call)
    assert message in str(err.value)


def test_parse_key_refuses_missing_or_extra_arguments():
    fa = func_annot(sig)
    with pytest.raises(LoomTypeError, match="missing a required argument: 'dt'"):
        fa.parse_key(A, B, 5)
    with pytest.raises(LoomTypeError, match="too many positional arguments"):
        fa.parse_key(A, B, 5, "float16", 1, 2.0, True, None, "extra")


def test_convert_to_kernel_args_keeps_runtime_values_in_order():
    fa = func_annot(sig)
    args = fa.convert_to_kernel_args(A, B, 5, "float16", block=8)
    assert len(args) == 3 and args[0] is A and args[1] is B and args[2] == 5
    x = np.zeros(3, "int8")
    args = fa.convert_to_kernel_args(A, B, 5, "float16", X=x)
    assert args[-1] is x and len(args) == 4  # an unannotated array is a tensor argument too


def test_create_argument_makes_prim_func_arguments():
    fa = func_annot(sig)
    vt = T.ArgVarTable()
    a = fa.create_argument("A", A, vt)
    n = fa.create_argument("n", 5, vt)
    assert isinstance(a, IRBuffer) and a.shape[0] is n is vt.var_tab["N"]  # one Var for N
    assert fa.create_argument("B", B, vt) is fa.annots["B"].data
    assert fa.create_argument("block", 16, vt) == 16 and fa.create_argument("dt", np.int8, vt) == "int8"
    x = fa.create_argument("X", np.zeros((2, 3), "int8"), vt)
    assert isinstance(x, IRBuffer) and x.name == "X" and x.dtype == "int8"
    assert fa.create_argument("flag", False, vt) is False


def test_from_sig_annots_refuses_what_it_cannot_read():
    def star(A, *rest):
        pass

    with pytest.raises(LoomTypeError, match="parameter rest: a kernel takes plain parameters"):
        func_annot(star)

    def keyword_only(A, *, k=1):
        pass

    with pytest.raises(LoomTypeError, match="parameter k: a kernel takes plain parameters"):
        func_annot(keyword_only)

    def text(A: "T.Tensor"):
        pass

    with pytest.raises(LoomTypeError, match="parameter A: the annotation 'T.Tensor' is a string"):
        T.FuncAnnot.from_sig_annots(inspect.signature(text), text.__annotations__)

    def shared(A: T.SharedBuffer[(4,), "float32"]):
        pass

    with pytest.raises(LoomTypeError, match="parameter A is annotated SharedBuffer: on-chip buffers"):
        func_annot(shared)


def test_other_annotations_are_read_from_the_argument():
    def hinted(A: np.ndarray, B: T.Buffer, x: E.Var("x", "int64")):
        pass

    fa = func_annot(hinted)
    assert fa.annots["A"] is None and isinstance(fa.annots["B"], T.TensorAnnot)
    assert isinstance(fa.annots["x"], T.TIRAnnot) and fa.ker_arg_names == ["B", "x"]
    assert fa.parse_key(np.zeros(2, "int8"), np.zeros(3, "float32"), 1) == (("tensor", "int8", (2,)),
                                                                            ("float32", (3,)), None)


# ------------------------------------------------------------------------------------------ through @loom.jit


def blend(A: T.Tensor[("N",), "float32"], B: T.Tensor[("N",), "float32"], w: float = 0.5, bias=0, C=None):
    for i in T.serial(A.shape[0]):
        B[i] = A[i] * w + B[i] * (1.0 - w) + bias


_KERNELS: dict = {}


def blend_kernel(target):
    if target not in _KERNELS:
        _KERNELS[target] = loom.jit(blend, target=target, disk_cache=False)
    return _KERNELS[target]


def test_jit_key_holds_defaults(target):
    kernel = blend_kernel(target)
    kernel.cache_clear()
    a = np.arange(4, dtype="float32")
    for call in ({}, {"w": 0.5}, {"bias": 0}, {"w": 0.5, "bias": 0, "C": None}):
        b = np.ones(4, "float32")
        kernel(a, b, **call)
        np.testing.assert_allclose(b, a * 0.5 + 0.5)
    assert (kernel.cache_info().misses, kernel.cache_info().compiles) == (1, 1)  # spelled out or not: one key
    b = np.ones(4, "float32")
    kernel(a, b, 0.25, 1)
    np.testing.assert_allclose(b, a * 0.25 + 0.75 + 1)
    b = np.ones(4, "float32")
    kernel(a, b, 0.25, 1.0)  # 1.0 is not 1: another key, the same numbers
    np.testing.assert_allclose(b, a * 0.25 + 0.75 + 1)
    assert kernel.cache_info().compiles == 3


def test_jit_bad_calls_name_the_problem(target):
    kernel = blend_kernel(target)
    a, b = np.zeros(4, "float32"), np.zeros(4, "float32")
    cases = [
        ((a,), {}, "blend(): missing a required argument: 'B'"),
        ((a, b), {"nope": 1}, "blend(): got an unexpected keyword argument 'nope'"),
        ((a, b, 0.5, 0, None, 9), {}, "blend(): too many positional arguments"),
        ((a, b, "x"), {}, "loom.jit kernel blend: static parameter w is annotated float, got str 'x'"),
        ((a, b), {"bias": {}}, "loom.jit kernel blend: static parameter bias: a static (compile-time) argument"),
    ]
    for args, kws, message in cases:
        with pytest.raises(LoomError) as err:
            kernel(*args, **kws)
        assert message in str(err.value), (message, str(err.value))
    with pytest.raises(LoomError, match=r"\bA\b.*got list"):
        kernel([0.0] * 4, b)  # a list is no tensor
    with pytest.raises(LoomError, match=r"B.*(shape\[0\]|N)"):
        kernel(a, np.zeros(5, "float32"))  # N is 4 in A and 5 in B
