"""Packed calls: kernels calling global functions (:mod:`loom.runtime.registry`) by name.

``call_packed("name", *args)`` (:func:`loom.ir.intrin.call_packed`) is a
``tir.call_packed`` call whose first argument is the function's name.  Every
backend runs it the same way: the arguments become Python values, the global
function registered under the name *now* runs on them, and its result is
dropped (the call's value is 0).  A Buffer argument arrives as a
:class:`~loom.runtime.ndarray.NDArray` viewing the buffer's memory, valid for the
duration of the call; a str as a str; scalars as ``int``, ``float`` or ``bool``; a
bare ``handle`` as its address (an ``int``).  A missing name, or an exception
the function raises, stops the kernel and reaches the caller of the compiled
function as a :class:`PackedFuncError` (the function's exception is its
``__cause__``).

**Native code** (llvm, c) calls the runtime through one more runtime slot
(filled with :func:`~loom.runtime.linking.device_services` when a module
loads, also from an exported library)::

    int32_t loom_rt_call_packed(const char *name, const uint64_t *words,
                                const int32_t *codes, int32_t nargs, const char **error)

``codes[k]`` is the :class:`TypeCode` of argument ``k``; the words of the
arguments follow one another (:func:`packed_layout`): one word for a scalar (as
in :mod:`loom.runtime.abi`: sign-extended integers, a float as the bits of a
double, an address), a pointer to a NUL-terminated UTF-8 string for a str, and
``4 + 2 * ndim`` words for an array: data address, pointer to the dtype's name,
ndim, elem_offset, the shape, the strides (in elements).  The function returns
0, or -1 with a message in ``*error``, the exception parked for the outermost
native caller (:func:`~loom.runtime.linking.take_pending_error`).

>>> from loom.runtime.registry import register_func, remove_global_func
>>> seen = register_func("doc.packed.sum", lambda *xs: print(sum(xs)))
>>> invoke_packed("doc.packed.sum", [1, 2, 3.5])
6.5
0
>>> remove_global_func("doc.packed.sum")
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any, Sequence

import numpy as np

from ..errors import LoomError, LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.dtype import DataType
from ..target.devices import cpu
from .abi import value_of
from .ndarray import NDArray
from .registry import lookup

__all__ = ["PackedFuncError", "TypeCode", "PACKED_CALL_SYMBOL", "PACKED_CALL_SIGNATURE", "packed_layout",
           "invoke_packed", "packed_service", "array_view", "check_array"]

#: The runtime slot native code calls packed functions through.
PACKED_CALL_SYMBOL = "loom_rt_call_packed"
#: ``int32_t (const char *, const uint64_t *, const int32_t *, int32_t, const char **)`` as a ctypes type.
PACKED_CALL_SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                         ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                         ctypes.POINTER(ctypes.c_char_p))


class PackedFuncError(LoomError):
    """A packed call failed: the global function is not registered, or it raised (the ``__cause__``)."""


class TypeCode(enum.IntEnum):
    """How one argument of a packed call travels (DLPack's numbering where it has one)."""

    INT = 0
    UINT = 1
    FLOAT = 2
    HANDLE = 3
    BOOL = 4
    ARRAY = 7
    STR = 11


def _code_of(arg: E.PrimExpr) -> TypeCode:
    if isinstance(arg, E.StringImm):
        return TypeCode.STR
    if isinstance(arg, E.Call) and getattr(arg.op, "name", None) == "tir.packed_array":
        return TypeCode.ARRAY
    t = arg.dtype
    if t.lanes != 1:
        raise LoomTypeError(f"a packed call cannot pass a vector ({t}): {arg}")
    if t.is_bool:
        return TypeCode.BOOL
    if t.is_uint:
        return TypeCode.UINT
    if t.is_int:
        return TypeCode.INT
    if t.is_float:
        return TypeCode.FLOAT
    return TypeCode.HANDLE


def packed_layout(call: E.Call) -> tuple[str, list[tuple[TypeCode, list[E.PrimExpr]]]]:
    """The name a ``tir.call_packed`` calls, and each argument's type code and word expressions.

    Backends turn each word expression into one ABI word (a ``StringImm``: the
    address of its characters); an array's words are its ``packed_array`` arguments.

    >>> import loom
    >>> from loom.ir.intrin import call_packed
    >>> name, args = packed_layout(call_packed("f", loom.decl_buffer((3,), name="A"), 2.0))
    >>> name, [(code.name, len(words)) for code, words in args]
    ('f', [('ARRAY', 6), ('FLOAT', 1)])
    """
    if getattr(call.op, "name", None) != "tir.call_packed" or not call.args \
            or not isinstance(call.args[0], E.StringImm):
        raise LoomTypeError(f"not a call_packed with the function name first: {call}")
    out: list[tuple[TypeCode, list[E.PrimExpr]]] = []
    for arg in call.args[1:]:
        code = _code_of(arg)
        if code == TypeCode.ARRAY:
            assert isinstance(arg, E.Call)
            check_array(arg)
            out.append((code, list(arg.args)))
        else:
            out.append((code, [arg]))
    return call.args[0].value, out


def check_array(arg: E.Call) -> int:
    """The ndim of a well-formed ``packed_array`` (an error for a malformed one)."""
    a = arg.args
    ok = len(a) >= 4 and isinstance(a[1], E.StringImm) and isinstance(a[2], E.IntImm) and a[0].dtype.is_handle
    if not ok or len(a) != 4 + 2 * int(a[2].value):
        raise LoomTypeError(f"malformed packed_array (data, dtype, ndim, elem_offset, shape..., strides...): {arg}")
    return int(a[2].value)


# --------------------------------------------------------------------------- calling the function


def array_view(address: int, dtype: str, shape: Sequence[int], strides: Sequence[int], elem_offset: int,
               owner: Any = None) -> NDArray:
    """A CPU :class:`NDArray` over the memory a kernel passed (no copy; valid while the call runs).

    >>> import numpy as np
    >>> x = np.arange(6, dtype="int32")
    >>> array_view(x.ctypes.data, "int32", (2, 2), (1, 2), 1, owner=x).numpy()
    array([[1, 3],
           [2, 4]], dtype=int32)
    """
    itemsize = np.dtype(_numpy_dtype(dtype)).itemsize
    return NDArray(address, shape, dtype, cpu(0), strides=strides, byte_offset=elem_offset * itemsize, owner=owner)


def _numpy_dtype(dtype: str) -> Any:
    return DataType.of(dtype).numpy()


def invoke_packed(name: str, args: Sequence[Any]) -> int:
    """Run the global function ``name`` on ``args``; 0, or a :class:`PackedFuncError`.

    >>> invoke_packed("doc.packed.absent", [])
    Traceback (most recent call last):
      ...
    loom.runtime.packed.PackedFuncError: call_packed('doc.packed.absent'): no global function 'doc.packed.absent' ...
    """
    try:
        fn = lookup(name)
    except LoomError as err:
        raise PackedFuncError(f"call_packed({name!r}): {err}") from None
    try:
        fn(*args)
    except Exception as err:  # noqa: BLE001 - every failure of user code reaches the caller as one error type
        raise PackedFuncError(f"call_packed({name!r}): the function raised {type(err).__name__}: {err}") from err
    return 0


# --------------------------------------------------------------------------- the native entry point


def _string(address: int) -> str:
    return ctypes.string_at(address).decode("utf-8", "replace") if address else ""


_INT64, _FLOAT64 = DataType.of("int64"), DataType.of("float64")


def _decode(words: Any, codes: Any, nargs: int) -> list[Any]:
    """The Python values of a native packed call's arguments (see the module docstring)."""
    out: list[Any] = []
    w = 0
    for k in range(nargs):
        code = codes[k]
        if code == TypeCode.ARRAY:
            ndim = int(words[w + 2])
            signed = [value_of(_INT64, words[w + 3 + i]) for i in range(1 + 2 * ndim)]
            out.append(array_view(int(words[w]), _string(words[w + 1]), signed[1:1 + ndim], signed[1 + ndim:],
                                  signed[0]))
            w += 4 + 2 * ndim
            continue
        word = int(words[w])
        w += 1
        if code == TypeCode.INT:
            out.append(value_of(_INT64, word))
        elif code == TypeCode.FLOAT:
            out.append(value_of(_FLOAT64, word))
        elif code == TypeCode.BOOL:
            out.append(bool(word))
        elif code == TypeCode.STR:
            out.append(_string(word))
        elif code in (TypeCode.UINT, TypeCode.HANDLE):
            out.append(word)
        else:
            raise LoomValueError(f"argument {k} has the unknown type code {code}")
    return out


def _native_call_packed(name: int, words: Any, codes: Any, nargs: int, error: Any) -> int:
    from .linking import _park

    text = _string(name)
    try:
        invoke_packed(text, _decode(words, codes, nargs))
        return 0
    except BaseException as err:  # noqa: BLE001 - nothing may unwind through native frames
        if isinstance(err, Exception) and not isinstance(err, PackedFuncError):  # a malformed argument
            wrapped = PackedFuncError(f"call_packed({text!r}): {type(err).__name__}: {err}")
            wrapped.__cause__, err = err, wrapped
        _park(err, error, str(err))
        return -1


_ENTRY = PACKED_CALL_SIGNATURE(_native_call_packed)


def packed_service() -> dict[str, int]:
    """The runtime slot of packed calls and the address of its native entry point."""
    return {PACKED_CALL_SYMBOL: ctypes.cast(_ENTRY, ctypes.c_void_p).value or 0}
