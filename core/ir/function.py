"""Functions and modules: ``PrimFunc``, ``GlobalVar`` and ``IRModule``.

>>> import loom
>>> from loom.ir import PrimFunc, IRModule, BufferStore
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> f = PrimFunc([A.data], BufferStore(A, loom.const(1.0), [0]), buffer_map={A.data: A})
>>> mod = IRModule({"main": f}); list(mod.functions)
['main']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator, Optional

from ..errors import IRError, LoomValueError
from .buffer import Buffer
from . import expr as E
from .node import Converted, DictOf, Node, TupleOf, child, children, mapping, register_object, value
from .stmt import Stmt

__all__ = ["PrimFunc", "GlobalVar", "IRModule"]


@register_object("ir.GlobalVar")
class GlobalVar(Node):
    """The name of a function in an IRModule (the callee of a global ``Call``)."""

    name_hint: str = value(str)


@register_object("tir.PrimFunc")
class PrimFunc(Node):
    """A low-level function: parameters, the buffers behind handle parameters, a body.

    ``buffer_map`` maps a ``handle`` parameter to the :class:`Buffer` it points
    to; the generated code checks each argument against that buffer.
    ``attrs`` holds function attributes (``global_symbol``, ``target``,
    ``restricted``...).
    """

    params: TupleOf[E.Var] = children(E.Var, binds=True)
    body: Stmt = child(Stmt)
    ret_type: str = value(str, default="int32")
    buffer_map: DictOf[E.Var, Buffer] = mapping(binds=True)
    attrs: DictOf[str, Any] = mapping()

    def __attrs_post_init__(self) -> None:
        for v, b in self.buffer_map.items():
            if not isinstance(v, E.Var) or not isinstance(b, Buffer):
                raise IRError("PrimFunc.buffer_map must map Var parameters to Buffers")
            if not any(v is p for p in self.params):
                raise IRError(f"PrimFunc.buffer_map names {v.name}, which is not a parameter")

    def with_attr(self, key: str, val: Any) -> PrimFunc:
        """A copy with one more (or one changed) attribute."""
        return self.with_(attrs={**self.attrs, key: val})

    def with_body(self, body: Stmt) -> PrimFunc:
        return self.with_(body=body)


def _functions(v: Any) -> Any:
    if isinstance(v, dict):
        return {(k.name_hint if isinstance(k, GlobalVar) else k): f for k, f in v.items()}
    return v


@register_object("ir.IRModule")
class IRModule(Node):
    """A set of named functions (``name -> PrimFunc``) with module attributes.

    ``mod["main"]`` reads a function; ``mod.update(name, func)`` returns a new
    module with it added or replaced.
    """

    functions: Converted[dict[str, Node], Optional[Mapping[Any, Node]]] = mapping()  # str or GlobalVar keys
    attrs: DictOf[str, Any] = mapping()

    def __attrs_post_init__(self) -> None:
        for k, f in _functions(self.functions).items():
            if not isinstance(k, str):
                raise IRError(f"IRModule function names must be str, got {type(k).__name__}")
            if not isinstance(f, Node):
                raise IRError(f"IRModule function {k!r} is a {type(f).__name__}, not a node")
        object.__setattr__(self, "functions", _functions(self.functions))

    def __getitem__(self, name: str | GlobalVar) -> Node:
        key = name.name_hint if isinstance(name, GlobalVar) else name
        try:
            return self.functions[key]
        except KeyError:
            raise LoomValueError(f"IRModule has no function {key!r}; it has {sorted(self.functions)}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.functions

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def items(self):
        return self.functions.items()

    @property
    def body(self) -> Any:
        """The body of the module's one function: what TVM 0.6's ``lower(..., simple_mode=True)`` returned.

        >>> import loom
        >>> A = loom.placeholder((4,), name="A")
        >>> B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
        >>> type(loom.lower(loom.create_schedule(B.op), [A, B], simple_mode=True).body).__name__
        'For'
        """
        if len(self.functions) != 1:
            raise LoomValueError(f"IRModule.body is the body of a module's one function; this one has "
                                 f"{sorted(self.functions)}: use mod[name].body")
        return getattr(next(iter(self.functions.values())), "body")

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self.functions:
            raise LoomValueError(f"IRModule has no function {name!r}")
        return GlobalVar(name)

    def update(self, name: str, func: Node) -> IRModule:
        return self.with_(functions={**self.functions, name: func})

    @staticmethod
    def from_expr(func: PrimFunc, name: str | None = None) -> IRModule:
        """Wrap one function (named by its ``global_symbol`` or ``main``)."""
        key = name or func.attrs.get("global_symbol") or "main"
        return IRModule({str(key): func})
