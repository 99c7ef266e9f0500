"""``@loom.hybrid.script``: one Python function, emulated on numpy or compiled from tensors.

>>> import numpy as np
>>> import loom
>>> @loom.hybrid.script
... def scale(a, k):
...     b = output_tensor(a.shape, a.dtype)
...     for i in range(a.shape[0]):
...         b[i] = a[i] * k
...     return b
>>> scale(np.arange(3, dtype="float32"), 2.0)          # numpy in: emulation
array([0., 2., 4.], dtype=float32)
>>> A = loom.placeholder((3,), name="A")
>>> B = scale(A, 2.0)                                   # tensors in: an operation
>>> type(B.op).__name__, [iv.var.name for iv in B.op.axis]
('HybridOp', ['i'])
"""

from __future__ import annotations

import ast
import functools
import inspect
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import LoomError
from ..ir import expr as E
from ..ir.container import Array, convert
from ..ir.node import Node
from ..ir.recursion import deep_recursion
from ..ir.stmt import For
from ..te._te_functor import te_collect
from ..te.operation import HybridOp
from ..te.tensor import Tensor
from .errors import HybridArgumentError, HybridSyntaxError, Source, debug_tracebacks
from .expr import describe
from .parser import HybridParser, Parsed, usage
from .runtime import keywords_injected

__all__ = ["script", "HybridFunction", "parse"]


_ACTIVE = threading.local()  # .stack: the functions this thread is parsing (a call inlines its callee)


def _is_loom(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return any(_is_loom(x) for x in v)
    return isinstance(v, Node)


class HybridFunction:
    """A function decorated with :func:`script`.

    Called with numpy arrays and Python numbers it runs as Python (software
    emulation); called with Loom tensors, expressions or containers it returns
    the output tensor of a :class:`~loom.te.operation.HybridOp`, or the list
    of its outputs when the function returns several.
    """

    __loom_hybrid__ = True

    def __init__(self, func: Callable[..., Any], source: Optional[Source] = None) -> None:
        """``source``: the function's text where Python keeps none (a function compiled from a string)."""
        if not inspect.isfunction(func):
            raise LoomError(f"loom.hybrid.script decorates a Python function, got {type(func).__name__}")
        functools.update_wrapper(self, func)
        self.func = func
        self._source: Optional[Source] = source
        self._fdef: Optional[ast.FunctionDef] = None

    def __repr__(self) -> str:
        return f"<hybrid function {self.func.__qualname__}>"

    @property
    def __globals__(self) -> dict[str, Any]:
        """The function's module globals (where emulation puts the keywords for the duration of a call)."""
        return self.func.__globals__

    # -- source ---------------------------------------------------------------------------
    @property
    def source(self) -> Source:
        if self._source is None:
            self._source = Source.of(self.func)
        return self._source

    @property
    def fdef(self) -> ast.FunctionDef:
        """The function's AST (parsed once)."""
        if self._fdef is None:
            self._fdef = self.source.parse()
        return self._fdef

    # -- calls ------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            if _is_loom(list(args) + list(kwargs.values())):
                return self._operation_outputs(self.parse_call(args, kwargs))
            params = self._emulation_arguments(args, kwargs)
        except HybridSyntaxError as err:
            if debug_tracebacks():
                raise
            raise err.with_traceback(None) from None
        with keywords_injected(self.func.__globals__):
            return self.func(*args, **kwargs) if params is None else self.func(**params)

    def _emulation_arguments(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Optional[dict[str, Any]]:
        """Checked arguments by parameter, or None where Python keeps no source (run the call as it is)."""
        try:
            self.fdef
        except HybridSyntaxError:
            return None
        return self._bind(args, kwargs, compiling=False)

    def parse_call(self, args: Sequence[Any], kwargs: Optional[dict[str, Any]] = None) -> Parsed:
        """The parsed body of a call with these (Loom) arguments; used for calls from other hybrid functions."""
        params = self._bind(args, kwargs or {}, compiling=True)
        closure = inspect.getclosurevars(self.func)
        names = {**closure.builtins, **closure.globals, **closure.nonlocals}
        stack = _ACTIVE.__dict__.setdefault("stack", [])
        stack.append(self)
        try:
            with deep_recursion(f"hybrid function {self.func.__name__}"):  # a long sum is a deep tree
                return HybridParser(self.source, self.fdef, params, names).parse()
        finally:
            stack.pop()

    def is_parsing(self) -> bool:
        """Whether a parse of this function is under way (a call of it now would recurse)."""
        return any(f is self for f in getattr(_ACTIVE, "stack", ()))

    def _operation_outputs(self, parsed: Parsed) -> Any:
        """The output tensor, or a list of them for several outputs (as TVM's hybrid functions return)."""
        op = make_operation(self.func.__name__, parsed)
        outs = [op.output(k) for k in range(op.num_outputs)]
        return outs[0] if len(outs) == 1 else outs

    # -- arguments ----------------------------------------------------------------------------
    def _param_node(self, name: Optional[str]) -> ast.AST:
        for a in self.fdef.args.args:
            if a.arg == name:
                return a
        return self.fdef

    def _bind(self, args: Sequence[Any], kwargs: dict[str, Any], compiling: bool) -> dict[str, Any]:
        """Arguments by parameter, checked for their kind; output parameters may be left out."""
        spec = self.fdef.args
        if spec.vararg or spec.kwarg or spec.kwonlyargs or spec.posonlyargs:
            raise self.source.error(self.fdef, "a hybrid function takes plain positional parameters only "
                                               "(no *args, **kwargs, keyword-only or positional-only ones)")
        sig = inspect.signature(self.func)
        try:
            bound = sig.bind_partial(*args, **kwargs)
        except TypeError as err:
            raise self.source.error(self.fdef, f"bad call of {self.func.__name__}: {err}", HybridArgumentError) \
                from None
        bound.apply_defaults()
        outputs = usage(self.fdef)[1]
        params: dict[str, Any] = {}
        for name in sig.parameters:
            if name not in bound.arguments:
                if name not in outputs:
                    raise self.source.error(self._param_node(name), f"missing argument for parameter {name}",
                                            HybridArgumentError)
                params[name] = None
                continue
            params[name] = self._check(name, bound.arguments[name], compiling, name in outputs)
        return params

    def _check(self, name: str, value: Any, compiling: bool, is_output: bool) -> Any:
        """``value`` as the parameter ``name`` takes it, or an error at the parameter."""
        if is_output:
            return value  # the body declares it with output_tensor; the value is never read
        if compiling:
            if isinstance(value, np.generic):
                value = value.item()
            if isinstance(value, (Tensor, Array, bool, int, float, str)):
                return value
            if isinstance(value, E.PrimExpr) and value.dtype.lanes == 1:
                return value
            if isinstance(value, (list, tuple)):
                try:
                    return convert(value)
                except LoomError:
                    pass
            hint = ("; other arguments are Loom tensors or expressions, so the function is being compiled: pass "
                    "loom.placeholder tensors instead of arrays (or only numpy arrays and numbers to emulate it)"
                    if isinstance(value, np.ndarray) else "")
            raise self.source.error(
                self._param_node(name), f"argument {name} is {describe(value)}; a compiled hybrid function takes "
                f"tensors, scalar expressions (loom.var), numbers, strings and containers (loom.convert([...])){hint}",
                HybridArgumentError)
        if isinstance(value, (np.ndarray, np.generic, bool, int, float, str, list, tuple)):
            return value
        raise self.source.error(
            self._param_node(name), f"argument {name} is {describe(value)}; emulation takes numpy arrays, numbers, "
            f"strings and lists (or Loom tensors and expressions, to compile the function)", HybridArgumentError)


def make_operation(name: str, parsed: Parsed) -> HybridOp:
    """The HybridOp of a parsed body: one axis per loop, outermost first."""
    with deep_recursion(f"hybrid function {name}"):
        loops = te_collect(parsed.body, lambda n: isinstance(n, For))
        axis = [E.IterVar(E.Range(f.min, f.extent), f.loop_var, "data_par") for f in loops]
        return HybridOp(name, parsed.inputs, parsed.outputs, axis, parsed.body)


def script(func: Callable[..., Any]) -> HybridFunction:
    """Make ``func`` a hybrid function (the language: docs/hybrid.md).

    >>> import numpy as np
    >>> import loom
    >>> @loom.hybrid.script
    ... def running_max(a):
    ...     b = output_tensor(a.shape, a.dtype)
    ...     m = a[0]
    ...     for i in range(a.shape[0]):
    ...         m = max(m, a[i])
    ...         b[i] = m
    ...     return b
    >>> running_max(np.array([1, 3, 2, 5], "int32"))
    array([1, 3, 3, 5], dtype=int32)
    >>> B = running_max(loom.placeholder((4,), "int32", name="A"))
    >>> f = loom.build(loom.create_schedule(B.op), [B.op.inputs[0], B], target="interp")
    >>> out = np.zeros(4, "int32"); f(np.array([1, 3, 2, 5], "int32"), out); out
    array([1, 3, 3, 5], dtype=int32)
    """
    return HybridFunction(func)


def parse(func: Any, args: Sequence[Any]) -> HybridOp:
    """The operation a call of the hybrid function ``func`` with ``args`` makes (``tvm.hybrid.parse``).

    >>> import loom
    >>> @loom.hybrid.script
    ... def double(a):
    ...     b = output_tensor(a.shape, a.dtype)
    ...     for i in range(a.shape[0]):
    ...         b[i] = a[i] * 2.0
    ...     return b
    >>> op = loom.hybrid.parse(double, [loom.placeholder((4,), name="A")])
    >>> print(op)
    hybrid double(A) -> (b):
        for i in range(4):
            b[i] = A[i] * 2.0
    """
    hf = func if isinstance(func, HybridFunction) else HybridFunction(func)
    try:
        return make_operation(hf.func.__name__, hf.parse_call(list(args)))
    except HybridSyntaxError as err:
        if debug_tracebacks():
            raise
        raise err.with_traceback(None) from None
