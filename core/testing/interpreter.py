"""The reference interpreter: run a PrimFunc on numpy arrays.

It is the oracle of the project: every pass must leave its answer unchanged
and every backend must agree with it.  So it is strict: arguments are checked
by the runtime's shared :class:`~loom.runtime.arguments.ArgumentChecker`,
exactly as a compiled function's are (read-only arrays are read, never
written; arguments are never copied), every load and store is bounds-checked,
integer arithmetic wraps at its width, integer division by zero and
``AssertStmt`` failures raise, and a runaway ``while`` loop is stopped.

A function is compiled once into nested closures (see ``_codegen``), so
running it again (:class:`Interpreter`) costs only the execution.

Thread-bound code runs with GPU semantics: every thread of a block runs the
kernel body, ``tvm_storage_sync`` barriers hold each thread until its whole
block (or grid, for ``"global"``) arrives, ``shared`` allocations are one per
block, ``local`` ones one per thread, and two threads of a block touching one
shared element between barriers, one of them writing, raise :class:`RaceError`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..errors import LoomTypeError, LoomValueError
from ..ir.function import IRModule, PrimFunc
from ..runtime.arguments import BoundCall
from ..target.devices import Device
from ._compiler import Context, ImportResolver, Program

__all__ = ["Interpreter", "evaluate", "DEFAULT_MAX_WHILE_ITERATIONS"]

#: How many iterations one ``while`` loop may run before the interpreter gives up.
DEFAULT_MAX_WHILE_ITERATIONS = 10_000_000


def _resolve(func: Any, entry: str | None) -> tuple[PrimFunc, IRModule | None, str]:
    if isinstance(func, IRModule):
        names = sorted(func.functions)
        if entry is None:
            if "main" in func.functions:
                entry = "main"
            elif len(names) == 1:
                entry = names[0]
            else:
                raise LoomValueError(f"the IRModule has functions {names} and none is 'main'; pass entry=<name>")
        found = func[entry]
        if not isinstance(found, PrimFunc):
            raise LoomTypeError(f"function {entry!r} of the IRModule is a {type(found).__name__}, not a PrimFunc")
        return found, func, entry
    if isinstance(func, PrimFunc):
        name = entry or str(func.attrs.get("global_symbol", "main"))
        return func, None, name
    raise LoomTypeError(f"the interpreter runs a PrimFunc or an IRModule, got {type(func).__name__}")


class Interpreter:
    """A function compiled for repeated evaluation.

    :param func: a PrimFunc, or an IRModule (its ``entry`` function, by default
        ``main`` or its only function; other functions are callable from it).
    :param entry: the name of the function to run in a module.
    :param externs: ``name -> callable`` for ``tir.call_extern`` calls; looked
        up before :func:`register_extern`'s registry.
    :param max_while_iterations: iterations one ``while`` loop may run before an
        :class:`InterpreterError`.
    :param check_dims: also check every index against its buffer's declared
        shape (the flat offset is always checked against the memory).
    :param imports: ``name -> fn(words) | None``: finds functions that other
        modules define (kernels the host calls); a call of one passes one
        64-bit word per argument (:func:`loom.runtime.abi.word_of`; a pointer
        is its address) and evaluates to 0.

    Calling it with arguments (numpy or ``loom.nd`` arrays for buffer parameters,
    scalars for scalar parameters) runs the function, writing into the arrays in place.  It
    returns None: a PrimFunc's results are what it stores.

    >>> import numpy as np, loom
    >>> from loom.ir import For, BufferStore, PrimFunc
    >>> A = loom.decl_buffer((4,), "int32", name="A")
    >>> i = loom.var("i")
    >>> f = PrimFunc([A.data], For(i, 0, 4, "serial", BufferStore(A, A[i] * 2, [i])), buffer_map={A.data: A})
    >>> a = np.arange(4, dtype="int32")
    >>> Interpreter(f)(a); a
    array([0, 2, 4, 6], dtype=int32)
    """

    def __init__(self, func: PrimFunc | IRModule, entry: str | None = None, *,
                 externs: dict[str, Callable[..., Any]] | None = None,
                 max_while_iterations: int = DEFAULT_MAX_WHILE_ITERATIONS, check_dims: bool = True,
                 imports: ImportResolver | None = None) -> None:
        prim, module, name = _resolve(func, entry)
        self._ctx = Context(module, externs, max_while_iterations, check_dims, imports)
        self._program = Program(prim, name, self._ctx)

    @property
    def name(self) -> str:
        """The name errors use for the function."""
        return self._program.name

    def __call__(self, *args: Any) -> None:
        self._program.run(args)

    def run_checked(self, call: BoundCall) -> None:
        """Run on arguments a :class:`~loom.runtime.arguments.ArgumentChecker` of this function bound.

        The interp runtime Module checks each call once, with the checker every
        backend shares, and hands the result here (aligned copies included).
        """
        self._program.run_checked(call)

    def run_words(self, words: Sequence[int], device: Device) -> None:
        """Run the function (a device kernel: pointer and scalar parameters) on one 64-bit word per parameter.

        A pointer word is an address in ``device``'s memory, read through its
        device API's :meth:`~loom.runtime.device_api.DeviceAPI.host_view`; a
        scalar word decodes with :func:`loom.runtime.abi.value_of`.

        >>> import numpy as np, loom
        >>> from loom.ir import BufferStore, PrimFunc
        >>> from loom.runtime.device_api import cpu_device, get_device_api
        >>> p, x = loom.var("p", "handle"), loom.var("x", "int32")
        >>> P = loom.decl_buffer((1,), "int32", name="P", data=p)
        >>> kernel = PrimFunc([p, x], BufferStore(P, x * 2, [0]))
        >>> api, dev = get_device_api(1), cpu_device()
        >>> addr = api.allocate(dev, 4, 64)
        >>> Interpreter(kernel).run_words([addr, 21], dev)
        >>> out = np.zeros(1, "int32"); api.copy_to_host(out, addr, dev); api.free(dev, addr); out
        array([42], dtype=int32)
        """
        self._program.run_words(words, device)

    def __repr__(self) -> str:
        return f"<loom.testing.Interpreter of {self.name}>"


def evaluate(func: PrimFunc | IRModule, *args: Any, externs: dict[str, Callable[..., Any]] | None = None,
             entry: str | None = None, max_while_iterations: int = DEFAULT_MAX_WHILE_ITERATIONS,
             check_dims: bool = True, imports: ImportResolver | None = None) -> None:
    """Run ``func`` once on ``args`` (see :class:`Interpreter` for the options).

    Buffer arguments are numpy arrays, modified in place; the result is None.

    >>> import numpy as np, loom
    >>> from loom.ir import BufferStore, PrimFunc
    >>> A = loom.decl_buffer((2,), "float32", name="A")
    >>> f = PrimFunc([A.data], BufferStore(A, A[0] + A[1], [0]), buffer_map={A.data: A})
    >>> a = np.array([1.5, 2.0], dtype="float32")
    >>> evaluate(f, a); a
    array([3.5, 2. ], dtype=float32)
    """
    Interpreter(func, entry, externs=externs, max_while_iterations=max_while_iterations,
                check_dims=check_dims, imports=imports)(*args)
