"""``loom.tag_scope``: a default tag for the operations created inside it (TVM's ``tvm.tag_scope``).

Operator libraries tag their computes (``"injective"``, ``"conv2d_nchw"``) so
that schedules can dispatch on ``op.tag``; a scope saves passing ``tag=`` to
every ``compute``.  It works as a ``with`` block and as a decorator; scopes do
not nest (an operator tagged twice has no single tag), and an explicit
``tag=`` wins.

>>> import loom
>>> A = loom.placeholder((4,), name="A")
>>> with loom.tag_scope("elemwise"):
...     B = loom.compute((4,), lambda i: A[i] * 2.0, name="B")
>>> B.op.tag
'elemwise'
>>> @loom.tag_scope(tag="plus_one")
... def plus_one(x):
...     return loom.compute(x.shape, lambda i: x[i] + 1.0)
>>> plus_one(A).op.tag
'plus_one'
"""

from __future__ import annotations

import contextvars
import functools
from typing import Any, Callable, TypeVar

from ..errors import LoomValueError

__all__ = ["tag_scope", "current_tag"]

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("loom_tag_scope", default=None)
_F = TypeVar("_F", bound=Callable[..., Any])


def current_tag() -> str:
    """The tag of the innermost open :class:`tag_scope`, or ``""``."""
    return _CURRENT.get() or ""


class tag_scope:  # noqa: N801 (TVM's name; used as a context manager and a decorator)
    """Tag every ``compute`` and ``extern`` created inside with ``tag`` (unless they pass their own).

    :raises LoomValueError: (a ``ValueError``) when opened inside another tag scope.
    """

    def __init__(self, tag: str) -> None:
        if not isinstance(tag, str):
            raise LoomValueError(f"tag_scope: the tag must be a string, got {type(tag).__name__}")
        self.tag = tag
        self._tokens: list[contextvars.Token] = []

    def __enter__(self) -> tag_scope:
        outer = _CURRENT.get()
        if outer is not None:
            raise LoomValueError(f"tag_scope({self.tag!r}) opened inside tag_scope({outer!r}): tag scopes do not "
                                 "nest, an operation has one tag")
        self._tokens.append(_CURRENT.set(self.tag))
        return self

    def __exit__(self, *exc: Any) -> None:
        _CURRENT.reset(self._tokens.pop())

    def __call__(self, fdecl: _F) -> _F:
        @functools.wraps(fdecl)
        def tagged(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fdecl(*args, **kwargs)

        return tagged  # type: ignore[return-value]
