"""A kernel's signature read through its annotations: :class:`FuncAnnot` (seed 001).

Each parameter gets an :class:`~loom.language.annot.Annot`: its annotation when
it has one Loom understands, ``Value(static)`` with a type check for ``int``,
``float``, ``bool`` and ``str``, and otherwise one inferred from the argument
at each call (an array is a bare ``T.Tensor``, a dtype a ``T.dtype``, anything
else a static value); what was inferred is part of the key.

>>> import inspect
>>> import numpy as np
>>> import loom.language as T
>>> def k(A: T.Tensor[("N",), "float32"], n: T.dyn["N"], scale: float = 2.0): ...
>>> fa = FuncAnnot.from_sig_annots(inspect.signature(k), inspect.get_annotations(k, eval_str=True))
>>> fa.ker_arg_names, fa.get_compile_time_unknown_args(), list(fa.get_all_static_args())
(['A', 'n'], ['A', 'n'], ['scale'])
>>> a = np.zeros(4, "float32")
>>> fa.parse_key(a, 4), fa.parse_key(a, 4, scale=3.0)
((None, None, ('float', 2.0)), (None, None, ('float', 3.0)))
>>> [type(x).__name__ for x in fa.convert_to_kernel_args(a, 4)]
['ndarray', 'int']
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir.buffer import Buffer as IRBuffer
from .annot import Annot, ArgVarTable, DTypeAnnot, DynAnnot, Value, _is_dtype_like, static_key
from .arrays import array_facts, is_array
from .buffer_annot import Buffer, BufferAnnot, TensorAnnot, TIRAnnot
from .dtypes import normalize_dtype

__all__ = ["FuncAnnot", "infer_annot", "infer_key"]

_PYTHON_STATIC = (int, float, bool, str)


def infer_annot(name: str, value: Any) -> Annot:
    """The annotation an unannotated parameter takes from its argument."""
    if is_array(value):
        return TensorAnnot(name=name)
    if isinstance(value, E.Var):
        return Value.from_value(value, name)
    if not isinstance(value, str) and _is_dtype_like(value):
        return DTypeAnnot(name)
    return Value.from_value(value, name)


def infer_key(name: str) -> Callable[[Any], Any]:
    """The key parser of an unannotated parameter: what it was inferred as, and that annotation's key."""
    where = f"parameter {name}"

    def parse(value: Any) -> Any:
        if is_array(value):
            return ("tensor", *array_facts(value, where))
        if isinstance(value, E.Var):
            return ("var", str(value.dtype))
        if not isinstance(value, str) and _is_dtype_like(value):
            return ("dtype", str(normalize_dtype(value, where)))
        return ("static", static_key(value, f"static {where}"))

    return parse


def _annotation(raw: Any, name: str) -> Optional[Annot]:
    """The Annot of one parameter's annotation (None: inferred from each call's argument)."""
    if raw is inspect.Parameter.empty or raw is None:
        return None
    if isinstance(raw, str):
        raise LoomTypeError(f"parameter {name}: the annotation {raw!r} is a string; pass evaluated annotations "
                            f"(inspect.get_annotations(func, eval_str=True))")
    if isinstance(raw, BufferAnnot) and not raw.is_kernel_arg():
        raise LoomTypeError(f"parameter {name} is annotated {type(raw).__name__.replace('Annot', '')}: on-chip "
                            f"buffers are never kernel arguments; allocate one in the body (T.alloc_shared, "
                            f"T.alloc_local, T.alloc_fragment) or annotate the parameter T.Tensor[...]")
    if isinstance(raw, Annot):
        return raw.with_name(name)
    if raw is Buffer:
        return TensorAnnot(name=name)
    if isinstance(raw, (IRBuffer, E.Var)):
        return TIRAnnot(raw, name)
    if raw in _PYTHON_STATIC:
        return Value("static", name, python_type=raw)
    return None  # another type hint (np.ndarray, a typing construct): read from the argument


class FuncAnnot:
    """The annotations of a kernel's parameters, and the cache key and kernel arguments of a call.

    :attr:`annots` maps each parameter to its Annot, or None where it is inferred
    per call; :attr:`arg_parser` to its key parser; :attr:`ker_arg_names` lists
    the annotated parameters passed to the compiled kernel.
    """

    def __init__(self, sig: inspect.Signature, arg_names: list[str], annots: dict[str, Optional[Annot]],
                 arg_parser: dict[str, Callable[[Any], Any]], ker_arg_names: list[str]) -> None:
        self.sig, self.arg_names, self.annots = sig, arg_names, annots
        self.arg_parser, self.ker_arg_names = arg_parser, ker_arg_names
        self.defaults = tuple(p.default for p in sig.parameters.values())
        # Parsers in parameter order: the per-call key is one pass over the arguments.
        self.parsers = tuple(arg_parser[n] for n in arg_names)

    @classmethod
    def from_sig_annots(cls, sig: inspect.Signature, func_annots: Mapping[str, Any]) -> FuncAnnot:
        names: list[str] = []
        annots: dict[str, Optional[Annot]] = {}
        for name, param in sig.parameters.items():
            if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.POSITIONAL_ONLY):
                raise LoomTypeError(f"parameter {name}: a kernel takes plain parameters (no *args, **kwargs or "
                                    f"keyword-only ones)")
            annot = _annotation(func_annots.get(name, inspect.Parameter.empty), name)
            if annot is not None:
                annot = annot.promote() or annot
                if isinstance(annot, TIRAnnot) and annot.name is None:
                    annot = annot.with_name(name)
            names.append(name)
            annots[name] = annot
        parsers = {n: a.get_key_parser() if a is not None else infer_key(n) for n, a in annots.items()}
        ker = [n for n, a in annots.items() if a is not None and a.is_kernel_arg()]
        return cls(sig, names, annots, parsers, ker)

    # -- arguments -------------------------------------------------------------------------------
    def bind(self, args: Sequence[Any], kws: Mapping[str, Any], kernel: str = "kernel") -> tuple[Any, ...]:
        """The arguments in parameter order, defaults filled in (they are part of the key)."""
        if not kws and len(args) == len(self.arg_names):
            return tuple(args)
        try:
            bound = self.sig.bind(*args, **kws)
        except TypeError as err:
            raise LoomTypeError(f"{kernel}(): {err}") from None
        bound.apply_defaults()
        return tuple(bound.arguments[n] for n in self.arg_names)

    def annot_of(self, name: str, value: Any) -> Annot:
        """The parameter's annotation, or the one inferred from ``value``."""
        annot = self.annots[name]
        return annot if annot is not None else infer_annot(name, value)

    def parse_key(self, *args: Any, **kws: Any) -> tuple[Any, ...]:
        """The arguments' part of the JIT cache key: one entry per parameter (None: nothing)."""
        values = self.bind(args, kws)
        return tuple(parse(v) for parse, v in zip(self.parsers, values))

    def kernel_arg_names(self, values: Sequence[Any]) -> list[str]:
        """The parameters passed to the compiled kernel for a call with ``values`` (inferred ones included)."""
        return [n for n, v in zip(self.arg_names, values) if self.annot_of(n, v).is_kernel_arg()]

    def convert_to_kernel_args(self, *args: Any, **kws: Any) -> list[Any]:
        """The compiled kernel's arguments: the values of the kernel-argument parameters, in order."""
        values = self.bind(args, kws)
        return [v for n, v in zip(self.arg_names, values) if self.annot_of(n, v).is_kernel_arg()]

    def create_argument(self, name: str, value: Any, vt: ArgVarTable) -> Any:
        """The prim func's argument of parameter ``name`` for ``value``: a Buffer, a Var or a static value."""
        return self.annot_of(name, value).create_prim_func_arg(name, value, vt)

    def prim_func_arguments(self, values: Sequence[Any]) -> tuple[ArgVarTable, dict[str, Any]]:
        """Every parameter's prim-func argument; static values first, so shape names can refer to them."""
        vt = ArgVarTable()
        annots = {n: self.annot_of(n, v) for n, v in zip(self.arg_names, values)}
        for (n, a), v in zip(annots.items(), values):
            if not a.is_kernel_arg():
                vt.static[n] = a.create_prim_func_arg(n, v, vt)
        # T.dyn scalars before tensors: a size named "N" takes the dtype of a T.dyn[int64, "N"] parameter.
        made = {n: a.create_prim_func_arg(n, v, vt) for (n, a), v in zip(annots.items(), values)
                if isinstance(a, Value) and n not in vt.static}
        out = {n: vt.static[n] if n in vt.static else made[n] if n in made else a.create_prim_func_arg(n, v, vt)
               for (n, a), v in zip(annots.items(), values)}
        return vt, out

    def check_values(self, values: Sequence[Any], kernel: str) -> None:
        """Check a call's arguments against the annotations (before compiling for them)."""
        vt = ArgVarTable()
        annots = [self.annot_of(n, v) for n, v in zip(self.arg_names, values)]
        for n, v, annot in zip(self.arg_names, values, annots):
            if not annot.is_kernel_arg():
                vt.static[n] = v if not isinstance(annot, DTypeAnnot) else str(normalize_dtype(v))
        for n, v, annot in zip(self.arg_names, values, annots):
            annot.check_value(v, f"{kernel}: parameter {n}", vt)
        for n, v, annot in zip(self.arg_names, values, annots):  # a T.dyn["N"] must agree with the sizes named N
            if isinstance(annot, DynAnnot) and annot.name in vt.bound and isinstance(v, (int, np.integer)) \
                    and int(v) != vt.bound[annot.name]:
                raise LoomTypeError(f"{kernel}: parameter {n} is {annot.name}={v}, but the arrays give "
                                    f"{annot.name}={vt.bound[annot.name]}")

    # -- kinds ---------------------------------------------------------------------------------------
    def is_all_static(self) -> bool:
        """Whether every argument is known at compile time (no tensors, no runtime scalars)."""
        return all(a is not None and not a.is_kernel_arg() for a in self.annots.values())

    def get_all_static_args(self) -> dict[str, Annot]:
        """The annotated static parameters (compiled in), by name."""
        return {n: a for n, a in self.annots.items() if a is not None and not a.is_kernel_arg()}

    def get_compile_time_unknown_args(self) -> list[str]:
        """The annotated parameters whose values only the call knows (tensors and runtime scalars)."""
        return list(self.ker_arg_names)

    def describe(self, name: str, value: Any, part: Any) -> str:
        """A parameter's key part in words."""
        annot = self.annots[name]
        if annot is None:
            kind = part[0]
            inferred = infer_annot(name, value)
            shown = inferred.describe_key((part[1], part[2]) if kind == "tensor" else part[1])
            return f"{shown} (inferred: no annotation)"
        return annot.describe_key(part)

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}: {a!r}" if a is not None else n for n, a in self.annots.items())
        return f"FuncAnnot({shown})"

