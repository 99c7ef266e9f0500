"""LLVM host code calling other functions and the runtime's device allocator.

The cases are shared with the c backend (tests/backends/c_source/native_calls.py).
"""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("llvmlite")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "c_source"))

import loom  # noqa: E402
from loom.runtime import abi  # noqa: E402
from loom_llvm.codegen import codegen_module  # noqa: E402
from loom_llvm.jit import parse  # noqa: E402
from native_calls import (host_module, test_call_of_a_function_of_the_same_module,  # noqa: E402,F401
                          test_call_packs_one_word_per_argument, test_calls_in_a_parallel_loop,
                          test_device_allocation_comes_from_the_runtime_and_goes_back, test_device_allocator_failures,
                          test_device_memory_is_freed_on_every_error_return,
                          test_failing_callee_stops_the_caller_with_its_message,
                          test_slots_only_for_called_functions_declared_once,
                          test_unlinked_function_is_an_error_not_a_crash)


@pytest.fixture
def kind() -> str:
    return "llvm"


def test_slots_are_external_writable_globals() -> None:
    """The runtime finds the slots by name: external (not internal, not constant) null-initialised globals."""
    text = str(codegen_module(host_module(), None))
    parse(text)  # verifies
    for symbol in (abi.import_symbol("k"), abi.DEVICE_ALLOC_SYMBOL, abi.DEVICE_FREE_SYMBOL):
        line = next(x for x in text.splitlines() if x.startswith(f'@"{symbol}" ='))
        assert " global " in line and "null" in line
        assert not any(word in line for word in ("internal", "private", "constant"))


def test_vector_arguments_are_refused() -> None:
    from loom.ir import IRModule, PrimFunc
    from loom.ir import expr as E
    from loom.ir import stmt as S
    from loom.ir.function import GlobalVar

    v = E.Broadcast(loom.const(1.0, "float32"), 4)
    f = PrimFunc([], S.Evaluate(E.Call("int32", GlobalVar("k"), [v])))
    with pytest.raises(loom.LoomError, match="vector"):
        codegen_module(IRModule({"f": f}), None)
