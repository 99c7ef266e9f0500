"""The calling convention of compiled (native) functions.

Every compiled PrimFunc ``name`` is a C function

    int32_t name(const uint64_t *args, const char **error)

``args`` holds one 64-bit word per *ABI slot*, in :func:`abi_vars` order: the
function's parameters first (a buffer's data pointer, or a scalar parameter's
value), then every symbolic variable of the buffers' shapes, strides and element
offsets that is not a parameter, in first-appearance order.  Integers are stored
sign-extended to 64 bits, floats as the bits of a double, pointers as addresses.
The function returns 0 on success; on failure (a failed ``AssertStmt``, an integer
division or remainder by zero) it stores a pointer to a static, NUL-terminated
message into ``*error`` and returns -1.  The runtime raises
:class:`loom.testing.AssertionFailed` for it, or :class:`loom.testing.DivisionByZero`
when the message starts with :data:`DIVISION_BY_ZERO` (:func:`native_error`), as the
interpreter does.  ``name`` is the function's C symbol, :func:`function_symbol` of
its name: the name itself unless it could collide with what native code calls.

One word per slot keeps the call cheap: the runtime fills one ``uint64`` array
from the checked arguments (:func:`pack_values`) and makes one foreign call;
:func:`native_runner` is that call, shared by every native backend.

**Calls between modules.**  Host code calls a function of another module (a
kernel of a device module, after SplitHostDevice) through the same convention:
``Call(int32, GlobalVar(name), args)`` packs one word per argument (a pointer's
address, an integer sign-extended, a float as the bits of a double) and calls
``name(words, error)``.  A non-zero status makes the caller return -1 at once,
with the callee's message in ``*error``.  When ``name`` is not a function of the
calling module, native code calls it through an *import slot*: a global
``int32_t (*import_symbol(name))(const uint64_t *, const char **)``, NULL until
the runtime links the module (:mod:`loom.runtime.linking`); calling a NULL
slot is an error return, never a crash.

**Device memory from host code.**  An ``Allocate`` annotated with
:data:`DEVICE_TYPE_ANNOTATION` (and :data:`DEVICE_ID_ANNOTATION`) holds memory of
that device, which host code only passes to kernels.  Native host code gets it
from the runtime through two more slots the runtime fills when it links:

* ``void *loom_rt_device_alloc(int32_t device_type, int32_t device_id,
  uint64_t nbytes, uint64_t alignment, const char **error)``: NULL (and a
  message in ``*error``) on failure;
* ``int32_t loom_rt_device_free(int32_t device_type, int32_t device_id,
  void *ptr, const char **error)``,

called at the end of the allocation's scope and on every error return inside it.

A host function whose buffer arguments live on a device records their DLPack
device types in ``attrs[ARG_DEVICES_ATTR]`` (one per parameter; 1 for the CPU),
so the argument checker accepts only arrays on those devices.

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
from typing import Any, Callable, NoReturn

from ..errors import LoomError
from ..ir import expr as E
from ..ir.function import PrimFunc
from .arguments import BoundCall
from .symbols import escape_name, function_symbol

__all__ = ["abi_vars", "pack_values", "native_runner", "NativeRunner", "NATIVE_SIGNATURE", "NATIVE_ALIGNMENT",
           "library_function", "import_symbol", "word_of", "value_of", "DEVICE_ALLOC_SYMBOL", "DEVICE_FREE_SYMBOL",
           "DEVICE_ALLOC_SIGNATURE", "DEVICE_FREE_SIGNATURE", "DEVICE_TYPE_ANNOTATION", "DEVICE_ID_ANNOTATION",
           "ARG_DEVICES_ATTR", "DEVICE_COPY_FUNCTION", "arg_devices", "function_symbol", "DIVISION_BY_ZERO", "division_by_zero_message",
           "native_error"]

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


#: ``Allocate.annotations`` key: the DLPack device type whose memory the allocation holds.
DEVICE_TYPE_ANNOTATION = "loom.device_type"
#: ``Allocate.annotations`` key: the ordinal of that device (default 0).
DEVICE_ID_ANNOTATION = "loom.device_id"
#: ``PrimFunc.attrs`` key: per parameter, the DLPack device type of the memory it points to.
ARG_DEVICES_ATTR = "loom.arg_devices"
#: The runtime function host code calls to copy between devices (see :mod:`loom.runtime.device_copy`).
DEVICE_COPY_FUNCTION = "loom.device_copy"
#: The runtime's device allocator, as seen from native host code (see the module docstring).
DEVICE_ALLOC_SYMBOL = "loom_rt_device_alloc"
#: The runtime's device deallocator, as seen from native host code.
DEVICE_FREE_SYMBOL = "loom_rt_device_free"
_IMPORT_PREFIX = "loom_import_"


def import_symbol(name: str) -> str:
    """The C symbol of the import slot of function ``name`` (an injective, C-safe spelling).

    >>> import_symbol("main_kernel0"), import_symbol("a.b")
    ('loom_import_main__kernel0', 'loom_import_a_2eb')
    """
    return _IMPORT_PREFIX + escape_name(name)


#: How the message of an integer division (or remainder) by zero in native code starts.
DIVISION_BY_ZERO = "integer division by zero"
_MESSAGE_LIMIT = 200


def division_by_zero_message(expression: str) -> str:
    """The static message native code reports for a zero divisor in ``expression`` (shortened when long).

    >>> division_by_zero_message("A[i] // B[i]")
    'integer division by zero in A[i] // B[i]'
    """
    if len(expression) > _MESSAGE_LIMIT:
        expression = expression[:_MESSAGE_LIMIT - 3] + "..."
    return f"{DIVISION_BY_ZERO} in {expression}"


def native_error(message: str, function: str) -> LoomError:
    """The exception for ``message``, which native ``function`` reported: what the interpreter raises.

    A zero divisor (the message starts with :data:`DIVISION_BY_ZERO`) is a
    :class:`loom.testing.DivisionByZero`; anything else (a failed assertion) an
    :class:`loom.testing.AssertionFailed`.

    >>> type(native_error(division_by_zero_message("a // b"), "f")).__name__
    'DivisionByZero'
    >>> str(native_error("n > 0", "f"))
    'f: assertion failed: n > 0'
    """
    from ..testing import AssertionFailed, DivisionByZero  # loom.testing imports the runtime: import on use

    if message.startswith(DIVISION_BY_ZERO):
        return DivisionByZero(f"{function}: {message}")
    return AssertionFailed(message, function)


def arg_devices(func: PrimFunc) -> tuple[int, ...]:
    """The DLPack device type of each parameter's memory (1, the CPU, unless ``ARG_DEVICES_ATTR`` says otherwise)."""
    found = func.attrs.get(ARG_DEVICES_ATTR)
    if found is None:
        return (1,) * len(func.params)
    devices = tuple(int(getattr(d, "value", d)) for d in found)
    if len(devices) != len(func.params):
        raise LoomError(f"{ARG_DEVICES_ATTR} of {func.attrs.get('global_symbol', 'a function')} has {len(devices)} "
                        f"entries for {len(func.params)} parameters")
    return devices


def word_of(dtype: Any, value: Any) -> int:
    """The 64-bit word of one argument of ``dtype`` (float: the bits of a double; int: two's complement)."""
    if dtype.is_float:
        return _U64.unpack(_DOUBLE.pack(float(value)))[0]
    return int(value) & 0xFFFFFFFFFFFFFFFF


def value_of(dtype: Any, word: int) -> Any:
    """The argument a word carries, for a parameter of ``dtype`` (the inverse of :func:`word_of`)."""
    word &= 0xFFFFFFFFFFFFFFFF
    if dtype.is_float:
        return _DOUBLE.unpack(_U64.pack(word))[0]
    if dtype.is_handle:
        return word
    if dtype.is_bool:
        return bool(word)
    bits = dtype.bits
    v = word & ((1 << bits) - 1)
    if not dtype.is_uint and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def pack_values(func_vars: list[E.Var], call: BoundCall) -> list[int]:
    """The 64-bit words of one call, in slot order (pointers from ``call.pointers``)."""
    seen, pointers, n = call._seen, call.pointers, len(call.pointers)
    words: list[int] = []
    for k, v in enumerate(func_vars):
        pointer = pointers[k] if k < n else None
        if pointer is not None:
            words.append(pointer)
        else:
            bound = seen.get(id(v))
            words.append(word_of(v.dtype, bound[0] if bound is not None else call.values[k]))
    return words


#: ``int32_t name(const uint64_t *args, const char **error)`` as a ctypes function type.
NATIVE_SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_char_p))
#: The type of :data:`DEVICE_ALLOC_SYMBOL`.
DEVICE_ALLOC_SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_uint64,
                                          ctypes.c_uint64, ctypes.POINTER(ctypes.c_char_p))
#: The type of :data:`DEVICE_FREE_SYMBOL`.
DEVICE_FREE_SIGNATURE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p,
                                         ctypes.POINTER(ctypes.c_char_p))


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

    @property
    def address(self) -> int:
        """The address of the compiled function (what the native fast path calls)."""
        return ctypes.cast(self._fn, ctypes.c_void_p).value or 0  # type: ignore[arg-type]  # a ctypes function

    def invoke(self, words: list[int]) -> None:
        """Call the function on packed ``words``; raise :func:`native_error`'s exception when it fails."""
        err = ctypes.c_char_p()
        if self._fn(self._words_t(*words), ctypes.byref(err)) != 0:
            self.fail(ctypes.cast(err, ctypes.c_void_p).value)

    def fail(self, error: int | None) -> NoReturn:
        """Raise for a failed call whose error message is at address ``error`` (0 or None: no message)."""
        from .linking import take_pending_error

        # A Python module called from this native code (a kernel run by the interpreter, a
        # device driver) raised: re-raise that exception rather than its message.
        pending = take_pending_error(error or None)
        if pending is not None:
            raise pending
        raw = ctypes.string_at(error) if error else b""
        raise native_error(raw.decode("utf-8", "replace") if raw else "failed with no message", self.name)


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
