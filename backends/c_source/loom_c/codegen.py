"""C99 (with GNU extensions) source of lowered IRModules, on the shared C-style renderer.

:class:`CRenderer` is the core :class:`loom.codegen.CStyleRenderer` with the
CPU's native calling convention of :mod:`loom.runtime.abi`:

* every function is ``int32_t name(const uint64_t *args, const char **error)``
  (``name`` is :func:`loom.runtime.abi.function_symbol` of the function's name):
  the prologue unpacks one word per ABI slot, the body ends with ``return 0``,
  and a failed assert stores its message in ``*error`` and returns -1, freeing
  the live heap and device allocations first;
* an integer division or remainder by a divisor that is not a non-zero constant
  tests it first, and a zero fails the same way with
  :func:`loom.runtime.abi.division_by_zero_message`; inside an OpenMP loop, which
  no statement may leave, the message waits in a variable of the loop and the
  function fails after it (:meth:`~loom.codegen.CStyleRenderer.fail`);
* allocations too large for the stack come from ``loom_alloc`` (64-byte
  aligned), allocations annotated with a device type from the runtime's
  ``loom_rt_device_alloc`` slot, given back through ``loom_rt_device_free``;
* a call of another function (a ``GlobalVar``) packs one word per argument and
  calls it directly when this file defines it, else through its import slot
  ``loom_import_<name>`` (see :func:`loom.runtime.abi.import_symbol`): a
  default-visibility global function pointer, 0 until the runtime links it.
  A failing callee makes the caller return -1 with the callee's message;
* ``call_packed`` calls the runtime's ``loom_rt_call_packed`` slot (:mod:`loom_c.packed`).

Vector values use GCC vector types, with vector shifts, bit operations, selects
and casts where the lanes allow (:mod:`loom_c.vector_ops`); parallel loops get
``#pragma omp parallel for`` when OpenMP is on.  Signed arithmetic wraps like the IR's only when
compiled with ``-fwrapv`` (:func:`loom_c.cc.c_flags` always adds it).
Math intrinsics that LowerIntrin did not lower go through
:func:`loom_c.intrinsic_rules.rules_for`.

Every file defines ``int32_t loom_num_threads`` (the runtime's thread knob,
:data:`loom.runtime.native_library.THREADS_SYMBOL`); parallel loops run on that
many threads, or on OpenMP's default (``OMP_NUM_THREADS``, else one per core)
while it is 0.  OpenMP rejects ``num_threads(0)``, hence the helper.

>>> import loom
>>> from loom.ir import BufferStore, PrimFunc
>>> A = loom.decl_buffer((4,), "int32", name="A")
>>> f = PrimFunc([A.data], BufferStore(A, A[0] * 3, [1]), buffer_map={A.data: A})
>>> src = generate(f, name="triple")
>>> src.symbols
{'triple': 'triple'}
>>> "int32_t triple(const uint64_t *args, const char **error) {" in src.text
True
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from loom.codegen import CodegenError, CStyleRenderer, Release, sanitize
from loom.codegen.parallel_work import min_iterations_per_thread
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.buffer import prefetch_address, prefetch_parts
from loom.ir.function import IRModule, PrimFunc
from loom.runtime.abi import (DEVICE_ALLOC_SYMBOL, DEVICE_FREE_SYMBOL, DEVICE_ID_ANNOTATION, DEVICE_TYPE_ANNOTATION,
                              NATIVE_ALIGNMENT, abi_vars, function_symbol, import_symbol)
from loom.runtime.native_library import THREADS_SYMBOL
from loom.runtime.packed import PACKED_CALL_SYMBOL
from loom.transform import LegalizeNarrowFloats

from .intrinsic_rules import rules_for
from .narrow_floats import from_word, is_narrow, narrow_cast, narrow_literal, to_word
from .packed import PACKED_CALL_TYPEDEF, render_call_packed
from .vector_ops import VECTOR_CODE_FOR_OP

__all__ = ["CRenderer", "CSource", "generate"]

_VISIBLE = '__attribute__((visibility("default")))'
#: The alignment host code asks of the device allocator.
DEVICE_ALLOCATION_ALIGNMENT = 64
_ABI_TYPE = "typedef int32_t (*loom_function_t)(const uint64_t *, const char **);"
_RUNTIME_SLOTS = {
    DEVICE_ALLOC_SYMBOL: ("loom_device_alloc_t",
                          "typedef void *(*loom_device_alloc_t)(int32_t, int32_t, uint64_t, uint64_t, const char **);"),
    DEVICE_FREE_SYMBOL: ("loom_device_free_t",
                         "typedef int32_t (*loom_device_free_t)(int32_t, int32_t, void *, const char **);"),
    PACKED_CALL_SYMBOL: PACKED_CALL_TYPEDEF,
}
_BITS_OF_F64 = ("static inline uint64_t loom_bits_of_f64(double d) { uint64_t w; memcpy(&w, &d, sizeof w); "
                "return w; }")


def _prefetch(r: Any, n: E.Call) -> str:
    """``prefetch(A[i], rw, locality)``: GCC's ``__builtin_prefetch`` (a hint; it never faults)."""
    where, rw, locality = prefetch_parts(n)
    return f"__builtin_prefetch({r.expr(prefetch_address(where))}, {r.expr(rw)}, {r.expr(locality)})"


_TEMPLATES: dict[Any, Any] = {**CStyleRenderer.code_for_op, **VECTOR_CODE_FOR_OP}


def _cast(r: Any, n: E.Cast) -> str:
    narrow = narrow_cast(r, n)
    return narrow if narrow is not None else _TEMPLATES[E.Cast](r, n)


def _float_literal(r: Any, n: E.FloatImm) -> str:
    return narrow_literal(n) if is_narrow(n.dtype) else _TEMPLATES[E.FloatImm](r, n)


class CRenderer(CStyleRenderer):
    """The C dialect: native-ABI functions, runtime slots, the thread knob, OpenMP thread counts.

    :param openmp: render parallel loops as OpenMP loops.
    :param target: the ``c`` target whose intrinsic rules lower what LowerIntrin left (None: the defaults).
    """

    banner: ClassVar[str] = "/* Generated by loom-c; compile with -fwrapv (wrapping signed arithmetic). */"
    preamble: ClassVar[str] = (
        CStyleRenderer.preamble.rstrip("\n") + "\n\n/* Threads of parallel loops, set by the runtime (0: OpenMP's "
        f"default). */\n{_VISIBLE} int32_t {THREADS_SYMBOL} = 0;\n")
    # At most one thread per min_iterations iterations: small loops run on the calling thread alone
    # (loom.codegen.parallel_work).
    parallel_preamble: ClassVar[str] = (
        "int omp_get_max_threads(void);\n"
        "static inline int loom_thread_count(int64_t extent, int64_t min_iterations) {\n"
        f"  int64_t t = {THREADS_SYMBOL} > 0 ? {THREADS_SYMBOL} : omp_get_max_threads();\n"
        "  if (min_iterations > 1 && extent / min_iterations < t) t = extent / min_iterations;\n"
        "  return t < 1 ? 1 : (int)t;\n}\n")
    #: The most argument pointers are assumed aligned to (what the runtime guarantees).
    param_alignment: ClassVar[int] = NATIVE_ALIGNMENT
    code_for_op: ClassVar[dict[Any, Any]] = {**_TEMPLATES,
                                             "tir.call_packed": render_call_packed, "tir.prefetch": _prefetch,
                                             E.Cast: _cast, E.FloatImm: _float_literal}
    #: float16 and bfloat16 values are their bits (:mod:`loom_c.narrow_floats`).
    type_map: ClassVar[dict[str, str]] = {**CStyleRenderer.type_map, "float16": "uint16_t", "bfloat16": "uint16_t"}

    def __init__(self, openmp: bool = False, target: Any = None) -> None:
        super().__init__(openmp, rules_for(target))

    def parallel_pragma_for(self, s: S.For, extent: str) -> str:
        min_iterations = min_iterations_per_thread(s.body)
        return ("#pragma omp parallel for schedule(static) "
                f"num_threads(loom_thread_count((int64_t)({extent}), {min_iterations}))")

    # -- the calling convention ------------------------------------------------------

    def symbol(self, name: str) -> str:
        """The C symbol of function ``name``: :func:`loom.runtime.abi.function_symbol` (mangled when it
        could collide with a library, a header or the runtime)."""
        return function_symbol(name)

    def function_signature(self, name: str, func: PrimFunc) -> str:
        return f"{self.kernel_prefix}int32_t {self.symbol(name)}(const uint64_t *args, const char **error)"

    def function_prologue(self, name: str, func: PrimFunc) -> None:
        """Unpack one word per ABI slot into a typed local."""
        restrict = f" {self.restrict_keyword} " if func.attrs.get("tir.noalias") and self.restrict_keyword else ""
        buffers = {id(p): b for p, b in func.buffer_map.items()}
        for k, v in enumerate(abi_vars(func)):
            buf = buffers.get(id(v))
            if buf is not None:
                self._names[id(v)] = c = self.name(buf.data)
                self._elem[id(buf.data)] = buf.dtype
                ct = self.type_name(buf.dtype)
                ptr = f"(void *)(uintptr_t)args[{k}]"
                if (align := min(buf.data_alignment, self.param_alignment)) > 1:
                    ptr = f"__builtin_assume_aligned({ptr}, {align})"
                self.emit(f"{ct} *{restrict}{c} = ({ct} *){ptr};")
            elif v.dtype.is_handle:
                self.emit(f"void *{self.name(v)} = (void *)(uintptr_t)args[{k}];")
            elif is_narrow(v.dtype):
                self.emit(f"const uint16_t {self.name(v)} = {from_word(self, v.dtype, f'loom_f64_of_bits(args[{k}])')};")
            elif v.dtype.is_float:
                self.emit(f"const {self.type_name(v.dtype)} {self.name(v)} = "
                          f"({self.type_name(v.dtype)})loom_f64_of_bits(args[{k}]);")
            else:
                self.emit(f"const {self.type_name(v.dtype)} {self.name(v)} = ({self.type_name(v.dtype)})args[{k}];")
        self.emit("(void)error;")

    def function_epilogue(self, name: str, func: PrimFunc) -> None:
        self.emit("return 0;")

    def error_return(self, message: str | None = None) -> str:
        """Free the live allocations and return -1, with ``message`` (None: the one ``*error`` holds)."""
        text = "" if message is None else f"*error = {self.string_literal(message)}; "
        return f"{self.error_cleanup()}{text}return -1;"

    def assert_failure(self, message: str) -> str:
        return self.error_return(message)

    def division_by_zero(self, message: str) -> str | None:
        """Fail with ``message`` (:meth:`fail`: also inside OpenMP loops), as the interpreter raises."""
        return self.fail(message)

    def region_failure(self, message: str) -> str:
        return f"*error = {message}; {self.error_return()}"

    # -- memory ------------------------------------------------------------------

    def allocate_heap(self, s: S.Allocate, ctype: str, name: str) -> Release:
        size = self.byte_size(s, ctype)
        self.emit(f"{ctype} *{name} = ({ctype} *)loom_alloc({size});")
        message = f"out of memory in allocation of {sanitize(s.buffer_var.name)}"
        self.emit(f"if (!{name}) {{ {self.error_return(message)} }}")
        return Release(f"free({name});", f"free({name});")

    def allocate_device(self, s: S.Allocate, ctype: str, name: str) -> Release:
        """Device memory from the runtime's slots; freed (status checked) at the end of the scope."""
        alloc, free = (self.runtime_slot(x) for x in (DEVICE_ALLOC_SYMBOL, DEVICE_FREE_SYMBOL))
        device = f"{_annotation(s, DEVICE_TYPE_ANNOTATION)}, {_annotation(s, DEVICE_ID_ANNOTATION, 0)}"
        self.emit(f"if (!{alloc} || !{free}) {{ {self.error_return('no device allocator is linked')} }}")
        size = self.byte_size(s, ctype)
        self.emit(f"{ctype} *{name} = ({ctype} *){alloc}({device}, (uint64_t){size}, "
                  f"{DEVICE_ALLOCATION_ALIGNMENT}, error);")
        self.emit(f"if (!{name}) {{ {self.error_return()} }}")
        # On an error return the first message stays: the free reports into a scratch pointer.
        on_error = f"(void){free}({device}, {name}, &(const char *){{0}});"
        at_end = f"if ({free}({device}, {name}, error) != 0) {{ {self.error_return()} }}"
        return Release(on_error, at_end)

    def runtime_slot(self, symbol: str) -> str:
        """Declare (once) the runtime's function-pointer slot ``symbol``; its C name."""
        typename, typedef = _RUNTIME_SLOTS[symbol]
        self.declarations.setdefault(typename, typedef)
        self.declarations.setdefault(symbol, f"{_VISIBLE} {typename} {symbol} = 0;")
        return symbol

    # -- calls of other functions -------------------------------------------------

    def call_global(self, call: E.Call) -> str:
        """Pack the words, call the function (directly, or through its import slot), propagate failure.

        A statement expression whose value is 0; it returns from the caller on failure.
        """
        name = call.op.name_hint
        words = ", ".join(self._word(a, name) for a in call.args) or "0"
        w, status = self.tmp(), self.tmp()
        self.declarations.setdefault("loom_function_t", _ABI_TYPE)
        checks = ""
        if name in self.functions:
            callee = self.functions[name]
            self.declarations.setdefault(f"prototype {callee}",
                                         f"int32_t {callee}(const uint64_t *args, const char **error);")
        else:
            callee = import_symbol(name)
            self.declarations.setdefault(callee, f"{_VISIBLE} loom_function_t {callee} = 0;")
            message = f"function {name} is not linked: the module that defines it was not imported"
            checks = f"if (!{callee}) {{ {self.error_return(message)} }} "
        return (f"({{ const uint64_t {w}[{max(1, len(call.args))}] = {{{words}}}; {checks}"
                f"int32_t {status} = {callee}({w}, error); if ({status} != 0) {{ {self.error_return()} }} 0; }})")

    def _word(self, arg: Any, callee: str) -> str:
        """The ``uint64_t`` word of one argument (see :mod:`loom.runtime.abi`)."""
        t, text = arg.dtype, self.expr(arg)
        if t.lanes != 1:
            raise CodegenError(f"the call of {callee} passes a vector ({t}), which no ABI word holds")
        if t.is_handle:
            return f"(uint64_t)(uintptr_t)({text})"
        if t.is_float:
            self.declarations.setdefault("loom_bits_of_f64", _BITS_OF_F64)
            return f"loom_bits_of_f64({to_word(self, t, text) if is_narrow(t) else f'(double)({text})'})"
        if t.is_uint or t.is_bool:
            return f"(uint64_t)({text})"
        return f"(uint64_t)(int64_t)({text})"


def _annotation(s: S.Allocate, key: str, default: int | None = None) -> int | None:
    found = s.annotations.get(key)
    return default if found is None else int(getattr(found, "value", found))


@attrs.frozen
class CSource:
    """One translation unit and the C symbol of each PrimFunc in it."""

    text: str
    symbols: dict[str, str]


def generate(mod: IRModule | PrimFunc, openmp: bool = False, name: str = "default_function",
             target: Any = None) -> CSource:
    """Render every PrimFunc of ``mod`` (a lone PrimFunc is called ``name``) into one C file.

    ``target`` (a ``c`` Target, or None) gives the rules of intrinsics LowerIntrin did not lower.
    """
    renderer = CRenderer(openmp=openmp, target=target)
    funcs = {name: mod} if isinstance(mod, PrimFunc) else dict(mod.functions)
    mod = LegalizeNarrowFloats()(mod)  # 16-bit floats computed in float32, as numpy computes them
    text = renderer.render(mod, name)
    return CSource(f"{CRenderer.banner}\n{text}", {n: renderer.symbol(n) for n in funcs})
