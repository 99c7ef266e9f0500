"""``tir.call_packed`` in C: a call of the runtime's packed-call slot.

The contract is :mod:`loom.runtime.packed`'s.  The call is a statement
expression whose value is 0: the arguments' words in a local ``uint64_t``
array, their type codes in a ``static const int32_t`` one, then
``loom_rt_call_packed(name, words, codes, nargs, &message)``.  A null slot or a
non-zero status fails the function with the message, as a failed callee does
(:meth:`~loom_c.codegen.CRenderer.call_global`); inside an OpenMP loop the
message waits in the loop's error variable and the function fails after the
loop (:meth:`~loom.codegen.CStyleRenderer.fail`).

>>> import loom
>>> from loom.ir import Evaluate, PrimFunc
>>> from loom.ir.intrin import call_packed
>>> from loom_c.codegen import generate
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> src = generate(PrimFunc([A.data], Evaluate(call_packed("f", A, 2)), buffer_map={A.data: A})).text
>>> "loom_rt_call_packed(\\"f\\", " in src
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom.ir import expr as E
from loom.runtime.packed import PACKED_CALL_SYMBOL, packed_layout

if TYPE_CHECKING:
    from .codegen import CRenderer

__all__ = ["render_call_packed", "PACKED_CALL_TYPEDEF"]

#: The C type of the runtime slot (see :mod:`loom.runtime.packed`).
PACKED_CALL_TYPEDEF = ("loom_call_packed_t",
                       "typedef int32_t (*loom_call_packed_t)(const char *, const uint64_t *, const int32_t *, "
                       "int32_t, const char **);")


def _failure(r: CRenderer, message: str) -> str:
    """Fail with the C string expression ``message``, also inside an OpenMP loop."""
    region = r._region
    if region is None:
        return f"*error = {message}; {r.error_return()}"
    region.used = True
    return f"__atomic_store_n(&{region.error}, {message}, __ATOMIC_RELAXED); goto {region.label};"


def render_call_packed(r: CRenderer, call: E.Call) -> str:
    """The C statement expression of ``call`` (see the module docstring)."""
    name, layout = packed_layout(call)
    slot = r.runtime_slot(PACKED_CALL_SYMBOL)
    words = ", ".join(r._word(w, f"call_packed({name!r})") for _, ws in layout for w in ws) or "0"
    codes = ", ".join(str(int(code)) for code, _ in layout) or "0"
    w, c, status, message = r.tmp(), r.tmp(), r.tmp(), r.tmp()
    unlinked = r.string_literal(f"call_packed({name!r}): the runtime's packed-call entry is not linked")
    return (f"({{ const uint64_t {w}[] = {{{words}}}; static const int32_t {c}[] = {{{codes}}}; "
            f"const char *{message} = 0; if (!{slot}) {{ {_failure(r, unlinked)} }} "
            f"int32_t {status} = {slot}({r.string_literal(name)}, {w}, {c}, {len(layout)}, &{message}); "
            f"if ({status} != 0) {{ {_failure(r, message)} }} 0; }})")
