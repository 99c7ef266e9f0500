"""The llvm backend's division checks and function symbols, in the generated IR.

A divisor that is not a non-zero constant is tested before the division (any
lane of a vector), and a zero fails the function with a message the runtime
raises as :class:`loom.testing.DivisionByZero`; a non-zero constant divisor keeps
its plain code.  A function named like something the code calls gets another
symbol (the conformance suite runs them on every kind).
"""

from __future__ import annotations

import pytest

pytest.importorskip("llvmlite")

import loom  # noqa: E402
from loom.ir import Evaluate, IRModule, PrimFunc, no_op  # noqa: E402
from loom_llvm.codegen import codegen_module, symbol_of  # noqa: E402
from programs import division  # noqa: E402


@pytest.mark.parametrize("form", ["scalar", "vector", "parallel"])
@pytest.mark.parametrize("op", ["truncdiv", "truncmod", "floordiv", "floormod"])
def test_constant_divisors_are_not_checked(op: str, form: str) -> None:
    for dtype, divisor in (("int32", 7), ("int64", -3), ("uint8", 5), ("int8", -1)):
        text = str(codegen_module(division(op, dtype, divisor, form)))
        assert "div.zero" not in text and "division by zero" not in text, f"{op} {dtype} by {divisor} ({form})"


@pytest.mark.parametrize("dtype", ["int32", "uint64"])
def test_loaded_divisors_are_checked(dtype: str) -> None:
    scalar = str(codegen_module(division("floormod", dtype, "array")))
    assert scalar.count("div.zero:") == 1 and 'c"integer division by zero in A[i] % B[i]\\00"' in scalar
    vector = str(codegen_module(division("truncdiv", dtype, "array", "vector")))
    assert "call i1 @\"llvm.vector.reduce.or.v4i1\"(<4 x i1>" in vector and vector.count("div.zero:") == 1


def test_a_zero_divisor_in_a_parallel_region_reports_through_the_closure() -> None:
    text = str(codegen_module(division("floordiv", "int16", "array", "parallel")))
    body = text[text.index('define internal i32 @"f.parallel.body"'):]
    body = body[:body.index("\n}\n")]
    assert "div.zero:" in body and "store atomic" in body


@pytest.mark.parametrize("name, symbol", [
    ("f", "f"), ("expf", "loom_fn_expf"), ("GOMP_parallel", "loom_fn_GOMP__parallel"),
    ("caf\u00e9", "loom_fn_caf_e9"), ("loom_x", "loom_fn_loom__x")])
def test_functions_that_could_collide_get_a_symbol_of_their_own(name: str, symbol: str) -> None:
    func = PrimFunc([], no_op())
    assert symbol_of(name, func) == symbol
    text = str(codegen_module(IRModule({name: func})))
    assert f'define i32 @"{symbol}"(i64* %"args", i8** %"error")' in text
    assert symbol_of("other", func.with_attr("global_symbol", name)) == symbol  # global_symbol names it


def test_an_external_call_of_a_function_symbol_is_refused() -> None:
    f = PrimFunc([], Evaluate(loom.call_extern("int32", "foo")))
    with pytest.raises(loom.LoomError, match="symbol 'foo' of a function of the module is also that of an external"):
        codegen_module(IRModule({"foo": f}))
