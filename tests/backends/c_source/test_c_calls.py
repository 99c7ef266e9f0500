"""C host code calling other functions and the runtime's device allocator (shared cases: native_calls.py)."""

from __future__ import annotations

import pytest

from native_calls import (test_call_of_a_function_of_the_same_module, test_call_packs_one_word_per_argument,  # noqa: F401
                          test_calls_in_a_parallel_loop, test_device_allocation_comes_from_the_runtime_and_goes_back,
                          test_device_allocator_failures, test_device_memory_is_freed_on_every_error_return,
                          test_failing_callee_stops_the_caller_with_its_message,
                          test_slots_only_for_called_functions_declared_once,
                          test_unlinked_function_is_an_error_not_a_crash)


@pytest.fixture
def kind() -> str:
    return "c"
