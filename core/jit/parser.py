"""The body of a ``@loom.jit`` kernel: hybrid script whose outputs are parameters it writes.

A kernel differs from a ``@loom.hybrid.script`` function in one way: it does not
declare and return its outputs (``output_tensor`` and ``return``), it writes
into tensor parameters that the caller allocates, as in TileLang and seed 001.
Everything else, including the error messages that point at the user's line,
is the hybrid parser's.
"""

from __future__ import annotations

import ast
from typing import Any

from ..hybrid.calls import NewTensor
from ..hybrid.errors import Source
from ..hybrid.parser import HybridParser, Parsed

__all__ = ["KernelParser", "parse_kernel"]


class KernelParser(HybridParser):
    """Parses a kernel body; ``params`` maps parameters to placeholders, Vars and static values."""

    def __init__(self, src: Source, fdef: ast.FunctionDef, params: dict[str, Any], closure: dict[str, Any]) -> None:
        super().__init__(src, fdef, params, closure)
        self.outputs = []  # written parameters are the outputs; nothing is returned

    def parse(self) -> Parsed:
        body = self.block(self.fdef.body, top=True)
        return Parsed(body, [], self.inputs)

    def visit_Return(self, node: ast.Return) -> Any:
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            raise self.error(node, "a loom.jit kernel returns nothing: it writes its results into tensor "
                                   "parameters that the caller allocates")
        return None

    def assign_name(self, target: ast.Name, value: Any, node: ast.Assign) -> Any:
        if isinstance(value, NewTensor) and value.role == "output":
            raise self.error(node, "output_tensor is not part of loom.jit kernels: declare the output as a tensor "
                                   "parameter (T.Tensor[...]) and write into it; allocate scratch memory with "
                                   "T.alloc_local / T.alloc_shared")
        return super().assign_name(target, value, node)


def parse_kernel(src: Source, fdef: ast.FunctionDef, params: dict[str, Any], closure: dict[str, Any]) -> Parsed:
    """The parsed body of a kernel for one set of prim-func arguments."""
    return KernelParser(src, fdef, params, closure).parse()
