"""Testing utilities; chiefly the reference interpreter, the oracle of every pass and backend.

>>> import numpy as np, loom
>>> from loom.ir import For, BufferStore, PrimFunc
>>> n = loom.var("n")
>>> A = loom.decl_buffer((n,), "float32", name="A")
>>> B = loom.decl_buffer((n,), "float32", name="B")
>>> i = loom.var("i")
>>> body = For(i, 0, n, "serial", BufferStore(B, A[i] + 1.0, [i]))
>>> f = PrimFunc([A.data, B.data], body, buffer_map={A.data: A, B.data: B})
>>> a, b = np.arange(3, dtype="float32"), np.zeros(3, dtype="float32")
>>> loom.testing.evaluate(f, a, b); b
array([1., 2., 3.], dtype=float32)
"""

from ._calls import register_extern, registered_externs, unregister_extern
from ._errors import AssertionFailed, BarrierError, DivisionByZero, InterpreterError, OutOfBoundsError, RaceError
from ._memory import Memory
from .interpreter import DEFAULT_MAX_WHILE_ITERATIONS, Interpreter, evaluate
from .numeric import assert_allclose

__all__ = [
    "evaluate", "Interpreter", "register_extern", "unregister_extern", "registered_externs",
    "InterpreterError", "OutOfBoundsError", "AssertionFailed", "DivisionByZero", "RaceError", "BarrierError", "Memory",
    "DEFAULT_MAX_WHILE_ITERATIONS", "assert_allclose",
]
