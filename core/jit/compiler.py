"""Compiling a ``@loom.jit`` kernel for one call: prim-func arguments, the parsed body, ``loom.build``.

For each parameter the annotation makes a prim-func argument
(:meth:`~loom.language.FuncAnnot.prim_func_arguments`): a tensor becomes a
Buffer, bound to a placeholder the body is parsed against; a ``T.dyn`` scalar a
Var; a static value stays itself, compiled in.  The body (the hybrid-script
language, see :mod:`loom.jit.parser`) becomes the PrimFunc of those arguments,
which ``loom.build`` lowers and hands to the target's backend.
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping, Sequence

from ..hybrid.errors import HybridSyntaxError, Source, debug_tracebacks
from ..ir import expr as E
from ..ir.buffer import Buffer
from ..ir.function import PrimFunc
from ..ir.recursion import deep_recursion
from ..language import FuncAnnot
from ..target import Target
from ..te.operation import placeholder
from .parser import parse_kernel

__all__ = ["kernel_prim_func", "build_kernel", "closure_names"]


def closure_names(func: Any) -> dict[str, Any]:
    """The names a function reads from its enclosing scopes, with their values now."""
    closure = inspect.getclosurevars(func)
    return {**closure.builtins, **closure.globals, **closure.nonlocals}


def kernel_prim_func(func: Any, src: Source, fdef: Any, fa: FuncAnnot, values: Sequence[Any], name: str) -> PrimFunc:
    """The PrimFunc of ``func`` for a call with ``values`` (parameter order, defaults filled in)."""
    from ..driver.lower import form_prim_func  # lazy: the driver imports much of loom

    _, prim_args = fa.prim_func_arguments(values)
    params: dict[str, Any] = {}
    args: list[Any] = []
    binds: dict[Any, Buffer] = {}
    for pname, value in zip(fa.arg_names, values):
        arg = prim_args[pname]
        if isinstance(arg, Buffer):
            t = placeholder(arg.shape, arg.dtype, name=pname)
            binds[t] = arg
            params[pname] = t
            args.append(t)
        elif isinstance(arg, E.Var) and fa.annot_of(pname, value).is_kernel_arg():
            params[pname] = arg
            args.append(arg)
        else:
            params[pname] = arg
    try:
        with deep_recursion(f"loom.jit kernel {name}"):
            parsed = parse_kernel(src, fdef, params, closure_names(func))
    except HybridSyntaxError as err:
        if debug_tracebacks():
            raise
        raise err.with_traceback(None) from None
    return form_prim_func(parsed.body, args, name, binds)


def build_kernel(prim_func: PrimFunc, target: Target, name: str, pass_configs: Mapping[str, Any]) -> Any:
    """The runtime Module of a kernel's PrimFunc for ``target``, under the kernel's build options."""
    from ..driver import build, build_config

    with build_config(**pass_configs):
        return build(prim_func, target=target, name=name)
