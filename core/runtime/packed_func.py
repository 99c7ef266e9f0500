"""``PackedFunc``: a function as a first-class object (TVM's ``tvm.Function``).

``loom.convert(f)`` of a Python callable, :func:`loom.get_global_func` and
``module["name"]`` all give a :class:`PackedFunc`.  Calling one from Python
converts its arguments and its result the way a value crosses a packed call:

* a Python callable becomes a :class:`PackedFunc` (a PackedFunc stays itself),
  so a function passed to, or returned from, a packed function is one;
* a list, tuple or dict becomes a Loom ``Array`` / ``Map`` (:func:`loom.convert`);
* a numpy scalar becomes the Python ``int``, ``float`` or ``bool`` of its value;
* anything else (Python scalars, str, bytes, bytearray, None, nodes, NDArrays,
  numpy arrays, other objects) passes unchanged: the call stays in this process.

A kernel's ``call_packed`` runs the wrapped callable directly (:attr:`PackedFunc.func`),
with the arguments as :mod:`loom.runtime.packed` describes them.

>>> import loom
>>> def addy(y):
...     def add(x):
...         return loom.convert(x + y)
...     return add
>>> myf = loom.convert(addy)
>>> f = myf(10)
>>> type(f).__name__, f(11).value
('PackedFunc', 21)
>>> loom.convert(lambda ss: len(ss))(())  # a tuple arrives as an Array
0
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import LoomTypeError

__all__ = ["PackedFunc", "to_packed_value"]


class PackedFunc:
    """A callable that converts its arguments and result as a packed call does (module docstring).

    Wrap a Python callable with ``loom.convert(f)`` or ``PackedFunc(f, name)``;
    ``module["name"]`` is the subclass that runs a compiled function.

    >>> f = PackedFunc(lambda a, b: a + b, "add")
    >>> f.name, f(1, 2), f
    ('add', 3, <loom.runtime.PackedFunc add>)
    """

    __slots__ = ("name", "_func")
    name: str

    def __init__(self, func: Callable[..., Any], name: str | None = None) -> None:
        if not callable(func):
            raise LoomTypeError(f"PackedFunc needs a callable, got {type(func).__name__}")
        if type(func) is PackedFunc:  # no wrapper of a wrapper
            name = name or func.name
            func = func.func
        self._func = func
        self.name = name or getattr(func, "__name__", None) or type(func).__name__

    @property
    def func(self) -> Callable[..., Any]:
        """What a kernel's ``call_packed`` runs: the wrapped callable, with no conversion."""
        return self._func

    def __call__(self, *args: Any) -> Any:
        conv = [to_packed_value(a, self.name, f"argument {k}") for k, a in enumerate(args)]
        return to_packed_value(self._func(*conv), self.name, "the result")

    def __repr__(self) -> str:
        return f"<loom.runtime.PackedFunc {self.name}>"


def to_packed_value(value: Any, name: str = "<function>", what: str = "a value") -> Any:
    """``value`` as it crosses a packed call from Python (see the module docstring).

    :raises LoomTypeError: naming the function and ``what`` when a list, tuple or dict holds
        something that is not convertible to a node.

    >>> type(to_packed_value([1, 2])).__name__, to_packed_value(np.float32(0.5)), to_packed_value(np.int64(3))
    ('Array', 0.5, 3)
    """
    from ..ir.node import Node

    if isinstance(value, np.generic):  # before int/float: np.float64 is a float
        return value.item()
    if value is None or isinstance(value, (Node, PackedFunc, bool, int, float, str, bytes, bytearray, np.ndarray)):
        return value
    if isinstance(value, (list, tuple, dict)):
        from ..ir.container import convert

        try:
            return convert(value)
        except LoomTypeError as err:
            raise LoomTypeError(f"packed function {name!r}: {what} ({type(value).__name__}) cannot cross a packed "
                                f"call: {err}") from None
    if callable(value) and not hasattr(value, "as_node"):
        return PackedFunc(value)
    return value
