"""``EnvFunc``: an IR node naming a global function (:func:`loom.register_func`).

IR that must refer to Python code (a rewrite rule's callback, a custom
lowering hook) holds an ``EnvFunc``: it stores only the name, so it prints,
saves with ``loom.save_json`` and compares structurally (two EnvFuncs are
equal when their names are), and calling it runs whatever function is
registered under the name at that moment.

>>> import loom
>>> from loom.runtime.registry import register_func, remove_global_func
>>> _ = register_func("doc.env.square", lambda x: x * x)
>>> f = EnvFunc.get("doc.env.square")
>>> f(7), loom.structural_equal(loom.load_json(loom.save_json(f)), f)
(49, True)
>>> remove_global_func("doc.env.square")
"""

from __future__ import annotations

from typing import Any, Callable

from .node import Node, register_object, value

__all__ = ["EnvFunc"]


@register_object("ir.EnvFunc")
class EnvFunc(Node):
    """The global function ``name``, looked up whenever the node is called.

    >>> EnvFunc("any.name").name  # the constructor checks nothing; EnvFunc.get checks the name is registered
    'any.name'
    """

    name: str = value(str)

    @staticmethod
    def get(name: str) -> EnvFunc:
        """The EnvFunc of the registered global function ``name``.

        :raises loom.runtime.registry.GlobalFuncError: when no function is registered under ``name``.
        """
        from ..runtime.registry import get_global_func  # the runtime imports the IR: import on use

        get_global_func(name)
        return EnvFunc(name)

    @property
    def func(self) -> Callable[..., Any]:
        """The function registered under :attr:`name` now (an error when there is none)."""
        from ..runtime.registry import lookup

        return lookup(self.name)

    def __call__(self, *args: Any) -> Any:
        """Call the registered function with ``args``."""
        return self.func(*args)
