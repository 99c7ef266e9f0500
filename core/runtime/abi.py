"""The calling convention of compiled (native) functions.

Every compiled PrimFunc ``name`` is a C function

    int32_t name(const uint64_t *args, const char **error)

``args`` holds one 64-bit word per *ABI slot*, in :func:`abi_vars` order: the
function's parameters first (a buffer's data pointer, or a scalar parameter's
value), then every symbolic variable of the buffers' shapes, strides and element
offsets that is not a parameter, in first-appearance order.  Integers are stored
sign-extended to 64 bits, floats as the bits of a double, pointers as addresses.
The function returns 0 on success; on failure (a failed ``AssertStmt``) it stores
a pointer to a static, NUL-terminated message into ``*error`` and returns -1.

One word per slot keeps the call cheap: the runtime fills one ``uint64`` array
from the checked arguments (:func:`pack_values`) and makes one foreign call;
:func:`native_runner` is that call, shared by every native backend.

>>> import loom
>>> from loom.ir import PrimFunc, no_op
>>> n = loom.var("n")
>>> A = loom.decl_buffer((n, 4), "float32", name="A")
>>> f = PrimFunc([A.data], no_op(), buffer_map={A.data: A})
>>> [v.name for v in abi_vars(f)]
['A', 'n']
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, Callable

from ..errors import LoomError
from ..ir import expr as E
from ..ir.function import PrimFunc
from .arguments import BoundCall

__all__ = ["abi_vars", "pack_values", "native_runner", "NativeRunner", "NATIVE_SIGNATURE", "NATIVE_ALIGNMENT",
           "library_function"]

#: The largest alignment native code assumes of argument pointers: what every numpy allocation
#: provides (malloc's 16 bytes), so numpy arrays pass without aligned copies.  Unaligned vector
#: loads cost the same as aligned ones on current x86 and Arm cores, so little is lost.
NATIVE_ALIGNMENT = 16


def abi_vars(func: PrimFunc) -> list[E.Var]:
    """The variables a compiled function receives, in slot order (see module docstring)."""
    out: list[E.Var] = list(func.params)
    seen = {id(v) for v in out}
    for buf in func.buffer_map.values():
        for e in (*buf.shape, *buf.strides, buf.elem_offset):
            if isinstance(e, E.Var) and id(e) not in seen:
                seen.add(id(e))
                out.append(e)
    return out


_DOUBLE = struct.Struct("<d")
_U64 = struct.Struct("<Q")


def _word(var: E.Var, value: Any) -> int:
    t = var.dtype
    if t.is_float:
        return _U64.unpack(_DOUBLE.pack(float(value)))[0]
    return int(value) & 0xFFFFFFFFFFFFFFFF


def pack_values(func_vars: list[E.Var], call: BoundCall) -> list[int]:
    """The 64-bit words of one call, in slot order (pointers from ``call.pointers``)."""
    seen, pointers, n = call._seen, call.pointers, len(call.pointers)
    words: list[int] = []
    for k, v in enumerate(func_vars):
        if k < n and pointers[k] is not None:
            words.append(pointers[k])
        else:
            bound = seen.get(id(v))
            words.append(_word(v, bound[0] if bound is not None else call.values[k]))
    return words


#: ``int32_t name(const uint64_t *args, const char **error)`` as a ctypes function type.
NATIVE_SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_char_p))


class NativeRunner:
    """The runner of one compiled function: pack the words, make one call, raise on failure.

    :param fn: the compiled function, callable as ``fn(words, byref(error)) -> int``
        (a :data:`NATIVE_SIGNATURE` pointer or a ctypes library function with those argtypes).
    :param func: the PrimFunc it was compiled from (its :func:`abi_vars` give the slots).
    :param name: the function name a failed assertion reports.

    Calling it with a checked :class:`~loom.runtime.arguments.BoundCall` runs the
    function; :meth:`invoke` runs it on words already packed, which is what the
    per-call fast path (:mod:`loom.runtime.fast_path`) uses.
    """

    __slots__ = ("slots", "name", "_fn", "_words_t")

    def __init__(self, fn: Callable[..., int], func: PrimFunc, name: str) -> None:
        self.slots = abi_vars(func)
        self.name = name
        self._fn = fn
        self._words_t = ctypes.c_uint64 * max(1, len(self.slots))

    def __call__(self, call: BoundCall) -> None:
        self.invoke(self.pack(call))

    def pack(self, call: BoundCall) -> list[int]:
        """The words of a checked call."""
        return pack_values(self.slots, call)

    def invoke(self, words: list[int]) -> None:
        """Call the function on packed ``words``; raise AssertionFailed when it reports an error."""
        err = ctypes.c_char_p()
        if self._fn(self._words_t(*words), ctypes.byref(err)) != 0:
            from ..testing import AssertionFailed  # loom.testing imports the runtime: import on use

            raw = err.value
            raise AssertionFailed(raw.decode("utf-8", "replace") if raw else "failed with no message", self.name)


def library_function(lib: ctypes.CDLL, symbol: str, where: str) -> Callable[..., int]:
    """Function ``symbol`` of a loaded shared library, typed as the native ABI.

    :raises LoomError: naming ``where`` (the library) when it has no such symbol.
    """
    try:
        fn = getattr(lib, symbol)
    except AttributeError:
        raise LoomError(f"{where}: no function {symbol!r} in the library") from None
    fn.argtypes = list(NATIVE_SIGNATURE._argtypes_)
    fn.restype = ctypes.c_int32
    return fn


def native_runner(fn: Callable[..., int], func: PrimFunc, name: str) -> NativeRunner:
    """The :class:`NativeRunner` of ``fn`` compiled from ``func`` (what backends' ``_make_runner`` return)."""
    return NativeRunner(fn, func, name)
