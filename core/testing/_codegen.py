"""Closure factories: one closure per IR node, with its leaf operands inlined.

Every compiled node becomes a :class:`Code`: a closure ``fn(frame) -> value``
plus, for leaves, the constant it stands for or the frame slot it reads.  A
parent node is built from a small source template in which ``{0}``, ``{1}``...
are its operands.  A constant operand is inlined as a closure variable, a
variable as ``f[slot]`` and anything else as a call ``o1(f)``, so ``x + 1``
runs as a single closure with no nested calls.

Each distinct template is ``exec``-ed once into a *factory* (cached by its
source text); building a node only calls the factory with the operands.

>>> c = lambda_("{0} + {1}", [Code.of_slot(0), Code.of_const(2)])
>>> c.fn([40])
42
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable, Sequence

__all__ = ["Code", "lambda_", "function", "plain"]

_NO_CONST: Any = object()
_FACTORIES: dict[str, Callable[..., Any]] = {}


class Code:
    """A compiled expression or statement."""

    __slots__ = ("fn", "const", "slot")

    def __init__(self, fn: Callable[[list], Any], const: Any = _NO_CONST, slot: int | None = None) -> None:
        self.fn = fn
        self.const = const
        self.slot = slot

    @staticmethod
    def of_const(value: Any) -> Code:
        return Code(lambda f: value, const=value)

    @staticmethod
    def of_slot(slot: int) -> Code:
        return Code(lambda f: f[slot], slot=slot)

    @property
    def is_const(self) -> bool:
        return self.const is not _NO_CONST


def _operands(operands: Sequence[Code]) -> tuple[list[str], list[Any]]:
    texts, values = [], []
    for i, code in enumerate(operands):
        if code.is_const:
            texts.append(f"o{i}")
            values.append(code.const)
        elif code.slot is not None:
            texts.append(f"f[o{i}]")
            values.append(code.slot)
        else:
            texts.append(f"o{i}(f)")
            values.append(code.fn)
    return texts, values


def _build(head: str, body: str, names: list[str], values: list[Any]) -> Any:
    src = f"def _factory({', '.join(names)}):\n{head}{body}"
    factory = _FACTORIES.get(src)
    if factory is None:
        namespace: dict[str, Any] = {}
        exec(compile(src, "<loom.testing closure>", "exec"), {}, namespace)  # noqa: S102 - our own templates
        factory = _FACTORIES[src] = namespace["_factory"]
    return factory(*values)


def _names(operands: Sequence[Code], env: dict[str, Any]) -> tuple[list[str], list[str], list[Any]]:
    texts, values = _operands(operands)
    keys = sorted(env)
    return texts, [f"o{i}" for i in range(len(operands))] + keys, values + [env[k] for k in keys]


def lambda_(template: str, operands: Sequence[Code], **env: Any) -> Code:
    """A closure ``lambda f: <template>``; ``env`` names are closure constants (UPPER case)."""
    texts, names, values = _names(operands, env)
    return Code(_build("    return lambda f: ", template.format(*texts) + "\n", names, values))


def function(template: str, operands: Sequence[Code], **env: Any) -> Code:
    """A closure ``def run(f): <template>`` (a multi-line body; ``return`` gives the value)."""
    texts, names, values = _names(operands, env)
    body = textwrap.indent(textwrap.dedent(template).strip("\n").format(*texts), " " * 8)
    return Code(_build("    def run(f):\n", body + "\n    return run\n", names, values))


def plain(template: str, arity: int, **env: Any) -> Callable[..., Any]:
    """A plain function ``lambda a, b: <template>`` of ``arity`` values (for lane-wise loops)."""
    args = "abcd"[:arity]
    keys = sorted(env)
    src = template.format(*args)
    return _build(f"    return lambda {', '.join(args)}: ", src + "\n", keys, [env[k] for k in keys])
